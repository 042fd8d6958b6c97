"""Shared plumbing for the numeric checks: one model load, one forward, evidence records.

Every check module asks this module for the model weights and the forward
trace of the context, so a whole ``symtrans check`` run loads the model once
and runs one forward pass at ``ctx.n`` (cached in ``ctx.cache``). A test can
preload a deliberately broken :class:`~symtrans.numeric.ModelWeights`
(``Context.preload``) to see a check fail.

Examples
--------
>>> from symtrans.evidence import Context
>>> ctx = Context(model="default", n=8)
>>> weights(ctx) is weights(ctx)
True
>>> tuple(trace(ctx).layers[0].X.shape)
(8, 384)
"""

from __future__ import annotations

import math
import platform
from typing import Any

from symtrans.evidence import Context, Evidence, Tolerance, Verdict

__all__ = ["ENCODERS", "DECODERS", "LAYERNORM_FAMILIES", "LEARNED_POSITION_FAMILIES", "FAMILIES_NOTE",
           "family_table",
           "weights", "trace", "lean_encode", "record", "rank_tolerance", "versions", "log_margin",
           "random_weights", "FLOAT64_NOTE", "gap", "decisive", "DECISIVE_GAP", "GAP_TOLERANCE"]

#: model families by structure, for ``producer(..., families=...)`` (``ModelWeights.family``; mistral is llama)
ENCODERS = ("bert", "roberta", "distilbert")
DECODERS = ("gpt2", "llama", "qwen2")
LAYERNORM_FAMILIES = ENCODERS + ("gpt2",)  # the Llama family uses RMSNorm
LEARNED_POSITION_FAMILIES = ENCODERS + ("gpt2",)  # the Llama family uses rotary positions
FAMILIES_NOTE = {
    "layernorm": "the statement is about LayerNorm (centre, then scale); RMSNorm (Llama, Mistral, Qwen2) "
                 "only scales, so its hypotheses and conclusion do not transfer",
    "bidirectional": "Dong et al.'s collapse theorem is proved for unmasked self-attention; under a causal mask "
                     "A^h is lower triangular and the first token attends only to itself (it never mixes), "
                     "which their bound does not cover (symtrans measure reports res(x_1) for decoders)",
    "learned-positions": "PG-OP's gates are functions of the learned position embeddings; a rotary-position "
                         "model (Llama, Mistral, Qwen2) has no position table to gate with",
}

def family_table() -> list[str]:
    """Markdown table: each model-based producer, the families it runs on, and why where not all.

    Generated from the registrations (``producer(..., families=...)``); the
    README pastes it and a test keeps the two identical.

    Examples
    --------
    >>> rows = family_table()
    >>> rows[0].startswith("| claim | producer |"), any("lit-dong" in r and "causal" in r for r in rows)
    (True, True)
    """
    from symtrans.evidence import PRODUCERS
    from symtrans.runner import _import_producer_modules

    _import_producer_modules()
    fams = ENCODERS + DECODERS
    head = "| claim | producer | " + " | ".join(fams) + " | where not: why |"
    rows = [head, "|" + "---|" * (len(fams) + 3)]
    for claim in sorted(PRODUCERS):
        for p in sorted(PRODUCERS[claim], key=lambda p: p.name):  # not registration order: that follows imports
            if not p.needs_model:
                continue
            ok = [p.families is None or f in p.families for f in fams]
            why = "" if all(ok) else (p.applies_to or "")
            rows.append(f"| {claim} | {p.name} | " + " | ".join("yes" if o else "**no**" for o in ok)
                        + f" | {why} |")
    return rows


FLOAT64_NOTE = "rank decisions are taken in float64 on weights converted from the stored float32"


def weights(ctx: Context) -> Any:
    """The context's model weights, loaded once per context (see :meth:`Context.weights`).

    Examples
    --------
    >>> weights(Context(model="default")).n_heads
    12
    """
    return ctx.weights()


def trace(ctx: Context, n: int | None = None, layers: int | None = None) -> Any:
    """The forward trace on ``n`` seeded random tokens (default ``ctx.n``), cached per (n, layers).

    Examples
    --------
    >>> ctx = Context(model="default", n=6)
    >>> trace(ctx) is trace(ctx), len(trace(ctx, n=5, layers=1).layers)
    (True, 1)
    """
    n = ctx.n if n is None else n
    key = ("trace", n, layers, ctx.seed)
    if key not in ctx.cache:
        full = ctx.cache.get(("trace", n, None, ctx.seed))
        if full is not None:  # a full trace also serves a shorter one
            ctx.cache[key] = full
        else:
            ctx.cache[key] = lean_encode(weights(ctx), n=n, seed=ctx.seed, layers=layers)
    return ctx.cache[key]


