"""Every script in examples/ runs on a clean checkout and prints what it promises.

proof_status.py and disagreements.py share one full report run with the claim-table check, in
tests/test_docs_tables.py (building the report twice would double the suite's longest step).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _subproc import cli_env
from symtrans import formula

ROOT = Path(__file__).resolve().parents[1]
HERE = {"paper_numbers.py", "group_invariance.py", "dong_vs_residual.py", "head_asymmetry.py", "custom_config.py"}
IN_DOCS_TEST = {"proof_status.py", "disagreements.py"}


def run_example(name: str, *args: str, timeout: int = 240) -> str:
    env = cli_env(MPLBACKEND="Agg")  # one BLAS thread per process (tests/_subproc.py)
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_every_example_is_run_by_the_suite():
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == HERE | IN_DOCS_TEST


def test_paper_numbers():
    out = run_example("paper_numbers.py")
    assert f"{int(formula('recovery-ambiguity', arch='bert-base', n=512).value):,}" in out  # 360,448
    assert f"{int(formula('recovery-ambiguity-per-token', arch='bert-large').value):,}" in out


def test_group_invariance():
    out = run_example("group_invariance.py")
    checks = [line.split() for line in out.splitlines() if line.startswith("  supported") or line.startswith("  fails")
              or line.startswith("  inconclusive")]
    assert len(checks) >= 10 and all(c[0] == "supported" for c in checks), out
    # the control rows: factors broken by a present feature must change the output, and do
    assert sum("changes" in " ".join(c) for c in checks) == 2
    assert f"{int(formula('gauge-dimension-model', arch='minilm-l6-h384').value):,} in the per-head GL" in out


@pytest.mark.parametrize("script, plot, needle", [
    ("dong_vs_residual.py", "dong_vs_residual.png", "pure-attention: smallest ratio"),
    ("head_asymmetry.py", "head_asymmetry.png", "Spearman rho(alpha_h, alignment) over 72 heads"),
])
def test_plot_examples(tmp_path, script, plot, needle):
    out = run_example(script, str(tmp_path))
    assert needle in out
    if script == "dong_vs_residual.py":  # Dong's collapse without residuals, none with them
        lines = {line.split(":")[0]: line for line in out.splitlines() if ": smallest ratio" in line}
        assert "collapsed" in lines["pure-attention"]
        assert all("no collapse" in lines[v] for v in ("attention+residual", "attention+residual+LN", "full-block"))
    png = tmp_path / plot
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_custom_config():
    out = run_example("custom_config.py")
    assert "H_kv=4" in out and "rotary positions" in out
    # independent route: GQA K and V projections are H_kv * d_k wide, Q and O are H * d_k
    d, h, hkv, dk = 1024, 16, 4, 64
    assert f"{2 * d * h * dk + 2 * d * hkv * dk}" in out
