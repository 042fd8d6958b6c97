"""ClaimGraph construction errors, queries, and every status-propagation rule, on hand-built graphs."""

from __future__ import annotations

import pytest

from proofs import Claim
from symtrans.errors import SymtransError
from symtrans.evidence import Evidence, Scope, Verdict, combine_verdicts
from symtrans.graph import ClaimGraph, Standing, assess, count_records, mark_stale, verdict_table


def C(cid: str, kind: str = "theorem", status: str = "proved", stmt: tuple = (), proof: tuple = ()) -> Claim:
    return Claim(id=cid, kind=kind, title=cid, paper_ref=cid, section="§0", statement=f"{cid} holds",
                 latex=cid, paper_status=status, statement_deps=stmt, proof_deps=proof)


def E(cid: str, verdict: Verdict, kind: str | None = None, **kw) -> Evidence:
    kind = kind or ("symbolic" if verdict is Verdict.CERTIFIED else "numeric")
    if verdict is Verdict.NOT_APPLICABLE:
        kw.setdefault("violated_hypothesis", "H1")
    if verdict is Verdict.CERTIFIED:
        kw.setdefault("scope", Scope("all-sizes", "a proof"))
        kw.setdefault("details", {"certificate": {"schema": "a re-checkable file"}})  # not proved (text)
    return Evidence(claim=cid, producer=f"p-{cid}-{verdict.value}", kind=kind, verdict=verdict,
                    summary="test", **kw)


def chain() -> ClaimGraph:
    """d (definition) -> a (lemma) -> b (theorem) -> c (corollary); x (literature) -> b."""
    return ClaimGraph([C("d", "definition", "definition"), C("a", "lemma", stmt=("d",)),
                       C("x", "literature", "external"), C("b", proof=("a", "x")),
                       C("c", "corollary", proof=("b",))])


# --------------------------------------------------------------------------- construction
def test_cycle_is_refused_and_named() -> None:
    with pytest.raises(SymtransError) as err:
        ClaimGraph([C("p", proof=("r",)), C("q", proof=("p",)), C("r", proof=("q",)), C("s")])
    msg = str(err.value)
    assert msg.startswith("dependency cycle: ") and "\n" not in msg
    nodes = msg.split(": ", 1)[1].split(" (")[0].split(" -> ")
    assert nodes[0] == nodes[-1] and set(nodes) == {"p", "q", "r"}


def test_dangling_reference_is_refused_with_a_suggestion() -> None:
    with pytest.raises(SymtransError, match=r"claim 'b' depends on unknown claim 'lem-ranksum'; did you mean 'lem-rank-sum'"):
        ClaimGraph([C("lem-rank-sum", "lemma"), C("b", proof=("lem-ranksum",))])


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(SymtransError, match="duplicate claim id 'a'"):
        ClaimGraph([C("a"), C("b"), C("a", "lemma")])


def test_queries_return_plain_lists_in_topological_order() -> None:
    g = chain()
    assert g.rests_on("c") == ["d", "a", "x", "b"]
    assert g.rests_on("c", depth=1) == ["b"] and g.rests_on("c", depth=2) == ["a", "x", "b"]
    assert g.rests_on("c", depth=0) == []
    assert g.impact("d") == ["a", "b", "c"] and g.impact("c") == []
    order = g.topological_order()
    assert all(order.index(u) < order.index(v) for u, v, _ in g.edges())
    assert ("d", "a", "statement") in g.edges() and ("a", "b", "proof") in g.edges()
    with pytest.raises(SymtransError, match="unknown claim 'e'"):
        g.rests_on("e")


def test_statement_edge_wins_when_a_dependency_is_both() -> None:
    g = ClaimGraph([C("d", "definition", "definition"), C("t", stmt=("d",), proof=("d",))])
    assert g.edges() == [("d", "t", "statement")]


