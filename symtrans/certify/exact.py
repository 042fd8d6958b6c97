"""Exact linear algebra for certificates, on python-flint: rank, determinant, minors and solving over Q and GF(p).

One engine, one contract (a rank that is *certified*, never estimated):

* :func:`rank_q`, :func:`det_q`, :func:`rref`, :func:`nullspace`, :func:`solve_q`
  run FLINT's exact ``fmpz_mat`` / ``fmpq_mat`` routines (multimodular, fraction-free);
* :func:`rank_mod_p` runs ``nmod_mat`` over GF(p), p = 2^31 - 1, on a rational
  matrix reduced mod p. Reduction mod p is a ring homomorphism on the rationals
  whose denominators p does not divide, so every minor over GF(p) is the image of
  the same minor over Q: a minor non-zero mod p is non-zero over Q, hence
  ``rank_mod_p(M) <= rank_q(M)`` always, and ``rank_mod_p(M) = k`` certifies
  ``rank_q(M) >= k``.

Float inputs are converted *exactly*: every float64 (hence every float32) is a
dyadic rational m 2^e, so a float matrix is an integer matrix times one power of
two (:func:`dyadic_matrix`); real model weights need no rounding.
The pure-Python eliminations these routines replaced survive only as the
baseline of ``benchmarks/bench_certify.py``.

Examples
--------
>>> rank_q([[1, 2], [2, 4]])
1
>>> rank_mod_p([[1, 2], [3, 4]])
2
>>> nonzero_minor([[0, 1, 0], [0, 2, 0]]).det
Fraction(1, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "P", "Rational", "QMatrix", "frac", "qmatrix", "shape", "matmul", "transpose", "rref",
    "rank_q", "rank_int", "nullspace", "left_nullspace", "in_colspace", "det_q", "Minor", "nonzero_minor",
    "to_mod_p", "rank_mod_p", "triangular_rank", "kron", "identity", "as_strings", "from_strings",
    "fmpq_matrix", "dyadic_matrix", "solve_q",
]

#: The prime of :func:`rank_mod_p`: 2^31 - 1 (a Mersenne prime), so products of
#: two residues stay below 2^62 and int64 arithmetic never overflows.
P = 2**31 - 1

Rational = Fraction
QMatrix = list[list[Fraction]]


def frac(x: Any) -> Fraction:
    """Convert an int, Fraction, exact string "p/q" or float (exactly) to a Fraction.

    Examples
    --------
    >>> frac("3/4"), frac(0.5), frac(2)
    (Fraction(3, 4), Fraction(1, 2), Fraction(2, 1))
    >>> frac(0.1) == Fraction(3602879701896397, 36028797018963968)  # the float's exact value
    True
    """
    t = type(x)
    if t is Fraction:
        return x
    if t is int:
        return Fraction(x)
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        return Fraction(x)
    if hasattr(x, "item"):  # numpy / torch scalar
        x = x.item()
    return Fraction(x)


def qmatrix(M: Any) -> QMatrix:
    """Return ``M`` (nested lists, numpy or torch array) as a list of rows of Fractions.

    Examples
    --------
    >>> qmatrix([[1, "1/2"]])
    [[Fraction(1, 1), Fraction(1, 2)]]
    """
    if hasattr(M, "tolist"):
        M = M.tolist()
    return [[frac(v) for v in row] for row in M]


def shape(M: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """Return (rows, columns) of a nested-list matrix.

    Examples
    --------
    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    """
    return len(M), (len(M[0]) if M else 0)


def identity(n: int) -> QMatrix:
    """Return the n x n identity over Q.

    Examples
    --------
    >>> identity(2)
    [[Fraction(1, 1), Fraction(0, 1)], [Fraction(0, 1), Fraction(1, 1)]]
    """
    return [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]


def transpose(M: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Return the transpose of a nested-list matrix.

    Examples
    --------
    >>> transpose([[1, 2, 3]])
    [[1], [2], [3]]
    """
    return [list(col) for col in zip(*M)]


