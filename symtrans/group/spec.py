"""The invariance group G of an architecture: factors, tag tables, the generic action.

:meth:`GroupSpec.from_arch` lists the factors of G for one architecture. Each
:class:`Factor` carries its dimension (continuous, a SymPy expression in the
canonical symbols of :mod:`symtrans.symbols`) or its order (discrete), the
features that break or shrink it (each with the reason and whether this
architecture has it), and a *tag table*: for every axis of every weight tensor
it acts on, the side and whether it acts by the element, its inverse or its
inverse transpose. The action is fully determined by that table:
:func:`act` reads nothing else, and both the exact certificates
(:mod:`symtrans.group.certify`) and the numeric checks
(:mod:`symtrans.group.numeric`) transform weights only through it.

This module re-exports, for the code that imports them from here, the public
names of the catalogue of G (:mod:`symtrans.catalogue`: the data model
:mod:`~symtrans.catalogue.model`, the builders
:mod:`~symtrans.catalogue.factors` and :class:`GroupSpec` in
:mod:`~symtrans.catalogue.spec`, SymPy definitions below every engine) and of
the action engine (:mod:`symtrans.group.action`). The weight layout is
described in :mod:`symtrans.catalogue.model`.

This module never imports torch (tests/test_import_contract.py checks it):
:func:`act` works on SymPy matrices and on torch tensors alike (block form:
per-head tensors are lists of 2-D blocks, vectors are 1 x m rows), reaching
torch only through a tensor it is given. Group elements (torch and SymPy) are
built by each factor's entry in :mod:`symtrans.group.elements`.

Examples
--------
>>> spec = GroupSpec.from_arch("bert-base")
>>> [f.name for f in spec.factors]  # doctest: +NORMALIZE_WHITESPACE
['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'S_H', 'S_dff', 'ffn-scaling',
 'centring-shift', 'ffn-bias-transfer', 'ffn-input-hyperplane', 'attention-bias-transfer',
 'attention-input-hyperplane', 'S_n', 'residual-permutation', 'embedding-centring-shift',
 'embedding-translation', 'final-norm-scaling', 'unused-position-rows', 'unread-pad-row',
 'final-norm-bias-transfer', 'residual-rotation']
>>> spec.total_dimension()
1324056
>>> spec.gauge_dimension_model()
1179648
"""

from symtrans.catalogue.model import (
    AXIS_SIZES,
    LAYER_AXES,
    MODEL_AXES,
    SCOPE_TEXT,
    AxisTag,
    Breaking,
    Factor,
    layer_tensor_names,
    model_tensor_names,
)
from symtrans.catalogue.spec import GroupSpec, generic_element
from symtrans.group.action import ACTIONS, Action, act

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "act", "LAYER_AXES", "MODEL_AXES",
           "AXIS_SIZES", "SCOPE_TEXT", "layer_tensor_names", "model_tensor_names", "generic_element", "Action",
           "ACTIONS"]
