"""Sub-command ``canonical``: a gauge-fixed copy of a checkpoint modulo G, and the orbit distance to another.

``symtrans canonical MODEL --out DIR [--distance OTHER]`` writes the canonical form of MODEL (same function,
one representative per orbit of G; :mod:`symtrans.group.canonical`) as a checkpoint directory and prints
what stays ambiguous (ties, unfixed factors). ``--distance OTHER`` also prints the relative Frobenius distance
of the two canonical forms, an upper bound of the distance between the orbits, per tensor and in all, and what
OTHER's form leaves ambiguous.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``canonical`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("canonical").parse_args(["canonical", "default", "--out", "/tmp/c"]).out
    '/tmp/c'
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("model", metavar="MODEL",
                   help="a checkpoint directory, 'default' (bundled MiniLM), 'gemma3-270m' or a hub id, as report --model")
    p.add_argument("--out", metavar="DIR", required=True, help="where the canonical checkpoint is written")
    p.add_argument("--distance", metavar="OTHER", help="also print the orbit distance to this checkpoint")
    p.set_defaults(func=_cmd_canonical)


def _cmd_canonical(args: argparse.Namespace) -> int:
    from symtrans.validate import BUNDLED_MODELS, check_model_dir

    for spec, name in ((args.model, "MODEL"), (args.distance, "--distance")):  # as report reads --model
        if spec is not None:
            check_model_dir(spec, name=name)
    from symtrans.group.canonical import canonical, orbit_distance
    from symtrans.numeric.save import check_checkpoint_out, save_weights
    from symtrans.numeric.weights import _resolve_directory

    local = args.model in BUNDLED_MODELS or Path(args.model).exists()  # a hub id: resolved (fetched) by the load
    check_checkpoint_out(args.out, _resolve_directory(args.model) if local else None)  # before the solve
    model, other = args.model, args.distance
    if other is not None:  # both read once, and two architectures refused before anything is solved or written
        from symtrans.group.relate import _load, _same_shape

        model, other = _load(model), _load(other)
        _same_shape(model, other)
    c = canonical(model)
    save_weights(c.weights, args.out)
    print(f"wrote the canonical form of {args.model} to {args.out} (gauge fixed: "
          + ", ".join(dict.fromkeys(s["factor"] for s in c.steps)) + ")")
    for line in c.ambiguities:
        print(f"  ambiguous: {line}")
    if c.outside:
        print(f"  copied unchanged: {', '.join(c.outside)}: outside the function symtrans models, so not moved with "
              "the rest; where the form moves the last hidden state (a residual permutation), their output is not "
              f"{args.model}'s")
    if args.distance:
        d = orbit_distance(model, other)
        worst = sorted(d["per_tensor"], key=lambda r: -r["distance"])[:5]
        print(f"orbit distance {d['total']:.3g} (relative Frobenius of the canonical forms: {d['absolute']:.3g} "
              f"absolute over their size {d['scale']:.3g}; {d['bound']})")
        if d["paired"]:
            print("  paired with the other form's nearest: " + "; ".join(d["paired"]))
        # what the compared forms leave free: OTHER's (never printed above), and MODEL's where the distance's tie
        # (the coarser storage's) differs from the written form's
        for side, name in (("a", args.model), ("b", args.distance)):
            if side == "b" or d["ambiguities"]["a"] != c.ambiguities:
                for line in d["ambiguities"][side]:
                    print(f"  ambiguous in {name}'s form: {line}")
        if d["outside"]:
            print(f"  not compared: {', '.join(d['outside'])} (outside the modelled function)")
        for r in worst:
            where = f" layer {r['layer']}" if r["layer"] is not None else ""
            print(f"  {r['tensor']}{where}: {r['distance']:.3g}")
    return 0
