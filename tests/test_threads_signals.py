"""A Ctrl-C that lands while a worker is forked acts in the command, once (threads.start_forked)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")

# A Ctrl-C delivered during os.fork: an at-fork hook sends it, so Python runs its handler inside the hook,
# which is where a real Ctrl-C ran it when it landed in logging's lock release (the report then ran to exit 0).
_SCRIPT = textwrap.dedent("""
    import multiprocessing, os, signal, sys, time
    from symtrans.threads import start_forked

    armed = []
    os.register_at_fork(after_in_parent=lambda: armed and os.kill(os.getpid(), signal.SIGINT))
    mp = multiprocessing.get_context("fork")
    start = start_forked if sys.argv[1] == "held" else (lambda p: p.start())
    p = mp.Process(target=time.sleep, args=(30,), daemon=True)
    armed.append(1)
    try:
        start(p)
        time.sleep(0.5)  # a handler that ran late would raise here
        print("ran on")
    except KeyboardInterrupt:
        print("interrupted", p.exitcode)
    finally:
        armed.clear()
        if p.is_alive():
            p.kill()
            p.join()
""")


def _run(how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, how], capture_output=True, text=True, timeout=120)


def test_a_ctrl_c_inside_the_fork_is_raised_after_it_and_the_worker_is_reaped() -> None:
    """Held across the fork, the Ctrl-C is raised once the start is done, after the worker was killed and reaped."""
    import signal

    done = _run("held")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["interrupted", str(-signal.SIGKILL)], (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_without_holding_the_same_ctrl_c_is_lost() -> None:
    """The false case: started plainly, the handler raises inside the hook, Python drops it and the run goes on."""
    done = _run("plain")
    assert done.stdout.split() == ["ran", "on"], (done.stdout, done.stderr)
    assert "Exception ignored" in done.stderr and "KeyboardInterrupt" in done.stderr, done.stderr


# CPython remembers a KeyboardInterrupt that left a PyRun_* evaluation (Cython's limited-API modules, such as
# python-flint's, run one on import) and then exits by SIGINT whatever status the program chose. The module
# below sends a caught Ctrl-C through that path, as one landing in flint's import did during a report.
_MODULE = textwrap.dedent("""
    import ctypes, sys
    evaluate = ctypes.pythonapi.PyRun_String
    evaluate.restype = ctypes.py_object
    evaluate.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
    try:
        evaluate(b"raise KeyboardInterrupt", 257, {}, {})  # 257: Py_file_input
    except KeyboardInterrupt:
        pass
    if sys.argv[1] == "cli":
        from symtrans.cli import run
        sys.exit(run(["--version"]))
    sys.exit(0)
""")


@pytest.mark.parametrize("how", ["cli", "plain"])
def test_a_caught_ctrl_c_keeps_the_commands_exit_status(how: str, tmp_path: Path) -> None:
    """``python -m`` a command that caught a Ctrl-C: the CLI's status stands; without the CLI, Python's SIGINT exit."""
    import os
    import signal

    (tmp_path / "interrupted_once.py").write_text(_MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[1])])}
    done = subprocess.run([sys.executable, "-m", "interrupted_once", how], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == (0 if how == "cli" else -signal.SIGINT), (done.returncode, done.stderr)


class _Interrupting:
    """A sequence torch reads to find a tensor's shape while a Ctrl-C lands (the handler runs in its item read)."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> float:
        import signal

        if i > 0:  # one item: a handler that does not raise must not make torch read on forever
            raise IndexError(i)
        signal.raise_signal(signal.SIGINT)
        return 0.0


def test_a_ctrl_c_torch_turned_into_its_own_error_still_ends_the_command_as_interrupted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """torch makes "could not determine the shape" of the KeyboardInterrupt (seen in a report's tensor read); 130."""
    import torch

    from symtrans.cli import _signalled
    from symtrans.threads import command_signals, raise_if_signalled

    with command_signals():
        with pytest.raises(ValueError, match="could not determine the shape"):
            torch.tensor([_Interrupting()])
        with pytest.raises(KeyboardInterrupt):
            raise_if_signalled()
        assert _signalled() == 130
    assert capsys.readouterr().err == "symtrans: interrupted\n"


