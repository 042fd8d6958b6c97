"""report.html opened in headless Chromium: it renders, is not blank, and shows one node per claim and the legend."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from symtrans.evidence import PaperStatus, Verdict
from symtrans.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,2000"]

WHY = ("chromium not installed (Debian packages chromium and chromium-driver: `apt-get install chromium "
       "chromium-driver`; .ci/run installs them)")


@pytest.fixture(autouse=True)
def _needs_chromium() -> None:
    """Skip without Chromium on a developer's machine, but fail in CI (CI=true), where .ci/run installs it."""
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI run without Chromium: {WHY}")
        pytest.skip(WHY)


@pytest.fixture(scope="module")
def page(tmp_path_factory, symbolic_report) -> Path:
    out = tmp_path_factory.mktemp("html") / "report"
    write_report(symbolic_report, out, ["html"])
    return out / "report.html"


def _chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="symtrans-chromium-")
    try:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_screenshot_is_written_and_not_blank(page: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _chromium(f"--screenshot={png}", page.as_uri())
    assert png.is_file() and png.stat().st_size > 10_000
    Image = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency) is needed to read the PNG")

    img = Image.open(png).convert("RGB")
    assert img.size == (1400, 2000)
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, swatches, nodes: far from one flat colour
    white = max(colours)[0] / (img.size[0] * img.size[1])
    assert white < 0.97


def test_rendered_dom_has_one_node_per_claim_and_the_legend(page: Path) -> None:
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    from proofs import claim_ids

    nodes = re.findall(r'<g class="node"[^>]*data-id="([^"]+)"', dom)
    assert sorted(nodes) == sorted(claim_ids())
    assert dom.count('<svg id="proof-graph"') == 1
    legend = dom[dom.index('id="legend"'):dom.index('id="proof-graph"')]
    assert all(f">{v.value}<" in legend for v in Verdict) and all(f">{s.value}<" in legend for s in PaperStatus)
    assert "<script src" not in dom and 'href="http' not in dom  # self-contained


_MEASURE = """<script>
window.addEventListener('load', () => {
  const svg = document.getElementById('proof-graph'), box = svg.parentElement;
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const sizes = {};
  for (const cls of ['nid', 'ntitle', 'tk', 'glyph', 'bundle-count']) {
    sizes[cls] = Math.min(...[...svg.querySelectorAll('text.' + cls)]
      .map(t => parseFloat(getComputedStyle(t).fontSize) * scale));
  }
  const outside = [], titles = {};
  for (const g of svg.querySelectorAll('g.node')) {  // every label inside its node's box: nothing cut or spilled
    const r = g.querySelector('rect').getBBox();
    titles[g.dataset.id] = [...g.querySelectorAll('text.ntitle')].map(t => t.textContent).join(' ');
    for (const t of g.querySelectorAll('text')) {
      const b = t.getBBox();
      if (b.x < r.x + 1 || b.y < r.y + 1 || b.x + b.width > r.x + r.width - 1 || b.y + b.height > r.y + r.height - 1)
        outside.push([g.dataset.id, t.getAttribute('class'), t.textContent, b.x - r.x, b.x + b.width - r.x - r.width]);
    }
  }
  const out = document.createElement('pre');
  out.id = 'measured';
  out.textContent = JSON.stringify({scale: scale, sizes: sizes, innerWidth: window.innerWidth,
    scrollWidth: box.scrollWidth, clientWidth: box.clientWidth, svgWidth: svg.getBoundingClientRect().width,
    outside: outside, titles: titles,
    details: document.querySelectorAll('details.evidence').length,
    coloured: document.querySelectorAll('tr.ev[data-verdict] td[style*="border-left-color"]').length,
    overview: document.querySelectorAll('table.overview tr.ov').length});
  document.body.appendChild(out);
});
</script>"""


def _measured(page: Path, tmp_path: Path, width: int) -> dict:
    """Open ``page`` in a ``width`` px window and return what the measuring script read off the rendered page."""
    import json

    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    profile = tempfile.mkdtemp(prefix="symtrans-chromium-")
    try:
        flags = [f for f in FLAGS if not f.startswith("--window-size")] + [f"--window-size={width},900"]
        dom = subprocess.run([CHROMIUM, *flags, f"--user-data-dir={profile}", "--virtual-time-budget=3000",
                              "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert m, "the measuring script did not run"
    import html

    return json.loads(html.unescape(m.group(1)))


def test_node_labels_render_at_11px_or_more_at_1350px(page: Path, tmp_path: Path, symbolic_report) -> None:
    got = _measured(page, tmp_path, 1350)
    assert 1300 <= got["innerWidth"] <= 1400
    assert got["scale"] > 0.99  # the graph at its own scale, not shrunk to fit
    # laid out for the width: the whole graph shows with no horizontal scroll
    assert got["scrollWidth"] <= got["clientWidth"], (got["scrollWidth"], got["clientWidth"], got["svgWidth"])
    assert all(size >= 11 for size in got["sizes"].values()), got["sizes"]
    assert got["outside"] == [], got["outside"][:5]  # every label inside its node
    assert got["titles"] == {c.id: c.title for c in symbolic_report.claims}  # whole titles, none cut
    # evidence tables are collapsible and every row carries its verdict's colour; the overview lists everything
    with_evidence = sum(1 for s in symbolic_report.statuses.values() if s.evidence)
    assert got["details"] == with_evidence
    assert got["coloured"] == sum(len(s.evidence) for s in symbolic_report.statuses.values())
    assert got["overview"] == len(symbolic_report.statuses) + sum(len(s.readings)
                                                                   for s in symbolic_report.statuses.values())
