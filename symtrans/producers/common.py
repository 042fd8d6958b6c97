"""Shared plumbing for the numeric checks: one model load, one forward, evidence records.

Every check module asks this module for the model weights and the forward
trace of the context, so a whole ``symtrans check`` run loads the model once
and runs one forward pass at ``ctx.n`` (cached in ``ctx.cache``). A test can
preload a deliberately broken :class:`~symtrans.numeric.ModelWeights`
(``Context.preload``) to see a check fail.

Examples
--------
>>> from symtrans.context import Context
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

from symtrans.precision import DECISIVE_MARGIN, dtype_name
from symtrans.context import Context
from symtrans.evidence import Evidence, Tolerance, Verdict

__all__ = ["ENCODERS", "DECODERS", "LAYERNORM_FAMILIES", "LEARNED_POSITION_FAMILIES", "FAMILIES_NOTE",
           "family_table",
           "weights", "trace", "lean_encode", "record", "rank_tolerance", "versions", "log_margin",
           "random_weights", "FLOAT64_NOTE", "RANK_TOLERANCE", "eps_text"]

#: model families by structure, for ``producer(..., families=...)`` (``ModelWeights.family``; mistral is llama)
ENCODERS = ("bert", "roberta", "distilbert")
DECODERS = ("gpt2", "llama", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "olmo2", "gpt_neox", "smollm3")
#: tests/test_report_decoders.py checks both against each family's Architecture (norm, positional)
LAYERNORM_FAMILIES = ENCODERS + ("gpt2", "gpt_neox")  # the others use RMSNorm
LEARNED_POSITION_FAMILIES = ENCODERS + ("gpt2",)  # the others use rotary positions
FAMILIES_NOTE = {
    "layernorm": "the statement is about LayerNorm (centre, then scale); RMSNorm (Llama, Mistral, Qwen2 and 3, "
                 "Gemma 2 and 3, OLMo 2, Phi-3, SmolLM3) only scales, so its hypotheses and conclusion do not "
                 "transfer",
    "bidirectional": "Dong et al.'s collapse theorem is proved for unmasked self-attention; under a causal mask "
                     "A^h is lower triangular and the first token attends only to itself (it never mixes), "
                     "which their bound does not cover (symtrans measure reports res(x_1) for decoders)",
    "learned-positions": "PG-OP's gates are functions of the learned position embeddings; a rotary-position "
                         "model (Llama, Mistral, Qwen2 and 3, Gemma 2 and 3, OLMo 2, Phi-3, GPT-NeoX, SmolLM3) "
                         "has no position table to gate with",
}

def family_table() -> list[str]:
    """Markdown table: each model-based producer, the families it runs on, and why where not all.

    Generated from the registrations (``producer(..., families=...)``); docs/decoders.md shows it
    (a ``gen:family-table`` block of ``docs/gen.py``, checked by tests/test_docs_gen.py).

    Examples
    --------
    >>> rows = family_table()
    >>> rows[0].startswith("| claim | producer |"), any("lit-dong" in r and "causal" in r for r in rows)
    (True, True)
    """
    from symtrans.runner import registry

    reg = registry()
    fams = ENCODERS + DECODERS
    head = "| claim | producer | " + " | ".join(fams) + " | where not: why |"
    rows = [head, "|" + "---|" * (len(fams) + 3)]
    for claim in sorted(reg):
        for p in sorted(reg[claim], key=lambda p: p.name):  # by name: one order for the table
            if not p.needs_model:
                continue
            ok = [p.families is None or f in p.families for f in fams]
            why = "" if all(ok) else (p.applies_to or "")
            rows.append(f"| {claim} | {p.name} | " + " | ".join("yes" if o else "**no**" for o in ok)
                        + f" | {why} |")
    return rows


def unmasked_note(w: Any) -> str:
    """What evaluating the paper's unmasked MHA with this model's weights leaves out (empty on an encoder).

    The paper states its Section 5 results for bidirectional softmax attention;
    on a causal decoder the producers that test them evaluate that map with the
    decoder's weights, and say so in the record's form.

    Examples
    --------
    >>> unmasked_note(weights(Context(model="default")))
    ''
    """
    from symtrans.numeric.forward import structure

    st = structure(w)
    if not st.causal:
        return ""
    windows = sorted({w for _, w in st.per_layer if w}) if st.per_layer else []
    left = ["the causal mask"] + ([f"the sliding window of {st.sliding_window}"] if st.sliding_window else []) \
        + ([f"the sliding window of {windows[0]} on the local layers"] if windows else []) \
        + (["rotary positions"] if st.rope_theta or st.per_layer else []) \
        + (["the query/key norms"] if st.qk_norm else []) + (["the post-norms"] if st.post_norms else [])
    return ("; on this causal decoder the paper's unmasked map is evaluated with its weights: "
            + ", ".join(left) + " not applied (the paper's statement is about unmasked attention)")


FLOAT64_NOTE = "rank decisions are taken in float64 on weights converted from the stored float32"


def eps_text(ctx: Context) -> str:
    """The norms' eps the analysis uses, and whose it is: ``"eps = 1e-12 (the checkpoint's)"`` or ``"(--eps)"``.

    Examples
    --------
    >>> eps_text(Context(model="default")), eps_text(Context(model="default", eps=0))
    ("eps = 1e-12 (the checkpoint's)", "eps = 0 (--eps: the paper's eps-free norm)")
    """
    if ctx.eps is not None:
        return f"eps = {ctx.eps:g} (--eps" + (": the paper's eps-free norm)" if ctx.eps == 0 else ")")
    return f"eps = {float(weights(ctx).arch.ln_eps):g} (the checkpoint's)"


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
    if layers is None and ctx.layers is not None:  # --layers: the forward runs up to the last layer listed
        layers = max(ctx.layers) + 1
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

    from symtrans.numeric.forward import Trace, embed_input, encode, layer_forward, norm, structure
    from symtrans.numeric.weights import StreamedWeights

    st = structure(w)
    if st.form == "pre-ln" and not isinstance(w, StreamedWeights):
        return encode(w, n=n, seed=seed, layers=layers)  # decoders in memory: the full trace of their own forward
    X, ids = embed_input(w, n=n, seed=seed)
    count = w.n_layers if layers is None else layers
    out, h = [], X
    with torch.no_grad():
        for i in range(count):
            t = layer_forward(h, w.layer(i, shared_kv=True), st.at(i))
            out.append(_LeanLayerTrace(w, i, t))
            h = t.out
            del t
        final = (norm(h, w.final_ln_w, w.final_ln_b, st) if st.final_norm and count == w.n_layers and count > 0
                 else None)
    return Trace(embeddings=X, layers=out, input_ids=ids, final=final)


class _LeanLayerTrace:
    """A :class:`~symtrans.numeric.forward.LayerTrace` holding the small fields; the rest recomputed on read."""

    # A is kept (H n^2 floats a layer, 2 MB at BERT-large size): recomputing it costs the layer's Q/K/V projections
    # (pre-LN decoders, streamed: attn_in, N1(X), is kept too; their pre_ln2 is out)
    _KEPT = ("X", "A", "Y", "mha", "pre_ln1", "pre_ln2", "out", "form", "attn_in", "parallel")

    def __init__(self, w: Any, i: int, t: Any):
        self._w, self._i = w, i
        for f in self._KEPT:
            setattr(self, f, getattr(t, f))

    @property
    def norm_inputs(self) -> dict[str, Any]:
        """The input of each of the layer's two norms (:attr:`LayerTrace.norm_inputs`, its one home)."""
        from symtrans.numeric.forward import LayerTrace

        return LayerTrace.norm_inputs.fget(self)  # type: ignore[attr-defined]

    def _full(self) -> Any:
        import torch

        from symtrans.numeric.forward import layer_forward, structure

        with torch.no_grad():
            return layer_forward(self.X, self._w.layer(self._i, shared_kv=True), structure(self._w).at(self._i))

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


