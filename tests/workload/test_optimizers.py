"""The named optimizers: what each name builds, and the states bitsandbytes' 8-bit AdamW holds."""

from __future__ import annotations

import pytest
import torch

import vramsim
from vramsim.config import SimulationConfig
from vramsim.workload.models import build_model


def test_names_and_transformers_optim_names() -> None:
    """Short names and transformers' ``optim`` names resolve to one implementation each."""
    assert SimulationConfig(optimizer="adamw_torch_fused").optimizer == "adamw"
    assert SimulationConfig(optimizer="ADAMW-FUSED").optimizer == "adamw"
    assert SimulationConfig(optimizer="adamw_torch").optimizer == "adamw-foreach"
    assert SimulationConfig(optimizer="adamw_bnb_8bit").optimizer == "adamw8bit"
    with pytest.raises(vramsim.ConfigError, match="unknown optimizer 'lamb'"):
        SimulationConfig(optimizer="lamb")


def test_implementation_named_per_target(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """``adamw-foreach`` is torch's own choice: foreach on a GPU, the for-loop on the CPU."""
    cpu = vramsim.simulate(tiny_gpt2, seq_len=8, device="cpu", optimizer="adamw-foreach")
    assert cpu.options["optimizer_implementation"] == "torch.optim.AdamW (for-loop)"
    sgd = vramsim.simulate(tiny_gpt2, seq_len=8, device="h100", optimizer="sgd")
    assert sgd.options["optimizer_implementation"] == "torch.optim.SGD (foreach)"


def test_lora_rank_as_an_int(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """``lora=4`` is the CLI's ``--lora-rank 4``: alpha 8 on every linear layer."""
    assert SimulationConfig(lora=4).lora == {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}
    report = vramsim.simulate(tiny_llama, seq_len=16, device="h100", lora=4)
    dense = vramsim.simulate(tiny_llama, seq_len=16, device="h100")
    assert 0 < report.breakdown["optimizer_states"] < dense.breakdown["optimizer_states"]
    with pytest.raises(vramsim.ConfigError, match="lora must be between 1"):
        SimulationConfig(lora=0)


def _block(nbytes: int) -> int:
    """The CUDA caching allocator's block: 512-byte multiples."""
    return max(512, -(-nbytes // 512) * 512)


def test_adamw8bit_states_are_bitsandbytes(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """bitsandbytes' ``Optimizer2State.init_state``: two uint8 states and one fp32 absmax per
    256-element block each for tensors of 4096 elements or more, two fp32 states below that,
    and the two 256-entry quantisation maps, copied to the device once."""
    pytest.importorskip("bitsandbytes")
    report = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="adamw8bit")
    assert report.options["optimizer_implementation"] == "bitsandbytes.AdamW (8-bit states)"
    expected = 2 * _block(256 * 4)
    for p in build_model(tiny_llama, device="meta", dtype=torch.float32).parameters():
        n = p.numel()
        expected += 2 * (_block(n) + _block(-(-n // 256) * 4)) if n >= 4096 else 2 * _block(4 * n)
    assert report.breakdown["optimizer_states"] == expected


def test_paged_adamw8bit_holds_adamw8bits_states_on_the_device(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """The Trainer's ``paged_adamw_8bit`` is bitsandbytes' AdamW with ``is_paged=True``: the same
    states as ``adamw8bit``, counted on the device as resident, the managed-memory share named."""
    pytest.importorskip("bitsandbytes")
    assert SimulationConfig(optimizer="paged_adamw_8bit").optimizer == "paged-adamw8bit"
    paged = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="paged_adamw_8bit")
    unpaged = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="adamw8bit")
    assert paged.options["optimizer_implementation"] == "bitsandbytes.AdamW (8-bit states, paged)"
    assert paged.breakdown["optimizer_states"] == unpaged.breakdown["optimizer_states"]
    note = next(a.detail for a in paged.assumptions if a.name == "paged_optimizer_states")
    # the tiny model's largest tensors (embedding and head, 500 x 64) stay under 1e5 elements: none is paged
    assert note.endswith(": 0 B here")
    tiny_llama.vocab_size = 2000  # embedding and head of 128,000 elements each: paged
    big = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="paged-adamw8bit")
    note = next(a.detail for a in big.assumptions if a.name == "paged_optimizer_states")
    assert note.endswith(f": {2 * 2 * 128_000:,} B here")


def test_paged_adamw32bit_pages_bitsandbytes_fp32_states(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """The Trainer's ``paged_adamw_32bit``: fp32 ``state1``/``state2`` per parameter, those of tensors of
    1e5 elements or more in managed memory; their bytes match bitsandbytes' own optimizer run on the CPU
    (where ``get_state_buffer`` falls back to ``zeros_like`` with the same shapes and dtypes)."""
    bnb = pytest.importorskip("bitsandbytes")
    assert SimulationConfig(optimizer="paged_adamw_32bit").optimizer == "paged-adamw32bit"
    tiny_llama.vocab_size = 2000  # embedding and head of 128,000 elements each: paged; the rest are not
    paged = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="paged-adamw32bit")
    assert paged.options["optimizer_implementation"] == "bitsandbytes.AdamW (32-bit states, paged)"
    params = list(build_model(tiny_llama, device="meta", dtype=torch.float32).parameters())
    # the managed states are outside the caching allocator: not in the allocated peak, reported apart
    assert paged.breakdown["optimizer_states"] == sum(2 * _block(4 * p.numel()) for p in params if p.numel() < 1e5)
    assert paged.paged_bytes == 2 * 2 * 4 * 128_000
    note = next(a.detail for a in paged.assumptions if a.name == "paged_optimizer_states")
    assert "outside PyTorch's caching allocator" in note
    assert note.endswith(f": {2 * 2 * 4 * 128_000:,} B here")
    torch.manual_seed(0)
    real = build_model(tiny_llama, device="cpu", dtype=torch.float32)
    optimizer = bnb.optim.AdamW(real.parameters(), lr=1e-4, optim_bits=32, is_paged=True)
    for p in real.parameters():
        p.grad = torch.zeros_like(p)
    with pytest.warns(UserWarning, match="Paged optimizers are not supported on CPU"):
        optimizer.step()
    managed = sum(state[key].nbytes for p, state in optimizer.state.items() if p.numel() >= 1e5 for key in ("state1", "state2"))
    assert note.endswith(f": {managed:,} B here")


def test_paged_states_are_apart_from_the_allocator_and_a_run_over_only_by_them_fits_paging(tiny_llama, capsys) -> None:  # type: ignore[no-untyped-def]
    """torch's allocator never sees managed memory: the allocated and reserved figures are those of the unpaged
    run less its paged states, the device figure adds them back as resident, and where only they pass the usable
    memory the driver pages them out: the verdict says it fits, paging."""
    pytest.importorskip("bitsandbytes")
    tiny_llama.vocab_size = 2000  # embedding and head of 128,000 elements each: paged
    paged = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="paged-adamw32bit")
    unpaged = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="adam")
    states = 2 * 2 * 4 * 128_000
    assert paged.paged_bytes == states and unpaged.paged_bytes == 0
    assert paged.peak_bytes <= unpaged.peak_bytes - states
    assert paged.device_bytes == paged.reserved_bytes + (unpaged.device_bytes - unpaged.reserved_bytes) + states
    capacity = paged.capacity_bytes
    assert capacity is not None
    headroom = 1 - (paged.device_bytes - states // 2) / capacity  # usable: between the device figure with and without them
    tight = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="paged-adamw32bit", headroom=headroom)
    assert tight.fits is True and tight.device_bytes > capacity * (1 - headroom)
    from rich.console import Console

    from vramsim.views.report import render_summary

    render_summary(tight, Console(width=80, force_terminal=False))
    out = " ".join(capsys.readouterr().out.split())
    assert "Paged optimizer states (managed memory, outside the allocator):" in out
    assert "FITS on h100" in out and "of optimizer states to the host" in out


def test_muon_pairs_with_adamw(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """``muon``: torch.optim.Muon's one momentum buffer per 2-D weight, fused AdamW's two states for the rest."""
    report = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="muon")
    assert report.options["optimizer_implementation"] == "torch.optim.Muon + torch.optim.AdamW (fused)"
    params = list(build_model(tiny_llama, device="meta", dtype=torch.float32).parameters())
    muon = sum(_block(4 * p.numel()) for p in params if p.ndim == 2)
    adamw = sum(2 * _block(4 * p.numel()) + _block(4) for p in params if p.ndim != 2)
    assert report.breakdown["optimizer_states"] == muon + adamw


def test_bitsandbytes_refused_on_the_cpu(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(vramsim.UnsupportedError, match="bitsandbytes' CPU step"):
        vramsim.simulate(tiny_gpt2, seq_len=8, device="cpu", optimizer="adamw8bit")


def test_lion_holds_one_fp32_state(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """bitsandbytes' 32-bit Lion (the Trainer's ``lion_32bit``): one fp32 momentum per parameter."""
    pytest.importorskip("bitsandbytes")
    report = vramsim.simulate(tiny_llama, seq_len=16, device="h100", optimizer="lion")
    params = build_model(tiny_llama, device="meta", dtype=torch.float32).parameters()
    assert report.breakdown["optimizer_states"] == sum(_block(4 * p.numel()) for p in params)
