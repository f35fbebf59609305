"""Diffusion pipelines traced as their ``__call__`` runs them, on tiny StableDiffusionXLPipeline and FluxPipeline folders."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vramsim import Report, simulate
from vramsim.cli import main
from vramsim.errors import ConfigError, UnsupportedError

TINY = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-sdxl")
TINY_FLUX = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-flux")
TINY_SD3 = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-sd3")
TINY_PIXART = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-pixart")
TINY_WAN = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-wan")
_RUN = {"task": "generate", "num_inference_steps": 2, "device": "cpu"}


@pytest.fixture(scope="module")
def guided() -> Report:
    """64x64, guidance 5 (the pipeline's default): the VAE decode sets the peak."""
    return simulate(TINY, height=64, width=64, **_RUN)


def test_json_names_each_component_with_its_peak_and_phase(guided: Report, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "trace",
                TINY,
                "--task",
                "generate",
                "--height",
                "64",
                "--width",
                "64",
                "--num-inference-steps",
                "2",
                "--device",
                "cpu",
                "--vae-tiling",
                "--json",
            ]
        )
        == 0
    )
    tiled = json.loads(capsys.readouterr().out)
    components = {c["name"]: c for c in tiled["components"]}
    assert {name: c["phase"] for name, c in components.items()} == {
        "text_encoder": "encode_prompt",
        "text_encoder_2": "encode_prompt",
        "unet": "denoise",
        "vae": "decode",
    }
    assert max(c["peak_bytes"] for c in components.values()) == tiled["peak_bytes"]
    assert tiled["options"]["guidance_scale"] == 5.0  # StableDiffusionXLPipeline's default
    from vramsim.tracer.kernels.onednn_conv import onednn_conv_isa

    untiled_vae = next(c.peak_bytes for c in guided.components if c.name == "vae")
    assert components["vae"]["peak_bytes"] < untiled_vae  # tiles of 16 px (sample_size) instead of the whole 64
    if onednn_conv_isa() is not None:  # the decode's oneDNN reorders, modelled on AVX-512 CPUs only, make it the peak
        assert guided.peak_at.module.startswith("vae.decoder.")
        assert tiled["peak_bytes"] < guided.peak_bytes


def test_guidance_doubles_the_denoiser_batch(guided: Report) -> None:
    unguided = simulate(TINY, height=64, width=64, guidance_scale=1.0, **_RUN)
    unet = {r.options["guidance_scale"]: next(c.peak_bytes for c in r.components if c.name == "unet") for r in (guided, unguided)}
    assert unet[5.0] > unet[1.0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"task": "forward"}, "use task='generate'"),
        ({"task": "generate", "height": 60}, "multiple of 8"),
        ({"task": "generate", "num_images": 0}, "num_images"),
    ],
)
def test_bad_pipeline_options_are_one_line_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate(TINY, device="cpu", **options)


def test_a_pipeline_not_run_yet_says_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": "AnimateDiffPipeline"}))
    with pytest.raises(UnsupportedError, match="AnimateDiffPipeline is not run yet"):
        simulate(str(tmp_path), task="generate", device="cpu")


def test_the_listing_names_as_generating_exactly_the_pipelines_run() -> None:
    """``vramsim models`` reads which pipelines generate from data (no torch); it is the families' own list."""
    from vramsim.workload.diffusion.pipelines import PIPELINES_RUN
    from vramsim.workload.diffusion.scripts import GENERATING

    assert set(PIPELINES_RUN) == GENERATING


@pytest.fixture(scope="module")
def flux() -> Report:
    """A tiny FLUX.1-dev-shaped pipeline at 64x64: CLIP, T5 (512 tokens), a guidance-embedding transformer, a 2x VAE."""
    return simulate(TINY_FLUX, height=64, width=64, **_RUN)


def _peaks(report: Report) -> dict[str, int]:
    return {c.name: c.peak_bytes for c in report.components}


