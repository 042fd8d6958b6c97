"""The generated docs match a fresh report of the bundled model; the JSON schemas match real outputs.

One full report run (examples/proof_status.py, which is `symtrans report --model default` through the
API; the session fixture ``example_report`` of tests/conftest.py) serves the claim table, docs/formalisations.md, and the proof_status and disagreements examples.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from symtrans.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_claims_table", ROOT / "docs" / "gen_claims_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# example_report: tests/conftest.py (examples/proof_status.py, run once per session)


def test_the_example_runs_what_the_cli_runs(example_report):
    _, doc, _ = example_report
    defaults = build_parser("report").parse_args(["report"])
    assert doc["model"]["spec"] == defaults.model == "default"
    assert doc["context"] == {"n": defaults.n, "seed": defaults.seed, "device": defaults.device,
                              "dtype": defaults.dtype}
    assert doc["errors"] == []


def test_readme_claim_table_matches_the_report(gen, example_report):
    _, doc, _ = example_report
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert gen.replace_block(readme, gen.claims_table(doc)) == readme, \
        "README claim table is stale: python docs/gen_claims_table.py --write"
    block = readme.split(gen.START, 1)[1].split(gen.END, 1)[0]
    for c in doc["claims"]:  # independent of the generator: each row carries the report's verdict
        row = next(line for line in block.splitlines() if line.startswith(f"| `{c['id']}` |"))
        assert f" {c['verdict']} |" in row.replace("**", "") and f" {c['standing']} |" in row


def test_formalisations_doc_is_generated_from_the_claims(gen, example_report):
    _, doc, _ = example_report
    text = (ROOT / "docs" / "formalisations.md").read_text(encoding="utf-8")
    assert text == gen.formalisations(doc), "stale: python docs/gen_claims_table.py --write"
    from proofs import all_claims

    toolkit = [c.id for c in all_claims() if c.formalisation == "toolkit"]
    assert re.findall(r"^### `([^`]+)`", text, flags=re.M) == toolkit


def test_proof_status_and_disagreements_examples(example_report):
    out, doc, path = example_report
    counts = ", ".join(f"{v} {k}" for v, k in doc["summary"]["verdicts"].items() if k)
    assert counts in out
    ids = [d["id"] for d in doc["summary"]["disagreements"]]
    assert f"disagreements with the paper: {', '.join(ids) if ids else 'none so far'}" in out
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "disagreements.py"), str(path)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    shown = re.findall(r"^== (\S+)", run.stdout, flags=re.M)
    assert shown == ids and "thm-4.2" in ids  # the affine-rank counterexample is a disagreement


# ----------------------------------------------------------------- JSON schemas
def documented(name: str) -> set[str]:
    text = (ROOT / "docs" / "json-schemas.md").read_text(encoding="utf-8")
    table = text.split(f"<!-- schema: {name} -->", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.M))


def cli_json(capsys, *argv: str):
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_report_schemas(example_report):
    _, doc, _ = example_report
    assert documented("report") == set(doc)
    assert documented("report-claim") == set(doc["claims"][0])
    evidence = next(e for c in doc["claims"] for e in c["evidence"])
    assert documented("evidence") == set(evidence) - {"stale", "stale_reason", "origin", "counted_as", "counted_note"}


def test_cli_json_schemas(capsys):
    assert documented("formula") == set(cli_json(capsys, "formula", "wo-fibre", "--arch", "gpt2"))
    assert documented("arch") == set(cli_json(capsys, "arch", "gpt2"))
    assert documented("claims-query") == set(cli_json(capsys, "claims", "thm-4.2", "--impact"))
    cert = cli_json(capsys, "certify", "prop-6.2", "--model", "none")
    assert set(cert) == {"claims"} and documented("certify-claim") == set(cert["claims"][0])
    assert documented("evidence") == set(cert["claims"][0]["evidence"][0]) - {"counted_as", "counted_note"}
    assert documented("check") == set(cli_json(capsys, "check", "--claims", "prop-5.4", "--n", "4"))
    assert documented("measure") == set(cli_json(capsys, "measure", "--n", "4"))


def test_readme_report_excerpt_is_in_a_fresh_report(example_report):
    _, _, path = example_report
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Proof-status report", 1)[1]
    excerpt = section.split("````markdown\n", 1)[1].split("````\n", 1)[0]
    assert "## Where the toolkit and the paper disagree" in excerpt
    assert excerpt in (path.parent / "report.md").read_text(encoding="utf-8"), \
        "the README's report.md excerpt is stale: paste the same section of a fresh report"
