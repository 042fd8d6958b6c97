"""Numeric checks for §7: head-channel non-identifiability and the recovery-ambiguity count.

Every count names its map (the paper's n(H-1)d_k is the fibre of the first):

* **summation** ``(Y^1, ..., Y^H) -> sum_h Y^h`` on ``(R^{n x d_v})^H``: as a matrix
  on vec form it is ``I_{n d_v} (x) 1_H^T``; its rank is ``n d_v * rank(1_H^T)``
  by the Kronecker rank identity, with ``rank(1_H^T)`` measured numerically;
* **W_O** ``Z -> Z W_O`` on ``R^{n x H d_v}`` with the real stacked W_O: the matrix is
  ``I_n (x) W_O^T``, rank ``n rank(W_O)``, fibre ``n (H d_v - rank W_O)``;
* **the MLP's input** ``Z -> N(X + Z W_O + b_O)`` with X fixed, ``N`` the norm in
  front of the MLP (LN1 of a post-LN layer, the second norm of a pre-LN layer;
  LayerNorm or RMSNorm, real gain, the checkpoint's eps): row-separable, so the
  fibre's tangent dimension is the sum over rows of ``H d_v - rank J_i``; ``J_i``
  (d_model x H d_v) is computed in closed form at sampled rows (tests compare it
  with forward-mode autograd and with the brute-force Jacobian of the whole map),
  and counted a second way from the norm's exact kernel (:func:`derived_row_fibres`).
  Exactly: LayerNorm forgets the all-ones shift, and the scale only at eps = 0;
  RMSNorm forgets the scale at eps = 0 and nothing at eps > 0 (it is injective).

No dense (n H d_v)-square matrix is ever formed.

Examples
--------
>>> summation_fibre(n=512, H=12, d_v=64)["fibre"]
360448
>>> dense_summation_fibre(n=2, H=3, d_v=2)
8
"""

from __future__ import annotations

from typing import Any

from symtrans.checks.common import eps_text, finite, random_weights, rank_tolerance, record, trace, weights
from symtrans.context import Context
from symtrans.evidence import Evidence, Tolerance, Verdict, producer
from symtrans.numeric.wo import stacked_wo, wo_quotient_rank, wo_storage_ranks  # noqa: F401  (re-exported: the W_O mathematics)

__all__ = ["summation_fibre", "dense_summation_fibre", "wo_fibre", "ln_row_fibres", "ln_row_jacobians", "equilibrated_rank",
           "norm_kernel", "derived_row_fibres", "norm_map_fibre", "count_verdict", "mlp_norm",
           "stacked_wo", "recover_heads", "wo_rows", "wo_quotient_rank", "wo_storage_ranks", "RECOVERY_CROSS_CHECK"]


def summation_fibre(n: int, H: int, d_v: int, coefficients: Any = None) -> dict[str, Any]:
    """Fibre dimension of ``(Y^1..Y^H) -> sum_h c_h Y^h`` by structure: n d_v (H - rank c).

    ``coefficients`` (length H, default all ones) is the 1 x H block; its rank
    is measured with :func:`~symtrans.numeric.linalg.numerical_rank`.

    Examples
    --------
    >>> import torch
    >>> summation_fibre(3, 4, 2)["fibre"]
    18
    >>> summation_fibre(3, 4, 2, coefficients=torch.eye(4, dtype=torch.float64))["fibre"]  # no sum: heads kept apart
    0
    """
    import torch

    from symtrans.numeric.linalg import numerical_rank

    block = torch.ones(1, H, dtype=torch.float64) if coefficients is None else torch.as_tensor(coefficients)
    block = block.reshape(-1, H)
    rec = numerical_rank(block)
    rank = n * d_v * rec.rank
    return {"domain": n * H * d_v, "rank": rank, "fibre": n * H * d_v - rank, "block_rank": rec}


def dense_summation_fibre(n: int, H: int, d_v: int) -> int:
    """The same fibre from a dense matrix and an SVD (small sizes only: the independent route).

    Examples
    --------
    >>> dense_summation_fibre(3, 3, 2)
    12
    """
    import torch

    from symtrans.numeric.linalg import numerical_rank

    m = n * d_v
    M = torch.cat([torch.eye(m, dtype=torch.float64)] * H, dim=1)  # vec(sum) = [I ... I] vec(Y)
    return M.shape[1] - numerical_rank(M).rank


def wo_fibre(n: int, W_O: Any, storage_dtype: Any = None) -> dict[str, Any]:
    """Fibre dimension of ``Z -> Z W_O`` on R^{n x H d_v}: n (H d_v - rank W_O), rank measured.

    With ``storage_dtype`` the rank is decided at that storage precision
    (:func:`~symtrans.numeric.linalg.storage_rank`), else in the matrix's dtype.

    Examples
    --------
    >>> import torch
    >>> W = torch.zeros(2, 3, 5, dtype=torch.float64); W[0] = torch.randn(3, 5, dtype=torch.float64)
    >>> wo_fibre(4, W)["fibre"]  # head 1 writes nothing: its 3 columns are free at each of 4 rows
    12
    >>> wo_fibre(4, W, "float32")["record"].precision
    'float32 storage rounding'
    """
    from symtrans.numeric.linalg import numerical_rank, storage_rank

    W = stacked_wo(W_O)
    rec = numerical_rank(W) if storage_dtype is None else storage_rank(W, storage_dtype)
    return {"domain": n * W.shape[0], "rank_WO": rec.rank, "fibre": n * (W.shape[0] - rec.rank), "record": rec}


def recover_heads(Z: Any, W_O: Any, *, square_invertible: bool = False) -> float:
    """Relative error of recovering concatenated head outputs Z from Z W_O by solving with W_O.

    Least squares in general; ``square_invertible`` (W_O square and decided
    invertible by the caller) solves by LU instead, the same solution at about
    half the cost.

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(2, 3, 6, dtype=torch.float64)
    >>> recover_heads(torch.randn(4, 6, dtype=torch.float64), W) < 1e-10
    True
    >>> recover_heads(torch.randn(4, 6, dtype=torch.float64), W, square_invertible=True) < 1e-10
    True
    """
    import torch

    W = stacked_wo(W_O)
    out = Z @ W
    if square_invertible and W.shape[0] == W.shape[1]:
        Zr = torch.linalg.solve(W.T, out.T).T
    else:
        Zr = torch.linalg.lstsq(W.T, out.T).solution.T
    return float((Zr - Z).norm() / Z.norm())


