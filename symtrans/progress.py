"""Progress on stderr for every command that can take more than a moment: one module, used everywhere.

Three modes, chosen once per process by :func:`configure` (the command line
calls it from ``--quiet``):

* stderr is a terminal: a tqdm bar that disappears when done;
* stderr is not a terminal (CI, a pipe, ``nohup``): plain lines
  ``[HH:MM:SS] symtrans report: claims 3/35 thm-4.2``, one per step, so a log
  shows what ran and when;
* quiet: nothing.

A command that stays silent for :data:`HEARTBEAT_SECONDS` (a Jacobian, an
import of torch) is not left mute: in a pipe its last line is repeated with
``(still running, N s)``; on a terminal the bar (or the transient
"starting" line) shows its clock. So a log never goes quiet for long while
something is still working.

Library code opens a bar with :class:`Progress` (or iterates with
:func:`track`); code deeper down that does not know whether anyone is
watching calls :func:`tick`, which advances the innermost open bar and is a
no-op when none is open. Nothing here imports tqdm until a bar is drawn on a
terminal, so :func:`announce` can print the first line before any heavy import.

Examples
--------
>>> import io
>>> err = io.StringIO()
>>> configure(stream=err, clock=lambda: "12:00:00")
>>> with Progress(2, "demo", unit="item") as bar:
...     bar.step("a")
...     tick("b")
>>> print(err.getvalue().strip())
[12:00:00] symtrans demo: 1/2 a
[12:00:00] symtrans demo: 2/2 b
[12:00:00] symtrans demo: done, 2 items in 0.0 s
>>> configure()
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO, TypeVar

__all__ = ["configure", "enabled", "announce", "finish", "note", "Progress", "track", "tick", "without_progress",
           "progress_line", "announced"]

T = TypeVar("T")

_STATE: dict[str, Any] = {"quiet": False, "stream": None, "clock": None, "announced": None}
_OPEN: list[Progress] = []

#: Lines for a non-terminal stream are held this long after :func:`announce`, so that a command refusing
#: its input at once prints only its one error line (:func:`finish` with ``discard``), not "starting".
HOLD_SECONDS = 0.5
_HELD: list[str] = []
_LOCK = threading.Lock()
_TIMER: list[threading.Timer] = []

#: A command silent this long (between announce/steps and its last bar's end) gets a "still running" line.
HEARTBEAT_SECONDS = 2.0
#: what the heartbeat repeats: the last line's text, when it (or the last beat) was written, when work began
_BEAT: dict[str, Any] = {"text": None, "written": 0.0, "since": 0.0, "thread": None}

#: How a piped line is written (:func:`_line`) and how the heartbeat repeats one (:func:`_beat`): the one home
#: of both formats, read back by :func:`progress_line`.
_STAMPED = "[{clock}] {text}\n"
_STILL_RUNNING = "{text} (still running, {seconds:.0f} s)"
_PIPED = re.compile(r"\[\d\d:\d\d:\d\d\] symtrans (?P<command>[^:]+): (?P<what>.*?)"
                    r"(?: \(still running, (?P<seconds>\d+) s\))?")


def configure(*, quiet: bool = False, stream: TextIO | None = None,
              clock: Callable[[], str] | None = None) -> None:
    """Set the mode for this process: ``quiet``, or the stream (default stderr) and its clock.

    Examples
    --------
    >>> configure(quiet=True); enabled()
    False
    >>> configure(); enabled()
    True
    """
    if stream is not _STATE["stream"]:
        _STATE["announced"] = None
    _STATE.update(quiet=quiet, stream=stream, clock=clock)


def enabled() -> bool:
    """Whether progress is shown at all: not ``--quiet``, and stderr is a terminal, a file or a pipe.

    An in-memory ``sys.stderr`` (a caller capturing the command's messages, as
    the test suite does) gets none, unless given explicitly to :func:`configure`.

    Examples
    --------
    >>> import io
    >>> configure(quiet=True); enabled()
    False
    >>> configure(stream=io.StringIO()); enabled()
    True
    """
    if _STATE["quiet"]:
        return False
    if _STATE["stream"] is not None:
        return True
    try:
        sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError and a ValueError
        return False
    return True


def _stream() -> TextIO:
    return _STATE["stream"] if _STATE["stream"] is not None else sys.stderr


def _is_terminal() -> bool:
    try:
        return bool(_stream().isatty())
    except (AttributeError, ValueError):
        return False


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel writing to its own stderr (not a stream set by :func:`configure`).

    Examples
    --------
    >>> _in_notebook()  # a test run is not a kernel
    False
    """
    if _STATE["stream"] is not None or "ipykernel" not in sys.modules:
        return False
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def _now() -> str:
    clock = _STATE["clock"]
    return clock() if clock is not None else time.strftime("%H:%M:%S")