def test_flux_runs_clip_t5_the_transformer_and_the_vae(flux: Report, guided: Report) -> None:
    assert {c.name: c.phase for c in flux.components} == {
        "text_encoder": "encode_prompt",
        "text_encoder_2": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    assert flux.options["max_sequence_length"] == 512 and flux.options["guidance_scale"] == 3.5
    assert flux.peak_at.module.startswith("text_encoder_2.")  # T5 over 512 tokens outweighs 64 px here
    assert {"flux_prompt", "flux_max_sequence_length"} <= {a.name for a in flux.assumptions}
    assert guided.options["max_sequence_length"] is None  # SD/SDXL have none


def test_flux_max_sequence_length_as_given(flux: Report) -> None:
    """A shorter T5 prompt lowers the encode peak; the default's assumption is then not listed. Steps not
    given are FluxPipeline.__call__'s default."""
    short = simulate(TINY_FLUX, height=64, width=64, max_sequence_length=128, task="generate", device="cpu")
    assert short.options["max_sequence_length"] == 128 and short.options["num_inference_steps"] == 28
    assert _peaks(short)["text_encoder_2"] < _peaks(flux)["text_encoder_2"]
    assert "flux_max_sequence_length" not in {a.name for a in short.assumptions}
    with pytest.raises(ConfigError, match="cannot be greater than 512"):
        simulate(TINY_FLUX, height=64, width=64, max_sequence_length=1024, **_RUN)
    with pytest.raises(ConfigError, match="pads FLUX's T5 prompt"):
        simulate(TINY, height=64, width=64, max_sequence_length=128, **_RUN)


def test_flux_guidance_is_an_embedding_not_a_doubled_batch(flux: Report) -> None:
    """FLUX.1-dev is guidance-distilled: guidance 1 runs the same transformer call as 3.5 (SDXL's would halve)."""
    unguided = simulate(TINY_FLUX, height=64, width=64, guidance_scale=1.0, **_RUN)
    assert _peaks(unguided)["transformer"] == _peaks(flux)["transformer"]


def test_flux_schnell_pads_t5_to_256_tokens(tmp_path: Path, flux: Report) -> None:
    """A transformer without a guidance embedding is schnell's: T5 over 256 tokens, a smaller encode peak."""
    shutil.copytree(TINY_FLUX, tmp_path / "schnell")
    config_file = tmp_path / "schnell" / "transformer" / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "guidance_embeds": False}))
    schnell = simulate(str(tmp_path / "schnell"), height=64, width=64, **_RUN)
    assert schnell.options["max_sequence_length"] == 256
    assert _peaks(schnell)["text_encoder_2"] < _peaks(flux)["text_encoder_2"]
    assert schnell.parameters < flux.parameters  # no guidance embedder


def test_offload_keeps_only_the_running_component_or_layer_on_the_device() -> None:
    options = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "device": "h100"}
    model = simulate(TINY, offload="model", **options)
    sequential = simulate(TINY, offload="sequential", **options)
    weights = {name: sum(r.parameter_bytes for r in model.layers if r.module.startswith(f"{name}.")) for name in ("unet", "vae")}
    assert model.peak_at.module.startswith("unet.")
    # the UNet's weights (each in its 512-byte allocator blocks) and not the VAE's
    assert weights["unet"] <= model.breakdown["parameters"] < weights["unet"] + weights["vae"]
    assert sequential.peak_bytes < model.peak_bytes
    assert sequential.breakdown.get("parameters", 0) < weights["unet"]


def test_importing_a_pipeline_prints_nothing() -> None:
    """A fresh process imports diffusers' pipeline modules (and their image processors, which log a PIL
    fallback when torchvision is absent, as here) without a line on stderr."""
    code = "from vramsim.workload.diffusion.spec import pipeline_class; pipeline_class('FluxPipeline')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr == ""


@pytest.fixture(scope="module")
def sd3() -> Report:
    """A tiny StableDiffusion3Pipeline at its default 64x64: CLIP-L, CLIP-G, T5, an MMDiT-X transformer, a 16-channel VAE."""
    return simulate(TINY_SD3, **_RUN)


