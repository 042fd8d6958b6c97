"""What streaming costs in memory: the float64 budget of a streamed measurement, stated and measured.

``measure_all`` on :func:`~symtrans.numeric.weights.stream_model` weights
reads one layer from disk at a time and keeps at most two layers' weights and
per-head internals alive (the layer being measured on the thread pool and the
next one being computed), plus the hidden states of the rank profile; reading
a layer converts it to float64 and the per-head layout through one more
layer-sized copy. So the growth of the resident set over the run is bounded by
:func:`stream_budget`:

``3 * layer weights + 2 * layer internals + 2 (L + 1) n d_model`` float64 values,

where a layer's internals are ``A`` (H n^2), ``Y`` (H n d_v), ``YO`` (H n
d_model) and eight n x d_model matrices, and the word/position rows read are
``n`` rows each. The whole model in float64 is :func:`float64_bytes`; a
checkpoint larger than memory in float64 can be measured as long as the budget
fits.

Examples
--------
>>> from symtrans.arch import get_arch
>>> b = stream_budget(get_arch("bert-large"), n=128)
>>> round(b["layer_weights_bytes"] / 2**20, 1), round(float64_bytes(get_arch("bert-large")) / 2**30, 2)
(96.1, 2.49)
"""

from __future__ import annotations

from typing import Any

__all__ = ["layer_float64_bytes", "float64_bytes", "stream_budget", "report_memory_bytes", "REPORT_FIXED_BYTES",
           "REPORT_STREAM_ABOVE_BYTES", "report_streams", "streamed_report_bytes", "load_run_weights"]

#: What a report process holds before any weight: the interpreter, torch, SymPy, the claim registry and its
#: producers (measured: 374 MiB peak for a whole report on a 2-layer d_model 32 checkpoint in a fresh process,
#: 435-491 MiB in sweep workers), with headroom for other builds of torch.
REPORT_FIXED_BYTES = 768 << 20


def layer_float64_bytes(arch: Any) -> int:
    """Bytes of one layer's weights in float64, in the per-head layout (K/V repeated per query head).

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> layer_float64_bytes(get_arch("bert-base")) // 2**20
    54
    """
    H, D, dk, dv, F = (int(arch.H), int(arch.d_model), int(arch.d_k), int(arch.d_v), int(arch.d_ff))
    attn = H * D * dk * 2 + H * D * dv + H * dv * D + H * dk * 2 + H * dv + D
    ffn = (3 if arch.ffn == "gated" else 2) * D * F + (2 if arch.ffn == "gated" else 1) * F + D
    norms = 4 * D
    return 8 * (attn + ffn + norms)


def float64_bytes(arch: Any) -> int:
    """Bytes of the whole model in float64: every layer plus the embedding tables.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> float64_bytes(get_arch("bert-base")) > 12 * layer_float64_bytes(get_arch("bert-base"))
    True
    """
    D = int(arch.d_model)
    tables = int(arch.vocab_size) * D + (int(arch.position_table or arch.max_positions) * D
                                         if arch.positional == "learned" else 0)
    return int(arch.L) * layer_float64_bytes(arch) + 8 * (tables + int(arch.type_vocab_size) * D)


def stream_budget(arch: Any, n: int) -> dict[str, int]:
    """The stated bound on the resident-set growth of a streamed float64 measurement at ``n`` tokens.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> b = stream_budget(get_arch("bert-base"), n=64)
    >>> b["bound_bytes"] == 3 * b["layer_weights_bytes"] + 2 * b["layer_internals_bytes"] + b["states_bytes"]
    True
    """
    H, D, dv, L = int(arch.H), int(arch.d_model), int(arch.d_v), int(arch.L)
    internals = 8 * (H * n * n + H * n * dv + H * n * D + 8 * n * D)
    states = 8 * (L + 1) * n * D * 2  # the stack of hidden states, and its centred copy for the affine ranks
    weights = layer_float64_bytes(arch)
    return {"layer_weights_bytes": weights, "layer_internals_bytes": internals, "states_bytes": states,
            "bound_bytes": 3 * weights + 2 * internals + states}


