"""QwenImagePipeline.__call__'s tensors: a templated Qwen2.5-VL prompt, packed latents, a one-frame 3D decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
Qwen-Image text-to-image does differently (diffusers ``pipelines/qwenimage/pipeline_qwenimage.py``):
the prompt, inside the pipeline's template, goes through the whole Qwen2.5-VL model (its logits
too) with every layer's hidden state kept; the last one's real tokens are gathered, the template's
first ``prompt_template_encode_start_idx`` (34) dropped and the rest cut to ``max_sequence_length``;
an all-ones mask is dropped (``prompt_embeds_mask.all()``). The 16-channel latents of one frame
are packed into 2x2 patches as FLUX's are and the sigmas shifted by their token count; the
transformer runs once per step (``true_cfg_scale`` needs a negative prompt, which the call does not
give by default; Qwen-Image has no guidance embedding). The latents are unpacked, de-normalized with
the VAE's per-channel statistics and decoded as a one-frame video whose frame is the image.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.flux import shifted_timesteps
from vramsim.workload.diffusion.spec import call_default, pipeline_class

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = [
    "QWEN_IMAGE_PIPELINES",
    "decode",
    "default_size",
    "denoise",
    "encode_prompt",
    "guidance_scale",
    "max_sequence_length",
    "prompt_batch",
    "qwen_image_notes",
]

QWEN_IMAGE_PIPELINES = ("QwenImagePipeline",)
"""The pipeline classes this module runs."""

_DEFAULT_SAMPLE_SIZE = 128
"""QwenImagePipeline's ``default_sample_size`` (set in its ``__init__``): 1024 px with the 8x VAE."""

_TEMPLATE_START = 34
"""QwenImagePipeline's ``prompt_template_encode_start_idx`` (set in its ``__init__``): the template's tokens dropped."""


def _default(argument: str) -> Any:
    """QwenImagePipeline.__call__'s default for ``argument``."""
    return call_default(QWEN_IMAGE_PIPELINES[0], argument)


def _vae_scale_factor(vae: torch.nn.Module) -> int:
    """The pipeline's ``vae_scale_factor``: 2 per temporal-downsample entry of the VAE."""
    vae_config: Any = vae.config
    return int(2 ** len(vae_config.temperal_downsample))


def default_size(vae: torch.nn.Module) -> tuple[int, int]:
    """``default_sample_size * vae_scale_factor`` on each side (128 x 8 = 1024)."""
    side = _DEFAULT_SAMPLE_SIZE * _vae_scale_factor(vae)
    return side, side


def max_sequence_length(given: int | None) -> int:
    """The prompt's tokens after the template, as given or ``__call__``'s default (512); it refuses more than 1024."""
    tokens = int(_default("max_sequence_length")) if given is None else given
    if tokens > 1024:
        raise ConfigError(f"max_sequence_length cannot be greater than 1024 (QwenImagePipeline's limit), got {tokens}")
    return tokens


def guidance_scale(given: float | None) -> float:
    """``true_cfg_scale``'s default (4.0) is off without a negative prompt and Qwen-Image has no guidance embedding, so
    a given guidance scale changes nothing; the report carries ``true_cfg_scale`` (what the call defaults to)."""
    return float(_default("true_cfg_scale")) if given is None else given


def prompt_batch(tokens: int) -> dict[str, torch.Tensor]:
    """The templated prompt on the device: the template's first tokens and ``tokens`` more, with their mask."""
    length = _TEMPLATE_START + tokens
    return {"input_ids": torch.zeros(1, length, dtype=torch.long), "attention_mask": torch.ones(1, length, dtype=torch.long)}


