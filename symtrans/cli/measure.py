"""Sub-command ``measure``: every numeric measurement on a real model, with its record.

Examples
--------
>>> from symtrans.cli import build_parser
>>> args = build_parser("measure").parse_args(["measure", "--n", "16", "--variant", "all"])
>>> args.model, args.n, args.variant, args.dtype
('default', 16, 'all', 'float64')
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from symtrans.config import DEFAULT_DTYPE, DEFAULT_N, DEFAULT_SEED, DEFAULT_STREAM
from symtrans.precision import DECISIVE_MARGIN
from symtrans.errors import SymtransError
from symtrans.validate import dumps_strict

__all__ = ["register", "run_measure", "render_text", "write_plots"]

_VARIANT_CHOICES = ("full", "pure-attention", "residual", "mlp")
_STREAM_ABOVE_BYTES = 1 << 30  # --stream auto: stream checkpoints larger than 1 GiB


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``measure`` sub-command to the parser.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("measure").parse_args(["measure", "--text", "hi there"]).text
    'hi there'
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    from symtrans.cli import add_device_option, add_model_option, add_progress_options, add_run_option

    add_model_option(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="input text (tokenized with the model's tokenizer.json)")
    add_run_option(src, "n", f"number of random tokens (default {DEFAULT_N}, unless --text)", default=None)
    add_run_option(p, "seed", "seed for the random tokens")
    p.add_argument("--variant", choices=_VARIANT_CHOICES + ("all",), default="full",
                   help="which stack the rank profile follows (full = the real model)")
    p.add_argument("--depth", type=int, help="depth of the variant stack (default: the model's layers)")
    p.add_argument("--layer-index", type=int, help="repeat this one layer's weights at every depth")
    p.add_argument("--ln", choices=("auto", "on", "off"), default="auto",
                   help="LayerNorm in the variants (auto: on for full only)")
    add_device_option(p)
    add_run_option(p, "dtype", "dtype of weights and forward pass")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--plots", metavar="DIR", help="write PNG plots into DIR")
    p.add_argument("--allow-pickle", action="store_true",
                   help="load a pickled .bin/.pt checkpoint (with torch.load weights_only=True)")
    add_run_option(p, "stream", "read one layer at a time from safetensors (auto: checkpoints over 1 GiB)")
    add_progress_options(p)
    p.set_defaults(func=_cmd_measure)


def _checkpoint_bytes(model: str) -> int:
    from symtrans.numeric.weights import default_model_path

    directory = default_model_path() if model == "default" else Path(model)
    return sum(f.stat().st_size for f in directory.glob("*.safetensors")) if directory.is_dir() else 0


def run_measure(model: str = "default", *, text: str | None = None, n: int | None = None,
                seed: int = DEFAULT_SEED,
                variant: str = "full", depth: int | None = None, layer_index: int | None = None,
                ln: str = "auto", device: str | None = None, dtype: str = DEFAULT_DTYPE,
                allow_pickle: bool = False, stream: str = DEFAULT_STREAM, progress: bool = False) -> Any:
    """Load a model and run :func:`symtrans.numeric.measure.measure_all`: what ``symtrans measure`` does.

    The report's ``memory`` holds the process's peak resident set during the
    call (reset at its start on Linux) and ``timings_s['load']`` the load time.

    Examples
    --------
    >>> rep = run_measure("default", n=6)
    >>> rep.n, rep.profiles["full"].ranks[0], rep.memory["streamed"]
    (6, 6, False)
    """
    from symtrans.numeric.measure import measure_all, peak_memory, reset_peak_memory, single_threaded
    from symtrans.numeric.weights import load_model, resolve_device, stream_model

    if depth is not None and depth < 1:
        raise SymtransError(f"--depth must be at least 1, got {depth}")
    if text is None and n is None:
        n = DEFAULT_N
    dev = resolve_device(device)
    before = peak_memory().get("rss_mib")
    reset = reset_peak_memory()
    t0 = time.perf_counter()
    if progress:
        from symtrans import progress as _progress

        _progress.note("measure", f"loading the model {model!r}")
    streamed = stream == "on" or (stream == "auto" and _checkpoint_bytes(model) > _STREAM_ABOVE_BYTES)
    with single_threaded():  # see single_threaded: parallel kernels stall on a busy machine
        if streamed:
            weights = stream_model(model, dtype=dtype, device=str(dev))
        else:
            weights = load_model(model, dtype=dtype, device=str(dev), allow_pickle=allow_pickle)
    load_s = time.perf_counter() - t0
    variants = _VARIANT_CHOICES if variant == "all" else (variant,)
    use_ln = None if ln == "auto" else ln == "on"
    report = measure_all(weights, text=text, n=n, seed=seed, variants=variants, depth=depth,
                         layer_index=layer_index, ln=use_ln, progress=progress)
    report.timings_s = {"load": load_s, **report.timings_s}
    # measure_all's "total" covers its own work only; the command's total includes the load before it
    report.timings_s["total"] = time.perf_counter() - t0
    report.memory.update({"rss_before_load_mib": before, "peak_reset_at_start": reset, "streamed": streamed,
                          "how": "VmHWM of /proc/self/status (resident-set peak of the whole process, "
                                 "interpreter and libraries included)"})
    return report


def _cmd_measure(args: argparse.Namespace) -> int:
    progress = args.progress != "off" and not args.quiet  # symtrans.progress: bar or timestamped lines
    report = run_measure(args.model, text=args.text, n=args.n, seed=args.seed, variant=args.variant,
                         depth=args.depth, layer_index=args.layer_index, ln=args.ln, device=args.device,
                         dtype=args.dtype, allow_pickle=args.allow_pickle, stream=args.stream,
                         progress=progress)
    written = write_plots(report, args.plots) if args.plots else []
    if args.format == "json":
        data = report.to_dict()
        data["plots"] = [str(p) for p in written]
        print(dumps_strict(data, indent=1))
    else:
        print(render_text(report))
        for p in written:
            print(f"plot: {p}")
    return 0


# ------------------------------------------------------------------ text rendering
def _m(x: float) -> str:
    """A margin in decades, compactly."""
    return "inf" if math.isinf(x) and x > 0 else ("-inf" if math.isinf(x) else f"{x:.1f}")


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in rows]


def render_text(report: Any) -> str:
    """Render a :class:`~symtrans.numeric.measure.MeasureReport` as plain-text tables.

    Examples
    --------
    >>> text = render_text(run_measure("default", n=6))
    >>> "rank profile" in text and "LayerNorm hypotheses" in text
    True
    """
    r = report
    out = [f"model      {r.model}", f"arch       {r.arch}   weights sha256 {r.weights_hash[:16]}...",
           f"input      {r.input}, n = {r.n}" + (f", seed {r.seed}" if r.seed is not None else ""),
           f"numerics   {r.dtype} on {r.device}", f"form       {r.form}"]
    causal = getattr(r, "attention", "bidirectional").startswith("causal")
    if causal:
        out.append(f"collapse   {r.collapse}")
    mem = r.memory
    out.append(f"memory     peak resident set {mem.get('peak_rss_mib', 0):.0f} MiB (before loading "
               f"{_g(mem.get('rss_before_load_mib'))} MiB; streamed: {mem.get('streamed', False)})"
               + (f"; CUDA peak {mem['cuda_peak_mib']:.0f} MiB" if "cuda_peak_mib" in mem else ""))
    out.append("time       " + ", ".join(f"{k} {v:.2f} s" for k, v in r.timings_s.items()))
    first = next(iter(r.profiles.values())).layers[0].rank
    out += ["", f"rank cut   {first.tolerance_reason}",
            f"margin     decades between the cut and the nearest singular value (<{DECISIVE_MARGIN:g}: fragile)"]
    for name, prof in r.profiles.items():
        out += ["", f"rank profile: variant {name}, LayerNorm {'on' if prof.ln else 'off'}"
                + (f", layer {prof.layer_index} repeated" if prof.layer_index is not None else "")
                + "  (state 0 = first layer's input)"]
        rows = [[str(x.index), str(x.rank.rank), _m(x.rank.margin), _g(x.rank.sigma_above),
                 _g(x.rank.sigma_below), str(x.affine.rank), _m(x.affine.margin), f"{x.stable_rank:.2f}",
                 f"{x.effective_rank:.1f}", f"{x.residual.ratio:.3g}", f"{x.residual.composite_ratio:.3g}"]
                + ([f"{x.residual.first_row_ratio:.3g}"] if causal else [])
                for x in prof.layers]
        out += _table(["state", "rank", "margin", "sigma_r", "sigma_r+1", "arank", "margin", "stable",
                       "eff.rank", "res(F)", "res(Dong)"] + (["res(x_1)"] if causal else []), rows)
    out += ["", "res(F): ||X - 1 mean^T||_F / ||X||_F (the column mean is the exact minimiser); "
            "res(Dong): sqrt(||.||_1 ||.||_inf) at the same x (an upper bound on Dong's min over x)"
            + ("; res(x_1): ||X - 1 x_1^T||_F / ||X||_F, distance from the first token's row" if causal else "")]
    out += ["", f"alpha_h = ||(M - M^T)/2||_F / ||M||_F, M = W_Q^h W_K^h^T  ({r.asymmetry.dtype}; via QR of [W_Q W_K], no cancellation)"]
    if "rotary" in r.asymmetry.positional:
        out += [f"  {r.asymmetry.positional}"]
    H = len(r.asymmetry.alpha[0])
    out += _table(["layer"] + [f"h{h}" for h in range(H)],
                  [[str(i)] + [f"{a:.2f}" for a in row] for i, row in enumerate(r.asymmetry.alpha)])
    out += ["", "head output subspaces R_h = rowspace(Y^h W_O^h); MHA(X) = sum_h Y^h W_O^h (no b_O)"]
    rows = []
    for h in r.heads:
        dims = h.dim_R
        dim_text = f"{dims[0]} x{len(dims)}" if len(set(dims)) == 1 else ",".join(map(str, dims))
        off = [a for i, row in enumerate(h.min_angle_deg) for j, a in enumerate(row) if i < j]
        ovl = [a for i, row in enumerate(h.overlap) for j, a in enumerate(row) if i < j]
        rows.append([str(h.layer), dim_text, _m(min(x.margin for x in h.dim_R_records)), str(h.rank_mha.rank),
                     _m(h.rank_mha.margin), str(h.dim_sum.rank), _m(h.dim_sum.margin), f"{h.alpha_mha:.3f}",
                     str(h.kappa), f"{min(off):.1f}" if off else "-",
                     f"{sum(ovl) / len(ovl):.3f}" if ovl else "-"])
    out += _table(["layer", "dim R_h", "margin", "rank MHA", "margin", "dim sum R_h", "margin", "alpha_MHA",
                   "kappa", "min angle", "mean overlap"], rows)
    out += ["min angle: smallest principal angle between two heads' R_h (degrees); overlap: mean cos^2 of "
            "all principal angles of a pair (1 nested, 0 orthogonal)"]
    precisions = sorted({x.precision for x in r.wo.ranks_records if x.precision})
    out += ["", f"stacked W_O ({r.wo.shape[0]} x {r.wo.shape[1]}, {r.wo.dtype}; rank at "
            f"{', '.join(precisions) or 'computation precision'}, as the report decides it)"]
    out += _table(["layer", "rank", "margin", "sigma_max", "sigma_min", "condition"],
                  [[str(i), str(x.rank), _m(x.margin), _g(x.sigma_max),
                    _g(x.sigma_max / c if math.isfinite(c) else 0.0), _g(c)]
                   for i, (x, c) in enumerate(zip(r.wo.ranks_records, r.wo.condition))])
    if r.wo_fibre_dim:
        out += [f"fibre of Z -> Z W_O at n = {r.n}: n (H d_v - rank W_O) = "
                + ", ".join(str(f) for f in r.wo_fibre_dim) + " (per layer)"]
    if not any(r.ln):
        out += ["", "LayerNorm hypotheses of Theorem 4.2: not measured (the model's norm is RMSNorm, which does "
                "not centre; the hypotheses are about LayerNorm's centring)"]
        return "\n".join(out)
    out += ["", "LayerNorm hypotheses of Theorem 4.2 on each LN input (holds, margin in decades)"]
    rows = []
    for i, pair in enumerate(r.ln):
        for which, rec in pair.items():
            rows.append([str(i), which, str(rec.rank_X.rank), _m(rec.rank_X.margin)]
                        + [f"{'yes' if h.holds else 'NO'} {_m(h.margin)}" for h in rec.hypotheses])
    out += _table(["layer", "LN", "rank X", "margin", "H1", "H2", "H3", "H4"], rows)
    first_ln = r.ln[0]["ln1"]
    out += [f"{h.name}: {h.statement}; {h.tolerance_reason}" for h in first_ln.hypotheses]
    return "\n".join(out)


# ------------------------------------------------------------------ plots
def _mpl_text(text: object) -> str:
    """An external string as literal matplotlib text: ``$`` would open mathtext (and fail to parse).

    Examples
    --------
    >>> _mpl_text("gpt$2\\x1b")
    'gpt\\\\$2\\\\x1b'
    """
    from symtrans.validate import terminal_safe

    return terminal_safe(str(text), keep_newlines=False).replace("$", "\\$")


def write_plots(report: Any, directory: str | Path) -> list[Path]:
    """Write ``ranks.png``, ``alpha.png`` and ``spectra.png`` into ``directory``; return their paths.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [p.name for p in write_plots(run_measure("default", n=6), d)]
    ['ranks.png', 'alpha.png', 'spectra.png']
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SymtransError("--plots needs matplotlib: pip install 'symtrans[plots]'") from None
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SymtransError(f"{out}: cannot create the plot directory ({err.strerror})") from None
    arch = _mpl_text(report.arch)
    title = f"{arch}, n = {report.n}, {report.dtype}"
    paths: list[Path] = []

    def save(fig: Any, name: str) -> None:  # rendered in memory, then written without following a link
        import io

        from symtrans.outdir import write_file

        buf = io.BytesIO()
        try:
            fig.savefig(buf, dpi=110, format="png")
        finally:
            plt.close(fig)
        paths.append(write_file(out, name, buf.getvalue(), "plot"))

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, prof in report.profiles.items():
        xs = [x.index for x in prof.layers]
        axes[0].plot(xs, prof.ranks, marker="o", label=f"{name} rank")
        axes[0].plot(xs, prof.affine_ranks, ls="--", marker=".", label=f"{name} affine rank")
        axes[1].plot(xs, [x.effective_rank for x in prof.layers], marker="o", label=f"{name} entropy eff. rank")
        axes[1].plot(xs, [x.stable_rank for x in prof.layers], ls="--", marker=".", label=f"{name} stable rank")
    for ax, what in zip(axes, ("numerical / affine rank", "effective / stable rank")):
        ax.set_xlabel("hidden state (0 = first layer's input)")
        ax.set_ylabel(what)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Rank per layer per variant ({title})")
    fig.tight_layout()
    save(fig, "ranks.png")

    alpha = report.asymmetry.alpha
    fig, ax = plt.subplots(figsize=(1 + 0.5 * len(alpha[0]), 1 + 0.45 * len(alpha)))
    im = ax.imshow(alpha, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for i, row in enumerate(alpha):
        for j, a in enumerate(row):
            ax.text(j, i, f"{a:.2f}", ha="center", va="center", fontsize=7, color="w" if a < 0.6 else "k")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"alpha_h = ||M_a||_F / ||M||_F ({arch})")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    save(fig, "alpha.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    name, prof = next(iter(report.profiles.items()))
    cmap = plt.get_cmap("plasma")
    for x in prof.layers:
        s = [v for v in x.singular_values if v > 0]
        colour = cmap(0.85 * x.index / max(1, len(prof.layers) - 1))
        ax.semilogy(range(1, len(s) + 1), s, color=colour, label=f"state {x.index} (rank {x.rank.rank})")
        ax.axhline(x.rank.cut, color=colour, lw=0.6, ls=":")
    ax.set_xlabel("index i")
    ax.set_ylabel("sigma_i")
    ax.set_title(f"Singular spectra of hidden states, variant {name}\n({title}; dotted lines: rank cuts)",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, "spectra.png")
    return paths
