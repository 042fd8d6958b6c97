"""The proof graph: claims as nodes, dependencies as edges, status derived from evidence.

:class:`ClaimGraph` wraps a networkx ``DiGraph`` with an edge from each
dependency to the claim that uses it (``u -> v``: *v rests on u*), of kind
``"statement"`` (needed to state v: definitions, hypotheses) or ``"proof"``
(used by v's proof). Building it refuses duplicate ids, references to unknown
ids, and cycles, each with a one-line :class:`~symtrans.errors.SymtransError`.

:func:`assess` derives every claim's status from evidence, and only from
evidence. The rules (each tested on hand-built graphs):

* **verdict**: :func:`~symtrans.evidence.combine_verdicts` of the claim's
  *fresh* evidence with the statement's quantifier, each record counted as
  :func:`counted_verdict` says (a ``fails`` on a generic statement from a
  single instance counts as ``inconclusive``; a certificate short of the
  statement's full scope counts as ``supported``): any failure, then a
  certificate, then for a statement about every instance inconclusive
  before support, for one about some or generic instances support before
  inconclusive; stale evidence is shown but does not count; no fresh
  evidence gives ``not-run``.
* **readings**: a claim with readings gets one verdict per reading; the
  claim's verdict is theirs when they agree and ``reading-dependent`` when
  some fail and others do not (:func:`combine_readings`).
* **failing ancestors**: a claim with an ancestor whose verdict is ``fails``
  *rests on a failed claim* and says which.
* **given items**: definitions and hypotheses state no proposition of their
  own; they never block what rests on them (unless evidence makes them fail).
* **external items**: literature nodes and standard facts the paper takes
  from outside (paper status ``external``) are accepted as assumptions: they
  do not block, they are never reported as certified, and every claim lists
  the external results it assumes.
* **fully certified**: the claim's own verdict is ``certified`` (every
  reading, at its full scope), no producer of it raised, and every ancestor
  that states something (neither given nor external) is ``certified`` too.
  A positive claim short of that is ``supported`` (numeric or instance
  evidence somewhere) or ``blocked`` (an ancestor has no positive verdict);
  an ancestor blocks when it fails, or when it is neither given nor external
  and has no positive verdict.

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
>>> from symtrans.evidence import Evidence, Scope, Verdict
>>> ev = Evidence(claim="t", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="ok",
...               scope=Scope("all-sizes", "a proof"), details={"certificate": {"schema": "a re-checkable file"}})
>>> assess(g, {"t": [ev]})["t"].fully_certified
True
>>> text = Evidence(claim="t", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="ok",
...                 scope=Scope("all-sizes", "a written proof"))
>>> assess(g, {"t": [text]})["t"].verdict.value  # proved (text): no certificate file to re-check
'supported'
>>> few = Evidence(claim="t", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED, summary="ok",
...                scope=Scope("instances", "n = 3"))
>>> assess(g, {"t": [few]})["t"].standing.value  # an instance certificate does not certify the claim
'supported'
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx

from symtrans.errors import SymtransError, suggest
from symtrans.evidence import (Evidence, PaperStatus, Scope, Verdict, combine_verdicts,  # noqa: F401  (Scope: doctests)
                               record_certificates, split_reading)

if TYPE_CHECKING:
    from proofs import Claim

__all__ = ["ClaimGraph", "Standing", "EvidenceEntry", "ClaimStatus", "ReadingStatus", "assess", "mark_stale",
           "EDGE_KINDS", "counted_verdict", "kernel_proved", "combine_readings", "full_scope", "count_records", "verdict_table"]

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
    SUPPORTED = "supported"
    READING_DEPENDENT = "reading-dependent"

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
    Standing.FULLY_CERTIFIED: "exact certificates of its full scope, on it and on every ancestor that states "
                              "something",
    Standing.SUPPORTED: "positive, and so is every ancestor that can block it, but some evidence is numeric "
                        "or covers only listed instances",
    Standing.BLOCKED: "certified or supported itself, but an ancestor has no positive verdict yet",
    Standing.READING_DEPENDENT: "its readings disagree: some hold and some fail",
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
        for cid, claim in self.claims.items():  # a reading's rests_on refines its claim's dependencies, never adds
            ancestors = set(self.rests_on(cid))
            for r in claim.readings:
                for dep in r.rests_on or ():
                    owner, reading = split_reading(dep)
                    if owner not in ancestors:
                        raise SymtransError(f"reading {r.id!r} rests on {dep!r}, which is not among what its claim "
                                            f"rests on ({', '.join(sorted(ancestors)) or 'nothing'})")
                    if reading and dep not in {x.id for x in self.claims[owner].readings}:
                        raise SymtransError(f"reading {r.id!r} rests on {dep!r}: "
                                            + suggest(dep, [x.id for x in self.claims[owner].readings], "reading"))

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
        >>> ClaimGraph().claim(None)
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: claim id: expected a string, got NoneType
        """
        if not isinstance(claim_id, str):
            raise SymtransError(f"claim id: expected a string, got {type(claim_id).__name__}")
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

    def reading_rests_on(self, reading: Any) -> list[str] | None:
        """What a reading's standing rests on where it names that (``rests_on``): those claims and readings and what
        they rest on in turn, dependencies first; None where it names nothing (its claim's ancestors hold).

        Examples
        --------
        >>> g = ClaimGraph()
        >>> g.reading_rests_on(g.claims["thm-recovery"].reading("thm-recovery/sum"))
        ['def-notation', 'thm-7.3/sum']
        >>> g.reading_rests_on(g.claims["thm-7.3"].reading("thm-7.3/sum")) is None
        True
        """
        if reading.rests_on is None:
            return None
        out: list[str] = []
        for dep in reading.rests_on:
            owner, name = split_reading(dep)
            inner = self.reading_rests_on(self.claims[owner].reading(dep)) if name else None
            out += [*(self.rests_on(owner) if inner is None else inner), dep]
        return list(dict.fromkeys(out))

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
    counted_as: Verdict | None = None  # what the record counts as towards its reading (set by assess)
    counted_note: str = ""  # why it counts as something other than its own verdict

    def to_dict(self) -> dict[str, Any]:
        """Return :meth:`Evidence.to_dict` plus ``stale``, ``stale_reason``, ``origin``, ``counted_as``, ``counted_note``.

        Examples
        --------
        >>> e = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s")
        >>> Evidence.from_dict(EvidenceEntry(e, True, "old").to_dict()) == e
        True
        """
        counted = None if self.stale else (self.counted_as or self.evidence.verdict).value
        return {**self.evidence.to_dict(), "stale": self.stale, "stale_reason": self.stale_reason,
                "origin": self.origin, "counted_as": counted, "counted_note": self.counted_note}


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


