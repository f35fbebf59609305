"""The options of a simulation, one dataclass per concern, checked once; the launch files users keep."""

from vramsim.config.analysis import ANALYSIS_OPTIONS, AnalysisOptions
from vramsim.config.diffusion import DiffusionOptions
from vramsim.config.launch import LaunchFileOptions
from vramsim.config.options import Option
from vramsim.config.parallelism import ParallelOptions
from vramsim.config.precision import PrecisionOptions
from vramsim.config.quantization import QuantizationOptions
from vramsim.config.simulation import SimulationConfig, options
from vramsim.config.training import TrainingOptions
from vramsim.config.workload import WorkloadOptions

__all__ = [
    "ANALYSIS_OPTIONS",
    "AnalysisOptions",
    "DiffusionOptions",
    "LaunchFileOptions",
    "Option",
    "ParallelOptions",
    "PrecisionOptions",
    "QuantizationOptions",
    "SimulationConfig",
    "TrainingOptions",
    "WorkloadOptions",
    "options",
]
