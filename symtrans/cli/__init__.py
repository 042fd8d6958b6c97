"""The ``symtrans`` command line.

Each sub-command lives in its own module of this package, which exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them. A module is only
imported when its command runs, so ``symtrans formula`` never imports torch.
Every user error (:class:`symtrans.errors.SymtransError`) becomes one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from symtrans import __version__
from symtrans.errors import SymtransError

__all__ = ["main", "COMMAND_MODULES", "build_parser"]

#: command name -> (module, one-line help). Modules are imported lazily.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "formulas": ("symtrans.cli.formulas", "list the registered formulas"),
    "formula": ("symtrans.cli.formulas", "evaluate one formula for an architecture"),
    "arch": ("symtrans.cli.formulas", "show a resolved architecture description"),
    "claims": ("symtrans.cli.claims", "list the paper's claims and query the proof graph"),
    "report": ("symtrans.cli.report", "write the proof-status report (md, json, html, dot)"),
    "certify": ("symtrans.cli.certify", "run exact certificates and counterexample searches"),
    "verify": ("symtrans.cli.certify", "re-check certificate files written by certify --out"),
    "check": ("symtrans.cli.check", "run the numeric checks of the paper's claims on a model"),
    "measure": ("symtrans.cli.measure", "measure ranks, alpha_h, head subspaces, W_O and LN hypotheses on a real model"),
    "group": ("symtrans.cli.group", "the invariance group G: factors, certificates, checks on real weights"),
}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SymtransError(f"{self.prog}: error: {message}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser; with ``command`` only that sub-command is loaded.

    Examples
    --------
    >>> p = build_parser("formula")
    >>> p.parse_args(["formula", "wo-fibre", "--arch", "gpt2"]).arch
    'gpt2'
    """
    parser = _Parser(prog="symtrans", description="Symbolic-plus-numeric proof assistant for "
                     "rank collapse and head-channel non-identifiability in Transformers.")
    parser.add_argument("--version", action="version", version=f"symtrans {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMAND_MODULES.items():
        if command is not None and name != command:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        mod = importlib.import_module(module)
        mod.register(sub, name, help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Examples
    --------
    >>> main(["formula", "recovery-ambiguity-per-token", "--arch", "bert-base", "--format", "json"]) == 0
    ... # doctest: +ELLIPSIS
    {...
    True
    >>> main(["formula", "nope"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.set_int_max_str_digits(0)  # exact orders such as d_ff! have thousands of digits
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser(command if command in COMMAND_MODULES else None)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        return int(args.func(args) or 0)
    except SymtransError as err:
        msg = str(err)
        if not msg.startswith("symtrans"):
            msg = f"symtrans: error: {msg}"
        print(msg.splitlines()[0] if msg else "symtrans: error", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("symtrans: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
