"""The parameter layout of a measured instance: a parameter's value from its path (no torch, no group engine).

A small instance's parameters (:func:`symtrans.group.complete.random_instance`)
are a dict of global tensors and a list ``layers`` of per-layer dicts, some of
whose values are lists (one tensor per head). A *path* names one tensor:
``(name,)``, ``("layers", l, name)`` or ``("layers", l, name, h)``. Both the
completeness measurement (:mod:`symtrans.group.complete`) and the
near-symmetry directions (:mod:`symtrans.group.near`) read parameters by path
through :func:`param_at`, so neither imports the other for it.

Examples
--------
>>> params = {"word": "W", "layers": [{"W_Q": ["q0", "q1"], "b_O": "b"}]}
>>> param_at(params, ("word",)), param_at(params, ("layers", 0, "W_Q", 1)), param_at(params, ("layers", 0, "b_O"))
('W', 'q1', 'b')
"""

from __future__ import annotations

from typing import Any

__all__ = ["param_at"]


def param_at(params: dict[str, Any], path: tuple[Any, ...]) -> Any:
    """The parameter at ``path``: ``(name,)``, ``("layers", l, name)`` or ``("layers", l, name, head)``.

    Examples
    --------
    >>> param_at({"layers": [{"W_V": ["v0"]}]}, ("layers", 0, "W_V"))
    ['v0']
    """
    if path[0] == "layers":
        v = params["layers"][path[1]][path[2]]
        return v[path[3]] if len(path) == 4 else v
    return params[path[0]]