def ln_row_fibres(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], eps: float = 0.0, *,
                  norm: str = "layernorm", gain: str = "ln1_w", equilibrate: bool = False) -> list[dict[str, Any]]:
    """Per-row tangent fibre of ``z_i -> N(x_i + z_i W_O + b_O)``: H d_v - rank J_i, J_i in closed form.

    ``N`` is LayerNorm or RMSNorm (``norm``) with the gain ``layer[gain]``
    and ``eps``; ``equilibrate`` (``eps > 0`` only) measures, for every row,
    the rank of ``P W_O^T`` (:func:`equilibrated_rank`), which is the row's
    Jacobian left-multiplied by an invertible matrix (see
    :func:`ln_row_jacobians`).

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(2, 3, 6, dtype=torch.float64)
    >>> lay = {"W_O": W, "b_O": torch.zeros(6, dtype=torch.float64), "ln1_w": torch.ones(6, dtype=torch.float64),
    ...        "ln1_b": torch.zeros(6, dtype=torch.float64)}
    >>> X, Z = torch.randn(2, 6, dtype=torch.float64), torch.randn(2, 6, dtype=torch.float64)
    >>> ln_row_fibres(X, Z, lay, [0])[0]["fibre"]  # LN without eps forgets the 1-direction and the scale
    2
    >>> ln_row_fibres(X, Z, lay, [0], 1e-5, equilibrate=True)[0]["fibre"]  # with eps > 0 it keeps the scale
    1
    >>> ln_row_fibres(X, Z, lay, [0], norm="rmsnorm")[0]["fibre"], ln_row_fibres(X, Z, lay, [0], 1e-6,
    ...                                        norm="rmsnorm", equilibrate=True)[0]["fibre"]
    (1, 0)
    """
    from symtrans.numeric.linalg import numerical_ranks

    W = stacked_wo(layer["W_O"])
    if equilibrate and rows:
        # the equilibrated J_i is (1 / s_i) diag(g) P W_O^T (P = I for RMSNorm); left-multiplied by the invertible
        # s_i diag(g)^{-1} (every gain non-zero) it is P W_O^T, the same for every row: one decision serves all
        rec = equilibrated_rank(W, norm)
        recs = [rec] * len(rows)
    else:
        recs = numerical_ranks(ln_row_jacobians(X, Z, layer, rows, eps, norm=norm, gain=gain))
    out = []
    for i, rec in zip(rows, recs):
        out.append({"row": i, "rank_J": rec.rank, "fibre": W.shape[0] - rec.rank, "decisive": rec.decisive,
                    "margin_decades": finite(rec.margin), "sigma_above": finite(rec.sigma_above),
                    "sigma_below": finite(rec.sigma_below), "cut": finite(rec.cut), "precision": rec.precision})
    return out


def equilibrated_rank(W: Any, norm: str = "layernorm") -> Any:
    """Rank record of ``P W^T`` (LayerNorm; ``W^T`` for RMSNorm), every row's equilibrated norm Jacobian.

    ``W`` is the stacked ``W_O`` (H d_v x d). A certificate first: rank d - 1
    of the centred ``P W^T`` (:func:`~symtrans.numeric.linalg.centred_rank_certificate`)
    or full rank (:func:`~symtrans.numeric.linalg.certified_rank`), each at least 1.5 decades from the float64 cut on
    both sides; where none goes through, the SVD decides
    (:func:`~symtrans.numeric.linalg.numerical_rank`).

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> W = torch.randn(40, 40, generator=g, dtype=torch.float64)
    >>> r = equilibrated_rank(W)
    >>> r.rank, r.precision
    (39, 'float64 computation (Cholesky certificate)')
    >>> W[:2] = 0  # W of rank 38, and so P W^T: the certificate declines, the SVD decides
    >>> r = equilibrated_rank(W)
    >>> r.rank, r.precision
    (38, 'float64 computation')
    >>> equilibrated_rank(torch.randn(40, 40, generator=g, dtype=torch.float64), "rmsnorm").rank
    40
    """
    from symtrans.numeric.linalg import centred_rank_certificate, certified_rank, numerical_rank

    base = _projected_wt(W, norm)
    d, k = base.shape
    if norm == "layernorm" and d <= k:
        rec = centred_rank_certificate(base)
        return rec if rec is not None else numerical_rank(base)
    return certified_rank(base)  # full rank min(d, k): P's kernel (the all-ones column) does not bind when d > k


def _projected_wt(W: Any, norm: str) -> Any:
    """``P W^T`` for LayerNorm (``P = I - 1 1^T / d`` centres each column of ``W^T``), ``W^T`` for RMSNorm."""
    Wt = W.T  # [d, H d_v]
    return Wt - Wt.mean(0, keepdim=True) if norm == "layernorm" else Wt


def _row_sums(X: Any, Z: Any, layer: dict[str, Any], rows: list[int]) -> Any:
    """The norm's argument per row: ``u_i = x_i + z_i W_O + b_O``."""
    return X[rows] + Z[rows] @ stacked_wo(layer["W_O"]) + layer["b_O"]


def _norm_input(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], norm: str) -> Any:
    """What the norm scales, per row: ``u_i`` (:func:`_row_sums`) centred for LayerNorm (``c_i``), as is for RMSNorm."""
    u = _row_sums(X, Z, layer, rows)
    return u - u.mean(-1, keepdim=True) if norm == "layernorm" else u


def _scale_sq(c: Any, eps: float) -> Any:
    """``s_i^2 = mean(c_i^2) + eps`` per row of the norm's input ``c``: the norm divides row i by ``s_i``."""
    return (c * c).mean(-1) + eps


def ln_row_jacobians(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], eps: float = 0.0, *,
                     norm: str = "layernorm", gain: str = "ln1_w", equilibrate: bool = False) -> Any:
    """``J_i`` (d_model x H d_v) of ``z -> N(x_i + z W_O + b_O)`` at ``z = Z[i]`` for each row, stacked.

    With ``u = x_i + z W_O + b_O`` and ``du = W_O^T dz``:

    * LayerNorm (biased variance): ``c = u - mean u``, ``s = sqrt(mean(c^2) + eps)``,
      ``y = c / s``; ``d LN = diag(g) (1/s) (P - y y^T / d) du`` with ``P = I - 11^T / d``;
    * RMSNorm: ``s = sqrt(mean(u^2) + eps)``, ``y = u / s``;
      ``d RMS = diag(g) (1/s) (I - y y^T / d) du``.

    In both, ``|y|^2 / d = 1 - lambda`` with ``lambda = eps / s^2``, so the middle
    factor is ``R P`` (LayerNorm) or ``R`` (RMSNorm) with
    ``R = I - (1 - lambda) yhat yhat^T``, whose eigenvalue along ``yhat`` is
    ``lambda`` and 1 elsewhere. For ``eps > 0``, ``R`` is invertible, and with
    every gain non-zero so is ``diag(g) R``: ``equilibrate=True`` returns
    ``diag(g) (1/s) P W_O^T`` (or ``diag(g) (1/s) W_O^T``), which is ``J_i``
    left-multiplied by the invertible ``diag(g) R^{-1} diag(g)^{-1}``: the same
    rank, without the singular value of order ``lambda`` that a float64 SVD
    cannot separate from zero when ``eps`` is tiny (BERT: 1e-12). Tests compare
    ``J_i`` with forward-mode autograd. Left-multiplied further by the
    invertible ``s diag(g)^{-1}`` it is ``P W_O^T`` for every row
    (:func:`equilibrated_rank`).

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(1, 2, 4, dtype=torch.float64)
    >>> lay = {"W_O": W, "b_O": torch.zeros(4, dtype=torch.float64), "ln1_w": torch.ones(4, dtype=torch.float64)}
    >>> tuple(ln_row_jacobians(torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64),
    ...                        lay, [0, 2]).shape)
    (2, 4, 2)
    """
    if norm not in ("layernorm", "rmsnorm"):
        from symtrans.errors import SymtransError

        raise SymtransError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")
    if equilibrate and not eps > 0:
        from symtrans.errors import SymtransError

        raise SymtransError("equilibrate needs eps > 0: at eps = 0 the scale direction is in the kernel")
    W = stacked_wo(layer["W_O"])  # [H d_v, d]
    d = W.shape[1]
    c = _norm_input(X, Z, layer, rows, norm)  # [r, d]
    base = _projected_wt(W, norm)  # P W_O^T or W_O^T
    s = _scale_sq(c, eps).sqrt()[:, None]  # [r, 1]
    if equilibrate:
        inner = base[None].expand(len(rows), -1, -1)
    else:
        y = c / s
        inner = base[None] - y[:, :, None] * (y @ W.T)[:, None, :] / d  # (P - y y^T / d) W_O^T; y^T P = y^T
    return (layer[gain][None, :, None] / s[:, :, None]) * inner


