"""The data model of the invariance group G: weight layout, tag tables, factors.

A :class:`Factor` of G carries its size (a SymPy expression in the canonical
symbols of :mod:`symtrans.symbols`), the features that break or shrink it
(:class:`Breaking`), its *tag table* (one :class:`AxisTag` per axis of every
weight tensor it acts on; :data:`ACTION_TEXT` names the kinds of action) and
the Lie-algebra coordinates of its elements (:class:`Piece`). Data only:
nothing here builds a factor or acts on a weight.

Weight layout (per layer; the leading ``head``/``kv`` axis indexes per-head
blocks, as in :mod:`symtrans.numeric`): ``W_Q[h]`` d_model x d_k, ``b_Q[h]``,
``W_K[g]``, ``b_K[g]``, ``W_V[g]`` d_model x d_v, ``b_V[g]``, ``W_O[h]``
d_v x d_model, ``b_O``, ``ln1_w``, ``ln1_b``, ``W_gate`` and ``b_gate`` (gated
FFN only), ``W_in`` d_model x d_ff, ``b_in``, ``W_out`` d_ff x d_model,
``b_out``, ``ln2_w``, ``ln2_b``; ``g`` is the key/value head of query head
``h`` (``g = h`` without grouped-query attention). Model tensors: ``word``,
``pos``, ``type``, ``emb_ln_w``, ``emb_ln_b``, ``final_ln_w``, ``final_ln_b``.
Data: ``X`` (tokens x d_model), the layer or model input.

Raises
------
SymtransError
    For a tag row with an unknown tensor, side or kind of action, and for a
    coordinate piece of an unknown kind.

See Also
--------
symtrans.catalogue.factors : the builders that fill these records, one family of factors each
symtrans.catalogue.spec.GroupSpec : G for one architecture
symtrans.group.action.act : the action that reads a tag table

References
----------
The paper's §9 (the Symmetry-Breaking Framework: the collapse phenomena as
orbits of the invariance group G), as formalised in
``/work/shared/paper/claims.md`` ("The invariance group G (§9)") and
``docs/group.md``.

Examples
--------
>>> t = AxisTag("W_K", 2, "qk-gauge", "right", "inverse_transpose", index="kv")
>>> t.describe(), t.axis_name
('W_K[g] axis d_k: right by g^-T', 'qk')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.arch import Architecture
from symtrans.errors import SymtransError, suggest
from symtrans.symbols import SYMBOLS

__all__ = ["AxisTag", "Breaking", "Factor", "Piece", "ACTION_TEXT", "LAYER_AXES", "MODEL_AXES", "AXIS_SIZES",
           "ROLES", "SCOPE_TEXT", "layer_tensor_names", "model_tensor_names", "unused_position_rows", "unread_rows"]

S = SYMBOLS

ROLES = {
    "head-gauge": "a per-head GL gauge (the maximal gauge group of MHA): relate fits it from the heads' products "
                  "(qk-gauge, vo-gauge)",
    "hidden-scaling": "a diagonal scaling of the FFN hidden units, undone by W_out (ffn-scaling, gate-scaling)",
    "residual": "a map Q of the residual stream, fitted on the embedding table; the last hidden state moves by Q "
                "(residual-permutation, -rotation)",
    "norm-scaling": "a diagonal rescaling of a norm's gain, undone by its readers or by the other gain of a pair "
                    "(ln1-, ln2-, final-norm-scaling, qk-norm-gain-trade)",
    "head-gain-trade": "a diagonal scaling per key/value head of a full-width QK-norm's per-head query gains, undone "
                       "on that key head's gains (OLMo 2's qk-norm-gain-trade): fitted after the heads are matched",
    "unread": "a move of embedding-table rows that no unpadded input reads (unused-position-rows, unread-pad-row): "
              "no activation moves, only the stored rows",
}
"""What a factor is for the code that treats a family of factors alike (:attr:`Factor.role`; empty: none)."""

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
    # OLMo 2: the query (key) norm over every head's entries at once: its gain, per head like W_Q (W_K)
    "q_norm_full_w": ("head", "qk"), "k_norm_full_w": ("kv", "qk"),
}
#: model-level tensors (embeddings and norms outside the layers) and data
MODEL_AXES: dict[str, tuple[str, ...]] = {
    "word": ("vocab", "model"), "pos": ("position", "model"), "type": ("type", "model"),
    "emb_ln_w": ("model",), "emb_ln_b": ("model",),
    "final_ln_w": ("model",), "final_ln_b": ("model",), "lm_head": ("model", "vocab"),
    # an encoder's pooler (BERT, RoBERTa): tanh(h_0 W + b) of the first token's last hidden state
    "pooler_w": ("model", "pooled"), "pooler_b": ("pooled",),
    "X": ("token", "model"),
}
#: axis name -> size symbol name
AXIS_SIZES: dict[str, str] = {"head": "H", "kv": "H_kv", "model": "d_model", "pooled": "d_model", "qk": "d_k", "v": "d_v",
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
    >>> from symtrans.arch import get_arch
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
        if t in ("q_norm_w", "k_norm_w") and (not arch.qk_norm or arch.qk_norm_full) \
                or t in ("ln1_post_w", "ln2_post_w") and not arch.post_norms:
            continue
        if t in ("q_norm_full_w", "k_norm_full_w") and not arch.qk_norm_full:
            continue
        if t in ("ln1_w", "ln1_b", "ln2_w", "ln2_b") and not arch.pre_norms:  # OLMo 2: post-norms only
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
    >>> from symtrans.arch import get_arch
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


def unused_position_rows(arch: Architecture) -> int:
    """Leading rows of a learned position table that no input reads (RoBERTa: 2, positions start at padding_idx + 1).

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> unused_position_rows(get_arch("roberta-base")), unused_position_rows(get_arch("bert-base"))
    (2, 0)
    """
    t, m = arch.position_table, arch.max_positions
    if arch.positional != "learned" or not isinstance(t, int) or not isinstance(m, int):
        return 0
    return max(t - m, 0)


def unread_pad_id(arch: Architecture) -> int | None:
    """The pad token id whose word row unpadded input never reads (RoBERTa: ``padding_idx``), else ``None``.

    RoBERTa numbers positions from ``padding_idx + 1`` and gives a pad token
    the position ``padding_idx`` (transformers' ``create_position_ids_from_input_ids``):
    the pad id marks padding, so unpadded input never contains it, and its word
    row (like the leading position rows) enters no output. The id is the last
    unused position row. Families whose pad token is an ordinary token (BERT,
    GPT-2, Llama: only the attention mask treats padding) have none.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> unread_pad_id(get_arch("roberta-base")), unread_pad_id(get_arch("bert-base"))
    (1, None)
    """
    k = unused_position_rows(arch)
    return k - 1 if k else None


def unread_rows(arch: Architecture) -> dict[str, tuple[int, ...]]:
    """The rows of each embedding table that no unpadded input reads: what G's role-``unread`` factors move.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> unread_rows(get_arch("roberta-base")), unread_rows(get_arch("bert-base"))
    ({'pos': (0, 1), 'word': (1,)}, {})
    """
    out: dict[str, tuple[int, ...]] = {}
    k = unused_position_rows(arch)
    if k:
        out["pos"] = tuple(range(k))
    pad = unread_pad_id(arch)
    if pad is not None:
        out["word"] = (pad,)
    return out


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
        if self.how not in ACTION_TEXT:
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
        what = ACTION_TEXT[self.how](self)
        side = {"left": "left by", "right": "right by", "index": "reorder by", "add": "add"}[self.side]
        return f"{self.tensor}{head} axis {size}: {side} {what}"


def _axes(tensor: str) -> tuple[str, ...]:
    if tensor in LAYER_AXES:
        return LAYER_AXES[tensor]
    if tensor in MODEL_AXES:
        return MODEL_AXES[tensor]
    raise SymtransError(suggest(tensor, list(LAYER_AXES) + list(MODEL_AXES), "tensor"))


def _image_text(t: AxisTag) -> str:
    c = t.component
    if t.index:
        return f"-{c} {t.via}[{'h' if t.index == 'head' else 'g'}]"
    return f"-sum_h {c}_h {t.via}[h]" if t.via == "W_O" else f"-{c} {t.via}"


def _vias(t: AxisTag) -> list[str]:
    return (t.via or "").split(",")


#: Every kind of action (an :class:`AxisTag`'s ``how``) and how a tag table describes it; what each does to a
#: block is the action engine's (:data:`symtrans.group.action.ACTIONS`).
ACTION_TEXT: dict[str, Callable[[AxisTag], str]] = {
    "element": lambda t: t.component,
    "inverse": lambda t: f"{t.component}^-1",
    "inverse_transpose": lambda t: f"{t.component}^-T",
    "permutation": lambda t: f"permutation {t.component}",  # the blocks are reordered
    "translate": lambda t: t.component,
    "translate_image": _image_text,
    "conjugate_diagonal": lambda t: f"diag({t.component}^-1 diag(.) {t.component})",
    "translate_ones": lambda t: f"{t.component} 1^T (a multiple of the all-ones row)",
    "translate_neg": lambda t: f"-{t.component}",
    "hyperplane_weight": lambda t: f"(1/{t.via})^T {t.component}",
    "hyperplane_bias": lambda t: f"-<{_vias(t)[-1]}, 1/{_vias(t)[0]}> {t.component}",
    "translate_rows": lambda t: f"{t.component} to every row",
    "translate_rows_neg": lambda t: f"-{t.component} to every row",
    "conjugate_gain": lambda t: f"diag({t.via})^-1 {t.component}^-1 diag({t.via})",
    "conjugate_gain_row": lambda t: f"diag({t.via})^-1 {t.component} diag({t.via})",
    "hyperplane_head": lambda t: (f"(1/{_vias(t)[0]})^T v, v = -{t.component} W / <{_vias(t)[-1]} + "
                                  f"{t.component}, 1/{_vias(t)[0]}>"),
    "translate_leading_rows": lambda t: f"{t.component} to the leading (unused) rows",
}


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
    :meth:`symtrans.catalogue.spec.GroupSpec.factor_sizes`. ``how`` says how the element is made from
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

    A factor declares once what other code would otherwise decide from its
    name: ``role`` (one of :data:`ROLES`, empty for none), the family it
    belongs to (the per-head gauges, the hidden-unit scalings, the residual
    maps, the norm gain scalings), and ``paper``, whether it is a factor of
    the paper's G (§9) rather than one the toolkit adds. Callers select by
    them (:meth:`symtrans.catalogue.spec.GroupSpec.names`); a new factor
    sets them in its builder and no caller changes.

    Raises
    ------
    SymtransError
        For a role not in :data:`ROLES`.

    Examples
    --------
    >>> from symtrans.catalogue import GroupSpec
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
    # per layer, the dimension that counts when the layers differ (SmolLM3's NoPE layers among rotary ones); empty:
    # ``effective_dimension`` on every layer
    per_layer: tuple[sp.Expr, ...] = ()
    role: str = ""  # the family it belongs to, one of ROLES (empty: none); callers ask this, never the name
    paper: bool = False  # a factor of the paper's G (§9, claims.md); False: one the toolkit adds (the norms' ...)

    def __post_init__(self) -> None:
        if self.role and self.role not in ROLES:
            raise SymtransError(suggest(self.role, tuple(ROLES), "factor role"))

    def layer_dimension(self, i: int) -> sp.Expr:
        """The dimension that counts on layer ``i`` (``effective_dimension`` unless the layers differ).

        Examples
        --------
        >>> from symtrans.catalogue import GroupSpec
        >>> GroupSpec.from_arch("bert-base").factor("ffn-scaling").layer_dimension(3)
        0
        """
        return self.per_layer[i] if self.per_layer else self.effective_dimension

    @property
    def status(self) -> str:
        """``broken``, ``shrunk`` or ``exact`` on this architecture.

        Examples
        --------
        >>> from symtrans.catalogue import GroupSpec
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
        >>> from symtrans.catalogue import GroupSpec
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
        >>> from symtrans.catalogue import GroupSpec
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
        >>> from symtrans.catalogue import GroupSpec
        >>> GroupSpec.from_arch("bert-base").factor("key-bias-shift").acts_on()
        ['b_K[g] axis d_k: add u']
        """
        return [t.describe() for t in self.tags] + list(self.data_tags)

    def to_dict(self, arch: Architecture | None = None) -> dict[str, Any]:
        """JSON-ready dict (``dimension`` for continuous factors, ``order`` for discrete).

        Examples
        --------
        >>> from symtrans.catalogue import GroupSpec
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
        if self.per_layer:
            out["per_layer"] = [_size_json(sp.sympify(d), arch)["value"] for d in self.per_layer]
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
