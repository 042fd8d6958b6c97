"""What each factor of G gives the engines: a random element, a Lie-algebra element, exact elements.

The catalogue (:mod:`symtrans.catalogue`) defines each factor once: its tag
table, its coordinates, what breaks it. This module is the other half of that
definition, the constructions that need torch or a choice the data cannot
make: one :class:`FactorElements` per factor, keyed once by the factor's name
in :data:`ELEMENTS`, the way SymPy's ``named_groups`` gives each named group
one builder. The engines ask :func:`elements_of` and never test a factor's
name:

- ``sample``: a random element in torch (:func:`symtrans.group.numeric.sample_element`,
  used by the numeric checks, the gauge, the breaking measurements and relate);
- ``lie``: an element near the identity from Lie-algebra coordinates
  (:func:`symtrans.group.numeric.lie_element`; the tangent directions of
  :mod:`symtrans.group.complete` differentiate it at the identity);
- ``exact``: the SymPy elements that certify the factor, one generic element
  or generators (:func:`symtrans.group.certify.certify_factor`);
- ``unbroken``: the architecture variant without the features that break the
  factor, where the factor is certified when the architecture breaks it.

A factor whose element is its coordinates (translations, gain scalings,
rotations near the identity: :class:`~symtrans.catalogue.model.Piece`) uses
the shared construction :data:`COORDINATES`; a new factor needs one entry here,
and ``tests/test_group_elements.py`` fails for a factor of the catalogue
without one.

It also holds the samplers' building blocks: :func:`sample_gl` and
:class:`MonomialMatrix` (permutations and diagonals applied by indexing).

Raises
------
SymtransError
    :func:`elements_of` for a factor without an entry.

See Also
--------
symtrans.catalogue.factors : the factors' data (tags, coordinates, breaking features)
symtrans.group.action.act : how an element acts on weights

References
----------
The paper's §9 (the factors of G); ``docs/group.md`` derives each factor.

Examples
--------
>>> import torch
>>> from symtrans.group.spec import GroupSpec
>>> spec = GroupSpec.from_arch("minilm-l6-h384")
>>> el, kappa = elements_of(spec, "S_dff").sample(spec, "S_dff", torch.Generator().manual_seed(0), torch.float64, "adjacent")
>>> sorted(el), kappa
(['P'], 1.0)
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy as sp

from symtrans.arch import Architecture
from symtrans.catalogue.model import ROLES
from symtrans.catalogue.spec import GroupSpec, _pieces, generic_element
from symtrans.errors import SymtransError

__all__ = ["FactorElements", "ELEMENTS", "COORDINATES", "ROLES", "STAGES", "Witness", "elements_of", "with_role", "translation_order", "sample_gl", "MonomialMatrix",
           "pair_diagonal", "rotary_planes", "perm_matrix", "generic_matrix"]

ROTARY_PAIRS = ("adjacent", "halves")


STAGES = {
    "scope": "by the factor's scope: the layer, one boundary, the model from token ids, or stage by stage",
    "residual-and-head": "embedding, layer, final norm and head, each equivariant (times Q); RMSNorm keyed by value",
    "final-norm": "pre-LN with a final norm: the layer read through the final norm (the residual is read only "
                  "through norms)",
}
"""How the exact certificate of a factor compares outputs."""

Witness = tuple[Architecture, tuple[str, Any], Architecture]
"""A breaking witness: the architecture, (description, element), the architecture whose tags act."""


# --------------------------------------------------------------------------- building blocks
def sample_gl(k: int, gen: Any, dtype: Any, spread: float = 2.0, count: int | None = None) -> tuple[Any, float]:
    """A random well-conditioned k x k matrix ``U diag(s) V^T`` (QR-based), and its condition number.

    ``U``, ``V`` are Haar-random orthogonal (QR of a Gaussian with the sign
    fix), ``s`` log-uniform in ``[1/spread, spread]``, so ``kappa <= spread^2``.
    With ``count`` it returns ``(matrices, inverses, kappa)`` for a batch, the
    inverses exact from the factors (``V diag(1/s) U^T``).

    Examples
    --------
    >>> import torch
    >>> M, kappa = sample_gl(3, torch.Generator().manual_seed(1), torch.float64)
    >>> abs(float(torch.linalg.cond(M)) - kappa) < 1e-9
    True
    >>> Ms, invs, kappa = sample_gl(3, torch.Generator().manual_seed(1), torch.float64, count=2)
    >>> float((Ms[1] @ invs[1] - torch.eye(3, dtype=torch.float64)).abs().max()) < 1e-14
    True
    """
    import torch

    b = count or 1

    def haar() -> Any:
        Q, R = torch.linalg.qr(torch.randn(b, k, k, generator=gen, dtype=torch.float64))
        return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)

    s = torch.exp((torch.rand(b, k, generator=gen, dtype=torch.float64) * 2 - 1) * math.log(spread))
    U, V = haar(), haar()
    M = U @ torch.diag_embed(s) @ V.transpose(-1, -2)
    Minv = V @ torch.diag_embed(1 / s) @ U.transpose(-1, -2)
    kappa = float((s.max(-1).values / s.min(-1).values).max())
    if count is None:
        return M[0].to(dtype), kappa
    return list(M.to(dtype).unbind(0)), list(Minv.to(dtype).unbind(0)), kappa  # type: ignore[return-value]


class MonomialMatrix:
    """A k x k matrix with one non-zero per row and column, applied by indexing instead of a dense product.

    Column ``j`` has the value ``vals[j]`` in row ``perm[j]``; so ``X @ M`` is
    ``X[:, perm] * vals`` and ``M @ Y`` is ``(Y * vals[:, None])[inv]``.
    Permutations (vals = 1), positive diagonals (perm = id) and signed
    permutations are the elements of S_dff, ffn-scaling and the residual
    factor; :func:`symtrans.group.spec.act` uses them through ``@``, ``.T`` and
    ``inverse()`` like any matrix.

    Examples
    --------
    >>> import torch
    >>> M = MonomialMatrix([2, 0, 1], torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64))
    >>> X = torch.randn(4, 3, dtype=torch.float64)
    >>> ok_apply = bool(torch.allclose(X @ M, X @ M.dense()))
    >>> ok_inverse = bool(torch.allclose(M.inverse().dense() @ M.dense(), torch.eye(3, dtype=torch.float64)))
    >>> ok_apply, ok_inverse
    (True, True)
    """

    def __init__(self, perm: list[int], vals: Any) -> None:
        import torch

        self.perm = torch.as_tensor(perm, dtype=torch.long)
        self.vals = vals
        self.inv = torch.argsort(self.perm)
        # the common special cases skip a whole-tensor pass each (a permutation: no product; a diagonal: no gather)
        self._unit = bool((vals == 1).all())
        self._identity = bool((self.perm == torch.arange(self.perm.numel())).all())

    def dense(self) -> Any:
        """The matrix as a dense tensor."""
        import torch

        k = self.perm.numel()
        M = torch.zeros(k, k, dtype=self.vals.dtype)
        M[self.perm, torch.arange(k)] = self.vals
        return M

    def __rmatmul__(self, X: Any) -> Any:
        if self._identity:
            return X.clone() if self._unit else X * self.vals
        out = _take_columns(X, self.perm)
        return out if self._unit else out.mul_(self.vals)  # the gathered copy is ours: scaled in place

    def __matmul__(self, Y: Any) -> Any:
        if isinstance(Y, MonomialMatrix):
            return MonomialMatrix(self.perm[Y.perm].tolist(), self.vals[Y.perm] * Y.vals)
        if self._identity:
            return Y.clone() if self._unit else Y * self.vals[:, None]
        out = _take_rows(Y, self.inv)
        return out if self._unit else out.mul_(self.vals[self.inv][:, None])

    @property
    def T(self) -> MonomialMatrix:  # noqa: N802 (matrix convention)
        """The transpose."""
        return MonomialMatrix(self.inv.tolist(), self.vals[self.inv])

    def inverse(self) -> MonomialMatrix:
        """The inverse (exact)."""
        return MonomialMatrix(self.inv.tolist(), 1 / self.vals[self.inv])

    def to(self, dtype: Any) -> MonomialMatrix:
        """A copy with values in ``dtype``."""
        return MonomialMatrix(self.perm.tolist(), self.vals.to(dtype))


def _take_columns(X: Any, perm: Any) -> Any:
    """``X[..., perm]`` as a new tensor; a CPU float block of 4096 values or more through NumPy's ``take``, which
    gathers whole rows at a time (2-3x faster than ``index_select`` on the last axis of a 30522 x 384 table, ~2x
    on a 1536 x 384 or a 384 x 32 block), the same values.

    Examples
    --------
    >>> import torch
    >>> X = torch.arange(4 * 2 ** 20, dtype=torch.float64).reshape(-1, 4)
    >>> bool((_take_columns(X, torch.tensor([2, 0, 3, 1])) == X[:, [2, 0, 3, 1]]).all())
    True
    """
    import torch

    if X.numel() >= 4096 and X.device.type == "cpu" and X.dtype in (torch.float32, torch.float64) \
            and not X.requires_grad:
        import numpy as np

        return torch.from_numpy(np.take(X.numpy(), perm.numpy(), axis=-1))
    return X.index_select(-1, perm)


def _take_rows(Y: Any, perm: Any) -> Any:
    """``Y[perm]`` as a new tensor (``Y[..., perm, :]`` for a stack of blocks, so that one call acts on every head's
    block); a CPU float block of 4096 values or more through NumPy's ``take`` along the row axis (4x faster than
    ``index_select`` on a 384 x 1536 block, 3x on a 30522 x 384 table; one thread), the same values.
    :func:`_take_columns`' rule for rows.

    Examples
    --------
    >>> import torch
    >>> Y = torch.arange(4 * 2 ** 12, dtype=torch.float64).reshape(4, -1)
    >>> bool((_take_rows(Y, torch.tensor([2, 0, 3, 1])) == Y[[2, 0, 3, 1]]).all())
    True
    >>> bool((_take_rows(Y.reshape(2, 4, -1), torch.tensor([1, 0, 3, 2])) == Y.reshape(2, 4, -1)[:, [1, 0, 3, 2]]).all())
    True
    """
    import torch

    axis = max(Y.dim() - 2, 0)
    if Y.numel() >= 4096 and Y.device.type == "cpu" and Y.dtype in (torch.float32, torch.float64) \
            and not Y.requires_grad:
        import numpy as np

        return torch.from_numpy(np.take(Y.numpy(), perm.numpy(), axis=axis))
    return Y.index_select(axis, perm)


def _perm(k: int, gen: Any) -> list[int]:
    import torch

    return torch.randperm(k, generator=gen).tolist()


def rotary_planes(r: int, rotary_pairs: str) -> tuple[Any, Any]:
    """The coordinate pairs ``(i[b], j[b])`` among the first ``r`` that the rotary positions rotate together:
    ``adjacent`` (2b, 2b+1) or ``halves`` (b, b + r/2), as index tensors.

    Examples
    --------
    >>> [t.tolist() for t in rotary_planes(6, "halves")], [t.tolist() for t in rotary_planes(4, "adjacent")]
    ([[0, 1, 2], [3, 4, 5]], [[0, 2], [1, 3]])
    >>> rotary_planes(4, "interleaved")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: rotary_pairs must be 'adjacent' or 'halves', got 'interleaved'
    """
    import torch

    _check_pairs(rotary_pairs)
    b = torch.arange(r // 2)
    return (b, b + r // 2) if rotary_pairs == "halves" else (2 * b, 2 * b + 1)


def pair_diagonal(values: Any, d_k: int, rotary: bool, rotary_pairs: str = "adjacent") -> Any:
    """A diagonal of width ``d_k`` equal on each rotated pair: ``adjacent`` (2b, 2b+1) or ``halves`` (b, b + d_k/2).

    Without rotary positions the values are the diagonal itself.

    Examples
    --------
    >>> import torch
    >>> pair_diagonal(torch.tensor([1.0, 2.0]), 4, True, "halves").tolist()
    [1.0, 2.0, 1.0, 2.0]
    >>> pair_diagonal(torch.tensor([1.0, 2.0]), 4, True).tolist()
    [1.0, 1.0, 2.0, 2.0]
    """
    if not rotary:
        return values
    i, j = rotary_planes(d_k, rotary_pairs)
    out = values.new_empty(d_k)
    out[i], out[j] = values, values
    return out


def perm_matrix(perm: list[int]) -> sp.Matrix:
    """P with x P = x[perm] for a row x (column j of P is e_{perm[j]}).

    Examples
    --------
    >>> sp.Matrix([[10, 20, 30]]) @ perm_matrix([2, 0, 1])
    Matrix([[30, 10, 20]])
    """
    k = len(perm)
    return sp.Matrix(k, k, lambda i, j: 1 if i == perm[j] else 0)


def generic_matrix(name: str, k: int) -> sp.Matrix:
    """A k x k matrix of symbols ``name_0, ..., name_{k^2-1}`` (row by row).

    Examples
    --------
    >>> generic_matrix("m", 2)
    Matrix([
    [m_0, m_1],
    [m_2, m_3]])
    """
    return sp.Matrix(k, k, sp.symbols(f"{name}_:{k * k}"))


def _halves_order(k: int) -> list[int]:
    """The coordinate order that takes the adjacent rotary layout to the halves one: (0, 2, 4, ..., 1, 3, 5, ...)."""
    return list(range(0, k, 2)) + list(range(1, k, 2))


def _check_pairs(rotary_pairs: str) -> None:
    if rotary_pairs not in ROTARY_PAIRS:
        raise SymtransError(f"rotary_pairs must be 'adjacent' or 'halves', got {rotary_pairs!r}")


def _sizes(spec: GroupSpec) -> tuple[int, int, int, int, int, int]:
    a = spec.arch
    return int(a.H), int(a.H_kv), int(a.d_k), int(a.d_v), int(a.d_ff), int(a.d_model)


def _as_is(a: Architecture) -> Architecture:
    return a


def _no_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    """A factor whose breaking is witnessed, but that no feature breaks in the catalogue."""
    raise SymtransError(f"no witness construction for {feature}")


def _no_lie(spec: GroupSpec, factor: str, nxt: Any, rotary_pairs: str = "adjacent") -> dict[str, Any]:
    """A discrete factor has no Lie algebra: its tangent space at the identity is zero."""
    raise SymtransError(f"factor {factor!r} is discrete: it has no Lie-algebra coordinates")


# --------------------------------------------------------------------------- the record
@dataclass(frozen=True)
class FactorElements:
    """The constructions one factor of G provides: ``sample``, ``lie``, ``exact`` and ``unbroken``.

    Each takes the spec and the factor's name first (one construction may
    serve several factors, like :data:`COORDINATES`):
    ``sample(spec, factor, gen, dtype, rotary_pairs) -> (element, kappa)``
    (torch, ``kappa`` its condition number, 1 for permutations);
    ``lie(spec, factor, nxt, rotary_pairs) -> element`` (``nxt()`` returns the
    next piece of coordinates, sizes from :meth:`GroupSpec.factor_sizes`; the
    element is the identity at zero and its derivative there is linear in the
    coordinates); ``exact(spec, factor) -> [(description, element)]`` (SymPy);
    ``unbroken(arch) -> arch``.

    ``witness(feature, base, small)``, for a factor whose breaking features
    are shown exactly (:func:`symtrans.group.certify.witness`; None: the
    factor's breaking is not witnessed, like the norm factors'), returns a
    small architecture with ``feature`` switched on, an element outside the
    surviving group and the architecture whose tag table acts (a
    :data:`Witness`), or None for a feature witnessed at the norm level (the
    residual factor: the norm is where a residual map must commute).
    ``small(**sizes)`` is the tiny copy of ``base`` with one query head per
    key/value head.

    What the relate and canonical engines do with the factor follows from
    its catalogue ``role`` (:attr:`symtrans.catalogue.model.Factor.role`,
    read through :func:`with_role`), declared where the factor is built.
    ``stages`` names how the exact certificate compares outputs (one of
    :data:`STAGES`). ``place(spec, element)``, where set, turns an element's
    coordinates into the tensor the tags act on (the unread pad row: one row
    of the word table); :func:`symtrans.group.action.act` calls it.
    ``centre(spec, factor, weights)``, where set, is the factor's part of the
    element that centres every writer into a LayerNorm along the all-ones row
    (TransformerLens's ``centre_writing_weights``;
    :func:`symtrans.group.gauge.centring_element` collects the parts).
    ``translation``, for a translation factor that relate and the canonical
    form fit one after the other, is its place in that sequence (a factor
    whose pivot another's fit moves comes after it: the bias transfers before
    the reader hyperplanes and bias shifts, the centring shift last;
    :func:`translation_order`); ``canonical=False`` leaves the factor out of
    the canonical form (relate still fits it).
    ``member(spec, factor, element, rotary_pairs) -> element``, where set,
    brings an element onto the factor's group as this architecture keeps it
    (:func:`in_factor` calls it after the shapes are checked against the
    factor's own ``sample``): a continuous part is projected, a discrete one
    refused with a :class:`~symtrans.errors.SymtransError` naming what is not
    in the group. ``paired``: the element is a diagonal equal on the two
    coordinates of each rotated pair where the positions are rotary
    (:func:`equal_pairs`).

    Examples
    --------
    >>> ELEMENTS["S_n"].unbroken(GroupSpec.from_arch("gpt2").arch).positional
    'none'
    """

    sample: Callable[..., tuple[dict[str, Any], float]]
    lie: Callable[..., dict[str, Any]]
    exact: Callable[..., list[tuple[str, Any]]]
    unbroken: Callable[[Architecture], Architecture] = _as_is
    witness: Callable[..., Witness | None] | None = None
    stages: str = "scope"
    place: Callable[[GroupSpec, dict[str, Any]], dict[str, Any]] | None = None
    centre: Callable[[GroupSpec, str, Any], Any] | None = None
    translation: int | None = None
    canonical: bool = True
    member: Callable[..., dict[str, Any]] | None = None
    paired: bool = False


# --------------------------------------------------------------------------- factors built from their coordinates
def _coordinate_lie(spec: GroupSpec, factor: str, nxt: Any, rotary_pairs: str = "adjacent") -> dict[str, Any]:
    """Translations are abelian: the element *is* its coordinates; a gain scaling is ``I + diag``; a rotation ``exp(A)``."""
    import torch

    out: dict[str, Any] = {}
    for comp, count, shape in _pieces(spec, factor):
        if comp == "D":
            out["D"] = torch.eye(shape[0], dtype=torch.float64) + torch.diag(nxt())
            continue
        if comp == "A":  # a rotation near the identity: exp of an antisymmetric matrix
            d = shape[0]
            k = d if spec.arch.norm == "rmsnorm" else d - 1  # LayerNorm: antisymmetric on 1^perp (A 1 = 0)
            A = torch.zeros(k, k, dtype=torch.float64)
            iu = torch.triu_indices(k, k, 1)
            A = A.index_put((iu[0], iu[1]), nxt())
            A = A - A.T
            if k < d:  # B: an orthonormal basis of 1^perp
                from symtrans.numeric.linalg import ones_complement

                B = ones_complement(d)
                A = B @ A @ B.T
            out["Q"] = torch.linalg.matrix_exp(A)
            continue
        blocks = [nxt().reshape(shape) for _ in range(count)]
        out[comp] = blocks if count > 1 else blocks[0]
    return out


def _coordinate_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent", *,
                       paired_signs: bool = False) -> tuple[dict[str, Any], float]:
    """Coordinates N(0, 1/4) through ``lie``; a gain scaling becomes ``exp`` of them with random signs.

    ``paired_signs``: one sign per rotated pair, as the scales (the QK-norm gain trade).
    """
    import torch

    sizes = spec.factor_sizes(factor)
    pieces = iter([torch.randn(k, generator=gen, dtype=torch.float64) * 0.5 for k in sizes])
    el = elements_of(spec, factor).lie(spec, factor, lambda: next(pieces), rotary_pairs)
    kappa = 1.0
    if "D" in el:  # a gain scaling: exp of the coordinates, random signs
        blocks = el["D"] if isinstance(el["D"], list) else [el["D"]]  # OLMo 2's gain trade: one per kv head
        out = []
        for block in blocks:
            raw = block.diagonal() - 1
            signs = torch.where(torch.rand(len(raw), generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
            if paired_signs:
                signs = pair_diagonal(signs[: sizes[0]], len(raw), spec.arch.positional == "rotary", rotary_pairs)
            s = torch.exp(raw) * signs
            out.append(torch.diag(s))
            kappa = max(kappa, float(s.abs().max() / s.abs().min()))
        el["D"] = out if isinstance(el["D"], list) else out[0]
    return {k: ([x.to(dtype) for x in v] if isinstance(v, list) else v.to(dtype)) for k, v in el.items()}, kappa


def _coordinate_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    el = generic_element(spec, factor)
    what = "generic diagonal D (symbolic, non-zero)" if "D" in el else "generic translation (all coordinates symbolic)"
    return [(what, el)]


def _coordinate_member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
                       ) -> dict[str, Any]:
    """A gain scaling onto its diagonal; a residual rotation onto O(d) (its polar factor), under LayerNorm also
    onto the maps that keep the all-ones direction (they commute with the mean); translations are free."""
    import torch

    out = dict(element)
    if "D" in out:
        out["D"] = ([_onto_diagonal(factor, D) for D in out["D"]] if isinstance(out["D"], list)
                    else _onto_diagonal(factor, out["D"]))
    if isinstance(out.get("Q"), MonomialMatrix):  # a signed permutation: orthogonal iff every value is +-1
        out = {**out, **_monomial_member("Q", perm=True, values="one-sign")(spec, factor, out, rotary_pairs)}
    elif "Q" in out:
        Q = out["Q"]
        if spec.arch.norm != "rmsnorm":  # the block of 1/sqrt(d) and the block of its complement, each kept
            d = Q.shape[0]
            one = torch.full((d, 1), d ** -0.5, dtype=Q.dtype)
            P = torch.eye(d, dtype=Q.dtype) - one @ one.T
            s = 1.0 if float(one.T @ Q @ one) >= 0 else -1.0
            Q = P @ Q @ P + s * (one @ one.T)
        U, _, Vh = torch.linalg.svd(Q)
        out["Q"] = U @ Vh
    return out


COORDINATES = FactorElements(_coordinate_sample, _coordinate_lie, _coordinate_exact,
                             member=_coordinate_member)
"""The construction of a factor whose element is built from its coordinates alone."""


# --------------------------------------------------------------------------- the per-head gauges
def _gauge_sample(width: str, rotary_commutant: bool) -> Callable[..., tuple[dict[str, Any], float]]:
    def sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
               ) -> tuple[dict[str, Any], float]:
        import torch

        kv, k = int(spec.arch.H_kv), int(getattr(spec.arch, width))
        if not (rotary_commutant and spec.arch.positional == "rotary"):
            mats, invs, kappa = sample_gl(k, gen, dtype, count=kv)  # type: ignore[misc]
            return {"g": mats, "g_inv": invs}, kappa
        _check_pairs(rotary_pairs)
        r = int(spec.arch.rotary_width)  # the rotated coordinates: all, or the first r (GPT-NeoX); the rest free
        order = _halves_order(r)
        mats, kappas = [], []
        for _ in range(kv):  # r (cos t I + sin t J) per 2x2 block: the commutant of the rotations
            M = torch.zeros(r, r, dtype=torch.float64)
            scale = torch.exp(torch.rand(r // 2, generator=gen, dtype=torch.float64) - 0.5)
            angle = torch.rand(r // 2, generator=gen, dtype=torch.float64) * 2 * math.pi
            for b in range(r // 2):
                c, s = scale[b] * torch.cos(angle[b]), scale[b] * torch.sin(angle[b])
                M[2 * b:2 * b + 2, 2 * b:2 * b + 2] = torch.stack([torch.stack([c, s]), torch.stack([-s, c])])
            if rotary_pairs == "halves":
                M = M[order][:, order]
            kappa = float(scale.max() / scale.min())
            if r < k:  # GL(d_k - r) on the position-free coordinates, block-diagonal beside the commutant
                (P,), _, kp = sample_gl(k - r, gen, torch.float64, count=1)  # type: ignore[misc]
                M = torch.block_diag(M, P)
                kappa = max(kappa, kp)
            mats.append(M.to(dtype))
            kappas.append(kappa)
        return {"g": mats}, max(kappas)

    return sample


def _gauge_lie(width: str, rotary_commutant: bool) -> Callable[..., dict[str, Any]]:
    def lie(spec: GroupSpec, factor: str, nxt: Any, rotary_pairs: str = "adjacent") -> dict[str, Any]:
        import torch

        kv, k = int(spec.arch.H_kv), int(getattr(spec.arch, width))
        eye = torch.eye(k, dtype=torch.float64)
        if not (rotary_commutant and spec.arch.positional == "rotary"):
            return {"g": [eye + nxt().reshape(k, k) for _ in range(kv)]}
        _check_pairs(rotary_pairs)
        J = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
        r = int(spec.arch.rotary_width)  # partial rotary: the commutant on r coordinates (+) GL(d_k - r)
        order, mats = _halves_order(r), []
        for _ in range(kv):  # a I + b J per 2x2 block
            t = nxt()
            M = torch.block_diag(*[t[2 * b] * torch.eye(2, dtype=torch.float64) + t[2 * b + 1] * J
                                   for b in range(r // 2)])
            if rotary_pairs == "halves":
                M = M[order][:, order]
            if r < k:
                M = torch.block_diag(M, t[r:].reshape(k - r, k - r))
            mats.append(eye + M)
        return {"g": mats}

    return lie


def _qk_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    a = spec.arch
    if a.positional == "rotary":
        blocks = []
        for g in range(a.H_kv):
            pieces = []
            for b in range(a.d_k // 2):
                x, y = sp.symbols(f"a{g}_{b} b{g}_{b}")
                pieces.append(sp.Matrix([[x, y], [-y, x]]))
            blocks.append(sp.diag(*pieces))
        return [("generic commutant element (a I + b J per 2x2 block, symbolic)", {"g": blocks})]
    return [("generic M_g (all entries symbolic)", {"g": [generic_matrix(f"m{g}", a.d_k) for g in range(a.H_kv)]})]


def _vo_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    a = spec.arch
    return [("generic N_g (all entries symbolic)", {"g": [generic_matrix(f"n{g}", a.d_v) for g in range(a.H_kv)]})]


# --------------------------------------------------------------------------- the softmax and b_O bias shifts
def _shift_pad(spec: GroupSpec, key: str) -> int:
    """Coordinates a key shift must leave alone: the rotated ones of a partial-rotary head (full rotary breaks it)."""
    return int(spec.arch.rotary_width) if key == "u" and spec.arch.partial_rotary_factor != 1 else 0


def _shift_sample(key: str, width: str) -> Callable[..., tuple[dict[str, Any], float]]:
    def sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
               ) -> tuple[dict[str, Any], float]:
        import torch

        k, pad = int(getattr(spec.arch, width)), _shift_pad(spec, key)
        return {key: [torch.cat([torch.zeros(1, pad, dtype=torch.float64),
                                 torch.randn(1, k - pad, generator=gen, dtype=torch.float64)], 1).to(dtype)
                      for _ in range(int(spec.arch.H_kv))]}, 1.0

    return sample


def _shift_lie(key: str) -> Callable[..., dict[str, Any]]:
    def lie(spec: GroupSpec, factor: str, nxt: Any, rotary_pairs: str = "adjacent") -> dict[str, Any]:
        import torch

        pad = torch.zeros(_shift_pad(spec, key), dtype=torch.float64)
        return {key: [torch.cat([pad, nxt()]).reshape(1, -1) for _ in range(int(spec.arch.H_kv))]}

    return lie


def _shift_exact(key: str, width: str) -> Callable[..., list[tuple[str, Any]]]:
    def exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
        k = getattr(spec.arch, width)
        return [(f"generic {key}_g (symbolic)",
                 {key: [sp.Matrix([sp.symbols(f"{key}{g}_:{k}")]) for g in range(spec.arch.H_kv)]})]

    return exact


def _learned_positions(a: Architecture) -> Architecture:
    """Learned positions instead of rotary or sinusoidal ones (which break the factor)."""
    import dataclasses

    return dataclasses.replace(a, positional="learned")


def _with_output_bias(a: Architecture) -> Architecture:
    """Q, K, V biases only: the variant where b_O exists (and absorbs b_V W_O^h)."""
    import dataclasses

    return a if a.bias else dataclasses.replace(a, bias=True, qkv_bias=False)


# --------------------------------------------------------------------------- head and hidden-unit permutations
def _heads_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                  ) -> tuple[dict[str, Any], float]:
    H, kv = int(spec.arch.H), int(spec.arch.H_kv)
    group = H // kv
    kappa_perm = _perm(kv, gen)
    pi = []
    for g in kappa_perm:
        inner = _perm(group, gen)
        pi += [g * group + i for i in inner]
    return {"pi": pi, "kappa": kappa_perm}, 1.0


def _heads_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    H, kv = spec.arch.H, spec.arch.H_kv
    group = H // kv
    out = []
    if group > 1:  # swap two query heads inside the first key/value group
        pi = list(range(H))
        pi[0], pi[1] = 1, 0
        out.append(("generator: swap of two query heads in one key/value group", {"pi": pi, "kappa": list(range(kv))}))
    if kv > 1:  # swap the first two key/value groups with their query heads
        pi = [(h + group) % (2 * group) if h < 2 * group else h for h in range(H)]
        out.append(("generator: swap of two key/value groups with their heads",
                    {"pi": pi, "kappa": [1, 0] + list(range(2, kv))}))
        if kv > 2:
            pi = [((h // group + 1) % kv) * group + h % group for h in range(H)]
            out.append(("generator: cycle of the key/value groups", {"pi": pi, "kappa": [(g + 1) % kv for g in range(kv)]}))
    return out


def _hidden_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                   ) -> tuple[dict[str, Any], float]:
    import torch

    d_ff = int(spec.arch.d_ff)
    return {"P": MonomialMatrix(_perm(d_ff, gen), torch.ones(d_ff, dtype=dtype))}, 1.0


def _hidden_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    d_ff = spec.arch.d_ff
    out = [("generator: transposition (0 1)", {"P": perm_matrix([1, 0] + list(range(2, d_ff)))})]
    if d_ff > 2:
        out.append(("generator: cycle (0 1 ... d_ff-1)", {"P": perm_matrix(list(range(1, d_ff)) + [0])}))
    return out


# --------------------------------------------------------------------------- FFN and gate scalings
def _ffn_scaling_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                        ) -> tuple[dict[str, Any], float]:
    import torch

    d_ff = int(spec.arch.d_ff)
    s = torch.exp(torch.rand(d_ff, generator=gen, dtype=torch.float64) - 0.5)
    if spec.arch.ffn == "gated":
        s = s * torch.where(torch.rand(d_ff, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    return {"D": MonomialMatrix(list(range(d_ff)), s.to(dtype))}, float(s.abs().max() / s.abs().min())


def _ffn_scaling_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    pos, d_ff = spec.arch.ffn != "gated", spec.arch.d_ff
    syms = sp.symbols(f"s_:{d_ff}", positive=True) if pos else sp.symbols(f"s_:{d_ff}", nonzero=True)
    return [("generic diagonal D (symbolic" + (", positive)" if pos else ", non-zero)"), {"D": sp.diag(*syms)})]


def _relu(a: Architecture) -> Architecture:
    """A ReLU activation (positively homogeneous) instead of the one that breaks the scaling."""
    import dataclasses

    return dataclasses.replace(a, activation="relu")


def _gate_scaling_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                         ) -> tuple[dict[str, Any], float]:
    import torch

    d_ff = int(spec.arch.d_ff)  # positive: relu(d t) = d relu(t) for d > 0 only
    s = torch.exp(torch.rand(d_ff, generator=gen, dtype=torch.float64) - 0.5)
    return {"D": MonomialMatrix(list(range(d_ff)), s.to(dtype))}, float(s.max() / s.min())


def _gate_scaling_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:  # relu's homogeneity needs d > 0
    return [("generic diagonal D (symbolic, positive)", {"D": sp.diag(*sp.symbols(f"s_:{spec.arch.d_ff}", positive=True))})]


# --------------------------------------------------------------------------- the QK-norm gain trade
def _gain_trade_lie(spec: GroupSpec, factor: str, nxt: Any, rotary_pairs: str = "adjacent") -> dict[str, Any]:
    """``I + diag`` equal on each rotated pair; OLMo 2 (a norm over all heads): one per key/value head."""
    import torch

    a = spec.arch
    d_k, rot = int(a.d_k), a.positional == "rotary"
    blocks = [torch.eye(d_k, dtype=torch.float64) + torch.diag(pair_diagonal(nxt(), d_k, rot, rotary_pairs))
              for _ in range(int(a.H_kv) if a.qk_norm_full else 1)]
    return {"D": blocks if a.qk_norm_full else blocks[0]}


def _gain_trade_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                       ) -> tuple[dict[str, Any], float]:
    return _coordinate_sample(spec, factor, gen, dtype, rotary_pairs, paired_signs=True)


# --------------------------------------------------------------------------- token and residual permutations
def _tokens_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                   ) -> tuple[dict[str, Any], float]:
    return {"P": _perm(int(spec.arch.n), gen)}, 1.0


def _tokens_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    n = spec.arch.n
    out = [("generator: transposition of tokens (0 1)", {"P": [1, 0] + list(range(2, n))})]
    if n > 2:
        out.append(("generator: cycle of the tokens", {"P": list(range(1, n)) + [0]}))
    return out


def _no_positions(a: Architecture) -> Architecture:
    """No positions and bidirectional attention: nothing tells the tokens apart."""
    import dataclasses

    return dataclasses.replace(a, positional="none", attention="bidirectional")


def _residual_permutation_sample(spec: GroupSpec, factor: str, gen: Any, dtype: Any, rotary_pairs: str = "adjacent"
                                 ) -> tuple[dict[str, Any], float]:
    import torch

    d = int(spec.arch.d_model)
    if spec.arch.norm == "rmsnorm":
        signs = torch.where(torch.rand(d, generator=gen) < 0.5, -1.0, 1.0)
    else:
        signs = torch.full((d,), -1.0 if float(torch.rand(1, generator=gen)) < 0.5 else 1.0)
    return {"Q": MonomialMatrix(_perm(d, gen), signs.to(dtype))}, 1.0


def _residual_permutation_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    d = spec.arch.d_model
    out = [("generator: transposition (0 1) of residual coordinates", {"Q": perm_matrix([1, 0] + list(range(2, d)))}),
           ("generator: cycle of residual coordinates", {"Q": perm_matrix(list(range(1, d)) + [0])})]
    if spec.arch.norm == "rmsnorm":
        out.append(("generator: sign flip of one coordinate", {"Q": sp.diag(-1, *[1] * (d - 1))}))
    else:
        out.append(("generator: -I", {"Q": -sp.eye(d)}))
    return out


def _residual_rotation_exact(spec: GroupSpec, factor: str) -> list[tuple[str, Any]]:
    """Generators of O(d): the rotations of one plane and the permutation matrices.

    Their conjugates P R_01 P^T are the rotations of every plane, which
    generate SO(d); a transposition has det -1. The action is a group action,
    so invariance under these is invariance under O(d). The rotation is
    generic: c = (1 - t^2)/(1 + t^2), s = 2t/(1 + t^2) with t symbolic.
    """
    d = spec.arch.d_model
    t = sp.Symbol("t")
    c, s_ = (1 - t**2) / (1 + t**2), 2 * t / (1 + t**2)
    if spec.arch.norm == "rmsnorm":
        R = sp.eye(d)
        R[0, 0] = R[1, 1] = c
        R[0, 1], R[1, 0] = -s_, s_
        plane = "(0, 1)"
    else:  # LayerNorm: O(d-1) on 1^perp; at d = 4, u, v below span a plane of 1^perp, and S_4 acts
        # irreducibly on the rotations of 1^perp, so the plane's conjugates generate them all
        if d != 4:
            raise SymtransError("the LayerNorm residual-rotation certificate is built for d_model = 4")
        u = sp.Matrix([[1, -1, 1, -1]]) / 2
        v = sp.Matrix([[1, 1, -1, -1]]) / 2
        R = sp.eye(d) + (c - 1) * (u.T @ u + v.T @ v) + s_ * (u.T @ v - v.T @ u)
        plane = "spanned by (1, -1, 1, -1), (1, 1, -1, -1) in 1^perp"
    return [(f"generator: generic rotation of the plane {plane} (t symbolic)", {"Q": R}),
            ("generator: transposition (0 1) of residual coordinates", {"Q": perm_matrix([1, 0] + list(range(2, d)))}),
            ("generator: cycle of residual coordinates", {"Q": perm_matrix(list(range(1, d)) + [0])})]


# --------------------------------------------------------------------------- breaking witnesses
def _shear(a: Architecture) -> dict[str, Any]:
    return {"g": [sp.Matrix([[1, 1], [0, 1]])] * a.H_kv}


def _shared_gauge(letter: str, small: Callable[..., Architecture]) -> Witness:
    """Grouped-query attention: one matrix per key/value head, so two query heads of a group cannot differ."""
    import dataclasses

    a = small(H=2, H_kv=1)  # per-query-head tags: one matrix per query head
    return a, (f"different {letter} for the two query heads sharing one key/value head",
               {"g": [sp.Matrix([[2, 1], [0, 1]]), sp.eye(2)]}), dataclasses.replace(a, H_kv=a.H)


def _partial_rotary(small: Callable[..., Architecture]) -> Architecture:
    """A small GPT-NeoX-like head: d_k = 4, the first 2 coordinates rotate (partial_rotary_factor 1/2)."""
    import dataclasses

    return dataclasses.replace(small(d_k=4), positional="rotary", partial_rotary_factor=0.5, bias=True)


def _qk_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    import dataclasses

    if feature == "grouped-query attention":
        return _shared_gauge("M", small)
    if feature == "rotary positions":
        a = dataclasses.replace(small(), positional="rotary", bias=True)
        return a, ("a shear M = [[1, 1], [0, 1]] (not in the commutant of the rotations)", _shear(a)), a
    if feature == "partial rotary positions (GPT-NeoX's rotary_pct)":
        a = _partial_rotary(small)
        M = sp.eye(4)
        M[0, 2] = 1  # a rotated coordinate feeds a position-free one: M is not block-diagonal
        return a, ("M = I + E_02 (couples rotated coordinate 0 to position-free coordinate 2) on every key/value "
                   "head", {"g": [M] * a.H_kv}), a
    if feature == "QK-norm":
        a = dataclasses.replace(small(), qk_norm=True)  # RMS-normalised queries and keys: a diagonal trade survives
        return a, ("a shear M = [[1, 1], [0, 1]] (neither orthogonal nor diagonal) on every key/value head",
                   _shear(a)), a
    raise SymtransError(f"no witness construction for qk-gauge / {feature}")


def _vo_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    if feature == "grouped-query attention":
        return _shared_gauge("N", small)
    raise SymtransError(f"no witness construction for vo-gauge / {feature}")


def _key_shift_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    import dataclasses

    if feature == "rotary positions":
        a = dataclasses.replace(small(), positional="rotary", bias=True)
        return a, ("u = (1, 0) per key/value head", {"u": [sp.Matrix([[1, 0]])] * a.H_kv}), a
    if feature == "partial rotary positions (GPT-NeoX's rotary_pct)":
        a = _partial_rotary(small)
        return a, ("u = (1, 0, 0, 0) per key/value head (a shift of a rotated coordinate)",
                   {"u": [sp.Matrix([[1, 0, 0, 0]])] * a.H_kv}), a
    raise SymtransError(f"no witness construction for key-bias-shift / {feature}")


def _value_shift_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    import dataclasses

    if feature.startswith("Q, K, V-only biases"):
        a = dataclasses.replace(small(), bias=False, qkv_bias=True)  # b_V without b_O: nothing absorbs b_V W_O^h
        return a, ("v = (1, 0) per key/value head, no b_O to absorb it", {"v": [sp.Matrix([[1, 0]])] * a.H_kv}), a
    raise SymtransError(f"no witness construction for value-bias-shift / {feature}")


def _heads_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    if feature == "grouped-query attention":
        a = small(H=4, H_kv=2, d_k=2 if base.positional == "rotary" else 1, d_v=1)  # rotary: even d_k
        return a, ("a query-head swap across key/value groups (pi = (1 2), kappa = id)",
                   {"pi": [0, 2, 1, 3], "kappa": [0, 1]}), a
    raise SymtransError(f"no witness construction for S_H / {feature}")


def _ffn_scaling_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    import dataclasses

    a = dataclasses.replace(small(), activation=base.activation if base.activation != "relu" else "gelu", ffn="mlp")
    return a, (f"D = diag(2, 1) with {a.activation}", {"D": sp.diag(2, 1)}), a


def _tokens_witness(feature: str, base: Architecture, small: Callable[..., Architecture]) -> Witness | None:
    import dataclasses

    rep = dataclasses.replace
    if feature == "rotary positions":
        a = rep(small(), positional="rotary", bias=True)
    elif feature == "causal mask":
        a = rep(small(), attention="causal", positional="none")
    elif feature == "sinusoidal positions":
        a = rep(small(), positional="sinusoidal", attention="bidirectional")
    else:
        a = rep(small(), positional="learned", attention="bidirectional")
    return a, ("token transposition (0 1)", {"P": [1, 0, 2]}), a


def _residual_permutation_witness(feature: str, base: Architecture, small: Callable[..., Architecture]
                                  ) -> Witness | None:
    import dataclasses

    if feature != "sinusoidal positions":
        return None  # the norm features: witnessed at the norm, where a residual map must commute
    a = dataclasses.replace(small(), positional="sinusoidal")
    return a, ("transposition (0 1) of residual coordinates", {"Q": perm_matrix([1, 0, 2, 3])}), a


# --------------------------------------------------------------------------- the unread pad row
def _pad_row_element(spec: GroupSpec, element: dict[str, Any]) -> dict[str, Any]:
    """``unread-pad-row``'s element (r, 1 x d_model) as a move of the whole word table: r on the pad row, else 0."""
    from symtrans.catalogue.model import unread_pad_id

    r, k, V = element["r"], unread_pad_id(spec.arch), int(spec.arch.vocab_size)
    if k is None or r.shape[0] != 1:
        return element
    if isinstance(r, sp.MatrixBase):
        return {"r": sp.Matrix.vstack(sp.zeros(k, r.shape[1]), r, sp.zeros(V - k - 1, r.shape[1]))}
    return {"r": sys.modules["torch"].cat([r.new_zeros(k, r.shape[1]), r, r.new_zeros(V - k - 1, r.shape[1])])}



def _centre_writers(spec: GroupSpec, factor: str, weights: Any) -> list[dict[str, Any]]:
    """Per layer, ``w_O^h = -W_O^h 1 / d``, ``w_out = -W_out 1 / d``, ``c_O = -mean(b_O)``, ``c_out = -mean(b_out)``."""
    d = int(weights.d_model)
    per_layer = []
    for i in range(weights.n_layers):
        lay = weights.layer(i, shared_kv=True)
        el: dict[str, Any] = {"w_O": [-(Wh.sum(-1, keepdim=True) / d) for Wh in lay["W_O"].unbind(0)],
                              "w_out": -(lay["W_out"].sum(-1, keepdim=True) / d)}
        if spec.arch.bias:
            el["c_O"] = -(lay["b_O"].mean().reshape(1, 1))
            el["c_out"] = -(lay["b_out"].mean().reshape(1, 1))
        per_layer.append(el)
    return per_layer


def _centre_tables(spec: GroupSpec, factor: str, weights: Any) -> dict[str, Any]:
    """Each embedding table's row means removed, one component per table the factor's tags name."""
    d = int(weights.d_model)
    emb = {}
    for t in spec.factor(factor).tags:
        table = weights.tensors.get(t.tensor)
        if table is not None:
            emb[t.component] = -(table.sum(-1, keepdim=True) / d)
    return emb


# --------------------------------------------------------------------------- membership: onto the group kept
def _refuse(factor: str, what: str) -> SymtransError:
    return SymtransError(f"{factor}: the element is not in the factor's group: {what}")


def onto_rotary_commutant(M: Any, r: int, rotary_pairs: str = "halves") -> Any:
    """``M`` projected onto the matrices that commute with every rotary rotation of its first ``r`` coordinates.

    Each rotated plane keeps its part ``a I + b J`` (a scaled rotation), nothing couples two planes or a plane
    with the ``d_k - r`` coordinates no position rotates, which keep their block (GL there). An element of
    that group is its own projection.

    Examples
    --------
    >>> import torch
    >>> M = torch.arange(16.0, dtype=torch.float64).reshape(4, 4)
    >>> onto_rotary_commutant(M, 4, "adjacent").tolist()  # planes (0, 1), (2, 3): a = mean diagonal, b = mean skew
    [[2.5, -1.5, 0.0, 0.0], [1.5, 2.5, 0.0, 0.0], [0.0, 0.0, 12.5, -1.5], [0.0, 0.0, 1.5, 12.5]]
    >>> bool((onto_rotary_commutant(onto_rotary_commutant(M, 2), 2) == onto_rotary_commutant(M, 2)).all())
    True
    """
    import torch

    i, j = rotary_planes(r, rotary_pairs)
    a = (M[i, i] + M[j, j]) / 2
    b = (M[i, j] - M[j, i]) / 2
    out = torch.zeros_like(M)
    out[i, i], out[j, j], out[i, j], out[j, i] = a, a, b, -b
    out[r:, r:] = M[r:, r:]
    return out


def _gauge_member(rotary_commutant: bool) -> Callable[..., dict[str, Any]]:
    def member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
               ) -> dict[str, Any]:
        import torch

        # a supplied inverse is not trusted: the action recomputes it from g
        g = list(element["g"])
        if rotary_commutant and spec.arch.positional == "rotary":
            g = [onto_rotary_commutant(M, int(spec.arch.rotary_width), rotary_pairs) for M in g]
        for i, M in enumerate(g):
            if int(torch.linalg.inv_ex(M).info):
                raise _refuse(factor, f"its matrix for key/value head {i} is singular")
        return {"g": g}

    return member