def test_without_the_command_handler_the_same_ctrl_c_is_only_torchs_error() -> None:
    """The false case: under Python's own handler nothing remembers it, so the error would be all a user saw."""
    import torch

    import signal

    from symtrans.cli import _signalled
    from symtrans.threads import raise_if_signalled

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the premise: Python's own handler
    with pytest.raises(ValueError, match="could not determine the shape"):
        torch.tensor([_Interrupting()])
    raise_if_signalled()
    assert _signalled() is None


def _drop_a_ctrl_c_in_a_weakref_callback() -> list[str]:
    """A Ctrl-C whose handler runs in a weakref callback, where Python reports the exception and drops it.

    Seen in a report: the handler ran in importlib's module-lock callback during an import, and the
    report went on to exit 0. Returns the names of the exceptions Python dropped.
    """
    import signal
    import weakref

    class Thing:
        pass

    dropped: list[str] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda u: dropped.append(type(u.exc_value).__name__)
    try:
        thing = Thing()
        ref = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGINT))
        del thing  # the callback runs here
    finally:
        sys.unraisablehook = hook
    assert ref() is None
    return dropped


def test_a_ctrl_c_python_dropped_is_raised_at_the_next_check() -> None:
    """Remembered by the command's handler, the dropped Ctrl-C is raised by raise_if_signalled (runner, CLI)."""
    from symtrans.threads import command_signals, raise_if_signalled

    with command_signals():
        assert _drop_a_ctrl_c_in_a_weakref_callback() == ["KeyboardInterrupt"]  # no exception reaches here
        with pytest.raises(KeyboardInterrupt):
            raise_if_signalled()


def test_under_pythons_handler_a_dropped_ctrl_c_is_gone() -> None:
    """The false case: with Python's own handler nothing remembers it and the program goes on."""
    from symtrans.threads import raise_if_signalled, signal_received

    assert _drop_a_ctrl_c_in_a_weakref_callback() == ["KeyboardInterrupt"]
    raise_if_signalled()
    assert signal_received() is None


# A module whose import is interrupted half-way: the Ctrl-C arrives between its two halves, as one landing in a
# library's import does (numpy left without `matrix`; torch's import once aborted the interpreter, exit -6).
_HALVES = textwrap.dedent("""
    import signal
    first = True
    signal.raise_signal(signal.SIGINT)
    second = True
""")


@pytest.mark.parametrize("held", [True, False])
def test_a_ctrl_c_inside_an_import_acts_after_it_when_held(held: bool, tmp_path: Path) -> None:
    """Held, the import completes and then the Ctrl-C is raised; the false case: plainly, it stops the import."""
    import importlib

    from symtrans.threads import command_signals, import_held, signal_received

    name = f"symtrans_halves_{'held' if held else 'plain'}"
    (tmp_path / f"{name}.py").write_text(_HALVES, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        with command_signals():
            with pytest.raises(KeyboardInterrupt):
                (import_held if held else importlib.import_module)(name)
            assert signal_received() is not None
        module = sys.modules.get(name)
        if held:
            assert module is not None and module.first and module.second  # the whole module, then the Ctrl-C
        else:
            assert module is None  # the import stopped between the halves (and Python dropped the half module)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_a_ctrl_c_held_during_a_failing_import_is_still_raised(tmp_path: Path) -> None:
    """The import fails after the Ctrl-C arrived: the interrupt is raised, not the import's error."""
    from symtrans.threads import command_signals, import_held

    (tmp_path / "symtrans_halves_failing.py").write_text(_HALVES + "raise ImportError('planted')\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        with command_signals():
            with pytest.raises(KeyboardInterrupt) as got:
                import_held("symtrans_halves_failing")
        assert isinstance(got.value.__context__, ImportError)  # the import's error is kept as the context
        with pytest.raises(ImportError):  # and without a signal the import's own error is what comes out
            import_held("symtrans_halves_failing_missing")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("symtrans_halves_failing", None)


def test_outside_the_main_thread_the_hold_only_runs_the_block() -> None:
    """No handler can be set off the main thread: start_forked starts, import_held imports, nothing else."""
    import threading
    import time

    from symtrans.threads import import_held, start_forked

    got: dict[str, object] = {}

    def run() -> None:
        try:
            got["module"] = import_held("json").__name__
            p = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,), daemon=True)
            start_forked(p)
            p.join(30)
            got["exit"] = p.exitcode
        except BaseException as err:  # noqa: BLE001 - reported below
            got["error"] = repr(err)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert got == {"module": "json", "exit": 0}, got
