"""Two checkpoints, one orbit: decide whether B = g . A for an element g of G, through G's tag tables.

:func:`relate` solves for g factor by factor and layer by layer, and acts only through
:func:`symtrans.group.spec.act` (the tag tables) and its block form
(:func:`symtrans.group.numeric.model_blocks`), the engine ``symtrans group --verify`` uses:

1. **the residual map** Q (factors whose tags act on the residual axis with a component ``Q``:
   ``residual-permutation``, ``residual-rotation``), from the tables that write into the residual
   (each tag ``right by Q`` on ``word``), after projecting out what the translation factors acting
   on that table can move (``translate_ones``: the all-ones column; ``translate_rows``: the row
   mean); a signed permutation is found by matching columns (a discrete factor, matched on keys),
   anything else by least squares;
2. **gain scalings** (``*-scaling`` factors whose tag acts on a norm gain ``right by D``): the ratio of
   the gains;
3. **the discrete per-layer factors** by matching on G-invariant keys: heads (``S_H``) by their
   products W_Q W_K^T and W_V W_O (sketched: ``P R`` for one fixed random R, :meth:`_Solver.sketch`), FFN units (``S_dff``) by their (input column, output row)
   pairs, scale-normalised where a scaling factor acts on the unit; each key first projected onto
   what the translation factors cannot move (the ``hyperplane_weight`` tags: the normal 1/gamma of
   the norm a reader reads; the ``translate_ones`` tags: the all-ones row). Exact ties are reported;
4. **unit scalings** (``ffn-scaling``, ``gate-scaling``): per-column least squares;
5. **the per-head GL gauges**: least squares on the tensor the tag table acts on ``right by g``;
6. **the translations** (bias transfers, reader hyperplanes, key and value bias shifts, centring
   shifts, embedding translations): the difference on each factor's pivot tensor.

Every solved element is applied to the current A with :func:`~symtrans.group.spec.act`, so the
element written is a list of (factor, element) steps that ``symtrans verify`` applies again from A. (The
translations of the word table stay pending and are applied chunk by chunk where the table is read, in the
check: ``_Solver.apply``; the same values, without a translated copy of the table.)

The answer is either the element (``related``), with the residual of every tensor against B's
storage precision, or the first factor, layer and tensor where no element of G explains the
difference, with its size and the feature that breaks the needed symmetry. That feature is read
from G: the factor's own present breaking features when it is broken, else the present feature
(of the factors that act on the same axes) whose constraint the needed element violates
(:data:`KEEPS`: what each feature keeps, e.g. ``learned norm gains`` keeps monomial residual maps).

Tolerance (:func:`relation_tolerance`): a tensor is reproduced when its relative Frobenius
residual ``|g.A - B|_F / max(|A|_F, |B|_F)`` (the scale of the values the element moves: a tensor g
cancels to 0 is 0 only up to the rounding of what it cancelled) is at most ``4 u (1 + kappa)``, ``u`` the unit roundoff of B's
storage dtype for that tensor and ``kappa`` the condition number of the element acting on it
(1 for permutations and translations): B's own rounding is ``u/sqrt(3)`` in that norm, and a
least-squares element fitted to rounded data carries it into the tensors it predicts, amplified
by at most ``kappa``; 4 is headroom. A perturbation of 10 eps = 20 u per entry exceeds it when
kappa is below 4, and at the solver's pivot fits whatever kappa (checked against ``8 u``, the check's
tolerance at kappa 1, kappa-free).

Examples
--------
>>> from symtrans.numeric import load_model
>>> a = load_model("default")
>>> r = relate(a, a)
>>> r.related, r.steps
(True, [])
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from symtrans.errors import SymtransError
from symtrans.group.action import (BOUNDARY_NORM, EMBEDDING_NORM, LINEAR_ACTIONS, boundary_norm, linear_factor,
                                   tensor_at)
from symtrans.group.elements import (elements_of, equal_pairs, in_factor, in_group, pair_mean, rotary_planes,
                                     translation_order, with_role)
from symtrans.group.spec import Factor, GroupSpec, act
from symtrans.numeric.linalg import matmul, new_table
from symtrans.precision import EPS64, smallest_normal, unit_roundoff

__all__ = ["Relation", "Stop", "relate", "relation_tolerance", "KEEPS", "apply_steps", "write_relation",
           "check_relation", "check_relation_out", "RELATION_SCHEMA", "KAPPA_MAX", "kappa_limit", "random_element",
           "tensor_residuals", "pulled_back_residuals"]

RELATION_SCHEMA = "symtrans-relation/1"

#: G's features (by name, as :class:`symtrans.group.spec.Breaking` spells them) and what each keeps: a
#: predicate on the needed element. The text printed is G's own reason; a feature G does not list is never named.
KEEPS: dict[str, str] = {
    # diag(gamma) Q = Q diag(gamma') forces Q monomial. Gemma's (1 + w) gains: the same constraint on the applied
    # gain gamma = 1 + w (the loader adds the 1), and a signed permutation fixes the all-ones vector, so G's
    # conjugation acts on the stored w as on a plain gain; only the fold differs: it multiplies the readers by 1 + w
    # and sets w = 0 (gain scalings are affine in w). Derived and tested in tests/test_group_relate_tiny.py
    # (test_a_gemma_gain_keeps_what_a_learned_gain_keeps_and_must_be_folded_as_one_plus_w).
    "learned norm gains": "monomial",
    "LayerNorm centring": "fixes-ones",        # centring commutes with Q only if Q 1 is a multiple of 1
    "norm epsilon > 0": "orthogonal",          # Norm(c z) = sign(c) Norm(z) only at eps = 0
    "rotary positions": "commutes-rotary",     # M must commute with every rotation R_{j-i}
    "grouped-query attention": "per-kv-head",  # one element per key/value head, shared by its query heads
}


#: the kinds of action (``AxisTag.how``) that :func:`relate` applies lazily to a large table: translations, each
#: adding to every row of the table a row built from its component (so a row chunk of g . A is g acting on that
#: chunk, and means over rows or columns follow from the component's). Per kind: (whether the component has one
#: entry per row of the table, sliced with the chunk; the sign it is added with). A linear action (the residual
#: map) is applied at once: a column gather costs about a copy, so redoing it in every pass over the table would
#: cost more than the copy saves.
ROW_WISE: dict[str, tuple[bool, int]] = {
    "translate_rows": (False, 1), "translate_rows_neg": (False, -1),
    "translate_ones": (True, 1), "translate": (True, 1), "translate_neg": (True, -1),
}

#: model tables of at least this many values are acted on lazily by :func:`relate` (``_Solver.apply``): the
#: 30522 x 384 word table (11.7M values) is; a fresh float64 copy of it costs about one forward pass
LAZY_VALUES = 2 ** 20

#: the largest condition number an element may bring into a tolerance (:func:`element_cond`; a permutation with
#: scalings brings 1): beyond it a file is refused rather than given a looser tolerance (an ill-conditioned
#: element would otherwise buy its own slack)
KAPPA_MAX = 100.0
# the headroom a tolerance keeps on B's rounding (``4 u``, :func:`relation_tolerance`): a fit whose data is read at
# more than this times its own rounding (a stored table far larger than the part a map is fitted on) is past it
ROUNDING_HEADROOM = 4.0


def kappa_limit(storage_dtype: Any) -> float:
    """The largest condition number an element may bring into a tolerance at this storage precision.

    :data:`KAPPA_MAX`, or less where ``kappa u`` would pass 1/100 (bfloat16: 2.56; float16: 20.5): the tolerance
    rests on a first-order rounding bound (an error of ``kappa u``), whose neglected second-order part is
    ``kappa u`` times itself, and past that point ``4 u (1 + kappa)`` stops being a statement about rounding (at
    bfloat16 and kappa 99 it is 1.56: any tensor would pass).

    Examples
    --------
    >>> kappa_limit("float32") == KAPPA_MAX, round(kappa_limit("bfloat16"), 2), round(kappa_limit("float16"), 1)
    (True, 2.56, 20.5)
    """
    from symtrans.precision import unit_roundoff

    return min(KAPPA_MAX, 0.01 / unit_roundoff(storage_dtype))


#: relate's per-layer keys, each a product of two weights (d_model x d_model, kept as a sketch P R): its name and
#: its left and right factor. Invariant under the heads', units' and per-head gauges' factors; the residual map and
#: the norm scalings move them (:meth:`_Solver.layer_keys`, :meth:`_Solver.fit_rows`)
LAYER_KEYS: dict[str, tuple[str, str]] = {
    "W_Q W_K^T (summed over heads)": ("W_Q", "W_K"),
    "W_V W_O (summed over heads)": ("W_V", "W_O"),
    "W_in W_out": ("W_in", "W_out"),
}

#: the layer keys that sum the heads' products (:meth:`_Solver.head_keys`): their rounding is the heads' bounds
#: summed (:meth:`_Solver.head_key_noise`)
HEAD_KEYS = frozenset({"W_Q W_K^T (summed over heads)", "W_V W_O (summed over heads)"})


def relation_tolerance(storage_dtype: Any, kappa: float = 1.0, factors: int = 1, length: int = 1, *,
                       cap: bool = True, arithmetic: float | None = None) -> tuple[float, str]:
    """The largest relative Frobenius residual of a reproduced tensor, and why (see the module docstring).

    ``kappa``: the condition number of the element acting on the tensor (capped at :func:`kappa_limit`; not with
    ``cap=False``, for what such an element's rounding can reach: :func:`accepted_tolerance`);
    ``factors``: how many of the element's factors act on it (each fitted from rounded data); ``length``: the
    longest sum of products by which a dense part of the element acts on it (``d`` for a ``d x d`` map; 1 for a
    permutation with scalings). relate works in float64: each such sum carries ``gamma_n = n u64 / (1 - n u64)``
    of its own rounding (Higham's bound), negligible beside a float32 B's storage rounding but not beside a
    float64 B's, which it exceeds from n = 5 on. ``arithmetic``: the condition number that amplifies those sums
    where it differs from ``kappa`` (the steps' own, applied one after another, where ``kappa`` is their
    product's: a gauge and its inverse, fitted as one element, still apply as two), capped alike; default
    ``kappa``.

    Examples
    --------
    >>> tol, why = relation_tolerance("float32", 1.0)
    >>> round(tol / 5.96e-08, 2)
    8.0
    >>> why.split(":")[0]
    '4 u (1 + kappa) sqrt(m) with u = 5.96e-08 (float32), kappa = 1, m = 1 factors'
    >>> relation_tolerance("float32", 1e9)[0] == relation_tolerance("float32", KAPPA_MAX)[0]
    True
    >>> from symtrans.precision import unit_roundoff
    >>> t64, why = relation_tolerance("float64", 1.0, 1, 64)  # a 64 x 64 rotation applied to a float64 B
    >>> round(t64 / unit_roundoff("float64"), 1), why.split(";")[0]
    (136.0, '(4 u + gamma_n) (1 + kappa) sqrt(m) with u = 1.11e-16 (float64), kappa = 1, m = 1 factors, n = 64')
    """
    from symtrans.precision import dtype_name, sum_rounding, unit_roundoff

    u = unit_roundoff(storage_dtype)
    name = dtype_name(storage_dtype)
    k = min(float(kappa), kappa_limit(storage_dtype)) if cap else float(kappa)
    ka = k if arithmetic is None else (min(float(arithmetic), kappa_limit(storage_dtype)) if cap else
                                       float(arithmetic))
    m = max(int(factors), 1)
    n = max(int(length), 1)
    gamma = sum_rounding(n)
    tol = (ROUNDING_HEADROOM * u * (1 + k) + gamma * (1 + ka)) * math.sqrt(m)
    if n == 1:
        return tol, (f"4 u (1 + kappa) sqrt(m) with u = {u:.3g} ({name}), kappa = {k:.3g}, m = {m} factors: B's "
                     "rounding is at most u |B|_F, each factor's element is fitted to rounded data and carries that "
                     "error into the tensors it moves, amplified by at most kappa; m such errors add in quadrature; "
                     "x4 headroom")
    return tol, (f"(4 u + gamma_n) (1 + kappa) sqrt(m) with u = {u:.3g} ({name}), kappa = {k:.3g}, m = {m} factors, "
                 f"n = {n}; gamma_n = n u64 / (1 - n u64) = {gamma:.3g}: B's rounding is at most u |B|_F and the "
                 "float64 sums of n products that apply the element carry at most gamma_n; each factor's element "
                 "is fitted to rounded data and carries that error into the tensors it moves, amplified by at "
                 "most kappa; m such errors add in quadrature; x4 headroom on B's rounding"
                 + (f"; the sums amplified by {ka:.3g}, the condition number of the steps applied one after another "
                    "(4 u (1 + kappa) + gamma_n (1 + that))" if ka != k else ""))


def null_level(storage_dtype: Any, length: int, *, arithmetic: bool = False) -> float:
    """The relative size below which a stored part that G sends to 0 is 0 (a dead unit, a silenced head).

    Storage rounds each entry by at most u of itself and the float64 projections off the translations add a sum
    of ``length`` products: the check's own tolerance at condition number 1 with that length
    (:func:`relation_tolerance`, 8 u + 2 gamma_length). At float32 it is 8 u; at float64 the arithmetic dominates
    (4 u alone left a float64 dead unit noisy, and a pruned head's element singular). ``arithmetic``: the float64
    level alone, against the whole tensor's scale (:func:`zero_cuts`): what a float64 computation leaves of values
    it cancelled (a canonical form's silenced head, a dead unit). The one home of that level: relate's solver
    (:meth:`_Solver.null_level`, at B's storage) and the canonical form read it.

    Examples
    --------
    >>> round(null_level("float32", 1) / 5.96e-08, 2)
    8.0
    >>> null_level("float32", 64, arithmetic=True) == relation_tolerance("float64", length=64)[0]
    True
    """
    return relation_tolerance("float64" if arithmetic else storage_dtype, length=length)[0]


def zero_cuts(stored: Any, storage_dtype: Any, length: int, *, whole: bool = True) -> Any:
    """Per part of one tensor (a head group's blocks, an FFN unit's column or row), the size at or below which the
    part's invariant (what the translations leave of it) is 0: the rounding of the stored part it was projected from
    (:func:`null_level` of its norm, ``stored``: the parts' stored norms, sums of ``length`` products), or the
    float64 arithmetic of the whole stored tensor (a part a computation cancelled to about 1e-16 of its tensor, as
    in a canonical form, is not made live by its own norm). Both sides of a cut move with the part under a scaling
    or a gauge of G (up to its condition number): unlike a cut against the tensor's largest part, no element of G
    of small condition number carries a part across it. ``whole=False``: the part's own rounding alone (what a
    part below it is certainly made of: the canonical form writes those parts as 0, and no others, since a part
    below the whole tensor's arithmetic alone may be a live part beside a huge one).

    Examples
    --------
    >>> import torch
    >>> cuts = zero_cuts(torch.tensor([1.0, 1.0, 1e-9], dtype=torch.float64), "float32", 1)
    >>> [bool(x <= c) for x, c in zip([1e-8, 0.5, 1e-9], cuts)]  # cancelled to its rounding; live; small but whole
    [True, False, False]
    >>> stored = torch.tensor([1e30, 1.0], dtype=torch.float64)  # a part of 1 beside one of 1e30
    >>> [(zero_cuts(stored, "float32", 1, whole=w)[1] >= 1).item() for w in (True, False)]
    [True, False]
    """
    own = null_level(storage_dtype, length) * stored
    return own.clamp_min(null_level(storage_dtype, length, arithmetic=True) * float(stored.norm())) if whole else own


def accepted_tolerance(storage_dtype: Any, kappa: float = 1.0, factors: int = 1, length: int = 1,
                       arithmetic: float | None = None) -> tuple[float, float]:
    """``(tolerance, undecided up to)``: the residual up to which a reproduced tensor is accepted, and up to which a
    larger one is undecided rather than refused.

    Within :func:`kappa_limit` (:data:`KAPPA_MAX` at float32) the element's condition number widens the tolerance
    (:func:`relation_tolerance`) and both are that. Past it the element buys no slack: a tensor is accepted only within a perfectly conditioned
    element's tolerance (kappa = 1), and a residual up to what its condition number carries (uncapped) is no
    evidence that B is off A's orbit: undecided. A moved copy of a Llama whose gain has one channel at 1e-3 of the
    others (a rotation through it: condition number about 1e6) reproduces A to 115 u: undecided, not refused.

    Examples
    --------
    >>> from symtrans.precision import unit_roundoff
    >>> u = unit_roundoff("float32")
    >>> [round(x / u, 1) for x in accepted_tolerance("float32", 3.0)]  # within KAPPA_MAX: 4 u (1 + kappa), both
    [16.0, 16.0]
    >>> [round(x / u, 1) for x in accepted_tolerance("float32", 1e6)]  # past it: 8 u accepted, 4 u (1 + 1e6) undecided
    [8.0, 4000004.0]
    """
    k = float(kappa)
    ka = k if arithmetic is None else float(arithmetic)  # (relation_tolerance's ``arithmetic``), past the limit alike
    limit = kappa_limit(storage_dtype)
    if k <= limit and ka <= limit:
        tol = relation_tolerance(storage_dtype, k, factors, length, arithmetic=ka)[0]
        return tol, tol
    return (relation_tolerance(storage_dtype, k if k <= limit else 1.0, factors, length,
                               arithmetic=ka if ka <= limit else 1.0)[0],
            relation_tolerance(storage_dtype, k, factors, length, cap=False, arithmetic=ka)[0])


@dataclass
class Stop:
    """Where no element of G explains B: factor, layer, tensor, the unexplained part, and the breaking feature."""

    factor: str
    layer: int | None
    tensor: str
    unexplained: float
    tolerance: float
    features: list[str]
    detail: str = ""

    def line(self) -> str:
        """The one-line answer printed by ``symtrans relate`` (exit 1).

        Examples
        --------
        >>> Stop("ffn-scaling", 2, "W_in", 0.3, 1e-6, ["gelu activation: not homogeneous"]).line()[:52]
        'not related: ffn-scaling, layer 2, tensor W_in: unex'
        """
        where = f", layer {self.layer}" if self.layer is not None else ""
        feats = "; ".join(self.features) if self.features else "none of G's features: the difference is not " \
                                                                "in the orbit of A"
        return (f"not related: {self.factor}{where}, tensor {self.tensor}: unexplained part {self.unexplained:.3g} "
                f"(relative Frobenius; tolerance {self.tolerance:.3g}); broken by: {feats}"
                + (f" ({self.detail})" if self.detail else ""))


@dataclass
class Relation:
    """The answer of :func:`relate`: the element found (steps), per-tensor residuals, ties, or where it stops.

    Examples
    --------
    >>> Relation(True, [], [], [], None).summary().splitlines()[0]
    'related: B = g . A with g the identity (no factor moved)'
    """

    related: bool
    steps: list[dict[str, Any]]
    residuals: list[dict[str, Any]]
    ties: list[str]
    stop: Stop | None
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # CPU seconds per phase (PHASES, then "check")
    # (factor, tensor): a tensor the element's steps act on that the loaded weights do not hold (an untied output
    # head), so no check saw what g does to it (:func:`unchecked_tensors`)
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    # checkpoint keys of A or B outside the function symtrans models (a pre-training head beside a BERT:
    # :attr:`ModelWeights.outside`), which no element of G as modelled moves and relate does not compare
    outside: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Lines for the terminal: the verdict, the factors moved, the worst residual, ties.

        Examples
        --------
        >>> r = Relation(False, [], [], [], Stop("S_dff", 0, "W_out", 1.0, 1e-7, []))
        >>> r.summary().startswith("not related: S_dff, layer 0")
        True
        """
        if not self.related:
            lines = [self.stop.line() if self.stop else "not related"]
            sa, sb = self.a.get("storage"), self.b.get("storage")
            if sa and sb and unit_roundoff(sa) > unit_roundoff(sb):  # B may be what A was rounded from
                lines.append(f"storage: A is stored in {sa}, coarser than B's {sb}. relate asks whether B = g . A at "
                             f"B's precision, so a B that A was rounded from is off by A's rounding and refused; "
                             f"`relate B A` asks whether A = g . B at A's precision")
            return "\n".join(lines)
        moved = sorted({s["factor"] for s in self.steps})
        lines = ["related: B = g . A with g " + ("the identity (no factor moved)" if not moved else
                                                  "moving " + ", ".join(moved))]
        if self.residuals:
            worst = max(self.residuals, key=lambda r: r["residual"] / r["tolerance"])
            margin = "exact" if worst["residual"] == 0 else \
                f"margin {math.log10(worst['tolerance'] / worst['residual']):.1f} decades"
            lines.append(f"worst tensor {worst['tensor']}" + (f" (layer {worst['layer']})" if worst["layer"] is not None
                                                              else "")
                         + f": residual {worst['residual']:.3g} <= tolerance {worst['tolerance']:.3g} "
                         f"({worst['dtype']}; {margin})")
            res = self.resolution
            lines.append(f"resolution: a non-symmetric difference up to {res['tolerance']:.3g} (relative Frobenius) "
                         f"is not excluded, the largest at {res['tensor']}"
                         + (f" (layer {res['layer']})" if res["layer"] is not None else "")
                         + f": {res['dtype']} storage, condition number {res['kappa']:.3g}, {res['factors']} "
                         f"factor{'s' if res['factors'] != 1 else ''} (what rounding at that precision, of A and of B, "
                         "carried through g, can produce)")
            for side in ("A", "B"):  # a gain its offset storage resolves worse than the tolerances' scale
                g = (self.a if side == "A" else self.b).get("offset_gain")
                if g is not None and g["resolved_to"] > res["tolerance"]:
                    lines.append(f"stored gains: {side}'s {g['tensor']}" + (f" (layer {g['layer']})" if g["layer"]
                                 is not None else "") + f", entry {g['index']}, a gain of {g['gain']:.3g} stored as "
                                 f"its difference from the offset, is held only to {g['resolved_to']:.3g} of itself "
                                 f"({g['dtype']}): B = g . A holds at that storage, and the function through that "
                                 "channel is resolved no better")
            za, zb = ((x.get("offset_gain") or {}).get("zeros", {}) for x in (self.a, self.b))
            lost = sorted(k for k in set(za) | set(zb) if za.get(k, 0) != zb.get(k, 0))
            if lost:  # no element of G makes a non-zero gain 0: the storage rounded gains to 0 on one side
                lines.append("stored gains: " + ", ".join(f"{k} holds {za.get(k, 0)} gains of exactly 0 in A and "
                                                          f"{zb.get(k, 0)} in B" for k in lost[:3])
                             + ": no element of G makes a non-zero gain 0, so one side's storage (a gain stored as its "
                             "difference from the offset, near -1) rounded them to 0, and the function through those "
                             "channels is lost there")
            each = [r for r in self.residuals if "entrywise" in r]
            if each:  # :func:`worst_each`: tensors g moves entry by entry
                lines.append(f"entry by entry: in {len(each)} tensors each entry is held to within "
                             f"{max(r['entrywise'] for r in each):.3g} of its own scale at most (a fibre along an "
                             "axis a map mixes as one; widened by the rounding a fitted translation carries in from the tensor "
                             "it was read from)")
        for factor, tensor in self.unchecked:
            lines.append(f"not checked: {tensor}, which {factor} moves, is not among the loaded weights (an untied "
                         "output head the checkpoint does not hold): B = g . A holds for every loaded tensor, and "
                         f"B's {tensor} must be A's moved by g for the models to compute the same function")
        if self.outside:
            lines.append(f"not compared: {', '.join(self.outside)}, held by the checkpoints outside the function symtrans "
                         "models (which ends at the last hidden state, or the logits of an untied head): no element of "
                         "G as modelled moves them, so B = g . A says nothing of them")
        for t in self.ties:
            lines.append(f"tie: {t}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><td>{html.escape(r['tensor'])}</td><td>{'' if r['layer'] is None else r['layer']}</td>"
                       f"<td>{r['residual']:.2e}</td><td>{r['tolerance']:.2e}</td><td>{html.escape(r['dtype'])}</td></tr>"
                       for r in sorted(self.residuals, key=lambda r: -r["residual"] / r["tolerance"])[:20])
        return (f"<p>{html.escape(self.summary()).replace(chr(10), '<br>')}</p>"
                + (f"<table><tr><th>tensor</th><th>layer</th><th>residual</th><th>tolerance</th><th>dtype</th></tr>"
                   f"{rows}</table>" if rows else ""))

    @property
    def resolution(self) -> dict[str, Any] | None:
        """The residual record of largest tolerance: the largest non-symmetric difference a related answer does not
        exclude (a tensor of g . A off B by less than its tolerance is accepted; the tolerance carries A's and B's
        storage rounding through the element, so it grows with the storage unit and the condition number: about
        0.1 relative at bfloat16 with kappa 3.5 and three factors). None without residuals.

        Examples
        --------
        >>> rec = {"tensor": "W_Q", "layer": 1, "residual": 0.0, "tolerance": 0.12, "dtype": "bfloat16", "kappa": 3.5,
        ...        "factors": 3}
        >>> Relation(True, [], [rec, {**rec, "tensor": "W_K", "tolerance": 0.01}], [], None).resolution["tensor"]
        'W_Q'
        """
        if not self.residuals:
            return None
        return max(self.residuals, key=lambda r: r["tolerance"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (without the element's tensors, which :func:`write_relation` stores).

        Examples
        --------
        >>> Relation(True, [], [], [], None).to_dict()["related"]
        True
        """
        res = self.resolution
        return {"related": self.related, "factors": [s["factor"] for s in self.steps], "residuals": self.residuals,
                "resolution": None if res is None else {k: res[k] for k in ("tensor", "layer", "tolerance", "dtype",
                                                                             "kappa", "factors")},
                "ties": self.ties, "unchecked": [{"factor": f, "tensor": t} for f, t in self.unchecked],
                "outside": self.outside,
                "stop": dataclasses.asdict(self.stop) if self.stop else None,
                "a": self.a, "b": self.b, "seconds": self.seconds, "phases": self.phases}


class _Refused(Exception):
    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.line())
        self.stop = stop


# --------------------------------------------------------------------------- small linear algebra
def _torch() -> Any:
    import torch

    return torch


def _fro(x: Any) -> float:
    return float(_torch().linalg.norm(x))


#: rows per chunk of :func:`_fro_diff` (a chunk of a d_model = 384 float64 table is 3 MB: it stays in cache, and
#: the allocator reuses it, where a whole-table difference is a fresh 94 MB allocation paged in per call)
_CHUNK_ROWS = 1024


def _fro_diff(x: Any, y: Any) -> float:
    """``|x - y|_F`` without forming the whole difference (row chunks of large tensors).

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(6000.0, dtype=torch.float64).reshape(3000, 2)
    >>> abs(_fro_diff(x, 2 * x) - float(torch.linalg.norm(x))) < 1e-9 * float(torch.linalg.norm(x))
    True
    """
    if x.dim() < 2 or x.shape[0] <= 2 * _CHUNK_ROWS:
        return _fro(x - y)
    total = 0.0
    for i in range(0, x.shape[0], _CHUNK_ROWS):
        total += _fro(x[i:i + _CHUNK_ROWS] - y[i:i + _CHUNK_ROWS]) ** 2
    return math.sqrt(total)


def _rel(x: Any, target: Any) -> float:
    """``|x - target|_F / |target|_F`` (or the plain difference when the target is 0); a large table in one pass
    over row chunks of both (the two norms summed chunk by chunk while the chunk is in cache).

    Examples
    --------
    >>> import torch
    >>> t = torch.ones(5000, 4, dtype=torch.float64)
    >>> _rel(t * 1.5, t), _rel(t, 0 * t)
    (0.5, 141.4213562373095)
    """
    if x.dim() < 2 or x.shape[0] <= 2 * _CHUNK_ROWS:
        n, d = _fro(target), _fro(x - target)
        return d / n if n > 0 else d
    return _rel_chunks((x[i:i + _CHUNK_ROWS], target[i:i + _CHUNK_ROWS]) for i in range(0, x.shape[0], _CHUNK_ROWS))


def rounding_weights(a: Any, b: Any, *, uneven: float = 0.0) -> Any:
    """Weights (summing to 1) over the rows of two tables of one shape, ``1 / scale^2`` with a row's scale the larger
    of its norms in ``a`` and ``b``, at least :func:`_floor_scale`'s: the least-squares weights of rounding of about
    ``u`` times each row's scale, which let no row's rounding outweigh the rest. With ``uneven``: None unless the
    rows' mean scale is more than that many times the floor (where a plain mean would carry large rows' rounding).

    Examples
    --------
    >>> import torch
    >>> a = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1e10, 0.0]], dtype=torch.float64)
    >>> w = rounding_weights(a, a)
    >>> [round(float(x), 3) for x in w], rounding_weights(a[:2], a[:2], uneven=2.0) is None
    ([0.5, 0.5, 0.0], True)
    """
    torch = _torch()
    s = torch.maximum(_slice_norms(a, (0,))[0], _slice_norms(b, (0,))[0])
    floor = _floor_scale(s)
    if uneven and not (float(s.mean()) > uneven * floor and floor > 0):
        return None
    w = s.clamp_min(floor if floor > 0 else 1e-300).square().reciprocal()
    return w / w.sum()


def _weighted_rows(x: Any, w: Any) -> Any:
    """``sum_i w_i x_i`` over the rows of ``x`` (1 x n), row chunk by row chunk, each chunk's rows summed by torch's
    cascade sum (a plain ``w @ x`` loses accuracy over 30522 rows, as a mean does).

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    >>> _weighted_rows(x, torch.tensor([0.25, 0.75], dtype=torch.float64)).tolist()
    [[2.5, 3.5]]
    """
    total = None
    for i in range(0, x.shape[0], _CHUNK_ROWS):
        part = (x[i:i + _CHUNK_ROWS] * w[i:i + _CHUNK_ROWS, None]).sum(0, keepdim=True)
        total = part if total is None else total.add_(part)
    return total


def _rel_chunks(pairs: Any, *, in_place: bool = False) -> float:
    """:func:`_rel` of a table given as ``(chunk of x, chunk of target)`` pairs, the two norms summed chunk by
    chunk; ``in_place``: each x chunk is the caller's to overwrite, the difference formed in it.

    Examples
    --------
    >>> import torch
    >>> t = torch.ones(6, 2, dtype=torch.float64)
    >>> _rel_chunks((1.5 * t[i:i + 2], t[i:i + 2]) for i in range(0, 6, 2))
    0.5
    """
    n2 = d2 = 0.0
    for x, t in pairs:
        n2 += _fro(t) ** 2
        d2 += _fro(x.sub_(t) if in_place else x - t) ** 2
    n, d = math.sqrt(n2), math.sqrt(d2)
    return d / n if n > 0 else d


#: a norm-scaling's channel is read from the rows it scales, not from its gains, where a gain's stored form
#: resolves it more than this many times more coarsely than its dtype (:func:`symtrans.precision.offset_loss`: a
#: Gemma gain near 0); the rows' least-squares ratio is good to a few u
OFFSET_LOSS_ROWS = 2.0


def gain_pivot(f: Factor) -> Any:
    """The tag of norm-scaling factor ``f`` on the gain it scales (the pivot its element is read from or fixes).

    Examples
    --------
    >>> gain_pivot(GroupSpec.from_arch("llama2-7b").factor("ln1-scaling")).tensor
    'ln1_w'
    """
    return next(t for t in f.tags if t.how == "element" and t.tensor.endswith("_w"))


def unit_scaled_inputs(spec: GroupSpec, factors: Any = None) -> list[str]:
    """The FFN unit inputs a unit scaling moves: the right-side tensors of the hidden-scaling factors of ``spec``
    (of ``factors`` only, where given: those present in G). Where the activation breaks a scaling (GELU's on
    ``W_in``, SiLU's on a gate), the inputs it would move keep their scale and sign under G, and tell apart units
    whose scale-free keys tie (parallel input columns: distinct functions).

    Examples
    --------
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> unit_scaled_inputs(spec), unit_scaled_inputs(spec, [f for f in spec.factors if f.status != "broken"])
    (['W_in', 'b_in'], [])
    """
    return [t.tensor for x in with_role(spec, "hidden-scaling", factors) for t in x.tags if t.side == "right"]


def unit_sign_kept(spec: GroupSpec, name: str, factors: Any = None) -> bool:
    """Whether G fixes the sign of each FFN unit's ``name`` column: no unit scaling among ``factors`` (G's present
    factors; by default those of ``spec`` not broken) that moves ``name`` may be negative
    (:func:`~symtrans.group.elements.values_rule`). A key read up to the scaling then keeps that sign: units whose
    columns are opposite are distinct functions (ReLU's, whose scalings are positive; GELU's, which has none).
    False where a scaling may flip it (a gated up-projection's).

    Examples
    --------
    >>> import dataclasses
    >>> from symtrans.arch import get_arch
    >>> relu = GroupSpec.from_arch(dataclasses.replace(get_arch("llama2-7b"), activation="relu"))
    >>> unit_sign_kept(relu, "W_in"), unit_sign_kept(relu, "W_gate"), unit_sign_kept(GroupSpec.from_arch("gpt2"), "W_in")
    (False, True, True)
    """
    from symtrans.group.elements import values_rule

    if factors is None:
        factors = [f for f in spec.factors if f.status != "broken"]
    return all(values_rule(spec, x.name) == "positive" for x in with_role(spec, "hidden-scaling", factors)
               if any(t.tensor == name and t.side == "right" for t in x.tags))


#: the kinds of action that divide by a norm gain (``1/gain``, named by the tag's ``via``): undefined where the gain
#: holds an exact 0, and the symmetry they model is not one there (a dead channel's rows are free instead). The
#: hyperplanes act on every key relate reads; the conjugations only where a residual rotation is applied
HYPERPLANE_KINDS = ("hyperplane_weight", "hyperplane_bias", "hyperplane_head")
CONJUGATION_KINDS = ("conjugate_gain", "conjugate_gain_row")
THROUGH_INVERSE_GAIN = CONJUGATION_KINDS + HYPERPLANE_KINDS


def dead_gain_actions(spec: GroupSpec, w: Any, kinds: tuple[str, ...] = THROUGH_INVERSE_GAIN) -> list[str]:
    """One line per present factor of G that acts through ``1/gain`` (a tag of ``kinds``) on a model ``w`` whose gain
    holds an exact 0 there: the factor is not defined on that model, and the symmetry it models is not one.

    With LayerNorm, a reader's hyperplane direction is ``1/gamma`` only while every gain is non-zero: with
    ``gamma_j = 0`` the invariant directions ``u`` (``u . (gamma * n) = 0`` for every centred ``n``) are those
    supported on the dead channels. With RMSNorm and unfolded gains, the residual rotation conjugates by the
    gains, and ``Q diag(g) W' = diag(g) W`` has no solution for a general ``Q`` when ``g`` has a zero.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("gpt2"); w.tensors["ln2_w"][0, 3] = 0.0
    >>> dead_gain_actions(GroupSpec.from_arch(w.arch), w)
    ['ffn-input-hyperplane acts through 1/ln2_w (hyperplane_weight, hyperplane_bias), and ln2_w holds 1 gain of exactly 0 (first: layer 0, channel 3)']
    >>> dead_gain_actions(GroupSpec.from_arch(w.arch), tiny_decoder("gpt2"))
    []
    """
    found: dict[tuple[str, str], list[str]] = {}  # (factor, gain): the kinds of its tags through 1/gain
    for f in spec.factors:
        if f.status == "broken":
            continue
        for t in f.tags:
            if t.how not in kinds or not t.via:
                continue
            gain = t.via.split(",")[0]
            g = w.tensors.get(gain)
            if g is not None and bool((g == 0).any()) and t.how not in found.setdefault((f.name, gain), []):
                found[(f.name, gain)].append(t.how)
    out = []
    for (name, gain), hows in found.items():
        g = w.tensors[gain]
        zeros = (g == 0).nonzero().tolist()
        where = f"layer {zeros[0][0]}, channel {zeros[0][1]}" if g.dim() == 2 else f"channel {zeros[0][0]}"
        out.append(f"{name} acts through 1/{gain} ({', '.join(hows)}), and {gain} holds {len(zeros)} "
                   f"gain{'s' if len(zeros) > 1 else ''} of exactly 0 (first: {where})")
    return out


def singular_head_biases(spec: GroupSpec, w: Any) -> list[str]:
    """One line per present factor that absorbs a norm bias into an untied head (``hyperplane_head``, via ``gain,
    bias``) where ``w``'s ``<bias, 1/gain>`` is 0 within its rounding: the action divides by that product, and at 0
    the head has a free direction G does not model (``W -> W + (1/gain)^T v`` for any v), so a refusal there is no
    answer. Within rounding: ``(u + gamma_d) sum_i |bias_i / gain_i|``, u the bias's storage unit roundoff (the
    stored value of a bias on the hyperplane is off it by that much) and ``gamma_d`` the float64 sum's.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(dataclasses.replace(w.arch, tied_lm_head=False))
    >>> singular_head_biases(spec, w)
    []
    >>> w.tensors["final_ln_b"].zero_() is not None
    True
    >>> singular_head_biases(spec, w)[0][:80]
    'final-norm-bias-transfer absorbs final_ln_b into the head through <final_ln_b, 1'
    """
    from symtrans.numeric.linalg import _gamma
    from symtrans.numeric.weights import storage_precision
    from symtrans.precision import unit_roundoff

    out = []
    for f, t in _head_hyperplanes(spec):
        gain, bias = t.via.split(",")
        g, b = w.tensors.get(gain), w.tensors.get(bias)
        if g is None or b is None or bool((g == 0).any()):  # a dead gain: dead_gain_actions names it
            continue
        terms = b.reshape(-1) / g.reshape(-1)
        dot, mass = float(terms.sum()), float(terms.abs().sum())
        rounding = (unit_roundoff(storage_precision(w, bias)[0]) + _gamma(terms.numel())) * mass
        if abs(dot) <= rounding:
            out.append(f"{f.name} absorbs {bias} into the head through <{bias}, 1/{gain}> = {dot:.3g}, within "
                       f"its rounding {rounding:.3g} of 0, where that action divides by it (and the head has a "
                       "free direction G does not model)")
    return out


def _head_hyperplanes(spec: GroupSpec) -> list[tuple[Factor, Any]]:
    """(factor, tag) for each tag of a present factor that absorbs a norm bias into an untied head
    (``hyperplane_head``, via ``gain,bias``): the one scan :func:`singular_head_biases` and
    :func:`head_hyperplane_tensors` read."""
    return [(f, t) for f in spec.factors if f.status != "broken" for t in f.tags
            if t.how == "hyperplane_head" and t.via]


def head_hyperplane_tensors(spec: GroupSpec) -> set[str]:
    """The tensors a factor absorbing a norm bias into an untied head (``hyperplane_head``) acts on or reads: the
    only ones :func:`singular_head_biases`' singular point reaches.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> sorted(head_hyperplane_tensors(GroupSpec.from_arch(dataclasses.replace(tiny_decoder("gpt2").arch,
    ...                                                                            tied_lm_head=False))))
    ['final_ln_b', 'final_ln_w', 'lm_head']
    >>> head_hyperplane_tensors(GroupSpec.from_arch(tiny_decoder("gpt2").arch))  # tied: no such factor
    set()
    """
    out: set[str] = set()
    for f in {f.name: f for f, _ in _head_hyperplanes(spec)}.values():
        out.update(t.tensor for t in f.tags)
        out.update(v for t in f.tags for v in (t.via or "").split(",") if v)
    return out


def _inverse_fit(pairs: Any) -> tuple[Any, Any]:
    """``(d, ok)``: the diagonal d with ``y = diag(d)^-1 x`` row by row, by least squares over ``(x, y)`` pairs of
    blocks (rows: the coordinates d scales): ``d_j = <x_j, x_j> / <x_j, y_j>``; ``ok`` where that is defined
    (x_j and <x_j, y_j> non-zero); ``(None, None)`` without any pair. How a diagonal scaling is read off the
    tensors it scales inversely.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]])
    >>> d, ok = _inverse_fit([(x, x / torch.tensor([[2.0], [5.0], [-1.0]]))])
    >>> d[ok].tolist(), ok.tolist()
    ([2.0, -1.0], [True, False, True])
    """
    num = den = None
    for x, y in pairs:
        num = (x * y).sum(1) if num is None else num + (x * y).sum(1)
        den = (x * x).sum(1) if den is None else den + (x * x).sum(1)
    if num is None:  # no block to read it from: defined nowhere
        return None, None
    return den / num, (den > 0) & (num != 0)


def _centre_cols(d: int, dtype: Any) -> Any:
    torch = _torch()
    return torch.eye(d, dtype=dtype) - torch.full((d, d), 1.0 / d, dtype=dtype)


def _proj_normal(u: Any) -> Any:
    """I - u u^T / |u|^2 for a column u: kills the direction a hyperplane move adds along."""
    torch = _torch()
    u = u.reshape(-1, 1)
    return torch.eye(u.shape[0], dtype=u.dtype) - (u @ u.T) / float((u * u).sum())


def _lstsq(A: Any, B: Any, *, singular_values: bool = False) -> Any:
    """The minimum-norm least-squares solution of ``A X = B`` (SVD-based, batched); with ``singular_values``,
    ``(X, A's singular values)`` (gelsd computes them anyway)."""
    from symtrans.numeric.weights import all_finite

    if not (all_finite(A) and all_finite(B)):  # LAPACK's gelsd would print its own error on stderr, then raise
        raise SymtransError("least squares on values that are not finite")
    out = _torch().linalg.lstsq(A, B, driver="gelsd")
    return (out.solution, out.singular_values) if singular_values else out.solution


def _two_nearest(KB: Any, KA: Any) -> Any:
    """Per row of ``KB``, the indices of its nearest and second-nearest rows of ``KA`` in that order, exactly as
    ``torch.cdist(KB, KA).topk(2, largest=False)`` orders them, or None where that is not certain (the caller then
    forms the distances).

    Why: :meth:`_Solver._match` on the heads' keys (a dozen rows of 24,576 values on the bundled model) spent
    18 ms per relate in ``cdist``, which streams every pair's difference; the squared distances read off one
    Gram product cost a tenth of that. They carry the Gram's rounding (the norms' and the dot products': at most
    ``4 gamma_(n+2) (|a|^2 + |b|^2)`` each), and cdist's own distances carry ``gamma_n`` of theirs; where every
    row's nearest, second and the rest lie apart by more than both, cdist's order is that one, and otherwise
    (near-ties, values that are not finite, more than 25 rows, where cdist itself goes through a Gram product)
    None: the answer is cdist's in every case.

    Examples
    --------
    >>> import torch
    >>> KA = torch.randn(12, 300, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> p = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    >>> KB = KA[p] + 1e-9
    >>> bool((_two_nearest(KB, KA) == torch.cdist(KB, KA).topk(2, largest=False).indices).all())
    True
    >>> _two_nearest(torch.cat([KB[:1], KB[:1]]), torch.cat([KA[:1], KA[:1]])) is None  # a tie: cdist decides
    True
    """
    from symtrans.precision import sum_rounding

    n, m = int(KA.shape[0]), int(KA.shape[1])
    if n < 2 or n > 25 or KB.shape[0] > 25 or not (bool(KA.isfinite().all()) and bool(KB.isfinite().all())):
        return None
    na, nb = (KA * KA).sum(1), (KB * KB).sum(1)
    size = nb[:, None] + na[None, :]
    D2 = size - 2 * matmul(KB, KA.T)
    err = 4 * sum_rounding(m + 2) * size  # the Gram's rounding, then cdist's own (relative) and its square root's
    err = err + 2 * sum_rounding(m + 8) * (D2.abs() + err)
    order = D2.argsort(dim=1)
    d, e = D2.gather(1, order), err.gather(1, order)
    apart = d[:, 0] + e[:, 0] < d[:, 1] - e[:, 1]
    if n > 2:
        apart &= d[:, 1] + e[:, 1] < (d[:, 2:] - e[:, 2:]).min(1).values
    return order[:, :2] if bool(apart.all()) else None


#: a pivot block whose condition number exceeds this has its gauge solved on both tensors the gauge acts on
#: (:func:`_two_sided_gauge`) where the solve is by SVD; below it the pivot alone fixes the gauge to within its
#: rounding times this number, well inside the check's tolerance
JOINT_COND = 10.0


def _row_weights(A: Any, B: Any, level: float) -> Any:
    """Per row of the stacked systems ``A M = B`` (groups x rows x k), the weight ``1 / max(|A_r|, |B_r|, f)``,
    with ``f`` ``level`` times the group's norm (a row below it is rounding, not data, and is not raised to the
    others' size), shaped to multiply both sides.

    Row by row, B's rounding is relative to each row (storage rounds each entry by u of itself), while a
    least-squares solve is stable relative to the whole block: a row far larger than the rest leaves the rest
    fitted only to its rounding. Weighted, every row holds the same share, and where B is A's image the solution
    is the same element.

    Examples
    --------
    >>> import torch
    >>> A = torch.tensor([[[1e6, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    >>> _row_weights(A, 2 * A, 1e-14).reshape(-1).tolist()
    [5e-07, 0.5]
    """
    torch = _torch()
    rows = torch.maximum(A.norm(dim=-1, keepdim=True), B.norm(dim=-1, keepdim=True))
    floor = level * torch.maximum(A.norm(dim=(-2, -1)), B.norm(dim=(-2, -1)))
    floor = floor.clamp_min(smallest_normal(A.dtype))
    return 1 / torch.maximum(rows, floor[..., None, None])


def _two_sided_gauge(A: Any, B: Any, XA: Any, XB: Any, noise: tuple[float, float] = (1.0, 1.0)) -> Any:
    """The ``M`` that best fits ``A M = B`` and ``XB M^T = XA`` together, each relative to its own size times its
    relative ``noise`` (how much more rounding than its own size's each side carries: 1 for a stored block, more
    for a block projected off a large translation); None where some direction is fixed by neither (the caller
    keeps its own solution).

    The two least-squares problems, each divided by its size (``max(|A|, |B|)``, ``max(|XA|, |XB|)``), have
    the normal equations ``P M + M Q = C`` (a Sylvester equation) with ``P = A^T A``, ``Q = XB^T XB`` and
    ``C = A^T B + XA^T XB`` (of the scaled blocks); with ``P = U diag(l) U^T`` and ``Q = V diag(m) V^T``, ``M = U [(U^T C V)_ij /
    (l_i + m_j)] V^T``. A direction weak in ``A`` (a value head with one direction scaled down) is fixed by
    the other side, where the pivot alone would read it from B's rounding divided by its small singular value.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> A = torch.randn(40, 4, generator=g, dtype=torch.float64); A[:, 0] *= 1e-6  # one weak direction
    >>> X = torch.randn(30, 4, generator=g, dtype=torch.float64)
    >>> M = torch.randn(4, 4, generator=g, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    >>> B, XB = A @ M, X @ torch.linalg.inv(M).T  # XB M^T = X
    >>> B = B + 1e-9 * torch.randn(B.shape, generator=g, dtype=B.dtype)  # B's rounding
    >>> one = torch.linalg.lstsq(A, B).solution  # the pivot alone: the weak row of M read from the rounding
    >>> both = _two_sided_gauge(A, B, X, XB)
    >>> float((one - M).abs().max()) > 1e-4, float((both - M).abs().max()) < 1e-7
    (True, True)
    >>> _two_sided_gauge(A[:, 1:] @ torch.ones(3, 4, dtype=A.dtype), B, X * 0, XB * 0) is None  # fixed by neither
    True
    """
    torch = _torch()
    s1, s2 = max(_fro(A), _fro(B)) * noise[0], max(_fro(XA), _fro(XB)) * noise[1]
    if not (s1 > 0 and s2 > 0):
        return None
    A, B, XA, XB = A / s1, B / s1, XA / s2, XB / s2  # the weights: each side relative to its own rounding
    k = A.shape[1]

    def basis(X: Any) -> tuple[Any, Any, Any]:
        """``X = U diag(s) V^T``: ``U`` (rows x r), ``s`` padded with zeros to k, ``V`` (k x k, completed by X's
        null space where X has fewer rows than k)."""
        U, s, Vh = torch.linalg.svd(X, full_matrices=X.shape[0] < k)
        return U[:, :s.shape[0]], torch.cat([s, s.new_zeros(k - s.shape[0])]), Vh.mT

    # in the singular bases of A and XB, not through A^T A and XB^T XB: the normal equations square the
    # condition number, and a pivot of condition 5e5 (a gain channel shrunk by 1e-6 inflates one row) was fitted
    # to 9e-11 of B where the pivot alone fits it to 6e-16 (a genuine float64 pair refused). With M = Va Y Vx^T:
    # diag(sa^2) Y + Y diag(sx^2) = diag(sa) Ua^T B Vx + Va^T XA^T Ux diag(sx)
    Ua, sa, Va = basis(A)
    Ux, sx, Vx = basis(XB)
    den = sa.square()[:, None] + sx.square()[None, :]
    if float(den.min()) <= 1e3 * EPS64 * float(den.max()):
        return None
    C = torch.zeros(k, k, dtype=A.dtype)
    ra, rx = Ua.shape[1], Ux.shape[1]
    C[:ra] += sa[:ra, None] * (Ua.T @ B @ Vx)
    C[:, :rx] += (Va.T @ XA.T @ Ux) * sx[None, :rx]
    return Va @ (C / den) @ Vx.T


def _joint_gauge(A: Any, B: Any, YA: Any, YB: Any, cut_a: float, cut_y: float, nearest_identity: bool = False
                 ) -> Any:
    """An invertible ``M`` with ``A M = B`` and ``M YB = YA`` where neither ``A`` nor ``YB`` has full rank k.

    ``M0 = A^+ B`` solves the first on A's row space; the null space ``N`` of A (singular values of A at or
    below ``cut_a``) takes ``N N^T (YA - M0 YB) YB^+`` for the second; what both leave free (``N`` against the
    left null space ``L`` of YB, singular values at or below ``cut_y``) is filled with ``N L^T`` when the two
    have one dimension, so M is invertible where the data allow. (A value channel pruned on both sides:
    ``A = [V 0]``, ``YA = [O; 0]`` give ``M = [M_top; T M_bottom]``.) ``nearest_identity``: that part is filled
    to bring M nearest the identity instead (``N N^T (I - M) L L^T``), where the free direction is no symmetry
    (the caller reads it as undecided). The caller's check decides.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> V, O = torch.randn(6, 2, generator=g, dtype=torch.float64), torch.randn(2, 5, generator=g, dtype=torch.float64)
    >>> A, YA = torch.cat([V, torch.zeros(6, 2, dtype=V.dtype)], 1), torch.cat([O, torch.zeros(2, 5, dtype=V.dtype)])
    >>> Mt = torch.randn(4, 4, generator=g, dtype=V.dtype)  # the element relating A to B
    >>> M = _joint_gauge(A, A @ Mt, YA, torch.linalg.inv(Mt) @ YA, 1e-12, 1e-12)
    >>> bool(torch.allclose(A @ M, A @ Mt)), bool(torch.allclose(M @ torch.linalg.inv(Mt) @ YA, YA))
    (True, True)
    >>> bool(torch.linalg.svdvals(M).min() > 1e-8)  # invertible
    True
    """
    torch = _torch()
    Ua, sa, Vha = torch.linalg.svd(A)  # Vha: k x k (every right singular vector: the null space too)
    ra = int((sa > cut_a).sum())
    M = Vha[:ra].mT @ (Ua[:, :ra] / sa[:ra]).mT @ B  # A^+ B
    N = Vha[ra:].mT  # null space of A: k x (k - ra)
    Uy, sy, Vhy = torch.linalg.svd(YB)  # Uy: k x k
    ry = int((sy > cut_y).sum())
    pinv_y = Vhy[:ry].mT @ (Uy[:, :ry] / sy[:ry]).mT
    M = M + N @ (N.mT @ (YA - M @ YB)) @ pinv_y
    Ly = Uy[:, ry:]  # left null space of YB
    if N.shape[1] == Ly.shape[1] and N.shape[1]:
        M = M + (N @ (N.mT @ (torch.eye(M.shape[0], dtype=M.dtype) - M) @ Ly) @ Ly.mT if nearest_identity else
                 N @ Ly.mT)
    return M


def _unit_radius(noise: float, KB: Any, KA: Any) -> Any:
    """Per row: how far apart two FFN unit keys (rows of ``KB`` and ``KA``) can lie by the keys' relative rounding
    ``noise`` alone (:meth:`_Solver.unit_keys`), each key's rounding bounded by ``noise`` times twice its norm.

    Examples
    --------
    >>> import torch
    >>> _unit_radius(1e-3, torch.tensor([[3.0, 4.0]], dtype=torch.float64), torch.tensor([[0.0, 5.0]], dtype=torch.float64))
    tensor([0.0200], dtype=torch.float64)
    """
    return 2 * noise * (KB.norm(dim=1) + KA.norm(dim=1))


def _cond(M: Any) -> float:
    s = _torch().linalg.svdvals(M)
    return float(s.max() / s.min()) if float(s.min()) > 0 else math.inf


def _is_identity(element: Any, tol: float = 1e-12) -> bool:
    """Whether an element (of any factor, in act's format) is the identity within ``tol`` (float64 rounding)."""
    from symtrans.group.numeric import MonomialMatrix

    torch = _torch()
    if isinstance(element, MonomialMatrix):
        return element.perm.tolist() == list(range(element.perm.numel())) and \
            float((element.vals - 1).abs().max()) <= tol
    if isinstance(element, dict):
        return all(_is_identity(v, tol) for k, v in element.items() if not k.endswith("_inv"))
    if isinstance(element, (list, tuple)):
        if all(isinstance(x, int) for x in element):
            return list(element) == list(range(len(element)))
        return all(_is_identity(v, tol) for v in element)
    if hasattr(element, "shape"):
        x = element
        if x.ndim == 2 and x.shape[0] == x.shape[1] and x.shape[0] > 1 and float(x.diagonal().abs().min()) > 0.5:
            return float((x - torch.eye(x.shape[0], dtype=x.dtype)).abs().max()) <= tol
        return float(x.abs().max()) <= tol if x.numel() else True
    return False


# --------------------------------------------------------------------------- rows no input reads
def fill_unread(spec: GroupSpec, blocks: dict[str, Any]) -> dict[str, Any]:
    """``blocks`` with each embedding table's unread rows (:func:`~symtrans.catalogue.model.unread_rows`) replaced
    by the mean of its read rows; unchanged (the same dict) where the architecture has none.

    G's role-``unread`` factors move those rows to anything, so a fit that reads them (the residual map from the
    word table, the translations from its means) would see noise where B = g . A. Every other factor acts on a
    table's rows by one map and one added row, or by a column of per-row shifts, so the read rows' mean moves as
    each read row does: if B = g . A, the filled B is g' . (filled A) for a g' that differs from g only in the
    unread rows' parts. relate and the canonical form solve on the filled tables and then solve the unread rows
    on the true ones (:func:`unread_element`).

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("roberta-base")
    >>> pos = torch.arange(8.0, dtype=torch.float64).reshape(4, 2)
    >>> fill_unread(spec, {"layers": [], "pos": pos})["pos"].tolist()  # rows 0, 1 unread: the mean of rows 2, 3
    [[5.0, 6.0], [5.0, 6.0], [4.0, 5.0], [6.0, 7.0]]
    >>> b = {"layers": [], "pos": pos}; fill_unread(GroupSpec.from_arch("bert-base"), b) is b
    True
    """
    from symtrans.catalogue.model import unread_rows

    rows = {name: r for name, r in unread_rows(spec.arch).items() if blocks.get(name) is not None}
    if not rows:
        return blocks
    out = dict(blocks)
    for name, r in rows.items():
        table = blocks[name].clone()
        keep = _torch().ones(table.shape[0], dtype=_torch().bool)
        keep[list(r)] = False
        table[list(r)] = table[keep].mean(0, keepdim=True)
        out[name] = table
    return out


def unread_element(spec: GroupSpec, factor: str, cur: dict[str, Any], target: dict[str, Any] | None) -> dict[str, Any]:
    """The element of role-``unread`` factor ``factor`` that takes ``cur``'s unread rows to ``target``'s (to 0
    where ``target`` is None: the canonical form's choice), one component per tag, shaped as the factor's piece
    (the leading position rows: k x d_model; the pad row: 1 x d_model, placed on its row by :func:`act`).

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("roberta-base")
    >>> cur = {"pos": torch.ones(4, 2, dtype=torch.float64)}
    >>> unread_element(spec, "unused-position-rows", cur, None)["r"].tolist()
    [[-1.0, -1.0], [-1.0, -1.0]]
    """
    from symtrans.catalogue.model import unread_rows

    rows = unread_rows(spec.arch)
    el = {}
    for t in spec.factor(factor).tags:
        idx = list(rows[t.tensor])
        el[t.component] = (-cur[t.tensor][idx] if target is None else target[t.tensor][idx] - cur[t.tensor][idx])
    return el


# --------------------------------------------------------------------------- the solver
class _Solver:
    def __init__(self, spec: GroupSpec, cur: dict[str, Any], tgt: dict[str, Any], precision: Any) -> None:
        self.spec, self.cur, self.tgt, self.precision = spec, cur, tgt, precision
        self.steps: list[dict[str, Any]] = []
        self.ties: list[str] = []
        self.tied_heads: set[int] = set()  # layers where two heads of A match one of B (:meth:`_match`)
        self.kappa: dict[int | None, float] = {}
        # how much a dense residual map's fit amplifies B's rounding (and every tensor it moves carries): the
        # element's own condition number does not show it (:class:`_Fit`)
        self.fit = _Fit()
        self.unrounded = False  # the last refusal gave no rounding of its own (:meth:`refuse`)
        # the longest sum of products a dense step has applied (per layer; None: the model-wide residual map):
        # its float64 rounding enters every later pivot fit (relation_tolerance's ``length``)
        self.length: dict[int | None, int] = {}
        self.L = len(cur["layers"])
        # factors with a tag table: those G keeps (solved and applied) and those a present feature breaks (their
        # needed element must be the identity, else the feature is named)
        self.present = {f.name: f for f in spec.factors if f.tags and f.status != "broken"}
        self.broken = {f.name: f for f in spec.factors if f.tags and f.status == "broken"}
        self._tags_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._sketches: dict[tuple[Any, ...], Any] = {}
        self._invariants: dict[tuple[Any, ...], Any] = {}
        self.steps_before_residual = cur
        self.scaled = False
        # lazily acted tables (:meth:`apply`): off (None) unless the caller sets a size; relate sets LAZY_VALUES
        self.lazy_values: int | None = None
        self.pending: dict[str, list[tuple[str, tuple[Any, ...], Any, dict[str, Any]]]] = {}
        self._base_means: dict[tuple[str, int], tuple[Any, Any]] = {}
        # the target's means of a model table where the caller knows them (canonical's centred targets: exactly 0),
        # read by the translation solve instead of a pass over a target table built for the purpose
        self.tgt_means: dict[tuple[str, int], Any] = {}
        # the model tables whose target is only those means (canonical's): no target table to weight rows by
        self.prescribed: set[str] = set()
        a = spec.arch
        self.group = int(a.H) // int(a.H_kv)
        # off (the default): every pivot fit measured where it is solved. On (relate's first try, :func:`relate`):
        # the residual map chosen on a subset of the embedding table's rows, its full fit left to the check
        # (``deferred``: tensor, layer, the fit's tolerance; the check's residual bounds the fit) and the per-layer
        # key check after it skipped (``skipped``); where relate cannot keep that try's answer (:func:`relate`) a
        # second solve with this off gives it
        self.defer = False
        # (tensor, layer, tolerance, measure the fit): the residual map's fit on the embedding table, and the FFN
        # units' key distances once the window has matched them (measured where the check of that tensor exceeds
        # the tolerance or relate refuses: a related answer rests on the check alone)
        self.deferred: list[tuple[str, int | None, float, Any]] = []
        self.skipped: list[str] = []  # what the deferred try did otherwise than a solve without defer, in order
        self.dead_conjugation: list[str] = []  # :func:`dead_gain_actions` of A's conjugations (relate sets it)
        # why a refusal is no answer wherever it falls (:func:`relate` says it cannot decide)
        self.unresolved: list[str] = []
        # (layer, phase, why) where one layer's match in ``phase`` may be wrong ("units": keys B's storage cannot
        # resolve, :meth:`unit_keys` noise above KEY_NOISE_LIMIT; relate adds "heads" for :attr:`tied_heads`): a
        # refusal then is no answer only where that match can reach (:func:`match_scope`)
        self.local_unresolved: list[tuple[int, str, str]] = []
        # where a broken factor's needed move lies within what the element's condition number carries
        # (:meth:`must_be_identity`): no refusal there, and no related answer either (relate cannot decide)
        self.broken_moves: list[str] = []

    def solve_unread(self, a: dict[str, Any], b: dict[str, Any] | None) -> None:
        """After a solve on :func:`fill_unread`'s tables: the steps applied to the true ``a``, then each
        role-``unread`` factor's element solved on the true rows (to ``b``'s, or to 0 where ``b`` is None).
        The solver then holds the true tables (``b`` as the target, where given)."""
        for name in list(self.pending):
            self.materialise(name)
        self.cur = apply_steps(self.spec, a, self.steps)
        self._base_means, self.tgt_means = {}, {}
        if b is not None:
            self.tgt = b
        for f in with_role(self.spec, "unread", self.present.values()):
            self.apply(f.name, unread_element(self.spec, f.name, self.cur, b))

    # ---- helpers reading the tag tables
    def tags_on(self, tensor: str, how: str | None = None, component: str | None = None) -> list[Any]:
        key = (tensor, how, component)  # the tag tables do not change during a solve: scan them once per query
        hit = self._tags_cache.get(key)
        if hit is None:
            hit = self._tags_cache[key] = [
                (f, t) for f in self.present.values() for t in f.tags
                if t.tensor == tensor and (how is None or t.how == how) and (component is None or t.component == component)]
        return hit

    def applied_length(self, layer: int | None) -> int:
        """The longest sum of products the steps so far applied to ``layer``'s tensors (:attr:`length`)."""
        return max(self.length.get(None, 1), self.length.get(layer, 1) if layer is not None else 1)

    def layer_kappa(self, layer: int | None) -> float:
        """The condition number the steps so far brought to ``layer``'s tensors (:attr:`kappa`; the model's too)."""
        return max(self.kappa.get(None, 1.0), self.kappa.get(layer, 1.0) if layer is not None else 1.0)

    def u_pivot(self, tensor: str, layer: int | None, length: int = 1) -> float:
        # the check's own tolerance for a perfectly conditioned element (kappa = 1: 8 u, + gamma_n where a dense
        # n x n map was or is applied): a pivot refused here could not pass the check either. Half of it (4 u)
        # refused B computed in its own storage dtype (a float32 rotation at d = 256-1024: 4.2-4.9 u) and the
        # float64 canonical form of Qwen2/Qwen3 (5.2e-15 against 4.0e-15), which the check accepts
        n = max(length, self.applied_length(layer))
        return relation_tolerance(self.precision(tensor, layer), length=n)[0]

    def gain_for(self, tag: Any, layer: int, params: dict[str, Any]) -> Any:
        via = tag.via.split(",")[0]
        if tag.scope == "next":  # the norm of the layer before (or the embedding norm) feeds this layer
            return tensor_at(params, *boundary_norm(via, layer))
        return params["layers"][layer].get(via)

    def invariant(self, tensor: str, block: Any, layer: int | None, params: dict[str, Any]) -> Any:
        """``block`` projected onto what the present translation factors acting on ``tensor`` cannot move.

        A ``hyperplane_weight`` tag adds ``(1/gamma)^T v``: the rows are projected off ``1/gamma`` (left);
        a ``translate_ones`` tag adds ``w 1^T``: each row loses its mean (right). Rank-one updates, no dense projector.
        """
        gains = [g for g in (self.gain_for(t, layer, params) for _, t in self.tags_on(tensor, "hyperplane_weight"))
                 if g is not None]
        # the same block under the same gains gives the same projection: cached by identity (the solver never
        # changes a tensor in place; every step builds new ones), the objects kept so an id is never reused
        key = (tensor, id(block), *map(id, gains))
        hit = self._invariants.get(key)
        if hit is not None and hit[0] is block and all(a is b for a, b in zip(hit[1], gains)):
            return hit[2]
        out = block
        for g in gains:
            u = (1 / g).reshape(-1, 1)
            out = _torch().addmm(out, u, (u.T @ out) / float((u * u).sum()), alpha=-1)  # one pass, one buffer
        if self.tags_on(tensor, "translate_ones"):
            out = out - out.mean(1, keepdim=True)
        self._invariants[key] = (block, gains, out)
        return out

    def stacked(self, tensor: str, layer: int, params: dict[str, Any]) -> Any:
        """The per-head blocks of ``tensor`` in ``layer`` stacked (heads x rows x cols), each projected as
        :meth:`invariant` projects one block (the projections act on each block's own rows or columns, so the
        stack is projected at once), cached by the identity of the block list and the gains.
        """
        torch = _torch()
        blocks = params["layers"][layer][tensor]
        gains = [g for g in (self.gain_for(t, layer, params) for _, t in self.tags_on(tensor, "hyperplane_weight"))
                 if g is not None]
        key = ("stack", tensor, id(blocks), *map(id, gains))
        hit = self._invariants.get(key)
        if hit is not None and hit[0] is blocks and all(a is b for a, b in zip(hit[1], gains)):
            return hit[2]
        out = self._restacked(tensor, layer, blocks, gains)
        if out is None:
            out = torch.stack(blocks)
            for g in gains:
                u = (1 / g).reshape(-1, 1)
                out = _torch().baddbmm(out, u.expand(out.shape[0], -1, -1), (u.T @ out) / float((u * u).sum()),
                                       alpha=-1)
            if self.tags_on(tensor, "translate_ones"):
                out = out - out.mean(-1, keepdim=True)
        self._invariants[key] = (blocks, gains, out)
        recent = self._invariants.setdefault(("stacks", tensor, layer), [])
        recent.insert(0, ({id(b): (i, b) for i, b in enumerate(blocks)}, gains, out))
        del recent[2:]  # A's and B's latest
        return out

    def _restacked(self, tensor: str, layer: int, blocks: list[Any], gains: list[Any]) -> Any:
        """:meth:`stacked` of ``blocks`` read off a stack of the same block objects in another order, or None.

        Why: a head permutation (S_H) keeps each block as it was and only reorders the list, and every block's
        projection is its own (its rows' or columns' own rank-one term or mean), so the gauges' stacks of A's
        permuted heads are the heads' stacks taken in the new order: the same values, without the projections."""
        for where, was, out in self._invariants.get(("stacks", tensor, layer), ()):
            if len(was) != len(gains) or any(a is not b for a, b in zip(was, gains)):
                continue
            idx = [where.get(id(b), (None, None)) for b in blocks]
            if all(i is not None and b0 is b for (i, b0), b in zip(idx, blocks)):
                return out[[i for i, _ in idx]]
        return None

    def head_keys(self, params: dict[str, Any], layer: int) -> tuple[Any, Any]:
        """Per head h of ``layer``: the sketches ``P R`` of its invariant products (heads x d_model x k): W_Q W_K^T
        and W_V W_O, each block projected by :meth:`invariant`; batched over the heads (one product per tensor)."""
        torch = _torch()
        Q3, K3 = self.stacked("W_Q", layer, params), self.stacked("W_K", layer, params)
        V3, O3 = self.stacked("W_V", layer, params), self.stacked("W_O", layer, params)
        key = ("heads", id(Q3), id(K3), id(V3), id(O3))
        hit = self._invariants.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], (Q3, K3, V3, O3))):
            return hit[1]
        R = self.sketch(Q3.shape[1], Q3.dtype)
        kv = torch.arange(Q3.shape[0]) // self.group
        KR = matmul(K3.transpose(1, 2), R)
        # a key/value head per query head (no grouped-query attention): the heads' own blocks, no gathered copies
        qk = matmul(Q3, KR if self.group == 1 else KR[kv])  # W_Q^h (W_K^(kv h)T R)
        vo = matmul(V3 if self.group == 1 else V3[kv], matmul(O3, R))  # W_V^(kv h) (W_O^h R)
        self._invariants[key] = ((Q3, K3, V3, O3), (qk, vo))
        return qk, vo

    def apply(self, factor: str, element: Any, note: str | None = None) -> None:
        """Apply one factor's element to the current parameters (a step of the element written).

        With :attr:`lazy_values` set, a model table of at least that many values (the word table) is not
        translated here: a step whose tags on it are all translations (:data:`ROW_WISE`) is kept
        (:attr:`pending`); the solve reads the table's means from the stored table's (:meth:`col_means`,
        :meth:`row_means`) and the check applies the steps row chunk by row chunk (:meth:`lazy_residual`), so no
        translated copy of the table is made. Any other step on the table, or one that reads it through another
        tensor's tag, first writes the table out (:meth:`materialise`).
        """
        if _is_identity(element):
            return  # nothing to move: no step
        from symtrans.group.elements import elements_of

        f = self.spec.factor(factor)
        lazy = self._lazy_tags(f) if self.lazy_values is not None and elements_of(self.spec, factor).place is None \
            else {}
        for name in list(self.pending):
            if (name not in lazy and any(t.tensor == name for t in f.tags)) \
                    or any(t.via and name in t.via.split(",") for t in f.tags):
                self.materialise(name)
        before = self.cur
        for l, k in conjugation_kappa(self.spec, factor, element, before).items():  # through spread gains
            self.kappa[l] = max(self.kappa.get(l, 1.0), k)
        if lazy:
            self.cur = act(self.spec, before, factor, element, tags=tuple(t for t in f.tags if t.tensor not in lazy))
            for name, tags in lazy.items():
                self.pending.setdefault(name, []).append((factor, tags, element, before))
        else:
            self.cur = act(self.spec, before, factor, element)
        self.steps.append({"factor": factor, "element": element, **({"note": note} if note else {})})

    def _lazy_tags(self, f: Factor) -> dict[str, tuple[Any, ...]]:
        """The large model tables ``f`` may act on lazily, with its tags on each: every tag a translation of
        :data:`ROW_WISE` (a row, a per-row column or a block added), on the whole table."""
        out = {}
        for name in {t.tensor for t in f.tags if t.scope == "model"}:
            v = self.cur.get(name)
            if v is None or not hasattr(v, "dim") or v.dim() != 2 or v.numel() < self.lazy_values:
                continue
            tags = tuple(t for t in f.tags if t.tensor == name)
            if all(t.how in ROW_WISE and t.index is None for t in tags):
                out[name] = tags
        return out

    def chunks(self, name: str, into: Any = None) -> Any:
        """(first row, rows of g . A) of model table ``name`` over row chunks, the pending steps applied to each
        chunk (through :func:`act` and the factor's tag rows for this table; per-row components sliced).

        With steps pending, every chunk is written into one buffer: a chunk holds its rows only until the next is
        drawn (the caller reads it, or subtracts in it, first). A fresh chunk per step cost the check 30 ms on the
        bundled model's word table, in page faults alone (the allocator hands each freed chunk back to the system).
        ``into``: a table of the same shape, each chunk written into its own rows there instead (:meth:`materialise`).
        """
        base = self.cur[name]
        adds = self._adds(name)
        buf = None if not adds or into is not None else base.new_empty((min(_CHUNK_ROWS, base.shape[0]),
                                                                          *base.shape[1:]))
        for i in range(0, base.shape[0], _CHUNK_ROWS):
            x = base[i:i + _CHUNK_ROWS]
            if adds:
                out = into[i:i + x.shape[0]] if into is not None else buf[:x.shape[0]]
                for k, (per_row, sign, g) in enumerate(adds):
                    term = sign * (g[i:i + x.shape[0]] if per_row else g)  # per-row components: this chunk's rows
                    if k == 0:  # the first sum written into the buffer, the rest added into it
                        _torch().add(x, term, out=out)
                    else:
                        out.add_(term)
                x = out
            yield i, x

    def _adds(self, name: str) -> list[tuple[bool, int, Any]]:
        """The pending steps on model table ``name`` as ``(per_row, sign, component)``: each tag adds ``sign *
        component`` to the table (act's translations, :data:`ROW_WISE`), in the order act applies them (the same
        sums, without act's walk per chunk and step); a per-row component is sliced with the chunk."""
        return [(*ROW_WISE[t.how], element[t.component]) for _, tags, element, _ in self.pending.get(name, [])
                for t in tags]

    def materialise(self, name: str) -> None:
        """Write model table ``name`` out with its pending steps applied (one new table)."""
        if not self.pending.get(name):
            return
        base = self.cur[name]
        out = new_table(tuple(base.shape), base)  # huge pages: a fresh table, not paged in 4 KiB at a time
        for _ in self.chunks(name, into=out):  # :meth:`chunks`' sums, each written into its rows of the new table
            pass
        self.cur = {**self.cur, name: out}
        del self.pending[name]

    def table(self, name: str) -> Any:
        """Model table ``name`` of the current parameters (written out first if steps are pending)."""
        self.materialise(name)
        return self.cur[name]

    def col_means(self, name: str, weights: Any = None) -> Any:
        """The column means (1 x n) of the current model table ``name`` (pending steps: from the stored table's);
        with ``weights`` (m, summing to 1), the rows' weighted mean instead."""
        base = self.cur[name]
        if weights is not None:
            x = _weighted_rows(base, weights)
        else:
            m = self._base_means.get((name, 0))
            if m is None or m[0] is not base:  # the stored table's column means, once (torch's cascade sum: a plain
                m = self._base_means[(name, 0)] = (base, base.mean(0, keepdim=True))  # ones @ x loses 20x accuracy)
            x = m[1]
        # every pending step adds a row built from its component to each row: the mean over the rows of the
        # table moves by the mean of what is added (a per-row component: its own mean over the rows)
        for factor, tags, element, before in self.pending.get(name, []):
            el = dict(element)
            for t in tags:
                if ROW_WISE[t.how][0]:
                    g = element[t.component]
                    el[t.component] = g.mean(0, keepdim=True) if weights is None else _weighted_rows(g, weights)
            x = act(self.spec, {**before, "layers": [], name: x}, factor, el, tags=tags)[name]
        return x

    def carry_col_means(self, name: str, means: Any, mono: Any) -> None:
        """After the residual factor's monomial ``mono`` acted on model table ``name``, its column means are
        ``means`` (the table's before, 1 x n, or None: nothing known) moved by ``mono``, exactly (a signed
        permutation of the columns): kept for :meth:`col_means`, which would read the whole table again. Only where
        no step is pending on the table (its stored values are the acted ones)."""
        if means is not None and not self.pending.get(name):
            self._base_means[(name, 0)] = (self.cur[name], means @ mono)

    def row_weights(self, name: str) -> Any:
        """:func:`rounding_weights` of model table ``name``'s rows (A's stored table and B's) for a shift read from
        them, where a plain mean would carry one row's rounding into it; None where it would not.

        Each row of B - A holds the shift plus rounding of about ``u`` times the row's scale, so the mean carries the
        rows' mean scale. Where that is more than twice the floor's (:func:`_floor_scale`; on the bundled model 0.96
        times as stored, 0.97 with one word row at 1e3 times the rest, 2.35 at 1e5) the rows are weighted: every row
        of B - A holds the same shift, so any weights read it."""
        return rounding_weights(self.cur[name], self.tgt[name], uneven=2.0)

    def row_means(self, name: str) -> Any:
        """The row means (m x 1) of the current model table ``name`` (pending steps: from the stored table's)."""
        base = self.cur[name]
        m = self._base_means.get((name, 1))
        if m is None or m[0] is not base:
            m = self._base_means[(name, 1)] = (base, base.mean(1, keepdim=True))
        x = m[1]
        for _, tags, element, _ in self.pending.get(name, []):  # each moves a row's mean by that of what it adds
            for t in tags:
                g = element[t.component]
                x = x + ROW_WISE[t.how][1] * (g if t.how == "translate_ones" else g.mean(1, keepdim=True))
        return x

    def target_mean(self, name: str, dim: int) -> Any:
        """The means of the target's model table ``name`` along ``dim`` (given in :attr:`tgt_means`, else read)."""
        given = self.tgt_means.get((name, dim))
        return given if given is not None else self.tgt[name].mean(dim, keepdim=True)

    def lazy_residual(self, name: str, keep: tuple[int, ...] = ()) -> tuple[float, Any]:
        """``|g.A - B|_F / |B|_F`` of model table ``name`` in one pass over row chunks (as :func:`_rel` sums a
        large table), the pending steps applied chunk by chunk: the check, without an acted copy. With ``keep``
        (axes of :func:`slice_axes`), also the table's :func:`slice_stats` along them, summed in the same pass."""
        B = self.tgt[name]
        fresh = bool(self._adds(name))  # the chunks are :meth:`chunks`' buffer (else views of the stored table)
        if not keep:
            return _rel_chunks(((x, B[i:i + x.shape[0]]) for i, x in self.chunks(name)), in_place=fresh), None
        torch = _torch()
        rows: list[list[Any]] = [[], []]
        cols: list[Any] = [0.0, 0.0]
        for i, x in self.chunks(name):
            t = B[i:i + x.shape[0]]
            for k, y in enumerate((x.sub_(t) if fresh else x - t, t)):
                norms = dict(zip(keep, _slice_norms(y, keep)))
                if 0 in keep:
                    rows[k].append(norms[0])
                if 1 in keep:
                    cols[k] = cols[k] + norms[1].square()
        stats = {p: tuple(torch.cat(rows[k]) if p == 0 else cols[k].sqrt() for k in (0, 1)) for p in keep}
        return _stats_residual(stats), stats

    def refuse(self, factor: str, layer: int | None, tensor: str, size: float, tol: float,
               features: list[str], detail: str = "", *, rounding: float | None = None,
               kappa: float = 1.0, through_map: bool = True) -> None:
        """Stop the solve: no element of ``factor`` explains B at ``layer``, ``tensor`` (``size`` against ``tol``).

        ``rounding``: where given, the rounding of the compared values under a perfectly conditioned element
        (``tol`` less any headroom a key comparison adds). Where the element on that layer (the steps so far, and
        ``kappa``: the one being fitted) has a condition number ``k`` past :data:`KAPPA_MAX` and ``size`` is
        within ``k rounding``, what is unexplained is within what such an element carries of the rounding (a
        rotation conjugating through a gain with an outlier channel): the refusal is then no answer
        (:attr:`unresolved`: relate cannot decide). Likewise within :attr:`fit` times it, past what a tolerance allows for
        (a residual map fitted on an ill-conditioned embedding table). A refusal that gives no rounding is read
        against the fit alone once the solve stops (:func:`_relate`, ``tol`` as the rounding), unless
        ``through_map`` is False: the fit's own residual on the table it is fitted on, which the fit's
        amplification does not reach (a least-squares residual is at most what B's rounding leaves)."""
        why = self.undecided_why(factor, layer, tensor, size, rounding, kappa) if rounding is not None else None
        if why is not None:
            self.unresolved.append(why)
        self.unrounded = rounding is None and through_map
        raise _Refused(Stop(factor, layer, tensor, size, tol, features, detail))

    def undecided_why(self, factor: str, layer: int | None, tensor: str, size: float, rounding: float,
                      kappa: float = 1.0) -> str | None:
        """Why a refusal of ``size`` against ``rounding`` is no answer (:meth:`refuse`'s rule), or None where it is
        one: within the rounding times a condition number past :data:`KAPPA_MAX`, the element's on ``layer`` (the
        steps so far, and ``kappa``) or the residual map's fit (:attr:`fit`, :class:`_Fit`)."""
        k = max(float(kappa), self.layer_kappa(layer))
        limit = kappa_limit(self.precision(tensor, layer))  # a key (a product) names no tensor: the coarsest dtype
        left = f"what {factor} leaves at {tensor} ({size:.3g}; rounding {rounding:.3g}) is within what that number " \
            "carries"
        where = "" if layer is None else f"layer {layer}: "
        if limit < k < math.inf and size <= rounding * k:
            return f"{where}the element needed there has condition number {k:.3g}, past {limit:.3g}, and {left}"
        if self.fit.past and size <= rounding * self.fit.kappa:
            return f"{where}the residual map was fitted on {self.fit.text()}, and {left}"
        return None

    def left_to_check(self, factor: str, layer: int | None, tensor: str, size: float, rounding: float) -> bool:
        """Whether a refusal of ``size`` at ``tensor`` on ``layer`` (``rounding``: the compared values' under a
        perfectly conditioned element) is left to the check instead: within what the check itself leaves
        undecided (:func:`accepted_tolerance`'s upper end: ``4 u (1 + kappa)`` of the steps so far on the layer,
        uncapped), or where :meth:`refuse` would give no answer (:meth:`undecided_why`). A fit within them is no
        evidence, and the check's answer is no weaker: related where every tensor is within its tolerance, else
        "cannot decide" or "not related" by the same rule.

        Examples
        --------
        >>> s = _Solver(GroupSpec.from_arch("llama2-7b"), {"layers": []}, {"layers": []}, lambda n, l: "float32")
        >>> tol = relation_tolerance("float32")[0]
        >>> s.left_to_check("vo-gauge", 0, "W_O", 27 * tol, tol)  # a perfectly conditioned layer: an answer
        False
        >>> s.kappa[0] = 1e4  # a value gauge of condition number 1e4 solved on layer 0: within what it carries
        >>> s.left_to_check("vo-gauge", 0, "W_O", 27 * tol, tol), s.left_to_check("vo-gauge", 0, "W_O", 1.0, tol)
        (True, False)
        """
        beyond = max(rounding, accepted_tolerance(self.precision(tensor, layer), self.layer_kappa(layer))[1])
        return size <= beyond or self.undecided_why(factor, layer, tensor, size, rounding) is not None

    def features_breaking(self, f: Factor) -> list[str]:
        return [f"{b.feature}: {b.reason}" for b in f.broken_by if b.present and b.effect == "breaks"]

    def features_violated(self, factors: list[Factor], ok: dict[str, bool]) -> list[str]:
        """Present features of ``factors`` whose constraint (:data:`KEEPS`) the needed element violates."""
        out = []
        for f in factors:
            for b in f.broken_by:
                kind = KEEPS.get(b.feature)
                if b.present and kind is not None and ok.get(kind) is False:
                    text = _feature_line(f, b)
                    if text not in out:
                        out.append(text)
        return out

    # ---- 1. the residual map
    def residual(self) -> None:
        torch = _torch()
        cands = [f for f in self.spec.factors if f.scope == "model" and any(t.component == "Q" for t in f.tags)] \
            + [f for f in with_role(self.spec, "residual") if not f.tags]
        if not cands or "word" not in self.cur:
            return
        A, B = self.table("word"), self.tgt["word"]
        d = A.shape[1]
        centred = bool(self.tags_on("word", "translate_ones"))
        rows = bool(self.tags_on("word", "translate_rows"))
        # the tables projected off what the translations move, row chunk by row chunk: the column means are taken
        # once on the whole table, the row means are per row, so each chunk is centred exactly as the whole table
        # would be, without whole-table copies (each one paged in anew); whole tables only for least squares
        cmA = A.mean(0, keepdim=True) if rows else None
        cmB = B.mean(0, keepdim=True) if rows else None
        centre_rows = centred  # fixed here: the least-squares fallback below may drop ``centred``

        def centre(X: Any, cm: Any) -> Any:
            if cm is not None:
                X = X - cm  # a new tensor: the row centring below may act on it in place
                if centre_rows:
                    X.sub_(X.mean(1, keepdim=True))
            elif centre_rows:  # right-multiplication by I - 11^T/d: each row loses its mean
                X = X - X.mean(1, keepdim=True)
            return X

        def dists(maps: list[Any]) -> tuple[float, list[float]]:
            """max(|A|_F, |B|_F) (the scale of the values the map moves, as the check's, :func:`tensor_residuals`)
            and |centre(A) M - centre(B)|_F for every signed permutation M in ``maps``, in ONE pass over
            row chunks of both tables, each difference built in one buffer per chunk: with centre(X) =
            (X - c)(I - 11^T/d) (c the column means, where a row translation acts; the row centring where a
            centring shift acts) and s = 1^T M (M's signs, by column),
            centre(A) M - centre(B) = A M - B - (c_A M - c_B) - r_A s + r_B 1^T, r the rows' means of X - c."""
            na2, nb2, tot = 0.0, 0.0, [0.0] * len(maps)
            shift = [(cmA @ M - cmB) if cmA is not None else None for M in maps]
            mA = float(cmA.mean()) if cmA is not None else 0.0
            mB = float(cmB.mean()) if cmB is not None else 0.0
            for i in range(0, A.shape[0], _CHUNK_ROWS):
                a, b = A[i:i + _CHUNK_ROWS], B[i:i + _CHUNK_ROWS]
                na2, nb2 = na2 + _fro(a) ** 2, nb2 + _fro(b) ** 2
                if centre_rows:
                    rA, rB = a.mean(1) - mA, b.mean(1) - mB
                for j, M in enumerate(maps):
                    D = (a @ M).sub_(b)  # a fresh gathered chunk: the rest in place
                    if shift[j] is not None:
                        D.sub_(shift[j])
                    if centre_rows:
                        D.addr_(rA, M.vals, alpha=-1).add_(rB[:, None])
                    tot[j] += _fro(D) ** 2
            return math.sqrt(max(na2, nb2)), [math.sqrt(t) for t in tot]

        tol = self.u_pivot("word", None)
        # the candidate signed permutation first (columns matched on a subset of rows, cheap), so that one pass
        # over the whole tables measures both the identity and the candidate (each exact, on every value)
        rows_used = torch.linspace(0, A.shape[0] - 1, min(A.shape[0], 4 * d)).long()
        As, Bs = centre(A[rows_used], cmA), centre(B[rows_used], cmB)
        # for the match only, a row far larger than the rest (a word row at 1e10) must not make every column a copy
        # of its entry: the subset's rows are centred on their weighted column means (:func:`rounding_weights`, the
        # same weights on both sides), not on the plain means (which that row sets, and every row would then hold),
        # then each scaled to norm 1. Both commute with a signed permutation and the translations as the means do
        if rows:
            Ar, Br = A[rows_used], B[rows_used]
            w = rounding_weights(Ar, Br)
            Ar, Br = (centre(X - _weighted_rows(X, w), None) for X in (Ar, Br))
        else:
            Ar, Br = As, Bs
        Ms, Ns = (X / X.norm(dim=1, keepdim=True).clamp_min(1e-300) for X in (Ar, Br))
        na, nb = Ms.norm(dim=0), Ns.norm(dim=0)
        cos = (Ms.T @ Ns) / (na[:, None] * nb[None, :]).clamp_min(1e-300)
        best = cos.abs().argmax(0)
        signs = torch.sign(cos[best, torch.arange(d)])
        perm = best.tolist()
        from symtrans.group.numeric import MonomialMatrix

        Qm = MonomialMatrix(perm, signs.to(A.dtype)) if len(set(perm)) == d else None
        # the identity is measured in full unless the subset rows alone already put it past the tolerance (a
        # lower bound of its full distance; B's norm read first, without a copy); a candidate always is
        skip_id = Qm is not None and _fro(As - Bs) > tol * _fro(B)
        if cmB is not None:  # B's column means, read again by the embedding translation's solve
            self.tgt_means.setdefault(("word", 0), cmB)
        # (a candidate equal to the identity that the subset rows already put past the tolerance is measured)
        deferred = self.defer and (not skip_id or not _is_identity(Qm))
        if deferred:
            # the subset's choice (the identity where the subset rows allow it, else the candidate), its fit on
            # every value left to the check: centre() is a projection that kills what the translations add, so
            # |centre(A) M - centre(B)|_F <= |g.A - B|_F on the word table, and a check residual within ``tol``
            # means this solve would have measured a fit within ``tol`` and chosen the same map
            M = MonomialMatrix(list(range(d)), torch.ones(d, dtype=A.dtype)) if not skip_id else Qm

            def fit() -> float:  # the fit this solve would have measured (for relate, where the check cannot tell)
                nb, fits = dists([M])
                return fits[0] / max(nb, 1e-300)

            self.deferred.append(("word", None, tol, fit))
            if not skip_id:
                return  # Q = I
        identity = MonomialMatrix(list(range(d)), torch.ones(d, dtype=A.dtype))
        maps = ([] if skip_id else [identity]) + ([Qm] if Qm is not None else [])
        nB, fits = dists(maps) if not deferred else (1.0, [0.0])  # deferred: the candidate, fit 0 until checked
        nB = max(nB, 1e-300)  # the rounding is relative to the stored tables, not to their projections
        id_fit = math.inf if skip_id else fits[0]
        rest = fits[0 if skip_id else 1:]
        if id_fit / nB <= tol:
            return  # Q = I
        mono, mono_fit = None, math.inf
        if Qm is not None:
            mono_fit = rest[0] / nB
            if mono_fit <= tol:
                mono = Qm
        if mono is None and A.shape[0] < d:  # a dense map fitted to fewer rows than columns: any B's table fits
            raise SymtransError(f"relate: A's word table has {A.shape[0]} rows, fewer than d_model = {d}, so it does "
                                "not determine a dense residual map (every B's table is a linear image of it); "
                                "relate cannot decide this pair")
        if mono is not None:
            X, fit, Q = mono.dense(), mono_fit, mono.dense()
        else:  # modulo the all-ones column where centring shifts act (a row-mean shift is itself linear, so
            # the table alone would also fit, with a Q that is not orthogonal); else, or if that fails, the table
            Ac, Bc = centre(A, cmA), centre(B, cmB)
            X, sv = _lstsq(Ac, Bc, singular_values=True)
            fit, Q = _fro_diff(Ac @ X, Bc) / nB, X
            if centred:
                Q = X + torch.full((d, d), 1.0 / d, dtype=A.dtype)
            if fit > tol and centred:  # the fit that explains more is kept (and so reported where it fails)
                Ar, Br = (A - A.mean(0, keepdim=True), B - B.mean(0, keepdim=True)) if rows else (A, B)
                X2, sv2 = _lstsq(Ar, Br, singular_values=True)
                fit2 = _fro_diff(Ar @ X2, Br) / nB
                if fit2 < fit:
                    X, sv, fit, Q, centred = X2, sv2, fit2, X2, False
                    Ac, Bc = Ar, Br  # the tables the map is fitted on
            # the table's condition number (its singular values on the centred columns: the last is 0 there)
            live = sv[:-1] if centred else sv
            cond = float(live[0] / live[-1]) if float(live[-1]) > 0 else math.inf
            self.fit = _Fit.of(cond, (A, B), (Ac, Bc))
        gram = Q.T @ Q
        ones = torch.ones(d, 1, dtype=A.dtype)
        off = _fro(gram - torch.eye(d, dtype=A.dtype))
        ok = {"monomial": mono is not None, "orthogonal": off <= 1e3 * tol * d ** 0.5, "fixes-ones": True}
        # what the fit's amplification carries off orthogonal: the rounding times it, not the check's 1e3 headroom
        # times it (a BERT word table stored 29 times its centred part, one column x1.1: 0.197 off, within 0.22 so
        # counted, where the rounding through that number reaches 3e-5)
        if not ok["orthogonal"] and self.fit.past and off <= tol * d ** 0.5 * self.fit.kappa:
            # a table too ill-conditioned to fix the map to its rounding: a map off orthogonal by no more than
            # that carries is no evidence of one G lacks
            self.unresolved.append(f"the residual map was fitted on {self.fit.text()}, which does not fix the map to "
                                   f"B's rounding (it is {off:.3g} off orthogonal, within what that number carries)")
        if mono is not None:
            ok["fixes-ones"] = bool((signs == signs[0]).all())
        elif centred:  # only Q restricted to 1^perp is seen: it must be an isometry of 1^perp
            Cd = _centre_cols(d, A.dtype)
            ok["fixes-ones"] = _fro(X.T @ X - Cd) <= 1e3 * tol * d ** 0.5
        else:
            ok["fixes-ones"] = min(_fro(Q @ ones - ones), _fro(Q @ ones + ones)) <= 1e3 * tol * d ** 0.5
        if self.spec.arch.norm == "rmsnorm":
            ok["fixes-ones"] = True  # no centring: nothing asks Q to fix the all-ones direction
        map_tol = tol  # what the identity's and the candidate's fits were held to (the refusal below reports them)
        if mono is None:  # a dense d x d map: its float64 products carry their own rounding (relation_tolerance)
            tol = self.u_pivot("word", None, d)
        if fit > tol:
            self.refuse(cands[0].name, None, "word", fit, tol, [],
                        "the embedding table is not a linear map of A's: no residual map explains it", through_map=False)
        perm_f = next((f for f in with_role(self.spec, "residual", cands) if f.kind == "discrete" and f.tags), None)
        rot_f = next((f for f in with_role(self.spec, "residual", cands) if f.kind == "continuous" and f.tags), None)
        if mono is not None and perm_f is not None and ok["fixes-ones"]:
            self.apply(perm_f.name, {"Q": mono})
            self.carry_col_means("word", cmA, mono)
            self.kappa[None] = 1.0
            self.residual_keys(perm_f, ok, {"Q": mono})
            return
        if rot_f is not None and ok["orthogonal"] and ok["fixes-ones"]:
            if self.dead_conjugation:  # the rotation's action divides by a gain of 0 (:func:`dead_gain_actions`)
                raise SymtransError(f"relate: B needs a residual rotation (not a signed permutation), and "
                                    f"{self.dead_conjugation[0]}: G as modelled assumes that gain non-zero, so "
                                    "relate cannot decide this pair")
            self.apply(rot_f.name, {"Q": Q})
            self.kappa[None] = max(self.kappa.get(None, 1.0), _cond(Q))
            self.length[None] = int(element_length(Q))
            self.residual_keys(rot_f, ok, {"Q": Q})
            return
        # no factor of G has this element: name what breaks it
        feats: list[str] = []
        rot = next((f for f in with_role(self.spec, "residual") if f.kind == "continuous"), None)
        if rot is not None and not rot.tags:
            feats += [f"{rot.name} {s}" for s in self.features_breaking(rot)]
        feats += self.features_violated(cands, ok)
        # measured in the one pass above, on every value, and held to the pivot's tolerance there, not to the dense
        # map's (a signed permutation 2.05e-15 off a float64 word table was refused "within" 7.99e-15)
        size = (rest[0] if Qm is not None else id_fit) / nB
        self.refuse(rot.name if rot is not None else cands[0].name, None, "word", size, map_tol, feats,
                    "the residual map B needs (from the embedding table) is "
                    + ("orthogonal" if ok["orthogonal"] else "not orthogonal")
                    + ("" if ok["fixes-ones"] else " and does not fix the all-ones direction")
                    + ("" if ok["monomial"] else ", not a signed permutation"))

    def layer_keys(self, params: dict[str, Any], l: int) -> dict[str, Any]:
        """Per-layer weight keys invariant under the per-layer factors: sum_h W_Q W_K^T, sum_h W_V W_O, W_in W_out
        (named in :data:`LAYER_KEYS` with their two factors)."""
        lp = params["layers"][l]
        qk_name, vo_name, ffn_name = LAYER_KEYS
        out = {}
        R = self.sketch(lp["W_Q"][0].shape[0], lp["W_Q"][0].dtype)  # P R, not P: equal P give equal keys
        out[qk_name], out[vo_name] = (x.sum(0) for x in self.head_keys(params, l))
        # invariant unless a hidden-unit scaling moves W_out without W_in (a gate's scaling moves W_gate)
        if all(any(t.tensor == "W_in" for t in x.tags)
               for x in with_role(self.spec, "hidden-scaling", self.present.values())):
            out[ffn_name] = matmul(self.invariant("W_in", lp["W_in"], l, params),
                                   matmul(self.invariant("W_out", lp["W_out"], l, params), R))
        return out

    def fit_rows(self, f: Factor, params: dict[str, Any], l: int | None) -> Any:
        """Blocks whose rows norm-scaling factor ``f`` scales by the inverse of its element (the gain's channels as
        rows) and no other factor moves once the residual map is applied: the layer keys (:data:`LAYER_KEYS`)
        whose left factor ``f`` scales and whose right factor it does not (``W_V W_O`` for an attention norm,
        ``W_in W_out`` for an FFN norm), invariant under the heads', units' and gauges' factors. Elsewhere (a
        model-wide factor, or no such key) :meth:`scaled_rows`, which those factors may also move.

        Examples
        --------
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("gemma3"); spec = GroupSpec.from_arch(w.arch)
        >>> s = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "float32")
        >>> [tuple(x.shape) for x in s.fit_rows(spec.factor("ln2-scaling"), s.cur, 0)]  # d_model x sketch width
        [(32, 32)]
        """
        if l is not None:
            inverse = {t.tensor for t in f.tags if t.how == "inverse" and t.side == "left" and t.scope == f.scope}
            keys = self.layer_keys(params, l)
            found = [keys[name] for name, (x, y) in LAYER_KEYS.items() if name in keys and x in inverse
                     and y not in inverse]
            if found:
                yield from found
                return
        yield from self.scaled_rows(f, params, l)

    def sketch(self, d: int, dtype: Any, k: int = 32) -> Any:
        """One fixed random d x k matrix R (entries N(0, 1/k)): keys are sketches P R of G-invariant products P.

        Equal products give equal sketches, so a refusal on a sketch is sound; different products give different
        sketches almost surely, and a difference a sketch missed is caught by the per-tensor check of g . A. The
        relative distance of two sketches estimates that of the products (Johnson-Lindenstrauss; k = 32) at
        k / d of the work of forming the d x d products.
        """
        torch = _torch()
        key = (d, dtype, k)
        if key not in self._sketches:
            g = torch.Generator().manual_seed(1)
            self._sketches[key] = torch.randn(d, k, generator=g, dtype=torch.float64).to(dtype) / math.sqrt(k)
        return self._sketches[key]

    def residual_keys(self, f: Factor, ok: dict[str, bool], element: dict[str, Any]) -> None:
        """After the residual map ``element``: every layer's keys must agree; else say which factor's action would.

        The element is passed, not read off the last step: an identity map applies no step (a B that differs from
        A by a word-table translation alone), and the last step was then another factor's, or none (IndexError)."""
        self.residual_element = element
        self.scalings()
        if self.defer:  # a diagnostic of a refusal: the per-tensor check decides; a refusal re-solves without defer
            self.skipped.append("the per-layer key check after the residual map")
            return
        fails = []  # (layer, key, size, tolerance, B's key): every layer's, so a refusal can say which agree
        for l in range(self.L):
            mine, theirs = self.layer_keys(self.cur, l), self.layer_keys(self.tgt, l)
            noise = None
            for name in mine:
                size = _rel(mine[name], theirs[name])
                tol = 1e3 * relation_tolerance(self.precision("W_Q", l), self.layer_kappa(l))[0]
                if size > tol and name in HEAD_KEYS:  # a sum of the heads' keys: within their rounding bounds, summed
                    noise = float(self.head_key_noise(l, b_only=True).sum()) if noise is None else noise
                    bound = noise / max(float(theirs[name].norm()), 1e-300)
                    if size <= bound and self.key_resolved(l, name, bound):
                        continue
                elif size > tol and LAYER_KEYS.get(name) == ("W_in", "W_out"):  # the units' keys, likewise
                    bound = self.ffn_key_noise(l) / max(float(theirs[name].norm()), 1e-300)
                    if size <= bound:
                        if bound > KEY_NOISE_LIMIT:  # this layer's units only, as the units' match says it
                            self.local_unresolved.append((l, "units", (
                                f"B's storage cannot resolve it: layer {l}: the FFN layer key {name} carries "
                                f"{bound:.2g} relative rounding noise, past {KEY_NOISE_LIMIT:g} (a part far below a "
                                "translation G cancels there)")))
                        continue
                if size > tol:
                    fails.append((l, name, size, tol, theirs[name]))
        if not fails:
            return
        l, name, size, tol, target = fails[0]
        feats = self.other_residual_actions(f, l, name, target, ok)
        agree = [k for k in range(self.L) if all(x[0] != k for x in fails)]
        owner = self.key_owner(name)
        if not feats and agree and owner is not None:
            # the map gives B's keys in other layers: the difference is this layer's own, named at the first
            # per-layer factor the solve fits on the key's tensors (the key is invariant under every one of them)
            factor, detail = owner.name, (
                f"the key is unchanged by every per-layer factor of G, and the residual map found on the embedding "
                f"table gives B's keys in {len(agree)} of the {self.L} layers but not in this one: "
                f"no element of {owner.name} or of any other per-layer factor explains this layer (key tolerance "
                "1e3 x the tensor tolerance)")
        else:
            factor, detail = f.name, (
                f"the residual map found on the embedding table, acted through {f.name}'s tags, does not give B's "
                "readers and writers (key tolerance 1e3 x the tensor tolerance: the per-tensor check is decisive)")
        self.refuse(factor, l, name, size, tol, feats, detail, rounding=relation_tolerance(self.precision("W_Q", l))[0])

    def key_owner(self, key: str) -> Factor | None:
        """The first per-layer factor the solve fits (:func:`_solved_from`) acting on a layer key's tensors
        (:data:`LAYER_KEYS`): the factor a difference in that key, and in no other layer's, is named at.

        Examples
        --------
        >>> s = _Solver.__new__(_Solver); s.spec = GroupSpec.from_arch("bert-base")
        >>> [s.key_owner(k).name for k in LAYER_KEYS]
        ['S_H', 'S_H', 'S_dff']
        """
        tensors = set(LAYER_KEYS[key])
        return next((g for g in _solved_from(self.spec, "heads")
                     if g.scope == "layer" and g.status != "broken" and any(t.tensor in tensors for t in g.tags)), None)

    def other_residual_actions(self, f: Factor, l: int, name: str, target: Any, ok: dict[str, bool]) -> list[str]:
        """Whether another residual factor's tag table (with the same map) explains B; its violated features."""
        before = self.steps_before_residual
        out = []
        for g in self.spec.factors:
            if g.name == f.name or g.scope != "model" or not any(t.component == "Q" for t in g.tags):
                continue
            Q = self.residual_element["Q"]
            Qd = Q.dense() if hasattr(Q, "dense") else Q
            trial = act(self.spec, before, g.name, {"Q": Qd})
            key = self.layer_keys(trial, l)[name]
            if _rel(key, target) <= 1e3 * relation_tolerance(self.precision("W_Q", l))[0]:
                out += self.features_violated([g], ok) or [f"{g.name}'s action explains B but with an element "
                                                            f"outside it ({g.element})"]
        return out

    # ---- 2. gain scalings
    def scalings(self) -> None:
        from symtrans.group.numeric import MonomialMatrix

        if self.scaled:
            return
        self.scaled = True
        for f in with_role(self.spec, "norm-scaling", self.present.values()):
            if f.scope not in ("layer", "model"):
                continue
            pivot = gain_pivot(f)
            if f.scope == "model":
                a, b = self.cur.get(pivot.tensor), self.tgt.get(pivot.tensor)
                if a is None:
                    continue
                s = self.gain_ratio(f, a, b, None)
                self.apply(f.name, {"D": MonomialMatrix(list(range(s.numel())), s)})
                continue
            els = []
            paired = equal_pairs(self.spec, f.name) is not None
            for l in range(self.L):
                a, b = self.cur["layers"][l][pivot.tensor], self.tgt["layers"][l][pivot.tensor]
                s = self.gain_ratio(f, a, b, l)
                if paired:  # one scaling per rotated pair: B's gains must be A's times it
                    misfit, tol = _rel(a.reshape(-1) * s, b.reshape(-1)), self.u_pivot(pivot.tensor, l)
                    if misfit > tol:
                        self.refuse(f.name, l, pivot.tensor, misfit, tol, [],
                                    "B's gains need different scalings on the two coordinates of a rotated pair; "
                                    "the rotary rotations act after the gains, so G trades one scaling per pair")
                els.append({"D": MonomialMatrix(list(range(s.numel())), s)})
            self.apply(f.name, els)

    def head_gains(self, f: Factor, params: dict[str, Any], l: int) -> tuple[Any, Any]:
        """The query and the key gains a per-key/value-head gain trade ``f`` acts on, in layer ``l`` of ``params``:
        ``[H, d_k]`` and ``[H_kv, d_k]`` (stacked from per-head blocks where an action left them so)."""
        torch = _torch()

        def rows(how: str) -> Any:
            v = params["layers"][l][next(t for t in f.tags if t.how == how).tensor]
            return torch.stack([x.reshape(-1) for x in v]) if isinstance(v, list) else v

        return rows("element"), rows("inverse")

    def head_gain_ratio(self, f: Factor, l: int) -> list[Any]:
        """Layer ``l``'s element of a per-key/value-head gain trade: one diagonal D_g per key/value head g, with B's
        query gains ``q_h D_g`` for every query head h of g (least squares over those heads) and key gains
        ``k_g D_g^-1``; a coordinate where A's query gains of the group are all 0 is fitted on the key gain
        (``1 / d = <k_A, k_B> / <k_A, k_A>``), and is 1 where that is 0 too (the check judges what is left)."""
        torch = _torch()
        (qa, ka), (qb, kb) = self.head_gains(f, self.cur, l), self.head_gains(f, self.tgt, l)
        per = qa.shape[0] // ka.shape[0]  # query heads per key/value head (transformers' repeat_kv order)
        pairs = equal_pairs(self.spec, f.name)  # one scaling per rotated pair: least squares over the pair too
        out = []
        for g in range(ka.shape[0]):
            a, b = qa[g * per:(g + 1) * per], qb[g * per:(g + 1) * per]
            num, den = (a * b).sum(0), (a * a).sum(0)  # d = <q_A, q_B> / <q_A, q_A> over the group's query heads
            d = torch.where(den > 0, num / torch.where(den > 0, den, 1), torch.ones_like(num))
            fit, ok = _inverse_fit([(ka[g][:, None], kb[g][:, None])])  # the key gain: k_B = k_A / d
            d = torch.where((den == 0) & ok, fit, d)
            out.append(torch.diag(pair_mean(d, pairs, den)))
        return out

    def scaled_rows(self, f: Factor, params: dict[str, Any], l: int | None) -> Any:
        """The blocks of ``params`` (layer ``l``, None: the model's) that norm-scaling factor ``f`` scales by the
        inverse of its element, each with the gain's channels as rows (per-head blocks one by one); a tensor the
        parameters do not hold (an untied output head a base-model checkpoint lacks) is skipped."""
        for t in f.tags:
            if t.how != "inverse" or t.scope != f.scope:
                continue
            X = tensor_at(params, t.tensor, l)
            if X is None:  # not held (a base model's untied output head): nothing of it to read
                continue
            for x in X if isinstance(X, list) else (X,):
                yield x.T if t.side == "right" else x

    def gain_ratio(self, f: Factor, a: Any, b: Any, l: int | None) -> Any:
        """The scaling ``s`` of norm-scaling factor ``f`` with B's gain ``b = s * a`` (A's gain ``a``, one layer).

        Where A's gain is exactly 0 the gain says nothing (``0 / 0``; Gemma 3 270M stores 19 such channels in
        ``ln2_w``): ``s_j`` then comes from the rows ``f`` scales inversely that no other per-layer factor moves
        (:meth:`fit_rows`), whose channel j in B is that of A divided by ``s_j`` (least squares over every such
        block: ``1 / s_j = <A_j, B_j> / <A_j, A_j>``), and is 1 where those are zero in A too (any scaling leaves such a channel as it is). A channel no scaling
        explains (B's gain non-zero there, or B's rows not a multiple of A's) is left to the check, which
        measures what is left unexplained.
        """
        torch = _torch()
        from symtrans.numeric.weights import GAIN_OFFSET_TENSORS
        from symtrans.precision import offset_loss

        # a factor whose scaling is one per rotated pair (the QK-norm gain trade): least squares over the pair
        # (the mean of b / a weighted by a^2); a pair dead on one side reads the other
        pairs = equal_pairs(self.spec, f.name)
        weights = a.reshape(-1) ** 2
        s = (b / a).reshape(-1)
        dead = a.reshape(-1) == 0
        # a gain stored as w = gain - offset (Gemma) and near 0 is resolved far more coarsely than its rows: B's
        # stored gain of 1.4e-3 was 2e-5 off of itself, carried by b / a into every row the scaling moves (a moved
        # Gemma 3 was "not related" at W_V); such a channel is read from its rows as a dead one is
        offset = self.spec.arch.gain_offset if gain_pivot(f).tensor in GAIN_OFFSET_TENSORS else 0
        coarse = dead | (torch.maximum(offset_loss(a, offset), offset_loss(b, offset)).reshape(-1) > OFFSET_LOSS_ROWS)
        if bool(coarse.any()):  # its fit where defined; else a dead channel's scaling is 1, a coarse one's b / a
            fit, ok = _inverse_fit(zip(self.fit_rows(f, self.cur, l), self.fit_rows(f, self.tgt, l)))
            s = torch.where(dead, torch.ones_like(s), s)
            if fit is not None:  # None: nothing loaded that f scales inversely (an untied head), which no check sees
                s = torch.where(coarse & ok, fit, s)
        return pair_mean(s, pairs, weights)

    # ---- 3. discrete per-layer factors
    def _match(self, KA: Any, KB: Any, tol: float, what: str, l: int, tie: Any = None) -> tuple[list[int], float]:
        """Each B key's nearest A key (one to one), and the largest matched distance relative to A's largest key.
        A second A key within the tie radius of a B key is a tie, reported: ``tol``, or where given ``tie(scale)``
        (per B key, relative like ``tol``; called only where some second key lies within ``tol``)."""
        torch = _torch()
        # distances relative to the largest key of A: each norm divided by it (the candidates' order does not
        # depend on it), not both key matrices (two key-sized copies per call)
        scale = max(float(KA.norm(dim=1).max()), 1e-300)
        if KA.shape[0] > 64:  # many keys: each B key's only A key within the tolerance, if that settles all
            perm = self._match_window(KA, KB, tol * scale)
            if perm is not None:
                dist = float(((KB - KA[perm]).norm(dim=1) / scale).max())
                if dist <= tol:
                    return perm, dist
        if KA.shape[1] > 64 and KA.shape[0] > 64:  # candidates on a random 64-dim projection, checked in full below
            key = ("match", KA.shape[1], KA.dtype)
            if key not in self._sketches:  # one fixed projection (seed 0), drawn once per solve
                self._sketches[key] = torch.randn(KA.shape[1], 64, generator=torch.Generator().manual_seed(0),
                                                  dtype=KA.dtype) / 8.0
            R = self._sketches[key]
            D = torch.cdist(matmul(KB, R), matmul(KA, R))
        else:
            D = None  # the exact distances only where the Gram matrix leaves the two nearest open
            near = _two_nearest(KB, KA)
            if near is None:
                D = torch.cdist(KB, KA)
        if D is not None:
            near = D.topk(min(2, D.shape[1]), dim=1, largest=False).indices
        best = near[:, 0]
        dist = (KB - KA[best]).norm(dim=1) / scale
        if KA.shape[0] > 1:  # a second A key as close (in full) is a tie
            second = (KB - KA[near[:, 1]]).norm(dim=1) / scale
            close = second <= tol
            if tie is not None and bool(close.any()):
                close = second <= torch.clamp(tie(scale), max=tol)
            for j in torch.nonzero(close).reshape(-1).tolist():
                line = (f"layer {l}: {what} {j} of B matches two or more of A's exactly (any of them gives the same "
                        "weights)" if what != "head" else f"layer {l}: head {j} of B matches two or more of A's "
                        "heads' products exactly (equal W_Q W_K^T and W_V W_O)")
                if line not in self.ties:  # a layer's units matched again on their scaled keys: said once
                    self.ties.append(line)
                if what == "head":
                    self.tied_heads.add(l)
        perm = best.tolist()
        if len(set(perm)) != len(perm):  # clashes (near-ties) resolved one to one, greedily, in full distances
            from collections import Counter

            counts = Counter(perm)
            clash = [j for j, i in enumerate(perm) if counts[i] > 1]
            taken = {i for i in perm if counts[i] == 1}  # a unique nearest match keeps its column
            full = torch.cdist(KB[clash], KA) / scale  # only the clashing rows: not the whole distance matrix
            # the nearest pairs first: a B key within rounding of its A key keeps it against one far from every A
            # key (a ReLU unit of B negated, whose nearest A unit was another's exact match: taken first in index
            # order, it left that unit a guess, and the refusal was "cannot decide")
            for r in sorted(range(len(clash)), key=lambda r: float(full[r].min())):
                j = clash[r]
                i = next(int(i) for i in full[r].argsort() if int(i) not in taken)
                perm[j] = i
                taken.add(i)
            dist = (KB - KA[perm]).norm(dim=1) / scale
        return perm, float(dist.max())

    def _match_window(self, KA: Any, KB: Any, radius: float) -> list[int] | None:
        """For each row of ``KB`` the one row of ``KA`` within ``radius`` (Euclidean), or None when some row of KB
        has none or more than one candidate, or two rows share one (the caller then matches in full distances).

        Candidates are the A keys whose projections on 8 fixed unit directions all lie within ``radius`` of the B
        key's (a key within ``radius`` in full is within it on every unit direction): a window on the sorted first
        projection, the other seven filtering it. A B key with exactly one candidate has no other A key within
        ``radius``: no tie, no clash, the nearest key found without the pairwise distances.

        Examples
        --------
        >>> import torch
        >>> s = _Solver.__new__(_Solver); s._sketches = {}
        >>> KA = torch.randn(100, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> p = torch.randperm(100, generator=torch.Generator().manual_seed(1))
        >>> s._match_window(KA, KA[p], 1e-9) == p.tolist()
        True
        >>> s._match_window(torch.cat([KA, KA[:1]]), torch.cat([KA, KA[:1]]), 1e-9) is None  # a tie
        True
        """
        R = self._window_dirs(KA.shape[1], KA.dtype)
        return self._window(matmul(KA, R).T.contiguous(), matmul(KB, R).T.contiguous(), radius)

    def _window_dirs(self, d: int, dtype: Any) -> Any:
        """The 8 fixed unit directions (d x 8, seed 2) of :meth:`_match_window`."""
        torch = _torch()
        key = ("window", d, dtype)
        if key not in self._sketches:
            R = torch.randn(d, 8, generator=torch.Generator().manual_seed(2), dtype=dtype)
            self._sketches[key] = R / R.norm(dim=0, keepdim=True)
        return self._sketches[key]

    def _window(self, pA: Any, pB: Any, radius: float) -> list[int] | None:
        """:meth:`_match_window` on the keys' projections (one row per direction: 8 x keys); the index work in
        NumPy (its gathers of a few hundred thousand window pairs, as on the bundled model's layer 0, take half
        torch's time)."""
        import numpy as np

        w = radius * (1 + 1e-6)  # headroom for the projections' rounding (~1e-16 of the keys' norms)
        A, B = pA.detach().cpu().numpy(), pB.detach().cpu().numpy()
        order = np.argsort(A[0], kind="stable")
        A = A[:, order]  # every direction in the first one's sorted order: a B key's window is a slice of each row
        s0 = A[0]
        lo = np.searchsorted(s0, B[0] - w, side="left")
        cnt = np.searchsorted(s0, B[0] + w, side="right") - lo
        if int(cnt.min()) < 1:
            return None
        # the (B key, candidate) pairs of the windows, flat and in B's order, thinned one direction at a time; a
        # candidate as its place in the sorted order (read in runs, not scattered), its index in A at the end
        rows = np.repeat(np.arange(B.shape[1]), cnt)
        pos = np.arange(rows.size) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        for k in range(1, A.shape[0]):
            keep = np.abs(A[k][pos] - B[k][rows]) <= w
            rows, pos = rows[keep], pos[keep]
        if rows.size != B.shape[1] or bool((np.bincount(rows, minlength=B.shape[1]) != 1).any()):
            return None
        perm = order[pos].tolist()  # one candidate per B key, in B's order
        return perm if len(set(perm)) == len(perm) else None

    def _match_parts(self, A: list[Any], B: list[Any], tol: float, *,
                     perm: list[int] | None = None) -> tuple[list[int] | None, float]:
        """:meth:`_match`'s answer for keys given in parts (every part but the last one column per key, the last
        one row per key: the FFN units' input columns and output rows), where :meth:`_match_window` settles every
        key within the tolerance; else (None, inf): the caller matches the concatenated keys. ``perm``: the
        window's answer, already found on the keys' projections (:meth:`unit_keys`): only measured here.

        Examples
        --------
        >>> import torch
        >>> s = _Solver.__new__(_Solver); s._sketches = {}; s.ties = []
        >>> g = torch.Generator().manual_seed(0)
        >>> W, O = torch.randn(8, 100, generator=g, dtype=torch.float64), torch.randn(100, 6, generator=g, dtype=torch.float64)
        >>> p = torch.randperm(100, generator=g)
        >>> perm, dist = s._match_parts([W, O], [W[:, p], O[p]], 1e-6)
        >>> perm == p.tolist(), dist
        (True, 0.0)
        >>> W2 = W[:, p].clone(); W2[0, 5] += 1.0  # one unit of B with no unit of A within the tolerance
        >>> s._match_parts([W, O], [W2, O[p]], 1e-6)
        (None, inf)
        """
        torch = _torch()
        R = self._window_dirs(sum(x.shape[0] for x in A[:-1]) + A[-1].shape[1], A[-1].dtype)

        def proj(parts: list[Any]) -> Any:  # (8 x keys): the keys' projections, part by part
            out, i = None, 0
            for x in parts[:-1]:
                y = R[i:i + x.shape[0]].T @ x
                out = y if out is None else out + y
                i += x.shape[0]
            return out + (parts[-1] @ R[i:]).T

        norms2 = sum((x * x).sum(0) for x in A[:-1]) + (A[-1] * A[-1]).sum(1)
        scale = max(float(norms2.max()) ** 0.5, 1e-300)
        if perm is None:
            perm = self._window(proj(A).contiguous(), proj(B).contiguous(), tol * scale)
        if perm is None:
            return None, math.inf
        from symtrans.group.elements import _take_columns

        p = torch.tensor(perm)  # the matched pairs' squared distances, part by part, each in one buffer
        d2 = sum(_take_columns(x, p).sub_(y).pow_(2).sum(0) for x, y in zip(A[:-1], B[:-1])) \
            + A[-1][p].sub_(B[-1]).pow_(2).sum(1)
        dist = float(d2.max()) ** 0.5 / scale
        return (perm, dist) if dist <= tol else (None, math.inf)

    def heads(self) -> None:
        f = self.present.get("S_H")
        if f is None:
            return
        torch = _torch()
        els = []
        # the keys are sketches P R (:meth:`sketch`) of the invariant products P (d_model x d_model per head),
        # computed as W_Q (W_K^T R), batched over the heads: a fraction of the work of the full products
        for l in range(self.L):
            keys = []
            for params in (self.cur, self.tgt):
                qk, vo = self.head_keys(params, l)
                keys.append(torch.cat([qk.reshape(qk.shape[0], -1), vo.reshape(vo.shape[0], -1)], 1))
            tol = 1e3 * relation_tolerance(self.precision("W_Q", l))[0]
            pi, dist = self._match(keys[0], keys[1], tol, "head", l,
                                   tie=lambda scale, l=l: self.head_key_noise(l) / scale)
            if l in self.tied_heads:
                pi = self.break_head_ties(l, keys[0], keys[1], pi, tol)
            if dist > tol and not self.within_key_noise(l, keys[0], keys[1], pi, tol):
                self.refuse("S_H", l, "W_Q W_K^T, W_V W_O (per head)", dist, tol, [],
                            "a head of B has no head of A with the same products: no head relabelling explains it",
                            rounding=tol / 1e3)
            kappa = []
            for g in range(len(pi) // self.group):
                mapped = {pi[g * self.group + i] // self.group for i in range(self.group)}
                if len(mapped) != 1:
                    feats = self.features_violated([f], {"per-kv-head": False})
                    self.refuse("S_H", l, "W_Q (head order)", 1.0, 0.0, feats,
                                "query heads that share a key/value head are sent to different groups")
                kappa.append(mapped.pop())
            els.append({"pi": pi, "kappa": kappa})
        if any(e["pi"] != sorted(e["pi"]) for e in els):
            self.apply("S_H", els)

    def within_key_noise(self, l: int, KA: Any, KB: Any, pi: list[int], tol: float) -> bool:
        """Whether every head of B lies within the larger of ``tol`` and the rounding bound of B's stored keys
        (:meth:`head_key_noise`, B's side) of its matched head of A (``pi``), relative to A's largest key as
        :meth:`_match` measures, and that bound resolves each such head's keys to :data:`KEY_NOISE_LIMIT` of
        themselves. (A's side, carried by the element's condition number, is a normwise bound far looser than
        what it bounds; it is not used here: where A's storage blurs a head, the refusal stands, unless A's own
        storage, without a condition number, cannot resolve that head to :data:`KEY_NOISE_LIMIT` either.)

        A translation G cancels in the projections leaves its stored rounding behind: a value channel 1e7 times the
        rest, beside a centring shift of the output rows 1e7 times the channel's, put a genuine float64 pair's keys
        9e-9 apart against a tolerance of 9e-13 (refused). Within the bound the match stands and the per-tensor
        check decides. Where the bound passes the limit (the same pair in float32: the shifted rows keep the
        channel's values to 60%), B's storage does not fix what the head computes: :attr:`unresolved` says so, and
        the refusal the caller then makes is no answer (relate cannot decide)."""
        scale = max(float(KA.norm(dim=1).max()), 1e-300)
        apart = (KB - KA[pi]).norm(dim=1) / scale
        noise = self.head_key_noise(l, b_only=True) / scale
        own = (noise * scale / KB.norm(dim=1).clamp_min(1e-300)).tolist()  # each head's bound against its own keys
        if not bool((apart <= noise.clamp_min(tol)).all()):
            # a head either side's own storage cannot resolve (its rounding bound, without any condition number,
            # past KEY_NOISE_LIMIT of its keys) matches nothing for certain, and the others were matched around it:
            # the refusal the caller makes is no answer. B = g . A stored in float32 with a gauge of condition number
            # 1e6-1e10 on one key/value head was "not related" at S_H from B to A, and at 1e10 from A to B too (a
            # clean head paired with the blurred one, 1.3 off)
            own_a = (self.head_key_noise(l, a_only=True) / KA.norm(dim=1).clamp_min(1e-300)).tolist()
            for h in range(len(pi)):
                self.key_resolved(l, f"head {h}'s products W_Q W_K^T, W_V W_O", own[h])
                self.key_resolved(l, f"head {h}'s products W_Q W_K^T, W_V W_O", own_a[h], side="A")
            return False
        return all(self.key_resolved(l, f"head {h}'s products W_Q W_K^T, W_V W_O", own[h])
                   for h in range(len(pi)) if float(apart[h]) > tol)

    def key_resolved(self, l: int, what: str, bound: float, side: str = "B") -> bool:
        """Whether a key's rounding bound (relative to the key) resolves it to :data:`KEY_NOISE_LIMIT`; where it
        does not, ``side``'s storage does not fix what the key reads, and :attr:`unresolved` says so (a refusal the
        solve then reaches is no answer)."""
        if bound <= KEY_NOISE_LIMIT:
            return True
        self.unresolved.append(f"layer {l}: {side}'s storage cannot resolve {what} (its rounding bound is {bound:.2g} of "
                               f"it, past {KEY_NOISE_LIMIT:g}: stored entries far larger than what they compute, as "
                               "a part far below a translation G cancels, or a gauge of large condition number, leaves)")
        return False

    def key_unit(self, name: str, l: int, n: int) -> float:
        """The per-entry rounding a key bound scales (:meth:`head_key_noise`, :meth:`ffn_key_noise`): ``u +
        gamma_n / 4`` of tensor ``name``'s storage at layer ``l``, sums of ``n`` products, i.e. relation_tolerance
        at kappa 1 without its 4x headroom and its (1 + kappa) = 2 (each bound puts the headroom back).

        Examples
        --------
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(w.arch)
        >>> s = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "float32")
        >>> from symtrans.precision import unit_roundoff
        >>> s.key_unit("W_in", 0, 1) == unit_roundoff("float32")  # one product: no sum's rounding
        True
        """
        return relation_tolerance(self.precision(name, l), 1.0, length=n)[0] / 8

    def head_key_noise(self, l: int, *, b_only: bool = False, a_only: bool = False) -> Any:
        """Per head of B in layer ``l``: a bound on how far its keys (:meth:`head_keys`) can lie from those of
        g . A when B is g . A up to storage rounding, on either side (A's carried by the steps so far).

        Storage rounds each entry by at most u of itself; the projections off the translations are orthogonal
        (they shrink an error) but read the rounded gains (one more term of the same size). For the query-key
        half, |E_Q (W_K^T R)| + |W_Q (E_K^T R)| <= u |W_Q|_F (|W_K^T R|_F + |W_K|_F |R|_2), the stored
        norms; the value-output half likewise. Each side's sum, B's and A's (times the layer's condition number
        so far; the largest of its heads', as the partner is not known yet), doubled for the gains and with
        relation_tolerance's headroom (4x), with the float64 rounding of the products (gamma_n, n the longest
        sum): two A heads both within it of a B head's keys tie, and where only one is, the nearest is the one
        B's rounding allows. ``b_only``: B's side alone (what B's storage blurs, :meth:`within_key_noise`);
        ``a_only``: A's, per head of A, without the condition number (what A's stored heads blur by themselves).

        Examples
        --------
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("llama"); spec = GroupSpec.from_arch(w.arch)
        >>> s = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "bfloat16")
        >>> t = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "float32")
        >>> n16, n32 = s.head_key_noise(0), t.head_key_noise(0)
        >>> n16.shape == (w.arch.H,), bool((n16 / n32 - 2.0 ** 16).abs().max() < 1e-6 * 2.0 ** 16)
        (True, True)
        """
        torch = _torch()
        lp_b, lp_a = self.tgt["layers"][l], self.cur["layers"][l]
        d = int(lp_b["W_Q"][0].shape[0])
        R = self.sketch(d, lp_b["W_Q"][0].dtype)
        r2 = float(torch.linalg.matrix_norm(R, ord=2))
        n = max(self.applied_length(l), d, int(lp_b["W_Q"][0].shape[1]))
        u = self.key_unit("W_Q", l, n)
        kv = torch.arange(len(lp_b["W_Q"])) // self.group

        def side(lp: dict[str, Any]) -> Any:
            X = {t: torch.stack(lp[t]) for t in ("W_Q", "W_K", "W_V", "W_O")}  # heads x rows x cols, each
            fro = {t: x.reshape(x.shape[0], -1).norm(dim=1) for t, x in X.items()}
            kr = matmul(X["W_K"].transpose(1, 2), R).reshape(len(lp["W_K"]), -1).norm(dim=1)  # |W_K^T R|_F
            orr = matmul(X["W_O"], R).reshape(len(lp["W_O"]), -1).norm(dim=1)  # |W_O R|_F per query head
            qk = fro["W_Q"] * (kr[kv] + fro["W_K"][kv] * r2)
            vo = fro["W_V"][kv] * (orr + fro["W_O"] * r2)
            return (qk * qk + vo * vo).sqrt()

        if b_only:  # B's storage alone
            return 2 * 4 * u * side(lp_b)
        if a_only:  # A's storage alone, per head of A, no condition number: what A's stored heads blur by themselves
            return 2 * 4 * u * side(lp_a)
        return 2 * 4 * u * (side(lp_b) + self.layer_kappa(l) * side(lp_a).max())  # A's partner: any of its heads

    def ffn_key_noise(self, l: int) -> float:
        """A bound on how far B's FFN layer key (``W_in W_out``, :meth:`layer_keys`) can lie from that of g . A when
        B is g . A up to storage rounding, on either side. Each unit's stored input column rounds at ``u |w_j|``,
        and that survives the projection off the input translations whole; its key part is that times its
        projected output row (and likewise the row's rounding times the projected column), so the sum over units
        is a bound. Where an FFN input hyperplane makes a unit's stored column far larger than the column itself (A's
        unit scaled by 1e-5 on its input, 1e5 on its output: the key's part unchanged, its rounding 1e5 times
        larger), B's key is only that close: a genuine GPT-2 pair was "not related" at ``W_in W_out`` (5e-3 against
        4.8e-4). Doubled for the gains the projections read, with relation_tolerance's 4x headroom, as
        :meth:`head_key_noise`.

        Examples
        --------
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(w.arch)
        >>> s = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "bfloat16")
        >>> t = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "float32")
        >>> round(s.ffn_key_noise(0) / t.ffn_key_noise(0))  # bfloat16 rounds 2^16 times coarser
        65536
        """
        torch = _torch()
        d = int(self.tgt["layers"][l]["W_in"].shape[0])
        R = self.sketch(d, self.tgt["layers"][l]["W_in"].dtype)
        r2 = float(torch.linalg.matrix_norm(R, ord=2))
        n = max(self.applied_length(l), *self.tgt["layers"][l]["W_in"].shape)  # the products' longest sum
        u_in, u_out = (self.key_unit(x, l, n) for x in ("W_in", "W_out"))

        def side(params: dict[str, Any]) -> float:
            lp = params["layers"][l]
            W, O = lp["W_in"], lp["W_out"]
            iW, iO = self.invariant("W_in", W, l, params), self.invariant("W_out", O, l, params)
            return float((u_in * W.norm(dim=0) * iO.norm(dim=1) + u_out * iW.norm(dim=0) * O.norm(dim=1)).sum())

        return 2 * 4 * r2 * (side(self.tgt) + self.layer_kappa(l) * side(self.cur))

    def head_spaces(self, params: dict[str, Any], l: int) -> Any:
        """Per head of layer ``l``: sketches of the projectors onto W_Q^h's column space and W_O^h's row space.

        The per-head gauges act on W_Q from the right and on W_O from the left, so they leave both spaces as they
        are: a second key for heads whose products tie (a pruned key/value head: every query head reading it has
        products 0, but its own W_Q^h is free beyond the gauge). A direction below :meth:`null_level` of the
        head's largest singular value is not part of the space.
        """
        torch = _torch()
        out = []
        for name, M in (("W_Q", self.stacked("W_Q", l, params)), ("W_O", self.stacked("W_O", l, params).transpose(1, 2))):
            U, S, _ = torch.linalg.svd(M, full_matrices=False)  # heads x d_model x k
            U = U * (S > S[:, :1] * self.null_level(name, l, int(M.shape[1]))).unsqueeze(1)
            R = self.sketch(int(M.shape[1]), M.dtype)
            out.append((U @ (U.transpose(1, 2) @ R)).reshape(M.shape[0], -1))
        return torch.cat(out, 1)

    def break_head_ties(self, l: int, KA: Any, KB: Any, pi: list[int], tol: float) -> list[int]:
        """Re-pair the heads of layer ``l`` whose products tie by :meth:`head_spaces`, nearest first; the match's
        ``pi`` where that settles nothing. The layer stays in :attr:`tied_heads` unless every tied head of B has one
        candidate whose spaces are within ``tol`` and no other that is."""
        torch = _torch()
        scale = max(float(KA.norm(dim=1).max()), 1e-300)
        cand = torch.cdist(KB, KA) / scale <= tol  # B head j, A head i: equal products
        SA, SB = self.head_spaces(self.cur, l), self.head_spaces(self.tgt, l)
        S = torch.cdist(SB, SA) / max(float(SA.norm(dim=1).max()), 1e-300)
        S = torch.where(cand, S, torch.full_like(S, math.inf))
        out, taken = [-1] * len(pi), set()
        for flat in torch.argsort(S.reshape(-1)).tolist():
            j, i = divmod(flat, S.shape[1])
            if not math.isfinite(float(S[j, i])):
                break
            if out[j] < 0 and i not in taken:
                out[j] = i
                taken.add(i)
        if any(i < 0 for i in out):
            return pi
        tied = [j for j in range(len(out)) if int(cand[j].sum()) > 1]
        if all(float(S[j, out[j]]) <= tol and int((S[j] <= tol).sum()) == 1 for j in tied):
            self.tied_heads.discard(l)
            self.ties = [t + "; told apart by their W_Q column and W_O row spaces"
                         if t.startswith(f"layer {l}: head ") else t for t in self.ties]
        return out

    def unit_keys(self, params: dict[str, Any], l: int, ins: list[str], scaled: list[str],
                  tol: float) -> tuple[Any, Any, Any, float, int]:
        """One side's FFN unit keys in layer ``l`` as the window sees them: ``(proj, norms2, parts, noise, dead)``.

        A unit's key is its input columns (each tensor of ``ins``, projected by :meth:`invariant`; one of
        ``scaled`` divided by its norm times a sign, unless :func:`unit_sign_kept`) followed by its output row of
        ``W_out`` (projected, times the product of those divisors). ``proj`` (8 x units) is the keys' projections on :meth:`_window_dirs`,
        ``norms2`` their squared norms and ``parts()`` the keys written out in their parts (as
        :meth:`_match_parts` takes them). The sign is that of the projection of largest magnitude: one rule on
        both sides, so a unit scaled by any non-zero number keeps its key; a dead unit's (its input part is noise)
        is its output row's. ``dead`` counts the units read as dead (the most over the scaled inputs), which the
        two sides of a relation share. ``noise`` is the keys' relative
        rounding noise: a column's storage rounding (u |w_j|) survives the projection whole. The match measures
        distances against the largest key, so for a tensor taken as it is the noise is u max_j |w_j| / max_j
        |inv w_j|; for one of ``scaled`` each part is divided by its own norm, so it is u |w_j| / |inv w_j|, the
        largest over units that are not dead (a column within :meth:`null_level` of 0 is taken as it is, its key
        part about 0 on both sides, and carries no noise). Large where a translation element (an FFN input
        hyperplane) is much larger than the columns it moves, at bfloat16; a unit that is 0 up to its
        translation (a dead unit) is not noisy against the largest key.

        A tensor whose invariant is ``x`` minus one rank-one term (one gain's ``u (u^T x) / |u|^2`` on an input;
        each row's mean on ``W_out``) is read once by a product with the directions and that term's vector, its
        columns' norms from their squares less the term's: no projected copy. That difference loses the digits
        the term cancels (its rounding is ``eps |x_j|^2 / |inv x_j|^2`` relative); where that could reach 1% of the
        matching tolerance ``tol``, or elsewhere (two gains, a mean across units), the projected block is formed.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric import load_model
        >>> a = load_model("default"); spec = GroupSpec.from_arch(a.arch)
        >>> from symtrans.group.numeric import model_blocks
        >>> s = _Solver(spec, model_blocks(a), model_blocks(a), lambda n, l: "float32")
        >>> def agrees(scaled):  # the projections and norms against those of the keys written out
        ...     proj, n2, parts, noise, _ = s.unit_keys(s.cur, 0, ["W_in"], scaled, 1e-4)
        ...     keys = parts(); R = s._window_dirs(keys[0].shape[0] + keys[1].shape[1], proj.dtype)
        ...     full = torch.cat([keys[0], keys[1].T])  # one column per unit: its key
        ...     return bool(torch.allclose(proj, R.T @ full, atol=1e-12)) and bool(torch.allclose(n2, (full * full).sum(0)))
        >>> agrees([]), agrees(["W_in"])
        (True, True)
        """
        from symtrans.precision import machine_eps, unit_roundoff

        torch = _torch()
        lp = params["layers"][l]
        noise = 0.0
        dims = [lp[name].shape[0] for name in ins] + [lp["W_out"].shape[1]]
        R = self._window_dirs(sum(dims), lp["W_out"].dtype)
        proj = n2 = factor = None
        divisors: list[Any] = []
        dead = 0  # the most units any scaled input part reads as null (dead): :meth:`units` compares the sides
        null_any = None  # the units null on some scaled input: their output rows are scaled alone (below)
        # the output rows first: a dead unit's key takes its sign from its output row (its input part is noise)
        out, Ro = lp["W_out"], R[sum(dims[:-1]):]
        hyper = [g for g in (self.gain_for(t, l, params) for _, t in self.tags_on("W_out", "hyperplane_weight"))
                 if g is not None]
        if hyper:
            x = self.invariant("W_out", out, l, params)
            po, so = matmul(x, Ro), (x * x).sum(1)
        elif self.tags_on("W_out", "translate_ones"):  # each row less its mean: (x C) R = x (C R), |x C|^2 = |x|^2 - d m^2
            d = out.shape[1]
            M = matmul(out, torch.cat([Ro - Ro.mean(0, keepdim=True), torch.full((d, 1), 1.0 / d, dtype=out.dtype)], 1))
            po, m = M[:, :-1], M[:, -1]
            so = (torch.linalg.vector_norm(out, dim=1).square_() - d * m * m).clamp_min(0)
        else:
            po, so = matmul(out, Ro), torch.linalg.vector_norm(out, dim=1).square_()
        out_sign = torch.where(po.gather(1, po.abs().argmax(1, keepdim=True))[:, 0] < 0, -1.0, 1.0).to(po.dtype)
        i = 0
        for name, dim in zip(ins, dims):
            w, Ri = lp[name], R[i:i + dim]
            i += dim
            gains = [g for g in (self.gain_for(t, l, params) for _, t in self.tags_on(name, "hyperplane_weight"))
                     if g is not None]
            p = sq = raw = None
            if len(gains) <= 1 and not self.tags_on(name, "translate_ones"):
                if gains:  # R^T (w - u c / |u|^2) with c = u^T w: one product with [R u], no projected copy
                    u = (1 / gains[0]).reshape(-1, 1)
                    uu = float((u * u).sum())
                    M = matmul(torch.cat([Ri, u], 1).T, w)
                    c = M[-1]
                    p = M[:-1] - (Ri.T @ u) * (c / uu)
                else:
                    p = matmul(Ri.T, w)
                raw = self._column_squares(w)  # the columns' squared norms
                sq = raw - c * c / uu if gains else raw
                if gains and float((raw / sq.clamp_min(1e-300)).max()) * machine_eps(w.dtype) > tol / 100:
                    p = sq = None  # the cancellation could cost digits the match needs: formed below
            if p is None:
                x = self.invariant(name, w, l, params)
                p = matmul(Ri.T, x)
                sq = (x * x).sum(0)
                if raw is None:  # the projected block was formed at once: the columns' own norms read here
                    raw = self._column_squares(w)
            u = unit_roundoff(self.precision(name, l))
            # a column whose invariant is within its own rounding of 0 (:meth:`null_level`): a dead unit, whose
            # key part is that invariant as it is, not divided by its norm (noise over noise)
            # (or one a computation cancelled, :meth:`cancelled`: a canonical form's dead unit is not noise over
            # noise either)
            null = (self.below_rounding(name, l, sq, raw, int(w.shape[0])) | self.cancelled(name, l, sq)
                    if name in scaled else None)
            if raw is sq:
                amp2 = 1.0
            elif name in scaled:  # each key part divided by its own norm: its noise relative to that norm
                live = ~null
                amp2 = float((raw[live] / sq[live].clamp_min(1e-300)).max()) if bool(live.any()) else 1.0
            else:  # the match measures distances against the largest key: the noise relative to that size
                amp2 = float(raw.max()) / max(float(sq.max()), 1e-300)
            noise = max(noise, u * math.sqrt(max(amp2, 1.0)))
            if name in scaled:
                n = torch.where(null, 1.0, sq.clamp_min(0).sqrt().clamp_min(1e-300))
                big = p.gather(0, p.abs().argmax(0, keepdim=True))[0]
                # a dead unit's projection is noise, its sign too: the output row's sign stands in (it moves with
                # the unit's scaling by the inverse, so the product of the two parts' signs is what the key keeps)
                # (a unit scaling that is positive only, ReLU's, fixes the sign: kept, or units whose input columns
                # are opposite, distinct functions, would tie)
                sign = torch.ones_like(n) if unit_sign_kept(self.spec, name, self.present.values()) else \
                    torch.where(big < 0, -1.0, 1.0).to(n.dtype)
                ns = n * torch.where(null, out_sign, sign)
                p = p / ns
                factor = ns if factor is None else factor * ns
                divisors.append(ns)
                dead = max(dead, int(null.sum()))
                null_any = null if null_any is None else null_any | null
                part2 = torch.where(null, sq.clamp_min(0), 1.0)
            else:
                divisors.append(None)
                part2 = sq.clamp_min(0)
            proj = p if proj is None else proj + p
            n2 = part2 if n2 is None else n2 + part2
        if factor is not None and null_any is not None and bool(null_any.any()):
            # a unit null on a scaled input (a gated unit whose up-projection column is 0) writes nothing, and
            # that input's scaling moves its output row alone (by the inverse): the row's own norm, not the null
            # column's, is what the key divides out (a row itself null is taken as it is: noise over noise)
            raw_out = torch.linalg.vector_norm(out, dim=1).square_()
            live = ~self.below_rounding("W_out", l, so, raw_out, int(out.shape[1]))
            alone = null_any & live
            factor = torch.where(alone, out_sign / so.clamp_min(1e-300).sqrt(), factor)
        if factor is not None:
            po, so = po * factor[:, None], so * factor * factor
        proj = po.T if proj is None else proj + po.T
        n2 = so if n2 is None else n2 + so

        def parts() -> list[Any]:
            keys = [self.invariant(name, lp[name], l, params) for name in ins]
            keys = [x if ns is None else x / ns for x, ns in zip(keys, divisors)]
            rows = self.invariant("W_out", out, l, params)
            return keys + [rows if factor is None else rows * factor[:, None]]

        return proj, n2, parts, noise, dead

    def _column_squares(self, w: Any) -> Any:
        """The squared norms of ``w``'s columns, ``(w * w).sum(0)`` (vector_norm(dim=0) on rows: 4-6x slower),
        cached by the tensor's identity (the solver never changes a tensor in place): B's stored W_in is read by
        the units' keys (:meth:`unit_keys`) and again by :meth:`unit_scalings`, a pass over the tensor each."""
        key = ("column squares", id(w))
        hit = self._invariants.get(key)
        if hit is not None and hit[0] is w:
            return hit[1]
        out = (w * w).sum(0)
        self._invariants[key] = (w, out)
        return out

    def units(self) -> None:
        f = self.present.get("S_dff")
        if f is None:
            return
        torch = _torch()
        scaled_in = unit_scaled_inputs(self.spec)
        # where the activation breaks a unit scaling (GELU), units whose scale-free keys tie (two units with parallel
        # input columns: distinct functions, not G-related) are matched again on keys that keep their scale; a
        # match that swapped them was refused as "B scales FFN units" (probe). Only where the keys' storage
        # resolves them (their noise within KEY_NOISE_LIMIT): a noisy pair stays as it was read
        kept = unit_scaled_inputs(self.spec, self.present.values())
        ins = [t.tensor for t in f.tags if t.side == "right" and t.tensor.startswith("W_")]
        els = []
        for l in range(self.L):
            # each side's keys (:meth:`unit_keys`): their projections decide the match where every unit of B has
            # exactly one unit of A within the tolerance on them (:meth:`_window`); the keys in full measure it
            tol = 1e3 * relation_tolerance(self.precision("W_in", l))[0]
            P, dist, noise, da, db, ambiguous = self._unit_match(l, ins, scaled_in, tol)
            if ambiguous is not None and kept != scaled_in and noise <= KEY_NOISE_LIMIT:
                again = self._unit_match(l, ins, kept, tol)  # the window left a tie: the keys with their scale
                if again[1] <= tol:
                    P, dist, noise, da, db, ambiguous = again
            if noise > KEY_NOISE_LIMIT:
                why = (f"B's storage cannot resolve it: layer {l}: the FFN units' keys carry "
                       f"{noise:.2g} relative rounding noise ({self.precision('W_in', l)} storage "
                       "times the projection off the FFN input translations)")
                self.local_unresolved.append((l, "units", why))
            if ambiguous is not None:
                ambiguous()
            if dist > tol:
                if da != db:  # a unit near its rounding on one side only (G's translations move the stored
                    # columns, so the rounding a unit is read against differs between A and B)
                    self.unresolved.append(f"layer {l}: {da} FFN units of A and {db} of B are within their rounding "
                                           "of 0, so the units' keys are not read alike on the two sides")
                tags = "; ".join(t.describe() for t in f.tags)
                self.refuse("S_dff", l, "(W_in column, W_out row) per unit", dist, tol, [],
                            f"a unit of B has no unit of A with the same input and output weights; G moves a unit "
                            f"only as a whole ({tags})", rounding=tol / 1e3)
            els.append(self.bias_ties(l, P, self._unit_proj))
        self._unit_proj = None
        if any(P != sorted(P) for P in els):
            from symtrans.group.numeric import MonomialMatrix

            dt = self.cur["layers"][0]["W_in"].dtype
            # act's right action X @ P with column j of P in row perm[j]: new unit j = old unit perm[j]
            self.apply("S_dff", [{"P": MonomialMatrix(P, torch.ones(len(P), dtype=dt))} for P in els])

    def _unit_match(self, l: int, ins: list[str], scaled: list[str], tol: float
                    ) -> tuple[list[int] | None, float, float, int, int, Any]:
        """Layer ``l``'s FFN units matched on keys with the inputs ``scaled`` divided by their norms
        (:meth:`unit_keys`): ``(P, dist, noise, dead A, dead B, ambiguous)``, ``ambiguous`` a call marking the
        match (:meth:`ambiguous_units`) or None, made by :meth:`units` only for the match it keeps; None also says
        that the window decided the match (one candidate per unit), else the full keys' nearest did. A window's
        match is measured later (:attr:`deferred`, ``dist`` 0) where relate defers."""
        torch = _torch()
        (pA, nA, partsA, noiseA, da), (pB, nB, partsB, noiseB, db) = (self.unit_keys(p, l, ins, scaled, tol)
                                                              for p in (self.cur, self.tgt))
        # A's keys' projections, read by :meth:`bias_ties`: units with equal stored weights have equal keys in
        # either match's (scale-free or kept), and the groups are confirmed on the stored weights there
        self._unit_proj = pA
        noise = max(noiseA, noiseB)
        if da == db == pA.shape[1] and all(self._keys_within_rounding(p, l, ins, n2) for p, n2 in
                                           ((self.cur, nA), (self.tgt, nB))):
            # every unit of the layer is 0 up to its storage rounding on both sides (a zeroed FFN layer, which G's
            # input hyperplane may have moved along its gain): the keys are rounding, all tie, and measured against
            # A's largest key (0) a B of G's orbit was "not related" by 1e293. The order is the bias's
            # (:meth:`bias_ties`) and the check decides
            return list(range(pA.shape[1])), 0.0, noise, da, db, None
        scale = max(float(nA.max()) ** 0.5, 1e-300)
        P = self._window(pA.contiguous(), pB.contiguous(), tol * scale)
        if P is not None and self.defer:  # measured only where relate needs it (a refusal, a failed check)
            self.deferred.append(("W_in", l, tol, lambda P=P, a=partsA, b=partsB: self._match_parts(
                a(), b(), tol, perm=P)[1]))
            return P, 0.0, noise, da, db, None
        keys = [partsA(), partsB()]
        dist = math.inf
        if P is not None:
            P, dist = self._match_parts(keys[0], keys[1], tol, perm=P)
        if P is not None:
            return P, dist, noise, da, db, None
        # a unit with no or several candidates, or beyond the tolerance: the full keys
        full = [torch.cat([x.T for x in k[:-1]] + [k[-1]], 1) for k in keys]
        # a second unit of A is a tie only within the keys' rounding, as :meth:`ambiguous_units` reads it (the match
        # tolerance, 1e3 times the tensor's, is 3.9 relative at float16: every unit of a float16 BERT was reported
        # as matching two or more of A's "exactly"); the second unit's norm is taken as B's (within that rounding)
        P, dist = self._match(full[0], full[1], tol, "FFN unit", l,
                              tie=lambda scale: _unit_radius(noise, full[1], full[1]) / scale)
        return P, dist, noise, da, db, lambda: self.ambiguous_units(full[0], full[1], P, noise, l)

    def _keys_within_rounding(self, params: dict[str, Any], l: int, ins: list[str], n2: Any) -> bool:
        """Whether every FFN unit key of layer ``l`` (squared norms ``n2``, :meth:`unit_keys`) is within the
        storage rounding (:meth:`null_level`) of the largest stored input column or output row it was read from:
        keys that are rounding, whatever the stored values (0, or moved along a direction the keys project off)."""
        lp = params["layers"][l]
        stored = max([float(self._column_squares(lp[name]).max()) for name in ins]
                     + [float(lp["W_out"].square().sum(1).max())]) ** 0.5
        return float(n2.max()) ** 0.5 <= self.null_level("W_in", l, int(lp["W_in"].shape[0])) * stored

    def unit_bias(self, params: dict[str, Any], l: int, name: str) -> Any:
        """Each FFN unit's bias ``name`` (``b_in``) of layer ``l`` as the function sees it, or None where no such
        form is known: the stored bias plus, for each factor that moves a norm's bias ``beta`` into it (a
        ``translate_image`` through ``W``: ``beta -> beta + t``, ``b -> b - t W``), ``beta W``. That sum is what
        the unit adds before its activation on a centred input, and no translation of G moves it (the input
        hyperplane adds ``u v^T`` to ``W`` and takes ``(beta . u) v`` off the bias); a unit permutation permutes it.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(w.arch)
        >>> s = _Solver(spec, model_blocks(w), model_blocks(w), lambda n, l: "float32")
        >>> lp = s.cur["layers"][0]
        >>> bool(torch.allclose(s.unit_bias(s.cur, 0, "b_in"), (lp["b_in"] + lp["ln2_b"] @ lp["W_in"]).reshape(-1)))
        True
        """
        lp = params["layers"][l]
        e = lp.get(name)
        if e is None:
            return None
        e = e.reshape(-1)
        added, hyperplanes = set(), []
        for f in self.present.values():
            for t in f.tags:
                if t.tensor != name or t.how == "element":
                    continue
                if t.how == "hyperplane_bias":  # undone by the term of its bias (below, checked once all are read)
                    hyperplanes.append(t.via.split(",")[1])
                    continue
                src = next((x for x in f.tags if x.how == "translate" and x.component == t.component), None)
                if t.how != "translate_image" or not t.via or src is None or t.via not in lp:
                    return None  # a move of the bias this form does not undo
                beta = tensor_at(params, *boundary_norm(src.tensor, l)) if src.scope == "next" else \
                    tensor_at(params, src.tensor, l if src.scope == "layer" else None)
                if beta is None:
                    return None
                e = e + (beta.reshape(1, -1) @ lp[t.via]).reshape(-1)
                added.add(src.tensor)
        return e if all(b in added for b in hyperplanes) else None

    def bias_ties(self, l: int, P: list[int], proj: Any) -> list[int]:
        """``P`` (B's FFN unit i is A's ``P[i]``) with B's units re-paired, within each group of A's units whose keys
        are equal (``proj``: A's keys' projections, :meth:`unit_keys`), by their biases as the function sees them
        (:meth:`unit_bias`).

        Why: the keys hold a unit's weights only, so units whose stored weights are equal (a layer whose W_in and
        W_out are 0, pruned units whose biases were kept) tie exactly and the match took them in order. They differ in
        their biases, and B with such units permuted (an element of G) was refused at ``b_in``. Where a unit
        scaling acts on the bias (ReLU), the biases within a group are known only up to it: the match is then
        marked as one relate cannot fix (:attr:`local_unresolved`), so a refusal there is no answer.
        """
        f = self.present.get("S_dff")
        biases = [t.tensor for t in f.tags if t.side == "right" and not t.tensor.startswith("W_")] if f else []
        if proj is None or not biases or proj.shape[1] < 2:
            return P
        torch = _torch()
        scale = float(proj.abs().max()) if proj.numel() else 0.0
        order = torch.argsort(proj[0])
        q = proj[:, order]
        same = ((q[:, 1:] - q[:, :-1]).abs() <= 1e3 * EPS64 * max(scale, 1e-300)).all(0)
        if not bool(same.any()):  # no two keys equal (a trained model's units): nothing to pair
            return P
        same, order = same.tolist(), order.tolist()
        groups, run = [], [order[0]]
        for k, eq in enumerate(same):
            if eq:
                run.append(order[k + 1])
            else:
                if len(run) > 1:
                    groups.append(run)
                run = [order[k + 1]]
        if len(run) > 1:
            groups.append(run)
        # equal keys, then equal stored weights (a unit parallel to another at another scale has the same scale-free
        # key and is another function): each candidate split into its units whose columns and rows are equal
        lp = self.cur["layers"][l]
        held = [t for t in f.tags if t.tensor.startswith("W_") and t.tensor in lp]

        def unit(j: int) -> list[Any]:  # unit j's columns (right actions) and row (left) of the stored weights
            return [lp[t.tensor][:, j] if t.side == "right" else lp[t.tensor][j] for t in held]

        exact = []
        for g in groups:
            while g:
                first = unit(g[0])
                same = [j for j in g if all(torch.equal(x, y) for x, y in zip(unit(j), first))]
                if len(same) > 1:
                    exact.append(same)
                g = [j for j in g if j not in same]
        groups = exact
        if not groups:
            return P
        out = list(P)
        for name in biases:
            ea, eb = self.unit_bias(self.cur, l, name), self.unit_bias(self.tgt, l, name)
            scaled = any(t.tensor == name and t.how == "element" and x is not f
                         for x in self.present.values() for t in x.tags)
            for g in groups:
                members = [i for i, a in enumerate(out) if a in g]
                if ea is None or eb is None or scaled:
                    if ea is None or eb is None or float((ea[g].max() - ea[g].min()).abs()) > 0:
                        self.local_unresolved.append((l, "units", (
                            f"layer {l}: {len(g)} FFN units of A have equal weights and differ in {name}, which "
                            "the match cannot read" + (" up to their scaling" if scaled else ""))))
                    continue
                a_sorted = sorted(g, key=lambda j: float(ea[j]))
                b_sorted = sorted(members, key=lambda i: float(eb[i]))
                for i, j in zip(b_sorted, a_sorted):
                    out[i] = j
        return out

    def ambiguous_units(self, KA: Any, KB: Any, P: list[int], noise: float, l: int) -> None:
        """Mark layer ``l``'s unit match as one B's storage cannot fix (:attr:`local_unresolved`) where a unit of B
        was not given its nearest unit of A although that unit lies within the keys' rounding (``noise``, relative,
        of both keys: where B's unit is as g . A has it) and differs from the one given (A's exact duplicates are
        interchangeable). The match then resolved a clash, two units of B nearest one of A, by a guess. At
        bfloat16 its tolerance (1e3 times the tensor's, 31 relative) admits every unit, and such a guess swapped a
        pair: relate refused a genuine g . A at the unit scaling (3 of 50 random gated-FFN pairs). A unit of B
        moved off A's (a W_in moved by 10%) has no unit of A within the rounding: its refusal stands."""
        torch = _torch()
        rows, cols = torch.arange(len(P)), torch.tensor(P)
        D = torch.cdist(KB, KA)
        near = D.argmin(1)
        radius = _unit_radius(noise, KB, KA[near])
        moved = (near != cols) & (D[rows, near] < D[rows, cols]) & (D[rows, near] <= radius)
        apart = (KA[near] - KA[cols]).norm(dim=1) > 1e3 * EPS64 * (KA[near].norm(dim=1) + KA[cols].norm(dim=1))
        n = int((moved & apart).sum())
        if n:
            self.local_unresolved.append((l, "units", f"B's storage cannot resolve it: layer {l}: {n} FFN units of B "
                                          "were matched to a unit of A other than their nearest, which lies within "
                                          f"the keys' rounding ({noise:.2g} relative): two units of B nearest one of A"))

    # ---- 4. unit scalings
    def unit_scalings(self) -> None:
        from symtrans.group.numeric import MonomialMatrix

        torch = _torch()
        for name in [x.name for x in with_role(self.spec, "hidden-scaling")]:
            f = self.present.get(name) or self.broken.get(name)
            if f is None:
                continue
            pivot = next(t for t in f.tags if t.side == "right" and t.tensor.startswith("W_"))
            els, worst, where, fits = [], 0.0, 0, []
            for l in range(self.L):
                wa, wb = self.cur["layers"][l][pivot.tensor], self.tgt["layers"][l][pivot.tensor]
                a, b = self.invariant(pivot.tensor, wa, l, self.cur), self.invariant(pivot.tensor, wb, l, self.tgt)
                aa, bb = (a * a).sum(0), (b * b).sum(0)
                s = (a * b).sum(0) / aa.clamp_min(1e-300)
                # each stored column's rounding (u |w_j|) survives the projection whole: relative to the unit's
                # invariant it is amplified by |w_j| / |inv w_j| (a weak unit under a large hyperplane element: a
                # W_in column scaled by 1e-3 read its scaling 2e-4 off 1, and GELU's "B scales FFN units" refused
                # B = g . A); the scaling's deviation is measured in units of that amplification
                raw_a, raw_b = self._column_squares(wa), self._column_squares(wb)
                # each side's own amplification (its stored column over its invariant): a ratio across the sides
                # is the scaling itself, and read every unit scaled by 1e-6 as the identity (its scaling "within
                # rounding" of 1), which left W_out 1e6 apart and B "not related"
                amp = torch.maximum(raw_a / aa.clamp_min(1e-300), raw_b / bb.clamp_min(1e-300)).sqrt().clamp_min(1.0)
                # a unit 0 on both sides (a dead unit, within its rounding: :meth:`null_level`) keeps any scaling: 1
                # (or one a computation cancelled, :meth:`cancelled`)
                n = int(a.shape[0])
                dead = ((self.below_rounding(pivot.tensor, l, aa, raw_a, n) | self.cancelled(pivot.tensor, l, aa))
                        & (self.below_rounding(pivot.tensor, l, bb, raw_b, n) | self.cancelled(pivot.tensor, l, bb)))
                s = torch.where(dead, self.dead_unit_scalings(f, l) if bool(dead.any()) else 1.0, s)
                dev = float(((s - 1).abs() / amp).max())
                if dev > worst:
                    worst, where = dev, l
                # the pivot's fit: measured below, only where no earlier answer makes it moot (the identity, a
                # broken factor)
                fits.append((a, b, s, raw_a, raw_b, l))
                els.append((s, l))
            tol = self.u_pivot(pivot.tensor, where) * 10
            if worst <= tol:
                continue  # the identity
            if f.status == "broken":
                # the activation is named only where B's units are A's scaled: the scaling accounts for most of the
                # pivot's difference (it at least halves it, as :meth:`must_be_identity` asks). Scalings read off 1
                # through a changed gain of the projection (B's norm gain moved, W_in as A's) explain nothing: the
                # refusal then names no feature (measured on the projections the scalings were read from: what
                # translations cannot move)
                s_l = els[where][0]
                wa, wb = self.cur["layers"][where][pivot.tensor], self.tgt["layers"][where][pivot.tensor]
                a = self.invariant(pivot.tensor, wa, where, self.cur)
                b = self.invariant(pivot.tensor, wb, where, self.tgt)
                size, tol_w = _rel(a, b), relation_tolerance(self.precision(pivot.tensor, where))[0]
                explains, share = _move_explains(size, _rel(a * s_l, b))
                if size > tol_w and explains:
                    self.refuse(name, where, pivot.tensor, size, tol_w, self.features_breaking(f),
                                "B scales FFN units, which this activation does not allow")
                if size > tol_w:  # refused as before, but no scaling explains it: not the activation's doing
                    self.refuse(name, where, pivot.tensor, size, tol_w, [],
                                f"B's units are not A's scaled: the scalings that fit them best carry {share:.0%} of "
                                "the projected columns' squared difference, and no element of G the rest")
                continue  # the projected columns agree within their rounding: the check decides
            for a, b, s, raw_a, raw_b, l in fits:
                # the pivot's fit, as the gauges measure theirs: what no scaling of A's columns gives of B's,
                # relative to the stored tensors (the larger of A's and B's: the scale of the values the element
                # moves). A perturbed W_in is refused here, at its own tensor, not where the scalings it moved land
                # (W_out). Each column is fitted alone (its rounding u |w_j| on each side, whatever the other
                # scalings): the spread of the scalings amplifies nothing here, and one fitted to a perturbation
                # would be read from what it tests
                fit = _fro(b - a * s) / max(float(raw_a.sum()), float(raw_b.sum()), 1e-300) ** 0.5
                # refused here only where the check would not decide it instead (:meth:`left_to_check`)
                tol_l = self.u_pivot(pivot.tensor, l)
                if not self.left_to_check(name, l, pivot.tensor, fit, tol_l):
                    self.refuse(name, l, pivot.tensor, fit, tol_l, [],
                                f"no {f.group} element maps A's {pivot.tensor} to B's ({pivot.describe()})",
                                rounding=tol_l)
            positive = "d_j > 0" in f.element
            for s, l in els:
                if positive and bool((s <= 0).any()):
                    self.refuse(name, l, pivot.tensor, float((s.clamp(max=0)).abs().max()), 0.0, [],
                                f"a unit is scaled by a negative number; G: {f.element}")
            self.apply(name, [{"D": MonomialMatrix(list(range(s.numel())), s)} for s, _ in els])

    def dead_unit_scalings(self, f: Factor, l: int) -> Any:
        """Per FFN unit of layer ``l``: the scaling of hidden-scaling factor ``f`` read off the output rows (the
        tensor ``f`` acts on by its inverse), for units whose scaled input column is 0 on both sides.

        Such a unit writes nothing (a gated unit whose up-projection column is 0), and ``f`` moves its output row
        alone, by ``1 / s``: B's row is A's over ``s``, so ``s = |a|^2 / <a, b>`` of the rows' invariants. Where
        either row is 0 within its rounding (:meth:`null_level`), or they are orthogonal, nothing fixes ``s``: 1.
        """
        torch = _torch()
        out = next(t for t in f.tags if t.how == "inverse" and t.tensor.startswith("W_"))
        wa, wb = self.cur["layers"][l][out.tensor], self.tgt["layers"][l][out.tensor]
        ra, rb = self.invariant(out.tensor, wa, l, self.cur), self.invariant(out.tensor, wb, l, self.tgt)
        aa, bb, ab = (ra * ra).sum(1), (rb * rb).sum(1), (ra * rb).sum(1)
        n = int(ra.shape[1])
        live = ~self.below_rounding(out.tensor, l, aa, (wa * wa).sum(1), n) \
            & ~self.below_rounding(out.tensor, l, bb, (wb * wb).sum(1), n) & (ab != 0)
        return torch.where(live, aa / torch.where(live, ab, 1.0), 1.0)

    # ---- 5. GL gauges
    def gauges(self) -> None:
        torch = _torch()
        # a per-key/value-head trade of QK-norm gains (OLMo 2): per head, so after the heads are matched
        for f in with_role(self.spec, "head-gain-trade", self.present.values()):
            els = [{"D": self.head_gain_ratio(f, l)} for l in range(self.L)]
            self.apply(f.name, els)
        for name in [x.name for x in with_role(self.spec, "head-gauge")]:
            f = self.present.get(name)
            if f is None:
                continue
            pivot = next(t for t in f.tags if t.how == "element" and t.tensor.startswith("W_"))
            els = []
            for l in range(self.L):
                per_kv = len(self.cur["layers"][l]["W_K"])
                # every key/value head's group of blocks at once: the stacked invariant blocks, each group's
                # blocks one above the other (as concatenated), one batched least-squares solve
                A3, B3 = self.stacked(pivot.tensor, l, self.cur), self.stacked(pivot.tensor, l, self.tgt)
                A = A3.reshape(per_kv, -1, A3.shape[-1])
                B = B3.reshape(per_kv, -1, B3.shape[-1])
                # each row of both sides weighted by its own size (:func:`_row_weights`): the same element where B
                # is A's image, each row then fitted to its own rounding (a row 1e6 times the rest put the rest 1e-10
                # off their own size, and a genuine float64 pair was refused)
                length = int(A3.shape[1])  # the projections' sums: one block's rows
                w = _row_weights(A, B, self.null_level(pivot.tensor, l, length, arithmetic=True))
                Aw, Bw = A * w, B * w
                # QR (LAPACK gels: full column rank assumed, 2x faster) in the deferred try, whose answer the check
                # decides (a rank-deficient block gives a non-finite or ill-conditioned element: refused there, so
                # solved again by gelsd); the SVD-based gelsd otherwise
                sv_pivot = None  # the weighted pivot blocks' singular values (gelsd's by-product): where solved by SVD
                try:
                    if self.defer:
                        Ms = _torch().linalg.lstsq(Aw, Bw, driver="gels").solution
                    else:
                        Ms, sv_pivot = _lstsq(Aw, Bw, singular_values=True)
                except _torch().linalg.LinAlgError:  # gels refuses a block without full column rank: gelsd
                    Ms, sv_pivot = _lstsq(Aw, Bw, singular_values=True)
                if self.defer and "gauges by QR" not in self.skipped:
                    self.skipped.append("gauges by QR")
                if not bool(torch.isfinite(Ms).all()):
                    Ms, sv_pivot = _lstsq(Aw, Bw, singular_values=True)
                Ms, sv = self.gauge_from_inverse(f, pivot, l, A, Ms, B, sv_pivot, w, length)
                # the rounding is relative to the stored blocks: the norm of each group's stored blocks, B's or A's
                # where larger (the scale of the values the element moves, as the check's, :func:`tensor_residuals`)
                raw = torch.maximum(self._group_norms(self.tgt, pivot.tensor, l, per_kv),
                                    self._group_norms(self.cur, pivot.tensor, l, per_kv))
                fits = ((matmul(A, Ms) - B).reshape(per_kv, -1).norm(dim=1) / raw).tolist()
                tol = self.u_pivot(pivot.tensor, l, A.shape[-1])  # a dense d_k x d_k element
                if max(fits) > tol:  # both pivots 0 up to their rounding: the pivot asks nothing of the element
                    # (solved on the inverse side, :meth:`gauge_from_inverse`)
                    za = (A.norm(dim=(1, 2)) <= self._zero_cuts(self.cur, pivot, l, per_kv)).tolist()
                    zb = (B.norm(dim=(1, 2)) <= self._zero_cuts(self.tgt, pivot, l, per_kv)).tolist()
                    fits = [0.0 if za[g] and zb[g] else fit for g, fit in enumerate(fits)]
                # the condition number of every group's element at once (sv: Ms's singular values)
                conds = [float(x) if m > 0 else math.inf for x, m in zip(sv.max(1).values / sv.min(1).values,
                                                                          sv.min(1).values.tolist())]
                mats = []
                for g in range(per_kv):
                    M, fit = Ms[g], fits[g]
                    if fit > tol:
                        # an element past KAPPA_MAX (this gauge's, or the layer's so far) carries A's rounding and
                        # its own float64 arithmetic by its condition number: no refusal within it is one
                        self.refuse(name, l, pivot.tensor, fit, tol, [],
                                    f"no {f.group} element maps A's {pivot.tensor} to B's ({pivot.describe()})",
                                    rounding=tol, kappa=conds[g])
                    if "rotary" in f.group:
                        # the generator of the rotations on the rotated coordinates (halves pairing): the first r of
                        # d_k under partial rotary (GPT-NeoX), all otherwise; commuting with it leaves the rest free
                        i, j = rotary_planes(int(self.spec.arch.rotary_width), "halves")
                        J = torch.zeros_like(M)
                        J[i, j], J[j, i] = -1.0, 1.0
                        comm = _fro(M @ J - J @ M) / _fro(M)
                        if comm > 1e3 * tol:  # M fitted to ``tol`` carries it by its condition number (as above)
                            self.refuse(name, l, pivot.tensor, comm, 1e3 * tol,
                                        self.features_violated([f], {"commutes-rotary": False}),
                                        "the needed GL(d_k) element does not commute with the rotary rotations",
                                        rounding=tol, kappa=conds[g])
                    mats.append(M)
                singular = [g for g in range(per_kv) if not math.isfinite(conds[g])]
                if singular:
                    # no invertible element fits (a head whose W_Q and W_K are near 0 on both sides, where the
                    # solves on either side are deficient): G holds only invertible ones, and none was found, nor is
                    # a refusal within the rounding an answer (applied, its inverse raised torch's LinAlgError)
                    g = singular[0]
                    self.unresolved.append(f"layer {l}: the {name} element that fits group {g} is singular (its "
                                           f"{pivot.tensor} fixes it only on a subspace, within B's rounding)")
                    self.refuse(name, l, pivot.tensor, fits[g], tol, [],
                                f"no invertible {f.group} element maps A's {pivot.tensor} to B's")
                # brought onto G here (the rotary commutant: :func:`in_factor`, as :func:`_kept_in_group` and verify
                # bring it), before the translations after it are fitted to what it leaves. Projected only later,
                # the fit's part off the commutant (B's rounding, ~u) came back through the key translation's rows:
                # a GPT-NeoX B with a large input hyperplane pulled back to A was off by 6 times its W_K tolerance
                els.append(in_factor(self.spec, name, {"g": mats}))
                self.length[l] = max(self.length.get(l, 1), int(A.shape[-1]))
                self.kappa[l] = max([self.kappa.get(l, 1.0)] + conds)
            self.apply(name, els)

    def gauge_from_inverse(self, f: Any, pivot: Any, l: int, A: Any, Ms: Any, B: Any,
                           sv_pivot: Any = None, w: Any = None, length: int | None = None) -> tuple[Any, Any]:
        """``(Ms, its singular values)``, each group's element solved on the gauge's inverse side where the pivot
        (tag ``pivot``, stacked invariant blocks ``A``) cannot fix it, and on both sides at once where the pivot
        fixes it badly.

        ``sv_pivot``: the pivot blocks' singular values (per group, descending), where the solve has them; ``w`` and
        ``length``: the pivot's row weights (:func:`_row_weights`) and the projections' length it solved with. A
        group whose pivot block is ill-conditioned (:data:`JOINT_COND`) but not deficient is solved on both
        tensors the gauge acts on (:func:`_two_sided_gauge`): from the pivot alone, B's rounding along the
        block's weak directions is amplified by its condition number and carried into the inverse side (a value
        head with one direction scaled by 1e-3 was "not related" to a moved copy of itself, at W_O).

        A pivot block without full column rank (a head with W_V^h = 0, or W_Q^h = 0) leaves the least-squares
        element singular (the minimum-norm solution on its row space): there the element is solved on the
        tensor it acts on by the inverse (W_O^h = M^-1 ..., W_K = ... M^-T). Where that is deficient too: the
        identity where both sides are 0 up to their storage rounding (a pruned head), else both equations at
        once (:func:`_joint_gauge`: a head whose value channel is pruned on both sides). The per-tensor check
        decides as everywhere.
        """
        from symtrans.precision import rank_rtol

        torch = _torch()
        k = int(A.shape[-1])
        # the minimum-norm solution on a deficient A is singular (its rank at most A's): read off the k x k
        # elements' own singular values, not A's (rows x k)
        sv = torch.linalg.svdvals(Ms)
        cut = rank_rtol("float64", (k, k))[0] * sv[:, :1]
        # a pivot block 0 up to its rounding (:meth:`_zero_cuts`: a head whose W_V^h only G's hyperplane translation
        # made non-zero, projected off it, is rounding, and a solve on rounding is a full-rank element of noise)
        zero = (A.norm(dim=(1, 2)) <= self._zero_cuts(self.cur, pivot, l, len(A))).tolist()
        finite, low = torch.isfinite(sv).all(1).tolist(), (sv <= cut).any(1).tolist()  # every group's at once
        short = [g for g in range(len(A)) if not finite[g] or low[g] or zero[g]]
        ill = [] if sv_pivot is None else \
            [g for g in range(len(A)) if g not in short and float(sv_pivot[g, 0]) > JOINT_COND * float(sv_pivot[g, -1])]
        # each side's rounding relative to its invariant blocks: the stored blocks' norm over the projected ones'
        # (1 where no translation moved them). A head whose W_Q is 1e-3 of what G's input hyperplane adds to it is
        # held in B's storage to u of the sum: 1e3 u of itself, which the pivot alone carried into the gauge and
        # every W_K ("not related" at 6.5e-6 against 6.8e-7). Past JOINT_COND times the other side's, solved on both
        # (the other side's is at least 1: read only where the pivot's passes JOINT_COND)
        noise = [self._relative_noise(pivot, l, A, B, len(A))]
        if not short and not ill and float(noise[0].max()) <= JOINT_COND:
            return Ms, sv
        inv = next(t for t in f.tags if t.how != "element" and t.tensor.startswith("W_"))
        XA, XB = self.stacked(inv.tensor, l, self.cur), self.stacked(inv.tensor, l, self.tgt)
        per = len(XA) // len(A)  # blocks of the inverse side per group (W_O: the group's query heads)
        noise.append(self._relative_noise(inv, l, XA, XB, len(A)))
        n0, n1 = noise[0].tolist(), noise[1].tolist()
        ill += [g for g in range(len(A)) if g not in short and g not in ill and n0[g] > JOINT_COND * n1[g]]
        if not short and not ill:
            return Ms, sv
        Ms = Ms.clone()
        for g in short + ill:
            xa, xb = XA[g * per:(g + 1) * per], XB[g * per:(g + 1) * per]
            if inv.side == "left":  # X -> M^-1 X on the gauge's rows: X_A = M X_B, so X_A^T = X_B^T M^T
                xa, xb = xa.mT, xb.mT
            # the right side (X -> X M^-T): X_A = X_B M^T
            xa, xb = xa.reshape(-1, k), xb.reshape(-1, k)
            if g in ill:  # each side's rows weighted by their own size (:func:`_row_weights`; the pivot's as solved)
                n = length if length is not None else int(A.shape[1])
                wa = w[g] if w is not None else _row_weights(A[g], B[g], self.null_level(pivot.tensor, l, n,
                                                                                         arithmetic=True))
                wx = _row_weights(xa, xb, self.null_level(inv.tensor, l, n, arithmetic=True))
                both = _two_sided_gauge(A[g] * wa, B[g] * wa, xa * wx, xb * wx,
                                        (float(noise[0][g]), float(noise[1][g])))
                if both is not None:
                    Ms[g] = both
                continue
            if self._zero_block(self.tgt, inv, l, xb, g, len(A)):
                if self._zero_block(self.cur, pivot, l, A[g], g, len(A)):
                    Ms[g] = torch.eye(k, dtype=Ms.dtype)  # both sides 0 up to their storage rounding: g acts on 0
                continue
            cut_y = self._null_cut(self.tgt, inv, l, g, len(A))  # B's blocks: rank at their storage precision
            if bool((torch.linalg.svdvals(xb) > cut_y).all()):
                Ms[g] = _lstsq(xb, xa).mT
            else:  # A M = B and M Y_B = Y_A (Y = the inverse side's blocks, gauge axis first), both deficient
                # deficient only as projected off a translation (a head as wide as the residual stream, d_k =
                # d_model, read through LayerNorm's hyperplane): the direction both leave free is then no symmetry
                # but one the stored blocks (the biases) fix, which the solve does not read. The element nearest
                # the identity there (A against itself: the identity), and a refusal it reaches is no answer
                projected = self._projection_deficient(pivot, l, g, len(A))
                if projected:
                    self.local_unresolved.append((l, "heads", f"layer {l}: the {f.name} element of group {g} is "
                                                  f"fixed by {pivot.tensor} and {inv.tensor}, projected off G's "
                                                  "translations, only up to a direction their stored values fix "
                                                  "(a head as wide as the residual stream)"))
                Ms[g] = _joint_gauge(A[g], B[g], xa.mT, xb.mT, self._null_cut(self.cur, pivot, l, g, len(A)),
                                     cut_y, nearest_identity=projected)
        return Ms, torch.linalg.svdvals(Ms)

    def _projection_deficient(self, tag: Any, l: int, g: int, groups: int) -> bool:
        """Whether group ``g``'s stored blocks of ``tag``'s tensor in A have full column rank (at their
        :meth:`_null_cut`) though their invariant blocks, projected off G's translations, do not."""
        torch = _torch()
        blocks = self.cur["layers"][l][tag.tensor]
        per = len(blocks) // groups
        X = torch.cat(list(blocks[g * per:(g + 1) * per]), 0)
        X = X if tag.side != "left" else X.mT  # the gauge's axis last
        sv = torch.linalg.svdvals(X)
        return X.shape[0] >= X.shape[1] and bool((sv > self._null_cut(self.cur, tag, l, g, groups)).all())

    def _relative_noise(self, tag: Any, l: int, XA: Any, XB: Any, groups: int) -> Any:
        """Per group, how many times its own size the rounding of ``tag``'s invariant blocks (``XA``, ``XB``: A's
        and B's, stacked) is: the larger stored norm of the group's blocks over the larger invariant norm (at
        least 1; infinite where the invariant blocks are 0)."""
        torch = _torch()
        stored = torch.maximum(self._group_norms(self.cur, tag.tensor, l, groups),
                               self._group_norms(self.tgt, tag.tensor, l, groups))
        inv = torch.maximum(XA.reshape(groups, -1).norm(dim=1), XB.reshape(groups, -1).norm(dim=1))
        return torch.where(inv > 0, stored / torch.where(inv > 0, inv, 1.0), math.inf).clamp_min(1.0)

    def _zero_block(self, params: dict[str, Any], tag: Any, l: int, invariant: Any, g: int, groups: int) -> bool:
        """Whether a group's invariant blocks of ``tag``'s tensor are 0 up to rounding (:meth:`_zero_cuts`)."""
        return float(invariant.norm()) <= float(self._zero_cuts(params, tag, l, groups)[g])

    def _zero_cuts(self, params: dict[str, Any], tag: Any, l: int, groups: int) -> Any:
        """Per group, the size at or below which its invariant blocks of ``tag``'s tensor are 0: the rounding of
        the stored blocks they were projected from (:meth:`null_level` of the group's norm, the level
        :meth:`unit_keys` takes a dead unit at), or the float64 arithmetic of the layer's whole tensor (a group a
        computation cancelled to about 1e-16 of its tensor, as in a canonical form, is not made a head by its own
        norm)."""
        norms = self._group_norms(params, tag.tensor, l, groups)
        length = int(params["layers"][l][tag.tensor][0].shape[0])
        return zero_cuts(norms, self.precision(tag.tensor, l), length)

    def _null_cut(self, params: dict[str, Any], tag: Any, l: int, g: int, groups: int) -> float:
        """:meth:`null_level` times the Frobenius norm of a group's stored blocks of ``tag``'s tensor: what
        rounding leaves, after the projections, of a part G sends to 0."""
        length = int(params["layers"][l][tag.tensor][0].shape[0])
        return self.null_level(tag.tensor, l, length) * float(self._group_norms(params, tag.tensor, l, groups)[g])

    def _group_norms(self, params: dict[str, Any], tensor: str, l: int, groups: int) -> Any:
        """The Frobenius norm of each group's stored blocks of ``tensor`` in layer ``l`` (the blocks of a group are
        consecutive: a key/value head's query heads), as one tensor (groups,).

        Cached by the identity of the block list and of each block (the solver never changes a block in place;
        every step builds new ones): the gauges read each side's norms of a layer's pivot and inverse tensors
        several times (the fits' scale, :meth:`_zero_cuts`, :meth:`_relative_noise`), and B's never change."""
        blocks = params["layers"][l][tensor]
        key = ("group norms", tensor, id(blocks), groups)
        hit = self._invariants.get(key)
        if hit is not None and hit[0] is blocks and len(hit[1]) == len(blocks) \
                and all(a is b for a, b in zip(hit[1], blocks)):
            return hit[2]
        torch = _torch()
        if groups == len(blocks) and all(b.is_contiguous() for b in blocks):  # a block a group: its own norm, no
            out = torch.stack(torch._foreach_norm(blocks))  # stacked copy (each block's values in the same order)
        else:
            out = torch.stack(blocks).reshape(groups, -1).norm(dim=1)
        self._invariants[key] = (blocks, tuple(blocks), out)
        return out

    def cancelled(self, tensor: str, l: int, sq: Any) -> Any:
        """Which FFN units' invariant columns (squared norms ``sq`` of ``tensor`` in layer ``l``) are 0 within the
        float64 arithmetic of the largest (:meth:`null_level` with ``arithmetic``): units a computation cancelled,
        as a canonical form's dead unit (about 1e-16 of its tensor), whose own norm is that rounding."""
        return sq <= self.null_level(tensor, l, int(self.cur["layers"][l][tensor].shape[0]), arithmetic=True) ** 2 \
            * sq.max()

    def below_rounding(self, tensor: str, l: int, sq: Any, raw: Any, length: int) -> Any:
        """Which parts of ``tensor`` in layer ``l`` (FFN columns or rows: squared norms ``sq`` of their invariant,
        ``raw`` of the stored parts, sums of ``length`` products) are 0 within their own rounding
        (:meth:`null_level`): a dead unit's column, or its output row. One rule for the units' keys, their
        scalings and a dead unit's scaling read off its row."""
        return sq <= self.null_level(tensor, l, length) ** 2 * raw

    def null_level(self, tensor: str, l: int, length: int, *, arithmetic: bool = False) -> float:
        """:func:`null_level` at B's storage of ``tensor`` in layer ``l``: the relative size below which a stored
        part G sends to 0 is 0 (a dead unit, a silenced head); ``arithmetic``: the float64 level alone."""
        return null_level(self.precision(tensor, l), length, arithmetic=arithmetic)

    # ---- 6. translations
    def translations(self) -> None:
        for name in translation_order(self.spec):
            f = self.present.get(name) or self.broken.get(name)
            if f is None or f.role == "unread":  # rows no input reads: solved last, on the true tables
                continue
            el = self.translation(f)
            if f.status == "broken":
                self.must_be_identity(f, el)
                continue
            self.apply(name, el)

    def must_be_identity(self, f: Factor, el: Any) -> None:
        """A broken factor's needed element: where it moves a tensor beyond its precision and brings it closer to B,
        B is refused there; the feature that breaks the factor is named where the move accounts for most of that
        tensor's difference (it at least halves the residual).

        A move that removes only a sliver of the difference (the row means of a random perturbation of W_out, which
        a centring shift would move) is no explanation: the refusal then names the tensor at its first factor
        (:func:`_last_factor`), "not in the orbit of A", and says how much of the difference the move carried."""
        for name in list(self.pending):  # the trial reads every tensor: the pending tables written out
            self.materialise(name)
        trial = act(self.spec, self.cur, f.name, el)
        for name, l, v in _iter_tensors(trial):
            target = self.tgt[name] if l is None else self.tgt["layers"][l][name]
            target = _torch().cat([x.reshape(1, -1) for x in target]) if isinstance(target, list) else target
            before = self.cur[name] if l is None else self.cur["layers"][l][name]
            before = _torch().cat([x.reshape(1, -1) for x in before]) if isinstance(before, list) else before
            moved = _rel(v, before)
            tol = relation_tolerance(self.precision(name, l), length=self.applied_length(l))[0]
            after, size = _rel(v, target), _rel(before, target)
            # what the steps so far leave of B here may be their own element's rounding, carried by its condition
            # number: within that (:meth:`left_to_check`) no refusal (at the 8 u above, a float32 Llama B = g . A
            # with a value gauge of condition number 1e4 on one head was "not related" at W_O: the broken centring
            # shift carried 9% of that rounding), and no related answer either: the check, widened by that number,
            # took a forged move of the broken factor there (W_O's all-ones row, or b_V, moved by 30 u beside a
            # value gauge of condition number 10: related, its file verified; probe)
            if moved > tol and after < size and self.left_to_check(f.name, l, name, size, tol):
                self.broken_moves.append(f"{name}" + (f" (layer {l})" if l is not None else "") + f" differs from A "
                                         f"by {size:.3g}, and a move of {f.name} ({f.group}), which this architecture "
                                         f"breaks, carries part of it: past a perfectly conditioned element's "
                                         f"{tol:.3g}, within what the element's condition number carries")
                continue
            if moved > tol and after < size:
                explains, share = _move_explains(size, after)
                if explains:
                    self.refuse(f.name, l, name, size, tol, self.features_breaking(f),
                                f"B differs from A by a move of this factor ({f.group}), which this architecture "
                                "breaks", rounding=tol)
                self.refuse(_last_factor(self.spec, self.steps, name), l, name, size, tol, [],
                            f"B differs from A there beyond its precision; a move of {f.name} ({f.group}), which "
                            f"this architecture breaks, would carry {share:.0%} of the squared difference, and no "
                            "element of G the rest", rounding=tol)

    def _diff(self, tensor: str, l: int | None, index: int | None = None) -> Any:
        a = self.table(tensor) if l is None else self.cur["layers"][l][tensor]
        b = self.tgt[tensor] if l is None else self.tgt["layers"][l][tensor]
        if index is not None:
            a, b = a[index], b[index]
        return b - a

    def translation(self, f: Factor) -> Any:
        """The element of translation factor ``f`` that moves the pivot to the target, at ``f``'s scope."""
        if f.scope == "model":
            return self.model_translation(f)
        first = self.L - int(self.spec.boundaries("model")) if f.scope == "stack" else 0
        return [self.layer_translation(f, l) for l in range(first, self.L)]

    def layer_translation(self, f: Factor, l: int) -> dict[str, Any]:
        el: dict[str, Any] = {}
        for t in f.tags:
            if t.how == "translate":
                if t.scope == "prev":
                    el[t.component] = self._diff(*boundary_norm(t.tensor, l))
                elif t.index:
                    el[t.component] = self._head_diffs(t.tensor, l)
                else:
                    el[t.component] = self._diff(t.tensor, l)
            elif t.how == "hyperplane_weight":
                gain = self.gain_for(t, l, self.cur)
                u = (1 / gain).reshape(-1, 1)
                n2 = float((u * u).sum())
                if t.index:
                    el[t.component] = [u.T @ d / n2 for d in self._head_diffs(t.tensor, l)]
                else:
                    el[t.component] = u.T @ self._diff(t.tensor, l) / n2
            elif t.how == "translate_ones" and t.component not in el:
                if t.index:
                    el[t.component] = [d.mean(1, keepdim=True) for d in self._head_diffs(t.tensor, l)]
                else:
                    el[t.component] = self._diff(t.tensor, l).mean(1, keepdim=True)
        return el

    def _head_diffs(self, tensor: str, l: int) -> list[Any]:
        """Every head block's ``B - A`` of ``tensor`` in layer ``l`` (:meth:`_diff` of each index, in one pass over
        the two lists: a per-layer translation reads three or four such tensors a layer, a dozen blocks each)."""
        return [b - a for a, b in zip(self.cur["layers"][l][tensor], self.tgt["layers"][l][tensor])]

    def model_translation(self, f: Factor) -> dict[str, Any]:
        torch = _torch()
        el: dict[str, Any] = {}
        # a model-wide factor moves the tables along the all-ones row: this translation keeps the part off it
        centring = any(u.how == "translate_ones" for x in self.present.values() if x.scope == "model" for u in x.tags)
        for t in f.tags:  # means of B minus means of A: the mean is linear, no whole-table difference is formed
            if t.how == "translate_rows":
                w = None if t.tensor in self.prescribed else self.row_weights(t.tensor)
                m = (self.target_mean(t.tensor, 0) - self.col_means(t.tensor)) if w is None else \
                    _weighted_rows(self.tgt[t.tensor], w) - self.col_means(t.tensor, w)
                if centring:  # m (I - 11^T/d): the row mean removed (not a dense d x d product on the table)
                    m = m - m.mean(1, keepdim=True)
                el[t.component] = m
            elif t.how == "translate_ones":
                el[t.component] = self.target_mean(t.tensor, 1) - self.row_means(t.tensor)
            elif t.how == "translate_leading_rows":
                from symtrans.group.forward import unused_position_rows

                k = unused_position_rows(self.spec.arch)
                el[t.component] = self._diff(t.tensor, None)[:k]
            elif t.how == "translate" and t.tensor in self.cur:
                el[t.component] = self._diff(t.tensor, None)
        _ = torch
        return el


def apply_steps(spec: GroupSpec, params: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply a list of (factor, element) steps to block-form parameters, in order, through :func:`act`.

    Examples
    --------
    >>> import sympy as sp
    >>> from symtrans.arch import get_arch
    >>> spec = GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=1, H_kv=1, d_model=64))
    >>> apply_steps(spec, {"layers": [{"W_O": [sp.eye(2)]}]},
    ...             [{"factor": "vo-gauge", "element": [{"g": [sp.diag(2, 1)]}]}])["layers"][0]["W_O"][0]
    Matrix([
    [1/2, 0],
    [  0, 1]])
    """
    for s in steps:
        params = act(spec, params, s["factor"], s["element"])
    return params


def _iter_tensors(params: dict[str, Any], *, blocks: bool = False) -> Any:
    """(name, layer, tensor) of every tensor; a list of per-head blocks concatenated, or kept (``blocks``)."""
    for l, lp in enumerate(params["layers"]):
        for name, v in lp.items():
            yield name, l, (_torch().cat([x.reshape(1, -1) for x in v]) if isinstance(v, list) and not blocks else v)
    for name, v in params.items():
        if name != "layers" and v is not None and name != "X":
            yield name, None, v


def _rel_any(x: Any, target: Any) -> float:
    """:func:`_rel` of a tensor, or of a list of per-head blocks as if concatenated (the blocks' squared norms
    summed by ``torch._foreach_norm``: no concatenated copies).

    Examples
    --------
    >>> import torch
    >>> a = [torch.ones(2, 2, dtype=torch.float64), 2 * torch.ones(3, dtype=torch.float64)]
    >>> b = [torch.ones(2, 2, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
    >>> flat = [torch.cat([x.reshape(-1) for x in y]) for y in (a, b)]
    >>> round(_rel_any(a, b), 12), round(_rel(*flat), 12), round((3 / 7) ** 0.5, 12)
    (0.654653670708, 0.654653670708, 0.654653670708)
    >>> round(_rel_any([torch.ones(2), 2 * torch.ones(2)], torch.ones(2, 2)), 6)  # blocks against their stack
    0.707107
    """
    torch = _torch()
    if isinstance(x, list) != isinstance(target, list):  # per-head blocks (act's form) against the stacked tensor
        x, target = (torch.stack(x), target) if isinstance(x, list) else (x, torch.stack(target))
    if not isinstance(x, list):
        return _rel(x, target)
    n, d = _norm_any(target), _norm_any(torch._foreach_sub(x, target))
    return d / n if n > 0 else d


def _norm_any(x: Any) -> float:
    """``|x|_F`` of a tensor, or of a list of per-head blocks as if concatenated.

    Examples
    --------
    >>> import torch
    >>> _norm_any([torch.ones(2, 2, dtype=torch.float64), torch.ones(5, dtype=torch.float64)])
    3.0
    """
    torch = _torch()
    if isinstance(x, (list, tuple)):  # torch._foreach_* return tuples
        return math.sqrt(sum(float(v) ** 2 for v in torch._foreach_norm(x)))
    return _fro(x)



def _same_shape_groups(mats: list[Any]) -> list[list[int]]:
    """The indices of ``mats`` grouped by shape and dtype, in order of first appearance (each group one stack).

    Examples
    --------
    >>> import torch
    >>> _same_shape_groups([torch.eye(2), torch.eye(3), torch.zeros(2, 2)])
    [[0, 2], [1]]
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, m in enumerate(mats):
        groups.setdefault((tuple(m.shape), m.dtype), []).append(i)
    return list(groups.values())


#: :func:`mixing`'s key for a tag that acts on a tensor in every layer
EVERY_LAYER = "*"


def mixing(spec: GroupSpec, steps: list[dict[str, Any]], *, composed: bool = True,
           couplings: dict[tuple[tuple[str, Any], int], Any] | None = None
           ) -> dict[tuple[str, Any], dict[int, frozenset[int] | None]]:
    """Per ``(tensor, layer)`` (:data:`EVERY_LAYER` for a step that acts on it in every layer alike), the axes
    (positions in its axes, ``head`` first for a per-head tensor) that a step of ``steps`` mixes, each with the
    per-head blocks whose component mixes it (None: every block, or a tensor not in blocks). A permutation,
    monomial scalings and translations mix nothing; a dense gauge or rotation mixes its axis, in the layer and
    block it acts on. (Read per tensor alone, one dense gauge on one head of one layer switched the slices of that
    axis off in every layer and head: a forger added one to hide a ``W_Q`` entry of another layer.) A factor's
    steps are read together (:func:`_composed_steps`: a rotation and its inverse mix nothing); ``composed=False``
    reads each step alone (where float64 rounding of a dense product reaches). ``couplings``, where given, gets per
    ``(key, axis)`` and per block (``(index, count)`` of a component list; None for one matrix acting on every
    block) which indices of the axis the mixing components couple (a boolean matrix, their patterns OR-ed; True for
    all): :func:`coupled_groups` reads it.

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> eye, dense = torch.eye(2), torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    >>> steps = [{"factor": "qk-gauge", "element": [{"g": [eye, eye]}, {"g": [eye, dense]}]}]
    >>> m = mixing(spec, steps)
    >>> m[("W_Q", 1)], ("W_Q", 0) in m  # layer 1's head 1 (of 2 components) only: its qk columns
    ({2: frozenset({(1, 2)})}, False)
    >>> _mixed_at(m, "W_Q", 1, 4)  # four query heads sharing two components (GQA): heads 2 and 3
    {2: frozenset({2, 3})}

    Each mixed block is kept as ``(index, count)`` of its component list: under grouped-query attention a gauge
    has one component per key/value head, which acts on ``H / H_kv`` query heads (:func:`_mixed_at`).
    """
    out: dict[tuple[str, Any], dict[int, frozenset[int] | None]] = {}

    def mark(key: tuple[str, Any], axis: int, blocks: frozenset[int] | None) -> None:
        axes = out.setdefault(key, {})
        old = axes.get(axis, frozenset())
        axes[axis] = None if blocks is None or old is None else old | blocks

    seen: dict[int, tuple[Any, frozenset[int] | None]] = {}

    def couple(into: dict[tuple[tuple[str, Any], int], Any], where: tuple[tuple[str, Any], int], x: Any,
               blocks: frozenset[int] | None, how: str) -> None:
        """OR into ``into[where]`` the pattern of the matrix each mixing component of ``x`` acts by (the component,
        or its inverse where the tag acts by that; for a gain's conjugation, where both reach), symmetrised; every
        index where that is not a square matrix (a translation)."""
        if not isinstance(x, (list, tuple)):
            mats = [(None, x)]  # one matrix for every block
        else:
            mats = [((i, n), x[i]) for i, n in sorted(blocks)] if blocks is not None else \
                [((i, len(x)), m) for i, m in enumerate(x)]
        per = into.setdefault(where, {})
        for (block, _), pattern in zip(mats, patterns(x, [m for _, m in mats], how)):
            old = per.get(block)
            if old is not True:
                per[block] = True if pattern is True else pattern | pattern.T if old is None \
                    else old | pattern | pattern.T

    made: dict[tuple[int, str], tuple[Any, dict[int, Any]]] = {}

    def patterns(x: Any, mats: list[Any], how: str) -> list[Any]:
        """Per matrix of ``mats`` (of component ``x``), the pattern of what the tag acts by (True where that is not
        a square matrix: a translation couples every index, its size unknown here). Square matrices of one shape
        are read as one stack (one near-pattern, one batched inverse), and each (component, kind) once: a
        gauge's inverse is read by two tags."""
        kind = "conjugate" if how == "conjugate_diagonal" else "inverse" if how in (
            "inverse", "inverse_transpose", "conjugate_gain") else "element"
        cache = made.setdefault((id(x), kind), (x, {}))[1]  # x kept alive: its id is not reused within this call
        dense = [m.dense() if _is_monomial_matrix(m) else m for m in mats]
        todo = [i for i, m in enumerate(dense) if id(mats[i]) not in cache and how in LINEAR_ACTIONS and _square(m)]
        torch = _torch()
        for group in _same_shape_groups([dense[i] for i in todo]):
            idx = [todo[i] for i in group]
            M = torch.stack([dense[i] for i in idx]).to(torch.float64)
            pattern = _near_pattern(M) != 0
            if kind != "element":
                inverse = _near_pattern(torch.linalg.inv(M)) != 0
                # diag(g^-1 diag(x) g)_i sums (g^-1)_ik x_k g_ki: k reaches i where both are non-zero
                pattern = inverse & pattern.transpose(-1, -2) if kind == "conjugate" else inverse
            for i, pat in zip(idx, pattern):
                cache[id(mats[i])] = (mats[i], pat)
        return [cache[id(m)][1] if id(m) in cache and how in LINEAR_ACTIONS else True for m in mats]

    def mixed_blocks(x: Any) -> frozenset[int] | None:
        """The blocks a component mixes (empty: none); None where a single matrix mixes every block. A component
        read by several tags is judged once; a list of dense squares of one shape, in one batched test."""
        if id(x) in seen:
            return seen[id(x)][1]
        if not isinstance(x, (list, tuple)):
            out = None if _square(x) and not _monomial(_near_pattern(x)) else frozenset()
        else:
            dense = [i for i, m in enumerate(x) if _square(m) and not _is_monomial_matrix(m)]
            if dense and all(x[i].shape == x[dense[0]].shape and x[i].dtype == x[dense[0]].dtype for i in dense):
                X = _near_pattern(_torch().stack([x[i] for i in dense]))
                nz = X != 0
                mono = ((nz.sum(1) == 1).all(-1) & (nz.sum(2) == 1).all(-1)).tolist()  # :func:`_monomial`, at once
                out = frozenset((i, len(x)) for i, m in zip(dense, mono) if not m)
            else:
                out = frozenset((i, len(x)) for i in dense if not _monomial(_near_pattern(x[i])))
        seen[id(x)] = (x, out)  # x kept alive: its id is not reused within this call
        return out

    for st in _composed_steps(spec, steps) if composed else steps:
        f = spec.factor(st["factor"])
        el = st["element"]
        for t in f.tags:
            if t.side not in ("left", "right"):
                continue  # a head permutation or a translation: each slice moved by itself
            if f.scope == "layer" and isinstance(el, list) and t.scope == "layer":
                targets = [((t.tensor, l), e) for l, e in enumerate(el)]
            elif f.scope == "model" and isinstance(el, dict):
                targets = [((t.tensor, None if t.scope == "model" else EVERY_LAYER), el)]
            else:  # between layers, or any other placement: every layer alike, by any of its elements
                targets = [((t.tensor, EVERY_LAYER), e) for e in (el if isinstance(el, list) else [el])]
            for key, e in targets:
                comp = t.component + _REVERSED if t.component + _REVERSED in e and _composes_reversed(t) else t.component
                # a linear action mixes an axis where its component is not monomial (a gain's conjugation by a
                # permutation moves each entry by itself: read as mixing, an identity residual map or a residual
                # permutation let a shrunk gain entry be rewritten inside the whole vector, logits 132% off)
                blocks = mixed_blocks(e.get(comp)) if t.how in LINEAR_ACTIONS else None
                if blocks is None or blocks:
                    mark(key, t.axis, blocks)
                    if couplings is not None:
                        couple(couplings, (key, t.axis), e.get(comp), blocks, t.how)
    return out


#: :func:`_composed_steps`'s suffix of a component's product taken in reverse order
_REVERSED = "\0reversed"


def _near_pattern(x: Any) -> Any:
    """A dense matrix (or a stack of them) with every entry at most 1e-12 of its row's largest set to 0: what float64
    rounding of a product leaves off a monomial's pattern, and what moves nothing at any scale a check resolves (a
    claimed gauge of the identity but one entry of 1e-30 marked its head's value columns mixed, and a shrunk channel
    was measured inside their fibre, logits 141% off).

    Examples
    --------
    >>> import torch
    >>> g = torch.eye(3, dtype=torch.float64)
    >>> g[0, 2] = 1e-30
    >>> _monomial(g), _monomial(_near_pattern(g))
    (False, True)
    """
    top = x.abs().amax(-1, keepdim=True)
    return x * (x.abs() > 1e-12 * top)


def _repeated_factors(spec: GroupSpec, steps: list[dict[str, Any]], *, linear: bool) -> set[str]:
    """The factors, linear ones or translations (``linear``), that occur in more than one step of ``steps``: what a
    claim may split or cancel, whose steps the tolerances read as one element.

    Examples
    --------
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> st = [{"factor": f, "element": {}} for f in ("qk-gauge", "key-bias-shift", "qk-gauge", "key-bias-shift")]
    >>> _repeated_factors(spec, st, linear=True), _repeated_factors(spec, st[:3], linear=False)
    ({'qk-gauge'}, set())
    """
    counts = collections.Counter(st["factor"] for st in steps if linear_factor(spec, st["factor"]) == linear)
    return {n for n, k in counts.items() if k > 1}


def _composes_reversed(tag: Any) -> bool:
    """Whether a tag's actions compose in reverse order of the steps: ``W g1 g2`` (on the right by the element),
    ``(g1 g2)^-1 W`` (on the left by the inverse) and ``W g1^-T g2^-T = W ((g1 g2)^-1)^T`` read ``g1 g2``; ``g2 g1
    W``, ``W g1^-1 g2^-1 = W (g2 g1)^-1`` and ``g2^-T g1^-T W = ((g2 g1)^-1)^T W`` read ``g2 g1``.

    Examples
    --------
    >>> from symtrans.catalogue.model import AxisTag
    >>> _composes_reversed(AxisTag("W_O", 1, "vo-gauge", "left", "inverse")), _composes_reversed(AxisTag("W_V", 2, "vo-gauge", "left", "element"))
    (False, True)
    """
    return tag.how == "inverse" if tag.side == "right" else tag.how in ("element", "inverse_transpose")


def _composed_steps(spec: GroupSpec, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``steps`` with each linear factor that occurs more than once given as one step: its components multiplied in
    order, per layer and per head (a product monomial within float64 rounding made exactly monomial), and beside
    each the product in reverse order (``component + _REVERSED``: the composite of a tag acting on the left by the
    element, or on the right by its inverse, :func:`_composes_reversed`). What the steps move together is what
    mixes an axis: a probe claimed a vo-gauge rotation and then its transpose (the identity) beside
    a value channel a gauge had shrunk by 1e-10, and the rotation, read alone, let that channel be measured as part
    of its head's fibre (rewritten x1001, logits 141% off). Steps whose product this cannot follow (another linear
    step acting on the same tensors between them, components that do not line up) mark nothing mixed: with a head
    permutation between Q on head 0 and Q^T on head 1 (the identity), per-index products read two rotations.

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> Q = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    >>> eye = torch.eye(4, dtype=torch.float64)
    >>> steps = [{"factor": "vo-gauge", "element": [{"g": [Q, eye]}]}, {"factor": "vo-gauge", "element": [{"g": [Q.T, eye]}]}]
    >>> [s["factor"] for s in _composed_steps(spec, steps)], mixing(spec, steps)
    (['vo-gauge'], {})
    >>> mixing(spec, steps[:1])[("W_V", 0)]  # the rotation alone mixes head 0's value columns
    {2: frozenset({(0, 2)})}
    """
    from symtrans.group.numeric import MonomialMatrix

    repeated = _repeated_factors(spec, steps, linear=True)

    def product(xs: list[Any], reverse: bool) -> Any:
        """The components ``xs`` (one per step) multiplied in order (``reverse``: the other way); None where they
        are not square matrices of one shape (or lists of them) that multiply to a near-monomial."""
        if all(isinstance(x, (list, tuple)) for x in xs):
            if len({len(x) for x in xs}) != 1:
                return None
            out = [product([x[i] for x in xs], reverse) for i in range(len(xs[0]))]
            return None if any(o is None for o in out) else out
        mats = [x.dense() if isinstance(x, MonomialMatrix) else x for x in xs]
        if not all(_square(m) and m.shape == mats[0].shape for m in mats):
            return None
        return _near_pattern(functools.reduce(lambda a, b: a @ b, reversed(mats) if reverse else mats))

    def merge(els: list[Any]) -> Any:
        if all(isinstance(e, dict) for e in els):
            if len({frozenset(e) for e in els}) != 1:
                return None
            out = {}
            for c in els[0]:
                xs = [e[c] for e in els]
                if not all(hasattr(x, "shape") or isinstance(x, (list, tuple)) for x in xs):
                    return None
                fwd, rev = product(xs, False), product(xs, True)
                if fwd is None or rev is None:
                    return None
                out[c], out[c + _REVERSED] = fwd, rev
            return out
        if all(isinstance(e, list) for e in els) and len({len(e) for e in els}) == 1:
            out = [merge([e[i] for e in els]) for i in range(len(els[0]))]
            return None if any(o is None for o in out) else out
        return None

    out: list[dict[str, Any]] = []
    done: set[str] = set()
    for st in steps:
        name = st["factor"]
        if name not in repeated:
            out.append(st)
        elif name not in done:
            done.add(name)
            at = [i for i, s in enumerate(steps) if s["factor"] == name]
            moves = _acts_on(spec, name)
            # (the identity of another factor between them moves nothing: a claim that put an identity head
            # permutation between a gauge and its inverse kept each step's condition number, 99, on W_V and W_O)
            between = any(linear_factor(spec, steps[i]["factor"]) and _acts_on(spec, steps[i]["factor"]) & moves
                          and not _is_identity(steps[i]["element"])
                          for i in range(at[0], at[-1] + 1) if steps[i]["factor"] != name)
            merged = None if between else merge([steps[i]["element"] for i in at])
            if merged is not None:
                out.append({"factor": name, "element": merged})
            # else: steps whose product this cannot follow (another linear step between them, a head permutation
            # that carries a rotation to another head and its inverse back; components that do not line up) mix
            # nothing here, and each entry is held to its own scale: a genuine B of such a claim still carries
            # float64's rounding of the dense products, which ``dense_rounding`` allows for
    return out


def coupled_groups(couplings: dict[tuple[tuple[str, Any], int], Any], name: str, layer: Any, axis: int,
                   blocks: int | None = None) -> Any:
    """The groups of indices of axis ``axis`` of ``name`` at ``layer`` that :func:`mixing`'s components couple (its
    every-layer steps included): a label per index, the smallest index of its connected component, as one row
    (every block alike) or, for a tensor of ``blocks`` per-head blocks, one row per block (a head's own maps only:
    one head's dense gauge merged into another's sparse one let a value channel the sparse one leaves alone be
    rewritten inside that head's whole fibre, logits 141% off); None where one group spans the whole axis in every
    block, or nothing is recorded.

    Examples
    --------
    >>> import torch, math
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> G = torch.eye(4, dtype=torch.float64)
    >>> G[1:3, 1:3] = torch.tensor([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]])
    >>> Q = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    >>> c = {}
    >>> _ = mixing(spec, [{"factor": "vo-gauge", "element": [{"g": [G, Q]}]}], couplings=c)
    >>> coupled_groups(c, "W_V", 0, 2, blocks=2).tolist()  # head 0: a rotation of indices 1 and 2; head 1: dense
    [[0, 1, 1, 3], [0, 0, 0, 0]]
    """
    torch = _torch()
    per: dict[Any, Any] = {}
    for key in ((name, layer), (name, EVERY_LAYER)):
        for block, adj in couplings.get((key, axis), {}).items():
            old = per.get(block)
            per[block] = True if adj is True or old is True else adj if old is None else old | adj
    if not per:
        return None

    def components(adj: Any) -> Any:
        n = adj.shape[0]
        if bool(adj.all()):  # a dense map's: one group (no propagation to run)
            return torch.zeros(n, dtype=torch.long)
        labels = torch.arange(n)
        big = torch.full((n, n), n, dtype=labels.dtype)
        while True:  # each index takes the smallest label among its neighbours until none changes
            new = torch.minimum(labels, torch.where(adj, labels[None, :].expand(n, n), big).amin(1))
            if bool((new == labels).all()):
                return labels
            labels = new

    size = next(a.shape[0] for a in per.values() if a is not True) if any(a is not True for a in per.values()) \
        else None
    if size is None:
        return None
    whole, alone = torch.zeros(size, dtype=torch.long), torch.arange(size)
    shared = per.get(None)
    if blocks is None:  # not in blocks: every block's coupling acts on the one tensor
        adj = functools.reduce(lambda a, b: True if a is True or b is True else a | b, per.values())
        rows = [whole if adj is True else components(adj)]
    else:
        rows = []
        for h in range(blocks):
            mine = [a for blk, a in per.items() if blk is not None and h * blk[1] // blocks == blk[0]]
            mine += [shared] if shared is not None else []
            adj = functools.reduce(lambda a, b: True if a is True or b is True else a | b, mine) if mine else None
            rows.append(alone if adj is None else whole if adj is True else components(adj))
    out = torch.stack(rows)
    if bool((out == 0).all()):
        return None
    return out[0] if blocks is None else out


def _mixed_at(mixed: dict[tuple[str, Any], dict[int, Any]], name: str, layer: Any, blocks: int | None = None
              ) -> dict[int, frozenset[int] | None]:
    """:func:`mixing`'s axes of ``name`` at ``layer``, its every-layer steps included, each with the tensor's
    blocks that a step mixes along it (of ``blocks`` per-head blocks: a component ``i`` of ``n`` acts on blocks
    ``h`` with ``h n // blocks == i``), or None for every block (a tensor not in blocks: any block mixed)."""
    out: dict[int, frozenset[int] | None] = {}
    for key in ((name, layer), (name, EVERY_LAYER)):
        for axis, comps in mixed.get(key, {}).items():
            if comps is None or blocks is None:
                hit = None
            else:
                hit = frozenset(h for h in range(blocks) for i, n in comps if h * n // blocks == i)
            old = out.get(axis, frozenset())
            out[axis] = None if hit is None or old is None else old | hit
    return out


def slice_axes(spec: GroupSpec, steps: list[dict[str, Any]], names: Any) -> dict[str, tuple[int, ...]]:
    """Per tensor of ``names``, the axes (positions in its axes, ``head`` first for a per-head tensor) along which
    ``steps`` move every slice by itself in every layer (:func:`mixing`: no step mixes them, in any layer or
    block; :func:`tensor_residuals` reads it per layer and block). Along such an axis each slice of g . A is
    reproduced to the rounding of that slice, whatever the rest of the tensor holds (:func:`worst_slice`); a
    vector's one axis, entry by entry (:func:`worst_entries`).

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> steps = [{"factor": "qk-gauge", "element": [{"g": [torch.tensor([[1.0, 1.0], [0.0, 1.0]])]}]}]
    >>> slice_axes(spec, steps, ["W_Q", "word", "b_O"])  # W_Q: heads and model rows; its qk columns mixed
    {'W_Q': (0, 1), 'word': (0, 1), 'b_O': (0,)}
    """
    from symtrans.catalogue.model import _axes

    mixed = mixing(spec, steps)
    out = {}
    for name in names:
        gone = {a for (n, _), axes in mixed.items() if n == name for a in axes}  # mixed in any layer
        keep = tuple(p for p in range(len(_axes(name))) if p not in gone)
        if keep:
            out[name] = keep
    return out


def _slice_norms(x: Any, dims: tuple[int, ...]) -> list[Any]:
    """Per axis of ``dims``, the Frobenius norm of each slice of ``x`` along it.

    A CPU tensor's sums of squares go through NumPy's ``einsum`` (``"ij,ij->i"``), which never forms the squares:
    on the bundled model's word table, rows and columns at once, 8 ms against 44 ms for torch's ``square`` and
    two sums, and 20 ms for two ``vector_norm`` calls (one thread).

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)
    >>> [v.tolist() for v in _slice_norms(x, (0, 1))]
    [[5.0, 1.0], [3.0, 4.123105625617661]]
    """
    torch = _torch()
    if x.dim() < 2:
        return [x.abs() for _ in dims]
    if x.device.type == "cpu" and not x.requires_grad:
        import numpy as np

        a = x.detach().numpy()
        ix = "ijklmn"[:x.dim()]
        return [torch.from_numpy(np.sqrt(np.einsum(f"{ix},{ix}->{ix[k]}", a, a))) for k in dims]
    sq = x.square()
    return [sq.sum([d for d in range(x.dim()) if d != k]).sqrt() for k in dims]


def _head_vector(name: str, v: Any) -> bool:
    """Whether ``v`` is a per-head vector (``b_Q``, ``b_K``, ``b_V``): two axes, each head's block a 1 x m row."""
    from symtrans.catalogue.model import _axes

    return isinstance(v, (list, tuple)) and len(_axes(name)) == 2 and all(b.dim() == 2 and b.shape[0] == 1 for b in v)


def _stacked_dims(name: str, v: Any, keep: tuple[int, ...]) -> tuple[Any, tuple[int, ...]] | None:
    """``(tensor, dims)``: a block-form tensor as one tensor (per-head blocks stacked, the head axis first) and
    the dims that axes ``keep`` of :func:`slice_axes` are in it; None for a vector (a 1 x m row, no slices)."""
    from symtrans.catalogue.model import _axes

    axes = _axes(name)
    if isinstance(v, (list, tuple)):
        x = _torch().stack(list(v))
        block = x.dim() - 1  # each head's block: its axes, or a per-head vector stored as a 1 x m row
        if block != len(axes) - 1 and not _head_vector(name, v):
            return None
        # a per-head vector's one inner axis is the block's last
        return x, tuple(0 if p == 0 else (block if len(axes) == 2 else p) for p in keep)
    if len(axes) < 2 or v.dim() != len(axes):
        return None
    return v, keep


def slice_stats(name: str, moved: Any, target: Any, keep: tuple[int, ...]) -> dict[int, tuple[Any, Any]] | None:
    """Per axis of ``keep`` (:func:`slice_axes`), the norms of each slice of g . A - B and of B (block form): what
    :func:`worst_slice` reads, and the tensor's own residual (:func:`_stats_residual`). None for a vector.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> st = slice_stats("W_in", x, 2 * x, (0, 1))
    >>> [v.tolist() for v in st[0]], _stats_residual(st)
    ([[1.0, 1.0], [2.0, 2.0]], 0.5)
    """
    got = _stacked_dims(name, moved, keep)
    if got is None:
        return None
    x, dims = got
    t = _stacked_dims(name, target, keep)[0]
    return {p: ns for p, ns in zip(keep, zip(_slice_norms(x - t, dims), _slice_norms(t, dims)))}


def _stats_residual(stats: dict[int, tuple[Any, Any]]) -> float:
    """``|g.A - B|_F / |B|_F`` from one axis's slice norms (:func:`slice_stats`): the tensor's residual, as
    :func:`_rel` measures it, without a second pass."""
    dn, tn = next(iter(stats.values()))
    d, n = float(dn.square().sum().sqrt()), float(tn.square().sum().sqrt())
    return d / n if n > 0 else d


def _floor_scale(scale: Any) -> float:
    """The scale below which a slice is measured at a typical slice's: the median slice's, or four times the 10th
    percentile's where that is smaller. A translation or a map fitted over the whole tensor spreads its error over
    the slices evenly, so a slice far smaller than most is reproduced only to a typical one's rounding (small vocab
    columns of an untied GPT-2 head missed their own norm's tolerance by up to 2.5x on genuine pairs, twice the
    10th percentile's by up to 1.6x). The median alone let a forgery hide: with more than half of A's word rows
    at 1e10 the median is one of them, and B rewrote every other row unseen; the 10th percentile is a small
    slice's unless 90% of them are large.

    Examples
    --------
    >>> import torch
    >>> _floor_scale(torch.tensor([1.0] * 3 + [1e10] * 4, dtype=torch.float64))  # 4 of 7 at 1e10
    4.0
    >>> _floor_scale(torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0], dtype=torch.float64))  # the median
    2.0
    """
    import numpy as np

    v = _as_numpy(scale).reshape(-1)
    n = v.size
    if n < 2:
        return float(v.max()) if n else 0.0
    if bool(np.isnan(v).any()):
        return math.nan  # as a median and a quantile of a vector holding a NaN: every scale then reads NaN
    # two order statistics from one partition (a full sort of the word table's 30522 rows cost 2 ms): the median
    # is the lower middle value (torch.median's); the 10th percentile is interpolated linearly between its two
    # neighbours (torch.quantile's, in its two forms of the interpolation)
    pos = 0.1 * (n - 1)
    lo, mid = math.floor(pos), (n - 1) // 2
    hi = min(lo + 1, n - 1)
    s = np.partition(v, sorted({lo, hi, mid}))
    w = pos - lo
    q10 = s[lo] + w * (s[hi] - s[lo]) if w < 0.5 else s[hi] - (s[hi] - s[lo]) * (1 - w)
    return min(float(s[mid]), 4 * float(q10))


def _as_numpy(x: Any) -> Any:
    """A torch tensor (or a NumPy array, returned as it is) as a NumPy array on the CPU: float32 and float64 as
    they are, any other dtype widened to float64 (NumPy has no bfloat16).

    Examples
    --------
    >>> import torch
    >>> _as_numpy(torch.tensor([1.5], dtype=torch.bfloat16)).dtype, _as_numpy(torch.ones(2)).dtype
    (dtype('float64'), dtype('float32'))
    """
    if not hasattr(x, "detach"):
        return x
    torch = _torch()
    x = x.detach()
    if x.dtype not in (torch.float32, torch.float64):
        x = x.double()
    return x.cpu().numpy()


def worst_slice(name: str, stats: dict[int, tuple[Any, Any]], extra: dict[int, Any] | None = None, *,
                scales: dict[int, tuple[Any, float]] | None = None) -> dict[str, Any] | None:
    """The slice of a tensor (its axis, index, residual relative to its scale, and the slice's share of the tensor's
    norm) reproduced worst. A slice's scale is the larger of B's slice (``extra``: per axis, also those of g . A
    and of A moved by the element's linear steps, the scale of what a translation cancels) and :func:`_floor_scale`
    along that axis: one beside much larger ones (a word row of 1e10) is measured at its own. ``scales``:
    :func:`_slice_scales` of ``stats`` and ``extra``, where the caller has them (:func:`slices_can_hide` reads
    the same). In NumPy: a dozen torch calls on a vector of 12 or 384 per axis cost the check 10 ms a relate.

    Examples
    --------
    >>> import torch
    >>> dn = torch.tensor([1e-3] + [0.0] * 9 + [0.5], dtype=torch.float64)
    >>> tn = torch.tensor([1e10] + [1.0] * 10, dtype=torch.float64)  # row 10 rewritten beside 1e10
    >>> w = worst_slice("word", {0: (dn, tn)})
    >>> w["axis"], w["index"], w["residual"], w["share"] < 1e-9
    ('vocab', 10, 0.5, True)
    >>> tn[10] = 1e-3  # a slice far below the rest: measured at the 10th percentile's scale (1.0)
    >>> worst_slice("word", {0: (dn * 1e-3, tn)})["residual"]
    0.0005
    """
    import numpy as np

    from symtrans.catalogue.model import _axes

    scales = _slice_scales(stats, extra) if scales is None else scales
    best: dict[str, Any] | None = None
    for p, (dn, _) in stats.items():
        raw, floor = scales[p]
        scale, dd = np.maximum(raw, floor), _as_numpy(dn)
        pos = scale > 0
        with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 and inf/inf read NaN, as torch's do
            ratio = np.where(pos, dd / np.where(pos, scale, 1.0), np.where(dd > 0, math.inf, 0.0))
        i = int(ratio.argmax())  # the first NaN where there is one, as torch's argmax
        r = float(ratio[i])
        if best is None or r > best["residual"]:
            total = float(np.sqrt(np.square(scale).sum()))
            best = {"axis": _axes(name)[p], "index": i, "residual": r,
                    "share": float(scale[i]) / total if total > 0 else 0.0}
    return best


def _slice_scales(stats: dict[int, tuple[Any, Any]], extra: dict[int, Any] | None = None
                  ) -> dict[int, tuple[Any, float]]:
    """Per axis of ``stats`` (:func:`slice_stats`): each slice's scale as :func:`worst_slice` reads it (B's slice,
    with ``extra`` the larger of it and extra's), in NumPy and before its floor, and :func:`_floor_scale`'s floor.

    Examples
    --------
    >>> import torch
    >>> tn = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    >>> (scale, floor), = _slice_scales({0: (tn * 0, tn)}, {0: tn.flip(0)}).values()
    >>> scale.tolist(), floor
    ([3.0, 2.0, 3.0], 3.0)
    """
    import numpy as np

    out = {}
    for p, (_, tn) in stats.items():
        scale = _as_numpy(tn)
        if extra is not None and p in extra:
            scale = np.maximum(scale, _as_numpy(extra[p]))
        out[p] = (scale, _floor_scale(scale))
    return out


#: an entry of a vector more than this many times :func:`_floor_scale`'s is an outlier: left out of the typical
#: entry's scale (:func:`worst_entries`)
ENTRY_OUTLIER = 16.0


def slices_can_hide(stats: dict[int, tuple[Any, Any]], extra: dict[int, Any] | None = None, *,
                    scales: dict[int, tuple[Any, float]] | None = None) -> bool:
    """Whether an entry of a tensor can lie in a large slice along every axis :func:`worst_slice` measured: each
    axis has a slice whose scale (as worst_slice reads it: B's slice, or with ``extra`` the larger of it and
    those) is more than :data:`ENTRY_OUTLIER` times :func:`_floor_scale`'s (``scales``: :func:`_slice_scales`'s,
    where the caller has them). Only then can one entry be moved
    beside larger ones in every slice that holds it (:func:`worst_entries` then measures the entries). A GPT-2
    whose layer-0 ``W_in`` held two inert entries at 1e9 (one in a unit no ``W_out`` row reads, one in a channel
    its norm's gain of 1e-30 silences) hid entry ``[i, j]`` between them: verify accepted a file claiming B = A
    with that entry moved by 100. Where some axis has no large slice, each entry's slice along it bounds the entry.

    Examples
    --------
    >>> import torch
    >>> big = torch.tensor([1e9, 1.0, 1.0, 1.0], dtype=torch.float64)
    >>> flat = torch.ones(4, dtype=torch.float64)
    >>> zero = torch.zeros(4, dtype=torch.float64)
    >>> slices_can_hide({0: (zero, big), 1: (zero, big)}), slices_can_hide({0: (zero, big), 1: (zero, flat)})
    (True, False)
    >>> slices_can_hide({0: (zero, flat), 1: (zero, flat)}, {0: big, 1: big})  # large in g . A's slices
    True
    """
    return all(_has_large_slice(scale, floor)
               for scale, floor in (_slice_scales(stats, extra) if scales is None else scales).values())


def _has_large_slice(scale: Any, floor: float) -> bool:
    """Whether one axis's slice scales (a NumPy vector, :func:`_slice_scales`'s) hold a large slice: two or more,
    one of them past :data:`ENTRY_OUTLIER` times ``floor`` (:func:`_floor_scale`'s). :func:`slices_can_hide`'s rule."""
    return scale.size >= 2 and bool((scale > ENTRY_OUTLIER * floor).any())


def worst_entries(moved: Any, target: Any, extra: tuple[Any, ...] = ()) -> dict[str, Any] | None:
    """A vector with an outlier entry, its other entries as one measure: its relative residual with each entry at
    least at the typical entry's scale, the outliers left out of that scale; with the entry reproduced worst (its
    index, its share of the norm). None for a vector without an outlier: the tensor's residual covers it.

    An entry's scale ``s_j`` is the larger of B's entry and those of ``extra`` (g . A, and A moved by the element's
    linear steps: the scale of what a translation cancels). An outlier's is more than :data:`ENTRY_OUTLIER` times
    :func:`_floor_scale`'s of all the scales, zeros among them. (B's scale alone cannot decide that: B = A with
    every entry but the outlier set to 0 passed as A with a dead GELU unit's bias at -1e9, 13-17% off. g . A's
    entries are the typical ones then. And with the zeros left out, a B that set one zero entry of a per-head
    bias to 100 beside two dead entries at 1e9 had no typical entry but itself.) The typical scale ``F`` is the
    root mean square of the other entries' scales, and the measure the root mean square of
    ``|g.A - B|_j / max(s_j, F)``: what the tensor's residual would be without its outliers. A bias entry of A at
    1e9 let B rewrite every other entry of that bias unseen by the tensor's residual. A mean, not the worst entry:
    a translation fitted from another tensor (``W_in``'s hyperplane, ``W_V``'s value bias) lands on each entry at
    that tensor's scale, which put single entries of genuine pairs past their own rounding by up to 3.8x.

    Examples
    --------
    >>> import torch
    >>> b = torch.tensor([[1e9] + [1.0] * 9], dtype=torch.float64)
    >>> forged = b.clone(); forged[0, 1:] += 0.5  # every entry but the large one moved by half
    >>> w = worst_entries(forged, b, (forged,))
    >>> round(w["residual"], 3), w["index"], w["share"] < 1e-8
    (0.316, 1, True)
    >>> zeroed = b.clone(); zeroed[0, 1:] = 0  # B zero but for the outlier: g . A's scale finds the typical entry
    >>> worst_entries(b, zeroed, (b,))["residual"]
    0.9486832980505138
    >>> plain = torch.tensor([[3.0, 1.0, 2.0]], dtype=torch.float64)  # no outlier: the tensor's residual covers it
    >>> worst_entries(plain + 0.1, plain) is None
    True
    """
    import numpy as np

    scale = np.abs(_as_numpy(target)).reshape(-1)  # in NumPy: torch's calls on a vector of 384 cost the check
    for x in extra:  # 4 ms a relate, and on most vectors it ends at the outliers' test
        scale = np.maximum(scale, np.abs(_as_numpy(x)).reshape(-1))
    if scale.size == 0 or not bool((scale > 0).any()):
        return None
    # zeros count: where most of A's and B's entries are exactly 0 (a bias transformers initialised), the typical
    # entry is 0 and every other entry is measured at its own scale
    typical = scale[scale <= ENTRY_OUTLIER * _floor_scale(scale)]
    if typical.size == scale.size:
        return None
    d = np.abs(_as_numpy(moved) - _as_numpy(target)).reshape(-1)
    s = np.maximum(scale, float(np.sqrt(np.square(typical).mean())) if typical.size else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s > 0, d / np.where(s > 0, s, 1.0), np.where(d > 0, math.inf, 0.0))
    i = int(ratio.argmax())
    total = float(np.sqrt(np.square(scale).sum()))
    return {"axis": "entries", "index": _entry_index(i, tuple(target.shape)),
            "residual": float(np.sqrt(np.square(ratio).mean())), "measure": "rms",
            "share": float(scale[i]) / total if total > 0 else 0.0}


def _entry_index(i: int, shape: tuple[int, ...]) -> Any:
    """A flat index as an entry's name: itself for a vector (a 1 x m row too), else its position in ``shape``
    (NumPy's ``unravel_index``)."""
    import numpy as np

    if len([n for n in shape if n > 1]) <= 1:
        return i
    return tuple(int(k) for k in np.unravel_index(i, shape))


def _stacked(x: Any) -> Any:
    """A tensor in block form as one tensor: per-head blocks stacked, the head axis first."""
    return _torch().stack(list(x)) if isinstance(x, (list, tuple)) else x


def worst_each(moved: Any, target: Any, floor: float, *, over: tuple[int, ...] = (), widen: Any = None,
               groups: dict[int, Any] | None = None) -> dict[str, Any]:
    """The entry of a tensor (per-head blocks stacked; with ``over``, the fibre along those dims: what a dense
    map moves as a whole) reproduced worst relative to its own scale: ``|g.A - B|_j / s_j`` with ``s_j`` the
    largest of ``|g.A|_j``, ``|B|_j``, ``|widen|_j`` and ``floor``; its index (a vector's entry, else its
    position) and its share of the norm.

    Each entry of g . A is A's moved by scalars (a permutation, monomial scalings), or each fibre by a dense map
    that keeps its norm within its condition number; so each entry (fibre) of B holds its own rounding, and the
    error of a fitted map, relative to its own scale, and nothing else. ``widen``: a fitted translation carries the
    rounding of the tensor it was read from into each entry it moves, at that tensor's scale, not the entry's
    (:func:`translation_allowance`; in units of the entry's rounding, as the scale is). ``groups``: per dim of
    ``over``, a label per index, or a row of them per stacked block (:func:`coupled_groups`): the fibre along it is
    only the indices the map couples (a rotation in the plane of two channels moves a third by itself; read as one
    fibre, a shrunk third channel was rewritten at the fibre's scale, logits 141% off). ``floor``, the smallest
    normal number of B's dtype, covers subnormals. A Frobenius residual, or a slice's, lets an entry far below the
    rest move by the rest's rounding: a helper's probe kept A on the orbit of an ordinary model but with parts g had
    shrunk (a norm gain channel at 1e-6 or 1e-2, its head row inflated; a head's queries shrunk by 1e-6), and B
    rewrote those parts (logits 46% off at float32, 349% at bfloat16) inside the tensor's tolerance; a later probe
    switched the measure off with a translation of 1e-10 in the claim (108% off), which adds nothing at that scale.

    Examples
    --------
    >>> import torch
    >>> b = torch.tensor([[1.0, 1.0, 1e-2]], dtype=torch.float64)
    >>> forged = b.clone(); forged[0, 2] = -0.15  # a small gain entry rewritten: 3% of the vector's norm
    >>> w = worst_each(forged, b, 2.0 ** -126)
    >>> w["index"], round(w["residual"], 3)
    (2, 1.067)
    >>> tiny = torch.full_like(b, 1e-10)  # a widening of 1e-10 everywhere covers nothing at 1e-2
    >>> round(worst_each(forged, b, 2.0 ** -126, widen=tiny)["residual"], 3)
    1.067
    >>> round(worst_each(forged, b, 2.0 ** -126, over=(1,))["residual"], 3)  # the row as one fibre
    0.113
    >>> round(worst_each(forged, b, 2.0 ** -126, over=(1,), groups={1: torch.tensor([0, 0, 2])})["residual"], 3)
    1.067
    """
    torch = _torch()

    def size(x: Any) -> Any:
        return _fibre_size(x, over, groups)

    v, t = _stacked(moved), _stacked(target)
    if not over and widen is None and v.device.type == "cpu" and v.dtype == t.dtype and not v.requires_grad:
        return _worst_each_chunked(v.detach().numpy(), t.detach().numpy(), floor)
    scale = torch.maximum(size(v), size(t))
    if widen is not None:
        scale = torch.maximum(scale, size(_stacked(widen)))
    scale = scale.clamp_min(floor)
    shape = tuple(scale.shape)
    scale = scale.reshape(-1)
    ratio = size(v - t).reshape(-1) / scale
    i = int(ratio.argmax())
    total = float(scale.square().sum().sqrt())
    return {"axis": "entries", "index": _entry_index(i, shape), "residual": float(ratio[i]), "measure": "each",
            "over": bool(over), "share": float(scale[i]) / total if total > 0 else 0.0}


def _fibre_size(x: Any, over: tuple[int, ...], groups: dict[int, Any] | None = None, *, entries: bool = False) -> Any:
    """Each fibre's size along dims ``over``: its norm there, summed over the indices of its group along each dim
    (``groups``: a label per index, or a row of them per block along dim 0; the whole dim where none is given);
    ``|x|`` where ``over`` is empty. With groups (or ``entries``) each entry holds its fibre's size, in ``x``'s
    shape; else one value per fibre (``over`` summed away).

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[3.0, 4.0, 1.0]], dtype=torch.float64)
    >>> _fibre_size(x, (1,)).tolist(), _fibre_size(x, (1,), entries=True).shape
    ([5.0990195135927845], torch.Size([1, 3]))
    >>> _fibre_size(x, (1,), {1: torch.tensor([0, 0, 2])}).tolist()
    [[5.0, 5.0, 1.0]]
    """
    torch = _torch()
    if not over:
        return x.abs()
    if not groups:
        return x.square().sum(over, keepdim=True).sqrt().expand_as(x) if entries else x.square().sum(over).sqrt()
    s2 = x.square()
    for d in over:  # the sum over each index's group along d (the whole dim where none is given), kept in place
        lab = groups.get(d)
        if lab is None:
            s2 = s2.sum(d, keepdim=True).expand_as(x)
        elif lab.dim() == 1:
            onehot = torch.nn.functional.one_hot(lab, int(lab.max()) + 1).to(s2.dtype)
            s2 = torch.movedim(torch.movedim(s2, d, -1) @ onehot @ onehot.T, -1, d)
        else:  # per block (dim 0 of the stacked blocks), each block's own groups
            rows = []
            for h in range(lab.shape[0]):
                onehot = torch.nn.functional.one_hot(lab[h], int(lab[h].max()) + 1).to(s2.dtype)
                rows.append(torch.movedim(torch.movedim(s2[h], d - 1, -1) @ onehot @ onehot.T, -1, d - 1))
            s2 = torch.stack(rows)
    return s2.sqrt()


#: :func:`_worst_each_chunked`'s chunk: two float64 buffers of it stay in a core's L2 cache
_EACH_CHUNK = 2 ** 15


def _worst_each_chunked(a: Any, b: Any, floor: float) -> dict[str, Any]:
    """:func:`worst_each` entry by entry for two NumPy arrays, chunk by chunk in two cached buffers: each value
    of both read once from memory (the whole-array form made seven passes and three fresh arrays: 10 s more for
    Gemma 3 270M's word table of 168M values, against its identity)."""
    import numpy as np

    x, y = np.ravel(a), np.ravel(b)
    n = x.size
    d, s = np.empty(min(n, _EACH_CHUNK)), np.empty(min(n, _EACH_CHUNK))
    best, at, at_scale, sumsq = -1.0, 0, 0.0, 0.0
    for k in range(0, n, _EACH_CHUNK):
        xs, ys = x[k:k + _EACH_CHUNK], y[k:k + _EACH_CHUNK]
        m = xs.size
        dk, sk = d[:m], s[:m]
        np.abs(xs, out=sk)
        np.abs(ys, out=dk)
        np.maximum(sk, dk, out=sk)
        np.maximum(sk, floor, out=sk)
        sumsq += float(np.dot(sk, sk))
        np.subtract(xs, ys, out=dk)
        np.abs(dk, out=dk)
        np.divide(dk, sk, out=dk)
        j = int(dk.argmax())  # a NaN is the first NaN's index: read as infinitely far off (fail closed)
        r = float(dk[j]) if dk[j] == dk[j] else math.inf
        if r > best:
            best, at, at_scale = r, k + j, float(sk[j])
    total = math.sqrt(sumsq)
    return {"axis": "entries", "index": _entry_index(at, a.shape), "residual": best, "measure": "each", "over": False,
            "share": at_scale / total if total > 0 else 0.0}


class _Pair:
    """g . A's tensor and B's (block form), each stacked once, and their difference formed once, on first use:
    :func:`tensor_residuals` reads the slices' norms and the entries from the same three tensors (it stacked each
    side three times, and formed the difference twice, 9 ms a relate on the bundled model)."""

    def __init__(self, v: Any, t: Any, room: dict[int, Any] | None = None) -> None:
        self.blocks = (v, t)
        self._v = self._t = self._d = None
        self.room = room  # per slot, a float64 buffer the caller reuses tensor after tensor (:meth:`_into`)

    def _into(self, slot: int, shape: Any) -> Any:
        """A float64 tensor of ``shape`` in the caller's buffer ``slot`` (None without one): the pair is read
        before the next tensor's is formed, and a fresh buffer per tensor was paged in anew each time (4 KiB at
        a time: more than the subtraction itself on a 590k-value ``W_in``)."""
        if self.room is None:
            return None
        n = math.prod(shape)
        buf = self.room.get(slot)
        if buf is None or buf.numel() < n:
            buf = self.room[slot] = _torch().empty(max(n, 1), dtype=_torch().float64)
        return buf[:n].view(tuple(shape))

    def _stack(self, k: int) -> Any:
        x = self.blocks[k]
        if not isinstance(x, (list, tuple)) or not x or x[0].dtype != _torch().float64 or x[0].requires_grad \
                or x[0].device.type != "cpu":
            return _stacked(x)
        return _torch().stack(list(x), out=self._into(k, (len(x), *x[0].shape)))

    @property
    def v(self) -> Any:
        if self._v is None:
            self._v = self._stack(0)
        return self._v

    @property
    def t(self) -> Any:
        if self._t is None:
            self._t = self._stack(1)
        return self._t

    @property
    def d(self) -> Any:
        if self._d is None:
            x, y = self.v, self.t
            f64 = _torch().float64
            plain = x.dtype != f64 or y.dtype != f64 or x.shape != y.shape or x.requires_grad or y.requires_grad \
                or x.device.type != "cpu" or y.device.type != "cpu"
            self._d = x - y if plain else _torch().sub(x, y, out=self._into(2, x.shape))
        return self._d


def _block_dims(name: str, v: Any, keep: tuple[int, ...]) -> tuple[int, ...] | None:
    """:func:`_stacked_dims`' dims, read from the blocks' shapes without stacking them (None where it gives
    None): the check asks for them per tensor, and a stack per question cost a copy of the tensor."""
    from symtrans.catalogue.model import _axes

    axes = _axes(name)
    if isinstance(v, (list, tuple)):
        block = v[0].dim()
        if block != len(axes) - 1 and not _head_vector(name, v):
            return None
        return tuple(0 if p == 0 else (block if len(axes) == 2 else p) for p in keep)
    if len(axes) < 2 or v.dim() != len(axes):
        return None
    return keep


def _slice_stats_pair(name: str, pair: _Pair, keep: tuple[int, ...]) -> dict[int, tuple[Any, Any]] | None:
    """:func:`slice_stats` of ``pair`` (its blocks, as there), from the pair's stacked tensors and difference:
    the same norms, the tensors stacked and subtracted once for every measure of the check."""
    v = pair.blocks[0]
    if isinstance(v, (list, tuple)) and not v:
        return slice_stats(name, *pair.blocks, keep)
    dims = _block_dims(name, v, keep)
    if dims is None:
        return None
    return {p: ns for p, ns in zip(keep, zip(_slice_norms(pair.d, dims), _slice_norms(pair.t, dims)))}


def _each_bounded(t: Any, slices: tuple[int, Any], over: tuple[int, ...], floor: float, tol: float,
                  scratch: Any = None) -> bool:
    """Whether every entry's (fibre's) ratio of :func:`worst_each` is surely within ``tol`` by a bound read from
    one axis's slices: an entry of g . A - B (a fibre along ``over``) is at most its slice's norm (``slices``:
    the slices' dim in ``t`` and their norms of g . A - B, :func:`slice_stats`'), and its scale at least the
    smallest of B's entries (fibres) in that slice, or ``floor``. Two passes over B where the ratios take seven
    over three tensors; where some slice's bound is not within (an entry of B at 0 there), False: measure them.
    The norms carry twice a sum of their squares' rounding (:func:`~symtrans.precision.sum_rounding`), both
    ways, and what squares below float64's normal range lose (each at most its smallest normal)."""
    import numpy as np

    from symtrans.precision import sum_rounding

    dim, dn = slices
    if dim in over or dn.device.type != "cpu" or dn.dtype != _torch().float64 or t.ndim < 2:
        return False
    rest = tuple(k for k in range(t.ndim) if k != dim)
    if over:  # each fibre's norm of B, then the smallest in each slice
        ix = "ijklmn"[:t.ndim]
        size = np.sqrt(np.einsum(f"{ix},{ix}->" + "".join(c for k, c in enumerate(ix) if k not in over), t, t))
        keep = tuple(k for k in range(t.ndim) if k not in over)
        low = size.min(axis=tuple(i for i, k in enumerate(keep) if k != dim)) if size.ndim > 1 else size
        low = low * (1 - 2 * sum_rounding(math.prod(t.shape[k] for k in over) + 4))
    else:  # (``scratch``: a buffer of t's shape for |t|, reused tensor after tensor)
        low = np.abs(t, out=scratch).min(axis=rest)
    n = math.prod(t.shape[k] for k in rest)
    tiny = smallest_normal("float64")
    top = np.sqrt(dn.detach().numpy() ** 2 * (1 + 2 * sum_rounding(n + 4)) + n * tiny)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf: not within, measured
        bound = top / np.maximum(low, floor)
    worst = float(bound.max()) if bound.size else math.inf
    return worst * (1 + 4 * sum_rounding(n + 4)) <= tol


def _each_within(pair: _Pair, over: tuple[int, ...], floor: float, tol: float,
                 slices: tuple[int, Any] | None = None) -> bool:
    """Whether :func:`worst_each` of ``pair`` (no widening, no groups) surely has a residual within ``tol``: the
    check reads its record only where it does not (then worst_each measures it again, index and share with it).
    Entry by entry it is worst_each's own ratio, each entry's value as there (NaN: not within); along ``over``
    the fibres' norms are summed in another order, so they pass only within ``tol`` less twice what a sum of a
    fibre's squares can round (:func:`~symtrans.precision.sum_rounding`), both ways. False (measure it) for
    anything but CPU tensors of one dtype without gradients."""
    import numpy as np

    from symtrans.precision import sum_rounding

    x, y = pair.v, pair.t
    f64 = _torch().float64
    if x.device.type != "cpu" or x.dtype != f64 or y.dtype != f64 or x.requires_grad or y.requires_grad \
            or not x.numel():
        return False
    d = pair.d.detach().numpy()
    a, b = x.detach().numpy(), y.detach().numpy()
    scratch = None if over else pair._into(3, b.shape)
    if slices is not None and _each_bounded(b, slices, over, floor, tol,
                                            None if scratch is None else scratch.numpy()):
        return True
    if not over:  # :func:`_worst_each_chunked`'s ratios (float64 buffers), chunk by chunk in two cached buffers
        xs, ys, ds = np.ravel(a), np.ravel(b), np.ravel(d)
        n = xs.size
        s, w = np.empty(min(n, _EACH_CHUNK)), np.empty(min(n, _EACH_CHUNK))
        best = 0.0
        for k in range(0, n, _EACH_CHUNK):
            m = xs[k:k + _EACH_CHUNK].size
            sk, wk = s[:m], w[:m]
            np.abs(xs[k:k + _EACH_CHUNK], out=sk)
            np.abs(ys[k:k + _EACH_CHUNK], out=wk)
            np.maximum(sk, wk, out=sk)
            np.maximum(sk, floor, out=sk)
            np.abs(ds[k:k + _EACH_CHUNK], out=wk)
            np.divide(wk, sk, out=wk)
            r = float(wk.max())
            if not r <= tol:  # (a NaN too)
                return False
            best = max(best, r)
        return best <= tol
    ix = "ijklmn"[:x.dim()]
    out = "".join(c for k, c in enumerate(ix) if k not in over)
    sums = [np.einsum(f"{ix},{ix}->{out}", z, z) for z in (a, b, d)]
    # a sum of squares below float64's normal range carries more than the bound below (its terms underflowed)
    low = smallest_normal("float64") / unit_roundoff("float64")
    if any(bool(((q > 0) & (q < low)).any()) for q in sums):
        return False
    size = [np.sqrt(q) for q in sums]
    scale = np.maximum(np.maximum(size[0], size[1]), floor)
    r = float((size[2] / scale).max())
    n = math.prod(x.shape[k] for k in over)
    return r * (1 + 4 * sum_rounding(n + 4)) <= tol


def _dims_of(name: str, v: Any) -> tuple[int, ...]:
    """Per axis of ``name`` (``head`` first for a per-head tensor), its dim in ``v`` stacked (a vector: a 1 x m
    row, its one axis the last dim)."""
    from symtrans.catalogue.model import _axes

    n = len(_axes(name))
    got = _block_dims(name, v, tuple(range(n))) if not isinstance(v, (list, tuple)) or v else None
    if got is not None:
        return got
    return tuple(range(v.dim() - n, v.dim()))


def tensor_residuals(moved: dict[str, Any], target: dict[str, Any], precision: Any, steps: list[dict[str, Any]],
                     spec: GroupSpec, *, measured: dict[tuple[str, int | None], float] | None = None,
                     source: dict[str, Any] | None = None, slices: bool = False,
                     measured_slices: dict[tuple[str, int | None], Any] | None = None,
                     acted: Any = None, b_first: bool = False) -> list[dict[str, Any]]:
    """Per tensor (and layer): relative Frobenius residual of g . A against B, its tolerance and dtype.

    ``precision(name, layer)`` is B's storage dtype of that tensor; the condition number and the number of
    factors acting on each tensor are recomputed from ``steps`` (the element) and G's tag tables.
    ``measured``: residuals already measured by the caller on g . A (relate's lazily acted tables, each
    measured over every value in one chunked pass, relative to B's table); those tensors of ``moved`` are not
    read. ``source``: A's tensors (block form); a residual above its tolerance relative to B's tensor is then
    taken relative to the larger of B's tensor and A's moved by the element's linear steps alone, the scale of
    what a translation cancels (each record's ``relative_to`` says which): a tensor that g cancels to 0 (a bias
    the translations move away entirely, as a canonical form's) is 0 only up to the rounding of what was
    cancelled, which relative to B's own near-0 norm is unbounded. Not A's own tensor: a gauge that shrinks a
    tensor by 1e-8 cancels nothing, and relative to A's tensor a B with random values there passed. (Where the
    residual relative to B passes, so does the other, which is never larger: the linear steps are applied only
    for a tensor that would otherwise fail.)

    ``slices``: also each tensor's slices along the axes the element moves slice by slice (:func:`slice_axes`),
    each against the same tolerance relative to its own norm (``measured_slices``: :func:`slice_stats` of the
    lazily acted tables); the worst is the record's ``slice``, with ``slice_ok``. One tensor's Frobenius residual
    cannot see a slice beside a much larger one: a word row of A at 1e10 let B rewrite every other row. Where no
    axis is mixed and every axis has a large slice (:func:`slices_can_hide`), also its entries
    (:func:`worst_entries`); a vector's entries wherever it has an outlier. ``acted(name)``: g . A's table for a
    tensor of ``measured`` (read only where a slice or its entries must be measured again). An entry a translation
    moves has its scale widened by the rounding the translation carries in (:func:`translation_allowance`; where
    that is not followed through the element's steps, nothing is widened). A gain stored as ``w = gain - offset``
    (Gemma's ``1 + w``) is rounded at its stored ``|w|`` (``stored_offset``; from A's side, B's carried back through
    the element): its residual where it fails at the gain's scale, its entries and each entry are read at that
    scale too.

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch
    >>> p = {"layers": [{"W_O": [torch.eye(2, dtype=torch.float64)]}]}
    >>> r = tensor_residuals(p, p, lambda n, l: "float32", [], GroupSpec.from_arch("bert-base"))
    >>> r[0]["tensor"], r[0]["residual"], r[0]["ok"]
    ('W_O', 0.0, True)
    """
    from symtrans.catalogue.model import _axes

    chain = _Chain.of(spec, steps)
    kappa = chain.inherit(_element_kappa(steps, len(moved["layers"]), spec=spec, source=source))
    # each step's own (a factor whose steps compose counts their product in ``kappa``): float64's sums of them
    arithmetic = chain.inherit(_element_kappa(steps, len(moved["layers"]), spec=spec, source=source,
                                              composed=False)) if _repeated_factors(spec, steps, linear=True) else kappa
    per_length = _element_kappa(steps, len(moved["layers"]), measure=element_length)
    length = chain.inherit(per_length)
    # a head moved through its hyperplane: the float64 sums of its product, amplified by the term it adds. What
    # they can reach is undecided, not accepted: as a tolerance, a claim of c then -c grew it to 100 d u in every
    # direction of the head, and a float64 head moved along the hidden state passed (logits 1.5e-9 off)
    head_lengths = _head_hyperplane_lengths(spec, source, steps) if source is not None else {}
    if head_lengths:  # (inherit copied what length holds)
        for i, n in head_lengths.items():
            per_length[i][None] = max(per_length[i].get(None, 1.0), n)
    head_length = chain.inherit(per_length) if head_lengths else length
    carried = _carried(spec, steps)
    target_tensors = {(n, l): v for n, l, v in _iter_tensors(target, blocks=True)}
    sources = {(n, l): v for n, l, v in _iter_tensors(source, blocks=True)} if source is not None else {}
    linear: dict[tuple[str, int | None], Any] = {}

    def linear_of(name: str, l: int | None) -> Any:
        """A's tensor moved by the element's linear steps alone (all of them, once): the scale of what a translation
        cancels (a shrinking or inflating gauge or scaling is no cancellation: entrywise storage keeps it)."""
        if not linear:
            linear.update({(nm, li): x for nm, li, x in _iter_tensors(
                apply_steps(spec, source, [s for s in steps if linear_factor(spec, s["factor"])]), blocks=True)})
        return linear[(name, l)]

    hyperplanes: list[dict[tuple[str, int | None], tuple[float, str, int | None]]] = []
    allowances: list[dict[tuple[str, int | None], Any]] = []

    def allowance_of(name: str, l: int | None) -> Any:
        """:func:`translation_allowance` at ``(name, l)``, walked once (only where a tensor's entries fail)."""
        if not allowances:
            allowances.append(translation_allowance(spec, source, target, steps, precision, b_first=b_first))
        return allowances[0].get((name, l))

    def hyperplane_of(name: str, l: int | None) -> tuple[float, str, int | None]:
        """:func:`hyperplane_carried` at ``(name, l)``, walked once (only where a tensor fails)."""
        if not hyperplanes:
            hyperplanes.append(hyperplane_carried(spec, source, steps))
        return hyperplanes[0].get((name, l), (0.0, "", None))

    def entries_of(v: Any, t: Any, lin: Any, tol: float, relative_to: str, stored: Any = None
                   ) -> dict[str, Any] | None:
        """:func:`worst_entries` of a tensor (per-head blocks stacked): at B's and g . A's scales, and at A's moved
        by the linear steps (``lin()``; None where A is not given) wherever the tensor's own residual was read at
        that scale (an outlier there, which g cancels, inflated it); else that scale only where the first reading
        fails. ``stored()``: a gain's stored magnitude (:func:`stored_offset`; None for any other tensor), its
        entries' scale too."""
        v, t = _stacked(v), _stacked(t)
        w = stored() if stored is not None else None
        at_w = (_stacked(w),) if w is not None else ()
        extra = (v, _stacked(lin())) if lin is not None and relative_to == "A" else (v,)
        worst = worst_entries(v, t, extra + at_w)
        if worst is not None and worst["residual"] > tol and lin is not None and relative_to != "A":
            worst = worst_entries(v, t, (v, _stacked(lin())) + at_w)
        return worst

    def slices_of(name: str, get_v: Any, t: Any, keep: tuple[int, ...], stats: Any, lin: Any, tol: float,
                  relative_to: str, carried_in: Any = None, stored: Any = None) -> dict[str, Any]:
        """The worst slice of g . A (``get_v()``, read only where needed: a lazily acted table is written out
        then) against ``t`` along ``keep`` (``stats``: their :func:`slice_stats`), re-read at g . A's and
        (``lin()``) A's moved by the linear steps where it fails at B's; and, where no axis is left out and each
        has a large slice (:func:`slices_can_hide`), its entries if they are worse (``stored``: as
        :func:`entries_of`)."""
        def worst_of(extra: Any) -> tuple[dict[str, Any], Any]:
            """:func:`worst_slice` with ``extra``, and the scales it read (:func:`slices_can_hide` reads them)."""
            scales = _slice_scales(stats, extra)
            return worst_slice(name, stats, extra, scales=scales), scales

        (worst, scales), extra = worst_of(None), None
        if worst["residual"] > tol:  # relative to g . A's slices too, and (as the tensor's) to A moved by the
            # linear steps: the scale of what a translation cancels
            moved = [_stacked_dims(name, get_v(), keep)] + ([_stacked_dims(name, lin(), keep)] if lin is not None else [])
            norms = [_slice_norms(*got) for got in moved]
            extra = {p: _torch().stack([ns[i] for ns in norms]).amax(0) for i, p in enumerate(keep)}
            worst, scales = worst_of(extra)
        widen = carried_in() if worst["residual"] > tol and carried_in is not None else None
        if widen is not None:  # and to the rounding the translations carry in (:func:`translation_allowance`)
            carried = _slice_norms(*_stacked_dims(name, widen, keep))
            extra = {p: _torch().maximum(extra[p], carried[i]) for i, p in enumerate(keep)}
            worst, scales = worst_of(extra)
        if worst["residual"] <= tol and len(keep) == len(_axes(name)) and \
                slices_can_hide(stats, extra, scales=scales):
            # no axis mixed, and a large slice along each: its entries too. An entry whose every slice holds
            # a large (inert) entry is hidden by them all; B moved such an entry of W_in, or of b_V, unseen
            ent = entries_of(get_v(), t, lin, tol, relative_to, stored)
            worst = ent if ent is not None and ent["residual"] > worst["residual"] else worst
        return worst

    def acted_of(name: str, l: int | None, v: Any) -> Any:
        """g . A's tensor, as a thunk: ``v``, or for a table measured lazily (``measured``), ``acted(name)`` (its
        slices' norms came from the lazy pass; the table is written out only where a slice is read again)."""
        if measured and (name, l) in measured and acted is not None:
            return lambda: acted(name)
        return lambda: v

    couplings: dict[tuple[tuple[str, Any], int], Any] = {}
    mixed = mixing(spec, steps, couplings=couplings) if slices else {}
    translated = chain.translated(spec)
    raw: list[dict[tuple[str, Any], dict[int, Any]]] = []
    from symtrans.numeric.weights import GAIN_OFFSET_TENSORS

    offset = getattr(spec.arch, "gain_offset", 0) or 0

    carried_w: list[dict[tuple[str, int | None], Any]] = []

    def stored_offset(name: str, l: int | None, v: Any, t: Any) -> Any:
        """A gain stored as ``w = gain - offset`` (Gemma's ``1 + w``) is rounded at ``|w|``, not at the gain: each
        entry's stored magnitude (the larger of g . A's and B's), as a scale; None for any other tensor. A gain of
        1e-6 of the rest, stored as ``w`` near -1, is 2^-24 of ``|w|`` off itself: 4% of the gain. From A's side
        (``b_first``: ``source`` is B, ``steps`` g^-1) the stored ``w`` is B's, carried to A's frame by the
        element: ``|g^-1| |w_B|`` (:func:`_abs_element`), not the offset read off g^-1 . B or A. A gain that g
        scaled by 1e-3 to 8e-4 is stored as ``w`` near -1, ``u`` off; pulled back by 1e3 that is ``1e3 u`` on A's
        gain of 0.8, and a Gemma 3 that was g . A rounded once was "not related" at ``ln1_w``."""
        if not offset or name not in GAIN_OFFSET_TENSORS:
            return None
        here = _map_blocks(lambda x, y: _torch().maximum((x - offset).abs(), (y - offset).abs()), v, t)
        if not b_first or source is None:  # B's side: B's own stored w is compared in its own frame
            return here
        if not carried_w:  # B's stored |w| (every other tensor by magnitude) moved by |g^-1|'s linear steps, once
            lin_steps = [{"factor": st["factor"], "element": _abs_element(st["element"])} for st in steps
                         if linear_factor(spec, st["factor"])]
            kept = _keeping(spec, source, set(GAIN_OFFSET_TENSORS), lin_steps)
            w = {k: stored_w(k, x) for k, x in kept.items() if k != "layers"}
            w["layers"] = [{k: stored_w(k, x) for k, x in lp.items()} for lp in kept["layers"]]
            w = _abs_model(w)
            carried_w.append({(nm, li): x for nm, li, x in _iter_tensors(apply_steps(spec, w, lin_steps), blocks=True)
                              if nm in GAIN_OFFSET_TENSORS})
        back = carried_w[0].get((name, l))
        return here if back is None else _map_blocks(_torch().maximum, here, back)

    def stored_w(name: str, x: Any) -> Any:
        """A gain tensor's stored ``w`` (the applied gain less the offset); any other tensor as it is."""
        return _map_blocks(lambda y: y - offset, x) if x is not None and name in GAIN_OFFSET_TENSORS else x

    def dense_rounding(name: str, l: int | None, v: Any, dims: tuple[int, ...], at: dict[int, Any], n: int,
                       dt: Any) -> Any:
        """Where a step mixes an axis that the element's steps together do not (:func:`_composed_steps`: a rotation
        and its inverse), float64's rounding of the dense products, ``gamma_n`` per step of each fibre along it, in
        units of B's ``u`` (as an entry's scale is); None where there is no such axis."""
        if not raw:  # the couplings are read only where no A is given (below)
            alone: dict[tuple[tuple[str, Any], int], Any] = {}
            raw.append((mixing(spec, steps, composed=False, couplings=alone if source is None else None), alone))
        nb = len(v) if isinstance(v, (list, tuple)) else None
        extra = {p: b for p, b in _mixed_at(raw[0][0], name, l, nb).items() if p not in at}
        if not extra:
            return None
        u64 = unit_roundoff("float64")
        k = sum(name in a for a in chain.acts)
        per = k * max(n, 2) * u64 / unit_roundoff(dt)
        mag = magnitude_of(name, l) if source is not None else None
        if mag is not None:  # k gamma_n |g_k| ... |g_1| |A|: each product's rounding, carried by the later ones
            return _map_blocks(lambda m: m * per, mag)
        x = _stacked(v)
        # (no A given) each fibre only over the indices a step's maps couple, and only in the blocks a step mixes
        groups = {dims[p]: g for p in extra if (g := coupled_groups(raw[0][1], name, l, p, nb)) is not None}
        size = _fibre_size(x, tuple(dims[p] for p in extra), groups, entries=True)
        if nb is not None and all(b is not None for b in extra.values()):  # the blocks no step mixes: none of it
            mask = _torch().zeros(nb, dtype=x.dtype)
            mask[sorted(set().union(*extra.values()))] = 1.0
            size = size * mask.reshape(-1, *([1] * (x.dim() - 1)))
        out = size * per
        return list(out) if isinstance(v, (list, tuple)) else out

    def translation_sums(name: str, l: int | None, v: Any, dt: Any) -> Any:
        """float64's rounding of the translations added to a tensor, in units of B's ``u`` (as an entry's scale
        is): two operations (a product and a sum) per translation factor that acts on it, on the larger magnitude
        of the source moved by the linear steps alone (what each such sum is added to) and of the result ``v``.
        From A's side the source is B, whose tensor holds what a translation added: a float64 BERT's ``W_in`` entry
        pulled back through G's input hyperplane (B's entries up to 20 times A's) was off by 3 to 4 ``u |B|``, past
        its 8 u, and verify refused relate's own file. A chain that adds and removes a translation is no larger
        here: the source is moved by the linear steps alone. Where the source is B (``b_first``: verify's
        pull-back), it also holds B's own storage rounding, ``u |B|`` in B's dtype (``dt``), which the translation
        pulled back cancels onto A's entry: one more ``u`` of the source. A float32 GPT-NeoX B moved through the FFN
        input hyperplane and a residual rotation (``b_in`` entries 150 times A's) came back 3 times past the entry's
        tolerance, and verify refused the true element; without the rotation the translation's fit bound
        (:func:`translation_allowance`, not followed through the rotation's conjugated gain) happened to cover it."""
        # per factor, not per step (as the tolerance's m): a claim cannot buy slack by splitting a translation
        k = chain.translating(spec, name)
        per = 2 * k * unit_roundoff("float64") / unit_roundoff(dt) + (1 if b_first else 0)
        return _map_blocks(lambda x, y: _torch().maximum(x.abs(), y.abs()) * per, linear_of(name, l), v) if k \
            else None

    magnitudes: list[dict[tuple[str, int | None], Any]] = []

    def magnitude_of(name: str, l: int | None) -> Any:
        """``|A|`` moved by the element's linear steps on magnitudes (``|g| |x|``, :func:`_abs_element`), once:
        where float64's rounding of each dense product can reach, and how far. A gauge that couples a shrunk channel
        to an ordinary one by 1e-11, and then its inverse, reach it by 1e-11 of the ordinary one (its fibre's scale
        let the channel, shrunk by 1e-20, be rewritten x2000, logits 131% off)."""
        if not magnitudes:
            lin_steps = [{"factor": st["factor"], "element": _abs_element(st["element"])} for st in steps
                         if linear_factor(spec, st["factor"])]
            magnitudes.append({(nm, li): x for nm, li, x in
                               _iter_tensors(apply_steps(spec, _abs_model(source), lin_steps), blocks=True)})
        return magnitudes[0].get((name, l))

    head_tensors = {t.tensor for _, t in _head_hyperplanes(spec)}
    out = []
    room: dict[int, Any] = {}  # :class:`_Pair`'s buffers, reused tensor after tensor
    for name, l, v in _iter_tensors(moved, blocks=True):
        if (name, l) not in target_tensors:
            continue
        dt = precision(name, l)
        # the condition number of the steps that act on this tensor, each with what it inherits from the steps
        # before it (:meth:`_Chain.inherit`); a permutation is no fitted factor
        k = chain.on(name, l, kappa)
        ka = chain.on(name, l, arithmetic)
        m = chain.fitted(name)
        n = int(chain.on(name, l, length))
        tol, undecided_to = accepted_tolerance(dt, k, m, n, ka)
        n_head = int(chain.on(name, l, head_length)) if head_lengths else n
        head_to = accepted_tolerance(dt, k, m, n_head, ka)[1] if n_head > n else 0.0
        through = None
        if head_to > undecided_to:
            undecided_to, through = head_to, "the float64 sums of the head's hyperplane step"
        at = _mixed_at(mixed, name, l, len(v) if isinstance(v, (list, tuple)) else None) if slices else {}
        keep = tuple(p for p in range(len(_axes(name))) if p not in at) if slices else ()
        stats = (measured_slices or {}).get((name, l))
        sides_of = _Pair(v, target_tensors[(name, l)], room)  # each side stacked, and their difference formed, once
        if stats is not None:
            keep = tuple(stats)
        elif keep:  # the slices' norms, and the tensor's residual from them
            stats = _slice_stats_pair(name, sides_of, keep)
        res = measured[(name, l)] if measured and (name, l) in measured else \
            _stats_residual(stats) if stats else _rel_any(v, target_tensors[(name, l)])
        relative_to = "B"
        if res > tol and (name, l) in sources:  # relative to max(|A|, |B|): |g.A - B| = res |B| (res where B = 0)
            na, nb = _norm_any(linear_of(name, l)), _norm_any(target_tensors[(name, l)])
            if na > nb:
                res, relative_to = res * (nb if nb > 0 else 1.0) / na, "A"
            sides = [x if l is None else x["layers"][l] for x in (target, source)]
            size, pair = carried_size(carried.get(name, []), sides)
            ref = max(na, nb)
            if pair is not None and ref > 0:  # what the solve carried in: Z's rounding through Y, with the
                # tolerance's own headroom on stored rounding (kappa 0: no element amplifies it, Z is only read)
                through = f"{pair[0]} through {pair[1]}" if pair[1] else f"{pair[0]}, read into it directly"
                undecided_to = max(undecided_to, relation_tolerance(precision(pair[0], l), 0.0)[0] * size / ref)
            hsize, hbias, hlayer = hyperplane_of(name, l)
            if hsize > 0 and ref > 0:  # a norm's bias read by an input hyperplane's scalar (:func:`hyperplane_carried`)
                h_to = relation_tolerance(precision(hbias, hlayer), 0.0)[0] * hsize / ref
                if h_to > undecided_to:
                    undecided_to, through = h_to, f"{hbias} through the " + \
                        ("output head's hyperplane" if hlayer is None and name in head_tensors else "input hyperplane")
        stored = stored_offset(name, l, v, target_tensors[(name, l)]) if res > tol else None
        if stored is not None:  # a gain rounded at its stored |w| (:func:`stored_offset`): relative to that too
            ref = _norm_any(target_tensors[(name, l)]) if relative_to == "B" else \
                max(_norm_any(linear_of(name, l)), _norm_any(target_tensors[(name, l)]))
            ref, ns = (ref if ref > 0 else 1.0), _norm_any(stored)
            res = res * ref / ns if ns > ref else res
        rec = {"tensor": name, "layer": l, "residual": res, "tolerance": tol, "dtype": str(dt),
               "kappa": k, "factors": m, "length": n, "ok": res <= tol, "undecided_to": undecided_to,
               "relative_to": relative_to, **({"carried": through} if through is not None else {})}
        lin = (lambda name=name, l=l: linear_of(name, l)) if (name, l) in sources else None
        t = target_tensors[(name, l)]
        # the axes some blocks' components mix and others' do not, and the blocks none of them mixes
        partial = {p: b for p, b in at.items() if b is not None}
        rest = [i for i in range(len(v)) if not any(i in b for b in partial.values())] \
            if partial and isinstance(v, (list, tuple)) else []
        stored_in = (lambda name=name, l=l, v=v, t=t: stored_offset(name, l, v, t)) \
            if offset and name in GAIN_OFFSET_TENSORS else None
        if stats and res <= tol:
            def carried_in(name: str = name, l: int | None = l, v: Any = v, at: dict[int, Any] = at, n: int = n,
                           dt: Any = dt) -> Any:
                """What a slice's scale counts beside its own: the rounding translations carry in, float64's sums
                of them on the source (:func:`translation_sums`), and float64's along an axis a step mixes that the
                steps together do not."""
                parts = [dense_rounding(name, l, v, _dims_of(name, v), at, n, dt)]
                if lin is not None and name in translated:
                    parts += [allowance_of(name, l), translation_sums(name, l, v, dt)]
                return _summed(parts)

            worst = slices_of(name, acted_of(name, l, v), t, keep, stats, lin, tol, relative_to, carried_in,
                              stored_in)
            if worst["residual"] <= tol and rest:
                # an axis some heads' components mix and others' do not: the other heads as a tensor of their
                # own, measured along it too (a dense gauge on one head hid another head's W_Q entry)
                sub_keep = tuple(sorted(set(keep) | set(partial)))
                sub = [v[i] for i in rest], [t[i] for i in rest]
                sub_lin = (lambda: [x[i] for x in [linear_of(name, l)] for i in rest]) if lin is not None else None
                sub_in = (lambda: None if carried_in() is None else [carried_in()[i] for i in rest]) \
                    if carried_in is not None else None
                got = slices_of(name, lambda sub=sub: sub[0], sub[1], sub_keep, slice_stats(name, *sub, sub_keep),
                                sub_lin, tol, relative_to, sub_in)
                if got["residual"] > worst["residual"]:
                    worst = _renumber_heads(got, rest)
            rec["slice"], rec["slice_ok"] = worst, worst["residual"] <= tol
        elif slices and len(_axes(name)) == 1 and not at and not isinstance(v, (list, tuple)) and res <= tol:
            # a vector with an outlier entry (its one axis not mixed): the other entries at B's and g . A's scales
            # (B's alone can hide them: a B of zeros but for the outlier has no typical entry)
            worst = entries_of(v, t, lin, tol, relative_to, stored_in)
            if worst is not None:
                rec["slice"], rec["slice_ok"] = worst, worst["residual"] <= tol
        if slices and res <= tol and not (measured and (name, l) in measured):
            # each entry at its own scale (:func:`worst_each`); each fibre along the axes a step mixes, and the
            # blocks no step mixes entry by entry as well. Where no step that acts on it is fitted (a permutation,
            # the identity), each entry of B is A's in B's storage and no fit's error is allowed for: B's rounding
            # with the tolerance's headroom (kappa 0), the tolerance of what is only read
            each_tol = tol if m > 0 else min(tol, relation_tolerance(dt, 0.0)[0])
            dims = _dims_of(name, v)
            over = tuple(dims[p] for p in at)
            # along a mixed axis, the fibre is the indices the maps couple (None: the whole axis)
            nb = len(v) if isinstance(v, (list, tuple)) else None
            groups = {dims[p]: g for p in at if (g := coupled_groups(couplings, name, l, p, nb)) is not None}
            # an axis every block mixes leaves no block moved entry by entry
            each_rest = rest if len(partial) == len(at) else []

            def measure(widen: Any, v: Any = v, t: Any = t, over: tuple[int, ...] = over,
                        rest: list[int] = each_rest) -> dict[str, Any]:
                """:func:`worst_each` of the tensor (fibres along its mixed axes), and of its unmixed blocks."""
                each = worst_each(v, t, smallest_normal(dt), over=over, widen=widen, groups=groups)
                if rest:  # the blocks no step mixes: entry by entry
                    sub = worst_each([v[i] for i in rest], [t[i] for i in rest], smallest_normal(dt),
                                     widen=None if widen is None else [widen[i] for i in rest])
                    if sub["residual"] > each["residual"]:
                        each = _renumber_heads(sub, rest)
                return each

            # the rounding a translation carries in from the tensor it was read from widens an entry's scale, and
            # so does float64's along an axis a step mixes that the steps together do not (read only where the
            # entries fail without them); where a translation's is not followed, nothing is widened. Where they
            # surely pass (:func:`_each_within`), only that is recorded: their worst is read only where they fail
            axis = next(((dims[p], stats[p][0]) for p in (stats or {}) if dims[p] not in over), None)
            within = not each_rest and not groups and _each_within(sides_of, over, smallest_normal(dt), each_tol,
                                                                   axis)
            each = measure(None) if not within else None
            if within:
                rec["entrywise"] = each_tol
            elif each["residual"] > each_tol:
                widen = _summed([dense_rounding(name, l, v, dims, at, n, dt), stored_offset(name, l, v, t)])
                if name in translated:
                    # where the translations' bound is not followed, nothing is widened by it; float64's rounding
                    # of dense products (and a gain's stored offset) still is
                    brought = allowance_of(name, l) if lin is not None else None
                    widen = widen if brought is None else _summed([brought, widen])
                    if lin is None:  # no A given: what the translations carry in is unknown, the entries not measured
                        each = None
                    else:  # float64's own sums of each translation onto what the linear steps moved (its source)
                        widen = _summed([widen, translation_sums(name, l, v, dt)])
                if widen is not None and each is not None:
                    each = measure(widen)
            if each is not None:
                rec["entrywise"] = each_tol
                if each["residual"] > each_tol and rec.get("slice_ok", True):  # a slice's or entries' failure first
                    rec["slice"], rec["slice_ok"] = {**each, "tolerance": each_tol}, False
        out.append(rec)
    return out


def _renumber_heads(worst: dict[str, Any], heads: list[int]) -> dict[str, Any]:
    """A worst slice or entry of a tensor of some heads only (``heads``: their indices), with the head numbered as
    in the whole tensor."""
    if worst["axis"] == "head":
        return {**worst, "index": heads[worst["index"]]}
    if worst["axis"] == "entries" and isinstance(worst["index"], tuple):
        return {**worst, "index": (heads[worst["index"][0]], *worst["index"][1:])}
    return worst


def pulled_back_residuals(spec: GroupSpec, a: dict[str, Any], b: dict[str, Any], precision: Any,
                          steps: list[dict[str, Any]], only: set[tuple[str, int | None]] | None = None
                          ) -> list[dict[str, Any]]:
    """The check from A's side: ``g^-1 . B`` against A, tensor by tensor (:func:`tensor_residuals` with the roles
    swapped, slices and entries included; g^-1 from :func:`~symtrans.group.action.inverse_steps`), each record
    marked ``"side": "A"``.

    ``|g.A - B|_F`` relative to ``|B|_F`` cannot see a part of a tensor that g shrinks beside the rest: a per-head
    gauge of 1e-8 on some heads (their queries then 1e-8 of the others, their keys 1e8) leaves those heads'
    queries below the rounding of the other heads', so a B with them set to 0 (uniform attention in every such
    head) passed. Pulled back to A's scale, that part is as large as in A. Both sides are measured against B's
    storage precision (``precision``): what ``g^-1`` carries back is B's rounding. ``only``: the ``(tensor,
    layer)`` pairs pulled back and measured (the tolerances still read every tensor of B they read, so each record
    is the one the whole check gives); None: all. Slices too: with A's ``W_Q``
    column c at 1e9 in head 0 (its key column 0, so inert) and a gauge of 1e-8 on head 1's column c, B set that
    column to 0. B's side cannot see a part at 1e-8 of the rest, and A's whole ``W_Q`` is the 1e9 column's; head
    1's slice of A is not (its attention pattern 1.3e-3 off, and verify accepted the file).

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.numeric import model_blocks
    >>> from symtrans.numeric import load_model
    >>> a = load_model("default")
    >>> spec = GroupSpec.from_arch(a.arch)
    >>> eye = torch.eye(32, dtype=torch.float64)
    >>> steps = [{"factor": "qk-gauge", "element": [{"g": [eye] + [1e-8 * eye] * 11} for _ in range(6)]}]
    >>> A = model_blocks(a)
    >>> B = apply_steps(spec, A, steps)
    >>> B["layers"][0]["W_Q"] = [B["layers"][0]["W_Q"][0]] + [0 * q for q in B["layers"][0]["W_Q"][1:]]
    >>> moved = apply_steps(spec, A, steps)
    >>> [r["ok"] for r in tensor_residuals(moved, B, _precision(a), steps, spec) if r["tensor"] == "W_Q"][0]
    True
    >>> back = pulled_back_residuals(spec, A, B, _precision(a), steps)
    >>> [(r["ok"], round(r["residual"], 2)) for r in back if r["tensor"] == "W_Q" and r["layer"] == 0]
    [(False, 0.96)]
    """
    from symtrans.group.action import inverse_steps

    inv = inverse_steps(spec, steps)
    moved = b if only is None else _keeping(spec, b, {n for n, _ in only}, steps)
    out = tensor_residuals(apply_steps(spec, moved, inv), a, precision, inv, spec, source=b, slices=True,
                           b_first=True)
    if only is not None:
        out = [r for r in out if (r["tensor"], r["layer"]) in only]
    for r in out:  # the roles swapped back: measured relative to A's tensor, or re-read relative to B's
        r["side"], r["relative_to"] = "A", {"A": "B", "B": "A"}[r["relative_to"]]
    return out


def _keeping(spec: GroupSpec, params: dict[str, Any], names: set[str], steps: list[dict[str, Any]]
             ) -> dict[str, Any]:
    """``params`` with only the tensors ``names`` and those ``steps`` act through (a gain, a bias: the actions read
    them, :func:`_read_through`), the rest of the model's None and the layers' left out: what acting ``steps`` on
    ``names`` alone needs.

    Examples
    --------
    >>> import torch
    >>> p = {"word": torch.ones(2, 2), "layers": [{"W_Q": [torch.ones(2, 1)], "ln1_w": torch.ones(2)}]}
    >>> k = _keeping(GroupSpec.from_arch("bert-base"), p, {"W_Q"}, [])
    >>> k["word"], sorted(k["layers"][0])
    (None, ['W_Q'])
    """
    keep = set(names).union(*(_read_through(spec, st["factor"]) for st in steps))
    return {k: [{t: x for t, x in lp.items() if t in keep} for lp in v] if k == "layers" else
            (v if k in keep else None) for k, v in params.items()}


def hyperplane_carried(spec: GroupSpec, source: dict[str, Any], steps: list[dict[str, Any]]
                       ) -> dict[tuple[str, int | None], tuple[float, str, int | None]]:
    """Per ``(tensor, layer)`` a ``hyperplane_bias`` tag moves, what its norm's bias carries into it: ``sum_i
    |beta_i / gamma_i| |v|``, with the norm's gain and bias as the step met them (one walk of ``steps`` over A), and
    the bias's name and layer (the layer's own norm, the closing norm of the layer before, or the embedding norm);
    likewise an untied head a ``hyperplane_head`` tag moves (:func:`_head_scalar_carried`; layer None).

    The tag subtracts ``(beta . 1/gamma) v``. Where ``beta`` is nearly orthogonal to ``1/gamma`` the scalar is a
    sum of terms far larger than itself, so the rounding of ``beta`` (B's, ``u |beta_i|`` per entry, which a bias
    transfer before the hyperplane brings in) moves it by up to ``u sum_i |beta_i / gamma_i|``, and the tensor by
    that times ``|v|``. A random GPT-2's genuine pair was refused at ``b_in``, 4% past its tolerance: the scalar was
    0.0068 |1/gamma| against a ``beta`` of norm 2.6, and the error lay along ``v`` (removing that direction left
    B's own rounding).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> a = tiny_decoder("gpt2")
    >>> spec = GroupSpec.from_arch(a.arch)
    >>> v = torch.full((1, a.W_in.shape[-1]), 3.0, dtype=torch.float64)
    >>> A = model_blocks(a)
    >>> out = hyperplane_carried(spec, A, [{"factor": "ffn-input-hyperplane", "element": [{"v_W_in": v}] * a.n_layers}])
    >>> size, bias, layer = out[("b_in", 0)]
    >>> lp = A["layers"][0]
    >>> bias, layer, abs(size - float((lp["ln2_b"] / lp["ln2_w"]).abs().sum() * v.norm())) < 1e-9 * size
    ('ln2_b', 0, True)
    """
    out: dict[tuple[str, int | None], tuple[float, str, int | None]] = {}
    last = max((i for i, st in enumerate(steps) if any(t.how in ("hyperplane_bias", "hyperplane_head") for t in
                                                         spec.factor(st["factor"]).tags)), default=-1)
    cur = source
    L = len(cur["layers"])
    for st in steps[:last + 1]:  # the steps up to the last hyperplane: what each met
        f = spec.factor(st["factor"])
        for t in (t for t in f.tags if t.how == "hyperplane_head" and not isinstance(st["element"], list)):
            size = _head_scalar_carried(cur, t, st["element"].get(t.component))
            if size > out.get((t.tensor, None), (0.0,))[0]:
                out[(t.tensor, None)] = (size, t.via.split(",")[1], None)
        els = st["element"] if isinstance(st["element"], list) else [st["element"]] * L
        for t in (t for t in f.tags if t.how == "hyperplane_bias" and t.scope in ("layer", "next")):
            gain, bias = t.via.split(",")
            first = L - len(els) if t.scope == "next" else 0  # a boundary's element: the layer after it
            for k, el in enumerate(els):
                l = first + k
                # the layer's own norm, or the closing norm of the layer before (the embedding norm before layer 0)
                (gname, at), (bname, _) = ((gain, l), (bias, l)) if t.scope == "layer" else \
                    (boundary_norm(gain, l), boundary_norm(bias, l))
                g, b, v = tensor_at(cur, gname, at), tensor_at(cur, bname, at), el.get(t.component)
                if g is None or b is None or v is None or not bool((g != 0).all()):
                    continue
                size = float((b / g).abs().sum()) * _norm_any(v)  # |beta_i| u in each term of the scalar
                if size > out.get((t.tensor, l), (0.0,))[0]:
                    out[(t.tensor, l)] = (size, bname, at)
        cur = apply_steps(spec, cur, [st])
    return out


def _head_scalar_carried(params: dict[str, Any], tag: Any, c: Any) -> float:
    """What the rounding of a norm's bias carries into an untied head moved through its hyperplane by a shift ``c``
    of that bias (a ``hyperplane_head`` tag: ``W - (1/gamma)^T (c W) / s'``, ``s' = <beta + c, 1/gamma>``), in
    units of the bias's unit roundoff: ``c`` is read from the bias, so each of its entries is off by up to
    ``u |beta_i|`` (the larger of beta before and after the shift), which moves the head by at most ``|1/gamma|
    (|beta| |W| / |s'| + |c W| sum_i |beta_i / gamma_i| / s'^2)`` (Frobenius norms; first order). 0 where nothing
    is read or ``s'`` is 0 (the step is undefined: :func:`singular_head_biases` names it).

    Where ``<beta, 1/gamma>`` nearly cancels, that is far more than the head's own rounding: a random untied GPT-2
    (float32, scalar 0.0094 against a sum of magnitudes of 2.5) moved by a final-norm scaling alone was "not
    related" at ``lm_head`` (1.5e-6 against 6.7e-7), the bias shift relate read being B's rounding of the bias.

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch  # G's own tag: an untied GPT-2's head absorbing the final norm's bias
    >>> (_, tag), = _head_hyperplanes(GroupSpec.from_arch(dataclasses.replace(get_arch("gpt2"), tied_lm_head=False)))
    >>> p = {"final_ln_w": torch.ones(1, 2, dtype=torch.float64), "final_ln_b": torch.tensor([[1.0, 0.0]],
    ...      dtype=torch.float64), "lm_head": torch.eye(2, dtype=torch.float64)}
    >>> c = torch.tensor([[0.0, 1.0]], dtype=torch.float64)  # s' = 2; |beta| = (1, 1); |1/gamma| = sqrt 2
    >>> round(_head_scalar_carried(p, tag, c), 12) == round(2 ** 0.5 * (2 ** 0.5 * 2 ** 0.5 / 2 + 1 * 2 / 4), 12)
    True
    """
    torch = _torch()
    s_after = _head_scalar(params, tag, {tag.component: c}) if c is not None else None
    W = params.get(tag.tensor)
    if not s_after or W is None:  # nothing read; or s' = 0, where the step is undefined (relate names it)
        return 0.0
    gain, bias = tag.via.split(",")
    a, c, b = (1 / params[gain]).reshape(-1), c.reshape(-1).to(W.dtype), params[bias].reshape(-1)
    beta = torch.maximum(b.abs(), (b + c).abs())
    cw = float((c.reshape(1, -1) @ W).norm())
    return float(a.norm()) * (float(beta.norm()) * float(W.norm()) / abs(s_after)
                              + cw * float((beta * a.abs()).sum()) / s_after ** 2)


#: Per kind of tag a translation's component is read through (relate's solve: :meth:`_Solver.layer_translation`,
#: :meth:`_Solver.model_translation`), a bound on what the rounding of that tensor puts into the component, from the
#: rounding's entrywise size ``R`` (a block), the gain of a hyperplane's norm and the rows' weights
#: (:func:`rounding_weights`, None for a plain mean). A difference carries each entry's own; a mean over an axis the
#: mean of ``R``; a read along ``1/gamma`` its least-squares weights, ``|u|^T R / |u|^2``; the rows' weighted mean
#: (weights that sum to 1), with the centring's mean removed, at most twice the weighted mean of ``R``; the leading
#: rows of a table their own.
_FIT_BOUND: dict[str, Callable[..., Any]] = {
    "translate": lambda R, gain, w, c: R,
    "translate_leading_rows": lambda R, gain, w, c: R[: c.shape[0]],
    "translate_ones": lambda R, gain, w, c: R.mean(1, keepdim=True),
    "translate_rows": lambda R, gain, w, c: 2 * (R.mean(0, keepdim=True) if w is None else _weighted_rows(R, w)),
    "hyperplane_weight": lambda R, gain, w, c: (1 / gain).abs().reshape(1, -1) @ R / (1 / gain).square().sum(),
}


def _summed(parts: list[Any]) -> Any:
    """The sum of the widenings in ``parts`` that are not None (block form), or None if none is.

    Examples
    --------
    >>> import torch
    >>> _summed([None, torch.ones(2), 2 * torch.ones(2)]).tolist(), _summed([None])
    ([3.0, 3.0], None)
    """
    given = [x for x in parts if x is not None]
    return functools.reduce(lambda a, b: _map_blocks(_torch().add, a, b), given) if given else None


def _map_blocks(fn: Callable[..., Any], *xs: Any) -> Any:
    """``fn`` on each block of tensors in block form (a tensor, or a list of per-head blocks)."""
    if isinstance(xs[0], (list, tuple)):
        return [fn(*ys) for ys in zip(*xs)]
    return fn(*xs)


def _abs_model(params: dict[str, Any]) -> dict[str, Any]:
    """A model in block form with every tensor by magnitude (entrywise ``|x|``).

    Examples
    --------
    >>> import torch
    >>> m = _abs_model({"word": torch.tensor([[-1.0, 2.0]]), "layers": [{"W_Q": [torch.tensor([[-3.0]])]}]})
    >>> m["word"].tolist(), m["layers"][0]["W_Q"][0].tolist()
    ([[1.0, 2.0]], [[3.0]])
    """
    def mag(v: Any) -> Any:
        return _map_blocks(lambda x: x.abs() if hasattr(x, "abs") else x, v) if v is not None else None

    out = {k: mag(v) for k, v in params.items() if k != "layers"}
    out["layers"] = [{k: mag(v) for k, v in lp.items()} for lp in params["layers"]]
    return out


def _abs_element(x: Any) -> Any:
    """An element's components by magnitude, each dense square one with its inverse's magnitude beside it
    (``name_inv``, which an action uses as the inverse): acting with it bounds, entry by entry, what the element does
    to an error of given magnitudes (``|g x| <= |g| |x|``; ``|g^-1|`` is not ``|g|^-1``).

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.numeric import MonomialMatrix
    >>> el = _abs_element({"g": torch.tensor([[1.0, -1.0], [1.0, 1.0]])})
    >>> el["g"].tolist(), el["g_inv"].tolist()
    ([[1.0, 1.0], [1.0, 1.0]], [[0.5, 0.5], [0.5, 0.5]])
    >>> mixed = _abs_element({"g": [torch.eye(2), MonomialMatrix([1, 0], torch.tensor([-2.0, 4.0]))]})
    >>> mixed["g_inv"][1].dense().tolist()  # the monomial's inverse, by magnitude: not its magnitude
    [[0.0, 0.5], [0.25, 0.0]]
    """
    from symtrans.group.numeric import MonomialMatrix

    if isinstance(x, MonomialMatrix):
        return MonomialMatrix(x.perm.tolist(), x.vals.abs())
    if isinstance(x, (list, tuple)):
        return [_abs_element(v) for v in x]
    if isinstance(x, dict):
        out = {k: _abs_element(v) for k, v in x.items()}
        for k, v in x.items():
            square = [b for b in (v if isinstance(v, (list, tuple)) else [v]) if hasattr(b, "shape")
                      and not isinstance(b, MonomialMatrix) and b.dim() == 2 and b.shape[0] == b.shape[1] > 1]
            if square and not k.endswith("_inv") and k + "_inv" not in x:
                inv = [_abs_element(b.inverse()) if isinstance(b, MonomialMatrix) or hasattr(b, "inverse") else b
                       for b in (v if isinstance(v, (list, tuple)) else [v])]
                out[k + "_inv"] = inv if isinstance(v, (list, tuple)) else inv[0]
        return out
    return x.abs() if hasattr(x, "abs") and hasattr(x, "shape") else x


def _head_hyperplane_bound(before: dict[str, Any], s: float, tag: Any, c: Any, W: Any, e: Any, held: Any) -> Any:
    """What an error ``e`` (magnitudes) of a final norm's bias shift ``c`` carries into the output head through its
    hyperplane (a ``hyperplane_head`` tag: ``W + (1/gamma)^T v`` with ``v = -(c W) / s'``, ``s' = <beta + c,
    1/gamma>``), and an error ``held`` already in the head: ``|1/gamma|^T |dv|`` with ``|dv_j| <= (min(e |W_j|,
    |e|_2 |W_j|_2) + |c| held_j) / |s| + |c W_j| <e, |1/gamma|> / s^2`` (the scalar's own error first order).
    ``W``: the head's entrywise size; ``before``: the model as the step meets it (its gain); ``s`` the largest
    ``|<beta, 1/gamma>|`` of the whole element's frames (:func:`_head_scalar_scale`), not the step's own ``s'``: a
    step whose scalar passes near 0 is no genuine fit's (one there is undecided), and a claim of steps through
    such a point would pass off the division as rounding (c then -c; or three steps that compose to the identity,
    the middle one from +1e-5 to -1e-5, which widened a shrunk ``lm_head`` row enough to hide it x11, logits 120%
    off).

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch  # G's own tag: an untied GPT-2's head absorbing the final norm's bias
    >>> (_, tag), = _head_hyperplanes(GroupSpec.from_arch(dataclasses.replace(get_arch("gpt2"), tied_lm_head=False)))
    >>> p = {"final_ln_w": torch.ones(1, 2, dtype=torch.float64), "final_ln_b": torch.tensor([[1.0, -1.0]],
    ...      dtype=torch.float64)}
    >>> c, e = torch.tensor([[0.5, 0.0]], dtype=torch.float64), torch.full((1, 2), 1e-3, dtype=torch.float64)
    >>> b = _head_hyperplane_bound(p, 0.5, tag, c, torch.eye(2, dtype=torch.float64), e, None)  # s 0 -> 0.5
    >>> [[round(x, 6) for x in row] for row in b.tolist()]  # |dv| = (2e-3 + 0.5 * 2e-3 / 0.25, 2e-3)
    [[0.006, 0.002], [0.006, 0.002]]
    """
    torch = _torch()
    gain, _ = tag.via.split(",")
    inv = 1 / before[gain].reshape(1, -1)
    if s == 0:
        return torch.full_like(W, math.inf)  # no hyperplane: nothing bounded
    # |e W_j| at most the smaller of |e| |W_j| and |e|_2 |W_j|_2 (a sum of many terms: the norms are the tighter)
    ew = torch.minimum(e @ W, e.norm() * W.norm(dim=0, keepdim=True))
    dv = (ew + (0 if held is None else c.abs() @ held)) / s + (c.abs() @ W) * float((e * inv.abs()).sum()) / s ** 2
    return inv.abs().T @ dv


def _head_hyperplane_lengths(spec: GroupSpec, source: dict[str, Any], steps: list[dict[str, Any]]) -> dict[int, float]:
    """Per step that moves an untied head through its hyperplane (``W' = W - (1/gamma)^T (c W) / s'``), the length
    of sums whose float64 rounding (``gamma_n``, :func:`relation_tolerance`) bounds what the step's arithmetic
    puts into the head relative to ``|W'|``: ``d (1 + |1/gamma| | |c| |W| | / (S |W'|))`` (Frobenius norms,
    ``|c| |W|`` on magnitudes; ``d`` the sum ``c W``'s length; ``S`` the larger of ``|s'|`` and the largest scalar
    of the element's frames, :func:`_head_scalar_scale`, so that a claim through a scalar near 0 buys no
    tolerance of its own; a growth past :data:`KAPPA_MAX` counts as none), with the norm and the head as the step
    meets them (:func:`_head_frames`). Each entry of ``c W`` is a sum of ``d`` products, and the rank-one term it
    makes is up to that factor larger than the head it is added to. Uncounted, random float64 GPT-2s with an
    untied head were "not related" at ``lm_head`` on 9 of 18 random elements (4.2e-14 against 3.1e-14).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(dataclasses.replace(w.arch, tied_lm_head=False))
    >>> A = model_blocks(w); A["lm_head"] = A["word"].T.clone()
    >>> c = torch.randn(1, w.arch.d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> n = _head_hyperplane_lengths(spec, A, [{"factor": "final-norm-bias-transfer", "element": {"t": c}}])[0]
    >>> a, W = (1 / A["final_ln_w"]).reshape(-1, 1), A["lm_head"]
    >>> moved = W - a @ (c @ W) / float((A["final_ln_b"] + c) @ a)
    >>> S = max(abs(float(A["final_ln_b"] @ a)), abs(float((A["final_ln_b"] + c) @ a)))  # before and after it
    >>> grown = 1 + float(a.norm() * (c.abs() @ W.abs()).norm() / S / moved.norm())
    >>> abs(n - w.arch.d_model * grown) < 1e-9 * n
    True
    >>> _head_hyperplane_lengths(spec, A, [{"factor": "final-norm-scaling", "element": {"D": torch.eye(32)}}])
    {}
    """
    heads = [t for _, t in _head_hyperplanes(spec)]
    if not any(st["factor"] in {t.factor for t in heads} and not _inert_step(st) for st in steps):
        return {}
    out: dict[int, float] = {}
    scale: dict[Any, float] = {}  # :func:`_head_scalar_scale`, once
    frames = _head_frames(spec, source, steps, with_head=True)
    before = next(frames)
    for i, (st, after) in enumerate(zip(steps, frames)):
        for t in (t for t in heads if t.factor == st["factor"] and not isinstance(st["element"], list)):
            c, W, s_after = st["element"].get(t.component), before.get(t.tensor), _head_scalar(before, t,
                                                                                                st["element"])
            size = float(after[t.tensor].norm()) if s_after and c is not None and W is not None else 0.0
            if size > 0:  # over the largest scalar of the element's frames, as the head's bound divides by
                # (_head_hyperplane_bound): a claim through a scalar near 0 would buy its own tolerance
                if not scale:
                    scale.update(_head_scalar_scale(spec, source, steps))
                a, c = 1 / before[t.via.split(",")[0]].reshape(-1), c.reshape(-1).to(W.dtype)
                grown = float(a.norm()) * float((c.abs() @ W.abs()).norm()) / max(scale.get(t, 0.0), abs(s_after)) \
                    / size if scale.get(t, 0.0) > 0 else math.inf
                # past KAPPA_MAX the growth buys no slack, as a condition number does not (accepted_tolerance): a
                # chain through a scalar near 0 meets a head it blew up itself (one step's growth 7e3)
                out[i] = max(out.get(i, 1.0), float(c.numel()) * (1 + (grown if grown <= KAPPA_MAX else 0.0)))
        before = after
    return out


def _head_scalar_scale(spec: GroupSpec, source: dict[str, Any], steps: list[dict[str, Any]]) -> dict[Any, float]:
    """Per ``hyperplane_head`` tag, the largest ``|<beta, 1/gamma>|`` of its norm over the frames of ``steps``: A's
    (``source``) and after each step (:func:`_head_frames`). The scale :func:`_head_hyperplane_bound` divides by.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(dataclasses.replace(w.arch, tied_lm_head=False))
    >>> A = model_blocks(w); inv = 1 / A["final_ln_w"]
    >>> s0 = float((A["final_ln_b"] * inv).sum())
    >>> up = {"factor": "final-norm-bias-transfer", "element": {"t": 5 * inv / float(inv.square().sum())}}
    >>> down = {"factor": "final-norm-bias-transfer", "element": {"t": -5 * inv / float(inv.square().sum())}}
    >>> [round(v - abs(s0), 9) for v in _head_scalar_scale(spec, A, [up, down]).values()] == [round(abs(s0 + 5) - abs(s0), 9)]
    True
    """
    best: dict[Any, float] = {}
    for frame in _head_frames(spec, source, steps):
        for _, t in _head_hyperplanes(spec):
            v = _head_scalar(frame, t)
            if v is not None:
                best[t] = max(best.get(t, 0.0), abs(v))
    return best


def _head_frames(spec: GroupSpec, source: dict[str, Any], steps: list[dict[str, Any]], *,
                 with_head: bool = False) -> Any:
    """The frames of ``steps`` on the norms an untied head absorbs through its hyperplane: their gain and bias
    (and, ``with_head``, the head) in A (``source``), then after each step; acted on by the tags on those tensors
    alone (which read nothing else). The one walk :func:`_head_scalar_scale` and :func:`_head_hyperplane_lengths`
    read.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(dataclasses.replace(w.arch, tied_lm_head=False))
    >>> A = model_blocks(w); t = torch.ones(1, w.arch.d_model, dtype=torch.float64)
    >>> frames = list(_head_frames(spec, A, [{"factor": "final-norm-bias-transfer", "element": {"t": t}}]))
    >>> len(frames), sorted(frames[0]), bool((frames[1]["final_ln_b"] == A["final_ln_b"] + t).all())
    (2, ['final_ln_b', 'final_ln_w', 'layers'], True)
    """
    names = {n for _, t in _head_hyperplanes(spec) for n in ((t.tensor,) if with_head else ()) + tuple(t.via.split(","))}
    sub: dict[str, Any] = {"layers": [{} for _ in source["layers"]], **{n: source[n] for n in names if n in source}}
    yield sub
    for st in steps:
        tags = tuple(t for t in spec.factor(st["factor"]).tags if t.tensor in names)
        if tags:
            sub = act(spec, sub, st["factor"], st["element"], tags=tags)
        yield sub


def _head_scalar(params: dict[str, Any], tag: Any, element: dict[str, Any] | None = None) -> float | None:
    """``<beta, 1/gamma>`` of the norm a ``hyperplane_head`` tag absorbs into the head (its gain and bias in
    ``params``), after the tag's factor's ``element`` where given (``<beta + c, 1/gamma>``, the scalar the step
    divides by); None where the gain or bias is not held, or a gain entry is 0.

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch  # G's own tag: an untied GPT-2's head absorbing the final norm's bias
    >>> (_, tag), = _head_hyperplanes(GroupSpec.from_arch(dataclasses.replace(get_arch("gpt2"), tied_lm_head=False)))
    >>> p = {"final_ln_w": torch.tensor([[1.0, 2.0]]), "final_ln_b": torch.tensor([[1.0, 4.0]])}
    >>> _head_scalar(p, tag), _head_scalar(p, tag, {"t": torch.tensor([[1.0, 0.0]])}), _head_scalar({}, tag)
    (3.0, 4.0, None)
    """
    gain, bias = (params.get(n) for n in tag.via.split(","))
    if gain is None or bias is None or not bool((gain != 0).all()):
        return None
    c = (element or {}).get(tag.component)
    b = bias.reshape(-1) if c is None else bias.reshape(-1) + c.reshape(-1).to(bias.dtype)
    return float((b / gain.reshape(-1)).sum())


def translation_allowance(spec: GroupSpec, source: dict[str, Any], target: dict[str, Any], steps: list[dict[str, Any]],
                          precision: Any, *, b_first: bool = False) -> dict[tuple[str, int | None], Any]:
    """Per ``(tensor, layer)`` the element's translations move, a bound on what rounding can put into each entry
    through them: the scale :func:`tensor_residuals` widens an entry's by, in units of that tensor's unit roundoff
    (None: a step this bound does not follow moved the tensor; nothing is widened there).

    A translation's component is read from B's rounded tensors (its pivot: the tag :data:`_FIT_BOUND` names), so it
    carries up to ``u_p`` times :data:`_FIT_BOUND` of the pivot's scale, read in the step's own frame (the largest
    of A's moved by the steps before it and with it, and of B's where no later step moves the pivot; where the
    source is B, ``b_first``, of B's moved by the steps before it and of A's brought back through the inverse of
    the linear steps after it, the frame relate read that pivot in); its tags add
    that through their action taken on magnitudes: ``|c| |W|`` for ``c W``,
    with no cancellation (a sum far smaller than its terms carries its terms' rounding). It is given in units of
    the tensor's own ``u``, as an entry's scale is: the tolerance's headroom (``4 (1 + kappa)``) applies on top.
    It is not what the translation adds: with the entry's scale widened by ``2 |T| / tol``,
    a part of A some element shrank (a ``W_in`` row at 1e-7) beside an ordinary input hyperplane, which adds ``|T|``
    there at the part's own scale, could be rewritten by up to ``2 |T|`` (logits 28% off, and verify accepted).
    A fit's error is capped by the component it found. A factor's fit counts once however many steps a claim splits
    it into: its largest step's, each read without what the factor's own earlier steps put into the pivot, and
    capped by the factor's net component (:func:`_net_component`). A tag is followed only in B's frame: not where a
    step between it and B (after it, or before it where ``b_first``, B being the source as verify's pull-back has
    it) moves its component's pivot, that pivot's gain or its own via other than by a signed permutation times one
    scale (:func:`_scales_unevenly`).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> a = tiny_decoder("gpt2")
    >>> spec = GroupSpec.from_arch(a.arch)
    >>> A = model_blocks(a)
    >>> v = [{"v_W_in": torch.full((1, a.W_in.shape[-1]), 3.0, dtype=torch.float64)}] * a.n_layers
    >>> steps = [{"factor": "ffn-input-hyperplane", "element": v}]
    >>> allow = translation_allowance(spec, A, apply_steps(spec, A, steps), steps, _precision(a))
    >>> lp, W = A["layers"][0], allow[("W_in", 0)]
    >>> u = (1 / lp["ln2_w"]).abs().reshape(-1, 1)  # each entry: |u_i| (|u|^T S_j) / |u|^2, S W_in's scale
    >>> S = torch.maximum(lp["W_in"].abs(), apply_steps(spec, A, steps)["layers"][0]["W_in"].abs())
    >>> bool(torch.allclose(W, u @ (u.T @ S) / u.square().sum()))
    True
    """
    from symtrans.precision import unit_roundoff

    torch = _torch()
    L = len(source["layers"])
    # per (tensor, layer), per origin: a factor with several translation steps (a claim may split one translation
    # into many) its own, every other factor "" together. A genuine file's translation is one fit from B's rounded
    # pivot, so a factor's steps count its fit once (the largest), and a step reads its pivot without what the
    # same factor's earlier steps put there: read with it, a claim of 50 steps of a fiftieth compounded the bound
    # about twofold per step (1e15 u in W_in) and a B with a W_in entry x(1 + 400 u) passed where one step refuses 20 u
    split = _repeated_factors(spec, steps, linear=False)
    net = {n: _net_component(spec, steps, n) for n in split}
    allow: dict[tuple[str, int | None], dict[str, Any]] = {}
    unknown: set[tuple[str, int | None]] = set()
    cur, lin = source, source  # A moved by the steps so far; by the linear steps alone

    def pivot(t: Any, l: int | None) -> tuple[str, int | None, str | None, int | None]:
        """Where tag ``t`` reads its component at layer (or boundary's next layer) ``l``, and its gain (if any)."""
        gain = t.via.split(",")[0] if t.via else None
        if l is None or t.scope == "layer":
            return t.tensor, l, gain, l
        if t.scope == "prev":  # a boundary's closing norm: the embedding norm before layer 0
            return (*boundary_norm(t.tensor, l), None, None)
        # "next": the layer after the boundary; its norm (a hyperplane's gain) the layer before's
        return t.tensor, l, *(boundary_norm(gain, l) if gain is not None else (None, None))

    backs: dict[tuple[tuple[int, ...], str], Any] = {}  # the target brought back to a step's frame (b_first)

    def target_at(name: str, l: int | None, i: int) -> list[Any]:
        """The target's tensor in step ``i``'s frame, as a list of one, or none where it is not read there. Where
        the source is A (relate's check) only B's own, where no later linear step moves it. Where it is B (``b_first``: verify's
        pull-back, the steps g^-1) the target is A, moved back through the inverse of the linear steps after
        ``i``: A moved by g's linear steps before the translation g^-1's step ``i`` undoes, the frame relate read
        that translation's pivot in, as ``lin`` reads A where the source is A (the translations between add no
        rounding and are left out, as there). Read only where B is: a relate(g . A, A) of a random BERT, whose A
        (the file's B) has biases of 0, found the value bias shift from g . A's rounded ``b_V``; the pull-back,
        which read B's 0 there and A's not at all (the linear steps of g^-1 all come after its translations),
        widened nothing, and verify refused relate's own file at a ``b_O`` entry g . A cancels to 1e-4 of the
        tensor, off by 0.2 of its ``u |b_O|`` (3e-5 of the entry)."""
        if name not in later[i]:
            return [tensor_at(target, name, l)]
        if not b_first:
            return []
        back = tuple(k for k in range(i + 1, len(steps)) if linear_factor(spec, steps[k]["factor"]))
        if (back, name) not in backs:
            from symtrans.group.action import inverse_steps

            undo = inverse_steps(spec, [steps[k] for k in back])
            backs[(back, name)] = apply_steps(spec, _keeping(spec, target, {name}, undo), undo)
        return [tensor_at(backs[(back, name)], name, l)]

    def size(name: str, l: int | None, i: int) -> Any:
        """A tensor's entrywise size in step ``i``'s frame: A's moved by the linear steps before it (a translation
        adds no rounding, and an intermediate one is no size: a claim of t then -t, or of a scaling around a
        transfer, would pass off its own values as rounding) and the target's in that frame (:func:`target_at`)."""
        sides = [tensor_at(lin, name, l)] + target_at(name, l, i)
        if any(x is None for x in sides):
            return None
        return _map_blocks(lambda *x: functools.reduce(lambda m, y: torch.maximum(m, y.abs()), x[1:], x[0].abs()),
                           *sides)

    def sizes(zero: set[str], read: set[str], i: int) -> dict[str, Any]:
        """The model for acting on magnitudes: ``zero`` at 0, ``read`` at their sizes in step ``i``'s frame."""
        out = {n: v for n, v in cur.items() if n != "layers"}
        out["layers"] = [dict(lp) for lp in cur["layers"]]
        for n, l, v in _iter_tensors(cur, blocks=True):
            if n in zero or n in read:
                x = _map_blocks(torch.zeros_like, v) if n in zero else size(n, l, i)
                (out if l is None else out["layers"][l])[n] = v if x is None else x
        return out

    later = [frozenset().union(*(_acts_on(spec, s["factor"]) for s in steps[i + 1:]
                                 if linear_factor(spec, s["factor"]))) for i in range(len(steps))]
    composed: list[Any] = []  # :func:`mixing` of the steps read together, once a linear step meets an allowance
    scales: list[dict[Any, float]] = []  # :func:`_head_scalar_scale`, once a step moves a head through its hyperplane

    def unmixed_spread(alone: Any, name: str, l: int | None) -> bool:
        """Whether a linear step (``alone``: its :func:`mixing`) mixes an axis of ``name`` that the steps together
        leave unmixed (a rotation and, later, its inverse): carried through it on magnitudes, a translation's bound
        would spread one channel's rounding onto another that the check then holds to its own scale."""
        if not composed:
            composed.append(mixing(spec, steps))
        v = tensor_at(cur, name, l)
        blocks = len(v) if isinstance(v, (list, tuple)) else None
        return bool(set(_mixed_at(alone, name, l, blocks)) - set(_mixed_at(composed[0], name, l, blocks)))

    for i, st in enumerate(steps):
        f = spec.factor(st["factor"])
        acted = set(_acts_on(spec, f.name))
        after = apply_steps(spec, cur, [st])
        vias = {n for t in f.tags if t.via for n in t.via.split(",")}
        if linear_factor(spec, f.name):  # a linear step moves what is widened: on magnitudes, as it moves entries
            held = {k for k in allow if k[0] in acted and k not in unknown}
            # a rotation undone later (the steps together mix nothing there): a translation between them, read in
            # the rotated frame where a shrunk channel is mixed with ordinary ones, is not followed (a b_Q entry
            # shrunk by 1e-10 was rewritten x1e4 under a qk-gauge Q, a bias transfer, then Q^T; logits 1.1% off)
            alone = mixing(spec, [st], composed=False) if held else {}
            spread = {k for k in held if unmixed_spread(alone, *k)}
            unknown |= spread
            held -= spread
            if held and not {k[0] for k in held} & vias:
                mag = _abs_element(st["element"])
                for o in {o for k in held for o in allow[k]}:  # on magnitudes the action is linear: each origin alone
                    P = sizes(acted - vias, vias, i)
                    for n, l in held:
                        if o in allow[(n, l)]:
                            (P if l is None else P["layers"][l])[n] = allow[(n, l)][o]
                    moved = act(spec, P, f.name, mag)
                    for n, l, v in _iter_tensors(moved, blocks=True):
                        if (n, l) in held and o in allow[(n, l)]:
                            allow[(n, l)][o] = v
            else:
                unknown |= held
            # before any translation the linear-only copy is the same model: the step applied once
            cur, lin = after, after if lin is cur else apply_steps(spec, lin, [st])
            continue
        origin = f.name if f.name in split else ""

        def others(k: tuple[str, int | None]) -> Any:
            """What earlier translations of factors other than this step's own carried into ``k``."""
            return _summed([v for o, v in allow.get(k, {}).items() if o != origin or not origin])

        els = st["element"] if isinstance(st["element"], list) else None
        first = L - len(els) if els is not None else 0
        readers = {}
        for t in f.tags:
            if t.how in _FIT_BOUND:
                readers.setdefault(t.component, t)
        # what the step's bound reads (its pivots and their gains; what its tags act through: a gain, an image's map)
        # that a linear step between it and B moves other than by a signed permutation times one scale: the claim
        # chose the frame that part of the bound is read in. A norm scaling D, G's input hyperplane, then D^-1 put
        # all the weight of the hyperplane's fit on one row of W_in (43 u on a column with one outlier entry,
        # against 1.8 u in B's frame; an entry x(1 + 400 u) passed); a value gauge's shear of 1e7, a value bias
        # shift, then the shear's inverse read b_V and W_O sheared (b_O's bound 5e4 against 0.18; an entry
        # x(1 + 100 u) passed). relate reads each in B's frame (a permutation, as verify's pull-back has after it,
        # moves rows and weights together). A tag that reads such a tensor, through its component's pivot or its
        # own via, is not followed; the rest of the step is
        between = steps[:i] if b_first else steps[i + 1:]
        pivots = {c: {x for l in range(L) for x in pivot(t, l)[::2] if x is not None} for c, t in readers.items()}
        chosen = {x for x in set().union(*pivots.values()) | vias if _scales_unevenly(spec, between, {x})}
        skipped = tuple(t for t in f.tags if pivots.get(t.component, set()) & chosen
                        or (t.via and set(t.via.split(",")) & chosen))
        unknown |= {(t.tensor, l) for t in skipped for l in [None, *range(L)]}
        if len(skipped) == len(f.tags):
            cur = after
            continue

        # a fit's error is no larger than the component it found: a component of 0 (a step named and zeroed) or
        # one whose steps cancel (a split factor's net component) carries no fit's rounding (a centring shift c then
        # -c beside a value bias shift widened every W_out entry by a row's rounding, and an entry 1/1500 of its row
        # passed x(1 + 1e4 u)); a split factor whose steps' frames differ is not followed
        if origin in split and net[origin] is None:
            unknown |= {(t.tensor, l) for t in f.tags for l in [None, *range(L)]}
            cur = after
            continue
        own = net[origin] if origin in split else st["element"]

        def capped(b: Any, comp: Any) -> Any:
            return torch.minimum(b, comp.abs()) if hasattr(comp, "shape") and comp.shape == b.shape else b

        def bound(el: dict[str, Any], l: int | None, mine: dict[str, Any]) -> dict[str, Any] | None:
            out = {}
            for c, comp in el.items():
                t = readers.get(c)
                if t is None:
                    return None
                name, pl, gname, gl = pivot(t, l)
                S = size(name, pl, i)
                if S is None:
                    return None
                u = unit_roundoff(precision(name, pl))
                held = others((name, pl))  # what earlier translations of other factors carried into the pivot
                R = _map_blocks(lambda x, h=None: u * x if h is None else u * x + h, S, *([held] if held is not None
                                                                                         else []))
                gain = tensor_at(cur, gname, gl) if gname is not None else None
                w = rounding_weights(tensor_at(lin, name, pl), tensor_at(target, name, pl), uneven=2.0) \
                    if t.how == "translate_rows" else None
                out[c] = _map_blocks(lambda r, cc, m: capped(_FIT_BOUND[t.how](r, gain, w, cc), m), R, comp, mine[c])
            return out

        if els is None:
            E = bound(st["element"], None, own)
        else:
            E = [bound(el, first + k, own[k]) for k, el in enumerate(els)]
            E = None if any(e is None for e in E) else E
        if E is None:
            unknown |= {(t.tensor, l) for t in f.tags for l in [None, *range(L)]}
            cur = after
            continue
        # what a tag may read as it acts (a via, a boundary's closing norm) at its size; what it moves from 0
        reads = _read_through(spec, f.name)
        P = sizes(acted - reads, reads, i)
        heads = tuple(t for t in f.tags if t.how == "hyperplane_head")
        moved = act(spec, P, f.name, E, tags=tuple(t for t in f.tags if t not in heads and t not in skipped))
        before = {(n, l): v for n, l, v in _iter_tensors(P, blocks=True)}
        fresh = [(n, l, _map_blocks(lambda x, y: (x - y).abs(), v, before[(n, l)]))
                 for n, l, v in _iter_tensors(moved, blocks=True) if n in acted and v is not before.get((n, l))]
        for t in (t for t in heads if t not in skipped):  # its scalar reads the head and the component (below)
            W = size(t.tensor, None, i) if els is None else None
            # the scalar's error carries the component itself: a split factor's is its net one, ``own`` (each
            # step's own grew the head's bound with it: t + r then -r, r orthogonal to 1/gamma and 1e3 times t,
            # widened it 1e3 times, and an entry x(1 + 1600 u) passed)
            c = own[t.component]
            if W is None:
                unknown.add((t.tensor, None))
                continue
            if not scales:
                scales.append(_head_scalar_scale(spec, source, steps))
            fresh.append((t.tensor, None, _head_hyperplane_bound(cur, scales[0].get(t, 0.0), t, c, W, E[t.component],
                                                                  others((t.tensor, None)))))
        for n, l, d in fresh:
            parts = allow.setdefault((n, l), {})
            merge = torch.maximum if origin in split else torch.add  # a split factor's fit once: its largest step's
            parts[origin] = d if origin not in parts else _map_blocks(merge, parts[origin], d)
        cur = after

    from symtrans.numeric.weights import all_finite

    def finite(x: Any) -> bool:
        return all(all_finite(b) for b in (x if isinstance(x, (list, tuple)) else [x]))

    # a bound that is not finite (a scalar of 0) bounds nothing: as if not followed
    total = {k: _summed(list(v.values())) for k, v in allow.items()}
    return {k: (None if k in unknown or not finite(v) else _map_blocks(lambda x: x / unit_roundoff(precision(*k)), v))
            for k, v in total.items()} | {k: None for k in unknown}

def _net_component(spec: GroupSpec, steps: list[dict[str, Any]], factor: str) -> dict[str, Any] | None:
    """The components of a translation ``factor``'s steps summed (one element: what they compose to; per layer for a
    per-layer factor), or None where a linear step between its first and last step acts on a tensor the factor
    moves or reads (their frames differ).

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch  # an untied GPT-2: its head absorbs the final norm's bias
    >>> spec = GroupSpec.from_arch(dataclasses.replace(get_arch("gpt2"), tied_lm_head=False))
    >>> t = torch.ones(1, 3, dtype=torch.float64)
    >>> st = [{"factor": "final-norm-bias-transfer", "element": {"t": x * t}} for x in (5.0, -4.0)]
    >>> _net_component(spec, st, "final-norm-bias-transfer")["t"].tolist()
    [[1.0, 1.0, 1.0]]
    >>> from symtrans.group.numeric import MonomialMatrix
    >>> P = {"factor": "residual-permutation", "element": {"Q": MonomialMatrix([1, 2, 0], torch.ones(3))}}
    >>> _net_component(spec, [st[0], P, st[1]], "final-norm-bias-transfer") is None  # two frames: no sum
    True
    """
    at = [k for k, st in enumerate(steps) if st["factor"] == factor]
    tags = spec.factor(factor).tags
    touched = {t.tensor for t in tags} | {v for t in tags if t.via for v in t.via.split(",")}
    if any(linear_factor(spec, st["factor"]) and set(_acts_on(spec, st["factor"])) & touched
           for st in steps[at[0]:at[-1]]):
        return None

    def add(x: Any, y: Any) -> Any:  # per-head blocks blockwise
        return [add(a, b) for a, b in zip(x, y)] if isinstance(x, (list, tuple)) else x + y

    els = [steps[k]["element"] for k in at]
    if all(isinstance(e, dict) for e in els):
        return {c: functools.reduce(add, (e[c] for e in els)) for c in els[0]}
    if all(isinstance(e, list) and len(e) == len(els[0]) for e in els):  # per layer
        return [{c: functools.reduce(add, (e[l][c] for e in els)) for c in els[0][l]} for l in range(len(els[0]))]
    return None


def _scales_unevenly(spec: GroupSpec, steps: list[dict[str, Any]], tensors: set[str]) -> bool:
    """Whether a linear step of ``steps`` scales an entry of one of ``tensors`` (a norm's gain) by a magnitude
    that differs from another's, or mixes its entries: anything but a signed permutation times one scale.

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.numeric import MonomialMatrix
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> spec = GroupSpec.from_arch(tiny_decoder("gpt2").arch)
    >>> D = [{"D": torch.diag(torch.tensor([2.0, 2.0, 0.5]))}]
    >>> _scales_unevenly(spec, [{"factor": "ln2-scaling", "element": D}], {"ln2_w"})
    True
    >>> P = {"Q": MonomialMatrix([2, 0, 1], torch.tensor([1.0, -1.0, 1.0]))}
    >>> _scales_unevenly(spec, [{"factor": "residual-permutation", "element": P}], {"ln2_w"})
    False
    """
    from symtrans.group.numeric import MonomialMatrix

    def uneven(x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            return any(uneven(y) for y in x)
        if isinstance(x, MonomialMatrix):
            m = x.vals.abs()
        elif not hasattr(x, "dim"):
            return False
        elif x.dim() == 2:
            if bool((x - _torch().diag(x.diagonal())).any()):
                return True
            m = x.diagonal().abs()
        else:
            m = x.abs().reshape(-1)
        return bool((m != m[0]).any()) if m.numel() else False

    for st in steps:
        if not linear_factor(spec, st["factor"]):
            continue
        comps = {t.component for t in spec.factor(st["factor"]).tags if t.tensor in tensors}
        els = st["element"] if isinstance(st["element"], list) else [st["element"]]
        if any(uneven(el[c]) for el in els for c in comps if c in el):
            return True
    return False


def _carried(spec: GroupSpec, steps: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Per tensor X a translation of ``steps`` moves by the image of a component read from another tensor Z's
    difference (a ``translate_image`` tag ``X += c Y``, ``c`` read from Z by a ``translate`` tag of the same
    factor): the pairs ``(Z, Y)``; ``(Z, "")`` where X is moved by the component itself (a ``translate`` or
    ``translate_neg`` tag: Y the identity). The rounding of Z enters X through Y however small X is
    (:func:`carried_size`). A post-LN encoder's FFN bias transfer reads ``t`` from ``ln1_b`` and subtracts it from
    ``b_out``: with one ``ln1_b`` entry of A at 5e4, a genuine BERT pair was "not related" at ``b_out`` (3.9e-4
    against 1.6e-6), ``ln1_b``'s rounding carried straight in.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> spec = GroupSpec.from_arch(tiny_decoder("gpt2").arch)
    >>> _carried(spec, [{"factor": "value-bias-shift"}])
    {'b_O': [('b_V', 'W_O')]}
    >>> _carried(GroupSpec.from_arch("bert-base"), [{"factor": "ffn-bias-transfer"}])
    {'b_in': [('ln1_b', 'W_in')], 'b_out': [('ln1_b', '')]}
    """
    out: dict[str, list[tuple[str, str]]] = {}
    for st in steps:
        f = spec.factor(st["factor"])
        read = {t.component: t.tensor for t in f.tags if t.how == "translate"}
        for t in f.tags:
            z = read.get(t.component)
            if z in (None, t.tensor):
                continue
            if t.how == "translate_image" and t.via:
                pair = (z, t.via)
            elif t.how in ("translate", "translate_neg"):
                pair = (z, "")  # the component itself: Y the identity
            else:
                continue
            if pair not in out.setdefault(t.tensor, []):
                out[t.tensor].append(pair)
    return out


def carried_size(pairs: list[tuple[str, str]],
                 sides: list[dict[str, Any]]) -> tuple[float, tuple[str, str] | None]:
    """The largest ``|Z|_F |Y|_2`` over the ``(Z, Y)`` pairs (:func:`_carried`), and which pair: the
    rounding of Z, ``u |Z|``, carried into a tensor through Y. ``sides``: the parameters (one layer's or the
    model's) of A and of B. ``|Z|`` is the larger side's (the rounding is the stored values'), ``|Y|_2`` (the
    largest singular value; per-head blocks: the root sum of their squares) the smaller side's: the solve
    transfers before G's later factors move Y, and the larger side's Y carries those moves (the centring shift's
    all-ones rows, which the transfer's error does not reach past that shift). B's ``b_V``, 3700 times A's where
    G's input hyperplane moved it through a LayerNorm gain channel at 1e-3, put 2.4e-6 of rounding into ``b_O``
    through ``W_O`` (a tolerance of 1.9e-6); from that B back to A, A's did.

    Examples
    --------
    >>> import torch
    >>> a = {"b_V": [torch.tensor([3.0, 4.0])], "W_O": [torch.diag(torch.tensor([2.0, 1.0]))]}
    >>> b = {"b_V": [torch.tensor([0.6, 0.8])], "W_O": [torch.diag(torch.tensor([20.0, 1.0]))]}
    >>> carried_size([("b_V", "W_O")], [a, b])  # |b_V| = 5 (A's), |W_O|_2 = 2 (A's)
    (10.0, ('b_V', 'W_O'))
    """
    from symtrans.numeric.weights import all_finite

    torch = _torch()
    best, which = 0.0, None
    for z, via in pairs:
        Zs = [_norm_any(p[z]) for p in sides if p.get(z) is not None]
        if not via:  # the component itself moves the tensor: |Y|_2 = 1
            if Zs and max(Zs) > best:
                best, which = max(Zs), (z, via)
            continue
        Ys = [p[via] for p in sides if p.get(via) is not None]
        if not Zs or not Ys:
            continue
        two = []
        for Y in Ys:
            Y = torch.stack(list(Y)) if isinstance(Y, (list, tuple)) else Y
            # a non-finite Y bounds nothing (and LAPACK would print its own error on stderr): no size
            two.append(float(torch.linalg.matrix_norm(Y.to(torch.float64), ord=2).square().sum().sqrt())
                       if all_finite(Y) else math.inf)
        size = max(Zs) * min(two)
        if size > best:
            best, which = size, (z, via)
    return best, which


def _last_factor(spec: GroupSpec, steps: list[dict[str, Any]], tensor: str) -> str:
    """The factor a check failure at ``tensor`` is named at: the last step that moved it; where none did, the first
    factor of G acting on it, a per-layer one for a per-layer tensor (a layer's W_gate: ``S_dff``, not the
    model-wide residual map).

    Examples
    --------
    >>> spec = GroupSpec.from_arch("llama2-7b")
    >>> _last_factor(spec, [], "W_gate"), _last_factor(spec, [{"factor": "residual-rotation"}], "W_gate")
    ('S_dff', 'residual-rotation')
    """
    for s in reversed(steps):
        if any(t.tensor == tensor for t in spec.factor(s["factor"]).tags):
            return s["factor"]
    acting = [f for f in spec.factors if any(t.tensor == tensor for t in f.tags)]
    own = [f for f in acting if (f.scope == "model") == all(t.scope == "model" for t in f.tags if t.tensor == tensor)]
    return (own or acting)[0].name if acting else "(no factor of G acts on it)"


def _load(x: Any) -> Any:
    from symtrans.numeric.weights import ModelWeights, load_model

    if isinstance(x, ModelWeights):
        return x.to(dtype="float64")
    return load_model(x, dtype="float64")


def require_finite(w: Any, who: str, side: str, cause: BaseException | None = None) -> None:
    """Refuse loaded weights that hold NaN or Inf, naming the first such tensor and layer.

    Checkpoints and model objects are refused at load (:func:`symtrans.numeric.weights.all_finite`); weights
    built or edited in memory reach relate and canonical as they are, where a NaN either raises deep in a solve
    or gives a refusal measured in NaN. ``cause``: the error that made the caller look (chained).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default").copy(); _ = w.W_in[2, 5, 7].fill_(float("nan"))
    >>> require_finite(w, "relate", "B")
    Traceback (most recent call last):
    symtrans.errors.SymtransError: relate: B holds NaN or Inf in tensor W_in (layer 2): no element of G is defined on it
    """
    bad = w.first_nonfinite()
    if bad is not None:
        raise SymtransError(f"{who}: {side} holds NaN or Inf in tensor {bad}: no element of G is defined on it") \
            from cause


@contextlib.contextmanager
def finite_or_named(who: str, **sides: Any) -> Any:
    """Run relate's solve on ``sides`` (name: loaded weights); where it raises, a side holding NaN or Inf is
    named (:func:`require_finite`) instead of the error the NaN caused deep in the solve. Nothing is read where
    the solve succeeds: relate's final check compares every tensor, and a NaN passes no tolerance (canonical,
    which has no such check, reads the form it returns).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default").copy(); _ = w.word[0, 0].fill_(float("inf"))
    >>> with finite_or_named("relate", B=w):
    ...     raise RuntimeError("lstsq: illegal value")
    Traceback (most recent call last):
    symtrans.errors.SymtransError: relate: B holds NaN or Inf in tensor word: no element of G is defined on it
    """
    try:
        yield
    except Exception as err:
        for side, w in sides.items():
            require_finite(w, who, side, err)
        raise


def max_abs(w: Any) -> float:
    """The largest |value| over the tensors of loaded weights ``w`` (G's blocks).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> max_abs(load_model("default")) > 1
    True
    """
    from symtrans.group.numeric import model_blocks

    return max(float(x.abs().max()) for _, _, v in _iter_tensors(model_blocks(w), blocks=True)
               for x in (v if isinstance(v, (list, tuple)) else [v]) if x is not None and x.numel())


def _precision(w: Any) -> Any:
    from symtrans.numeric.weights import storage_precision

    def get(name: str, layer: int | None) -> str:
        return storage_precision(w, name, layer)[0]

    return get


def _describe(w: Any) -> dict[str, Any]:
    from symtrans.numeric.weights import storage_precision

    source = str(w.source)
    if Path(source).exists():  # a local checkpoint: its absolute path, so a verify run elsewhere finds it
        source = os.path.abspath(source)
    out = {"model": source, "weights_hash": w.weights_hash, "arch": w.arch.name,
           "storage": storage_precision(w)[0]}  # the coarsest stored dtype
    worst = offset_gain_resolution(w)
    return {**out, "offset_gain": worst} if worst is not None else out


def offset_gain_resolution(w: Any) -> dict[str, Any] | None:
    """The gain entry that ``w``'s storage resolves worst, where gains are stored as ``w = gain - offset`` (Gemma's
    ``1 + w``): the largest ``u`` times :func:`~symtrans.precision.offset_loss` over the non-zero gains (``u`` the
    tensor's storage unit roundoff: ``u |w| / |gain|``, at least ``u``), with its tensor, layer, index, gain and
    dtype; and ``zeros``, the count of gains exactly 0 per tensor (``name`` or ``name[layer]``). None for plain gains.
    A gain scaled toward 0 is stored as ``w`` near ``-1``, held to ``u``, not to ``u`` of itself: a related answer's
    tolerances read it at its stored ``|w|`` (B is g . A there), but the function through that channel is resolved
    no better. A gain of exactly 0 is a dead channel, or one the storage rounded to 0: no element of G makes a
    non-zero gain 0, so two sides whose counts differ lost gains to their storage.

    Examples
    --------
    >>> from symtrans.numeric.weights import load_model
    >>> offset_gain_resolution(load_model("default")) is None  # BERT: plain gains
    True
    """
    from symtrans.numeric.weights import GAIN_OFFSET_TENSORS, storage_precision
    from symtrans.precision import offset_loss, unit_roundoff

    offset = getattr(w.arch, "gain_offset", 0) or 0
    if not offset:
        return None
    best: dict[str, Any] = {"resolved_to": 0.0}
    zeros: dict[str, int] = {}
    for name in GAIN_OFFSET_TENSORS:
        t = w.tensors.get(name)
        if t is None or not hasattr(t, "dim"):
            continue
        rows = [(l, t[l]) for l in range(t.shape[0])] if t.dim() == 2 else [(None, t)]
        for l, g in rows:
            g = g.detach().double().cpu()
            dead = int((g == 0).sum())
            if dead:
                zeros[name if l is None else f"{name}[{l}]"] = dead
            dt = storage_precision(w, name, l)[0]
            # a gain of exactly 0 (infinite loss) is counted in ``zeros``, not here
            ratio = (unit_roundoff(dt) * offset_loss(g, offset)).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
            i = int(ratio.argmax())
            if float(ratio[i]) > best["resolved_to"]:
                best = {"tensor": name, "layer": l, "index": i, "gain": float(g[i]), "dtype": dt,
                        "resolved_to": float(ratio[i])}
    return {**best, "zeros": zeros}


def _same_shape(a: Any, b: Any) -> None:
    """Refuse, in one line, a pair of models that are not of one architecture and config (no orbit of G holds both).

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> _same_shape(tiny_decoder("gpt2"), tiny_decoder("llama"))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: A and B are not one architecture: A is a gpt2 model and B a llama model
    """
    if a.arch.family != b.arch.family:  # named first: a tensor one family lacks says less
        raise SymtransError(f"A and B are not one architecture: A is a {a.arch.family} model and B a {b.arch.family} "
                            "model")
    heads = [side for side, w in (("A", a), ("B", b)) if w.tensors.get("lm_head") is not None]
    if len(heads) == 1:  # a causal-LM checkpoint beside its base model: G moves the head, only one side has it
        other = "B" if heads == ["A"] else "A"
        why = "its head is the word table" if (b if other == "B" else a).arch.tied_lm_head else "a base-model checkpoint"
        raise SymtransError(f"{heads[0]} holds an untied output head (lm_head) and {other} does not ({why}): compare "
                            "both with their heads, or both without")
    for k, v in a.tensors.items():
        o = b.tensors.get(k)
        if (v is None) != (o is None) or (v is not None and tuple(v.shape) != tuple(o.shape)):
            raise SymtransError(f"A and B are not one architecture: tensor {k} has shape "
                                f"{None if v is None else tuple(v.shape)} in A and "
                                f"{None if o is None else tuple(o.shape)} in B")
    skip = ("name", "source", "notes")  # provenance, not structure
    diff = [f.name for f in dataclasses.fields(a.arch)
            if f.name not in skip and getattr(a.arch, f.name) != getattr(b.arch, f.name)]
    if diff:
        raise SymtransError(f"A and B are not one architecture: they differ in {', '.join(diff[:4])}")
    # what the forward reads from each config beside the architecture (the rotary base, a sliding window): equal
    # weights under another base compute another function, so g . A = B alone would not make B A's function
    sa, sb = _structure(a), _structure(b)
    if sa is not None and sb is not None and sa != sb:
        diff = [f"{f.name} ({getattr(sa, f.name)!r} in A, {getattr(sb, f.name)!r} in B)"
                for f in dataclasses.fields(sa) if getattr(sa, f.name) != getattr(sb, f.name)]
        raise SymtransError(f"A and B are not one architecture: their configs differ in {', '.join(diff[:4])}, "
                            "which the forward reads: no element of G changes it")


def _structure(w: Any) -> Any:
    """What the numeric forward reads from ``w``'s architecture and config
    (:func:`symtrans.numeric.forward.structure`), or None where it refuses the config (rotary scaling, which the
    architecture records itself)."""
    from symtrans.numeric.forward import structure

    try:
        return structure(w)
    except SymtransError:
        return None


#: the phases of the solve, in order (module docstring): residual map, gain scalings, heads, units, unit scalings,
#: gauges, translations
PHASES = ("residual", "scalings", "heads", "units", "unit_scalings", "gauges", "translations")

#: the largest relative rounding noise of the FFN unit keys (:meth:`_Solver.unit_keys`) at which relate still
#: answers "not related": beyond it a pair of units can swap and the refusal would not be an answer
KEY_NOISE_LIMIT = 1e-2


def _timed(phases: dict[str, float], name: str, fn: Any) -> None:
    """Run ``fn()`` and add its CPU seconds (``time.process_time``: this process, every thread) to ``phases[name]``."""
    import time

    t0 = time.process_time()
    try:
        fn()
    finally:
        phases[name] = phases.get(name, 0.0) + time.process_time() - t0


def _solve(s: _Solver, phases: dict[str, float]) -> None:
    """The order of the solve (:data:`PHASES`), each phase's CPU seconds added to ``phases``."""
    for name in PHASES:
        _timed(phases, name, getattr(s, name))


def relate(a: Any, b: Any) -> Relation:
    """Decide whether B = g . A for some g in G; return the element (steps) or where and why it cannot be.

    ``a`` and ``b`` are checkpoint directories, ``"default"`` or loaded
    :class:`~symtrans.numeric.weights.ModelWeights` of one architecture.
    Every loaded tensor is checked, an untied output head (``lm_head``) among
    them; where the checkpoints hold no head (a base model), the element's
    action on it is listed as not checked (:attr:`Relation.unchecked`).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> from symtrans.group.numeric import transform_weights, sample_element
    >>> a = load_model("default")
    >>> spec = GroupSpec.from_arch(a.arch)
    >>> els = [sample_element(spec, "S_H", torch.Generator().manual_seed(i), a.dtype)[0] for i in range(6)]
    >>> r = relate(a, transform_weights(a, spec, "S_H", els))
    >>> r.related, [s["factor"] for s in r.steps]
    (True, ['S_H'])
    >>> b = a.copy(); _ = b.W_in[3, :, 7].mul_(2.0); _ = b.W_out[3, 7].div_(2.0)  # one GELU unit scaled
    >>> stop = relate(a, b).stop
    >>> stop.factor, stop.layer, stop.tensor, stop.features[0][:15]
    ('ffn-scaling', 3, 'W_in', 'gelu activation')
    """
    import time

    t0 = time.perf_counter()
    A, B = _load(a), _load(b)
    _same_shape(A, B)
    spec = GroupSpec.from_arch(A.arch)
    for name, w in (("A", A), ("B", B)):  # every key projects with 1/gain: refused, not a NaN "not related"
        dead = dead_gain_actions(spec, w, HYPERPLANE_KINDS)
        if dead:
            raise SymtransError(f"relate: in {name}, {dead[0]}: G as modelled assumes that gain non-zero, so "
                                "relate cannot decide this pair")
    # a bias an untied head absorbs, on the hyperplane its action divides by: in B, the element reaching it is
    # undefined; in A, the head has a free direction G lacks, and an element that moves the bias cannot be pulled
    # back (_relate: cannot decide). Both touch only the tensors of that absorption (the head, the norm's gain and
    # bias): a refusal at any other tensor stands (no solve of another tensor reads the head)
    singular = [f"in {name}, {line}" for name, w in (("A", A), ("B", B)) for line in singular_head_biases(spec, w)]
    with finite_or_named("relate", A=A, B=B):
        rel = _relate(A, B, spec, t0)
    if rel.stop is not None and singular and (rel.stop.tensor in head_hyperplane_tensors(spec)
                                              or not math.isfinite(rel.stop.unexplained)):
        raise SymtransError(f"relate: {singular[0]}: G as modelled assumes that product non-zero, so the refusal "
                            f"relate reached ({rel.stop.line()[:160]}) is not an answer: relate cannot decide this pair")
    if rel.stop is not None and math.isnan(rel.stop.unexplained):
        # NaN is no size: a refusal measured in it is not an answer. The inputs are finite (else named above):
        # the arithmetic overflowed (a float64 sum of squares past 1.8e308: values beyond ~1e154)
        for side, w in (("A", A), ("B", B)):
            require_finite(w, "relate", side)
        big = max(max_abs(A), max_abs(B))
        raise SymtransError(f"relate: the solve's arithmetic is not finite at {rel.stop.factor}"
                            f"{'' if rel.stop.layer is None else f', layer {rel.stop.layer}'}, tensor "
                            f"{rel.stop.tensor} (the largest |value| of A and B is {big:.3g}; a float64 sum of "
                            "squares overflows past about 1e154), so the refusal it reached is not an answer: relate "
                            "cannot decide this pair")
    return rel


def _relate(A: Any, B: Any, spec: GroupSpec, t0: float) -> Relation:
    """:func:`relate` on loaded float64 weights of one architecture, every gain a hyperplane divides by non-zero
    (``t0``: when the call began, for the answer's timing)."""
    import time

    from symtrans.group.numeric import model_blocks

    dead_conjugation = dead_gain_actions(spec, A, CONJUGATION_KINDS)
    precision = _precision(B)
    from symtrans.threads import single_threaded

    blocks_a, blocks_b = model_blocks(A), model_blocks(B)
    filled_a, filled_b = fill_unread(spec, blocks_a), fill_unread(spec, blocks_b)  # rows no input reads

    def attempt(defer: bool, identity: bool = False
                ) -> tuple[_Solver, Stop | None, list[dict[str, Any]], dict[str, float]]:
        s = _Solver(spec, filled_a, filled_b, precision)
        s.lazy_values = LAZY_VALUES  # the word table: acted on row chunk by row chunk where it is read, never copied
        s.defer = defer
        s.dead_conjugation = dead_conjugation
        stop = None
        phases: dict[str, float] = {}
        try:
            with single_threaded():  # small products and solves: one thread (oversubscribed cores cost ~100x)
                if not identity:  # the identity: no phase, only the rows no input reads (below) and the check
                    _solve(s, phases)
                if filled_a is not blocks_a:
                    _timed(phases, "unread rows", lambda: s.solve_unread(blocks_a, blocks_b))
        except _Refused as err:
            stop = err.stop
        residuals: list[dict[str, Any]] = []
        if stop is None:
            def check() -> None:  # the lazily acted tables: g applied and compared with B in one pass, chunk by chunk
                keep = slice_axes(spec, s.steps, list(s.pending))
                lazy = {(name, None): s.lazy_residual(name, keep.get(name, ())) for name in s.pending}
                residuals.extend(tensor_residuals(s.cur, s.tgt, precision, s.steps, spec,
                                                  measured={k: v[0] for k, v in lazy.items()}, source=blocks_a,
                                                  slices=True, measured_slices={k: v[1] for k, v in lazy.items()},
                                                  acted=s.table))

            with single_threaded():
                _timed(phases, "check", check)
            bad = [r for r in residuals if not r["ok"]]
            if bad:
                stop = _check_stop(spec, s.steps, bad)
        return s, stop, residuals, phases

    # B within its own rounding of A, tensor by tensor (a float16 copy of a float32 A): the identity, if the check
    # accepts it, not an element whose every factor fitted the rounding (a float16 copy of a random GPT-2 was
    # "related with g moving" nine factors). A moved copy differs at its first tensor, so this costs nothing there
    identity = None
    if _near_identity(blocks_a, blocks_b, precision):
        tried = attempt(False, identity=True)  # (single-threaded inside, as every attempt)
        if tried[1] is None:
            identity = tried
    # first with the residual map's fit deferred to the check. Its answer stands where the check bounds every
    # deferred fit and B is related; else where the deferred fits, measured now, are within their tolerance (the
    # solve without defer would have chosen the same map) and, for a refusal, the try did nothing else
    # otherwise before it (``skipped``); else the answer is the solve that measures every fit where it is made
    s, stop, residuals, phases = identity if identity is not None else attempt(True)
    res = {(r["tensor"], r["layer"]): r["residual"] for r in residuals}
    if stop is not None or any(res.get((name, l), math.inf) > bound for name, l, bound, _ in s.deferred):
        fits: list[bool] = []  # not measured where the answer is solved again anyway; else until one fails
        if not (stop is not None and s.skipped):
            with single_threaded():
                _timed(phases, "deferred fit",
                       lambda: fits.append(all(fit() <= bound for _, _, bound, fit in s.deferred)))
        if not all(fits) or (stop is not None and s.skipped):
            first_try = sum(phases.values())
            s.deferred.clear()  # its fits close over the solver: freed now, not at the next garbage collection
            s, stop, residuals, phases = attempt(False)
            phases["deferred try"] = first_try
    s.deferred.clear()
    if stop is not None and not residuals and s.unrounded and s.fit.past and \
            stop.unexplained <= stop.tolerance * s.fit.kappa:
        # a refusal of the solve (the check's are read below), whether or not it gave its rounding: the residual
        # map moves every tensor of the residual stream
        where = "" if stop.layer is None else f"layer {stop.layer}: "
        s.unresolved.append(f"{where}the residual map was fitted on {s.fit.text()}, and what {stop.factor} leaves at "
                            f"{stop.tensor} ({stop.unexplained:.3g}; tolerance {stop.tolerance:.3g}) is within what "
                            "that number carries")
    if stop is not None:
        _raise_if_undecided(residuals, s.fit)
    if stop is not None:
        # equal products fix the heads only up to their gauge; a key/value head shared by query heads whose
        # keys are 0 (a pruned key head) leaves W_Q free, and the match's choice among tied heads may be one
        # that no gauge completes: a refusal it can reach is not an answer (nor one FFN units' keys B's storage
        # cannot resolve can reach); a tensor of B neither can reach that no element reproduces is
        local = s.local_unresolved + [(l, "heads", f"layer {l}: heads whose products tie (the match's choice among "
                                       "them may be one no gauge completes)") for l in sorted(s.tied_heads)]
        names = set(A.tensors) | {k for lp in s.cur["layers"][:1] for k in lp}
        stop = _outside_local(spec, stop, [r for r in residuals if not r["ok"]], local, s.unresolved, names, s.steps,
                              s.L)
    if stop is not None and s.unresolved:
        raise SymtransError(f"relate: the solve cannot tell this pair apart ({s.unresolved[0]}), so the refusal it "
                            f"reached ({stop.line()}) is not an answer: relate cannot decide this pair")
    steps = [st for st in s.steps]
    if stop is None:  # the element found must be one of G's, as verify demands of a file
        kept: list[Any] = []
        with single_threaded():
            _timed(phases, "in G", lambda: kept.append(_kept_in_group(spec, A, B, precision, steps, residuals)))
        steps, stop, residuals = kept[0]
        if stop is not None:  # the element brought onto G, re-applied: judged as the check's
            _raise_if_undecided(residuals, s.fit)
    limit = min(kappa_limit(r["dtype"]) for r in residuals) if residuals else KAPPA_MAX
    back: list[dict[str, Any]] = []  # A's side, where it is measured (below)
    heads = {f.name for f, _ in _head_hyperplanes(spec)}
    whole = stop is None and (any(r["kappa"] > kappa_limit(r["dtype"]) for r in residuals)
                              or any(element_spread(st["element"]) > limit for st in steps)
                              or any(st["factor"] in heads and not _inert_step(st) for st in steps)
                              or any(unit_roundoff(r["dtype"]) <= EPS64 for r in residuals))
    parting = _sides_part_cheaply(spec, steps, residuals) if stop is None and not whole else set()
    if whole or parting:
        # an element past the limit buys no slack from A's side either (verify's second side): B's rounding pulled
        # back through it is what it carries; and an element whose spread passes it (:func:`element_spread`) may hide
        # a part of a tensor from B's side. A shift through an untied head's hyperplane divides by the scalar after
        # it, which differs on the two sides: B's rounding of the head's part along the shift comes back divided by
        # A's scalar (870 u, where A's was 0.0094 against a sum of magnitudes of 2.5 and B's -2.7), which B's side
        # does not carry; uncounted, relate wrote such a random untied GPT-2's element and verify refused the file.
        # A tensor of B stored in float64 is rounded as finely as the float64 arithmetic that applies the element,
        # whose rounding each side carries apart: relate(g . A, A) of float64 BERTs, RoBERTas and DistilBERTs
        # (element seed 5) was related and verify refused its file at b_in from A's side (1.98e-15 against
        # 1.26e-15). Elsewhere the two sides do not part on relate's own element (its solve compares G-invariant
        # keys), and the pull-back (a second application of the element) is left to verify
        with single_threaded():
            _timed(phases, "A side", lambda: back.extend(pulled_back_residuals(spec, blocks_a, blocks_b, precision,
                                                                             steps, only=parting or None)))
        failed = [r for r in back if not r["ok"]]
        # B's side reproduced, A's not. Where only linear steps move the tensor and its condition number is within
        # the limit, B's rounding comes back as the tolerance allows: a difference beyond it is B's own, refused
        # (a part of B the element's spread hid from B's side). Elsewhere a translation's component pulled back
        # reads tensors at B's rounding, which B's side never carries: a confirmation that fails is undecided
        translated = _Chain.of(spec, steps).translated(spec)
        firm = [r for r in failed if r["tensor"] not in translated and r["kappa"] <= kappa_limit(r["dtype"])]
        if firm:
            stop = _check_stop(spec, steps, firm)
            stop = dataclasses.replace(stop, detail=stop.detail + "; B pulled back through the element differs from "
                                       f"A there (the element's spread {max(element_spread(st['element']) for st in steps):.3g} "
                                       "hides that part of the tensor from g . A against B)")
        elif failed:
            lost = [r for r in failed if not math.isfinite(r["residual"]) and r["tensor"] in head_hyperplane_tensors(spec)]
            on_plane = singular_head_biases(spec, A) if lost else []
            if on_plane:  # the element reaches B; its inverse divides by A's scalar, 0: no file of it re-checks
                raise SymtransError(f"relate: in A, {on_plane[0]}; the element found moves {lost[0]['tensor']} through "
                                    "that hyperplane, and pulled back through it divides by that product, so no file "
                                    "of it can be re-checked: relate cannot decide this pair")
            _raise_if_undecided(back, s.fit)
            worst = max(failed, key=lambda r: r["residual"] / r["tolerance"])
            where = "" if worst["layer"] is None else f" (layer {worst['layer']})"
            why = (f"the element's condition number {worst['kappa']:.3g} is past {kappa_limit(worst['dtype']):.3g}, "
                   "so it buys no slack" if worst["kappa"] > kappa_limit(worst["dtype"]) else
                   "a translation moves it, whose component pulled back reads tensors at B's rounding")
            raise SymtransError(f"relate: the element found reproduces every tensor of B, but B pulled back through it "
                                f"differs from A at {worst['tensor']}{where} by {worst['residual']:.3g}, more than "
                                f"{worst['tolerance']:.3g} ({worst['dtype']}; {why}): relate cannot decide this pair")
    if stop is None:
        _raise_if_slice_unreproduced(residuals + back)
        if s.broken_moves:
            raise SymtransError(f"relate: {s.broken_moves[0]}: neither B's rounding nor a forged move of that factor "
                                "is excluded there, so relate cannot decide this pair")
    return Relation(stop is None, steps, residuals, s.ties, stop, _describe(A), _describe(B),
                    time.perf_counter() - t0, phases, unchecked_tensors(spec, steps, A), outside_tensors(A, B))


def _near_identity(a: dict[str, Any], b: dict[str, Any], precision: Any) -> bool:
    """Whether every tensor of B is within the check's tolerance for the identity (:func:`relation_tolerance` at
    B's storage dtype of it) of A's, relative Frobenius; the smallest tensors first, stopping at the first that is
    not (where B is a moved copy, that is the first one read).

    Examples
    --------
    >>> import torch
    >>> a = {"layers": [{"W_O": [torch.eye(2, dtype=torch.float64)]}], "word": torch.ones(3, 2, dtype=torch.float64)}
    >>> b = {"layers": [{"W_O": [torch.eye(2, dtype=torch.float64) * (1 + 1e-8)]}], "word": a["word"]}
    >>> _near_identity(a, b, lambda n, l: "float32"), _near_identity(a, b, lambda n, l: "float64")
    (True, False)
    """
    other = {(n, l): v for n, l, v in _iter_tensors(b, blocks=True)}
    mine = list(_iter_tensors(a, blocks=True))
    if {(n, l) for n, l, _ in mine} != set(other):
        return False
    size = (lambda v: sum(x.numel() for x in v) if isinstance(v, (list, tuple)) else v.numel())
    for n, l, v in sorted(mine, key=lambda t: size(t[2])):
        if _rel_any(v, other[(n, l)]) > relation_tolerance(precision(n, l))[0]:
            return False
    return True


def slice_failure(residuals: list[dict[str, Any]]) -> str | None:
    """What the check of whole tensors passed but one slice of a tensor does not reproduce (the worst, relative to
    its tolerance; :func:`tensor_residuals` with ``slices``), in words; None where every slice is reproduced.

    Examples
    --------
    >>> r = {"tensor": "word", "layer": None, "residual": 1e-12, "tolerance": 5e-7, "dtype": "float32",
    ...      "slice": {"axis": "vocab", "index": 7, "residual": 0.3, "share": 1e-10}, "slice_ok": False}
    >>> print(slice_failure([r]))
    word, vocab slice 7: off by 0.3 relative to the slice, more than the tolerance 5e-07 (float32), though the whole tensor's residual is 1e-12: that slice holds 1e-10 of the tensor's norm
    """
    bad = [r for r in residuals if r.get("slice_ok") is False]
    if not bad:
        return None
    r = max(bad, key=lambda r: r["slice"]["residual"] / r["slice"].get("tolerance", r["tolerance"]))
    sl = r["slice"]
    where = r["tensor"] + (f" (layer {r['layer']})" if r["layer"] is not None else "")
    if r.get("side") == "A":  # :func:`pulled_back_residuals`
        where += " pulled back (g^-1 . B against A)"
    if sl.get("measure") == "each":  # each entry (or fibre) at its own scale (:func:`worst_each`)
        what = "the fibre, along the axes a map mixes," if sl.get("over") else "entry"
        return (f"{where}, {what} {sl['index']}: off by {sl['residual']:.3g} relative to it, more than the "
                f"tolerance {sl.get('tolerance', r['tolerance']):.3g} ({r['dtype']}), though the whole tensor's "
                "residual is "
                f"{r['residual']:.3g}: each entry (fibre) of B holds its own rounding, a fitted map's error and the "
                "rounding a fitted translation carries in from the tensor it was read from, no more "
                f"(it holds {sl['share']:.3g} of the tensor's norm)")
    if sl.get("measure") == "rms":  # a vector's entries (:func:`worst_entries`)
        return (f"{where}, its entries: off by {sl['residual']:.3g} (root mean square over the entries, each "
                "relative to the larger of its own scale and the typical entry's), more than the tolerance "
                f"{r['tolerance']:.3g} ({r['dtype']}), though the whole tensor's residual is {r['residual']:.3g}: the "
                f"worst, entry {sl['index']}, holds {sl['share']:.3g} of the tensor's norm")
    return (f"{where}, {sl['axis']} slice {sl['index']}: off by {sl['residual']:.3g} relative to the slice, more than "
            f"the tolerance {r['tolerance']:.3g} ({r['dtype']}), though the whole tensor's residual is "
            f"{r['residual']:.3g}: that slice holds {sl['share']:.3g} of the tensor's norm")


def _sides_part_cheaply(spec: GroupSpec, steps: list[dict[str, Any]], residuals: list[dict[str, Any]]
                        ) -> set[tuple[str, int | None]]:
    """The ``(tensor, layer)`` pairs whose A side relate measures where the element moves no tensor by a
    translation: those a map whose condition number passes 1 moves (a dense gauge that is not orthogonal); empty
    where a translation moves some tensor.

    B's side sees a difference a map ``M`` mixes into a fibre up to ``cond(M)`` times more weakly than A's side
    does, so below :func:`kappa_limit` they still part. A random Llama-style checkpoint (seed 3) with one ``W_K``
    entry x(1 + 1000 u), then moved by a random element of G, was called related, and verify refused the file:
    that fibre pulled back was 4.4e-6 off against 3.15e-6. Where only orthogonal and monomial maps move a tensor
    the sides agree (a monomial's spread is :func:`element_spread`'s). Without translations A's side of those
    tensors costs what B's does (on the bundled Gemma 3, its 1.3 GB float64 embedding, moved by a permutation, is
    not pulled back). With translations (LayerNorm's models) it costs several times relate, the rounding each
    translation carries being followed step by step, and it is left to verify there, as before.

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("llama2-7b")
    >>> g = {"factor": "qk-gauge", "element": [{"g": [torch.eye(2, dtype=torch.float64)]}]}
    >>> recs = [{"tensor": "W_Q", "layer": 0, "kappa": 4.0}, {"tensor": "word", "layer": None, "kappa": 1.0}]
    >>> _sides_part_cheaply(spec, [g], recs)
    {('W_Q', 0)}
    >>> shift = {"factor": "key-bias-shift", "element": [{"c": torch.ones(2, dtype=torch.float64)}]}
    >>> _sides_part_cheaply(GroupSpec.from_arch("bert-base"), [g, shift], recs)  # a translation fits something
    set()
    """
    if _Chain.of(spec, steps).translated(spec):
        return set()
    return {(r["tensor"], r["layer"]) for r in residuals if r["kappa"] > 1.0 + KAPPA_UNIT_SLACK}


#: how far past 1 a computed condition number may lie and still be that of an orthogonal map (cond_2 from float64
#: singular values of an orthogonal matrix lies within a few ulps of 1): :func:`_sides_part_cheaply`
KAPPA_UNIT_SLACK = 1e-9


def _raise_if_slice_unreproduced(residuals: list[dict[str, Any]]) -> None:
    """Raise "cannot decide" where every tensor is reproduced but a slice of one is not (:func:`slice_failure`).

    Not a refusal: a translation fitted over the whole tensor, or a dense fit read from its large slices, carries
    their rounding into the small ones, so a slice of a genuine g . A may miss its own rounding there. Not
    related: the tensor's residual cannot vouch for a slice that small beside the rest.
    """
    why = slice_failure(residuals)
    if why is not None:
        raise SymtransError(f"relate: the element found reproduces every tensor of B as a whole, but not {why}: "
                            "relate cannot decide this pair")


def outside_tensors(*models: Any) -> list[str]:
    """The checkpoint keys any of ``models`` holds outside the function symtrans models
    (:attr:`~symtrans.numeric.weights.ModelWeights.outside`), sorted: what relate and verify do not compare.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")  # every floating tensor of the bundled MiniLM is read
    >>> outside_tensors(w), outside_tensors(w, dataclasses.replace(w, outside=("cls.predictions.bias",)))
    ([], ['cls.predictions.bias'])
    """
    return sorted({k for w in models for k in getattr(w, "outside", ())})


def unchecked_tensors(spec: GroupSpec, steps: list[dict[str, Any]], w: Any) -> list[tuple[str, str]]:
    """(factor, tensor) for every tensor a step of ``steps`` acts on (its factor's tag table) that ``w`` does not
    hold: what the element does there no check of the loaded weights sees (an untied output head, ``lm_head``).

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("llama"); spec = GroupSpec.from_arch(w.arch)
    >>> unchecked_tensors(spec, [{"factor": "final-norm-scaling"}, {"factor": "S_H"}], w)
    [('final-norm-scaling', 'lm_head')]
    """
    out: list[tuple[str, str]] = []
    for st in steps:
        for t in spec.factor(st["factor"]).tags:
            if w.tensors.get(t.tensor) is None and (st["factor"], t.tensor) not in out:
                out.append((st["factor"], t.tensor))
    return out


@dataclass(frozen=True)
class _Fit:
    """How much a dense residual map, least-squares fitted on the embedding tables, amplifies B's rounding (and
    every tensor it moves carries it): the tables' condition number ``cond`` times ``noise``, the larger side's
    stored norm over the norm of the part the map is fitted on (projected off what the translations move), since
    each entry is rounded at its stored size. A per-token centring shift 10 times a random element's (the stored
    table 264 times its centred part) made a float32 B = g . A "not related" at ``W_Q``, and at 1000 times at the
    word table, naming LayerNorm's centring as the breaking feature; in float64 a shift 26 times did (its map off
    by 2700 u). It is :attr:`past` what the tolerance allows for where the number passes :data:`KAPPA_MAX` or the
    noise alone passes :data:`ROUNDING_HEADROOM`; a refusal within it times the rounding is then no answer.

    Examples
    --------
    >>> import torch
    >>> X = torch.eye(4, dtype=torch.float64)
    >>> _Fit.of(3.0, (X, X), (X, X)).past  # nothing translated: the condition number alone, within KAPPA_MAX
    False
    >>> f = _Fit.of(3.0, (X, 10 * X), (X, X))  # B's stored table ten times the part the map is fitted on
    >>> round(f.kappa, 6), f.past, f.text()
    (30.0, True, 'an embedding table of condition number 30, past what a tolerance allows for (the table itself 3, times 10: its stored values over the part the map is fitted on)')
    """

    cond: float = 1.0
    noise: float = 1.0

    @classmethod
    def of(cls, cond: float, stored: tuple[Any, Any], fitted: tuple[Any, Any]) -> _Fit:
        """The fit of a map on the tables ``fitted`` (A's, B's), stored as ``stored``, of condition number ``cond``."""
        return cls(cond, max(1.0, *(_fro(x) / max(_fro(y), 1e-300) for x, y in zip(stored, fitted))))

    @property
    def kappa(self) -> float:
        return self.cond * self.noise

    @property
    def past(self) -> bool:
        return math.isfinite(self.kappa) and (self.kappa > KAPPA_MAX or self.noise > ROUNDING_HEADROOM)

    def text(self) -> str:
        """The fit in words, for a "cannot decide" answer."""
        why = f" (the table itself {self.cond:.3g}, times {self.noise:.3g}: its stored values over the part the map " \
            "is fitted on)" if self.noise > 1.01 else ""
        return f"an embedding table of condition number {self.kappa:.3g}, past " + \
            (f"{KAPPA_MAX:g}" if self.kappa > KAPPA_MAX else "what a tolerance allows for") + why


def _raise_if_undecided(residuals: list[dict[str, Any]], fit: _Fit | None = None) -> None:
    """Raise "cannot decide" where every tensor the check failed is within what the element's condition number
    carries (:func:`accepted_tolerance`), that number being past :data:`KAPPA_MAX`: not evidence that B is off
    A's orbit (a head whose value or query block is nearly singular and the canonical form that balances it; a
    rotation conjugating through a gain with an outlier channel). ``fit``: how much a dense residual map's fit
    amplifies B's rounding (:class:`_Fit`), past what the tolerance allows for, likewise."""
    failed = [r for r in residuals if not r["ok"]]
    if not failed:
        return
    by_kappa = all(r["residual"] <= r["undecided_to"] for r in failed)
    fit = fit if fit is not None else _Fit()
    by_fit = fit.past and all(r["residual"] <= max(r["undecided_to"], r["tolerance"] * fit.kappa)
                                           for r in failed)
    if not (by_kappa or by_fit):
        return
    worst = max(failed, key=lambda r: r["residual"] / r["tolerance"])
    if not by_kappa:
        raise SymtransError(f"relate: the residual map was fitted on {fit.text()}, and every tensor of B is reproduced within what "
                            f"that number carries ({worst['tensor']}: {worst['residual']:.3g} against "
                            f"{worst['tolerance']:.3g}): relate cannot decide this pair")
    where = "" if worst["layer"] is None else f" at layer {worst['layer']}"
    limit = kappa_limit(worst["dtype"])
    if worst["kappa"] <= limit:  # within what the solve carried into it from another tensor
        side = " pulled back through the element (g^-1 . B against A)" if worst.get("side") == "A" else ""
        raise SymtransError(f"relate: the element found reproduces every tensor of B within the rounding its solve "
                            f"carries in: {worst['tensor']}{where}{side} differs by {worst['residual']:.3g}, more than its "
                            f"tolerance {worst['tolerance']:.3g} but within the rounding of "
                            f"{worst.get('carried', 'the tensors')}: relate cannot decide this pair")
    raise SymtransError(f"relate: the element found reproduces every tensor of B within what its condition number "
                        f"carries, but that number, {worst['kappa']:.3g}{where}, exceeds {limit:.3g}, beyond which "
                        f"an element buys no slack, and {worst['tensor']} differs by {worst['residual']:.3g}, more "
                        f"than a perfectly conditioned element's {worst['tolerance']:.3g}: relate cannot decide this "
                        "pair")


def _kept_in_group(spec: GroupSpec, A: Any, B: Any, precision: Any, steps: list[dict[str, Any]],
                   residuals: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Stop | None, list[dict[str, Any]]]:
    """relate's element brought onto G (:func:`~symtrans.group.elements.in_group`), as ``verify`` brings a file's.

    A part outside G that cannot be projected (a permutation that scales, a query head moved out of its key/value
    group) stops relate there. Where the projection moved a continuous part by more than the float64 rounding of
    its own construction (:func:`relation_tolerance` at float64, of the part's length), the element as projected
    is applied to A afresh and compared with B: B is related only if that element, one of G's, reproduces it.
    Returns the projected steps, the stop (None: related) and the residuals that decided.
    """
    try:
        kept = in_group(spec, steps)
    except SymtransError as err:
        factor = str(err).split(":", 1)[0]
        return steps, Stop(factor, None, "-", math.inf, 0.0, [], f"the element found is not in G: {err}"), residuals
    if moved_off_group(steps, kept) is None:
        return kept, None, residuals
    from symtrans.group.numeric import model_blocks

    blocks_a = model_blocks(A)
    res = tensor_residuals(apply_steps(spec, blocks_a, kept), model_blocks(B), precision, kept, spec, source=blocks_a,
                           slices=True)
    bad = [r for r in res if not r["ok"]]
    if not bad:
        return kept, None, res
    first = _first_failure(bad)
    name = _last_factor(spec, kept, first["tensor"])
    f = spec.factor(name)
    features = [_feature_line(f, b) for b in f.broken_by if b.present and b.effect in ("shrinks", "breaks")]
    return kept, Stop(name, first["layer"], first["tensor"], first["residual"], first["tolerance"], features,
                      f"{first['dtype']}; the element that reproduces B is not in G, and brought onto G it does "
                      "not reproduce B"), res


def _move_explains(size: float, after: float) -> tuple[bool, float]:
    """Whether a move G lacks (a broken factor's, an activation's scaling) explains a difference of ``size``,
    leaving ``after``: it at least halves it, so the feature that breaks it is named; and the share of the squared
    difference it carries, stated where it does not.

    Examples
    --------
    >>> _move_explains(1.0, 0.5), _move_explains(1.0, 0.9)[0]
    ((True, 0.75), False)
    """
    return after <= size / 2, 1 - (after / size) ** 2 if size > 0 else 0.0


def _feature_line(f: Factor, b: Any) -> str:
    """How a stop names a present feature ``b`` of factor ``f`` that shrinks or breaks it."""
    return f"{b.feature} ({f.name} {b.effect} by it): {b.reason}"


def _first_failure(bad: list[dict[str, Any]]) -> dict[str, Any]:
    """The residual record a stop reports among failing ones: the model-wide tensors first, then by layer, by name."""
    return min(bad, key=lambda r: (-1 if r["layer"] is None else r["layer"], r["tensor"]))


def _solved_from(spec: GroupSpec, phase: str) -> list[Factor]:
    """The factors relate's solve fits in ``phase`` ("heads" or "units") and in the phases after it
    (:data:`PHASES`): those whose element a choice made in ``phase`` can reach (the match's own factor first)."""
    present = {f.name: f for f in spec.factors}
    heads, units = present.get("S_H"), present.get("S_dff")  # as the solve's phases take them (:class:`_Solver`)
    by_phase = {"heads": [heads] if heads else [], "units": [units] if units else [],
                "unit_scalings": with_role(spec, "hidden-scaling"),
                "gauges": with_role(spec, "head-gauge") + with_role(spec, "head-gain-trade"),
                "translations": [present[n] for n in translation_order(spec) if n in present]}
    return [f for p in PHASES[PHASES.index(phase):] for f in by_phase.get(p, [])]


def match_scope(spec: GroupSpec, phase: str, layers: int) -> frozenset[tuple[str, int | None]]:
    """What a wrong match in ``phase`` ("heads", "units") of one layer can change in relate's g . A: pairs
    (tensor, layer offset from the match's layer), offset None for a tensor in every layer and the model tables
    (``layers``: the model's depth, which bounds the offsets).

    From the tag tables alone: the match's factor moves its tensors (offset 0); a factor fitted after it
    (:func:`_solved_from`) whose component is read from, or acts through (``via``), a tensor reached so far moves
    every tensor that component acts on: in the same layer for a per-layer factor, in the layers before and after
    a boundary for a between-layer one (post-LN's bias transfer: the ``prev`` and ``next`` tags), in every layer
    for a model-wide one. Reading a component from all its tensors, not only the one the solve fits it on,
    reaches no less than the solve can (a sound over-count). A refusal at a tensor outside the scope is evidence
    the match did not cause.

    Examples
    --------
    >>> sorted(match_scope(GroupSpec.from_arch("gpt2"), "heads", 12))  # doctest: +NORMALIZE_WHITESPACE
    [('W_K', 0), ('W_O', 0), ('W_Q', 0), ('W_V', 0), ('b_K', 0), ('b_O', 0), ('b_Q', 0), ('b_V', 0), ('ln1_b', 0)]
    >>> sorted(t for t, o in match_scope(GroupSpec.from_arch("bert-base"), "heads", 12) if o == -1)  # a boundary
    ['ln2_b']
    """
    fs = [f for f in _solved_from(spec, phase) if f.tags]
    if not fs:
        return frozenset()
    reached: set[tuple[str, int | None]] = {(t.tensor, 0) for t in fs[0].tags}

    def via_at(t: Any, name: str, o: int | None) -> int | None:  # a next-layer tag reads the closing norm before
        return o - 1 if o is not None and t.scope == "next" and name in BOUNDARY_NORM else o  # (:func:`act`)

    def hit(name: str, o: int | None) -> bool:
        return (name, o) in reached or (name, None) in reached or (o is None and any(n == name for n, _ in reached))

    grew = True
    while grew:
        grew = False
        offsets = [o for _, o in reached if o is not None] or [0]
        for f in fs[1:]:
            comps: dict[str, list[Any]] = {}
            for t in f.tags:
                comps.setdefault(t.component, []).append(t)
            for tags in comps.values():
                if f.scope == "model":  # one element for every layer and table
                    spots = [None]
                else:  # one element per layer (or per boundary: the layer after it)
                    spots = [o for o in range(min(offsets) - 1, max(offsets) + 2) if abs(o) <= layers]

                for o in spots:
                    def at(t: Any, o: int | None = o) -> int | None:
                        return None if o is None or t.scope == "model" else (o - 1 if t.scope == "prev" else o)

                    reads = [(t.tensor, at(t)) for t in tags] + [(v, via_at(t, v, at(t))) for t in tags if t.via
                                                                  for v in t.via.split(",")]
                    if any(hit(n, x) for n, x in reads):
                        new = {(t.tensor, at(t)) for t in tags} - reached
                        if new:
                            reached |= new
                            grew = True
    return frozenset(reached)


def _outside_local(spec: GroupSpec, stop: Stop, bad: list[dict[str, Any]], local: list[tuple[int, str, str]],
                   unresolved: list[str], tensors: set[str], steps: list[dict[str, Any]], layers: int) -> Stop:
    """The stop relate reports given the layers whose heads' or units' match may be wrong (``local``: layer,
    phase, why): a failing tensor of the check (``bad``) that no such match can reach (:func:`match_scope`) is the
    stop; else, where one can reach the stop, ``why`` joins ``unresolved`` (relate cannot decide). A stop at a
    label that is not one of ``tensors`` (a key of the match itself) is within every scope of its layer."""
    scopes = {phase: match_scope(spec, phase, layers) for phase in {p for _, p, _ in local}}

    def reached_by(layer: int | None, tensor: str) -> str | None:
        for l, phase, why in local:
            scope = scopes[phase]
            at = {None if o is None else l + o for _, o in scope}  # the layers the match reaches
            if layer is None:  # a model table: one the match reaches by name, or through a layer outside the model
                hit = (tensor, None) in scope or any(x is not None and not 0 <= x < layers for x in at)
            elif tensor not in tensors:  # a label (the keys of a match): any layer the match reaches
                hit = layer in at or None in at
            else:
                hit = (tensor, layer - l) in scope or (tensor, None) in scope
            if hit:
                return why
        return None

    if bad and all(math.isfinite(r["residual"]) for r in bad):  # a size that is no number decides nothing
        # a failure no wrong match explains: a tensor none reaches, beyond what its layer's condition number
        # carries. A tensor no wrong match reaches has the same residual under every choice, and its tolerance,
        # from the layer's largest condition number (every factor's of the layer, its own among them), is no
        # smaller than one from the factors that act on it alone; past KAPPA_MAX a layer accepts only 8 u, so
        # the residual must also exceed what that number carries (``undecided_to``)
        free = [r for r in bad if reached_by(r["layer"], r["tensor"]) is None and r["residual"] > r["undecided_to"]]
        if free:
            return _check_stop(spec, steps, free)
        # no evidence: the failures a wrong match reaches, and the rest within what their condition number carries
        why = next((w for r in bad if (w := reached_by(r["layer"], r["tensor"])) is not None), None)
        if why is not None:
            unresolved.append(why)
        return stop
    why = reached_by(stop.layer, stop.tensor)
    if why is not None:
        unresolved.append(why)
    return stop


def _check_stop(spec: GroupSpec, steps: list[dict[str, Any]], bad: list[dict[str, Any]]) -> Stop:
    """The stop of a check whose failing residual records are ``bad`` (:func:`_first_failure`), after ``steps``."""
    first = _first_failure(bad)
    return Stop(_last_factor(spec, steps, first["tensor"]), first["layer"], first["tensor"], first["residual"],
                first["tolerance"], [], f"{first['dtype']}; after every factor's element was solved, this tensor "
                "differs from B by more than B's storage precision allows")


def moved_off_group(steps: list[dict[str, Any]], kept: list[dict[str, Any]]) -> str | None:
    """The first factor whose element ``kept`` (``steps`` brought onto G by
    :func:`~symtrans.group.elements.in_group`) moved beyond float64 rounding, or None where every one stayed.

    Examples
    --------
    >>> import torch
    >>> Q = torch.eye(2, dtype=torch.float64)
    >>> moved_off_group([{"factor": "f", "element": {"Q": Q}}], [{"factor": "f", "element": {"Q": Q * (1 + 1e-16)}}])
    >>> moved_off_group([{"factor": "f", "element": {"Q": Q}}], [{"factor": "f", "element": {"Q": 2 * Q}}])
    'f'
    """
    return next((s["factor"] for s, k in zip(steps, kept) if not _within_rounding(s["element"], k["element"])), None)


def _within_rounding(x: Any, y: Any) -> bool:
    """Whether ``y`` (``x`` brought onto G) is ``x`` up to float64 rounding, part by part (``y``'s parts)."""
    from symtrans.group.numeric import MonomialMatrix

    if x is y:  # a part the projection kept as it was (a translation, a gauge without rotary positions)
        return True
    if isinstance(x, list) != isinstance(y, list) and len(x if isinstance(x, list) else y) == 1:
        x, y = (x[0], y) if isinstance(x, list) else (x, y[0])  # one head's block, as G holds it (in_factor)
    if isinstance(y, dict):
        return all(_within_rounding(x[k], v) for k, v in y.items())
    if isinstance(y, list):
        return all(_within_rounding(a, b) for a, b in zip(x, y))
    if isinstance(y, MonomialMatrix):
        return bool((x.perm == y.perm).all()) and _within_rounding(x.vals, y.vals)
    if hasattr(y, "shape"):
        n = int(y.shape[0]) if y.ndim == 2 and y.shape[0] == y.shape[1] else 1
        return _rel(y, x) <= relation_tolerance("float64", length=n)[0]
    return x == y


# --------------------------------------------------------------------------- the element file
def _flatten(element: Any, prefix: str, store: dict[str, Any]) -> Any:
    """The element as JSON, its tensors copied into ``store`` under names (one tensor reused in several places, as
    one matrix for every layer, is stored once per place)."""
    torch = _torch()
    from symtrans.group.numeric import MonomialMatrix

    if isinstance(element, MonomialMatrix):
        store[prefix + ".vals"] = element.vals.to(torch.float64).clone()
        return {"monomial": element.perm.tolist(), "vals": prefix + ".vals"}
    if isinstance(element, dict):
        return {k: _flatten(v, f"{prefix}.{k}", store) for k, v in element.items()}
    if isinstance(element, (list, tuple)):
        if all(isinstance(x, int) for x in element):
            return {"ints": list(element)}
        return {"list": [_flatten(v, f"{prefix}.{i}", store) for i, v in enumerate(element)]}
    if hasattr(element, "shape"):  # a copy: safetensors refuses two names on one storage (one matrix reused)
        store[prefix] = element.detach().to(torch.float64).clone(memory_format=torch.contiguous_format)
        return {"tensor": prefix}
    raise SymtransError(f"cannot store element part of type {type(element).__name__}")


def _unflatten(obj: Any, store: dict[str, Any]) -> Any:
    from symtrans.group.numeric import MonomialMatrix

    if not isinstance(obj, dict):
        raise ValueError("malformed element")
    if "monomial" in obj:
        perm = obj["monomial"]
        vals = store[obj["vals"]]
        if sorted(perm) != list(range(len(perm))) or vals.numel() != len(perm):
            raise ValueError("a monomial element is not a permutation of its size")
        return MonomialMatrix(perm, vals)
    if "tensor" in obj:
        return store[obj["tensor"]]
    if "ints" in obj:
        if not all(type(i) is int for i in obj["ints"]):
            raise ValueError("malformed permutation")
        return list(obj["ints"])
    if "list" in obj:
        return [_unflatten(v, store) for v in obj["list"]]
    return {k: _unflatten(v, store) for k, v in obj.items()}


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({k: v for k, v in body.items() if k != "digest"}, sort_keys=True,
                                     separators=(",", ":")).encode()).hexdigest()


def check_relation_out(path: Any, option: str = "--out") -> Path:
    """Refuse, before any work, a place :func:`write_relation` cannot write a relation file; return its absolute path.

    The file and its tensors beside it (``PATH.safetensors``) must both be writable (:func:`check_output_file`: a
    name, no directory in the way, a place where a file can be written), in a directory that exists.

    Examples
    --------
    >>> check_relation_out("")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --out '': expected a file name
    >>> check_relation_out("/no/such/dir/g.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --out /no/such/dir/g.json: the directory /no/such/dir does not exist
    """
    from symtrans.outdir import check_output_file
    from symtrans.validate import terminal_safe

    p = check_output_file(path, option, "relation file")
    if not p.parent.is_dir():
        raise SymtransError(f"{option} {terminal_safe(str(p))}: the directory {terminal_safe(str(p.parent))} does not "
                            "exist")
    check_output_file(str(p) + ".safetensors", option, "element's tensors")
    return p


def write_relation(rel: Relation, path: str | Path) -> Path:
    """Write the element found as ``PATH`` (JSON) and ``PATH.safetensors`` (its tensors); return PATH.

    Examples
    --------
    >>> write_relation(Relation(False, [], [], [], Stop("S_H", 0, "W_Q", 1.0, 0.0, [])), "/tmp/x.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: no element to write: B is not g . A (not related: S_H, layer 0, tensor W_Q: unexplained part 1 (relative Frobenius; tolerance 0); broken by: none of G's features: the difference is not in the orbit of A)
    """
    if not rel.related:
        raise SymtransError(f"no element to write: B is not g . A ({rel.stop.line() if rel.stop else ''})")
    p = check_relation_out(path)
    store: dict[str, Any] = {}
    steps = [{"factor": s["factor"], "element": _flatten(s["element"], f"s{i}", store)} for i, s in enumerate(rel.steps)]
    from safetensors.torch import save as save_bytes

    from symtrans.outdir import write_file

    side = p.with_name(p.name + ".safetensors")
    write_file(p.parent, side.name, save_bytes(store), "element tensors")
    body = {"schema": RELATION_SCHEMA, "a": rel.a, "b": rel.b, "steps": steps, "tensors": side.name,
            "tensors_sha256": hashlib.sha256(side.read_bytes()).hexdigest(),
            "residuals": rel.residuals, "ties": rel.ties}
    body["digest"] = _digest(body)
    write_file(p.parent, p.name, (json.dumps(body, indent=1) + "\n").encode(), "relation file")
    return p


def _model_beside(ref: Any, path: str | Path) -> Any:
    """A relation file's model ``ref`` as :func:`check_relation` loads it: a relative path that names a checkpoint
    beside the file (``path``) is read there, wherever verify runs; anything else (an absolute path, as
    :func:`relate` writes a local checkpoint's, a hub id, ``default``) as it is.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "a").mkdir()
    >>> (d / "default").mkdir()  # a bundled model's name is that model's, whatever lies beside the file
    >>> [_model_beside(x, d / "g.json") for x in ("a", "org/name", "default")] == [str(d / "a"), "org/name", "default"]
    True
    """
    from symtrans.validate import BUNDLED_MODELS

    if isinstance(ref, str) and ref and ref not in BUNDLED_MODELS and not Path(ref).is_absolute():
        beside = Path(path).parent / ref
        if beside.exists():
            return str(beside)
    return ref


def check_relation(data: dict[str, Any], path: str | Path) -> tuple[bool, str]:
    """Re-check a relation file: load A and B, apply its element to A through the tag tables, compare with B.

    Nothing the file claims is trusted: the models are re-read (their weights hashes must be the file's),
    the element brought onto G (:func:`~symtrans.group.elements.in_group`: a factor the architecture breaks,
    a permutation that scales, a query head moved out of its key/value group are refused; a gauge's
    inverse is recomputed, a rotation, a rotary commutant or a gain scaling projected) and re-applied,
    every tensor's residual and tolerance recomputed from B's storage precision and the element's own
    condition numbers. Returns (valid, one line); never raises.

    Examples
    --------
    >>> check_relation({"schema": RELATION_SCHEMA}, "x.json")
    (False, 'malformed relation file: missing a, b, steps, tensors, tensors_sha256, digest')
    """
    try:
        need = ("a", "b", "steps", "tensors", "tensors_sha256", "digest")
        missing = [k for k in need if k not in data]
        if missing:
            return False, "malformed relation file: missing " + ", ".join(missing)
        if data["digest"] != _digest(data):
            return False, "digest mismatch: the relation file was altered after it was written"
        from safetensors.torch import load_file

        from symtrans.group.numeric import model_blocks

        side = Path(path).with_name(str(data["tensors"]))
        if "/" in str(data["tensors"]) or not side.is_file():
            return False, f"the element's tensors {data['tensors']!r} are missing beside the file"
        if hashlib.sha256(side.read_bytes()).hexdigest() != data["tensors_sha256"]:
            return False, "the element's tensors differ from the file's hash"
        store = load_file(str(side))
        A, B = (_load(_model_beside(data[which]["model"], path)) for which in ("a", "b"))
        for which, w in (("a", A), ("b", B)):
            if w.weights_hash != data[which]["weights_hash"]:
                return False, f"model {which.upper()} at {data[which]['model']} is not the one related (weights hash)"
        _same_shape(A, B)
        spec = GroupSpec.from_arch(A.arch)
        steps = [{"factor": s["factor"], "element": _unflatten(s["element"], store)} for s in data["steps"]]
        # an unknown or broken factor, or an element outside its factor's group, is refused; a continuous part
        # is projected onto the group first, so what is compared with B below is the action of an element of G
        steps = in_group(spec, steps)
        blocks_a, blocks_b = model_blocks(A), model_blocks(B)
        # the same element in the order relate's solve reads it: a translation listed before a linear step the
        # solve fits first is accounted in B's frame, as relate's own file has it (one element, one verdict)
        steps = in_solve_order(spec, steps, blocks_a)
        moved = apply_steps(spec, blocks_a, steps)
        res = tensor_residuals(moved, blocks_b, _precision(B), steps, spec, source=blocks_a, slices=True)
        # and from A's side: what g shrinks beside the rest of a tensor is measured at A's scale
        back = pulled_back_residuals(spec, blocks_a, blocks_b, _precision(B), steps)
        bad = [r for r in res + back if not r["ok"]]
        if bad:
            r = bad[0]
            where = r["tensor"] + (f" (layer {r['layer']})" if r["layer"] is not None else "")
            limit = kappa_limit(r["dtype"])
            return False, ((f"g^-1 . B differs from A at {where}" if r.get("side") == "A" else
                            f"g . A differs from B at {where}")
                           + f": residual {r['residual']:.3g} > tolerance {r['tolerance']:.3g} ({r['dtype']}"
                           + (f"; the element's condition number {r['kappa']:.3g} exceeds {limit:.3g}"
                              if r["kappa"] > limit else "") + ")")
        for side, recs in (("g . A reproduces every tensor of B", res), ("g^-1 . B reproduces every tensor of A", back)):
            slice_bad = slice_failure(recs)
            if slice_bad is not None:  # a tensor's residual cannot vouch for a slice that small beside the rest
                return False, f"{side} as a whole, but not {slice_bad}"
        worst = max(res, key=lambda r: r["residual"] / r["tolerance"])
        unchecked = "".join(f"; not checked: {t} (moved by {f}; not among the loaded weights)"
                            for f, t in unchecked_tensors(spec, steps, A))
        outside = outside_tensors(A, B)
        if outside:
            unchecked += f"; not compared: {', '.join(outside)} (outside the modelled function)"
        return True, (f"g . A reproduces B in all {len(res)} tensors, and g^-1 . B reproduces A ({len(steps)} "
                      "factor steps); worst "
                      f"{worst['tensor']}" + (f" (layer {worst['layer']})" if worst["layer"] is not None else "")
                      + f" residual {worst['residual']:.3g} <= tolerance {worst['tolerance']:.3g} ({worst['dtype']})"
                      + unchecked)
    except SymtransError as err:
        return False, str(err)
    except Exception as err:  # noqa: BLE001 - fail closed
        return False, f"malformed relation file ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"


def element_spread(element: Any) -> float:
    """How far an element's linear components stretch one part of a tensor against another: the largest singular
    value over the smallest, over all of a component's matrices at once (one per head counts as one block-diagonal
    map; a monomial matrix by its values). 1 for a permutation; translations and index lists count 1.

    :func:`element_cond` counts a monomial matrix as 1, rightly for rounding (each entry keeps its relative
    rounding), but a spread hides a part of a tensor beside the rest from a relative Frobenius residual: a value
    gauge of 1e-9 on one head makes that head's W_O rows 1e9 times the others'. Past :func:`kappa_limit` relate
    therefore also checks from A's side (:func:`pulled_back_residuals`).

    Examples
    --------
    >>> import torch
    >>> eye = torch.eye(2, dtype=torch.float64)
    >>> round(element_spread({"g": [eye, 1e-9 * eye]})), element_spread([{"g": [eye, 2 * eye]}])
    (1000000000, 2.0)
    """
    from symtrans.group.numeric import MonomialMatrix

    torch = _torch()
    lo, hi = math.inf, 0.0
    dense = []
    for v in (element if isinstance(element, list) else [element]):
        for x in v.values():
            for m in (x if isinstance(x, (list, tuple)) else [x]):
                if isinstance(m, MonomialMatrix):
                    a = m.vals.abs()
                    lo, hi = min(lo, float(a.min())), max(hi, float(a.max()))
                elif _square(m):
                    dense.append(m)
    for group in _same_shape_groups(dense):  # the dense squares of one shape: one batched SVD
        a = torch.linalg.svdvals(torch.stack([dense[i] for i in group]))
        lo, hi = min(lo, float(a.min())), max(hi, float(a.max()))
    return hi / lo if hi > 0 and lo > 0 else (1.0 if hi == 0 else math.inf)


def element_cond(x: Any) -> float:
    """The condition number a component of an element brings into a tolerance: 1 for a monomial matrix (a
    permutation times a diagonal, stored or dense), whose action moves each entry by one multiplication and so
    keeps every entry's relative rounding, whatever the spread of its scalings; ``cond_2`` of any other square
    matrix; 1 for anything else (a translation, a vector).

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.numeric import MonomialMatrix
    >>> element_cond(MonomialMatrix([1, 0], torch.tensor([1e-3, 1e3], dtype=torch.float64)))
    1.0
    >>> element_cond(torch.diag(torch.tensor([1e-3, 1e3], dtype=torch.float64)))
    1.0
    >>> round(element_cond(torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)), 6)  # (1 + sqrt 5) ** 2 / 4
    2.618034
    """
    from symtrans.group.numeric import MonomialMatrix

    if isinstance(x, MonomialMatrix) or not _square(x) or _monomial(x):
        return 1.0
    return _cond(x)


def element_length(x: Any) -> float:
    """The length of the sums of products by which a component of an element acts: ``k`` for a square ``k x k``
    matrix that is not monomial (a rotation too: perfectly conditioned, but each entry a sum of ``k`` products),
    1 for a permutation with scalings or anything else (:func:`relation_tolerance`'s ``length``).

    Examples
    --------
    >>> import torch
    >>> element_length(torch.eye(3, dtype=torch.float64)), element_length(torch.ones(3, 3, dtype=torch.float64))
    (1.0, 3.0)
    """
    return float(x.shape[0]) if _square(x) and not _monomial(x) else 1.0


def _is_monomial_matrix(x: Any) -> bool:
    """Whether ``x`` is a stored :class:`~symtrans.group.numeric.MonomialMatrix`."""
    from symtrans.group.numeric import MonomialMatrix

    return isinstance(x, MonomialMatrix)


def _square(x: Any) -> bool:
    """A dense square matrix larger than 1 x 1 (a :class:`MonomialMatrix` is not dense)."""
    return hasattr(x, "ndim") and x.ndim == 2 and x.shape[0] == x.shape[1] and x.shape[0] > 1


def _monomial(x: Any) -> bool:
    """One non-zero per row and column: a permutation with scalings, stored or dense."""
    from symtrans.group.numeric import MonomialMatrix

    if isinstance(x, MonomialMatrix):
        return True
    nz = x != 0
    return bool((nz.sum(0) == 1).all()) and bool((nz.sum(1) == 1).all())


def _element_kappa(steps: list[dict[str, Any]], L: int, measure: Any = None, *, spec: GroupSpec | None = None,
                   source: dict[str, Any] | None = None, composed: bool = True) -> list[dict[int | None, float]]:
    """Per step, the condition number of its element on each layer (:func:`element_cond`; ``None``: a model-wide
    element), recomputed from the element itself; with ``measure``, that function of each component instead
    (:func:`element_length`). :func:`tensor_residuals` gives each tensor those of the steps that act on it
    (:meth:`_Chain.inherit`, :meth:`_Chain.on`).

    With ``spec`` and A's tensors ``source`` (block form), also what each step brings by conjugation through the
    gains (:func:`conjugation_kappa`), the gains carried through the steps before it (a scaling or a permutation
    of the gains changes their spread before a rotation conjugates through them).

    With ``spec``, a linear factor whose steps :func:`_composed_steps` multiplies into one counts that product's
    condition number at each of its steps, not each step's own: one element, fitted once. A claim of a value gauge
    of condition number 99 and then its inverse (the identity) widened every ``W_V`` and ``W_O`` tolerance about
    50 times, and verify accepted a B with every entry x(1 +- 2e-5) (its hidden state 1.6e-5 off); a rotation and
    its transpose between a norm scaling of spread 10^0.6 and its inverse did the same on every weight matrix.
    Lengths (``measure``) stay per step: the float64 sums of each step's products are real, and so is their
    amplification: ``composed=False`` gives each step's own, what :func:`relation_tolerance`'s ``arithmetic``
    reads."""
    per_step: list[dict[int | None, float]] = []
    cond = measure or element_cond
    gains = _gains_of(spec, source) if measure is None and spec is not None and source is not None else None
    names = _conjugating_gains(spec) if gains is not None else set()
    products = {} if measure is not None or spec is None or not composed else \
        {st["factor"]: st["element"] for st in _composed_steps(spec, steps) if not any(st is x for x in steps)}
    # a linear factor in several steps that do not multiply into one (another step between them moves its tensors:
    # a head permutation that carries a gauge on head 0 to head 1, where its inverse undoes it) buys no condition
    # number at all: what they compose to is not read here, and each step's own is what a claim chooses
    if measure is None and spec is not None and composed:
        products.update({n: None for n in _repeated_factors(spec, steps, linear=True) if n not in products})

    for s in steps:
        out: dict[int | None, float] = {}
        el = products.get(s["factor"], s["element"])
        if el is None:  # (above) nothing read: each layer 1
            pass
        elif isinstance(el, list):
            for l, e in enumerate(el):
                k = max([cond(v) for v in e.values() if not isinstance(v, list)]
                        + [_largest([m for m in v if hasattr(m, "shape")], cond) for v in e.values()
                           if isinstance(v, list)] + [1.0])
                out[l] = max(out.get(l, 1.0), k)
        else:
            k = max([cond(v) for v in el.values() if not isinstance(v, list)] + [1.0])
            out[None] = max(out.get(None, 1.0), k)
        if gains is not None:
            for l, k in ({} if el is None else conjugation_kappa(spec, s["factor"], el, gains)).items():
                out[l] = max(out.get(l, 1.0), k)
            tags = tuple(t for t in spec.factor(s["factor"]).tags if t.tensor in names)
            if tags:  # the gains as this step leaves them: its own element
                gains = act(spec, gains, s["factor"], s["element"], tags=tags)
        per_step.append(out)
    return per_step


def _read_through(spec: GroupSpec, factor: str) -> set[str]:
    """The tensors a step of ``factor`` may read as it acts, besides those it moves: its tags' vias (a gain, a
    bias), and a boundary's closing norm (the layer before's, or the embedding norm).

    Examples
    --------
    >>> sorted(_read_through(GroupSpec.from_arch("bert-base"), "ffn-input-hyperplane"))
    ['emb_ln_b', 'emb_ln_w', 'ln1_b', 'ln1_w', 'ln2_b', 'ln2_w']
    """
    vias = {n for t in spec.factor(factor).tags if t.via for n in t.via.split(",")}
    return vias | set(BOUNDARY_NORM) | set(EMBEDDING_NORM.values())


def _reads(spec: GroupSpec, factor: str) -> set[str]:
    """The tensors a step of ``factor`` acts on or reads (its tags' tensors and the tensors they act through)."""
    return {n for t in spec.factor(factor).tags for n in (t.tensor, *(t.via.split(",") if t.via else ()))}


def solve_rank(spec: GroupSpec) -> dict[str, int]:
    """Where relate's solve fits each factor: its place in :data:`PHASES` (the residual map, the gain scalings, the
    heads, the units, the unit scalings, the gauges, then the translations in their order); a factor the solve
    fits last (rows no input reads) after all of them.

    Examples
    --------
    >>> r = solve_rank(GroupSpec.from_arch("bert-base"))
    >>> r["residual-permutation"] < r["S_H"] < r["S_dff"] < r["qk-gauge"] < r["key-bias-shift"]
    True
    """
    rank: dict[str, int] = {}
    for f in spec.factors:
        if f.scope == "model" and any(t.component == "Q" for t in f.tags) or f in with_role(spec, "residual"):
            rank[f.name] = 0
    for f in with_role(spec, "norm-scaling"):
        rank.setdefault(f.name, 1)
    for i, f in enumerate(_solved_from(spec, "heads")):
        rank.setdefault(f.name, 2 + i)
    last = 2 + len(rank) + len(spec.factors)
    return {f.name: rank.get(f.name, last) for f in spec.factors}


def in_solve_order(spec: GroupSpec, steps: list[dict[str, Any]], source: dict[str, Any]) -> list[dict[str, Any]]:
    """A claim's steps as relate's solve orders the same element: each translation moved after the linear steps
    listed after it that the solve fits before it (:func:`solve_rank`), its components carried through them.

    The tolerances read a translation in the frame its step meets: :func:`translation_allowance` follows a tag only
    in B's frame, where no linear step between it and B moves its pivot or the gain it reads unevenly, and relate
    writes every translation after the linear steps (B's frame). A claim in G's own order lists the residual
    rotation last, after every translation: the true element of a float32 GPT-NeoX (a final-norm scaling, the final
    norm's bias transfer, a residual rotation) was refused at ``lm_head`` pulled back (a vocab slice up to 1.9
    times its tolerance), and the same element with the rotation first was verified. One element, one verdict:
    ``T_c`` then ``L`` is ``L`` then ``T_c'``, ``c'`` read off what ``T_c`` then ``L`` adds to the tensor each
    component is read from, as relate reads it (:data:`_COMPONENT_READ`; a component read from no such tensor as
    it is). A swap is made only where ``T_c'`` then reproduces ``T_c`` then ``L`` on every tensor ``T`` moves
    within float64's rounding of ``L``'s products (:func:`relation_tolerance` at float64, with ``L``'s condition
    number and length), in the frame the two steps meet (``source``: A, block form); elsewhere the translation
    stays where the claim put it. Relate's own files are returned as they are: their translations already follow
    every linear step.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> w = tiny_decoder("gpt2"); spec = GroupSpec.from_arch(dataclasses.replace(w.arch, tied_lm_head=False))
    >>> A = model_blocks(w); A["lm_head"] = A["word"].T.clone()
    >>> D = torch.linspace(0.5, 2.0, w.arch.d_model, dtype=torch.float64)
    >>> t = 0.1 * torch.ones(1, w.arch.d_model, dtype=torch.float64)
    >>> steps = [{"factor": "final-norm-bias-transfer", "element": {"t": t}},
    ...          {"factor": "final-norm-scaling", "element": {"D": torch.diag(D)}}]
    >>> out = in_solve_order(spec, steps, A)
    >>> [s["factor"] for s in out], bool(torch.allclose(out[1]["element"]["t"], t * D))
    (['final-norm-scaling', 'final-norm-bias-transfer'], True)
    >>> _rel(apply_steps(spec, A, out)["lm_head"], apply_steps(spec, A, steps)["lm_head"]) < 1e-14
    True
    """
    rank = solve_rank(spec)
    out = list(steps)
    L = len(source["layers"])
    for i in range(len(out) - 1, -1, -1):  # the last translation first: each moves right until one stays
        t = out[i]
        if linear_factor(spec, t["factor"]):
            continue
        ahead = []  # the linear steps right after it that the solve fits before it
        for st in out[i + 1:]:
            if not linear_factor(spec, st["factor"]) or rank[st["factor"]] >= rank[t["factor"]]:
                break
            ahead.append(st)
        if not ahead:
            continue
        # the frame the swaps meet: the tensors t reads, and what the steps before it and those it passes read
        # through on them, each step acting through its tags on them alone
        names = set(_reads(spec, t["factor"]))
        while more := {n for st in out[:i] + ahead for x in spec.factor(st["factor"]).tags
                       if x.tensor in names and x.via for n in x.via.split(",")} - names:
            names |= more
        frame: dict[str, Any] = {"layers": [{n: lp[n] for n in names if n in lp} for lp in source["layers"]],
                                 **{n: source[n] for n in names if n in source}}
        try:
            for st in out[:i]:
                tags = tuple(x for x in spec.factor(st["factor"]).tags if x.tensor in names)
                frame = act(spec, frame, st["factor"], st["element"], tags=tags) if tags else frame
        except (SymtransError, KeyError, IndexError, RuntimeError, TypeError, ValueError):
            continue  # a frame this does not follow: the claim's order kept
        for pos in range(i, i + len(ahead)):
            s = out[pos + 1]
            got = _commuted(spec, out[pos], s, frame, names, L)
            if got is None:
                break
            out[pos], out[pos + 1] = s, got[0]
            frame = got[1]
    return out


#: how a translation's component is read off what its step adds to the tensor a tag of this kind moves (``d``;
#: ``gain``: the tag's via, as the frame holds it), as relate's fit reads it (:data:`_FIT_BOUND`'s kinds): a
#: difference itself; along the all-ones direction its mean over that axis; along ``1/gamma`` its least-squares
#: coefficient
_COMPONENT_READ: dict[str, Callable[..., Any]] = {
    "translate": lambda d, gain: d,
    "translate_neg": lambda d, gain: -d,
    "translate_ones": lambda d, gain: d.mean(-1, keepdim=True),
    "hyperplane_weight": lambda d, gain: (1 / gain).reshape(1, -1) @ d / (1 / gain).square().sum(),
}


def _commuted(spec: GroupSpec, t: dict[str, Any], s: dict[str, Any], frame: dict[str, Any], names: set[str],
              L: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The translation step ``t`` as it follows the linear step ``s`` (``t`` then ``s`` is ``s`` then it), both met
    in ``frame`` (the tensors ``names``, block form), and the frame after ``s``; None where the components read off
    (:func:`in_solve_order`) do not reproduce ``t`` then ``s`` within float64's rounding of ``s``, or a tag is not
    the plain per-layer or model-wide one this follows."""
    f, g = spec.factor(t["factor"]), spec.factor(s["factor"])
    acts_t = _acts_on(spec, f.name)
    on = tuple(y for y in g.tags if y.tensor in names)  # s on what t reads (and what they read through)
    try:
        after = act(spec, frame, g.name, s["element"], tags=on) if on else frame
        if not acts_t & {y.tensor for y in on} and not acts_t & set(_reads(spec, g.name)):
            return t, after  # s moves nothing t reads, t nothing s reads: they commute
        if any(x.scope not in ("layer", "model") for x in f.tags) or elements_of(spec, f.name).place is not None:
            return None  # a boundary's or a placed component: not followed
        el = t["element"]
        each = isinstance(el, list)
        one = act(spec, act(spec, frame, f.name, el), g.name, s["element"], tags=on)
        new = [dict(e) for e in (el if each else [el])]
        read: set[str] = set()
        for x in f.tags:  # each component off the first tensor a readable tag of it moves
            if x.component in read or x.how not in _COMPONENT_READ:
                continue
            if (x.scope == "layer") != each:
                return None
            read.add(x.component)
            for k, e in enumerate(new):
                here, base = (one["layers"][k], after["layers"][k]) if each else (one, after)
                gain = base[x.via.split(",")[0]] if x.via else None
                e[x.component] = _map_blocks(lambda y, z: _COMPONENT_READ[x.how](y - z, gain), here[x.tensor],
                                             base[x.tensor])
        swapped = {"factor": f.name, "element": new if each else new[0]}
        other = act(spec, after, f.name, swapped["element"])
    except (SymtransError, KeyError, IndexError, RuntimeError, TypeError, ValueError):
        return None
    # within float64's rounding of the two routes: s's products (its condition number, through the gains it
    # conjugates, and length) and t's sums along the residual width (c W, a read along 1/gamma: d_model products)
    kappa = max([1.0] + list(_element_kappa([s], L, spec=spec, source=frame)[0].values()))
    length = max([1.0] + list(_element_kappa([s], L, measure=element_length)[0].values()))
    width = spec.arch.d_model if isinstance(spec.arch.d_model, int) else 1
    tol = relation_tolerance("float64", kappa, 1, max(int(length), width))[0]
    theirs = {(n, l): v for n, l, v in _iter_tensors(other, blocks=True)}
    for n, l, v in _iter_tensors(one, blocks=True):
        if n in acts_t and ((n, l) not in theirs or _rel_any(theirs[(n, l)], v) > tol):
            return None
    return swapped, after


def _acts_on(spec: GroupSpec, factor: str) -> frozenset[str]:
    """The tensors ``factor`` moves: its tags', and for a between-layer factor's closing-norm tag the embedding
    norm's too (it plays that norm before layer 0: a BERT attention bias transfer moves ``emb_ln_b``).

    Examples
    --------
    >>> sorted(_acts_on(GroupSpec.from_arch("bert-base"), "attention-bias-transfer"))
    ['b_K', 'b_O', 'b_Q', 'b_V', 'emb_ln_b', 'ln2_b']
    """
    tags = spec.factor(factor).tags
    return frozenset(t.tensor for t in tags) | {boundary_norm(t.tensor, 0)[0] for t in tags
                                                 if t.scope == "prev" and t.tensor in BOUNDARY_NORM}


@dataclass(frozen=True)
class _Chain:
    """An element's steps as the tolerances read them, built once per element (:meth:`of`): the tensors each step
    acts on and reads (:func:`_reads`), whether it fits anything (:func:`_inert_step`), and the order relate's solve
    fits them in (:func:`solve_rank`, then the file's order)."""

    factors: tuple[str, ...]
    acts: tuple[frozenset[str], ...]
    reads: tuple[frozenset[str], ...]
    inert: tuple[bool, ...]
    order: tuple[int, ...]

    @classmethod
    def of(cls, spec: GroupSpec, steps: list[dict[str, Any]]) -> _Chain:
        rank = solve_rank(spec)
        # a translation factor whose steps sum to 0 (c, then -c) fits nothing either: named, it carried a gauge's
        # condition number, 99, from W_O into W_out and b_out
        cancelled = {n for n in _repeated_factors(spec, steps, linear=False)
                     if (net := _net_component(spec, steps, n)) is not None and _is_identity(net)}
        return cls(tuple(s["factor"] for s in steps),
                   tuple(_acts_on(spec, s["factor"]) for s in steps),
                   tuple(frozenset(_reads(spec, s["factor"])) for s in steps),
                   # nothing fitted: no error of its own, none carried on
                   tuple(_inert_step(s) or s["factor"] in cancelled for s in steps),
                   tuple(sorted(range(len(steps)), key=lambda i: (rank[steps[i]["factor"]], i))))

    def inherit(self, per_step: list[dict[int | None, float]]) -> list[dict[int | None, float]]:
        """Each step's condition numbers (per layer; ``None``: model-wide) with those of every step relate's solve
        fits before it that moved a tensor it acts on or reads: a fit that reads a tensor another fit moved carries
        that fit's error, amplified, into every tensor it moves. Taken in the solve's order, not the file's, so a
        step listed after an ill-conditioned one inherits nothing it would not inherit in relate's own solve: a
        gauge on one head widens no tolerance of a W_in no fit after it reaches.

        Examples
        --------
        >>> spec = GroupSpec.from_arch("bert-base")
        >>> steps = [{"factor": f, "element": {"x": 1.0}} for f in ("qk-gauge", "key-bias-shift",
        ...                                                        "residual-permutation")]
        >>> _Chain.of(spec, steps).inherit([{0: 50.0}, {0: 1.0}, {None: 3.0}])  # the residual map is fitted first
        [{0: 50.0, None: 3.0}, {0: 50.0, None: 3.0}, {None: 3.0}]
        """
        out: list[dict[int | None, float]] = [{} if self.inert[i] else dict(k) for i, k in enumerate(per_step)]
        for pos, i in enumerate(self.order):
            for j in self.order[:pos]:
                if not self.inert[i] and not self.inert[j] and self.acts[j] & self.reads[i]:
                    for l, v in out[j].items():
                        out[i][l] = max(out[i].get(l, 1.0), v)
        return out

    def on(self, name: str, l: int | None, per_step: list[dict[int | None, float]]) -> float:
        """The largest condition number (or length) at layer ``l`` of the steps that act on tensor ``name``."""
        return max([1.0] + [max(k.get(l, 1.0), k.get(None, 1.0)) for k, t in zip(per_step, self.acts) if name in t])

    def fitted(self, name: str) -> int:
        """How many of the element's factors fit something and act on tensor ``name`` (relation_tolerance's ``m``)."""
        return len({f for f, t, x in zip(self.factors, self.acts, self.inert) if name in t and not x})

    def translated(self, spec: GroupSpec) -> set[str]:
        """The tensors a step that fits something moves by a translation (a factor not linear in its components)."""
        return {n for f, t, x in zip(self.factors, self.acts, self.inert) if not x and not linear_factor(spec, f)
                for n in t}

    def translating(self, spec: GroupSpec, name: str) -> int:
        """How many factors that fit something move tensor ``name`` by a translation (counted as :meth:`fitted`
        counts: per factor, not per step)."""
        return len({f for f, t, x in zip(self.factors, self.acts, self.inert)
                    if name in t and not x and not linear_factor(spec, f)})


def _exact_component(x: Any) -> bool:
    """A component whose action rounds nothing: a permutation (indices, a monomial matrix of +-1) or a list of them."""
    from symtrans.group.numeric import MonomialMatrix

    if isinstance(x, MonomialMatrix):
        return bool((x.vals.abs() == 1).all())
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, int) for i in x) or all(_exact_component(v) for v in x)
    return False


def _inert_step(step: dict[str, Any]) -> bool:
    """A step that fits nothing: a permutation (:func:`_exact_step`) or the identity of its factor (a translation by
    0). It counts among no tensor's factors and passes no condition number on (:meth:`_Chain.inherit`).

    Examples
    --------
    >>> import torch
    >>> _inert_step({"factor": "key-bias-shift", "element": [{"u": torch.zeros(1, 4)}]})
    True
    """
    return _exact_step(step) or _is_identity(step["element"])


def _exact_step(step: dict[str, Any]) -> bool:
    """A step whose element only permutes (with signs): it carries no fitted error and rounds nothing, so it does
    not count among the factors a tolerance allows for (:func:`relation_tolerance`'s ``m``).

    Examples
    --------
    >>> import torch
    >>> _exact_step({"factor": "S_H", "element": [{"pi": [1, 0], "kappa": [1, 0]}]})
    True
    >>> _exact_step({"factor": "qk-gauge", "element": [{"g": [torch.eye(2, dtype=torch.float64)]}]})
    False
    """
    el = step["element"]
    return all(_exact_component(v) for e in (el if isinstance(el, list) else [el]) for v in e.values())


def _largest(mats: list[Any], measure: Any) -> float:
    """``max(measure(m) for m in mats)`` (at least 1): :func:`element_cond` or :func:`element_length` of a list of
    per-head components at once where they are dense squares of one shape (one batched SVD for a layer's gauges,
    not one per head), else one by one.

    Examples
    --------
    >>> import torch
    >>> mats = [torch.eye(3, dtype=torch.float64), torch.tensor([[2.0, 1.0, 0], [0, 1, 0], [0, 0, 1]]).double()]
    >>> _largest(mats, element_cond) == max(element_cond(m) for m in mats), _largest(mats, element_length)
    (True, 3.0)
    """
    from symtrans.group.numeric import MonomialMatrix

    torch = _torch()
    dense, rest = [], []
    for m in mats:
        (rest if isinstance(m, MonomialMatrix) or not _square(m) else dense).append(m)
    out = max([measure(m) for m in rest] + [1.0])
    if len(dense) < 2 or measure not in (element_cond, element_length) \
            or any(m.shape != dense[0].shape or m.dtype != dense[0].dtype for m in dense):
        return max([out] + [measure(m) for m in dense])
    X = torch.stack(dense)
    nz = X != 0
    mono = (nz.sum(1) == 1).all(-1) & (nz.sum(2) == 1).all(-1)  # :func:`_monomial`, each at once
    if bool(mono.all()):
        return out
    if measure is element_length:
        return max(out, float(X.shape[-1]))
    sv = torch.linalg.svdvals(X[~mono])  # descending: :func:`_cond` of each
    lo, hi = sv[:, -1], sv[:, 0]
    conds = torch.where(lo > 0, hi / torch.where(lo > 0, lo, 1), torch.full_like(hi, math.inf))
    return max(out, float(conds.max()))


def _conjugating_gains(spec: GroupSpec) -> set[str]:
    """The gains G's conjugations act through (``via`` of every :data:`CONJUGATION_KINDS` tag)."""
    return {t.via for f in spec.factors for t in f.tags if t.how in CONJUGATION_KINDS and t.via}


def _gains_of(spec: GroupSpec, blocks: dict[str, Any]) -> dict[str, Any]:
    """The gains of ``blocks`` (block form) that G's conjugations act through, as parameters :func:`act` moves."""
    names = _conjugating_gains(spec)
    return {"layers": [{n: lp[n] for n in names if lp.get(n) is not None} for lp in blocks["layers"]],
            **{n: blocks[n] for n in names if blocks.get(n) is not None}}


def conjugation_kappa(spec: GroupSpec, factor: str, element: Any, params: dict[str, Any]) -> dict[int | None, float]:
    """The condition number ``factor``'s element brings, by layer (None: the model's tensors), to the tensors it
    moves by conjugation through a norm gain (``diag(1/g) Q diag(g)``, a residual rotation with unfolded RMSNorm
    gains): ``cond(Q) spread(g)^2`` with ``spread = max|g| / min|g|``, the bound of ``cond(D^-1 Q D)`` that a gain
    with one outlier channel reaches; 1 for a monomial ``Q`` (the product stays monomial) and where no tag
    conjugates. ``params``: what the element acts on (its gains are read).

    Uncounted, a Llama whose ``ln1_w`` has one channel at 1e-3 of the others, moved by a rotation (condition
    number about 1e6) and written in float32, was "not related" from the moved copy back to itself at the
    query/key gauge (6.9e-6 against 4.8e-7): the moved copy's rounding, carried back through the conjugation.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> from symtrans.group.numeric import model_blocks
    >>> w = tiny_decoder("llama"); spec = GroupSpec.from_arch(w.arch)
    >>> gain = torch.ones(w.arch.d_model, dtype=torch.float64); gain[5] = 1e-3
    >>> blocks = model_blocks(w); blocks["layers"][0]["ln1_w"] = gain
    >>> Q = torch.linalg.qr(torch.randn(32, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64))[0]
    >>> k = conjugation_kappa(spec, "residual-rotation", {"Q": Q}, blocks)
    >>> measured = float(torch.linalg.cond(torch.diag(1 / gain) @ Q @ torch.diag(gain)))  # the matrix itself
    >>> measured <= k[0] < 4 * measured, k[0] > 1e5
    (True, True)
    >>> conjugation_kappa(spec, "residual-rotation", {"Q": torch.eye(32, dtype=torch.float64)}, blocks)
    {}
    """
    torch = _torch()
    f = spec.factor(factor)
    # one (component, gain, scope) per conjugation: the rotation conjugates W_Q, W_K and W_V through one gain
    through = {(t.component, t.via, t.scope) for t in f.tags if t.how in CONJUGATION_KINDS and t.via}
    if not through or isinstance(element, list):
        return {}
    conds: dict[str, float | None] = {}  # cond(Q) once per component (an SVD of d_model x d_model)
    out: dict[int | None, float] = {}
    for component, via, scope in through:
        if component not in conds:
            Q = element.get(component)
            conds[component] = None if Q is None or _monomial(Q) else _cond(Q)
        cq = conds[component]
        if cq is None:
            continue
        where = [(l, lp.get(via)) for l, lp in enumerate(params.get("layers", []))] if scope == "layer" \
            else [(None, params.get(via))]
        for l, g in where:
            if g is None:
                continue
            a = g.reshape(-1).abs().to(torch.float64)
            spread = float(a.max() / a.min()) if bool((a > 0).all()) else math.inf
            out[l] = max(out.get(l, 1.0), cq * spread * spread)
    return out


def random_element(spec: GroupSpec, layers: int, seed: int, *, factors: list[str] | None = None,
                   dtype: Any = None, rotary_pairs: str = "halves") -> list[dict[str, Any]]:
    """A random exact element of G as steps (one random element of every factor with a tag table, in G's order).

    Per-layer factors get one element per layer, between-layer factors one per boundary
    (``boundaries`` on the model scope), model factors one; broken factors are skipped (their
    elements are not symmetries). Sampled by :func:`symtrans.group.numeric.sample_element`.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> a = load_model("default")
    >>> steps = random_element(GroupSpec.from_arch(a.arch), a.n_layers, 0)
    >>> [s["factor"] for s in steps][:4]
    ['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift']
    """
    import torch

    from symtrans.group.numeric import sample_element

    dtype = dtype or torch.float64
    gen = torch.Generator().manual_seed(seed)
    out = []
    for f in spec.factors:
        if not f.tags or f.status == "broken" or f.scope == "data" or (factors and f.name not in factors):
            continue
        if f.scope == "layer":
            el = [sample_element(spec, f.name, gen, dtype, rotary_pairs=rotary_pairs)[0] for _ in range(layers)]
        elif f.scope == "stack":
            count = int(spec.boundaries("model"))
            el = [sample_element(spec, f.name, gen, dtype, rotary_pairs=rotary_pairs)[0] for _ in range(count)]
        else:
            el = sample_element(spec, f.name, gen, dtype, rotary_pairs=rotary_pairs)[0]
        out.append({"factor": f.name, "element": el})
    return out
