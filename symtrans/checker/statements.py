"""The trusted statement registry: what each certificate's statement requires, owned by the checker.

Every certificate names a statement id (``statement_id``). This module says,
independently of the producers, what a certificate of that id must say and
cover: its claim, reading and producer, the verdict a record carrying it must
have, its proposition (the exact text), its scope, the witness method, and the
instances: every layer, every head, at which n, from which input ids, with the
eps of the model's config. The checker (:mod:`symtrans.checker.check`)
refuses a certificate whose header or instance set differs in any way from
:func:`expected`; the producers build their certificates from the same
function, so a fresh certificate matches by construction and a relabelled,
truncated or swapped one cannot.

A template value :data:`FREE` is chosen by the witness (the rows and columns
of a minor, the modulus, the precision); every other value is fixed.

Examples
--------
>>> dims = Dims(L=2, H=2, H_kv=1, d=4, d_k=2, positions=8, vocab=50, n=16, seed=0, label="m")
>>> e = expected("prop-6.3/head-rank", dims)
>>> e["claim"], e["producer"], e["scope"]["kind"], sorted(e["witness"]["items"])
('prop-6.3', 'prop63-real-weights', 'model', ['layer 0 head 0', 'layer 0 head 1', 'layer 1 head 0', 'layer 1 head 1'])
>>> e["witness"]["items"]["layer 1 head 1"]["left"]  # query head 1 reads key/value head 0
{'tensor': 'W_V', 'index': [1, 0]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FREE", "Dims", "STATEMENTS", "REQUIRED", "claim_statements", "THM53_R", "MAX_N", "expected", "input_ids", "attention_n",
           "COMPLETENESS", "INSTANCE_FIELDS", "completeness_refusal", "completeness_tensors", "completeness_dimension",
           "completeness_family"]

#: a template value the witness chooses (checked by the method, not by the statement)
FREE = "<chosen by the witness>"
#: strata r = 1..THM53_R certified on every layer of a real model (each costs about R^3 ball operations)
THM53_R = 32
#: the largest sequence length a statement may name
MAX_N = 1 << 16


@dataclass(frozen=True)
class Statement:
    """One registered statement: who may write it, for which claim and verdict, by which method."""

    claim: str
    reading: str | None
    producer: str
    verdict: str  # the verdict of the record that carries it
    method: str
    about_model: bool  # witnesses name the model's tensors (never inline matrices)
    primary: bool  # the record's own scope is this certificate's scope


STATEMENTS: dict[str, Statement] = {
    "prop-6.3/head-rank": Statement("prop-6.3", None, "prop63-real-weights", "certified", "factor-minors", True, True),
    "prop-6.3/attention-invertible": Statement("prop-6.3", None, "prop63-real-weights", "certified",
                                               "attention-det", True, False),
    "prop-6.3/attention-invertible-ln": Statement("prop-6.3", None, "prop63-real-weights", "certified",
                                                  "attention-det-ln", True, False),
    "thm-recovery/wo-rank": Statement("thm-recovery", "thm-recovery/wo", "recovery-wo-real", "fails", "exact-rank",
                                      True, True),
    "thm-5.3/real-minors": Statement("thm-5.3", None, "thm53-real-weights", "certified", "residual-minor", True, True),
    "prop-6.2/identity-counterexample": Statement("prop-6.2", "prop-6.2/identity", "prop62-counterexample", "fails",
                                                  "head-sum-rank", False, True),
    "thm-4.2/affine-counterexample": Statement("thm-4.2", None, "ln-affine-search", "fails", "ln-affine-rank", False,
                                               True),
    "framework-9/completeness": Statement("framework-9", None, "group-complete", "certified", "jacobian-rank", False,
                                          True),
}
#: per producer: the statements a record of it must carry for its verdict (others it may carry are optional)
REQUIRED = {"prop63-real-weights": ("prop-6.3/head-rank", "prop-6.3/attention-invertible"),
            "recovery-wo-real": ("thm-recovery/wo-rank",), "thm53-real-weights": ("thm-5.3/real-minors",),
            "prop62-counterexample": ("prop-6.2/identity-counterexample",),
            "ln-affine-search": ("thm-4.2/affine-counterexample",)}


def claim_statements(claim: str) -> tuple[str, ...]:
    """The statements a certificate directory covering ``claim`` must hold: every one its producers require.

    Examples
    --------
    >>> claim_statements("prop-6.3"), claim_statements("lem-rank-sum")
    (('prop-6.3/head-rank', 'prop-6.3/attention-invertible'), ())
    """
    return tuple(sid for sids in REQUIRED.values() for sid in sids if STATEMENTS[sid].claim == claim)


@dataclass(frozen=True)
class Dims:
    """What a statement about a model is parametrised by: the model's sizes, n, the seed and the model's label."""

    L: int = 0
    H: int = 0
    H_kv: int = 0
    d: int = 0
    d_k: int = 0
    positions: int | None = None
    vocab: int = 0
    n: int = 128
    seed: int = 0
    label: str = "default"
    instance: tuple[tuple[str, Any], ...] | None = None  # a completeness certificate's instance, range-checked


#: the statement id of certified completeness (``symtrans group --complete --certificate-out``)
COMPLETENESS = "framework-9/completeness"
#: the fields of a completeness instance, in order: structure (strings and flags), sizes, the batch and eps (no
#: free-text label: the family's words are derived from the structure, never read from a file)
INSTANCE_FIELDS = ("norm_placement", "norm", "activation", "ffn", "attention", "positional", "bias",
                   "qkv_bias", "final_norm", "window", "L", "n", "H", "H_kv", "d_model", "d_k", "d_v", "d_ff",
                   "batch", "eps")
#: the structures the checker's forward covers: (norm placement, norm, FFN, attention) -> (words, activations)
COMPLETENESS_FAMILIES = {
    ("post", "layernorm", "mlp", "bidirectional"): ("post-LN BERT layers (LayerNorm, MLP)", ("gelu",)),
    ("pre", "rmsnorm", "gated", "causal"): ("Llama-style pre-RMSNorm decoder layers (gated FFN)", ("silu", "relu")),
    ("pre", "layernorm", "mlp", "causal"): ("GPT-2-style pre-LN decoder layers (LayerNorm, MLP)", ("gelu_new",)),
}
#: the activations in words (the checker's forward defines each)
ACTIVATION_WORDS = {"gelu": "GELU via erf", "gelu_new": "tanh-approximate GELU", "silu": "SiLU",
                    "relu": "ReLU (every argument's ball excluding 0)"}
#: inclusive bounds of a completeness instance's sizes (the Jacobian must be checkable in seconds)
COMPLETENESS_BOUNDS = {"L": (1, 2), "n": (2, 8), "H": (1, 4), "H_kv": (1, 4), "d_model": (2, 8), "d_k": (1, 8),
                       "d_v": (1, 8), "d_ff": (1, 8), "batch": (1, 32)}
#: at most this many parameters (the minor is a (P - k)-square Arb determinant)
COMPLETENESS_MAX_PARAMETERS = 500


def completeness_refusal(inst: dict[str, Any]) -> str | None:
    """Why the completeness statement does not cover the instance ``inst`` (one line), or None when it does.

    Examples
    --------
    >>> completeness_refusal({"norm_placement": "pre", "norm": "layernorm", "activation": "silu", "ffn": "mlp",
    ...                       "attention": "causal"}).split(":")[0]
    'not covered'
    """
    key = tuple(inst.get(k) for k in ("norm_placement", "norm", "ffn", "attention"))
    act = inst.get("activation")
    if key not in COMPLETENESS_FAMILIES or act not in COMPLETENESS_FAMILIES[key][1]:
        return ("not covered: certified completeness covers " + "; ".join(
            f"{words} with {', '.join(acts)}" for words, acts in COMPLETENESS_FAMILIES.values())
            + f"; not {'/'.join(str(k) for k in key)} with {act}")
    pos = inst.get("positional")
    if pos not in ("none", "rotary") or (pos == "rotary" and key[3] != "causal"):
        return f"not covered: positions {pos!r} (layers scope: none, or rotary in a decoder)"
    return None


def completeness_tensors(inst: dict[str, Any]) -> list[tuple[str, tuple[int, int]]]:
    """The parameter tensors of a completeness instance, in the order their entries are numbered (row-major).

    Examples
    --------
    >>> inst = {"L": 1, "H": 2, "H_kv": 1, "d_model": 4, "d_k": 2, "d_v": 2, "d_ff": 3, "bias": False,
    ...         "qkv_bias": False, "norm": "rmsnorm", "ffn": "gated", "final_norm": True}
    >>> [name for name, _ in completeness_tensors(inst)][:4], sum(r * c for _, (r, c) in completeness_tensors(inst))
    (['layer0.W_Q[0]', 'layer0.W_Q[1]', 'layer0.W_K[0]', 'layer0.W_V[0]'], 96)
    """
    H, kv, d, dk, dv, dff = (inst[k] for k in ("H", "H_kv", "d_model", "d_k", "d_v", "d_ff"))
    bias, qkv, ln, gated = inst["bias"], inst["bias"] or inst["qkv_bias"], inst["norm"] == "layernorm", \
        inst["ffn"] == "gated"
    out: list[tuple[str, tuple[int, int]]] = []
    for l in range(inst["L"]):
        t = f"layer{l}."
        out += [(f"{t}W_Q[{h}]", (d, dk)) for h in range(H)] + ([(f"{t}b_Q[{h}]", (1, dk)) for h in range(H)] if qkv else [])
        out += [(f"{t}W_K[{g}]", (d, dk)) for g in range(kv)] + ([(f"{t}b_K[{g}]", (1, dk)) for g in range(kv)] if qkv else [])
        out += [(f"{t}W_V[{g}]", (d, dv)) for g in range(kv)] + ([(f"{t}b_V[{g}]", (1, dv)) for g in range(kv)] if qkv else [])
        out += [(f"{t}W_O[{h}]", (dv, d)) for h in range(H)] + ([(f"{t}b_O", (1, d))] if bias else [])
        out += [(f"{t}ln1_w", (1, d))] + ([(f"{t}ln1_b", (1, d))] if ln else [])
        if gated:
            out += [(f"{t}W_gate", (d, dff))] + ([(f"{t}b_gate", (1, dff))] if bias else [])
        out += [(f"{t}W_in", (d, dff))] + ([(f"{t}b_in", (1, dff))] if bias else [])
        out += [(f"{t}W_out", (dff, d))] + ([(f"{t}b_out", (1, d))] if bias else [])
        out += [(f"{t}ln2_w", (1, d))] + ([(f"{t}ln2_b", (1, d))] if ln else [])
    if inst["final_norm"]:
        out += [("final_ln_w", (1, d))] + ([("final_ln_b", (1, d))] if ln else [])
    return out


def completeness_family(inst: dict[str, Any]) -> str:
    """The family words of a covered completeness instance, derived from its structure (never a label from a file).

    Examples
    --------
    >>> completeness_family({"norm_placement": "post", "norm": "layernorm", "ffn": "mlp", "attention": "bidirectional"})
    'post-LN BERT layers (LayerNorm, MLP)'
    """
    return COMPLETENESS_FAMILIES[tuple(inst[k] for k in ("norm_placement", "norm", "ffn", "attention"))][0]


def completeness_dimension(inst: dict[str, Any]) -> int:
    """dim G on the ``layers`` scope at a completeness instance: G's formula (:mod:`symtrans.catalogue`, SymPy).

    The architecture is built from the instance's structure and sizes alone; the formula is the one
    ``symtrans group`` prints, never a number a certificate asserts.

    Examples
    --------
    >>> inst = {"norm_placement": "pre", "norm": "rmsnorm", "activation": "silu", "ffn": "gated",
    ...         "attention": "causal", "positional": "rotary", "bias": False, "qkv_bias": False, "final_norm": True,
    ...         "window": None, "L": 1, "n": 5, "H": 2, "H_kv": 2, "d_model": 6, "d_k": 2, "d_v": 2, "d_ff": 3,
    ...         "eps": "1/100000"}
    >>> completeness_dimension(inst)
    27
    """
    from fractions import Fraction

    from symtrans.arch import Architecture
    from symtrans.catalogue import GroupSpec

    a = Architecture(name="completeness-instance", family="completeness-instance", n=inst["n"], L=inst["L"],
                     H=inst["H"], H_kv=inst["H_kv"], d_model=inst["d_model"], d_k=inst["d_k"], d_v=inst["d_v"],
                     d_ff=inst["d_ff"], vocab_size=16, max_positions=max(16, inst["n"]),
                     norm_placement=inst["norm_placement"], norm=inst["norm"], activation=inst["activation"],
                     ffn=inst["ffn"], bias=inst["bias"], qkv_bias=inst["qkv_bias"], attention=inst["attention"],
                     positional="rotary" if inst["positional"] == "rotary" else "none",
                     final_norm=inst["final_norm"], ln_eps=float(Fraction(inst["eps"])),
                     sliding_window=inst["window"], head_dim_tied=False)
    return int(GroupSpec.from_arch(a).scope_dimension("layers"))


def _completeness(st: Statement, dims: Dims) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Statement text, scope, witness and asserts templates of certified completeness at ``dims.instance``.

    Everything asserted is fixed here: P from the tensors, k = dim G from G's formula, P - k; the certificate
    chooses only the point (parameters, inputs), the minor and the precision. It proves the upper bound
    dim(stabiliser) <= dim ker J <= k; that G's directions lie in ker J is G's exact invariance (cited).
    """
    if dims.instance is None:
        raise KeyError("framework-9/completeness needs its instance")
    inst = dict(dims.instance)
    tensors = completeness_tensors(inst)
    P = sum(r * c for _, (r, c) in tensors)
    k = completeness_dimension(inst)
    words = completeness_family(inst)
    feats = [ACTIVATION_WORDS[inst["activation"]], f"{inst['attention']} attention", f"{inst['positional']} positions",
             "all biases" if inst["bias"] else "Q, K, V biases" if inst["qkv_bias"] else "no biases"]
    if inst["H_kv"] != inst["H"]:
        feats.append(f"grouped-query attention ({inst['H']} query heads, {inst['H_kv']} key/value)")
    if inst["window"] is not None:
        feats.append(f"sliding window {inst['window']}")
    if inst["final_norm"]:
        feats.append("final norm")
    desc = (f"{words}, {', '.join(feats)}; L = {inst['L']}, n = {inst['n']}, H = {inst['H']}, "
            f"H_kv = {inst['H_kv']}, d_model = {inst['d_model']}, d_k = {inst['d_k']}, d_v = {inst['d_v']}, "
            f"d_ff = {inst['d_ff']}, eps = {inst['eps']}, a batch of {inst['batch']} inputs")
    text = (f"At the inline rational parameters theta (P = {P} entries) and the inline batch of {inst['batch']} "
            f"rational inputs X_b ({inst['n']} x {inst['d_model']}), the Jacobian J of theta -> (F_theta(X_b))_b, "
            "F_theta the layer stack of the instance as the checker's forward defines it (its norms, attention, "
            "FFN and final norm; layers scope: hidden states in, last hidden state out), has rank >= P - k = "
            f"{P - k}, k = dim G = {k} from G's formula (symtrans.group.spec): the given (P - k)-minor has an Arb "
            "determinant ball that excludes 0 (exp, erf, tanh, sqrt and their derivatives in ball arithmetic, "
            "forward mode). Hence dim ker J <= k, and near theta the set of parameters with the same function "
            "(the stabiliser's orbit) has dimension at most k: no continuous symmetry beyond dim G at this "
            "instance. Proved here: this upper bound. G's k tangent vectors at theta, derived by the checker "
            "from the structure (its own rules, not the producer's tag table), are independent over Q (exact "
            "rank k, so G's orbit through theta has dimension k); that each lies in ker J is G's exact "
            "invariance (symtrans group --certify, SymPy), cited and not proved here (J v is only checked to be "
            "a ball containing 0)")
    scope = {"kind": "instances", "description": f"this instance only ({desc}); one rational point, not every "
             "size or weight setting; the upper bound dim(stabiliser) <= dim G", "instances": [desc]}
    witness = {"method": st.method, "precision": FREE, "instance": inst,
               "parameters": {name: ("inline", shape) for name, shape in tensors},
               "inputs": [("inline", (inst["n"], inst["d_model"]))] * inst["batch"],
               "minor": {"rows": FREE, "cols": FREE}}
    asserts = {"parameters": P, "group_dimension": k, "jacobian_rank_at_least": P - k,
               "stabiliser_dimension_at_most": k}
    return text, scope, witness, asserts


