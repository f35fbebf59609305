"""One data-parallel rank, computed from the graph, against torch's own FSDP2 and DDP run for real on the CPU.

The real run is one rank of 8 under torch's fake process group (collectives move no data, but
FSDP2 and DDP allocate every buffer they would): ``fully_shard`` on each decoder layer and on the
root, or ``DistributedDataParallel``; AdamW, two steps; c10's allocations are read from the
profiler, as the other ground truths are.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import transformers

import vramsim

sys.path.insert(0, str(Path(__file__).parents[1]))
from profiled import allocation_trace, fake_process_group, memory_profile

N = 8
BATCH, SEQ = 2, 32


def _config() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=512,
        intermediate_size=1000,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=501,
        max_position_embeddings=256,
    )


@pytest.fixture
def fake_world() -> Iterator[object]:
    with fake_process_group(N) as mesh:
        yield mesh


def measured_peak(mesh: object, reshard_after_forward: bool | None, bucket_view: bool = False) -> int:
    """Steady-state peak of one rank of ``_config()``'s model. ``reshard_after_forward`` ``None``: DDP instead of FSDP2."""
    from torch.distributed.fsdp import fully_shard

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        if reshard_after_forward is None:
            return _ddp(model.to_empty(device="cpu"), bucket_view)
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
        return model.to_empty(device="cpu")  # only the shards are ever allocated

    return measured_step(_config(), wrap)[0]


Sync = Callable[[torch.nn.Module, bool], contextlib.AbstractContextManager[object]]
"""How a library skips the gradients' reduction in a micro-step (False) or runs it (True, the last micro-step)."""


def measured_step(
    config: transformers.PretrainedConfig,
    wrap: Callable[[torch.nn.Module], torch.nn.Module],
    *,
    grad_accum: int = 1,
    sync: Sync | None = None,
) -> tuple[int, int]:
    """One rank's steady-state (second step) peak: what the first step leaves held plus the second's peak; and the
    bytes of the weights it holds. ``wrap`` parallelizes the meta model and allocates it on the CPU. ``grad_accum``
    micro-steps per optimizer step, each loss divided by their count as vramsim's program divides it, each run
    under ``sync``."""

    def step() -> None:
        for micro in range(grad_accum):
            with sync(model, micro + 1 == grad_accum) if sync is not None else contextlib.nullcontext():
                out = model(input_ids=ids, labels=ids, use_cache=False)
                loss = out.loss
                del out  # vramsim's program drops the outputs once the loss is computed
                if grad_accum > 1:
                    loss = loss / grad_accum
                loss.backward()
                del loss
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    with memory_profile() as first:
        with torch.device("meta"):
            model = wrap(transformers.AutoModelForCausalLM.from_config(config))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)  # adamw-foreach on the cpu target
        ids = torch.randint(0, config.vocab_size, (BATCH, SEQ))
        step()
    _, held = allocation_trace(first)
    with memory_profile() as second:
        step()
    peak, _ = allocation_trace(second)
    local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    return held + peak, sum(t.untyped_storage().nbytes() for t in local)


def _ddp(model: torch.nn.Module, bucket_view: bool) -> torch.nn.Module:
    """DDP whose all-reduce hook divides the bucket in place (the fake group's all-reduce returns no tensor)."""
    ddp = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=bucket_view)

    def divided(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations
        done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        done.set_result(bucket.buffer().div_(N))
        return done

    ddp.register_comm_hook(None, divided)
    return ddp


def predicted_peak(fsdp: str, **options: object) -> int:
    report = vramsim.simulate(
        _config(),
        task="train",
        batch_size=BATCH,
        seq_len=SEQ,
        device="cpu",
        gpus=N,
        fsdp=fsdp,
        optimizer="adamw-foreach",
        **options,
    )
    return report.peak_bytes


@pytest.mark.parametrize("fsdp", ["full", "grad-op"])
def test_fsdp2_matches_the_real_run(fake_world: object, fsdp: str) -> None:
    """Within 0.1% (measured: both +512 B of 55.8 MB and 64.3 MB)."""
    assert predicted_peak(fsdp) / measured_peak(fake_world, fsdp == "full") == pytest.approx(1.0, abs=0.001)


def test_ddp_matches_the_real_run(fake_world: object) -> None:
    """Within 0.1% (measured: +500 B of 155.8 MB, the same as one GPU's prediction against its own run)."""
    assert predicted_peak("no") / measured_peak(fake_world, None) == pytest.approx(1.0, abs=0.001)


def test_ddp_bucket_view_is_close_to_the_real_run(fake_world: object) -> None:
    """Within 0.5% (measured: 255,488 B short of 128.8 MB, not explained yet)."""
    predicted = predicted_peak("no", gradient_as_bucket_view=True)
    assert predicted / measured_peak(fake_world, None, bucket_view=True) == pytest.approx(1.0, abs=0.005)


def test_hsdp_matches_the_real_run() -> None:
    """HSDP over 16 ranks as 2 replicas x 8 shards (a 2-D mesh): one rank holds what FSDP2 over 8 holds; the
    gradients' all-reduce across replicas is in place. Within 0.1% of the real run (measured: +512 B of 55.8 MB,
    as FSDP2 full over 8)."""
    with fake_process_group(2 * N, mesh_shape=(2, N)) as mesh:
        measured = measured_peak(mesh, True)
    report = vramsim.simulate(
        _config(), task="train", batch_size=BATCH, seq_len=SEQ, device="cpu", gpus=2 * N, fsdp="hybrid", optimizer="adamw-foreach"
    )
    assert report.ranks is not None and report.ranks.scheme == "FSDP2 hybrid (2 x 8)"
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.001)
    assert report.peak_bytes == predicted_peak("full")


