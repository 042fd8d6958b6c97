"""Build a proof-status report: run every claim's producers, merge earlier evidence, derive statuses.

Evidence comes only from the producers (run by :func:`symtrans.runner.run_tasks`), or from an
earlier ``report.json`` passed as ``previous`` (each carried record is marked
stale when its weights hash or toolkit version differs from this run's, and
then does not count towards the verdict).

Examples
--------
>>> from symtrans.context import Context
>>> r = build_report(Context(model=None))
>>> len(r.claims) == len(r.graph), r.model is None
(True, True)
>>> r.to_json()["claims"][0]["id"]
'def-notation'
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from symtrans.errors import SymtransError, suggest
from symtrans.context import Context
from symtrans.evidence import Evidence, Verdict, record_certificates
from symtrans.precision import dtype_name
from symtrans.graph import ClaimGraph, ClaimStatus, EvidenceEntry, Standing, assess, mark_stale
from symtrans.report.fmt import answer_counts, shown_as
from symtrans.runner import producers_for, registry, run_tasks, start_early

if TYPE_CHECKING:
    from proofs import Claim

__all__ = ["Report", "build_report", "load_previous", "formula_rows", "SCHEMA"]

#: The ``schema`` field of ``report.json``.
SCHEMA = "symtrans-report/1"


@dataclass
class Report:
    """Everything a report file shows: claims, statuses, evidence, model and run context.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> r = build_report(Context(model=None))
    >>> r.verdict_counts()["not-run"] > 0
    True
    """

    toolkit_version: str
    generated: str
    model: dict[str, Any] | None
    context: dict[str, Any]
    graph: ClaimGraph
    statuses: dict[str, ClaimStatus]
    errors: list[str] = field(default_factory=list)
    previous: str | None = None
    seconds: float = 0.0
    arch: Any = None  # the model's Architecture, when a model was loaded
    gauge: Any = None  # a symtrans.report.gauge.GaugeCheck, when the report ran one (report --gauge-check)
    _formulas: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    def formulas(self, claim: Claim) -> list[dict[str, Any]]:
        """The claim's formula rows (see :func:`formula_rows`), computed once per report."""
        if claim.id not in self._formulas:
            self._formulas[claim.id] = formula_rows(claim, self.arch)
        return self._formulas[claim.id]

    @property
    def claims(self) -> list[Claim]:
        """The claims in paper order."""
        return list(self.graph.claims.values())

    def items(self) -> Iterator[tuple[Claim, ClaimStatus]]:
        """``(claim, status)`` pairs in paper order."""
        for claim in self.claims:
            yield claim, self.statuses[claim.id]

    def verdict_counts(self) -> dict[str, int]:
        """Number of claims per verdict (every verdict listed, zeros included)."""
        counts = Counter(s.verdict for s in self.statuses.values())
        return {v.value: counts.get(v, 0) for v in Verdict}

    def standing_counts(self) -> dict[str, int]:
        """Number of claims per standing (every standing listed, zeros included)."""
        counts = Counter(s.standing for s in self.statuses.values())
        return {s.value: counts.get(s, 0) for s in Standing}

    @property
    def scope_line(self) -> str:
        """Which layers the numeric producers looked at, and how the weights were read: the header's scope line.

        Examples
        --------
        >>> from symtrans.context import Context
        >>> build_report(Context(model=None)).scope_line
        'no model: symbolic producers only'
        """
        m, layers = self.model, self.context.get("layers")
        if m is None:
            return "no model: symbolic producers only"
        read = "streamed one layer at a time from safetensors" if m.get("streamed") else "loaded in memory"
        if layers is None:
            return f"every layer of the model ({m.get('layers', '?')}); weights {read}"
        return (f"layers {layers} of the model's {m.get('layers', '?')} only (--layers): every model record says "
                "so, producers that read every layer did not run, and a statement about every layer is at most "
                f"inconclusive; weights {read}")

    def disagreements(self) -> list[tuple[Claim, ClaimStatus]]:
        """Claims whose toolkit status disagrees with the paper's, in paper order."""
        return [(c, s) for c, s in self.items() if s.disagreement]

    def to_json(self) -> dict[str, Any]:
        """Return the ``report.json`` document (schema in docs/json-schemas.md).

        Examples
        --------
        >>> from symtrans.context import Context
        >>> doc = build_report(Context(model=None)).to_json()
        >>> sorted(doc)[:4]
        ['claims', 'context', 'edges', 'errors']
        """
        claims = []
        for claim, status in self.items():
            entry = claim.to_dict()
            entry.update(status.to_dict())
            entry["shown_as"] = shown_as(claim, status)
            entry["rests_on"] = self.graph.rests_on(claim.id)
            entry["impact"] = self.graph.impact(claim.id)
            entry["formula_values"] = self.formulas(claim)
            entry["producers"] = [{"name": p.name, "kind": p.kind, "needs_model": p.needs_model,
                                   "description": p.description} for p in producers_for(claim.id)]
            claims.append(entry)
        return {
            "schema": SCHEMA, "toolkit_version": self.toolkit_version, "generated": self.generated,
            "model": self.model, "context": self.context, "previous": self.previous,
            "seconds": round(self.seconds, 3),
            "summary": {"verdicts": self.verdict_counts(), "shown": answer_counts(self),
                        "standing": self.standing_counts(),
                        "fully_certified": sorted(c.id for c, s in self.items() if s.fully_certified),
                        "disagreements": [{"id": c.id, "paper_status": c.paper_status.value,
                                           "verdict": s.verdict.value, "reason": s.disagreement}
                                          for c, s in self.disagreements()]},
            "errors": list(self.errors),
            "gauge_check": self.gauge.to_dict() if self.gauge is not None else None,
            "edges": [{"from": u, "to": v, "kind": k} for u, v, k in self.graph.edges()],
            "claims": claims,
        }


