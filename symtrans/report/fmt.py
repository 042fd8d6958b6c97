"""Plain-text cells shared by the Markdown and HTML writers (one formatting of each evidence field).

Examples
--------
>>> from symtrans.evidence import Evidence, Tolerance
>>> e = Evidence(claim="c", producer="p", kind="numeric", verdict="supported", summary="s", margin=3.25,
...              margin_meaning="decades between sigma_r and sigma_r+1", dtype="float64",
...              tolerance=Tolerance(1e-10, "float64 rank cut", "sigma_max"))
>>> cells = evidence_cells(e)
>>> cells["margin"], cells["tolerance"], cells["tolerance_reason"]
('3.25 (decades between sigma_r and sigma_r+1)', '1e-10 relative to sigma_max', 'float64 rank cut')
"""

from __future__ import annotations

from typing import Any

from symtrans.evidence import Evidence

__all__ = ["evidence_cells", "number", "EVIDENCE_COLUMNS", "dependency_rows", "device_text", "OVERVIEW_COLUMNS",
           "overview_rows", "not_run_breakdown", "one_line", "SHOWN", "shown_as", "answer_counts", "answer_line",
           "all_sizes_rows", "ToleranceIndex"]


def device_text(device: str | None) -> str:
    """The requested device as report.md and report.html show it (unset: ``auto``; report.json writes ``null``).

    Examples
    --------
    >>> device_text(None), device_text("cpu")
    ('auto (CUDA if available, else CPU; unset, null in report.json)', 'cpu')
    """
    return "auto (CUDA if available, else CPU; unset, null in report.json)" if device is None else str(device)

#: column key -> header, in table order
EVIDENCE_COLUMNS: dict[str, str] = {
    "producer": "producer", "kind": "kind", "verdict": "verdict", "summary": "summary", "margin": "margin",
    "tolerance": "tolerance (reason below)", "dtype": "dtype", "inputs": "inputs", "run": "run",
}


class ToleranceIndex:
    """The tolerance reasons of a report, each written once and referred to by its number (T1, T2, ...).

    Every numeric row used to repeat the same paragraph; a row now names its reason, and the reasons are
    listed once (in order of first use) under "Tolerances".

    Examples
    --------
    >>> t = ToleranceIndex()
    >>> t.ref("float64 rank cut"), t.ref("storage precision"), t.ref("float64 rank cut"), t.ref("")
    ('T1', 'T2', 'T1', '')
    >>> t.items()
    [('T1', 'float64 rank cut'), ('T2', 'storage precision')]
    """

    def __init__(self) -> None:
        self._refs: dict[str, str] = {}

    def ref(self, reason: str) -> str:
        """The label of ``reason`` (a new one on first use); ``""`` for no reason."""
        if not reason:
            return ""
        return self._refs.setdefault(reason, f"T{len(self._refs) + 1}")

    def items(self) -> list[tuple[str, str]]:
        """``(label, reason)`` in order of first use."""
        return [(label, reason) for reason, label in self._refs.items()]