def test_cpu_offload_policy_keeps_what_vramsim_puts_on_the_host() -> None:
    """FSDP2 with CPUOffloadPolicy, run for real: the shards of weights and gradients and the optimizer states it
    keeps on the CPU add up to vramsim's host bytes for the same rank (on a GPU target, where they leave the device)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    with fake_process_group(N) as mesh:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(_config())
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, offload_policy=CPUOffloadPolicy(pin_memory=False))
        fully_shard(model, mesh=mesh, offload_policy=CPUOffloadPolicy(pin_memory=False))
        model.to_empty(device="cpu")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, 501, (BATCH, SEQ))
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        optimizer.step()

        def stored(tensors: list[torch.Tensor]) -> int:
            """Bytes of the distinct storages (a block's gradient shards are views into one reduce-scatter output)."""
            locals_ = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
            assert all(t.device.type == "cpu" for t in locals_)
            return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in locals_}.values())

        params = list(model.parameters())
        host = {
            "parameters": stored(params),
            "gradients": stored([p.grad for p in params if p.grad is not None]),
            "optimizer_states": stored([v for p in params for v in optimizer.state[p].values()]),
        }
    report = vramsim.simulate(
        _config(), task="train", batch_size=BATCH, seq_len=SEQ, device="h100", gpus=N, fsdp="full", offload_states="params"
    )
    assert report.ranks is not None
    assert report.ranks.host == host
    assert report.ranks.model_state == {"parameters": 0, "gradients": 0, "optimizer_states": 0}


EXPERTS = 8


def _mixtral(experts: int) -> transformers.MixtralConfig:
    """batched_mm experts: what the routing allocates never depends on the tokens' values."""
    return transformers.MixtralConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=501,
        num_local_experts=experts,
        num_experts_per_tok=2,
        max_position_embeddings=256,
        experts_implementation="batched_mm",
    )


@pytest.mark.parametrize(("world", "ep", "fsdp"), [(8, 2, "full"), (16, 4, "grad-op")])
def test_expert_parallel_within_fsdp2_matches_the_real_run(world: int, ep: int, fsdp: str) -> None:
    """EP inside FSDP2 as torchtitan's ``apply_fsdp`` builds it: the rank's num_experts / ep experts wrapped in
    their own ``fully_shard`` over the world / ep ranks holding the same experts (dim 1 when the rank's experts are
    fewer than those ranks: 2 experts over 4 at 16 / 4), each decoder layer and the root over every rank. The real
    run is the rank's program (its experts on its routed rows; the all-to-all moves no data under the fake group).
    Within 0.1% (measured: -0.002% and -0.010%), the weights' shards to the byte."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard

    reshard = fsdp == "full"
    with fake_process_group(world):
        mesh = init_device_mesh("cpu", (world // ep, ep), mesh_dim_names=("efsdp", "ep"))
        placement = (lambda _: Shard(1)) if mesh["efsdp"].size() * ep > EXPERTS else None

        def wrap(model: torch.nn.Module) -> torch.nn.Module:
            for layer in model.model.layers:
                fully_shard(layer.mlp.experts, mesh=mesh["efsdp"], reshard_after_forward=reshard, shard_placement_fn=placement)
                fully_shard(layer, mesh=mesh._flatten("dp"), reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh._flatten("dp"), reshard_after_forward=reshard)
            return model.to_empty(device="cpu")

        measured, shards = measured_step(_mixtral(EXPERTS // ep), wrap)
    report = vramsim.simulate(
        _mixtral(EXPERTS),
        task="train",
        batch_size=BATCH,
        seq_len=SEQ,
        device="cpu",
        gpus=world,
        ep=ep,
        fsdp=fsdp,
        optimizer="adamw-foreach",
    )
    assert report.ranks is not None and report.ranks.model_state["parameters"] == shards
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.001)


LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


@pytest.mark.parametrize("fsdp", ["full", "grad-op"])
def test_fsdp2_of_a_peft_model_matches_the_real_run(fake_world: object, fsdp: str) -> None:
    """LoRA on the frozen base, ``fully_shard`` on each decoder layer of the ``PeftModel`` and on the root: each
    block's frozen weights are gathered around its forward and backward like any others (not the whole model at
    once, as when peft's prefix hid the blocks from vramsim). Within 0.1% of the real run (measured: +480 B of 37.2 MB
    and 55.8 MB)."""
    import peft
    from torch.distributed.fsdp import fully_shard

    from vramsim.workload.quiet import quiet_peft

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        with quiet_peft():
            wrapped = peft.get_peft_model(model, peft.LoraConfig(**LORA))
        for layer in wrapped.base_model.model.model.layers:
            fully_shard(layer, mesh=fake_world, reshard_after_forward=fsdp == "full")
        fully_shard(wrapped, mesh=fake_world, reshard_after_forward=fsdp == "full")
        return wrapped.to_empty(device="cpu")

    measured, shards = measured_step(_config(), wrap)
    report = vramsim.simulate(
        _config(),
        task="train",
        batch_size=BATCH,
        seq_len=SEQ,
        device="cpu",
        gpus=N,
        fsdp=fsdp,
        optimizer="adamw-foreach",
        lora=LORA,
    )
    assert report.ranks is not None and report.ranks.model_state["parameters"] == shards
    assert report.ranks.gathered_elements < report.parameters // 2  # a block and the root, not every weight
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.001)


ACCUMULATED = 3


def _gradient_sync(model: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager[object]:
    """FSDP2's accumulation: ``set_requires_gradient_sync(False)`` keeps each unsharded gradient until the last
    micro-step's post-backward reduce-scatters it."""
    model.set_requires_gradient_sync(last)  # type: ignore[operator]
    return contextlib.nullcontext()