def formula_rows(claim: Claim, arch: Any = None) -> list[dict[str, Any]]:
    """Evaluate the claim's formulas for BertBase (the paper's sizes) and, if given, the model's architecture.

    Values are read from :mod:`symtrans.formulas`; nothing is retyped.

    Examples
    --------
    >>> from proofs import get_claim
    >>> row = formula_rows(get_claim("thm-recovery"))[0]
    >>> row["name"], row["values"]["bert-base"]["value"]
    ('recovery-ambiguity', 360448)
    """
    import copy

    from symtrans.formulas import get_formula

    rows = []
    archs: list[Any] = ["bert-base"] + ([arch] if arch is not None else [])
    for name in claim.formulas:
        f = get_formula(name)
        values: dict[str, Any] = {}
        for a in archs:
            arch_name, entry = _formula_value(f, a)
            values[arch_name] = copy.deepcopy(entry)  # the caller's own: the memo is never handed out
        rows.append({"name": name, "summary": f.summary, "expression": str(f.expression()),
                     "counts": f.counts, "provenance": f.provenance.describe(), "values": values})
    return rows


#: (formula name, architecture) -> its evaluated row entry: a function of the two (both immutable), so each
#: process's reports (a sweep's, a test session's) evaluate the paper's sizes and each architecture once
_FORMULA_VALUES: dict[tuple[str, Any], tuple[str, dict[str, Any]]] = {}


def _formula_value(f: Any, a: Any) -> tuple[str, dict[str, Any]]:
    """``(architecture name, row entry)`` of formula ``f`` evaluated for ``a`` (a name or an Architecture)."""
    try:
        key: tuple[str, Any] | None = (f.name, a)
        hash(key)
    except TypeError:  # an architecture with an unhashable field: evaluated each time
        key = None
    if key is not None and key in _FORMULA_VALUES:
        return _FORMULA_VALUES[key]
    fv = f.evaluate(a)
    at = {k: v["value"] for k, v in fv.substitutions.items() if k == "n"}
    # each architecture's own expression: its flags (biases, grouped-query attention, a gated FFN)
    # shape it, so a gated model's row must not show the two-matrix expression
    out = (fv.arch.name, {"value": _short(fv.json_value()), "approx": _approx(fv), "expression": str(fv.expression),
                          **at})
    if key is not None:
        _FORMULA_VALUES[key] = out
    return out


def _short(value: Any) -> Any:
    from symtrans.formulas import _long_str

    if isinstance(value, int) and value.bit_length() > 200:
        text = _long_str(value)
        return f"{text[:6]}... ({len(text)} digits)"
    return value


