"""The stacked output projection W_O and its rank at storage precision: mathematics both producers read.

The numeric checks (:mod:`symtrans.checks.sec7`) and the exact certificates
(:mod:`symtrans.certify.producers`) both need each layer's stacked W_O and
its rank at the precision it was stored in; they share this module rather
than one producer module importing the other.

Examples
--------
>>> import torch
>>> tuple(stacked_wo(torch.zeros(12, 32, 384)).shape)
(384, 384)
"""

from __future__ import annotations

from typing import Any

__all__ = ["stacked_wo", "wo_storage_ranks", "wo_quotient_rank"]


def stacked_wo(W_O: Any) -> Any:
    """Stack per-head ``W_O [H, d_v, d_model]`` into ``[H d_v, d_model]``.

    Examples
    --------
    >>> import torch
    >>> tuple(stacked_wo(torch.zeros(12, 32, 384)).shape)
    (384, 384)
    """
    return W_O.reshape(-1, W_O.shape[-1])


def wo_storage_ranks(ctx: Any) -> list[Any]:
    """Each layer's stacked W_O rank at storage precision: a Cholesky certificate where it has full rank, else the SVD.

    Computed once per context (``ctx``: a :class:`~symtrans.evidence.Context`;
    :func:`~symtrans.numeric.linalg.storage_ranks` with ``certify``), for the
    layers of ``ctx.layer_indices``; thm-recovery/wo's exact-rank certificate
    reuses the proved ``sigma_min`` lower bounds (the same float64 matrices).

    Examples
    --------
    >>> from symtrans.evidence import Context
    >>> recs = wo_storage_ranks(Context(model="default", n=4))
    >>> len(recs), recs[0].rank, recs[0].precision
    (6, 384, 'float32 storage rounding (Cholesky certificate)')
    """
    from symtrans.numeric.linalg import storage_ranks
    from symtrans.numeric.weights import storage_precision

    key = "sec7-wo-storage"
    if key not in ctx.cache:
        w = ctx.weights()
        # one layer's W_O at a time (a streamed model holds no stack of every layer), each at its stored precision
        ctx.cache[key] = [storage_ranks(stacked_wo(w.layer(i)["W_O"]), storage_precision(w, "W_O", i)[0],
                                        certify=True)[0] for i in ctx.layer_indices(w.n_layers)]
    return ctx.cache[key]


def wo_quotient_rank(W: Any, storage_dtype: Any) -> Any:
    """Rank of the stacked W_O on the quotient by the centring shift, ``W_O P`` with ``P = I - 1 1^T / d``, at storage precision.

    The centring shift of G moves W_O to ``W_O + w 1^T``; ``W_O P`` is what no
    element of it moves (``1^T P = 0``) and what a norm that subtracts the row
    mean sees of the heads. Its rank is decided with the storage cut of W_O
    itself (:func:`~symtrans.numeric.linalg.storage_cut`): rounding W_O by ``E``
    moves ``W_O P`` by ``E P``, and ``||E P||_2 <= ||E||_2`` (P is an
    orthogonal projection), so the same Weyl bound holds. The gauge-invariant
    counterpart of thm-7.3/wo (and of thm-recovery/wo), shown beside it.

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(6, 6, dtype=torch.float64)
    >>> wo_quotient_rank(W, "float64").rank, wo_quotient_rank(W + torch.randn(6, 1, dtype=torch.float64), "float64").rank
    (5, 5)
    """
    import torch

    from symtrans.numeric.linalg import rank_from_singular_values, storage_cut, svdvals

    W = torch.as_tensor(W).to(torch.float64)
    d = W.shape[-1]
    P = torch.eye(d, dtype=W.dtype, device=W.device) - 1.0 / d
    s = svdvals(W @ P)
    shape = (int(W.shape[0]), int(d))
    cut, why = storage_cut(float(torch.linalg.matrix_norm(W)), storage_dtype, shape)
    smax = float(s[0]) if s.numel() else 0.0
    why += "; applied to W_O P: rounding W_O by E moves W_O P by E P, ||E P|| <= ||E|| (P a projection)"
    return rank_from_singular_values(s, shape, torch.float64, rtol=cut / smax if smax > 0 else 0.0, reason=why)
