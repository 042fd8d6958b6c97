"""Measurements on real weights and hidden states, each returned as a record.

Every record carries the dtype it was computed in, the tolerance behind any
decision and why, and (for ranks) the singular values on both sides of the
cut, through :class:`symtrans.numeric.linalg.RankRecord`. Records are plain
dataclasses with ``to_dict()``; they decide nothing about the paper's claims
(the checks do that).

=====================  ==================================================================
function               what it measures
=====================  ==================================================================
rank_profile           per hidden state: numerical rank, affine rank, stable rank,
                       entropy effective rank, Dong's residual ratio
residual_ratio         ``||X - 1 x^T|| / ||X||`` (Frobenius, ``x`` = column mean)
asymmetry              ``alpha_h = ||(M - M^T)/2||_F / ||M||_F``, ``M = W_Q^h W_K^h^T``
head_subspaces         ``dim R_h``, ``rank MHA(X)``, ``dim sum R_h``, ``alpha_MHA``,
                       ``kappa``, principal angles between the ``R_h``
wo_conditioning        rank and condition number of each layer's stacked ``W_O``
ln_hypotheses          H1-H4 of Theorem 4.2 for one LayerNorm input, with margins
measure_all            all of the above in one pass, one layer in memory at a time
=====================  ==================================================================

Examples
--------
>>> w = load_model("default")
>>> rep = measure_all(w, n=8, seed=0)
>>> [r.rank.rank for r in rep.profiles["full"].layers]
[8, 8, 8, 8, 8, 8, 8]
>>> rep.heads[0].kappa >= 0
True
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from symtrans.errors import SymtransError
from symtrans.numeric.forward import embed_input, encode, encoder_layer, layer_forward, structure  # noqa: F401
from symtrans.numeric.linalg import (RankRecord, full_row_rank_certificate, gram_matrix, numerical_rank,
                                     rank_from_singular_values, svdvals)
from symtrans.numeric.variants import VARIANTS, default_ln, run_stack
from symtrans.numeric.weights import load_model, storage_precision  # noqa: F401 (load_model: doctests)
from symtrans.precision import dtype_name, machine_eps, smallest_normal, underflow_floor
from symtrans.threads import single_threaded

__all__ = ["LayerRankRecord", "RankProfile", "ResidualRecord", "AsymmetryRecord", "HeadSubspaceRecord",
           "WOConditioningRecord", "HypothesisRecord", "LNHypothesesRecord", "MeasureReport",
           "rank_profile", "residual_ratio", "underflowed", "asymmetry", "head_subspaces", "wo_conditioning",
           "ln_hypotheses", "measure_all", "stable_rank", "effective_rank", "peak_memory", "reset_peak_memory",
           "single_threaded"]


def _plain(value: Any) -> Any:
    """Recursively turn records, tuples and floats into JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class _Record:
    """Mixin: ``to_dict()`` for the measurement dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this record (nested records included)."""
        return _plain(self)


def _dtype_name(t: Any) -> str:
    return dtype_name(t.dtype)


# ------------------------------------------------------------------ spectra of hidden states
def stable_rank(s: Sequence[float]) -> float:
    """Stable rank ``||X||_F^2 / ||X||_2^2`` from singular values ``s``.

    Examples
    --------
    >>> stable_rank([2.0, 2.0, 0.0])
    2.0
    """
    s = [float(v) for v in s]
    return sum(v * v for v in s) / (s[0] * s[0]) if s and s[0] > 0 else 0.0


def effective_rank(s: Sequence[float]) -> float:
    """Entropy effective rank ``exp(-sum p_i log p_i)``, ``p_i = s_i / sum s`` (Roy and Vetterli 2007).

    Examples
    --------
    >>> round(effective_rank([1.0, 1.0, 1.0, 0.0]), 6)
    3.0
    """
    s = [float(v) for v in s]
    total = sum(s)
    if total <= 0:
        return 0.0
    return math.exp(-sum((v / total) * math.log(v / total) for v in s if v > 0))


def underflowed(X: Any) -> bool:
    """Whether the state ``X`` has underflowed: its largest entry below :func:`~symtrans.precision.underflow_floor`
    of its dtype (the zero matrix, an empty one and a nan one included), so no scale-free ratio of it has precision.

    Examples
    --------
    >>> import torch
    >>> X = torch.ones(2, 2, dtype=torch.float64)
    >>> [underflowed(X * s) for s in (1e-200, 1e-300, 0.0)]
    [False, True, True]
    """
    big = float(X.abs().max()) if X.numel() else 0.0
    return not big >= underflow_floor(X.dtype)


@dataclass
class ResidualRecord(_Record):
    """Dong et al.'s residual ratio ``||X - 1 x^T|| / ||X||`` with the norm and the minimiser stated.

    ``ratio`` uses the Frobenius norm with ``x`` the column mean, which is the
    exact minimiser of ``||X - 1 x^T||_F``. ``composite_ratio`` evaluates
    Dong's ``||M||_{1,inf} = sqrt(||M||_1 ||M||_inf)`` at the same ``x``; that
    ``x`` is feasible but not optimal for this norm, so it is an upper bound
    on Dong's ``min_x`` ratio.

    Examples
    --------
    >>> import torch
    >>> residual_ratio(torch.ones(3, 2, dtype=torch.float64)).ratio
    0.0
    """

    ratio: float
    composite_ratio: float
    first_row_ratio: float = 0.0
    norm: str = "frobenius"
    minimiser: str = "x = column mean of X (the exact argmin of ||X - 1 x^T||_F)"
    composite_norm: str = ("sqrt(||.||_1 ||.||_inf) (Dong et al. 2021) at the same x: an upper bound on "
                           "Dong's min over x")
    first_row: str = ("||X - 1 x_1^T||_F / ||X||_F, x_1 the first token's row: under causal attention the "
                      "first row never mixes (A[0] = e_1), so the only rank-1 limit the rows can collapse to "
                      "is the first token's own trajectory")
    dtype: str = "float64"


