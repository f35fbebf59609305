"""Training weights with no dtype given are what the installed transformers' ``from_pretrained`` loads, and the report
says so; ``dtype="fp32"`` still trains fp32 weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

import vramsim
from vramsim.cli import main
from vramsim.workload.models import loads_checkpoint_dtype


@pytest.fixture
def bf16_llama(tiny_llama: transformers.LlamaConfig) -> transformers.LlamaConfig:
    """The tiny Llama with a bf16 checkpoint's config (Llama 3's config.json says ``"torch_dtype": "bfloat16"``)."""
    tiny_llama.dtype = torch.bfloat16
    return tiny_llama


def test_the_probe_says_what_from_pretrained_does(tmp_path: Path, bf16_llama: transformers.LlamaConfig) -> None:
    """A bf16 checkpoint saved and loaded as a script loads it, passing no dtype: the probe agrees with its dtype."""
    transformers.LlamaForCausalLM(bf16_llama).to(torch.bfloat16).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loads_checkpoint_dtype() is (loaded.dtype == torch.bfloat16)


def test_training_without_a_dtype_loads_as_from_pretrained_does(bf16_llama: transformers.LlamaConfig) -> None:
    """The weights, the header and the note follow the probe; bytes per parameter are the dtype's."""
    report = vramsim.simulate(bf16_llama, seq_len=16, device="cpu")
    note = next(a.detail for a in report.assumptions if a.name == "weight_dtype")
    assert f"transformers {transformers.__version__}'s from_pretrained" in note
    if loads_checkpoint_dtype():
        assert report.settings["weights"] == "bfloat16 (the checkpoint's config)"
        assert note.startswith("weights in bfloat16 (no dtype given): the checkpoint config's dtype") and "dtype='auto'" in note
        assert report.breakdown["parameters"] == 2 * report.parameters
    else:
        assert report.settings["weights"] == "float32 (default to train)"
        assert "loads torch's default dtype" in note
        assert report.breakdown["parameters"] == 4 * report.parameters


def test_dtype_fp32_still_trains_fp32(
    bf16_llama: transformers.LlamaConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dtype fp32`` on a bf16 checkpoint: fp32 weights, said as given, and no default's note."""
    report = vramsim.simulate(bf16_llama, seq_len=16, device="cpu", dtype="fp32")
    assert report.settings["weights"] == "float32 (given)"
    assert report.breakdown["parameters"] == 4 * report.parameters
    assert not any(a.name == "weight_dtype" for a in report.assumptions)
    bf16_llama.save_pretrained(tmp_path)
    assert main(["trace", str(tmp_path), "--seq-len", "16", "--device", "cpu", "--dtype", "fp32", "--quiet"]) == 0
    assert "weights float32 (given)" in " ".join(capsys.readouterr().out.split())


def test_a_config_without_a_dtype_trains_fp32(tiny_llama: transformers.LlamaConfig) -> None:
    """No dtype in the config (a config made in Python): float32, and the note says the config names none."""
    assert tiny_llama.dtype is None
    report = vramsim.simulate(tiny_llama, seq_len=16, device="cpu")
    assert report.settings["weights"] == "float32 (default to train)"
    note = next(a.detail for a in report.assumptions if a.name == "weight_dtype")
    if loads_checkpoint_dtype():
        assert note == "weights in float32 (no dtype given, and the model's config names none)"
    else:
        assert "loads torch's default dtype" in note


def test_llama4_scout_default_dtype_is_its_text_configs() -> None:
    """Llama 4 Scout's config.json keeps ``torch_dtype`` only under ``text_config``: bf16, the checkpoint's dtype
    that transformers' ``dtype="auto"`` loads, not fp32."""
    from vramsim.config.simulation import SimulationConfig
    from vramsim.workload.build import weight_dtype

    folder = Path(__file__).parents[2] / "model_zoo/configs/meta-llama/Llama-4-Scout-17B-16E"
    model_config = transformers.AutoConfig.from_pretrained(folder)
    assert model_config.dtype is None
    assert weight_dtype(SimulationConfig(task="forward"), model_config) == torch.bfloat16


@pytest.mark.parametrize("task", ["generate", "train"])
def test_an_mxfp4_checkpoint_loads_bf16(task: str) -> None:
    """gpt-oss's config names no dtype; its checkpoint stores the tensors outside its MXFP4 experts in bf16, which
    ``dtype="auto"`` reads off them, and transformers dequantizes the experts to the parameters' dtype wherever it
    does not keep MXFP4: bf16, not fp32 (which read 78 GiB for gpt-oss-20b's generate on an H100 and did not fit)."""
    from vramsim.config.simulation import SimulationConfig
    from vramsim.workload.build import weight_dtype

    folder = Path(__file__).parents[2] / "model_zoo/configs/openai/gpt-oss-20b"
    model_config = transformers.AutoConfig.from_pretrained(folder)
    assert model_config.dtype is None and model_config.quantization_config["quant_method"] == "mxfp4"
    expected = torch.bfloat16 if task != "train" or loads_checkpoint_dtype() else torch.float32
    assert weight_dtype(SimulationConfig(task=task), model_config) == expected