def full_scope(quantifier: str) -> tuple[str, ...]:
    """The scope kinds that make a certificate cover a statement with this quantifier in full.

    Examples
    --------
    >>> full_scope("generic"), full_scope("model-every")
    (('all-sizes',), ('all-sizes', 'model'))
    """
    if quantifier in ("model-every", "model-some"):
        return ("all-sizes", "model")
    return ("all-sizes",)


def counted_verdict(ev: Evidence, quantifier: str) -> tuple[Verdict, str]:
    """What one record counts as towards a statement with this quantifier, and why if it differs.

    * ``fails`` on a generic statement counts only with scope ``all-sizes`` or
      ``open-set``: a single instance lies, at worst, in the null exceptional
      set, so it counts as ``inconclusive``.
    * ``certified`` counts as ``certified`` only with the statement's full
      scope (:func:`full_scope`); an instance certificate counts as ``supported``.
    * a record made on a layer subset (``--layers``: ``context["layers"]``) about
      the model: on a ``model-every`` statement its ``certified`` or ``supported``
      counts as ``inconclusive`` (the layers left out are not seen), while its
      ``fails`` still counts (a counterexample at a layer of the subset refutes
      a statement about every layer); on a ``model-some`` statement its ``fails``
      counts as ``inconclusive`` (another layer may have it) and its
      ``certified`` as ``supported``, while a ``supported`` stands (a witness at
      a layer of the subset is a witness). The note names the subset.
    * an ``all-sizes`` ``certified`` record counts as ``certified`` only when it
      carries a certificate that ``symtrans verify`` re-checks
      (:func:`has_certificate`); a written proof checked at small sizes inside
      the producer is ``proved (text)`` and counts as ``supported``.

    Examples
    --------
    >>> from symtrans.evidence import Scope
    >>> bad = Evidence(claim="c", producer="p", kind="numeric", verdict="fails", summary="one instance")
    >>> counted_verdict(bad, "generic")[0].value, counted_verdict(bad, "universal")[0].value
    ('inconclusive', 'fails')
    >>> few = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="3 sizes",
    ...                scope=Scope("instances", "three toy sizes"))
    >>> counted_verdict(few, "generic")
    (<Verdict.SUPPORTED: 'supported'>, 'instance certificate: certified on the listed instances only (three toy sizes)')
    >>> part = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="2 of 6 layers",
    ...                 scope=Scope("model", "every layer"), context={"layers": "0,1"})
    >>> counted_verdict(part, "model-every")[0].value  # a subset (--layers) never establishes every layer
    'inconclusive'
    >>> counted_verdict(Evidence.from_dict({**part.to_dict(), "verdict": "fails"}), "model-every")[0].value
    'fails'
    >>> counted_verdict(Evidence.from_dict({**part.to_dict(), "verdict": "supported"}), "model-some")[0].value
    'supported'
    """
    v = ev.verdict
    kind = ev.scope.kind if ev.scope is not None else None
    subset = (ev.context or {}).get("layers")  # --layers: the record looked at these layers only
    if subset is not None and quantifier in ("model-every", "model-some"):
        if quantifier == "model-every" and v in (Verdict.CERTIFIED, Verdict.SUPPORTED):
            return Verdict.INCONCLUSIVE, (f"layers {subset} only (--layers): a statement about every layer of the "
                                          f"model is not established from a subset (it was {v.value} on layers "
                                          f"{subset}; the other layers were not looked at)")
        if v is Verdict.CERTIFIED:
            return Verdict.SUPPORTED, (f"layers {subset} only (--layers): a witness at a layer of the subset, "
                                       "counted as supported")
        if v is Verdict.FAILS and quantifier == "model-some":
            return Verdict.INCONCLUSIVE, (f"layers {subset} only (--layers): a layer outside the subset may have "
                                          "it; a statement about some layer is not refuted from a subset")
    if v is Verdict.FAILS and quantifier == "generic" and kind not in ("all-sizes", "open-set"):
        return Verdict.INCONCLUSIVE, ("an instance cannot refute a generic statement (the failure is not shown "
                                      "on an open set or for all sizes)")
    if v is Verdict.CERTIFIED and kind not in full_scope(quantifier):
        what = ev.scope.description if ev.scope is not None else "scope not stated"
        return Verdict.SUPPORTED, f"instance certificate: certified on the listed instances only ({what})"
    if v is Verdict.CERTIFIED and kind == "all-sizes" and not (has_certificate(ev) or kernel_proved(ev)):
        return Verdict.SUPPORTED, PROVED_TEXT
    return v, ""


