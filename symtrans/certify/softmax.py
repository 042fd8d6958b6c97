"""Conditions through softmax: rigorous interval certificates for F(X) = X + MHA(X).

Theorem 5.3's bad set on the rank-r stratum is
``B_r = {X : rank X = r, rank F(X) <= r}``, the common zero set of the
(r+1)-minors of F, real-analytic in X and in the weights. The stratum
``M_r = {X in R^{n x d} : rank X = r}`` is a connected real-analytic
submanifold of dimension r (n + d - r) for r < min(n, d) (rank-deficient
matrices are Lebesgue-null in R^{n x d}, so "almost every rank-deficient X" can
only mean: almost every X of M_r for its Riemannian volume, i.e. Lebesgue
measure in analytic charts). A real-analytic function on a connected analytic
manifold that is not identically zero vanishes only on a null set, so one X* in
M_r with a non-zero (r+1)-minor of F(X*) certifies that B_r is null in M_r.
Jointly in (weights, X), the same witness certifies it for almost every weight
setting (Fubini), and at the given weights for those weights.

The minor is enclosed with python-flint's ``arb`` ball arithmetic (at
:data:`PRECISION` bits): scores are exact rationals (weights are exact dyadic
rationals, so nothing is rounded before the balls start), ``exp`` and ``sqrt``
are rigorous enclosures, and ``arb_mat.det`` encloses the determinant. The minor
is certified non-zero only if its ball excludes 0.

Examples
--------
>>> import random
>>> from symtrans.certify.linear import random_int_matrix
>>> heads = random_heads(4, 2, 2, random.Random(0))
>>> cert = certify_residual_rank(witness_X(5, 4, 2), heads)
>>> cert.certified, cert.minor_size
(True, 3)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from symtrans.certify.exact import frac, matmul, qmatrix, rank_q

__all__ = ["PRECISION", "ExactMatrix", "Head", "random_heads", "witness_X", "ball", "ball_det", "residual_map_ball",
           "ResidualRankCertificate", "certify_residual_rank", "heads_from_model",
           "certify_attention_invertible", "sum_of_head_subspaces"]


#: Working precision (bits) of the ball enclosures.
PRECISION = 128


class ExactMatrix:
    """A rational matrix held as float64 (exact dyadic values) or Fractions, converted to Fractions lazily.

    Examples
    --------
    >>> M = ExactMatrix([[0.5, 1.0]])
    >>> M.row(0), M.shape
    ((Fraction(1, 2), Fraction(1, 1)), (1, 2))
    """

    def __init__(self, data: Any):
        import numpy as np

        if hasattr(data, "detach"):
            data = data.detach().cpu().double().numpy()
        if isinstance(data, np.ndarray) and data.dtype.kind == "f":
            self.float = data.astype(np.float64)
            self._rows: dict[int, tuple[Fraction, ...]] = {}
        else:
            q = qmatrix(data)
            self._rows = {i: tuple(r) for i, r in enumerate(q)}
            self.float = np.array([[float(v) for v in r] for r in q], dtype=np.float64)
        self.shape = self.float.shape

    def row(self, k: int) -> tuple[Fraction, ...]:
        """Row k as exact Fractions (cached).

        Examples
        --------
        >>> ExactMatrix([[1, 2], [3, 4]]).row(1)
        (Fraction(3, 1), Fraction(4, 1))
        """
        if k not in self._rows:
            self._rows[k] = tuple(Fraction(float(v)) for v in self.float[k])
        return self._rows[k]

    def entry(self, i: int, j: int) -> Fraction:
        """Entry (i, j) exactly.

        Examples
        --------
        >>> ExactMatrix([[0.25]]).entry(0, 0)
        Fraction(1, 4)
        """
        return self._rows[i][j] if i in self._rows else Fraction(float(self.float[i, j]))


@dataclass(frozen=True)
class Head:
    """One attention head's exact weights: W_Q, W_K (d x d_k), W_V (d x d_v), W_O (d_v x d).

    Examples
    --------
    >>> h = Head.from_arrays([[1], [0]], [[1], [0]], [[1], [0]], [[0, 1]])
    >>> h.d_k, h.d_model
    (1, 2)
    """

    W_Q: ExactMatrix
    W_K: ExactMatrix
    W_V: ExactMatrix
    W_O: ExactMatrix

    @classmethod
    def from_arrays(cls, W_Q: Any, W_K: Any, W_V: Any, W_O: Any) -> Head:
        """Build a head from nested lists or arrays (floats taken exactly).

        Examples
        --------
        >>> Head.from_arrays([[0.5]], [[1]], [[1]], [[1]]).W_Q.row(0)
        (Fraction(1, 2),)
        """
        return cls(*(ExactMatrix(M) for M in (W_Q, W_K, W_V, W_O)))

    @property
    def d_k(self) -> int:
        """Query/key width.

        Examples
        --------
        >>> Head.from_arrays([[1, 2]], [[1, 2]], [[1]], [[1]]).d_k
        2
        """
        return self.W_Q.shape[1]

    @property
    def d_model(self) -> int:
        """Model width.

        Examples
        --------
        >>> Head.from_arrays([[1], [2]], [[1], [2]], [[1], [2]], [[1, 2]]).d_model
        2
        """
        return self.W_Q.shape[0]


def random_heads(d_model: int, H: int, d_k: int, rng: random.Random) -> list[Head]:
    """H heads with small random rational weights (entries in {-2..2}/2), a generic-looking point.

    Examples
    --------
    >>> len(random_heads(3, 2, 1, random.Random(0)))
    2
    """
    def m(a: int, b: int) -> list[list[Fraction]]:
        return [[Fraction(rng.randint(-2, 2), 2) for _ in range(b)] for _ in range(a)]

    return [Head.from_arrays(m(d_model, d_k), m(d_model, d_k), m(d_model, d_k), m(d_k, d_model))
            for _ in range(H)]


def witness_X(n: int, d: int, r: int) -> list[list[int]]:
    """The paper's witness X*_r = sum_{i<=r} e_i f_i^T (n x d), of rank r.

    Examples
    --------
    >>> witness_X(3, 2, 1)
    [[1, 0], [0, 0], [0, 0]]
    """
    return [[int(i == j and i < r) for j in range(d)] for i in range(n)]


def ball(x: Any) -> Any:
    """Rigorous arb ball enclosing a rational (exact, radius 0, when it is dyadic).

    Examples
    --------
    >>> ball(Fraction(1, 2)).rad() == 0, ball(Fraction(1, 3)).contains(ball(Fraction(1, 3)))
    (True, True)
    """
    from flint import arb, fmpq

    q = frac(x)
    return arb(fmpq(q.numerator, q.denominator))


def ball_det(M: list[list[Any]]) -> Any:
    """Enclose the determinant of a square matrix of balls (flint ``arb_mat.det``, at :data:`PRECISION` bits).

    Examples
    --------
    >>> from flint import arb
    >>> d = ball_det([[arb(2), arb(1)], [arb(1), arb(3)]])
    >>> 5 in d, 0 in d
    (True, False)
    """
    from flint import arb_mat, ctx

    old = ctx.prec
    ctx.prec = PRECISION
    try:
        return arb_mat([list(r) for r in M]).det()
    finally:
        ctx.prec = old


def residual_map_ball(X: Any, heads: list[Head], rows: list[int], cols: list[int]) -> list[list[Any]]:
    """Ball enclosure of F(X)[rows, cols], F(X) = X + sum_h softmax(X W_Q W_K^T X^T / sqrt(d_k)) X W_V W_O.

    The paper's bias-free form. Scores are exact rationals; sqrt, exp and the
    normalisation are arb ball operations at :data:`PRECISION` bits.

    Examples
    --------
    >>> h = Head.from_arrays([[0]], [[0]], [[1]], [[1]])  # uniform attention, W_V W_O = 1
    >>> float(residual_map_ball([[1], [3]], [h], [0], [0])[0][0].mid())  # 1 + mean(1, 3)
    3.0
    """
    from flint import ctx

    old = ctx.prec
    ctx.prec = PRECISION
    try:
        return _residual_map(X, heads, rows, cols)
    finally:
        ctx.prec = old


def _residual_map(X: Any, heads: list[Head], rows: list[int], cols: list[int]) -> list[list[Any]]:
    from flint import arb

    Xq = qmatrix(X)
    n = len(Xq)
    Xs = _sparse_rows(Xq)
    out = [[ball(Xq[i][j]) for j in cols] for i in rows]
    for h in heads:
        Qm = _sparse_matmul(Xs, h.W_Q)
        Km = _sparse_matmul(Xs, h.W_K)
        XV = _sparse_matmul(Xs, h.W_V)
        live = [k for k in range(n) if XV[k] is not None]  # rows of X W_V that are non-zero
        VO = {k: [ball(sum(a * h.W_O.entry(t, j) for t, a in enumerate(XV[k]))) for j in cols]
              for k in live}
        scale = arb(h.d_k).sqrt()
        for a, i in enumerate(rows):
            scores = [_dot(Qm[i], Km[j]) for j in range(n)]
            top = max(scores)  # shift by the exact max: exp arguments <= 0, no overflow
            cache: dict[Fraction, Any] = {}
            for sc in set(scores):
                cache[sc] = (ball(sc - top) / scale).exp()
            w = [cache[sc] for sc in scores]
            total = sum(w[1:], w[0])
            for b in range(len(cols)):
                out[a][b] = out[a][b] + sum((w[k] * VO[k][b] for k in live), arb(0)) / total
    return out


def _sparse_rows(X: list[list[Fraction]]) -> list[list[tuple[int, Fraction]]]:
    return [[(k, v) for k, v in enumerate(row) if v] for row in X]


def _sparse_matmul(X: list[list[tuple[int, Fraction]]], W: ExactMatrix) -> list[list[Fraction] | None]:
    """Rows of X W for X given by its sparse rows, with None for a zero row."""
    out: list[list[Fraction] | None] = []
    for nz in X:
        if not nz:
            out.append(None)
            continue
        k0, v0 = nz[0]
        acc = [v0 * x for x in W.row(k0)]
        for k, v in nz[1:]:
            acc = [a + v * x for a, x in zip(acc, W.row(k))]
        out.append(acc if any(acc) else None)
    return out


def _dot(a: list[Fraction] | None, b: list[Fraction] | None) -> Fraction:
    return Fraction(0) if a is None or b is None else sum((x * y for x, y in zip(a, b)), Fraction(0))


def _float_F(X: Any, heads: list[Head]) -> Any:
    """Float64 F(X), only to choose which minor to enclose (never to decide)."""
    import numpy as np

    Xf = np.array([[float(v) for v in r] for r in X])
    live = np.flatnonzero(np.any(Xf != 0, axis=1))  # zero rows of X contribute nothing to X W

    def xw(W: Any) -> Any:
        out = np.zeros((Xf.shape[0], W.shape[1]))
        out[live] = Xf[live] @ W
        return out

    F = Xf.copy()
    for h in heads:
        S = xw(h.W_Q.float) @ xw(h.W_K.float).T / np.sqrt(h.d_k)
        S = np.exp(S - S.max(axis=1, keepdims=True))
        F += (S / S.sum(axis=1, keepdims=True)) @ (xw(h.W_V.float) @ h.W_O.float)
    return F


def _choose_minor(F: Any, k: int, rows: list[int] | None) -> tuple[list[int], list[int]]:
    """Pick k rows and k columns of a float matrix with a well-conditioned minor (greedy pivoting)."""
    import numpy as np

    A = np.array(F, dtype=float)
    cand_rows = rows if rows is not None else list(range(A.shape[0]))
    chosen_r: list[int] = []
    chosen_c: list[int] = []
    R = A[cand_rows].copy()
    for _ in range(k):
        R_masked = np.abs(R)
        if chosen_c:
            R_masked[:, chosen_c] = -1
        for i, r in enumerate(cand_rows):
            if r in chosen_r:
                R_masked[i] = -1
        i, j = np.unravel_index(int(np.argmax(R_masked)), R_masked.shape)
        if R_masked[i, j] <= 0:
            break
        chosen_r.append(cand_rows[i])
        chosen_c.append(int(j))
        R = R - np.outer(R[:, j], R[i]) / R[i, j]
    return sorted(chosen_r), sorted(chosen_c)


@dataclass
class ResidualRankCertificate:
    """Outcome of :func:`certify_residual_rank`.

    Examples
    --------
    >>> ResidualRankCertificate(r=1, n=3, d=2, minor_size=2, certified=False).to_dict()["certified"]
    False
    """

    r: int
    n: int
    d: int
    minor_size: int
    certified: bool
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    det_interval: str = ""
    upper_bound_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> sorted(ResidualRankCertificate(1, 3, 2, 2, True).to_dict())[:3]
        ['certified', 'cols', 'd']
        """
        return {"r": self.r, "n": self.n, "d": self.d, "minor_size": self.minor_size,
                "certified": self.certified, "rows": self.rows, "cols": self.cols,
                "det_interval": self.det_interval, "upper_bound_note": self.upper_bound_note}


