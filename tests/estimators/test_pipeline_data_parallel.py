"""Pipeline x data parallelism per rank: each stage's weights sharded over its data-parallel ranks as DDP, ZeRO-1
and FSDP2 shard them, the stage's activations as the pipeline alone holds them, and what DeepSpeed refuses refused."""

from __future__ import annotations

from math import ceil, prod
from typing import Any

import pytest
import transformers

import vramsim
from vramsim.estimators.sharding import ZeroSettings
from vramsim.workload.models import build_model

OPTIONS: dict[str, Any] = {"task": "train", "batch_size": 2, "seq_len": 16, "device": "cpu"}
PIPELINE: dict[str, Any] = {"pp": 2, "micro_batches": 4}
DP = 2
BUCKET = 1000
"""DeepSpeed's reduce_bucket_size in elements, small enough to leave the peak where the pipeline alone has it."""


@pytest.fixture(scope="module")
def llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=301,
        max_position_embeddings=64,
    )


@pytest.fixture(scope="module")
def reports(llama: transformers.LlamaConfig) -> dict[str, vramsim.Report]:
    """One trace: the pipeline alone, then over 2 data-parallel ranks per stage with each scheme."""
    schemes: dict[str, dict[str, Any]] = {
        "alone": {},
        "ddp": {"gpus": 4},
        "zero1": {"gpus": 4, "zero": 1},
        "fsdp": {"gpus": 4, "fsdp": "full"},
    }
    found = vramsim.simulate_each(
        llama, [{**PIPELINE, **v} for v in schemes.values()], zero_settings=ZeroSettings(reduce_bucket=BUCKET), **OPTIONS
    )
    return dict(zip(schemes, found, strict=True))


def _stage_weights(llama: transformers.LlamaConfig) -> list[list[tuple[int, ...]]]:
    """Each stage's weight shapes: layers 0-1 and the embedding, layers 2-3 with the final norm and the head."""
    stages: list[list[tuple[int, ...]]] = [[], []]
    for name, p in build_model(llama, device="meta", dtype=None).named_parameters():
        layer = int(name.split(".")[2]) if ".layers." in name else None
        first = name.endswith("embed_tokens.weight") or (layer is not None and layer < 2)
        stages[0 if first else 1].append(tuple(p.shape))
    return stages


