"""The producers layer: which producers exist and run, running them (serially or in a forked worker), reuse.

The producers that exist are the rows of
:data:`symtrans.producer_table.PRODUCER_TABLE`, each a ``"module:function"``
imported when it is needed; :func:`registry` resolves them (and checks each
row against its function's :func:`symtrans.evidence.producer` decorator).
:func:`run_producer` runs one producer in a
:class:`~symtrans.context.Context` (reusing what this process already
produced), :func:`run_tasks` runs many: the one runner behind ``symtrans
report``, ``check`` and ``certify`` (:func:`run_checks`,
:func:`run_certificates`) and the API functions of the same names.

This module imports no engine: the producer modules are imported by name, so
the layers (docs/architecture.md) stay one-way.

Examples
--------
>>> [p.name for p in producers_for("thm-5.3") if p.kind == "symbolic"]
['thm53-small', 'thm53-real-weights']
>>> [e.verdict.label for e in run_producers("thm-5.3", Context(model=None))]
['certified', 'not-run', 'not-run', 'not-run']
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import Any

from symtrans.errors import SymtransError
from symtrans.context import Context
from symtrans.evidence import Evidence, Producer, Verdict
from symtrans.producer_table import CERTIFY_KIND, CHECK_KIND, PRODUCER_TABLE, ProducerEntry, declared, modules

__all__ = ["PRODUCER_MODULES", "registry", "producers_for",
           "declared_producers", "run_producers", "run_producer", "remember", "check_producers",
           "certificate_producers", "run_tasks", "work_units", "parallel_default", "cuda_initialised", "run_checks",
           "run_certificates", "layer_subset_scope", "EarlyWorker", "start_early", "uses_torch"]

#: modules that define producers (one per paper section, exact and numeric side by side), in the table's order.
PRODUCER_MODULES: list[str] = modules()


# ----------------------------------------------------------------- the producers of the table
_REGISTRY: dict[str, list[Producer]] = {}


def _resolve(e: ProducerEntry) -> Producer:
    """The :class:`~symtrans.evidence.Producer` of one table row: its function imported, checked against the row."""
    import importlib

    func = getattr(importlib.import_module(e.module), e.function, None)
    p = getattr(func, "producer", None)
    if not isinstance(p, Producer):
        raise SymtransError(f"producer table: {e.target} is not a function decorated with @producer")
    if (p.claim, p.name, p.kind, p.reading) != (e.claim_id, e.name, e.kind, e.claim if "/" in e.claim else None):
        raise SymtransError(f"producer table: the row {tuple(e)} differs from {e.target}'s @producer "
                            f"({p.reading or p.claim!r}, name {p.name!r}, kind {p.kind!r}): one of them is stale")
    return p


def _unlisted(listed: set[str]) -> list[str]:
    """Producers decorated in a producer module but missing from the table, as the table rows to add."""
    import importlib
    import inspect

    rows = []
    for m in PRODUCER_MODULES:
        for fname, func in inspect.getmembers(importlib.import_module(m), inspect.isfunction):
            p = getattr(func, "producer", None)
            target = f"{func.__module__}:{func.__name__}"
            if isinstance(p, Producer) and func.__module__ == m and target not in listed:
                rows.append(f"({(p.reading or p.claim)!r}, {p.name!r}, {p.kind!r}, {target!r}),")
    return rows


def registry() -> dict[str, list[Producer]]:
    """Every producer of :data:`~symtrans.producer_table.PRODUCER_TABLE`, by claim id, in the table's order.

    Imports the producer modules (once). Fails closed: a row whose function
    is missing or whose decorator says another claim, name or kind, and a
    decorated producer function that has no row, are refused in one line
    that says what to write in symtrans/producer_table.py.

    Examples
    --------
    >>> [p.name for p in registry()["prop-5.1"]]
    ['prop51-witness', 'coq-prop51-witness', 'rank-plus-gaussian']
    """
    if not _REGISTRY:
        seen: set[tuple[str, str]] = set()
        out: dict[str, list[Producer]] = {}
        for e in PRODUCER_TABLE:
            if (e.claim_id, e.name) in seen:
                raise SymtransError(f"producer table: {e.name!r} is listed twice for {e.claim_id!r}")
            seen.add((e.claim_id, e.name))
            out.setdefault(e.claim_id, []).append(_resolve(e))
        missing = _unlisted({e.target for e in PRODUCER_TABLE})
        if missing:
            raise SymtransError("producer table: decorated producers without a row; add to PRODUCER_TABLE in "
                                "symtrans/producer_table.py: " + " ".join(missing))
        _REGISTRY.update(out)
    return _REGISTRY


def _producer_order(p: Producer) -> int:
    """The position of a producer's row in the table: the run order."""
    for i, e in enumerate(PRODUCER_TABLE):
        if e.claim_id == p.claim and e.name == p.name:
            return i
    return len(PRODUCER_TABLE)


