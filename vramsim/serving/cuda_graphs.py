"""vLLM's CUDA graph memory estimate on one rank, from a traced forward over the largest capture size.

From 0.21 vLLM sizes the KV cache after ``profile_cudagraph_memory`` (``vllm/v1/worker/gpu_model_runner.py``):
for each graph mode it warms up and captures the two largest sizes, charging the first capture's drop in free memory
once (its warm-up's cached activations plus the graphs' private pool) and every further graph what the second cost
(``estimators/serving.py`` ``vllm_cuda_graphs``). The first capture's activations are traced here; the per-graph
driver memory is a named assumption. With ``--enable-lora`` every size is captured with and without adapters active
(``VLLM_LORA_CAPTURE_CASES``), and the first capture is traced with the LoRA kernels' buffers. With
``--speculative-config`` a decode step is ``num_speculative_tokens + 1`` tokens per request, and the sizes follow
(``adjust_cudagraph_sizes_for_spec_decode``, taking the decode graphs as FULL: FlashAttention's builder supports
uniform batches, ``AttentionCGSupport.UNIFORM_BATCH``); the proposer adds no graphs (``speculative.py``).
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig

from vramsim.config.serving import ServeConfig, parse_speculative_config
from vramsim.estimators import serving
from vramsim.serving.profile_run import mxfp4_options
from vramsim.serving.traces import RankTraces
from vramsim.serving.versions import vllm_release
from vramsim.workload.targets import Target

__all__ = ["cuda_graph_estimate"]


def cuda_graph_estimate(
    config: ServeConfig,
    traces: RankTraces,
    rank: PretrainedConfig,
    target: Target,
    dtype: torch.dtype,
    tokens: int,
    seqs: int,
    **held: object,
) -> serving.CudaGraphEstimate | None:
    """vLLM's estimate for ``rank`` when the release takes it off the KV cache (None: SGLang, ``--enforce-eager``, or a
    release that captures the graphs after the KV cache is sized); ``held`` are ``profile_run``'s stage keywords."""
    release = vllm_release(config.vllm_version)
    if config.engine != "vllm" or config.enforce_eager or not release.estimates_cuda_graphs:
        return None
    speculative = parse_speculative_config(config.speculative_config)
    query = 1 + (speculative.num_speculative_tokens if speculative is not None else 0)
    sizes = serving.vllm_capture_sizes(seqs, tokens, release.capture_sizes, query)
    mxfp4 = mxfp4_options(config, target)
    activation = traces.capture(rank, target, dtype, tokens=sizes[-1], quantization=config.quantization, **held, **mxfp4)
    return serving.vllm_cuda_graphs(
        seqs, tokens, release.capture_sizes, activation, lora=config.enable_lora, decode_query_len=query
    )
