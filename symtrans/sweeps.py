"""``symtrans sweep``: one proof-status report per (model, n, seed), on Ray or a local pool, and their aggregate.

(The module is ``sweeps``: a module ``symtrans.sweep`` would shadow the function :func:`symtrans.sweep`.)
A sweep has three steps, each a plain function:

1. :func:`plan` turns models (paths, ``"default"`` or hub ids), sequence
   lengths and seeds into :class:`Task` values. Each task is keyed by what its
   report depends on: the weights (SHA-256 of the files, or the hub revision),
   ``n``, ``seed``, dtype, device, the toolkit version and the hashes of every
   registered producer's source. Its resources (CPUs, memory estimated from the
   safetensors headers before any weight is read, a GPU where CUDA is there)
   travel with it.
2. :func:`run_sweep` runs the tasks not already finished on an engine: Ray
   (``ray.init()`` locally, or an existing cluster by address; the output
   directory must then be on a file system every node sees) or a local process
   pool. Each task (:func:`run_task`) builds the report with
   :func:`symtrans.report.build_report`, writes it with
   :func:`symtrans.report.write_report` into ``tasks/<folder>/report``, and then
   writes its completion marker ``task.json``; a task that raises writes
   ``failed.json`` with the error instead, and the sweep goes on. A rerun skips
   every task whose marker carries its key; failed and interrupted tasks run again.
3. :func:`aggregate` reads every finished task's ``report.json`` (verdicts are
   read, never recomputed) into a claims-and-readings x runs table, rows where
   the runs disagree first; :func:`write_aggregate` renders it as Markdown,
   JSON (schema :data:`SCHEMA`), an HTML heatmap and a CSV, into ``aggregate/``.

Examples
--------
>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "sweep"
>>> tasks = plan(["default"], ns=[8], seeds=[0, 1], out=out, device="cpu")
>>> [(t.n, t.seed) for t in tasks], tasks[0].key != tasks[1].key
([(8, 0), (8, 1)], True)
>>> pending(tasks, out) == tasks  # nothing has run yet
True
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symtrans.progress import announced
from symtrans.errors import SymtransError
from symtrans.config import DEFAULT_DTYPE, DEFAULT_N, DEFAULT_SEED

__all__ = ["SCHEMA", "MARKER", "FAILED", "ENGINES", "Task", "SweepResult", "plan", "pending", "task_state",
           "run_task", "run_sweep", "check_task_dirs", "aggregate", "write_aggregate", "render_aggregate", "sweep",
           "AGGREGATE_FILES"]

#: The ``schema`` field of ``aggregate/sweep.json`` (docs/json-schemas.md).
SCHEMA = "symtrans-sweep/1"
#: The ``schema`` field of a task's completion marker and failure record.
TASK_SCHEMA = "symtrans-sweep-task/1"
#: A finished task's completion marker (written after its report, atomically).
MARKER = "task.json"
#: A failed task's record: its error (removed when the task runs again).
FAILED = "failed.json"
#: Written when a task starts: its attempts so far and the worker's process id (for progress and retries).
RUNNING = "running.json"
#: How often (seconds) the progress bar's running count is refreshed while the workers run.
REFRESH_SECONDS = 1.0
#: The engines :func:`run_sweep` knows.
ENGINES = ("ray", "local")
#: format -> file name in ``aggregate/``
AGGREGATE_FILES: dict[str, str] = {"md": "sweep.md", "json": "sweep.json", "html": "sweep.html", "csv": "sweep.csv"}
#: the report formats every task writes (the aggregate reads report.json and links report.html)
REPORT_FORMATS = ["md", "json", "html", "dot"]
#: what a sweep directory may hold
SWEEP_ENTRIES = ("tasks", "aggregate")


@dataclass(frozen=True)
class Task:
    """One report to make: a model at one sequence length and seed, its key, folder and resources.

    Examples
    --------
    >>> t = Task(model="m", label="m", n=8, seed=0, identity={"n": 8}, key="ab" * 32, folder="m-n8-s0-abab",
    ...          resources={"num_cpus": 1, "memory": 1 << 30, "num_gpus": 0})
    >>> t.column
    'm n=8 seed=0'
    """

    model: str
    label: str
    n: int
    seed: int
    identity: dict[str, Any]
    key: str
    folder: str
    resources: dict[str, Any]
    dtype: str = DEFAULT_DTYPE
    device: str = "cpu"

    @property
    def column(self) -> str:
        """The run's name in the aggregate: model label, n and seed."""
        return f"{self.label} n={self.n} seed={self.seed}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what the marker and the aggregate record)."""
        return {"model": self.model, "label": self.label, "n": self.n, "seed": self.seed, "key": self.key,
                "folder": self.folder, "identity": self.identity, "resources": self.resources,
                "dtype": self.dtype, "device": self.device}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def producers_hash() -> str:
    """SHA-256 over every registered producer's claim, name and source hash: a change to any check changes it.

    Examples
    --------
    >>> len(producers_hash()), producers_hash() == producers_hash()
    (64, True)
    """
    from symtrans.runner import registry
    from symtrans.runner import producers_for

    producers_for("")  # imports the producer modules
    return _digest(sorted((cid, p.name, p.source_hash) for cid, ps in registry().items() for p in ps))


def _slug(text: str, limit: int = 40) -> str:
    """A file-name-safe form of a model's name (letters, digits, ``._-``), at most ``limit`` characters."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "model"
    return s[:limit]


def _auto_device() -> str:
    """``cuda`` where torch sees a GPU, else ``cpu`` (the device every task of the sweep uses)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_lists(models: Sequence[Any], ns: Sequence[Any], seeds: Sequence[Any], dtype: str,
                 device: str | None) -> None:
    """Every (model, n, seed) against the declared constraints, before anything is hashed (names as the API's)."""
    from symtrans.args import check_sweep_lists

    check_sweep_lists(models, ns, seeds, dtype, device, cli=False)