def kernel_proved(ev: Evidence) -> bool:
    """True when the record says a proof kernel accepted its theorem in this run (``details["kernel"]``).

    Written only by :func:`symtrans.producers.symbolic.kernel_record` after :func:`symtrans.certify.coq.kernel_check`
    succeeded; a record carried from an earlier report without a certificate file is stale, so this is
    never taken on trust from a file.

    Examples
    --------
    >>> ok = {"ok": True, "theorem": "T.x", "theorems": {"T.x": "T.Statements.x"}}
    >>> kernel_proved(Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s",
    ...                        details={"kernel": ok}))
    True
    >>> kernel_proved(Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s",
    ...                        details={"kernel": {**ok, "ok": False}}))
    False
    """
    k = (ev.details or {}).get("kernel") or {}
    return k.get("ok") is True and k.get("theorem") in (k.get("theorems") or {})


#: why an all-sizes record without a certificate file counts as supported (issue: evidence read from files)
PROVED_TEXT = ("proved (text): the all-sizes argument is a written proof, checked inside the producer at small "
               "sizes, with no certificate file that `symtrans verify` re-checks; it counts as supported")


def has_certificate(ev: Evidence) -> bool:
    """True when the record carries a certificate (``details["certificate"]`` or ``["certificates"]``) to re-check.

    Examples
    --------
    >>> bare = Evidence(claim="c", producer="p", kind="symbolic", verdict="certified", summary="s")
    >>> has_certificate(bare), has_certificate(Evidence.from_dict({**bare.to_dict(), "details": {"certificate": {}}}))
    (False, False)
    >>> has_certificate(Evidence.from_dict({**bare.to_dict(), "details": {"certificate": {"schema": "x"}}}))
    True
    """
    return bool(record_certificates(ev))


