"""What differs between vLLM releases in the memory its V1 worker profiles, as read from each release line's source.

Every V1 release (0.8 on) runs the same profile: ``GPUModelRunner.profile_run`` runs ``_dummy_run`` over
``max_num_batched_tokens`` tokens split over ``min(max_num_seqs, max_num_batched_tokens)`` requests, then, on the
last pipeline stage, ``_dummy_sampler_run`` over the last token of each request (logits of ``max_num_seqs`` x
vocab, the sampler with top-k and top-p on); attention layers get no metadata in that run and write nothing. What
changes from release to release:

- how the sampler applies top-k and top-p: the PyTorch sort (``apply_top_k_top_p_pytorch``: sorted values,
  int64 indices, masks, a softmax and its cumsum, each one row per request over the vocabulary, and on CUDA the
  sort's own scratch, ``sort_workspace`` in tracer/kernels/gpu_kernels.py) until the
  Triton pivot-search kernel (vllm#33538, merged in February 2026) replaced it wherever Triton runs;
- which token counts get CUDA graphs (``VllmConfig._set_cudagraph_sizes``): 1, 2, 4 then every 8 up to
  ``min(2 x max_num_seqs, 512)``, and from 0.11 (``max_cudagraph_capture_size``) every 16 from 256 on;
- whether the CUDA graphs' memory is estimated before the KV cache is sized and taken off it
  (``profile_cudagraph_memory`` with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, on by default from 0.21: vLLM's
  own log says "CUDA graph memory profiling is enabled (default since v0.21.0)") or captured after it, in the share
  ``gpu_memory_utilization`` leaves out;
- whether the first snapshot comes before the distributed environment starts (then the NCCL communicators and
  custom all-reduce buffers ``init_worker_distributed_environment`` builds count as the profile's non-torch
  increase) or after it (from 0.11: only what the profile run itself opens counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.serving import CaptureRule

__all__ = ["VLLM_RELEASES", "TopKTopP", "VllmRelease", "vllm_release"]

TopKTopP = Literal["sort", "triton"]


@dataclass(frozen=True, slots=True)
class VllmRelease:
    """One vLLM release line: the first version it covers and what its profile does differently."""

    first: tuple[int, int]
    top_k_top_p: TopKTopP
    """``sort``: ``apply_top_k_top_p_pytorch``; ``triton``: ``apply_top_k_top_p_triton``, in place on the logits."""
    capture_sizes: CaptureRule
    """``step8``: every 8 tokens up to the largest size; ``step16``: every 16 from 256 on (``vllm_capture_sizes``)."""
    estimates_cuda_graphs: bool
    """The CUDA graphs' memory comes off the KV budget (``profile_cudagraph_memory``)."""
    snapshot_after_distributed_init: bool
    """``Worker.init_device`` takes the first ``MemorySnapshot`` after ``init_worker_distributed_environment``, so
    the communicators built there (vLLM's NCCL communicators, custom all-reduce) are in the baseline, not in the
    profile's ``non_torch_increase``."""


VLLM_RELEASES = (
    VllmRelease(
        first=(0, 8),
        top_k_top_p="sort",
        capture_sizes="step8",
        estimates_cuda_graphs=False,
        snapshot_after_distributed_init=False,
    ),
    VllmRelease(
        first=(0, 11),
        top_k_top_p="sort",
        capture_sizes="step16",
        estimates_cuda_graphs=False,
        snapshot_after_distributed_init=True,
    ),
    VllmRelease(
        first=(0, 16),
        top_k_top_p="triton",
        capture_sizes="step16",
        estimates_cuda_graphs=False,
        snapshot_after_distributed_init=True,
    ),
    VllmRelease(
        first=(0, 21),
        top_k_top_p="triton",
        capture_sizes="step16",
        estimates_cuda_graphs=True,
        snapshot_after_distributed_init=True,
    ),
)
"""Release lines, oldest first. 0.8: the V1 worker's profile run with the sampler in it (``profile_run`` calls
``_dummy_sampler_run``). 0.11: ``max_cudagraph_capture_size`` and capture sizes every 16 from 256 (the
step-16 rule as read from the current source; the release it first shipped in is taken as 0.11), and the first
snapshot taken after the distributed environment starts (vllm#25359, "Initialize the distributed environment BEFORE
taking memory snapshot", merged in the week to 2025-09-26, before 0.11.0; taken as 0.11: before it ``init_device``
took the snapshot, then built the communicators). 0.16: the first
release after vllm#33538 ("Triton-based Top-k and Top-p sampler kernels", February 2026; 0.15.2rc1 builds still
sort, vllm#34076). 0.21: CUDA graph memory estimated before the KV cache is sized and taken off it, by default
("default since v0.21.0" in vLLM's start-up log, e.g. LMCache#3430; an earlier release that computes the
estimate takes it off only with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, not modelled)."""


def vllm_release(version: str) -> VllmRelease:
    """The release line ``version`` (``0.10.1``, ``v0.19.0``, ``0.11``) belongs to."""
    parts = version.strip().removeprefix("v").split(".")
    try:
        numbers = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        raise ConfigError(f"vllm_version {version!r} is not a version like 0.10.1") from None
    if numbers < VLLM_RELEASES[0].first:
        raise UnsupportedError(f"vLLM {version} profiles with its V0 engine, not modelled; pass --vllm-version 0.8 or later")
    return [release for release in VLLM_RELEASES if release.first <= numbers][-1]