def plan(models: Sequence[str | os.PathLike[str]], ns: Sequence[int] = (DEFAULT_N,),
         seeds: Sequence[int] = (DEFAULT_SEED,), *,
         out: str | os.PathLike[str], dtype: str = DEFAULT_DTYPE, device: str | None = None, num_cpus: int = 1,
         num_gpus: float | None = None) -> list[Task]:
    """The sweep's tasks, one per (model, n, seed) in that order, each keyed and sized; nothing runs.

    ``device`` ``None`` is ``cuda`` where CUDA is there (each task then asks for
    ``num_gpus``, default 1), else ``cpu``. Each task's memory is
    :func:`symtrans.numeric.streaming.report_memory_bytes` of its checkpoint,
    from the safetensors headers. Duplicate (model, n, seed) triples are refused.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> t = plan(["default"], ns=[8, 16], out=out, device="cpu")
    >>> [x.n for x in t], t[0].resources["num_gpus"], t[0].resources["memory"] > 100 * 2**20
    ([8, 16], 0, True)
    >>> plan(["default", "default"], out=out, device="cpu")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: sweep: 'default' at n=128 seed=0 is listed twice
    """
    from symtrans import __version__
    from symtrans.arch import from_config
    from symtrans.numeric.streaming import report_memory_bytes
    from symtrans.numeric.weights import check_checkpoint, describe_checkpoint

    models = [os.fspath(m) if isinstance(m, os.PathLike) else m for m in models]
    _check_lists(models, ns, seeds, dtype, device)
    if not isinstance(num_cpus, int) or isinstance(num_cpus, bool) or num_cpus < 1:
        raise SymtransError(f"--cpus-per-task {num_cpus!r}: must be a positive integer")
    check_sweep_dir(out)  # before the weights are hashed
    device = device or _auto_device()
    gpus = (1 if num_gpus is None else num_gpus) if device.startswith("cuda") else 0
    phash = producers_hash()
    tasks: list[Task] = []
    seen: set[tuple[str, int, int]] = set()
    for m in models:
        check_checkpoint(m)  # config, layer count, every tensor's header: refused here, not in a worker
        info = describe_checkpoint(m, hash_weights=True)
        weights = (f"hub:{m}@{info['revision']}" if info["revision"] and not Path(m).exists()
                   else f"sha256:{info['weights_hash']}")
        arch = from_config(info["directory"])
        label = arch.name if m == "default" else (m if not Path(m).exists() else Path(m).resolve().name)
        for n in ns:
            for s in seeds:
                if (weights, n, s) in seen:
                    raise SymtransError(f"sweep: {m!r} at n={n} seed={s} is listed twice")
                seen.add((weights, n, s))
                identity = {"weights": weights, "n": n, "seed": s, "dtype": dtype, "device": device,
                            "toolkit_version": __version__, "producers": phash}
                key = _digest(identity)
                tasks.append(Task(model=m, label=label, n=n, seed=s, identity=identity, key=key,
                                  folder=f"{_slug(label)}-n{n}-s{s}-{key[:16]}",
                                  resources={"num_cpus": num_cpus,
                                             "memory": report_memory_bytes(arch, info["numel"], n),
                                             "num_gpus": gpus},
                                  dtype=dtype, device=device))
    return tasks


def check_sweep_dir(out: str | os.PathLike[str]) -> Path:
    """Check that ``out`` can hold a sweep (missing, or holding only ``tasks/`` and ``aggregate/``); return it.

    Examples
    --------
    >>> check_sweep_dir("/etc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /etc: exists and holds other files (...); choose a new or empty directory, or an earlier sweep's
    """
    from symtrans.outdir import check_output_dir
    from symtrans.validate import terminal_safe

    path = Path(os.path.abspath(os.fspath(out)))
    if path.is_dir() and not path.is_symlink():
        foreign = sorted(terminal_safe(p.name) for p in path.iterdir()
                         if p.name not in SWEEP_ENTRIES or p.is_symlink() or not p.is_dir())
        if foreign:
            more = ", ..." if len(foreign) > 3 else ""
            raise SymtransError(f"{terminal_safe(str(out))}: exists and holds other files ({', '.join(foreign[:3])}"
                                f"{more}); choose a new or empty directory, or an earlier sweep's")
        return path
    return check_output_dir(path, ())  # a file, a link, a missing parent: the report's own refusals


def _read_record(path: Path) -> dict[str, Any] | None:
    """A marker or failure record, or None when missing or unreadable (a task without one runs again)."""
    from symtrans.validate import read_json_file

    if not path.is_file():
        return None
    try:
        doc = read_json_file(path, "task record", 1 << 20)
    except SymtransError:
        return None
    return doc if isinstance(doc, dict) else None


def report_identity(doc: Any) -> dict[str, Any] | None:
    """What a report.json says it is: weights hash, n, seed, dtype, layer subset, toolkit version (None: no report).

    Examples
    --------
    >>> report_identity({"toolkit_version": "0.2.0", "model": {"weights_hash": "ab"},
    ...                  "context": {"n": 8, "seed": 0, "dtype": "float64", "layers": None}})["n"]
    8
    >>> report_identity({"claims": []}) is None
    True
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict) or not isinstance(doc.get("context"), dict):
        return None
    ctx = doc["context"]
    return {"weights_hash": doc["model"].get("weights_hash"), "n": ctx.get("n"), "seed": ctx.get("seed"),
            "dtype": ctx.get("dtype"), "layers": ctx.get("layers"), "toolkit_version": doc.get("toolkit_version")}


def _expected_identity(task: Task, marker: dict[str, Any]) -> dict[str, Any]:
    """The identity a task's report must have: the planned weights (by hash; a hub revision: the hash the run
    recorded), the task's n, seed and dtype, every layer, the planned toolkit version."""
    weights = str(task.identity.get("weights", ""))
    recorded = (marker.get("report_identity") or {}).get("weights_hash") if isinstance(marker.get("report_identity"),
                                                                                      dict) else None
    return {"weights_hash": weights[len("sha256:"):] if weights.startswith("sha256:") else recorded, "n": task.n,
            "seed": task.seed, "dtype": task.dtype, "layers": None,
            "toolkit_version": task.identity.get("toolkit_version")}


