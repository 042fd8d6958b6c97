"""The describe step (issue 40): summary sentences are templates beside their producers, one renderer fills them.

* every template of every converted producer module parses and renders;
* the renderer refuses a missing value, a value the template does not read and an unknown case (planted);
* in the converted modules no record's summary is written inline (an f-string or a literal): a scanner that
  finds each planted inline summary finds none there.

The sentences read exactly as before: the bundled-model report is compared record by record before and after
the change (benchmarks/compare_reports.py), which is how the conversion was checked.
"""

from __future__ import annotations

import ast
import importlib
import string
from pathlib import Path

import pytest

from symtrans.producers.templates import Summaries
from symtrans.errors import SymtransError

SOURCE = Path(__file__).resolve().parent.parent / "symtrans"
#: the producer modules whose describe steps are templates
CONVERTED = ("symtrans.producers.sec4", "symtrans.producers.sec5", "symtrans.producers.sec6", "symtrans.producers.sec7",
             "symtrans.producers.sec8", "symtrans.producers.sec9")


def _dummy(spec: str) -> object:
    """A value a format spec accepts: a float for numeric specs, else a short text."""
    return 0.5 if spec and spec[-1] in "eEfFgG%" else (3 if spec and spec[-1] in "dxXob" else "x")


@pytest.mark.parametrize("module", CONVERTED)
def test_every_template_renders(module: str) -> None:
    table = importlib.import_module(module).SUMMARIES
    assert isinstance(table, Summaries) and table.table
    for producer, cases in table.table.items():
        for case, template in cases.items():
            specs = {name: spec for _, name, spec, _ in string.Formatter().parse(template) if name}
            text = table(producer, case, **{k: _dummy(v) for k, v in specs.items()})
            assert text and "{" not in text.replace("{x", ""), (producer, case)


def test_the_renderer_refuses_what_would_drop_or_invent_a_number() -> None:
    S = Summaries({"p": {"fails": "fibre {fibre} at n = {n}", "shown": "{x:.2g}"}})
    assert S("p", "fails", fibre=[1, 2], n=4) == "fibre [1, 2] at n = 4"
    with pytest.raises(SymtransError, match="missing value 'n'"):
        S("p", "fails", fibre=1)
    with pytest.raises(SymtransError, match="not read by the template"):
        S("p", "fails", fibre=1, n=2, margin=3)
    with pytest.raises(SymtransError, match="no such template"):
        S("p", "supported", fibre=1, n=2)
    with pytest.raises(SymtransError, match="not a plain name"):
        Summaries({"p": {"x": "{row[0]}"}})
    with pytest.raises(SymtransError, match="does not parse"):
        Summaries({"p": {"x": "{unclosed"}})
    assert S("p", "shown", x=0.000123456) == f"{0.000123456:.2g}"  # the f-string's own format spec
    with pytest.raises(SymtransError, match="a row has no value"):
        S.each("p", "fails", [{"fibre": 1}])


def inline_summaries(text: str) -> list[int]:
    """Line numbers of ``record(...)`` calls whose summary (5th argument or ``summary=``) is written inline."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "record"):
            continue
        args = [kw.value for kw in node.keywords if kw.arg == "summary"] or node.args[4:5]
        candidates = []
        for a in args:
            candidates += [a.body, a.orelse] if isinstance(a, ast.IfExp) else [a]
        if any(isinstance(a, ast.JoinedStr) or (isinstance(a, ast.Constant) and isinstance(a.value, str))
               or isinstance(a, ast.BinOp) for a in candidates):
            out.append(node.lineno)
    return out


def test_the_inline_summary_scanner_finds_each_kind() -> None:
    planted = ('record(ctx, "c", "p", v, f"fibre {x}")\n'
               'record(ctx, "c", "p", v, "a gate is not positive")\n'
               'record(ctx, "c", "p", v, summary=f"{x}" if ok else S("p", "fails"))\n'
               'record(ctx, "c", "p", v, "x" + y)\n')
    assert inline_summaries(planted) == [1, 2, 3, 4]
    clean = 'record(ctx, "c", "p", v, S("p", v.value, x=1))\nrecord(ctx, "c", "p", v, s)\n'
    assert inline_summaries(clean) == []


@pytest.mark.parametrize("module", CONVERTED)
def test_converted_modules_write_no_summary_inline(module: str) -> None:
    path = SOURCE.parent / (module.replace(".", "/") + ".py")
    assert not inline_summaries(path.read_text()), f"{module}: summaries written inline (add them to SUMMARIES)"
