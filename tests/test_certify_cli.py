"""`symtrans certify`: report-shaped JSON, registered producers, one-line errors."""

import json

from symtrans.cli import main
from symtrans.context import Context
from symtrans.runner import run_producers


def test_certify_json_shape(capsys):
    assert main(["certify", "thm-4.2", "prop-6.2", "--model", "none", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    claims = {c["id"]: c for c in out["claims"]}
    assert claims["thm-4.2"]["verdict"] == "fails"
    # the identity refuted by its certificate, the bound proved in Coq (supported where Coq is not installed)
    assert claims["prop-6.2"]["verdict"] == "reading-dependent"
    assert claims["prop-6.2"]["readings"]["prop-6.2/identity"] == "fails"
    assert claims["prop-6.2"]["readings"]["prop-6.2/bound"] in ("certified", "supported")
    ev = next(e for e in claims["thm-4.2"]["evidence"] if e["producer"] == "ln-affine-search")
    assert ev["kind"] == "symbolic" and ev["counterexample"]["X"] and ev["counterexample"]["arank_X"] == 1


def test_producers_are_registered_for_the_report():
    evs = run_producers("prop-6.3", Context(model=None))
    by = {e.producer: e for e in evs}
    assert by["prop63-witness"].verdict.label == "certified"
    assert by["prop63-real-weights"].verdict.label == "not-run"


def test_unknown_claim_is_a_one_line_error(capsys):
    assert main(["certify", "thm-42"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("symtrans: error:") and "thm-4.2" in err and len(err.strip().splitlines()) == 1
