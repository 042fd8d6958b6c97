"""The proof graph: claims as nodes, dependencies as edges, status derived from evidence.

:class:`ClaimGraph` wraps a networkx ``DiGraph`` with an edge from each
dependency to the claim that uses it (``u -> v``: *v rests on u*), of kind
``"statement"`` (needed to state v: definitions, hypotheses) or ``"proof"``
(used by v's proof). Building it refuses duplicate ids, references to unknown
ids, and cycles, each with a one-line :class:`~symtrans.errors.SymtransError`.

:func:`assess` derives every claim's status from evidence, and only from
evidence. The rules (each tested on hand-built graphs):

* **verdict**: :func:`~symtrans.evidence.combine_verdicts` of the claim's
  *fresh* evidence; stale evidence (another weights hash or toolkit version)
  is shown but does not count; no fresh evidence gives ``not-run``.
* **failing ancestors**: a claim with an ancestor whose verdict is ``fails``
  *rests on a failed claim* and says which.
* **given items**: definitions and hypotheses state no proposition of their
  own; they never block what rests on them (unless evidence makes them fail).
* **external items**: literature nodes and standard facts the paper takes
  from outside (paper status ``external``) are accepted as assumptions: they
  do not block, they are never reported as certified, and every claim lists
  the external results it assumes.
* **fully certified**: the claim's own verdict is ``certified`` or
  ``supported`` and no ancestor *blocks* it; an ancestor blocks when it fails,
  or when it is neither given nor external and has no positive verdict.

Examples
--------
>>> from proofs import Claim
>>> d = Claim(id="d", kind="definition", title="d", paper_ref="", section="", statement="",
...           latex="", paper_status="definition")
>>> t = Claim(id="t", kind="theorem", title="t", paper_ref="", section="", statement="",
...           latex="", paper_status="proved", statement_deps=("d",))
>>> g = ClaimGraph([d, t])
>>> g.rests_on("t"), g.impact("d")
(['d'], ['t'])
>>> from symtrans.evidence import Evidence, Verdict
>>> ev = Evidence(claim="t", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="ok")
>>> assess(g, {"t": [ev]})["t"].fully_certified
True
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx

from symtrans.errors import SymtransError, suggest
from symtrans.evidence import Evidence, PaperStatus, Verdict, combine_verdicts

if TYPE_CHECKING:
    from proofs import Claim

__all__ = ["ClaimGraph", "Standing", "EvidenceEntry", "ClaimStatus", "assess", "mark_stale", "EDGE_KINDS"]

#: The two kinds of dependency edge.
EDGE_KINDS: tuple[str, ...] = ("statement", "proof")


class Standing(str, enum.Enum):
    """Where a claim stands once its ancestors are taken into account.

    Examples
    --------
    >>> Standing("rests-on-failed").description
    'an ancestor fails'
    """

    FULLY_CERTIFIED = "fully-certified"
    BLOCKED = "blocked"
    RESTS_ON_FAILED = "rests-on-failed"
    FAILS = "fails"
    OPEN = "open"
    GIVEN = "given"
    EXTERNAL = "external"

    @property
    def description(self) -> str:
        """One line saying what the standing means.

        Examples
        --------
        >>> Standing.GIVEN.description
        'a definition or hypothesis: states nothing to check, blocks nothing'
        """
        return _STANDING_TEXT[self]


_STANDING_TEXT = {
    Standing.FULLY_CERTIFIED: "certified or supported, and so is every ancestor that can block it",
    Standing.BLOCKED: "certified or supported itself, but an ancestor has no positive verdict yet",
    Standing.RESTS_ON_FAILED: "an ancestor fails",
    Standing.FAILS: "its own evidence fails",
    Standing.OPEN: "no positive verdict yet (not run, inconclusive or not applicable)",
    Standing.GIVEN: "a definition or hypothesis: states nothing to check, blocks nothing",
    Standing.EXTERNAL: "an external result, accepted as an assumption and never reported as certified",
}


# --------------------------------------------------------------------------- the graph
class ClaimGraph:
    """The claims and their dependencies as a networkx ``DiGraph`` (edge: dependency -> dependent).

    Examples
    --------
    >>> g = ClaimGraph()  # the registry
    >>> "lem-variety" in g.rests_on("thm-5.3")
    True
    >>> g.rests_on("thm-5.3", depth=1)
    ['def-notation', 'lem-variety', 'lem-analytic-set', 'prop-5.1']
    >>> g.topological_order().index("prop-5.1") < g.topological_order().index("thm-5.3")
    True
    """

    def __init__(self, claims: Iterable[Claim] | None = None) -> None:
        if claims is None:
            from proofs import all_claims

            claims = all_claims()
        self.claims: dict[str, Claim] = {}
        for claim in claims:
            if claim.id in self.claims:
                raise SymtransError(f"duplicate claim id {claim.id!r}")
            self.claims[claim.id] = claim
        self._index = {cid: i for i, cid in enumerate(self.claims)}
        g = nx.DiGraph()
        for cid, claim in self.claims.items():
            g.add_node(cid, kind=claim.kind, paper_status=claim.paper_status.value)
        for cid, claim in self.claims.items():
            for dep, kind in claim.edges():
                if dep not in self.claims:
                    raise SymtransError(f"claim {cid!r} depends on " + suggest(dep, self.claims, "claim"))
                g.add_edge(dep, cid, kind=kind)
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = " -> ".join([cycle[0][0], *(v for _, v in cycle)])
            raise SymtransError(f"dependency cycle: {path} (each rests on the next one's claim)")
        self.graph: nx.DiGraph = g
        self._topo = list(nx.lexicographical_topological_sort(g, key=self._index.__getitem__))

    def __len__(self) -> int:
        return len(self.claims)

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self.claims

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.claims)

    def claim(self, claim_id: str) -> Claim:
        """Return the claim ``claim_id``; an unknown id suggests close ones.

        Examples
        --------
        >>> ClaimGraph().claim("prop-6.4")
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: unknown claim 'prop-6.4'; did you mean 'prop-6.3' or 'prop-6.2' or 'prop-5.4'?
        """
        try:
            return self.claims[claim_id]
        except KeyError:
            raise SymtransError(suggest(claim_id, self.claims, "claim")) from None

    def _ordered(self, ids: Iterable[str]) -> list[str]:
        pos = {cid: i for i, cid in enumerate(self._topo)}
        return sorted(set(ids), key=pos.__getitem__)

    def _walk(self, claim_id: str, depth: int | None, step: Any) -> list[str]:
        self.claim(claim_id)
        if depth is not None and depth < 0:
            raise SymtransError(f"depth must be >= 0, got {depth}")
        seen: dict[str, int] = {claim_id: 0}
        queue = deque([claim_id])
        while queue:
            node = queue.popleft()
            if depth is not None and seen[node] >= depth:
                continue
            for nxt in step(node):
                if nxt not in seen:
                    seen[nxt] = seen[node] + 1
                    queue.append(nxt)
        del seen[claim_id]
        return self._ordered(seen)

    def rests_on(self, claim_id: str, depth: int | None = None) -> list[str]:
        """What ``claim_id`` rests on: its ancestors (up to ``depth`` edges), in topological order.

        Examples
        --------
        >>> ClaimGraph().rests_on("prop-5.1")
        ['lem-rank-sum', 'lem-variety']
        """
        return self._walk(claim_id, depth, self.graph.predecessors)

    def impact(self, claim_id: str, depth: int | None = None) -> list[str]:
        """What rests on ``claim_id``: its descendants (up to ``depth`` edges), in topological order.

        Examples
        --------
        >>> ClaimGraph().impact("thm-7.3")
        ['thm-recovery', 'pgop', 'framework-9']
        """
        return self._walk(claim_id, depth, self.graph.successors)

    def blocks(self, claim_id: str, verdicts: Mapping[str, Verdict]) -> list[str]:
        """Ancestors of ``claim_id`` that stop it being fully certified, given each claim's verdict.

        An ancestor blocks when its verdict is ``fails``, or when it is neither
        given (definition, hypothesis) nor external and its verdict is not
        positive. Claims missing from ``verdicts`` count as ``not-run``.

        Examples
        --------
        >>> g = ClaimGraph()
        >>> g.blocks("prop-5.1", {})  # both lemmas are standard facts the paper takes as known
        []
        >>> g.blocks("cor-mlp-role", {"thm-5.3": Verdict.CERTIFIED, "prop-5.1": Verdict.SUPPORTED})
        ['prop-5.4']
        """
        return [a for a in self.rests_on(claim_id)
                if _blocking(self.claims[a], verdicts.get(a, Verdict.NOT_RUN))]

    def topological_order(self) -> list[str]:
        """Every claim id, dependencies before dependents (ties broken by paper order).

        Examples
        --------
        >>> ClaimGraph().topological_order()[0]
        'def-notation'
        """
        return list(self._topo)

    def edges(self) -> list[tuple[str, str, str]]:
        """Every edge as ``(dependency, dependent, kind)``, in topological order of the dependent.

        Examples
        --------
        >>> ("lem-analytic-set", "thm-5.3", "proof") in ClaimGraph().edges()
        True
        """
        return [(u, v, self.graph.edges[u, v]["kind"]) for v in self._topo for u in self._ordered(
            self.graph.predecessors(v))]

    def depths(self) -> dict[str, int]:
        """Longest-path depth of each claim (0 for claims that rest on nothing).

        Examples
        --------
        >>> ClaimGraph().depths()["thm-4.2"]
        2
        """
        depth: dict[str, int] = {}
        for v in self._topo:
            depth[v] = max((depth[u] + 1 for u in self.graph.predecessors(v)), default=0)
        return depth


def _blocking(claim: Claim, verdict: Verdict) -> bool:
    if verdict is Verdict.FAILS:
        return True
    return not (claim.given or claim.external or verdict.positive)


# --------------------------------------------------------------------------- status
@dataclass(frozen=True)
class EvidenceEntry:
    """One evidence record as the report shows it: the evidence, and whether it is stale (and why).

    Examples
    --------
    >>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s")
    >>> EvidenceEntry(e).to_dict()["stale"]
    False
    """

    evidence: Evidence
    stale: bool = False
    stale_reason: str = ""
    origin: str = "this run"  # or "previous report PATH" for evidence carried from an earlier report.json

    def to_dict(self) -> dict[str, Any]:
        """Return :meth:`Evidence.to_dict` plus ``stale``, ``stale_reason`` and ``origin``.

        Examples
        --------
        >>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s")
        >>> Evidence.from_dict(EvidenceEntry(e, True, "old").to_dict()) == e
        True
        """
        return {**self.evidence.to_dict(), "stale": self.stale, "stale_reason": self.stale_reason,
                "origin": self.origin}


def mark_stale(evidence: Evidence, *, weights_hash: str | None, toolkit_version: str) -> EvidenceEntry:
    """Wrap ``evidence``, marking it stale when its weights hash or toolkit version differs from now.

    Examples
    --------
    >>> e = Evidence(claim="c", producer="p", kind="numeric", verdict="supported", summary="s",
    ...              weights_hash="abc123", toolkit_version="0.0.9")
    >>> mark_stale(e, weights_hash="abc123", toolkit_version="0.1.0").stale_reason
    'produced by symtrans 0.0.9, now 0.1.0'
    >>> mark_stale(e, weights_hash=None, toolkit_version="0.0.9").stale_reason
    'produced from weights abc123; no model is loaded now to confirm them'
    """
    if not evidence.stale(weights_hash=weights_hash, toolkit_version=toolkit_version):
        return EvidenceEntry(evidence)
    if evidence.toolkit_version != toolkit_version:
        reason = f"produced by symtrans {evidence.toolkit_version}, now {toolkit_version}"
    elif weights_hash is None:
        reason = f"produced from weights {evidence.weights_hash[:12]}; no model is loaded now to confirm them"
    else:
        reason = f"produced from weights {evidence.weights_hash[:12]}, now {weights_hash[:12]}"
    return EvidenceEntry(evidence, True, reason)


@dataclass(frozen=True)
class ClaimStatus:
    """A claim's derived status: verdict from its own evidence, standing from its ancestors.

    Examples
    --------
    >>> s = assess(ClaimGraph(), {})["thm-4.2"]
    >>> s.verdict.value, s.standing.value, s.fully_certified
    ('not-run', 'open', False)
    """

    id: str
    verdict: Verdict
    standing: Standing
    evidence: tuple[EvidenceEntry, ...] = ()
    blocked_by: tuple[str, ...] = ()
    failed_ancestors: tuple[str, ...] = ()
    external_ancestors: tuple[str, ...] = ()
    disagreement: str | None = None
    stale: bool = False

    @property
    def fully_certified(self) -> bool:
        """True when the claim and every ancestor that can block it are certified or supported.

        Examples
        --------
        >>> assess(ClaimGraph(), {})["def-ln"].fully_certified
        False
        """
        return self.standing is Standing.FULLY_CERTIFIED

    def to_dict(self) -> dict[str, Any]:
        """Return the status as JSON-ready data.

        Examples
        --------
        >>> assess(ClaimGraph(), {})["lit-dong"].to_dict()["standing"]
        'external'
        """
        return {"verdict": self.verdict.value, "fully_certified": self.fully_certified,
                "standing": self.standing.value, "blocked_by": list(self.blocked_by),
                "rests_on_failed": list(self.failed_ancestors),
                "assumes_external": list(self.external_ancestors), "disagreement": self.disagreement,
                "stale": self.stale, "evidence": [e.to_dict() for e in self.evidence]}


_ASSERTED = (PaperStatus.PROVED, PaperStatus.SKETCH, PaperStatus.PARTIALLY_PROVED)
_TENTATIVE = (PaperStatus.CONJECTURED, PaperStatus.PREDICTION)


def _disagreement(claim: Claim, verdict: Verdict, failed: Sequence[str]) -> str | None:
    status = claim.paper_status.value
    if verdict is Verdict.FAILS:
        return f"the paper's status is '{status}'; the toolkit's evidence fails"
    if failed and claim.paper_status in _ASSERTED:
        return f"the paper's status is '{status}'; it rests on {', '.join(failed)}, which fail"
    if verdict.positive and claim.paper_status in _TENTATIVE:
        return f"the paper's status is '{status}'; the toolkit's evidence is '{verdict.value}'"
    return None


def assess(graph: ClaimGraph, evidence: Mapping[str, Sequence[Evidence | EvidenceEntry]], *,
           weights_hash: str | None = None, toolkit_version: str | None = None) -> dict[str, ClaimStatus]:
    """Derive every claim's verdict and standing from ``evidence`` (claim id -> records).

    Records that are already :class:`EvidenceEntry` keep their stale mark;
    plain :class:`Evidence` is checked against ``weights_hash`` and
    ``toolkit_version`` (default: this toolkit's version). Returns statuses in
    topological order.

    Examples
    --------
    >>> from symtrans.evidence import Verdict
    >>> g = ClaimGraph()
    >>> bad = Evidence(claim="thm-7.3", producer="p", kind="numeric", verdict=Verdict.FAILS, summary="no")
    >>> st = assess(g, {"thm-7.3": [bad]})
    >>> st["thm-recovery"].standing.value, st["thm-recovery"].failed_ancestors
    ('rests-on-failed', ('thm-7.3',))
    >>> assess(g, {"nope": [bad]})
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: evidence for unknown claim 'nope'; did you mean 'pgop'?
    """
    from symtrans import __version__

    version = toolkit_version or __version__
    for cid in evidence:
        if cid not in graph:
            raise SymtransError("evidence for " + suggest(cid, graph.claims, "claim"))
    entries: dict[str, tuple[EvidenceEntry, ...]] = {}
    verdicts: dict[str, Verdict] = {}
    for cid in graph.topological_order():
        wrapped = tuple(e if isinstance(e, EvidenceEntry)
                        else mark_stale(e, weights_hash=weights_hash, toolkit_version=version)
                        for e in evidence.get(cid, ()))
        for e in wrapped:
            if e.evidence.claim != cid:
                raise SymtransError(f"evidence from {e.evidence.producer!r} is about {e.evidence.claim!r}, "
                                    f"filed under {cid!r}")
        entries[cid] = wrapped
        verdicts[cid] = combine_verdicts(e.evidence.verdict for e in wrapped if not e.stale)
    out: dict[str, ClaimStatus] = {}
    for cid in graph.topological_order():
        claim, verdict = graph.claims[cid], verdicts[cid]
        ancestors = graph.rests_on(cid)
        failed = tuple(a for a in ancestors if verdicts[a] is Verdict.FAILS)
        blockers = tuple(a for a in ancestors if _blocking(graph.claims[a], verdicts[a]))
        external = tuple(a for a in ancestors if graph.claims[a].external)
        if verdict is Verdict.FAILS:
            standing = Standing.FAILS
        elif failed:
            standing = Standing.RESTS_ON_FAILED
        elif claim.external:
            standing = Standing.EXTERNAL
        elif verdict.positive:
            standing = Standing.BLOCKED if blockers else Standing.FULLY_CERTIFIED
        elif claim.given:
            standing = Standing.GIVEN
        else:
            standing = Standing.OPEN
        out[cid] = ClaimStatus(cid, verdict, standing, entries[cid], blockers, failed, external,
                               _disagreement(claim, verdict, failed), any(e.stale for e in entries[cid]))
    return out
