"""Model variants built from one layer's real weights, as plain functions.

Each variant maps a hidden-state matrix ``X`` (n x d_model) to the next one,
using one layer's per-head weights (``weights.layer(i)``). With
``MHA(X) = sum_h A^h (X W_V^h + b_V^h) W_O^h`` (the paper's MHA plus the value
bias) and ``b_O`` the output bias:

================  ===========================================  ==========================
name              ``ln=False``                                 ``ln=True``
================  ===========================================  ==========================
pure-attention    ``Z = MHA(X) + b_O`` (Dong's SAN regime)     ``LN1(Z)``
residual          ``Z = X + MHA(X) + b_O``                     ``LN1(Z)``
mlp               ``F(Z)``, ``Z = MHA(X) + b_O`` (no skip)     ``LN2(F(LN1(Z)))``
full              ``Z + F(Z)``, ``Z = X + MHA(X) + b_O``       the real post-LN BERT layer
================  ===========================================  ==========================

where ``F(Z) = act(Z W_in + b_in) W_out + b_out`` and LN1/LN2 are the layer's
own LayerNorms. ``full`` without LN is the paper's residual recursion
``X + Delta``; with LN it is exactly :func:`symtrans.numeric.forward.encoder_layer`.

Decoders (a pre-LN :class:`~symtrans.numeric.forward.Structure`, passed as
``st``) use causal attention in every variant, and their norms sit where the
real model has them, before each sub-block (``N`` is LayerNorm or RMSNorm):

================  ===========================================  ==========================================
name              ``ln=False``                                 ``ln=True``
================  ===========================================  ==========================================
pure-attention    ``Z = MHA(X) + b_O`` (causal)                ``MHA(N1(X)) + b_O``
residual          ``Z = X + MHA(X) + b_O``                     ``X + MHA(N1(X)) + b_O``
mlp               ``F(MHA(X) + b_O)``                          ``F(N2(MHA(N1(X)) + b_O))``
full              ``Z + F(Z)``, ``Z = X + MHA(X) + b_O``       the real pre-LN layer
================  ===========================================  ==========================================

With a parallel residual (GPT-NeoX) the MLP reads the layer input, as the
real layer does: ``mlp`` with ``ln`` is ``MHA(N1(X)) + b_O + F(N2(X))`` (the
layer without its skip) and ``full`` with ``ln`` is
``X + MHA(N1(X)) + b_O + F(N2(X))``; without ``ln`` the variants are the
paper's sequential maps for every model.

Biases are kept: ``b_V`` and ``b_O`` add rows of the form ``1 x^T`` (``A`` is
row-stochastic), which leave Dong's residual unchanged.

Examples
--------
>>> w = load_model("default")
>>> X = encode(w, n=6, seed=0).embeddings
>>> states = run_stack(w, X, "pure-attention", depth=3, layer_index=0)
>>> len(states), tuple(states[-1].shape)
(4, (6, 384))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symtrans.errors import SymtransError, suggest
from symtrans.numeric.forward import (  # noqa: F401
    Structure, UndefinedAtEpsZero, attention, encode, encoder_layer, ffn, layer_norm, norm, structure)
from symtrans.numeric.weights import load_model  # noqa: F401 (doctests)

__all__ = ["pure_attention", "attention_residual", "attention_mlp", "full_block", "run_stack", "run_stacks",
           "VARIANTS", "variant_function", "default_ln"]


def _pre(st: Structure | None, ln: bool) -> bool:
    return st is not None and st.form == "pre-ln" and ln


def _pre_norm(Z: Any, layer: dict[str, Any], which: str, st: Structure) -> Any:
    """A pre-LN layer's norm ``which`` (ln1, ln2) on ``Z``; ``Z`` itself where the model has none (OLMo 2)."""
    return norm(Z, layer[f"{which}_w"], layer[f"{which}_b"], st) if st.pre_norms else Z


def _attention_input(X: Any, layer: dict[str, Any], st: Structure | None, ln: bool) -> Any:
    """What the variant's attention reads: ``N1(X)`` for a pre-LN model with ``ln``, else ``X``."""
    return _pre_norm(X, layer, "ln1", st) if st is not None and _pre(st, ln) else X


def _mha(X: Any, layer: dict[str, Any], residual: bool, st: Structure | None = None, ln: bool = False,
         mha: Any = None) -> Any:
    """``[X +] sum_h Y^h W_O^h + b_O``, summed in the order the forward uses (pre-LN: of ``N1(X)``).

    ``mha`` (``sum_h Y^h W_O^h`` of :func:`_attention_input`) when already computed (:func:`run_stacks`).
    """
    if mha is None:
        mha = attention(_attention_input(X, layer, st, ln), layer, st)[2].sum(0)
    if _pre(st, ln) and st is not None and st.post_norms:  # Gemma 3: the post-norm is part of the sub-block
        mha = norm(mha + layer["b_O"], layer["ln1_post_w"], None, st)
        return (X + mha) if residual else mha
    return (X + mha + layer["b_O"]) if residual else mha + layer["b_O"]


