"""One data-parallel rank, computed from the graph: model states equal the closed forms, DDP is one
GPU plus its buckets, gathered weights are the blocks the schedule says, bad plans are refused."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from math import ceil
from typing import Any

import pytest
import torch
import transformers
from profiled import fake_process_group

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import DDP_BUCKET_CAP_BYTES, DDP_FIRST_BUCKET_BYTES
from vramsim.estimators.checkpointing_plan import CheckpointPlan
from vramsim.estimators.sharding.plan import ddp_bucket_sizes, sharding_plan
from vramsim.estimators.timeline import Timeline, derive_timeline
from vramsim.tracer.graph import build_graph
from vramsim.workload.models import build_model
from vramsim.workload.parallel.expert import rank_config
from vramsim.workload.targets import resolve_target

N = 8
OPTIONS: dict[str, Any] = {"task": "train", "seq_len": 32, "mixed_precision": "bf16"}


@pytest.fixture(scope="module")
def llama() -> transformers.LlamaConfig:
    """Weights large enough (>= 1e5 elements) for ZeRO-3 to partition, norms small enough to keep whole."""
    return transformers.LlamaConfig(
        hidden_size=512,
        intermediate_size=1000,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=501,
        max_position_embeddings=256,
    )


def _weights(config: transformers.PretrainedConfig) -> dict[str, torch.nn.Parameter]:
    return dict(build_model(config, device="meta", dtype=None).named_parameters())


def _every_rank(_: str) -> int:
    return N


def _elements(p: torch.Tensor, n: int) -> int:
    return ceil(p.numel() / n)


def _rows(p: torch.Tensor, n: int, *, expert: bool = False) -> int:
    """FSDP2's Shard(0) share; an expert-parallel rank's experts on dim 1 where they are fewer than the ranks
    (torchtitan's ``apply_fsdp``)."""
    dim = 1 if expert and p.shape[0] < n else 0
    return ceil(p.shape[dim] / n) * (p.numel() // p.shape[dim])


def _all_gather_output(p: torch.Tensor, n: int) -> int:
    """Elements of FSDP2's all-gather output for weight ``p`` over ``n`` ranks, the buffer its unsharded weight is a
    view of: n x the padded shard, the 0th of ``torch.chunk``'s chunks on dim 0 (``_fsdp_param.py``:
    ``padded_sharded_param_size``, ``init_all_gather_outputs``)."""
    return n * torch.chunk(p, n, dim=0)[0].numel()


def closed_form(
    weights: dict[str, torch.nn.Parameter], zero: int, fsdp: str, ranks: Callable[[str], int] = _every_rank
) -> dict[str, int]:
    """Bytes per weight, whole or each rank's padded share over ``ranks(name)`` ranks, with bf16 mixed precision as
    each framework runs it: FSDP2 (MixedPrecisionPolicy) and DDP keep fp32 weights and gradients; DeepSpeed's bf16
    mode holds bf16 weights (whole for stages 1-2) and gradients (stage 3 reduces into fp32 partitions) beside an
    fp32 master partition: stage 2 is DeepSpeed's own estimate_zero2_model_states_mem_needs (2 + 18 / N bytes per
    parameter, the step's fp32 gradient copy being a temporary here), stage 3 its 18 / N. AdamW's two fp32 states;
    on the cpu target AdamW's fp32 ``step`` scalars are device memory too (one per weight; a GPU keeps them on the
    host)."""
    whole = sum(4 * p.numel() for p in weights.values())
    steps = 4 * len(weights)
    if fsdp != "no":
        share = sum(4 * _rows(p, ranks(name), expert=".experts." in name) for name, p in weights.items())
        return {"parameters": share, "gradients": share, "optimizer_states": 2 * share + steps}
    share = sum(4 * _elements(p, ranks(name)) for name, p in weights.items())
    if zero == 0:
        return {"parameters": whole, "gradients": whole, "optimizer_states": 2 * whole + steps}
    kept = sum(2 * (_elements(p, ranks(name)) if p.numel() >= 100_000 else p.numel()) for name, p in weights.items())
    return {
        "parameters": (kept if zero == 3 else whole // 2) + share,  # the low-dtype weights and the fp32 master
        "gradients": {1: whole // 2, 2: share // 2, 3: share}[zero],
        "optimizer_states": 2 * share + steps,
    }


@pytest.mark.parametrize(("zero", "fsdp"), [(0, "no"), (1, "no"), (2, "no"), (3, "no"), (0, "full"), (0, "grad-op")])
def test_model_state_is_the_closed_form(llama: transformers.LlamaConfig, zero: int, fsdp: str) -> None:
    report = vramsim.simulate(llama, device="cpu", gpus=N, zero=zero, fsdp=fsdp, **OPTIONS)
    assert report.ranks is not None and report.ranks.ranks_alike
    assert report.ranks.model_state == closed_form(_weights(llama), zero, fsdp)


@pytest.mark.parametrize("device", ["cpu", "h100"])
def test_ddp_is_one_gpu_plus_its_buckets(llama: transformers.LlamaConfig, device: str) -> None:
    one = vramsim.simulate(llama, device=device, **OPTIONS)
    ddp = vramsim.simulate(llama, device=device, gpus=N, **OPTIONS)
    assert ddp.ranks is not None and ddp.ranks.scheme == "DDP"
    buckets = list(ddp.ranks.buffers.values())
    assert sum(buckets) == sum(4 * p.numel() for p in _weights(llama).values())  # every gradient has a bucket slot
    if device == "cpu":  # bytes as they are: exactly one GPU's program plus the buckets
        assert ddp.peak_bytes == one.peak_bytes + sum(buckets)
        assert ddp.breakdown["communication"] == sum(buckets)
    else:  # the caching allocator splits its segments differently once the buckets hold some: within 0.1%
        assert ddp.peak_bytes == pytest.approx(one.peak_bytes + sum(buckets), rel=1e-3)
        assert ddp.breakdown["communication"] >= sum(buckets)
        assert any("NCCL" in a.name for a in ddp.assumptions)  # NCCL's buffers appear only with several ranks
        assert not any("NCCL" in a.name for a in one.assumptions)


def test_gradient_as_bucket_view(llama: transformers.LlamaConfig) -> None:
    """With gradient_as_bucket_view the buckets are the gradients: kept for the run, nothing else allocated."""
    ddp = vramsim.simulate(llama, device="cpu", gpus=N, **OPTIONS)
    view = vramsim.simulate(llama, device="cpu", gpus=N, gradient_as_bucket_view=True, **OPTIONS)
    assert view.ranks is not None and ddp.ranks is not None
    grads = sum(4 * p.numel() for p in _weights(llama).values())
    assert view.ranks.model_state["gradients"] == grads == sum(view.ranks.buffers.values())
    assert "communication" not in view.breakdown and view.breakdown["gradients"] == grads
    one = vramsim.simulate(llama, device="cpu", **OPTIONS)
    assert one.peak_bytes < view.peak_bytes < ddp.peak_bytes  # gradients kept all along, but never twice
    with pytest.raises(ConfigError, match="gradient_as_bucket_view is DDP's"):
        SimulationConfig(gpus=N, zero=1, gradient_as_bucket_view=True)


def test_ddp_buckets_follow_the_caps() -> None:
    MiB = 1 << 20
    assert ddp_bucket_sizes([MiB // 2, MiB // 2, 10 * MiB, 20 * MiB, MiB]) == [MiB, 30 * MiB, MiB]
    assert (MiB, 25 * MiB) == (DDP_FIRST_BUCKET_BYTES, DDP_BUCKET_CAP_BYTES)


def _live_by_category(timeline: Timeline, sizes: list[int]) -> list[dict[str, int]]:
    live: dict[str, int] = defaultdict(int)
    series = []
    for key, is_alloc in timeline.events:
        block = timeline.blocks[key]
        live[block.category] += sizes[key] if is_alloc else -sizes[key]
        series.append(dict(live))
    return series


def _last_step(config: transformers.PretrainedConfig, **sharding: Any) -> tuple[Timeline, list[dict[str, int]]]:
    """The rank's timeline on the cpu (no rounding) and its live bytes by category after each event of the last step."""
    target = resolve_target("cpu")
    options = {**OPTIONS, **sharding}
    config_ = SimulationConfig(device="cpu", **options)
    _, _, trace = build_and_trace(config, config_, target, checkpointing="marked")
    outcome = Analysis(build_graph(trace), target, config_).run(CheckpointPlan(sharding.get("checkpointing", "none")))
    series = _live_by_category(outcome.timeline, outcome.memory.live.sizes)
    first, last = outcome.timeline.steps[-1]
    return outcome.timeline, series[first : last + 1]


def _most(category: str, config: transformers.PretrainedConfig, **sharding: Any) -> int:
    """Most bytes of ``category`` live at once over the last step."""
    return max(live.get(category, 0) for live in _last_step(config, **sharding)[1])


def _most_weights(config: transformers.PretrainedConfig, **sharding: Any) -> int:
    return _most("parameters", config, **sharding)


def test_gathered_weights_are_the_schedule(llama: transformers.LlamaConfig) -> None:
    """FSDP2 full: shards + the root whole + one block whole (the prefetched one is communication); grad-op: the whole model
    once the forward is done; ZeRO-3 with the blocks larger than its prefetch bucket: one block and a bit. Under bf16
    mixed precision every weight is gathered in bf16, as FSDP2's MixedPrecisionPolicy and DeepSpeed's bf16 mode do."""
    weights = dict(build_model(llama, device="meta", dtype=None).named_parameters())

    def gathered(names: Any, numel: Callable[[torch.Tensor], int] = torch.numel) -> int:
        return sum(2 * numel(weights[name]) for name in names)

    def fsdp2_gathered(names: Any) -> int:
        return gathered(names, lambda p: _all_gather_output(p, N))

    shards = closed_form(weights, 0, "full")["parameters"]
    block = fsdp2_gathered(n for n in weights if n.startswith("model.layers.0."))
    root = fsdp2_gathered(n for n in weights if not n.startswith("model.layers."))
    assert root > gathered(n for n in weights if not n.startswith("model.layers."))  # 501 vocabulary rows pad to 504
    assert _most_weights(llama, gpus=N, fsdp="full") == shards + root + block  # the next one waits as all-gather output
    assert _most_weights(llama, gpus=N, fsdp="grad-op") == shards + root + 3 * block
    zero3 = _most_weights(llama, gpus=N, zero=3)
    kept = closed_form(weights, 3, "no")["parameters"]  # bf16 partitions and kept weights, fp32 master
    big_root = gathered(n for n, p in weights.items() if not n.startswith("model.layers.") and p.numel() >= 1e5)
    big_block = gathered(n for n, p in weights.items() if n.startswith("model.layers.0.") and p.numel() >= 1e5)
    assert zero3 == kept + big_root + 2 * big_block
    assert big_block < block


def test_all_gather_outputs_are_fsdp2_s(llama: transformers.LlamaConfig) -> None:
    """The all-gather outputs torch's FSDP2 makes in a real forward and backward (one rank of N under the fake
    process group) are ``_all_gather_output``'s sizes, padding included (the 501-row embedding and head)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    with fake_process_group(N) as mesh:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(llama)
        original = {name: torch.empty_like(p) for name, p in model.named_parameters()}
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model.to_empty(device="cpu")
        ids = torch.zeros(1, 8, dtype=torch.long)
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        outputs = {}
        for module in model.modules():
            if isinstance(module, FSDPModule):
                group = module._get_fsdp_state()._fsdp_param_group
                outputs.update({param._param_fqn: param.all_gather_outputs[0].numel() for param in group.fsdp_params})
    assert outputs == {name: _all_gather_output(p, N) for name, p in original.items()}
    assert outputs["model.embed_tokens.weight"] == 504 * 512


def test_checkpointing_then_sharding(llama: transformers.LlamaConfig) -> None:
    """Checkpointing is applied first; sharding leaves its activations and moves the model states."""
    plain = vramsim.simulate(llama, device="cpu", gpus=N, fsdp="full", **OPTIONS)
    full = vramsim.simulate(llama, device="cpu", gpus=N, fsdp="full", checkpointing="full", **OPTIONS)
    assert full.ranks == plain.ranks
    assert full.breakdown.get("activations", 0) < plain.breakdown.get("activations", 0)
    table = vramsim.simulate(llama, device="cpu", gpus=N, fsdp="full", checkpointing="all", **OPTIONS)
    assert {c.checkpointing: c.peak_bytes for c in table.checkpointing}["full"] == full.peak_bytes


def test_sharding_shrinks_the_rank(llama: transformers.LlamaConfig) -> None:
    peaks = {z: vramsim.simulate(llama, device="cpu", gpus=N, zero=z, **OPTIONS).ranks for z in (1, 2, 3)}
    states = [sum(r.model_state.values()) for r in peaks.values() if r is not None]
    assert states == sorted(states, reverse=True) and len(set(states)) == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gpus": 8, "zero": 3, "fsdp": "full"}, "choose one"),
        ({"gpus": 0}, "gpus must be an integer between 1"),
        ({"zero": 4}, "unknown ZeRO stage 4; choose one of: 0, 1, 2, 3"),
        ({"fsdp": "hsdp"}, "unknown fsdp 'hsdp'; choose one of: no, full, grad-op, hybrid"),
        ({"gpus": 8, "offload_states": "optimizer"}, "needs zero 1-3 or fsdp"),
        ({"gpus": 8, "zero": 2, "offload_states": "params"}, "ZeRO-3 only"),
        ({"gpus": 8, "fsdp": "full", "offload_states": "optimizer"}, "CPUOffloadPolicy"),
        ({"gpus": 8, "zero": 1, "offload_states": "disk"}, "unknown offload_states 'disk'"),
        ({"gpus": 8, "zero": 1, "offload_states": "optimizer", "device": "cpu"}, "cpu target's own memory"),
        ({"gpus": 8, "fsdp": "full", "shard_group_size": 4}, "HSDP's"),
        ({"gpus": 12, "fsdp": "hybrid", "shard_group_size": 8}, "not a multiple"),
        ({"zero": 2, "task": "forward"}, "shard training state"),
    ],
)
def test_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SimulationConfig(**options)


def test_plan_names() -> None:
    assert sharding_plan(8, 0, "no").scheme == "DDP"
    assert sharding_plan(8, 3, "no").scheme == "ZeRO-3"
    assert sharding_plan(8, 0, "GRAD-OP").scheme == "FSDP2 grad-op"
    assert not sharding_plan().active


def test_one_trace_many_plans(llama: transformers.LlamaConfig) -> None:
    """simulate_each analyses one trace per variant; each report equals its own simulate."""
    variants = [{"gpus": N, "zero": 3}, {"gpus": N, "fsdp": "grad-op", "checkpointing": "full"}, {}]
    reports = vramsim.simulate_each(llama, variants, device="h100", **OPTIONS)
    for variant, report in zip(variants, reports, strict=True):
        alone = vramsim.simulate(llama, device="h100", **OPTIONS, **variant)
        assert (report.peak_bytes, report.device_bytes, report.ranks) == (alone.peak_bytes, alone.device_bytes, alone.ranks)
    with pytest.raises(ConfigError, match="a variant cannot set 'seq_len'"):
        vramsim.simulate_each(llama, [{"seq_len": 64}], device="h100", **OPTIONS)


def _largest(weights: list[torch.nn.Parameter]) -> int:
    return max(p.numel() for p in weights)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_offload_optimizer(llama: transformers.LlamaConfig, zero: int) -> None:
    """DeepSpeed offload_optimizer: the fp32 master, gradient and optimizer-state partitions go to the host;
    stage 1 keeps whole gradients on the device, stages 1-2 add the hand-over buffer."""
    weights = list(_weights(llama).values())
    on = vramsim.simulate(llama, device="h100", gpus=N, zero=zero, offload_states="optimizer", **OPTIONS)
    off = vramsim.simulate(llama, device="h100", gpus=N, zero=zero, **OPTIONS)
    assert on.ranks is not None and off.ranks is not None and on.ranks.scheme == f"ZeRO-{zero} + offload optimizer"
    share = sum(4 * _elements(p, N) for p in weights)
    held = dict(off.ranks.model_state, optimizer_states=0, gradients=0 if zero >= 2 else off.ranks.model_state["gradients"])
    held["parameters"] -= share  # the fp32 master partition leaves the device (bf16 mode: stage 3 has one too)
    assert on.ranks.model_state == held
    expected = {"parameters": share, "optimizer_states": off.ranks.model_state["optimizer_states"], "gradients": share}
    if zero < 3:
        expected["buffers"] = 4 * _largest(weights) + share
        assert on.ranks.buffers["ZeRO-Offload gradient hand-over buffer"] == 4 * _largest(weights)
    assert on.ranks.host == expected
    assert on.peak_bytes < off.peak_bytes
    assert any(a.name == "cpu_offload_states" for a in on.assumptions)


def test_zero3_offload_params(llama: transformers.LlamaConfig) -> None:
    """offload_param: the weights' bf16 partitions join the fp32 master on the host; weights under the persistence
    threshold stay whole on the device."""
    weights = list(_weights(llama).values())
    report = vramsim.simulate(llama, device="h100", gpus=N, zero=3, offload_states="params", **OPTIONS)
    assert report.ranks is not None
    small = sum(2 * p.numel() for p in weights if p.numel() < 100_000)
    shards = sum(2 * _elements(p, N) for p in weights if p.numel() >= 100_000)
    assert report.ranks.model_state == {"parameters": small, "gradients": 0, "optimizer_states": 0}
    assert report.ranks.host["parameters"] == shards + sum(4 * _elements(p, N) for p in weights)


def test_fsdp_cpu_offload_policy(llama: transformers.LlamaConfig) -> None:
    """CPUOffloadPolicy: every shard on the host; the device keeps the gathered units and their buffers only."""
    weights = list(_weights(llama).values())
    on = vramsim.simulate(llama, device="h100", gpus=N, fsdp="full", offload_states="params", **OPTIONS)
    off = vramsim.simulate(llama, device="h100", gpus=N, fsdp="full", **OPTIONS)
    assert on.ranks is not None and off.ranks is not None
    assert on.ranks.model_state == dict.fromkeys(("parameters", "gradients", "optimizer_states"), 0)
    assert on.ranks.host == off.ranks.model_state
    assert on.ranks.host["parameters"] == sum(4 * _rows(p, N) for p in weights)
    assert on.ranks.buffers == off.ranks.buffers and on.peak_bytes < off.peak_bytes


def test_hsdp_shards_over_the_group(llama: transformers.LlamaConfig) -> None:
    """HSDP over 32 ranks in groups of 8 holds what FSDP2 full over 8 holds; the group size sets the share."""
    hybrid = vramsim.simulate(llama, device="cpu", gpus=4 * N, fsdp="hybrid", **OPTIONS)
    assert hybrid.ranks is not None and hybrid.ranks.scheme == "FSDP2 hybrid (4 x 8)"
    assert hybrid.ranks.model_state == closed_form(_weights(llama), 0, "full")
    four = vramsim.simulate(llama, device="cpu", gpus=4 * N, fsdp="hybrid", shard_group_size=4, **OPTIONS)
    assert four.ranks is not None and four.ranks.scheme == "FSDP2 hybrid (8 x 4)"
    assert four.ranks.model_state["parameters"] == sum(
        4 * ceil(p.shape[0] / 4) * (p.numel() // p.shape[0]) for p in _weights(llama).values()
    )
    assert sharding_plan(4, 0, "hybrid").shard_size == 4  # fewer ranks than a node: one group


EP_SCHEMES = [(1, "no", N), (2, "no", N), (3, "no", N), (0, "full", N), (0, "full", 2 * N)]


@pytest.fixture(scope="module")
def expert_parallel() -> tuple[transformers.MixtralConfig, list[vramsim.Report]]:
    """A Mixtral of 8 experts as EP 2 among the data-parallel ranks, under each of ``EP_SCHEMES`` (one trace)."""
    mixtral = transformers.MixtralConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=501,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=256,
    )
    variants = [{"zero": zero, "fsdp": fsdp, "gpus": gpus} for zero, fsdp, gpus in EP_SCHEMES]
    return mixtral, vramsim.simulate_each(mixtral, variants, device="cpu", ep=2, **OPTIONS)


@pytest.mark.parametrize("index", range(len(EP_SCHEMES)))
def test_expert_parallel_ranks_shard_the_experts_over_their_group(
    expert_parallel: tuple[transformers.MixtralConfig, list[vramsim.Report]], index: int
) -> None:
    """EP 2 among the data-parallel ranks: a rank's 4 of 8 experts are divided over the gpus / 2 ranks holding the
    same experts (DeepSpeed-MoE's expert-data-parallel group, torchtitan's dp_shard_mod_ep; FSDP2 on dim 1 where
    the 4 experts are fewer than those ranks), every other weight over all gpus; the closed forms otherwise as above."""
    (zero, fsdp, gpus), ep = EP_SCHEMES[index], 2
    mixtral, reports = expert_parallel
    report = reports[index]
    assert report.ranks is not None and report.ranks.ep == ep and report.ranks.gpus == gpus
    weights = _weights(rank_config(mixtral, ep))
    assert report.ranks.model_state == closed_form(weights, zero, fsdp, lambda name: gpus // ep if ".experts." in name else gpus)


ACCUMULATED = 3


@pytest.mark.parametrize(
    ("sharding", "held"),
    [
        ({"zero": 1}, "whole"),  # reduced at the boundary only: the bf16 gradients accumulate whole
        ({"zero": 2}, "partition"),  # reduced every micro-step into the partition (reduce_ready_partitions...)
        ({"zero": 3}, "partition"),  # every micro-step into the fp32 partitions made at start-up (partition_grads)
        ({"fsdp": "full"}, "whole fp32"),  # set_requires_gradient_sync(False): unsharded until the last reduce-scatter
        ({"fsdp": "grad-op"}, "whole fp32"),
        ({}, "whole fp32"),  # DDP no_sync: accumulated in .grad, beside the buckets
        ({"gradient_as_bucket_view": True}, "whole fp32 twice"),  # .grad and the buckets (the grads' views at the end)
    ],
)
def test_accumulation_holds_what_each_library_holds(llama: transformers.LlamaConfig, sharding: dict[str, Any], held: str) -> None:
    """Under ``grad_accum`` the most gradient bytes a rank holds at once over a step are its library's: the whole
    gradients where it reduces at the last micro-step only, its partition where it reduces every micro-step. The
    rank's model states (its shares) are those of one micro-step."""
    weights = _weights(llama)
    whole = sum(4 * p.numel() for p in weights.values())
    expected = {
        "whole": whole // 2,  # DeepSpeed's bf16 mode
        "whole fp32": whole,
        "whole fp32 twice": 2 * whole,
        "partition": closed_form(weights, sharding.get("zero", 0), "no")["gradients"],
    }[held]
    assert _most("gradients", llama, gpus=N, grad_accum=ACCUMULATED, **sharding) == expected
    once = vramsim.simulate(llama, device="cpu", gpus=N, **sharding, **OPTIONS)
    accumulated = vramsim.simulate(llama, device="cpu", gpus=N, grad_accum=ACCUMULATED, **sharding, **OPTIONS)
    assert accumulated.ranks is not None and once.ranks is not None
    assert accumulated.ranks.model_state == once.ranks.model_state
    assert accumulated.peak_bytes >= once.peak_bytes


@pytest.mark.parametrize(("zero", "reduces"), [(1, 1), (2, ACCUMULATED), (3, 0)])
def test_zero_reduce_buckets_follow_the_micro_steps(llama: transformers.LlamaConfig, zero: int, reduces: int) -> None:
    """DeepSpeed's reduce bucket in a step: ZeRO-1 fills it at the accumulation boundary only, ZeRO-2 in every
    micro-step's backward, ZeRO-3 keeps one made at start-up."""
    timeline, _ = _last_step(llama, gpus=N, zero=zero, grad_accum=ACCUMULATED)
    last = len(timeline.steps) - 1
    assert sum(1 for block in timeline.blocks if block.op == "zero.reduce_bucket" and block.step == last) == reduces


def test_fsdp2_gathers_each_micro_step(llama: transformers.LlamaConfig) -> None:
    """FSDP2 gathers every block around each micro-step's forward and backward, and reduce-scatters once."""
    timeline, _ = _last_step(llama, gpus=N, fsdp="full", grad_accum=ACCUMULATED)
    last = len(timeline.steps) - 1
    ops = [block.op for block in timeline.blocks if block.step == last]
    once, _ = _last_step(llama, gpus=N, fsdp="full")
    single = [block.op for block in once.blocks if block.step == len(once.steps) - 1]
    assert ops.count("fsdp.all_gather_output") == ACCUMULATED * single.count("fsdp.all_gather_output")
    assert ops.count("fsdp.reduce_scatter_input") == single.count("fsdp.reduce_scatter_input") > 0


@pytest.mark.parametrize("zero", [1, 2])
def test_deepspeed_accumulates_in_the_low_dtype(llama: transformers.LlamaConfig, zero: int) -> None:
    """DeepSpeed's bf16 mode (``grad_accum_dtype`` defaults to the model's dtype): each later micro-step's new
    gradient, which AccumulateGrad adds into ``.grad``, is bf16 like the ``.grad``; the trace made it under autocast
    from fp32 weights, in fp32."""
    from vramsim.estimators.sharding import shard
    from vramsim.estimators.sharding.rank import Rank

    config_ = SimulationConfig(device="cpu", gpus=N, zero=zero, grad_accum=ACCUMULATED, **OPTIONS)
    _, _, trace = build_and_trace(llama, config_, resolve_target("cpu"), checkpointing="marked")
    graph = build_graph(trace)
    rank = Rank(graph, derive_timeline(graph), config_.sharding)
    added = {new: grad for steps in rank.micro_steps.values() for micro in steps[1:] for new, grad in micro.added.items()}
    assert len(added) == (ACCUMULATED - 1) * len(trace.step_clocks) * len(_weights(llama))  # every weight, every later micro-step
    sharded = shard(graph, derive_timeline(graph), config_.sharding)
    for new, grad in added.items():
        assert trace.storages[new].nbytes == trace.storages[grad].nbytes  # as traced: fp32
        assert sharded.timeline.blocks[new].nbytes == trace.storages[new].nbytes // 2
