"""prop-5.4's non-affinity half and lem-variety: evidence that counts, and a false case each.

prop-5.4: the global map of the attention-plus-residual stack (no MLP, no LN) is not affine; with W_O = 0 the
stack is X + sum b_O, affine, and the check must fail. lem-variety: V_r = {rank <= r} is proper, certified by
prop-5.1's block witness; points of V_r fed as witnesses must not certify it.
"""

from __future__ import annotations

import planted
import pytest
from symtrans.context import Context
from symtrans.evidence import Verdict
from symtrans.runner import run_producers


def _nonaffine(weights=None):
    ctx = Context(model="default", n=8)
    if weights is not None:
        ctx.preload(weights)
    return [e for e in run_producers("prop-5.4", ctx) if e.producer == "global-non-affine"]


def test_prop54_global_map_is_not_affine_on_the_bundled_model():
    (ev,) = _nonaffine()
    assert ev.verdict is Verdict.SUPPORTED and ev.counted and ev.margin >= 1
    assert ev.dtype == "float64" and "rounding" in ev.tolerance.reason
    # an independent route: the first-order remainder of the same stack shrinks quadratically (the sanity record)
    (jac,) = [e for e in run_producers("prop-5.4", Context(model="default", n=8)) if e.producer == "residual-jacobian"]
    assert jac.details["remainder_ratio"] > 10 ** 1.5


def test_prop54_fails_when_wo_is_zero():
    (ev,) = _nonaffine(planted.build("zero-wo"))
    assert ev.verdict is Verdict.FAILS and ev.margin <= -1
    assert max(ev.details["second_differences"]) <= ev.tolerance.value


def test_prop54_is_no_longer_not_run():
    from symtrans.graph import count_records

    status = count_records(run_producers("prop-5.4", Context(model="default", n=8)))["prop-5.4"]
    assert status.verdict is Verdict.SUPPORTED


def test_lem_variety_certified_by_the_prop51_witness():
    from symtrans.producers.sec5 import lem_variety

    (ev,) = lem_variety(Context(model=None))
    assert ev.verdict is Verdict.CERTIFIED and ev.scope.kind == "all-sizes"
    assert [p.name for p in __import__("symtrans.runner").runner.producers_for("lem-variety")] == ["variety-proper"]


def test_lem_variety_refuses_witnesses_inside_the_variety():
    from symtrans.certify.linear import canonical
    from symtrans.producers.sec5 import lem_variety

    (ev,) = lem_variety(Context(model=None), witnesses=lambda n, d, r: canonical(n, d, r))  # rank r: inside V_r
    assert ev.verdict is not Verdict.CERTIFIED and ev.details["failed_at"]


def test_prop54_second_differences_batch_equals_one_pass_per_input():
    """The batched stack (every probe in one pass) against each probe through the stack on its own."""

    from symtrans.numeric import load_model
    from symtrans.numeric.forward import embed, random_ids
    from symtrans.producers.sec5 import _stack, nonaffine_directions, second_differences

    w = load_model("default")
    X = embed(w, random_ids(w, 8, 0))
    got = second_differences(w, X, 3, directions=2, seed=5)
    F0 = _stack(w, X, 3, False)
    want = []
    for D in nonaffine_directions(w, X, 2, seed=5):  # the same probes, each input through the 2-D (one sequence) path
        second = _stack(w, X + D, 3, False) + _stack(w, X - D, 3, False) - 2 * F0
        want.append(float(second.abs().max()) / float(F0.abs().max()))
    assert got == [pytest.approx(x, rel=1e-9) for x in want] and min(want) > 1e-3
