"""The layers of docs/architecture.md hold: the import contract, and claim queries that import no producer or torch.

``lint-imports`` (import-linter) checks the ``[tool.importlinter]`` contract of
pyproject.toml; it runs here so it runs with the test suite and in ``.ci/run``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports() -> str:
    exe = shutil.which("lint-imports")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("lint-imports (import-linter, in the dev extra) is not installed")
        pytest.skip("import-linter is not installed (pip install import-linter)")
    return exe


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def test_the_layer_contract_is_kept() -> None:
    """Every import (function-local ones included) goes down the layers; the contract lists no exception."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert all("ignore_imports" not in c for c in config["contracts"])
    run = subprocess.run([_lint_imports(), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # the layers, the checker's trusted code base, the engines hold mathematics, group's complete > near
    assert "4 kept, 0 broken" in run.stdout


def test_the_group_contract_fails_on_the_old_cycle(tmp_path: Path) -> None:
    """complete imports near: the group contract turned upside down (near above complete) must break."""
    config = tmp_path / "contract.toml"
    config.write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["symtrans", "proofs"]

        [[tool.importlinter.contracts]]
        name = "upside down"
        type = "layers"
        containers = ["symtrans.group"]
        layers = ["near", "complete"]
    """))
    run = subprocess.run([_lint_imports(), "--config", str(config)], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    assert "symtrans.group.complete -> symtrans.group.near" in run.stdout


def test_the_contract_fails_on_an_upward_import(tmp_path: Path) -> None:
    """The same tool on a contract the code breaks (validate imports errors, so errors cannot sit below it)."""
    config = tmp_path / "contract.toml"
    config.write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["symtrans", "proofs"]

        [[tool.importlinter.contracts]]
        name = "upside down"
        type = "layers"
        layers = ["symtrans.errors", "symtrans.validate"]
    """))
    run = subprocess.run([_lint_imports(), "--config", str(config)], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    assert "symtrans.validate -> symtrans.errors" in run.stdout


#: what the independent checker (symtrans.checker) may import of symtrans: the base, and G's formula
CHECKER_MAY_IMPORT = {"symtrans.errors", "symtrans.validate", "symtrans.config", "symtrans.symbols", "symtrans.arch",
                      "symtrans.catalogue"}


def test_the_checker_contract_forbids_every_other_module() -> None:
    """The checker's forbidden list is every top-level module of symtrans (and proofs) but the allowed few."""
    import pkgutil
    import tomllib

    import symtrans

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("id") == "checker-trusted-code-base"]
    assert contract["type"] == "forbidden" and contract["source_modules"] == ["symtrans.checker"]
    modules = {f"symtrans.{m.name}" for m in pkgutil.iter_modules(symtrans.__path__)} | {"proofs"}
    assert set(contract["forbidden_modules"]) == modules - CHECKER_MAY_IMPORT - {"symtrans.checker"}


def _planted(tmp_path: Path, module: str, target: str) -> subprocess.CompletedProcess[str]:
    """lint-imports, with the real contract, on a copy of the code where ``module`` imports ``target``."""
    for pkg in ("symtrans", "proofs"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    import {target}  # noqa\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([_lint_imports(), "--config", str(ROOT / "pyproject.toml")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("target", ["symtrans.numeric.weights", "symtrans.formulas", "proofs"])
def test_the_checker_contract_breaks_on_a_planted_import(tmp_path: Path, target: str) -> None:
    """The checker importing the loader, or a module the layers alone allow (formulas, the paper), is refused."""
    run = _planted(tmp_path, "symtrans.checker.reader", target)
    assert run.returncode != 0, run.stdout[-2000:]
    assert "the checker imports of symtrans only" in run.stdout and "BROKEN" in run.stdout
    assert f"symtrans.checker.reader -> {target}" in run.stdout


def test_the_engines_contract_breaks_on_a_planted_context(tmp_path: Path) -> None:
    """certify reading a run's Context (the layers alone allow it: context is below the engines) is refused."""
    run = _planted(tmp_path, "symtrans.certify.linear", "symtrans.context")
    assert run.returncode != 0, run.stdout[-2000:]
    assert "certify, group and numeric hold mathematics" in run.stdout and "BROKEN" in run.stdout
    assert "symtrans.certify.linear -> symtrans.context" in run.stdout


def test_the_checker_contract_passes_on_an_allowed_planted_import(tmp_path: Path) -> None:
    """The copy itself is not what breaks: an allowed planted import (symtrans.symbols) keeps every contract."""
    run = _planted(tmp_path, "symtrans.checker.reader", "symtrans.symbols")
    assert run.returncode == 0, run.stdout[-3000:]


def test_every_top_level_module_has_a_layer() -> None:
    """A new module of symtrans (or a new package beside proofs) must be placed in a layer, or the contract skips it."""
    import pkgutil
    import tomllib

    import symtrans

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("id") == "layers"]
    names = [m.strip() for layer in contract["layers"] for m in layer.replace(":", "|").split("|")]
    optional = {m[1:-1] for m in names if m.startswith("(")}  # "(module)": a layer import-linter may miss
    placed = {m.strip("()") for m in names}
    modules = {f"symtrans.{m.name}" for m in pkgutil.iter_modules(symtrans.__path__)}
    assert modules - placed == set()
    assert placed - modules - optional - {"proofs"} == set()  # no layer names a module that does not exist


