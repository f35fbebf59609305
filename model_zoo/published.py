"""The published parameter count of every bundled model and the transformers class it counts.

Data, read without torch: ``vramsim models`` lists the figures, and tests/model_zoo/test_parameter_counts.py
builds each bundled config on the meta device and checks it gives exactly this count (or, where only a rounded
figure is published, that its count rounds to it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PIPELINES", "PUBLISHED", "Published", "rounded"]


@dataclass(frozen=True)
class Published:
    """A published parameter count and the transformers class whose weights it counts."""

    model_id: str
    auto_class: str  # the Auto class that builds `model_class` from the config
    model_class: str
    count: int | str  # exact, or the rounded figure ("0.6B") where only that is published
    buffers: int = 0  # persistent buffers the checkpoint stores as weights; included in `count`


def rounded(count: int, published: str) -> str:
    """``count`` written as ``published`` writes its figure ("0.6B", "14.8B", "671B"): same unit, same decimals, so
    a count checks against a figure published only rounded."""
    unit = {"M": 10**6, "B": 10**9}[published[-1]]
    decimals = len(published[:-1].partition(".")[2])
    return f"{count / unit:.{decimals}f}{published[-1]}"


# "Hub safetensors total" is the exact parameter count the Hugging Face Hub shows for the model's safetensors
# (rounded on the page, e.g. "8.03B params"; exact in the file metadata). Tied weights are stored once.
PUBLISHED = [
    # Hub safetensors total; model card: 8B.
    Published("meta-llama/Llama-3.1-8B", "AutoModelForCausalLM", "LlamaForCausalLM", 8_030_261_248),
    # Hub safetensors total; model card: 70B.
    Published("meta-llama/Llama-3.1-70B", "AutoModelForCausalLM", "LlamaForCausalLM", 70_553_706_496),
    # Hub safetensors total (BF16 weights); model card: 405B.
    Published("meta-llama/Llama-3.1-405B", "AutoModelForCausalLM", "LlamaForCausalLM", 405_853_388_800),
    # Hub safetensors total ("13B"): 40 layers x 317,204,480 + embeddings and head 2 x 163,840,000 + norm 5,120.
    Published("meta-llama/Llama-2-13b-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 13_015_864_320),
    # Hub safetensors total ("1.24B"); the embedding is tied to the LM head.
    Published("meta-llama/Llama-3.2-1B", "AutoModelForCausalLM", "LlamaForCausalLM", 1_235_814_400),
    # Hub safetensors total ("3.21B"); the embedding is tied to the LM head.
    Published("meta-llama/Llama-3.2-3B", "AutoModelForCausalLM", "LlamaForCausalLM", 3_212_749_824),
    # Hub safetensors total ("7.24B"); Mistral's announcement: 7.3B.
    Published("mistralai/Mistral-7B-v0.1", "AutoModelForCausalLM", "MistralForCausalLM", 7_241_732_096),
    # Hub safetensors total; Mixtral paper / announcement: 46.7B total, 12.9B active per token.
    Published("mistralai/Mixtral-8x7B-v0.1", "AutoModelForCausalLM", "MixtralForCausalLM", 46_702_792_704),
    # Hub safetensors total; model card: 0.49B (tied embeddings).
    Published("Qwen/Qwen2.5-0.5B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 494_032_768),
    # Hub safetensors total; model card: 7.61B.
    Published("Qwen/Qwen2.5-7B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 7_615_616_512),
    # GGUF general.parameter_count of the Qwen2.5-14B line (llama.cpp's n_params for Qwen2.5-14B-Instruct, the same
    # sizes), quoted publicly; Hub: 14.8B; model card: 14.7B. config.json as a public profiling repo copies it.
    Published("Qwen/Qwen2.5-14B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 14_770_033_664),
    # Hub safetensors total (BF16: 32,763,876,352, quoted publicly; KerasHub's qwen2.5_instruct_32b_en preset gives
    # the same); model card: 32.5B. config.json from the same public copy as Qwen2.5-14B's.
    Published("Qwen/Qwen2.5-32B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 32_763_876_352),
    # Hub safetensors total; model card: 72.7B.
    Published("Qwen/Qwen2.5-72B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 72_706_203_648),
    # Hub safetensors total; model card: 8.2B.
    Published("Qwen/Qwen3-8B", "AutoModelForCausalLM", "Qwen3ForCausalLM", 8_190_735_360),
    # Hub safetensors total ("9.24B"); embedding tied to the LM head.
    Published("google/gemma-2-9b", "AutoModelForCausalLM", "Gemma2ForCausalLM", 9_241_705_984),
    # Hub safetensors total ("27.2B"); embedding tied to the LM head.
    Published("google/gemma-2-27b", "AutoModelForCausalLM", "Gemma2ForCausalLM", 27_227_128_320),
    # Hub safetensors total ("3.82B"); model card: 3.8B.
    Published("microsoft/Phi-3-mini-4k-instruct", "AutoModelForCausalLM", "Phi3ForCausalLM", 3_821_079_552),
    # Hub safetensors total (3,821,079,552, quoted in public model registries; "3.82B"); model card: 3.8B. config.json
    # as public ONNX-export code copies it from the Hub (it leaves out transformers_version, as here; a transformers
    # 4.46 print of the same config agrees on every other field).
    Published("microsoft/Phi-3.5-mini-instruct", "AutoModelForCausalLM", "Phi3ForCausalLM", 3_821_079_552),
    # 41,873,153,344 as a public per-module breakdown of the checkpoint gives it (the experts' FFNs 40,267,415,552;
    # the same breakdown gives Phi-3.5-mini's 3,821,079,552); model card: 41.9B total, 6.6B active. config.json
    # assembled from a public key-by-key listing of the published file (every key but rope_scaling's 64-entry
    # longrope factor lists, which no public copy gives in full: rope_scaling is left out, which changes the rotary
    # frequencies' values only, no size and no tensor's shape); model_zoo/refresh.py fetches the file.
    Published("microsoft/Phi-3.5-MoE-instruct", "AutoModelForCausalLM", "PhimoeForCausalLM", 41_873_153_344),
    # Model card: "685B ... includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP)
    # Module weights". transformers builds the main model only (layers 0-60, no MTP layer 61), so the figure is
    # the main model's: the checkpoint's tensors outside model.layers.61, without the FP8 weight_scale_inv
    # tensors, = 671,026,419,200. Of those, 58 MoE layers x 256 = 14,848 are the router's
    # e_score_correction_bias, which transformers keeps as a persistent buffer (it is stored in the checkpoint
    # and occupies memory, but is not an nn.Parameter), so parameters() alone gives 671,026,404,352.
    Published("deepseek-ai/DeepSeek-V3", "AutoModelForCausalLM", "DeepseekV3ForCausalLM", 671_026_419_200, buffers=14_848),
    # OpenAI GPT-2 small: 124M (GPT2LMHeadModel, LM head tied to wte). The Hub's safetensors total, 137M, also
    # counts the 12 x 1024 x 1024 causal-mask buffers (attn.bias) the old checkpoint saved.
    Published("openai-community/gpt2", "AutoModelForCausalLM", "GPT2LMHeadModel", 124_439_808),
    # BERT paper: BERT-base 110M, the encoder with its pooler (BertModel). The Hub's safetensors total,
    # 110,106,428, is BertForPreTraining: the same plus the MLM transform/bias and next-sentence head.
    Published("google-bert/bert-base-uncased", "AutoModel", "BertModel", 109_482_240),
    # BERT paper: BERT-large 340M, BertModel with pooler (Hub safetensors total 336,226,108 = BertForPreTraining).
    Published("google-bert/bert-large-uncased", "AutoModel", "BertModel", 335_141_888),
    # Hub safetensors total ("223M"); T5 paper: ~220M for T5-Base. Embedding shared by encoder, decoder, LM head.
    Published("google-t5/t5-base", "AutoModelForSeq2SeqLM", "T5ForConditionalGeneration", 222_903_552),
    # Flan-T5-Base: T5 v1.1 sizes, its LM head stored apart from the embedding (tie_word_embeddings: false), as the
    # checkpoint loads: 247,577,856 (Hub safetensors total; model card "248M"). config.json: the T5 v1.1 keys its
    # published file carries, with t5's task_specific_params (values only, no size).
    Published("google/flan-t5-base", "AutoModelForSeq2SeqLM", "T5ForConditionalGeneration", 247_577_856),
    # T5-Large as transformers counts it (sum of numel, the embedding shared by encoder, decoder and LM head), quoted
    # publicly in DeepSpeed's T5 tables and load checks: 737,668,096; Hub: "738M"; T5 paper: ~770M. config.json as a
    # public benchmark script copies it beside t5-small's and t5-base's (identical to the bundled t5-base's but sizes).
    Published("google-t5/t5-large", "AutoModelForSeq2SeqLM", "T5ForConditionalGeneration", 737_668_096),
    # Hub safetensors total ("86.6M"): ViT-B/16 with its 1000-class ImageNet head; ViT paper: 86M.
    Published("google/vit-base-patch16-224", "AutoModelForImageClassification", "ViTForImageClassification", 86_567_656),
    # The Hub's safetensors metadata for revision 7fd15f06: 203,155,970 (both towers, the logit scale and bias;
    # model card: 203M). config.json as public ports quote it (the base checkpoint declares five text keys and the
    # vision patch size; the rest are SiglipConfig's defaults), with the top-level keys SigLIP's published files carry.
    Published("google/siglip-base-patch16-224", "AutoModel", "SiglipModel", 203_155_970),
    # The Hub API's safetensors total for revision 8949b909: 149,655,232 F32 (149,014,272 in model.*, 640,960 in the
    # MLM head and decoder bias; the decoder weight tied to the token embedding); model card: 149M. config.json
    # assembled from public copies of its keys (a fine-tune's full 4.48 file, transformers' ModernBertConfig
    # defaults, which are this model's); transformers_version left out.
    Published("answerdotai/ModernBERT-base", "AutoModelForMaskedLM", "ModernBertForMaskedLM", 149_655_232),
    # Pythia paper (Biderman et al. 2023, table 1): 405,334,016 total parameters for "410M" (untied embed_in/out).
    Published("EleutherAI/pythia-410m-deduped", "AutoModelForCausalLM", "GPTNeoXForCausalLM", 405_334_016),
    # StarCoder 15.5B architecture (OctoCoder is its instruction-tuned copy): 15,517,456,384 with the LM head tied
    # to wte. The causal-mask buffer transformer.bias (8192 x 8192 bool) is non-persistent, so not counted.
    Published("bigcode/octocoder", "AutoModelForCausalLM", "GPTBigCodeForCausalLM", 15_517_456_384),
    # Hub safetensors total ("242M"); proj_out is tied to the decoder embedding. Whisper paper: 244M.
    Published("openai/whisper-small", "AutoModelForSpeechSeq2Seq", "WhisperForConditionalGeneration", 241_734_912),
    # The loaded count public fine-tuning audits print for revision abdf7c39 (sum of numel; proj_out tied to the
    # decoder embedding): 763,857,920; Hub: "764M"; Whisper paper: 769M. config.json assembled: the sizes as OpenAI's
    # ModelDimensions for medium and a public structure listing give them (1024 wide, 16 heads, 24 + 24 layers, FFN
    # 4096, 80 mel bins, 1500 / 448 positions, 51,865 tokens), every other key whisper-small's (the same multilingual
    # tokenizer and generation settings; transformers_version 4.27.0.dev0 as public copies of medium's quote it).
    Published("openai/whisper-medium", "AutoModelForSpeechSeq2Seq", "WhisperForConditionalGeneration", 763_857_920),
    # GGUF general.parameter_count and Hub listings of meta-llama/Llama-2-7b-hf: 6,738,415,616 ("6.74B").
    Published("meta-llama/Llama-2-7b-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 6_738_415_616),
    # Hub safetensors total of the Llama-2-70b checkpoint (quoted for togethercomputer/llama-2-70b): "69B".
    Published("meta-llama/Llama-2-70b-hf", "AutoModelForCausalLM", "LlamaForCausalLM", 68_976_648_192),
    # Hub safetensors total (quoted for its unsloth mirror); model card: 8B.
    Published("meta-llama/Meta-Llama-3-8B", "AutoModelForCausalLM", "LlamaForCausalLM", 8_030_261_248),
    # Hub safetensors total (quoted for its NousResearch mirror); model card: 70B.
    Published("meta-llama/Meta-Llama-3-70B", "AutoModelForCausalLM", "LlamaForCausalLM", 70_553_706_496),
    # Hub safetensors total (quoted for its unsloth mirror); model card: 70B.
    Published("meta-llama/Llama-3.3-70B-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 70_553_706_496),
    # Hub safetensors total of the Instruct twin (same sizes); model card: 109B total, 17B active.
    Published(
        "meta-llama/Llama-4-Scout-17B-16E", "AutoModelForImageTextToText", "Llama4ForConditionalGeneration", 108_641_793_536
    ),
    # Parameter count quoted for the Instruct twin (Fireworks' model listing); Hub: "402B"; card: 400B total.
    Published(
        "meta-llama/Llama-4-Maverick-17B-128E",
        "AutoModelForImageTextToText",
        "Llama4ForConditionalGeneration",
        401_583_781_376,
    ),
    # Model card: 0.6B (the Hub's 0.8B counts the tied LM head the checkpoint stores again).
    Published("Qwen/Qwen3-0.6B", "AutoModelForCausalLM", "Qwen3ForCausalLM", "0.6B"),
    # Model card: 1.7B (the Hub's 2.03B counts the tied LM head again).
    Published("Qwen/Qwen3-1.7B", "AutoModelForCausalLM", "Qwen3ForCausalLM", "1.7B"),
    # Model card: 4.0B.
    Published("Qwen/Qwen3-4B", "AutoModelForCausalLM", "Qwen3ForCausalLM", "4.0B"),
    # Model card: 14.8B.
    Published("Qwen/Qwen3-14B", "AutoModelForCausalLM", "Qwen3ForCausalLM", "14.8B"),
    # Hub safetensors total (quoted in public catalogs); model card: 32.8B.
    Published("Qwen/Qwen3-32B", "AutoModelForCausalLM", "Qwen3ForCausalLM", 32_762_123_264),
    # Hub safetensors total (quoted in public catalogs, equal for the -2507 twins); card: 30.5B, 3.3B active.
    Published("Qwen/Qwen3-30B-A3B", "AutoModelForCausalLM", "Qwen3MoeForCausalLM", 30_532_122_624),
    # Hub safetensors total ("safetensors": {"total": 235093634560} in the API answer quoted publicly); card: 235B.
    Published("Qwen/Qwen3-235B-A22B", "AutoModelForCausalLM", "Qwen3MoeForCausalLM", 235_093_634_560),
    # Hub safetensors total (quoted publicly, equal for DeepSeek-V2-Lite-Chat); model card: 16B total, 2.4B active.
    Published("deepseek-ai/DeepSeek-V2-Lite", "AutoModelForCausalLM", "DeepseekV2ForCausalLM", 15_706_484_224),
    # Model card: 671B total (the V3 architecture: the same main model as DeepSeek-V3 above, router biases stored
    # as buffers; the Hub's 685B adds the MTP layer and the FP8 scales).
    Published("deepseek-ai/DeepSeek-R1", "AutoModelForCausalLM", "DeepseekV3ForCausalLM", "671B", buffers=14_848),
    # Hub safetensors total of gemma-2-2b-it (same sizes), quoted in public catalogs; model card: 2B ("2.61B").
    Published("google/gemma-2-2b", "AutoModelForCausalLM", "Gemma2ForCausalLM", 2_614_341_888),
    # Hub safetensors total (quoted in public catalogs); model card: 1B. Embedding tied to the LM head.
    Published("google/gemma-3-1b-it", "AutoModelForCausalLM", "Gemma3ForCausalLM", 999_885_952),
    # Hub safetensors total (quoted in public catalogs): language model, SigLIP tower and projector.
    Published("google/gemma-3-4b-it", "AutoModelForImageTextToText", "Gemma3ForConditionalGeneration", 4_300_079_472),
    # Hub safetensors total (quoted for its unsloth mirror).
    Published("google/gemma-3-12b-it", "AutoModelForImageTextToText", "Gemma3ForConditionalGeneration", 12_187_325_040),
    # Hub safetensors total (quoted in public catalogs and for its unsloth mirror).
    Published("google/gemma-3-27b-it", "AutoModelForImageTextToText", "Gemma3ForConditionalGeneration", 27_432_406_640),
    # Hub safetensors total of Mistral-Nemo-Instruct-2407 (same sizes), quoted publicly; announcement: 12B.
    Published("mistralai/Mistral-Nemo-Base-2407", "AutoModelForCausalLM", "MistralForCausalLM", 12_247_782_400),
    # GGUF general.parameter_count of the Mistral Small 3 line (24B, same sizes), quoted publicly; card: 24B.
    Published("mistralai/Mistral-Small-24B-Base-2501", "AutoModelForCausalLM", "MistralForCausalLM", 23_572_403_200),
    # Hub safetensors total of mistral-community/Mixtral-8x22B-v0.1 (the official mirror); announcement: 141B, 39B active.
    Published("mistralai/Mixtral-8x22B-v0.1", "AutoModelForCausalLM", "MixtralForCausalLM", 140_620_634_112),
    # KerasHub's GPT-2 presets ("params"), the same as GPT2LMHeadModel's count (LM head tied to wte); model card: 355M.
    Published("openai-community/gpt2-medium", "AutoModelForCausalLM", "GPT2LMHeadModel", 354_823_168),
    # KerasHub's GPT-2 presets; model card: 774M.
    Published("openai-community/gpt2-large", "AutoModelForCausalLM", "GPT2LMHeadModel", 774_030_080),
    # KerasHub's GPT-2 presets; model card: "1.5B" (the paper's 1542M). The Hub's totals of these three also count
    # the causal-mask buffers (attn.bias) the old checkpoints saved.
    Published("openai-community/gpt2-xl", "AutoModelForCausalLM", "GPT2LMHeadModel", 1_557_611_200),
    # Hub safetensors of roberta-base: F32 124,697,433 (plus I64 514, the position_ids buffer, not a weight the
    # model builds); RoBERTa paper: 125M. The LM head's decoder is tied to the embedding.
    Published("FacebookAI/roberta-base", "AutoModelForMaskedLM", "RobertaForMaskedLM", 124_697_433),
    # gpt-oss model card (arXiv 2508.10925, "Model architecture"): 20.9B and 116.8B total parameters. The Hub counts
    # the MXFP4 blocks as U8 elements, so no exact total is published; transformers builds the experts in bf16.
    Published("openai/gpt-oss-20b", "AutoModelForCausalLM", "GptOssForCausalLM", "20.9B"),
    Published("openai/gpt-oss-120b", "AutoModelForCausalLM", "GptOssForCausalLM", "116.8B"),
    # Hub safetensors total of Qwen2.5-1.5B-Instruct (BF16 header: 1,543,714,304 elements); model card: 1.54B.
    # config.json as transformers prints it in a public fine-tuning log (tied embeddings).
    Published("Qwen/Qwen2.5-1.5B-Instruct", "AutoModelForCausalLM", "Qwen2ForCausalLM", 1_543_714_304),
    # Hub safetensors total (quoted publicly, BF16); model card: 3.09B (tied embeddings). config.json as a public
    # script quotes it for Qwen/Qwen2.5-3B, but torch_dtype bfloat16 (the dtype its safetensors are stored in) where
    # that copy says float32; model_zoo/refresh.py settles it where a network exists.
    Published("Qwen/Qwen2.5-3B", "AutoModelForCausalLM", "Qwen2ForCausalLM", 3_085_938_688),
    # Hub safetensors metadata: 7,298,617,344; model card: 7B. config.json as Megatron-Bridge's tests mirror it.
    Published("allenai/OLMo-2-1124-7B", "AutoModelForCausalLM", "Olmo2ForCausalLM", 7_298_617_344),
    # The published safetensors index: total_size 54,864,793,600 bytes of F32 = 13,716,198,400; model card: 13B.
    # config.json and the index as a public repository mirrors them.
    Published("allenai/OLMo-2-1124-13B", "AutoModelForCausalLM", "Olmo2ForCausalLM", 13_716_198_400),
    # 32,234,279,936 as two public scale studies list it ("config-verified"); model card: 32B. config.json assembled:
    # the sizes as OLMo-core's olmo2_32B config gives them (d_model 5120, 64 layers, 40 heads over 8 KV heads, FFN
    # 27648) on the OLMo 2 13B file's other keys (the same tokenizer, norms and rope_theta 500000); torch_dtype is
    # left out (no public copy found: pass --dtype), as is transformers_version.
    Published("allenai/OLMo-2-0325-32B", "AutoModelForCausalLM", "Olmo2ForCausalLM", 32_234_279_936),
    # A public study's count, 13.72B (the base's sizes); bundled apart from the base, not aliased to it, as its
    # checkpoint is bfloat16 where the base's is float32. config.json as the same public repository mirrors it.
    Published("allenai/OLMo-2-1124-13B-Instruct", "AutoModelForCausalLM", "Olmo2ForCausalLM", "13.72B"),
    # Total parameters of the pinned revision as a public scale study lists them: 1,484,916,736; model card: 1B.
    # config.json as Megatron-Bridge's tests mirror it (token ids left out there, as here).
    Published("allenai/OLMo-2-0425-1B", "AutoModelForCausalLM", "Olmo2ForCausalLM", 1_484_916_736),
    # The checkpoint's 134,515,008 BF16 scalars (272 tensors, quoted publicly); model card: 135M. Tied embeddings.
    Published("HuggingFaceTB/SmolLM2-135M", "AutoModelForCausalLM", "LlamaForCausalLM", 134_515_008),
    # The 290 tensors of the pinned revision (a10cc151) as public GGUF conversions count them (tensor_values,
    # n_params): 361,821,120; model card: 360M. Tied embeddings. config.json assembled from public copies of its
    # sizes (960 wide, 32 layers, 15 heads over 5 KV heads, 2560 MLP, 49,152 tokens, 8192 positions, tied); its
    # token ids and initializer range are left out (they change no size); model_zoo/refresh.py fetches the file.
    Published("HuggingFaceTB/SmolLM2-360M-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 361_821_120),
    # The loaded count public code checks (sum of numel, tied embeddings) and the GGUF's params: 1,711,376,384;
    # model card: 1.7B. config.json as two public copies quote it from the Hub (revision 31b70e2e), with its
    # transformers.js block.
    Published("HuggingFaceTB/SmolLM2-1.7B-Instruct", "AutoModelForCausalLM", "LlamaForCausalLM", 1_711_376_384),
    # The published safetensors index: 3,075,098,624 (tied embeddings); model card: 3B. config.json assembled from
    # public copies (sizes, no_rope_layers every fourth layer, token ids); refresh it with model_zoo/refresh.py.
    Published("HuggingFaceTB/SmolLM3-3B", "AutoModelForCausalLM", "SmolLM3ForCausalLM", 3_075_098_624),
    # Hub API safetensors total (BF16): 14,659,507,200; model card: 14B. config.json as a public walkthrough
    # prints it.
    Published("microsoft/phi-4", "AutoModelForCausalLM", "Phi3ForCausalLM", 14_659_507_200),
    # Hub safetensors total (F32): 1,543,490,560; model card: 1.55B. config.json as transformers prints it in a
    # public distil-whisper walk-through (keys equal to WhisperConfig's defaults are left out, as it prints).
    Published("openai/whisper-large-v3", "AutoModelForSpeechSeq2Seq", "WhisperForConditionalGeneration", 1_543_490_560),
    # The Hub API's safetensors metadata: 8,292,166,656 BF16 (five shards); model card: 7B (8.29B with the vision
    # tower). config.json as transformers 4.53 writes it (musubi-tuner quotes it for Qwen-Image's text encoder, the
    # same checkpoint).
    Published("Qwen/Qwen2.5-VL-7B-Instruct", "AutoModelForImageTextToText", "Qwen2_5_VLForConditionalGeneration", 8_292_166_656),
    # Hub safetensors total as public model listings quote it: "60.5M" (model card: 60 million); the embedding is
    # shared by encoder, decoder and LM head. config.json as transformers 4.46 re-saves it in a public copy.
    Published("google-t5/t5-small", "AutoModelForSeq2SeqLM", "T5ForConditionalGeneration", "60.5M"),
    # Hub safetensors total as public model listings quote it: "~428M" (CLIP ViT-L/14: the text tower 123,060,480,
    # the vision tower, both projections and logit_scale). config.json as transformers 5.5 re-saves it in a public
    # copy (the published file's text_config_dict and vision_config_dict written out, same sizes).
    Published("openai/clip-vit-large-patch14", "AutoModel", "CLIPModel", "428M"),
]

# The bundled diffusion pipelines' published counts, component by component (tests/model_zoo/
# test_pipeline_parameter_counts.py builds each component on meta against them; `vramsim models` lists the
# denoiser's). Text encoders: CLIP ViT-L/14's text tower 123,060,480; OpenCLIP ViT-bigG/14's with its projection
# 694,659,840.

PIPELINES: dict[str, dict[str, int | str]] = {
    # SD 1.5 UNet: 859,520,964 (Hub safetensors total; "860M UNet" in the model card); the VAE is SD's kl-f8, 83,653,863.
    "stable-diffusion-v1-5/stable-diffusion-v1-5": {"text_encoder": 123_060_480, "unet": 859_520_964, "vae": 83_653_863},
    # SDXL base: UNet 2,567,463,684 ("2.6B"), the same kl-f8 VAE architecture, CLIP ViT-L and OpenCLIP bigG.
    "stabilityai/stable-diffusion-xl-base-1.0": {
        "text_encoder": 123_060_480,
        "text_encoder_2": 694_659_840,
        "unet": 2_567_463_684,
        "vae": 83_653_863,
    },
    # FLUX.1-dev: transformer 11,901,408,320 (Hub safetensors total, "12B"); T5-v1.1-XXL's encoder 4,762,310,656; the
    # 16-channel VAE without quant convs 83,819,683. schnell has no guidance embedder: 10,229,760 fewer.
    "black-forest-labs/FLUX.1-dev": {
        "text_encoder": 123_060_480,
        "text_encoder_2": 4_762_310_656,
        "transformer": 11_901_408_320,
        "vae": 83_819_683,
    },
    # FLUX.1-Kontext-dev: model_index.json names FluxKontextPipeline with FLUX.1-dev's component classes (as public
    # copies of it write it); its transformer is "12B" (the model card) and its component configs were not findable,
    # so every component's config is FLUX.1-dev's (the same FluxTransformer2DModel, CLIP, T5-v1.1-XXL and 16-channel VAE).
    "black-forest-labs/FLUX.1-Kontext-dev": {
        "text_encoder": 123_060_480,
        "text_encoder_2": 4_762_310_656,
        "transformer": "12B",
        "vae": 83_819_683,
    },
    "black-forest-labs/FLUX.1-schnell": {
        "text_encoder": 123_060_480,
        "text_encoder_2": 4_762_310_656,
        "transformer": 11_891_178_560,
        "vae": 83_819_683,
    },
    # SD3 / SD3.5 medium, as counted on the loaded checkpoints (sum of numel over each pipeline component's parameters,
    # printed in public code that loads them: a per-component profile of StableDiffusion3Pipeline with SD3-medium, the
    # flow_grpo SD3.5-medium training script's comments): CLIP-L with its 768x768 projection 123,650,304, CLIP-G with
    # its projection, T5-v1.1-XXL's encoder, FLUX's 16-channel VAE architecture; the MMDiT 2,028,328,000 ("2B"), the
    # MMDiT-X (13 dual-attention blocks, QK RMSNorm) 2,243,171,520 ("2.5B" with the pos_embed buffer).
    "stabilityai/stable-diffusion-3-medium-diffusers": {
        "text_encoder": 123_650_304,
        "text_encoder_2": 694_659_840,
        "text_encoder_3": 4_762_310_656,
        "transformer": 2_028_328_000,
        "vae": 83_819_683,
    },
    "stabilityai/stable-diffusion-3.5-medium": {
        "text_encoder": 123_650_304,
        "text_encoder_2": 694_659_840,
        "text_encoder_3": 4_762_310_656,
        "transformer": 2_243_171_520,
        "vae": 83_819_683,
    },
    # PixArt-Sigma XL/2 1024: the DiT 610,856,096 ("0.6B"; 603 tensors, as a public staging of the checkpoint counts
    # them), T5-v1.1-XXL's encoder, the SDXL VAE.
    "PixArt-alpha/PixArt-Sigma-XL-2-1024-MS": {"text_encoder": 4_762_310_656, "transformer": 610_856_096, "vae": 83_653_863},
    # Wan 2.1 T2V 1.3B: the DiT 1,418,996,800 (the Hub's metadata for Wan-AI/Wan2.1-T2V-1.3B, "1.3B"), UMT5-XXL's
    # encoder 5,680,910,336 (22,723,641,344 bytes of fp32 in its index), the causal 3D VAE 126,892,531.
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers": {"text_encoder": 5_680_910_336, "transformer": 1_418_996_800, "vae": 126_892_531},
    # LTX-Video 2B: the transformer (28 blocks of 2048, the same in 0.9.0 and 0.9.1) 1,923,385,472, the "trainable
    # parameters" finetrainers prints for its LTX-Video full fine-tune (docs/models/ltx_video.md); T5-v1.1-XXL's
    # encoder. The causal video VAEs are diffusers' converter configs (scripts/convert_ltx_to_diffusers.py
    # get_vae_config): 0.9.0 (the Lightricks/LTX-Video folders, per Lightricks' LTX-Video-Trainer model_loader)
    # 419,193,649; 0.9.1's timestep-conditioned decoder with noise injection 934,976,434. (No count is printed for
    # them; finetrainers' memory_allocated after loading Lightricks/LTX-Video in bf16 with a rank-128 LoRA, 13.486 GiB,
    # is the 0.9.0 VAE's sum within 0.25%, and 6.9% under the 0.9.1 VAE's.)
    "Lightricks/LTX-Video": {"text_encoder": 4_762_310_656, "transformer": 1_923_385_472, "vae": 419_193_649},
    "Lightricks/LTX-Video-0.9.1": {"text_encoder": 4_762_310_656, "transformer": 1_923_385_472, "vae": 934_976_434},
    # SD3.5 large: the MMDiT of 38 blocks of 2432 (transformer/config.json as public loaders quote it, no dual
    # attention layers), "8.1 billion parameters" in Stability AI's announcement; the text encoders and VAE are SD3.5
    # medium's ("stay exactly the same", diffusers' SD3.5 blog).
    "stabilityai/stable-diffusion-3.5-large": {
        "text_encoder": 123_650_304,
        "text_encoder_2": 694_659_840,
        "text_encoder_3": 4_762_310_656,
        "transformer": "8.1B",
        "vae": 83_819_683,
    },
    # CogVideoX-5b: the transformer 5,570,283,072 (the "trainable parameters" finetrainers prints for its full
    # fine-tune), T5-v1.1-XXL's encoder, the 3D VAE 215,583,907 (a paper's per-component count of the CogVideoX-5B
    # stack). Configs as public CogVideoX loaders quote them.
    "THUDM/CogVideoX-5b": {"text_encoder": 4_762_310_656, "transformer": 5_570_283_072, "vae": 215_583_907},
    # HunyuanVideo (the diffusers repository): exact element sums of the published shards, as a public component
    # inventory lists them: MMDiT 12,821,012,544, LLaVA-Llama-3 text tower 7,505,186,816, CLIP-L 123,060,480, causal
    # 3D VAE 246,478,803. The text encoders' configs as musubi-tuner copies them from the HunyuanVideo repository.
    "hunyuanvideo-community/HunyuanVideo": {
        "text_encoder": 7_505_186_816,
        "text_encoder_2": 123_060_480,
        "transformer": 12_821_012_544,
        "vae": 246_478_803,
    },
    # Qwen-Image: the Hub's safetensors.total for the transformer, 20,430,401,088 ("20B MMDiT"); Qwen2.5-VL-7B as its
    # text encoder, 8,292,166,656 (the Hub's total for Qwen/Qwen2.5-VL-7B-Instruct); the VAE 126,892,531.
    "Qwen/Qwen-Image": {"text_encoder": 8_292_166_656, "transformer": 20_430_401_088, "vae": 126_892_531},
    # Wan 2.2 (the Diffusers repositories): the configs as diffusers' converter (scripts/convert_wan_to_diffusers.py,
    # get_transformer_config, vae22_diffusers_config, the WanPipeline it saves) writes them, UMT5-XXL as for Wan 2.1.
    # TI2V-5B: the dense DiT, "5B" (model card); its 16x VAE has no published count, so it is not checked here.
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers": {"text_encoder": 5_680_910_336, "transformer": "5B"},
    # T2V-A14B: two experts of Wan 2.1 T2V-14B's sizes, "14B active" each (model card; its "27B total" is not what
    # two experts of 14.29B make, so only the per-expert figure is checked); Wan 2.1's VAE.
    "Wan-AI/Wan2.2-T2V-A14B-Diffusers": {
        "text_encoder": 5_680_910_336,
        "transformer": "14B",
        "transformer_2": "14B",
        "vae": 126_892_531,
    },
}
