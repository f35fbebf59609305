"""Re-download bundled configs from the Hugging Face Hub and report how each differs from the bundled copy.

    python -m vramsim.model_zoo.refresh [ID ...] [--write]

Run by hand where a network exists (gated repositories read ``HF_TOKEN`` as huggingface_hub does); no test
reaches the Hub. Without ids it checks every bundled model and pipeline. A model is its ``config.json``; a
pipeline is its ``model_index.json`` and each component file the zoo keeps (tokenizer configs keep only the
keys vramsim reads, so only those are compared). ``--write`` replaces the bundled files with the published
ones; the parameter-count tests (tests/model_zoo/) then say whether the published counts still hold.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vramsim.model_zoo import find, find_pipeline, model_ids, pipeline_ids

__all__ = ["Fetch", "bundled_files", "differences", "main", "refresh"]

Fetch = Callable[[str, str], str]
"""``(repo_id, filename) -> local path`` of the published file: huggingface_hub's ``hf_hub_download``."""

_SUBSET_FILES = ("tokenizer_config.json",)
"""Files the zoo keeps a few keys of: compared, and written, on those keys only."""


def bundled_files(model_id: str) -> tuple[Path, list[str]]:
    """The bundled folder of ``model_id`` and its files' paths relative to it (the repository's own paths)."""
    folder = find_pipeline(model_id) or find(model_id)
    if folder is None:
        raise ValueError(f"{model_id} is not bundled (`vramsim models` lists the bundled ids)")
    return folder, sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.json"))


def differences(bundled: Any, published: Any, *, path: str = "", bundled_keys_only: bool = False) -> list[str]:
    """One line per key whose value differs (``key: bundled -> published``), nested keys dotted; keys only one
    side has read ``(absent)`` on the other."""
    if not (isinstance(bundled, dict) and isinstance(published, dict)):
        return [] if bundled == published else [f"{path or '(file)'}: {bundled!r} -> {published!r}"]
    keys = sorted(bundled) if bundled_keys_only else sorted(set(bundled) | set(published))
    lines = []
    for key in keys:
        where = f"{path}.{key}" if path else key
        if key not in published:
            lines.append(f"{where}: {bundled[key]!r} -> (absent)")
        elif key not in bundled:
            lines.append(f"{where}: (absent) -> {published[key]!r}")
        else:
            lines.extend(differences(bundled[key], published[key], path=where))
    return lines


def refresh(model_id: str, fetch: Fetch, *, write: bool = False) -> dict[str, list[str]]:
    """Each bundled file of ``model_id`` against the one its repository publishes (an alias's bundled
    repository's): ``{relative path: difference lines}`` (none: the same); with ``write``, the bundled files take
    the published contents."""
    folder, files = bundled_files(model_id)
    repo_id = f"{folder.parent.name}/{folder.name}"
    report = {}
    for name in files:
        local = folder / name
        bundled = json.loads(local.read_text())
        published = json.loads(Path(fetch(repo_id, name)).read_text())
        subset = name.endswith(_SUBSET_FILES)
        if subset:
            published = {key: published[key] for key in bundled if key in published}
        report[name] = differences(bundled, published, bundled_keys_only=subset)
        if write and report[name]:
            local.write_text(json.dumps(published, indent=2) + "\n")
    return report


def _hub_fetch(repo_id: str, filename: str) -> str:
    from huggingface_hub import hf_hub_download

    return str(hf_hub_download(repo_id, filename))


def main(argv: list[str] | None = None, fetch: Fetch = _hub_fetch) -> int:
    """Print each id's differences; an id the Hub does not answer is one line saying why. Exit 1 if any did not."""
    parser = argparse.ArgumentParser(prog="python -m vramsim.model_zoo.refresh", description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="bundled ids (default: every bundled model and pipeline)")
    parser.add_argument("--write", action="store_true", help="replace the bundled files with the published ones")
    args = parser.parse_args(argv)
    failed = False
    for model_id in args.ids or [*model_ids(), *pipeline_ids()]:
        try:
            report = refresh(model_id, fetch, write=args.write)
        except (OSError, ValueError) as error:  # huggingface_hub's network, gating and missing-file errors are OSErrors
            print(f"{model_id}: not refreshed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
            failed = True
            continue
        changed = {name: lines for name, lines in report.items() if lines}
        print(f"{model_id}: {'the same as published' if not changed else f'{len(changed)} file(s) differ'}")
        for name, lines in changed.items():
            print(f"  {name}")
            print("\n".join(f"    {line}" for line in lines))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