def _shift_member(key: str) -> Callable[..., dict[str, Any]]:
    def member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
               ) -> dict[str, Any]:
        import torch

        pad = _shift_pad(spec, key)  # the rotated coordinates of a partial-rotary head: left alone
        if not pad:
            return {key: list(element[key])}
        return {key: [torch.cat([u.new_zeros(u.shape[0], pad), u[:, pad:]], 1) for u in element[key]]}

    return member


def _heads_member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
                  ) -> dict[str, Any]:
    H, kv = int(spec.arch.H), int(spec.arch.H_kv)
    group = H // kv
    pi, kappa = list(element["pi"]), list(element["kappa"])
    if sorted(pi) != list(range(H)) or sorted(kappa) != list(range(kv)):
        raise _refuse(factor, "pi is not a permutation of the heads or kappa of the key/value heads")
    moved = [h for h in range(H) if pi[h] // group != kappa[h // group]]
    if moved:
        raise _refuse(factor, f"query head {pi[moved[0]]} leaves the key/value head it reads (pi and kappa disagree "
                      f"at position {moved[0]}; {group} query head(s) per key/value head)")
    return {"pi": pi, "kappa": kappa}


def _not_reordering(factor: str, M: MonomialMatrix) -> None:
    """Refuse a scaling stored as a permutation with values whose permutation is not the identity."""
    import torch

    if not bool((M.perm == torch.arange(M.perm.numel())).all()):
        raise _refuse(factor, "a scaling must not reorder (its permutation is not the identity)")


def _as_monomial(factor: str, M: Any) -> MonomialMatrix:
    """``M`` as a :class:`MonomialMatrix` (a dense one converted); refused unless one non-zero per row and column."""
    if isinstance(M, MonomialMatrix):
        return M
    nz = M != 0
    if not (bool((nz.sum(0) == 1).all()) and bool((nz.sum(1) == 1).all())):
        raise _refuse(factor, "not a permutation with values (one non-zero per row and column)")
    rows = nz.to(M.dtype).argmax(0)  # column j's non-zero sits in row rows[j]
    return MonomialMatrix(rows.tolist(), M[rows, range(M.shape[1])])


def _monomial_member(component: str, *, perm: bool, values: str) -> Callable[..., dict[str, Any]]:
    """A permutation with values: ``perm`` whether it may reorder; ``values`` one of ``one``, ``sign``,
    ``one-sign`` (one sign for all), ``positive``, ``non-zero``, ``positive-unless-gated``."""

    def member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
               ) -> dict[str, Any]:

        M = _as_monomial(factor, element[component])
        if not perm:
            _not_reordering(factor, M)
        v = M.vals
        rule = _resolved_values(spec, values)
        bad = {"one": v != 1, "sign": v.abs() != 1, "positive": ~(v > 0), "non-zero": ~(v != 0) | ~v.isfinite(),
               "one-sign": (v.abs() != 1) | (v != v[:1])}[rule]
        if bool(bad.any()):
            at = int(bad.nonzero()[0])
            raise _refuse(factor, f"value {float(v[at]):.6g} at {at}; the group needs "
                          + {"one": "a permutation (every value 1)", "sign": "values +-1",
                             "positive": "positive values", "non-zero": "non-zero values",
                             "one-sign": "values all +1 or all -1"}[rule])
        return {component: M}

    member.values = values  # type: ignore[attr-defined]  # read by :func:`values_rule`
    return member


