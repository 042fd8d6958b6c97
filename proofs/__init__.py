"""The paper's items (definitions, hypotheses, claims, literature), one module per section.

Each section module registers its items as :class:`Claim` records when
imported; :func:`all_claims` imports them all (and the producer modules, which
may register corrected statements). :mod:`symtrans.graph` turns the registry
into the proof graph.

Examples
--------
>>> from proofs import get_claim
>>> get_claim("thm-recovery").formalisation
'toolkit'
"""

from proofs._claim import CLAIM_MODULES, GIVEN_KINDS, KINDS, Claim, all_claims, claim_ids, get_claim, register

__all__ = ["Claim", "KINDS", "GIVEN_KINDS", "CLAIM_MODULES", "register", "get_claim", "all_claims", "claim_ids"]