def residual_ratio(X: Any) -> ResidualRecord:
    """Dong's residual ratio of one matrix ``X`` (n x d): how far its rows are from one row.

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    >>> rec = residual_ratio(X)
    >>> rec.ratio, rec.composite_ratio
    (1.0, 1.0)

    The ratios do not depend on X's scale, and are computed on X scaled by a power of two (exactly), so a
    state far from 1 in size gets its ratio, not the underflow of a sum of squares (torch's norm does not
    rescale: the Frobenius norm of entries below ~1e-154 is 0). A state whose largest entry is below
    :func:`~symtrans.precision.underflow_floor` (the zero matrix included) has lost its precision
    (underflow): its ratios are nan, not a collapse.

    >>> residual_ratio(X * 1e-200).ratio, residual_ratio(X * 1e200).ratio
    (1.0, 1.0)
    >>> [math.isnan(residual_ratio(X * s).ratio) for s in (1e-300, 0.0)]
    [True, True]
    """
    import torch

    if underflowed(X):  # (or zero, or nan): no ratio at this precision
        return ResidualRecord(ratio=math.nan, composite_ratio=math.nan, first_row_ratio=math.nan,
                              dtype=_dtype_name(X))
    big = float(X.abs().max())
    X = X * 2.0 ** -math.frexp(big)[1] if math.isfinite(big) else X  # exact: the largest entry in [1/2, 1)
    R = X - X.mean(0, keepdim=True)

    def composite(M: Any) -> float:
        a = M.abs()
        return math.sqrt(float(a.sum(0).max()) * float(a.sum(1).max()))

    fx = float(torch.linalg.vector_norm(X))
    ratio = float(torch.linalg.vector_norm(R)) / fx
    cx = composite(X)
    first = float(torch.linalg.vector_norm(X - X[:1])) / fx
    return ResidualRecord(ratio=ratio, composite_ratio=composite(R) / cx, first_row_ratio=first,
                          dtype=_dtype_name(X))


@dataclass
class LayerRankRecord(_Record):
    """One hidden state's rank measurements (index 0 is the first layer's input).

    Examples
    --------
    >>> import torch
    >>> rec = rank_profile([torch.eye(3, dtype=torch.float64)]).layers[0]
    >>> rec.rank.rank, rec.affine.rank, rec.stable_rank
    (3, 2, 3.0)
    """

    index: int
    rank: RankRecord
    affine: RankRecord
    stable_rank: float
    effective_rank: float
    residual: ResidualRecord
    singular_values: list[float]


@dataclass
class RankProfile(_Record):
    """Rank measurements of a stack of hidden states ``[X_0, X_1, ..., X_depth]``.

    Examples
    --------
    >>> import torch
    >>> p = rank_profile([torch.eye(2, dtype=torch.float64)] * 2, variant="demo")
    >>> p.ranks, p.variant
    ([2, 2], 'demo')
    """

    variant: str
    ln: bool | None
    layer_index: int | None
    layers: list[LayerRankRecord]
    definitions: dict[str, str] = field(default_factory=lambda: {
        "rank": "numerical rank of X (see the record's cut and reason)",
        "affine": "rank of X - 1 mean^T = dimension of the affine hull of the rows",
        "stable_rank": "||X||_F^2 / ||X||_2^2",
        "effective_rank": "exp(entropy of s / sum s) (Roy and Vetterli 2007)",
    })

    @property
    def ranks(self) -> list[int]:
        """Numerical rank per hidden state."""
        return [r.rank.rank for r in self.layers]

    @property
    def affine_ranks(self) -> list[int]:
        """Affine rank per hidden state."""
        return [r.affine.rank for r in self.layers]


@single_threaded()
def rank_profile(trace: Any, *, variant: str = "full", ln: bool | None = None,
                 layer_index: int | None = None, pool: Any = None) -> RankProfile:
    """Rank, affine rank, stable and effective rank, residual of each hidden state (one batched SVD).

    ``trace`` is a :class:`~symtrans.numeric.forward.Trace` (its hidden states)
    or a list of n x d matrices. ``pool`` (an executor) splits the SVDs
    over its threads.

    Examples
    --------
    >>> w = load_model("default")
    >>> p = rank_profile(encode(w, n=6, seed=0))
    >>> p.ranks, p.affine_ranks
    ([6, 6, 6, 6, 6, 6, 6], [5, 5, 5, 5, 5, 5, 5])
    """
    import torch

    states = trace.hidden_states if hasattr(trace, "hidden_states") else list(trace)
    if not states:
        raise SymtransError("rank_profile needs at least one hidden state")
    S = torch.stack([torch.as_tensor(x) for x in states])
    shape = tuple(S.shape[-2:])
    both = torch.cat([S, S - S.mean(-2, keepdim=True)])
    if pool is None:
        sv = svdvals(both).cpu()  # one batched SVD: plain and centred
    else:
        chunks = both.chunk(max(1, min(len(both), _workers())))
        sv = torch.cat([f.result() for f in [pool.submit(svdvals, c) for c in chunks]]).cpu()
    k = len(states)
    rows = []
    for i in range(k):
        s, sc = sv[i], sv[k + i]
        rows.append(LayerRankRecord(
            index=i, rank=rank_from_singular_values(s, shape, S.dtype),
            affine=rank_from_singular_values(sc, shape, S.dtype, scale=float(s[0])), stable_rank=stable_rank(s),
            effective_rank=effective_rank(s), residual=residual_ratio(S[i]),
            singular_values=[float(v) for v in s]))
    return RankProfile(variant=variant, ln=ln, layer_index=layer_index, layers=rows)


