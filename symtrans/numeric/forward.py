"""The toolkit's own per-head forward pass: post-LN encoders and pre-LN decoders.

At each layer ``l`` with input ``X`` (n x d_model) it computes, batched over heads:

* ``A[h] = softmax((X W_Q[h] + b_Q[h]) (X W_K[h] + b_K[h])^T / sqrt(d_k))``
* ``Y[h] = A[h] (X W_V[h] + b_V[h])``                       (n x d_v)
* ``YO[h] = Y[h] W_O[h]``                                  (n x d_model)
* ``mha = sum_h YO[h]``  (the paper's MHA(X), without ``b_O``)
* ``pre_ln1 = X + mha + b_O``; ``X1 = LN(pre_ln1)``
* ``ffn = gelu(X1 W_in + b_in) W_out + b_out``
* ``pre_ln2 = X1 + ffn``; ``out = LN(pre_ln2)``

which is exactly Hugging Face's ``BertLayer`` for one unpadded sequence.

Decoders (GPT-2, Llama, Mistral, Qwen2; :class:`Structure` ``form="pre-ln"``)
normalise before each sub-block and never after it:

* ``attn_in = N1(X)``; ``A``, ``Y``, ``YO`` as above from ``attn_in``, with
  the causal mask (``A[h][i, j] = 0`` for ``j > i``; Mistral's sliding window
  also masks ``j <= i - window``), rotary positions applied to the queries and
  keys (Llama family), and query head ``h`` reading key/value head
  ``kv_index[h]`` (grouped-query attention);
* ``pre_ln1 = X + mha + b_O`` (the residual stream after attention);
* ``X1 = N2(pre_ln1)`` (what the MLP reads); ``ffn = F(X1)``;
* ``pre_ln2 = out = pre_ln1 + ffn`` (a pre-LN layer does not normalise its output);

``N`` is LayerNorm (GPT-2) or RMSNorm (Llama family); ``F`` is
``act(Z W_in + b_in) W_out + b_out`` or, gated,
``(act(Z W_gate + b_gate) * (Z W_in + b_in)) W_out + b_out``. The model's final
norm applies to the last hidden state only (``Trace.hidden_states[-1]``), as in
``transformers``' ``output_hidden_states``. :attr:`LayerTrace.norm_inputs`
names the input of each norm for either form.

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
from symtrans.numeric.weights import ModelWeights, default_model_path, load_model, table_rows  # noqa: F401 (doctests)

__all__ = ["LayerTrace", "Trace", "Structure", "structure", "encode", "embed", "embed_input", "embedding_scale", "tokenize",
           "layer_norm", "rms_norm", "norm", "attention", "encoder_layer", "decoder_layer", "layer_forward",
           "random_ids", "position_ids", "kv_index", "rope_tables", "ffn"]


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
    pre_ln2: Any  # X1 + ffn (pre-LN: pre_ln1 + ffn, equal to out)
    out: Any  # LN(pre_ln2) (pre-LN: pre_ln2)
    form: str = "post-ln"
    attn_in: Any = None  # what attention reads: X (post-LN) or N1(X) (pre-LN)
    parallel: bool = False  # GPT-NeoX's parallel residual: the FFN's norm reads X, not pre_ln1

    @property
    def norm_inputs(self) -> dict[str, Any]:
        """The input of each of the layer's two norms (``ln1``, ``ln2``), for either form.

        Examples
        --------
        >>> t = encode(load_model("default"), n=4, seed=0).layers[0]
        >>> t.norm_inputs["ln1"] is t.pre_ln1, t.norm_inputs["ln2"] is t.pre_ln2
        (True, True)
        """
        if self.form == "pre-ln":
            return {"ln1": self.X, "ln2": self.X if self.parallel else self.pre_ln1}
        return {"ln1": self.pre_ln1, "ln2": self.pre_ln2}


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
    final: Any = None  # the final norm of the last layer's output (decoders), when every layer ran

    @property
    def hidden_states(self) -> list[Any]:
        """Embeddings plus each layer's output (the last one through the final norm, if the model has one)."""
        states = [self.embeddings] + [t.out for t in self.layers]
        if self.final is not None:
            states[-1] = self.final
        return states


