"""Gauge-invariance labels of the quantities interpretability users read, generated from G's tag tables.

For every factor of G that acts on an architecture's weights
(:func:`symtrans.group.gauge.gauge_factors`) and every per-layer TransformerLens hook and weight product
(``hook_q`` ... ``resid_post``, ``W_Q W_K^T``, ``W_V W_O``, ``W_E``, ``W_U``; the names come from
:mod:`symtrans.names`), :func:`gauge_table` says whether an element of the factor (its part at every layer and
boundary) leaves the quantity

* **invariant** (the same tensor),
* moves it **covariantly** (a map fixed by the element and the weights, not by the input: heads reordered,
  ``hook_z -> hook_z N`` per head, ``hook_k -> hook_k + u``), said how, or
* **changes** it (what it becomes depends on the input, or on other weights for a weight product), said why.

Nothing is written per cell: each factor's tag table (:mod:`symtrans.group.spec`) is pushed through the
layer's dataflow (readers ``X W + b``, the score product, the softmax over keys, the head mix ``A V``, the
writers ``Y W_O``, residual sums, norms) by rules that belong to the operations, not to the factors: a linear
map on an axis that a product contracts cancels against the inverse map of its partner; a row constant of
the scores cancels in the softmax; a shift ``t`` of a reader's input cancels against a bias tag ``-t W`` of
that reader (``translate_image``), a residual shift against ``-t`` (``translate_neg``); a hyperplane move of a
reader cancels on a LayerNorm output; a write along the all-ones row cancels in a LayerNorm. What no rule
cancels is carried to the hook. :func:`predict` turns a covariant cell into the tensor it predicts, which the
tests (``tests/test_group_hooks.py``) compare with a forward pass of the moved model for every cell.

Examples
--------
>>> rows = {(c.hook, c.factor): c for c in gauge_table("minilm-l6-h384")}
>>> rows["hook_z", "vo-gauge"].verdict, rows["hook_result", "vo-gauge"].verdict
('covariant', 'invariant')
>>> rows["hook_z", "vo-gauge"].how
'hook_z[h] -> hook_z[h] g (right by g, per head)'
>>> rows["hook_attn_scores", "key-bias-shift"].verdict, rows["hook_pattern", "key-bias-shift"].verdict
('changes', 'invariant')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError
from symtrans.group.spec import AxisTag, GroupSpec
from symtrans.group.action import boundary_norm
from symtrans.names import ACTIVATIONS, PRODUCTS, PROJECTIONS, WEIGHTS

__all__ = ["HOOKS", "hook_rows", "Move", "Effect", "Cell", "gauge_table", "markdown_table", "predict", "hook_values"]

#: the TransformerLens names of the table's rows, with the symtrans name (names.py) they stand for, as on a pre-LN
#: model; :func:`hook_rows` gives an architecture's (post-LN encoders hook ``resid_mid`` elsewhere)
HOOKS: tuple[tuple[str, str], ...] = (
    ("resid_pre", "X"), ("hook_q", "q"), ("hook_k", "k"), ("hook_v", "v"), ("hook_attn_scores", "scores"),
    ("hook_pattern", "A"), ("hook_z", "Y"), ("hook_result", "YO"), ("resid_mid", "pre_ln1"),
    ("resid_post", "out"), ("W_Q W_K^T", "W_Q[h] W_K[h]^T"), ("W_V W_O", "W_V[h] W_O[h]"), ("W_E", "word"),
    ("W_U", "lm_head"))

#: names.py's axis words -> the group's axis names (spec.LAYER_AXES)
_AXIS = {"head": "head", "pos": "token", "query": "token", "key": "token", "d_v": "v", "d_k": "qk",
         "d_model": "model"}


def hook_rows(arch: Architecture | str | Any) -> tuple[tuple[str, str], ...]:
    """The table's rows (TransformerLens name, symtrans name) for ``arch``, each the names.py row of its norm placement.

    On a post-LN encoder TransformerLens 4.x's bridge hooks ``hook_resid_mid`` at the second norm's input
    (``X_1 + FFN(X_1)``, symtrans's ``pre_ln2``), not at ``X + MHA(X) + b_O``; ``hook_resid_post`` is the block's
    output after that norm (``out``) on both forms. ``tests/test_interop_names.py`` checks both rows on a real bridge.

    Examples
    --------
    >>> dict(hook_rows("minilm-l6-h384"))["resid_mid"], dict(hook_rows("gpt2"))["resid_mid"]
    ('pre_ln2', 'pre_ln1')
    >>> dict(hook_rows("minilm-l6-h384"))["resid_post"]
    'out'
    """
    a = arch if isinstance(arch, Architecture) else getattr(arch, "arch", None) or get_arch(arch)
    form = "pre-ln" if a.norm_placement == "pre" else "post-ln"
    out = []
    for tl, name in HOOKS:
        rows = [r for r in ACTIVATIONS if r.tl.endswith("hook_" + tl) and r.forms in ("both", form)]
        if tl.startswith("resid_") and len(rows) != 1:
            raise SymtransError(f"names.py has {len(rows)} rows for hook_{tl} on a {form} model; one expected")
        out.append((tl, rows[0].symtrans if tl.startswith("resid_") else name))
    return tuple(out)


def _carried(symtrans: str) -> tuple[str, ...]:
    """The named axes a hook carries, read from its names.py row (weight products: their two residual axes)."""
    for row in ACTIVATIONS + PROJECTIONS:
        if row.symtrans == symtrans:
            return tuple(_AXIS[a.strip()] for a in row.symtrans_axes.split(","))
    if symtrans in PRODUCTS or symtrans == "word":
        return ("head", "model") if "[h]" in symtrans else ("model",)
    raise SymtransError(f"no names.py row for {symtrans!r}")


def _tl(symtrans: str, tl: str) -> str:
    """The TransformerLens name from names.py (hook names at layer l)."""
    for row in ACTIVATIONS + PROJECTIONS:
        if row.symtrans == symtrans:
            return row.tl
    for key, value in {**PRODUCTS, **WEIGHTS}.items():
        if key.split(" [")[0] == symtrans:
            return value.split(" [")[0]
    return tl


@dataclass(frozen=True)
class Move:
    """One input-independent part of an element's action on a quantity: a linear map on an axis, or a shift.

    ``tag`` is the tag table row it comes from, ``part`` the index of the element's part (the layer or boundary;
    None for a model-wide factor), ``through`` the weight a shift was carried through (its image).

    Examples
    --------
    >>> t = AxisTag("b_K", 1, "key-bias-shift", "add", "translate", "u", index="kv")
    >>> Move("shift", "qk", t, 0).text("hook_k")
    'hook_k[h] -> hook_k[h] + u'
    """

    kind: str  # "lin" | "shift"
    axis: str
    tag: AxisTag
    part: int | None
    through: str | None = None

    def map_part(self, hook: str) -> tuple[str, str, str, bool] | None:
        """A linear map's parts, ``(hook as written, the map, its side, per head)``; None for a shift or a
        reordering of heads.

        Examples
        --------
        >>> t = AxisTag("W_V", 1, "vo-gauge", "right", "element", "g", index="kv")
        >>> Move("lin", "v", t, 0).map_part("hook_z")
        ('hook_z[h]', 'g', 'right', True)
        """
        t = self.tag
        if self.kind != "lin" or t.how == "permutation":
            return None
        from symtrans.group.spec import ACTIONS

        per_head = self.axis in ("qk", "v") or t.index is not None or self.through == "W_O"
        h = f"{hook}[h]" if per_head and self.axis != "head" else hook
        what = ACTIONS[t.how].describe(t)
        side = "right" if t.side == "right" else "left"
        if " " in hook and t.tensor in ("W_K", "W_O") and t.side == "left" and self.axis == "model":
            what, side = f"({what})^T", "right"  # the product's second factor: its rows are the columns
        return h, what, side, per_head

    def text(self, hook: str) -> str:
        """The move in words, e.g. ``hook_z[h] -> hook_z[h] g``."""
        t = self.tag
        per_head = self.axis in ("qk", "v") or t.index is not None or self.through == "W_O"
        h = f"{hook}[h]" if per_head and self.axis != "head" else hook
        if self.kind == "lin" and t.how == "permutation":
            return f"{hook}[h] -> {hook}[{t.component}(h)] (heads reordered)"
        if self.kind == "lin":
            h, what, side, per_head = self.map_part(hook)  # type: ignore[misc]
            form = f"{h} {what}" if side == "right" else f"{what} {h}"
            return f"{h} -> {form} ({side} by {what}{', per head' if per_head else ''})"
        if self.through:
            return f"{h} -> {h} + {t.component} {self.through}[h]"
        from symtrans.group.spec import ACTIONS

        what = ACTIONS[t.how].describe(t)
        sign = "-" if t.how == "translate_neg" else "+"
        return f"{h} -> {h} {sign} {what.lstrip('-')}" if not what.startswith("-") else f"{h} -> {h} - {what[1:]}"


@dataclass(frozen=True)
class Effect:
    """What an element does to one quantity: input-independent moves, or ``data``: why it changes.

    ``data`` ``ones`` (an input-dependent write along the all-ones row: a LayerNorm removes it) and
    ``rowconst`` (an input-dependent constant along the key axis: the softmax removes it) are kept apart from
    other changes because a later operation cancels them.

    Examples
    --------
    >>> Effect().verdict, Effect(data="rowconst").verdict
    ('invariant', 'changes')
    """

    moves: tuple[Move, ...] = ()
    data: str | None = None

    @property
    def verdict(self) -> str:
        """``invariant``, ``covariant`` or ``changes``."""
        if self.data:
            return "changes"
        return "covariant" if self.moves else "invariant"

    def lin(self, axis: str) -> list[Move]:
        """The linear moves (maps, reorderings) on ``axis``.

        Examples
        --------
        >>> t = AxisTag("W_O", 0, "S_H", "index", "permutation", "pi", index="head")
        >>> len(Effect((Move("lin", "head", t, 0),)).lin("head"))
        1
        """
        return [m for m in self.moves if m.kind == "lin" and m.axis == axis]

    def shifts(self) -> list[Move]:
        """The shifts (input-independent translations).

        Examples
        --------
        >>> Effect().shifts()
        []
        """
        return [m for m in self.moves if m.kind == "shift"]


_WHY = {"ones": "an input-dependent write along the all-ones row (no LayerNorm has removed it yet)",
        "rowconst": "an input-dependent constant along the key axis (the softmax removes it)"}


def _chg(why: str) -> Effect:
    return Effect((), why)


@dataclass(frozen=True)
class Cell:
    """One cell: a factor acting on one hook, per layer (``layers``) and summed up (``verdict``, ``how``).

    Examples
    --------
    >>> c = next(c for c in gauge_table("minilm-l6-h384") if c.hook == "hook_q" and c.factor == "S_H")
    >>> c.verdict, c.tl
    ('covariant', 'blocks.{l}.attn.hook_q')
    """

    hook: str
    tl: str
    factor: str
    layers: tuple[Effect, ...]
    verdict: str
    how: str


# ------------------------------------------------------------------------------------------- the dataflow
@dataclass
class _Tags:
    """The tags of one factor active on one layer's (or the model's) tensors, with the element part each uses."""

    by_tensor: dict[str, list[tuple[AxisTag, int | None]]] = field(default_factory=dict)

    def add(self, tensor: str, tag: AxisTag, part: int | None) -> None:
        self.by_tensor.setdefault(tensor, []).append((tag, part))

    def of(self, tensor: str) -> list[tuple[AxisTag, int | None]]:
        return self.by_tensor.get(tensor, [])


def _layer_tags(spec: GroupSpec, factor: str, L: int) -> tuple[list[_Tags], _Tags]:
    """Per layer, the factor's tags acting there (parts indexed as sample_gauge draws them), and the model's."""
    f = spec.factor(factor)
    layers = [_Tags() for _ in range(L)]
    model = _Tags()
    # the boundaries among these L layers: the architecture's (L - 1, or L with an embedding norm) for its own
    # depth, one fewer per layer left out (``gauge_table(..., layers=2)`` on a 12-layer GPT-2 indexed layer 11)
    n_b = max(0, int(spec.boundaries("model").subs(spec.arch.substitutions())) - (int(spec.arch.L) - L)) \
        if f.scope == "stack" else 0
    first = L - n_b
    for t in f.tags:
        if f.scope == "layer":
            for i in range(L):
                layers[i].add(t.tensor, t, i)
        elif f.scope == "stack":
            for k in range(n_b):
                nxt = first + k
                if t.scope == "next":
                    layers[nxt].add(t.tensor, t, k)
                else:  # the closing norm of the layer before (the embedding norm before layer 0)
                    name, at = boundary_norm(t.tensor, nxt)
                    (model if at is None else layers[at]).add(name, t, k)
        elif t.scope == "layer":
            for i in range(L):
                layers[i].add(t.tensor, t, None)
        else:
            model.add(t.tensor, t, None)
    return layers, model


_INVERSES = {"inverse", "inverse_transpose", "conjugate_gain", "permutation"}


def _norm(x: Effect, T: _Tags, gain: str, bias: str, layernorm: bool) -> Effect:
    """A norm ``N(z) gamma + beta``: LayerNorm removes a write along 1; the gain's and bias's own tags move it."""
    data = x.data
    if data == "ones" and layernorm:
        data = None
    if data:
        return _chg(data)
    if x.shifts():
        return _chg("a shift of a norm's input is not a shift of its output")
    moves = list(x.lin("model"))
    for t, p in T.of(gain):
        if t.how == "element":  # a rescaling of the gain: the output is rescaled
            moves.append(Move("lin", "model", t, p))
        elif t.how != "conjugate_diagonal" or not moves:
            return _chg(f"the norm's gain moves ({t.describe()})")
    for t, p in T.of(bias):
        if t.how == "translate":
            moves.append(Move("shift", "model", t, p))
        elif t.how not in ("element", "conjugate_gain_row"):
            return _chg(f"the norm's bias moves ({t.describe()})")
    return Effect(tuple(moves))


def _read(x: Effect, T: _Tags, W: str, b: str, out: str, normed: bool) -> Effect:
    """A reader ``X W + b`` (per head where W is per head): the input's moves meet W's and b's tags."""
    if x.data:
        return _chg(x.data if x.data not in _WHY else f"its input carries {_WHY[x.data]}")
    wt, bt = T.of(W), T.of(b)
    moves: list[Move] = []
    left = [t for t, _ in wt if t.axis_name == "model" and t.side == "left"]
    if bool(x.lin("model")) != bool(left):
        return _chg(f"the residual axis of its input moves and {W} does not undo it" if x.lin("model") else
                    f"{W}'s residual axis moves ({left[0].describe()}) and its input does not")
    hyper_w = [t for t, _ in wt if t.how == "hyperplane_weight"]
    hyper_b = [t for t, _ in bt if t.how == "hyperplane_bias"]
    if hyper_w and not (hyper_b and normed):
        return _chg(f"{W} moves along the normal of a hyperplane its input is not confined to")
    images = [(t, p) for t, p in bt if t.how == "translate_image"]
    for s in x.shifts():
        match = [(t, p) for t, p in images if t.via == W and t.component == s.tag.component]
        if match:
            images.remove(match[0])
        else:
            moves.append(Move("shift", out, s.tag, s.part, through=W))
    moves += [Move("shift", out, t, p) for t, p in images]
    for t, p in bt:
        if t.how == "translate":
            moves.append(Move("shift", out, t, p))
    for t, p in wt:
        if t.how == "permutation":
            moves.append(Move("lin", "head", t, p))
        elif t.axis_name == out and t.side == "right":
            moves.append(Move("lin", out, t, p))  # the bias, where there is one, has the same tag (G's table)
        elif t.axis_name == "model" and (t.side == "left" or t.how.startswith("hyperplane")):
            continue
        else:
            return _chg(f"{W} moves ({t.describe()})")
    return Effect(tuple(moves))