def _resolved_values(spec: GroupSpec, values: str) -> str:
    """A :func:`_monomial_member` rule for ``spec``'s architecture: ``positive-unless-gated`` and ``one-sign``
    resolved (one of ``one``, ``sign``, ``one-sign``, ``positive``, ``non-zero``)."""
    if values == "positive-unless-gated":
        return "non-zero" if spec.arch.ffn == "gated" else "positive"
    if values == "one-sign" and spec.arch.norm == "rmsnorm":
        return "sign"  # RMSNorm commutes with every signed permutation, LayerNorm with +-P only
    return values


def values_rule(spec: GroupSpec, factor: str) -> str | None:
    """The values a permutation-with-values factor's element may take on ``spec``'s architecture (``one``,
    ``sign``, ``one-sign``, ``positive``, ``non-zero``), as its membership test reads them; None for a factor
    whose element is not a permutation with values. A unit scaling that is ``positive`` (ReLU's) fixes each
    unit's sign: keys that read a unit's inputs up to that scaling keep the sign.

    Examples
    --------
    >>> bert, llama = GroupSpec.from_arch("bert-base"), GroupSpec.from_arch("llama2-7b")
    >>> values_rule(bert, "ffn-scaling"), values_rule(llama, "ffn-scaling"), values_rule(llama, "qk-gauge")
    ('positive', 'non-zero', None)
    """
    rule = getattr(elements_of(spec, factor).member, "values", None)
    return None if rule is None else _resolved_values(spec, rule)