# ------------------------------------------------------------------ weights-only measurements
def _layers(weights: Any) -> list[tuple[int, dict[str, Any]]]:
    """``[(i, layer dict)]`` for a ModelWeights-like object, or ``[(0, d)]`` for a single layer dict."""
    if isinstance(weights, dict):
        return [(0, weights)]
    return [(i, weights.layer(i)) for i in range(weights.n_layers)]


@dataclass
class AsymmetryRecord(_Record):
    """``alpha_h`` for every layer and head: ``alpha[l][h]``.

    Examples
    --------
    >>> rec = asymmetry(load_model("default"))
    >>> len(rec.alpha), len(rec.alpha[0])
    (6, 12)
    """

    alpha: list[list[float]]
    dtype: str
    definition: str = ("alpha_h = ||M_a||_F / ||M||_F, M = W_Q^h (W_K^h)^T (d_model x d_model), "
                       "M_a = (M - M^T) / 2; query/key biases are not part of M")
    positional: str = ("no rotary positions: M is the whole bilinear form of the scores "
                       "(up to the biases and 1/sqrt(d_k))")
    method: str = ("QR of [W_Q W_K] = Q [R_q R_k]: ||M||_F = ||R_q R_k^T||_F and ||M_a||_F likewise "
                   "(Q orthonormal), batched over heads; backward stable, no cancellation: error about eps relative")


ROPE_ALPHA_NOTE = ("rotary positions: the score of query i on key j is x_i^T W_Q R_(j-i) W_K^T x_j, one bilinear "
                   "form per offset j - i; alpha_h is that of the offset-0 form M_0 = W_Q^h (W_K^g)^T (g the "
                   "key/value head query head h shares), i.e. of the content-only part; it does not measure "
                   "the asymmetry that the rotation itself adds at other offsets")


def _expand_kv(W_Q: Any, W_K: Any) -> Any:
    """``W_K`` with its ``H_kv`` heads repeated to the ``H`` query heads that read them."""
    if W_K.shape[-3] == W_Q.shape[-3]:
        return W_K
    from symtrans.numeric.forward import kv_index

    return W_K[..., kv_index(W_Q.shape[-3], W_K.shape[-3], W_K.device), :, :]


def _alpha(W_Q: Any, W_K: Any) -> Any:
    """``alpha`` for per-head ``W_Q, W_K`` of shape ``[..., d_model, d_k]``, without forming ``M``.

    With the thin QR ``[W_Q W_K] = Q [R_q R_k]``, ``M = Q R_q R_k^T Q^T`` and
    ``M^T = Q R_k R_q^T Q^T``; ``Q`` has orthonormal columns, so both Frobenius
    norms are those of ``2 d_k x 2 d_k`` matrices, computed directly (no
    cancellation, no ``d_model x d_model`` products).
    """
    import torch

    dk = W_Q.shape[-1]
    W_K = _expand_kv(W_Q, W_K)
    R = torch.linalg.qr(torch.cat([W_Q, W_K], -1), mode="r")[1]
    small = R[..., :dk] @ R[..., dk:].transpose(-1, -2)  # R_q R_k^T
    anti = (small - small.transpose(-1, -2)) / 2
    return anti.flatten(-2).norm(dim=-1) / small.flatten(-2).norm(dim=-1)


@single_threaded()
def asymmetry(weights: Any) -> AsymmetryRecord:
    """Directional asymmetry ``alpha_h`` of every head, batched over heads, one layer at a time.

    ``weights`` is a :class:`~symtrans.numeric.weights.ModelWeights` (or a
    streamed model) or one layer's dict.

    Examples
    --------
    >>> w = load_model("default")
    >>> a = asymmetry(w).alpha
    >>> all(0.0 <= x <= 1.0 for row in a for x in row)
    True
    """
    rows, dtype = [], "float64"
    for _, layer in _layers(weights):
        rows.append([float(v) for v in _alpha(layer["W_Q"], layer["W_K"]).cpu()])
        dtype = _dtype_name(layer["W_Q"])
    rope = not isinstance(weights, dict) and getattr(weights.arch, "positional", "") == "rotary"
    if rope:
        return AsymmetryRecord(alpha=rows, dtype=dtype, positional=ROPE_ALPHA_NOTE)
    return AsymmetryRecord(alpha=rows, dtype=dtype)


