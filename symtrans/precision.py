"""The one precision module: unit roundoff, dtype names, the rank cut, the decision bands, :class:`RankRecord`.

Every numeric decision in symtrans is a number compared with a threshold
that comes from the precision of the numbers it was computed from. This
module owns both halves: the precision of each floating dtype and the rules
that turn a measurement into *decided* or *undecided*.

Precision of a dtype (no torch needed: the values are exact powers of two):

* :func:`dtype_name`: the one way a dtype (``torch.float32``, ``"F32"``, ``"float32"``)
  is written in records (``"float32"``);
* :func:`machine_eps`, :func:`unit_roundoff` (``u = eps / 2``), :func:`smallest_normal`, :func:`underflow_floor`;
  :func:`sum_rounding` (float64's ``gamma_n`` for a sum of n products);
  :data:`EPS64` and :data:`U64` for float64;
* :func:`rank_rtol`: the rank cut ``max(m, n) eps`` relative to sigma_max, with its reason.

The three decision bands. They differ on purpose (each compares a different
kind of number), so each is a named constant beside the rule that uses it:

==========================  =========  ==============================================================
band                        width      used for
==========================  =========  ==============================================================
:data:`DECISIVE_MARGIN`     1 decade   a margin (decades from a threshold) of a rank cut or a
                                       hypothesis: :func:`hypothesis_state`, :func:`decided`
:data:`TOLERANCE_DECADES`   2 decades  a measured change against its rounding tolerance (the
                                       invariance checks of G): :func:`tolerance_state`. Above the
                                       tolerance is not yet a failure: the tolerance is an estimate
                                       (``sqrt(d)`` growth), not a bound, so 2 decades of headroom
:data:`GAP_DECADES`         6 decades  a rank with no rounding cut to measure from (a Jacobian of
                            + floor    G's action): the widest gap in the singular values, which
                                       must be at least this wide with everything below it under
                                       :data:`ROUNDING_FLOOR` (relative): :func:`gap_rank`
==========================  =========  ==============================================================

Non-finite numbers: margins stay ``inf`` / ``-inf`` in memory (an exact
certificate's margin is infinite) and are written to JSON as the strings
``"inf"``, ``"-inf"``, ``"nan"`` (:func:`symtrans.evidence.strict_float`).
NaN is never a margin: :func:`margin` makes it ``None`` (undecided).

This is a base module: it imports nothing of symtrans, and no torch at import
(:func:`torch_dtype` imports it when called).

Examples
--------
>>> unit_roundoff("float32") == 2.0 ** -24, dtype_name("torch.bfloat16")
(True, 'bfloat16')
>>> hypothesis_state(2.0), hypothesis_state(-3.0), hypothesis_state(0.4)
(True, False, None)
>>> decided(float("inf")), decided(0.5)
(True, False)
>>> tolerance_state(1e-13, 1e-12), tolerance_state(1e-11, 1e-12), tolerance_state(1e-9, 1e-12)
(True, None, False)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["EPS64", "U64", "STORAGE_DTYPES", "dtype_name", "float_dtype_name", "machine_eps", "unit_roundoff", "sum_rounding", "smallest_normal", "underflow_floor",
           "offset_loss", "torch_dtype", "rank_rtol", "RankRecord",
           "DECISIVE_MARGIN", "hypothesis_state", "decided", "margin", "finite",
           "TOLERANCE_DECADES", "tolerance_state", "GAP_DECADES", "ROUNDING_FLOOR", "gap_rank"]

#: machine epsilon of float64 (the spacing of floats at 1)
EPS64 = 2.0 ** -52
#: unit roundoff of float64 (round to nearest): ``EPS64 / 2``
U64 = 2.0 ** -53

#: machine epsilon and smallest positive normal number of each floating dtype (IEEE-754 and bfloat16)
_EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
_TINY = {"float64": 2.0 ** -1022, "float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126}
#: the floating dtypes symtrans models (as stored weights and as working dtypes)
STORAGE_DTYPES: tuple[str, ...] = tuple(_EPS)
#: safetensors' names of the same dtypes
_ALIASES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def dtype_name(dtype: Any) -> str:
    """The name of a dtype as records write it: ``str(dtype)`` without the ``torch.`` prefix.

    Examples
    --------
    >>> import torch
    >>> dtype_name(torch.float32), dtype_name("float64"), dtype_name(torch.int64)
    ('float32', 'float64', 'int64')
    """
    return str(dtype).replace("torch.", "")


def float_dtype_name(dtype: Any) -> str:
    """The canonical name of a floating dtype (a torch dtype, its name, or a safetensors name such as ``"BF16"``).

    Raises
    ------
    ValueError
        for a dtype that is not float64, float32, float16 or bfloat16.

    Examples
    --------
    >>> float_dtype_name("BF16"), float_dtype_name("torch.float16")
    ('bfloat16', 'float16')
    >>> float_dtype_name("int8")
    Traceback (most recent call last):
    ...
    ValueError: unknown storage dtype 'int8'
    """
    name = dtype_name(dtype)
    name = _ALIASES.get(name, name)
    if name not in _EPS:
        raise ValueError(f"unknown storage dtype {dtype!r}")
    return name


def machine_eps(dtype: Any) -> float:
    """Machine epsilon (the spacing of floats at 1; ``torch.finfo(dtype).eps``) of a floating dtype.

    Examples
    --------
    >>> import torch
    >>> all(machine_eps(d) == torch.finfo(d).eps for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16))
    True
    """
    return _EPS[float_dtype_name(dtype)]


def unit_roundoff(dtype: Any) -> float:
    """Unit roundoff u = eps / 2 of a floating dtype (a torch dtype or its name, e.g. ``"bfloat16"``, ``"F16"``).

    Examples
    --------
    >>> unit_roundoff("float32") == 2.0 ** -24, unit_roundoff("bfloat16") == 2.0 ** -8, unit_roundoff("F64") == U64
    (True, True, True)
    """
    return machine_eps(dtype) / 2


def sum_rounding(n: int) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)`` at float64: the relative rounding a float64 sum of ``n`` products
    can carry (0 for ``n <= 1``: one product rounds once, within ``u``, which a storage rounding already counts).

    Examples
    --------
    >>> sum_rounding(1), round(sum_rounding(64) / U64, 6)
    (0.0, 64.0)
    """
    n = int(n)
    return n * U64 / (1 - n * U64) if n > 1 else 0.0