# --------------------------------------------------------------------------- propagation
def test_fully_certified_needs_every_blocking_ancestor_positive() -> None:
    g = chain()
    st = assess(g, {"a": [E("a", Verdict.CERTIFIED)], "b": [E("b", Verdict.CERTIFIED)],
                    "c": [E("c", Verdict.CERTIFIED)]})
    assert st["c"].fully_certified and st["c"].standing is Standing.FULLY_CERTIFIED
    assert st["c"].external_ancestors == ("x",)  # reported: certified modulo an external result
    # an ancestor only numerically supported: c holds, but not by exact certificates all the way down
    st = assess(g, {"a": [E("a", Verdict.CERTIFIED)], "b": [E("b", Verdict.SUPPORTED)],
                    "c": [E("c", Verdict.CERTIFIED)]})
    assert st["c"].standing is Standing.SUPPORTED and not st["c"].fully_certified
    # a producer of c raised: never fully certified
    st = assess(g, {"a": [E("a", Verdict.CERTIFIED)], "b": [E("b", Verdict.CERTIFIED)],
                    "c": [E("c", Verdict.CERTIFIED)]}, raised={"c"})
    assert st["c"].standing is Standing.SUPPORTED and st["c"].raised
    # the lemma not run: b and c are positive themselves but blocked by a
    st = assess(g, {"b": [E("b", Verdict.SUPPORTED)], "c": [E("c", Verdict.CERTIFIED)]})
    assert st["c"].standing is Standing.BLOCKED and st["c"].blocked_by == ("a",)
    assert g.blocks("c", {"b": Verdict.SUPPORTED}) == ["a"]


def test_inconclusive_or_not_applicable_ancestor_blocks() -> None:
    g = chain()
    for v in (Verdict.INCONCLUSIVE, Verdict.NOT_APPLICABLE, Verdict.NOT_RUN):
        ev = {"a": [E("a", v)], "b": [E("b", Verdict.CERTIFIED)], "c": [E("c", Verdict.CERTIFIED)]}
        st = assess(g, ev)
        assert not st["c"].fully_certified and st["c"].blocked_by == ("a",), v


def test_failed_ancestor_propagates_to_every_descendant() -> None:
    g = chain()
    st = assess(g, {"a": [E("a", Verdict.FAILS)], "b": [E("b", Verdict.CERTIFIED)]})
    assert st["a"].standing is Standing.FAILS
    assert st["b"].standing is Standing.RESTS_ON_FAILED and st["b"].failed_ancestors == ("a",)
    assert st["c"].standing is Standing.RESTS_ON_FAILED and st["c"].failed_ancestors == ("a",)
    assert "rests on a, which fail" in st["b"].disagreement
    assert not st["b"].fully_certified


def test_definitions_and_hypotheses_do_not_block_unless_they_fail() -> None:
    g = ClaimGraph([C("d", "definition", "definition"), C("h", "hypothesis", "definition"),
                    C("t", stmt=("d", "h"))])
    st = assess(g, {"t": [E("t", Verdict.CERTIFIED)]})
    assert st["t"].fully_certified and st["d"].standing is Standing.GIVEN and st["h"].standing is Standing.GIVEN
    st = assess(g, {"d": [E("d", Verdict.FAILS)], "t": [E("t", Verdict.CERTIFIED)]})
    assert st["t"].standing is Standing.RESTS_ON_FAILED and st["t"].blocked_by == ("d",)
    st = assess(g, {"d": [E("d", Verdict.CERTIFIED)]})  # a definition's stated equivalence, certified
    assert st["d"].standing is Standing.FULLY_CERTIFIED


def test_external_results_are_never_reported_certified() -> None:
    g = chain()
    st = assess(g, {"x": [E("x", Verdict.SUPPORTED)]})
    assert st["x"].standing is Standing.EXTERNAL and not st["x"].fully_certified
    assert st["x"].verdict is Verdict.SUPPORTED  # the verdict itself is shown as the evidence says
    st = assess(g, {"x": [E("x", Verdict.FAILS)], "a": [E("a", Verdict.CERTIFIED)], "b": [E("b", Verdict.CERTIFIED)]})
    assert st["b"].standing is Standing.RESTS_ON_FAILED and st["b"].failed_ancestors == ("x",)
    assert "external" in st["x"].disagreement


def test_stale_evidence_is_shown_but_does_not_count() -> None:
    g = chain()
    old = E("a", Verdict.SUPPORTED, weights_hash="abc", toolkit_version="0.0.1")
    st = assess(g, {"a": [old]}, weights_hash="abc", toolkit_version="0.1.0")
    assert st["a"].stale and st["a"].verdict is Verdict.NOT_RUN
    assert st["a"].evidence[0].stale and "0.0.1" in st["a"].evidence[0].stale_reason
    other = E("a", Verdict.FAILS, weights_hash="abc", toolkit_version="0.1.0")
    st = assess(g, {"a": [other]}, weights_hash="xyz", toolkit_version="0.1.0")
    assert st["a"].verdict is Verdict.NOT_RUN and st["b"].standing is not Standing.RESTS_ON_FAILED
    st = assess(g, {"a": [other]}, weights_hash="abc", toolkit_version="0.1.0")
    assert st["a"].verdict is Verdict.FAILS and not st["a"].stale
    fresh = E("a", Verdict.CERTIFIED)  # symbolic evidence has no weights: never stale by weights
    assert not mark_stale(fresh, weights_hash="xyz", toolkit_version=fresh.toolkit_version).stale


