"""The planted-defect corpus: copies of the bundled model with one known defect each.

Every builder takes the real weights (``symtrans.numeric.load_model("default")``)
and returns a modified copy, made at test time (nothing is committed). Each
copy gets its own ``weights_hash`` (the base hash plus the defect's name), so
no evidence made on the real weights can be reused for it.

Defects (``PLANTED`` lists them, with what they break):

* ``silenced-heads``: heads 3 and 7 of every layer have W_O^h = 0 (their
  output is zero whatever the attention does);
* ``wo-lowrank-f32``: every layer's stacked W_O (H d_v x d_model) cut by SVD to
  rank ``WO_RANK``, its trailing singular values set to ``TRAIL_F32`` times
  ||W_O||_F: about three decades below the float32 rounding bound
  u32 ||W_O||_F and three above the float64 one, so the stored numbers have
  full exact rank while their rank at float32 storage precision is
  ``WO_RANK`` (a round trip through float32 would put rounding noise of the
  size of the bound there, and the cut would no longer be decisive);
* ``wo-lowrank-f64``: the same cut with the trailing singular values zero and
  the checkpoint declared float64 (what remains is float64 SVD noise);
* ``shared-subspace``: head 1 of every layer gets W_V^1 = W_V^0 and
  W_O^1 = M W_O^0 for a fixed invertible M, so heads 0 and 1 share one value
  subspace and one output row space;
* ``uniform-attention``: W_Q = W_K = 0 in every layer (every score row is
  constant, attention is 11^T / n);
* ``zeroed-ffn``: W_in, b_in, W_out, b_out = 0 in every layer;
* ``tiny-scale``: every tensor times 1e-3;
* ``g-applied``: a random element of the invariance group G: per-head GL
  gauges on (Q, K) (W_Q M, W_K M^-T, with the biases) and on (V, O)
  (W_V N, b_V N, N^-1 W_O) and a head permutation in every layer: the model
  computes the same function, so every verdict must be unchanged;
* ``permuted-heads``: only the head permutation;
* ``wo-singular-one``: layer 0's stacked W_O replaced by an exact product A B of two
  dyadic factors of inner size d_model - 1 (every product and partial sum is exact in
  float64), stored as float64: exactly singular (rank d_model - 1) at one layer;
* ``wo-singular-all``: the same at every layer;
* ``wo-rankdef-exact``: the exact dyadic product of inner size ``WO_RANK`` at every layer
  (exact rank ``WO_RANK``, float64);
* ``zero-ln-gain``: coordinate 0 of the gain of the norm in front of the MLP (LN1, post-LN) is 0
  in every layer: with eps > 0 LayerNorm's row Jacobian still loses exactly one direction (the
  rows of R P sum to zero, so dropping one of them keeps rank d - 1);
* ``uniform-layer``: W_Q = W_K = 0 at layer 0 only (one layer of unspecialised heads);
* ``zero-wo``: W_O = 0 in every layer (MHA(X) is identically zero);
* ``zero-pos``: the position embeddings zero and the word embeddings cut to rank ``EMB_RANK``;
* ``dff-below-kappa``: heads (1, 3) share heads (0, 2)'s value and output subspaces exactly (W_O^b = M W_O^a
  with M a signed permutation times powers of two, so the product is exact) in every
  layer (kappa = 2 d_head = 64 at n >= d_head) and the FFN cut to ``DFF_SMALL`` = 32 hidden units;
* ``shared-all-directional``: every head h of every layer gets W_V^h = W_V^0 and
  W_O^h = M_h W_O^0 (one output subspace for all heads: at n >= d_head every head's alignment
  is exactly 1), with its own W_Q, W_K (alpha_h varies).

Examples
--------
>>> sorted(PLANTED)[:3]
['dff-below-kappa', 'g-applied', 'permuted-heads']
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

#: rank the stacked W_O is cut to in the low-rank defects (H d_v = d_model = 384 in the bundled model)
WO_RANK = 320
#: trailing singular values of the float32 defect, relative to ||W_O||_F: u32 = 6e-8 sits ~2.8 decades
#: above, the float64 computation cut 384 * eps64 = 8.5e-14 ~3 decades below
TRAIL_F32 = 1e-10
SILENCED = (3, 7)
_PER_HEAD = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")

#: rank of the word embeddings in ``zero-pos``; hidden width of ``dff-below-kappa``
EMB_RANK = 64
DFF_SMALL = 32
#: grid of the dyadic factors of the exact low-rank W_O: 2^-14 (products on 2^-28, sums exact below 2^25)
_GRID = 2.0 ** 14

_BASE: dict[str, Any] = {}


def base() -> Any:
    """The bundled model's weights, loaded once per process (float64, stored as float32)."""
    if "w" not in _BASE:
        from symtrans.numeric import load_model

        _BASE["w"] = load_model("default")
    return _BASE["w"]


