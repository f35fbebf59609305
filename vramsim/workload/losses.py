"""Named training losses that never hold the whole vocabulary's float32 logits: Liger's fused linear
cross-entropy and torchtune's chunked cross-entropy, each put where its library puts it.

Both replace a causal LM's forward after its decoder, as their libraries do: Liger's
``apply_liger_kernel_to_llama(fused_linear_cross_entropy=True)`` swaps ``LlamaForCausalLM.forward``
for ``lce_forward`` (``liger_kernel/transformers/model/llama.py``), which runs ``self.model`` and
hands the hidden states and ``lm_head.weight`` to ``LigerForCausalLMLoss``; torchtune's
``TransformerDecoder.chunked_output`` applies the head per chunk of the sequence and
``CEWithChunkedOutputLoss`` upcasts one chunk at a time (torchtune 0.6.1,
``torchtune/modules/transformer.py``, ``torchtune/modules/loss/ce_chunked_output_loss.py``, the
label shift of ``recipes/full_finetune_single_device.py``).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from vramsim.config.choices import NamedLoss
from vramsim.errors import UnsupportedError
from vramsim.estimators.assumptions import LIGER_CHUNK_MEM_CONST
from vramsim.estimators.devices import DeviceProfile
from vramsim.results.report import Assumption
from vramsim.tracer.kernels.liger import IGNORE_INDEX, LigerRun, liger_fused_linear_cross_entropy

__all__ = ["check_loss_target", "install_loss", "liger_run", "loss_notes"]

LIGER_MODEL_TYPES = frozenset({
    "deepseek_v2", "deepseek_v3", "exaone4", "falcon_h1", "gemma", "gemma2", "gemma3_text", "glm4", "gpt_oss",
    "granite", "hunyuan_v1_dense", "hunyuan_v1_moe", "llama", "ministral", "mistral", "mixtral", "nemotron", "olmo2",
    "olmo3", "phi3", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "smollm3",
})  # fmt: skip
"""Text decoders liger-kernel 0.8.5 patches (``MODEL_TYPE_TO_APPLY_LIGER_FN`` in ``transformers/monkey_patch.py``)."""


def check_loss_target(loss: NamedLoss | None, profile: DeviceProfile) -> None:
    """Liger's kernels are Triton: CUDA and ROCm GPUs only."""
    if loss is not None and loss.kind == "liger-flce" and profile.vendor == "cpu":
        raise UnsupportedError(
            "loss='liger-flce' is Liger's Triton kernel; it does not run on the CPU (use a GPU target, or chunked-ce)"
        )


def install_loss(model: torch.nn.Module, loss: NamedLoss, liger: LigerRun | None) -> None:
    """Replace ``model.forward`` on the instance, as Liger's instance patch does; the original still
    runs outside training or without labels (its own logits and loss)."""
    config = getattr(model, "config", None)
    head = getattr(model, "lm_head", None)
    decoder = getattr(model, "model", None)
    if not isinstance(head, torch.nn.Linear) or not isinstance(decoder, torch.nn.Module) or config is None:
        raise UnsupportedError(
            f"loss={loss.spec!r} replaces a causal LM's head and loss; {type(model).__name__} has "
            "no lm_head after a decoder at .model"
        )
    if loss.kind == "liger-flce":
        if config.model_type not in LIGER_MODEL_TYPES:
            raise UnsupportedError(f"liger-kernel 0.8.5 has no fused linear cross-entropy for model_type {config.model_type!r}")
        if head.bias is not None:
            raise UnsupportedError("loss='liger-flce' with a biased lm_head is not modelled")
        assert liger is not None, "a liger-flce trace names the target's LigerRun"
        compute = functools.partial(_liger_loss, run=liger)
    else:
        scaled = [
            name
            for name in ("final_logit_softcapping", "logit_scale", "logits_scaling")
            if getattr(config, name, None) not in (None, 1, 1.0)
        ]
        if scaled:
            raise UnsupportedError(
                f"loss={loss.spec!r} applies the bare head per chunk; {config.model_type}'s "
                f"{scaled[0]} on the logits is not modelled"
            )
        compute = functools.partial(_chunked_loss, chunks=loss.chunks, ignore={})
    original = model.forward
    model.forward = types.MethodType(_training_forward(original, compute), model)  # type: ignore[method-assign]


