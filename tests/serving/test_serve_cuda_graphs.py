"""vLLM's CUDA graph capture sizes and memory estimate, SGLang's default static fraction, and the memory outside
torch under tensor parallel: closed forms from each engine's source, and the traced capture forward."""

from __future__ import annotations

import pytest
from tiny_models import tiny_serving_llama_config

from vramsim.estimators import assumptions, serving
from vramsim.serving.budget import serve
from vramsim.serving.versions import vllm_release

_MiB, _GiB = 1 << 20, 1 << 30


def test_capture_sizes_match_vllms_published_graph_counts() -> None:
    """vLLM 0.21's log for max_num_seqs 256 (LMCache#3430): "PIECEWISE=51 (largest=512), FULL=35 (largest=256)"."""
    graphs = serving.vllm_cuda_graphs(256, 8192, "step16", activation_bytes=0)
    assert (len(graphs.mixed_sizes), graphs.mixed_sizes[-1]) == (51, 512)
    assert (len(graphs.decode_sizes), graphs.decode_sizes[-1]) == (35, 256)
    assert graphs.mixed_sizes[:6] == (1, 2, 4, 8, 16, 24)
    assert graphs.mixed_sizes[33:36] == (248, 256, 272)


@pytest.mark.parametrize(
    ("seqs", "tokens", "rule", "expected"),
    [
        (256, 8192, "step8", [1, 2, 4, *range(8, 513, 8)]),  # 67 graphs, before 0.11
        (8, 8192, "step16", [1, 2, 4, 8, 16]),  # at most 2 x max_num_seqs
        (1024, 128, "step16", [1, 2, 4, *range(8, 129, 8)]),  # at most max_num_batched_tokens
    ],
    ids=["step8-256-seqs", "step16-8-seqs", "step16-128-tokens"],
)
def test_capture_sizes_follow_vllms_rule(seqs: int, tokens: int, rule: serving.CaptureRule, expected: list[int]) -> None:
    assert serving.vllm_capture_sizes(seqs, tokens, rule) == expected


def test_the_estimate_is_the_first_capture_twice_plus_a_floor_per_graph() -> None:
    graphs = serving.vllm_cuda_graphs(256, 8192, "step16", activation_bytes=40 * _MiB)
    assert graphs.total_bytes == 2 * 40 * _MiB + (50 + 34) * _MiB


def test_the_budget_subtracts_the_traced_estimate_from_0_21() -> None:
    """The capture forward is traced at the largest size: its activations grow with the model's width, and the
    estimate comes off the KV cache from 0.21 only (before it the graphs are captured after the KV cache is sized)."""
    narrow, wide = tiny_serving_llama_config(), tiny_serving_llama_config()
    wide.intermediate_size = 4096
    reports = [serve(c, device="h100", max_model_len=1024) for c in (narrow, wide)]
    for report in reports:
        graphs = next(a for a in report.assumptions if a.name == "cuda_graph_pool")
        assert report.cuda_graph_bytes == graphs.bytes
        assert report.cuda_graph_bytes > 100 * _MiB  # (51 - 1) + (51 - 1) graphs at 1 MiB, with max_num_seqs 1024
    assert reports[1].cuda_graph_bytes - reports[0].cuda_graph_bytes >= 2 * 512 * (4096 - 128) * 2 * 2
    assert serve(narrow, device="h100", max_model_len=1024, vllm_version="0.19").cuda_graph_bytes == 0
    assert serve(narrow, device="h100", max_model_len=1024, enforce_eager=True).cuda_graph_bytes == 0


