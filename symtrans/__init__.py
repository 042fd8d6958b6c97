"""symtrans: a symbolic-plus-numeric proof assistant for Transformer collapse theory.

The package is layered so that formula queries stay light: importing
``symtrans`` imports neither torch nor networkx; those load when a numeric or
graph function is first used. The Python API (:mod:`symtrans.api`) is
re-exported here; :data:`__all__` lists every public name.

Examples
--------
>>> import symtrans
>>> symtrans.formula("recovery-ambiguity", arch="bert-base", n=512).value
360448
>>> symtrans.architecture("bert-large").H
16
"""

from __future__ import annotations

#: The package version: the one place it is written (pyproject.toml reads it: ``[tool.setuptools.dynamic]``).
__version__ = "0.2.0"

from typing import Any

from symtrans.errors import SymtransError

#: Public names loaded on first access (module-level ``__getattr__``), so that ``import symtrans``
#: stays light (not even SymPy: ``symtrans --version`` and argument errors answer at once): name -> module.
_LAZY: dict[str, str] = {
    "Architecture": "symtrans.arch", "from_config": "symtrans.arch", "get_arch": "symtrans.arch",
    "preset_names": "symtrans.arch",
    "FORMULAS": "symtrans.formulas", "Formula": "symtrans.formulas", "FormulaValue": "symtrans.formulas",
    "formula": "symtrans.formulas", "formula_names": "symtrans.formulas", "get_formula": "symtrans.formulas",
    "architecture": "symtrans.api", "load": "symtrans.api", "measure": "symtrans.api",
    "invariance_group": "symtrans.api", "verify_invariance": "symtrans.api", "relate": "symtrans.api", "canonical": "symtrans.api", "orbit_distance": "symtrans.api",
    "check_claims": "symtrans.api", "certify_claims": "symtrans.api", "proof_graph": "symtrans.api",
    "proof_report": "symtrans.api",
    "EvidenceList": "symtrans.api", "InvarianceChecks": "symtrans.api", "Measurement": "symtrans.api", "ProofGraph": "symtrans.api",
    "NotebookReport": "symtrans.api", "InvarianceGroup": "symtrans.api",
    "Evidence": "symtrans.evidence", "Verdict": "symtrans.evidence", "PaperStatus": "symtrans.evidence",
    "Context": "symtrans.context",
    "ClaimGraph": "symtrans.graph", "Report": "symtrans.report",
    "sweep": "symtrans.sweeps", "SweepResult": "symtrans.sweeps",
}

__all__ = ["__version__", "SymtransError", *_LAZY]


def __getattr__(name: str) -> Any:
    """Load a heavy public name (see ``_LAZY``) on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'symtrans' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