def copy_with(w: Any, defect: str, storage_dtype: str | None = None, **tensors: Any) -> Any:
    """A copy of ``w`` with some tensors replaced and its own weights hash (``defect`` appended)."""
    from symtrans.numeric.weights import ModelWeights

    new = dict(w.tensors)
    new.update(tensors)
    h = hashlib.sha256(f"{w.weights_hash}:{defect}".encode()).hexdigest()
    return ModelWeights(w.arch, new, w.source, h, w.dtype, w.device, w.family, w.config,
                        storage_dtype if storage_dtype is not None else w.storage_dtype)


def silenced_heads(w: Any, heads: tuple[int, ...] = SILENCED) -> Any:
    """Heads ``heads`` of every layer silenced: their W_O^h rows are all zero."""
    W_O = w.W_O.clone()
    W_O[:, list(heads)] = 0
    return copy_with(w, f"silenced-heads{heads}", W_O=W_O)


def _cut_wo(w: Any, rank: int, trail: float) -> Any:
    """Every layer's stacked W_O cut to ``rank``; trailing singular values ``trail * ||W_O||_F``."""
    L, H, dv, d = w.W_O.shape
    out = []
    for i in range(L):
        M = w.W_O[i].reshape(H * dv, d)
        U, S, Vh = torch.linalg.svd(M, full_matrices=False)
        S = S.clone()
        S[rank:] = trail * float(torch.linalg.matrix_norm(M))
        out.append(((U * S) @ Vh).reshape(H, dv, d))
    return torch.stack(out)


def wo_lowrank_f32(w: Any, rank: int = WO_RANK) -> Any:
    """Stacked W_O of rank ``rank`` at float32 storage precision, full exact rank (trailing 1e-10 ||W_O||_F)."""
    return copy_with(w, f"wo-lowrank-f32-{rank}", storage_dtype="float32", W_O=_cut_wo(w, rank, TRAIL_F32))


def wo_lowrank_f64(w: Any, rank: int = WO_RANK) -> Any:
    """Stacked W_O cut to rank ``rank`` (trailing singular values zero), declared stored in float64."""
    return copy_with(w, f"wo-lowrank-f64-{rank}", storage_dtype="float64", W_O=_cut_wo(w, rank, 0.0))


def shared_subspace(w: Any, a: int = 0, b: int = 1, seed: int = 0) -> Any:
    """Head ``b`` shares head ``a``'s value subspace and output row space (W_V^b = W_V^a, W_O^b = M W_O^a)."""
    g = torch.Generator().manual_seed(seed)
    dv = w.d_head
    M = _well_conditioned(dv, g, w.dtype)
    W_V, W_O, b_V = w.W_V.clone(), w.W_O.clone(), w.b_V.clone()
    W_V[:, b] = W_V[:, a]
    b_V[:, b] = b_V[:, a]
    W_O[:, b] = M @ W_O[:, a]
    return copy_with(w, f"shared-subspace{a},{b}", W_V=W_V, b_V=b_V, W_O=W_O)


