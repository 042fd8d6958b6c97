"""report --previous: a carried certified record counts only after its certificate re-verifies."""

from __future__ import annotations

import json
from pathlib import Path

from proofs import Claim
from symtrans.certify.producers import Scope, certificate
from symtrans.evidence import PRODUCERS, Context, Evidence, Verdict, producer
from symtrans.graph import ClaimGraph
from symtrans.report import build_report, write_report


def _graph() -> ClaimGraph:
    return ClaimGraph([Claim(id="tcc-lemma", kind="lemma", title="t", paper_ref="r", section="§0",
                             statement="s", latex="s", paper_status="proved")])


def _cert(rank: int) -> dict:
    return certificate("tcc-lemma", None, "tcc-cert", "rank", Scope("instances", "one matrix"), {"rank": {"M": rank}},
                       {"method": "exact-rank", "inline": {"M": [["1", "1/2"], ["0", "3"]]}, "modulus": 2**61 - 1},
                       None)


def _carry(tmp_path: Path, cert: dict | None, tamper=None) -> Verdict:
    name = "tcc-cert"

    @producer("tcc-lemma", kind="symbolic", name=name)
    def _p(ctx: Context) -> list[Evidence]:
        return [Evidence(claim="tcc-lemma", producer=name, kind="symbolic", verdict=Verdict.CERTIFIED,
                         summary="rank 2", details={"certificate": cert} if cert else {})]

    try:
        write_report(build_report(Context(model=None, reuse=False), graph=_graph()), tmp_path / "old", ["json"])
    finally:
        PRODUCERS["tcc-lemma"] = [p for p in PRODUCERS["tcc-lemma"] if p.name != name]
        if not PRODUCERS["tcc-lemma"]:
            del PRODUCERS["tcc-lemma"]
    path = tmp_path / "old" / "report.json"
    if tamper:
        doc = json.loads(path.read_text())
        tamper(doc["claims"][0]["evidence"][0]["details"]["certificate"])
        path.write_text(json.dumps(doc))
    report = build_report(Context(model=None, reuse=False), previous=path, graph=_graph())
    return report.statuses["tcc-lemma"].verdict


def test_valid_carried_certificate_counts(tmp_path: Path) -> None:
    assert _carry(tmp_path, _cert(2)) is Verdict.CERTIFIED


def test_tampered_carried_certificate_does_not_count(tmp_path: Path) -> None:
    def alter(cert: dict) -> None:
        cert["asserts"]["rank"]["M"] = 1

    assert _carry(tmp_path, _cert(2), alter) is Verdict.INCONCLUSIVE


def test_carried_record_without_certificate_is_only_supported(tmp_path: Path) -> None:
    assert _carry(tmp_path, None) is Verdict.SUPPORTED
