"""Shared fixtures for the numeric-check tests: the real model once, and broken copies of it."""

from __future__ import annotations

from typing import Any

from symtrans.context import Context


def context(w: Any, n: int = 16) -> Context:
    """A context whose cache already holds the weights ``w`` (real or broken)."""
    return Context(model="default", n=n, seed=0).preload(w)


def broken(w: Any, **changes: Any) -> Any:
    """A copy of ``w`` with some tensors replaced (a deliberately broken model)."""
    from symtrans.numeric.weights import ModelWeights

    storage = changes.pop("storage_dtype", getattr(w, "storage_dtype", None))  # kept unless told otherwise
    tensors = dict(w.tensors)
    tensors.update(changes)
    return ModelWeights(w.arch, tensors, w.source, w.weights_hash + "-broken", w.dtype, w.device,
                        w.family, w.config, storage)
