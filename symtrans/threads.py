"""Thread limits for numeric work: torch and BLAS on one thread inside a block.

A base module (it imports only torch and threadpoolctl, lazily), so the runner
(:mod:`symtrans.runner`), the measurements and the CLI share one copy.

Examples
--------
>>> with single_threaded():
...     pass
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["single_threaded"]


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
