"""Lay out the proof graph in layers with few edge crossings: positions and edge routes for an inline SVG.

The built-in layout is the layered (Sugiyama) method, in four steps:

1. **layers**: each claim's longest-path depth from the claims that rest on
   nothing; a claim that rests on nothing is then moved down to just above its
   first user, so that lemmas and literature sit next to what uses them;
2. **dummy nodes**: an edge spanning k > 1 layers becomes a chain of k - 1
   narrow dummy nodes, so that it has its own slot in every layer it passes
   and is never drawn through a claim;
3. **ordering**: sweeps down and up the layers, each sorting a layer by the
   median (ties: barycentre) of its neighbours' positions, then swapping
   adjacent nodes while that lowers the crossings; the order with the fewest
   crossings over all sweeps is kept;
4. **coordinates**: each node is pulled towards the mean position of its
   neighbours, subject to the layer's order and spacing (an exact isotonic
   least-squares fit, repeated a few times), so that dummy chains run straight.

Laid out for a width (``max_width``): a layer holds at most as many claims
as fit (extra ones move down, their users with them), and every row's
positions are clipped to the width, so the drawing never needs a horizontal
scroll at its own scale. Many edges into one claim (``bundle_min`` or more,
e.g. the 17 into framework-9) share one chain of dummy nodes, a trunk: they
join it in the first layer below their source (edge concentration), so the
drawing carries one line into that claim instead of a fan of parallel ones.

Edges leave a claim's bottom side and enter the next claim's top side at
ports spread along the side in the order of their other ends, so they do not
cross at the node. When Graphviz ``dot`` is on PATH, :func:`layout` can use
it instead (``engine="dot"``); ``engine="auto"`` prefers it and falls back to
the built-in layout, which needs nothing.

:func:`crossings` and :func:`edges_through_nodes` measure a layout's
drawing geometrically (on the drawn curves), so the tests can compare layouts.

Examples
--------
>>> from symtrans.graph import ClaimGraph
>>> lay = layout(ClaimGraph(), engine="builtin")
>>> lay.layer["framework-9"] == max(lay.layer.values())
True
>>> crossings(lay) <= 37, edges_through_nodes(lay)
(True, 0)
>>> fit = layout(ClaimGraph(), engine="builtin", max_width=1280, node_w=184, dummy_w=4, gap_x=14, bundle_min=8)
>>> fit.width <= 1280 < lay.width, len(fit.trunks["framework-9"][1]), edges_through_nodes(fit)
(True, 17, 0)
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Layout", "layout", "layout_edges", "crossings", "edges_through_nodes", "layer_crossings"]

Point = tuple[float, float]


@dataclass(frozen=True)
class Layout:
    """Node positions (top-left corners), sizes, and each edge's drawn route.

    ``routes[(u, v)]`` is a list of cubic Bezier segments ``(p0, c1, c2, p1)``
    from ``u``'s bottom side to ``v``'s top side. ``engine`` says which
    layout ran (``"builtin"`` or ``"dot"``). ``trunks[v]`` is a bundle into
    ``v``: its segments (from the top of the chain to ``v``) and the sources
    it carries; ``joins[(u, v)]`` is how many of that edge's segments are its
    own before it meets the trunk (:meth:`drawn` gives them).

    Examples
    --------
    >>> from symtrans.graph import ClaimGraph
    >>> lay = layout(ClaimGraph(), engine="builtin")
    >>> set(lay.pos) == set(ClaimGraph().claims), len(lay.routes) == len(ClaimGraph().edges())
    (True, True)
    """

    pos: dict[str, tuple[float, float]]
    layer: dict[str, int]
    node_w: float
    node_h: float
    width: float
    height: float
    routes: dict[tuple[str, str], list[tuple[Point, Point, Point, Point]]] = field(default_factory=dict)
    engine: str = "builtin"
    trunks: dict[str, tuple[list[tuple[Point, Point, Point, Point]], list[str]]] = field(default_factory=dict)
    joins: dict[tuple[str, str], int] = field(default_factory=dict)

    def drawn(self) -> list[tuple[tuple[str, str], list[tuple[Point, Point, Point, Point]]]]:
        """The curves as drawn: each edge's own part (all of it unless bundled), then each trunk once.

        A trunk is keyed ``("", v)``.

        Examples
        --------
        >>> lay = layout_edges(list("abcdz"), [("a", "b"), ("b", "c"), ("c", "d"), *[(x, "z") for x in "abc"]],
        ...                    engine="builtin", bundle_min=3)
        >>> [key for key, _ in lay.drawn()][-1], lay.trunks["z"][1], len(lay.trunks["z"][0])
        (('', 'z'), ['a', 'b', 'c'], 4)
        """
        own = [(e, segs[:self.joins[e]] if e in self.joins else segs) for e, segs in self.routes.items()]
        return own + [(("", v), segs) for v, (segs, _) in self.trunks.items()]

    def path(self, u: str, v: str) -> str:
        """The SVG path data of edge ``u -> v``.

        Examples
        --------
        >>> lay = layout_edges(["a", "b"], [("a", "b")], engine="builtin")
        >>> lay.path("a", "b").startswith("M")
        True
        """
        return path_data(self.routes[(u, v)])


def path_data(segs: Sequence[tuple[Point, Point, Point, Point]]) -> str:
    """SVG path data of a chain of cubic Bezier segments ``(p0, c1, c2, p1)``.

    Examples
    --------
    >>> path_data([((0, 0), (0, 5), (10, 5), (10, 10))])
    'M0.0,0.0 C0.0,5.0 10.0,5.0 10.0,10.0'
    """
    out = [f"M{segs[0][0][0]:.1f},{segs[0][0][1]:.1f}"]
    for _, c1, c2, p1 in segs:
        out.append(f"C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} {p1[0]:.1f},{p1[1]:.1f}")
    return " ".join(out)


# ------------------------------------------------------------------ step 1: layers
def _layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    preds: dict[str, list[str]] = {v: [] for v in nodes}
    succs: dict[str, list[str]] = {v: [] for v in nodes}
    for u, v in edges:
        preds[v].append(u)
        succs[u].append(v)
    layer: dict[str, int] = {}
    order = _topological(nodes, preds, succs)
    for v in order:
        layer[v] = 1 + max((layer[u] for u in preds[v]), default=-1)
    for v in reversed(order):  # sources sit just above their first user
        if not preds[v] and succs[v]:
            layer[v] = min(layer[s] for s in succs[v]) - 1
    low = min(layer.values(), default=0)
    layer = {v: k - low for v, k in layer.items()}
    return _balance(nodes, preds, succs, layer)


def _cap(nodes: Sequence[str], edges: Sequence[tuple[str, str]], layer: dict[str, int], cap: int
         ) -> dict[str, int]:
    """At most ``cap`` claims a layer: top down, move claims of a full layer one layer down (users follow).

    A claim whose users all lie two or more layers below moves first (no one
    else moves); among those, the one with more users than dependencies
    (moving it shortens more edges than it lengthens), last in the given order.
    """
    layer = dict(layer)
    preds: dict[str, list[str]] = {v: [] for v in nodes}
    succs: dict[str, list[str]] = {v: [] for v in nodes}
    for u, v in edges:
        preds[v].append(u)
        succs[u].append(v)
    index = {v: i for i, v in enumerate(nodes)}
    k = 0
    while k <= max(layer.values(), default=-1):
        row = [v for v in nodes if layer[v] == k]
        while len(row) > max(cap, 1):
            def key(v: str) -> tuple[bool, int, int]:
                pushes = any(layer[x] == k + 1 for x in succs[v])
                return (pushes, len(preds[v]) - len(succs[v]), -index[v])

            v = min(row, key=key)
            row.remove(v)
            layer[v] = k + 1
            stack = [v]
            while stack:  # users stay below their dependencies
                u = stack.pop()
                for x in succs[u]:
                    if layer[x] <= layer[u]:
                        layer[x] = layer[u] + 1
                        stack.append(x)
        k += 1
    return layer


def _balance(nodes: Sequence[str], preds: dict[str, list[str]], succs: dict[str, list[str]],
             layer: dict[str, int]) -> dict[str, int]:
    """Move claims that have room (between their last dependency and first user) out of the widest layers.

    A move must leave the widest layer narrower than it was and add at most one
    layer of edge length, so the drawing gets narrower without long detours.
    """
    n_layers = max(layer.values(), default=-1) + 1
    for _ in range(4 * len(nodes)):
        size = [0] * n_layers
        for v in nodes:
            size[layer[v]] += 1
        widest = max(range(n_layers), key=lambda k: size[k], default=0)
        best = None
        for v in nodes:
            if layer[v] != widest:
                continue
            lo = max((layer[u] + 1 for u in preds[v]), default=0)
            hi = min((layer[s] - 1 for s in succs[v]), default=n_layers - 1)
            for k in range(lo, hi + 1):
                if k == widest or size[k] + 1 >= size[widest]:
                    continue
                stretch = sum(abs(k - layer[u]) - abs(widest - layer[u]) for u in preds[v] + succs[v])
                cand = (stretch, size[k], nodes.index(v), v, k)
                if stretch <= len(preds[v]) + len(succs[v]) and (best is None or cand < best):
                    best = cand
        if best is None:
            break
        layer[best[3]] = best[4]
    return layer


def _topological(nodes: Sequence[str], preds: dict[str, list[str]], succs: dict[str, list[str]]) -> list[str]:
    indeg = {v: len(preds[v]) for v in nodes}
    ready = [v for v in nodes if indeg[v] == 0]
    out: list[str] = []
    while ready:
        v = ready.pop(0)
        out.append(v)
        for s in succs[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(out) != len(nodes):
        raise ValueError("the graph has a cycle")
    return out


# ------------------------------------------------------------------ step 2: dummy nodes
def _with_dummies(nodes: Sequence[str], edges: Sequence[tuple[str, str]], layer: dict[str, int],
                  hubs: Iterable[str] = ()) -> tuple[dict[str, int], list[tuple[str, str]],
                                                      dict[tuple[str, str], list[str]]]:
    """Split long edges into unit edges; return layers, unit edges, and each edge's chain of nodes.

    Edges into a claim of ``hubs`` share its dummies (one a layer): a trunk.
    """
    lay = dict(layer)
    hubs = set(hubs)
    unit: list[tuple[str, str]] = []
    chain: dict[tuple[str, str], list[str]] = {}
    for u, v in edges:
        path = [u]
        for k in range(lay[u] + 1, lay[v]):
            d = f"\x00\x00{v}\x00{k}" if v in hubs else f"\x00{u}\x00{v}\x00{k}"
            lay[d] = k
            path.append(d)
        path.append(v)
        unit += [e for e in zip(path, path[1:]) if e not in unit]
        chain[(u, v)] = path
    return lay, unit, chain


def _is_dummy(v: str) -> bool:
    return v.startswith("\x00")


# ------------------------------------------------------------------ step 3: ordering
def layer_crossings(upper: Sequence[str], lower: Sequence[str], edges: Iterable[tuple[str, str]]) -> int:
    """Count crossing pairs of straight edges between two ordered layers (inversions of the edge list).

    Examples
    --------
    >>> layer_crossings(["a", "b"], ["x", "y"], [("a", "y"), ("b", "x")])
    1
    >>> layer_crossings(["a", "b"], ["x", "y"], [("a", "x"), ("b", "y")])
    0
    """
    iu = {v: i for i, v in enumerate(upper)}
    il = {v: i for i, v in enumerate(lower)}
    es = sorted((iu[u], il[v]) for u, v in edges if u in iu and v in il)
    count = 0
    for i in range(len(es)):
        for j in range(i + 1, len(es)):
            if es[i][0] < es[j][0] and es[i][1] > es[j][1]:
                count += 1
    return count


def _total_crossings(rows: list[list[str]], between: list[list[tuple[str, str]]]) -> int:
    return sum(layer_crossings(rows[k], rows[k + 1], between[k]) for k in range(len(rows) - 1))


def _median(values: list[float]) -> float:
    s = sorted(values)
    m = len(s) // 2
    if len(s) % 2:
        return s[m]
    if len(s) == 2:
        return (s[0] + s[1]) / 2
    left, right = s[m - 1] - s[0], s[-1] - s[m]  # weighted median (Gansner et al.)
    return (s[m - 1] * right + s[m] * left) / (left + right) if left + right else (s[m - 1] + s[m]) / 2


def _order(rows: list[list[str]], unit: list[tuple[str, str]], iterations: int = 24) -> list[list[str]]:
    n = len(rows)
    layer_of = {v: k for k, row in enumerate(rows) for v in row}
    between: list[list[tuple[str, str]]] = [[] for _ in range(max(n - 1, 0))]
    up: dict[str, list[str]] = {v: [] for row in rows for v in row}
    down: dict[str, list[str]] = {v: [] for row in rows for v in row}
    for u, v in unit:
        between[layer_of[u]].append((u, v))
        down[u].append(v)
        up[v].append(u)

    def sort_layer(k: int, nbrs: dict[str, list[str]], ref: list[str]) -> None:
        pos = {v: i for i, v in enumerate(ref)}
        cur = {v: i for i, v in enumerate(rows[k])}
        keys = {}
        for v in rows[k]:
            near = [float(pos[u]) for u in nbrs[v]]
            if near:
                keys[v] = (_median(near), sum(near) / len(near), cur[v])
            else:  # no neighbour on that side: keep its place
                keys[v] = (float(cur[v]) * len(ref) / max(len(rows[k]), 1), float(cur[v]), cur[v])
        rows[k].sort(key=lambda v: keys[v])

    def pair(a: str, b: str, pos: dict[str, int]) -> int:
        """Crossings among a's and b's edges (both sides) with a placed left of b."""
        c = 0
        for nbrs in (up, down):
            for x in nbrs[a]:
                px = pos[x]
                for y in nbrs[b]:
                    if px > pos[y]:
                        c += 1
        return c

    def transpose() -> None:
        improved = True
        rounds = 0
        while improved and rounds < 8:
            improved, rounds = False, rounds + 1
            pos = {v: i for row in rows for i, v in enumerate(row)}
            for k in range(n):
                row = rows[k]
                for i in range(len(row) - 1):
                    a, b = row[i], row[i + 1]
                    if pair(b, a, pos) < pair(a, b, pos):
                        row[i], row[i + 1] = b, a
                        pos[a], pos[b] = i + 1, i
                        improved = True

    best = [list(r) for r in rows]
    best_c = _total_crossings(rows, between)
    for it in range(iterations):
        if it % 2 == 0:
            for k in range(1, n):
                sort_layer(k, up, rows[k - 1])
        else:
            for k in range(n - 2, -1, -1):
                sort_layer(k, down, rows[k + 1])
        transpose()
        c = _total_crossings(rows, between)
        if c < best_c:
            best, best_c = [list(r) for r in rows], c
        if best_c == 0:
            break
    return best


# ------------------------------------------------------------------ step 4: coordinates
def _isotonic_place(desired: list[float], widths: list[float], gap: float | list[float],
                    bounds: tuple[float, float] | None = None) -> list[float]:
    """Centres closest (least squares) to ``desired`` keeping order and the gap(s) between neighbours.

    With ``bounds = (left, right)`` every box stays inside them (the fit is
    clipped: for a uniform box constraint the clipped isotonic fit is the
    constrained one); the row must fit.
    """
    gaps = gap if isinstance(gap, list) else [gap] * max(len(widths) - 1, 0)
    offs = [0.0]
    for i in range(1, len(widths)):
        offs.append(offs[-1] + (widths[i - 1] + widths[i]) / 2 + gaps[i - 1])
    target = [d - o for d, o in zip(desired, offs)]
    blocks: list[list[float]] = []  # [mean, weight]
    for t in target:  # pool adjacent violators: a non-decreasing fit
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    fit: list[float] = []
    for m, w in blocks:
        fit += [m] * int(w)
    if bounds is not None and widths:
        lo, hi = bounds[0] + widths[0] / 2, bounds[1] - widths[-1] / 2 - offs[-1]
        fit = [min(max(f, lo), max(hi, lo)) for f in fit]
    return [f + o for f, o in zip(fit, offs)]


def _gaps(row: list[str], gap: float) -> list[float]:
    """Gaps between neighbours of a row: ``gap`` between claims, half beside a dummy, a quarter between dummies."""
    return [gap / (1, 2, 4)[_is_dummy(a) + _is_dummy(b)] for a, b in zip(row, row[1:])]


def _row_width(row: list[str], width_of: dict[str, float], gap: float) -> float:
    return sum(width_of[v] for v in row) + sum(_gaps(row, gap))


def _coordinates(rows: list[list[str]], unit: list[tuple[str, str]], width_of: dict[str, float],
                 gap: float, rounds: int = 12, span: float | None = None) -> dict[str, float]:
    up: dict[str, list[str]] = {v: [] for row in rows for v in row}
    down: dict[str, list[str]] = {v: [] for row in rows for v in row}
    for u, v in unit:
        down[u].append(v)
        up[v].append(u)
    bounds = None if span is None else (-span / 2, span / 2)
    x: dict[str, float] = {}
    for row in rows:  # start packed and centred on 0
        ws = [width_of[v] for v in row]
        xs = _isotonic_place([0.0] * len(row), ws, _gaps(row, gap), bounds)
        x.update(zip(row, xs))
    for r in range(rounds):
        order = range(1, len(rows)) if r % 2 == 0 else range(len(rows) - 2, -1, -1)
        for k in order:
            row = rows[k]
            desired = []
            for v in row:
                near = up[v] + down[v] if r >= rounds - 2 else (up[v] if r % 2 == 0 else down[v])
                near = near or up[v] + down[v]
                desired.append(sum(x[u] for u in near) / len(near) if near else x[v])
            x.update(zip(row, _isotonic_place(desired, [width_of[v] for v in row], _gaps(row, gap), bounds)))
    return x


# ------------------------------------------------------------------ edge routes
def _ports(nodes: Iterable[str], ends: dict[str, list[tuple[float, str]]], cx: dict[str, float],
           w: float) -> dict[tuple[str, str], float]:
    """Spread a node's edge ends along one side, ordered by where the other end lies."""
    out: dict[tuple[str, str], float] = {}
    for v in nodes:
        items = sorted(ends.get(v, []))
        k = len(items)
        span = min(w * 0.7, 14.0 * (k - 1))
        for i, (_, key) in enumerate(items):
            out[(v, key)] = cx[v] + (span * (i / (k - 1) - 0.5) if k > 1 else 0.0)
    return out