def _pair(a: list[Move], b: list[Move]) -> bool | None:
    """Two linear moves on a contracted axis: True if they cancel (one the element, the other an inverse)."""
    if not a and not b:
        return None
    return bool(a and b and {a[0].tag.how, b[0].tag.how} & {"element"} and
                ({a[0].tag.how, b[0].tag.how} & _INVERSES))


def _heads(*effects: Effect) -> list[Move] | None:
    """The head reordering shared by every per-head operand (None: some operand is reordered, another not)."""
    perms = [e.lin("head") for e in effects]
    if any(perms) and not all(perms):
        return None
    return perms[0][:1]


def _scores(q: Effect, k: Effect) -> Effect:
    if q.data or k.data:
        return _chg(q.data or k.data or "")
    pair = _pair(q.lin("qk"), k.lin("qk"))
    if pair is False:
        return _chg("the queries' and keys' head axis moves by maps that are not inverse to each other")
    heads = _heads(q, k)
    if heads is None:
        return _chg("queries and keys are reordered differently")
    if q.shifts():
        return _chg("a shift c of the queries adds c k_j^T, which varies along the key axis")
    if k.shifts():
        return Effect(tuple(heads), "rowconst")
    return Effect(tuple(heads))


def _softmax(s: Effect) -> Effect:
    return Effect(s.moves, None if s.data == "rowconst" else s.data)