def test_sd3_runs_three_encoders_the_transformer_and_the_vae(sd3: Report) -> None:
    assert {c.name: c.phase for c in sd3.components} == {
        "text_encoder": "encode_prompt",
        "text_encoder_2": "encode_prompt",
        "text_encoder_3": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    # StableDiffusion3Pipeline.__call__'s defaults; height from the transformer's sample_size (32) times the VAE's 2x
    assert (sd3.options["guidance_scale"], sd3.options["max_sequence_length"], sd3.options["height"]) == (7.0, 256, 64)
    assert "sd3_prompt" in {a.name for a in sd3.assumptions}
    assert max(_peaks(sd3).values()) == sd3.peak_bytes


def test_sd3_guidance_doubles_the_transformer_batch_and_encodes_the_negative_prompt(sd3: Report) -> None:
    """Unlike FLUX.1-dev, SD3 is not guidance-distilled: guidance 1 halves the transformer's batch and skips the
    negative prompt's encoding, whose embeddings __call__ keeps through the decode."""
    unguided = simulate(TINY_SD3, guidance_scale=1.0, **_RUN)
    assert _peaks(unguided)["transformer"] < _peaks(sd3)["transformer"]
    assert _peaks(unguided)["vae"] < _peaks(sd3)["vae"]


def test_sd3_max_sequence_length_as_given(sd3: Report) -> None:
    longer = simulate(TINY_SD3, max_sequence_length=512, **_RUN)
    assert _peaks(longer)["text_encoder_3"] > _peaks(sd3)["text_encoder_3"]
    assert _peaks(longer)["transformer"] > _peaks(sd3)["transformer"]  # the joint attention runs over 16 + 512 tokens
    with pytest.raises(ConfigError, match="cannot be greater than 512"):
        simulate(TINY_SD3, max_sequence_length=1024, **_RUN)


def test_pixart_sigma_bins_the_resolution_and_masks_its_t5_prompt() -> None:
    """A tiny PixArtSigmaPipeline (T5, a learned-sigma DiT of sample_size 32, an 8x VAE): 64x64 is generated at the
    256-px bin (ASPECT_RATIO_256_BIN's 1.0) and resized back; 3 DPM-Solver++ steps fill its 2-output history."""
    report = simulate(TINY_PIXART, height=64, width=64, task="generate", num_inference_steps=3, device="cpu")
    assert {c.name: c.phase for c in report.components} == {
        "text_encoder": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    assert (report.options["guidance_scale"], report.options["max_sequence_length"]) == (4.5, 300)
    binning = next(a.detail for a in report.assumptions if a.name == "resolution_binning")
    assert "256x256, then resized and cropped to 64x64" in binning
    assert report.peak_at.module.startswith("vae.decoder.")  # a 256x256 decode, whatever the asked size


_WAN = {
    "task": "generate",
    "num_inference_steps": 2,
    "height": 64,
    "width": 64,
    "max_sequence_length": 64,
    "device": "cpu",
    "dtype": "bf16",
}


def test_wan_traces_a_video_with_two_transformer_calls_per_step() -> None:
    """A tiny WanPipeline (UMT5, a 3D transformer, a causal 3D VAE): frames rounded to 4k + 1 as the pipeline rounds
    them; guidance runs the transformer once more on a batch of one (no doubled batch), so it adds only the negative
    prompt's embeddings and the first call's output, far less than a second copy of the step's activations. The VAE
    stays fp32 under a bf16 pipeline (WAN_VAE_DTYPE)."""
    guided = simulate(TINY_WAN, num_frames=6, **_WAN)
    assert {c.name: c.phase for c in guided.components} == {
        "text_encoder": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    assert (guided.options["num_frames"], guided.options["guidance_scale"]) == (5, 5.0)  # 6 -> 5; WanPipeline's 5.0
    assert {"wan_video", "wan_vae_dtype"} <= {a.name for a in guided.assumptions}
    assert guided.settings["weights"] == "text_encoder bfloat16, transformer bfloat16, vae float32"
    unguided = simulate(TINY_WAN, num_frames=5, guidance_scale=1.0, **_WAN)
    fixed = guided.breakdown["parameters"] + guided.breakdown["buffers"] + guided.breakdown["inputs"]
    step_activations = _peaks(unguided)["transformer"] - fixed
    negative_embeds = 64 * 32 * 2  # max_sequence_length x text_dim, bf16
    assert negative_embeds <= _peaks(guided)["transformer"] - _peaks(unguided)["transformer"] < step_activations / 2


def _tiny_wan_with(tmp_path: Path, **index: object) -> str:
    """The tiny WanPipeline folder with model_index.json's ``index`` keys set (Wan 2.2's pipeline arguments)."""
    folder = tmp_path / "tiny-wan"
    shutil.copytree(TINY_WAN, folder)
    data = json.loads((folder / "model_index.json").read_text())
    (folder / "model_index.json").write_text(json.dumps({**data, **index}))
    return str(folder)


def test_wan22_ti2v_embeds_a_timestep_per_latent_patch(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``expand_timesteps`` (Wan 2.2 TI2V): the transformer gets a timestep per latent patch and embeds each, so its
    step holds at least the token-wise modulation (seq_len x 6 x inner_dim, bf16) that one timestep per video does
    not; the encoder and the decode are unchanged. The VAE config's ``clip_output`` (Wan 2.2's, which diffusers no
    longer takes) is ignored without a message."""
    plain = simulate(TINY_WAN, num_frames=5, guidance_scale=1.0, **_WAN)
    folder = _tiny_wan_with(tmp_path, expand_timesteps=True)
    vae_config = Path(folder) / "vae" / "config.json"
    vae_config.write_text(json.dumps({**json.loads(vae_config.read_text()), "clip_output": False}))
    capfd.readouterr()
    expanded = simulate(folder, num_frames=5, guidance_scale=1.0, **_WAN)
    assert "clip_output" not in capfd.readouterr().err
    config = json.loads((Path(TINY_WAN) / "transformer" / "config.json").read_text())
    inner_dim = config["num_attention_heads"] * config["attention_head_dim"]
    seq_len = 2 * (64 // 8 // 2) ** 2  # (5 - 1) / 4 + 1 latent frames of 8 x 8, in 2 x 2 patches
    grown = {name: _peaks(expanded)[name] - peak for name, peak in _peaks(plain).items()}
    assert grown["transformer"] >= seq_len * 6 * inner_dim * 2
    assert grown["text_encoder"] == grown["vae"] == 0


def test_wan22_a14b_loads_both_experts_and_runs_the_second_below_the_boundary(tmp_path: Path) -> None:
    """Wan 2.2 A14B: ``transformer_2`` is loaded beside ``transformer`` (its weights and buffers resident through the
    whole call) and runs below ``boundary_ratio`` (the second of two steps here); under model offload only the
    running expert is on the device, and the second step, run by ``transformer_2``, is the one-expert run's."""
    folder = _tiny_wan_with(tmp_path, transformer_2=["diffusers", "WanTransformer3DModel"], boundary_ratio=0.875)
    shutil.copytree(Path(folder) / "transformer", Path(folder) / "transformer_2")
    one = simulate(TINY_WAN, num_frames=5, guidance_scale=1.0, **_WAN)
    two = simulate(folder, num_frames=5, guidance_scale=1.0, **_WAN)
    assert {c.name: c.phase for c in two.components} == {
        "text_encoder": "encode_prompt",
        "transformer": "denoise",
        "transformer_2": "denoise",
        "vae": "decode",
    }
    weights = {c.name: c.weights_bytes for c in two.components}
    assert weights["transformer_2"] == weights["transformer"] > 0
    resident = weights["transformer_2"] + two.breakdown["buffers"] - one.breakdown["buffers"]
    grown = {name: _peaks(two)[name] - peak for name, peak in _peaks(one).items()}
    assert grown == {"text_encoder": resident, "transformer": grown["transformer"], "vae": resident}
    assert _peaks(two)["transformer_2"] - _peaks(one)["transformer"] == resident
    assert "wan_experts" in {a.name for a in two.assumptions}
    one_offloaded = simulate(TINY_WAN, num_frames=5, guidance_scale=1.0, offload="model", **_WAN)
    offloaded = simulate(folder, num_frames=5, guidance_scale=1.0, offload="model", **_WAN)
    assert _peaks(offloaded)["transformer_2"] == _peaks(one_offloaded)["transformer"]
    assert offloaded.peak_bytes == one_offloaded.peak_bytes


def test_num_frames_is_for_video_pipelines() -> None:
    with pytest.raises(ConfigError, match="num_frames is a video pipeline's argument"):
        simulate(TINY_SD3, num_frames=9, **_RUN)


def test_quantization_packs_the_denoiser_and_t5_only() -> None:
    """``--quantization nf4`` on a pipeline: the transformer and T5 in bitsandbytes' 4-bit format (diffusers' and
    transformers' own quantizers), CLIP and the VAE as they were; torchao's ``int8wo`` packs the transformer alone
    (diffusers' torchao docs); formats diffusers does not load (GPTQ) are refused."""
    options = dict(height=64, width=64, task="generate", num_inference_steps=2, device="h100")
    plain, packed, int8 = (
        simulate(TINY_FLUX, **options, **given) for given in ({}, {"quantization": "nf4"}, {"quantization": "int8wo"})
    )
    before, after, torchao = ({c.name: c.weights_bytes for c in r.components} for r in (plain, packed, int8))
    assert (after["text_encoder"], after["vae"]) == (before["text_encoder"], before["vae"])
    assert after["transformer"] < before["transformer"] / 2 and after["text_encoder_2"] < before["text_encoder_2"]
    assert torchao["transformer"] < before["transformer"] and {k: v for k, v in torchao.items() if k != "transformer"} == {
        k: v for k, v in before.items() if k != "transformer"
    }
    with pytest.raises(UnsupportedError, match="pipelines are quantized with bitsandbytes, torchao"):
        simulate(TINY_FLUX, **options, quantization="gptq")


def test_eager_attention_materialises_the_scores_and_is_refused_where_not_modelled() -> None:
    """``eager``: diffusers' AttnProcessor (baddbmm scores) in SDXL's UNet, the dispatcher's math backend in FLUX's
    transformer, both above SDPA's peak, and for that pipeline only (diffusers makes a model's backend the process's
    too); SD3's joint attention has no eager form: one line, never SDPA in silence."""
    options = dict(task="generate", num_inference_steps=2, height=128, width=128, device="h100")
    for tiny, denoiser in ((TINY, "unet"), (TINY_FLUX, "transformer")):
        sdpa, eager, sdpa_after = (simulate(tiny, **options, attn_implementation=a) for a in ("sdpa", "eager", "sdpa"))
        peaks = [next(c.peak_bytes for c in r.components if c.name == denoiser) for r in (sdpa, eager, sdpa_after)]
        assert peaks[1] > peaks[0] and eager.options["attn_implementation"] == "eager", tiny
        assert peaks[2] == peaks[0], "an eager pipeline changed the attention of the ones simulated after it"
    with pytest.raises(UnsupportedError, match="'eager' is not modelled for SD3Transformer2DModel"):
        simulate(TINY_SD3, attn_implementation="eager", **options)


def test_attention_slicing_slices_the_unet_heads() -> None:
    """``enable_attention_slicing``: one head at a time (max) holds fewer scores than half the heads (auto); a
    pipeline without a UNet cannot slice; a bad size is one line."""
    options = dict(task="generate", num_inference_steps=2, height=128, width=128, device="h100")
    auto, most = (simulate(TINY, attention_slicing=s, **options) for s in ("auto", "max"))
    unet = [next(c.peak_bytes for c in r.components if c.name == "unet") for r in (auto, most)]
    assert unet[1] < unet[0]
    with pytest.raises(UnsupportedError, match=r"applies to SD 1\.5 and SDXL"):
        simulate(TINY_FLUX, attention_slicing="auto", **options)
    with pytest.raises(ConfigError, match="attention_slicing is auto, max or a slice size"):
        simulate(TINY, attention_slicing="half", **options)


TINY_LTX = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-ltx")
_LTX = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "num_frames": 9, "device": "cpu"}


@pytest.fixture(scope="module")
def ltx() -> Report:
    """A tiny LTXPipeline (T5, an LTX transformer, a 0.9.1-style VAE with timestep conditioning), 9 frames at 64x64."""
    return simulate(TINY_LTX, **_LTX)


def test_ltx_video_runs_t5_the_packed_transformer_and_the_timestep_aware_decode(ltx: Report) -> None:
    """LTXPipeline.__call__'s defaults (guidance 3, 128 T5 tokens); guidance doubles the transformer's batch; the decode
    mixes in noise at decode_timestep; sizes the pipeline refuses, and a slicing diffusers itself fails, are one line."""
    assert {c.name: c.phase for c in ltx.components} == {
        "text_encoder": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    options = ltx.options
    assert (options["guidance_scale"], options["max_sequence_length"], options["num_frames"]) == (3.0, 128, 9)
    assert "decode_timestep=0.0" in next(a.detail for a in ltx.assumptions if a.name == "ltx_video")
    assert ltx.peak_at.module.startswith("vae.decoder.")
    unguided = simulate(TINY_LTX, guidance_scale=1.0, **_LTX)
    assert _peaks(unguided)["transformer"] < _peaks(ltx)["transformer"]
    with pytest.raises(ConfigError, match="divisible by 32"):
        simulate(TINY_LTX, **{**_LTX, "height": 48})
    with pytest.raises(UnsupportedError, match="vae_slicing with 2 videos fails in diffusers"):
        simulate(TINY_LTX, **{**_LTX, "num_images": 2, "vae_slicing": True})


def test_ltx_video_without_a_timestep_conditioned_vae_decodes_the_latents_as_they_are(tmp_path: Path, ltx: Report) -> None:
    """LTX-Video 0.9.0's VAE (Lightricks/LTX-Video) takes no timestep: no decode noise is drawn, and the note says so."""
    shutil.copytree(TINY_LTX, tmp_path / "ltx-090")
    config_file = tmp_path / "ltx-090" / "vae" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps(config | {"timestep_conditioning": False, "decoder_inject_noise": [False] * 4}))
    report = simulate(str(tmp_path / "ltx-090"), **_LTX)
    assert "takes no timestep" in next(a.detail for a in report.assumptions if a.name == "ltx_video")
    assert report.parameters < ltx.parameters  # no time embedder, no noise scales


def test_torchao_int8wo_on_the_denoiser_saves_what_the_real_run_saves() -> None:
    """``--quantization int8wo`` on the tiny FLUX pipeline, run for real on the CPU (torchao's Int8Tensor): the
    prediction moves by exactly what the real peak moves by (the comparison holds on any CPU's oneDNN ISA)."""
    from vramsim.config import SimulationConfig
    from vramsim.validation.measure import measure_cpu

    options = {"task": "generate", "num_inference_steps": 2, "height": 128, "width": 128}
    predicted, measured = {}, {}
    for quantization in (None, "int8wo"):
        predicted[quantization] = simulate(TINY_FLUX, device="cpu", quantization=quantization, **options).peak_bytes
        config = SimulationConfig(device="cpu", quantization=quantization, **options)
        measured[quantization] = measure_cpu(TINY_FLUX, config).peak_bytes
    saved = measured[None] - measured["int8wo"]
    assert saved > 0 and predicted[None] - predicted["int8wo"] == saved


def test_layerwise_casting_keeps_the_unets_weights_in_fp8_between_its_layers(guided: Report) -> None:
    cast = simulate(TINY, height=64, width=64, layerwise_casting="fp8_e4m3", **_RUN)
    unet = {name: sum(r.parameter_bytes for r in report.layers if r.module.startswith("unet.")) for name, report in
            (("fp32", guided), ("fp8", cast))}  # fmt: skip
    # the cast layers rest in 1 byte a weight (of 4); the skipped ones (norms, proj_in/proj_out) keep fp32
    assert unet["fp32"] / 4 < unet["fp8"] < unet["fp32"] / 2
    assert cast.peak_bytes < guided.peak_bytes
    assert "layerwise_casting" in {a.name for a in cast.assumptions}


def test_group_offload_leaves_fewer_weights_resident_the_finer_its_groups(guided: Report) -> None:
    block = simulate(TINY, height=64, width=64, group_offload="block_level:1", **_RUN)
    leaf = simulate(TINY, height=64, width=64, group_offload="leaf_level", **_RUN)
    parameters = [report.breakdown.get("parameters", 0) for report in (guided, block, leaf)]
    assert parameters == sorted(parameters, reverse=True) and parameters[2] < parameters[0] / 10
    assert "group_offload" in {a.name for a in leaf.assumptions}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"layerwise_casting": "fp4"}, "unknown layerwise_casting"),
        ({"group_offload": "block_level"}, "block_level:N"),
        ({"group_offload": "leaf_level", "offload": "model", "device": "h100"}, "give one of them"),
        ({"attention_processor": "unet"}, "COMPONENT=NAME"),
        ({"attention_processor": "unet=XFormersAttnProcessor"}, "COMPONENT=NAME"),
        ({"attention_processor": "controlnet=AttnProcessor"}, "no component 'controlnet'"),
        ({"vae": "/nonexistent"}, "config.json"),
        ({"vae": TINY_SD3 + "/vae"}, "latents have other channels"),
        ({"quantized_components": "unet"}, "give a quantization too"),
        ({"quantized_components": "unet,safety_checker", "quantization": "int8wo"}, "has no safety_checker"),
    ],
    ids=["dtype", "blocks", "two-offloads", "pair", "processor", "component", "folder", "channels", "unquantized", "absent"],
)
def test_weight_hook_options_refuse_bad_values_in_one_line(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate(TINY, height=64, width=64, **{**_RUN, **options})


def test_an_attention_processor_on_a_dispatcher_component_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="FluxAttnProcessor"):
        simulate(TINY_FLUX, height=64, width=64, attention_processor="transformer=AttnProcessor", **_RUN)


