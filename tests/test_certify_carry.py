"""report --previous: a carried certified record counts only after its certificates re-verify (report.build._reverify)."""

from __future__ import annotations

from symtrans.certify.producers import Scope, certificate
from symtrans.evidence import Evidence, Verdict
from symtrans.report.build import _reverify


def _cert(rank: int) -> dict:
    return certificate("c", None, "p", "rank", Scope("instances", "one matrix"), {"rank": {"M": rank}},
                       {"method": "exact-rank", "inline": {"M": [["1", "1/2"], ["0", "3"]]}, "modulus": 2**61 - 1},
                       None)


def _record(**details) -> Evidence:
    return Evidence(claim="lem-rank-sum", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="s",
                    details=details)


def test_valid_certificates_reverify() -> None:
    assert _reverify(_record(certificate=_cert(2)))[0]
    assert _reverify(_record(certificates=[_cert(2), _cert(2)])) == (True, "2 certificate(s) re-verified")


def test_a_tampered_certificate_is_not_reverified() -> None:
    bad = dict(_cert(2), asserts={"rank": {"M": 1}})
    assert _reverify(_record(certificates=[_cert(2), bad])) == (
        False, "digest mismatch: the certificate was altered after it was written")
    resealed = _cert(1)  # sealed, but the asserted rank is wrong: only the recomputation catches it
    assert _reverify(_record(certificate=resealed)) == (False, "rank of M is 2, not 1")


def test_a_record_without_certificate_is_not_reverified() -> None:
    assert not _reverify(_record())[0]