def lean_encode(w: Any, *, n: int, seed: int = 0, layers: int | None = None) -> Any:
    """:func:`~symtrans.numeric.forward.encode` on ``n`` seeded random tokens, keeping only what checks read.

    Each layer keeps ``X``, ``A``, ``Y``, ``mha``, ``pre_ln1``, ``pre_ln2`` and ``out``
    (``out`` is the next layer's ``X``: one tensor). ``YO`` (``[H, n, d_model]``,
    the largest internal), ``X1`` and ``ffn`` are recomputed from the
    kept input and the layer's weights when read, with the same operations, so
    a cached trace costs about a third of the full one. Layers are computed
    one at a time; no layer's full internals outlive it.

    Examples
    --------
    >>> from symtrans.numeric import encode, load_model
    >>> w = load_model("default")
    >>> lean, full = lean_encode(w, n=6), encode(w, n=6)
    >>> all(bool((getattr(lean.layers[i], f) == getattr(full.layers[i], f)).all())
    ...     for i in range(6) for f in ("A", "Y", "YO", "mha", "X1", "ffn", "out"))
    True
    """
    import torch

    from symtrans.numeric.forward import Trace, embed_input, encode, encoder_layer, structure

    if structure(w).form == "pre-ln":  # decoders: the full trace of their own (causal, pre-LN) forward
        return encode(w, n=n, seed=seed, layers=layers)
    X, ids = embed_input(w, n=n, seed=seed)
    count = w.n_layers if layers is None else layers
    out, h = [], X
    with torch.no_grad():
        for i in range(count):
            t = encoder_layer(h, w.layer(i), w.arch.ln_eps, w.arch.activation)
            out.append(_LeanLayerTrace(w, i, t))
            h = t.out
            del t
    return Trace(embeddings=X, layers=out, input_ids=ids)


class _LeanLayerTrace:
    """A :class:`~symtrans.numeric.forward.LayerTrace` holding the small fields; the rest recomputed on read."""

    # A is kept (H n^2 floats a layer, 2 MB at BERT-large size): recomputing it costs the layer's Q/K/V projections
    _KEPT = ("X", "A", "Y", "mha", "pre_ln1", "pre_ln2", "out")

    def __init__(self, w: Any, i: int, t: Any):
        self._w, self._i = w, i
        for f in self._KEPT:
            setattr(self, f, getattr(t, f))

    def _full(self) -> Any:
        import torch

        from symtrans.numeric.forward import encoder_layer

        with torch.no_grad():
            return encoder_layer(self.X, self._w.layer(self._i), self._w.arch.ln_eps, self._w.arch.activation)

    @property
    def YO(self) -> Any:  # noqa: N802 - the LayerTrace field name
        """``Y^h W_O^h`` per head, recomputed as in the forward pass."""
        with __import__("torch").no_grad():
            return self.Y @ self._w.layer(self._i)["W_O"]

    X1 = property(lambda self: self._full().X1, doc="LN1 output, recomputed.")
    ffn = property(lambda self: self._full().ffn, doc="FFN output, recomputed.")


def versions() -> dict[str, str]:
    """Versions of the software a numeric verdict depends on.

    Examples
    --------
    >>> sorted(versions())
    ['python', 'torch']
    """
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__}


#: a rank decision counts (as support or as a counterexample) only when the singular
#: values on the two sides of the cut are at least this many decades apart.
DECISIVE_GAP = 3.0

GAP_TOLERANCE = Tolerance(DECISIVE_GAP, "a rank counts only when sigma_r / sigma_{r+1} >= 1e3 at the "
                          "cut max(m, n) * eps * sigma_max: then the rank does not depend on where in "
                          "the gap the cut sits; smaller gaps are reported as inconclusive", "decades")


def gap(rec: Any) -> float:
    """Decades between the singular values on the two sides of a rank record's cut.

    With no singular value below the cut (full rank) it is the decades from
    ``sigma_r`` down to the cut; with none above (rank 0), from the cut down to
    ``sigma_1``; an exact zero below the cut gives ``inf``.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.linalg import rank_from_singular_values
    >>> rec = rank_from_singular_values(torch.tensor([1.0, 1e-9, 1e-20], dtype=torch.float64), (3, 3), torch.float64)
    >>> rec.rank, round(gap(rec), 6)
    (2, 11.0)
    >>> round(gap(rank_from_singular_values(torch.tensor([1.0, 1.0], dtype=torch.float64), (2, 2), torch.float64)), 2)
    15.35
    """
    above, below = rec.sigma_above, rec.sigma_below
    if above is None or below is None:
        return rec.margin
    if below <= 0:
        return math.inf
    return math.log10(above / below)