def _line(text: str, *, beat: bool = True) -> None:
    stream = _stream()
    if beat:
        _mark(text)
    try:
        if _is_terminal():
            _clear_announce()
            stream.write(text + "\n")
        else:
            line = _STAMPED.format(clock=_now(), text=text)
            with _LOCK:
                if _TIMER:  # still within the hold after announce()
                    _HELD.append(line)
                    return
            stream.write(line)
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stderr must not stop the work
        pass


def _mark(text: str | None) -> None:
    """Remember ``text`` as what is running now (None: nothing), for the heartbeat."""
    now = time.monotonic()
    with _LOCK:
        _BEAT.update(text=text, written=now, since=now)
        if text is None or _BEAT["thread"] is not None:
            return
        thread = threading.Thread(target=_beat, name="symtrans-progress-heartbeat", daemon=True)
        _BEAT["thread"] = thread
    thread.start()


def _beat() -> None:
    """The heartbeat thread: every quarter second, speak for a command silent for :data:`HEARTBEAT_SECONDS`."""
    while True:
        time.sleep(0.25)
        with _LOCK:
            text, written, since = _BEAT["text"], _BEAT["written"], _BEAT["since"]
            held = bool(_TIMER)
        now = time.monotonic()
        if text is None or held or now - written < HEARTBEAT_SECONDS or not enabled():
            continue
        with _LOCK:
            if _BEAT["text"] is not text:  # a new line came meanwhile
                continue
            _BEAT["written"] = now
        try:
            if _is_terminal():
                bar = next((b._bar for b in reversed(_OPEN) if b._bar is not None), None)
                if bar is not None:
                    bar.refresh()  # the bar's own clock moves
                elif _STATE["announced"]:
                    _stream().write(f"\r\033[K{text}\u2026 {now - since:.0f} s")
                    _stream().flush()
            else:
                _line(_STILL_RUNNING.format(text=text, seconds=now - since), beat=False)
        except (OSError, ValueError):
            pass


def _release(discard: bool = False) -> None:
    with _LOCK:
        for t in _TIMER:
            t.cancel()
        _TIMER.clear()
        lines = [] if discard else list(_HELD)
        _HELD.clear()
    try:
        if lines:
            _stream().writelines(lines)
            _stream().flush()
    except (OSError, ValueError):
        pass


def _clear_announce() -> None:
    if _STATE["announced"] and _is_terminal():
        _stream().write("\r\033[K")
        _STATE["announced"] = None


def announce(command: str, what: str = "starting") -> None:
    """Print the first sign of life of a slow command, before its heavy imports.

    On a terminal the line is transient (the first bar or line replaces it).

    Examples
    --------
    >>> import io
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "09:00:00")
    >>> announce("report", "loading the model")
    >>> err.getvalue()  # held for HOLD_SECONDS: a command that fails at once prints only its error
    ''
    >>> finish(); err.getvalue()
    '[09:00:00] symtrans report: loading the model\\n'
    >>> configure()
    """
    if not enabled():
        return
    _mark(f"symtrans {command}: {what}")
    if _is_terminal():
        try:
            _stream().write(f"symtrans {command}: {what}\u2026")
            _stream().flush()
            _STATE["announced"] = command
        except (OSError, ValueError):
            pass
    elif HOLD_SECONDS > 0:
        with _LOCK:
            timer = threading.Timer(HOLD_SECONDS, _release)
            timer.daemon = True
            _TIMER.append(timer)
            _HELD.append(_STAMPED.format(clock=_now(), text=f"symtrans {command}: {what}"))
        timer.start()
    else:
        _line(f"symtrans {command}: {what}", beat=False)


def finish(discard: bool = False) -> None:
    """End the announcement: clear its transient terminal line, and print (or, with ``discard``, drop) held lines.

    The command line calls ``finish(discard=True)`` before an error message, so
    that input refused within the first :data:`HOLD_SECONDS` shows one line.

    Examples
    --------
    >>> import io
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "10:00:00")
    >>> announce("report"); finish(discard=True); err.getvalue()
    ''
    >>> announce("report"); finish(); err.getvalue()
    '[10:00:00] symtrans report: starting\\n'
    >>> configure()
    """
    _release(discard)
    _mark(None)
    try:
        _clear_announce()
        _stream().flush()
    except (OSError, ValueError):
        pass