class UndefinedAtEpsZero(SymtransError):
    """An eps-free norm (eps = 0) met a row it divides 0 by 0 at: the map has no value there.

    A derived stack that reaches such a row (the depth sweep's variants without a residual) ends there; the model's
    own forward pass raising it is the input's problem, said in one line (a :class:`SymtransError`).

    Examples
    --------
    >>> issubclass(UndefinedAtEpsZero, SymtransError)
    True
    """


def _eps_free_defined(scale_sq: Any, name: str, row: str) -> None:
    """Refuse an eps-free norm at a row it divides by a zero scale (0/0: the model is not defined there).

    Examples
    --------
    >>> import torch
    >>> layer_norm(torch.zeros(2, 3, dtype=torch.float64), None, None, 0.0)
    Traceback (most recent call last):
    ...
    symtrans.numeric.forward.UndefinedAtEpsZero: the eps-free LayerNorm (eps = 0) is not defined at a row whose entries are all equal (its centred row is 0): it divides 0 by 0 there (a pruned head's queries or keys under a per-head norm, or a constant row); the model has no value at eps 0 for this input: run with the checkpoint's eps (or --eps > 0)
    """
    if bool((scale_sq == 0).any()):
        raise UndefinedAtEpsZero(f"the eps-free {name} (eps = 0) is not defined at a row {row}: it divides 0 by 0 "
                                 "there (a pruned head's queries or keys under a per-head norm, or a constant row); "
                                 "the model has no value at eps 0 for this input: run with the checkpoint's eps (or "
                                 "--eps > 0)")


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
    if eps == 0:
        _eps_free_defined(var, "LayerNorm", "whose entries are all equal (its centred row is 0)")
    y = centred / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x: Any, weight: Any | None, eps: float, float32_internals: bool = False,
             gain_in_float32: bool = False) -> Any:
    """Row-wise RMSNorm ``x / sqrt(mean(x^2) + eps) * weight``.

    ``float32_internals`` reproduces ``transformers``' Llama/Qwen2/Mistral
    RMSNorm, which normalises in float32 whatever the model's dtype (used
    only by the parity tests to reach an exact reference); with
    ``gain_in_float32`` the gain is applied in float32 too, before the cast
    back (Gemma's ``(x.float() ...) * (1 + w.float())``).

    Examples
    --------
    >>> import torch
    >>> y = rms_norm(torch.tensor([[3.0, 4.0]], dtype=torch.float64), None, 0.0)
    >>> [round(v, 6) for v in y[0].tolist()]
    [0.848528, 1.131371]
    """
    import torch

    dt = x.dtype
    h = x.to(torch.float32) if float32_internals else x
    ms = h.pow(2).mean(-1, keepdim=True)
    if eps == 0:
        _eps_free_defined(ms, "RMSNorm", "that is 0")
    y = h * torch.rsqrt(ms + eps)
    if float32_internals and gain_in_float32 and weight is not None:
        return (y * weight.to(torch.float32)).to(dt)
    y = y.to(dt)
    return y * weight if weight is not None else y


