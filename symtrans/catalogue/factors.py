"""The catalogue of G's factors: one builder per family, each factor with its tag table and coordinates.

Each builder reads an :class:`~symtrans.arch.Architecture` and returns its
factors, each defined once: kind, group, dimension or order, tag table,
breaking and shrinking features (with whether this architecture has them),
the identity it rests on and the coordinates of its elements
(:class:`~symtrans.catalogue.model.Piece`). The families: the attention and
FFN factors of a layer (``_layer_factors``, ``_qk_norm_trade``), the norm
factors (``_norm_factors``, ``_hyperplane``), the residual permutation
(``_model_factors``), the embedding and output-head factors
(``_embedding_factors``) and the data-side token permutations
(``_data_factors``); :func:`factors_of` collects them.

Raises
------
SymtransError
    For rotary positions with an odd head width, and for a rotary scaling
    ('longrope') whose frequencies the group does not model.

See Also
--------
symtrans.catalogue.spec.GroupSpec.from_arch : the factors of one architecture, checked
symtrans.catalogue.model : the records built here

References
----------
The paper's §9 (the invariance group G, as formalised in
``/work/shared/paper/claims.md``: the per-head gauges, S_H, S_{d_ff}, S_n and
the softmax shift) and §4 (LayerNorm: the norm factors); the maximal gauge
group of multi-head attention (NeurReps 2025) for the per-head GL factors.
``docs/group.md`` derives each factor.

Examples
--------
>>> from symtrans.arch import get_arch
>>> [f.name for f in _data_factors(get_arch("bert-base"))]
['S_n']
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from symtrans.arch import Architecture
from symtrans.errors import SymtransError
from symtrans.catalogue.model import (AxisTag, Breaking, Factor, Piece, model_tensor_names, unread_pad_id,
                                     unused_position_rows)
from symtrans.symbols import SYMBOLS

__all__ = ["factors_of"]

S = SYMBOLS


def _kv(a: Architecture) -> sp.Expr:
    return S["H"] if a.H_kv == a.H else S["H_kv"]


def _unmodelled(a: Architecture) -> list[tuple[str, str]]:
    """Features whose effect on G the toolkit does not model (G would be silently wrong)."""
    out = []
    if a.ablated:  # group --breaking measures these (symtrans.group.breaking); no factor table is derived for them
        out.append((f"ablated components ({', '.join(a.ablated)})", "the factor catalogue describes complete "
                    "architectures; an ablation's stabiliser is measured (symtrans group --breaking), not modelled"))
    if a.ln_eps == 0:
        out.append(("norm epsilon = 0", "with eps = 0 each residual segment between two norms has an "
                    "exact scaling symmetry that this toolkit does not model"))
    for size in ("d_v", "d_k"):
        value, d = getattr(a, size), a.d_model
        if isinstance(value, int) and isinstance(d, int) and value > d:
            out.append((f"{size} = {value} > d_model = {d}", f"heads wider than the residual stream: the "
                        f"per-head GL({size}) no longer acts freely (a product of a {d} x {value} and a {value} x "
                        f"{d} matrix has a stabiliser of dimension ({value} - {d})^2), so G's count would be too "
                        "high"))
    if a.sliding_window == 1:
        out.append(("a sliding window of 1", "every query sees only its own key, so attention is the identity and "
                    "W_Q, W_K are not read at all: a stabiliser far larger than G"))
    wide = [k for k in ("d_k", "d_v") if isinstance(getattr(a, k), int) and getattr(a, k) == a.d_model]
    if wide and a.H_kv != a.H and a.norm == "layernorm" and (a.bias or a.qkv_bias):
        out.append((f"grouped-query attention with {wide[0]} = d_model under LayerNorm",
                    "square key/value maps send the norm's hyperplane to a hyperplane, so each query head's "
                    "W_Q^h or W_O^h can move along its normal independently of the shared gauge (measured: "
                    "2 more null directions per boundary than G at H = 2, H_kv = 1, d_model = d_v = 4)"))
    if a.qkv_bias and not a.bias and a.norm == "layernorm":
        out.append(("LayerNorm and biases on Q, K, V only", "a LayerNorm whose output a bias-free FFN reads "
                    "admits gain and bias moves beyond the modelled factors (measured on small instances: more null "
                    "directions than G, pre- and post-LN); the family with Q, K, V-only biases known here, Qwen2, "
                    "uses RMSNorm"))
    return out


def _layer_factors(a: Architecture) -> list[Factor]:
    kv = _kv(a)
    gqa = a.H_kv != a.H
    rotary = a.positional == "rotary"
    if rotary and isinstance(a.d_k, int) and a.d_k % 2:
        raise SymtransError(f"{a.name}: rotary positions need an even head width, got d_k={a.d_k}")
    if rotary and dict(a.rope_scaling).get("rope_type") == "longrope":  # other scalings keep frequencies distinct
        raise SymtransError(f"{a.name}: rotary scaling 'longrope' is not modelled by the group (its per-dimension "
                            "factors can make two frequencies equal, which enlarges the rotary commutant)")
    gqa_shrink = Breaking("grouped-query attention", "shrinks",
                          "K/V of key/value head g are shared by the H/H_kv query heads of its group, so one "
                          "matrix acts on the whole group: one factor per key/value head", gqa)
    B = a.bias
    QKV = B or a.qkv_bias  # biases on the attention inputs (all of them, or Qwen2's Q, K, V only)
    f: list[Factor] = []
    qk_tags = [AxisTag("W_Q", 2, "qk-gauge", "right", "element", index="head"),
               AxisTag("W_K", 2, "qk-gauge", "right", "inverse_transpose", index="kv")]
    if QKV:
        qk_tags[1:1] = [AxisTag("b_Q", 1, "qk-gauge", "right", "element", index="head")]
        qk_tags.append(AxisTag("b_K", 1, "qk-gauge", "right", "inverse_transpose", index="kv"))
    partial = rotary and a.partial_rotary_factor != 1  # GPT-NeoX: rotary on the first r coordinates of a head
    r = sp.nsimplify(a.partial_rotary_factor) * S["d_k"]
    qk_dim = (r + (S["d_k"] - r) ** 2) if partial else S["d_k"] if rotary else S["d_k"] ** 2
    f.append(Factor(
        "qk-gauge", "continuous", "layer",
        "GL(d_k) per key/value head" + (", shrunk to the commutant of the rotary rotations" if rotary else "")
        + (" on the rotated coordinates times GL of the position-free ones" if partial else ""),
        kv * qk_dim, None, tuple(qk_tags),
        (Breaking("rotary positions", "shrinks",
                  "queries and keys are rotated by R_i, R_j after projection, so M must commute with every "
                  "R_{j-i}: with distinct frequencies the commutant is one complex scalar a I + b J per 2x2 "
                  "block, dimension d_k per head instead of d_k^2", rotary and not partial), gqa_shrink,
         Breaking("partial rotary positions (GPT-NeoX's rotary_pct)", "shrinks",
                  "only the first r = rotary_pct d_k coordinates rotate: the score is q_r R_t k_r^T + q_p k_p^T with "
                  "P_t = R_t (+) I, and M P_t M^-1 = P_t for every offset t; R_t's eigenvalues exp(+-i theta_f t) "
                  "are distinct and != 1 for generic t, so M preserves P_t's eigenspaces: M = M_r (+) M_p with M_r "
                  "in the rotary commutant (dimension r) and M_p in GL(d_k - r), no coupling; dimension "
                  "r + (d_k - r)^2 per head", partial),
         Breaking("QK-norm", "breaks",
                  "queries and keys are RMS-normalised per head before the product: RMSNorm(q M) = RMSNorm(q) M' "
                  "for every q forces M orthogonal (up to sign), and the norm's gain, shared by every head, must "
                  "then absorb Gamma^-1 M Gamma': with distinct gains that leaves only diagonal M, the same for "
                  "every head, which is the qk-norm-gain-trade factor (plus finitely many sign flips)", a.qk_norm)),
        "(X W_Q M + 1 b_Q M)(X W_K M^-T + 1 b_K M^-T)^T = (X W_Q + 1 b_Q)(X W_K + 1 b_K)^T: the scores are unchanged"
        + (" (soft-capping c tanh(s / c) is a function of the scores, so it keeps the factor)" if a.attn_softcap
           else ""),
        "g = (M_1, ..., M_{H_kv}), M_g in GL(d_k)" + (" commuting with the rotations" if rotary else ""),
        coordinates=(Piece("g", kv, (S["d_k"], S["d_k"]), "matrix", qk_dim if rotary else None),),
        role="head-gauge", paper=True))
    if a.qk_norm:  # listed only where the norms exist, like gate-scaling for gated FFNs
        f.append(_qk_norm_trade(a, rotary))
    vo_tags = [AxisTag("W_V", 2, "vo-gauge", "right", "element", index="kv")]
    if QKV:
        vo_tags.append(AxisTag("b_V", 1, "vo-gauge", "right", "element", index="kv"))
    vo_tags.append(AxisTag("W_O", 1, "vo-gauge", "left", "inverse", index="head"))
    f.append(Factor(
        "vo-gauge", "continuous", "layer", "GL(d_v) per key/value head", kv * S["d_v"] ** 2, None,
        tuple(vo_tags), (gqa_shrink,),
        "A (X W_V N + 1 b_V N) N^-1 W_O = A (X W_V + 1 b_V) W_O: each head's output Y^h W_O^h is unchanged",
        "g = (N_1, ..., N_{H_kv}), N_g in GL(d_v)", coordinates=(Piece("g", kv, (S["d_v"], S["d_v"]), "matrix"),),
        role="head-gauge", paper=True))
    if QKV:
        free = S["d_k"] - r if partial else S["d_k"]  # the key coordinates no rotation reaches
        f.append(Factor(
            "key-bias-shift", "continuous", "layer", "translations of b_K (softmax row constants)"
            + (" on the position-free coordinates" if partial else ""),
            kv * free, None, (AxisTag("b_K", 1, "key-bias-shift", "add", "translate", "u", index="kv"),),
            (Breaking("rotary positions", "breaks",
                      "the key bias is rotated by R_j before the dot product, so q_i R_{j-i} b_K^T varies with j",
                      rotary and not partial),
             Breaking("partial rotary positions (GPT-NeoX's rotary_pct)", "shrinks",
                      "a shift u of the key bias on the first r (rotated) coordinates adds q_i R_{j-i} u^T, which "
                      "varies with j; on the d_k - r position-free coordinates it adds q_i u^T, constant along j",
                      partial)),
            "s_ij = q_i (k_j + u)^T = q_i k_j^T + q_i u^T: the added term is constant along the key index j, "
            "and softmax(s + c 1^T) = softmax(s); the whole key bias is unidentifiable"
            + (" (partial rotary: u zero on the rotated coordinates)" if partial else ""),
            "u = (u_1, ..., u_{H_kv}), u_g in R^{d_k}" + (", zero on the first r coordinates" if partial else ""),
            coordinates=(Piece("u", kv, (1, S["d_k"]), "translation", free if partial else None),), paper=True))
        vb_tags = [AxisTag("b_V", 1, "value-bias-shift", "add", "translate", "v", index="kv")]
        if B:
            vb_tags.append(AxisTag("b_O", 0, "value-bias-shift", "add", "translate_image", "v", via="W_O"))
        f.append(Factor(
            "value-bias-shift", "continuous", "layer", "translations of b_V absorbed by b_O",
            kv * S["d_v"], None, tuple(vb_tags),
            (Breaking("Q, K, V-only biases (no b_O)", "breaks",
                      "b_V^g adds the constant row b_V^g W_O^h to the residual stream and nothing else "
                      "can absorb it: without b_O a change v of b_V moves the output by v W_O^h, which is "
                      "non-zero for v != 0 when W_O^h is injective (d_v <= d_model, generic)", not B),),
            "A^h 1 = 1 (rows of A^h sum to one), so b_V^h contributes the constant row 1 b_V^h W_O^h: "
            "(b_V + v, b_O - sum_h v_h W_O^h) gives the same X + MHA(X) + b_O",
            "v = (v_1, ..., v_{H_kv}), v_g in R^{d_v}", coordinates=(Piece("v", kv, (1, S["d_v"])),), paper=True))
    if a.parallel_residual:  # listed only where the residual is parallel, like the QK-norm trade
        f.append(_parallel_bias_trade(a))
    head_tags = [AxisTag(t, 0, "S_H", "index", "permutation", "pi", index="head")
                 for t in ("W_Q", "b_Q", "W_O") if QKV or not t.startswith("b_")]
    head_tags += [AxisTag(t, 0, "S_H", "index", "permutation", "kappa", index="kv")
                  for t in ("W_K", "b_K", "W_V", "b_V") if QKV or not t.startswith("b_")]
    if a.qk_norm_full:  # OLMo 2: each head's slice of the full-width query/key norm gain moves with its head
        head_tags += [AxisTag("q_norm_full_w", 0, "S_H", "index", "permutation", "pi", index="head"),
                      AxisTag("k_norm_full_w", 0, "S_H", "index", "permutation", "kappa", index="kv")]
    order = sp.factorial(S["H"]) if not gqa else sp.factorial(S["H_kv"]) * sp.factorial(S["H"] / S["H_kv"]) ** S["H_kv"]
    f.append(Factor(
        "S_H", "discrete", "layer", "head relabelling" + (" respecting key/value groups" if gqa else ""),
        None, order, tuple(head_tags),
        (Breaking("grouped-query attention", "shrinks",
                  "a query head can only move with its key/value head: S_{H/H_kv} wr S_{H_kv}, "
                  "order H_kv! ((H/H_kv)!)^H_kv", gqa),),
        "sum_h Y^{pi(h)} W_O^{pi(h)} = sum_h Y^h W_O^h: MHA sums over heads",
        "pi a permutation of the query heads that maps key/value groups to groups; kappa the induced "
        "permutation of the key/value heads", paper=True))
    ffn_ins = ["W_in", "b_in"] + (["W_gate", "b_gate"] if a.ffn == "gated" else [])
    ff_tags = [AxisTag(t, 1 if t.startswith("W") else 0, "S_dff", "right", "element", "P")
               for t in ffn_ins if B or not t.startswith("b_")]
    ff_tags.append(AxisTag("W_out", 0, "S_dff", "left", "inverse", "P"))
    f.append(Factor(
        "S_dff", "discrete", "layer", "permutations of the FFN hidden units", None, sp.factorial(S["d_ff"]),
        tuple(ff_tags), (),
        "act(x W_in P + b_in P) P^-1 W_out = act(x W_in + b_in) W_out for a permutation matrix P "
        "(the activation acts entry-wise)" + ("; the gate is permuted with the up projection" if a.ffn == "gated" else ""),
        "P a d_ff x d_ff permutation matrix", paper=True))
    homog = a.activation == "relu" or a.ffn == "gated"
    sc_tags = [AxisTag(t, 1 if t.startswith("W") else 0, "ffn-scaling", "right", "element", "D")
               for t in ("W_in", "b_in") if B or not t.startswith("b_")]
    sc_tags.append(AxisTag("W_out", 0, "ffn-scaling", "left", "inverse", "D"))
    if a.ffn == "gated":
        group = "non-zero scalings of the up-projection units ((R^*)^d_ff)"
        ident = "(act(x W_gate) * (x W_in D)) D^-1 W_out = (act(x W_gate) * (x W_in)) W_out: the up branch is linear"
        el = "D = diag(d), d_j != 0"
    else:
        group = "positive scalings of the FFN hidden units ((R_>0)^d_ff)"
        ident = "relu(x W_in D + b_in D) D^-1 W_out = relu(x W_in + b_in) W_out since relu(d t) = d relu(t) for d > 0"
        el = "D = diag(d), d_j > 0"
    f.append(Factor(
        "ffn-scaling", "continuous", "layer", group, S["d_ff"], None, tuple(sc_tags),
        (Breaking(f"{a.activation} activation" if not homog else "non-homogeneous activation", "breaks",
                  "the activation is not positively homogeneous: act(d t) != d act(t) for d > 0, d != 1 "
                  "(e.g. gelu(2) != 2 gelu(1))", not homog),),
        ident, el, coordinates=(Piece("D", 1, (S["d_ff"], S["d_ff"]), "diagonal"),), role="hidden-scaling", paper=True))
    if a.ffn == "gated":
        gate_ok = a.activation == "relu"
        g_tags = [AxisTag(t, 1 if t.startswith("W") else 0, "gate-scaling", "right", "element", "D")
                  for t in ("W_gate", "b_gate") if B or not t.startswith("b_")]
        g_tags.append(AxisTag("W_out", 0, "gate-scaling", "left", "inverse", "D"))
        f.append(Factor(
            "gate-scaling", "continuous", "layer", "positive scalings of the gate units ((R_>0)^d_ff)", S["d_ff"],
            None, tuple(g_tags) if gate_ok else (),
            (Breaking(f"{a.activation} gate" if not gate_ok else "non-homogeneous gate activation", "breaks",
                      "the gate's activation is not positively homogeneous: act(d t) != d act(t) for d > 0, d != 1 "
                      "(e.g. silu(2) != 2 silu(1)); only a ReLU gate has this scaling", not gate_ok),),
            "(relu(x W_gate D + b_gate D) * (x W_in + b_in)) D^-1 W_out = (relu(x W_gate + b_gate) * (x W_in + b_in)) "
            "W_out since relu(d t) = d relu(t) for d > 0; independent of the up-projection scaling (it acts on "
            "W_gate, that one on W_in)",
            "D = diag(d), d_j > 0", coordinates=(Piece("D", 1, (S["d_ff"], S["d_ff"]), "diagonal"),),
            role="hidden-scaling"))
    return f


def _parallel_bias_trade(a: Architecture) -> Factor:
    """GPT-NeoX's parallel residual: the attention's and the FFN's output biases are added together.

    Derivation. With ``out = X + MHA(N1(X)) + b_O + FFN_0(N2(X)) + b_out`` both
    biases reach the layer's output only through their sum (nothing reads
    X + MHA + b_O on its own: the FFN's norm reads X), so (b_O + c, b_out - c)
    leaves every layer output unchanged, c in R^{d_model}. In the sequential
    form N2 reads X + MHA + b_O, and a change of b_O alone moves the FFN's input:
    the trade is gone. Along the all-ones row the trade (c = a 1) is already a
    centring shift (c_O = a, c_out = -a) when a centring norm reads every write,
    so it adds d_model - 1 directions there, d_model otherwise.
    """
    B, ln = a.bias, a.norm == "layernorm"
    centring = ln and B and (a.norm_placement == "post" or a.final_norm)
    present = a.parallel_residual and B
    tags = (AxisTag("b_O", 0, "parallel-bias-trade", "add", "translate", "c"),
            AxisTag("b_out", 0, "parallel-bias-trade", "add", "translate_neg", "c")) if present else ()
    return Factor(
        "parallel-bias-trade", "continuous", "layer", "translations of b_O undone on b_out (parallel residual)",
        S["d_model"] - (1 if centring else 0), None, tags,
        (Breaking("no biases", "breaks", "without b_O and b_out there is nothing to trade", not B),
         Breaking("LayerNorm centring", "shrinks",
                  "the trade along the all-ones row, c = a 1, is already a centring shift (c_O = a, c_out = -a): "
                  "d_model - 1 new directions", bool(centring and a.parallel_residual))),
        "out = X + MHA(N1(X)) + (b_O + c) + FFN_0(N2(X)) + (b_out - c) = X + MHA(N1(X)) + b_O + FFN_0(N2(X)) + b_out",
        "c in R^{d_model}" + (" (modulo the all-ones row, a centring shift)" if centring else ""),
        coordinates=(Piece("c", 1, (1, S["d_model"])),))


def _qk_norm_trade(a: Architecture, rotary: bool) -> Factor:
    """QK-norm's surviving query/key gauge: the query gain times S, the key gain times S^-1.

    Derivation. With QK-norm the score of query i and key j is
    ``RMS(x_i W_Q^h) Gamma_q R_{j-i} Gamma_k RMS(x_j W_K^g)^T`` (rotations after the
    norms). A change of W_Q^h, W_K^g can reach the norms' outputs only through
    RMSNorm(z M) = RMSNorm(z) M', which needs M orthogonal; the change it leaves
    behind, Gamma_q^-1 O Gamma_q', has to commute with every R_{j-i}, and with
    distinct gains an orthogonal O of that form is diagonal up to signs. What is
    left is S = Gamma_q'/Gamma_q diagonal, the same for every head (the gains are
    shared), with Gamma_k' = Gamma_k S^-1 and S R_t S^-1 = R_t: S constant on each
    rotated pair (d_k / 2 parameters; d_k without rotary positions).
    """
    dim = S["d_k"] / 2 if rotary else S["d_k"]
    full = a.qk_norm_full  # OLMo 2: one gain over every head's entries, so one S per key/value head
    if full:
        tags = (AxisTag("q_norm_full_w", 1, "qk-norm-gain-trade", "right", "element", "D", index="head"),
                AxisTag("k_norm_full_w", 1, "qk-norm-gain-trade", "right", "inverse", "D", index="kv"))
    else:
        tags = (AxisTag("q_norm_w", 0, "qk-norm-gain-trade", "right", "element", "D"),
                AxisTag("k_norm_w", 0, "qk-norm-gain-trade", "right", "inverse", "D")) if a.qk_norm else ()
    return Factor(
        "qk-norm-gain-trade", "continuous", "layer",
        "diagonal scalings of the query norm's gain undone on the key norm's gain"
        + (" (one per rotated pair of coordinates)" if rotary else "")
        + (", one scaling per key/value head (the norm spans every head)" if full else ""),
        S["H_kv"] * dim if full else dim, None, tags,
        (Breaking("no QK-norm", "breaks", "without norms on the queries and keys there are no gains to trade (the "
                  "qk-gauge acts instead)", not a.qk_norm),
         Breaking("QK-norm over the full width (OLMo 2)", "shrinks",
                  "the norm of q (k) spans every head, so a change can reach it only through an orthogonal map of "
                  "the whole width that the gains absorb: with distinct gains a diagonal S, blockwise S_h on query "
                  "head h and S_g on key head g; each score q_h S_h R_t S_g^-1 k_g^T is unchanged for every offset t "
                  "only if S_h = S_g (t = 0) and S_g commutes with the rotations: one S per key/value head, shared "
                  "by its query heads, instead of one for the whole layer (which a per-head norm's shared gain "
                  "forces), dimension H_kv d_k/2", full)),
        "(q Gamma_q S R_t)(k Gamma_k S^-1 R_s)^T = (q Gamma_q R_t)(k Gamma_k R_s)^T when S commutes with the rotations "
        "(S diagonal and equal on each rotated pair): every score is unchanged",
        "D = diag(s), s_i != 0" + (", s equal on the two coordinates of each rotated pair" if rotary else ""),
        coordinates=(Piece("D", S["H_kv"] if full else 1, (S["d_k"], S["d_k"]), "diagonal", dim),),
        # one gain scaled, the other gain undoing it: relate and the canonical form solve it as a norm's gain
        # scaling; the full-width norm's per-head gain blocks take one scaling per key/value head
        role="head-gain-trade" if full else "norm-scaling")


def _readers(a: Architecture, which: str) -> list[tuple[str, str | None, str | None]]:
    """(weight, bias, head index) of the affine maps that read a norm's output: attention or FFN inputs."""
    if which == "attention":
        return [("W_Q", "b_Q", "head"), ("W_K", "b_K", "kv"), ("W_V", "b_V", "kv")]
    out = [("W_in", "b_in", None)]
    if a.ffn == "gated":
        out.append(("W_gate", "b_gate", None))
    return out


