"""The toolkit's own per-head encoder forward pass (post-LN BERT form).

At each layer ``l`` with input ``X`` (n x d_model) it computes, batched over heads:

* ``A[h] = softmax((X W_Q[h] + b_Q[h]) (X W_K[h] + b_K[h])^T / sqrt(d_k))``
* ``Y[h] = A[h] (X W_V[h] + b_V[h])``                       (n x d_v)
* ``YO[h] = Y[h] W_O[h]``                                  (n x d_model)
* ``mha = sum_h YO[h]``  (the paper's MHA(X), without ``b_O``)
* ``pre_ln1 = X + mha + b_O``; ``X1 = LN(pre_ln1)``
* ``ffn = gelu(X1 W_in + b_in) W_out + b_out``
* ``pre_ln2 = X1 + ffn``; ``out = LN(pre_ln2)``

which is exactly Hugging Face's ``BertLayer`` for one unpadded sequence.

Examples
--------
>>> w = load_model("default")
>>> trace = encode(w, text="rank collapse in transformers")
>>> trace.layers[0].A.shape[0], float(trace.layers[0].A[0].sum(-1).mean())
(12, 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from symtrans.errors import SymtransError
from symtrans.numeric.weights import ModelWeights, default_model_path, load_model  # noqa: F401 (doctests)

__all__ = ["LayerTrace", "Trace", "encode", "embed", "embed_input", "tokenize", "layer_norm", "attention",
           "encoder_layer", "random_ids", "position_ids"]


@dataclass
class LayerTrace:
    """Every per-head internal of one layer (tensors on the weights' device and dtype).

    Examples
    --------
    >>> t = encode(load_model("default"), n=8, seed=0).layers[1]
    >>> tuple(t.Y.shape), tuple(t.YO.shape), tuple(t.out.shape)
    ((12, 8, 32), (12, 8, 384), (8, 384))
    """

    X: Any  # layer input, n x d_model
    A: Any  # [H, n, n]
    Y: Any  # [H, n, d_v]
    YO: Any  # [H, n, d_model]
    mha: Any  # sum_h YO[h], n x d_model (no b_O)
    pre_ln1: Any  # X + mha + b_O
    X1: Any  # LN(pre_ln1)
    ffn: Any  # FFN(X1)
    pre_ln2: Any  # X1 + ffn
    out: Any  # LN(pre_ln2)


@dataclass
class Trace:
    """A forward pass: the embedding output and one :class:`LayerTrace` per layer.

    ``hidden_states`` matches ``transformers``' ``output_hidden_states``:
    the embeddings, then each layer's output.

    Examples
    --------
    >>> tr = encode(load_model("default"), n=5, seed=1)
    >>> len(tr.hidden_states)
    7
    """

    embeddings: Any
    layers: list[LayerTrace]
    input_ids: Any | None = None

    @property
    def hidden_states(self) -> list[Any]:
        """Embeddings plus each layer's output."""
        return [self.embeddings] + [t.out for t in self.layers]


def layer_norm(x: Any, weight: Any | None, bias: Any | None, eps: float) -> Any:
    """Row-wise LayerNorm ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased variance).

    Examples
    --------
    >>> import torch
    >>> y = layer_norm(torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64), None, None, 0.0)
    >>> [round(v, 4) for v in y[0].tolist()]
    [-1.2247, 0.0, 1.2247]
    """
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdim=True)
    y = centred / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _gelu(x: Any, kind: str) -> Any:
    import torch

    if kind == "gelu":
        return torch.nn.functional.gelu(x)
    if kind == "gelu_new":
        return torch.nn.functional.gelu(x, approximate="tanh")
    if kind == "relu":
        return torch.relu(x)
    if kind == "silu":
        return torch.nn.functional.silu(x)
    raise SymtransError(f"activation {kind!r} is not supported by the forward pass")


