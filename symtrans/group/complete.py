"""Measured completeness of G: the dimension of the continuous stabiliser, from a Jacobian's null space.

For a small random instance of an architecture's family (the same structural
flags: norm placement and kind, biases, grouped-query ratio, rotary positions,
activation, FFN kind; reduced sizes, stated in the record) the map of a *scope*
is differentiated with respect to all its parameters, over enough random
inputs, in float64 (reverse mode over a ``vmap`` of the inputs,
:func:`symtrans.numeric.autodiff.jacobian`):

* ``layers`` -- the layer stack and the final norm, if any: hidden states in,
  last hidden state out;
* ``model`` -- embeddings included: token ids (and token types) in, the last
  hidden state out, or the logits of the output head for causal language
  models (tied to the word embeddings where the architecture ties them).

At generic weights the null space of that Jacobian is the tangent space of the
fibre of the parameter-to-function map, i.e. of the continuous stabiliser of
the function; its dimension (the *measured dimension*) is compared with G's
continuous dimension at the same sizes. G's own tangent directions are
computed from the tag table (the derivative of :func:`symtrans.group.spec.act`
at the identity), so the record also checks that (a) each of them is in the
null space (first-order invariance) and (b) they are independent (the action
is locally free), and lists every null direction G does not explain, by the
weight tensors it moves.

Examples
--------
>>> r = measure("bert-base", layers=1)
>>> r["measured_dimension"] == r["group_dimension"], r["unexplained"]
(True, [])
"""

from __future__ import annotations

import dataclasses
from typing import Any

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError
from symtrans.group.forward import unread_pad_id, unused_position_rows
from symtrans.group.params import param_at as _get
from symtrans.precision import GAP_DECADES, ROUNDING_FLOOR, gap_rank

__all__ = ["SCOPES", "small_arch", "reduced_rotary_factor", "measure", "jacobian", "relu_applies", "rank_record", "MEASURE_SIZES", "plan",
           "parameter_count", "writer_gap", "WRITER_GAP"]

SCOPES = ("layers", "model")

#: reduced sizes of the measured instance (d_k even for rotary positions)
MEASURE_SIZES: dict[str, int] = {"n": 5, "H": 2, "d_model": 6, "d_k": 2, "d_v": 2, "d_ff": 3}
#: the smallest norm epsilon used in a measurement (see :func:`small_arch`)
MIN_EPS = 1e-2
#: the rank cut needs this many decades between the last kept and the first dropped singular value
MIN_GAP_DECADES = GAP_DECADES


