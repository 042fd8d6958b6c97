"""Rank decisions with their records, computed with torch; the rules they apply live in symtrans.precision.

A rank of a real float matrix means nothing without the cut that decided it.
:func:`numerical_rank` returns a :class:`RankRecord` with the dtype, the
tolerance and why, the singular values on both sides of the cut, and the
margin: how many decades the nearest singular value sits from the cut.

Examples
--------
>>> import torch
>>> M = torch.tensor([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]], dtype=torch.float64)
>>> rec = numerical_rank(M)
>>> rec.rank, rec.dtype
(1, 'float64')
>>> rec.margin > 1  # decades between the cut and the nearest singular value
True
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

__all__ = ["RankRecord", "numerical_rank", "numerical_ranks", "affine_rank", "default_rtol",
           "rank_from_singular_values", "storage_rank", "storage_rank_from", "storage_ranks", "storage_cut", "unit_roundoff", "full_row_rank_certificate",
           "full_rank_certificate", "certified_rank", "gram_matrix", "DECISIVE_MARGIN",
           "ones_complement", "orthogonal_complement", "new_table",
           "check_storage_dtype", "rank_interval"]

# the precision of each dtype, the rank cut, the decisive band and RankRecord live in symtrans.precision
from symtrans.precision import (DECISIVE_MARGIN, EPS64, U64, RankRecord, decided,  # noqa: E402,F401
                                 dtype_name, float_dtype_name, rank_rtol, unit_roundoff)

#: unit roundoff of float64 (round to nearest)
_U = U64


def _gamma(k: int) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``: the relative error bound of a k-term float64 sum or dot product."""
    return k * _U / (1 - k * _U)


def default_rtol(dtype: Any, shape: tuple[int, int]) -> tuple[float, str]:
    """The default relative cut ``max(m, n) * eps``, with the reason (:func:`symtrans.precision.rank_rtol`).

    Examples
    --------
    >>> import torch
    >>> rtol, why = default_rtol(torch.float64, (10, 4))
    >>> import math
    >>> rtol == 10 * math.ulp(1.0)  # float64's eps, by Python's own route
    True
    """
    return rank_rtol(dtype, shape)


def svdvals(M: Any) -> Any:
    """Singular values of ``M`` (batched over leading axes), computed on its tall orientation.

    The values of M and M^T are the same; LAPACK's path for a wide matrix
    (n < d) measured about 3x slower here than for its transpose.

    Examples
    --------
    >>> import torch
    >>> M = torch.tensor([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0]], dtype=torch.float64)
    >>> svdvals(M).tolist()
    [4.0, 3.0]
    """
    import torch

    return torch.linalg.svdvals(M.mT if M.shape[-2] < M.shape[-1] else M)


def gram_matrix(M: Any) -> Any:
    """``M M^T`` in float64 through BLAS ``syrk`` where it can (a CPU matrix): half the flops of a GEMM.

    numpy hands ``a @ a.T`` of one buffer to ``syrk``, which computes one
    triangle and mirrors it; torch always runs a full GEMM. Every entry is
    still one float64 dot product of two rows (the error bound of a Gram
    product holds for any summation order). Other devices and dtypes use torch.

    Examples
    --------
    >>> import torch
    >>> M = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> G = gram_matrix(M)
    >>> float((G - M @ M.T).abs().max()) < 1e-13, bool((G == G.T).all())  # rounding differs, entry by entry
    (True, True)
    """
    import torch

    if M.device.type != "cpu" or M.dtype != torch.float64 or M.ndim != 2:
        return M @ M.mT
    a = M.detach().contiguous().numpy()
    return torch.from_numpy(a @ a.T)


#: bytes from which :func:`new_table` allocates through NumPy: two transparent huge pages (2 MiB each)
_HUGE_PAGED_BYTES = 4 * 2 ** 20