def norm_kernel(u: Any, eps: float, norm: str = "layernorm", zero_gain: Any = ()) -> Any:
    """Orthonormal basis (rows) of the kernel of the norm's derivative at the row ``u``.

    Exact, from the eigen-structure in :func:`ln_row_jacobians`: LayerNorm
    always loses ``1`` (centring), and the centred row ``c`` only at
    ``eps = 0``; RMSNorm loses ``u`` at ``eps = 0`` and nothing at ``eps > 0``
    (``r -> r / sqrt(r^2 / d + eps)`` is strictly increasing, so the row map is
    even injective). None where the norm is not differentiable (``eps = 0`` and
    ``c = 0``, or ``u = 0``).

    ``zero_gain`` lists the coordinates S whose gain is exactly 0 (``eps > 0`` only; None at ``eps = 0``).
    The derivative is ``diag(g) R P / s`` (LayerNorm) or ``diag(g) R / s`` (RMSNorm), ``R`` invertible
    for ``eps > 0`` and mapping ``1^perp`` to itself, so the kernel is ``P^{-1}(R^{-1} span(e_S))``:
    LayerNorm ``span(1) + R^{-1}{sum_S a_j e_j : sum a_j = 0}`` (dimension max(|S|, 1): one zero gain
    loses nothing more, since the rows of ``R P`` sum to zero), RMSNorm ``R^{-1} span(e_S)`` (dimension |S|).

    Examples
    --------
    >>> import torch
    >>> u = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    >>> [tuple(norm_kernel(u, e, k).shape) for k in ("layernorm", "rmsnorm") for e in (0.0, 1e-6)]
    [(2, 3), (1, 3), (1, 3), (0, 3)]
    >>> [tuple(norm_kernel(u, 1e-6, k, zero_gain=S).shape) for k in ("layernorm", "rmsnorm") for S in ([0], [0, 2])]
    [(1, 3), (2, 3), (1, 3), (2, 3)]
    """
    import torch

    d = u.shape[-1]
    S = [int(j) for j in zero_gain]
    if S:
        if eps == 0:
            return None
        c = u - u.mean() if norm == "layernorm" else u
        s2 = float((c * c).mean()) + eps
        lam = eps / s2
        size = float(c.norm())
        yhat = c / size if size > 0 else torch.zeros_like(c)

        def r_inv(v: Any) -> Any:  # R^{-1} = I + ((1 - lambda) / lambda) yhat yhat^T
            return v + ((1 - lam) / lam) * (yhat @ v) * yhat

        eye = torch.eye(d, dtype=u.dtype, device=u.device)
        if norm == "layernorm":
            cols = [torch.ones(d, dtype=u.dtype, device=u.device)] + [r_inv(eye[j] - eye[S[0]]) for j in S[1:]]
        else:
            cols = [r_inv(eye[j]) for j in S]
        Q, _ = torch.linalg.qr(torch.stack(cols, 1))
        return Q.T.contiguous()
    vecs = []
    if norm == "layernorm":
        vecs.append(torch.ones(d, dtype=u.dtype, device=u.device) / d ** 0.5)
        c = u - u.mean()
    else:
        c = u
    if eps == 0:
        size = float(c.norm())
        if size == 0:
            return None
        vecs.append(c / size)
    return torch.stack(vecs) if vecs else torch.zeros(0, d, dtype=u.dtype, device=u.device)


