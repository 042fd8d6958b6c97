"""The dimension symbols shared by every formula.

Each size of an architecture has one canonical SymPy symbol, declared a positive
integer. Formulas are written in these symbols; an architecture supplies values
for some or all of them. The command line refers to them by the names in
:data:`SIZE_NAMES` and :data:`AUX_NAMES`, and only by those: no user string is
ever parsed as an expression.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["SYMBOLS", "SIZE_NAMES", "AUX_NAMES", "symbol", "LATEX_NAMES"]

#: Sizes that an architecture fixes (or leaves symbolic).
SIZE_NAMES: tuple[str, ...] = (
    "n",  # sequence length
    "L",  # layers
    "H",  # query heads
    "H_kv",  # key/value heads (= H without grouped-query attention)
    "d_model",
    "d_k",  # query/key head width
    "d_v",  # value head width
    "d_ff",
    "vocab_size",
    "max_positions",
)

#: Quantities of a particular input or weight point, not of the architecture.
#: Each has a generic default (see :mod:`symtrans.formulas`).
AUX_NAMES: tuple[str, ...] = (
    "rank_X",  # rank of the layer input X
    "rank_WO",  # rank of the stacked output projection W_O (H d_v x d_model)
    "dim_sumR",  # dim(R_1 + ... + R_H), R_h the row space of Y^h W_O^h
)

LATEX_NAMES: dict[str, str] = {
    "n": "n",
    "L": "L",
    "H": "H",
    "H_kv": r"H_{\mathrm{kv}}",
    "d_model": r"d_{\mathrm{model}}",
    "d_k": "d_{k}",
    "d_v": "d_{v}",
    "d_ff": r"d_{\mathrm{ff}}",
    "vocab_size": r"V",
    "max_positions": r"P_{\max}",
    "rank_X": r"\operatorname{rank} X",
    "rank_WO": r"\operatorname{rank} W_{O}",
    "dim_sumR": r"\dim\textstyle\sum_h \mathcal{R}_h",
}

#: name -> positive-integer symbol
SYMBOLS: dict[str, sp.Symbol] = {
    name: sp.Symbol(name, integer=True, positive=True) for name in SIZE_NAMES + AUX_NAMES
}


def symbol(name: str) -> sp.Symbol:
    """Return the canonical positive-integer symbol called ``name``.

    Examples
    --------
    >>> symbol("d_k")
    d_k
    >>> symbol("d_k").is_positive and symbol("d_k").is_integer
    True
    """
    from symtrans.errors import SymtransError, suggest

    try:
        return SYMBOLS[name]
    except KeyError:
        raise SymtransError(suggest(name, SYMBOLS, "symbol")) from None
