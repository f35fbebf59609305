"""quanto's int4/int2 weights per target, against the sizes quanto's source gives: ``WeightQBitsTensor.create``'s
choice, the tensors each class holds, and what each linear's forward allocates."""

from __future__ import annotations

import pytest
import torch

from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import get_device
from vramsim.workload.quantization.quanto_packing import QuantoPacking, check_quanto_packing, packing_for
from vramsim.workload.targets import resolve_target

pytest.importorskip("optimum.quanto")

_RUN = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64}


@pytest.mark.parametrize(
    ("device", "bits", "dtype", "size", "group", "packing"),
    [
        ("cpu", 4, torch.bfloat16, (256, 512), 128, QuantoPacking.TINYGEMM),
        ("cpu", 4, torch.float32, (256, 512), 128, QuantoPacking.PLAIN),
        ("cpu", 4, torch.float16, (256, 512), 128, QuantoPacking.PLAIN),
        ("a100", 4, torch.bfloat16, (256, 512), 128, QuantoPacking.TINYGEMM),
        ("h100", 4, torch.float16, (256, 512), 128, QuantoPacking.AWQ),
        ("h100", 4, torch.float16, (64, 512), 128, QuantoPacking.PLAIN),
        ("a100", 4, torch.bfloat16, (256, 96), None, QuantoPacking.PLAIN),
        ("a100", 4, torch.bfloat16, (256, 480), 96, QuantoPacking.PLAIN),
        ("a100", 2, torch.bfloat16, (256, 512), 128, QuantoPacking.PLAIN),
        ("v100", 4, torch.float16, (256, 512), 128, QuantoPacking.PLAIN),
        ("t4", 4, torch.bfloat16, (256, 512), 128, QuantoPacking.PLAIN),
        ("mi300x", 4, torch.bfloat16, (256, 512), 128, QuantoPacking.PLAIN),
    ],
)
def test_each_target_gets_the_class_quantos_create_picks(
    device: str, bits: int, dtype: torch.dtype, size: tuple[int, int], group: int | None, packing: QuantoPacking
) -> None:
    """create: AWQ for int4 fp16 groups of 128, 128+ rows on CUDA sm 8.0+; TinyGemm for int4 bf16 groups of 128 on
    the CPU or CUDA sm 8.0+ (ROCm has no torch.version.cuda); the plain tensor otherwise."""
    assert packing_for(get_device(device), bits=bits, dtype=dtype, size=size, group_size=group) is packing


def test_a_quanto_older_than_the_rules_followed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.2.6")
    with pytest.raises(UnsupportedError, match=r"as optimum-quanto 0\.2\.7 packs it, not 0\.2\.6: pip install -U"):
        check_quanto_packing(4, get_device("cpu"), torch.bfloat16)


def _linears(wide_flux: str) -> dict[str, tuple[int, int]]:
    from diffusers import FluxTransformer2DModel

    with torch.device("meta"):
        model = FluxTransformer2DModel.from_config(FluxTransformer2DModel.load_config(wide_flux, subfolder="transformer"))
    return {
        f"transformer.{name}": (module.out_features, module.in_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }


def _trace(wide_flux: str, device: str, dtype: str, quantization: str = "quanto-int4") -> object:
    config = SimulationConfig(device=device, dtype=dtype, quantization=quantization, **_RUN)
    return build_and_trace(wide_flux, config, resolve_target(device), checkpointing="marked")[2]


def test_tinygemm_on_an_a100_holds_torchs_tiles_and_multiplies_without_dequantizing(wide_flux: str) -> None:
    """bf16 on sm 8.0+: a linear of K = 128j in features holds int32 tiles [N / 8, K / 32, 32, 1] (K / 2 bytes a
    row: _convert_weight_to_int4pack with innerKTiles 2) and bf16 scale-shifts [K / 128, N, 2]; its forward is one
    _weight_int4pack_mm writing [rows, N] in bf16, nothing unpacked. Linears of K <= 128 (no group) stay plain."""
    trace = _trace(wide_flux, "a100", "bf16")
    linears = _linears(wide_flux)
    tinygemm = {name for name, (_, k) in linears.items() if k > 128 and k % 128 == 0}
    weights = {(s.owner, s.dtype, s.shape) for s in trace.storages if s.category == "parameters"}  # type: ignore[attr-defined]
    for name in tinygemm:
        n, k = linears[name]
        assert (f"{name}.weight._data._data", "int32", (n // 8, k // 32, 32, 1)) in weights, name
        assert (f"{name}.weight._scale_shift", "bfloat16", (k // 128, n, 2)) in weights, name
    made = [s for s in trace.storages if s.module in tinygemm]  # type: ignore[attr-defined]
    assert not [s for s in made if s.op == "quanto.unpack"]
    products = {(s.module, s.nbytes) for s in made if s.op == "aten._weight_int4pack_mm"}
    assert {module for module, _ in products} == {m for m in tinygemm if any(s.module == m for s in made)}
    for module, nbytes in products:
        assert nbytes % (linears[module][0] * 2) == 0  # [rows, N] bf16
    plain = {name for name, (_, k) in linears.items() if k <= 128}
    assert {s.module for s in trace.storages if s.op == "quanto.unpack"} <= plain  # type: ignore[attr-defined]


def test_plain_qbits_on_a_v100_unpack_then_dequantize_each_weight(wide_flux: str) -> None:
    """fp16 below sm 8.0 (and int2 everywhere): a PackedTensor of the grouped values (N x K / (8 / bits) bytes) and
    fp16 scales and shifts per group; each forward unpacks the whole weight (N x K uint8, quanto's CUDA unpack
    allocating its output only) and scales it to N x K fp16 before the matmul."""
    for quantization, bits in (("quanto-int4", 4), ("quanto-int2", 2)):
        trace = _trace(wide_flux, "v100", "fp16", quantization)
        linears = _linears(wide_flux)
        params = {s.owner: s for s in trace.storages if s.category == "parameters"}  # type: ignore[attr-defined]
        for name, (n, k) in linears.items():
            groups = n * k // 128 if k > 128 else n  # QModuleMixin: groups of 128 (these K are multiples), none to 128
            assert params[f"{name}.weight._data._data"].nbytes == n * k * bits // 8, name
            assert params[f"{name}.weight._scale"].nbytes == params[f"{name}.weight._shift"].nbytes == groups * 2, name
        unpacked = {(s.module, s.nbytes) for s in trace.storages if s.op == "quanto.unpack"}  # type: ignore[attr-defined]
        assert unpacked and all(nbytes == linears[m][0] * linears[m][1] for m, nbytes in unpacked)
