"""symtrans's names beside TransformerLens's and nnsight's: one table, read by the docs and checked by a test.

The paper and symtrans write L, H, d_k, d_ff, A^h, Y^h and Y^h W_O^h; TransformerLens writes n_layers,
n_heads, d_head, d_mlp, ``hook_pattern``, ``hook_z`` and ``hook_result``. :data:`ACTIVATIONS` maps each
per-layer internal of :class:`symtrans.numeric.forward.LayerTrace` to the TransformerLens 4.x hook that
holds the same tensor, with the axis order of each; :data:`SIZES` maps the architecture's sizes.
``tests/test_interop_names.py`` compares every row with a real ``TransformerBridge``'s ``run_with_cache``: the
pre-LN rows on GPT-2, the post-LN rows on the bundled BERT (all-MiniLM-L6-v2). For post-LN BERT the 4.x bridge and
TransformerLens's legacy ``HookedEncoder`` hook different tensors under one name: the bridge's ``hook_resid_mid`` is
``ln2.hook_in`` (the sum ``X_1 + FFN(X_1)``, the legacy ``hook_resid_post``) and its ``hook_resid_post`` the block's
output after the second norm (the legacy ``hook_normalized_resid_post``); the legacy ``hook_resid_mid`` is
``X + MHA(X) + b_O``, which the bridge hooks as ``ln1.hook_in``. The rows follow the bridge.

Examples
--------
>>> row = next(r for r in ACTIVATIONS if r.symtrans == "Y")
>>> row.hook(3), row.symtrans_axes, row.tl_axes
('blocks.3.attn.hook_z', 'head, pos, d_v', 'batch, pos, head, d_head')
>>> SIZES["d_k"]
'd_head'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NameRow", "ACTIVATIONS", "PROJECTIONS", "SIZES", "WEIGHTS", "PRODUCTS"]


@dataclass(frozen=True)
class NameRow:
    """One per-layer quantity: its symtrans name (a ``LayerTrace`` field), the paper's symbol and the TL hook."""

    symtrans: str  # the LayerTrace attribute
    paper: str  # the paper's symbol
    tl: str  # the TransformerLens hook, ``{l}`` for the layer
    symtrans_axes: str
    tl_axes: str
    meaning: str
    forms: str = "both"  # "both", "pre-ln" (decoders) or "post-ln" (encoders): where the row holds as written

    def hook(self, layer: int) -> str:
        """The TransformerLens hook name at ``layer``.

        Examples
        --------
        >>> ACTIVATIONS[0].hook(0)
        'blocks.0.hook_resid_pre'
        """
        return self.tl.format(l=layer)


#: per-layer activations, in the order of the forward (batch axis: TransformerLens's first; symtrans has none)
ACTIVATIONS: tuple[NameRow, ...] = (
    NameRow("X", "X", "blocks.{l}.hook_resid_pre", "pos, d_model", "batch, pos, d_model",
            "the layer's input (the residual stream before it)"),
    NameRow("attn_in", "N_1(X)", "blocks.{l}.ln1.hook_out", "pos, d_model", "batch, pos, d_model",
            "what attention reads: the first norm's output (pre-LN decoders)", "pre-ln"),
    NameRow("A", "A^h", "blocks.{l}.attn.hook_pattern", "head, query, key", "batch, head, query, key",
            "the attention probabilities of each head"),
    NameRow("Y", "Y^h = A^h X W_V^h", "blocks.{l}.attn.hook_z", "head, pos, d_v", "batch, pos, head, d_head",
            "each head's output before W_O"),
    NameRow("YO", "Y^h W_O^h", "blocks.{l}.attn.hook_result", "head, pos, d_model", "batch, pos, head, d_model",
            "each head's contribution to the residual stream (TransformerLens: only with use_attn_result)"),
    NameRow("pre_ln1", "X + MHA(X) + b_O", "blocks.{l}.hook_resid_mid", "pos, d_model", "batch, pos, d_model",
            "the residual stream after attention (pre-LN decoders; post-LN encoders normalise it first)",
            "pre-ln"),
    NameRow("X1", "N_2(X + MHA(X) + b_O)", "blocks.{l}.ln2.hook_out", "pos, d_model", "batch, pos, d_model",
            "what the MLP reads: the second norm's output (pre-LN decoders)", "pre-ln"),
    NameRow("X1", "N_1(X + MHA(X) + b_O)", "blocks.{l}.ln1.hook_out", "pos, d_model", "batch, pos, d_model",
            "what the MLP reads: the first norm's output (post-LN encoders)", "post-ln"),
    NameRow("ffn", "FFN(X_1)", "blocks.{l}.hook_mlp_out", "pos, d_model", "batch, pos, d_model",
            "the MLP's output, b_out included"),
    NameRow("pre_ln2", "X_1 + FFN(X_1)", "blocks.{l}.hook_resid_mid", "pos, d_model", "batch, pos, d_model",
            "post-LN encoders: the sum the second norm reads (the 4.x bridge hooks it as hook_resid_mid, at "
            "ln2.hook_in; the legacy HookedEncoder calls it hook_resid_post)", "post-ln"),
    NameRow("out", "the layer's output", "blocks.{l}.hook_resid_post", "pos, d_model", "batch, pos, d_model",
            "the residual stream after the layer (post-LN encoders: after the second norm, the bridge's block output; "
            "the legacy HookedEncoder calls it hook_normalized_resid_post)"),
)

