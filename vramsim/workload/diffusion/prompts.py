"""The prompt as T5-prompted pipelines encode it under guidance: shared by the families that have one (PixArt, LTX)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["T5Embeds", "guided_t5_prompt"]

T5Embeds = Callable[["Generation", "Program"], tuple[torch.Tensor, torch.Tensor]]
"""A pipeline's ``_get_t5_prompt_embeds``: the prompt's embeddings and attention mask."""


def guided_t5_prompt(step: Generation, program: Program, t5_embeds: T5Embeds) -> dict[str, torch.Tensor]:
    """A T5-prompted pipeline's ``__call__`` (PixArt's, LTX's): the prompt's embeddings and mask from ``t5_embeds``
    (the pipeline's own ``_get_t5_prompt_embeds``), and with guidance the empty negative prompt's, concatenated
    negative first and kept too."""
    prompt_embeds, prompt_attention_mask = t5_embeds(step, program)
    if step.run.guidance_scale <= 1:
        return {"encoder_hidden_states": prompt_embeds, "encoder_attention_mask": prompt_attention_mask}
    negative_prompt_embeds, negative_prompt_attention_mask = t5_embeds(step, program)
    return {
        "encoder_hidden_states": torch.cat([negative_prompt_embeds, prompt_embeds], dim=0),
        "encoder_attention_mask": torch.cat([negative_prompt_attention_mask, prompt_attention_mask], dim=0),
        "negative_prompt_embeds": negative_prompt_embeds,
        "negative_prompt_attention_mask": negative_prompt_attention_mask,
    }
