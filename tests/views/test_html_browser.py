"""The HTML report of an 8B training step in headless Chromium: it loads offline, draws, and marks the peak."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vramsim import simulate
from vramsim.views.html import report_html
from vramsim.views.html.timeline import PEAK_TRACE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _browser_or_skip() -> str:
    """The system's chromium; absent, a skip (a failure in CI, whose ``.ci/run`` installs Debian's)."""
    missing = "no chromium on PATH (Debian: apt-get install chromium)" if CHROMIUM is None else None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: CI must open the HTML report in a browser")
        pytest.skip(missing)
    assert CHROMIUM is not None
    return CHROMIUM


def test_8b_report_opens_offline_and_marks_the_peak(tmp_path: Path) -> None:
    """No console error, no request but the file itself, the plots' SVG drawn, the marker at ``peak_bytes``."""
    from playwright.sync_api import sync_playwright

    chromium = _browser_or_skip()
    report = simulate("meta-llama/Llama-3.1-8B", mixed_precision="bf16", device="h100-sxm", advice="graph")
    path = tmp_path / "report.html"
    path.write_text(report_html(report), encoding="utf-8")
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_selector(".plotly-graph-div svg.main-svg")
            drawn = page.evaluate("document.querySelectorAll('.plotly-graph-div svg.main-svg').length")
            peak = page.evaluate(
                "name => document.querySelector('.plotly-graph-div').data.find(t => t.name === name).customdata[0]",
                PEAK_TRACE,
            )
        finally:
            browser.close()
    assert errors == []
    assert requests == [path.as_uri()]
    assert drawn >= 2
    assert peak == report.peak_bytes
