"""Hugging Face hub ids: the one place a model is looked up in the local hub cache or fetched.

The command line resolves a hub id here before torch, transformers or SymPy are imported, so that an
unreachable hub (no network, ``HF_HUB_OFFLINE``) is reported in about a second, not after the imports; the
loader (:mod:`symtrans.numeric.weights`) asks again and finds the snapshot in the cache.
"""

from __future__ import annotations

import os
from pathlib import Path

from symtrans.errors import SymtransError

__all__ = ["PATTERNS", "snapshot"]

#: the files of a checkpoint that symtrans reads (config, safetensors weights and their index, the tokenizer)
PATTERNS = ("config.json", "*.safetensors", "*.safetensors.index.json", "tokenizer.json")


def snapshot(repo_id: str) -> Path:
    """The local directory of hub id ``repo_id``: from the hub cache, else fetched (unless offline).

    Raises
    ------
    SymtransError
        in one line, when huggingface_hub is missing, the id is not cached under ``HF_HUB_OFFLINE``, or the
        hub cannot be reached or has no such model.

    Examples
    --------
    >>> import os
    >>> os.environ["HF_HUB_OFFLINE"] = "1"
    >>> snapshot("someorg/none-here")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: someorg/none-here: not a local directory and not in the local ... cache ...
    >>> del os.environ["HF_HUB_OFFLINE"]
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise SymtransError(f"{repo_id}: not a local directory, and huggingface_hub is not installed "
                            "to fetch it; pass a local model directory") from None
    patterns = list(PATTERNS)
    try:  # the local cache first (works under HF_HUB_OFFLINE=1 and without a network)
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise SymtransError(f"{repo_id}: not a local directory and not in the local Hugging Face hub cache "
                            "(HF_HUB_OFFLINE is set, so it is not fetched); pass a local model directory")
    try:
        path = snapshot_download(repo_id, allow_patterns=patterns)
    except Exception as err:
        raise SymtransError(f"{repo_id}: not a local directory, and fetching it from the Hugging Face hub "
                            f"failed ({type(err).__name__}: the hub is unreachable or has no such model); "
                            "download it where the hub is reachable (e.g. save_pretrained) and pass "
                            "that local directory") from None
    return Path(path)
