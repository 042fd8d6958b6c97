"""Sub-command ``relate``: is checkpoint B = g . A for an element g of the invariance group G?

``symtrans relate A B [--out FILE] [--format text|json]``: A and B are models of one architecture, named
as ``report --model`` names them (a checkpoint directory, ``default`` or ``gemma3-270m``, the bundled
models, or a hub id). Exit 0 when an element g of G with g . A = B
(within B's storage precision, tensor by tensor) is found: it is written to ``FILE`` (default
``relation.json``, with its tensors in ``FILE.safetensors``), which ``symtrans verify FILE``
re-checks from A and B. Exit 1 when no element of G explains B: the first factor, layer and tensor
where it stops, the size of the unexplained part and the feature of the architecture that breaks the
needed symmetry. Exit 2 on bad input (not a model, two architectures). See docs/relate.md.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``relate`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> a = build_parser("relate").parse_args(["relate", "default", "/tmp/b"])
    >>> a.a, a.b, a.out
    ('default', '/tmp/b', 'relation.json')
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("a", metavar="A", help="the first model: a checkpoint directory, 'default' (bundled MiniLM), "
                                          "'gemma3-270m' or a hub id, as report --model")
    p.add_argument("b", metavar="B", help="the second checkpoint, of the same architecture")
    p.add_argument("--out", metavar="FILE", default="relation.json",
                   help="where the element g goes when one is found (FILE and FILE.safetensors), for `symtrans verify`")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_relate)


def _cmd_relate(args: argparse.Namespace) -> int:
    from symtrans.group.relate import check_relation_out, relate, write_relation
    from symtrans.validate import check_model_dir, dumps_strict

    for spec, name in ((args.a, "A"), (args.b, "B")):  # as report reads --model: one line, exit 2, before torch
        check_model_dir(spec, name=name)
    check_relation_out(args.out)  # where g goes: refused before the solve, not after it
    rel = relate(args.a, args.b)
    written = write_relation(rel, args.out) if rel.related else None
    if args.format == "json":
        out = rel.to_dict()
        out["file"] = str(written) if written else None
        print(dumps_strict(out, indent=2, default=str))
    else:
        print(rel.summary())
        if written:
            print(f"wrote the element to {written} (re-check: symtrans verify {written})")
        print(f"({rel.seconds:.1f} s)")
    return 0 if rel.related else 1
