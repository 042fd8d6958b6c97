"""Sub-command ``certify``: run the exact certificates and counterexample searches.

``symtrans certify [ID ...] [--model default|none|DIR] [--n N] [--seed S] [--format text|json]``.
The JSON has the shape of ``report.json``: ``{"claims": [{"id", "verdict", "evidence": [...]}]}``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from symtrans.errors import SymtransError
from symtrans.evidence import DEFAULT_N

__all__ = ["register", "certify_claims"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``certify`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("certify").parse_args(["certify", "prop-5.1", "--model", "none"]).ids
    ['prop-5.1']
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("ids", nargs="*", metavar="ID", help="claim ids (default: every claim with a certificate)")
    p.add_argument("--model", default="default",
                   help="model for certificates on real weights ('default' = bundled MiniLM; 'none' to skip them)")
    p.add_argument("--n", type=int, default=DEFAULT_N, help="sequence length for real-weight certificates (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random witnesses (default 0)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_certify)


def certify_claims(ids: list[str] | None, *, model: str | None = "default", n: int = 128,
                   seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Run the certificates for ``ids`` (all when empty); return the report-shaped dict.

    Examples
    --------
    >>> out = certify_claims(["prop-5.1"], model=None)
    >>> out["claims"][0]["id"], out["claims"][0]["verdict"]
    ('prop-5.1', 'certified')
    >>> certify_claims(["prop-51"], model=None)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim with certificates 'prop-51'; did you mean 'prop-5.1' or ...?
    """
    from symtrans.certify.producers import run_certificates
    from symtrans.errors import suggest
    from symtrans.evidence import PRODUCERS, Context, combine_verdicts, producers_for

    if n < 1:
        raise SymtransError("--n must be a positive integer")
    producers_for("")
    known = sorted(c for c, ps in PRODUCERS.items() if any(p.func.__module__ == "symtrans.certify.producers"
                                                           for p in ps))
    for cid in ids or []:
        if cid not in known:
            raise SymtransError(suggest(cid, known, "claim with certificates"))
    from symtrans.progress import Progress

    ctx = Context(model=model, n=n, seed=seed)
    with Progress(None, "certify", unit="certificate", enabled=progress):
        results = run_certificates(list(ids) if ids else None, ctx)
    return {"claims": [{"id": cid, "verdict": combine_verdicts(e.verdict for e in evs).value,
                        "evidence": [e.to_dict() for e in evs]} for cid, evs in results.items()]}


def _cmd_certify(args: argparse.Namespace) -> int:
    model = None if args.model.lower() == "none" else args.model
    out = certify_claims(args.ids, model=model, n=args.n, seed=args.seed, progress=True)
    if args.format == "json":
        print(json.dumps(out, indent=2, default=str))
        return 0
    for claim in out["claims"]:
        print(f"{claim['id']}: {claim['verdict']}")
        for ev in claim["evidence"]:
            secs = f" ({ev['seconds']:.2f} s)" if ev.get("seconds") is not None else ""
            print(f"  [{ev['verdict']}] {ev['producer']}{secs}: {ev['summary']}")
            ce = ev.get("counterexample")
            if ce and "X" in ce:
                print(f"      counterexample X = {ce['X']}")
    return 0
