"""What BERT's attention mask costs under autocast, by transformers release: predicted and measured on the CPU.

Given no ``attention_mask``, transformers 4.x's ``BertModel.forward`` makes one of ones and casts it to the
weights' dtype (float32 under autocast); adding it promotes autocast's low-precision attention scores to
float32 before the softmax. transformers 5 adds no mask. The published BERT-large rows
(``published_gpu.py``, the page ran 4.16-4.20) are asked with transformers 4.42 for this reason. This
script trains a tiny BERT (2 layers, hidden 128, 8 heads, batch 2 x 256, no mask) one step with bf16
autocast (the CPU's) and in float32, and prints vramsim's CPU peak beside the real run's
(``vramsim.validation.measure.measure_cpu``). Run it with each release's interpreter, e.g.:

    python benchmarks/bert_mask_by_transformers.py                      # this project's stack
    /path/to/tf442/bin/python benchmarks/bert_mask_by_transformers.py   # transformers 4.42, vramsim installed

Measured here (2026-12-01, torch 2.13): bf16 autocast, 4.42 88,939,740 B against 5.24 73,514,204 B; float32,
89,758,940 and 89,761,004 B (the mask adds no saved tensor). vramsim is within 16 B of all four.
"""

from __future__ import annotations

import transformers
from published_gpu import _ids_and_class_labels  # the BERT-large rows' inputs: ids and labels, no mask

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import measure_cpu
from vramsim.workload.models import load_config


def main() -> None:
    for precision in ("bf16", None):
        config = load_config("google-bert/bert-large-uncased")
        config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size = 128, 2, 8, 512
        config._attn_implementation = "eager"
        options = dict(
            task="train",
            model_class="AutoModelForSequenceClassification",
            seq_len=256,
            batch_size=2,
            inputs=_ids_and_class_labels,
            optimizer="adamw",
            mixed_precision=precision,
        )
        predicted = simulate(config, device="cpu", **options).peak_bytes
        measured = measure_cpu(config, SimulationConfig(device="cpu", **options)).peak_bytes
        print(
            f"transformers {transformers.__version__} {precision or 'fp32'}: predicted {predicted:,} B, "
            f"measured {measured:,} B ({predicted / measured - 1:+.3%})"
        )


if __name__ == "__main__":
    main()
