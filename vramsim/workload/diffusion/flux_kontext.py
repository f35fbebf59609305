"""FluxKontextPipeline.__call__'s own tensors: the reference image VAE-encoded, packed and put after the noise tokens.

diffusers ``pipelines/flux/pipeline_flux_kontext.py`` runs FluxPipeline's call (``flux.py``) with three differences:
the call's height and width are rescaled to ``max_area`` (1024**2 by default) at their aspect ratio, in multiples of
two latents; the reference image is resized to the preferred Kontext resolution nearest its aspect ratio
(``_auto_resize``), VAE-encoded (the latent distribution's mode, shifted and scaled), packed into 2x2 patches and
concatenated after the noise latents along the sequence, with its own ``img_ids`` (1 on the first axis); the
transformer predicts over both and the pipeline keeps the noise tokens' part. The reference image is taken at the
requested height x width (the pipeline's output size when none is given), so only its aspect ratio matters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.results.report import Assumption
from vramsim.workload.diffusion.spec import call_default, pipeline_class

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["KONTEXT_PIPELINES", "call_sizes", "kontext_notes", "reference_tokens"]

KONTEXT_PIPELINES = ("FluxKontextPipeline",)
"""The pipeline classes that condition FLUX on a reference image's tokens."""


def call_sizes(height: int, width: int, vae_scale: int) -> tuple[int, int, tuple[int, int]]:
    """The output's height and width after ``max_area``, and the reference image's after ``_auto_resize``, for a call
    (and a reference image) of ``height`` x ``width``."""
    pipeline_class(KONTEXT_PIPELINES[0])  # first: importing its module quietly
    from diffusers.pipelines.flux.pipeline_flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS

    multiple = vae_scale * 2
    max_area = int(call_default(KONTEXT_PIPELINES[0], "max_area"))
    aspect = width / height
    out_width = round((max_area * aspect) ** 0.5) // multiple * multiple
    out_height = round((max_area / aspect) ** 0.5) // multiple * multiple
    # image_processor.get_default_height_width: the image's sides down to multiples of its vae_scale_factor (2 * VAE's)
    image_height, image_width = height - height % multiple, width - width % multiple
    _, ref_width, ref_height = min((abs(image_width / image_height - w / h), w, h) for w, h in PREFERRED_KONTEXT_RESOLUTIONS)
    return out_height, out_width, (ref_height // multiple * multiple, ref_width // multiple * multiple)


def reference_tokens(
    step: Generation, program: Program, channels: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``prepare_latents``' image part, before the noise latents: the preprocessed image on the device in the prompt's
    dtype, ``_encode_vae_image`` (the mode, shifted and scaled), one copy per image, packed; and its ``img_ids``."""
    pipeline_class(KONTEXT_PIPELINES[0])
    from diffusers.pipelines.flux.pipeline_flux_kontext import FluxKontextPipeline, retrieve_latents

    assert step.run.reference_size is not None, "_pipeline_call sizes Kontext's reference image"
    vae: Any = program.modules["vae"]
    n = step.run.num_images
    step.use("vae")
    image = torch.zeros(1, 3, *step.run.reference_size, device=device, dtype=dtype)  # (1, 3, H, W)
    latents = retrieve_latents(vae.encode(image), sample_mode="argmax")
    latents = (latents - vae.config.shift_factor) * vae.config.scaling_factor
    latents = torch.cat([latents] * n, dim=0)  # (n, 16, H / 8, W / 8)
    height, width = latents.shape[2:]
    packed = FluxKontextPipeline._pack_latents(latents, n, channels, height, width)  # (n, H/16 * W/16, 64)
    ids = FluxKontextPipeline._prepare_latent_image_ids(n, height // 2, width // 2, device, dtype)  # (H/16 * W/16, 3)
    ids[..., 0] = 1
    return packed, ids


def kontext_notes(step: Generation) -> list[Assumption]:
    """What the Kontext run assumes beyond FLUX's."""
    assert step.run.reference_size is not None, "_pipeline_call sizes Kontext's reference image"
    ref_height, ref_width = step.run.reference_size
    return [
        Assumption(
            name="kontext_reference",
            detail=f"one reference image, taken at the requested size and resized by the pipeline (_auto_resize) to "
            f"{ref_height}x{ref_width}, the preferred Kontext resolution nearest its aspect ratio; VAE-encoded and "
            f"its tokens put after the noise tokens; the output rescaled to max_area="
            f"{call_default(KONTEXT_PIPELINES[0], 'max_area')} at its aspect ratio: {step.run.height}x{step.run.width}",
        )
    ]
