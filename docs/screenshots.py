"""Write the pictures of docs/reports.md and the README: each HTML page in headless Chromium, as a PNG.

    python docs/screenshots.py [NAME ...]   # needs chromium on PATH (Debian: apt-get install chromium), playwright, pillow

With names (``report-compare``), only those pictures are made again.

Each page is made by the API as ``--html`` makes it, opened from a file with no network, and photographed
top first at a laptop's width; the PNGs are reduced to 256 colours to stay small.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

import vramsim
from vramsim.views.html import checkpoint_html, compare_html, fit_html, report_html, serve_html

IMAGES = Path(__file__).parent / "images"
WIDTH, HEIGHT = 1280, 1500
"""A laptop's width; the height is the page's top, where the plots are."""

PAGES: dict[str, Callable[[], str]] = {
    "report-trace": lambda: report_html(
        vramsim.simulate("meta-llama/Llama-3.1-8B", mixed_precision="bf16", device="h100-sxm", advice="graph")
    ),
    "report-serve": lambda: serve_html(vramsim.serve("meta-llama/Llama-3.2-1B", device="l4", max_model_len=4096)),
    "report-checkpoint": lambda: checkpoint_html(vramsim.checkpoint("meta-llama/Llama-3.2-1B", dtype="bf16", device="h100")),
    "report-fit": lambda: fit_html(vramsim.largest_fit("gpt2", seq_len=512, device="rtx-4090")),
    "report-compare": lambda: compare_html(
        vramsim.compare(
            "meta-llama/Llama-3.2-1B",
            {"full fine-tuning": {}, "LoRA r=16": {"lora": 16}, "LoRA, checkpointed": {"lora": 16, "checkpointing": "full"}},
            task="train",
            seq_len=1024,
            device="rtx-4090",
        )
    ),
}
"""Each picture's name and the page it shows."""

DARK = ("report-trace",)
"""Pages also photographed in dark mode (``-dark.png``)."""


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(PAGES))
    if unknown:
        sys.exit(f"docs/screenshots.py: no picture named {unknown[0]}; choose from {', '.join(PAGES)}")
    chromium = shutil.which("chromium") or sys.exit("docs/screenshots.py: no chromium on PATH (apt-get install chromium)")
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for name, make in PAGES.items():
            if names and name not in names:
                continue
            html = Path(folder) / f"{name}.html"
            html.write_text(make(), encoding="utf-8")
            for scheme in ("light", "dark") if name in DARK else ("light",):
                page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme=scheme)
                page.goto(html.as_uri(), wait_until="load")
                page.wait_for_timeout(500)  # plotly redraws once the page's colours are applied
                png = IMAGES / f"{name}{'-dark' if scheme == 'dark' else ''}.png"
                height = min(page.evaluate("document.documentElement.scrollHeight"), HEIGHT)
                page.screenshot(path=png, clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
                page.close()
                Image.open(png).convert("RGB").quantize(256).save(png, optimize=True)
                print(f"wrote {png} ({png.stat().st_size // 1024} KiB)")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
