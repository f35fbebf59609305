"""Every bundled diffusion pipeline's components build, on the meta device, the parameter counts their publishers report.

The figures are the published ones: the denoisers' and VAEs' safetensors totals on the Hub, and the text encoders'
(CLIP ViT-L/14's text tower, 123,060,480; OpenCLIP ViT-bigG/14's with its projection, 694,659,840).
"""

from __future__ import annotations

import pytest
import torch

from vramsim import model_zoo
from vramsim.model_zoo.published import rounded
from vramsim.workload.diffusion.spec import find_pipeline

SD15 = "stable-diffusion-v1-5/stable-diffusion-v1-5"
SDXL = "stabilityai/stable-diffusion-xl-base-1.0"
FLUX_DEV = "black-forest-labs/FLUX.1-dev"
FLUX_SCHNELL = "black-forest-labs/FLUX.1-schnell"
SD3_MEDIUM = "stabilityai/stable-diffusion-3-medium-diffusers"
SD35_MEDIUM = "stabilityai/stable-diffusion-3.5-medium"
PIXART_SIGMA = "PixArt-alpha/PixArt-Sigma-XL-2-1024-MS"
WAN_T2V_13B = "Wan-AI/Wan2.1-T2V-1.3B-Diffusers"
LTX_VIDEO = "Lightricks/LTX-Video"
LTX_VIDEO_091 = "Lightricks/LTX-Video-0.9.1"
SD35_LARGE = "stabilityai/stable-diffusion-3.5-large"
FLUX_KONTEXT = "black-forest-labs/FLUX.1-Kontext-dev"
COGVIDEOX_5B = "THUDM/CogVideoX-5b"
HUNYUAN_VIDEO = "hunyuanvideo-community/HunyuanVideo"
QWEN_IMAGE = "Qwen/Qwen-Image"

