"""A multimodal model's budget as vLLM's profile run sees it: the encoder over its dummy images first, their outputs
kept (the encoder cache) through the decoder's run; ``--limit-mm-per-prompt`` 0 serves the model as text only."""

from __future__ import annotations

import math

import pytest
import torch
import transformers
from profiled import allocation_trace, memory_profile

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.serving.attention import use_profile_attention
from vramsim.serving.budget import serve
from vramsim.serving.multimodal import EncoderBatch, encoder_batch, encoder_inputs, tower_modules
from vramsim.serving.profile_run import profile_run
from vramsim.workload.models import load_config
from vramsim.workload.targets import resolve_target

TOKENS, SEQS, LENGTH = 2048, 16, 2048
SMALL_PIXELS = '{"max_pixels": 1003520}'
"""1280 x 28 x 28, the smaller max_pixels Qwen's model cards suggest."""


def _qwen() -> transformers.Qwen2_5_VLConfig:
    """A tiny Qwen2.5-VL: two windowed vision blocks (one of them full attention), the 2 x 2 merger."""
    return transformers.Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=112,
            fullatt_block_indexes=[1],
        ),
        image_token_id=990,
        video_token_id=991,
        vision_start_token_id=992,
        vision_end_token_id=993,
        dtype=torch.bfloat16,
        architectures=["Qwen2_5_VLForConditionalGeneration"],
    )


PAN_AND_SCAN = '{"do_pan_and_scan": true}'


def _gemma3(side: int = 64) -> transformers.Gemma3Config:
    """A tiny Gemma 3: a two-layer SigLIP tower on ``side``-pixel images of 16 patches pooled to 4 tokens."""
    return transformers.Gemma3Config(
        text_config=dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=32768,
            sliding_window=64,
        ),
        vision_config=dict(
            image_size=side,
            patch_size=side // 4,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
        ),
        mm_tokens_per_image=4,
        image_token_index=990,
        boi_token_index=991,
        eoi_token_index=992,
        dtype=torch.bfloat16,
        architectures=["Gemma3ForConditionalGeneration"],
    )


def _gemma3_wide() -> transformers.Gemma3Config:
    """The tiny Gemma 3 on 256-pixel images, the processor's least crop size: its dummy image (256 x 1024) is cut."""
    return _gemma3(side=256)


def _budget(config: transformers.PretrainedConfig, **options: object):  # type: ignore[no-untyped-def]
    values = dict(device="h100", max_model_len=LENGTH, enforce_eager=True, max_num_batched_tokens=TOKENS, max_num_seqs=SEQS)
    return serve(config, cache=False, **(values | options))


# -- the dummy batch, as vLLM's MultiModalBudget counts it ----------------------------------------------------------


def test_qwen25_vl_profiles_one_image_of_the_largest_size() -> None:
    """max_pixels 12845056 brings the 9999999-pixel square to 3584 x 3584: 256 x 256 patches of 14, 16,384 tokens
    after the 2 x 2 merge; the encoder budget max(8192, 16384) holds one."""
    config = load_config("Qwen/Qwen2.5-VL-7B-Instruct")
    batch = encoder_batch("qwen", config, None, tokens=8192, seqs=1024, max_model_len=8192)
    assert batch == EncoderBatch(
        modality="image",
        width=3584,
        height=3584,
        tokens_per_item=16384,
        items_per_prompt=1,
        items=1,
        encoder_budget=16384,
        pixel_bounds=(3136, 12845056),
    )
    # 40,000 batched tokens hold two of them; a prompt of 20,000 tokens one
    two = encoder_batch("qwen", config, None, tokens=40000, seqs=256, max_model_len=20000)
    assert two is not None and (two.items, two.items_per_prompt, two.encoder_budget) == (2, 1, 40000)


