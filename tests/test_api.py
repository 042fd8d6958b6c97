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
    cell = r._repr_html_()  # the answer, the graph and the claim table, not the whole page in an iframe
    assert "<svg" in cell and "The answer" in cell and "srcdoc=" not in cell and len(cell) < len(r.html()) / 3
    assert r.summary().startswith(f"{len(r.statuses)} items")
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


def test_every_api_result_has_a_rich_display_and_a_bounded_plain_text(default_model):
    """A saved notebook keeps the plain text beside the HTML: it must stay a few KB (it was 100-124 KB)."""
    from symtrans.api import REPR_MAX_CHARS

    results = {
        "invariance_group": symtrans.invariance_group("bert-base"),
        "verify_invariance": symtrans.verify_invariance(default_model, factors=["S_H"], dtypes=["float64"], n=6),
        "measure": symtrans.measure(default_model, n=8),
        "certify_claims": symtrans.certify_claims(["prop-5.1"]),
        "proof_graph": symtrans.proof_graph(run=False),
        "proof_report": symtrans.proof_report(model=None, run=False),
    }
    for name, result in results.items():
        html, text = result._repr_html_(), repr(result)
        assert "<table" in html or "<svg" in html or "<iframe" in html, name
        assert 0 < len(text) <= REPR_MAX_CHARS, (name, len(text))
    g = results["invariance_group"]
    assert g.to_dict()["gauge_dimension"] == g.spec.gauge_dimension_model() == 1179648  # still the spec
    assert all(f.name in repr(g) and f.name in g._repr_html_() for f in g.factors)
    claims = list(results["proof_report"].report.graph.claims.values())  # no model: nothing decided, each says why
    given, external = sum(c.given for c in claims), sum(c.external and not c.given for c in claims)
    assert repr(results["proof_report"]).startswith(
        f"proof-status report: {len(claims)} items: {len(claims) - given - external} not-run, {given} stated, "
        f"{external} assumed; fully certified 0")


def test_long_plain_text_is_cut_with_a_pointer_to_the_full_data():
    from symtrans.api import REPR_MAX_CHARS, _bounded

    text = _bounded([f"line {i} " + "x" * 80 for i in range(500)])
    assert len(text) <= REPR_MAX_CHARS and text.endswith("more characters; .to_dict() has everything)")
    assert _bounded(["short"]) == "short"


def test_loaded_weights_edited_to_hold_nan_are_refused_naming_the_tensor():
    """A checkpoint or a model object holding NaN or Inf is refused at load; weights loaded and then edited in
    place reached check and measure as they were: check raised LinAlgError from an SVD ("failed to converge"),
    with no word of which weights. Each API entry that takes loaded weights now names the tensor and layer."""
    import symtrans
    from symtrans.errors import SymtransError

    w = symtrans.load()
    assert w.first_nonfinite() is None  # the false case: the weights as loaded pass
    c = w.copy()
    c.W_in[2, 5, 7] = float("inf")
    for call in (lambda: symtrans.check_claims(c, ["thm-7.3"], n=8), lambda: symtrans.measure(c, n=8),
                 lambda: symtrans.relate(c, w)):
        with pytest.raises(SymtransError, match=r"model: the weights given hold NaN or Inf in tensor W_in \(layer 2\)"):
            call()


def test_the_nan_check_reads_a_pending_table_as_stored():
    """The API's NaN check (``ModelWeights.first_nonfinite``) reads a table still in its stored dtype as stored:
    converting it (the bundled Gemma 3's 262,144 rows: 1 s and 1.3 GB) to look for NaN would undo what keeping it
    pending saves. A NaN in the stored table is still found."""
    import dataclasses

    import torch

    import symtrans
    from symtrans.numeric.weights import _Tensors

    w = symtrans.load()
    rest = {k: v for k, v in w.tensors.items() if k != "word"}
    stored = w.word.to(torch.float32)
    lazy = dataclasses.replace(w, tensors=_Tensors(rest, {"word": (stored, torch.float64, torch.device("cpu"))}))
    assert lazy.first_nonfinite() is None and lazy.tensors.pending == ("word",)
    stored[7, 3] = float("nan")
    assert lazy.first_nonfinite() == "word" and lazy.tensors.pending == ("word",)
