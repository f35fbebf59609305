"""What a first run must not do: exhaust the host, trace what cannot run, ignore an option, or fail
on a model written as people write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from cli_runs import run, saved_config
from torch.profiler import ProfilerActivity, profile

import vramsim
from vramsim.tracer.data_dependent.shadows import SEEDS, SHADOW_LIMIT, forget_seeds
from vramsim.views.units import format_bytes
from vramsim.workload.inputs import default_inputs

# -- 1. never hurt the machine ------------------------------------------------------------------


def test_validate_refuses_what_the_host_cannot_hold(
    tmp_path: Path, tiny_gpt2: transformers.GPT2Config, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The predicted CPU peak is compared with MemAvailable before anything runs for real."""
    import vramsim.validation.validate as validation

    monkeypatch.setattr(validation, "host_memory_available", lambda: 1 << 10)
    monkeypatch.setattr(validation, "measure_cpu", lambda *a, **k: pytest.fail("the real run started"))
    code, _, err = run(capsys, "validate", saved_config(tmp_path, tiny_gpt2), "--task", "forward", "--seq-len", "16")
    assert code == 1
    assert "of host memory; 0.0 GiB is available" in err and err.count("\n") == 1


def test_host_memory_is_read() -> None:
    available = vramsim.validation.validate.host_memory_available()
    assert available is None or available > 0


def _cpu_bytes_allocated(make: object) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        made = make()  # type: ignore[operator]
    del made
    return sum(max(e.cpu_memory_usage, 0) for e in prof.events())


def test_huge_synthesised_batch_costs_no_host_memory(tiny_gpt2: transformers.GPT2Config) -> None:
    """Token ids beyond what the tracer can remember are never drawn; a small batch keeps its values."""
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(tiny_gpt2)
    batch, seq = 4 * SHADOW_LIMIT // 64, 64  # 4M ids: 32 MiB if drawn on the CPU
    try:
        with torch.device("meta"):
            assert _cpu_bytes_allocated(lambda: default_inputs(model, batch, seq, train=True)) < 1 << 20
            small = default_inputs(model, 2, seq, train=True)
        assert SEEDS.has(small["input_ids"]) and SEEDS.has(small["labels"])
    finally:
        forget_seeds()


# -- 2. what cannot run ------------------------------------------------------------------------

POSITION_TABLES = {
    "gpt2": (transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=64), {}),
    "bert": (
        transformers.BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=100,
            max_position_embeddings=64,
        ),
        {"task": "forward"},
    ),
    "whisper-decoder": (
        transformers.WhisperConfig(
            d_model=32,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            vocab_size=100,
            num_mel_bins=8,
            max_source_positions=1500,
            max_target_positions=64,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
            decoder_start_token_id=3,
            architectures=["WhisperForConditionalGeneration"],
        ),
        {"task": "forward"},
    ),
}


@pytest.mark.parametrize("case", sorted(POSITION_TABLES))
def test_sequence_past_a_learned_position_table_is_refused(case: str) -> None:
    config, options = POSITION_TABLES[case]
    with pytest.raises(vramsim.ConfigError, match=r"seq_len 128 overflows the 64 positions .*at most 64"):
        vramsim.simulate(config, seq_len=128, device="cpu", **options)
    vramsim.simulate(config, seq_len=64, device="cpu", **options)  # the table's own length runs


@pytest.mark.parametrize("case", sorted(POSITION_TABLES))
def test_no_length_given_takes_what_a_short_learned_table_holds(case: str) -> None:
    """The default 512 would overflow these 64-position tables: the run takes 64, less the new tokens."""
    config, options = POSITION_TABLES[case]
    assert vramsim.simulate(config, device="cpu", cache=False, **options).options["seq_len"] == 64
    if case != "bert":  # an encoder decodes no tokens
        generated = vramsim.simulate(config, task="generate", device="cpu", cache=False)
        assert generated.options["seq_len"] == 64 - 16


def test_no_length_given_on_the_command_line_takes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = POSITION_TABLES["whisper-decoder"]
    code, out, _ = run(capsys, "trace", saved_config(tmp_path, config), "--task", "generate", "--device", "cpu", "--json")
    assert code == 0 and json.loads(out)["options"]["seq_len"] == 64 - 16
    code, _, err = run(capsys, "trace", saved_config(tmp_path, config), "--task", "generate", "--seq-len", "512")
    assert code == 1 and "overflows the 64 positions" in err


