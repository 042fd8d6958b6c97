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
from symtrans.numeric.forward import (Structure, attention, encode, encoder_layer, ffn, layer_norm,  # noqa: F401
                                      norm, structure)
from symtrans.numeric.weights import load_model  # noqa: F401 (doctests)

__all__ = ["pure_attention", "attention_residual", "attention_mlp", "full_block", "run_stack",
           "VARIANTS", "variant_function", "default_ln"]


def _pre(st: Structure | None, ln: bool) -> bool:
    return st is not None and st.form == "pre-ln" and ln


def _pre_norm(Z: Any, layer: dict[str, Any], which: str, st: Structure) -> Any:
    """A pre-LN layer's norm ``which`` (ln1, ln2) on ``Z``; ``Z`` itself where the model has none (OLMo 2)."""
    return norm(Z, layer[f"{which}_w"], layer[f"{which}_b"], st) if st.pre_norms else Z


def _mha(X: Any, layer: dict[str, Any], residual: bool, st: Structure | None = None, ln: bool = False) -> Any:
    """``[X +] sum_h Y^h W_O^h + b_O``, summed in the order the forward uses (pre-LN: of ``N1(X)``)."""
    inp = _pre_norm(X, layer, "ln1", st) if st is not None and _pre(st, ln) else X
    mha = attention(inp, layer, st)[2].sum(0)
    if _pre(st, ln) and st is not None and st.post_norms:  # Gemma 3: the post-norm is part of the sub-block
        mha = norm(mha + layer["b_O"], layer["ln1_post_w"], None, st)
        return (X + mha) if residual else mha
    return (X + mha + layer["b_O"]) if residual else mha + layer["b_O"]


def _ffn(Z: Any, layer: dict[str, Any], activation: str, st: Structure | None = None, ln: bool = False) -> Any:
    out = ffn(Z, layer, activation)
    if _pre(st, ln) and st is not None and st.post_norms:
        out = norm(out, layer["ln2_post_w"], None, st)
    return out


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
    Z = _mha(X, layer, residual=False, st=st, ln=ln)
    if _pre(st, ln) or not ln:
        return Z
    return layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)


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
    Z = _mha(X, layer, residual=True, st=st, ln=ln)
    if _pre(st, ln) or not ln:
        return Z
    return layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)


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
    Z = _mha(X, layer, residual=False, st=st, ln=ln)
    if _pre(st, ln):  # parallel residual (GPT-NeoX): the MLP reads N2 of the layer input, beside attention
        return (Z + _ffn(_pre_norm(X, layer, "ln2", st), layer, activation, st, ln) if st.parallel_residual
                else _ffn(_pre_norm(Z, layer, "ln2", st), layer, activation, st, ln))
    if ln:
        Z = layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)
    out = _ffn(Z, layer, activation)
    return layer_norm(out, layer["ln2_w"], layer["ln2_b"], eps) if ln else out


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
    Z = _mha(X, layer, residual=True, st=st, ln=ln)
    if _pre(st, ln):  # parallel residual (GPT-NeoX): the MLP reads N2 of the layer input, not of Z
        return Z + _ffn(_pre_norm(X if st.parallel_residual else Z, layer, "ln2", st), layer, activation, st, ln)
    if ln:
        Z = layer_norm(Z, layer["ln1_w"], layer["ln1_b"], eps)
    out = Z + _ffn(Z, layer, activation)
    return layer_norm(out, layer["ln2_w"], layer["ln2_b"], eps) if ln else out


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
    L = weights.n_layers
    depth = L if depth is None else int(depth)
    if depth < 1:
        raise SymtransError(f"depth must be at least 1, got {depth}")
    if layer_index is not None and not 0 <= layer_index < L:
        raise SymtransError(f"layer {layer_index} out of range: the model has {L} layers")
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
