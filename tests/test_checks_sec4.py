"""Theorem 4.2 checks: the search finds the collinear counterexample; real sums are out of scope."""

import pytest
import torch

from _checks_util import context
from symtrans.producers import sec4
from symtrans.evidence import Verdict

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Every test of this module on one thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def w(default_model):
    return default_model  # tests/conftest.py: loaded once per session


def test_collinear_rows_break_affine_rank_with_hypotheses_holding():
    # rows (1,0,0), (1,1,0), (1,2,0): collinear, centred line misses the origin
    X, gamma, beta = sec4.search_case("collinear-line", 3, 3, 1, 0)
    case = sec4.ln_case(X, gamma, beta)
    assert case.all_hypotheses_hold
    assert (case.arank_x.rank, case.arank_ln.rank) == (1, 2)
    # independent route: the LN rows are three distinct points of a circle, so not collinear
    Y = (X - X.mean(1, keepdim=True)) / (X - X.mean(1, keepdim=True)).pow(2).mean(1, keepdim=True).sqrt()
    d1, d2 = Y[1] - Y[0], Y[2] - Y[0]
    assert torch.linalg.cross(d1, d2).norm() > 0.1
    assert case.verdict_arank() is Verdict.FAILS


def test_search_evidence_fails_with_a_reproducible_counterexample(w):
    ctx = context(w)
    ev = sec4.check_ln_search_arank(ctx)[0]
    assert ev.verdict is Verdict.FAILS and ev.counterexample["family"] == "collinear-line"
    cx = ev.counterexample
    X, g, b = sec4.search_case(cx["family"], cx["n"], cx["d"], cx["r"], cx["seed"])
    assert sec4.ln_case(X, g, b).verdict_arank() is Verdict.FAILS
    # the offset family fails too: an affine r-flat missing the origin gains one dimension
    assert ev.details["by_family"]["lowrank+offset"].get("fails", 0) > 0


def test_matrix_rank_statement_holds_for_beta_zero_but_a_nonzero_beta_breaks_it(w):
    ev = sec4.check_ln_search_rank(context(w))[0]
    assert ev.verdict is Verdict.SUPPORTED
    # a false variant of the statement (beta with non-zero mean) must be caught by the same decision
    from symtrans.numeric.forward import layer_norm
    from symtrans.numeric.linalg import numerical_rank

    u = torch.tensor([[1.0], [-2.0], [3.0], [-1.5]], dtype=F64)
    v = torch.tensor([[1.0, 3.0, -2.0, 0.5]], dtype=F64)
    X = u @ v
    gamma, beta = torch.ones(4, dtype=F64), torch.ones(4, dtype=F64)
    case = sec4.ln_case(X, gamma, beta)
    with_beta = numerical_rank(layer_norm(X, gamma, beta, 0.0))
    assert case.rank_x.rank == 1 and with_beta.rank == 2
    assert case._verdict(case.rank_x, with_beta, ()) is Verdict.FAILS


def test_real_pre_ln_sums_violate_h4_below_d_model(w):
    cases = sec4.real_cases(context(w, n=12), layers=1)
    assert all(c.verdict_arank() is Verdict.NOT_APPLICABLE for _, c in cases)
    assert all([h.name for h in c.violated] == ["H4"] for _, c in cases)
    # n < d: the rows are affinely independent and stay so after LN
    assert all(c.arank_x.rank == c.arank_ln.rank == 11 for _, c in cases)


def test_real_evidence_fails_when_fed_a_counterexample_with_hypotheses_holding(w):
    # the ln-real decision itself can fail: feed it the collinear case as if it were a real sum
    X, gamma, beta = sec4.search_case("collinear-line", 3, 3, 1, 0)
    ctx = context(w)
    ev = sec4._real_evidence(ctx, [("planted collinear", sec4.ln_case(X, gamma, beta))], 3)
    assert ev.verdict is Verdict.FAILS
    assert [h.holds for h in ev.hypothesis_checks] == [True, True, True, True]
    assert ev.dtype == "float64" and ev.tolerance.reason and ev.margin >= 1.0


def test_ln_real_is_not_applicable_with_h4_named_and_strict_json(w):
    import json

    evs = sec4.check_ln_real(context(w, n=12))
    assert [e.verdict for e in evs] == [Verdict.NOT_APPLICABLE, Verdict.NOT_APPLICABLE]
    assert "H4" in evs[0].violated_hypothesis and "H2" in evs[1].violated_hypothesis
    h4 = [h for h in evs[0].hypothesis_checks if h.name == "H4"][0]
    assert h4.holds is False and h4.margin <= -1.0  # decided a decade below the Wedin threshold
    for e in evs:
        json.dumps(e.to_dict(), allow_nan=False)


def test_hypothesis_inside_the_band_gives_inconclusive_not_a_verdict():
    # sigma lies in colspace(XP) exactly; its computed distance sits inside the one-decade band
    X = torch.tensor([[1.0, 2, 3], [2, 4, 6]], dtype=F64)
    case = sec4.ln_case(X, torch.ones(3, dtype=F64), torch.zeros(3, dtype=F64))
    assert sec4.hyp_state(case.hypotheses[3]) is None
    assert case.verdict_arank() is Verdict.INCONCLUSIVE


def test_search_records_carry_hypothesis_checks_and_scope(w):
    ev = sec4.check_ln_search_arank(context(w))[0]
    assert ev.scope.kind == "instances" and all(h.holds for h in ev.hypothesis_checks)
    assert [h.name for h in ev.hypothesis_checks] == ["H1", "H2", "H3", "H4"]
