"""vramsim against PyTorch's own FSDP2 memory tracker, on the FSDP2 program the ground truth runs for real.

The program is tests/ground_truth/test_data_parallel_ground_truth.py's: a 3-layer Llama (hidden 512), one rank
of 8 under torch's fake process group, ``fully_shard`` on each decoder layer and the root, AdamW, two training
steps of batch 2 x 32 tokens on the CPU; the figure is the second step's peak. Three answers:

- measured: the real run, c10's allocations read from the profiler (the ground truth);
- vramsim: ``simulate(..., device="cpu", gpus=8, fsdp=...)``, the graph's what-if of one traced rank;
- FSDPMemTracker: ``torch.distributed._tools.fsdp2_mem_tracker``, the same FSDP2 code under ``FakeTensorMode``
  (PyTorch's peer of vramsim: real FSDP2, fake tensors, its own accounting), its peak snapshot's total for the
  second step.

Run: ``python benchmarks/fsdp2_peer.py`` (about a minute on two cores).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "ground_truth"))

from profiled import fake_process_group
from test_data_parallel_ground_truth import BATCH, SEQ, N, _config, measured_peak, predicted_peak


def tracker_peak(mesh: Any, reshard_after_forward: bool) -> int:
    """FSDPMemTracker's peak over the second of two steps of the same program, under FakeTensorMode."""
    import transformers
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import fully_shard

    with FakeTensorMode():
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(_config())
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
        model.to_empty(device="cpu")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        ids = torch.randint(0, 501, (BATCH, SEQ))
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((ids,))
        with tracker:
            for step in range(2):
                if step == 1:
                    tracker.reset_mod_stats()
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                loss.backward()
                del loss
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        peaks = tracker.get_tracker_snapshot("peak")
    return int(sum(by_kind["Total"] for device, by_kind in peaks.items() if torch.device(device).type == "cpu"))


def main() -> None:
    print(f"| FSDP2 ({N} ranks) | measured (B) | vramsim (B) | vramsim error | FSDPMemTracker (B) | FSDPMemTracker error |")
    print("|---|---:|---:|---:|---:|---:|")
    for fsdp, reshard in (("full", True), ("grad-op", False)):
        with fake_process_group(N) as mesh:
            measured = measured_peak(mesh, reshard)
        predicted = predicted_peak(fsdp)
        with fake_process_group(N) as mesh:
            tracked = tracker_peak(mesh, reshard)
        print(
            f"| {fsdp} | {measured:,} | {predicted:,} | {predicted / measured - 1:+.2%} | {tracked:,} | "
            f"{tracked / measured - 1:+.2%} |"
        )


if __name__ == "__main__":
    main()