def _reader_bias(a: Architecture, which: str) -> bool:
    """Whether every reader of a norm's output (attention inputs or FFN inputs) has a bias to absorb a constant."""
    return bool(a.bias or (which == "attention" and a.qkv_bias))


def _reader_width(a: Architecture, which: str) -> sp.Expr:
    kv = _kv(a)
    if which == "attention":
        return S["H"] * S["d_k"] + kv * S["d_k"] + kv * S["d_v"]
    return S["d_ff"] * (2 if a.ffn == "gated" else 1)


def _norm_factors(a: Architecture) -> list[Factor]:
    """The symmetries the norms create: centring shifts, bias transfers, reader hyperplanes, gain scalings.

    Post-LN: each norm's output is read by affine maps *and* carried by the
    residual, which only the next norm (or the output) sees. Pre-LN: each
    norm's output is read only by affine maps, and the residual stream is
    read only through norms.
    """
    ln = a.norm == "layernorm"
    post = a.norm_placement == "post"
    B = a.bias
    d = S["d_model"]
    f: list[Factor] = []
    no_centring = Breaking("RMSNorm (no centring)", "breaks",
                           "RMSNorm does not subtract the mean: a write along the all-ones row changes its output", not ln)
    no_norm_bias = Breaking("RMSNorm (no bias)", "breaks", "RMSNorm has no bias to translate", not ln)
    no_bias = Breaking("no biases", "breaks", "without biases nothing absorbs the constant a shift leaves behind",
                       not B)
    # 1. centring shifts: every write into the residual reaches the output only through a centring norm
    reaches_norm = post or a.final_norm
    tags = [AxisTag("W_O", 2, "centring-shift", "add", "translate_ones", "w_O", index="head"),
            AxisTag("W_out", 1, "centring-shift", "add", "translate_ones", "w_out")]
    if B:
        tags += [AxisTag("b_O", 0, "centring-shift", "add", "translate_ones", "c_O"),
                 AxisTag("b_out", 0, "centring-shift", "add", "translate_ones", "c_out")]
    f.append(Factor(
        "centring-shift", "continuous", "layer", "translations of the residual writes along the all-ones row",
        S["H"] * S["d_v"] + S["d_ff"] + (2 if B else 0), None, tuple(tags),
        (no_centring,
         Breaking("no final norm (pre-LN)", "breaks", "the last residual state is the output itself, so its "
                  "all-ones component is visible", not reaches_norm)),
        "LN(z + c 1) = LN(z): LayerNorm subtracts the row mean. "
        + ("Post-LN: W_O^h, b_O write into LN1 and W_out, b_out into LN2" if post else
           "Pre-LN: the residual stream is read only by LayerNorms (the next layers' and the final one)")
        + ", so (W_O^h + w_h 1^T, W_out + w 1^T, b_O + c_O 1, b_out + c_out 1) leaves every norm input's "
        "centred part unchanged",
        "(w_1..w_H in R^{d_v}, w in R^{d_ff}, c_O, c_out in R)",
        coordinates=(Piece("w_O", S["H"], (S["d_v"], 1)), Piece("w_out", 1, (S["d_ff"], 1)))
        + ((Piece("c_O", 1, (1, 1)), Piece("c_out", 1, (1, 1))) if B else ())))
    if post:
        # 2. post-LN: LN1's bias passes through the FFN (b_in) and the residual (b_out)
        tags = [AxisTag("ln1_b", 0, "ffn-bias-transfer", "add", "translate", "t")]
        tags += [AxisTag(b, 0, "ffn-bias-transfer", "add", "translate_image", "t", via=w)
                 for w, b, _ in _readers(a, "ffn")]
        tags.append(AxisTag("b_out", 0, "ffn-bias-transfer", "add", "translate_neg", "t"))
        f.append(Factor(
            "ffn-bias-transfer", "continuous", "layer", "translations of LN1's bias, undone by b_in and b_out",
            d, None, tuple(tags) if B and ln else (), (no_norm_bias, no_bias),
            "X1 = LN1(.) + t feeds the FFN and the residual: (beta1 + t, b_in - t W_in, b_out - t) gives "
            "X1 + t + act(X1 W_in + b_in) W_out + b_out - t, the same input of LN2",
            "t in R^{d_model}", coordinates=(Piece("t", 1, (1, d)),)))
        # 3. post-LN: the FFN reads LN1's output, which lies on a hyperplane
        f.append(_hyperplane(a, "ffn", "layer", "ln1", "ffn-input-hyperplane", ln and B))
        # between layers: LN2 of layer l feeds layer l+1 (attention and residual)
        tags = [AxisTag("ln2_b", 0, "attention-bias-transfer", "add", "translate", "t", scope="prev")]
        tags += [AxisTag(b, 1, "attention-bias-transfer", "add", "translate_image", "t", via=w, index=ix, scope="next")
                 for w, b, ix in _readers(a, "attention")]
        tags.append(AxisTag("b_O", 0, "attention-bias-transfer", "add", "translate_neg", "t", scope="next"))
        f.append(Factor(
            "attention-bias-transfer", "continuous", "stack",
            "translations of LN2's bias (or the embedding norm's), undone by the next layer's b_Q, b_K, b_V, b_O",
            d, None, tuple(tags) if B and ln else (), (no_norm_bias, no_bias),
            "the next layer reads X + t through X W + b (Q, K, V) and the residual X + t + MHA + b_O: "
            "(beta2 + t, b_Q - t W_Q, b_K - t W_K, b_V - t W_V, b_O - t) leaves its LN1 input unchanged",
            "t in R^{d_model}, one per boundary between layers", coordinates=(Piece("t", 1, (1, d)),)))
        f.append(_hyperplane(a, "attention", "stack", "ln2", "attention-input-hyperplane",
                             ln and _reader_bias(a, "attention")))
    else:
        for which, norm in (("attention", "ln1"), ("ffn", "ln2")):
            readers = _readers(a, which)
            sc = [AxisTag(f"{norm}_w", 0, f"{norm}-scaling", "right", "element", "D")]
            if ln:
                sc.append(AxisTag(f"{norm}_b", 0, f"{norm}-scaling", "right", "element", "D"))
            sc += [AxisTag(w, 1 if ix else 0, f"{norm}-scaling", "left", "inverse", "D", index=ix)
                   for w, _, ix in readers]
            f.append(Factor(
                f"{norm}-scaling", "continuous", "layer",
                f"diagonal rescalings of {norm.upper()}'s gain" + (" and bias" if ln else "") + ", undone by its readers",
                d, None, tuple(sc) if a.pre_norms else (),
                (Breaking("no pre-norms", "breaks", "the sub-block reads the residual stream itself (OLMo 2): there is "
                          "no gain in front of its readers to rescale, and a rescaling of the stream is not undone "
                          "by the post-norms' outputs, which are added to it unscaled", not a.pre_norms),),
                f"pre-LN: {norm.upper()}'s output is read only by affine maps: (gamma D, beta D, D^-1 W) gives "
                "(z gamma D + beta D) D^-1 W = (z gamma + beta) W",
                "D = diag(s), s_i != 0", coordinates=(Piece("D", 1, (d, d), "diagonal"),), role="norm-scaling"))
            tr = [AxisTag(f"{norm}_b", 0, f"{norm}-bias-transfer", "add", "translate", "t")]
            tr += [AxisTag(b, 1 if ix else 0, f"{norm}-bias-transfer", "add", "translate_image", "t", via=w, index=ix)
                   for w, b, ix in readers]
            f.append(Factor(
                f"{norm}-bias-transfer", "continuous", "layer",
                f"translations of {norm.upper()}'s bias, undone by its readers' biases",
                d, None, tuple(tr) if ln and _reader_bias(a, which) else (),
                (no_norm_bias, dataclasses.replace(no_bias, present=not _reader_bias(a, which))),
                f"(beta + t, b - t W) for every reader of {norm.upper()}: (y + t) W + b - t W = y W + b",
                "t in R^{d_model}", coordinates=(Piece("t", 1, (1, d)),)))
            f.append(_hyperplane(a, which, "layer", norm, f"{'attention' if which == 'attention' else 'ffn'}-input-hyperplane",
                                 ln and _reader_bias(a, which)))
    return f