@pytest.mark.parametrize(
    ("memory_mib", "tp", "expected"),
    [
        # H100 80 GB (81,559 MiB): 8k chunks, 256 graphs: 512 + 12,288 + 512 + 128 = 13,440 MiB reserved
        (81559, 1, round((81559 - 13440) / 81559, 3)),
        # the same at tp 8: 512 graphs, 1 GiB for parallelism: 512 + 12,288 + 1,024 + 1,024
        (81559, 8, round((81559 - 14848) / 81559, 3)),
        # a 24 GB card (24,564 MiB): 2k chunks, 24 graphs: 512 + 3,072 + 48 + 128
        (24564, 1, round((24564 - 3760) / 24564, 3)),
        # an A100 40 GB: 4k chunks, 32 graphs, no 10 GiB floor under 60 GiB
        (40960, 2, round((40960 - (512 + 6144 + 64 + 256)) / 40960, 3)),
    ],
    ids=["h100-tp1", "h100-tp8", "24gb-tp1", "40gb-tp2"],
)
def test_sglangs_default_static_fraction(memory_mib: int, tp: int, expected: float) -> None:
    """SGLang's _handle_gpu_memory_settings: (memory - reserve) / memory, the reserve from the GPU's tier."""
    assert serving.sglang_mem_fraction(tp, memory_mib * _MiB) == expected


def test_sglang_budget_uses_the_default_for_the_gpu() -> None:
    report = serve(tiny_serving_llama_config(), device="h100", max_model_len=1024, engine="sglang")
    assert report.utilization == serving.sglang_mem_fraction(1, report.total_bytes)
    assert 0.82 < report.utilization < 0.84


def _non_torch(device: str, tp: int, version: str = "0.10") -> dict[str, int]:
    report = serve(
        tiny_serving_llama_config(), device=device, tp=tp, max_model_len=1024, enforce_eager=True, vllm_version=version
    )
    return {a.name: a.bytes for a in report.assumptions if (a.bytes and "NCCL" in a.name) or "all-reduce" in a.name}


def test_nvls_buffers_from_three_ranks_on_nvswitch_boards() -> None:
    """NCCL's NVLS buffers (288 MiB per rank of the group) on Hopper NVSwitch boards for more than two GPUs; vLLM's
    custom all-reduce (two 8 MiB IPC buffers) at 2 ranks anywhere, beyond two only over NVLink."""
    two, four = _non_torch("h100", 2), _non_torch("h100", 4)
    assert "NCCL NVLS buffers" not in two
    assert four["NCCL NVLS buffers"] == 4 * 301989888
    assert two["vLLM custom all-reduce buffers"] == four["vLLM custom all-reduce buffers"] == 16 * _MiB
    pcie = _non_torch("h100-pcie", 4)
    assert "NCCL NVLS buffers" not in pcie and "vLLM custom all-reduce buffers" not in pcie
    assert "vLLM custom all-reduce buffers" in _non_torch("h100-pcie", 2)


def test_from_0_11_the_snapshot_holds_what_the_distributed_start_builds() -> None:
    """vllm#25359 takes vLLM's first snapshot after init_worker_distributed_environment: from 0.11 the custom
    all-reduce buffers and vLLM's own communicator are in the baseline, and only the communicator the profile's logits
    all-gather opens counts; NVLS still connects in the profile's all-reduces."""
    before, after = _non_torch("h100", 4, "0.10.2"), _non_torch("h100", 4, "0.11.0")
    assert "vLLM custom all-reduce buffers" not in after
    assert after["NCCL NVLS buffers"] == before["NCCL NVLS buffers"]
    (rings_before,) = (b for name, b in before.items() if "channel buffers" in name)
    (rings_after,) = (b for name, b in after.items() if "channel buffers" in name)
    assert rings_before == 2 * rings_after


@pytest.mark.parametrize(
    ("model", "options", "kv_gib", "tokens"),
    [
        (
            "openai/gpt-oss-20b",
            dict(device="a100-80gb", max_model_len=131072, gpu_memory_utilization=0.65, vllm_version="0.19.0"),
            37.23,
            813_184,
        ),
        ("Qwen/Qwen3-30B-A3B", dict(device="a10", tp=4, max_model_len=8192, vllm_version="0.8.5"), 3.58, 156_352),
    ],
    ids=["gpt-oss-20b-a100", "qwen3-30b-a3b-4xa10"],
)
def test_the_docs_published_log_rows_stay_true(model: str, options: dict[str, object], kv_gib: float, tokens: int) -> None:
    """docs/serving.md's vramsim column against published vLLM logs (myoceane.fr's A100 log, vllm#17469)."""
    report = serve(model, **options)
    assert round(report.kv_cache_bytes / _GiB, 2) == kv_gib
    assert report.kv_cache_tokens == tokens


