"""The ``--memory-viz`` snapshot: PyTorch's own ``torch.cuda._memory_viz`` reads it, and it adds up to the report.

One gpt2 training step traced once for an H100, replayed with plain and with expandable segments
(two variants of one trace).
"""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path
from typing import Any

import pytest
import torch.cuda._memory_viz as memory_viz

import vramsim
from vramsim.views.memory_viz import write_memory_viz

_VIEWER_OPCODES = {
    # The opcodes the viewer's own unpickler reads (torch/utils/viz/MemoryViz.js, ``unpickle``): any other
    # opcode in the file stops pytorch.org/memory_viz with "UNKNOWN OPCODE".
    "PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE", "BINGET", "BININT", "BININT1",
    "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "BINPUT",
    "LONG_BINPUT", "SETITEMS", "SETITEM", "DICT", "SHORT_BINUNICODE", "BINUNICODE", "STOP", "EMPTY_TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT",
}  # fmt: skip
_GROWS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
_HOLDS = {"alloc": 1, "free_completed": -1}


@pytest.fixture(scope="module")
def reports() -> list[vramsim.Report]:
    """gpt2, batch 1 x 128 tokens, AdamW, one trace: plain segments, then expandable ones."""
    return vramsim.simulate_each(
        "gpt2",
        [{}, {"expandable_segments": True}],
        task="train",
        device="h100-sxm",
        batch_size=1,
        seq_len=128,
        memory_history=True,
        advice="none",
    )


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "expandable"])
def exported(
    request: pytest.FixtureRequest, reports: list[vramsim.Report], tmp_path_factory: pytest.TempPathFactory
) -> tuple[vramsim.Report, Path]:
    report = reports[1] if request.param else reports[0]
    assert report.memory_history is not None
    return report, write_memory_viz(report.memory_history, tmp_path_factory.mktemp("viz") / "snapshot.pickle")


