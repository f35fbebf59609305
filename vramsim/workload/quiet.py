"""Library messages that tell a vramsim user nothing, silenced one by one where vramsim calls the library.

Each filter names one message (category and text), so anything else a library says still shows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.profiler import profile

__all__ = [
    "quiet_default_loss",
    "quiet_image_processors",
    "quiet_joint_trace",
    "quiet_optional_libraries",
    "quiet_peft",
    "quiet_profiler",
    "quiet_wan_vae_clip_output",
]


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """``peft.get_peft_model``: peft reads transformers' deprecated ``is_gradient_checkpointing``
    (a FutureWarning from transformers 5), and tells that it set ``fan_in_fan_out`` itself for
    GPT-2's ``Conv1D`` (the layout of the adapter's weights, not their size)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False", category=UserWarning)
        yield


@contextlib.contextmanager
def quiet_joint_trace() -> Iterator[None]:
    """AOTAutograd traces the joint forward-backward graph with ``torch.autograd.grad`` on its own
    functional tensors, and autograd's fallback warns that ``aten::nll_loss`` (the loss of every
    causal-LM head) has no autograd kernel there; the real ``torch.compile`` warns the same, and
    the traced backward holds the loss's gradient all the same."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="aten::nll_loss: an autograd kernel was not registered", category=UserWarning)
        yield


class _DropMessage(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


@contextlib.contextmanager
def quiet_default_loss() -> Iterator[None]:
    """A model whose class name names no loss (``GPT2LMHeadModel``) makes transformers log
    "`loss_type=None` was set in the config but it is unrecognized" and use the causal-LM loss,
    the one such a model computes anyway."""
    with _dropping("transformers.modeling_utils", "`loss_type=None` was set in the config but it is unrecognized"):
        yield


@contextlib.contextmanager
def quiet_image_processors() -> Iterator[None]:
    """Importing a diffusers pipeline imports its image processors; without torchvision transformers
    logs that ``CLIPImageProcessor`` falls back to its PIL class. vramsim never processes an image."""
    with _dropping("transformers.utils.import_utils", "requires torchvision (not installed); falling back to"):
        yield


@contextlib.contextmanager
def quiet_attention_backend() -> Iterator[None]:
    """Choosing a diffusers attention backend logs that backends are experimental: vramsim chooses one only
    to run the attention the user asked for."""
    with _dropping("diffusers.models.modeling_utils", "Attention backends are an experimental feature"):
        yield


@contextlib.contextmanager
def quiet_wan_vae_clip_output() -> Iterator[None]:
    """Wan 2.2's VAE config, as diffusers' converter wrote it in July 2025, carries ``clip_output``, which diffusers
    took out of ``AutoencoderKLWan`` days later (#12041): building it logs that the key is ignored, which it is."""
    with _dropping("diffusers.configuration_utils", "{'clip_output': False} were passed to AutoencoderKLWan"):
        yield


def quiet_optional_libraries() -> None:
    """torchao and bitsandbytes, which peft and diffusers import whenever they are installed (so wherever
    they decide, not where vramsim calls them): torchao logs a warning per CUDA extension it cannot load
    here, and its import makes torch's pytree warn that its ``str`` enums need no registration; diffusers
    (0.42) logs that it cannot import tensor classes torchao 0.18 no longer has (for loading torchao
    checkpoints, which vramsim never loads); bitsandbytes (0.50), on a CPU with AVX512-BF16, logs that it
    cannot fetch its optional ``kernels`` package for CPU 4-bit matmuls (it falls back to its own; vramsim
    runs none on the host it plans for), and where ``kernels`` is installed (transformers 5.25 requires it)
    and the Hub is offline, ``kernels`` logs that it skips that kernel's publisher check first. Dropped for
    the process, each by its text."""
    logging.getLogger("torchao").setLevel(logging.ERROR)
    logging.getLogger("torch.utils._pytree").addFilter(
        _DropMessage("is an Enum subclass and is now natively supported by torch.compile")
    )
    logging.getLogger("diffusers.quantizers.torchao.torchao_quantizer").addFilter(
        _DropMessage("Unable to import `torchao` Tensor objects")
    )
    logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(
        _DropMessage("Failed to load CPU gemm_4bit_forward from kernels-community")
    )
    logging.getLogger("kernels._internals.hf_hub").addFilter(
        _DropMessage("Skipping publisher trust check for 'kernels-community/quantization-bitsandbytes'")
    )


@contextlib.contextmanager
def _dropping(logger_name: str, text: str) -> Iterator[None]:
    """``logger_name``'s records that contain ``text`` dropped while entered."""
    logger = logging.getLogger(logger_name)
    drop = _DropMessage(text)
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@contextlib.contextmanager
def quiet_profiler(prof: profile) -> Iterator[profile]:
    """``prof`` running, without the lines Kineto writes to the process's stderr (file descriptor 2)
    when it starts and stops ("USDT: ... profiler_start"; no log level turns them off). Only its
    start and stop are silenced: what the profiled code prints still shows."""
    with _no_stderr():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _no_stderr():
            prof.__exit__(None, None, None)


@contextlib.contextmanager
def _no_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
