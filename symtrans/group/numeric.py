"""Numeric counterparts (torch): sample group elements, act on real weights, check invariance.

Every transform goes through :func:`symtrans.group.spec.act` (the tag table).
On the bundled real model the forward pass is :func:`symtrans.numeric.encode`
(matches ``transformers`` to ~4e-6 in float32); random architectures of other
shapes (d_k != d_model / H, grouped-query attention, rotary, RMSNorm, ReLU)
use :func:`symtrans.group.forward.model_forward` with the torch backend.

Tolerance of an invariance check (why): the transformed weights carry a
relative rounding error of about ``u * kappa`` (``u`` the dtype's unit
roundoff, ``kappa`` the largest condition number of the sampled elements:
applying ``g`` and ``g^-1`` loses that much), and each of the ``L`` layers adds
dot products of length ``d_model`` (error growing like ``sqrt(d_model) u``)
passed through softmax and norms of modest gain. So
``tol = 10 * sqrt(d_model) * L * kappa * u`` relative to ``max |output|``, with
a factor 10 of headroom. A check is supported below ``tol``, fails above
``100 tol`` and is inconclusive in between; a breaking feature is confirmed
when the change exceeds ``100 tol``. The verdict is the
:class:`~symtrans.evidence.Verdict` every producer returns.

Examples
--------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> M, kappa = sample_gl(4, g, torch.float64)
>>> 1.0 <= kappa <= 4.0 + 1e-9
True
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from symtrans.arch import Architecture
from symtrans.config import DEFAULT_DTYPE, DEFAULT_SEED, RUN_DTYPES
from symtrans.errors import SymtransError, suggest
from symtrans.evidence import Verdict
from symtrans.group.elements import MonomialMatrix, elements_of, pair_diagonal, sample_gl
from symtrans.group.spec import GroupSpec, act

__all__ = ["InvarianceCheck", "sample_gl", "sample_element", "layer_blocks", "from_blocks",
           "transform_weights", "transform_weights_steps", "transform_with_head", "model_output", "output_target",
           "model_blocks", "weights_from_blocks", "verify_model",
           "random_blocks", "verify_random", "tolerance", "lie_element", "MonomialMatrix", "pair_diagonal"]


@dataclass(frozen=True)
class InvarianceCheck:
    """One numeric check: factor, dtype, achieved relative change, tolerance and why, verdict.

    Examples
    --------
    >>> c = InvarianceCheck("S_H", "float64", "invariant", 1e-16, 1e-12, "why", Verdict.SUPPORTED, 1.0, "model")
    >>> c.to_dict()["verdict"]
    'supported'
    >>> InvarianceCheck("S_H", "float64", "invariant", 1e-16, 1e-12, "why", "holds", 1.0, "model")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown verdict 'holds'; choose from: 'fails', 'inconclusive', 'supported'
    """

    factor: str
    dtype: str
    expect: str  # invariant | changes
    max_rel_change: float
    tolerance: float
    tolerance_reason: str
    verdict: Verdict  # supported | fails | inconclusive (a word is read as its Verdict)
    condition_number: float
    model: str
    detail: str = ""

    def __post_init__(self) -> None:
        words = [Verdict.SUPPORTED.value, Verdict.FAILS.value, Verdict.INCONCLUSIVE.value]
        if str(getattr(self.verdict, "value", self.verdict)) not in words:
            raise SymtransError(suggest(str(getattr(self.verdict, "value", self.verdict)), words, "verdict"))
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict.

        Examples
        --------
        >>> sorted(InvarianceCheck("f", "float32", "invariant", 0.0, 1.0, "r", "supported", 1.0, "m").to_dict())[:3]
        ['condition_number', 'detail', 'dtype']
        """
        return {**dataclasses.asdict(self), "verdict": self.verdict.label}

    def line(self) -> str:
        """One line for the terminal.

        Examples
        --------
        >>> InvarianceCheck("S_H", "float64", "invariant", 0.0, 1e-12, "r", "supported", 1.0, "m").line().split()[0]
        'supported'
        """
        rel = "<=" if self.max_rel_change <= self.tolerance else ">"
        return (f"{self.verdict.label:<12} {self.factor:<34} {self.dtype}  expect {self.expect:<9} "
                f"rel change {self.max_rel_change:.2e} {rel} tol {self.tolerance:.2e}  (kappa {self.condition_number:.2f})"
                + (f"  {self.detail}" if self.detail else ""))