def _mix(a: Effect, v: Effect) -> Effect:
    """``Y = A V``: rows of A sum to one, so a shift of V is a shift of Y; a linear map of V's columns stays."""
    if a.data or v.data:
        return _chg(a.data or v.data or "")
    heads = _heads(a, v)
    if heads is None:
        return _chg("the pattern and the values are reordered differently")
    return Effect(tuple(heads) + tuple(m for m in v.moves if m.axis != "head"))


def _write(y: Effect, T: _Tags, W: str, inner: str) -> Effect:
    """A writer ``Y W`` into the residual (no bias): contracts ``inner``, carries the residual axis."""
    if y.data:
        return _chg(y.data if y.data not in _WHY else f"its input carries {_WHY[y.data]}")
    wt = T.of(W)
    moves: list[Move] = []
    left = [Move("lin", inner, t, p) for t, p in wt if t.axis_name == inner and t.side == "left"]
    if _pair(y.lin(inner), left) is False:
        return _chg(f"{inner} moves on one side of the product with {W} only")
    heads = _heads(y, Effect(tuple(Move("lin", "head", t, p) for t, p in wt if t.how == "permutation")))
    if heads is None:
        return _chg(f"the heads of {W} and of its input are reordered differently")
    moves += heads
    moves += [Move("shift", "model", s.tag, s.part, through=W) for s in y.shifts()]
    data = None
    for t, p in wt:
        if t.axis_name == "model" and t.side == "right":
            moves.append(Move("lin", "model", t, p))
        elif t.how == "translate_ones":
            data = "ones"
        elif t.how not in ("permutation",) and not (t.axis_name == inner and t.side == "left"):
            return _chg(f"{W} moves ({t.describe()})")
    return Effect(tuple(moves), data)


