"""The data model of the invariance group G: weight layout, tag tables, factors, the group of an architecture.

:class:`GroupSpec` is G for one architecture: a tuple of :class:`Factor`, each
with its size (a SymPy expression in the canonical symbols of
:mod:`symtrans.symbols`), the features that break or shrink it
(:class:`Breaking`) and its *tag table* (one :class:`AxisTag` per axis of
every weight tensor it acts on). The factors themselves are built in
:mod:`symtrans.group.catalogue`; the generic action that reads the tag
tables is :mod:`symtrans.group.action`.

Weight layout (per layer; the leading ``head``/``kv`` axis indexes per-head
blocks, as in :mod:`symtrans.numeric`): ``W_Q[h]`` d_model x d_k, ``b_Q[h]``,
``W_K[g]``, ``b_K[g]``, ``W_V[g]`` d_model x d_v, ``b_V[g]``, ``W_O[h]``
d_v x d_model, ``b_O``, ``ln1_w``, ``ln1_b``, ``W_gate`` and ``b_gate`` (gated
FFN only), ``W_in`` d_model x d_ff, ``b_in``, ``W_out`` d_ff x d_model,
``b_out``, ``ln2_w``, ``ln2_b``; ``g`` is the key/value head of query head
``h`` (``g = h`` without grouped-query attention). Model tensors: ``word``,
``pos``, ``type``, ``emb_ln_w``, ``emb_ln_b``, ``final_ln_w``, ``final_ln_b``.
Data: ``X`` (tokens x d_model), the layer or model input.

Examples
--------
>>> spec = GroupSpec.from_arch("bert-base")
>>> spec.factor("qk-gauge").dimension, spec.total_dimension()
(H*d_k**2, 1324056)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError, suggest
from symtrans.symbols import SYMBOLS
from symtrans.validate import check_exact_digits

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "Piece", "LAYER_AXES", "MODEL_AXES", "AXIS_SIZES", "SCOPE_TEXT",
           "layer_tensor_names", "model_tensor_names"]

S = SYMBOLS

#: per-layer tensors and the names of their axes (leading head/kv axis = list of blocks)
LAYER_AXES: dict[str, tuple[str, ...]] = {
    "W_Q": ("head", "model", "qk"), "b_Q": ("head", "qk"),
    "W_K": ("kv", "model", "qk"), "b_K": ("kv", "qk"),
    "W_V": ("kv", "model", "v"), "b_V": ("kv", "v"),
    "W_O": ("head", "v", "model"), "b_O": ("model",),
    "ln1_w": ("model",), "ln1_b": ("model",),
    "W_gate": ("model", "ff"), "b_gate": ("ff",),
    "W_in": ("model", "ff"), "b_in": ("ff",),
    "W_out": ("ff", "model"), "b_out": ("model",),
    "ln2_w": ("model",), "ln2_b": ("model",),
    # QK-norm (Gemma 3): one gain of width d_k per layer for the queries, one for the keys, shared by the heads;
    # post-norms: the gains of the norms on the attention and FFN outputs, before the residual add
    "q_norm_w": ("qk",), "k_norm_w": ("qk",), "ln1_post_w": ("model",), "ln2_post_w": ("model",),
}
#: model-level tensors (embeddings and norms outside the layers) and data
MODEL_AXES: dict[str, tuple[str, ...]] = {
    "word": ("vocab", "model"), "pos": ("position", "model"), "type": ("type", "model"),
    "emb_ln_w": ("model",), "emb_ln_b": ("model",),
    "final_ln_w": ("model",), "final_ln_b": ("model",), "lm_head": ("model", "vocab"),
    "X": ("token", "model"),
}
#: axis name -> size symbol name
AXIS_SIZES: dict[str, str] = {"head": "H", "kv": "H_kv", "model": "d_model", "qk": "d_k", "v": "d_v",
                              "ff": "d_ff", "vocab": "vocab_size", "position": "max_positions",
                              "type": "type_vocab_size", "token": "n"}

#: what each scope's map is (the parameters it has, what goes in and what comes out)
SCOPE_TEXT: dict[str, str] = {
    "layers": "the layer stack and the final norm, if any: hidden states in, last hidden state out",
    "model": "embeddings, layers, final norm and (causal language models) the output head: token ids in, "
             "last hidden state (encoders) or logits (decoders) out",
}


def layer_tensor_names(arch: Architecture) -> list[str]:
    """The per-layer tensors this architecture has (biases, gated FFN, RMSNorm decide).

    Examples
    --------
    >>> layer_tensor_names(get_arch("bert-base"))[:4]
    ['W_Q', 'b_Q', 'W_K', 'b_K']
    >>> "ln1_b" in layer_tensor_names(get_arch("bert-base").__class__(**{**get_arch("bert-base").__dict__, "norm": "rmsnorm"}))
    False
    """
    names = []
    for t in LAYER_AXES:
        if t.startswith("b_") and not _has_bias(arch, t):
            continue
        if t in ("ln1_b", "ln2_b") and arch.norm == "rmsnorm":
            continue
        if t in ("W_gate", "b_gate") and arch.ffn != "gated":
            continue
        if t in ("q_norm_w", "k_norm_w") and not arch.qk_norm or t in ("ln1_post_w", "ln2_post_w") \
                and not arch.post_norms:
            continue
        names.append(t)
    return names


def _has_bias(arch: Architecture, tensor: str) -> bool:
    """Whether the bias ``tensor`` exists: every bias with ``bias``; only b_Q, b_K, b_V with ``qkv_bias`` (Qwen2)."""
    return bool(arch.bias or (arch.qkv_bias and tensor in ("b_Q", "b_K", "b_V")))


def model_tensor_names(arch: Architecture) -> list[str]:
    """The model-level parameter tensors (embeddings, embedding and final norms).

    Examples
    --------
    >>> model_tensor_names(get_arch("bert-base"))
    ['word', 'pos', 'type', 'emb_ln_w', 'emb_ln_b']
    >>> model_tensor_names(get_arch("gpt2"))
    ['word', 'pos', 'final_ln_w', 'final_ln_b']
    """
    names = ["word"]
    if arch.positional == "learned":
        names.append("pos")
    if arch.type_vocab_size:
        names.append("type")
    rms = arch.norm == "rmsnorm"
    if arch.embedding_norm:
        names += ["emb_ln_w"] + ([] if rms else ["emb_ln_b"])
    if arch.final_norm:
        names += ["final_ln_w"] + ([] if rms else ["final_ln_b"])
    return names


@dataclass(frozen=True)
class AxisTag:
    """One row of a factor's tag table: how its element acts on one axis of one tensor.

    ``side`` is ``right`` (``T -> T R``: the axis is the block's column axis),
    ``left`` (``T -> R T``: the row axis), ``index`` (the head/kv/token axis is
    reordered) or ``add`` (a translation). ``how`` says what ``R`` is: the
    element, its inverse, its inverse transpose, a permutation, a translation by
    the element (``translate``) or by minus its image under the tensor ``via``
    (``translate_image``), or the conjugation ``diag(R^-1 diag(t) R)`` of a
    gain vector (``conjugate_diagonal``). ``component`` names the part of the
    element used; ``index`` says whether the blocks are indexed by query head
    or key/value head (the element's per-head list is indexed by kv head).

    Examples
    --------
    >>> t = AxisTag("W_O", 1, "vo-gauge", "left", "inverse", index="head")
    >>> t.describe()
    'W_O[h] axis d_v: left by g^-1'
    """

    tensor: str
    axis: int
    factor: str
    side: str
    how: str
    component: str = "g"
    index: str | None = None  # "head" | "kv" | None
    via: str | None = None
    scope: str = "layer"  # "layer" | "model" | "prev" | "next" (the two layers around a boundary)

    def __post_init__(self) -> None:
        from symtrans.group.action import ACTIONS

        if self.how not in ACTIONS:
            raise SymtransError(f"unknown action kind {self.how!r}")
        if self.side not in ("left", "right", "index", "add"):
            raise SymtransError(f"unknown side {self.side!r}")

    @property
    def axis_name(self) -> str:
        """The axis's name (``model``, ``qk``, ``head``, ...).

        Examples
        --------
        >>> AxisTag("W_Q", 2, "qk-gauge", "right", "element", index="head").axis_name
        'qk'
        """
        return _axes(self.tensor)[self.axis]

    def describe(self) -> str:
        """A one-line description, e.g. ``W_Q[h] axis d_k: right by g``.

        Examples
        --------
        >>> AxisTag("b_K", 1, "key-bias-shift", "add", "translate", "u", index="kv").describe()
        'b_K[g] axis d_k: add u'
        """
        head = {"head": "[h]", "kv": "[g]", None: ""}[self.index]
        if self.scope in ("prev", "next"):
            head += " (layer before the boundary)" if self.scope == "prev" else " (layer after the boundary)"
        from symtrans.group.action import ACTIONS

        size = AXIS_SIZES[self.axis_name]
        what = ACTIONS[self.how].describe(self)
        side = {"left": "left by", "right": "right by", "index": "reorder by", "add": "add"}[self.side]
        return f"{self.tensor}{head} axis {size}: {side} {what}"


def _axes(tensor: str) -> tuple[str, ...]:
    if tensor in LAYER_AXES:
        return LAYER_AXES[tensor]
    if tensor in MODEL_AXES:
        return MODEL_AXES[tensor]
    raise SymtransError(suggest(tensor, list(LAYER_AXES) + list(MODEL_AXES), "tensor"))


@dataclass(frozen=True)
class Breaking:
    """A feature that breaks (no non-trivial element survives) or shrinks a factor.

    Examples
    --------
    >>> b = Breaking("learned positions", "breaks", "P X + E != P (X + E)", present=True)
    >>> b.to_dict()["present"]
    True
    """

    feature: str
    effect: str  # "breaks" | "shrinks"
    reason: str
    present: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict.

        Examples
        --------
        >>> sorted(Breaking("f", "breaks", "r", False).to_dict())
        ['effect', 'feature', 'present', 'reason']
        """
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Piece:
    """One piece of a factor element's Lie-algebra coordinates: ``count`` blocks of ``shape``.

    Counts and shapes are expressions in the canonical symbols (or integers),
    evaluated at an architecture's sizes by
    :meth:`GroupSpec.factor_sizes`. ``how`` says how the element is made from
    the coordinates: ``translation`` (the block is the coordinates),
    ``diagonal`` (``I + diag(coordinates)``, a gain scaling), ``rotation``
    (the exponential of an antisymmetric matrix) or ``matrix`` (a per-head
    GL matrix, or its commutant, that the engines build). ``size`` is the
    number of coordinates per block when it is not the default (``shape[0]``
    for ``diagonal``, every entry otherwise).

    Examples
    --------
    >>> Piece("D", 1, (SYMBOLS["d_ff"], SYMBOLS["d_ff"]), "diagonal").coordinate_count
    d_ff
    >>> Piece("g", SYMBOLS["H_kv"], (SYMBOLS["d_k"], SYMBOLS["d_k"]), "matrix").coordinate_count
    d_k**2
    >>> Piece("g", 1, (2, 2), "shear")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown piece kind 'shear'; choose from: 'diagonal', 'matrix', 'rotation', 'translation'
    """

    component: str
    count: Any
    shape: tuple[Any, Any]
    how: str = "translation"  # "translation" | "diagonal" | "rotation" | "matrix"
    size: Any = None

    def __post_init__(self) -> None:
        if self.how not in ("translation", "diagonal", "rotation", "matrix"):
            raise SymtransError(suggest(self.how, ("translation", "diagonal", "rotation", "matrix"), "piece kind"))

    @property
    def coordinate_count(self) -> sp.Expr:
        """Coordinates per block (an expression in the canonical symbols).

        Examples
        --------
        >>> Piece("t", 1, (1, SYMBOLS["d_model"])).coordinate_count
        d_model
        """
        if self.size is not None:
            return sp.sympify(self.size)
        if self.how == "diagonal":
            return sp.sympify(self.shape[0])
        return sp.sympify(self.shape[0]) * sp.sympify(self.shape[1])


@dataclass(frozen=True)
class Factor:
    """One factor of G: kind, size, tag table, breaking features, the identity it rests on.

    ``dimension`` (continuous) or ``order`` (discrete) is the size on this
    architecture, already shrunk by present shrinking features; a factor that
    a present feature breaks has ``status == "broken"`` and does not count.

    Examples
    --------
    >>> f = GroupSpec.from_arch("bert-base").factor("vo-gauge")
    >>> f.kind, f.dimension, f.status
    ('continuous', H*d_v**2, 'exact')
    """

    name: str
    kind: str  # "continuous" | "discrete"
    scope: str  # "layer" | "stack" (between consecutive layers) | "model" | "data"
    group: str  # the group, in words
    dimension: sp.Expr | None
    order: sp.Expr | None
    tags: tuple[AxisTag, ...]
    broken_by: tuple[Breaking, ...]
    identity: str
    element: str  # what an element is (its components)
    data_tags: tuple[str, ...] = ()  # how it acts on data / outputs (equivariance)
    coordinates: tuple[Piece, ...] | None = None  # an element's Lie-algebra coordinates (continuous factors)

    @property
    def status(self) -> str:
        """``broken``, ``shrunk`` or ``exact`` on this architecture.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("S_n").status
        'broken'
        """
        present = [b for b in self.broken_by if b.present]
        if any(b.effect == "breaks" for b in present):
            return "broken"
        return "shrunk" if present else "exact"

    @property
    def effective_dimension(self) -> sp.Expr:
        """The dimension that counts (0 when broken or discrete).

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("ffn-scaling").effective_dimension
        0
        """
        if self.kind != "continuous" or self.status == "broken":
            return sp.Integer(0)
        return self.dimension

    def in_scope(self, scope: str) -> bool:
        """Whether this factor acts on the parameters of ``scope`` (``layers`` or ``model``).

        Per-layer and between-layer factors act on both scopes; model-wide
        factors (embeddings, output head) only on ``model``; the data-side
        factor on neither (it moves inputs, not weights).

        Examples
        --------
        >>> spec = GroupSpec.from_arch("bert-base")
        >>> spec.factor("qk-gauge").in_scope("layers"), spec.factor("residual-permutation").in_scope("layers")
        (True, False)
        """
        if self.scope in ("layer", "stack"):
            return True
        return self.scope == "model" and scope == "model"

    def acts_on(self) -> list[str]:
        """The tag table as lines (weights), followed by the action on data/outputs.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("key-bias-shift").acts_on()
        ['b_K[g] axis d_k: add u']
        """
        return [t.describe() for t in self.tags] + list(self.data_tags)

    def to_dict(self, arch: Architecture | None = None) -> dict[str, Any]:
        """JSON-ready dict (``dimension`` for continuous factors, ``order`` for discrete).

        Examples
        --------
        >>> spec = GroupSpec.from_arch("bert-base")
        >>> d = spec.factor("S_H").to_dict(spec.arch)
        >>> d["kind"], d["order"]["expression"], d["order"]["value"]
        ('discrete', 'factorial(H)', 479001600)
        """
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "scope": self.scope,
                               "group": self.group, "status": self.status}
        size = self.dimension if self.kind == "continuous" else self.order
        key = "dimension" if self.kind == "continuous" else "order"
        out[key] = _size_json(size, arch)
        out["acts_on"] = self.acts_on()
        out["broken_by"] = [b.to_dict() for b in self.broken_by]
        out["identity"] = self.identity
        out["element"] = self.element
        return out


def _size_json(expr: sp.Expr, arch: Architecture | None) -> dict[str, Any]:
    value = expr.subs(arch.substitutions()) if arch is not None else expr
    value = sp.sympify(value)
    shown: Any
    if value.free_symbols:
        shown = None
    elif value.is_Integer and len(str(int(value)) if int(value) < 10**4000 else "x" * 61) <= 60:
        shown = int(value)
    else:
        shown = _big(value)
    return {"expression": str(expr), "value": shown}


def _big(value: sp.Expr) -> str:
    """A huge integer such as d_ff! as its leading digits and digit count (no decimal string needed)."""
    import math

    log = sp.N(sp.log(value, 10), 50)
    exponent = int(math.floor(log))
    mantissa = float(sp.N(10 ** (log - exponent), 10))
    return f"~{mantissa:.5f}e+{exponent} ({exponent + 1} digits)"


@dataclass(frozen=True)
class GroupSpec:
    """The factors of G for one architecture (per layer, model-wide and data-side).

    Build it with :meth:`from_arch`; ``strict=False`` also accepts
    architectures with unmodelled features and then lists only the per-layer
    and data-side factors (``unmodelled`` says what is missing).

    Examples
    --------
    >>> spec = GroupSpec.from_arch("minilm-l6-h384")
    >>> spec.layer_dimension()
    29186
    >>> GroupSpec.from_arch("gpt2").names("continuous", "layer")[-6:]  # doctest: +NORMALIZE_WHITESPACE
    ['ln1-scaling', 'ln1-bias-transfer', 'attention-input-hyperplane', 'ln2-scaling', 'ln2-bias-transfer',
     'ffn-input-hyperplane']
    >>> GroupSpec.from_arch(get_arch("gpt2").__class__(**{**get_arch("gpt2").__dict__, "ln_eps": 0.0}))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: gpt2: the group of a model with norm epsilon = 0 is not modelled: with eps = 0 each residual segment between two norms has an exact scaling symmetry that this toolkit does not model
    """

    arch: Architecture
    factors: tuple[Factor, ...]
    unmodelled: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_arch(cls, arch: Architecture | str, *, strict: bool = True) -> GroupSpec:
        """Build G's factors for a preset name, a config path or an :class:`Architecture`.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("qk-gauge").dimension
        H*d_k**2
        """
        from symtrans.group.catalogue import (
            _data_factors,
            _embedding_factors,
            _layer_factors,
            _model_factors,
            _norm_factors,
            _unmodelled,
        )

        a = get_arch(arch)
        missing = _unmodelled(a)
        if missing and strict:
            feature, reason = missing[0]
            raise SymtransError(f"{a.name}: the group of a model with {feature} is not modelled: {reason}")
        factors = _layer_factors(a) + _norm_factors(a) + _data_factors(a)
        if not missing:
            factors += _model_factors(a) + _embedding_factors(a)
        subs = a.substitutions()
        for f in factors:  # the formula command's size guard: no exact size past MAX_EXACT_DIGITS is computed
            size = f.dimension if f.kind == "continuous" else f.order
            if size is not None:
                check_exact_digits(size, subs, f"group of {a.name}: factor {f.name}")
        return cls(arch=a, factors=tuple(factors), unmodelled=tuple(missing))

    def factor(self, name: str) -> Factor:
        """Return the factor called ``name``.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("S_dff").order
        factorial(d_ff)
        >>> GroupSpec.from_arch("bert-base").factor("S_ff")
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: unknown factor 'S_ff'; did you mean 'S_dff' or 'S_n' or 'S_H'?
        """
        for f in self.factors:
            if f.name == name:
                return f
        raise SymtransError(suggest(name, [f.name for f in self.factors], "factor"))

    def names(self, kind: str | None = None, scope: str | None = None) -> list[str]:
        """Factor names, optionally of one kind and scope.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").names("continuous", "layer")  # doctest: +NORMALIZE_WHITESPACE
        ['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'ffn-scaling', 'centring-shift',
         'ffn-bias-transfer', 'ffn-input-hyperplane']
        """
        return [f.name for f in self.factors
                if (kind is None or f.kind == kind) and (scope is None or f.scope == scope)]

    def layer_expression(self) -> sp.Expr:
        """Continuous dimension per layer, as an expression in the canonical symbols.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").layer_expression()
        H*d_k**2 + H*d_k + H*d_v**2 + 2*H*d_v + 2*d_ff + d_model + 2
        """
        return sp.Add(*[f.effective_dimension for f in self.factors if f.scope == "layer"])

    def gauge_expression(self) -> sp.Expr:
        """Dimension of the per-head GL factors on (Q, K) and (V, O) of one layer.

        Examples
        --------
        >>> GroupSpec.from_arch("symbolic").gauge_expression()
        H*d_k**2 + H*d_v**2
        """
        return sp.Add(*[self.factor(n).effective_dimension for n in ("qk-gauge", "vo-gauge")])

    def stack_expression(self) -> sp.Expr:
        """Continuous dimension per boundary between two consecutive layers (between-layer factors).

        Examples
        --------
        >>> GroupSpec.from_arch("symbolic").stack_expression()
        2*H*d_k + H*d_v + d_model
        """
        return sp.Add(*[f.effective_dimension for f in self.factors if f.scope == "stack"])

    def boundaries(self, scope: str = "layers") -> sp.Expr:
        """How many boundaries the between-layer factors act on: L - 1, plus the embedding norm on ``model``.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").boundaries("model")
        12
        """
        b = S["L"] - 1
        if scope == "model" and self.arch.norm_placement == "post" and self.arch.embedding_norm:
            b = b + 1
        return self._value(b)

    def scope_expression(self, scope: str = "layers") -> sp.Expr:
        """Continuous dimension of G on ``scope`` (``layers`` or ``model``), in the canonical symbols.

        ``layers``: L per-layer blocks plus the between-layer factors at the
        L - 1 boundaries; ``model`` adds the model-wide factors and, after an
        embedding norm, one more boundary.

        Examples
        --------
        >>> GroupSpec.from_arch("symbolic").scope_expression("layers") == GroupSpec.from_arch("symbolic").total_expression()
        True
        """
        if scope not in ("layers", "model"):
            raise SymtransError(suggest(scope, ("layers", "model"), "scope"))
        expr = S["L"] * self.layer_expression()
        b = S["L"] - 1
        if scope == "model":
            expr = expr + sp.Add(*[f.effective_dimension for f in self.factors if f.scope == "model"])
            if self.arch.norm_placement == "post" and self.arch.embedding_norm:
                b = S["L"]
        return sp.expand(expr + b * self.stack_expression())

    def scope_dimension(self, scope: str = "layers") -> sp.Expr:
        """:meth:`scope_expression` at this architecture's sizes.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").scope_dimension("layers") == GroupSpec.from_arch("bert-base").total_dimension()
        True
        """
        return self._value(self.scope_expression(scope))

    def total_expression(self) -> sp.Expr:
        """Continuous dimension of G on the ``layers`` scope (the layer stack and the final norm).

        Examples
        --------
        >>> e = GroupSpec.from_arch("symbolic").total_expression()
        >>> e.subs(SYMBOLS["L"], 1)
        H*d_k**2 + H*d_k + H*d_v**2 + 2*H*d_v + 2*d_ff + d_model + 2
        """
        return self.scope_expression("layers")

    def factor_sizes(self, name: str) -> list[int]:
        """Lie-algebra coordinates of one element of ``name``, piece by piece (concrete sizes only).

        Examples
        --------
        >>> GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=2, d_k=384, d_v=384)).factor_sizes("key-bias-shift")
        [384, 384]
        """
        f = self.factor(name)
        if f.coordinates is None:
            raise SymtransError(f"factor {name!r} is {f.kind} ({f.scope}): it has no Lie-algebra coordinates")
        return [int(self._value(p.coordinate_count)) for p in f.coordinates for _ in range(int(self._value(p.count)))]

    def element_count(self, name: str, scope: str, layers: int) -> int:
        """How many independent elements of ``name`` act on ``scope`` of a ``layers``-layer model.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").element_count("qk-gauge", "layers", 3)
        3
        """
        f = self.factor(name)
        if f.scope == "layer":
            return layers
        if f.scope == "stack":
            return int(self.boundaries(scope).subs(S["L"], layers))
        return 1 if f.in_scope(scope) else 0

    def _value(self, expr: sp.Expr) -> sp.Expr:
        return sp.sympify(expr).subs(self.arch.substitutions())

    def layer_dimension(self) -> sp.Expr:
        """Continuous dimension per layer for this architecture's sizes.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").layer_dimension()
        107522
        """
        return self._value(self.layer_expression())

    def gauge_dimension_model(self) -> sp.Expr:
        """L times the GL-factor dimension (the maximal gauge group of MHA, summed over layers).

        Examples
        --------
        >>> GroupSpec.from_arch("bert-large").gauge_dimension_model()
        3145728
        """
        return self._value(S["L"] * self.gauge_expression())

    def total_dimension(self) -> sp.Expr:
        """Continuous dimension of G for this architecture.

        Examples
        --------
        >>> GroupSpec.from_arch("minilm-l6-h384").total_dimension()
        182796
        """
        return self._value(self.total_expression())

    def tag_table(self) -> list[dict[str, Any]]:
        """Every axis of every tensor of this architecture, with the factors acting on it.

        Examples
        --------
        >>> rows = GroupSpec.from_arch("bert-base").tag_table()
        >>> [r["factors"] for r in rows if r["tensor"] == "W_O" and r["axis"] == "v"][0]
        ['vo-gauge: left by g^-1']
        >>> [r["factors"] for r in rows if r["tensor"] == "b_Q"][1]  # doctest: +NORMALIZE_WHITESPACE
        ['qk-gauge: right by g', 'attention-bias-transfer: add -t W_Q[h]',
         'attention-input-hyperplane: add -<ln2_b, 1/ln2_w> v_W_Q']
        """
        rows = []
        names = layer_tensor_names(self.arch) + [m for m in model_tensor_names(self.arch)]
        for tensor in names:
            for axis, axis_name in enumerate(_axes(tensor)):
                acting = []
                for f in self.factors:
                    for t in f.tags:
                        if t.tensor == tensor and t.axis == axis:
                            acting.append(f"{f.name}: " + t.describe().split(": ", 1)[1])
                rows.append({"tensor": tensor, "axis": axis_name, "size": AXIS_SIZES[axis_name],
                             "factors": acting})
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The JSON printed by ``symtrans group --arch ... --format json``.

        Examples
        --------
        >>> d = GroupSpec.from_arch("bert-base").to_dict()
        >>> d["total_dimension"], d["gauge_dimension"], d["scopes"]["model"]["value"]
        (1324056, 1179648, 1359698)
        """
        a = self.arch
        return {
            "arch": a.name,
            "factors": [f.to_dict(a) for f in self.factors],
            "total_dimension": _size_json(self.total_expression(), a)["value"],
            "total_dimension_expression": str(self.total_expression()),
            "total_dimension_scope": "layers",
            "scopes": {name: {**_size_json(self.scope_expression(name), a), "covers": SCOPE_TEXT[name]}
                       for name in ("layers", "model")},
            "layer_dimension": _size_json(self.layer_expression(), a)["value"],
            "gauge_dimension": _size_json(S["L"] * self.gauge_expression(), a)["value"],
            "gauge_dimension_counts": "L x (qk-gauge + vo-gauge): the per-head GL factors only",
            "layers": _size_json(S["L"], a)["value"],
            "unmodelled": [{"feature": f, "reason": r} for f, r in self.unmodelled],
            "assumes": self.assumptions(),
        }

    def assumptions(self) -> list[str]:
        """Conditions on the sizes under which the factors are independent and the dimension count is exact.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").assumptions()[0][:24]
        'd_v <= d_model (here 64 '
        """
        a = self.arch
        concrete = isinstance(a.d_v, int) and isinstance(a.d_model, int)
        holds = (f"here {a.d_v} < {a.d_model}" if concrete and a.d_v < a.d_model else
                 f"here d_v = d_model = {a.d_model}: counted by the attention-input hyperplane's shrinking"
                 if concrete else "sizes symbolic: the count is the one for d_v < d_model")
        return [f"d_v <= d_model ({holds}): with d_v < d_model a head's W_O^h generically misses the all-ones row; "
                "with d_v = d_model and one query head per key/value head, one hyperplane move of W_V per head "
                "equals a vo-gauge plus centring and value-bias moves and is counted once (d_v > d_model is "
                "refused)",
                "generic weights: G acts locally freely (orbit dimension = group dimension) and is the whole "
                "continuous stabiliser of the function (measured by --complete); at special weights (a dead head, "
                "a rank-deficient block) a stabiliser appears, and the orbit dimensions of --verify say how large"]
