"""Certificates on a real checkpoint's weights, at real sizes, with python-flint.

Three computations, each for every layer (and head) of the model:

* :func:`stacked_wo_rank`: the exact rank over Q of a layer's stacked W_O
  (``fmpz_mat.rank`` on the weights scaled to integers by one power of two),
  with a prime p at which the rank is already full as the re-check witness;
* :func:`head_factor_minors`: rank(W_V^h W_O^h) = d_k exactly, by a non-zero
  d_k x d_k minor of each factor (Sylvester's inequality) and the upper bound
  d_k (the inner dimension); :func:`head_product_minor` does it with one minor
  of the product (slower: the product's entries are large integers);
* :func:`attention_det` and :func:`residual_minor`: ``arb`` ball enclosures of
  det exp(S^h / sqrt d_k) (A^h = row-normalised exp(S^h / sqrt d_k), so
  det A^h = det E^h / prod of positive row sums: A^h is invertible iff the
  enclosure of det E^h excludes 0), and of an (r+1)-minor of
  F(X*_r) = X*_r + sum_h A^h(X*_r) X*_r W_V^h W_O^h (theorem 5.3's map, the
  paper's bias-free form).

Floats are never rounded: every stored float is a dyadic rational, and arb
balls start exact (``arb(float)`` is exact); every later operation widens the
ball rigorously, so "0 outside the ball" is a proof.

Examples
--------
>>> import numpy as np
>>> stacked_wo_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))["rank"]
1
"""

from __future__ import annotations

import math
from typing import Any

from symtrans.certify.exact import dyadic_matrix

__all__ = ["MODULUS", "PRECISION", "ATTENTION_PRECISION", "LayerResidual", "stacked_wo_rank", "exact_rank",
           "EXACT_RANK_MAX_SIDE", "head_product_minor", "head_factor_minors", "verified_attention_sign", "verified_attention_signs", "verified_det_sign", "verified_full_rank", "verified_residual_sign", "float_input_box", "ball_box", "embedding_input", "attention_det",
           "residual_minor", "ball_margin", "layernorm_ball", "attention_det_ball"]

#: The prime of the mod-p witnesses: 2^61 - 1 (a Mersenne prime; flint's nmod_mat takes any word-size modulus).
MODULUS = 2**61 - 1
#: Working precision (bits) of the arb enclosures of theorem 5.3's minors.
PRECISION = 128
#: Working precision (bits) of the n x n attention determinants (margins of 6+ decades on the bundled model).
ATTENTION_PRECISION = 64


def _np(t: Any) -> Any:
    import numpy as np

    if hasattr(t, "detach"):
        t = t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


def stacked_wo_rank(W: Any, p: int = MODULUS, exact_limit: int = 160, verified: bool = True) -> dict[str, Any]:
    """Exact rank over Q of a float matrix, certified by its rank mod p where that suffices.

    With ``verified`` (default) a matrix without zero rows or columns is first
    tried by :func:`~symtrans.numeric.linalg.full_rank_certificate` (a
    shifted Cholesky of the Gram matrix with backward-error bounds), then by
    :func:`verified_full_rank` (float64 verification of a square
    minor; neither uses per-entry exact arithmetic); where one certifies, the rank is
    full and ``rank_mod_p`` is ``None`` (the checker's witness is still p).
    The rank mod p is a lower bound of the rank over Q (a minor non-zero mod p
    is non-zero over Z). Zero rows and columns are dropped first (exactly); when
    the rank mod p of what is left equals its smaller side, that is the exact
    rank and p is a cheap witness. Otherwise the exact rank comes from flint's
    ``fmpz_mat.rank``, but only for matrices up to ``exact_limit`` on a side
    (fraction-free elimination of a rank-deficient matrix with 2^30-scale
    entries takes minutes at 384 x 384); beyond that ``rank`` is ``None`` and
    ``rank_mod_p`` is the certified lower bound.

    Examples
    --------
    >>> import numpy as np
    >>> out = stacked_wo_rank(np.eye(3) * 0.1)
    >>> out["rank"], out["rank_mod_p"], out["shape"], out["method"].split(" (")[0]
    (3, None, [3, 3], 'float64-verified Gram Cholesky')
    >>> stacked_wo_rank(np.eye(3) * 0.1, verified=False)["rank_mod_p"]
    3
    >>> M = np.zeros((4, 3)); M[:2] = [[1.0, 2.0, 0.5], [0.25, 1.0, 3.0]]  # two zero rows
    >>> stacked_wo_rank(M)["rank"], stacked_wo_rank(np.ones((200, 200)), exact_limit=100)["rank"]
    (2, None)
    """
    from flint import fmpz_mat, nmod_mat

    A = _np(W)
    rows = [i for i in range(A.shape[0]) if A[i].any()]
    cols = [j for j in range(A.shape[1]) if A[:, j].any()]
    shape = [int(A.shape[0]), int(A.shape[1])]
    if not rows or not cols:
        return {"rank": 0, "rank_mod_p": 0, "modulus": p, "shape": shape, "scale_exponent": 0,
                "method": "zero matrix"}
    if verified and len(rows) == shape[0] and len(cols) == shape[1]:
        import torch

        from symtrans.numeric.linalg import full_rank_certificate

        # first a shifted Cholesky of the Gram matrix of the shorter side (about half the cost of the
        # verified inverse below); it declines where the squared problem is too ill-conditioned
        rec = full_rank_certificate(torch.from_numpy(A), margin=0.0)
        if rec is not None:
            return {"rank": min(shape), "rank_mod_p": None, "modulus": p, "shape": shape, "scale_exponent": None,
                    "method": f"float64-verified Gram Cholesky (sigma_min >= {rec.sigma_above:.2g} > 0)"}
        ok, beta, _, _ = verified_full_rank(A)
        if ok:
            return {"rank": min(shape), "rank_mod_p": None, "modulus": p, "shape": shape, "scale_exponent": None,
                    "method": f"float64-verified square minor (||I - R M||_inf <= {beta:.2g} < 1)"}
    Z, s = dyadic_matrix(A[rows][:, cols])
    rank_p = int(nmod_mat(Z, p).rank())
    if rank_p == min(len(rows), len(cols)):
        rank, method = rank_p, "rank mod p equals the smaller side of the non-zero part"
    elif max(len(rows), len(cols)) <= exact_limit:
        rank, method = int(fmpz_mat(Z).rank()), "fmpz_mat.rank (exact elimination)"
    else:
        rank, method = None, f"not computed: rank-deficient mod p and larger than {exact_limit} on a side"
    return {"rank": rank, "rank_mod_p": rank_p, "modulus": p, "shape": shape, "scale_exponent": s,
            "method": method}


