"""The generic action of G: a factor's element acting on weights through its tag table only.

:func:`act` reads nothing but a factor's tag table (:class:`~symtrans.catalogue.model.AxisTag`
rows) and :data:`ACTIONS` (what each kind of row does to one block), so both the
exact certificates (:mod:`symtrans.group.certify`) and the numeric checks
(:mod:`symtrans.group.numeric`) transform weights only through it.

This module never imports torch (tests/test_import_contract.py checks it):
:func:`act` works on SymPy matrices and on torch tensors alike (block form:
per-head tensors are lists of 2-D blocks, vectors are 1 x m rows), reaching
torch only through a tensor it is given. Group elements (torch and SymPy) are
built by each factor's entry in :mod:`symtrans.group.elements`.

Raises
------
SymtransError
    When a tag's side does not fit its tensor's block (a right action on a
    row axis), when an element lacks a component its tag table names, or when
    the number of per-head entries or per-layer elements does not match the
    weights.

See Also
--------
symtrans.catalogue.model.AxisTag : one row of a tag table
symtrans.catalogue.model.ACTION_TEXT : how a tag table names each kind of action
symtrans.group.certify : exact certificates built on :func:`act`
symtrans.group.numeric : numeric checks built on :func:`act`

References
----------
The paper's §9 (the invariance group G acting on the weights, as formalised in
``/work/shared/paper/claims.md``: ``W_Q^h -> W_Q^h M_h``, ``W_K^h -> W_K^h
M_h^-T``, ``W_V^h -> W_V^h N_h``, ``W_O^h -> N_h^-1 W_O^h`` and the other
factors); ``docs/group.md`` lists every tag table.

Examples
--------
>>> ACTIONS["inverse"].describe(AxisTag("W_O", 1, "vo-gauge", "left", "inverse", index="head"))
'g^-1'
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.catalogue.model import ACTION_TEXT, AxisTag, Factor, _axes
from symtrans.catalogue.spec import GroupSpec
from symtrans.errors import SymtransError
from symtrans.group.elements import MonomialMatrix, elements_of

__all__ = ["act", "Action", "ACTIONS", "LINEAR_ACTIONS", "linear_factor", "inverse_element", "inverse_steps"]


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


def _product(a: Any, b: Any) -> Any:
    """``a @ b``: SymPy's exact product, a tensor product through :func:`symtrans.numeric.linalg.matmul` (imported
    only then: a symbolic query loads no numeric engine)."""
    if _is_sympy(a) or _is_sympy(b):
        return a @ b
    from symtrans.numeric.linalg import matmul

    return matmul(a, b)


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
            return _product(block, R)
        if bax != 0:
            raise SymtransError(f"tag {tag.describe()}: a left action needs the row axis")
        return _product(R, block)

    return apply


def _translate_rows(sign: int) -> Callable[..., Any]:
    def apply(block: Any, tag: AxisTag, g: Any, *_: Any) -> Any:
        if _is_sympy(block):
            return block + sign * (sp.ones(block.shape[0], 1) * g)
        if g.shape[0] != 1:
            raise SymtransError(f"tag {tag.describe()}: the element is one row (1 x {block.shape[1]}), got "
                                f"{tuple(g.shape)}")
        return block + sign * g  # broadcast: the same sums as 1 g, without the table-sized 1 g
    return apply


def _translate_ones(block: Any, tag: AxisTag, g: Any, *_: Any) -> Any:
    if _is_sympy(block):
        return block + g @ _ones_like_row(block)
    if g.shape[-1] != 1:
        raise SymtransError(f"tag {tag.describe()}: the element is one column ({block.shape[0]} x 1), got "
                            f"{tuple(g.shape)}")
    return block + g  # broadcast: the same sums as g 1^T, without the table-sized g 1^T


def _conjugate_gain(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    gain = original[tag.via]
    R = inverse()
    if _is_sympy(block) or _is_sympy(gain) or not _is_tensor(R):
        return _diag(_reciprocal(gain)) @ R @ _diag(gain) @ block
    # diag(1/gain) R diag(gain) as two scalings of R's entries (each entry the one product the diagonal products
    # compute, the same values without two d x d x d products), then the same product with the block
    return (_reciprocal(gain).reshape(-1, 1) * R * gain.reshape(1, -1)) @ block


def _conjugate_gain_row(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    gain = original[tag.via]
    if _is_sympy(block) or _is_sympy(gain) or not _is_tensor(g):
        return block @ _diag(_reciprocal(gain)) @ g @ _diag(gain)
    return ((block * _reciprocal(gain).reshape(1, -1)) @ g) * gain.reshape(1, -1)  # the scalings entrywise: the same values


def _is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor (not a SymPy matrix, nor a stored monomial matrix)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _hyperplane_head(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    """The head W absorbs a shift t of the final norm's bias through the hyperplane."""
    names = tag.via.split(",")
    inv_gain = _reciprocal(original[names[0]])
    v = -(g @ block) / _dot(original[names[1]] + g, inv_gain)
    return block + inv_gain.T @ v


