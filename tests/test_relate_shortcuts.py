"""The check's and the match's shortcuts never say more than the measure they stand in for.

Issue 35's speed work added paths that skip a measure where a cheaper reading settles it: ``_each_within`` (and
its slice bound ``_each_bounded``) lets a tensor's entries pass without :func:`worst_each`, and ``_two_nearest``
stands in for ``cdist``'s order. Each is fed
forged cases here (an entry rewritten by a few rounding units up to many, B's entry at 0 in a slice of large
ones, near-tied keys), and must agree with the full measure or defer to it: a shortcut that passes what the
measure refuses would be a check that cannot fail. The slice and entry measures read their order statistics in
NumPy (``_floor_scale``): they are checked here against torch's median and quantile, and the outlier rule of
:func:`worst_entries` against a count written out by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symtrans.group.relate import (ENTRY_OUTLIER, _each_within, _floor_scale, _Pair, _slice_norms, _two_nearest,
                                   worst_each, worst_entries)
from symtrans.precision import smallest_normal, unit_roundoff

FLOOR = smallest_normal("float64")
U32 = unit_roundoff("float32")


def _forged(seed: int, shape: tuple[int, ...], c: float, zero_entry: bool, scale: float) -> tuple[torch.Tensor, ...]:
    """B (float32 values held in float64), and g . A: B with one entry moved by ``c`` float32 units of its own
    size (of its slice's largest where ``zero_entry`` set B's entry to 0), the rest by a unit's rounding."""
    g = torch.Generator().manual_seed(seed)
    b = (torch.randn(shape, generator=g, dtype=torch.float64) * scale).float().double()
    i = int(torch.randint(0, b.numel(), (1,), generator=g))
    if zero_entry:
        b.view(-1)[i] = 0.0
    noise = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * U32 * b.abs()
    a = b + noise
    size = float(b.view(-1)[i].abs()) or float(b.abs().max())
    a.view(-1)[i] = b.view(-1)[i] + c * U32 * size
    return a, b


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 10 ** 6), c=st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 30.0, 1000.0]),
       zero_entry=st.booleans(), scale=st.sampled_from([1.0, 1e-3, 1e30, 1e-30]),
       rows=st.integers(1, 40), cols=st.integers(2, 40), over=st.sampled_from([(), (1,)]))
def test_entries_pass_the_shortcut_only_where_worst_each_passes_them(seed, c, zero_entry, scale, rows, cols, over):
    a, b = _forged(seed, (rows, cols), c, zero_entry, scale)
    tol = 4 * U32
    want = worst_each(a, b, FLOOR, over=over)["residual"]
    pair = _Pair(a, b)
    slices = (0, _slice_norms(pair.d, (0,))[0]) if over != (0,) else None
    got = _each_within(pair, over, FLOOR, tol, slices)
    if got:
        assert want <= tol, (want, tol)
    if want > tol * (1 + 1e-9):
        assert not got


def test_the_shortcut_is_not_vacuous():
    """On B's own rounding it passes (it saves the measure); on a rewritten entry it does not."""
    a, b = _forged(0, (30, 20), 0.5, False, 1.0)
    pair = _Pair(a, b)
    assert _each_within(pair, (), FLOOR, 4 * U32, (0, _slice_norms(pair.d, (0,))[0]))
    a, b = _forged(0, (30, 20), 100.0, True, 1.0)  # B's entry 0, g . A's 100 units of the slice's largest
    pair = _Pair(a, b)
    assert not _each_within(pair, (), FLOOR, 4 * U32, (0, _slice_norms(pair.d, (0,))[0]))
    assert worst_each(a, b, FLOOR)["residual"] > 4 * U32


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 50), spike=st.sampled_from([0.0, 1.0, 15.0, 16.0, 17.0, 1e3]),
       zeros=st.integers(0, 5))
def test_worst_entries_finds_an_outlier_exactly_where_one_lies(seed, n, spike, zeros):
    """None exactly where no entry's scale passes ENTRY_OUTLIER times the floor, the floor written out by hand:
    the lower median, or four times the 10th percentile (linear between its neighbours) where that is smaller."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(n, generator=g, dtype=torch.float64)
    t[: min(zeros, n)] = 0.0
    if spike and n > 1:
        t[-1] = spike * float(t.abs().median())
    v = t + 1e-9 * torch.randn(n, generator=g, dtype=torch.float64)
    scale = sorted(max(abs(x), abs(y)) for x, y in zip(t.tolist(), v.tolist()))
    pos = 0.1 * (n - 1)
    lo = math.floor(pos)
    q10 = scale[lo] + (pos - lo) * (scale[min(lo + 1, n - 1)] - scale[lo])
    floor = scale[0] if n < 2 else min(scale[(n - 1) // 2], 4 * q10)
    outlier = any(x > ENTRY_OUTLIER * floor for x in scale) and max(scale) > 0
    assert (worst_entries(v, t, (v,)) is not None) == outlier


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(2, 400), dtype=st.sampled_from([torch.float64, torch.float32]),
       heavy=st.floats(0.0, 0.95))
def test_floor_scale_is_torchs_median_and_quantile(seed, n, dtype, heavy):
    """The floor from one NumPy partition is torch's median or four times torch's 10th percentile, with a share
    ``heavy`` of the slices at 1e10: to the rounding of the interpolation, which torch weighs at the tensor's own
    precision (the position 0.1 (n - 1) in float32 is off by up to n eps, and 1e10 - 1 carries it whole)."""
    g = torch.Generator().manual_seed(seed)
    s = torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
    s[: int(heavy * n)] = 1e10
    want = min(float(s.median()), 4 * float(s.quantile(0.1)))
    assert _floor_scale(s) == pytest.approx(want, rel=4 * n * float(torch.finfo(dtype).eps), abs=0.0)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(2, 14), gap=st.sampled_from([1e-15, 1e-12, 1e-9, 1e-3, 1.0]))
def test_two_nearest_is_cdists_order_or_defers(seed, n, gap):
    g = torch.Generator().manual_seed(seed)
    KA = torch.randn(n, 200, generator=g, dtype=torch.float64)
    KA[1] = KA[0] + gap * torch.randn(200, generator=g, dtype=torch.float64)  # a near-tie among A's keys
    KB = KA[torch.randperm(n, generator=g)] + 1e-10 * torch.randn(n, 200, generator=g, dtype=torch.float64)
    got = _two_nearest(KB, KA)
    if got is not None:
        assert torch.equal(got, torch.cdist(KB, KA).topk(2, largest=False).indices)
    if gap <= 1e-12:
        assert got is None  # rounding decides that order: cdist, not the Gram product, must say it


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_two_nearest_defers_on_values_that_are_not_finite(bad):
    KA = torch.randn(4, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    KB = KA.clone()
    KB[2, 3] = bad
    assert _two_nearest(KB, KA) is None
