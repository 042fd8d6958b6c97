"""Counterexample search for universal claims: families of exact candidates, one exact check each.

A universal claim "under H, P" is searched, not proved: each candidate is
decided in exact arithmetic (hypotheses and conclusion), the families and their
sizes are recorded, and the first counterexample (in the family's order, which
lists small and simple candidates first) is kept. No counterexample means
*supported on the families searched*, never *certified*.

Examples
--------
>>> res = search_universal("x + 0 == x", [Family("ints -3..3", "n/a", [(x,) for x in range(-3, 4)])],
...                        lambda x: Check(hypotheses=True, holds=(x + 0 == x)))
>>> res.checked, res.counterexample is None
(7, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Family", "Check", "SearchResult", "search_universal"]


@dataclass
class Family:
    """A named, described family of candidates (an iterable of argument tuples).

    Examples
    --------
    >>> Family("pairs", "all pairs", [(1, 2)]).name
    'pairs'
    """

    name: str
    description: str
    candidates: Iterable[tuple[Any, ...]]


@dataclass(frozen=True)
class Check:
    """The exact verdict on one candidate: do the hypotheses hold, does the conclusion hold.

    ``details`` carries the exact quantities computed (ranks, hypotheses) for a report.

    Examples
    --------
    >>> Check(hypotheses=True, holds=False).counterexample
    True
    """

    hypotheses: bool
    holds: bool
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def counterexample(self) -> bool:
        """True when the hypotheses hold and the conclusion fails.

        Examples
        --------
        >>> Check(hypotheses=False, holds=False).counterexample
        False
        """
        return self.hypotheses and not self.holds


@dataclass
class SearchResult:
    """What a search did: counts per family, and the first counterexample found.

    Examples
    --------
    >>> SearchResult("c").to_dict()["checked"]
    0
    """

    statement: str
    checked: int = 0
    applicable: int = 0
    families: list[dict[str, Any]] = field(default_factory=list)
    counterexample: tuple[Any, ...] | None = None
    counterexample_check: Check | None = None
    counterexample_family: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary (the counterexample itself is rendered by the caller).

        Examples
        --------
        >>> SearchResult("c", checked=3, applicable=2).to_dict()["applicable"]
        2
        """
        return {"statement": self.statement, "checked": self.checked, "applicable": self.applicable,
                "families": self.families, "counterexample_found": self.counterexample is not None,
                "counterexample_family": self.counterexample_family}


def search_universal(statement: str, families: Iterable[Family], check: Callable[..., Check], *,
                     stop_at_first: bool = True) -> SearchResult:
    """Check every candidate of every family exactly; record counts and the first counterexample.

    Examples
    --------
    >>> fam = Family("0..9", "small ints", [(x,) for x in range(10)])
    >>> r = search_universal("x < 5", [fam], lambda x: Check(True, x < 5))
    >>> r.counterexample, r.checked
    ((5,), 6)
    """
    result = SearchResult(statement)
    for fam in families:
        checked = applicable = 0
        for cand in fam.candidates:
            c = check(*cand)
            checked += 1
            applicable += bool(c.hypotheses)
            if c.counterexample and result.counterexample is None:
                result.counterexample, result.counterexample_check = cand, c
                result.counterexample_family = fam.name
                if stop_at_first:
                    break
        result.checked += checked
        result.applicable += applicable
        result.families.append({"name": fam.name, "description": fam.description, "checked": checked,
                                "hypotheses_hold": applicable})
        if stop_at_first and result.counterexample is not None:
            break
    return result
