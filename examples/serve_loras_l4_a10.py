"""Does Llama-3.1-8B with 8 LoRA adapters of rank 64 fit an L4 or an A10 at 8k context under vLLM?

vLLM allocates every adapter slot at start-up (``--enable-lora --max-loras 8 --max-lora-rank 64``): ``lora_a`` and
``lora_b`` for each slot in every linear layer, the embedding and the head, zeroed, whatever adapters are loaded
later; ``vramsim.serve`` counts them with the weights from the traced model's own layers and runs the LoRA kernels'
buffers in the profile forward, so the KV cache is what is left.
"""

from __future__ import annotations

import vramsim

MODEL = "meta-llama/Llama-3.1-8B"
MAX_MODEL_LEN = 8192
LORA = {"enable_lora": True, "max_loras": 8, "max_lora_rank": 64}

if __name__ == "__main__":
    verdicts = []
    for device in ("l4", "a10"):
        try:
            report = vramsim.serve(MODEL, device=device, max_model_len=MAX_MODEL_LEN, **LORA)
        except vramsim.ConfigError as refused:  # vLLM would not start: the reason, in one line
            print(f"{device}: {refused}")
            verdicts.append(f"not on an {device.upper()}")
            continue
        assert report.lora is not None
        print(
            f"{device}: weights {report.weights_bytes / 2**30:.2f} GiB, of which LoRA slots "
            f"{report.lora.slot_bytes / 2**30:.2f} GiB; KV cache {report.kv_cache_bytes / 2**30:.2f} GiB, "
            f"{report.kv_cache_tokens:,} tokens, {report.max_concurrency:.2f}x at {MAX_MODEL_LEN:,} tokens"
        )
        fits = report.max_concurrency >= 1
        verdicts.append(f"{'yes' if fits else 'no'} on an {device.upper()} ({report.max_concurrency:.2f} requests)")
    print(f"Answer: {MODEL} with 8 LoRA adapters of rank 64 at {MAX_MODEL_LEN:,} tokens: {'; '.join(verdicts)}.")