def _pivots(M: Any, k: int) -> list[int]:
    """Indices of k columns of a float matrix chosen by QR with column pivoting (a well-conditioned choice)."""
    import numpy as np

    # greedy column pivoting (Businger-Golub): the residual column norms are downdated by one pass over M per
    # step instead of updating M itself; the chosen column's residual is recomputed against the basis so far
    # (no cancellation in the direction that is kept)
    A = np.array(M, dtype=np.float64)
    m, n = A.shape
    steps = min(k, n)
    Q = np.zeros((m, steps))
    norms = np.einsum("ij,ij->j", A, A)
    chosen: list[int] = []
    for t in range(steps):
        norms[chosen] = -1.0
        j = int(np.argmax(norms))
        if norms[j] <= 0:
            break
        v = A[:, j] - Q[:, :t] @ (Q[:, :t].T @ A[:, j])
        nv = float(v @ v)
        if not nv > 0:
            break
        Q[:, t] = v / math.sqrt(nv)
        chosen.append(j)
        norms = norms - (Q[:, t] @ A) ** 2
    return sorted(chosen)


def head_product_minor(W_V: Any, W_O: Any) -> dict[str, Any]:
    """A non-zero d_k x d_k minor of W_V W_O (d x d_k times d_k x d): rank(W_V W_O) = d_k exactly.

    Rows and columns are chosen in floating point (QR with pivoting), then the
    minor W_V[rows] W_O[:, cols] is formed and its determinant computed exactly
    over Z; non-zero gives rank >= d_k, and rank <= d_k (inner dimension).

    Examples
    --------
    >>> import numpy as np
    >>> out = head_product_minor(np.array([[1.0], [2.0]]), np.array([[0.0, 0.5]]))
    >>> out["rank"], out["rows"], out["cols"], out["det_nonzero"]
    (1, [1], [1], True)
    >>> head_product_minor(np.array([[1.0], [2.0]]), np.zeros((1, 2)))["det_nonzero"]  # a silenced head
    False
    """
    V, O = _np(W_V), _np(W_O)
    k = V.shape[1]
    rows, cols = _pivots(V.T, k), _pivots(O, k)
    if len(rows) < k or len(cols) < k:  # a factor of rank < k (e.g. a silenced head): no k x k minor to certify
        return {"rank": None, "rows": rows, "cols": cols, "det_nonzero": False, "det_bits": 0, "upper_bound": k}
    Zv, _ = dyadic_matrix(V[rows])
    Zo, _ = dyadic_matrix(O[:, cols])
    det = (Zv * Zo).det() if k else 1
    ok = det != 0
    return {"rank": k if ok else None, "rows": rows, "cols": cols, "det_nonzero": bool(ok),
            "det_bits": int(abs(int(det))).bit_length() if ok else 0, "upper_bound": k}


def _lu_rows(M: Any) -> Any:
    """For a batch ``[..., m, k]`` (m >= k): the k rows LU with partial pivoting chooses, per matrix, sorted."""
    import numpy as np
    import torch

    T = torch.as_tensor(np.asarray(M, dtype=np.float64))
    _, piv, _ = torch.linalg.lu_factor_ex(T)  # LAPACK getrf (no error on a singular matrix): row i swapped with row piv[i] - 1, in order
    m, k = T.shape[-2], T.shape[-1]
    piv = piv.reshape(-1, piv.shape[-1]).tolist()
    out = []
    for swaps in piv:
        perm = list(range(m))
        for i, j in enumerate(swaps[:k]):
            perm[i], perm[j - 1] = perm[j - 1], perm[i]
        out.append(sorted(perm[:k]))
    return np.array(out, dtype=np.int64).reshape(*T.shape[:-2], k)


def _minor_nonzero(A: Any, p: int = MODULUS, verified: bool = True) -> tuple[bool, str]:
    """Whether the square float matrix A has det != 0, exactly: float64-verified, mod primes, then exact over Z.

    With ``verified`` a float64-verified inverse first (:func:`verified_det_sign`
    with no radius: the floats are the matrix, and ``||I - R A||_inf < 1``
    proves it non-singular; about 4x cheaper than building the exact matrix
    at k = 64). Where that declines (ill-conditioned): A's floats are exact
    dyadic rationals, and a non-zero determinant of their reduction mod an odd
    prime proves det A != 0. The 31-bit Mersenne prime's residues are formed
    in numpy int64 arithmetic (:func:`to_mod_p`); then ``p`` on the integer
    matrix ``Z = A 2^-s``; then the exact determinant.
    """
    import numpy as np
    from flint import fmpz_mat, nmod_mat

    from symtrans.certify.exact import P, to_mod_p

    if verified and A.size:
        ok, beta = verified_det_sign(A, np.zeros_like(A), need_sign=False)
        if ok:
            return True, f"float64-verified inverse (||I - R A||_inf <= {beta:.2g} < 1)"
    k = A.shape[0]  # (flint builds an fmpz_mat from a flat list faster than an nmod_mat)
    if k and int(nmod_mat(fmpz_mat(k, k, to_mod_p(A, P).ravel().tolist()), P).det()) != 0:
        return True, f"det mod {P}"
    Z, _ = dyadic_matrix(A)
    if int(nmod_mat(Z, p).det()) != 0:
        return True, "det mod p"
    return Z.det() != 0, "exact det"


