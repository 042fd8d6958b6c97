"""The reverse-mode Jacobians of symtrans.numeric.autodiff: right values, the same rank decisions, no torch._dynamo.

Values are checked against closed-form derivatives (an independent route), the measured instances' rank
decisions against forward mode's (``torch.func.jacfwd``, the route they replaced), and the absence of the
``torch._dynamo`` import in a fresh process that runs the report's framework-9 producer; the detector is fed a
snippet that differentiates in forward mode and must see the import there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from symtrans.errors import SymtransError
from symtrans.numeric.autodiff import directional_derivative, jacobian

ROOT = Path(__file__).resolve().parents[1]


def test_jacobian_equals_the_closed_form_derivative():
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    B = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    x = torch.randn(3, generator=gen, dtype=torch.float64)
    J = jacobian(lambda t: 2.0 * (A @ torch.tanh(B @ t)) + 1.0, x)
    expected = 2.0 * A @ torch.diag(1 - torch.tanh(B @ x) ** 2) @ B  # chain rule, by hand
    assert J.shape == (5, 3)
    assert torch.allclose(J, expected, rtol=0, atol=1e-14)
    # an output that does not read x: zero rows, not an error
    assert torch.equal(jacobian(lambda t: torch.ones(2, dtype=torch.float64) + 0 * t.sum(), x), torch.zeros(2, 3,
                                                                                                   dtype=torch.float64))


def test_directional_derivative_equals_the_closed_form_derivative():
    a, b = torch.tensor(0.3, dtype=torch.float64), torch.tensor(-1.2, dtype=torch.float64)
    da, db = torch.tensor(2.0, dtype=torch.float64), torch.tensor(0.5, dtype=torch.float64)
    f = lambda u, v: torch.stack([u * v, torch.exp(u) * 3.0, v ** 2])  # noqa: E731
    got = directional_derivative(f, (a, b), (da, db))
    expected = torch.stack([da * b + a * db, torch.exp(a) * 3.0 * da, 2 * b * db])
    assert torch.allclose(got, expected, rtol=0, atol=1e-15)


def test_bad_input_is_refused():
    with pytest.raises(SymtransError, match="1-D tensor"):
        jacobian(lambda t: t, torch.zeros(2, 2))
    with pytest.raises(SymtransError, match="1 primals and 2 tangents"):
        directional_derivative(lambda a: a, (torch.zeros(()),), (torch.zeros(()), torch.zeros(())))


@pytest.mark.parametrize("arch", ["bert-base", "llama2-7b"])
def test_the_measured_jacobian_has_forward_modes_values_and_rank(arch):
    from torch.func import jacfwd, vmap

    from symtrans.group.complete import _flatten, _unflatten, rank_record, scope_forward, small_arch
    from symtrans.group.complete import jacobian as measured_jacobian

    a = small_arch(arch)
    m = measured_jacobian(a)
    batch = {k: torch.stack([x[k] for x in m["inputs"]]) for k in m["inputs"][0]}
    theta = _flatten(m["params"], m["paths"])
    J_fwd = jacfwd(lambda t: vmap(lambda x: scope_forward(_unflatten(t, m["params"], m["paths"]), x, a, "layers"))(
        batch).reshape(-1))(theta)
    scale = float(J_fwd.abs().max())
    assert float((m["J"] - J_fwd).abs().max()) <= 1e-13 * scale  # the same derivative, summed in another order
    fwd = rank_record(torch.linalg.svdvals(J_fwd))
    assert (m["record"]["rank"], m["record"]["clear"]) == (fwd["rank"], fwd["clear"])
    assert m["record"]["clear"] and m["record"]["gap_decades"] > 6


def _imports_dynamo(code: str) -> bool:
    """Whether running ``code`` in a fresh interpreter (the worktree on its path) imports ``torch._dynamo``."""
    probe = textwrap.dedent(code) + "\nimport sys\nprint('DYNAMO', 'torch._dynamo' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-2000:]
    line = [s for s in out.stdout.splitlines() if s.startswith("DYNAMO ")][-1]
    return line == "DYNAMO True"


def test_the_detector_sees_forward_mode_import_dynamo():
    # the false case: functorch's forward mode on a product with a constant imports torch._dynamo
    assert _imports_dynamo("""
        import torch
        from torch.func import jacfwd
        jacfwd(lambda t: t * 2.0)(torch.zeros(3, dtype=torch.float64))
    """)


def test_the_ablation_stabilisers_producer_does_not_import_dynamo():
    # the report's producer itself, on the bundled model: every Jacobian and derivative it takes
    assert not _imports_dynamo("""
        from symtrans.context import Context
        from symtrans.producers.sec9 import check_breaking
        from symtrans.threads import single_threaded
        with single_threaded():  # as the runner runs a producer
            records = check_breaking(Context(model="default"))
        assert records[0].verdict.value in ("supported", "fails", "inconclusive"), records[0].verdict
    """)
