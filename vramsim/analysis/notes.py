"""What a report says of a single model's run: its assumptions, the options shown, the warnings."""

from __future__ import annotations

from typing import Any

import torch
import transformers

from vramsim.config import SimulationConfig, options
from vramsim.config.choices import parse_loss
from vramsim.estimators.activation_offloading import FORWARD_STASH, MIN_OFFLOAD_BYTES
from vramsim.estimators.assumptions import COMPILE_FUSION, COMPILE_MODELLED, COMPILE_SHARDED, FLOAT8_TRAINING
from vramsim.results.report import Assumption
from vramsim.tracer.data_dependent import parse_routing
from vramsim.tracer.records import Trace
from vramsim.workload.build import MXFP4_WEIGHTS
from vramsim.workload.losses import loss_notes
from vramsim.workload.models import loads_checkpoint_dtype
from vramsim.workload.optimizers import PAGED_STATES, describe_optimizer, paged_states
from vramsim.workload.program import Program
from vramsim.workload.quantization.weights import quantization_notes
from vramsim.workload.targets import Target
from vramsim.workload.text_only import text_only_note

__all__ = ["option_warnings", "report_options", "run_notes"]


def report_options(config: SimulationConfig, program: Program) -> dict[str, Any]:
    """The report's JSON ``options``: each field whose ``Option`` says how it is shown, and the
    optimizer implementation that ran (a name such as ``adamw`` depends on the target)."""
    shown = {spec.name: option.report(getattr(config, spec.name)) for spec, option in options() if option.report}
    if program.optimizer is not None:
        shown["optimizer_implementation"] = describe_optimizer(program.optimizer)
    return shown


def option_warnings(config: SimulationConfig, trace: Trace) -> list[str]:
    """Options that were taken but change less than their name says on this run."""
    warnings = []
    if config.lora is not None and config.task != "train":
        warnings.append(f"LoRA with --task {config.task}: the adapters are traced unmerged (as peft runs them), not trained")
    routing = parse_routing(config.moe_routing)
    if routing.kind != "balanced" and routing.describe() not in trace.notes:
        warnings.append(f"--moe-routing {routing.spec} changed nothing: no MoE router's expert picks were read in this model")
    return warnings


def run_notes(config: SimulationConfig, program: Any, target: Target) -> list[Assumption]:
    """The assumptions a run's report lists, from its options, its program and its target."""
    notes = _step_notes(config) + _recipe_notes(config)
    if isinstance(config.loss, str):
        model_config = getattr(program.model, "config", None)
        notes += loss_notes(
            parse_loss(config.loss), getattr(model_config, "vocab_size", None), getattr(model_config, "hidden_size", None)
        )
    notes += _trainer_notes(config, target)
    notes += _float8_notes(config)
    notes += _program_notes(program)
    if program.compiled is not None and config.gpus > 1:
        notes.append(Assumption(name="compile_sharded", detail=COMPILE_SHARDED))
    notes += _precision_notes(config, program, target)
    return notes


def _recipe_notes(config: SimulationConfig) -> list[Assumption]:
    """Whose defaults the training run took, and what of that library's run is left out."""
    if config.task != "train":
        return []
    recipe = config.recipe_defaults
    detail = f"{config.recipe}: the defaults of {recipe.source} where options are not given (vramsim/config/recipes.py)"
    return [Assumption(name="recipe", detail="; ".join((detail, *recipe.notes)))]


def _step_notes(config: SimulationConfig) -> list[Assumption]:
    """Which step's peak is reported, how checkpointing is computed, what a training step holds."""
    notes = [
        Assumption(
            name="steady_state",
            detail=f"{config.steps} steps are run; the peak reported is the last one's"
            if config.steps > 1
            else "1 step is run; the peak reported is the first step's, not a steady state",
        )
    ]
    if config.checkpointing != "none":
        notes.append(
            Assumption(
                name="checkpointing_from_graph",
                detail=f"checkpointing {config.checkpointing} is computed from one trace without checkpointing, as "
                "non-reentrant torch.utils.checkpoint runs it (inputs kept, forward replayed at the first saved-tensor "
                "read, early stop; selective keeps matmul and attention outputs, selective:torchtitan torchtitan's save list "
                "but every second matmul of a block; offload is save_on_cpu)",
            )
        )
    if config.activation_offloading:
        notes.append(
            Assumption(
                name="activation_offloading",
                detail=f"torchtune's OffloadActivations (use_streams=True, max_fwd_stash_size={FORWARD_STASH}, "
                f"min_offload_size={MIN_OFFLOAD_BYTES}) over what the saved-tensor hooks see, the head under its "
                "NoOpManager and the loss outside the context; each copy is assumed done when its event is waited on "
                "(the side stream's timing and record_stream's later frees are not modelled); the pinned host copies "
                "are host memory, not counted",
            )
        )
    if config.task == "train":
        notes.append(
            Assumption(
                name="outputs_kept_through_backward",
                detail="the model's outputs (logits) are held until backward ends, as out = model(**batch); "
                "out.loss.backward() holds them",
            )
            if config.keep_outputs
            else Assumption(
                name="outputs_dropped_before_backward",
                detail="the model's outputs (logits) are released once the loss is computed, as the HF Trainer does",
            )
        )
        if config.inputs is None:
            notes.append(
                Assumption(
                    name="no_cache_in_training",
                    detail="synthesised training batches pass use_cache=False where the model takes it: "
                    "a training step reads no KV cache",
                )
            )
    return notes