def head_factor_minors(W_V: Any, W_O: Any, p: int = MODULUS) -> list[dict[str, Any]]:
    """rank(W_V^h W_O^h) = d_k exactly for a stack of heads, from a non-zero k x k minor of each factor.

    ``W_V`` is ``[H, d, k]`` and ``W_O`` is ``[H, k, d]`` (floats, taken exactly).
    For each head, k rows of W_V^h and k columns of W_O^h are chosen by LU with
    partial pivoting in float64; the two k x k minors are exact integer matrices
    (the floats times a power of two), and a determinant non-zero mod the prime
    p (else exactly over Z) proves rank W_V^h = rank W_O^h = k, so
    k >= rank(W_V^h W_O^h) >= rank W_V^h + rank W_O^h - k = k (Sylvester).
    Only 2 k^2 entries per head enter exact arithmetic.

    Examples
    --------
    >>> import numpy as np
    >>> V = np.array([[[1.0], [2.0]]]); O = np.array([[[0.0, 0.5]]])
    >>> out = head_factor_minors(V, O)[0]
    >>> out["rank"], out["rows"], out["cols"]
    (1, [1], [1])
    >>> head_factor_minors(V, 0 * O)[0]["rank"] is None  # a silenced head: no certificate
    True
    """
    import numpy as np

    V, O = _np(W_V), _np(W_O)
    H, _, k = V.shape
    rows = _lu_rows(V)
    cols = _lu_rows(np.swapaxes(O, -1, -2))
    out = []
    for h in range(H):
        r, c = [int(i) for i in rows[h]], [int(j) for j in cols[h]]
        ok_v, how_v = _minor_nonzero(V[h][r])
        ok_o, how_o = (_minor_nonzero(O[h][:, c]) if ok_v else (False, "not tried"))
        out.append({"rank": k if ok_v and ok_o else None, "rows": r, "cols": c, "upper_bound": k,
                    "V_minor_nonzero": ok_v, "O_minor_nonzero": ok_o, "method": f"V: {how_v}, O: {how_o}"})
    return out


def _embedding_parts(weights: Any, ids: list[int]) -> list[Any]:
    """The float64 arrays whose sum is X = word[ids] + pos[:n] + type[0] (those the model has)."""
    import numpy as np

    from symtrans.numeric.weights import table_rows

    n = len(ids)
    parts = [_np(table_rows(weights, "word", list(ids)))]
    if getattr(weights, "pos", None) is not None:
        parts.append(_np(weights.pos[:n]))
    if getattr(weights, "type", None) is not None:
        parts.append(np.tile(_np(weights.type[0]), (n, 1)))
    return parts


def embedding_input(weights: Any, ids: list[int]) -> tuple[Any, int]:
    """The exact input X = word[ids] + pos[:n] + type[0] as ``(Z, s)`` with X = Z 2^s (no rounding).

    The three float32 tables are summed exactly over Z (a float64 sum could round).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> Z, s = embedding_input(load_model("default"), [101, 102])
    >>> Z.nrows(), Z.ncols()
    (2, 384)
    """
    parts = _embedding_parts(weights, ids)
    mats = [dyadic_matrix(P) for P in parts]
    s = min(e for _, e in mats)
    Z = mats[0][0] * (2 ** (mats[0][1] - s))
    for M, e in mats[1:]:
        Z = Z + M * (2 ** (e - s))
    return Z, s


def layernorm_ball(X: tuple[Any, int], gamma: Any, beta: Any, eps: float, prec: int = ATTENTION_PRECISION) -> Any:
    """Ball enclosure (``arb_mat``) of LayerNorm(X) = (x - mean) / sqrt(var + eps) * gamma + beta, row by row.

    X = Z 2^s is exact; each row's mean and (biased) variance are exact rationals,
    eps is the stored float's exact value, and only the square root and the
    division make balls.

    Examples
    --------
    >>> from flint import fmpz_mat
    >>> L = layernorm_ball((fmpz_mat([[1, 3]]), 0), [1.0, 1.0], [0.0, 0.5], 0.0)
    >>> [float(L[0, j].mid()) for j in range(2)]  # (x - 2) / 1, plus beta
    [-1.0, 1.5]
    """
    from flint import arb, arb_mat, ctx, fmpq

    Z, s = X
    d = Z.ncols()
    g = [fmpq(*float(v).as_integer_ratio()) for v in _np(gamma).ravel()]
    b = [fmpq(*float(v).as_integer_ratio()) for v in _np(beta).ravel()]
    unit = fmpq(2) ** s if s >= 0 else fmpq(1, 2 ** (-s))
    e = fmpq(*float(eps).as_integer_ratio())
    old = ctx.prec
    ctx.prec = prec
    try:
        G, Bv = [arb(v) for v in g], [arb(v) for v in b]
        rows = []
        for z in Z.tolist():
            # x_j - mean = c_j 2^s / d with the integers c_j = d z_j - sum(z): exact, one ball per entry
            tot = sum(int(v) for v in z)
            c = [d * int(v) - tot for v in z]
            var = fmpq(sum(v * v for v in c)) * unit * unit / d ** 3
            scale = arb(unit / d) / arb(var + e).sqrt()
            rows.append([arb(c[j]) * scale * G[j] + Bv[j] for j in range(d)])
        return arb_mat(rows)
    finally:
        ctx.prec = old


