"""Exact SymPy certificates: each factor of G leaves the layer unchanged, each breaking feature breaks it.

A certificate runs the exact forward pass (:mod:`symtrans.group.forward`,
SymPy backend) of a small copy of the architecture (same structural flags;
d_model = 4, d_k = d_v = 2, H = 2, d_ff = 2, n = 3, one layer) on seeded random
rational weights, transforms the weights with :func:`symtrans.group.spec.act`
(the tag table, nothing else), and checks that the output is unchanged:

* continuous factors with a *generic symbolic element* (every entry a free
  symbol), so the identity holds for every element of the factor;
* discrete factors on *generators* of the group (a transposition and a cycle,
  plus the sign where the factor has one): the action is a group action, so
  invariance on generators gives invariance on the whole group;
* data-side S_n as an equivariance ``Layer(P X) = P Layer(X)``; the residual
  factor as ``Model'(X Q) = Model(X) Q``;
* the ``model``-scope factors (embedding-centring-shift, embedding-translation,
  final-norm-scaling) through the whole one-layer model from fixed token ids
  (word, type and position tables, final norm, and the head of a causal LM);
  residual-rotation stage by stage (word rows, ``Layer'(X Q) = Layer(X) Q``,
  final norm and head) on generators of O(d_model): a generic rotation of one
  plane (rational in a symbol ``t``) and the permutation matrices, with the
  norm's atom keyed by the row's sum of squares (which a rotation keeps).

Outcomes: ``certified`` (every entry of the difference simplifies to 0),
``refuted`` (an entry is non-zero; the witness is its value at a rational
element, evaluated to 30 digits), ``witnessed`` (a breaking feature changes the
output, with the witness) or ``inconclusive``. The same code refuses a wrong
action: pass ``tags=`` with one entry changed.

Examples
--------
>>> c = certify_lemma("softmax-shift")
>>> c.outcome
'certified'
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

import sympy as sp

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError
from symtrans.group.elements import elements_of, generic_matrix
from symtrans.group.forward import Features, SympyBackend, layer_forward, model_forward, unused_position_rows
from symtrans.group.spec import LAYER_AXES, MODEL_AXES, AxisTag, GroupSpec, act, layer_tensor_names, model_tensor_names

__all__ = ["Certificate", "certify_factor", "certify_all", "witness", "certify_lemma", "tiny_arch",
           "random_params", "rotary_commutant_dimension", "LEMMAS"]

TINY: dict[str, int] = {"n": 3, "L": 1, "H": 2, "d_model": 4, "d_k": 2, "d_v": 2, "d_ff": 2}


@dataclass(frozen=True)
class Certificate:
    """The record of one exact check: identity, shapes, element, outcome, witness.

    Examples
    --------
    >>> c = Certificate("S_H", "invariance", None, "sum over heads", "tiny", {"H": 2}, "swap", "certified",
    ...                 "invariant", None, 0.1)
    >>> c.ok, c.to_dict()["outcome"]
    (True, 'certified')
    """

    factor: str
    kind: str  # invariance | breaking | lemma
    feature: str | None
    identity: str
    arch: str
    shapes: dict[str, int]
    element: str
    outcome: str  # certified | refuted | witnessed | inconclusive
    expected: str  # invariant | changes
    witness: str | None
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the outcome is the expected one (certified / witnessed).

        Examples
        --------
        >>> dataclasses.replace(certify_lemma("softmax-shift"), expected="changes").ok
        False
        """
        return self.outcome == ("certified" if self.expected == "invariant" else "witnessed")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict.

        Examples
        --------
        >>> sorted(certify_lemma("softmax-shift").to_dict())[:3]
        ['arch', 'details', 'element']
        """
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for the terminal.

        Examples
        --------
        >>> certify_lemma("softmax-shift").line().split()[0]
        'certified'
        """
        what = self.factor + (f" / {self.feature}" if self.feature else "")
        tail = f"  witness: {self.witness}" if self.witness and self.outcome != "certified" else ""
        return f"{self.outcome:<12} {self.kind:<10} {what}  [{self.element}; {self.seconds:.1f}s]{tail}"