def _onto_diagonal(factor: str, D: Any, pairs: Any = None) -> Any:
    """A gain scaling (dense, or a :class:`MonomialMatrix` that must not reorder) onto its non-zero diagonal, made
    equal on each of ``pairs`` (two index tensors) where given; in the representation it came in."""
    import torch

    if isinstance(D, MonomialMatrix):
        _not_reordering(factor, D)
        d = D.vals
    else:
        d = D.diagonal()
    if pairs is not None:
        i, j = pairs
        d = d.clone()
        d[i] = d[j] = (d[i] + d[j]) / 2
    if not bool((d != 0).all() and d.isfinite().all()):
        raise _refuse(factor, "a gain scaling needs a non-zero diagonal" + (" (a rotated pair's two gains of "
                                                                              "opposite signs average to 0)"
                                                                              if pairs is not None else ""))
    return MonomialMatrix(D.perm.tolist(), d) if isinstance(D, MonomialMatrix) else torch.diag(d)


def _gain_trade_member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
                       ) -> dict[str, Any]:
    """Onto diagonals equal on each rotated pair (the rotations must commute with the traded gain)."""

    pairs = equal_pairs(spec, factor, rotary_pairs)
    D = element["D"]
    return {"D": [_onto_diagonal(factor, x, pairs) for x in D] if isinstance(D, list)
            else _onto_diagonal(factor, D, pairs)}


