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

__all__ = ["random_model", "random_checkpoint", "tiny_decoder", "FAMILIES", "DECODER_FAMILIES"]

FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2")
DECODER_FAMILIES = ("gpt2", "llama", "mistral", "qwen2")


def _decoder(family: str, *, n_layers: int, d_model: int, n_heads: int, d_ff: int, vocab: int,
             positions: int, head: bool, **extra: Any) -> Any:
    """A random decoder: GPT-2, or Llama/Mistral/Qwen2 with grouped-query attention (2 key/value heads)."""
    import transformers as T

    if family == "gpt2":
        cfg = T.GPT2Config(vocab_size=vocab, n_embd=d_model, n_layer=n_layers, n_head=n_heads, n_inner=d_ff,
                           n_positions=positions, attn_implementation="eager", **extra)
        model = (T.GPT2LMHeadModel if head else T.GPT2Model)(cfg).eval()
    else:
        classes = {"llama": (T.LlamaConfig, T.LlamaModel, T.LlamaForCausalLM),
                   "mistral": (T.MistralConfig, T.MistralModel, T.MistralForCausalLM),
                   "qwen2": (T.Qwen2Config, T.Qwen2Model, T.Qwen2ForCausalLM)}
        config_cls, base, lm = classes[family]
        extra.setdefault("num_key_value_heads", max(1, n_heads // 2))
        if family == "mistral":
            extra.setdefault("sliding_window", positions)
        cfg = config_cls(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=n_layers,
                         num_attention_heads=n_heads, intermediate_size=d_ff, max_position_embeddings=positions,
                         attn_implementation="eager", **extra)
        model = (lm if head else base)(cfg).eval()
    import torch

    with torch.no_grad():  # random norm gains and biases, so that a transposed or dropped one shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("ln_1.weight") or name.endswith("ln_2.weight") \
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