@dataclass(frozen=True)
class Structure:
    """The structural choices the forward needs, read from the architecture and config.

    Examples
    --------
    >>> st = structure(load_model("default"))
    >>> st.form, st.norm, st.causal, st.rope_theta
    ('post-ln', 'layernorm', False, None)
    """

    form: str = "post-ln"  # or "pre-ln"
    norm: str = "layernorm"  # or "rmsnorm"
    eps: float = 1e-12
    activation: str = "gelu"
    gated: bool = False
    causal: bool = False
    rope_theta: float | None = None
    sliding_window: int | None = None
    final_norm: bool = False
    float32_internals: bool = False  # reproduce transformers' float32 RMSNorm/RoPE/softmax (parity tests)
    qk_norm: bool = False  # RMSNorm on each head's queries and keys (gains q_norm_w, k_norm_w), before the rotation
    post_norms: bool = False  # a norm on each sub-block's output before the residual add (ln1_post_w, ln2_post_w)
    attn_scalar: float | None = None  # scores scaled by attn_scalar^-1/2 (Gemma's query_pre_attn_scalar)
    attn_softcap: float | None = None  # Gemma 2: scores s -> c tanh(s / c) after scaling, before the mask
    pre_norms: bool = True  # False (OLMo 2): the sub-blocks read the residual stream directly
    qk_norm_full: bool = False  # OLMo 2: the query (key) norm is over all heads' entries at once
    # per layer (rotary base, window) when layers differ (Gemma 3's local/global layers); resolved by at(i)
    gain_offset: int = 0  # Gemma: gains stored as w and applied as 1 + w (the loader applies the offset)
    parallel_residual: bool = False  # GPT-NeoX: out = X + MHA(N1(X)) + b_O + FFN(N2(X))
    rotary_dim: int | None = None  # GPT-NeoX: rotary positions on each head's first rotary_dim coordinates only
    per_layer: tuple[tuple[float | None, int | None], ...] = ()
    layer: int | None = None  # the layer this structure was resolved for (at(i)), when layers differ

    def at(self, i: int) -> Structure:
        """The structure of layer ``i``: its rotary base and window where layers differ (Gemma 3), else itself.

        Examples
        --------
        >>> st = structure(load_model("default"))
        >>> st.at(3) is st
        True
        """
        if not self.per_layer:
            return self
        import dataclasses

        if not 0 <= i < len(self.per_layer):
            raise SymtransError(f"layer {i} out of range: the model has {len(self.per_layer)} layers")
        theta, window = self.per_layer[i]
        return dataclasses.replace(self, rope_theta=theta, sliding_window=window, per_layer=(), layer=i)

    @property
    def decoder(self) -> bool:
        """True for the causal pre-LN decoders."""
        return self.form == "pre-ln"

    def describe(self) -> str:
        """One line: the layer's form as the measurements assume it.

        Examples
        --------
        >>> structure(load_model("default")).describe()[:8]
        'post-LN '
        """
        if self.form == "post-ln":
            return ("post-LN encoder: X1 = LN1(X + MHA(X) + b_O), out = LN2(X1 + FFN(X1)); MHA(X) = sum_h "
                    "Y^h W_O^h without b_O; bidirectional attention")
        norm = "RMSNorm" if self.norm == "rmsnorm" else "LayerNorm"
        pos = f"rotary positions (theta {self.rope_theta:g})" if self.rope_theta else "learned positions"
        win = f", sliding window {self.sliding_window}" if self.sliding_window else ""
        ffn_kind = "gated (SwiGLU-style)" if self.gated else "two-matrix"
        if self.per_layer:
            kinds = sorted({(t, w) for t, w in self.per_layer}, key=str)
            pos = "rotary positions, per layer " + ", ".join(
                f"({'theta ' + format(t, 'g') if t else 'NoPE: no rotation'}, "
                f"{'window ' + str(w) if w else 'no window'})" for t, w in kinds)
        if self.rotary_dim is not None:
            pos += f" on the first {self.rotary_dim} coordinates of each head"
        if self.parallel_residual:
            return (f"pre-LN decoder with a parallel residual: out = X + MHA(N1(X)) + b_O + FFN(N2(X)), N = {norm}, "
                    f"{ffn_kind} FFN; causal attention{win}, {pos}; MHA = sum_h Y^h W_O^h without b_O"
                    + ("; a final norm follows the last layer (in Trace.hidden_states, not in the rank profiles)"
                       if self.final_norm else ""))
        if self.post_norms:
            return (f"pre-LN decoder with post-norms: Z = X + P1(MHA(N1(X))), out = Z + P2(FFN(N2(Z))), N, P = "
                    f"{norm} (gains 1 + w as stored), {ffn_kind} FFN; "
                    + ("RMSNorm on each head's queries and keys; " if self.qk_norm else "")
                    + (f"scores scaled by {self.attn_scalar:g}^-1/2; " if self.attn_scalar else "")
                    + (f"scores soft-capped, c tanh(s / c) with c = {self.attn_softcap:g}; " if self.attn_softcap
                       else "")
                    + f"causal attention{win}, {pos}; embeddings scaled by sqrt(d_model); MHA = sum_h Y^h W_O^h"
                    + ("; a final norm follows the last layer (in Trace.hidden_states, not in the rank profiles)"
                       if self.final_norm else ""))
        return (f"pre-LN decoder: Z = X + MHA(N1(X)) + b_O, out = Z + FFN(N2(Z)), N = {norm}, {ffn_kind} FFN; "
                f"causal attention{win}, {pos}; MHA = sum_h Y^h W_O^h without b_O"
                + ("; a final norm follows the last layer (in Trace.hidden_states, not in the rank profiles)"
                   if self.final_norm else ""))