@pytest.mark.parametrize(
    ("version", "rule", "estimates"),
    [("0.10.1", "step8", False), ("0.11", "step16", False), ("0.20.2", "step16", False), ("v0.21.0", "step16", True)],
    ids=["0.10", "0.11", "0.20", "0.21"],
)
def test_release_lines_name_their_capture_rule_and_graph_accounting(version: str, rule: str, estimates: bool) -> None:
    release = vllm_release(version)
    assert (release.capture_sizes, release.estimates_cuda_graphs) == (rule, estimates)


def test_the_docs_h100_study_row_stays_true() -> None:
    """docs/serving.md's Qwen3-0.6B row of the H100 study (vLLM 0.11, max_model_len 16,000): published 64.45 GiB."""
    report = serve("Qwen/Qwen3-0.6B", device="h100-sxm", max_model_len=16000, vllm_version="0.11.0")
    assert round(report.kv_cache_bytes / _GiB, 2) == 64.62
    assert round(report.activation_peak_bytes / _GiB, 2) == 5.54


def test_the_docs_h100_study_tp2_row_stays_true() -> None:
    """docs/serving.md's Qwen3-32B tp 2 row of the H100 study (vLLM 0.11): one late NCCL communicator, PyTorch's,
    against the 0.54 GiB published (0.13 GiB of it kernels, as at tp 1); KV cache 34.60 GiB against 34.49 GiB."""
    report = serve("Qwen/Qwen3-32B", device="h100-sxm", tp=2, max_model_len=16000, vllm_version="0.11.0")
    assert report.non_torch_bytes == 16 * 2 * (4 * _MiB + 524288 + 4915200)
    assert round(report.kv_cache_bytes / _GiB, 2) == 34.60


@pytest.mark.parametrize(
    ("device", "tp", "version", "communicators", "nvls", "custom"),
    [
        ("h100", 2, "0.10", 2, False, True),
        ("h100", 4, "0.10", 2, True, True),
        ("h100-pcie", 4, "0.10", 2, False, False),
        ("h100", 2, "0.11", 1, False, False),
        ("h100", 4, "0.21", 1, True, False),
    ],
    ids=["h100-tp2-0.10", "h100-tp4-0.10", "h100-pcie-tp4-0.10", "h100-tp2-0.11", "h100-tp4-0.21"],
)
def test_tp_non_torch_is_the_sum_of_its_components(
    device: str, tp: int, version: str, communicators: int, nvls: bool, custom: bool
) -> None:
    """A rank's memory outside torch after vLLM's snapshot in closed form: each late NCCL communicator's ring buffers
    (channels x ring peers x the three protocols' buffers; before 0.11 vLLM's own and PyTorch's, from 0.11 PyTorch's
    alone), NCCL's NVLS buffers (per rank of the group) and, before 0.11, vLLM's two custom all-reduce buffers."""
    report = serve(
        tiny_serving_llama_config(), device=device, tp=tp, max_model_len=1024, enforce_eager=True, vllm_version=version
    )
    rings = (
        assumptions.NCCL_ASSUMED_CHANNELS
        * assumptions.NCCL_RING_PEERS
        * (assumptions.NCCL_SIMPLE_BUFFER_BYTES + assumptions.NCCL_LL_BUFFER_BYTES + assumptions.NCCL_LL128_BUFFER_BYTES)
    )
    expected = communicators * rings + nvls * tp * serving.NCCL_NVLS_BYTES_PER_PEER + custom * serving.VLLM_CUSTOM_ALLREDUCE_BYTES
    assert report.non_torch_bytes == expected