def _tokens_member(spec: GroupSpec, factor: str, element: dict[str, Any], rotary_pairs: str = "halves"
                   ) -> dict[str, Any]:
    if sorted(element["P"]) != list(range(int(spec.arch.n))):
        raise _refuse(factor, "P is not a permutation of the tokens")
    return {"P": list(element["P"])}


# --------------------------------------------------------------------------- the registry
ELEMENTS: dict[str, FactorElements] = {
    "qk-gauge": FactorElements(_gauge_sample("d_k", True), _gauge_lie("d_k", True), _qk_exact,
                               witness=_qk_witness, member=_gauge_member(True)),
    "vo-gauge": FactorElements(_gauge_sample("d_v", False), _gauge_lie("d_v", False), _vo_exact,
                               witness=_vo_witness, member=_gauge_member(False)),
    "key-bias-shift": FactorElements(_shift_sample("u", "d_k"), _shift_lie("u"), _shift_exact("u", "d_k"),
                                     _learned_positions, witness=_key_shift_witness, translation=11,
                                     member=_shift_member("u")),
    "value-bias-shift": FactorElements(_shift_sample("v", "d_v"), _shift_lie("v"), _shift_exact("v", "d_v"),
                                       _with_output_bias, witness=_value_shift_witness, translation=12,
                                       member=_shift_member("v")),
    "S_H": FactorElements(_heads_sample, _no_lie, _heads_exact, witness=_heads_witness, member=_heads_member),
    "S_dff": FactorElements(_hidden_sample, _no_lie, _hidden_exact, witness=_no_witness,
                            member=_monomial_member("P", perm=True, values="one")),
    "ffn-scaling": FactorElements(_ffn_scaling_sample, _coordinate_lie, _ffn_scaling_exact, _relu,
                                  witness=_ffn_scaling_witness,
                                  member=_monomial_member("D", perm=False, values="positive-unless-gated")),
    "gate-scaling": FactorElements(_gate_scaling_sample, _coordinate_lie, _gate_scaling_exact,
                                   member=_monomial_member("D", perm=False, values="positive")),
    "qk-norm-gain-trade": FactorElements(_gain_trade_sample, _gain_trade_lie, _coordinate_exact,
                                         member=_gain_trade_member, paired=True),
    "S_n": FactorElements(_tokens_sample, _no_lie, _tokens_exact, _no_positions, witness=_tokens_witness,
                          member=_tokens_member),
    "residual-permutation": FactorElements(_residual_permutation_sample, _no_lie, _residual_permutation_exact,
                                           _learned_positions, witness=_residual_permutation_witness,
                                           member=_monomial_member("Q", perm=True, values="one-sign")),
    "residual-rotation": FactorElements(_coordinate_sample, _coordinate_lie, _residual_rotation_exact,
                                        stages="residual-and-head", member=_coordinate_member),
    "centring-shift": dataclasses.replace(COORDINATES, stages="final-norm", centre=_centre_writers, translation=13),
    "embedding-centring-shift": dataclasses.replace(COORDINATES, centre=_centre_tables, translation=2),
    "embedding-translation": dataclasses.replace(COORDINATES, translation=1),
    "unused-position-rows": dataclasses.replace(COORDINATES, translation=3, canonical=False),
    "ffn-bias-transfer": dataclasses.replace(COORDINATES, translation=4),
    "ln1-bias-transfer": dataclasses.replace(COORDINATES, translation=5),
    "ln2-bias-transfer": dataclasses.replace(COORDINATES, translation=6),
    "attention-bias-transfer": dataclasses.replace(COORDINATES, translation=7),
    "final-norm-bias-transfer": dataclasses.replace(COORDINATES, translation=8),
    "ffn-input-hyperplane": dataclasses.replace(COORDINATES, translation=9),
    "attention-input-hyperplane": dataclasses.replace(COORDINATES, translation=10),
    **{name: COORDINATES for name in ("ln1-scaling", "ln2-scaling", "final-norm-scaling")},
    # GPT-NeoX's parallel residual: only b_O + b_out is read; its pivot b_O is fitted last, on what the centring
    # shift left of the difference
    "parallel-bias-trade": dataclasses.replace(COORDINATES, translation=14),
    "unread-pad-row": dataclasses.replace(COORDINATES, place=_pad_row_element),
}
"""One entry per factor of the catalogue, keyed by its name."""