def certify_residual_rank(X: Any, heads: list[Head]) -> ResidualRankCertificate:
    """Certify rank F(X) > rank X by enclosing one (rank X + 1)-minor of F(X) away from zero.

    rank X is exact (rational X). Returns ``certified=False`` when no minor
    chosen could be separated from 0 (e.g. when MHA vanishes).

    Examples
    --------
    >>> zero = Head.from_arrays([[1], [0]], [[1], [0]], [[0], [0]], [[0, 0]])  # W_V = 0: F(X) = X
    >>> certify_residual_rank(witness_X(3, 2, 1), [zero]).certified
    False
    """
    Xq = qmatrix(X)
    n, d = len(Xq), len(Xq[0])
    r = rank_q(Xq)
    k = r + 1
    F = _float_F(Xq, heads)
    rows, cols = _choose_minor(F, k, None)
    note = ""
    zero_rows = [i for i in range(n) if all(v == 0 for v in Xq[i])]
    if len(zero_rows) > 1:
        note = (f"rows {zero_rows[0]}..{zero_rows[-1]} of X are zero: their scores vanish, their attention rows are "
                "uniform, so their outputs coincide and rank F(X) <= (n - #zero rows) + 1")
    if len(rows) < k:
        return ResidualRankCertificate(r, n, d, k, False, rows, cols, "float minor vanished", note)
    M = residual_map_ball(Xq, heads, rows, cols)
    det = ball_det(M)
    ok = 0 not in det
    return ResidualRankCertificate(r, n, d, k, ok, rows, cols, det.str(8), note)


