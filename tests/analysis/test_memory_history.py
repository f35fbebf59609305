"""The allocator history a report keeps when asked: what each allocation holds, and when it is refused."""

from __future__ import annotations

import pytest
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