def _approx(fv: Any) -> float | None:
    if fv.value is None or fv.value.is_Integer:
        return None
    try:
        return round(float(fv.value), 6)
    except (OverflowError, TypeError):
        return None


def load_previous(path: str | Path) -> dict[str, list[Evidence]]:
    """Read the evidence of an earlier ``report.json``: claim id -> records.

    Examples
    --------
    >>> load_previous("/no/such/report.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/report.json: no such file (pass an earlier report.json)
    """
    from symtrans.report.previous import read_previous

    records = read_previous(path)  # bounded, strict JSON, field types checked before any producer runs
    out: dict[str, list[Evidence]] = {}
    try:
        for cid, evs in records:
            out[cid] = [Evidence.from_dict(e) for e in evs]
    except (KeyError, TypeError, ValueError) as err:
        raise SymtransError(f"{path}: not a symtrans report.json ({type(err).__name__}: "
                            f"{str(err).splitlines()[0][:100] if str(err) else ''})") from None
    return out


def _carry(ev: Evidence, cid: str, ctx: Context, graph: ClaimGraph, weights_hash: str | None,
           model_dir: str | None) -> tuple[EvidenceEntry, str | None]:
    """Wrap a record from an earlier report: it counts only if its producer, context key and certificates check.

    ``--previous`` is a cache, not a source of truth: a record counts only where
    this run re-verifies it. It must be filed under its own claim, its producer
    (the record's and its context's, which must agree) registered for that claim
    (and reading), its context key (n, seed, dtype, device, weights hash, toolkit
    version, producer source hash, layer subset) equal to the key this run would
    give it and one this run could produce (no layer subset for a producer that
    reads every layer), and it must carry certificates that the independent
    checker re-verifies on this run's model, whatever the verdict (``supported``
    as ``fails``), with the record's claim, reading, producer, verdict, scope and
    ``counted`` flag the trusted statement registry's
    (:func:`symtrans.checker.check.check_record`). A record with nothing to
    re-verify is shown, never counted.
    Returns the entry and, for a record that contradicts itself or the
    registry (not merely out of date), the warning naming it.
    """
    def stale(reason: str, warn: bool = False) -> tuple[EvidenceEntry, str | None]:
        return EvidenceEntry(ev, True, reason), (f"{cid}: record of {ev.producer!r} not carried: {reason}"
                                                 if warn else None)

    if ev.claim != cid:
        return stale(f"the record is for claim {ev.claim!r} but filed under {cid!r}", True)
    if ev.claim not in graph:
        return stale(f"claim {ev.claim!r} is not in the registry")
    key = ev.context or {}
    name = key.get("producer")  # the registered producer that wrote the record (a record's own name may differ)
    if name is not None and name != ev.producer and ev.producer in _registered_names():
        return stale(f"the record names producer {ev.producer!r} but its context {name!r}", True)
    registered = {p.name: p for p in producers_for(ev.claim)}
    if not name or name not in registered:
        return stale(f"its producer {name or ev.producer!r} is not registered for {ev.claim!r}: a carried record "
                     "counts only with the full context key of a registered producer")
    p = registered[name]
    if (p.reading or None) != (ev.reading or p.reading or None) and p.reading is not None:
        return stale(f"producer {name!r} writes reading {p.reading!r}, the record says {ev.reading!r}", True)
    want = ctx.key(p)
    if "layers" in key and not (p.needs_model and p.honours_layers):
        # a producer that reads every layer (or none) never writes a record under a layer subset
        return stale(f"its context names the layer subset {key['layers']!r}, on which producer {name!r} never "
                     "runs: a context this run could not have produced", True)
    if p.needs_model and weights_hash is None:
        return stale("produced from a model; none is loaded now to confirm the weights")
    diff = sorted(k for k in set(want) | set(key) if want.get(k) != key.get(k))
    if diff:
        shown = ", ".join(f"{k} {key.get(k)!r} (now {want.get(k)!r})" for k in diff[:4])
        return stale(f"context differs: {shown}")
    from symtrans.checker.check import check_record

    has_certs = bool(record_certificates(ev))
    problem = check_record(ev.to_dict(), model_dir, n=ctx.n, seed=ctx.seed)
    if problem is not None:
        return stale(problem, True)
    if not has_certs:  # whatever its verdict: a carried supported needs what a carried fails needs
        return stale(f"nothing this run can re-verify: a carried record counts only with certificates that "
                     f"re-verify, and a {ev.verdict.value} record of {name!r} carries none")
    return EvidenceEntry(ev), None


