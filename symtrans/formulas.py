"""The formula registry: every derived quantity, defined once, with provenance.

A :class:`Formula` builds a SymPy expression in the canonical dimension symbols
(:mod:`symtrans.symbols`), says what it counts (for a dimension: which map's
fibre, which group, which subspace), where it comes from (a claim of the paper,
or the toolkit's own formalisation and why), and under which assumptions.
Evaluating it for an architecture substitutes the sizes and gives an exact
integer or rational; floats appear only for display.

Counting conventions used throughout:

* parameters: every trainable tensor entry, biases included where the
  architecture has them;
* FLOPs: matrix multiplications only, one multiply-accumulate = 2 FLOPs, per
  token per layer; biases, softmax, norms and activations are not counted;
  attention scores are counted densely over all ``n`` keys (a causal mask
  saves nothing in this convention).

Examples
--------
>>> formula("recovery-ambiguity", arch="bert-base").value
360448
>>> formula("ffn-flop-share", arch="bert-base", n=512).value
3/5
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import sympy as sp

from symtrans.arch import PAPER_N, Architecture, default_n, get_arch
from symtrans.errors import SymtransError, suggest
from symtrans.symbols import AUX_NAMES, LATEX_NAMES, SYMBOLS
from symtrans.validate import MAX_SIZE, check_exact_digits

__all__ = [
    "Formula", "FormulaValue", "Provenance", "FORMULAS", "register", "get_formula",
    "formula", "formula_names", "aux_defaults", "FLOP_CONVENTION",
]

FLOP_CONVENTION = (
    "matrix multiplications only; one multiply-accumulate = 2 FLOPs; per token per layer; "
    "biases, softmax, norms and activations not counted; attention scores counted densely over n keys"
)

S = SimpleNamespace(**SYMBOLS)


@dataclass(frozen=True)
class Provenance:
    """Where a formula comes from: a claim of the paper, or the toolkit's formalisation.

    Examples
    --------
    >>> Provenance("paper", claim="thm-recovery", section="§7.3").describe()
    'paper: thm-recovery (§7.3)'
    >>> Provenance("toolkit", claim="pgop", reason="parametrisation not in the text we hold").describe()
    'toolkit formalisation of pgop: parametrisation not in the text we hold'
    """

    origin: str  # "paper" | "toolkit"
    claim: str | None = None
    section: str | None = None
    reason: str | None = None

    def describe(self) -> str:
        """Return a one-line description.

        Examples
        --------
        >>> Provenance("toolkit", reason="counting convention").describe()
        'toolkit formalisation: counting convention'
        """
        if self.origin == "paper":
            where = f" ({self.section})" if self.section else ""
            return f"paper: {self.claim}{where}"
        about = f" of {self.claim}" if self.claim else ""
        return f"toolkit formalisation{about}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> Provenance("paper", claim="prop-6.3", section="§6.1").to_dict()["claim"]
        'prop-6.3'
        """
        return {"origin": self.origin, "claim": self.claim, "section": self.section,
                "reason": self.reason, "text": self.describe()}


Builder = Callable[[SimpleNamespace, Architecture], sp.Expr]


