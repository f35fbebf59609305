"""What a run imports: a single model's never loads diffusers, nor vramsim's diffusion package."""

from __future__ import annotations

import subprocess
import sys


def test_serving_a_single_model_imports_no_diffusion() -> None:
    """``vramsim serve gpt2`` in a fresh process: diffusion is loaded for a pipeline only."""
    code = (
        "import sys; from vramsim.cli.main import main; "
        "assert main(['serve', 'gpt2', '--max-model-len', '256', '--json']) == 0; "
        "loaded = sorted(m for m in sys.modules if m.partition('.')[0] == 'diffusers' "
        "or m.startswith('vramsim.workload.diffusion')); assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_training_a_transformers_model_imports_neither_diffusers_nor_bitsandbytes() -> None:
    """``vramsim trace gpt2 --task train`` in a fresh process: diffusers (whose ``ModelMixin`` checkpointing asks
    about) and bitsandbytes (whose kernels the target's rules cover) load only for a model or optimizer of
    theirs; the CLI froze the stack it imported, out of the cyclic collector's rescans."""
    code = (
        "import gc, sys; from vramsim.cli.main import main; "
        "assert main(['trace', 'gpt2', '--task', 'train', '--seq-len', '64', '--no-cache', '--json']) == 0; "
        "loaded = sorted(m for m in sys.modules if m.partition('.')[0] in ('diffusers', 'bitsandbytes')); "
        "assert not loaded, loaded; assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
