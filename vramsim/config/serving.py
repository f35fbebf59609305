"""The options of one serving budget (``vramsim serve``), checked once."""

from __future__ import annotations

import json
from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal

from vramsim.config.options import Option
from vramsim.config.workload import MAX_SEQ_LEN
from vramsim.errors import ConfigError
from vramsim.estimators.serving import KV_CACHE_DTYPE_BYTES

__all__ = [
    "DEFAULT_VLLM_VERSION",
    "ENGINES",
    "LORA_RANKS",
    "VLLM_QUANTIZATION_NAMES",
    "ServeConfig",
    "SpeculativeSettings",
    "parse_mm_limits",
    "parse_mm_processor_kwargs",
    "parse_speculative_config",
    "serve_options",
]

ENGINES = ("vllm", "sglang")
QUANTIZATIONS = ("fp8", "gptq", "awq", "nf4-dq", "mxfp4")
"""vLLM ``--quantization`` methods modelled: FP8 weights quantized at load (one scale per tensor),
GPTQ and AWQ checkpoints (4 bits, groups of 128) on the Marlin kernel, and vLLM's ``bitsandbytes``: in-flight
NF4 with double-quantized scales, named as ``trace --quantization`` names that format; MXFP4 experts (gpt-oss's
checkpoints, read from their ``quantization_config``)."""
VLLM_QUANTIZATION_NAMES = {"nf4-dq": "bitsandbytes"}
"""vLLM's own ``--quantization`` name where it differs; taken from Python too (the command line warns of it)."""
MAX_GPUS = 1024
DEFAULT_VLLM_VERSION = "0.21"
"""The vLLM release a budget follows when none is named: the newest line ``vramsim/serving/versions.py`` knows."""


LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""vLLM's ``max_lora_rank`` choices (``MaxLoRARanks`` in ``vllm/config/lora.py``)."""
DEFAULT_LORA_RANK = 16
"""vLLM's ``max_lora_rank`` default."""
DEFAULT_MAX_LORAS = 1
"""vLLM's ``max_loras`` default."""
SPECULATIVE_METHODS = ("ngram", "draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "mtp", "suffix")
"""vLLM's ``SpeculativeConfig.method`` names; ``speculative.py`` says which are modelled."""
SPECULATIVE_KEYS = (
    "method",
    "model",
    "num_speculative_tokens",
    "draft_tensor_parallel_size",
    "prompt_lookup_max",
    "prompt_lookup_min",
)
"""The ``--speculative-config`` keys read; the n-gram window's two move no device memory."""


@dataclass(frozen=True, slots=True)
class SpeculativeSettings:
    """``--speculative-config`` as vLLM reads it: the method (inferred from the draft model where it is not named,
    as ``SpeculativeConfig.__post_init__`` does), the draft model and the tokens proposed per step."""

    method: str
    model: str | None
    num_speculative_tokens: int
    draft_tensor_parallel_size: int | None


def _option(**option: Any) -> dict[str, Option]:
    return {"option": Option(commands=("serve",), **option)}


def serve_options() -> list[tuple[Field[Any], Option]]:
    """Every ``ServeConfig`` field with its ``Option``, in declaration order."""
    return [(f, f.metadata["option"]) for f in fields(ServeConfig)]


def _same(value: Any) -> Any:
    return value


@dataclass(kw_only=True)
class ServeConfig:
    """A serving deployment to budget; ``None`` where the engine's own default applies."""

    device: str = field(default="h100", metadata=_option(help="GPU (vramsim gpus)", report=_same))
    gpus: int | None = field(
        default=None, metadata=_option(help="GPUs in the deployment (default: --tp x --pp)", parse=int, report=_same)
    )
    tp: int | None = field(
        default=None, metadata=_option(help="tensor-parallel size (default: --gpus / --pp, else 1)", parse=int, report=_same)
    )
    pp: int = field(
        default=1,
        metadata=_option(
            help="pipeline-parallel size: the decoder layers split over stages as vLLM splits them; every stage gets the "
            "fewest KV blocks any stage's memory allows",
            parse=int,
            report=_same,
        ),
    )
    max_model_len: int | None = field(
        default=None,
        metadata=_option(
            help="tokens per request, prompt + output (default: the model's, as the engine derives it from the config)",
            parse=int,
            report=_same,
        ),
    )
    allow_long_max_model_len: bool = field(
        default=False,
        metadata=_option(
            help="accept --max-model-len past the model's positions, as VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
            "(SGLang: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1) does"
        ),
    )
    gpu_memory_utilization: float | None = field(
        default=None,
        metadata=_option(
            help="vLLM gpu_memory_utilization / SGLang mem_fraction_static (default: the engine's)", parse=float, report=_same
        ),
    )
    max_num_batched_tokens: int | None = field(
        default=None,
        metadata=_option(help="tokens of the profile forward (default: vLLM's for the GPU)", parse=int, report=_same),
    )
    max_num_seqs: int | None = field(
        default=None,
        metadata=_option(
            help="requests per step; the profile forward keeps logits for this many (default: vLLM's)", parse=int, report=_same
        ),
    )
    kv_cache_dtype: str = field(
        default="auto", metadata=_option(help=f"auto (the model's dtype) or {', '.join(KV_CACHE_DTYPE_BYTES)}", report=_same)
    )
    enforce_eager: bool = field(default=False, metadata=_option(help="no CUDA graphs (nothing kept for their pool)"))
    vllm_version: str = field(
        default=DEFAULT_VLLM_VERSION,
        metadata=_option(
            help="the vLLM release whose profile run is modelled (0.8 on: its sampler warm-up, CUDA graph accounting)",
            report=_same,
        ),
    )
    attention_backend: str | None = field(
        default=None,
        metadata=_option(
            help="vLLM's --attention-backend: FLASH_ATTN, FLASHINFER or TRITON_ATTN (default: the one vLLM selects)",
            report=_same,
        ),
    )
    limit_mm_per_prompt: str | None = field(
        default=None,
        metadata=_option(
            help="vLLM's --limit-mm-per-prompt: items per prompt per modality, '{\"image\": 2}' or image=2,video=0 "
            "(default 999 each); 0 for every modality serves the model as text only (no encoder profile, no tower)",
            report=_same,
        ),
    )
    mm_processor_kwargs: str | None = field(
        default=None,
        metadata=_option(
            help="vLLM's --mm-processor-kwargs: a JSON object for the model's processor, '{\"max_pixels\": 1003520}' "
            "(Qwen2-VL, Qwen2.5-VL: min_pixels, max_pixels; Gemma 3: do_pan_and_scan, pan_and_scan_min_crop_size, "
            "pan_and_scan_max_num_crops, pan_and_scan_min_ratio_to_activate); it sizes the encoder's dummy images",
            report=_same,
        ),
    )
    enable_lora: bool = field(
        default=False,
        metadata=_option(
            help="vLLM's --enable-lora: LoRA weight slots for --max-loras adapters of --max-lora-rank in every linear "
            "layer (and the embeddings where the model's vLLM class takes them), allocated at start-up"
        ),
    )
    max_loras: int | None = field(
        default=None,
        metadata=_option(help="adapters served in one batch: vLLM's GPU slots (default 1)", parse=int, report=_same),
    )
    max_lora_rank: int | None = field(
        default=None,
        metadata=_option(
            help=f"the rank each slot holds: one of {', '.join(map(str, LORA_RANKS))} (default {DEFAULT_LORA_RANK})",
            parse=int,
            report=_same,
        ),
    )
    max_cpu_loras: int | None = field(
        default=None,
        metadata=_option(
            help="adapters cached in host memory (default --max-loras; at least that): no device memory",
            parse=int,
            report=_same,
        ),
    )
    speculative_config: str | None = field(
        default=None,
        metadata=_option(
            help='vLLM\'s --speculative-config, a JSON object: \'{"method": "ngram", "num_speculative_tokens": 3}\' or '
            '\'{"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 4}\' (a draft model, vLLM 0.15 on)',
            report=_same,
        ),
    )
    no_enable_prefix_caching: bool = field(
        default=False,
        metadata=_option(help="vLLM's --no-enable-prefix-caching (V1 caches prefixes by default): no block is shared"),
    )
    shared_prefix_len: int | None = field(
        default=None,
        metadata=_option(
            help="tokens every request starts with (a system prompt): with prefix caching their full blocks are held "
            "once, and the concurrency line counts each request's own blocks",
            parse=int,
            report=_same,
        ),
    )
    engine: Literal["vllm", "sglang"] = field(default="vllm", metadata=_option(help="vllm or sglang", report=_same))
    concurrency: int | None = field(
        default=None,
        metadata=_option(
            help="the inverse question: the fewest GPUs (tensor parallel) serving this many requests of --max-model-len",
            parse=int,
            report=_same,
        ),
    )
    dtype: str | None = field(
        default=None, metadata=_option(help="weight dtype: bf16, fp16, fp32 (default: the config's torch_dtype)", report=_same)
    )
    quantization: str | None = field(
        default=None,
        metadata=_option(
            help="fp8 (vLLM's: linear weights in FP8), gptq / awq (4-bit checkpoints on the Marlin kernel), nf4-dq "
            "(vLLM's bitsandbytes: NF4 quantized in flight, double-quantized scales), mxfp4 (gpt-oss's experts; the "
            "default for an MXFP4 checkpoint)",
            report=_same,
        ),
    )

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}; choose one of: {', '.join(ENGINES)}")
        for name in ("gpus", "tp", "pp", "max_num_batched_tokens", "max_num_seqs", "concurrency"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 1 <= value <= (MAX_GPUS if name in ("gpus", "tp", "pp") else MAX_SEQ_LEN)
            ):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        length = self.max_model_len
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_SEQ_LEN):
            raise ConfigError(f"max_model_len must be between 1 and {MAX_SEQ_LEN}, got {self.max_model_len!r}")
        utilization = self.gpu_memory_utilization
        if utilization is not None and (
            isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1
        ):
            raise ConfigError(f"gpu_memory_utilization must be a fraction in (0, 1], got {utilization!r}")
        self.kv_cache_dtype = self.kv_cache_dtype.lower()
        if self.kv_cache_dtype != "auto" and self.kv_cache_dtype not in KV_CACHE_DTYPE_BYTES:
            raise ConfigError(
                f"unknown kv_cache_dtype {self.kv_cache_dtype!r}; choose one of: auto, {', '.join(KV_CACHE_DTYPE_BYTES)}"
            )
        if self.quantization is not None:
            self.quantization = self.quantization.lower()
            vllm = {name: ours for ours, name in VLLM_QUANTIZATION_NAMES.items()}
            self.quantization = vllm.get(self.quantization, self.quantization)
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise ConfigError(
                f"quantization {self.quantization!r} is not one vLLM serves as modelled here; choose one of: "
                f"{', '.join(QUANTIZATIONS)}"
            )
        self._check_lora()
        parse_speculative_config(self.speculative_config)
        prefix = self.shared_prefix_len
        if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int) or not 0 <= prefix <= MAX_SEQ_LEN):
            raise ConfigError(f"shared_prefix_len must be a count of tokens (0 or more), got {prefix!r}")
        if prefix and self.no_enable_prefix_caching:
            raise ConfigError(
                "shared_prefix_len needs prefix caching: without it no block is shared (drop --no-enable-prefix-caching)"
            )
        parse_mm_limits(self.limit_mm_per_prompt)
        parse_mm_processor_kwargs(self.mm_processor_kwargs)
        if self.gpus is not None and self.tp is not None and self.gpus % (self.tp * self.pp):
            times = f" x pp={self.pp}" if self.pp > 1 else ""
            raise ConfigError(f"gpus={self.gpus} is not a multiple of tp={self.tp}{times}")
        if self.tp is None:
            self.tp = (self.gpus or self.pp) // self.pp
            if self.tp * self.pp != (self.gpus or self.pp):
                raise ConfigError(f"gpus={self.gpus} is not a multiple of pp={self.pp}")
        if self.gpus is None:
            self.gpus = self.tp * self.pp
        if self.concurrency is not None and (self.gpus != self.tp or self.tp != 1 or self.pp != 1):
            raise ConfigError("concurrency searches the GPU count itself; leave gpus, tp and pp out")

    def _check_lora(self) -> None:
        """``--max-loras``, ``--max-lora-rank`` and ``--max-cpu-loras`` as vLLM's ``LoRAConfig`` checks them; each needs
        ``--enable-lora`` (vLLM ignores them without it: refused here rather than budgeted without adapters)."""
        given = [name for name in ("max_loras", "max_lora_rank", "max_cpu_loras") if getattr(self, name) is not None]
        if given and not self.enable_lora:
            raise ConfigError(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} enable_lora")
        for name in given:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.max_lora_rank is not None and self.max_lora_rank not in LORA_RANKS:
            raise ConfigError(
                f"max_lora_rank {self.max_lora_rank} is not one vLLM takes; choose one of: {', '.join(map(str, LORA_RANKS))}"
            )
        loras = self.max_loras or DEFAULT_MAX_LORAS
        if self.max_cpu_loras is not None and self.max_cpu_loras < loras:
            raise ConfigError(f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({loras}), as vLLM requires")


def parse_speculative_config(text: str | None) -> SpeculativeSettings | None:
    """``--speculative-config``'s JSON object, checked as vLLM checks it: ``num_speculative_tokens`` a positive
    count, a known ``method``, and a ``model`` where the method needs one; with a model and no method, vLLM takes
    ``eagle`` for a name holding "eagle-" and a draft model otherwise (``draft_model``)."""
    if text is None:
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict):
        raise ConfigError(
            f'speculative_config {text!r} is not a JSON object such as \'{{"method": "ngram", "num_speculative_tokens": 3}}\''
        )
    unknown = sorted(set(raw) - set(SPECULATIVE_KEYS))
    if unknown:
        raise ConfigError(
            f"speculative_config: {', '.join(unknown)} not modelled; the keys read are {', '.join(SPECULATIVE_KEYS)}"
        )
    tokens = raw.get("num_speculative_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ConfigError(f"speculative_config: num_speculative_tokens must be a positive integer, got {tokens!r}")
    model = raw.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"speculative_config: model must be a model id, got {model!r}")
    method = raw.get("method") or (None if model is None else "eagle" if "eagle-" in model.lower() else "draft_model")
    if method is None:
        raise ConfigError('speculative_config names neither a method nor a draft model: add "method": "ngram" or "model": ID')
    if method not in SPECULATIVE_METHODS:
        raise ConfigError(f"speculative_config: unknown method {method!r}; vLLM's are {', '.join(SPECULATIVE_METHODS)}")
    if method == "draft_model" and model is None:
        raise ConfigError('speculative_config: method "draft_model" needs "model": the draft model\'s id')
    draft_tp = raw.get("draft_tensor_parallel_size")
    if draft_tp is not None and (isinstance(draft_tp, bool) or not isinstance(draft_tp, int) or draft_tp < 1):
        raise ConfigError(f"speculative_config: draft_tensor_parallel_size must be a positive integer, got {draft_tp!r}")
    return SpeculativeSettings(method=method, model=model, num_speculative_tokens=tokens, draft_tensor_parallel_size=draft_tp)


