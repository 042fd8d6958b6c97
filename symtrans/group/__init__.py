"""The invariance group G of a Transformer: factors, actions, certificates, orbits, fibres.

* :mod:`symtrans.group.action` -- the generic :func:`act` (no torch): a factor's
  element acting on weights through its tag table only;
* :mod:`symtrans.group.spec` -- re-exports :class:`GroupSpec` and the records of
  the catalogue of G (:mod:`symtrans.catalogue`, a definitions module: the
  factors of G for an architecture, each with its tag table, which factor acts
  on which axis of which weight, on which side, by what) with :func:`act`;
* :mod:`symtrans.group.forward` -- one layer/model forward pass written once for
  two backends (exact SymPy, torch);
* :mod:`symtrans.group.certify` -- exact SymPy certificates of invariance, and
  witnesses for every breaking feature;
* :mod:`symtrans.group.orbits` -- orbit and fibre dimensions, and the pairing of
  the four collapse phenomena with precise objects;
* :mod:`symtrans.group.numeric` -- torch checks on real and random weights.

Examples
--------
>>> from symtrans.group import GroupSpec
>>> GroupSpec.from_arch("bert-base").gauge_dimension_model()
1179648
"""

from symtrans.group.spec import AxisTag, Breaking, Factor, GroupSpec, act

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "act"]
