"""Evidence records and verdicts: the only way a claim's status can change.

A producer (a symbolic derivation, an exact certificate, a numeric check)
returns :class:`Evidence`. The paper's own status of a claim is a separate
field (:class:`PaperStatus`); the toolkit's :class:`Verdict` is set only from
evidence that actually ran.

Producers are registered against claim ids with :func:`producer` and run by
:func:`symtrans.runner.run_producers`; they receive a :class:`symtrans.context.Context` (the run's
configuration, a cache and the model loader), which lives at the runner layer:
this module holds only the records and imports no engine.

Examples
--------
>>> ev = Evidence(claim="lem-rank-sum", producer="demo", kind="symbolic",
...               verdict=Verdict.CERTIFIED, summary="exact check")
>>> ev.verdict.positive
True
>>> Evidence.from_dict(ev.to_dict()) == ev
True
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proofs._claim import PaperStatus  # the paper's own status: paper data, re-exported here

__all__ = [
    "Verdict", "PaperStatus", "Tolerance", "Scope", "SCOPE_KINDS", "HypothesisCheck", "Evidence",
    "Producer", "producer",
    "combine_verdicts", "decide_verdict", "EVERY_QUANTIFIERS", "split_reading", "strict_float", "record_certificates",
]


class Verdict(str, enum.Enum):
    """The toolkit's verdict on a claim, set only by evidence that ran.

    Examples
    --------
    >>> Verdict("fails").label
    'fails'
    >>> [v.value for v in Verdict if v.positive]
    ['certified', 'supported']
    """

    CERTIFIED = "certified"  # exact symbolic or exact-arithmetic certificate
    SUPPORTED = "supported"  # numeric evidence holds with a margin
    FAILS = "fails"  # a counterexample, or a check that failed
    NOT_APPLICABLE = "not-applicable"  # a hypothesis is violated (which, by how much)
    INCONCLUSIVE = "inconclusive"  # inside the tolerance band
    NOT_RUN = "not-run"
    #: derived only, never produced: the claim's readings disagree (some hold, some fail)
    READING_DEPENDENT = "reading-dependent"

    @property
    def label(self) -> str:
        """The verdict as printed.

        Examples
        --------
        >>> Verdict.NOT_APPLICABLE.label
        'not-applicable'
        """
        return self.value

    @property
    def positive(self) -> bool:
        """True for ``certified`` and ``supported``.

        Examples
        --------
        >>> Verdict.SUPPORTED.positive, Verdict.INCONCLUSIVE.positive
        (True, False)
        """
        return self in (Verdict.CERTIFIED, Verdict.SUPPORTED)


@dataclass(frozen=True)
class Tolerance:
    """A numeric decision threshold with the reason for it.

    Examples
    --------
    >>> t = Tolerance(1e-10, "float64 rank cut: 1e-10 relative to sigma_max")
    >>> t.to_dict()["value"]
    1e-10
    """

    value: float
    reason: str
    relative_to: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> Tolerance(0.5, "why").to_dict()
        {'value': 0.5, 'reason': 'why', 'relative_to': ''}
        """
        return dataclasses.asdict(self)


#: The kinds of scope a record can state, from widest to narrowest.
SCOPE_KINDS: tuple[str, ...] = ("all-sizes", "open-set", "model", "instances")

_SCOPE_TEXT = {
    "all-sizes": "a proof or witness family valid for every size",
    "open-set": "the outcome holds on an open set of instances around the listed ones (a set of positive measure)",
    "model": "every layer and every head of the model under test",
    "instances": "only the instances listed",
}


