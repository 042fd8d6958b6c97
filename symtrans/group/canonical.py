"""A canonical form modulo G: a gauge-fixed checkpoint, the same function, equal for every point of an orbit.

:func:`canonical` computes an element g* of G from A and applies it through :func:`symtrans.group.spec.act`
(so canonical(A) = g* . A is on A's orbit: ``relate(A, canonical(A))`` finds an element). Each factor is
fixed by a rule that reads only G-invariant data, in the order of :mod:`symtrans.group.relate`:

* residual map: signed permutations sort the residual coordinates by the norms of the (translation-free)
  embedding table's columns, the global sign by its third moment; rotations (RMSNorm with an untied head)
  take the table's principal axes, each axis's sign by its third moment;
* gain scalings: every scalable norm gain becomes 1 (folded into its readers); a gain of exactly 0 stays 0
  and the channel's row of the W_V W_O or W_in W_out key is fixed instead (the live rows' RMS norm, largest
  entry positive);
* translations: every bias transfer moves the norm bias to 0 (but the final LayerNorm's bias an untied head
  absorbs, to u/|u|^2 with u = 1/gamma: that action is undefined at <beta, u> = 0), every reader hyperplane
  projects its weight off 1/gamma, key and value bias shifts set b_K, b_V to 0, centring shifts remove the row
  means, the embedding translations and centring shifts centre the tables; a bias they leave 0 up to the rounding
  of its stored value is written as exactly 0 (where only the storage's rounding makes it 0, it is reported);
* heads sorted by ``|W_V W_O|_F``, then ``|W_Q W_K^T|_F``; FFN units by ``|W_in[:, j]| |W_out[j]|``
  (then the columns' and rows' fourth moments, and the columns no unit scaling of G moves, GELU's ``W_in``
  or a gate's, by their norms and signed projections); unit scalings normalise ``|W_in[:, j]| = 1`` (sign of
  the largest entry positive where the scaling may be negative), or ``|W_out[j]| = 1`` for a dead unit, whose
  ``W_in`` column is 0 up to the rounding of what the translations moved (a reading G does not move: such
  columns, rows and head blocks are keyed as 0, and written as exactly 0 where their own rounding is all they hold;
  where only the storage's rounding makes them 0, it is reported);
* per-head gauges: from the SVD of the invariant products, W_Q W_K^T = U S V^T gives
  W_Q* = U S^(1/2), W_K* = V S^(1/2) (signs: the largest entry of each u positive), and W_V W_O likewise.

What stays ambiguous is reported (:attr:`Canonical.ambiguities`): exact ties between head or unit keys
(any order of the tied ones is canonical), singular values too close to fix their vectors, and the factors
not fixed (e.g. the rotary commutant of the query/key gauge, rotations of a LayerNorm model).

:func:`orbit_distance` compares the canonical forms of two checkpoints tensor by tensor: since each
canonical form lies on its model's orbit, ``|can(A) - can(B)|_F`` is an upper bound of the distance
between the two orbits (the infimum over g, h in G of ``|g.A - h.B|_F``).

Examples
--------
>>> from symtrans.numeric import load_model
>>> c = canonical(load_model("default"))
>>> [s["factor"] for s in c.steps][:3]
['residual-permutation', 'embedding-translation', 'embedding-centring-shift']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from symtrans.errors import SymtransError
from symtrans.group.elements import (equal_pairs, in_group, pair_signed_rms, translation_order, values_rule,
                                     with_role)
from symtrans.group.spec import GroupSpec
from symtrans.numeric.linalg import matmul

__all__ = ["Canonical", "canonical", "orbit_distance"]


def _lead_tied(X: Any, dim: int, tie: float) -> Any:
    """Per slice of ``X`` along ``dim``: whether its two entries of largest magnitude are equal within ``tie``
    (relative to the largest), so that the sign read off its largest entry is not fixed by the data.

    Examples
    --------
    >>> import torch
    >>> _lead_tied(torch.tensor([[0.5, 0.1], [-0.5, 0.9]]), 0, 1e-6).tolist()
    [True, False]
    """
    if X.shape[dim] < 2:
        return X.abs().amax(dim) < 0  # all False: one entry
    top2 = X.abs().topk(2, dim=dim).values
    first, second = top2.select(dim, 0), top2.select(dim, 1)
    return (first - second <= tie * first) & (first > 0)


def _third_moment_tie(tie: float, n: int) -> float:
    """How small a third moment ``sum x_i^3`` of ``n`` values, relative to ``sum |x_i|^3``, is 0 as far as their
    rounding can tell: each value's relative rounding (at most ``tie``) moves the sum by terms of random sign, about
    ``tie / sqrt(n)`` of it, while a table's third moment is typically ``1 / sqrt(n)`` of it. ``tie`` alone (8 u at
    bfloat16: 0.031) would call most axes of a 32,000-row table sign-free.

    Examples
    --------
    >>> _third_moment_tie(1e-6, 10_000)
    1e-08
    """
    return tie / math.sqrt(max(n, 1))


@dataclass
class Canonical:
    """A gauge-fixed copy of a model: its weights, the element g* with canonical = g* . A, what stays ambiguous.

    Examples
    --------
    >>> Canonical(None, [], ["S_H layer 0: heads 1, 2 tie"]).ambiguities
    ['S_H layer 0: heads 1, 2 tie']
    """

    weights: Any
    steps: list[dict[str, Any]]
    ambiguities: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # CPU seconds per phase, in order, then "weights"

    @property
    def outside(self) -> tuple[str, ...]:
        """Checkpoint tensors outside the function symtrans models (a pre-training head beside a BERT), which the
        form leaves as A's: where it moves the last hidden state (a residual permutation), what reads them there no
        longer gives A's output.

        Examples
        --------
        >>> from symtrans.numeric import load_model
        >>> canonical(load_model("default")).outside  # every floating tensor of the bundled MiniLM is modelled
        ()
        """
        return tuple(getattr(self.weights, "outside", ()))


class _Canon:
    def __init__(self, spec: GroupSpec, cur: dict[str, Any], tie: float, noise: float = 0.0,
                 precision: Any = None) -> None:
        from symtrans.group.relate import _Solver

        self.s = _Solver(spec, cur, cur, lambda n, l: "float64")
        self.spec, self.tie = spec, tie
        # the keys' own rounding, relative (half the tie's floor, relation_tolerance's 8 u: 4 u, two stored norms'
        # rounding with headroom): a gap within it of the tie may fall on either side of it (:func:`_lex_order`)
        self.noise = noise
        # the storage dtype of each tensor (name, layer): the rounding a part that G sends to 0 keeps (:meth:`zero`)
        self.precision = precision or (lambda n, l: "float64")
        # per layer, the squared norms of the FFN units' columns and rows and of the heads' blocks as they were
        # before the translations (:meth:`keep_stored`), in the current order of the units and heads
        self.stored: dict[tuple[str, int], Any] = {}
        self.amb: list[str] = []
        # per (tensor, layer), the parts 0 up to their own rounding (:meth:`zero`, whole=False), at their places in
        # the form: written as exactly 0 with the weights (:meth:`write_zeros`)
        self.zeroed: dict[tuple[str, int], Any] = {}
        # per (bias, layer) a translation moves, its squared norm as it was stored (:meth:`keep_stored`): what the
        # translations leave of it is 0 up to the rounding of that (:meth:`bias_zeros`)
        self.stored_biases: dict[tuple[str, int], Any] = {}
        a = spec.arch
        self.group = int(a.H) // int(a.H_kv)

    @property
    def cur(self) -> dict[str, Any]:
        return self.s.cur

    def keep_stored(self) -> None:
        """Record the parts' squared norms before the translations move them (:attr:`stored`): each FFN unit's
        columns of ``W_in`` and ``W_gate`` and its row of ``W_out``, and each head's block of ``W_Q``, ``W_K``,
        ``W_V`` and ``W_O`` along the per-head gauge's axis (heads x d_k: a column of the first three, a row of
        ``W_O``; a rotary plane is two of them), and each bias a translation moves, whole (:attr:`stored_biases`). What
        the translations leave of a part that is 0 on the orbit is the rounding of these."""
        import torch

        for l, lp in enumerate(self.cur["layers"]):
            for name, dim in (("W_in", 0), ("W_gate", 0), ("W_out", 1)):
                x = lp.get(name)
                if isinstance(x, torch.Tensor) and x.dim() == 2:
                    self.stored[(name, l)] = (x * x).sum(dim)
            for name in ("W_Q", "W_K", "W_V", "W_O"):
                x = lp.get(name)
                if isinstance(x, list) and x:
                    self.stored[(name, l)] = torch.stack([(b * b).sum(1 if name == "W_O" else 0) for b in x])
        moved = {t.tensor for name in translation_order(self.spec, canonical=True) if name in self.s.present
                 for t in self.s.present[name].tags if t.tensor.startswith("b_") and t.scope != "model"}
        for l, lp in enumerate(self.cur["layers"]):
            for name in sorted(moved):
                if lp.get(name) is not None:
                    self.stored_biases[(name, l)] = _sum_squares(lp[name])

    def stored_groups(self, tensor: str, l: int, groups: int) -> Any:
        """The recorded squared norms of head tensor ``tensor`` in layer ``l`` per group of consecutive blocks
        (a key/value head's query heads), or None."""
        x = self.stored.get((tensor, l))
        return None if x is None else x.sum(1).reshape(groups, -1).sum(1)

    def carry_stored(self, l: int, names: tuple[str, ...], order: list[int]) -> None:
        """Move the recorded norms of ``names`` in layer ``l`` with a permutation (new part i: old ``order[i]``)."""
        for name in names:
            if (name, l) in self.stored:
                self.stored[(name, l)] = self.stored[(name, l)][list(order)]

    def zero(self, tensor: str, l: int, sq: Any, length: int, stored: Any = None, *,
             whole: bool = True) -> tuple[Any, Any]:
        """Which parts of ``tensor`` in layer ``l`` (squared norms ``sq`` of what the translations left: FFN columns
        or rows, a head group's blocks, a rotary plane) are 0 up to their rounding, and which of those the storage
        alone makes 0 (``unsure``).

        0: relate's cut (:func:`~symtrans.group.relate.zero_cuts`, at the tensor's storage; ``length``: the sums'
        length) against the parts' squared norms as they were stored (``stored``; by default :attr:`stored`'s
        FFN columns or rows, :meth:`keep_stored`; where nothing was recorded, the parts as they are). A decision
        that G does not move, up to rounding: a unit scaling or a per-head gauge moves a part and its stored value
        alike (``whole=False``: the parts' own rounding alone, :func:`~symtrans.group.relate.zero_cuts`; those the
        form writes as 0, :meth:`write_zeros`). A cut against the layer's largest part did: a unit whose column was 3e-7 of the largest was 0 in A and live in g . A (g scaling it by 10),
        and the two forms normalised it by different rules, 99% apart with nothing reported.

        Unsure: 0 at the storage's cut but not at float64's (the same cut at
        :func:`~symtrans.group.relate.null_level`'s arithmetic level). A part that a translation of g . A dwarfs
        is known only to the storage's rounding of that translation: within it, it may be a live part of A (where
        A, stored as it is, reads it live), and the two forms then differ there. The callers report those; at
        float64 storage there are none.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("llama"); c = _Canon(GroupSpec.from_arch(w.arch), model_blocks(w), 1e-6)
        >>> c.stored[("W_in", 0)] = torch.tensor([1.0, 1.0, 1e-12], dtype=torch.float64)
        >>> [x.tolist() for x in c.zero("W_in", 0, torch.tensor([1e-32, 1.0, 1e-12], dtype=torch.float64), 8)]
        [[True, False, False], [False, False, False]]
        >>> c.precision = lambda n, l: "float32"  # a part 1e-8 of its stored value: 0 within float32, not float64
        >>> [x.tolist() for x in c.zero("W_in", 0, torch.tensor([1e-32, 1e-16, 1e-12], dtype=torch.float64), 8)]
        [[True, True, False], [False, True, False]]
        """
        import torch

        from symtrans.group.relate import zero_cuts

        if stored is None:
            stored = self.stored.get((tensor, l))
        if stored is None or stored.shape != sq.shape:
            stored = sq
        norms, stored = sq.clamp_min(0).sqrt(), stored.clamp_min(0).sqrt()
        zero = norms <= zero_cuts(stored, self.precision(tensor, l), length, whole=whole)
        if not whole:  # an overflowed norm (inf against inf) tells nothing of what the part is made of
            zero &= torch.isfinite(norms)
        return zero, zero & (norms > zero_cuts(stored, "float64", length, whole=whole))

    def head_zero(self, tensor: str, l: int, *, whole: bool = True) -> Any:
        """Per block of head tensor ``tensor`` in layer ``l`` (a query head's ``W_Q^h`` or ``W_O^h``, a key/value
        head's ``W_K`` or ``W_V`` block): whether it is 0 up to its rounding (:meth:`zero`, against its stored norm;
        the ones only the storage makes 0 are reported by :meth:`gauges` and :meth:`plane_zero`)."""
        import torch

        blocks = self.cur["layers"][l][tensor]
        sq = torch.stack([(b * b).sum() for b in blocks])
        return self.zero(tensor, l, sq, int(blocks[0].shape[0]), self.stored_groups(tensor, l, len(blocks)),
                         whole=whole)[0]

    def write_zeros(self) -> None:
        """Write the parts the form read as 0 by their own rounding (:attr:`zeroed`: FFN units' columns, ``W_out``'s
        rows, heads' blocks, biases (:meth:`bias_zeros`); :meth:`zero` with ``whole=False``) as exactly 0.

        What the translations leave of a part G sends to 0 is the float64 rounding of what they removed (1e-14 of
        the layer), or the storage's (reported by :meth:`zero`'s callers); the form keys it as 0, and is written as
        it read it. Left as it was, that rounding is the whole part of a form read again: canonical(canonical(g .
        A)) of a layer whose W_in is 0 keyed its units by that rounding (their stored value, nothing larger to cut
        against) and ordered them by it, 1.4 from canonical(A) at W_out with nothing reported. The parts are the
        form's own rounding, so the form stays on A's orbit (as relate checks it).

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("llama"); c = _Canon(GroupSpec.from_arch(w.arch), model_blocks(w), 1e-6)
        >>> c.zeroed[("W_out", 0)] = torch.arange(w.tensors["W_out"].shape[1]) == 2
        >>> c.write_zeros()
        >>> [float(x.abs().sum()) == 0 for x in c.cur["layers"][0]["W_out"][1:3]]
        [False, True]
        """
        import torch

        if not self.zeroed:
            return
        layers = list(self.cur["layers"])
        for (t, l), mask in self.zeroed.items():
            x = layers[l].get(t)
            if x is None or not bool(mask.any()):
                continue
            if isinstance(x, list):  # heads' blocks
                y = [torch.zeros_like(b) if z else b for b, z in zip(x, mask.tolist())]
            else:
                y = torch.where(mask[:, None] if t == "W_out" else mask[None, :], 0.0, x)
            layers[l] = {**layers[l], t: y}
        self.s.cur = {**self.cur, "layers": layers}

    def bias_zeros(self) -> None:
        """Write each bias the translations moved (:attr:`stored_biases`: ``b_Q``, ``b_K``, ``b_V``, ``b_O``,
        ``b_in``, ``b_out``, one part per layer) that they left 0 up to the rounding of its stored value
        (:meth:`zero`, ``whole=False``) as exactly 0; report the ones only the storage makes 0.

        A random BERT has every bias 0; g . A adds translations of order 1, and what canonical's translations leave
        of them is their rounding (1e-15). Left as it was, relate(A, canonical(g . A)) read B's b_O of 1e-15 against
        A's 0 as a whole unexplained part ("not related" at b_O, both ways). Written at once, after the translations,
        so every later step (orders, scalings, gauges) reads and keeps the exact 0 (a linear map of 0).

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("gpt2"); c = _Canon(GroupSpec.from_arch(w.arch), model_blocks(w), 1e-6)
        >>> c.keep_stored()
        >>> _ = c.cur["layers"][0]["b_O"].mul_(1e-17)  # what a translation of the stored b_O left: its rounding
        >>> c.bias_zeros()
        >>> float(c.cur["layers"][0]["b_O"].abs().max()), float(c.cur["layers"][0]["b_in"].abs().max()) > 0
        (0.0, True)
        """
        import torch

        layers = list(self.cur["layers"])
        length = int(self.spec.arch.d_model)  # the translations write sums over the residual (t W: d_model products)
        for (t, l), stored in self.stored_biases.items():
            x = layers[l].get(t)
            if x is None:
                continue
            zero, unsure = self.zero(t, l, _sum_squares(x), length, stored, whole=False)
            if bool(unsure.any()):
                self.amb.append(self._unsure_line(f"translations layer {l}", "", t, l, [],
                                                  "keeps (this form writes it as exactly 0)"))
            if bool(zero.any()):
                layers[l] = {**layers[l], t: [torch.zeros_like(b) for b in x] if isinstance(x, list)
                             else torch.zeros_like(x)}
                # and again with the weights (:meth:`write_zeros`): the steps re-applied to the true tables (rows
                # no input reads, RoBERTa's) bring the rounding back
                self.zeroed[(t, l)] = torch.ones(len(x) if isinstance(x, list) else x.shape[-1], dtype=torch.bool)
        self.s.cur = {**self.cur, "layers": layers}

    def _unsure_line(self, where: str, what: str, tensor: str, l: int, parts: list[int],
                     fixed: str = "fixes otherwise (its order, scaling or gauge is not fixed)") -> str:
        """The ambiguity of ``parts`` (their positions in the form; none: the whole tensor, ``what`` empty) that
        :meth:`zero` is unsure of; ``fixed``: what A's form does with such a part where it is live."""
        shown = ", ".join(map(str, parts[:8])) + (f" and {len(parts) - 8} more" if len(parts) > 8 else "")
        head = f"{where}: {what} {shown}: " if parts else f"{where}: "
        return (f"{head}{tensor} is 0 only within the {self.precision(tensor, l)} rounding of its "
                "stored value (what a translation moved): read as 0, it may be a live part below that rounding, "
                f"which A's form {fixed}")

    def _edge_line(self, where: str, n: int, what: str) -> str:
        """The ambiguity of ``n`` pairs of ``what`` on the tie's edge (:func:`_lex_order`)."""
        return (f"{where}: {n} pairs of {what} whose keys differ by about {self.tie:g} relative, within their "
                f"rounding ({self.noise:.2g}) of it, and which that rounding can order either way (their order may "
                "change with rounding)")

    def apply(self, factor: str, element: Any) -> None:
        self.s.apply(factor, element)

    # residual map
    def residual(self) -> None:
        import torch

        from symtrans.group.numeric import MonomialMatrix

        s = self.s
        residual = with_role(s.spec, "residual", list(s.present.values()))
        perm_f = next((f for f in residual if f.kind == "discrete"), None)
        rot_f = next((f for f in residual if f.kind == "continuous"), None)
        if "word" not in self.cur or (perm_f is None and rot_f is None):
            return
        W = self.cur["word"]
        rows, ones = bool(s.tags_on("word", "translate_rows")), bool(s.tags_on("word", "translate_ones"))
        d = W.shape[1]
        cm = s.col_means("word") if rows else None  # (the solver's, cached: torch's cascade sum over the rows)
        if rot_f is not None:
            if rows or ones:  # one copy, centred in place (the SVD reads the whole table)
                W = W.clone()
                if rows:
                    W.sub_(cm)
                if ones:
                    W.sub_(W.mean(1, keepdim=True))
            rms = self.spec.arch.norm == "rmsnorm"
            k = d if rms else d - 1  # LayerNorm: the table is centred, its axes span 1^perp
            # fewer rows than axes (a small vocabulary): every right singular vector, the table's null space too,
            # within 1^perp under LayerNorm (the table in the basis of 1^perp; 1 itself stays fixed)
            from symtrans.numeric.linalg import ones_complement

            basis = None if rms or W.shape[0] >= k else ones_complement(d, W.dtype)
            U, S, Vh = torch.linalg.svd(W if basis is None else W @ basis, full_matrices=W.shape[0] < k)
            S = torch.cat([S, S.new_zeros(max(0, k - S.numel()))])[:k]
            U, V = U[:, :k], (Vh[:k].T if basis is None else basis @ Vh[:k].T)
            if U.shape[1] < k:
                U = torch.cat([U, U.new_zeros(U.shape[0], k - U.shape[1])], 1)
            third = (U ** 3).sum(0)
            V = V * torch.where(third < 0, -1.0, 1.0).to(W.dtype)[None, :]
            # an axis the table does not fix: one beyond its rank (its direction within that null space is free),
            # or one whose third moment is 0 up to the tie tolerance (a table symmetric under x -> -x along it:
            # its sign is free). Reported, not fixed: the form of g . A may differ there
            null = S <= self.tie * S[0] if float(S[0]) > 0 else torch.ones_like(S, dtype=torch.bool)
            if int(null.sum()) > 0:
                self.amb.append(f"residual-rotation: the embedding table has rank {k - int(null.sum())} of the {k} "
                                "axes the rotation moves; the rotation on the rest is not fixed")
            cut = _third_moment_tie(self.tie, U.shape[0])
            flat = (third.abs() <= cut * (U.abs() ** 3).sum(0)) & ~null
            if bool(flat.any()):
                self.amb.append(f"residual-rotation: {int(flat.sum())} axes of the embedding table whose third "
                                f"moment is 0 within {cut:.3g} of its absolute one (the table is symmetric along "
                                "them, as far as its rounding tells); their signs are not fixed")
            if rms:
                Q = V
            else:  # map the axes onto a fixed basis of 1^perp, and 1 to itself (Q 1 = 1)
                Q = V @ ones_complement(d, W.dtype).T + torch.full((d, d), 1.0 / d, dtype=W.dtype)
            self.apply(rot_f.name, {"Q": Q})
            gaps = (S[:-1] - S[1:]) / S[0]
            if bool((gaps < self.tie).any()):
                self.amb.append("residual-rotation: the embedding table has (near-)equal singular values; their "
                                "axes are not fixed")
            return
        if perm_f is None:
            return
        sq, cube, quart, abscube = _centred_moments(W, cm, ones)
        norms = sq.sqrt()
        # near-equal norms by the columns' fourth moments (unchanged by the signs fixed below)
        order_list, close, edge = _lex_order([norms, _moment_ratio(quart, sq)], self.tie, self.noise)
        order = torch.tensor(order_list, dtype=torch.long)
        if close:
            self.amb.append(f"residual-permutation: {close} pairs of residual coordinates whose table "
                            f"norms differ by less than {self.tie:g} relative (their order may change with rounding)")
        if edge:
            self.amb.append(self._edge_line("residual-permutation", edge, "residual coordinates"))
        if self.spec.arch.norm == "rmsnorm":
            signs = torch.where(cube[order] < 0, -1.0, 1.0).to(W.dtype)
            cut = _third_moment_tie(self.tie, W.shape[0])
            flat = int((cube.abs() <= cut * abscube).sum())
        else:
            sign = -1.0 if float(cube.sum()) < 0 else 1.0
            signs = torch.full((d,), sign, dtype=W.dtype)
            cut = _third_moment_tie(self.tie, W.shape[0] * d)
            flat = int(abs(float(cube.sum())) <= cut * float(abscube.sum()))
        if flat:  # a table symmetric under x -> -x along a coordinate (or as a whole): that sign is free
            self.amb.append(f"residual-permutation: {flat} sign{'s' if flat > 1 else ''} of the residual coordinates "
                            f"whose table's third moment is 0 within {cut:.3g} of its absolute one; not fixed")
        mono = MonomialMatrix(order.tolist(), signs)
        self.apply(perm_f.name, {"Q": mono})
        s.carry_col_means("word", cm, mono)  # the acted table's column means: A's, moved (as relate's)

    def scalings(self) -> None:
        from symtrans.group.numeric import MonomialMatrix
        from symtrans.group.relate import gain_pivot

        for f in with_role(self.s.spec, "norm-scaling", list(self.s.present.values())):
            if f.scope not in ("layer", "model"):
                continue
            pivot = gain_pivot(f)
            if f.scope == "model":
                g = self.cur.get(pivot.tensor)
                if g is not None:
                    v = self.gain_fixing(f, g, None)
                    self.apply(f.name, {"D": MonomialMatrix(list(range(v.numel())), v)})
                continue
            els = []
            for l in range(self.s.L):
                v = self.gain_fixing(f, self.cur["layers"][l][pivot.tensor], l)
                els.append({"D": MonomialMatrix(list(range(v.numel())), v)})
            self.apply(f.name, els)
        for f in with_role(self.s.spec, "head-gain-trade", list(self.s.present.values())):
            self.apply(f.name, [{"D": self.unit_key_gains(f, l)} for l in range(self.s.L)])

    def gain_fixing(self, f: Any, gain: Any, l: int | None) -> Any:
        """The element ``d`` of norm-scaling factor ``f`` (layer ``l``; None: the model's) that fixes its gauge:
        ``1 / gain``, so every gain becomes 1. A gain of exactly 0 (a dead channel: Gemma 3 270M stores 19 in
        ``ln2_w``) stays 0 under every scaling, so there a row ``f`` scales inversely is fixed instead, read
        where no other per-layer factor moves it (:meth:`~symtrans.group.relate._Solver.fit_rows`: the channel's
        row of the ``W_V W_O`` or ``W_in W_out`` key): ``d_j`` is its norm over ``rho`` times the sign of its
        entry of largest magnitude, so its largest entry becomes positive and its norm ``rho``, the RMS norm of
        the live channels' rows once their gains are 1 (invariant too, and of the live scalings' size, so the
        element's condition number stays small); 1 where it is zero (no scaling moves that channel). A scaling
        ``s`` of A moves that row to ``row / s_j``, every other factor leaves it, and the rule gives the same
        form back. A factor whose scaling is one per rotated pair (the QK-norm gain trade,
        :func:`~symtrans.group.elements.equal_pairs`) takes each pair's signed RMS of those values
        (:func:`~symtrans.group.elements.pair_signed_rms`): the pair's gains then have RMS 1, the first positive.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.fixtures import tiny_decoder
        >>> from symtrans.group.numeric import model_blocks
        >>> w = tiny_decoder("llama"); w.tensors["ln2_w"][0, 3] = 0.0
        >>> c = _Canon(GroupSpec.from_arch(w.arch), model_blocks(w), 1e-6)
        >>> f = c.spec.factor("ln2-scaling")
        >>> d = c.gain_fixing(f, c.cur["layers"][0]["ln2_w"], 0)
        >>> rows = torch.cat([x[3] for x in c.s.fit_rows(f, c.cur, 0)])
        >>> g = c.cur["layers"][0]["ln2_w"].reshape(-1)
        >>> R = torch.cat(list(c.s.fit_rows(f, c.cur, 0)), 1); live = torch.arange(g.numel()) != 3
        >>> rho = (R[live].norm(dim=1) * g[live]).square().mean().sqrt()
        >>> bool(torch.isclose(d[3].abs(), rows.norm() / rho)), bool(torch.isclose(d[2], 1 / g[2]))
        (True, True)
        """
        import torch

        g = gain.reshape(-1)
        dead = g == 0
        v = 1 / torch.where(dead, 1.0, g)
        pairs = equal_pairs(self.spec, f.name)  # one scaling per rotated pair: its signed RMS, read where known
        if not bool(dead.any()):
            return pair_signed_rms(v, pairs)
        blocks = list(self.s.fit_rows(f, self.cur, l))  # channels as rows, no other factor moves them
        if not blocks:  # nothing loaded that f scales (an untied head): the dead channels stay as they are
            return pair_signed_rms(v, pairs, (~dead).to(v.dtype))
        rows = torch.cat(blocks, 1)
        norm = torch.linalg.vector_norm(rows, dim=1)
        big = rows.gather(1, rows.abs().argmax(1, keepdim=True))[:, 0]
        # rho: the RMS norm of the live rows once their gains are 1 (each row times its gain)
        live = (~dead) & (norm > 0)
        rho = float((norm[live] * g[live]).square().mean().sqrt()) if bool(live.any()) else 1.0
        fixed = torch.where(norm > 0, norm / rho * torch.where(big < 0, -1.0, 1.0).to(norm.dtype), 1.0)
        if bool((dead & (norm > 0) & _lead_tied(rows, 1, self.tie)).any()):
            self.amb.append(f"{f.name}{'' if l is None else f' layer {l}'}: a dead channel's rows have two entries "
                            "of equal magnitude at their largest (their sign is not fixed)")
        return pair_signed_rms(torch.where(dead, fixed, v), pairs, ((~dead) | (norm > 0)).to(v.dtype))

    def unit_key_gains(self, f: Any, l: int) -> list[Any]:
        """Layer ``l``'s element of a per-key/value-head gain trade that makes each key gain 1 (D_g = diag(k_g));
        on a coordinate where k_g is 0, the first query gain of the group instead (1 where that is 0 too); one
        per rotated pair where the positions are rotary (the pair's signed RMS of those values). Every element of
        ``f`` moves k_g to k_g D^-1 and q_h to q_h D, so the result is the same for all of the orbit."""
        import torch

        q, k = self.s.head_gains(f, self.cur, l)
        per = q.shape[0] // k.shape[0]
        pairs = equal_pairs(self.spec, f.name)  # one scaling per rotated pair: its signed RMS, read where known
        out = []
        for g in range(k.shape[0]):
            first = q[g * per]
            d = torch.where(k[g] != 0, k[g], torch.where(first != 0, 1 / torch.where(first != 0, first, 1), 1.0))
            out.append(torch.diag(pair_signed_rms(d, pairs, ((k[g] != 0) | (first != 0)).to(d.dtype))))
        return out

    def translations(self) -> None:
        """Every translation factor moves its pivot to 0 (the target B is the pivot with that part removed)."""
        s = self.s
        self.keep_stored()
        for name in translation_order(s.spec, canonical=True):
            f = s.present.get(name)
            if f is None:
                continue
            s.tgt = _zeroed_target(s, f)
            el = s.translation(f)
            self.apply(name, el)
        self.bias_zeros()
        s.tgt, s.tgt_means = s.cur, {}
        s.prescribed.clear()

    def heads(self) -> None:

        s = self.s
        f = s.present.get("S_H")  # the factor this step canonicalises
        if f is None:
            return
        els = []
        for l in range(s.L):
            lp = self.cur["layers"][l]
            H = len(lp["W_Q"])
            vo, qk = _head_product_norms(lp, self.group, self.tie)
            # a block 0 up to the rounding the translations left of it (:meth:`zero`) keys its products as 0: read
            # as they are, the rounding the input hyperplane's projection left of a layer's W_V (0 in A) ordered
            # the heads of g . A (1.46 from canonical(A) at W_K, nothing reported)
            zero = {t: self.head_zero(t, l) for t in ("W_Q", "W_K", "W_V", "W_O")}
            own = {t: self.head_zero(t, l, whole=False) for t in zero}
            kv_of = [h // self.group for h in range(H)]
            vo = [0.0 if bool(zero["W_V"][kv_of[h]] | zero["W_O"][h]) else x for h, x in enumerate(vo)]
            qk = [0.0 if bool(zero["W_Q"][h] | zero["W_K"][kv_of[h]]) else x for h, x in enumerate(qk)]
            space = None
            if _lex_order([vo], self.tie)[1]:
                # heads with equal |W_V W_O| (a pruned key/value head: every query head reading it has products
                # 0) are ordered by what the per-head gauges leave of W_Q and W_O: their column and row spaces
                S = s.head_spaces(self.cur, l)
                space = [float(x) for x in (S * S).sum(1)]
            # by |W_V W_O|, a run of equal ones (within the tie) by |W_Q W_K^T|, a run of those by their spaces
            keys = [vo, qk] + ([space] if space is not None else [])
            if self.group == 1:  # every head its own key/value group: the group order is the heads' order
                pi, tied, edge = _lex_order(keys, self.tie, self.noise)
                korder = list(pi)
            else:
                groups = H // self.group
                gkey = [sum(vo[g * self.group:(g + 1) * self.group]) for g in range(groups)]
                korder, tied, edge = _lex_order([gkey], self.tie, self.noise)  # the groups by their heads' sum
                pi = []
                for g in korder:
                    heads = list(range(g * self.group, (g + 1) * self.group))
                    inner, t, e = _lex_order(keys, self.tie, self.noise, heads)
                    pi += inner
                    tied, edge = tied + t, edge + e
            if tied:
                self.amb.append(f"S_H layer {l}: heads with equal |W_V W_O| (their order is not fixed)")
            if edge:
                self.amb.append(self._edge_line(f"S_H layer {l}", edge, "heads"))
            els.append({"pi": pi, "kappa": korder})
            self.zeroed.update({(t, l): own[t][pi if t in ("W_Q", "W_O") else korder] for t in own})
            self.carry_stored(l, ("W_Q", "W_O"), pi)
            self.carry_stored(l, ("W_K", "W_V"), korder)
        self.apply(f.name, els)

    def units(self) -> None:
        import torch

        from symtrans.group.numeric import MonomialMatrix
        from symtrans.group.relate import unit_scaled_inputs, unit_sign_kept

        s = self.s
        f = s.present.get("S_dff")  # the factor this step canonicalises
        if f is None:
            return
        # the inputs no unit scaling of G moves (GELU's W_in, a gate's W_gate) keep their scale and sign:
        # they tell apart units whose scale-free keys tie (an input column parallel to another unit's: f w, W_out / f)
        moved = set(unit_scaled_inputs(self.spec, s.present.values()))
        kept = [t.tensor for t in f.tags if t.side == "right" and t.tensor not in moved]
        signed_inputs = [t.tensor for t in f.tags if t.side == "right" and t.tensor.startswith("W_")
                         and t.tensor in moved and unit_sign_kept(self.spec, t.tensor, s.present.values())]
        els = []
        for l in range(s.L):
            lp = self.cur["layers"][l]
            # each unit's columns and row that are 0 up to the rounding the translations left of them (:meth:`zero`)
            # give keys of 0, as they are in a model where they are exactly 0: read as they are, that rounding
            # ordered the units of a layer whose W_in is 0 (every key 1e-14, the tie relative to the largest of
            # them), and canonical(g . A) put them 140% away from canonical(A) with no tie reported
            norms = {t: lp[t].norm(dim=1 if t == "W_out" else 0) for t in {"W_in", "W_out", "W_gate", *kept,
                                                                         *signed_inputs}
                     if t.startswith("W_") and lp.get(t) is not None}
            length = {t: int(lp[t].shape[1 if t == "W_out" else 0]) for t in norms}  # each norm's sum of squares
            both = {t: self.zero(t, l, n * n, length[t]) for t, n in norms.items()}
            zero = {t: z for t, (z, _) in both.items()}

            def live(t: str, x: Any) -> Any:
                return torch.where(zero[t], 0.0, x)

            key = live("W_in", norms["W_in"]) * live("W_out", norms["W_out"])
            if "W_gate" in lp:
                key = key * live("W_gate", norms["W_gate"])
            # their columns' norms, then each column's projection on a fixed direction (its sign). Not a bias: one
            # a translation set to 0 (a random BERT's b_in) is rounding, and would order the pair by it. An input
            # only positive scalings move (ReLU's): the projection of its column over its norm (norm 1: no norm
            # key), whose sign no element of G flips
            fixed = [t for t in kept if t.startswith("W_") and lp.get(t) is not None]
            unit = [(t, lp[t] / norms[t].clamp_min(1e-300)) for t in signed_inputs if lp.get(t) is not None]
            # near-equal products of norms by their columns' and rows' shapes (unchanged by the unit scalings
            # fixed after this step)
            order, close, edge = _lex_order([key, live("W_in", _fourth_moment(lp["W_in"], 0)),
                                             live("W_out", _fourth_moment(lp["W_out"], 1)),
                                             *(live(t, norms[t]) for t in fixed),
                                             *(live(t, s.sketch(x.shape[0], x.dtype, 1)[:, 0] @ x)
                                               for t, x in [(t, lp[t]) for t in fixed] + unit)],
                                            self.tie, self.noise)
            if close:
                self.amb.append(f"S_dff layer {l}: {close} pairs of FFN units whose keys differ by less "
                                f"than {self.tie:g} relative (their order may change with rounding)")
            if edge:
                self.amb.append(self._edge_line(f"S_dff layer {l}", edge, "FFN units"))
            els.append({"P": MonomialMatrix(order, torch.ones(len(order), dtype=key.dtype))})
            self.zeroed.update({(t, l): self.zero(t, l, n * n, length[t], whole=False)[0][order]
                                for t, n in norms.items()})
            self.carry_stored(l, ("W_in", "W_gate", "W_out"), order)
            for t in sorted(both):  # keys read as 0 that may be live (:meth:`zero`), named where the form puts them
                unsure = both[t][1][order].nonzero().flatten().tolist()
                if unsure:
                    self.amb.append(self._unsure_line(f"S_dff layer {l}", "FFN units", t, l, unsure))
        self.apply(f.name, els)

    def unit_scalings(self) -> None:
        import torch

        from symtrans.group.numeric import MonomialMatrix

        for name in [x.name for x in with_role(self.s.spec, "hidden-scaling")]:
            f = self.s.present.get(name)
            if f is None:
                continue
            pivot = next(t for t in f.tags if t.side == "right" and t.tensor.startswith("W_"))
            out = next(t for t in f.tags if t.how == "inverse" and t.tensor.startswith("W_"))
            signed = values_rule(self.s.spec, name) != "positive"
            els = []
            for l in range(self.s.L):
                W = self.cur["layers"][l][pivot.tensor]
                norm = W.norm(dim=0)
                R = self.cur["layers"][l][out.tensor]
                rows = R.norm(dim=1)
                # a unit 0 in the pivot (a dead unit): no scale there. 0 up to the rounding the translations left
                # of its stored column (:meth:`zero`), a decision the scalings do not move: judged against the
                # layer's largest column (with the product |column| |row| negligible too), a unit whose column was
                # 3e-7 of the largest was dead in A, its row normalised, and live in g . A (scaled by 10), its
                # column normalised: the two forms 99% apart in W_out, nothing reported
                dead = self.zero(pivot.tensor, l, norm * norm, int(W.shape[0]))[0]  # (unsure ones: units())
                # a dead unit writes nothing, and the factor moves its output row alone (by 1 / d), to any scale:
                # that row's norm is fixed to 1 instead (relate reads such a unit's scaling there too); a row that
                # is 0 as well (up to its rounding) fixes nothing
                free = dead & self.zero(out.tensor, l, rows * rows, int(R.shape[1]))[0]
                if bool(free.any()):
                    self.amb.append(f"{name} layer {l}: {int(free.sum())} FFN units with {pivot.tensor} = 0 and "
                                    f"{out.tensor} = 0 (within their rounding): their scaling is not fixed")
                d = torch.where(free, 1.0, torch.where(dead, rows, 1 / norm.clamp_min(1e-300)))
                if signed:
                    lead = W.gather(0, W.abs().argmax(0, keepdim=True)).reshape(-1)
                    lead_row = R.gather(1, R.abs().argmax(1, keepdim=True)).reshape(-1)
                    d = d * torch.where(torch.where(dead, lead_row, lead) < 0, -1.0, 1.0).to(W.dtype)
                    tied = int((torch.where(dead, _lead_tied(R, 1, self.tie) & ~free, _lead_tied(W, 0, self.tie))).sum())
                    if tied:
                        self.amb.append(f"{name} layer {l}: {tied} FFN units whose {pivot.tensor} column has two "
                                        f"entries of equal magnitude (within {self.tie:g}) at its largest: their "
                                        "sign is not fixed")
                els.append({"D": MonomialMatrix(list(range(d.numel())), d)})
            self.apply(name, els)

    def rotary(self, f: Any) -> None:
        import torch

        a = self.spec.arch
        if a.partial_rotary_factor != 1:
            raise SymtransError(f"{a.name}: the canonical form does not model partial rotary positions "
                                f"(partial_rotary_factor = {a.partial_rotary_factor:g})")

        els = []
        for l in range(self.s.L):
            lp = self.cur["layers"][l]
            mats = []
            for g in range(len(lp["W_K"])):
                heads = range(g * self.group, (g + 1) * self.group)
                A = torch.cat([lp["W_Q"][h] for h in heads])
                # each plane's side 0 up to the rounding the translations left of it (:meth:`zero`)
                zq, zk = (self.plane_zero(name, l, X, rows) for name, X, rows in
                          (("W_Q", A, list(heads)), ("W_K", lp["W_K"][g], [g])))
                M, tied = _rotary_block(A, lp["W_K"][g], self.tie, zq, zk)
                if tied:
                    self.amb.append(f"qk-gauge layer {l} head group {g}: the phase of a rotary plane is not fixed "
                                    "(two entries of equal modulus)")
                mats.append(M)
            els.append({"g": mats})
        self.apply(f.name, els)

    def plane_zero(self, tensor: str, l: int, X: Any, blocks: list[int]) -> Any:
        """Per rotary plane (b, b + k) of ``X`` (``tensor``'s blocks ``blocks`` of layer ``l`` stacked): whether that
        side of the plane is 0 up to its rounding (:meth:`zero`; one whose decision only the storage makes is
        reported here)."""
        k = X.shape[1] // 2
        sq = (X * X).sum(0)
        rec = self.stored.get((tensor, l))
        stored = None if rec is None else rec[blocks].sum(0)
        zero, unsure = self.zero(tensor, l, sq[:k] + sq[k:], int(X.shape[0]) // len(blocks),
                                 None if stored is None else stored[:k] + stored[k:])
        if bool(unsure.any()):
            self.amb.append(self._unsure_line(f"qk-gauge layer {l} blocks {blocks}", "rotary planes", tensor, l,
                                              unsure.nonzero().flatten().tolist()))
        return zero

    def gauges(self) -> None:
        import torch

        s = self.s
        for f in with_role(s.spec, "head-gauge", list(s.present.values())):
            if "rotary" in f.group:
                self.rotary(f)
                continue
            # the gauge's product P = A B^T: A the weight it acts on by the element, B the one by the inverse,
            # each with the gauge's axis last; the side indexed by query head is stacked over the group's heads
            weights = [t for t in f.tags if t.tensor.startswith("W_")]
            left = next(t for t in weights if t.how == "element")
            right = next(t for t in weights if t.how != "element")
            els = []
            for l in range(s.L):
                lp = self.cur["layers"][l]
                kv = len(lp["W_K"])
                # every key/value head's group at once: A and B stacked (kv x rows x d_k), one batched QR each
                # (A = Qa Ra, B = Qb Rb, so A B^T = Qa (Ra Rb^T) Qb^T: the k x k cores' SVDs, batched, give the
                # leading left singular vectors U = Qa Uc and values S of A B^T without the d x d product);
                # M solves A M = U sqrt(S) through A's own QR
                # (U = Qa Uc lies in A's range: Ra M = Uc sqrt(S), a triangular solve, what a least-squares solve
                # of A M = U sqrt(S) gives exactly)
                A, B = (_gauge_stack(lp, t, kv) for t in (left, right))
                Qa, Ra = torch.linalg.qr(A)
                Rb = torch.linalg.qr(B, mode="r")[1]  # Qb only where B alone fixes the gauge (below): half the cost
                Uc, S, _ = torch.linalg.svd(matmul(Ra, Rb.mT))
                U = matmul(Qa, Uc)
                lead = U.gather(1, U.abs().argmax(1, keepdim=True))  # each column's entry of largest magnitude
                sign = torch.where(lead < 0, -1.0, 1.0).to(U.dtype)
                tied_lead = _lead_tied(U, 1, self.tie).any(1).tolist()
                Ms = torch.linalg.solve_triangular(Ra, Uc * (sign * S.sqrt()[:, None, :]), upper=True)
                gaps = ((S[:, :-1] - S[:, 1:]) / S[:, :1] < self.tie).any(1).tolist()
                mats = []
                # a group's side is 0 where it is 0 up to the rounding the translations left of its stored blocks
                # (:meth:`zero`), which a per-head gauge moves alike: a reading G does not move. Judged against the
                # layer's largest side, a head whose W_O was 3e-7 of the layer's was 0 in A (W_V's column space
                # fixed the gauge) and live in g . A (a gauge 0.1 I: the product's SVD did), 98% apart in W_V
                zs, unsure = zip(*(self.zero(t.tensor, l, (X * X).sum((1, 2)), int(lp[t.tensor][0].shape[0]),
                                             self.stored_groups(t.tensor, l, kv)) for t, X in ((left, A), (right, B))))
                for t, u in zip((left, right), unsure):
                    if bool(u.any()):
                        self.amb.append(self._unsure_line(f"{f.name} layer {l}", "head groups", t.tensor, l,
                                                          u.nonzero().flatten().tolist()))
                prod = S.norm(dim=-1)
                negligible = (prod <= self.tie * prod.max()) | zs[0] | zs[1]
                oks = tuple(_full_column_rank(R, self.tie, z) for R, z in ((Ra, zs[0]), (Rb, zs[1])))
                small = tuple(z.tolist() for z in zs)
                # a product of full rank (beyond the tie of its own largest singular value: what the gauge leaves)
                # and not negligible (a silenced head's product is the rounding a translation left on one side) has
                # both sides of full column rank, however ill-conditioned the gauge makes either side
                full = ((S > self.tie * S[:, :1]).all(1) & ~negligible).tolist()
                oks = tuple([ok or f for ok, f in zip(side, full)] for side in oks)
                S0 = torch.where((zs[0] | zs[1])[:, None], 0.0, S)  # a product with a side 0: 0
                for g in range(kv):
                    M = Ms[g]
                    # one side without full column rank (a silenced head: W_V^h or W_O^h = 0; in g . A the rounding a
                    # translation left of it): the product fixes nothing
                    # there, the other side's column space does; with both sides of full column rank so has the
                    # product, and M above is the element
                    a_ok, b_ok = oks[0][g], oks[1][g]
                    if a_ok != b_ok:
                        Qs, Rs, side = (Qa[g], Ra[g], left.tensor) if a_ok else (*torch.linalg.qr(B[g]), right.tensor)
                        M, cond = _span_gauge(Qs, Rs, s.sketch(Qs.shape[-2], Qs.dtype, Qs.shape[-1]))
                        # A M fixed by A alone, or B M^-T by B alone
                        M = M if a_ok else torch.linalg.inv(M).mT
                        if cond < self.tie:
                            self.amb.append(f"{f.name} layer {l} head group {g}: the basis of {side}'s column space "
                                            f"read off its projector is ill-conditioned ({cond:.2g}, below "
                                            f"{self.tie:g}): the gauge is not fixed within rounding")
                    elif not a_ok:
                        if small[0][g] and small[1][g]:
                            M = torch.eye(A.shape[-1], dtype=A.dtype)  # a pruned head: g acts on 0
                        else:  # both sides deficient (a value channel pruned on both): the product's own pair
                            M = _pruned_gauge(A[g], B[g], self.tie)
                            if M is None:
                                raise SymtransError(
                                    f"canonical: {f.name} layer {l} head group {g}: both {left.tensor} and "
                                    f"{right.tensor} lack full column rank and their ranks differ from their "
                                    "product's: the canonical form of such a head is not defined (relate solves it)")
                    if not (a_ok or b_ok):  # the rank against the layer's largest product (0 in a pruned head)
                        rank = int((S0[g] > self.tie * S0[:, :1].max()).sum())
                        self.amb.append(f"{f.name} layer {l} head group {g}: {left.tensor} {right.tensor} has rank "
                                        f"{rank} < {S.shape[-1]} (below {self.tie:g} of the layer's largest "
                                        "singular value): the gauge on its null space is not fixed")
                    elif gaps[g] and a_ok and b_ok:
                        self.amb.append(f"{f.name} layer {l} head group {g}: near-equal singular values of "
                                        f"{left.tensor} {right.tensor}: their singular vectors are not fixed")
                    elif tied_lead[g] and a_ok and b_ok:
                        self.amb.append(f"{f.name} layer {l} head group {g}: a singular vector of {left.tensor} "
                                        f"{right.tensor} has two entries of equal magnitude (within {self.tie:g}) at "
                                        "its largest: its sign is not fixed")
                    mats.append(M)
                els.append({"g": mats})
            self.apply(f.name, els)


def _sum_squares(x: Any) -> Any:
    """The squared norm of a tensor, or of a list of blocks as one, as a one-entry float64 tensor.

    Examples
    --------
    >>> import torch
    >>> _sum_squares([torch.ones(2), torch.ones(3)]).tolist()
    [5.0]
    """
    import torch

    blocks = x if isinstance(x, list) else [x]
    return torch.stack([(b.double() * b.double()).sum() for b in blocks]).sum().reshape(1)


def _centred_moments(W: Any, col_mean: Any, ones: bool) -> tuple[Any, Any, Any, Any]:
    """Column sums of ``c^2``, ``c^3``, ``c^4`` and ``|c|^3`` of the centred table ``c`` (``W`` less ``col_mean``
    where given, then each row less its own mean where ``ones``), row chunk by row chunk, without a centred copy.

    The canonical residual permutation's keys (column norms, fourth moments, third-moment signs) read the word
    table once. NumPy, into four reused chunk buffers, and column sums as products with a vector of ones (BLAS):
    torch's reduction over the first axis of a row-major chunk and its fresh temporaries made this pass about
    twice as slow on the bundled table (66 ms against 34, one thread). The same sums, in another order of
    addition.

    Examples
    --------
    >>> import torch
    >>> W = torch.randn(3000, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> cm = W.mean(0, keepdim=True)
    >>> c = (W - cm) - (W - cm).mean(1, keepdim=True)
    >>> got = _centred_moments(W, cm, True)
    >>> want = ((c ** 2).sum(0), (c ** 3).sum(0), (c ** 4).sum(0), c.abs().pow(3).sum(0))
    >>> all(bool(torch.allclose(g, x, rtol=1e-12, atol=1e-12)) for g, x in zip(got, want))
    True
    """
    import numpy as np
    import torch

    from symtrans.group.relate import _CHUNK_ROWS

    Wn = W.detach().cpu().numpy()
    cm = None if col_mean is None else col_mean.detach().cpu().numpy().reshape(-1)
    rows = min(_CHUNK_ROWS, Wn.shape[0])
    acc = np.zeros((4, Wn.shape[1]), dtype=Wn.dtype)
    buf = np.empty((4, rows, Wn.shape[1]), dtype=Wn.dtype)
    unit = np.ones(rows, dtype=Wn.dtype)
    for i in range(0, Wn.shape[0], rows):
        n = min(rows, Wn.shape[0] - i)
        c, c2, c3, c4 = buf[0, :n], buf[1, :n], buf[2, :n], buf[3, :n]
        if cm is None:
            c[...] = Wn[i:i + n]
        else:
            np.subtract(Wn[i:i + n], cm, out=c)
        if ones:
            c -= c.mean(1, keepdims=True)
        np.multiply(c, c, out=c2)
        np.multiply(c2, c, out=c3)
        np.multiply(c2, c2, out=c4)
        np.abs(c3, out=c)
        for k, x in enumerate((c2, c3, c4, c)):
            acc[k] += unit[:n] @ x
    sq, cube, quart, abscube = (torch.from_numpy(a).to(W.device) for a in acc)
    return sq, cube, quart, abscube


def _head_product_norms(lp: dict[str, Any], group: int, tie: float) -> tuple[list[float], list[float]]:
    """Per query head h of one layer's blocks: ``|W_V^kv W_O^h|_F`` and ``|W_Q^h W_K^kv^T|_F`` (kv = h // group),
    to well within ``tie`` (the relative difference below which canonical calls two keys tied), batched.

    Not the d x d products. From the heads' k x k Gram matrices, ``|A B^T|_F^2 = sum((A^T A) * (B^T B))``, where
    that sum's rounding bound, ``(2 gamma_d + gamma_(k^2)) |A|_F^2 |B|_F^2`` (float64), puts each key within
    ``tie / 1000`` of its value; else (a layer with a per-head gauge of large condition number kappa, which scales
    A^T A up and B^T B down along the same axes: the sum cancels to ``u kappa^2``, 0.5% of the key at kappa = 1e8,
    and heads were reordered) from the heads' QR factors, ``A = Q_A R_A``: ``|A B^T|_F = |R_A R_B^T|_F``, which
    carries ``u kappa``, as the product itself does. The Grams cost half the QRs on the bundled MiniLM.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> lp = {n: [torch.randn(*s, dtype=torch.float64, generator=g) for _ in range(k)]
    ...       for n, s, k in (("W_Q", (8, 2), 4), ("W_K", (8, 2), 2), ("W_V", (8, 2), 2), ("W_O", (2, 8), 4))}
    >>> def worst(lp):
    ...     vo, qk = _head_product_norms(lp, 2, 1e-6)
    ...     want = [float(torch.linalg.norm(lp["W_V"][h // 2] @ lp["W_O"][h])) for h in range(4)]
    ...     return max(abs(a / b - 1) for a, b in zip(vo, want))
    >>> worst(lp) < 1e-12
    True
    >>> R = torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64)  # a value gauge of condition number 1e8:
    >>> M = R @ torch.diag(torch.tensor([1e8, 1.0], dtype=torch.float64)) @ R.T
    >>> lp["W_V"] = [v @ M for v in lp["W_V"]]; lp["W_O"] = [torch.linalg.solve(M, o) for o in lp["W_O"]]
    >>> v, o = lp["W_V"][0], lp["W_O"][0]  # the Grams' sum is far off there
    >>> abs(float(((v.T @ v) * (o @ o.T)).sum().clamp_min(0).sqrt() / torch.linalg.norm(v @ o)) - 1) > 1e-3
    True
    >>> worst(lp) < 1e-8
    True
    """
    import torch

    from symtrans.precision import sum_rounding

    def stacked(name: str, rows: bool) -> Any:  # the gauge's axis last (rows: W_O's)
        X = torch.stack(lp[name])
        return X.mT if rows else X

    kv = torch.arange(len(lp["W_Q"])) // group
    pairs = ((stacked("W_V", False), stacked("W_O", True), True), (stacked("W_Q", False), stacked("W_K", False), False))
    out = []
    for A, B, kv_first in pairs:
        GA, GB = matmul(A.mT, A), matmul(B.mT, B)
        GA, GB = (GA[kv], GB) if kv_first else (GA, GB[kv])
        sq = (GA * GB).sum((1, 2))
        d, k = A.shape[-2], A.shape[-1]
        bound = (2 * sum_rounding(d) + sum_rounding(k * k)) * GA.diagonal(0, 1, 2).sum(1) * GB.diagonal(0, 1, 2).sum(1)
        if A.dtype == torch.float64 and bool((bound <= 2e-3 * tie * sq).all()):
            out.append(sq.sqrt().tolist())
            continue
        RA, RB = (torch.linalg.qr(X, mode="r")[1] for X in (A, B))
        RA, RB = (RA[kv], RB) if kv_first else (RA, RB[kv])
        out.append(torch.linalg.matrix_norm(matmul(RA, RB.mT)).tolist())
    return out[0], out[1]


def _lex_order(keys: list[Any], tie: float, noise: float = 0.0, among: list[int] | None = None
               ) -> tuple[list[int], int, int]:
    """Indices by the first key, largest first; each run of neighbours within ``tie`` of that key's largest
    magnitude by the next key, and so on. Returns the order, how many neighbouring pairs are equal (within the
    tie) on every key (those the order leaves to rounding), and how many sit on the tie's edge: neighbours whose
    gap on the key that split or joined them lies within ``noise`` (the keys' own rounding, relative like ``tie``)
    of the tie, so that another rounding of the same orbit can take the other branch, and the two branches order
    them apart (the next key, or the input order past the last, disagrees with that key's). The rounding of a key
    is relative to the key itself (a norm read from rounded entries is off by at most their relative rounding).
    ``among``: order only these indices (a key/value group's heads), the tie still relative to every index's key.

    One scalar key leaves many near-ties among 1536 FFN units (21 pairs within 1e-6 in a layer of the bundled
    MiniLM), which float32 rounding of a moved copy swaps; a second key breaks almost all of them. At bfloat16 the
    tie is 3% and a random BERT's 32 units lie that close: the canonical forms of A and of g . A ordered its units
    apart, and no ambiguity was reported; the edge count reports them.

    Examples
    --------
    >>> import torch
    >>> _lex_order([torch.tensor([1.0, 2.0, 1.0 + 1e-9]), torch.tensor([0.5, 0.0, 0.7])], 1e-6)
    ([1, 2, 0], 0, 0)
    >>> _lex_order([torch.tensor([1.0, 1.0]), torch.tensor([3.0, 3.0])], 1e-6)  # equal on every key
    ([0, 1], 1, 0)
    >>> _lex_order([[1.0, 0.0, 1e-16], [0.5, 1e-16, 0.0], [1.0, 2.0, 3.0]], 1e-6)  # rounding-level ties: next key
    ([0, 2, 1], 0, 0)
    >>> _lex_order([[1.0, 5.0, 0.5, 0.5 + 1e-7]], 0.01, among=[2, 3])  # two of them, the tie relative to 5
    ([3, 2], 1, 0)
    >>> k = [torch.tensor([1.0, 0.9]), torch.tensor([0.0, 1.0])]  # 10% apart on the first key, reversed on the next
    >>> _lex_order(k, 0.09, 0.02), _lex_order(k, 0.09, 0.005), _lex_order(k, 0.12, 0.01)
    (([0, 1], 0, 1), ([0, 1], 0, 0), ([1, 0], 0, 0))
    """
    import numpy as np

    vals = [np.asarray(k.tolist() if hasattr(k, "tolist") else k, dtype=np.float64) for k in keys]
    tops = [max(float(np.abs(v).max()) if v.size else 0.0, 1e-300) for v in vals]
    out: list[int] = []
    tied = edge = 0

    def apart(i: int, j: int, depth: int) -> bool:
        """Whether the keys after ``depth`` (or the input order, past the last) put j before i, i before j at it."""
        for v, top in zip(vals[depth + 1:], tops[depth + 1:]):
            if abs(v[i] - v[j]) >= tie * top:
                return bool(v[j] > v[i])
        return j < i  # equal on every later key: the stable sort keeps the input order

    def place(run: Any, depth: int) -> None:  # run: an index array; NumPy's stable sort keeps equal keys' order
        nonlocal tied, edge
        if len(run) == 1 or depth == len(vals):
            out.extend(run.tolist())
            tied += len(run) - 1
            return
        v = vals[depth]
        order = run[np.argsort(-v[run], kind="stable")]
        gaps = v[order[:-1]] - v[order[1:]]
        close = gaps < tie * tops[depth]
        if noise > 0:  # a gap within the keys' rounding of the tie (each key's own: relative to itself, not to the
            # largest): split or joined, by rounding alone
            size = np.maximum(np.abs(v[order[:-1]]), np.abs(v[order[1:]]))
            near = np.flatnonzero(np.abs(gaps - tie * tops[depth]) <= noise * size)
            edge += sum(apart(int(order[k]), int(order[k + 1]), depth) for k in near)
        if not close.any():  # no neighbours within the tie: the order is final (most runs, one sort)
            out.extend(order.tolist())
            return
        cuts = [0, *(np.flatnonzero(~close) + 1).tolist(), len(order)]
        for a, b in zip(cuts[:-1], cuts[1:]):  # a run of one is placed here, not by a call per unit
            if b - a == 1:
                out.append(int(order[a]))
            else:
                place(order[a:b], depth + 1)

    place(np.arange(len(vals[0])) if among is None else np.asarray(among, dtype=np.int64), 0)
    return out, tied, edge


def _fourth_moment(X: Any, dim: int) -> Any:
    """``sum x^4 / (sum x^2)^2`` along ``dim``: a unit vector's fourth moment, unchanged by scaling ``X`` along
    that axis by any non-zero number (0 where the vector is 0). A second key for :func:`_lex_order`.

    Examples
    --------
    >>> import torch
    >>> _fourth_moment(torch.tensor([[1.0, 0.0], [1.0, 0.0]]), 0).tolist()
    [0.5, 0.0]
    """
    x2 = X * X
    return _moment_ratio((x2 * x2).sum(dim), x2.sum(dim))


def _moment_ratio(s4: Any, s2: Any) -> Any:
    """``s4 / s2^2`` from a vector's sums of fourth and second powers: its fourth moment (0 where ``s2`` is 0).

    Examples
    --------
    >>> import torch
    >>> _moment_ratio(torch.tensor([2.0, 0.0]), torch.tensor([2.0, 0.0])).tolist()
    [0.5, 0.0]
    """
    import torch

    return torch.where(s2 > 0, s4 / torch.where(s2 > 0, s2 * s2, 1.0), 0.0)


def _pruned_gauge(A: Any, B: Any, tie: float) -> Any:
    """The ``M`` with ``A M = [U_r S_r^(1/2) | 0]`` and ``B M^-T = [W_r S_r^(1/2) | 0]`` (``A B^T = U S W^T``), or None.

    Where both sides of a head's product lack full column rank and each has the product's rank r (a value
    channel pruned on both sides), the pair is moved onto the product's own factors, padded with zeros: the
    same pair for every element of the gauge (signs: each column of U with its largest entry positive, W's
    column with it). None where the ranks differ (no such M exists) or the solve does not reproduce it.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> V, O = torch.randn(6, 2, generator=g, dtype=torch.float64), torch.randn(5, 2, generator=g, dtype=torch.float64)
    >>> z = torch.zeros(6, 2, dtype=V.dtype)
    >>> A, B = torch.cat([V, z], 1), torch.cat([O, z[:5]], 1)
    >>> N = torch.randn(4, 4, generator=g, dtype=V.dtype)  # an element of the gauge
    >>> M1, M2 = _pruned_gauge(A, B, 1e-6), _pruned_gauge(A @ N, B @ torch.linalg.inv(N).mT, 1e-6)
    >>> bool(torch.allclose(A @ M1, A @ N @ M2, atol=1e-10)), bool(torch.allclose((A @ M1)[:, 2:], z))
    (True, True)
    >>> _pruned_gauge(A, torch.cat([z[:5], O], 1), 1e-6) is None  # each side alive where the other is 0
    True
    """
    import torch

    from symtrans.group.relate import _joint_gauge

    U, S, Wh = torch.linalg.svd(A @ B.mT, full_matrices=False)
    r = int((S > tie * S[0]).sum()) if float(S[0]) > 0 else 0
    sa, sb = torch.linalg.svdvals(A), torch.linalg.svdvals(B)
    ranks = [int((s > tie * s[0]).sum()) for s in (sa, sb)]
    if r == 0 or ranks != [r, r]:
        return None
    lead = U[:, :r].gather(0, U[:, :r].abs().argmax(0, keepdim=True))
    sign = torch.where(lead < 0, -1.0, 1.0).to(U.dtype)
    root = S[:r].sqrt()
    At, Bt = A.new_zeros(A.shape), B.new_zeros(B.shape)
    At[:, :r], Bt[:, :r] = U[:, :r] * sign * root, Wh[:r].mT * sign * root
    M = _joint_gauge(A, At, B.mT, Bt.mT, tie * float(sa[0]), tie * float(S[0]) ** 0.5)  # Bt's largest: sqrt(S0)
    ok = (bool(torch.isfinite(M).all()) and float(torch.linalg.svdvals(M).min()) > 0
          and float((A @ M - At).norm()) <= 1e-8 * float(At.norm())
          and float((B @ torch.linalg.inv(M).mT - Bt).norm()) <= 1e-8 * float(Bt.norm()))
    return M if ok else None


def _span_gauge(Q: Any, R: Any, sketch: Any) -> tuple[Any, float]:
    """The ``N`` with ``X N = C`` for ``X = Q R`` of full column rank, ``C`` a basis of X's column space read off its
    projector ``P = Q Q^T`` only: ``P S`` orthonormalised (QR, diagonal made positive), ``S`` a fixed random
    ``d x k`` sketch (:meth:`symtrans.group.relate._Solver.sketch`). The same ``C`` for every ``X N'`` with ``N'``
    invertible, so one side of a per-head gauge fixes it where the other is 0; and no tie can make it depend on
    the rounding (``P S`` has rank k for almost every ``S``; a choice among P's own columns did not: columns of
    equal norm were taken in an order rounding could flip, and two equal columns made ``C`` no basis at all).
    Also returns the conditioning of the choice, the smallest over the largest diagonal entry of ``P S``'s QR
    factor: where it is at rounding level, ``C`` is not fixed by ``P`` (reported by the caller).

    Examples
    --------
    >>> import torch
    >>> X = torch.randn(6, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> G = torch.tensor([[2.0, 1.0], [0.5, -3.0]], dtype=torch.float64)
    >>> S = torch.randn(6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    >>> (Xa, Xb) = (X, X @ G)
    >>> Ca, Cb = (Y @ _span_gauge(*torch.linalg.qr(Y), S)[0] for Y in (Xa, Xb))
    >>> bool(torch.allclose(Ca, Cb, atol=1e-12)), bool(torch.allclose(Ca.mT @ Ca, torch.eye(2, dtype=X.dtype)))
    (True, True)
    >>> Y = torch.zeros(6, 2, dtype=torch.float64); Y[0, 0] = Y[1, 0] = Y[2, 1] = Y[3, 1] = 1.0  # P's columns tie
    >>> C = Y @ _span_gauge(*torch.linalg.qr(Y), S)[0]
    >>> bool(torch.allclose(C.mT @ C, torch.eye(2, dtype=Y.dtype)))  # a basis (P's two largest columns are equal)
    True
    """
    import torch

    Qc, Rc = torch.linalg.qr(Q @ (Q.mT @ sketch.to(Q)))
    d = Rc.diagonal().abs()
    C = Qc * torch.where(Rc.diagonal() < 0, -1.0, 1.0).to(Qc.dtype)
    cond = float(d.min() / d.max()) if d.numel() and float(d.max()) > 0 else 0.0
    return torch.linalg.solve_triangular(R, Q.mT @ C, upper=True), cond


def _full_column_rank(R: Any, tie: float, zero: Any) -> list[bool]:
    """For each group of a stack with QR factors ``R`` (groups x d_k x d_k): whether it has full column rank, every
    diagonal entry of R above ``tie`` times the group's largest, and the group is not 0 (``zero``, a bool per group:
    :meth:`_Canon.zero`, in g . A what a translation left of a zero block).

    Examples
    --------
    >>> import torch
    >>> X = torch.stack([torch.eye(2), torch.tensor([[1.0, 1.0], [1.0, 1.0]]), 1e-12 * torch.eye(2)])
    >>> R = torch.linalg.qr(X)[1]
    >>> _full_column_rank(R, 1e-6, torch.tensor([False, False, False]))  # small is not 0: a gauge's scale is free
    [True, False, True]
    >>> _full_column_rank(R, 1e-6, torch.tensor([False, False, True]))
    [True, False, False]
    """
    d = R.diagonal(dim1=-2, dim2=-1).abs()
    top = d.max(-1, keepdim=True).values
    full = (top[:, 0] > 0) & (d > tie * top).all(-1) & ~zero
    return full.tolist()


def _gauge_stack(lp: dict[str, Any], tag: Any, kv: int) -> Any:
    """One side of a per-head gauge's product for every key/value head's group, stacked (kv x rows x d_k): the
    gauge's axis last, each group's per-query-head blocks one above the other.

    Examples
    --------
    >>> import torch
    >>> lp = {"W_O": [torch.randn(2, 5, dtype=torch.float64) for _ in range(4)]}
    >>> class T: tensor, index, side = "W_O", "head", "left"
    >>> st = _gauge_stack(lp, T, 2)
    >>> st.shape, bool(torch.equal(st[1], torch.cat([lp["W_O"][2], lp["W_O"][3]], 1).T))  # group 1: heads 2, 3
    (torch.Size([2, 10, 2]), True)
    """
    import torch

    x = torch.stack(lp[tag.tensor])
    if tag.side != "right":  # the gauge acts on the rows: its axis last
        x = x.transpose(1, 2)
    return x.reshape(kv, -1, x.shape[-1]) if tag.index == "head" else x


def _rotary_block(A: Any, K: Any, tie: float, q_zero: Any = None, k_zero: Any = None) -> tuple[Any, bool]:
    """The canonical element of the rotary commutant for one key/value head (``rotate_half`` planes (b, b + k)).

    On plane b the element multiplies the complex column ``w_q = A[:, b] + i A[:, b+k]`` by z and the key's by
    1/conj(z); z balances the two norms and makes the largest entry of ``z w_q`` real and positive. Where one
    side of a plane is 0 (a pruned key head), z sets the other side's norm to 1 and its largest entry real and
    positive; where both are, z = 1. A side is 0 where ``q_zero`` or ``k_zero`` (a bool per plane,
    :meth:`_Canon.plane_zero`) says so; by default where it is 0 within the float64 arithmetic of its head
    (:func:`~symtrans.group.relate.zero_cuts`, the planes as they are). A plane whose product ``|w_q| |w_k|`` is
    not negligible (beyond ``tie`` of the head's largest) is live on both sides.

    Examples
    --------
    >>> import torch
    >>> A = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> M, _ = _rotary_block(A, torch.zeros(3, 4, dtype=A.dtype), 1e-6)  # the key head pruned
    >>> B = A @ M
    >>> [round(float(torch.complex(B[:, b], B[:, b + 2]).abs().norm()), 12) for b in range(2)]
    [1.0, 1.0]
    """
    import torch

    from symtrans.group.relate import zero_cuts

    d = A.shape[1]
    k = d // 2
    M = torch.zeros(d, d, dtype=A.dtype)
    tied = False
    planes = [(torch.complex(A[:, b], A[:, b + k]), torch.complex(K[:, b], K[:, b + k])) for b in range(k)]
    nq, nk = ([float(w.abs().norm()) for w in side] for side in zip(*planes))
    sides = []
    for z, ns, X in ((q_zero, nq, A), (k_zero, nk, K)):
        if z is None:  # the planes as they are: 0 within the float64 arithmetic of the head
            n = torch.tensor(ns, dtype=torch.float64)
            z = n <= zero_cuts(n, "float64", int(X.shape[0]))
        sides.append(z.tolist())
    q_zero, k_zero = sides
    prod = [q * x for q, x in zip(nq, nk)]  # what z leaves of a plane: |z w_q| |w_k / conj(z)|
    for b, (wq, wk) in enumerate(planes):
        # a plane 0 on one side (a pruned key or query head) is balanced on the other alone: its norm set to 1.
        # A side is 0 up to the rounding of what it was stored as, which the gauge moves alike: judged against the
        # head's largest plane on that side (with the product negligible), a key plane 3e-7 of the largest was 0
        # in A and live in g . A (the plane's q scaled by 0.1, its k by 10), and the forms were 89% apart
        both = prod[b] > tie * max(prod)
        q_live, k_live = both or not q_zero[b], both or not k_zero[b]
        r = (math.sqrt(nk[b] / nq[b]) if q_live and k_live else 1 / nq[b] if q_live else nk[b] if k_live else 1.0)
        if not q_live:  # the phase from the key's largest entry (the key is multiplied by 1/conj(z))
            wq = wk
        mags = wq.abs()
        top = mags.topk(2).values if mags.numel() > 1 else mags
        tied |= bool(mags.numel() > 1 and float(top[0] - top[1]) <= tie * float(top[0]))
        theta = -float(torch.angle(wq[int(mags.argmax())]))
        c, s = r * math.cos(theta), r * math.sin(theta)
        M[b, b], M[b, b + k], M[b + k, b], M[b + k, b + k] = c, s, -s, c
    return M, tied


def _zeroed_target(s: Any, f: Any) -> dict[str, Any]:
    """The current parameters with the pivot tensors of translation factor ``f`` moved to their canonical value.

    Pivots: ``translate`` tags -> 0 (a final norm bias an untied head absorbs, ``hyperplane_head``:
    ``u / |u|^2``, u = 1/gamma, since the action is undefined where ``<beta, u> = 0``); ``translate_ones`` -> rows
    without their mean; ``hyperplane_weight`` -> projected off 1/gamma; ``translate_rows`` -> tables without their column mean (modulo 1 when centred).
    relate's own translation solver then reads the element off the difference. A model table's centred target
    is not built: its means, all the solver reads of it, are 0 (given in ``s.tgt_means``).
    """
    import torch

    cur = s.cur
    s.tgt_means = {}
    tgt = {k: v for k, v in cur.items() if k != "layers"}
    tgt["layers"] = [dict(lp) for lp in cur["layers"]]
    L = len(cur["layers"])

    # bias -> gain of every norm whose bias an untied head absorbs through the hyperplane (hyperplane_head's via)
    head_bias = {t.via.split(",")[1]: t.via.split(",")[0] for t in f.tags if t.how == "hyperplane_head"}

    def put(tensor: str, l: int | None, fn: Any, index: bool) -> None:
        where = tgt if l is None else tgt["layers"][l]
        if tensor not in where:
            return
        v = where[tensor]
        where[tensor] = [fn(b, h) for h, b in enumerate(v)] if index and isinstance(v, list) else fn(v, None)

    for t in f.tags:
        if t.scope == "prev":  # the norm before each boundary: LN2 of the layer before, or the embedding norm
            first = L - int(s.spec.boundaries("model"))
            for nxt in range(first, L):
                if nxt == 0:
                    tgt["emb_ln_b"] = torch.zeros_like(tgt["emb_ln_b"])
                else:
                    put(t.tensor, nxt - 1, lambda b, h: torch.zeros_like(b), False)
            continue
        layers = [None] if t.scope == "model" else range(L)
        for l in layers:
            if t.how == "translate" and t.tensor in head_bias:
                # an untied head absorbs the final LayerNorm's bias beta through the hyperplane <beta, u> (u = 1/gamma):
                # at <beta, u> = 0 that action is undefined (its v divides by it), so the bias goes to u / |u|^2
                # (<beta, u> = 1), a value of the gain alone, not to 0
                u = 1 / cur[head_bias[t.tensor]]
                put(t.tensor, l, lambda b, h, u=u: (u / float((u * u).sum())).reshape(b.shape), False)
            elif t.how == "translate":
                put(t.tensor, l, lambda b, h: torch.zeros_like(b), bool(t.index))
            elif t.how == "translate_ones":
                if l is None and t.tensor in cur and cur[t.tensor] is not None:  # a model table: only its row means
                    v = cur[t.tensor]  # are read, and the centred table's are 0
                    s.tgt_means[(t.tensor, 1)] = v.new_zeros(v.shape[0], 1)
                else:
                    put(t.tensor, l, lambda b, h: b - b.mean(1, keepdim=True), bool(t.index))
            elif t.how == "hyperplane_weight":
                gain = s.gain_for(t, l, cur)
                if gain is None:
                    continue
                u = (1 / gain).reshape(-1)  # b - u (u^T b) / |u|^2: one rank-one update per block (addr)
                put(t.tensor, l, lambda b, h, u=u, k=-1 / float(u @ u): torch.addr(b, u, u @ b, alpha=k),
                    bool(t.index))
            elif t.how == "translate_rows":
                if l is None and t.tensor in cur:  # a model table: only its column means are read, and the centred
                    v = cur[t.tensor]  # table's are 0 (no centred copy of the word table is built)
                    s.tgt_means[(t.tensor, 0)] = v.new_zeros(1, v.shape[1])
                    s.prescribed.add(t.tensor)
                else:
                    put(t.tensor, l, lambda b, h: b - b.mean(0, keepdim=True), False)
    return tgt


def _refuse_dead_gain_actions(spec: GroupSpec, w: Any) -> None:
    """Refuse a model on which a factor the canonical form fixes acts through ``1/gain`` of a gain holding an exact
    0 (:func:`~symtrans.group.relate.dead_gain_actions`: Llama's residual rotation, a LayerNorm reader's
    hyperplane): that factor is not defined there. Gains fixed by a norm scaling are handled
    (:meth:`_Canon.gain_fixing`); Gemma 3 270M, whose rotation the (1 + w) gain breaks, is not refused.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("llama"); w.tensors["ln2_w"][0, 3] = 0.0
    >>> _refuse_dead_gain_actions(GroupSpec.from_arch(w.arch), w)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: canonical: residual-rotation acts through 1/ln2_w (conjugate_gain), and ln2_w holds 1 gain of exactly 0 (first: layer 0, channel 3): that factor is not defined on this model, so no canonical form modulo it is
    >>> _refuse_dead_gain_actions(GroupSpec.from_arch(w.arch), tiny_decoder("gemma3"))  # nothing to refuse
    """
    from symtrans.group.relate import dead_gain_actions

    dead = dead_gain_actions(spec, w)
    if dead:
        raise SymtransError(f"canonical: {dead[0]}: that factor is not defined on this model, so no canonical form "
                            "modulo it is")


#: canonical's default tie: keys closer than this, relative to the largest, are ties (raised to the storage's resolution)
_TIE = 1e-6


def canonical(model: Any, *, tie: float = _TIE) -> Canonical:
    """The canonical form of ``model`` modulo G (weights, the gauge-fixing element, the remaining ambiguities).

    ``tie``: keys (head and unit norms, singular values) closer than this, relative to the largest, are reported
    as ties: the canonical form does not fix their order. It is at least the coarsest stored dtype's own
    resolution (relate's tolerance for one factor, 8 u: 0.031 at bfloat16), since keys read from stored weights
    differ by that much between two roundings of one orbit.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> c = canonical(load_model("default"))
    >>> float(c.weights.b_K.abs().max()) == 0.0, len(c.ambiguities) > 0  # no keys tie within 1e-6, but
    (True, True)
    >>> all("within their rounding" in a for a in c.ambiguities)  # a few units sit on its edge: rounding can flip them
    True
    """
    from symtrans.group.relate import _load, finite_or_named, max_abs, require_finite

    w = _load(model)
    spec = GroupSpec.from_arch(w.arch)
    _refuse_dead_gain_actions(spec, w)
    # no check closes the canonical form (relate's compares g . A with B, which no NaN passes): the form is read
    # for NaN and Inf, and where it fails (or the solve raises), the input first, to name what holds them
    with finite_or_named("canonical", model=w):
        c = _canonical(w, spec, tie)
    bad = c.weights.first_nonfinite()
    if bad is not None:
        require_finite(w, "canonical", "model")
        raise SymtransError(f"canonical: the form's arithmetic is not finite in tensor {bad} (the largest |value| "
                            f"of the model is {max_abs(w):.3g}; a float64 sum of squares overflows past about 1e154)")
    return c


def _canonical(w: Any, spec: GroupSpec, tie: float) -> Canonical:
    """:func:`canonical` on loaded float64 weights on which every factor of ``spec`` is defined."""
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import LAZY_VALUES, _precision, _timed, fill_unread, relation_tolerance
    from symtrans.threads import single_threaded

    floor = relation_tolerance(w.storage_dtype)[0]
    tie = max(tie, floor)  # closer keys than the storage resolves: a tie
    blocks = model_blocks(w)
    filled = fill_unread(spec, blocks)  # rows no input reads: every gauge fixed from the read rows
    c = _Canon(spec, filled, tie, floor / 2, _precision(w))
    # the word table's translations kept pending (relate's lazy tables: the solve reads its means from the stored
    # table's) and written out once with the weights, not one translated copy per factor
    c.s.lazy_values = LAZY_VALUES
    phases: dict[str, float] = {}
    out: list[Any] = []

    def weights() -> None:
        for name in list(c.s.pending):
            c.s.materialise(name)
        c.write_zeros()
        out.append(weights_from_blocks(w, c.cur, w.weights_hash + "+canonical"))

    with single_threaded():
        for name in ("residual", "scalings", "translations", "heads", "units", "unit_scalings", "gauges"):
            _timed(phases, name, getattr(c, name))
        if filled is not blocks:  # the element applied to the true tables, then their unread rows set to 0
            _timed(phases, "unread rows", lambda: c.s.solve_unread(blocks, None))
        _timed(phases, "in G", lambda: _in_group(spec, c.s.steps))
        _timed(phases, "weights", weights)
    return Canonical(out[0], c.s.steps, c.amb, phases)


def _in_group(spec: GroupSpec, steps: list[dict[str, Any]]) -> None:
    """Refuse a gauge-fixing element that is not one of G's (its form would be another function, not A's).

    Each step is brought onto G (:func:`~symtrans.group.elements.in_group`) and must come back unchanged up to
    the float64 rounding of its own construction, as relate demands of the element it finds.
    """
    from symtrans.group.relate import moved_off_group

    factor = moved_off_group(steps, in_group(spec, steps))
    if factor is not None:
        raise SymtransError(f"canonical: the element that fixes {factor} is not in G (brought onto G it moves beyond "
                            "rounding): the form would not be the same function; please report")


def orbit_distance(a: Any, b: Any) -> dict[str, Any]:
    """Relative Frobenius distance of the canonical forms of ``a`` and ``b``, per tensor and layer, and in all.

    ``absolute`` (``|p . can(A) - can(B)|_F`` over every tensor) is an upper bound of the distance between the
    orbits of A and B, the infimum over g, h in G of ``|g.A - h.B|_F`` (each canonical form lies on its orbit,
    and so does ``p . can(A)`` for any p in G); ``total`` is ``absolute / scale``, ``scale`` the canonical forms'
    size (per tensor the larger of the two norms, summed in squares), so it bounds that infimum divided by the
    same ``scale``. Both are 0 within rounding when B = g . A. ``p`` pairs each layer's heads and FFN units of
    can(A) with can(B)'s nearest (:func:`_paired`), in the layers where that brings the forms closer (``paired``
    lists them): a canonical form orders units by their keys, and two models off one orbit order them apart
    wherever keys cross, so without the pairing one layer moved by 0.1% puts its units 95% apart. Both forms are
    computed with one tie, the coarser storage's (:func:`canonical`'s ``tie``), so ``ambiguities`` are read at it.

    Examples
    --------
    >>> d = orbit_distance("default", "default")
    >>> d["total"] < 1e-12, abs(d["absolute"] - d["total"] * d["scale"]) <= 1e-12 * d["scale"], d["paired"]
    (True, True, [])
    >>> d["bound"][:60]
    'upper bound: inf over g, h in G of |g.A - h.B|_F <= absolute'
    """
    import torch

    from symtrans.group.numeric import model_blocks
    from symtrans.group.relate import _iter_tensors, _load, _same_shape, outside_tensors

    from symtrans.group.relate import relation_tolerance
    from symtrans.precision import unit_roundoff

    A, B = _load(a), _load(b)
    _same_shape(A, B)  # G acts on one architecture and config: across two, no orbit holds both (as relate refuses)
    coarse = max((A.storage_dtype, B.storage_dtype), key=unit_roundoff)
    # both forms by one rule: the tie of the coarser storage (canonical raises its tie to its own storage's floor, so
    # a float16 checkpoint and its float32 copy, the same weights, ordered their keys by two ties, and were 0.22 apart)
    tie = max(_TIE, relation_tolerance(coarse)[0])
    ca, cb = canonical(A, tie=tie), canonical(B, tie=tie)
    blocks_a, blocks_b = model_blocks(ca.weights), model_blocks(cb.weights)
    spec = GroupSpec.from_arch(ca.weights.arch)
    options = [blocks_a, *_paired(spec, blocks_a, blocks_b)]
    tas = [dict(((n, l), v) for n, l, v in _iter_tensors(x)) for x in options]
    tb = [(n, l, v) for n, l, v in _iter_tensors(blocks_b) if (n, l) in tas[0]]
    # a tensor that is zero up to rounding in both forms (e.g. biases the gauge fixing sets to 0) is at distance 0:
    # up to what the coarser storage rounds at its layer's scale (relation_tolerance: 8 u; the form computes such a
    # tensor from the layer's others, and carries their rounding). A float64 floor (1e-12 of the largest tensor)
    # showed the b_Q, b_O, b_in and b_out of two float32 forms of one orbit 100% apart (residues of 1e-7 beside
    # a total distance of 2.4e-7)
    diffs = [{(n, l): float(torch.linalg.norm(ta[(n, l)] - v)) for n, l, v in tb} for ta in tas]
    # per layer the option (as it is, heads paired, units paired, both) nearest can(B): each acts on that layer only
    layer_sq = [{} for _ in diffs]
    for i, dd in enumerate(diffs):
        for (n, l), x in dd.items():
            layer_sq[i][l] = layer_sq[i].get(l, 0.0) + x * x
    pick = {l: min(range(len(diffs)), key=lambda i: (layer_sq[i][l], i)) for l in layer_sq[0]}
    used = {l: i if l is not None else 0 for l, i in pick.items()}  # model tensors: as they are (no pairing)
    # each tensor's size (the larger of the two forms'), read once: the rows' scale, and the layer's largest
    size = {(n, l): max(float(torch.linalg.norm(v)), float(torch.linalg.norm(tas[used[l]][(n, l)]))) for n, l, v in tb}
    scale: dict[Any, float] = {}
    for (_, l), x in size.items():
        scale[l] = max(scale.get(l, 0.0), x)
    floor = {l: relation_tolerance(coarse)[0] * x for l, x in scale.items()}
    labels = ["", "heads", "FFN units", "heads and FFN units"]
    rows, num, den = [], 0.0, 0.0
    for n, l, v in tb:
        diff = diffs[used[l]][(n, l)]
        x = size[(n, l)]
        num, den = num + diff ** 2, den + x ** 2
        rows.append({"tensor": n, "layer": l, "distance": 0.0 if x <= floor[l] else diff / x})
    paired = [f"layer {l}: {labels[i]}" for l, i in sorted(pick.items(), key=lambda x: (x[0] is None, x[0] or 0))
              if l is not None and i]
    return {"total": math.sqrt(num / den) if den else 0.0, "absolute": math.sqrt(num), "scale": math.sqrt(den),
            "per_tensor": rows, "ambiguities": {"a": ca.ambiguities, "b": cb.ambiguities}, "paired": paired,
            "outside": outside_tensors(A, B),
            "bound": "upper bound: inf over g, h in G of |g.A - h.B|_F <= absolute = |p.can(A) - can(B)|_F, since "
                     "can(A), can(B) and p.can(A) (p in G: each layer's heads and FFN units of can(A) paired with "
                     "can(B)'s nearest, where that is closer) lie on the orbits of A and B; total = absolute / scale"}


def _paired(spec: GroupSpec, A: dict[str, Any], B: dict[str, Any]) -> list[dict[str, Any]]:
    """A's blocks with every layer's heads (``S_H``), FFN units (``S_dff``), and both, re-paired to B's nearest
    by relate's matching on G-invariant keys (:meth:`symtrans.group.relate._Solver._match`: head products, unit
    columns and rows): three models on A's orbit (the same blocks where a factor is absent or cannot pair).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> from symtrans.group.numeric import MonomialMatrix, model_blocks
    >>> from symtrans.group.spec import act
    >>> a = model_blocks(load_model("default")); spec = GroupSpec.from_arch("bert-base")
    >>> P = MonomialMatrix(list(range(1, 1536)) + [0], torch.ones(1536, dtype=torch.float64))
    >>> b = act(spec, a, "S_dff", [{"P": P}] * 6)
    >>> _, units, _ = _paired(spec, a, b)
    >>> bool(torch.equal(units["layers"][3]["W_in"], b["layers"][3]["W_in"]))
    True
    """
    import torch

    from symtrans.group.numeric import MonomialMatrix
    from symtrans.group.relate import _Solver
    from symtrans.group.spec import act

    s = _Solver(spec, A, B, lambda n, l: "float64")
    heads_f, units_f = s.present.get("S_H"), s.present.get("S_dff")
    by_heads = by_units = both = A
    if heads_f is not None:
        head_els = []
        for l in range(s.L):
            keys = [torch.cat([x.reshape(x.shape[0], -1) for x in s.head_keys(p, l)], 1) for p in (A, B)]
            pi, _ = s._match(keys[0], keys[1], 0.0, "head", l)
            groups = [{pi[g * s.group + i] // s.group for i in range(s.group)} for g in range(len(pi) // s.group)]
            if any(len(x) != 1 for x in groups):  # a key/value group split: no element of S_H pairs them
                pi, groups = list(range(len(pi))), [{g} for g in range(len(pi) // s.group)]
            head_els.append({"pi": pi, "kappa": [x.pop() for x in groups]})
        by_heads = both = act(spec, A, heads_f.name, head_els)
    if units_f is not None:
        unit_els = []
        for l in range(s.L):
            keys = []
            for p in (A, B):
                lp = p["layers"][l]
                cols = [lp[t.tensor] for t in units_f.tags if t.side == "right" and lp.get(t.tensor) is not None
                        and lp[t.tensor].dim() == 2]
                rows = [lp[t.tensor] for t in units_f.tags if t.side != "right" and lp.get(t.tensor) is not None
                        and lp[t.tensor].dim() == 2]
                keys.append(torch.cat([x.T for x in cols] + rows, 1))
            P, _ = s._match(keys[0], keys[1], 0.0, "FFN unit", l)
            unit_els.append({"P": MonomialMatrix(P, torch.ones(len(P), dtype=keys[0].dtype))})
        by_units = act(spec, A, units_f.name, unit_els)
        both = act(spec, by_heads, units_f.name, unit_els)
    return [by_heads, by_units, both]