def elements_of(spec: GroupSpec, factor: str) -> FactorElements:
    """The constructions of ``factor`` (a factor of ``spec``): its :data:`ELEMENTS` entry.

    Raises
    ------
    SymtransError
        For a name that is no factor of ``spec`` (with a suggestion), or a
        factor without an entry.

    Examples
    --------
    >>> elements_of(GroupSpec.from_arch("gpt2"), "ln1-scaling") is COORDINATES
    True
    >>> elements_of(GroupSpec.from_arch("bert-base"), "S_m")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown factor 'S_m'; did you mean 'S_n' or 'S_H' or 'S_dff'?
    """
    spec.factor(factor)  # an unknown name: the spec's error, with its suggestions
    if factor not in ELEMENTS:
        raise SymtransError(f"no element constructions for factor {factor!r}: add its entry to "
                            "symtrans.group.elements.ELEMENTS")
    return ELEMENTS[factor]


def equal_pairs(spec: GroupSpec, factor: str, rotary_pairs: str = "halves") -> tuple[Any, Any] | None:
    """The coordinate pairs ``(i, j)`` on which ``factor``'s diagonal element must be equal, or None.

    A factor declared ``paired`` (the QK-norm gain trade: the rotations act after the gains, so a trade commutes
    with them only when it is one scaling per rotated pair) on a model with rotary positions; relate's fit, the
    canonical form's gauge and membership all read the pairs here.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> spec = GroupSpec.from_arch(tiny_decoder("qwen3").arch)
    >>> i, j = equal_pairs(spec, "qk-norm-gain-trade"); (j - i).tolist() == [int(spec.arch.d_k) // 2] * len(i)
    True
    >>> equal_pairs(spec, "ln1-scaling") is None
    True
    """
    if not elements_of(spec, factor).paired or spec.arch.positional != "rotary":
        return None
    return rotary_planes(int(spec.arch.d_k), rotary_pairs)


