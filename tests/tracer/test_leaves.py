"""The tracer's tensor walk finds what pytree finds, in its order; the collector pause restores the collector."""

from __future__ import annotations

import gc

import pytest
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


def test_a_wrapper_a_weight_holds_is_the_tensors_it_wraps() -> None:
    """quanto's int4 weight holds a PackedTensor whose nominal size is the unpacked values: its bytes are the
    uint8 data it wraps (two values a byte), found through ``__tensor_flatten__``."""
    quanto = pytest.importorskip("optimum.quanto")
    from vramsim.tracer.leaves import attached_tensors

    linear = quanto.QLinear(256, 64, weights=quanto.qint4, device="meta")
    linear.freeze()
    held = dict(attached_tensors(linear.weight))
    assert set(held) == {"_data._data", "_scale", "_shift"}
    assert held["_data._data"].nbytes == 64 * 256 // 2 and type(held["_data._data"]) is torch.Tensor
