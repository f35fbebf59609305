"""Does FLUX.1-dev generate a 1024 px image on a 24 GB card (RTX 4090) with model CPU offload, fp8 layerwise
casting, or both?

The pipeline as diffusers runs it in bf16: CLIP and T5-XXL on the prompt, 28 steps of the 12B transformer, the
VAE decode. ``enable_model_cpu_offload()`` keeps one component's weights on the device at a time (the
transformer's 22.17 GiB while it denoises); ``transformer.enable_layerwise_casting(storage_dtype=
torch.float8_e4m3fn, compute_dtype=torch.bfloat16)`` stores its layers in fp8 and upcasts each while it runs,
diffusers' own hooks run in the trace. Each option is one trace of the whole pipeline (about a minute and a
half each on two cores).
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

OPTIONS = {
    "--offload model": {"offload": "model"},
    "--layerwise-casting fp8_e4m3": {"layerwise_casting": "fp8_e4m3"},
    "both of them": {"offload": "model", "layerwise_casting": "fp8_e4m3"},
}


def main() -> None:
    reports = {
        name: vramsim.simulate(
            "black-forest-labs/FLUX.1-dev", task="generate", num_inference_steps=28, device="rtx-4090", **options
        )
        for name, options in OPTIONS.items()
    }
    print(f"{'option':<30} {'peak':>10} {'on device':>10} {'set by':>12} {'fits':>5}")
    for name, report in reports.items():
        top = max(report.components, key=lambda c: c.peak_bytes)
        print(
            f"{name:<30} {format_bytes(report.peak_bytes):>10} {format_bytes(report.device_bytes):>10} "
            f"{top.name:>12} {'yes' if report.fits else 'no':>5}"
        )
    fitting = [name for name, report in reports.items() if report.fits]
    if not fitting:
        print("Answer: FLUX.1-dev at 1024 px does not fit a 24 GB RTX 4090 with these options.")
        return
    name = fitting[0]
    alone = [other for other in OPTIONS if other != "both of them" and not reports[other].fits]
    print(
        f"Answer: FLUX.1-dev at 1024 px fits a 24 GB RTX 4090 with {name} "
        f"({format_bytes(reports[name].device_bytes)} on the device)"
        + (f"; {' or '.join(alone)} alone does not." if alone else ".")
    )


if __name__ == "__main__":
    main()
