"""Numeric checks: one module per paper section, each registering evidence producers.

Every check tests a claim's statement on the real model's weights (or on
constructed inputs) and returns :class:`~symtrans.evidence.Evidence` with a
verdict, margin, tolerance and its reason, dtype, inputs, model and weights
hash. Importing a module registers its producers; :data:`MODULES` lists them
(it is :data:`symtrans.runner.CHECK_MODULES`, part of :data:`symtrans.runner.PRODUCER_MODULES`).

Examples
--------
>>> MODULES[0]
'symtrans.checks.sec4'
"""

from symtrans.runner import CHECK_MODULES as MODULES

__all__ = ["MODULES"]