def _hyperplane_weight(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    u = _reciprocal(original[tag.via.split(",")[0]])
    if _is_sympy(block) or g.dim() != 2 or g.shape[0] != 1 or u.dim() != 2 or u.shape[0] != 1:
        return block + u.T @ g
    # the rank-one update in one pass (torch.addr): no block-sized outer product written first (a W_in block's
    # fresh pages cost more than its arithmetic); each entry block_ij + u_i g_j, as the product gives it
    return sys.modules["torch"].addr(block, u.reshape(-1), g.reshape(-1))


def _hyperplane_bias(block: Any, tag: AxisTag, g: Any, inverse: Any, original: dict[str, Any], *_: Any) -> Any:
    names = tag.via.split(",")
    return block - _dot(original[names[1]], _reciprocal(original[names[0]])) * g


def _conjugate_diagonal(block: Any, g: Any, R: Any) -> Any:
    """The diagonal of ``R diag(block) g`` as a row (``R`` g's inverse). For a monomial ``g`` and ``R`` (the residual
    factor's signed permutation, on every norm's gain) without the d x d products: entry j is the one product of R's
    entry in row j, the gain there and g's entry in column j, each product taken as :class:`MonomialMatrix`'s would
    (in place on a gathered copy, out of place where it gathers nothing: the same values and dtype), the row laid
    out as the dense product's diagonal (a strided view of a d x d buffer, never read off the diagonal), so that
    nothing downstream sees another layout. 13 dense products per relate cost 3 ms for 5,000 values."""
    if not (isinstance(g, MonomialMatrix) and isinstance(R, MonomialMatrix) and _is_tensor(block)) \
            or not bool((R.inv == g.perm).all()):
        return _diagonal_row(R @ _diag(block) @ g)
    b = block.reshape(-1)
    # row j of R diag(b): b[R.inv[j]] R.vals[R.inv[j]] in column R.inv[j] = g.perm[j], the row g's column j reads
    if R._identity:
        y = b.clone() if R._unit else b * R.vals
    else:
        y = b[R.inv] if R._unit else b[R.inv].mul_(R.vals[R.inv])
    if g._identity:
        z = y.clone() if g._unit else y * g.vals
    else:
        z = y if g._unit else y.mul_(g.vals)
    d = z.numel()
    return z.new_empty(d * d).as_strided((1, d), (d * (d + 1), d + 1)).copy_(z.reshape(1, -1))


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


#: each kind of action's effect on one block (its description in a tag table is ACTION_TEXT)
_APPLY: dict[str, Callable[..., Any]] = {
    "element": _linear(False, False),
    "inverse": _linear(False, True),
    "inverse_transpose": _linear(True, True),
    # a permutation reorders blocks (in _apply_tag); applied to one block it would act by its inverse
    "permutation": _linear(False, True),
    "translate": lambda block, tag, g, *_: block + g,
    "translate_image": _translate_image,
    "conjugate_diagonal": lambda block, tag, g, inverse, *_: _conjugate_diagonal(block, g, inverse()),
    "translate_ones": _translate_ones,
    "translate_neg": lambda block, tag, g, *_: block - g,
    "hyperplane_weight": _hyperplane_weight,
    "hyperplane_bias": _hyperplane_bias,
    "translate_rows": _translate_rows(1),
    "translate_rows_neg": _translate_rows(-1),
    "conjugate_gain": _conjugate_gain,
    "conjugate_gain_row": _conjugate_gain_row,
    "hyperplane_head": _hyperplane_head,
    "translate_leading_rows": _translate_leading_rows,
}

#: Every kind of action, by name: its description in a tag table and its effect on a block (one table for both).
ACTIONS: dict[str, Action] = {how: Action(text, _APPLY[how]) for how, text in ACTION_TEXT.items()}


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

    def index(h: int) -> int:  # the element of a list that acts on block h
        return to_kv(h) if tag.index == "head" and len(g) != len(value) else h

    stacked = _apply_heads(value, tag, g, ginv, cache, original, index)
    if stacked is not None:
        params[tag.tensor] = stacked
        return
    out = []
    for h, block in enumerate(value):
        if isinstance(g, (list, tuple)):  # one element per key/value head (or per block, if as many)
            i = index(h)
            gh, ghinv = g[i], (ginv[i] if ginv is not None else None)
        else:  # one element for all heads (a residual-stream map)
            gh, ghinv = g, ginv
        out.append(_apply_block(block, tag, gh, ghinv, cache, original, None, h))
    params[tag.tensor] = out


#: the kinds of action :func:`_apply_heads` applies to a tensor's per-head blocks at once (products with the
#: element, its inverse or inverse transpose; entrywise sums)
_STACKED = frozenset({"element", "inverse", "inverse_transpose", "translate", "translate_neg", "translate_ones",
                      "hyperplane_bias"})


def _stack(blocks: list[Any]) -> Any:
    """``blocks`` (2-D torch tensors of one shape, dtype and device) stacked, each head of the stack laid out as its
    block (same strides), so that NumPy's batched product makes the same BLAS call for each head as for its block
    alone; None where that cannot be (or for anything else than such tensors).

    Blocks that are views of one storage at evenly spaced offsets with one set of strides (a stack's heads, as the
    loaded model's and this module's own results are, or a batched solve's results) are viewed as that stack
    without a copy; contiguous blocks (or transpose views of contiguous ones) are copied into one."""
    first = blocks[0]
    if not _is_tensor(first) or first.dim() != 2:
        return None
    shape, stride, dtype = first.shape, first.stride(), first.dtype
    if any(not _is_tensor(b) or b.dtype != dtype or b.shape != shape or b.stride() != stride or b.requires_grad
           for b in blocks):
        return None  # (a differentiated action, G's tangents: block by block, as autograd has always seen it)
    offset = first.storage_offset()
    step = blocks[1].storage_offset() - offset
    ptr = first.untyped_storage().data_ptr()
    if step > 0 and all(b.storage_offset() == offset + h * step and b.untyped_storage().data_ptr() == ptr
                        for h, b in enumerate(blocks)):
        return first.as_strided((len(blocks), *shape), (step, *stride), offset)
    if any(b.device != first.device for b in blocks):
        return None
    torch = sys.modules["torch"]
    if first.is_contiguous():
        return torch.stack(blocks)
    if first.mT.is_contiguous():
        return torch.stack([b.mT for b in blocks]).mT
    return None


def _apply_heads(value: list[Any], tag: AxisTag, g: Any, ginv: Any, cache: dict[Any, Any],
                 original: dict[str, Any], index: Callable[[int], int]) -> list[Any] | None:
    """A per-head tensor's blocks acted on all at once: stacked (heads x rows x cols), with the heads' components
    (``g[index(h)]`` for block h where ``g`` is a list) stacked likewise, one product or sum for every head, the
    stack's heads handed back as the blocks. The same values as block by block: NumPy's batched product makes the
    same BLAS call for each head as for its block alone (each stacked head laid out as its block), the heads'
    inverses are one batched inverse (LAPACK per head, as each head's own: the same values and layout, once per
    element for the tags that share it), a monomial matrix's gather and a sum act entry by entry. The solver acts
    on 12 heads x 6 layers x 4 tensors per factor, where each block's call cost more than its arithmetic.

    None where the blocks or the heads' components are not torch tensors of one shape and layout, or for a kind
    of action not in :data:`_STACKED`: the caller then acts block by block (and raises what that raises)."""
    if tag.how not in _STACKED or len(value) < 2:
        return None
    per_head = isinstance(g, (list, tuple))
    if per_head:
        gs = _stack([g[index(h)] for h in range(len(value))])
        if gs is None or (tag.how == "translate_ones" and gs.shape[-1] != 1):
            return None  # (a column of the wrong shape: the block-by-block action raises)
    elif not ((_is_tensor(g) and g.dim() <= 2 and not g.requires_grad)
              or (tag.how in ("element", "inverse", "inverse_transpose") and isinstance(g, MonomialMatrix))):
        return None
    elif tag.how == "translate_ones" and g.shape[-1] != 1:
        return None
    blocks = _stack(value)
    if blocks is None:
        return None
    if tag.how in ("element", "inverse", "inverse_transpose"):
        if per_head and tag.how != "element":
            if ginv is not None:
                R = _stack([ginv[index(h)] for h in range(len(value))])
                if R is None:
                    return None
            else:  # one batched inverse (LAPACK per head, as each head's own: the same values and layout)
                key = ("heads", id(g), len(value), tag.index)
                if key not in cache:
                    try:
                        cache[key] = (g, gs.inverse())  # g kept alive so that its id is not reused
                    except RuntimeError:  # a singular head: block by block, as that raises it
                        return None
                R = cache[key][1]
            if tag.how == "inverse_transpose":
                R = R.mT
            out = _linear(False, True)(blocks, tag, R, lambda: R, original, None, None)
        elif per_head:
            out = _linear(False, False)(blocks, tag, gs, None, original, None, None)
        else:
            out = _apply_block(blocks, tag, g, ginv, cache, original, None)
    elif tag.how == "hyperplane_bias":
        names = tag.via.split(",")
        scale = _dot(original[names[1]], _reciprocal(original[names[0]]))  # the same for every head
        if not _is_tensor(scale) or scale.requires_grad:
            return None
        out = blocks - scale * (gs if per_head else g)
    else:  # entrywise sums
        out = _apply_block(blocks, tag, gs if per_head else g, None, cache, original, None)
    return list(out.unbind(0))


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

    Raises
    ------
    SymtransError
        For an unknown factor, an element without a component the tag table
        names, one element too few or too many per layer (or per boundary
        between layers), or per-head entries that do not match the stored
        head blocks.

    See Also
    --------
    symtrans.catalogue.spec.GroupSpec.factor : the factor whose tag table is read
    symtrans.group.numeric.sample_element : a random element (torch)
    symtrans.catalogue.spec.generic_element : a generic symbolic element (SymPy)

    Examples
    --------
    >>> import sympy as sp
    >>> from symtrans.arch import get_arch
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
    place = elements_of(spec, factor).place
    if place is not None:  # coordinates that sit inside a larger tensor (the factor's own placement)
        element = place(spec, element)
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


#: the kinds of action linear in the element's component (the block is multiplied by it, its inverse or transpose,
#: or its blocks reordered): a factor whose tags are all of these is undone by the inverse of each component. Every
#: other kind adds a term linear in the component to the block (a translation): undone by the negated component.
LINEAR_ACTIONS = frozenset({"element", "inverse", "inverse_transpose", "permutation", "conjugate_diagonal",
                            "conjugate_gain", "conjugate_gain_row"})


def linear_factor(spec: GroupSpec, factor: str) -> bool:
    """Whether ``factor`` acts linearly in its components (every tag in :data:`LINEAR_ACTIONS`), not by translations.

    Examples
    --------
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> linear_factor(spec, "qk-gauge"), linear_factor(spec, "key-bias-shift")
    (True, False)
    """
    return {t.how for t in spec.factor(factor).tags} <= LINEAR_ACTIONS


def _inverse_component(x: Any) -> Any:
    """A component's inverse: a permutation (list of indices) its inverse permutation, a matrix its inverse."""
    from symtrans.group.elements import MonomialMatrix

    if isinstance(x, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in x):
        inv = [0] * len(x)
        for j, i in enumerate(x):
            inv[i] = j
        return inv
    if isinstance(x, (list, tuple)):  # one matrix per head
        return [_inverse_component(m) for m in x]
    if isinstance(x, MonomialMatrix):
        return x.inverse()
    return _inverse(x)


def _negated(x: Any) -> Any:
    return [_negated(v) for v in x] if isinstance(x, (list, tuple)) else -x


def inverse_element(spec: GroupSpec, factor: str, element: Any) -> Any:
    """The element of ``factor`` whose action undoes ``element``'s (its inverse in the factor's group).

    Every factor of G acts either linearly in its components (all its tags in :data:`LINEAR_ACTIONS`: the inverse
    inverts each component, a permutation by its inverse permutation) or by translations (each tag adds a term
    linear in the component to its block, the terms reading tensors the factor does not move, or, for the final
    norm's bias shift through an untied head, the bias it moves: either way the negated component undoes it).
    ``element`` is one element, or a list of them (one per layer or boundary) for a per-layer factor.

    Raises
    ------
    SymtransError
        For a factor whose tags mix the two kinds (no such factor in G's tables).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> from symtrans.group.numeric import model_blocks, sample_element
    >>> a = load_model("default")
    >>> spec = GroupSpec.from_arch(a.arch)
    >>> g = [sample_element(spec, "qk-gauge", torch.Generator().manual_seed(i), torch.float64)[0] for i in range(6)]
    >>> w = model_blocks(a)
    >>> back = act(spec, act(spec, w, "qk-gauge", g), "qk-gauge", inverse_element(spec, "qk-gauge", g))
    >>> float((back["layers"][2]["W_K"][3] - w["layers"][2]["W_K"][3]).abs().max()) < 1e-12
    True
    """
    kinds = {t.how for t in spec.factor(factor).tags}
    if linear_factor(spec, factor):
        one = _inverse_component
    elif not kinds & LINEAR_ACTIONS:
        one = _negated
    else:
        raise SymtransError(f"{factor}: its tags mix linear actions and translations ({', '.join(sorted(kinds))}); "
                            "no inverse is defined for it")
    if isinstance(element, (list, tuple)):
        return [{k: one(v) for k, v in el.items() if not k.endswith("_inv")} for el in element]
    return {k: one(v) for k, v in element.items() if not k.endswith("_inv")}


def inverse_steps(spec: GroupSpec, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps of g^-1 for the steps of g: each step's inverse element (:func:`inverse_element`), in reverse order.

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.elements import MonomialMatrix
    >>> spec = GroupSpec.from_arch("bert-base")
    >>> P = MonomialMatrix([1, 2, 0], torch.ones(3, dtype=torch.float64))
    >>> inv = inverse_steps(spec, [{"factor": "S_dff", "element": [{"P": P}]}, {"factor": "key-bias-shift",
    ...                                                                       "element": [{"u": torch.ones(1, 2)}]}])
    >>> [s["factor"] for s in inv], inv[1]["element"][0]["P"].perm.tolist(), inv[0]["element"][0]["u"].tolist()
    (['key-bias-shift', 'S_dff'], [2, 0, 1], [[-1.0, -1.0]])
    """
    return [{"factor": s["factor"], "element": inverse_element(spec, s["factor"], s["element"])}
            for s in reversed(steps)]


#: the tensors a between-layer factor's ``next`` tags read from the layer before the boundary (its closing norm;
#: the embedding norm before layer 0), every other tensor from the layer after it
BOUNDARY_NORM = ("ln2_w", "ln2_b")
#: before layer 0 the embedding norm plays that closing norm: its tensor for each of :data:`BOUNDARY_NORM`
EMBEDDING_NORM = {"ln2_w": "emb_ln_w", "ln2_b": "emb_ln_b"}


def boundary_norm(name: str, nxt: int) -> tuple[str, int | None]:
    """Where the closing-norm tensor ``name`` (of :data:`BOUNDARY_NORM`) that a between-layer tag reads at the
    boundary before layer ``nxt`` is stored: ``(stored name, layer)``, the layer None for a model tensor (the
    embedding norm, which plays that norm before layer 0). The one rule every reader of a boundary's norm calls.

    Examples
    --------
    >>> boundary_norm("ln2_b", 0), boundary_norm("ln2_w", 3)
    (('emb_ln_b', None), ('ln2_w', 2))
    """
    if name not in BOUNDARY_NORM:
        raise SymtransError(f"{name!r} is no closing norm's tensor (those are {BOUNDARY_NORM})")
    return (EMBEDDING_NORM[name], None) if nxt == 0 else (name, nxt - 1)


def tensor_at(params: dict[str, Any], name: str, layer: int | None) -> Any:
    """Tensor ``name`` of ``params`` (a model in block form): a model tensor where ``layer`` is None, else that
    layer's; None where it is not held.

    Examples
    --------
    >>> p = {"emb_ln_b": 1, "layers": [{"ln2_b": 2}]}
    >>> tensor_at(p, *boundary_norm("ln2_b", 0)), tensor_at(p, *boundary_norm("ln2_b", 1))
    (1, 2)
    """
    return params.get(name) if layer is None else params["layers"][layer].get(name)


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
            prev_orig = {n: tensor_at(params, *boundary_norm(n, nxt)) for n in BOUNDARY_NORM}
        else:
            prev_orig = params["layers"][nxt - 1]
        next_orig = dict(layers[nxt])
        for t in tags:
            if t.scope == "prev":
                target = dict(prev_orig)
                _apply_tag(target, dataclasses.replace(t, scope="layer"), el, dict(prev_orig), {}, group)
                name, at = boundary_norm(t.tensor, nxt)
                if at is None:
                    out[name] = target[t.tensor]
                else:
                    layers[at] = {**layers[at], name: target[t.tensor]}
            elif t.scope == "next":
                original = {**next_orig, **{n: v for n, v in prev_orig.items() if n in BOUNDARY_NORM}}
                target = dict(layers[nxt])
                _apply_tag(target, dataclasses.replace(t, scope="layer"), el, original, {}, group)
                layers[nxt] = target
    out["layers"] = layers
    return out
