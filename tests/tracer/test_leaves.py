"""The tracer's tensor walk finds what pytree finds, in its order; the collector pause restores the collector."""

from __future__ import annotations

import gc

import torch
from torch.utils._pytree import tree_leaves

from vramsim.tracer.collector import collector_paused
from vramsim.tracer.leaves import tensor_leaves


def test_tensor_leaves_match_pytree_order() -> None:
    """Nested tuples, lists and dicts of an op's arguments: the same tensors as tree_leaves, in the same order."""
    a, b, c, d = (torch.empty(n, device="meta") for n in range(1, 5))
    args = ((a, 1.0, [b, None, (c,)]), {"out": d, "alpha": 2, "nested": {"x": [a]}})
    expected = [leaf for leaf in tree_leaves(args) if isinstance(leaf, torch.Tensor)]
    found = tensor_leaves(args)
    assert [id(t) for t in found] == [id(t) for t in expected] and len(found) == 5
    assert tensor_leaves(a) == [a] and tensor_leaves(3) == []


def test_collector_paused_restores_its_state() -> None:
    """Paused inside, enabled again after; left disabled where it was disabled before."""
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
