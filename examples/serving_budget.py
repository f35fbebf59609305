"""How many 8k-token users can one H100 serve with Llama-3.1-8B under vLLM: bf16 vs fp8 KV cache?"""

from __future__ import annotations

import math

from vramsim import serve

MODEL = "meta-llama/Llama-3.1-8B"
MAX_MODEL_LEN = 8192

if __name__ == "__main__":
    results = {}
    for kv_cache_dtype in ("auto", "fp8"):
        report = serve(MODEL, device="h100", max_model_len=MAX_MODEL_LEN, kv_cache_dtype=kv_cache_dtype)
        results[kv_cache_dtype] = report
        print(
            f"kv_cache_dtype={kv_cache_dtype}: weights {report.weights_bytes / 2**30:.2f} GiB, activation peak "
            f"{report.activation_peak_bytes / 2**30:.2f} GiB, KV cache {report.kv_cache_bytes / 2**30:.2f} GiB = "
            f"{report.kv_cache_tokens:,} tokens in {report.kv_blocks:,} blocks; "
            f"maximum concurrency at {MAX_MODEL_LEN:,} tokens: {report.max_concurrency:.2f}x"
        )
    bf16, fp8 = (math.floor(results[key].max_concurrency) for key in ("auto", "fp8"))
    print(
        f"Answer: one H100 serves {bf16} concurrent {MAX_MODEL_LEN:,}-token requests of {MODEL} with a bf16 KV "
        f"cache and {fp8} with an fp8 KV cache (vLLM defaults, gpu_memory_utilization 0.9)."
    )
