"""Report contents, the report.json round trip, stale evidence from an earlier report, atomic writing, the CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from proofs import Claim
from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.context import Context
from symtrans.evidence import Evidence, Tolerance, Verdict, producer
from symtrans.graph import ClaimGraph
from symtrans.report import FILES, build_report, render, write_report
from symtrans.runner import registry


def _claim(cid: str, kind: str, status: str, stmt: tuple = (), proof: tuple = ()) -> Claim:
    return Claim(id=cid, kind=kind, title=f"test item {cid}", paper_ref=f"ref {cid}", section="§0",
                 statement=f"{cid} holds", latex=cid, paper_status=status, statement_deps=stmt, proof_deps=proof)


@pytest.fixture
def mini() -> ClaimGraph:
    """A small hand-built graph with ids no real producer uses."""
    return ClaimGraph([
        _claim("tst-def", "definition", "definition"),
        _claim("tst-lemma", "lemma", "proved", stmt=("tst-def",)),
        _claim("tst-lit", "literature", "external"),
        _claim("tst-thm", "theorem", "proved", proof=("tst-lemma", "tst-lit")),
        _claim("tst-cor", "corollary", "proved", proof=("tst-thm",)),
        _claim("tst-pred", "construction", "prediction", proof=("tst-thm",)),
    ])


def _test_producer(claim: str, **kw):  # type: ignore[no-untyped-def]
    """A producer for one test: declared with @producer and added to the runner's registry (the table's view)."""
    def wrap(func):  # type: ignore[no-untyped-def]
        func = producer(claim, **kw)(func)
        registry().setdefault(func.producer.claim, []).append(func.producer)
        return func

    return wrap


@pytest.fixture
def producers():
    """Register test producers for one test, then remove exactly those."""
    added: list[tuple[str, str]] = []

    def add(claim: str, verdict: Verdict, kind: str = "symbolic", needs_model: bool = False, **kw):
        name = f"test-{claim}-{verdict.value}-{len(added)}"

        @_test_producer(claim, kind=kind, name=name, needs_model=needs_model,
                        whole_model="a test producer: it reads the whole model" if needs_model else "")
        def _p(ctx: Context) -> list[Evidence]:
            if verdict is Verdict.NOT_APPLICABLE:
                kw.setdefault("violated_hypothesis", "H4")
            return [Evidence(claim=claim, producer=name, kind=kind, verdict=verdict,
                             summary=f"test evidence for {claim}", **kw)]

        added.append((claim, name))
        return name

    def remove(claim: str, name: str) -> None:
        registry()[claim] = [p for p in registry().get(claim, []) if p.name != name]
        if not registry()[claim]:
            del registry()[claim]

    add.remove = remove  # type: ignore[attr-defined]
    yield add
    for claim, name in added:
        remove(claim, name)


def test_report_json_round_trips_evidence_and_follows_the_schema(mini, producers, tmp_path: Path) -> None:
    producers("tst-lemma", Verdict.SUPPORTED, kind="numeric", margin=4.5, margin_meaning="decades",
              dtype="float64", tolerance=Tolerance(1e-10, "float64 rank cut", "sigma_max"), seed=3)
    producers("tst-thm", Verdict.FAILS, counterexample={"X": [["1", "0"], ["2", "0"]]})
    producers("tst-pred", Verdict.NOT_APPLICABLE)
    report = build_report(Context(model=None), graph=mini)
    write_report(report, tmp_path / "r", ["json"])
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {"toolkit_version", "model", "claims", "summary", "schema"} <= set(doc)
    assert doc["model"] is None and [c["id"] for c in doc["claims"]] == list(mini.claims)
    for entry in doc["claims"]:
        assert {"id", "kind", "paper_ref", "paper_status", "formalisation", "verdict", "fully_certified",
                "depends_on", "evidence"} <= set(entry)
        originals = [x.evidence for x in report.statuses[entry["id"]].evidence]
        assert [Evidence.from_dict(e) for e in entry["evidence"]] == originals
    by_id = {c["id"]: c for c in doc["claims"]}
    assert by_id["tst-lemma"]["evidence"][0]["tolerance"] == {"value": 1e-10, "reason": "float64 rank cut",
                                                              "relative_to": "sigma_max"}
    assert by_id["tst-thm"]["evidence"][0]["counterexample"] == {"X": [["1", "0"], ["2", "0"]]}
    assert by_id["tst-thm"]["verdict"] == "fails" and by_id["tst-cor"]["standing"] == "rests-on-failed"
    assert by_id["tst-cor"]["rests_on_failed"] == ["tst-thm"] and by_id["tst-lemma"]["standing"] == "supported"
    assert not by_id["tst-lemma"]["fully_certified"]  # numeric support is not an exact certificate
    assert by_id["tst-pred"]["verdict"] == "not-applicable"
    assert by_id["tst-thm"]["depends_on"] == ["tst-lemma", "tst-lit"]
    assert [d["id"] for d in doc["summary"]["disagreements"]] == ["tst-thm", "tst-cor"]  # tst-pred: a prediction, not asserted
    assert doc["summary"]["verdicts"] == {"certified": 0, "supported": 1, "fails": 1, "not-applicable": 1,
                                          "inconclusive": 0, "not-run": 3, "reading-dependent": 0}


def test_the_paper_report_has_every_claim_and_links_formulas() -> None:
    report = build_report(Context(model=None))
    doc = report.to_json()
    assert [c["id"] for c in doc["claims"]] == list(report.graph.claims)
    rec = next(c for c in doc["claims"] if c["id"] == "thm-recovery")
    assert rec["formalisation"] == "toolkit" and rec["formula_values"][0]["name"] == "recovery-ambiguity"
    lit = next(c for c in doc["claims"] if c["id"] == "lit-dong")
    assert lit["standing"] == "external" and not lit["fully_certified"]


def test_markdown_opens_with_the_answer_then_disagreements_with_margins_and_tolerances(mini, producers) -> None:
    producers("tst-lemma", Verdict.SUPPORTED, kind="numeric", margin=4.5, margin_meaning="decades at the cut",
              dtype="float64", tolerance=Tolerance(1e-10, "float64 rank cut"))
    producers("tst-thm", Verdict.FAILS)
    md = render(build_report(Context(model=None), graph=mini), ["md"])["report.md"]
    head = md[: md.index("## Counts by verdict")]
    # the answer (counts in words) first, then the disagreements, then what holds for all sizes, then the table
    order = ["## The answer", "## Where the toolkit and the paper disagree", "## Proved for all sizes",
             "## Every claim and reading"]
    assert [head.index(h) for h in order] == sorted(head.index(h) for h in order)
    answer = head[:head.index("## Where the toolkit")]
    assert f"{len(mini)} items: " in answer and "assumed" in answer and "not-run 0" not in answer
    assert "[tst-thm](#claim-tst-thm)" in head
    dis = head[head.index("## Where the toolkit and the paper disagree"):head.index("## Proved for all sizes")]
    # the why column quotes the deciding evidence, not the generic "the toolkit's evidence fails"
    assert "test evidence for tst-thm" in dis and "the toolkit's evidence fails" not in dis
    overview = head[head.index("## Every claim and reading"):]
    assert all(f"[{cid}](#claim-{cid})" in overview for cid in mini.claims)
    assert "| **supported** | 4.5 (decades at the cut) |" in overview
    assert "| **assumed** |" in overview  # a literature result says why it has no verdict, not "not-run"
    section = md[md.index("### tst-lemma"):md.index("### tst-lit")]
    assert "4.5 (decades at the cut)" in section and "1e-10 ([T1](#tolerance-T1))" in section
    assert "float64 rank cut" not in section  # the reason is written once, under Tolerances
    assert md.count("float64 rank cut") == 1 and '<a id="tolerance-T1"></a>' in md
    assert "| float64 |" in section
    assert md.count("\n### ") == len(mini)


def test_numeric_producers_are_listed_as_not_run_without_a_model(mini, producers) -> None:
    name = producers("tst-thm", Verdict.SUPPORTED, kind="numeric", needs_model=True)
    report = build_report(Context(model=None), graph=mini)
    (entry,) = report.statuses["tst-thm"].evidence
    assert entry.evidence.producer == name and entry.evidence.verdict is Verdict.NOT_RUN
    assert report.statuses["tst-thm"].verdict is Verdict.NOT_RUN


def test_a_raising_producer_is_recorded_not_fatal(mini, producers) -> None:
    @_test_producer("tst-lemma", kind="symbolic", name="test-raises")
    def _boom(ctx: Context) -> list[Evidence]:
        raise RuntimeError("boom")

    try:
        report = build_report(Context(model=None), graph=mini)
    finally:
        producers.remove("tst-lemma", "test-raises")
    assert report.errors == ["tst-lemma: producer test-raises raised RuntimeError: boom"]
    assert report.statuses["tst-lemma"].verdict is Verdict.NOT_RUN and report.statuses["tst-lemma"].raised


def test_evidence_from_an_earlier_report_is_carried_and_marked_stale(mini, producers, tmp_path: Path) -> None:
    numeric = producers("tst-thm", Verdict.SUPPORTED, kind="numeric", weights_hash="0" * 64)
    symbolic = producers("tst-lemma", Verdict.CERTIFIED)
    write_report(build_report(Context(model=None), graph=mini), tmp_path / "old", ["json"])
    producers.remove("tst-thm", numeric)  # the producers are gone in the new run
    producers.remove("tst-lemma", symbolic)
    report = build_report(Context(model=None), previous=tmp_path / "old" / "report.json", graph=mini)
    for cid in ("tst-thm", "tst-lemma"):  # a record of an unregistered producer is never trusted
        (entry,) = report.statuses[cid].evidence
        assert entry.stale and "is not registered" in entry.stale_reason and entry.origin.startswith("previous")
        assert report.statuses[cid].verdict is Verdict.NOT_RUN  # stale evidence does not count
    entry = next(c for c in report.to_json()["claims"] if c["id"] == "tst-thm")
    assert entry["stale"] and entry["evidence"][0]["stale"]
    (tmp_path / "bad.json").write_text('{"claims": 3}')
    with pytest.raises(SymtransError, match="not a symtrans report.json"):
        build_report(Context(model=None), previous=tmp_path / "bad.json", graph=mini)


def test_previous_is_a_cache_checked_against_the_full_context_key(mini, tmp_path: Path) -> None:
    """A carried record is considered only when its registered producer did not run and its context key matches,
    and counts only with certificates that re-verify (issue 37: a carried supported needs what a carried fails
    needs; a record without one is shown, stale, never counted)."""
    state = {"run": True}

    def make(claim: str, verdict: Verdict, kind: str):
        @_test_producer(claim, kind=kind, name=f"cache-{claim}")
        def _p(ctx: Context) -> list[Evidence]:
            if not state["run"]:  # the producer is registered but gives nothing this time
                return [Evidence(claim=claim, producer=f"cache-{claim}", kind=kind, verdict=Verdict.NOT_RUN,
                                 summary="skipped")]
            return [Evidence(claim=claim, producer=f"cache-{claim}", kind=kind, verdict=verdict, summary="ran")]

    make("tst-thm", Verdict.SUPPORTED, "numeric")
    make("tst-lemma", Verdict.CERTIFIED, "symbolic")
    try:
        write_report(build_report(Context(model=None, n=16, reuse=False), graph=mini), tmp_path / "old", ["json"])
        old = tmp_path / "old" / "report.json"
        state["run"] = False
        same = build_report(Context(model=None, n=16, reuse=False), previous=old, graph=mini)
        (thm,) = same.statuses["tst-thm"].evidence
        assert thm.stale and thm.origin.startswith("previous") and "nothing this run can re-verify" in thm.stale_reason
        assert same.statuses["tst-thm"].verdict is Verdict.NOT_RUN
        (lem,) = same.statuses["tst-lemma"].evidence  # a certificate must be re-verified from its witness
        assert lem.stale and "nothing this run can re-verify" in lem.stale_reason
        assert same.statuses["tst-lemma"].verdict is Verdict.NOT_RUN
        other_n = build_report(Context(model=None, n=32, reuse=False), previous=old, graph=mini)
        (thm,) = other_n.statuses["tst-thm"].evidence
        assert thm.stale and "n 16 (now 32)" in thm.stale_reason
        assert other_n.statuses["tst-thm"].verdict is Verdict.NOT_RUN
        doc = json.loads(old.read_text())  # forge: another toolkit version and a made-up producer hash
        for c in doc["claims"]:
            for e in c["evidence"]:
                e["context"]["producer_hash"] = "0" * 16
        forged = tmp_path / "forged.json"
        forged.write_text(json.dumps(doc))
        rep = build_report(Context(model=None, n=16, reuse=False), previous=forged, graph=mini)
        (thm,) = rep.statuses["tst-thm"].evidence
        assert thm.stale and "producer_hash" in thm.stale_reason and rep.statuses["tst-thm"].verdict is Verdict.NOT_RUN
    finally:
        for cid in ("tst-thm", "tst-lemma"):
            registry()[cid] = [p for p in registry().get(cid, []) if p.name != f"cache-{cid}"]
            if not registry()[cid]:
                del registry()[cid]


def test_dot_has_every_node_and_edge() -> None:
    report = build_report(Context(model=None))
    dot = render(report, ["dot"])["report.dot"]
    nodes = re.findall(r'^  "([^"]+)" \[label=', dot, flags=re.M)
    edges = re.findall(r'^  "([^"]+)" -> "([^"]+)" \[style=(solid|dashed)', dot, flags=re.M)
    assert sorted(nodes) == sorted(report.graph.claims)
    kinds = {"statement": "solid", "proof": "dashed"}
    assert sorted(edges) == sorted((u, v, kinds[k]) for u, v, k in report.graph.edges())


# --------------------------------------------------------------------------- atomic writing
def test_rewrite_replaces_an_earlier_report_and_leaves_no_temporaries(tmp_path: Path) -> None:
    report = build_report(Context(model=None))
    out = tmp_path / "r"
    write_report(report, out, ["md", "json"])
    write_report(report, out, ["dot"])
    assert sorted(p.name for p in out.iterdir()) == ["report.dot"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_failing_render_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    report = build_report(Context(model=None))
    out = tmp_path / "r"
    write_report(report, out, ["md"])
    before = (out / "report.md").read_text()

    def broken(_report):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr("symtrans.report.html.render_html", broken)
    with pytest.raises(RuntimeError):
        write_report(report, out, ["md", "html"])
    assert (out / "report.md").read_text() == before and sorted(os.listdir(tmp_path)) == ["r"]


def test_output_directory_problems_are_one_line_errors(tmp_path: Path) -> None:
    report = build_report(Context(model=None))
    (tmp_path / "file").write_text("x")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    cases = {tmp_path / "file": "a file is in the way", tmp_path / "file" / "r": "a file is in the way",
             tmp_path / "busy": "holds other files (notes.txt)",
             Path("/proc/no/r"): "cannot create the directory to hold the report"}
    for out, message in cases.items():
        with pytest.raises(SymtransError, match=re.escape(message)):
            write_report(report, out, ["md"])
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["busy", "file"]


def test_missing_parents_are_created(tmp_path: Path) -> None:
    """``out`` under directories that do not exist yet: they are made (as ``mkdir -p``), and the report written."""
    report = build_report(Context(model=None))
    out = tmp_path / "runs" / "today" / "r"
    write_report(report, out, ["md"])
    assert (out / "report.md").read_text().startswith("#")
    assert sorted(os.listdir(tmp_path / "runs" / "today")) == ["r"]


def test_unwritable_parent(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        if os.access(parent, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root): the permission check cannot fail")
        with pytest.raises(SymtransError, match="not writable"):
            write_report(build_report(Context(model=None)), parent / "r", ["md"])
    finally:
        parent.chmod(0o755)


# --------------------------------------------------------------------------- command line
def test_cli_report_and_claims(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    assert main(["report", "--model", "none", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES.values())
    assert "disagreements with the paper" in capsys.readouterr().out
    assert main(["claims", "thm-5.3", "--rests-on", "--depth", "1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["claims"] == ["def-notation", "lem-variety", "lem-analytic-set", "prop-5.1"]
    assert main(["claims", "thm-7.3", "--impact"]) == 0
    assert capsys.readouterr().out.split("\n")[0].startswith("thm-recovery")
    assert main(["claims", "cor-mlp-role", "--blocks", "--format", "json"]) == 0
    blocking = json.loads(capsys.readouterr().out)["claims"]
    # prop-5.4 has only numeric evidence, which --model none does not run; thm-5.3 is certified exactly
    assert "prop-5.4" in blocking and "thm-5.3" not in blocking


@pytest.mark.parametrize("argv, message", [
    (["claims", "thm-4.3"], "unknown claim 'thm-4.3'; did you mean"),
    (["report", "--model", "/no/such/model", "--out", "{tmp}/r"], "/no/such/model: no such model directory"),
    (["report", "--model", "none", "--out", "{tmp}/f"], "a file is in the way"),
    (["report", "--model", "none", "--out", "{tmp}/r", "--format", "md,pdf"], "unknown format 'pdf'"),
    (["report", "--model", "none", "--out", "{tmp}/r", "--previous", "{tmp}/nope.json"], "no such file"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, tmp_path: Path, capsys) -> None:
    (tmp_path / "f").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symtrans: error: ") and message in err
    assert sorted(os.listdir(tmp_path)) == ["f"]  # nothing half-written


def test_a_directory_the_kernel_refuses_gives_one_line(tmp_path: Path) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    # refused by a real probe before anything is rendered (root passes os.access checks on /proc)
    with pytest.raises(SymtransError, match=r"^/proc: cannot create the report there \("):
        write_report(build_report(Context(model=None)), "/proc/symtrans-report", ["md"])


def test_html_rendered_aside_equals_html_rendered_here(mini, monkeypatch) -> None:
    """With several formats the HTML is rendered in a forked child: the same text, and a failed child is covered."""
    from symtrans.report import write as write_mod
    from symtrans.runner import parallel_default

    if not parallel_default():
        pytest.skip("needs fork and two CPUs")
    report = build_report(Context(model=None), graph=mini)
    alone = render(report, ["html"])["report.html"]  # one format: rendered here
    assert render(report, ["md", "html"])["report.html"] == alone
    parent, real = os.getpid(), write_mod._render_one

    def fails_in_child(rep, f):
        if os.getpid() != parent:
            raise RuntimeError("planted failure in the child")
        return real(rep, f)

    monkeypatch.setattr(write_mod, "_render_one", fails_in_child)
    assert render(report, ["md", "html"])["report.html"] == alone  # the parent rendered it again
    monkeypatch.setattr(write_mod, "_render_child", lambda *a: os._exit(3))  # the child dies outright
    assert render(report, ["html", "json"])["report.html"] == alone


def test_html_aside_is_collected_after_the_other_formats(mini, monkeypatch) -> None:
    """Even with html listed first, the other formats render while the child works; the files keep their order."""
    from symtrans.report import write as write_mod

    report = build_report(Context(model=None), graph=mini)
    order = []
    real_one = write_mod._render_one
    monkeypatch.setattr(write_mod, "_render_one", lambda rep, f: order.append(f) or real_one(rep, f))
    monkeypatch.setattr(write_mod, "_render_aside", lambda rep, f: lambda: order.append("collect html") or "<html/>")
    texts = render(report, ["html", "md", "json"])
    assert order == ["md", "json", "collect html"]
    assert list(texts) == ["report.html", "report.md", "report.json"] and texts["report.html"] == "<html/>"


def test_many_edges_into_one_node_are_bundled_into_one_trunk() -> None:
    from symtrans.report.html import BUNDLE_MIN, render_svg

    report = build_report(Context(model=None))
    svg = render_svg(report)
    into = {v for v in report.graph.claims
            if sum(1 for _, t, _ in report.graph.edges() if t == v) >= BUNDLE_MIN}
    assert "framework-9" in into  # the paper's framework rests on 17 results
    for v in report.graph.claims:
        n_in = sum(1 for _, t, _ in report.graph.edges() if t == v)
        paths = re.findall(rf'<path class="(edge[^"]*)"[^>]*data-to="{re.escape(v)}"[^>]*>', svg)
        arrows = re.findall(rf'<path class="edge[^"]*"[^>]*data-to="{re.escape(v)}"[^>]*marker-end', svg)
        if v in into:  # every edge is still drawn (the highlight script follows them), one arrow arrives
            assert paths.count("edge bundled") == n_in and len(arrows) == 1, v
            assert f'data-to="{v}" data-count="{n_in}"' in svg
        else:
            assert paths.count("edge") == n_in == len(arrows), v


@pytest.mark.parametrize("family", ["bert", pytest.param("llama", marks=pytest.mark.slow)])
def test_a_one_layer_checkpoint_reports_with_no_producer_raising(tmp_path, family) -> None:
    """Every producer works on a 1-layer model (prop-5.4's Jacobian chained two layers and raised on one)."""
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / family, family, n_layers=1)
    report = build_report(Context(model=str(path), n=12, reuse="model-free"))  # every model producer runs
    assert report.errors == []
    (entry,) = [e for e in report.statuses["prop-5.4"].evidence if e.evidence.producer == "residual-jacobian"]
    assert entry.evidence.inputs["layers"] == 1 and entry.evidence.verdict.value != "not-run"


