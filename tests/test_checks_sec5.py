"""§5 checks: residual rank, Dong's collapse vs residuals, the residual Jacobian, the MLP's role.

Every check is fed a false case and seen to fail; violated hypotheses give
``not-applicable``; degenerate weights never raise or produce NaN.
"""

import json
import math

import pytest
import torch

from _checks_util import broken, context
from symtrans.producers import sec5
from symtrans.evidence import Verdict
from symtrans.graph import counted_verdict


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Every test of this module on one thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def w(default_model):
    return default_model  # tests/conftest.py: loaded once per session


def _well_formed(ev):
    """Every numeric verdict carries dtype, tolerance with reason, margin (or says why not) and strict JSON."""
    assert ev.dtype and ev.tolerance is not None and ev.tolerance.reason
    if ev.verdict in (Verdict.SUPPORTED, Verdict.FAILS):
        assert ev.margin is not None and math.isfinite(ev.margin) and ev.margin_meaning
    json.dumps(ev.to_dict(), allow_nan=False)


def test_thm_5_3_supported_on_real_weights_not_applicable_with_w_o_zeroed(w):
    ev = sec5.check_thm_5_3(context(w, n=10))[0]
    assert ev.verdict is Verdict.SUPPORTED, ev.summary
    assert [h.holds for h in ev.hypothesis_checks] == [True, True]
    _well_formed(ev)
    dead = broken(w, W_O=torch.zeros_like(w.W_O))  # MHA(X) = 0: weights in the excluded null set
    bad = sec5.check_thm_5_3(context(dead, n=10))[0]
    assert bad.verdict is Verdict.NOT_APPLICABLE and "W_V^h W_O^h" in bad.violated_hypothesis
    _well_formed(bad)