def number(x: Any) -> str:
    """Format a number compactly (4 significant digits for floats).

    Examples
    --------
    >>> number(0.000123456), number(12), number(None)
    ('0.0001235', '12', '')
    """
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def evidence_cells(e: Evidence, *, stale: bool = False, stale_reason: str = "", origin: str = "this run",
                   counted_as: Any = None, counted_note: str = "") -> dict[str, str]:
    """Return the evidence table's cells for one record, as plain strings.

    Examples
    --------
    >>> from symtrans.evidence import Evidence, Verdict
    >>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="exact",
    ...              details={"certificate": {"statement_id": "s"}})
    >>> evidence_cells(e, stale=True, stale_reason="old weights")["verdict"]
    'certified (stale: old weights)'
    >>> evidence_cells(Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="proof"),
    ...                counted_as=Verdict.SUPPORTED, counted_note="proved (text)")["verdict"]
    'supported (no certificate file: proved (text))'
    """
    margin = number(e.margin)
    if margin and e.margin_meaning:
        margin += f" ({e.margin_meaning})"
    tol = reason = ""
    if e.tolerance is not None:
        rel = f" relative to {e.tolerance.relative_to}" if e.tolerance.relative_to else ""
        tol, reason = f"{number(e.tolerance.value)}{rel}", e.tolerance.reason
    from symtrans.evidence import shown_verdict

    shown = shown_verdict(e, counted_as)  # "certified" only with a certificate file that verify re-checks
    verdict = shown + (f" (stale: {stale_reason})" if stale else "")
    if not stale and shown != e.verdict.value:
        verdict += f" (no certificate file: {counted_note or 'it counts as ' + shown})"
    elif not stale and counted_as is not None and counted_as != e.verdict:
        verdict += f" (counts as {counted_as.value}: {counted_note})"
    summary = e.summary
    if e.reading:
        summary = f"[{e.reading}] " + summary
    if e.scope is not None:
        summary += f" [scope: {e.scope.kind}, {e.scope.description}]"
    if e.hypothesis_checks:
        state = {True: "holds", False: "VIOLATED", None: "undecided"}
        summary += " [hypotheses: " + "; ".join(f"{h.name} {state[h.holds]}" for h in e.hypothesis_checks) + "]"
    if e.violated_hypothesis:
        summary += f" [violated: {e.violated_hypothesis}]"
    if e.counterexample:
        summary += " [counterexample in report.json]"
    inputs = ", ".join(f"{k}={v}" for k, v in e.inputs.items())
    run = []
    if e.model:
        run.append(f"model {e.model}")
    if e.weights_hash:
        run.append(f"weights {e.weights_hash[:10]}")
    if e.seed is not None:
        run.append(f"seed {e.seed}")
    if e.seconds is not None:
        run.append(f"{e.seconds:.2f} s")
    if origin != "this run":
        run.append(origin)
    run.append(e.timestamp)
    return {"producer": e.producer, "kind": e.kind, "verdict": verdict, "summary": summary, "margin": margin,
            "tolerance": tol, "tolerance_reason": reason, "dtype": e.dtype or "", "inputs": inputs,
            "run": "; ".join(run)}


def dependency_rows(claim: Any, status: Any, graph: Any) -> list[tuple[str, list[str], bool]]:
    """The dependency lines of a claim's section: ``(label, claim ids, emphasised)``, empty ones left out.

    Examples
    --------
    >>> from proofs import get_claim
    >>> from symtrans.graph import ClaimGraph, assess
    >>> g = ClaimGraph()
    >>> rows = dependency_rows(get_claim("thm-4.2"), assess(g, {})["thm-4.2"], g)
    >>> [label for label, _, _ in rows][:2]
    ['hypotheses', 'statement uses']
    """
    optional = [("hypotheses", list(claim.hypotheses), False),
                ("statement uses", list(claim.statement_deps), False),
                ("proof uses", list(claim.proof_deps), False)]
    rows = [r for r in optional if r[1]]
    rows += [("rests on (all ancestors)", list(graph.rests_on(claim.id)), False),
             ("what rests on it", list(graph.impact(claim.id)), False)]
    later = [("blocked by (no positive verdict)", list(status.blocked_by), False),
             ("rests on failed", list(status.failed_ancestors), True),
             ("assumes external results", list(status.external_ancestors), False)]
    return rows + [r for r in later if r[1]]


#: column key -> header of the overview table that opens report.md and report.html
OVERVIEW_COLUMNS: dict[str, str] = {
    "item": "claim / reading", "kind": "kind", "verdict": "verdict", "margin": "margin", "scope": "scope",
    "reason": "reason (from the evidence)",
}


