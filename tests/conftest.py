"""Session fixtures shared across test modules: what is expensive is computed once per test run.

* ``default_model``: the bundled all-MiniLM-L6-v2 weights (float64, CPU), loaded once;
* ``symbolic_report``: the proof-status report without a model (symbolic producers only);
* ``example_report``: ``examples/proof_status.py`` run once per test run, in the process of the first
  xdist worker that asks for it (the same report as ``symtrans report --model default``): its stdout, the
  parsed report.json and the path to it; the other worker reads the same files back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


#: modules left on the default threads: docs/gen.py's blocks are written by a plain process with the default
#: threads, and a noise-level figure they print ("gap 13.7 decades" in docs/group.md) moves with the thread count
DEFAULT_THREAD_MODULES = frozenset({"test_docs_gen.py"})


@pytest.fixture(scope="module", autouse=True)
def _session_one_thread(request: pytest.FixtureRequest) -> Any:
    """Each test module's in-process numeric work on one thread (torch and BLAS), as the producer runner runs
    producers.

    Multi-threaded BLAS gains little on these small matrices and, on the shared 2-core machine, spin-waits and
    oversubscription made single tests ~8x costlier in CPU time (measured: two tests of test_checks_sec7_sec8.py
    took 118 CPU s and 393 s at load 10 with the default threads, 14 CPU s and 31 s on one thread). Subprocesses
    (the CLI tests) keep their own default. A module of quick-tier tests only imports no torch for it: it is left
    on the default threads when nothing has imported torch yet (collecting the other modules usually has: then
    it runs on one thread too; test_group_relate_tiny.py: 18.1 CPU s with the default threads, 14.3 on one).
    """
    path = request.node.path
    mine = [item for item in request.session.items if item.path == path]
    quick = all(item.get_closest_marker("quick") is not None for item in mine)
    if path.name in DEFAULT_THREAD_MODULES or (quick and "torch" not in sys.modules):
        yield
        return
    from symtrans.threads import single_threaded

    with single_threaded():
        yield


@pytest.fixture(autouse=True)
def _signal_handlers_kept(request: pytest.FixtureRequest) -> Any:
    """A test that leaves the SIGINT or SIGTERM handler changed fails, and the handler is put back.

    Seen: a full run hung in ``test_threads_signals.py``, whose Ctrl-C case assumes Python's own handler: with a
    leaked ``SIG_IGN`` the Ctrl-C never raised, and torch read its sequence forever.
    """
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [s.name for s, h in before.items() if signal.getsignal(s) is not h]
    for s, h in before.items():
        signal.signal(s, h)
    if changed:
        pytest.fail(f"{request.node.nodeid} left the {', '.join(changed)} handler changed")


@pytest.fixture(scope="module")
def one_thread() -> Any:
    """Small factorisations on one thread, as the producer runner does (oversubscribed cores are 100x slower)."""
    from symtrans.numeric.measure import single_threaded

    with single_threaded():
        yield


@pytest.fixture(scope="session")
def default_model() -> Any:
    from symtrans.numeric import load_model

    return load_model("default")


@pytest.fixture(scope="session")
def symbolic_report() -> Any:
    from symtrans.context import Context
    from symtrans.report import build_report

    return build_report(Context(model=None))


def _run_example(out: Path) -> str:
    """``examples/proof_status.py OUT`` in this process; its stdout."""
    buf = io.StringIO()
    argv = sys.argv
    sys.argv = [str(ROOT / "examples" / "proof_status.py"), str(out)]
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(str(ROOT / "examples" / "proof_status.py"), run_name="__main__")
    finally:
        sys.argv = argv
    return buf.getvalue()


@pytest.fixture(scope="session")
def example_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, Path]:
    """The example's run, once per test run: under pytest-xdist the first worker to ask runs it (the others wait
    on a lock in the run's shared temporary directory) and every worker reads the same files back."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's root under xdist
    home = shared / "example-proof-status"
    home.mkdir(exist_ok=True)
    out, printed, done = home / "report", home / "stdout.txt", home / "done"
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (or the worker dies)
        if not done.is_file():
            if out.exists():  # a worker that died half-way: start afresh
                shutil.rmtree(out)
            printed.write_text(_run_example(out), encoding="utf-8")
            done.write_text("ok", encoding="utf-8")
    path = out / "report.json"
    return printed.read_text(encoding="utf-8"), json.loads(path.read_text(encoding="utf-8")), path


#: The quick tier (``python -m pytest -q -m quick``): modules that never load the bundled model or build
#: a report (formulas, architectures, the claim graph's rules, the group spec, the exact core, the claim
#: registry, the docs blocks derived from code). A test of these modules that asks for a fixture loading
#: the model or a report is left out of the tier.
QUICK_MODULES = frozenset({"test_arch.py", "test_cli_formulas.py", "test_fibres.py", "test_graph_rules.py",
                           "test_group_spec.py", "test_certify_exact.py", "test_claims_registry.py",
                           "test_docs_gen.py", "test_hostile_round3.py",
                           "test_group_relate_tiny.py"})
HEAVY_FIXTURES = frozenset({"default_model", "example_report", "symbolic_report", "small_certificates",
                            "report_process"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if (item.path.name in QUICK_MODULES and not HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
                and item.get_closest_marker("slow") is None):
            item.add_marker(pytest.mark.quick)


@pytest.fixture(scope="session")
def small_certificates() -> dict[str, Any]:
    """The real-weight certificate records of the bundled model at n = 16 (as the report runs them, with their
    context keys), produced once: producer name -> Evidence."""
    from symtrans.context import Context
    from symtrans.runner import producers_for, run_producer

    ctx = Context(model="default", n=16)
    wanted = {"prop-6.3": "prop63-real-weights", "thm-recovery": "recovery-wo-real", "thm-5.3": "thm53-real-weights"}
    out = {}
    for cid, name in wanted.items():
        (p,) = [p for p in producers_for(cid) if p.name == name]
        (out[name],) = run_producer(p, ctx)
    out["context"] = ctx
    return out
