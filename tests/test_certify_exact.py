"""The exact core against SymPy: rank over Q, rank mod p, non-zero minors, exact float conversion."""

import random
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from symtrans.certify.exact import P, nonzero_minor, rank_mod_p, rank_q, to_mod_p


def _random_rational(rng, m, n, r):
    """An m x n rational matrix of rank <= r (product of random rational factors)."""
    U = sp.Matrix(m, r, lambda i, j: sp.Rational(rng.randint(-4, 4), rng.randint(1, 5)))
    V = sp.Matrix(r, n, lambda i, j: sp.Rational(rng.randint(-4, 4), rng.randint(1, 5)))
    return U * V if r else sp.zeros(m, n)


@pytest.mark.parametrize("seed", range(4))
def test_ranks_agree_with_sympy(seed):
    rng = random.Random(seed)
    for _ in range(25):
        m, n = rng.randint(1, 6), rng.randint(1, 6)
        M = _random_rational(rng, m, n, rng.randint(0, min(m, n)))
        rows = [[str(v) for v in M.row(i)] for i in range(m)]
        expected = M.rank()
        assert rank_q(rows) == expected
        assert rank_mod_p(rows) == expected  # equality expected: p is huge, the entries small
        if expected:
            minor = nonzero_minor(rows)
            sub = M.extract(list(minor.rows), list(minor.cols))
            assert len(minor.rows) == expected and sub.det() == sp.Rational(str(minor.det)) != 0


def test_singular_matrix_is_not_full_rank():
    M = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]  # row 3 = 2 row 2 - row 1
    assert sp.Matrix(M).det() == 0
    assert rank_q(M) == rank_mod_p(M) == 2


def test_rank_mod_p_is_only_a_lower_bound():
    M = [[1, 0], [0, 7]]
    assert rank_q(M) == 2 and rank_mod_p(M, 7) == 1  # the drop is possible, never a rise
    with pytest.raises(ArithmeticError):
        to_mod_p([["1/7"]], 7)


def test_float_reduction_is_exact():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 4)).astype(np.float32).astype(np.float64)
    red = to_mod_p(X)
    for i in range(5):
        for j in range(4):
            q = Fraction(float(X[i, j]))  # the float's exact dyadic value
            assert red[i, j] == q.numerator % P * pow(q.denominator, -1, P) % P
    Y = X.copy()
    Y[:, 3] = 2 * Y[:, 0] - Y[:, 1]  # exactly representable: dependent over Q as stored
    assert rank_mod_p(Y) == rank_q(Y.tolist()) == 3


@pytest.mark.parametrize("seed", range(3))
def test_det_solve_nullspace_agree_with_sympy(seed):
    """flint's det, solve, rref and nullspace against SymPy's exact routines (the independent route)."""
    from symtrans.certify.exact import det_q, nullspace, rref, solve_q

    rng = random.Random(100 + seed)
    for _ in range(15):
        n = rng.randint(1, 5)
        M = _random_rational(rng, n, n, rng.choice([n, n, n - 1]))
        rows = [[str(v) for v in M.row(i)] for i in range(n)]
        assert sp.Rational(str(det_q(rows))) == M.det()
        b = [sp.Rational(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(n)]
        x = solve_q(rows, [str(v) for v in b])
        if M.det() == 0:
            assert x is None
        else:
            assert [sp.Rational(str(v)) for v in x] == list(M.LUsolve(sp.Matrix(b)))
        R, piv = rref(rows)
        R_sp, piv_sp = M.rref()
        assert list(piv) == list(piv_sp)
        assert sp.Matrix([[sp.Rational(str(v)) for v in r] for r in R]) == R_sp
        for v in nullspace(rows):
            assert M * sp.Matrix([sp.Rational(str(t)) for t in v]) == sp.zeros(n, 1)
        assert len(nullspace(rows)) == n - M.rank()


def test_dyadic_matrix_is_exact_on_extreme_floats():
    from symtrans.certify.exact import dyadic_matrix

    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 5)) * np.exp2(rng.integers(-140, 120, (6, 5)))
    A[0, 0], A[1, 1], A[2, 2] = 0.0, 5e-324, -np.finfo(np.float64).max  # zero, subnormal, largest
    Z, s = dyadic_matrix(A)
    rows = Z.tolist()
    for i in range(6):
        for j in range(5):
            assert Fraction(int(rows[i][j])) * Fraction(2) ** s == Fraction(float(A[i, j]))
    with pytest.raises(ArithmeticError):
        dyadic_matrix(np.array([[np.nan]]))


@pytest.mark.parametrize("seed", range(3))
def test_triangular_rank_agrees_with_exact_rank_and_declines_otherwise(seed):
    """A leading triangle with a non-zero diagonal gives min(m, n), as rank over Q does; anything else gives None."""
    from symtrans.certify.exact import triangular_rank

    rng = np.random.default_rng(seed)
    for _ in range(20):
        m, n = (int(x) for x in rng.integers(1, 7, 2))
        A = rng.integers(-3, 4, (m, n)).astype(np.float64)
        k = min(m, n)
        A[:k, :k] = np.triu(A[:k, :k]) if rng.integers(2) else np.tril(A[:k, :k])
        np.fill_diagonal(A[:k, :k], rng.choice([-2.0, -1.0, 0.5, 3.0], k))
        assert triangular_rank(A) == rank_q(A.tolist()) == k
        Z = A.copy()
        Z[k - 1, k - 1] = 0.0  # a zero pivot: the rule cannot conclude (the rank may or may not drop)
        assert triangular_rank(Z) is None
        if k >= 2:
            F = A.copy()
            F[0, k - 1], F[k - 1, 0] = 1.0, 1.0  # entries on both sides of the diagonal: not triangular
            assert triangular_rank(F) is None
    assert triangular_rank(np.zeros((0, 3))) is None and triangular_rank([[np.nan]]) is None


def test_triangular_rank_reads_rationals_exactly():
    """Fractions and "p/q" strings, as rank_q takes them: a tiny non-zero pivot counts, an exact zero does not."""
    from symtrans.certify.exact import triangular_rank

    tiny = Fraction(1, 10 ** 400)  # below every float: exact arithmetic still sees it
    assert triangular_rank([[tiny, 5], [0, Fraction(-2, 3)]]) == rank_q([[tiny, 5], [0, Fraction(-2, 3)]]) == 2
    assert triangular_rank([["1/3", "0", "7"], ["0", "-1/2", "1"]]) == 2
    assert triangular_rank([[Fraction(0), 1], [0, 1]]) is None and triangular_rank([["1", "1"], ["1", "1"]]) is None