def producers_for(claim: str) -> list[Producer]:
    """Return the producers of ``claim`` (importing their modules), in the table's order.

    Examples
    --------
    >>> producers_for("no-such-claim")
    []
    >>> [p.kind for p in producers_for("thm-4.2")][:2]  # certificates first, as the table lists them
    ['symbolic', 'symbolic']
    """
    return list(registry().get(claim, []))

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


def declared_producers(claim: str) -> list[tuple[str, str]]:
    """``(name, kind)`` of each producer of ``claim``, from the table, importing no producer module.

    For the listings that must stay light (``symtrans claims ID`` imports no
    producer module, hence no torch and no engine).

    Examples
    --------
    >>> declared_producers("thm-7.3")
    [('coq-thm73-sum-fibre', 'symbolic'), ('head-identifiability', 'numeric')]
    >>> declared_producers("no-such-claim")
    []
    """
    return declared(claim)


# ----------------------------------------------------------------- one producer
def uses_torch(p: Producer) -> bool:
    """Whether running ``p`` imports torch: it reads a model, or it is numeric (run on one torch thread).

    :func:`run_producer` runs these inside :func:`~symtrans.threads.single_threaded`;
    :func:`start_early`'s worker, forked before torch is imported, takes only
    the others.

    Examples
    --------
    >>> [(p.name, uses_torch(p)) for p in producers_for("thm-4.2") if p.name in ("ln-zero-beta", "ln-search-arank",
    ...                                                                           "ln-real")]
    [('ln-zero-beta', False), ('ln-search-arank', True), ('ln-real', True)]
    """
    return bool(p.needs_model or p.kind == "numeric")


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
        return [_tag(p, ctx, Evidence(claim=p.claim, producer=p.name, kind=p.kind, verdict=Verdict.NOT_RUN,
                                      summary=f"not run: {p.description or p.name} needs a model (--model)"))]
    if p.needs_model and ctx.layers is not None and not p.honours_layers:
        return [_tag(p, ctx, Evidence(
            claim=p.claim, producer=p.name, kind=p.kind, verdict=Verdict.NOT_RUN,
            summary=f"not run under --layers {ctx.layers_text}: {p.description or p.name}; it cannot run on a "
                    f"layer subset: {p.whole_model or 'it reads every layer of the model'}"))]
    key = _memo_key(p, ctx)
    if key is not None and key in _MEMO:
        return list(_MEMO[key][1])
    if p.families is not None and p.needs_model:
        family = getattr(ctx.weights(), "family", None)
        if family not in p.families:
            return [_tag(p, ctx, Evidence(
                claim=p.claim, producer=p.name, kind=p.kind, verdict=Verdict.NOT_APPLICABLE,
                summary=f"not applicable to a {family} model: {p.applies_to}",
                violated_hypothesis=f"model family in {', '.join(p.families)} ({p.applies_to})"))]
    start = time.perf_counter()
    if uses_torch(p):
        from symtrans.threads import single_threaded

        try:
            with single_threaded():  # small factorisations: threads only add contention
                produced = p.func(ctx)
        except ModuleNotFoundError as err:  # torch-free install: say which extra, do not fail the report
            from symtrans.errors import missing_extra

            why = missing_extra(err)
            if why is None:
                raise
            return [Evidence(claim=p.claim, producer=p.name, kind=p.kind, verdict=Verdict.NOT_RUN,
                             summary=f"not run: {p.description or p.name} {why}")]
    else:
        produced = p.func(ctx)
    elapsed = time.perf_counter() - start
    done = [_tag(p, ctx, ev if ev.seconds is not None else dataclasses.replace(
        ev, seconds=elapsed / max(len(produced), 1))) for ev in produced]
    if key is not None:
        _MEMO[key] = (p.func, done)  # holding func keeps its id (part of the key) from being reused
    return list(done)