@dataclass(frozen=True)
class Formula:
    """A named derived quantity: expression builder, meaning, provenance, assumptions.

    Examples
    --------
    >>> f = get_formula("recovery-ambiguity-per-token")
    >>> f.expression()
    d_v*(H - 1)
    """

    name: str
    summary: str
    kind: str  # dimension | count | ratio | flops | parameters | order
    counts: str
    provenance: Provenance
    builder: Builder
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def expression(self, arch: Architecture | str = "symbolic") -> sp.Expr:
        """Return the expression in the canonical symbols for ``arch``'s structure.

        The architecture's flags (biases, grouped-query attention, gated FFN)
        shape the expression; its sizes are not substituted.

        Examples
        --------
        >>> get_formula("params-ffn").expression("bert-base")
        2*d_ff*d_model + d_ff + d_model
        >>> get_formula("params-ffn").expression("minilm-l6-h384") == get_formula("params-ffn").expression()
        True
        """
        return sp.sympify(self.builder(S, get_arch(arch)))

    def evaluate(self, arch: Architecture | str, **sizes: int) -> FormulaValue:
        """Evaluate for an architecture; ``sizes`` override sizes or set aux ranks.

        Examples
        --------
        >>> get_formula("wo-fibre").evaluate("bert-base", rank_WO=700).value
        34816
        >>> get_formula("wo-fibre").evaluate("bert-base", rank_WO=0).value  # W_O = 0: every direction is lost
        393216
        >>> get_formula("wo-fibre").evaluate("bert-base", rank_WO=769)
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: rank_WO=769 exceeds its largest possible value Min(d_model, H*d_v) = 768 for bert-base
        """
        aux = {k: v for k, v in sizes.items() if k in AUX_NAMES}
        arch_sizes = {k: v for k, v in sizes.items() if k not in AUX_NAMES}
        for key, value in sizes.items():
            if key not in SYMBOLS:
                raise SymtransError(suggest(key, SYMBOLS, "symbol"))
            low = 0 if key in AUX_NAMES else 1  # a rank may be 0 (all-zero W_O); a size may not
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                what = "a non-negative" if low == 0 else "a positive"
                raise SymtransError(f"{key} must be {what} integer, got {value!r}"[:200])
            if value > MAX_SIZE:
                raise SymtransError(f"{key}: sizes above {MAX_SIZE} are refused (no architecture is that large)")
        a = get_arch(arch, **arch_sizes)
        expr = self.expression(a)
        arch_subs = a.substitutions()
        defaults = aux_defaults(a)
        aux_values: dict[sp.Symbol, sp.Expr] = {}
        sources: dict[str, str] = {}
        for name in AUX_NAMES:  # rank_X first: the dim_sumR default refers to it
            sym = SYMBOLS[name]
            if name in aux:
                bound = defaults[name][0].subs(aux_values).subs(arch_subs)
                if bound.is_Integer and aux[name] > bound:  # the generic value is the largest possible
                    raise SymtransError(f"{name}={aux[name]} exceeds its largest possible value "
                                        f"{defaults[name][0]} = {bound} for {a.name}")
                aux_values[sym] = sp.Integer(aux[name])
                sources[name] = "set by user"
            else:
                aux_values[sym] = defaults[name][0].subs(aux_values)
                sources[name] = f"generic default: {defaults[name][1]}"
        used = {str(x) for x in expr.free_symbols}
        if "dim_sumR" in used and "dim_sumR" not in aux:
            used.add("rank_X")
        subs: dict[str, dict[str, Any]] = {}
        for name in AUX_NAMES:
            if name in used:
                v = aux_values[SYMBOLS[name]].xreplace(arch_subs)
                subs[name] = {"value": int(v) if v.is_Integer else str(v), "source": sources[name]}
        for sym, value in arch_subs.items():
            if str(sym) in used or any(sym in aux_values[SYMBOLS[n]].free_symbols for n in subs if n in AUX_NAMES):
                subs[str(sym)] = {"value": value, "source": "set by user" if str(sym) in arch_sizes
                                  else _n_source(a) if str(sym) == "n" else f"architecture {a.name}"}
        # xreplace, not subs: every key is a Symbol and every value a number or an expression in the sizes, so
        # the plain replacement (then SymPy's automatic evaluation) is the substitution, at a fraction of the cost
        with_aux = expr.xreplace(aux_values)
        check_exact_digits(with_aux, arch_subs, f"formula {self.name}")  # before SymPy computes it
        substituted = with_aux.xreplace(arch_subs)
        value = substituted if not substituted.free_symbols else None
        return FormulaValue(formula=self, arch=a, expression=expr, substituted=substituted,
                            value=value, substitutions=subs)


def _n_source(a: Architecture) -> str:
    """Where ``n`` came from when the user did not set it: the default (:func:`symtrans.arch.default_n`) or the arch."""
    if isinstance(a.max_positions, int) and a.n == default_n(a.max_positions):
        return (f"default n = {a.n} (the paper's n = {PAPER_N}, or the context length if shorter; "
                "set another with --n / n=)")
    return f"architecture {a.name}"


def aux_defaults(arch: Architecture) -> dict[str, tuple[sp.Expr, str]]:
    """Return the generic default of each auxiliary rank, with the reason.

    Examples
    --------
    >>> aux_defaults(get_arch("symbolic"))["rank_WO"][0]
    Min(d_model, H*d_v)
    """
    return dict(_aux_default_exprs())