def attention(X: Any, layer: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Return ``(A, Y, YO)`` of one layer for input ``X``, batched over heads.

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=6, seed=0).embeddings
    >>> A, Y, YO = attention(X, w.layer(0))
    >>> tuple(A.shape), tuple(YO.shape)
    ((12, 6, 6), (12, 6, 384))
    """
    import torch

    q = torch.einsum("nd,hdk->hnk", X, layer["W_Q"]) + layer["b_Q"][:, None, :]
    k = torch.einsum("nd,hdk->hnk", X, layer["W_K"]) + layer["b_K"][:, None, :]
    v = torch.einsum("nd,hdk->hnk", X, layer["W_V"]) + layer["b_V"][:, None, :]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    A = torch.softmax(scores, dim=-1)
    Y = A @ v
    YO = Y @ layer["W_O"]
    return A, Y, YO


def encoder_layer(X: Any, layer: dict[str, Any], eps: float, activation: str = "gelu") -> LayerTrace:
    """Run one post-LN encoder layer and return all its internals.

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=4, seed=0).embeddings
    >>> t = encoder_layer(X, w.layer(0), w.arch.ln_eps)
    >>> bool((t.out - encode(w, n=4, seed=0).layers[0].out).abs().max() == 0)
    True
    """
    A, Y, YO = attention(X, layer)
    mha = YO.sum(0)
    pre_ln1 = X + mha + layer["b_O"]
    X1 = layer_norm(pre_ln1, layer["ln1_w"], layer["ln1_b"], eps)
    ffn = _gelu(X1 @ layer["W_in"] + layer["b_in"], activation) @ layer["W_out"] + layer["b_out"]
    pre_ln2 = X1 + ffn
    out = layer_norm(pre_ln2, layer["ln2_w"], layer["ln2_b"], eps)
    return LayerTrace(X=X, A=A, Y=Y, YO=YO, mha=mha, pre_ln1=pre_ln1, X1=X1, ffn=ffn,
                      pre_ln2=pre_ln2, out=out)


def tokenize(weights: ModelWeights | str, text: str) -> list[int]:
    """Token ids of ``text`` with the model's own tokenizer (``tokenizer.json``).

    Examples
    --------
    >>> ids = tokenize(load_model("default"), "hello world")
    >>> ids[0], ids[-1]  # [CLS] ... [SEP]
    (101, 102)
    """
    from tokenizers import Tokenizer

    directory = weights.model_dir if isinstance(weights, ModelWeights) else default_model_path()
    path = directory / "tokenizer.json" if directory is not None else None
    if path is None or not path.exists():
        raise SymtransError(f"{directory}: no tokenizer.json next to the weights; pass token ids instead")
    from symtrans.validate import confined_file, read_bytes_bounded

    confined_file(directory, "tokenizer.json", "tokenizer")
    raw = read_bytes_bounded(path, "tokenizer", 64 << 20)  # a regular file of bounded size (not /dev/zero)
    try:
        tok = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as err:  # tokenizers raises its own exception types
        raise SymtransError(f"{path}: not a readable tokenizer.json ({str(err).splitlines()[0][:120]})") from None
    tok.no_padding()  # the bundled tokenizer.json pads to a fixed length; we want the real tokens
    tok.no_truncation()
    ids = tok.encode(text).ids
    if not text.strip() or len(ids) <= 2:  # only [CLS] and [SEP]
        raise SymtransError(f"text {text!r} tokenizes to no content tokens")
    return list(ids)


def embed(weights: ModelWeights, input_ids: Any) -> Any:
    """Embedding output for token ids: word + position + token type 0, then LayerNorm.

    Examples
    --------
    >>> w = load_model("default")
    >>> tuple(embed(w, [101, 7592, 102]).shape)
    (3, 384)
    """
    import torch

    ids = torch.as_tensor(input_ids, dtype=torch.long, device=weights.device).reshape(-1)
    n = ids.numel()
    arch = weights.arch
    if n < 2:
        raise SymtransError(f"a sequence needs at least 2 tokens for rank questions, got n={n}")
    if weights.pos is not None and n > weights.pos.shape[0] - weights.position_offset:
        raise SymtransError(f"sequence of {n} tokens exceeds the model's "
                            f"{weights.pos.shape[0] - weights.position_offset} positions")
    if int(ids.min()) < 0 or int(ids.max()) >= int(arch.vocab_size):
        raise SymtransError(f"token id out of range [0, {arch.vocab_size})")
    x = weights.word[ids]
    if weights.pos is not None:
        x = x + weights.pos[position_ids(weights, ids)]
    if weights.type is not None:
        x = x + weights.type[0]
    return layer_norm(x, weights.emb_ln_w, weights.emb_ln_b, arch.ln_eps)


def position_ids(weights: ModelWeights, ids: Any) -> Any:
    """Position-table rows for token ids, as ``transformers`` numbers them.

    BERT and DistilBERT use ``0..n-1``. RoBERTa uses ``padding_idx + 1 + k``
    for the k-th non-padding token and ``padding_idx`` for padding tokens.

    Examples
    --------
    >>> position_ids(load_model("default"), [101, 7592, 102]).tolist()
    [0, 1, 2]
    """
    import torch

    ids = torch.as_tensor(ids, device=weights.device).reshape(-1)
    if weights.family != "roberta":
        return torch.arange(ids.numel(), device=ids.device)
    pad = weights.position_offset - 1
    keep = (ids != pad).long()
    return torch.cumsum(keep, 0) * keep + pad


def random_ids(weights: ModelWeights, n: int, seed: int) -> Any:
    """``n`` token ids drawn uniformly (seeded) between [CLS]-like ends, for reproducible inputs.

    Examples
    --------
    >>> random_ids(load_model("default"), 5, 0).tolist() == random_ids(load_model("default"), 5, 0).tolist()
    True
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    low = min(1000, int(weights.arch.vocab_size) - 1)
    return torch.randint(low, int(weights.arch.vocab_size), (n,), generator=g)