def attention_det_ball(X: Any, W_Q: Any, W_K: Any, prec: int = ATTENTION_PRECISION) -> Any:
    """Ball enclosure of det exp(X W_Q W_K^T X^T / sqrt d_k) for an ``arb_mat`` input X (e.g. a LayerNorm output).

    Examples
    --------
    >>> import numpy as np
    >>> from flint import arb_mat
    >>> d = attention_det_ball(arb_mat([[1, 0], [0, 1]]), np.eye(2), np.eye(2))
    >>> bool(d > 0)
    True
    """
    from flint import arb, arb_mat, ctx

    old = ctx.prec
    ctx.prec = prec
    try:
        Wq, Wk = _np(W_Q), _np(W_K)
        Q = X * arb_mat(Wq.tolist())
        K = X * arb_mat(Wk.tolist())
        S = Q * K.transpose()
        root = arb(Wq.shape[1]).sqrt()
        n = S.nrows()
        return arb_mat(n, n, [(S[i, j] / root).exp() for i in range(n) for j in range(n)]).det()
    finally:
        ctx.prec = old


def ball_margin(x: Any) -> float:
    """Decades by which the ball x excludes 0: log10(|mid| / rad) (inf for an exact non-zero ball).

    Examples
    --------
    >>> from flint import arb
    >>> round(ball_margin(arb("2 +/- 0.02")), 3)
    2.0
    """
    from flint import arb

    mid, rad = abs(x.mid()), x.rad()
    if rad == 0:
        return math.inf if mid != 0 else -math.inf
    if mid == 0:
        return -math.inf
    return float(((mid / rad).log() / arb(10).log()).mid())  # in arb: determinants leave double range


def attention_det(X: tuple[Any, int], W_Q: Any, W_K: Any, prec: int = PRECISION) -> Any:
    """Ball enclosure of det E, E = exp(X W_Q W_K^T X^T / sqrt d_k) entrywise (the bias-free scores).

    A = diag(1 / row sums) E with positive row sums, so A is invertible iff det E != 0,
    and sign det A = sign det E. Scores are exact integers times a power of two.

    Examples
    --------
    >>> import numpy as np
    >>> from flint import fmpz_mat
    >>> d = attention_det((fmpz_mat([[1, 0], [0, 1]]), 0), np.eye(2), np.eye(2))
    >>> bool(d > 0)  # e^(2/sqrt 2) - 1 > 0
    True
    """
    from flint import arb, arb_mat, ctx

    Zx, sx = X
    Zq, sq = dyadic_matrix(_np(W_Q))
    Zk, sk = dyadic_matrix(_np(W_K))
    d_k = _np(W_Q).shape[1]
    S = (Zx * Zq) * (Zx * Zk).transpose()  # exact integer scores, times 2^(2 sx + sq + sk)
    old = ctx.prec
    ctx.prec = prec
    try:
        scale = arb(2) ** (2 * sx + sq + sk) / arb(d_k).sqrt()
        n = S.nrows()
        ent = S.entries()
        E = arb_mat(n, n, [(arb(v) * scale).exp() for v in ent])
        return E.det()
    finally:
        ctx.prec = old


def _greedy_cols(F: Any, k: int) -> list[int]:
    """k columns of a float (k x d) matrix with a well-conditioned k x k minor (QR with pivoting)."""
    return _pivots(F, k)


