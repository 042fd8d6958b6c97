"""``report.html``: one self-contained page (no network) with the proof graph as inline SVG.

The graph shows the toolkit's verdict as the node fill and the paper's status
as the node border (colour and dash), statement and proof dependencies as
solid and dashed edges, and the standing as a corner glyph; the legend is
generated from the same tables (:mod:`symtrans.report.style`). Hovering a
node shows its statement and evidence and highlights what it rests on and
what rests on it; clicking jumps to its section below.

Examples
--------
>>> from symtrans.context import Context
>>> from symtrans.report import build_report
>>> from proofs import all_claims
>>> page = render_html(build_report(Context(model=None)))
>>> page.count('<g class="node"') == len(all_claims()), 'id="legend"' in page, "http://" in page.replace("http://www.w3.org", "")
(True, True, False)
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING

from symtrans.evidence import Verdict
from symtrans.graph import EDGE_KINDS, ClaimStatus, Standing
from symtrans.report.build import Report
from symtrans.report.fmt import (EVIDENCE_COLUMNS, breaking_table, OVERVIEW_COLUMNS, SHOWN, ToleranceIndex, all_sizes_rows,
                                 answer_counts, answer_line, dependency_rows, device_text, evidence_cells,
                                 number, overview_rows)
from symtrans.report.layout import layout, path_data
from symtrans.report.mathtext import expression_mathml, latex_to_mathml
from symtrans.report.style import BORDER, EDGE_STYLE, STANDING_GLYPH, VERDICT_FILL

if TYPE_CHECKING:
    from proofs import Claim

__all__ = ["render_html", "render_svg", "render_legend", "render_notebook"]

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --panel:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0; background: #fff; }
main { max-width: 1400px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 10px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 0 0 6px; }
.sub { color: var(--muted); margin: 0 0 12px; }
.run { color: var(--muted); font-size: 13px; margin: 0; padding-left: 18px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); }
.summary { display: flex; gap: 28px; flex-wrap: wrap; align-items: flex-start; }
.swatch { display: inline-block; width: 22px; height: 14px; border-radius: 4px; vertical-align: -2px;
          margin-right: 6px; }
#legend { display: flex; gap: 26px; flex-wrap: wrap; background: var(--panel); border: 1px solid var(--line);
          border-radius: 8px; padding: 10px 14px; margin: 10px 0; font-size: 12.5px; }
#legend h4 { margin: 0 0 4px; font-size: 12.5px; text-transform: uppercase; letter-spacing: .04em;
             color: var(--muted); }
#legend ul { list-style: none; margin: 0; padding: 0; } #legend li { margin: 2px 0; white-space: nowrap; }
#legend svg { vertical-align: middle; margin-right: 6px; }
.graph { border: 1px solid var(--line); border-radius: 8px; background: #fbfcfd; overflow-x: auto; }
.graph svg { display: block; max-width: none; margin: 0 auto; }
tr.ev td:first-child, tr.ov td:first-child { border-left-width: 6px; }
tr.ov.reading td:first-child { padding-left: 22px; }
details.evidence > summary { cursor: pointer; margin: 6px 0; font-size: 13px; }
details.evidence table { font-size: 12.5px; }
.focus-view { display: none; } .focus-view:target { display: block; }
.graphs:has(.focus-view:target) .main-graph { display: none; }
.focus-head { background: #ddf4ff; border: 1px solid #54aeff; border-radius: 6px; padding: 6px 10px; margin: 6px 0; }
.focus-link { font-size: 12.5px; margin: 4px 0; }
.math { overflow-x: auto; margin: 6px 0 8px; font-size: 15px; } math { font-size: 1.05em; }
.node rect { transition: filter .15s; } .node text { pointer-events: none; }
.node-link:hover rect, .node.hl rect { filter: drop-shadow(0 0 4px rgba(9,105,218,.65)); }
svg.focus .node { opacity: .25; } svg.focus .node.hl { opacity: 1; }
svg.focus .edge { opacity: .08; } svg.focus .edge.hl { opacity: 1; stroke-width: 2; }
.nid { font: 600 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.ntitle { font-size: 11px; } .glyph { font-size: 13px; } .tk { font: 600 11px sans-serif; }
.claim { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin: 14px 0; }
.claim:target { box-shadow: 0 0 0 3px rgba(9,105,218,.35); }
.badges span { display: inline-block; font-size: 12px; border-radius: 10px; padding: 0 8px; margin: 0 4px 4px 0;
               border: 1px solid var(--line); background: var(--panel); }
.statement { border-left: 3px solid var(--line); margin: 8px 0; padding: 2px 12px; }
pre { background: var(--panel); padding: 8px 10px; border-radius: 6px; overflow-x: auto; font-size: 12px;
      white-space: pre-wrap; }
.formal { background: #fff8c5; border: 1px solid #eac54f; border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.disagree { background: #ffebe9; border: 1px solid #ff8182; border-radius: 6px; padding: 6px 10px; }
.deps { margin: 6px 0; padding-left: 18px; } .muted { color: var(--muted); }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
"""

