"""The README stays short and the docs site holds every section it had.

The README of 2,542 lines became a short one beside docs/ (an mkdocs-material site, mkdocs.yml);
each of its sections moved to docs/ whole. These tests fail when a section goes missing, when the
README grows past its bound, or when the command CI runs leaves the README.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250
TEST_COMMAND = "python -m pytest -n 2"  # .ci/run runs it

OLD_README_HEADINGS = (
    "Set-up (two commands, offline-friendly)",
    "Run",
    "When it does not fit: advice with its savings, the largest fit, an exit status",
    "Activation checkpointing, every choice from one trace",
    "torch.compile: the saved set AOTAutograd's partitioner chooses, inductor's buffers",
    "Data parallelism, per rank",
    "Against published multi-GPU measurements",
    "Tensor and pipeline parallelism, per rank",
    "Fine-tuning on a quantized base (QLoRA)",
    "Pre-quantized checkpoints: GPTQ, AWQ, FP8, torchao",
    "LoRA on a GPTQ or AWQ base",
    "Against published fine-tuning measurements",
    "Training checkpoints: on disk, saving, restoring",
    "Sharded checkpoints: DCP and DeepSpeed ZeRO, per rank",
    "Long generations, derived from two short ones",
    "Serving budgets: KV cache the way serving engines count it",
    "Diffusion pipelines: text encoders, denoiser and the VAE decode",
    "FLUX.1-dev and schnell",
    "SD3 / SD3.5 medium, PixArt-Sigma, Wan 2.1 (video)",
    "LTX-Video (video)",
    "Diffusion training: a denoiser's step as diffusers' scripts run it",
    "Examples",
    "Tests",
    "How it works",
    "Accuracy against real CPU runs",
    "Against published GPU measurements",
    "Validation on a real GPU",
    "Coverage of architectures",
    "What is checked before anything runs",
    "Limits (today)",
)
"""Every ``##``, ``###`` and ``####`` heading of the README before it was cut down, in its order."""


def headings(path: Path) -> list[str]:
    """The Markdown headings of one file, outside fenced code blocks (a shell comment is not one)."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_readme_is_short() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines, at most {README_MAX_LINES}: move a section to docs/"


def test_every_old_readme_section_is_in_docs() -> None:
    assert doc_pages()
    in_docs = {title for page in doc_pages() for title in headings(page)}
    missing = [title for title in OLD_README_HEADINGS if title not in in_docs]
    assert not missing, f"sections of the old README in no docs/*.md page: {missing}"


def test_readme_keeps_the_test_command() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert any(line.split("#")[0].strip() == TEST_COMMAND for line in lines), f"README.md lost `{TEST_COMMAND}`"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace("python3 ", "python ")
    assert any(line.split("#")[0].strip() == TEST_COMMAND for line in ci.splitlines())


def test_readme_links_into_docs_exist() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]+)", README.read_text(encoding="utf-8"))
    assert links
    assert not [link for link in links if not (ROOT / link).is_file()]


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s*- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", config, flags=re.MULTILINE))
    pages = {page.name for page in doc_pages()}
    assert pages == nav, f"in docs/ but not the nav: {sorted(pages - nav)}; in the nav, no page: {sorted(nav - pages)}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
