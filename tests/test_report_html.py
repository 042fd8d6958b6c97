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
