"""Lay out the proof graph in layers, without Graphviz: positions for an inline SVG.

Each claim's layer is its longest-path depth from the claims that rest on
nothing; a claim that rests on nothing is then moved down to just above its
first user, so that lemmas and literature sit next to what uses them. Within a
layer, claims are ordered by a few barycentre sweeps (fewer crossings), and a
layer wider than ``per_row`` wraps onto several staggered rows.

Examples
--------
>>> from symtrans.graph import ClaimGraph
>>> lay = layout(ClaimGraph())
>>> lay.layer["framework-9"] == max(lay.layer.values())
True
>>> lay.layer["lit-dong"] == lay.layer["framework-9"] - 1
True
"""

from __future__ import annotations

from dataclasses import dataclass

from symtrans.graph import ClaimGraph

__all__ = ["Layout", "layout"]


@dataclass(frozen=True)
class Layout:
    """Node positions (top-left corners) and sizes for the SVG.

    Examples
    --------
    >>> from symtrans.graph import ClaimGraph
    >>> lay = layout(ClaimGraph())
    >>> set(lay.pos) == set(ClaimGraph().claims), lay.width <= 1400
    (True, True)
    """

    pos: dict[str, tuple[float, float]]
    layer: dict[str, int]
    node_w: float
    node_h: float
    width: float
    height: float


def _layers(graph: ClaimGraph) -> dict[str, int]:
    layer = graph.depths()
    g = graph.graph
    for v in graph.topological_order():
        if g.in_degree(v) == 0 and g.out_degree(v) > 0:
            layer[v] = min(layer[s] for s in g.successors(v)) - 1
    return layer


def _order(graph: ClaimGraph, layer: dict[str, int], sweeps: int = 4) -> list[list[str]]:
    g = graph.graph
    n_layers = max(layer.values()) + 1
    rows: list[list[str]] = [[] for _ in range(n_layers)]
    for v in graph.claims:  # paper order as the starting order
        rows[layer[v]].append(v)

    def position() -> dict[str, float]:
        pos = {}
        for row in rows:
            for i, v in enumerate(row):
                pos[v] = (i + 0.5) / len(row)
        return pos

    for _ in range(sweeps):
        for direction in (1, -1):
            indices = range(1, n_layers) if direction == 1 else range(n_layers - 2, -1, -1)
            for k in indices:
                pos = position()
                nbrs = g.predecessors if direction == 1 else g.successors

                def key(v: str, pos: dict[str, float] = pos, nbrs=nbrs) -> float:  # type: ignore[no-untyped-def]
                    near = [pos[u] for u in nbrs(v)]
                    return sum(near) / len(near) if near else pos[v]

                rows[k].sort(key=key)
    return rows


def layout(graph: ClaimGraph, *, per_row: int = 8, node_w: float = 150, node_h: float = 48,
           gap_x: float = 18, gap_y: float = 62, margin: float = 20) -> Layout:
    """Compute positions for every claim of ``graph``.

    Examples
    --------
    >>> from symtrans.graph import ClaimGraph
    >>> lay = layout(ClaimGraph(), per_row=4)
    >>> max(list(lay.layer.values()).count(k) for k in set(lay.layer.values())) > 4  # some layer wraps
    True
    """
    layer = _layers(graph)
    rows = _order(graph, layer)
    slot = node_w + gap_x
    width = margin * 2 + per_row * slot - gap_x
    pos: dict[str, tuple[float, float]] = {}
    y = margin
    for row in rows:
        chunks = [row[i:i + per_row] for i in range(0, len(row), per_row)] or [[]]
        if len(chunks) > 1:  # spread evenly over the sub-rows
            k = len(chunks)
            chunks = [row[i::k] for i in range(k)]
        for j, chunk in enumerate(chunks):
            used = len(chunk) * slot - gap_x
            x0 = (width - used) / 2 + (slot / 4 if j % 2 else 0)
            for i, v in enumerate(chunk):
                pos[v] = (x0 + i * slot, y)
            y += node_h + (gap_y * 0.55 if j < len(chunks) - 1 else gap_y)
    return Layout(pos, layer, node_w, node_h, width, y - gap_y + margin)
