"""The numeric backend (torch): real weights, a per-head forward pass, measurements.

Importing :mod:`symtrans` does not import this package; torch loads on first use.

Per-head tensor layout (one table, used everywhere):

=========  ==================================  =====================================
name       shape                               meaning
=========  ==================================  =====================================
W_Q, W_K   [layer, head, d_model, d_k]         query/key projections, x @ W_Q[l, h]
W_V        [layer, head, d_model, d_v]         value projection
W_O        [layer, head, d_v, d_model]         output projection block of head h
b_Q, b_K   [layer, head, d_k]                  query/key biases (zeros where absent)
b_V        [layer, head, d_v]                  value bias
b_O        [layer, d_model]                    output projection bias
ln1_w/_b   [layer, d_model]                    norm after attention (pre-LN: before it)
W_gate     [layer, d_model, d_ff]              gated FFN only: act(x @ W_gate + b_gate)
b_gate     [layer, d_ff]
W_in       [layer, d_model, d_ff]              FFN first matrix (x @ W_in; gated: up)
b_in       [layer, d_ff]
W_out      [layer, d_ff, d_model]              FFN second matrix
b_out      [layer, d_model]
ln2_w/_b   [layer, d_model]                    norm after the FFN (pre-LN: before it)
word       [vocab, d_model]                    token embeddings
pos        [positions, d_model]                learned positions (RoBERTa: from padding_idx + 1)
type       [type_vocab, d_model]               token-type rows (row 0 used; None for DistilBERT)
emb_ln_*   [d_model]                           embedding LayerNorm weight and bias (None: decoders)
final_ln   [d_model]                           final_ln_w/_b: decoders' final norm (RMSNorm: _b zeros)
=========  ==================================  =====================================

With grouped-query attention (``H_kv < H``) the stored ``W_K, W_V, b_K, b_V``
have ``H_kv`` heads; ``weights.layer(i)`` repeats them so that block ``h`` is
the one query head ``h`` reads (``layer(i, shared_kv=True)``: as stored).

Modules: :mod:`~symtrans.numeric.weights` (loading, streaming one layer at a
time), :mod:`~symtrans.numeric.forward` (the per-head encoder),
:mod:`~symtrans.numeric.variants` (pure attention, +residual, +MLP, full; with
or without LN), :mod:`~symtrans.numeric.measure` (records),
:mod:`~symtrans.numeric.linalg` (rank decisions).
"""

from symtrans.numeric.weights import (ModelWeights, StreamedWeights, iter_layers, load_model, resolve_device,
                                      resolve_dtype, stream_model)
from symtrans.numeric.forward import LayerTrace, Trace, embed, encode, tokenize
from symtrans.numeric.streaming import report_streams

__all__ = ["ModelWeights", "StreamedWeights", "load_model", "stream_model", "iter_layers", "resolve_device",
           "resolve_dtype", "LayerTrace", "Trace", "embed", "encode", "tokenize", "report_streams"]