def combine_readings(verdicts: Sequence[Verdict]) -> Verdict:
    """A claim's verdict from its readings' verdicts.

    When some readings fail and others do not, the claim is
    ``reading-dependent``; all that ran failing, it fails. Otherwise a
    positive verdict needs every ran reading positive (the weakest of them:
    ``supported`` below ``certified``); an inconclusive reading makes the
    claim inconclusive; not-applicable readings are left out when any other
    applies. A reading that did not run (or whose producer raised) is not
    evidence either way, but it keeps the claim from being ``certified``:
    the claim is then at most ``supported`` (:attr:`ClaimStatus.missing`
    says which reading is missing and why).

    Examples
    --------
    >>> V = Verdict
    >>> combine_readings([V.CERTIFIED, V.FAILS, V.SUPPORTED]).value
    'reading-dependent'
    >>> combine_readings([V.FAILS, V.FAILS, V.NOT_RUN]).value
    'fails'
    >>> combine_readings([V.CERTIFIED, V.SUPPORTED]).value, combine_readings([V.CERTIFIED, V.NOT_APPLICABLE]).value
    ('supported', 'certified')
    >>> combine_readings([V.NOT_RUN, V.NOT_RUN]).value, combine_readings([V.INCONCLUSIVE, V.CERTIFIED]).value
    ('not-run', 'inconclusive')
    >>> combine_readings([V.CERTIFIED, V.NOT_RUN]).value  # one reading missing: never certified
    'supported'
    """
    ran = [v for v in verdicts if v is not Verdict.NOT_RUN]
    if not ran:
        return Verdict.NOT_RUN
    if Verdict.FAILS in ran:
        return Verdict.FAILS if all(v is Verdict.FAILS for v in ran) else Verdict.READING_DEPENDENT
    applicable = [v for v in ran if v is not Verdict.NOT_APPLICABLE]
    if not applicable:
        return Verdict.NOT_APPLICABLE
    if Verdict.INCONCLUSIVE in applicable:
        return Verdict.INCONCLUSIVE
    if Verdict.SUPPORTED in applicable or len(ran) < len(verdicts):
        return Verdict.SUPPORTED
    return Verdict.CERTIFIED


@dataclass(frozen=True)
class ReadingStatus:
    """One reading's verdict and standing, from the records tagged with it.

    Examples
    --------
    >>> st = assess(ClaimGraph(), {})["thm-7.3"]
    >>> [(r.id, r.verdict.value) for r in st.readings][:1]
    [('thm-7.3/sum', 'not-run')]
    """

    id: str
    verdict: Verdict
    standing: Standing
    evidence: tuple[EvidenceEntry, ...] = ()
    reading: Any = None  # the proofs.Reading described
    blocked_by: tuple[str, ...] = ()  # what it rests on (claims or readings) without a positive verdict
    failed_ancestors: tuple[str, ...] = ()  # what it rests on that fails

    def to_dict(self) -> dict[str, Any]:
        """Return the reading's description and status as JSON-ready data.

        Examples
        --------
        >>> assess(ClaimGraph(), {})["thm-7.3"].readings[1].to_dict()["id"]
        'thm-7.3/wo'
        """
        out = self.reading.to_dict() if self.reading is not None else {"id": self.id}
        out.update({"verdict": self.verdict.value, "standing": self.standing.value, "blocked_by": list(self.blocked_by),
                    "rests_on_failed": list(self.failed_ancestors),
                    "evidence": [e.to_dict() for e in self.evidence]})
        return out


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
    readings: tuple[ReadingStatus, ...] = ()
    raised: bool = False  # a producer of this claim raised: it cannot be fully certified
    missing: tuple[str, ...] = ()  # "reading: why" per reading that did not run or whose producer raised

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
                "stale": self.stale, "raised": self.raised, "missing_readings": list(self.missing),
                "evidence": [e.to_dict() for e in self.evidence],
                "readings": [r.to_dict() for r in self.readings]}


