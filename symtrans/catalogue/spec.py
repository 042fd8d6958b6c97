"""G for one architecture: :class:`GroupSpec`, its dimension formulas and the coordinates of its elements.

:meth:`GroupSpec.from_arch` collects the factors that
:mod:`symtrans.catalogue.factors` builds for an architecture; the dimension
of G on a scope (the ``gauge-*`` and ``norm-symmetries`` formulas of
:mod:`symtrans.formulas`, ``symtrans group``) is a sum of the factors'
dimensions. SymPy only: no torch, no engine.

Raises
------
SymtransError
    For an architecture with a feature whose effect on G is not modelled
    (``strict=True``), an unknown factor name or scope, a size past the exact
    digits the formulas compute, and a factor without coordinates.

See Also
--------
symtrans.catalogue.factors : the builders
symtrans.catalogue.model : the records (:class:`~symtrans.catalogue.model.Factor`, ...)
symtrans.group.action.act : the action of an element on weights
symtrans.formulas : the formulas that read G (``gauge-dimension``, ``group-dimension``, ...)

References
----------
The paper's §9 (the invariance group G and its dimension; the maximal gauge
group of multi-head attention, ``((GL(d_k))^H x (GL(d_v))^H) x| S_H`` per layer,
1,179,648 dimensions on BERT-base, is :meth:`GroupSpec.gauge_dimension_model`)
and §4 (LayerNorm, whose norms add the norm factors); the formalisation is
``/work/shared/paper/claims.md`` ("The invariance group G (§9)").

Examples
--------
>>> GroupSpec.from_arch("bert-base").gauge_dimension_model()
1179648
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy as sp

from symtrans.arch import Architecture, get_arch
from symtrans.catalogue.factors import factors_of
from symtrans.catalogue.model import (
    AXIS_SIZES,
    ROLES,
    SCOPE_TEXT,
    Factor,
    _axes,
    _size_json,
    layer_tensor_names,
    model_tensor_names,
)
from symtrans.errors import SymtransError, suggest
from symtrans.symbols import SYMBOLS
from symtrans.validate import check_exact_digits

__all__ = ["GroupSpec", "generic_element"]

S = SYMBOLS


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

        Raises
        ------
        SymtransError
            For an unknown preset or a bad config (from :func:`symtrans.arch.get_arch`), a feature whose
            effect on G is not modelled (unless ``strict=False``), rotary positions with an odd head width,
            and a factor whose exact size would pass ``MAX_EXACT_DIGITS``.

        See Also
        --------
        symtrans.catalogue.factors.factors_of : the builders this collects
        symtrans.arch.get_arch : the architecture it reads

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").factor("qk-gauge").dimension
        H*d_k**2
        """
        a = get_arch(arch)
        factors, missing = factors_of(a)
        factors = _per_layer(a, factors)
        if missing and strict:
            feature, reason = missing[0]
            raise SymtransError(f"{a.name}: the group of a model with {feature} is not modelled: {reason}")
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

    def names(self, kind: str | None = None, scope: str | None = None, role: str | None = None,
              paper: bool | None = None) -> list[str]:
        """Factor names, optionally of one kind, scope and role (:data:`~symtrans.catalogue.model.ROLES`), and
        only the paper's factors (``paper=True``) or only the toolkit's (``paper=False``).

        The one way to pick a family of factors: each factor declares its role
        and whether the paper lists it (:class:`~symtrans.catalogue.model.Factor`),
        so no caller lists factor names.

        Raises
        ------
        SymtransError
            For an unknown role.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").names("continuous", "layer")  # doctest: +NORMALIZE_WHITESPACE
        ['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'ffn-scaling', 'centring-shift',
         'ffn-bias-transfer', 'ffn-input-hyperplane']
        >>> GroupSpec.from_arch("bert-base").names(role="head-gauge")
        ['qk-gauge', 'vo-gauge']
        >>> GroupSpec.from_arch("bert-base").names("continuous", paper=True)
        ['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'ffn-scaling']
        >>> GroupSpec.from_arch("bert-base").names(role="gauge")
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: unknown factor role 'gauge'; did you mean 'head-gauge'?
        """
        if role is not None and role not in ROLES:
            raise SymtransError(suggest(role, tuple(ROLES), "factor role"))
        return [f.name for f in self.factors
                if (kind is None or f.kind == kind) and (scope is None or f.scope == scope)
                and (role is None or f.role == role) and (paper is None or f.paper == paper)]

    def layer_expression(self) -> sp.Expr:
        """Continuous dimension per layer, as an expression in the canonical symbols.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").layer_expression()
        H*d_k**2 + H*d_k + H*d_v**2 + 2*H*d_v + 2*d_ff + d_model + 2
        """
        return sp.Add(*[f.effective_dimension for f in self.factors if f.scope == "layer"])

    def layer_spec(self, i: int) -> GroupSpec:
        """G's factors as layer ``i`` has them: this spec, or on a NoPE layer the spec of the model without positions.

        Examples
        --------
        >>> spec = GroupSpec.from_arch("llama2-7b")
        >>> spec.layer_spec(0) is spec
        True
        """
        nope = self.arch.layer_nope()
        if nope is None or self.arch.rotary_at(i):
            return self
        return GroupSpec.from_arch(nope, strict=False)

    def layer_sum(self, names: tuple[str, ...] | None = None) -> sp.Expr:
        """The per-layer factors' dimensions (``names``, or all) summed over the layers: L times one layer's
        unless the layers differ (NoPE layers), then layer by layer.

        Examples
        --------
        >>> GroupSpec.from_arch("bert-base").layer_sum(("qk-gauge",))
        H*L*d_k**2
        """
        fs = [f for f in self.factors if f.scope == "layer" and (names is None or f.name in names)]
        if not any(f.per_layer for f in fs):
            return S["L"] * sp.Add(*[f.effective_dimension for f in fs])
        return sp.expand(sp.Add(*[f.layer_dimension(i) for f in fs for i in range(int(self.arch.L))]))

    def gauge_expression(self) -> sp.Expr:
        """Dimension of the per-head GL factors on (Q, K) and (V, O) of one layer.

        Examples
        --------
        >>> GroupSpec.from_arch("symbolic").gauge_expression()
        H*d_k**2 + H*d_v**2
        """
        return sp.Add(*[self.factor(n).effective_dimension for n in self.names(role="head-gauge")])

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
        expr = self.layer_sum()
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

    def factor_sizes(self, name: str, layer: int | None = None) -> list[int]:
        """Lie-algebra coordinates of one element of ``name``, piece by piece (concrete sizes only).

        ``layer``: the element on that layer (a NoPE layer's qk-gauge is the whole GL(d_k)).

        Examples
        --------
        >>> GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=2, d_k=384, d_v=384)).factor_sizes("key-bias-shift")
        [384, 384]
        """
        if layer is not None and self.layer_spec(layer) is not self:
            return self.layer_spec(layer).factor_sizes(name)
        f = self.factor(name)
        if f.coordinates is None:
            raise SymtransError(f"factor {name!r} is {f.kind} ({f.scope}): it has no Lie-algebra coordinates")
        return list(_coordinate_sizes(self.arch, f.coordinates))

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
        return _at_sizes(self.arch, expr)

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
        return self._value(self.layer_sum(tuple(self.names(role="head-gauge"))))

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
        gauges = self.names(role="head-gauge")
        return {
            "arch": a.name,
            "factors": [f.to_dict(a) for f in self.factors],
            "total_dimension": _size_json(self.total_expression(), a)["value"],
            "total_dimension_expression": str(self.total_expression()),
            "total_dimension_scope": "layers",
            "scopes": {name: {**_size_json(self.scope_expression(name), a), "covers": SCOPE_TEXT[name]}
                       for name in ("layers", "model")},
            "layer_dimension": _size_json(self.layer_expression(), a)["value"],
            **({"layer_dimensions": [_size_json(sp.Add(*[f.layer_dimension(i) for f in self.factors
                                                         if f.scope == "layer"]), a)["value"]
                                     for i in range(int(a.L))]} if any(f.per_layer for f in self.factors) else {}),
            "gauge_dimension": _size_json(self.layer_sum(tuple(gauges)), a)["value"],
            "gauge_dimension_counts": f"L x ({' + '.join(gauges)}): the per-head GL factors only",
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


def _per_layer(a: Architecture, factors: list[Factor]) -> list[Factor]:
    """The per-layer factors with their dimension on each layer, where NoPE layers make the layers differ.

    A NoPE layer (SmolLM3) computes what a layer of the same model without
    positions computes, so each of its factors is that model's
    (:meth:`~symtrans.arch.Architecture.layer_nope`): the qk-gauge is the whole
    GL(d_k) per key/value head there, the rotary commutant on the other layers.

    Examples
    --------
    >>> _per_layer(get_arch("llama2-7b"), [])
    []
    """
    nope = a.layer_nope()
    if nope is None:
        return factors
    if not isinstance(a.L, int):
        raise SymtransError(f"{a.name}: NoPE layers need a concrete number of layers")
    other = {f.name: f for f in factors_of(nope)[0] if f.scope == "layer"}
    out = []
    for f in factors:
        g = other.get(f.name)
        if f.scope != "layer" or g is None or g.effective_dimension == f.effective_dimension:
            out.append(f)
            continue
        dims = tuple(f.effective_dimension if a.rotary_at(i) else g.effective_dimension for i in range(a.L))
        where = [i for i in range(a.L) if not a.rotary_at(i)]
        shown = ", ".join(map(str, where[:8])) + (", ..." if len(where) > 8 else "")
        out.append(dataclasses.replace(f, per_layer=dims, group=f"{f.group} on the rotary layers; {g.group} on the "
                                       f"{len(where)} NoPE layers ({shown})"))
    missing = [g for name, g in other.items() if name not in {f.name for f in factors}]
    if missing:
        raise SymtransError(f"{a.name}: factor {missing[0].name!r} of a NoPE layer has no counterpart on the rotary "
                            "layers (not modelled)")
    return out


def _pieces(spec: GroupSpec, name: str) -> list[tuple[str, int, tuple[int, int]]]:
    """(component, count, block shape) of a factor whose element is built from its coordinates, at concrete sizes.

    Read from the factor's :class:`~symtrans.catalogue.model.Piece` list; a factor
    without coordinates (discrete, data-side) or whose element is a matrix the
    engines build (the per-head gauges) has none.

    Examples
    --------
    >>> _pieces(GroupSpec.from_arch("bert-base"), "ffn-bias-transfer")
    [('t', 1, (1, 768))]
    >>> _pieces(GroupSpec.from_arch("bert-base"), "qk-gauge")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: no coordinates for factor 'qk-gauge'
    """
    f = spec.factor(name)
    if f.coordinates is None or any(p.how == "matrix" for p in f.coordinates):
        raise SymtransError(f"no coordinates for factor {name!r}")
    return list(_piece_shapes(spec.arch, f.coordinates))


@lru_cache(maxsize=4096)
def _piece_shapes(arch: Architecture, pieces: tuple[Any, ...]) -> tuple[tuple[str, int, tuple[int, int]], ...]:
    """:func:`_pieces` at ``arch``'s sizes, substituted once a process (pure in the frozen arguments)."""
    value = lambda x: int(_at_sizes(arch, x))  # noqa: E731
    return tuple((p.component, value(p.count), (value(p.shape[0]), value(p.shape[1]))) for p in pieces)


def generic_element(spec: GroupSpec, factor: str) -> dict[str, Any]:
    """A generic symbolic element of a norm factor (every coordinate a SymPy symbol; scalings non-zero).

    Examples
    --------
    >>> from symtrans.arch import get_arch
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


@lru_cache(maxsize=4096)
def _coordinate_sizes(arch: Architecture, pieces: tuple[Any, ...]) -> tuple[int, ...]:
    """The coordinate counts of a factor's pieces at ``arch``'s sizes (:meth:`GroupSpec.factor_sizes`).

    A pure function of the (frozen) architecture and pieces, substituted once a process: group.complete reads
    it at every tangent evaluation, and each ablation of group.breaking builds a new spec of the same factors.

    Examples
    --------
    >>> spec = GroupSpec.from_arch("bert-base")  # the query/key gauge: GL(d_k) at each of the H = 12 heads
    >>> _coordinate_sizes(spec.arch, spec.factor("qk-gauge").coordinates) == (64 * 64,) * 12
    True
    """
    value = lambda x: int(_at_sizes(arch, x))  # noqa: E731
    return tuple(value(p.coordinate_count) for p in pieces for _ in range(value(p.count)))


def _at_sizes(arch: Architecture, expr: Any) -> sp.Expr:
    """``expr`` with ``arch``'s sizes substituted (symbols the architecture leaves free stay).

    Examples
    --------
    >>> from symtrans.symbols import SYMBOLS as S
    >>> _at_sizes(get_arch("bert-base"), S["H"] * S["d_k"])
    768
    """
    return sp.sympify(expr).subs(arch.substitutions())
