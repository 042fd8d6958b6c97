"""The decision rules, re-exported from :mod:`symtrans.precision` (their one home) for existing imports.

New code imports from :mod:`symtrans.precision`.

Examples
--------
>>> from symtrans import precision
>>> hypothesis_state is precision.hypothesis_state, DECISIVE_MARGIN == precision.DECISIVE_MARGIN
(True, True)
"""

from __future__ import annotations

from symtrans.precision import DECISIVE_MARGIN, decided, hypothesis_state, margin

__all__ = ["DECISIVE_MARGIN", "hypothesis_state", "decided", "margin"]