def heads_from_model(weights: Any, layer: int) -> list[Head]:
    """The exact (float64 = stored float32 values) weight matrices of one layer's heads.

    Examples
    --------
    >>> callable(heads_from_model)
    True
    """
    L = weights.layer(layer)
    return [Head.from_arrays(L["W_Q"][h], L["W_K"][h], L["W_V"][h], L["W_O"][h])
            for h in range(L["W_Q"].shape[0])]


def certify_attention_invertible(X: Any, head: Head) -> tuple[bool, str]:
    """Certify det A^h(X) != 0 (A^h = softmax(X W_Q W_K^T X^T / sqrt d_k)) by arb ball arithmetic.

    Examples
    --------
    >>> h = Head.from_arrays([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]])
    >>> certify_attention_invertible([[2, 0], [0, 2]], h)[0]
    True
    """
    from flint import arb, ctx

    Xq = qmatrix(X)
    n = len(Xq)
    Xs = _sparse_rows(Xq)
    Qm = _sparse_matmul(Xs, head.W_Q)
    Km = _sparse_matmul(Xs, head.W_K)
    old = ctx.prec
    ctx.prec = PRECISION
    try:
        scale = arb(head.d_k).sqrt()
        A = []
        for i in range(n):
            s = [_dot(Qm[i], Km[j]) for j in range(n)]
            top = max(s)
            w = [(ball(v - top) / scale).exp() for v in s]
            total = sum(w[1:], w[0])
            A.append([x / total for x in w])
    finally:
        ctx.prec = old
    det = ball_det(A)
    return (0 not in det), det.str(8)


def sum_of_head_subspaces(X: Any, heads: list[Head]) -> int:
    """dim(R_1 + ... + R_H) with R_h = rowspace(A^h X W_V^h W_O^h), given every A^h invertible.

    When A^h is invertible, rowspace(A^h M) = rowspace(M), so the sum is the
    exact rank of the stacked rational matrices X W_V^h W_O^h.

    Examples
    --------
    >>> h = Head.from_arrays([[1], [0]], [[1], [0]], [[1], [0]], [[1, 0]])
    >>> sum_of_head_subspaces([[1, 0], [0, 1]], [h])
    1
    """
    Xq = qmatrix(X)
    stacked = []
    for h in heads:
        Wv = [list(h.W_V.row(k)) for k in range(h.W_V.shape[0])]
        Wo = [list(h.W_O.row(k)) for k in range(h.W_O.shape[0])]
        stacked += matmul(matmul(Xq, Wv), Wo)
    return rank_q(stacked)

