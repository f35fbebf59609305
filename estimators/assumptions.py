"""Every memory overhead vramsim assumes rather than traces, each with its source.

Tensors the program makes are traced; these are not: the CUDA/HIP context, the BLAS workspaces
PyTorch hands to cuBLAS/hipBLAS, and NCCL's communication buffers. Each constant names where its
figure comes from. Figures read from source code are facts of the versions cited; context sizes
are measurements other people published, and they vary with driver, CUDA version and how many
kernels the program loads (lazy module loading has been the default since CUDA 11.7).

``overheads_for`` lists the entries that apply to one device; ``totals`` adds them up the way the
three memory counters nest: allocated <= reserved <= device (what ``nvidia-smi`` shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramsim.errors import ConfigError

from .devices import Architecture, DeviceProfile

__all__ = [
    "COMPILE_FUSION",
    "COMPILE_MODELLED",
    "COMPILE_SHARDED",
    "CUBLAS_WORKSPACE_BYTES_DEFAULT",
    "CUBLAS_WORKSPACE_BYTES_SM90_PLUS",
    "CUDA_CONTEXT_BYTES",
    "CUDA_CONTEXT_BYTES_EAGER_LOADING",
    "CUDA_KERNELS_LOADED_BYTES",
    "CUDA_RNG_STATE_BYTES",
    "DATA_PARALLEL_COMMUNICATION",
    "DCP_CHECKPOINT_PATH",
    "DCP_COPY_AHEAD_BYTES",
    "DDP_BUCKET_CAP_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "DEEPSPEED_AIO_ALIGNED_BYTES",
    "DEEPSPEED_ALLGATHER_BUCKET_ELEMENTS",
    "DEEPSPEED_MAX_LIVE_PARAMETERS",
    "DEEPSPEED_MIN_SWAPPABLE_BYTES",
    "DEEPSPEED_NVME_DEFAULTS",
    "DEEPSPEED_OVERLAP_COMM_STAGES",
    "DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD",
    "DEEPSPEED_PREFETCH_BUCKET_ELEMENTS",
    "DEEPSPEED_REDUCE_BUCKET_ELEMENTS",
    "DEEPSPEED_SUB_GROUP_ELEMENTS",
    "DEEPSPEED_VERSION",
    "DENOISING_STEPS_TRACED",
    "EXPERT_PARALLEL_ALL_TO_ALLS_PER_LAYER",
    "FLOAT8_TRAINING",
    "FLUX_SCHNELL_MAX_SEQUENCE_LENGTH",
    "FLUX_TRAINING_GUIDANCE",
    "FSDP2_SHARD_RULE",
    "GPUS_PER_NODE",
    "HIPBLASLT_WORKSPACE_BYTES",
    "HIPBLAS_WORKSPACE_BYTES_DEFAULT",
    "HIPBLAS_WORKSPACE_BYTES_GFX94_95",
    "HIP_CONTEXT_BYTES",
    "HSDP_SHARD_GROUP_DEFAULT",
    "LIGER_CHUNK_MEM_CONST",
    "MODEL_FLOPS_UTILISATION",
    "MXFP4_CHECKPOINT_DTYPE",
    "NCCL_ASSUMED_CHANNELS",
    "NCCL_LL128_BUFFER_BYTES",
    "NCCL_LL_BUFFER_BYTES",
    "NCCL_RING_PEERS",
    "NCCL_SIMPLE_BUFFER_BYTES",
    "PIPELINE_BUBBLE",
    "PIPELINE_SENDS_PER_CHUNK",
    "QUANTIZED_KERNELS",
    "QUANTIZED_TRAINING_KERNELS",
    "SCRIPT_LORA_TARGETS",
    "SCRIPT_MAX_GRAD_NORM",
    "SD3_SCRIPT_LORA_TARGETS",
    "SD3_SCRIPT_MAX_SEQUENCE_LENGTH",
    "TENSOR_PARALLEL_ALL_REDUCES_PER_LAYER",
    "TORCHTUNE_OUTPUT_CHUNKS",
    "TRAINER_LOG_HISTORY",
    "TRAINING_ARGS_BYTES",
    "WAN_VAE_DTYPE",
    "CountedIn",
    "ModuleLoading",
    "Overhead",
    "OverheadTotals",
    "cuda_context_bytes",
    "overheads_for",
    "totals",
]

_MiB = 1 << 20

CountedIn = Literal["allocated", "reserved", "device"]

CUBLAS_WORKSPACE_BYTES_DEFAULT = 4096 * 1024 * 2 + 16 * 1024 * 8
"""8,519,680 B: PyTorch's cuBLAS workspace before Hopper, ``CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8``.

Source: aten/src/ATen/cuda/CublasHandlePool.cpp, ``parseChosenWorkspaceSize`` (default when the
env var is unset). ``getNewWorkspace`` takes it from the CUDA caching allocator, so it shows in
``memory_allocated``; being > 1 MiB and < 10 MiB it lands in the large pool, in a 20 MiB segment
of its own unless a free block of an earlier segment fits it.
"""

CUBLAS_WORKSPACE_BYTES_SM90_PLUS = 32 * _MiB
"""33,554,432 B: PyTorch's cuBLAS workspace on compute capability 9.x, 10.x and 12.x.

