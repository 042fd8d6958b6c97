"""Every generated block of README.md and docs/*.md is current: one generator (docs/gen.py), one marker style.

The blocks that need the proof-status report of the bundled model take it from the session fixture
``example_report`` (tests/conftest.py: the same report as ``symtrans report --model default``); the
others are derived from the code at once. Beside the generator's own check, the tables are read back
and compared with the registry and the report by code that does not use the generator.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest

from symtrans.formulas import FORMULAS, formula

ROOT = Path(__file__).resolve().parents[1]
REPORT_BLOCKS = {"claims-table", "check-table", "disagreements", "formalisations", "report-excerpt"}


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "docs" / "gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_gen"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def block_text(gen: ModuleType, path: Path, name: str) -> str:
    (b,) = [b for b in gen.blocks(path.read_text(encoding="utf-8"), path) if b.name == name]
    return b.body


def kernel_or_skip() -> None:
    """The committed blocks show the kernel-checked results (Coq installed: .ci/run installs it). Without Coq the
    report counts them as supported and the blocks differ: skipped, except in CI, where that is a failure."""
    import os

    from symtrans.certify.coq import coq_tools

    if coq_tools() is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("CI run without Coq: .ci/run installs coq, libcoq-mathcomp-algebra, libcoq-mathcomp-field")
        pytest.skip("Coq is not installed (apt-get install coq libcoq-mathcomp-algebra libcoq-mathcomp-field): "
                    "the generated blocks show the kernel-checked results")


# ----------------------------------------------------------------------------- the check itself
def test_every_block_derived_from_the_code_is_current(gen):
    kernel_or_skip()
    ctx = gen.Context(allow_report=False)
    assert gen.check(ctx) == [], "stale generated blocks: run python docs/gen.py --write"


def test_every_block_derived_from_the_report_is_current(gen, example_report):
    kernel_or_skip()
    _, _, path = example_report
    assert gen.check(gen.Context(report=path), names=REPORT_BLOCKS) == [], \
        "stale report blocks: run python docs/gen.py --write"


def test_every_generator_has_a_block_and_every_old_block_moved(gen):
    used = {b.name for p in gen.documents() for b in gen.blocks(p.read_text(encoding="utf-8"), p)}
    assert used == set(gen.GENERATORS)
    for path in gen.documents():  # the markers of the five mechanisms this one replaced are gone
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"<!-- (formula-table|claims-table):(start|end)|gen_claims_table|gen_formula_table", text), path


def test_a_stale_block_fails_the_check(gen):
    ctx = gen.Context(allow_report=False)
    path = ROOT / "docs" / "formulas.md"
    text = path.read_text(encoding="utf-8")
    assert "| 360,448 |" in block_text(gen, path, "formula-table")
    edited = text.replace("| 360,448 |", "| 360,449 |", 1)
    assert gen.check(ctx, [path], texts={path: edited}) == ["docs/formulas.md: gen:formula-table"]
    # a console example whose printed output no longer matches the command's
    edited = text.replace("value:         360448", "value:         360449", 1)
    assert gen.check(ctx, [path], texts={path: edited}) == [
        "docs/formulas.md: gen:console formula recovery-ambiguity --arch bert-base"]
    # --write restores exactly the committed text
    assert gen.regenerate(edited, path, ctx)[0] == text


def test_a_stale_report_block_fails_the_check(gen, example_report):
    kernel_or_skip()
    _, doc, path = example_report
    page = ROOT / "docs" / "claims-and-verdicts.md"
    text = page.read_text(encoding="utf-8")
    claim = next(c for c in doc["claims"] if c["id"] == "prop-5.1")
    row = next(line for line in text.splitlines() if line.startswith("| `prop-5.1` |"))
    edited = text.replace(row, row.replace(f"| {claim['verdict']} |", "| fails |", 1))
    assert edited != text
    assert gen.check(gen.Context(report=path), [page], texts={page: edited}) == [
        "docs/claims-and-verdicts.md: gen:claims-table"]


def test_a_stale_fact_in_the_readme_prose_fails_the_check(gen):
    ctx = gen.Context(allow_report=False)
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert [f for f in gen.FACTS if f.path == "README.md" and not f.found(text)] == []
    from symtrans.formulas import formula

    value = int(formula("recovery-ambiguity", arch="bert-base", n=512).value)  # n (H-1) d_k = 512 * 11 * 64
    assert value == 512 * 11 * 64 and f"{value:,} for" in text
    edited = text.replace(f"{value:,} for", f"{value + 1:,} for", 1)
    (label,) = gen.check(ctx, [readme], texts={readme: edited})
    assert label.startswith("README.md: fact '{:,} for BertBase at n = 512'")
    # the FLOP-share fact: 24/37 at n = 128 is the only share rounding to 64.8% near it; 0.6 at n = 512
    edited = text.replace("(60.0% at n = 512", "(60.1% at n = 512", 1)
    assert edited != text and len(gen.check(ctx, [readme], texts={readme: edited})) == 1


def test_the_readme_counterexample_is_one_by_direct_computation():
    """The README's X, read off its prose, has affine rank 1 and LN(X) (eps = 0, no affine) affine rank 2 (SymPy)."""
    import ast

    import sympy as sp

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = re.search(r"X = (\[\[[-0-9,\[\]]+\]\]) has affine rank (\d+), LN\(X\) has affine rank (\d+)", readme)
    assert m, "the README no longer states the counterexample"
    X = sp.Matrix(ast.literal_eval(m.group(1)))

    def arank(M: sp.Matrix) -> int:
        return (M - sp.ones(M.rows, 1) * M[0, :]).rank()

    rows = []
    for i in range(X.rows):
        r = X[i, :] - sp.ones(1, X.cols) * sum(X[i, :]) / X.cols
        rows.append(r / sp.sqrt(sum(v**2 for v in r) / X.cols))
    assert (arank(X), arank(sp.Matrix.vstack(*rows))) == (int(m.group(2)), int(m.group(3))) == (1, 2)


