"""``report.md``: the proof-status report as GitHub-readable Markdown.

Order: run details; the answer (the counts in words: verdicts, and why an item has none: stated,
assumed, sanity check); where the toolkit and the paper disagree; what is proved for all sizes and
how; one table of every claim and reading (verdict, margin, scope, a reason from the evidence);
counts by verdict and by standing; the tolerance reasons, once each; then one section per claim in
paper order.

Examples
--------
>>> from symtrans.context import Context
>>> from symtrans.report import build_report
>>> md = render_markdown(build_report(Context(model=None)))
>>> md.index("The answer") < md.index("Where the toolkit and the paper disagree") < md.index("Every claim and reading")
True
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from proofs._claim import about_text
from symtrans.evidence import Verdict
from symtrans.graph import ClaimStatus, Standing
from symtrans.report.build import Report
from symtrans.report.fmt import (EVIDENCE_COLUMNS, breaking_table, OVERVIEW_COLUMNS, SHOWN, ToleranceIndex, all_sizes_rows, answer_counts,
                                 answer_line, dependency_rows, device_text, evidence_cells,
                                 not_run_breakdown, number, overview_rows)
from symtrans.report.mathtext import latex_to_text
from symtrans.validate import terminal_safe

if TYPE_CHECKING:
    from proofs import Claim

__all__ = ["render_markdown"]


class Md(str):
    """Markdown the template itself wrote (links, emphasis, code spans of escaped text): a cell passes it as is.

    Every other string a table cell receives is external text and goes through :func:`_md`.

    Examples
    --------
    >>> _cell(Md("**x**")), _cell("**x**")
    ('**x**', '\\\\*\\\\*x\\\\*\\\\*')
    """


#: ASCII punctuation that opens Markdown structure inside a line (emphasis, links, code, raw HTML, tables,
#: strikethrough, hard breaks), escaped wherever external text goes
_INLINE = re.compile(r"([\\`*_\[\]|!#~])")
#: a list marker or setext underline an external string could open at the start of a line ("- ", "1. ", "=")
_LEADING = re.compile(r"^([-+=]|\d{1,9}(?=[.)]))")


def _md(text: object, line_start: bool = False) -> str:
    """Text from outside the toolkit (model names, paths, errors, carried records) made inert in Markdown.

    The one escaping of external text for report.md, for CommonMark with HTML
    enabled: HTML is escaped (``<script>`` shows as text), Markdown punctuation
    that could open links, emphasis, code or a table cell is backslash-escaped,
    a leading list or heading marker is escaped where the text opens a line
    (``line_start``), control characters and
    lone surrogates are shown as ``\\xNN`` and newlines become ``\\x0a``.

    Examples
    --------
    >>> _md("<script>alert(1)</script> *x* [a](b) `c`")
    '&lt;script&gt;alert(1)&lt;/script&gt; \\\\*x\\\\* \\\\[a\\\\](b) \\\\`c\\\\`'
    >>> _md("- 1. x", True), _md("1) y", True), _md("  z", True), _md("1. z")
    ('\\\\- 1. x', '1\\\\) y', '&#32;&#32;z', '1. z')
    """
    out = terminal_safe(str(text), keep_newlines=False)
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _INLINE.sub(r"\\\1", out)
    if not line_start:
        return out
    out = re.sub(r"^[ \t]+", lambda m: m.group().replace(" ", "&#32;").replace("\t", "&#9;"), out)
    return _LEADING.sub(lambda m: m.group() + "\\" if m.group()[0].isdigit() else "\\" + m.group(), out)


def _code(text: object) -> Md:
    """``text`` as one inline code span, whatever backticks it holds (its content is never HTML).

    CommonMark's rule: the fence is a backtick run longer than any run inside,
    padded with a space when the content starts or ends with a backtick (or a
    space, which the renderer would otherwise strip).

    Examples
    --------
    >>> _code("a`b"), _code("x"), _code("`` <b>")
    ('``a`b``', '`x`', '``` `` <b> ```')
    """
    body = terminal_safe(str(text), keep_newlines=False)
    fence = "`" * (max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body[:1] in ("`", " ") or body[-1:] in ("`", " ") else ""
    return Md(f"{fence}{pad}{body}{pad}{fence}")


def _cell(text: object) -> str:
    """A table cell: one line with ``|`` escaped; external text (anything not :class:`Md`) through :func:`_md`.

    Examples
    --------
    >>> _cell("model <b>x</b> | a"), _cell(_code("a|b"))
    ('model &lt;b&gt;x&lt;/b&gt; \\\\| a', '`a\\\\|b`')
    """
    if isinstance(text, Md):
        return terminal_safe(str(text), keep_newlines=False).replace("|", "\\|")
    return _md(text)


def _links(ids: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"[{i}](#claim-{i})" for i in ids) if ids else "none"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(c) for c in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _eps_source(m: dict) -> str:
    """Whose eps the analysis used: the user's (``--eps``) or the checkpoint's."""
    return "--eps" if m.get("eps_source") == "--eps" else "the checkpoint's"


def _run_lines(report: Report) -> list[str]:
    m = report.model
    model = ("none (symbolic producers only; numeric producers are listed as not-run)" if m is None else
             f"{_code(m['spec'])}: {_md(m['arch'])} from {_code(m['source'])}, weights sha256 "
             f"{_code(str(m['weights_hash'])[:16] + '...')}, {_md(m['dtype'])} on {_md(m['device'])}"
             + (f", norms' eps = {m['eps']:g} ({_eps_source(m)})" if m.get("eps") is not None else ""))
    c = report.context
    lines = [f"- toolkit: symtrans {report.toolkit_version}; generated {report.generated} "
             f"in {report.seconds:.1f} s",
             f"- model: {model}",
             f"- context: n = {c['n']}, seed = {c['seed']}, dtype = {c['dtype']}, device = {_md(device_text(c['device']))}",
             f"- scope: {_md(report.scope_line)}"]
    if report.previous:
        lines.append(f"- evidence carried from an earlier report: {_code(report.previous)}")
    for found in (m or {}).get("processed") or []:
        lines.append(f"- processed weights: {_md(found)}")
    return lines


def _overview(report: Report) -> list[str]:
    """The opening table: every claim and, indented under it, each of its readings."""
    out = ["## Every claim and reading", ""]
    rows = []
    for r in overview_rows(report):
        # template markup is Md; every value from the report goes through _md (claim ids come from the registry)
        item = (Md(f"[{_md(r['item'])}](#claim-{r['claim']})") if r["level"] == 0
                else Md(f"↳ {_code(r['item'])}"))
        shown = {**r, "verdict": r["shown"]}  # the word that says why, where nothing was decided
        rows.append([item] + [Md(f"**{_md(shown[k])}**") if k == "verdict" and r["level"] == 0 else shown[k]
                              for k in list(OVERVIEW_COLUMNS)[1:]])
    out += _table(list(OVERVIEW_COLUMNS.values()), rows)
    return out + [""]


def _answer(report: Report) -> list[str]:
    """The opening: the counts in words, the disagreements, and what is proved for all sizes."""
    out = ["## The answer", "", f"**{_md(answer_line(report))}.** "
           + "; ".join(f"*{w}*: {_md(SHOWN[w])}" for w in answer_counts(report)) + ".", ""]
    out += _disagreements(report)
    out += ["", "## Proved for all sizes", ""]
    rows = all_sizes_rows(report)
    if rows:
        out += ["Evidence whose scope is every size; it counts as `certified` only where a proof kernel or "
                "`symtrans verify` re-checked it.", ""]
        out += _table(["item", "producer", "counts as", "by"],
                      [[Md(f"[{_md(r['item'])}](#claim-{r['item'].split('/')[0]})"), r["producer"], r["counts_as"],
                        r["by"]] for r in rows])
    else:
        out.append("No evidence about every size ran.")
    return out + ["", "The proof graph is drawn in report.html (and report.dot); the detail of every claim follows.",
                  ""]


def _disagreements(report: Report) -> list[str]:
    out = ["## Where the toolkit and the paper disagree", ""]
    dis = report.disagreements()
    if dis:
        reasons = {r["item"]: r["reason"] for r in overview_rows(report) if r["level"] == 0}
        out += _table(["claim", "paper", "paper status", "toolkit verdict", "standing", "why (from the evidence)"],
                      [[Md(f"[{c.id}](#claim-{c.id})"), c.paper_ref, c.paper_status.value, s.verdict.value,
                        s.standing.value, reasons[c.id]] for c, s in dis])
    else:
        out.append("None so far: no evidence that ran contradicts the paper's status of any claim. "
                   "This says nothing about the claims whose checks have not run (below).")
    return out


def _summary(report: Report) -> list[str]:
    out = ["## Counts by verdict", ""]
    total = len(report.statuses)
    out += _table(["verdict", "claims"], [[v, str(n)] for v, n in report.verdict_counts().items()])
    out += ["", f"{total} items in all; {not_run_breakdown(report)}.", "", "## Counts by standing", ""]
    out += _table(["standing", "claims", "meaning"],
                  [[s.value, str(report.standing_counts()[s.value]), s.description] for s in Standing])
    full = [c.id for c, s in report.items() if s.fully_certified]
    out += ["", f"Fully certified: {_links(full)}."]
    waiting = [c.id for c, s in report.items() if s.verdict is Verdict.NOT_RUN and not (c.given or c.external)]
    out += ["", f"No evidence yet ({len(waiting)}): {_links(waiting)}."]
    if report.errors:
        out += ["", "### Producer errors", ""] + [f"- {_md(e, line_start=True)}" for e in report.errors]
    return out


def _gauge(report: Report) -> list[str]:
    """The gauge check's section (``report --gauge-check``): its defects first, then what moved."""
    gc = report.gauge
    if gc is None:
        return []
    rows, defects = gc.judge()
    out = ["", "## Gauge check", "",
           f"Every statement's verdict on W compared with its verdict on {len(gc.runs)} exact elements g of the "
           f"invariance group G applied to the weights (n = {gc.n}, seed {gc.seed}); a function-reading must not "
           "move, a parametrisation-reading may move only under the factors it declares. The verdicts compared are "
           "those of the checks that read the weights (the ones re-run on each g . W).", ""]
    group = getattr(gc, "group", None)
    if group:  # --eps 0: the elements are G's as modelled at the checkpoint's eps (a subgroup), and it says so
        out += [f"Elements sampled from {_md(group)}.", ""]
    if defects:
        out += [f"- **DEFECT:** {_md(d)}" for d in defects] + [""]  # a list: consecutive lines would be one paragraph
    else:
        out += ["No defect: no element of G moved a verdict it may not move.", ""]
    moved = [r for r in rows if r["moved_under"]]
    if moved:
        out += _table(["statement", "about", "verdict on W", "moved under", "declared factors"],
                      [[_code(r["id"]), r["about"], r["verdict"],  # counted from the checks that read the weights
                        "; ".join(f"{k}: {v}" for k, v in r["moved_under"].items()), ", ".join(r["moved_by"])]
                       for r in moved])
    return out


