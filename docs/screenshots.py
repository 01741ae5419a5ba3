"""Regenerate the README's screenshots of the report: `python docs/screenshots.py`.

Writes the built-in model's report into a temporary folder, opens it in headless Chromium
(Debian's `chromium`, driven by playwright) with the network off, and saves
docs/img/report.png (the composition heatmap and the circuit graph) and docs/img/explainer.png
(two heads talking through a 2-D channel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no Chromium found (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        subprocess.run([sys.executable, "-m", "compscope.cli.main", "report", "--out", str(out), "--quiet", "--no-figures"],
                       check=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_context(offline=True, viewport={"width": 1250, "height": 900}).new_page()
            page.goto((out / "index.html").as_uri())
            page.wait_for_function("window.compscopeMeasures !== undefined")
            (HERE / "img").mkdir(exist_ok=True)
            page.locator("#composition").screenshot(path=str(HERE / "img" / "report.png"))
            page.locator("#ex-channel").scroll_into_view_if_needed()
            box = page.locator("#explainers h3").last.bounding_box()
            end = page.locator("#ch-note").bounding_box()
            page.screenshot(path=str(HERE / "img" / "explainer.png"), full_page=True,
                            clip={"x": 0, "y": box["y"] + page.evaluate("window.scrollY"), "width": 1250,
                                  "height": end["y"] + end["height"] - box["y"] + 10})
            browser.close()
    print(f"wrote {HERE / 'img' / 'report.png'} and {HERE / 'img' / 'explainer.png'}")


if __name__ == "__main__":
    main()