def _act(h: Effect) -> Effect:
    """The FFN's activation: a factor of G that is not broken commutes with it (its identity); shifts do not."""
    if h.data or h.shifts():
        return _chg(h.data or "a shift of the FFN's pre-activation does not pass the activation")
    return h


def _residual(terms: list[Effect], T: _Tags, bias: str) -> Effect:
    """A residual sum of ``terms`` plus ``bias``: the same map on every term passes, shifts and their undoing cancel."""
    datas = {e.data for e in terms if e.data}
    if datas - {"ones"}:
        return _chg(sorted(datas - {"ones"})[0])
    lin_terms = [bool(e.lin("model")) for e in terms]
    bias_lin = [(t, p) for t, p in T.of(bias) if t.how == "element"]
    if any(lin_terms) and not all(lin_terms):
        return _chg("the residual axis moves on some terms of the sum and not on others")
    moves: list[Move] = []
    if any(lin_terms):
        moves.append(next(m for e in terms for m in e.lin("model")))
    elif bias_lin:
        return _chg(f"{bias} moves alone")
    shifts = [s for e in terms for s in e.shifts()]
    data = "ones" if "ones" in datas else None
    for t, p in T.of(bias):
        if t.how == "translate_neg":
            match = [s for s in shifts if s.tag.component == t.component and s.through is None]
            if match:
                shifts.remove(match[0])
            else:
                moves.append(Move("shift", "model", t, p))
        elif t.how == "translate_image":
            match = [s for s in shifts if s.tag.component == t.component and s.through == t.via]
            for s in match:
                shifts.remove(s)
            if not match:
                moves.append(Move("shift", "model", t, p))
        elif t.how == "translate_ones":
            if data is None:
                moves.append(Move("shift", "model", t, p))
        elif t.how == "translate":  # a bias moved by a vector (GPT-NeoX's b_O), undone where a translate_neg meets it
            shifts.append(Move("shift", "model", t, p))
        elif t.how != "element":
            return _chg(f"{bias} moves ({t.describe()})")
    return Effect(tuple(moves + shifts), data)