def _snapshot(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        return pickle.load(file)


def test_the_file_uses_only_opcodes_the_viewer_reads(exported: tuple[vramsim.Report, Path]) -> None:
    """Protocol 4, plain dicts/lists/ints/strings (no class references), addresses exact in a JS number."""
    _, path = exported
    data = path.read_bytes()
    opcodes = {opcode.name for opcode, _, _ in pickletools.genops(data)}
    assert opcodes <= _VIEWER_OPCODES, opcodes - _VIEWER_OPCODES
    assert data[:2] == b"\x80\x04"
    trace = _snapshot(path)["device_traces"][0]
    assert all(0 < entry["addr"] < 2**53 for entry in trace)


def test_torchs_memory_viz_renders_and_summarises_it(exported: tuple[vramsim.Report, Path]) -> None:
    """trace_plot and segment_plot give their HTML; segsum, memory and trace summaries run and agree."""
    _, path = exported
    snapshot = _snapshot(path)
    assert "Active Memory Timeline" in memory_viz.trace_plot(snapshot)
    assert "Active Cached Memory Timeline" in memory_viz.trace_plot(snapshot, plot_segments=True)
    assert "Allocator State History" in memory_viz.segment_plot(snapshot)
    summary = memory_viz.segsum(snapshot)  # raises where blocks do not add up to their segment
    reserved = sum(segment["total_size"] for segment in snapshot["segments"])
    assert f"total_reserved: {memory_viz.Bytes(reserved)}" in summary
    lines = memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    active = sum(int(line.rsplit(" ", 1)[1]) for line in lines.splitlines() if ";active_allocated;" in line)
    assert active == sum(s["allocated_size"] for s in snapshot["segments"])  # requested bytes plus rounding gaps
    assert f"{len(snapshot['device_traces'][0])} entries" in memory_viz.trace(snapshot)


def test_replaying_the_device_trace_gives_the_reports_peaks(exported: tuple[vramsim.Report, Path]) -> None:
    """Summing alloc/free_completed and segment actions over the last step gives ``peak_bytes`` to the byte (the
    cuBLAS workspaces are in the trace, one alloc, as the allocator makes them) and ``reserved_bytes`` less the
    reserved-only overheads added outside the allocator (none on an H100)."""
    report, path = exported
    history = report.memory_history
    assert history is not None
    trace = _snapshot(path)["device_traces"][0]
    allocated = reserved = peak_allocated = peak_reserved = 0
    for entry in trace:
        if entry["time_us"] >= history.steady_first_event and not peak_reserved:
            peak_reserved = reserved  # reset_peak_stats where the last step begins
        allocated += _HOLDS.get(entry["action"], 0) * entry["size"]
        reserved += _GROWS.get(entry["action"], 0) * entry["size"]
        if entry["time_us"] >= history.steady_first_event:
            peak_allocated, peak_reserved = max(peak_allocated, allocated), max(peak_reserved, reserved)
    assert (peak_allocated, peak_reserved) == (report.peak_bytes, report.reserved_bytes - history.reserved_overhead_bytes)
    figures = {False: (2_372_719_616, 2_558_525_440), True: (2_367_003_648, 2_422_210_560)}  # this trace's, as reported
    assert (report.peak_bytes, report.reserved_bytes) == figures[history.expandable_segments]
    assert history.allocated_overhead_bytes == 2 * 32 << 20  # two cuBLAS workspaces, 32 MiB each on sm90
    assert [e for e in trace if e["action"] == "alloc" and e["size"] == history.allocated_overhead_bytes]


def test_the_trace_keeps_every_block_inside_a_live_segment(exported: tuple[vramsim.Report, Path]) -> None:
    """What the viewer's scrubbing needs: each alloc inside a mapped segment and over no live block, each free
    matching its alloc, and the state at the end being the snapshot's ``segments``."""
    report, path = exported
    snapshot = _snapshot(path)
    segments: dict[int, int] = {}  # address -> size, mapped ranges merged where they touch (expandable)
    blocks: dict[int, int] = {}
    for entry in snapshot["device_traces"][0]:
        action, addr, size = entry["action"], entry["addr"], entry["size"]
        if action == "segment_alloc":
            segments[addr] = size
        elif action == "segment_free":
            assert segments.pop(addr) == size
        elif action == "segment_map":
            _map(segments, addr, size)
        elif action == "segment_unmap":
            _unmap(segments, addr, size)
        elif action == "alloc":
            assert any(a <= addr and addr + size <= a + s for a, s in segments.items())
            assert addr not in blocks
            blocks[addr] = size
        elif action == "free_completed":
            assert blocks.pop(addr) == size
    assert segments == {s["address"]: s["total_size"] for s in snapshot["segments"]}
    active = {b["address"]: b for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
    assert {a: b["size"] for a, b in active.items()} == blocks
    assert all(s["is_expandable"] == report.memory_history.expandable_segments for s in snapshot["segments"])  # type: ignore[union-attr]


def _map(segments: dict[int, int], addr: int, size: int) -> None:
    end = addr + size
    before = next((a for a, s in segments.items() if a + s == addr), None)
    if end in segments:
        size += segments.pop(end)
    if before is None:
        segments[addr] = size
    else:
        segments[before] += size


def _unmap(segments: dict[int, int], addr: int, size: int) -> None:
    start = next(a for a, s in segments.items() if a <= addr and addr + size <= a + s)
    whole = segments.pop(start)
    if addr > start:
        segments[start] = addr - start
    if addr + size < start + whole:
        segments[addr + size] = start + whole - addr - size


def test_the_blocks_tile_each_segment(exported: tuple[vramsim.Report, Path]) -> None:
    """Contiguous from the segment's address to its end; sizes and counters as ``_snapshot`` gives them."""
    _, path = exported
    for segment in _snapshot(path)["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            assert block["address"] == address and block["size"] > 0
            assert block["state"] in ("active_allocated", "inactive")
            address += block["size"]
        assert address == segment["address"] + segment["total_size"]
        active = sum(b["size"] for b in segment["blocks"] if b["state"] == "active_allocated")
        assert segment["allocated_size"] == segment["active_size"] == active
        assert segment["segment_type"] in ("small", "large") and segment["stream"] == 0 and segment["device"] == 0


def test_frames_name_the_op_the_tensor_and_the_module_path(exported: tuple[vramsim.Report, Path]) -> None:
    """The first frame is the op and the tensor (dtype, shape, category), then one per module, innermost first."""
    report, path = exported
    snapshot = _snapshot(path)
    history = report.memory_history
    assert history is not None
    checked = 0
    for action, entry in zip(history.actions, snapshot["device_traces"][0], strict=True):
        if action.action != "alloc" or action.tensor is None or history.tensors[action.tensor].shape is None:
            continue
        tensor = history.tensors[action.tensor]
        frames = entry["frames"]
        assert frames[0]["filename"] == tensor.op
        assert frames[0]["name"].startswith(f"{tensor.dtype}{list(tensor.shape)} {tensor.category}")  # type: ignore[arg-type]
        parts = tensor.module.split(".") if tensor.module else []
        assert [f["filename"] for f in frames[1:]] == [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
        checked += 1
    assert checked > 1000
    linear = next(e["frames"] for e in snapshot["device_traces"][0] if e["frames"] and e["frames"][0]["filename"] == "aten.addmm")
    assert f"{linear[1]['filename']}:{linear[1]['line']}:{linear[1]['name']}".startswith("transformer.h.")