def smallest_normal(dtype: Any) -> float:
    """The smallest positive normal number of a floating dtype (``torch.finfo(dtype).tiny``).

    Examples
    --------
    >>> import torch
    >>> all(smallest_normal(d) == torch.finfo(d).tiny
    ...     for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16))
    True
    """
    return _TINY[float_dtype_name(dtype)]


def underflow_floor(dtype: Any) -> float:
    """The size below which a matrix has underflowed: ``smallest_normal / eps`` (float64: 2^-970, about 1e-292).

    A matrix whose largest entry ``m`` is at least this has every entry down to ``eps * m`` (all that reach its
    norm at this precision) in the normal range; below it those entries are subnormal, with fewer significant
    bits, so a scale-free quantity computed from it (a residual ratio) has lost its precision.

    Examples
    --------
    >>> underflow_floor("float64") == 2.0 ** -970, underflow_floor("float32") == 2.0 ** -103
    (True, True)
    """
    return smallest_normal(dtype) / machine_eps(dtype)


def offset_loss(values: Any, offset: float) -> Any:
    """How many times coarser than its dtype a value stored as ``value - offset`` is resolved: ``|value - offset| /
    |value|`` (at least 1; ``inf`` at an exact 0), as a tensor like ``values``.

    Gemma's norms store ``w`` and apply the gain ``1 + w``: a stored ``w`` is rounded to ``u |w|``, so an applied
    gain near 0 (``w`` near -1) is known only to ``u |w| / |1 + w|`` of itself. The real Gemma 3 270M holds gains
    of 1/256 (``w = -255/256``): 255 times coarser than their float32 storage suggests. Without an offset nothing
    is lost (all ones).

    Examples
    --------
    >>> import torch
    >>> g = torch.tensor([1.5, 1 / 256, 0.0], dtype=torch.float64)
    >>> offset_loss(g, 1).tolist(), offset_loss(g, 0).tolist()
    ([1.0, 255.0, inf], [1.0, 1.0, 1.0])
    >>> gain = torch.tensor(1 / 256 + 2.5e-8, dtype=torch.float64)  # stored as w in float32, read back as 1 + w
    >>> err = float(abs((1 + (gain - 1).float().double()) - gain) / gain) / unit_roundoff("float32")
    >>> 100 < err <= float(offset_loss(gain, 1))  # 100 u of itself, not the u its dtype resolves; within the loss
    True
    """
    import torch

    v = torch.as_tensor(values)
    if not offset:
        return torch.ones_like(v)
    a = v.abs()
    loss = (v - offset).abs() / torch.where(a > 0, a, 1)
    return torch.where(a > 0, loss.clamp_min(1.0), torch.full_like(loss, math.inf))


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype of a floating dtype or its name (imports torch).

    Examples
    --------
    >>> import torch
    >>> torch_dtype("BF16") is torch.bfloat16, torch_dtype(torch.float32) is torch.float32
    (True, True)
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    return getattr(torch, float_dtype_name(dtype))


