"""An id of another repository with the same architecture (an instruct fine-tune, a base/instruct twin) builds
the bundled config it names, and that build has the alias's own published parameter count and class: an alias
pointed at the wrong base (another size, another vocabulary) fails here."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers import AutoConfig

import vramsim
from vramsim import model_zoo

# (alias, Auto class, class, the alias's own published count). "Hub total" is the Hub's safetensors total of the
# alias repository as public catalogs quote it (kvfit's registry, model-zoo audits); tied weights once.
ALIASES = [
    ("meta-llama/Llama-2-7b-chat-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 6_738_415_616),  # GGUF metadata
    ("meta-llama/Llama-2-70b-chat-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 68_976_648_192),  # Hub total
    ("meta-llama/Meta-Llama-3-70B-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 70_553_706_496),  # Hub total
    ("meta-llama/Llama-3.1-8B-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 8_030_261_248),  # Hub total
    ("meta-llama/Llama-3.2-3B-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 3_212_749_824),  # Hub total
    (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "AutoModelForImageTextToText",
        "Llama4ForConditionalGeneration",
        108_641_793_536,  # Hub total
    ),
    ("google/gemma-2-2b-it", "AutoModelForCausalLM", "Gemma2ForCausalLM", 2_614_341_888),  # Hub total
    ("google/gemma-2-9b-it", "AutoModelForCausalLM", "Gemma2ForCausalLM", 9_241_705_984),  # Hub total
    ("google/gemma-2-27b-it", "AutoModelForCausalLM", "Gemma2ForCausalLM", 27_227_128_320),  # Hub total
    ("mistralai/Mistral-Nemo-Instruct-2407", "AutoModelForCausalLM", "MistralForCausalLM", 12_247_782_400),  # Hub total
    # Mixtral paper / announcement: 46.7B total for Mixtral 8x7B Instruct as for the base.
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "AutoModelForCausalLM", "MixtralForCausalLM", "46.7B"),
    ("Qwen/Qwen2.5-7B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 7_615_616_512),  # Hub total
    ("Qwen/Qwen2.5-72B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 72_706_203_648),  # Hub total
    ("Qwen/Qwen2.5-14B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 14_770_033_664),  # GGUF metadata
    ("Qwen/Qwen2.5-32B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 32_763_876_352),  # KerasHub preset
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "AutoModelForCausalLM", "DeepseekV2ForCausalLM", 15_706_484_224),  # Hub total
    ("Qwen/Qwen2.5-3B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 3_085_938_688),  # GGUF / loaded counts
    ("allenai/OLMo-2-1124-7B-Instruct", "AutoModelForCausalLM", "Olmo2ForCausalLM", 7_298_617_344),  # Hub total
    ("HuggingFaceTB/SmolLM2-135M-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 134_515_008),  # GGUF metadata
    ("HuggingFaceTB/SmolLM2-360M", "AutoModelForCausalLM", "LlamaForCausalLM", 361_821_120),  # a public scale panel
    ("HuggingFaceTB/SmolLM2-1.7B", "AutoModelForCausalLM", "LlamaForCausalLM", "1.7B"),  # model card
    ("HuggingFaceTB/SmolLM3-3B-Base", "AutoModelForCausalLM", "SmolLM3ForCausalLM", 3_075_098_624),  # loaded count
]


def _built(model_id: str, auto_class: str) -> torch.nn.Module:
    folder = model_zoo.find(model_id)
    assert folder is not None, f"{model_id} resolves to no bundled config"
    with torch.device("meta"):
        return getattr(transformers, auto_class).from_config(AutoConfig.from_pretrained(folder))


@pytest.mark.parametrize(("alias", "auto_class", "model_class", "published"), ALIASES, ids=[a[0] for a in ALIASES])
def test_alias_builds_its_own_published_count(alias: str, auto_class: str, model_class: str, published: int | str) -> None:
    model = _built(alias, auto_class)
    assert type(model).__name__ == model_class
    count = sum(p.numel() for p in model.parameters())
    if isinstance(published, int):
        assert count == published
    else:
        assert f"{count / 1e9:.1f}B" == published


def test_every_alias_names_a_bundled_model_and_none_is_bundled_itself() -> None:
    bundled = set(model_zoo.model_ids())
    assert set(model_zoo.SAME_ARCHITECTURE.values()) <= bundled
    assert not set(model_zoo.SAME_ARCHITECTURE) & bundled
    assert not set(model_zoo.SAME_ARCHITECTURE) & set(model_zoo.ALIASES)


def test_config_of_names_the_bundled_id_only_for_another_repository() -> None:
    assert model_zoo.config_of("meta-llama/Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B"
    assert model_zoo.config_of("meta-llama/Llama-3.1-8B") is None
    assert model_zoo.config_of("gpt2") is None  # a legacy id is the same repository
    assert model_zoo.config_of("no-such/model") is None


def test_report_says_which_config_an_alias_used() -> None:
    report = vramsim.simulate("meta-llama/Llama-3.2-1B-Instruct", task="generate", seq_len=8, max_new_tokens=1, device="h100")
    assert report.model == "meta-llama/Llama-3.2-1B-Instruct"
    assert report.config_of == "meta-llama/Llama-3.2-1B"
    assert report.parameters == 1_235_814_400
    assert "meta-llama/Llama-3.2-1B-Instruct (config of meta-llama/Llama-3.2-1B, same architecture)" in vramsim.report_text(
        report, width=200
    )
