"""Activation checkpointing as a what-if over the traced program's graph.

The choices (``--checkpointing``):

- ``none``: autograd keeps every saved activation until its backward.
- ``full``: every decoder layer is checkpointed (``gradient_checkpointing_enable``).
- ``every:K``: every K-th layer is checkpointed (``torch.utils.checkpoint`` around it).
- ``selective``: every layer is checkpointed, but matmul and attention outputs are saved and only
  the cheap ops are recomputed (``create_selective_checkpoint_contexts``, as Megatron's selective
  recompute and torchtitan's op-level SAC policy do).
- ``offload``: saved activations are copied to host memory and fetched back in backward
  (``torch.autograd.graph.save_on_cpu``).
- ``all``: every choice above, from one trace, as a table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKPOINTING_CHOICES", "CheckpointPlan", "parse_checkpointing"]

CHECKPOINTING_CHOICES = ("none", "full", "every:K", "selective", "offload", "all")


@dataclass(frozen=True, slots=True)
class CheckpointPlan:
    """One checkpointing choice, parsed."""

    kind: str
    """``none``, ``full``, ``every``, ``selective``, ``offload`` or ``all``."""
    every: int = 1
    """For ``every``: checkpoint layers 0, K, 2K, ... (``full`` is ``every:1``)."""

    @property
    def spec(self) -> str:
        return f"every:{self.every}" if self.kind == "every" else self.kind

    def checkpointed(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) runs inside a checkpoint."""
        if self.kind in ("full", "selective"):
            return True
        return self.kind == "every" and layer % self.every == 0


def parse_checkpointing(value: object) -> CheckpointPlan:
    """``none|full|every:K|selective|offload|all``; ``ValueError`` naming the choices otherwise."""
    text = str(value).strip().lower()
    if text in ("none", "full", "selective", "offload", "all"):
        return CheckpointPlan(text)
    head, _, count = text.partition(":")
    if head == "every" and count.isdigit() and int(count) >= 1:
        return CheckpointPlan("full") if int(count) == 1 else CheckpointPlan("every", int(count))
    raise ValueError(f"unknown checkpointing {value!r}; choose one of: {', '.join(CHECKPOINTING_CHOICES)}")