def test_a_layer_subset_naming_every_layer_is_the_whole_model(tmp_path) -> None:
    """``--layers 0-(L-1)`` gives the report of no ``--layers``: every record, verdict and context alike."""
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / "bert", "bert", n_layers=2)
    # `named` is built with reuse of model records off: every record that reads the model computed again, none
    # taken from `whole`. All three share the model-free records (the same whatever the model or layers:
    # test_a_model_free_producer_gives_the_same_records_whatever_the_model); the model records of `whole` and
    # `subset` are keyed by their layers, so each computes its own
    whole = build_report(Context(model=str(path), n=8)).to_json()
    named = build_report(Context(model=str(path), n=8, reuse="model-free", layers=(0, 1))).to_json()
    subset = build_report(Context(model=str(path), n=8, layers=(1,))).to_json()
    assert named["context"] == whole["context"] and named["context"]["layers"] is None

    def verdicts(doc):
        return {(c["id"], e["producer"]): (e["verdict"], e.get("counted_as")) for c in doc["claims"]
                for e in c["evidence"]}

    assert verdicts(named) == verdicts(whole)
    assert subset["context"]["layers"] == "1"  # a true subset stays one (the false case)


def _without_timings(doc):
    """A record's dict without when it ran and for how long (``timestamp``, ``seconds`` at any depth): what two
    runs of it must share."""
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k not in ("seconds", "timestamp")}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


