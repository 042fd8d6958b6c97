"""Issue 38, verdicts round 3: ties that do not chain, summaries that agree with their records, causal heads.

Each test builds its case (a bf16 copy of the bundled model, a W_O undecided at storage precision, a
small random decoder) and derives what a correct tool must say from the construction.
"""

import numpy as np
import pytest
from pathlib import Path

import planted
from symtrans.context import Context
from symtrans.evidence import Verdict


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Every test of this module on one thread (tests/conftest.py)."""


# ------------------------------------------------------------------ claim-align: ties per pair
def test_ties_do_not_chain():
    """Values 0.01 apart with bands of 0.006 tie with their neighbours only: the ends stay ordered."""
    from symtrans.producers.sec6 import all_tied, pair_ties, pairwise_ranks

    a = np.linspace(0.365, 0.779, 42)  # steps of 0.0101, bands 0.006 each: neighbours overlap, nothing else
    ranks = pairwise_ranks(a, 0.006)
    assert not all_tied(a, 0.006) and not pair_ties(a, 0.006)[0, -1]
    assert np.all(np.diff(ranks) > 0)  # the order survives; chained ties made all 42 one group (all equal)
    exact = pairwise_ranks(np.array([2.0, 1.0, 2.0]), 0.0)
    assert exact.tolist() == [2.5, 1.0, 2.5]  # exact ties: the usual average ranks


def test_bf16_copy_of_the_bundled_model_is_not_one_tie():
    """All 72 alphas (0.37 to 0.78) of a bfloat16 copy merged into one group: claim-align said not-applicable."""
    from symtrans.producers.sec6 import check_alignment, pair_ties

    w = planted.rounded(planted.base(), "bfloat16", "bf16-copy")
    (e,) = check_alignment(Context(model="default", n=16).preload(w))
    assert e.verdict is not Verdict.NOT_APPLICABLE, e.summary
    alpha, band = np.asarray(e.details["alpha"]), np.asarray(e.details["bands"]["alpha_band"])
    lo, hi = int(alpha.argmin()), int(alpha.argmax())
    # the construction's claim, from the bands themselves: the extremes are farther apart than their bands
    assert alpha[hi] - alpha[lo] > band[hi] + band[lo]
    assert not pair_ties(alpha[[lo, hi]], band[[lo, hi]])[0, 1]


# ------------------------------------------------------------------ summaries agree with their records
def test_exact_full_rank_does_not_say_recoverable_when_storage_leaves_it_undecided():
    """wo-near-cut: the stored float32 numbers have full rank exactly, the storage precision cannot decide."""
    from symtrans.producers.sec7 import recovery_real
    from symtrans.numeric.wo import wo_ranks

    ctx = Context(model="default", n=8).preload(planted.build("wo-near-cut"))
    (e,) = recovery_real(ctx)
    assert all(r.injective is None for r in wo_ranks(ctx))  # undecided at storage precision (the construction)
    assert "exactly" in e.summary and "not decided here" in e.summary
    assert "outputs are recoverable" not in e.summary
    (real,) = recovery_real(Context(model="default", n=8))
    assert "outputs are recoverable" in real.summary  # decided full at float32: it may say so


@pytest.fixture(scope="module")
def llama():
    from symtrans.numeric.fixtures import tiny_decoder

    return tiny_decoder("llama")


def test_no_summary_says_a_rank_is_below_itself(llama):
    """A decoder with n >= H d_v: rank MHA(X) = H d_v, never 'rank MHA(X) = 32 < 32'."""
    import re

    from symtrans.producers.sec6 import check_rank_contraction

    n = 40
    assert n >= llama.n_heads * llama.d_head
    for e in check_rank_contraction(Context(model="default", n=n).preload(llama)):
        for a, b in re.findall(r"= (\d+) < (\d+)", e.summary):
            assert int(a) < int(b), e.summary


def test_causal_attention_is_exactly_invertible(llama):
    """Saturated causal softmax: float64 sees A^h singular, yet it is triangular with a positive diagonal."""
    from _checks_util import broken
    from symtrans.producers.sec6 import check_prop_6_3, head_hypotheses

    w = broken(llama, W_Q=llama.W_Q * 1e4)  # scores ~1e4: most diagonal entries underflow in float64
    ctx = Context(model="default", n=40).preload(w)
    rows = head_hypotheses(ctx)
    assert all(r["A_causal"] and r["A_invertible"] is True for r in rows)
    assert any(not r["A_testable_float64"] for r in rows)  # the construction: float64 cannot test them
    for e in check_prop_6_3(ctx):
        assert not (e.verdict is Verdict.NOT_APPLICABLE and "A^h invertible" in (e.violated_hypothesis or "")), \
            e.summary
        assert e.verdict is not Verdict.FAILS


# ------------------------------------------------------------------ eps chosen by the user, 0 included
def test_eps_zero_runs_every_producer_and_is_stated():
    """The paper's eps-free LayerNorm on the bundled weights: no producer raises, every model record says eps = 0,
    and the map into the MLP loses the scale too: 2 directions per token (norm_map_fibre, from the construction)."""
    from symtrans.producers.sec7 import norm_map_fibre
    from symtrans.graph import ClaimGraph
    from symtrans.runner import producers_for, run_producer

    ctx = Context(model="default", n=8, eps=0)
    assert float(ctx.weights().arch.ln_eps) == 0.0
    errors, recs = [], []
    for cid in ClaimGraph().topological_order():
        for p in producers_for(cid):
            if not p.needs_model or p.name in ("ffn-flop-share", "residual-jacobian"):
                continue
            try:
                recs += run_producer(p, ctx)
            except Exception as err:  # noqa: BLE001 - every producer that raised is reported
                errors.append(f"{cid}/{p.name}: {type(err).__name__}: {err}")
    assert not errors, errors
    assert all(e.context.get("eps") == 0.0 and e.context.get("eps_source") == "--eps" for e in recs)
    fib = next(e for e in recs if e.producer == "fibre-ln")
    assert {r["fibre"] for r in fib.details["rows"]} == {norm_map_fibre("layernorm", 0.0, 384, 384)} == {2}
    assert "eps = 0 (--eps" in fib.summary
    default = Context(model="default", n=8)
    p = next(p for p in producers_for("thm-recovery") if p.name == "recovery-fibres-measured")
    (e,) = [e for e in run_producer(p, default) if e.producer == "fibre-ln"]
    assert e.context["eps"] == 1e-12 and e.context["eps_source"] == "checkpoint"  # the default: the checkpoint's
    assert {r["fibre"] for r in e.details["rows"]} == {1}


def test_report_at_eps_zero_writes_its_report(tmp_path, capsys):
    """``report --eps 0`` ran no producer: the report's processed-weights probe built G strictly, and G is not
    fully modelled for an eps-free norm, so the command stopped with that refusal. The probe reads G's modelled
    factors (the centring shift among them); the report states eps 0 and what was detected."""
    import json

    from symtrans.cli import main

    assert main(["report", "--n", "8", "--eps", "0", "--format", "json", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["model"]["eps"] == 0.0 and data["model"]["eps_source"] == "--eps" and data["errors"] == []
    assert data["model"]["processed"] == []  # the stored MiniLM: nothing centred, nothing folded
    fib = next(e for c in data["claims"] for e in c["evidence"] if e.get("reading") == "thm-7.3/mlp-input")
    assert fib["verdict"] == "supported" and "eps = 0" in fib["summary"]


def test_the_eps_free_norm_refuses_a_zero_row_instead_of_computing_on_nan(tmp_path):
    """At eps = 0 a norm divides a zero row by its zero scale (0/0). A Qwen3 whose layer-1 head 2 has W_Q = 0 feeds
    its per-head query norm zero rows: the forward was NaN from there on, and producers stated verdicts on it
    (thm-5.3's residual rank "supported", prop-5.1 "supported", claim-align and framework-9 decided). Now the
    forward refuses in words, so each such producer is an error, never a verdict; the checkpoint's eps runs."""
    import sys

    from symtrans.errors import SymtransError
    from symtrans.runner import producers_for, run_producer

    sys.path.insert(0, str(Path(__file__).parent))
    from _degenerate import planted_checkpoint

    w = planted_checkpoint("qwen3", ("zero-q",), tmp_path)
    p = next(p for p in producers_for("thm-5.3") if p.name == "residual-rank")
    with pytest.raises(SymtransError, match=r"eps-free RMSNorm \(eps = 0\) is not defined at a row that is 0"):
        run_producer(p, Context(model="default", n=8, eps=0.0).preload(w))
    recs = run_producer(p, Context(model="default", n=8).preload(w))  # the checkpoint's eps: defined, decided
    assert recs and all(e.context["eps"] > 0 and e.verdict is not Verdict.NOT_RUN for e in recs)


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "x"])
def test_eps_refused_in_one_line(bad):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "symtrans", "check", "--claims", "thm-7.3", "--n", "4", "--eps", bad],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]  # after the pipe's timestamped 'starting' lines, as elsewhere
    assert last.startswith("symtrans") and "error: " in last and "eps" in last and "Traceback" not in out.stderr


