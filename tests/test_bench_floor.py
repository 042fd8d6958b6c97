"""benchmarks/bench_floor.py's per-producer profile runs (its import of Context broke once and nothing saw it)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_floor():
    spec = importlib.util.spec_from_file_location("bench_floor", ROOT / "benchmarks" / "bench_floor.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_profile_producers_times_every_producer_and_the_rest():
    """The model-free report, profiled: each producer's row, and the outside row that closes the total."""
    from symtrans.runner import producers_for
    from symtrans.graph import ClaimGraph

    rows = _bench_floor().profile_producers(None, 8, "time")
    names = {f"{cid} / {p.name}" for cid in ClaimGraph().topological_order() for p in producers_for(cid)}
    assert set(rows) == names | {"(outside producers)"}
    assert rows["thm-4.2 / ln-affine-search"]["cpu_s"] > 0  # an exact search costs measurable time
    assert all(r["cpu_s"] >= 0 for k, r in rows.items() if k != "(outside producers)")


def test_factor_key_lists_factorisations_and_nothing_else():
    """The floor's dispatch filter: an SVD and a QR are factorisations, a matrix product and a norm are not."""
    import torch

    bf = _bench_floor()
    a = torch.randn(4, 3, dtype=torch.float64)
    ops = torch.ops.aten
    assert bf._factor_key(ops.linalg_svd.default, (a, False), {})[0] == "aten::linalg_svd"
    assert bf._factor_key(ops.linalg_qr.default, (a, "reduced"), {})[1] == ((4, 3),)
    assert bf._factor_key(ops.mm.default, (a, a.T), {}) is None
    assert bf._factor_key(ops.linalg_vector_norm.default, (a,), {}) is None