_JS = """
(function () {
  function focusFromHash() {  /* #focus=ID shows that claim's re-laid-out view (CSS :target does it too) */
    var main = document.querySelector('.main-graph'), id = decodeURIComponent(location.hash.slice(1));
    if (main) main.style.display = (id.indexOf('focus=') === 0 && document.getElementById(id)) ? 'none' : '';
  }
  window.addEventListener('hashchange', focusFromHash); focusFromHash();
  document.querySelectorAll('svg.proof-graph').forEach(function (svg) { wire(svg); });
  function wire(svg) {
  var up = JSON.parse(svg.getAttribute('data-up')), down = JSON.parse(svg.getAttribute('data-down'));
  function closure(id, adj) { var seen = {}, stack = [id];
    while (stack.length) { var v = stack.pop(); (adj[v] || []).forEach(function (u) {
      if (!seen[u]) { seen[u] = 1; stack.push(u); } }); } return seen; }
  function clear() { svg.classList.remove('focus');
    svg.querySelectorAll('.hl').forEach(function (e) { e.classList.remove('hl'); }); }
  svg.querySelectorAll('.node').forEach(function (n) {
    n.addEventListener('mouseenter', function () {
      var id = n.getAttribute('data-id'), keep = Object.assign({}, closure(id, up), closure(id, down));
      keep[id] = 1; svg.classList.add('focus');
      svg.querySelectorAll('.node').forEach(function (m) {
        if (keep[m.getAttribute('data-id')]) m.classList.add('hl'); });
      svg.querySelectorAll('.edge').forEach(function (e) {
        var a = e.getAttribute('data-from'), b = e.getAttribute('data-to');
        if (keep[a] && keep[b]) e.classList.add('hl'); });
    });
    n.addEventListener('mouseleave', clear);
  });
  }
})();
"""


_DOT = "\u00b7"


def _esc(text: object) -> str:
    return escape(str(text), quote=True)