class LayerResidual:
    """theorem 5.3's map F at the witnesses X*_r for one layer: shared enclosures for r = 1..R.

    At X*_r = sum_{i<r} e_i f_i^T the rows r..n-1 of X are zero: their scores
    vanish, their attention rows are uniform (1/n), so rows r..n-1 of F coincide
    and equal (1/n) sum_h sum_{j<r} (W_V^h W_O^h)[j]; rows i < r are
    e_i + sum_h sum_{j<r} A^h_ij (W_V^h W_O^h)[j], with
    A^h_ij = exp(s_ij / sqrt d_k) / (sum_{j'<r} exp(s_ij' / sqrt d_k) + n - r),
    s = W_Q^h[:r] W_K^h[:r]^T. The candidate minor is rows 0..r.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> L = {k: rng.standard_normal((2, 4, 2)) for k in ("W_Q", "W_K", "W_V")}
    >>> L["W_O"] = rng.standard_normal((2, 2, 4))
    >>> res = LayerResidual(L, n=6, R=3)
    >>> all(0 not in res.minor(r)[1] for r in (1, 2, 3))
    True
    """

    def __init__(self, layer: dict[str, Any], n: int, R: int, prec: int = PRECISION):
        # python-flint is imported by _enclose, on first use
        import numpy as np

        self.n, self.R, self.prec = n, R, prec
        WQ, WK, WV, WO = (_np(layer[k]) for k in ("W_Q", "W_K", "W_V", "W_O"))
        self.H, self.d, self.d_k = WQ.shape[0], WQ.shape[1], WQ.shape[2]
        self.float_VO = WV[:, :R] @ WO  # [H, R, d]: every head at once
        self.float_S = WQ[:, :R] @ np.swapaxes(WK[:, :R], -1, -2)  # [H, R, R]
        self._W = (WQ, WK, WV, WO)
        self._ready = False  # the ball enclosures are made on first use (float64 verification may not need them)
        # columns of W_V^h[:R] W_O^h, enclosed on demand: the minors use a few dozen of the d columns
        self._WO = WO
        self._VO_cols: list[dict[int, list[Any]]] = [{} for _ in range(self.H)]

    def _enclose(self) -> None:
        """The arb enclosures of exp(S^h / sqrt d_k) and of W_V^h[:R], once."""
        from flint import arb, arb_mat, ctx

        if self._ready:
            return
        WQ, WK, WV, _ = self._W
        R, prec = self.R, self.prec
        old = ctx.prec
        ctx.prec = prec
        try:
            inv_sqrt = 1 / arb(self.d_k).sqrt()
            self.E, self._V = [], []
            for h in range(self.H):
                S = arb_mat(WQ[h, :R].tolist()) * arb_mat(WK[h, :R].tolist()).transpose()
                self.E.append([[(S[i, j] * inv_sqrt).exp() for j in range(R)] for i in range(R)])
                self._V.append(arb_mat(WV[h, :R].tolist()))
        finally:
            ctx.prec = old
        self._ready = True

    def _vo(self, h: int, cols: list[int]) -> list[list[Any]]:
        """Enclosures of (W_V^h[:R] W_O^h)[:, c] for c in ``cols`` (computed once per column, at the layer's precision)."""
        from flint import arb_mat, ctx

        self._enclose()
        cache = self._VO_cols[h]
        missing = [c for c in dict.fromkeys(cols) if c not in cache]
        if missing:
            old = ctx.prec
            ctx.prec = self.prec
            try:
                M = self._V[h] * arb_mat(self._WO[h][:, missing].tolist())
            finally:
                ctx.prec = old
            for t, c in enumerate(missing):
                cache[c] = [M[j, t] for j in range(self.R)]
        return [cache[c] for c in cols]

    def float_rows(self, r: int) -> Any:
        """Float64 rows 0..r of F(X*_r), only to choose the minor's columns (never to decide)."""
        import numpy as np

        n, H = self.n, self.H
        F = np.zeros((r + 1, self.d))
        F[np.arange(r), np.arange(r)] = 1.0
        E = np.exp(self.float_S[:, :r, :r] / math.sqrt(self.d_k))  # [H, r, r]
        P = E / (E.sum(axis=-1, keepdims=True) + (n - r))
        VO = self.float_VO[:, :r]  # [H, r, d]
        F[:r] += np.swapaxes(P, 0, 1).reshape(r, H * r) @ VO.reshape(H * r, self.d)  # sum_h P^h VO^h: one GEMM
        F[r] += VO.sum(axis=(0, 1)) / n
        return F

    def columns(self, r: int) -> list[int]:
        """The r + 1 columns of the candidate minor, chosen on float64 rows (QR with pivoting).

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> L = {k: rng.standard_normal((1, 3, 2)) for k in ("W_Q", "W_K", "W_V")}
        >>> L["W_O"] = rng.standard_normal((1, 2, 3))
        >>> len(LayerResidual(L, n=5, R=2).columns(2))
        3
        """
        return _greedy_cols(self.float_rows(r), r + 1)

    def minor(self, r: int, cols: list[int] | None = None) -> tuple[list[int], Any]:
        """(columns, ball enclosure of det F(X*_r)[0..r, cols]) for 1 <= r <= R.

        Examples
        --------
        >>> import numpy as np
        >>> L = {k: np.zeros((1, 2, 1)) for k in ("W_Q", "W_K", "W_V")}
        >>> L["W_O"] = np.zeros((1, 1, 2))
        >>> cols, det = LayerResidual(L, n=3, R=1).minor(1)  # MHA = 0: F = X*_1 has rank 1
        >>> 0 in det  # nothing certified
        True
        """
        from flint import arb, arb_mat, ctx

        if cols is None:
            cols = self.columns(r)
        if len(cols) < r + 1:  # the float rows are already rank-deficient: no candidate minor
            return list(cols), arb("0 +/- inf")
        self._enclose()
        old = ctx.prec
        ctx.prec = self.prec
        try:
            k = r + 1
            top = arb_mat(r, k, [int(i == c) for i in range(r) for c in cols])
            last = [arb(0)] * k
            extra = arb(self.n - r)
            inv_n = 1 / arb(self.n)
            for h in range(self.H):
                E = self.E[h]
                w = []
                for i in range(r):
                    tot = extra
                    for j in range(r):
                        tot = tot + E[i][j]
                    w.extend(E[i][j] / tot for j in range(r))
                colv = self._vo(h, list(cols))
                VO = arb_mat(r, k, [colv[t][j] for j in range(r) for t in range(k)])
                top = top + arb_mat(r, r, w) * VO
                for c in range(k):
                    acc = arb(0)
                    for j in range(r):
                        acc = acc + VO[j, c]
                    last[c] = last[c] + acc * inv_n
            M = arb_mat(k, k, [top[i, c] for i in range(r) for c in range(k)] + last)
            return list(cols), M.det()
        finally:
            ctx.prec = old


def verified_residual_sign(layer: dict[str, Any], n: int, r: int, cols: list[int]) -> tuple[int, float]:
    """Sign of det F(X*_r)[0..r, cols] (see :class:`LayerResidual`) by float64 verification; 0 when undecided.

    Every entry of the (r+1)-minor is computed in float64 with an a priori
    bound on its distance from the exact value (weights taken exactly;
    products bounded by gamma_k |A| |B|, exp to 8 units of roundoff, the
    softmax quotient through the bounds of numerator and denominator), then
    :func:`verified_det_sign` decides. Returns ``(sign, beta)``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> L = {k: rng.standard_normal((2, 4, 2)) for k in ("W_Q", "W_K", "W_V")}
    >>> L["W_O"] = rng.standard_normal((2, 2, 4))
    >>> cols, det = LayerResidual(L, n=6, R=2).minor(2)
    >>> verified_residual_sign(L, 6, 2, cols)[0] == (1 if det > 0 else -1)
    True
    """
    import numpy as np

    WQ, WK, WV, WO = (_np(layer[k]) for k in ("W_Q", "W_K", "W_V", "W_O"))
    H, _, dk = WQ.shape
    k = len(cols)
    N = max(r, dk, H, k) + 8
    up = 1 + 8 * N * _U
    tiny = N * 2.0 ** -1000
    eye = (np.arange(r)[:, None] == np.array(cols)[None, :]).astype(np.float64)  # X*_r[0..r-1, cols]: exact 0/1
    Q, K, V = WQ[:, :r], WK[:, :r], WV[:, :r]  # [H, r, d_k]: every head at once
    O = WO[:, :, cols]  # [H, d_k, k]
    T = lambda A: np.swapaxes(A, -1, -2)  # noqa: E731
    Sf = Q @ T(K)
    dS = _gamma(dk) * (np.abs(Q) @ T(np.abs(K))) * up + tiny
    scaled = _exp_scores(Sf, dS, dk, up, tiny)
    if scaled is None:
        return 0, math.inf
    Ef, dE = scaled
    Tf = Ef.sum(axis=-1) + (n - r)  # [H, r]
    dT = (dE.sum(axis=-1) + _gamma(r + 1) * (Ef.sum(axis=-1) + (n - r))) * up + tiny
    if not (Tf > dT).all():
        return 0, math.inf
    Pf = Ef / Tf[..., None]
    low = (Tf - dT)[..., None]
    dP = (dE / low + Ef * dT[..., None] / (Tf[..., None] * low) + 2 * _U * Pf) * up + tiny
    VOf = V @ O  # [H, r, k]
    dVO = _gamma(dk) * (np.abs(V) @ np.abs(O)) * up + tiny
    PV = Pf @ VOf
    aP, aVO = np.abs(Pf), np.abs(VOf)
    dPV = (dP @ aVO + aP @ dVO + dP @ dVO + _gamma(r) * (aP @ aVO)) * up + tiny
    cs = VOf.sum(axis=-2) / n  # [H, k]
    dcs = (dVO.sum(axis=-2) + _gamma(r) * aVO.sum(axis=-2)) * up / n + tiny
    # summing H + 1 terms per entry (and one more rounding for each cs / n)
    top = eye + PV.sum(axis=0)
    dtop = dPV.sum(axis=0) + _gamma(H + 1) * (eye + np.abs(PV).sum(axis=0)) * up + tiny
    last = cs.sum(axis=0)
    dlast = dcs.sum(axis=0) + (_gamma(H + 1) + 2 * _U) * np.abs(cs).sum(axis=0) * up + tiny
    Mf = np.vstack([top, last[None, :]])
    dM = np.vstack([dtop, dlast[None, :]])
    return verified_det_sign(Mf, dM)


