"""The pipelines whose denoiser is trained, by diffusers class, with the example script each training step follows,
and the pipelines whose ``__call__`` is run.

Data, read without torch (``vramsim models`` lists which pipelines generate and train); recipes.py holds each
script's torch code, pipelines.py each generating family's module.
"""

from __future__ import annotations

__all__ = ["GENERATING", "TRAINING_SCRIPTS"]

TRAINING_SCRIPTS: dict[str, str] = {
    "StableDiffusionPipeline": "examples/text_to_image/train_text_to_image.py",
    "StableDiffusionXLPipeline": "examples/dreambooth/train_dreambooth_lora_sdxl.py",
    "FluxPipeline": "examples/dreambooth/train_dreambooth_lora_flux.py",
    "StableDiffusion3Pipeline": "examples/dreambooth/train_dreambooth_sd3.py (full) and train_dreambooth_lora_sd3.py",
}
"""The diffusers example each trained pipeline's step is; a pipeline trains once it is here (and in recipes.py)."""

GENERATING = frozenset(
    {
        "StableDiffusionPipeline",
        "StableDiffusionXLPipeline",
        "FluxPipeline",
        "FluxKontextPipeline",
        "StableDiffusion3Pipeline",
        "PixArtSigmaPipeline",
        "WanPipeline",
        "LTXPipeline",
        "CogVideoXPipeline",
        "HunyuanVideoPipeline",
        "QwenImagePipeline",
    }
)
"""The pipeline classes whose ``__call__`` is run (pipelines.py's families; tests/workload checks the two agree).
Another bundled pipeline is listed with its components' published counts and refused by ``trace``."""