def _tag(p: Producer, ctx: Context, ev: Evidence) -> Evidence:
    """Fill the record's reading (from the producer's registration) and its context key."""
    changes: dict[str, Any] = {}
    if ev.reading is None and p.reading is not None and ev.claim == p.claim:
        changes["reading"] = p.reading
    if not ev.context:
        changes["context"] = ctx.key(p)
    if p.needs_model and ctx.layers is not None and ev.verdict is not Verdict.NOT_RUN:
        changes["scope"] = layer_subset_scope(ev.scope, ctx)
    return dataclasses.replace(ev, **changes) if changes else ev


def layer_subset_scope(scope: Any, ctx: Context) -> Any:
    """A model record's scope under ``--layers``: what covered the whole model now covers the listed layers only.

    Examples
    --------
    >>> from symtrans.evidence import Scope
    >>> s = layer_subset_scope(Scope("model", "every layer"), Context(layers=(0, 1)))
    >>> s.kind, s.instances, s.description.startswith("layers 0,1 only (--layers)")
    ('instances', ('layer 0', 'layer 1'), True)
    """
    from symtrans.evidence import Scope

    note = f"layers {ctx.layers_text} only (--layers)"
    if scope is None or scope.kind == "model":
        return Scope("instances", note + (f": {scope.description}" if scope is not None else ""),
                     tuple(f"layer {i}" for i in sorted(set(ctx.layers or ()))))
    return Scope(scope.kind, f"{scope.description} [{note}]", scope.instances)


#: Evidence already produced in this process, by producer and the context's inputs. Producers are
#: deterministic in (model, n, seed, dtype, device), so a second report in one process (a notebook,
#: the test suite) reuses the records, whose timestamps say when they actually ran.
_MEMO: dict[tuple[Any, ...], tuple[Any, list[Evidence]]] = {}


def remember(p: Producer, ctx: Context, evidence: list[Evidence]) -> None:
    """Keep evidence that ``p`` produced elsewhere (a worker process) as if :func:`run_producer` had run here.

    Examples
    --------
    >>> demo = Producer(claim="c", name="remembered", kind="symbolic", func=lambda ctx: [], description="demo")
    >>> ctx = Context(model=None)
    >>> remember(demo, ctx, [Evidence(claim="c", producer="remembered", kind="symbolic", verdict=Verdict.SUPPORTED,
    ...                               summary="from a worker")])
    >>> run_producer(demo, ctx)[0].summary
    'from a worker'
    """
    key = _memo_key(p, ctx)
    if key is not None:
        _MEMO[key] = (p.func, list(evidence))


def _memo_key(p: Producer, ctx: Context) -> tuple[Any, ...] | None:
    """The inputs ``p``'s records depend on: for a producer that reads no model, what :meth:`Context.key` names.

    A model-free producer's records are the same whatever model (named or in memory), layer subset or eps the
    report has (its context key names none of them), so one record serves the report without a model and every
    model report at the same n, seed, dtype and device (a sweep and the test suite build many). Returns None
    (not reused) when the context asks for a fresh run (``reuse=False``; ``reuse="model-free"`` for a producer
    that reads the model), or for a producer that reads an in-memory model.

    Examples
    --------
    >>> free = Producer(claim="c", name="free", kind="symbolic", func=len)
    >>> _memo_key(free, Context(model=None, n=8)) == _memo_key(free, Context(model="default", n=8, layers=(0,)))
    True
    >>> _memo_key(free, Context(model="a", n=8)) == _memo_key(free, Context(model="a", n=16))
    False
    >>> reads = Producer(claim="c", name="reads", kind="numeric", func=len, needs_model=True)
    >>> _memo_key(reads, Context(model=None, n=8)) == _memo_key(reads, Context(model="default", n=8))
    False
    >>> fresh = Context(model="default", n=8, reuse="model-free")
    >>> _memo_key(reads, fresh) is None, _memo_key(free, fresh) == _memo_key(free, Context(model=None, n=8))
    (True, True)
    """
    if not ctx.reuse:
        return None
    if not p.needs_model:
        return (p.claim, p.name, id(p.func), ctx.n, ctx.seed, ctx.dtype, ctx.device)
    if ctx.reuse == "model-free" or (ctx.model is not None and not isinstance(ctx.model, str)):
        return None
    return (p.claim, p.name, id(p.func), ctx.model, ctx.n, ctx.seed, ctx.dtype, ctx.device, ctx.layers, ctx.eps)