def structure(weights: Any) -> Structure:
    """The :class:`Structure` of loaded (or streamed) weights.

    Examples
    --------
    >>> structure(load_model("default")).eps
    1e-12
    """
    a = getattr(weights, "arch", None)
    if a is None:
        return Structure()
    cfg = getattr(weights, "config", {}) or {}
    if a.norm_placement == "post":
        return Structure(eps=float(a.ln_eps), activation=a.activation, gated=a.ffn == "gated",
                         causal=a.attention == "causal")
    theta = None
    if a.positional == "rotary":
        if getattr(a, "rope_scaling", ()):
            raise SymtransError(f"{a.name}: rotary scaling {dict(a.rope_scaling)['rope_type']!r} is not implemented "
                                "by the numeric forward (default rotary frequencies only); formulas and the group "
                                "do not depend on it")
        from symtrans.arch import neox_rotary, rope_theta

        theta = rope_theta(cfg, a.name)  # validated as the config was read; never replaced by a default
        if a.family == "gpt_neox":  # GPTNeoXConfig reads rotary_emb_base, not a top-level rope_theta
            theta = neox_rotary(cfg, a.name)[0]
    window = cfg.get("sliding_window") if cfg.get("model_type") in ("mistral", "phi3") else None
    if cfg.get("model_type") == "qwen2" and cfg.get("use_sliding_window"):
        raise SymtransError("qwen2 use_sliding_window=true (per-layer sliding windows) is not modelled")
    per_layer: tuple[tuple[float | None, int | None], ...] = ()
    if a.layer_types:  # Gemma 3: each layer's own base and window, resolved by Structure.at(i)
        per_layer = tuple((a.rope_base_at(i), a.window_at(i)) for i in range(int(a.L)))
        theta, window = None, None
    if a.rope_layers:  # SmolLM3: no rotary angles on a NoPE layer (its base None), resolved by Structure.at(i)
        per_layer = tuple(((t if per_layer else theta) if a.rotary_at(i) else None,
                           w if per_layer else (int(window) if window else None))
                          for i, (t, w) in enumerate(per_layer or [(None, None)] * int(a.L)))
        theta, window = None, None
    return Structure(form="pre-ln", norm=a.norm, eps=float(a.ln_eps), activation=a.activation,
                     gated=a.ffn == "gated", causal=a.attention == "causal", rope_theta=theta,
                     sliding_window=int(window) if window else None, final_norm=bool(a.final_norm),
                     qk_norm=a.qk_norm, post_norms=a.post_norms, attn_scalar=a.attn_scalar, attn_softcap=a.attn_softcap,
                     pre_norms=a.pre_norms, qk_norm_full=a.qk_norm_full, per_layer=per_layer,
                     gain_offset=a.gain_offset, parallel_residual=a.parallel_residual,
                     rotary_dim=int(a.rotary_width) if a.partial_rotary_factor != 1 else None)