def tolerance(dtype: Any, d_model: int, layers: int, kappa: float) -> tuple[float, str]:
    """The tolerance of an invariance check and its reason (see the module docstring).

    Examples
    --------
    >>> import torch
    >>> tol, why = tolerance(torch.float64, 384, 6, 2.0)
    >>> 1e-13 < tol < 1e-11
    True
    """
    from symtrans.precision import dtype_name, machine_eps

    u = machine_eps(dtype)
    tol = 10 * math.sqrt(d_model) * layers * kappa * u
    why = (f"10 * sqrt(d_model={d_model}) * L={layers} * kappa={kappa:.3g} * eps({dtype_name(dtype)})"
           f"={u:.3g}: the element and its inverse lose kappa*eps, each layer's length-d_model dot products "
           "add ~sqrt(d_model)*eps; x10 headroom")
    return tol, why


def sample_element(spec: GroupSpec, factor: str, gen: Any, dtype: Any, *,
                   rotary_pairs: str = "adjacent") -> tuple[dict[str, Any], float]:
    """A random element of ``factor`` (torch, in ``dtype``) and its condition number (1 for permutations).

    ``rotary_pairs`` says which coordinates the rotary positions rotate
    together, and so what the commutant of the qk-gauge looks like:
    ``adjacent`` (2b, 2b+1), as :mod:`symtrans.group.forward` does, or
    ``halves`` (b, b + d_k/2), the ``rotate_half`` convention of
    ``transformers`` and :mod:`symtrans.numeric.forward` (real checkpoints).

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("minilm-l6-h384")
    >>> el, kappa = sample_element(spec, "S_H", torch.Generator().manual_seed(0), torch.float64)
    >>> sorted(el["pi"]) == list(range(12)), kappa
    (True, 1.0)

    The construction is the factor's own (:data:`symtrans.group.elements.ELEMENTS`).
    """
    return elements_of(spec, factor).sample(spec, factor, gen, dtype, rotary_pairs)


# --------------------------------------------------------------------------- block form
_HEAD_TENSORS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O")


def layer_blocks(layer: dict[str, Any]) -> dict[str, Any]:
    """One layer of :meth:`ModelWeights.layer` in block form (head lists, vectors as 1 x m).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> b = layer_blocks(load_model("default").layer(0))
    >>> len(b["W_Q"]), tuple(b["b_Q"][0].shape), tuple(b["b_O"].shape)
    (12, (1, 32), (1, 384))
    """
    out: dict[str, Any] = {}
    for name, value in layer.items():
        if value is None:
            continue
        if name in _HEAD_TENSORS:
            out[name] = [v.reshape(1, -1) if v.ndim == 1 else v for v in value.unbind(0)]
        else:
            out[name] = value.reshape(1, -1) if value.ndim == 1 else value
    return out