def _refuse_producers(checked: dict[str, list[tuple[Evidence, EvidenceEntry]]], refused: set[str]
                      ) -> dict[str, list[tuple[Evidence, EvidenceEntry]]]:
    """Every record of a producer with one refused record is refused too: a file's records carry all or none.

    Choosing which genuine records to carry (one producer's ``supported`` without its ``fails``) could otherwise
    invert a verdict; ``refused`` holds the producers (:func:`_writer`) with a refused or misfiled record.
    """
    out = {}
    for cid, pairs in checked.items():
        out[cid] = [(e, entry if entry.stale or _writer(e) not in refused else
                     EvidenceEntry(e, True, f"another record of producer {_writer(e)!r} in the same file was "
                                            "refused: a producer's records are carried all or none"))
                    for e, entry in pairs]
    return out


def _writer(ev: Evidence) -> str:
    """The registered producer that wrote a record: its context's producer (a producer may write several records
    under their own names, e.g. one per sequence length), else the record's name."""
    name = (ev.context or {}).get("producer")
    return name if isinstance(name, str) and name else ev.producer


def _registered_names() -> set[str]:
    """Every registered producer's name, of every claim."""
    return {p.name for ps in registry().values() for p in ps}


def _check_producers(graph: ClaimGraph) -> None:
    """Every registered producer must target a registered claim."""
    for cid, prods in registry().items():
        if cid not in graph:
            names = ", ".join(p.name for p in prods)
            raise SymtransError(f"producer {names} is registered for " + suggest(cid, graph.claims, "claim"))


def _shared_trace(ctx: Context) -> Any:
    """What both processes of a parallel report read, built once before forking: the model's trace."""
    from symtrans.producers.common import trace

    return trace(ctx)