def residual_minor(layer: dict[str, Any], n: int, r: int, prec: int = PRECISION) -> tuple[list[int], Any]:
    """(columns, ball of det F(X*_r)[0..r, cols]) for one layer's heads at sequence length n.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> L = {k: rng.standard_normal((2, 3, 2)) for k in ("W_Q", "W_K", "W_V")}
    >>> L["W_O"] = rng.standard_normal((2, 2, 3))
    >>> cols, det = residual_minor(L, 5, 2)
    >>> len(cols), 0 in det
    (3, False)
    """
    return LayerResidual(layer, n, r, prec).minor(r)


# the float64 rounding model (unit roundoff u, Higham's gamma_m = m u / (1 - m u)): one home, numeric.linalg
from symtrans.numeric.linalg import _U, _gamma  # noqa: E402


def verified_attention_sign(Xm: Any, Xr: Any, W_Q: Any, W_K: Any) -> tuple[int, float]:
    """Sign of det exp(X W_Q (X W_K)^T / sqrt d_k) for every X in the box [Xm - Xr, Xm + Xr], by float64 verification.

    Returns ``(sign, beta)``: ``sign`` is +1 or -1 when every matrix within the
    rounding and input bounds of the float64 E is certified non-singular, else 0
    (undecided: the caller falls back to ball arithmetic); ``beta`` < 1 is the
    certified bound on ||I - R E||_inf for the float64 approximate inverse R
    (by the Neumann series, beta < 1 proves E and R non-singular).

    The bounds are a priori floating-point error bounds (Higham, *Accuracy and
    Stability*, 2nd ed.: |fl(A B) - A B| <= gamma_k |A| |B| for any summation
    order, eq. 3.13; LU with partial pivoting: P L U = E + dE with
    |dE| <= gamma_n P |L| |U|, thm 9.3), each inflated for the rounding of
    its own evaluation; ``exp`` is taken to 8 units of roundoff. Assumed:
    IEEE-754 float64 round-to-nearest and a BLAS that forms each entry as a
    sum of products (no Strassen-type algorithm). Non-finite values, exponents
    above 700 or entries below 2^-900 give 0. The sign: every matrix in the
    box E + [-D, D] with D = (bound on |E_exact - E_float|) + gamma_n P |L| |U|
    satisfies ||I - R M|| < 1, so det is non-zero on the box (convex), and
    sign det E_exact = sign det (P L U) = sign det P * prod sign U_ii.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(3); W = np.eye(3)
    >>> sign, beta = verified_attention_sign(X, 0 * X, W, W)
    >>> sign, beta < 1e-12
    (1, True)
    >>> verified_attention_sign(np.ones((2, 3)), np.zeros((2, 3)), W, W)[0]  # two equal rows: singular
    0
    """
    return verified_attention_signs(Xm, Xr, _np(W_Q)[None], _np(W_K)[None])[0]