TINY_COGVIDEOX = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-cogvideox")
TINY_HUNYUAN_VIDEO = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-hunyuan-video")
TINY_QWEN_IMAGE = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-qwen-image")


def test_cogvideox_takes_its_defaults_from_the_transformer_and_doubles_the_batch_under_guidance() -> None:
    """CogVideoXPipeline.__call__'s size is the transformer's sample size times the VAE's factor (32x48 here), its frames
    the transformer's ``sample_frames``; guidance 6 doubles the transformer's batch; one video per prompt only."""
    guided = simulate(TINY_COGVIDEOX, **_RUN)
    options = guided.options
    assert (options["height"], options["width"], options["num_frames"]) == (32, 48, 9)
    assert (options["guidance_scale"], options["max_sequence_length"]) == (6.0, 226)
    assert guided.peak_at.module.startswith("vae.decoder.")
    unguided = simulate(TINY_COGVIDEOX, guidance_scale=1.0, **_RUN)
    assert _peaks(unguided)["transformer"] < _peaks(guided)["transformer"]
    with pytest.raises(ConfigError, match="one video per prompt"):
        simulate(TINY_COGVIDEOX, num_images=2, **_RUN)


def test_hunyuan_video_keeps_every_llama_hidden_state_and_embeds_its_guidance() -> None:
    """HunyuanVideoPipeline.__call__: Llama over the template's 95 tokens and the prompt's, with every layer's hidden
    state held at once (4 of them for the tiny 3-layer Llama); guidance 6 is an embedding, not a second call; the
    folder holds no scheduler config, and the report says its defaults were used."""
    report = simulate(TINY_HUNYUAN_VIDEO, height=32, width=48, num_frames=9, max_sequence_length=16, **_RUN)
    assert {c.name: c.phase for c in report.components} == {
        "text_encoder": "encode_prompt",
        "text_encoder_2": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    assert (report.options["guidance_scale"], report.options["num_frames"]) == (6.0, 9)
    hidden_states = 4 * (95 + 16) * 32 * 4  # layers + 1, template + prompt tokens, hidden size, fp32
    assert _peaks(report)["text_encoder"] - report.breakdown["parameters"] > hidden_states
    assert {"hunyuan_video", "scheduler_defaults"} <= {a.name for a in report.assumptions}
    assert report.peak_at.module.startswith("vae.decoder.")


def test_qwen_image_runs_the_whole_qwen_vl_and_decodes_one_frame() -> None:
    """QwenImagePipeline.__call__: 1024 px by default (128 x 8), here 64x64; true_cfg_scale 4 without a negative prompt
    (one transformer call per step); more than 1024 prompt tokens is refused as the pipeline refuses it."""
    report = simulate(TINY_QWEN_IMAGE, height=64, width=64, max_sequence_length=16, **_RUN)
    assert {c.name: c.phase for c in report.components} == {
        "text_encoder": "encode_prompt",
        "transformer": "denoise",
        "vae": "decode",
    }
    assert (report.options["guidance_scale"], report.options["max_sequence_length"]) == (4.0, 16)
    assert "true_cfg_scale 4.0 needs a negative prompt" in next(
        a.detail for a in report.assumptions if a.name == "qwen_image_prompt"
    )
    with pytest.raises(ConfigError, match="cannot be greater than 1024"):
        simulate(TINY_QWEN_IMAGE, max_sequence_length=2048, **_RUN)