def _claim_section(report: Report, claim: Claim, status: ClaimStatus, tolerances: ToleranceIndex) -> list[str]:
    g = report.graph
    out = [f'<a id="claim-{claim.id}"></a>', "", f"### {claim.id}: {claim.title}", ""]
    form = "paper's statement" if claim.formalisation == "paper" else "**toolkit formalisation**"
    out.append(f"**{claim.paper_ref}** ({claim.section}) · {claim.kind} · paper: `{claim.paper_status.value}` · "
               f"toolkit: **`{status.verdict.value}`** · standing: `{status.standing.value}` · {form}"
               + (" · known only from the abstract" if claim.source == "abstract" else "")
               + ("" if claim.readings else f" · about: {about_text(claim)}"))
    out += ["", "> " + claim.statement, "", f"Formally: `{latex_to_text(claim.latex).replace('`', chr(39))}`", ""]
    if claim.formalisation == "toolkit":
        out += [f"*Formalisation (toolkit):* {claim.formalisation_note}", ""]
    if status.disagreement:
        out += [f"**Disagreement:** {status.disagreement}.", ""]
    table = breaking_table([e.evidence for e in status.evidence])
    if table is not None:
        out += ["**Components x factors of G** (`symtrans group --breaking`: each present component removed from "
                "the architecture, the stabiliser measured again; a cell says whether the factor survives the "
                "removal: keeps, shrinks, or needs the component):", ""]
        out += _table(*table) + [""]
    if status.readings:
        out += [f"**Readings** ({len(status.readings)}; the claim's verdict is theirs when they agree, "
                "`reading-dependent` when some hold and some fail):", ""]
        out += _table(["reading", "verdict", "standing", "quantifier", "statement", "paper's wording",
                       "formalisation", "about"],
                      [[_code(r.id), Md(f"**{_md(r.verdict.value)}**"), r.standing.value, r.reading.quantifier,
                        r.reading.statement, r.reading.paper_wording, r.reading.formalisation_note,
                        about_text(r.reading)]
                       for r in status.readings])
        out.append("")
    if status.missing:
        out += ["**Missing** (no verdict, so the claim cannot be certified): "
                + "; ".join(_md(m) for m in status.missing) + ".", ""]
    deps = [f"- **{label}:** {_links(ids)}" if strong else f"- {label}: {_links(ids)}"
            for label, ids, strong in dependency_rows(claim, status, g)]
    out += deps + [""]
    rows = report.formulas(claim)
    if rows:
        archs = list(rows[0]["values"])
        out += _table(["formula", "expression", *archs, "counts"],
                      [[_code(r['name']), _code(r['expression']),
                        *[Md(_md(_value(r["values"][a])) + _own_expression(r, r["values"][a])) for a in archs],
                        r["counts"]] for r in rows])
        out.append("")
    if status.evidence:
        keys = list(EVIDENCE_COLUMNS)
        rows = []
        for e in status.evidence:
            cells = evidence_cells(e.evidence, stale=e.stale, stale_reason=e.stale_reason, counted_as=e.counted_as,
                                   counted_note=e.counted_note, origin=e.origin)
            ref = tolerances.ref(cells["tolerance_reason"])
            rows.append([Md(f"{_md(cells[k])} ([{ref}](#tolerance-{ref}))") if k == "tolerance" and ref else cells[k]
                         for k in keys])
        out += _table(list(EVIDENCE_COLUMNS.values()), rows)
    else:
        out.append("*No evidence producer is registered for this item.*")
    out.append("")
    for note in claim.notes:
        out.append(f"- *Note:* {note}")
    if claim.notes:
        out.append("")
    return out


