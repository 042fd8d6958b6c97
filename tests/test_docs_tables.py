"""The JSON schemas of docs/json-schemas.md match real outputs; the report examples match the CLI.

One full report run (examples/proof_status.py, which is `symtrans report --model default` through the
API; the session fixture ``example_report`` of tests/conftest.py) serves these tests, the generated
blocks of the docs (tests/test_docs_gen.py) and the proof_status and disagreements examples.
"""

from __future__ import annotations

from collections import Counter
import json
import os
import re
import subprocess
import sys
from pathlib import Path


from symtrans.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


# example_report: tests/conftest.py (examples/proof_status.py, run once per session)


def test_the_example_runs_what_the_cli_runs(example_report):
    _, doc, _ = example_report
    defaults = build_parser("report").parse_args(["report"])
    assert doc["model"]["spec"] == defaults.model == "default"
    assert doc["context"] == {"n": defaults.n, "seed": defaults.seed, "device": defaults.device,
                              "dtype": defaults.dtype, "layers": defaults.layers}
    assert doc["errors"] == []


def test_proof_status_and_disagreements_examples(example_report):
    out, doc, path = example_report
    shown = Counter(c["shown_as"] for c in doc["claims"])
    assert sum(shown.values()) == len(doc["claims"]) and shown == Counter(doc["summary"]["shown"])
    verdicts = Counter(c["verdict"] for c in doc["claims"])  # the words differ from the verdicts only for not-run
    assert all(shown[v] == verdicts[v] for v in verdicts if v != "not-run")
    assert sum(shown[w] for w in ("stated", "assumed", "sanity check", "not-run")) == verdicts["not-run"]
    counts = ", ".join(f"{n} {w}" for w, n in doc["summary"]["shown"].items())
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