def rank_rtol(dtype: Any, shape: tuple[int, int]) -> tuple[float, str]:
    """The rank cut ``max(m, n) * eps`` relative to sigma_max (LAPACK's and numpy's convention), with the reason.

    Examples
    --------
    >>> rtol, why = rank_rtol("float64", (10, 4))
    >>> rtol == 10 * EPS64, why.startswith("max(m, n) * eps(float64)")
    (True, True)
    """
    eps = machine_eps(dtype)
    m = max(shape)
    reason = (f"max(m, n) * eps({dtype_name(dtype)}) = {m} * {eps:.3g} relative to sigma_max "
              "(the LAPACK/numpy matrix_rank convention): singular values below it are within the "
              "rounding error of an SVD in this dtype")
    return m * eps, reason


# ----------------------------------------------------------------------------- the decisive band (margins)
#: decades a decision must sit from its threshold to count (rank cuts, hypotheses, LayerNorm H1-H4)
DECISIVE_MARGIN = 1.0


def hypothesis_state(m: float | None) -> bool | None:
    """Decide a hypothesis from its margin in decades: holds, violated, or ``None`` (undecided) inside the band.

    A NaN or missing margin is undecided.

    Examples
    --------
    >>> hypothesis_state(1.0), hypothesis_state(-1.0), hypothesis_state(-0.99), hypothesis_state(float("nan"))
    (True, False, None, None)
    >>> hypothesis_state(float("-inf"))
    False
    """
    if m is None or m != m:
        return None
    if m >= DECISIVE_MARGIN:
        return True
    if m <= -DECISIVE_MARGIN:
        return False
    return None


def decided(m: Any) -> bool:
    """True when a margin (or a record's ``.margin``) is at least :data:`DECISIVE_MARGIN` decades.

    Examples
    --------
    >>> decided(1.0), decided(0.99), decided(None)
    (True, False, False)
    """
    m = getattr(m, "margin", m)
    return m is not None and m == m and m >= DECISIVE_MARGIN


def margin(m: float | None) -> float | None:
    """A margin as records keep it: finite or ``±inf`` (written to JSON as ``"inf"``); NaN becomes ``None``.

    Examples
    --------
    >>> margin(2), margin(float("inf")), margin(None), margin(float("nan"))
    (2.0, inf, None, None)
    """
    if m is None:
        return None
    m = float(m)
    return None if math.isnan(m) else m


def finite(x: Any) -> float | None:
    """``float(x)`` when finite, else None: records carry no NaN or Infinity.

    Examples
    --------
    >>> finite(2), finite(float("inf")), finite(None)
    (2.0, None, None)
    """
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ----------------------------------------------------------------------------- the tolerance band (changes)
#: decades above a rounding tolerance that a measured change stays undecided before it counts as a change
TOLERANCE_DECADES = 2.0


def tolerance_state(change: float, tol: float, *, expect_small: bool = True,
                    decades: float = TOLERANCE_DECADES) -> bool | None:
    """Decide a measured change against its tolerance: the expectation holds, fails, or ``None`` (undecided).

    With ``expect_small`` (an invariance): holds when ``change <= tol``,
    fails beyond ``tol * 10**decades``. Otherwise (a change is expected):
    holds beyond ``tol * 10**decades``, fails when ``change <= tol``.
    In between it is undecided.

    Examples
    --------
    >>> tolerance_state(1e-13, 1e-12), tolerance_state(5e-11, 1e-12), tolerance_state(1e-9, 1e-12)
    (True, None, False)
    >>> [tolerance_state(c, 1e-12, expect_small=False) for c in (1e-13, 5e-11, 1e-3)]
    [False, None, True]
    """
    far = tol * 10 ** decades
    if expect_small:
        return True if change <= tol else (None if change <= far else False)
    return True if change > far else (None if change > tol else False)


# ----------------------------------------------------------------------------- the gap band (no cut)
#: decades the widest singular-value gap must span for a rank read from the gap alone
GAP_DECADES = 6.0
#: relative size (to sigma_max) below which a singular value is at float64 rounding level for :func:`gap_rank`
ROUNDING_FLOOR = 1e-9