def decisive(*recs: Any) -> bool:
    """True when every record's spectral gap at the cut is at least :data:`DECISIVE_GAP`.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.linalg import numerical_rank
    >>> decisive(numerical_rank(torch.eye(3, dtype=torch.float64)))
    True
    """
    return all(gap(r) >= DECISIVE_GAP for r in recs)


def rank_tolerance(rec: Any) -> Tolerance:
    """A :class:`Tolerance` from a :class:`~symtrans.numeric.linalg.RankRecord`.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.linalg import numerical_rank
    >>> rank_tolerance(numerical_rank(torch.eye(2, dtype=torch.float64))).relative_to
    'sigma_max'
    """
    return Tolerance(rec.rtol, rec.tolerance_reason, "sigma_max")


def log_margin(value: float, threshold: float) -> float:
    """Decades between a measured ``value`` and its ``threshold`` (``inf`` when value is 0).

    Examples
    --------
    >>> round(log_margin(1e-12, 1e-9), 6)
    3.0
    """
    if value <= 0:
        return math.inf
    return abs(math.log10(threshold / value))


def record(ctx: Context, claim: str, producer: str, verdict: Verdict | str, summary: str, **fields: Any) -> Evidence:
    """Build numeric :class:`Evidence` carrying the model, weights hash, seed, dtype and versions.

    Examples
    --------
    >>> ctx = Context(model="default", n=4)
    >>> _ = weights(ctx)
    >>> e = record(ctx, "thm-4.2", "demo", "supported", "s", inputs={"n": 4})
    >>> e.model, len(e.weights_hash), e.dtype
    ('default', 64, 'float64')
    """
    w = ctx.loaded_weights()
    fields.setdefault("dtype", str(w.dtype).replace("torch.", "") if w is not None else ctx.dtype)
    fields.setdefault("model", ctx.model)
    fields.setdefault("weights_hash", w.weights_hash if w is not None else None)
    fields.setdefault("seed", ctx.seed)
    fields.setdefault("versions", versions())
    return Evidence(claim=claim, producer=producer, kind="numeric", verdict=Verdict(verdict),
                    summary=summary, **fields)


def random_weights(arch_name: str, seed: int = 0, names: tuple[str, ...] = ("W_O",)) -> dict[str, Any]:
    """Seeded Gaussian weights of a preset's shapes (per-head layout, one layer), float64.

    Used where only shapes matter (fibre dimensions at BertBase sizes): no
    download, and the sizes come from :func:`symtrans.arch.get_arch`.

    Examples
    --------
    >>> tuple(random_weights("bert-base")["W_O"].shape)
    (12, 64, 768)
    """
    import torch

    from symtrans.arch import get_arch

    a = get_arch(arch_name)
    H, d, dk, dv = int(a.H), int(a.d_model), int(a.d_k), int(a.d_v)
    shapes = {"W_Q": (H, d, dk), "W_K": (H, d, dk), "W_V": (H, d, dv), "W_O": (H, dv, d)}
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(shapes[k], generator=g, dtype=torch.float64) / math.sqrt(d) for k in names}


# ----------------------------------------------------------------- storage precision (additive: checks678)
def storage_precision(w: Any) -> tuple[str, str]:
    """The dtype the weights were stored in, and a note saying where it came from.

    Rank decisions on stored weights are made at this precision
    (:func:`~symtrans.numeric.linalg.storage_rank`). When the weights do not
    say (a hand-built copy), the in-memory dtype is used and the note says so.

    Examples
    --------
    >>> storage_precision(weights(Context(model="default")))[0]
    'float32'
    """
    sd = getattr(w, "storage_dtype", None)
    if sd:
        name = str(sd).replace("torch.", "")
        return name, f"the checkpoint stores these weights as {name}"
    name = str(w.dtype).replace("torch.", "")
    return name, f"storage dtype not recorded: the in-memory dtype {name} is taken as the storage precision"