def derived_row_fibres(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], eps: float = 0.0, *,
                       norm: str = "layernorm", wo_record: Any = None, gain: str | None = None) -> list[dict[str, Any]]:
    """The same per-row fibre without the Jacobian: ``H d_v + k - rank [W_O; B^T]``, B the norm's kernel (k columns).

    ``ker J_i = {dz : dz W_O in ker N'}``, so its dimension is
    ``(H d_v - rank W_O) + dim(row W_O cap ker N')``, and
    ``dim(A cap B) = dim A + dim B - dim(A + B)`` gives
    ``H d_v + k - rank [W_O; B^T]`` with ``B`` from :func:`norm_kernel` (exact)
    and one float64 rank of the stacked matrix (``W_O`` scaled to unit Frobenius norm; rows with the same
    kernel share it).
    With ``gain`` (the gain tensor's name in ``layer``) the coordinates whose gain is exactly 0 enter the
    kernel (:func:`norm_kernel`, ``eps > 0``); without it every gain is taken as non-zero.

    ``wo_record`` (a :class:`~symtrans.numeric.linalg.RankRecord` from an SVD of the
    stacked W_O, e.g. its storage rank) saves the SVD when W_O has full column
    rank d: then ``[Wn; B]`` has rank d too, with ``sigma_min([Wn; B]) >=
    sigma_min(Wn)`` (appending rows only adds ``B^T B >= 0`` to the Gram matrix) and
    ``sigma_max([Wn; B]) <= sqrt(sigma_max(Wn)^2 + 1)`` (B has orthonormal rows), so the
    margin from the float64 cut is at least ``log10(sigma_min(Wn) / cut_bound)``. A
    bound below 1 decade falls back to the SVD.

    Examples
    --------
    >>> import torch
    >>> lay = {"W_O": torch.randn(2, 3, 6, dtype=torch.float64), "b_O": torch.zeros(6, dtype=torch.float64),
    ...        "ln1_w": torch.ones(6, dtype=torch.float64)}
    >>> X, Z = torch.randn(1, 6, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64)
    >>> [derived_row_fibres(X, Z, lay, [0], e, norm=k)[0]["fibre"] for k in ("layernorm", "rmsnorm") for e in (0, 1e-6)]
    [2, 1, 1, 0]
    >>> from symtrans.numeric.linalg import numerical_rank
    >>> rec = numerical_rank(lay["W_O"].reshape(6, 6))
    >>> r = derived_row_fibres(X, Z, lay, [0], 1e-6, wo_record=rec)[0]
    >>> r["fibre"], r["method"][:5]
    (1, 'bound')
    """
    import torch

    from symtrans.numeric.linalg import numerical_rank

    W = stacked_wo(layer["W_O"])
    # any positive scale keeps the rank; the Frobenius norm (not the spectral norm: a d x d SVD) puts W_O's
    # singular values in [1/sqrt(rank), 1], comparable with B's unit rows
    fro = max(float(torch.linalg.matrix_norm(W)), 1e-300)
    Wn = W / fro
    u = _row_sums(X, Z, layer, rows)
    zeros = (layer[gain] == 0).nonzero().flatten().tolist() if gain is not None else []
    out = []
    seen: list[tuple[Any, Any]] = []  # (B, record): with eps > 0 LayerNorm's kernel is the same 1-direction for every row
    for k, i in enumerate(rows):
        B = norm_kernel(u[k], eps, norm, zero_gain=zeros) if zeros else norm_kernel(u[k], eps, norm)
        if B is None:
            out.append({"row": i, "fibre": None, "decisive": False, "why": "the norm is not differentiable here"})
            continue
        shape = (W.shape[0] + B.shape[0], W.shape[1])
        if not W.any():  # W_O = 0 exactly: [0; B] has rank k (B has orthonormal rows), no SVD needed
            out.append({"row": i, "fibre": W.shape[0], "kernel_dim": int(B.shape[0]), "rank_stacked": int(B.shape[0]),
                        "decisive": True, "margin_decades": None,
                        "method": "exact: W_O = 0, so rank [W_O; B^T] = rank B = k (orthonormal rows)"})
            continue
        bound = _full_column_bound(wo_record, fro, shape)
        if bound is not None:
            out.append({"row": i, "fibre": W.shape[0] + B.shape[0] - W.shape[1], "kernel_dim": int(B.shape[0]),
                        "rank_stacked": int(W.shape[1]), "decisive": True, "margin_decades": finite(bound),
                        "method": "bound from W_O's SVD: full column rank, sigma_min([Wn; B]) >= sigma_min(Wn); "
                                  "the margin is a lower bound"})
            continue
        rec = next((r for b, r in seen if b.shape == B.shape and torch.equal(b, B)), None)
        if rec is None:
            rec = numerical_rank(torch.cat([Wn, B]))
            seen.append((B, rec))
        out.append({"row": i, "fibre": W.shape[0] + B.shape[0] - rec.rank, "kernel_dim": int(B.shape[0]),
                    "rank_stacked": rec.rank, "decisive": rec.decisive, "margin_decades": finite(rec.margin),
                    "method": "float64 SVD of [Wn; B]"})
    return out


def _full_column_bound(rec: Any, fro: float, shape: tuple[int, int]) -> float | None:
    """Lower bound (decades) on the float64-cut margin of ``[W / fro; B]`` from an SVD record of W; None unless >= 1.

    Only when ``rec`` says W has full column rank (its smallest kept singular
    value is sigma_min(W)); the cut of ``[Wn; B]`` is ``max(m, n) eps64 sigma_max``,
    bounded above with ``sigma_max <= sqrt(sigma_max(Wn)^2 + 1)``.
    """
    import math

    from symtrans.precision import decided, rank_rtol

    if rec is None or rec.rank != shape[1] or rec.rank != min(rec.shape) or not rec.sigma_above:
        return None
    smin, smax = rec.sigma_above / fro, rec.sigma_max / fro
    cut = rank_rtol("float64", shape)[0] * math.sqrt(smax * smax + 1.0)
    margin = math.log10(smin / cut)
    return margin if decided(margin) else None


def norm_map_fibre(norm: str, eps: float, H_dv: int, d_model: int) -> int:
    """Per-token fibre of ``z -> N(x + z W_O + b_O)`` when W_O has rank d_model and no gain is zero.

    ``H d_v - d_model`` (the kernel of ``z -> z W_O``) plus what the norm
    forgets: LayerNorm 2 at ``eps = 0`` (the all-ones shift and the scale),
    1 at ``eps > 0`` (the shift); RMSNorm 1 at ``eps = 0`` (the scale),
    0 at ``eps > 0`` (injective). The paper's count is ``(H - 1) d_k``.

    Examples
    --------
    >>> [norm_map_fibre(k, e, 384, 384) for k in ("layernorm", "rmsnorm") for e in (0.0, 1e-12)]
    [2, 1, 1, 0]
    """
    lost = (2 if eps == 0 else 1) if norm == "layernorm" else (1 if eps == 0 else 0)
    return H_dv - d_model + lost


def count_verdict(rows: list[dict[str, Any]], expected: int) -> tuple[Verdict, list[dict[str, Any]]]:
    """Compare per-row fibres with an expected per-token count: fails on a decided row that differs.

    A row is decided when its rank record is decisive (and, where a second
    route measured it, both routes are decisive and agree). Undecided rows
    alone give ``inconclusive``.

    Examples
    --------
    >>> rows = [{"fibre": 1, "decided": True}, {"fibre": 1, "decided": True}]
    >>> count_verdict(rows, 1)[0].value, count_verdict(rows, 2)[0].value
    ('supported', 'fails')
    """
    decided = [r for r in rows if r["decided"]]
    wrong = [r for r in decided if r["fibre"] != expected]
    if wrong:
        return Verdict.FAILS, wrong
    if len(decided) < len(rows) or not rows:
        return Verdict.INCONCLUSIVE, []
    return Verdict.SUPPORTED, []


def _formula(name: str, arch: Any, **sizes: int) -> int:
    from symtrans.formulas import formula

    return int(formula(name, arch=arch, **sizes).value)


def _inputs(ctx: Context, n: int, maps: str) -> dict[str, Any]:
    return {"n": n, "map": maps, "tokens": f"{n} seeded random token ids (seed {ctx.seed})"}


