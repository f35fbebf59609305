"""Does FLUX.1-dev generate a 1024 px image on a 16 GB card (RTX 4080) with model CPU offload, with its transformer
in bf16 or loaded from a GGUF Q4_K file?

The pipeline as diffusers runs it in bf16 with ``enable_model_cpu_offload()``: one component's weights on the device
at a time. ``FluxTransformer2DModel.from_single_file(path, quantization_config=GGUFQuantizationConfig(
compute_dtype=torch.bfloat16))`` holds each linear weight as GGUF's Q4_K blocks (144 bytes per 256 weights) and
dequantizes it whole in each forward; diffusers' own quantizer and layers run in the trace. Each option is one trace
of the whole pipeline (under a minute each on two cores).
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

OPTIONS = {"bf16 transformer": {}, "GGUF Q4_K transformer": {"quantization": "gguf-q4_k"}}


def main() -> None:
    reports = {
        name: vramsim.simulate(
            "black-forest-labs/FLUX.1-dev",
            task="generate",
            num_inference_steps=28,
            device="rtx-4080",
            offload="model",
            **options,
        )
        for name, options in OPTIONS.items()
    }
    print(f"{'option':<24} {'transformer':>12} {'peak':>10} {'on device':>10} {'fits':>5}")
    for name, report in reports.items():
        transformer = next(c.weights_bytes for c in report.components if c.name == "transformer")
        print(
            f"{name:<24} {format_bytes(transformer):>12} {format_bytes(report.peak_bytes):>10} "
            f"{format_bytes(report.device_bytes):>10} {'yes' if report.fits else 'no':>5}"
        )
    fitting = [name for name, report in reports.items() if report.fits]
    if not fitting:
        print("Answer: FLUX.1-dev at 1024 px does not fit a 16 GB RTX 4080 with model offload, even in GGUF Q4_K.")
        return
    name = fitting[0]
    print(
        f"Answer: with model offload FLUX.1-dev at 1024 px fits a 16 GB RTX 4080 with the {name} "
        f"({format_bytes(reports[name].device_bytes)} on the device)"
        + ("." if len(fitting) == len(reports) else f"; the {', '.join(n for n in OPTIONS if n not in fitting)} does not.")
    )


if __name__ == "__main__":
    main()