def small_arch(arch: Architecture | str, layers: int = 1, **sizes: int) -> Architecture:
    """A small copy of ``arch`` for measurement: same structure, reduced sizes, eps at least 1e-2.

    Grouped-query attention keeps a ratio H/H_kv = 2 (one key/value head for
    two query heads). The norm epsilon is raised to at least ``MIN_EPS``: at
    eps = 0 every residual segment between two norms has a scaling symmetry,
    which eps > 0 breaks only at order eps; with BERT's eps = 1e-12 that
    broken direction would sit at a singular value ~1e-12 and blur the rank
    cut, at 1e-2 it is clearly not null. The symmetries counted do not depend
    on the value of eps > 0. The vocabulary (``model`` scope) defaults to
    ``2 d_model`` tokens: with at most ``d_model + 1`` tokens the first
    layer's affine readers (with biases, e.g. Qwen2's Q, K, V) can fit any
    per-token table, so the finite input set would not pin the function down
    and the null space would overcount (seen: 2 extra directions on a
    Qwen2-like instance with 7 tokens and d_model = 6).

    Examples
    --------
    >>> a = small_arch("bert-base", layers=2)
    >>> a.L, a.d_model, a.H, a.d_ff, a.ln_eps
    (2, 6, 2, 3, 0.01)
    >>> small_arch(get_arch("bert-base").with_sizes(H_kv=6)).H_kv
    1
    """
    a = get_arch(arch)
    if not isinstance(layers, int) or layers < 1:
        raise SymtransError(f"layers must be a positive integer, got {layers!r}")
    s = {**MEASURE_SIZES, **sizes}
    concrete = all(isinstance(x, int) for x in (a.H, a.H_kv, a.d_k, a.d_v, a.d_model))
    if concrete and "H" not in sizes:  # structure kept: one head, the grouped-query ratio (up to 4)
        if a.H == 1:
            s["H"] = 1
        elif a.H_kv != a.H and "H_kv" not in sizes:
            s["H"], s["H_kv"] = min(a.H // a.H_kv, 4), 1
    for k in ("d_k", "d_v"):  # heads as wide as the residual stream stay so (they change G's count)
        if concrete and getattr(a, k) == a.d_model and k not in sizes:
            s[k] = s["d_model"]
    if "H_kv" not in s:
        s["H_kv"] = max(1, s["H"] // 2) if a.H_kv != a.H else s["H"]
    if a.positional == "rotary" and a.head_dim_tied:  # d_k = d_model / H (GPT-NeoX): an even width, stream H d_k
        s["d_k"] = sizes.get("d_k", 4)
        if "d_model" not in sizes:
            s["d_model"] = s["H"] * s["d_k"]
    factor = a.partial_rotary_factor
    if factor != 1:  # partial rotary (GPT-NeoX): keep a rotated part and a position-free part in each head
        factor = reduced_rotary_factor(factor, s["d_k"], a.name)
    vocab = s.pop("vocab_size", 2 * s["d_model"])
    window = a.sliding_window
    if window is not None:  # keep the band visible at the reduced length: fewer keys than positions
        window = max(2, min(window, s["n"] - 2))
    # per-layer kinds (Gemma 3's attention types, SmolLM3's NoPE layers): the first layer of each distinct kind, in
    # order of appearance, cycled over the layers (as the independent route picks them: independent._layer_pick)
    L_own = int(a.L) if isinstance(a.L, int) else 0
    per = [(a.layer_types[i] if a.layer_types else None, a.rope_layers[i] if a.rope_layers else None)
           for i in range(L_own)] if a.layer_types or a.rope_layers else []
    kinds = list(dict.fromkeys(per))
    picked = [kinds[i % len(kinds)] for i in range(layers)] if kinds else []
    types = tuple(t for t, _ in picked) if a.layer_types else ()
    ropes = tuple(r for _, r in picked) if a.rope_layers else ()
    out = dataclasses.replace(
        a, sliding_window=window, layer_types=types, rope_layers=ropes if not all(ropes) else (),
        name=f"small-{a.name}", head_dim_tied=False, L=layers,
        max_positions=s["n"],
        position_table=s["n"] + unused_position_rows(a),
        vocab_size=vocab, type_vocab_size=min(a.type_vocab_size, 2), ln_eps=max(float(a.ln_eps), MIN_EPS),
        partial_rotary_factor=factor, **{k: v for k, v in s.items() if k in ("n", "H", "H_kv", "d_model", "d_k", "d_v", "d_ff")})
    if concrete and writer_gap(a) is None and writer_gap(out) is not None and not {"d_v", "d_ff"} & set(sizes):
        H, d = int(out.H), int(out.d_model)  # OLMo 2's writers span its stream: the reduction keeps them spanning
        out = dataclasses.replace(out, d_v=max(int(out.d_v), -(-d // H)))  # (else writer_gap's directions)
        if writer_gap(out) is not None:
            out = dataclasses.replace(out, d_ff=max(int(out.d_ff), d))
    return out


def reduced_rotary_factor(factor: float, d_k: int, name: str = "the model") -> float:
    """The partial rotary factor of a measured instance of head width ``d_k``: a rotated and a position-free part.

    The factor is kept when it rotates an even number of at least 2 and fewer
    than ``d_k`` coordinates at that width, else replaced by ``2 / d_k`` (one
    rotated plane); a factor of 1 (full rotary) stays 1. Both routes of
    ``--complete`` reduce with this rule (the independent one from
    ``transformers``' own reading of the factor).

    Examples
    --------
    >>> reduced_rotary_factor(0.25, 4), reduced_rotary_factor(0.5, 8), reduced_rotary_factor(1.0, 4)
    (0.5, 0.5, 1.0)
    """
    if factor == 1:
        return 1.0
    if d_k < 3:
        raise SymtransError(f"{name}: partial rotary positions need d_k >= 3 in the measured instance (a rotated "
                            f"plane and a position-free coordinate), got d_k = {d_k}")
    r = d_k * factor
    return float(factor) if r == int(r) and int(r) % 2 == 0 and 2 <= r < d_k else 2 / d_k


#: ``--complete`` refuses a configuration with more layers than this (no published model has a tenth of it)
MAX_LAYERS = 4096
#: the user's configuration is measured as it is when its Jacobian fits: at most this many parameters ...
FULL_MAX_PARAMETERS = 2500
#: ... and (``model`` scope, whose inputs must read every position row) at most this many positions
FULL_MAX_POSITIONS = 32


def parameter_count(arch: Architecture | str, scope: str = "layers") -> int:
    """Number of scalar parameters of ``scope`` (from the tensor shapes; no weights are built).

    Examples
    --------
    >>> parameter_count("bert-base", "model")  # BERT-base without its pooler
    108891648
    >>> a = small_arch("gpt2")
    >>> parameter_count(a, "model") == sum(t.numel() for _, t in _entries(random_instance(a, "model"), "model"))
    True
    """
    from symtrans.group.spec import AXIS_SIZES, LAYER_AXES, MODEL_AXES, layer_tensor_names, model_tensor_names

    a = get_arch(arch)
    size = {k: int(getattr(a, v)) if v != "type_vocab_size" else int(a.type_vocab_size) for k, v in AXIS_SIZES.items()
            if v != "n"}
    size["position"] = int(a.position_table or a.max_positions)

    def numel(axes: tuple[str, ...]) -> int:
        out = 1
        for ax in axes:
            out *= size[ax]
        return out

    total = int(a.L) * sum(numel(LAYER_AXES[t]) for t in layer_tensor_names(a))
    names = [t for t in model_tensor_names(a) if t.startswith("final_ln")]
    if scope == "model":
        names = [t for t in model_tensor_names(a) if not (t == "pos" and a.positional == "sinusoidal")]
        if _has_head(a) and not a.tied_lm_head:
            names.append("lm_head")
    return total + sum(numel(MODEL_AXES[t]) for t in names)


def plan(arch: Architecture | str, scope: str = "layers", layer_counts: tuple[int, ...] = (1, 2, 3),
         seed: int = 0) -> dict[str, Any]:
    """Which instances ``group --complete`` measures: the configuration itself when its Jacobian fits, else reductions.

    The configuration itself (all its layers, its eps) is measured when it
    has at most :data:`FULL_MAX_PARAMETERS` parameters on ``scope`` and, on
    ``model``, at most :data:`FULL_MAX_POSITIONS` positions (every position
    row must be read by the inputs); the sequence length is its own on
    ``model`` and min(max_positions, 6, or the window + 2) on ``layers``.
    Otherwise reduced instances of ``layer_counts`` layers at the sizes of
    :func:`small_arch`, which keep every structural feature (listed under
    ``kept``), and the configuration's own eps. Returns ``mode``, ``bound``,
    ``instances`` (architectures), ``reduced`` (size: (own, measured)) and ``kept``.

    Examples
    --------
    >>> p = plan("bert-base")
    >>> p["mode"], [a.L for a in p["instances"]], p["reduced"]["d_model"]
    ('reduced', [1, 2, 3], (768, 6))
    >>> "post-LN" in p["kept"] and "eps 1e-12" in p["kept"]
    True
    """
    a = get_arch(arch)
    if a.is_symbolic:
        raise SymtransError(f"{a.name}: --complete needs concrete sizes (a preset or a config.json)")
    if int(a.L) > MAX_LAYERS:  # before anything is listed per layer (near-symmetry segments, the plan's record)
        raise SymtransError(f"{a.name}: {a.L} layers; --complete reads configurations of at most {MAX_LAYERS} "
                            "layers (it names each layer's near-symmetries)")
    P = parameter_count(a, scope)
    bound = (f"measured as given when it has <= {FULL_MAX_PARAMETERS} parameters on the scope"
             + (f" and <= {FULL_MAX_POSITIONS} positions" if scope == "model" else "")
             + f" (here {P})")
    positions = int(a.max_positions)
    fits = P <= FULL_MAX_PARAMETERS and (scope != "model" or positions <= FULL_MAX_POSITIONS)
    kept = _kept_features(a)
    eps, why = _measured_eps(a, scope)
    eps_record = {"own": float(a.ln_eps), "measured": eps, "why": why}
    if eps != float(a.ln_eps):
        kept = [k for k in kept if not k.startswith("eps ")]
    if fits:
        n = positions if scope == "model" else min(positions, max(6, (a.sliding_window or 0) + 2))
        inst = dataclasses.replace(a, n=n, ln_eps=eps)
        return {"mode": "itself", "bound": bound, "instances": [inst], "reduced": {}, "kept": kept, "parameters": P,
                "eps": eps_record}
    insts = [dataclasses.replace(small_arch(a, L), ln_eps=eps) for L in layer_counts]
    first = insts[0]
    reduced = {k: (int(getattr(a, k)), int(getattr(first, k))) for k in
               ("L", "H", "H_kv", "d_model", "d_k", "d_v", "d_ff", "max_positions")
               if int(getattr(a, k)) != int(getattr(first, k)) or k == "L"}
    reduced["L"] = (int(a.L), tuple(layer_counts))  # type: ignore[assignment]
    if scope == "model" and int(a.vocab_size) != int(first.vocab_size):
        reduced["vocab_size"] = (int(a.vocab_size), int(first.vocab_size))
    if a.sliding_window and a.sliding_window != first.sliding_window:
        reduced["sliding_window"] = (a.sliding_window, first.sliding_window)
    if a.partial_rotary_factor != first.partial_rotary_factor:  # the rotated width of a head, own and measured
        reduced["rotary_width"] = (int(a.rotary_width), int(first.rotary_width))
    if a.type_vocab_size != first.type_vocab_size:
        reduced["type_vocab_size"] = (a.type_vocab_size, first.type_vocab_size)
    if a.H_kv != a.H and a.H // a.H_kv != first.H // first.H_kv:
        kept = [k for k in kept if not k.startswith("grouped-query")] + [
            f"grouped-query attention (ratio reduced from {a.H // a.H_kv} to {first.H // first.H_kv})"]
    return {"mode": "reduced", "bound": bound, "instances": insts, "reduced": reduced, "kept": kept, "parameters": P,
            "eps": eps_record}


#: at or below this eps the near-symmetries sit at float64 rounding and are counted and explained as null
ROUNDING_EPS = 1e-10


def _measured_eps(a: Architecture, scope: str) -> tuple[float, str]:
    """The eps a measurement uses: the configuration's own, unless near-symmetries would blur the rank cut.

    A segment scaling's violation is linear in eps (:mod:`symtrans.group.near`): at eps <= ROUNDING_EPS it is at
    rounding level (numerically null, counted and explained), at eps >= MIN_EPS clearly above the cut; in between
    its singular values sit inside the spectrum (seen: a 2.8-decade gap at eps = 1e-5, three post-LN layers), so
    the measurement raises eps to MIN_EPS. G does not depend on the value of eps > 0.
    """
    from symtrans.group.near import segments

    own = float(a.ln_eps)
    if a.qk_norm and ROUNDING_EPS < own < MIN_EPS:  # per-head scalings of W_Q^h, W_K^g: near-symmetries not listed
        return MIN_EPS, (f"raised from {own:g}: QK-norm makes each head's W_Q^h and W_K^g scaling a near-symmetry "
                         "(exact at eps = 0), whose violation would sit inside the singular values; G is the same "
                         "for every eps > 0")
    if own <= ROUNDING_EPS or own >= MIN_EPS:
        return own, "the configuration's own"
    found = len(segments(a, scope))  # listed once (it grows with the layers: plan() bounds them first)
    if not found:
        return own, "the configuration's own"
    return MIN_EPS, (f"raised from {own:g}: the {found} near-symmetries' violations (linear in "
                     "eps) would sit inside the singular values and blur the rank cut; G is the same for every eps > 0")


#: the named condition of :func:`writer_gap`
WRITER_GAP = ("post-norm writers that do not span the residual stream (no pre-norms, an untied output head: "
              "OLMo 2 below its published sizes)")


def writer_gap(a: Architecture, scope: str = "model") -> dict[str, Any] | None:
    """The stabiliser beyond G when post-norm sub-blocks write to a subspace of a raw residual stream (OLMo 2).

    Out of G's scope: it depends on the weights (the writers' row spaces).
    Derivation. Without pre-norms the sub-blocks read the stream raw, so an
    orthogonal map Q = I + Omega of the whole stream (the embeddings times Q,
    every reader Q^-1 W, the untied output head through the final norm, which
    only an orthogonal Q passes unchanged at eps > 0) is a symmetry as soon
    as every writer can produce its output times Q. A writer (W_O, or W_out)
    emits RMSNorm(z) Gamma with z in its row space U (rank r = min(H d_v,
    d_model) or min(d_ff, d_model)); with W' = W Gamma Q Gamma'^-1 and a new
    gain Gamma' = Gamma (1 + delta) it emits RMSNorm(z) Gamma Q exactly when
    z -> z Gamma Q Gamma'^-1 keeps norms on U: to first order the symmetric
    part of Gamma Omega Gamma^-1 - diag(delta) vanishes on U, r(r+1)/2
    equations in the d_model entries of delta. A writer with r(r+1)/2 > d
    leaves r(r+1)/2 - d conditions on Omega; one with r(r+1)/2 < d leaves
    d - r(r+1)/2 gain directions free (Omega = 0). Generic row spaces and gains
    make the conditions independent:

        max(0, d(d-1)/2 - sum_w max(0, r_w(r_w+1)/2 - d)) + sum_w max(0, d - r_w(r_w+1)/2)

    over the 2L writers. Zero when every writer spans the stream (r = d:
    d(d+1)/2 - d = d(d-1)/2 conditions), as in every published OLMo 2
    (H d_v = d_model < d_ff). Only on the ``model`` scope (on ``layers`` the
    stream's input and output are fixed). ``dimension`` is None (not derived)
    for a tied head, which ties Q to the embedding rows as well.

    Examples
    --------
    >>> import dataclasses
    >>> a = dataclasses.replace(small_arch("llama2-7b"), pre_norms=False, post_norms=True, d_k=4, d_v=2)
    >>> writer_gap(a)["dimension"]  # d = 6, writers of rank 4 (attention) and 3 (FFN): 15 - 4 + 0
    11
    >>> writer_gap(dataclasses.replace(a, d_v=3)) is None  # H d_v = d_model: the writers span the stream
    True
    """
    if scope != "model" or a.pre_norms or not a.post_norms or not a.final_norm or a.norm != "rmsnorm" \
            or a.ablated or not all(isinstance(x, int) for x in (a.L, a.H, a.d_v, a.d_ff, a.d_model)):
        return None
    d = int(a.d_model)
    ranks = [min(int(a.H) * int(a.d_v), d), min(int(a.d_ff), d)] * int(a.L)
    tri = [r * (r + 1) // 2 for r in ranks]
    omega = max(0, d * (d - 1) // 2 - sum(max(0, t - d) for t in tri))
    gains = sum(max(0, d - t) for t in tri)
    if omega + gains == 0:
        return None
    return {"condition": WRITER_GAP, "dimension": None if a.tied_lm_head else omega + gains,
            "rotations": omega, "gain_directions": gains, "writer_ranks": ranks[:2],
            "formula": "max(0, d(d-1)/2 - sum_w max(0, r_w(r_w+1)/2 - d)) + sum_w max(0, d - r_w(r_w+1)/2), "
                       "r = min(H d_v, d_model) (attention), min(d_ff, d_model) (FFN), 2L writers",
            "hypotheses": ["model scope", "no pre-norms, RMSNorm post-norms and a final norm", "untied output head"
                           + (" (this model's head is tied: the dimension is not derived)" if a.tied_lm_head
                              else ""), "generic weights (row spaces and gains in general position)"],
            "scope": "outside G: the directions depend on the writers' row spaces (weights), not a fixed action"}


def _kept_features(a: Architecture) -> list[str]:
    """The structural features of ``a`` that a reduced instance keeps, in words."""
    out = [f"{a.norm_placement}-LN", a.norm, f"{a.activation} {'gated ' if a.ffn == 'gated' else ''}FFN",
           "all biases" if a.bias else "Q, K, V biases only" if a.qkv_bias else "no biases",
           f"{a.attention} attention", f"{a.positional} positions"]
    if a.H_kv != a.H:
        out.append(f"grouped-query attention (ratio {a.H // a.H_kv})")
    if a.H == 1:
        out.append("one head")
    out += [f"{k} = d_model" for k in ("d_k", "d_v") if getattr(a, k) == a.d_model]
    if a.sliding_window:
        out.append("sliding window (shorter than the sequence)" + (" on the sliding layers" if a.layer_types else ""))
    if a.layer_types and len(set(a.layer_types)) > 1:
        out.append("sliding and full layers")
    if a.qk_norm:
        out.append("QK-norm" + (" over the full width" if a.qk_norm_full else ""))
    if not a.pre_norms:
        out.append("no pre-norms" + (" (post-norm writers spanning the stream: H d_v >= d_model)"
                                     if a.post_norms and writer_gap(a) is None else ""))
    if a.post_norms:
        out.append("post-norms")
    if a.gain_offset:
        out.append("(1 + w) gains")
    if a.embedding_scale:
        out.append("embeddings x sqrt(d_model)")
    if a.parallel_residual:
        out.append("parallel residual")
    if a.partial_rotary_factor != 1:
        out.append("partial rotary positions (a rotated and a position-free part in each head)")
    if a.attn_softcap or a.final_softcap:
        out.append("soft-capping (" + ", ".join(w for w, c in (("scores", a.attn_softcap), ("logits", a.final_softcap))
                                                if c) + ")")
    if a.embedding_norm:
        out.append("embedding norm")
    if a.final_norm:
        out.append("final norm")
    if a.attention == "causal":
        out.append("tied output head" if a.tied_lm_head else "untied output head")
    if a.type_vocab_size:
        out.append("token-type table")
    if unused_position_rows(a):
        out.append(f"{unused_position_rows(a)} unused leading position rows")
    out.append(f"eps {a.ln_eps:g}")
    return out


# --------------------------------------------------------------------------- flat parameters
def _entries(params: dict[str, Any], scope: str) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, tensor) for every parameter of the scope, in a fixed order."""
    out = []
    for i, lp in enumerate(params["layers"]):
        for name, value in lp.items():
            if isinstance(value, list):
                out += [(("layers", i, name, h), b) for h, b in enumerate(value)]
            elif value is not None:
                out.append((("layers", i, name), value))
    for name in ("final_ln_w", "final_ln_b"):
        if params.get(name) is not None:
            out.append(((name,), params[name]))
    if scope == "model":
        for name in ("word", "pos", "type", "emb_ln_w", "emb_ln_b", "lm_head"):
            if params.get(name) is not None:
                out.append(((name,), params[name]))
    return out


def _flatten(params: dict[str, Any], paths: list[tuple[Any, ...]]) -> Any:
    import torch

    return torch.cat([_get(params, p).reshape(-1) for p in paths])


def _unflatten(vec: Any, template: dict[str, Any], paths: list[tuple[Any, ...]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in template.items() if k != "layers"}
    layers = [dict(lp) for lp in template["layers"]]
    for lp in layers:
        for k, v in lp.items():
            if isinstance(v, list):
                lp[k] = list(v)
    pos = 0
    for p in paths:
        t = _get(template, p)
        piece = vec[pos:pos + t.numel()].reshape(t.shape)
        pos += t.numel()
        if p[0] == "layers":
            if len(p) == 4:
                layers[p[1]][p[2]][p[3]] = piece
            else:
                layers[p[1]][p[2]] = piece
        else:
            out[p[0]] = piece
    out["layers"] = layers
    return out


def _label(path: tuple[Any, ...]) -> str:
    if path[0] == "layers":
        return f"layer{path[1]}.{path[2]}" + (f"[{path[3]}]" if len(path) == 4 else "")
    return path[0]


def _tensor_label(path: tuple[Any, ...]) -> str:
    return f"layer{path[1]}.{path[2]}" if path[0] == "layers" else path[0]


# --------------------------------------------------------------------------- the scope maps
def random_instance(arch: Architecture, scope: str, seed: int = 0) -> dict[str, Any]:
    """Random float64 weights for every parameter of ``scope`` (block form), gains near 1.

    Examples
    --------
    >>> p = random_instance(small_arch("gpt2"), "model")
    >>> tuple(p["word"].shape), tuple(p["final_ln_w"].shape)
    ((12, 6), (1, 6))
    """
    import torch

    from symtrans.group.numeric import random_blocks

    params = random_blocks(arch, seed, torch.float64)
    params.pop("X", None)
    if arch.positional == "sinusoidal":
        params.pop("pos", None)  # a fixed table, not a parameter: built in the forward
    gen = torch.Generator().manual_seed(seed + 101)
    d = int(arch.d_model)
    if scope == "model":
        params["word"] = torch.randn(int(arch.vocab_size), d, generator=gen, dtype=torch.float64)
        if arch.type_vocab_size:
            params["type"] = torch.randn(int(arch.type_vocab_size), d, generator=gen, dtype=torch.float64)
        if _has_head(arch) and not arch.tied_lm_head:
            params["lm_head"] = torch.randn(d, int(arch.vocab_size), generator=gen, dtype=torch.float64) * d ** -0.5
    else:
        for name in ("pos", "emb_ln_w", "emb_ln_b"):
            params.pop(name, None)
    _drop_ablated(params, arch)
    return params


def _drop_ablated(params: dict[str, Any], arch: Architecture) -> None:
    """Remove (in place) the parameters an ablated architecture does not have: its norms' gains and biases, W_O."""
    gone = set()
    if "norm" in arch.ablated:
        gone |= {f"{n}_{k}" for n in ("ln1", "ln2", "ln1_post", "ln2_post") for k in ("w", "b")}
        for name in ("emb_ln_w", "emb_ln_b", "final_ln_w", "final_ln_b"):
            params.pop(name, None)
    if "wo-mixing" in arch.ablated:
        gone.add("W_O")
    for lay in params["layers"]:
        for name in gone:
            lay.pop(name, None)


def _has_head(arch: Architecture) -> bool:
    """Causal language models end in an output head on the ``model`` scope."""
    return arch.attention == "causal"


def _inputs(arch: Architecture, scope: str, count: int, seed: int) -> list[dict[str, Any]]:
    import torch

    gen = torch.Generator().manual_seed(seed + 202)
    n, d = int(arch.n), int(arch.d_model)
    pad = unread_pad_id(arch)  # unpadded input: never the pad id where it marks padding (RoBERTa)
    tokens = torch.tensor([t for t in range(int(arch.vocab_size)) if t != pad])
    out = []
    for _ in range(count):
        if scope == "layers":
            out.append({"X": torch.randn(n, d, generator=gen, dtype=torch.float64)})
        else:
            item = {"ids": tokens[torch.randint(0, len(tokens), (n,), generator=gen)]}
            if arch.type_vocab_size:
                item["types"] = torch.randint(0, int(arch.type_vocab_size), (n,), generator=gen)
            out.append(item)
    return out


def scope_forward(params: dict[str, Any], inp: dict[str, Any], arch: Architecture, scope: str,
                  be: Any = None) -> Any:
    """The scope's map on one input: hidden states (``layers``) or token ids (``model``) in (``be``: a torch backend).

    Examples
    --------
    >>> import torch
    >>> a = small_arch("bert-base")
    >>> p = random_instance(a, "layers")
    >>> scope_forward(p, {"X": torch.zeros(5, 6, dtype=torch.float64)}, a, "layers").shape
    torch.Size([5, 6])
    """
    import torch

    from symtrans.group.forward import Features, TorchBackend, stack_forward

    feat = Features.of(arch)
    be = be if be is not None else TorchBackend(dtype=torch.float64)
    if scope == "layers":
        X = inp["X"]
    else:
        ids = inp["ids"]
        X = params["word"][ids]
        if arch.embedding_scale:  # Gemma: the word rows times sqrt(d_model)
            X = X * int(arch.d_model) ** 0.5
        if params.get("type") is not None:
            X = X + params["type"][inp["types"]]
        n = X.shape[0]
        if arch.positional == "learned":
            k = feat.pos_offset  # RoBERTa: positions start after the unused rows
            X = X + params["pos"][k:k + n]
        elif arch.positional == "sinusoidal":
            X = X + _sinusoidal(n, int(arch.d_model))
    X = stack_forward(params, X, feat, be, embedded=scope != "layers")
    if scope == "model" and _has_head(arch):
        X = X @ (params["word"].T if arch.tied_lm_head else params["lm_head"])
        if arch.final_softcap:  # Gemma 2: the logits, capped
            X = be.softcap(X, arch.final_softcap)
    return X


def _sinusoidal(n: int, d: int) -> Any:
    import torch

    pos = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(d, dtype=torch.float64)[None, :]
    angle = pos / 10000 ** (2 * (i // 2) / d)
    return torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))


# --------------------------------------------------------------------------- rank
def rank_record(singular_values: Any, *, min_gap: float = MIN_GAP_DECADES) -> dict[str, Any]:
    """Numerical rank at the widest gap of the singular values: :func:`symtrans.precision.gap_rank`.

    Examples
    --------
    >>> import torch
    >>> r = rank_record(torch.tensor([3.0, 1.0, 0.5, 1e-15, 1e-16], dtype=torch.float64))
    >>> r["rank"], r["clear"], round(r["gap_decades"], 1)
    (3, True, 14.7)
    >>> rank_record(torch.tensor([1.0, 1e-4, 1e-8, 1e-12], dtype=torch.float64))["clear"]  # no clear gap
    False
    """
    return gap_rank(singular_values, min_gap=min_gap)


# --------------------------------------------------------------------------- G's tangent directions
def _lie_element(spec: Any, factor: str, theta: Any) -> Any:
    """An element of ``factor`` near the identity, linear in ``theta`` (its Lie algebra coordinates)."""
    from symtrans.group.elements import elements_of

    pieces = iter(_split(theta, spec.factor_sizes(factor)))
    return elements_of(spec, factor).lie(spec, factor, lambda: next(pieces))


def _split(theta: Any, sizes: list[int]) -> list[Any]:
    out, pos = [], 0
    for k in sizes:
        out.append(theta[pos:pos + k])
        pos += k
    return out


def _tangents(spec: Any, params: dict[str, Any], paths: list[tuple[Any, ...]], scope: str) -> tuple[Any, list[str]]:
    """Columns: G's tangent directions at ``params`` (derivative of the tag-table action at the identity)."""
    import torch

    from symtrans.group.spec import act
    from symtrans.numeric.autodiff import jacobian as reverse_jacobian

    cols, names = [], []
    L = len(params["layers"])
    for f in spec.factors:
        live = any(f.per_layer) if f.per_layer else f.status != "broken"
        if f.kind != "continuous" or not live or not f.in_scope(scope):
            continue
        count = spec.element_count(f.name, scope, L)
        if f.per_layer:  # the layers differ (NoPE): each layer's element from its own factor; none where broken
            own = [spec.layer_spec(i) for i in range(count)]
            sizes = [sum(own[i].factor_sizes(f.name)) if f.per_layer[i] else 0 for i in range(count)]
        else:
            own = [spec] * count
            sizes = [sum(spec.factor_sizes(f.name))] * count
        if sum(sizes) == 0:
            continue
        starts = [sum(sizes[:i]) for i in range(count)]
        idle = next(o for o, k in zip(own, sizes) if k)  # a spec where the factor lives: identity elements from it

        def moved(theta: Any, f: Any = f, own: Any = own, sizes: Any = sizes, starts: Any = starts,
                  idle: Any = idle) -> Any:
            els = [_lie_element(own[i], f.name, theta[starts[i]:starts[i] + sizes[i]]) if sizes[i] else
                   _lie_element(idle, f.name, theta.new_zeros(sum(idle.factor_sizes(f.name))))
                   for i in range(len(sizes))]
            element = els if f.scope in ("layer", "stack") else els[0]
            return _flatten(act(spec, params, f.name, element), paths)

        J = reverse_jacobian(moved, torch.zeros(sum(sizes), dtype=torch.float64))
        cols.append(J)
        names += [f.name] * J.shape[1]
    if not cols:
        return torch.zeros(len(_flatten(params, paths)), 0, dtype=torch.float64), []
    return torch.cat(cols, dim=1), names


# --------------------------------------------------------------------------- the measurement
def relu_applies(a: Architecture) -> bool:
    """Whether the FFN of ``a`` applies a ReLU (not when its non-linearity is ablated).

    Examples
    --------
    >>> relu_applies(get_arch("gpt2")), relu_applies(dataclasses.replace(get_arch("gpt2"), activation="relu"))
    (False, True)
    """
    return a.activation == "relu" and "nonlinearity" not in a.ablated


def jacobian(a: Architecture, scope: str = "layers", seed: int = 0) -> dict[str, Any]:
    """The float64 Jacobian of ``scope``'s map at a random instance of ``a`` as given, and its singular values.

    Returns ``params``, ``entries``, ``paths``, ``inputs``, ``outputs_at``
    (parameters -> flat outputs on the batch), ``J``, ``s``, ``Vh`` (its
    SVD), ``record`` (:func:`rank_record`) and ``relu`` (weight draws until
    every ReLU unit switches on the batch). :func:`measure` and the ablation
    table (:mod:`symtrans.group.breaking`) both measure through it.

    Examples
    --------
    >>> from symtrans.group.spec import GroupSpec
    >>> a = small_arch("bert-base")
    >>> m = jacobian(a)
    >>> int(m["J"].shape[1]) - m["record"]["rank"] == GroupSpec.from_arch(a).scope_dimension("layers")  # G complete
    True
    """
    import torch
    from torch.func import vmap

    from symtrans.numeric.autodiff import jacobian as reverse_jacobian
    from symtrans.progress import tick

    out_size = int(a.n) * int(a.d_model)  # logits carry at most d_model independent values per token
    relu: dict[str, Any] = {"draws": 0, "stuck": []}
    for draw in range(RELU_DRAWS if relu_applies(a) else 1):  # a ReLU unit must switch on the batch
        params = random_instance(a, scope, seed + 1000 * draw)
        entries = _entries(params, scope)
        P = sum(t.numel() for _, t in entries)
        count = max(4, -(-3 * P // (2 * out_size)))  # 1.5 P independent Jacobian rows
        inputs = _inputs(a, scope, count, seed + 1000 * draw)
        if not relu_applies(a):
            break
        centre_relu_biases(params, inputs, a, scope)
        relu = {"draws": draw + 1, "stuck": stuck_relu_units(params, inputs, a, scope)}
        if not relu["stuck"]:
            break
    paths = [p for p, _ in entries]
    theta0 = _flatten(params, paths)  # after any centring: the point measured
    batch = {k: torch.stack([x[k] for x in inputs]) for k in inputs[0]}

    def outputs_at(p: dict[str, Any]) -> Any:
        return vmap(lambda x: scope_forward(p, x, a, scope))(batch).reshape(-1)

    def outputs(theta: Any) -> Any:
        return outputs_at(_unflatten(theta, params, paths))

    tick(f"L={int(a.L)}: Jacobian {count * out_size} x {P}", 0)
    J = reverse_jacobian(outputs, theta0)
    tick(f"L={int(a.L)}: singular values", 0)
    _, s, Vh = torch.linalg.svd(J, full_matrices=True)
    return {"params": params, "entries": entries, "paths": paths, "inputs": inputs, "outputs_at": outputs_at,
            "J": J, "s": s, "Vh": Vh, "record": rank_record(s), "relu": relu}


def measure(arch: Architecture | str, *, layers: int = 1, scope: str = "layers", seed: int = 0,
            sizes: dict[str, int] | None = None, exclude: tuple[str, ...] = (), eps: float | None = None,
            instance: Architecture | None = None) -> dict[str, Any]:
    """Measure the continuous stabiliser's dimension on a small instance and compare it with G's.

    Returns the ``completeness`` record: ``measured_dimension`` (nullity of the
    Jacobian), ``group_dimension`` (G's continuous dimension on ``scope`` at
    the same sizes, from the GroupSpec formulas), ``tangent_rank`` (rank of
    G's tangent directions from the tag table), ``sizes``, the rank ``record``
    and ``unexplained`` (null directions outside G's tangent space, each with
    the weight tensors it moves most). ``exclude`` drops factors from G (to
    measure what a smaller group, such as the paper's, leaves unexplained).
    ``instance`` measures that architecture as it is (no reduction; see
    :func:`plan`); ``eps`` sets the norm epsilon of the instance (default: the
    architecture's, raised to :data:`MIN_EPS`). ``near_symmetries`` lists the
    segment scalings of :mod:`symtrans.group.near` with their measured and
    derived violations; those below the rank cut are numerically null and
    counted in ``near_null``: the measurement agrees when the null space is
    exactly G's tangent space plus theirs.

    Examples
    --------
    >>> r = measure("llama2-7b", layers=1)
    >>> r["measured_dimension"], r["group_dimension"], r["record"]["clear"]
    (27, 27, True)
    >>> r = measure("bert-base", layers=2, eps=1e-12)
    >>> r["measured_dimension"] - r["group_dimension"], r["near_null"], r["agrees"]
    (3, 3, True)
    """
    import math

    import torch

    from symtrans.group.near import eps_derivative, near_record, segment_tangent, segments
    from symtrans.group.spec import GroupSpec

    if scope not in SCOPES:
        from symtrans.errors import suggest

        raise SymtransError(suggest(scope, SCOPES, "scope"))
    a = instance if instance is not None else small_arch(arch, layers, **(sizes or {}))
    if eps is not None:
        a = dataclasses.replace(a, ln_eps=float(eps))
    layers = int(a.L)
    spec = GroupSpec.from_arch(a)
    if exclude:
        for name in exclude:
            spec.factor(name)  # unknown names are an error, not a silent no-op
        spec = dataclasses.replace(spec, factors=tuple(f for f in spec.factors if f.name not in exclude))
    m = jacobian(a, scope, seed)
    params, entries, paths, inputs, outputs_at, J, s, Vh, rec, relu = (
        m[k] for k in ("params", "entries", "paths", "inputs", "outputs_at", "J", "s", "Vh", "record", "relu"))
    P, count = int(J.shape[1]), len(inputs)
    scale = J.abs().max()
    rank = rec["rank"]
    measured = P - rank
    null = Vh[rank:].T  # P x measured, orthonormal
    T, tnames = _tangents(spec, params, paths, scope)
    t_rank = rank_record(torch.linalg.svdvals(T))["rank"] if T.shape[1] else 0
    # first-order invariance of G's directions: |J t| relative to |J| |t|
    inv = float((J @ T).abs().max() / (scale * max(float(T.abs().max()), 1e-300))) if T.shape[1] else 0.0
    # near-symmetries: segment scalings, exact only as eps -> 0
    sigma_max = float(s[0]) if len(s) else 1.0
    cut = math.sqrt(rec["above"] * rec["below"]) if rec["below"] is not None else None
    var_min = _min_norm_variance(params, inputs, a, scope)
    near = []
    near_cols = []
    for seg in segments(a, scope, layers):
        t = segment_tangent(seg, params, paths)
        predicted = eps_derivative(seg, outputs_at, params, float(a.ln_eps))
        r = near_record(seg, J, t, predicted, sigma_max, float(a.ln_eps), var_min, cut)
        near.append(r)
        if r["below_cut"]:
            near_cols.append(t)
    TN = torch.cat([T] + [c[:, None] for c in near_cols], dim=1) if near_cols else T
    tn_rank = rank_record(torch.linalg.svdvals(TN))["rank"] if TN.shape[1] else 0
    unexplained = _unexplained(null, TN, paths, entries, tn_rank)
    group_dim = int(spec.scope_dimension(scope))
    k = len(near_cols)
    gap = writer_gap(a, scope)
    if gap is not None:  # the named condition: does it account for exactly the directions beyond G?
        gap = {**gap, "explains": bool(rec["clear"] and gap["dimension"] is not None and not relu["stuck"]
                                       and measured == group_dim + k + gap["dimension"]
                                       and len(unexplained) == gap["dimension"] and t_rank == group_dim)}
    return {
        "scope": scope, "arch": get_arch(arch).name, "instance": a.name, "excluded": list(exclude),
        "sizes": {"L": layers, "n": int(a.n), "H": int(a.H), "H_kv": int(a.H_kv), "d_model": int(a.d_model),
                  "d_k": int(a.d_k), "d_v": int(a.d_v), "d_ff": int(a.d_ff),
                  **({"vocab_size": int(a.vocab_size)} if scope == "model" else {}),
                  **({"sliding_window": a.sliding_window} if a.sliding_window else {}),
                  "eps": a.ln_eps},
        "parameters": P, "inputs": count, "jacobian_rows": int(J.shape[0]), "dtype": "float64",
        "measured_dimension": measured, "group_dimension": group_dim, "tangent_rank": t_rank,
        "tangent_columns": int(T.shape[1]), "tangent_invariance": inv,
        "near_symmetries": near, "near_null": k, "explained_dimension": group_dim + k,
        "record": {"rank": rank, "cut_above": rec["above"], "cut_below": rec["below"],
                   "gap_decades": rec["gap_decades"], "clear": rec["clear"],
                   "rule": f"cut at the widest drop of the singular values (relative to the largest); clear if "
                           f">= {MIN_GAP_DECADES:g} decades and the values below are < 1e-9"},
        "unexplained": unexplained,
        **({"condition": gap} if gap is not None else {}),
        **({"relu_units": relu} if relu_applies(a) else {}),
        "agrees": bool(rec["clear"] and measured == group_dim + k and t_rank == group_dim and tn_rank == group_dim + k
                       and not unexplained and inv < ROUNDING_FLOOR and not relu["stuck"]),
    }


#: Weight draws tried until every ReLU unit switches on the batch (see :func:`stuck_relu_units`).
RELU_DRAWS = 8


def stuck_relu_units(params: dict[str, Any], inputs: list[dict[str, Any]], a: Architecture, scope: str) -> list[str]:
    """ReLU units whose sign never changes on the batch: there the measured null space is larger than G's.

    A unit that is off on every row leaves its input column, bias and output
    row locally free (2 d_model + 1 directions, one of them G's scaling); units
    that are on on every row act linearly together, so k of them add k^2 - k
    directions of GL(k). Neither is a symmetry of the function, only of the
    batch, so a measurement needs every unit on some rows and off on others.

    Examples
    --------
    >>> a = dataclasses.replace(small_arch("bert-base", layers=1), activation="relu")
    >>> p, x = random_instance(a, "layers"), _inputs(a, "layers", 16, 0)
    >>> stuck_relu_units(p, x, a, "layers")  # as drawn
    ['layer 0 unit 0: on for 0 of 80 rows']
    >>> centre_relu_biases(p, x, a, "layers"); stuck_relu_units(p, x, a, "layers")
    []
    """
    return [f"layer {i} unit {j}: on for {c} of {total} rows" for i, (counts, total) in
            enumerate(_relu_rows(params, inputs, a, scope)) for j, c in enumerate(counts) if c in (0, total)]


def centre_relu_biases(params: dict[str, Any], inputs: list[dict[str, Any]], a: Architecture, scope: str) -> None:
    """Shift each ReLU unit's bias (b_in, or b_gate for a gate) so its pre-activation's median on the batch is 0.

    Layer by layer (a layer's shift changes what the next one sees), in place;
    an FFN without biases is left as drawn. The weights stay random: only
    where each unit switches moves into the batch.

    Examples
    --------
    >>> a = dataclasses.replace(small_arch("bert-base", layers=2), activation="relu")
    >>> p, x = random_instance(a, "layers"), _inputs(a, "layers", 4, 0)
    >>> for lay in p["layers"]:
    ...     lay["b_in"] = lay["b_in"] + 50.0  # every unit on
    >>> centre_relu_biases(p, x, a, "layers"); stuck_relu_units(p, x, a, "layers")
    []
    """
    import torch

    key = "b_gate" if a.ffn == "gated" else "b_in"
    for i, lay in enumerate(params["layers"]):
        if lay.get(key) is None:
            continue
        Z = _relu_rows(params, inputs, a, scope, values=True)[i]
        lay[key] = lay[key] - torch.quantile(Z, 0.5, dim=0).reshape(lay[key].shape)


def _relu_rows(params: dict[str, Any], inputs: list[dict[str, Any]], a: Architecture, scope: str,
               values: bool = False) -> list[Any]:
    """Per layer: (rows on per unit, rows) of its ReLU on the batch, or (``values``) the pre-activations."""
    import torch

    from symtrans.group.forward import TorchBackend

    seen: list[Any] = []

    class Recording(TorchBackend):
        def act(self, Z: Any, kind: str) -> Any:
            if kind == "relu":
                seen.append(Z.detach().reshape(-1, Z.shape[-1]))
            return super().act(Z, kind)

    be = Recording(torch.float64)
    rows: dict[int, list[Any]] = {}
    for x in inputs:
        seen.clear()
        with torch.no_grad():
            scope_forward(params, x, a, scope, be=be)
        for i, on in enumerate(seen):  # one relu call per layer (the gate's, for a gated FFN), in layer order
            rows.setdefault(i, []).append(on)
    if values:
        return [torch.cat(parts) for _, parts in sorted(rows.items())]
    return [((torch.cat(parts) > 0).sum(0).tolist(), sum(int(q.shape[0]) for q in parts))
            for _, parts in sorted(rows.items())]


def _min_norm_variance(params: dict[str, Any], inputs: list[dict[str, Any]], a: Architecture, scope: str) -> float:
    """The smallest row variance (LayerNorm: centred; RMSNorm: mean square) any norm sees on the batch."""
    import torch

    from symtrans.group import forward as fw

    seen: list[float] = []

    class Recording(fw.TorchBackend):
        def norm(self, Z: Any, kind: str, w: Any, b: Any, eps: float) -> Any:
            C = Z - Z.mean(-1, keepdim=True) if kind == "layernorm" else Z
            seen.append(float((C * C).mean(-1).min()))
            return super().norm(Z, kind, w, b, eps)

    with torch.no_grad():
        for x in inputs:
            scope_forward(params, x, a, scope, Recording(dtype=torch.float64))
    return min(seen) if seen else float("inf")


def _unexplained(null: Any, T: Any, paths: list[tuple[Any, ...]], entries: list[Any],
                 t_rank: int | None = None) -> list[dict[str, Any]]:
    """Null directions orthogonal to G's tangent space, each described by the tensors it moves.

    G's tangent space is spanned by the leading ``t_rank`` left singular vectors of ``T`` (a rank-revealing
    basis: an unpivoted QR can keep a nearly dependent column's rounding noise as a direction).
    """
    import torch

    if null.shape[1] == 0:
        return []
    if T.shape[1]:
        U, s, _ = torch.linalg.svd(T, full_matrices=False)
        Qt = U[:, :t_rank] if t_rank is not None else U[:, s > ROUNDING_FLOOR * s[0]]
        rest = null - Qt @ (Qt.T @ null)
    else:
        rest = null
    U, s, _ = torch.linalg.svd(rest, full_matrices=False)
    dirs = U[:, s > 1e-6]
    sizes = [t.numel() for _, t in entries]
    out = []
    for k in range(dirs.shape[1]):
        v = dirs[:, k]
        weights: dict[str, float] = {}
        pos = 0
        for p, sz in zip(paths, sizes):
            w = float((v[pos:pos + sz] ** 2).sum())
            pos += sz
            lab = _tensor_label(p)
            weights[lab] = weights.get(lab, 0.0) + w
        moved = sorted(((t, w) for t, w in weights.items() if w > 1e-6), key=lambda x: -x[1])
        out.append({"moves": [{"tensor": t, "share": round(w, 4)} for t, w in moved[:6]]})
    return out
