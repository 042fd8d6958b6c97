"""symtrans: a symbolic-plus-numeric proof assistant for Transformer collapse theory.

The package is layered so that formula queries stay light: importing
``symtrans`` imports neither torch nor networkx; those load when a numeric or
graph function is first used.

Examples
--------
>>> import symtrans
>>> symtrans.formula("recovery-ambiguity", arch="bert-base", n=512).value
360448
"""

from __future__ import annotations

__version__ = "0.1.0"

from symtrans.arch import Architecture, from_config, get_arch, preset_names
from symtrans.errors import SymtransError
from symtrans.formulas import FORMULAS, Formula, FormulaValue, formula, formula_names, get_formula

__all__ = [
    "__version__", "Architecture", "from_config", "get_arch", "preset_names", "SymtransError",
    "FORMULAS", "Formula", "FormulaValue", "formula", "formula_names", "get_formula",
]
