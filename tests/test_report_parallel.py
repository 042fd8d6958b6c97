"""The report's forked worker: the same records as serial runs, and every failure of the worker handled."""

import os
import re

import pytest

from symtrans.context import Context

from symtrans.evidence import Evidence, Producer, Verdict
from symtrans.runner import parallel_default, producers_for, run_tasks

PARENT = os.getpid()


def _view(results):
    """What must not depend on the process: verdicts, readings, scopes, summaries and details.

    Numbers are compared to rounding level: a float64 BLAS result may differ in its last bits with the
    alignment of its buffers, so a printed rounding-level number (e.g. a least-squares residual of
    3e-16) is masked in summaries, and floats in details are compared as :func:`_same` says.
    """
    mask = lambda text: re.sub(r"\d\.?\d*e-1\d", "#", text)  # noqa: E731
    return [r if isinstance(r, str) else
            [(e.producer, e.verdict, e.reading, e.scope and e.scope.kind, mask(e.summary), _untimed(e.details))
             for e in r]
            for r in results]


def _untimed(details):
    """``details`` without wall-clock fields (``seconds``: a proof kernel's run time is not a result)."""
    if isinstance(details, dict):
        return {k: _untimed(v) for k, v in details.items() if k != "seconds"}
    if isinstance(details, (list, tuple)):
        return [_untimed(v) for v in details]
    return details