def matmul(A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Return the exact product A B (entries of any exact number type).

    Examples
    --------
    >>> matmul([[1, 2]], [[3], [4]])
    [[11]]
    """
    Bt = transpose(B)
    return [[sum(a * b for a, b in zip(row, col)) for col in Bt] for row in A]


def kron(A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Return the Kronecker product A (x) B.

    Examples
    --------
    >>> kron([[1, 0], [0, 1]], [[2]])
    [[2, 0], [0, 2]]
    """
    return [[a * b for a in arow for b in brow] for arow in A for brow in B]


def fmpq_matrix(M: Any) -> Any:
    """Return ``M`` (nested lists of exact numbers or floats, numpy or torch array) as a flint ``fmpq_mat``.

    Floats are taken exactly (see :func:`dyadic_matrix`).

    Examples
    --------
    >>> fmpq_matrix([[1, "1/2"], [0.25, -3]]).tolist()
    [[1, 1/2], [1/4, -3]]
    """
    from flint import fmpq, fmpq_mat

    if hasattr(M, "detach"):
        M = M.detach().cpu().double().numpy()
    if hasattr(M, "dtype") and getattr(M, "ndim", 0) == 2 and M.dtype.kind in "fiu":
        Z, shift = dyadic_matrix(M)
        return fmpq_mat(Z) * (fmpq(2) ** shift)
    m, n = len(M), (len(M[0]) if len(M) else 0)
    entries = []
    for row in M:
        for v in row:
            if type(v) is not int:  # ints go in as they are; everything else through its exact Fraction
                v = frac(v)
                v = fmpq(v.numerator, v.denominator)
            entries.append(v)
    return fmpq_mat(m, n, entries)


def dyadic_matrix(A: Any) -> tuple[Any, int]:
    """Return ``(Z, s)`` with Z an ``fmpz_mat`` and ``A == Z * 2**s`` exactly, for a float (or int) array A.

    Every finite float64 is m 2^e with an integer m of at most 53 bits, so the
    whole matrix is an integer matrix times 2^s, s the smallest exponent that
    occurs. Nothing is rounded. Non-finite entries raise ArithmeticError.

    Examples
    --------
    >>> import numpy as np
    >>> Z, s = dyadic_matrix(np.array([[0.5, -0.75], [3.0, 0.0]]))
    >>> Z.tolist(), s
    ([[2, -3], [12, 0]], -2)
    """
    import numpy as np
    from flint import fmpz_mat

    if hasattr(A, "detach"):
        A = A.detach().cpu().double().numpy()
    arr = np.asarray(A)
    if arr.dtype.kind in "iu":
        return fmpz_mat([[int(v) for v in row] for row in arr.tolist()]), 0
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ArithmeticError("non-finite entry: not a rational matrix")
    mant, exp = np.frexp(arr)
    ints = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1, 53-bit significand
    shift = exp.astype(np.int64) - 53
    nz = ints != 0
    if not nz.any():
        return fmpz_mat(arr.shape[0], arr.shape[1]), 0
    tz = np.zeros_like(ints)  # strip common trailing zero bits so the integers stay small
    low = ints[nz] & -ints[nz]
    tz[nz] = np.log2(low.astype(np.float64)).astype(np.int64)
    ints = ints >> tz  # exact: the bits dropped are zeros
    shift = shift + tz
    s = int(shift[nz].min())
    rel = np.where(nz, shift - s, 0)
    # |ints| < 2^53 after stripping; when every shifted entry stays below 2^62 the shift is exact in int64
    bits = np.zeros_like(ints)
    bits[nz] = np.frexp(np.abs(ints[nz]).astype(np.float64))[1]  # bit length (exact below 2^53)
    if int((bits + rel).max()) <= 62:
        return fmpz_mat((ints << rel).tolist()), s
    return fmpz_mat([[i << e if i else 0 for i, e in zip(r1, r2)]
                     for r1, r2 in zip(ints.tolist(), rel.tolist())]), s


def _fraction(x: Any) -> Fraction:
    return Fraction(int(x.p), int(x.q))


_FLINT_MATS: tuple[Any, Any] | None = None


def _flint_mats() -> tuple[Any, Any]:
    """``(fmpz_mat, fmpq_mat)``, imported on first use (an import statement per call costs more than a rank)."""
    global _FLINT_MATS
    if _FLINT_MATS is None:
        from flint import fmpq_mat, fmpz_mat

        _FLINT_MATS = (fmpz_mat, fmpq_mat)
    return _FLINT_MATS


def _to_flint(M: Any) -> Any:
    """An ``fmpz_mat`` (integer or float arrays, integer lists) or ``fmpq_mat`` (anything else) for ``M``."""
    fmpz_mat, fmpq_mat = _flint_mats()
    if isinstance(M, (fmpz_mat, fmpq_mat)):
        return M
    if hasattr(M, "dtype") or hasattr(M, "detach"):
        return dyadic_matrix(M)[0]  # scaling by 2^s changes no rank and no pivot
    rows = list(M)
    if rows and all(type(v) is int for row in rows for v in row):
        return fmpz_mat([list(r) for r in rows])
    return fmpq_matrix(rows)


def rref(M: Any) -> tuple[QMatrix, list[int]]:
    """Return the reduced row echelon form of ``M`` over Q and its pivot columns (flint ``fmpq_mat.rref``).

    Examples
    --------
    >>> R, piv = rref([[2, 4], [1, 3]])
    >>> piv, R
    ([0, 1], [[Fraction(1, 1), Fraction(0, 1)], [Fraction(0, 1), Fraction(1, 1)]])
    """
    m, n = shape(M) if isinstance(M, list) else (None, None)
    if m == 0 or n == 0:
        return [list(map(frac, r)) for r in M], []
    R, rank = fmpq_matrix(M).rref()
    rows = [[_fraction(v) for v in row] for row in R.tolist()]
    pivots = [next(j for j, v in enumerate(rows[i]) if v != 0) for i in range(rank)]
    return rows, pivots


def rank_q(M: Any) -> int:
    """Return the exact rank of ``M`` over Q (flint ``fmpz_mat.rank``/``fmpq_mat.rank``).

    Examples
    --------
    >>> rank_q([[1, 1, 1], [1, 2, 3], [2, 3, 4]])  # row 3 = row 1 + row 2
    2
    >>> rank_q([["1/3", "2/3"], [1, 2]]), rank_q([])
    (1, 0)
    """
    if isinstance(M, list) and (not M or not M[0]):
        return 0
    return int(_to_flint(M).rank())


def rank_int(rows: list[list[int]]) -> int:
    """Exact rank of an integer matrix given as lists of ``int`` (flint ``fmpz_mat.rank``), without type checks.

    :func:`rank_q` for callers that built integer rows themselves (the exact
    searches call it tens of thousands of times per report; the per-entry type
    test of :func:`rank_q` was half the cost). Anything but ints is refused by
    flint, not converted.

    Examples
    --------
    >>> rank_int([[1, 1, 1], [1, 2, 3], [2, 3, 4]]), rank_int([]), rank_int([[0, 0]])
    (2, 0, 0)
    >>> rank_int([[1.5, 2]])
    Traceback (most recent call last):
    ...
    TypeError: ...
    """
    if not rows or not rows[0]:
        return 0
    return int(_flint_mats()[0](rows).rank())


def nullspace(M: Any) -> QMatrix:
    """Return a basis (as rows) of the right null space {v : M v = 0} over Q.

    Examples
    --------
    >>> nullspace([[1, 1]])
    [[Fraction(-1, 1), Fraction(1, 1)]]
    """
    R, piv = rref(M)
    n = shape(R)[1]
    free = [j for j in range(n) if j not in piv]
    basis = []
    for f in free:
        v = [Fraction(0)] * n
        v[f] = Fraction(1)
        for i, p in enumerate(piv):
            v[p] = -R[i][f]
        basis.append(v)
    return basis


def left_nullspace(M: Any) -> QMatrix:
    """Return a basis (as rows) of {w : w^T M = 0} over Q.

    Examples
    --------
    >>> left_nullspace([[1], [1]])
    [[Fraction(-1, 1), Fraction(1, 1)]]
    """
    return nullspace(transpose(qmatrix(M)))


def in_colspace(M: Any, v: Sequence[Any]) -> bool:
    """True when the rational vector ``v`` lies in the column space of ``M`` (exact).

    Examples
    --------
    >>> in_colspace([[1, 0], [0, 1], [1, 1]], [1, 2, 3]), in_colspace([[1], [1], [1]], [1, 2, 3])
    (True, False)
    """
    Mq = qmatrix(M)
    aug = [row + [frac(x)] for row, x in zip(Mq, v)]
    return rank_q(aug) == rank_q(Mq)


def det_q(M: Any) -> Fraction:
    """Return the exact determinant of a square matrix over Q (flint ``fmpq_mat.det``).

    Examples
    --------
    >>> det_q([[1, 2], [3, 4]])
    Fraction(-2, 1)
    >>> det_q([])
    Fraction(1, 1)
    """
    if isinstance(M, list) and not M:
        return Fraction(1)
    F = _to_flint(M)
    if hasattr(M, "dtype") or hasattr(M, "detach"):
        F = fmpq_matrix(M)  # the scale matters for the value of a determinant
    d = F.det()
    return Fraction(int(d)) if not hasattr(d, "q") else _fraction(d)


def solve_q(A: Any, b: Any) -> list[Fraction] | None:
    """Return the unique exact solution x of A x = b over Q, or None when A is singular (flint ``solve``).

    Examples
    --------
    >>> solve_q([[2, 0], [0, 4]], [1, 1])
    [Fraction(1, 2), Fraction(1, 4)]
    >>> solve_q([[1, 1], [1, 1]], [1, 2]) is None
    True
    """
    A_ = fmpq_matrix(A)
    if A_.nrows() != A_.ncols() or A_.det() == 0:
        return None
    x = A_.solve(fmpq_matrix([[v] for v in b]))
    return [_fraction(row[0]) for row in x.tolist()]


@dataclass(frozen=True)
class Minor:
    """A non-zero minor: row and column indices (0-based) and its exact determinant.

    Examples
    --------
    >>> Minor((0,), (1,), Fraction(3)).to_dict()
    {'rows': [0], 'cols': [1], 'det': '3', 'size': 1}
    """

    rows: tuple[int, ...]
    cols: tuple[int, ...]
    det: Fraction

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (determinant as an exact string).

        Examples
        --------
        >>> Minor((0, 1), (0, 1), Fraction(-1, 2)).to_dict()["det"]
        '-1/2'
        """
        return {"rows": list(self.rows), "cols": list(self.cols), "det": str(self.det),
                "size": len(self.rows)}


def nonzero_minor(M: Any) -> Minor:
    """Return a rank-sized minor of ``M`` with non-zero exact determinant (a rank certificate).

    Its size is ``rank_q(M)``; the determinant is recomputed independently by
    :func:`det_q`, and an error is raised if it vanished (it cannot).

    Examples
    --------
    >>> m = nonzero_minor([[1, 2, 3], [2, 4, 6], [0, 0, 1]])
    >>> m.rows, m.cols, m.det
    ((0, 2), (0, 2), Fraction(1, 1))
    """
    Mq = qmatrix(M)
    cols = rref(Mq)[1]
    sub = [[row[j] for j in cols] for row in Mq]
    rows = rref(transpose(sub))[1]
    minor = [[Mq[i][j] for j in cols] for i in rows]
    d = det_q(minor) if rows else Fraction(1)
    if d == 0:  # pragma: no cover - would mean rref is wrong
        raise ArithmeticError("selected minor vanished")
    return Minor(tuple(rows), tuple(cols), d)


def as_strings(M: Any) -> list[list[str]]:
    """Return a rational matrix as nested lists of exact strings (for evidence records).

    Examples
    --------
    >>> as_strings([[Fraction(1, 2), 3]])
    [['1/2', '3']]
    """
    return [[str(frac(v)) for v in row] for row in M]


def from_strings(M: Iterable[Iterable[str]]) -> QMatrix:
    """Inverse of :func:`as_strings`.

    Examples
    --------
    >>> from_strings([["1/2", "-3"]])
    [[Fraction(1, 2), Fraction(-3, 1)]]
    """
    return [[Fraction(v) for v in row] for row in M]


# ------------------------------------------------------------------- mod p
def to_mod_p(M: Any, p: int = P) -> Any:
    """Reduce a rational matrix mod p as an int64 numpy array (floats exactly, via frexp).

    Raises ArithmeticError if p divides a denominator (the reduction would be undefined).

    Examples
    --------
    >>> to_mod_p([[1, -1], ["1/2", 0.25]], 7).tolist()
    [[1, 6], [4, 2]]
    """
    import numpy as np

    if hasattr(M, "detach"):  # torch
        M = M.detach().cpu().double().numpy()
    arr = np.asarray(M) if not isinstance(M, list) else None
    if arr is not None and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ArithmeticError("non-finite entry")
        mant, exp = np.frexp(arr.astype(np.float64))
        ints = (mant * 2.0**53).astype(np.int64)  # exact: |mant| < 1, 53-bit significand
        shift = exp.astype(np.int64) - 53
        out = np.mod(ints, p)
        if p == P:  # Mersenne: 2^31 = 1 mod p, so 2^e = 2^(e mod 31) for every integer e, negative ones too
            return (out * np.left_shift(np.int64(1), np.mod(shift, 31))) % p
        uniq, inv = np.unique(shift, return_inverse=True)
        table = np.array([pow(2, int(e), p) if e >= 0 else pow(pow(2, -int(e), p), -1, p) for e in uniq],
                         dtype=np.int64)
        return (out * table[inv].reshape(shift.shape)) % p
    if arr is not None and arr.dtype.kind in "iu":
        return np.mod(arr.astype(np.int64), p)
    rows = qmatrix(M)
    out = np.zeros(shape(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if v.denominator % p == 0:
                raise ArithmeticError(f"p = {p} divides a denominator")
            out[i, j] = v.numerator % p * pow(v.denominator, -1, p) % p
    return out


def triangular_rank(M: Any) -> int | None:
    """min(m, n) when M's leading square block is triangular with a non-zero diagonal (its rank, exactly); else None.

    That block's determinant is the product of its diagonal, so rank M >=
    min(m, n), and rank M <= min(m, n) always. O(m n) comparisons of the
    entries as given (integers, or floats taken exactly), no elimination: a
    certified rank for witnesses built that way (an identity, a unit
    triangle), where :func:`rank_mod_p` would spend an elimination.

    Examples
    --------
    >>> import numpy as np
    >>> triangular_rank(np.eye(3, 5)), triangular_rank(np.triu(np.ones((4, 4)))), triangular_rank(np.eye(3)[::-1])
    (3, 4, None)
    >>> triangular_rank(np.diag([1.0, 0.0, 2.0])) is None  # a zero on the diagonal: no conclusion
    True
    >>> triangular_rank([["1/2", 0], [0, 3]]), triangular_rank([["1/2", 1], [1, 3]])  # rationals, exactly
    (2, None)
    """
    import numpy as np

    A = np.asarray(M)
    if A.dtype.kind in "OU":  # rationals (Fraction, "p/q" strings): compared exactly as Python numbers
        A = np.vectorize(frac, otypes=[object])(A) if A.ndim == 2 and A.size else A
    elif A.dtype.kind not in "biuf" or not np.isfinite(A).all():
        return None
    if A.ndim != 2 or not A.size:
        return None
    k = min(A.shape)
    B = A[:k, :k]
    if not (np.diagonal(B) != 0).all():
        return None
    return k if not np.triu(B, 1).any() or not np.tril(B, -1).any() else None


def rank_mod_p(M: Any, p: int = P) -> int:
    """Return the rank over GF(p) of a rational matrix: a certified lower bound on its rank over Q (flint ``nmod_mat``).

    Examples
    --------
    >>> rank_mod_p([[1, 2], [2, 4]]), rank_mod_p([[1, 0], [0, 7]], 7)  # mod 7 the 7 vanishes
    (1, 1)
    >>> import numpy as np
    >>> rank_mod_p(np.eye(300) + np.triu(np.ones((300, 300)), 1) * 0.5)
    300
    """
    import numpy as np
    from flint import nmod_mat

    A = M if (isinstance(M, np.ndarray) and M.dtype == np.int64 and M.min(initial=0) >= 0
              and M.max(initial=0) < p) else to_mod_p(M, p)
    m, n = A.shape
    if m == 0 or n == 0:
        return 0
    return int(nmod_mat(m, n, A.ravel().tolist(), p).rank())
