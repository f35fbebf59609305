"""Diffusion pipelines by id: their components built from model_index.json, run as the pipeline runs them.

A pipeline folder (bundled in model_zoo, or a local one laid out as on the Hub) holds
``model_index.json`` and one folder per component. The components are built on meta (or the
CPU, to measure) and a ``Program`` runs them as diffusers' pipeline ``__call__`` does: prompt
encoding, the denoising loop with classifier-free guidance (the latents doubled), the VAE decode
(upcast to fp32 where the pipeline does it) and the on-device part of post-processing. The
pipeline class itself is not run: it needs tokenizers and weights; its tensors are the same.
FLUX's own prompt encoding, packed latents and decode shift are in ``flux.py``; SD3's three-encoder prompt
and decode shift in ``sd3.py``; PixArt-Sigma's masked T5 prompt and resolution binning in ``pixart.py``;
Wan's video latents, two-call guidance and 3D decode in ``wan.py``; LTX-Video's packed video latents and
timestep-aware decode in ``ltx.py``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from vramsim import model_zoo
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, ModelNotFoundError, UnsupportedError, first_line
from vramsim.estimators.assumptions import DENOISING_STEPS_TRACED, WAN_VAE_DTYPE
from vramsim.results.report import Assumption
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.diffusion import flux, ltx, pixart, sd3, wan
from vramsim.workload.models import build_model, load_config
from vramsim.workload.program import Program, StepObserver
from vramsim.workload.quantization.torchao import TORCHAO_NAMES, is_torchao
from vramsim.workload.quantization.weights import BITSANDBYTES_NAMES, check_quantized_target, quantization_config, quantize_model
from vramsim.workload.quiet import quiet_image_processors

__all__ = [
    "COMPONENT_PHASES",
    "PipelineSpec",
    "build_pipeline_program",
    "find_pipeline",
    "pipeline_notes",
    "pipeline_options",
    "pipeline_phases",
]

COMPONENT_PHASES = {
    "text_encoder": "encode_prompt",
    "text_encoder_2": "encode_prompt",
    "text_encoder_3": "encode_prompt",
    "unet": "denoise",
    "transformer": "denoise",
    "vae": "decode",
}
"""The pipeline phase each component runs in (what ``--json``'s ``components`` calls it)."""

_FAMILIES: dict[str, ModuleType] = {
    name: module
    for module, names in ((flux, flux.FLUX_PIPELINES), (sd3, sd3.SD3_PIPELINES), (pixart, pixart.PIXART_PIPELINES),
                          (wan, wan.WAN_PIPELINES), (ltx, ltx.LTX_PIPELINES))
    for name in names
}  # fmt: skip
"""The module holding each pipeline class's own ``encode_prompt``, ``denoise`` and ``decode`` (SD and SDXL: this one)."""

PIPELINES_RUN = ("StableDiffusionPipeline", "StableDiffusionXLPipeline", *_FAMILIES)
"""Pipeline classes whose ``__call__`` this module runs."""


def call_default(class_name: str, argument: str) -> Any:
    """The default of ``argument`` in the diffusers pipeline class's own ``__call__`` signature, so an
    option left unset means what the pipeline would do (FLUX's 28 steps, SDXL's guidance 5.0)."""
    return inspect.signature(pipeline_class(class_name).__call__).parameters[argument].default


def pipeline_class(class_name: str) -> Any:
    """diffusers' pipeline class, imported without the image-processor messages (quiet_image_processors)."""
    import diffusers

    with quiet_image_processors():
        return getattr(diffusers, class_name)


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """What a pipeline folder says: its class and its components' folders."""

    folder: Path
    class_name: str
    index: dict[str, Any]
    """model_index.json as published."""

    def component(self, name: str) -> Path:
        return self.folder / name

    def has(self, name: str) -> bool:
        return isinstance(self.index.get(name), list) and self.index[name][0] is not None

    @property
    def denoiser(self) -> str:
        """The denoising component's folder: ``transformer`` (DiT pipelines such as FLUX) or ``unet``."""
        return "transformer" if self.has("transformer") else "unet"

    def max_tokens(self, tokenizer: str) -> int:
        """The tokenizer's ``model_max_length``: every prompt is padded to it (``padding="max_length"``)."""
        data = json.loads((self.folder / tokenizer / "tokenizer_config.json").read_text())
        return int(data["model_max_length"])


def find_pipeline(source: Any) -> PipelineSpec | None:
    """A bundled pipeline id or a folder with ``model_index.json``; None for anything else."""
    if not isinstance(source, (str, Path)):
        return None
    text = str(source)
    folder = model_zoo.find_pipeline(text) or Path(text).expanduser()
    index_file = folder / "model_index.json"
    if not index_file.is_file():
        return None
    try:
        index = json.loads(index_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{index_file} is not a readable model_index.json: {first_line(exc)}") from exc
    return PipelineSpec(folder=folder, class_name=str(index.get("_class_name")), index=index)


def build_pipeline_program(spec: PipelineSpec, config: SimulationConfig, *, device: str) -> Program:
    """The pipeline's components on ``device`` and the step that runs one generation."""
    if config.task != "generate":
        raise ConfigError(f"{spec.class_name} is a diffusion pipeline: use task='generate' (got task='{config.task}')")
    if spec.class_name not in PIPELINES_RUN:
        raise UnsupportedError(
            f"{spec.class_name} is not run yet (its components' parameters are counted by `vramsim models`); "
            f"pipelines run: {', '.join(PIPELINES_RUN)}"
        )
    eager = _eager_attention(spec, config)
    dtype = _pipeline_dtype(spec, config)
    modules: dict[str, torch.nn.Module] = {}
    for name in ("text_encoder", "text_encoder_2", "text_encoder_3"):
        if spec.has(name):
            modules[name] = build_model(
                load_config(spec.component(name)), device=device, dtype=dtype, attn_implementation=config.attn_implementation
            ).eval()
    modules[spec.denoiser] = _diffusers_model(spec, spec.denoiser, device, dtype)
    if config.quantization is not None:
        _quantize(spec, modules, config, device, dtype)
    is_wan = spec.class_name in wan.WAN_PIPELINES
    vae = _diffusers_model(spec, "vae", device, getattr(torch, WAN_VAE_DTYPE) if is_wan else dtype)
    if eager:
        _eager(spec, modules[spec.denoiser], vae)
    if config.attention_slicing is not None:
        _slice_attention(spec, modules, config.attention_slicing)
    if config.vae_tiling:
        vae.enable_tiling()
    if config.vae_slicing:
        vae.enable_slicing()
    modules["vae"] = vae
    residency = _Residency(mode=config.offload, modules=modules) if config.offload != "no" else None
    run = _run(config, spec, modules[spec.denoiser], vae)
    with torch.device(device):
        batch = {"input_ids": torch.zeros(1, spec.max_tokens("tokenizer"), dtype=torch.long)}  # one prompt, padded
        if spec.class_name in (*pixart.PIXART_PIPELINES, *wan.WAN_PIPELINES):  # T5 alone: padded to max_sequence_length, masked
            assert run.max_sequence_length is not None, "_run sets PixArt's and Wan's max_sequence_length"
            batch = pixart.prompt_batch(run.max_sequence_length)
        elif spec.class_name in ltx.LTX_PIPELINES:  # T5 over max_sequence_length, its bool mask for the transformer
            assert run.max_sequence_length is not None, "_run sets LTX's max_sequence_length"
            batch = ltx.prompt_batch(run.max_sequence_length)
        elif run.max_sequence_length is not None:  # FLUX's and SD3's T5 prompt, padded to max_sequence_length
            batch["t5_input_ids"] = torch.zeros(1, run.max_sequence_length, dtype=torch.long)
    return Program(
        modules=modules,
        step=_Generate(spec=spec, run=run, scheduler=_scheduler(spec), residency=residency),
        batch=batch,
        loss=None,
        optimizer=None,
        autocast=contextlib.nullcontext,
        max_new_tokens=0,
        steps=config.steps,
    )


def _eager_attention(spec: PipelineSpec, config: SimulationConfig) -> bool:
    """``attn_implementation``: ``sdpa`` (the pipelines' default) or ``eager`` (``_eager``); the others are refused."""
    if config.attn_implementation in (None, "sdpa"):
        return False
    if config.attn_implementation != "eager":
        raise UnsupportedError(
            f"{spec.class_name}: attn_implementation={config.attn_implementation!r} is not modelled "
            "for pipelines (sdpa, their default, and eager are)"
        )
    return True


def _eager(spec: PipelineSpec, denoiser: Any, vae: Any) -> None:
    """Attention with its scores materialised, besides the text encoders' own eager attention: diffusers' classic
    ``AttnProcessor`` (``baddbmm``, softmax, ``bmm``) in place of ``AttnProcessor2_0`` (UNets, PixArt, the VAEs),
    as ``set_attn_processor(AttnProcessor())`` sets it; where the processors go through diffusers' dispatcher
    (FLUX, Wan), its ``_native_math`` backend (SDPA's math kernel), as ``set_attention_backend("_native_math")``
    sets it. Other processors (SD3's joint attention) have no eager form here: refused."""
    from diffusers.models.attention_processor import AttnProcessor

    from vramsim.workload.quiet import quiet_attention_backend

    for model in (denoiser, vae):
        processors = list(getattr(model, "attn_processors", {}).values())
        if processors and all(type(p).__name__ == "AttnProcessor2_0" for p in processors):
            model.set_attn_processor(AttnProcessor())
        elif processors and all(hasattr(p, "_attention_backend") for p in processors):
            with quiet_attention_backend():
                model.set_attention_backend("_native_math")
        elif processors or model is denoiser:
            kinds = ", ".join(sorted({type(p).__name__ for p in processors})) or "its own attention"
            raise UnsupportedError(
                f"{spec.class_name}: attn_implementation='eager' is not modelled for {type(model).__name__} "
                f"({kinds}); sdpa, the default, is"
            )
        # a model with no attention processors (Wan's VAE) keeps its attention


def _slice_attention(spec: PipelineSpec, modules: dict[str, torch.nn.Module], slicing: str) -> None:
    """``pipe.enable_attention_slicing(slice_size)``: every component with ``set_attention_slice`` (a UNet) computes
    its attention a slice of heads at a time (diffusers' ``SlicedAttnProcessor``)."""
    size: str | int = int(slicing) if slicing.isdigit() else slicing
    sliced: list[Any] = [m for m in modules.values() if hasattr(m, "set_attention_slice")]
    if not sliced:
        raise UnsupportedError(
            f"{spec.class_name} has no component that slices its attention (diffusers' "
            "set_attention_slice is a UNet's); attention_slicing applies to SD 1.5 and SDXL"
        )
    for model in sliced:
        try:
            model.set_attention_slice(size)
        except ValueError as exc:  # a size larger than a layer's heads, as diffusers checks it
            raise ConfigError(f"attention_slicing={slicing}: {first_line(exc)}") from None


def _quantize(
    spec: PipelineSpec, modules: dict[str, torch.nn.Module], config: SimulationConfig, device: str, dtype: torch.dtype
) -> None:
    """``--quantization`` on a pipeline quantizes what diffusers' docs quantize: with bitsandbytes, what its
    pipeline-level quantization and its quantization post quantize (``PipelineQuantizationConfig`` over
    ``transformer`` and ``text_encoder_2`` for FLUX): the denoiser and the T5 text encoders, each through its own
    library's quantizer; with torchao, the denoiser alone (its torchao docs load the transformer with
    ``TorchAoConfig`` and the rest as is). CLIP encoders and the VAE keep their dtype."""
    from transformers import BitsAndBytesConfig, T5EncoderModel, UMT5EncoderModel

    given = config.quantization if isinstance(config.quantization, str) else type(config.quantization).__name__
    supported = (*BITSANDBYTES_NAMES, *TORCHAO_NAMES)
    if given not in supported and not isinstance(config.quantization, BitsAndBytesConfig) and not is_torchao(config.quantization):
        raise UnsupportedError(
            f"{spec.class_name}: pipelines are quantized with bitsandbytes or torchao ({', '.join(supported)}), not {given}"
        )
    quantization = quantization_config(config.quantization, dtype)
    check_quantized_target(quantization, target=config.device, train=False, lora=False)
    encoders = () if is_torchao(quantization) else (T5EncoderModel, UMT5EncoderModel)
    for name, module in modules.items():
        if name == spec.denoiser or isinstance(module, encoders):
            quantize_model(module, quantization, device=device, target=config.device)


def pipeline_notes(program: Program) -> list[Assumption]:
    """What the pipeline run assumes, for the report."""
    assert isinstance(program.step, _Generate), "a pipeline program runs _Generate"
    spec, run = program.step.spec, program.step.run
    dtype = str(next(program.modules[spec.denoiser].parameters()).dtype).removeprefix("torch.")
    traced = program.step.steps_traced
    notes = [
        Assumption(
            name="pipeline",
            detail=f"{spec.class_name}.__call__ driven component by component (diffusers "
            f"{_diffusers_version()}): weights in {dtype}, one prompt, {run.num_images} image(s), "
            f"{run.height}x{run.width}" + ("" if spec.class_name in flux.FLUX_PIPELINES else f", guidance {run.guidance_scale}"),
        ),
        Assumption(
            name="denoising_steps_traced",
            detail=f"{traced} of {run.num_inference_steps} denoising steps "
            "traced: every step runs the same tensors (and the scheduler's history is full by then), so the "
            "rest repeat the last one's memory",
        ),
        Assumption(
            name="scheduler_on_host",
            detail="the scheduler's timesteps and sigmas are kept on the host "
            "(a few hundred bytes; the pipeline puts them on the device)",
        ),
    ]
    if spec.class_name in flux.FLUX_PIPELINES:
        notes.extend(flux.flux_notes(spec, program.step, program.modules[spec.denoiser]))
    if spec.class_name in sd3.SD3_PIPELINES:
        notes.extend(sd3.sd3_notes(program.step))
    if spec.class_name in pixart.PIXART_PIPELINES:
        notes.extend(pixart.pixart_notes(program.step, program.modules[spec.denoiser]))
    if spec.class_name in wan.WAN_PIPELINES:
        notes.extend(wan.wan_notes(program.step))
    if spec.class_name in ltx.LTX_PIPELINES:
        notes.extend(ltx.ltx_notes(program.step, program.modules["vae"]))
    if spec.has("safety_checker"):
        notes.append(Assumption(name="no_safety_checker", detail="the safety checker is not loaded (safety_checker=None)"))
    if program.step.residency is not None:
        how = {
            "model": "each component's weights are on the device only while it runs (enable_model_cpu_offload)",
            "sequential": "each module's own weights are on the device only during its forward (enable_sequential_cpu_offload)",
        }[program.step.residency.mode]
        notes.append(Assumption(name="cpu_offload", detail=f"{how}; the copies' host memory and PCIe time are not counted"))
    if _upcasts_vae(program.modules["vae"], spec):
        notes.append(
            Assumption(
                name="vae_upcast",
                detail="the VAE is cast to fp32 for the decode and back "
                "(config force_upcast, as the pipeline does for fp16 weights)",
            )
        )
    return notes


def pipeline_options(program: Program) -> dict[str, Any]:
    """The call's arguments with the pipeline's defaults filled in, for the report's ``options``; empty otherwise."""
    if not isinstance(program.step, _Generate):
        return {}
    return {key: value for key, value in asdict(program.step.run).items() if value is not None and key != "defaulted"}


def pipeline_phases(program: Program) -> dict[str, str]:
    """A pipeline program's components with the phase each runs in; empty for any other program."""
    if not isinstance(program.step, _Generate):
        return {}
    return {name: COMPONENT_PHASES[name] for name in program.modules}


def _diffusers_version() -> str:
    import diffusers

    return str(diffusers.__version__)


def _pipeline_dtype(spec: PipelineSpec, config: SimulationConfig) -> torch.dtype:
    """``--dtype``, else the text encoder's stored ``torch_dtype`` (the checkpoint's own), else fp32."""
    assert not isinstance(config.dtype, str), "SimulationConfig resolves dtype names"
    if config.dtype is not None:
        return config.dtype
    name = "text_encoder_2" if spec.has("text_encoder_2") else "text_encoder"
    stored = json.loads((spec.component(name) / "config.json").read_text()).get("torch_dtype")
    return getattr(torch, stored) if stored in ("float16", "bfloat16", "float32") else torch.float32


def _diffusers_model(spec: PipelineSpec, name: str, device: str, dtype: torch.dtype) -> Any:
    import diffusers

    library, class_name = spec.index[name]
    cls = getattr(diffusers, class_name, None)
    if library != "diffusers" or cls is None:
        raise UnsupportedError(f"{spec.class_name}'s {name} is {library}.{class_name}, which vramsim does not build")
    try:
        with torch.device(device):
            model = cls.from_config(cls.load_config(spec.component(name)))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ModelNotFoundError(f"{spec.component(name)} cannot be built as {class_name}: {first_line(exc)}") from exc
    return torch.nn.Module.to(model, dtype).eval()  # ModelMixin.to warns about modules kept in fp32; these have none


def _scheduler(spec: PipelineSpec) -> Any:
    import diffusers

    _, class_name = spec.index["scheduler"]
    cls = getattr(diffusers, class_name)
    return cls.from_config(cls.load_config(spec.component("scheduler")))


def _upcasts_vae(vae: torch.nn.Module, spec: PipelineSpec) -> bool:
    """SDXL's pipeline decodes in fp32 when the VAE is fp16 and its config says ``force_upcast``."""
    vae_config: Any = vae.config
    return (
        spec.class_name == "StableDiffusionXLPipeline"
        and next(vae.parameters()).dtype == torch.float16
        and bool(vae_config.force_upcast)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """The pipeline call's arguments, the pipeline's defaults filled in."""

    height: int
    width: int
    num_inference_steps: int
    guidance_scale: float
    num_images: int
    max_sequence_length: int | None = None
    """FLUX, SD3, PixArt: the T5 prompt's padded length; None for pipelines without it."""
    num_frames: int | None = None
    """Video pipelines (Wan, LTX): the frames generated, rounded as the pipeline rounds them; None for images."""
    defaulted: tuple[str, ...] = ()
    """The arguments not given, which took the pipeline's defaults."""


def _run(config: SimulationConfig, spec: PipelineSpec, denoiser: torch.nn.Module, vae: torch.nn.Module) -> _Run:
    """``height = height or default_sample_size * vae_scale_factor``, as the pipelines default them; any other
    argument left unset takes the default of the pipeline's ``__call__``."""
    denoiser_config: Any = denoiser.config
    vae_config: Any = vae.config
    is_flux, is_wan = spec.class_name in flux.FLUX_PIPELINES, spec.class_name in wan.WAN_PIPELINES
    is_ltx = spec.class_name in ltx.LTX_PIPELINES
    if is_wan or is_ltx:  # the video pipelines' own defaults, not a sample size's
        default_height, default_width = wan.default_size() if is_wan else ltx.default_size()
    else:
        sample_size = flux.DEFAULT_SAMPLE_SIZE if is_flux else denoiser_config.sample_size
        default_height = default_width = sample_size * 2 ** (len(vae_config.block_out_channels) - 1)
    if config.num_frames is not None and not (is_wan or is_ltx):
        raise ConfigError(f"num_frames is a video pipeline's argument; {spec.class_name} makes images")
    given = {"num_inference_steps": config.num_inference_steps, "guidance_scale": config.guidance_scale}
    called = {name: call_default(spec.class_name, name) if value is None else value for name, value in given.items()}
    is_sd3, is_pixart = spec.class_name in sd3.SD3_PIPELINES, spec.class_name in pixart.PIXART_PIPELINES
    if config.max_sequence_length is not None and not (is_flux or is_sd3 or is_pixart or is_wan or is_ltx):
        raise ConfigError(
            f"max_sequence_length pads FLUX's T5 prompt (and SD3's, PixArt's, Wan's, LTX's); {spec.class_name} has "
            "no such argument"
        )
    tokens: int | None = None
    if is_flux:
        tokens = flux.max_sequence_length(denoiser, config.max_sequence_length)
    elif is_sd3:
        tokens = sd3.max_sequence_length(config.max_sequence_length)
    elif is_pixart:
        tokens = pixart.max_sequence_length(config.max_sequence_length)
    elif is_wan or is_ltx:
        tokens = config.max_sequence_length or int(call_default(spec.class_name, "max_sequence_length"))
    return _Run(
        height=config.height or default_height,
        width=config.width or default_width,
        num_inference_steps=int(called["num_inference_steps"]),
        guidance_scale=float(called["guidance_scale"]),
        num_images=config.num_images,
        max_sequence_length=tokens,
        num_frames=wan.num_frames(config.num_frames, vae) if is_wan else ltx.num_frames(config.num_frames) if is_ltx else None,
        defaulted=tuple(
            name for name, value in {**given, "max_sequence_length": config.max_sequence_length}.items() if value is None
        ),
    )


class _Residency:
    """Which weights are on the device under CPU offload, as accelerate's hooks move them.

    ``model`` (``enable_model_cpu_offload``): a component's weights come to the device when it is
    called and leave when the next component is (the UNet stays for every step); after the call
    none is left (``maybe_free_model_hooks``). ``sequential`` (``enable_sequential_cpu_offload``):
    each module's own weights come for its forward and leave after it. Weights start on the host:
    leaving frees their device storage, coming allocates it again.
    """

    def __init__(self, *, mode: str, modules: dict[str, torch.nn.Module]) -> None:
        self.mode = mode
        self.observer: StepObserver | None = None
        self._modules = modules
        self._shapes = {id(t): t.shape for m in modules.values() for t in (*m.parameters(), *m.buffers())}
        self._current: str | None = None
        self._placeholders: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        for module in modules.values():
            self._leave(module, recurse=True)
            if mode == "sequential":
                for sub in module.modules():
                    if next(sub.parameters(recurse=False), None) is not None:
                        sub.register_forward_pre_hook(lambda m, _: self._come(m, recurse=False))
                        sub.register_forward_hook(lambda m, _, __: self._leave(m, recurse=False))

    def use(self, name: str) -> None:
        """Model offload: ``name`` is called next."""
        if self.mode != "model" or self._current == name:
            return
        if self._current is not None:
            self._leave(self._modules[self._current], recurse=True)
        self._come(self._modules[name], recurse=True)
        self._current = name

    def release(self) -> None:
        """The end of the call: every component back on the host."""
        if self._current is not None:
            self._leave(self._modules[self._current], recurse=True)
            self._current = None

    def _leave(self, module: torch.nn.Module, *, recurse: bool) -> None:
        """Free the device copies; what stays keeps the shape and holds no memory (accelerate leaves a meta tensor,
        whose shape the model may still read), here one shared element expanded."""
        for tensor in (*module.parameters(recurse=recurse), *module.buffers(recurse=recurse)):
            key = (tensor.dtype, tensor.device)
            if key not in self._placeholders:
                self._placeholders[key] = torch.empty((), dtype=tensor.dtype, device=tensor.device)
            tensor.data = self._placeholders[key].expand(self._shapes[id(tensor)])

    def _come(self, module: torch.nn.Module, *, recurse: bool) -> None:
        tensors = [*module.parameters(recurse=recurse), *module.buffers(recurse=recurse)]
        for tensor in tensors:
            tensor.data = torch.empty(self._shapes[id(tensor)], dtype=tensor.dtype, device=tensor.device)
        if self.observer is not None:
            self.observer.mark(tensors, Category.PARAMETER)


@dataclass(kw_only=True)
class _Generate:
    """One ``pipe(prompt)`` call: encode, denoise, decode, post-process on the device."""

    spec: PipelineSpec
    run: _Run
    scheduler: Any
    residency: _Residency | None = None
    """Where the weights are under ``--offload``; None: all on the device throughout."""

    def __call__(self, program: Program, observer: StepObserver) -> None:
        observer.set_phase(Phase.FORWARD)
        if self.residency is not None:
            self.residency.observer = observer
        with torch.no_grad():
            embeds = self._encode(program, observer)
            latents = self._denoise(program, observer, embeds)
            image = self._decode(program, latents)  # the prompt embeddings are __call__'s locals: alive through the decode
            observer.mark([image], Category.OUTPUT)
            del image, embeds
        if self.residency is not None:
            self.residency.release()
            self.residency.observer = None

    def use(self, name: str) -> None:
        """``name`` runs next: under model offload its weights come to the device."""
        if self.residency is not None:
            self.residency.use(name)

    @property
    def steps_traced(self) -> int:
        """The denoising steps run: enough for every step after them to be alike (assumptions.DENOISING_STEPS_TRACED)."""
        return min(self.run.num_inference_steps, DENOISING_STEPS_TRACED.get(type(self.scheduler).__name__, 2))

    @property
    def _cfg(self) -> bool:
        return self.run.guidance_scale > 1  # the pipelines' do_classifier_free_guidance

    @property
    def _family(self) -> ModuleType | None:
        """The module that runs this pipeline's own steps; None for SD and SDXL, run here."""
        return _FAMILIES.get(self.spec.class_name)

    def _encode(self, program: Program, observer: StepObserver) -> dict[str, torch.Tensor]:
        """``encode_prompt``: the embeddings, the negative ones first when guidance doubles the batch."""
        if self._family is not None:
            return self._family.encode_prompt(self, program)  # type: ignore[no-any-return]
        ids = program.batch["input_ids"]
        n = self.run.num_images
        if "text_encoder_2" not in program.modules:  # StableDiffusionPipeline: CLIP's last hidden state
            encoder = program.modules["text_encoder"]
            self.use("text_encoder")
            embeds = encoder(ids)[0].repeat(1, n, 1).view(n, ids.shape[1], -1)
            if self._cfg:  # the empty negative prompt goes through the encoder too
                negative = encoder(ids)[0].repeat(1, n, 1).view(n, ids.shape[1], -1)
                embeds = torch.cat([negative, embeds])
            return {"encoder_hidden_states": embeds}
        hidden: list[torch.Tensor] = []
        pooled: torch.Tensor | None = None
        for name in ("text_encoder", "text_encoder_2"):
            self.use(name)
            out = program.modules[name](ids, output_hidden_states=True)
            if pooled is None and out[0].ndim == 2:
                pooled = out[0]
            hidden.append(out.hidden_states[-2])
            del out
        assert pooled is not None, "CLIPTextModelWithProjection returns the pooled projection first"
        embeds = torch.concat(hidden, dim=-1)
        del hidden
        embeds = embeds.repeat(1, n, 1).view(n, embeds.shape[1], -1)
        pooled = pooled.repeat(1, n).view(n, -1)
        time_ids = torch.tensor(
            [[self.run.height, self.run.width, 0, 0, self.run.height, self.run.width]], dtype=embeds.dtype
        ).to(embeds.device)
        if self._cfg:  # force_zeros_for_empty_prompt: the negative embeddings are zeros, no encoder run
            embeds = torch.cat([torch.zeros_like(embeds), embeds])
            pooled = torch.cat([torch.zeros_like(pooled), pooled])
            time_ids = torch.cat([time_ids, time_ids])
        return {"encoder_hidden_states": embeds, "text_embeds": pooled, "time_ids": time_ids.repeat(n, 1)}

    def _denoise(self, program: Program, observer: StepObserver, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
        if self._family is not None:
            return self._family.denoise(self, program, embeds)  # type: ignore[no-any-return]
        unet: Any = program.modules["unet"]
        vae_config: Any = program.modules["vae"].config
        scale = 2 ** (len(vae_config.block_out_channels) - 1)
        hidden = embeds["encoder_hidden_states"]
        self.scheduler.set_timesteps(self.run.num_inference_steps, device="cpu")
        if hasattr(self.scheduler, "set_begin_index"):
            self.scheduler.set_begin_index(0)
        shape = (self.run.num_images, unet.config.in_channels, self.run.height // scale, self.run.width // scale)
        latents = torch.randn(shape, device=hidden.device, dtype=hidden.dtype) * self.scheduler.init_noise_sigma
        added = {k: embeds[k] for k in ("text_embeds", "time_ids") if k in embeds} or None
        self.use("unet")
        for t in self.scheduler.timesteps[: self.steps_traced]:
            model_input = torch.cat([latents] * 2) if self._cfg else latents
            model_input = self.scheduler.scale_model_input(model_input, t)
            noise = unet(model_input, t, encoder_hidden_states=hidden, added_cond_kwargs=added, return_dict=False)[0]
            del model_input
            if self._cfg:
                uncond, text = noise.chunk(2)
                noise = uncond + self.run.guidance_scale * (text - uncond)
                del uncond, text
            latents = self.scheduler.step(noise, t, latents, return_dict=False)[0]
            del noise
        return latents

    def _decode(self, program: Program, latents: torch.Tensor) -> torch.Tensor:
        """``vae.decode(latents / scaling_factor)``, in fp32 where the pipeline upcasts, then ``postprocess``'s
        device part (denormalize; the copy to the host follows)."""
        from diffusers.image_processor import VaeImageProcessor

        if self._family is not None:
            return self._family.decode(self, program, latents)  # type: ignore[no-any-return]
        vae: Any = program.modules["vae"]
        self.use("vae")
        upcast = _upcasts_vae(vae, self.spec)
        if upcast:  # vae.to(dtype=...) as the pipeline calls it, without ModelMixin.to's warning
            torch.nn.Module.to(vae, dtype=torch.float32)
            latents = latents.to(torch.float32)
        image = vae.decode(latents / vae.config.scaling_factor, return_dict=False)[0]
        del latents
        if upcast:
            torch.nn.Module.to(vae, dtype=torch.float16)
        return VaeImageProcessor().postprocess(image, output_type="pt")
