"""Benchmarks time symtrans as an installed package runs: its modules byte-compiled, as ``pip install`` leaves them.

An editable checkout under ``PYTHONDONTWRITEBYTECODE=1`` (set on the development machine) never writes
``__pycache__``, so every timed process would compile about 84 modules from source (0.5-0.8 CPU s), while the
baseline's libraries (transformers, torch) come byte-compiled from their wheels. ``compile_symtrans`` writes
the bytecode once, before anything is timed.
"""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path


def compile_symtrans() -> Path:
    """Byte-compile the symtrans package that ``python -m symtrans`` imports here; return its directory."""
    spec = importlib.util.find_spec("symtrans")
    if spec is None or spec.origin is None:
        raise SystemExit("symtrans is not importable: pip install -e . first")
    root = Path(spec.origin).parent
    if not compileall.compile_dir(str(root), quiet=1):
        raise SystemExit(f"could not byte-compile {root}")
    return root
