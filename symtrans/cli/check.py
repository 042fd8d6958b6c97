"""Sub-command ``check``: run the numeric checks on a model and print a verdict table."""

from __future__ import annotations

import argparse
import time
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import dumps_strict

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``check`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> a = build_parser("check").parse_args(["check", "--claims", "thm-4.2", "--n", "16"])
    >>> a.claims, a.n, a.model
    (['thm-4.2'], 16, 'default')
    """
    p = sub.add_parser(name, help=help_text, description=help_text + ": every claim a computation can "
                       "test, on the model's real weights (float64 by default)")
    from symtrans.cli import add_device_option, add_eps_option, add_model_option, add_run_option

    add_model_option(p)
    p.add_argument("--claims", nargs="+", metavar="ID", help="only these claim ids (default: all checked claims)")
    add_run_option(p, "n", "sequence length of the real inputs")
    add_run_option(p, "seed", "seed of the random tokens and inputs")
    add_device_option(p)
    add_eps_option(p)
    add_run_option(p, "dtype", "dtype of weights and forward pass (rank decisions want float64)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_check)


def _fmt_margin(m: float | None) -> str:
    if m is None:
        return "-"
    if m != m or abs(m) == float("inf"):
        return str(m)
    return f"{m:.3g}"


def _table(evidence: list[Any], seconds: bool = True) -> str:
    """The check table: one row per record (``seconds=False``: without the run-dependent seconds column)."""
    rows = [("claim", "check", "verdict", "margin", "s", "summary")]
    for e in evidence:
        summ = e.summary if len(e.summary) <= 110 else e.summary[:107] + "..."
        rows.append((e.claim, e.producer, e.verdict.label, _fmt_margin(e.margin), f"{e.seconds or 0:.2f}", summ))
    if not seconds:
        rows = [r[:4] + r[5:] for r in rows]
    k = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(k)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:k], widths)) + "  " + r[k] for r in rows]
    lines.insert(1, "-" * min(200, len(lines[0])))
    return "\n".join(lines)


def _cmd_check(args: argparse.Namespace) -> int:
    from symtrans.context import Context

    from symtrans.config import RunConfig

    ctx = Context.from_config(RunConfig.from_args(args), progress=args.format == "text")
    from symtrans import progress
    from symtrans.producers.common import weights

    progress.note("check", f"loading the model {args.model!r}")
    w = weights(ctx)
    if args.n > int(w.arch.max_positions):
        raise SymtransError(f"--n {args.n} exceeds the model's {w.arch.max_positions} positions")
    start = time.perf_counter()
    from symtrans.runner import run_checks

    evidence = run_checks(ctx, args.claims, progress=True)
    total = time.perf_counter() - start
    from symtrans.graph import count_records, verdict_table

    statuses = count_records(evidence)  # the one counting rule: the same verdicts as the API and report.json
    table = verdict_table(statuses)
    if args.format == "json":
        print(dumps_strict({"model": args.model, "weights_hash": w.weights_hash, "n": args.n, "seed": args.seed,
                          "dtype": args.dtype, "seconds": total,
                          "claims": [{"id": c, **t, "missing_readings": list(statuses[c].missing)}
                                     for c, t in table.items()],
                          "evidence": [e.to_dict() for e in evidence]}, indent=2, default=str))
        return 0
    print(f"symtrans check: model {args.model} ({w.arch.name}, weights {w.weights_hash[:12]}), n = {args.n}, "
          f"seed {args.seed}, {args.dtype}")
    print(_table(evidence))
    print("\nVerdicts (counted as in a report: readings, scope; only the numeric checks ran):")
    for c, t in table.items():
        readings = "".join(f"; {r}: {v}" for r, v in t["readings"].items())
        print(f"- {c}: {t['verdict']}{readings}")
    notable = [e for e in evidence if e.verdict.label in ("fails", "not-applicable", "inconclusive")]
    if notable:
        print("\nFindings (fails, not-applicable, inconclusive):")
        for e in notable:
            print(f"- {e.claim} [{e.producer}] {e.verdict.label}: {e.summary}")
            if e.violated_hypothesis:
                print(f"    violated hypothesis: {e.violated_hypothesis}")
            if e.counterexample and "reproduce" in e.counterexample:
                print(f"    reproduce: {e.counterexample['reproduce']}")
    print(f"\n{len(evidence)} evidence records from {len({e.claim for e in evidence})} claims in {total:.1f} s")
    return 0
