"""What would fit when no setting of the strategy search does: each change that makes a smaller program, searched.

A job no layout holds needs another program, not another layout: fewer tokens per step (a batch of one, else half
the sequence), LoRA adapters in place of full training, QLoRA (4-bit NF4 weights under the adapters, bitsandbytes:
NVIDIA only), a lighter optimizer. Each is searched anew on the same GPUs (its own traces), and offered with its
cheapest setting when one fits, or with the least memory a rank of it measured when none does. On a GPU whose
overheads outside the allocator (CUDA context, workspaces: ``FloorBound.fixed_bytes``) fill its usable memory, no
program fits, and nothing is searched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vramsim.config.quantization import lora_of_rank
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.results.advice import Advice
from vramsim.search.strategy import StrategySearcher, strategy_searcher

__all__ = ["ADVICE_LORA_RANK", "strategy_advice"]

ADVICE_LORA_RANK = 16
"""The adapters' rank offered (peft's examples and the QLoRA paper's 7B-65B runs use 8 to 64)."""

_HEAVY_OPTIMIZERS = ("adamw", "adamw-foreach", "adam")


def strategy_advice(
    searcher: StrategySearcher, gpus: int, gpus_per_node: int | None, *, progress: Callable[[str], None] | None = None
) -> tuple[list[Advice], int]:
    """Each change of ``_changes`` searched on ``gpus`` GPUs of ``searcher``'s device: fitting ones first, then
    the least device memory; and the programs those searches traced."""
    if searcher.bound.fixed_bytes >= searcher.usable:  # the GPU's own overheads fill it: no program fits
        return [], 0
    least = min((c.device_bytes for c in searcher.measured.values()), default=0)
    found = []
    traced = 0
    for change in _changes(searcher):
        if progress is not None:
            progress(f"searching with {', '.join(f'{k}={v}' for k, v in change.items())} on {gpus} GPU(s)")
        try:
            other = strategy_searcher(searcher.model, progress=progress, **{**searcher.base, **change})
            best = other.cheapest(gpus, gpus_per_node)
        except (ConfigError, UnsupportedError):  # a change the model or target refuses is no advice
            continue
        traced += sum(program is not None for program in other.traces.values())
        measured = [c.device_bytes for c in other.measured.values()]
        device_bytes = best.device_bytes if best is not None else min(measured, default=0)
        if not device_bytes:
            continue
        changes = change | (best.options() if best is not None else {})
        found.append(
            Advice(
                changes=changes,
                device_bytes=device_bytes,
                saved_bytes=max(least - device_bytes, 0),
                fits=best is not None,
                traced=True,
            )
        )
    return sorted(found, key=lambda advice: (not advice.fits, advice.device_bytes)), traced


def _changes(searcher: StrategySearcher) -> list[dict[str, Any]]:
    """The smaller programs worth a search for this job; none already set, none the target refuses."""
    config = searcher.config
    changes: list[dict[str, Any]] = []
    if config.batch_size > 1:
        changes.append({"batch_size": 1})
    elif config.seq_len > 1:
        changes.append({"seq_len": config.seq_len // 2})
    if config.lora is None:
        changes.append({"lora": lora_of_rank(ADVICE_LORA_RANK)})
    if config.quantization is None and searcher.target.profile.vendor == "nvidia":
        changes.append({"quantization": "nf4", "lora": config.lora or lora_of_rank(ADVICE_LORA_RANK)})
    if config.optimizer in _HEAVY_OPTIMIZERS:
        changes.append({"optimizer": "adafactor"})
    return changes
