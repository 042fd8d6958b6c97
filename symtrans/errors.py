"""User-facing errors.

Every problem a user can cause (a bad preset name, a malformed config file, a
missing weight file) raises :class:`SymtransError`. The command line turns it
into a one-line message and exit status 2; library callers can catch it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["SymtransError", "suggest"]


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