def test_no_length_given_keeps_512_past_computed_positions(tiny_llama: transformers.LlamaConfig) -> None:
    """Rotary positions run past their maximum (a warning), so the default stays 512; a bigger table too."""
    report = vramsim.simulate(tiny_llama, task="forward", device="cpu", cache=False)
    assert report.options["seq_len"] == 512 and "max_position_embeddings=256" in report.warnings[0]
    wide = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=1024)
    assert vramsim.simulate(wide, task="generate", device="cpu", cache=False).options["seq_len"] == 512


def test_a_sweep_without_lengths_takes_the_table() -> None:
    config, _ = POSITION_TABLES["gpt2"]
    found = vramsim.sweep(config, batch_size=[1, 2], device="cpu", jobs=1, cache=False)
    assert [point.seq_len for point in found.points] == [64, 64]


def test_generated_tokens_count_against_the_table(tiny_gpt2: transformers.GPT2Config) -> None:
    with pytest.raises(vramsim.ConfigError, match=r"120 \+ max_new_tokens 16 = 136 positions .*at most 112"):
        vramsim.simulate(tiny_gpt2, task="generate", seq_len=120, device="cpu")


def test_rotary_positions_past_the_maximum_warn(tiny_llama: transformers.LlamaConfig) -> None:
    report = vramsim.simulate(tiny_llama, task="forward", seq_len=300, device="cpu")
    assert len(report.warnings) == 1 and "max_position_embeddings=256" in report.warnings[0]
    assert vramsim.simulate(tiny_llama, task="forward", seq_len=256, device="cpu").warnings == []