def test_disagreement_rules() -> None:
    g = ClaimGraph([C("p", status="prediction"), C("q", status="conjectured"), C("r", status="proved")])
    st = assess(g, {"p": [E("p", Verdict.SUPPORTED)], "r": [E("r", Verdict.NOT_APPLICABLE)]})
    assert st["p"].disagreement == "the paper's status is 'prediction'; the toolkit's evidence is 'supported'"
    assert st["q"].disagreement is None and st["r"].disagreement is None  # not-run, not-applicable: no dispute
    st = assess(g, {"r": [E("r", Verdict.FAILS), E("r", Verdict.CERTIFIED)]})
    assert st["r"].verdict is Verdict.FAILS and "'proved'" in st["r"].disagreement


def test_evidence_must_be_about_its_claim() -> None:
    with pytest.raises(SymtransError, match="is about 'b', filed under 'a'"):
        assess(chain(), {"a": [E("b", Verdict.CERTIFIED)]})


def test_combine_verdicts_rules() -> None:
    V = Verdict
    assert combine_verdicts([V.CERTIFIED, V.INCONCLUSIVE, V.SUPPORTED]) is V.CERTIFIED
    # a record that could not decide never demotes one that did (issue 25 item 3)
    assert combine_verdicts([V.SUPPORTED, V.INCONCLUSIVE]) is V.SUPPORTED
    # issue 38: the quantifier orders support and inconclusive (docs/claims-and-verdicts.md says the same)
    for q in ("universal", "model-every"):
        assert combine_verdicts([V.SUPPORTED, V.INCONCLUSIVE], q) is V.INCONCLUSIVE
        assert combine_verdicts([V.CERTIFIED, V.INCONCLUSIVE], q) is V.CERTIFIED
    for q in ("generic", "model-some", "statistical"):
        assert combine_verdicts([V.SUPPORTED, V.INCONCLUSIVE], q) is V.SUPPORTED
    assert combine_verdicts([V.INCONCLUSIVE, V.NOT_APPLICABLE, V.NOT_RUN]) is V.INCONCLUSIVE
    assert combine_verdicts([V.SUPPORTED, V.NOT_APPLICABLE, V.NOT_RUN]) is V.SUPPORTED
    assert combine_verdicts([V.NOT_APPLICABLE, V.NOT_RUN]) is V.NOT_APPLICABLE
    assert combine_verdicts([V.CERTIFIED, V.FAILS]) is V.FAILS
    assert combine_verdicts([V.NOT_RUN]) is V.NOT_RUN


def test_the_paper_graph_builds_and_framework_rests_on_everything() -> None:
    g = ClaimGraph()
    paper_items = {i for i, c in g.claims.items() if c.paper_status.value != "not-in-paper"}
    assert set(g.rests_on("framework-9")) == paper_items - {"framework-9"}
    assert g.impact("framework-9") == []


# --------------------------------------------------------------------------- missing readings (issue 25, item 1)
def _two_readings() -> ClaimGraph:
    from proofs._claim import Reading

    return ClaimGraph([Claim(id="t", kind="theorem", title="t", paper_ref="t", section="§0", statement="t holds",
                             latex="t", paper_status="proved",
                             readings=(Reading("a", "a holds", "w", "n"), Reading("b", "b holds", "w", "n")))])


def _R(reading: str, verdict: Verdict, **kw) -> Evidence:
    return E("t", verdict, reading=f"t/{reading}", **kw)


def test_a_reading_that_did_not_run_keeps_the_claim_from_being_certified() -> None:
    g = _two_readings()
    both = assess(g, {"t": [_R("a", Verdict.CERTIFIED), _R("b", Verdict.CERTIFIED)]})["t"]
    assert both.verdict is Verdict.CERTIFIED and both.missing == ()
    one = assess(g, {"t": [_R("a", Verdict.CERTIFIED)]})["t"]
    assert one.verdict is Verdict.SUPPORTED and not one.fully_certified
    assert one.missing == ("t/b: no producer of this reading ran",)
    assert one.to_dict()["missing_readings"] == ["t/b: no producer of this reading ran"]


