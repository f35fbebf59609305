"""Quantized weights as the libraries make them: bitsandbytes, GPTQ, AWQ, FP8, torchao."""