def norm(x: Any, weight: Any | None, bias: Any | None, st: Structure) -> Any:
    """The structure's norm (LayerNorm or RMSNorm) with its gain and shift.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    >>> norm(x, None, None, Structure(eps=0.0)).tolist()
    [[-1.0, 1.0]]
    """
    if st.norm == "rmsnorm":
        y = rms_norm(x, weight, st.eps, st.float32_internals, gain_in_float32=bool(st.gain_offset))
        return y + bias if bias is not None else y
    return layer_norm(x, weight, bias, st.eps)


def kv_index(n_heads: int, n_kv_heads: int, device: Any = None) -> Any:
    """Query head ``h`` reads key/value head ``h // (H / H_kv)`` (``transformers``' ``repeat_kv``).

    Examples
    --------
    >>> kv_index(8, 2).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    import torch

    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise SymtransError(f"{n_heads} query heads cannot share {n_kv_heads} key/value heads evenly")
    return torch.arange(n_heads, device=device) // (n_heads // n_kv_heads)


def rope_tables(n: int, d_head: int, theta: float, dtype: Any, device: Any = None,
                float32_internals: bool = False) -> tuple[Any, Any]:
    """``(cos, sin)``, each ``n x d_head``: rotary angles ``p * theta^(-2i/d)`` for positions ``0..n-1``.

    The halves convention of ``transformers`` (``rotate_half``): dimension
    ``i`` pairs with ``i + d/2``. With ``float32_internals`` the angles are
    computed in float32 as ``transformers`` does.

    Examples
    --------
    >>> import torch
    >>> cos, sin = rope_tables(3, 4, 10000.0, torch.float64)
    >>> tuple(cos.shape), float(cos[0].min()), round(float(sin[1, 0]), 6)
    ((3, 4), 1.0, 0.841471)
    """
    import torch

    if d_head % 2:
        raise SymtransError(f"rotary positions need an even head width, got {d_head}")
    work = torch.float32 if float32_internals else torch.float64
    inv = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=work, device=device) / d_head))
    ang = torch.arange(n, device=device).to(work)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate(x: Any, cos: Any, sin: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


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


def attention(X: Any, layer: dict[str, Any], st: Structure | None = None) -> tuple[Any, Any, Any]:
    """Return ``(A, Y, YO)`` of one layer for input ``X``, batched over heads.

    With a :class:`Structure` ``st``: the causal mask (and sliding window),
    rotary positions ``0..n-1`` and grouped-query key/value sharing apply;
    without it the layer is a bidirectional encoder's.

    ``X`` may also be a batch ``[B, n, d]`` of sequences, each attended to on
    its own (``A``, ``Y``, ``YO`` then lead with ``B``): the projections are
    one GEMM per head over the rows of every sequence (each weight matrix read
    once for the batch), whose rows are those of one sequence at a time
    wherever the BLAS computes a row of a product independently of the rows
    stacked with it (MKL does: bit-equal, tests/test_report_perf.py).

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=6, seed=0).embeddings
    >>> A, Y, YO = attention(X, w.layer(0))
    >>> tuple(A.shape), tuple(YO.shape)
    ((12, 6, 6), (12, 6, 384))
    >>> import torch
    >>> Ab, _, YOb = attention(torch.stack([X, 2 * X]), w.layer(0))
    >>> tuple(YOb.shape), bool(torch.allclose(YOb[0], YO, rtol=0, atol=1e-12))
    ((2, 12, 6, 384), True)
    """
    import torch

    if st is not None and st.per_layer:
        raise SymtransError("this model's layers differ (rotary base, window): resolve the structure of the layer "
                            "first (Structure.at(i))")
    if X.ndim not in (2, 3):
        raise SymtransError(f"attention reads X of shape [n, d] or [B, n, d], got {tuple(X.shape)}")
    batch = X.shape[0] if X.ndim == 3 else None
    rows = X.reshape(-1, X.shape[-1]) if batch is not None else X

    def heads(P: Any) -> Any:  # [H, B n, w] -> [B, H, n, w] (a batch); [H, n, w] as it is
        return P if batch is None else P.reshape(P.shape[0], batch, -1, P.shape[-1]).transpose(0, 1)

    # X @ W: one GEMM per head on the stored [H, d, d_k] blocks; einsum("nd,hdk->hnk") re-laid out W on every
    # call (2.5x slower at n = 128, 6x at n = 32, measured) for the same values (bit-equal: tests/test_report_perf.py)
    q = heads(rows @ layer["W_Q"] + layer["b_Q"][:, None, :])
    k = heads(rows @ layer["W_K"] + layer["b_K"][:, None, :])
    v = heads(rows @ layer["W_V"] + layer["b_V"][:, None, :])
    H, n = q.shape[-3], q.shape[-2]
    if st is not None and st.qk_norm_full:  # OLMo 2: over all heads' entries at once, before the rotation
        q, k = _full_norm(q, layer["q_norm_full_w"], st), _full_norm(k, layer["k_norm_full_w"], st)
    elif st is not None and st.qk_norm:  # before the rotation, per head, over the head's d_k entries
        q = norm(q, layer["q_norm_w"], None, st)
        k = norm(k, layer["k_norm_w"], None, st)
    if k.shape[-3] != H:  # grouped-query attention: each key/value head serves H / H_kv query heads
        idx = kv_index(H, k.shape[-3], q.device)
        k, v = k.index_select(-3, idx), v.index_select(-3, idx)
    if st is not None and st.rope_theta and st.rotary_dim is not None:  # GPT-NeoX: the first rotary_dim only
        r = st.rotary_dim
        cos, sin = rope_tables(n, r, st.rope_theta, q.dtype, q.device, st.float32_internals)
        q = torch.cat([_rotate(q[..., :r], cos, sin), q[..., r:]], -1)
        k = torch.cat([_rotate(k[..., :r], cos, sin), k[..., r:]], -1)
    elif st is not None and st.rope_theta:
        cos, sin = rope_tables(n, q.shape[-1], st.rope_theta, q.dtype, q.device, st.float32_internals)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
    if st is not None and st.attn_scalar:  # transformers' Gemma: scores * query_pre_attn_scalar^-1/2
        scores = (q @ k.transpose(-1, -2)) * st.attn_scalar ** -0.5
    else:
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if st is not None and st.attn_softcap:  # Gemma 2: c tanh(s / c), after the scaling, before the mask
        scores = st.attn_softcap * torch.tanh(scores / st.attn_softcap)
    if st is not None and st.causal:
        i = torch.arange(n, device=q.device)
        masked = i[None, :] > i[:, None]
        if st.sliding_window:
            masked = masked | (i[None, :] <= i[:, None] - st.sliding_window)
        scores = scores.masked_fill(masked, float("-inf"))
    if st is not None and st.float32_internals:
        A = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    else:
        A = torch.softmax(scores, dim=-1)
    Y = A @ v
    if batch is None:
        YO = Y @ layer["W_O"]
    else:  # one GEMM per head over every sequence's rows, as the projections
        YO = heads(Y.transpose(0, 1).reshape(H, -1, Y.shape[-1]) @ layer["W_O"])
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


def ffn(Z: Any, layer: dict[str, Any], activation: str) -> Any:
    """The feed-forward block: two-matrix, or gated when the layer has ``W_gate``.

    Examples
    --------
    >>> w = load_model("default")
    >>> tuple(ffn(encode(w, n=3).embeddings, w.layer(0), "gelu").shape)
    (3, 384)
    """
    h = Z @ layer["W_in"] + layer["b_in"]
    if "W_gate" in layer:
        h = _gelu(Z @ layer["W_gate"] + layer["b_gate"], activation) * h
    else:
        h = _gelu(h, activation)
    return h @ layer["W_out"] + layer["b_out"]


def _full_norm(z: Any, gain: Any, st: Structure) -> Any:
    """RMSNorm of each token's entries over every head (``z``: ``[..., heads, n, d_k]``; ``gain``: ``[g, d_k]``).

    Key/value heads repeated for their query heads (``weights.layer``) have
    the stored heads' mean square (each is repeated equally), and the gain is
    repeated the same way.
    """
    heads, n, dk = z.shape[-3:]
    flat = z.movedim(-3, -2).reshape(*z.shape[:-3], n, heads * dk)  # [..., n, heads d_k]
    if gain.shape[0] != heads:
        gain = gain[kv_index(heads, gain.shape[0], gain.device)]
    return norm(flat, gain.reshape(-1), None, st).reshape(*z.shape[:-3], n, heads, dk).movedim(-2, -3)


def decoder_layer(X: Any, layer: dict[str, Any], st: Structure) -> LayerTrace:
    """Run one pre-LN decoder layer (causal attention) and return all its internals.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.fixtures import tiny_decoder
    >>> w = tiny_decoder("llama")
    >>> t = encode(w, n=5, seed=0).layers[0]
    >>> t.form, bool((t.A[:, 0, 1:] == 0).all()), bool((t.out == t.pre_ln2).all())
    ('pre-ln', True, True)
    """
    attn_in = norm(X, layer["ln1_w"], layer["ln1_b"], st) if st.pre_norms else X
    A, Y, YO = attention(attn_in, layer, st)
    mha = YO.sum(0)
    if st.post_norms:  # Gemma 3: the sub-block's output is normalised before the residual add (no biases)
        pre_ln1 = X + norm(mha + layer["b_O"], layer["ln1_post_w"], None, st)
    else:
        pre_ln1 = X + mha + layer["b_O"]
    read = X if st.parallel_residual else pre_ln1  # GPT-NeoX: both sub-blocks read the layer's input
    X1 = norm(read, layer["ln2_w"], layer["ln2_b"], st) if st.pre_norms else read
    f = ffn(X1, layer, st.activation)
    out = pre_ln1 + (norm(f, layer["ln2_post_w"], None, st) if st.post_norms else f)
    return LayerTrace(X=X, A=A, Y=Y, YO=YO, mha=mha, pre_ln1=pre_ln1, X1=X1, ffn=f, pre_ln2=out, out=out,
                      form="pre-ln", attn_in=attn_in, parallel=st.parallel_residual)


def layer_forward(X: Any, layer: dict[str, Any], st: Structure) -> LayerTrace:
    """One layer of either form, as the structure says.

    Examples
    --------
    >>> w = load_model("default")
    >>> X = encode(w, n=4).embeddings
    >>> bool((layer_forward(X, w.layer(0), structure(w)).out == encode(w, n=4).layers[0].out).all())
    True
    """
    if st.form == "pre-ln":
        return decoder_layer(X, layer, st)
    return encoder_layer(X, layer, st.eps, st.activation)


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

    def guarded(what: str, op: Any) -> Any:
        import os
        import sys

        sys.stderr.flush()
        saved = os.dup(2)  # a Rust panic prints its backtrace on fd 2 before Python sees the exception
        try:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
            return op()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # tokenizers' own types, and its Rust panics (a BaseException: a bad regex)
            first = (str(err).splitlines() or [type(err).__name__])[0][:120]
            raise SymtransError(f"{path}: {what} ({terminal_safe(first)})") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    from symtrans.validate import terminal_safe

    tok = guarded("not a readable tokenizer.json", lambda: Tokenizer.from_str(raw.decode("utf-8")))
    tok.no_padding()  # the bundled tokenizer.json pads to a fixed length; we want the real tokens
    tok.no_truncation()
    ids = guarded("the tokenizer failed on this text", lambda: tok.encode(text).ids)
    if not text.strip() or len(ids) <= 2:  # only [CLS] and [SEP]
        raise SymtransError(f"text {text!r} tokenizes to no content tokens")
    return list(ids)


def embedding_scale(arch: Any, float32_internals: bool = False) -> float:
    """Gemma's factor on the word rows, ``sqrt(d_model)`` (rounded to float32 as transformers stores it, on request).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> embedding_scale(SimpleNamespace(d_model=640)) == 640 ** 0.5
    True
    """
    value = math.sqrt(int(arch.d_model))
    if float32_internals:
        import struct

        value = struct.unpack("f", struct.pack("f", value))[0]
    return value


def embed(weights: ModelWeights, input_ids: Any, float32_internals: bool = False) -> Any:
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
    x = table_rows(weights, "word", ids)  # the rows only: no float64 copy of the whole table
    if getattr(arch, "embedding_scale", False):  # Gemma: word rows times sqrt(d_model)
        x = x * embedding_scale(arch, float32_internals)
    if weights.pos is not None:
        x = x + weights.pos[position_ids(weights, ids)]
    if weights.type is not None:
        x = x + weights.type[0]
    if weights.emb_ln_w is None:  # decoders: no embedding norm
        return x
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

    A model without a position table (rotary positions) draws ``n`` distinct
    ids when its vocabulary allows: there a repeated token gives two equal
    rows of ``X``, a non-generic input for every rank statement.

    Examples
    --------
    >>> random_ids(load_model("default"), 5, 0).tolist() == random_ids(load_model("default"), 5, 0).tolist()
    True
    """
    import torch

    from symtrans.checker.statements import input_ids  # the rule is the certificate statements' (one home)

    return torch.tensor(input_ids(int(weights.arch.vocab_size), weights.pos is not None, n, seed), dtype=torch.int64)


