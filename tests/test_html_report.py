"""`report --html`: one self-contained page, laid out and drawn by headless Chromium at 1200 px:
frames by compile seconds, each with its call sites, typed reasons and counts, graph breaks,
and the finding with its diff. The Profile is a golden case's (recorded by the tool): no torch
program runs here."""

import re
import shutil

import pytest

from conftest import ROOT, run_cli
from headless_browser import layout, read_png, screenshot

CASE = ROOT / "golden" / "RF003" / "seed_lr_scheduler"

# Appended to a copy of the page by the test only: what the browser laid out.
PROBE = """<script>
const out = {
  scrollWidth: document.documentElement.scrollWidth,
  sections: [...document.querySelectorAll('section.frame')].map(s => ({
    frame: s.dataset.frame, seconds: +s.dataset.seconds, text: s.innerText,
    right: s.getBoundingClientRect().right,
  })),
  bars: [...document.querySelectorAll('#chart-frames g.frame')].map(g => ({
    frame: g.dataset.frame, seconds: +g.dataset.seconds, width: g.querySelector('rect').getBBox().width,
  })),
  added: [...document.querySelectorAll('pre.diff span.add')].map(s => s.textContent),
  totals: document.querySelector('#totals').innerText,
};
const pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    work = tmp_path_factory.mktemp("html-report")
    shutil.copy(CASE / "program.in.py", work / "program.py")
    (work / ".recompile-fix").mkdir()
    shutil.copy(CASE / "profile.json", work / ".recompile-fix" / "profile.json")
    result = run_cli("report", "--html", "report.html", cwd=work, check=0)
    assert result.stderr.strip().endswith("wrote report.html")
    return work / "report.html"


def test_page_is_self_contained(page):
    html = page.read_text(encoding="utf-8")
    # Nothing to fetch: no script, stylesheet link, image, font or import; the only URLs are
    # links to the rules' pages (followed only when clicked) and the SVG namespace.
    assert "<script" not in html and "<link" not in html and " src=" not in html
    assert "url(" not in html and "@import" not in html
    urls = re.findall(r"https?://[^\"'\s<>]+", html)
    assert urls and all(u.startswith("https://github.com/recompile-fix/") or "w3.org/2000/svg" in u for u in urls)
    assert any(u.endswith("/docs/rules/RF003.md") for u in urls)


def test_browser_layout_at_1200_px(page, tmp_path):
    laid = layout(page.read_text(encoding="utf-8"), PROBE, tmp_path, width=1200)
    assert laid["scrollWidth"] <= 1200  # nothing wider than the window
    assert all(s["right"] <= 1200 for s in laid["sections"])
    assert "9\ncompiles" in laid["totals"] and "1\nrecompiles" in laid["totals"]

    sections = laid["sections"]
    seconds = [s["seconds"] for s in sections]
    assert seconds == sorted(seconds, reverse=True)  # frames by compile seconds
    step = sections[0]
    assert step["frame"] == "step (torch/optim/adam.py:214)"
    text = step["text"]
    # Its typed reason and count, its call site with the code there, the finding, its diff.
    assert "optimizer_param_group" in text and "optimizer hyper-parameter changed" in text
    assert re.search(r"2\s+program\.py:13 in torch_dynamo_resume_in_gn_at_12\s+opt\.step\(\)", text), text
    assert "RF003" in text and "make the lr a float64 tensor" in text
    assert laid["added"] == ["+opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))"]
    gn = next(s for s in sections if s["frame"] == "gn (program.py:8)")
    assert "Graph breaks" in gn["text"] or "GRAPH BREAKS" in gn["text"]
    assert "program.py:10" in gn["text"] and "Attempted to inline function marked as skipped" in gn["text"]

    bars = {b["frame"]: b for b in laid["bars"]}
    assert len(bars) == 8
    widest = bars["step (torch/optim/adam.py:214)"]
    for bar in bars.values():  # drawn to scale: width proportional to compile seconds
        if bar["width"] > 2:
            assert bar["width"] / widest["width"] == pytest.approx(bar["seconds"] / widest["seconds"], abs=0.01)


def _near(pixel, color, tolerance=12):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, color))


def test_screenshot_shows_the_chart_the_frames_and_the_diff(page, tmp_path):
    shot = screenshot(page, tmp_path, width=1200, height=1600)
    shutil.copy(shot, page.parent / "report-1200.png")  # kept beside the page, to look at
    image = read_png(shot)
    assert image.size == (1200, 1600)
    pixels = list(image.get_flattened_data())
    background = (246, 248, 250)
    drawn = sum(1 for p in pixels if not _near(p, background, 4) and not _near(p, (255, 255, 255), 4))
    assert drawn > 0.03 * len(pixels)  # text, bars, borders: not a blank page
    bar_blue = sum(1 for p in pixels if _near(p, (43, 125, 233)))
    assert bar_blue > 5000  # the compile-seconds bars (the widest alone is 550 x 14)
    added = sum(1 for p in pixels if _near(p, (218, 251, 225), 3))
    removed = sum(1 for p in pixels if _near(p, (255, 235, 233), 3))
    assert added > 5000 and removed > 5000  # the diff's + and - lines, full width
    # Each third of the width holds something (a layout squeezed into one column would not).
    for third in range(3):
        box = image.crop((third * 400, 0, third * 400 + 400, 1600))
        assert sum(1 for p in box.get_flattened_data() if p[0] < 120) > 500
