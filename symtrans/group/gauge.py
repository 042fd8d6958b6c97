"""Random exact elements of G on a real checkpoint, applied through the tag tables: the gauge check's engine.

A *gauge element* is one element of every factor of G that acts on the
model's weights (per-layer factors: one element per layer; between-layer
factors: one per boundary, the embedding norm first; model-scope factors:
one), drawn with :func:`symtrans.group.numeric.sample_element` and applied
one factor after the other with :func:`symtrans.group.numeric.transform_weights`
(which acts through :func:`symtrans.group.spec.act`, the tag table): the one
action engine of ``group --verify``, reused, never re-implemented here.

The factors drawn are those present on the architecture and not broken
(``exact`` or ``shrunk``: a shrunk factor is sampled in its shrunk form, e.g.
signed permutations of the residual stream); the data-side factor ``S_n``
acts on inputs, not weights, and is left out. The moved weights are rounded to
the precision each tensor was stored in
(:func:`symtrans.numeric.weights.storage_precision`), so ``g . W`` is an honest
checkpoint of its storage dtype, as a processed copy written to disk would be.

:func:`centring_element` is the particular element that TransformerLens's
``centre_writing_weights`` applies (every writer into a LayerNorm made to sum
to zero along the residual axis): one part per factor whose
:data:`~symtrans.group.elements.ELEMENTS` entry has a ``centre`` construction
(``centring-shift`` for the layers' writers, ``embedding-centring-shift`` for
the embedding tables); :func:`can_centre` says whether the architecture has one.

This module computes; it never counts a verdict (the comparison of verdicts
lives in :mod:`symtrans.report.gauge`).

Examples
--------
>>> from symtrans.numeric import load_model
>>> w = load_model("default")
>>> gauge_factors(GroupSpec.from_arch(w.arch))[:4]
['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift']
"""

from __future__ import annotations

import dataclasses
from typing import Any

from symtrans.errors import SymtransError
from symtrans.group.elements import elements_of
from symtrans.group.spec import GroupSpec

__all__ = ["gauge_factors", "GaugeElement", "sample_gauge", "apply_gauge", "apply_gauge_head", "centring_factors", "can_centre",
           "centring_element", "centre_writers", "processed_weights"]


def gauge_factors(spec: GroupSpec) -> list[str]:
    """The factors of G that act on this architecture's weights: present (a tag table) and not broken.

    Examples
    --------
    >>> "ffn-scaling" in gauge_factors(GroupSpec.from_arch("bert-base"))  # broken by GeLU
    False
    >>> "residual-rotation" in gauge_factors(GroupSpec.from_arch("llama2-7b"))
    True
    """
    return [f.name for f in spec.factors if f.tags and f.scope != "data" and f.status != "broken"]


@dataclasses.dataclass
class GaugeElement:
    """One element of G: factor name -> its element (one per layer or boundary where the factor says so).

    ``kappa`` is the largest condition number among the sampled parts (1 for
    permutations and translations).

    Examples
    --------
    >>> GaugeElement({"S_H": [{"pi": [1, 0]}]}, 1.0).factors
    ['S_H']
    """

    parts: dict[str, Any]
    kappa: float
    label: str = "random"

    @property
    def factors(self) -> list[str]:
        """The factors this element has a part in, in G's order."""
        return list(self.parts)


def sample_gauge(weights: Any, seed: int = 0, factors: list[str] | None = None,
                 exclude: tuple[str, ...] = ()) -> GaugeElement:
    """A random exact element of G for ``weights``' architecture: every factor in ``factors`` (default: all).

    ``exclude`` leaves factors out (the gauge check's restricted runs: the
    element of the factors a reading does not declare).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> g = sample_gauge(load_model("default"), seed=1)
    >>> "centring-shift" in g.factors and "residual-permutation" in g.factors, len(g.parts["S_H"])
    (True, 6)
    """
    import torch

    from symtrans.group.numeric import sample_element

    spec = GroupSpec.from_arch(weights.arch)
    present = gauge_factors(spec)
    names = present if factors is None else factors
    unknown = [n for n in names if n not in present]
    if unknown:
        raise SymtransError(f"not a factor of G acting on {weights.arch.name}'s weights: {', '.join(unknown)}")
    gen = torch.Generator().manual_seed(10_007 * (seed + 1))
    parts: dict[str, Any] = {}
    kappa = 1.0
    L = int(weights.n_layers)
    stack = int(spec.boundaries("model"))
    for name in names:
        if name in exclude:
            continue
        f = spec.factor(name)
        # real checkpoints follow transformers' rotate_half convention (as group --verify does)
        if f.scope in ("layer", "stack"):
            drawn = [sample_element(spec, name, gen, torch.float64, rotary_pairs="halves")
                     for _ in range(L if f.scope == "layer" else stack)]
            parts[name] = [d[0] for d in drawn]
            kappa = max([kappa] + [d[1] for d in drawn])
        else:
            el, k = sample_element(spec, name, gen, torch.float64, rotary_pairs="halves")
            parts[name] = el
            kappa = max(kappa, k)
    return GaugeElement(parts, kappa, f"random (seed {seed})")


