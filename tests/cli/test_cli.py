"""The CLI in-process: exit codes, JSON keys and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import run

from vramsim import model_zoo
from vramsim.cli import main
from vramsim.workload.diffusion.recipes import RECIPES
from vramsim.workload.diffusion.spec import find_pipeline


def test_trace_json_has_report_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "trace", "meta-llama/Llama-3.2-1B", "--task", "forward", "--seq-len", "32", "--device", "cpu", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert {"peak_bytes", "parameters", "breakdown", "peak_at", "layers", "target", "assumptions"} <= set(data)
    assert data["parameters"] == 1_235_814_400
    assert data["peak_bytes"] >= 2 * data["parameters"]  # bf16 weights are all live


def test_trace_json_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    """--gpus/--zero: the figures are one rank's, with its model states, buffers and fit verdict."""
    code, out, _ = run(capsys, "trace", "gpt2", "--seq-len", "16", "--device", "h100", "--gpus", "8", "--zero", "3", "--json")
    assert code == 0
    data = json.loads(out)
    ranks = data["ranks"]
    assert ranks["scheme"] == "ZeRO-3" and ranks["gpus"] == 8 and ranks["ranks_alike"] is True
    assert set(ranks["model_state"]) == {"parameters", "gradients", "optimizer_states"}
    assert ranks["buffers"]["ZeRO reduce bucket"] > 0 and data["breakdown"]["communication"] > 0
    assert data["fits"] is True and data["options"]["gpus"] == 8 and data["options"]["zero"] == 3
    names = {a["name"] for a in data["assumptions"]}
    assert {"data_parallel_ranks_alike", "zero_master_and_reduce_bucket", "zero3_gather"} <= names


def test_trace_terminal_view(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "trace", "gpt2", "--seq-len", "16", "--device", "cpu")
    assert code == 0
    assert "Peak allocated" in out and "transformer.h.0-11 x12" in out


def test_models_lists_the_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    """Each pipeline listed with ``train`` is one the training code has a recipe for, and only those."""
    code, out, _ = run(capsys, "models")
    assert code == 0 and "meta-llama/Llama-3.1-8B" in out.split()
    trained = {line.split()[0] for line in out.splitlines() if line.endswith("  generate, train")}
    recipes = {pid for pid in model_zoo.pipeline_ids() if getattr(find_pipeline(pid), "class_name", None) in RECIPES}
    assert trained == recipes and "stabilityai/stable-diffusion-xl-base-1.0" in trained
    assert "Lightricks/LTX-Video" not in trained and "Lightricks/LTX-Video" in out.split()
    generating = {line.split()[0] for line in out.splitlines() if line.endswith(("  generate", "  generate, train"))}
    assert {"THUDM/CogVideoX-5b", "hunyuanvideo-community/HunyuanVideo", "Qwen/Qwen-Image"} <= generating
    assert "black-forest-labs/FLUX.1-Kontext-dev" in generating - trained


def _broken_config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    return str(path)


def _no_model_type(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 8}')
    return str(path)


