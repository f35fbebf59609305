"""LoRA slots, a speculative draft model and a shared prefix in vLLM's budget: each against the closed form read from
vLLM's code (``vllm/lora/layers/``, ``punica_wrapper/``, the KV cache config with a draft's layers, full blocks
shared by prefix caching), the traced figures where the trace runs, and each unsupported combination refused in one
line."""

from __future__ import annotations

import math

import pytest
from cli_runs import run
from tiny_models import tiny_serving_llama_config

from vramsim.cache.keys import request_key
from vramsim.config.serving import ServeConfig
from vramsim.serving.budget import serve

_TOKENS = 8192  # vLLM's max_num_batched_tokens on an H100


def _slots(loras: int, rank: int, pairs: list[tuple[int, int]], element: int) -> int:
    """``max_loras`` slots of ``lora_a`` (rank x input) and ``lora_b`` (output x rank) for each (input, output),
    every tensor a multiple of the allocator's 512 B here."""
    return sum(loras * rank * (inputs + outputs) * element for inputs, outputs in pairs)


def _punica(tokens: int, loras: int) -> int:
    """PunicaWrapperBase: three int64 index tensors of the tokens and one of two rows; LoRAKernelMeta, twice: two
    int32 tensors of the tokens and three of max_loras + 1, + 1, + 2 (each rounded to 512 B)."""
    return 3 * 8 * tokens + 8 * 2 * tokens + 2 * (2 * 4 * tokens + 3 * 512)


def test_lora_slots_are_vllms_tensors_and_come_off_the_kv_cache() -> None:
    """Tiny Llama (hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 32,000), 4 slots of rank 64: per layer
    q, k, v, o, gate, up, down; the embedding's (vocabulary x rank, hidden x rank) and the head's (rank x hidden,
    vocabulary x rank), as ``create_lora_weights`` allocates them."""
    config = tiny_serving_llama_config()
    base = serve(config, device="h100", max_model_len=2048, cache=False)
    lora = serve(config, device="h100", max_model_len=2048, cache=False, enable_lora=True, max_loras=4, max_lora_rank=64)
    layer = [(64, 64), (64, 32), (64, 32), (64, 64), (64, 128), (64, 128), (128, 64)]
    embeddings = [(32000, 64), (64, 32000)]
    expected = _slots(4, 64, layer * 2 + embeddings, 2) + _punica(_TOKENS, 4)
    assert lora.lora is not None and lora.lora.slot_bytes == expected == 34_343_936
    assert lora.weights_bytes - base.weights_bytes == expected
    # and LoRA's second capture of each of the 51 + 51 graphs (1 MiB each, test_serve_cuda_graphs.py)
    assert base.kv_cache_bytes - lora.kv_cache_bytes == expected + (51 + 51) * 2**20
    assert lora.lora.max_cpu_loras == 4 and lora.lora.embeddings


def test_lora_shrink_buffers_are_in_the_traced_profile_peak() -> None:
    """With one sequence the forward sets the peak: each LoRA layer's float32 (tokens x rank) shrink buffer is traced
    beside its output; at rank 512 it is 16 MiB over 8,192 tokens and lifts the peak by at most that, at rank 64
    (2 MiB) it stays under the MLP's own tensors and the peak does not move."""
    config = tiny_serving_llama_config()
    peaks = {
        rank: serve(
            config,
            device="h100",
            max_model_len=2048,
            max_num_seqs=1,
            cache=False,
            **({} if rank is None else {"enable_lora": True, "max_lora_rank": rank}),
        ).activation_peak_bytes
        for rank in (None, 64, 512)
    }
    assert peaks[64] == peaks[None]
    assert 0 < peaks[512] - peaks[None] <= _TOKENS * 512 * 4


