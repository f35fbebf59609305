"""How many 8k-token users can one H100 serve with Llama-3.1-8B under vLLM: bf16 vs fp8 KV cache?

``vramsim.compare_serve`` budgets both as ``vramsim.serve`` does, from one trace: the KV cache dtype changes only
the arithmetic over it.
"""

from __future__ import annotations

import math

import vramsim

MODEL = "meta-llama/Llama-3.1-8B"
MAX_MODEL_LEN = 8192

if __name__ == "__main__":
    comparison = vramsim.compare_serve(
        MODEL, {"bf16": {}, "fp8": {"kv_cache_dtype": "fp8"}}, device="h100", max_model_len=MAX_MODEL_LEN
    )
    print(vramsim.compare_text(comparison, width=80))
    bf16, fp8 = (math.floor(each.report.max_concurrency) for each in comparison.variants if each.report is not None)
    print(
        f"Answer: one H100 serves {bf16} concurrent {MAX_MODEL_LEN:,}-token requests of {MODEL} with a bf16 KV "
        f"cache and {fp8} with an fp8 KV cache (vLLM defaults, gpu_memory_utilization 0.9)."
    )