@dataclass
class WOConditioningRecord(_Record):
    """Rank and condition number of each layer's stacked ``W_O`` (``H d_v x d_model``).

    Examples
    --------
    >>> rec = wo_conditioning(load_model("default"))
    >>> rec.ranks, rec.shape
    ([384, 384, 384, 384, 384, 384], [384, 384])
    """

    ranks_records: list[RankRecord]
    condition: list[float]
    shape: list[int]
    dtype: str
    definition: str = ("W_O stacked over heads: rows h*d_v..(h+1)*d_v-1 are W_O^h; condition = "
                       "sigma_max / sigma_min over its min(H d_v, d_model) singular values")

    @property
    def ranks(self) -> list[int]:
        """Numerical rank per layer."""
        return [r.rank for r in self.ranks_records]


def _wo_layer(W_O: Any, storage_dtype: Any) -> tuple[RankRecord, float]:
    """The stacked W_O's rank at its storage precision (the very decision the report's checks make) and condition."""
    from symtrans.numeric.linalg import storage_ranks

    stacked = W_O.reshape(-1, W_O.shape[-1])
    s = svdvals(stacked).cpu()
    cond = float(s[0] / s[-1]) if float(s[-1]) > 0 else math.inf
    return storage_ranks(stacked[None], storage_dtype, certify=True)[0], cond


@single_threaded()
def wo_conditioning(weights: Any) -> WOConditioningRecord:
    """Rank (at each layer's W_O storage precision) and condition number of the stacked ``W_O`` of every layer.

    Examples
    --------
    >>> rec = wo_conditioning(load_model("default"))
    >>> all(c > 1 for c in rec.condition), rec.ranks_records[0].dtype
    (True, 'float64')
    """
    recs, conds, shape, dtype = [], [], [0, 0], "float64"
    for i, layer in _layers(weights):
        rec, cond = _wo_layer(layer["W_O"], storage_precision(weights, "W_O", i)[0])
        recs.append(rec)
        conds.append(cond)
        shape, dtype = list(rec.shape), rec.dtype
    return WOConditioningRecord(ranks_records=recs, condition=conds, shape=shape, dtype=dtype)


# ------------------------------------------------------------------ per-layer head geometry
@dataclass
class HeadSubspaceRecord(_Record):
    """Head output subspaces ``R_h = rowspace(Y^h W_O^h)`` of one layer, and how they add up.

    ``kappa = sum_h dim R_h - dim(sum_h R_h)``; ``alpha_MHA = 1 - rank MHA(X) /
    (H max_h dim R_h)``. ``MHA(X) = sum_h Y^h W_O^h`` without ``b_O``.
    ``min_angle_deg[h][g]`` is the smallest principal angle between ``R_h``
    and ``R_g`` (degrees); ``overlap[h][g]`` the mean squared cosine of all
    principal angles (1: one contains the other, 0: orthogonal).

    Examples
    --------
    >>> w = load_model("default")
    >>> rec = head_subspaces(encode(w, n=40, seed=0).layers[0])
    >>> rec.dim_R, rec.rank_mha.rank, rec.dim_sum.rank
    ([32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32], 40, 384)
    >>> rec.kappa, rec.n
    (0, 40)
    """

    layer: int
    n: int
    dim_R_records: list[RankRecord]
    rank_mha: RankRecord
    dim_sum: RankRecord
    alpha_mha: float
    kappa: int
    min_angle_deg: list[list[float]]
    overlap: list[list[float]]
    notes: str = ("R_h from K_h = U_h^T Y^h W_O^h, U_h the left singular vectors of Y^h (same singular values and "
                  "row space as Y^h W_O^h): its singular values from the QR K_h^T = Q_h R_h, its basis Q_h where K_h "
                  "has full rank, else the leading right singular vectors of K_h; "
                  "dim(sum R_h) from the stacked orthonormal bases (a Cholesky certificate of their Gram matrix when they are "
                  "independent, else their SVD); angles via arccos of the singular "
                  "values of B_h B_g^T (square roots of the eigenvalues of its Gram matrix), accurate to about "
                  "sqrt(eps) rad near 0 degrees")

    @property
    def dim_R(self) -> list[int]:
        """``dim R_h`` per head."""
        return [r.rank for r in self.dim_R_records]