def test_eps_in_the_api():
    import symtrans

    ev = symtrans.check_claims(claims=["thm-7.3"], n=8, eps=0.0)
    assert {e.context["eps"] for e in ev if e.context} == {0.0}
    with pytest.raises(symtrans.SymtransError, match="^eps -1: must be a finite number"):
        symtrans.check_claims(claims=["thm-7.3"], n=8, eps=-1)


def test_a_sweep_stack_that_reaches_a_zero_row_at_eps_0_ends_and_the_rest_runs(tmp_path):
    """With ``--eps 0`` a random Qwen3's depth sweep raised: its attention + MLP stack (no residual) takes rows to 0,
    and the per-head QK norm at eps 0 divides 0 by 0 there. The sweep steps its variants together, so three report
    producers (thm-5.3's residual sweep, cor-mlp-role's two) were errors saying "the model has no value at eps 0 for
    this input" though the model's forward is defined, and ``check`` refused the whole run. That stack now ends
    there, as an underflowed one does, and the others go on. False case: the planted zero-query Qwen3's own forward
    at eps 0 still refuses (the test above)."""
    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.numeric.weights import load_model
    from symtrans.runner import producers_for, run_producer

    random_checkpoint(tmp_path / "q", "qwen3", seed=0)
    w = load_model(tmp_path / "q")
    p = next(p for p in producers_for("thm-5.3") if p.name == "depth-sweep-residual")
    (rec,) = run_producer(p, Context(model="default", n=16, eps=0.0).preload(w))
    assert rec.verdict is Verdict.SUPPORTED and rec.context["eps"] == 0.0, rec.summary
    ratios = rec.details["ratios"]
    assert "nan" in ratios["attention+MLP"]  # the stack that reached the zero row ended
    assert all(r != "nan" for v in ("attention+residual", "attention+residual+LN", "full-block") for r in ratios[v])


