"""``vramsim.inspect`` on a tiny custom module built from this file (``file.py:build``): its tree's parameters are the
module's own counts, and its saved activations per module are what autograd really saves in a CPU run."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

import vramsim

WIDTH, BATCH, SEQ = 32, 2, 8


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.out = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(torch.nn.functional.gelu(self.fc(self.norm(x))))  # (B, T, WIDTH)


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(WIDTH, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def build() -> nn.Module:
    return Tiny()


def feed(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, seq, 8)}


def loss(output: torch.Tensor) -> torch.Tensor:
    return output.pow(2).mean()


OPTIONS: dict[str, Any] = {"inputs": feed, "loss": loss, "batch_size": BATCH, "seq_len": SEQ, "device": "cpu", "dtype": "fp32"}


@pytest.fixture(scope="module")
def inspected() -> vramsim.Inspection:
    return vramsim.inspect(f"{__file__}:build", depth=3, **OPTIONS)


def _nodes(node: vramsim.Inspection | Any) -> dict[str, Any]:
    tree = node.tree if isinstance(node, vramsim.Inspection) else node
    found = {tree.path: tree}
    for child in tree.children:
        found |= _nodes(child)
    return found


class _Creators(TorchFunctionMode):
    """Which module made each storage: the innermost module running when a torch function returned it new (not one
    of its inputs' storages, so an address the CPU allocator hands out again gets its new maker)."""

    def __init__(self, stack: list[str]) -> None:
        super().__init__()
        self.stack, self.made = stack, {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        given = {t.untyped_storage().data_ptr() for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        for tensor in pytree.tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in given:
                self.made[tensor.untyped_storage().data_ptr()] = self.stack[-1]
        return out


def _really_saved() -> dict[str, int]:
    """One real CPU training step's saved tensors (``saved_tensors_hooks``), by the module that made each storage
    (weights and the batch left out, as vramsim counts them apart), bytes summed up the tree."""
    torch.manual_seed(0)
    model = build()
    stack = [""]
    for name, module in model.named_modules():
        if name:
            module.register_forward_pre_hook(lambda _m, _a, name=name: stack.append(name))
            module.register_forward_hook(lambda _m, _a, _o: stack.pop() and None)  # a hook's result replaces the output
    batch = feed(BATCH, SEQ)
    apart = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *batch.values()]}
    saved: dict[int, tuple[str, int]] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in apart:
            saved.setdefault(storage.data_ptr(), (creators.made.get(storage.data_ptr(), stack[-1]), storage.nbytes()))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), _Creators(stack) as creators:
        total = loss(model(**batch))
    total.backward()
    by_module: dict[str, int] = defaultdict(int)
    for module, nbytes in saved.values():
        parts = module.split(".") if module else []
        for end in range(len(parts) + 1):
            by_module[".".join(parts[:end])] += nbytes
    return by_module


def test_parameters_are_the_modules_own(inspected: vramsim.Inspection) -> None:
    """Each node's parameters and weight bytes are its module's, and a parent's are its children's sum."""
    model = build()
    nodes = _nodes(inspected)
    for path, node in nodes.items():
        module = model.get_submodule(path)
        assert node.parameters == sum(p.numel() for p in module.parameters()), path
        assert node.parameter_bytes == sum(p.nbytes for p in module.parameters()), path
        assert node.kind == type(module).__name__
        if node.children:
            assert node.parameters == sum(child.parameters for child in node.children)
    assert {"blocks.0.fc", "blocks.2.out"} <= set(nodes) and "blocks.0.fc.weight" not in nodes
    assert inspected.tree.parameters == 8 * WIDTH + WIDTH + 3 * (2 * WIDTH + 8 * WIDTH * WIDTH + 5 * WIDTH) + 5 * WIDTH + 5


def test_saved_activations_match_a_real_run(inspected: vramsim.Inspection) -> None:
    """What each module saved for backward, as autograd's own hooks count it in a real CPU step."""
    real = _really_saved()
    nodes = _nodes(inspected)
    assert real[""] > 0 and real["blocks.1.fc"] == BATCH * SEQ * 4 * WIDTH * 4  # gelu keeps fc's output
    assert {path: node.saved_bytes for path, node in nodes.items()} == {path: real.get(path, 0) for path in nodes}


def test_the_peak_is_what_is_live_then(inspected: vramsim.Inspection) -> None:
    """The groups at the peak add up to the peak, the tree's root peaked with it, and temporaries come largest first."""
    assert sum(group.nbytes for group in inspected.at_peak) + inspected.overhead_bytes == inspected.peak_bytes
    assert inspected.tree.peak_bytes == inspected.peak_bytes
    sizes = [temp.nbytes for temp in inspected.temporaries]
    assert sizes == sorted(sizes, reverse=True) and sizes
    assert all(temp.lifetime_events is None or temp.lifetime_events > 0 for temp in inspected.temporaries)


def test_depth_zero_is_the_model_alone() -> None:
    inspection = vramsim.inspect(f"{__file__}:build", depth=0, **OPTIONS)
    assert inspection.tree.children == () and inspection.tree.kind == "Tiny"


@pytest.mark.parametrize("depth", [-1, 1.5, True])
def test_a_bad_depth_is_refused(depth: Any) -> None:
    with pytest.raises(vramsim.ConfigError, match="depth must be a whole number"):
        vramsim.inspect(f"{__file__}:build", depth=depth, **OPTIONS)


def test_gpt2_tree_sums_to_its_published_count() -> None:
    """gpt2's tree down to its blocks: 124,439,808 parameters (its tied head counted once, at the embedding), the
    per-layer table's saved activations and peaks for the same modules."""
    options = {"seq_len": 16, "device": "h100"}
    inspection = vramsim.inspect("gpt2", **options)
    report = vramsim.simulate("gpt2", advice="none", **options)
    nodes = _nodes(inspection)
    assert inspection.tree.parameters == 124_439_808 == sum(child.parameters for child in inspection.tree.children)
    assert (nodes["lm_head"].parameters, nodes["lm_head"].shared_parameters) == (0, 38_597_376)
    rows = {row.module: row for row in report.layers}
    assert set(rows) <= set(nodes)
    assert [(nodes[m].saved_bytes, nodes[m].peak_bytes) for m in rows] == [
        (r.activation_bytes, r.peak_bytes) for r in rows.values()
    ]
    assert inspection.peak_bytes == report.peak_bytes
    assert "transformer.h.0.attn" not in nodes  # the default stops at the repeated block


def test_inference_holds_at_the_peak_what_runs_then() -> None:
    """In inference a module's column is what it allocated that is live at the peak: as block 0's GELU allocates,
    the embedding's output (2 x 8 x 32 floats) and block 0's fc output and GELU output (2 x 8 x 128 each); with the
    weights and the batch, that is the peak."""
    inspection = vramsim.inspect(f"{__file__}:build", depth=2, **(OPTIONS | {"task": "forward"}))
    nodes = _nodes(inspection)
    assert not inspection.training
    assert (nodes["embed"].saved_bytes, nodes["blocks.0"].saved_bytes, nodes["blocks.1"].saved_bytes) == (2048, 2 * 8192, 0)
    batch = BATCH * SEQ * 8 * 4
    assert inspection.tree.saved_bytes + inspection.tree.parameter_bytes + batch == inspection.peak_bytes