@single_threaded()
def head_subspaces(layer_trace: Any, *, layer: int = 0, W_O: Any = None) -> HeadSubspaceRecord:
    """``dim R_h``, ``rank MHA(X)``, ``dim sum R_h``, ``alpha_MHA``, ``kappa`` and principal angles.

    Needs a :class:`~symtrans.numeric.forward.LayerTrace` (``Y``, ``YO`` and
    ``mha``). Any factorisation ``Y^h = U_h T_h`` with orthonormal columns in
    U_h gives ``Y^h W_O^h = U_h K_h`` with the same singular values and row
    space as the small ``K_h`` (``min(n, d_v) x d_model``): with the layer's
    per-head ``W_O`` given, the thin QR ``Y^h = U_h T_h`` and ``K_h = T_h W_O^h``
    (``Y^h W_O^h`` is never formed); without it, the thin SVD of ``Y^h`` and
    ``K_h = U_h^T (Y^h W_O^h)``. Then the QR
    ``K_h^T = Q_h R_h`` gives the singular values of ``Y^h W_O^h`` (those of
    R_h) and, where K_h has full rank, an orthonormal basis Q_h of ``R_h``
    (a rank-deficient K_h takes its leading right singular vectors instead),
    without an ``n x d_model`` SVD per head. All factorisations are batched
    over heads.

    Examples
    --------
    >>> w = load_model("default")
    >>> rec = head_subspaces(encode(w, n=6, seed=0).layers[2], layer=2)
    >>> rec.dim_R[:3], rec.rank_mha.rank, rec.dim_sum.rank, rec.kappa
    ([6, 6, 6], 6, 72, 0)
    >>> head_subspaces(encode(w, n=6, seed=0).layers[2], layer=2, W_O=w.layer(2)["W_O"]).dim_R[:3]
    [6, 6, 6]
    """
    import torch

    Y, mha = layer_trace.Y, layer_trace.mha
    H, n, dv = Y.shape
    if W_O is not None:
        T = torch.linalg.qr(Y, mode="r")[1]  # Y^h = U_h T_h: T [H, min(n, d_v), d_v]
        K = T @ W_O  # [H, min(n, d_v), D]; Y^h W_O^h = U_h K_h
    else:
        U = torch.linalg.svd(Y, full_matrices=False)[0]  # Y^h = U S Vh, U: [H, n, min(n, dv)]
        K = U.transpose(-1, -2) @ layer_trace.YO  # [H, min(n, dv), D]; Y^h W_O^h = U_h K_h
    D = K.shape[-1]
    # K_h^T = Q_h R_h (QR): K_h has the singular values of the m x m R_h, and where K_h has full rank m the
    # columns of Q_h are an orthonormal basis of R_h; only a rank-deficient K_h needs its singular vectors
    Q, Rk = torch.linalg.qr(K.transpose(-1, -2))
    sk = torch.linalg.svdvals(Rk)
    dims = [rank_from_singular_values(s, (n, D), Y.dtype) for s in sk.cpu()]
    if all(rec.rank == K.shape[-2] for rec in dims) and Q.shape[-1] == K.shape[-2]:
        Bk = Q.transpose(-1, -2)  # [H, m, D]: rows = orthonormal basis of R_h
    else:
        Bt = torch.linalg.svd(K.transpose(-1, -2), full_matrices=False)[0]  # tall: faster than K
        Bk = Bt.transpose(-1, -2)  # rows = orthonormal basis of R_h by singular value (the leading dim R_h kept)
    r = torch.tensor([d.rank for d in dims], device=Y.device)
    mask = (torch.arange(Bk.shape[-2], device=Y.device)[None, :] < r[:, None]).to(Bk.dtype)
    B = Bk * mask[..., None]  # [H, m, D], rows beyond dim R_h zeroed
    stacked = B.reshape(-1, D)
    # the common case, sum_h dim R_h independent directions, is proved by a Cholesky certificate of the kept
    # rows' Gram matrix; anything else (or a certificate that does not go through) is decided by the SVD
    m = B.shape[1]
    # [H m, H m]: block (h, g) is B_h B_g^T, through BLAS syrk (one triangle formed, mirrored: half the GEMM
    # work), so every entry is one float64 dot product of two rows
    gram = gram_matrix(stacked)
    kept = (mask.reshape(-1) > 0).nonzero().flatten()
    every = len(kept) == H * m
    dim_sum = (full_row_rank_certificate(stacked if every else stacked[kept],
                                         gram=gram.clone() if every else gram[kept][:, kept])
               if Y.dtype == torch.float64 else None)
    if dim_sum is None:
        s_sum = svdvals(stacked).cpu()
        dim_sum = rank_from_singular_values(s_sum, (int(r.sum()), D), Y.dtype)
    rank_mha = numerical_rank(mha)
    # principal cosines of each pair from the Gram blocks; B_g B_h^T is the transpose of B_h B_g^T (same
    # singular values), so only the blocks on and above the diagonal are decomposed
    blocks = gram.reshape(H, m, H, m).transpose(1, 2)  # [H, H, m, m]
    iu = torch.triu_indices(H, H, device=Y.device)
    # the cosines are the singular values of C = B_h B_g^T, taken as the square roots of the eigenvalues of
    # C C^T (symmetric: about 1.6x faster than an SVD of C); the squares lose nothing that arccos near 0 does not
    C = blocks[iu[0], iu[1]]
    upper = torch.linalg.eigvalsh(C @ C.transpose(-1, -2)).flip(-1).clamp(0, 1).sqrt()  # [H (H + 1) / 2, m]
    cos = torch.zeros(H, H, upper.shape[-1], dtype=upper.dtype, device=upper.device)
    cos[iu[0], iu[1]] = upper
    cos[iu[1], iu[0]] = upper
    angle = torch.rad2deg(torch.arccos(cos[..., 0]))
    denom = torch.minimum(r[:, None], r[None, :]).clamp(min=1).to(cos.dtype)
    overlap = (cos * cos).sum(-1) / denom
    max_dim = max(d.rank for d in dims)
    alpha_mha = 1.0 - rank_mha.rank / (H * max_dim) if max_dim else 0.0
    return HeadSubspaceRecord(
        layer=layer, n=int(n), dim_R_records=dims, rank_mha=rank_mha, dim_sum=dim_sum,
        alpha_mha=alpha_mha, kappa=int(r.sum()) - dim_sum.rank,
        min_angle_deg=[[float(v) for v in row] for row in angle.cpu()],
        overlap=[[float(v) for v in row] for row in overlap.cpu()])