REFUSED = {
    "lora targets without a rank": (["--lora-targets", "q_proj"], "--lora-rank"),
    "new tokens when training": (["--max-new-tokens", "4"], "--task generate"),
    "new tokens in a forward": (["--task", "forward", "--max-new-tokens", "4"], "--task generate"),
    "checkpointing a forward": (["--task", "forward", "--gradient-checkpointing"], "applies to training"),
    "checkpointing generation": (["--task", "generate", "--checkpointing", "every:2"], "applies to training"),
    "zero without training": (["--task", "forward", "--gpus", "2", "--zero", "2"], "shard training state"),
    "fsdp without training": (["--task", "generate", "--gpus", "2", "--fsdp", "full"], "shard training state"),
    "optimizer without training": (["--task", "forward", "--optimizer", "sgd"], "is for training"),
    "bucket view without DDP": (["--gradient-as-bucket-view"], "--gpus N > 1"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_option_that_does_not_apply_is_refused(
    case: str, tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, message = REFUSED[case]
    code, out, err = run(capsys, "trace", saved_config(tmp_path, tiny_llama), "--seq-len", "16", *argv)
    assert (code, out) == (2, "")  # a bad argument: refused by the option checks, before anything is traced
    assert err.startswith("vramsim: error: ") and message in err and err.count("\n") == 1


WARNED = {
    "routing without a router": (["--task", "forward", "--moe-routing", "worst-case"], "changed nothing"),
    "lora in a forward": (["--task", "forward", "--lora-rank", "4"], "not trained"),
}


@pytest.mark.parametrize("case", sorted(WARNED))
def test_option_that_changes_little_is_warned(
    case: str, tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, message = WARNED[case]
    code, out, err = run(capsys, "trace", saved_config(tmp_path, tiny_llama), "--seq-len", "16", "--json", *argv)
    assert code == 0
    assert [message in w for w in json.loads(out)["warnings"]] == [True]
    assert err.startswith("vramsim: warning: ") and message in err


# -- 3. custom models as people write them -------------------------------------------------------

MODEL_FILE = """
import torch


class Net(torch.nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 4))
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.body(x) * self.scale


def build():
    return Net()


def broken():
    return Net(width=-3)


def inputs(batch_size, seq_len):
    return {"x": torch.randn(batch_size, 8, device="cpu")}


def bad_inputs(batch_size, seq_len):
    raise ValueError("no data here")


def loss(output):
    return output.square().mean()


def bf16_inputs(batch_size, seq_len):
    return {"x": torch.randn(batch_size, 8, dtype=torch.bfloat16)}
"""


def _user_file(tmp_path: Path) -> Path:
    path = tmp_path / "mynet.py"
    path.write_text(MODEL_FILE)
    return path


def test_module_built_on_the_cpu_is_simulated_untouched(tmp_path: Path) -> None:
    """``simulate(MyNet())``: a meta copy is traced; the user's weights stay where they were, unchanged."""
    user = vramsim.workload.models.load_function(f"{_user_file(tmp_path)}:build", "")
    inputs = vramsim.workload.models.load_function(f"{_user_file(tmp_path)}:bf16_inputs", "")
    model = user()
    before = [p.clone() for p in model.parameters()]
    report = vramsim.simulate(model, inputs=inputs, loss=lambda out: out.sum(), device="cpu", batch_size=4, dtype="bf16")
    assert all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    built = vramsim.simulate(user, inputs=inputs, loss=lambda out: out.sum(), device="cpu", batch_size=4, dtype="bf16")
    assert report.peak_bytes == built.peak_bytes and report.parameters == 8 * 16 + 16 + 16 * 4 + 4


def test_inputs_the_weights_cannot_take_are_refused_as_the_real_run_refuses_them(tmp_path: Path) -> None:
    """float32 inputs to bf16 weights: ATen's meta kernel checks the dtypes as the CPU and CUDA kernels do."""
    inputs = vramsim.workload.models.load_function(f"{_user_file(tmp_path)}:inputs", "")
    build = vramsim.workload.models.load_function(f"{_user_file(tmp_path)}:build", "")
    with pytest.raises(vramsim.TraceError, match=r"at body\.0: mat1 and mat2 must have the same dtype"):
        vramsim.simulate(build, inputs=inputs, loss=lambda out: out.sum(), device="cpu", dtype="bf16", cache=False)


def test_inputs_and_loss_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _user_file(tmp_path)
    argv = ["trace", f"{path}:build", "--inputs", f"{path}:inputs", "--loss", f"{path}:loss", "--device", "cpu", "--json"]
    code, out, _ = run(capsys, *argv, "--batch-size", "4")
    assert code == 0
    from_file = json.loads(out)["peak_bytes"]
    in_python = vramsim.simulate(
        vramsim.workload.models.load_function(f"{path}:build", ""),
        batch_size=4,
        device="cpu",
        inputs=vramsim.workload.models.load_function(f"{path}:inputs", ""),
        loss=lambda out: out.square().mean(),
    ).peak_bytes
    assert from_file == in_python


@pytest.mark.parametrize(
    ("spec", "extra", "message", "status"),
    [
        ("mynet.py:broken", [], "mynet.py:8: RuntimeError: Trying to create tensor with negative dimension", 1),
        ("mynet.py:build", ["--inputs", "{path}:bad_inputs"], "mynet.py:28: ValueError: no data here", 1),
        ("mynet.py", [], "mynet.py:build_fn", 1),
        ("mynet.py:build", ["--inputs", "{path}:missing"], "define def missing(batch_size, seq_len) -> dict", 1),
        ("mynet.py:build", ["--loss", "{path}"], "path/to/file.py:function", 2),  # the flag's value names no function
    ],
)
def test_user_code_failure_is_one_line_naming_their_file(
    spec: str, extra: list[str], message: str, status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _user_file(tmp_path)
    argv = [a.format(path=path) for a in extra]
    code, out, err = run(capsys, "trace", f"{tmp_path}/{spec}", "--device", "cpu", *argv)
    assert (code, out) == (status, "")
    assert message in err and err.count("\n") == 1


# -- 5. advice that counts -------------------------------------------------------------------------


def test_advice_states_what_each_choice_saves(tiny_llama: transformers.LlamaConfig) -> None:
    """Each computed suggestion's figure is what a run with that option reports; the current choice is not suggested."""
    options = dict(batch_size=8, seq_len=256, headroom=0.999, checkpointing="every:2", optimizer="sgd")
    report = vramsim.simulate(tiny_llama, **options)
    assert report.fits is False
    suggested = [line for line in map(vramsim.advice_line, report.advice) if line.startswith("--checkpointing ")]
    assert suggested and not any(line.startswith("--checkpointing every:2:") for line in suggested)
    for line in suggested:
        choice = line.split()[1].rstrip(":")
        rerun = vramsim.simulate(tiny_llama, **{**options, "checkpointing": choice})
        saved = report.device_bytes - rerun.device_bytes
        assert f": {format_bytes(rerun.device_bytes)} on the device (-{format_bytes(saved)})" in line
        assert saved > 0
