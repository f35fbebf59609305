"""The oneDNN convolution rule against the real kernels: the bytes it predicts for an op equal the
peak c10's CPU allocator held inside that op above its outputs (torch.profiler)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from profiled import transient_bytes

from vramsim.tracer.kernels.cpu_kernels import conv2d_workspaces, conv_backend
from vramsim.tracer.kernels.onednn_conv import onednn_conv_isa, onednn_conv_workspaces

pytestmark = pytest.mark.skipif(onednn_conv_isa() is None, reason="formats are modelled for AVX-512 CPUs without AMX")

_CONV = torch.ops.aten.convolution.default
_CONV_BACKWARD = torch.ops.aten.convolution_backward.default


def _meta(t: Any) -> Any:
    if isinstance(t, torch.Tensor):
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return t


def _predicted(func: Any, args: tuple[Any, ...]) -> int:
    return sum(onednn_conv_workspaces(func, tuple(_meta(a) for a in args), {}))


def _measured(func: Any, args: tuple[Any, ...]) -> int:
    transient_bytes(lambda: func(*args))  # the first call creates oneDNN's primitives
    return transient_bytes(lambda: func(*args))


# (batch, in channels, out channels, side, kernel, stride, padding): channel counts that are
# multiples of 16 and first convolutions (3 channels), 1x1 and 3x3, batch 1 to 4, stride 2
_SHAPES = [
    (2, 96, 32, 32, 3, 1, 1), (2, 64, 64, 8, 3, 1, 1), (2, 3, 32, 16, 3, 1, 1), (2, 32, 64, 8, 1, 1, 0),
    (1, 96, 32, 16, 3, 1, 1), (2, 128, 64, 8, 3, 1, 1), (2, 64, 32, 16, 1, 1, 0), (4, 48, 16, 8, 3, 1, 1),
    (2, 32, 32, 8, 3, 2, 1), (2, 3, 32, 16, 3, 2, 1), (2, 16, 32, 9, 3, 2, 0),
]  # fmt: skip
_UNEVEN = [
    (1, 4, 8, 128, 3, 1, 1), (1, 8, 8, 64, 3, 1, 1), (1, 16, 8, 64, 3, 1, 1), (2, 20, 12, 32, 3, 1, 1),
    (1, 24, 24, 32, 3, 1, 1), (2, 32, 3, 16, 3, 1, 1), (1, 8, 8, 64, 1, 1, 0), (2, 12, 20, 16, 3, 2, 1),
]  # fmt: skip
"""Channel counts that are not multiples of 16: the contiguous forward pads them to 16 (with a padded-bias scratchpad)."""
_IDS = ["n{}-{}to{}-{}px-k{}s{}p{}".format(*s) for s in _SHAPES]
_UNEVEN_IDS = ["n{}-{}to{}-{}px-k{}s{}p{}".format(*s) for s in _UNEVEN]


def _operands(shape: tuple[int, ...], channels_last: bool) -> tuple[torch.Tensor, ...]:
    n, ic, oc, side, k, stride, padding = shape
    torch.manual_seed(0)
    x, weight, bias = torch.randn(n, ic, side, side), torch.randn(oc, ic, k, k), torch.randn(oc)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    params = ([stride, stride], [padding, padding], [1, 1], False, [0, 0], 1)
    return x, weight, bias, params  # type: ignore[return-value]


def _thnn_when_single_threaded(shape: tuple[int, ...]) -> bool:
    """aten/src/ATen/native/ConvUtils.h ``ConvParams::use_mkldnn``: an fp32 1x1 convolution with unit
    stride and dilation and a batch under 16 stays off oneDNN on one thread ("THNN is faster when
    single-threaded"); the tests run on one thread (conftest.py)."""
    n, _, _, _, k, stride, _ = shape
    return k == 1 and stride == 1 and n < 16


@contextlib.contextmanager
def _onednn_threads(shape: tuple[int, ...]) -> Iterator[None]:
    """The kernels on a thread count where the selector picks oneDNN: two for the shapes it keeps off
    oneDNN on one thread (``_thnn_when_single_threaded``), the suite's one otherwise."""
    before = torch.get_num_threads()
    if _thnn_when_single_threaded(shape):
        torch.set_num_threads(max(2, before))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", _SHAPES + _UNEVEN, ids=_IDS + _UNEVEN_IDS)
def test_contiguous_forward_is_the_kernels(shape: tuple[int, ...], with_bias: bool) -> None:
    """nChw16c reorders of source, weights and destination (channels padded to 16), then the dense output; where oc
    is not a multiple of 16, the bias padded in a scratchpad."""
    x, weight, bias, params = _operands(shape, channels_last=False)
    args = (x, weight, bias if with_bias else None, *params)
    with _onednn_threads(shape):
        assert conv_backend(x, weight, *params) == torch._C._ConvBackend.Mkldnn
        assert _predicted(_CONV, args) == _measured(_CONV, args) > 0


@pytest.mark.parametrize("shape", [s for s in _SHAPES if _thnn_when_single_threaded(s)], ids=lambda s: "n{}-{}to{}".format(*s))
def test_single_threaded_1x1_takes_slow2d(shape: tuple[int, ...]) -> None:
    """On one thread the selector sends those 1x1 convolutions to Slow2d: the oneDNN rule adds nothing,
    and Slow2d's columns are a view of the input, so the real kernel holds nothing inside the op either."""
    x, weight, bias, params = _operands(shape, channels_last=False)
    args = (x, weight, bias, *params)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert conv_backend(x, weight, *params) == torch._C._ConvBackend.Slow2d
        assert _predicted(_CONV, args) == 0
        assert sum(conv2d_workspaces(_CONV, args, {})) == _measured(_CONV, args) == 0
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("shape", [s for s in _SHAPES if s[5] == 1 and s[0] < 4], ids=lambda s: "n{}-{}to{}".format(*s))
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_backward_is_the_kernels(shape: tuple[int, ...], channels_last: bool) -> None:
    """Backward data and weights: reorders, blocked gradients and their dense (and channels-last)
    copies, and the weight made channels-last contiguous on the channels-last path."""
    x, weight, bias, params = _operands(shape, channels_last=channels_last)
    grad_output = torch.randn_like(_CONV(x, weight, bias, *params))
    args = (grad_output, x, weight, [shape[2]], *params, [shape[1] > 3, True, True])
    with _onednn_threads(shape):
        assert conv_backend(x, weight, *params) == torch._C._ConvBackend.Mkldnn
        assert _predicted(_CONV_BACKWARD, args) == _measured(_CONV_BACKWARD, args) > 0


def test_channels_last_forward_misses_only_the_brgemm_scratchpad() -> None:
    """The channels-last forward (brgemm convolution) books a scratchpad the rule leaves out: the
    rule is below the kernel by that much and no more (a documented limitation)."""
    x, weight, bias, params = _operands((2, 64, 64, 8, 3, 1, 1), channels_last=True)
    args = (x, weight, bias, *params)
    missing = _measured(_CONV, args) - _predicted(_CONV, args)
    assert 0 < missing <= 4096 + 4120 * torch.get_num_threads()


@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_unmodelled_shapes_add_nothing(channels_last: bool) -> None:
    """Shapes whose kernels the rule does not follow: oc = 3 in backward, and in the channels-last forward."""
    x, weight, bias, params = _operands((2, 32, 3, 16, 3, 1, 1), channels_last=channels_last)
    forward = (_meta(x), _meta(weight), _meta(bias), *params)
    backward = (_meta(torch.empty(2, 3, 16, 16)), _meta(x), _meta(weight), [3], *params, [True, True, True])
    assert onednn_conv_workspaces(_CONV_BACKWARD, backward, {}) == []
    if channels_last:
        assert onednn_conv_workspaces(_CONV, forward, {}) == []