@functools.cache
def _aux_default_exprs() -> tuple[tuple[str, tuple[sp.Expr, str]], ...]:
    """The defaults do not depend on the architecture; building SymPy Min terms is slow, so once."""
    return (
        ("rank_X", (sp.Min(S.n, S.d_model), "full rank min(n, d_model) for a generic input")),
        ("rank_WO", (sp.Min(S.H * S.d_v, S.d_model), "full rank min(H d_v, d_model) for generic weights")),
        ("dim_sumR", (sp.Min(S.d_model, S.H * sp.Min(S.rank_X, S.d_v)),
                      "head subspaces in general position: min(d_model, H min(rank X, d_v))")),
    )


@dataclass(frozen=True)
class FormulaValue:
    """A formula evaluated for one architecture: expression, substitutions, exact value.

    Examples
    --------
    >>> v = formula("recovery-ambiguity", arch="bert-base")
    >>> v.value, v.substitutions["n"]["value"]
    (360448, 512)
    >>> v.to_json()["value"]
    360448
    >>> formula("pgop-overhead", arch="bert-base").to_json()["value"]  # params-pgop / params-wo
    '9228/589824'
    >>> formula("pgop-overhead", arch="bert-base").value
    769/49152
    """

    formula: Formula
    arch: Architecture
    expression: sp.Expr
    substituted: sp.Expr
    value: sp.Expr | None
    substitutions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def json_value(self) -> int | str | None:
        """Return the value as JSON: an int, a ``"p/q"`` string, or None if symbolic.

        Examples
        --------
        >>> formula("ffn-flop-share", arch="bert-base", n=128).json_value()  # flops-ffn / flops-layer
        '9437184/14548992'
        """
        if self.value is None:
            return None
        if self.value.is_Integer:
            return int(self.value)
        if self.value.is_Rational:
            return _ratio_str(self.formula, self.arch, self.value)
        return str(self.value)

    def approx(self) -> float | None:
        """Return a float for display only, or None if symbolic.

        Examples
        --------
        >>> round(formula("ffn-flop-share", arch="bert-base", n=128).approx(), 4)
        0.6486
        """
        return None if self.value is None else float(self.value)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON object printed by ``symtrans formula --format json``.

        Examples
        --------
        >>> sorted(formula("head-permutations", arch="gpt2").to_json())[:4]
        ['approx', 'arch', 'assumptions', 'counts']
        """
        f = self.formula
        return {
            "name": f.name,
            "arch": self.arch.name,
            "expression": str(self.expression),
            "latex": sp.latex(self.expression, symbol_names=_LATEX_SYMBOLS),
            "substituted": str(self.substituted),
            "value": self.json_value(),
            "approx": self.approx(),
            "kind": f.kind,
            "summary": f.summary,
            "counts": f.counts,
            "provenance": f.provenance.to_dict(),
            "assumptions": list(f.assumptions),
            "notes": list(f.notes),
            "substitutions": self.substitutions,
        }

    def latex(self) -> str:
        """Return ``expression = value`` as LaTeX.

        Examples
        --------
        >>> formula("recovery-ambiguity-per-token", arch="bert-base").latex()
        'd_{v} \\\\left(H - 1\\\\right) = 704'
        """
        lhs = sp.latex(self.expression, symbol_names=_LATEX_SYMBOLS)
        rhs = sp.latex(self.value if self.value is not None else self.substituted,
                       symbol_names=_LATEX_SYMBOLS)
        return lhs if lhs == rhs else f"{lhs} = {rhs}"

    def _repr_latex_(self) -> str:
        return f"${self.latex()}$"

    def text(self) -> str:
        """Return the human-readable block printed by ``symtrans formula``.

        Examples
        --------
        >>> print(formula("mha-rank-bound", arch="bert-base").text().splitlines()[0])
        mha-rank-bound  [bert-base]
        """
        f = self.formula
        lines = [f"{f.name}  [{self.arch.name}]", f"  {f.summary}",
                 f"  expression:    {self.expression}"]
        if self.substitutions:
            subs = ", ".join(f"{k}={v['value']}" for k, v in self.substitutions.items())
            lines.append(f"  substitutions: {subs}")
        n = self.substitutions.get("n")
        lines.append(f"  n:             {n['value']}, {n['source']}" if n else
                     "  n:             not used (this value does not depend on the sequence length)")
        if self.value is None:
            lines.append(f"  value:         {self.substituted}  (symbolic: free sizes remain)")
        else:
            approx = ""
            shown = _long_str(self.json_value())
            if not self.value.is_Integer:
                approx = f"  (~ {float(self.value):.6g})"
            elif len(shown) > 24:
                approx = f"  (~ {shown[0]}.{shown[1:6]}e+{len(shown) - 1}; {len(shown)} digits)"
            if len(shown) > 60:
                shown = shown[:24] + "..." + shown[-12:]
            lines.append(f"  value:         {shown}{approx}")
        lines.append(f"  counts:        {f.counts}")
        lines.append(f"  provenance:    {f.provenance.describe()}")
        for a in f.assumptions:
            lines.append(f"  assumes:       {a}")
        for note in f.notes:
            lines.append(f"  note:          {note}")
        return "\n".join(lines)


_LATEX_SYMBOLS = {SYMBOLS[k]: v for k, v in LATEX_NAMES.items()}


def _long_str(value: Any) -> str:
    """str() that also works for integers beyond Python's 4300-digit conversion limit."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return str(value)
    finally:
        sys.set_int_max_str_digits(old)