def pair_mean(values: Any, pairs: tuple[Any, Any] | None, weights: Any = None) -> Any:
    """``values`` made equal on each pair: the ``weights``-weighted mean of the two (plain where not given; a pair
    of zero weight keeps its plain mean). Without pairs, ``values`` as they are.

    Examples
    --------
    >>> import torch
    >>> v = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    >>> pairs = (torch.tensor([0, 1]), torch.tensor([2, 3]))
    >>> pair_mean(v, pairs).tolist(), pair_mean(v, pairs, torch.tensor([1.0, 0.0, 0.0, 0.0])).tolist()
    ([2.0, 3.0, 2.0, 3.0], [1.0, 3.0, 1.0, 3.0])
    """
    if pairs is None:
        return values
    i, j = pairs
    out = values.clone()
    plain = (values[i] + values[j]) / 2
    if weights is None:
        out[i] = out[j] = plain
        return out
    w = weights[i] + weights[j]
    mean = (weights[i] * values[i] + weights[j] * values[j]) / w.where(w != 0, 1)
    out[i] = out[j] = mean.where(w != 0, plain)
    return out


def pair_signed_rms(values: Any, pairs: tuple[Any, Any] | None, weights: Any = None) -> Any:
    """``values`` made equal on each pair: the root mean square of the two (``weights``-weighted; where both
    weigh 0, plain) with the sign of the first of them that weighs. Scaling a pair's two values by one ``t``
    scales the result by ``t``, so a gauge fixed with it is the same for the whole orbit. Without pairs,
    ``values`` as they are.

    Examples
    --------
    >>> import torch
    >>> v = torch.tensor([-3.0, 2.0, 4.0, 2.0], dtype=torch.float64)
    >>> pairs = (torch.tensor([0, 1]), torch.tensor([2, 3]))
    >>> [round(x, 6) for x in pair_signed_rms(v, pairs).tolist()]  # sqrt(12.5), sqrt(4)
    [-3.535534, 2.0, -3.535534, 2.0]
    >>> pair_signed_rms(v, pairs, torch.tensor([0.0, 1.0, 1.0, 1.0])).tolist()  # pair 0 reads 4 alone
    [4.0, 2.0, 4.0, 2.0]
    """
    import torch

    if pairs is None:
        return values
    i, j = pairs
    w = torch.ones_like(values) if weights is None else weights
    wi, wj = w[i], w[j]
    none = (wi + wj) == 0
    wi, wj = torch.where(none, 1.0, wi).to(values.dtype), torch.where(none, 1.0, wj).to(values.dtype)
    rms = ((wi * values[i] ** 2 + wj * values[j] ** 2) / (wi + wj)).sqrt()
    sign = torch.where((wi > 0) & (values[i] != 0), values[i].sign(), values[j].sign())
    out = values.clone()
    out[i] = out[j] = torch.where(sign == 0, 1.0, sign) * rms
    return out