def test_each_stage_holds_its_weights_states_sharded_as_the_scheme_shards_them(
    llama: transformers.LlamaConfig, reports: dict[str, vramsim.Report]
) -> None:
    """fp32 AdamW: ZeRO-1 keeps weights and gradients whole, adds the fp32 master partition and shards the two
    moments (4 + 4/dp, 4, 8/dp bytes per parameter); FSDP2 shards all three on dim 0 (4/dp, 4/dp, 8/dp). AdamW's
    step is one fp32 scalar per weight, whole."""
    for stage, shapes in enumerate(_stage_weights(llama)):
        whole = sum(4 * prod(s) for s in shapes)
        zero = sum(4 * ceil(prod(s) / DP) for s in shapes)
        rows = sum(4 * ceil(s[0] / DP) * (prod(s) // s[0]) for s in shapes)
        steps = 4 * len(shapes)
        zero1 = reports["zero1"].ranks.stages[stage].model_state  # type: ignore[union-attr]
        assert zero1 == {"parameters": whole + zero, "gradients": whole, "optimizer_states": 2 * zero + steps}
        fsdp = reports["fsdp"].ranks.stages[stage].model_state  # type: ignore[union-attr]
        assert fsdp == {"parameters": rows, "gradients": rows, "optimizer_states": 2 * rows + steps}


def test_a_stage_holds_the_activations_of_the_pipeline_alone(reports: dict[str, vramsim.Report]) -> None:
    """Data parallelism changes no activation: per micro-batch held and in flight as the pipeline alone."""
    alone = reports["alone"].ranks
    assert alone is not None
    for scheme in ("ddp", "zero1", "fsdp"):
        ranks = reports[scheme].ranks
        assert ranks is not None and not ranks.ranks_alike and ranks.gpus == 4
        assert [(s.held_bytes, s.in_flight) for s in ranks.stages] == [(s.held_bytes, s.in_flight) for s in alone.stages]
    assert reports["fsdp"].ranks.scheme == "PP 2 1f1b (4 micro-batches) x FSDP2 full 2"  # type: ignore[union-attr]


def test_ddp_over_a_stage_adds_its_buckets_to_the_pipeline_alone(reports: dict[str, vramsim.Report]) -> None:
    """DDP's buckets are made at wrap time and kept: each stage's peak is the pipeline's own plus the buckets of
    that stage's weights (the stage's gradients, fp32, in buckets of 1 MiB then 25 MiB)."""
    alone, ddp = reports["alone"].ranks, reports["ddp"].ranks
    assert alone is not None and ddp is not None
    for before, after in zip(alone.stages, ddp.stages, strict=True):
        buckets = after.model_state["gradients"]  # gradient_as_bucket_view=False: one bucket byte per gradient byte
        assert after.peak_bytes == before.peak_bytes + buckets
    assert sum(ddp.buffers.values()) == ddp.stages[ddp.busiest_stage or 0].model_state["gradients"]


def test_zero1_over_a_stage_is_the_pipeline_alone_with_that_stages_states_sharded(
    reports: dict[str, vramsim.Report],
) -> None:
    """Each stage's peak is the pipeline alone's, less the optimizer states ZeRO-1 shards away, plus its fp32
    master partition, and at most the reduce bucket (made after the last micro-batch's backward) above that."""
    alone, zero1 = reports["alone"].ranks, reports["zero1"].ranks
    assert alone is not None and zero1 is not None
    for before, after in zip(alone.stages, zero1.stages, strict=True):
        sharded_away = before.model_state["optimizer_states"] - after.model_state["optimizer_states"]
        master = after.model_state["parameters"] - before.model_state["parameters"]
        expected = before.peak_bytes - sharded_away + master
        assert expected <= after.peak_bytes <= expected + 4 * BUCKET
    assert zero1.buffers == {"ZeRO reduce bucket": 4 * BUCKET}


def test_fsdp_under_a_pipeline_keeps_gradients_whole_to_the_last_micro_batch(
    llama: transformers.LlamaConfig, reports: dict[str, vramsim.Report]
) -> None:
    """torch.distributed.pipelining runs every backward with requires_gradient_sync=False and
    reshard_after_backward=False: at the end of the stage's backward its weights are gathered and its gradients
    whole, beside its weights' and optimizer states' shards (the gradients' shards come after the reduce)."""
    ranks = reports["fsdp"].ranks
    assert ranks is not None
    for stage, shapes in enumerate(_stage_weights(llama)):
        whole = sum(4 * prod(s) for s in shapes)
        state = ranks.stages[stage].model_state
        assert ranks.stages[stage].peak_bytes >= state["parameters"] + state["optimizer_states"] + 2 * whole


def test_tensor_pipeline_and_data_parallel_compose(llama: transformers.LlamaConfig) -> None:
    """TP 2 x PP 2 x ZeRO-1 2 on 8 GPUs: the TP rank's program, split into stages, each ZeRO-1 over 2."""
    ranks, alone = (
        r.ranks for r in vramsim.simulate_each(llama, [{"gpus": 8, "zero": 1, **PIPELINE}, PIPELINE], tp=2, **OPTIONS)
    )
    assert ranks is not None and alone is not None
    assert ranks.scheme == "TP 2 x PP 2 1f1b (4 micro-batches) x ZeRO-1 2" and ranks.gpus == 8
    for staged, single in zip(ranks.stages, alone.stages, strict=True):
        assert staged.model_state["gradients"] == single.model_state["gradients"]
        assert staged.model_state["optimizer_states"] < 0.51 * single.model_state["optimizer_states"]
