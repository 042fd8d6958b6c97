"""LayerNorm certificates: thm-4.2's counterexample, the zero-beta part, the corrected statement."""

import math
import random

import pytest

from symtrans.certify import layernorm as ln
from symtrans.certify.exact import left_nullspace, rank_q
from symtrans.certify.linear import check_rank_sum, rank_sum_families
from symtrans.certify.search import search_universal


@pytest.fixture(scope="module")
def counterexample():
    res = search_universal("thm-4.2", ln.minimal_counterexample_families(3, 3), ln.check_thm42_affine)
    assert res.counterexample is not None
    return res


def test_thm42_counterexample_is_minimal_and_exact(counterexample):
    X = counterexample.counterexample[0]
    assert len(X) == 3 and len(X[0]) == 3 and all(abs(v) <= 1 for row in X for v in row)
    assert all(f["checked"] > 0 for f in counterexample.families[:-1])  # n = 2 and d = 2 searched, none found
    h = ln.hypotheses(X)
    assert h == {"H1": True, "H2": True, "H3": True, "H4": True, "all": True}
    assert ln.arank_q(X) == 1
    # independent route: LN(X) entry by entry in exact algebraic numbers, rank over Q(sqrt ...)
    alg = ln.ln_ranks_sympy(X, gamma=[2, -1, 3], beta=[1, 5, -2])
    assert alg["arank"] == ln.arank_ln(X) == 2


def test_counterexample_against_float_layernorm():
    """The bundled forward's LayerNorm (float64, eps = 0) separates the affine ranks by many decades."""
    import torch

    from symtrans.numeric.forward import layer_norm
    from symtrans.numeric.linalg import affine_rank

    X = torch.tensor(ln.RATIONAL_COUNTEREXAMPLE, dtype=torch.float64)
    Y = layer_norm(X, torch.tensor([1.0, -2, 3, 5], dtype=torch.float64),
                   torch.tensor([1.0, 2, 3, 4], dtype=torch.float64), 0.0)
    exact = ln.layer_norm_q(ln.RATIONAL_COUNTEREXAMPLE, [1, -2, 3, 5], [1, 2, 3, 4])
    assert torch.allclose(Y, torch.tensor([[float(v) for v in r] for r in exact], dtype=torch.float64))
    assert affine_rank(X).rank == 1 and affine_rank(Y).rank == 2 == ln.arank_q(exact)


def test_sigma_in_colspace_matches_left_nullspace_route():
    rng = random.Random(5)
    for _ in range(60):
        d = rng.randint(2, 4)
        X = [[rng.randint(-2, 2) for _ in range(d)] for _ in range(3)]
        if not all(v > 0 for v in ln.variances(X)):
            continue
        s = ln.sigmas(X)
        other = all(ln.surd_sum_is_zero(w, s) for w in left_nullspace(ln.centred(X)))
        assert ln.sigma_in_colspace(X) == other


def test_reduction_agrees_with_algebraic_layernorm():
    rng = random.Random(7)
    seen = 0
    for _ in range(15):
        X = [[rng.randint(-2, 2) for _ in range(3)] for _ in range(3)]
        if all(v > 0 for v in ln.variances(X)):
            assert ln.arank_ln(X) == ln.ln_ranks_sympy(X, [1, 3, -2], [0, 1, 1])["arank"]
            seen += 1
    assert seen >= 5


def test_algebraic_ranks_on_one_field_match_a_derivation_and_sympy_matrix_rank():
    """ln_ranks_sympy takes both ranks over the field of [LN(X) | 1]: the rank of LN(X) must be that of its
    first d columns. For d = 2, LN(x) = sign(x_0 - x_1) (1, -1) for every x (centred (x_0 - x_1)/2 (1, -1),
    sigma |x_0 - x_1| / 2): rank 1, affine rank 1 with both signs present; with beta = (1, 0) the rows are
    (2, -1) and (0, 1): rank 2. Larger cases against SymPy's ``Matrix.rank`` on the same entries."""
    import sympy as sp

    r = ln.ln_ranks_sympy([[3, 1], [0, 5], [7, 2]])
    assert (r["rank"], r["arank"]) == (1, 1)  # the false case: the ones column taken in gives rank 2
    assert ln.ln_ranks_sympy([[3, 1], [0, 5]], beta=[1, 0])["rank"] == 2
    rng = random.Random(4)
    for _ in range(12):
        n, d = rng.randint(1, 4), rng.randint(2, 4)
        X = [[rng.randint(-3, 3) for _ in range(d - 1)] for _ in range(n)]
        X = [x + [x[0] + 1] for x in X]  # never a constant row
        g, b = [rng.choice([1, 2, -1]) for _ in range(d)], [rng.randint(-2, 2) for _ in range(d)]
        r = ln.ln_ranks_sympy(X, g, b)
        M = sp.Matrix([[sp.sympify(v) for v in row] for row in r["LN"]])
        assert r["rank"] == M.rank(simplify=True), (X, g, b)
        assert r["arank"] == M.row_join(sp.ones(n, 1)).rank(simplify=True) - 1, (X, g, b)


