"""Under tensor parallel ``parameters`` is one rank's share: the report says so and gives the whole model's."""

from __future__ import annotations

import transformers

import vramsim


def test_tp_gives_one_ranks_parameters_and_the_whole_models(tiny_llama: transformers.LlamaConfig) -> None:
    """hidden 64, intermediate 128, 4 heads of 16 (2 kv), vocab 500, 2 layers, untied head: 138,048 in all;
    a rank of tp=2 holds half the vocabulary, heads and intermediate size, and whole norms: 69,184."""
    report = vramsim.simulate(tiny_llama, tp=2, gpus=2, seq_len=16, device="h100")
    assert vramsim.count_parameters(tiny_llama) == 138_048
    assert (report.parameters, report.model_parameters) == (69_184, 138_048)
    assert report.to_dict()["model_parameters"] == 138_048
    header = vramsim.report_text(report, summary=True, width=200).splitlines()[0]
    assert header.endswith("parameters=69,184 per rank (138,048 in the whole model)"), header


def test_without_model_parallel_parameters_are_the_whole_models(tiny_llama: transformers.LlamaConfig) -> None:
    report = vramsim.simulate(tiny_llama, seq_len=16, device="h100")
    assert (report.parameters, report.model_parameters) == (138_048, None)
    assert vramsim.report_text(report, summary=True, width=200).splitlines()[0].endswith("parameters=138,048")