def test_llama_3_1_8b_with_8_adapters_of_rank_64_on_an_l4() -> None:
    """32 layers of q 4096->4096, k and v 4096->1024, o 4096->4096, gate and up 4096->14,336, down 14,336->4096, and
    the 128,256-token embedding and head: 2.75 GiB of slots at 2,048 batched tokens (the L4's default)."""
    report = serve("meta-llama/Llama-3.1-8B", device="l4", max_model_len=8192, enable_lora=True, max_loras=8, max_lora_rank=64)
    layer = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]
    expected = _slots(8, 64, layer * 32 + [(128256, 4096), (4096, 128256)], 2) + _punica(2048, 8)
    assert report.lora is not None and report.lora.slot_bytes == expected
    assert round(expected / 2**30, 2) == 2.75 and report.max_concurrency >= 1


def test_a_draft_model_adds_its_weights_and_its_layers_to_every_block() -> None:
    """Qwen3-0.6B drafting for itself: the draft's weights are the target's again, every block holds both models'
    layers (twice the bytes per token, so half the blocks of a budget less the draft's weights), and its dummy run
    (the forward over the batch, the target's 8,192 x 1,024 bf16 hidden states held) stays under the target's peak.
    The draft captures no CUDA graphs (its proposer's dispatcher gets no keys outside the EAGLE family), so 0.21's
    estimate is the target's alone, at the sizes of 5 tokens per decode step: what ngram's estimate is."""
    base = serve("Qwen/Qwen3-0.6B", device="h100", max_model_len=8192, cache=False)
    spec = serve(
        "Qwen/Qwen3-0.6B",
        device="h100",
        max_model_len=8192,
        cache=False,
        speculative_config='{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4}',
    )
    assert spec.speculative is not None and spec.speculative.method == "draft_model"
    assert spec.speculative.weights_bytes == base.weights_bytes and spec.weights_bytes == 2 * base.weights_bytes
    assert spec.kv_bytes_per_token == 2 * base.kv_bytes_per_token == 2 * spec.speculative.kv_bytes_per_token
    ngram = serve(
        "Qwen/Qwen3-0.6B",
        device="h100",
        max_model_len=8192,
        cache=False,
        speculative_config='{"method": "ngram", "num_speculative_tokens": 4}',
    )
    assert spec.cuda_graph_bytes == ngram.cuda_graph_bytes > 0
    note = next(a for a in spec.assumptions if a.name == "speculative_draft")
    assert "captures no CUDA graphs for it" in note.detail
    assert spec.kv_cache_bytes == base.kv_cache_bytes - base.weights_bytes + base.cuda_graph_bytes - spec.cuda_graph_bytes
    assert spec.kv_blocks == spec.kv_cache_bytes // (16 * spec.kv_bytes_per_token)
    assert spec.speculative.activation_peak_bytes > _TOKENS * 1024 * 2
    assert spec.activation_peak_bytes == max(base.activation_peak_bytes, spec.speculative.activation_peak_bytes)


