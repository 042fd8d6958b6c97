"""Write per-head weights back into a Hugging Face checkpoint directory (the loader's layout, inverted).

:func:`save_weights` is the inverse of :func:`symtrans.numeric.weights.load_model` for the
families the loader reads (BERT, RoBERTa, DistilBERT, GPT-2, and the Llama-like Llama, Mistral, Qwen2,
Qwen3, Gemma 2 and 3, Phi-3, OLMo 2 and SmolLM3; GPT-NeoX is refused): it copies the
source checkpoint's ``config.json`` and every tensor it holds (so tensors the per-head layout does
not carry, such as a classifier, are kept as they are), and overwrites the tensors the per-head layout
names (an untied output head and an encoder's pooler among them) with the given weights, each in its
stored dtype unless ``dtype`` says otherwise. ``symtrans relate`` and ``symtrans canonical`` use it to write
``g . A`` and gauge-fixed checkpoints; loading the written directory gives the weights back (a round trip the tests check).

Examples
--------
>>> import tempfile
>>> from symtrans.numeric.weights import load_model
>>> w = load_model("default")
>>> with tempfile.TemporaryDirectory() as d:
...     _ = save_weights(w, d)
...     back = load_model(d)
...     bool(all((back.tensors[k] == w.tensors[k]).all() for k in w.tensors if w.tensors[k] is not None))
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError

__all__ = ["save_weights", "check_checkpoint_out", "WRITTEN_BY"]

#: the metadata entry :func:`save_weights` puts in the ``model.safetensors`` it writes: a directory holding that
#: file (and nothing but what save_weights writes) is one symtrans wrote, which it may write again
WRITTEN_BY = ("written_by", "symtrans")

#: the tokenizer files copied from the source checkpoint
_EXTRAS = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")

#: every name :func:`save_weights` writes into its directory
_WRITES = ("model.safetensors", "config.json", *_EXTRAS)


def _ours(name: str) -> bool:
    """A name save_weights writes, or the temporary file of one (left by a killed write)."""
    return name in _WRITES or any(name.startswith(f".{w}.tmp-") for w in _WRITES)


def check_checkpoint_out(directory: Any, source: Any = None, option: str = "--out") -> Path:
    """Refuse, before any work, a directory :func:`save_weights` must not write into; return its absolute path.

    Written: a new directory, an empty one, or one symtrans wrote (its ``model.safetensors`` carries
    :data:`WRITTEN_BY`, and it holds nothing else but what save_weights writes). Refused in one line: the
    ``source`` checkpoint's own directory (its weights would be replaced by the new ones), a symbolic link
    (symtrans never writes through one), a file in the way, a directory holding anything else (another
    checkpoint's weights or shard index, which would be overwritten or read beside the new weights, or any other
    file), and a place where nothing can be written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> check_checkpoint_out(d / "new") == d / "new"
    True
    >>> _ = (d / "notes.txt").write_text("mine")
    >>> check_checkpoint_out(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --out ...: holds files symtrans did not write (notes.txt); give a new or empty directory
    """
    import os

    from symtrans.outdir import check_output_file, output_path
    from symtrans.validate import terminal_safe

    if isinstance(directory, str) and directory and not directory.strip():
        raise SymtransError(f"{option} {directory!r}: expected a directory path")
    target = output_path(directory, option, "a checkpoint")
    shown = f"{option} {terminal_safe(str(target))}"
    if target.is_symlink():
        raise SymtransError(f"{shown}: a symbolic link; symtrans never writes through one")
    if target.exists() and not target.is_dir():
        raise SymtransError(f"{shown}: a file is in the way of the checkpoint directory")
    if target.is_dir():
        if source is not None and Path(source).is_dir() and os.path.samefile(target, source):
            raise SymtransError(f"{shown}: the model's own checkpoint directory; writing there would replace its "
                                "weights, so give another directory")
        names = sorted(p.name for p in target.iterdir())
        foreign = [n for n in names if not _ours(n)]
        if foreign:
            listed = ", ".join(terminal_safe(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise SymtransError(f"{shown}: holds files symtrans did not write ({listed}); give a new or empty "
                                "directory")
        if [n for n in names if n in _WRITES] and _mark(target / "model.safetensors") != WRITTEN_BY[1]:
            raise SymtransError(f"{shown}: holds a checkpoint symtrans did not write; give a new or empty directory")
    check_output_file(str(target / "model.safetensors"), option, "checkpoint")  # a real write, where it can go
    return target


def _mark(path: Path) -> str | None:
    """Who wrote the safetensors file at ``path`` (its :data:`WRITTEN_BY` entry), None where it says nothing, is
    missing or is not a safetensors file."""
    from safetensors import safe_open

    if not path.is_file() or path.is_symlink():
        return None
    try:
        with safe_open(str(path), "pt") as f:
            return (f.metadata() or {}).get(WRITTEN_BY[0])
    except Exception:  # noqa: BLE001 - not a readable safetensors file: not one symtrans wrote
        return None


def _source_tensors(directory: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    from symtrans.numeric.weights import _weight_files

    files, kind = _weight_files(directory, False)
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def _layer_keys(family: str, prefix: str, i: int) -> dict[str, str]:
    from symtrans.numeric.weights import _LAYOUTS

    lay = _LAYOUTS[family]
    lp = prefix + lay["layer"].format(i=i)
    return {"q": lp + (lay.get("q") or ""), "k": lp + (lay.get("k") or ""), "v": lp + (lay.get("v") or ""),
            "o": lp + (lay.get("o") or ""), "ln1": lp + (lay.get("ln1") or ""), "fin": lp + (lay.get("fin") or ""),
            "fout": lp + (lay.get("fout") or ""), "ln2": lp + (lay.get("ln2") or ""), "lp": lp}


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Overwrite ``key`` with ``value`` in the key's stored dtype and shape; a key the source lacks is skipped
    where ``value`` is all zeros (an absent bias, stored as zeros by the loader), and refused otherwise: the
    weights would be lost without a word.

    Examples
    --------
    >>> import torch
    >>> out = {"a.weight": torch.zeros(2)}
    >>> _put(out, "a.bias", torch.zeros(2)); sorted(out)
    ['a.weight']
    >>> _put(out, "a.bias", torch.ones(2))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: a.bias: the weights hold non-zero values for a tensor the source checkpoint does not have; writing them there is not supported
    """
    if key not in out:
        if value is not None and bool((value != 0).any()):
            raise SymtransError(f"{key}: the weights hold non-zero values for a tensor the source checkpoint does "
                                "not have; writing them there is not supported")
        return
    old = out[key]
    out[key] = value.detach().reshape(old.shape).to(dtype=old.dtype, device="cpu").contiguous()


def save_weights(weights: Any, directory: str | Path, *, dtype: str | None = None) -> Path:
    """Write ``weights`` as a checkpoint directory beside its source's ``config.json``; return the directory.

    The source checkpoint (``weights.source``) must be a local directory: its
    tensors not in the per-head layout are copied unchanged. ``dtype``
    (``float32``, ``float64``) stores every tensor in that dtype instead of
    the source's.

    Examples
    --------
    >>> from symtrans.numeric.weights import load_model
    >>> save_weights(load_model("default"), "/proc/no-such-place")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: checkpoint /proc/no-such-place/model.safetensors: cannot write there (No such file or directory)
    """
    import torch
    from safetensors.torch import save_file

    from symtrans.outdir import write_file

    src = Path(weights.source)
    if not (src / "config.json").is_file():
        raise SymtransError(f"{weights.source}: weights must come from a local checkpoint directory to be written")
    target = check_checkpoint_out(directory, src, "checkpoint")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SymtransError(f"{directory}: cannot create the checkpoint directory ({err.strerror})") from None
    out = _source_tensors(src)
    if dtype is not None:
        from symtrans.numeric.weights import resolve_dtype

        dt = resolve_dtype(dtype)
        out = {k: (v.to(dt) if v.is_floating_point() else v) for k, v in out.items()}
    family = weights.family
    from symtrans.numeric.weights import _LAYOUTS, GAIN_OFFSET_TENSORS, HEAD_KEY, LLAMA_LIKE

    lay = _LAYOUTS.get(family)
    if lay is None:
        raise SymtransError(f"{family}: writing this family is not supported")
    prefix = next((p for p in lay["prefixes"] if p + lay["word"] in out), None)
    if prefix is None:
        raise SymtransError(f"{src}: missing the word table {lay['word']!r}")
    t = weights.tensors
    L, H, D = weights.n_layers, weights.n_heads, weights.d_model
    for i in range(L):
        q = {name: t[name][i] for name in t if t[name] is not None and name in _LAYER_NAMES}
        if family == "gpt2":
            lp = f"{prefix}h.{i}."
            parts = [q[w].permute(1, 0, 2).reshape(D, -1) for w in ("W_Q", "W_K", "W_V")]
            _put(out, lp + "attn.c_attn.weight", torch.cat(parts, 1))
            _put(out, lp + "attn.c_attn.bias", torch.cat([q[b].reshape(-1) for b in ("b_Q", "b_K", "b_V")]))
            _put(out, lp + "attn.c_proj.weight", q["W_O"].reshape(-1, D))
            names = {"attn.c_proj.bias": "b_O", "ln_1.weight": "ln1_w", "ln_1.bias": "ln1_b", "mlp.c_fc.weight": "W_in",
                     "mlp.c_fc.bias": "b_in", "mlp.c_proj.weight": "W_out", "mlp.c_proj.bias": "b_out",
                     "ln_2.weight": "ln2_w", "ln_2.bias": "ln2_b"}
            for key, name in names.items():
                _put(out, lp + key, q[name])
        elif family in LLAMA_LIKE:
            _put_llama_layer(out, f"{prefix}layers.{i}.", q, weights.arch)
        elif family == "gpt_neox":
            _put_neox_layer(out, f"{prefix}layers.{i}.", q, D)
        else:
            k = _layer_keys(family, prefix, i)
            for tag, w, b in (("q", "W_Q", "b_Q"), ("k", "W_K", "b_K"), ("v", "W_V", "b_V")):
                _put(out, k[tag] + ".weight", q[w].permute(1, 0, 2).reshape(D, -1).T)
                _put(out, k[tag] + ".bias", q[b].reshape(-1))
            _put(out, k["o"] + ".weight", q["W_O"].reshape(-1, D).T)
            _put(out, k["o"] + ".bias", q["b_O"])
            for name, key in (("ln1_w", "ln1"), ("ln2_w", "ln2")):
                _put(out, _ln_key(out, k[key], "weight"), q[name])
                _put(out, _ln_key(out, k[key], "bias"), q[name.replace("_w", "_b")])
            _put(out, k["fin"] + ".weight", q["W_in"].T)
            _put(out, k["fin"] + ".bias", q["b_in"])
            _put(out, k["fout"] + ".weight", q["W_out"].T)
            _put(out, k["fout"] + ".bias", q["b_out"])
    for name, key in (("word", lay["word"]), ("pos", lay.get("pos")), ("type", lay.get("type"))):
        if key and t.get(name) is not None:
            _put(out, prefix + key, t[name])
    if t.get("lm_head") is not None:  # an untied output head: W_U (d_model x vocab), stored as [vocab, d_model]
        _put(out, lay.get("head", HEAD_KEY), t["lm_head"].T)
    if t.get("pooler_w") is not None:  # an encoder's pooler: in x out here, nn.Linear's [out, in] there
        _put(out, prefix + "pooler.dense.weight", t["pooler_w"].T)
        _put(out, prefix + "pooler.dense.bias", t["pooler_b"])
    offset = float(weights.arch.gain_offset or 0)  # Gemma stores w, applies 1 + w (the loader adds it)
    for tag in ("emb_ln", "final_ln"):
        key = lay.get(tag)
        if key and t.get(f"{tag}_w") is not None:
            shift = offset if f"{tag}_w" in GAIN_OFFSET_TENSORS else 0.0
            _put(out, _ln_key(out, prefix + key, "weight"), t[f"{tag}_w"] - shift)
            _put(out, _ln_key(out, prefix + key, "bias"), t[f"{tag}_b"])
    _ = H
    config = json.loads((src / "config.json").read_text())
    if dtype is not None:
        config["torch_dtype"] = dtype
    shared = {}
    seen: dict[int, str] = {}
    for key, v in out.items():  # tied tensors: safetensors refuses shared storage, so each key gets its own copy
        ptr = v.data_ptr()
        shared[key] = v.clone() if ptr in seen else v
        seen[ptr] = key
    # every file written beside and then put in place (os.replace: a link there is replaced, never followed; a
    # killed write leaves the old file or the new one); the weights first, carrying symtrans's mark, so a
    # directory left half-written is still one symtrans may write again
    write_file(target, "model.safetensors",
               lambda tmp: save_file(shared, tmp, metadata={"format": "pt", WRITTEN_BY[0]: WRITTEN_BY[1]}), "checkpoint")
    write_file(target, "config.json", (json.dumps(config, indent=1) + "\n").encode(), "config")
    for extra in _EXTRAS:  # the source's tokenizer; one an earlier write copied from another source goes
        if (src / extra).is_file():
            write_file(target, extra, (src / extra).read_bytes(), "tokenizer file")
        elif (target / extra).is_file():
            (target / extra).unlink()
    return target


def _put_neox_layer(out: dict[str, Any], lp: str, q: dict[str, Any], D: int) -> None:
    """One GPT-NeoX layer written under ``lp``: the inverse of the loader's ``_neox_layer``. ``query_key_value``
    holds ``H`` blocks of ``3 d_k`` output rows (each head's q, k, v in turn), not three blocks of ``H d_k``.
    A round trip of modified weights (``tests/test_save.py``, every family) reads back what was written.
    """
    import torch

    qkv = torch.stack([q[n].transpose(1, 2) for n in ("W_Q", "W_K", "W_V")], 1)  # H x 3 x d_k x D
    _put(out, lp + "attention.query_key_value.weight", qkv.reshape(-1, D))
    _put(out, lp + "attention.query_key_value.bias", torch.stack([q[n] for n in ("b_Q", "b_K", "b_V")], 1).reshape(-1))
    _put(out, lp + "attention.dense.weight", q["W_O"].reshape(-1, D).T)
    _put(out, lp + "attention.dense.bias", q["b_O"])
    for ln, key in (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")):
        _put(out, f"{lp}{key}.weight", q[f"{ln}_w"])
        _put(out, f"{lp}{key}.bias", q[f"{ln}_b"])
    _put(out, lp + "mlp.dense_h_to_4h.weight", q["W_in"].T)
    _put(out, lp + "mlp.dense_h_to_4h.bias", q["b_in"])
    _put(out, lp + "mlp.dense_4h_to_h.weight", q["W_out"].T)
    _put(out, lp + "mlp.dense_4h_to_h.bias", q["b_out"])


def _put_llama_layer(out: dict[str, Any], lp: str, q: dict[str, Any], arch: Any) -> None:
    """One layer of a Llama-like family written under ``lp``: the inverse of the loader's ``_llama_layer`` (Phi-3's
    fused ``qkv_proj`` and ``gate_up_proj``; QK norms, per head or over all heads; Gemma's norms before and after
    each sub-block, whose stored ``w`` is the applied gain less ``gain_offset``).

    Examples
    --------
    >>> import tempfile
    >>> from symtrans.numeric.fixtures import random_checkpoint
    >>> from symtrans.numeric.weights import load_model
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = random_checkpoint(d + "/a", "gemma3", seed=0)
    ...     w = load_model(d + "/a"); w.tensors["ln2_w"][0, 1] = 0.5  # an applied gain: stored as 0.5 - 1
    ...     back = load_model(save_weights(w, d + "/b"))
    ...     max(float((back.tensors[k] - w.tensors[k]).abs().max()) for k in w.tensors if w.tensors[k] is not None) < 1e-6
    True
    """
    import torch

    from symtrans.numeric.weights import GAIN_OFFSET_TENSORS

    D = int(arch.d_model)
    offset = float(arch.gain_offset or 0)
    rows = {tag: q[w].permute(1, 0, 2).reshape(D, -1).T for tag, w in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V"))}
    if arch.family == "phi3":  # one qkv_proj (rows q, then k, then v) and one gate_up_proj (gate, then up)
        _put(out, lp + "self_attn.qkv_proj.weight", torch.cat([rows["q"], rows["k"], rows["v"]]))
        _put(out, lp + "mlp.gate_up_proj.weight", torch.cat([q["W_gate"].T, q["W_in"].T]))
    else:
        for tag in ("q", "k", "v"):
            _put(out, f"{lp}self_attn.{tag}_proj.weight", rows[tag])
        _put(out, lp + "mlp.gate_proj.weight", q["W_gate"].T)
        _put(out, lp + "mlp.up_proj.weight", q["W_in"].T)
    for tag, b in (("q", "b_Q"), ("k", "b_K"), ("v", "b_V")):
        _put(out, f"{lp}self_attn.{tag}_proj.bias", q[b].reshape(-1))
    _put(out, lp + "self_attn.o_proj.weight", q["W_O"].reshape(-1, D).T)
    _put(out, lp + "self_attn.o_proj.bias", q["b_O"])
    for tag, b in (("gate", "b_gate"), ("up", "b_in")):
        _put(out, f"{lp}mlp.{tag}_proj.bias", q[b])
    _put(out, lp + "mlp.down_proj.weight", q["W_out"].T)
    _put(out, lp + "mlp.down_proj.bias", q["b_out"])
    gemma = arch.family in ("gemma3", "gemma2")
    gains = {}
    if arch.pre_norms:
        gains["input_layernorm"] = "ln1_w"
        gains["pre_feedforward_layernorm" if gemma else "post_attention_layernorm"] = "ln2_w"
    if arch.post_norms:  # Gemma: post_attention_layernorm is the norm after attention
        gains.update(post_attention_layernorm="ln1_post_w", post_feedforward_layernorm="ln2_post_w")
    if arch.qk_norm_full:  # one gain over every head's entries, held per head
        gains.update({"self_attn.q_norm": "q_norm_full_w", "self_attn.k_norm": "k_norm_full_w"})
    elif arch.qk_norm:
        gains.update({"self_attn.q_norm": "q_norm_w", "self_attn.k_norm": "k_norm_w"})
    for key, name in gains.items():
        _put(out, f"{lp}{key}.weight", q[name].reshape(-1) - (offset if name in GAIN_OFFSET_TENSORS else 0.0))
    for name in ("ln1_b", "ln2_b"):  # RMSNorm has no shift: the loader's zeros must still be zeros
        if q.get(name) is not None and bool((q[name] != 0).any()):
            raise SymtransError(f"{lp}{name}: the weights hold a norm shift this RMSNorm family does not store; "
                                "writing it is not supported")


def _ln_key(out: dict[str, Any], stem: str, kind: str) -> str:
    """A LayerNorm's key: ``.weight``/``.bias``, or the old ``.gamma``/``.beta`` where the source uses them."""
    key = f"{stem}.{kind}"
    if key in out:
        return key
    return f"{stem}.{'gamma' if kind == 'weight' else 'beta'}"


_LAYER_NAMES = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "ln1_w", "ln1_b", "W_gate", "b_gate",
                "W_in", "b_in", "W_out", "b_out", "ln2_w", "ln2_b", "q_norm_w", "k_norm_w", "q_norm_full_w",
                "k_norm_full_w", "ln1_post_w", "ln2_post_w")
