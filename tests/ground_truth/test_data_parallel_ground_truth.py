"""One data-parallel rank, computed from the graph, against torch's own FSDP2 and DDP run for real on the CPU.

The real run is one rank of 8 under torch's fake process group (collectives move no data, but
FSDP2 and DDP allocate every buffer they would): ``fully_shard`` on each decoder layer and on the
root, or ``DistributedDataParallel``; AdamW, two steps; c10's allocations are read from the
profiler, as the other ground truths are.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from torch.profiler import ProfilerActivity, profile

import vramsim

sys.path.insert(0, str(Path(__file__).parents[1]))
from profiled import allocation_trace, fake_process_group

N = 8
BATCH, SEQ = 2, 32


def _config() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=512, intermediate_size=1000, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=501, max_position_embeddings=256,
    )  # fmt: skip


@pytest.fixture
def fake_world() -> Iterator[object]:
    with fake_process_group(N) as mesh:
        yield mesh


def measured_peak(mesh: object, reshard_after_forward: bool | None, bucket_view: bool = False) -> int:
    """Steady-state (second step) peak of one rank: what the first step leaves held plus the second's peak.
    ``reshard_after_forward`` ``None``: DDP instead of FSDP2."""
    from torch.distributed.fsdp import fully_shard

    def step() -> None:
        out = model(input_ids=ids, labels=ids, use_cache=False)
        loss = out.loss
        del out  # vramsim's program drops the outputs once the loss is computed
        loss.backward()
        del loss
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as first:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(_config())
        if reshard_after_forward is None:
            model.to_empty(device="cpu")
            model = _ddp(model, bucket_view)
        else:
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
            model.to_empty(device="cpu")  # only the shards are ever allocated
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)  # adamw-foreach on the cpu target
        ids = torch.randint(0, 501, (BATCH, SEQ))
        step()
    _, held = allocation_trace(first)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as second:
        step()
    peak, _ = allocation_trace(second)
    return held + peak


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
    report = vramsim.simulate(_config(), task="train", batch_size=BATCH, seq_len=SEQ, device="cpu", gpus=N, fsdp=fsdp,
                              optimizer="adamw-foreach", **options)  # fmt: skip
    return report.peak_bytes


@pytest.mark.parametrize("fsdp", ["full", "grad-op"])
def test_fsdp2_matches_the_real_run(fake_world: object, fsdp: str) -> None:
    """Within 0.1% (measured: both 11,776 B short of 55.8 MB and 64.3 MB)."""
    assert predicted_peak(fsdp) / measured_peak(fake_world, fsdp == "full") == pytest.approx(1.0, abs=0.001)


def test_ddp_matches_the_real_run(fake_world: object) -> None:
    """Within 0.1% (measured: +500 B of 155.8 MB, the same as one GPU's prediction against its own run)."""
    assert predicted_peak("no") / measured_peak(fake_world, None) == pytest.approx(1.0, abs=0.001)


def test_ddp_bucket_view_is_close_to_the_real_run(fake_world: object) -> None:
    """Within 0.5% (measured: 255,488 B short of 128.8 MB, not explained yet)."""
    predicted = predicted_peak("no", gradient_as_bucket_view=True)
    assert predicted / measured_peak(fake_world, None, bucket_view=True) == pytest.approx(1.0, abs=0.005)
