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
