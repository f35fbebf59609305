"""Bytes autograd saves per BERT-large layer on the torch/transformers stack that runs this script, measured.

The published BERT-large rows (transformers' "Model training anatomy", V100, early 2022) ran PyTorch 1.10
and transformers 4.16. This script runs the same training forward (BERT-large shapes, sequence
classification, batch 4, sequence 512, float32, eager attention, dropout on) on the CPU under
``torch.autograd.graph.saved_tensors_hooks`` and sums the distinct storages autograd saves, for one and
two layers: the difference is one layer's. It also lists the autograd nodes saving a (batch, heads,
seq, seq) tensor. Run it with each stack's interpreter, e.g. the 2022 one:

    python3.9 -m venv /tmp/stack2022 && /tmp/stack2022/bin/pip install torch==1.10.2 transformers==4.16.2 "numpy<1.24"
    /tmp/stack2022/bin/python benchmarks/saved_by_torch_release.py
    python benchmarks/saved_by_torch_release.py          # this project's stack

Measured here (2026-12-01): torch 1.10.2 + transformers 4.16.2 save 419,463,176 B per layer, torch 2.13 +
transformers 5.24 352,354,304 B; the difference, 67,108,864 B, is one (4, 16, 512, 512) float32 tensor:
1.10's ``SoftmaxBackward0`` saves ``self`` (the masked scores) beside ``result``. ``--torch-autograd 1.10``
models it (``tracer/kernels/legacy_autograd.py``); tests/tracer/test_legacy_autograd.py holds these figures.
"""

from __future__ import annotations

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

BATCH, SEQ = 4, 512


def _storage(tensor: torch.Tensor) -> tuple[int, int]:
    """(address, bytes) of the storage under ``tensor``, on torch 1.x and 2.x."""
    if hasattr(tensor, "untyped_storage"):
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    return tensor.storage().data_ptr(), tensor.storage().size() * tensor.element_size()


def _model(layers: int) -> torch.nn.Module:
    config = BertConfig(
        hidden_size=1024, num_hidden_layers=layers, num_attention_heads=16, intermediate_size=4096, vocab_size=30522, num_labels=2
    )
    if int(transformers.__version__.split(".")[0]) >= 5:
        config._attn_implementation = "eager"  # the 2022 code had no other
    return BertForSequenceClassification(config).train()


def _forward(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.randint(0, 30522, (BATCH, SEQ))
    return model(input_ids=ids, labels=torch.zeros(BATCH, dtype=torch.long)).loss


def saved_bytes(layers: int) -> int:
    """Bytes of the distinct non-parameter storages autograd saves in one training forward."""
    torch.manual_seed(0)
    model = _model(layers)
    weights = {parameter.data_ptr() for parameter in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        address, nbytes = _storage(tensor)
        if address not in weights:
            saved[address] = nbytes
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        _forward(model)
    return sum(saved.values())


def score_savers() -> list[str]:
    """``Node._saved_name`` of every autograd node of a one-layer model saving a (batch, heads, seq, seq) tensor."""
    loss = _forward(_model(1))
    found, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in (n for n in dir(node) if n.startswith("_saved_")):
            value = getattr(node, name)
            if isinstance(value, torch.Tensor) and tuple(value.shape) == (BATCH, 16, SEQ, SEQ):
                found.append(f"{type(node).__name__}.{name}")
        stack.extend(next_node for next_node, _ in node.next_functions)
    return sorted(found)


def main() -> None:
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    per_layer = saved_bytes(2) - saved_bytes(1)
    print(f"saved per layer: {per_layer:,} B ({per_layer / 2**20:.1f} MiB)")
    print("nodes saving a (batch, heads, seq, seq) tensor:", ", ".join(score_savers()))


if __name__ == "__main__":
    main()
