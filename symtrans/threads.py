"""Thread limits for numeric work (torch and BLAS on one thread inside a block), and worker processes' signals.

A base module (it imports only torch and threadpoolctl, lazily), so the runner
(:mod:`symtrans.runner`), the measurements and the CLI share one copy.

Examples
--------
>>> with single_threaded():
...     pass
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["single_threaded", "as_child_process", "Terminated", "command_signals", "signal_received",
           "raise_if_signalled", "start_forked", "import_held", "release_free_memory"]


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run torch CPU kernels on one thread inside the block, then restore the setting.

    MKL's multi-threaded SVD of a few-hundred-wide matrix gains little on an
    idle machine but slows down by up to ~100x when the cores are
    oversubscribed (measured here: 7.7 s against 0.1 s for a 512 x 384
    ``svdvals`` at load 4.6 on 2 cores), so :func:`measure_all` runs single-threaded.

    Examples
    --------
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with single_threaded():
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    >>> from threadpoolctl import threadpool_info
    >>> with single_threaded():
    ...     all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    True
    """
    try:
        import torch
    except ModuleNotFoundError:  # torch-free install (no [numeric] extra): nothing to limit
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    blas = _limit_blas()
    try:
        yield
    finally:
        _restore_blas(blas)
        torch.set_num_threads(before)


_BLAS_LOCK = threading.Lock()
_BLAS_STATE: dict[str, Any] = {"depth": 0, "limiter": None}


def _limit_blas() -> bool:
    """Limit numpy/scipy's BLAS pools to one thread too (threadpoolctl), once for nested blocks.

    numpy's OpenBLAS is a separate pool from torch's: left at one thread per
    core beside single-threaded torch work it oversubscribed the cores (one
    routine ran 10x slower under contention). Without threadpoolctl installed
    only torch is limited.
    """
    with _BLAS_LOCK:
        _BLAS_STATE["depth"] += 1
        if _BLAS_STATE["depth"] == 1:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:
                return True
            _BLAS_STATE["limiter"] = threadpool_limits(limits=1, user_api="blas")
    return True


def _restore_blas(_: bool) -> None:
    with _BLAS_LOCK:
        _BLAS_STATE["depth"] -= 1
        if _BLAS_STATE["depth"] == 0 and _BLAS_STATE["limiter"] is not None:
            _BLAS_STATE["limiter"].restore_original_limits()
            _BLAS_STATE["limiter"] = None


# ----------------------------------------------------------------- processes: one signal handler per tree
class Terminated(KeyboardInterrupt):
    """SIGTERM in the command's process: unwinds like Ctrl-C (every cleanup runs), and the exit status is 143."""


#: the signal (SIGINT or SIGTERM) the command's process received inside :func:`command_signals`, if any
_RECEIVED: list[int] = []


def _exception(signum: int) -> KeyboardInterrupt:
    """What a received signal raises in the command's process: :class:`Terminated` for SIGTERM, else Ctrl-C's."""
    import signal

    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _in_forked_child(signum: int) -> None:
    """A signal in a forked child before :func:`as_child_process`: SIGTERM exits as it would, Ctrl-C is the parent's."""
    import signal

    if signum == signal.SIGTERM:
        os._exit(128 + signal.SIGTERM)


