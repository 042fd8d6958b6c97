"""Exact linear algebra for certificates: rational matrices, exact rank, non-zero minors, rank mod p.

Two engines, one contract (a rank that is *certified*, never estimated):

* :func:`rank_q` and friends: Gaussian elimination over Q with Python
  :class:`fractions.Fraction` (exact; for the small and medium sizes of the
  searches and witnesses);
* :func:`rank_mod_p`: vectorised elimination over GF(p), p = 2^31 - 1, of a
  rational matrix reduced mod p. Reduction mod p is a ring homomorphism on the
  rationals whose denominators p does not divide, so every minor over GF(p) is
  the image of the same minor over Q: a minor non-zero mod p is non-zero over Q,
  hence ``rank_mod_p(M) <= rank_q(M)`` always, and ``rank_mod_p(M) = k`` certifies
  ``rank_q(M) >= k`` (with equality when k = min(m, n): full rank is certified).
  This is the sound shortcut used at BERT sizes (768 x 768).

Float inputs are converted *exactly*: every float64 is a dyadic rational
(``Fraction(x)`` loses nothing), so real model weights need no rounding.

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

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "P", "Rational", "QMatrix", "frac", "qmatrix", "shape", "matmul", "transpose", "rref",
    "rank_q", "nullspace", "left_nullspace", "in_colspace", "det_q", "Minor", "nonzero_minor",
    "to_mod_p", "rank_mod_p", "kron", "identity", "as_strings", "from_strings",
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


def rref(M: Any) -> tuple[QMatrix, list[int]]:
    """Return the reduced row echelon form of ``M`` over Q and its pivot columns.

    Examples
    --------
    >>> R, piv = rref([[2, 4], [1, 3]])
    >>> piv, R
    ([0, 1], [[Fraction(1, 1), Fraction(0, 1)], [Fraction(0, 1), Fraction(1, 1)]])
    """
    R = qmatrix(M)
    m, n = shape(R)
    pivots: list[int] = []
    row = 0
    for col in range(n):
        if row == m:
            break
        pr = next((i for i in range(row, m) if R[i][col] != 0), None)
        if pr is None:
            continue
        R[row], R[pr] = R[pr], R[row]
        inv = 1 / R[row][col]
        R[row] = [v * inv for v in R[row]]
        for i in range(m):
            if i != row and R[i][col] != 0:
                f = R[i][col]
                R[i] = [a - f * b for a, b in zip(R[i], R[row])]
        pivots.append(col)
        row += 1
    return R, pivots


def _integer_rows(M: Any) -> list[list[int]]:
    """Scale each row of a rational matrix by its common denominator (rank-preserving)."""
    out = []
    for row in M:
        if all(type(v) is int for v in row):
            out.append(list(row))
            continue
        row = [frac(v) for v in row]
        den = math.lcm(*(v.denominator for v in row)) if row else 1
        out.append([v.numerator * (den // v.denominator) for v in row])
    return out


def rank_q(M: Any) -> int:
    """Return the exact rank of ``M`` over Q (fraction-free integer elimination).

    Examples
    --------
    >>> rank_q([[1, 1, 1], [1, 2, 3], [2, 3, 4]])  # row 3 = row 1 + row 2
    2
    >>> rank_q([["1/3", "2/3"], [1, 2]]), rank_q([])
    (1, 0)
    """
    A = _integer_rows(M)
    m = len(A)
    n = len(A[0]) if m else 0
    rank = 0
    for col in range(n):
        piv = next((i for i in range(rank, m) if A[i][col]), None)
        if piv is None:
            continue
        A[rank], A[piv] = A[piv], A[rank]
        p_row = A[rank]
        a = p_row[col]
        for i in range(rank + 1, m):
            b = A[i][col]
            if b:
                row = [a * x - b * y for x, y in zip(A[i], p_row)]
                g = math.gcd(*row)
                A[i] = [x // g for x in row] if g > 1 else row
        rank += 1
        if rank == m:
            break
    return rank


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
    """Return the exact determinant of a square matrix over Q (fraction-free Bareiss).

    Examples
    --------
    >>> det_q([[1, 2], [3, 4]])
    Fraction(-2, 1)
    """
    A = qmatrix(M)
    n = len(A)
    sign, prev = 1, Fraction(1)
    for k in range(n - 1):
        if A[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if A[i][k] != 0), None)
            if swap is None:
                return Fraction(0)
            A[k], A[swap] = A[swap], A[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                A[i][j] = (A[i][j] * A[k][k] - A[i][k] * A[k][j]) / prev
        prev = A[k][k]
    return sign * A[n - 1][n - 1] if n else Fraction(1)


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


def rank_mod_p(M: Any, p: int = P) -> int:
    """Return the rank over GF(p) of a rational matrix: a certified lower bound on its rank over Q.

    Vectorised int64 elimination; with p < 2^31 no intermediate overflows.

    Examples
    --------
    >>> rank_mod_p([[1, 2], [2, 4]]), rank_mod_p([[1, 0], [0, 7]], 7)  # mod 7 the 7 vanishes
    (1, 1)
    >>> import numpy as np
    >>> rank_mod_p(np.eye(300) + np.triu(np.ones((300, 300)), 1) * 0.5)
    300
    """
    import numpy as np

    A = to_mod_p(M, p) if not (isinstance(M, np.ndarray) and M.dtype == np.int64 and M.min(initial=0) >= 0
                               and M.max(initial=0) < p) else M.copy()
    m, n = A.shape
    rank = 0
    for col in range(n):
        if rank == m:
            break
        nz = np.flatnonzero(A[rank:, col])
        if nz.size == 0:
            continue
        piv = rank + int(nz[0])
        if piv != rank:
            A[[rank, piv]] = A[[piv, rank]]
        inv = pow(int(A[rank, col]), -1, p)
        A[rank, col:] = A[rank, col:] * inv % p
        below = A[rank + 1:, col].copy()
        rows = np.flatnonzero(below)
        if rows.size:
            idx = rank + 1 + rows
            A[idx, col:] = (A[idx, col:] - np.outer(below[rows], A[rank, col:])) % p
        rank += 1
    return rank