def test_residual_rank_false_case_fails_and_counts_inconclusive_on_a_generic_claim(w):
    # an "attention" whose output is a multiple of X never raises the rank: the check must say fails
    X = torch.randn(8, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    cases = sec5.residual_rank_cases(X, lambda B: -0.5 * B, [1, 3], seed=0)
    assert all(c["decided"] and not c["increase"] and c["rank_deficient"] for c in cases)
    ev = sec5._rank_evidence(context(w), "thm-5.3", "t", cases, "rank(X + MHA(X)) > rank(X)", {})
    assert ev.verdict is Verdict.FAILS and ev.counterexample["rank_F"] == ev.counterexample["rank_X"]
    _well_formed(ev)
    # thm-5.3 is generic: one instance cannot refute it (scope 'instances')
    assert counted_verdict(ev, "generic")[0] is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("nested", [True, False])
def test_product_svdvals_match_the_svd_of_the_product_and_see_a_dependent_factor(nested):
    g = torch.Generator().manual_seed(5)
    n, d = 9, 7
    top = torch.randn(5, d, generator=g, dtype=torch.float64)
    pairs = []
    for r in (1, 3, 5):
        B = top[:r] if nested else torch.randn(r, d, generator=g, dtype=torch.float64)
        pairs.append((torch.randn(n, r, generator=g, dtype=torch.float64), B))
    for (A, B), s in zip(pairs, sec5.product_svdvals(pairs, min(n, d))):
        ref = torch.linalg.svdvals(A @ B)  # an independent route: the SVD of the formed product
        r = B.shape[0]
        assert len(s) == min(n, d) and torch.allclose(s[:r], ref[:r], rtol=1e-12, atol=0)
        assert s[r:].abs().max() == 0 and ref[r:].max() < 1e-13 * ref[0]
    # false case: a factor with dependent columns makes the product's rank less than r; the values show it
    A = torch.randn(n, 3, generator=g, dtype=torch.float64)
    A[:, 2] = A[:, 0] - 2 * A[:, 1]
    s = sec5.product_svdvals([(A, top[:3])], min(n, d))[0]
    assert s[1] > 1e-3 * s[0] and s[2] < 1e-14 * s[0]


def test_full_rank_inputs_are_not_applicable_not_fails(w):
    X = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    cases = [dict(c, rank_deficient=False, decided=False) for c in sec5.residual_rank_cases(X, lambda B: 0 * B, [1], 0)]
    ev = sec5._rank_evidence(context(w), "thm-5.3", "t", cases, "s", {})
    assert ev.verdict is Verdict.NOT_APPLICABLE


def test_prop_5_1_real_supported_and_degenerate_perturbation_fails(w):
    ev = sec5.check_prop_5_1(context(w, n=10))[0]
    assert ev.verdict is Verdict.SUPPORTED
    _well_formed(ev)
    X = torch.randn(8, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    cases = sec5.residual_rank_cases(X, lambda B: -0.25 * B, [2], seed=1)  # B not absolutely continuous
    bad = sec5._rank_evidence(context(w), "prop-5.1", "t", cases, "rank(A + B) > rank(A)", {})
    assert bad.verdict is Verdict.FAILS


def test_depth_sweep_pure_attention_collapses_residuals_do_not(w):
    ctx = context(w, n=12)
    dong = sec5.check_dong(ctx)[0]
    res = sec5.check_sweep_residual(ctx)[0]
    assert dong.verdict is Verdict.SUPPORTED and res.verdict is Verdict.SUPPORTED
    ratios = ctx.cache["sec5-sweep"]
    assert ratios["pure-attention"][-1] < 1e-8 < min(ratios["attention+residual"])
    for ev in (dong, res):
        _well_formed(ev)


def _series(ctx, **overrides):
    flat = [0.9] * (sec5.SWEEP_DEPTH + 1)
    falling = [10.0 ** (-k) for k in range(sec5.SWEEP_DEPTH + 1)]
    base = {"pure-attention": falling, "attention+residual": flat, "attention+residual+LN": flat,
            "full-block": flat, "attention+MLP": flat}
    base.update({k: (flat if v == "flat" else falling if v == "falling" else v) for k, v in overrides.items()})
    ctx.cache["sec5-sweep"] = base
    return ctx


def test_depth_sweep_verdicts_fail_on_opposite_series(w):
    ctx = _series(context(w, n=12), **{"pure-attention": "flat", "attention+residual": "falling"})
    assert sec5.check_dong(ctx)[0].verdict is Verdict.FAILS
    assert sec5.check_sweep_residual(ctx)[0].verdict is Verdict.FAILS
    assert sec5.check_mlp_not_necessary(ctx)[0].verdict is Verdict.FAILS


def test_immediate_collapse_and_overflow_are_inconclusive_not_errors(w):
    now = [0.9] + [1e-16] * sec5.SWEEP_DEPTH
    ctx = _series(context(w, n=12), **{"pure-attention": now})
    ev = sec5.check_dong(ctx)[0]
    assert ev.verdict is Verdict.INCONCLUSIVE and "degenerate" in ev.summary
    _well_formed(ev)
    nan = [0.9, 0.5] + [math.nan] * (sec5.SWEEP_DEPTH - 1)
    ctx = _series(context(w, n=12), **{"pure-attention": nan, "attention+residual": nan})
    assert sec5.check_dong(ctx)[0].verdict is Verdict.INCONCLUSIVE
    assert sec5.check_sweep_residual(ctx)[0].verdict is Verdict.INCONCLUSIVE
    for ev in sec5.check_dong(ctx) + sec5.check_sweep_residual(ctx):
        json.dumps(ev.to_dict(), allow_nan=False)


def test_uniform_attention_runs_every_sec5_check_without_error_or_nan(w):
    flat = broken(w, W_Q=torch.zeros_like(w.W_Q), W_K=torch.zeros_like(w.W_K))
    ctx = context(flat, n=12)
    evs = (sec5.check_dong(ctx) + sec5.check_sweep_residual(ctx) + sec5.check_mlp_sufficient(ctx)
           + sec5.check_thm_5_3(ctx))
    for ev in evs:
        json.dumps(ev.to_dict(), allow_nan=False)
    assert evs[0].verdict is Verdict.INCONCLUSIVE  # immediate collapse: no rate to test
    assert evs[2].verdict is Verdict.NOT_APPLICABLE  # degenerate attention: nothing for the MLP to act on


def test_jacobian_formula_matches_autograd_and_misses_layernorm(w):
    from symtrans.numeric import encode

    X = encode(w, n=5, layers=0).embeddings
    good = sec5.jacobian_check(w, X, layers=2, directions=2)
    assert good["max_rel_error"] < sec5.JACOBIAN_TOL
    assert 50 < good["remainder_ratio"] < 200  # second-order remainder ~ t^2: not affine
    bad = sec5.jacobian_check(w, X, layers=1, directions=2, with_ln=True)  # I + D[MHA] is not LN's Jacobian
    assert bad["max_rel_error"] > 1e-3
    ev = sec5.check_prop_5_4(context(w, n=6))[0]
    assert ev.verdict is Verdict.SUPPORTED
    _well_formed(ev)


def test_mlp_span_reading_fails_on_real_weights_holds_when_attention_adds_nothing(w):
    ev = sec5.check_mlp_span(context(w, n=16))[0]
    assert ev.reading is None or ev.reading == "cor-mlp-role/span"
    # real weights: attention + residual alone leave the span of the embeddings (W_V W_O maps out of it)
    assert ev.verdict is Verdict.FAILS and ev.details["new_directions"] > 0
    _well_formed(ev)
    # independent route: the component of X_L outside rowspace(X0) is a large fraction of X_L
    assert ev.details["energy_outside_span"] > 0.1
    still = sec5.check_mlp_span(context(broken(w, W_O=torch.zeros_like(w.W_O)), n=16))[0]
    assert still.verdict is Verdict.SUPPORTED and still.details["new_directions"] == 0


def test_mlp_span_is_not_decided_by_a_cut_the_tested_states_set(w):
    """A probe: the bundled model moved by a random element of G (seed 1; the same function) makes X_L, through the
    paper's attention and residual without LayerNorm, 2.7e18 against X0's 80. rank [X0; X_L] cut relative to the
    joint matrix put every direction of X0 below the cut, X_L alone gave the same rank as X0, and the reading said
    "supported" with 99.7% of X_L outside the span. The part of X_L outside X0's row space, cut relative to X_L, is
    decided: it fails, as on the unmoved model. (The false case, attention adding nothing, is supported above.)"""
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, random_element
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(w.arch)
    moved = weights_from_blocks(w, apply_steps(spec, model_blocks(w), random_element(spec, w.n_layers, 1)))
    ev = sec5.check_mlp_span(context(moved, n=16))[0]
    assert ev.verdict is Verdict.FAILS and ev.details["energy_outside_span"] > 0.5, ev.summary
    assert ev.details["new_directions"] > 0
    _well_formed(ev)


def test_the_residual_sweeps_can_fail_so_they_are_counted(w):
    """A probe: both residual depth sweeps (thm-5.3's consequence, cor-mlp-role's 'not necessary') were sanity
    checks, "it cannot fail on any legal input", and so counted as not-run. On the bundled model moved by G's
    attention input hyperplane (the same function through LayerNorm and the biases, which the paper's form drops)
    both collapse: a legal input on which they fail. They are counted now; the readings are about the stored
    parametrisation and generic, so that instance does not refute them. The unmoved model: supported."""
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, random_element
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(w.arch)
    steps = random_element(spec, w.n_layers, 2, factors=["attention-input-hyperplane"])
    moved = weights_from_blocks(w, apply_steps(spec, model_blocks(w), steps))
    for check in (sec5.check_mlp_not_necessary, sec5.check_sweep_residual):
        real, off = check(context(w, n=32))[0], check(context(moved, n=32))[0]
        assert real.counted and off.counted
        assert real.verdict is Verdict.SUPPORTED, real.summary
        assert off.verdict is Verdict.FAILS, off.summary
        assert counted_verdict(off, "generic")[0] is not Verdict.FAILS  # an instance does not refute it


def test_mlp_collapse_readings_on_real_weights_and_false_cases(w):
    ctx = context(w, n=12)
    nn_ev = sec5.check_mlp_not_necessary(ctx)[0]
    suff = sec5.check_mlp_sufficient(ctx)[0]
    assert nn_ev.verdict is Verdict.SUPPORTED
    # the MLP acts row by row: attention + MLP without residual still collapses on the real model
    assert suff.verdict is Verdict.FAILS and suff.scope.kind == "open-set"
    assert all(h.holds for h in suff.hypothesis_checks)
    assert counted_verdict(suff, "generic")[0] is Verdict.FAILS
    for ev in (nn_ev, suff):
        _well_formed(ev)
    # a series where attention + MLP stays apart while pure attention collapses: supported
    ctx2 = _series(context(w, n=12))
    assert sec5.check_mlp_sufficient(ctx2)[0].verdict is Verdict.SUPPORTED
    # no MLP at all: the sufficiency hypothesis is violated
    none = broken(w, W_in=torch.zeros_like(w.W_in), W_out=torch.zeros_like(w.W_out))
    na = sec5.check_mlp_sufficient(context(none, n=12))[0]
    assert na.verdict is Verdict.NOT_APPLICABLE and "MLP" in na.violated_hypothesis


def test_cor_mlp_role_readings_have_paper_wording_and_every_producer_a_reading():
    from proofs import get_claim
    from symtrans.runner import producers_for

    claim = get_claim("cor-mlp-role")
    ids = {r.id for r in claim.readings}
    assert ids == {"cor-mlp-role/span", "cor-mlp-role/collapse-not-necessary", "cor-mlp-role/collapse-sufficient"}
    for r in claim.readings:  # each reading quotes the paper's words it formalises
        parts = [p.strip() for p in r.paper_wording.replace("[the MLP is]", "").split("...") if p.strip()]
        assert parts and all(p in claim.statement for p in parts), r.id
    assert {p.reading for p in producers_for("cor-mlp-role") if p.kind == "numeric"} <= ids
    for cid, q in (("prop-5.1", "generic"), ("thm-5.3", "generic"), ("prop-5.4", "universal"),
                   ("thm-4.2", "universal"), ("lit-dong", "model-every")):
        assert get_claim(cid).quantifier == q and not get_claim(cid).readings


def test_verdicts_do_not_depend_on_the_seed(w):
    funcs = (sec5.check_prop_5_1, sec5.check_thm_5_3, sec5.check_dong, sec5.check_sweep_residual,
             sec5.check_mlp_span, sec5.check_mlp_not_necessary, sec5.check_mlp_sufficient)
    seen = {}
    for seed in (0, 1):
        ctx = context(w, n=12)
        ctx.seed = seed
        seen[seed] = [ev.verdict for f in funcs for ev in f(ctx)]
    assert seen[0] == seen[1]


@pytest.mark.slow
def test_verdicts_identical_for_seeds_0_to_5(w):
    funcs = (sec5.check_prop_5_1, sec5.check_thm_5_3, sec5.check_dong, sec5.check_sweep_residual,
             sec5.check_prop_5_4, sec5.check_mlp_span, sec5.check_mlp_not_necessary, sec5.check_mlp_sufficient)
    seen = set()
    for seed in range(6):
        ctx = context(w, n=32)
        ctx.seed = seed
        seen.add(tuple(ev.verdict for f in funcs for ev in f(ctx)))
    assert len(seen) == 1, seen


def test_prop51_witness_certifies_at_the_seed_that_used_to_draw_a_rank_0_matrix():
    from symtrans.producers.sec5 import prop51
    from symtrans.context import Context

    ev = prop51(Context(model=None, seed=1))[0]  # seed 1 once drew a rank-0 'rank-1' matrix
    assert ev.verdict is Verdict.CERTIFIED
    assert all(r["rank_A"] == r["r"] and r["certified"] for r in ev.details["witnesses"])


@pytest.mark.slow
def test_prop51_witness_certifies_for_seeds_0_to_5():
    from symtrans.producers.sec5 import prop51
    from symtrans.context import Context

    assert {prop51(Context(model=None, seed=s))[0].verdict for s in range(6)} == {Verdict.CERTIFIED}


def test_factored_mha_equals_the_dense_forward_on_both_routes():
    """MHA(A B) from the factors equals mha_paper(A B) for r below, at and above d_v (both contraction orders)."""
    import torch

    from symtrans.producers.sec5 import mha_paper, mha_paper_factored, pack_qkv
    from symtrans.numeric import load_model

    lay = load_model("default").layer(4)
    g = torch.Generator().manual_seed(2)
    for r in (1, 31, 32, 33, 90):
        A = torch.randn(60, r, generator=g, dtype=torch.float64)
        B = torch.randn(r, 384, generator=g, dtype=torch.float64)
        dense = mha_paper(A @ B, lay)
        for packed in (lay, dict(lay, _packed_qkv=pack_qkv(lay))):
            got = mha_paper_factored(A, B, packed)
            assert float((got - dense).norm() / dense.norm()) < 1e-12, r
        top = torch.cat([B, torch.randn(5, 384, generator=g, dtype=torch.float64)])  # B nested in a larger draw
        sliced = mha_paper_factored(A, B, lay, P3=(top @ pack_qkv(lay))[:r])
        assert float((sliced - dense).norm() / dense.norm()) < 1e-12, r
    wrong = dict(lay, _packed_qkv=pack_qkv(dict(lay, W_Q=lay["W_K"])))  # a stale packing is caught by this test
    assert float((mha_paper_factored(A, B, wrong) - dense).norm() / dense.norm()) > 1e-3


def test_lockstep_sweep_equals_each_variant_run_alone():
    """The stacked depth sweep (shared projections) gives run_stack's states for every variant, to rounding."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.variants import run_stack

    w = load_model("default")
    X = encode(w, n=9, layers=0).embeddings
    together = sec5._lockstep(w, X, 4, tuple(sec5.VARIANTS))
    for v, (name, ln) in sec5.VARIANTS.items():
        alone = run_stack(w, X, name, depth=4, ln=ln)
        assert len(together[v]) == len(alone) == 5
        for a, b in zip(together[v], alone):
            assert float((a - b).abs().max()) <= 1e-12 * float(b.abs().max()), v
    # one layer's weights changed: every variant's states change from that step on (the weights are read)
    changed = w.copy()
    changed.W_O[1].mul_(3.0)
    other = sec5._lockstep(changed, X, 4, tuple(sec5.VARIANTS))
    assert all(not torch.equal(other[v][2], together[v][2]) for v in sec5.VARIANTS)


def test_a_vanishing_state_is_not_a_collapse():
    """A causal decoder's attention + MLP with the FFN's output scaled by 1e-40: the state shrinks by decades a
    layer and its rows stay apart (an encoder's would not: a vanishing state makes its attention uniform, which
    does collapse it). Its ratio is measured while the state is normal, then nan once it has underflowed,
    and the variant is not stepped further; the reading that a collapse would fail is not decided by it."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.numeric.measure import residual_ratio

    w = tiny_decoder("llama").copy()
    w.W_out.mul_(1e-40)
    X = encode(w, n=9, layers=0).embeddings
    ratios = sec5.depth_sweep(w, X, 12, ("attention+MLP", "attention+residual"))
    series = ratios["attention+MLP"]
    assert len(series) == 13 and len(ratios["attention+residual"]) == 13
    first_nan = next(k for k, r in enumerate(series) if r != r)
    assert first_nan >= 2 and all(r != r for r in series[first_nan:])  # underflowed: nan to the end
    assert min(series[:first_nan]) > 1e-3  # the rows never came together: no collapse before it
    assert all(r == r for r in ratios["attention+residual"])  # the other variant stepped on
    ctx = _series(context(load_model("default"), n=12), **{"attention+MLP": series})
    assert sec5.check_mlp_sufficient(ctx)[0].verdict is Verdict.INCONCLUSIVE
    # the false case: a normal state scaled to 1e-200 has the same ratio; the unscaled norm (the old ratio's)
    # underflows to 0 there and read 0/0 as ratio 0, a collapse
    h = X * 1e-200
    assert residual_ratio(h).ratio == pytest.approx(residual_ratio(X).ratio, rel=1e-14) and residual_ratio(X).ratio > 0.1
    assert float((h - h.mean(0)).norm()) == 0.0 == float(h.norm())


def test_sweep_records_name_the_dtype_they_ran_in_and_print_no_nan(w):
    """With ``--dtype float32`` the sweeps run in float32, and their records said float64 ("pure attention left
    float64's range"); where pure attention overflowed and the residual variants did not, the supported records read
    "pure attention ends at nan" in report.md (probe, random BERT). The records carry the weights' dtype now, and a
    non-finite ratio is said in words. False case: in float64 the records say float64 and print the finite ratio."""
    w32 = w.to(dtype="float32")
    nan = [0.9, 0.5] + [math.nan] * (sec5.SWEEP_DEPTH - 1)
    for weights, dt in ((w32, "float32"), (w, "float64")):
        ctx = _series(context(weights, n=12), **{"pure-attention": nan if dt == "float32" else "falling"})
        evs = sec5.check_dong(ctx) + sec5.check_sweep_residual(ctx) + sec5.check_mlp_not_necessary(ctx)
        assert [ev.dtype for ev in evs] == [dt] * 3
        assert all("nan" not in ev.summary for ev in evs), [ev.summary for ev in evs]
        dong, resid, mlp = evs
        if dt == "float32":
            assert "left float32's range" in dong.summary and dong.verdict is Verdict.INCONCLUSIVE
            for ev in (resid, mlp):
                assert ev.verdict is Verdict.SUPPORTED and "ends at no number (the stack left float32's range)" \
                    in ev.summary, ev.summary
        else:
            assert "ends at 1e-18" in resid.summary, resid.summary


def test_a_float32_sweep_at_its_rounding_floor_decides_no_collapse_either_way(w):
    """``--dtype float32`` runs the sweeps in float32, whose ratio floor (rows equal up to rounding: a few 1e-7) is
    above the collapse threshold 1e-8. On the bundled model pure attention reaches that floor (1.3e-7; 3e-16 in
    float64) and the report said lit-dong fails ("did not collapse") and mlp-prevents-collapse not-applicable ("pure
    attention collapses" violated), a false disagreement with the paper. A ratio at the dtype's floor now decides
    nothing; ratios well above it still do. False case: float64, whose floor is far below 1e-8, keeps its verdicts."""
    w32 = w.to(dtype="float32")
    ctx = context(w32, n=12)
    assert 1e-8 < sec5._sweep(ctx)["pure-attention"][-1] < 1e-6  # the real float32 floor, not a constructed series
    dong, mlp = sec5.check_dong(ctx)[0], sec5.check_mlp_sufficient(ctx)[0]
    for ev in (dong, mlp):
        assert ev.verdict is Verdict.INCONCLUSIVE and "float32's rounding floor" in ev.summary, ev.summary
        _well_formed(ev)
    for ev in (sec5.check_sweep_residual(ctx)[0], sec5.check_mlp_not_necessary(ctx)[0]):  # ratios near 0.1: decided
        assert ev.verdict is Verdict.SUPPORTED, ev.summary
    floor = [0.9, 0.5] + [1.3e-7] * (sec5.SWEEP_DEPTH - 1)  # a residual variant at float32's floor is no "no collapse"
    ctx = _series(context(w32, n=12), **{"attention+residual": floor})
    for ev in (sec5.check_sweep_residual(ctx)[0], sec5.check_mlp_not_necessary(ctx)[0]):
        assert ev.verdict is Verdict.INCONCLUSIVE and "float32's rounding floor" in ev.summary, ev.summary
    ctx = context(w, n=12)
    assert sec5.check_dong(ctx)[0].verdict is Verdict.SUPPORTED
    assert sec5.check_mlp_sufficient(ctx)[0].verdict is Verdict.FAILS
    ctx = _series(context(w, n=12), **{"attention+residual": [0.9, 0.5] + [1.3e-7] * (sec5.SWEEP_DEPTH - 1)})
    assert sec5.check_sweep_residual(ctx)[0].verdict is Verdict.SUPPORTED  # float64 resolves 1.3e-7 > 1e-8


def test_a_float32_sweep_fits_its_rate_above_its_own_floor(w):
    """The sweeps' rate fit (the slope in a supported lit-dong summary) kept every point above float64's floor 1e-13,
    so a float32 sweep fitted its rounding plateau (ratios of a few 1e-7) as if it were decay. It now drops the points
    at the float32 floor. False case: the same series in float64 keeps them (float64 resolves 1e-7)."""
    series = [1.0, 1e-1, 1e-2, 1e-3] + [2e-7] * (sec5.SWEEP_DEPTH - 3)  # falls a decade a layer, then the floor
    w32 = w.to(dtype="float32")
    fit32 = sec5._sweep_evidence(_series(context(w32, n=12), **{"pure-attention": series}), "lit-dong") \
        .details["fits"]["pure-attention"]
    fit64 = sec5._sweep_evidence(_series(context(w, n=12), **{"pure-attention": series}), "lit-dong") \
        .details["fits"]["pure-attention"]
    assert fit32["points"] == 4 and abs(fit32["log10_slope_per_layer"] + 1.0) < 1e-12, fit32
    assert "float32" in fit32["floor"]
    assert fit64["points"] == len(series) and fit64["log10_slope_per_layer"] > -0.9, fit64  # the plateau flattens it