#: per-head projections TransformerLens hooks that :class:`~symtrans.numeric.forward.LayerTrace` does not keep: the
#: ``symtrans`` field names the formula over the layer's attention input (``attn_in``) and weights that gives them
#: (before rotary positions, as TransformerLens's ``hook_q``/``hook_k``; the scores scaled by 1/sqrt(d_k), unmasked)
PROJECTIONS: tuple[NameRow, ...] = (
    NameRow("q", "X W_Q^h + b_Q^h", "blocks.{l}.attn.hook_q", "head, pos, d_k", "batch, pos, head, d_head",
            "each head's queries"),
    NameRow("k", "X W_K^g + b_K^g", "blocks.{l}.attn.hook_k", "head, pos, d_k", "batch, pos, head, d_head",
            "each key/value head's keys"),
    NameRow("v", "X W_V^g + b_V^g", "blocks.{l}.attn.hook_v", "head, pos, d_v", "batch, pos, head, d_head",
            "each key/value head's values"),
    NameRow("scores", "q k^T / sqrt(d_k)", "blocks.{l}.attn.hook_attn_scores", "head, query, key",
            "batch, head, query, key", "each head's attention scores, before the softmax"),
)

#: per-head weight products and the output head (W_E is in :data:`WEIGHTS`): symtrans's formula -> TransformerLens
PRODUCTS: dict[str, str] = {
    "W_Q[h] W_K[h]^T": "model.QK (W_Q @ W_K.transpose) [n_layers, n_heads, d_model, d_model]",
    "W_V[h] W_O[h]": "model.OV (W_V @ W_O) [n_layers, n_heads, d_model, d_model]",
    "lm_head": "W_U [d_model, d_vocab]",
}

#: the architecture's sizes: symtrans (and the paper) -> TransformerLens's config field
SIZES: dict[str, str] = {
    "L": "n_layers", "H": "n_heads", "d_model": "d_model", "d_k": "d_head", "d_v": "d_head", "d_ff": "d_mlp",
    "n": "n_ctx (the sequence length of one input, at most n_ctx)", "vocab": "d_vocab",
}

#: per-head weights: symtrans's ``ModelWeights.tensors`` key -> TransformerLens's parameter (one layer)
WEIGHTS: dict[str, str] = {
    "W_Q [L, H, d_model, d_k]": "blocks.{l}.attn.W_Q [n_heads, d_model, d_head]",
    "W_K [L, H, d_model, d_k]": "blocks.{l}.attn.W_K [n_heads, d_model, d_head]",
    "W_V [L, H, d_model, d_v]": "blocks.{l}.attn.W_V [n_heads, d_model, d_head]",
    "W_O [L, H, d_v, d_model]": "blocks.{l}.attn.W_O [n_heads, d_head, d_model]",
    "W_in [L, d_model, d_ff]": "blocks.{l}.mlp.W_in [d_model, d_mlp]",
    "W_out [L, d_ff, d_model]": "blocks.{l}.mlp.W_out [d_mlp, d_model]",
    "word [vocab, d_model]": "W_E [d_vocab, d_model]",
}