def _hyperplane(a: Architecture, which: str, scope: str, norm: str, name: str, ok: bool) -> Factor:
    """Readers of a LayerNorm output see only the hyperplane <y - beta, 1/gamma> = 0."""
    readers = _readers(a, which)
    read = "next" if scope == "stack" else "layer"
    tags = []
    if ok:
        for w, b, ix in readers:
            tags.append(AxisTag(w, 1 if ix else 0, name, "add", "hyperplane_weight", "v_" + w, via=f"{norm}_w",
                                index=ix, scope=read))
            tags.append(AxisTag(b, 1 if ix else 0, name, "add", "hyperplane_bias", "v_" + w,
                                via=f"{norm}_w,{norm}_b", index=ix, scope=read))
    reason_absent = not ok
    src = f"{norm.upper()}" + (" of the layer before (or the embedding norm)" if scope == "stack" else "")
    overlap = _value_overlap(a) if which == "attention" and ok else sp.Integer(0)
    return Factor(
        name, "continuous", scope,
        f"moves of the {'attention' if which == 'attention' else 'FFN'} input maps along the normal of the "
        f"hyperplane that {src}'s output lies on",
        _reader_width(a, which) - overlap, None, tuple(tags),
        (Breaking("no centring or no biases", "breaks",
                  "RMSNorm's output is not confined to a hyperplane, and without a bias the constant "
                  "<beta, 1/gamma> v cannot be absorbed", reason_absent),
         Breaking("value heads as wide as the residual stream (d_v = d_model, one query head per key/value "
                  "head)", "shrinks",
                  "W_V^g and W_O^h are then square and generically invertible, and the hyperplane move v = "
                  "a 1 W_O^-1 of W_V is already a vo-gauge (N = I + W_V^-1 (1/gamma)^T v), whose change of W_O "
                  "is a centring shift, plus a value-bias shift whose image in b_O lies along 1: one direction "
                  "per key/value head is counted by those factors, so this factor adds its width minus H_kv",
                  overlap != 0)),
        "y = gamma * z + beta with z centred (z 1 = 0), so every output row satisfies <y - beta, 1/gamma> = 0: "
        "(W + (1/gamma)^T v, b - <beta, 1/gamma> v) gives y W + b + <y - beta, 1/gamma> v = y W + b"
        + (" for each reader" if len(readers) > 1 else ""),
        "one row v_W per reader W (width = its output width)" + ("; one per boundary between layers" if scope == "stack" else ""),
        coordinates=tuple(Piece(t.component, *_READ_WIDTHS[t.tensor]) for t in tags if t.how == "hyperplane_weight"))


