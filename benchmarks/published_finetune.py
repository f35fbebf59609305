"""vramsim against published fine-tuning memory figures (PEFT adapters, full fine-tuning, QLoRA).

The cases use ``published_gpu``'s machinery (``Case``, the runner, the table): each is one figure
from a public page, the workload as that page's script ran it and what it read. The main source is
peft's own method-comparison suite (``method_comparison/MetaMathQA`` in the peft repository, the
suite peft's "Memory efficient training" guide points to for each method's maximum memory): one
script trains Llama-3.2-3B on an L40S with every PEFT method and records
``torch.cuda.max_memory_reserved()`` over the run, so the rows differ only in the adapter. torchtune's
README table is listed with the reason vramsim cannot ask it yet.

Run: ``python benchmarks/published_finetune.py`` (about 5 minutes on two cores);
``--only SUBSTRING`` runs the matching cases.
"""

from __future__ import annotations

from typing import Any

import torch
from peft import (
    BOFTConfig,
    FourierFTConfig,
    IA3Config,
    LNTuningConfig,
    LoHaConfig,
    LoraConfig,
    OFTConfig,
    PrefixTuningConfig,
    PromptTuningConfig,
    TrainableTokensConfig,
    VeraConfig,
)
from published_gpu import Case, run_cases

# ---- peft's method comparison: Llama-3.2-3B on MetaMathQA, one L40S -------------------------------------------

_PEFT_RESULTS = "https://github.com/huggingface/peft/blob/main/method_comparison/MetaMathQA/results/"
_PEFT_STACK = (
    "NVIDIA L40S, torch 2.13.0+cu130, transformers 5.13.1, peft 0.19.2.dev0 (the result file's meta_info); "
    "method_comparison/MetaMathQA/run.py: bf16 weights, no autocast, no gradient checkpointing, batch 4 padded "
    "to its longest sequence (at most max_seq_length=768), outputs = model(**batch) held through backward, "
    "clip_grad_norm_(1.0), torch.optim.AdamW (foreach); accelerator_memory_max = max_memory_reserved() at the "
    "end of the run minus the 2 MiB reserved before the model loaded"
)
_PEFT_SEQ = 768
"""The script's ``max_seq_length``. Its batches are padded to their longest sample, which depends on the data
(MetaMathQA, filtered to 1,300 characters so that none passes 768 tokens); the longest batch of the run is not
printed, so the cases ask vramsim at the cap: for the activations this is an upper bound."""


