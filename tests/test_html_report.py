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


@pytest.mark.slow  # a headless browser: seconds, no torch
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
    # The tensor lr, and its fallback at the step's compile call, each with its diff.
    assert laid["added"] == [
        "+opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))",
        "+@torch.compile(dynamic=True)",
    ]
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


@pytest.mark.slow  # a headless browser: seconds, no torch
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


# -- the accounting, the names of frames, code as code, one run's seconds --------------------

ACCOUNTED = [  # golden Profiles: a transformers model (its `wrapper`), a user's decorator, an optimizer, many frames
    "RF010/library_problem_type",
    "RF002/kwargs_decorated_forward",
    "RF003/seed_lr_scheduler",
    "RF003/train_step_dynamic_false",
]


def _report_page(case, tmp_path):
    work = tmp_path / case.replace("/", "-")
    work.mkdir()
    shutil.copy(ROOT / "golden" / case / "program.in.py", work / "program.py")
    (work / ".recompile-fix").mkdir()
    shutil.copy(ROOT / "golden" / case / "profile.json", work / ".recompile-fix" / "profile.json")
    run_cli("report", "--html", "report.html", cwd=work, check=0)
    return (work / "report.html").read_text(encoding="utf-8")


def _accounting(html):
    section = html[html.index('<section class="card" id="accounting"') :]
    section = section[: section.index("</section>")]
    total = int(re.search(r'data-recompiles="(\d+)"', section).group(1))
    rows = re.findall(r'<tr class="outcome" data-category="([\w-]+)" data-count="(\d+)">(.*?)</tr>', section)
    return section, total, [(category, int(n), cells) for category, n, cells in rows]


@pytest.mark.parametrize("case", ACCOUNTED)
def test_the_page_ends_by_accounting_for_every_recompile(case, tmp_path):
    from recompile_fix.profile.model import Profile

    profile = Profile.load(str(ROOT / "golden" / case / "profile.json"))
    html = _report_page(case, tmp_path)
    assert html.rstrip().endswith("</section>\n</main>\n</body>\n</html>".rstrip())  # the last section
    section, total, rows = _accounting(html)
    recompiles = sum(f.recompiles for f in profile.frames)
    assert recompiles > 0 and total == recompiles == sum(n for _, n, _ in rows)
    for category, _, cells in rows:
        if category in ("fixable", "no-fix"):  # the fix named: its rule, linked
            assert re.search(r'href="[^"]+/docs/rules/RF\d{3}\.md"><b>RF\d{3}</b>', cells), cells
        if category == "no-rule":  # the reason's ID, linked to its page
            assert re.search(r'href="[^"]+/docs/reasons/RC\d{3}\.md"><b>RC\d{3}</b>', cells), cells
    assert "`" not in section  # backticks are code
    assert 'id="timing-note"' in html and "single run" in html


def test_every_golden_profile_accounts_in_full():
    """Without findings (the page of any caller that has none), every recompile of every golden
    Profile is still a row: the counts add up, each no-rule row names its reason's ID."""
    from recompile_fix.html_report import render_page
    from recompile_fix.profile.model import Profile

    checked = 0
    for path in sorted((ROOT / "golden").glob("*/*/profile.json")):
        profile = Profile.load(str(path))
        recompiles = sum(f.recompiles for f in profile.frames)
        if not profile.frames:
            continue
        _, total, rows = _accounting(render_page(profile, []))
        assert total == recompiles == sum(n for _, n, _ in rows), path
        assert all(c in ("no-rule", "expected") for c, _, _ in rows), path
        checked += recompiles > 0
    assert checked >= 30


def test_frames_are_named_by_what_the_user_compiled(tmp_path):
    html = _report_page("RF010/library_problem_type", tmp_path)
    title = re.search(r"<h2>1\. (.*?)</h2>\n<p class=\"via\">(.*?)</p>", html)
    assert title, html
    assert title.group(1).startswith("<code>DistilBertForSequenceClassification</code>")
    assert title.group(2) == "via transformers&#x27; <code>wrapper</code>"
    chart = html[html.index('id="chart-frames"') : html.index("</svg>")]
    assert "<title>DistilBertForSequenceClassification (wrapper, transformers/utils/generic.py:1030)</title>" in chart
    own = _report_page("RF002/kwargs_decorated_forward", tmp_path)
    assert re.search(
        r"<h2>1\. <code>Regressor</code>.*?</h2>\n<p class=\"via\">via <code>wrapper</code> \(program\.py:11\)", own
    )


def test_backticks_are_code_escaped_first():
    from recompile_fix.html_report import code_html, compiled_name
    from recompile_fix.profile.model import Compile, Frame

    assert code_html("set `x<1>` & `y`") == "set <code>x&lt;1&gt;</code> &amp; <code>y</code>"
    assert code_html("a ` b") == "a ` b" and code_html("`<script>`") == "<code>&lt;script&gt;</code>"
    resumed = Frame(file="train.py", first_line=25, name="torch_dynamo_resume_in_train_step_at_25")
    assert compiled_name(resumed) == ("train_step", "resumed after a graph break at line 25")
    assert compiled_name(Frame(file="train.py", first_line=3, name="fn")) == ("fn", "")
    model = {"type": "Module", "class": "Net", "file": "train.py"}
    takes_model = Frame(file="train.py", first_line=3, name="step", signature={"positional": ["model", "x"]})
    takes_model.compiles.append(Compile(id="0/0", inputs={"model": model}))
    assert compiled_name(takes_model) == ("step", "")  # the user's own function, not a decorator
    takes_model.signature = {"positional": ["model"], "varargs": "args", "varkw": "kwargs"}
    assert compiled_name(takes_model) == ("Net", "via `step` (train.py:3)")


NARROW_PROBE = """<script>
const box = s => { const r = document.querySelector(s).getBoundingClientRect(); return {right: r.right, height: r.height}; };
const out = {scrollWidth: document.documentElement.scrollWidth, inner: window.innerWidth, accounting: box('#accounting'),
  header: box('header'), via: document.querySelector('section.frame .via').innerText};
const pre = window.parent.document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
window.parent.document.body.appendChild(pre);
</script>"""


@pytest.mark.slow  # a headless browser: seconds, no torch
def test_accounting_page_in_the_browser_wide_and_narrow(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(_report_page("RF010/library_problem_type", tmp_path), encoding="utf-8")
    for width in (1200, 400):
        laid = layout(page.read_text(encoding="utf-8"), NARROW_PROBE, tmp_path, width=width)
        assert laid["inner"] == width and laid["scrollWidth"] <= width, laid  # no sideways scrolling, even narrow
        assert laid["accounting"]["right"] <= width and laid["accounting"]["height"] > 60
        assert laid["via"] == "via transformers' wrapper"
    shot = read_png(screenshot(page, tmp_path, width=400, height=2400)).crop((0, 0, 400, 2400))
    pixels = list(shot.get_flattened_data())
    fixable = sum(1 for p in pixels if _near(p, (221, 244, 255), 3))  # the "fixable" badge, the reason tags
    assert fixable > 150
    code = sum(1 for p in pixels if _near(p, (239, 242, 245), 2))  # <code> backgrounds
    assert code > 1000
    # The right quarter of the narrow window holds something: the page reflowed, not cut off.
    right = shot.crop((300, 0, 400, 2400))
    assert sum(1 for p in right.get_flattened_data() if p[0] < 120) > 200
