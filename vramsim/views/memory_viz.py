"""The allocator's history as a ``torch.cuda.memory._snapshot()`` pickle, for pytorch.org/memory_viz.

The dict has the keys the viewer and ``torch.cuda._memory_viz`` read: ``segments`` (each with its blocks
tiling it, ``active_allocated`` or ``inactive``) and ``device_traces`` (one list, device 0, of the
allocator's actions). Differences from a real snapshot, each on purpose:

- ``time_us`` is the timeline's event index (event order, not wall time);
- an ``alloc``/``free_*`` entry's ``size`` is the block's bytes (rounded, what ``max_memory_allocated``
  counts), where PyTorch records the requested bytes; the requested bytes are each active block's
  ``requested_size`` and are named in the first frame;
- ``frames`` are not a Python stack: the first names the op and the tensor (``aten.mm.default:0:bf16[8, 4096]
  activations``), the next ones the module path from the innermost module out (``model.layers.0.mlp:0:forward``).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from vramsim.results.memory_history import HistoryTensor, MemoryHistory, SegmentRecord

__all__ = ["PICKLE_PROTOCOL", "memory_snapshot", "write_memory_viz"]

PICKLE_PROTOCOL = 4
"""The viewer's own unpickler (torch/utils/viz/MemoryViz.js) reads protocols 2 to 4."""

_Frames = list[dict[str, Any]]


def memory_snapshot(history: MemoryHistory) -> dict[str, Any]:
    """The ``_snapshot()`` dict of ``history``: plain dicts, lists, ints and strings only."""
    frames = _FrameBuilder(history.tensors)
    trace = [
        {
            "action": action.action,
            "addr": action.addr,
            "size": action.size,
            "stream": 0,
            "time_us": action.event,
            "frames": frames.of(action.tensor),
        }
        for action in history.actions
    ]
    return {
        "segments": [_segment(segment, history, frames) for segment in history.segments],
        "device_traces": [trace],
        "allocator_settings": {"expandable_segments": history.expandable_segments},
    }


def write_memory_viz(history: MemoryHistory, path: str | Path) -> Path:
    """Write the snapshot pickle of ``history`` to ``path``; the path written."""
    target = Path(path)
    target.write_bytes(pickle.dumps(memory_snapshot(history), protocol=PICKLE_PROTOCOL))
    return target


def _segment(segment: SegmentRecord, history: MemoryHistory, frames: _FrameBuilder) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in segment.blocks:
        tensor = None if block.tensor is None else history.tensors[block.tensor]
        blocks.append(
            {
                "address": block.address,
                "size": block.size,
                "requested_size": 0 if tensor is None else tensor.nbytes,
                "state": "inactive" if tensor is None else "active_allocated",
                "frames": frames.of(block.tensor),
            }
        )
    active = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {
        "device": 0,
        "address": segment.address,
        "total_size": segment.size,
        "stream": 0,
        "segment_type": "small" if segment.small else "large",
        "segment_pool_id": (0, 0),
        "is_expandable": segment.expandable,
        "allocated_size": active,
        "active_size": active,
        "requested_size": sum(b["requested_size"] for b in blocks),
        "frames": [],
        "blocks": blocks,
    }


class _FrameBuilder:
    """Each tensor's frames, built once and shared by its entries (the pickle stores a shared list once)."""

    def __init__(self, tensors: list[HistoryTensor]) -> None:
        self._tensors = tensors
        self._frames: dict[int, _Frames] = {}
        self._modules: dict[tuple[str, str], _Frames] = {}
        self._none: _Frames = []

    def of(self, tensor: int | None) -> _Frames:
        if tensor is None:
            return self._none
        if tensor not in self._frames:
            info = self._tensors[tensor]
            self._frames[tensor] = [_tensor_frame(info), *self._module_frames(info.module, info.phase)]
        return self._frames[tensor]

    def _module_frames(self, module: str, phase: str) -> _Frames:
        """The module path from the innermost module out, one frame per level (shared dicts)."""
        key = (module, phase)
        if key not in self._modules:
            parts = module.split(".") if module else []
            self._modules[key] = [
                {"filename": ".".join(parts[:depth]), "line": 0, "name": phase or "setup"} for depth in range(len(parts), 0, -1)
            ]
        return self._modules[key]


def _tensor_frame(tensor: HistoryTensor) -> dict[str, Any]:
    """``op:0:dtype[shape] category (requested bytes)``, and where a what-if added it, the storage it copies."""
    what = f"{tensor.dtype}{list(tensor.shape)} " if tensor.shape is not None else ""
    copy = f", copy of storage {tensor.copy_of}" if tensor.copy_of is not None else ""
    step = f", step {tensor.step}" if tensor.step >= 0 else ""
    name = f"{what}{tensor.category} ({tensor.nbytes} bytes requested{step}{copy})"
    return {"filename": tensor.op or tensor.category, "line": 0, "name": name}
