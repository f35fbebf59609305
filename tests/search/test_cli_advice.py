"""Advice that counts, scripts that can rely on the exit status, progress only where a person watches,
and messages in the words of the interface used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import transformers
from cli_runs import run, saved_config

import vramsim
from vramsim.cli import main
from vramsim.cli.arguments import NOT_FIT_EXIT
from vramsim.cli.trace import QUICK_SKIPPED
from vramsim.search.advice import retraced_advice, retraced_options, traced_advice
from vramsim.views.units import format_bytes


def _saving(line: str, report: vramsim.Report, rerun: vramsim.Report) -> None:
    """The line states the re-run's device memory and what it saves on ``report``'s run."""
    saved = report.device_bytes - rerun.device_bytes
    assert saved > 0 and f": {format_bytes(rerun.device_bytes)} on the device (-{format_bytes(saved)})" in line, line


# -- savings equal a re-run with the option ---------------------------------------------------------


def test_sharding_advice_equals_a_run_sharded(tiny_llama: transformers.LlamaConfig) -> None:
    """Over several GPUs, each ZeRO stage and FSDP is computed from the same graph; none once one is set."""
    options = dict(batch_size=4, seq_len=64, gpus=4, headroom=0.999)
    report = vramsim.simulate(tiny_llama, **options)
    lines = {
        line.split(":")[0]: line
        for line in map(vramsim.advice_line, report.advice)
        if not line.startswith(("--checkpointing", "--expandable-segments"))
    }
    assert lines and set(lines) <= {"--zero 1", "--zero 2", "--zero 3", "--fsdp full"}  # those that save
    for flag, line in lines.items():
        name, value = flag.removeprefix("--").split()
        _saving(line, report, vramsim.simulate(tiny_llama, **options, **{name: int(value) if name == "zero" else value}))
    sharded = vramsim.simulate(tiny_llama, **options, zero=1)
    assert not any(line.startswith(("--zero", "--fsdp")) for line in map(vramsim.advice_line, sharded.advice))


def test_allocator_advice_equals_the_command_it_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--expandable-segments`` is the same graph replayed with growing segments: the figure the advice gives
    (no further trace) is what ``vramsim trace`` of the advised command reports, to the byte."""
    config = transformers.LlamaConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=500, max_position_embeddings=512,
    )  # fmt: skip
    flags = ["--batch-size", "16", "--seq-len", "256", "--headroom", "0.999", "--device", "h100", "--quick", "--json"]
    model = saved_config(tmp_path, config)
    code, out, err = run(capsys, "trace", model, *flags)
    (advice,) = [each for each in json.loads(out)["advice"] if "expandable_segments" in each["changes"]]
    assert code == 0 and advice["changes"] == {"expandable_segments": True} and not advice["traced"]
    assert advice["saved_bytes"] == 12 * 2**20  # what fragmentation reserved beyond the allocated peak, here
    code, out, _ = run(capsys, "trace", model, *flags, "--expandable-segments")
    assert code == 0 and json.loads(out)["device_bytes"] == advice["device_bytes"]
    assert not any("expandable_segments" in each["changes"] for each in json.loads(out)["advice"])  # already set
    assert err == f"vramsim: {QUICK_SKIPPED}\n"  # and how to get the rest


def test_advice_traced_in_workers_equals_the_advice_traced_here(tiny_llama: transformers.LlamaConfig) -> None:
    """Each re-traced option and size search runs in a worker process: the same records, in the same order, and
    every trace each made told to ``progress`` as it would be here."""
    options = dict(batch_size=4, seq_len=64, headroom=0.999, device="h100", task="train")
    report = vramsim.simulate(tiny_llama, **options)
    told: dict[int, list[str]] = {1: [], 2: []}
    here, there = (traced_advice(tiny_llama, report, options, progress=told[n].append, workers=n) for n in (1, 2))
    assert here == there and len(here) == 6  # four options (none fits) and two sizes
    # a trace per option and one batch size (no shorter length is tried: 64 is the least step)
    assert sorted(told[1]) == sorted(told[2]) and len(told[1]) == 5


def test_a_sweep_may_skip_the_advice(tiny_llama: transformers.LlamaConfig) -> None:
    """``simulate_each(advice="none")``: the same figures, no advice (a sweep's what-ifs are its own)."""
    options = dict(batch_size=4, seq_len=64, gpus=4, headroom=0.999)
    advised, plain = (vramsim.simulate_each(tiny_llama, [{}], advice=advice, **options)[0] for advice in ("graph", "none"))
    assert advised.advice and not plain.advice
    assert (advised.peak_bytes, advised.device_bytes) == (plain.peak_bytes, plain.device_bytes)


