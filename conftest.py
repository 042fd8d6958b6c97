"""The doctests of symtrans/ and proofs/ on one thread, as tests/conftest.py runs each test module.

Multi-threaded torch and BLAS gain little on the doctests' small matrices, and on the 2-core machine with two
pytest-xdist workers (the README's command) their threads oversubscribe the cores (tests/conftest.py,
``_session_one_thread``, has the measurements). The test modules under tests/ are left to tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent / "tests"


@pytest.fixture(scope="module", autouse=True)
def _doctests_one_thread(request: pytest.FixtureRequest) -> Any:
    """Each doctest module's numeric work on one thread (tests/ has its own fixture)."""
    if TESTS in Path(request.node.path).resolve().parents:
        yield
        return
    from symtrans.threads import single_threaded

    with single_threaded():
        yield
