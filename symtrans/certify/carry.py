"""Carried certificates: a record from an earlier report counts as certified only after its certificates re-verify.

``report --previous`` carries records whose producers did not run now. A
carried ``certified`` (or refuting ``fails``) record is re-checked here with
:func:`symtrans.certify.checker.verify_certificate` from the certificates it
holds in ``details["certificate"]`` / ``details["certificates"]``:

* every certificate valid: the record keeps its verdict (``details["reverified"]`` says so);
* one invalid: the verdict becomes ``inconclusive``, the summary says why;
* a ``certified`` record with no certificate: it cannot be re-checked, so it
  counts as ``supported`` (its summary says so).

Examples
--------
>>> from symtrans.evidence import Evidence
>>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s")
>>> reverify_carried(e).verdict.label
'supported'
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["reverify_carried"]


def _certificates(details: dict[str, Any]) -> list[dict[str, Any]]:
    certs = list(details.get("certificates") or [])
    if details.get("certificate"):
        certs.append(details["certificate"])
    return certs


def reverify_carried(ev: Any) -> Any:
    """Return the carried record ``ev`` re-verified: kept, downgraded to supported, or made inconclusive.

    Examples
    --------
    >>> from symtrans.evidence import Evidence
    >>> from symtrans.certify.producers import Scope, certificate
    >>> good = certificate("c", None, "p", "rank 2", Scope("instances", "d"), {"rank": {"M": 2}},
    ...                    {"method": "exact-rank", "inline": {"M": [["1", "0"], ["0", "1"]]}, "modulus": 7}, None)
    >>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s",
    ...              details={"certificate": good})
    >>> reverify_carried(e).verdict.label
    'certified'
    >>> bad = dict(good, asserts={"rank": {"M": 1}})
    >>> reverify_carried(dataclasses.replace(e, details={"certificate": bad})).summary[:45]
    'carried certificate did not re-verify (digest'
    """
    from symtrans.certify.checker import verify_certificate
    from symtrans.evidence import Verdict

    if ev.verdict not in (Verdict.CERTIFIED, Verdict.FAILS):
        return ev
    certs = _certificates(ev.details or {})
    if not certs:
        if ev.verdict is Verdict.CERTIFIED:
            return dataclasses.replace(ev, verdict=Verdict.SUPPORTED,
                                       summary="carried certified record without a re-checkable certificate "
                                               f"counts as supported; was: {ev.summary}")
        return ev
    for cert in certs:
        ok, why = verify_certificate(cert)
        if not ok:
            return dataclasses.replace(ev, verdict=Verdict.INCONCLUSIVE,
                                       summary=f"carried certificate did not re-verify ({why}); was: {ev.summary}")
    return dataclasses.replace(ev, details={**ev.details, "reverified": f"{len(certs)} certificate(s) re-verified"})