_PROBE = textwrap.dedent("""
    import sys
    from symtrans.cli import run
    rc = run(sys.argv[1:])
    from symtrans.runner import PRODUCER_MODULES
    loaded = sorted(m for m in sys.modules if m == "torch" or m in PRODUCER_MODULES
                    or m.startswith("symtrans.numeric"))
    print("LOADED", loaded, "RC", rc)
""")


@pytest.mark.parametrize("argv", [["claims"], ["claims", "thm-7.3"], ["claims", "thm-recovery", "--format", "json"],
                                  ["claims", "thm-5.3", "--rests-on"], ["formula", "gauge-dimension", "--arch", "bert-base"],
                                  ["group", "--arch", "gpt2"], ["arch", "bert-base"]])
def test_claim_formula_and_group_queries_import_no_producer_and_no_torch(argv: list[str]) -> None:
    """``symtrans claims`` (list, show, queries) answers from the registry, formulas and the group spec from SymPy:
    no producer module, no numeric engine, no torch."""
    run = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    assert last == "LOADED [] RC 0", last
    if argv[1:2] == ["thm-7.3"]:  # the listing still names the claim's producers (read from their source)
        assert "  producers:     coq-thm73-sum-fibre (symbolic), head-identifiability (numeric)" in run.stdout


def test_the_probe_sees_producer_modules_when_a_query_runs_producers() -> None:
    """The probe is not blind: ``--blocks`` runs the symbolic producers, so their modules are loaded."""
    run = subprocess.run([sys.executable, "-c", _PROBE, "claims", "prop-5.1", "--blocks"], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=300)
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("LOADED [") and "'symtrans.producers.sec5'" in last and last.endswith("RC 0"), last


def test_the_table_lists_every_producer_and_matches_its_decorator() -> None:
    """``claims ID`` lists producers from the table; importing the modules gives the same, claim by claim, in order."""
    import importlib
    import inspect

    from symtrans.producer_table import PRODUCER_TABLE
    from symtrans.runner import PRODUCER_MODULES, declared_producers, producers_for, registry

    reg = registry()  # resolves every row against its @producer; refuses a decorated function without a row
    assert sum(len(ps) for ps in reg.values()) == len(PRODUCER_TABLE)
    for claim in reg:
        assert declared_producers(claim) == [(p.name, p.kind) for p in producers_for(claim)], claim
    decorated = {f"{m}:{name}" for m in PRODUCER_MODULES
                 for name, f in inspect.getmembers(importlib.import_module(m), inspect.isfunction)
                 if hasattr(f, "producer") and f.__module__ == m}
    assert decorated == {e.target for e in PRODUCER_TABLE}


def test_check_and_certify_pick_producers_by_kind_not_by_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """``certify`` runs the table's symbolic rows and ``check`` its numeric rows, though one section module holds
    both; a row turned to the other kind moves to the other command."""
    from symtrans import runner
    from symtrans.producer_table import PRODUCER_TABLE, ProducerEntry, certified_claims, checked_claims

    certify = runner.certificate_producers()
    check = runner.check_producers()
    assert [p.name for p in certify] == [e.name for e in PRODUCER_TABLE if e.kind == "symbolic"]
    assert [p.name for p in check] == [e.name for e in PRODUCER_TABLE if e.kind == "numeric"]
    shared = {p.func.__module__ for p in certify} & {p.func.__module__ for p in check}
    assert "symtrans.producers.sec5" in shared  # prop51-witness beside rank-plus-gaussian
    first = PRODUCER_TABLE[0]  # rank-sum-search, lem-rank-sum's only exact producers with the Coq record
    assert first.kind == "symbolic" and "lem-rank-sum" in certified_claims() and "lem-rank-sum" not in checked_claims()
    import symtrans.producer_table as table

    flipped = (ProducerEntry(first.claim, first.name, "numeric", first.target), *PRODUCER_TABLE[1:])
    monkeypatch.setattr(table, "PRODUCER_TABLE", flipped)
    assert "lem-rank-sum" in table.checked_claims()


def test_the_table_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decorated producer without a row, or a row that says another kind than its decorator, is refused."""
    from symtrans import runner
    from symtrans.producers import sec4
    from symtrans.errors import SymtransError
    from symtrans.evidence import producer
    from symtrans.producer_table import PRODUCER_TABLE, ProducerEntry

    monkeypatch.setattr(runner, "_REGISTRY", {})

    @producer("thm-4.2", kind="numeric", name="unlisted-demo")
    def unlisted(ctx):  # type: ignore[no-untyped-def]
        return []

    unlisted.__module__ = sec4.__name__
    monkeypatch.setattr(sec4, "unlisted", unlisted, raising=False)
    with pytest.raises(SymtransError, match=r"add to PRODUCER_TABLE.*\('thm-4.2', 'unlisted-demo', 'numeric', "
                                            r"'symtrans.producers.sec4:unlisted'\)"):
        runner.registry()
    monkeypatch.delattr(sec4, "unlisted")
    first = PRODUCER_TABLE[0]
    wrong = ProducerEntry(first.claim, first.name, "numeric" if first.kind == "symbolic" else "symbolic", first.target)
    monkeypatch.setattr(runner, "PRODUCER_TABLE", (wrong, *PRODUCER_TABLE[1:]))
    with pytest.raises(SymtransError, match="differs from .*one of them is stale"):
        runner.registry()