def test_gemma3_profiles_as_many_896_pixel_images_as_the_budget_holds() -> None:
    """256 tokens an image: 8192 // 256 = 32 in the encoder budget, 32 a prompt of 8192 tokens; a limit of 2 a prompt
    over 4 sequences allows 8."""
    config = load_config("google/gemma-3-4b-it")
    batch = encoder_batch("gemma", config, None, tokens=8192, seqs=1024, max_model_len=8192)
    assert batch is not None
    assert (batch.width, batch.height, batch.tokens_per_item, batch.items_per_prompt, batch.items) == (896, 896, 256, 32, 32)
    limited = encoder_batch("gemma", config, '{"image": 2}', tokens=8192, seqs=4, max_model_len=8192)
    assert limited is not None and (limited.items_per_prompt, limited.items) == (2, 8)


def test_gemma3_pan_and_scan_profiles_the_dummy_image_in_crops() -> None:
    """Gemma3ProcessingInfo's dummy image is one tower side wide and pan_and_scan_max_num_crops (4) tall: 896 x 3584.
    get_num_crops, portrait: the aspect ratio 4 reaches min_ratio_to_activate 1.2; crops min(3584 // 256, floor(4 +
    0.5)) = 4, kept in [2, 4]; each ceil(3584 / 4) = 896 tall, not under the 256 minimum: 4 crops. get_num_image_tokens:
    (4 + 1) x 256 = 1,280 tokens, the budget's max_tokens_per_mm_item; 8192 // 1280 = 6 images, 30 tower inputs."""
    config = load_config("google/gemma-3-4b-it")
    side, tall, least, most = 896, 896 * 4, 256, 4
    assert tall / side >= 1.2
    crops = min(max(2, min(tall // least, math.floor(tall / side + 0.5))), most)
    assert (crops, math.ceil(tall / crops)) == (4, 896)
    tokens = (crops + 1) * config.mm_tokens_per_image
    batch = encoder_batch("gemma", config, None, tokens=8192, seqs=1024, max_model_len=8192, processor_kwargs=PAN_AND_SCAN)
    assert batch == EncoderBatch(
        modality="image",
        width=side,
        height=side,
        tokens_per_item=tokens,
        crops_per_item=crops + 1,
        items_per_prompt=8192 // tokens,
        items=8192 // tokens,
        encoder_budget=8192,
        pixel_bounds=None,
    )
    assert (tokens, batch.items) == (1280, 6)
    off = encoder_batch(
        "gemma", config, None, tokens=8192, seqs=1024, max_model_len=8192, processor_kwargs='{"do_pan_and_scan": false}'
    )
    assert off is not None and (off.crops_per_item, off.tokens_per_item) == (1, 256)


@pytest.mark.parametrize(
    "settings, crops",
    [
        # 896 x 7168: min(28, 8) = 8 crops of 896
        ('"pan_and_scan_max_num_crops": 8', 8),
        # min(3584 // 1000, 4) = 3 crops, 896 wide: under the 1000 minimum, none
        ('"pan_and_scan_min_crop_size": 1000', 0),
        # the aspect ratio 4 is under 5: not activated
        ('"pan_and_scan_min_ratio_to_activate": 5', 0),
        # 896 x 1792: min(7, floor(2.5)) = 2 crops
        ('"pan_and_scan_max_num_crops": 2', 2),
    ],
    ids=["8-crops", "crops-too-small", "ratio-not-reached", "2-crops"],
)
def test_gemma3_pan_and_scan_settings_as_get_num_crops_counts_them(settings: str, crops: int) -> None:
    config = load_config("google/gemma-3-4b-it")
    kwargs = f'{{"do_pan_and_scan": true, {settings}}}'
    batch = encoder_batch("gemma", config, None, tokens=8192, seqs=1024, max_model_len=8192, processor_kwargs=kwargs)
    assert batch is not None
    assert (batch.crops_per_item, batch.tokens_per_item) == (crops + 1, (crops + 1) * 256)


def test_the_tiny_gemma3_dummy_image_is_cut_only_at_the_least_crop_size() -> None:
    """64 x 256: two crops 64 wide, under the 256 minimum, so none; at 256 x 1024, four crops of 256."""
    small = encoder_batch("gemma", _gemma3(), None, tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH, processor_kwargs=PAN_AND_SCAN)
    wide = encoder_batch(
        "gemma", _gemma3_wide(), None, tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH, processor_kwargs=PAN_AND_SCAN
    )
    assert small is not None and wide is not None
    assert (small.crops_per_item, small.tokens_per_item) == (1, 4)
    assert (wide.width, wide.crops_per_item, wide.tokens_per_item) == (256, 5, 20)


@pytest.mark.parametrize("max_pixels", [1003520, 802816, 200704, 1000000, 28 * 28], ids=str)
@pytest.mark.parametrize("tokens", [8192, 2048], ids=["8192-tokens", "2048-tokens"])
def test_max_pixels_sizes_the_dummy_image_as_vllm_computes_it(max_pixels: int, tokens: int) -> None:
    """_get_vision_info's smart_resize of the 9999999-pixel square under max_pixels, in closed form: a side of
    28 x floor(sqrt(max_pixels) / 28) (28 at least), (side / 14)^2 patches, a quarter of them tokens after the 2 x 2
    merge; then MultiModalBudget's counts over that many tokens an item."""
    config = load_config("Qwen/Qwen2.5-VL-7B-Instruct")
    kwargs = f'{{"min_pixels": {min(max_pixels, 3136)}, "max_pixels": {max_pixels}}}'
    batch = encoder_batch("qwen", config, "video=0", tokens=tokens, seqs=4, max_model_len=8192, processor_kwargs=kwargs)
    side = max(28, 28 * math.isqrt(max_pixels // 784))
    per_item = (side // 14) ** 2 // 4
    budget = max(tokens, per_item)
    per_prompt = max(1, min(999, 8192 // per_item))
    assert batch == EncoderBatch(
        modality="image",
        width=side,
        height=side,
        tokens_per_item=per_item,
        items_per_prompt=per_prompt,
        items=max(1, min(budget // per_item, 4 * per_prompt)),
        encoder_budget=budget,
        pixel_bounds=(min(max_pixels, 3136), max_pixels),
    )


def test_the_default_max_pixels_and_min_pixels_leave_the_largest_image_as_it_was() -> None:
    """Naming the hub's max_pixels changes nothing; min_pixels only lifts images under it, never the largest."""
    config = load_config("Qwen/Qwen2.5-VL-7B-Instruct")
    default = encoder_batch("qwen", config, None, tokens=8192, seqs=1024, max_model_len=8192)
    named = encoder_batch(
        "qwen", config, None, tokens=8192, seqs=1024, max_model_len=8192, processor_kwargs='{"max_pixels": 12845056}'
    )
    lifted = encoder_batch(
        "qwen", config, None, tokens=8192, seqs=1024, max_model_len=8192, processor_kwargs='{"min_pixels": 1003520}'
    )
    assert default is not None and lifted is not None
    assert named == default
    assert (lifted.width, lifted.tokens_per_item, lifted.pixel_bounds) == (3584, 16384, (1003520, 12845056))
    small = encoder_batch("qwen", config, None, tokens=8192, seqs=1024, max_model_len=2048, processor_kwargs=SMALL_PIXELS)
    assert small is not None and (small.width, small.tokens_per_item, small.items) == (980, 1225, 6)


def test_a_zero_limit_for_every_modality_is_text_only() -> None:
    assert encoder_batch("qwen", _qwen(), "image=0,video=0", tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH) is None
    assert encoder_batch("gemma", _gemma3(), '{"image": 0}', tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH) is None


# -- the traced budget ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [_qwen, _gemma3], ids=["qwen2_5_vl", "gemma3"])
def test_the_budget_includes_the_encoder_profile(build) -> None:  # type: ignore[no-untyped-def]
    """The activation peak is at least the encoder's own peak and, over the text-only budget's, at least the encoder
    cache kept through the decoder's run; text only holds no tower's weights."""
    config = build()
    images = _budget(config)
    text = _budget(config, limit_mm_per_prompt='{"image": 0, "video": 0}' if build is _qwen else "image=0")
    assert images.encoder is not None and text.encoder is None
    assert images.encoder.cache_bytes > 0
    assert images.activation_peak_bytes >= images.encoder.peak_bytes > text.activation_peak_bytes
    assert images.activation_peak_bytes - text.activation_peak_bytes >= images.encoder.cache_bytes
    model = transformers.AutoModelForImageTextToText.from_config(config)
    tower = sum(-(-p.numel() * 2 // 512) * 512 for m in tower_modules(model) for p in m.parameters())  # bf16, in blocks
    assert images.weights_bytes - text.weights_bytes == tower
    assert images.kv_cache_bytes < text.kv_cache_bytes


def test_a_smaller_max_pixels_shrinks_the_encoder_profile() -> None:
    """--mm-processor-kwargs max_pixels 1003520: one 980 x 980 image of 1,225 tokens in place of one 3584 x 3584 of
    16,384; the encoder cache is the merger's outputs (64 wide, bf16) for those tokens, the encoder's peak falls, and
    the KV cache grows by what the activation peak gives back."""
    large = _budget(_qwen())
    small = _budget(_qwen(), mm_processor_kwargs=SMALL_PIXELS)
    assert large.encoder is not None and small.encoder is not None
    assert (large.encoder.width, large.encoder.tokens_per_item, large.encoder.items) == (3584, 16384, 1)
    assert (small.encoder.width, small.encoder.tokens_per_item, small.encoder.items) == (980, 1225, 1)
    assert (large.encoder.cache_bytes, small.encoder.cache_bytes) == (16384 * 64 * 2, 1225 * 64 * 2)
    assert small.encoder.peak_bytes < large.encoder.peak_bytes
    assert small.activation_peak_bytes < large.activation_peak_bytes
    assert small.weights_bytes == large.weights_bytes
    assert small.kv_cache_bytes > large.kv_cache_bytes


def test_pan_and_scan_lowers_the_budget_by_at_least_the_larger_encoder_cache() -> None:
    """One image a prompt, 16 sequences: 16 images either way, each 5 tower inputs with pan-and-scan (4 tokens each,
    the projector's outputs 64 wide, bf16); the KV cache gives up at least the cache's growth."""
    one = dict(limit_mm_per_prompt="image=1")
    whole = _budget(_gemma3_wide(), **one)
    cut = _budget(_gemma3_wide(), mm_processor_kwargs=PAN_AND_SCAN, **one)
    assert whole.encoder is not None and cut.encoder is not None
    assert (whole.encoder.items, whole.encoder.crops_per_item, cut.encoder.items, cut.encoder.crops_per_item) == (16, 1, 16, 5)
    assert (whole.encoder.cache_bytes, cut.encoder.cache_bytes) == (16 * 4 * 64 * 2, 16 * 5 * 4 * 64 * 2)
    assert cut.encoder.peak_bytes > whole.encoder.peak_bytes
    assert cut.weights_bytes == whole.weights_bytes
    assert whole.kv_cache_bytes - cut.kv_cache_bytes >= cut.encoder.cache_bytes - whole.encoder.cache_bytes


@pytest.mark.parametrize(
    "build, kwargs",
    [(_qwen, None), (_qwen, SMALL_PIXELS), (_gemma3, None), (_gemma3_wide, PAN_AND_SCAN)],
    ids=["qwen2_5_vl", "qwen2_5_vl-small", "gemma3", "gemma3-pan-and-scan"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_encoder_peak_matches_a_real_cpu_run(build, kwargs: str | None, dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def]
    """The traced encoder profile on the CPU target against the same tower's real forward over the same dummy
    batch under torch.profiler (attention as the fused kernels hold it: the output only, in both)."""
    config = build()
    batch = encoder_batch("tiny", config, None, tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH, processor_kwargs=kwargs)
    assert batch is not None
    _, traced, _, cache, _ = profile_run(
        config, resolve_target("cpu"), dtype, TOKENS, SEQS, None, sampler=None, vocab=0, encoder=batch, decoder=False
    )
    model = transformers.AutoModelForImageTextToText.from_config(config).to(dtype).eval()
    use_profile_attention(model)
    with torch.device("cpu"):
        meta = encoder_inputs(config, batch, dtype)
    inputs = {name: torch.zeros(value.shape, dtype=value.dtype) for name, value in meta.items()}
    if "image_grid_thw" in inputs:
        inputs["image_grid_thw"] = torch.tensor([[1, batch.height // 14, batch.width // 14]] * batch.items)
    with torch.no_grad(), memory_profile() as prof:
        features = model.get_image_features(**inputs).pooler_output
        kept = sum(t.numel() * t.element_size() for t in (features if isinstance(features, tuple) else (features,)))
        del features
    real, _ = allocation_trace(prof)
    assert traced == pytest.approx(real, rel=0.005)
    assert cache == kept


# -- refusals ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["image", "image=x", "{}", '{"image": -1}', "image=1.5"], ids=str)
def test_a_bad_limit_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="limit_mm_per_prompt"):
        serve(_gemma3(), limit_mm_per_prompt=text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("max_pixels=1003520", "not a JSON object"),
        ('["max_pixels"]', "not a JSON object"),
        ('{"max_pixels": -1}', "max_pixels=-1 is not a positive"),
        ('{"max_pixels": "big"}', "not a positive"),
        ('{"min_pixels": 2000000, "max_pixels": 1003520}', "min_pixels 2000000 is over max_pixels 1003520"),
    ],
    ids=["not-json", "a-list", "negative", "a-string", "min-over-max"],
)
def test_bad_processor_kwargs_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _budget(_qwen(), mm_processor_kwargs=text)


def test_processor_kwargs_the_model_does_not_take_are_refused() -> None:
    """Keys whose effect on the dummy images is not modelled, named with what the processor takes."""
    with pytest.raises(UnsupportedError, match=r"size not modelled \(qwen2_vl takes min_pixels, max_pixels\)"):
        encoder_batch("qwen", _qwen(), None, tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH, processor_kwargs='{"size": 1}')
    with pytest.raises(UnsupportedError, match=r"size not modelled \(gemma3 takes do_pan_and_scan, pan_and_scan_min"):
        _budget(_gemma3(), mm_processor_kwargs='{"size": 1}')
    with pytest.raises(UnsupportedError, match="takes no images: --mm-processor-kwargs"):
        serve(transformers.LlamaConfig(num_hidden_layers=1), cache=False, mm_processor_kwargs=SMALL_PIXELS)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"do_pan_and_scan": 1}', "do_pan_and_scan=1 is not true or false"),
        ('{"pan_and_scan_max_num_crops": 0}', "pan_and_scan_max_num_crops=0 is not a positive whole number"),
        ('{"pan_and_scan_min_crop_size": 2.5}', "pan_and_scan_min_crop_size=2.5 is not a positive whole number"),
        ('{"pan_and_scan_min_ratio_to_activate": -1}', "is not a positive ratio"),
    ],
    ids=["flag-not-bool", "no-crops", "fractional-size", "negative-ratio"],
)
def test_bad_pan_and_scan_settings_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        encoder_batch("gemma", _gemma3(), None, tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH, processor_kwargs=text)


def test_unmodelled_cases_are_refused_in_one_line() -> None:
    with pytest.raises(UnsupportedError, match="video"):  # a dummy video of several frames
        encoder_batch("qwen", _qwen(), None, tokens=TOKENS, seqs=SEQS, max_model_len=32768)
    with pytest.raises(UnsupportedError, match="not audio"):
        encoder_batch("gemma", _gemma3(), "audio=1", tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH)
    with pytest.raises(UnsupportedError, match="takes no images"):
        encoder_batch("llama", transformers.LlamaConfig(), "image=1", tokens=TOKENS, seqs=SEQS, max_model_len=LENGTH)
    with pytest.raises(UnsupportedError, match="one GPU"):
        _budget(_gemma3(), tp=2)