#: a reader's hyperplane move: how many rows (one per head or one) and their shape
_READ_WIDTHS: dict[str, tuple[sp.Expr, tuple[sp.Expr, sp.Expr]]] = {
    "W_Q": (S["H"], (1, S["d_k"])), "W_K": (S["H_kv"], (1, S["d_k"])), "W_V": (S["H_kv"], (1, S["d_v"])),
    "W_in": (sp.Integer(1), (1, S["d_ff"])), "W_gate": (sp.Integer(1), (1, S["d_ff"]))}


def _value_overlap(a: Architecture) -> sp.Expr:
    """Directions of an attention-input hyperplane that other factors already span (d_v = d_model).

    Tangent vectors: a hyperplane move of the value map, dW_V = (1/gamma)^T v,
    db_V = -<beta, 1/gamma> v, is a vo-gauge move n = W_V^-1 (1/gamma)^T v
    (square W_V, d_v = d_model) when its change of W_O, -n W_O =
    -W_V^-1 (1/gamma)^T (v W_O), is a centring shift w 1^T, i.e. when
    v W_O is along 1: v = a 1 W_O^-1, one direction per key/value head, and
    only if that head has one query head (a second W_O^h' would need v along
    1 W_O'^-1 too). What is left on b_V is a value-bias shift u along
    1 W_O^-1, whose image u W_O in b_O is a centring shift of b_O. So the
    overlap needs the centring shift (a centring norm behind every write), the
    value-bias shift and b_O (all biases).
    """
    if not all(isinstance(x, int) for x in (a.d_v, a.d_model, a.H, a.H_kv)):
        return sp.Integer(0)  # symbolic sizes: the generic count d_v < d_model
    centring = a.norm == "layernorm" and (a.norm_placement == "post" or a.final_norm)
    if a.d_v == a.d_model and a.H == a.H_kv and a.bias and centring:
        return S["H"]
    return sp.Integer(0)


