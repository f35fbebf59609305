"""One inference model over several GPUs by a device map: each GPU's timeline cut from the one trace.

accelerate's dispatch (``dispatch_model``, ``AlignDevicesHook``) runs each module where its weights are and
copies a module's inputs to that device when they come from another one; the model's own inputs and outputs stay
on GPU 0 (``io_same_device`` on the top module). So a GPU holds:

- the weights and buffers of the modules placed on it (a tied weight once, where its tied group is placed);
- what the ops of its modules make: activations, temporaries, and the KV cache of its layers (layer i's cache lives
  on layer i's device);
- a copy of every tensor one of its modules reads that was made on another GPU (the hidden states at a boundary,
  the rotary tables and the mask each layer reads), counted for the original's lifetime;
- the generation loop's tensors (logits processing, sampling, the growing ``input_ids``) on GPU 0.
"""

from __future__ import annotations

import networkx as nx

from vramsim.estimators.timeline import Timeline, order_blocks
from vramsim.results.report import Assumption
from vramsim.tracer.graph import storage_node, storage_nodes
from vramsim.workload.parallel.device_map import DevicePlacement

__all__ = ["device_timelines", "placement_note"]

_HELD = ("parameters", "buffers")


def device_timelines(graph: nx.MultiDiGraph, timeline: Timeline, placement: DevicePlacement) -> list[Timeline]:
    """Each GPU's timeline (by index, every GPU ``placement`` offered memory on), cut from ``timeline``."""
    gpus = len(placement.max_memory)
    blocks: list[list] = [[] for _ in range(gpus)]
    for sid, attrs in storage_nodes(graph):
        for device in sorted(_devices(graph, sid, attrs, placement)):
            blocks[device].append(timeline.blocks[sid].copy())
    for block in timeline.blocks[graph.graph["storage_count"] :]:  # added by a what-if: its module's GPU
        blocks[placement.device_of(block.module)].append(block.copy())
    return [order_blocks(each, graph.graph["step_clocks"]) for each in blocks]


def _devices(graph: nx.MultiDiGraph, sid: int, attrs: dict[str, object], placement: DevicePlacement) -> set[int]:
    """The GPUs holding storage ``sid``: its weight's module's, or its maker's and every reader's."""
    if attrs["category"] in _HELD and attrs["owner"]:
        return {placement.device_of(str(attrs["owner"]).rpartition(".")[0])}
    node = storage_node(sid)
    made = [op for op, _, key in graph.in_edges(node, keys=True) if key == "produced"]
    devices = {placement.device_of(str(graph.nodes[op]["module"])) for op in made}
    devices |= {placement.device_of(str(graph.nodes[op]["module"])) for _, op in graph.out_edges(node)}
    return devices or {placement.device_of("")}


def placement_note(strategy: str, placement: DevicePlacement) -> Assumption:
    """What the per-GPU figures rest on."""
    offered = ", ".join(f"GPU {gpu}: {nbytes:,} B" for gpu, nbytes in sorted(placement.max_memory.items()))
    return Assumption(
        name="device_map",
        detail=f"from_pretrained(device_map={strategy!r}): the modules placed by accelerate's infer_auto_device_map on "
        f"the meta model against max_memory {offered} (transformers' get_balanced_memory for auto and balanced; "
        "GPU 0 keeps room for the largest layer; with no --max-memory each GPU offers its capacity less a bare CUDA "
        "context, assumptions.CUDA_CONTEXT_BYTES, as get_max_memory reads torch.cuda.mem_get_info; --gpus N on "
        "forward or generate with no layout is device_map='auto'); each GPU holds its modules' weights, what their "
        "ops make (layer i's KV cache on layer i's GPU) and a copy of each tensor they read from another GPU, for the original's "
        "lifetime (accelerate's AlignDevicesHook copies inputs to the module's device); the generation loop's "
        "tensors on GPU 0; each GPU its own CUDA context and cuBLAS workspace, no NCCL (the copies are "
        "peer-to-peer .to() calls); the figures above are the busiest GPU's",
    )