# ------------------------------------------------------------------ LayerNorm hypotheses
@dataclass
class HypothesisRecord(_Record):
    """One hypothesis of Theorem 4.2: its measured value, the threshold, and the margin in decades.

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    >>> ln_hypotheses(X, torch.ones(3, dtype=torch.float64)).H3.holds
    True
    """

    name: str
    statement: str
    value: float
    threshold: float
    tolerance_reason: str
    holds: bool
    margin: float  # log10(value / threshold): > 0 holds, < 0 fails, |margin| < 1 fragile


def _hyp(name: str, statement: str, value: float, threshold: float, reason: str) -> HypothesisRecord:
    if threshold <= 0:
        margin = math.inf if value > 0 else -math.inf
    elif value <= 0:
        margin = -math.inf
    else:
        margin = math.log10(value / threshold)
    return HypothesisRecord(name=name, statement=statement, value=value, threshold=threshold,
                            tolerance_reason=reason, holds=value > threshold, margin=margin)


@dataclass
class LNHypothesesRecord(_Record):
    """H1-H4 of Theorem 4.2 for one LayerNorm input ``X``, plus ``rank X`` (from the same SVD).

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    >>> rec = ln_hypotheses(X, torch.ones(3, dtype=torch.float64))
    >>> [h.holds for h in rec.hypotheses], rec.rank_X.rank
    ([True, True, True, False], 2)
    """

    where: str
    H1: HypothesisRecord
    H2: HypothesisRecord
    H3: HypothesisRecord
    H4: HypothesisRecord
    rank_X: RankRecord
    dtype: str

    @property
    def hypotheses(self) -> list[HypothesisRecord]:
        """``[H1, H2, H3, H4]``."""
        return [self.H1, self.H2, self.H3, self.H4]

    @property
    def all_hold(self) -> bool:
        """True when H1-H4 all hold."""
        return all(h.holds for h in self.hypotheses)


def _subspace_threshold(rec: RankRecord) -> tuple[float, str]:
    """Distances from the rank-r singular subspace of a matrix below this are indistinguishable from 0."""
    if rec.rank == 0 or rec.sigma_above is None:
        return 0.0, "the subspace is {0}"
    eps = rec.rtol / max(rec.shape)
    thr = max(rec.shape) * eps * rec.sigma_max / rec.sigma_above
    return thr, (f"Wedin's sin-theta bound: an SVD backward error of max(n, d)*eps*sigma_max moves the "
                 f"rank-{rec.rank} singular subspace of X by at most that over sigma_r (= {rec.sigma_above:.3g}); "
                 "smaller distances are indistinguishable from 0")


@single_threaded()
def ln_hypotheses(X: Any, gamma: Any, *, where: str = "") -> LNHypothesesRecord:
    """Measure H1-H4 of Theorem 4.2 for LayerNorm input ``X`` (n x d) and gain ``gamma``, with margins.

    H1: every row non-constant (``min_i sigma_i / rms(x_i)``); H2: ``1_d`` not in
    rowspace(X) (relative distance); H3: every ``gamma_j != 0``
    (``min |gamma_j| / max |gamma_j|``); H4: ``sigma`` not in colspace(X P)
    (relative distance), ``P = I - 11^T/d``. Uses the paper's LN (no epsilon).

    One SVD ``X = U_r S_r V_r^T`` serves both H2 and H4: ``colspace(X P) =
    U_r range(S_r V_r^T P)``, which is ``span(U_r)`` when H2 holds and otherwise
    ``U_r (S_r^{-1} a)^perp`` with ``a = V_r^T 1_d`` (the kernel of
    ``P V_r S_r``).

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]], dtype=torch.float64)
    >>> rec = ln_hypotheses(X, torch.ones(3, dtype=torch.float64))
    >>> rec.H1.holds, rec.H1.value
    (False, 0.0)
    """
    import torch

    X = torch.as_tensor(X)
    n, d = X.shape
    eps = machine_eps(X.dtype)
    XP = X - X.mean(-1, keepdim=True)
    sigma = XP.pow(2).mean(-1).sqrt()
    rms = X.pow(2).mean(-1).sqrt().clamp(min=smallest_normal(X.dtype))
    h1 = _hyp("H1", "every row of X is non-constant: sigma_i > 0", float((sigma / rms).min()), d * eps,
              "min_i sigma_i / rms(x_i) against d*eps: the rounding error of a constant row's "
              "computed standard deviation, relative to its size, is about d*eps")
    U, sx, Vh = torch.linalg.svd(X, full_matrices=False)
    rank_X = rank_from_singular_values(sx.cpu(), (n, d), X.dtype)
    r = rank_X.rank
    thr, why = _subspace_threshold(rank_X)
    Ur, Vr = U[:, :r], Vh[:r].T
    ones = torch.ones(d, dtype=X.dtype, device=X.device)
    a = Vr.T @ ones
    dist2 = float((ones - Vr @ a).norm()) / math.sqrt(d)
    h2 = _hyp("H2", "1_d is not in rowspace(X)", dist2, thr,
              "relative distance ||(I - Pi_row) 1|| / ||1||; " + why)
    g = torch.as_tensor(gamma).abs()
    h3 = _hyp("H3", "every gamma_j != 0", float(g.min() / g.max()) if float(g.max()) > 0 else 0.0, 0.0,
              "min |gamma_j| / max |gamma_j|; exact zero test (a stored gain is either 0 or not)")
    c = Ur.T @ sigma
    gap2 = float((sigma - Ur @ c).pow(2).sum())
    if not h2.holds and r > 0:  # 1_d in rowspace(X): colspace(XP) loses the direction U_r S_r^{-1} a
        w = a / sx[:r]
        gap2 += float((w @ c) ** 2 / (w @ w))
    snorm = float(sigma.norm())
    dist4 = math.sqrt(gap2) / snorm if snorm > 0 else 0.0
    h4 = _hyp("H4", "sigma (row standard deviations) is not in colspace(X P)", dist4, thr,
              "relative distance ||(I - Pi_col) sigma|| / ||sigma||; " + why)
    return LNHypothesesRecord(where=where, H1=h1, H2=h2, H3=h3, H4=h4, rank_X=rank_X, dtype=_dtype_name(X))