def _summation(ctx: Context) -> list[Evidence]:
    from symtrans.arch import get_arch

    w = weights(ctx)
    n, H, dv = ctx.n, w.n_heads, w.d_head
    model = summation_fibre(n, H, dv)
    bb = get_arch("bert-base")
    big = summation_fibre(int(bb.n), int(bb.H), int(bb.d_v))
    small = [(2, 3, 2), (3, 4, 2), (4, 2, 3)]
    dense_ok = all(dense_summation_fibre(*s) == summation_fibre(*s)["fibre"] for s in small)
    f_model = _formula("recovery-ambiguity", w.arch, n=n)
    f_big = _formula("recovery-ambiguity", "bert-base")
    ok = model["fibre"] == f_model and big["fibre"] == f_big and dense_ok
    rec = model["block_rank"]
    inputs = _inputs(ctx, n, "summation (Y^1, ..., Y^H) -> sum_h Y^h on (R^{n x d_v})^H")
    details = {"model": {k: v for k, v in model.items() if k != "block_rank"}, "formula_model": f_model,
               "bert_base_n512": {k: v for k, v in big.items() if k != "block_rank"}, "formula_bert_base": f_big,
               "dense_cross_check_sizes": small, "dense_cross_check_agrees": dense_ok,
               "method": "Kronecker structure I_{n d_v} (x) 1_H^T; rank(1_H^T) measured numerically"}
    from symtrans.evidence import Scope

    scope = Scope("instances", f"the summation map at n = {n}, H = {H}, d_v = {dv} (this model), at BertBase's "
                  f"n = {int(bb.n)}, and dense at {small}", (f"n={n},H={H},d_v={dv}", "bert-base n=512",
                                                             *(f"n={a},H={b},d_v={c}" for a, b, c in small)))
    common = dict(margin=finite(rec.margin), margin_meaning="decades of the 1 x H block's singular value from its "
                  "float64 rank cut", tolerance=rank_tolerance(rec), inputs=inputs, details=details, scope=scope)
    ev = [record(ctx, "thm-recovery", "fibre-summation", Verdict.SUPPORTED if ok else Verdict.FAILS,
                 (f"summation map: fibre {model['fibre']} = n(H-1)d_v at n = {n} (formula {f_model}); BertBase "
                  f"n = 512: {big['fibre']} (formula {f_big}); dense SVD agrees at small sizes") if ok else
                 f"summation-map fibre {model['fibre']} / {big['fibre']} differs from the formula {f_model} / {f_big}",
                 **common)]
    ev.append(record(ctx, "thm-7.3", "nonidentifiable-summation",
                     Verdict.SUPPORTED if model["fibre"] > 0 else Verdict.FAILS,
                     f"heads summed in a shared d_v-wide channel are not identifiable from the sum: fibre "
                     f"{model['fibre']} > 0 at n = {n} (formalisation: the summation map)", **common))
    return ev


#: relative error below which a float64 least-squares solve counts as having reproduced Z (a cross-check
#: reported beside the rank decision, never the decision itself: the rank at storage precision decides)
RECOVERY_CROSS_CHECK = 1e-6


def wo_rows(ctx: Context) -> list[dict[str, Any]]:
    """Per-layer rank of the stacked W_O at storage precision, the fibre of Z -> Z W_O, and a recovery cross-check.

    Each row: the rank at the precision the weights were stored in (Weyl cut
    of the rounding perturbation, :func:`~symtrans.numeric.linalg.storage_rank`),
    whether that decision is decisive, the exact rank over Q of the stored
    numbers where it differs, and the relative error of recovering the real
    head outputs Z from Z W_O by least squares.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> r = wo_rows(Context(model="default", n=4))[0]
    >>> r["rank_WO_storage"], r["decisive"], r["precision"]
    (384, True, 'float32 storage rounding (Cholesky certificate)')
    """
    return _wo_storage(ctx)[0]


def _wo_storage(ctx: Context) -> tuple[list[dict[str, Any]], list[Any]]:
    """:func:`wo_rows` and the rank record of each layer's W_O it was built from, computed once per context."""
    from symtrans.checks.common import exact_rank, finite
    from symtrans.numeric.wo import wo_rank, wo_ranks

    key = ("sec7-wo", ctx.n)
    if key in ctx.cache:
        return ctx.cache[key]
    w = weights(ctx)
    n = ctx.n
    tr = trace(ctx)
    ranks = wo_ranks(ctx)  # the one home of rank W_O at storage precision (--layers: the listed layers only)
    rows = []
    for wr in ranks:
        i, rec = wr.layer, wr.record
        full = min(rec.shape)
        Z = tr.layers[i].Y.transpose(0, 1).reshape(n, -1)
        err = recover_heads(Z, w.W_O[i], square_invertible=wr.injective is True and rec.shape[0] == rec.shape[1]) \
            if float(Z.norm()) > 0 else None
        fib = wr.fibre(n)
        row = {"layer": i, "rank_WO_storage": rec.rank, "rank_WO_interval": [wr.low, wr.high],
               "rows_HdV": rec.shape[0], "injective": wr.injective,
               "decisive": wr.decided, "margin_decades": finite(rec.margin), "cut": finite(rec.cut),
               "sigma_above": finite(rec.sigma_above), "sigma_below": finite(rec.sigma_below),
               "precision": rec.precision, "fibre": n * (rec.shape[0] - rec.rank), "fibre_interval": list(fib),
               "recovery_rel_error": finite(err)}
        if w.arch.norm == "layernorm":  # the gauge-invariant counterpart: W_O P, what the centring norm sees
            q = wo_rank(ctx, i, centred=True)  # the one home of rank W_O at storage precision, modulo centring
            row.update({"rank_WO_quotient": q.rank, "quotient_decisive": q.decided,
                        "quotient_margin_decades": finite(q.record.margin),
                        "fibre_quotient": n * (rec.shape[0] - q.rank)})
        if rec.rank < full:  # the stored numbers may still have a larger exact rank: report both
            xr, how = exact_rank(stacked_wo(w.layer(i)["W_O"]))
            row.update({"rank_WO_exact" if how.startswith("exact") else "rank_WO_exact_at_least": xr,
                        "exact_method": how})
        rows.append(row)
    ctx.cache[key] = rows, [wr.record for wr in ranks]
    return rows, ctx.cache[key][1]


def _rank_text(rows: list[dict[str, Any]]) -> str:
    """The ranks of W_O over the rows, an undecided one as its interval: ``[320]`` or ``[320, '320..384']``."""
    out = []
    for r in rows:
        lo, hi = r["rank_WO_interval"]
        t = lo if lo == hi else f"{lo}..{hi}"
        if t not in out:
            out.append(t)
    return str(out)


