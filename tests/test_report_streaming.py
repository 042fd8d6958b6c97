"""Reports on large checkpoints: streamed weights give the in-memory verdicts; ``--layers`` states and caps its scope."""

import subprocess
import sys

import pytest

from symtrans import progress
from symtrans.context import Context

from symtrans.evidence import Evidence, Scope, Verdict
from symtrans.graph import ClaimGraph, assess, counted_verdict
from symtrans.numeric.fixtures import random_checkpoint


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A 3-layer random Llama-style checkpoint (grouped-query attention): the decoder's lean streamed trace."""
    path, _ = random_checkpoint(tmp_path_factory.mktemp("llama"), "llama", n_layers=3)
    return str(path)


def _records(report):
    """Every record's producer, verdict, reading, scope kind and summary, claim by claim, plus each verdict."""
    return {cid: (s.verdict, s.standing, [(e.evidence.producer, e.evidence.verdict, e.evidence.reading,
                                           e.evidence.scope and e.evidence.scope.kind, e.evidence.summary)
                                          for e in s.evidence])
            for cid, s in report.statuses.items()}


def _report(model, **kw):
    from symtrans.report import build_report

    return build_report(Context(model=model, n=12, reuse=False, **kw), parallel=False)


def test_streamed_report_equals_in_memory(tiny_llama):
    from symtrans.numeric.weights import StreamedWeights

    ctx = Context(model=tiny_llama, n=12, stream="on", reuse=False)
    assert isinstance(ctx.weights(), StreamedWeights)  # the streamed path really is taken
    assert not isinstance(Context(model=tiny_llama, stream="off").weights(), StreamedWeights)
    on, off = _report(tiny_llama, stream="on"), _report(tiny_llama, stream="off")
    assert on.model["streamed"] and not off.model["streamed"]
    assert "streamed one layer at a time" in on.scope_line and "loaded in memory" in off.scope_line
    a, b = _records(on), _records(off)
    assert a == b
    assert sum(len(r[2]) for r in a.values()) > 30  # the producers ran: the equality is not between two empty reports


def test_streamed_stacks_read_one_layer_and_refuse_whole_model(tiny_llama):
    import torch

    from symtrans.numeric.weights import load_model, stream_model

    s, w = stream_model(tiny_llama, keep=2), load_model(tiny_llama)
    assert s.W_K.shape == tuple(w.W_K.shape)  # K as stored: H_kv heads, like ModelWeights' stacks
    assert torch.equal(s.W_Q[2, 1], w.W_Q[2, 1]) and torch.equal(s.W_V[1][0], w.W_V[1][0])
    assert s.layer(1) is s.layer(1)  # kept: a producer returning to a layer does not re-read it
    s.layer(0), s.layer(2)
    assert sorted(s._kept) == [0, 2]  # at most two layers held
    with pytest.raises(AttributeError):
        s.W_O.reshape(3, -1, 32)  # a stack of every layer is never built by accident


def test_auto_streams_only_above_the_budget(tmp_path):
    import json

    from symtrans.arch import from_config, get_arch
    from symtrans.numeric.streaming import REPORT_STREAM_ABOVE_BYTES, float64_bytes, report_streams

    assert report_streams("default") is False
    assert float64_bytes(get_arch("bert-large")) < REPORT_STREAM_ABOVE_BYTES  # stays on the fast in-memory path
    # a 1B-class decoder (config only: nothing else is read to decide) streams
    cfg = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32,
           "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 2048,
           "rms_norm_eps": 1e-5, "hidden_act": "silu"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert float64_bytes(from_config(tmp_path)) > 2 * REPORT_STREAM_ABOVE_BYTES
    assert report_streams(str(tmp_path)) is True and report_streams(str(tmp_path), "off") is False


def test_layers_scope_in_every_record_and_header(tmp_path):
    from symtrans.report import build_report

    r = build_report(Context(model="default", n=12, layers=(0, 2), reuse=False), parallel=False)
    assert r.context["layers"] == "0,2"
    assert r.scope_line.startswith("layers 0,2 of the model's 6 only (--layers)")
    model_records = [e.evidence for s in r.statuses.values() for e in s.evidence
                     if (e.evidence.context or {}).get("weights_hash")]
    assert model_records
    for e in model_records:
        assert e.context["layers"] == "0,2", e.producer
        if e.verdict is not Verdict.NOT_RUN:
            assert e.scope is not None and "layers 0,2 only (--layers)" in e.scope.description, e.producer
            assert e.scope.kind != "model", e.producer  # never "every layer of the model"
    ran = {e.producer for e in model_records if e.verdict is not Verdict.NOT_RUN}
    assert {"residual-rank", "mha-rank-bound", "fibre-wo"} <= ran
    skipped = {e.producer: e.summary for e in model_records if e.verdict is Verdict.NOT_RUN}
    assert "not run under --layers 0,2" in skipped["depth-sweep-residual"]  # reads every layer: not on a subset
    # "contraction occurs at some layer" (model-some): its failure on two layers refutes nothing
    occurs = next(e for e in r.statuses["thm-rank-contraction"].evidence if e.evidence.producer == "contraction-occurs")
    assert occurs.evidence.verdict is Verdict.FAILS and occurs.counted_as is Verdict.INCONCLUSIVE
    assert "not refuted from a subset" in occurs.counted_note
    fibre = next(e for e in model_records if e.producer == "fibre-wo")
    assert [row["layer"] for row in fibre.details["layers"]] == [0, 2]  # the listed layers, by their own index
    from symtrans.report import write_report

    write_report(r, tmp_path, ("md", "html"))
    for name in ("report.md", "report.html"):
        assert "layers 0,2 of the model&#x27;s 6 only" in (tmp_path / name).read_text().replace("'", "&#x27;")