# ------------------------------------------------------------------ everything at once
def peak_memory() -> dict[str, Any]:
    """The process's resident-set peak (VmHWM) and current size in MiB, from /proc or getrusage.

    Examples
    --------
    >>> peak_memory()["peak_rss_mib"] > 0
    True
    """
    info: dict[str, Any] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    info["peak_rss_mib" if key == "VmHWM" else "rss_mib"] = int(rest.split()[0]) / 1024
    except OSError:
        import resource

        info["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return info


def reset_peak_memory() -> bool:
    """Reset the kernel's resident-set peak for this process (Linux ``clear_refs``); True if it worked.

    Examples
    --------
    >>> isinstance(reset_peak_memory(), bool)
    True
    """
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


@dataclass
class MeasureReport(_Record):
    """Everything :func:`measure_all` measured, with provenance.

    Examples
    --------
    >>> rep = measure_all(load_model("default"), n=4, seed=0)
    >>> sorted(rep.to_dict())[:4]
    ['activations', 'arch', 'asymmetry', 'attention']
    """

    model: str
    arch: str
    weights_hash: str
    dtype: str
    device: str
    n: int
    seed: int | None
    input: str
    depth: int
    profiles: dict[str, RankProfile]
    asymmetry: AsymmetryRecord
    heads: list[HeadSubspaceRecord]
    wo: WOConditioningRecord
    ln: list[dict[str, LNHypothesesRecord]]
    timings_s: dict[str, float]
    memory: dict[str, Any]
    form: str = ("post-LN BERT: X1 = LN1(X + MHA(X) + b_O), out = LN2(X1 + FFN(X1)); MHA(X) = sum_h "
                 "Y^h W_O^h without b_O; LN hypotheses measured on the inputs of LN1 and LN2")
    family: str = "bert"
    attention: str = "bidirectional"
    collapse: str = ("Dong et al.'s residual ||X - 1 x^T|| / ||X|| (x the column mean, the Frobenius "
                     "minimiser) of each hidden state")
    wo_fibre_dim: list[int] = field(default_factory=list)
    activations: dict[str, Any] | None = None  # the cache's agreement with the forward (CacheCheck.to_dict)


def _workers() -> int:
    """Threads for independent factorisations: the CPU count, at most 4 (each runs single-threaded)."""
    return max(1, min(4, os.cpu_count() or 1))


class _Progress:
    """Progress (:mod:`symtrans.progress`) when asked for, else a no-op with the same calls."""

    def __init__(self, total: int, enabled: bool, desc: str):
        from symtrans.progress import Progress

        self.bar = Progress(total, desc, unit="step", enabled=enabled)

    def step(self, label: str) -> None:
        self.bar.step(label)

    def close(self) -> None:
        self.bar.close()


CAUSAL_COLLAPSE = (
    "causal attention: A^h is lower triangular and row-stochastic, so row 1 is e_1 and the first token never "
    "mixes (its pure-attention update is x_1 -> x_1 W_V W_O + biases, the same map for every row of a rank-1 X). "
    "Dong et al.'s bound is proved for full attention; the toolkit reports the same residual ratio "
    "||X - 1 x^T|| / ||X|| (x the column mean) and, as first_row_ratio, ||X - 1 x_1^T|| / ||X||: the only rank-1 "
    "state causal rows can collapse to is the first token's trajectory, so collapse shows as both going to 0; "
    "ranks and affine ranks are measured as for encoders")
RMSNORM_LN = ("RMSNorm: Theorem 4.2's hypotheses are about LayerNorm's centring (1_d, sigma); they are not "
              "measured for RMSNorm, which does not centre")


def measure_all(weights: Any, *, text: str | None = None, input_ids: Any = None, X: Any = None,
                n: int | None = None, seed: int = 0, variants: Sequence[str] = ("full",),
                depth: int | None = None, layer_index: int | None = None, ln: bool | None = None,
                progress: bool = False, activations: Any = None) -> MeasureReport:
    """Run every measurement once: the real forward layer by layer, then the variant stacks.

    ``activations`` (a TransformerLens ``ActivationCache`` of one sequence, or a dict by hook name) gives
    the hidden states instead of an input: the forward starts from its ``blocks.0.hook_resid_pre``, must
    reproduce each cached ``hook_resid_post`` (:func:`symtrans.numeric.activations.check_against`), and the
    real model's rank profile is measured on the cached states in their own dtype.

    Each layer's measurements run on a thread pool (single-threaded torch
    kernels, one per core) while the main thread computes the next layer.

    The real (full, post-LN) forward runs one layer at a time; each layer's
    per-head internals are measured and dropped before the next layer, so with
    a streamed model (:func:`symtrans.numeric.weights.stream_model`) memory
    stays about one layer's weights plus one layer's activations. Variant
    stacks other than the real model (``variants``, ``depth``, ``layer_index``,
    ``ln``) are then run from the same first-layer input; the real model's
    profile reuses the hidden states already computed.

    Examples
    --------
    >>> rep = measure_all(load_model("default"), n=5, seed=0, variants=("full", "pure-attention"), depth=3)
    >>> rep.profiles["pure-attention"].ranks
    [5, 5, 5, 5]
    """
    import torch

    for v in variants:
        if v not in VARIANTS:
            from symtrans.errors import suggest

            raise SymtransError(suggest(v, VARIANTS, "variant"))
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    cached = None
    if activations is not None:
        from symtrans.numeric.activations import cache_states

        if any(v is not None for v in (text, input_ids, X, n)):
            raise SymtransError("activations: give the cache alone (it holds the input), not also text, ids or n")
        cached = cache_states(activations, n_layers=weights.n_layers, d_model=weights.d_model)
        X = cached[0]
    X0, ids = embed_input(weights, text=text, input_ids=input_ids, X=X, n=n, seed=seed)
    st = structure(weights)
    L = weights.n_layers
    bar = _Progress(L + len(variants), progress, "measure")
    states = [X0]
    arch = weights.arch
    results: list[dict[str, Any]] = []

    def collect(futures: dict[str, Any]) -> None:
        results.append({k: f.result() for k, f in futures.items()})
        bar.step(f"layer {len(results) - 1}")

    with bar.bar, torch.no_grad(), single_threaded(), ThreadPoolExecutor(_workers()) as pool:  # closed on error too
        pending: list[dict[str, Any]] = []
        for i in range(L):
            layer = weights.layer(i)
            t = layer_forward(states[-1], layer, st.at(i))
            jobs = {"heads": pool.submit(head_subspaces, t, layer=i, W_O=layer["W_O"]),
                    "alpha": pool.submit(_alpha, layer["W_Q"], layer["W_K"]),
                    "wo": pool.submit(_wo_layer, layer["W_O"], storage_precision(weights, "W_O", i)[0])}
            if st.norm == "layernorm":
                for tag, inp in t.norm_inputs.items():
                    jobs[tag] = pool.submit(ln_hypotheses, inp, layer[f"{tag}_w"],
                                            where=f"layer {i} {tag.upper()} input")
            pending.append(jobs)
            states.append(t.out)
            del t, layer
            if len(pending) > 1:  # at most two layers' internals alive: the one measured, the next
                collect(pending.pop(0))
        for futures in pending:
            collect(futures)
        timings["forward_and_layer_measurements"] = time.perf_counter() - t0
        extra: dict[str, Any] = {}
        if cached is not None:
            from symtrans.numeric.activations import check_against

            extra["activations"] = check_against(states, cached).to_dict()
            states = cached
        t1 = time.perf_counter()
        profiles: dict[str, RankProfile] = {}
        for v in variants:
            use_ln = default_ln(v) if ln is None else ln
            if v == "full" and use_ln and layer_index is None and depth in (None, L):
                stack = states
            else:
                stack = run_stack(weights, X0, v, depth=depth, layer_index=layer_index, ln=use_ln)
            profiles[v] = rank_profile(stack, variant=v, ln=use_ln, layer_index=layer_index, pool=pool)
            bar.step(v)
        timings["rank_profiles"] = time.perf_counter() - t1
    heads = [r["heads"] for r in results]
    lns = [{k: r[k] for k in ("ln1", "ln2") if k in r} for r in results]
    alphas = [[float(v) for v in r["alpha"].cpu()] for r in results]
    wo_recs = [r["wo"][0] for r in results]
    wo_cond = [r["wo"][1] for r in results]
    bar.close()
    timings["total"] = time.perf_counter() - t0
    dt = _dtype_name(X0)
    if ids is not None:
        source = "text" if text is not None else ("random ids" if n is not None else "token ids")
    else:
        source = "activation cache (TransformerLens hook names)" if cached is not None else "given X"
    wo = WOConditioningRecord(ranks_records=wo_recs, condition=wo_cond,
                              shape=list(wo_recs[0].shape), dtype=dt)
    mem = peak_memory()
    if X0.device.type == "cuda":
        mem["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    n_rows = int(X0.shape[0])
    hdv = int(wo_recs[0].shape[0])
    if st.form == "pre-ln":
        extra["form"] = st.describe() + ("; LN hypotheses measured on the inputs of N1 and N2" if st.norm ==
                                         "layernorm" else "; " + RMSNORM_LN)
    if st.causal:
        extra["attention"] = "causal" + (f", sliding window {st.sliding_window}" if st.sliding_window else "")
        extra["collapse"] = CAUSAL_COLLAPSE
    asym = (AsymmetryRecord(alpha=alphas, dtype=dt, positional=ROPE_ALPHA_NOTE) if st.rope_theta
            else AsymmetryRecord(alpha=alphas, dtype=dt))
    return MeasureReport(
        model=str(weights.source), arch=str(arch.name), weights_hash=str(weights.weights_hash), dtype=dt,
        device=str(X0.device), n=n_rows, seed=seed if n is not None else None, input=source,
        depth=depth or L, profiles=profiles, asymmetry=asym,
        heads=heads, wo=wo, ln=lns, timings_s=timings, memory=mem, family=str(arch.family),
        wo_fibre_dim=[n_rows * (hdv - r.rank) for r in wo_recs], **extra)