def gap_rank(singular_values: Any, *, min_gap: float = GAP_DECADES,
             floor: float = ROUNDING_FLOOR) -> dict[str, Any]:
    """Numerical rank at the widest gap of the singular values (relative to the largest), with its record.

    The cut is placed at the largest drop, in decades, between consecutive
    singular values whose upper value is above float64's resolution
    (``EPS64`` relative): a value below ``EPS64 sigma_max`` is indistinguishable
    from zero, so a drop below it separates nothing (exactly cancelling
    columns, such as two biases that only their sum reaches, sit at 1e-31
    under the others' 1e-17); ``clear``
    says whether that drop is at least ``min_gap`` decades and the values
    below it are at rounding level. A full-rank matrix has its cut at the end
    (``below`` is None).

    Examples
    --------
    >>> r = gap_rank([3.0, 1.0, 0.5, 1e-15, 1e-16])
    >>> r["rank"], r["clear"], round(r["gap_decades"], 1)
    (3, True, 14.7)
    >>> gap_rank([1.0, 1e-4, 1e-8, 1e-12])["clear"]  # no clear gap
    False
    >>> gap_rank([1.0, 1e-3, 1e-15, 1e-17, 1e-31])["rank"]  # not the 14 decades between 1e-17 and 1e-31
    2
    """
    s = [float(x) for x in singular_values]
    if not s or s[0] == 0:
        return {"rank": 0, "above": None, "below": None, "gap_decades": math.inf, "clear": True, "size": len(s)}
    rel = [max(x / s[0], 1e-300) for x in s]
    gaps = [math.log10(rel[i]) - math.log10(rel[i + 1]) for i in range(len(rel) - 1)]
    # the full-rank alternative: the smallest value is itself far above rounding
    if not gaps or (rel[-1] > floor and max(gaps) < min_gap):
        return {"rank": len(s), "above": rel[-1], "below": None, "gap_decades": math.inf,
                "clear": rel[-1] > floor, "size": len(s)}
    cut = max((i for i in range(len(gaps)) if rel[i] > EPS64 or i == 0), key=lambda i: gaps[i])
    above, below = rel[cut], rel[cut + 1]
    return {"rank": cut + 1, "above": above, "below": below, "gap_decades": gaps[cut],
            "clear": gaps[cut] >= min_gap and below < floor, "size": len(s)}


# ----------------------------------------------------------------------------- the rank record
@dataclass(frozen=True)
class RankRecord:
    """A numerical rank with everything needed to judge it.

    ``margin`` is ``min(log10(sigma_r / cut), log10(cut / sigma_{r+1}))``: how
    many decades the singular values on either side sit from the cut (the
    missing side is ignored). A margin below :data:`DECISIVE_MARGIN` means the
    decision is undecided. Built by :mod:`symtrans.numeric.linalg`
    (``numerical_rank``, ``storage_rank``, the Cholesky certificates).

    Examples
    --------
    >>> rec = RankRecord(rank=3, shape=(3, 3), dtype="float64", cut=6.7e-16, rtol=6.7e-16, tolerance_reason="r",
    ...                  sigma_max=1.0, sigma_above=1.0, sigma_below=None, margin=15.2)
    >>> rec.decisive, sorted(rec.to_dict())[:3]
    (True, ['cut', 'decisive', 'dtype'])
    """

    rank: int
    shape: tuple[int, int]
    dtype: str
    cut: float  # absolute threshold on singular values
    rtol: float
    tolerance_reason: str
    sigma_max: float
    sigma_above: float | None  # smallest kept singular value, sigma_r
    sigma_below: float | None  # largest dropped singular value, sigma_{r+1}
    margin: float
    precision: str = ""  # what the cut models, e.g. "float32 storage rounding" or "float64 computation"

    @property
    def decisive(self) -> bool:
        """True when both neighbouring singular values sit at least :data:`DECISIVE_MARGIN` decades from the cut.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.linalg import rank_from_singular_values
        >>> s = torch.tensor([1.0, 1e-9], dtype=torch.float64)
        >>> rank_from_singular_values(s, (2, 2), torch.float64, rtol=1e-8).decisive
        True
        >>> rank_from_singular_values(s, (2, 2), torch.float64, rtol=2e-9).decisive  # 1e-9 sits too near 2e-9
        False
        """
        return decided(self.margin)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> import torch
        >>> from symtrans.numeric.linalg import numerical_rank
        >>> numerical_rank(torch.ones(2, 2, dtype=torch.float64)).to_dict()["rank"]
        1
        """
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["decisive"] = self.decisive
        for k in ("margin", "cut", "sigma_max", "sigma_above", "sigma_below"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = "inf" if d[k] > 0 else ("-inf" if d[k] < 0 else "nan")
        return d