def verified_attention_signs(Xm: Any, Xr: Any, W_Q: Any, W_K: Any) -> list[tuple[int, float]]:
    """:func:`verified_attention_sign` for a stack of heads ``W_Q``, ``W_K`` (``[H, d, d_k]``) at one input box.

    The projections of all heads are one GEMM each (``X [W_Q^1 ... W_Q^H]``)
    and the scores one batched product; the bounds are the same as head by
    head (Higham's bounds hold for any summation order), and each head's
    determinant is verified on its own.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(3); W = np.stack([np.eye(3), np.ones((3, 3))])
    >>> [sign for sign, _ in verified_attention_signs(X, 0 * X, W, W)]  # the second head's E is all equal rows
    [1, 0]
    """
    import numpy as np

    Xm, Xr = np.asarray(Xm, dtype=np.float64), np.asarray(Xr, dtype=np.float64)
    Wq, Wk = _np(W_Q), _np(W_K)
    H, _, k = Wq.shape
    n, d = Xm.shape
    N = max(n, d, k) + 8
    up = 1 + 8 * N * _U  # inflation of each computed bound for the rounding of its own evaluation
    tiny = N * 2.0 ** -1000  # absolute slack: an underflow in a bound's evaluation loses less than this
    if not (np.isfinite(Xm).all() and np.isfinite(Xr).all()) or (Xr < 0).any() or _has_tiny(Xm, Xr):
        return [(0, math.inf)] * H
    T = lambda A: np.swapaxes(A, -1, -2)  # noqa: E731
    cat = lambda W: np.swapaxes(W, 0, 1).reshape(d, H * k)  # [d, H k]: head h in columns h k .. (h + 1) k  # noqa: E731
    heads = lambda M: np.swapaxes(M.reshape(n, H, k), 0, 1)  # [n, H k] -> [H, n, k]  # noqa: E731
    # every bound is a product of non-negative factors, so each is formed with one GEMM per factor pair:
    # gamma_d |X| |W| + Xr |W| = (gamma_d |X| + Xr) |W|, and the score radius
    # gamma_k |Q||K|^T + dQ |K|^T + |Q| dK^T + dQ dK^T = (gamma_k |Q| + dQ) |K|^T + (|Q| + dQ) dK^T;
    # a sum of non-negative products rounds to within gamma_{m+1} of its value, which ``up`` covers
    aX = np.abs(Xm)
    Q, K, aQ, aK = cat(Wq), cat(Wk), cat(np.abs(Wq)), cat(np.abs(Wk))
    Qf, Kf = heads(Xm @ Q), heads(Xm @ K)
    spread = _gamma(d) * aX + Xr
    dQ = heads((spread @ aQ) * up + tiny)
    dK = heads((spread @ aK) * up + tiny)
    aQf, aKf = np.abs(Qf), np.abs(Kf)
    Sf = Qf @ T(Kf)
    dS = ((_gamma(k) * aQf + dQ) @ T(aKf) + (aQf + dQ) @ T(dK)) * up * up + tiny
    out = []
    for h in range(H):
        if not (np.isfinite(Wq[h]).all() and np.isfinite(Wk[h]).all()) or _has_tiny(Wq[h], Wk[h]):
            out.append((0, math.inf))
            continue
        scaled = _exp_scores(Sf[h], dS[h], k, up, tiny)
        out.append(verified_det_sign(*scaled) if scaled is not None else (0, math.inf))
    return out


def _has_tiny(*arrays: Any) -> bool:
    """Whether some non-zero entry is below 2^-900 in magnitude (the bounds' absolute slack assumes none)."""
    import numpy as np

    small = [np.abs(a[a != 0]).min() for a in arrays if (a != 0).any()]
    return bool(small) and min(small) < 2.0 ** -900


def _exp_scores(Sf: Any, dS: Any, d_k: int, up: float, tiny: float) -> tuple[Any, Any] | None:
    """(Ef, dE): float64 exp(S / sqrt d_k) and a bound on its error, given S within dS of Sf; None on overflow.

    |c - cf| <= 2u c for cf = 1 / sqrt(d_k) (two correctly rounded operations), the product cf Sf
    rounds once more, and exp is taken to 8 units of roundoff; each bound is inflated by ``up``.
    """
    import numpy as np

    cf = 1.0 / math.sqrt(d_k)
    Zf = cf * Sf
    dZ = (cf * (1 + 3 * _U) * dS + 5 * _U * np.abs(Zf)) * up + tiny
    if not (np.isfinite(Zf).all() and np.isfinite(dZ).all() and (Zf + dZ).max(initial=-np.inf) < 700):
        return None
    Ef = np.exp(Zf)
    return Ef, Ef * (np.expm1(dZ) + 8 * _U) * (1 + 16 * _U) * up + tiny


def verified_det_sign(Mf: Any, dM: Any, need_sign: bool = True) -> tuple[int, float]:
    """Sign of det M for every M with |M - Mf| <= dM entrywise, by float64 verification; 0 when undecided.

    With ``need_sign=False`` only non-singularity is certified (no LU) and the
    returned sign is 1 whenever it is.

    Returns ``(sign, beta)`` with beta the certified bound on ||I - R M||_inf
    (R a float64 inverse of Mf); beta < 1 proves every such M non-singular,
    and the sign is that of det (P L U), the float LU of Mf, whose backward
    error gamma_n P |L| |U| is added to dM (Higham, thm 9.3; matrix products
    bounded by eq. 3.13; each bound inflated for its own rounding). Assumes
    IEEE-754 float64 round-to-nearest and a BLAS that sums products (no
    Strassen); non-finite input, or entries below 2^-900, give 0.

    Examples
    --------
    >>> import numpy as np
    >>> verified_det_sign(np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros((2, 2)))[0]  # a swap: det -1
    -1
    >>> verified_det_sign(np.array([[1.0, 1.0], [1.0, 1.0]]), np.zeros((2, 2)))[0]  # singular: undecided
    0
    >>> verified_det_sign(np.eye(2), np.full((2, 2), 0.6))[0]  # the box holds singular matrices
    0
    """
    import numpy as np
    import torch

    Mf, dM = np.asarray(Mf, dtype=np.float64), np.asarray(dM, dtype=np.float64)
    n = Mf.shape[0]
    if Mf.shape != (n, n) or dM.shape != (n, n):
        raise ValueError(f"a square matrix and a radius of its shape are needed, got {Mf.shape} and {dM.shape}")
    if not (np.isfinite(Mf).all() and np.isfinite(dM).all()) or (dM < 0).any():
        return 0, math.inf
    if _has_tiny(Mf):
        return 0, math.inf
    N = n + 8
    up = 1 + 8 * N * _U
    tiny = N * 2.0 ** -1000
    extra = _gamma(n) * np.abs(Mf) + dM  # |R| (gamma_n |M| + dM): the product's rounding and the radius, one GEMM
    if need_sign:
        LU, piv, info = torch.linalg.lu_factor_ex(torch.from_numpy(Mf.copy()))
        if int(info) != 0:
            return 0, math.inf
        LUn, pv = LU.numpy(), piv.numpy()
        T = _gamma(n) * (np.abs(np.tril(LUn, -1) + np.eye(n)) @ np.abs(np.triu(LUn)))
        perm = np.arange(n)
        for i, j in enumerate(pv):  # LAPACK swaps row i with row piv[i] - 1, in order: P^T M = M[perm]
            perm[i], perm[j - 1] = perm[j - 1], perm[i]
        dLU = np.empty_like(T)
        dLU[perm] = T  # P (gamma_n |L| |U|) without a dense permutation product
        extra = extra + dLU * up + tiny
    try:
        R = np.linalg.inv(Mf)
    except np.linalg.LinAlgError:
        return 0, math.inf
    if not np.isfinite(R).all():
        return 0, math.inf
    C = R @ Mf
    G = (np.abs(np.eye(n) - C) * (1 + 2 * _U) + np.abs(R) @ extra) * up
    beta = float(G.sum(axis=1).max() * up)
    if not beta < 1:
        return 0, beta
    if not need_sign:
        return 1, beta
    swaps = int((pv != np.arange(1, n + 1)).sum())
    return int((-1) ** swaps * (-1) ** int((np.diag(LUn) < 0).sum())), beta