def _trainer_notes(config: SimulationConfig, target: Target) -> list[Assumption]:
    """The trainer and autograd behaviours an option asks for (empty_cache steps, PyTorch 1.10's autograd)."""
    notes = []
    if config.torch_empty_cache_steps is not None and target.profile.vendor != "cpu":
        notes.append(
            Assumption(
                name="torch_empty_cache_steps",
                detail=f"the HF Trainer's torch_empty_cache_steps="
                f"{config.torch_empty_cache_steps}: torch.cuda.empty_cache() after the loss, before "
                "backward, in the traced steps whose global_step (0, 1) is a multiple of it",
            )
        )
    if config.torch_autograd == "1.10":
        notes.append(
            Assumption(
                name="torch_autograd_1_10",
                detail="PyTorch 1.10's autograd: softmax and log_softmax "
                "save their input beside their output (derivatives.yaml before 1.11); other differences "
                "of that release are not modelled",
            )
        )
    return notes


def _float8_notes(config: SimulationConfig) -> list[Assumption]:
    """What torchao's float8 training is traced as, and what of torchtitan's float8 options is not."""
    if config.float8 is None:
        return []
    return [Assumption(name="float8_training", detail=FLOAT8_TRAINING)]


def _program_notes(program: Any) -> list[Assumption]:
    """What the program built brings: a text-only forward routed, compilation, paged optimizer states, the fp16
    grad scaler."""
    notes = []
    routed = text_only_note(program.model)
    if routed is not None:
        notes.append(Assumption(name="text_only_forward", detail=routed))
    if program.compiled is not None:
        notes.append(Assumption(name="compile_partitioned", detail=f"{COMPILE_MODELLED} ({program.compiled.describe()})"))
        notes.append(Assumption(name="compile_fusion", detail=COMPILE_FUSION))
    if getattr(program.optimizer, "traced_paged", False):
        notes.append(Assumption(name="paged_optimizer_states", detail=f"{PAGED_STATES}: {_paged_bytes(program):,} B here"))
    if program.scaler is not None:
        notes.append(
            Assumption(
                name="grad_scaler",
                detail="fp16 autocast trains with torch.amp.GradScaler (fp32 master weights, loss scaled by 2**16): "
                "its scale, growth tracker, found_inf and inverse scale are traced",
            )
        )
    return notes


def _precision_notes(config: SimulationConfig, program: Any, target: Target) -> list[Assumption]:
    """How the weights and autocast run: bf16 emulated, quantized weights, the weights' dtype when none was given."""
    notes = []
    profile = target.profile
    if config.mixed_precision == torch.bfloat16 and profile.vendor == "nvidia" and not profile.supports_bf16:
        notes.append(
            Assumption(
                name="bf16_emulated",
                detail=f"{profile.label} has no native bf16: torch.autocast "
                "runs it emulated (torch.cuda.is_bf16_supported(including_emulation=True)), with the "
                "same tensor sizes and this architecture's kernels (no flash or memory-efficient "
                "attention in bf16 before sm80)",
            )
        )
    if config.quantization is not None:
        notes += quantization_notes(
            program.model,
            train=config.task == "train",
            lora=config.lora is not None,
            gpu=config.device.lower() != "cpu",
            kbit_preparation=config.kbit_preparation,
        )
    weights = next((p.dtype for module in program.modules.values() for p in module.parameters()), None)
    if weights is not None and config.dtype is None:
        notes.append(
            Assumption(name="weight_dtype", detail=_default_weights(str(weights).removeprefix("torch."), config, program))
        )
    return notes


def _default_weights(weights: str, config: SimulationConfig, program: Any) -> str:
    """Where the weights' dtype comes from when none is given (``Program.weights_from``, set by ``workload/build.py``)."""
    loader = f"transformers {transformers.__version__}'s from_pretrained"
    if program.weights_from == "the checkpoint's config" and config.task == "train":
        return (
            f"weights in {weights} (no dtype given): the checkpoint config's dtype, which {loader} loads when a script "
            "passes none (dtype='auto'); --dtype fp32 trains fp32 weights"
        )
    if program.weights_from == "the checkpoint's config":
        return f"weights in {weights} (no dtype given): the checkpoint config's dtype"
    if program.weights_from == MXFP4_WEIGHTS:
        return (
            f"weights in {weights} (no dtype given, and the config names none): the dtype an MXFP4 checkpoint stores its "
            f"other tensors in, which {loader} reads off them (dtype='auto'), its experts dequantized to it"
        )
    if program.weights_from == "default" and config.task == "train" and not loads_checkpoint_dtype():
        return f"weights in {weights} (no dtype given): {loader} loads torch's default dtype when a script passes none"
    if program.weights_from == "default":
        return f"weights in {weights} (no dtype given, and the model's config names none)"
    return f"weights in {weights} (no dtype given)"


def _paged_bytes(program: Program) -> int:
    """The bytes of a paged optimizer's states in managed memory."""
    return sum(state.nbytes for state in paged_states(program.optimizer))