def _ffn_post(out: Any, layer: dict[str, Any], st: Structure | None, ln: bool) -> Any:
    """The FFN sub-block's post-norm where the model has one (Gemma 3, with ``ln``), else ``out`` itself."""
    if _pre(st, ln) and st is not None and st.post_norms:
        return norm(out, layer["ln2_post_w"], None, st)
    return out


def _parts(variant: str, X: Any, layer: dict[str, Any], eps: float, ln: bool, st: Structure | None,
           mha: Any = None) -> tuple[Any, Callable[[Any], Any]]:
    """One step of ``variant`` in two parts: the FFN's input (None: no FFN), and what makes the next state of
    the FFN's output (post-norm included; None where there is no FFN). ``mha`` as :func:`_mha` takes it."""
    Z = _mha(X, layer, residual=variant in ("residual", "full"), st=st, ln=ln, mha=mha)
    if variant in ("pure-attention", "residual"):
        return None, lambda _: Z if _pre(st, ln) or not ln else layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)
    inp, finish = (_mlp_plan if variant == "mlp" else _full_plan)(X, Z, layer, eps, ln, st)
    return inp, lambda f: finish(_ffn_post(f, layer, st if _pre(st, ln) else None, ln))


def _one_step(variant: str, X: Any, layer: dict[str, Any], eps: float, activation: str, ln: bool,
              st: Structure | None) -> Any:
    """The next state of one variant (the definition :func:`run_stacks` steps several of at once)."""
    inp, finish = _parts(variant, X, layer, eps, ln, st)
    return finish(None if inp is None else ffn(inp, layer, activation))


def pure_attention(X: Any, layer: dict[str, Any], eps: float = 1e-12, *, ln: bool = False,
                   st: Structure | None = None) -> Any:
    """Attention alone, no residual and no MLP: ``MHA(X) + b_O`` (then LN1 if ``ln``).

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=5, seed=0).embeddings
    >>> Z = pure_attention(X, w.layer(0))
    >>> bool((Z - (encode(w, n=5, seed=0).layers[0].mha + w.layer(0)["b_O"])).abs().max() == 0)
    True
    """
    return _one_step("pure-attention", X, layer, eps, "gelu", ln, st)


def attention_residual(X: Any, layer: dict[str, Any], eps: float = 1e-12, *, ln: bool = False,
                       st: Structure | None = None) -> Any:
    """Attention plus the skip connection: ``X + MHA(X) + b_O`` (then LN1 if ``ln``).

    Examples
    --------
    >>> w = load_model("default")
    >>> tr = encode(w, n=5, seed=0)
    >>> bool((attention_residual(tr.embeddings, w.layer(0), w.arch.ln_eps, ln=True)
    ...       - tr.layers[0].X1).abs().max() == 0)
    True
    """
    return _one_step("residual", X, layer, eps, "gelu", ln, st)


def attention_mlp(X: Any, layer: dict[str, Any], eps: float = 1e-12, activation: str = "gelu", *,
                  ln: bool = False, st: Structure | None = None) -> Any:
    """Attention then the MLP, no skip connections: ``F(MHA(X) + b_O)`` (LN1, LN2 if ``ln``).

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=5, seed=0).embeddings
    >>> tuple(attention_mlp(X, w.layer(0), ln=True).shape)
    (5, 384)
    """
    return _one_step("mlp", X, layer, eps, activation, ln, st)


def _mlp_plan(X: Any, Z: Any, layer: dict[str, Any], eps: float, ln: bool,
              st: Structure | None) -> tuple[Any, Callable[[Any], Any]]:
    """:func:`attention_mlp` after attention (``Z``): the FFN's input, and what makes the output of its FFN."""
    if _pre(st, ln) and st is not None:  # parallel residual (GPT-NeoX): the MLP reads N2 of the layer input
        if st.parallel_residual:
            return _pre_norm(X, layer, "ln2", st), lambda f: Z + f
        return _pre_norm(Z, layer, "ln2", st), lambda f: f
    if ln:
        return (layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps),
                lambda f: layer_norm(f, layer["ln2_w"], layer["ln2_b"], eps))
    return Z, lambda f: f