def _ratio_str(f: Formula, arch: Architecture, value: sp.Rational) -> str:
    """Shares are shown as unreduced part/whole when the formula provides both."""
    parts = _RATIO_PARTS.get(f.name)
    if parts is not None:
        num, den = (get_formula(p).evaluate(arch).value for p in parts)
        if num is not None and den is not None and sp.Rational(num, den) == value:
            return f"{int(num)}/{int(den)}"
    return f"{value.p}/{value.q}"


# --------------------------------------------------------------------------- registry
FORMULAS: dict[str, Formula] = {}
_RATIO_PARTS: dict[str, tuple[str, str]] = {}


def register(f: Formula, ratio_of: tuple[str, str] | None = None) -> Formula:
    """Add a formula to the registry; a duplicate name is an error.

    Examples
    --------
    >>> register(get_formula("mha-rank-bound"))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: formula 'mha-rank-bound' is already registered
    """
    if f.name in FORMULAS:
        raise SymtransError(f"formula {f.name!r} is already registered")
    FORMULAS[f.name] = f
    if ratio_of:
        _RATIO_PARTS[f.name] = ratio_of
    return f


def get_formula(name: str) -> Formula:
    """Return the registered formula called ``name`` (with suggestions if unknown).

    Examples
    --------
    >>> get_formula("wo-fibre").kind
    'dimension'
    >>> get_formula("recovery")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown formula 'recovery'; did you mean 'recovery-ambiguity' or 'recovery-ambiguity-model'?
    """
    try:
        return FORMULAS[name]
    except KeyError:
        raise SymtransError(suggest(name, FORMULAS, "formula")) from None


def formula_names() -> list[str]:
    """Return the registered names in registration order.

    Examples
    --------
    >>> formula_names()[0]
    'recovery-ambiguity'
    """
    return list(FORMULAS)


def formula(name: str, arch: Architecture | str = "bert-base", **sizes: int) -> FormulaValue:
    """Evaluate the formula ``name`` for ``arch`` with optional size overrides.

    Examples
    --------
    >>> formula("recovery-ambiguity-model", arch="bert-base").value
    4325376
    >>> formula("gauge-dimension-model", arch="bert-base").value
    1179648
    >>> formula("recovery-ambiguity", arch="symbolic").value is None
    True
    """
    if not isinstance(name, str):
        raise SymtransError(f"formula name: expected a string, got {type(name).__name__}")
    return get_formula(name).evaluate(arch, **sizes)


# --------------------------------------------------------------------------- helpers
def _kv(s: SimpleNamespace, a: Architecture) -> sp.Expr:
    """Key/value head count: H itself unless grouped-query attention is present."""
    return s.H if a.H_kv == a.H else s.H_kv


def _bias(a: Architecture) -> int:
    return 1 if a.bias else 0


def _norm_params(s: SimpleNamespace, a: Architecture) -> sp.Expr:
    return 2 * s.d_model if a.norm == "layernorm" else s.d_model