def _embed(spec: GroupSpec, T: _Tags) -> Effect:
    """The sum of the embedding tables' rows: translations traded between tables cancel."""
    from symtrans.group.spec import model_tensor_names

    tables = [t for t in ("word", "pos", "type") if t in model_tensor_names(spec.arch)]
    moves: list[Move] = []
    shifts: list[Move] = []
    data = None
    lin = [bool([t for t, _ in T.of(name) if t.how == "element"]) for name in tables]
    if any(lin) and not all(lin):
        return _chg("the tables' residual axes move differently")
    for name in tables:
        for t, p in T.of(name):
            if t.how == "element":
                if not moves:
                    moves.append(Move("lin", "model", t, p))
            elif t.how == "translate_ones":
                data = "ones"
            elif t.how in ("translate_rows", "translate_rows_neg"):
                neg = [s for s in shifts if s.tag.component == t.component and s.tag.how != t.how]
                if neg:
                    shifts.remove(neg[0])
                else:
                    shifts.append(Move("shift", "model", t, p))
            else:
                return _chg(f"{name} moves ({t.describe()})")
    return Effect(tuple(moves + shifts), data)


def _layer(x: Effect, T: _Tags, spec: GroupSpec, factor: str, x_normed: bool) -> dict[str, Effect]:
    """Every hook of one layer from the layer input's effect and the factor's tags on the layer."""
    a = spec.arch
    ln = a.norm == "layernorm"
    pre = a.norm_placement == "pre"
    out: dict[str, Effect] = {"X": x}
    attn_in = _norm(x, T, "ln1_w", "ln1_b", ln) if pre else x
    normed = True if pre else x_normed
    q = _read(attn_in, T, "W_Q", "b_Q", "qk", normed)
    k = _read(attn_in, T, "W_K", "b_K", "qk", normed)
    v = _read(attn_in, T, "W_V", "b_V", "v", normed)
    scores = _scores(q, k)
    pattern = _softmax(scores)
    z = _mix(pattern, v)
    result = _write(z, T, "W_O", "v")
    mha = Effect(tuple(m for m in result.moves if m.axis != "head"), result.data)
    mid = _residual([x, mha], T, "b_O")
    out.update(q=q, k=k, v=v, scores=scores, A=pattern, Y=z, YO=result, pre_ln1=mid)
    # GPT-NeoX's parallel residual: the FFN's norm reads the layer input, not the sum after attention
    X1 = _norm(x if a.parallel_residual else mid, T, "ln2_w" if pre else "ln1_w", "ln2_b" if pre else "ln1_b", ln)
    h = _read(X1, T, "W_in", "b_in", "ff", True)
    if a.ffn == "gated":
        g = _read(X1, T, "W_gate", "b_gate", "ff", True)
        # act(gate) * up: a map on one branch only passes (the factor's identity: up is linear, a scaled gate
        # homogeneous); on both, it must be the same map (a permutation of the units), applied once
        gl, hl = g.lin("ff"), h.lin("ff")
        same = bool(gl and hl and (gl[0].tag.component, gl[0].tag.how) == (hl[0].tag.component, hl[0].tag.how))
        if g.data or h.data:
            h = _chg(g.data or h.data or "")
        elif gl and hl and not same:
            h = _chg("the gate and up projections move by different maps")
        elif gl and not hl:
            h = g
    f = _write(_act(h), T, "W_out", "ff")
    if pre:
        out["out"] = _residual([mid, f], T, "b_out")
    else:
        out["pre_ln2"] = _residual([X1, f], T, "b_out")
        out["out"] = _norm(out["pre_ln2"], T, "ln2_w", "ln2_b", ln)
    return out


