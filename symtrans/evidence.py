"""Evidence records and verdicts: the only way a claim's status can change.

A producer (a symbolic derivation, an exact certificate, a numeric check)
returns :class:`Evidence`. The paper's own status of a claim is a separate
field (:class:`PaperStatus`); the toolkit's :class:`Verdict` is set only from
evidence that actually ran.

Producers are registered against claim ids with :func:`producer` and run by
:func:`run_producers`; they receive a :class:`Context` saying which model,
sequence length, seed, device and dtype to use.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Verdict", "PaperStatus", "Tolerance", "Evidence", "Context", "Producer", "DEFAULT_N",
    "producer", "PRODUCERS", "producers_for", "run_producers", "run_producer", "combine_verdicts",
    "device_name",
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


class PaperStatus(str, enum.Enum):
    """What the paper itself says of an item (never changed by the toolkit).

    Examples
    --------
    >>> PaperStatus("partially-proved") is PaperStatus.PARTIALLY_PROVED
    True
    """

    PROVED = "proved"
    SKETCH = "sketch"
    PARTIALLY_PROVED = "partially-proved"
    CONJECTURED = "conjectured"
    PREDICTION = "prediction"
    EXTERNAL = "external"
    DEFINITION = "definition"
    NOT_IN_PAPER = "not-in-paper"  # a statement the toolkit proposes (e.g. a certified correction)


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

    def __post_init__(self) -> None:
        if self.kind not in ("symbolic", "numeric"):
            raise ValueError(f"evidence kind must be 'symbolic' or 'numeric', got {self.kind!r}")
        if not isinstance(self.verdict, Verdict):
            object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.verdict is Verdict.CERTIFIED and self.kind != "symbolic":
            raise ValueError("only symbolic (exact) evidence can certify a claim")
        if self.verdict is Verdict.NOT_APPLICABLE and not self.violated_hypothesis:
            raise ValueError("not-applicable evidence must name the violated hypothesis")
        if not self.toolkit_version:
            from symtrans import __version__

            object.__setattr__(self, "toolkit_version", __version__)

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


_ORDER = [Verdict.FAILS, Verdict.CERTIFIED, Verdict.INCONCLUSIVE, Verdict.SUPPORTED,
          Verdict.NOT_APPLICABLE, Verdict.NOT_RUN]


def combine_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """Combine the verdicts of several evidence records about one claim.

    Any failure wins; then an exact certificate (a numeric check inside its
    tolerance band cannot undo a proof); then inconclusive, which beats
    numeric support; not-applicable only if nothing applicable ran;
    ``not-run`` if nothing ran.

    Examples
    --------
    >>> combine_verdicts([Verdict.SUPPORTED, Verdict.CERTIFIED])
    <Verdict.CERTIFIED: 'certified'>
    >>> combine_verdicts([Verdict.CERTIFIED, Verdict.FAILS]).label
    'fails'
    >>> combine_verdicts([Verdict.CERTIFIED, Verdict.INCONCLUSIVE]).label
    'certified'
    >>> combine_verdicts([Verdict.SUPPORTED, Verdict.INCONCLUSIVE]).label
    'inconclusive'
    >>> combine_verdicts([Verdict.NOT_APPLICABLE, Verdict.SUPPORTED]).label
    'supported'
    >>> combine_verdicts([Verdict.NOT_RUN, Verdict.NOT_APPLICABLE]).label
    'not-applicable'
    >>> combine_verdicts([]).label
    'not-run'
    """
    present = set(verdicts)
    return next((v for v in _ORDER if v in present), Verdict.NOT_RUN)


# ----------------------------------------------------------------- producers
#: The sequence length numeric producers use unless told otherwise (report, check, certify).
DEFAULT_N = 128


@dataclass
class Context:
    """What a producer may use: the model spec, sizes, seed, device, dtype, progress.

    ``model`` is ``None`` for symbolic-only runs, else a spec that
    :func:`symtrans.numeric.load_model` accepts ("default", a directory).
    Loaded objects are cached in ``cache`` so producers share one load.
    With ``reuse`` (the default) evidence already produced in this process
    for the same model, n, seed, dtype and device is reused, not recomputed.

    Examples
    --------
    >>> Context(model=None).numeric
    False
    """

    model: str | None = "default"
    n: int = DEFAULT_N
    seed: int = 0
    device: str | None = None
    dtype: str = "float64"
    progress: bool = False
    cache: dict[str, Any] = field(default_factory=dict)
    reuse: bool = True  # reuse evidence produced earlier in this process for the same inputs

    def weights(self, dtype: str | None = None, device: str | None = None) -> Any:
        """Load the model once per (dtype, device), cached in ``cache``; return its weights.

        ``dtype`` and ``device`` default to the context's own. Raises
        :class:`~symtrans.errors.SymtransError` when no model was given or the
        model cannot be loaded.

        Examples
        --------
        >>> Context(model=None).weights()
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: no model given (this needs --model default or a model directory)
        """
        if self.model is None:
            from symtrans.errors import SymtransError

            raise SymtransError("no model given (this needs --model default or a model directory)")
        key = self._weights_key(dtype, device)
        if key not in self.cache:
            from symtrans.numeric import load_model

            self.cache[key] = load_model(self.model, dtype=key[2], device=key[3])
        return self.cache[key]

    def preload(self, weights: Any) -> Context:
        """Use ``weights`` (e.g. a deliberately broken copy) as this context's model; returns self.

        Evidence reuse is switched off: the records must come from these weights.

        Examples
        --------
        >>> ctx = Context(model="default").preload("stand-in")
        >>> ctx.loaded_weights(), ctx.reuse
        ('stand-in', False)
        """
        self.cache[self._weights_key(None, None)] = weights
        self.reuse = False
        return self

    def loaded_weights(self) -> Any | None:
        """The weights in the context's own dtype and device if already loaded, else None.

        Examples
        --------
        >>> Context(model="default").loaded_weights() is None
        True
        """
        if not any(isinstance(k, tuple) and k[:1] == ("weights",) for k in self.cache):
            return None  # nothing loaded: answer without importing torch
        return self.cache.get(self._weights_key(None, None))

    def _weights_key(self, dtype: str | None, device: str | None) -> tuple[Any, ...]:
        return ("weights", self.model, dtype or self.dtype,
                device_name(device if device is not None else self.device))

    @property
    def numeric(self) -> bool:
        """True when numeric producers can run (a model was given).

        Examples
        --------
        >>> Context(model="default").numeric
        True
        """
        return self.model is not None


def device_name(device: str | None) -> str:
    """The concrete device a spec stands for: ``None`` is CUDA when available, else ``"cpu"``.

    Weights are cached under this name, so ``device=None`` and ``device="cpu"``
    on a CPU-only machine share one load instead of holding two copies.

    Examples
    --------
    >>> device_name("cpu"), device_name("cuda:0")
    ('cpu', 'cuda')
    >>> device_name(None) in ("cpu", "cuda")
    True
    """
    if device is None:
        import torch  # only numeric work asks, and it needs torch anyway

        return "cuda" if torch.cuda.is_available() else "cpu"
    device = str(device)
    return "cuda" if device == "cuda:0" else device


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
    func: Callable[[Context], list[Evidence]]
    needs_model: bool = False
    description: str = ""


#: claim id -> producers, filled by modules that call :func:`producer`.
PRODUCERS: dict[str, list[Producer]] = {}

#: modules that register producers when imported (checks, certificates).
PRODUCER_MODULES: list[str] = [
    "symtrans.certify.producers",
    "symtrans.checks.sec4",
    "symtrans.checks.sec5",
    "symtrans.checks.sec6",
    "symtrans.checks.sec7",
    "symtrans.checks.sec8",
]


def producer(claim: str, *, kind: str, name: str | None = None, needs_model: bool = False,
             description: str = "") -> Callable[[Callable[[Context], list[Evidence]]],
                                                Callable[[Context], list[Evidence]]]:
    """Decorator: register ``func(ctx) -> list[Evidence]`` as a producer for ``claim``.

    Examples
    --------
    >>> @producer("demo-claim", kind="symbolic", name="demo-producer")
    ... def _demo(ctx):
    ...     return [Evidence(claim="demo-claim", producer="demo-producer", kind="symbolic",
    ...                      verdict=Verdict.CERTIFIED, summary="1 + 1 == 2 exactly")]
    >>> [p.name for p in producers_for("demo-claim")]
    ['demo-producer']
    >>> _ = PRODUCERS.pop("demo-claim")
    """
    if kind not in ("symbolic", "numeric"):
        raise ValueError(f"producer kind must be 'symbolic' or 'numeric', got {kind!r}")

    def wrap(func: Callable[[Context], list[Evidence]]) -> Callable[[Context], list[Evidence]]:
        pname = name or func.__name__
        existing = PRODUCERS.setdefault(claim, [])
        if any(p.name == pname for p in existing):
            raise ValueError(f"producer {pname!r} already registered for {claim!r}")
        doc = (func.__doc__ or "").strip().splitlines()
        existing.append(Producer(claim, pname, kind, func, needs_model,
                                 description or (doc[0] if doc else "")))
        return func

    return wrap


def _import_producer_modules() -> None:
    import importlib

    for module in PRODUCER_MODULES:
        importlib.import_module(module)


def producers_for(claim: str) -> list[Producer]:
    """Return the producers registered for ``claim`` (importing producer modules first).

    Examples
    --------
    >>> producers_for("no-such-claim")
    []
    """
    _import_producer_modules()
    return list(PRODUCERS.get(claim, []))


def run_producers(claim: str, ctx: Context) -> list[Evidence]:
    """Run every producer of ``claim`` that ``ctx`` allows; return their evidence.

    A producer that needs a model, run without one, yields one ``not-run``
    record saying so, so that a report lists it honestly rather than omitting it.

    Examples
    --------
    >>> run_producers("no-such-claim", Context(model=None))
    []
    """
    out: list[Evidence] = []
    for p in producers_for(claim):
        out.extend(run_producer(p, ctx))
    return out


def run_producer(p: Producer, ctx: Context) -> list[Evidence]:
    """Run one producer in ``ctx``: reuse, single-threaded torch for model work, seconds recorded.

    Examples
    --------
    >>> demo = Producer(claim="c", name="needs-a-model", kind="numeric", func=lambda ctx: [],
    ...                 needs_model=True, description="a demo check")
    >>> run_producer(demo, Context(model=None))[0].summary
    'not run: a demo check needs a model (--model)'
    """
    import time

    if p.needs_model and not ctx.numeric:
        return [Evidence(claim=p.claim, producer=p.name, kind=p.kind, verdict=Verdict.NOT_RUN,
                         summary=f"not run: {p.description or p.name} needs a model (--model)")]
    key = _memo_key(p, ctx)
    if key is not None and key in _MEMO:
        return list(_MEMO[key][1])
    start = time.perf_counter()
    if p.needs_model or p.kind == "numeric":
        from symtrans.numeric.measure import single_threaded  # torch is loaded by then anyway

        with single_threaded():  # small factorisations: threads only add contention
            produced = p.func(ctx)
    else:
        produced = p.func(ctx)
    elapsed = time.perf_counter() - start
    done = [ev if ev.seconds is not None else dataclasses.replace(ev, seconds=elapsed / max(len(produced), 1))
            for ev in produced]
    if key is not None:
        _MEMO[key] = (p.func, done)  # holding func keeps its id (part of the key) from being reused
    return list(done)


#: Evidence already produced in this process, by producer and the context's inputs. Producers are
#: deterministic in (model, n, seed, dtype, device), so a second report in one process (a notebook,
#: the test suite) reuses the records, whose timestamps say when they actually ran.
_MEMO: dict[tuple[Any, ...], tuple[Any, list[Evidence]]] = {}


def _memo_key(p: Producer, ctx: Context) -> tuple[Any, ...] | None:
    if not ctx.reuse or (ctx.model is not None and not isinstance(ctx.model, str)):
        return None
    return (p.claim, p.name, id(p.func), ctx.model, ctx.n, ctx.seed, ctx.dtype, ctx.device)