@contextlib.contextmanager
def _handling(handler: Any) -> Iterator[dict[int, Any]]:
    """``handler`` for SIGINT and SIGTERM inside the block; yields the old handlers, which come back after."""
    import signal

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield old
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def command_signals() -> Iterator[None]:
    """Inside the block, Ctrl-C raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`, and both are remembered.

    The one handler of a symtrans process tree: worker processes reset it
    (:func:`as_child_process`), so only the command's own process unwinds,
    stops its workers and exits (130 or 143), leaving nothing running. The
    signal is also remembered (:func:`signal_received`), because a library
    may turn the exception into its own (torch, interrupted inside a tensor
    read, raised "could not determine the shape of object type") or drop it;
    the command then still ends as interrupted. The old handlers come back after.

    Examples
    --------
    >>> import os, signal
    >>> with command_signals():
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...     except Terminated:
    ...         print("unwound; received", signal_received() == signal.SIGTERM)
    unwound; received True
    >>> signal_received() is None  # only inside the block
    True
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    main_pid = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != main_pid:
            return _in_forked_child(signum)
        _RECEIVED.append(signum)
        raise _exception(signum)

    _RECEIVED.clear()
    try:
        with _handling(handler):
            yield
    finally:
        _RECEIVED.clear()


def signal_received() -> int | None:
    """The first signal (SIGINT, SIGTERM) received inside :func:`command_signals`, or None.

    Examples
    --------
    >>> signal_received() is None
    True
    """
    return _RECEIVED[0] if _RECEIVED else None


def raise_if_signalled() -> None:
    """Raise what the received signal means (``KeyboardInterrupt``, :class:`Terminated`), if one was received.

    For a caller that caught an exception a library may have made of it.

    Examples
    --------
    >>> raise_if_signalled()  # nothing received: nothing raised
    """
    got = signal_received()
    if got is not None:
        raise _exception(got)


def start_forked(proc: Any) -> None:
    """Start a forked worker ``proc`` with Ctrl-C and SIGTERM held until the fork is done; then act on them here.

    A signal that lands inside ``os.fork`` runs its handler in an at-fork
    hook (``logging``'s lock release), where Python prints the exception and
    drops it: a Ctrl-C there was lost and the report ran on to exit 0. One
    that lands in the child before :func:`as_child_process` unwound the
    command's own stack in the child. While held, the parent records the
    signal and, once the fork is done, kills and reaps ``proc`` and raises it
    (``KeyboardInterrupt``, :class:`Terminated`): the caller never holds a
    worker it was not given. The child ignores Ctrl-C and exits on SIGTERM,
    as :func:`as_child_process` then sets.
    Outside the main thread it only starts ``proc`` (no handler can be set).

    Examples
    --------
    >>> import multiprocessing, signal, time
    >>> class Process(multiprocessing.get_context("fork").Process):
    ...     def start(self):  # a Ctrl-C as the fork returns
    ...         super().start(); signal.raise_signal(signal.SIGINT)
    >>> p = Process(target=time.sleep, args=(60,), daemon=True)
    >>> try:
    ...     start_forked(p)
    ... except KeyboardInterrupt:
    ...     print("interrupted; the worker was killed:", p.exitcode == -signal.SIGKILL)
    interrupted; the worker was killed: True
    """

    def reap() -> None:  # the worker goes before the signal acts: the caller never holds one it did not get
        if proc.is_alive():
            proc.kill()
        proc.join()

    with _held() as act:
        proc.start()
    act(before=reap)


def import_held(name: str) -> Any:
    """Import module ``name`` with Ctrl-C and SIGTERM held until the import is done; then act on them.

    A signal that lands inside a library's import can leave the module
    half-imported (numpy without ``matrix``, the report then ending with every
    producer raising) or abort the interpreter (exit -6, seen once in 70
    interrupted reports during torch's import). Held, it acts at once after
    the import, as it would have before. Outside the main thread it only
    imports.

    Examples
    --------
    >>> import_held("json").__name__  # tests/test_threads_signals.py interrupts an import
    'json'
    """
    import importlib

    act = None
    try:
        with _held() as act:
            module = importlib.import_module(name)
    finally:
        if act is not None:
            act()  # a held signal acts even when the import failed: the interrupt, not the import error
    return module


@contextlib.contextmanager
def _held() -> Iterator[Any]:
    """SIGINT and SIGTERM recorded, not acted on, inside the block; yields ``act(before=None)`` to call after it.

    ``act`` runs ``before`` (if a signal came) and then what the handler that was in place would have done:
    call it (``KeyboardInterrupt``, :class:`Terminated`) or, for ``SIG_DFL``, re-raise the signal. Outside the
    main thread no handler can be set: the block runs as it is, and ``act`` does nothing.
    """
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield lambda before=None: None
        return
    owner, caught = os.getpid(), []

    def hold(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            return _in_forked_child(signum)
        caught.append(signum)

    with _handling(hold) as old:
        def act(before: Any = None) -> None:
            for s in caught[:1]:
                if old[s] == signal.SIG_IGN:
                    continue
                if before is not None:
                    before()
                if callable(old[s]):
                    old[s](s, None)
                signal.raise_signal(s)  # SIG_DFL, or a handler that returned

        yield act


def as_child_process() -> None:
    """Set up a symtrans worker process: Ctrl-C and SIGTERM are the parent's to handle, and it dies with its parent.

    SIGINT is ignored (a Ctrl-C reaches the whole process group: the parent
    stops its workers, no worker prints a traceback), SIGTERM has its default
    action, and on Linux the kernel kills the worker when its parent exits
    (``PR_SET_PDEATHSIG``), however the parent ends (even ``kill -9``).
    Also called by the initializer of the sweep's local pool (module-level: picklable).

    Examples
    --------
    >>> import multiprocessing
    >>> p = multiprocessing.get_context("spawn").Process(target=as_child_process)
    >>> p.start(); p.join(); p.exitcode
    0
    """
    import signal

    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's cleanup stops its workers
        pass
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(128 + signal.SIGTERM)


def release_free_memory() -> bool:
    """Hand the C heap's free pages back to the OS (glibc ``malloc_trim(0)``); False where there is no glibc.

    torch frees a producer's temporaries into glibc's heap, which keeps the
    pages resident for reuse: in a report at BERT-large size the resident set
    grew by 350-450 MiB of such free pages over the trace and a few producers
    (measured with ``/proc/self/status``: 3491 MiB peak, against 3115 MiB when
    trimmed after each step), which pushed the report above twice the memory of
    one ``transformers`` forward. The runner calls this after the shared trace
    and after each producer; a call on a 3 GB process takes milliseconds.

    Examples
    --------
    >>> release_free_memory() in (True, False)
    True
    """
    import sys

    if not sys.platform.startswith("linux"):
        return False
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, looked up once per process (``find_library`` runs ``ldconfig``: ~6 ms a call),
    or None (musl and other libcs have none)."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
