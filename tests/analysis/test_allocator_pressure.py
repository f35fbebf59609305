"""Near the limit: PyTorch's caching allocator empties its cache and retries before it raises out-of-memory."""

from __future__ import annotations

import dataclasses

import pytest
import transformers

import vramsim
from vramsim.analysis.device_memory import device_memory
from vramsim.estimators.assumptions import overheads_for, totals
from vramsim.estimators.timeline import Block, Timeline
from vramsim.views.units import format_bytes
from vramsim.workload.targets import resolve_target

_MiB = 1 << 20


def _timeline() -> Timeline:
    """20 MiB allocated and freed, then 30 MiB: the cached 20 MiB segment cannot hold it, so an unlimited
    allocator reserves 50 MiB while never more than 30 MiB is allocated."""
    blocks = [
        Block(
            nbytes=n * _MiB,
            category="temporaries",
            module="",
            phase="forward",
            op=f"op{n}",
            step=0,
            alloc_at=(0, 0, 0),
            free_at=None,
        )
        for n in (20, 30)
    ]
    events = [(0, True), (0, False), (1, True), (1, False)]
    return Timeline(blocks=blocks, events=events, preexisting=0, steps=[(0, 3)])


@pytest.mark.parametrize(("allocator_mib", "retries", "oom"), [(64, None, None), (40, 1, None), (25, 0, "op30 (forward)")])
# 64 MiB beside the cuBLAS workspace holds both segments; 40 holds the 30 MiB one once the cached 20 MiB segment
# is released (one retry); in 25 the 30 MiB block alone passes the limit: out of memory there, nothing to replay.
def test_the_replay_within_the_limit_says_clean_pressure_or_oom(allocator_mib: int, retries: int | None, oom: str | None) -> None:
    target = resolve_target("h100")
    outside = totals(overheads_for(target.profile, world_size=1, training=False))
    usable = allocator_mib * _MiB + outside.device  # the allocator may reserve its workspace plus allocator_mib
    memory = device_memory(_timeline(), target.profile, training=False, usable_bytes=usable)
    unlimited = 50 * _MiB + outside.allocated + (outside.reserved - outside.allocated)
    if retries is None:
        assert memory.pressure is None  # 50 MiB reserved fits: nothing to replay
        assert memory.reserved_bytes == unlimited
        return
    assert memory.pressure is not None
    assert (memory.pressure.retries, memory.pressure.oom_at) == (retries, oom)
    assert memory.pressure.unlimited_reserved_bytes == unlimited
    if oom is None:  # the 20 MiB segment given back before the 30 MiB one is made: 30 MiB reserved at most
        assert memory.reserved_bytes == unlimited - 20 * _MiB
        assert memory.device_bytes <= usable < memory.pressure.unlimited_device_bytes
    else:  # nothing runs within the limit: the figures stay the unlimited replay's, beyond the usable memory
        assert memory.reserved_bytes == unlimited and memory.device_bytes > usable


def test_weights_that_alone_pass_the_limit_fail_while_loading() -> None:
    """The 30 MiB block exists before the step (a weight) and alone passes the allocator's 25 MiB (the
    workspace comes later): the job fails before it starts."""
    timeline = dataclasses.replace(
        _timeline(), events=[(1, True), (0, True), (0, False), (1, False)], preexisting=1, steps=[(1, 3)]
    )
    target = resolve_target("h100")
    outside = totals(overheads_for(target.profile, world_size=1, training=False))
    usable = 25 * _MiB + outside.device - outside.allocated
    memory = device_memory(timeline, target.profile, training=False, usable_bytes=usable)
    assert memory.pressure is not None
    assert memory.pressure.oom_at == "loading the model (weights, buffers and inputs before the step)", memory.pressure


def test_bf16_autocast_training_through_a_zero_dropout_runs_on_a_gpu() -> None:
    """Phi-3's residual dropouts have p=0: CUDA's dropout falls back to F.dropout itself, under autocast too."""
    config = transformers.Phi3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=0,
        architectures=["Phi3ForCausalLM"],
    )
    report = vramsim.simulate(config, mixed_precision="bf16", device="h100", seq_len=16)
    assert report.peak_bytes > 0


def test_eager_module_loading_moves_only_the_device_figure(tiny_llama: transformers.LlamaConfig) -> None:
    """``cuda_module_loading="eager"`` (CUDA before 11.7) is computed from the same trace: allocated and
    reserved unchanged, the device figure up by the measured eager context less the lazy one."""
    lazy, eager = vramsim.simulate_each(
        tiny_llama, [{}, {"cuda_module_loading": "eager"}], device="v100-16gb", batch_size=2, seq_len=32
    )
    assert (eager.peak_bytes, eager.reserved_bytes) == (lazy.peak_bytes, lazy.reserved_bytes)
    assert eager.device_bytes - lazy.device_bytes == (1343 - 300) * _MiB
    assert eager.options["cuda_module_loading"] == "eager"


def test_a_fit_under_allocator_pressure_reports_the_replay_within_the_card() -> None:
    """The issue's case: Llama-2-13b generating 512 tokens for 16 prompts of 512 with eager attention on an
    A100 80GB. Unlimited, the growing KV cache leaves 118.95 GiB reserved (119.41 GiB on the device), yet
    the job runs within 70.95 GiB, emptying its cache twice; it was reported as 'FITS: 119.41 GiB of
    71.41 GiB usable'. The figures are now the replay's within the card, the unlimited ones kept apart."""
    report = vramsim.simulate(
        "meta-llama/Llama-2-13b-hf",
        task="generate",
        dtype="fp16",
        batch_size=16,
        seq_len=512,
        max_new_tokens=512,
        attn_implementation="eager",
        device="a100-80gb",
    )
    pressure = report.allocator_pressure
    assert pressure is not None and pressure.oom_at is None and pressure.retries == 2
    assert report.capacity_bytes is not None and report.fits is True
    usable = report.capacity_bytes * (1 - report.headroom)
    assert report.device_bytes <= usable and report.reserved_bytes <= report.capacity_bytes
    assert [format_bytes(n) for n in (report.reserved_bytes, report.device_bytes, int(usable))] == [
        "50.30 GiB",
        "50.77 GiB",
        "71.41 GiB",
    ]
    assert [format_bytes(n) for n in (pressure.unlimited_reserved_bytes, pressure.unlimited_device_bytes)] == [
        "118.95 GiB",
        "119.41 GiB",
    ]
    summary = vramsim.report_text(report, summary=True, width=200)
    assert "FITS on a100-80gb: 50.77 GiB of 71.41 GiB usable" in summary
    assert "unlimited, the allocator would reserve 118.95 GiB (119.41 GiB on the device)" in summary


def test_advice_fits_only_within_the_usable_memory() -> None:
    """gpt2 training on a card that holds some of its advice and not the rest: an advice says it fits
    exactly when its device figure is within the usable memory, as the report's own verdict does."""
    capacity = resolve_target("h100").profile.memory_bytes
    assert capacity is not None
    first = vramsim.simulate("openai-community/gpt2", seq_len=128, headroom=0.99)
    assert first.fits is False and len(first.advice) >= 2
    least, most = first.advice[0].device_bytes, first.advice[-1].device_bytes
    headroom = 1 - (least + most) / 2 / capacity  # a usable memory between the advice's figures
    report = vramsim.simulate("openai-community/gpt2", seq_len=128, headroom=headroom)
    usable = capacity * (1 - headroom)
    assert report.fits is False and report.device_bytes > usable
    assert {advice.fits for advice in report.advice} == {True, False}
    for advice in report.advice:
        assert advice.fits == (advice.device_bytes <= usable), advice
