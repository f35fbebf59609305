"""The KV budget assembly: one rank's budget terms, the engine's arithmetic over them, and the report.

The arithmetic is ``estimators/serving.py``'s, with vLLM's KV cache groups where layers differ: full
and sliding attention, attention and Mamba state (pages unified: ``serving.MambaAlignment``),
Whisper's self- and cross-attention.
"""

from __future__ import annotations

import dataclasses
import time

from vramsim.config.serving import ServeConfig
from vramsim.errors import EngineRefusedError, UnsupportedError
from vramsim.estimators import serving
from vramsim.estimators.assumptions import cuda_context_bytes, overheads_for
from vramsim.estimators.kv_cache import LayerCache
from vramsim.results.report import Assumption
from vramsim.results.serving import ServeReport
from vramsim.serving.versions import vllm_release
from vramsim.workload.targets import Target

__all__ = ["budget_inputs", "engine_budget", "serve_report"]


def budget_inputs(
    config: ServeConfig,
    target: Target,
    weights: int,
    activation: int,
    layers: list[LayerCache],
    tokens: int,
    graphs: serving.CudaGraphEstimate | None,
) -> tuple[serving.BudgetInputs, list[tuple[str, int, str]]]:
    """One rank's budget terms (``graphs``: vLLM's CUDA graph estimate where it takes it off), and the memory outside
    torch among them."""
    profile = target.profile
    assert profile.memory_bytes is not None and config.tp is not None and config.max_model_len is not None
    element = None if config.kv_cache_dtype == "auto" else serving.KV_CACHE_DTYPE_BYTES[config.kv_cache_dtype]
    non_torch = _non_torch(target, config)
    utilization = config.gpu_memory_utilization or (
        serving.VLLM_GPU_MEMORY_UTILIZATION
        if config.engine == "vllm"
        else serving.sglang_mem_fraction(config.tp, profile.memory_bytes, config.pp)
    )
    inputs = serving.BudgetInputs(
        total_bytes=profile.memory_bytes,
        utilization=utilization,
        weights_bytes=weights,
        activation_peak_bytes=activation if config.engine == "vllm" else 0,
        non_torch_bytes=sum(b for _, b, _ in non_torch),
        cuda_graph_bytes=graphs.total_bytes if graphs is not None else 0,
        context_bytes=cuda_context_bytes(profile, training=False),
        layers=layers,
        kv_element_bytes=element,
        block_size=serving.VLLM_BLOCK_SIZE if config.engine == "vllm" else 1,
        max_model_len=config.max_model_len,
        max_num_batched_tokens=tokens,
    )
    return inputs, non_torch


def engine_budget(name: str, engine: str, inputs: serving.BudgetInputs) -> tuple[serving.Budget, serving.HybridGroups | None]:
    """The engine's budget over ``inputs`` and vLLM's KV cache groups; an estimator's refusal worded for
    ``name``, and the engine's own refusal to start with a KV cache too small to serve."""
    try:
        budget = serving.vllm_budget(inputs) if engine == "vllm" else serving.sglang_budget(inputs)
        hybrid = serving.hybrid_groups(inputs.layers, inputs.kv_element_bytes, inputs.block_size) if engine == "vllm" else None
    except ValueError as error:
        raise UnsupportedError(f"{name}: {error}") from None
    if engine == "vllm":
        _check_vllm_starts(name, inputs, budget)
    elif budget.kv_cache_tokens <= 0:
        raise EngineRefusedError(
            f"{name} leaves no memory for SGLang's token pool ({_gib(budget.kv_cache_bytes)} GiB after the weights), "
            'and SGLang stops at start-up ("Not enough memory. Please try to increase --mem-fraction-static"): '
            "raise gpu_memory_utilization or --tp, or quantize the weights"
        )
    return budget, hybrid


def _check_vllm_starts(name: str, inputs: serving.BudgetInputs, budget: serving.Budget) -> None:
    """vLLM's start-up check (``check_enough_kv_cache_memory``, ``vllm/v1/core/kv_cache_utils.py``): some memory
    must be left for blocks, and the KV cache must hold one request of ``max_model_len`` tokens; its message
    gives the longest length that fits (``estimate_max_model_len``: a binary search over the length)."""
    if budget.kv_blocks <= 0:
        raise EngineRefusedError(
            f"{name} leaves no memory for the KV cache ({_gib(budget.kv_cache_bytes)} GiB after the weights, the "
            'profile forward and the CUDA graphs), and vLLM stops at start-up ("No available memory for the cache '
            'blocks"): raise gpu_memory_utilization or --tp, lower max_num_batched_tokens or quantize the weights'
        )
    if budget.max_concurrency >= 1:
        return
    longest = _longest_request(inputs)
    raise EngineRefusedError(
        f"one request of max_model_len={inputs.max_model_len} tokens needs {_gib(budget.request_bytes)} GiB of KV "
        f"cache, and {name} leaves {_gib(budget.kv_cache_bytes)} GiB ({budget.kv_cache_tokens:,} tokens); vLLM "
        f"refuses to start (the estimated maximum model length is {longest}): pass max_model_len={longest} or "
        "less, or raise gpu_memory_utilization or --tp"
    )


def _longest_request(inputs: serving.BudgetInputs) -> int:
    """The longest ``max_model_len`` whose one request the KV cache holds, as vLLM's binary search finds it."""
    low, high = 0, inputs.max_model_len
    while low < high:
        middle = (low + high + 1) // 2
        if serving.vllm_budget(dataclasses.replace(inputs, max_model_len=middle)).max_concurrency >= 1:
            low = middle
        else:
            high = middle - 1
    return low


