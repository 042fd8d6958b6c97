"""The producers of evidence: one module per paper section, each claim's exact and numeric producers side by side.

``sec4`` (LayerNorm) ... ``sec9`` (the symmetry framework) each hold the
producers of their section's claims: the exact witnesses, counterexample
searches, certificates and Coq records (kind ``symbolic``, run by ``symtrans
certify``) and the numeric checks on a model's weights (kind ``numeric``, run
by ``symtrans check``); the report runs both. Each producer is a row of
:data:`symtrans.producer_table.PRODUCER_TABLE`. The mathematics lives below:
:mod:`symtrans.certify` (exact), :mod:`symtrans.numeric` (torch),
:mod:`symtrans.group`. What the producers share is in :mod:`symtrans.producers.common`
(numeric) and :mod:`symtrans.producers.symbolic` (exact records, certificate
dimensions, the Coq kernel's record); producer modules never import each other.
:data:`MODULES` lists the section modules (it is :data:`symtrans.runner.PRODUCER_MODULES`).

Examples
--------
>>> sorted(MODULES)[0]
'symtrans.producers.sec4'
"""

from symtrans.runner import PRODUCER_MODULES as MODULES

__all__ = ["MODULES"]