def _products(T: _Tags) -> dict[str, Effect]:
    """``W_Q W_K^T`` and ``W_V W_O`` of one layer, per head: contracted axes cancel, residual axes move."""
    out = {}
    for name, (A, B, inner) in {"W_Q[h] W_K[h]^T": ("W_Q", "W_K", "qk"), "W_V[h] W_O[h]": ("W_V", "W_O", "v")}.items():
        ta, tb = T.of(A), T.of(B)
        moves: list[Move] = []
        why = None
        ia = [Move("lin", inner, t, p) for t, p in ta if t.axis_name == inner]
        ib = [Move("lin", inner, t, p) for t, p in tb if t.axis_name == inner]
        if _pair(ia, ib) is False:
            why = f"the {inner} axis moves on one side only"
        perms = [Move("lin", "head", t, p) for t, p in ta + tb if t.how == "permutation"]
        moves += perms[:1]
        for t, p in ta + tb:
            if t.axis_name == "model" and t.side in ("left", "right") and t.how != "permutation":
                moves.append(Move("lin", "model", t, p))
            elif t.how in ("hyperplane_weight", "translate_ones"):
                why = f"{t.describe()}: a rank-one term that depends on the other factor"
        out[name] = _chg(why) if why else Effect(tuple(moves))
    return out


def _model_matrix(T: _Tags, name: str) -> Effect:
    moves = []
    for t, p in T.of(name):
        if t.side in ("left", "right") and t.how != "permutation":
            moves.append(Move("lin", "model", t, p))
        elif t.how in ("translate_ones", "translate_rows", "translate_rows_neg", "translate"):
            moves.append(Move("shift", "model", t, p))
        else:
            return _chg(f"{t.describe()}: depends on other weights")
    return Effect(tuple(moves))


def _unread_rows(T: _Tags, name: str) -> Effect:
    """A table whose only move is on rows no unpadded input reads (role ``unread``): those rows change, alone."""
    tags = T.of(name)
    return _chg(f"{tags[0][0].describe()}, on rows that no unpadded input reads") if tags else Effect()


def _effects(spec: GroupSpec, factor: str, L: int) -> list[dict[str, Effect]]:
    """Each layer's hooks under one factor (its part at every layer and boundary), first layer first.

    A factor of role ``unread`` moves only table rows that no input reads: every activation is unchanged (the
    tag tables describe the move as a translation of the table; the element is placed on those rows).
    """
    a = spec.arch
    layer_tags, model_tags = _layer_tags(spec, factor, L)
    unread = spec.factor(factor).role == "unread"
    x = _embed(spec, _Tags() if unread else model_tags)
    normed = False
    if a.embedding_norm:
        x = _norm(x, model_tags, "emb_ln_w", "emb_ln_b", a.norm == "layernorm")
        normed = a.norm == "layernorm"
    out = []
    for i in range(L):
        hooks = _layer(x, layer_tags[i], spec, factor, normed)
        hooks.update(_products(layer_tags[i]))
        hooks["word"] = (_unread_rows if unread else _model_matrix)(model_tags, "word")
        hooks["lm_head"] = _model_matrix(model_tags, "lm_head")
        out.append(hooks)
        x = hooks["out"]
        normed = a.norm_placement == "post" and a.norm == "layernorm"
    return out


def gauge_table(arch: Architecture | str | Any, layers: int | None = None) -> list[Cell]:
    """The gauge-invariance table: one :class:`Cell` per hook and factor of G acting on the weights.

    ``arch``: a preset name, an :class:`Architecture`, a :class:`GroupSpec` or loaded weights; ``layers``: how
    many layers to push through (default: the architecture's; each cell keeps every layer's effect).

    Examples
    --------
    >>> cells = gauge_table("minilm-l6-h384")
    >>> sorted({c.verdict for c in cells})  # absent: W_U, no untied output head on an encoder
    ['absent', 'changes', 'covariant', 'invariant']
    >>> next(c for c in cells if c.hook == "hook_result" and c.factor == "S_H").how
    'hook_result[h] -> hook_result[pi(h)] (heads reordered)'
    """
    from symtrans.group.gauge import gauge_factors

    if isinstance(arch, GroupSpec):
        spec = arch
    else:
        spec = GroupSpec.from_arch(getattr(arch, "arch", None) or get_arch(arch))
    L = int(layers if layers is not None else spec.arch.L)
    if L < 1:
        raise SymtransError(f"layers must be at least 1, got {L}")
    cells = []
    rows = hook_rows(spec.arch)
    for factor in gauge_factors(spec):
        per_layer = _effects(spec, factor, L)
        for tl, name in rows:
            effects = tuple(e[name] for e in per_layer)
            for e in effects:
                bad = [m for m in e.moves if m.kind == "lin" and m.axis not in _carried(name) + ("ff",)]
                if bad:
                    raise SymtransError(f"{tl}: {factor} moves axis {bad[0].axis}, which {tl} does not carry")
            verdict, how = _summary(tl, effects, spec, name)
            cells.append(Cell(tl, _tl(name, tl), factor, effects, verdict, how))
    return cells