#: the one decisiveness rule (symtrans.decide.DECISIVE_MARGIN) as the tolerance of every rank and hypothesis
#: decision of the checks
RANK_TOLERANCE = Tolerance(DECISIVE_MARGIN, "one decisiveness rule for every rank and hypothesis decision: the "
                           "singular values on both sides of the cut (float64 computation: max(m, n) eps64 sigma_max, "
                           "the LAPACK convention, affine ranks relative to sigma_max of X itself; stored weights: the "
                           "Weyl bound of rounding to the tensor's storage dtype), or a hypothesis' measured value, must "
                           f"sit at least {DECISIVE_MARGIN:g} decade from the threshold; inside that band the decision "
                           "is inconclusive", "decades")


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
    fields.setdefault("dtype", dtype_name(w.dtype) if w is not None else ctx.dtype)
    fields.setdefault("model", ctx.model)
    fields.setdefault("weights_hash", w.weights_hash if w is not None else None)
    fields.setdefault("seed", ctx.seed)
    fields.setdefault("versions", versions())
    return Evidence(claim=claim, producer=producer, kind="numeric", verdict=Verdict(verdict),
                    summary=summary, **fields)


def sanity(records: list[Evidence]) -> list[Evidence]:
    """The records marked as sanity checks (``counted=False``): a check that cannot fail on any legal input.

    Such a record is shown in every output and counted as ``not-run``
    (:attr:`~symtrans.evidence.Evidence.not_counted_note`); docs/planted-corpus.md lists them and why.

    Examples
    --------
    >>> e = Evidence(claim="prop-5.4", producer="p", kind="numeric", verdict="supported", summary="s")
    >>> [r.counted for r in sanity([e])]
    [False]
    """
    import dataclasses

    return [dataclasses.replace(e, counted=False) for e in records]


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
from symtrans.numeric.linalg import storage_ranks  # noqa: E402  (the rank of stored matrices: one home)
from symtrans.numeric.weights import storage_precision  # noqa: E402  (its one home: per tensor, per layer)



from symtrans.precision import finite  # noqa: E402  (its one home)

__all__ += ["storage_precision", "storage_ranks", "finite"]
