"""Every patch vramsim applies to torch or transformers is undone when a simulation ends."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import vramsim
from vramsim.tracer import patches
from vramsim.tracer.data_dependent import seed
from vramsim.tracer.data_dependent.shadows import SEEDS


def _originals() -> dict[str, object]:
    return {p.name: p.current() for p in patches.PATCHES}


def test_a_simulation_leaves_every_patched_attribute_as_it_found_it() -> None:
    """The registry's own attributes are the originals again, and no loaded module holds a replacement."""
    import transformers

    before = _originals()
    config = transformers.LlamaConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4, vocab_size=64
    )
    vramsim.simulate(config, task="train", seq_len=8, device="h100", mixed_precision="bf16", checkpointing="full")
    assert _originals() == before
    assert patches.leftovers() == []
    assert not torch.nn.modules.module._has_any_global_hook()  # torch's handle alone leaves a with_kwargs flag


def test_a_patch_is_found_while_applied_and_undone_on_error() -> None:
    """``leftovers`` sees a live replacement (so the check above can fail), and an error still restores."""
    original = torch.get_rng_state
    try:
        with patches.dispatched_rng_state():
            assert patches.leftovers() == ["torch.get_rng_state"]
            raise KeyError("boom")
    except KeyError:
        pass
    assert torch.get_rng_state is original and patches.leftovers() == []


def test_a_module_first_imported_during_the_simulation_is_restored() -> None:
    """Nemotron's modeling module imports ``maybe_autocast`` by name while the emulation patches it."""
    script = textwrap.dedent("""
        import sys
        import transformers
        import vramsim
        from transformers.utils import generic
        from vramsim.tracer import patches

        name = "transformers.models.nemotron.modeling_nemotron"
        assert name not in sys.modules
        config = transformers.NemotronConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                             num_attention_heads=4, num_key_value_heads=4, vocab_size=256)
        vramsim.simulate(config, task="train", seq_len=16, device="h100", mixed_precision="bf16")
        assert sys.modules[name].maybe_autocast is generic.maybe_autocast, sys.modules[name].maybe_autocast
        assert patches.leftovers() == [], patches.leftovers()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


def test_seeded_values_do_not_outlive_a_simulation() -> None:
    """Input values vramsim remembers for a trace are forgotten when the trace ends."""
    kept = seed(torch.arange(4), "meta")
    vramsim.simulate(
        lambda: torch.nn.Linear(4, 4),
        task="forward",
        device="cpu",
        inputs=lambda b, s: {"input": torch.ones(b, 4, device="meta")},
        loss=lambda out: out.sum(),
    )
    assert not SEEDS.has(kept)


def test_without_maybe_autocast_torch_autocast_on_meta_goes_to_the_emulation(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """transformers 4.42 has no ``maybe_autocast``: its rotary embeddings call ``torch.autocast(device_type=
    x.device.type, enabled=False)``, which torch refuses for meta; while tracing, those calls are emulated."""
    from transformers.utils import generic

    class Rotary(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(device_type=x.device.type, enabled=False):
                return self.proj(x).float()

    with pytest.raises(RuntimeError):
        torch.autocast(device_type="meta")
    original = torch.autocast
    monkeypatch.delattr(generic, "maybe_autocast")
    report = vramsim.simulate(
        Rotary(),
        task="forward",
        batch_size=2,
        seq_len=4,
        device="h100",
        mixed_precision="bf16",
        inputs=lambda batch, seq: {"x": torch.zeros(batch, seq, 8)},
    )
    assert report.peak_bytes > 0
    assert torch.autocast is original and patches.leftovers() == []