def _one(tl: str, e: Effect) -> str:
    """An effect in words; a map on both sides of a product (``L W R``) as one map, not as two.

    Examples
    --------
    >>> c = next(c for c in gauge_table("llama2-7b", layers=2) if c.hook == "W_Q W_K^T" and c.factor == "ln1-scaling")
    >>> c.how
    'W_Q W_K^T[h] -> D^-1 W_Q W_K^T[h] (D^-1)^T (left by D^-1, right by (D^-1)^T, per head)'
    """
    if e.data:
        return _WHY.get(e.data, e.data)
    parts = [m.map_part(tl) for m in e.moves]
    sides = {p[2]: p for p in parts if p is not None}
    if len(parts) == 2 and None not in parts and set(sides) == {"left", "right"} and \
            sides["left"][0] == sides["right"][0]:
        (h, left, _, per), (_, right, _, per2) = sides["left"], sides["right"]
        return (f"{h} -> {left} {h} {right} (left by {left}, right by {right}"
                f"{', per head' if per or per2 else ''})")
    return "; ".join(dict.fromkeys(m.text(tl) for m in e.moves))


def _summary(tl: str, effects: tuple[Effect, ...], spec: GroupSpec, name: str) -> tuple[str, str]:
    if name == "lm_head" and name not in _model_names(spec):
        tied = spec.arch.attention == "causal" and spec.arch.tied_lm_head  # a causal LM's head is the word table
        return "absent", ("tied: W_U = W_E^T, moved as the W_E row says" if tied else
                          "this architecture has no untied output head")
    texts = [(e.verdict, _one(tl, e)) for e in effects]
    first = texts[min(1, len(texts) - 1)]  # a middle layer (layer 1) speaks for the rest
    others = [f"layer {i}: {v}{(' (' + h + ')') if h else ''}" for i, (v, h) in enumerate(texts) if (v, h) != first]
    how = first[1] + (("; " if first[1] else "") + "; ".join(others) if others else "")
    return first[0], how


def _model_names(spec: GroupSpec) -> list[str]:
    from symtrans.group.spec import model_tensor_names

    names = model_tensor_names(spec.arch)
    if spec.arch.attention == "causal" and not spec.arch.tied_lm_head:
        names.append("lm_head")
    return names


def markdown_table(arch: Architecture | str | Any, layers: int | None = None) -> str:
    """The table as Markdown: one row per hook, one column per factor (``=`` invariant, ``~`` covariant, ``x``
    changes), then each covariant and changing cell in words.

    Examples
    --------
    >>> lines = markdown_table("minilm-l6-h384").splitlines()
    >>> lines[0][:40], next(x for x in lines if x.startswith("| `hook_z`"))[:36]
    ('| hook | `qk-gauge` | `vo-gauge` | `key-', '| `hook_z` | = | ~ | = | ~ | ~ | = |')
    """
    cells = gauge_table(arch, layers)
    factors = list(dict.fromkeys(c.factor for c in cells))
    mark = {"invariant": "=", "covariant": "~", "changes": "x", "absent": "-"}
    lines = ["| hook | " + " | ".join(f"`{f}`" for f in factors) + " |",
             "|---|" + "---|" * len(factors)]
    for tl, _ in HOOKS:
        row = {c.factor: c for c in cells if c.hook == tl}
        lines.append(f"| `{tl}` | " + " | ".join(mark[row[f].verdict] for f in factors) + " |")
    lines += ["", "`=` invariant, `~` covariant (how below), `x` changes (why below), `-` absent; cells at layer 1, "
              "other layers named where they differ.", ""]
    for c in cells:
        if c.verdict in ("covariant", "changes"):
            lines.append(f"- `{c.hook}` / `{c.factor}`: {c.verdict}: {c.how}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- numeric side
def hook_values(weights: Any, trace: Any, layer: int) -> dict[str, Any]:
    """The table's quantities at ``layer`` of a forward ``trace`` of ``weights`` (symtrans layout: heads first).

    ``q``, ``k``, ``v`` and ``scores`` are recomputed from the layer's attention input (names.PROJECTIONS);
    the rest are the trace's fields and the weights' tensors.

    Examples
    --------
    >>> from symtrans.numeric.forward import encode, load_model
    >>> w = load_model("default")
    >>> vals = hook_values(w, encode(w, n=4, seed=0), 0)
    >>> tuple(vals["scores"].shape), tuple(vals["W_Q[h] W_K[h]^T"].shape)
    ((12, 4, 4), (12, 384, 384))
    """
    import math

    import torch

    t = trace.layers[layer]
    lay = weights.layer(layer)
    x = t.attn_in if t.attn_in is not None else t.X
    q = torch.einsum("nd,hdk->hnk", x, lay["W_Q"]) + (lay["b_Q"][:, None, :] if "b_Q" in lay else 0)
    k = torch.einsum("nd,hdk->hnk", x, lay["W_K"]) + (lay["b_K"][:, None, :] if "b_K" in lay else 0)
    v = torch.einsum("nd,hdk->hnk", x, lay["W_V"]) + (lay["b_V"][:, None, :] if "b_V" in lay else 0)
    out = {"X": t.X, "q": q, "k": k, "v": v, "scores": q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]),
           "A": t.A, "Y": t.Y, "YO": t.YO, "pre_ln1": t.pre_ln1, "pre_ln2": t.pre_ln2, "out": t.out,
           "W_Q[h] W_K[h]^T": lay["W_Q"] @ lay["W_K"].transpose(-1, -2), "W_V[h] W_O[h]": lay["W_V"] @ lay["W_O"],
           "word": weights.tensors["word"]}
    if weights.tensors.get("lm_head") is not None:
        out["lm_head"] = weights.tensors["lm_head"]
    return out