def test_a_reading_whose_producer_raised_is_named_with_the_error() -> None:
    g = _two_readings()
    crash = Evidence(claim="t", producer="q", kind="numeric", verdict=Verdict.NOT_RUN, reading="t/b",
                     summary="not run: the producer raised ValueError: boom", details={"error": "ValueError: boom"})
    st = assess(g, {"t": [_R("a", Verdict.CERTIFIED), crash]}, raised={"t"})["t"]
    assert st.verdict is Verdict.SUPPORTED
    assert st.missing == ("t/b: producer q raised ValueError: boom",)
    # a reading certified by one producer while another of its producers raised is not certified either
    st = assess(g, {"t": [_R("a", Verdict.CERTIFIED), _R("b", Verdict.CERTIFIED), crash]})["t"]
    assert [r.verdict for r in st.readings] == [Verdict.CERTIFIED, Verdict.SUPPORTED]
    assert st.verdict is Verdict.SUPPORTED
    # a failing reading beside a missing one still makes the claim reading-dependent or failing, never positive
    st = assess(g, {"t": [_R("a", Verdict.FAILS, scope=Scope("all-sizes", "x"))]})["t"]
    assert st.verdict is Verdict.FAILS and st.missing == ("t/b: no producer of this reading ran",)


def test_count_records_is_the_reports_counting_for_records_that_ran_now() -> None:
    g = _two_readings()
    recs = [_R("a", Verdict.CERTIFIED, weights_hash="f" * 64), _R("b", Verdict.SUPPORTED, weights_hash="f" * 64)]
    counted = count_records(recs, g)
    assert verdict_table(counted) == {"t": {"verdict": "supported", "readings": {"t/a": "certified",
                                                                                   "t/b": "supported"}}}
    # the same records through assess, as a report counts them (fresh against the same weights)
    assert verdict_table({"t": assess(g, {"t": recs}, weights_hash="f" * 64)["t"]}) == verdict_table(counted)
    few = Evidence(claim="thm-5.3", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="r = 1..3",
                   scope=Scope("instances", "r = 1..3"))
    assert count_records([few])["thm-5.3"].verdict is Verdict.SUPPORTED  # not the raw 'certified'


def test_an_all_sizes_record_without_a_certificate_file_is_proved_text() -> None:
    """A written proof checked at small sizes counts as supported, never certified (issue 26)."""
    g = chain()
    bare = E("a", Verdict.CERTIFIED, details={})
    st = assess(g, {"a": [bare]})["a"]
    assert st.verdict is Verdict.SUPPORTED and not st.fully_certified
    assert st.evidence[0].counted_note.startswith("proved (text)")
    assert assess(g, {"a": [E("a", Verdict.CERTIFIED)]})["a"].verdict is Verdict.CERTIFIED


def test_a_sanity_only_reading_is_missing_with_its_reason() -> None:
    g = _two_readings()
    sane = _R("b", Verdict.SUPPORTED, counted=False)
    st = assess(g, {"t": [_R("a", Verdict.CERTIFIED), sane]})["t"]
    assert [r.verdict for r in st.readings] == [Verdict.CERTIFIED, Verdict.NOT_RUN]
    assert st.verdict is Verdict.SUPPORTED
    assert st.missing == (f"t/b: {sane.producer}: {sane.not_counted_note}",)
    assert st.missing[0].startswith("t/b: p-t-supported: sanity check")


