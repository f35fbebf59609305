"""Expert parallelism's all-to-all buffers, placed on the timeline of the program one EP rank runs.

The rank's program (``vramsim/workload/parallel/expert.py``) runs its local experts on the rows routed to
them; it does not exchange them. torchtitan's ``ExpertParallel`` does, around each call of a MoE
layer's experts module (``torchtitan/distributed/expert_parallel.py``):

- dispatch: the routed rows (``tokens x top_k``, hidden wide, in the hidden states' dtype) are sent by
  ``all_to_all_single_autograd`` into a receive buffer of as many rows (balanced routing), which
  ``_permute`` copies into expert order: the receive buffer and the permuted copy live beside the
  routed rows for the exchange, then the traced program's own routed rows stand for the permuted copy;
- combine: ``_unpermute`` copies the experts' output back into token order and the all-to-all sends it
  into a receive buffer: two more buffers of the same size beside the experts' output;
- backward: the autograd all-to-all runs both exchanges again, reversed.

Each exchange adds two buffers of the routed rows for its moment, at the op that makes the routed
rows (dispatch) and the experts call's last op (combine), in forward and in backward.
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx

from vramsim.tracer.graph import storage_nodes

from .timeline import Block, Timeline, order_blocks

__all__ = ["ALL_TO_ALL", "EXPERTS_MODULE", "all_to_all_buffers", "expert_weight"]

ALL_TO_ALL = "ep.all_to_all"
"""The op name of the added buffers (category ``communication``)."""
EXPERTS_MODULE = ".experts"
"""How the module holding a MoE layer's routed experts ends: transformers' 3-D ``gate_up_proj`` / ``down_proj``
(shared experts are ``shared_expert``/``shared_experts``, whole on every rank)."""
_AFTER = 1 << 30
"""Seq of the added events at a clock: after any a checkpointing what-if placed there (tier 1)."""


def all_to_all_buffers(graph: nx.MultiDiGraph, timeline: Timeline, *, rows: int, hidden: int) -> tuple[Timeline, int]:
    """``timeline`` with each experts call's dispatch and combine buffers, and the bytes of one buffer
    (``rows`` routed rows of ``hidden``, in the dtype the traced routed rows have)."""
    calls: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    """(experts module, step, phase) -> clocks of its ops."""
    routed: dict[tuple[str, int], tuple[int, int]] = {}
    """(experts module, step) -> clock of the op that made the routed rows, and their bytes per element."""
    produced = {sid: attrs for sid, attrs in storage_nodes(graph)}
    for node, attrs in graph.nodes(data=True):
        if node[0] != "op" or not attrs["module"].endswith(EXPERTS_MODULE) or attrs["phase"] not in ("forward", "backward"):
            continue
        key = (attrs["module"], attrs["step"])
        calls[(*key, attrs["phase"])].append(attrs["clock_after"])
        for _, (_, sid), kind in graph.out_edges(node, keys=True):
            shape = tuple(produced[sid]["shape"])
            if kind == "produced" and attrs["phase"] == "forward" and shape == (rows, hidden):
                made = (attrs["clock_after"], produced[sid]["nbytes"] // (rows * hidden))
                routed[key] = min(routed.get(key, made), made)
    if not routed:
        raise NotImplementedError(f"ep: no experts call made the {rows} x {hidden} routed rows an all-to-all would send")
    nbytes = max(rows * hidden * itemsize for _, itemsize in routed.values())
    blocks = [block.copy() for block in timeline.blocks]
    for (module, step, phase), clocks in calls.items():
        if (module, step) not in routed:
            continue
        moments = (routed[(module, step)][0], max(clocks)) if phase == "forward" else (min(clocks), max(clocks))
        for clock in moments:
            for n in range(2):
                blocks.append(
                    Block(
                        nbytes=nbytes,
                        category="communication",
                        module=module,
                        phase=phase,
                        op=ALL_TO_ALL,
                        step=step,
                        alloc_at=(clock, 1, _AFTER + n),
                        free_at=(clock, 1, _AFTER + 2),
                    )
                )
    return order_blocks(blocks, graph.graph["step_clocks"]), nbytes


def expert_weight(name: str) -> bool:
    """Whether weight ``name`` is a routed expert's, which expert parallelism splits (the others are whole)."""
    return f"{EXPERTS_MODULE}." in name
