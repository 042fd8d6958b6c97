"""Jacobians and directional derivatives by reverse-mode autograd, without importing ``torch._dynamo``.

The completeness measurement (:mod:`symtrans.group.complete`), the
ablation stabilisers of the report (framework-9, :mod:`symtrans.group.breaking`)
and the near-symmetry derivatives (:mod:`symtrans.group.near`) differentiate
small float64 maps. Forward-mode differentiation (``torch.func.jacfwd``,
``torch.func.jvp`` and ``torch.autograd.forward_ad`` alike) gives an operand
without a tangent (a constant, a Python number) a zero tangent of the
``ZeroTensor`` kind, and an elementwise operation on one computes its result's
shape through a Python meta kernel whose wrapper imports ``torch._dynamo`` on
its first call (torch 2.13: about 2.5 CPU s, once a process, for nothing this
toolkit uses). Reverse mode, vectorised over the output rows
(``torch.autograd.functional.jacobian(..., vectorize=True)``), never builds
those tangents: here every Jacobian is computed that way, in one home.

The values agree with forward mode's to rounding (each entry is the same
derivative, summed in another order), not bit for bit: singular values at
rounding level, far below a rank cut, move with them, the rank decisions not
(``tests/test_autodiff.py`` compares both on the measured instances).

Examples
--------
>>> import torch
>>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
>>> jacobian(lambda t: torch.stack([t[0] * t[1], 3.0 * t[0]]), x)
tensor([[2., 1.],
        [3., 0.]], dtype=torch.float64)
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["jacobian", "directional_derivative"]


def jacobian(f: Callable[[Any], Any], x: Any) -> Any:
    """The Jacobian of ``f`` at the 1-D tensor ``x``: rows the entries of ``f(x)`` (flattened), columns those of ``x``.

    Reverse mode, one vectorised backward pass over the output rows (no
    ``torch._dynamo`` import, see the module's note). ``f`` must be built of
    differentiable torch operations; an output that does not depend on ``x``
    gives zero rows.

    Examples
    --------
    >>> import torch
    >>> jacobian(lambda t: (t ** 2).sum().reshape(1) * 2.0, torch.tensor([1.0, -1.0], dtype=torch.float64))
    tensor([[ 4., -4.]], dtype=torch.float64)
    >>> jacobian(lambda t: t, torch.zeros(2, 2))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: jacobian: x must be a 1-D tensor, got shape (2, 2)
    """
    import torch

    from symtrans.errors import SymtransError

    if not isinstance(x, torch.Tensor) or x.dim() != 1:
        raise SymtransError(f"jacobian: x must be a 1-D tensor, got "
                            f"{'shape ' + str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__}")
    J = torch.autograd.functional.jacobian(lambda t: f(t).reshape(-1), x.detach(), vectorize=True)
    return J.detach()


def directional_derivative(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
    """``d/dt f(primals + t tangents)`` at t = 0, flattened: the Jacobian of ``f`` (reverse mode) times ``tangents``.

    For maps of a few scalars (the norms' epsilons of
    :func:`symtrans.group.near.eps_derivative`); without importing
    ``torch._dynamo`` (see the module's note).

    Examples
    --------
    >>> import torch
    >>> one = torch.tensor(1.0, dtype=torch.float64)
    >>> directional_derivative(lambda a, b: torch.stack([a * b, a + 2.0 * b]), (one, 2 * one), (one, -one))
    tensor([ 1., -1.], dtype=torch.float64)
    """
    import torch

    from symtrans.errors import SymtransError

    if len(primals) != len(tangents) or not primals:
        raise SymtransError(f"directional_derivative: {len(primals)} primals and {len(tangents)} tangents")
    Js = torch.autograd.functional.jacobian(lambda *v: f(*v).reshape(-1), tuple(p.detach() for p in primals),
                                            vectorize=True)
    out = None
    for J, p, t in zip(Js, primals, tangents):
        term = J.reshape(J.shape[0], -1) @ t.reshape(-1).to(J.dtype)
        out = term if out is None else out + term
    return out.detach()