def qwen_image_notes(step: Generation) -> list[Assumption]:
    """What the Qwen-Image run assumes beyond the common pipeline notes."""
    return [
        Assumption(
            name="qwen_image_prompt",
            detail=f"Qwen2.5-VL over the template's first {_TEMPLATE_START} tokens and "
            f"max_sequence_length={step.run.max_sequence_length} more (the prompt and the template's end taken to fill "
            "them), every layer's hidden state and the logits kept while it runs; one transformer call per step "
            f"(true_cfg_scale {step.run.guidance_scale} needs a negative prompt, none given; no guidance embedding)",
        )
    ]


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``_get_qwen_prompt_embeds``: the last hidden state's real tokens gathered, the template dropped, re-padded (to
    themselves: one prompt), then cut to ``max_sequence_length`` and repeated per image; the all-ones mask dropped."""
    n = step.run.num_images
    encoder: Any = program.modules["text_encoder"]
    step.use("text_encoder")
    ids, mask = program.batch["input_ids"], program.batch["attention_mask"]
    out = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    hidden_states = out.hidden_states[-1]
    # _extract_masked_hidden: hidden_states[mask.bool()] gathers the real tokens into a new tensor (all of them: the
    # prompt fills the mask, so its split by lengths is the one prompt's); its lengths are values a trace has not
    selected = hidden_states[0].clone()
    split_hidden_states = [selected[_TEMPLATE_START:]]
    del out, hidden_states, selected
    max_seq_len = max(e.size(0) for e in split_hidden_states)
    prompt_embeds = torch.stack([torch.cat([u, u.new_zeros(max_seq_len - u.size(0), u.size(1))]) for u in split_hidden_states])
    prompt_embeds = prompt_embeds.to(dtype=encoder.dtype)
    assert step.run.max_sequence_length is not None, "the pipeline call sets Qwen-Image's max_sequence_length"
    prompt_embeds = prompt_embeds[:, : step.run.max_sequence_length]
    _, seq_len, _ = prompt_embeds.shape
    prompt_embeds = prompt_embeds.repeat(1, n, 1).view(n, seq_len, -1)
    return {"encoder_hidden_states": prompt_embeds}  # the mask: all ones, so None


def _latent_size(step: Generation, program: Program) -> tuple[int, int]:
    """``prepare_latents``: the latent side rounded down to whole 2x2 patches."""
    scale = _vae_scale_factor(program.modules["vae"])
    return 2 * (step.run.height // (scale * 2)), 2 * (step.run.width // (scale * 2))


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (packed, in the prompt's dtype), the shifted sigmas, the transformer once per traced step,
    the scheduler's step; then unpacked and de-normalized for the decode."""
    pipeline = pipeline_class(QWEN_IMAGE_PIPELINES[0])
    transformer: Any = program.modules["transformer"]
    vae: Any = program.modules["vae"]
    prompt_embeds = embeds["encoder_hidden_states"]
    n, device, dtype = step.run.num_images, prompt_embeds.device, prompt_embeds.dtype
    height, width = _latent_size(step, program)
    if not height or not width:
        raise ConfigError(f"QwenImagePipeline needs height and width of at least {2 * _vae_scale_factor(vae)} pixels")
    channels = transformer.config.in_channels // 4
    latents = torch.randn((n, 1, channels, height, width), device=device, dtype=dtype)
    latents = pipeline._pack_latents(latents, n, channels, height, width)
    img_shapes = [[(1, height // 2, width // 2)]] * n
    timesteps = shifted_timesteps(step, latents.shape[1])
    scheduler = step.scheduler
    scheduler.set_begin_index(0)
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        timestep = t.expand(latents.shape[0]).to(device=device, dtype=latents.dtype)
        with transformer.cache_context("cond"):
            noise_pred = transformer(
                hidden_states=latents,
                timestep=timestep / 1000,
                guidance=None,
                encoder_hidden_states_mask=None,
                encoder_hidden_states=prompt_embeds,
                img_shapes=img_shapes,
                attention_kwargs={},
                return_dict=False,
            )[0]
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    latents = pipeline._unpack_latents(latents, step.run.height, step.run.width, _vae_scale_factor(vae))
    latents = latents.to(vae.dtype)
    z_dim = vae.config.z_dim
    latents_mean = torch.tensor(vae.config.latents_mean).view(1, z_dim, 1, 1, 1).to(latents.device, latents.dtype)
    latents_std = 1.0 / torch.tensor(vae.config.latents_std).view(1, z_dim, 1, 1, 1).to(latents.device, latents.dtype)
    return latents / latents_std + latents_mean


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``vae.decode`` of the one-frame latents, its frame taken, then ``postprocess``'s device part."""
    from diffusers.image_processor import VaeImageProcessor

    vae: Any = program.modules["vae"]
    step.use("vae")
    image = vae.decode(latents, return_dict=False)[0][:, :, 0]
    return VaeImageProcessor(vae_scale_factor=_vae_scale_factor(vae) * 2).postprocess(image, output_type="pt")
