"""The run configuration: the parameters of a run, their defaults and constraints declared once.

A run (a report, a check, a certificate, a measurement, the group's numeric
checks) is configured by the same few parameters, whether a command line or a
Python call starts it. Each is declared here once, as a :class:`Param`: its
default, its constraint, and values the constraint refuses (for the tests).
The constraint's error names the parameter as the caller wrote it: ``n`` in
the Python API, ``--n`` at the command line (the way scikit-learn's
``validate_params`` declares the constraints of its public functions).

:class:`RunConfig` is the frozen configuration: built from keyword arguments
by :mod:`symtrans.api` (:meth:`RunConfig.from_kwargs`) and from a parsed
command line by :mod:`symtrans.cli` (:meth:`RunConfig.from_args`).
Bounds that need the model (its positions, its layers) are checked where the
model's architecture is read (:func:`symtrans.args.check_args`).

Examples
--------
>>> cfg = RunConfig.from_kwargs(model="default", n=16)
>>> cfg.n, cfg.seed, cfg.dtype
(16, 0, 'float64')
>>> RunConfig.from_kwargs(n=1)
Traceback (most recent call last):
...
symtrans.errors.SymtransError: n 1: must be at least 2
>>> check_param("n", 1, cli=True)
Traceback (most recent call last):
...
symtrans.errors.SymtransError: --n 1: must be at least 2
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import (MAX_LAYER_ITEMS, MAX_N, RUN_DTYPES, check_device, check_dtype, check_int, check_seed,
                               terminal_safe)

__all__ = ["DEFAULT_N", "DEFAULT_SEED", "DEFAULT_DTYPE", "DEFAULT_STREAM", "RUN_DTYPES", "STREAM_MODES", "MIN_N", "Param", "PARAMS",
           "RunConfig", "check_param", "spelling"]

#: the sequence length of a run unless told otherwise (report, check, certify, measure, group, sweep)
DEFAULT_N = 128
#: the seed of a run's random inputs unless told otherwise
DEFAULT_SEED = 0
#: the dtype a run computes in unless told otherwise (rank decisions want float64); one of :data:`RUN_DTYPES`
DEFAULT_DTYPE = "float64"
#: ``--stream``: read the weights one layer at a time (on), never (off), or by the model's float64 size (auto)
STREAM_MODES: tuple[str, ...] = ("auto", "on", "off")
#: the stream mode of a run unless told otherwise
DEFAULT_STREAM = "auto"
#: a run needs two tokens (rank collapse is about n >= 2 rows)
MIN_N = 2


def _check_layers(value: Any, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise SymtransError(f"{name}: expected layer indices (a list of integers), got {type(value).__name__}")
    items = list(itertools.islice(iter(value), MAX_LAYER_ITEMS + 1))  # range(10**12) is not walked
    if len(items) > MAX_LAYER_ITEMS:
        raise SymtransError(f"{name}: more than {MAX_LAYER_ITEMS} layer indices")
    out = tuple(check_int(i, name, 0) for i in items)
    if not out:
        raise SymtransError(f"{name}: expected at least one layer index")
    return tuple(sorted(set(out)))


def _check_stream(value: Any, name: str) -> str:
    if not isinstance(value, str) or value not in STREAM_MODES:
        raise SymtransError(f"{name} {terminal_safe(repr(value)[:20])}: use auto, on or off")
    return value


def _check_eps(value: Any, name: str) -> float | None:
    """The norms' eps for the analysis: None (the checkpoint's own) or a finite number >= 0 (0: eps-free)."""
    import math

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            terminal_safe(repr(value)[:20])
        raise SymtransError(f"{name} {shown}: must be a finite number >= 0 (0: the paper's eps-free LayerNorm)")
    return float(value)


@dataclass(frozen=True)
class Param:
    """One parameter of a run: its name, default, constraint and the values the constraint refuses.

    ``check(value, name)`` returns the value (normalised) or raises
    :class:`~symtrans.errors.SymtransError` naming the parameter ``name``.
    ``bad`` are values it must refuse (the bad-value tests feed them to every
    public function and command that takes the parameter).

    Examples
    --------
    >>> PARAMS["seed"].check(3, "seed"), PARAMS["seed"].default
    (3, 0)
    """

    name: str
    default: Any
    check: Callable[[Any, str], Any]
    doc: str
    bad: tuple[Any, ...] = ()


#: every run parameter, declared once (the CLI flag is ``--`` + the name with ``_`` written ``-``)
PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("n", DEFAULT_N, lambda v, name: check_int(v, name, MIN_N, MAX_N, "no model has more positions"),
          "sequence length of the real inputs", bad=(1, 0, -3, "8", True, 2.5, MAX_N + 1)),
    Param("seed", DEFAULT_SEED, check_seed, "seed of the random inputs", bad=(-1, "0", 2.0, 2 ** 63)),
    Param("dtype", DEFAULT_DTYPE, check_dtype, "dtype the weights are computed in", bad=("float16", "int8", 64)),
    Param("device", None, check_device, "device (None: automatic)", bad=("gpu", "cuda:x", 0)),
    Param("layers", None, _check_layers, "the layers numeric producers look at (None: every layer)",
          bad=(-1, "0", (0, -1), (), range(10**12))),
    Param("stream", DEFAULT_STREAM, _check_stream, "read the weights one layer at a time: auto, on or off",
          bad=("yes", True, None)),
    Param("eps", None, _check_eps, "the norms' eps for the analysis (None: the checkpoint's own; 0: the paper's "
          "eps-free LayerNorm); stated in every model record's context", bad=(-1, float("nan"), float("inf"), "0",
                                                                              True)),
)}


def spelling(name: str, *, cli: bool) -> str:
    """The parameter ``name`` as the caller writes it: ``n`` in the API, ``--n`` at the command line.

    Examples
    --------
    >>> spelling("layer_index", cli=True), spelling("layer_index", cli=False)
    ('--layer-index', 'layer_index')
    """
    return "--" + name.replace("_", "-") if cli else name


def check_param(name: str, value: Any, *, cli: bool = False) -> Any:
    """Check ``value`` against the declared constraint of parameter ``name``; the error names it as the caller does.

    Examples
    --------
    >>> check_param("dtype", "float32")
    'float32'
    >>> check_param("stream", "yes", cli=True)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --stream 'yes': use auto, on or off
    """
    return PARAMS[name].check(value, spelling(name, cli=cli))


@dataclass(frozen=True)
class RunConfig:
    """The frozen configuration of one run: model spec, n, seed, dtype, device, layers, stream, eps.

    Defaults are those of :data:`PARAMS`. Build it with :meth:`from_kwargs`
    (the API) or :meth:`from_args` (the CLI): both check every field against
    its one declared constraint.

    Examples
    --------
    >>> RunConfig().n == DEFAULT_N, RunConfig(model=None).numeric
    (True, False)
    >>> RunConfig.from_kwargs(seed=-1)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: seed -1: must be at least 0
    """

    model: str | None = "default"
    n: int = DEFAULT_N
    seed: int = DEFAULT_SEED
    dtype: str = DEFAULT_DTYPE
    device: str | None = None
    layers: tuple[int, ...] | None = None
    stream: str = DEFAULT_STREAM
    eps: float | None = None

    @property
    def numeric(self) -> bool:
        """True when a model is given (numeric producers can run).

        Examples
        --------
        >>> RunConfig(model="default").numeric
        True
        """
        return self.model is not None

    @classmethod
    def from_kwargs(cls, *, model: Any = "default", **kwargs: Any) -> RunConfig:
        """A configuration from an API call's keyword arguments; each checked, errors naming it as written (``n``).

        Examples
        --------
        >>> RunConfig.from_kwargs(model=None, n=8, device="cpu").device
        'cpu'
        """
        return cls._build(model, kwargs, cli=False)

    @classmethod
    def from_args(cls, args: Any, **override: Any) -> RunConfig:
        """A configuration from a parsed command line (its run parameters that are set); errors name ``--n``.

        ``override`` replaces attributes the command line holds in another form
        (``layers``: the parsed ``--layers`` text).

        Examples
        --------
        >>> import argparse
        >>> RunConfig.from_args(argparse.Namespace(model="none", n=8, seed=1)).seed
        1
        >>> RunConfig.from_args(argparse.Namespace(model="default", n=1))
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: --n 1: must be at least 2
        """
        model = getattr(args, "model", None)
        if isinstance(model, str) and model.lower() == "none":
            model = None
        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
                 if f.name != "model" and getattr(args, f.name, None) is not None}
        given.update({k: v for k, v in override.items() if v is not None})
        return cls._build(model, given, cli=True)

    @classmethod
    def _build(cls, model: Any, kwargs: dict[str, Any], *, cli: bool) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)} - {"model"}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unknown run parameters: {', '.join(unknown)}")
        values = {k: check_param(k, v, cli=cli) for k, v in kwargs.items()}
        return cls(model=None if model is None else str(model), **values)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes``, each checked against its constraint (API spelling); ``model`` as given.

        Examples
        --------
        >>> RunConfig().replace(n=16).n, RunConfig().replace(model=None).numeric
        (16, False)
        """
        checked = {k: v if k == "model" else check_param(k, v) for k, v in changes.items()}
        if "model" in checked and checked["model"] is not None:
            checked["model"] = str(checked["model"])
        return dataclasses.replace(self, **checked)