#: model-free producers cheap enough for tier 1 (a Coq proof read from its cache, a small exact search); the slow
#: tier compares every one
CHEAP_MODEL_FREE = ("coq-lem-rank-sum", "thm53-small")


@pytest.mark.parametrize("which", [CHEAP_MODEL_FREE, pytest.param(None, marks=pytest.mark.slow)],
                         ids=["cheap", "every"])
def test_a_model_free_producer_gives_the_same_records_whatever_the_model(which):
    """The runner keeps one record of a producer that reads no model for every model, layer subset and eps
    (runner._memo_key): sound only while each such producer's records are the same under all of them. Each runs
    here twice, memo off, without a model and on a layer subset of the bundled model with another eps."""
    from symtrans.runner import _memo_key, run_producer

    free = [p for ps in registry().values() for p in ps if not p.needs_model]
    assert len(free) > 10 and set(CHEAP_MODEL_FREE) <= {p.name for p in free}
    bare, model = Context(model=None, n=4, reuse=False), Context(model="default", n=4, layers=(0,), eps=1e-5,
                                                                  reuse=False)
    for p in free if which is None else [p for p in free if p.name in which]:
        a = [_without_timings(e.to_dict()) for e in run_producer(p, bare)]
        b = [_without_timings(e.to_dict()) for e in run_producer(p, model)]
        assert a and a == b, p.name
    # the false case: a producer that reads the model is kept per model and per layer subset
    reads = next(p for ps in registry().values() for p in ps if p.needs_model)
    on = Context(model="default", n=4)
    assert _memo_key(reads, on) != _memo_key(reads, Context(model="default", n=4, layers=(0,)))
    assert _memo_key(reads, on) != _memo_key(reads, Context(model=None, n=4))
    assert _memo_key(free[0], on) == _memo_key(free[0], Context(model=None, n=4))