def _diffs(a, b, path=""):
    """Paths where a and b differ (floats beyond 1e-12), for the failure message."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diffs(x, y, f"{path}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in _diffs(a[k], b[k], f"{path}.{k}")]
    return [] if _same(a, b) else [f"{path}: {a!r} != {b!r}"[:300]]


def _same(a, b):
    """Equal; floats to 1e-9 relative, and two rounding-level residuals (both below 1e-9) count as equal.

    BLAS results may differ in their last bits with buffer alignment, so a residual that is itself rounding
    noise (a least-squares error of cond(W_O) eps ~ 2e-12) can come out 1.7e-12 in one process and 2.8e-12
    in another.
    """
    if isinstance(a, float) and isinstance(b, float):
        return (a == b or (a != a and b != b) or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
                or max(abs(a), abs(b)) < 1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _ev(name, summary, **details):
    return [Evidence(claim="c", producer=name, kind="symbolic", verdict=Verdict.SUPPORTED, summary=summary,
                     details=details)]


def _raises(ctx):
    raise ValueError("planted failure")


def _dies_in_worker(ctx):
    if os.getpid() != PARENT:
        os._exit(3)  # a crash of the worker process (not an exception)
    return _ev("dies", "ran in the parent")


def _unpicklable(ctx):
    return _ev("unpicklable", "has a lambda", f=lambda x: x)


def _sym(name, func):
    return Producer(claim="c", name=name, kind="symbolic", func=func, description=name)


@pytest.mark.skipif(not parallel_default(), reason="needs fork and two CPUs")
def test_parallel_records_equal_serial_records():
    tasks = [(c, p) for c in ("prop-5.1", "lem-rank-sum", "thm-5.3", "prop-6.3", "thm-7.3") for p in producers_for(c)]
    assert {p.kind for _, p in tasks} == {"symbolic", "numeric"}  # both streams are exercised
    assert any(p.share for _, p in tasks)  # and producers that must share one process's cache
    serial = run_tasks(tasks, Context(model="default", n=8, reuse=False), parallel=False)
    parallel = run_tasks(tasks, Context(model="default", n=8, reuse=False), parallel=True)
    assert _same(_view(serial), _view(parallel)), _diffs(_view(serial), _view(parallel))[:10]
    assert not _same(_view(serial), _view(parallel[:-1] + [[]]))  # the comparison can fail


@pytest.mark.skipif(not parallel_default(), reason="needs fork and two CPUs")
def test_worker_failures_are_handled():
    numeric = [("prop-5.1", p) for p in producers_for("prop-5.1") if p.kind == "numeric"]
    tasks = numeric + [("c", _sym("raises", _raises)), ("c", _sym("unpicklable", _unpicklable)),
                       ("c", _sym("dies", _dies_in_worker))]
    ctx = Context(model="default", n=8, reuse=False)
    out = run_tasks(tasks, ctx, parallel=True)
    k = len(numeric)
    assert out[k] == "ValueError: planted failure"  # the same message a serial run records
    assert out[k + 1][0].summary == "has a lambda"  # not picklable: sent back as "run it here"
    assert out[k + 2][0].summary == "ran in the parent"  # the worker died: its unfinished task ran here
    assert run_tasks(tasks[k:k + 1], ctx, parallel=False) == ["ValueError: planted failure"]


def test_no_fork_with_weights_off_the_cpu():
    """A forked child cannot use CUDA: weights on another device (or CUDA initialised) keep the report serial."""
    from types import SimpleNamespace

    import torch

    from symtrans.runner import _cuda_in_use

    on = lambda dev: SimpleNamespace(numeric=True, weights=lambda: SimpleNamespace(device=torch.device(dev)))  # noqa: E731
    assert _cuda_in_use(on("meta")) and not _cuda_in_use(on("cpu"))
    assert not _cuda_in_use(SimpleNamespace(numeric=False))


def _logged(path):
    """A symbolic producer that appends one line per run to ``path`` (how many times it ran, in any process)."""
    def func(ctx):
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")
        return _ev(path.name, "logged")
    return func


@pytest.mark.skipif(not parallel_default(), reason="needs fork and two CPUs")
def test_early_worker_runs_each_model_free_unit_once(tmp_path):
    """start_early forks before the model loads; run_tasks collects its units and runs none of them twice."""
    from symtrans.runner import start_early

    from symtrans.runner import uses_torch

    numeric = [(c, p) for c in ("prop-5.1", "thm-5.3") for p in producers_for(c) if p.needs_model]
    logs = [tmp_path / f"log{k}" for k in range(4)]
    search = [("thm-4.2", p) for p in producers_for("thm-4.2") if p.name == "ln-search-arank"]  # model-free, torch
    tasks = numeric + [("c", _sym(f"logged{k}", _logged(path))) for k, path in enumerate(logs)] \
        + [(c, p) for c in ("prop-5.1", "lem-rank-sum") for p in producers_for(c) if not p.needs_model] + search
    assert search and not search[0][1].needs_model and uses_torch(search[0][1])
    ctx = Context(model="default", n=8, reuse=False)
    early = start_early(tasks, ctx, parallel=True)
    assert early is not None and ctx.loaded_weights() is None  # forked with no model loaded
    # the units that read neither a model nor torch; the numeric search runs after the load, with the model's
    assert sorted(i for u in early.units for i in u) == [i for i, (_, p) in enumerate(tasks) if not uses_torch(p)]
    assert len(tasks) - 1 not in {i for u in early.units for i in u}
    out = run_tasks(tasks, ctx, parallel=True, early=early)
    serial = run_tasks(tasks, Context(model="default", n=8, reuse=False), parallel=False)
    assert [len(path.read_text().split()) for path in logs] == [2] * 4  # once with early=, once serially
    assert _same(_view(serial), _view(out)), _diffs(_view(serial), _view(out))[:10]
    _logged(logs[0])(ctx)
    assert len(logs[0].read_text().split()) == 3  # the count can tell a second run
    assert start_early(tasks, ctx, parallel=False) is None and start_early(tasks, Context(model=None)) is None


EARLY_SCRIPT = """
import sys
from symtrans.context import Context
from symtrans.evidence import Evidence, Producer, Verdict
from symtrans.runner import producers_for, run_tasks, start_early

def probe(ctx):  # what the worker that runs it has imported
    return [Evidence(claim="c", producer="probe", kind="symbolic", verdict=Verdict.SUPPORTED,
                     summary=f"torch {'torch' in sys.modules}")]