def _params_attention(s, a):
    b, kv = _bias(a), _kv(s, a)
    qkv = 1 if a.bias or a.qkv_bias else 0  # Qwen2: biases on Q, K and V only (qkv_bias), not on O
    q = s.d_model * s.H * s.d_k + qkv * s.H * s.d_k
    k = s.d_model * kv * s.d_k + qkv * kv * s.d_k
    v = s.d_model * kv * s.d_v + qkv * kv * s.d_v
    o = s.H * s.d_v * s.d_model + b * s.d_model
    return q + k + v + o


def _params_ffn(s, a):
    b = _bias(a)
    if a.ffn == "gated":
        return 3 * s.d_model * s.d_ff + b * (2 * s.d_ff + s.d_model)
    return 2 * s.d_model * s.d_ff + b * (s.d_ff + s.d_model)


def _params_layernorm(s, a):
    # two norms per layer; four with post-norms on the sub-block outputs (Gemma 3), plus the per-head query and
    # key norms' gains (one d_k vector each per layer, shared by the heads) with QK-norm
    count = (2 if a.pre_norms else 0) + (2 if a.post_norms else 0)
    qk = (s.H + s.H_kv) * s.d_k if a.qk_norm_full else 2 * s.d_k  # OLMo 2: gains over the full q and k widths
    return count * _norm_params(s, a) + (qk if a.qk_norm else 0)


def _params_layer(s, a):
    return _params_attention(s, a) + _params_ffn(s, a) + _params_layernorm(s, a)


def _params_embeddings(s, a):
    total = s.vocab_size * s.d_model + a.type_vocab_size * s.d_model
    if a.positional == "learned":
        offset = 0
        if isinstance(a.position_table, int) and isinstance(a.max_positions, int):
            offset = a.position_table - a.max_positions
        total += (s.max_positions + offset) * s.d_model
    if a.embedding_norm:
        total += _norm_params(s, a)
    return total


def _params_model(s, a):
    total = _params_embeddings(s, a) + s.L * _params_layer(s, a)
    if a.pooler:
        total += s.d_model * s.d_model + s.d_model
    if a.final_norm:
        total += _norm_params(s, a)
    return total


def _flops_attention(s, a):
    kv = _kv(s, a)
    projections = 2 * s.d_model * (s.H * s.d_k + kv * s.d_k + kv * s.d_v) + 2 * s.H * s.d_v * s.d_model
    scores_and_mix = 2 * s.n * s.H * (s.d_k + s.d_v)
    return projections + scores_and_mix


def _flops_ffn(s, a):
    return (6 if a.ffn == "gated" else 4) * s.d_model * s.d_ff


def _group(a):
    from symtrans.catalogue import GroupSpec  # no torch: the catalogue of G is symbolic only

    return GroupSpec.from_arch(a, strict=False)


def _gauge_layer(s, a):
    return _group(a).gauge_expression()


def _group_scope(scope):
    def build(s, a):
        return _group(a).scope_expression(scope)

    return build


def _norm_symmetries(s, a):
    spec = _group(a)  # the paper's factors summed layer by layer (a NoPE layer's qk-gauge is larger)
    paper = spec.layer_sum(tuple(spec.names(paper=True)))
    return sp.expand(spec.scope_expression("layers") - paper)


def _head_permutations(s, a):
    return _group(a).factor("S_H").order


def _pgop_params(s, a):
    return s.H * (s.d_model + 1)


def _contracted(s, a):
    return s.H * sp.Min(s.rank_X, s.d_v) - s.dim_sumR


_SUM_MAP = "the summation map (Y^1, ..., Y^H) -> sum_h Y^h on (R^{n x d_v})^H"
_RECOVERY_NOTE = ("the paper writes d_k; head outputs Y^h = A^h X W_V^h have width d_v, so the "
                  "toolkit counts in d_v (identical wherever d_k = d_v, as in every preset)")
_GENERIC_W = "generic weights (a proper algebraic subset of weight space is excluded)"

