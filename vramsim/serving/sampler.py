"""vLLM's sampler warm-up in its profile run, as tensors: what ``_dummy_sampler_run`` allocates over the logits.

``_dummy_sampler_run`` (``vllm/v1/worker/gpu_model_runner.py``) samples one token for each of the profile run's
requests with every sampling step on: temperature 0.5, top-p 0.9, top-k of the vocabulary less one, penalties
given but off (``no_penalties``). The sampler (``vllm/v1/sample/sampler.py``) copies the logits to float32, takes
the greedy argmax (the batch is neither all greedy nor all random), divides by the temperature in place, applies
top-k and top-p (``vllm/v1/sample/ops/topk_topp_sampler.py``), then samples with exponential noise
(``random_sample``: a float32 softmax and a tensor of noise like it). Run here on the traced logits, so every tensor
is recorded as the profile's own.
"""

from __future__ import annotations

import torch

from vramsim.serving.versions import TopKTopP

__all__ = ["sampler_warmup"]


def sampler_warmup(logits: torch.Tensor, vocab: int, top_k_top_p: TopKTopP) -> torch.Tensor:
    """The token ids the warm-up samples from ``logits`` (requests, this rank's vocabulary shard); a sharded LM head's
    logits are gathered to the whole ``vocab`` first, as vLLM's ``LogitsProcessor`` gathers them on every rank."""
    requests = logits.shape[0]
    if logits.shape[1] < vocab:  # tensor parallel: (requests, vocab / tp) per rank, all-gathered
        logits = logits.new_empty(requests, vocab)
    logits = logits[:, :vocab]  # the padded vocabulary's extra rows sliced off (a view)
    temperature = torch.full((requests,), 0.5, device=logits.device)
    top_p = torch.full((requests,), 0.9, device=logits.device)
    top_k = torch.full((requests,), vocab - 1, device=logits.device)
    penalties = [torch.full((requests,), 0.1, device=logits.device) for _ in range(3)]  # frequency, presence, repetition
    scores = logits.to(torch.float32)  # (requests, vocab)
    greedy = scores.argmax(dim=-1)
    scores.div_(temperature.unsqueeze(dim=1))
    if top_k_top_p == "sort":
        scores = _sorted_top_k_top_p(scores, top_k, top_p)
    probs = scores.softmax(dim=-1, dtype=torch.float32)
    noise = torch.empty_like(probs).exponential_()
    sampled = torch.where(temperature < 1e-5, greedy, probs.div_(noise).argmax(dim=-1))
    del penalties
    return sampled.to(torch.int32)


def _sorted_top_k_top_p(scores: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """``apply_top_k_top_p_pytorch``: the scores sorted with their int64 indices, the top-k and top-p masks (each held
    to the end), the sorted softmax summed in place, the masked values scattered back into ``scores``."""
    values, indices = scores.sort(dim=-1, descending=False)
    kth = values.gather(1, (values.size(1) - top_k.to(torch.long)).unsqueeze(dim=1))
    below_k = values < kth
    values.masked_fill_(below_k, -float("inf"))
    cumulative = values.softmax(dim=-1)
    torch.cumsum(cumulative, dim=-1, out=cumulative)
    below_p = cumulative <= 1 - top_p.unsqueeze(dim=1)
    below_p[:, -1] = False
    values.masked_fill_(below_p, -float("inf"))
    return scores.scatter_(dim=-1, index=indices, src=values)