def centring_factors(spec: GroupSpec) -> list[Any]:
    """The factors acting on the weights whose element centres writers (an :data:`~symtrans.group.elements.ELEMENTS`
    entry with ``centre``), in the spec's order.

    Examples
    --------
    >>> [f.name for f in centring_factors(GroupSpec.from_arch("bert-base"))]
    ['centring-shift', 'embedding-centring-shift']
    >>> centring_factors(GroupSpec.from_arch("llama2-7b"))
    []
    """
    return [spec.factor(n) for n in gauge_factors(spec) if elements_of(spec, n).centre is not None]


def can_centre(spec: GroupSpec) -> bool:
    """Whether a LayerNorm reads every writer of the layers: a per-layer factor of :func:`centring_factors`.

    Examples
    --------
    >>> can_centre(GroupSpec.from_arch("bert-base")), can_centre(GroupSpec.from_arch("llama2-7b"))
    (True, False)
    """
    return any(f.scope == "layer" for f in centring_factors(spec))


def centring_element(weights: Any) -> GaugeElement:
    """TransformerLens's ``centre_writing_weights`` as an element of G: every writer into a LayerNorm centred.

    Per layer, the element of ``centring-shift`` with ``w_O^h = -W_O^h 1 / d``,
    ``w_out = -W_out 1 / d``, ``c_O = -mean(b_O)``, ``c_out = -mean(b_out)``, and
    of ``embedding-centring-shift`` with each table row's mean removed: after it
    every row of every writer sums to zero along the residual axis.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> c = apply_gauge(w, centring_element(w), round_to_storage=False)
    >>> float(c.W_O.sum(-1).abs().max()) < 1e-12, float(w.W_O.sum(-1).abs().max()) > 1e-3
    (True, True)
    """
    spec = GroupSpec.from_arch(weights.arch)
    if not can_centre(spec):
        raise SymtransError(f"{weights.arch.name} has no centring shift (no LayerNorm reads every writer): "
                            "nothing to centre")
    parts: dict[str, Any] = {f.name: elements_of(spec, f.name).centre(spec, f.name, weights)  # type: ignore[misc]
                             for f in centring_factors(spec)}
    return GaugeElement(parts, 1.0, "centring of the writers (TransformerLens centre_writing_weights)")


def centre_writers(weights: Any) -> Any:
    """``weights`` with every writer into a LayerNorm centred (:func:`centring_element`), rounded to storage.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> float(centre_writers(w).W_out.sum(-1).abs().max()) < 1e-5
    True
    """
    return apply_gauge(weights, centring_element(weights))


def apply_gauge(weights: Any, element: GaugeElement, *, round_to_storage: bool = True) -> Any:
    """``element . weights``: each factor's part applied through the tag table, then rounded to storage precision.

    An untied output head the weights hold (``lm_head``) is moved with them; the element's image of an
    identity head, which any comparison of outputs needs (a base-model checkpoint holds no head), is returned
    by :func:`apply_gauge_head`.

    The result keeps the checkpoint's per-tensor storage dtypes (so rank
    decisions are made at the same precision as on ``weights``) and gets its
    own weights hash. ``round_to_storage=False`` keeps the float64 values.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> moved = apply_gauge(w, sample_gauge(w, seed=0, factors=["S_H"]))
    >>> moved.weights_hash != w.weights_hash, moved.storage_dtypes == w.storage_dtypes
    (True, True)
    """
    return apply_gauge_head(weights, element, round_to_storage=round_to_storage)[0]