def full_block(X: Any, layer: dict[str, Any], eps: float = 1e-12, activation: str = "gelu", *,
               ln: bool = True, st: Structure | None = None) -> Any:
    """The whole block: with ``ln`` the real post-LN BERT layer, without it ``X + Delta``.

    Examples
    --------
    >>> w = load_model("default")
    >>> tr = encode(w, n=5, seed=0)
    >>> bool((full_block(tr.embeddings, w.layer(0), w.arch.ln_eps) - tr.layers[0].out).abs().max() == 0)
    True
    """
    return _one_step("full", X, layer, eps, activation, ln, st)


def _full_plan(X: Any, Z: Any, layer: dict[str, Any], eps: float, ln: bool,
               st: Structure | None) -> tuple[Any, Callable[[Any], Any]]:
    """:func:`full_block` after attention (``Z``): the FFN's input, and what makes the output of its FFN."""
    if _pre(st, ln) and st is not None:  # parallel residual (GPT-NeoX): the MLP reads N2 of the layer input
        return _pre_norm(X if st.parallel_residual else Z, layer, "ln2", st), lambda f: Z + f
    if ln:
        Z1 = layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)
        return Z1, lambda f: layer_norm(Z1 + f, layer["ln2_w"], layer["ln2_b"], eps)
    return Z, lambda f: Z + f


#: variant name -> (function, takes an activation, default ``ln``)
VARIANTS: dict[str, tuple[Callable[..., Any], bool, bool]] = {
    "full": (full_block, True, True),
    "pure-attention": (pure_attention, False, False),
    "residual": (attention_residual, False, False),
    "mlp": (attention_mlp, True, False),
}


def default_ln(variant: str) -> bool:
    """Whether a variant uses LayerNorm by default (only ``full``: the real model).

    Examples
    --------
    >>> default_ln("full"), default_ln("pure-attention")
    (True, False)
    """
    return VARIANTS[_check(variant)][2]


def _check(variant: str) -> str:
    if variant not in VARIANTS:
        raise SymtransError(suggest(variant, VARIANTS, "variant"))
    return variant


def variant_function(variant: str, eps: float, activation: str, ln: bool | None = None,
                     st: Structure | None = None) -> Callable[[Any, Any], Any]:
    """Return ``step(X, layer)`` for a variant name, with ``eps``, activation, ``ln`` (and structure) bound.

    Examples
    --------
    >>> step = variant_function("residual", 1e-12, "gelu")
    >>> w = load_model("default")
    >>> X = encode(w, n=4, seed=0).embeddings
    >>> bool((step(X, w.layer(0)) - attention_residual(X, w.layer(0))).abs().max() == 0)
    True
    >>> variant_function("pure", 1e-12, "gelu")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown variant 'pure'; choose from: 'full', 'mlp', 'pure-attention', 'residual'
    """
    func, takes_activation, ln_default = VARIANTS[_check(variant)]
    use_ln = ln_default if ln is None else bool(ln)
    if takes_activation:
        return lambda X, layer: func(X, layer, eps, activation, ln=use_ln, st=st)
    return lambda X, layer: func(X, layer, eps, ln=use_ln, st=st)


def run_stack(weights: Any, X: Any, variant: str = "full", depth: int | None = None,
              layer_index: int | None = None, ln: bool | None = None) -> list[Any]:
    """Apply a variant ``depth`` times from ``X``; return ``[X, X_1, ..., X_depth]``.

    ``layer_index=None`` uses the model's layers in order, cycling (layer
    ``i mod L``) when ``depth`` exceeds the number of layers; an integer
    repeats that one layer's weights at every step (a depth sweep).
    ``ln=None`` takes the variant's default (:func:`default_ln`).

    Examples
    --------
    >>> w = load_model("default")
    >>> tr = encode(w, n=5, seed=0)
    >>> states = run_stack(w, tr.embeddings, "full")
    >>> len(states), bool((states[-1] - tr.layers[-1].out).abs().max() == 0)
    (7, True)
    >>> len(run_stack(w, tr.embeddings, "residual", depth=10, layer_index=2))
    11
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> d = tiny_decoder("gpt2")
    >>> dt = encode(d, n=5)
    >>> bool((run_stack(d, dt.embeddings, "full")[-1] - dt.layers[-1].out).abs().max() == 0)
    True
    """
    import torch

    st = structure(weights)

    def step_at(i: int) -> Any:  # each layer's own structure (Gemma 3: its rotary base and window)
        return variant_function(variant, weights.arch.ln_eps, weights.arch.activation, ln,
                                st=st.at(i) if st.form == "pre-ln" else None)
    L, depth = weights.n_layers, _depth(weights, depth, layer_index)
    states = [X]
    cached: dict[int, Any] = {}
    with torch.no_grad():
        for k in range(depth):
            i = layer_index if layer_index is not None else k % L
            if i not in cached:  # a streamed model loads each layer once, keeps one at a time
                cached.clear()
                cached[i] = (weights.layer(i, shared_kv=True), step_at(i))
            layer, step = cached[i]
            states.append(step(states[-1], layer))
    return states


