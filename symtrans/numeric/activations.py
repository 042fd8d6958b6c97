"""Hidden states read from an activation cache (TransformerLens's ``ActivationCache``, or a dict by hook name).

Where symtrans needs a model's hidden states (the rank profile of the real forward in
:func:`symtrans.measure`), a user who already ran the model in TransformerLens can pass the cache of that
run. The states are read by TransformerLens hook name (:data:`symtrans.names.ACTIVATIONS`: ``X`` is
``blocks.{l}.hook_resid_pre``, a layer's output ``blocks.{l}.hook_resid_post``), kept in the cache's own
dtype (the rank decisions follow the precision of what was stored), and checked against the model: symtrans's
forward from the cache's first input must reproduce every cached layer output (:func:`check_against`),
otherwise the cache is of another model, or of weights processed differently, and it is refused.

Examples
--------
>>> import torch
>>> cache = {"blocks.0.hook_resid_pre": torch.eye(3, 4)[None], "blocks.0.hook_resid_post": 2 * torch.eye(3, 4)[None]}
>>> [tuple(x.shape) for x in cache_states(cache, n_layers=1, d_model=4)]
[(3, 4), (3, 4)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from symtrans.errors import SymtransError
from symtrans.names import ACTIVATIONS
from symtrans.precision import dtype_name, tolerance_state, unit_roundoff

__all__ = ["CacheCheck", "cache_states", "check_against", "is_activation_cache"]

_INPUT = next(r for r in ACTIVATIONS if r.symtrans == "X")
_OUTPUT = next(r for r in ACTIVATIONS if r.symtrans == "out")
_HOW = ("run_with_cache(tokens) with no names_filter, or a filter keeping hook_resid_pre and hook_resid_post; "
        "one sequence")


def is_activation_cache(obj: Any) -> bool:
    """Whether ``obj`` looks like an activation cache: a mapping by hook name, with the first layer's input.

    Examples
    --------
    >>> is_activation_cache({"blocks.0.hook_resid_pre": 0}), is_activation_cache({"x": 0}), is_activation_cache(3)
    (True, False, False)
    """
    try:
        return callable(getattr(obj, "keys", None)) and _INPUT.hook(0) in obj.keys()
    except Exception:  # an object whose keys() raises is not a cache we can read
        return False


def _tensor(cache: Any, name: str, shape: tuple[int, ...] | None, d_model: int) -> Any:
    import torch

    try:
        value = cache[name]
    except (KeyError, IndexError):
        raise SymtransError(f"activations: no {name!r} in the cache ({_HOW})") from None
    if not isinstance(value, torch.Tensor):
        raise SymtransError(f"activations: {name!r} is a {type(value).__name__}, not a tensor")
    x = value.detach()
    if x.ndim == 3:
        if x.shape[0] != 1:
            raise SymtransError(f"activations: {name!r} holds a batch of {x.shape[0]} sequences; pass the "
                                "cache of one (e.g. cache.apply_slice_to_batch_dim(0) in TransformerLens)")
        x = x[0]
    if x.ndim != 2 or x.shape[1] != d_model:
        raise SymtransError(f"activations: {name!r} has shape {tuple(value.shape)}; expected "
                            f"[batch=1,] pos x d_model={d_model}")
    if shape is not None and tuple(x.shape) != shape:
        raise SymtransError(f"activations: {name!r} has {x.shape[0]} positions, the first input {shape[0]}")
    if x.shape[0] < 2:
        raise SymtransError(f"activations: {name!r} has {x.shape[0]} position; at least 2 are needed")
    if not x.is_floating_point() or dtype_name(x.dtype) not in ("float64", "float32", "float16", "bfloat16"):
        raise SymtransError(f"activations: {name!r} has dtype {dtype_name(x.dtype)}, not a float")
    if not bool(torch.isfinite(x).all()):
        raise SymtransError(f"activations: {name!r} holds non-finite values")
    return x.cpu()


def cache_states(cache: Any, *, n_layers: int, d_model: int) -> list[Any]:
    """The hidden states ``[X_0, out_0, ..., out_{L-1}]`` of one sequence, by TransformerLens hook name.

    Each tensor keeps its cached dtype; a batch axis of size one is dropped. A missing hook, a batch of
    several sequences, a wrong width or a non-finite value is refused in one line naming the hook.

    Raises
    ------
    SymtransError
        naming the hook that is missing or malformed.

    Examples
    --------
    >>> import torch
    >>> cache_states({"blocks.0.hook_resid_pre": torch.zeros(1, 3, 4)}, n_layers=1, d_model=4)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: activations: no 'blocks.0.hook_resid_post' in the cache (run_with_cache(tokens) with no names_filter, or a filter keeping hook_resid_pre and hook_resid_post; one sequence)
    """
    first = _tensor(cache, _INPUT.hook(0), None, d_model)
    shape = tuple(first.shape)
    return [first] + [_tensor(cache, _OUTPUT.hook(i), shape, d_model) for i in range(n_layers)]


@dataclass(frozen=True)
class CacheCheck:
    """How far symtrans's forward from the cache's first input is from each cached layer output.

    ``deviation[i]`` is ``||ours_i - cached_i||_F / ||cached_i||_F`` (in float64); ``tolerance`` is the square
    root of the cache dtype's unit roundoff (half its digits: rounding through a few layers stays far below
    it, a different model or processing far above), and the verdict uses the shared tolerance band.

    Examples
    --------
    >>> CacheCheck(deviation=[1e-7], dtype="float32", tolerance=3.5e-4, holds=True).to_dict()["holds"]
    True
    """

    deviation: list[float]
    dtype: str
    tolerance: float
    holds: bool | None
    reason: str = ("the square root of the cache dtype's unit roundoff: half its digits; rounding through the "
                   "layers stays below it, another model or processed weights far above (band: "
                   "symtrans.precision.tolerance_state)")

    @property
    def margin(self) -> float:
        """Decades between the largest deviation and the tolerance (positive: within it)."""
        worst = max(self.deviation)
        return math.inf if worst == 0 else math.log10(self.tolerance / worst)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict.

        Examples
        --------
        >>> sorted(CacheCheck(deviation=[0.0], dtype="float64", tolerance=1e-8, holds=True).to_dict())[:3]
        ['deviation', 'dtype', 'holds']
        """
        return {"deviation": self.deviation, "dtype": self.dtype, "tolerance": self.tolerance,
                "holds": self.holds, "margin_decades": self.margin, "reason": self.reason,
                "hooks": [_INPUT.tl, _OUTPUT.tl]}