def report_problem(task: Task, out: str | os.PathLike[str], marker: dict[str, Any]) -> str | None:
    """Why a finished task's report does not count (missing, truncated, edited, foreign); None when it does.

    The marker stores the report's SHA-256 and identity when the task ran; the report must still hash to it,
    and its identity (read from the file) must be the marker's and the task's: another checkpoint's report,
    another n, seed or layer subset, or a marker without a hash is refused, and the task runs again.

    Examples
    --------
    >>> import tempfile
    >>> t = Task("m", "m", 8, 0, {}, "k" * 64, "f", {})
    >>> report_problem(t, tempfile.mkdtemp(), {"key": "k" * 64})
    'its report.json is missing'
    """
    from symtrans.validate import read_json_file

    path = Path(out) / "tasks" / task.folder / "report" / "report.json"
    if not path.is_file():
        return "its report.json is missing"
    want = marker.get("report_sha256")
    if not isinstance(want, str):
        return "its task.json records no report hash (written by another version, or by hand)"
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != want:
        return "its report.json differs from the one the task wrote (truncated or edited)"
    try:
        doc = read_json_file(path, "report", 256 << 20)
    except SymtransError as err:
        return f"its report cannot be read: {err}"
    got, expected = report_identity(doc), _expected_identity(task, marker)
    if got is None or got != marker.get("report_identity") or got != expected:
        diff = sorted(k for k in expected if (got or {}).get(k) != expected[k])
        return ("its report.json is another run's (" + ", ".join(
            f"{k} {str((got or {}).get(k))[:16]!r}, planned {str(expected[k])[:16]!r}" for k in diff[:3]) + ")"
            if diff else "its report.json's identity is not the one task.json recorded")
    return None


def task_state(task: Task, out: str | os.PathLike[str]) -> str:
    """``done``, ``stale`` (a marker with this key whose report does not check), ``failed`` or ``todo``.

    ``done`` needs the marker with this key and the report it recorded (:func:`report_problem`); a
    ``stale`` task runs again like a ``todo`` one and never counts as done.

    Examples
    --------
    >>> import tempfile
    >>> t = Task("m", "m", 8, 0, {}, "k" * 64, "f", {})
    >>> task_state(t, tempfile.mkdtemp())
    'todo'
    """
    folder = Path(out) / "tasks" / task.folder
    marker = _read_record(folder / MARKER)
    if marker is not None and marker.get("key") == task.key:
        return "done" if report_problem(task, out, marker) is None else "stale"
    failed = _read_record(folder / FAILED)
    if failed is not None and failed.get("key") == task.key:
        return "failed"
    return "todo"