def _wo(ctx: Context) -> list[Evidence]:
    from symtrans.arch import get_arch
    from symtrans.checks.common import storage_precision
    from symtrans.evidence import HypothesisCheck, Scope

    w = weights(ctx)
    n, H, dv = ctx.n, w.n_heads, w.d_head
    rows = wo_rows(ctx)
    sd, sd_note = storage_precision(w, "W_O")  # per layer in the rows' "precision"; the least precise here
    for r in rows:
        r["formula_wo_fibre"] = _formula("wo-fibre", w.arch, n=n, rank_WO=r["rank_WO_storage"])
    bbW = random_weights("bert-base", seed=0)["W_O"]  # a fixed draw: verdicts must not depend on --seed
    bbn = int(get_arch("bert-base").n)
    fb = wo_fibre(bbn, bbW)
    paper = _formula("recovery-ambiguity", w.arch, n=n)
    tol = Tolerance(rows[0]["cut"] or 0.0, f"rank of the stacked W_O at {sd} storage precision: {sd_note}; the cut "
                    "is the Weyl bound (eps/2) ||W_O||_F of rounding to the storage dtype plus the float64 SVD error "
                    "(layer 0's cut shown; every layer's in details); a decision counts only when the singular values "
                    "on both sides sit at least 1 decade from the cut (DECISIVE_MARGIN)", "absolute (singular value)")
    inputs = _inputs(ctx, n, "Z -> Z W_O on R^{n x H d_v} with each layer's real stacked W_O")
    details = {"layers": rows, "paper_count": paper, "storage_dtype": sd, "storage_note": sd_note,
               "rank_used": "rank at storage precision (recovering the heads needs W_O injective at the precision "
                            "its weights were stored in); the exact rank of the stored numbers is listed where it "
                            "differs",
               "recovery_cross_check": f"float64 least-squares recovery of the real Z; relative error below "
                                       f"{RECOVERY_CROSS_CHECK:g} expected where W_O is decisively injective "
                                       "(reported, not part of the decision)",
               "bert_base_random_W_O": {"n": bbn, "rank_WO": fb["rank_WO"], "fibre": fb["fibre"],
                                        "formula_wo_fibre": _formula("wo-fibre", "bert-base", rank_WO=fb["rank_WO"])}}
    margins = [r["margin_decades"] for r in rows if r["margin_decades"] is not None]
    margin = min(margins) if margins else None
    scope = Scope("model", f"every layer of the model ({len(rows)}) at n = {n}", tuple(f"layer {r['layer']}" for r in rows))
    hyp = (HypothesisCheck("W_O known", True, None, "the reader of MHA(X) is given the model's stacked W_O (the "
                           "weights under test)"),)
    common = dict(margin=margin, margin_meaning="smallest distance (decades) of a singular value of W_O from its "
                  "storage-precision cut, over layers", tolerance=tol, inputs=inputs, details=details, scope=scope,
                  hypothesis_checks=hyp, dtype=sd)
    undecided = [r["layer"] for r in rows if not r["decisive"]]
    layers_seen = [r["layer"] for r in rows]
    # thm-recovery/wo: the fibre equals the paper's n (H-1) d_k at every layer; a layer refutes it when the
    # paper's count lies outside every fibre its rank interval leaves possible (decided even if the rank is not)
    wrong = [r for r in rows if not r["fibre_interval"][0] <= paper <= r["fibre_interval"][1]]
    fibres = sorted({r["fibre"] for r in rows})
    shown = sorted({tuple(r["fibre_interval"]) if r["fibre_interval"][0] != r["fibre_interval"][1]
                    else r["fibre_interval"][0] for r in rows}, key=str)
    if wrong:
        v, s = Verdict.FAILS, (f"with W_O known the recovery map Z -> Z W_O has fibre {shown} at n = {n} (rank W_O at "
                               f"{sd} storage precision {_rank_text(rows)}), not the paper's "
                               f"n(H-1)d_k = {paper} at layers {[r['layer'] for r in wrong]}: the count applies to the "
                               "summation map only")
    elif undecided:
        v, s = Verdict.INCONCLUSIVE, (f"rank W_O at {sd} storage precision is undecided at layers {undecided} "
                                      f"({_rank_text(rows)}: a singular value within 1 decade of the cut)")
    else:
        v, s = Verdict.SUPPORTED, f"fibre of Z -> Z W_O = n(H-1)d_k = {paper} at layers {layers_seen} (n = {n})"
    ev = [record(ctx, "thm-recovery", "fibre-wo", v, s, counterexample=(
        {"n": n, "layers": [r["layer"] for r in wrong], "fibre": fibres, "paper": paper} if wrong else None), **common)]
    # thm-7.3/wo: the fibre is positive (heads not recoverable) at every layer; WoRank.injective decides per layer
    injective = [r for r in rows if r["injective"] is True]
    unsure = [r["layer"] for r in rows if r["injective"] is None]
    if injective:
        errs = [r["recovery_rel_error"] for r in injective if r["recovery_rel_error"] is not None]
        v, s = Verdict.FAILS, (f"with W_O known the per-head outputs ARE recoverable from MHA(X) = Z W_O at layers "
                               f"{[r['layer'] for r in injective]}: the stacked W_O has rank {H * dv} = H d_v (injective) "
                               f"at {sd} storage precision, decisively (every singular value >= 10x the rounding "
                               "bound)" + (f"; least-squares recovery of the real heads reproduces Z to "
                                           f"{max(errs):.2g} relative error" if errs else ""))
    elif unsure:
        v, s = Verdict.INCONCLUSIVE, (f"injectivity of Z -> Z W_O is undecided at layers {unsure} at {sd} storage "
                                      f"precision ({_rank_text(rows)}: a singular value within 1 decade of the cut)")
    else:
        v, s = Verdict.SUPPORTED, (f"per-head outputs are not recoverable from MHA(X) with W_O known at layers "
                                   f"{layers_seen}: Z -> Z W_O has fibre {shown} > 0 at n = {n} (rank W_O at {sd} "
                                   f"storage precision {_rank_text(rows)} < H d_v = {H * dv})")
    quotient = [r["rank_WO_quotient"] for r in rows if "rank_WO_quotient" in r]
    if quotient:  # the gauge-invariant counterpart, beside the stored-parametrisation verdict
        s += (f". Invariant counterpart (what the centring norm sees; no element of G moves it): rank W_O P on the "
              f"quotient by the centring shift at {sd} storage precision {sorted(set(quotient))} < H d_v = {H * dv}, "
              f"fibre {sorted({r['fibre_quotient'] for r in rows if 'fibre_quotient' in r})} at n = {n}: the heads are "
              "not recoverable from what the function passes on")
        details["invariant_counterpart"] = {"map": "Z -> Z W_O P, P = I - 1 1^T / d_model",
                                            "rank_WO_quotient": [r["rank_WO_quotient"] for r in rows if "rank_WO_quotient" in r],
                                            "decisive": all(r["quotient_decisive"] for r in rows if "rank_WO_quotient" in r)}
    ev.append(record(ctx, "thm-7.3", "nonidentifiable-wo", v, s, counterexample=(
        {"layers": [r["layer"] for r in injective]} if injective else None), **common))
    return ev


def mlp_norm(w: Any) -> dict[str, Any]:
    """The norm in front of the MLP: kind, gain tensor name, the checkpoint's eps, and where it sits.

    Post-LN (BERT family): ``LN1`` of ``X + MHA(X) + b_O``; pre-LN (GPT-2,
    Llama family): the layer's second norm ``N2`` of the same residual sum.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> m = mlp_norm(weights(Context(model="default")))
    >>> m["norm"], m["gain"], m["eps"]
    ('layernorm', 'ln1_w', 1e-12)
    """
    a = w.arch
    pre = getattr(a, "norm_placement", "post") == "pre"
    kind = getattr(a, "norm", "layernorm")
    name = "RMSNorm" if kind == "rmsnorm" else "LayerNorm"
    return {"norm": kind, "name": name, "gain": "ln2_w" if pre else "ln1_w", "eps": float(a.ln_eps),
            "where": (f"the layer's second norm N2 ({name}, pre-LN: the MLP reads N2(X + MHA(X) + b_O))" if pre
                      else f"LN1 ({name}, post-LN: the MLP reads LN1(X + MHA(X) + b_O))")}