def test_retraced_advice_equals_the_run_it_names(tiny_llama: transformers.LlamaConfig) -> None:
    options = dict(batch_size=4, seq_len=64, headroom=0.999, device="h100")
    report = vramsim.simulate(tiny_llama, **options)
    lines = [vramsim.advice_line(advice) for advice in retraced_advice(tiny_llama, report, options)]
    assert lines and all(" (traced): " in line for line in lines)
    assert any(line.startswith("--mixed-precision bf16 (traced): ") for line in lines), lines  # fp32 weights, no autocast
    for line in lines:
        name, value = line.removeprefix("--").split()[:2]
        _saving(line, report, vramsim.simulate(tiny_llama, **{**options, name.replace("-", "_"): value}))


@pytest.mark.parametrize(
    ("options", "absent"),
    [
        ({"dtype": "bf16"}, "--dtype"),  # already set
        ({"optimizer": "sgd"}, "--optimizer"),  # already light
        ({"device": "v100-32gb"}, "--dtype bf16"),  # no bf16 on Volta: fp16 weights cannot train either
        ({"device": "mi300x"}, "--optimizer adamw8bit"),  # bitsandbytes' kernels are CUDA's
        ({"mixed_precision": "bf16"}, "--mixed-precision"),  # already set
        ({"device": "v100-32gb"}, "--mixed-precision"),  # no bf16 on Volta
        ({"task": "forward"}, "--mixed-precision"),  # autocast is offered for training
    ],
)
def test_advice_offers_nothing_set_or_refused(options: dict[str, str], absent: str, tiny_llama: transformers.LlamaConfig) -> None:
    options = {"seq_len": 16, **options}
    offered = retraced_options(vramsim.simulate(tiny_llama, **options), options)
    assert offered and not any(flag.startswith(absent) for flag in offered), offered


# -- --fail-if-not-fit and the trace's own search -----------------------------------------------------