def uniform_attention(w: Any) -> Any:
    """W_Q = W_K = 0 in every layer: every attention matrix is 11^T / n."""
    return copy_with(w, "uniform-attention", W_Q=torch.zeros_like(w.W_Q), W_K=torch.zeros_like(w.W_K))


def zeroed_ffn(w: Any) -> Any:
    """The FFN of every layer zeroed (weights and biases)."""
    return copy_with(w, "zeroed-ffn", **{k: torch.zeros_like(w.tensors[k]) for k in ("W_in", "b_in", "W_out",
                                                                                       "b_out")})


def tiny_scale(w: Any, factor: float = 1e-3) -> Any:
    """Every tensor of the model times ``factor``."""
    return copy_with(w, f"tiny-scale{factor}", **{k: v * factor for k, v in w.tensors.items()
                                                   if v is not None and v.is_floating_point()})


def _well_conditioned(k: int, g: Any, dtype: Any) -> Any:
    """Q diag(s) with Q orthogonal and s in [0.5, 2] (condition number at most 4)."""
    Q, _ = torch.linalg.qr(torch.randn(k, k, generator=g, dtype=dtype))
    s = 2.0 ** (2 * torch.rand(k, generator=g, dtype=dtype) - 1)
    return Q * s


def _permutations(L: int, H: int, g: Any) -> list[list[int]]:
    return [torch.randperm(H, generator=g).tolist() for _ in range(L)]


def permute_heads(w: Any, seed: int = 0, tag: str = "permuted-heads") -> Any:
    """Heads permuted in every layer (a fixed-seed permutation per layer): the same function."""
    g = torch.Generator().manual_seed(seed)
    perms = _permutations(w.n_layers, w.n_heads, g)
    out = {k: torch.stack([w.tensors[k][i, p] for i, p in enumerate(perms)]) for k in _PER_HEAD}
    return copy_with(w, f"{tag}{seed}", **out)


def apply_g(w: Any, seed: int = 0) -> Any:
    """A random element of G: per-head GL gauges on (Q, K) and (V, O), then a head permutation.

    (Q, K): W_Q^h M, b_Q^h M, W_K^h M^-T, b_K^h M^-T, so Q K^T is unchanged;
    (V, O): W_V^h N, b_V^h N, N^-1 W_O^h, so V^h W_O^h is unchanged. The gauges
    have condition number at most 4, so no margin moves by more than ~1.2 decades.
    """
    g = torch.Generator().manual_seed(1000 + seed)
    t = {k: w.tensors[k].clone() for k in _PER_HEAD}
    dk = w.d_head
    for i in range(w.n_layers):
        for h in range(w.n_heads):
            M = _well_conditioned(dk, g, w.dtype)
            N = _well_conditioned(dk, g, w.dtype)
            Mi_T = torch.linalg.inv(M).T
            Ni = torch.linalg.inv(N)
            t["W_Q"][i, h] = w.W_Q[i, h] @ M
            t["b_Q"][i, h] = w.b_Q[i, h] @ M
            t["W_K"][i, h] = w.W_K[i, h] @ Mi_T
            t["b_K"][i, h] = w.b_K[i, h] @ Mi_T
            t["W_V"][i, h] = w.W_V[i, h] @ N
            t["b_V"][i, h] = w.b_V[i, h] @ N
            t["W_O"][i, h] = Ni @ w.W_O[i, h]
    gauged = copy_with(w, f"gauged{seed}", **t)
    return permute_heads(gauged, seed=seed, tag=f"g-applied{seed}-")