def test_true_universal_statements_have_no_counterexample():
    zero_beta = search_universal("zero beta", ln.rational_norm_families(seed=3, count=30),
                                 lambda X, g, b: ln.check_zero_beta(X, g), stop_at_first=False)
    assert zero_beta.counterexample is None and zero_beta.applicable > 100
    rank_sum = search_universal("lem-rank-sum", rank_sum_families(count=40), check_rank_sum)
    assert rank_sum.counterexample is None and rank_sum.checked == 6561 + 40


def test_corrected_statement_and_its_proof():
    assert ln.verify_symbolic_identity(3)
    res = search_universal("corrected", ln.rational_norm_families(seed=4, count=30), ln.check_corrected,
                           stop_at_first=False)
    assert res.counterexample is None
    c = ln.check_corrected(ln.RATIONAL_COUNTEREXAMPLE)
    assert c.details["H1-H4"] and c.details["arank_LN_X"] == rank_q(ln.RATIONAL_COUNTEREXAMPLE) == 2


def test_the_symbolic_identity_refuses_a_wrong_column_operation():
    """The proof's column operation gives residuals 0 at every width tried; dropping beta or gamma does not."""
    for d in (2, 3, 5):
        assert ln.identity_residuals(d) == [0] * (d + 1)
        assert any(r != 0 for r in ln.identity_residuals(d, lambda v, b, g: v / g))  # beta left in
        assert any(r != 0 for r in ln.identity_residuals(d, lambda v, b, g: v - b))  # gamma not divided out
    # an independent route: the residual of the beta-less operation is sigma beta_j / gamma_j, evaluated at a point
    import sympy as sp

    r = ln.identity_residuals(2, lambda v, b, g: v / g)[0]
    at = {sp.Symbol("x0", real=True): 3, sp.Symbol("x1", real=True): 1, sp.Symbol("b0", real=True): 2,
          sp.Symbol("g0", nonzero=True, real=True): 4}
    assert r.subs(at) == sp.Rational(2, 4)  # sigma = |3 - 1| / 2 = 1


def test_zero_mean_beta_still_raises_matrix_rank():
    c = ln.check_remark_bound([[1, 1, -1, -1], [-1, -1, 1, 1]], [1, 1, 1, 1], [1, -1, 0, 0])
    assert c.holds and c.details["beta_mean"] == "0" and c.details["rank_LN_X"] == c.details["rank_X"] + 1


def test_squarefree_split_against_trial_division():
    # an independent route: strip squares by trial division, and check that m has no square factor
    from symtrans.certify.layernorm import _squarefree_split

    for k in range(1, 3000):
        s, m = _squarefree_split(k)
        assert s * s * m == k
        assert all(m % (p * p) for p in range(2, math.isqrt(m) + 1)), (k, s, m)
    # false case: a split that leaves a square in m is caught by the same test
    s, m = 1, 12
    assert not all(m % (p * p) for p in range(2, math.isqrt(m) + 1))


def test_facts_decided_once_agree_with_the_uncached_routes():
    """The cached X-only facts (H1, H2, sigma's membership, rank X) equal the routes that decide each alone.

    Fresh random rational matrices, not in the cache before; an int and an equal Fraction entry share one entry.
    """
    rng = random.Random(7)
    seen = 0
    for _ in range(60):
        n, d = rng.randint(1, 4), rng.randint(2, 5)
        X = [[ln.Fraction(rng.randint(-3, 3), rng.randint(1, 3)) for _ in range(d)] for _ in range(n)]
        h1, h2, sigma_in, r = ln._facts(ln._key(X))
        assert r == rank_q(X) == ln.rank_x(X)
        assert h1 == all(v > 0 for v in ln.variances(X))
        assert h2 == (rank_q(X + [[1] * d]) > rank_q(X))
        if h1:
            seen += 1
            assert sigma_in == ln.sigma_in_colspace(X)
            assert ln.arank_ln(X) == rank_q(ln.centred(X)) + (0 if sigma_in else 1) - 1
        else:
            assert sigma_in is None
            with pytest.raises(ValueError, match="H1 fails"):  # the false case: LN undefined, never a number
                ln.arank_ln(X)
    assert seen > 10  # both branches ran
    ln._facts.cache_clear()
    ln.rank_x([[1, 2], [2, 4]])
    assert ln.rank_x([[ln.Fraction(1), ln.Fraction(2)], [2, 4]]) == 1 and ln._facts.cache_info().hits == 1


def test_checks_report_each_rank_once_and_right():
    """check_zero_beta's ranks: rank(LN X) and rank(X) against an independent LN over Q (a rank-raising case fails)."""
    X, g = ln.RATIONAL_COUNTEREXAMPLE, [1, 2, 3, 4]  # sigma = (3, 1, 3): LN(X) over Q
    c = ln.check_zero_beta(X, g)
    assert c.hypotheses and c.holds and c.details["rank_LN_X"] == rank_q(ln.layer_norm_q(X, g)) == c.details["rank_X"] == rank_q(X)
    bad = ln.check_remark_bound([[1, 1, -1, -1], [-1, -1, 1, 1]], [1, 1, 1, 1], [1, -1, 0, 0])
    assert bad.details["rank_LN_X"] == bad.details["rank_X"] + 1 == 2  # beta raises the rank: not the zero-beta case
