"""The environment of the CLI and example processes the tests start: this checkout, one BLAS thread.

Each such process would otherwise start torch's and BLAS's default threads (one per core). Under
pytest-xdist's two workers on the 2-core machine, or beside another job, that oversubscribes the cores:
measured on examples/group_invariance.py at load 7, 31.5 CPU s and 77 s wall with the default threads,
7.3 CPU s and 22 s wall with one. No test reads a thread count from these processes' output (the
verdicts carry tolerances far above the rounding differences of a different summation order), and the
producer runner already runs each producer on one thread (symtrans.threads.single_threaded).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the variables torch (intra-op), OpenMP, MKL and OpenBLAS read at start-up
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout on PYTHONPATH, one BLAS thread, and ``extra``."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **ONE_THREAD, **extra}