def storage_ranks(batch: Any, storage_dtype: Any, *, certify: bool = False) -> list[Any]:
    """:func:`~symtrans.numeric.linalg.storage_rank` of every matrix of a batch ``[..., m, n]`` (one batched SVD).

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

    from symtrans.numeric.linalg import (DECISIVE_MARGIN, _torch_dtype, full_rank_certificate,
                                         rank_from_singular_values, storage_cut, svdvals)

    W = torch.as_tensor(batch).to(torch.float64)
    shape = (int(W.shape[-2]), int(W.shape[-1]))
    W = W.reshape(-1, *shape)
    norms = torch.linalg.matrix_norm(W).cpu()
    name = str(_torch_dtype(storage_dtype)).replace("torch.", "")
    out: list[Any] = [None] * W.shape[0]
    if certify:
        for k in range(W.shape[0]):
            rec = full_rank_certificate(W[k], margin=DECISIVE_MARGIN + 0.5,
                                        cut=storage_cut(float(norms[k]), storage_dtype, shape))
            if rec is not None:
                out[k] = dataclasses.replace(rec, precision=f"{name} storage rounding (Cholesky certificate)")
    rest = [k for k in range(W.shape[0]) if out[k] is None]
    svals = svdvals(W[rest]).cpu() if rest else []
    for k, s in zip(rest, svals):
        cut, why = storage_cut(float(norms[k]), storage_dtype, shape)
        smax = float(s[0]) if s.numel() else 0.0
        rec = rank_from_singular_values(s, shape, torch.float64, rtol=cut / smax if smax > 0 else 0.0, reason=why)
        out[k] = dataclasses.replace(rec, precision=f"{name} storage rounding")
    return out


_PRIMES = (2147483629, 2147483587)


def exact_rank(M: Any) -> tuple[int, str]:
    """Exact rank over Q of the numbers held in ``M`` (every float is a dyadic rational), with the method.

    Each entry is ``m 2^e`` with an integer mantissa ``m``; scaling by a common
    power of two gives an integer matrix of the same rank. The rank modulo a
    large prime is a lower bound of the rank over Q (a non-zero minor mod p is
    a non-zero integer minor); when it is not already full, python-flint's
    exact ``fmpz_mat`` rank decides for small matrices, and larger ones get the
    modular lower bound, said so in the method.

    Examples
    --------
    >>> import torch
    >>> M = torch.tensor([[1.0, 2.0], [2.0, 4.0 + 2.0 ** -40]], dtype=torch.float64)
    >>> exact_rank(M)[0], exact_rank(torch.tensor([[1.0, 2.0], [0.5, 1.0]], dtype=torch.float64))[0]
    (2, 1)
    """
    import flint
    import numpy as np
    import torch

    A = torch.as_tensor(M).to(torch.float64).cpu()
    m, n = int(A.shape[0]), int(A.shape[1])
    mant, expo = torch.frexp(A)  # A = mant * 2^expo, |mant| in [0.5, 1)
    ints = (mant * 2.0 ** 53).to(torch.int64)  # exact: a float64 mantissa has 53 bits
    nz = ints != 0
    if not bool(nz.any()):
        return 0, "all entries are exactly 0"
    e = (expo - 53).masked_fill(~nz, 0)
    shift = int(e[nz].min())
    full = min(m, n)
    best = 0
    for p in _PRIMES:
        k = (e - shift).flatten().numpy()
        table = np.ones(int(k.max()) + 1, dtype=np.int64)
        for j in range(1, len(table)):
            table[j] = table[j - 1] * 2 % p
        vals = (ints.flatten().numpy() % p) * table[k] % p  # < 2^62: no int64 overflow
        best = max(best, flint.nmod_mat(m, n, vals.tolist(), p).rank())
        if best == full:
            return best, f"rank modulo the prime {p} of the matrix scaled to integers (a lower bound, here full)"
    if m * n > EXACT_RANK_MAX_ENTRIES:  # fraction-free elimination on ~2^100 entries is too slow here
        return best, (f"at least {best}: rank modulo the primes {_PRIMES} of the matrix scaled to integers (a lower "
                      "bound of the exact rank; the exact integer rank was not computed at this size)")
    vals = [int(a) << (int(k) - shift) for a, k in zip(ints.flatten().tolist(), e.flatten().tolist())]
    return int(flint.fmpz_mat(m, n, vals).rank()), "exact integer rank (python-flint fmpz_mat) of the matrix scaled to integers"


#: largest matrix (entries) whose exact integer rank :func:`exact_rank` computes when the modular rank is not full
EXACT_RANK_MAX_ENTRIES = 64 * 64


def finite(x: Any) -> float | None:
    """``float(x)`` when finite, else None: records carry no NaN or Infinity.

    Examples
    --------
    >>> finite(2), finite(float("inf")), finite(None)
    (2.0, None, None)
    """
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


__all__ += ["storage_precision", "storage_ranks", "exact_rank", "finite"]