_P = Provenance
_ENTRIES: list[tuple[Formula, tuple[str, str] | None]] = [
    (Formula("recovery-ambiguity", "head-channel recovery ambiguity per layer per sequence", "dimension",
             f"dimension of the fibre of {_SUM_MAP}: given the sum, the H head outputs are free up to "
             "n(H-1)d_v coordinates", _P("paper", "thm-recovery", "§7.3"),
             lambda s, a: s.n * (s.H - 1) * s.d_v,
             ("heads write into one shared channel of width d_v before W_O is applied",),
             (_RECOVERY_NOTE, "with W_O known and invertible the fibre of Z -> Z W_O is 0: see wo-fibre")), None),
    (Formula("recovery-ambiguity-per-token", "head-channel recovery ambiguity per token per layer",
             "dimension", f"fibre dimension of {_SUM_MAP}, per row (token)",
             _P("paper", "thm-recovery", "§7.3"), lambda s, a: (s.H - 1) * s.d_v,
             ("heads write into one shared channel of width d_v",), (_RECOVERY_NOTE,)), None),
    (Formula("recovery-ambiguity-model", "head-channel recovery ambiguity over all layers", "dimension",
             f"sum over the L layers of the fibre dimension of {_SUM_MAP}",
             _P("toolkit", "thm-recovery", reason="the paper states the count per layer; the model total "
                "is L times it since the layers' fibres are independent"),
             lambda s, a: s.L * s.n * (s.H - 1) * s.d_v, (), (_RECOVERY_NOTE,)), None),
    (Formula("wo-fibre", "dimension of the fibre of Z -> Z W_O", "dimension",
             "fibre dimension of the linear map Z -> Z W_O from R^{n x H d_v} (concatenated head outputs) "
             "to R^{n x d_model}: n (H d_v - rank W_O)",
             _P("toolkit", "thm-recovery", reason="claims.md: with W_O known the recovery problem is the "
                "fibre of Z -> Z W_O, not of the head sum"),
             lambda s, a: s.n * (s.H * s.d_v - s.rank_WO),
             ("rank W_O defaults to min(H d_v, d_model), its generic value",),
             ("0 when the stacked W_O is invertible, as it generically is in BERT",)), None),
    (Formula("gauge-dimension", "continuous gauge dimension of one attention layer", "dimension",
             "dimension of the per-head GL(d_k) x GL(d_v) factors of G acting on (W_Q, W_K) and (W_V, W_O), "
             "one factor per key/value head; rotary positions shrink GL(d_k) to the commutant of the "
             "rotations (dimension d_k)",
             _P("toolkit", "framework-9", reason="the paper's definition of G is not in the text we hold; "
                "claims.md lists the factors"),
             _gauge_layer, (_GENERIC_W + ": the stabiliser of a generic point is trivial",),
             ("agrees with the maximal gauge group of MHA, ((GL(d_k))^H x (GL(d_v))^H) x S_H, "
              "on a generic stratum",)), None),
    (Formula("gauge-dimension-model", "continuous gauge dimension over all layers", "dimension",
             "L times gauge-dimension, layer by layer where layers differ (a NoPE layer's qk-gauge is GL(d_k)): "
             "the layers' gauge factors act independently",
             _P("toolkit", "framework-9", reason="the paper's definition of G is not in the text we hold"),
             lambda s, a: _group(a).layer_sum(tuple(_group(a).names(role="head-gauge"))), (_GENERIC_W,)), None),
    (Formula("group-dimension", "continuous dimension of G on the layers scope", "dimension",
             "dimension of every continuous factor of G acting on the layer stack and final norm (hidden states "
             "in, last hidden state out): per-layer factors times L plus between-layer factors times L - 1; "
             "equals the measured null space of the Jacobian of that map on small random instances "
             "(symtrans group --complete)",
             _P("toolkit", "framework-9", reason="the paper's G is not in the text we hold; the toolkit's G is "
                "completed until it matches the measured stabiliser"),
             _group_scope("layers"), (_GENERIC_W + ": the stabiliser of a generic point is G's identity component",
                                      "d_v < d_model (as in every model with H >= 2 and H d_v = d_model): with "
                                      "d_v >= d_model a head's W_O reaches the all-ones row and, at each boundary "
                                      "between post-LN layers, one W_V hyperplane move is also a gauge plus "
                                      "centring move, so the count is one too high per head and boundary"),
             ("includes the norm factors (centring shifts, bias transfers, reader hyperplanes, gain scalings) "
              "that the per-head gauges leave out; see norm-symmetry-dimension",)), None),
    (Formula("group-dimension-model", "continuous dimension of G on the model scope", "dimension",
             "as group-dimension, with the embeddings (and the output head of a causal language model) "
             "included: token ids in; after an embedding norm the between-layer factors act at L boundaries",
             _P("toolkit", "framework-9", reason="the paper's G is not in the text we hold"),
             _group_scope("model"), (_GENERIC_W,),
             ("measured equal on small random instances of every preset family (bert, gpt2, llama2-7b, "
              "mistral-7b); not modelled: unused rows of a position table (RoBERTa's two padding rows) and the "
              "O(d_model - 1) residual rotations of a pre-LayerNorm model with an untied head",)), None),
    (Formula("norm-symmetry-dimension", "continuous dimension of G beyond the per-head gauges and bias shifts",
             "dimension",
             "group-dimension minus L times (qk-gauge + vo-gauge + key-bias-shift + value-bias-shift + "
             "ffn-scaling): the symmetries that the norms create and that a gauge-only G leaves out",
             _P("toolkit", "framework-9", reason="measured: a G without them misses null directions of the "
                "Jacobian (symtrans group --complete)"),
             _norm_symmetries, (_GENERIC_W,)), None),
    (Formula("head-permutations", "order of the head-relabelling factor S_H", "order",
             "order of the group of head permutations acting on Q, K, V, O blocks together "
             "(with grouped-query attention: permutations that respect the key/value groups)",
             _P("toolkit", "framework-9", reason="discrete factor of G listed in claims.md"),
             _head_permutations), None),
    (Formula("ffn-permutations", "order of the hidden-unit permutation factor S_{d_ff}", "order",
             "order of the permutations of the feed-forward hidden units",
             _P("toolkit", "framework-9", reason="discrete factor of G listed in claims.md"),
             lambda s, a: _group(a).factor("S_dff").order, (),
             ("ReLU adds positive per-unit scalings (continuous); GeLU does not",)), None),
    (Formula("params-attention", "parameters of one attention block", "parameters",
             "entries of W_Q, W_K, W_V, W_O and their biases in one layer",
             _P("toolkit", reason="parameter count of the architecture"), _params_attention), None),
    (Formula("params-wo", "parameters of one layer's output projection weight", "parameters",
             "entries of the stacked W_O (H d_v x d_model), bias excluded",
             _P("toolkit", "pgop", reason="denominator of the PG-OP overhead"),
             lambda s, a: s.H * s.d_v * s.d_model), None),
    (Formula("params-ffn", "parameters of one feed-forward block", "parameters",
             "entries of the FFN weight matrices and their biases in one layer",
             _P("toolkit", reason="parameter count of the architecture"), _params_ffn), None),
    (Formula("params-layernorm", "parameters of one layer's norms", "parameters",
             "scale (and, for LayerNorm, shift) vectors of the norms of one layer (two; four with post-norms, "
             "plus the query and key norms' d_k gains with QK-norm)",
             _P("toolkit", reason="parameter count of the architecture"), _params_layernorm), None),
    (Formula("params-layer", "parameters of one layer", "parameters",
             "params-attention + params-ffn + params-layernorm",
             _P("toolkit", reason="parameter count of the architecture"), _params_layer), None),
    (Formula("params-embeddings", "parameters of the embedding block", "parameters",
             "token, learned-position and token-type tables plus the embedding norm",
             _P("toolkit", reason="parameter count of the architecture"), _params_embeddings), None),
    (Formula("params-model", "parameters of the base model", "parameters",
             "embeddings + L layers + pooler (BERT, RoBERTa) + final norm (pre-LN models); no LM head",
             _P("toolkit", reason="parameter count of the architecture, as Hugging Face's base model class"),
             _params_model), None),
    (Formula("flops-attention", "attention FLOPs per token per layer", "flops",
             "2 x multiply-accumulates of the Q, K, V, O projections and of the n x n scores and mixing; "
             + FLOP_CONVENTION, _P("toolkit", "cor-dff", reason="the paper quotes a share, not a count"),
             _flops_attention), None),
    (Formula("flops-ffn", "feed-forward FLOPs per token per layer", "flops",
             "2 x multiply-accumulates of the FFN matrices (W_in, W_out: 4 d_model d_ff; a gated FFN adds "
             "W_gate: 6 d_model d_ff); " + FLOP_CONVENTION,
             _P("toolkit", "cor-dff", reason="the paper quotes a share, not a count"), _flops_ffn, (),
             ("a gated FFN's elementwise gate act(x W_gate) * (x W_in) costs d_ff multiplies plus the "
              "activation per token, outside the matrix-multiplication convention (a relative 1/(6 d_model) "
              "of the FFN's count per multiply)",)), None),
    (Formula("flops-layer", "FLOPs per token per layer", "flops", "flops-attention + flops-ffn",
             _P("toolkit", "cor-dff", reason="the paper quotes a share, not a count"),
             lambda s, a: _flops_attention(s, a) + _flops_ffn(s, a)), None),
    (Formula("ffn-flop-share", "feed-forward share of a layer's FLOPs, as a function of n", "ratio",
             "flops-ffn / flops-layer, exact; " + FLOP_CONVENTION,
             _P("paper", "cor-dff", "§5.3, §6, Appendix A"),
             lambda s, a: _flops_ffn(s, a) / (_flops_attention(s, a) + _flops_ffn(s, a)),
             ("the paper quotes 64.8% for BertBase without stating n; this count gives that near n = 128",
              "a gated FFN (Llama, Mistral, Qwen2: W_gate, W_in, W_out) counts 6 d_model d_ff instead of "
              "4 d_model d_ff, so the share is 6 d_model d_ff / (6 d_model d_ff + flops-attention): the "
              "BertBase figure does not carry over to gated models")),
     ("flops-ffn", "flops-layer")),
    (Formula("mha-rank-bound", "upper bound on rank MHA(X)", "dimension",
             "min(n, H d_v, d_model): MHA(X) is n x d_model and a sum of H terms of rank <= d_v",
             _P("paper", "prop-6.2", "§6.1"), lambda s, a: sp.Min(s.n, s.H * s.d_v, s.d_model),
             ("subadditivity of rank",),
             ("the paper writes H d_k = d_model, true for BERT-style sizes",)), None),
    (Formula("head-subspace-dim", "dimension of one head's output subspace R_h", "dimension",
             "dim R_h, R_h = row space of Y^h W_O^h in R^{d_model}",
             _P("paper", "prop-6.3", "§6.1"), lambda s, a: sp.Min(s.rank_X, s.d_v),
             (_GENERIC_W + " W_V^h, W_O^h of full rank", "n > d_v and A^h invertible (generic)",
              "rank X defaults to min(n, d_model)"),
             ("the paper writes d_k; the subspace is the image of the d_v-wide value channel",)), None),
    (Formula("pgop-params", "parameters of a position-gated output projection (reconstruction)",
             "parameters", "per-(position, head) scalar gates g_h(i) = sigmoid(u_h . p_i + b_h): H (d_model + 1)",
             _P("toolkit", "pgop", reason="the paper's parametrisation is not in the text we hold; this is "
                "the reconstruction in claims.md that fits its 1.6% bound"), _pgop_params), None),
    (Formula("pgop-overhead", "PG-OP parameters relative to W_O (reconstruction)", "ratio",
             "pgop-params / params-wo",
             _P("toolkit", "pgop", reason="reconstruction in claims.md; the paper states < 1.6%"),
             lambda s, a: _pgop_params(s, a) / (s.H * s.d_v * s.d_model)), ("pgop-params", "params-wo")),
    (Formula("contracted-dim", "contracted dimension kappa of the head subspaces", "dimension",
             "kappa = sum_h dim R_h - dim(R_1 + ... + R_H) = H min(rank X, d_v) - dim(sum_h R_h)",
             _P("toolkit", "thm-rank-contraction", reason="the Rank Contraction Theorem's statement is not in "
                "the text we hold; claims.md's formalisation"), _contracted,
             ("dim(sum_h R_h) defaults to its generic value min(d_model, H min(rank X, d_v))",),
             ("generically kappa = 0 when H d_v <= d_model: contraction needs aligned heads, which real "
              "weights may show; measure it",
              "dim(sum_h R_h) is not rank MHA(X) in general: the row space of a sum lies inside the sum "
              "of the row spaces, and rank MHA(X) <= n while dim(sum_h R_h) can reach d_model")), None),
    (Formula("dff-lower-bound", "lower bound on d_ff from rank contraction", "dimension",
             "d_ff >= kappa: the FFN must re-expand the contracted directions (worst case over layers and "
             "inputs; this entry gives kappa at the chosen ranks)",
             _P("toolkit", "thm-rank-contraction", reason="claims.md's formalisation of the paper's bound"),
             _contracted, ("the bound is only as large as the measured contraction",)), None),
]
for _f, _ratio in _ENTRIES:
    register(_f, ratio_of=_ratio)
del _f, _ratio