def exact_lowrank_wo(w: Any, rank: int, layers: Any = None, tag: str = "wo-rankdef-exact") -> Any:
    """Stacked W_O of the chosen layers replaced by A B, A and B dyadic (grid 2^-14), inner size ``rank``.

    Every product of two grid numbers lies on the 2^-28 grid and every partial sum is far below 2^25,
    so float64 forms A B without rounding: its exact rank over Q is ``rank`` (A, B of full rank).
    """
    L, H, dv, d = w.W_O.shape
    W_O = w.W_O.clone()
    for i in range(L) if layers is None else layers:
        M = w.W_O[i].reshape(H * dv, d)
        U, S, Vh = torch.linalg.svd(M, full_matrices=False)
        A = torch.round(U[:, :rank] * S[:rank].sqrt() * _GRID) / _GRID
        B = torch.round(S[:rank, None].sqrt() * Vh[:rank] * _GRID) / _GRID
        W_O[i] = (A @ B).reshape(H, dv, d)
    return copy_with(w, f"{tag}{rank},{layers}", storage_dtype="float64", W_O=W_O)


def wo_singular_one(w: Any) -> Any:
    """Layer 0's stacked W_O exactly singular (exact rank d_model - 1), float64."""
    return exact_lowrank_wo(w, w.n_heads * w.d_head - 1, layers=(0,), tag="wo-singular-one")


def wo_singular_all(w: Any) -> Any:
    """Every layer's stacked W_O exactly singular (exact rank d_model - 1), float64."""
    return exact_lowrank_wo(w, w.n_heads * w.d_head - 1, tag="wo-singular-all")


def wo_rankdef_exact(w: Any, rank: int = WO_RANK) -> Any:
    """Every layer's stacked W_O of exact rank ``rank`` (float64)."""
    return exact_lowrank_wo(w, rank)


def zero_ln_gain(w: Any, coords: tuple[int, ...] = (0,)) -> Any:
    """The MLP-side norm's gain (LN1 of a post-LN layer) zero at ``coords`` in every layer."""
    g = w.ln1_w.clone()
    g[:, list(coords)] = 0
    return copy_with(w, f"zero-ln-gain{coords}", ln1_w=g)


def uniform_layer(w: Any, layer: int = 0) -> Any:
    """W_Q = W_K = 0 at one layer only: its heads are not specialised, the other layers' heads are."""
    W_Q, W_K = w.W_Q.clone(), w.W_K.clone()
    W_Q[layer] = 0
    W_K[layer] = 0
    return copy_with(w, f"uniform-layer{layer}", W_Q=W_Q, W_K=W_K)


def zero_wo(w: Any) -> Any:
    """W_O = 0 in every layer: MHA(X) is identically zero."""
    return copy_with(w, "zero-wo", W_O=torch.zeros_like(w.W_O))


def zero_pos(w: Any, rank: int = EMB_RANK) -> Any:
    """Position embeddings zero; word embeddings cut to rank ``rank`` (truncated SVD)."""
    U, S, Vh = torch.linalg.svd(w.word, full_matrices=False)
    word = (U[:, :rank] * S[:rank]) @ Vh[:rank]
    return copy_with(w, f"zero-pos{rank}", word=word, pos=torch.zeros_like(w.pos))