def _has_head(a: Architecture) -> bool:
    """Causal language models end in an output head on the ``model`` scope."""
    return a.attention == "causal"


def _embedding_factors(a: Architecture) -> list[Factor]:
    """Continuous symmetries that only the ``model`` scope has (embedding tables, output head)."""
    ln = a.norm == "layernorm"
    post = a.norm_placement == "post"
    head = _has_head(a)
    tied = head and a.tied_lm_head
    tables = [t for t in ("word", "pos", "type") if t in model_tensor_names(a)]
    # a write along the all-ones row is invisible when every reader of the first hidden state is a LayerNorm
    centred = ln and (a.embedding_norm if post else a.final_norm or a.embedding_norm)
    free = [t for t in tables if not (t == "word" and tied)]
    sizes = {"word": S["vocab_size"], "pos": S["max_positions"], "type": sp.Integer(a.type_vocab_size)}
    rows = {**sizes, "pos": sp.sympify(a.position_table) if a.position_table else S["max_positions"]}
    f: list[Factor] = []
    tags = tuple(AxisTag(t, 1, "embedding-centring-shift", "add", "translate_ones", f"c_{t}", scope="model")
                 for t in free) if centred else ()
    f.append(Factor(
        "embedding-centring-shift", "continuous", "model",
        "per-row translations of the embedding tables along the all-ones row",
        sp.Add(*[sizes[t] for t in free]) if free else sp.Integer(0), None, tags,
        (Breaking("no centring norm reads the embeddings", "breaks",
                  "only a LayerNorm (mean subtracted) makes a write along the all-ones row invisible", not centred),),
        "LN(x + c 1) = LN(x): every row of a table read only through LayerNorms may move along 1"
        + ("; the word table is also the tied output head, whose logits would move" if tied else ""),
        "one scalar per row of " + ", ".join(free),
        coordinates=tuple(Piece(t.component, 1, (rows[t.tensor], 1)) for t in tags)))
    pairs = [t for t in free if t != "pos"] if "pos" in tables else []
    dim = sp.Integer(0)
    ttags: list[AxisTag] = []
    for t in pairs:
        dim += S["d_model"] - (1 if centred else 0)
        ttags += [AxisTag(t, 1, "embedding-translation", "add", "translate_rows", f"a_{t}", scope="model"),
                  AxisTag("pos", 1, "embedding-translation", "add", "translate_rows_neg", f"a_{t}", scope="model")]
    f.append(Factor(
        "embedding-translation", "continuous", "model",
        "translations moved between the position table and the other embedding tables",
        dim, None, tuple(ttags),
        (Breaking("no second table to trade with", "breaks",
                  "the sum word[t] + pos[i] (+ type[s]) is all that is read: a constant moves between tables only "
                  "when there is a learned position table and another table that no output head reads",
                  not pairs),),
        "word[t] + a + pos[i] - a = word[t] + pos[i]" + (" (a along 1 is already an embedding-centring shift, so "
                                                         "d_model - 1 new directions per table)" if centred else ""),
        "a_t in R^{d_model} per table traded with the position table",
        coordinates=tuple(Piece(t.component, 1, (1, S["d_model"])) for t in ttags if t.how == "translate_rows")))
    untied = head and not a.tied_lm_head and a.final_norm and a.norm_placement == "pre"
    sc = [AxisTag("final_ln_w", 0, "final-norm-scaling", "right", "element", "D", scope="model"),
          AxisTag("lm_head", 0, "final-norm-scaling", "left", "inverse", "D", scope="model")]
    if ln:
        sc.insert(1, AxisTag("final_ln_b", 0, "final-norm-scaling", "right", "element", "D", scope="model"))
    f.append(Factor(
        "final-norm-scaling", "continuous", "model", "diagonal rescalings of the final norm, undone by the output head",
        S["d_model"], None, tuple(sc) if untied else (),
        (Breaking("no untied output head after a final norm", "breaks",
                  "the final norm's output is the scope's output (encoders) or is read by the tied word table",
                  not untied),),
        "(gamma_f D, beta_f D, D^-1 W_head): (z gamma_f D + beta_f D) D^-1 W_head = (z gamma_f + beta_f) W_head",
        "D = diag(s), s_i != 0", coordinates=(Piece("D", 1, (S["d_model"], S["d_model"]), "diagonal"),),
        role="norm-scaling"))
    # every norm is read by affine maps only (pre-norm, untied head) and nothing fixed is added to the residual
    k = unused_position_rows(a)
    f.append(Factor(
        "unused-position-rows", "continuous", "model", "arbitrary moves of the position rows no input reads",
        k * S["d_model"], None,
        (AxisTag("pos", 1, "unused-position-rows", "add", "translate_leading_rows", "r", scope="model"),) if k else (),
        (Breaking("every position row is read", "breaks",
                  "only a table with rows before the first position used (RoBERTa numbers positions from "
                  "padding_idx + 1) has rows that no input reaches", not k),),
        "positions run from the first used row on (symtrans.numeric reads pos[offset + i] for unpadded input), so "
        "the leading rows never enter any output; a padded batch would read row padding_idx for its pad tokens",
        "r in R^{k x d_model}, k = position_table - max_positions leading rows",
        coordinates=(Piece("r", 1, (k, S["d_model"])),), role="unread"))
    pad = unread_pad_id(a)
    pad_centred = centred and "word" in free  # the row's move along 1 is already an embedding-centring shift
    f.append(Factor(
        "unread-pad-row", "continuous", "model", "arbitrary moves of the pad token's word row, which unpadded "
        "input never reads", S["d_model"] - (1 if pad_centred else 0) if pad is not None else sp.Integer(0), None,
        (AxisTag("word", 1, "unread-pad-row", "add", "translate", "r", scope="model"),) if pad is not None else (),
        (Breaking("the pad id is an ordinary token", "breaks",
                  "only a model that numbers positions from padding_idx (RoBERTa) reserves the pad id for padding; "
                  "elsewhere unpadded input may contain it like any token", pad is None),),
        "the pad id marks padding (transformers gives it the position padding_idx), so unpadded input never "
        "contains it and word[padding_idx] enters no output" + (" (its move along 1 is already an embedding-"
                                                                "centring shift: d_model - 1 new directions)"
                                                                if pad_centred else ""),
        "r in R^{1 x d_model} added to word[padding_idx] (act() places it on that row)",
        coordinates=(Piece("r", 1, (1, S["d_model"])),), role="unread"))
    ln_head = untied and a.norm == "layernorm"
    f.append(Factor(
        "final-norm-bias-transfer", "continuous", "model",
        "translations of the final LayerNorm's bias, absorbed by the untied head through the norm's hyperplane",
        S["d_model"], None,
        (AxisTag("final_ln_b", 0, "final-norm-bias-transfer", "add", "translate", "t", scope="model"),
         AxisTag("lm_head", 0, "final-norm-bias-transfer", "add", "hyperplane_head", "t",
                 via="final_ln_w,final_ln_b", scope="model")) if ln_head else (),
        (Breaking("no untied head reading a final LayerNorm", "breaks",
                  "the head has no bias: only the hyperplane <y - beta, 1/gamma> = 0 of a LayerNorm output lets it "
                  "absorb a shifted bias, and a tied head is the word table", not ln_head),),
        "y = z gamma + beta with z centred: (y + t)(W + (1/gamma)^T v) = y W + t W + <beta + t, 1/gamma> v, "
        "which is y W for v = -t W / <beta + t, 1/gamma> (a non-linear action, defined where <beta + t, "
        "1/gamma> != 0)",
        "t in R^{d_model}", coordinates=(Piece("t", 1, (1, S["d_model"])),)))
    rot_ok = untied and a.positional != "sinusoidal" and not a.embedding_norm
    rms = a.norm == "rmsnorm"
    rtags: list[AxisTag] = [AxisTag(t, 1, "residual-rotation", "right", "element", "Q", scope="model")
                            for t in tables]  # the embedding tables write into the residual
    writers = [("W_O", 2, "head"), ("W_out", 1, None)] + ([("b_O", 0, None), ("b_out", 0, None)] if a.bias else [])
    for t, ax, ix in writers:
        rtags.append(AxisTag(t, ax, "residual-rotation", "right", "element", "Q", index=ix))
    readers = [("W_Q", 1, "head", "ln1_w"), ("W_K", 1, "kv", "ln1_w"), ("W_V", 1, "kv", "ln1_w"),
               ("W_in", 0, None, "ln2_w")] + ([("W_gate", 0, None, "ln2_w")] if a.ffn == "gated" else [])
    for t, ax, ix, g in readers:
        if a.pre_norms:
            rtags.append(AxisTag(t, ax, "residual-rotation", "left", "conjugate_gain", "Q", index=ix, via=g))
        else:  # OLMo 2: the readers read the rotated stream itself
            rtags.append(AxisTag(t, ax, "residual-rotation", "left", "inverse", "Q", index=ix))
    if not rms:  # LayerNorm biases: beta -> beta diag(gamma)^-1 Q diag(gamma)
        for ln in ("ln1", "ln2"):
            rtags.append(AxisTag(f"{ln}_b", 0, "residual-rotation", "right", "conjugate_gain_row", "Q", via=f"{ln}_w"))
        rtags.append(AxisTag("final_ln_b", 0, "residual-rotation", "right", "conjugate_gain_row", "Q",
                             via="final_ln_w", scope="model"))
    rtags.append(AxisTag("lm_head", 0, "residual-rotation", "left", "conjugate_gain", "Q", via="final_ln_w",
                         scope="model"))
    d = S["d_model"]
    f.append(Factor(
        "residual-rotation", "continuous", "model",
        "orthogonal maps of the residual stream (O(d_model))" if rms else
        "orthogonal maps of the residual stream fixing the all-ones direction (O(d_model - 1))",
        d * (d - 1) / 2 if rms else (d - 1) * (d - 2) / 2, None, tuple(rtags) if rot_ok else (),
        (Breaking("not a pre-norm model with an untied head", "breaks",
                  "Norm(x Q) = Norm(x) Q needs Q orthogonal (and Q 1 = 1 under LayerNorm's centring); the gains "
                  "are folded into the readers (W -> diag(gamma)^-1 Q^-1 diag(gamma) W), which a tied head (the "
                  "word table would have to be both Q-rotated and unrotated), a post-norm residual or an "
                  "embedding norm cannot absorb", not untied or a.embedding_norm),
         Breaking("sinusoidal positions", "breaks",
                  "the sinusoidal table is fixed, not a parameter, so it cannot absorb E -> E Q",
                  a.positional == "sinusoidal"),
         Breaking("post-norms", "breaks",
                  "the residual writers are norms: RMSNorm(z) Gamma must become RMSNorm(z O) Gamma' = RMSNorm(z) "
                  "Gamma Q, i.e. O = Gamma Q Gamma'^-1 orthogonal, which needs Q^T Gamma^2 Q diagonal: with "
                  "distinct gains Q is a signed permutation (the discrete residual-permutation)", a.post_norms)),
        ("RMSNorm(X Q) = RMSNorm(X) Q for orthogonal Q" if rms else
         "LN(X Q) = LN(X) Q for orthogonal Q with Q 1 = 1 (centring commutes with Q, norms kept)")
        + ": writers (embedding tables, W_O, W_out" + (", b_O, b_out" if a.bias else "") + ") take Q, every "
        "reader diag(gamma)^-1 Q^-1 diag(gamma)" + ("" if rms else ", every norm bias beta diag(gamma)^-1 Q "
                                                   "diag(gamma)") + ", so every hidden state becomes X Q and "
        "every norm output is unchanged after its reader",
        "Q in O(d_model)" if rms else "Q in O(d_model) with Q 1 = 1",
        coordinates=(Piece("A", 1, (d, d), "rotation", d * (d - 1) / 2 if rms else (d - 1) * (d - 2) / 2),),
        role="residual"))
    return f