def _fails_on_meta(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    # Loads fine, but 4 query heads cannot be grouped over 3 key/value heads once the model runs.
    path.write_text(
        '{"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, '
        '"intermediate_size": 8, "vocab_size": 10, "num_key_value_heads": 3}'
    )
    return str(path)


BAD_INPUTS = {
    "unknown id": (lambda _: "no-such-org/no-such-model", [], "neither a bundled model"),
    "malformed config": (_broken_config, [], "not a readable config.json"),
    "config without model_type": (_no_model_type, [], "no 'model_type'"),
    "negative batch": (lambda _: "gpt2", ["--batch-size", "-1"], "--batch-size must be between"),
    "unknown task": (lambda _: "gpt2", ["--task", "serve"], "unknown task 'serve'"),
    "unknown dtype": (lambda _: "gpt2", ["--dtype", "int3"], "unsupported --dtype int3"),
    "unknown device": (lambda _: "gpt2", ["--device", "tpu9"], "unknown device 'tpu9'"),
    "zero and fsdp together": (lambda _: "gpt2", ["--gpus", "8", "--zero", "3", "--fsdp", "full"], "choose one"),
    "no gpus": (lambda _: "gpt2", ["--gpus", "0"], "gpus must be an integer between 1 and 65536, got 0"),
    "unknown zero stage": (lambda _: "gpt2", ["--zero", "4"], "unknown ZeRO stage 4; choose one of: 0, 1, 2, 3"),
    "unknown fsdp": (lambda _: "gpt2", ["--fsdp", "hsdp"], "choose one of: no, full, grad-op, hybrid"),
    "model fails on meta": (_fails_on_meta, ["--seq-len", "4"], "failed on the meta device at model.layers.0.self_attn"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, extra, expected = BAD_INPUTS[case]
    code, out, err = run(capsys, "trace", model(tmp_path), "--device", "cpu", *extra)
    assert code != 0 and out == ""
    assert err.startswith("vramsim: error: ") and err.count("\n") == 1, err
    assert expected in err


def test_bad_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["trace", "gpt2", "--batch-size", "two"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("vramsim: error: ") and err.count("\n") == 1


def test_every_option_is_on_the_command_line_or_python_only() -> None:
    """Each SimulationConfig field is a flag of trace (or validate) unless its Option says Python-only."""
    from vramsim.cli.arguments import build_parser, workload_options
    from vramsim.config import options

    args = build_parser().parse_args(["trace", "gpt2"])
    given = workload_options(args)
    for spec, option in options():
        assert (spec.name in given or spec.name == "seq_len") == option.cli, spec.name
        assert option.cli or spec.name in ("inputs", "loss", "steps", "zero_settings", "training_args", "memory_history"), (
            spec.name
        )
        if option.cli and spec.name not in ("device", "seq_len"):
            assert given[spec.name] == spec.default, spec.name  # the CLI's default is the API's
    assert "seq_len" not in given  # left to the API, which reads the model's positions (with_model_defaults)
    assert workload_options(build_parser().parse_args(["validate", "gpt2"]))["device"] == "cpu"
    assert "headroom" not in workload_options(build_parser().parse_args(["validate", "gpt2"]))


def test_lora_and_optimizer_flags_keep_their_meaning() -> None:
    """--lora-rank/--lora-targets build peft's arguments; --optimizer none is no optimizer."""
    from vramsim.cli.arguments import build_parser, workload_options

    args = build_parser().parse_args(["trace", "gpt2", "--lora-rank", "4", "--lora-targets", "q,v", "--optimizer", "none"])
    given = workload_options(args)
    assert given["lora"] == {"r": 4, "lora_alpha": 8, "target_modules": ["q", "v"]}
    assert given["optimizer"] is None


def test_help_loads_neither_torch_nor_transformers() -> None:
    """``vramsim --help`` and ``vramsim trace --help`` answer at once: the heavy libraries load only to trace."""
    code = (
        "import sys; from vramsim.cli import main\n"
        "for argv in (['--help'], ['trace', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit as exit:\n        assert exit.code == 0, exit.code\n"
        "heavy = sorted({'torch', 'transformers'} & set(sys.modules)); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "usage: vramsim [-h]" in result.stdout and "usage: vramsim trace [-h]" in result.stdout


def test_gpus_lists_the_catalog_by_segment(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``vramsim gpus``: one section per segment, AMD apart, estimated memories marked, a row per card at 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "gpus")
    assert code == 0
    lines = out.splitlines()
    headings = ["host", "data centre", "workstation", "consumer", "data centre, AMD"]
    positions = [lines.index(heading) for heading in headings]
    assert positions == sorted(positions)
    row = next(line for line in lines if line.startswith("rtx-3080-ti "))
    assert row.split()[1:8] == ["RTX", "3080", "Ti", "11.76", "GiB", "*", "sm_86"] and row.endswith(" 80")
    assert "23.64 GiB  " in next(line for line in lines if line.startswith("rtx-4090 "))  # measured: no star
    assert max(map(len, lines)) <= 80 and not [line for line in lines if line != line.rstrip()]


def test_trace_json_per_rank_of_a_3d_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--ep/--pp/--gpus: the busiest stage's figures, each stage's row, the exchange buffer and what they rest on."""
    import transformers

    path = tmp_path / "config.json"
    transformers.MixtralConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        num_local_experts=4,
        max_position_embeddings=64,
    ).to_json_file(path)
    code, out, _ = run(capsys, "trace", str(path), "--seq-len", "16", "--device", "cpu", "--ep", "2", "--pp", "2", "--json")
    assert code == 0
    ranks = json.loads(out)["ranks"]
    assert ranks["scheme"] == "EP 2 x PP 2 1f1b (2 micro-batches) x DDP 2" and ranks["gpus"] == 4 and ranks["ep"] == 2
    assert len(ranks["stages"]) == 2 and ranks["busiest_stage"] in (0, 1) and ranks["ranks_alike"] is False
    assert ranks["buffers"]["EP all-to-all buffer (2 per exchange)"] == 16 * 2 * 64 * 4
    code, out, _ = run(
        capsys, "trace", str(path), "--seq-len", "16", "--device", "cpu", "--pp", "2", "--gpus", "4", "--fsdp", "full", "--json"
    )
    data = json.loads(out)
    assert code == 0 and data["ranks"]["scheme"] == "PP 2 1f1b (2 micro-batches) x FSDP2 full 2"
    assert {"pipeline_data_parallel", "fsdp2_per_block", "pipeline_stages"} <= {a["name"] for a in data["assumptions"]}