def check_against(states: list[Any], cached: list[Any]) -> CacheCheck:
    """Compare symtrans's hidden states with the cached ones; refuse a cache that is not of this model.

    Raises
    ------
    SymtransError
        when a layer's deviation is decisively beyond the tolerance (another model, or processed weights).

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(4, 3, dtype=torch.float64)
    >>> check_against([x, 2 * x], [x.float(), 2 * x.float()]).holds
    True
    >>> check_against([x, 2 * x], [x.float(), 3 * x.float()])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: activations: blocks.0.hook_resid_post differs from this model's forward ...
    """
    import torch

    dtype = dtype_name(cached[0].dtype)
    tol = math.sqrt(unit_roundoff(dtype))
    dev = []
    for ours, theirs in zip(states[1:], cached[1:]):
        a, b = ours.detach().cpu().to(torch.float64), theirs.to(torch.float64)
        norm = float(torch.linalg.norm(b))
        dev.append(float(torch.linalg.norm(a - b)) / norm if norm > 0 else float(torch.linalg.norm(a)))
    states_ok = [tolerance_state(d, tol) for d in dev]
    for i, ok in enumerate(states_ok):
        if ok is False:
            raise SymtransError(f"activations: {_OUTPUT.hook(i)} differs from this model's forward from the same "
                                f"{_INPUT.hook(0)} by {dev[i]:.2e} (relative; tolerance {tol:.1e} at {dtype}): the "
                                "cache is of another model, or of weights processed differently (TransformerLens "
                                "centring or folding); pass the model the cache came from")
    holds = True if all(ok is True for ok in states_ok) else None
    return CacheCheck(deviation=dev, dtype=dtype, tolerance=tol, holds=holds)
