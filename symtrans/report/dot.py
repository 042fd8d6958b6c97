"""``report.dot``: the proof graph for Graphviz, styled like the HTML page.

Fill = the toolkit's verdict; border colour and style = the paper's status;
solid edges = statement dependencies, dashed = proof dependencies.

Examples
--------
>>> from symtrans.context import Context
>>> from symtrans.report import build_report
>>> text = render_dot(build_report(Context(model=None)))
>>> text.splitlines()[0], '"H1" -> "thm-4.2"' in text
('digraph symtrans {', True)
"""

from __future__ import annotations

from symtrans.report.build import Report
from symtrans.report.style import BORDER, EDGE_STYLE, STANDING_GLYPH, VERDICT_FILL

__all__ = ["render_dot", "quote"]


def quote(text: str) -> str:
    """Quote a string for DOT.

    Examples
    --------
    >>> quote('a "b"\\nc')
    '"a \\\\"b\\\\"\\\\nc"'
    """
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(report: Report) -> str:
    """Return ``report.dot`` as text.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> report = build_report(Context(model=None))
    >>> render_dot(report).count('" -> "') == len(report.graph.edges())
    True
    """
    lines = ["digraph symtrans {",
             f"  // symtrans {report.toolkit_version} proof graph, generated {report.generated}",
             "  // fill = toolkit verdict; border = paper status; solid edge = statement dependency, "
             "dashed = proof dependency",
             '  graph [rankdir=TB, fontname="Helvetica", nodesep=0.25, ranksep=0.6];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
             '  edge [arrowsize=0.7];']
    for claim, status in report.items():
        fill, border = VERDICT_FILL[status.verdict], BORDER[claim.paper_status]
        glyph = STANDING_GLYPH[status.standing]
        label = f"{claim.id}{' ' + glyph if glyph else ''}\n{claim.title}"
        tooltip = (f"{claim.paper_ref}; paper: {claim.paper_status.value}; verdict: {status.verdict.value}; "
                   f"standing: {status.standing.value}. {claim.statement}")
        lines.append(f"  {quote(claim.id)} [label={quote(label)}, fillcolor={quote(fill.fill)}, "
                     f"fontcolor={quote(fill.text)}, color={quote(border.colour)}, "
                     f'style="rounded,filled,{border.dot}", penwidth={border.width}, '
                     f"tooltip={quote(tooltip)}];")
    for u, v, kind in report.graph.edges():
        colour, _, style = EDGE_STYLE[kind]
        lines.append(f"  {quote(u)} -> {quote(v)} [style={style}, color={quote(colour)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