def test_lora_doubles_the_graphs_the_estimate_counts() -> None:
    """With LoRA vLLM keys every size twice, with no adapter active and with every slot active
    (``CudagraphDispatcher._get_lora_cases``): 102 + 70 graphs at 256 sequences, the first capture still counted
    once per mode; without LoRA the count is unchanged."""
    plain = serving.vllm_cuda_graphs(256, 8192, "step16", activation_bytes=40 * _MiB)
    lora = serving.vllm_cuda_graphs(256, 8192, "step16", activation_bytes=40 * _MiB, lora=True)
    assert plain.graphs == 51 + 35 and lora.graphs == serving.VLLM_LORA_CAPTURE_CASES * (51 + 35) == 172
    assert lora.total_bytes == 2 * 40 * _MiB + (2 * 51 - 1 + 2 * 35 - 1) * _MiB
    assert lora.total_bytes - plain.total_bytes == (51 + 35) * _MiB


def test_the_budget_charges_loras_second_capture_from_0_21_only() -> None:
    """Tiny Llama at 1,024 sequences (51 PIECEWISE and 51 FULL sizes), 4 adapters of rank 64, whose shrink buffers
    stay under the capture forward's peak: LoRA adds one 1 MiB graph per size and mode to 0.21's estimate, and
    nothing before 0.21, where the graphs are captured after the KV cache is sized."""
    config = tiny_serving_llama_config()
    options = dict(device="h100", max_model_len=1024, cache=False)
    adapters = dict(enable_lora=True, max_loras=4, max_lora_rank=64)
    base, lora = serve(config, **options), serve(config, **options, **adapters)
    assert lora.cuda_graph_bytes - base.cuda_graph_bytes == (51 + 51) * _MiB
    pool = next(a for a in lora.assumptions if a.name == "cuda_graph_pool")
    assert "with and without LoRA adapters active" in pool.detail
    assert serve(config, **options, **adapters, vllm_version="0.20").cuda_graph_bytes == 0


@pytest.mark.parametrize(
    ("seqs", "query", "mixed", "decode"),
    [
        # 4 tokens per decode step: 1 and 2 round up to 4, the rest already are multiples of 4
        (256, 4, [4, *range(8, 256, 8), *range(256, 513, 16)], [4, *range(8, 256, 8), *range(256, 513, 16)]),
        # 3 per step over 10 requests: largest min(2 x 10 x 3, 512) = 60, so 56 is the last size (57 is dropped),
        # and FULL decode graphs from 3 to 30 tokens
        (10, 3, [3, 6, 9, 18, 24, 33, 42, 48], [3, 6, 9, 18, 24]),
    ],
    ids=["256-seqs-4-per-step", "10-seqs-3-per-step"],
)
def test_speculative_decoding_rounds_the_capture_sizes(seqs: int, query: int, mixed: list[int], decode: list[int]) -> None:
    """adjust_cudagraph_sizes_for_spec_decode: every size rounded up to a multiple of num_speculative_tokens + 1,
    none over the largest, no duplicate; the FULL decode sizes between one and max_num_seqs steps."""
    graphs = serving.vllm_cuda_graphs(seqs, 8192, "step16", activation_bytes=0, decode_query_len=query)
    assert (list(graphs.mixed_sizes), list(graphs.decode_sizes)) == (mixed, decode)


def test_five_tokens_per_step_at_256_sequences() -> None:
    """num_speculative_tokens 4: 48 sizes (5, 10, 20, 25, ... 500; 512 would round to 515, over the largest)."""
    graphs = serving.vllm_cuda_graphs(256, 8192, "step16", activation_bytes=0, decode_query_len=5)
    assert (len(graphs.mixed_sizes), graphs.mixed_sizes[:5], graphs.mixed_sizes[-1]) == (48, (5, 10, 20, 25, 35), 500)
    assert graphs.decode_sizes == graphs.mixed_sizes
