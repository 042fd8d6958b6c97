"""Sealing a certificate: the registry's header, the producer's witness and asserts, and the digest.

The one way a producer writes a certificate dict (the schema of
:mod:`symtrans.checker.check`): claim, reading, producer, statement text and
scope come from the trusted statement registry
(:func:`symtrans.checker.statements.expected`), never from the producer, so a
fresh certificate matches the registry by construction. The producers
(:mod:`symtrans.producers`) and certified completeness
(:mod:`symtrans.certify.completeness`) call it; the checker imports nothing of
certify.

Examples
--------
>>> certificate("prop-6.2/identity-counterexample", Dims(n=128, seed=0), {}, {}, None)["statement_id"]
'prop-6.2/identity-counterexample'
"""

from __future__ import annotations

from typing import Any

from symtrans.checker.statements import Dims, expected

__all__ = ["certificate"]


def certificate(statement_id: str, dims: Dims, asserts: dict[str, Any], witness: dict[str, Any],
                weights_hash: str | None) -> dict[str, Any]:
    """A certificate dict of a registered statement (schema of :mod:`symtrans.checker.check`), sealed with its digest.

    Claim, reading, producer, statement text and scope come from the trusted registry
    (:func:`symtrans.checker.statements.expected`), the witness and asserts from the producer.

    Examples
    --------
    >>> from symtrans.checker.check import digest
    >>> c = certificate("prop-6.2/identity-counterexample", Dims(n=128, seed=0), {"rows_of_MHA": 2}, {}, None)
    >>> c["claim"], c["producer"], c["digest"] == digest(c)
    ('prop-6.2', 'prop62-counterexample', True)
    """
    from symtrans import __version__
    from symtrans.checker.check import SCHEMA, digest

    exp = expected(statement_id, dims)
    cert = {"schema": SCHEMA, "statement_id": statement_id, "claim": exp["claim"], "reading": exp["reading"],
            "producer": exp["producer"], "statement": exp["statement"], "scope": exp["scope"], "asserts": asserts,
            "witness": witness, "toolkit_version": __version__, "weights_hash": weights_hash}
    cert["digest"] = digest(cert)
    return cert
