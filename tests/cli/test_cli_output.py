"""What the CLI prints around the figures: folded layers at 80 columns, no library noise, fast offline errors."""

from __future__ import annotations

import json
import logging
import urllib.error
import warnings
from pathlib import Path
from typing import Any

import pytest
import transformers

import vramsim
from vramsim.cli import main
from vramsim.errors import ModelNotFoundError
from vramsim.workload.models import load_config

TINY_GPT2 = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "n_layer": 3,
    "n_embd": 32,
    "n_head": 2,
    "vocab_size": 300,
    "n_positions": 64,
}


@pytest.fixture
def gpt2_config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_GPT2))
    return str(path)


def test_trace_folds_layers_and_lora_at_80_columns(
    gpt2_config: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoRA on GPT-2 (peft's Conv1D path): one row for the three blocks, every line within 80
    columns, and nothing on stderr (no peft or transformers warnings)."""
    monkeypatch.setenv("COLUMNS", "80")
    code = main(["trace", gpt2_config, "--seq-len", "16", "--lora-rank", "4", "--device", "rtx-4090"])
    out, err = capfd.readouterr()
    assert code == 0 and err == ""
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "transformer.h.0-2 x3" in out and "lora" not in out.split("Per layer")[1].split("Assumptions")[0]
    code = main(["trace", gpt2_config, "--seq-len", "16", "--lora-rank", "4", "--device", "rtx-4090", "--layers", "all"])
    out, err = capfd.readouterr()
    assert code == 0 and err == ""
    assert all(f"transformer.h.{i} " in out for i in range(3)) and "x3" not in out


def test_print_report_is_the_cli_summary(gpt2_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", gpt2_config, "--seq-len", "16", "--device", "h100"]) == 0
    out = capsys.readouterr().out
    report = vramsim.simulate(gpt2_config, seq_len=16, device="h100")
    summary = vramsim.report_text(report, summary=True)
    assert report.warnings == [] and out.startswith(summary) and "FITS on h100" in summary


def _records(logger_name: str) -> list[logging.LogRecord]:
    """Records that reach ``logger_name``'s handlers (after its filters); warning_once forgets what it said."""
    logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]  # transformers' lru-cached method
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger(logger_name).addHandler(handler)
    return records


def test_library_messages_are_silenced_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT-2's default loss, peft's deprecated property and Conv1D note, and the renamed cache output
    print nothing; other warnings still do."""
    loss = _records("transformers.modeling_utils")
    cache = _records("transformers.utils.generic")
    config = transformers.GPT2Config(**{k: v for k, v in TINY_GPT2.items() if k != "model_type"})
    with pytest.warns() as caught:
        warnings.warn("still shown", UserWarning, stacklevel=1)
        vramsim.simulate(config, seq_len=16, device="cpu", lora={"r": 4, "target_modules": ["c_attn"]})
        report = vramsim.simulate(config, seq_len=16, device="cpu", task="forward")
    assert [str(w.message) for w in caught] == ["still shown"]
    assert [r.getMessage() for r in loss] == [] and [r.getMessage() for r in cache] == []
    assert report.breakdown["kv_cache"] == 3 * 2 * 16 * 32 * 4  # layers x (k, v) x tokens x width x fp32


def test_validate_prints_no_profiler_lines(gpt2_config: str, capfd: pytest.CaptureFixture[str]) -> None:
    """Kineto writes "profiler_start"/"profiler_stop" lines to fd 2; they are kept off the terminal."""
    assert main(["validate", gpt2_config, "--seq-len", "8"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "Predicted vs measured" in out


def test_unknown_id_offline_fails_at_once_with_close_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline (the one probe of the Hub fails), the config is looked for in the local cache only:
    no retries; the error names the bundled id the user probably meant."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    probes: list[Any] = []

    def unreachable(request: Any, timeout: float) -> None:
        probes.append(request.full_url)
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("urllib.request.urlopen", unreachable)
    asked: list[dict[str, Any]] = []
    real = transformers.PretrainedConfig.get_config_dict  # what reads config.json, for AutoConfig too

    def get_config_dict(cls: type, name: str, **kwargs: Any) -> Any:
        asked.append(kwargs)
        return real(name, **kwargs)

    monkeypatch.setattr(transformers.PretrainedConfig, "get_config_dict", classmethod(get_config_dict))
    with pytest.raises(ModelNotFoundError) as error:
        load_config("meta-llama/llama-3.2-1b")
    assert probes == [constants.ENDPOINT] and asked[0]["local_files_only"] is True
    message = str(error.value)
    assert "the Hub cannot be reached (offline)" in message and "did you mean meta-llama/Llama-3.2-1B?" in message


def test_close_ids_are_suggested_on_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "Qwen/Qwen2.5-8B", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean Qwen/Qwen2.5-7B" in err