PUBLISHED = {
    # SD 1.5 UNet: 859,520,964 (Hub safetensors total; "860M UNet" in the model card); the VAE is SD's kl-f8, 83,653,863.
    SD15: {"text_encoder": 123_060_480, "unet": 859_520_964, "vae": 83_653_863},
    # SDXL base: UNet 2,567,463,684 ("2.6B"), the same kl-f8 VAE architecture, CLIP ViT-L and OpenCLIP bigG.
    SDXL: {"text_encoder": 123_060_480, "text_encoder_2": 694_659_840, "unet": 2_567_463_684, "vae": 83_653_863},
    # FLUX.1-dev: transformer 11,901,408,320 (Hub safetensors total, "12B"); T5-v1.1-XXL's encoder 4,762,310,656; the
    # 16-channel VAE without quant convs 83,819,683. schnell has no guidance embedder: 10,229,760 fewer.
    FLUX_DEV: {"text_encoder": 123_060_480, "text_encoder_2": 4_762_310_656, "transformer": 11_901_408_320,
               "vae": 83_819_683},
    FLUX_SCHNELL: {"text_encoder": 123_060_480, "text_encoder_2": 4_762_310_656, "transformer": 11_891_178_560,
                   "vae": 83_819_683},
    # SD3 / SD3.5 medium, as counted on the loaded checkpoints (sum of numel over each pipeline component's parameters,
    # printed in public code that loads them: a per-component profile of StableDiffusion3Pipeline with SD3-medium, the
    # flow_grpo SD3.5-medium training script's comments): CLIP-L with its 768x768 projection 123,650,304, CLIP-G with
    # its projection, T5-v1.1-XXL's encoder, FLUX's 16-channel VAE architecture; the MMDiT 2,028,328,000 ("2B"), the
    # MMDiT-X (13 dual-attention blocks, QK RMSNorm) 2,243,171,520 ("2.5B" with the pos_embed buffer).
    SD3_MEDIUM: {"text_encoder": 123_650_304, "text_encoder_2": 694_659_840, "text_encoder_3": 4_762_310_656,
                 "transformer": 2_028_328_000, "vae": 83_819_683},
    SD35_MEDIUM: {"text_encoder": 123_650_304, "text_encoder_2": 694_659_840, "text_encoder_3": 4_762_310_656,
                  "transformer": 2_243_171_520, "vae": 83_819_683},
    # PixArt-Sigma XL/2 1024: the DiT 610,856,096 ("0.6B"; 603 tensors, as a public staging of the checkpoint counts
    # them), T5-v1.1-XXL's encoder, the SDXL VAE.
    PIXART_SIGMA: {"text_encoder": 4_762_310_656, "transformer": 610_856_096, "vae": 83_653_863},
    # Wan 2.1 T2V 1.3B: the DiT 1,418,996,800 (the Hub's metadata for Wan-AI/Wan2.1-T2V-1.3B, "1.3B"), UMT5-XXL's
    # encoder 5,680,910,336 (22,723,641,344 bytes of fp32 in its index), the causal 3D VAE 126,892,531.
    WAN_T2V_13B: {"text_encoder": 5_680_910_336, "transformer": 1_418_996_800, "vae": 126_892_531},
    # LTX-Video 2B: the transformer (28 blocks of 2048, the same in 0.9.0 and 0.9.1) 1,923,385,472, the "trainable
    # parameters" finetrainers prints for its LTX-Video full fine-tune (docs/models/ltx_video.md); T5-v1.1-XXL's
    # encoder. The causal video VAEs are diffusers' converter configs (scripts/convert_ltx_to_diffusers.py
    # get_vae_config): 0.9.0 (the Lightricks/LTX-Video folders, per Lightricks' LTX-Video-Trainer model_loader)
    # 419,193,649; 0.9.1's timestep-conditioned decoder with noise injection 934,976,434. (No count is printed for
    # them; finetrainers' memory_allocated after loading Lightricks/LTX-Video in bf16 with a rank-128 LoRA, 13.486 GiB,
    # is the 0.9.0 VAE's sum within 0.25%, and 6.9% under the 0.9.1 VAE's.)
    LTX_VIDEO: {"text_encoder": 4_762_310_656, "transformer": 1_923_385_472, "vae": 419_193_649},
    LTX_VIDEO_091: {"text_encoder": 4_762_310_656, "transformer": 1_923_385_472, "vae": 934_976_434},
    # SD3.5 large: the MMDiT of 38 blocks of 2432 (transformer/config.json as public loaders quote it, no dual
    # attention layers), "8.1 billion parameters" in Stability AI's announcement; the text encoders and VAE are SD3.5
    # medium's ("stay exactly the same", diffusers' SD3.5 blog).
    SD35_LARGE: {"text_encoder": 123_650_304, "text_encoder_2": 694_659_840, "text_encoder_3": 4_762_310_656,
                 "transformer": "8.1B", "vae": 83_819_683},
    # FLUX.1 Kontext [dev]: "a 12 billion parameter rectified flow transformer" (model card). Its component configs
    # were not found published outside the gated repository: the folder holds FLUX.1-dev's (the same 12B
    # architecture; public Kontext loaders pair its DiT with FLUX.1-dev's encoders and VAE) until model_zoo/refresh.py
    # fetches the repository's own.
    FLUX_KONTEXT: {"text_encoder": 123_060_480, "text_encoder_2": 4_762_310_656, "transformer": "12B",
                   "vae": 83_819_683},
    # CogVideoX-5b: the transformer 5,570,283,072 (the "trainable parameters" finetrainers prints for its full
    # fine-tune), T5-v1.1-XXL's encoder, the 3D VAE 215,583,907 (a paper's per-component count of the CogVideoX-5B
    # stack). Configs as public CogVideoX loaders quote them.
    COGVIDEOX_5B: {"text_encoder": 4_762_310_656, "transformer": 5_570_283_072, "vae": 215_583_907},
    # HunyuanVideo (the diffusers repository): exact element sums of the published shards, as a public component
    # inventory lists them: MMDiT 12,821,012,544, LLaVA-Llama-3 text tower 7,505,186,816, CLIP-L 123,060,480, causal
    # 3D VAE 246,478,803. The text encoders' configs as musubi-tuner copies them from the HunyuanVideo repository.
    HUNYUAN_VIDEO: {"text_encoder": 7_505_186_816, "text_encoder_2": 123_060_480, "transformer": 12_821_012_544,
                    "vae": 246_478_803},
    # Qwen-Image: the Hub's safetensors.total for the transformer, 20,430,401,088 ("20B MMDiT"); Qwen2.5-VL-7B as its
    # text encoder, 8,292,166,656 (the Hub's total for Qwen/Qwen2.5-VL-7B-Instruct); the VAE 126,892,531.
    QWEN_IMAGE: {"text_encoder": 8_292_166_656, "transformer": 20_430_401_088, "vae": 126_892_531},
}  # fmt: skip


def _build(folder: object, name: str, library: str, class_name: str) -> torch.nn.Module:
    import diffusers
    import transformers

    path = f"{folder}/{name}"
    with torch.device("meta"):
        if library == "transformers":
            config = transformers.AutoConfig.from_pretrained(path)
            return getattr(transformers, class_name)(config)
        cls = getattr(diffusers, class_name)
        return cls.from_config(cls.load_config(path))


@pytest.mark.parametrize("pipeline_id", sorted(PUBLISHED))
def test_bundled_pipeline_components_have_the_published_parameter_counts(pipeline_id: str) -> None:
    spec = find_pipeline(pipeline_id)
    assert spec is not None
    counts: dict[str, int | str] = {}
    for name, published in PUBLISHED[pipeline_id].items():
        library, class_name = spec.index[name]
        count = sum(p.numel() for p in _build(spec.folder, name, library, class_name).parameters())
        counts[name] = count if isinstance(published, int) else rounded(count, published)
    assert counts == PUBLISHED[pipeline_id]


def test_pipeline_ids_are_listed_and_the_old_sd15_id_resolves() -> None:
    assert model_zoo.pipeline_ids() == sorted(PUBLISHED)
    assert model_zoo.find_pipeline("runwayml/stable-diffusion-v1-5") == model_zoo.find_pipeline(SD15)
    assert model_zoo.find(SDXL) is None  # a pipeline is no single model's config