def _depth(weights: Any, depth: int | None, layer_index: int | None) -> int:
    """The number of steps of a stack (default: one per layer), ``layer_index`` checked against the model."""
    L = weights.n_layers
    depth = L if depth is None else int(depth)
    if depth < 1:
        raise SymtransError(f"depth must be at least 1, got {depth}")
    if layer_index is not None and not 0 <= layer_index < L:
        raise SymtransError(f"layer {layer_index} out of range: the model has {L} layers")
    return depth


def run_stacks(weights: Any, X: Any, variants: dict[str, tuple[str, bool | None]], depth: int | None = None,
               layer_index: int | None = None, stop: Callable[[Any], bool] | None = None) -> dict[str, list[Any]]:
    """Several variants applied ``depth`` times from ``X``, stepped together: name -> :func:`run_stack`'s states.

    ``variants`` maps a name to ``(variant, ln)`` (``ln=None``: the variant's
    default); ``depth`` and ``layer_index`` are :func:`run_stack`'s. At each
    step every variant applies the same layer, so its weights are read once
    for all of them: the attention of every variant is one
    :func:`~symtrans.numeric.forward.attention` call on the stacked inputs,
    the FFN of every variant that has one is one
    :func:`~symtrans.numeric.forward.ffn` call. The maps are the variants' own
    (the one definition :func:`run_stack` applies), so the states equal
    :func:`run_stack`'s bit for bit wherever the BLAS computes each row of a
    product independently of the rows stacked with it (MKL on Intel does; MKL
    on an AMD EPYC differs at rounding level, about 3 eps of the largest
    entry). A variant whose state meets ``stop`` (e.g.
    an underflowed one) is not stepped further: its list ends with that state.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> d = tiny_decoder("llama")
    >>> X = encode(d, n=5).embeddings
    >>> both = run_stacks(d, X, {"a": ("residual", True), "b": ("mlp", False)}, depth=3)
    >>> alone = {k: run_stack(d, X, v, depth=3, ln=ln)[-1] for k, (v, ln) in (("a", ("residual", True)),
    ...                                                                      ("b", ("mlp", False)))}
    >>> [float((both[k][-1] - alone[k]).abs().max() / alone[k].abs().max()) < 1e-14 for k in "ab"]
    [True, True]
    """
    import torch

    st = structure(weights)
    eps, activation = weights.arch.ln_eps, weights.arch.activation
    specs = {name: (_check(v), default_ln(v) if ln is None else bool(ln)) for name, (v, ln) in variants.items()}
    L, depth = weights.n_layers, _depth(weights, depth, layer_index)
    states = {name: [X] for name in specs}
    ended = {name for name in specs if stop is not None and stop(X)}
    cached: dict[int, Any] = {}
    everything = specs
    with torch.no_grad():
        for k in range(depth):
            specs = {name: spec for name, spec in everything.items() if name not in ended}
            if not specs:
                break
            i = layer_index if layer_index is not None else k % L
            if i not in cached:  # a streamed model loads each layer once, keeps one at a time
                cached.clear()
                cached[i] = (weights.layer(i, shared_kv=True), st.at(i) if st.form == "pre-ln" else None)
            layer, sti = cached[i]

            def step(some: dict[str, Any]) -> dict[str, Any]:  # the variants in ``some``, one step, stacked
                cur = {name: states[name][-1] for name in some}
                YO = attention(torch.stack([_attention_input(cur[name], layer, sti, ln)
                                            for name, (_, ln) in some.items()]), layer, sti)[2]  # [V, H, n, d]
                parts = {name: _parts(v, cur[name], layer, eps, ln, sti, mha=YO[j].sum(0))
                         for j, (name, (v, ln)) in enumerate(some.items())}
                fed = [name for name in some if parts[name][0] is not None]
                F = ffn(torch.stack([parts[name][0] for name in fed]), layer, activation) if fed else None
                return {name: parts[name][1](None if parts[name][0] is None else F[fed.index(name)]) for name in some}

            try:
                new = step(specs)
            except UndefinedAtEpsZero:
                # a variant reached a row an eps-free norm is not defined at (a stack without a residual whose
                # rows went to 0, under a per-head QK norm at eps 0): each stepped alone, and the ones that have no
                # value there end, as an underflowed one does; the others go on
                new = {}
                for name, spec in specs.items():
                    try:
                        new.update(step({name: spec}))
                    except UndefinedAtEpsZero:
                        ended.add(name)
            for name, x in new.items():
                states[name].append(x)
                if stop is not None and stop(x):
                    ended.add(name)
    return states