def test_a_timed_console_block_is_compared_up_to_its_durations_only(gen):
    timed = gen.GENERATORS["console-timed"]
    page = (ROOT / "docs" / "certificates.md").read_text(encoding="utf-8")
    (b,) = [b for b in gen.blocks(page, ROOT / "docs" / "certificates.md") if b.name == "console-timed"]
    old = page[b.start:b.end]
    assert gen.DURATION.search(old), "the block prints no duration any more: use gen:console"
    assert timed.same(old, gen.DURATION.sub("(12.34 s)", old))
    assert not timed.same(old, old.replace(": certified", ": supported", 1))  # a verdict is compared
    assert not timed.same(old, old.replace(" s)", " ms)", 1))  # only a duration's digits are masked


def test_a_measured_block_compares_what_is_stable(gen):
    """A measured block (docs/decoders.md's rank profile) passes a rounding-level wiggle of its decimals and
    fails on a real change: a decided rank, a decimal off by a factor of two, a sign."""
    path = ROOT / "docs" / "decoders.md"
    page = path.read_text(encoding="utf-8")
    (b,) = [b for b in gen.blocks(page, path) if b.name == "checkpoint-section"]
    old, section = page[b.start:b.end], gen.GENERATORS["checkpoint-section"]
    rows = [line for line in old.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]
    state, rank, margin = rows[1].split()[:3]
    wiggle = rows[1].replace(f" {margin} ", f" {float(margin) * 1.1:.1f} ", 1)
    assert wiggle != rows[1] and section.same(old, old.replace(rows[1], wiggle))
    assert not section.same(old, old.replace(rows[1], rows[1].replace(f" {rank} ", f" {int(rank) - 1} ", 1)))
    assert not section.same(old, old.replace(rows[1], rows[1].replace(f" {margin} ", f" {float(margin) * 2:.1f} ", 1)))
    assert not section.same(old, old.replace(rows[1], rows[1].replace(f" {margin} ", f" -{margin} ", 1)))
    assert not gen.GENERATORS["console"].same(old, old.replace(rows[1], wiggle))  # exact blocks stay exact


