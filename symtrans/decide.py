"""The one home of numeric decision rules: the decisive band, hypothesis states, non-finite margins.

Every numeric decision in symtrans is a number (a margin, in decades, from
its threshold) and one rule that turns it into *decided* or *undecided*:

* :data:`DECISIVE_MARGIN`: a rank or hypothesis decision counts only when it
  sits at least this many decades from its threshold; inside the band it is
  undecided (inconclusive), never a guess;
* :func:`hypothesis_state`: holds / violated / undecided from a margin;
* :func:`decided`: the same band for a rank record (or any margin);
* non-finite numbers: margins stay ``inf`` / ``-inf`` in memory (an exact
  certificate's margin is infinite) and are written to JSON as the strings
  ``"inf"``, ``"-inf"``, ``"nan"`` (:func:`symtrans.evidence.strict_float`,
  docs/json-schemas.md). NaN is never a margin: :func:`margin` makes it
  ``None`` (no margin: the decision is undecided).

Importing this module imports no torch.

Examples
--------
>>> hypothesis_state(2.0), hypothesis_state(-3.0), hypothesis_state(0.4)
(True, False, None)
>>> decided(float("inf")), decided(0.5)
(True, False)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["DECISIVE_MARGIN", "hypothesis_state", "decided", "margin"]

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
