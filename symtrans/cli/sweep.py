"""Sub-command ``sweep``: one proof-status report per (model, n, seed), on Ray or a local pool, and the aggregate."""

from __future__ import annotations

import argparse
import sys


__all__ = ["register"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``sweep`` sub-command to the parser.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> args = build_parser("sweep").parse_args(["sweep", "default", "m2", "--n", "8", "16", "--engine", "local"])
    >>> args.models, args.ns, args.seeds, args.engine, args.out
    (['default', 'm2'], [8, 16], [0], 'local', 'symtrans-sweep')
    """
    p = sub.add_parser(name, help=help_text, description=help_text + ". Each run's report goes to "
                       "DIR/tasks/<model>-n<N>-s<SEED>-<key>/report (key: weights hash or hub revision, n, seed, "
                       "dtype, device, toolkit version, producer hashes) with a completion marker task.json; a "
                       "rerun skips finished runs and redoes failed or interrupted ones. The aggregate (claims "
                       "and readings x runs) is written to DIR/aggregate/sweep.{md,json,html,csv}. See docs/sweep.md.")
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="'default' (the bundled model), a model directory, or a hub id")
    from symtrans.cli import add_run_option

    add_run_option(p, "n", "sequence lengths", dest="ns", nargs="+")
    add_run_option(p, "seed", "random seeds", dest="seeds", nargs="+")
    p.add_argument("--out", default="symtrans-sweep", metavar="DIR",
                   help="sweep directory (new, empty, or an earlier sweep's: finished runs are kept)")
    p.add_argument("--engine", default=None, choices=("ray", "local"),
                   help="ray: Ray tasks (pip install 'symtrans[distributed]'); local: a process pool on this "
                        "machine; the reports are the same (default: ray with --address, else local)")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="an existing Ray cluster (e.g. auto, or ray://host:10001; DIR must be on a file system "
                        "every node sees); default: start Ray on this machine")
    p.add_argument("--workers", type=int, default=None,
                   help="local engine: processes (default: CPUs / --cpus-per-task, within memory)")
    p.add_argument("--cpus-per-task", dest="num_cpus", type=int, default=1,
                   help="CPUs each run asks for (2+: the report shares its producers with a forked worker)")
    p.add_argument("--retries", type=int, default=2,
                   help="how often a run whose worker died (killed, out of memory) is started again")
    from symtrans.cli import add_device_option

    add_device_option(p)  # one GPU a run where CUDA is available
    add_run_option(p, "dtype", "dtype for numeric checks (float64: rank decisions need it)")
    p.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from symtrans.sweeps import sweep

    result = sweep(args.models, args.ns, args.seeds, out=args.out, engine=args.engine, address=args.address,
                   workers=args.workers, num_cpus=args.num_cpus, retries=args.retries, dtype=args.dtype,
                   device=args.device, progress=not args.quiet and args.progress != "off")
    s = (result.aggregate or {}).get("summary", {})
    print(f"wrote {', '.join(str(p) for p in result.paths)}")
    print(f"{len(result.tasks)} runs: {result.ran} ran, {result.skipped} already done, {len(result.failed)} failed; "
          f"{s.get('disagreeing_rows', 0)} of {s.get('rows', 0)} claims and readings differ between runs "
          f"({result.seconds:.1f} s)")
    for rec in result.failed:
        task = rec.get("task") or {}
        print(f"symtrans: warning: {task.get('label')} n={task.get('n')} seed={task.get('seed')} failed: "
              f"{rec.get('error')}", file=sys.stderr)
    return 1 if result.failed else 0