def report_memory_bytes(arch: Any, numel: int, n: int) -> int:
    """A scheduling estimate of a whole report's peak memory: fixed overhead, the weights twice in float64, the trace.

    ``numel`` is the checkpoint's element count (from its safetensors headers,
    :func:`symtrans.numeric.weights.describe_checkpoint`): the report loads
    the whole model in float64 (the stored tensor and its converted copy can
    coexist during the load, hence twice), and its trace keeps every layer's
    internals at ``n`` tokens and the hidden states (:func:`stream_budget`).
    Measured on the bundled model at n = 32: 635 MiB peak, estimate 1128 MiB. A model whose float64
    size exceeds :data:`REPORT_STREAM_ABOVE_BYTES` is streamed by the report: its estimate is
    :func:`streamed_report_bytes`.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> a = get_arch("bert-base")
    >>> est = report_memory_bytes(a, 110_000_000, 128)
    >>> est > 2 * 8 * 110_000_000, est < 3 * 2**30
    (True, True)
    >>> report_memory_bytes(a, 110_000_000, 256) > est  # more tokens, more trace
    True
    """
    if float64_bytes(arch) > REPORT_STREAM_ABOVE_BYTES:  # such a report streams (report_streams, --stream auto)
        return streamed_report_bytes(arch, n)
    b = stream_budget(arch, n)
    return int(REPORT_FIXED_BYTES + 2 * 8 * int(numel) + int(arch.L) * b["layer_internals_bytes"] + b["states_bytes"])


#: ``symtrans report --stream auto``: a model whose float64 size (:func:`float64_bytes`) exceeds this is read one
#: layer at a time. BERT-large (2.5 GiB in float64) stays in memory, where the report is fastest; a 1B-class
#: decoder (about 9 GiB) streams.
REPORT_STREAM_ABOVE_BYTES = 4 << 30


def report_streams(spec: Any, mode: str = "auto") -> bool:
    """Whether a report reads model ``spec`` one layer at a time: ``mode`` "on", "off", or "auto" (by float64 size).

    "auto" reads only ``config.json`` (no weight); a spec that is not a local
    directory or ``"default"`` (an in-memory model, a hub id) is loaded whole.

    Examples
    --------
    >>> report_streams("default"), report_streams("default", "on"), report_streams("default", "off")
    (False, True, False)
    >>> report_streams("default", "sometimes")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --stream 'sometimes': use auto, on or off
    """
    from pathlib import Path

    from symtrans.config import check_param

    check_param("stream", mode, cli=True)  # the one declared constraint
    if mode != "auto":
        return mode == "on"
    if not isinstance(spec, (str, Path)):
        return False
    from symtrans.arch import from_config
    from symtrans.numeric.weights import default_model_path

    directory = default_model_path() if str(spec) == "default" else Path(spec)
    if directory.is_file():
        directory = directory.parent
    if not (directory / "config.json").is_file():
        return False
    return float64_bytes(from_config(directory)) > REPORT_STREAM_ABOVE_BYTES


def load_run_weights(spec: Any, *, dtype: str = "float64", device: str | None = "cpu", stream: str = "auto") -> Any:
    """Load model ``spec`` for a run: one layer at a time when :func:`report_streams` says so, else whole.

    The loader of :class:`symtrans.context.Context` (its ``DEFAULT_LOADER``). A
    streamed model keeps two layers: a producer returns to the layer it reads.

    Examples
    --------
    >>> w = load_run_weights("default", stream="off")
    >>> type(w).__name__, type(load_run_weights("default", stream="on")).__name__
    ('ModelWeights', 'StreamedWeights')
    """
    from symtrans.numeric.weights import load_model, stream_model

    if report_streams(spec, stream):
        return stream_model(spec, dtype=dtype, device=device, keep=2)
    return load_model(spec, dtype=dtype, device=device)


def streamed_report_bytes(arch: Any, n: int, workers: int = 2) -> int:
    """The stated peak of a streamed report: fixed overhead, two layers in float64 per process, the lean trace.

    Each of the ``workers`` processes keeps two layers (``stream_model(keep=2)``)
    and converts one more while reading; the trace keeps per layer only ``X``,
    ``A``, ``Y``, ``mha`` and the norm inputs (``YO``, the largest internal,
    is recomputed on read).

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> a = get_arch("bert-large")
    >>> streamed_report_bytes(a, 128) < report_memory_bytes(a, 335_000_000, 128)
    True
    """
    H, D, dv, L = int(arch.H), int(arch.d_model), int(arch.d_v), int(arch.L)
    lean = 8 * (H * n * n + H * n * dv + 5 * n * D)
    return int(REPORT_FIXED_BYTES + workers * 3 * layer_float64_bytes(arch) + L * lean
               + stream_budget(arch, n)["states_bytes"])
