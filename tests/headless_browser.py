"""Debian's headless Chromium for the tests of the HTML pages (installed by the README's setup
command): what the browser laid out (a probe script appended to a copy of the page, read back
with --dump-dom) and what it drew (a screenshot, read with Pillow)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape
from pathlib import Path

import pytest
from PIL import Image

__all__ = ["chromium", "layout", "read_png", "screenshot"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no headless browser: the HTML tests need Chromium (`apt-get install chromium`), they do not skip")


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _narrow(page: str, width: int, height: int) -> str:
    """Chromium's headless window is at least 500 pixels wide: a narrower window (a phone's) is
    the page in an iframe ``width`` pixels wide, at the top left (its own viewport: its media
    queries and layout are the narrow window's). A probe in the page writes into
    ``window.parent.document`` (the same origin: srcdoc)."""
    return (
        '<!DOCTYPE html><html><body style="margin:0;background:#000">'
        f'<iframe style="border:0;display:block;width:{width}px;height:{height}px" srcdoc="{escape(page)}">'
        "</iframe></body></html>"
    )


def layout(page: str, probe: str, tmp: Path, width: int = 1200) -> dict:
    """Run ``probe`` (a script that writes JSON into ``<pre id="layout">``) on a copy of the page
    laid out ``width`` CSS pixels wide; return what it wrote."""
    path = tmp / "probe.html"
    probed = page.replace("</body>", probe + "</body>")
    if width < 500:
        probed, width = _narrow(probed, width, 1000), 500
    path.write_text(probed, encoding="utf-8")
    done = _run(tmp, f"--window-size={width},1000", "--dump-dom", path.as_uri())
    found = re.search(r'<pre id="layout">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    return json.loads(
        found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )


def screenshot(page: Path, tmp: Path, width: int = 1200, height: int = 1800) -> Path:
    """A screenshot of a window ``width`` by ``height`` pixels (under 500 wide: the page in an
    iframe that wide, ``_narrow``; the image is then 500 wide, black right of the iframe)."""
    out = tmp / "screenshot.png"
    if width < 500:
        narrow = tmp / "narrow.html"
        narrow.write_text(_narrow(page.read_text(encoding="utf-8"), width, height), encoding="utf-8")
        page, width = narrow, 500
    done = _run(tmp, f"--window-size={width},{height}", f"--screenshot={out}", page.as_uri())
    assert out.is_file(), done.stderr[-2000:]
    return out


def read_png(path: Path) -> Image.Image:
    """The screenshot as an RGB image."""
    with Image.open(path) as image:
        return image.convert("RGB")