def new_table(shape: tuple[int, ...], like: Any) -> Any:
    """An uninitialised tensor of ``shape``, with ``like``'s dtype and device, for a large fresh result.

    On the CPU, a result of 4 MiB or more is allocated by NumPy. NumPy asks the kernel for transparent huge pages
    (``madvise``), where torch's allocator leaves the pages at 4 KiB. Writing a fresh 94 MB table (the bundled
    model's float64 word table) then costs 15 ms, not 48 ms: the rest was page faults, 23,000 of them. Nothing
    process-wide changes; other devices, other dtypes and small tensors use ``torch.empty``. NumPy keeps
    the buffer alive as long as the tensor, which cannot be resized (write into it with ``out=`` at its shape).

    Examples
    --------
    >>> import torch
    >>> src = torch.randn(2048, 512, dtype=torch.float64)
    >>> out = new_table(src.shape, src).copy_(src)
    >>> out.dtype, out.shape == src.shape, bool((out == src).all())
    (torch.float64, True, True)
    >>> new_table((2, 3), src).shape  # small: torch.empty
    torch.Size([2, 3])
    """
    import torch

    dt = like.dtype
    if like.device.type != "cpu" or dt not in (torch.float64, torch.float32) \
            or math.prod(shape) * like.element_size() < _HUGE_PAGED_BYTES:
        return torch.empty(shape, dtype=dt, device=like.device)
    import numpy as np

    return torch.from_numpy(np.empty(shape, dtype=np.float64 if dt == torch.float64 else np.float32))


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` (batched as ``@`` broadcasts), CPU float blocks through NumPy's BLAS: the same product, faster on
    the small and skinny blocks of the group solves.

    torch's CPU build calls MKL, which on the AMD EPYC hosts this project runs on multiplies float64 stacks of
    384 x 32 blocks by 32 x 32 ones, or a 1536 x 384 block by 384 x 9, 1.3-2.5x slower than NumPy's OpenBLAS,
    and large products no faster (``benchmarks/bench_matmul.py``; float32 about even but for skinny products).
    Every entry is still one dot product in the inputs' dtype (its error bound holds for any summation order).
    An inner dimension of 1 (an outer product, which NumPy does not hand to BLAS), other devices and dtypes,
    tensors that need a gradient and anything that is not a torch tensor (a SymPy matrix, a monomial matrix)
    use ``@``.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> a = torch.randn(3, 7, 5, dtype=torch.float64, generator=g)
    >>> b = torch.randn(5, 2, dtype=torch.float64, generator=g)
    >>> c = matmul(a, b)
    >>> c.shape, float((c - a @ b).abs().max()) < 1e-14
    (torch.Size([3, 7, 2]), True)
    """
    torch = sys.modules.get("torch")  # not imported: no tensor to route (a SymPy product imports no torch)
    if torch is None or not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) \
            or a.device.type != "cpu" or b.device.type != "cpu" or a.dtype != b.dtype \
            or a.dtype not in (torch.float64, torch.float32) or a.shape[-1] < 2 or a.ndim < 2 or b.ndim < 2 \
            or a.requires_grad or b.requires_grad:
        return a @ b
    import numpy as np

    with np.errstate(all="ignore"):  # as torch's @: a NaN or Inf product is a value, not a warning (callers check)
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))


def rank_from_singular_values(s: Any, shape: tuple[int, int], dtype: Any, rtol: float | None = None,
                              reason: str | None = None, scale: float | None = None) -> RankRecord:
    """Decide the rank from singular values ``s`` (descending) of a matrix of ``shape``.

    The cut is ``rtol * scale``; ``scale`` defaults to ``s[0]`` (sigma_max).
    Pass a larger ``scale`` when the matrix was computed from a bigger one
    (a centred matrix: its rounding error is relative to the uncentred one).

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([3.0, 1.0, 1e-20], dtype=torch.float64)
    >>> rank_from_singular_values(s, (3, 3), torch.float64).rank
    2
    >>> rank_from_singular_values(torch.tensor([1e-15], dtype=torch.float64), (3, 3), torch.float64,
    ...                           scale=10.0).rank
    0
    """
    if rtol is None:
        rtol, why = default_rtol(dtype, shape)
    else:
        why = reason or f"relative cut {rtol:.3g} x sigma_max set by the caller"
    vals = [float(v) for v in (s.tolist() if hasattr(s, "tolist") else s)]  # tolist: one call, not one per value
    smax = vals[0] if vals else 0.0
    if scale is not None and scale > smax:
        why += f"; the cut is relative to {scale:.3g}, sigma_max of the matrix this one was computed from"
        smax = float(scale)
    cut = rtol * smax
    r = sum(v > cut for v in vals) if smax > 0 else 0
    above = vals[r - 1] if r >= 1 else None
    below = vals[r] if r < len(vals) else None
    sides = []
    if above is not None and cut > 0:
        sides.append(math.log10(above / cut))
    if below is not None and cut > 0:
        sides.append(math.log10(cut / below) if below > 0 else math.inf)
    margin = min(sides) if sides else math.inf
    name = dtype_name(dtype)
    return RankRecord(rank=r, shape=(int(shape[0]), int(shape[1])), dtype=name,
                      cut=cut, rtol=rtol, tolerance_reason=why, sigma_max=smax, sigma_above=above,
                      sigma_below=below, margin=margin, precision=f"{name} computation")


def rank_interval(s: Any, cut: float) -> tuple[int, int]:
    """The ranks a cut leaves possible: ``(low, high)``, the decisive band applied to each singular value.

    ``low`` counts the singular values at least :data:`DECISIVE_MARGIN` decades
    above ``cut`` (kept whatever the rounding the cut models), ``high`` those
    not at least that far below it (possibly kept). The rank is decided when
    ``low == high``, which is exactly when :attr:`RankRecord.decisive` holds
    for the record of the same values and cut; otherwise every rank in
    ``[low, high]`` is consistent with the numbers. Quantities derived from a
    rank (a fibre, a contracted dimension) are decided when they are the same
    at both ends.

    Examples
    --------
    >>> rank_interval([1.0, 1e-3, 1e-9], 1e-6)
    (2, 2)
    >>> rank_interval([1.0, 3e-6, 1e-9], 1e-6)  # 3e-6 sits inside the band: rank 1 or 2
    (1, 2)
    >>> rank_interval([0.0, 0.0], 0.0), rank_interval([2.0], 0.0)
    ((0, 0), (1, 1))
    """
    vals = [float(v) for v in (s.tolist() if hasattr(s, "tolist") else s)]
    if not cut > 0:
        return sum(v > 0 for v in vals), sum(v > 0 for v in vals)
    low = sum(v > 0 and decided(math.log10(v / cut)) for v in vals)
    high = len(vals) - sum(v <= 0 or decided(math.log10(cut / v)) for v in vals)
    return low, high


def ones_complement(d: int, dtype: Any = None) -> Any:
    """An orthonormal basis of the complement of the all-ones vector in R^d (d x (d - 1)): QR of [1, e_0, ..., e_{d-2}].

    The one construction of 1^perp: a LayerNorm's centring P = B B^T, so a rank on 1^perp is read from
    ``B^T M`` with no rounding-level singular value standing for P's exact kernel.

    Examples
    --------
    >>> import torch
    >>> B = ones_complement(4)
    >>> tuple(B.shape), float((B.T @ torch.ones(4, dtype=B.dtype)).abs().max()) < 1e-15
    ((4, 3), True)
    >>> bool(torch.allclose(B @ B.T, torch.eye(4, dtype=B.dtype) - 0.25))
    True
    """
    import torch

    dtype = dtype or torch.float64
    first = torch.cat([torch.ones(d, 1, dtype=dtype), torch.eye(d, dtype=dtype)[:, : d - 1]], 1)
    return torch.linalg.qr(first).Q[:, 1:]


def orthogonal_complement(V: Any) -> Any:
    """An orthonormal basis (d x (d - k)) of the complement of the span of the k rows of ``V`` (rank k): complete QR.

    Examples
    --------
    >>> import torch
    >>> V = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 0.0, 0.0]], dtype=torch.float64)
    >>> B = orthogonal_complement(V)
    >>> tuple(B.shape), float((V @ B).abs().max()) < 1e-15, bool(torch.allclose(B.T @ B, torch.eye(2, dtype=B.dtype)))
    ((4, 2), True, True)
    """
    import torch

    V = torch.as_tensor(V)
    return torch.linalg.qr(V.T, mode="complete").Q[:, V.shape[0]:]


def numerical_rank(M: Any, *, rtol: float | None = None, reason: str | None = None) -> RankRecord:
    """Numerical rank of a matrix with its :class:`RankRecord` (SVD in the matrix's dtype).

    Examples
    --------
    >>> import torch
    >>> numerical_rank(torch.zeros(3, 2, dtype=torch.float64)).rank
    0
    """
    import torch

    M = torch.as_tensor(M)
    s = svdvals(M)
    return rank_from_singular_values(s, tuple(M.shape), M.dtype, rtol, reason)


def numerical_ranks(batch: Any, *, rtol: float | None = None, reason: str | None = None) -> list[RankRecord]:
    """Rank records for a batch ``[..., m, n]`` of matrices, one batched SVD.

    Examples
    --------
    >>> import torch
    >>> b = torch.stack([torch.eye(3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64)])
    >>> [r.rank for r in numerical_ranks(b)]
    [3, 0]
    """
    import torch

    batch = torch.as_tensor(batch)
    shape = tuple(batch.shape[-2:])
    svals = svdvals(batch).reshape(-1, min(shape)).cpu()
    return [rank_from_singular_values(s, shape, batch.dtype, rtol, reason) for s in svals]


def affine_rank(X: Any, *, rtol: float | None = None, reason: str | None = None) -> RankRecord:
    """Affine rank of the rows of ``X`` (dimension of their affine hull), via the centred matrix.

    ``arank(X) = rank(X - 1 x_1^T) = rank(X - 1 mean^T)``: subtracting the mean
    row instead of the first row spans the same difference space and is better
    conditioned. The cut is relative to sigma_max of ``X`` itself, not of the
    centred matrix: centring leaves a rounding error of about ``eps ||X||``, so
    rows equal up to rounding have affine rank 0, not a rank read from noise.

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], dtype=torch.float64)
    >>> affine_rank(X).rank, numerical_rank(X).rank
    (1, 1)
    >>> affine_rank(X + torch.tensor([0.0, 5.0], dtype=torch.float64)).rank
    1
    >>> row = torch.tensor([[0.1, 0.2, 0.3]], dtype=torch.float64)
    >>> affine_rank(torch.cat([row, row * 3 / 3, row + 0.1 - 0.1])).rank  # equal up to rounding
    0
    """
    import torch

    X = torch.as_tensor(X)
    C = X - X.mean(0, keepdim=True)
    s = svdvals(torch.stack([X, C])).cpu()
    return rank_from_singular_values(s[1], tuple(C.shape), C.dtype, rtol, reason, scale=float(s[0][0]))


def storage_cut(frobenius_norm: float, storage_dtype: Any, shape: tuple[int, int]) -> tuple[float, str]:
    """The singular-value cut at storage precision: the Weyl bound of rounding to ``storage_dtype``.

    Rounding each entry to the storage dtype perturbs the matrix by ``E`` with
    ``|E_ij| <= u |W_ij|`` (``u = eps/2``, the unit roundoff), so
    ``||E||_2 <= ||E||_F <= u ||W||_F``, and by Weyl's inequality no singular
    value moves by more than that. The float64 SVD adds at most
    ``max(m, n) * eps64 * ||W||_2 <= max(m, n) * eps64 * ||W||_F``. The cut
    depends on the matrix's size and norm only, never on its condition number.

    Examples
    --------
    >>> import torch
    >>> cut, why = storage_cut(1.0, torch.float32, (4, 4))
    >>> import math
    >>> u32 = float(torch.tensor(1.0, dtype=torch.float32).nextafter(torch.tensor(2.0)).item()) - 1  # eps32
    >>> abs(cut - (u32 / 2 + 4 * math.ulp(1.0))) < 1e-30
    True
    >>> "Weyl" in why
    True
    """

    name = float_dtype_name(storage_dtype)
    u = unit_roundoff(name)
    svd = max(shape) * EPS64
    cut = (u + svd) * float(frobenius_norm)
    why = (f"rounding to {name} moves every singular value by at most u ||W||_F (Weyl; u = eps/2 = {u:.3g}) "
           f"plus the float64 SVD error max(m, n) eps64 ||W||_F: cut = {cut:.3g} for ||W||_F = "
           f"{float(frobenius_norm):.4g}; singular values below it cannot be told from 0 in the stored numbers")
    return cut, why


def check_storage_dtype(dtype: Any, what: str) -> None:
    """Refuse, in one line, a stored dtype the loader does not model (float8, integers, ...).

    The dtypes modelled are those :func:`symtrans.precision.float_dtype_name` knows (their unit roundoff
    sets every storage-precision rank cut).

    Examples
    --------
    >>> check_storage_dtype("BF16", "w")
    >>> check_storage_dtype("F8_E4M3", "tensor 'w'")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: tensor 'w' is stored as F8_E4M3, a storage dtype symtrans does not model (float64, float32, float16, bfloat16)
    """
    from symtrans.precision import STORAGE_DTYPES, float_dtype_name

    try:
        float_dtype_name(dtype)
    except (ValueError, TypeError):
        from symtrans.errors import SymtransError
        from symtrans.validate import terminal_safe

        raise SymtransError(f"{what} is stored as {terminal_safe(dtype_name(dtype))[:40]}, a storage "
                            f"dtype symtrans does not model ({', '.join(STORAGE_DTYPES)})") from None


def storage_rank(M: Any, storage_dtype: Any) -> RankRecord:
    """Rank of a stored weight matrix at the precision it was stored in (SVD in float64).

    Singular values above the cut of :func:`storage_cut` are non-zero for every
    matrix that rounds to the stored one; those below it cannot be told from
    zero at storage precision. The record's ``decisive`` applies the one
    decisiveness rule (:data:`DECISIVE_MARGIN` decades on both sides).

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> U, _ = torch.linalg.qr(torch.randn(64, 64, generator=g, dtype=torch.float64))
    >>> s = torch.logspace(0, -5, 64, dtype=torch.float64)  # condition number 1e5
    >>> W = (U * s) @ U.T
    >>> rec = storage_rank(W.to(torch.float32), torch.float32)
    >>> rec.rank, rec.decisive, rec.precision
    (64, True, 'float32 storage rounding')
    >>> s[40:] = 1e-9  # trailing singular values below the float32 rounding bound
    >>> storage_rank(((U * s) @ U.T).to(torch.float32), torch.float32).rank
    40
    """
    import torch

    W = torch.as_tensor(M).to(torch.float64)
    shape = (int(W.shape[-2]), int(W.shape[-1]))
    return storage_rank_from(svdvals(W), float(torch.linalg.matrix_norm(W)), storage_dtype, shape)


def storage_rank_from(s: Any, norm: float, storage_dtype: Any, shape: tuple[int, int]) -> RankRecord:
    """The :func:`storage_rank` record of a matrix of ``shape`` from its float64 singular values and Frobenius norm.

    For callers that already hold the singular values (:func:`storage_ranks`' batch,
    :func:`symtrans.numeric.wo.wo_rank_of`'s heads): one rule, whichever factorisation computed them.

    Examples
    --------
    >>> import torch
    >>> rec = storage_rank_from(torch.tensor([2.0, 1e-12], dtype=torch.float64), 5 ** 0.5, "float32", (2, 2))
    >>> rec.rank, rec.precision
    (1, 'float32 storage rounding')
    """
    import torch

    cut, why = storage_cut(norm, storage_dtype, shape)
    smax = float(s[0]) if s.numel() else 0.0
    rec = rank_from_singular_values(s, shape, torch.float64, rtol=cut / smax if smax > 0 else 0.0, reason=why)
    return dataclasses.replace(rec, precision=f"{float_dtype_name(storage_dtype)} storage rounding")


def storage_ranks(batch: Any, storage_dtype: Any, *, certify: bool = False) -> list[Any]:
    """:func:`~symtrans.numeric.linalg.storage_rank` of every matrix of a batch ``[..., m, n]`` (one batched SVD).

    ``storage_dtype`` is one dtype for the whole batch or a sequence of one per matrix.

    With ``certify``, a matrix of full rank is first tried by
    :func:`~symtrans.numeric.linalg.full_rank_certificate` against the same
    storage cut (a Gram Cholesky instead of an SVD: about 3x cheaper for a
    square matrix); its record's ``sigma_above`` and margin are then proved
    lower bounds. The rest get the SVD.

    Examples
    --------
    >>> import torch
    >>> b = torch.stack([torch.eye(3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64)])
    >>> [(r.rank, r.precision) for r in storage_ranks(b, "float32")]
    [(3, 'float32 storage rounding'), (0, 'float32 storage rounding')]
    >>> [(r.rank, r.precision) for r in storage_ranks(b, "float32", certify=True)]
    [(3, 'float32 storage rounding (Cholesky certificate)'), (0, 'float32 storage rounding')]
    """
    import dataclasses

    import torch

    W = torch.as_tensor(batch).to(torch.float64)
    shape = (int(W.shape[-2]), int(W.shape[-1]))
    W = W.reshape(-1, *shape)
    norms = torch.linalg.matrix_norm(W).cpu()
    # one storage dtype for the batch, or one per matrix (a checkpoint may store its layers differently)
    dts = list(storage_dtype) if isinstance(storage_dtype, (list, tuple)) else [storage_dtype] * W.shape[0]
    if len(dts) != W.shape[0]:
        raise ValueError(f"{len(dts)} storage dtypes for {W.shape[0]} matrices")
    names = [float_dtype_name(d) for d in dts]
    out: list[Any] = [None] * W.shape[0]
    if certify:
        for k in range(W.shape[0]):
            rec = full_rank_certificate(W[k], margin=DECISIVE_MARGIN + 0.5,
                                        cut=storage_cut(float(norms[k]), dts[k], shape))
            if rec is not None:
                out[k] = dataclasses.replace(rec, precision=f"{names[k]} storage rounding (Cholesky certificate)")
    rest = [k for k in range(W.shape[0]) if out[k] is None]
    svals = svdvals(W[rest]).cpu() if rest else []
    for k, s in zip(rest, svals):
        out[k] = storage_rank_from(s, float(norms[k]), dts[k], shape)
    return out


def full_row_rank_certificate(M: Any, *, margin: float = 2.0, gram: Any = None,
                              cut: tuple[float, str] | None = None) -> RankRecord | None:
    """Prove that ``M`` (m x n, m <= n, float64) has full row rank, ``margin`` decades above the float64 cut, or None.

    A Cholesky factorisation of the Gram matrix ``G = fl(M M^T)`` shifted by
    ``s`` instead of an SVD of ``M`` (about 2.5x faster at m = n = 1024 here). If the
    floating-point Cholesky of ``fl(G - s I)`` runs to completion with factor R,
    then ``R^T R = G - s I + D + Delta`` with ``|Delta| <= gamma_{m+1} |R^T| |R|``
    (the backward error of Cholesky) and D the diagonal rounding of the shift,
    ``|D| <= u max|g_ii - s|``; with the rounding of the Gram matrix,
    ``|G - M M^T| <= gamma_n |M| |M|^T``, this gives

    ``sigma_min(M)^2 >= s - gamma_{m+1} ||R||_F^2 - u max|g_ii - s| - gamma_n ||M||_F^2``.

    The shift is chosen so that this lower bound puts ``sigma_min`` ``margin``
    decades above the cut ``max(m, n) eps sigma_max`` (``sigma_max <= ||M||_F``). Where
    Cholesky breaks down (``M`` rank-deficient or too ill-conditioned for the
    squared problem) the answer is None: the caller decides with an SVD.
    ``margin=0`` proves plain non-singularity (sigma_min above the cut); it
    assumes IEEE-754 float64 round-to-nearest and a BLAS that sums products
    (no Strassen), as :func:`~symtrans.certify.real.verified_det_sign` does.
    ``gram``, when given, is ``M @ M.T`` (:func:`gram_matrix`) already computed in float64 (any
    summation order: the bound holds for each); it is overwritten. ``cut``,
    when given, is ``(absolute cut, why)`` to measure the margin from instead
    (e.g. :func:`storage_cut`, for a rank at storage precision).
    The record's ``sigma_above`` and ``margin`` are these lower bounds, not
    measured singular values.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> rec = full_row_rank_certificate(torch.randn(20, 30, generator=g, dtype=torch.float64))
    >>> rec.rank, rec.decisive
    (20, True)
    >>> M = torch.randn(20, 30, generator=g, dtype=torch.float64)
    >>> M[5] = M[3] + M[7]  # rank 19: no certificate
    >>> full_row_rank_certificate(M) is None
    True
    """
    import torch

    M = torch.as_tensor(M)
    if M.dtype != torch.float64:
        raise ValueError(f"full_row_rank_certificate needs float64, got {M.dtype}")
    m, n = int(M.shape[0]), int(M.shape[1])
    if m == 0 or m > n:
        return None
    fro2 = float((M * M).sum()) * (1 + _gamma(m * n + 1))  # upper bound on ||M||_F^2 (a sum of m n squares)
    if not math.isfinite(fro2) or fro2 == 0:
        return None
    # the caller's cut, else an upper bound on the float64 cut max(m, n) eps sigma_max
    bound = float(cut[0]) if cut is not None else rank_rtol("float64", (m, n))[0] * math.sqrt(fro2)
    if not bound > 0:
        return None
    G = gram_matrix(M) if gram is None else gram
    if tuple(G.shape) != (m, m) or G.dtype != torch.float64:
        raise ValueError(f"gram must be the float64 {m} x {m} matrix M M^T, got {tuple(G.shape)} {G.dtype}")
    gram_err = _gamma(n) * fro2
    diag_max = float(G.diagonal().abs().max())
    # Cholesky's backward error is at most gamma_{m+1} ||R||_F^2 ~ gamma_{m+1} tr(G): budget for twice that
    chol_err = 2 * _gamma(m + 1) * diag_max * m
    target = (10.0 ** margin * bound) ** 2
    shift = 2 * (target + gram_err + chol_err + _U * diag_max)
    G.diagonal().sub_(shift)
    R, info = torch.linalg.cholesky_ex(G)
    if int(info) != 0:
        return None
    # a non-finite entry of R makes this sum non-finite (so does an overflow: then no certificate either)
    r_fro2 = float((R * R).sum()) * (1 + _gamma(m * m + 1))
    if not math.isfinite(r_fro2):
        return None
    # the last term covers underflow in the squares and products (each at most 2^-1074, m^2 + m n of them)
    lower = shift - _gamma(m + 1) * r_fro2 - _U * (diag_max + shift) - gram_err - (m * m + m * n) * 2.0 ** -1000
    if lower <= 0:
        return None
    smin = math.sqrt(lower)
    got = math.log10(smin / bound)
    if got < margin:
        return None
    how = ("full row rank proved by a shifted Cholesky factorisation of the Gram matrix M M^T (backward-error "
           "bounds of the Gram product and of Cholesky); sigma_above is a proved lower bound on sigma_min and "
           "sigma_max the upper bound ||M||_F, so the margin is a lower bound")
    if cut is not None:
        return RankRecord(rank=m, shape=(m, n), dtype="float64", cut=bound, rtol=bound / math.sqrt(fro2),
                          tolerance_reason=f"{cut[1]}; {how}", sigma_max=math.sqrt(fro2), sigma_above=smin,
                          sigma_below=None, margin=got, precision="Cholesky certificate")
    why = f"float64 computation: {how}; the cut is bounded above by max(m, n) eps ||M||_F"
    return RankRecord(rank=m, shape=(m, n), dtype="float64", cut=bound, rtol=rank_rtol("float64", (m, n))[0],
                      tolerance_reason=why, sigma_max=math.sqrt(fro2), sigma_above=smin, sigma_below=None,
                      margin=got, precision="float64 computation (Cholesky certificate)")


def full_rank_certificate(M: Any, *, margin: float = 2.0, cut: tuple[float, str] | None = None) -> RankRecord | None:
    """:func:`full_row_rank_certificate` of ``M`` or ``M^T``, whichever has fewer rows; the record in M's shape.

    Proves rank ``min(m, n)`` (or answers None) for a matrix of either
    orientation, with the same ``margin`` and ``cut`` arguments.

    Examples
    --------
    >>> import torch
    >>> M = torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    >>> r = full_rank_certificate(M)
    >>> r.rank, r.shape
    (4, (9, 4))
    >>> full_rank_certificate(torch.zeros(9, 4, dtype=torch.float64)) is None
    True
    """
    m, n = int(M.shape[0]), int(M.shape[1])
    rec = full_row_rank_certificate(M if m <= n else M.T, margin=margin, cut=cut)
    return None if rec is None else dataclasses.replace(rec, shape=(m, n))


def certified_rank(M: Any, *, margin: float = DECISIVE_MARGIN + 0.5) -> RankRecord:
    """Rank of ``M`` at float64 computation precision: a Cholesky proof of full rank where one goes through, else the SVD.

    :func:`full_row_rank_certificate` on the orientation with fewer rows
    (about 5x cheaper than an SVD for a 1024 x 1024 matrix here); its record
    has the proved lower bound on ``sigma_min`` and a margin of at least
    ``margin`` decades. Where it declines (rank-deficient, too ill-conditioned
    for the squared problem, not float64 on the CPU), :func:`numerical_rank`
    decides with measured singular values.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> M = torch.randn(40, 30, generator=g, dtype=torch.float64)
    >>> r = certified_rank(M)
    >>> r.rank, r.shape, r.precision
    (30, (40, 30), 'float64 computation (Cholesky certificate)')
    >>> M[:, 0] = M[:, 1]  # rank 29: the SVD decides
    >>> r = certified_rank(M)
    >>> r.rank, r.precision
    (29, 'float64 computation')
    """
    import torch

    M = torch.as_tensor(M)
    rec = None
    if M.dtype == torch.float64 and M.ndim == 2 and M.device.type == "cpu" and min(M.shape) > 0:
        rec = full_rank_certificate(M, margin=margin)
    return rec if rec is not None else numerical_rank(M)
