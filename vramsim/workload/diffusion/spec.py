"""What a pipeline folder and its diffusers class say: the components' folders, the call's defaults.

Every module of the package reads a pipeline through these; none of them imports a pipeline family.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramsim.workload.models import PipelineIndex, pipeline_index
from vramsim.workload.quiet import quiet_image_processors, quiet_optional_libraries

__all__ = ["PipelineSpec", "call_default", "diffusers_version", "find_pipeline", "pipeline_class"]

quiet_optional_libraries()  # diffusers imports torchao and bitsandbytes: quiet before the first diffusers import


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """What a pipeline folder says: its class and its components' folders."""

    folder: Path
    class_name: str
    index: dict[str, Any]
    """model_index.json as published."""

    @classmethod
    def of(cls, found: PipelineIndex) -> PipelineSpec:
        """The spec of a pipeline folder found by ``pipeline_index``."""
        return cls(folder=found.folder, class_name=str(found.index.get("_class_name")), index=found.index)

    def component(self, name: str) -> Path:
        return self.folder / name

    def has(self, name: str) -> bool:
        return isinstance(self.index.get(name), list) and self.index[name][0] is not None

    @property
    def denoiser(self) -> str:
        """The denoising component's folder: ``transformer`` (DiT pipelines such as FLUX) or ``unet``."""
        return "transformer" if self.has("transformer") else "unet"

    @property
    def denoisers(self) -> tuple[str, ...]:
        """The denoiser and, where the pipeline has one, its second expert (Wan 2.2 A14B's ``transformer_2``, which
        denoises below ``boundary_ratio``): each is built, quantized and hooked as the denoiser is."""
        return (self.denoiser, "transformer_2") if self.has("transformer_2") else (self.denoiser,)

    def max_tokens(self, tokenizer: str) -> int:
        """The tokenizer's ``model_max_length``: every prompt is padded to it (``padding="max_length"``)."""
        data = json.loads((self.folder / tokenizer / "tokenizer_config.json").read_text())
        return int(data["model_max_length"])


def find_pipeline(source: Any) -> PipelineSpec | None:
    """A bundled pipeline id or a folder with ``model_index.json``; None for anything else."""
    found = pipeline_index(source)
    return None if found is None else PipelineSpec.of(found)


def pipeline_class(class_name: str) -> Any:
    """diffusers' pipeline class, imported without the image-processor messages (quiet_image_processors)."""
    import diffusers

    with quiet_image_processors():
        return getattr(diffusers, class_name)


def call_default(class_name: str, argument: str) -> Any:
    """The default of ``argument`` in the diffusers pipeline class's own ``__call__`` signature, so an
    option left unset means what the pipeline would do (FLUX's 28 steps, SDXL's guidance 5.0)."""
    return inspect.signature(pipeline_class(class_name).__call__).parameters[argument].default


def diffusers_version() -> str:
    """The installed diffusers' version, as the report and its errors name it."""
    import diffusers

    return str(diffusers.__version__)
