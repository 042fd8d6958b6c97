"""The invariance group G of an architecture: factors, tag tables, the generic action.

:meth:`GroupSpec.from_arch` lists the factors of G for one architecture. Each
:class:`Factor` carries its dimension (continuous, a SymPy expression in the
canonical symbols of :mod:`symtrans.symbols`) or its order (discrete), the
features that break or shrink it (each with the reason and whether this
architecture has it), and a *tag table*: for every axis of every weight tensor
it acts on, the side and whether it acts by the element, its inverse or its
inverse transpose. The action is fully determined by that table:
:func:`act` reads nothing else, and both the exact certificates
(:mod:`symtrans.group.certify`) and the numeric checks
(:mod:`symtrans.group.numeric`) transform weights only through it.

Weight layout (per layer; the leading ``head``/``kv`` axis indexes per-head
blocks, as in :mod:`symtrans.numeric`): ``W_Q[h]`` d_model x d_k, ``b_Q[h]``,
``W_K[g]``, ``b_K[g]``, ``W_V[g]`` d_model x d_v, ``b_V[g]``, ``W_O[h]``
d_v x d_model, ``b_O``, ``ln1_w``, ``ln1_b``, ``W_gate`` and ``b_gate`` (gated
FFN only), ``W_in`` d_model x d_ff, ``b_in``, ``W_out`` d_ff x d_model,
``b_out``, ``ln2_w``, ``ln2_b``; ``g`` is the key/value head of query head
``h`` (``g = h`` without grouped-query attention). Model tensors: ``word``,
``pos``, ``type``, ``emb_ln_w``, ``emb_ln_b``, ``final_ln_w``, ``final_ln_b``.
Data: ``X`` (tokens x d_model), the layer or model input.

This module never imports torch (tests/test_import_contract.py checks it):
:func:`act` works on SymPy matrices and on torch tensors alike (block form:
per-head tensors are lists of 2-D blocks, vectors are 1 x m rows), reaching
torch only through a tensor it is given. Group elements as torch tensors are
built in :mod:`symtrans.group.numeric` (``lie_element``).

Examples
--------
>>> spec = GroupSpec.from_arch("bert-base")
>>> [f.name for f in spec.factors]  # doctest: +NORMALIZE_WHITESPACE
['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'S_H', 'S_dff', 'ffn-scaling',
 'centring-shift', 'ffn-bias-transfer', 'ffn-input-hyperplane', 'attention-bias-transfer',
 'attention-input-hyperplane', 'S_n', 'residual-permutation', 'embedding-centring-shift',
 'embedding-translation', 'final-norm-scaling', 'unused-position-rows', 'final-norm-bias-transfer',
 'residual-rotation']
>>> spec.total_dimension()
1324056
>>> spec.gauge_dimension_model()
1179648
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError, suggest
from symtrans.symbols import SYMBOLS
from symtrans.validate import check_exact_digits

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "act", "LAYER_AXES", "MODEL_AXES",
           "AXIS_SIZES", "SCOPE_TEXT", "layer_tensor_names", "model_tensor_names", "generic_element", "Action",
           "ACTIONS"]

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


# --------------------------------------------------------------------------- building G
def _kv(a: Architecture) -> sp.Expr:
    return S["H"] if a.H_kv == a.H else S["H_kv"]


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


def _unmodelled(a: Architecture) -> list[tuple[str, str]]:
    """Features whose effect on G the toolkit does not model (G would be silently wrong)."""
    out = []
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
        a = self.arch
        kv, d_k, d_v = int(a.H_kv), int(a.d_k), int(a.d_v)
        if name == "qk-gauge":
            return [d_k if a.positional == "rotary" else d_k * d_k] * kv
        if name == "vo-gauge":
            return [d_v * d_v] * kv
        if name == "key-bias-shift":
            return [d_k] * kv
        if name == "value-bias-shift":
            return [d_v] * kv
        if name == "ffn-scaling":
            return [int(a.d_ff)]
        if name == "qk-norm-gain-trade":  # one scale per rotated pair (rotary), else per coordinate
            return [d_k // 2 if a.positional == "rotary" else d_k]
        if name == "residual-rotation":
            k = int(a.d_model) - (0 if a.norm == "rmsnorm" else 1)  # LayerNorm: rotations of the plane 1^perp
            return [k * (k - 1) // 2]
        if f.scope in ("layer", "stack", "model") and f.kind == "continuous":
            return [shape[0] if comp == "D" else shape[0] * shape[1]
                    for comp, count, shape in _pieces(self, name) for _ in range(count)]
        return [int(self._value(f.dimension))]

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
    f.append(Factor(
        "qk-gauge", "continuous", "layer",
        "GL(d_k) per key/value head" + (", shrunk to the commutant of the rotary rotations" if rotary else ""),
        kv * (S["d_k"] if rotary else S["d_k"] ** 2), None, tuple(qk_tags),
        (Breaking("rotary positions", "shrinks",
                  "queries and keys are rotated by R_i, R_j after projection, so M must commute with every "
                  "R_{j-i}: with distinct frequencies the commutant is one complex scalar a I + b J per 2x2 "
                  "block, dimension d_k per head instead of d_k^2", rotary), gqa_shrink,
         Breaking("QK-norm", "breaks",
                  "queries and keys are RMS-normalised per head before the product: RMSNorm(q M) = RMSNorm(q) M' "
                  "for every q forces M orthogonal (up to sign), and the norm's gain, shared by every head, must "
                  "then absorb Gamma^-1 M Gamma': with distinct gains that leaves only diagonal M, the same for "
                  "every head, which is the qk-norm-gain-trade factor (plus finitely many sign flips)", a.qk_norm)),
        "(X W_Q M + 1 b_Q M)(X W_K M^-T + 1 b_K M^-T)^T = (X W_Q + 1 b_Q)(X W_K + 1 b_K)^T: the scores are unchanged"
        + (" (soft-capping c tanh(s / c) is a function of the scores, so it keeps the factor)" if a.attn_softcap
           else ""),
        "g = (M_1, ..., M_{H_kv}), M_g in GL(d_k)" + (" commuting with the rotations" if rotary else "")))
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
        "g = (N_1, ..., N_{H_kv}), N_g in GL(d_v)"))
    if QKV:
        f.append(Factor(
            "key-bias-shift", "continuous", "layer", "translations of b_K (softmax row constants)",
            kv * S["d_k"], None, (AxisTag("b_K", 1, "key-bias-shift", "add", "translate", "u", index="kv"),),
            (Breaking("rotary positions", "breaks",
                      "the key bias is rotated by R_j before the dot product, so q_i R_{j-i} b_K^T varies with j",
                      rotary),),
            "s_ij = q_i (k_j + u)^T = q_i k_j^T + q_i u^T: the added term is constant along the key index j, "
            "and softmax(s + c 1^T) = softmax(s); the whole key bias is unidentifiable",
            "u = (u_1, ..., u_{H_kv}), u_g in R^{d_k}"))
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
            "v = (v_1, ..., v_{H_kv}), v_g in R^{d_v}"))
    head_tags = [AxisTag(t, 0, "S_H", "index", "permutation", "pi", index="head")
                 for t in ("W_Q", "b_Q", "W_O") if QKV or not t.startswith("b_")]
    head_tags += [AxisTag(t, 0, "S_H", "index", "permutation", "kappa", index="kv")
                  for t in ("W_K", "b_K", "W_V", "b_V") if QKV or not t.startswith("b_")]
    order = sp.factorial(S["H"]) if not gqa else sp.factorial(S["H_kv"]) * sp.factorial(S["H"] / S["H_kv"]) ** S["H_kv"]
    f.append(Factor(
        "S_H", "discrete", "layer", "head relabelling" + (" respecting key/value groups" if gqa else ""),
        None, order, tuple(head_tags),
        (Breaking("grouped-query attention", "shrinks",
                  "a query head can only move with its key/value head: S_{H/H_kv} wr S_{H_kv}, "
                  "order H_kv! ((H/H_kv)!)^H_kv", gqa),),
        "sum_h Y^{pi(h)} W_O^{pi(h)} = sum_h Y^h W_O^h: MHA sums over heads",
        "pi a permutation of the query heads that maps key/value groups to groups; kappa the induced "
        "permutation of the key/value heads"))
    ffn_ins = ["W_in", "b_in"] + (["W_gate", "b_gate"] if a.ffn == "gated" else [])
    ff_tags = [AxisTag(t, 1 if t.startswith("W") else 0, "S_dff", "right", "element", "P")
               for t in ffn_ins if B or not t.startswith("b_")]
    ff_tags.append(AxisTag("W_out", 0, "S_dff", "left", "inverse", "P"))
    f.append(Factor(
        "S_dff", "discrete", "layer", "permutations of the FFN hidden units", None, sp.factorial(S["d_ff"]),
        tuple(ff_tags), (),
        "act(x W_in P + b_in P) P^-1 W_out = act(x W_in + b_in) W_out for a permutation matrix P "
        "(the activation acts entry-wise)" + ("; the gate is permuted with the up projection" if a.ffn == "gated" else ""),
        "P a d_ff x d_ff permutation matrix"))
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
        ident, el))
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
            "D = diag(d), d_j > 0"))
    return f


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
    tags = (AxisTag("q_norm_w", 0, "qk-norm-gain-trade", "right", "element", "D"),
            AxisTag("k_norm_w", 0, "qk-norm-gain-trade", "right", "inverse", "D")) if a.qk_norm else ()
    return Factor(
        "qk-norm-gain-trade", "continuous", "layer",
        "diagonal scalings of the query norm's gain undone on the key norm's gain"
        + (" (one per rotated pair of coordinates)" if rotary else ""),
        dim, None, tags,
        (Breaking("no QK-norm", "breaks", "without norms on the queries and keys there are no gains to trade (the "
                  "qk-gauge acts instead)", not a.qk_norm),),
        "(q Gamma_q S R_t)(k Gamma_k S^-1 R_s)^T = (q Gamma_q R_t)(k Gamma_k R_s)^T when S commutes with the rotations "
        "(S diagonal and equal on each rotated pair): every score is unchanged",
        "D = diag(s), s_i != 0" + (", s equal on the two coordinates of each rotated pair" if rotary else ""))


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
        "(w_1..w_H in R^{d_v}, w in R^{d_ff}, c_O, c_out in R)"))
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
            "t in R^{d_model}"))
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
            "t in R^{d_model}, one per boundary between layers"))
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
                d, None, tuple(sc), (),
                f"pre-LN: {norm.upper()}'s output is read only by affine maps: (gamma D, beta D, D^-1 W) gives "
                "(z gamma D + beta D) D^-1 W = (z gamma + beta) W",
                "D = diag(s), s_i != 0"))
            tr = [AxisTag(f"{norm}_b", 0, f"{norm}-bias-transfer", "add", "translate", "t")]
            tr += [AxisTag(b, 1 if ix else 0, f"{norm}-bias-transfer", "add", "translate_image", "t", via=w, index=ix)
                   for w, b, ix in readers]
            f.append(Factor(
                f"{norm}-bias-transfer", "continuous", "layer",
                f"translations of {norm.upper()}'s bias, undone by its readers' biases",
                d, None, tuple(tr) if ln and _reader_bias(a, which) else (),
                (no_norm_bias, dataclasses.replace(no_bias, present=not _reader_bias(a, which))),
                f"(beta + t, b - t W) for every reader of {norm.upper()}: (y + t) W + b - t W = y W + b",
                "t in R^{d_model}"))
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
        "one row v_W per reader W (width = its output width)" + ("; one per boundary between layers" if scope == "stack" else ""))


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
        "one scalar per row of " + ", ".join(free)))
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
        "a_t in R^{d_model} per table traded with the position table"))
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
        "D = diag(s), s_i != 0"))
    # every norm is read by affine maps only (pre-norm, untied head) and nothing fixed is added to the residual
    from symtrans.group.forward import unused_position_rows

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
        "r in R^{k x d_model}, k = position_table - max_positions leading rows"))
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
        "t in R^{d_model}"))
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
        rtags.append(AxisTag(t, ax, "residual-rotation", "left", "conjugate_gain", "Q", index=ix, via=g))
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
        "Q in O(d_model)" if rms else "Q in O(d_model) with Q 1 = 1"))
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
        data_tags=("X axis n: left by P (tokens reordered)", "output axis n: left by P (equivariance)"))]


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
        "readers absorb Q^-1, writers and embeddings Q, so every hidden state becomes X Q",
        el, data_tags=("output axis d_model: right by Q (equivariance: a readout absorbs Q^-1)",))]


# --------------------------------------------------------------------------- the generic action
def _is_sympy(x: Any) -> bool:
    return isinstance(x, sp.MatrixBase)


def _inverse(g: Any) -> Any:
    return g.inv() if _is_sympy(g) else g.inverse()


def _cached_inverse(g: Any, cache: dict[int, Any]) -> Any:
    if id(g) not in cache:
        cache[id(g)] = (g, _inverse(g))  # keep g alive so its id is not reused
    return cache[id(g)][1]


def _diag(v: Any) -> Any:
    return sp.diag(*list(v)) if _is_sympy(v) else v.reshape(-1).diag()


def _diagonal_row(M: Any) -> Any:
    if not _is_sympy(M) and hasattr(M, "dense"):
        M = M.dense()
    if _is_sympy(M):
        return sp.Matrix([[M[i, i] for i in range(M.rows)]])
    return M.diagonal().reshape(1, -1)


def _block_axis(tag: AxisTag) -> int:
    axes = _axes(tag.tensor)
    inner = axes[1:] if tag.index is not None else axes
    pos = tag.axis - (1 if tag.index is not None else 0)
    return 1 if len(inner) == 1 else pos


def _ones_like_row(block: Any) -> Any:
    cols = block.shape[1]
    if _is_sympy(block):
        return sp.ones(1, cols)
    return block.new_ones(1, cols)


def _reciprocal(row: Any) -> Any:
    return row.applyfunc(lambda x: 1 / x) if _is_sympy(row) else 1 / row


def _dot(a: Any, b: Any) -> Any:
    if _is_sympy(a):
        return (a * b.T)[0, 0]
    return (a * b).sum()


def _apply_block(block: Any, tag: AxisTag, g: Any, ginv: Any, cache: dict[int, Any], original: dict[str, Any],
                 which: Any, head: int | None = None) -> Any:
    inverse = (lambda: ginv if ginv is not None else _cached_inverse(g, cache))
    return ACTIONS[tag.how].apply(block, tag, g, inverse, original, which, head)


@dataclass(frozen=True)
class Action:
    """One kind of action (an :class:`AxisTag`'s ``how``): how a tag table names it, and what it does to one block.

    ``apply(block, tag, g, inverse, original, which, head)`` returns the acted-on
    block: ``g`` is the element's component, ``inverse()`` its inverse,
    ``original`` the tensors before the action, ``which(h)`` the key/value head
    of query head ``h`` and ``head`` the block's head index (None for a whole tensor).

    Examples
    --------
    >>> sorted(ACTIONS)[:3]
    ['conjugate_diagonal', 'conjugate_gain', 'conjugate_gain_row']
    >>> ACTIONS["translate"].apply(sp.Matrix([[1, 2]]), None, sp.Matrix([[3, 4]]), None, {}, None, None)
    Matrix([[4, 6]])
    """

    describe: Callable[[AxisTag], str]
    apply: Callable[..., Any]


def _linear(transpose: bool, use_inverse: bool) -> Callable[..., Any]:
    """A linear action on the side the tag names: by the element, its inverse or its inverse transpose."""
    def apply(block: Any, tag: AxisTag, g: Any, inverse: Any, original: Any, which: Any, head: Any) -> Any:
        R = inverse() if use_inverse else g
        if transpose:
            R = R.T
        bax = _block_axis(tag)
        if tag.side == "right":
            if bax != 1:
                raise SymtransError(f"tag {tag.describe()}: a right action needs the column axis")
            return block @ R
        if bax != 0:
            raise SymtransError(f"tag {tag.describe()}: a left action needs the row axis")
        return R @ block

    return apply


def _translate_rows(sign: int) -> Callable[..., Any]:
    def apply(block: Any, tag: AxisTag, g: Any, *_: Any) -> Any:
        ones = sp.ones(block.shape[0], 1) if _is_sympy(block) else block.new_ones(block.shape[0], 1)
        return block + sign * (ones @ g)

    return apply


def _conjugate_gain(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    gain = original[tag.via]
    return _diag(_reciprocal(gain)) @ inverse() @ _diag(gain) @ block


def _conjugate_gain_row(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    gain = original[tag.via]
    return block @ _diag(_reciprocal(gain)) @ g @ _diag(gain)


def _hyperplane_head(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    """The head W absorbs a shift t of the final norm's bias through the hyperplane."""
    names = tag.via.split(",")
    inv_gain = _reciprocal(original[names[0]])
    v = -(g @ block) / _dot(original[names[1]] + g, inv_gain)
    return block + inv_gain.T @ v


def _hyperplane_weight(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    return block + _reciprocal(original[tag.via.split(",")[0]]).T @ g


def _hyperplane_bias(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    names = tag.via.split(",")
    return block - _dot(original[names[1]], _reciprocal(original[names[0]])) * g


def _translate_leading_rows(block: Any, tag: AxisTag, g: Any, *_: Any) -> Any:
    k = g.shape[0]
    if _is_sympy(block):
        return block + sp.Matrix.vstack(g, sp.zeros(block.shape[0] - k, block.shape[1]))
    return block + sys.modules["torch"].cat([g, g.new_zeros(block.shape[0] - k, block.shape[1])])  # a torch block


def _translate_image(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], which: Any,
                     head: int | None) -> Any:
    via = original[tag.via]
    if not isinstance(via, list):
        return block - g @ via
    if head is not None:
        return block - g @ via[head]
    image = None
    for h, W in enumerate(via):
        term = g[which(h)] @ W
        image = term if image is None else image + term
    return block - image


def _image_text(t: AxisTag) -> str:
    c = t.component
    if t.index:
        return f"-{c} {t.via}[{'h' if t.index == 'head' else 'g'}]"
    return f"-sum_h {c}_h {t.via}[h]" if t.via == "W_O" else f"-{c} {t.via}"


def _vias(t: AxisTag) -> list[str]:
    return (t.via or "").split(",")


#: Every kind of action, by name: its description in a tag table and its effect on a block (one table for both).
ACTIONS: dict[str, Action] = {
    "element": Action(lambda t: t.component, _linear(False, False)),
    "inverse": Action(lambda t: f"{t.component}^-1", _linear(False, True)),
    "inverse_transpose": Action(lambda t: f"{t.component}^-T", _linear(True, True)),
    # a permutation reorders blocks (in _apply_tag); applied to one block it would act by its inverse
    "permutation": Action(lambda t: f"permutation {t.component}", _linear(False, True)),
    "translate": Action(lambda t: t.component, lambda block, tag, g, *_: block + g),
    "translate_image": Action(_image_text, _translate_image),
    "conjugate_diagonal": Action(lambda t: f"diag({t.component}^-1 diag(.) {t.component})",
                                 lambda block, tag, g, inverse, *_: _diagonal_row(inverse() @ _diag(block) @ g)),
    "translate_ones": Action(lambda t: f"{t.component} 1^T (a multiple of the all-ones row)",
                             lambda block, tag, g, *_: block + g @ _ones_like_row(block)),
    "translate_neg": Action(lambda t: f"-{t.component}", lambda block, tag, g, *_: block - g),
    "hyperplane_weight": Action(lambda t: f"(1/{t.via})^T {t.component}", _hyperplane_weight),
    "hyperplane_bias": Action(lambda t: f"-<{_vias(t)[-1]}, 1/{_vias(t)[0]}> {t.component}", _hyperplane_bias),
    "translate_rows": Action(lambda t: f"{t.component} to every row", _translate_rows(1)),
    "translate_rows_neg": Action(lambda t: f"-{t.component} to every row", _translate_rows(-1)),
    "conjugate_gain": Action(lambda t: f"diag({t.via})^-1 {t.component}^-1 diag({t.via})", _conjugate_gain),
    "conjugate_gain_row": Action(lambda t: f"diag({t.via})^-1 {t.component} diag({t.via})", _conjugate_gain_row),
    "hyperplane_head": Action(lambda t: f"(1/{_vias(t)[0]})^T v, v = -{t.component} W / <{_vias(t)[-1]} + "
                                        f"{t.component}, 1/{_vias(t)[0]}>", _hyperplane_head),
    "translate_leading_rows": Action(lambda t: f"{t.component} to the leading (unused) rows", _translate_leading_rows),
}


def _apply_tag(params: dict[str, Any], tag: AxisTag, element: dict[str, Any], original: dict[str, Any],
               cache: dict[int, Any], group: int) -> None:
    if tag.tensor not in params or params[tag.tensor] is None:
        return
    if tag.component not in element:
        raise SymtransError(f"element of {tag.factor} lacks component {tag.component!r}")
    g = element[tag.component]
    ginv = element.get(tag.component + "_inv")  # an exact inverse the sampler may supply
    value = params[tag.tensor]

    def to_kv(h: int) -> int:
        return h // group

    if tag.how == "permutation":
        params[tag.tensor] = [value[i] for i in g]
        return
    if tag.index is None:
        params[tag.tensor] = _apply_block(value, tag, g, ginv, cache, original, to_kv)
        return
    mismatch = isinstance(g, (list, tuple)) and len(g) != len(value) and not (
        tag.index == "head" and len(g) * group == len(value))
    # a spec without grouped-query attention may act per query head on shared blocks on purpose (the witness
    # that GQA shrinks the gauges); with GQA in the spec, a mismatch means the blocks are not as stored
    if mismatch and (group > 1 or len(g) < len(value)):
        raise SymtransError(
            f"{tag.factor}: {tag.tensor} has {len(value)} {'key/value' if tag.index == 'kv' else 'query'} head "
            f"blocks but the element's {tag.component!r} has {len(g)} entries; key/value tensors are acted on as "
            f"stored (one entry per key/value head, shared by the query heads of its group)")
    out = []
    for h, block in enumerate(value):
        if isinstance(g, (list, tuple)):  # one element per key/value head (or per block, if as many)
            i = to_kv(h) if tag.index == "head" and len(g) != len(value) else h
            gh, ghinv = g[i], (ginv[i] if ginv is not None else None)
        else:  # one element for all heads (a residual-stream map)
            gh, ghinv = g, ginv
        out.append(_apply_block(block, tag, gh, ghinv, cache, original, None, h))
    params[tag.tensor] = out


def _take_rows(M: Any, perm: list[int]) -> Any:
    if _is_sympy(M):
        return M.extract(list(perm), list(range(M.cols)))
    return M[list(perm)]


def act(spec: GroupSpec, params: dict[str, Any], factor: str, element: Any, *,
        tags: tuple[AxisTag, ...] | None = None) -> dict[str, Any]:
    """Return new parameters: ``element`` of ``factor`` acting through the tag table only.

    ``params`` is one layer (a dict of tensors in block form) or a model
    (``{"layers": [...], "word": ..., ...}``). For a per-layer factor on a
    model, ``element`` is a list with one element per layer. An element is a
    dict from component name (``g``, ``u``, ``v``, ``pi``, ``kappa``, ``P``,
    ``D``, ``Q``) to its value; per-head components are lists indexed by
    key/value head. ``tags`` replaces the factor's table (to test a wrong
    action). Data-side factors act on the entry ``X``.

    Examples
    --------
    >>> import sympy as sp
    >>> spec = GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=1, H_kv=1, d_model=64))
    >>> W_O = [sp.Matrix([[1, 2], [3, 4]])]
    >>> new = act(spec, {"W_O": W_O}, "vo-gauge", {"g": [sp.diag(2, 1)]})
    >>> new["W_O"][0]
    Matrix([
    [1/2, 1],
    [  3, 4]])
    """
    f = spec.factor(factor)
    tags = f.tags if tags is None else tags
    group = 1
    if isinstance(spec.arch.H, int) and isinstance(spec.arch.H_kv, int):
        group = spec.arch.H // spec.arch.H_kv
    if f.scope == "data":
        out = dict(params)
        if "X" in out:
            out["X"] = _take_rows(out["X"], element["P"])
        return out
    if f.scope == "stack":
        return _act_stack(spec, params, f, element, tags)
    if "layers" in params:
        out = dict(params)
        if f.scope == "layer":
            if len(element) != len(params["layers"]):
                raise SymtransError(f"{factor}: give one element per layer ({len(params['layers'])})")
            out["layers"] = [act(spec, lp, factor, el, tags=tags) for lp, el in zip(params["layers"], element)]
            return out
        layer_tags = tuple(t for t in tags if t.scope == "layer")
        out["layers"] = [act(spec, lp, factor, element, tags=layer_tags) for lp in params["layers"]]
        cache: dict[int, Any] = {}
        for t in tags:
            if t.scope == "model":
                _apply_tag(out, t, element, params, cache, group)
        return out
    out = dict(params)
    cache = {}
    for t in tags:
        if t.scope == "layer":
            _apply_tag(out, t, element, params, cache, group)
    return out


def _act_stack(spec: GroupSpec, params: dict[str, Any], f: Factor, element: list[Any],
               tags: tuple[AxisTag, ...]) -> dict[str, Any]:
    """A between-layer factor: one element per boundary (L - 1, or L with the embedding norm first)."""
    layers = [dict(lp) for lp in params["layers"]]
    out = dict(params)
    L = len(layers)
    if len(element) not in (L - 1, L):
        raise SymtransError(f"{f.name}: give one element per boundary between layers ({L - 1}, or {L} "
                            "with the embedding norm)")
    first = L - len(element)  # 1: boundaries (0,1), (1,2), ...; 0: the embedding norm comes first
    group = 1
    if isinstance(spec.arch.H, int) and isinstance(spec.arch.H_kv, int):
        group = spec.arch.H // spec.arch.H_kv
    for k, el in enumerate(element):
        nxt = first + k
        if nxt == 0:  # the embedding norm plays LN2 of the layer before
            prev_orig = {"ln2_w": params.get("emb_ln_w"), "ln2_b": params.get("emb_ln_b")}
        else:
            prev_orig = params["layers"][nxt - 1]
        next_orig = dict(layers[nxt])
        for t in tags:
            if t.scope == "prev":
                target = dict(prev_orig)
                _apply_tag(target, dataclasses.replace(t, scope="layer"), el, dict(prev_orig), {}, group)
                if nxt == 0:
                    out["emb_ln_b" if t.tensor == "ln2_b" else "emb_ln_w"] = target[t.tensor]
                else:
                    layers[nxt - 1] = {**layers[nxt - 1], t.tensor: target[t.tensor]}
            elif t.scope == "next":
                original = {**next_orig, **{n: v for n, v in prev_orig.items() if n in ("ln2_w", "ln2_b")}}
                target = dict(layers[nxt])
                _apply_tag(target, dataclasses.replace(t, scope="layer"), el, original, {}, group)
                layers[nxt] = target
    out["layers"] = layers
    return out


def _pieces(spec: GroupSpec, name: str) -> list[tuple[str, int, tuple[int, int]]]:
    """(component, count, block shape) of a translation or scaling factor's element, in coordinate order."""
    a = spec.arch
    H, kv, d, d_k, d_v, d_ff = (int(x) for x in (a.H, a.H_kv, a.d_model, a.d_k, a.d_v, a.d_ff))
    f = spec.factor(name)
    if name == "centring-shift":
        out = [("w_O", H, (d_v, 1)), ("w_out", 1, (d_ff, 1))]
        if a.bias:
            out += [("c_O", 1, (1, 1)), ("c_out", 1, (1, 1))]
        return out
    if name.endswith("bias-transfer"):
        return [("t", 1, (1, d))]
    if name == "unused-position-rows":
        from symtrans.group.forward import unused_position_rows

        return [("r", 1, (unused_position_rows(a), d))]
    if name == "embedding-centring-shift":
        rows = {"word": int(a.vocab_size), "pos": int(a.position_table or a.max_positions),
                "type": int(a.type_vocab_size)}
        return [(t.component, 1, (rows[t.tensor], 1)) for t in f.tags]
    if name == "embedding-translation":
        return [(t.component, 1, (1, d)) for t in f.tags if t.how == "translate_rows"]
    if name == "final-norm-scaling":
        return [("D", 1, (d, d))]
    if name == "gate-scaling":
        return [("D", 1, (d_ff, d_ff))]
    if name == "qk-norm-gain-trade":
        return [("D", 1, (d_k, d_k))]
    if name == "residual-rotation":
        return [("A", 1, (d, d))]
    if name.endswith("-scaling") and name.startswith("ln"):
        return [("D", 1, (d, d))]
    if name.endswith("input-hyperplane"):
        widths = {"W_Q": (H, d_k), "W_K": (kv, d_k), "W_V": (kv, d_v), "W_in": (1, d_ff), "W_gate": (1, d_ff)}
        comps = []
        for t in f.tags:
            if t.how == "hyperplane_weight":
                count, w = widths[t.tensor]
                comps.append((t.component, count, (1, w)))
        return comps
    raise SymtransError(f"no coordinates for factor {name!r}")


def generic_element(spec: GroupSpec, factor: str) -> dict[str, Any]:
    """A generic symbolic element of a norm factor (every coordinate a SymPy symbol; scalings non-zero).

    Examples
    --------
    >>> spec = GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=2, d_model=4, d_k=2, d_v=2, d_ff=2))
    >>> generic_element(spec, "ffn-bias-transfer")["t"]
    Matrix([[t_0, t_1, t_2, t_3]])
    """
    out: dict[str, Any] = {}
    for comp, count, shape in _pieces(spec, factor):
        if comp == "D":
            out["D"] = sp.diag(*sp.symbols(f"s_:{shape[0]}", nonzero=True))
            continue
        blocks = []
        for i in range(count):
            tag = f"{comp}{i}_" if count > 1 else f"{comp}_"
            syms = sp.symbols(f"{tag}:{shape[0] * shape[1]}")
            blocks.append(sp.Matrix(shape[0], shape[1], list(syms)))
        out[comp] = blocks if count > 1 else blocks[0]
    return out
