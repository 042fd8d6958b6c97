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
from typing import Any

from symtrans import __version__
from symtrans.errors import SymtransError

__all__ = ["main", "run", "COMMAND_MODULES", "build_parser"]

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


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless it is unset (None/False) or the text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        said = "(default" in text or "%(default)" in text
        if default is None or default is False or default == argparse.SUPPRESS or said or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit status 2, and whose help shows defaults."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        if len(message) > 300:  # an invalid value can be megabytes long; the message stays one short line
            message = message[:297] + "..."
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
        sp = sub.choices[name]
        if not any("--quiet" in a.option_strings for a in sp._actions):
            sp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


#: commands (and the options that make them slow) that announce themselves and show progress
SLOW: dict[str, tuple[str, ...]] = {"report": (), "check": (), "certify": (), "measure": (),
                                    "group": ("--certify", "--verify", "--complete")}


def _announce(command: str | None, argv: list[str]) -> None:
    """Print a first progress line for a slow command before its heavy imports (``--quiet`` silences it)."""
    if command not in SLOW or "--quiet" in argv or "-h" in argv or "--help" in argv:
        return
    triggers = SLOW[command]
    if triggers and not any(a in argv for a in triggers):
        return
    from symtrans import progress

    progress.announce(command, "starting")


def run(argv: Sequence[str] | None = None) -> int:
    """The ``symtrans`` command and ``python -m symtrans``: :func:`main`, then a process exit without the last GC pass.

    Everything :func:`main` made stays alive until the interpreter exits;
    ``gc.freeze()`` moves it out of the collector's reach, so the final
    collections do not traverse millions of objects (SymPy's caches, the
    report's records): measured 0.8 s down to 0.2 s after a BERT-base report.
    Finalizers and ``atexit`` handlers still run. Only for a process that is
    about to exit: a frozen object is never collected.

    Examples
    --------
    >>> import gc
    >>> run(["--version"])  # doctest: +ELLIPSIS
    symtrans ...
    0
    >>> gc.unfreeze()  # this process goes on (the command's process would exit here)
    """
    import gc

    status = main(argv)
    gc.freeze()
    return status


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
    if argv == ["--version"]:  # at once: nothing else is imported
        print(f"symtrans {__version__}")
        return 0
    command = next((a for a in argv if not a.startswith("-")), None)
    stdout = sys.stdout
    sys.stdout = _TerminalSafe(stdout)  # names from config files cannot drive the terminal
    try:
        from symtrans import progress

        progress.configure(quiet="--quiet" in argv)
        parser = build_parser(command if command in COMMAND_MODULES else None)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        from symtrans.validate import check_args

        check_args(args)  # every argument, before heavy imports or computation
        _announce(command, argv)  # after validation: a refused command prints its one error line only
        # only now: while parsing, Python's default limit keeps int() of a huge argument cheap
        sys.set_int_max_str_digits(0)  # exact orders such as d_ff! have thousands of digits (capped in validate)
        progress.configure(quiet=bool(getattr(args, "quiet", False)))
        return int(args.func(args) or 0)
    except SymtransError as err:
        from symtrans import progress
        from symtrans.validate import terminal_safe

        progress.finish(discard=True)
        msg = str(err)
        if not msg.startswith("symtrans"):
            msg = f"symtrans: error: {msg}"
        line = msg.splitlines()[0] if msg else "symtrans: error"
        print(terminal_safe(line[:2000]), file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:  # an optional dependency (torch, the bundled model, matplotlib)
        from symtrans.errors import missing_extra

        why = missing_extra(err)
        if why is None:
            raise
        from symtrans import progress

        progress.finish(discard=True)
        print(f"symtrans: error: {command or 'this command'} {why}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("symtrans: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        from symtrans import progress

        progress.finish()
        sys.stdout = stdout


class _TerminalSafe:
    """A text stream wrapper escaping control characters (ANSI escapes, C1, bidi overrides) in writes."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        from symtrans.validate import terminal_safe

        self._stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