def _curve(p: Point, q: Point) -> tuple[Point, Point, Point, Point]:
    mid = (p[1] + q[1]) / 2
    return (p, (p[0], mid), (q[0], mid), q)


def _builtin(nodes: Sequence[str], edges: Sequence[tuple[str, str]], node_w: float, node_h: float,
             gap_x: float, gap_y: float, margin: float, dummy_w: float, max_width: float | None = None,
             bundle_min: int | None = None) -> Layout:
    indeg: dict[str, int] = {}
    for _, v in edges:
        indeg[v] = indeg.get(v, 0) + 1
    hubs = {v for v, c in indeg.items() if bundle_min is not None and c >= bundle_min}
    base = _layers(nodes, edges)
    inner = None if max_width is None else max_width - 2 * margin
    cap = len(nodes) if inner is None else max(1, int((inner + gap_x) // (node_w + gap_x)))
    while True:  # the widest cap whose rows (claims and dummies) all fit the width
        layer = base if inner is None else _cap(nodes, edges, base, cap)
        lay, unit, chain = _with_dummies(nodes, edges, layer, hubs)
        n_layers = max(lay.values(), default=-1) + 1
        rows: list[list[str]] = [[] for _ in range(n_layers)]
        for v in nodes:  # the given order (the paper's) as the starting order; dummies after their source
            rows[lay[v]].append(v)
        for (u, v), path in chain.items():
            for d in path[1:-1]:
                if d not in rows[lay[d]]:
                    rows[lay[d]].append(d)
        width_of = {v: (dummy_w if _is_dummy(v) else node_w) for row in rows for v in row}
        if inner is None or cap == 1 or all(_row_width(r, width_of, gap_x) <= inner for r in rows):
            break
        cap -= 1
    rows = _order(rows, unit)
    x = _coordinates(rows, unit, width_of, gap_x, span=inner)
    left = min((x[v] - width_of[v] / 2 for v in x), default=0.0)
    cx = {v: x[v] - left + margin for v in x}
    width = max((cx[v] + width_of[v] / 2 for v in cx), default=0.0) + margin
    top = {k: margin + k * (node_h + gap_y) for k in range(n_layers)}
    pos = {v: (cx[v] - node_w / 2, top[lay[v]]) for v in nodes}
    bundled = {(u, v) for (u, v) in chain if v in hubs}  # all end at one port; the long ones share a trunk
    # ports: outgoing ends on the bottom side ordered by the next point's x, incoming on the top side
    # (a trunk enters its claim at one port)
    out_ends: dict[str, list[tuple[float, str]]] = {}
    in_ends: dict[str, list[tuple[float, str]]] = {}
    for (u, v), path in chain.items():
        out_ends.setdefault(u, []).append((cx[path[1]], v))
        end = (cx[path[-2]], "\x00trunk" if (u, v) in bundled else u)
        if end not in in_ends.setdefault(v, []):
            in_ends[v].append(end)
    out_port = _ports(nodes, out_ends, cx, node_w)
    in_port = _ports(nodes, in_ends, cx, node_w)
    routes: dict[tuple[str, str], list[tuple[Point, Point, Point, Point]]] = {}
    for (u, v), path in chain.items():
        pts: list[Point] = [(out_port[(u, v)], top[lay[u]] + node_h)]
        for d in path[1:-1]:
            pts += [(cx[d], top[lay[d]]), (cx[d], top[lay[d]] + node_h)]
        pts.append((in_port[(v, "\x00trunk" if (u, v) in bundled else u)], top[lay[v]]))
        segs = []
        for i in range(0, len(pts) - 1):
            p, q = pts[i], pts[i + 1]
            segs.append(_curve(p, q) if i % 2 == 0 else (p, p, q, q))  # even: across a gap; odd: through a row
        routes[(u, v)] = segs
    trunks: dict[str, tuple[list[tuple[Point, Point, Point, Point]], list[str]]] = {}
    for v in sorted(hubs):
        mine = sorted((lay[u], u) for (u, w) in bundled if w == v)
        if mine:  # the longest edge's route below its first segment is the whole trunk (empty: none is long)
            trunks[v] = (routes[(mine[0][1], v)][1:], [u for _, u in mine])
    joins = {e: 1 for e in bundled}  # an edge's own part: its first segment (to the trunk, or to the port)
    height = (top[n_layers - 1] + node_h + margin) if n_layers else 2 * margin
    return Layout(pos, {v: layer[v] for v in nodes}, node_w, node_h, width, height, routes, "builtin",
                  trunks, joins)


# ------------------------------------------------------------------ Graphviz
def _dot(nodes: Sequence[str], edges: Sequence[tuple[str, str]], node_w: float, node_h: float,
         margin: float, exe: str) -> Layout:
    """Run ``dot -Tplain`` and read node centres and edge splines back (points: 72 per inch)."""
    ids = {v: f"n{i}" for i, v in enumerate(nodes)}
    back = {b: a for a, b in ids.items()}
    lines = ["digraph G {", "rankdir=TB; nodesep=0.25; ranksep=0.6;",
             f'node [shape=box, fixedsize=true, width={node_w / 72:.4f}, height={node_h / 72:.4f}];']
    lines += [f"{ids[v]};" for v in nodes]
    lines += [f"{ids[u]} -> {ids[v]};" for u, v in edges]
    lines.append("}")
    run = subprocess.run([exe, "-Tplain"], input="\n".join(lines), capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip()[:200] or "dot failed")
    scale, height_in = 72.0, 0.0
    centre: dict[str, Point] = {}
    splines: dict[tuple[str, str], list[Point]] = {}
    for line in run.stdout.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "graph":
            height_in = float(f[3])
            width_in = float(f[2])
        elif f[0] == "node":
            centre[back[f[1]]] = (float(f[2]), float(f[3]))
        elif f[0] == "edge":
            k = int(f[3])
            pts = [(float(f[4 + 2 * i]), float(f[5 + 2 * i])) for i in range(k)]
            splines[(back[f[1]], back[f[2]])] = pts

    def tr(p: Point) -> Point:
        return (p[0] * scale + margin, (height_in - p[1]) * scale + margin)

    pos = {v: (tr(c)[0] - node_w / 2, tr(c)[1] - node_h / 2) for v, c in centre.items()}
    routes = {}
    for e, pts in splines.items():
        q = [tr(p) for p in pts]
        routes[e] = [(q[i], q[i + 1], q[i + 2], q[i + 3]) for i in range(0, len(q) - 3, 3)]
    layer = _layers(nodes, edges)
    return Layout(pos, layer, node_w, node_h, width_in * scale + 2 * margin, height_in * scale + 2 * margin,
                  routes, "dot")


def layout_edges(nodes: Sequence[str], edges: Sequence[tuple[str, str]], *, engine: str = "auto",
                 node_w: float = 150, node_h: float = 48, gap_x: float = 22, gap_y: float = 56,
                 margin: float = 20, dummy_w: float = 8, max_width: float | None = None,
                 bundle_min: int | None = None) -> Layout:
    """Lay out any DAG given as node ids (in a preferred order) and edges ``(dependency, user)``.

    ``engine``: ``"builtin"``, ``"dot"`` (Graphviz, must be on PATH) or
    ``"auto"`` (dot when on PATH and it succeeds within ``max_width``, else
    built-in). ``max_width``: the drawing's width at most (the built-in layout
    moves claims down until every layer fits; a single claim wider than it
    is the one exception). ``bundle_min``: edges into a claim with that many
    or more share a trunk (built-in layout only).

    Examples
    --------
    >>> lay = layout_edges(["a", "b", "c"], [("a", "c"), ("b", "c")], engine="builtin")
    >>> lay.layer, lay.pos["a"][1] < lay.pos["c"][1]
    ({'a': 0, 'b': 0, 'c': 1}, True)
    """
    if engine not in ("auto", "builtin", "dot"):
        raise ValueError(f"unknown layout engine {engine!r}")
    exe = shutil.which("dot") if engine in ("auto", "dot") else None
    if engine == "dot" and exe is None:
        raise RuntimeError("Graphviz dot is not on PATH")
    if exe is not None and nodes:
        try:
            drawn = _dot(nodes, edges, node_w, node_h, margin, exe)
            if engine == "dot" or max_width is None or drawn.width <= max_width:
                return drawn
        except (OSError, RuntimeError, ValueError, IndexError, KeyError, subprocess.SubprocessError):
            if engine == "dot":
                raise
    return _builtin(nodes, edges, node_w, node_h, gap_x, gap_y, margin, dummy_w, max_width, bundle_min)


def layout(graph: object, *, engine: str = "auto", only: Iterable[str] | None = None, **sizes: float) -> Layout:
    """Lay out a :class:`~symtrans.graph.ClaimGraph` (or the claims in ``only`` and the edges among them).

    Examples
    --------
    >>> from symtrans.graph import ClaimGraph
    >>> g = ClaimGraph()
    >>> part = layout(g, engine="builtin", only=["thm-5.3", *g.rests_on("thm-5.3")])
    >>> "thm-5.3" in part.pos and len(part.pos) < len(g.claims)
    True
    """
    keep = None if only is None else set(only)
    nodes = [v for v in graph.claims if keep is None or v in keep]  # type: ignore[attr-defined]
    edges = [(u, v) for u, v, _ in graph.edges()  # type: ignore[attr-defined]
             if keep is None or (u in keep and v in keep)]
    return layout_edges(nodes, edges, engine=engine, **sizes)


# ------------------------------------------------------------------ measuring a drawing
def _bezier(seg: tuple[Point, Point, Point, Point], steps: int) -> list[Point]:
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = seg
    out = []
    for i in range(steps + 1):
        t = i / steps
        a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t ** 3
        out.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return out


def _polyline(segs: Sequence[tuple[Point, Point, Point, Point]], steps: int = 16) -> list[Point]:
    pts: list[Point] = []
    for seg in segs:
        part = _bezier(seg, steps)
        pts += part if not pts else part[1:]
    return pts


def _segments_cross(p1: Point, p2: Point, q1: Point, q2: Point) -> bool:
    def orient(a: Point, b: Point, c: Point) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    d1, d2 = orient(q1, q2, p1), orient(q1, q2, p2)
    d3, d4 = orient(p1, p2, q1), orient(p1, p2, q2)
    return (d1 > 0) != (d2 > 0) and (d3 > 0) != (d4 > 0) and d1 * d2 < 0 and d3 * d4 < 0


def _meet(p1: Point, p2: Point, q1: Point, q2: Point, ends: set[Point]) -> bool:
    """Whether two segments cross, or touch at a point that is not one of ``ends`` (the edges' end points)."""
    def orient(a: Point, b: Point, c: Point) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    d1, d2 = orient(q1, q2, p1), orient(q1, q2, p2)
    d3, d4 = orient(p1, p2, q1), orient(p1, p2, q2)
    if d1 * d2 < 0 and d3 * d4 < 0:
        return True
    if d1 == d2 == d3 == d4 == 0 or d1 * d2 > 0 or d3 * d4 > 0:
        return False  # collinear or apart
    touch = p1 if d1 == 0 else p2 if d2 == 0 else q1 if d3 == 0 else q2
    return (round(touch[0], 6), round(touch[1], 6)) not in ends


def crossings(lay: Layout, steps: int = 16) -> int:
    """Count pairs of drawn curves that cross (sampled as polylines; touching at an end does not count).

    A bundled edge is drawn as its own part up to its trunk, and the trunk once (:meth:`Layout.drawn`).

    Examples
    --------
    >>> lay = layout_edges(["a", "b", "x", "y"], [("a", "y"), ("b", "x")], engine="builtin")
    >>> crossings(lay)
    0
    """
    drawn = [(e, segs) for e, segs in lay.drawn() if segs]
    keys = [e for e, _ in drawn]
    lines = {e: _polyline(segs, steps) for e, segs in drawn}
    boxes = {e: (min(p[0] for p in ps), min(p[1] for p in ps), max(p[0] for p in ps), max(p[1] for p in ps))
             for e, ps in lines.items()}
    count = 0
    for i, e in enumerate(keys):
        for f in keys[i + 1:]:
            a, b = boxes[e], boxes[f]
            if a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1]:
                continue
            pe, pf = lines[e], lines[f]
            ends = {(round(p[0], 6), round(p[1], 6)) for p in (pe[0], pe[-1], pf[0], pf[-1])}
            if any(_meet(pe[s], pe[s + 1], pf[t], pf[t + 1], ends)
                   for s in range(len(pe) - 1) for t in range(len(pf) - 1)):
                count += 1
    return count


def edges_through_nodes(lay: Layout, steps: int = 16, inset: float = 2.0) -> int:
    """Count edges whose drawn curve passes through a node other than its two ends.

    Examples
    --------
    >>> lay = layout_edges(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")], engine="builtin")
    >>> edges_through_nodes(lay)
    0
    """
    w, h = lay.node_w, lay.node_h
    count = 0
    for (u, v), segs in lay.drawn():
        if not segs:
            continue
        pts = _polyline(segs, steps)
        hit = False
        for node, (x, y) in lay.pos.items():
            if node in (u, v):
                continue
            x0, y0, x1, y1 = x + inset, y + inset, x + w - inset, y + h - inset
            if any(x0 < px < x1 and y0 < py < y1 for px, py in pts) or any(
                    _segments_cross(pts[i], pts[i + 1], a, b) for i in range(len(pts) - 1)
                    for a, b in (((x0, y0), (x1, y1)), ((x0, y1), (x1, y0)))):
                hit = True
                break
        count += hit
    return count
