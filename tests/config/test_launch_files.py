"""DeepSpeed and accelerate config files, and transformers' TrainingArguments, set the options they stand for;
a bad one is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

import vramsim
from vramsim.cli import main
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.sharding import ZeroSettings


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _ds(tmp_path: Path, config: dict[str, Any], name: str = "ds_config.json") -> str:
    return _write(tmp_path, name, json.dumps(config))


DS_CONFIG = {
    "train_micro_batch_size_per_gpu": 2,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"},
                          "reduce_bucket_size": 1e6, "allgather_bucket_size": 5e8, "stage3_prefetch_bucket_size": 2e5,
                          "stage3_max_live_parameters": 1e8},
}  # fmt: skip


def test_deepspeed_config_sets_the_options(tmp_path: Path) -> None:
    config = SimulationConfig(gpus=8, deepspeed=_ds(tmp_path, DS_CONFIG))
    assert (config.zero, config.offload_states, config.batch_size) == (3, "params", 2)
    assert str(config.dtype) == "torch.bfloat16"  # DeepSpeed casts the weights to bf16
    assert config.sharding.zero_settings == ZeroSettings(
        reduce_bucket=1_000_000, prefetch_bucket=200_000, max_live_parameters=100_000_000
    )


def test_deepspeed_sizes_reach_the_rank(tmp_path: Path) -> None:
    """reduce_bucket_size from the file is the reduce bucket the rank holds (bf16 gradients: 2 bytes each)."""
    llama = transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=256,
        max_position_embeddings=64,
    )
    path = _ds(tmp_path, {"bf16": {"enabled": True}, "zero_optimization": {"stage": 2, "reduce_bucket_size": 3e6}})
    report = vramsim.simulate(llama, task="train", seq_len=16, device="h100", gpus=8, deepspeed=path)
    assert report.ranks is not None and report.ranks.scheme == "ZeRO-2"
    assert report.ranks.buffers["ZeRO reduce bucket"] == 2 * 3_000_000


@pytest.mark.parametrize(
    ("yaml", "expected"),
    [
        (
            "distributed_type: MULTI_GPU\nnum_processes: 4\nmixed_precision: 'no'\n",
            {"gpus": 4, "zero": 0, "fsdp": "no", "mixed_precision": None},
        ),
        (
            "distributed_type: FSDP\nnum_processes: 8\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n"
            "  fsdp_reshard_after_forward: false\n",
            {"gpus": 8, "fsdp": "grad-op", "offload_states": "none"},
        ),
        (
            "distributed_type: FSDP\nnum_processes: 16\nmixed_precision: bf16\nfsdp_config:\n"
            "  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_offload_params: true\n",
            {"gpus": 16, "fsdp": "hybrid", "offload_states": "params"},
        ),
        (
            "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\ndeepspeed_config:\n  zero_stage: 2\n"
            "  offload_optimizer_device: cpu\n  offload_param_device: none\n",
            {"gpus": 8, "zero": 2, "offload_states": "optimizer", "mixed_precision": None},
        ),
    ],
)
def test_accelerate_config_sets_the_options(tmp_path: Path, yaml: str, expected: dict[str, Any]) -> None:
    path = _write(tmp_path, "default_config.yaml", "compute_environment: LOCAL_MACHINE\n" + yaml)
    config = SimulationConfig(accelerate_config=path)
    assert {name: getattr(config, name) for name in expected} == expected
    if "mixed_precision: bf16" in yaml and "DEEPSPEED" not in yaml:
        assert str(config.mixed_precision) == "torch.bfloat16"  # accelerate runs under autocast
    if "DEEPSPEED" in yaml:
        assert str(config.dtype) == "torch.bfloat16"  # accelerate turns on DeepSpeed's bf16, which casts the weights


def test_accelerate_reads_its_deepspeed_file(tmp_path: Path) -> None:
    _ds(tmp_path, DS_CONFIG, "zero3.json")
    yaml = (
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\n"
        "deepspeed_config:\n  deepspeed_config_file: zero3.json\n"
    )
    path = _write(tmp_path, "default_config.yaml", yaml)
    config = SimulationConfig(accelerate_config=path)
    assert (config.gpus, config.zero, config.offload_states) == (8, 3, "params")


def test_the_file_fills_in_and_may_not_be_contradicted(tmp_path: Path) -> None:
    path = _ds(tmp_path, DS_CONFIG)
    assert SimulationConfig(gpus=8, zero=3, deepspeed=path).zero == 3  # agreeing is fine
    with pytest.raises(ConfigError, match=r"--zero 2 contradicts ds_config\.json, which sets zero = 3"):
        SimulationConfig(gpus=8, zero=2, deepspeed=path)


@pytest.mark.parametrize(
    ("name", "text", "error", "message"),
    [
        ("ds.json", "{not json", ConfigError, "cannot read the DeepSpeed config"),
        ("ds.json", '{"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}}', ConfigError, "Trainer"),
        (
            "ds.json",
            '{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}}',
            UnsupportedError,
            "NVMe offload swaps ZeRO-3's partitions",
        ),
        (
            "ds.json",
            '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}, "aio": {"use_gds": true}}',
            UnsupportedError,
            "use_gds",
        ),
        ("acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nbogus: 1\n", ConfigError, "unknown keys"),
        ("acc.yaml", "distributed_type: [\n", ConfigError, "cannot read the accelerate config"),
        (
            "acc.yaml",
            "compute_environment: LOCAL_MACHINE\ndistributed_type: XLA\nmixed_precision: 'no'\n",
            UnsupportedError,
            "distributed_type XLA is not modelled",
        ),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, name: str, text: str, error: type[Exception], message: str) -> None:
    key = "deepspeed" if name.endswith(".json") else "accelerate_config"
    with pytest.raises(error, match=message):
        SimulationConfig(gpus=8, **{key: _write(tmp_path, name, text)})


def test_cli_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["trace", "gpt2", "--gpus", "8", "--deepspeed", _write(tmp_path, "ds.json", "[1, 2")])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert err.startswith("vramsim: error: cannot read the DeepSpeed config") and err.count("\n") == 1, err


def test_cli_offload_json_reports_host_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ds_config with ZeRO-3 offload through the CLI: --json gives the host bytes in ranks.host, none on the device."""
    path = _ds(tmp_path, {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})
    code = main(["trace", "gpt2", "--seq-len", "16", "--device", "h100", "--gpus", "8", "--deepspeed", path, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    ranks = data["ranks"]
    assert ranks["scheme"] == "ZeRO-3 + offload optimizer" and data["options"]["offload_states"] == "optimizer"
    assert ranks["model_state"]["optimizer_states"] == 0 and ranks["host"]["optimizer_states"] > 0
    assert set(ranks["host"]) == {"parameters", "gradients", "optimizer_states"}
    assert "cpu_offload_states" in {a["name"] for a in data["assumptions"]}


def _args(**fields: Any) -> transformers.TrainingArguments:
    return transformers.TrainingArguments(output_dir="unused", use_cpu=True, report_to="none", **fields)


def test_training_arguments_run_as_the_trainer_runs_them(tiny_llama: transformers.LlamaConfig) -> None:
    """The Trainer's defaults count: fused AdamW (optim) and clipping at 1.0; bf16 is accelerate's autocast."""
    args = _args(
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        bf16=True,
        gradient_checkpointing=True,
        torch_empty_cache_steps=1,
    )
    config = SimulationConfig(training_args=args)
    assert (config.batch_size, config.grad_accum, config.mixed_precision, config.checkpointing) == (4, 2, torch.bfloat16, "full")
    assert (config.max_grad_norm, config.optimizer, config.torch_empty_cache_steps) == (1.0, "adamw", 1)  # adamw: fused AdamW
    given = vramsim.simulate(tiny_llama, training_args=args, seq_len=32, device="h100")
    spelled = vramsim.simulate(
        tiny_llama,
        batch_size=4,
        grad_accum=2,
        mixed_precision="bf16",
        checkpointing="full",
        max_grad_norm=1.0,
        torch_empty_cache_steps=1,
        seq_len=32,
        device="h100",
    )
    assert given.peak_bytes == spelled.peak_bytes and given.settings == spelled.settings


@pytest.mark.parametrize(("fsdp", "expected"), [("full_shard", "full"), ("shard_grad_op", "grad-op")])
def test_training_arguments_fsdp(fsdp: str, expected: str) -> None:
    assert SimulationConfig(training_args=_args(fsdp=fsdp), gpus=8).fsdp == expected


def test_training_arguments_deepspeed_filled_by_transformers() -> None:
    """TrainingArguments fills a DeepSpeed config's "auto" values itself (it needs deepspeed installed to do so)."""
    pytest.importorskip("deepspeed")
    args = _args(
        per_device_train_batch_size=2,
        bf16=True,
        deepspeed={"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"},
    )
    config = SimulationConfig(training_args=args, gpus=8)
    assert (config.zero, config.batch_size, config.dtype) == (3, 2, torch.bfloat16)


def test_training_arguments_must_be_training_arguments() -> None:
    with pytest.raises(ConfigError, match=r"training_args must be a transformers\.TrainingArguments, not dict"):
        SimulationConfig(training_args={"per_device_train_batch_size": 4})