def parse_mm_limits(text: str | None) -> dict[str, int]:
    """``--limit-mm-per-prompt`` as vLLM takes it: a JSON object of counts (``{"image": 2}``) or the older
    ``image=2,video=0`` form; each count a non-negative integer."""
    if text is None:
        return {}
    raw: Any
    try:
        raw = json.loads(text) if text.strip().startswith("{") else dict(item.split("=", 1) for item in text.split(","))
    except (ValueError, json.JSONDecodeError):
        raw = None
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"limit_mm_per_prompt {text!r} is not '{{\"image\": N}}' or image=N[,video=M]")
    limits = {}
    for modality, count in raw.items():
        value = count.get("count") if isinstance(count, dict) else count
        try:
            number = int(str(value).strip())
        except ValueError:
            number = -1
        if isinstance(value, bool) or number < 0:
            raise ConfigError(f"limit_mm_per_prompt: {modality}={value!r} is not a count of items (0 or more)")
        limits[str(modality).strip()] = number
    return limits


def parse_mm_processor_kwargs(text: str | None) -> dict[str, Any]:
    """``--mm-processor-kwargs`` as vLLM takes it: a JSON object of the processor's keyword arguments (which keys a model
    takes is the model's to say)."""
    if text is None:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict):
        raise ConfigError(f"mm_processor_kwargs {text!r} is not a JSON object such as '{{\"max_pixels\": 1003520}}'")
    return raw
