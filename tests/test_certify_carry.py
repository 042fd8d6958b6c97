"""report --previous: a carried record counts only after its certificates re-verify against the registry.

(:func:`symtrans.checker.check.check_record`, called by ``report.build._carry`` before any producer runs.)
"""

from __future__ import annotations

import copy

from symtrans.checker.check import check_record, digest


def _record() -> dict:
    """The prop-6.2 refutation as the report records it (reading, context key), as a dict."""
    from symtrans.context import Context
    from symtrans.runner import run_producers

    (ev,) = [e for e in run_producers("prop-6.2", Context(model=None)) if e.producer == "prop62-counterexample"]
    return copy.deepcopy(ev.to_dict())  # the evidence is cached: never edit it in place


def _reseal(cert: dict) -> dict:
    cert = copy.deepcopy(cert)
    cert["digest"] = digest(cert)
    return cert


def test_a_genuine_fails_record_reverifies() -> None:
    rec = _record()
    assert rec["verdict"] == "fails" and check_record(rec) is None


def test_a_tampered_certificate_of_a_fails_record_is_refused() -> None:
    rec = _record()
    cert = rec["details"]["certificate"]
    cert["asserts"]["dim_sum_R"] = 4  # sealed again: only the recomputation catches it
    rec["details"]["certificate"] = _reseal(cert)
    assert check_record(rec) == "certificate not re-verified: dim(sum R_h) is 3, not 4"
    rec["details"]["certificate"]["asserts"]["dim_sum_R"] = 3  # now the digest no longer matches
    assert "digest mismatch" in check_record(rec)


def test_record_and_certificate_must_agree() -> None:
    rec = _record()
    rec["verdict"] = "certified"  # the certificate refutes: the record may not say certified
    assert check_record(rec) == "the record's verdict 'certified' is not prop-6.2/identity-counterexample's 'fails'"
    rec = _record()
    rec["scope"] = dict(rec["scope"], kind="all-sizes")
    assert check_record(rec).startswith("the record's scope is not its certificate's")
    rec = _record()
    rec["producer"] = rec["context"]["producer"] = "prop63-real-weights"  # renamed consistently, still refused
    assert check_record(rec) == ("the record's producer 'prop63-real-weights' is not "
                                 "prop-6.2/identity-counterexample's 'prop62-counterexample'")
    rec = _record()
    rec["producer"] = "a-new-producer"  # the context still names the genuine one
    assert check_record(rec).startswith("the record names producer 'a-new-producer' but its context")


def test_a_record_without_certificate_of_a_certifying_producer_is_refused() -> None:
    rec = _record()
    rec["details"] = {}
    assert check_record(rec).startswith("the record carries no certificate")
    other = dict(_record(), producer="ln-remark", context={"producer": "ln-remark"})  # not a certificate producer
    assert check_record(other) == "producer 'ln-remark' writes no certificates, yet the record carries some"
    other["details"] = {}
    assert check_record(other) is None  # nothing to re-verify here; the caller refuses a certified one
