"""The stacked output projection W_O and its rank at storage precision: the one home every producer reads.

The numeric checks (:mod:`symtrans.producers.sec6`, :mod:`symtrans.producers.sec7`)
and the exact certificates (the symbolic producers of :mod:`symtrans.producers.sec7`) need each
layer's stacked W_O (``H d_v x d_model``) and its rank at the precision it was
stored in; they read it here, and none decides it again:

* ``thm-7.3/wo`` and ``thm-recovery/wo``: the fibre of ``Z -> Z W_O`` is
  ``n (H d_v - rank W_O)`` (:meth:`WoRank.fibre`);
* ``thm-rank-contraction``: where every ``Y^h`` has full column rank ``d_v``
  (so ``n >= d_v``), ``R_h = row W_O^h`` and ``sum_h R_h = row W_O``, hence
  ``kappa = sum_h rank W_O^h - rank W_O`` (``H d_v - rank W_O`` when every head
  block has full rank; :meth:`WoRank.kappa`);
* ``recovery-wo-real``: reuses the Cholesky proof of full rank
  (:func:`wo_storage_ranks`) and says what the storage precision decides;
* the gauge-invariant counterpart (issue 34): ``wo_rank(ctx, i, centred=True)``
  is the rank of ``W_O P`` (``P = I - 1 1^T / d``, W_O modulo the centring
  shift) at the same storage cut (``||E P||_2 <= ||E||_F``).

The rank is decided at the precision ``W_O`` was stored in (per layer,
:func:`~symtrans.numeric.weights.storage_precision`; the cut is the Weyl
bound :func:`~symtrans.numeric.linalg.storage_cut`) with the one decisive
band (:func:`~symtrans.numeric.linalg.rank_interval`): the rank is known to
lie in ``[low, high]``, and a derived quantity is decided only when it is the
same at both ends. An undecided rank never yields a confident verdict.

Examples
--------
>>> import torch
>>> tuple(stacked_wo(torch.zeros(12, 32, 384)).shape)
(384, 384)
>>> from symtrans.context import Context
>>> r = wo_rank(Context(model="default", n=4), 0)
>>> r.rank, r.low, r.high, r.decided, r.injective, r.fibre(4), r.kappa
(384, 384, 384, True, True, (0, 0), (0, 0))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["stacked_wo", "wo_rank_record", "wo_storage_ranks", "WoRank", "wo_rank", "wo_ranks", "wo_rank_of", "wo_quotient_rank",
           "HeadRanks", "head_ranks_of", "wo_head_ranks"]


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
    """Each layer's stacked W_O rank record at storage precision (``--layers``: the listed layers), in order.

    The records of :func:`wo_ranks` (a Cholesky certificate where W_O has full rank, else the SVD),
    computed once per context; thm-recovery/wo's exact-rank certificate reuses the proved
    ``sigma_min`` lower bounds (the same float64 matrices).

    Examples
    --------
    >>> from symtrans.context import Context
    >>> recs = wo_storage_ranks(Context(model="default", n=4))
    >>> len(recs), recs[0].rank, recs[0].precision
    (6, 384, 'float32 storage rounding (Cholesky certificate)')
    """
    return [r.record for r in wo_ranks(ctx)]


@dataclass(frozen=True)
class WoRank:
    """A layer's stacked W_O rank at storage precision: the record, the interval it leaves, per-head ranks.

    ``low``/``high``: the ranks the decisive band leaves possible
    (:func:`~symtrans.numeric.linalg.rank_interval`); ``head_low``/``head_high``
    the same for each head's block ``W_O^h`` (``d_v x d_model``) at its own
    storage cut. ``record`` is the :class:`~symtrans.numeric.linalg.RankRecord`
    (a Cholesky certificate of full rank where one goes through).

    Examples
    --------
    >>> import torch
    >>> W = torch.eye(4, dtype=torch.float64).reshape(2, 2, 4)
    >>> r = wo_rank_of(W, "float32")
    >>> r.decided, r.injective, r.fibre(3), r.kappa
    (True, True, (0, 0), (0, 0))
    >>> W[1] = W[0]  # head 1 repeats head 0: rank 2 of 4, kappa 2
    >>> r = wo_rank_of(W, "float32")
    >>> r.rank, r.injective, r.fibre(3), r.kappa
    (2, False, (6, 6), (2, 2))
    """

    layer: int | None
    rows: int  # H d_v
    cols: int  # d_model
    storage_dtype: str
    record: Any
    low: int
    high: int
    head_low: tuple[int, ...]
    head_high: tuple[int, ...]
    centred: bool = False
    #: each head block's own rank record at storage precision (:func:`~symtrans.numeric.linalg.storage_rank_from`)
    head_records: tuple[Any, ...] = ()

    @property
    def head_ranks(self) -> HeadRanks:
        """The per-head part as the :class:`HeadRanks` it was built from."""
        return HeadRanks(self.head_records, self.head_low, self.head_high)

    @property
    def rank(self) -> int:
        """The rank the record's cut gives (the middle reading; decided only when :attr:`decided`)."""
        return int(self.record.rank)

    @property
    def decided(self) -> bool:
        """True when the decisive band leaves one rank (``low == high``)."""
        return self.low == self.high

    @property
    def injective(self) -> bool | None:
        """Whether ``Z -> Z W_O`` is injective (rank ``H d_v``): True, False, or None (undecided).

        False whatever the band when ``H d_v > d_model`` (``rank <= d_model``).
        """
        if self.high < self.rows:
            return False
        return True if self.low == self.rows else None

    def fibre(self, n: int) -> tuple[int, int]:
        """``(smallest, largest)`` fibre dimension ``n (H d_v - rank W_O)`` the interval leaves possible."""
        return n * (self.rows - self.high), n * (self.rows - self.low)

    @property
    def kappa(self) -> tuple[int, int]:
        """``(smallest, largest)`` ``sum_h rank W_O^h - rank W_O``: kappa where every Y^h has full column rank.

        Where ``Y^h`` (n x d_v) has rank d_v, ``R_h = row(Y^h W_O^h) = row W_O^h`` and
        ``sum_h R_h = row W_O``; the bounds combine the per-head and stacked intervals.
        """
        return max(sum(self.head_low) - self.high, 0), max(sum(self.head_high) - self.low, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the rank, its interval, whether decided, the derived kappa interval, the record.

        Examples
        --------
        >>> import torch
        >>> d = wo_rank_of(torch.eye(4, dtype=torch.float64).reshape(2, 2, 4), "float32").to_dict()
        >>> d["rank_WO"], d["rank_interval"], d["decided"], d["kappa_interval"]
        (4, [4, 4], True, [0, 0])
        """
        return {"layer": self.layer, "rank_WO": self.rank, "rank_interval": [self.low, self.high],
                "decided": self.decided, "injective": self.injective, "rows_HdV": self.rows, "d_model": self.cols,
                "storage_dtype": self.storage_dtype, "centred": self.centred,
                "head_rank_intervals": [[a, b] for a, b in zip(self.head_low, self.head_high)],
                "kappa_interval": list(self.kappa), "record": self.record.to_dict()}


def wo_rank_record(W: Any, storage_dtype: Any, *, centred: bool = False, off: Any = None,
                   certify: bool = True) -> tuple[Any, int, int]:
    """Rank of a stacked ``W_O`` (``H d_v x d_model``), or of ``W_O P`` with ``centred``, at W_O's storage precision.

    The one decision every W_O rank reads: the cut is
    :func:`~symtrans.numeric.linalg.storage_cut` of ``||W_O||_F`` (rounding
    ``W_O`` to its storage dtype moves it by ``E`` with ``||E||_F <= u ||W_O||_F``,
    and ``||E P||_2 <= ||E||_2``), with the one decisive band
    (:func:`~symtrans.numeric.linalg.rank_interval`). ``centred`` ranks ``W_O B``,
    ``B`` an orthonormal basis of 1^perp (:func:`~symtrans.numeric.linalg.ones_complement`;
    ``P = B B^T``, so ``rank W_O P = rank W_O B``): P's exact kernel gets no
    rounding-level singular value, which would grow with ``W_O``'s conditioning (an
    element of G rescales the heads). ``off`` (k x d_model, rows spanning the
    directions quotiented out, e.g. an eps-free norm's exact kernel,
    :func:`~symtrans.numeric.fibres.norm_kernel`) ranks ``W_O B`` with ``B`` an
    orthonormal basis of their complement instead (the all-ones row among them
    where ``centred``), at the same cut. ``certify``: a Cholesky proof of full rank
    first, against the same cut. Returns the record and the band ``(low, high)``.

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> rec, low, high = wo_rank_record(W, "float32", centred=True)
    >>> rec.rank, (low, high), rec.precision
    (5, (5, 5), 'float32 storage rounding (Cholesky certificate)')
    >>> W[:2] = 1e-9 * W[:2]  # two rows below float32's cut, far above float64's
    >>> wo_rank_record(W, "float32")[0].rank, wo_rank_record(W, "float64")[0].rank
    (4, 6)
    >>> W[:2] = 0  # rank 4; quotienting out one direction off its row space leaves 4, one inside it 3
    >>> wo_rank_record(W, "float32", off=torch.ones(1, 6))[0].rank, wo_rank_record(W, "float32", off=W[2:3])[0].rank
    (4, 3)
    """
    import torch

    from symtrans.numeric.linalg import (DECISIVE_MARGIN, full_rank_certificate, ones_complement,
                                         orthogonal_complement, rank_from_singular_values, rank_interval, storage_cut,
                                         svdvals)
    from symtrans.precision import float_dtype_name

    W = torch.as_tensor(W).to(torch.float64)
    m, d = (int(x) for x in W.shape)
    sd = float_dtype_name(storage_dtype)
    cut = storage_cut(float(torch.linalg.matrix_norm(W)), sd, (m, d))
    if off is not None:
        V = torch.as_tensor(off).to(W).reshape(-1, d)
        M = W @ orthogonal_complement(torch.cat([torch.ones(1, d, dtype=W.dtype, device=W.device), V]) if centred
                                      else V)
    else:
        M = W @ ones_complement(d, W.dtype).to(W.device) if centred else W
    if certify and min(M.shape) > 0:
        rec = full_rank_certificate(M, margin=DECISIVE_MARGIN + 0.5, cut=cut)
        if rec is not None:
            return dataclasses.replace(rec, precision=f"{sd} storage rounding (Cholesky certificate)"), rec.rank, rec.rank
    what = (f"W_O B, B an orthonormal basis of the complement of {int(V.shape[0]) + int(centred)} directions (the cut "
            "of W_O: ||E B|| <= ||E||)" if off is not None else
            "W_O P (modulo the centring shift, as W_O B; the cut of W_O: ||E P|| <= ||E||)" if centred else "W_O")
    s = svdvals(M).cpu()
    smax = float(s[0]) if s.numel() else 0.0
    rec = rank_from_singular_values(s, tuple(M.shape), torch.float64, rtol=cut[0] / smax if smax > 0 else 0.0,
                                    reason=f"{what}: {cut[1]}")
    low, high = rank_interval(s, cut[0])
    return dataclasses.replace(rec, precision=f"{sd} storage rounding"), low, high


def wo_rank_of(W_O: Any, storage_dtype: Any, *, layer: int | None = None, centred: bool = False,
               certify: bool = True, heads: HeadRanks | None = None) -> WoRank:
    """:class:`WoRank` of a per-head ``W_O [H, d_v, d_model]`` stored in ``storage_dtype`` (no model needed).

    ``centred``: the rank of ``W_O P`` (each row minus its mean: W_O modulo the
    centring shift) at the storage cut of ``W_O`` itself. ``certify``: try a
    Cholesky proof of full rank first (no SVD where it goes through). ``heads``:
    the per-head ranks (:func:`head_ranks_of` of the same ``W_O``), when already computed.

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(2, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> wo_rank_of(W, "float32").rank, wo_rank_of(W, "float32", centred=True).rank
    (6, 5)
    """
    import torch

    from symtrans.numeric.weights import _dtype_name

    W_O = torch.as_tensor(W_O).to(torch.float64)
    H, dv, d = (int(x) for x in W_O.shape)
    sd = _dtype_name(storage_dtype)
    rec, low, high = wo_rank_record(W_O.reshape(H * dv, d), sd, centred=centred, certify=certify)
    heads = head_ranks_of(W_O, sd) if heads is None else heads
    return WoRank(layer=layer, rows=H * dv, cols=d, storage_dtype=sd, record=rec, low=low, high=high,
                  head_low=heads.low, head_high=heads.high, centred=centred, head_records=heads.records)


@dataclass(frozen=True)
class HeadRanks:
    """Each head block ``W_O^h`` (``d_v x d_model``) at its own storage cut: records and rank intervals."""

    records: tuple[Any, ...]
    low: tuple[int, ...]
    high: tuple[int, ...]


def head_ranks_of(W_O: Any, storage_dtype: Any) -> HeadRanks:
    """:class:`HeadRanks` of a per-head ``W_O [H, d_v, d_model]`` stored in ``storage_dtype``: one batched SVD.

    Examples
    --------
    >>> import torch
    >>> W = torch.zeros(2, 3, 5, dtype=torch.float64); W[0, :, :3] = torch.eye(3); W[1, 0, 0] = 1.0
    >>> r = head_ranks_of(W, "float32")
    >>> [x.rank for x in r.records], r.low, r.high
    ([3, 1], (3, 1), (3, 1))
    """
    import torch

    from symtrans.numeric.linalg import rank_interval, storage_cut, storage_rank_from, svdvals
    from symtrans.numeric.weights import _dtype_name

    W_O = torch.as_tensor(W_O).to(torch.float64)
    H, dv, d = (int(x) for x in W_O.shape)
    sd = _dtype_name(storage_dtype)
    hs = svdvals(W_O).cpu()
    norms = torch.linalg.matrix_norm(W_O).cpu()
    bands = [rank_interval(hs[h], storage_cut(float(norms[h]), sd, (dv, d))[0]) for h in range(H)]
    return HeadRanks(records=tuple(storage_rank_from(hs[h], float(norms[h]), sd, (dv, d)) for h in range(H)),
                     low=tuple(a for a, _ in bands), high=tuple(b for _, b in bands))


def wo_head_ranks(ctx: Any, layer: int) -> HeadRanks:
    """:func:`head_ranks_of` ``layer``'s W_O in the context's model, computed once per context (sec6 and sec7 read it).

    Examples
    --------
    >>> from symtrans.context import Context
    >>> ctx = Context(model="default", n=4)
    >>> wo_head_ranks(ctx, 2) == wo_rank(ctx, 2).head_ranks, wo_head_ranks(ctx, 2).high[:3]
    (True, (32, 32, 32))
    """
    from symtrans.numeric.weights import storage_precision

    key = ("wo-head-ranks", int(layer))
    if key not in ctx.cache:
        w = ctx.weights()
        ctx.cache[key] = head_ranks_of(w.layer(layer)["W_O"], storage_precision(w, "W_O", layer)[0])
    return ctx.cache[key]


def wo_rank(ctx: Any, layer: int, *, centred: bool = False) -> WoRank:
    """The :class:`WoRank` of ``layer``'s stacked W_O in the context's model, computed once per context.

    The storage dtype is W_O's own at that layer
    (:func:`~symtrans.numeric.weights.storage_precision`), so a float16 W_O in a
    float32 checkpoint is judged at float16. ``centred=True`` gives the rank of
    W_O modulo the centring shift (the gauge-invariant counterpart).

    Examples
    --------
    >>> from symtrans.context import Context
    >>> ctx = Context(model="default", n=4)
    >>> wo_rank(ctx, 5) is wo_rank(ctx, 5), wo_rank(ctx, 5).storage_dtype
    (True, 'float32')
    >>> wo_rank(ctx, 0, centred=True).high <= 383
    True
    """
    from symtrans.numeric.weights import storage_precision

    key = ("wo-rank", int(layer), bool(centred))
    if key not in ctx.cache:
        w = ctx.weights()
        sd = storage_precision(w, "W_O", layer)[0]
        ctx.cache[key] = wo_rank_of(w.layer(layer)["W_O"], sd, layer=int(layer), centred=centred,
                                    heads=wo_head_ranks(ctx, layer))
    return ctx.cache[key]


def wo_ranks(ctx: Any, *, centred: bool = False) -> list[WoRank]:
    """:func:`wo_rank` of every layer the context looks at (``--layers``: the listed ones), in order.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> [r.layer for r in wo_ranks(Context(model="default", n=4, layers=(1, 3)))]
    [1, 3]
    """
    return [wo_rank(ctx, i, centred=centred) for i in ctx.layer_indices(ctx.weights().n_layers)]


def wo_quotient_rank(W: Any, storage_dtype: Any) -> Any:
    """The rank record of a stacked ``W_O`` (``H d_v x d_model``) modulo the centring shift, ``W_O P``, at storage precision.

    ``P = I - 1 1^T / d``. The centring shift of G moves W_O to ``W_O + w 1^T``; ``W_O P`` is what no element of
    it moves (``1^T P = 0``) and what a norm that subtracts the row mean sees of the heads: the gauge-invariant
    counterpart of thm-7.3/wo and thm-recovery/wo. Decided by :func:`wo_rank_record` with ``centred=True`` (the
    one home: the storage cut of W_O itself, since ``||E P||_2 <= ||E||_2``).

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(6, 6, dtype=torch.float64)
    >>> wo_quotient_rank(W, "float64").rank, wo_quotient_rank(W + torch.randn(6, 1, dtype=torch.float64), "float64").rank
    (5, 5)
    """
    import torch

    return wo_rank_record(torch.as_tensor(W), storage_dtype, centred=True, certify=False)[0]