def in_factor(spec: GroupSpec, factor: str, element: Any, rotary_pairs: str = "halves") -> Any:
    """``element`` of ``factor`` brought onto the group this architecture keeps; an element outside it refused.

    A broken factor has no element but the identity; the element's components,
    counts and shapes must be those of the factor's own ``sample`` (an
    inverse it carries is dropped: the action recomputes it); then the
    factor's ``member`` projects its continuous part (so a member comes back
    unchanged up to rounding, and a non-member moves, and is caught where the
    moved element is compared with B) and refuses a discrete part outside
    the group (a scaling that reorders, a query head moved out of its
    key/value group). ``rotary_pairs``: the pairing of the stored weights
    (``halves`` for every checkpoint :mod:`symtrans.numeric` loads).

    Raises
    ------
    SymtransError
        Naming the factor and what is not in its group.

    Examples
    --------
    >>> spec = GroupSpec.from_arch("minilm-l6-h384")
    >>> in_factor(spec, "S_H", {"pi": [1, 0] + list(range(2, 12)), "kappa": [0, 1] + list(range(2, 12))})
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: S_H: the element is not in the factor's group: query head 1 leaves the key/value head it reads (pi and kappa disagree at position 0; 1 query head(s) per key/value head)
    >>> in_factor(spec, "ffn-scaling", {})
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ffn-scaling: broken in this architecture (by gelu activation): no element but the identity is a symmetry
    """
    f = spec.factor(factor)
    if f.status == "broken":
        by = [b.feature for b in f.broken_by if b.present and b.effect == "breaks"]
        raise SymtransError(f"{factor}: broken in this architecture (by {', '.join(by) or 'its features'}): no "
                            "element but the identity is a symmetry")
    sig = _signature(spec.arch, factor, rotary_pairs)
    element = _one_block_as_held(sig, element)
    _same_structure(factor, sig, element, "")
    entry = elements_of(spec, factor)
    return entry.member(spec, factor, element, rotary_pairs) if entry.member is not None else element


@lru_cache(maxsize=512)
def _signature(arch: Architecture, factor: str, rotary_pairs: str) -> tuple:
    """The components, counts and shapes of ``factor``'s elements on ``arch``: read off its own ``sample``."""
    import torch

    spec = GroupSpec.from_arch(arch)
    ref = elements_of(spec, factor).sample(spec, factor, torch.Generator().manual_seed(0), torch.float64,
                                           rotary_pairs)[0]

    def sig(x: Any) -> tuple:
        if isinstance(x, dict):  # an inverse the sampler supplies is optional (the action recomputes it)
            return ("dict", tuple(sorted((k, sig(v)) for k, v in x.items() if not k.endswith("_inv"))),
                    frozenset(x))
        if isinstance(x, list) and all(isinstance(v, int) for v in x):
            return ("ints", len(x))
        if isinstance(x, list):
            return ("list", tuple(sig(v) for v in x))
        if isinstance(x, MonomialMatrix):
            return ("square", int(x.perm.numel()))
        if isinstance(x, torch.Tensor):
            square = x.ndim == 2 and x.shape[0] == x.shape[1]
            return ("square", int(x.shape[0])) if square else ("tensor", tuple(x.shape))
        raise SymtransError(f"{factor}: cannot describe an element part of type {type(x).__name__}")

    return sig(ref)


def _one_block_as_held(sig: tuple, el: Any) -> Any:
    """``el`` with each component of one head's block written as ``sig`` holds it: a list of that one block, or
    the block bare. The action reads both alike (a bare block acts on every head, of which there is one), and the
    factors differ (a coordinate factor's sample holds one block bare, a bias shift's in a list), so a solve that
    writes one head's component as a list of one (relate's, on a single key/value head) is not refused for it.

    Examples
    --------
    >>> import torch
    >>> x = torch.zeros(1, 3)
    >>> _one_block_as_held(("dict", (("v", ("tensor", (1, 3))),), frozenset({"v"})), {"v": [x]})["v"].shape
    torch.Size([1, 3])
    >>> len(_one_block_as_held(("list", (("tensor", (1, 3)),)), x))
    1
    """
    kind = sig[0]
    if kind == "dict" and isinstance(el, dict):
        subs = dict(sig[1])
        return {k: _one_block_as_held(subs[k], v) if k in subs else v for k, v in el.items()}
    if kind == "list":
        if len(sig[1]) == 1 and not isinstance(el, list):
            return [_one_block_as_held(sig[1][0], el)]
        if isinstance(el, list) and len(el) == len(sig[1]):
            return [_one_block_as_held(sub, e) for sub, e in zip(sig[1], el)]
        return el
    if kind in ("square", "tensor") and isinstance(el, list) and len(el) == 1:
        return el[0]
    return el


def _same_structure(factor: str, sig: tuple, el: Any, where: str) -> None:
    """Refuse ``el`` unless it has the components, counts and shapes of ``sig`` (:func:`_signature`), every value
    finite; a square matrix may be stored dense or as a :class:`MonomialMatrix`."""
    import torch

    at = f" at {where}" if where else ""
    kind = sig[0]
    if kind == "dict":
        need = {k for k, _ in sig[1]}
        if not isinstance(el, dict) or not need <= set(el) or not set(el) <= sig[2]:
            got = sorted(el) if isinstance(el, dict) else type(el).__name__
            raise _refuse(factor, f"components {got}{at}, the factor's are {sorted(need)}")
        for k, sub in sig[1]:
            _same_structure(factor, sub, el[k], f"{where}.{k}" if where else k)
    elif kind == "ints":
        if not isinstance(el, list) or len(el) != sig[1] or not all(type(x) is int for x in el):
            raise _refuse(factor, f"{sig[1]} integers expected{at}")
    elif kind == "list":
        if not isinstance(el, list) or len(el) != len(sig[1]):
            raise _refuse(factor, f"{len(sig[1])} blocks expected{at}")
        for i, (sub, e) in enumerate(zip(sig[1], el)):
            _same_structure(factor, sub, e, f"{where}[{i}]")
    elif kind == "square":  # one k x k matrix stored either way: a permutation with values, or dense
        k = sig[1]
        if isinstance(el, MonomialMatrix):
            ok = tuple(el.perm.shape) == (k,) and isinstance(el.vals, torch.Tensor) \
                and tuple(el.vals.shape) == (k,) and bool(el.vals.isfinite().all())
        else:
            ok = isinstance(el, torch.Tensor) and tuple(el.shape) == (k, k) and bool(el.isfinite().all())
        if not ok:
            raise _refuse(factor, f"a {k} x {k} matrix with finite values expected{at}")
    elif not (isinstance(el, torch.Tensor) and tuple(el.shape) == sig[1] and bool(el.isfinite().all())):
        raise _refuse(factor, f"a finite tensor of shape {sig[1]} expected{at}")


def in_group(spec: GroupSpec, steps: list[dict[str, Any]], rotary_pairs: str = "halves") -> list[dict[str, Any]]:
    """Every step's element brought onto its factor's group (:func:`in_factor`), one per layer where it has them.

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("minilm-l6-h384")
    >>> P = MonomialMatrix(list(range(1536)), torch.full((1536,), 2.0, dtype=torch.float64))
    >>> in_group(spec, [{"factor": "S_dff", "element": [{"P": P}] * 6}])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: S_dff: the element is not in the factor's group: value 2 at 0; the group needs a permutation (every value 1)
    """
    out = []
    for s in steps:
        f = spec.factor(s["factor"])
        el = s["element"]
        if f.scope in ("layer", "stack"):
            if not isinstance(el, list):
                raise _refuse(f.name, "one element per layer (or per boundary) expected")
            el = [in_factor(spec, f.name, e, rotary_pairs) for e in el]
        else:
            el = in_factor(spec, f.name, el, rotary_pairs)
        out.append({"factor": f.name, "element": el})
    return out


def with_role(spec: GroupSpec, role: str, factors: Any = None) -> list[Any]:
    """The factors of ``spec`` (or of ``factors``, in their order) whose catalogue ``role`` is ``role``.

    The role is the factor's own (:attr:`symtrans.catalogue.model.Factor.role`,
    one of :data:`ROLES`): the engines select a family of factors by it and
    never by a list of names.

    Raises
    ------
    SymtransError
        For a role not in :data:`ROLES`.

    Examples
    --------
    >>> [f.name for f in with_role(GroupSpec.from_arch("bert-base"), "head-gauge")]
    ['qk-gauge', 'vo-gauge']
    """
    if role not in ROLES:
        raise SymtransError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
    return [f for f in (spec.factors if factors is None else factors) if f.role == role]


def translation_order(spec: GroupSpec, canonical: bool = False) -> list[str]:
    """The translation factors of ``spec`` in the order relate (or, with ``canonical``, the canonical form) fits them.

    Each factor's :data:`ELEMENTS` entry declares its place (``translation``);
    the engines iterate this list and never list the factors themselves.

    Examples
    --------
    >>> translation_order(GroupSpec.from_arch("roberta-base"))  # doctest: +NORMALIZE_WHITESPACE
    ['embedding-translation', 'embedding-centring-shift', 'unused-position-rows', 'ffn-bias-transfer',
     'attention-bias-transfer', 'final-norm-bias-transfer', 'ffn-input-hyperplane', 'attention-input-hyperplane',
     'key-bias-shift', 'value-bias-shift', 'centring-shift']
    >>> "unused-position-rows" in translation_order(GroupSpec.from_arch("roberta-base"), canonical=True)
    False
    """
    ranked = [(ELEMENTS[f.name].translation, f.name) for f in spec.factors
              if f.name in ELEMENTS and ELEMENTS[f.name].translation is not None
              and (ELEMENTS[f.name].canonical or not canonical)]
    return [name for _, name in sorted(ranked)]
