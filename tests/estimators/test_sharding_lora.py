"""A peft-wrapped model's decoder layers are the blocks FSDP2, HSDP and ZeRO-3 gather one at a time: peft's
``base_model.model.`` prefix once hid them, and the whole model was one unit gathered at once."""

from __future__ import annotations

import vramsim


def test_the_issue_s_llama_2_13b_lora_case_gathers_a_layer_at_a_time() -> None:
    """The issue's case: Llama-2-13b, LoRA rank 8 on q_proj,v_proj, full checkpointing, A100 80GB. FSDP2 full over
    4 GPUs reported 13.02 billion elements gathered (every weight; a 24.27 GiB all-gather) and a 56.23 GiB peak;
    now a layer and the root (317,368,320 + 327,685,120 elements) and 9.30 GiB, as HSDP (2 x 4); ZeRO-3 over 4
    gathers a layer's partitioned weights, a prefetch bucket (5e7) and the root: 10.62 GiB. Before, HSDP was FSDP2's
    56.23 GiB and ZeRO-3 gathered 13.02 billion elements too (33.93 GiB)."""
    variants: list[dict[str, object]] = [
        {"gpus": 4, "fsdp": "full"},
        {"gpus": 8, "fsdp": "hybrid", "shard_group_size": 4},
        {"gpus": 4, "zero": 3},
    ]
    reports = vramsim.simulate_each(
        "meta-llama/Llama-2-13b-hf",
        variants,
        advice="none",
        task="train",
        dtype="bf16",
        batch_size=1,
        seq_len=2048,
        checkpointing="full",
        device="a100-80gb",
        lora={"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]},  # --lora-rank 8 --lora-targets q_proj,v_proj
    )
    assert [report.ranks.gathered_elements for report in reports if report.ranks is not None] == [
        645_053_440,
        645_053_440,
        694_874_240,
    ]
    assert [round(report.peak_bytes / 2**30, 2) for report in reports] == [9.30, 9.30, 10.62]