def from_blocks(blocks: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`layer_blocks`: stacked per-head tensors, 1-D biases.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> L0 = load_model("default").layer(0)
    >>> back = from_blocks(layer_blocks(L0))
    >>> all(bool((back[k] == L0[k]).all()) for k in L0)
    True
    """
    import torch

    out: dict[str, Any] = {}
    for name, value in blocks.items():
        if isinstance(value, list):
            stacked = torch.stack(value)
            out[name] = stacked.squeeze(1) if stacked.shape[1] == 1 and name.startswith("b_") else stacked
        else:
            out[name] = value.reshape(-1) if value.shape[0] == 1 and name not in ("word", "pos", "type") else value
    return out


_MODEL_TENSORS = ("word", "pos", "type", "emb_ln_w", "emb_ln_b", "final_ln_w", "final_ln_b", "lm_head", "pooler_w",
                  "pooler_b")


def _untied_head(arch: Architecture) -> bool:
    """A causal language model whose output head is a separate matrix (not the word table)."""
    return arch.attention == "causal" and not arch.tied_lm_head


def transform_weights(weights: Any, spec: GroupSpec, factor: str, element: Any, *, tags: Any = None) -> Any:
    """A copy of ``weights`` (:class:`ModelWeights`) with ``element`` of ``factor`` applied through the tag table.

    For a per-layer factor ``element`` is a list with one element per layer.
    Key/value tensors are acted on as stored (``H_kv`` heads with
    grouped-query attention), so one element of a key/value head's gauge acts
    on the K/V block that all query heads of its group share.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> spec = GroupSpec.from_arch(w.arch)
    >>> els = [sample_element(spec, "S_H", torch.Generator().manual_seed(i), w.dtype)[0] for i in range(6)]
    >>> w2 = transform_weights(w, spec, "S_H", els)
    >>> bool((w2.W_Q[0, 0] == w.W_Q[0, els[0]["pi"][0]]).all())
    True
    """
    return _transform(weights, spec, factor, element, tags=tags)[0]


def _transform(weights: Any, spec: GroupSpec, factor: str, element: Any, *, tags: Any = None) -> tuple[Any, Any]:
    """:func:`transform_weights`, and what the action does to an identity output head (None without an untied head).

    A model with an untied head ``W`` maps its last hidden state ``h`` to
    logits ``h W``. An action that moves the head sends ``W`` to ``M W`` (every
    head tag acts on its rows), so acting on ``W = I`` gives ``M``, and
    ``h' M = h`` is invariance of the logits for every head, loaded or not (a
    loaded head, ``lm_head`` of the weights, is moved with the rest).
    """
    return _transform_steps(weights, spec, [(factor, element, tags)], weights.weights_hash + "+" + factor)


def transform_weights_steps(weights: Any, spec: GroupSpec, steps: list[tuple[str, Any]], tag: str = "g") -> Any:
    """A copy of ``weights`` with the elements of several factors applied in turn (one conversion to blocks).

    ``steps`` is ``[(factor, element), ...]``, each element as
    :func:`transform_weights` takes it; the product acts like applying them
    one after the other, without converting the weights between the two
    layouts at every step.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> spec = GroupSpec.from_arch(w.arch)
    >>> els = [sample_element(spec, "S_H", torch.Generator().manual_seed(i), w.dtype)[0] for i in range(6)]
    >>> one = transform_weights(transform_weights(w, spec, "S_H", els), spec, "S_H", els)
    >>> two = transform_weights_steps(w, spec, [("S_H", els), ("S_H", els)])
    >>> bool((one.W_Q == two.W_Q).all())
    True
    """
    return transform_with_head(weights, spec, steps, tag)[0]


def transform_with_head(weights: Any, spec: GroupSpec, steps: list[tuple[str, Any]], tag: str = "g") -> tuple[Any, Any]:
    """:func:`transform_weights_steps`, and the image of an identity output head (None without an untied head).

    The part of the action that moves an untied head is returned apart as the
    head image ``M`` (see :func:`_transform`), which :func:`model_output`
    applies; a head the weights hold (``lm_head``) is moved as well.

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.gauge import sample_gauge
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("llama")
    >>> D = sample_gauge(w, seed=0, factors=["final-norm-scaling"]).parts["final-norm-scaling"]["D"]
    >>> moved, head = transform_with_head(w, GroupSpec.from_arch(w.arch), [("final-norm-scaling", {"D": D})])
    >>> bool(torch.allclose(head, torch.diag(1 / D.diagonal())))  # the gain scaled, the head scaled back
    True
    """
    return _transform_steps(weights, spec, [(f, el, None) for f, el in steps], weights.weights_hash + "+" + tag)


def model_output(weights: Any, head: Any = None, **inputs: Any) -> Any:
    """The output the loaded weights compute: the last hidden state (through any final norm), times ``head``.

    ``head`` is the image of an identity output head under an element of G
    (:func:`transform_with_head`): ``h' M = h`` for every head ``W`` is
    invariance of the logits ``h W``. Compare with :func:`output_target`.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> from symtrans.numeric.forward import random_ids
    >>> w = load_model("default")
    >>> tuple(model_output(w, input_ids=random_ids(w, 5, 0)).shape)
    (5, 384)
    """
    from symtrans.numeric.forward import encode

    h = encode(weights, **inputs).hidden_states[-1]
    return h if head is None else h @ head.to(h.dtype)


def output_target(spec: GroupSpec, ref: Any, parts: dict[str, Any]) -> Any:
    """What :func:`model_output` of ``g . W`` must equal where that of ``W`` is ``ref``: ``ref``, or ``ref Q``.

    A factor of role ``residual`` whose tag table leaves the output head alone
    (the residual permutation of an encoder or of a tied head) is an
    equivariance: the output becomes ``out Q``.
    Every other factor, the residual rotation included (it moves the head), leaves it unchanged once the head
    image is applied. ``parts`` maps factor names to their elements (model-scope factors: one element).

    Examples
    --------
    >>> import torch
    >>> spec = GroupSpec.from_arch("gpt2")
    >>> Q = MonomialMatrix([1, 0] + list(range(2, 768)), torch.ones(768, dtype=torch.float64))
    >>> ref = torch.eye(768, dtype=torch.float64)[:2]
    >>> output_target(spec, ref, {"residual-permutation": {"Q": Q}})[0, :2].tolist()
    [0.0, 1.0]
    >>> output_target(spec, ref, {"S_H": []}) is ref
    True
    """
    from symtrans.group.elements import with_role

    for f in with_role(spec, "residual"):
        if f.name in parts and not any(t.tensor == "lm_head" for t in f.tags):
            Q = parts[f.name]["Q"]
            ref = ref @ (Q.dense() if hasattr(Q, "dense") else Q).to(ref.dtype)
    return ref


def _transform_steps(weights: Any, spec: GroupSpec, steps: list[tuple[str, Any, Any]], new_hash: str) -> tuple[Any, Any]:
    import torch

    model = model_blocks(weights)
    head = _untied_head(weights.arch)
    d = weights.d_model
    if head:  # the identity head beside the loaded one (if any): every head tag acts on rows, column by column
        eye = torch.eye(d, dtype=weights.dtype, device=weights.device)
        model["lm_head"] = eye if model.get("lm_head") is None else torch.cat([eye, model["lm_head"]], 1)
    moved = model
    for factor, element, tags in steps:
        moved = act(spec, moved, factor, element, tags=tags)
    image = None
    if head:
        image, moved = moved["lm_head"][:, :d], {**moved, "lm_head": moved["lm_head"][:, d:].contiguous()}
    return weights_from_blocks(weights, moved, new_hash), image


def model_blocks(weights: Any) -> dict[str, Any]:
    """The whole model in block form (what :func:`symtrans.group.spec.act` acts on): layers and model tensors.

    ``{"layers": [layer_blocks(layer i, key/value heads as stored)], "word": ..., ...}``; vectors are
    1 x m rows. :func:`weights_from_blocks` is its inverse. The blocks are views of ``weights``' tensors, and
    an action may hand a block back unchanged (a permutation of heads moves the same tensors): clone a block
    before editing it in place, or ``weights`` changes with it.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> m = model_blocks(w)
    >>> len(m["layers"]), tuple(m["word"].shape), tuple(m["emb_ln_w"].shape)
    (6, (30522, 384), (1, 384))
    >>> m["word"].data_ptr() == w.tensors["word"].data_ptr()  # a view: an edit in place edits w
    True
    """
    layers = [layer_blocks(weights.layer(i, shared_kv=True)) for i in range(weights.n_layers)]
    model: dict[str, Any] = {"layers": layers}
    for t in _MODEL_TENSORS:
        v = weights.tensors.get(t)
        if v is not None:
            model[t] = v.reshape(1, -1) if v.ndim == 1 else v
    return model


def weights_from_blocks(weights: Any, blocks: dict[str, Any], weights_hash: str | None = None) -> Any:
    """A copy of ``weights`` whose tensors are those of ``blocks`` (block form, as :func:`model_blocks` gives).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> back = weights_from_blocks(w, model_blocks(w))
    >>> bool((back.W_O == w.W_O).all()), back.weights_hash == w.weights_hash
    (True, True)
    """
    import torch

    from symtrans.numeric.linalg import new_table
    from symtrans.numeric.weights import _PER_LAYER

    tensors = dict(weights.tensors)
    per_layer = [from_blocks(lp) for lp in blocks["layers"]]
    for name in _PER_LAYER:
        if name in per_layer[0]:
            parts = [lp[name] for lp in per_layer]
            tensors[name] = torch.stack(parts, out=new_table((len(parts), *parts[0].shape), parts[0]))
    for t in _MODEL_TENSORS:
        if t in blocks and weights.tensors.get(t) is not None:
            tensors[t] = blocks[t].reshape(weights.tensors[t].shape)
    return dataclasses.replace(weights, tensors=tensors, weights_hash=weights_hash or weights.weights_hash,
                               storage_dtypes=dict(weights.storage_dtypes))


def _verdict(change: float, tol: float, expect: str) -> Verdict:
    """The verdict of an invariance check: the tolerance band of :func:`symtrans.precision.tolerance_state`.

    Examples
    --------
    >>> _verdict(1e-15, 1e-12, "invariant").label, _verdict(1e-9, 1e-12, "invariant").label
    ('supported', 'fails')
    >>> _verdict(1e-11, 1e-12, "invariant").label, _verdict(1e-9, 1e-12, "changes").label
    ('inconclusive', 'supported')
    """
    from symtrans.precision import tolerance_state

    state = tolerance_state(change, tol, expect_small=expect == "invariant")
    return {True: Verdict.SUPPORTED, False: Verdict.FAILS, None: Verdict.INCONCLUSIVE}[state]


def _rel(a: Any, b: Any) -> float:
    return float((a - b).abs().max() / b.abs().max())


# --------------------------------------------------------------------------- the real model
def verify_model(weights: Any, *, n: int, dtypes: tuple[str, ...] = RUN_DTYPES,
                 seed: int = DEFAULT_SEED, factors: list[str] | None = None, tags: dict[str, Any] | None = None) -> list[InvarianceCheck]:
    """Apply a random element of every factor of G to real weights; check the output, per dtype.

    The output is the last hidden state through the final norm, if the model
    has one, and for a causal language model with an untied head the logits
    (the head's part of the action is applied to an identity head, see
    :func:`_transform`). Per-layer factors get an independent element in
    every layer; key/value factors act on the stored key/value heads (one
    element per key/value head with grouped-query attention). S_n is checked
    twice: on the embeddings (layers only; an equivariance, unless a causal
    mask or rotary positions inside the layers break it) and on token ids with
    the model's positions (a change expected where positions are used). The
    residual permutation is an equivariance (the output must become ``out Q``)
    unless an untied head absorbs it (:func:`output_target`). A
    factor that a present feature breaks (e.g. ``ffn-scaling`` under GeLU)
    must change it. ``tags`` replaces factors' tag tables (to test a wrong action).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> cs = verify_model(load_model("default"), dtypes=("float64",), n=6, factors=["S_H"])
    >>> cs[0].verdict.label, cs[0].max_rel_change < cs[0].tolerance
    ('supported', True)
    """
    import torch

    from symtrans.numeric.forward import encode, random_ids

    spec = GroupSpec.from_arch(weights.arch)
    names = factors or [f.name for f in spec.factors]
    # real checkpoints follow transformers' rotate_half convention (symtrans.numeric.forward.rope_tables)
    pairs = "halves"

    out: list[InvarianceCheck] = []
    for dt_name in dtypes:
        w = weights.to(dtype=dt_name)
        dt = w.dtype
        ids = random_ids(w, n, seed)
        base = encode(w, input_ids=ids)
        ref = base.hidden_states[-1]
        L, d = w.n_layers, w.d_model
        for name in names:
            f = spec.factor(name)
            if not f.tags and f.scope != "data":
                continue  # structurally absent on this architecture: no tensor to move
            gen = torch.Generator().manual_seed(seed + 1)
            expect = "changes" if f.status == "broken" else "invariant"
            the_tags = (tags or {}).get(name)
            if f.scope == "data":
                el, kappa = sample_element(dataclasses.replace(spec, arch=spec.arch.with_sizes(n=n)), name, gen, dt)
                P = el["P"]
                tol, why = tolerance(dt, d, L, kappa)
                inside = [b.feature for b in f.broken_by
                          if b.present and (b.feature == "causal mask" or b.feature.startswith("rotary"))]
                exp1 = "changes" if inside else "invariant"
                ch = _rel(model_output(w, X=base.embeddings[P]), ref[P])
                out.append(InvarianceCheck(f"{name} (layers, on embeddings)", dt_name, exp1, ch, tol, why,
                                           _verdict(ch, tol, exp1), kappa, w.arch.name,
                                           "Layers(P X) vs P Layers(X)" + (f"; broken by {', '.join(inside)}"
                                                                           if inside else "")))
                ch = _rel(model_output(w, input_ids=ids[P]), ref[P])
                out.append(InvarianceCheck(f"{name} (token ids, {spec.arch.positional} positions)", dt_name, expect,
                                           ch, tol, why, _verdict(ch, tol, expect), kappa, w.arch.name,
                                           "Model(P ids) vs P Model(ids)"))
                continue
            if f.scope in ("layer", "stack"):  # between-layer factors: the embedding norm is the first boundary
                pairs_ = [sample_element(spec, name, gen, dt, rotary_pairs=pairs)
                          for _ in range(L if f.scope == "layer" else int(spec.boundaries("model")))]
                element, kappa = [p[0] for p in pairs_], max(p[1] for p in pairs_)
                target = ref
            else:  # model-scope factors: the output unchanged, or moved by a residual equivariance
                element, kappa = sample_element(spec, name, gen, dt, rotary_pairs=pairs)
                target = output_target(spec, ref, {name: element})
            moved_w, head = _transform(w, spec, name, element, tags=the_tags)
            moved = model_output(moved_w, head, input_ids=ids)
            tol, why = tolerance(dt, d, L, kappa)
            ch = _rel(moved, target)
            detail = "; ".join(b.feature for b in f.broken_by if b.present and b.effect == "breaks")
            out.append(InvarianceCheck(name, dt_name, expect, ch, tol, why, _verdict(ch, tol, expect), kappa,
                                       w.arch.name, f"broken by {detail}" if detail else ""))
    return out


# --------------------------------------------------------------------------- random architectures
def random_blocks(arch: Architecture, seed: int = DEFAULT_SEED, dtype: Any = None) -> dict[str, Any]:
    """Random torch weights (block form, model dict with data ``X``) for any modelled architecture.

    Weights are Gaussian with variance 1/fan-in; gains are 1 + N(0, 0.1^2).

    Examples
    --------
    >>> from symtrans.group.certify import tiny_arch
    >>> p = random_blocks(tiny_arch("bert-base", d_model=6, d_k=4, d_v=3, H=2))
    >>> tuple(p["layers"][0]["W_O"][0].shape)
    (3, 6)
    """
    import torch

    from symtrans.group.forward import unused_position_rows
    from symtrans.group.spec import LAYER_AXES, MODEL_AXES, layer_tensor_names, model_tensor_names

    dtype = dtype or torch.float64
    gen = torch.Generator().manual_seed(seed)
    sz = {"head": arch.H, "kv": arch.H_kv, "model": arch.d_model, "qk": arch.d_k, "v": arch.d_v,
          "ff": arch.d_ff, "position": arch.n + unused_position_rows(arch)}

    def mat(rows: int, cols: int, name: str) -> Any:
        if name.endswith("_w"):
            return (1 + 0.1 * torch.randn(rows, cols, generator=gen, dtype=torch.float64)).to(dtype)
        scale = 1.0 if rows == 1 else rows ** -0.5
        return (scale * torch.randn(rows, cols, generator=gen, dtype=torch.float64)).to(dtype)

    def tensor(name: str, axes: tuple[str, ...]) -> Any:
        if axes[0] in ("head", "kv"):
            inner = axes[1:]
            shape = (1, sz[inner[0]]) if len(inner) == 1 else (sz[inner[0]], sz[inner[1]])
            return [mat(*shape, name) for _ in range(sz[axes[0]])]
        shape = (1, sz[axes[0]]) if len(axes) == 1 else (sz[axes[0]], sz[axes[1]])
        return mat(*shape, name)

    params: dict[str, Any] = {"layers": [{t: tensor(t, LAYER_AXES[t]) for t in layer_tensor_names(arch)}
                                         for _ in range(arch.L)]}
    for t in model_tensor_names(arch):
        if t not in ("word", "type"):
            params[t] = tensor(t, MODEL_AXES[t])
    params["X"] = mat(arch.n, arch.d_model, "X") * arch.d_model ** 0.5
    return params


def verify_random(arch: Architecture, *, dtype: str = DEFAULT_DTYPE, seed: int = DEFAULT_SEED,
                  factors: list[str] | None = None, tags: dict[str, Any] | None = None) -> list[InvarianceCheck]:
    """Invariance of every factor on random weights of ``arch`` (any modelled shape), torch forward.

    Examples
    --------
    >>> from symtrans.group.certify import tiny_arch
    >>> a = tiny_arch("bert-base", d_model=6, d_k=4, d_v=3, H=2, d_ff=5, n=4, L=2)
    >>> [c.verdict.label for c in verify_random(a, factors=["qk-gauge", "vo-gauge"])]
    ['supported', 'supported']
    """
    import torch

    from symtrans.group.forward import Features, TorchBackend, model_forward
    from symtrans.numeric.weights import resolve_dtype

    dt = resolve_dtype(dtype)
    spec = GroupSpec.from_arch(arch)
    feat = Features.of(arch)
    be = TorchBackend(dtype=dt)
    params = random_blocks(arch, seed, dt)
    ref = model_forward(params, feat, be)
    out = []
    for f in spec.factors:
        if factors is not None and f.name not in factors:
            continue
        if (not f.tags and f.scope != "data") or (f.scope == "model" and f.kind == "continuous"):
            continue  # absent here, or acting on embedding tables this forward (token rows X in) does not have
        gen = torch.Generator().manual_seed(seed + 7)
        expect = "changes" if f.status == "broken" else "invariant"
        the_tags = (tags or {}).get(f.name)
        if f.scope in ("layer", "stack"):
            count = int(arch.L) if f.scope == "layer" else int(spec.boundaries("model"))
            pairs = [sample_element(spec, f.name, gen, dt) for _ in range(count)]
            el, kappa = [p[0] for p in pairs], max(p[1] for p in pairs)
            moved = model_forward(act(spec, params, f.name, el, tags=the_tags), feat, be)
            target = ref
        elif f.scope == "data":
            el, kappa = sample_element(spec, f.name, gen, dt)
            moved = model_forward(act(spec, params, f.name, el), feat, be)
            target = ref[el["P"]]
        else:
            el, kappa = sample_element(spec, f.name, gen, dt)
            moved_params = act(spec, params, f.name, el, tags=the_tags)
            moved_params["X"] = params["X"] @ el["Q"]
            moved = model_forward(moved_params, feat, be)
            target = ref @ el["Q"]
        tol, why = tolerance(dt, int(arch.d_model), int(arch.L), kappa)
        ch = _rel(moved, target)
        out.append(InvarianceCheck(f.name, dtype, expect, ch, tol, why, _verdict(ch, tol, expect), kappa, arch.name))
    return out


def lie_element(spec: GroupSpec, factor: str, nxt: Any, *, rotary_pairs: str = "adjacent") -> dict[str, Any]:
    """An element of a continuous factor near the identity, from its coordinates piece by piece (torch).

    ``nxt()`` returns the next piece of Lie-algebra coordinates (sizes from
    :meth:`GroupSpec.factor_sizes`). Translation factors are abelian: the
    element *is* its coordinates; a gain scaling is ``I + diag(coordinates)``;
    a per-head gauge is ``I + M``. The construction is the factor's own
    (:data:`symtrans.group.elements.ELEMENTS`).

    Examples
    --------
    >>> import torch
    >>> from symtrans.arch import get_arch
    >>> spec = GroupSpec.from_arch(get_arch("bert-base").with_sizes(H=2, d_k=384, d_v=384, d_ff=5))
    >>> it = iter([torch.zeros(n) for n in spec.factor_sizes("ffn-bias-transfer")])
    >>> sorted(lie_element(spec, "ffn-bias-transfer", lambda: next(it)))
    ['t']
    """
    return elements_of(spec, factor).lie(spec, factor, nxt, rotary_pairs)
