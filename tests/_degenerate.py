"""Degeneracies that pruned or dead checkpoints carry, planted on small random checkpoints (shared by the tests).

Layer 1's head 2 (and its key/value head under grouped-query attention, where it is one of its own), layer 0's
FFN unit 3, layer 1's units 5 and 6: see :func:`plant_into` for each kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

KINDS = ("zero-wo", "zero-v", "zero-head", "half-v", "half-both", "zero-q", "half-qk", "dead-unit", "dup-head",
         "dup-unit")


def plant_into(w: Any, kind: str) -> None:
    """Plant ``kind`` into a loaded model's tensors, in place.

    zero-wo: W_O^h = 0; zero-v: W_V^h, b_V^h = 0; zero-head: the head's every weight 0; half-v / half-both: half
    the value channel pruned on W_V's side / on both sides; zero-q: W_Q^h, b_Q^h = 0; half-qk: half the query/key
    channel pruned on both sides; dead-unit: an FFN unit 0 in every tensor; dup-head / dup-unit: two equal heads
    (layer 0, heads 0 and 1) / units. Under grouped-query attention the shared key/value head is left alone.
    """
    t, H, Hkv = w.tensors, w.arch.H, w.arch.H_kv
    own_kv = Hkv == H
    kv = 2 * Hkv // H  # the key/value head head 2 reads
    with torch.no_grad():
        if kind == "zero-wo":
            t["W_O"][1, 2] = 0
        elif kind == "zero-v":
            if own_kv:
                t["W_V"][1, 2], t["b_V"][1, 2] = 0, 0
        elif kind == "zero-head":
            for k in ("W_Q", "b_Q", "W_O") + (("W_K", "b_K", "W_V", "b_V") if own_kv else ()):
                t[k][1, 2] = 0
        elif kind in ("half-v", "half-both"):
            if own_kv:
                t["W_V"][1, 2][:, 4:], t["b_V"][1, 2][4:] = 0, 0
            if kind == "half-both":
                t["W_O"][1, 2][4:] = 0
        elif kind == "zero-q":
            t["W_Q"][1, 2], t["b_Q"][1, 2] = 0, 0
        elif kind == "half-qk":
            t["W_Q"][1, 2][:, 4:], t["b_Q"][1, 2][4:] = 0, 0
            t["W_K"][1, kv][:, 4:], t["b_K"][1, kv][4:] = 0, 0
        elif kind == "dead-unit":
            for k in ("W_in", "W_gate"):
                if t.get(k) is not None:
                    t[k][0, :, 3] = 0
            for k in ("b_in", "b_gate"):
                if t.get(k) is not None:
                    t[k][0, 3] = 0
            t["W_out"][0, 3] = 0
        elif kind == "dup-head":
            for k in ("W_Q", "b_Q", "W_O") + (("W_K", "b_K", "W_V", "b_V") if own_kv else ()):
                t[k][0, 1] = t[k][0, 0]
        elif kind == "dup-unit":
            for k in ("W_in", "W_gate"):
                if t.get(k) is not None:
                    t[k][1, :, 6] = t[k][1, :, 5]
            for k in ("b_in", "b_gate"):
                if t.get(k) is not None:
                    t[k][1, 6] = t[k][1, 5]
            t["W_out"][1, 6] = t["W_out"][1, 5]
        else:
            raise ValueError(f"unknown kind {kind!r}")


def planted(source: Any, kinds: tuple[str, ...], directory: Path, store: str | None = None) -> Any:
    """The checkpoint at ``source`` (a directory) with ``kinds`` planted, written to ``directory`` and loaded."""
    from symtrans.numeric.save import save_weights
    from symtrans.numeric.weights import load_model

    w = load_model(source, dtype="float32")
    for kind in kinds:
        plant_into(w, kind)
    return load_model(save_weights(w, directory, dtype=store))


def planted_checkpoint(family: str, kinds: tuple[str, ...], tmp: Path) -> Any:
    """A random ``family`` checkpoint (:func:`~symtrans.numeric.fixtures.random_checkpoint`) with ``kinds`` planted."""
    from symtrans.numeric.fixtures import random_checkpoint

    src, _ = random_checkpoint(tmp / "src", family)
    return planted(src, kinds, tmp / "-".join(kinds))
