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

This module re-exports the public names of three modules: the data model
(:mod:`symtrans.group.model`), the catalogue of factors
(:mod:`symtrans.group.catalogue`) and the action engine
(:mod:`symtrans.group.action`).

Weight layout (per layer; the leading ``head``/``kv`` axis indexes per-head
blocks, as in :mod:`symtrans.numeric`): ``W_Q[h]`` d_model x d_k, ``b_Q[h]``,
``W_K[g]``, ``b_K[g]``, ``W_V[g]`` d_model x d_v, ``b_V[g]``, ``W_O[h]``
d_v x d_model, ``b_O``, ``ln1_w``, ``ln1_b``, ``W_gate`` and ``b_gate`` (gated
FFN only), ``W_in`` d_model x d_ff, ``b_in``, ``W_out`` d_ff x d_model,
``b_out``, ``ln2_w``, ``ln2_b``; ``g`` is the key/value head of query head
``h`` (``g = h`` without grouped-query attention). Model tensors: ``word``,
``pos``, ``type``, ``emb_ln_w``, ``emb_ln_b``, ``final_ln_w``, ``final_ln_b``.
Data: ``X`` (tokens x d_model), the layer or model input.

This module never imports torch (tests/test_import_contract.py checks it):
:func:`act` works on SymPy matrices and on torch tensors alike (block form:
per-head tensors are lists of 2-D blocks, vectors are 1 x m rows), reaching
torch only through a tensor it is given. Group elements as torch tensors are
built in :mod:`symtrans.group.numeric` (``lie_element``).

Examples
--------
>>> spec = GroupSpec.from_arch("bert-base")
>>> [f.name for f in spec.factors]  # doctest: +NORMALIZE_WHITESPACE
['qk-gauge', 'vo-gauge', 'key-bias-shift', 'value-bias-shift', 'S_H', 'S_dff', 'ffn-scaling',
 'centring-shift', 'ffn-bias-transfer', 'ffn-input-hyperplane', 'attention-bias-transfer',
 'attention-input-hyperplane', 'S_n', 'residual-permutation', 'embedding-centring-shift',
 'embedding-translation', 'final-norm-scaling', 'unused-position-rows', 'final-norm-bias-transfer',
 'residual-rotation']
>>> spec.total_dimension()
1324056
>>> spec.gauge_dimension_model()
1179648
"""

from symtrans.group.action import ACTIONS, Action, act
from symtrans.group.catalogue import generic_element
from symtrans.group.model import (
    AXIS_SIZES,
    LAYER_AXES,
    MODEL_AXES,
    SCOPE_TEXT,
    AxisTag,
    Breaking,
    Factor,
    GroupSpec,
    layer_tensor_names,
    model_tensor_names,
)

__all__ = ["AxisTag", "Breaking", "Factor", "GroupSpec", "act", "LAYER_AXES", "MODEL_AXES",
           "AXIS_SIZES", "SCOPE_TEXT", "layer_tensor_names", "model_tensor_names", "generic_element", "Action",
           "ACTIONS"]
