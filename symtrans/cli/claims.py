"""Sub-command ``claims``: the claim registry and proof-graph queries at the terminal."""

from __future__ import annotations

import argparse
import json

from symtrans.errors import SymtransError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``claims`` sub-command to the parser.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> args = build_parser("claims").parse_args(["claims", "thm-5.3", "--rests-on", "--depth", "1"])
    >>> args.id, args.query, args.depth
    ('thm-5.3', 'rests-on', 1)
    """
    p = sub.add_parser(name, help=help_text, description=help_text + ". Without ID: every item. With ID: "
                       "the item, or what it rests on (--rests-on), what rests on it (--impact), or which "
                       "ancestors have no positive verdict from the symbolic producers (--blocks).")
    p.add_argument("id", nargs="?", help="claim id, e.g. thm-4.2")
    q = p.add_mutually_exclusive_group()
    q.add_argument("--rests-on", dest="query", action="store_const", const="rests-on",
                   help="ancestors: what the claim rests on")
    q.add_argument("--impact", dest="query", action="store_const", const="impact",
                   help="descendants: what rests on the claim")
    q.add_argument("--blocks", dest="query", action="store_const", const="blocks",
                   help="ancestors without a positive verdict (runs the symbolic producers only)")
    p.add_argument("--depth", type=int, default=None, help="with --rests-on/--impact: at most this many edges")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_claims, query=None)


def _cmd_claims(args: argparse.Namespace) -> int:
    from symtrans.graph import ClaimGraph

    g = ClaimGraph()
    if args.query and not args.id:
        raise SymtransError(f"--{args.query} needs a claim id")
    if args.depth is not None and args.query not in ("rests-on", "impact"):
        raise SymtransError("--depth goes with --rests-on or --impact")
    if not args.id:
        rows = [g.claims[c] for c in g.claims]
        if args.format == "json":
            print(json.dumps([c.to_dict() for c in rows], indent=2, ensure_ascii=False))
        else:
            width = max(len(c.id) for c in rows)
            for c in rows:
                form = "toolkit" if c.formalisation == "toolkit" else "paper  "
                print(f"{c.id:<{width}}  {c.kind:<12} {c.paper_status.value:<16} {form}  {c.paper_ref}")
        return 0
    claim = g.claim(args.id)
    if args.query is None:
        if args.format == "json":
            data = claim.to_dict()
            data.update(rests_on=g.rests_on(claim.id), impact=g.impact(claim.id))
            print(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            print(_describe(g, claim))
        return 0
    if args.query == "blocks":
        from symtrans.context import Context
        from symtrans.runner import run_producers
        from symtrans.graph import assess

        from symtrans.progress import track

        ctx = Context(model=None)
        # blockers are ancestors only (graph.assess): the claim's own producers would decide nothing here
        evidence = {a: run_producers(a, ctx) for a in track(g.rests_on(claim.id), "claims --blocks",
                                                             unit="ancestor")}
        ids = list(assess(g, evidence)[claim.id].blocked_by)
    elif args.query == "rests-on":
        ids = g.rests_on(claim.id, args.depth)
    else:
        ids = g.impact(claim.id, args.depth)
    if args.format == "json":
        print(json.dumps({"id": claim.id, "query": args.query, "depth": args.depth, "claims": ids}, indent=2))
    elif not ids:
        print({"blocks": f"no blockers: no ancestor of {claim.id} lacks a positive verdict from the symbolic "
                         "producers",
               "rests-on": f"{claim.id} rests on nothing", "impact": f"nothing rests on {claim.id}"}[args.query])
    else:
        for i in ids:
            c = g.claims[i]
            print(f"{i}  ({c.kind}, {c.paper_ref})")
    return 0


def _describe(g, claim) -> str:  # type: ignore[no-untyped-def]
    lines = [f"{claim.id}: {claim.title}", f"  paper:         {claim.paper_ref} ({claim.section}), "
             f"status {claim.paper_status.value}", f"  kind:          {claim.kind}",
             f"  statement:     {claim.statement}", f"  latex:         {claim.latex}",
             f"  formalisation: {claim.formalisation}" + (f": {claim.formalisation_note}"
                                                          if claim.formalisation == "toolkit" else "")]
    for label, ids in (("hypotheses", claim.hypotheses), ("statement uses", claim.statement_deps),
                       ("proof uses", claim.proof_deps), ("rests on", g.rests_on(claim.id)),
                       ("impact", g.impact(claim.id)), ("formulas", claim.formulas)):
        if ids:
            lines.append(f"  {label + ':':<15}{', '.join(ids)}")
    from symtrans.runner import declared_producers  # the producer table: no producer module is imported

    prods = declared_producers(claim.id)
    lines.append(f"  producers:     {', '.join(f'{name} ({kind})' for name, kind in prods) if prods else 'none yet'}")
    for note in claim.notes:
        lines.append(f"  note:          {note}")
    return "\n".join(lines)
