"""Sub-commands ``formulas``, ``formula`` and ``arch``: the formula registry at the terminal."""

from __future__ import annotations

import argparse
import json
import re

from symtrans.errors import SymtransError
from symtrans.symbols import AUX_NAMES, SIZE_NAMES, SYMBOLS

__all__ = ["register", "parse_sets", "add_size_flags", "sizes_from_args"]

_SET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([0-9]+)$")


def parse_sets(items: list[str] | None) -> dict[str, int]:
    """Parse ``--set NAME=INT`` items against the whitelist of symbol names.

    Examples
    --------
    >>> parse_sets(["n=128", "H=16"])
    {'n': 128, 'H': 16}
    >>> parse_sets(["n=0"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --set n=0: the value must be a positive integer
    >>> parse_sets(["dk=4"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --set dk=4: unknown symbol 'dk'; did you mean 'd_k'?
    """
    from symtrans.errors import suggest

    out: dict[str, int] = {}
    for item in items or []:
        m = _SET.match(item.strip())
        if not m:
            name = item.split("=", 1)[0].strip()
            if name in SYMBOLS:
                raise SymtransError(f"--set {item}: the value must be a positive integer")
            raise SymtransError(f"--set {item}: expected NAME=INTEGER with NAME one of "
                                + ", ".join(SYMBOLS))
        if len(m.group(2).lstrip("0")) > 16:  # before int(): a million digits would take seconds to convert
            raise SymtransError(f"--set {item[:40]}...: more than 16 digits (sizes above 10^15 are refused)")
        name, value = m.group(1), int(m.group(2))
        if name not in SYMBOLS:
            raise SymtransError(f"--set {item}: " + suggest(name, SYMBOLS, "symbol"))
        if value < 1:
            raise SymtransError(f"--set {item}: the value must be a positive integer")
        if name in out:
            raise SymtransError(f"--set {item}: {name} is set twice")
        out[name] = value
    return out


def add_size_flags(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """Add ``--n``, ``--L``, ``--d-model`` ... (one per symbol name): the same sizes as ``--set NAME=INT``.

    Examples
    --------
    >>> from symtrans.symbols import SIZE_NAMES
    >>> p = argparse.ArgumentParser(); add_size_flags(p, SIZE_NAMES)
    >>> ns = p.parse_args(["--n", "128", "--d-model", "384"])
    >>> ns.size_n, ns.size_d_model
    ('128', '384')
    """
    group = p.add_argument_group("sizes (the same as --set NAME=INT)")
    for sym in names:
        flags = dict.fromkeys([f"--{sym.replace('_', '-')}", f"--{sym}"])  # --d-model and --d_model
        group.add_argument(*flags, dest=f"size_{sym}", metavar="INT", default=None, help=f"set {sym}")


def sizes_from_args(args: argparse.Namespace) -> dict[str, int]:
    """Merge ``--set NAME=INT`` items and the size flags into one dict; a size given twice is an error.

    Examples
    --------
    >>> sizes_from_args(argparse.Namespace(set=["H=16"], size_n="128", size_H=None))
    {'H': 16, 'n': 128}
    >>> sizes_from_args(argparse.Namespace(set=["n=64"], size_n="128"))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --n 128: n is also given by --set n=64
    >>> sizes_from_args(argparse.Namespace(set=None, size_n="0"))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --n 0: the value must be a positive integer
    """
    out = parse_sets(getattr(args, "set", None))
    for key, raw in vars(args).items():
        if not key.startswith("size_") or raw is None:
            continue
        sym = key[len("size_"):]
        flag = f"--{sym.replace('_', '-')}"
        if not re.fullmatch(r"[0-9]+", str(raw).strip()) or int(raw) < 1:
            raise SymtransError(f"{flag} {raw}: the value must be a positive integer")
        if sym in out:
            raise SymtransError(f"{flag} {raw}: {sym} is also given by --set {sym}={out[sym]}")
        out[sym] = int(raw)
    return out


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add one of this module's sub-commands to the parser.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("arch").parse_args(["arch", "gpt2"]).format
    'text'
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    if name == "formulas":
        p.add_argument("--format", choices=("text", "json"), default="text")
        p.set_defaults(func=_cmd_formulas)
    elif name == "formula":
        p.add_argument("name", help="formula name (see `symtrans formulas`)")
        p.add_argument("--arch", default="bert-base", help="preset name or path to a config.json")
        p.add_argument("--set", action="append", metavar="NAME=INT",
                       help="override a size or an auxiliary rank, e.g. --set n=128")
        p.add_argument("--format", choices=("text", "latex", "json"), default="text")
        add_size_flags(p, SIZE_NAMES + AUX_NAMES)
        p.set_defaults(func=_cmd_formula)
    else:
        p.add_argument("spec", help="preset name or path to a config.json")
        p.add_argument("--set", action="append", metavar="NAME=INT", help="override a size")
        p.add_argument("--format", choices=("text", "json"), default="text")
        add_size_flags(p, SIZE_NAMES)
        p.set_defaults(func=_cmd_arch)


def _cmd_formulas(args: argparse.Namespace) -> int:
    from symtrans.formulas import FORMULAS

    if args.format == "json":
        print(json.dumps([{"name": f.name, "kind": f.kind, "summary": f.summary,
                           "provenance": f.provenance.to_dict()} for f in FORMULAS.values()], indent=2))
        return 0
    width = max(len(n) for n in FORMULAS)
    for f in FORMULAS.values():
        origin = "paper  " if f.provenance.origin == "paper" else "toolkit"
        print(f"{f.name:<{width}}  {origin}  {f.summary}")
    return 0


def _cmd_formula(args: argparse.Namespace) -> int:
    from symtrans.formulas import formula

    value = formula(args.name, arch=args.arch, **sizes_from_args(args))
    if args.format == "json":
        print(json.dumps(value.to_json(), indent=2))
    elif args.format == "latex":
        print(value.latex())
    else:
        print(value.text())
    return 0


def _cmd_arch(args: argparse.Namespace) -> int:
    from symtrans.arch import get_arch
    from symtrans.symbols import AUX_NAMES

    sizes = sizes_from_args(args)
    aux = [k for k in sizes if k in AUX_NAMES]
    if aux:
        raise SymtransError(f"--set {aux[0]}: not a size of the architecture (use it with `symtrans formula`)")
    arch = get_arch(args.spec, **sizes)
    data = arch.to_dict()
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return 0
    width = max(len(k) for k in data)
    for key, value in data.items():
        print(f"{key:<{width}}  {value}")
    return 0
