"""Small random real checkpoints saved by ``transformers``, for tests and examples.

These are genuine ``transformers`` models (random weights, no download)
written with ``save_pretrained``, so loading them exercises the same code
paths as a real checkpoint of that family.

Examples
--------
>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     path, model = random_checkpoint(d, "distilbert", n_layers=3)
...     sorted(p.name for p in path.iterdir())
['config.json', 'model.safetensors']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["random_model", "random_checkpoint", "tiny_decoder", "FAMILIES", "DECODER_FAMILIES", "float64_reference"]

FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2", "gemma3", "qwen3",
            "gemma2", "phi3", "olmo2", "gpt_neox", "smollm3")
DECODER_FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "olmo2", "gpt_neox",
                    "smollm3")


def _decoder(family: str, *, n_layers: int, d_model: int, n_heads: int, d_ff: int, vocab: int,
             positions: int, head: bool, **extra: Any) -> Any:
    """A random decoder: GPT-2, or Llama/Mistral/Qwen2 with grouped-query attention (2 key/value heads)."""
    import transformers as T

    if family == "gpt2":
        cfg = T.GPT2Config(vocab_size=vocab, n_embd=d_model, n_layer=n_layers, n_head=n_heads, n_inner=d_ff,
                           n_positions=positions, attn_implementation="eager", **extra)
        model = (T.GPT2LMHeadModel if head else T.GPT2Model)(cfg).eval()
    elif family == "gpt_neox":  # half of each head rotated (a pass-through part that shows), parallel residual
        extra.setdefault("rotary_pct", 0.5)
        extra.setdefault("rotary_emb_base", 500)
        cfg = T.GPTNeoXConfig(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=n_layers,
                              num_attention_heads=n_heads, intermediate_size=d_ff, max_position_embeddings=positions,
                              attn_implementation="eager", **extra)
        model = (T.GPTNeoXForCausalLM if head else T.GPTNeoXModel)(cfg).eval()
    else:
        classes = {"llama": (T.LlamaConfig, T.LlamaModel, T.LlamaForCausalLM),
                   "mistral": (T.MistralConfig, T.MistralModel, T.MistralForCausalLM),
                   "qwen2": (T.Qwen2Config, T.Qwen2Model, T.Qwen2ForCausalLM),
                   "gemma3": (T.Gemma3TextConfig, T.Gemma3TextModel, T.Gemma3ForCausalLM),
                   "qwen3": (T.Qwen3Config, T.Qwen3Model, T.Qwen3ForCausalLM),
                   "gemma2": (T.Gemma2Config, T.Gemma2Model, T.Gemma2ForCausalLM),
                   "phi3": (T.Phi3Config, T.Phi3Model, T.Phi3ForCausalLM),
                   "olmo2": (T.Olmo2Config, T.Olmo2Model, T.Olmo2ForCausalLM),
                   "smollm3": (T.SmolLM3Config, T.SmolLM3Model, T.SmolLM3ForCausalLM)}
        config_cls, base, lm = classes[family]
        extra.setdefault("num_key_value_heads", max(1, n_heads // 2))
        if family == "mistral":
            extra.setdefault("sliding_window", positions)
        if family == "qwen3":  # head_dim is its own field (default 128): the tiny width
            extra.setdefault("head_dim", d_model // n_heads)
        if family == "smollm3":  # a NoPE layer first (the default puts one every 4th layer), ids inside the vocabulary
            extra.setdefault("no_rope_layers", [int(i % 2 == 1) for i in range(n_layers)])
            extra.setdefault("pad_token_id", 0)
            extra.setdefault("bos_token_id", 1)
            extra.setdefault("eos_token_id", 2)
        if family == "olmo2":  # the default pad and eos ids lie outside a tiny vocabulary
            extra.setdefault("pad_token_id", 0)
            extra.setdefault("eos_token_id", 1)
        if family == "phi3":  # the published pad id (32000) is outside a tiny vocabulary; a window that masks
            extra.setdefault("pad_token_id", 0)
            extra.setdefault("sliding_window", 5)
        if family == "gemma2":  # caps small enough that tanh bends at the tests' scores
            extra.setdefault("attn_logit_softcapping", 1.5)
            extra.setdefault("final_logit_softcapping", 2.0)
        if family in ("gemma3", "gemma2"):  # local/global layers, a window shorter than the tests' n, a scalar != d_k
            extra.setdefault("head_dim", d_model // n_heads)
            extra.setdefault("sliding_window", 5)
            extra.setdefault("query_pre_attn_scalar", 12)
            extra.setdefault("layer_types", ["sliding_attention" if i % 2 == 0 else "full_attention"
                                             for i in range(n_layers)])
        cfg = config_cls(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=n_layers,
                         num_attention_heads=n_heads, intermediate_size=d_ff, max_position_embeddings=positions,
                         attn_implementation="eager", **extra)
        model = (lm if head else base)(cfg).eval()
    import torch

    with torch.no_grad():  # random norm gains and biases, so that a transposed or dropped one shows
        for name, p in model.named_parameters():
            if family in ("gemma3", "gemma2") and name.endswith("norm.weight"):  # stored w, applied as 1 + w
                p.copy_(0.2 * torch.randn_like(p))
            elif name.endswith("norm.weight") or name.endswith("ln_1.weight") or name.endswith("ln_2.weight") \
                    or name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return model


def tiny_decoder(family: str = "llama", *, dtype: str = "float64") -> Any:
    """Loaded weights of a small random decoder of ``family``, saved once per process to a temp directory.

    Examples
    --------
    >>> w = tiny_decoder("llama")
    >>> w.arch.family, w.n_heads, tuple(w.W_K.shape)  # 4 query heads share 2 key/value heads
    ('llama', 4, (2, 2, 32, 8))
    """
    import tempfile

    from symtrans.numeric.weights import load_model

    if family not in _TINY:
        path = Path(tempfile.mkdtemp(prefix=f"symtrans-tiny-{family}-"))
        random_checkpoint(path, family)
        _TINY[family] = path
    return load_model(_TINY[family], dtype=dtype)


_TINY: dict[str, Path] = {}


def random_model(family: str = "bert", *, n_layers: int = 2, d_model: int = 32, n_heads: int = 4,
                 d_ff: int = 64, vocab: int = 120, positions: int = 40, seed: int = 0, head: bool = False,
                 **extra: Any) -> Any:
    """A randomly initialised ``transformers`` model of ``family`` (eager attention, eval mode).

    Decoders (:data:`DECODER_FAMILIES`) get random norm gains and biases
    (``transformers`` initialises them to 1 and 0, which would hide a
    misplaced one) and, for the Llama family, 2 key/value heads;
    ``head=True`` returns the causal-LM model (with its ``lm_head``).

    Examples
    --------
    >>> type(random_model("roberta")).__name__
    'RobertaModel'
    """
    import torch
    import transformers as T

    torch.manual_seed(seed)
    if family in DECODER_FAMILIES:
        return _decoder(family, n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff, vocab=vocab,
                        positions=positions, head=head, **extra)
    if family == "distilbert":
        cfg = T.DistilBertConfig(vocab_size=vocab, dim=d_model, n_layers=n_layers, n_heads=n_heads,
                                 hidden_dim=d_ff, max_position_embeddings=positions,
                                 attn_implementation="eager", **extra)
        return T.DistilBertModel(cfg).eval()
    kind = {"bert": (T.BertConfig, T.BertModel), "roberta": (T.RobertaConfig, T.RobertaModel)}
    if family not in kind:
        raise ValueError(f"family must be one of {FAMILIES}")
    config_cls, model_cls = kind[family]
    if family == "roberta":
        positions += 2  # RoBERTa's table has padding_idx + 1 extra rows
    cfg = config_cls(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=n_layers,
                     num_attention_heads=n_heads, intermediate_size=d_ff, max_position_embeddings=positions,
                     attn_implementation="eager", **extra)
    return model_cls(cfg).eval()


def random_checkpoint(directory: str | Path, family: str = "bert", *, max_shard_size: str | None = None,
                      **kwargs: Any) -> tuple[Path, Any]:
    """Save :func:`random_model` into ``directory`` (optionally sharded); return ``(path, model)``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path, _ = random_checkpoint(d, "bert", max_shard_size="20KB")
    ...     (path / "model.safetensors.index.json").exists()
    True
    """
    from transformers.utils import logging

    logging.disable_progress_bar()  # no "Writing model shards" bar in test output
    model = random_model(family, **kwargs)
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    options = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(str(path), **options)
    return path, model


class float64_reference:  # noqa: N801 - used as a context manager, like torch.no_grad
    """Run ``transformers``' own model of ``family`` in the model's dtype throughout: its float32 upcasts turned off.

    ``transformers`` computes RMSNorm (``x.float()``; Gemma's gain
    ``1 + w.float()``), the rotary angles (float32 ``inv_freq``) and the
    softmax in float32 even inside a float64 model, and Gemma 3 rounds the
    embedding scale ``sqrt(d_model)`` to float32. Inside this context those
    steps run in the input's dtype with the same formulas (nothing else
    changes), so a float64 model is a float64 reference for
    :func:`symtrans.numeric.forward.encode`. ``family``: ``gemma3`` (the
    default), ``gemma2``, ``qwen3``, ``phi3``, ``olmo2``, ``gpt_neox`` or ``smollm3``.

    Examples
    --------
    >>> import torch
    >>> m = random_model("gemma3", n_layers=1).double()
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> with float64_reference():
    ...     h = m(ids).last_hidden_state
    >>> h.dtype
    torch.float64
    """

    def __init__(self, family: str = "gemma3") -> None:
        if family not in _FLOAT64_MODULES:
            raise ValueError(f"float64_reference: family must be one of {sorted(_FLOAT64_MODULES)}, got {family!r}")
        self.family = family

    def __enter__(self) -> "float64_reference":
        import importlib

        import torch

        module, prefix = _FLOAT64_MODULES[self.family]
        G = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
        offset = 1.0 if self.family in ("gemma3", "gemma2") else 0.0

        def norm_forward(self: Any, x: Any) -> Any:
            w = self.weight.to(x.dtype)
            eps = getattr(self, "eps", None)
            eps = self.variance_epsilon if eps is None else eps
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)

        def rope_forward(self: Any, x: Any, position_ids: Any, layer_type: Any = None) -> Any:
            cfg = self.config
            dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
            params = cfg.rope_parameters[layer_type] if layer_type is not None else cfg.rope_parameters
            dim = int(dim * (params.get("partial_rotary_factor") or getattr(cfg, "partial_rotary_factor", None)
                             or 1.0))
            inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=x.dtype, device=x.device) / dim))
            freqs = position_ids[..., None].to(x.dtype) * inv
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos(), emb.sin()

        original = G.eager_attention_forward

        def eager(*args: Any, **kwargs: Any) -> Any:
            saved = torch.nn.functional.softmax
            torch.nn.functional.softmax = lambda t, dim=-1, dtype=None: saved(t, dim=dim)  # the input's dtype
            try:
                return original(*args, **kwargs)
            finally:
                torch.nn.functional.softmax = saved

        rope_cls = getattr(G, f"{prefix}RotaryEmbedding")
        self._saved = [(rope_cls, "forward", rope_cls.forward), (G, "eager_attention_forward", original)]
        norm_cls = getattr(G, f"{prefix}RMSNorm", None)  # GPT-NeoX: nn.LayerNorm, which keeps the input's dtype
        if norm_cls is not None:
            self._saved.append((norm_cls, "forward", norm_cls.forward))
            norm_cls.forward = norm_forward
        rope_cls.forward = rope_forward
        G.eager_attention_forward = eager
        if self.family in ("gemma3", "gemma2"):
            def embed_forward(self: Any, input_ids: Any) -> Any:
                return torch.nn.functional.embedding(input_ids, self.weight, self.padding_idx) * self.scalar_embed_scale

            emb_cls = getattr(G, f"{prefix}TextScaledWordEmbedding")
            self._saved.append((emb_cls, "forward", emb_cls.forward))
            emb_cls.forward = embed_forward
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)


#: per family: (transformers module, class-name prefix) whose float32 steps float64_reference turns off
_FLOAT64_MODULES = {"gemma3": ("gemma3", "Gemma3"), "qwen3": ("qwen3", "Qwen3"), "gemma2": ("gemma2", "Gemma2"),
                    "phi3": ("phi3", "Phi3"), "olmo2": ("olmo2", "Olmo2"), "gpt_neox": ("gpt_neox", "GPTNeoX"),
                    "smollm3": ("smollm3", "SmolLM3")}