# --------------------------------------------------------------------------- set-up
def tiny_arch(arch: Architecture | str, **sizes: int) -> Architecture:
    """A small copy of ``arch``: same structural flags, tiny sizes (GQA keeps one kv head per 2 heads).

    Examples
    --------
    >>> a = tiny_arch("bert-base")
    >>> a.d_model, a.H, a.H_kv, a.n, a.L
    (4, 2, 2, 3, 1)
    >>> tiny_arch(get_arch("bert-base").with_sizes(H_kv=6)).H_kv
    1
    """
    a = get_arch(arch)
    s = {**TINY, **sizes}
    gqa = a.H_kv != a.H
    if "H_kv" not in sizes:
        s["H_kv"] = max(1, s["H"] // 2) if gqa else s["H"]
    return dataclasses.replace(a, name=f"tiny-{a.name}", head_dim_tied=False, max_positions=s["n"],
                               position_table=s["n"] + unused_position_rows(a), vocab_size=8,
                               **{k: v for k, v in s.items() if k in ("n", "L", "H", "H_kv", "d_model", "d_k",
                                                                        "d_v", "d_ff")})


def _sizes(a: Architecture) -> dict[str, int]:
    return {"head": a.H, "kv": a.H_kv, "model": a.d_model, "qk": a.d_k, "v": a.d_v, "ff": a.d_ff,
            "position": a.n + unused_position_rows(a), "token": a.n}


def random_params(arch: Architecture, seed: int = 0) -> dict[str, Any]:
    """Seeded random rational weights in block form (model: ``layers`` + embeddings + data ``X``).

    Gains are distinct non-zero halves, so they are generic for the residual factor.

    Examples
    --------
    >>> p = random_params(tiny_arch("bert-base"))
    >>> p["layers"][0]["W_Q"][0].shape, p["X"].shape
    ((4, 2), (3, 4))
    """
    rng = random.Random(seed)
    sz = _sizes(arch)

    def mat(rows: int, cols: int, gain: bool = False) -> sp.Matrix:
        if gain:
            vals = rng.sample([sp.Rational(k, 2) for k in (1, 2, 3, 4, 5, 6, 7, -1, -3)], cols)
            return sp.Matrix([vals])
        return sp.Matrix(rows, cols, lambda i, j: sp.Rational(rng.randint(-3, 3), rng.randint(1, 2)))

    def tensor(name: str, axes: tuple[str, ...]) -> Any:
        gain = name.endswith("_w")
        if axes[0] in ("head", "kv"):
            inner = axes[1:]
            shape = (1, sz[inner[0]]) if len(inner) == 1 else (sz[inner[0]], sz[inner[1]])
            return [mat(*shape) for _ in range(sz[axes[0]])]
        shape = (1, sz[axes[0]]) if len(axes) == 1 else (sz[axes[0]], sz[axes[1]])
        return mat(*shape, gain=gain)

    layers = [{t: tensor(t, LAYER_AXES[t]) for t in layer_tensor_names(arch)} for _ in range(arch.L)]
    params: dict[str, Any] = {"layers": layers}
    for t in model_tensor_names(arch):
        if t in ("word", "type"):
            continue  # the data X stands for the looked-up token rows
        params[t] = tensor(t, MODEL_AXES[t])
    if arch.positional == "sinusoidal":  # a fixed table: present in the forward, not a parameter
        params["pos"] = mat(arch.n, arch.d_model)
    params["X"] = mat(arch.n, arch.d_model)
    return params


_SETUPS: dict[tuple[Architecture, int], tuple[dict[str, Any], SympyBackend]] = {}


def _setup(a: Architecture, seed: int) -> tuple[dict[str, Any], SympyBackend]:
    """Random weights and one exact backend per (architecture, seed), shared so equal sub-results are reused."""
    key = (a, seed)
    if key not in _SETUPS:
        _SETUPS[key] = (random_params(a, seed), SympyBackend())
    params, be = _SETUPS[key]
    return params, be


def _elements(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    """(description, element) pairs that certify ``factor``: one generic element, or generators (the factor's own)."""
    return elements_of(spec, factor).exact(spec, factor)


def _symbols_of(element: Any) -> set[sp.Symbol]:
    out: set[sp.Symbol] = set()
    values = element.values() if isinstance(element, dict) else [element]
    for v in values:
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, sp.MatrixBase):
                out |= x.free_symbols
    return out


def _at_point(element: Any, seed: int) -> tuple[Any, str] | None:
    """The element with its symbols replaced by random non-zero rationals (None if it has none)."""
    syms = sorted(_symbols_of(element), key=str)
    if not syms:
        return None
    rng = random.Random(seed + 1)
    point = {s: sp.Rational(rng.randint(2, 9), rng.randint(1, 3)) * (1 if s.is_positive or rng.random() < 0.5 else -1)
             for s in syms}

    def sub(v: Any) -> Any:
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v.subs(point) if isinstance(v, sp.MatrixBase) else v

    shown = ", ".join(f"{k}={v}" for k, v in list(point.items())[:4]) + (", ..." if len(point) > 4 else "")
    return {k: sub(v) for k, v in element.items()}, shown


# --------------------------------------------------------------------------- the check
def _embed(params: dict[str, Any], feat: Features, be: SympyBackend) -> sp.Matrix:
    """The embedding stage: token rows X plus position rows, then the embedding norm."""
    return model_forward({**params, "layers": []}, dataclasses.replace(feat, final_norm=False), be)


def _token_model(spec: GroupSpec, params: dict[str, Any], be: SympyBackend) -> sp.Matrix:
    """The ``model`` scope's map on fixed token ids: embeddings, the layers, final norm and head (causal LMs)."""
    a = spec.arch
    n = a.n
    ids = [(3 * i + 1) % int(a.vocab_size) for i in range(n)]
    word = params["word"]
    X = word.extract(ids, list(range(word.cols)))
    if params.get("type") is not None:
        types = [i % params["type"].rows for i in range(n)]
        X = X + params["type"].extract(types, list(range(word.cols)))
    out = model_forward({**params, "X": X}, Features.of(a), be)
    if a.attention == "causal":
        out = out @ (word.T if a.tied_lm_head else params["lm_head"])
    return out.applyfunc(be.simplify)


def _model_params(a: Architecture, seed: int) -> dict[str, Any]:
    """:func:`random_params` plus the tables the ``model`` scope reads: word, type, an untied head."""
    rng = random.Random(seed + 17)
    params = random_params(a, seed)
    params["word"] = _rational_matrix(rng, int(a.vocab_size), a.d_model)
    if a.type_vocab_size:
        params["type"] = _rational_matrix(rng, min(a.type_vocab_size, 2), a.d_model)
    if a.attention == "causal" and not a.tied_lm_head:
        params["lm_head"] = _rational_matrix(rng, a.d_model, int(a.vocab_size))
    return params


def _rational_matrix(rng: random.Random, rows: int, cols: int) -> sp.Matrix:
    """A random exact matrix: entries p/q with p in [-3, 3] and q in {1, 2}, drawn from ``rng``."""
    return sp.Matrix(rows, cols, lambda i, j: sp.Rational(rng.randint(-3, 3), rng.randint(1, 2)))


def _outputs(spec: GroupSpec, params: dict[str, Any], factor: str, element: Any, be: SympyBackend,
             tags: tuple[AxisTag, ...] | None) -> list[tuple[str, sp.Matrix, sp.Matrix]]:
    """(stage, expected, actual) per stage: unchanged, equivariant under S_n, or times Q (residual factor).

    Model-wide and data-side factors are checked stage by stage (embedding,
    then the layer): the model is their composition, so equivariance of every
    stage gives equivariance of the model.
    """
    f = spec.factor(factor)
    feat = Features.of(spec.arch)
    lp, X = params["layers"][0], params["X"]
    stages = elements_of(spec, factor).stages  # how the factor is compared (symtrans.group.elements.STAGES)
    if stages == "residual-and-head":  # stage by stage, like the residual permutation: each stage equivariant
        Q = element["Q"]
        moved = act(spec, params, factor, element, tags=tags)
        ids = list(range(min(spec.arch.n, params["word"].rows)))
        cols = list(range(params["word"].cols))

        def embedding(p: dict[str, Any]) -> sp.Matrix:  # word (and type) rows plus the position rows
            tok = p["word"].extract(ids, cols)
            if p.get("type") is not None:
                tok = tok + p["type"].extract([i % p["type"].rows for i in ids], cols)
            return _embed({**p, "X": tok}, feat, be).applyfunc(be.simplify)

        Z = X  # any residual state: the final norm and head read it
        return [("embedding", (embedding(params) @ Q).applyfunc(be.simplify), embedding(moved)),
                ("layer", (layer_forward(lp, X, feat, be) @ Q).applyfunc(be.simplify),
                 layer_forward(moved["layers"][0], (X @ Q).applyfunc(be.simplify), feat, be)),
                ("final norm and head", _final_head(params, Z, feat, be),
                 _final_head(moved, (Z @ Q).applyfunc(be.simplify), feat, be))]
    if f.scope == "model" and f.kind == "continuous":  # embeddings and head: token ids in, the scope's output out
        return [("model from token ids", _token_model(spec, params, be),
                 _token_model(spec, act(spec, params, factor, element, tags=tags), be))]
    if f.scope == "layer":
        before = layer_forward(lp, X, feat, be)
        after = layer_forward(act(spec, lp, factor, element, tags=tags), X, feat, be)
        if stages == "final-norm" and spec.arch.norm_placement == "pre" and spec.arch.final_norm:
            # pre-LN: the residual is read only through norms; the final norm stands for all of them
            def final(Z: sp.Matrix) -> sp.Matrix:
                return be.norm(Z, feat.norm, params.get("final_ln_w"), params.get("final_ln_b"), feat.eps)

            return [("layer + final norm", final(before), final(after))]
        return [("layer", before, after)]
    if f.scope == "stack":  # one boundary: the layer before reaches the next only through its LN2
        moved = act(spec, {"layers": params["layers"][:2]}, factor, [element], tags=tags)["layers"]

        def ln2(p: dict[str, Any]) -> sp.Matrix:
            return be.norm(X, feat.norm, p.get("ln2_w"), p.get("ln2_b"), feat.eps)

        before = layer_forward(params["layers"][1], ln2(lp), feat, be)
        after = layer_forward(moved[1], ln2(moved[0]), feat, be)
        return [("LN2 of a layer, then the next layer", before, after)]
    if f.scope == "data":
        P = list(element["P"])

        def rows(M: sp.Matrix) -> sp.Matrix:
            return M.extract(P, list(range(M.cols)))

        out = []
        if params.get("pos") is not None:  # positions are added to the slot, not the token
            out.append(("embedding", rows(_embed(params, feat, be)), _embed({**params, "X": rows(X)}, feat, be)))
        out.append(("layer", rows(layer_forward(lp, X, feat, be)), layer_forward(lp, rows(X), feat, be)))
        return out
    Q = element["Q"]
    # an untied head reads the residual through the final norm: the logits must not move (whatever the tags say)
    head = spec.arch.attention == "causal" and not spec.arch.tied_lm_head
    d = spec.arch.d_model
    if head and params.get("lm_head") is None:
        params = {**params, "lm_head": _rational_matrix(random.Random(23), d, int(spec.arch.vocab_size))}
    if spec.arch.pooler and params.get("pooler_w") is None:  # an encoder's pooler reads the last hidden state too
        rng = random.Random(29)
        params = {**params, "pooler_w": _rational_matrix(rng, d, d), "pooler_b": _rational_matrix(rng, 1, d)}
    moved = act(spec, params, factor, element, tags=tags)
    moved["X"] = X @ Q  # the word/type rows are writers like every other
    out = [("embedding", _embed(params, feat, be) @ Q, _embed(moved, feat, be))]
    out.append(("layer", layer_forward(lp, X, feat, be) @ Q, layer_forward(moved["layers"][0], X @ Q, feat, be)))
    XQ = (X @ Q).applyfunc(be.simplify)
    if head:  # the logits unchanged: the head absorbs Q^-1 of the final norm's output
        out.append(("final norm and head", _final_head(params, X, feat, be), _final_head(moved, XQ, feat, be)))
    if spec.arch.pooler:  # the pooler's input to tanh (which acts entry by entry) unchanged: it absorbs Q^-1
        def pooled(p: dict[str, Any], Z: sp.Matrix) -> sp.Matrix:
            return (Z @ p["pooler_w"] + sp.ones(Z.rows, 1) * p["pooler_b"]).applyfunc(be.simplify)

        out.append(("pooler", pooled(params, X), pooled(moved, XQ)))
    return out


def _final_head(p: dict[str, Any], Z: sp.Matrix, feat: Features, be: SympyBackend) -> sp.Matrix:
    """The logits an untied head ``p["lm_head"]`` reads from residual state ``Z`` through the final norm."""
    out = be.norm(Z, feat.norm, p.get("final_ln_w"), p.get("final_ln_b"), feat.eps) if feat.final_norm else Z
    return (out @ p["lm_head"]).applyfunc(be.simplify)


def _compare(expected: sp.Matrix, actual: sp.Matrix, be: SympyBackend, syms: set[sp.Symbol],
             seed: int) -> tuple[str, str | None, dict[str, Any]]:
    diff = (actual - expected).applyfunc(be.simplify)
    nonzero = [(i, j) for i in range(diff.rows) for j in range(diff.cols) if diff[i, j] != 0]
    if not nonzero:
        return "certified", None, {"entries": diff.rows * diff.cols}
    rng = random.Random(seed)
    point = {s: sp.Rational(rng.randint(2, 9), rng.randint(1, 3)) * (1 if s.is_positive or rng.random() < 0.5 else -1)
             for s in sorted(syms, key=str)}
    best = None
    for i, j in nonzero[:6]:
        value = be.evaluate(diff[i, j], digits=30, subs=point)
        if value.is_number and abs(value) > sp.Float("1e-20"):
            if best is None or abs(value) > abs(best[2]):
                best = (i, j, value)
    if best is None:
        return "inconclusive", f"{len(nonzero)} entries did not simplify to 0 but vanish at the test point", {}
    i, j, value = best
    at = ", ".join(f"{k}={v}" for k, v in list(point.items())[:4]) + (", ..." if len(point) > 4 else "")
    where = f" at {at}" if point else ""
    return "refuted", f"output entry ({i},{j}) changes by {sp.N(value, 6)}{where} (30-digit evaluation)", {
        "nonzero_entries": len(nonzero), "entry": [i, j], "change": str(sp.N(value, 15))}


def certify_factor(arch: Architecture | str, factor: str, *, tags: tuple[AxisTag, ...] | None = None,
                   seed: int = 0, sizes: dict[str, int] | None = None,
                   elements: list[tuple[str, Any]] | None = None) -> Certificate:
    """Certify exactly that ``factor`` leaves a small copy of ``arch`` unchanged (or refute it).

    Examples
    --------
    >>> c = certify_factor("bert-base", "S_dff")
    >>> c.outcome, c.shapes["d_ff"]
    ('certified', 2)
    """
    t0 = time.perf_counter()
    a = tiny_arch(arch, **(sizes or {}))
    f = GroupSpec.from_arch(a).factor(factor)
    if f.scope == "stack" and a.L < 2:  # a between-layer factor needs the layers on both sides
        a = tiny_arch(arch, **{**(sizes or {}), "L": 2})
    if f.scope == "model" and f.kind == "continuous":
        a = dataclasses.replace(a, type_vocab_size=min(a.type_vocab_size, 2))
    spec = GroupSpec.from_arch(a)
    f = spec.factor(factor)
    elements = elements if elements is not None else _elements(spec, factor)
    if f.scope == "model" and f.kind == "continuous":
        # RMSNorm(X Q) = RMSNorm(X) Q needs the norm's atom keyed by the row's sum of squares, not its entries
        params, be = _model_params(a, seed), SympyBackend(
            norm_key="value" if elements_of(spec, factor).stages == "residual-and-head" else "multiset")
    else:
        params, be = _setup(a, seed)
    syms = set().union(*[_symbols_of(el) for _, el in elements]) if elements else set()
    be.watch |= syms
    outcome, witness, details = "certified", None, {}
    for desc, el in elements:
        probe = _at_point(el, seed)
        if probe is not None:  # an identity for all elements holds at a rational one: a cheap refutation first
            for stage, expected, actual in _outputs(spec, params, factor, probe[0], be, tags):
                res, text, det = _compare(expected, actual, be, set(), seed)
                if res != "certified":
                    outcome, details = res, det
                    witness = f"{desc} at {probe[1]}, {stage} stage: {text}"
                    break
            if outcome != "certified":
                break
        for stage, expected, actual in _outputs(spec, params, factor, el, be, tags):
            outcome, witness, details = _compare(expected, actual, be, _symbols_of(el), seed)
            if outcome != "certified":
                witness = f"{desc}, {stage} stage: {witness}"
                break
        if outcome != "certified":
            break
    return Certificate(factor=factor, kind="invariance", feature=None, identity=f.identity, arch=a.name,
                       shapes=_shape_record(a), element="; ".join(d for d, _ in elements), outcome=outcome,
                       expected="invariant", witness=witness, seconds=time.perf_counter() - t0,
                       details={**details, "tags_replaced": tags is not None, "atoms": len(be.atoms)})


def _shape_record(a: Architecture) -> dict[str, int]:
    return {k: getattr(a, k) for k in ("n", "d_model", "d_k", "d_v", "H", "H_kv", "d_ff", "L")}


# --------------------------------------------------------------------------- breaking features
def witness(arch: Architecture | str, factor: str, feature: str, *, seed: int = 0) -> Certificate:
    """Show exactly that ``feature`` breaks or shrinks ``factor``: an element outside the surviving group changes the output.

    Examples
    --------
    >>> c = witness("bert-base", "ffn-scaling", "gelu activation")
    >>> c.outcome, c.expected
    ('witnessed', 'changes')
    """
    t0 = time.perf_counter()
    base = get_arch(arch)
    spec0 = GroupSpec.from_arch(base, strict=False)
    f0 = spec0.factor(factor)
    b = next((x for x in f0.broken_by if x.feature == feature), None)
    if b is None:
        raise SymtransError(f"{factor}: no breaking feature {feature!r}; known: "
                            + ", ".join(x.feature for x in f0.broken_by))
    setup = _breaking_setup(base, factor, feature)
    if setup is None:
        outcome, text, desc, a_name, shapes = _norm_witness(base, feature)  # the norm is where it must commute
    else:
        a, elements, tags_spec = setup
        params, be = _setup(a, seed)
        desc, el = elements
        syms = _symbols_of(el)
        be.watch |= syms
        res, text = "certified", None
        for stage, expected, actual in _outputs(tags_spec, params, factor, el, be, None):
            res, text, _ = _compare(expected, actual, be, syms, seed)
            if res != "certified":
                text = f"{stage} stage: {text}"
                break
        outcome = {"refuted": "witnessed", "certified": "refuted"}.get(res, res)
        if res == "certified":
            text = "the output did not change: the feature does not break the factor here"
        a_name, shapes = a.name, _shape_record(a)
    return Certificate(factor=factor, kind="breaking", feature=feature, identity=b.reason, arch=a_name,
                       shapes=shapes, element=desc, outcome=outcome, expected="changes", witness=text,
                       seconds=time.perf_counter() - t0)


def _breaking_setup(base: Architecture, factor: str, feature: str
                    ) -> tuple[Architecture, tuple[str, Any], GroupSpec] | None:
    """A small architecture with ``feature`` switched on, an element outside the surviving group, and the spec whose tags act.

    The construction is the factor's own (``witness`` of :data:`symtrans.group.elements.ELEMENTS`); None
    for a feature witnessed at the norm level.
    """
    def small(**sizes: int) -> Architecture:
        return tiny_arch(dataclasses.replace(base, H_kv=base.H), **sizes)

    built = _witness_of(base, factor, feature)(feature, base, small)
    if built is None:
        return None
    a, element, tags_arch = built
    return a, element, _loose(tags_arch)


def _witness_of(base: Architecture, factor: str, feature: str) -> Any:
    """The factor's witness construction (an error for a factor whose breaking is not witnessed)."""
    construction = elements_of(GroupSpec.from_arch(base, strict=False), factor).witness
    if construction is None:
        raise SymtransError(f"no witness construction for {factor} / {feature}")
    return construction


def _loose(a: Architecture) -> GroupSpec:
    return GroupSpec.from_arch(a, strict=False)


def _norm_witness(base: Architecture, feature: str) -> tuple[str, str, str, str, dict[str, int]]:
    """Norm-level witnesses for the residual factor (the norm is where the residual map must commute)."""
    d = 4
    x = sp.Matrix([[sp.Rational(1, 2), -1, 2, 3]])
    be = SympyBackend()
    kind = "layernorm" if feature == "LayerNorm centring" else "rmsnorm"
    gamma = sp.Matrix([[sp.Rational(1, 2), 1, sp.Rational(3, 2), 2]])
    if feature == "LayerNorm centring":
        Q = sp.diag(-1, 1, 1, 1)
        desc = "Q = diag(-1, 1, 1, 1), a signed permutation with mixed signs"
        lhs = be.norm(x @ Q, kind, None, None, 0)
        rhs = be.norm(x, kind, None, None, 0) @ Q
    elif feature == "learned norm gains":
        K = sp.Matrix([[0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]) / 2
        Q = (sp.eye(d) - K) @ (sp.eye(d) + K).inv()  # a rational rotation (Cayley transform)
        desc = f"Q = Cayley rotation {Q.tolist()} (orthogonal, not monomial)"
        lhs = be.norm(x @ Q, kind, (Q.inv() @ sp.diag(*gamma) @ Q).diagonal(), None, 0)
        rhs = be.norm(x, kind, gamma, None, 0) @ Q
    else:  # norm epsilon > 0
        Q = 2 * sp.eye(d)
        desc = "Q = 2 I (a residual scaling), eps = 1e-12"
        lhs = be.norm(x @ Q, "layernorm", None, None, 1e-12)
        rhs = be.norm(x, "layernorm", None, None, 1e-12)
    diff = [be.evaluate(e, digits=40) for e in (lhs - rhs)]
    big = max(abs(v) for v in diff)
    outcome = "witnessed" if big > sp.Float("1e-35") else "refuted"
    text = f"at x = {x.tolist()[0]}: max |Norm(x Q) - Norm(x) Q| = {sp.N(big, 6)} (40-digit evaluation)"
    if feature == "norm epsilon > 0":
        text = f"at x = {x.tolist()[0]}: max |LN(2x) - LN(x)| = {sp.N(big, 6)} with eps = 1e-12 (40 digits)"
    return outcome, text, desc, f"{kind} at d_model = {d}", {"d_model": d}


# --------------------------------------------------------------------------- lemmas
def rotary_commutant_dimension(d_k: int, *, distinct: bool = True) -> int:
    """Dimension of {M : M R = R M} for a block rotation R (distinct or repeated frequencies), by nullspace.

    Examples
    --------
    >>> [rotary_commutant_dimension(k) for k in (2, 4, 6)]
    [2, 4, 6]
    >>> rotary_commutant_dimension(4, distinct=False)  # one repeated frequency: GL(2, C), real dim 8
    8
    """
    from symtrans.group.forward import _PYTHAGOREAN

    pairs = _PYTHAGOREAN[: d_k // 2] if distinct else [_PYTHAGOREAN[0]] * (d_k // 2)
    R = sp.diag(*[sp.Matrix([[c, s], [-s, c]]) for c, s in pairs])
    M = generic_matrix("c", d_k)
    eqs = list(M @ R - R @ M)
    A = sp.Matrix([[sp.diff(e, v) for v in M] for e in eqs])
    return d_k * d_k - A.rank()


def _lemma_softmax_shift() -> tuple[str, str, bool]:
    s = sp.symbols("s_:3")
    c = sp.Symbol("c")
    diffs = [sp.exp(s[j] + c) / sum(sp.exp(x + c) for x in s) - sp.exp(s[j]) / sum(sp.exp(x) for x in s)
             for j in range(3)]
    return "softmax(s + c 1) = softmax(s)", "s in R^3, c symbolic", all(sp.simplify(d) == 0 for d in diffs)


def _lemma_rms_orthogonal() -> tuple[str, str, bool]:
    K = sp.Matrix([[0, 1, -2, 0], [-1, 0, 1, 3], [2, -1, 0, 1], [0, -3, -1, 0]]) / 3
    Q = (sp.eye(4) - K) @ (sp.eye(4) + K).inv()
    x = sp.Matrix([list(sp.symbols("x_:4", real=True))])
    # RMS(v) = v / sqrt(|v|^2 / d): equal squared norms give RMS(x Q) = x Q / sqrt(|x|^2 / d) = RMS(x) Q
    same_norm = sp.expand(sum(e**2 for e in x @ Q) - sum(e**2 for e in x)) == 0
    return ("RMSNorm without gain: RMS(x Q) = RMS(x) Q for orthogonal Q",
            "x in R^4 symbolic, Q a rational Cayley rotation", Q.T @ Q == sp.eye(4) and same_norm)


def _lemma_key_bias_row_constant() -> tuple[str, str, bool]:
    q = sp.Matrix(3, 2, sp.symbols("q_:6"))
    k = sp.Matrix(3, 2, sp.symbols("k_:6"))
    u = sp.Matrix([sp.symbols("u_:2")])
    S = q @ k.T
    S2 = q @ (k + sp.ones(3, 1) @ u).T
    D = (S2 - S).applyfunc(sp.expand)
    ok = all(sp.expand(D[i, j] - D[i, 0]) == 0 for i in range(3) for j in range(3))
    return "q_i (k_j + u)^T - q_i k_j^T = q_i u^T does not depend on j (a softmax row constant)", \
        "n = 3, d_k = 2, all symbolic", ok


def _lemma_rotary(d_k: int = 6) -> tuple[str, str, bool]:
    return (f"commutant of a block rotation with distinct frequencies has dimension d_k (d_k = 2, 4, {d_k})",
            "exact nullspace of M -> M R - R M", all(rotary_commutant_dimension(k) == k for k in (2, 4, d_k)))


LEMMAS = {
    "softmax-shift": _lemma_softmax_shift,
    "key-bias-row-constant": _lemma_key_bias_row_constant,
    "rms-orthogonal": _lemma_rms_orthogonal,
    "rotary-commutant": _lemma_rotary,
}


def certify_lemma(name: str) -> Certificate:
    """Run one supporting lemma exactly (softmax shift, key-bias row constant, RMSNorm and O(d), rotary commutant).

    Examples
    --------
    >>> certify_lemma("rotary-commutant").outcome
    'certified'
    """
    if name not in LEMMAS:
        from symtrans.errors import suggest

        raise SymtransError(suggest(name, LEMMAS, "lemma"))
    t0 = time.perf_counter()
    identity, shapes, ok = LEMMAS[name]()
    return Certificate(factor=name, kind="lemma", feature=None, identity=identity, arch="-",
                       shapes={}, element=shapes, outcome="certified" if ok else "refuted",
                       expected="invariant", witness=None if ok else "the identity did not simplify to 0",
                       seconds=time.perf_counter() - t0)


def certify_all(arch: Architecture | str, *, witnesses: bool = True, lemmas: bool = True,
                factors: Sequence[str] | None = None) -> list[Certificate]:
    """Certificates for every factor of ``arch``'s G (both scopes), witnesses for every breaking feature, the lemmas.

    ``factors`` (names of ``arch``'s factors) limits the certificates and
    witnesses to those factors (all of BertBase's take about 10 s).

    Examples
    --------
    >>> cs = certify_all("bert-base", lemmas=False, factors=["S_H", "S_n"])
    >>> [(c.factor, c.kind, c.outcome) for c in cs]  # doctest: +NORMALIZE_WHITESPACE
    [('S_H', 'invariance', 'certified'), ('S_H', 'breaking', 'witnessed'), ('S_n', 'invariance', 'certified'),
     ('S_n', 'breaking', 'witnessed'), ('S_n', 'breaking', 'witnessed')]
    >>> sorted({c.feature for c in cs if c.kind == "breaking"})  # the features that break them
    ['causal mask', 'grouped-query attention', 'learned positions']
    >>> certify_all("bert-base", factors=["S_m"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown factor 'S_m'; did you mean 'S_n' or 'S_H' or 'S_dff'?
    """
    from symtrans.progress import tick

    spec = GroupSpec.from_arch(arch)
    if factors is not None:
        from symtrans.errors import suggest

        names = [f.name for f in spec.factors]
        for name in factors:
            if name not in names:
                raise SymtransError(suggest(name, names, "factor"))
    out = []
    for f in spec.factors:
        if factors is not None and f.name not in factors:
            continue
        if not f.tags and f.scope != "data":
            continue  # structurally absent here (e.g. no bias to translate): nothing to certify or break
        if elements_of(spec, f.name).witness is None:  # the norm factors: certified where present; absent ones have no tags
            if f.status != "broken":
                out.append(certify_factor(spec.arch, f.name))
            continue
        if f.status != "broken":
            out.append(certify_factor(spec.arch, f.name))
        else:  # certify the factor where the breaking features are absent
            c = certify_factor(elements_of(spec, f.name).unbroken(spec.arch), f.name)
            gone = ", ".join(b.feature for b in f.broken_by if b.present and b.effect == "breaks")
            out.append(dataclasses.replace(c, element=f"{c.element}; on a variant without {gone}"))
        tick(f.name)
        if witnesses:
            for b in f.broken_by:
                out.append(witness(spec.arch, f.name, b.feature))
                tick(f"{f.name} broken by {b.feature}")
    if lemmas:
        for name in LEMMAS:
            out.append(certify_lemma(name))
            tick(name)
    return out
