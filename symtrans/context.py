"""The run's context: its configuration, a cache, and the model loader passed in.

A producer receives a :class:`Context`: which model, sequence length, seed,
device and dtype to use (a :class:`~symtrans.config.RunConfig`'s fields), the
cache its loaded weights and shared intermediate results live in, and the
function that loads the model (``loader``). The records themselves
(:class:`~symtrans.evidence.Evidence`, :class:`~symtrans.evidence.Scope`, ...)
live in :mod:`symtrans.evidence`, which imports no engine.

This module sits at the runner layer (docs/architecture.md) and imports no
engine either: the model loader is passed in, or named as a ``"module:function"``
(:data:`DEFAULT_LOADER`, imported when a model is first loaded, the way the
producer table names its producers).

Examples
--------
>>> Context(model=None).numeric, Context().n
(False, 128)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from symtrans.config import DEFAULT_DTYPE, DEFAULT_N, DEFAULT_SEED, DEFAULT_STREAM
from symtrans.evidence import Producer

__all__ = ["Context", "DEFAULT_LOADER", "Loader", "device_name"]

#: ``loader(model, dtype=..., device=..., stream=...)`` -> weights: how a context loads its model
Loader = Callable[..., Any]
#: the loader a context uses unless one is passed in: the numeric engine's (whole, or one layer at a time as
#: ``stream`` says), named here and imported on first use so that this layer imports no engine
DEFAULT_LOADER = "symtrans.numeric.streaming:load_run_weights"


def _default_loader() -> Loader:
    import importlib

    module, function = DEFAULT_LOADER.split(":")
    loader: Loader = getattr(importlib.import_module(module), function)
    return loader


@dataclass
class Context:
    """What a producer may use: the model spec, sizes, seed, device, dtype, progress, a cache and a loader.

    ``model`` is ``None`` for symbolic-only runs, else a spec that
    :func:`symtrans.numeric.load_model` accepts ("default", a directory).
    Loaded objects are cached in ``cache`` so producers share one load.
    ``loader`` loads the model (``None``: :data:`DEFAULT_LOADER`).
    With ``reuse`` (the default) evidence already produced in this process
    for the same model, n, seed, dtype and device is reused, not recomputed
    (a producer that reads no model: for the same n, seed, dtype and device,
    whatever the model or layer subset; its context key names neither).
    ``reuse="model-free"`` reuses only those model-free records: every
    producer that reads the model runs afresh (as after :meth:`preload`).

    Examples
    --------
    >>> Context(model=None).numeric
    False
    """

    model: str | None = "default"
    n: int = DEFAULT_N
    seed: int = DEFAULT_SEED
    device: str | None = None
    dtype: str = DEFAULT_DTYPE
    progress: bool = False
    cache: dict[str, Any] = field(default_factory=dict)
    reuse: bool | str = True  # reuse evidence produced earlier in this process for the same inputs ("model-free")
    #: the layers numeric producers look at (``--layers``); ``None``: every layer. A subset is stated in every
    #: model record (its context key and scope), and a statement about every layer is not certified from it
    layers: tuple[int, ...] | None = None
    #: read the weights one layer at a time from safetensors: "on", "off", or "auto" (when the model's float64
    #: size exceeds :data:`symtrans.numeric.streaming.REPORT_STREAM_ABOVE_BYTES`)
    stream: str = DEFAULT_STREAM
    #: the norms' eps for the analysis (``--eps``, API ``eps=``), 0 included (the paper's eps-free LayerNorm);
    #: ``None``: the checkpoint's own. Applied to the loaded weights' architecture, so the forward pass and
    #: every check read it; stated in every model record's context (``eps``, ``eps_source``)
    eps: float | None = None
    #: ``loader(model, dtype=, device=, stream=)`` -> weights; ``None``: :data:`DEFAULT_LOADER`
    loader: Loader | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Each run parameter through its one declared constraint (:data:`symtrans.config.PARAMS`).

        Examples
        --------
        >>> Context(model=None, n=1)
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: n 1: must be at least 2
        >>> Context(layers=[5, 0, 5]).layers
        (0, 5)
        """
        from symtrans.config import PARAMS, check_param

        for name in PARAMS:
            setattr(self, name, check_param(name, getattr(self, name)))

    def with_eps(self, w: Any) -> Any:
        """``w`` with the architecture's ``ln_eps`` replaced by :attr:`eps` (when set): the one rule for ``--eps``.

        Examples
        --------
        >>> from symtrans.numeric import load_model
        >>> w = load_model("default")
        >>> Context(model=None, eps=0.0).with_eps(w).arch.ln_eps, Context(model=None).with_eps(w) is w
        (0.0, True)
        """
        import dataclasses

        if self.eps is None or not hasattr(w, "arch") or float(w.arch.ln_eps) == self.eps:
            return w
        arch = dataclasses.replace(w.arch, ln_eps=self.eps)
        if dataclasses.is_dataclass(w):
            return dataclasses.replace(w, arch=arch)
        w.arch = arch  # a streamed checkpoint: the architecture is an attribute
        return w

    @classmethod
    def from_config(cls, config: Any, **extra: Any) -> Context:
        """A context for a checked :class:`~symtrans.config.RunConfig` (``extra``: progress, reuse, cache).

        Examples
        --------
        >>> from symtrans.config import RunConfig
        >>> Context.from_config(RunConfig.from_kwargs(model=None, n=8)).n
        8
        """
        import dataclasses

        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)}, **extra)

    def weights(self, dtype: str | None = None, device: str | None = None) -> Any:
        """Load the model once per (dtype, device), cached in ``cache``; return its weights.

        ``dtype`` and ``device`` default to the context's own. Raises
        :class:`~symtrans.errors.SymtransError` when no model was given or the
        model cannot be loaded.

        Examples
        --------
        >>> Context(model=None).weights()
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: no model given (this needs --model default or a model directory)
        """
        if self.model is None:
            from symtrans.errors import SymtransError

            raise SymtransError("no model given (this needs --model default or a model directory)")
        key = self._weights_key(dtype, device)
        if key not in self.cache:
            load = self.loader if self.loader is not None else _default_loader()
            self.cache[key] = self.with_eps(load(self.model, dtype=key[2], device=key[3], stream=self.stream))
        return self.cache[key]

    def layer_indices(self, n_layers: int) -> list[int]:
        """The layers numeric producers look at: ``layers`` (``--layers``), else all ``n_layers``.

        Examples
        --------
        >>> Context(layers=(0, 5)).layer_indices(6), Context().layer_indices(3)
        ([0, 5], [0, 1, 2])
        >>> Context(layers=(7,)).layer_indices(6)
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: --layers 7: the model has 6 layers (0-5)
        """
        if self.layers is None:
            return list(range(n_layers))
        bad = [i for i in self.layers if not 0 <= i < n_layers]
        if bad:
            from symtrans.errors import SymtransError

            raise SymtransError(f"--layers {','.join(map(str, bad))}: the model has {n_layers} layers "
                                f"(0-{n_layers - 1})")
        return sorted(set(self.layers))

    @property
    def layers_text(self) -> str | None:
        """The layer subset as one string (``"0,1,5"``), or ``None`` for every layer.

        Examples
        --------
        >>> Context(layers=(5, 0, 1)).layers_text, Context().layers_text
        ('0,1,5', None)
        """
        return None if self.layers is None else ",".join(str(i) for i in sorted(set(self.layers)))

    def preload(self, weights: Any) -> Context:
        """Use ``weights`` (e.g. a deliberately broken copy) as this context's model; returns self.

        Evidence reuse is switched off for every producer that reads the model: its records must come from these
        weights. A producer that reads no model gives the same records whatever the weights, so its records are
        still reused (unless reuse was off already).

        Examples
        --------
        >>> ctx = Context(model="default").preload("stand-in")
        >>> ctx.loaded_weights(), ctx.reuse
        ('stand-in', 'model-free')
        >>> Context(model="default", reuse=False).preload("stand-in").reuse
        False
        """
        self.cache[self._weights_key(None, None)] = self.with_eps(weights)
        self.reuse = "model-free" if self.reuse else False
        return self

    def loaded_weights(self) -> Any | None:
        """The weights in the context's own dtype and device if already loaded, else None.

        Examples
        --------
        >>> Context(model="default").loaded_weights() is None
        True
        """
        if not any(isinstance(k, tuple) and k[:1] == ("weights",) for k in self.cache):
            return None  # nothing loaded: answer without importing torch
        return self.cache.get(self._weights_key(None, None))

    def key(self, p: Producer) -> dict[str, Any]:
        """The context key a record of producer ``p`` is valid under (what ``--previous`` must match).

        It names everything the record depends on: the sizes and seed, the
        dtype and device, the weights (by hash; ``None`` for symbolic
        producers, which read no model), the toolkit version and a hash of
        the producer's own source.

        Examples
        --------
        >>> p = Producer(claim="c", name="p", kind="symbolic", func=len)
        >>> k = Context(model=None, n=16).key(p)
        >>> k["n"], k["weights_hash"], sorted(k)[:3]
        (16, None, ['device', 'dtype', 'n'])
        >>> Context(model=None, n=32).key(p) == k  # another n: a record made at n = 16 does not count
        False
        """
        from symtrans import __version__

        w = self.loaded_weights() if p.needs_model else None
        out = {"producer": p.name, "n": self.n, "seed": self.seed, "dtype": self.dtype,
               "device": None if self.device in (None, "cpu") else str(self.device),
               "weights_hash": getattr(w, "weights_hash", None) if p.needs_model else None,
               "toolkit_version": __version__, "producer_hash": p.source_hash}
        if p.needs_model and self.layers is not None:  # a subset: the record covers these layers only
            out["layers"] = self.layers_text
        if p.needs_model:  # the norms' eps the analysis used: the checkpoint's, or the user's (--eps)
            arch = getattr(w, "arch", None)
            out["eps"] = self.eps if self.eps is not None else (float(arch.ln_eps) if arch is not None else None)
            out["eps_source"] = "--eps" if self.eps is not None else "checkpoint"
        return out

    def _weights_key(self, dtype: str | None, device: str | None) -> tuple[Any, ...]:
        return ("weights", self.model, dtype or self.dtype,
                device_name(device if device is not None else self.device))

    @property
    def numeric(self) -> bool:
        """True when numeric producers can run (a model was given).

        Examples
        --------
        >>> Context(model="default").numeric
        True
        """
        return self.model is not None


def device_name(device: str | None) -> str:
    """The concrete device a spec stands for: ``None`` is CUDA when available, else ``"cpu"``.

    Weights are cached under this name, so ``device=None`` and ``device="cpu"``
    on a CPU-only machine share one load instead of holding two copies.

    Examples
    --------
    >>> device_name("cpu"), device_name("cuda:0")
    ('cpu', 'cuda')
    >>> device_name(None) in ("cpu", "cuda")
    True
    """
    if device is None:
        import torch  # only numeric work asks, and it needs torch anyway

        return "cuda" if torch.cuda.is_available() else "cpu"
    device = str(device)
    return "cuda" if device == "cuda:0" else device