def verified_full_rank(A: Any) -> tuple[bool, float, list[int], list[int]]:
    """Whether the float matrix A (taken exactly) has full rank min(m, n), by a float64-verified square minor.

    Rows (or columns) of the minor are chosen by LU with partial pivoting;
    returns ``(certified, beta, rows, cols)``. ``False`` is no proof of
    deficiency: the caller decides exactly.

    Examples
    --------
    >>> import numpy as np
    >>> verified_full_rank(np.array([[1.0, 2.0], [3.0, 4.0], [2.0, 4.0]]))[0]
    True
    >>> verified_full_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))[0]
    False
    """
    import numpy as np

    A = _np(A)
    m, n = A.shape
    if m == n:  # square: the minor is A itself
        rows, cols = list(range(m)), list(range(n))
    elif m > n:
        rows, cols = [int(i) for i in _lu_rows(A)], list(range(n))
    else:
        rows, cols = list(range(m)), [int(j) for j in _lu_rows(A.T)]
    sign, beta = verified_det_sign(A[np.ix_(rows, cols)], np.zeros((len(rows), len(cols))), need_sign=False)
    return bool(sign), beta, rows, cols


def float_input_box(weights: Any, ids: list[int]) -> tuple[Any, Any]:
    """(Xm, Xr): float64 midpoints and radii enclosing X = word[ids] + pos[:n] + type[0] (entries summed in float64).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> Xm, Xr = float_input_box(load_model("default"), [101, 102])
    >>> Xm.shape, bool((Xr <= 1e-15 * (abs(Xm) + 1)).all())
    ((2, 384), True)
    """
    import numpy as np

    parts = _embedding_parts(weights, ids)
    Xm = parts[0].copy()
    for P in parts[1:]:
        Xm = Xm + P
    # each float64 addition rounds by at most u |partial sum| <= u sum |parts|
    Xr = (len(parts) - 1) * _U * sum(np.abs(P) for P in parts) * (1 + 8 * _U)
    return Xm, Xr


def ball_box(B: Any) -> tuple[Any, Any]:
    """(Xm, Xr): float64 midpoints and radii enclosing every entry of the ``arb_mat`` B (radii rounded outward).

    Examples
    --------
    >>> from flint import arb, arb_mat
    >>> m, r = ball_box(arb_mat([[arb("1 +/- 0.5")]]))
    >>> float(m[0, 0]), bool(r[0, 0] >= 0.5)
    (1.0, True)
    """
    import numpy as np

    n, d = B.nrows(), B.ncols()
    mids = np.empty((n, d))
    rads = np.empty((n, d))
    for i in range(n):
        for j in range(d):
            x = B[i, j]
            mids[i, j] = float(x.mid())
            rads[i, j] = float(x.rad())
    # float(mid) rounds by at most u |mid|; float(rad) may round down by u rad
    return mids, (rads * (1 + 2 * _U) + _U * np.abs(mids)) * (1 + 2 * _U) + 2.0 ** -1070


def exact_rank(M: Any) -> tuple[int, str]:
    """Exact rank over Q of the numbers held in ``M`` (every float is a dyadic rational), with the method.

    The one exact-rank route, :func:`stacked_wo_rank`:
    the matrix scaled exactly to integers, its rank modulo the Mersenne prime
    2^61 - 1 (a lower bound of the rank over Q, exact when full), else
    python-flint's exact ``fmpz_mat`` rank for matrices up to
    :data:`EXACT_RANK_MAX_SIDE` on a side; larger ones get the modular lower
    bound, and the method says so ("at least ...").

    Examples
    --------
    >>> import torch
    >>> M = torch.tensor([[1.0, 2.0], [2.0, 4.0 + 2.0 ** -40]], dtype=torch.float64)
    >>> exact_rank(M)[0], exact_rank(torch.tensor([[1.0, 2.0], [0.5, 1.0]], dtype=torch.float64))[0]
    (2, 1)
    >>> exact_rank(torch.zeros(3, 2, dtype=torch.float64))
    (0, 'exact rank over Q (zero matrix)')
    """
    out = stacked_wo_rank(M, exact_limit=EXACT_RANK_MAX_SIDE, verified=False)
    if out["rank"] is not None:
        return int(out["rank"]), f"exact rank over Q ({out['method']})"
    return int(out["rank_mod_p"]), (f"at least {out['rank_mod_p']}: rank modulo the prime {out['modulus']} of the "
                                    "matrix scaled exactly to integers (a lower bound of the exact rank; the exact "
                                    f"rank is not computed above {EXACT_RANK_MAX_SIDE} on a side)")


#: largest side of a rank-deficient matrix whose exact integer rank :func:`exact_rank` computes
EXACT_RANK_MAX_SIDE = 64
