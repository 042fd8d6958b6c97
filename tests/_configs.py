"""Shared helper for the config-reading tests: a checkpoint directory holding only a ``config.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_config(tmp_path: Path, cfg: dict[str, Any], name: str = "m") -> Path:
    """Write ``cfg`` as ``tmp_path/name/config.json`` and return the directory (what ``--arch`` and from_config read)."""
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d
