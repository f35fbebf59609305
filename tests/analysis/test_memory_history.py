"""The allocator history a report keeps when asked: what each allocation holds, and when it is refused."""

from __future__ import annotations

import pytest
import torch
import transformers

import vramsim


def _tiny(layers: int = 2) -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        max_position_embeddings=256,
    )


def test_recomputed_blocks_name_the_storage_they_copy() -> None:
    """Full checkpointing adds recomputed activations in backward (the what-if's timeline is the one recorded):
    each is a copy of a traced storage, with that storage's shape and dtype."""
    report = vramsim.simulate(
        _tiny(), task="train", device="h100-sxm", batch_size=2, seq_len=64, checkpointing="full", memory_history=True
    )
    history = report.memory_history
    assert history is not None
    copies = [t for t in history.tensors if t.copy_of is not None]
    assert copies
    for tensor in copies:
        original = history.tensors[tensor.copy_of]  # type: ignore[index]
        assert (tensor.shape, tensor.dtype, tensor.sid) == (original.shape, original.dtype, None)
        assert original.sid == tensor.copy_of
    traced = [t for t in history.tensors if t.sid is not None]
    assert all(t.shape is not None and t.dtype for t in traced)


def test_the_cpu_target_has_no_allocator_history() -> None:
    """On the CPU there is no caching allocator: asking for its history is a ConfigError naming the way out."""
    config = _tiny(layers=1)
    with pytest.raises(vramsim.ConfigError, match=r"the cpu target has none: name a GPU \(--device\)"):
        vramsim.simulate(config, task="forward", device="cpu", batch_size=1, seq_len=8, memory_history=True)


def test_the_history_is_left_out_unless_asked() -> None:
    """Plain reports stay as they were: no history, nothing more in their JSON."""
    config = _tiny(layers=1)
    report = vramsim.simulate(config, task="forward", device="h100-sxm", batch_size=1, seq_len=8)
    assert report.memory_history is None and report.to_dict()["memory_history"] is None


class _TinyMLP(torch.nn.Module):
    """A plain PyTorch module, its own inputs and loss: no Hugging Face config behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


@pytest.mark.parametrize("expandable", [False, True], ids=["plain", "expandable"])
def test_a_custom_modules_history_sums_to_its_peaks(expandable: bool) -> None:
    """Over the last step the history's blocks peak at ``peak_bytes`` and its segments at ``reserved_bytes``
    (no reserved-only overheads on an H100); each traced block names its module."""
    report = vramsim.simulate(
        _TinyMLP(),
        inputs=lambda batch_size, seq_len: {"x": torch.randn(batch_size, seq_len, 256)},
        loss=lambda output: output.float().pow(2).mean(),
        task="train",
        device="h100-sxm",
        batch_size=4,
        seq_len=64,
        expandable_segments=expandable,
        memory_history=True,
    )
    history = report.memory_history
    assert history is not None and history.expandable_segments == expandable
    allocated = reserved = peak_allocated = 0
    peak_reserved = None
    for action in history.actions:
        if action.event >= history.steady_first_event and peak_reserved is None:
            peak_reserved = reserved  # reset_peak_stats where the last step begins
        allocated += {"alloc": 1, "free_completed": -1}.get(action.action, 0) * action.size
        reserved += {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}.get(
            action.action, 0
        ) * action.size
        if peak_reserved is not None:
            peak_allocated, peak_reserved = max(peak_allocated, allocated), max(peak_reserved, reserved)
    assert (peak_allocated, peak_reserved, history.reserved_overhead_bytes) == (report.peak_bytes, report.reserved_bytes, 0)
    modules = {history.tensors[a.tensor].module for a in history.actions if a.action == "alloc" and a.tensor is not None}
    assert {"up", "down"} <= modules
    weight = next(t for t in history.tensors if t.shape == (1024, 256))
    assert (weight.category, weight.dtype, weight.op) == ("parameters", "float32", "<pre-existing>")
