"""The Python API: light import, public names, notebook renderings, agreement with the CLI's routes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import symtrans
from symtrans.errors import SymtransError

ROOT = Path(__file__).resolve().parents[1]


def test_import_and_formula_stay_light_and_public_names_resolve():
    code = ("import sys, symtrans; symtrans.formula('wo-fibre', arch='gpt2'); symtrans.architecture('gpt2'); "
            "import symtrans.api; print(sorted(m for m in ('torch', 'networkx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    for name in symtrans.__all__:
        assert getattr(symtrans, name) is not None, name
    assert set(symtrans.api.__all__) <= set(symtrans.__all__)


def test_api_functions_survive_importing_the_subpackages():
    # importing a sub-package sets an attribute of its name on the package: no API name may collide
    import symtrans.certify  # noqa: F401
    import symtrans.graph  # noqa: F401
    import symtrans.report  # noqa: F401

    import symtrans.group  # noqa: F401

    for name in ("check_claims", "certify_claims", "proof_graph", "proof_report", "measure", "load",
                 "invariance_group", "verify_invariance"):
        assert callable(getattr(symtrans, name)), name
    with pytest.raises(AttributeError):
        symtrans.no_such_name  # noqa: B018


def test_formula_latex_is_the_registry_expression_and_value():
    v = symtrans.formula("recovery-ambiguity", arch="bert-large", n=512)
    arch = symtrans.architecture("bert-large")
    assert v.value == 512 * (arch.H - 1) * arch.d_v  # independent route: the definition
    assert v._repr_latex_() == f"${v.latex()}$" and v._repr_latex_().endswith(f"= {v.value}$")


def test_proof_graph_matches_the_report_and_renders_svg():
    g = symtrans.proof_graph(run=False)
    html = g._repr_html_()
    assert html.count("<svg") >= 1 and "thm-recovery" in html
    # the graph's ancestors are the claim registry's dependencies, followed transitively
    from proofs import get_claim

    direct = set(get_claim("thm-recovery").depends_on)
    assert direct <= set(g.rests_on("thm-recovery"))
    with pytest.raises(SymtransError, match="did you mean"):
        g.status("thm-4.3")


def test_report_writes_the_same_files_as_the_cli(tmp_path):
    r = symtrans.proof_report(model=None, out=tmp_path / "api", formats=["json"], run=False)
    doc = json.loads((tmp_path / "api" / "report.json").read_text())
    assert doc["schema"] == "symtrans-report/1"
    assert [c["id"] for c in doc["claims"]] == [c.id for c in r.claims]
    assert "srcdoc=" in r._repr_html_() and r.summary().startswith(f"{len(r.statuses)} items")
    with pytest.raises(SymtransError):  # the output directory is checked before anything runs
        (tmp_path / "file").write_text("x")
        symtrans.proof_report(model=None, out=tmp_path / "file", run=False)


def test_certify_and_check_records_render_and_carry_verdicts():
    ev = symtrans.certify_claims(["thm-4.2"])
    assert ev.verdicts() == {"thm-4.2": "fails"}  # the affine-rank counterexample wins over the certified parts
    assert any(e.counterexample for e in ev)
    html = ev._repr_html_()
    assert html.count("<tr>") == len(ev) + 1
    with pytest.raises(SymtransError):
        symtrans.check_claims(model=None)


def test_measure_rows_agree_with_the_trace():
    w = symtrans.load()
    m = symtrans.measure(w, n=10, seed=1)
    rows = m.rows()
    assert len(rows) == w.n_layers
    from symtrans.numeric import encode
    from symtrans.numeric.linalg import numerical_rank
    from symtrans.numeric.measure import residual_ratio

    tr = encode(w, n=10, seed=1)
    assert rows[2]["rank"] == numerical_rank(tr.layers[2].out).rank
    assert rows[2]["residual_ratio"] == pytest.approx(residual_ratio(tr.layers[2].out).ratio, rel=1e-12)
    assert "<table>" in m._repr_html_()
