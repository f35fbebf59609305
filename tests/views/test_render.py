"""The terminal view: folded layers, 80 columns, units, ``vramsim.report_text``."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
import transformers
from rich.console import Console

import vramsim
from vramsim.errors import ConfigError
from vramsim.results.report import LayerRow, Report
from vramsim.views.folding import fold_layers
from vramsim.views.report import render_report
from vramsim.views.units import format_bytes


def row(module: str, parameters: int = 10, saved: int = 100, peak: int = 1000) -> LayerRow:
    return LayerRow(module=module, parameters=parameters, parameter_bytes=4 * parameters, activation_bytes=saved, peak_bytes=peak)


def test_alike_layers_fold_into_one_row() -> None:
    """Consecutive indices with the same structure fold; figures are per layer, the peak the highest."""
    rows = [
        row("embed", 50),
        *(row(f"model.layers.{i}", saved=90 if i == 0 else 100, peak=1000 + i) for i in range(4)),
        row("lm_head", 50),
    ]
    folded = fold_layers(rows)
    assert [r.module for r in folded] == ["embed", "model.layers.0-3 x4", "lm_head"]
    layers = folded[1]
    assert (layers.count, layers.parameters, layers.parameter_bytes) == (4, 10, 40)
    assert layers.activation_bytes == (90, 100) and layers.peak_bytes == 1003
    assert [r.module for r in fold_layers(rows, fold=False)] == [r.module for r in rows]


def test_fold_stops_where_structure_or_index_breaks() -> None:
    """A layer of another size (DeepSeek's dense first layers) or a gap in the indices starts a new row."""
    rows = [
        row("m.layers.0", 5),
        row("m.layers.1", 5),
        row("m.layers.2", 9),
        row("m.layers.3", 9),
        row("m.layers.5", 9),
        row("m.conv1", 9),
        row("m.conv2", 9),
    ]
    names = [r.module for r in fold_layers(rows)]
    assert names == ["m.layers.0-1 x2", "m.layers.2-3 x2", "m.layers.5", "m.conv1", "m.conv2"]


def test_fold_keeps_what_follows_the_index() -> None:
    rows = [row(f"unet.blocks.{i}.attn") for i in range(3)]
    assert [r.module for r in fold_layers(rows)] == ["unet.blocks.0-2.attn x3"]


def test_units_go_up_to_tib() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**40) == "3.00 TiB"
    assert format_bytes(2**50) == "1024.00 TiB"


TINY = transformers.LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=500,
    max_position_embeddings=256,
)


@pytest.fixture(scope="module")
def lora_report() -> Report:
    return vramsim.simulate(TINY, seq_len=32, device="h100", lora={"r": 4, "target_modules": "all-linear"})


def render(report: Report, *, fold: bool = True, width: int = 80) -> str:
    text = io.StringIO()
    render_report(report, Console(file=text, width=width), fold=fold)
    return text.getvalue()


def test_lora_adapters_belong_to_their_layer(lora_report: Report) -> None:
    """peft's lora_A/lora_B/lora_dropout/base_layer are not rows: each decoder layer is one row with them."""
    names = [r.module for r in lora_report.layers]
    assert names[1:4] == [f"base_model.model.model.layers.{i}" for i in range(3)]
    assert not any("lora" in name or "base_layer" in name for name in names)
    with torch.device("meta"):
        plain = transformers.LlamaForCausalLM(TINY).model.layers[0]
    adapters = sum(4 * (m.in_features + m.out_features) for m in plain.modules() if isinstance(m, torch.nn.Linear))
    assert lora_report.layers[1].parameters == sum(p.numel() for p in plain.parameters()) + adapters
    out = render(lora_report)
    rows = [line for line in out.split("Per layer")[1].splitlines() if line.startswith("\u2502")]
    assert [line.split("\u2502")[1].strip() for line in rows] == [
        "model.embed_tokens",
        "model.layers.0-2 x3",
        "model.norm",
        "model.rotary_emb",
        "lm_head",
    ]
    assert "module names without peft's base_model.model. prefix" in out


def test_every_table_fits_80_columns_with_its_numbers(lora_report: Report) -> None:
    """At 80 columns no line is wider and every figure of the layer table is printed whole; a long
    module path gives way (cut from the left), not the numbers."""
    long = [
        dataclasses.replace(r, module="model.some_rather_long_encoder_name.decoder_stack." + r.module) for r in lora_report.layers
    ]
    huge = dataclasses.replace(long[0], parameters=405_000_000_000, parameter_bytes=3 * 2**40)
    report = dataclasses.replace(lora_report, layers=[huge, *long[1:]])
    for fold in (True, False):
        out = render(report, fold=fold)
        assert max(len(line) for line in out.splitlines()) <= 80
        table = out.split("Per layer")[1].splitlines()
        for layer in fold_layers(report.layers, fold=fold):
            line = next(line for line in table if f"{layer.module[-12:]} \u2502" in line)  # the path's end is kept
            assert f" {layer.parameters:,} " in line and format_bytes(layer.parameter_bytes) in line
            least, most = (format_bytes(n) for n in layer.activation_bytes)
            assert (most if least == most else f"\u2264{most}") in line and format_bytes(layer.peak_bytes) in line
            assert line.split("\u2502")[1].strip().startswith("\u2026")  # the module path was cut, from the left
    assert "405,000,000,000" in out and "3.00 TiB" in out
    assert "\u2264147.75 KiB" in render(lora_report)  # layer 0 saves less: its input is the embedding's output
    assert "\u2264: its layers differ, the most one saves" in render(lora_report)


def test_report_text_is_the_summary_or_the_tables(lora_report: Report) -> None:
    summary = vramsim.report_text(lora_report, summary=True)
    assert summary.startswith(lora_report.model) and "Peak allocated" in summary and "FITS on h100" in summary
    assert "Per layer" not in summary
    text = vramsim.report_text(lora_report)
    assert text.startswith(summary) and "At the peak" in text and "model.layers.0-2 x3" in text
    unfolded = vramsim.report_text(lora_report, layers="all")
    assert all(f"model.layers.{i} " in unfolded for i in range(3)) and "0-2 x3" not in unfolded
    with pytest.raises(ConfigError, match="unknown layers 'some'"):
        vramsim.report_text(lora_report, layers="some")  # type: ignore[arg-type]


def test_each_layer_of_a_list_is_one_row() -> None:
    """A layer's own lists (a UNet block's resnets, a MoE layer's experts) stay inside its row."""
    from vramsim.analysis.summary import layer_specs

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.experts = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Module()
            self.body.blocks = torch.nn.ModuleList(Block() for _ in range(2))
            self.head = torch.nn.Linear(4, 2)

    specs = layer_specs({"": Net()})
    assert [(s.module, s.parameters) for s in specs] == [("body.blocks.0", 60), ("body.blocks.1", 60), ("head", 10)]