def note(command: str, message: str) -> None:
    """One progress line outside any bar (a phase: loading the model, writing files).

    Examples
    --------
    >>> import io
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "09:00:00")
    >>> note("check", "model loaded")
    >>> err.getvalue()
    '[09:00:00] symtrans check: model loaded\\n'
    >>> configure(quiet=True); note("check", "silent"); configure()
    """
    if not enabled():
        return
    if _OPEN and _OPEN[-1]._bar is not None:
        _OPEN[-1]._bar.write(f"symtrans {command}: {message}", file=_stream())
        return
    _line(f"symtrans {command}: {message}")


class Progress:
    """A progress bar (terminal), timestamped lines (other streams), or nothing (quiet).

    ``total`` may be ``None`` when unknown. ``step(label)`` records one
    finished step; ``show(label)`` names the step now running without
    counting it. ``enabled=False`` silences this bar only; ``hush=True`` also silences every bar opened while
    this one is open (a report's producers, whose forked workers are silent too), whether or not it speaks.

    Examples
    --------
    >>> import io
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "08:00:00")
    >>> bar = Progress(None, "group --certify", unit="certificate")
    >>> bar.step("S_H"); bar.close()
    >>> err.getvalue().splitlines()
    ['[08:00:00] symtrans group --certify: 1 S_H', '[08:00:00] symtrans group --certify: done, 1 certificate in 0.0 s']
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "08:00:00")
    >>> with Progress(1, "report", unit="claim", enabled=False, hush=True) as outer:
    ...     with Progress(2, "group --breaking") as inner:
    ...         inner.step("L=1")
    >>> err.getvalue(), inner.active
    ('', False)
    >>> configure()
    """

    def __init__(self, total: int | None, desc: str, *, unit: str = "step", enabled: bool = True,
                 hush: bool = False):
        self.total, self.desc, self.unit, self.hush = total, desc, unit, hush
        self.count = 0
        self.active = enabled and globals()["enabled"]() and not any(b.hush for b in _OPEN)
        self._start = time.perf_counter()
        self._bar: Any = None
        self._closed = False
        if self.active and _in_notebook():
            from tqdm.auto import tqdm as auto_tqdm  # a widget in Jupyter, where stderr is no terminal

            self._bar = auto_tqdm(total=total, desc=f"symtrans {desc}", unit=unit, leave=False)
        elif self.active and _is_terminal():
            from tqdm import tqdm

            _clear_announce()
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=_stream(), leave=False,
                             dynamic_ncols=True)
        _OPEN.append(self)
        if self.active:
            _mark(self._where())

    def _where(self, label: str = "") -> str:
        of = f"/{self.total}" if self.total is not None else ""
        return f"symtrans {self.desc}: {self.count}{of}" + (f" {label}" if label else "")

    def show(self, label: str) -> None:
        """Name the step now running (the bar's postfix; no line on a non-terminal, but the heartbeat's text)."""
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=True)
        if self.active:
            _mark(self._where(label))

    def step(self, label: str = "", n: int = 1) -> None:
        """Count ``n`` finished steps, the last one named ``label``."""
        self.count += n
        if not self.active:
            return
        if self._bar is not None:
            if label:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)
            _mark(self._where(label))
        else:
            _line(self._where(label))

    def close(self) -> None:
        """Finish: remove the bar (terminal) or print a closing line with the time taken."""
        if self._closed:
            return
        self._closed = True
        if self in _OPEN:
            _OPEN.remove(self)
        if not self.active:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            unit = self.unit if self.count == 1 else self.unit + "s"
            _line(f"symtrans {self.desc}: done, {self.count} {unit} in {time.perf_counter() - self._start:.1f} s")
        # the nearest enclosing bar that speaks runs on, or nothing does: a silent one (``enabled=False``, e.g.
        # a report run without progress around a producer's own bar) never closes through here, so marking it
        # would leave the heartbeat repeating it after everything ended
        outer = next((b for b in reversed(_OPEN) if b.active), None)
        _mark(outer._where() if outer is not None else None)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def track(items: Iterable[T], desc: str, *, unit: str = "step", label: Callable[[T], str] = str,
          enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items`` with a :class:`Progress` that names each item as it starts and counts it when done.

    Examples
    --------
    >>> import io
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "07:00:00")
    >>> [x * 2 for x in track([1, 2], "demo", unit="claim")]
    [2, 4]
    >>> err.getvalue().splitlines()[0]
    '[07:00:00] symtrans demo: 1/2 1'
    >>> configure()
    """
    seq = list(items)
    with Progress(len(seq), desc, unit=unit, enabled=enabled) as bar:
        for item in seq:
            bar.show(label(item))
            yield item
            bar.step(label(item))


def tick(label: str = "", n: int = 1) -> None:
    """Advance the innermost open :class:`Progress` by ``n`` (no-op when none is open).

    Examples
    --------
    >>> tick("nothing open")  # no bar: nothing happens
    """
    if _OPEN:
        _OPEN[-1].step(label, n)


def progress_line(line: str) -> tuple[str, str, bool] | None:
    """``(command, text, heartbeat)`` for one line this module writes to a pipe; None for any other line.

    Examples
    --------
    >>> progress_line("[09:15:04] symtrans report: starting (still running, 2 s)")
    ('report', 'starting', True)
    >>> progress_line("[09:15:04] symtrans report: claims 3/35 thm-4.2")
    ('report', 'claims 3/35 thm-4.2', False)
    >>> progress_line("symtrans: error: bad") is None, progress_line("[9:15:04] symtrans report: starting") is None
    (True, True)
    """
    m = _PIPED.fullmatch(line.rstrip("\n"))
    return None if m is None else (m["command"], m["what"], m["seconds"] is not None)


def without_progress(text: str, *, command: str | None = None, what: str | None = None,
                     heartbeats_only: bool = False) -> str:
    """``text`` (a captured stderr) without the timestamped progress lines, e.g. to find the one error line.

    By default every progress line goes. ``command`` (and ``what``) drop only that command's lines (with that
    exact text), heartbeats included; ``heartbeats_only`` drops only the "(still running, N s)" repeats.

    Examples
    --------
    >>> without_progress("[08:00:00] symtrans measure: starting\\nsymtrans: error: bad\\n")
    'symtrans: error: bad\\n'
    >>> log = ("[08:00:00] symtrans report: starting\\n[08:00:02] symtrans report: starting (still running, 2 s)\\n"
    ...        "[08:00:03] symtrans report: loading the model\\n")
    >>> without_progress(log, command="report", what="starting")
    '[08:00:03] symtrans report: loading the model\\n'
    >>> without_progress(log, heartbeats_only=True).count("\\n")
    2
    """

    def dropped(line: str) -> bool:
        parsed = progress_line(line)
        if parsed is None:
            return False
        cmd, said, beat = parsed
        if heartbeats_only:
            return beat
        return (command is None or cmd == command) and (what is None or said == what)

    return "".join(line for line in text.splitlines(keepends=True) if not dropped(line))


F = TypeVar("F", bound=Callable[..., Any])


def announced(command: str, what: str = "starting") -> Callable[[F], F]:
    """Decorate a slow API function: announce it at once (with the heartbeat), end the announcement on return.

    The Python API's counterpart of the command line's first line: a call that loads torch and a model is
    not silent for seconds before its first bar. ``configure(quiet=True)`` silences it, as every bar. A
    call that ends within :data:`HOLD_SECONDS` prints nothing (its held line is dropped); a call nested
    in another announced call adds no line of its own.

    Examples
    --------
    >>> import io, time
    >>> err = io.StringIO(); configure(stream=err, clock=lambda: "11:00:00")
    >>> @announced("demo", "loading")
    ... def slow(seconds):
    ...     time.sleep(seconds)
    ...     return seconds
    >>> slow(0), err.getvalue()
    (0, '')
    >>> slow(HOLD_SECONDS + 0.3), err.getvalue()
    (0.8, '[11:00:00] symtrans demo: loading\\n')
    >>> configure()
    """
    import functools

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _DEPTH[0]:
                return fn(*args, **kwargs)
            _DEPTH[0] += 1
            announce(command, what)
            try:
                return fn(*args, **kwargs)
            finally:
                _DEPTH[0] -= 1
                finish(discard=True)  # a line still held belongs to a call too short to announce
        return run  # type: ignore[return-value]
    return wrap


_DEPTH = [0]  # announced calls now running in this process (the outermost one speaks)
