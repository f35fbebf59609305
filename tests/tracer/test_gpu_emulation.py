"""GPU targets: SDPA backend choice per arch, what flash saves, autocast casts, allocator rounding."""

from __future__ import annotations

import pytest
import torch

import vramsim
from vramsim.tracer.kernels.attention import GpuAttention
from vramsim.tracer.kernels.emulation import AttentionCall

B, H, KV, L, D = 2, 4, 2, 64, 16


def call(dtype: torch.dtype = torch.bfloat16, mask: bool = False, gqa: bool = False, head_dim: int = D) -> AttentionCall:
    q = torch.empty(B, H, L, head_dim, device="meta", dtype=dtype)
    k = torch.empty(B, KV if gqa else H, L, head_dim, device="meta", dtype=dtype)
    attn_mask = torch.empty(B, 1, L, L, device="meta", dtype=torch.bool) if mask else None
    return AttentionCall(q, k, k, attn_mask, 0.0, not mask, None, gqa)


@pytest.mark.parametrize(
    ("capability", "kwargs", "expected"),
    [
        ((8, 0), {}, "flash"),  # A100, bf16, causal, no mask
        ((8, 0), {"gqa": True}, "flash"),  # flash handles grouped heads
        ((8, 0), {"dtype": torch.float32}, "efficient"),  # flash has no fp32 kernel
        ((8, 0), {"mask": True}, "efficient"),  # flash takes no explicit mask
        ((8, 0), {"head_dim": 512}, "efficient"),  # flash stops at head dim 256
        ((7, 5), {"dtype": torch.float16}, "efficient"),  # T4: no flash before sm80
        ((7, 0), {"dtype": torch.bfloat16}, "math"),  # V100: no bf16 kernels
        ((8, 0), {"mask": True, "gqa": True}, "math"),  # efficient has no GQA
    ],
)
def test_sdpa_backend_by_arch(capability: tuple[int, int], kwargs: dict, expected: str) -> None:
    assert GpuAttention(compute_capability=capability).backend(call(**kwargs)) == expected


def test_flash_saves_logsumexp_not_the_attention_matrix(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """On A100 with bf16 autocast no (seq, seq) buffer exists; each layer saves a float32 logsumexp."""
    seq = 128
    report = vramsim.simulate(tiny_llama, seq_len=seq, batch_size=2, device="a100", mixed_precision="bf16")
    math_report = vramsim.simulate(tiny_llama, seq_len=seq, batch_size=2, device="v100", mixed_precision="fp16")
    layer = next(r for r in report.layers if r.module == "model.layers.0")
    math_layer = next(r for r in math_report.layers if r.module == "model.layers.0")
    # V100 with fp16 and GQA: efficient attention has no GQA, so the math path saves softmax probabilities.
    assert math_layer.activation_bytes - layer.activation_bytes >= 2 * 4 * seq * seq * 2


def test_allocator_rounding_and_reserve(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """Allocated counts 512-byte blocks; reserved holds whole segments; the device adds the context."""
    gpu = vramsim.simulate(tiny_gpt2, seq_len=16, device="a100", optimizer="sgd")
    assert gpu.peak_bytes % 512 == 0
    assert gpu.reserved_bytes >= gpu.peak_bytes
    assert gpu.reserved_bytes % (2 << 20) == 0
    assert gpu.device_bytes > gpu.reserved_bytes
    assert any(a.name == "CUDA context" for a in gpu.assumptions)
    assert gpu.fits is True


def test_foreach_optimizer_on_gpu(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """torch.optim defaults to foreach on CUDA: AdamW's peak has a whole-model sqrt temporary."""
    gpu = vramsim.simulate(tiny_gpt2, seq_len=8, device="h100", optimizer="adamw-foreach")
    assert gpu.peak_at.phase == "optimizer" and gpu.peak_at.op.startswith("aten._foreach")
    assert gpu.options["optimizer_implementation"] == "torch.optim.AdamW (foreach)"


def test_default_adamw_is_fused_on_gpu(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """The default is the Trainer's fused AdamW: its step allocates nothing, so the foreach
    variant's whole-model temporary is gone and the peak moves out of the optimizer step."""
    from vramsim.workload.models import build_model

    fused = vramsim.simulate(tiny_gpt2, seq_len=8, device="h100")
    foreach = vramsim.simulate(tiny_gpt2, seq_len=8, device="h100", optimizer="adamw-foreach")
    assert fused.options["optimizer_implementation"] == "torch.optim.AdamW (fused)"
    assert fused.peak_at.phase != "optimizer"
    assert fused.peak_bytes < foreach.peak_bytes
    # The fused kernel reads each parameter's fp32 step counter on the device (a 512-byte
    # allocator block each); foreach keeps them on the host.
    tensors = len(list(build_model(tiny_gpt2, device="meta", dtype=None).parameters()))
    assert fused.breakdown["optimizer_states"] - foreach.breakdown["optimizer_states"] == 512 * tensors


def test_bf16_autocast_on_v100_is_emulated_with_its_kernels(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """torch 2.13's autocast accepts bf16 where the device only emulates it (is_bf16_supported's default):
    same tensor sizes as on an A100, but V100 attention has no bf16 kernel, so SDPA runs its math path."""
    v100 = vramsim.simulate(tiny_gpt2, device="v100", mixed_precision="bf16", seq_len=64)
    a100 = vramsim.simulate(tiny_gpt2, device="a100", mixed_precision="bf16", seq_len=64)
    assert "bf16_emulated" in {a.name for a in v100.assumptions}
    assert "bf16_emulated" not in {a.name for a in a100.assumptions}
    assert v100.breakdown["activations"] > a100.breakdown["activations"]  # the math path saves its attention probs


def test_flash_backward_scratch_buffers(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """flash_api.cpp mha_bwd: softmax_d and dq_accum in fp32, rounded; dk/dv expanded for GQA."""
    from vramsim.config import SimulationConfig
    from vramsim.workload.build import build_program
    from vramsim.workload.targets import resolve_target
    from vramsim.workload.tracing import trace_program

    target = resolve_target("a100")
    config = SimulationConfig(batch_size=B, seq_len=L, device="a100", mixed_precision="bf16")
    with target.emulation() as emulation:
        program = build_program(tiny_llama, config, device="meta", emulation=emulation, foreach=True)
        trace = trace_program(program, devices=target.counted_devices, workspaces=target.rules.workspaces)
    scratch = {s.nbytes for s in trace.storages if s.op.endswith("flash_attention_backward:workspace")}
    head_dim = tiny_llama.hidden_size // tiny_llama.num_attention_heads
    softmax_d = B * H * 128 * 4
    dq_accum = B * 128 * H * 32 * 4
    expanded = 2 * B * L * H * head_dim * 2
    assert scratch == {softmax_d + dq_accum + expanded}


def test_backward_only_assumptions_are_listed_for_training_only(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    forward = vramsim.simulate(tiny_gpt2, device="h100", task="forward", seq_len=16)
    train = vramsim.simulate(tiny_gpt2, device="h100", seq_len=16)
    assert "efficient_attention_backward" not in {a.name for a in forward.assumptions}
    assert "efficient_attention_backward" in {a.name for a in train.assumptions}