def test_ngram_speculation_moves_no_device_memory() -> None:
    """The proposer holds nothing on the device; 0.21's graph estimate follows the decode step's 4 tokens."""
    config = tiny_serving_llama_config()
    base = serve(config, device="h100", max_model_len=2048, cache=False)
    ngram = serve(
        config,
        device="h100",
        max_model_len=2048,
        cache=False,
        speculative_config='{"method": "ngram", "num_speculative_tokens": 3}',
    )
    assert ngram.speculative is not None and ngram.speculative.weights_bytes == 0
    # only the CUDA graphs move: 4 tokens per decode step leave 49 sizes of the 51 (1 and 2 round up to 4), the
    # largest still 512, so 2 x 2 graphs fewer at 1 MiB each
    assert base.cuda_graph_bytes - ngram.cuda_graph_bytes == 4 * 2**20
    assert ngram.kv_cache_bytes == base.kv_cache_bytes + 4 * 2**20


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_shared_prefix_leaves_the_budget_and_raises_the_concurrency(engine: str) -> None:
    """vLLM holds the prefix's full blocks once (1,000 // 16 = 62) and each request its other cdiv(2048, 16) - 62 = 66;
    SGLang's radix tree shares every token; the KV budget and vLLM's own concurrency line do not move."""
    config = tiny_serving_llama_config()
    base = serve(config, device="h100", max_model_len=2048, engine=engine, cache=False)
    shared = serve(config, device="h100", max_model_len=2048, engine=engine, shared_prefix_len=1000, cache=False)
    assert (shared.kv_cache_bytes, shared.kv_blocks, shared.max_concurrency) == (
        base.kv_cache_bytes,
        base.kv_blocks,
        base.max_concurrency,
    )
    assert shared.shared_prefix is not None
    block = shared.block_size
    own = math.ceil(2048 / block) - 1000 // block
    assert (shared.shared_prefix.shared_blocks, shared.shared_prefix.request_blocks) == (1000 // block, own)
    assert shared.shared_prefix.max_concurrency == (shared.kv_blocks - 1000 // block) / own
    assert shared.shared_prefix.max_concurrency > shared.max_concurrency


def test_each_option_is_in_the_cache_key() -> None:
    """Two budgets that differ in any of these options are two answers."""
    options = [
        {"enable_lora": True},
        {"enable_lora": True, "max_loras": 2},
        {"enable_lora": True, "max_lora_rank": 32},
        {"enable_lora": True, "max_cpu_loras": 4},
        {"speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}'},
        {"no_enable_prefix_caching": True},
        {"shared_prefix_len": 512},
    ]
    keys = {request_key("serve", "gpt2", ServeConfig(**each)) for each in [{}, *options]}
    assert None not in keys and len(keys) == len(options) + 1


def test_the_header_names_each_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "serve",
        "gpt2",
        "--max-model-len",
        "512",
        "--enable-lora",
        "--max-loras",
        "2",
        "--max-lora-rank",
        "8",
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3}',
        "--shared-prefix-len",
        "100",
    )
    header = " ".join(out.split("Budget")[0].split())
    assert code == 0
    assert "LoRA 2 x rank 8, speculative ngram (3 tokens), shared prefix 100" in header
    assert "With a shared prefix of 100 tokens (prefix caching):" in " ".join(out.split())


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [  # 2: a bad argument, refused by ServeConfig's checks; 1: found against the model or the release
        (["--max-loras", "2"], "--max-loras needs --enable-lora", 2),
        (["--enable-lora", "--max-lora-rank", "7"], "--max-lora-rank 7 is not one vLLM takes", 2),
        (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], "--max-cpu-loras (2) must be >= --max-loras (4)", 2),
        (["--enable-lora", "--vllm-version", "0.11"], "releases before 0.12 add lora_extra_vocab_size", 1),
        (["--enable-lora", "--engine", "sglang"], "LoRA adapters are modelled for vLLM's budget only", 1),
        (["--speculative-config", '{"method": "ngram"}'], "num_speculative_tokens must be a positive integer", 2),
        (["--speculative-config", '{"method": "eagle", "num_speculative_tokens": 2}'], "its head's config is not bundled", 1),
        (
            ["--speculative-config", '{"model": "gpt2", "num_speculative_tokens": 2}', "--vllm-version", "0.14.1"],
            "refuses a draft model on its V1 engine",
            1,
        ),
        (
            ["--speculative-config", '{"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 2}'],
            "needs one vocabulary for both",
            1,
        ),
        (["--shared-prefix-len", "100", "--no-enable-prefix-caching"], "--shared-prefix-len needs prefix caching", 2),
        (["--shared-prefix-len", "512"], "--shared-prefix-len (512) must be shorter than --max-model-len (512)", 1),
    ],
)
def test_unsupported_combinations_are_one_line(
    argv: list[str], message: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "serve", "gpt2", "--max-model-len", "512", "--max-num-batched-tokens", "512", *argv)
    assert code == status and message in err and err.count("\n") == 1


def test_lora_on_a_mixture_of_experts_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "serve", "Qwen/Qwen3-30B-A3B", "--max-model-len", "4096", "--enable-lora")
    assert code == 1 and "LoRA slots on fused experts (FusedMoEWithLoRA) are not modelled" in err and err.count("\n") == 1