def test_an_encoder_sweep_stack_that_reaches_a_constant_row_at_eps_0_ends_and_the_rest_runs(tmp_path):
    """The post-LN encoders' sweep (``_lockstep``, which steps the variants together) raised where one variant's
    LayerNorm input was a constant row at eps 0, though the model's own forward is defined there: a 2-layer BERT
    whose layer-0 attention norm has gain 0 and a constant bias (its rows leave that norm constant) and whose
    layer-1 W_O is 0 with a constant b_O. The attention + residual + LN stack (no FFN to make the row vary again)
    reaches a constant row at its second step; the producer was an error, and ``check`` refused the run. That
    stack now ends there, as the decoders' stacks do, and the others go on. False case: the model's own forward at
    eps 0 is checked defined, and the stacks that never meet such a row keep every depth."""
    import torch

    from symtrans.numeric import encode
    from symtrans.numeric.fixtures import random_model
    from symtrans.numeric.weights import load_model
    from symtrans.runner import producers_for, run_producer

    m = random_model("bert", n_layers=2, seed=0)
    with torch.no_grad():
        m.encoder.layer[0].attention.output.LayerNorm.weight.zero_()
        m.encoder.layer[0].attention.output.LayerNorm.bias.fill_(0.5)
        m.encoder.layer[1].attention.output.dense.weight.zero_()
        m.encoder.layer[1].attention.output.dense.bias.fill_(0.25)
    m.save_pretrained(tmp_path / "b")
    w = load_model(tmp_path / "b")
    assert torch.isfinite(encode(Context(model=None, eps=0.0).with_eps(w), n=16).layers[-1].out).all()
    p = next(p for p in producers_for("thm-5.3") if p.name == "depth-sweep-residual")
    (rec,) = run_producer(p, Context(model="default", n=16, eps=0.0).preload(w))
    assert rec.context["eps"] == 0.0 and "divides 0 by 0" in rec.summary, rec.summary
    ratios = rec.details["ratios"]
    assert ratios["attention+residual+LN"][2:] == ["nan"] * (len(ratios["attention+residual+LN"]) - 2)
    assert all(r != "nan" for v in ("attention+residual", "full-block", "attention+MLP") for r in ratios[v])