def _no_sync(model: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager[object]:
    """DDP's accumulation: ``no_sync()`` on every micro-step but the last, whose backward all-reduces."""
    return contextlib.nullcontext() if last else model.no_sync()  # type: ignore[operator]


@pytest.mark.parametrize("fsdp", ["full", "grad-op"])
def test_fsdp2_gradient_accumulation_matches_the_real_run(fake_world: object, fsdp: str) -> None:
    """Three micro-steps per optimizer step, the first two under ``set_requires_gradient_sync(False)``: each block's
    weights gathered in every micro-step, its whole gradients kept to the last one's reduce-scatter. vramsim's rank
    is the traced accumulation's micro-steps under the FSDP2 schedule. Within 0.1% (measured: +512 B of 75.7 MB and
    94.3 MB, against 55.8 and 64.3 MB without accumulation: the whole fp32 gradients held beside the shards)."""
    from torch.distributed.fsdp import fully_shard

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        for layer in model.model.layers:
            fully_shard(layer, mesh=fake_world, reshard_after_forward=fsdp == "full")
        fully_shard(model, mesh=fake_world, reshard_after_forward=fsdp == "full")
        return model.to_empty(device="cpu")

    measured, _ = measured_step(_config(), wrap, grad_accum=ACCUMULATED, sync=_gradient_sync)
    predicted = predicted_peak(fsdp, grad_accum=ACCUMULATED)
    assert predicted / measured == pytest.approx(1.0, abs=0.001)
    assert predicted > predicted_peak(fsdp)


@pytest.mark.parametrize("bucket_view", [False, True])
def test_ddp_no_sync_accumulation_matches_the_real_run(fake_world: object, bucket_view: bool) -> None:
    """DDP under ``no_sync()`` for all micro-steps but the last: the gradients accumulate in ``.grad`` beside the
    buckets; with ``gradient_as_bucket_view`` the last backward copies each into its bucket view. Within 0.1%
    (measured: +512 B of 158.8 MB both ways; without accumulation 155.8 MB, and 128.8 MB with bucket views)."""
    measured, _ = measured_step(
        _config(), lambda model: _ddp(model.to_empty(device="cpu"), bucket_view), grad_accum=ACCUMULATED, sync=_no_sync
    )
    predicted = predicted_peak("no", grad_accum=ACCUMULATED, gradient_as_bucket_view=bucket_view)
    assert predicted / measured == pytest.approx(1.0, abs=0.001)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fsdp2_of_a_float8_model_matches_the_real_run(fake_world: object, recipe: str) -> None:
    """torchao's float8 linears (attention projections: the MLP's 1,000 and the head's 501 rows do not divide by
    16) under ``fully_shard``, weights gathered in their own dtype (torchtitan's default, no float8 all-gather): the
    float8 cast's float32 copy of a bf16 weight is not autocast's, so nothing is gathered in float32 (+33.7% and +31.9%
    when it was). Tensorwise within 0.1% of the real run; rowwise 0.72% short (measured), not explained yet: on one
    device both match to the byte (the ground-truth cases)."""
    pytest.importorskip("torchao")
    from torch.distributed.fsdp import fully_shard

    from vramsim.workload.float8 import convert_to_float8

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        convert_to_float8(model.to(torch.bfloat16), recipe)
        for layer in model.model.layers:
            fully_shard(layer, mesh=fake_world)
        fully_shard(model, mesh=fake_world)
        return model.to_empty(device="cpu")

    measured, shards = measured_step(_config(), wrap)
    report = vramsim.simulate(
        _config(),
        task="train",
        batch_size=BATCH,
        seq_len=SEQ,
        device="cpu",
        gpus=N,
        fsdp="full",
        optimizer="adamw-foreach",
        float8=recipe,
        dtype="bf16",
    )
    assert report.ranks is not None and report.ranks.model_state["parameters"] == shards
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.001 if recipe == "tensorwise" else 0.01)
