"""A target device: what the tracer counts on it and how its kernels differ from meta execution."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from vramsim.estimators.devices import DeviceProfile, get_device
from vramsim.results.report import Assumption
from vramsim.tracer.kernels import autocast_lists
from vramsim.tracer.kernels.attention import CUDNN_RUNTIME_VERSION, GpuAttention, cpu_attention, cpu_attention_workspaces
from vramsim.tracer.kernels.bitsandbytes_kernels import WithBitsandbytes
from vramsim.tracer.kernels.cpu_kernels import conv2d_workspaces, matmul_workspaces, onednn_brgemm_isa
from vramsim.tracer.kernels.cpu_layout import CPU_FUNCTIONS, cpu_output_layouts
from vramsim.tracer.kernels.cpu_promotion import binary_promotion_copies
from vramsim.tracer.kernels.cpu_scaled_mm import scaled_mm_workspaces
from vramsim.tracer.kernels.emulation import KernelEmulation, KernelRules
from vramsim.tracer.kernels.flash_attn import flash_attn_workspaces
from vramsim.tracer.kernels.gpu_kernels import GPU_FUNCTIONS, GpuWorkspaces
from vramsim.tracer.kernels.legacy_autograd import legacy_softmax_functions
from vramsim.tracer.kernels.marlin import marlin_workspaces
from vramsim.tracer.kernels.onednn_conv import onednn_conv_isa, onednn_conv_workspaces
from vramsim.tracer.kernels.reductions import reduction_copies
from vramsim.tracer.mode import WorkspaceRule

if TYPE_CHECKING:
    from vramsim.config.workload import TorchAutograd

__all__ = ["Target", "resolve_target"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The device a prediction is for."""

    name: str
    profile: DeviceProfile
    rules: KernelRules
    counted_devices: frozenset[str]
    """Tensor devices that land in the target's memory (meta stands for the target itself)."""
    foreach: bool
    """Whether torch.optim defaults to the foreach implementation there."""
    notes: tuple[Assumption, ...] = ()
    training_notes: tuple[Assumption, ...] = ()
    """Assumptions only a backward pass rests on: listed for training runs only."""

    @property
    def traced_alike(self) -> DeviceProfile:
        """What a trace for this target reads of its device: the profile less its names and its memory.
        ``resolve_target`` makes every field above from the profile, and the workload reads the profile's vendor,
        kernels and processors, never its size (the memory is the analysis's: the allocator, the headroom, a device
        map), so two GPUs equal here trace every program alike; only a refusal's words name the GPU."""
        return dataclasses.replace(self.profile, name="", label="", memory_bytes=None, memory_source="", reported_names=())

    def emulation(self, autograd: TorchAutograd = "installed") -> KernelEmulation:
        """The target's kernel emulation; ``autograd="1.10"`` adds PyTorch 1.10's softmax saved set."""
        if autograd == "installed":
            return KernelEmulation(self.rules)
        legacy = legacy_softmax_functions(cuda=self.profile.vendor != "cpu")
        functions = self.rules.functions
        joined = functions.joined(legacy) if isinstance(functions, WithBitsandbytes) else {**functions, **legacy}
        return KernelEmulation(dataclasses.replace(self.rules, functions=joined))


def combine_workspaces(*rules: WorkspaceRule) -> WorkspaceRule:
    """One workspace rule from several: each kernel family's rule answers for its own ops
    (and returns nothing for the rest), so their buffers are simply concatenated."""

    def workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        return [nbytes for rule in rules for nbytes in rule(func, args, kwargs)]

    return workspaces


_CPU_RULES = KernelRules(
    default_autocast_dtype=torch.bfloat16,
    lower_precision_ops=autocast_lists.CPU_LOWER_PRECISION,
    fp32_ops=autocast_lists.CPU_FP32,
    promote_ops=autocast_lists.CPU_PROMOTE,
    attention=cpu_attention,
    workspaces=combine_workspaces(
        cpu_attention_workspaces,
        matmul_workspaces,
        conv2d_workspaces,
        onednn_conv_workspaces,
        reduction_copies(cuda=False),
        scaled_mm_workspaces,
        binary_promotion_copies,
    ),
    output_layouts=cpu_output_layouts,
    functions=WithBitsandbytes(CPU_FUNCTIONS, cuda=False),
)


MEASURED_CAPABILITY = (9, 0)
"""The compute capability of the GPU the emulation has been checked on (``benchmarks/gpu_validation.py``)."""