def embed_input(weights: ModelWeights, *, text: str | None = None, input_ids: Any = None, X: Any = None,
                n: int | None = None, seed: int = 0, float32_internals: bool = False) -> tuple[Any, Any]:
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
        return embed(weights, input_ids, float32_internals), torch.as_tensor(input_ids)
    X = torch.as_tensor(X, dtype=weights.dtype, device=weights.device)
    if X.ndim != 2 or X.shape[1] != weights.d_model:
        raise SymtransError(f"X must be n x {weights.d_model}, got {tuple(X.shape)}")
    if X.shape[0] < 2:
        raise SymtransError("X needs at least 2 rows")
    if not bool(torch.isfinite(X).all()):
        raise SymtransError("X contains NaN or Inf")
    return X, None


def encode(weights: ModelWeights, *, text: str | None = None, input_ids: Any = None, X: Any = None,
           n: int | None = None, seed: int = 0, layers: int | None = None,
           float32_internals: bool = False) -> Trace:
    """Run the model (encoder or decoder) on text, token ids, a given ``X``, or ``n`` random tokens.

    ``float32_internals`` (RMSNorm or rotary families: Llama's, GPT-NeoX)
    reproduces the float32 steps ``transformers`` takes inside a float64 model
    (RMSNorm, rotary angles, softmax): the parity tests use it to compare
    against an exact reference.

    Examples
    --------
    >>> w = load_model("default")
    >>> tr = encode(w, input_ids=[101, 7592, 2088, 102])
    >>> tuple(tr.layers[-1].out.shape)
    (4, 384)
    """
    import torch

    import dataclasses

    X, ids = embed_input(weights, text=text, input_ids=input_ids, X=X, n=n, seed=seed,
                         float32_internals=float32_internals)
    st = structure(weights)
    if float32_internals and (st.norm == "rmsnorm" or st.rope_theta or st.per_layer):  # GPT-2: float64 throughout
        st = dataclasses.replace(st, float32_internals=True)
    count = weights.n_layers if layers is None else layers
    traces = []
    h = X
    with torch.no_grad():
        for i in range(count):
            t = layer_forward(h, weights.layer(i, shared_kv=True), st.at(i))
            traces.append(t)
            h = t.out
        final = None
        if st.final_norm and count == weights.n_layers and count > 0:
            final = norm(h, weights.final_ln_w, weights.final_ln_b, st)
    return Trace(embeddings=X, layers=traces, input_ids=ids, final=final)