tasks = [("c", Producer(claim="c", name="probe", kind="symbolic", func=probe, description="probe"))]
tasks += [(c, p) for c in ("lem-rank-sum", "thm-5.3") for p in producers_for(c)]
assert "torch" not in sys.modules
ctx = Context(model="default", n=8)
early = start_early(tasks, ctx, parallel=True)
assert "torch" in sys.modules  # the parent imports it after the fork, as the load would
out = run_tasks(tasks, ctx, parallel=True, early=early)
print(out[0][0].summary, sorted({e.verdict.value for r in out for e in r}))
"""


@pytest.mark.skipif(not parallel_default(), reason="needs fork and two CPUs")
def test_early_worker_is_forked_before_torch_and_never_imports_it():
    """The early worker's units are torch-free, and it is forked before the parent imports torch: it never does."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", EARLY_SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    summary, verdicts = out.stdout.strip().split(" [", 1)
    assert summary == "torch False", out.stdout  # run by the early worker, which has no torch
    assert "not-run" not in verdicts and "'certified'" in verdicts and "'supported'" in verdicts, verdicts


@pytest.mark.skipif(not parallel_default(), reason="needs fork and two CPUs")
def test_early_worker_failures_are_handled():
    from symtrans.runner import start_early

    numeric = [("prop-5.1", p) for p in producers_for("prop-5.1") if p.kind == "numeric"]
    tasks = numeric + [("c", _sym("raises", _raises)), ("c", _sym("unpicklable", _unpicklable)),
                       ("c", _sym("dies", _dies_in_worker))]
    ctx = Context(model="default", n=8, reuse=False)
    out = run_tasks(tasks, ctx, parallel=True, early=start_early(tasks, ctx, parallel=True))
    k = len(numeric)
    assert out[k] == "ValueError: planted failure"
    assert out[k + 1][0].summary == "has a lambda"
    assert out[k + 2][0].summary == "ran in the parent"  # a worker died: its unfinished task ran here
    early = start_early(tasks, ctx, parallel=True)
    early.stop()  # a report that fails before collecting it: the worker ends, nothing is left behind
    assert not early.proc.is_alive()


def _big(ctx):
    return [Evidence(claim="c", producer="big", kind="symbolic", verdict=Verdict.SUPPORTED, summary="x" * 300_000)]


def test_a_result_larger_than_the_pipe_does_not_stop_the_worker():
    """The worker hands results to a sender thread: with the parent not reading, it still claims every unit.

    The false case: a plain ``Connection.send`` of the same result into a pipe nobody reads blocks, which is
    what stopped the worker before (1.4 s idle in the Gemma 3 report).
    """
    import multiprocessing
    import threading
    import time

    from symtrans.runner import _worker

    big = Producer(claim="c", name="big", kind="symbolic", func=_big, description="a large record")
    small = Producer(claim="c", name="small", kind="symbolic", func=lambda ctx: [], description="none")
    tasks = [("c", big), ("c", small)]
    mp = multiprocessing.get_context("fork")
    counter = mp.Value("i", 0)
    reader, writer = mp.Pipe(duplex=False)
    proc = mp.Process(target=_worker, args=(tasks, [([[0], [1]], counter)], Context(model=None), writer))
    proc.start()
    writer.close()
    deadline = time.monotonic() + 60
    while counter.value < 2 and time.monotonic() < deadline:  # not reading: the worker must go on regardless
        time.sleep(0.05)
    claimed = counter.value
    got = []
    while (msg := reader.recv()) is not None:
        got.append(msg)
    proc.join(30)
    assert claimed == 2, "the worker stopped at its first result while the parent was not reading"
    assert sorted(i for i, _ in got) == [0, 1] and len(got[0][1][0].summary) == 300_000

    r, w = mp.Pipe(duplex=False)
    blocked = threading.Thread(target=w.send, args=(_big(None),), daemon=True)
    blocked.start()
    blocked.join(2)
    assert blocked.is_alive()  # the old way: still blocked, nobody reads
    r.recv()
    blocked.join(10)
    assert not blocked.is_alive()