def resolve_target(name: str) -> Target:
    """The target named ``name``: ``cpu`` or a GPU of the catalog (``vramsim gpus``)."""
    profile = get_device(name)
    if profile.vendor == "cpu":
        # Host tensors the program makes (e.g. Adam's step counters) live on the CPU too.
        # torch.optim picks for-loop kernels on the CPU (_default_to_fused_or_foreach).
        return Target(
            name=profile.name,
            profile=profile,
            rules=_CPU_RULES,
            counted_devices=frozenset({"meta", "cpu"}),
            foreach=False,
            notes=_cpu_notes(),
        )
    # On a GPU, host tensors (Adam's step counters) stay on the CPU and are not counted;
    # torch.optim defaults to foreach kernels for CUDA tensors (_default_to_fused_or_foreach).
    capability = profile.compute_capability or (9, 0)  # ROCm: AOTriton flash/efficient kernels
    rocm = profile.vendor == "amd"
    rules = KernelRules(
        default_autocast_dtype=torch.float16,
        lower_precision_ops=autocast_lists.CUDA_LOWER_PRECISION,
        fp32_ops=autocast_lists.CUDA_FP32,
        promote_ops=autocast_lists.CUDA_PROMOTE,
        fp32_dtype_ops=autocast_lists.CUDA_FP32_SET_DTYPE,
        attention=GpuAttention(compute_capability=capability, rocm=rocm),
        workspaces=combine_workspaces(
            GpuWorkspaces(capability, rocm),
            flash_attn_workspaces,
            reduction_copies(cuda=True),
            marlin_workspaces(profile.multiprocessors or 0),
        ),
        functions=WithBitsandbytes(GPU_FUNCTIONS, cuda=True),
    )
    checked = (
        "checked against real runs on an H200, which has its kernels (sm 9.0)"
        if profile.compute_capability == MEASURED_CAPABILITY
        else "checked against real runs on an H200 (sm 9.0) only, not on this GPU's kernels"
    )
    note = Assumption(
        name="gpu_emulation",
        detail=f"{profile.label} is emulated on the meta device (kernel choices, autocast, allocator) "
        f"from PyTorch's source; {checked} (benchmarks/measured/h200.json)",
    )
    selection, backward = _sdpa_notes(rules.attention)
    return Target(
        name=profile.name,
        profile=profile,
        rules=rules,
        counted_devices=frozenset({"meta"}),
        foreach=True,
        notes=(note, *selection),
        training_notes=backward,
    )


def _sdpa_notes(attention: Any) -> tuple[tuple[Assumption, ...], tuple[Assumption, ...]]:
    """Which SDPA kernel family leads on this GPU depends on the cuDNN the PyTorch build ships (any
    run); which memory-efficient backward kernel runs depends on its shared memory (training runs)."""
    if not isinstance(attention, GpuAttention) or attention.rocm:
        return (), ()
    major, minor = attention.compute_capability
    efficient = Assumption(
        name="efficient_attention_backward",
        detail=f"memory-efficient attention backward (fp32, masked or pre-sm80 fp16 attention) is sized for the CUTLASS "
        f"kernel sm{major}{minor} launches, assuming 128-query-row kernels fit its shared memory only above "
        "gpu_kernels.EFFICIENT_BACKWARD_ROW128_SMEM_KIB (their exact shared-memory size is not computed)",
    )
    if not attention.prefers_cudnn():
        return (), (efficient,)
    major, minor = divmod(CUDNN_RUNTIME_VERSION, 10000)
    cudnn = Assumption(
        name="cudnn_attention",
        detail=f"PyTorch 2.13's CUDA 13.0 wheels (cuDNN {major}.{minor // 100}) try cuDNN attention first on this GPU "
        "(sdp_utils.cpp check_prefer_cudnn_attention); its backward scratch is cudnn-frontend's dQ accumulator and "
        "softmax sum, the cuDNN engine's own workspace is not counted",
    )
    return (cudnn,), (efficient,)


def _cpu_notes() -> tuple[Assumption, ...]:
    """Kernel scratch on the CPU depends on this machine: its thread count and its ISA."""
    threads = Assumption(
        name="cpu_threads",
        detail=f"CPU kernel scratch buffers are sized for {torch.get_num_threads()} threads (torch.get_num_threads())",
    )
    unmodelled = []
    if onednn_brgemm_isa() is None:
        unmodelled.append("bf16 matmul scratch (modelled for AVX-512 CPUs without AMX)")
    if onednn_conv_isa() is None:
        unmodelled.append("oneDNN fp32 convolution reorder buffers (modelled for AVX-512 CPUs without AMX)")
    if not unmodelled:
        return (threads,)
    isa = Assumption(name="cpu_isa", detail="; ".join(unmodelled) + ": not counted on this CPU")
    return threads, isa