def _ln(ctx: Context) -> list[Evidence]:
    from symtrans.evidence import HypothesisCheck, Scope

    w = weights(ctx)
    n = ctx.n
    if getattr(w.arch, "post_norms", False):  # Gemma 3: the MLP reads N2(X + P1(MHA(X))), not N2(X + MHA(X) + b_O)
        why = ("not run: on this model the MLP reads N2(X + P1(MHA(X))) with a post-norm P1 on the attention "
               "output (Gemma 3); this check's fibre computation (row Jacobian and exact kernel) is written for "
               "N(X + Z W_O + b_O) and is not extended to the composed map yet")
        return [record(ctx, "thm-recovery", "fibre-ln", Verdict.NOT_RUN, why),
                record(ctx, "thm-7.3", "nonidentifiable-ln", Verdict.NOT_RUN, why)]
    m = mlp_norm(w)
    N, eps = m["name"], m["eps"]
    hyp = HypothesisCheck("MLP reads norm(X + MHA(X) + b_O)", True, None, f"the MLP's input is {m['where']}")
    inputs = _inputs(ctx, n, f"Z -> {N}(X + Z W_O + b_O), X fixed: {m['where']}, with its real gain and "
                              f"{eps_text(ctx)}")
    tr = trace(ctx)
    rows_sel = sorted({0, n - 1})
    H_dv = int(stacked_wo(w.layer(0)["W_O"]).shape[0])
    wo = _wo_storage(ctx)[1]  # W_O's rank record per layer (cached): the derived count reads its singular values
    out, lambdas = [], []
    idx = ctx.layer_indices(w.n_layers)  # --layers: the listed layers only
    for k, i in enumerate(idx):
        lt = tr.layers[i]
        lay = w.layer(i)
        Z = lt.Y.transpose(0, 1).reshape(n, -1)
        zero_gain = bool((lay[m["gain"]] == 0).any())
        equil = eps > 0 and not zero_gain
        jac = ln_row_fibres(lt.X, Z, lay, rows_sel, eps, norm=m["norm"], gain=m["gain"], equilibrate=equil)
        # the unequilibrated SVD only illustrates why the Jacobian is equilibrated: layer 0 only (a d x d SVD per row)
        direct = (jac if not equil else
                  ln_row_fibres(lt.X, Z, lay, rows_sel, eps, norm=m["norm"], gain=m["gain"]) if i == 0 else None)
        # the eps-free (paper's) count is reported beside the verdict, not part of it: layer 0's rows (the
        # same Jacobian as the verdict's when the checkpoint's eps is 0)
        paper = (jac if eps == 0 else
                 ln_row_fibres(lt.X, Z, lay, rows_sel, 0.0, norm=m["norm"], gain=m["gain"]) if i == 0 else None)
        # with a zero gain the Jacobian's lambda-shrunk direction cannot be equilibrated away: the exact kernel
        # (norm_kernel with the zero coordinates, eps > 0) decides alone
        derived = (derived_row_fibres(lt.X, Z, lay, rows_sel, eps, norm=m["norm"], wo_record=wo[k], gain=m["gain"])
                   if not zero_gain or eps > 0 else [None] * len(rows_sel))
        kernel_only = zero_gain and eps > 0
        c = _norm_input(lt.X, Z, lay, rows_sel, m["norm"])
        lam = (eps / _scale_sq(c, eps)).tolist() if eps > 0 else [0.0] * len(rows_sel)
        lambdas += lam
        for j, r in enumerate(jac):
            dv = derived[j]
            if kernel_only and dv is not None and dv["fibre"] is not None:
                # the count from the exact kernel decides alone: the direct Jacobian SVD is shown beside it, never
                # compared, since its lambda-shrunk direction (lambda ~ eps / s^2) can sit a decade below the
                # float64 cut and be read, "decisively", as a lost direction (2 per token where 1 is exact)
                r = dict(r, fibre=dv["fibre"], decisive=dv["decisive"], margin_decades=None,
                         rank_J=H_dv - dv["fibre"], direct_jacobian_fibre=r["fibre"],
                         direct_jacobian_decisive=r["decisive"])
                agree = True
            else:
                agree = dv is not None and dv["fibre"] == r["fibre"]
            decided = r["decisive"] and (dv is None or (dv["decisive"] and agree))
            row = dict(r, layer=i, decided=decided,
                       jacobian=("equilibrated: the row Jacobian left-multiplied by the invertible "
                                 "s_i R^{-1} diag(g)^{-1}, i.e. P W_O^T (same rank)" if equil else
                                 "direct" + (" (a gain is exactly 0: no equilibration; the fibre is the count from "
                                             "the norm's exact kernel with the zero-gain coordinates)"
                                             if kernel_only else " (a gain is exactly 0: no equilibration)"
                                             if zero_gain else "")),
                       derived_fibre=None if dv is None else dv["fibre"],
                       derived_decisive=None if dv is None else dv["decisive"],
                       routes_agree=agree if dv is not None else None,
                       direct_fibre=direct[j]["fibre"] if direct else None,
                       direct_decisive=direct[j]["decisive"] if direct else None,
                       fibre_eps0=paper[j]["fibre"] if paper else None,
                       eps0_decisive=paper[j]["decisive"] if paper else None,
                       scale_shrink_lambda=finite(lam[j]), zero_gain=zero_gain)
            margins = [x for x in (r["margin_decades"], dv and dv.get("margin_decades")) if x is not None]
            row["margin_decades"] = min(margins) if margins else None
            out.append(row)
    decided = [r for r in out if r["decided"]]
    disagree = [r for r in out if r["routes_agree"] is False]
    per_row = sorted({r["fibre"] for r in out})
    eps0 = sorted({r["fibre_eps0"] for r in out if r["fibre_eps0"] is not None})
    generic = norm_map_fibre(m["norm"], eps, H_dv, int(w.d_model))
    paper_per_token = _formula("recovery-ambiguity-per-token", w.arch)
    lam_min = min(lambdas) if eps > 0 else None
    inputs["rows"] = (f"rows {rows_sel} of every layer (the unequilibrated 'direct' Jacobian SVD, shown only to "
                      "say why the Jacobian is equilibrated, and the eps-free count, for layer 0 only)")
    details = {"rows": out, "paper_per_token": paper_per_token, "norm": m, "generic_fibre_formula": generic,
               "per_token_eps0": eps0, "scale_shrink_lambda_min": finite(lam_min),
               "exact_statement": (
                   f"{N} with eps > 0 forgets " + ("only the all-ones shift (centring): "
                                                   "r -> r / sqrt(r^2/d + eps) is strictly increasing, so the "
                                                   "scale of the centred row is kept" if m["norm"] == "layernorm"
                                                   else "nothing: u -> u / sqrt(|u|^2/d + eps) is injective on "
                                                   "R^d (r -> r / sqrt(r^2/d + eps) is strictly increasing)")
                   + f"; with every gain non-zero the per-token fibre is H d_v - rank W_O + "
                     f"dim(row W_O cap ker N') = {generic} when W_O has rank d_model; at eps = 0 (the paper's "
                     f"norm) the scale is lost too: {eps0} per token"),
               "routes": "per row: the rank of the closed-form Jacobian (equilibrated when eps > 0: P W_O^T, "
                         "decided by a Cholesky certificate where one goes through, else a float64 SVD) and the derived count H d_v + k - rank [W_O; B^T] with B the norm's exact kernel; "
                         "a row is decided when both are decisive and agree",
               "note": (f"the scale direction is shrunk by lambda = eps / (mean square + eps), smallest "
                        f"{lam_min:.3g} over the sampled rows: recovering it amplifies errors by up to "
                        f"{1 / lam_min:.3g}" if lam_min else "eps = 0: the scale direction is in the kernel")}
    margins = [r["margin_decades"] for r in out if r["margin_decades"] is not None]
    scope = Scope("model", f"every layer of the model ({len(idx)}), rows {rows_sel} of each at n = {n}",
                  tuple(f"layer {i}" for i in idx))
    common = dict(margin=min(margins) if margins else None, inputs=inputs, details=details, scope=scope,
                  hypothesis_checks=(hyp,), margin_meaning="smallest distance (decades) of a singular value from "
                  "its cut, over the sampled rows and both routes",
                  tolerance=Tolerance(out[0]["cut"] or 0.0, "float64 rank cut max(m, n) eps sigma_max of each row "
                                      "Jacobian (row 0 of layer 0 shown) and of each [W_O; B^T]; a decision counts "
                                      "when the singular values sit at least 1 decade from the cut and the two "
                                      "routes agree", "absolute (singular value)"))
    undecided = sorted({r["layer"] for r in out if not r["decided"]})
    if disagree:
        bad = sorted({r["layer"] for r in disagree})
        s = (f"the Jacobian rank and the derived count disagree at layers {bad} (fibres "
             f"{[(r['fibre'], r['derived_fibre']) for r in disagree][:4]}): no verdict")
        return [record(ctx, "thm-recovery", "fibre-ln", Verdict.INCONCLUSIVE, s, **common),
                record(ctx, "thm-7.3", "nonidentifiable-ln", Verdict.INCONCLUSIVE, s, **common)]
    v, wrong = count_verdict(out, paper_per_token)
    what = f"{N} with {eps_text(ctx)}"
    if v is Verdict.FAILS:
        s = (f"the map the MLP sees, Z -> {N}(X + Z W_O + b_O) ({what}), has a per-token fibre of {per_row} "
             f"(tangent dimension at {len(out)} sampled rows, "
             + ("counted from the norm's exact kernel: a gain is exactly 0" if any(r["zero_gain"] for r in out)
                else "Jacobian and derived count agree") + "), so "
             f"{per_row[0] * n} per sequence, not the paper's (H-1)d_k = {paper_per_token} per token "
             f"(the eps-free norm: {eps0})")
    elif v is Verdict.INCONCLUSIVE:
        s = f"fibre ranks undecided at layers {undecided}"
    else:
        s = f"per-token fibre (H-1)d_k = {paper_per_token} at every sampled row ({what})"
    ev = [record(ctx, "thm-recovery", "fibre-ln", v, s, counterexample=(
        {"per_token": per_row, "paper_per_token": paper_per_token, "per_token_eps0": eps0} if wrong else None),
        **common)]
    zero = [r for r in decided if r["fibre"] == 0]
    if zero:
        v, s = Verdict.FAILS, (
            f"the MLP's input determines the head outputs at layers {sorted({r['layer'] for r in zero})}: "
            f"Z -> {N}(X + Z W_O + b_O) has fibre 0 at the sampled rows ({what}: "
            + ("injective on rows" if m["norm"] == "rmsnorm" else "only the shift is lost, and W_O misses it")
            + f"; only the eps-free norm would lose {eps0} per token)"
            + (f"; the scale direction is shrunk by lambda >= {lam_min:.2g}, so recovering it amplifies "
               f"errors by up to {1 / lam_min:.2g}" if lam_min else ""))
    elif undecided:
        v, s = Verdict.INCONCLUSIVE, f"fibre ranks undecided at layers {undecided}"
    else:
        lost = ("the all-ones shift" + ("" if eps > 0 else " and the scale")) if m["norm"] == "layernorm" \
            else "the scale"
        v, s = Verdict.SUPPORTED, (f"from {N}(X + MHA(X) + b_O) with X and W_O known the head outputs are "
                                   f"determined only up to {per_row} direction(s) per token at every layer "
                                   f"({N} forgets {lost}; {what}): non-identifiable, but by {per_row} per "
                                   "token, not (H-1)d_k")
    ev.append(record(ctx, "thm-7.3", "nonidentifiable-ln", v, s, counterexample=(
        {"layers": sorted({r["layer"] for r in zero})} if zero else None), **common))
    return ev