def _gib(nbytes: int) -> str:
    """Bytes in GiB with two decimals, as vLLM's messages write them (``format_gib``)."""
    return f"{nbytes / 2**30:.2f}"


def serve_report(
    name: str,
    config: ServeConfig,
    target: Target,
    inputs: serving.BudgetInputs,
    budget: serving.Budget,
    tokens: int,
    seqs: int,
    started: float,
    *,
    assumptions: list[Assumption],
) -> ServeReport:
    """The report of a rank's budget: under pipeline parallel, the stage's whose blocks every stage gets."""
    assert config.gpus is not None and config.tp is not None and config.max_model_len is not None
    layers = inputs.layers
    return ServeReport(
        model=name,
        engine=config.engine,
        target=target.name,
        gpus=config.gpus,
        tp=config.tp,
        pp=config.pp,
        vllm_version=config.vllm_version if config.engine == "vllm" else None,
        max_model_len=config.max_model_len,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        kv_cache_dtype=config.kv_cache_dtype,
        utilization=inputs.utilization,
        total_bytes=inputs.total_bytes,
        usable_bytes=budget.usable_bytes,
        weights_bytes=inputs.weights_bytes,
        activation_peak_bytes=inputs.activation_peak_bytes,
        non_torch_bytes=inputs.non_torch_bytes,
        cuda_graph_bytes=inputs.cuda_graph_bytes,
        context_bytes=inputs.context_bytes,
        kv_cache_bytes=budget.kv_cache_bytes,
        kv_bytes_per_token=serving.token_bytes(layers, inputs.kv_element_bytes),
        block_size=budget.block_size,
        block_bytes=budget.block_bytes,
        kv_blocks=budget.kv_blocks,
        kv_cache_tokens=budget.kv_cache_tokens,
        request_bytes=budget.request_bytes,
        max_concurrency=budget.max_concurrency,
        layers=layers,
        assumptions=assumptions,
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def _non_torch(target: Target, config: ServeConfig) -> list[tuple[str, int, str]]:
    """Memory outside torch an engine adds on a rank after its first snapshot: the NCCL communicators' buffers of
    each group the rank belongs to, NCCL's NVLS buffers where NCCL enables them, and vLLM's custom all-reduce buffers
    where vLLM builds them. SGLang reads free memory after start-up, so everything NCCL opens counts (one
    communicator per group); vLLM counts what its release opens after the snapshot (``_vllm_communicators``)."""
    assert config.tp is not None
    tp, pp, profile = config.tp, config.pp, target.profile
    late = _vllm_communicators(config) if config.engine == "vllm" else {"tensor-parallel": (1, ""), "pipeline": (1, "")}
    found = []
    for kind, size in (("tensor-parallel", tp), ("pipeline", pp)):
        count, why = late[kind]
        if size == 1 or count == 0:
            continue
        for o in overheads_for(profile, world_size=size):
            if "NCCL" in o.name or "RCCL" in o.name:
                name = f"{o.name} ({kind} group)" if pp > 1 else o.name
                found.append((f"{name} x{count}" if count > 1 else name, o.bytes * count, o.source + why))
    board = target.name in serving.NVLINK_BOARDS
    if tp >= serving.NCCL_NVLS_MIN_RANKS and board and profile.architecture in serving.NCCL_NVLS_ARCHITECTURES:
        found.append(
            (
                "NCCL NVLS buffers",
                serving.NCCL_NVLS_BYTES_PER_PEER * tp,
                f"NCCL_NVLS_BYTES_PER_PEER (288 MiB, NCCL's NVLS log line in vllm#9699) x {tp} ranks; NVLink SHARP "
                "on an NVSwitch board for more than two GPUs",
            )
        )
    early = config.engine == "vllm" and not vllm_release(config.vllm_version).snapshot_after_distributed_init
    if early and tp in serving.VLLM_CUSTOM_ALLREDUCE_WORLD_SIZES and (tp == 2 or board):
        found.append(
            (
                "vLLM custom all-reduce buffers",
                serving.VLLM_CUSTOM_ALLREDUCE_BYTES,
                "custom_all_reduce.py: meta (signal + max_size) and IPC buffer (max_size), max_size=8192*1024, "
                "cudaMalloc outside torch, after the snapshot of vLLM before 0.11",
            )
        )
    return found


def _vllm_communicators(config: ServeConfig) -> dict[str, tuple[int, str]]:
    """The NCCL communicators of each group vLLM opens after its first snapshot, and why: from 0.11 only PyTorch's
    communicator of the tensor-parallel group, which the profile's logits all-gather opens; before it also vLLM's
    own communicator of each group (``serving.VLLM_TP_COMMUNICATORS_AT_INIT``)."""
    in_snapshot = vllm_release(config.vllm_version).snapshot_after_distributed_init
    init = 0 if in_snapshot else serving.VLLM_TP_COMMUNICATORS_AT_INIT
    where = "in the baseline snapshot (vLLM 0.11 on), not counted" if in_snapshot else "after the snapshot, counted"
    return {
        "tensor-parallel": (
            serving.VLLM_TP_COMMUNICATORS_IN_PROFILE + init,
            "; per communicator opened after vLLM's first snapshot: PyTorch's ProcessGroupNCCL one, opened by the "
            f"profile's logits all-gather (VLLM_TP_COMMUNICATORS_IN_PROFILE); vLLM's PyNcclCommunicator is {where}",
        ),
        "pipeline": (init, f"; vLLM's PyNcclCommunicator of the pipeline group, {where}"),
    }
