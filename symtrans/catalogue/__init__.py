"""The catalogue of the invariance group G: definitions (SymPy only, no torch, no engine).

* :mod:`symtrans.catalogue.model` -- the data model: the weight layout, tag
  tables (:class:`AxisTag`), :class:`Breaking`, :class:`Piece`, :class:`Factor`;
* :mod:`symtrans.catalogue.factors` -- one builder per family of factors;
* :mod:`symtrans.catalogue.spec` -- :class:`GroupSpec`, G for one architecture.

The machinery that uses it (the action on weights, certificates, numeric
checks, completeness) is :mod:`symtrans.group`, as SymPy keeps its named
groups (``named_groups.py``) apart from the permutation-group algorithms.

Examples
--------
>>> GroupSpec.from_arch("gpt2").factor("qk-gauge").dimension
H*d_k**2
"""

from symtrans.catalogue.model import AxisTag, Breaking, Factor, Piece
from symtrans.catalogue.spec import GroupSpec

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "Piece"]
