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

__all__ = ["random_model", "random_checkpoint", "FAMILIES"]

FAMILIES = ("bert", "roberta", "distilbert")


def random_model(family: str = "bert", *, n_layers: int = 2, d_model: int = 32, n_heads: int = 4,
                 d_ff: int = 64, vocab: int = 120, positions: int = 40, seed: int = 0, **extra: Any) -> Any:
    """A randomly initialised ``transformers`` encoder of ``family`` (eager attention, eval mode).

    Examples
    --------
    >>> type(random_model("roberta")).__name__
    'RobertaModel'
    """
    import torch
    import transformers as T

    torch.manual_seed(seed)
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