# ----------------------------------------------------------------- shared across the processes of a sweep
#: A private directory (or None) through which the worker processes of one local sweep share the records of
#: the producers that read no model (:func:`share_model_free`): each is computed by one of them, once per run.
_SHARED: dict[str, Any] = {"dir": None}


def share_model_free(directory: str | os.PathLike[str] | None) -> None:
    """Share the model-free producers' records with the other processes that name the same ``directory``.

    A sweep's local pool calls it in each worker with a private directory made for that run (and removed
    after it): of the workers that need a model-free record at the same n, seed, dtype and device, one
    computes it and the others read it, as the process's own memo would (:func:`run_producer`), instead of
    each of them computing it. The key names the producer's function and its module's source, so no record
    outlives its code; it is meant for the registry's producers, one function each (two ad hoc producers
    sharing a name, module and qualified name, e.g. a closure made twice, would read each other's records).
    ``None`` stops sharing. Serial runs only (a report's own forked workers share through its pipes).

    Examples
    --------
    >>> import tempfile
    >>> share_model_free(tempfile.mkdtemp()); _SHARED["dir"] is not None
    True
    >>> share_model_free(None); _SHARED["dir"] is None
    True
    """
    _SHARED["dir"] = None if directory is None else os.fspath(directory)


def _shared_slot(p: Producer, ctx: Context) -> str | None:
    """The path of ``p``'s shared record in this context, or None (not shared, or already in this process)."""
    import hashlib

    key = _memo_key(p, ctx)
    if _SHARED["dir"] is None or p.needs_model or key is None or key in _MEMO:
        return None
    func = (getattr(p.func, "__module__", None), getattr(p.func, "__qualname__", None))  # the function, not the name
    name = repr((p.claim, p.name, func, p.source_hash, ctx.n, ctx.seed, ctx.dtype, ctx.device))
    return os.path.join(_SHARED["dir"], hashlib.sha256(name.encode()).hexdigest())


def _shared_get(slot: str) -> list[Evidence] | None:
    """The records another process wrote to ``slot``, or None when there are none (yet)."""
    import pickle

    try:
        with open(slot + ".pkl", "rb") as f:
            return pickle.load(f)  # noqa: S301 - written by this sweep's own workers into its private directory
    except FileNotFoundError:
        return None


