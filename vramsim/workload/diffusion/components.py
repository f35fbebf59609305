"""A pipeline's diffusers components built from their folders: the models, the scheduler, the VAE's config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from vramsim.errors import ConfigError, ModelNotFoundError, UnsupportedError, first_line
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.quiet import quiet_wan_vae_clip_output

__all__ = ["diffusers_model", "has_scheduler_config", "load_scheduler", "replaced_vae", "vae_config", "vae_scale"]


def diffusers_model(spec: PipelineSpec, name: str, device: str, dtype: torch.dtype) -> Any:
    """The component ``name`` built from its config on ``device``, in ``dtype``, in eval mode."""
    import diffusers

    library, class_name = spec.index[name]
    cls = getattr(diffusers, class_name, None)
    if library != "diffusers" or cls is None:
        raise UnsupportedError(f"{spec.class_name}'s {name} is {library}.{class_name}, which vramsim does not build")
    try:
        with torch.device(device), quiet_wan_vae_clip_output():
            model = cls.from_config(cls.load_config(spec.component(name)))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ModelNotFoundError(f"{spec.component(name)} cannot be built as {class_name}", quoted=first_line(exc)) from exc
    return torch.nn.Module.to(model, dtype).eval()  # ModelMixin.to warns about modules kept in fp32; these have none


def replaced_vae(spec: PipelineSpec, folder: str, device: str, dtype: torch.dtype) -> Any:
    """The VAE of ``folder`` (``AutoencoderTiny``, ``AutoencoderKL``: its config's ``_class_name``) built on
    ``device`` in ``dtype``, as ``pipe.vae = AutoencoderTiny.from_pretrained(folder, torch_dtype=dtype)`` sets it."""
    import diffusers

    path = Path(folder).expanduser()
    class_name = str(json.loads((path / "config.json").read_text()).get("_class_name"))
    cls = getattr(diffusers, class_name, None)
    if cls is None or not class_name.startswith("Autoencoder"):
        raise UnsupportedError(f"vae={folder}: its config names {class_name}, not one of diffusers' autoencoders")
    own = vae_config(spec).get("latent_channels")
    if cls.load_config(path).get("latent_channels") != own:
        raise ConfigError(f"vae={folder}: its latents have other channels than {spec.class_name}'s VAE's {own}")
    try:
        with torch.device(device):
            model = cls.from_config(cls.load_config(path))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ModelNotFoundError(f"{path} cannot be built as {class_name}", quoted=first_line(exc)) from exc
    return torch.nn.Module.to(model, dtype).eval()


def load_scheduler(spec: PipelineSpec, class_name: str | None = None) -> Any:
    """The pipeline's scheduler, or the scheduler class ``class_name`` built on the pipeline's scheduler config; with
    the class's own defaults where the folder holds no scheduler config (its timesteps stay on the host, so the
    memory does not depend on them; the report says so)."""
    import diffusers

    cls = getattr(diffusers, class_name if class_name is not None else spec.index["scheduler"][1])
    if not has_scheduler_config(spec):
        return cls()
    return cls.from_config(cls.load_config(spec.component("scheduler")))


def has_scheduler_config(spec: PipelineSpec) -> bool:
    """The pipeline folder holds its scheduler's config."""
    return (spec.component("scheduler") / "scheduler_config.json").is_file()


def vae_config(spec: PipelineSpec) -> dict[str, Any]:
    """The VAE's config as its folder holds it, read without building the VAE."""
    import diffusers

    return dict(diffusers.AutoencoderKL.load_config(spec.component("vae")))


def vae_scale(spec: PipelineSpec) -> int:
    """How many pixels a latent spans on each side: 2 per VAE block after the first."""
    return int(2 ** (len(vae_config(spec)["block_out_channels"]) - 1))
