"""Ctrl-C at random moments of a report: every run must end "symtrans: interrupted", exit 130.

Each run starts ``python -m symtrans report --model default`` in its own
process group, waits for its first worker process (the report is running),
sleeps a random delay and sends SIGINT to the whole group, as a terminal's
Ctrl-C does. It then tallies how each run ended. A run that ends any other way
is printed whole: its delay, its status and the end of its stderr. Such ends
were exit -2 (CPython's exit after an interrupt passed through ``PyRun_String``),
exit 0 (dropped in an at-fork hook or a weakref callback), exit 2 with torch's
message, and a hang (see docs/hostile-inputs.md). A run still going 60 s after
the signal is dumped with ``py-spy`` where it is installed, then killed.

A delay past the report's end finds it finished, and the run exits 0. Keep
``--max-delay`` below the report's time after its first fork (about 4 s for
``--n 16`` on two cores).

    python benchmarks/ctrl_c_stress.py --runs 60              # about 8 minutes
    python benchmarks/ctrl_c_stress.py --runs 20 --max-delay 1
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

EXPECTED = (130, "symtrans: interrupted")


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (none once it has exited)."""
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def one_run(out: Path, delay: float, n: int) -> tuple[int | None, str]:
    """One report interrupted ``delay`` s after its first worker appears: (exit status or None if hung, stderr)."""
    p = subprocess.Popen([sys.executable, "-m", "symtrans", "report", "--model", "default", "--n", str(n),
                          "--out", str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        start = time.monotonic()
        while not _children(p.pid) and p.poll() is None and time.monotonic() - start < 120:
            time.sleep(0.02)
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            _, err = p.communicate(timeout=60)
            return p.returncode, err
        except subprocess.TimeoutExpired:
            dump = ""
            if shutil.which("py-spy"):
                for pid in [p.pid, *_children(p.pid)]:
                    dump += subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True,
                                           text=True).stdout
            return None, dump
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--max-delay", type=float, default=3.0, help="the latest signal, seconds after the first fork")
    ap.add_argument("--n", type=int, default=16, help="tokens of the report's input")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not hasattr(os, "killpg"):
        print("needs POSIX process groups", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    tally: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            delay = rng.uniform(0.0, args.max_delay)
            status, err = one_run(Path(tmp) / f"r{k}", delay, args.n)
            last = err.strip().splitlines()[-1] if err.strip() else ""
            ok = (status, err.strip()) == EXPECTED
            tally["interrupted, 130" if ok else "hung" if status is None else f"exit {status}"] += 1
            if not ok:
                print(f"run {k}: delay {delay:.2f} s, {'hung' if status is None else f'exit {status}'}: "
                      f"{err.strip()[-600:] if status is None or 'Traceback' in err else last}", flush=True)
            print(f"\r{k + 1}/{args.runs} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(", ".join(f"{v} {k}" for k, v in tally.most_common()))
    return 0 if tally["interrupted, 130"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
