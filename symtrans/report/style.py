"""The report's visual vocabulary: one style per enum member, shared by the HTML page and the DOT file.

Verdict and paper status use two separate channels (fill, border), so that a
node shows both at a glance; the legend is generated from these tables, and a
test checks every enum member has an entry.

Examples
--------
>>> from symtrans.evidence import Verdict, PaperStatus
>>> VERDICT_FILL[Verdict.FAILS].fill
'#cf222e'
>>> sorted(BORDER) == sorted(PaperStatus)
True
"""

from __future__ import annotations

from dataclasses import dataclass

from symtrans.evidence import PaperStatus, Verdict
from symtrans.graph import Standing

__all__ = ["Fill", "Border", "VERDICT_FILL", "BORDER", "STANDING_GLYPH", "EDGE_STYLE"]


@dataclass(frozen=True)
class Fill:
    """A node fill and the text colour readable on it.

    Examples
    --------
    >>> Fill("#ffffff", "#000000").text
    '#000000'
    """

    fill: str
    text: str


@dataclass(frozen=True)
class Border:
    """A node border: colour, SVG dash pattern ('' = solid), DOT style word, width.

    Examples
    --------
    >>> BORDER[PaperStatus.SKETCH].dot
    'dashed'
    """

    colour: str
    dash: str
    dot: str
    width: float


VERDICT_FILL: dict[Verdict, Fill] = {
    Verdict.CERTIFIED: Fill("#1a7f37", "#ffffff"),
    Verdict.SUPPORTED: Fill("#aceebb", "#0d3318"),
    Verdict.FAILS: Fill("#cf222e", "#ffffff"),
    Verdict.NOT_APPLICABLE: Fill("#d8ccf5", "#2e1f5e"),
    Verdict.INCONCLUSIVE: Fill("#f5d565", "#3d2e00"),
    Verdict.NOT_RUN: Fill("#f0f2f5", "#24292f"),
    Verdict.READING_DEPENDENT: Fill("#f3a25b", "#3d1d00"),
}

BORDER: dict[PaperStatus, Border] = {
    PaperStatus.PROVED: Border("#1f2328", "", "solid", 2.6),
    PaperStatus.SKETCH: Border("#1f2328", "7 4", "dashed", 2.2),
    PaperStatus.PARTIALLY_PROVED: Border("#1f2328", "9 3 2 3", "dashed", 2.2),
    PaperStatus.CONJECTURED: Border("#bc4c00", "2 3", "dotted", 2.4),
    PaperStatus.PREDICTION: Border("#0969da", "2 3", "dotted", 2.4),
    PaperStatus.EXTERNAL: Border("#1b7c83", "", "solid", 2.0),
    PaperStatus.DEFINITION: Border("#8c959f", "", "solid", 1.2),
    PaperStatus.NOT_IN_PAPER: Border("#8250df", "1 3", "dotted", 2.4),
}

#: A glyph drawn in the node's corner for each standing ('' = none).
STANDING_GLYPH: dict[Standing, str] = {
    Standing.FULLY_CERTIFIED: "\u2714",  # heavy check mark
    Standing.BLOCKED: "\u25d0",  # half circle
    Standing.RESTS_ON_FAILED: "\u26a0",  # warning sign
    Standing.FAILS: "\u2718",  # heavy ballot x
    Standing.OPEN: "",
    Standing.GIVEN: "",
    Standing.EXTERNAL: "\u2197",  # north-east arrow: points outside the paper
    Standing.SUPPORTED: "\u2713",  # light check mark: positive, not all exact
    Standing.READING_DEPENDENT: "\u2195",  # up-down arrow: holds under some readings, fails under others
}

#: edge kind -> (colour, SVG dash, DOT style)
EDGE_STYLE: dict[str, tuple[str, str, str]] = {
    "statement": ("#57606a", "", "solid"),
    "proof": ("#8c959f", "5 4", "dashed"),
}
