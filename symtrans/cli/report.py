"""Sub-command ``report``: run every claim's evidence producers and write the proof-status report."""

from __future__ import annotations

import argparse
import sys


__all__ = ["register", "context_from_args"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``report`` sub-command to the parser.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> args = build_parser("report").parse_args(["report", "--model", "none", "--format", "md"])
    >>> args.model, args.out, args.format
    ('none', 'symtrans-report', 'md')
    """
    p = sub.add_parser(name, help=help_text, description=help_text + ". Writes report.md, report.json, "
                       "report.html and report.dot into DIR, atomically (all of them, or none).")
    from symtrans.cli import add_device_option, add_eps_option, add_model_option, add_run_option

    add_model_option(p, none=True)  # none: symbolic producers only (numeric ones are then listed as not-run)
    p.add_argument("--out", default="symtrans-report", metavar="DIR",
                   help="output directory (new, empty, or holding only an earlier report)")
    p.add_argument("--format", default="md,json,html,dot", help="comma-separated: md, json, html, dot")
    add_run_option(p, "n", "sequence length for numeric checks")
    add_run_option(p, "seed", "random seed for numeric checks")
    add_device_option(p)
    add_run_option(p, "dtype", "dtype for numeric checks (float64: rank decisions need it)")
    p.add_argument("--previous", metavar="REPORT_JSON", default=None,
                   help="an earlier report.json whose evidence is carried over (marked stale if the weights "
                        "or the toolkit version changed)")
    p.add_argument("--layers", default=None, metavar="LIST",
                   help="look at these layers only, e.g. 0,1,5 or 0-3 (the forward pass still runs through the "
                        "layers before them); the scope is stated in every record and in the header, and a "
                        "statement about every layer is not certified from a subset")
    add_eps_option(p)
    add_run_option(p, "stream", "read the weights one layer at a time from safetensors (auto: when the model in float64 "
                        "exceeds 4 GiB; peak memory about two layers in float64 per process)")
    p.add_argument("--gauge-check", action="store_true",
                   help="also draw 5 random exact elements of the invariance group G (and, for LayerNorm models, "
                        "TransformerLens's centring of the writers), apply each to the weights, re-run the producers "
                        "and compare every verdict: a function-reading that moves is a defect (exit status 1); "
                        "about fourteen times the report's numeric checks")
    p.add_argument("--serial", action="store_true",
                   help="run every producer in this process (default: with 2+ CPUs, this process and one forked "
                        "worker share the producers, most expensive first, after a worker forked before the model "
                        "loads has started on those that read no model; the verdicts are the same)")
    p.set_defaults(func=_cmd_report)


def context_from_args(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Build the evidence :class:`~symtrans.context.Context` from the command-line options.

    Examples
    --------
    >>> ns = argparse.Namespace(model="none", n=32, seed=1, device=None, dtype="float64", quiet=True)
    >>> ctx = context_from_args(ns)
    >>> ctx.model, ctx.n, ctx.numeric
    (None, 32, False)
    """
    from symtrans.args import parse_layers
    from symtrans.config import RunConfig
    from symtrans.context import Context

    layers = getattr(args, "layers", None)
    config = RunConfig.from_args(args, layers=parse_layers(layers) if layers is not None else None)
    return Context.from_config(config, progress=not getattr(args, "quiet", False)
                               and getattr(args, "progress", "auto") != "off")


def _cmd_report(args: argparse.Namespace) -> int:
    from symtrans.outdir import DirLock

    with DirLock(args.out):  # held from the first check to the last write: a second run into DIR is refused
        return _report_locked(args)


def _report_locked(args: argparse.Namespace) -> int:
    from symtrans.report import build_report, check_output_dir, parse_formats, write_report

    formats = parse_formats(args.format)
    check_output_dir(args.out)  # fail before minutes of checks, not after
    ctx = context_from_args(args)
    gauge = getattr(args, "gauge_check", False)
    from symtrans.errors import SymtransError

    if gauge and not ctx.numeric:
        raise SymtransError("--gauge-check needs a model (--model default or a model directory), not --model none")
    if gauge and ctx.layers is not None:
        raise SymtransError("--gauge-check compares every layer's verdicts: drop --layers")
    acted = None
    if gauge:  # G must be modelled for the model (a checkpoint with eps = 0 is not): say so before the report
        from symtrans.report.gauge import gauge_group

        acted = gauge_group(ctx.model, eps=ctx.eps, weights=ctx.weights() if ctx.eps != 0 else None,
                            dtype=ctx.dtype, device=ctx.device)[0]  # the weights G acts on: loaded once
    report = build_report(ctx, previous=args.previous, progress=not args.quiet and getattr(args, "progress", "auto") != "off",
                          parallel=False if getattr(args, "serial", False) else None)
    if gauge:
        from symtrans.report.gauge import gauge_check

        report.gauge = gauge_check(ctx.model, n=ctx.n, seed=ctx.seed, elements=5, restricted=1, eps=ctx.eps,
                                   dtype=ctx.dtype, device=ctx.device, weights=acted)
    paths = write_report(report, args.out, formats)
    from symtrans.report.fmt import answer_line

    print(f"wrote {', '.join(str(p) for p in paths)}")
    print(answer_line(report))
    dis = report.disagreements()
    print(f"disagreements with the paper: {', '.join(c.id for c, _ in dis) if dis else 'none so far'}")
    for err in report.errors:
        print(f"symtrans: warning: {err}", file=sys.stderr)
    defects = report.gauge.defects if report.gauge is not None else []
    if report.gauge is not None:
        print(report.gauge.lines()[0])
    for d in defects:
        print(f"symtrans: warning: gauge check: DEFECT: {d}", file=sys.stderr)
    return 1 if report.errors or defects else 0