def apply_gauge_head(weights: Any, element: GaugeElement, *, round_to_storage: bool = True) -> tuple[Any, Any]:
    """:func:`apply_gauge`, and the element's image of an identity output head (None without an untied head).

    The element sends an untied head ``W`` to ``M W``
    (:func:`symtrans.group.numeric.transform_with_head`; a head the weights
    hold is moved with them), and the logits are unchanged when the moved
    model's last hidden state ``h'`` satisfies ``h' M = h``, whatever ``W``.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("llama")
    >>> moved, head = apply_gauge_head(w, sample_gauge(w, seed=0, factors=["final-norm-scaling"]))
    >>> tuple(head.shape), apply_gauge_head(w, sample_gauge(w, seed=0, factors=["S_H"]))[1].equal(head)
    ((32, 32), False)
    """
    import hashlib

    from symtrans.group.numeric import transform_with_head
    from symtrans.numeric.weights import storage_precision

    spec = GroupSpec.from_arch(weights.arch)
    w, head = transform_with_head(weights, spec, list(element.parts.items()), "gauge")
    tensors = dict(w.tensors)
    if round_to_storage:
        for name, value in tensors.items():
            if value is None or not hasattr(value, "dtype") or not value.is_floating_point():
                continue
            per_layer = name in weights.storage_dtypes and isinstance(weights.storage_dtypes[name], (list, tuple))
            if per_layer:
                rows = [_round(value[i], storage_precision(weights, name, i)[0]) for i in range(value.shape[0])]
                import torch

                tensors[name] = torch.stack(rows)
            else:
                tensors[name] = _round(value, storage_precision(weights, name)[0])
    h = hashlib.sha256(f"{weights.weights_hash}:gauge:{element.label}:{sorted(element.parts)}".encode()).hexdigest()
    return dataclasses.replace(weights, tensors=tensors, weights_hash=h), head


def processed_weights(weights: Any) -> list[str]:
    """What a weight-processing library (TransformerLens) visibly did to these weights: one sentence per finding.

    * writers centred (``centre_writing_weights``, an element of G's
      centring shift): every row of every W_O^h and W_out sums to zero along the
      residual axis, up to the rounding of its storage dtype (``|sum_j w_ij| <=
      2 u sum_j |w_ij|``, ``u`` its unit roundoff: rounding each entry and the
      float64 sum); a trained checkpoint's row sums are decades larger;
    * norms folded (``fold_ln``): every norm gain exactly 1 and every norm bias exactly 0.

    An empty list: nothing detected (the weights are read as stored either way;
    the gauge check shows which verdicts a processing step can move). The
    factors looked for are G's as modelled (``strict=False``: a model whose G is
    only partly modelled, such as an eps-free norm's under ``--eps 0``, is read
    for the factors that are).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> processed_weights(w)
    []
    >>> processed_weights(centre_writers(w))[0][:40]
    'writers centred along the all-ones row ('
    >>> import dataclasses  # the eps-free LayerNorm (--eps 0): G not fully modelled, the centring shift still is
    >>> processed_weights(dataclasses.replace(centre_writers(w), arch=dataclasses.replace(w.arch, ln_eps=0.0)))[0][:21]
    'writers centred along'
    """
    import torch

    from symtrans.precision import smallest_normal, unit_roundoff
    from symtrans.numeric.weights import storage_precision

    out = []
    spec = GroupSpec.from_arch(weights.arch, strict=False)
    if can_centre(spec):
        worst = 0.0
        for name in ("W_O", "W_out"):
            u = unit_roundoff(storage_precision(weights, name)[0])
            # one layer at a time: W.abs() of the whole stack was a float64 copy of it (805 MB of W_out at
            # BERT-large size, the report's memory peak there)
            for W in weights.tensors[name]:
                W = W.to(torch.float64)
                ratio = W.sum(-1).abs() / (2 * u * W.abs().sum(-1)).clamp_min(smallest_normal("float64"))
                worst = max(worst, float(ratio.max()))
        if worst <= 1.0:
            out.append("writers centred along the all-ones row (every row of W_O and W_out sums to zero at "
                       "storage precision, as TransformerLens's centre_writing_weights leaves them): an element of "
                       "G's centring shift, the same function; verdicts about the stored W_O (thm-7.3/wo) see the "
                       "centred matrix")
    gains = [t for t in ("ln1_w", "ln2_w", "emb_ln_w", "final_ln_w") if weights.tensors.get(t) is not None]
    biases = [t for t in ("ln1_b", "ln2_b", "emb_ln_b", "final_ln_b") if weights.tensors.get(t) is not None]
    if gains and all(bool((weights.tensors[t] == 1).all()) for t in gains) and \
            all(bool((weights.tensors[t] == 0).all()) for t in biases):
        out.append("norms folded: every norm gain is exactly 1 and every bias exactly 0 (TransformerLens's fold_ln "
                   "moves them into the readers)")
    return out


def _round(t: Any, dtype: str) -> Any:
    from symtrans.precision import torch_dtype

    return t.to(torch_dtype(dtype)).to(t.dtype)