def test_combination_order_in_assess_and_in_the_docs() -> None:
    """Issue 38: a model-every reading with one supported and one inconclusive record is inconclusive, a
    model-some one supported; docs/claims-and-verdicts.md states the order the code uses."""
    from pathlib import Path

    from symtrans.evidence import EVERY_QUANTIFIERS

    g = ClaimGraph()
    recs = [Evidence(claim="thm-7.3", producer=p, kind="numeric", verdict=v, summary="s", reading="thm-7.3/wo")
            for p, v in (("a", Verdict.SUPPORTED), ("b", Verdict.INCONCLUSIVE))]
    st = assess(g, {"thm-7.3": recs})["thm-7.3"]
    assert {r.id: r.verdict for r in st.readings}["thm-7.3/wo"] is Verdict.INCONCLUSIVE  # model-every
    recs = [Evidence(claim="thm-rank-contraction", producer=p, kind="numeric", verdict=v, summary="s",
                     reading="thm-rank-contraction/contracts")
            for p, v in (("a", Verdict.SUPPORTED), ("b", Verdict.INCONCLUSIVE))]
    st = assess(g, {"thm-rank-contraction": recs})["thm-rank-contraction"]
    assert {r.id: r.verdict for r in st.readings}["thm-rank-contraction/contracts"] is Verdict.SUPPORTED
    text = " ".join((Path(__file__).parents[1] / "docs" / "claims-and-verdicts.md").read_text().split())
    clause = text[text.index("then a certificate of the full scope"):text.index("then not-applicable, then not-run")]
    every = clause[:clause.index("inconclusive before support")]
    assert all(f"`{q}`" in every for q in EVERY_QUANTIFIERS)
    assert "support before inconclusive" in clause[len(every):]


def _readings_graph(u_rests: dict[str, tuple | None], *extra: Claim) -> ClaimGraph:
    """t has two readings, one that holds (t/s) and one that fails (t/w); u rests on t and refines that per reading."""
    from proofs._claim import Reading

    def r(name: str, rests: tuple | None = None) -> Reading:
        return Reading(name, f"{name} holds", "w", "n", rests_on=rests)

    t = Claim(id="t", kind="theorem", title="t", paper_ref="t", section="§0", statement="t", latex="t",
              paper_status="proved", statement_deps=("d",), readings=(r("s"), r("w")))
    u = Claim(id="u", kind="theorem", title="u", paper_ref="u", section="§0", statement="u", latex="u",
              paper_status="proved", statement_deps=("d",), proof_deps=("t",),
              readings=tuple(r(n, rests) for n, rests in u_rests.items()))
    return ClaimGraph([C("d", "definition", "definition"), *extra, t, u])


def _reading_evidence() -> dict[str, list[Evidence]]:
    def R(cid: str, rid: str, v: Verdict) -> Evidence:
        return E(cid, v, reading=rid)
    return {"t": [R("t", "t/s", Verdict.CERTIFIED), R("t", "t/w", Verdict.FAILS)],
            "u": [R("u", "u/s", Verdict.CERTIFIED), R("u", "u/w", Verdict.CERTIFIED), R("u", "u/n", Verdict.SUPPORTED)]}


def test_a_reading_rests_on_the_readings_it_names_not_its_whole_claim() -> None:
    # thm-recovery/sum is proved for every size and rests on thm-7.3/sum (also proved); its claim rests on thm-7.3,
    # which is reading-dependent (its W_O reading fails), so the count read "blocked". A reading names what it rests on
    # (rests_on): against those, u/s is fully certified, u/w rests on a failed reading, u/n (a count) on nothing.
    g = _readings_graph({"s": ("t/s",), "w": ("t/w",), "n": ()})
    st = assess(g, _reading_evidence())
    assert st["t"].verdict is Verdict.READING_DEPENDENT
    got = {r.id: r.standing for r in st["u"].readings}
    assert got == {"u/s": Standing.FULLY_CERTIFIED, "u/w": Standing.RESTS_ON_FAILED, "u/n": Standing.SUPPORTED}, got
    w = next(r for r in st["u"].readings if r.id == "u/w")  # the reading names what it rests on that fails
    assert w.failed_ancestors == ("t/w",) and w.to_dict()["rests_on_failed"] == ["t/w"]
    assert g.reading_rests_on(g.claims["u"].reading("u/s")) == ["d", "t/s"]
    # the false case: the same readings without rests_on stand on the whole claim t, which blocks them all
    g = _readings_graph({"s": None, "w": None, "n": None})
    got = {r.id: r.standing for r in assess(g, _reading_evidence())["u"].readings}
    assert set(got.values()) == {Standing.BLOCKED}, got


@pytest.mark.parametrize("rests, message", [
    (("x",), "not among what its claim rests on"),       # not a dependency of u at all
    (("t/q",), "did you mean"),                          # a reading t does not have
    (("t/",), "give claim ids or 'claim/reading' ids"),  # malformed: an empty reading name
    (("t/s/x",), "give claim ids or 'claim/reading' ids"),
])
def test_a_reading_can_only_refine_its_claims_dependencies(rests, message) -> None:
    with pytest.raises(SymtransError, match=message):
        _readings_graph({"s": rests, "n": ()}, C("x", "lemma"))