def predict(value: Any, effect: Effect, parts: Any, weights: Any, layer: int) -> Any:
    """The tensor a covariant cell predicts: ``value`` moved by each of ``effect``'s moves.

    ``parts``: the factor's element (:class:`symtrans.group.gauge.GaugeElement` ``.parts[factor]``);
    ``weights``: the unmoved model (for shifts carried through a weight); ``layer``: the hook's layer.

    Examples
    --------
    >>> import torch
    >>> t = AxisTag("b_K", 1, "key-bias-shift", "add", "translate", "u", index="kv")
    >>> u = [torch.ones(1, 2), 2 * torch.ones(1, 2)]
    >>> predict(torch.zeros(2, 1, 2), Effect((Move("shift", "qk", t, 0),)), [{"u": u}], None, 0).tolist()
    [[[1.0, 1.0]], [[2.0, 2.0]]]
    """
    import torch

    out = value
    for m in effect.moves:
        el = parts if m.part is None else parts[m.part]
        c = el[m.tag.component]
        t = m.tag
        if m.kind == "lin" and t.how == "permutation":
            if len(c) != out.shape[0]:
                raise SymtransError(f"{t.describe()}: a reordering of {len(c)} blocks for {out.shape[0]} head blocks "
                                    "(grouped-query layouts are not predicted)")
            out = out[list(c)]
        elif m.kind == "lin":
            if t.how not in ("element", "inverse", "inverse_transpose"):
                raise SymtransError(f"no numeric prediction for the move {t.describe()} (only maps by the element, "
                                    "its inverse or inverse transpose, and reorderings)")
            if isinstance(c, (list, tuple)) and len(c) != out.shape[0]:
                raise SymtransError(f"{t.describe()}: {len(c)} per-head elements for {out.shape[0]} head blocks "
                                    "(grouped-query layouts are not predicted)")
            inv = el.get(t.component + "_inv")

            def R(h: int | None, c: Any = c, inv: Any = inv) -> Any:
                g = c[h] if isinstance(c, (list, tuple)) else c
                ginv = (inv[h] if isinstance(inv, (list, tuple)) else inv) if inv is not None else None
                dense = g.dense() if hasattr(g, "dense") else g
                if t.how == "element":
                    return dense
                ginv = ginv.dense() if hasattr(ginv, "dense") else ginv
                ginv = ginv if ginv is not None else torch.linalg.inv(dense)
                return ginv.T if t.how == "inverse_transpose" else ginv
            per_head = isinstance(c, (list, tuple))
            if t.side == "right" and m.axis != "model" or t.side == "right" and out.dim() <= 2:
                out = torch.stack([out[h] @ R(h) for h in range(out.shape[0])]) if per_head else out @ R(None)
            elif t.side == "left" and m.axis == "model" and out.dim() == 3:  # a weight product's rows (W_Q^T side)
                out = R(None) @ out if t.tensor in ("W_Q", "W_V") else out @ R(None).T
            elif t.side == "right" and m.axis == "model":
                out = out @ R(None)
            else:
                raise SymtransError(f"no numeric form for the move {t.describe()} on a {tuple(out.shape)} tensor")
        else:
            val = c
            if m.through is not None or t.how == "translate_image":
                W = weights.layer(layer)[m.through or t.via]
                if isinstance(val, (list, tuple)):
                    shift = torch.stack([val[h] @ W[h] for h in range(len(val))])
                else:
                    shift = val @ W
                sign = -1 if t.how in ("translate_image", "translate_neg") and m.through is None else 1
                if t.how == "translate_image" and t.via == "W_O" and m.through is None:
                    shift = shift.sum(0)
                out = out + sign * shift
            elif t.how == "translate_ones":
                out = out + (val * torch.ones_like(out[..., :1])).expand_as(out) if val.numel() == 1 else \
                    out + val.expand(-1, out.shape[-1])
            else:
                sign = -1 if t.how in ("translate_neg", "translate_rows_neg") else 1
                if isinstance(val, (list, tuple)):
                    out = out + sign * torch.stack(list(val))
                else:
                    out = out + sign * val
    return out