def embed_input(weights: ModelWeights, *, text: str | None = None, input_ids: Any = None, X: Any = None,
                n: int | None = None, seed: int = 0) -> tuple[Any, Any]:
    """Return ``(X, ids)``: the first layer's input from exactly one of text, ids, ``X`` or ``n``.

    ``ids`` is ``None`` when ``X`` was given directly.

    Examples
    --------
    >>> X, ids = embed_input(load_model("default"), text="hello world")
    >>> tuple(X.shape), ids.tolist()
    ((4, 384), [101, 7592, 2088, 102])
    """
    import torch

    given = sum(x is not None for x in (text, input_ids, X, n))
    if given != 1:
        raise SymtransError("give exactly one of text, input_ids, X or n")
    if text is not None:
        input_ids = tokenize(weights, text)
    if n is not None:
        if n < 2:
            raise SymtransError(f"n must be at least 2, got {n}")
        input_ids = random_ids(weights, n, seed)
    if X is None:
        return embed(weights, input_ids), torch.as_tensor(input_ids)
    X = torch.as_tensor(X, dtype=weights.dtype, device=weights.device)
    if X.ndim != 2 or X.shape[1] != weights.d_model:
        raise SymtransError(f"X must be n x {weights.d_model}, got {tuple(X.shape)}")
    if X.shape[0] < 2:
        raise SymtransError("X needs at least 2 rows")
    if not bool(torch.isfinite(X).all()):
        raise SymtransError("X contains NaN or Inf")
    return X, None


def encode(weights: ModelWeights, *, text: str | None = None, input_ids: Any = None, X: Any = None,
           n: int | None = None, seed: int = 0, layers: int | None = None) -> Trace:
    """Run the encoder on text, token ids, a given embedding matrix ``X``, or ``n`` random tokens.

    Examples
    --------
    >>> w = load_model("default")
    >>> tr = encode(w, input_ids=[101, 7592, 2088, 102])
    >>> tuple(tr.layers[-1].out.shape)
    (4, 384)
    """
    import torch

    X, ids = embed_input(weights, text=text, input_ids=input_ids, X=X, n=n, seed=seed)
    count = weights.n_layers if layers is None else layers
    traces = []
    h = X
    with torch.no_grad():
        for i in range(count):
            t = encoder_layer(h, weights.layer(i), weights.arch.ln_eps, weights.arch.activation)
            traces.append(t)
            h = t.out
    return Trace(embeddings=X, layers=traces, input_ids=ids)
