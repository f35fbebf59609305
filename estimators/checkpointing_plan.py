"""The activation-checkpointing choices (``--checkpointing``), parsed, and the budgeted ``auto`` plan.

The choices:

- ``none``: autograd keeps every saved activation until its backward.
- ``full``: every decoder layer is checkpointed (``gradient_checkpointing_enable``).
- ``every:K``: every K-th layer is checkpointed (``torch.utils.checkpoint`` around it).
- ``selective``: every layer is checkpointed, but matmul and attention outputs are saved and only
  the cheap ops are recomputed (``create_selective_checkpoint_contexts`` with a save-the-matmuls policy,
  PyTorch's SAC example).
- ``selective:torchtitan``: torchtitan's op-level selective AC (``mode="selective"``,
  ``selective_ac_option="op"``): its save list, but every second ``aten.mm`` of each block recomputed.
- ``first:F`` and ``first:F+selective:S``: the first F decoder layers checkpointed in full (Megatron-LM's
  ``--recompute-method block --recompute-num-layers F``), the next S selectively, the rest not at all.
- ``auto``: the ``first:F+selective:S`` that fits the device with the least recompute
  (``budgeted_plan``), the per-layer choice PyTorch's ``sac_ilp.py`` makes under a memory budget, each
  candidate's memory taken from the graph's what-if.
- ``offload``: saved activations are copied to host memory and fetched back in backward
  (``torch.autograd.graph.save_on_cpu``).
- ``all``: every fixed choice above, from one trace, as a table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "CHECKPOINTING_CHOICES", "SELECTIVE_SAVED_OPS", "CheckpointPlan", "budgeted_plan", "first_layers",
    "parse_checkpointing",
]  # fmt: skip

CHECKPOINTING_CHOICES = (
    "none",
    "full",
    "every:K",
    "selective",
    "selective:torchtitan",
    "first:F[+selective[:torchtitan]:S]",
    "auto",
    "offload",
    "all",
)

SELECTIVE_SAVED_OPS = frozenset(
    "aten.mm aten.addmm aten.bmm aten.baddbmm aten._scaled_mm aten.convolution "
    "aten._scaled_dot_product_flash_attention aten._scaled_dot_product_efficient_attention "
    "aten._scaled_dot_product_cudnn_attention aten._flash_attention_forward aten._efficient_attention_forward "
    "vramsim_flash_attn.fa2_forward vramsim_flash_attn.fa3_forward".split()
)
"""Ops whose outputs ``selective`` keeps (matmuls, convolutions, fused attention, flash-attn's
included): the costly FLOPs; everything else in a checkpointed block is recomputed."""

TORCHTITAN_SAVED_OPS = frozenset(
    "aten.mm aten._scaled_dot_product_efficient_attention aten._scaled_dot_product_flash_attention "
    "aten._scaled_dot_product_cudnn_attention aten._scaled_dot_product_attention_math "
    "aten._scaled_dot_product_fused_attention_overrideable _c10d_functional.reduce_scatter_tensor "
    "_c10d_functional.all_to_all_single aten.max".split()
)
"""torchtitan's ``_op_sac_save_list`` (torchtitan/models/llama3/infra/parallelize.py): what
``selective:torchtitan`` keeps, except every second ``aten.mm`` of a block (its policy counts the
block's matmuls afresh in each forward and each recompute, and recomputes the even ones)."""


@dataclass(frozen=True, slots=True)
class CheckpointPlan:
    """One checkpointing choice, parsed."""

    kind: str
    """``none``, ``full``, ``every``, ``selective``, ``first``, ``auto``, ``offload`` or ``all``."""
    every: int = 1
    """For ``every``: checkpoint layers 0, K, 2K, ... (``full`` is ``every:1``)."""
    torchtitan: bool = False
    """For ``selective`` (and ``first``'s selective layers): torchtitan's policy (``TORCHTITAN_SAVED_OPS``, every
    second matmul recomputed)."""
    full_layers: int = 0
    """For ``first``: layers 0 .. F-1 checkpointed in full."""
    selective_layers: int = 0
    """For ``first``: the S layers after those checkpointed selectively (``SELECTIVE_SAVED_OPS`` kept)."""

    @property
    def spec(self) -> str:
        """The choice as ``--checkpointing`` spells it, so reports name it the way it was asked for."""
        if self.kind == "every":
            return f"every:{self.every}"
        if self.kind == "first":
            policy = "torchtitan:" if self.torchtitan else ""
            tail = f"+selective:{policy}{self.selective_layers}" if self.selective_layers else ""
            return f"first:{self.full_layers}{tail}"
        return "selective:torchtitan" if self.torchtitan else self.kind

    def selective_at(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` is checkpointed selectively (its saved ops kept, ``saves``)."""
        if self.kind == "first":
            return self.full_layers <= layer < self.full_layers + self.selective_layers
        return self.kind == "selective"

    def saves(self, op: str, matmuls: int) -> bool:
        """Whether a ``selective`` checkpoint keeps the output of ``op``, the block's ``matmuls``-th ``aten.mm`` so far."""
        if not self.torchtitan:
            return op in SELECTIVE_SAVED_OPS
        return op in TORCHTITAN_SAVED_OPS and not (op == "aten.mm" and matmuls % 2 == 0)

    def checkpointed(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) runs inside a checkpoint."""
        if self.kind in ("full", "selective"):
            return True
        if self.kind == "first":
            return layer < self.full_layers + self.selective_layers
        return self.kind == "every" and layer % self.every == 0


def first_layers(full: int, selective: int = 0, *, torchtitan: bool = False) -> CheckpointPlan:
    """``first:F+selective:S`` (``first:F+selective:torchtitan:S``); with no layer at all, ``none``."""
    if not full + selective:
        return CheckpointPlan("none")
    return CheckpointPlan("first", full_layers=full, selective_layers=selective, torchtitan=torchtitan and selective > 0)


def parse_checkpointing(value: object) -> CheckpointPlan:
    """One of ``CHECKPOINTING_CHOICES``; ``ValueError`` naming the choices otherwise."""
    text = str(value).strip().lower()
    if text in ("none", "full", "selective", "auto", "offload", "all"):
        return CheckpointPlan(text)
    if text == "selective:torchtitan":
        return CheckpointPlan("selective", torchtitan=True)
    head, _, count = text.partition(":")
    if head == "every" and count.isdigit() and int(count) >= 1:
        return CheckpointPlan("full") if int(count) == 1 else CheckpointPlan("every", int(count))
    if head == "first":
        full, _, selective = count.partition("+selective:")
        titan = selective.startswith("torchtitan:")
        selective = selective.removeprefix("torchtitan:")
        if full.isdigit() and (selective.isdigit() or "+" not in count):
            return first_layers(int(full), int(selective or 0), torchtitan=titan)
    raise ValueError(f"unknown checkpointing {value!r}; choose one of: {', '.join(CHECKPOINTING_CHOICES)}")


def budgeted_plan(layers: int, measure: Callable[[CheckpointPlan], tuple[bool, int]]) -> CheckpointPlan:
    """``auto``: the ``first:F+selective:S`` that fits with the fewest recomputed FLOPs, ``measure`` giving a
    plan's fit and recomputed FLOPs (its what-if on the device).

    As in PyTorch's ``sac_ilp.py``, each layer takes one of a few discrete choices (none, a selective
    policy, full) and the least recompute that brings the step under the memory budget wins. For each
    selective policy (``selective``'s and torchtitan's), memory falls as a layer moves from none to
    selective to full, so two binary searches find the plan: the least F for which
    ``first:F+selective:(L-F)`` fits, then the least S for that F (about 2 log2 L what-ifs each); the
    policy whose plan recomputes fewer FLOPs wins. Layers are checkpointed from the first on (Megatron-LM's
    block method): their recompute runs last in backward, when the least is live. The caching
    allocator's rounding can break the monotony by a segment near the budget. Nothing fits: ``full``.
    """
    if measure(CheckpointPlan("none"))[0]:
        return CheckpointPlan("none")
    if not measure(CheckpointPlan("full"))[0]:
        return CheckpointPlan("full")
    found = [_searched(layers, measure, torchtitan) for torchtitan in (False, True)]
    return min(found, key=lambda plan: (measure(plan)[1], plan.selective_layers))


def _searched(layers: int, measure: Callable[[CheckpointPlan], tuple[bool, int]], torchtitan: bool) -> CheckpointPlan:
    """``budgeted_plan``'s two binary searches with one selective policy."""

    def plan(full: int, selective: int) -> CheckpointPlan:
        if full == layers:
            return CheckpointPlan("full")
        if selective == layers:
            return CheckpointPlan("selective", torchtitan=torchtitan)
        return first_layers(full, selective, torchtitan=torchtitan)

    full = _least(lambda f: measure(plan(f, layers - f))[0], layers)
    return plan(full, _least(lambda s: measure(plan(full, s))[0], layers - full))


def _least(ok: Callable[[int], bool], high: int) -> int:
    """The least n in [0, high] with ``ok(n)``, ``ok`` monotone and ``ok(high)`` true."""
    low = 0
    while low < high:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle + 1
    return low
