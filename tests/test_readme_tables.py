"""The README's Formulas section matches the registry and the real command output."""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest

from symtrans.formulas import FORMULAS, formula

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_formula_table", ROOT / "docs" / "gen_formula_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def table_rows(block: str) -> dict[str, list[str]]:
    rows = {}
    for line in block.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def decimal_digits(value: int) -> int:
    """len(str(value)) with Python's 4300-digit conversion guard lifted for the call."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return len(str(value))
    finally:
        sys.set_int_max_str_digits(old)


def test_formula_table_is_current(gen: ModuleType, readme: str) -> None:
    assert gen.readme_block(readme) == gen.expected_block(), \
        "README formula table is stale: run python docs/gen_formula_table.py --write"


def test_formula_table_lists_every_formula_with_its_values(gen: ModuleType, readme: str) -> None:
    rows = table_rows(gen.readme_block(readme))
    assert list(rows) == list(FORMULAS)
    for name, (summary, provenance, bert, minilm) in rows.items():
        assert summary == FORMULAS[name].summary
        assert provenance.split(":")[0].split()[0] == FORMULAS[name].provenance.origin
        for cell, preset in ((bert, "bert-base"), (minilm, "minilm-l6-h384")):
            value = formula(name, arch=preset).value
            if "digit integer" in cell:  # huge orders: compare the digit count
                assert int(cell.split("-")[0].replace(",", "")) == decimal_digits(int(value))
            elif "/" in cell:
                p, q = cell.split()[0].split("/")
                assert Fraction(int(p), int(q)) == Fraction(int(value.p), int(value.q))
            else:
                assert int(cell.replace(",", "")) == value


def test_console_examples_show_real_output(gen: ModuleType, readme: str) -> None:
    start, end = gen.section_bounds(readme)
    examples = list(gen.CONSOLE.finditer(readme[start:end]))
    assert len(examples) >= 4
    for m in examples:
        assert m["out"].rstrip() == gen.command_output(m["args"]).rstrip(), f"symtrans {m['args']}"


def test_other_sections_are_untouched(readme: str) -> None:
    assert readme.index("## The two commands") < readme.index("## Formulas")
