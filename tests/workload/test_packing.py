"""Packed sequences, padding-free (``vramsim/workload/packing.py``): one row of batch x seq tokens with positions
restarting per sequence, as ``DataCollatorWithFlattening`` gives them; the real model run on it on the CPU."""

from __future__ import annotations

import pytest
import torch
from cli_runs import run
from transformers import DataCollatorWithFlattening

import vramsim
from vramsim.cache.keys import request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.validation.measure import measure_cpu
from vramsim.workload.build import build_program

_PACKED = {"task": "train", "batch_size": 4, "seq_len": 64, "device": "cpu", "packed": True}


def test_the_packed_batch_is_what_transformers_flattening_collator_makes(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    program = build_program(tiny_llama, SimulationConfig(**_PACKED), device="cpu")
    rows = [{"input_ids": list(range(1, 65))} for _ in range(4)]
    collated = DataCollatorWithFlattening(return_tensors="pt")(rows)
    assert program.batch["input_ids"].shape == collated["input_ids"].shape == (1, 256)
    assert program.batch["labels"].shape == collated["labels"].shape
    assert torch.equal(program.batch["position_ids"], collated["position_ids"])
    assert "attention_mask" not in program.batch and "attention_mask" not in collated


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_packed_step_is_predicted_as_the_real_cpu_run_measures_it(tiny_llama, attention: str) -> None:  # type: ignore[no-untyped-def]
    """SDPA and eager attention keep each sequence apart with a block-diagonal mask over the whole row
    (``find_packed_sequence_indices``), read from the seeded positions: more memory than four rows of 64, not less."""
    options = {**_PACKED, "attn_implementation": attention}
    measured = measure_cpu(tiny_llama, SimulationConfig(**options)).peak_bytes
    predicted = vramsim.simulate(tiny_llama, **options).peak_bytes
    assert abs(predicted - measured) <= 16  # the eager case's 16 B is the unpacked case's too
    padded = vramsim.simulate(tiny_llama, **{**options, "packed": False}).peak_bytes
    mask = 256 * 256  # the packed row's bool mask alone
    assert predicted - padded >= mask


def test_packed_is_named_in_the_header_and_the_key(capsys, tiny_llama, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    tiny_llama.to_json_file(path)
    code, out, _ = run(
        capsys, "trace", str(path), "--seq-len", "8", "--batch-size", "2", "--device", "h100", "--packed", "--no-cache"
    )
    assert code == 0
    assert "packing padding-free, one row of 16 tokens, positions restarting every 8" in " ".join(out.split())
    options = {"task": "train", "seq_len": 8, "batch_size": 2}
    assert request_key("simulate", tiny_llama, {**options, "packed": True}) != request_key("simulate", tiny_llama, options)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"task": "generate"}, ConfigError, "decodes one row per prompt"),
        ({"inputs": lambda b, s: {}}, ConfigError, "pack them yourself"),
        ({"tp": 2, "gpus": 2, "device": "h100"}, UnsupportedError, "packed with tp is not modelled yet"),
    ],
)
def test_packed_is_refused_where_it_is_not_modelled(options: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SimulationConfig(**{**_PACKED, **options})
