"""Layer subsets (``--layers``): every producer runs on any subset, and an every-layer reading never overclaims.

Issue 38: ``report --layers 2`` crashed ``ln-real`` (IndexError: its n > d_model case took layer 0 of a
one-layer forward while the subset listed layer 2), and an every-layer reading was ``supported`` from one
layer. The rule lives in :func:`symtrans.graph.counted_verdict`: from a subset, a ``model-every`` reading
is at most ``inconclusive`` (the subset named), while a counterexample at a listed layer still refutes it.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symtrans.context import Context

from symtrans.evidence import Verdict
from symtrans.graph import ClaimGraph, assess
from symtrans.runner import producers_for, run_producer

L = 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 4-layer BERT (transformers, d_model 32, 4 heads): small enough to run every producer often."""
    from symtrans.numeric import load_model
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path_factory.mktemp("tiny-bert"), "bert", n_layers=L, d_model=32, n_heads=4,
                                d_ff=64, positions=48)
    return load_model(path)


def _run(w, layers, n=12, skip=("ffn-flop-share", "residual-jacobian")):
    graph = ClaimGraph()
    ctx = Context(model="default", n=n, layers=layers).preload(w)
    evidence, errors = {}, []
    for cid in graph.topological_order():
        for p in producers_for(cid):
            if not p.needs_model or p.name in skip:
                continue
            try:
                evidence.setdefault(cid, []).extend(run_producer(p, ctx))
            except Exception as err:  # noqa: BLE001 - every producer that raised is reported
                errors.append(f"{cid}/{p.name} raised {type(err).__name__}: {err}")
    return evidence, errors, assess(graph, evidence, weights_hash=w.weights_hash)


def _every_layer_readings(statuses):
    for cid, st_ in statuses.items():
        for r in st_.readings:
            if r.reading is not None and r.reading.quantifier == "model-every":
                yield r


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.integers(0, L - 1), min_size=1, max_size=L - 1))
def test_every_producer_runs_on_any_subset_and_never_overclaims(tiny, subset):
    layers = tuple(sorted(subset))
    evidence, errors, statuses = _run(tiny, layers)
    assert not errors, errors
    for r in _every_layer_readings(statuses):
        assert r.verdict not in (Verdict.SUPPORTED, Verdict.CERTIFIED), (layers, r.id, r.verdict)
        for e in r.evidence:
            if e.evidence.verdict in (Verdict.SUPPORTED, Verdict.CERTIFIED) and e.evidence.counted:
                assert e.counted_as is Verdict.INCONCLUSIVE
                assert ",".join(map(str, layers)) in e.counted_note  # the subset is named


def test_ln_real_on_one_layer_of_the_bundled_model():
    """``--layers 2`` on the bundled model: the n > d_model case reads layer 2 (was an IndexError)."""
    from symtrans.producers.sec4 import check_ln_real

    recs = check_ln_real(Context(model="default", n=8, layers=(2,)))
    assert len(recs) == 2
    assert all("layer 2" in name for name in recs[1].details["cases"])


def test_a_counterexample_at_a_listed_layer_still_refutes():
    """thm-7.3/wo on the bundled model fails at every layer (W_O injective): from one layer it still fails."""
    from symtrans.producers.sec7 import check_nonidentifiability

    ctx = Context(model="default", n=8, layers=(3,))
    recs = [e for e in check_nonidentifiability(ctx) if e.reading == "thm-7.3/wo"]
    from symtrans.runner import _tag  # the runner's own tagging: context layers and the narrowed scope

    p = next(p for p in producers_for("thm-7.3") if p.name == "head-identifiability")
    recs = [_tag(p, ctx, e) for e in recs]
    st_ = assess(ClaimGraph(), {"thm-7.3": recs}, weights_hash=recs[0].weights_hash)["thm-7.3"]
    assert {r.id: r.verdict for r in st_.readings}["thm-7.3/wo"] is Verdict.FAILS


def test_a_model_producer_must_honour_layers_or_say_why_not():
    """The decorator refuses a model producer that neither reads ``layer_indices`` nor states why it cannot."""
    from symtrans.evidence import producer

    with pytest.raises(ValueError, match="whole_model"):
        producer("demo-claim", kind="numeric", name="silent", needs_model=True)(lambda ctx: [])
    with pytest.raises(ValueError, match="whole_model"):  # blank is no reason
        producer("demo-claim", kind="numeric", name="blank", needs_model=True, whole_model="  ")(lambda ctx: [])
    ok = producer("demo-claim", kind="numeric", name="says", needs_model=True, whole_model="reads W_E whole")
    assert ok(lambda ctx: []).producer.whole_model == "reads W_E whole"
    assert producer("demo-claim", kind="numeric", name="subset", needs_model=True,
                    honours_layers=True)(lambda ctx: []).producer.whole_model == ""


def test_every_whole_model_producer_gives_its_own_reason_under_layers():
    """Under ``--layers`` each producer that cannot run on a subset is not-run with its registered reason."""
    from symtrans.runner import registry

    ctx = Context(model="default", n=8, layers=(2, 3))
    whole = [p for ps in registry().values() for p in ps if p.needs_model and not p.honours_layers]
    assert whole  # the report has such producers: the check below is not vacuous
    reasons = set()
    for p in whole:
        (rec,) = run_producer(p, ctx)
        assert rec.verdict is Verdict.NOT_RUN, p.name
        assert rec.summary.startswith("not run under --layers 2,3: ") and rec.summary.endswith(p.whole_model)
        assert "it cannot run on a layer subset: " + p.whole_model in rec.summary
        reasons.add(p.whole_model)
    assert len(reasons) >= 8  # precise reasons, not one generic phrase for all (13 producers, 9 reasons today)
