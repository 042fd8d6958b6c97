"""Numeric checks: one module per paper section, each registering evidence producers.

Every check tests a claim's statement on the real model's weights (or on
constructed inputs) and returns :class:`~symtrans.evidence.Evidence` with a
verdict, margin, tolerance and its reason, dtype, inputs, model and weights
hash. Importing a module registers its producers; :data:`MODULES` lists them
(they are also listed in :data:`symtrans.evidence.PRODUCER_MODULES`).

Examples
--------
>>> MODULES[0]
'symtrans.checks.sec4'
"""

MODULES = ["symtrans.checks.sec4", "symtrans.checks.sec5", "symtrans.checks.sec6",
           "symtrans.checks.sec7", "symtrans.checks.sec8"]
