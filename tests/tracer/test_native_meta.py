"""ATen's C++ meta kernels while tracing: the same records as torch's Python ones, and torch's back after."""

from __future__ import annotations

import contextlib
from dataclasses import astuple

import pytest
import torch
import torch._meta_registrations as meta_registrations
import transformers

import vramsim.tracer.mode
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.tracer.native_meta import native_meta_kernels
from vramsim.tracer.records import Trace
from vramsim.workload.targets import resolve_target


def _python_meta_ops() -> set[str]:
    return set(meta_registrations._meta_lib_dont_use_me_use_register_meta._op_impls)


def test_inside_the_cxx_kernels_run_and_torch_s_own_are_back_after() -> None:
    before = _python_meta_ops()
    assert "aten/mul.Tensor/Meta" in before
    with native_meta_kernels():
        inside = _python_meta_ops()
        with native_meta_kernels():  # reentrant: the inner exit puts nothing back
            pass
        assert _python_meta_ops() == inside
        x = torch.empty(4, 8, device="meta").t()
        assert (x * x).stride() == x.stride() == (1, 8)  # TensorIterator keeps the layout, as the CPU kernel does
    assert "aten/mul.Tensor/Meta" not in inside and inside < before
    assert _python_meta_ops() == before


def _records(trace: Trace) -> tuple[object, ...]:
    rows = (trace.storages, trace.ops, trace.holds, trace.units)
    return (*(tuple(astuple(r) for r in records) for records in rows), tuple(trace.events), tuple(trace.step_clocks))


CASES = {
    "llama train, h100": ("llama", {"task": "train", "device": "h100", "seq_len": 32, "batch_size": 2}),
    "llama train, cpu, bf16 autocast": ("llama", {"task": "train", "device": "cpu", "seq_len": 32, "mixed_precision": "bf16"}),
    "gpt2 generate, a100": ("gpt2", {"task": "generate", "device": "a100-80gb", "seq_len": 16, "max_new_tokens": 4}),
    "bert train, h100, checkpointing": ("bert", {"task": "train", "device": "h100", "seq_len": 16, "checkpointing": "full"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_records_equal_torch_s_python_meta_kernels(
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    tiny_llama: transformers.LlamaConfig,
    tiny_gpt2: transformers.GPT2Config,
    tiny_bert: transformers.BertConfig,
) -> None:
    """Every storage, op, saved tensor, block and event of a trace, with the C++ meta kernels and without."""
    model, options = CASES[case]
    config = SimulationConfig.from_options(**options)
    source = {"llama": tiny_llama, "gpt2": tiny_gpt2, "bert": tiny_bert}[model]
    native = build_and_trace(source, config, resolve_target(config.device), checkpointing="marked")[2]
    monkeypatch.setattr(vramsim.tracer.mode, "native_meta_kernels", contextlib.nullcontext)
    python = build_and_trace(source, config, resolve_target(config.device), checkpointing="marked")[2]
    assert len(native.ops) > 100 and _records(native) == _records(python)