def attention_n(dims: Dims) -> int:
    """The n of the attention statements: the requested n, or the model's positions where it has fewer.

    Examples
    --------
    >>> attention_n(Dims(positions=40, n=128)), attention_n(Dims(positions=None, n=128))
    (40, 128)
    """
    return min(dims.n, dims.positions) if dims.positions is not None else dims.n


def input_ids(vocab: int, has_positions: bool, n: int, seed: int) -> list[int]:
    """The statement's input: ``n`` token ids drawn uniformly (seeded), skipping the low (special) ids.

    A model without a position table draws ``n`` distinct ids when its
    vocabulary allows (a repeated token would give two equal rows of X).
    :func:`symtrans.numeric.forward.random_ids` is this rule.

    Examples
    --------
    >>> input_ids(30522, True, 3, 0) == input_ids(30522, True, 3, 0), len(set(input_ids(3000, False, 50, 1)))
    (True, 50)
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    low = min(1000, vocab // 2)  # skip special tokens; tiny vocabularies keep half
    if not has_positions and vocab - low >= n:
        return (low + torch.randperm(vocab - low, generator=g)[:n]).tolist()
    return torch.randint(low, vocab, (n,), generator=g).tolist()


def _kv(dims: Dims, h: int) -> int:
    return h // (dims.H // dims.H_kv)


def _heads(dims: Dims, layers: range) -> list[tuple[int, int]]:
    return [(l, h) for l in layers for h in range(dims.H)]


def expected(sid: str, dims: Dims) -> dict[str, Any]:
    """What a certificate of statement ``sid`` must hold: header fields, witness template, asserts template.

    Raises ``KeyError`` for an unregistered id.

    Examples
    --------
    >>> e = expected("thm-5.3/real-minors", Dims(L=1, H=1, H_kv=1, d=4, d_k=4, n=3))
    >>> sorted(e["witness"]["items"]), e["asserts"]["minor_sign"]["layer 0 r 2"] == FREE
    (['layer 0 r 1', 'layer 0 r 2'], True)
    """
    st = STATEMENTS[sid]
    L, H, d, k, n, seed, label = dims.L, dims.H, dims.d, dims.d_k, dims.n, dims.seed, dims.label
    if sid == "prop-6.3/head-rank":
        items = {f"layer {l} head {h}": {"left": {"tensor": "W_V", "index": [l, _kv(dims, h)]},
                                         "right": {"tensor": "W_O", "index": [l, h]}, "rows": FREE, "cols": FREE}
                 for l, h in _heads(dims, range(L))}
        text = (f"rank(W_V^h W_O^h) = d_k = {k} for every head: non-zero d_k x d_k minors of W_V^h and of W_O^h "
                "(determinants mod a prime, else exact over Z, of the weights scaled by powers of two) give "
                "rank W_V^h = rank W_O^h = d_k, so d_k >= rank(W_V^h W_O^h) >= d_k + d_k - d_k (Sylvester)")
        scope = {"kind": "model", "description": f"every one of the {L * H} heads of {label} ({L} layers x {H}): "
                 "rank part for generic X of every rank; hypothesis A^h invertible checked at one exact input "
                 f"with n = {attention_n(dims)}", "instances": []}
        witness = {"method": st.method, "model": label, "modulus": FREE, "items": items}
        asserts = {"rank": {item: k for item in items}}
    elif sid in ("prop-6.3/attention-invertible", "prop-6.3/attention-invertible-ln"):
        na = attention_n(dims)
        ids = input_ids(dims.vocab, dims.positions is not None, na, seed)
        ln = sid.endswith("-ln")
        items = {f"layer {l} head {h}": {"layer": l, "head": h} for l, h in _heads(dims, range(1 if ln else L))}
        if ln:
            text = (f"A^h(X) invertible for every head of layer 0 at its real input X = LayerNorm(word[ids] + pos[:n] + "
                    f"type[0]) (n = {na}): det exp(X W_Q^h (X W_K^h)^T / sqrt d_k) != 0, enclosed through LayerNorm")
            scope = {"kind": "instances", "description": f"layer 0 at one real input, n = {na}",
                     "instances": [f"n={na} seed={seed}"]}
            witness = {"method": st.method, "model": label, "precision": FREE, "eps": FREE,
                       "input": {"ids": ids, "form": "LayerNorm(word[ids] + pos[:n] + type[0]) with emb_ln_w, emb_ln_b"},
                       "items": items}
        else:
            text = (f"A^h(X) invertible for every head at n = {na}: det exp(S^h / sqrt d_k) != 0 with "
                    "S^h = X W_Q^h (X W_K^h)^T exact, X = word[ids] + pos[:n] + type[0]; A^h = diag(1/row sums) exp(...)")
            scope = {"kind": "instances", "description": f"one exact input, n = {na}, every layer and head",
                     "instances": [f"n={na} seed={seed}"]}
            witness = {"method": st.method, "model": label, "precision": FREE,
                       "input": {"ids": ids, "form": "word[ids] + pos[:n] + type[0], no LayerNorm"}, "items": items}
        asserts = {"det_sign": {item: FREE for item in items}}
    elif sid == "thm-recovery/wo-rank":
        items = {f"layer {l}": {"tensor": "W_O", "index": [l], "reshape": [H * k, d]} for l in range(L)}
        text = (f"each layer's stacked W_O ({H * k} x {d}) has rank {min(H * k, d)} over Q, so Z -> Z W_O has "
                "fibre dimension n (H d_v - rank W_O) = 0")
        scope = {"kind": "model", "description": f"every layer (0..{L - 1}) of the model under test, at n = {n} (the "
                 "fibre is n (H d_v - rank W_O))", "instances": [f"layer {i}" for i in range(L)]}
        witness = {"method": st.method, "model": label, "modulus": FREE, "matrices": items}
        asserts = {"rank": {item: min(H * k, d) for item in items}}
    elif sid == "thm-5.3/real-minors":
        R = min(THM53_R, n - 1, d - 1)
        items = {f"layer {l} r {r}": {"layer": l, "r": r, "cols": FREE} for l in range(L) for r in range(1, R + 1)}
        text = ("rank F(X*_r) >= r + 1 > r = rank X*_r, F(X) = X + sum_h softmax(X W_Q^h W_K^h^T X^T / "
                "sqrt d_k) X W_V^h W_O^h (bias-free), X*_r = sum_{i<r} e_i f_i^T: a non-zero (r+1)-minor "
                "(rows 0..r, the given columns); by analyticity the bad set is null on the rank-r stratum")
        scope = {"kind": "instances", "description": f"every layer ({L}) of {label} at n = {n}, strata r = 1..{R} of "
                 f"min(n, d) - 1 = {min(n, d) - 1}", "instances": [f"layer {l}, r = 1..{R}" for l in range(L)]}
        witness = {"method": st.method, "model": label, "n": n, "precision": FREE, "items": items}
        asserts = {"minor_sign": {item: FREE for item in items}}
    elif sid == "prop-6.2/identity-counterexample":
        n2, d2, H2, k2 = 2, 4, 2, 2
        text = ("rank MHA(X) <= n < dim(R_1 + ... + R_H): MHA(X) has n rows; every A^h is invertible "
                "(det exp(S^h / sqrt d_k) != 0), so R_h = rowspace(X W_V^h W_O^h), and the stacked "
                "rational matrices have exact rank dim(sum R_h)")
        scope = {"kind": "open-set", "description": "dim(sum_h R_h) > n is a strict rank excess, so it persists on an "
                 "open neighbourhood of this (X, weights); rank MHA(X) <= n everywhere",
                 "instances": [f"n = {n2}, d_model = {d2}, H = {H2}, d_k = {k2}"]}
        shapes = {"X": (n2, d2), "W_Q": (d2, k2), "W_K": (d2, k2), "W_V": (d2, k2), "W_O": (k2, d2)}
        witness = {"method": st.method, "precision": FREE, "X": "X",
                   "inline": {"X": ("inline", shapes["X"]),
                              **{f"h{i}.{m}": ("inline", shapes[m]) for i in range(H2) for m in shapes if m != "X"}},
                   "heads": [{m: f"h{i}.{m}" for m in ("W_Q", "W_K", "W_V", "W_O")} for i in range(H2)]}
        asserts = {"rows_of_MHA": n2, "dim_sum_R": FREE, "det_sign": {str(i): FREE for i in range(H2)}}
    elif sid == "thm-4.2/affine-counterexample":
        text = ("H1-H4 hold at X (3 x 3) with the given gamma and beta, yet arank(LN X) >= arank(X) + 1, so "
                "H1-H4 do not imply arank(LN X) = arank(X): LN(X)_ij = (x_ij - mean_i) / sigma_i gamma_j + beta_j, "
                "sigma_i = sqrt(var_i) (eps = 0, as in the paper); H1 (var_i > 0), H2 (1_d not in rowspace X), "
                "H3 (gamma_j != 0) and arank(X) = rank[X | 1] - 1 exactly over Q; H4 (sigma not in colspace XP) "
                "and the lower bound by non-zero minors of [XP | sigma] and [LN X | 1] (Arb balls excluding 0)")
        scope = {"kind": "instances", "description": "one exact counterexample X (3 x 3, entries in {-1, 0, 1}) "
                 "satisfying H1-H4", "instances": []}
        witness = {"method": st.method, "precision": FREE,
                   "inline": {"X": ("inline", (3, 3)), "gamma": ("inline", (1, 3)), "beta": ("inline", (1, 3))}}
        asserts = {"hypotheses": {"H1": True, "H2": True, "H3": True, "H4": True}, "arank_X": FREE,
                   "arank_LN_X_at_least": FREE}
    elif sid == COMPLETENESS:
        text, scope, witness, asserts = _completeness(st, dims)
    else:  # pragma: no cover - every registered id has a branch
        raise KeyError(sid)
    return {"claim": st.claim, "reading": st.reading, "producer": st.producer, "statement": text, "scope": scope,
            "witness": witness, "asserts": asserts}