def test_subset_never_certifies_an_every_layer_statement():
    g = ClaimGraph()
    # thm-recovery/wo is about every layer of the model (quantifier model-every)
    claim = g.claims["thm-recovery"]
    reading = next(r for r in claim.readings if r.quantifier == "model-every")
    full = Evidence(claim="thm-recovery", producer="p", kind="symbolic", verdict="certified", summary="all layers",
                    reading=reading.id, scope=Scope("model", "every layer"))
    part = Evidence(claim="thm-recovery", producer="p", kind="symbolic", verdict="certified", summary="2 layers",
                    reading=reading.id, scope=Scope("model", "every layer"), context={"layers": "0,1"})
    assert counted_verdict(full, "model-every")[0] is Verdict.CERTIFIED  # the whole model: certified
    v, why = counted_verdict(part, "model-every")
    # the false case: capped at inconclusive, the subset named (issue 38: never 'supported' from a subset)
    assert v is Verdict.INCONCLUSIVE and "not established from a subset" in why and "0,1" in why
    st = assess(g, {"thm-recovery": [part]})["thm-recovery"]
    mine = next(rs for rs in st.readings if rs.id == reading.id)
    assert mine.verdict is Verdict.INCONCLUSIVE
    # a counterexample at a layer of the subset still refutes a statement about every layer
    bad = Evidence.from_dict({**part.to_dict(), "verdict": "fails"})
    assert counted_verdict(bad, "model-every")[0] is Verdict.FAILS
    # "some layer" is not refuted by a subset; a failure on every layer still is
    some = Evidence(claim="c", producer="p", kind="numeric", verdict="fails", summary="none of 2",
                    context={"layers": "0,1"})
    assert counted_verdict(some, "model-some")[0] is Verdict.INCONCLUSIVE
    assert counted_verdict(Evidence(claim="c", producer="p", kind="numeric", verdict="fails", summary="none"),
                           "model-some")[0] is Verdict.FAILS


@pytest.mark.parametrize("value, message", [
    ("0,x", "'x' is not a layer index or range"),
    ("3-1", "a range must go upwards"),
    ("0,9", "layer 9 is out of range (the model has 6 layers: 0-5)"),
    ("", "expected layer indices"),
])
def test_bad_layers_refused_in_one_line_before_any_load(tmp_path, value, message):
    out = subprocess.run([sys.executable, "-m", "symtrans", "report", "--layers", value, "--out",
                          str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = [line for line in out.stderr.strip().splitlines() if not _report_progress_line(line)]
    assert len(lines) == 1 and lines[0].startswith("symtrans: error: ") and message in lines[0], out.stderr
    assert not (tmp_path / "r").exists()  # nothing ran, nothing written


def _report_progress_line(line: str) -> bool:
    """True for the report command's own "starting" line or its heartbeat, the lines a piped ``symtrans report``
    may print before a refusal (progress.announce, then progress._beat under load); read by symtrans.progress,
    the one home of their format. Another command's line, a later step or an error line is not skipped."""
    return not progress.without_progress(line + "\n", command="report", what="starting")


def test_only_the_reports_own_progress_lines_are_skipped():
    assert _report_progress_line("[09:15:02] symtrans report: starting")
    assert _report_progress_line("[09:15:04] symtrans report: starting (still running, 2 s)")
    assert not _report_progress_line("symtrans: error: --layers '': expected layer indices")
    assert not _report_progress_line("[09:15:04] symtrans report: loading the model")
    assert not _report_progress_line("[09:15:04] symtrans report: starting (still running, 2 s) symtrans: error: x")
    assert not _report_progress_line("[9:15:04] symtrans report: starting")


def test_the_skipped_lines_are_the_ones_progress_writes():
    """The pattern above against the real announce and heartbeat output of symtrans.progress (fixed clock)."""
    import io
    import time

    from symtrans import progress

    err = io.StringIO()
    progress.configure(stream=err, clock=lambda: "09:00:00")
    try:
        progress.announce("report")
        deadline = time.monotonic() + 30  # the heartbeat comes HEARTBEAT_SECONDS after the line, every 0.25 s
        while "still running" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        progress.finish(discard=True)
        progress.configure()
    lines = err.getvalue().splitlines()
    assert any("still running" in line for line in lines), lines
    assert lines and all(_report_progress_line(line) for line in lines), lines
