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

__all__ = ["stacked_wo", "wo_storage_ranks"]


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