def _training_forward(original: Callable[..., Any], compute: Callable[..., tuple[torch.Tensor, Any]]) -> Callable[..., Any]:
    """A forward that runs the decoder, then ``compute(model, hidden, labels)``; the original otherwise."""

    @functools.wraps(original)  # the signature input synthesis reads stays the model's
    def forward(self: Any, *args: Any, labels: torch.Tensor | None = None, logits_to_keep: Any = 0, **kwargs: Any) -> Any:
        if not (self.training and labels is not None):
            return original(*args, labels=labels, logits_to_keep=logits_to_keep, **kwargs)
        from transformers.modeling_outputs import CausalLMOutputWithPast

        outputs = self.model(*args, **kwargs)
        kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        loss, logits = compute(self, outputs[0][:, kept, :], labels)
        return CausalLMOutputWithPast(loss=loss, logits=logits)  # training runs with use_cache=False: no cache

    return forward


def _liger_loss(model: Any, hidden: torch.Tensor, labels: torch.Tensor, *, run: LigerRun) -> tuple[torch.Tensor, None]:
    """``lce_forward`` in training: no logits returned."""
    return liger_fused_linear_cross_entropy(hidden, model.lm_head.weight, labels, run), None


def _chunked_loss(
    model: Any, hidden: torch.Tensor, labels: torch.Tensor, *, chunks: int, ignore: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """torchtune's step: the head per chunk of the sequence, labels shifted against a column of ignored
    labels made once (the recipe's ``ignore_labels_cache``), then ``CEWithChunkedOutputLoss``."""
    logits = [model.lm_head(part) for part in hidden.chunk(chunks, dim=1)]  # each (batch, seq / chunks, vocab)
    if "labels" not in ignore or ignore["labels"].shape[0] != labels.shape[0]:
        ignore["labels"] = torch.full((labels.shape[0], 1), IGNORE_INDEX, dtype=labels.dtype, device=labels.device)
    shifted = torch.hstack((labels[..., 1:], ignore["labels"]))
    return _chunked_cross_entropy(logits, shifted, chunks), logits


def _chunked_cross_entropy(logits: list[torch.Tensor], labels: torch.Tensor, chunks: int) -> torch.Tensor:
    """``CEWithChunkedOutputLoss.forward``: each chunk upcast to float32 in its own cross-entropy, summed."""
    counted = (labels != IGNORE_INDEX).sum()
    label_chunks = [part.reshape(-1) for part in labels.chunk(chunks, dim=1)]
    flat = [part.reshape(-1, part.size(-1)) for part in logits]
    total: Any = 0.0
    for part, target in zip(flat, label_chunks, strict=True):
        total += torch.nn.functional.cross_entropy(part.float(), target, ignore_index=IGNORE_INDEX, reduction="sum")
    loss: torch.Tensor = total / counted
    return loss


def liger_run(profile: DeviceProfile, autocast: torch.dtype | None) -> LigerRun:
    """What Liger's Python reads of the target: ROCm or not, sm80+ (ROCm's gfx9 reports a major of 9)."""
    capability = profile.compute_capability
    return LigerRun(
        hip=profile.vendor == "amd",
        sm80=profile.vendor == "amd" or (capability or (0, 0)) >= (8, 0),
        autocast=autocast,
        chunk_mem_const=LIGER_CHUNK_MEM_CONST,
    )


def loss_notes(loss: NamedLoss | None, vocab: int | None, hidden: int | None) -> list[Assumption]:
    """What a named loss's prediction rests on."""
    if loss is None:
        return []
    if loss.kind == "chunked-ce":
        return [
            Assumption(
                name="chunked_cross_entropy",
                detail=f"torchtune 0.6.1's chunked output and "
                f"CEWithChunkedOutputLoss({loss.chunks} chunks): the head's logits made per chunk of the "
                "sequence and each upcast to float32 in its own cross-entropy (vramsim/workload/losses.py)",
            )
        ]
    budget = f"{LIGER_CHUNK_MEM_CONST} x {hidden}" if LIGER_CHUNK_MEM_CONST != 1 else f"{hidden}"
    sizes = f"chunks of next_power_of_2(cdiv(tokens, cdiv({vocab}, {budget}))) tokens" if vocab and hidden else "chunks"
    detail = (
        f"liger-kernel 0.8.5's fused linear cross-entropy (lce_forward) in {sizes}, its gradients made in forward; "
        "Liger's other kernels (RMSNorm, RoPE, SwiGLU, which use_liger_kernel=True also applies) are not modelled "
        "(tracer/kernels/liger.py); accum_dtype=None, so the head's gradient is in the weight's dtype"
    )
    return [Assumption(name="liger_fused_linear_cross_entropy", detail=detail)]