def test_the_api_session_in_api_md_is_real_output():
    """docs/api.md's session, run as a doctest up to the report (which takes minutes and prints no output there)."""
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    session = page[page.index("A session (real output"):]
    session = session[session.index("```python\n") + 10:session.index("```\n", session.index("```python\n") + 10)]
    session = session[:session.index(">>> r = symtrans.proof_report(")]
    test = doctest.DocTestParser().get_doctest(session, {}, "docs/api.md session", "docs/api.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(out)
    assert len(test.examples) >= 8


def test_console_head_is_the_commands_first_lines(gen):
    head = gen.console_head(None, "3 claims").splitlines()
    full = gen.command_output("claims").splitlines()
    assert head[:2] == ["```console", "$ symtrans claims"] and head[2:5] == full[:3] and head[5:] == ["...", "```"]
    with pytest.raises(ValueError, match="line count"):
        gen.console_head(None, "claims")


def test_the_command_line_check_and_write(gen, tmp_path, monkeypatch, capsys):
    page = tmp_path / "formulas.md"
    original = (ROOT / "docs" / "formulas.md").read_text(encoding="utf-8")
    page.write_text(original.replace("| 360,448 |", "| 1 |", 1), encoding="utf-8")
    monkeypatch.setattr(gen, "documents", lambda root=ROOT: [page])
    assert gen.main(["--check", "--no-report"]) == 1
    assert "stale: " in capsys.readouterr().out
    assert gen.main(["--write", "--no-report"]) == 0
    assert page.read_text(encoding="utf-8") == original
    assert gen.main(["--check", "--no-report"]) == 0


def test_malformed_markers_are_refused(gen, tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match="has no matching"):
        gen.blocks("<!-- gen:formula-table -->\nx\n<!-- /gen:console -->\n")
    with pytest.raises(ValueError, match="unknown generator gen:nope"):
        gen.blocks("<!-- gen:nope -->\nx\n<!-- /gen:nope -->\n")
    with pytest.raises(ValueError, match="needs the command's arguments"):
        gen.render(gen.blocks("<!-- gen:console -->\n<!-- /gen:console -->\n")[0], gen.Context(allow_report=False))
    page = tmp_path / "bad.md"
    page.write_text("<!-- gen:formula-table -->\nno end\n", encoding="utf-8")
    monkeypatch.setattr(gen, "documents", lambda root=ROOT: [page])
    assert gen.main(["--check", "--no-report"]) == 2
    assert "has no matching" in capsys.readouterr().err


def test_the_generator_doctests(gen):
    result = doctest.testmod(gen, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0


# ----------------------------------------------------------------------------- the content, read back independently
def decimal_digits(value: int) -> int:
    """len(str(value)) with Python's 4300-digit conversion guard lifted for the call."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return len(str(value))
    finally:
        sys.set_int_max_str_digits(old)


def table_rows(block: str) -> dict[str, list[str]]:
    rows = {}
    for line in block.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_formula_table_lists_every_formula_with_its_values(gen):
    rows = table_rows(block_text(gen, ROOT / "docs" / "formulas.md", "formula-table"))
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


def test_claim_table_rows_carry_the_reports_verdicts(gen, example_report):
    _, doc, _ = example_report
    block = block_text(gen, ROOT / "docs" / "claims-and-verdicts.md", "claims-table")
    for c in doc["claims"]:
        row = next(line for line in block.splitlines() if line.startswith(f"| `{c['id']}` |"))
        assert f" {c['verdict']} |" in row.replace("**", "") and f" {c['standing']} |" in row
        assert ("**" in row) == bool(c["disagreement"])


def test_check_table_rows_are_the_reports_numeric_records(gen, example_report):
    _, doc, _ = example_report
    block = block_text(gen, ROOT / "docs" / "numeric-checks.md", "check-table")
    lines = block.splitlines()  # the fence, the model line, the header, its rule, then one row a record
    assert lines[3].startswith("-----")
    rows = [line.split() for line in lines[4:] if line and not line.startswith("```")]
    records = [e for c in doc["claims"] for e in c["evidence"] if e["kind"] == "numeric" and not e.get("stale")]
    assert [(r[0], r[1], r[2]) for r in rows] == [(e["claim"], e["producer"], e["verdict"]) for e in records]
    assert " s " not in block.splitlines()[2]  # the run-dependent seconds column is left out


def test_readme_disagreements_are_the_reports(gen, example_report):
    _, doc, _ = example_report
    rows = table_rows(block_text(gen, ROOT / "README.md", "disagreements"))
    assert list(rows) == [d["id"] for d in doc["summary"]["disagreements"]]
    for d in doc["summary"]["disagreements"]:
        assert rows[d["id"]][2] == d["verdict"]


def test_report_excerpt_is_in_the_fresh_report(gen, example_report):
    _, _, path = example_report
    excerpt = block_text(gen, ROOT / "docs" / "report.md", "report-excerpt")
    section = excerpt.split("````markdown\n", 1)[1].rsplit("````", 1)[0]
    assert section.startswith("## Where the toolkit and the paper disagree\n")
    assert section in (path.parent / "report.md").read_text(encoding="utf-8")


def test_tensor_table_has_every_tensor_the_loader_names(gen):
    rows = table_rows(block_text(gen, ROOT / "docs" / "api.md", "tensor-table"))
    names = {n for key in rows for n in re.split(r"[,\s]+", key) if n}
    assert {"W_Q", "W_K", "W_V", "W_O", "b_O", "W_gate", "W_in", "W_out", "word", "pos", "final_ln"} <= names


def test_family_table_is_the_registrations(gen):
    from symtrans.producers.common import family_table

    assert block_text(gen, ROOT / "docs" / "decoders.md", "family-table").rstrip("\n") == "\n".join(family_table())


# ----------------------------------------------------------------------------- the README as a front door
def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert not re.search(r"\b\d{3,} tests\b|\b\d+(\.\d+)? s\b", readme), "test counts and timings go to benchmarks/RESULTS.md"
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+|[A-Z]+\.md)", readme):
        assert (ROOT / link).is_file(), link


def test_readme_test_command_is_the_one_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(python -m pip install [^\n]+)\n```", readme)
    assert commands[:2] == [
        'python -m pip install torch==2.13.0 -e ".[models]" && symtrans report --model default --out symtrans-report',
        'python -m pip install torch==2.13.0 -e ".[dev]" && python -m pytest -q -n auto']
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_docs_links_resolve():
    for page in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).exists(), f"{page.name}: {link}"
