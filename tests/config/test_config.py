"""The config's groups compose into one flat SimulationConfig, and the config imports nothing above it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

from vramsim.config import ANALYSIS_OPTIONS, AnalysisOptions, ParallelOptions, SimulationConfig
from vramsim.config.choices import OPTIMIZERS, QUANTIZATIONS
from vramsim.config.simulation import OPTION_ORDER
from vramsim.workload.optimizers import BUILDERS
from vramsim.workload.quantization.diffusers_formats import DIFFUSERS_FORMAT_NAMES
from vramsim.workload.quantization.weights import QUANTIZATION_ARGUMENTS


def test_option_order_names_every_field_once() -> None:
    """The CLI and the report list the options in ``OPTION_ORDER``: a field left out of it would never be offered."""
    assert sorted(OPTION_ORDER) == sorted(f.name for f in fields(SimulationConfig) if f.init)  # not its warnings
    assert len(set(OPTION_ORDER)) == len(OPTION_ORDER)


def test_groups_hold_disjoint_fields_read_flat() -> None:
    config = SimulationConfig(gpus=8, zero=1, tp=2)
    assert isinstance(config, AnalysisOptions) and isinstance(config, ParallelOptions)
    assert (config.gpus, config.zero, config.tp) == (8, 1, 2)
    assert not ANALYSIS_OPTIONS & {f.name for f in fields(ParallelOptions)}


def test_analysis_options_are_the_variants_options() -> None:
    """What a variant of one trace may set (``simulate_each``): the options computed from the graph."""
    assert set(ANALYSIS_OPTIONS) == {
        "checkpointing",
        "activation_offloading",
        "gradient_checkpointing",
        "gpus",
        "zero",
        "fsdp",
        "gradient_as_bucket_view",
        "headroom",
        "memory_history",
        "expandable_segments",
        "cuda_module_loading",
        "pp",
        "pp_schedule",
        "micro_batches",
        "pp_virtual_stages",
        "offload_states",
        "shard_group_size",
        "torch_empty_cache_steps",
    }


def test_the_names_checked_are_the_names_built() -> None:
    """The workload builds each optimizer and quantization the config accepts, and no other."""
    assert tuple(BUILDERS) == OPTIMIZERS
    assert (*QUANTIZATION_ARGUMENTS, *DIFFUSERS_FORMAT_NAMES) == QUANTIZATIONS


def test_config_imports_nothing_above_it() -> None:
    """The config sits below the workload and the engine, and loads without torch."""
    code = (
        "import sys, vramsim.config; "
        "below = ('vramsim.config', 'vramsim.results', 'vramsim.estimators', 'vramsim.tracer', 'vramsim.errors', "
        "'vramsim.model_zoo'); "
        "above = sorted(m for m in sys.modules if m.startswith('vramsim.') and not m.startswith(below)); "
        "assert not above, above; assert 'torch' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