def build_report(ctx: Context, *, previous: str | Path | None = None, progress: bool = False,
                 graph: ClaimGraph | None = None, parallel: bool | None = None) -> Report:
    """Run every claim's producers under ``ctx`` and derive the statuses.

    ``graph`` defaults to the paper's registry; a hand-built graph runs the
    producers of its own claims only. ``parallel`` (default: where two CPUs
    are usable and ``fork`` exists) shares the producers between this process
    and one forked worker (:func:`symtrans.runner.run_tasks`), after a worker forked before the model
    loads (:func:`symtrans.runner.start_early`) has started on the producers that read no model; the
    verdicts are the same either way.

    A producer that raises is recorded as a ``not-run`` record naming the
    error (and listed in ``errors``); the other claims still run.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> r = build_report(Context(model=None))
    >>> r.statuses["lit-dong"].standing.value
    'external'
    """
    from symtrans import __version__

    start = time.perf_counter()
    if graph is None:  # the paper's registry: every producer must target one of its claims
        graph = ClaimGraph()
        _check_producers(graph)
    earlier = load_previous(previous) if previous is not None else {}
    model_info: dict[str, Any] | None = None
    arch = None
    weights_hash = None
    order = graph.topological_order()
    tasks = [(cid, p) for cid in order for p in producers_for(cid)]
    # the units that read no model start now on the other core, in a worker forked before the model loads
    early = start_early(tasks, ctx, parallel)
    try:
        if ctx.numeric:
            if progress:
                from symtrans import progress as _progress

                _progress.note("report", f"loading the model {ctx.model!r}")
            from symtrans.threads import single_threaded

            with single_threaded():  # converting the checkpoint: threads gain little and stall under load
                w = ctx.weights()
            weights_hash, arch = w.weights_hash, w.arch
            from symtrans.numeric.weights import StreamedWeights

            model_info = {"spec": ctx.model, "source": str(w.source), "arch": w.arch.name,
                          "weights_hash": w.weights_hash, "dtype": dtype_name(w.dtype),
                          "device": str(w.device), "layers": int(w.n_layers),
                          "streamed": isinstance(w, StreamedWeights), "eps": float(w.arch.ln_eps),
                          "eps_source": "--eps" if ctx.eps is not None else "checkpoint"}
            if not isinstance(w, StreamedWeights):  # a streamed model is not read whole here
                from symtrans.group.gauge import processed_weights

                model_info["processed"] = processed_weights(w)
            ctx.layer_indices(int(w.n_layers))  # --layers beyond the model: refused before any producer runs
            if ctx.layers is not None and set(ctx.layers) == set(range(int(w.n_layers))):
                ctx.layers = None  # a subset naming every layer is the whole model: the same report as no --layers
        errors: list[str] = []
        raised: set[str] = set()
        unknown = [cid for cid in earlier if cid not in graph]
        if unknown:  # one line, however many: a 4 MB file can name 200,000 ids
            from symtrans.validate import terminal_safe

            shown = ", ".join(repr(terminal_safe(c)[:40]) for c in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
            errors.append(f"previous report: evidence for {len(unknown)} unknown claim"
                          f"{'s' if len(unknown) > 1 else ''} ignored ({shown})")
        # every carried record is checked before any producer runs
        model_dir = str(w.source) if ctx.numeric and Path(str(w.source)).is_dir() else None
        checked: dict[str, list[tuple[Evidence, EvidenceEntry]]] = {}
        refused: set[str] = set()
        for cid, evs in earlier.items():
            for e in evs:
                if cid not in graph:  # filed under a claim this run does not have: refused, and its producer with it
                    refused.add(_writer(e))
                elif e.verdict is not Verdict.NOT_RUN:
                    entry, warning = _carry(e, cid, ctx, graph, weights_hash, model_dir)
                    if entry.stale:
                        refused.add(_writer(e))
                    if e.claim == cid:  # a misfiled record is dropped with its warning, never counted
                        checked.setdefault(cid, []).append((e, entry))
                    if warning:
                        errors.append(f"previous report: {warning}")
        checked = _refuse_producers(checked, refused)
        results = run_tasks(tasks, ctx, progress=progress, parallel=parallel, prepare=_shared_trace, early=early)
    finally:
        if early is not None:
            early.stop()
    evidence: dict[str, list[EvidenceEntry]] = {}
    by_claim: dict[str, list[Any]] = {}
    for (cid, p), res in zip(tasks, results):
        by_claim.setdefault(cid, []).append((p, res))
    for cid in order:
        fresh = []
        for p, res in by_claim.get(cid, []):
            if isinstance(res, str):  # the producer raised: one broken producer must not sink the report
                errors.append(f"{cid}: producer {p.name} raised {res}")
                raised.add(cid)
                fresh.append(Evidence(claim=cid, producer=p.name, kind=p.kind, verdict=Verdict.NOT_RUN,
                                      summary=f"not run: the producer raised {res}", details={"error": res},
                                      reading=p.reading))
            else:
                fresh.extend(res)
        # a carried record is identified by the registered producer that wrote it (its context's), never by the
        # record's own name: a fresh run of that producer replaces every record it wrote, whatever they are called
        ran = {_writer(e) for e in fresh if e.verdict is not Verdict.NOT_RUN}
        carried = [(e, entry) for e, entry in checked.get(cid, []) if _writer(e) not in ran]
        carried_names = {_writer(e) for e, _ in carried}
        entries = [mark_stale(e, weights_hash=weights_hash, toolkit_version=__version__)
                   for e in fresh if not (e.verdict is Verdict.NOT_RUN and _writer(e) in carried_names)]
        for _, entry in carried:
            entries.append(dataclasses.replace(entry, origin=f"previous report {previous}"))
        evidence[cid] = entries
    statuses = assess(graph, evidence, weights_hash=weights_hash, toolkit_version=__version__, raised=raised)
    context = {"n": ctx.n, "seed": ctx.seed, "device": ctx.device, "dtype": ctx.dtype, "layers": ctx.layers_text}
    return Report(__version__, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  model_info, context, graph, statuses, errors,
                  str(previous) if previous is not None else None, time.perf_counter() - start, arch)