def _trim(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "\u2026"


def _tooltip(claim: Claim, status: ClaimStatus) -> str:
    lines = [f"{claim.id} \u2014 {claim.title}", f"{claim.paper_ref} ({claim.kind})",
             f"paper: {claim.paper_status.value} | toolkit verdict: {status.verdict.value} | "
             f"standing: {status.standing.value}"
             + (" | toolkit formalisation" if claim.formalisation == "toolkit" else ""), "", claim.statement]
    if status.disagreement:
        lines += ["", f"DISAGREEMENT: {status.disagreement}"]
    if status.readings:
        lines += ["", "readings:"] + [f"  {r.id}: {r.verdict.value}" for r in status.readings]
    if status.failed_ancestors:
        lines += [f"rests on failed: {', '.join(status.failed_ancestors)}"]
    lines += ["", "evidence:" if status.evidence else "evidence: none registered"]
    for e in status.evidence:
        ev = e.evidence
        margin = f", margin {number(ev.margin)}" if ev.margin is not None else ""
        stale = " [stale]" if e.stale else ""
        lines.append(f"  {ev.producer} ({ev.kind}): {ev.verdict.value}{margin}{stale} \u2014 {_trim(ev.summary, 160)}")
    return "\n".join(lines)


def _dash(dash: str) -> str:
    return f' stroke-dasharray="{dash}"' if dash else ""


def render_svg(report: Report, *, focus: str | None = None, engine: str = "auto") -> str:
    """Return the proof graph as an inline ``<svg>`` element; with ``focus``, one claim's ancestors and descendants.

    The focus view is laid out anew for that part of the graph only, so it is
    as uncluttered as the part allows; its nodes link to their own focus views.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> rep = build_report(Context(model=None))
    >>> svg = render_svg(rep)
    >>> svg.startswith('<svg id="proof-graph"'), svg.count('class="edge"') > 30
    (True, True)
    >>> part = render_svg(rep, focus="thm-5.3")
    >>> part.count('<g class="node focus-node"') == 1 + len(rep.graph.rests_on("thm-5.3")) + len(rep.graph.impact("thm-5.3"))
    True
    """
    g = report.graph
    keep = None
    if focus is not None:
        keep = {focus, *g.rests_on(focus), *g.impact(focus)}
    titles = {c.id: _wrap(c.title, TITLE_CHARS) for c in report.claims}
    lines = max((len(t) for t in titles.values()), default=1)
    pips = any(s.readings for s in report.statuses.values())
    lay = layout(g, engine=engine, only=keep, node_w=NODE_W, node_h=26 + 13 * lines + (16 if pips else 10),
                 gap_x=14, dummy_w=4, max_width=GRAPH_WIDTH, bundle_min=BUNDLE_MIN)
    w, h = lay.node_w, lay.node_h
    ids = [v for v in g.claims if keep is None or v in keep]
    up = {v: sorted(u for u in g.graph.predecessors(v) if u in ids) for v in ids}
    down = {v: sorted(u for u in g.graph.successors(v) if u in ids) for v in ids}
    prefix = "" if focus is None else f"f-{focus}-"
    svg_id = "proof-graph" if focus is None else f"graph-focus-{focus}"
    node_class = "node" if focus is None else "node focus-node"
    out = [f'<svg id="{_esc(svg_id)}" class="proof-graph" xmlns="http://www.w3.org/2000/svg" '
           f'viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" width="{lay.width:.0f}" height="{lay.height:.0f}" role="img" '
           f'aria-label="proof graph{"" if focus is None else " around " + _esc(focus)}" '
           f'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif" data-layout="{lay.engine}" '
           f"data-up='{_esc(json.dumps(up))}' data-down='{_esc(json.dumps(down))}'>",
           "<defs>"]
    for kind in EDGE_KINDS:
        colour = EDGE_STYLE[kind][0]
        out.append(f'<marker id="{_esc(prefix)}arrow-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                   f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/>'
                   "</marker>")
    out.append(f'<marker id="{_esc(prefix)}arrow-bundle" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="3" '
               'markerHeight="3" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker>')
    out.append("</defs>")
    out.append('<g class="edges">')
    for u, v, kind in g.edges():
        if (u, v) not in lay.routes:
            continue
        colour, dash, _ = EDGE_STYLE[kind]
        if (u, v) in lay.joins:  # its own part only: the trunk (below) carries it on, with the one arrow
            d, end, cls = path_data(lay.routes[(u, v)][:lay.joins[(u, v)]]), "", "edge bundled"
        else:
            d, end, cls = lay.path(u, v), f' marker-end="url(#{_esc(prefix)}arrow-{kind})"', "edge"
        out.append(f'<path class="{cls}" data-from="{_esc(u)}" data-to="{_esc(v)}" data-kind="{kind}" '
                   f'd="{d}" fill="none" stroke="{colour}" stroke-width="1.3" stroke-opacity="0.75"{_dash(dash)}'
                   f"{end}/>")
    for v, (segs, sources) in lay.trunks.items():
        x, top = lay.pos[v]
        port = lay.routes[(sources[0], v)][-1][3]  # where every bundled edge arrives
        stub = [((port[0], top - 14), (port[0], top - 14), port, port)]
        d = path_data(segs) if segs else path_data(stub)
        first = segs[0][0] if segs else stub[0][0]
        out.append(f'<path class="edge-bundle" data-to="{_esc(v)}" data-count="{len(sources)}" d="{d}" fill="none" '
                   f'stroke="#57606a" stroke-width="3.5" stroke-opacity="0.85" '
                   f'marker-end="url(#{_esc(prefix)}arrow-bundle)"><title>{len(sources)} dependencies of '
                   f"{_esc(v)}, bundled: {_esc(', '.join(sources))}</title></path>"
                   f'<circle class="edge-hub" cx="{first[0]:.1f}" cy="{first[1]:.1f}" r="3.5" fill="#57606a"/>'
                   f'<text class="bundle-count" x="{port[0] + 10:.1f}" y="{top - 24:.1f}" font-size="11" '
                   f'fill="#57606a">{len(sources)} edges</text>')
    out.append("</g>")
    out.append('<g class="nodes">')
    for claim, status in report.items():
        if claim.id not in lay.pos:
            continue
        x, y = lay.pos[claim.id]
        fill, border = VERDICT_FILL[status.verdict], BORDER[claim.paper_status]
        glyph = STANDING_GLYPH[status.standing]
        target = f"#claim-{claim.id}" if focus is None else f"#focus={claim.id}"
        node_id = f"node-{claim.id}" if focus is None else f"{prefix}node-{claim.id}"
        centre = ' font-weight="700"' if claim.id == focus else ""
        out.append(f'<a class="node-link" href="{_esc(target)}">'
                   f'<g class="{node_class}" id="{_esc(node_id)}" data-id="{_esc(claim.id)}" '
                   f'data-verdict="{status.verdict.value}" data-paper-status="{claim.paper_status.value}">'
                   f"<title>{_esc(_tooltip(claim, status))}</title>"
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="9" fill="{fill.fill}" '
                   f'stroke="{border.colour}" stroke-width="{border.width * (1.6 if centre else 1)}"'
                   f"{_dash(border.dash)}/>"
                   f'<text class="nid" x="{x + 9:.1f}" y="{y + 18:.1f}" fill="{fill.text}" font-size="12" '
                   f'font-weight="600" font-family="ui-monospace, SFMono-Regular, Menlo, monospace">'
                   f"{_esc(claim.id)}</text>")
        for i, text in enumerate(titles[claim.id]):  # the whole title, wrapped: never cut
            out.append(f'<text class="ntitle" x="{x + 9:.1f}" y="{y + 34 + 13 * i:.1f}" fill="{fill.text}" '
                       f'font-size="11"{centre}>{_esc(text)}</text>')
        right = x + w - 8  # the bottom row, right to left: TK, then the standing's glyph
        if claim.formalisation == "toolkit":
            out.append(f'<text class="tk" x="{right:.1f}" y="{y + h - 6:.1f}" text-anchor="end" '
                       f'font-size="11" font-weight="600" fill="{fill.text}" opacity="0.8">TK</text>')
            right -= 22
        if glyph:
            out.append(f'<text class="glyph" x="{right:.1f}" y="{y + h - 5:.1f}" text-anchor="end" '
                       f'font-size="13" fill="{fill.text}">{glyph}</text>')
        for i, r in enumerate(status.readings):  # one pip per reading, filled with that reading's verdict
            rf = VERDICT_FILL[r.verdict]
            out.append(f'<rect class="reading" data-reading="{_esc(r.id)}" data-verdict="{r.verdict.value}" '
                       f'x="{x + 9 + i * 17:.1f}" y="{y + h - 12:.1f}" width="14" height="7" rx="2" '
                       f'fill="{rf.fill}" stroke="{fill.text}" stroke-width="0.8">'
                       f"<title>reading {_esc(r.id)}: {r.verdict.value}</title></rect>")
        out.append("</g></a>")
    out.append("</g></svg>")
    return "".join(out)


#: a node with at least this many incoming edges gets them bundled into one trunk (framework-9 has 17)
BUNDLE_MIN = 8
#: the graph's width at most: main's content box at a 1350 px window (1350 - 2 x 24 padding - 2 x 1 border
#: = 1300 px; Chromium's page scrollbar leaves 1285) less room for wider scrollbars, so the graph shows at its
#: own scale with no horizontal scroll (tests/test_report_html.py measures it)
GRAPH_WIDTH = 1260
#: a node's width: a 24-character id in 12 px bold monospace (about 7.2 px a character), padding and room
NODE_W = 192
#: a title line at most this many characters (11 px sans: at most about 6.6 px a character in NODE_W - 18)
TITLE_CHARS = 25


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words (a longer word: its own line).

    Examples
    --------
    >>> _wrap("collapse phenomena as orbits of the invariance group", 25)
    ['collapse phenomena as', 'orbits of the invariance', 'group']
    """
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _swatch_svg(fill: str, stroke: str, width: float, dash: str) -> str:
    return (f'<svg width="34" height="18"><rect x="2" y="2" width="30" height="14" rx="4" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"{_dash(dash)}/></svg>')


def render_legend() -> str:
    """Return the legend, generated from the verdict, paper-status, standing and edge-kind tables.

    Examples
    --------
    >>> from symtrans.evidence import PaperStatus
    >>> legend = render_legend()
    >>> all(v.value in legend for v in Verdict) and all(s.value in legend for s in PaperStatus)
    True
    """
    verdicts = "".join(f"<li>{_swatch_svg(f.fill, '#8c959f', 1, '')}{v.value}</li>"
                       for v, f in VERDICT_FILL.items())
    statuses = "".join(f"<li>{_swatch_svg('#ffffff', b.colour, b.width, b.dash)}{s.value}</li>"
                       for s, b in BORDER.items())
    standings = "".join(f'<li><b style="display:inline-block;width:22px">{STANDING_GLYPH[s] or _DOT}</b>'
                        f"{s.value}</li>" for s in Standing)
    edges = "".join(f'<li><svg width="40" height="12"><line x1="2" y1="6" x2="38" y2="6" stroke="{c}" '
                    f'stroke-width="1.6"{_dash(d)}/></svg>{k} dependency</li>' for k, (c, d, _) in EDGE_STYLE.items())
    return ('<div id="legend">'
            f"<div><h4>Fill: toolkit verdict</h4><ul>{verdicts}</ul></div>"
            f"<div><h4>Border: paper status</h4><ul>{statuses}</ul></div>"
            f"<div><h4>Corner: standing</h4><ul>{standings}</ul></div>"
            f"<div><h4>Edges (dependency \u2192 user)</h4><ul>{edges}</ul>"
            "<h4 style=\"margin-top:8px\">Marks</h4><ul><li><b>TK</b> toolkit formalisation</li>"
            '<li><svg width="34" height="10"><rect x="2" y="1" width="14" height="7" rx="2" fill="#aceebb" '
            'stroke="#24292f" stroke-width="0.8"/><rect x="19" y="1" width="14" height="7" rx="2" fill="#cf222e" '
            'stroke="#24292f" stroke-width="0.8"/></svg>readings, one pip each, filled by verdict</li>'
            f'<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#57606a" '
            f'stroke-width="3.5"/></svg>{BUNDLE_MIN} or more dependencies of one claim, bundled (hover: which)</li>'
            "<li>hover: statement, evidence, ancestors</li><li>click: the claim's section; its section links to a focus view</li></ul></div>"
            "</div>")


def _math_block(latex: str) -> str:
    """A claim's formal statement as MathML (rendered by the browser, offline); its LaTeX source on hover."""
    ml = latex_to_mathml(latex, display=True)
    if ml is None:
        return f"<pre>{_esc(latex)}</pre>"
    return f'<div class="math" title="{_esc(latex)}">{ml}</div>'


def _formula_math(name: str, expression: str) -> str:
    try:
        from symtrans.formulas import get_formula

        ml = expression_mathml(get_formula(name).expression())
    except Exception:  # noqa: BLE001 - a formula that cannot be printed keeps its text form
        ml = None
    return ml if ml is not None else f"<code>{_esc(expression)}</code>"


def _focus_views(report: Report) -> str:
    """One re-laid-out view per claim, shown when the URL fragment is ``#focus=ID`` (CSS :target, no script)."""
    views = []
    for claim in report.claims:
        n = 1 + len(report.graph.rests_on(claim.id)) + len(report.graph.impact(claim.id))
        views.append(f'<div class="focus-view" id="focus={_esc(claim.id)}"><p class="focus-head">'
                     f"<b>Focus: {_esc(claim.id)}</b> — {_esc(claim.title)}: what it rests on (above) and what "
                     f"rests on it (below), {n} items, laid out anew. Click a node to focus on it; "
                     f'<a href="#claim-{_esc(claim.id)}">its section</a>; <a href="#graph">the whole graph</a>.</p>'
                     f'<div class="graph">{render_svg(report, focus=claim.id)}</div></div>')
    return "".join(views)


def _links(ids: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f'<a href="#claim-{_esc(i)}">{_esc(i)}</a>' for i in ids) if ids else '<span class="muted">none</span>'


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _claim_section(report: Report, claim: Claim, status: ClaimStatus, tolerances: ToleranceIndex) -> str:
    g = report.graph
    fill = VERDICT_FILL[status.verdict]
    badges = [f'<span style="background:{fill.fill};color:{fill.text}">verdict: {status.verdict.value}</span>',
              f'<span style="border:2px {"dashed" if BORDER[claim.paper_status].dash else "solid"} '
              f'{BORDER[claim.paper_status].colour}">paper: {claim.paper_status.value}</span>',
              f"<span>standing: {status.standing.value}</span>", f"<span>{_esc(claim.kind)}</span>",
              f"<span>{'toolkit formalisation' if claim.formalisation == 'toolkit' else 'paper statement'}</span>"]
    if claim.source == "abstract":
        badges.append("<span>known only from the abstract</span>")
    parts = [f'<section class="claim" id="claim-{_esc(claim.id)}">',
             f"<h3>{_esc(claim.id)}: {_esc(claim.title)} "
             f'<span class="muted">\u2014 {_esc(claim.paper_ref)} ({_esc(claim.section)})</span></h3>',
             f'<div class="badges">{"".join(badges)}</div>',
             f'<p class="statement">{_esc(claim.statement)}</p>', _math_block(claim.latex),
             f'<p class="focus-link"><a href="#focus={_esc(claim.id)}">focus the graph on {_esc(claim.id)}</a> '
             "(what it rests on and what rests on it)</p>"]
    if claim.formalisation == "toolkit":
        parts.append(f'<div class="formal"><b>Toolkit formalisation.</b> {_esc(claim.formalisation_note)}</div>')
    if status.disagreement:
        parts.append(f'<p class="disagree"><b>Disagreement:</b> {_esc(status.disagreement)}.</p>')
    table = breaking_table([e.evidence for e in status.evidence])
    if table is not None:
        parts.append("<p><b>Components x factors of G</b> (<code>symtrans group --breaking</code>: each present "
                     "component removed from the architecture, the stabiliser measured again; a cell says whether "
                     "the factor survives the removal: keeps, shrinks, or needs the component):</p>")
        parts.append(_table(table[0], [[_esc(c) for c in row] for row in table[1]]))
    if status.readings:
        parts.append(f"<p><b>Readings</b> ({len(status.readings)}; the claim's verdict is theirs when they agree, "
                     "<code>reading-dependent</code> when some hold and some fail):</p>")
        parts.append(_table(["reading", "verdict", "standing", "quantifier", "statement", "paper's wording",
                             "formalisation"],
                            [[f"<code>{_esc(r.id)}</code>",
                              f'<span class="swatch" style="background:{VERDICT_FILL[r.verdict].fill};'
                              f'border:1px solid #8c959f"></span><b>{_esc(r.verdict.value)}</b>',
                              _esc(r.standing.value), _esc(getattr(r.reading, "quantifier", "")),
                              _esc(getattr(r.reading, "statement", "")), _esc(getattr(r.reading, "paper_wording", "")),
                              _esc(getattr(r.reading, "formalisation_note", ""))] for r in status.readings]))
    if status.missing:
        parts.append("<p><b>Missing</b> (no verdict, so the claim cannot be certified): "
                     + "; ".join(_esc(m) for m in status.missing) + ".</p>")
    deps = [f"<li><b>{label}:</b> {_links(ids)}</li>" if strong else f"<li>{label}: {_links(ids)}</li>"
            for label, ids, strong in dependency_rows(claim, status, g)]
    parts.append(f'<ul class="deps">{"".join(deps)}</ul>')
    rows = report.formulas(claim)
    if rows:
        archs = list(rows[0]["values"])

        def value(v: dict) -> str:
            text = "symbolic" if v["value"] is None else str(v["value"])
            if v.get("approx") is not None:
                text += f" (~{number(v['approx'])})"
            return _esc(text + (f" at n = {v['n']}" if "n" in v else ""))

        parts.append(_table(["formula", "expression", *archs, "counts"],
                            [[f"<code>{_esc(r['name'])}</code>", _formula_math(r["name"], r["expression"]),
                              *[value(r["values"][a]) + (f" (of <code>{_esc(r['values'][a]['expression'])}</code>)"
                                                          if r["values"][a].get("expression", r["expression"])
                                                          != r["expression"] else "") for a in archs],
                              _esc(r["counts"])] for r in rows]))
    if status.evidence:
        parts.append(_evidence_details(status, tolerances))
    else:
        parts.append('<p class="muted">No evidence producer is registered for this item.</p>')
    if claim.notes:
        parts.append("<ul>" + "".join(f"<li><i>Note:</i> {_esc(n)}</li>" for n in claim.notes) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _verdict_border(verdict: Verdict) -> str:
    """The colour that marks a row with ``verdict`` (the fill of the graph's nodes, darkened for white ones)."""
    fill = VERDICT_FILL[verdict]
    return fill.fill if fill.fill.lower() not in ("#ffffff", "#fff") else "#8c959f"


def _evidence_details(status: ClaimStatus, tolerances: ToleranceIndex) -> str:
    """A claim's evidence table, collapsible, each row marked with its verdict's colour; open when it decides."""
    keys = list(EVIDENCE_COLUMNS)
    rows = []
    for e in status.evidence:
        cells = evidence_cells(e.evidence, stale=e.stale, stale_reason=e.stale_reason, counted_as=e.counted_as,
                               counted_note=e.counted_note, origin=e.origin)
        colour = _verdict_border(e.evidence.verdict)
        ref = tolerances.ref(cells["tolerance_reason"])
        shown = {k: _esc(cells[k]) for k in keys}
        if ref:
            shown["tolerance"] += f' (<a href="#tolerance-{ref}">{ref}</a>)'
        rows.append(f'<tr class="ev" data-verdict="{e.evidence.verdict.value}">'
                    + "".join(f'<td style="border-left-color:{colour}">{shown[k]}</td>' if i == 0 else
                              f"<td>{shown[k]}</td>" for i, k in enumerate(keys)) + "</tr>")
    counts: dict[str, int] = {}
    for e in status.evidence:
        counts[e.evidence.verdict.value] = counts.get(e.evidence.verdict.value, 0) + 1
    tally = ", ".join(f"{n} {v}" for v, n in counts.items())
    head = "".join(f"<th>{_esc(h)}</th>" for h in EVIDENCE_COLUMNS.values())
    opened = " open" if status.verdict in (Verdict.FAILS, Verdict.READING_DEPENDENT, Verdict.INCONCLUSIVE) else ""
    return (f'<details class="evidence"{opened}><summary>evidence: {len(status.evidence)} record'
            f'{"s" if len(status.evidence) != 1 else ""} ({_esc(tally)})</summary>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></details>")


def _overview_html(report: Report) -> str:
    """The opening table of report.html: every claim and reading, its verdict colour on the row's edge."""
    rows = []
    for r in overview_rows(report):
        colour = _verdict_border(Verdict(r["verdict"]))
        item = (f'<a href="#claim-{_esc(r["claim"])}">{_esc(r["item"])}</a>' if r["level"] == 0 else
                f"<code>{_esc(r['item'])}</code>")
        shown = {**r, "verdict": r["shown"]}  # the word that says why, where nothing was decided
        cells = [item] + [f"<b>{_esc(shown[k])}</b>" if k == "verdict" else _esc(shown[k])
                          for k in list(OVERVIEW_COLUMNS)[1:]]
        rows.append(f'<tr class="ov{" reading" if r["level"] else ""}" data-verdict="{_esc(r["verdict"])}">'
                    + "".join(f'<td style="border-left-color:{colour}">{c}</td>' if i == 0 else f"<td>{c}</td>"
                              for i, c in enumerate(cells)) + "</tr>")
    head = "".join(f"<th>{_esc(h)}</th>" for h in OVERVIEW_COLUMNS.values())
    return (f'<h2 id="overview">Every claim and reading</h2><table class="overview"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _answer_html(report: Report) -> str:
    """The opening of report.html and of the notebook display: counts in words, disagreements, all-sizes results."""
    counts = "".join(f'<li><b>{n} {_esc(w)}</b>: {_esc(SHOWN[w])}</li>' for w, n in answer_counts(report).items())
    dis = report.disagreements()
    if dis:
        reasons = {r["item"]: r["reason"] for r in overview_rows(report) if r["level"] == 0}
        dis_html = _table(["claim", "paper", "paper status", "toolkit verdict", "why (from the evidence)"],
                          [[f'<a href="#claim-{_esc(cl.id)}">{_esc(cl.id)}</a>', _esc(cl.paper_ref),
                            _esc(cl.paper_status.value), _esc(s.verdict.value), _esc(reasons[cl.id])]
                           for cl, s in dis])
    else:
        dis_html = ("<p>None so far: no evidence that ran contradicts the paper's status of any claim. This says "
                    "nothing about claims whose checks have not run.</p>")
    rows = all_sizes_rows(report)
    sizes = (_table(["item", "producer", "counts as", "by"],
                    [[f'<a href="#claim-{_esc(r["item"].split("/")[0])}">{_esc(r["item"])}</a>', _esc(r["producer"]),
                      f"<b>{_esc(r['counts_as'])}</b>", _esc(r["by"])] for r in rows])
             if rows else "<p>No evidence about every size ran.</p>")
    return (f'<h2 id="answer">The answer</h2><p class="answer"><b>{_esc(answer_line(report))}.</b></p>'
            f'<ul class="answer-counts">{counts}</ul>'
            f'<h2 id="disagreements">Where the toolkit and the paper disagree</h2>{dis_html}'
            '<h2 id="all-sizes">Proved for all sizes</h2><p>Evidence whose scope is every size; it counts as '
            "<code>certified</code> only where a proof kernel or <code>symtrans verify</code> re-checked it.</p>"
            f"{sizes}")


_NB_CSS = """
.symtrans-nb { font: 13px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; }
.symtrans-nb .graph { border: 1px solid #d1d9e0; border-radius: 8px; background: #fbfcfd; overflow-x: auto; }
.symtrans-nb svg.proof-graph { display: block; max-width: 100%; height: auto; }
.symtrans-nb .node text { pointer-events: none; }
.symtrans-nb .node-link:hover rect { filter: drop-shadow(0 0 4px rgba(9,105,218,.65)); }
.symtrans-nb #legend { display: flex; gap: 22px; flex-wrap: wrap; background: #f6f8fa; border: 1px solid #d1d9e0;
  border-radius: 8px; padding: 8px 12px; margin: 8px 0; font-size: 12px; }
.symtrans-nb #legend h4 { margin: 0 0 4px; font-size: 12px; text-transform: uppercase; color: #59636e; }
.symtrans-nb #legend ul { list-style: none; margin: 0; padding: 0; }
.symtrans-nb #legend li { margin: 2px 0; white-space: nowrap; } .symtrans-nb #legend svg { vertical-align: middle; }
.symtrans-nb table { border-collapse: collapse; margin: 8px 0; font-size: 12.5px; }
.symtrans-nb th, .symtrans-nb td { border: 1px solid #d1d9e0; padding: 3px 7px; text-align: left; vertical-align: top; }
.symtrans-nb th { background: #f6f8fa; }
"""


def render_notebook(report: Report) -> str:
    """The proof graph for a notebook cell: legend, graph and a claim table with MathML, styles scoped to it.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> cell = render_notebook(build_report(Context(model=None)))
    >>> cell.startswith('<div class="symtrans-nb"><style>'), cell.count("<math") >= 30
    (True, True)
    """
    rows = [[f"<code>{_esc(c.id)}</code>", _esc(c.kind), _esc(c.paper_status.value), _esc(s.verdict.value),
             _esc(s.standing.value), _esc(c.title), latex_to_mathml(c.latex) or f"<code>{_esc(c.latex)}</code>"]
            for c, s in report.items()]
    return (f'<div class="symtrans-nb"><style>{_NB_CSS}</style>{_answer_html(report)}{render_legend()}'
            f'<div class="graph">{render_svg(report)}</div>'
            f"{_table(['id', 'kind', 'paper', 'toolkit', 'standing', 'title', 'statement'], rows)}</div>")


def render_html(report: Report) -> str:
    """Return ``report.html``: summary, legend, graph, then one section per claim.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> render_html(build_report(Context(model=None))).startswith("<!DOCTYPE html>")
    True
    """
    m = report.model
    model = ("none (symbolic producers only; numeric producers listed as not-run)" if m is None else
             f"{m['spec']}: {m['arch']}, weights sha256 {m['weights_hash'][:16]}\u2026, {m['dtype']} on {m['device']}")
    c = report.context
    verdict_rows = [[f'<span class="swatch" style="background:{VERDICT_FILL[Verdict(v)].fill};'
                     f'border:1px solid #8c959f"></span>{_esc(v)}', str(n)]
                    for v, n in report.verdict_counts().items()]
    standing_rows = [[f"{STANDING_GLYPH[Standing(s)] or _DOT} {_esc(s)}", str(n),
                      _esc(Standing(s).description)] for s, n in report.standing_counts().items()]
    errors = ""
    if report.errors:
        errors = "<h2>Producer errors</h2><ul>" + "".join(f"<li>{_esc(e)}</li>" for e in report.errors) + "</ul>"
    tolerances = ToleranceIndex()
    sections = "".join(_claim_section(report, cl, s, tolerances) for cl, s in report.items())
    tolerance_html = ("" if not tolerances.items() else '<h2 id="tolerances">Tolerances</h2><p>Each numeric record '
                      "names its tolerance's reason by its label here.</p><dl>" + "".join(
                          f'<dt id="tolerance-{label}">{label}</dt><dd>{_esc(reason)}</dd>'
                          for label, reason in tolerances.items()) + "</dl>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>symtrans proof-status report</title><style>{_CSS}</style></head><body><main>"
        "<h1>symtrans proof-status report</h1>"
        '<p class="sub">Rank, Head-Channel Non-Identifiability, and Symmetry Breaking (arXiv 2604.23681): '
        "every item, the paper's status beside the toolkit's verdict. A verdict is set only by evidence "
        "that ran.</p>"
        f'<ul class="run"><li>symtrans {_esc(report.toolkit_version)}, generated {_esc(report.generated)} in '
        f"{report.seconds:.1f} s</li><li>model: {_esc(model)}</li><li>context: n = {c['n']}, seed = {c['seed']}, "
        f"dtype = {_esc(c['dtype'])}, device = {_esc(device_text(c['device']))}</li>"
        f"<li>scope: {_esc(report.scope_line)}</li></ul>"
        f"{_answer_html(report)}{errors}"
        f'<h2 id="graph">Proof graph</h2>{render_legend()}'
        f'<div class="graphs">{_focus_views(report)}<div class="graph main-graph">{render_svg(report)}</div></div>'
        f"{_overview_html(report)}"
        '<div class="summary"><div><h2>Counts by verdict</h2>'
        f"{_table(['verdict', 'claims'], verdict_rows)}</div>"
        f"<div><h2>Counts by standing</h2>{_table(['standing', 'claims', 'meaning'], standing_rows)}</div></div>"
        f"{tolerance_html}<h2>Claims</h2>{sections}"
        f"<script>{_JS}</script></main></body></html>\n")
