"""The batch a model is fed: synthesised from its config, or supplied by the user (``inputs=``).

Every modality transformers ships is synthesised from the model's config and its processor's
defaults, keyed by ``model.main_input_name`` and the arguments ``forward`` accepts:

- **text** (``input_ids``, also Perceiver's ``inputs``): ``batch x seq_len`` token ids;
- **encoder-decoder** (``forward`` takes ``decoder_input_ids``): decoder ids of ``seq_len``
  (capped at the decoder's ``max_target_positions``) beside the encoder input;
- **vision** (``pixel_values``): ``batch x num_channels x image_size x image_size`` from the
  config (or its ``vision_config``);
- **audio** (``input_features`` / ``input_values``): what the model's feature extractor, built
  with its defaults, makes of ``seq_len`` frames of silence (``num_mel_bins``, the fixed 30 s
  window of Whisper-like encoders, ``max_source_positions``...), or, without one, the shape
  the config implies;
- **multimodal** (image + text): models that prepend the image to the text (GIT: ``forward``
  takes ``pixel_values``, the config has a ``vision_config`` and no image placeholder token)
  get an image and the text; models that splice image features into placeholder tokens are
  fed their text (the image part is optional there), and ``inputs=`` adds it.

NaFlex vision encoders (SigLIP 2) get pre-cut patches with their mask and grid, MusicGen
decoders ``batch * num_codebooks`` code rows. When training, ``use_cache=False`` is passed where
``forward`` takes it (a training step reads no KV cache; fine-tuning scripts turn it off), and
``labels`` follow the head: the token ids for causal and masked LMs (they shift or mask
internally), decoder ids for seq2seq, class indices for classifiers, CTC targets of
``seq_len // 2`` tokens for speech recognition. Token values are random (seed 0) and avoid
the config's special tokens; on the meta device they are recorded
(``vramsim.tracer.data_dependent.seed``) so a program that reads them gets these values.
Pass ``inputs=lambda batch_size, seq_len: {...}`` to feed anything else.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from vramsim.tracer.data_dependent import seed

from .errors import UnsupportedError

__all__ = ["default_inputs"]

AUDIO_HOP = 320
"""Waveform samples per encoder frame when a model names none (wav2vec2's conv strides: 5*2**6)."""


def default_inputs(model: torch.nn.Module, batch_size: int, seq_len: int, *, train: bool) -> dict[str, Any]:
    """Keyword arguments of ``model.forward`` for one batch, on the current default device.

    The values never matter to memory, only shapes and dtypes do, except where the program
    reads them (see the module docstring). A peft wrapper is fed what its base model takes.
    """
    get_base_model = getattr(model, "get_base_model", None)
    model = get_base_model() if callable(get_base_model) else model
    config = getattr(model, "config", None)
    main_input = getattr(model, "main_input_name", "input_ids")
    if config is None:
        raise UnsupportedError(
            f"{type(model).__name__} has no Hugging Face config, so its inputs cannot be synthesised; "
            "pass inputs=lambda batch_size, seq_len: {...}"
        )
    maker = _Maker(model, config, batch_size, seq_len, train=train)
    name = type(model).__name__
    if main_input == "inputs" and "ForImageClassification" in name:  # Perceiver
        batch = {"inputs": maker.pixels()}
        return {**batch, "labels": maker.class_labels()} if train and "labels" in maker.params else batch
    if main_input == "inputs" and name.startswith("Speech"):  # SpeechEncoderDecoderModel: raw audio
        return maker.audio("inputs")
    if main_input in ("input_ids", "inputs"):
        return maker.text(main_input)
    if main_input == "pixel_values":
        return maker.vision()
    if main_input in ("input_features", "input_values"):
        return maker.audio(main_input)
    raise UnsupportedError(
        f"inputs for {type(model).__name__} (main input {main_input!r}) are not synthesised yet; "
        "pass inputs=lambda batch_size, seq_len: {...}"
    )


class _Maker:
    def __init__(self, model: torch.nn.Module, config: Any, batch_size: int, seq_len: int, *, train: bool) -> None:
        self.model = model
        self.config = config
        self.batch = batch_size
        self.seq = seq_len
        self.train = train
        self.device = torch.empty(0).device
        signature = inspect.signature(model.forward).parameters
        self.params = set(signature)
        self.takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.values())
        self.text_config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        self._generator = torch.Generator().manual_seed(0)

    # -- modalities --------------------------------------------------------------------------

    def text(self, main_input: str) -> dict[str, Any]:
        codebooks = getattr(self.text_config, "num_codebooks", None)
        if type(self.model).__name__.startswith("Musicgen") and isinstance(codebooks, int):
            return self.audio_codes(main_input, codebooks)
        ids = self.token_ids(self.seq)
        batch: dict[str, Any] = {main_input: ids[0]}
        decoder = self.decoder_ids()
        if decoder is not None:
            batch["decoder_input_ids"] = decoder[0]
        if self._prepends_image():
            batch["pixel_values"] = self.pixels()
        if "lang_ids" in self.params and getattr(self.config, "languages", None):
            batch["lang_ids"] = seed(torch.zeros(self.batch, dtype=torch.long, device="cpu"), self.device)  # X-MOD: first language
        if self.train and "labels" in self.params:
            batch["labels"] = self.labels(ids[1], decoder[1] if decoder is not None else None)
            if main_input == "inputs":  # Perceiver's decoder predicts max_position_embeddings positions
                length = int(getattr(self.config, "max_position_embeddings", 0) or self.seq)
                batch["labels"] = seed(self._ids(length), self.device)
        return self.no_cache(batch)

    def _prepends_image(self) -> bool:
        """Image + text models that prepend the image to the text (GIT) need no placeholder
        tokens, and some train only with an image; models with placeholders are fed text."""
        if "pixel_values" not in self.params or getattr(self.config, "vision_config", None) is None:
            return False
        return not _special_tokens_named(self.config, ("image_token", "img_token", "image_token_index"))

    def no_cache(self, batch: dict[str, Any]) -> dict[str, Any]:
        """A training step reads no KV cache, so none is built (``use_cache=False``)."""
        if self.train and ("use_cache" in self.params or (self.takes_kwargs and getattr(self.config, "use_cache", False) is True)):
            batch["use_cache"] = False
        return batch

    def audio_codes(self, main_input: str, codebooks: int) -> dict[str, Any]:
        """MusicGen decoders: ``(batch * num_codebooks) x seq_len`` codes, labels ``batch x seq_len x num_codebooks``."""
        values = self._ids(self.seq, rows=self.batch * codebooks)
        batch: dict[str, Any] = {main_input: seed(values, self.device)}
        if self.train and "labels" in self.params:
            labels = values.reshape(self.batch, codebooks, self.seq).transpose(1, 2).contiguous()
            batch["labels"] = seed(labels, self.device)
        return self.no_cache(batch)

    def vision(self) -> dict[str, Any]:
        if "spatial_shapes" in self.params:
            return self.patches()
        batch: dict[str, Any] = {"pixel_values": self.pixels()}
        if self.train and "labels" in self.params:
            batch["labels"] = self.class_labels()
        return batch

    def patches(self) -> dict[str, Any]:
        """NaFlex vision encoders (SigLIP 2): pre-cut patches, their mask and grid, as the processor makes them."""
        config = getattr(self.config, "vision_config", None) or self.config
        count = int(getattr(config, "num_patches", 256) or 256)
        side = max(int(count**0.5), 1)
        patch = _as_pair(getattr(config, "patch_size", 16))
        channels = int(getattr(config, "num_channels", 3) or 3)
        batch: dict[str, Any] = {"pixel_values": torch.randn(self.batch, side * side, channels * patch[0] * patch[1])}
        if "pixel_attention_mask" in self.params:
            batch["pixel_attention_mask"] = seed(torch.ones(self.batch, side * side, dtype=torch.long, device="cpu"), self.device)
        batch["spatial_shapes"] = seed(torch.tensor([[side, side]] * self.batch, dtype=torch.long, device="cpu"), self.device)
        if self.train and "labels" in self.params:
            batch["labels"] = self.class_labels()
        return batch

    def audio(self, main_input: str) -> dict[str, Any]:
        features, extra = self.audio_features(main_input)
        batch: dict[str, Any] = {main_input: features, **extra}
        if main_input == "input_features" and "attention_mask" in self.params and not extra:
            frames = features.shape[-1] if features.shape[1] == _mel_bins(self.config) else features.shape[1]
            batch["attention_mask"] = seed(torch.ones(self.batch, frames, dtype=torch.long, device="cpu"), self.device)
        decoder = self.decoder_ids()
        if decoder is not None:
            batch["decoder_input_ids"] = decoder[0]
        if self.train and "labels" in self.params:
            name = type(self.model).__name__
            if decoder is not None:
                batch["labels"] = seed(decoder[1].clone(), self.device)
            elif name.endswith("ForCTC"):
                batch["labels"] = seed(self._ids(max(1, self.seq // 2), low=1), self.device)
            else:
                batch["labels"] = self.class_labels()
        return self.no_cache(batch)

    # -- pieces ------------------------------------------------------------------------------

    def token_ids(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids on the device, their values on the CPU)."""
        values = self._ids(length)
        return seed(values, self.device), values

    def decoder_ids(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        if "decoder_input_ids" not in self.params:
            return None
        decoder = getattr(self.config, "decoder", None)
        source = decoder if decoder is not None and hasattr(decoder, "vocab_size") else self.text_config
        limit = getattr(source, "max_target_positions", None) or getattr(self.config, "max_target_positions", None)
        length = min(self.seq, int(limit)) if isinstance(limit, int) and limit > 0 else self.seq
        values = self._ids(length, config=source)
        return seed(values, self.device), values

    def labels(self, ids: torch.Tensor, decoder: torch.Tensor | None) -> torch.Tensor:
        name = type(self.model).__name__
        if name.endswith(("ForSequenceClassification", "ForImageClassification", "ForAudioClassification")):
            return self.class_labels()
        if name.endswith("ForTokenClassification"):
            return seed(torch.randint(0, self._num_labels(), ids.shape, generator=self._generator, device="cpu"), self.device)
        return seed((decoder if decoder is not None else ids).clone(), self.device)

    def class_labels(self) -> torch.Tensor:
        return seed(torch.randint(0, self._num_labels(), (self.batch,), generator=self._generator, device="cpu"), self.device)

    def pixels(self) -> torch.Tensor:
        config = getattr(self.config, "vision_config", None) or self.config
        size = _as_pair(_first(config, self.config, names=("image_size", "img_size", "input_size"), default=224))
        channels = int(_first(config, self.config, names=("num_channels", "in_channels", "in_chans"), default=3))
        return torch.randn(self.batch, channels, *size)

    def audio_features(self, main_input: str) -> tuple[torch.Tensor, dict[str, Any]]:
        """The feature extractor's output for ``seq_len`` frames of silence (the main input and the
        masks it returns by default that ``forward`` takes), else the shape the config implies."""
        extractor = _feature_extractor(self.config)
        # raw-audio encoders subsample by their conv strides; spectrogram ones by the extractor's hop
        strided = isinstance(getattr(self.config, "conv_stride", None), (list, tuple))
        hop = _conv_hop(self.config) if strided else int(getattr(extractor, "hop_length", 0) or AUDIO_HOP)
        if extractor is not None:
            rate = int(getattr(extractor, "sampling_rate", 16_000) or 16_000)
            try:
                with torch.device("cpu"):
                    made = extractor([_silence(self.seq * hop)] * self.batch, sampling_rate=rate, return_tensors="pt")
                value = made.get(main_input)
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() >= 2:
                    extra = {
                        key: seed(mask, self.device)
                        for key, mask in made.items()
                        if key != main_input and key in self.params and isinstance(mask, torch.Tensor) and not mask.is_floating_point()
                    }
                    return value.to(self.device), extra
            except Exception:  # noqa: BLE001 - an extractor that needs more than defaults: use the config
                pass
        if main_input in ("input_values", "inputs"):
            return torch.randn(self.batch, self.seq * hop), {}
        bins = _mel_bins(self.config)
        channels = int(getattr(self.config, "input_channels", 1) or 1)
        source = getattr(self.config, "max_source_positions", None)
        if "whisper" in getattr(self.config, "model_type", "") and source:
            return torch.randn(self.batch, int(bins), 2 * int(source)), {}
        return torch.randn(self.batch, self.seq, int(bins) * channels), {}

    # -- helpers -----------------------------------------------------------------------------

    def _ids(self, length: int, *, config: Any = None, low: int = 0, rows: int | None = None) -> torch.Tensor:
        config = config or self.text_config
        vocab = max(int(getattr(config, "vocab_size", 0) or getattr(self.config, "vocab_size", 0) or 2), 2)
        special = _special_tokens(self.config, config)
        values = torch.randint(low, vocab, (rows or self.batch, length), generator=self._generator, device="cpu")
        ordinary = [i for i in range(low, min(vocab, low + len(special) + 2)) if i not in special]
        if special and ordinary:
            hit = torch.isin(values, torch.tensor(sorted(special), device="cpu"))
            values[hit] = ordinary[0]
        return values

    def _num_labels(self) -> int:
        return max(int(getattr(self.config, "num_labels", 2) or 2), 1)


def _special_tokens(*configs: Any) -> set[int]:
    out: set[int] = set()
    for config in configs:
        if config is None:
            continue
        for key, value in vars(config).items():
            if key.endswith(("_token_id", "_token_index", "_token_ids")):
                for item in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                        out.add(item)
    return out


def _special_tokens_named(config: Any, prefixes: tuple[str, ...]) -> bool:
    sources = [config, getattr(config, "text_config", None)]
    return any(
        key.startswith(prefixes) for source in sources if source is not None for key, value in vars(source).items() if value is not None
    )


def _first(config: Any, fallback: Any, *, names: tuple[str, ...], default: Any) -> Any:
    for source in (config, fallback):
        for name in names:
            value = getattr(source, name, None) if source is not None else None
            if value:
                return value
    return default


def _mel_bins(config: Any, default: Any = 80) -> Any:
    """Feature bins the audio encoder expects: in the config or its encoder / audio sub-config."""
    names = ("feature_projection_input_dim", "num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels", "input_dim")
    for source in (config, getattr(config, "encoder_config", None), getattr(config, "audio_config", None), getattr(config, "encoder", None)):
        if source is not None:
            for name in names:
                value = getattr(source, name, None)
                if isinstance(value, int) and value > 0:
                    return value
    return default


def _conv_hop(config: Any) -> int:
    strides = getattr(config, "conv_stride", None)
    if isinstance(strides, (list, tuple)) and strides and all(isinstance(s, int) for s in strides):
        hop = 1
        for stride in strides:
            hop *= stride
        return hop
    return AUDIO_HOP


def _feature_extractor(config: Any) -> Any:
    """The model type's feature extractor with its defaults (processor defaults), if it has one."""
    try:
        from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES
        import transformers

        name = FEATURE_EXTRACTOR_MAPPING_NAMES.get(getattr(config, "model_type", ""))
        cls = getattr(transformers, name, None) if name else None
        if cls is None:
            return None
        kwargs: dict[str, Any] = {}
        bins = _mel_bins(config, default=None)
        accepted = inspect.signature(cls.__init__).parameters
        if bins and "feature_size" in accepted:
            kwargs["feature_size"] = bins
        return cls(**kwargs)
    except Exception:  # noqa: BLE001 - optional dependencies (torchaudio, librosa) may be missing
        return None


def _silence(samples: int) -> Any:
    import numpy as np

    return np.zeros(max(samples, 1), dtype=np.float32)


def _as_pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[-1])
    return int(value), int(value)