def _own_expression(row: dict, value: dict) -> str:
    """`` (of `expr`)`` when an architecture's flags (a gated FFN, biases) change the formula's expression."""
    own = value.get("expression")
    return f" (of {_code(own)})" if own and own != row["expression"] else ""


def _value(v: dict) -> str:
    text = str(v["value"]) if v["value"] is not None else "symbolic"
    if v.get("approx") is not None:
        text += f" (~{number(v['approx'])})"
    if "n" in v:
        text += f" at n = {v['n']}"
    return text


def render_markdown(report: Report) -> str:
    """Return ``report.md`` as text.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> "### thm-4.2: LayerNorm rank neutrality" in render_markdown(build_report(Context(model=None)))
    True
    """
    lines = ["# symtrans proof-status report", "",
             "Rank, Head-Channel Non-Identifiability, and Symmetry Breaking (arXiv 2604.23681): every item, "
             "the paper's status beside the toolkit's verdict. A verdict is set only by evidence that ran.", ""]
    lines += _run_lines(report) + [""]
    lines += _answer(report) + _overview(report) + _summary(report) + _gauge(report)
    tolerances, claims = ToleranceIndex(), []
    for claim, status in report.items():
        claims += _claim_section(report, claim, status, tolerances)
    if tolerances.items():
        lines += ["", "## Tolerances", "", "Each numeric record names its tolerance's reason by its label here.", ""]
        for label, reason in tolerances.items():
            lines += [f'<a id="tolerance-{label}"></a>', "", f"- **{label}**: {_md(reason)}", ""]
    lines += ["", "## Claims", ""] + claims
    return "\n".join(lines).rstrip() + "\n"