def pending(tasks: Sequence[Task], out: str | os.PathLike[str]) -> list[Task]:
    """The tasks a run of the sweep must still do: every task not ``done`` (failed ones run again).

    Examples
    --------
    >>> pending([], "/nonexistent")
    []
    """
    return [t for t in tasks if task_state(t, out) != "done"]


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically, never through a link (:func:`symtrans.outdir.write_file`)."""
    from symtrans.outdir import write_file
    from symtrans.validate import dumps_strict

    write_file(path.parent, path.name, (dumps_strict(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
               "task record")


def _task_dir(out: str | os.PathLike[str], task: Task, create: bool = True) -> Path:
    """``out/tasks/<task folder>``, created if missing; a link anywhere on the way is refused, never followed."""
    from symtrans.outdir import confined_dir

    return confined_dir(out, "tasks", task.folder, create=create)


def check_task_dirs(tasks: Sequence[Task], out: str | os.PathLike[str]) -> None:
    """Refuse, before anything runs, a task folder that a run could not write: a link, or a record that is no file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> t = Task("m", "m", 8, 0, {}, "k" * 64, "f", {})
    >>> (out / "tasks" / "f" / MARKER).mkdir(parents=True)
    >>> check_task_dirs([t], out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: .../tasks/f/task.json: a directory is in the way of the task record; remove it
    """
    import stat

    from symtrans.outdir import confined_dir
    from symtrans.validate import terminal_safe

    for t in tasks:
        folder = _task_dir(out, t, create=False)
        confined_dir(out, "tasks", t.folder, "report", create=False)
        for name in (MARKER, FAILED, RUNNING):
            try:
                st = os.lstat(folder / name)
            except FileNotFoundError:
                continue
            except OSError as err:
                raise SymtransError(f"{terminal_safe(str(folder / name))}: cannot read the task record "
                                    f"({err.strerror})") from None
            if not stat.S_ISREG(st.st_mode):
                kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a symbolic link"
                        if stat.S_ISLNK(st.st_mode) else "something that is not a file")
                raise SymtransError(f"{terminal_safe(str(folder / name))}: {kind} is in the way of the task "
                                    "record; remove it")


def _error_text(err: BaseException) -> str:
    msg = str(err).splitlines()[0][:500] if str(err) else ""
    return f"{type(err).__name__}: {msg}" if msg else type(err).__name__


def record_failure(task: Task, out: str | os.PathLike[str], error: str, *, attempts: int | None = None,
                   trace: str = "") -> dict[str, Any]:
    """Write the failure record of ``task`` (its key, error, attempts); return it.

    Examples
    --------
    >>> import tempfile
    >>> t = Task("m", "m", 8, 0, {}, "k" * 64, "f", {})
    >>> out = tempfile.mkdtemp()
    >>> record_failure(t, out, "RuntimeError: boom")["error"], task_state(t, out)
    ('RuntimeError: boom', 'failed')
    """
    folder = _task_dir(out, task)
    doc = {"schema": TASK_SCHEMA, "status": "failed", "key": task.key, "task": task.to_dict(), "error": error,
           "attempts": attempts, "traceback": trace[-4000:],
           "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    _write_json(folder / FAILED, doc)
    return doc


def run_task(task: Task, out: str | os.PathLike[str]) -> dict[str, Any]:
    """Make one task's report: build, write, then mark complete; on an error, record it. Returns the record.

    Idempotent: a task already ``done`` returns its marker without running (so
    an engine's retry after a lost reply does no work twice). The report is
    written atomically (:func:`symtrans.report.write_report`) and the marker
    after it, so a kill at any moment leaves either a complete task or one a
    rerun does again. The report's weights hash must equal the planned one.

    Examples
    --------
    >>> import dataclasses, tempfile
    >>> out = tempfile.mkdtemp()
    >>> t = plan(["default"], ns=[8], out=out, device="cpu")[0]
    >>> bad = dataclasses.replace(t, identity={**t.identity, "weights": "sha256:0"}, key="0" * 64)
    >>> run_task(bad, out)["error"]  # doctest: +ELLIPSIS
    'SymtransError: default: the weights changed since the sweep was planned (hash ..., planned 0); run the sweep again'
    """
    from symtrans.context import Context
    from symtrans.outdir import DirLock, OutputError
    from symtrans.report import build_report, write_report

    folder = _task_dir(out, task)
    if task_state(task, out) == "done":
        return dict(_read_record(folder / MARKER) or {})
    before = _read_record(folder / RUNNING) or {}
    attempts = (before.get("attempts") or 0) + 1 if before.get("key") == task.key else 1
    _write_json(folder / RUNNING, {"key": task.key, "attempts": attempts, "pid": os.getpid()})
    (folder / FAILED).unlink(missing_ok=True)
    _reset_peak_rss()  # this task's own peak: a worker runs tasks one after another
    start = time.perf_counter()
    try:
        ctx = Context(model=task.model, n=task.n, seed=task.seed, device=task.device, dtype=task.dtype,
                      progress=False)
        planned = task.identity.get("weights", "")
        if planned.startswith("sha256:"):  # the weights the key names, before minutes of checks
            got = ctx.weights().weights_hash
            if got != planned[len("sha256:"):]:
                raise SymtransError(f"{task.model}: the weights changed since the sweep was planned (hash "
                                    f"{str(got)[:12]}, planned {planned[7:19]}); run the sweep again")
        with DirLock(folder / "report"):
            report = build_report(ctx, parallel=task.resources.get("num_cpus", 1) >= 2)
            write_report(report, folder / "report", REPORT_FORMATS)
    except (KeyboardInterrupt, OutputError):  # the output folder cannot be written: no task can go on
        (folder / RUNNING).unlink(missing_ok=True)
        raise
    except Exception as err:  # noqa: BLE001 - recorded; one failed task must not stop the sweep
        from symtrans.threads import raise_if_signalled, signal_received

        if signal_received() is not None:  # a library's error made of a Ctrl-C is the Ctrl-C, not a failure
            (folder / RUNNING).unlink(missing_ok=True)
            raise_if_signalled()
        rec = record_failure(task, out, _error_text(err), attempts=attempts, trace=traceback.format_exc())
        (folder / RUNNING).unlink(missing_ok=True)
        return rec
    written = folder / "report" / "report.json"
    doc = {"schema": TASK_SCHEMA, "status": "done", "key": task.key, "task": task.to_dict(), "attempts": attempts,
           "report_sha256": hashlib.sha256(written.read_bytes()).hexdigest(),
           "report_identity": report_identity(json.loads(written.read_text(encoding="utf-8"))),
           "seconds": round(time.perf_counter() - start, 3), "report_errors": list(report.errors),
           "verdicts": report.verdict_counts(), "peak_rss_bytes": _peak_rss(), "worker_pid": os.getpid(),
           "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    _write_json(folder / MARKER, doc)
    (folder / RUNNING).unlink(missing_ok=True)
    return doc


def _reset_peak_rss() -> None:
    """Reset this process's peak resident set (Linux: ``5`` into /proc/self/clear_refs resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss() -> int | None:
    """The peak resident set of this process since :func:`_reset_peak_rss`, in bytes, where known.

    Linux: VmHWM of /proc/self/status (it is the process's own: ``ru_maxrss``
    also counts what a parent held when it started the worker, so a worker
    started by a large test process reported that process's peak). Elsewhere
    ``ru_maxrss``.

    Examples
    --------
    >>> _reset_peak_rss(); _peak_rss() > 0
    True
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except (ImportError, OSError, ValueError):
        return None


@dataclass
class SweepResult:
    """What a sweep did: its tasks, how many ran, were skipped or failed, the aggregate and where it is.

    Examples
    --------
    >>> SweepResult(tasks=[], ran=0, skipped=0, failed=[]).ok
    True
    """

    tasks: list[Task]
    ran: int
    skipped: int
    failed: list[dict[str, Any]]
    aggregate: dict[str, Any] | None = None
    paths: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """No task failed."""
        return not self.failed


class _Tally:
    """Progress of a sweep on one :class:`~symtrans.progress.Progress` bar: runs done, running, failed.

    "Running" counts the submitted runs whose worker has started them (its
    ``running.json`` is there), so it is the same for every engine.
    """

    def __init__(self, tasks: Sequence[Task], skipped: int, out: str, enabled: bool):
        from symtrans.progress import Progress

        self.out = out
        self.done, self.failed = skipped, 0
        self.outstanding: dict[str, Task] = {}
        self.bar = Progress(len(tasks), "sweep", unit="task", enabled=enabled)
        if skipped:
            self.bar.step(f"{skipped} already done", n=skipped)

    def running(self) -> int:
        return sum((Path(self.out) / "tasks" / t.folder / RUNNING).is_file() for t in self.outstanding.values())

    def counts(self) -> str:
        return f"done {self.done}, running {self.running()}, failed {self.failed}"

    def submitted(self, tasks: Sequence[Task]) -> None:
        for t in tasks:
            self.outstanding[t.key] = t

    def refresh(self) -> None:
        self.bar.show(self.counts())

    def finished(self, task: Task, record: dict[str, Any]) -> None:
        self.outstanding.pop(task.key, None)
        ok = record.get("status") == "done"
        if ok:
            self.done += 1
        else:
            self.failed += 1
        what = "done" if ok else f"failed ({str(record.get('error', ''))[:80]})"
        self.bar.step(f"{task.column} {what}; {self.counts()}")

    def close(self) -> None:
        self.bar.close()


def _local_worker(shared: str) -> None:
    """The local pool's initializer: a child process (:func:`~symtrans.threads.as_child_process`) that shares
    the model-free producers' records with the other workers through ``shared``."""
    from symtrans.runner import share_model_free
    from symtrans.threads import as_child_process

    as_child_process()
    share_model_free(shared)


def _run_local(tasks: list[Task], out: str, workers: int, retries: int, tally: _Tally) -> list[dict[str, Any]]:
    """The tasks on a local process pool (``spawn``: a fresh interpreter per worker); a dead worker's tasks retry.

    The workers compute each model-free producer's records once between them (``symtrans.runner.
    share_model_free``), through a private temporary directory that lives as long as this call.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="symtrans-sweep-shared-") as shared:  # mode 0700: this user's only
        return _run_pool(tasks, out, workers, retries, tally, shared)


def _run_pool(tasks: list[Task], out: str, workers: int, retries: int, tally: _Tally,
              shared: str) -> list[dict[str, Any]]:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    records: list[dict[str, Any]] = []
    lost: dict[str, int] = {}
    todo = list(tasks)
    while todo:
        pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_local_worker, initargs=(shared,))  # exit with us, signals are ours
        futures = {pool.submit(run_task, t, out): t for t in todo}
        todo = []
        tally.submitted(list(futures.values()))
        try:
            remaining = set(futures)
            while remaining:
                finished, remaining = wait(remaining, timeout=REFRESH_SECONDS, return_when=FIRST_COMPLETED)
                tally.refresh()
                for fut in finished:
                    task = futures[fut]
                    try:
                        rec = fut.result()
                    except BrokenProcessPool:  # a worker died (killed, out of memory): its tasks go again
                        lost[task.key] = lost.get(task.key, 0) + 1
                        if lost[task.key] <= retries:
                            todo.append(task)
                            continue
                        rec = record_failure(task, out, f"the worker process died {lost[task.key]} times "
                                                        "(killed, or out of memory)", attempts=lost[task.key])
                    records.append(rec)
                    tally.finished(task, rec)
        except BaseException:
            for proc in list(getattr(pool, "_processes", {}).values()):  # Ctrl-C: stop the workers now
                proc.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return records


def _ray_available(address: str | None) -> None:
    """Refuse, before anything is planned or created, a Ray engine that cannot start: Ray, or its client, missing."""
    try:
        import ray  # noqa: F401 - imported here so that its absence is refused before anything is planned
    except ImportError:
        raise SymtransError("sweep --engine ray needs Ray: pip install 'symtrans[distributed]' "
                            "(or pass --engine local)") from None
    if isinstance(address, str) and address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - what ray[client] adds
        except ImportError:
            raise SymtransError(f"--address {address[:80]}: a ray:// address needs Ray's client: pip install "
                                "'ray[client]' (or run the sweep on the cluster with --address auto)") from None


def _start_ray(tasks: Sequence[Task], address: str | None) -> bool:
    """Start Ray (or connect to ``address``) and check every task's request against it; True if started here."""
    import ray

    _ray_available(address)
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, bare Exception
            where = f"the Ray cluster at {address[:80]!r}" if address else "Ray on this machine"
            raise SymtransError(f"sweep --engine ray: cannot start or reach {where} ({_error_text(err)[:200]})"
                                ) from None
    try:
        resources = ray.cluster_resources()
        for t in tasks:  # a request no node can meet would wait forever: refuse it now
            for name, ray_name in (("num_cpus", "CPU"), ("memory", "memory"), ("num_gpus", "GPU")):
                want = t.resources.get(name) or 0
                if want > resources.get(ray_name, 0):
                    raise SymtransError(f"sweep: {t.column} asks for {name}={want}, the Ray cluster has "
                                        f"{resources.get(ray_name, 0)} in all")
    except BaseException:
        if started:
            ray.shutdown()
        raise
    return started


def _run_ray(tasks: list[Task], out: str, address: str | None, retries: int, tally: _Tally) -> list[dict[str, Any]]:
    """The tasks as Ray tasks (each with its CPUs, memory and GPUs; ``max_retries`` for a dead worker).

    Ray is started (and the requests checked) by :func:`_start_ray` before the sweep writes anything."""
    import ray

    records: list[dict[str, Any]] = []
    refs: dict[Any, Task] = {}
    try:
        remote = ray.remote(run_task)
        for t in tasks:
            ref = remote.options(num_cpus=t.resources["num_cpus"], memory=int(t.resources["memory"]),
                                 num_gpus=t.resources["num_gpus"], max_retries=retries,
                                 retry_exceptions=False).remote(t, out)
            refs[ref] = t
        tally.submitted(list(refs.values()))
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=REFRESH_SECONDS)
            tally.refresh()
            for ref in ready:
                task = refs.pop(ref)
                try:
                    rec = ray.get(ref)
                except ray.exceptions.RayError as err:  # the worker died more than max_retries times
                    rec = record_failure(task, out, f"Ray: {_error_text(err)}", attempts=retries + 1)
                records.append(rec)
                tally.finished(task, rec)
    except BaseException:
        for ref in refs:  # Ctrl-C (or a refusal): nothing keeps running for this sweep
            ray.cancel(ref, force=True)
        raise
    return records


def _default_workers(tasks: Sequence[Task]) -> int:
    """Local pool size: the usable CPUs over each task's CPUs, and no more than memory holds."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    per = max((t.resources.get("num_cpus", 1) for t in tasks), default=1)
    n = max(1, cpus // per)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        biggest = max((t.resources.get("memory", 0) for t in tasks), default=0)
        if biggest:
            n = min(n, max(1, int(0.8 * total) // biggest))
    except (ValueError, OSError, AttributeError):
        pass
    return n


def default_engine(address: str | None) -> str:
    """The engine when none is named: Ray to join a cluster (``address``), else the local process pool.

    On one machine the local pool was the faster of the two (2 cores: 63 s against Ray's 137 s for the same
    zoo; Ray's start-up and object store cost more than they save there); Ray is what spreads a sweep over
    several machines.

    Examples
    --------
    >>> default_engine(None), default_engine("auto")
    ('local', 'ray')
    """
    return "local" if address is None else "ray"


def _check_run_options(engine: str, address: str | None, workers: int | None, retries: int) -> None:
    """Refuse an unknown engine, an address without Ray, a bad pool size or retry count (before any planning)."""
    if engine not in ENGINES:
        raise SymtransError(f"--engine {engine!r}: choose from {', '.join(ENGINES)}")
    if address is not None and engine != "ray":
        raise SymtransError("--address names a Ray cluster: use it with --engine ray")
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise SymtransError("--address: expected auto, HOST:PORT or ray://HOST:PORT")
    if engine == "ray":
        _ray_available(address)
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise SymtransError(f"--workers {workers!r}: must be a positive integer")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise SymtransError(f"--retries {retries!r}: must be 0 or more")


def run_sweep(tasks: Sequence[Task], out: str | os.PathLike[str], *, engine: str = "ray", address: str | None = None,
              workers: int | None = None, retries: int = 2, progress: bool = True) -> SweepResult:
    """Run the tasks not yet done on ``engine`` (``ray`` or ``local``), then write the aggregate.

    Holds a lock on ``out`` for the whole run (a second sweep into it is
    refused). ``retries`` is how often a task whose worker died (killed, out of
    memory) is run again: Ray's ``max_retries``, or a fresh pool for the local
    engine. An exception inside a task is not retried: it is recorded in the
    task's ``failed.json`` and shown in the aggregate. Ctrl-C stops the workers
    and raises ``KeyboardInterrupt``; finished tasks stay finished.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> run_sweep([], out, engine="local", progress=False).ran
    0
    >>> run_sweep([], out, engine="slurm")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --engine 'slurm': choose from ray, local
    """
    from symtrans.outdir import DirLock

    _check_run_options(engine, address, workers, retries)
    start = time.perf_counter()
    out = str(check_sweep_dir(out))
    tasks = list(tasks)
    with DirLock(out):
        from symtrans.outdir import confined_dir

        check_task_dirs(tasks, out)  # a planted link or a record that is a directory: refused before any work
        todo = pending(tasks, out)
        # the engine first: a Ray that cannot start, or a request no node meets, is refused before out/ exists
        ray_started = engine == "ray" and bool(todo) and _start_ray(todo, address)
        try:
            confined_dir(out, "tasks")
            for t in todo:  # under the lock nothing runs them: a running.json left by a killed sweep is stale
                (Path(out) / "tasks" / t.folder / RUNNING).unlink(missing_ok=True)
            tally = _Tally(tasks, len(tasks) - len(todo), out, progress)
            try:
                if not todo:
                    records: list[dict[str, Any]] = []
                elif engine == "ray":
                    records = _run_ray(todo, out, address, retries, tally)
                else:
                    records = _run_local(todo, out, workers or _default_workers(todo), retries, tally)
            except BaseException:  # Ctrl-C, SIGTERM: the stopped runs leave no "running" mark behind
                for t in todo:
                    (Path(out) / "tasks" / t.folder / RUNNING).unlink(missing_ok=True)
                raise
            finally:
                tally.close()
        finally:
            if ray_started:
                import ray

                ray.shutdown()
        agg = aggregate(tasks, out)
        paths = write_aggregate(agg, out)
    failed = [r for r in records if r.get("status") != "done"]
    return SweepResult(tasks, len(records), len(tasks) - len(todo), failed, agg, paths, time.perf_counter() - start)


@announced("sweep")
def sweep(models: Sequence[str | os.PathLike[str]], ns: Sequence[int] = (DEFAULT_N,),
          seeds: Sequence[int] = (DEFAULT_SEED,), *,
          out: str | os.PathLike[str] = "symtrans-sweep", engine: str | None = None, address: str | None = None,
          workers: int | None = None, num_cpus: int = 1, retries: int = 2, dtype: str = DEFAULT_DTYPE,
          device: str | None = None, progress: bool = True) -> SweepResult:
    """Report on every (model, n, seed) and aggregate the verdicts: :func:`plan`, then :func:`run_sweep`.

    Examples
    --------
    A whole run is in ``tests/test_sweep.py`` (each report takes seconds); here, what is refused at once:

    >>> sweep([], out="/tmp/unused")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: sweep: give at least one model
    >>> sweep(["default"], ns=[0], out="/tmp/unused")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ns 0: must be at least 2
    """
    engine = default_engine(address) if engine is None else engine
    _check_run_options(engine, address, workers, retries)
    tasks = plan(models, ns, seeds, out=out, dtype=dtype, device=device, num_cpus=num_cpus)
    return run_sweep(tasks, out, engine=engine, address=address, workers=workers, retries=retries,
                     progress=progress)


# --- the aggregate -------------------------------------------------------------------------------------------

def _deciding_margin(evidence: list[dict[str, Any]], verdict: str) -> tuple[float | str | None, str]:
    """The smallest margin among the counted records whose counted verdict is the row's, with its meaning."""
    best: tuple[float | str | None, str] = (None, "")
    for e in evidence:
        if not isinstance(e, dict) or e.get("stale") or (e.get("counted_as") or e.get("verdict")) != verdict:
            continue
        m = e.get("margin")
        if isinstance(m, (int, float)) and not isinstance(m, bool):
            if best[0] is None or (isinstance(best[0], (int, float)) and m < best[0]):
                best = (m, str(e.get("margin_meaning") or ""))
        elif isinstance(m, str) and best[0] is None:  # "inf" / "nan" as the strict JSON writes them
            best = (m, str(e.get("margin_meaning") or ""))
    return best


def _report_rows(doc: dict[str, Any]) -> list[tuple[tuple[str, str | None], dict[str, Any]]]:
    """A report.json's rows: each claim, then its readings, with verdict and margin read from the file."""
    rows = []
    for c in doc.get("claims") or []:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            continue
        margin, meaning = _deciding_margin(c.get("evidence") or [], c.get("verdict"))
        rows.append(((c["id"], None), {"verdict": c.get("verdict"), "margin": margin, "margin_meaning": meaning,
                                       "title": c.get("title", "")}))
        for r in c.get("readings") or []:
            if not isinstance(r, dict) or not isinstance(r.get("id"), str):
                continue
            margin, meaning = _deciding_margin(r.get("evidence") or [], r.get("verdict"))
            title = f"reading {r.get('name', '')}: {r.get('statement', '')}"
            rows.append(((c["id"], r["id"]), {"verdict": r.get("verdict"), "margin": margin,
                                              "margin_meaning": meaning, "title": title[:160]}))
    return rows


def aggregate(tasks: Sequence[Task], out: str | os.PathLike[str]) -> dict[str, Any]:
    """The sweep's table (schema :data:`SCHEMA`): a column per task, a row per claim and reading.

    Each cell is the verdict the task's ``report.json`` gives that claim or
    reading (read, never recomputed) and the smallest margin among the counted
    records with that verdict; a failed or unfinished task's column has no
    cells (``null``) and says why. Rows where the finished runs give more than
    one verdict come first (``disagree``), each group in the reports' order.

    Examples
    --------
    >>> import tempfile
    >>> t = Task("m", "m", 8, 0, {}, "k" * 64, "f", {})
    >>> doc = aggregate([t], tempfile.mkdtemp())
    >>> doc["schema"], doc["columns"][0]["status"], doc["rows"]
    ('symtrans-sweep/1', 'todo', [])
    """
    from symtrans import __version__
    from symtrans.validate import read_json_file

    columns: list[dict[str, Any]] = []
    per_column: list[dict[tuple[str, str | None], dict[str, Any]]] = []
    order: list[tuple[str, str | None]] = []
    titles: dict[tuple[str, str | None], str] = {}
    for t in tasks:
        folder = Path(out) / "tasks" / t.folder
        state = task_state(t, out)
        col = {"id": t.folder, "label": t.column, "model": t.model, "model_label": t.label, "n": t.n,
               "seed": t.seed, "key": t.key, "weights": t.identity.get("weights"), "status": state,
               "report": f"tasks/{t.folder}/report/report.html", "error": None, "report_errors": []}
        cells: dict[tuple[str, str | None], dict[str, Any]] = {}
        doc: Any = None
        if state == "stale":  # a report that is missing, truncated, edited or another run's never counts as done
            state = col["status"] = "failed"
            col["error"] = (f"{report_problem(t, out, _read_record(folder / MARKER) or {})}: not counted "
                            "(run the sweep again to re-run it)")
        if state == "done":
            try:
                doc = read_json_file(folder / "report" / "report.json", "report", 256 << 20)
                if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
                    raise SymtransError(f"{folder / 'report' / 'report.json'}: not a symtrans report.json")
            except SymtransError as err:  # a damaged report: its column says so, the others still show
                state = col["status"] = "failed"
                col["error"] = f"its report cannot be read: {err}"
        if state == "done":
            marker = _read_record(folder / MARKER) or {}
            col["report_errors"] = list(marker.get("report_errors") or [])
            for rid, cell in _report_rows(doc):
                if rid not in titles:
                    order.append(rid)
                    titles[rid] = cell.pop("title")
                else:
                    cell.pop("title")
                cells[rid] = cell
        elif col["error"] is None:
            col["error"] = ((_read_record(folder / FAILED) or {}).get("error") if state == "failed"
                            else "not run yet (or interrupted)")
        columns.append(col)
        per_column.append(cells)
    rows = []
    for rid in order:
        row_cells = [cells.get(rid) for cells in per_column]
        verdicts = {c["verdict"] for c in row_cells if c is not None}
        rows.append({"claim": rid[0], "reading": rid[1], "title": titles[rid], "disagree": len(verdicts) > 1,
                     "cells": row_cells})
    rows.sort(key=lambda r: not r["disagree"])  # stable: each group keeps the reports' order
    return {"schema": SCHEMA, "toolkit_version": __version__,
            "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "columns": columns, "rows": rows,
            "summary": {"tasks": len(tasks), "done": sum(c["status"] == "done" for c in columns),
                        "failed": sum(c["status"] == "failed" for c in columns),
                        "rows": len(rows), "disagreeing_rows": sum(r["disagree"] for r in rows)}}


def _cell_text(cell: dict[str, Any] | None, col: dict[str, Any]) -> str:
    from symtrans.report.fmt import number

    if cell is None:
        return "task failed" if col["status"] == "failed" else "not run"
    m = cell.get("margin")
    return f"{cell['verdict']} ({number(m)})" if m is not None else str(cell["verdict"])


def _row_name(row: dict[str, Any]) -> str:
    return row["reading"] or row["claim"]


def render_markdown(doc: dict[str, Any]) -> str:
    """The aggregate as a Markdown table (external strings made inert by the report's own escaper).

    Examples
    --------
    >>> doc = {"columns": [{"label": "m<b> n=8 seed=0", "status": "done", "error": None, "report_errors": []}],
    ...        "rows": [{"claim": "c", "reading": None, "title": "t", "disagree": False,
    ...                  "cells": [{"verdict": "fails", "margin": 0.5, "margin_meaning": ""}]}],
    ...        "summary": {"tasks": 1, "done": 1, "failed": 0, "rows": 1, "disagreeing_rows": 0},
    ...        "toolkit_version": "0", "generated": "now"}
    >>> print(render_markdown(doc).splitlines()[-1])
    | c | t | no | fails (0.5) |
    >>> "m&lt;b&gt;" in render_markdown(doc)
    True
    """
    from symtrans.report.markdown import _md, _table

    s = doc["summary"]
    lines = ["# symtrans sweep", "",
             f"{s['tasks']} runs ({s['done']} done, {s['failed']} failed); {s['rows']} claims and readings, "
             f"{s['disagreeing_rows']} on which the runs disagree (listed first). Each cell is the verdict of that "
             "run's report.json, with the smallest margin among the records that decided it.",
             f"symtrans {_md(doc['toolkit_version'])}, generated {_md(doc['generated'])}.", ""]
    for col in doc["columns"]:
        if col.get("error"):
            lines.append(f"- {_md(col['label'])}: {_md(col['status'])}: {_md(col['error'])}")
        for err in col.get("report_errors") or []:
            lines.append(f"- {_md(col['label'])}: a producer raised: {_md(err)}")
    if lines[-1] != "":
        lines.append("")
    # table cells are escaped by the report's _table itself (every cell that is not template markup)
    header = ["claim / reading", "title", "disagree", *[c["label"] for c in doc["columns"]]]
    rows = [[_row_name(r), r["title"], "yes" if r["disagree"] else "no",
             *[_cell_text(c, col) for c, col in zip(r["cells"], doc["columns"])]] for r in doc["rows"]]
    return "\n".join(lines + _table(header, rows)) + "\n"


def render_csv(doc: dict[str, Any]) -> str:
    """The aggregate in long form for pandas: one line per (row, run).

    Examples
    --------
    >>> doc = {"columns": [{"label": "m n=8 seed=0", "model": "m", "n": 8, "seed": 0, "status": "done", "id": "f"}],
    ...        "rows": [{"claim": "c", "reading": "c/r", "title": "t", "disagree": True,
    ...                  "cells": [{"verdict": "fails", "margin": 0.5, "margin_meaning": "gap"}]}]}
    >>> print(render_csv(doc).splitlines()[1])
    c,c/r,True,f,m,8,0,done,fails,0.5,gap
    """
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["claim", "reading", "disagree", "run", "model", "n", "seed", "status", "verdict", "margin",
                "margin_meaning"])
    for r in doc["rows"]:
        for cell, col in zip(r["cells"], doc["columns"]):
            w.writerow([r["claim"], r["reading"] or "", r["disagree"], col["id"], col["model"], col["n"], col["seed"],
                        col["status"], cell["verdict"] if cell else "", "" if not cell or cell["margin"] is None
                        else cell["margin"], cell["margin_meaning"] if cell else ""])
    return buf.getvalue()


def render_html(doc: dict[str, Any], link_prefix: str = "../") -> str:
    """The aggregate as a self-contained HTML heatmap; each cell links to that run's report.html at the claim.

    Colours are the report's own verdict fills (:data:`symtrans.report.style.VERDICT_FILL`).

    Examples
    --------
    >>> doc = {"columns": [{"label": "<m>", "status": "done", "error": None, "report": "tasks/f/report/report.html",
    ...                     "report_errors": []}],
    ...        "rows": [{"claim": "c", "reading": None, "title": "t", "disagree": False,
    ...                  "cells": [{"verdict": "fails", "margin": 0.5, "margin_meaning": "gap"}]}],
    ...        "summary": {"tasks": 1, "done": 1, "failed": 0, "rows": 1, "disagreeing_rows": 0},
    ...        "toolkit_version": "0", "generated": "now"}
    >>> page = render_html(doc)
    >>> 'href="../tasks/f/report/report.html#claim-c"' in page, "&lt;m&gt;" in page, "<script" in page
    (True, True, False)
    """
    from html import escape

    from symtrans.evidence import Verdict
    from symtrans.report.fmt import number
    from symtrans.report.style import VERDICT_FILL

    fills = {v.value: f for v, f in VERDICT_FILL.items()}
    s = doc["summary"]
    head = "".join(f"<th class='run'>{escape(c['label'])}</th>" for c in doc["columns"])
    body = []
    for r in doc["rows"]:
        tds = []
        for cell, col in zip(r["cells"], doc["columns"]):
            if cell is None:
                why = escape(str(col.get("error") or col["status"]))
                tds.append(f"<td class='missing' title='{why}'>{escape(_cell_text(cell, col))}</td>")
                continue
            f = fills.get(cell["verdict"], fills[Verdict.NOT_RUN.value])
            m = cell.get("margin")
            tip = escape(f"{cell['verdict']}" + (f", margin {number(m)} ({cell['margin_meaning']})" if m is not None
                                                 else ""))
            href = escape(f"{link_prefix}{col['report']}#claim-{r['claim']}")
            tds.append(f"<td style='background:{f.fill};color:{f.text}' title='{tip}'>"
                       f"<a style='color:inherit' href=\"{href}\">{escape(_cell_text(cell, col))}</a></td>")
        cls = " class='disagree'" if r["disagree"] else ""
        body.append(f"<tr{cls}><th class='row'>{escape(_row_name(r))}</th><td class='title'>{escape(r['title'])}</td>"
                    + "".join(tds) + "</tr>")
    legend = "".join(f"<span style='background:{f.fill};color:{f.text}'>{escape(v.value)}</span>"
                     for v, f in VERDICT_FILL.items())
    notes = "".join(f"<li>{escape(c['label'])}: {escape(str(c['status']))}: {escape(str(c['error']))}</li>"
                    for c in doc["columns"] if c.get("error"))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>symtrans sweep</title><style>"
            "body{font:14px system-ui,sans-serif;margin:20px}table{border-collapse:collapse}"
            "td,th{border:1px solid #d0d7de;padding:3px 6px;font-size:12.5px;white-space:nowrap}"
            "th.run{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left}"
            "th.row{text-align:left;font-family:monospace}td.title{color:#57606a;max-width:22em;overflow:hidden;"
            "text-overflow:ellipsis}tr.disagree th.row{border-left:4px solid #bc4c00}td.missing{color:#8c959f}"
            ".legend span{display:inline-block;padding:1px 8px;margin:0 4px 4px 0;border-radius:8px;font-size:12px}"
            "</style></head><body><h1>symtrans sweep</h1>"
            f"<p>{s['tasks']} runs ({s['done']} done, {s['failed']} failed); {s['rows']} claims and readings, "
            f"{s['disagreeing_rows']} on which the runs disagree (listed first, marked at the left). Each cell is the "
            "verdict of that run's report.json with the smallest margin among the records that decided it; it links "
            "to that report at the claim.</p>"
            f"<p class='legend'>{legend}</p>" + (f"<ul>{notes}</ul>" if notes else "")
            + f"<table><thead><tr><th>claim / reading</th><th>title</th>{head}</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>"
            f"<p style='color:#57606a'>symtrans {escape(doc['toolkit_version'])}, {escape(doc['generated'])}</p>"
            "</body></html>\n")


