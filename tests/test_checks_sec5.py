"""§5 checks: residual rank, Dong's collapse vs residuals, the residual Jacobian; each can fail."""

import math

import pytest
import torch

from _checks_util import broken, context
from symtrans.checks import sec5
from symtrans.evidence import Verdict


@pytest.fixture(scope="module")
def w(default_model):
    return default_model  # tests/conftest.py: loaded once per session


def test_thm_5_3_supported_on_real_weights_and_fails_with_w_o_zeroed(w):
    ev = sec5.check_thm_5_3(context(w, n=10))[0]
    assert ev.verdict is Verdict.SUPPORTED, ev.summary
    dead = broken(w, W_O=torch.zeros_like(w.W_O))  # MHA(X) = 0: the residual adds nothing
    bad = sec5.check_thm_5_3(context(dead, n=10))[0]
    assert bad.verdict is Verdict.FAILS and bad.counterexample["rank_F"] == bad.counterexample["rank_X"]


def test_mha_in_rowspace_of_x_fails():
    # an "attention" whose output is X M with M a multiple of the identity lies in rowspace(X)
    X = torch.randn(8, 6, dtype=torch.float64)
    cases = sec5.residual_rank_cases(X, lambda B: 0.5 * B, [1, 3], seed=0)
    assert all(not c["increase"] and c["decisive"] for c in cases)


def test_prop_5_1_real_supported_and_degenerate_perturbation_fails(w):
    assert sec5.check_prop_5_1(context(w, n=10))[0].verdict is Verdict.SUPPORTED
    X = torch.randn(8, 6, dtype=torch.float64)
    cases = sec5.residual_rank_cases(X, lambda B: -0.25 * B, [2], seed=1)  # B not absolutely continuous
    ev = sec5._rank_evidence(context(w), "prop-5.1", "t", cases, "rank(A + B) > rank(A)", {})
    assert ev.verdict is Verdict.FAILS


def test_depth_sweep_pure_attention_collapses_residuals_do_not(w):
    ctx = context(w, n=12)
    dong = sec5.check_dong(ctx)[0]
    res = sec5.check_sweep_residual(ctx)[0]
    assert dong.verdict is Verdict.SUPPORTED and res.verdict is Verdict.SUPPORTED
    ratios = ctx.cache["sec5-sweep"]
    assert ratios["pure-attention"][-1] < 1e-8 < min(ratios["attention+residual"])


def test_depth_sweep_verdicts_fail_on_opposite_series(w):
    ctx = context(w, n=12)
    flat = [0.9] * (sec5.SWEEP_DEPTH + 1)
    falling = [10.0 ** (-k) for k in range(sec5.SWEEP_DEPTH + 1)]
    ctx.cache["sec5-sweep"] = {"pure-attention": flat, "attention+residual": falling,
                               "attention+residual+LN": flat, "full-block": flat}
    assert sec5.check_dong(ctx)[0].verdict is Verdict.FAILS
    assert sec5.check_sweep_residual(ctx)[0].verdict is Verdict.FAILS


def test_jacobian_formula_matches_autograd_and_misses_layernorm(w):
    from symtrans.numeric import encode

    X = encode(w, n=5, layers=0).embeddings
    good = sec5.jacobian_check(w, X, layers=2, directions=2)
    assert good["max_rel_error"] < sec5.JACOBIAN_TOL
    assert 50 < good["remainder_ratio"] < 200  # second-order remainder ~ t^2: not affine
    bad = sec5.jacobian_check(w, X, layers=1, directions=2, with_ln=True)  # I + D[MHA] is not LN's Jacobian
    assert bad["max_rel_error"] > 1e-3
    assert sec5.check_prop_5_4(context(w, n=6))[0].verdict is Verdict.SUPPORTED
    assert math.isfinite(sec5.check_prop_5_4(context(w, n=6))[0].margin)


def test_mlp_role_span_and_linearity_on_real_and_broken_weights(w):
    span, lin = sec5.check_mlp_role(context(w, n=16))
    # real weights: attention + residual alone leave the span of the embeddings (W_V W_O maps out of it)
    assert span.verdict is Verdict.FAILS and span.details["new_directions"] > 0
    assert lin.verdict is Verdict.SUPPORTED
    assert lin.details["superposition_error_no_mlp"] < 1e-12 < lin.details["superposition_error_mlp"]
    # with W_O zeroed, MHA adds nothing: the stack stays in the span, and the check reports it
    still, _ = sec5.check_mlp_role(context(broken(w, W_O=torch.zeros_like(w.W_O)), n=16))
    assert still.verdict is Verdict.SUPPORTED and still.details["new_directions"] == 0
    # with the FFN's first matrix zeroed the "MLP" adds nothing, so it cannot add non-linearity: fails
    _, flat = sec5.check_mlp_role(context(broken(w, W_in=torch.zeros_like(w.W_in)), n=16))
    assert flat.verdict is Verdict.FAILS