_ASSERTED = (PaperStatus.PROVED, PaperStatus.SKETCH, PaperStatus.PARTIALLY_PROVED)
_TENTATIVE = (PaperStatus.CONJECTURED, PaperStatus.PREDICTION)


def _disagreement(claim: Claim, verdict: Verdict, failed: Sequence[str]) -> str | None:
    status = claim.paper_status.value
    if verdict is Verdict.FAILS:
        return f"the paper's status is '{status}'; the toolkit's evidence fails"
    if verdict is Verdict.READING_DEPENDENT and claim.paper_status in _ASSERTED:
        return f"the paper's status is '{status}'; the verdict depends on the reading (some hold, some fail)"
    if failed and claim.paper_status in _ASSERTED:
        return f"the paper's status is '{status}'; it rests on {', '.join(failed)}, which fail"
    if verdict.positive and claim.paper_status in _TENTATIVE:
        return f"the paper's status is '{status}'; the toolkit's evidence is '{verdict.value}'"
    return None


def assess(graph: ClaimGraph, evidence: Mapping[str, Sequence[Evidence | EvidenceEntry]], *,
           weights_hash: str | None = None, toolkit_version: str | None = None,
           raised: Iterable[str] = ()) -> dict[str, ClaimStatus]:
    """Derive every claim's verdict and standing from ``evidence`` (claim id -> records).

    Records that are already :class:`EvidenceEntry` keep their stale mark;
    plain :class:`Evidence` is checked against ``weights_hash`` and
    ``toolkit_version`` (default: this toolkit's version). ``raised`` names
    claims one of whose producers raised (they cannot be fully certified).
    Returns statuses in topological order.

    Examples
    --------
    >>> from symtrans.evidence import Scope, Verdict
    >>> g = ClaimGraph()
    >>> bad = Evidence(claim="thm-5.3", producer="p", kind="symbolic", verdict=Verdict.FAILS, summary="no",
    ...                scope=Scope("all-sizes", "proof"))
    >>> st = assess(g, {"thm-5.3": [bad]})
    >>> st["cor-mlp-role"].standing.value, st["cor-mlp-role"].failed_ancestors
    ('rests-on-failed', ('thm-5.3',))
    >>> assess(g, {"nope": [bad]})
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: evidence for unknown claim 'nope'; did you mean 'pgop'?
    """
    from symtrans import __version__

    version = toolkit_version or __version__
    raised = set(raised)
    for cid in evidence:
        if cid not in graph:
            raise SymtransError("evidence for " + suggest(cid, graph.claims, "claim"))
    entries: dict[str, tuple[EvidenceEntry, ...]] = {}
    verdicts: dict[str, Verdict] = {}
    reading_verdicts: dict[str, list[tuple[str, Verdict, tuple[EvidenceEntry, ...]]]] = {}
    missing: dict[str, list[str]] = {}
    for cid in graph.topological_order():
        claim = graph.claims[cid]
        wrapped = []
        for e in evidence.get(cid, ()):
            entry = e if isinstance(e, EvidenceEntry) else mark_stale(e, weights_hash=weights_hash,
                                                                     toolkit_version=version)
            wrapped.append(_count(claim, entry))
        entries[cid] = tuple(wrapped)
        if claim.readings:
            per = []
            for r in claim.readings:
                mine = tuple(e for e in wrapped if e.evidence.reading == r.id)
                v, why = _unless_raised(combine_verdicts((e.counted_as for e in mine if not e.stale), r.quantifier),
                                        mine)
                if why or v is Verdict.NOT_RUN:
                    missing.setdefault(cid, []).append(f"{r.id}: {why or _not_run_reason(mine)}")
                per.append((r.id, v, mine))
            reading_verdicts[cid] = per
            verdicts[cid] = combine_readings([v for _, v, _ in per])  # a missing reading: never certified
            if verdicts[cid] is Verdict.NOT_RUN and any(  # a claim-level producer that does not apply here
                    e.evidence.reading is None and e.evidence.verdict is Verdict.NOT_APPLICABLE and not e.stale
                    for e in wrapped):
                verdicts[cid] = Verdict.NOT_APPLICABLE
        else:
            verdicts[cid], why = _unless_raised(combine_verdicts((e.counted_as for e in wrapped if not e.stale),
                                                                 claim.quantifier), wrapped)
            if why:
                missing[cid] = [why]
    every = {**verdicts, **{rid: v for per in reading_verdicts.values() for rid, v, _ in per}}  # claims and readings

    def against(ancestors: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """(failed, blocking, not certified though stating something) among ``ancestors``: claims or readings."""
        owner = {a: graph.claims[split_reading(a)[0]] for a in ancestors}
        return (tuple(a for a in ancestors if every[a] is Verdict.FAILS),
                tuple(a for a in ancestors if _blocking(owner[a], every[a])),
                tuple(a for a in ancestors if _states(owner[a]) and every[a] is not Verdict.CERTIFIED))

    out: dict[str, ClaimStatus] = {}
    for cid in graph.topological_order():
        claim, verdict = graph.claims[cid], verdicts[cid]
        ancestors = graph.rests_on(cid)
        failed, blockers, inexact = against(ancestors)
        external = tuple(a for a in ancestors if graph.claims[a].external)

        def standing_of(v: Verdict, failed: tuple[str, ...] = failed, blockers: tuple[str, ...] = blockers,
                        inexact: tuple[str, ...] = inexact) -> Standing:
            if v is Verdict.FAILS:
                return Standing.FAILS
            if failed:
                return Standing.RESTS_ON_FAILED
            if v is Verdict.READING_DEPENDENT:
                return Standing.READING_DEPENDENT
            if claim.external:
                return Standing.EXTERNAL
            if v.positive:
                if blockers:
                    return Standing.BLOCKED
                exact = v is Verdict.CERTIFIED and not inexact and cid not in raised
                return Standing.FULLY_CERTIFIED if exact else Standing.SUPPORTED
            return Standing.GIVEN if claim.given else Standing.OPEN

        def reading_status(rid: str, v: Verdict, mine: tuple[EvidenceEntry, ...]) -> ReadingStatus:
            """A reading's status: its standing against what it names (``rests_on``) where it names that, else
            against its claim's ancestors; with what of those fails or blocks it."""
            own = graph.reading_rests_on(claim.reading(rid))
            f, b, i = (failed, blockers, inexact) if own is None else against(own)
            return ReadingStatus(rid, v, standing_of(v, f, b, i), mine, claim.reading(rid), b, f)

        readings = tuple(reading_status(rid, v, mine) for rid, v, mine in reading_verdicts.get(cid, ()))
        standing = standing_of(verdict)
        if standing is Standing.FULLY_CERTIFIED and any(r.verdict is not Verdict.CERTIFIED for r in readings):
            standing = Standing.SUPPORTED  # a claim is fully certified only in every reading
        out[cid] = ClaimStatus(cid, verdict, standing, entries[cid], blockers, failed, external,
                               _disagreement(claim, verdict, failed), any(e.stale for e in entries[cid]),
                               readings, cid in raised, tuple(missing.get(cid, ())))
    return out


def _unless_raised(verdict: Verdict, entries: Sequence[EvidenceEntry]) -> tuple[Verdict, str]:
    """A claim's or reading's verdict capped at ``supported`` when one of its producers raised, and that error."""
    why = _raised_in(entries)
    return (Verdict.SUPPORTED if why and verdict is Verdict.CERTIFIED else verdict), why


def _raised_in(entries: Sequence[EvidenceEntry]) -> str:
    """The error of the first record saying its producer raised (``details["error"]``), or ``""``."""
    for e in entries:
        if e.evidence.verdict is Verdict.NOT_RUN and (e.evidence.details or {}).get("error"):
            return f"producer {e.evidence.producer} raised {e.evidence.details['error']}"
    return ""


def _not_run_reason(entries: Sequence[EvidenceEntry]) -> str:
    """Why a reading has no verdict: its records' not-run summaries, stale records, or none at all."""
    if not entries:
        return "no producer of this reading ran"
    if all(e.stale for e in entries):
        return "its only records are stale (" + "; ".join(e.stale_reason for e in entries if e.stale_reason) + ")"
    why = [e.evidence.summary if e.evidence.verdict is Verdict.NOT_RUN else f"{e.evidence.producer}: {e.counted_note}"
           for e in entries if e.counted_as is Verdict.NOT_RUN or e.evidence.verdict is Verdict.NOT_RUN]
    return "; ".join(dict.fromkeys(why)) or "no record of this reading counts"


def count_records(records: Iterable[Evidence], graph: ClaimGraph | None = None) -> dict[str, ClaimStatus]:
    """Each claim's status from records that ran now: the one counting rule, shared by check, certify and the API.

    The records count exactly as in a report (:func:`assess`: per reading,
    by scope and quantifier); none is stale, since they ran now. Returns the
    statuses of the claims the records are about, in the records' order.

    Examples
    --------
    >>> few = Evidence(claim="thm-5.3", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED,
    ...                summary="r = 1..3", scope=Scope("instances", "r = 1..3"))
    >>> st = count_records([few])
    >>> list(st), st["thm-5.3"].verdict.value  # an instance certificate supports a claim about all sizes
    (['thm-5.3'], 'supported')
    """
    by_claim: dict[str, list[EvidenceEntry]] = {}
    for ev in records:
        by_claim.setdefault(ev.claim, []).append(EvidenceEntry(ev))
    statuses = assess(graph if graph is not None else ClaimGraph(), by_claim)
    return {cid: statuses[cid] for cid in by_claim}


def verdict_table(statuses: Mapping[str, ClaimStatus]) -> dict[str, dict[str, Any]]:
    """Claim id -> ``{"verdict", "readings": {reading id: verdict}}`` for statuses (readings with evidence only).

    The one plain-data form of counted verdicts: ``symtrans check/certify --format json``, the API's
    ``EvidenceList.verdicts`` and the agreement tests read it.

    Examples
    --------
    >>> verdict_table(assess(ClaimGraph(), {}))["thm-7.3"]
    {'verdict': 'not-run', 'readings': {}}
    """
    return {cid: {"verdict": st.verdict.value,
                  "readings": {r.id: r.verdict.value for r in st.readings if r.evidence}}
            for cid, st in statuses.items()}


def _states(claim: Claim) -> bool:
    """True for items that state something to check (not definitions, hypotheses or external results)."""
    return not (claim.given or claim.external)


def _count(claim: Claim, entry: EvidenceEntry) -> EvidenceEntry:
    """Check the record belongs to the claim (and one of its readings) and set what it counts as."""
    import dataclasses

    ev = entry.evidence
    if ev.claim != claim.id:
        raise SymtransError(f"evidence from {ev.producer!r} is about {ev.claim!r}, filed under {claim.id!r}")
    quantifier = claim.quantifier
    if claim.readings and ev.verdict not in (Verdict.NOT_RUN, Verdict.NOT_APPLICABLE):
        # untagged not-run / not-applicable records (a producer that did not run or does not apply to this
        # model's family) speak for no single reading
        if ev.reading is None:
            raise SymtransError(f"evidence from {ev.producer!r} on {claim.id!r} names no reading; the claim has "
                                f"readings {', '.join(r.id for r in claim.readings)}")
        quantifier = claim.reading(ev.reading).quantifier
    elif ev.reading is not None and not claim.readings:
        raise SymtransError(f"evidence from {ev.producer!r} names reading {ev.reading!r}, but {claim.id!r} has none")
    counted, note = counted_verdict(ev, quantifier) if ev.counted else (Verdict.NOT_RUN, ev.not_counted_note)
    return dataclasses.replace(entry, counted_as=counted, counted_note=note)