@producer("thm-recovery", kind="numeric", name="recovery-fibres-measured", needs_model=True, honours_layers=True, share="sec7", cost=6)
def check_recovery(ctx: Context) -> list[Evidence]:
    """Fibre dimension of each named map (summation, Z -> Z W_O, the map into the MLP) against the formulas."""
    return [e for e in _cached(ctx) if e.claim == "thm-recovery"]


@producer("thm-7.3", kind="numeric", name="head-identifiability", needs_model=True, honours_layers=True, share="sec7", cost=0.1)
def check_nonidentifiability(ctx: Context) -> list[Evidence]:
    """Are per-head outputs identifiable from each named map's output? (fibre > 0 means no)."""
    return [e for e in _cached(ctx) if e.claim == "thm-7.3"]


#: which reading each record is about (the map whose fibre it measures)
_READINGS = {"fibre-summation": "thm-recovery/sum", "nonidentifiable-summation": "thm-7.3/sum",
             "fibre-wo": "thm-recovery/wo", "nonidentifiable-wo": "thm-7.3/wo",
             "fibre-ln": "thm-recovery/mlp-input", "nonidentifiable-ln": "thm-7.3/mlp-input"}


def _cached(ctx: Context) -> list[Evidence]:
    import dataclasses

    if "sec7" not in ctx.cache:
        ctx.cache["sec7"] = [dataclasses.replace(e, reading=_READINGS[e.producer])
                             for e in _summation(ctx) + _wo(ctx) + _ln(ctx)]
    return ctx.cache["sec7"]