def _metamath_batch(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """A batch as ``run.py`` builds it: right-padded ``input_ids`` and ``attention_mask`` (the longest row
    unpadded, the others ending in padding) and ``labels`` that ignore the padding after the first EOS."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1:, -1] = 0
    labels = torch.zeros(batch, seq, dtype=torch.long)
    return {"input_ids": torch.zeros(batch, seq, dtype=torch.long), "attention_mask": mask, "labels": labels}


_PEFT_RUN: dict[str, Any] = dict(
    task="train",
    batch_size=4,
    seq_len=_PEFT_SEQ,
    dtype="bf16",
    optimizer="adamw-foreach",
    max_grad_norm=1.0,
    keep_outputs=True,
    attn_implementation="sdpa",
    inputs=_metamath_batch,
)


def _peft(name: str, result: str, accelerator_memory_max: int, adapter: Any) -> Case:
    options = {**_PEFT_RUN, "lora": adapter} if adapter is not None else dict(_PEFT_RUN)
    return Case(
        f"llama-3.2-3b {name} (peft method comparison)",
        _PEFT_RESULTS + result + ".json",
        f'"accelerator_memory_max": {accelerator_memory_max}',
        _PEFT_STACK,
        "l40s",
        "meta-llama/Llama-3.2-3B",
        options,
        "reserved",
        accelerator_memory_max,
    )


_QV = ["q_proj", "v_proj"]

PEFT_METHOD_COMPARISON = [
    _peft("full fine-tuning", "full-finetuning--llama-3.2-3B-lr_0.00001", 38_868_615_168, None),
    _peft("LoRA r32 q,v", "lora--llama-3.2-3B-rank32", 22_292_725_760,
          LoraConfig(task_type="CAUSAL_LM", r=32, lora_alpha=64, target_modules=_QV)),
    _peft("LoRA r64 q,v", "lora--llama-3.2-3B-rank64", 22_552_772_608,
          LoraConfig(task_type="CAUSAL_LM", r=64, lora_alpha=128, target_modules=_QV)),
    _peft("DoRA r32 q,v", "lora--llama-3.2-3B-rank32-dora", 24_532_484_096,
          LoraConfig(task_type="CAUSAL_LM", r=32, lora_alpha=64, target_modules=_QV, use_dora=True)),
    _peft("LoRA r10 MLP", "lora--llama-3.2-3B-rank10-target-mlp", 24_698_159_104,
          LoraConfig(task_type="CAUSAL_LM", r=10, lora_alpha=20, target_modules=["up_proj", "gate_proj", "down_proj"])),
    _peft("LoHa r32 q,v", "loha--llama-3.2-3B-rank32", 23_907_532_800,
          LoHaConfig(r=32, alpha=64, target_modules=_QV)),
    _peft("VeRA r256 q,v", "vera--llama-3.2-3B-default", 21_621_637_120,
          VeraConfig(r=256, target_modules=_QV, save_projection=True, d_initial=0.1, projection_prng_key=0)),
    _peft("IA3 k,v,down", "ia3--llama-3.2-3B-default", 23_234_347_008,
          IA3Config(target_modules=["down_proj", "v_proj", "k_proj"], feedforward_modules=["down_proj"])),
    _peft("LN tuning", "ln_tuning--llama-3.2-3B-default", 21_181_235_200,
          LNTuningConfig(target_modules=["input_layernorm", "norm", "post_attention_layernorm"])),
    _peft("prompt tuning 200 tokens", "prompt_tuning--llama-3.2-3B-default", 24_394_072_064,
          PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=200)),
    _peft("prefix tuning 200 tokens", "prefixtuning--llama-3.2-3B-lr_0.001", 21_952_987_136,
          PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=200)),
    _peft("trainable tokens (2)", "trainable_tokens--llama-3.2-3B-sos+eos", 20_937_965_568,
          TrainableTokensConfig(task_type="CAUSAL_LM", target_modules=["embed_tokens"], token_indices=[128000, 128001])),
    _peft("FourierFT q,v", "fourierft--llama-3.2-3B-default", 23_657_971_712,
          FourierFTConfig(n_frequency=1000, scaling=300, random_loc_seed=777, target_modules=_QV)),
    _peft("OFT r32 q,v", "oft--llama-3.2-3B-rank32", 22_332_571_648,
          OFTConfig(r=32, oft_block_size=0, eps=6e-05, use_cayley_neumann=True, num_cayley_neumann_terms=5,
                    target_modules=_QV)),
    _peft("BOFT q,v", "boft--llama-3.2-3B-default", 24_691_867_648,
          BOFTConfig(boft_block_size=4, boft_block_num=0, boft_n_butterfly_factor=1, target_modules=_QV)),
]  # fmt: skip

# ---- torchtune README, "Memory and training speed" (Llama 3.1 8B on one RTX 4090) --------------------------------

_TORCHTUNE = "https://github.com/pytorch/torchtune#memory-and-training-speed"
_TORCHTUNE_STACK = (
    "torchtune's own Llama 3.1 modules (not transformers'), batch 2 of alpaca packed to 2,048 tokens, "
    "torch.compile, activation checkpointing, bf16, LinearCrossEntropyLoss (the output projection and the loss "
    "fused in chunks); the table's 'Peak Memory per GPU' (torchtune logs peak active, allocated and reserved)"
)
_TORCHTUNE_WHY = (
    "torchtune's own model modules compiled with torch.compile, and its chunked linear+cross-entropy "
    "loss, are not modelled (vramsim traces transformers' modules in eager mode)"
)
_TUNE: dict[str, Any] = dict(task="train", batch_size=2, seq_len=2048, dtype="bf16", checkpointing="full")

TORCHTUNE = [
    Case("llama-3.1-8b full fine-tuning 4090 (torchtune)", _TORCHTUNE, "| Llama 3.1 8B | Full finetune | 1x 4090 | 18.9 GiB",
         _TORCHTUNE_STACK + "; bitsandbytes PagedAdamW8bit stepped in backward (optimizer_in_bwd)", "rtx-4090",
         "meta-llama/Llama-3.1-8B", {**_TUNE, "optimizer": "paged-adamw8bit"}, "allocated", round(18.9 * 2**30),
         unavailable=_TORCHTUNE_WHY + "; so is an optimizer step fused into backward (optimizer_in_bwd)"),
    Case("llama-3.1-8b LoRA 4090 (torchtune)", _TORCHTUNE, "| Llama 3.1 8B | LoRA | 1x 4090 |  16.2 GiB",
         _TORCHTUNE_STACK + "; LoRA r8 alpha 16 on q, v, output and the MLP, torch.optim.AdamW", "rtx-4090",
         "meta-llama/Llama-3.1-8B", {**_TUNE, "lora": LoraConfig(r=8, lora_alpha=16, target_modules=[
             "q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])}, "allocated", round(16.2 * 2**30),
         unavailable=_TORCHTUNE_WHY),
    Case("llama-3.1-8b QLoRA 4090 (torchtune)", _TORCHTUNE, "| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB",
         _TORCHTUNE_STACK + "; torchao NF4 base, LoRA r8 alpha 16 on q, v, output and the MLP", "rtx-4090",
         "meta-llama/Llama-3.1-8B", {**_TUNE, "quantization": "nf4-dq", "lora": LoraConfig(r=8, lora_alpha=16,
         target_modules=["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])}, "allocated",
         round(7.4 * 2**30), unavailable=_TORCHTUNE_WHY + "; its base is torchao's NF4Tensor, not bitsandbytes'"),
]  # fmt: skip

CASES: list[Case] = [*PEFT_METHOD_COMPARISON, *TORCHTUNE]


if __name__ == "__main__":
    run_cases(CASES, __doc__)