def _shared_claim(slot: str) -> bool:
    """Claim ``slot`` for this process (True), or False when another process has claimed it."""
    try:
        fd = os.open(slot + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    return True


def _shared_put(slot: str, result: list[Evidence] | str) -> None:
    """Publish this process's records for ``slot`` (atomically); a producer that raised publishes nothing and
    gives up the claim, so a process waiting for it runs it itself."""
    import pickle

    if isinstance(result, list):
        tmp = f"{slot}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(result, f)
        os.replace(tmp, slot + ".pkl")
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(slot + ".claim")


def _shared_wait(slot: str) -> list[Evidence] | None:
    """Wait for the records of a slot another process claimed; None when that process is gone without them."""
    import time

    while True:
        if (got := _shared_get(slot)) is not None:
            return got
        try:
            with open(slot + ".claim") as f:
                owner = f.read().strip()
        except FileNotFoundError:  # given up: it raised there
            return None
        if owner:
            try:
                os.kill(int(owner), 0)
            except ProcessLookupError:  # killed while it ran the producer
                return _shared_get(slot)
            except PermissionError:  # alive, another user's: cannot happen in a private directory, but wait on
                pass
        time.sleep(0.05)


# ----------------------------------------------------------------- which producers
def _selected(kind: str, claims: list[str] | None, what: str) -> list[Producer]:
    """The producers of ``kind`` (for ``claims`` only, when given); an unknown claim is an error."""
    from symtrans.errors import suggest

    mine = sorted((p for ps in registry().values() for p in ps if p.kind == kind), key=_producer_order)
    known = sorted({p.claim for p in mine})
    for c in claims or []:
        if c not in known:
            raise SymtransError(suggest(c, known, what))
    return [p for p in mine if not claims or p.claim in claims]


def check_producers(claims: list[str] | None = None) -> list[Producer]:
    """The numeric checks' producers (kind :data:`~symtrans.producer_table.CHECK_KIND`), optionally for some claims only.

    Examples
    --------
    >>> sorted({p.claim for p in check_producers(["thm-4.2"])})
    ['thm-4.2']
    >>> check_producers(["thm-42"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim 'thm-42'; did you mean 'thm-4.2' or ...?
    """
    return _selected(CHECK_KIND, claims, "claim")


def certificate_producers(claims: list[str] | None = None) -> list[Producer]:
    """The exact certificates' producers (kind :data:`~symtrans.producer_table.CERTIFY_KIND`), optionally for some claims.

    Examples
    --------
    >>> [p.name for p in certificate_producers(["prop-5.1"])]  # the written proof's, then the Coq kernel's
    ['prop51-witness', 'coq-prop51-witness']
    >>> certificate_producers(["prop-51"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim with certificates 'prop-51'; did you mean 'prop-5.1' or ...?
    """
    return _selected(CERTIFY_KIND, claims, "claim with certificates")


# ----------------------------------------------------------------- many producers (serial or two processes)
def _error_message(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


def _run_here(p: Any, ctx: Context) -> list[Evidence] | str:
    """One producer in this process: its evidence, or the message of what it raised."""
    from symtrans.threads import raise_if_signalled

    try:
        return run_producer(p, ctx)
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - reported as a not-run record by the caller
        raise_if_signalled()  # a library's error made of a Ctrl-C is the Ctrl-C, not this producer's failure
        return _error_message(err)


def _claim(counter: Any, total: int) -> int | None:
    """The next unclaimed unit's index from the counter both processes share, or None when none is left."""
    with counter.get_lock():
        k = counter.value
        if k >= total:
            return None
        counter.value = k + 1
        return k


def _worker(tasks: list[tuple[str, Any]], queues: list[tuple[list[list[int]], Any]], ctx: Context,
            conn: Any) -> None:
    """Forked worker: claim units from each ``(units, counter)`` queue in turn until none is left; send
    ``(index, result)`` per task (None when unpicklable).

    The results are written to the pipe by a sender thread: the parent reads between its own producers, and a
    result larger than the pipe's buffer (64 KiB) would otherwise stop this worker until then (seen: 1.4 s idle
    in the Gemma 3 report).
    """
    import queue
    import threading
    from multiprocessing.reduction import ForkingPickler

    from symtrans import progress as _progress
    from symtrans.threads import as_child_process, release_free_memory

    as_child_process()  # Ctrl-C and SIGTERM are the parent's (no traceback here); dies with the parent
    _progress.configure(quiet=True)  # the parent draws the progress
    outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def send() -> None:
        with contextlib.suppress(OSError):  # the parent is gone: nothing left to tell it
            while (message := outbox.get()) is not None:
                conn.send_bytes(message)

    sender = threading.Thread(target=send, name="symtrans-results", daemon=True)
    sender.start()
    try:
        for units, counter in queues:
            while (k := _claim(counter, len(units))) is not None:
                for i in units[k]:
                    res = _run_here(tasks[i][1], ctx)
                    release_free_memory()  # the producer's freed temporaries: not resident until the next one
                    try:  # pickled here, as Connection.send does: what cannot be pickled is known at once
                        outbox.put(bytes(ForkingPickler.dumps((i, res))))
                    except Exception:  # noqa: BLE001 - unpicklable evidence: the parent runs it itself
                        outbox.put(bytes(ForkingPickler.dumps((i, None))))
        outbox.put(bytes(ForkingPickler.dumps(None)))
    finally:
        outbox.put(None)
        sender.join()
        conn.close()


@dataclasses.dataclass
class EarlyWorker:
    """A worker forked before the model loads, running the units of a report that read no model.

    ``units`` (task indices) are claimed through ``counter``, which the parent
    and the later worker of :func:`run_tasks` share (they take what is left
    once their own units are done); results come back on ``conn``.
    """

    proc: Any
    conn: Any
    units: list[list[int]]
    counter: Any

    def stop(self) -> None:
        """End the worker if it still runs (the report failed before collecting it) and reap it."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def start_early(tasks: list[tuple[str, Any]], ctx: Context, parallel: bool | None = None) -> EarlyWorker | None:
    """Fork a worker now for the units of ``tasks`` that read no model and no torch, or None (serial, or nothing to do).

    A report spends its first seconds importing torch, loading the model and
    building the trace on one core; the units that need neither (exact
    certificates, symbolic searches: :func:`uses_torch` false for each of their
    producers) run meanwhile on the other, in a process forked before torch is
    imported (it holds none of the model, and never imports torch for them:
    about a second of CPU each report). The model-free units that do use torch
    (a numeric search) run after the load, with the others. Pass the result to
    :func:`run_tasks` (``early=``), and :meth:`EarlyWorker.stop` it if the
    report fails first.

    Examples
    --------
    >>> start_early([("prop-5.1", p) for p in producers_for("prop-5.1")], Context(model=None)) is None
    True
    """
    import multiprocessing

    if parallel is None:
        parallel = parallel_default()
    units = [u for u in work_units(tasks) if not any(uses_torch(tasks[i][1]) for i in u)]
    if not (parallel and ctx.numeric and units and "fork" in multiprocessing.get_all_start_methods()
            and not cuda_initialised()):
        return None
    # A Ctrl-C that lands inside a library's import can leave a half-imported module behind (seen: numpy without
    # `matrix`, the report then finishing with every producer raising instead of exiting 130). numpy (the worker's
    # too) is imported before the fork; torch, which the worker does not need, after it (below), with the Ctrl-C
    # held until its import is done (one landing inside it once aborted the interpreter: exit -6).
    import numpy  # noqa: F401

    from symtrans.threads import import_held, start_forked

    mp = multiprocessing.get_context("fork")
    counter = mp.Value("i", 0)
    conn, child = mp.Pipe(duplex=False)
    proc = mp.Process(target=_worker, args=(tasks, [(units, counter)], ctx, child), daemon=True)
    start_forked(proc)  # a Ctrl-C during the fork acts here, once the worker is known
    child.close()
    early = EarlyWorker(proc, conn, units, counter)
    try:
        import_held("torch")  # the load's own import, while the worker runs on the other core
    except BaseException:
        early.stop()
        raise
    return early


class _LocalCounter:
    """The counter of a serial run: the interface of ``multiprocessing.Value`` without shared memory."""

    value = 0

    def get_lock(self) -> Any:
        import contextlib

        return contextlib.nullcontext()


def work_units(tasks: list[tuple[str, Any]]) -> list[list[int]]:
    """Task indices grouped into units (producers with the same ``share`` together), most expensive first.

    A unit runs in one process, so a cache its producers share is computed
    once; units are ordered by the sum of their producers' ``cost`` (longest
    first, so the last unit handed out is a short one), ties in task order.

    Examples
    --------
    >>> tasks = [(c, p) for c in ("prop-6.2", "prop-6.3") for p in producers_for(c)]
    >>> units = work_units(tasks)
    >>> sorted(i for u in units for i in u) == list(range(len(tasks)))
    True
    >>> [tasks[i][1].name for i in units[0]]  # the subspace checks share one cache: one unit, the costliest
    ['mha-rank-vs-sum', 'mha-rank-bound', 'head-subspace-dim']
    """
    groups: dict[Any, list[int]] = {}
    for i, (_, p) in enumerate(tasks):
        groups.setdefault(p.share if p.share else ("task", i), []).append(i)
    units = list(groups.values())
    return sorted(units, key=lambda u: (-sum(tasks[i][1].cost for i in u), u[0]))


def cuda_initialised() -> bool:
    """Whether this process has initialised CUDA (a forked child cannot use it); False without importing torch.

    Examples
    --------
    >>> cuda_initialised()  # this machine, at least until something moves a tensor to a GPU
    False
    """
    import sys

    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def _cuda_in_use(ctx: Context) -> bool:
    """Whether this process has initialised CUDA or holds its weights on a GPU (a forked child cannot use CUDA)."""
    import sys

    if "torch" not in sys.modules:  # nothing numeric has run here: no weights, no CUDA
        return False
    if cuda_initialised():
        return True
    device = getattr(ctx.weights(), "device", None) if ctx.numeric else None
    return device is not None and getattr(device, "type", "cpu") != "cpu"


def parallel_default() -> bool:
    """Whether reports run their exact producers in a forked worker by default (Linux, 2+ usable CPUs).

    Examples
    --------
    >>> isinstance(parallel_default(), bool)
    True
    """
    import multiprocessing
    import os
    import sys

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    # fork only on Linux: on macOS forking a process that has used Accelerate/Objective-C runtimes is unsafe
    return cpus >= 2 and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def run_tasks(tasks: list[tuple[str, Any]], ctx: Context, *, progress: bool = False,
              parallel: bool | None = None, prepare: Callable[[Context], Any] | None = None,
              errors: str = "record", desc: str = "report", unit: str = "producer",
              label: Callable[[str, Producer], str] | None = None,
              early: EarlyWorker | None = None) -> list[list[Evidence] | str]:
    """Run ``(claim, producer)`` tasks; each result is its evidence or the message of the exception it raised.

    The one runner of ``report``, ``check`` and ``certify`` (and of the API
    functions behind them). ``errors="raise"`` lets a producer's exception
    propagate instead (then it runs serially). ``prepare(ctx)`` builds what
    both processes read before forking (the report passes the shared trace).
    ``desc``, ``unit`` and ``label(claim, producer)`` name the progress.

    With ``parallel`` (and a model in ``ctx`` on the CPU, CUDA not initialised:
    a forked child cannot use CUDA), this process and one forked child (which
    shares the loaded weights and the trace copy-on-write) both take
    :func:`work_units` from one shared counter, most expensive first, until
    none is left; results come back pickled and are memoised here as if run
    here. If the child dies, what it did not send back runs here. The results
    are in task order; verdicts do not depend on ``parallel`` (rounding-level
    numbers may, as between any two processes).

    ``early`` (from :func:`start_early`, same ``tasks``) already runs the
    units that read no model; they are not run again here: this process and
    the child take what it has not claimed once their own units are done,
    and its results are collected with theirs.

    Examples
    --------
    >>> tasks = [("prop-5.1", p) for p in producers_for("prop-5.1")]
    >>> [type(r).__name__ for r in run_tasks(tasks, Context(model=None), parallel=False)]
    ['list', 'list', 'list']
    """
    import multiprocessing

    from symtrans.progress import Progress
    from symtrans.threads import raise_if_signalled, release_free_memory, start_forked

    if errors not in ("record", "raise"):
        raise ValueError(f"errors must be 'record' or 'raise', got {errors!r}")
    if early is not None and errors != "record":
        raise ValueError("early= needs errors='record' (a worker's exception cannot propagate)")
    run_one = run_producer if errors == "raise" else _run_here
    name = label or (lambda claim, p: f"{claim} / {p.name}")
    if parallel is None:
        parallel = parallel_default()
    results: list[Any] = [None] * len(tasks)
    taken = {i for u in early.units for i in u} if early is not None else set()
    units = [u for u in work_units(tasks) if not taken.intersection(u)]
    parallel = bool(parallel and errors == "record" and ctx.numeric and len(units) > 1
                    and "fork" in multiprocessing.get_all_start_methods() and not _cuda_in_use(ctx))
    if not parallel:
        units = [[i] for i in range(len(tasks)) if i not in taken]  # serial: task order
    elif prepare is not None and any(p.needs_model for _, p in tasks):  # what both processes read: built once
        from symtrans.threads import single_threaded

        try:
            with single_threaded():  # as run_producer builds it in a serial run: the same numbers, no contention
                prepare(ctx)
        except Exception:  # noqa: BLE001 - the producers that need it report the error themselves
            pass
        release_free_memory()  # before forking: the child would start with the dead pages too
    # hush: a producer's own bar (group --breaking's Jacobians) stays silent in this process, as in the workers
    with Progress(len(tasks), desc, unit=unit, enabled=progress, hush=True) as bar:
        proc = None
        counter: Any = _LocalCounter()
        queues = [(units, counter)] + ([(early.units, early.counter)] if early is not None else [])
        conns: list[tuple[Any, Any]] = [(early.proc, early.conn)] if early is not None else []
        if parallel:
            mp = multiprocessing.get_context("fork")  # only where fork exists (not on Windows)
            counter = mp.Value("i", 0)
            queues[0] = (units, counter)
            conn, child = mp.Pipe(duplex=False)
            proc = mp.Process(target=_worker, args=(tasks, queues, ctx, child), daemon=True)
            start_forked(proc)  # a Ctrl-C during the fork: the worker is reaped there, then it is raised here
            child.close()
            conns.append((proc, conn))
        done: set[int] = set()

        def finish(i: int, res: Any) -> None:
            done.add(i)
            results[i] = res
            bar.step(name(*tasks[i]))
            raise_if_signalled()  # a Ctrl-C Python dropped (raised in a weakref callback or an at-fork hook)

        def drain(block: bool) -> None:
            for pc in list(conns):
                worker, conn = pc
                while block or conn.poll():
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):  # the child died: what it did not finish runs here
                        msg = None
                    if msg is None:  # the worker is done (or dead): reap it now rather than leave a zombie
                        worker.join()
                        conn.close()
                        conns.remove(pc)
                        break
                    i, res = msg
                    p = tasks[i][1]
                    if res is None:
                        res = _run_here(p, ctx)
                    elif isinstance(res, list):
                        remember(p, ctx, res)
                    finish(i, res)

        # a sweep's workers (serial reports) share the model-free records: one computes each, the others read it
        shared = _SHARED["dir"] is not None and not parallel and errors == "record"
        deferred: list[tuple[int, str]] = []  # claimed by another worker: collected once the rest is done
        try:
            for queue, count in queues:
                while (k := _claim(count, len(queue))) is not None:
                    for i in queue[k]:
                        p = tasks[i][1]
                        slot = _shared_slot(p, ctx) if shared else None
                        if slot is not None and (got := _shared_get(slot)) is not None:
                            remember(p, ctx, got)
                            slot = None
                        elif slot is not None and not _shared_claim(slot):
                            deferred.append((i, slot))
                            continue
                        bar.show(name(*tasks[i]))
                        res = run_one(p, ctx)
                        if slot is not None:
                            _shared_put(slot, res)
                        finish(i, res)
                        if ctx.numeric:  # a producer's freed temporaries leave the resident set before the next one
                            release_free_memory()
                        drain(block=False)
            for i, slot in deferred:
                bar.show(name(*tasks[i]))
                if (got := _shared_wait(slot)) is not None:
                    remember(tasks[i][1], ctx, got)
                finish(i, run_one(tasks[i][1], ctx))
            drain(block=True)
            for i in range(len(tasks)):  # a worker that died: finish what it claimed here
                if i not in done:
                    finish(i, run_one(tasks[i][1], ctx))
        finally:
            for worker, conn in conns:
                if worker.is_alive():
                    worker.kill()
                worker.join()
                conn.close()
    return results


# ----------------------------------------------------------------- the commands' entry points
def run_checks(ctx: Context, claims: list[str] | None = None, progress: bool = False) -> list[Evidence]:
    """Run the numeric checks in ``ctx`` (serially, in registration order); return their evidence.

    Examples
    --------
    >>> ev = run_checks(Context(model="default", n=8), ["prop-5.4"])
    >>> [(e.producer, e.verdict.label) for e in ev]
    [('residual-jacobian', 'supported'), ('global-non-affine', 'supported')]
    """
    tasks = [(p.claim, p) for p in check_producers(claims)]
    results = run_tasks(tasks, ctx, progress=progress, parallel=False, errors="raise", desc="check", unit="check",
                        label=lambda claim, p: f"{claim}: {p.name}")
    return [e for res in results for e in res]


def run_certificates(claims: list[str] | None, ctx: Context, progress: bool = False) -> dict[str, list[Evidence]]:
    """Run the certificate producers for ``claims`` (all when None), serially; return claim id -> evidence.

    Examples
    --------
    >>> out = run_certificates(["prop-5.1"], Context(model=None))
    >>> out["prop-5.1"][0].verdict.label
    'certified'
    """
    prods = certificate_producers(claims)
    ids = list(dict.fromkeys(p.claim for p in prods) if claims is None else dict.fromkeys(claims))
    tasks = [(cid, p) for cid in ids for p in prods if p.claim == cid]
    results = run_tasks(tasks, ctx, progress=progress, parallel=False, errors="raise", desc="certify",
                        unit="producer", label=lambda claim, p: f"{claim}: {p.name}")
    out: dict[str, list[Evidence]] = {cid: [] for cid in ids}
    for (cid, _), res in zip(tasks, results):
        out[cid] += res
    return out