def _data_factors(a: Architecture) -> list[Factor]:
    pos = a.positional != "none"
    causal = a.attention == "causal"
    return [Factor(
        "S_n", "discrete", "data", "token permutations (an equivariance of the layers)", None,
        sp.factorial(S["n"]), (),
        (Breaking(f"{a.positional} positions" if pos else "positional information", "breaks",
                  "position information is tied to the slot, not the token: (P X) + E != P (X + E) for a "
                  "position table E with distinct rows" if a.positional != "rotary" else
                  "rotary positions rotate query i and key j by R_i, R_j, so scores depend on the slots", pos),
         Breaking("causal mask", "breaks", "the mask j <= i is not invariant under relabelling the tokens: "
                  "P M P^T != M for the lower-triangular mask M unless P = I", causal)),
        "Layer(P X) = P Layer(X) for a permutation matrix P: softmax(P S P^T) = P softmax(S) P^T and "
        "every other step acts row by row",
        "P an n x n permutation matrix acting on the tokens (data, not weights)",
        data_tags=("X axis n: left by P (tokens reordered)", "output axis n: left by P (equivariance)"), paper=True)]


def _model_factors(a: Architecture) -> list[Factor]:
    rms = a.norm == "rmsnorm"
    readers = [("W_Q", 1, "head"), ("W_K", 1, "kv"), ("W_V", 1, "kv"), ("W_in", 0, None)]
    if a.ffn == "gated":
        readers.append(("W_gate", 0, None))
    tags = [AxisTag(t, ax, "residual-permutation", "left", "inverse", "Q", index=ix) for t, ax, ix in readers]
    writers = [("W_O", 2, "head"), ("b_O", 0, None), ("W_out", 1, None), ("b_out", 0, None)]
    tags += [AxisTag(t, ax, "residual-permutation", "right", "element", "Q", index=ix)
             for t, ax, ix in writers if a.bias or not t.startswith("b_")]
    for ln in ("ln1", "ln2"):
        if a.pre_norms or a.norm_placement == "post":  # OLMo 2 has no pre-norms: only the post-norms' gains move
            tags.append(AxisTag(f"{ln}_w", 0, "residual-permutation", "right", "conjugate_diagonal", "Q"))
        if a.post_norms:  # the post-norm's input is W_O's (W_out's) output, moved by Q: its gain is permuted
            tags.append(AxisTag(f"{ln}_post_w", 0, "residual-permutation", "right", "conjugate_diagonal", "Q"))
        if not rms:
            tags.append(AxisTag(f"{ln}_b", 0, "residual-permutation", "right", "element", "Q"))
    for t in model_tensor_names(a):
        if t.endswith("_w"):
            tags.append(AxisTag(t, 0, "residual-permutation", "right", "conjugate_diagonal", "Q", scope="model"))
        else:
            ax = 0 if t.endswith("_b") else 1
            tags.append(AxisTag(t, ax, "residual-permutation", "right", "element", "Q", scope="model"))
    untied = _has_head(a) and not a.tied_lm_head
    if untied:  # the untied head reads the final norm's output X Q: it absorbs Q^-1 and the logits stay
        tags.append(AxisTag("lm_head", 0, "residual-permutation", "left", "inverse", "Q", scope="model"))
    if a.pooler:  # an encoder's pooler reads the first token's last hidden state X Q: it absorbs Q^-1 likewise
        tags.append(AxisTag("pooler_w", 0, "residual-permutation", "left", "inverse", "Q", scope="model"))
    d = S["d_model"]
    if rms:
        group, order = "signed permutations of the residual coordinates (hyperoctahedral group)", 2 ** d * sp.factorial(d)
        el = "Q = D P, D diagonal with entries +-1, P a permutation matrix"
    else:
        group, order = "permutations of the residual coordinates, times +-1", 2 * sp.factorial(d)
        el = "Q = s P, s = +-1, P a permutation matrix"
    breaking = (
        Breaking("LayerNorm centring", "shrinks",
                 "centring x -> x - mean(x) 1 commutes with Q only if Q 1 is a multiple of 1: a signed "
                 "permutation with mixed signs does not (RMSNorm has no centring and keeps them)", not rms),
        Breaking("learned norm gains", "shrinks",
                 "diag(gamma) Q = Q diag(gamma') for generic gamma forces Q monomial: orthogonal maps that "
                 "commute with the norm without gains (O(d_model) for RMSNorm) reduce to signed permutations",
                 True),
        Breaking("norm epsilon > 0", "shrinks",
                 "Norm(c z) = sign(c) Norm(z) holds only at eps = 0, so residual scalings c reduce to c = +-1",
                 a.ln_eps > 0),
        Breaking("sinusoidal positions", "breaks",
                 "the sinusoidal position table is fixed, not a parameter, so it cannot absorb E -> E Q",
                 a.positional == "sinusoidal"),
    )
    return [Factor(
        "residual-permutation", "discrete", "model", group, None, order, tuple(tags), breaking,
        "Norm(x Q) = Norm(x) Q with the gains permuted (gamma -> diag(Q^-1 diag(gamma) Q), beta -> beta Q): "
        "readers absorb Q^-1, writers and embeddings Q, so every hidden state becomes X Q"
        + ("; the untied head absorbs Q^-1, so the logits are unchanged" if untied else "")
        + ("; the pooler absorbs Q^-1, so its output is unchanged" if a.pooler else ""),
        el, data_tags=(() if untied else ("output axis d_model: right by Q (equivariance: a readout absorbs Q^-1)",)),
        role="residual")]


def factors_of(a: Architecture) -> tuple[list[Factor], list[tuple[str, str]]]:
    """The factors of G for ``a`` and the unmodelled features (model-wide factors only when there are none).

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> factors, missing = factors_of(get_arch("gpt2"))
    >>> [f.name for f in factors][:2], missing
    (['qk-gauge', 'vo-gauge'], [])

    See Also
    --------
    symtrans.catalogue.spec.GroupSpec.from_arch : the same, checked and wrapped
    """
    missing = _unmodelled(a)
    factors = _layer_factors(a) + _norm_factors(a) + _data_factors(a)
    if not missing:
        factors += _model_factors(a) + _embedding_factors(a)
    return factors, missing
