"""Quanto and GGUF denoisers against torch.profiler's real CPU peak, on the tiny FLUX pipeline widened to 256
(``wide_flux``, conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workload.diffusion.conftest import TINY_FLUX
from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError

pytest.importorskip("optimum.quanto")
gguf = pytest.importorskip("gguf")

_RUN = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64}
TOLERANCE = 0.005
"""The ground truths' bound: the prediction within 0.5% of the real peak."""


@pytest.mark.parametrize(
    ("quantization", "dtype"),
    [
        ("quanto-int8", "fp32"),
        ("quanto-float8", "fp32"),
        ("quanto-int4", "fp32"),
        ("quanto-int4", "bf16"),
        ("quanto-int2", "fp32"),
        ("gguf-q8_0", "fp32"),
        ("gguf-q4_k", "fp32"),
    ],
    ids=["quanto-int8", "quanto-float8", "quanto-int4", "quanto-int4-tinygemm", "quanto-int2", "gguf-q8_0", "gguf-q4_k"],
)
def test_quantized_denoiser_peaks_as_the_real_cpu_run(wide_flux: str, quantization: str, dtype: str) -> None:
    """The library's own quantizer and layers run for real on the CPU (GGUF blocks from gguf's quantizer, Q4_K's
    bytes drawn at random: gguf-py has no K-quant quantizer; quanto int4 in bf16 is its TinyGemm packing, in fp32
    and int2 its plain one), and vramsim's trace of the same on meta."""
    from vramsim.validation.measure import measure_cpu

    report = simulate(wide_flux, device="cpu", quantization=quantization, dtype=dtype, **_RUN)
    config = SimulationConfig(device="cpu", quantization=quantization, dtype=dtype, **_RUN)
    measured = measure_cpu(wide_flux, config).peak_bytes
    assert abs(report.peak_bytes - measured) <= TOLERANCE * measured, (report.peak_bytes, measured)
    plain = simulate(wide_flux, device="cpu", dtype=dtype, **_RUN)
    quantized, unquantized = (next(c.weights_bytes for c in r.components if c.name == "transformer") for r in (report, plain))
    assert quantized < unquantized / (3 if dtype == "fp32" else 1.5)  # about 1 byte a weight or less, of 4 (or 2)
    assert "diffusers_quantized_denoiser" in {a.name for a in report.assumptions}
    library, kind = quantization.split("-")
    assert report.settings["quantization"].lower() == f"transformer {library} {kind}"


@pytest.mark.parametrize("quant_type", ["Q8_0", "Q4_K"])
def test_gguf_weights_hold_what_a_gguf_file_of_the_transformer_loads(wide_flux: str, tmp_path: Path, quant_type: str) -> None:
    """A real GGUF file of the transformer's linear weights (gguf's GGUFWriter), read back by diffusers'
    ``load_gguf_checkpoint``: the traced transformer's weights are the file's tensors plus what stays unquantized."""
    import numpy as np
    import torch
    from diffusers import FluxTransformer2DModel
    from diffusers.models.model_loading_utils import load_gguf_checkpoint

    qtype = gguf.GGMLQuantizationType[quant_type]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    with torch.device("meta"):
        model = FluxTransformer2DModel.from_config(FluxTransformer2DModel.load_config(wide_flux, subfolder="transformer"))
    writer = gguf.GGUFWriter(str(tmp_path / "transformer.gguf"), "flux")
    kept = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.in_features % block == 0:
            raw = np.zeros((module.out_features, module.in_features // block * size), dtype=np.uint8)
            writer.add_tensor(f"{name}.weight", raw, raw_shape=raw.shape, raw_dtype=qtype)
            kept += sum(p.nbytes for n, p in module.named_parameters() if n != "weight")
    kept += sum(
        p.nbytes
        for name, module in model.named_modules()
        if not (isinstance(module, torch.nn.Linear) and module.in_features % block == 0)
        for p in module.parameters(recurse=False)
    )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    loaded = load_gguf_checkpoint(str(tmp_path / "transformer.gguf"))
    assert {p.quant_type for p in loaded.values()} == {qtype}
    report = simulate(wide_flux, device="cpu", quantization=f"gguf-{quant_type.lower()}", **_RUN)
    transformer = next(c.weights_bytes for c in report.components if c.name == "transformer")
    assert transformer == kept + sum(p.nbytes for p in loaded.values())


@pytest.mark.parametrize(
    ("given", "error", "match"),
    [
        ({"quantization": "quanto-int3"}, ConfigError, "unknown quantization"),
        ({"quantization": "quanto-int4", "dtype": "fp16", "device": "a100"}, UnsupportedError, "AWQ kernel"),
        ({"quantization": "gguf-q6_k"}, ConfigError, "unknown quantization"),
        ({"quantization": "quanto-int8", "dtype": "bf16"}, UnsupportedError, "_weight_int8pack_mm"),
        ({"quantization": "gguf-q8_0", "quantized_components": "transformer,text_encoder_2"}, UnsupportedError, "denoiser only"),
        ({"quantization": "quanto-int8", "offload": "model"}, UnsupportedError, "with offload is not modelled"),
    ],
    ids=["quanto-int3", "awq", "gguf-q6_k", "int8pack", "encoder", "offload"],
)
def test_quanto_and_gguf_not_modelled_are_refused_in_one_line(given: dict[str, str], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        simulate(str(TINY_FLUX), **({"device": "cpu"} | _RUN | given))


def test_quanto_and_gguf_quantize_diffusers_denoisers_only() -> None:
    from transformers import LlamaConfig

    llama = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4)
    with pytest.raises(UnsupportedError, match="diffusers denoisers only"):
        simulate(llama, device="h100", quantization="gguf-q8_0", task="forward", batch_size=1, seq_len=8)
