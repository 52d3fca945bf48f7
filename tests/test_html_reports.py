"""``--html FILE`` on estimate, snapshot and compare: one self-contained page, the expected pictures, escaped text.

Every page is parsed with html.parser (always); where a Chromium binary is installed it is also opened
headless, so a page that does not render, or logs a console error, fails here rather than for a user.
"""

import contextlib
import io
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import SHARED, SKILL, sweep
from memtune.cli import main
from memtune.render.html import MAX_POINTS, downsample, nice_ticks
from test_compare import write_log

EXAMPLES = SKILL / "examples"
CONFIG = EXAMPLES / "llama3-70b-sft-config.yaml"
REAL = SHARED / "fixtures" / "snapshots"
FORWARD, FULLSTEP = REAL / "cs336-a2-memory_ctx128_forward.pickle", REAL / "cs336-a2-memory_ctx128_fullstep.pickle"
HOSTILE = 'x<b>&"y'  # in a file name: must reach the page as text, never as markup


class Page(HTMLParser):
    """The tags, attributes and text of a page, and the SVG shapes inside which group."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[dict[str, str]] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        a["_parent_stage"] = next((g.get("data-stage", "") for g in reversed(self.stack) if "data-stage" in g), "")
        self.tags.append((tag, a))
        if tag == "style":
            self._in_style = True
        if tag not in ("rect", "line", "circle", "polyline", "i", "br", "meta"):
            self.stack.append(a)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if self.stack and tag not in ("rect", "line", "circle", "polyline", "i", "br", "meta"):
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False
        if tag not in ("rect", "line", "circle", "polyline", "i", "br", "meta") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        self.text.append(data)

    def all(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def self_contained(page: Page) -> None:
    assert not page.all("script"), "no JavaScript at all"
    for tag, a in page.tags:
        for key in ("src", "href", "xlink:href"):
            assert not a.get(key, "").lower().startswith(("http:", "https:", "//")), (tag, a)
    assert "url(" not in page.style.lower() and "@import" not in page.style.lower()


def build(tmp_path: Path, name: str, *argv: str, capsys) -> tuple[str, Page]:
    out = tmp_path / f"{name}.html"
    assert main([*argv, "--html", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    self_contained(page)
    return text, page


def points(polyline: dict[str, str]) -> int:
    return len(polyline["points"].split())


# --------------------------------------------------------------------------- pages


def test_estimate_page_has_one_bar_group_per_stage_and_the_capacity_line(tmp_path, capsys):
    text, page = build(tmp_path, "estimate", "estimate", "--config", str(CONFIG), "--gpu", "H100", capsys=capsys)
    stages = page.all("g", **{"class": "stage"})
    assert [g["data-stage"] for g in stages] == ["0", "1", "2", "3"]
    for g in stages:
        segments = {r["data-segment"] for r in page.all("rect") if r["_parent_stage"] == g["data-stage"]}
        assert {"weights", "grads", "optimizer", "activations", "workspaces"} <= segments
    assert page.all("line", **{"class": "cap"}), "usable capacity drawn when --gpu is given"
    assert "GiB" in text and "<table>" in text
    assert text.count("<title>") >= 4 * 5  # a tooltip on every segment


def test_estimate_without_gpu_has_no_capacity_line_and_honours_lang(tmp_path, capsys):
    text, page = build(tmp_path, "estimate-zh", "estimate", "--config", str(CONFIG), "--lang", "zh", capsys=capsys)
    assert not page.all("line", **{"class": "cap"})
    assert 'lang="zh"' in text and "各流水线阶段的显存估算" in text and "权重" in text


def test_estimate_warnings_from_the_config_are_escaped(tmp_path, capsys):
    hostile = tmp_path / f"{HOSTILE}.yaml"
    hostile.write_text(CONFIG.read_text(encoding="utf-8"), encoding="utf-8")
    text, _ = build(tmp_path, "est-cmp", "compare", str(hostile), "--set", "model.pipeline_model_parallel_size=8",
                    capsys=capsys)
    assert "<b>" not in text and "x&lt;b&gt;&amp;&#34;y" in text


def test_snapshot_page_draws_the_timeline_and_marks_the_peak(tmp_path, snapshot_files, capsys):
    for name, path in snapshot_files.items():
        hostile = tmp_path / f"{HOSTILE}-{name}"
        hostile.write_bytes(path.read_bytes())
        text, page = build(tmp_path, f"snap-{name}", "snapshot", str(hostile), capsys=capsys)
        assert "<b>" not in text and "x&lt;b&gt;&amp;" in text
        lines = page.all("polyline")
        if lines:  # a snapshot with device_traces
            assert all(points(p) <= MAX_POINTS for p in lines)
            assert page.all("g", **{"class": "peak"})
        else:
            assert "device_traces" in text


def test_real_snapshot_timeline_is_downsampled_and_keeps_its_peak(tmp_path, capsys):
    if not FULLSTEP.is_file():
        pytest.skip("real snapshots not in ../shared")
    from memtune.inputs.snapshot_trace import load_trace

    text, page = build(tmp_path, "snap-real", "snapshot", str(FULLSTEP), capsys=capsys)
    lines = page.all("polyline")
    assert len(lines) == 2 and {p["data-series"] for p in lines} == {"allocated", "reserved"}
    assert all(2 <= points(p) <= MAX_POINTS for p in lines)
    assert len(load_trace(FULLSTEP).events) > MAX_POINTS  # so downsampling really happened
    assert page.all("g", **{"class": "peak"})


def test_compare_configs_page_has_grouped_bars_and_a_waterfall(tmp_path, capsys):
    _, page = build(tmp_path, "cmp-cfg", "compare", str(CONFIG), "--set", "model.pipeline_model_parallel_size=8",
                    "--set", "model.seq_length=8192", "--gpu", "H100", capsys=capsys)
    stages = page.all("g", **{"class": "stage"})
    assert len(stages) == 8  # B has PP 8
    sides = [r["data-side"] for r in page.all("rect") if "data-side" in r]
    assert sides.count("A") == 4 and sides.count("B") == 8
    steps = page.all("g", **{"class": "step"})
    assert len(steps) >= 3  # A total, at least one change, B total


def test_compare_snapshots_page_overlays_both_timelines(tmp_path, snapshot_files, capsys):
    paths = sorted(snapshot_files.values())
    pair = (FORWARD, FULLSTEP) if FULLSTEP.is_file() else (paths[0], paths[0])
    _, page = build(tmp_path, "cmp-snap", "compare", *map(str, pair), capsys=capsys)
    lines = page.all("polyline")
    assert len(lines) == 2 and all(points(p) <= MAX_POINTS for p in lines)


def test_compare_logs_page_draws_a_line_per_rank_and_log(tmp_path, capsys):
    a, b = write_log(tmp_path / "good.log", 0, False), write_log(tmp_path / "bad.log", 3000, True)
    _, page = build(tmp_path, "cmp-log", "compare", str(a), str(b), capsys=capsys)
    names = sorted(p["data-series"] for p in page.all("polyline"))
    assert names == ["A rank 0", "A rank 1", "B rank 0", "B rank 1"]


def test_diagnose_page_is_the_ledger_from_capacity_to_the_failed_request(tmp_path, capsys):
    text, page = build(tmp_path, "diagnose", "diagnose", "--log", str(EXAMPLES / "llama3-70b-fragmentation.log"),
                       "--gpu", "H100-80GB", capsys=capsys)
    kinds = [g["data-kind"] for g in page.all("g", **{"class": "step"})]
    assert kinds[0] == "total" and "waste" in kinds and kinds[-2:] == ["request", "deficit"]
    assert "expandable_segments:True" in text and "First fix" in text  # the answer's lead above the picture
    _, empty = build(tmp_path, "diagnose-none", "diagnose", "--question", "my run OOMs", capsys=capsys)
    assert not empty.all("svg") and any("no ledger" in s for s in empty.text)


PLAN = ["plan", "--model", "llama3-70b", "--gpu", "H100", "--gpus", "64", "--seq-length", "8192",
        "--global-batch-size", "256"]


def test_plan_page_is_a_scatter_of_the_fitting_layouts_against_the_budget(tmp_path, capsys):
    text, page = build(tmp_path, "plan", *PLAN, "--all", "--config", str(CONFIG), capsys=capsys)
    top = [c for c in page.all("circle") if c.get("fill") == "#4e79a7"]
    others = [c for c in page.all("circle") if c.get("fill") == "#bab0ac"]
    assert len(top) == 5 and others and len(top) + len(others) <= MAX_POINTS
    assert page.all("line", **{"class": "cap"}), "the memory budget is drawn"
    budget_x = float(page.all("line", **{"class": "cap"})[0]["x1"])
    assert all(float(c["cx"]) <= budget_x + 0.5 for c in top + others), "only layouts that fit are drawn"
    assert page.all("g", **{"class": "reference"}), "the config's own layout is marked"
    _, small = build(tmp_path, "plan-top", *PLAN, "--top", "3", capsys=capsys)
    assert len([c for c in small.all("circle") if c.get("fill") == "#4e79a7"]) == 3


def test_html_never_overwrites_and_a_bad_path_is_one_line_exit_2(tmp_path, capsys):
    existing = tmp_path / "taken.html"
    existing.write_text("keep", encoding="utf-8")
    for target in (existing, tmp_path / "no-such-dir" / "x.html"):
        assert main(["estimate", "--config", str(CONFIG), "--html", str(target)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "--html" in err
    assert existing.read_text(encoding="utf-8") == "keep"


# --------------------------------------------------------------------------- helpers


def test_downsample_keeps_peaks_and_the_point_budget():
    pts = [(float(i), float(i % 1000)) for i in range(100_000)]
    pts[54_321] = (54_321.0, 1e9)
    thin = downsample(pts)
    assert len(thin) <= MAX_POINTS and max(y for _, y in thin) == 1e9
    assert [x for x, _ in thin] == sorted(x for x, _ in thin)
    assert downsample(pts[:10]) == pts[:10]


def test_nice_ticks_cover_the_top():
    for top in (0.3, 1, 7.5, 79.1, 123.4, 1e4):
        ticks = nice_ticks(top)
        assert ticks[0] == 0 and ticks[-1] >= top and len(ticks) <= 12


# --------------------------------------------------------------------------- browser


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        pytest.skip("no Chromium binary: the browser checks skip")
    return found


def png_is_not_blank(path: Path) -> bool:
    """Decode the PNG (8-bit RGB/RGBA, as Chromium writes) enough to see more than one colour."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, channels = 8, b"", 0, 4
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, _, depth, colour = struct.unpack(">IIBB", body[:10])
            channels = {2: 3, 6: 4}.get(colour, 4)
            assert depth == 8
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels + 1
    colours = set()
    for row in range(0, len(raw) // stride, 7):  # filtered rows: distinct byte patterns suffice
        line = raw[row * stride + 1:(row + 1) * stride]
        colours.update(line[i:i + channels] for i in range(0, len(line), channels * 13))
        if len(colours) > 8:
            return True
    return False


def screenshot(browser: str, page: Path, png: Path) -> subprocess.Popen:
    """Headless Chromium writing ``png`` of ``page``, started (its own profile folder, so several can run at once)."""
    return subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                             f"--user-data-dir={png.with_suffix('.profile')}", "--window-size=1200,900",
                             "--enable-logging=stderr", "--v=0", page.resolve().as_uri()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


KINDS = ["estimate", "snapshot", "compare-configs", "compare-logs", "plan", "diagnose"]
# a browser's start is most of a check's time: the suite opens every third page, CI's full-sweep step all six
BROWSER_KINDS = sweep(KINDS, 3)


@pytest.fixture(scope="module")
def in_chromium(tmp_path_factory, snapshot_files):
    """kind -> (memtune's exit code, Chromium's stderr, the screenshot) for each page checked, the browsers run at
    once: a browser's start is most of a check's time."""
    browser = chromium()
    tmp = tmp_path_factory.mktemp("chromium")
    argv = {"estimate": ["estimate", "--config", str(CONFIG), "--gpu", "H100"],
            "snapshot": ["snapshot", str(FULLSTEP if FULLSTEP.is_file() else snapshot_files["dict_oom.pickle"])],
            "compare-configs": ["compare", str(CONFIG), "--set", "model.pipeline_model_parallel_size=8"],
            "compare-logs": ["compare", str(write_log(tmp / "a.log", 0, False)),
                             str(write_log(tmp / "b.log", 3000, True))],
            "plan": [*PLAN, "--all"],
            "diagnose": ["diagnose", "--log", str(EXAMPLES / "llama3-70b-fragmentation.log"), "--gpu", "H100"]}
    codes, browsers = {}, {}
    for kind in BROWSER_KINDS:
        page = tmp / f"{kind}.html"
        with contextlib.redirect_stdout(io.StringIO()):
            codes[kind] = main([*argv[kind], "--html", str(page)])
        if codes[kind] == 0:
            browsers[kind] = screenshot(browser, page, tmp / f"{kind}.png")
    return {kind: (codes[kind], browsers[kind].communicate(timeout=120)[1] if kind in browsers else "",
                   tmp / f"{kind}.png") for kind in BROWSER_KINDS}


@pytest.mark.parametrize("kind", BROWSER_KINDS)
def test_pages_render_in_headless_chromium(kind, in_chromium):
    code, stderr, png = in_chromium[kind]
    assert code == 0
    errors = [line for line in stderr.splitlines() if "Uncaught" in line or "ERROR:CONSOLE" in line]
    assert not errors, errors
    assert png.is_file() and png.stat().st_size > 1000
    assert png_is_not_blank(png)
