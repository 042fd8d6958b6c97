"""Exact LayerNorm rank analysis: hypotheses H1-H4, affine and matrix rank of LN(X), searches.

LayerNorm (paper's form, no epsilon) maps row x_i to
``(x_i - mean(x_i)) / sigma_i * gamma + beta`` with ``sigma_i`` the population
standard deviation. For a rational X, ``sigma_i = sqrt(q_i)`` with q_i rational:
an element ``c sqrt(m)`` (m a square-free integer) of a real quadratic field.
Three exact routes to the ranks of LN(X):

* :func:`layer_norm_q`: when every ``sigma_i`` is rational (e.g. d = 4 and
  centred rows of rational norm), LN(X) is a rational matrix and its ranks are
  computed over Q directly;
* :func:`ln_ranks_sympy`: any rational X, LN(X) in exact algebraic numbers and
  its rank over the algebraic field Q(sqrt(m_1), ...) (SymPy ``DomainMatrix``):
  slow, used to verify;
* :func:`arank_ln`: fast, any rational X, via the reduction
  ``arank(LN X) = rank([XP | sigma]) - 1`` (valid under H1 and H3; proof in
  :data:`CORRECTED_PROOF`) and the linear independence over Q of square roots
  of distinct square-free integers (Besicovitch), which decides exactly whether
  ``sigma`` lies in the rational subspace colspace(XP).

Examples
--------
>>> X = [[1, 0, 0], [0, 1, 0], [-1, 2, 0]]  # three collinear rows: arank(X) = 1
>>> arank_q(X), arank_ln(X), hypotheses(X)["all"]
(1, 2, True)
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from proofs.sec4_layernorm import CORRECTED_LATEX, CORRECTED_PROOF, CORRECTED_STATEMENT  # paper data: the claim's text
from symtrans.certify.exact import QMatrix, frac, qmatrix, rank_int, rank_q
from symtrans.certify.search import Check, Family

__all__ = [
    "RATIONAL_COUNTEREXAMPLE", "Surd", "sqrt_q", "surd_sum_is_zero", "centred", "variances", "sigmas", "arank_q", "hypotheses",
    "sigma_in_colspace", "arank_ln", "layer_norm_q", "ln_ranks_sympy", "CORRECTED_STATEMENT",
    "CORRECTED_LATEX", "CORRECTED_PROOF", "check_thm42_affine", "check_corrected", "check_zero_beta",
    "check_remark_bound", "minimal_counterexample_families", "rational_norm_families",
    "verify_symbolic_identity",
    "identity_residuals",
]


@dataclass(frozen=True)
class Surd:
    """The real number ``coef * sqrt(radicand)``, radicand a square-free positive integer.

    Examples
    --------
    >>> sqrt_q(Fraction(8, 9))
    Surd(coef=Fraction(2, 3), radicand=2)
    >>> str(sqrt_q(Fraction(8, 9))), float(sqrt_q(4))
    ('2/3*sqrt(2)', 2.0)
    """

    coef: Fraction
    radicand: int

    def __str__(self) -> str:
        return str(self.coef) if self.radicand == 1 else f"{self.coef}*sqrt({self.radicand})"

    def __float__(self) -> float:
        return float(self.coef) * math.sqrt(self.radicand)


@lru_cache(maxsize=4096)
def _squarefree_split(k: int) -> tuple[int, int]:
    """k = s^2 * m with m square-free; return (s, m) (factorisation by flint).

    Examples
    --------
    >>> _squarefree_split(360), _squarefree_split(49), _squarefree_split(1)
    ((6, 10), (7, 1), (1, 1))
    """
    from flint import fmpz

    root = math.isqrt(k)
    if root * root == k:  # rational sigma, the common case of the searches: no factorisation needed
        return root, 1
    s = m = 1
    for prime, e in fmpz(k).factor():
        s *= int(prime) ** (e // 2)
        m *= int(prime) ** (e % 2)
    return s, m


def sqrt_q(q: Any) -> Surd:
    """Return sqrt(q) for a rational q >= 0 exactly, as a :class:`Surd`.

    Examples
    --------
    >>> sqrt_q(Fraction(3, 4))
    Surd(coef=Fraction(1, 2), radicand=3)
    >>> sqrt_q(0)
    Surd(coef=Fraction(0, 1), radicand=1)
    """
    q = frac(q)
    if q < 0:
        raise ValueError("negative radicand")
    if q == 0:
        return Surd(Fraction(0), 1)
    s, m = _squarefree_split(q.numerator * q.denominator)
    return Surd(Fraction(s, q.denominator), m)


def surd_sum_is_zero(coeffs: Sequence[Fraction], surds: Sequence[Surd]) -> bool:
    """Decide exactly whether sum_i coeffs[i] * surds[i] == 0.

    Square roots of distinct square-free integers are linearly independent over
    Q, so the sum vanishes iff the rational coefficient of each radicand does.

    Examples
    --------
    >>> surd_sum_is_zero([1, -1], [sqrt_q(8), sqrt_q(2) ]), surd_sum_is_zero([1, -2], [sqrt_q(8), sqrt_q(2)])
    (False, True)
    """
    total: dict[int, Fraction] = {}
    for c, s in zip(coeffs, surds):
        total[s.radicand] = total.get(s.radicand, Fraction(0)) + frac(c) * s.coef
    return all(v == 0 for v in total.values())


def _cleared(values: Sequence[Any]) -> tuple[list[int], int]:
    """``(ints, den)`` with ``values = ints / den`` exactly, ``den`` the common denominator (1 for integers)."""
    if all(type(v) is int for v in values):
        return list(values), 1
    q = [frac(v) for v in values]
    den = math.lcm(*(v.denominator for v in q))
    return [v.numerator * (den // v.denominator) for v in q], den


def _centred_int(X: Any) -> list[tuple[list[int], int]]:
    """Each row of XP as (integer vector c_i, positive integer k_i) with XP_i = c_i / k_i."""
    out = []
    for row in X:
        ints, den = _cleared(row)
        d, total = len(ints), sum(ints)
        out.append(([d * v - total for v in ints], d * den))
    return out


def _integer_rows(X: Any) -> list[list[int]]:
    """Each row of a rational X times the common denominator of its entries (a row scaling: ranks kept)."""
    return [_cleared(row)[0] for row in X]


def centred(X: Any) -> QMatrix:
    """Return XP, each row minus its mean (exact).

    Examples
    --------
    >>> centred([[1, 2, 3]])
    [[Fraction(-1, 1), Fraction(0, 1), Fraction(1, 1)]]
    """
    return [[Fraction(v, k) for v in c] for c, k in _centred_int(X)]


def variances(X: Any) -> list[Fraction]:
    """Return the population variance of each row (exact).

    Examples
    --------
    >>> variances([[1, 2, 3], [5, 5, 5]])
    [Fraction(2, 3), Fraction(0, 1)]
    """
    return _variances(_centred_int(X))


def _variances(rows: list[tuple[list[int], int]]) -> list[Fraction]:
    return [Fraction(sum(v * v for v in c), len(c) * k * k) for c, k in rows]


def sigmas(X: Any) -> list[Surd]:
    """Return the row standard deviations sigma_i exactly.

    Examples
    --------
    >>> [str(s) for s in sigmas([[1, 2, 3], [1, 1, -1, -1]][:1])]
    ['1/3*sqrt(6)']
    """
    return [sqrt_q(v) for v in variances(X)]


def arank_q(X: Any) -> int:
    """Affine rank of the rows of a rational matrix: rank([X | 1]) - 1 (exact).

    Examples
    --------
    >>> arank_q([[0, 0], [1, 0], [2, 0]]), arank_q([[1, 2]])
    (1, 0)
    """
    return rank_q([list(row) + [1] for row in X]) - 1


def sigma_in_colspace(X: Any) -> bool:
    """Decide exactly whether sigma (row standard deviations) lies in colspace(XP).

    Write ``sigma = sum_m sqrt(m) u_m`` (u_m rational, m square-free). As
    colspace(XP) is spanned by rational vectors and the sqrt(m) are linearly
    independent over Q (see :func:`surd_sum_is_zero`), ``sigma`` lies in it iff
    every ``u_m`` does: one exact rank comparison.

    Examples
    --------
    >>> sigma_in_colspace([[1, 0, 0], [0, 1, 0], [-1, 2, 0]])
    False
    >>> sigma_in_colspace([[1, 2, 3], [2, 4, 6]])  # sigma_2 = 2 sigma_1, XP rows proportional
    True
    """
    return _sigma_in_colspace(_centred_int(X))


def _sigma_in_colspace(rows: list[tuple[list[int], int]]) -> bool:
    """:func:`sigma_in_colspace` from the rows of XP as ``(c_i, k_i)`` (:func:`_centred_int`)."""
    # row i of XP is c_i / k_i; scaling row i of [XP | u] by k_i keeps ranks
    parts: dict[int, list[Fraction]] = {}
    for i, v in enumerate(_variances(rows)):
        s = sqrt_q(v)
        parts.setdefault(s.radicand, [Fraction(0)] * len(rows))[i] = s.coef * rows[i][1]
    # sigma = sum_m sqrt(m) u_m with rational u_m; colspace(XP) is rational and the sqrt(m) are
    # linearly independent over Q, so sigma is in it iff every u_m is. Scaling a column u_m by the
    # common denominator of its entries keeps the rank and makes the matrix an integer one.
    cols = [_cleared(u)[0] for u in parts.values()]
    aug = [c + [u[i] for u in cols] for i, (c, _) in enumerate(rows)]
    return rank_int(aug) == rank_int([c for c, _ in rows])


def _key(X: Any) -> tuple[tuple[Any, ...], ...]:
    """``X`` as a hashable tuple of row tuples (equal values, equal keys: a Fraction 2 and an int 2 alike)."""
    return tuple(tuple(row) for row in X)


@lru_cache(maxsize=8192)
def _facts(key: tuple[tuple[Any, ...], ...]) -> tuple[bool, bool, bool | None, int]:
    """``(H1, H2, sigma in colspace(XP) (None without H1), rank X)`` of the matrix whose rows are ``key``.

    Pure in X and decided exactly, so computed once a process: ln-zero-beta, ln-remark and ln-corrected
    search the same small-integer family, and each check read H1-H4, rank X and (for the affine rank of
    LN X) sigma's membership again. ``rank X`` is the rank of the row-scaled integer matrix that H2
    compares (row scaling keeps the rank). Callers build the dicts they return: nothing cached is mutable.

    Examples
    --------
    >>> _facts(((1, 0, 0), (0, 1, 0), (-1, 2, 0)))
    (True, True, False, 2)
    >>> _facts(((1, 1, 1), (0, 1, 2)))  # row 0 constant: H1 fails (and 1 is a row: H2 too), sigma undecided
    (False, False, None, 2)
    """
    Xq = [list(r) for r in key]
    d = len(Xq[0])
    rows = _centred_int(Xq)
    h1 = all(v > 0 for v in _variances(rows))
    Xi = _integer_rows(Xq)  # each row times its common denominator: row space and ranks unchanged
    r = rank_int(Xi)
    h2 = rank_int(Xi + [[1] * d]) > r
    return h1, h2, (_sigma_in_colspace(rows) if h1 else None), r


def rank_x(X: Any) -> int:
    """rank(X) over Q, exactly; decided once a process for each X (:func:`_facts`).

    Examples
    --------
    >>> rank_x([[1, 2], [2, 4]]), rank_x([[Fraction(1, 2), 0], [0, 3]])
    (1, 2)
    """
    return _facts(_key(X))[3]


def hypotheses(X: Any, gamma: Sequence[Any] | None = None) -> dict[str, bool]:
    """Check the paper's H1-H4 exactly for X (and gamma, default all ones).

    H1: sigma_i > 0 for all rows; H2: 1_d not in rowspace(X); H3: gamma_j != 0;
    H4: sigma not in colspace(XP).

    Examples
    --------
    >>> hypotheses([[1, 0, 0], [0, 1, 0], [-1, 2, 0]])
    {'H1': True, 'H2': True, 'H3': True, 'H4': True, 'all': True}
    >>> hypotheses([[1, 0, 0], [0, 1, 0]])["H4"]  # n = rank(XP): colspace(XP) is all of R^n
    False
    >>> hypotheses([[1, 1, 1], [0, 1, 2]])["H1"], hypotheses([[1, 0], [0, 1]])["H2"]
    (False, False)
    """
    key = _key(X)
    h1, h2, sigma_in, _ = _facts(key)
    h3 = all(frac(g) != 0 for g in (gamma if gamma is not None else [1] * len(key[0])))
    h4 = (not sigma_in) if h1 else False
    return {"H1": h1, "H2": h2, "H3": h3, "H4": h4, "all": h1 and h2 and h3 and h4}


def arank_ln(X: Any) -> int:
    """arank(LN X) for any gamma with no zero entry and any beta, exactly (needs H1).

    Uses ``arank(LN X) = rank(XP) + [sigma not in colspace(XP)] - 1``
    (:data:`CORRECTED_PROOF`); cross-checked against :func:`layer_norm_q` and
    :func:`ln_ranks_sympy` in the tests.

    Examples
    --------
    >>> arank_ln([[1, 0, 0], [0, 1, 0], [-1, 2, 0]])
    2
    """
    h1, _, sigma_in, _ = _facts(_key(X))
    if not h1:
        raise ValueError("LayerNorm without epsilon is undefined on a constant row (H1 fails)")
    return rank_int([c for c, _ in _centred_int(X)]) + (0 if sigma_in else 1) - 1


def layer_norm_q(X: Any, gamma: Sequence[Any] | None = None,
                 beta: Sequence[Any] | None = None) -> QMatrix | None:
    """LN(X) exactly over Q when every sigma_i is rational; None otherwise.

    Examples
    --------
    >>> layer_norm_q([[1, 1, -1, -1]])  # sigma = 1
    [[Fraction(1, 1), Fraction(1, 1), Fraction(-1, 1), Fraction(-1, 1)]]
    >>> layer_norm_q([[1, 2, 3]]) is None
    True
    """
    rows = _centred_int(X if isinstance(X, list) else qmatrix(X))  # row i of XP is c_i / k_i
    d = len(rows[0][0])
    g = [frac(v) for v in (gamma if gamma is not None else [1] * d)]
    b = [frac(v) for v in (beta if beta is not None else [0] * d)]
    out = []
    for (c, k), var in zip(rows, _variances(rows)):
        s = sqrt_q(var)
        if s.radicand != 1 or s.coef == 0:
            return None
        # (x_ij - mean_i) / sigma_i * g_j + b_j = c_ij g_j / (k_i sigma_i) + b_j, as one fraction per entry:
        # numerator and denominator in integers, then a single normalisation
        sn, sd = s.coef.denominator, k * s.coef.numerator  # 1 / (k_i sigma_i) = sn / sd
        out.append([Fraction(v * gj.numerator * sn * bj.denominator + bj.numerator * sd * gj.denominator,
                             sd * gj.denominator * bj.denominator) for v, gj, bj in zip(c, g, b)])
    return out


def ln_ranks_sympy(X: Any, gamma: Sequence[Any] | None = None,
                   beta: Sequence[Any] | None = None) -> dict[str, Any]:
    """LN(X) in exact algebraic numbers (SymPy); its matrix rank and affine rank over Q(sqrt ...).

    Independent of the reduction used by :func:`arank_ln` (it builds LN(X)
    entry by entry); slow (tens of ms), for verification.

    Examples
    --------
    >>> r = ln_ranks_sympy([[1, 0, 0], [0, 1, 0], [-1, 2, 0]], beta=[1, 2, 3])
    >>> r["rank"], r["arank"], r["field"]
    (3, 2, 'QQ<sqrt(2) + sqrt(14)>')
    """
    import sympy as sp
    from sympy.polys.matrices import DomainMatrix

    Xq = qmatrix(X)
    n, d = len(Xq), len(Xq[0])
    g = [sp.Rational(str(frac(v))) for v in (gamma if gamma is not None else [1] * d)]
    b = [sp.Rational(str(frac(v))) for v in (beta if beta is not None else [0] * d)]
    rows = []
    for x in Xq:
        xs = [sp.Rational(str(v)) for v in x]
        mean = sum(xs) / d
        c = [v - mean for v in xs]
        sigma = sp.sqrt(sum(v * v for v in c) / d)
        rows.append([c[j] / sigma * g[j] + b[j] for j in range(d)])
    # one field for both ranks: [LN(X) | 1] has the same entries plus rationals, and a rank does not change with
    # the field it is taken over (building the algebraic field, a primitive element, is most of the cost)
    Y1 = DomainMatrix.from_list_sympy(n, d + 1, [r + [sp.Integer(1)] for r in rows], extension=True)
    Y = Y1.extract(list(range(n)), list(range(d)))
    return {"rank": Y.rank(), "arank": Y1.rank() - 1, "field": str(Y1.domain),
            "LN": [[str(v) for v in r] for r in rows]}


# ------------------------------------------------------------ the statements
#: A 3 x 4 counterexample to thm-4.2 whose LN(X) is rational (sigma = (3, 1, 3)):
#: three collinear centred rows of rational norm on a line missing the origin, found by the
#: ``affine`` family; used to verify the minimal counterexample by a fully rational route.
RATIONAL_COUNTEREXAMPLE = [[-5, 1, 1, 3], [-1, 1, 1, -1], [3, 1, 1, -5]]


@lru_cache(maxsize=8)
def verify_symbolic_identity(d: int = 3) -> bool:
    """Check in SymPy that diag(sigma) ([LN X | 1] C) = [XP | sigma] for a symbolic row of width d.

    ``C`` is the column operation of step (1) of :data:`CORRECTED_PROOF`:
    columns j <- (column j - beta_j * last) / gamma_j. Each entry involves only
    its own row, so one symbolic row of width d covers every n. Pure in ``d``:
    computed once per process (ln-zero-beta and ln-corrected both check it).
    The residuals are those of :func:`identity_residuals`, each expanded to 0.

    Examples
    --------
    >>> verify_symbolic_identity(3) and verify_symbolic_identity(4)
    True
    """
    return all(r == 0 for r in identity_residuals(d))


def identity_residuals(d: int, column_op: Any = None) -> list[Any]:
    """The entries of ``diag(sigma) ([LN X | 1] C) - [XP | sigma]`` for a symbolic row of width d, expanded.

    ``column_op(ln_j, beta_j, gamma_j)`` is column j of ``[LN X | 1] C``; the
    default is the proof's ``(ln_j - beta_j) / gamma_j``. ``expand`` is an
    identity transformation, so a residual it gives as 0 is 0 (the converse
    is what the proof's operation must not need: SymPy's own cancellation of
    ``sigma / sigma`` already gives 0 here, without ``simplify``, which also
    costs a third of a second of imports per process).

    Examples
    --------
    >>> identity_residuals(3)
    [0, 0, 0, 0]
    >>> [r == 0 for r in identity_residuals(2, lambda ln, b, g: ln / g)]  # beta not removed: not the identity
    [False, False, True]
    """
    import sympy as sp

    if column_op is None:
        column_op = lambda ln, b, g: (ln - b) / g  # noqa: E731
    x = sp.symbols(f"x0:{d}", real=True)
    g = sp.symbols(f"g0:{d}", nonzero=True, real=True)
    b = sp.symbols(f"b0:{d}", real=True)
    mean = sum(x) / d
    c = [xi - mean for xi in x]
    sigma = sp.sqrt(sum(v**2 for v in c) / d)
    ln = [c[j] / sigma * g[j] + b[j] for j in range(d)]
    lhs = [sigma * column_op(ln[j], b[j], g[j]) for j in range(d)] + [sigma * 1]
    rhs = c + [sigma]
    return [sp.expand(lv - rv) for lv, rv in zip(lhs, rhs)]


# -------------------------------------------------------------- the checks
def check_thm42_affine(X: Any) -> Check:
    """Exact check of the paper's Theorem 4.2 (affine part) on one X: H1-H4 => arank(LN X) = arank(X).

    Examples
    --------
    >>> check_thm42_affine([[1, 0, 0], [0, 1, 0], [-1, 2, 0]]).counterexample
    True
    """
    h = hypotheses(X)
    if not h["H1"]:
        return Check(False, True, {"hypotheses": h})
    a, b = arank_q(X), arank_ln(X)
    return Check(h["all"], a == b, {"hypotheses": h, "arank_X": a, "arank_LN_X": b, "rank_X": rank_x(X)})


def check_corrected(X: Any, gamma: Sequence[Any] | None = None, beta: Sequence[Any] | None = None) -> Check:
    """Exact check of the corrected statement on one candidate with rational LN(X).

    Hypotheses H1 and H3 (LN defined, gamma invertible); conclusion:
    ``arank(LN X) = rank([XP | sigma]) - 1``, and, when H2 and H4 hold too,
    ``arank(LN X) = rank(X)``. LN(X) is computed directly over Q
    (:func:`layer_norm_q`), independently of the reduction; candidates whose
    sigma_i are irrational are skipped (counted as hypotheses not met).

    Examples
    --------
    >>> c = check_corrected(RATIONAL_COUNTEREXAMPLE)  # thm-4.2 fails here; the corrected form holds
    >>> c.holds, c.details["H1-H4"], c.details["arank_LN_X"], c.details["arank_X"]
    (True, True, 2, 1)
    """
    h = hypotheses(X, gamma)
    Y = layer_norm_q(X, gamma, beta) if h["H1"] and h["H3"] else None
    if Y is None:
        return Check(False, True, {"hypotheses": h, "rational_LN": False})
    a_ln, r_x = arank_q(Y), rank_x(X)
    sig = [s.coef for s in sigmas(X)]
    general = a_ln == rank_q([r + [s] for r, s in zip(centred(X), sig)]) - 1
    main = (a_ln == r_x) if h["all"] else True
    return Check(True, general and main, {"hypotheses": h, "H1-H4": h["all"], "arank_LN_X": a_ln,
                                          "rank_X": r_x, "arank_X": arank_q(X)})


def check_zero_beta(X: Any, gamma: Sequence[Any] | None = None) -> Check:
    """Exact check of thm-4.2's matrix-rank part: H1-H3 and beta = 0 => rank(LN X) == rank(X).

    Examples
    --------
    >>> check_zero_beta([[1, 1, -1, -1], [3, 1, 1, -1]], gamma=[1, 2, 3, 4]).holds
    True
    """
    h = hypotheses(X, gamma)
    Y = layer_norm_q(X, gamma) if h["H1"] and h["H3"] else None
    if Y is None:
        return Check(False, True, {"hypotheses": h, "rational_LN": False})
    applicable = h["H1"] and h["H2"] and h["H3"]
    r_ln, r_x = rank_q(Y), rank_x(X)  # each rank decided once (they were computed twice)
    return Check(applicable, r_ln == r_x, {"hypotheses": h, "rank_LN_X": r_ln, "rank_X": r_x})


def check_remark_bound(X: Any, gamma: Sequence[Any], beta: Sequence[Any]) -> Check:
    """Exact check of the Remark's bound: H1-H3 => rank(LN X) <= rank(X) + 1, any beta.

    Examples
    --------
    >>> c = check_remark_bound([[1, 1, -1, -1], [-1, -1, 1, 1]], [1, 1, 1, 1], [1, -1, 0, 0])
    >>> c.holds, c.details["rank_LN_X"], c.details["rank_X"], c.details["beta_mean"]
    (True, 2, 1, '0')
    """
    h = hypotheses(X, gamma)
    Y = layer_norm_q(X, gamma, beta) if h["H1"] and h["H3"] else None
    if Y is None:
        return Check(False, True, {"hypotheses": h, "rational_LN": False})
    rl, rx = rank_q(Y), rank_x(X)
    mean = sum(frac(b) for b in beta) / len(beta)
    return Check(h["H1"] and h["H2"] and h["H3"], rl <= rx + 1,
                 {"hypotheses": h, "rank_LN_X": rl, "rank_X": rx, "beta_mean": str(mean)})


# ---------------------------------------------------------------- families
def minimal_counterexample_families(max_n: int = 3, max_d: int = 3) -> list[Family]:
    """Exhaustive small-integer families in increasing (n, d), entries in {-1, 0, 1}, sparsest first.

    The first counterexample found is minimal in (n, d, entry size, number of non-zeros).

    Examples
    --------
    >>> [f.name for f in minimal_counterexample_families(2, 3)]
    ['n=2 d=2 entries in {-1,0,1}', 'n=2 d=3 entries in {-1,0,1}']
    """
    fams = []
    for n in range(2, max_n + 1):
        for d in range(2, max_d + 1):
            def gen(n: int = n, d: int = d) -> Iterator[tuple[Any, ...]]:
                cands = sorted(itertools.product((0, 1, -1), repeat=n * d),
                               key=lambda t: (sum(map(abs, t)), [abs(v) for v in t][::-1], t))
                for t in cands:
                    yield ([list(t[i * d:(i + 1) * d]) for i in range(n)],)
            fams.append(Family(f"n={n} d={d} entries in {{-1,0,1}}",
                               f"all {3 ** (n * d)} integer {n}x{d} matrices with entries in {{-1,0,1}}, "
                               "sparsest first", gen()))
    return fams


def _pythagorean_rows(bound: int) -> list[tuple[int, int, int, int]]:
    """Centred integer rows of R^4 with rational norm: a h1 + b h2 + c h3, a^2+b^2+c^2 a square.

    h1, h2, h3 are the orthogonal Hadamard rows spanning 1^perp in R^4 (each of norm 2).
    """
    h = ((1, 1, -1, -1), (1, -1, 1, -1), (1, -1, -1, 1))
    out = []
    for a, b, c in itertools.product(range(-bound, bound + 1), repeat=3):
        s = a * a + b * b + c * c
        if s and math.isqrt(s) ** 2 == s:
            out.append(tuple(a * h[0][j] + b * h[1][j] + c * h[2][j] for j in range(4)))
    return out


def rational_norm_families(seed: int = 0, count: int = 90) -> list[Family]:
    """Families of 4-column rational X whose rows have rational sigma (so LN(X) is rational).

    * ``small-int``: all 3 x 4 matrices (up to row order) whose rows are {-1,0,1}-vectors of rational sigma;
    * ``rank-r``: random rows, each a multiple of one of r fixed rational-norm directions, plus a
      random per-row mean (which LN removes), for r = 1, 2, 3;
    * ``affine``: rows on affine lines and planes missing the origin (a common offset added to
      every row) with rational norms, plus per-row means;
    * ``near-degenerate``: 2-4 nearly parallel rows (rational points of a circle, angle ~ k/997).

    Each candidate comes with a random rational gamma (no zero entry) and beta.

    Examples
    --------
    >>> fams = rational_norm_families(count=3)
    >>> [f.name for f in fams]
    ['small-int', 'rank-r', 'affine', 'near-degenerate']
    >>> X, g, b = next(iter(fams[1].candidates)); layer_norm_q(X, g, b) is not None
    True
    """
    rng = random.Random(seed)

    def rq(lo: int = -3, hi: int = 3, nonzero: bool = False) -> Fraction:
        while True:
            v = Fraction(rng.randint(lo, hi), rng.randint(1, 3))
            if v or not nonzero:
                return v

    def gb() -> tuple[list[Fraction], list[Fraction]]:
        return [rq(nonzero=True) for _ in range(4)], [rq() for _ in range(4)]

    small = [r for r in itertools.product((-1, 0, 1), repeat=4) if layer_norm_q([list(r)]) is not None]

    def small_int() -> Iterator[tuple[Any, ...]]:
        for rows in itertools.combinations_with_replacement(small, 3):
            yield ([list(r) for r in rows], *gb())

    pool = _pythagorean_rows(4)

    def rank_r() -> Iterator[tuple[Any, ...]]:
        for k in range(count):
            r = 1 + k % 3
            dirs = rng.sample(pool, r)
            n = rng.randint(r, 5)
            X = []
            for i in range(n):
                u = dirs[i % r] if i < r else rng.choice(dirs)
                m, scale = rq(), Fraction(rng.choice((-3, -2, -1, 1, 2, 3)))
                X.append([scale * v + m for v in u])
            yield (X, *gb())

    pool_set = set(pool)

    def affine() -> Iterator[tuple[Any, ...]]:
        lines = []
        for u in pool:
            for w in pool:
                mid2 = tuple(a + b for a, b in zip(u, w))
                if u < w and all(v % 2 == 0 for v in mid2) and tuple(v // 2 for v in mid2) in pool_set:
                    mid = tuple(v // 2 for v in mid2)
                    if rank_q([list(u), list(mid), list(w)]) == 2:  # line misses the origin
                        lines.append((u, mid, w))
        rng.shuffle(lines)
        for k, (u, mid, w) in enumerate(lines[:count]):
            rows = [list(u), list(mid), list(w)]
            if k % 2:  # add a fourth rational-norm row: affine plane or general position
                rows.append(list(rng.choice(pool)))
            yield ([[Fraction(v) + m for v in row] for row, m in zip(rows, [rq() for _ in rows])], *gb())

    hadamard = ((1, 1, -1, -1), (1, -1, 1, -1), (1, -1, -1, 1))

    def near() -> Iterator[tuple[Any, ...]]:
        for _ in range(count // 3):
            ha, hb = rng.sample(hadamard, 2)
            rows = []
            for k in range(rng.randint(2, 4)):  # nearly parallel rows on a circle: t = k / 997
                t = Fraction(k, 997)
                c, s = (1 - t * t) / (1 + t * t), 2 * t / (1 + t * t)
                K, m = Fraction(rng.randint(1, 5)), rq()
                rows.append([K * (c * a + s * b) + m for a, b in zip(ha, hb)])
            yield (rows, *gb())

    return [
        Family("small-int", f"all 3x4 matrices (up to row order) with rows among the {len(small)} vectors in "
               "{-1,0,1}^4 of rational sigma", small_int()),
        Family("rank-r", f"{count} random X with rank(XP) = r in {{1,2,3}}, n <= 5, random row means", rank_r()),
        Family("affine", f"up to {count} triples/quadruples of rational-norm rows on affine lines missing "
               "the origin (common offset), random row means", affine()),
        Family("near-degenerate", f"{count // 3} sets of 2-4 nearly parallel rational-norm rows "
               "K (cos t h_a + sin t h_b), t = k/997 on a rational circle, random row means", near()),
    ]
