"""Every bundled config must build, on the meta device, exactly the parameter count its publisher reports.

A wrong hidden size, head_dim, vocabulary or tie flag in a zoo config.json would silently skew every memory
prediction vramsim makes for that model; an exact integer match against the published figure catches it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import transformers
from transformers import AutoConfig

from vramsim import model_zoo


@dataclass(frozen=True)
class Published:
    """A published parameter count and the transformers class whose weights it counts."""

    model_id: str
    auto_class: str  # the Auto class that builds `model_class` from the config
    model_class: str
    count: int
    buffers: int = 0  # persistent buffers the checkpoint stores as weights; included in `count`


# "Hub safetensors total" is the exact parameter count the Hugging Face Hub shows for the model's safetensors
# (rounded on the page, e.g. "8.03B params"; exact in the file metadata). Tied weights are stored once.
CASES = [
    # Hub safetensors total; model card: 8B.
    Published("meta-llama/Llama-3.1-8B", "AutoModelForCausalLM", "LlamaForCausalLM", 8_030_261_248),
    # Hub safetensors total; model card: 70B.
    Published("meta-llama/Llama-3.1-70B", "AutoModelForCausalLM", "LlamaForCausalLM", 70_553_706_496),
    # Hub safetensors total (BF16 weights); model card: 405B.
    Published("meta-llama/Llama-3.1-405B", "AutoModelForCausalLM", "LlamaForCausalLM", 405_853_388_800),
    # Hub safetensors total ("13B"): 40 layers x 317,204,480 + embeddings and head 2 x 163,840,000 + norm 5,120.
    Published("meta-llama/Llama-2-13b-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 13_015_864_320),
    # Hub safetensors total ("1.24B"); the embedding is tied to the LM head.
    Published("meta-llama/Llama-3.2-1B", "AutoModelForCausalLM", "LlamaForCausalLM", 1_235_814_400),
    # Hub safetensors total ("3.21B"); the embedding is tied to the LM head.
    Published("meta-llama/Llama-3.2-3B", "AutoModelForCausalLM", "LlamaForCausalLM", 3_212_749_824),
    # Hub safetensors total ("7.24B"); Mistral's announcement: 7.3B.
    Published("mistralai/Mistral-7B-v0.1", "AutoModelForCausalLM", "MistralForCausalLM", 7_241_732_096),
    # Hub safetensors total; Mixtral paper / announcement: 46.7B total, 12.9B active per token.
    Published("mistralai/Mixtral-8x7B-v0.1", "AutoModelForCausalLM", "MixtralForCausalLM", 46_702_792_704),
    # Hub safetensors total; model card: 0.49B (tied embeddings).
    Published("Qwen/Qwen2.5-0.5B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 494_032_768),
    # Hub safetensors total; model card: 7.61B.
    Published("Qwen/Qwen2.5-7B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 7_615_616_512),
    # Hub safetensors total; model card: 72.7B.
    Published("Qwen/Qwen2.5-72B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 72_706_203_648),
    # Hub safetensors total; model card: 8.2B.
    Published("Qwen/Qwen3-8B", "AutoModelForCausalLM", "Qwen3ForCausalLM", 8_190_735_360),
    # Hub safetensors total ("9.24B"); embedding tied to the LM head.
    Published("google/gemma-2-9b", "AutoModelForCausalLM", "Gemma2ForCausalLM", 9_241_705_984),
    # Hub safetensors total ("27.2B"); embedding tied to the LM head.
    Published("google/gemma-2-27b", "AutoModelForCausalLM", "Gemma2ForCausalLM", 27_227_128_320),
    # Hub safetensors total ("3.82B"); model card: 3.8B.
    Published("microsoft/Phi-3-mini-4k-instruct", "AutoModelForCausalLM", "Phi3ForCausalLM", 3_821_079_552),
    # Model card: "685B ... includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP)
    # Module weights". transformers builds the main model only (layers 0-60, no MTP layer 61), so the figure is
    # the main model's: the checkpoint's tensors outside model.layers.61, without the FP8 weight_scale_inv
    # tensors, = 671,026,419,200. Of those, 58 MoE layers x 256 = 14,848 are the router's
    # e_score_correction_bias, which transformers keeps as a persistent buffer (it is stored in the checkpoint
    # and occupies memory, but is not an nn.Parameter), so parameters() alone gives 671,026,404,352.
    Published("deepseek-ai/DeepSeek-V3", "AutoModelForCausalLM", "DeepseekV3ForCausalLM", 671_026_419_200, buffers=14_848),
    # OpenAI GPT-2 small: 124M (GPT2LMHeadModel, LM head tied to wte). The Hub's safetensors total, 137M, also
    # counts the 12 x 1024 x 1024 causal-mask buffers (attn.bias) the old checkpoint saved.
    Published("openai-community/gpt2", "AutoModelForCausalLM", "GPT2LMHeadModel", 124_439_808),
    # BERT paper: BERT-base 110M, the encoder with its pooler (BertModel). The Hub's safetensors total,
    # 110,106,428, is BertForPreTraining: the same plus the MLM transform/bias and next-sentence head.
    Published("google-bert/bert-base-uncased", "AutoModel", "BertModel", 109_482_240),
    # BERT paper: BERT-large 340M, BertModel with pooler (Hub safetensors total 336,226,108 = BertForPreTraining).
    Published("google-bert/bert-large-uncased", "AutoModel", "BertModel", 335_141_888),
    # Hub safetensors total ("223M"); T5 paper: ~220M for T5-Base. Embedding shared by encoder, decoder, LM head.
    Published("google-t5/t5-base", "AutoModelForSeq2SeqLM", "T5ForConditionalGeneration", 222_903_552),
    # Hub safetensors total ("86.6M"): ViT-B/16 with its 1000-class ImageNet head; ViT paper: 86M.
    Published("google/vit-base-patch16-224", "AutoModelForImageClassification", "ViTForImageClassification", 86_567_656),
    # Pythia paper (Biderman et al. 2023, table 1): 405,334,016 total parameters for "410M" (untied embed_in/out).
    Published("EleutherAI/pythia-410m-deduped", "AutoModelForCausalLM", "GPTNeoXForCausalLM", 405_334_016),
    # StarCoder 15.5B architecture (OctoCoder is its instruction-tuned copy): 15,517,456,384 with the LM head tied
    # to wte. The causal-mask buffer transformer.bias (8192 x 8192 bool) is non-persistent, so not counted.
    Published("bigcode/octocoder", "AutoModelForCausalLM", "GPTBigCodeForCausalLM", 15_517_456_384),
    # Hub safetensors total ("242M"); proj_out is tied to the decoder embedding. Whisper paper: 244M.
    Published("openai/whisper-small", "AutoModelForSpeechSeq2Seq", "WhisperForConditionalGeneration", 241_734_912),
    # Exact count as transformers builds it (bf16 experts); the Hub counts MXFP4 blocks as U8 elements, so no exact
    # figure is published: the model card (arXiv 2508.10925) gives 20.9B and 116.8B, checked below.
    Published("openai/gpt-oss-20b", "AutoModelForCausalLM", "GptOssForCausalLM", 20_914_757_184),
    Published("openai/gpt-oss-120b", "AutoModelForCausalLM", "GptOssForCausalLM", 116_829_156_672),
]
MODEL_CARD_BILLIONS = {"openai/gpt-oss-20b": 20.9, "openai/gpt-oss-120b": 116.8}
"""gpt-oss model card, "Model architecture": 116.8B total parameters (120b), 20.9B (20b)."""


def _counts(model: torch.nn.Module) -> tuple[int, int]:
    """(parameters, stored non-parameter tensors): parameters() dedups tied weights; state_dict adds buffers."""
    params = sum(p.numel() for p in model.parameters())
    names = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    buffers = sum(t.numel() for name, t in model.state_dict().items() if name not in names)
    return params, buffers


@pytest.mark.parametrize("case", CASES, ids=[case.model_id for case in CASES])
def test_bundled_config_builds_the_published_parameter_count(case: Published) -> None:
    folder = model_zoo.find(case.model_id)
    assert folder is not None, f"{case.model_id} is not bundled"
    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = getattr(transformers, case.auto_class).from_config(config)
    assert type(model).__name__ == case.model_class
    assert _counts(model) == (case.count - case.buffers, case.buffers)


def test_model_ids_lists_every_bundled_model() -> None:
    ids = model_zoo.model_ids()
    assert len(ids) == 26
    assert ids == sorted(case.model_id for case in CASES)


@pytest.mark.parametrize(
    ("alias", "model_id"),
    [
        ("gpt2", "openai-community/gpt2"),
        ("bert-base-uncased", "google-bert/bert-base-uncased"),
        ("bert-large-uncased", "google-bert/bert-large-uncased"),
        ("t5-base", "google-t5/t5-base"),
    ],
)
def test_find_resolves_legacy_short_ids(alias: str, model_id: str) -> None:
    folder = model_zoo.find(alias)
    assert folder is not None
    assert folder == model_zoo.find(model_id)
    assert (folder / "config.json").is_file()


@pytest.mark.parametrize(
    "model_id",
    [
        "no-such-org/no-such-model",
        "META-LLAMA/Llama-3.1-8B",  # Hub ids are case-sensitive, whatever the filesystem is
        "meta-llama",
        "meta-llama/Llama-3.1-8B/config.json",
        "../configs/meta-llama/Llama-3.1-8B",
        "",
    ],
)
def test_find_returns_none_for_ids_not_bundled(model_id: str) -> None:
    assert model_zoo.find(model_id) is None


@pytest.mark.parametrize("model_id", sorted(MODEL_CARD_BILLIONS))
def test_gpt_oss_counts_round_to_the_model_cards(model_id: str) -> None:
    """The rows above hold the built count; it must round to the model card's figure in billions."""
    count = next(case.count for case in CASES if case.model_id == model_id)
    assert round(count / 1e9, 1) == MODEL_CARD_BILLIONS[model_id]