@dataclass(frozen=True)
class Scope:
    """What a record's conclusion covers: all sizes, an open set, the whole model, or listed instances.

    A certificate's verdict means what it says only over its scope: a witness
    checked at three toy sizes is an ``instances`` certificate, not a proof for
    all sizes.

    Examples
    --------
    >>> s = Scope("instances", "layer 0 at n = 128", ("layer 0",))
    >>> Scope.from_dict(s.to_dict()) == s, s.covers_all_sizes
    (True, False)
    >>> Scope("everything", "?")
    Traceback (most recent call last):
    ...
    ValueError: scope kind must be one of all-sizes, open-set, model, instances; got 'everything'
    """

    kind: str
    description: str
    instances: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise ValueError(f"scope kind must be one of {', '.join(SCOPE_KINDS)}; got {self.kind!r}")
        if isinstance(self.instances, str):
            raise ValueError("scope instances must be a sequence of strings, not a string")
        object.__setattr__(self, "instances", tuple(str(i) for i in self.instances))

    @property
    def covers_all_sizes(self) -> bool:
        """True for a proof or witness family valid for every size.

        Examples
        --------
        >>> Scope("all-sizes", "block witness").covers_all_sizes
        True
        """
        return self.kind == "all-sizes"

    @property
    def meaning(self) -> str:
        """What the scope kind means, in words.

        Examples
        --------
        >>> Scope("model", "all 6 layers").meaning
        'every layer and every head of the model under test'
        """
        return _SCOPE_TEXT[self.kind]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> Scope("model", "all layers").to_dict()["kind"]
        'model'
        """
        return {"kind": self.kind, "description": self.description, "instances": list(self.instances)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scope:
        """Rebuild a scope from :meth:`to_dict` output.

        Examples
        --------
        >>> Scope.from_dict({"kind": "all-sizes", "description": "proof"}).kind
        'all-sizes'
        """
        return cls(str(data["kind"]), str(data.get("description", "")), tuple(data.get("instances") or ()))


@dataclass(frozen=True)
class HypothesisCheck:
    """A hypothesis tested on the instance before the conclusion: holds, is violated, or undecided.

    ``holds`` is ``None`` when the test landed inside its tolerance band.
    ``margin`` says how far the measured quantity sat from the threshold
    (its meaning in ``detail``).

    Examples
    --------
    >>> h = HypothesisCheck("A^h invertible", False, 0.0, "layer 2 head 5: sigma_min = 0")
    >>> HypothesisCheck.from_dict(h.to_dict()) == h
    True
    """

    name: str
    holds: bool | None
    margin: float | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> HypothesisCheck("H1", True).to_dict()["holds"]
        True
        """
        return {"name": self.name, "holds": self.holds, "margin": strict_float(self.margin),
                "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HypothesisCheck:
        """Rebuild from :meth:`to_dict` output.

        Examples
        --------
        >>> HypothesisCheck.from_dict({"name": "H2", "holds": None}).holds is None
        True
        """
        holds = data.get("holds")
        margin = data.get("margin")
        return cls(str(data["name"]), None if holds is None else bool(holds),
                   None if margin is None else float(margin), str(data.get("detail", "")))


def strict_float(value: Any) -> Any:
    """Map a non-finite float to a string ("inf", "-inf", "nan") so JSON stays strict; other values pass.

    Examples
    --------
    >>> strict_float(float("inf")), strict_float(2.5), strict_float(None)
    ('inf', 2.5, None)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    return value


def _read_float(value: Any) -> Any:
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def record_certificates(record: Any) -> list[dict[str, Any]]:
    """The certificate dicts a record carries (an :class:`Evidence` or its dict): ``details["certificate(s)"]``.

    The one reading of where a record keeps its certificates (the report, ``certify --out`` and the
    counting rule of all-sizes records use it; the independent checker reads files with its own code).

    Examples
    --------
    >>> record_certificates({"details": {"certificate": {"schema": "s"}}})
    [{'schema': 's'}]
    >>> record_certificates({"details": {}}), record_certificates({"details": {"certificate": {}}})
    ([], [])
    """
    details = (record.get("details") if isinstance(record, dict) else getattr(record, "details", None)) or {}
    certs = list(details.get("certificates") or [])
    if details.get("certificate"):
        certs.append(details["certificate"])
    return certs


def shown_verdict(record: Any, counted_as: Any = None) -> str:
    """The verdict a record is shown with: ``certified`` only where ``verify`` re-checks it.

    One vocabulary for every output (``certify``, the report's evidence tables): a record its producer calls
    certified but that carries no certificate (a written proof checked at small sizes, an instance search) is
    shown with the verdict it counts as (``counted_as``; ``supported`` when not given). A kernel-checked Coq
    proof counts as certified (``verify --coq`` re-checks it), so it is shown so.

    Examples
    --------
    >>> shown_verdict({"verdict": "certified", "details": {}}, "supported")
    'supported'
    >>> shown_verdict({"verdict": "certified", "details": {"certificate": {"statement_id": "s"}}}, "supported")
    'certified'
    >>> shown_verdict({"verdict": "fails", "details": {}})
    'fails'
    """
    verdict = record.get("verdict") if isinstance(record, dict) else getattr(record, "verdict", None)
    verdict = getattr(verdict, "value", verdict)
    if verdict == "certified" and not record_certificates(record):
        return str(getattr(counted_as, "value", counted_as) or "supported")
    return str(verdict)


def split_reading(target: str) -> tuple[str, str | None]:
    """Split a producer target ``claim`` or ``claim/reading`` into (claim id, reading id or None).

    Examples
    --------
    >>> split_reading("thm-7.3/wo"), split_reading("prop-5.1")
    (('thm-7.3', 'thm-7.3/wo'), ('prop-5.1', None))
    """
    if "/" in target:
        claim, _, name = target.partition("/")
        if not claim or not name or "/" in name:
            raise ValueError(f"a reading id is '<claim>/<name>', got {target!r}")
        return claim, target
    return target, None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence about one claim, from one producer run.

    ``margin`` is how far the measured quantity sits from the decision
    threshold, on the side that decided the verdict (positive = safely
    decided; its meaning is stated in ``margin_meaning``). ``details`` holds
    producer-specific data (singular values at the cut, witnesses,
    counterexample matrices as nested lists of strings for exact rationals).

    Examples
    --------
    >>> e = Evidence(claim="thm-4.2", producer="p", kind="numeric", verdict=Verdict.FAILS,
    ...              summary="counterexample", dtype="float64",
    ...              tolerance=Tolerance(1e-9, "float64 rank cut"), margin=3.2,
    ...              margin_meaning="log10 gap between singular values at the cut")
    >>> e.to_dict()["tolerance"]["value"]
    1e-09
    """

    claim: str
    producer: str
    kind: str  # "symbolic" | "numeric"
    verdict: Verdict
    summary: str
    margin: float | None = None
    margin_meaning: str = ""
    tolerance: Tolerance | None = None
    dtype: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    weights_hash: str | None = None
    seed: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    toolkit_version: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    counterexample: dict[str, Any] | None = None
    violated_hypothesis: str | None = None
    seconds: float | None = None
    timestamp: str = field(default_factory=_now)
    reading: str | None = None  # the reading id '<claim>/<name>' this record is about, if the claim has readings
    scope: Scope | None = None  # what the conclusion covers; a certificate without one counts as 'instances'
    hypothesis_checks: tuple[HypothesisCheck, ...] = ()  # hypotheses tested on the instance, before the conclusion
    context: dict[str, Any] = field(default_factory=dict)  # the run's key (filled by the runner): Context.key
    #: False for a sanity check of the pipeline (it cannot fail on any legal input, e.g. a theorem's bound or
    #: autograd against the same map): shown in every output, counted as ``not-run`` (see :attr:`not_counted_note`)
    counted: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("symbolic", "numeric"):
            raise ValueError(f"evidence kind must be 'symbolic' or 'numeric', got {self.kind!r}")
        if not isinstance(self.verdict, Verdict):
            object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.verdict is Verdict.READING_DEPENDENT:
            raise ValueError("'reading-dependent' is derived from readings, never produced by one record")
        if self.reading is not None and split_reading(self.reading)[0] != self.claim:
            raise ValueError(f"reading {self.reading!r} is not a reading of claim {self.claim!r}")
        if isinstance(self.scope, dict):
            object.__setattr__(self, "scope", Scope.from_dict(self.scope))
        checks = tuple(HypothesisCheck.from_dict(h) if isinstance(h, dict) else h for h in self.hypothesis_checks)
        object.__setattr__(self, "hypothesis_checks", checks)
        violated = [h.name for h in checks if h.holds is False]
        if violated and self.verdict in (Verdict.CERTIFIED, Verdict.SUPPORTED, Verdict.FAILS):
            raise ValueError(f"hypothesis {violated[0]!r} is violated on this instance: the verdict must be "
                             f"'not-applicable', not {self.verdict.value!r}")
        if self.verdict is Verdict.CERTIFIED and self.kind != "symbolic":
            raise ValueError("only symbolic (exact) evidence can certify a claim")
        if self.verdict is Verdict.NOT_APPLICABLE and not self.violated_hypothesis:
            raise ValueError("not-applicable evidence must name the violated hypothesis")
        if not self.toolkit_version:
            from symtrans import __version__

            object.__setattr__(self, "toolkit_version", __version__)

    @property
    def not_counted_note(self) -> str:
        """Why a sanity-check record (``counted=False``) does not count towards its claim's verdict.

        Examples
        --------
        >>> Evidence(claim="c", producer="p", kind="numeric", verdict="supported", summary="s",
        ...          counted=False).not_counted_note[:12]
        'sanity check'
        """
        return ("sanity check: it cannot fail on any legal input (its verdict is shown, not counted as evidence)"
                if not self.counted else "")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (the ``evidence`` entries of ``report.json``).

        Examples
        --------
        >>> Evidence(claim="c", producer="p", kind="symbolic", verdict=Verdict.CERTIFIED,
        ...          summary="s").to_dict()["verdict"]
        'certified'
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["verdict"] = self.verdict.value
        out["tolerance"] = self.tolerance.to_dict() if self.tolerance else None
        out["margin"] = strict_float(self.margin)
        out["scope"] = self.scope.to_dict() if self.scope else None
        out["hypothesis_checks"] = [h.to_dict() for h in self.hypothesis_checks]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        """Rebuild evidence from :meth:`to_dict` output.

        Examples
        --------
        >>> e = Evidence(claim="c", producer="p", kind="numeric", verdict="supported", summary="s",
        ...              tolerance=Tolerance(1e-3, "r"))
        >>> Evidence.from_dict(e.to_dict()).tolerance.value
        0.001
        """
        data = dict(data)
        tol = data.get("tolerance")
        data["tolerance"] = Tolerance(**tol) if tol else None
        data["verdict"] = Verdict(data["verdict"])
        data["margin"] = _read_float(data.get("margin"))
        scope = data.get("scope")
        data["scope"] = Scope.from_dict(scope) if scope else None
        data["hypothesis_checks"] = tuple(HypothesisCheck.from_dict(h) for h in data.get("hypothesis_checks") or ())
        data["context"] = dict(data.get("context") or {})
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def stale(self, *, weights_hash: str | None, toolkit_version: str) -> bool:
        """True when the evidence was produced from other weights or another toolkit version.

        Examples
        --------
        >>> e = Evidence(claim="c", producer="p", kind="numeric", verdict="supported", summary="s",
        ...              weights_hash="abc", toolkit_version="0.1.0")
        >>> e.stale(weights_hash="abc", toolkit_version="0.1.0"), e.stale(weights_hash="xyz", toolkit_version="0.1.0")
        (False, True)
        """
        if self.toolkit_version != toolkit_version:
            return True
        return self.weights_hash is not None and self.weights_hash != weights_hash


_ORDER = [Verdict.FAILS, Verdict.CERTIFIED, Verdict.SUPPORTED, Verdict.INCONCLUSIVE,
          Verdict.NOT_APPLICABLE, Verdict.NOT_RUN]
#: statements about every instance: a part of the scope left undecided leaves the whole undecided
EVERY_QUANTIFIERS = ("universal", "model-every")
_ORDER_EVERY = [Verdict.FAILS, Verdict.CERTIFIED, Verdict.INCONCLUSIVE, Verdict.SUPPORTED,
                Verdict.NOT_APPLICABLE, Verdict.NOT_RUN]


def combine_verdicts(verdicts: Iterable[Verdict], quantifier: str | None = None) -> Verdict:
    """Combine the counted verdicts of several evidence records about one statement.

    Any failure wins; then an exact certificate of the statement's full scope
    (a numeric check inside its tolerance band cannot undo a proof). Between
    a decided support and an inconclusive record the statement's quantifier
    decides (:data:`EVERY_QUANTIFIERS`):

    * about every instance (``universal``, ``model-every``): inconclusive
      before support. Records about one statement cover parts of its scope
      (layers, heads, sizes); support on some parts beside a part that could
      not be decided does not establish "every", so the statement stays
      inconclusive (reporting it supported would claim what no record showed);
    * about some or generic instances (``generic``, ``model-some``,
      ``statistical``) and when no quantifier is given: support before
      inconclusive. A decided witness (or a decided generic instance) is not
      undone by another instance that could not decide.

    Then not-applicable only if nothing applicable ran; ``not-run`` if
    nothing ran. :func:`symtrans.graph.assess` passes each statement's
    quantifier; :func:`symtrans.graph.count_records` is the one function that
    turns records into claim verdicts.

    Examples
    --------
    >>> combine_verdicts([Verdict.SUPPORTED, Verdict.CERTIFIED])
    <Verdict.CERTIFIED: 'certified'>
    >>> combine_verdicts([Verdict.CERTIFIED, Verdict.FAILS]).label
    'fails'
    >>> combine_verdicts([Verdict.CERTIFIED, Verdict.INCONCLUSIVE], "universal").label
    'certified'
    >>> combine_verdicts([Verdict.SUPPORTED, Verdict.INCONCLUSIVE], "model-every").label
    'inconclusive'
    >>> combine_verdicts([Verdict.SUPPORTED, Verdict.INCONCLUSIVE], "generic").label
    'supported'
    >>> combine_verdicts([Verdict.INCONCLUSIVE, Verdict.NOT_APPLICABLE]).label
    'inconclusive'
    >>> combine_verdicts([Verdict.NOT_APPLICABLE, Verdict.SUPPORTED]).label
    'supported'
    >>> combine_verdicts([Verdict.NOT_RUN, Verdict.NOT_APPLICABLE]).label
    'not-applicable'
    >>> combine_verdicts([]).label
    'not-run'
    """
    order = _ORDER_EVERY if quantifier in EVERY_QUANTIFIERS else _ORDER
    present = set(verdicts)
    return next((v for v in order if v in present), Verdict.NOT_RUN)


def decide_verdict(refuted: Any, undecided: Any, held: Verdict = Verdict.SUPPORTED) -> Verdict:
    """The one verdict rule of a producer's instance check: a decided refutation fails, else anything undecided.

    ``refuted`` is truthy when some decided instance refutes the statement
    (a counterexample), ``undecided`` when some instance could not be decided
    (inside the decisive band of :mod:`symtrans.precision`); otherwise the
    statement holds on every instance checked, as ``held`` (``supported`` for
    numeric evidence, ``certified`` for an exact one). A refutation wins over
    undecided instances: one decided counterexample is enough.

    Examples
    --------
    >>> decide_verdict([], []).label, decide_verdict(["layer 3"], ["layer 4"]).label
    ('supported', 'fails')
    >>> decide_verdict(False, True).label, decide_verdict(0, 0, Verdict.CERTIFIED).label
    ('inconclusive', 'certified')
    """
    if refuted:
        return Verdict.FAILS
    if undecided:
        return Verdict.INCONCLUSIVE
    return held


# ----------------------------------------------------------------- producers
#: a producer: a function of the run's :class:`symtrans.context.Context` (typed ``Any`` here: the records do not
#: import the runner layer) returning its records
ProducerFunc = Callable[[Any], "list[Evidence]"]

@dataclass(frozen=True)
class Producer:
    """A registered evidence producer for one claim.

    Examples
    --------
    >>> p = Producer(claim="c", name="demo", kind="symbolic", func=lambda ctx: [])
    >>> p.needs_model
    False
    """

    claim: str
    name: str
    kind: str  # "symbolic" | "numeric"
    func: ProducerFunc
    needs_model: bool = False
    description: str = ""
    reading: str | None = None  # the reading id its records are about, when registered against one
    families: tuple[str, ...] | None = None  # model families it applies to (None: every family)
    applies_to: str = ""  # the structural reason behind ``families``, said when it does not apply
    share: str | None = None  # the context cache it shares with other producers: a report runs them in one process
    cost: float = 1.0  # relative running time on a real model (BERT-large sized), to order a report's work
    #: it reads only the layers of ``Context.layer_indices`` (``--layers``); others need every layer and do not
    #: run on a subset (their record says so)
    honours_layers: bool = False
    #: a model producer that does not honour ``--layers``: precisely why it cannot run on a subset (what it reads)
    whole_model: str = ""

    @property
    def source_hash(self) -> str:
        """SHA-256 (first 16 hex digits) of the source of the producer's module, or its function if unreadable.

        A record carried from an earlier report counts only while this is unchanged.

        Examples
        --------
        >>> len(Producer(claim="c", name="p", kind="symbolic", func=producer).source_hash)
        16
        """
        return _source_hash(self.func)


def _source_hash(func: Any) -> str:
    import hashlib
    import inspect
    import sys

    module = sys.modules.get(getattr(func, "__module__", "") or "")
    try:
        text = inspect.getsource(module) if module is not None else inspect.getsource(func)
    except (OSError, TypeError):
        text = getattr(func, "__qualname__", repr(func))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def producer(claim: str, *, kind: str, name: str | None = None, needs_model: bool = False,
             description: str = "", families: tuple[str, ...] | None = None,
             applies_to: str = "", share: str | None = None,
             cost: float = 1.0, honours_layers: bool = False,
             whole_model: str = "") -> Callable[[ProducerFunc], ProducerFunc]:
    """Decorator: declare ``func(ctx) -> list[Evidence]`` a producer for ``claim`` (or ``claim/reading``), with its options.

    It attaches the :class:`Producer` to the function (``func.producer``) and
    registers nothing: the producers that exist are the rows of
    :data:`symtrans.producer_table.PRODUCER_TABLE` (one line each, naming this
    function as ``"module:function"``), and :func:`symtrans.runner.registry`
    refuses a decorated function without a row, or a row whose claim, name or
    kind differ from the decorator's.

    Registered against a reading id (``"thm-7.3/wo"``), the producer belongs to
    the claim and its records are tagged with that reading. ``families`` lists
    the model families the check applies to; on another family the runner
    records ``not-applicable`` naming ``applies_to``, the structural reason.
    A report may run producers in two processes (it forks after loading the
    weights and building the trace). ``share`` names a context cache the
    producer shares with others beyond those two (e.g. ``"head-ranks"``: sec6's layer records, sec7's W_O
    records and :func:`symtrans.numeric.wo.wo_head_ranks`, the per-head W_O ranks both read):
    producers with the same ``share`` run in one process, one after the other,
    so the cache is computed once. ``cost`` is its relative running time on
    a BERT-large-sized model (seconds there, roughly): the report hands out the
    most expensive work first. Neither changes a record. ``honours_layers``
    says the producer looks only at ``ctx.layer_indices(...)``: under
    ``--layers`` the others are recorded as not run, each with its
    ``whole_model`` reason (required of a model producer that does not honour
    ``--layers``: what it reads that a layer subset does not give).

    Examples
    --------
    >>> @producer("demo-claim", kind="symbolic", name="demo-producer")
    ... def _demo(ctx):
    ...     return [Evidence(claim="demo-claim", producer="demo-producer", kind="symbolic",
    ...                      verdict=Verdict.CERTIFIED, summary="1 + 1 == 2 exactly")]
    >>> _demo.producer.claim, _demo.producer.name
    ('demo-claim', 'demo-producer')
    """
    if kind not in ("symbolic", "numeric"):
        raise ValueError(f"producer kind must be 'symbolic' or 'numeric', got {kind!r}")
    claim_id, reading = split_reading(claim)
    if families is not None and not applies_to:
        raise ValueError(f"producer for {claim!r} limited to families {families}: say why (applies_to=...)")
    if needs_model and not honours_layers and not whole_model.strip():
        raise ValueError(f"model producer for {claim!r} does not honour --layers: say why it cannot run on a layer "
                         "subset (whole_model=...)")

    def wrap(func: ProducerFunc) -> ProducerFunc:
        pname = name or func.__name__
        doc = (func.__doc__ or "").strip().splitlines()
        func.producer = Producer(claim_id, pname, kind, func, needs_model,  # type: ignore[attr-defined]
                                 description or (doc[0] if doc else ""), reading,
                                 tuple(families) if families is not None else None, applies_to, share,
                                 float(cost), bool(honours_layers), whole_model.strip())
        return func

    return wrap


