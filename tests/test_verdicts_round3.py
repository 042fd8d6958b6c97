"""Issue 38, verdicts round 3: ties that do not chain, summaries that agree with their records, causal heads.

Each test builds its case (a bf16 copy of the bundled model, a W_O undecided at storage precision, a
small random decoder) and derives what a correct tool must say from the construction.
"""

import numpy as np
import pytest

import planted
from symtrans.evidence import Context, Verdict


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Every test of this module on one thread (tests/conftest.py)."""


# ------------------------------------------------------------------ claim-align: ties per pair
def test_ties_do_not_chain():
    """Values 0.01 apart with bands of 0.006 tie with their neighbours only: the ends stay ordered."""
    from symtrans.checks.sec6 import all_tied, pair_ties, pairwise_ranks

    a = np.linspace(0.365, 0.779, 42)  # steps of 0.0101, bands 0.006 each: neighbours overlap, nothing else
    ranks = pairwise_ranks(a, 0.006)
    assert not all_tied(a, 0.006) and not pair_ties(a, 0.006)[0, -1]
    assert np.all(np.diff(ranks) > 0)  # the order survives; chained ties made all 42 one group (all equal)
    exact = pairwise_ranks(np.array([2.0, 1.0, 2.0]), 0.0)
    assert exact.tolist() == [2.5, 1.0, 2.5]  # exact ties: the usual average ranks


def test_bf16_copy_of_the_bundled_model_is_not_one_tie():
    """All 72 alphas (0.37 to 0.78) of a bfloat16 copy merged into one group: claim-align said not-applicable."""
    from symtrans.checks.sec6 import check_alignment, pair_ties

    w = planted.rounded(planted.base(), "bfloat16", "bf16-copy")
    (e,) = check_alignment(Context(model="default", n=16).preload(w))
    assert e.verdict is not Verdict.NOT_APPLICABLE, e.summary
    alpha, band = np.asarray(e.details["alpha"]), np.asarray(e.details["bands"]["alpha_band"])
    lo, hi = int(alpha.argmin()), int(alpha.argmax())
    # the construction's claim, from the bands themselves: the extremes are farther apart than their bands
    assert alpha[hi] - alpha[lo] > band[hi] + band[lo]
    assert not pair_ties(alpha[[lo, hi]], band[[lo, hi]])[0, 1]