def one_line(text: str, limit: int = 140) -> str:
    """The first sentence of ``text`` on one line, at most ``limit`` characters.

    Examples
    --------
    >>> one_line("rank 12 of 12. The rest is detail.")
    'rank 12 of 12'
    >>> one_line("x" * 200, 10), one_line("the rank of the stacked matrix", 20)
    ('xxxxxxxxx…', 'the rank of the…')
    """
    flat = " ".join(str(text).split())
    cut = flat.find(". ")
    flat = flat[:cut] if cut > 0 else flat.rstrip(".")
    if len(flat) <= limit:
        return flat
    head = flat[:limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(",;:") + "…"  # whole words where there are any


def _deciding(entries: Any, verdict: Any) -> Any:
    """The record that set ``verdict`` (the first current one counted as it), else the first current record."""
    current = [e for e in entries if not e.stale]
    for e in current:
        if (e.counted_as or e.evidence.verdict) == verdict:
            return e
    return current[0] if current else None


def _row(item: str, kind: str, claim: Any, verdict: Any, entries: Any, failed: Any = ()) -> dict[str, str]:
    e = _deciding(entries, verdict)
    margin = scope = ""
    if verdict.value == "not-run" and (claim.given or claim.external or e is None):
        reason = ("definition or hypothesis: stated, not checked" if claim.given else
                  "literature: an external result the paper assumes" if claim.external else
                  "no check ran" + (" (every record is stale)" if entries else ""))
    elif e is None:
        reason = verdict.value
    else:
        ev = e.evidence
        margin = number(ev.margin) + (f" ({ev.margin_meaning})" if ev.margin is not None and ev.margin_meaning else "")
        scope = ev.scope.kind if ev.scope is not None else ""
        reason = f"{ev.producer}: {one_line(ev.summary)}"
        if verdict.value == "not-run" and not ev.counted:  # shown, not counted: say so before what it found
            reason = f"sanity check, not counted ({ev.producer} cannot fail on a legal input): {one_line(ev.summary)}"
        if ev.violated_hypothesis:
            reason += f" [violated: {one_line(ev.violated_hypothesis, 60)}]"
    if failed:
        reason = f"rests on failed {', '.join(failed)}; " + reason
    shown = verdict.value
    if shown == "not-run":
        shown = ("stated" if claim.given else "assumed" if claim.external else
                 "sanity check" if e is not None and not e.stale and not e.evidence.counted else "not-run")
    return {"item": item, "kind": kind, "verdict": verdict.value, "shown": shown, "margin": margin, "scope": scope,
            "reason": reason}


def overview_rows(report: Any) -> list[dict[str, str]]:
    """One row per claim and per reading: verdict, margin, scope, a one-line reason from its evidence.

    ``level`` is 0 for a claim, 1 for one of its readings; ``claim`` is the
    claim id (for links).

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> rows = overview_rows(build_report(Context(model=None)))
    >>> r = next(r for r in rows if r["item"] == "H4")
    >>> r["verdict"], r["shown"], r["reason"]
    ('not-run', 'stated', 'definition or hypothesis: stated, not checked')
    >>> any(r["level"] == 1 for r in rows)  # readings under their claims
    True
    >>> sane = build_report(Context(model="default", n=8))
    >>> row = next(r for r in overview_rows(sane) if r["item"] == "cor-dff/share-formula")
    >>> row["shown"], row["reason"][:26]
    ('sanity check', 'sanity check, not counted ')
    """
    rows: list[dict[str, Any]] = []
    for claim, status in report.items():
        row = _row(claim.id, claim.kind, claim, status.verdict, status.evidence, status.failed_ancestors)
        rows.append(dict(row, level=0, claim=claim.id))
        for r in status.readings:
            rows.append(dict(_row(r.id, "reading", claim, r.verdict, r.evidence), level=1, claim=claim.id))
    return rows


def not_run_breakdown(report: Any) -> str:
    """The not-run count split: definitions and literature (nothing to run) apart from claims awaiting evidence.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> not_run_breakdown(build_report(Context(model=None))).startswith("not-run ")
    True
    """
    given = external = waiting = 0
    for claim, status in report.items():
        if status.verdict.value != "not-run":
            continue
        if claim.given:
            given += 1
        elif claim.external:
            external += 1
        else:
            waiting += 1
    return (f"not-run {given + external + waiting}: {given} definitions and hypotheses (stated, nothing to check), "
            f"{external} literature results (assumed), {waiting} claims whose checks did not run")


#: what the opening counts call each item, in order, with what the word means. The data (report.json's
#: ``verdict``) keeps ``not-run`` for the last four; these words say why nothing was decided.
SHOWN: dict[str, str] = {
    "certified": "an exact certificate or a kernel-checked proof, re-checked by symtrans verify",
    "supported": "positive evidence, numeric or on listed instances, or a written proof",
    "fails": "its own evidence contradicts it",
    "reading-dependent": "its readings disagree: some hold and some fail",
    "not-applicable": "a hypothesis is violated on every instance tried",
    "inconclusive": "inside the tolerance band",
    "sanity check": "its check ran, but cannot fail on a legal input: shown, not counted",
    "not-run": "a claim whose check did not run",
    "stated": "a definition or hypothesis: nothing to check",
    "assumed": "an external result the paper assumes",
}


def shown_as(claim: Any, status: Any) -> str:
    """The word for an item in the opening counts: its verdict, or why it has none (stated, assumed, sanity check).

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> r = build_report(Context(model=None))
    >>> [shown_as(c, s) for c, s in r.items() if c.id in ("H1", "lit-dong", "thm-4.2")]
    ['stated', 'fails', 'assumed']
    """
    verdict = status.verdict.value
    if verdict != "not-run":
        return verdict
    if claim.given:
        return "stated"
    if claim.external:
        return "assumed"
    if any(not e.stale and not e.evidence.counted for e in status.evidence):
        return "sanity check"
    return "not-run"


def answer_counts(report: Any) -> dict[str, int]:
    """How many items each word of :data:`SHOWN` describes (zeros left out), in :data:`SHOWN`'s order.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> counts = answer_counts(build_report(Context(model=None)))
    >>> sum(counts.values()) == 35, "not-run" in counts and counts["stated"] == 10
    (True, True)
    """
    words = [shown_as(c, s) for c, s in report.items()]
    return {w: words.count(w) for w in SHOWN if words.count(w)}


def answer_line(report: Any) -> str:
    """The report's answer in one line: the counts in words, and how many items are fully certified.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> answer_line(build_report(Context(model=None)))  # doctest: +ELLIPSIS
    '35 items: ... fails, ... stated, ... assumed; fully certified ...'
    """
    counts = ", ".join(f"{n} {w}" for w, n in answer_counts(report).items())
    certified = sum(1 for _, s in report.items() if s.fully_certified)
    return f"{len(report.statuses)} items: {counts}; fully certified {certified}"


def all_sizes_rows(report: Any) -> list[dict[str, str]]:
    """The evidence about every size (scope ``all-sizes``): item, producer, what it counts as, and by what.

    A record counts as ``certified`` only when a file or a kernel re-checked it; otherwise its note says why
    it counts as less (for instance "proved (text)").

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> rows = all_sizes_rows(build_report(Context(model=None)))
    >>> any(r["item"] == "thm-4.2-corrected" for r in rows), sorted(rows[0])
    (True, ['by', 'counts_as', 'item', 'producer'])
    """
    rows = []
    for claim, status in report.items():
        entries = [(claim.id, e) for e in status.evidence]
        entries += [(r.id, e) for r in status.readings for e in r.evidence]
        seen = set()
        for item, e in entries:
            ev = e.evidence
            if e.stale or ev.scope is None or ev.scope.kind != "all-sizes" or (item, ev.producer) in seen:
                continue
            seen.add((item, ev.producer))
            counts = (e.counted_as or ev.verdict).value
            by = one_line(e.counted_note, 90) if e.counted_note else one_line(ev.scope.description, 90)
            rows.append({"item": item, "producer": ev.producer, "counts_as": counts, "by": by})
    return rows


def breaking_table(evidence: list[Any]) -> tuple[list[str], list[list[str]]] | None:
    """The components x factors table of G (``group --breaking``) from a claim's evidence, or None without it.

    Read from the details of the evidence that carries it (framework-9's ablation-stabilisers record): one row
    per component with its state, the measured change of the stabiliser's dimension when it is removed, and
    each factor's cell (keeps, shrinks, needs, n/a). The report opens framework-9's section with it.

    Examples
    --------
    >>> from symtrans.evidence import Evidence, Verdict
    >>> e = Evidence(claim="framework-9", producer="p", kind="numeric", verdict=Verdict.FAILS, summary="s",
    ...              details={"components": [{"component": "norm", "state": "present", "cells": {"S_H": "keeps"},
    ...                       "measured": [{"L": 1, "measured_dimension": 30, "baseline": 43, "change": -13}]}]})
    >>> breaking_table([e])
    (['component', 'state', 'removed: dim (with it)', 'S_H'], [['norm', 'present', 'L=1: 30 (43), -13', 'keeps']])
    >>> breaking_table([]) is None
    True
    """
    for e in evidence:
        details = getattr(e, "details", None) or {}
        comps = details.get("components") if isinstance(details, dict) else None
        if not comps:
            continue
        factors: list[str] = []
        for c in comps:
            factors += [f for f in c.get("cells", {}) if f not in factors]
        rows = []
        for c in comps:
            measured = "; ".join(f"L={m['L']}: {m['measured_dimension']} ({m['baseline']}), {m['change']:+d}"
                                 for m in c.get("measured", []))
            rows.append([str(c["component"]), str(c["state"]), measured or "-",
                         *[str(c.get("cells", {}).get(f, "")) for f in factors]])
        return ["component", "state", "removed: dim (with it)", *factors], rows
    return None