def render_aggregate(doc: dict[str, Any]) -> dict[str, str]:
    """The aggregate in every format: file name -> text (see :data:`AGGREGATE_FILES`).

    Examples
    --------
    >>> sorted(render_aggregate({"schema": SCHEMA, "columns": [], "rows": [], "toolkit_version": "0",
    ...     "generated": "now", "summary": {"tasks": 0, "done": 0, "failed": 0, "rows": 0, "disagreeing_rows": 0}}))
    ['sweep.csv', 'sweep.html', 'sweep.json', 'sweep.md']
    """
    from symtrans.validate import dumps_strict

    makers: dict[str, Callable[[dict[str, Any]], str]] = {
        "md": render_markdown, "json": lambda d: dumps_strict(d, indent=2, ensure_ascii=False) + "\n",
        "html": render_html, "csv": render_csv}
    return {AGGREGATE_FILES[f]: makers[f](doc) for f in AGGREGATE_FILES}


def write_aggregate(doc: dict[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """Write the aggregate into ``out/aggregate`` atomically (all four files, or none); return their paths.

    Examples
    --------
    >>> import tempfile
    >>> doc = aggregate([], tempfile.mkdtemp())
    >>> [p.name for p in write_aggregate(doc, tempfile.mkdtemp())]
    ['sweep.md', 'sweep.json', 'sweep.html', 'sweep.csv']
    """
    from symtrans import outdir

    texts = render_aggregate(doc)
    target = outdir.confined_dir(out) / "aggregate"  # the aggregate itself: replace_dir refuses a link there
    with outdir.DirLock(target):
        return outdir.replace_dir(target, texts, AGGREGATE_FILES.values())