def test_fail_if_not_fit(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # each advice on one line
    model = saved_config(tmp_path, tiny_llama)
    assert run(capsys, "trace", model, "--seq-len", "16", "--fail-if-not-fit")[0] == 0
    code, out, _ = run(capsys, "trace", model, "--seq-len", "16", "--headroom", "0.999", "--fail-if-not-fit", "--json")
    advice = json.loads(out)["advice"]
    assert code == NOT_FIT_EXIT == 3
    assert [(each["largest"]["option"], each["changes"], each["traced"]) for each in advice[-2:]] == [
        ("batch_size", {}, True),
        ("seq_len", {}, True),
    ]
    code, out, _ = run(capsys, "trace", model, "--seq-len", "16", "--headroom", "0.999")  # without the flag
    tries = [line.removeprefix("  try: ") for line in out.splitlines() if line.startswith("  try: ")]
    assert code == 0
    assert tries[-2].startswith("no --batch-size fits at --seq-len 16: 1 takes ") and tries[-2].endswith(" (traced)")
    assert tries[-1].startswith("no --seq-len fits at --batch-size 1: 1 takes ")  # 16 is no multiple of 64: steps of 1
    code, out, err = run(capsys, "trace", model, "--seq-len", "16", "--headroom", "0.999", "--no-search", "--json")
    assert code == 0 and not any(each["traced"] for each in json.loads(out)["advice"])
    assert err == f"vramsim: warning: --no-search is now --quick\nvramsim: {QUICK_SKIPPED}\n"  # the old spelling
    code, _, err = run(capsys, "trace", model, "--seq-len", "16", "--device", "cpu", "--fail-if-not-fit")
    assert code == 1 and "the cpu target has no fixed size" in err and err.count("\n") == 1


def test_python_and_the_command_line_give_the_same_advice(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``simulate(advice="traced")`` is what ``vramsim trace`` asks: the same records, worded the same."""
    monkeypatch.setenv("COLUMNS", "200")
    model = saved_config(tmp_path, tiny_llama)
    report = vramsim.simulate(model, advice="traced", batch_size=4, seq_len=64, headroom=0.999, device="h100")
    flags = ("--batch-size", "4", "--seq-len", "64", "--headroom", "0.999", "--device", "h100")
    code, out, _ = run(capsys, "trace", model, *flags)
    tries = [line.removeprefix("  try: ") for line in out.splitlines() if line.startswith("  try: ")]
    assert code == 0 and report.fits is False
    assert {"checkpointing", "dtype", "optimizer"} <= {name for each in report.advice for name in each.changes}
    assert [each.largest.option for each in report.advice if each.largest] == ["batch_size", "seq_len"]
    assert tries == [vramsim.advice_line(each) for each in report.advice]
    code, out, _ = run(capsys, "trace", model, *flags, "--json")
    assert json.loads(out)["advice"] == report.to_dict()["advice"]
    assert all(not each.traced for each in vramsim.simulate(model, batch_size=4, seq_len=64, headroom=0.999).advice)


def test_fit_command(
    tmp_path: Path, tiny_gpt2: transformers.GPT2Config, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vramsim fit``: both answers, each said to be traced; a position table bounds the length."""
    monkeypatch.setenv("COLUMNS", "200")
    model = saved_config(tmp_path, tiny_gpt2)
    code, out, _ = run(capsys, "fit", model, "--seq-len", "64", "--headroom", "0.9895", "--device", "h100")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[1].startswith("  largest --batch-size ") and " at --seq-len 64: " in lines[1] and " takes " in lines[1]
    assert lines[2].startswith("  largest --seq-len 128 at --batch-size 1: ") and "max_position_embeddings" in lines[2]
    assert lines[-1].startswith("each figure from a trace: ")
    code, _, err = run(capsys, "fit", model, "--task", "generate", "--device", "h100")
    assert code == 1 and "--task generate has no largest fit searched (its length is --max-new-tokens)" in err


def test_fit_strategies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``vramsim fit --strategies``: the cheapest setting, then the largest sizes under it, in one JSON."""
    from test_fit import _LLAMA_300M

    model = saved_config(tmp_path, _LLAMA_300M)
    code, out, _ = run(
        capsys,
        "fit",
        model,
        "--gpus",
        "8",
        "--strategies",
        "--device",
        "custom:6GiB:sm_90",
        "--seq-len",
        "1024",
        "--batch-size",
        "2",
        "--json",
    )
    found = json.loads(out)
    best = found["strategies"]["cheapest"]
    largest = found["largest"]["batch_size"]
    assert code == 0 and best["fits"] and largest["value"] >= 2 and largest["device_bytes"] <= found["strategies"]["usable_bytes"]
    tried = found["strategies"]["candidates"]
    assert best in tried and all(c["peak_bytes"] <= c["device_bytes"] for c in tried)
    assert found["strategies"]["traces"] == len({(c["tp"], c["ep"], c["cp"]) for c in tried} | {(1, 1, 1)})


# -- progress ------------------------------------------------------------------------------------------


def test_progress_only_on_a_terminal(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = saved_config(tmp_path, tiny_llama)
    assert run(capsys, "trace", model, "--seq-len", "16")[2] == ""  # stderr is not a terminal here
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert "tracing" in run(capsys, "trace", model, "--seq-len", "16")[2]
    assert run(capsys, "trace", model, "--seq-len", "16", "--quiet")[2] == ""


# -- small things --------------------------------------------------------------------------------------


def test_help_pointer_names_the_program_once(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, pointer in ((["nosuch"], "(see vramsim --help)"), (["trace", "gpt2", "--bogus"], "(see vramsim trace --help)")):
        with pytest.raises(SystemExit):
            main(argv)
        err = capsys.readouterr().err
        assert err.rstrip().endswith(pointer) and "vramsim vramsim" not in err


@pytest.mark.parametrize(
    ("argv", "options", "cli", "api"),
    [
        (["--seq-len", "0"], {"seq_len": 0}, "--seq-len must be between", "seq_len must be between"),
        (
            ["--max-new-tokens", "4"],
            {"max_new_tokens": 4},
            "--max-new-tokens is for --task generate; --task train",
            "max_new_tokens is for task='generate'; task='train'",
        ),
        (
            ["--task", "forward", "--gpus", "2", "--zero", "2"],
            {"task": "forward", "gpus": 2, "zero": 2},
            "--zero 2 would shard training state; --task forward",
            "zero=2 would shard training state; task='forward'",
        ),
    ],
)
def test_errors_use_the_words_of_the_interface(
    argv: list[str], options: dict[str, object], cli: str, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(vramsim.ConfigError) as raised:
        vramsim.simulate("gpt2", **options)  # type: ignore[arg-type]
    assert api in str(raised.value) and "--" not in str(raised.value)
    code, _, err = run(capsys, "trace", "gpt2", *argv)
    assert code == 2 and cli in err  # a bad argument


def test_optimizer_error_offers_a_cli_user_no_callable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["trace", "gpt2", "--optimizer", "lamb"])
    err = capsys.readouterr().err
    assert "unknown optimizer 'lamb'" in err and "callable" not in err
    with pytest.raises(vramsim.ConfigError, match="callable"):  # Python can pass one
        vramsim.simulate("gpt2", optimizer="lamb")


def test_cpu_target_says_host_memory(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "trace", saved_config(tmp_path, tiny_llama), "--seq-len", "16", "--device", "cpu")
    assert code == 0 and "nvidia-smi" not in out and "In host memory (the process): " in out


def test_bad_arguments_are_reported_before_torch_is_imported() -> None:
    script = (
        "import sys\nfrom vramsim.cli import main\ntry:\n    main(['trace', 'gpt2', '--batch-size', 'two'])\n"
        "except SystemExit:\n    print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.stdout == "False\n" and "--batch-size" in result.stderr


def test_cli_words_leave_paths_and_signatures_alone() -> None:
    from vramsim.cli.wording import in_cli_words

    message = "/data/seq_len/config.json: seq_len 5 and task='train'; define def f(batch_size, seq_len) -> dict"
    assert (
        in_cli_words(message)
        == "/data/seq_len/config.json: --seq-len 5 and --task train; define def f(batch_size, seq_len) -> dict"
    )
