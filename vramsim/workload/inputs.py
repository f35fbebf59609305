"""The batch a model is fed: synthesised from its config, or supplied by the user (``inputs=``).

Every modality transformers ships is synthesised from the model's config and its processor's
defaults, keyed by ``model.main_input_name`` and the arguments ``forward`` accepts:

- **text** (``input_ids``, also Perceiver's ``inputs``): ``batch x seq_len`` token ids;
- **encoder-decoder** (``forward`` takes ``decoder_input_ids``): decoder ids of ``seq_len``
  (capped at the decoder's ``max_target_positions``) beside the encoder input; a decoder of
  audio codes in channels with a ``delay_pattern`` (Dia) gets ``batch x steps x num_channels``
  codes as its processor lays out ``seq_len`` frames (bos, eos, the channels' delays), and
  labels a row per channel;
- **vision** (``pixel_values``): ``batch x num_channels x image_size x image_size`` from the
  config (or its ``vision_config``);
- **audio** (``input_features`` / ``input_values``): what the model's feature extractor, built
  with its defaults, makes of ``seq_len`` frames of silence (``num_mel_bins``, the fixed 30 s
  window of Whisper-like encoders, ``max_source_positions``...), or, where it cannot run (its
  backend missing), the shape the config and the extractor's stated frame layout imply
  (Granite Speech 5 stacks 2 mel frames, each with its deltas: ``seq_len / 2`` frames of
  ``4 * num_mel_bins``);
- **audio + text**: models that add audio to text position by position (Voxtral Realtime,
  ``audio_length_per_tok`` in the config) get ``seq_len`` tokens and the features of
  ``audio_length_per_tok`` frames per token; speech-to-text models whose frames carry a text
  token and a codec's codes (Kyutai: ``num_codebooks`` and ``codebook_vocab_size``) get
  ``batch x seq_len x (1 + num_codebooks)`` ids, labelled by the text;
- **multimodal** (image + text): models that prepend the image to the text (GIT: ``forward``
  takes ``pixel_values``, the config has a ``vision_config`` and no image placeholder token)
  get an image and the text; models that splice image features into placeholder tokens
  (LLaVA, Gemma 3, ShieldGemma 2, PaliGemma, GOT-OCR2, Qwen2/2.5/3-VL, Idefics3, SmolVLM,
  Mllama) get what their processor makes of one picture per sample, its placeholders inside
  the ``seq_len`` tokens of text (``vramsim.workload.image_text_inputs``); other placeholder families
  are fed their text, and ``inputs=`` adds the image.

NaFlex vision encoders (SigLIP 2) get pre-cut patches with their mask and grid, MusicGen
decoders ``batch * num_codebooks`` code rows. When training, ``use_cache=False`` is passed where
``forward`` takes it (a training step reads no KV cache; fine-tuning scripts turn it off), and
``labels`` follow the head: the token ids for causal and masked LMs (they shift or mask
internally), decoder ids for seq2seq, class indices for classifiers, CTC targets of
``seq_len // 2`` tokens for speech recognition; a contrastive image-text model without labels
(CLIP, SigLIP) is asked for its loss (``return_loss=True``). Token values are random (seed 0) and avoid
the config's special tokens; on the meta device they are recorded
(``vramsim.tracer.data_dependent.seed``) so a program that reads them gets these values.
Pass ``inputs=lambda batch_size, seq_len: {...}`` to feed anything else.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from vramsim.errors import UnsupportedError
from vramsim.tracer.data_dependent import seed
from vramsim.tracer.data_dependent.shadows import SHADOW_LIMIT
from vramsim.workload.audio_config import AUDIO_HOP, conv_hop, feature_extractor, frame_layout, mel_bins, silence
from vramsim.workload.image_text_inputs import SplicedImage, spliced_image

__all__ = ["default_inputs"]


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
        if isinstance(codebooks, int) and getattr(self.text_config, "codebook_vocab_size", None):
            return self.text_and_codes(main_input, codebooks)
        image = spliced_image(self.model, self.config, self.params, self.batch, self.seq)
        ids = self.token_ids(self.seq) if image is None else self.spliced_ids(image)
        batch: dict[str, Any] = {main_input: ids[0]}
        decoder = self.decoder_ids()
        if decoder is not None:
            batch["decoder_input_ids"] = decoder[0]
        if self._prepends_image():
            batch["pixel_values"] = self.pixels()
        if image is not None:
            extras = image.extras(ids[1]).items()
            batch.update({k: seed(v, self.device) for k, v in extras})  # the pixels too: Idefics3 reads them
        if "input_features" in self.params and isinstance(getattr(self.config, "audio_length_per_tok", None), int):
            batch["input_features"] = self.aligned_audio()
        if "lang_ids" in self.params and getattr(self.config, "languages", None):
            # X-MOD: the first language
            batch["lang_ids"] = seed(torch.zeros(self.batch, dtype=torch.long, device="cpu"), self.device)
        # an image classifier with a spliced image (ShieldGemma 2) passes its labels to its LM: it gets none
        classifies = image is not None and type(self.model).__name__.endswith("ForImageClassification")
        if self.train and "return_loss" in self.params and "labels" not in self.params:
            batch["return_loss"] = True  # a contrastive image-text model (CLIP, SigLIP) computes its loss when asked
        if self.train and "labels" in self.params and not classifies:
            if image is not None:
                batch["labels"] = image.labels(ids[1], self.device)
            else:
                batch["labels"] = self.labels(ids[1], decoder[1] if decoder is not None else None)
            if main_input == "inputs":  # Perceiver's decoder predicts max_position_embeddings positions
                length = int(getattr(self.config, "max_position_embeddings", 0) or self.seq)
                batch["labels"] = seed(self._ids(length), self.device)
        return self.no_cache(batch)

    def spliced_ids(self, image: SplicedImage) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids with the image's block at the start (on the device, and on the CPU)."""
        values = image.input_ids(self._ids(self.seq))
        return seed(values, self.device), values

    def _prepends_image(self) -> bool:
        """Image + text models that prepend the image to the text (GIT) need no placeholder
        tokens, and some train only with an image; models with placeholders are fed text."""
        if "pixel_values" not in self.params or getattr(self.config, "vision_config", None) is None:
            return False
        return not _special_tokens_named(self.config, ("image_token", "img_token", "image_token_index"))

    def no_cache(self, batch: dict[str, Any]) -> dict[str, Any]:
        """A training step reads no KV cache, so none is built (``use_cache=False``)."""
        takes_cache = "use_cache" in self.params or (self.takes_kwargs and getattr(self.config, "use_cache", False) is True)
        if self.train and takes_cache:
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

    def text_and_codes(self, main_input: str, codebooks: int) -> dict[str, Any]:
        """Kyutai speech-to-text: every frame holds a text token and the codec's ``num_codebooks`` codes
        (``batch x seq_len x (1 + num_codebooks)``, as its ``generate`` builds them); labels are the text."""
        text = self._ids(self.seq)
        codes = self._ids(self.seq * codebooks, vocab=int(self.text_config.codebook_vocab_size))
        frames = torch.cat([text.unsqueeze(-1), codes.reshape(self.batch, self.seq, codebooks)], dim=-1)
        batch: dict[str, Any] = {main_input: seed(frames, self.device)}
        if self.train and "labels" in self.params:
            batch["labels"] = seed(text.clone(), self.device)
        return self.no_cache(batch)

    def aligned_audio(self) -> torch.Tensor:
        """Voxtral Realtime adds its audio to its text position by position: the mel features of
        ``audio_length_per_tok`` frames per token, as its processor pads the two to match."""
        features, _ = self.audio_features("input_features", frames=self.seq * int(self.config.audio_length_per_tok))
        return features

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
            batch["pixel_attention_mask"] = self._mask(self.batch, side * side)
        batch["spatial_shapes"] = seed(torch.tensor([[side, side]] * self.batch, dtype=torch.long, device="cpu"), self.device)
        if self.train and "labels" in self.params:
            batch["labels"] = self.class_labels()
        return batch

    def audio(self, main_input: str) -> dict[str, Any]:
        features, extra = self.audio_features(main_input)
        # the extractor returns float32; a model whose weights are half takes its features cast to them, as
        # transformers' speech pipelines and model cards do (``input_features.to(model.dtype)``): its first
        # convolution refuses another dtype
        weights = next((p.dtype for p in self.model.parameters() if p.is_floating_point()), features.dtype)
        if features.is_floating_point() and weights in (torch.float16, torch.bfloat16):
            features = features.to(weights)
        batch: dict[str, Any] = {main_input: features, **extra}
        if main_input == "input_features" and "attention_mask" in self.params and not extra:
            frames = features.shape[-1] if features.shape[1] == mel_bins(self.config) else features.shape[1]
            batch["attention_mask"] = self._mask(self.batch, frames)
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
        """(ids on the device, their values on the CPU), in the encoder's vocabulary where the
        encoder has its own config (Dia's byte encoder beside its audio-code decoder)."""
        encoder = getattr(self.config, "encoder_config", None) or getattr(self.config, "encoder", None)
        own = "decoder_input_ids" in self.params and isinstance(getattr(encoder, "vocab_size", None), int)
        values = self._ids(length, config=encoder if own else None)
        return seed(values, self.device), values

    def decoder_ids(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        if "decoder_input_ids" not in self.params:
            return None
        decoder = getattr(self.config, "decoder", None)
        source = decoder if decoder is not None and hasattr(decoder, "vocab_size") else self.text_config
        delays = getattr(self.config, "delay_pattern", None)
        if isinstance(delays, list) and delays and getattr(source, "num_channels", None) == len(delays):
            return self.delayed_codes(source, delays)
        limit = getattr(source, "max_target_positions", None) or getattr(self.config, "max_target_positions", None)
        length = min(self.seq, int(limit)) if isinstance(limit, int) and limit > 0 else self.seq
        values = self._ids(length, config=source)
        return seed(values, self.device), values

    def delayed_codes(self, source: Any, delays: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Dia's decoder: ``batch x length x num_channels`` audio codes. Its processor, training, makes
        bos + ``seq_len`` frames + eos, spreads the channels by the delay pattern and drops the last
        step (the labels' shift): ``seq_len + 1 + max(delay_pattern)`` steps."""
        length, channels = self.seq + 1 + max(delays), len(delays)
        values = self._ids(length, config=source, rows=self.batch * channels)
        values = values.reshape(self.batch, channels, length).transpose(1, 2).contiguous()
        return seed(values, self.device), values

    def labels(self, ids: torch.Tensor, decoder: torch.Tensor | None) -> torch.Tensor:
        name = type(self.model).__name__
        if decoder is not None and decoder.dim() == 3:  # channel codes (Dia): a row per channel, as its logits
            return seed(decoder.transpose(1, 2).reshape(-1, decoder.shape[1]).contiguous(), self.device)
        if name.endswith(("ForSequenceClassification", "ForImageClassification", "ForAudioClassification")):
            return self.class_labels()
        if name.endswith("ForTokenClassification"):
            return seed(
                torch.randint(0, self._num_labels(), ids.shape, generator=self._generator, device=self._host(ids.numel())),
                self.device,
            )
        return seed((decoder if decoder is not None else ids).clone(), self.device)

    def class_labels(self) -> torch.Tensor:
        return seed(torch.randint(0, self._num_labels(), (self.batch,), generator=self._generator, device="cpu"), self.device)

    def pixels(self) -> torch.Tensor:
        config = getattr(self.config, "vision_config", None) or self.config
        size = _as_pair(_first(config, self.config, names=("image_size", "img_size", "input_size"), default=224))
        channels = int(_first(config, self.config, names=("num_channels", "in_channels", "in_chans"), default=3))
        return torch.randn(self.batch, channels, *size)

    def audio_features(self, main_input: str, frames: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """The feature extractor's output for ``frames`` (default ``seq_len``) frames of silence (the
        main input and the masks it returns by default that ``forward`` takes), else the shape the
        config and the extractor's stated frame layout imply."""
        frames = frames or self.seq
        extractor = feature_extractor(self.config)
        # raw-audio encoders subsample by their conv strides; spectrogram ones by the extractor's hop
        strided = isinstance(getattr(self.config, "conv_stride", None), (list, tuple))
        hop = conv_hop(self.config) if strided else int(getattr(extractor, "hop_length", 0) or AUDIO_HOP)
        if extractor is not None:
            rate = int(getattr(extractor, "sampling_rate", 16_000) or 16_000)
            try:
                with torch.device("cpu"):
                    made = extractor([silence(frames * hop)] * self.batch, sampling_rate=rate, return_tensors="pt")
                value = made.get(main_input)
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() >= 2:
                    extra = {
                        key: seed(mask, self.device)
                        for key, mask in made.items()
                        if key != main_input
                        and key in self.params
                        and isinstance(mask, torch.Tensor)
                        and not mask.is_floating_point()
                    }
                    return value.to(self.device), extra
            except Exception:
                pass
        if main_input in ("input_values", "inputs"):
            return torch.randn(self.batch, frames * hop), {}
        bins = mel_bins(self.config)
        channels = int(getattr(self.config, "input_channels", 1) or 1)
        source = getattr(self.config, "max_source_positions", None)
        if "whisper" in getattr(self.config, "model_type", "") and source:
            return torch.randn(self.batch, int(bins), 2 * int(source)), {}
        stacking, expansion = frame_layout(self.config)
        if stacking * expansion > 1:  # the extractor stacks frames (its backend is missing): its layout, its mask
            frames = -(-frames // stacking)
            extra = {"attention_mask": self._mask(self.batch, frames)} if "attention_mask" in self.params else {}
            return torch.randn(self.batch, frames, int(bins) * channels * stacking * expansion), extra
        return torch.randn(self.batch, frames, int(bins) * channels), {}

    # -- helpers -----------------------------------------------------------------------------

    def _ids(
        self, length: int, *, config: Any = None, low: int = 0, rows: int | None = None, vocab: int | None = None
    ) -> torch.Tensor:
        config = config or self.text_config
        vocab = max(int(vocab or getattr(config, "vocab_size", 0) or getattr(self.config, "vocab_size", 0) or 2), 2)
        shape = (rows or self.batch, length)
        if self._host(shape[0] * shape[1]).type == "meta":  # values nobody can read are not drawn
            return torch.empty(shape, dtype=torch.long, device=self.device)
        special = _special_tokens(self.config, config)
        values = torch.randint(low, vocab, shape, generator=self._generator, device="cpu")
        ordinary = [i for i in range(low, min(vocab, low + len(special) + 2)) if i not in special]
        if special and ordinary:
            hit = torch.isin(values, torch.tensor(sorted(special), device="cpu"))
            values[hit] = ordinary[0]
        return values

    def _host(self, count: int) -> torch.device:
        """Where ``count`` input values are made: on the CPU where the program may read them; on meta,
        beyond the ``SHADOW_LIMIT`` values ``seed`` remembers, they stay unknown and cost no host memory."""
        return self.device if self.device.type == "meta" and count > SHADOW_LIMIT else torch.device("cpu")

    def _mask(self, *shape: int) -> torch.Tensor:
        """An all-ones mask (no padding) of ``shape`` on the device, its values known where they can be."""
        return seed(torch.ones(shape, dtype=torch.long, device=self._host(shape[0] * shape[1])), self.device)

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
    names = (key for source in sources if source is not None for key, value in vars(source).items() if value is not None)
    return any(key.startswith(prefixes) for key in names)


def _first(config: Any, fallback: Any, *, names: tuple[str, ...], default: Any) -> Any:
    for source in (config, fallback):
        for name in names:
            value = getattr(source, name, None) if source is not None else None
            if value:
                return value
    return default


def _as_pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[-1])
    return int(value), int(value)
