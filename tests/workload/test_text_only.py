"""Llama 4's multimodal model on a text-only batch runs through its language model before transformers 5.25
(vramsim/workload/text_only.py): the same logits and loss as its own forward with transformers'
``outputs.image_outputs`` read mended, and the vision tower's weights still counted; from 5.25, its own."""

from __future__ import annotations

import pytest
import torch
import transformers
from packaging.version import Version
from transformers.modeling_outputs import MoeCausalLMOutputWithPast

import vramsim
from vramsim.workload.text_only import TEXT_ONLY_MENDED, route_text_only, route_to_language_models

_MENDED = Version(transformers.__version__) >= TEXT_ONLY_MENDED


def _config() -> transformers.Llama4Config:
    text = {
        "vocab_size": 128,
        "hidden_size": 32,
        "intermediate_size": 64,
        "intermediate_size_mlp": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "num_local_experts": 2,
        "interleave_moe_layer_step": 1,
        "pad_token_id": 0,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "image_size": 56,
        "patch_size": 14,
        "vision_output_dim": 32,
        "projector_input_dim": 32,
        "projector_output_dim": 32,
    }
    return transformers.Llama4Config(
        text_config=text, vision_config=vision, architectures=["Llama4ForConditionalGeneration"], image_token_index=127
    )


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(1, 120, (2, 12), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def test_the_own_forward_fails_until_mended() -> None:
    """The bug worked around fails the own forward before ``TEXT_ONLY_MENDED`` and not from it, where the forward
    is left as it is."""
    torch.manual_seed(0)
    model = transformers.Llama4ForConditionalGeneration(_config()).eval()
    if not _MENDED:
        with pytest.raises(AttributeError, match="image_outputs"):
            model(**_batch())
        return
    own = model.forward
    route_text_only(model, _batch())
    assert model.forward == own and model(**_batch()).loss is not None


def test_routed_forward_computes_what_the_mended_forward_does(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = transformers.Llama4ForConditionalGeneration(_config()).eval()
    batch = _batch()
    with torch.no_grad():
        monkeypatch.setattr(MoeCausalLMOutputWithPast, "image_outputs", None, raising=False)
        expected = model(**batch)
        monkeypatch.undo()
        route_to_language_models(model)
        routed = model(**batch)
    assert expected.loss is not None and routed.loss is not None
    torch.testing.assert_close(routed.logits, expected.logits, rtol=0, atol=0)
    torch.testing.assert_close(routed.loss, expected.loss, rtol=0, atol=0)


def test_an_image_batch_keeps_the_own_forward() -> None:
    model = transformers.Llama4ForConditionalGeneration(_config())
    own = model.forward
    route_text_only(model, {**_batch(), "pixel_values": torch.zeros(1)})
    assert model.forward == own


@pytest.mark.parametrize("task", ["train", "generate"])
def test_report_says_so_and_counts_the_vision_tower(task: str) -> None:
    config = _config()
    whole = sum(p.numel() for p in transformers.Llama4ForConditionalGeneration(config).parameters())
    text = sum(p.numel() for p in transformers.Llama4ForCausalLM(config.text_config).parameters())
    options = {"steps": 1} if task == "train" else {"max_new_tokens": 2}
    report = vramsim.simulate(config, task=task, seq_len=12, device="h100", cache=False, **options)
    notes = [a.detail for a in report.assumptions if a.name == "text_only_forward"]
    assert len(notes) == (0 if _MENDED else 1) and all("vision tower is loaded and counted" in n for n in notes)
    assert report.parameters == whole > text