def _exact_gauge(k: int, g: Any, dtype: Any) -> Any:
    """A signed permutation times powers of two (2^-1, 1, 2): M W is exact in any binary float format."""
    P = torch.eye(k, dtype=dtype)[torch.randperm(k, generator=g)]
    signs = torch.where(torch.rand(k, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    scale = 2.0 ** torch.randint(-1, 2, (k,), generator=g).to(dtype)
    return P * (signs * scale)[:, None]


def _share(w: Any, pairs: Any, seed: int) -> dict[str, Any]:
    """W_V^b = W_V^a, b_V^b = b_V^a, W_O^b = M W_O^a (M an exact gauge) for every (a, b) of ``pairs``, every layer.

    M is a signed permutation times powers of two, so M W_O^a is exact: the stored numbers of heads a
    and b span exactly the same row space, at any storage precision.
    """
    g = torch.Generator().manual_seed(seed)
    W_V, W_O, b_V = w.W_V.clone(), w.W_O.clone(), w.b_V.clone()
    for a, b in pairs:
        M = _exact_gauge(w.d_head, g, w.dtype)
        W_V[:, b] = W_V[:, a]
        b_V[:, b] = b_V[:, a]
        W_O[:, b] = M @ W_O[:, a]
    return {"W_V": W_V, "b_V": b_V, "W_O": W_O}


def dff_below_kappa(w: Any, width: int = DFF_SMALL) -> Any:
    """Heads 1, 3 share heads 0, 2's subspaces (kappa = 2 d_head at n >= d_head); the FFN cut to ``width`` units."""
    import dataclasses

    t = _share(w, ((0, 1), (2, 3)), seed=3)
    t.update(W_in=w.W_in[:, :, :width].clone(), b_in=w.b_in[:, :width].clone(),
             W_out=w.W_out[:, :width].clone())
    out = copy_with(w, f"dff-below-kappa{width}", **t)
    out.arch = dataclasses.replace(w.arch, d_ff=width)
    return out


def shared_all_directional(w: Any) -> Any:
    """Every head shares head 0's value and output subspace; each keeps its own W_Q, W_K (directional keys)."""
    return copy_with(w, "shared-all-directional", **_share(w, [(0, h) for h in range(1, w.n_heads)], seed=4))


def rounded(w: Any, dtype: Any, tag: str, names: tuple[str, ...] | None = None) -> Any:
    """A copy with tensors ``names`` (default: every floating tensor) rounded to ``dtype`` and declared stored so.

    With ``names`` the rest keeps its storage dtype and the named tensors get a per-tensor storage dtype
    (``storage_dtypes``), as a checkpoint that stores only those in ``dtype``.
    """
    dt = getattr(torch, dtype)
    keys = names if names is not None else [k for k, v in w.tensors.items() if v is not None and v.is_floating_point()]
    out = copy_with(w, tag, storage_dtype=None if names is not None else dtype,
                    **{k: w.tensors[k].to(dt).to(w.tensors[k].dtype) for k in keys})
    if names is not None:
        out.storage_dtypes = {**(w.storage_dtypes or {}), **{k: (dtype,) * w.n_layers for k in names}}
    return out


def wo_lowrank_half(w: Any, dtype: str = "float16") -> Any:
    """``wo-lowrank-f32`` with every tensor rounded to ``dtype`` (a float16 or bfloat16 checkpoint)."""
    return rounded(wo_lowrank_f32(w), dtype, f"wo-lowrank-{dtype}")


def wo_f16_in_f32(w: Any) -> Any:
    """``wo-lowrank-f32`` with only W_O stored as float16 (the rest float32)."""
    return rounded(wo_lowrank_f32(w), "float16", "wo-f16-in-f32", names=("W_O",))


def wo_lowrank_gauged(w: Any) -> Any:
    """A random element of G applied to ``wo-lowrank-f32``, then stored as float32 (per-head tensors rounded)."""
    return rounded(apply_g(wo_lowrank_f32(w), seed=5), "float32", "wo-lowrank-gauged", names=_PER_HEAD)


#: where ``wo-near-cut`` puts the trailing singular values, in units of the float32 storage cut
NEAR_CUT = 3.0


def wo_near_cut(w: Any, rank: int = WO_RANK) -> Any:
    """Trailing singular values of every stacked W_O at ``NEAR_CUT`` x the float32 storage cut, stored as float32.

    The cut is ``(u32 + max(m, n) eps64) ||W_O||_F`` (:func:`symtrans.numeric.linalg.storage_cut`); the
    float32 rounding adds at most one cut to each singular value (Weyl), so they end in [2, 4] cuts: inside
    the one-decade band on either side, whatever the rounding. The rank at storage precision is undecided.
    """
    from symtrans.numeric.linalg import storage_cut

    d = w.n_heads * w.d_head
    rel = NEAR_CUT * storage_cut(1.0, "float32", (d, w.d_model))[0]
    cut = copy_with(w, f"wo-near-cut-{rank}", storage_dtype="float32", W_O=_cut_wo(w, rank, rel))
    return rounded(cut, "float32", f"wo-near-cut-{rank}-f32", names=("W_O",))


#: name -> (builder, what it breaks); ``real`` is the unmodified model, for comparison
PLANTED: dict[str, tuple[Any, str]] = {
    "real": (lambda w: w, "nothing: the bundled model"),
    "silenced-heads": (silenced_heads, "heads 3 and 7 of every layer output zero (W_O^h = 0)"),
    "wo-lowrank-f32": (wo_lowrank_f32, f"stacked W_O of rank {WO_RANK} at float32 storage precision"),
    "wo-lowrank-f64": (wo_lowrank_f64, f"stacked W_O of rank {WO_RANK}, stored as float64"),
    "shared-subspace": (shared_subspace, "heads 0 and 1 share one value and output subspace"),
    "uniform-attention": (uniform_attention, "W_Q = W_K = 0: uniform attention, A^h = 11^T/n singular"),
    "zeroed-ffn": (zeroed_ffn, "no FFN"),
    "tiny-scale": (tiny_scale, "every weight times 1e-3"),
    "g-applied": (apply_g, "a random element of G: the same function"),
    "permuted-heads": (permute_heads, "heads permuted: the same function"),
    "wo-singular-one": (wo_singular_one, "layer 0's stacked W_O exactly singular (float64)"),
    "wo-singular-all": (wo_singular_all, "every layer's stacked W_O exactly singular (float64)"),
    "wo-rankdef-exact": (wo_rankdef_exact, f"stacked W_O of exact rank {WO_RANK} (float64)"),
    "zero-ln-gain": (zero_ln_gain, "LN1 gain zero at coordinate 0 (every layer)"),
    "uniform-layer": (uniform_layer, "W_Q = W_K = 0 at layer 0 only"),
    "zero-wo": (zero_wo, "W_O = 0: MHA identically zero"),
    "zero-pos": (zero_pos, f"position embeddings zero, word embeddings of rank {EMB_RANK}"),
    "dff-below-kappa": (dff_below_kappa, f"kappa = 64 at n >= 32 and d_ff = {DFF_SMALL}"),
    "shared-all-directional": (shared_all_directional, "one output subspace for all heads, directional keys"),
    "wo-lowrank-f16": (wo_lowrank_half, f"wo-lowrank-f32 stored as float16: rank {WO_RANK} or undecided"),
    "wo-lowrank-bf16": (lambda w: wo_lowrank_half(w, "bfloat16"), "wo-lowrank-f32 stored as bfloat16"),
    "wo-f16-in-f32": (wo_f16_in_f32, "wo-lowrank-f32 with only W_O stored as float16"),
    "wo-lowrank-gauged": (wo_lowrank_gauged, "a random element of G on wo-lowrank-f32, stored as float32"),
    "wo-near-cut": (wo_near_cut, f"trailing singular values of W_O at {NEAR_CUT:g}x the float32 cut: undecided"),
}


def build(name: str) -> Any:
    """The planted model ``name`` built from the bundled weights (single-threaded: small SVDs)."""
    from symtrans.numeric.measure import single_threaded

    with single_threaded():
        return PLANTED[name][0](base())


def max_output_change(w1: Any, w2: Any, n: int = 8, seed: int = 0) -> float:
    """Relative change of the final hidden states between two models on the same seeded tokens."""
    from symtrans.numeric import encode

    a = encode(w1, n=n, seed=seed).layers[-1].out
    b = encode(w2, n=n, seed=seed).layers[-1].out
    return float((a - b).norm() / a.norm())
