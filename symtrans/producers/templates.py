"""The describe step of a producer: summary sentences as templates (data) and one renderer.

A producer measures (dataclasses or rows), decides (one shared verdict rule,
:func:`symtrans.evidence.decide_verdict`) and describes: the sentence of its
record. Each producer module declares its sentences once, beside its
producers, as a :class:`Summaries` table keyed by ``(producer, case)``: the
case is the verdict the sentence describes (``"fails"``, ``"inconclusive"``,
``"supported"``, ...) or the name of an optional clause (``"quotient"``). A
template is a :meth:`str.format` string whose fields the describe step fills
with measured values; the format specs are the f-string specs
(``{err:.2g}``), so a sentence reads exactly as the f-string it replaces.

The renderer refuses a missing field, a field the template does not use and an
unknown ``(producer, case)``, so a sentence cannot silently drop a number.

Raises
------
SymtransError
    For a template that does not parse, an unknown ``(producer, case)``, a
    missing or an unused value.

See Also
--------
symtrans.evidence.decide_verdict : the decide step every producer shares
symtrans.producers.common.record : the record the sentence goes into

Examples
--------
>>> S = Summaries({"fibre-wo": {"supported": "fibre {fibre} at n = {n}",
...                             "fails": "fibre {fibre} != {paper} at n = {n}"}})
>>> S("fibre-wo", "fails", fibre=[3, 4], paper=6, n=2)
'fibre [3, 4] != 6 at n = 2'
>>> S("fibre-wo", "supported", fibre=1)
Traceback (most recent call last):
...
symtrans.errors.SymtransError: summary fibre-wo/supported: missing value 'n' (the template reads fibre, n)
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from symtrans.errors import SymtransError

__all__ = ["Summaries"]

_FORMATTER = string.Formatter()


def _fields(template: str, where: str) -> tuple[str, ...]:
    """The names a template reads, in order, without repeats (a field is a plain name: no index, no attribute)."""
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as e:
        raise SymtransError(f"summary {where}: the template does not parse ({e}): {template!r}") from None
    out: list[str] = []
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise SymtransError(f"summary {where}: field {{{name}}} is not a plain name (compute the value in the "
                                f"describe step): {template!r}")
        if spec and "{" in spec:
            raise SymtransError(f"summary {where}: nested fields in a format spec are not supported: {template!r}")
        if name not in out:
            out.append(name)
    return tuple(out)


class Summaries:
    """One module's summary templates, keyed by producer and case, and the renderer.

    ``table`` maps a producer's name to its cases, each a :meth:`str.format`
    template. Every template is parsed when the table is built.

    Examples
    --------
    >>> S = Summaries({"p": {"supported": "rank {rank} at {sd} precision"}})
    >>> S("p", "supported", rank=384, sd="float32")
    'rank 384 at float32 precision'
    >>> S.cases("p")
    ('supported',)
    """

    def __init__(self, table: Mapping[str, Mapping[str, str]]) -> None:
        self.table = {p: dict(cases) for p, cases in table.items()}
        self.fields = {(p, c): _fields(t, f"{p}/{c}") for p, cases in self.table.items() for c, t in cases.items()}

    def cases(self, producer: str) -> tuple[str, ...]:
        """The cases ``producer`` has sentences for."""
        return tuple(self.table.get(producer, ()))

    def __call__(self, producer: str, case: str, **values: Any) -> str:
        """The sentence of ``(producer, case)`` with ``values`` filled in."""
        if (producer, case) not in self.fields:
            known = ", ".join(self.cases(producer)) or "none"
            raise SymtransError(f"summary {producer}/{case}: no such template (cases of {producer}: {known})")
        needed = self.fields[producer, case]
        missing = [k for k in needed if k not in values]
        if missing:
            raise SymtransError(f"summary {producer}/{case}: missing value {missing[0]!r} (the template reads "
                                f"{', '.join(needed)})")
        unused = sorted(set(values) - set(needed))
        if unused:
            raise SymtransError(f"summary {producer}/{case}: value(s) {', '.join(unused)} not read by the template "
                                f"(it reads {', '.join(needed)})")
        return self.table[producer][case].format(**values)

    def each(self, producer: str, case: str, rows: Any, sep: str = "; ") -> str:
        """The sentence of ``(producer, case)`` once per row (a mapping: the fields it reads), joined by ``sep``.

        Examples
        --------
        >>> S = Summaries({"p": {"row": "{name}: {fibre}"}})
        >>> S.each("p", "row", [{"name": "a", "fibre": 1, "other": 0}, {"name": "b", "fibre": 2}])
        'a: 1; b: 2'
        """
        if (producer, case) not in self.fields:
            return self(producer, case)  # the unknown-template error
        needed = self.fields[producer, case]
        out = []
        for row in rows:
            missing = [k for k in needed if k not in row]
            if missing:
                raise SymtransError(f"summary {producer}/{case}: a row has no value {missing[0]!r}")
            out.append(self(producer, case, **{k: row[k] for k in needed}))
        return sep.join(out)