Source: CublasHandlePool.cpp ``parseChosenWorkspaceSize`` ("32MiB for Hopper"), extended to
Blackwell (majors 10 and 12) by pytorch/pytorch#175344 (2026-02); the revert #182669 was closed
unmerged. cuBLAS recommends 32 MiB from Hopper on (cuBLAS docs, ``cublasSetWorkspace``).
On CUDA builds the cuBLASLt workspace is *unified* with this one by default
(``TORCH_CUBLASLT_UNIFIED_WORKSPACE``, see ``getCUDABlasLtWorkspace`` and the docstring of
``torch.backends.cuda.blas_workspace_size``): Lt reuses the same allocation, so it adds nothing.
"""

HIPBLAS_WORKSPACE_BYTES_DEFAULT = 32 * _MiB
"""hipBLAS workspace on ROCm GPUs other than gfx94x/gfx95x.

Source: CublasHandlePool.cpp ``parseChosenWorkspaceSize`` under ``USE_ROCM`` ("32MiB default");
taken from the caching allocator like the CUDA one (pytorch/pytorch#138791).
"""

HIPBLAS_WORKSPACE_BYTES_GFX94_95 = 128 * _MiB
"""hipBLAS workspace on gfx94x/gfx95x (MI300 series, MI350): "128MiB for gfx94x/gfx95x".

Source: CublasHandlePool.cpp ``parseChosenWorkspaceSize`` under ``USE_ROCM``.
"""

HIPBLASLT_WORKSPACE_BYTES = 76 * _MiB
"""hipBLASLt workspace: ``76*1024`` KiB, "Use 76 MB for hipBLASLt" (pytorch/pytorch#139300).

Every Instinct GPU in the catalog pays it: ``Context::blasPreferredBackend`` defaults to hipBLASLt
when every device is in ``CUDAHooks::getHipblasltPreferredArchs`` (gfx90a, gfx942; gfx950 from ROCm 7).

Source: CublasHandlePool.cpp ``parseCUDABlasLtWorkspaceSize``. On ROCm the Lt workspace is a
separate pool per (handle, stream) (``getCUDABlasLtWorkspace``), taken from the caching allocator.
AMD's ROCm/pytorch release branches raise it to 80 MiB (ROCm/pytorch#3657, upstream #197201);
upstream wheels of 2.13 are assumed to keep 76 MiB.
"""

CUDA_CONTEXT_BYTES: dict[Architecture, int] = {
    "volta": 300 * _MiB,
    "turing": 300 * _MiB,
    "ampere": 400 * _MiB,
    "ada": 426 * _MiB,
    "hopper": 648_871_936,
    "blackwell": 612 * _MiB,
}
"""Device memory a bare CUDA context takes outside PyTorch's allocator (an assumption per architecture).

Measured with lazy module loading (CUDA >= 11.7), right after the context is created:
- volta/turing: "~300MB" (ptrblck, pytorch/pytorch#107667).
- ampere: "around 400MB" (ptrblck, pytorch/pytorch#109888); a bare context on an RTX 3090 was
  256 MiB (invoke-ai/InvokeAI#9413), so this leans high.
- ada: 426 MiB on an RTX 6000 Ada, torch 2.10+cu130, after ``mem_get_info`` (unslothai/unsloth-zoo#1053).
- hopper: 618.8 MiB on an H200, torch 2.11+cu130, driver 580.159.04, after ``torch.zeros(1, device="cuda")``
  (our own run: ``benchmarks/measured/h200.json``, ``context_bytes_after_init``).
- blackwell: 612 MiB on a B200 after ``mem_get_info`` (unslothai/unsloth#8669).
"""

CUDA_CONTEXT_BYTES_EAGER_LOADING: dict[Architecture, int] = {
    "volta": 1343 * _MiB,
    "turing": (1035 - 158) * _MiB,
    "ampere": 1687 * _MiB,
}
"""The bare context with eager module loading (``CUDA_MODULE_LOADING=EAGER``, and every CUDA before 11.7),
where the first CUDA call loads every kernel libtorch_cuda ships for the GPU: an assumption per architecture,
known only where someone measured it.

- volta: 1343 MiB on a Tesla V100-SXM2-16GB, driver 460.91.03 / CUDA 11.2, torch 1.10, as NVML "used" after
  ``torch.ones((1, 1)).to("cuda")`` (transformers' "Model training anatomy" page: "GPU memory occupied: 1343 MB").
- ampere: 1687 MiB on a GeForce RTX 3090 (GA102, sm86), torch 1.8.2+cu111, as nvidia-smi's use after
  ``torch.Tensor(1).cuda()`` (pytorch/pytorch#55277, a table of GPU memory per GPU and build); no A100 (sm80)
  figure was found, so the sm86 one stands for the architecture.
- turing: 877 MiB on a GeForce RTX 2080 Ti (TU102, sm75), torch 1.6.0+cu101, from nvidia-smi's 1035 MiB after
  ``torch.randn(64, 16, 200, 200).to("cuda:0")`` (pytorch/pytorch#49877) less that tensor's segment: 163,840,000 B
  rounded up to the allocator's 2 MiB step for large blocks, 158 MiB. The only Turing reading found; no T4 figure.

The kernels a step then loads (cuBLAS at its first matmul) are assumed to be ``CUDA_KERNELS_LOADED_BYTES``, as
with lazy loading; eager loading loads whole libraries, so that part is a lower bound.
"""

ModuleLoading = Literal["lazy", "eager"]
"""CUDA's ``CUDA_MODULE_LOADING``: lazy (the default since CUDA 12.2; PyTorch sets it from CUDA 11.7) or eager."""

_CONTEXTS: dict[ModuleLoading, tuple[str, dict[Architecture, int]]] = {
    "lazy": ("CUDA_CONTEXT_BYTES", CUDA_CONTEXT_BYTES),
    "eager": ("CUDA_CONTEXT_BYTES_EAGER_LOADING", CUDA_CONTEXT_BYTES_EAGER_LOADING),
}
"""Each module loading's context table, with its name for the report."""

CUDA_KERNELS_LOADED_BYTES: dict[Literal["inference", "training"], int] = {
    "inference": 728_563_712 - 648_871_936,
    "training": 804_061_184 - 648_871_936,
}
"""What the context grows by once a step's kernels are loaded (cuBLAS, cuBLASLt, the ATen kernels
the step runs): 76 MiB for a forward or generate step, 148 MiB for a training step (backward and
optimizer kernels too). Measured on an H200 (torch 2.11+cu130, each case in a fresh process) as
device memory in use minus ``memory_reserved()`` after the step, less the bare context: the
medians of 8 inference cases (687-697 MiB) and 14 training cases (751-767 MiB) from 0.1B to 47B
parameters (``benchmarks/measured/h200.json``). Measured on Hopper only; assumed alike elsewhere."""


HIP_CONTEXT_BYTES = 410 * _MiB
"""Device memory the HIP runtime takes outside PyTorch's allocator on ROCm (an assumption).

The only public figure found: ~0.4 GiB per process on an RX 7900 XTX, gfx1100
(Quartermaster-Labs/Quartermaster#24). Not measured on MI300X.
"""


def cuda_context_bytes(device: DeviceProfile, *, training: bool, module_loading: ModuleLoading = "lazy") -> int:
    """Device memory outside PyTorch's allocator once a step has run: the context and its loaded kernels."""
    if device.vendor == "amd":
        if module_loading != "lazy":
            raise ConfigError("cuda_module_loading is CUDA's setting; an AMD GPU runs ROCm (leave it at lazy)")
        return HIP_CONTEXT_BYTES
    contexts = _CONTEXTS[module_loading][1]
    if device.architecture not in contexts:
        raise ConfigError(
            f"no published CUDA context size with {module_loading} module loading for architecture "
            f"{device.architecture!r} (a device reading after a one-element tensor is what is missing); known: "
            f"{', '.join(contexts)}"
        )
    return contexts[device.architecture] + CUDA_KERNELS_LOADED_BYTES["training" if training else "inference"]


NCCL_SIMPLE_BUFFER_BYTES = 1 << 22
"""4 MiB: NCCL's Simple-protocol buffer per channel and peer (``DEFAULT_BUFFSIZE``, ``NCCL_BUFFSIZE``).

Source: NVIDIA/nccl src/init.cc ``computeBuffSizes``. RCCL is a fork with the same defaults.
"""

NCCL_LL_BUFFER_BYTES = 8 * 512 * 8 * 16
"""524,288 B: NCCL's LL-protocol buffer per channel and peer (``DEFAULT_LL_BUFFSIZE``).

Source: NVIDIA/nccl src/init.cc: lines per thread (8) x max threads (512) x steps (8) x 16 B.
"""

NCCL_LL128_BUFFER_BYTES = 120 * 640 * 8 * 8
"""4,915,200 B: NCCL's LL128-protocol buffer per channel and peer (``DEFAULT_LL128_BUFFSIZE``).

Source: NVIDIA/nccl src/init.cc: elems per thread (120) x max threads (640) x steps (8) x 8 B.
"""

NCCL_ASSUMED_CHANNELS = 16
"""Channels NCCL opens per communicator (an assumption: NCCL picks 2-32 from the topology; 16 is
common on 8-GPU NVLink servers). Real runs print it with ``NCCL_DEBUG=INFO``."""

NCCL_RING_PEERS = 2
"""Connections per channel in a ring: receive from the previous rank and send to the next.
Tree, NVLS, CollNet and point-to-point connections (all-to-all, pipeline send/recv) add more."""


DDP_FIRST_BUCKET_BYTES = 1 * _MiB
"""DDP's first gradient bucket: 1 MiB (``dist._DEFAULT_FIRST_BUCKET_BYTES``), so the first
all-reduce starts early. Source: torch/nn/parallel/distributed.py, ``_DEFAULT_FIRST_BUCKET_BYTES``."""

DDP_BUCKET_CAP_BYTES = 25 * _MiB
"""DDP's other gradient buckets: ``bucket_cap_mb=25`` (torch/nn/parallel/distributed.py). The
Reducer fills buckets with the parameters in reverse order, closing one once it reaches the cap
(``_compute_bucket_assignment_by_size``); each bucket is one flat buffer made when DDP wraps the
model (reducer.cpp ``initialize_buckets``) and kept for the whole run."""

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO ``reduce_bucket_size`` default, 5e8 elements (deepspeed/runtime/zero/config.py).
Stages 1 and 2 allocate it whole, in the weights' dtype, when backward's first gradient arrives
and release it after the reduction (stage_1_and_2.py ``setup_buckets``/``_release_ipg_buffers``);
stage 3 allocates it once at start-up (stage3.py, ``bucket.buffer = torch.empty(reduce_bucket_size)``)."""

DEEPSPEED_OVERLAP_COMM_STAGES = frozenset({3})
"""Stages where DeepSpeed's ``overlap_comm`` defaults to True (config.py ``overlap_comm_valid``:
``stage == ZeroStageEnum.weights``); with it stages 1 and 2 double the reduce bucket (``buf_1``)."""

DATA_PARALLEL_COMMUNICATION: dict[str, tuple[float, float]] = {
    "DDP": (0.0, 2.0),
    "ZeRO-1": (0.0, 2.0),
    "ZeRO-2": (0.0, 2.0),
    "FSDP2 grad-op": (1.0, 1.0),
    "ZeRO-3": (2.0, 1.0),
    "FSDP2 full": (2.0, 1.0),
}
"""Bytes each rank sends per step as (gathers of every weight, passes over the trained weights), used only to
order candidates of equal GPUs and recompute (``vramsim/search/strategy.py``). Rajbhandari et al. 2020 (ZeRO),
section 7: an all-reduce of the gradients moves 2 x the trained weights (reduce-scatter + all-gather); stages 1
and 2 move the same (reduce-scatter the gradients, all-gather the updated weights); stage 3 gathers every weight
for forward and again for backward and reduce-scatters the gradients, 3 x for full training (1.5 x DDP). FSDP2
full reshards after forward like stage 3; grad-op gathers once and keeps the weights to backward. Frozen weights
(LoRA's base) have no gradient to synchronise nor update to gather: DDP's reducer buckets only parameters that
require grad, while a sharded scheme still gathers them. Volumes, not times: bandwidths and overlap are not
modelled."""

TENSOR_PARALLEL_ALL_REDUCES_PER_LAYER = (2, 2)
"""All-reduces of one decoder layer's activations (tokens x hidden) on a tensor-parallel rank, forward and
backward: Megatron's f and g operators (Shoeybi et al. 2019, figure 4; Korthikanti et al. 2022, section 4.2:
"two all-reduces in the forward pass and two in the backward pass" per layer), after the row-parallel
o_proj and down_proj in forward, before the column-parallel q/k/v and gate/up in backward. Sequence
parallelism replaces each by an all-gather and a reduce-scatter of the same volume. A layer checkpointed in
full runs its forward ones again. Each is a ring all-reduce: 2 (t - 1) / t of the message per rank. The
vocabulary-parallel embedding's and loss's exchanges (once per step, not per layer) are left out."""

PIPELINE_SENDS_PER_CHUNK = 2
"""Point-to-point messages a pipeline rank sends per micro-batch and model chunk: the chunk's output
activation forward and its input's gradient backward, each tokens x hidden in the activation dtype
(torch.distributed.pipelining ``stage.py``; Narayanan et al. 2021, section 2.2: interleaving multiplies
them by the chunks per rank). Every tensor-parallel rank sends the whole activation (Megatron's
scatter/gather optimisation is not counted)."""

PIPELINE_BUBBLE = "(p - 1) / m; interleaved (p - 1) / (v m)"
"""The pipeline's idle time as a share of its ideal step: GPipe and 1F1B (p - 1) / m, interleaved 1F1B
(p - 1) / (v m), p stages, m micro-batches, v chunks per rank (Narayanan et al. 2021, "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sections 2.2.1-2.2.2). The strategy
search adds it to the recompute's share of the step: both are compute time lost."""

EXPERT_PARALLEL_ALL_TO_ALLS_PER_LAYER = (2, 2)
"""All-to-alls of one MoE layer's routed rows (tokens x top_k x hidden), forward and backward: the token
dispatch and combine of torchtitan's ``ExpertParallel`` (``_token_dispatch``, ``_token_combine``, each an
``all_to_all_single_autograd`` whose backward is the reverse exchange). A rank sends (ep - 1) / ep of the
rows each time (balanced routing); a layer checkpointed in full runs its forward ones again. The
expert-parallel ranks are data-parallel ranks: their gradients' synchronisation is the data-parallel
scheme's (``DATA_PARALLEL_COMMUNICATION``, the experts' over dp / ep ranks)."""

GPUS_PER_NODE = 8
"""GPUs one server joins with NVLink (DGX/HGX). The strategy search keeps tensor parallelism within a node and
puts pipeline stages across nodes (at most one stage per node's worth of GPUs): Narayanan et al. 2021,
section 3.3, takeaway 1 ("tensor model parallelism should generally be used up to degree g when using
g-GPU servers, and then pipeline model parallelism can be used to scale up to larger models across
servers")."""

DEEPSPEED_NVME_DEFAULTS: dict[str, int] = {
    "optimizer_buffer_count": 4,
    "param_buffer_count": 5,
    "param_buffer_size": 100_000_000,
    "max_in_cpu": 1_000_000_000,
    "sub_group_size": 1_000_000_000,
    "intra_op_parallelism": 1,
    "block_size": 1 << 20,
}
"""ZeRO-Infinity's NVMe settings when a ds_config leaves them out (deepspeed 0.19.8 ``zero/offload_config.py``:
``offload_optimizer.buffer_count`` 4, ``offload_param.buffer_count`` 5, ``buffer_size`` 1e8 elements,
``max_in_cpu`` 1e9 elements; ``zero/config.py`` ``sub_group_size`` 1e9; ``swap_tensor/constants.py``
``aio.intra_op_parallelism`` 1 and ``aio.block_size`` 1 MiB, in bytes)."""

DEEPSPEED_AIO_ALIGNED_BYTES = 1024
"""Swap buffers hold a whole number of 1,024-byte blocks per aio thread (deepspeed 0.19.8
``swap_tensor/utils.py`` ``AIO_ALIGNED_BYTES``; ``_io_aligned_numel`` rounds each buffer's elements up to
``AIO_ALIGNED_BYTES x intra_op_parallelism / element size``)."""

DEEPSPEED_MIN_SWAPPABLE_BYTES = 1 << 20
"""An optimizer sub-group of fewer fp32 bytes than this or ``aio.block_size``, whichever is larger, is never
swapped to NVMe and stays in host memory (deepspeed 0.19.8 ``swap_tensor/utils.py`` ``MIN_AIO_BYTES``;
``optimizer_utils.py`` ``is_swappable_tensor`` against ``min_aio_bytes``)."""

DEEPSPEED_ALLGATHER_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO ``allgather_bucket_size`` default, 5e8 elements (zero/config.py). Stages 1 and 2
all-gather the updated weights into their own flat buffer in place: it adds no memory here."""

DEEPSPEED_PREFETCH_BUCKET_ELEMENTS = 50_000_000
"""ZeRO-3 ``stage3_prefetch_bucket_size`` default, 5e7 elements (zero/config.py): the weights of the
next submodules fetched ahead of use."""

DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD = 100_000
"""ZeRO-3 ``stage3_param_persistence_threshold`` default, 1e5 elements (zero/config.py): smaller
weights (norms, biases) stay whole on every rank and are never partitioned."""

DEEPSPEED_MAX_LIVE_PARAMETERS = 1_000_000_000
"""ZeRO-3 ``stage3_max_live_parameters`` default, 1e9 elements (zero/config.py): the most gathered
weights kept at once. vramsim gathers a block and prefetches part of the next; when that exceeds
this bound the report says so."""

FSDP2_SHARD_RULE = "torch.chunk on dim 0, padded to the first chunk"
"""How FSDP2 shards a weight: ``torch.chunk(param, world_size, dim=0)`` with every rank's shard padded
to the first chunk's size, i.e. ceil(dim0 / N) rows (torch/distributed/fsdp/_fully_shard/_fsdp_param.py,
``_init_sharded_param``, ``padded_sharded_param_size = chunks[0].size()``)."""

HSDP_SHARD_GROUP_DEFAULT = 8
"""HSDP's default shard group: the GPUs of one node (8 on DGX/HGX servers), as torchtitan's
``data_parallel_shard_degree`` and FSDP1's HYBRID_SHARD (shard within the node's process group,
replicate across nodes) are commonly set; ``--shard-group-size`` changes it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Overhead:
    """One overhead the trace cannot see, with the figure used and where it comes from."""

    name: str
    """Short human name, as the report lists it."""
    bytes: int
    source: str
    """Where the figure comes from, and what it depends on."""
    counted_in: CountedIn
    """The innermost counter it shows in: ``allocated`` (caching allocator; then also in reserved and
    device), ``reserved`` (cached by the allocator; also device) or ``device`` (``nvidia-smi`` only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OverheadTotals:
    """Assumed bytes added to each memory counter; each includes the ones inside it."""

    allocated: int
    reserved: int
    device: int


def _cublas(device: DeviceProfile, handles: int) -> Overhead:
    """The cuBLAS workspace(s) PyTorch allocates on an NVIDIA device."""
    capability = device.compute_capability or (0, 0)
    sm90_plus = capability[0] in (9, 10, 12)
    each = CUBLAS_WORKSPACE_BYTES_SM90_PLUS if sm90_plus else CUBLAS_WORKSPACE_BYTES_DEFAULT
    rule = "32 MiB on sm 9.x/10.x/12.x" if sm90_plus else ":4096:2:16:8 = 8,519,680 B before Hopper"
    return Overhead(
        name=f"cuBLAS workspace x{handles}",
        bytes=each * handles,
        source=f"CublasHandlePool.cpp parseChosenWorkspaceSize: {rule}; one per (handle, stream), "
        f"{_handles_note(handles)}; cuBLASLt shares it (unified workspace)",
        counted_in="allocated",
    )


def _hipblas(device: DeviceProfile, handles: int) -> list[Overhead]:
    """The hipBLAS and hipBLASLt workspaces PyTorch allocates on a ROCm device."""
    gfx94_95 = (device.gfx_arch or "").startswith(("gfx94", "gfx95"))
    each = HIPBLAS_WORKSPACE_BYTES_GFX94_95 if gfx94_95 else HIPBLAS_WORKSPACE_BYTES_DEFAULT
    return [
        Overhead(
            name=f"hipBLAS workspace x{handles}",
            bytes=each * handles,
            source=f"CublasHandlePool.cpp parseChosenWorkspaceSize (ROCm): "
            f"{'128 MiB on gfx94x/gfx95x' if gfx94_95 else '32 MiB'}; {_handles_note(handles)}",
            counted_in="allocated",
        ),
        Overhead(
            name=f"hipBLASLt workspace x{handles}",
            bytes=HIPBLASLT_WORKSPACE_BYTES * handles,
            source="CublasHandlePool.cpp parseCUDABlasLtWorkspaceSize (ROCm): 76 MiB, not unified with "
            "hipBLAS; Context.cpp blasPreferredBackend picks hipBLASLt on Instinct GPUs (CUDAHooks "
            f"getHipblasltPreferredArchs: gfx90a, gfx942, gfx950 with ROCm >= 7); {_handles_note(handles)}",
            counted_in="allocated",
        ),
    ]


def _handles_note(handles: int) -> str:
    """Why the workspace count is what it is."""
    if handles == 1:
        return "one thread launches the matmuls"
    return "training: forward on the main thread, backward on autograd's device thread, each with its own handle"


def _nccl(device: DeviceProfile, world_size: int) -> Overhead:
    """NCCL/RCCL ring buffers of the default process group."""
    per_connection = NCCL_SIMPLE_BUFFER_BYTES + NCCL_LL_BUFFER_BYTES + NCCL_LL128_BUFFER_BYTES
    library = "RCCL" if device.vendor == "amd" else "NCCL"
    return Overhead(
        name=f"{library} channel buffers (world size {world_size})",
        bytes=NCCL_ASSUMED_CHANNELS * NCCL_RING_PEERS * per_connection,
        source=f"NVIDIA/nccl src/init.cc default buffer sizes (Simple 4 MiB + LL 512 KiB + LL128 4.69 MiB) "
        f"x {NCCL_RING_PEERS} ring peers x {NCCL_ASSUMED_CHANNELS} channels (assumed); one communicator; "
        "allocated by NCCL with cudaMalloc/cuMem, outside PyTorch's allocator",
        counted_in="device",
    )


def overheads_for(
    device: DeviceProfile, *, world_size: int = 1, training: bool = False, module_loading: ModuleLoading = "lazy"
) -> list[Overhead]:
    """The overheads a run on ``device`` pays beyond its traced tensors; none on the cpu.

    ``training`` counts two BLAS workspaces: PyTorch keys them by (handle, stream) and hands each
    thread its own handle, and autograd runs backward on its own thread per device.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ConfigError(f"world_size must be an integer >= 1, got {world_size!r}")
    if device.vendor == "cpu":
        return []
    handles = 2 if training else 1
    if device.vendor == "amd":
        found = [
            Overhead(
                name="HIP context",
                bytes=cuda_context_bytes(device, training=training, module_loading=module_loading),
                source="assumption: ~0.4 GiB measured on gfx1100 (Quartermaster-Labs/Quartermaster#24); not measured on this GPU",
                counted_in="device",
            ),
            *_hipblas(device, handles),
        ]
    else:
        found = [
            Overhead(
                name="CUDA context",
                bytes=cuda_context_bytes(device, training=training, module_loading=module_loading),
                source=f"assumption: a bare {device.architecture} context as measured with {module_loading} module "
                f"loading (assumptions.{_CONTEXTS[module_loading][0]}) plus the kernels a step loads, as measured on an H200 "
                "(assumptions.CUDA_KERNELS_LOADED_BYTES)",
                counted_in="device",
            ),
            _cublas(device, handles),
        ]
    if world_size > 1:
        found.append(_nccl(device, world_size))
    return found


def totals(assumptions: list[Overhead]) -> OverheadTotals:
    """Sum ``assumptions`` into the three nested counters (allocated <= reserved <= device)."""
    allocated = sum(a.bytes for a in assumptions if a.counted_in == "allocated")
    reserved = allocated + sum(a.bytes for a in assumptions if a.counted_in == "reserved")
    device = reserved + sum(a.bytes for a in assumptions if a.counted_in == "device")
    return OverheadTotals(allocated=allocated, reserved=reserved, device=device)


DENOISING_STEPS_TRACED = {"PNDMScheduler": 5, "DPMSolverMultistepScheduler": 3, "UniPCMultistepScheduler": 3}
"""Denoising steps of a diffusion pipeline traced per scheduler (2 for any other); the rest repeat the last one's memory.

Each step runs the same tensors: the denoiser on the (guidance-doubled) latents, the guidance
arithmetic, the scheduler's update into new latents; the second step is the first one again.
A scheduler that keeps a history is traced until it is full: PNDM's PLMS step keeps the last 4
model outputs (``self.ets``, diffusers/schedulers/scheduling_pndm.py ``step_plms``), full after
its 5th step (the 2nd appends nothing). DPM-Solver++ of order 2 (PixArt's) keeps the last 2 model outputs
(``self.model_outputs``, scheduling_dpmsolver_multistep.py ``step``), both held through the 3rd step's
denoiser call and every later one. UniPC of order 2 (Wan's) keeps the same 2 outputs and, from the 2nd
step on, the last sample for its corrector (``self.last_sample``, scheduling_unipc_multistep.py ``step``):
full by the 3rd step too. Euler and DDIM keep none.
"""

FLUX_TRAINING_GUIDANCE = 3.5
"""The guidance a guidance-embedding FLUX transformer is given while trained: ``train_dreambooth_lora_flux.py``'s
``--guidance_scale`` default (a scalar embedding; its value does not change the memory)."""

SCRIPT_LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0")
"""The modules diffusers' DreamBooth LoRA scripts adapt in a pipeline's denoiser (``target_modules`` of
``train_dreambooth_lora_sdxl.py``; the FLUX script's default before it added more), used when no
``--lora-targets`` are given: peft's ``all-linear`` default would adapt every linear layer of the denoiser."""

SD3_SCRIPT_LORA_TARGETS = (
    "attn.add_k_proj",
    "attn.add_q_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
    "attn.to_k",
    "attn.to_out.0",
    "attn.to_q",
    "attn.to_v",
)
"""The modules ``train_dreambooth_lora_sd3.py`` adapts when ``--lora_layers`` is not given: both streams' attention
projections of every joint block (the context stream's ``add_*`` ones too), used for SD3 when no ``--lora-targets``
are given."""

SD3_SCRIPT_MAX_SEQUENCE_LENGTH = 77
"""T5 prompt tokens in diffusers' SD3 DreamBooth scripts (``train_dreambooth_sd3.py``, ``train_dreambooth_lora_sd3.py``:
``--max_sequence_length`` defaults to 77, where StableDiffusion3Pipeline's ``__call__`` pads to 256), used for SD3's
training step unless ``max_sequence_length`` is given."""

SCRIPT_MAX_GRAD_NORM = 1.0
"""``--max_grad_norm``'s default in diffusers' training scripts, which clip the trained parameters' gradients every
optimizer step (``accelerator.clip_grad_norm_``); a pipeline's training step clips at this norm unless
``max_grad_norm`` is given."""

WAN_VAE_DTYPE = "float32"
"""The dtype of Wan's causal 3D VAE whatever the rest of the pipeline's: Wan 2.1's model card loads it with
``AutoencoderKLWan.from_pretrained(..., torch_dtype=torch.float32)`` next to a bf16 pipeline, and WanPipeline casts
the latents to ``vae.dtype`` before the decode."""

MXFP4_CHECKPOINT_DTYPE = "bfloat16"
"""The dtype an MXFP4 checkpoint (gpt-oss, whose config names none) stores its other tensors in, which
``from_pretrained``'s ``dtype="auto"`` reads off the weights. Where transformers does not keep MXFP4 (below compute
capability 7.5, without Triton 3.4+ or the ``kernels`` package, for training: ``Mxfp4HfQuantizer``, "We will default to
dequantizing the model to bf16"), the experts are dequantized "to the dtype of the parameter they load into"
(``integrations/mxfp4.py``), so the whole model is bf16. MXFP4 kept by transformers' Triton kernels is not modelled
for ``trace`` (``vramsim serve`` models vLLM's)."""

FLUX_SCHNELL_MAX_SEQUENCE_LENGTH = 256
"""T5 prompt tokens for FLUX.1-schnell (a FluxTransformer2DModel without ``guidance_embeds``).

FluxPipeline.__call__ pads the T5 prompt to ``max_sequence_length=512`` by default; diffusers'
FLUX docs (api/pipelines/flux, "Timestep-distilled") say schnell's ``max_sequence_length`` cannot
be more than 256, and their schnell example passes 256. Dev keeps the default 512.
"""

CUDA_RNG_STATE_BYTES = 16
"""``torch.cuda.get_rng_state()``: the Philox generator's seed and offset, 8 bytes each
(aten/src/ATen/cuda/CUDAGeneratorImpl.cpp ``get_state``), saved by the Trainer in rng_state.pth."""

DCP_CHECKPOINT_PATH = "checkpoint/step-1"
"""The folder a DCP checkpoint is saved to: ``FileSystemWriter.finish`` pickles it into ``.metadata``
(``StorageMeta.checkpoint_id``), so that file grows by a byte per character of a longer path."""

DCP_COPY_AHEAD_BYTES = 10_000_000
"""``FileSystemWriter(per_thread_copy_ahead=10_000_000)``, torch 2.13's default (distributed/checkpoint/
filesystem.py): how many bytes a synchronous DCP save from a GPU copies to the host ahead of writing them."""

DEEPSPEED_SUB_GROUP_ELEMENTS = 1_000_000_000
"""``zero_optimization.sub_group_size``, DeepSpeed's default (runtime/zero/config.py): ZeRO-3 splits each
parameter group into flat fp32 partitions of at least this many elements, each saved with its optimizer state."""

DEEPSPEED_VERSION = "0.19.8"
"""The DeepSpeed whose checkpoint layout is modelled (runtime/engine.py ``_save_checkpoint``,
``_save_zero_checkpoint``; zero/stage_1_and_2.py and zero/stage3.py ``state_dict``); its string is pickled
into each file."""

TRAINING_ARGS_BYTES = 5229
"""training_args.bin: ``torch.save(TrainingArguments(output_dir="out"))`` measured with transformers 5.24 and
its defaults; other arguments change it by their pickled lengths (a few bytes each). Not built per run:
constructing TrainingArguments loads accelerate (seconds)."""

TRAINER_LOG_HISTORY = "trainer_state.json is sized at step 1 with an empty log history; each logging step adds one entry"
"""What ``vramsim checkpoint`` lists about the Trainer's JSON state, which grows as training logs."""

LIGER_CHUNK_MEM_CONST = 1
"""Liger's fused linear cross-entropy bounds a chunk's transient logits to ``chunk_mem_const x tokens x hidden``
elements; 1 is liger-kernel 0.8.5's default (``_CHUNK_MEM_CONST``), which ``LigerForCausalLMLoss`` and so the HF
Trainer's ``use_liger_kernel=True`` keep. Also ``accum_dtype=None``: the head's gradient in the weight's dtype."""

TORCHTUNE_OUTPUT_CHUNKS = 8
"""Chunks of ``--loss chunked-ce`` without ``:N``: torchtune 0.6.1's ``CEWithChunkedOutputLoss(num_output_chunks=8)``
default, which its recipes pass to ``model.set_num_output_chunks``."""

QUANTIZED_KERNELS = {
    "gptq": "gptqmodel's MarlinLinear (gptq_marlin_gemm with its fp32 global reduce)",
    "awq": "gptqmodel's AwqMarlinLinear (gptq_marlin_gemm with its fp32 global reduce)",
    "fp8": "transformers' FP8Linear over DeepGEMM or the Triton finegrained-fp8 kernel, each input quantized to "
    "float8 with a float32 scale per token and 128 columns first",
    "int8wo": "torchao's Int8Tensor linear run eagerly (the int8 weight cast to the input's dtype, then a matmul)",
    "int4wo": "torchao's Int4Tensor linear over mslk's bf16i4bf16_rowwise (a CUTLASS sm90 GEMM writing the bf16 output)",
    "int4wo-tinygemm": "torchao's Int4TilePackedTo4dTensor linear: the input padded to 1024 columns, then torch's "
    "tinygemm _weight_int4pack_mm writing the bf16 output",
    "fp8-rowwise": "torchao's Float8Tensor linear, torch path: each input quantized to float8 with a float32 scale per "
    "token, then torch._scaled_mm with row-wise scales",
}
"""The kernel each GPTQ/AWQ/FP8/torchao format is simulated with (``vramsim/workload/quantization/formats.py``).

Which one runs is decided on the user's machine: gptqmodel picks the highest-priority kernel its
build and the GPU support (``utils/importer.py select_quant_linear``); Marlin (priority 90) wins on
NVIDIA GPUs when its CUDA extension is built, and ``GPTQMODEL_MARLIN_USE_FP32`` (default on) is
assumed unset. transformers fetches its FP8 kernels from the Hub at run time (DeepGEMM on
Hopper/Blackwell with ``kernels`` and a CUDA toolkit, else Triton); both write the quantized
input before the GEMM. torchao's linear is assumed not compiled (``torch.compile`` would fuse the
cast into the matmul). torchao's int4 default needs mslk, whose GEMM is a CUTLASS sm90 kernel;
its float8 per-row configs are assumed to take the torch path (mslk's, chosen by ``AUTO`` on sm 9.0+
when mslk is installed, quantizes the input in one Triton kernel).
"""

QUANTIZED_TRAINING_KERNELS = {
    "gptq": "gptqmodel's TritonV2QuantLinear in training mode (TorchQuantLinear's forward): each forward dequantizes "
    "the whole weight [in, out] with Triton's kernel and runs torch.matmul, so autograd keeps the dequantized weight "
    "until the layer's backward; LoRA through peft's GPTQLoraLinear (Marlin refuses training)",
    "awq": "gptqmodel's AwqGEMMLinear (AwqGemmFn): forward dequantizes the weight above 1024 rows, else the fused GEMM "
    "with 8 float32 split-K partial outputs; backward dequantizes it again for the input's gradient; LoRA through "
    "peft's AwqLoraLinear (Marlin refuses training)",
}
"""The kernel a LoRA run on a GPTQ/AWQ base is simulated with (``vramsim/workload/quantization/training.py``): gptqmodel's
Marlin layers raise in training mode, so the base must be loaded with a backend that trains (``backend="triton"``
for GPTQ, ``"gemm"`` for AWQ); that choice is the user's, these are assumed."""

COMPILE_MODELLED = (
    "torch.compile (inductor): dynamo's graphs, inductor's decompositions, its joint-graph passes and "
    "AOTAutograd's min-cut partitioner run on the traced program, so the saved tensors are the ones the "
    "partitioner chooses (a checkpointed block's recompute included); ops inside compiled graphs belong to "
    "no module (the per-layer table leaves them out)"
)
"""What ``--compile`` runs of torch's own compile stack (vramsim/workload/compiled.py). On the CPU the
saved set matches the partitioned graphs' real run exactly (tests/workload/test_compile.py)."""

FLOAT8_TRAINING = (
    "float8 training is torchao's own Float8Linear run eagerly on meta: the high-precision input and weight "
    "saved for backward, each cast to float8 (fp32 copy, scaled, clamped) and its scale made around its "
    "torch._scaled_mm; FSDP2's float8 all-gather (torchtitan's enable_fsdp_float8_all_gather) is not "
    "modelled: weights are gathered in their own dtype, torchtitan's default"
)
"""What ``--float8`` traces (``vramsim/workload/float8.py``) and what of torchtitan's float8 options it leaves out."""

COMPILE_FUSION = (
    "each graph is lowered by inductor itself (post-grad passes, GraphLowering, scheduler, wrapper codegen) "
    "on fake tensors and runs as its generated wrapper does: its empty_strided buffers, del after last use "
    "and reuse; its kernels are not compiled. The plan is inductor's CPU (C++) backend's for every target: "
    "its GPU (Triton) fusion is not run"
)
"""How ``--compile`` decides which buffers exist and when they go (vramsim/workload/inductor_plan.py). What is
approximated: the CPU backend's plan stands for the GPU's (Triton cannot lower without Triton and a device);
the wrapper's generated kernels are recorded as reading their arguments and allocating nothing (they write
into the wrapper's buffers). Against real CPU inductor runs of a tiny Llama (docs/compile.md): a forward
exact, a training step +0.000%, with bf16 autocast +2.6% and +4.8% (two runs); with checkpointing +21.6% (full) and +25.1%
(selective), a difference not yet diagnosed."""

COMPILE_SHARDED = (
    "the whole model is compiled as one graph, whose ops belong to no block: FSDP2 gathers every block's "
    "weights at once (an upper bound); torchtitan's per-block compile, which gathers one block at a time, is "
    "not modelled"
)
"""``--compile`` over several GPUs (vramsim/analysis/notes.py): what the sharding estimators see of a compiled trace."""

MODEL_FLOPS_UTILISATION = 0.40
"""The share of the GPU's dense peak a training step is assumed to run at, when a job's duration is derived
from its FLOPs (``vramsim/pricing/duration.py``; a price quote states it and takes another). 0.40: the BF16 model
FLOPs utilisation Meta measured pre-training Llama 3 405B on 8,192 to 16,384 H100s, 38% to 43% ("The Llama 3 Herd
of Models", arXiv:2407.21783, table 4). vramsim's step FLOPs include what checkpointing recomputes, so the figure
is applied to the FLOPs the step runs (what the PaLM paper calls hardware FLOPs utilisation; the same as MFU when
nothing is recomputed)."""
