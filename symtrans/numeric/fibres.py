"""The fibres of the maps of §7: summation, ``Z -> Z W_O`` and the norm in front of the MLP (the mathematics).

The producers of :mod:`symtrans.producers.sec7` (thm-recovery, thm-7.3) and
:mod:`symtrans.producers.sec8` (pgop) measure with these functions; they hold no
verdict. Each count names its map (the paper's n(H-1)d_k is the fibre of the first):

* **summation** ``(Y^1, ..., Y^H) -> sum_h Y^h`` on ``(R^{n x d_v})^H``: as a matrix
  on vec form it is ``I_{n d_v} (x) 1_H^T``; its rank is ``n d_v * rank(1_H^T)``
  by the Kronecker rank identity, with ``rank(1_H^T)`` measured numerically;
* **W_O** ``Z -> Z W_O`` on ``R^{n x H d_v}`` with the real stacked W_O: the matrix is
  ``I_n (x) W_O^T``, rank ``n rank(W_O)``, fibre ``n (H d_v - rank W_O)``;
* **the MLP's input** ``Z -> N(X + Z W_O + b_O)``: per-row tangent fibres from the
  closed-form row Jacobian (:func:`ln_row_fibres`) and from the norm's exact kernel
  (:func:`derived_row_fibres`).

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

from symtrans.numeric.wo import stacked_wo
from symtrans.precision import finite

__all__ = ["summation_fibre", "dense_summation_fibre", "wo_fibre", "recover_heads", "ln_row_fibres", "ln_row_jacobians",
           "equilibrated_rank", "eps_free_row_ranks", "norm_kernel", "derived_row_fibres", "norm_map_fibre", "norm_input", "scale_sq"]


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
                  norm: str = "layernorm", gain: str = "ln1_w", equilibrate: bool = False,
                  storage_dtype: Any = "float64", equilibrated: Any = None) -> list[dict[str, Any]]:
    """Per-row tangent fibre of ``z_i -> N(x_i + z_i W_O + b_O)``: H d_v - rank J_i, J_i in closed form.

    ``N`` is LayerNorm or RMSNorm (``norm``) with the gain ``layer[gain]``
    and ``eps``; ``equilibrate`` (every gain non-zero) ranks, for every row,
    the row's Jacobian left-multiplied by an invertible matrix (see
    :func:`ln_row_jacobians`), at the precision ``storage_dtype`` W_O is
    stored in: with ``eps > 0`` that is ``P W_O^T`` for every row
    (:func:`equilibrated_rank`; ``equilibrated`` is that decision, ``(record, low,
    high)`` as :func:`~symtrans.numeric.wo.wo_rank_record` returns it, when the
    caller already holds it, :func:`symtrans.numeric.wo.wo_rank`); at ``eps = 0``
    it is each row's own (:func:`eps_free_row_ranks`). Unequilibrated
    Jacobians are ranked at float64 computation precision. An equilibrated row
    carries ``fibre_interval``, the fibres the rank's decisive band leaves possible.

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
    >>> r = ln_row_fibres(X, Z, lay, [0], equilibrate=True, storage_dtype="float32")[0]  # eps = 0, per row
    >>> r["fibre"], r["fibre_interval"], r["precision"][:24]
    (2, [2, 2], 'float32 storage rounding')
    """
    from symtrans.numeric.linalg import numerical_ranks

    W = stacked_wo(layer["W_O"])
    bands: list[Any] = [None] * len(rows)
    if equilibrate and rows and eps > 0:
        # the equilibrated J_i is (1 / s_i) diag(g) P W_O^T (P = I for RMSNorm); left-multiplied by the invertible
        # s_i diag(g)^{-1} (every gain non-zero) it is P W_O^T, the same for every row: one decision serves all
        if equilibrated is None:
            from symtrans.numeric.wo import wo_rank_record

            equilibrated = wo_rank_record(W, storage_dtype, centred=norm == "layernorm")
        rec, low, high = equilibrated
        recs, bands = [rec] * len(rows), [(low, high)] * len(rows)
    elif equilibrate and rows:  # eps = 0: each row's own quotient (its kernel holds the row's direction)
        free = eps_free_row_ranks(X, Z, layer, rows, norm=norm, storage_dtype=storage_dtype)
        direct = [k for k, r in enumerate(free) if r is None]  # not differentiable there: the closed form, as is
        dj = numerical_ranks(ln_row_jacobians(X, Z, layer, [rows[k] for k in direct], eps, norm=norm, gain=gain)) \
            if direct else []
        recs = [r[0] if r is not None else dj[direct.index(k)] for k, r in enumerate(free)]
        bands = [r[1:] if r is not None else None for r in free]
    else:
        recs = numerical_ranks(ln_row_jacobians(X, Z, layer, rows, eps, norm=norm, gain=gain))
    out = []
    H_dv = int(W.shape[0])
    for i, rec, band in zip(rows, recs, bands):
        out.append({"row": i, "rank_J": rec.rank, "fibre": H_dv - rec.rank, "decisive": rec.decisive,
                    "margin_decades": finite(rec.margin), "sigma_above": finite(rec.sigma_above),
                    "sigma_below": finite(rec.sigma_below), "cut": finite(rec.cut), "precision": rec.precision,
                    "fibre_interval": [H_dv - band[1], H_dv - band[0]] if band is not None else None})
    return out


def eps_free_row_ranks(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], *, norm: str = "layernorm",
                       storage_dtype: Any = "float64") -> list[Any]:
    """Per row, the rank of the eps-free norm's equilibrated Jacobian at W_O's storage precision (record, low, high).

    At ``eps = 0`` the row Jacobian is ``(1/s_i) diag(g) Pi_i W_O^T`` with
    ``Pi_i`` the projector off the norm's exact kernel at the row
    (:func:`norm_kernel`: 1 and the centred row ``c_i`` for LayerNorm, the row
    ``u_i`` for RMSNorm); with every gain non-zero its rank is that of
    ``W_O B_i``, ``B_i`` an orthonormal basis of the kernel's complement, which
    :func:`~symtrans.numeric.wo.wo_rank_record` decides at W_O's storage cut (the
    rounding ``E`` of W_O moves ``W_O B_i`` by ``E B_i``, ``||E B_i|| <= ||E||``),
    as every W_O rank is decided. None for a row where the norm is not
    differentiable (``c_i = 0`` or ``u_i = 0``).

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> lay = {"W_O": torch.randn(2, 3, 6, dtype=torch.float64, generator=g), "b_O": torch.zeros(6, dtype=torch.float64)}
    >>> X, Z = torch.randn(2, 6, dtype=torch.float64, generator=g), torch.randn(2, 6, dtype=torch.float64, generator=g)
    >>> [r[0].rank for r in eps_free_row_ranks(X, Z, lay, [0, 1])]  # rank W_O = 6, less the kernel's 2 directions
    [4, 4]
    >>> [r[0].rank for r in eps_free_row_ranks(X, Z, lay, [0], norm="rmsnorm")]
    [5]
    """
    from symtrans.numeric.wo import wo_rank_record

    W = stacked_wo(layer["W_O"])
    u = _row_sums(X, Z, layer, rows)
    out: list[Any] = []
    for k in range(len(rows)):
        K = norm_kernel(u[k], 0.0, norm)
        out.append(None if K is None else wo_rank_record(W, storage_dtype, off=K))
    return out


def equilibrated_rank(W: Any, norm: str = "layernorm", storage_dtype: Any = "float64") -> Any:
    """Rank record of ``P W^T`` (LayerNorm; ``W^T`` for RMSNorm), every row's equilibrated norm Jacobian.

    ``W`` is the stacked ``W_O`` (H d_v x d), stored in ``storage_dtype``. The rank is W_O's own
    (RMSNorm) or W_O's modulo the centring shift (LayerNorm: ``rank P W^T = rank W P``), decided where
    every W_O rank is decided: :func:`~symtrans.numeric.wo.wo_rank_record`, at W_O's storage precision
    (a Cholesky certificate of full rank where one goes through, else the SVD). At a float64 cut, the
    rounding of a stored float32 W_O moved by an element of G (a head's zero rows mixed with the others) is
    read as rank: the verdict would follow the element, not the function.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> W = torch.randn(40, 40, generator=g, dtype=torch.float64)
    >>> r = equilibrated_rank(W)
    >>> r.rank, r.precision
    (39, 'float64 storage rounding (Cholesky certificate)')
    >>> W[:2] = 0  # W of rank 38, and so P W^T: the certificate declines, the SVD decides
    >>> r = equilibrated_rank(W, storage_dtype="float32")
    >>> r.rank, r.precision
    (38, 'float32 storage rounding')
    >>> equilibrated_rank(torch.randn(40, 40, generator=g, dtype=torch.float64), "rmsnorm").rank
    40
    """
    from symtrans.numeric.wo import wo_rank_record

    return wo_rank_record(W, storage_dtype, centred=norm == "layernorm")[0]


def _projected_wt(W: Any, norm: str) -> Any:
    """``P W^T`` for LayerNorm (``P = I - 1 1^T / d`` centres each column of ``W^T``), ``W^T`` for RMSNorm."""
    Wt = W.T  # [d, H d_v]
    return Wt - Wt.mean(0, keepdim=True) if norm == "layernorm" else Wt


def _row_sums(X: Any, Z: Any, layer: dict[str, Any], rows: list[int]) -> Any:
    """The norm's argument per row: ``u_i = x_i + z_i W_O + b_O``."""
    return X[rows] + Z[rows] @ stacked_wo(layer["W_O"]) + layer["b_O"]


def norm_input(X: Any, Z: Any, layer: dict[str, Any], rows: list[int], norm: str) -> Any:
    """What the norm scales, per row: ``u_i`` (:func:`_row_sums`) centred for LayerNorm (``c_i``), as is for RMSNorm.

    Examples
    --------
    >>> import torch
    >>> lay = {"W_O": torch.zeros(1, 2, 3, dtype=torch.float64), "b_O": torch.zeros(3, dtype=torch.float64)}
    >>> X = torch.tensor([[1.0, 2.0, 6.0]], dtype=torch.float64)
    >>> norm_input(X, torch.zeros(1, 2, dtype=torch.float64), lay, [0], "layernorm").tolist()
    [[-2.0, -1.0, 3.0]]
    """
    u = _row_sums(X, Z, layer, rows)
    return u - u.mean(-1, keepdim=True) if norm == "layernorm" else u


def scale_sq(c: Any, eps: float) -> Any:
    """``s_i^2 = mean(c_i^2) + eps`` per row of the norm's input ``c``: the norm divides row i by ``s_i``.

    Examples
    --------
    >>> import torch
    >>> scale_sq(torch.tensor([[-2.0, -1.0, 3.0]], dtype=torch.float64), 0.5).tolist()
    [5.166666666666667]
    """
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
    c = norm_input(X, Z, layer, rows, norm)  # [r, d]
    base = _projected_wt(W, norm)  # P W_O^T or W_O^T
    s = scale_sq(c, eps).sqrt()[:, None]  # [r, 1]
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
                       norm: str = "layernorm", wo_record: Any = None, gain: str | None = None,
                       storage_dtype: Any = "float64") -> list[dict[str, Any]]:
    """The same per-row fibre without the Jacobian: ``H d_v + k - rank [W_O; B^T]``, B the norm's kernel (k columns).

    ``ker J_i = {dz : dz W_O in ker N'}``, so its dimension is
    ``(H d_v - rank W_O) + dim(row W_O cap ker N')``, and
    ``dim(A cap B) = dim A + dim B - dim(A + B)`` gives
    ``H d_v + k - rank [W_O; B^T]`` with ``B`` from :func:`norm_kernel` (exact)
    and one rank of the stacked matrix (``W_O`` scaled to unit Frobenius norm; rows with the same
    kernel share it) at the precision ``storage_dtype`` W_O is stored in: rounding W_O moves ``Wn`` by at
    most ``u ||Wn||_F = u`` (Weyl), and the cut is :func:`~symtrans.numeric.linalg.storage_cut` of
    ``||[Wn; B]||_F = sqrt(1 + k)``, which bounds that and the float64 SVD's error.
    With ``gain`` (the gain tensor's name in ``layer``) the coordinates whose gain is exactly 0 enter the
    kernel (:func:`norm_kernel`, ``eps > 0``); without it every gain is taken as non-zero.

    ``wo_record`` (a :class:`~symtrans.numeric.linalg.RankRecord` from an SVD or a certificate of the
    stacked W_O, e.g. its storage rank) saves the SVD when W_O has full column
    rank d: then ``[Wn; B]`` has rank d too, with ``sigma_min([Wn; B]) >=
    sigma_min(Wn)`` (appending rows only adds ``B^T B >= 0`` to the Gram matrix), so the
    margin from the same cut is at least ``log10(sigma_min(Wn) / cut)``. A
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
    >>> lay["W_O"][0, :2] *= 1e-9  # below float32's rounding: rank 4, the all-ones row out of W_O's row space
    >>> [derived_row_fibres(X, Z, lay, [0], 1e-6, storage_dtype=t)[0]["fibre"] for t in ("float64", "float32")]
    [1, 2]
    """
    import math

    import torch

    from symtrans.numeric.linalg import storage_cut, storage_rank_from, svdvals

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
        norm_stacked = math.sqrt(1.0 + B.shape[0])  # ||[Wn; B]||_F: Wn has unit norm, B orthonormal rows
        bound = _full_column_bound(wo_record, fro, storage_cut(norm_stacked, storage_dtype, shape)[0], shape)
        if bound is not None:
            out.append({"row": i, "fibre": W.shape[0] + B.shape[0] - W.shape[1], "kernel_dim": int(B.shape[0]),
                        "rank_stacked": int(W.shape[1]), "decisive": True, "margin_decades": finite(bound),
                        "method": "bound from W_O's rank record: full column rank, sigma_min([Wn; B]) >= "
                                  "sigma_min(Wn); the margin is a lower bound"})
            continue
        rec = next((r for b, r in seen if b.shape == B.shape and torch.equal(b, B)), None)
        if rec is None:
            rec = storage_rank_from(svdvals(torch.cat([Wn, B])).cpu(), norm_stacked, storage_dtype, shape)
            seen.append((B, rec))
        out.append({"row": i, "fibre": W.shape[0] + B.shape[0] - rec.rank, "kernel_dim": int(B.shape[0]),
                    "rank_stacked": rec.rank, "decisive": rec.decisive, "margin_decades": finite(rec.margin),
                    "method": f"SVD of [Wn; B], cut at W_O's {rec.precision}"})
    return out


def _full_column_bound(rec: Any, fro: float, cut: float, shape: tuple[int, int]) -> float | None:
    """Lower bound (decades) on the margin of ``[W / fro; B]`` from ``cut``, from a rank record of W; None unless >= 1.

    Only when ``rec`` says W has full column rank (its smallest kept singular
    value, or a certificate's proved lower bound, is at most sigma_min(W)).
    """
    import math

    from symtrans.precision import decided

    if rec is None or rec.rank != shape[1] or rec.rank != min(rec.shape) or not rec.sigma_above or not cut > 0:
        return None
    margin = math.log10(rec.sigma_above / fro / cut)
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
