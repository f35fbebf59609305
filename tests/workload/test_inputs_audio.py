"""Synthesised audio inputs match what the processors make, and the real models train on them (CPU)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import transformers

from vramsim.workload.inputs import default_inputs

pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")  # DAC's empty convs

BATCH, SEQ = 2, 12
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16)


def _train_step(model: torch.nn.Module, batch: dict) -> None:
    """One real forward and backward: the model accepts the batch and computes a finite loss."""
    model.train()
    loss = model(**batch).loss
    assert torch.isfinite(loss)
    loss.backward()


def _dia() -> transformers.DiaForConditionalGeneration:
    encoder = transformers.DiaEncoderConfig(**TINY)
    decoder = transformers.DiaDecoderConfig(
        **TINY, cross_num_attention_heads=2, cross_head_dim=16, cross_num_key_value_heads=2, cross_hidden_size=32
    )
    return transformers.DiaForConditionalGeneration(transformers.DiaConfig(encoder_config=encoder, decoder_config=decoder))


def test_dia_decoder_codes_are_laid_out_as_its_processor_does() -> None:
    """Dia's processor, training on ``SEQ`` frames of audio, makes the decoder codes and labels we make."""
    codec = transformers.DacModel(
        transformers.DacConfig(encoder_hidden_size=8, decoder_hidden_size=8, hidden_size=16, codebook_dim=4, n_codebooks=9)
    )
    extractor = transformers.DiaFeatureExtractor()
    processor = transformers.DiaProcessor(extractor, transformers.DiaTokenizer(), codec)
    audio = [np.zeros(SEQ * codec.config.hop_length, dtype=np.float32)] * BATCH
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rate = extractor.sampling_rate
        made = processor(["[S1] hi"] * BATCH, audio=audio, generation=False, output_labels=True, sampling_rate=rate)
    model = _dia()
    ours = default_inputs(model, BATCH, SEQ, train=True)
    assert ours["decoder_input_ids"].shape == made["decoder_input_ids"].shape
    assert ours["labels"].shape == made["labels"].shape
    _train_step(model, ours)


def test_kyutai_frames_hold_text_and_codes() -> None:
    config = transformers.KyutaiSpeechToTextConfig(
        **{k: v for k, v in TINY.items() if k != "intermediate_size"},
        ffn_dim=64,
        vocab_size=100,
        num_codebooks=4,
        codebook_vocab_size=33,
        audio_bos_token_id=32,
        audio_pad_token_id=100 + 4 * 33,
        bos_token_id=90,
        codec_config=transformers.MimiConfig(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=8,
            num_filters=4,
            upsample_groups=16,
            intermediate_size=32,
            codebook_dim=8,
            vector_quantization_hidden_dimension=8,
            num_quantizers=4,
        ),
    )
    model = transformers.KyutaiSpeechToTextForConditionalGeneration(config)
    batch = default_inputs(model, BATCH, SEQ, train=True)
    assert batch["input_ids"].shape == (BATCH, SEQ, 1 + config.num_codebooks)
    assert int(batch["input_ids"][..., 1:].max()) < config.codebook_vocab_size
    assert torch.equal(batch["labels"], batch["input_ids"][..., 0])
    _train_step(model, batch)


def test_voxtral_realtime_gets_audio_aligned_with_its_text() -> None:
    config = transformers.VoxtralRealtimeConfig(
        audio_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, head_dim=16),
        text_config=dict(TINY, vocab_size=100),
    )
    model = transformers.VoxtralRealtimeForConditionalGeneration(config)
    batch = default_inputs(model, BATCH, SEQ, train=True)
    features = transformers.VoxtralRealtimeFeatureExtractor()(
        [np.zeros(SEQ * config.audio_length_per_tok * 160, dtype=np.float32)] * BATCH, return_tensors="pt"
    )["input_features"]
    assert batch["input_features"].shape == features.shape == (BATCH, 128, SEQ * config.audio_length_per_tok)
    assert batch["input_ids"].shape == (BATCH, SEQ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _train_step(model, batch)


def test_granite_speech5_ctc_gets_stacked_frames() -> None:
    """Without torchaudio its extractor cannot run; its stated layout (2 frames stacked, each with
    deltas) gives the width the encoder's input layer takes."""
    encoder = dict(TINY, vocab_size=50, context_size=8, max_position_embeddings=16)
    model = transformers.GraniteSpeech5ForCTC(transformers.GraniteSpeech5CTCConfig(vocab_size=50, encoder_config=encoder))
    batch = default_inputs(model, BATCH, 2 * SEQ, train=True)
    assert batch["input_features"].shape == (BATCH, SEQ, model.encoder.input_linear.in_features)
    assert batch["attention_mask"].shape == (BATCH, SEQ)
    _train_step(model, batch)


@pytest.fixture(autouse=True)
def _on_cpu() -> None:
    torch.manual_seed(0)


def test_a_half_precision_speech_model_takes_its_features_in_its_own_dtype() -> None:
    """whisper-large-v3's config says float16: its features are cast to the weights, as its model card's code
    casts them (``input_features.to(torch_dtype)``), since its first convolution refuses float32 (a real CPU run
    of the synthesised batch checks they are what the model takes)."""
    config = transformers.WhisperConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100, num_mel_bins=80, max_source_positions=1500,
        max_target_positions=32, pad_token_id=0, decoder_start_token_id=1,
    )  # fmt: skip
    model = transformers.WhisperForConditionalGeneration(config).to(torch.bfloat16)  # bf16: CPU convolutions take it
    batch = default_inputs(model, BATCH, SEQ, train=False)
    assert batch["input_features"].dtype == torch.bfloat16
    with torch.no_grad():
        model(**batch)
    assert default_inputs(model.float(), BATCH, SEQ, train=False)["input_features"].dtype == torch.float32
