"""The proof kernel's comparator (symtrans.certify.coq): each way of cheating is refused with one line.

The refusals that need no compiler (an edited statement, a deleted proof file, a forbidden command) and the
record written without Coq run everywhere; the ones that compile (an added axiom, swapped theorem names, the
valid development) need coqc and coqchk: they skip on a developer's machine without them and fail under CI=true,
where .ci/run installs them. Each compiling refusal costs a full compile: the default tier runs the valid
development and one compiled cheat, the slow tier (CI's last command) the others.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.kernel import COQ_DIR, COQ_LINKS, COQ_STATEMENTS_SHA256, INSTALL_HINT
from symtrans.certify.coq import coq_tools, kernel_check
from symtrans.evidence import Verdict
from symtrans.graph import PROVED_TEXT, counted_verdict

ROOT = Path(__file__).resolve().parent.parent
WHY = f"coqc and coqchk not installed ({INSTALL_HINT}; .ci/run installs them)"


def _needs_coq() -> None:
    """Skip without Coq on a developer's machine, but fail in CI (CI=true), where .ci/run installs it."""
    if coq_tools() is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI run without Coq: {WHY}")
        pytest.skip(WHY)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the project's Coq development (sources and _CoqProject only)."""
    dst = tmp_path / "coq"
    dst.mkdir()
    for f in COQ_DIR.iterdir():
        if f.suffix == ".v" or f.name == "_CoqProject":
            shutil.copyfile(f, dst / f.name)
    return dst


def _refused(directory: Path, *words: str) -> str:
    res = kernel_check(directory, use_cache=False)
    assert not res.ok and not res.unavailable, res
    assert "\n" not in res.reason and res.reason, res.reason
    for w in words:
        assert w in res.reason, res.reason
    return res.reason


def test_statements_pin_is_the_file() -> None:
    import hashlib

    assert hashlib.sha256((COQ_DIR / "Statements.v").read_bytes()).hexdigest() == COQ_STATEMENTS_SHA256


def test_every_link_has_its_statement_and_proof() -> None:
    """Each linked theorem's statement is defined in Statements.v and its theorem in the named proof file."""
    stmts = (COQ_DIR / "Statements.v").read_text(encoding="utf-8")
    for link in COQ_LINKS:
        assert f"Definition {link.short} : Prop" in stmts, link
        proof = (COQ_DIR / f"{link.module}.v").read_text(encoding="utf-8")
        assert f"Theorem {link.short} : Statements.{link.short}." in proof, link


def test_edited_statement_refused(copy: Path) -> None:
    s = copy / "Statements.v"
    s.write_text(s.read_text(encoding="utf-8").replace("\\rank (A + B)%R <= \\rank A + \\rank B",
                                                        "\\rank (A + B)%R <= \\rank A + \\rank B + 1"),
                 encoding="utf-8")
    _refused(copy, "Statements.v differs from the pinned statements")


def test_deleted_proof_file_refused(copy: Path) -> None:
    (copy / "Linear.v").unlink()
    _refused(copy, "Linear.v", "missing")
    proj = copy / "_CoqProject"
    proj.write_text(proj.read_text(encoding="utf-8").replace("Linear.v\n", ""), encoding="utf-8")
    _refused(copy, "Linear.v", "not in the development")


def test_forbidden_command_refused(copy: Path) -> None:
    p = copy / "Linear.v"
    p.write_text(p.read_text(encoding="utf-8") + "\nUnset Guard Checking.\n", encoding="utf-8")
    _refused(copy, "Unset Guard Checking", "not allowed")


def test_bad_project_listing_refused(copy: Path) -> None:
    (copy / "_CoqProject").write_text("-Q . Symtrans\nLinear.v\nStatements.v\n", encoding="utf-8")
    _refused(copy, "Statements.v first")
    (copy / "_CoqProject").write_text("Statements.v\n../Linear.v\n", encoding="utf-8")
    _refused(copy, "plain NAME.v")


def test_without_coq_the_reading_stays_supported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No coqc on PATH: nothing is checked, the record is supported with the install hint, never certified."""
    from symtrans.producers.symbolic import kernel_record

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: coqc and coqchk cannot be found
    res = kernel_check(use_cache=False)
    assert not res.ok and res.unavailable and INSTALL_HINT in res.reason
    for link in COQ_LINKS:
        ev = kernel_record(link)
        want = Verdict.INCONCLUSIVE if link.refutes else Verdict.SUPPORTED  # never certified, never fails
        assert ev.verdict is want, ev
        assert "kernel not available here" in ev.summary and INSTALL_HINT in ev.summary
        assert counted_verdict(ev, "universal")[0] is want


def test_a_kernel_record_counts_only_when_the_kernel_accepted() -> None:
    """An all-sizes record is certified only with a re-checkable file or an accepted kernel check."""
    from symtrans.evidence import Evidence, Scope

    link = COQ_LINKS[0]
    base = dict(claim=link.claim, producer=link.producer, kind="symbolic", verdict="certified", summary="s",
                scope=Scope("all-sizes", "proof"))
    good = {"ok": True, "theorem": link.theorem, "theorems": {link.theorem: link.statement}}
    assert counted_verdict(Evidence(**base, details={"kernel": good}), "universal")[0] is Verdict.CERTIFIED
    for bad in ({**good, "ok": False}, {**good, "theorems": {}}, {**good, "theorem": "Symtrans.Linear.other"}, {}):
        assert counted_verdict(Evidence(**base, details={"kernel": bad}), "universal") == (Verdict.SUPPORTED,
                                                                                             PROVED_TEXT)


# ------------------------------------------------------------------------------------------- with Coq
@pytest.fixture(scope="module")
def builds() -> dict[str, bytes]:
    """The module's ``.vo`` store (kernel_check's ``compiled``): the valid development is compiled once, fresh
    (the first test below), and each cheat recompiles only its edited file and the files that name it; coqchk
    and the statement and assumption checks still run on every module each time."""
    return {}


def test_project_development_is_valid(builds: dict[str, bytes]) -> None:
    _needs_coq()
    res = kernel_check(use_cache=False, compiled=builds)
    assert res.ok, res.reason
    assert res.how == "coqc + coqchk" and set(res.theorems) == {link.theorem for link in COQ_LINKS}
    again = kernel_check()
    assert again.ok and again.how == "cache" and again.files == res.files


# Each refusal below compiles its edited file and the files that name it (the others' .vo come from the module's
# store, compiled from the same bytes; 10-25 s a file): the default tier keeps the valid development and one
# compiled cheat (an axiom a theorem uses, in Recovery.v, which no file requires: one file recompiled); the other
# compiled cheats are in the slow tier, which CI runs (.ci/run), as is `symtrans verify --coq` on the project's
# own development.
def test_added_axiom_refused(copy: Path, builds: dict[str, bytes]) -> None:
    """An axiom a theorem uses is refused (Print Assumptions); so is the cheat's .vo put in the store under the
    honest file's key (the store cannot launder a compiled cheat: the checks read the .vo, not the key)."""
    _needs_coq()
    from symtrans.certify.coq import _build_keys, project_files

    p = copy / "Recovery.v"
    text = p.read_text(encoding="utf-8")
    start = text.index("Theorem recovery_wo_fibre : Statements.recovery_wo_fibre.")
    end = text.index("Qed.", start) + len("Qed.")
    cheat = ("Axiom cheat : False.\nTheorem recovery_wo_fibre : Statements.recovery_wo_fibre.\n"
             "Proof. exact: (False_ind _ cheat). Qed.")
    p.write_text(text[:start] + cheat + text[end:], encoding="utf-8")
    res = kernel_check(copy, use_cache=False, compiled=builds)
    assert not res.ok and not res.unavailable and "\n" not in res.reason, res
    for w in ("Symtrans.Recovery.recovery_wo_fibre", "assumptions beyond the allow-list", "cheat"):
        assert w in res.reason, res.reason
    coqc, _, version = coq_tools()
    names = project_files(COQ_DIR)
    honest = _build_keys({n: (COQ_DIR / n).read_bytes() for n in names}, names, version, coqc)
    cheating = _build_keys({n: (copy / n).read_bytes() for n in names}, names, version, coqc)
    assert [n for n in names if honest[n] != cheating[n]] == ["Recovery.v"]  # only the edited file recompiled
    forged = {**builds, honest["Recovery.v"]: builds[cheating["Recovery.v"]]}
    res = kernel_check(use_cache=False, compiled=forged)
    assert not res.ok and "Symtrans.Recovery.recovery_wo_fibre" in res.reason and "cheat" in res.reason, res


@pytest.mark.slow  # a second full compile, then coqchk
def test_added_unused_axiom_refused(copy: Path) -> None:
    """An axiom that nothing uses is refused too (coqchk's summary)."""
    _needs_coq()
    p = copy / "Linear.v"
    p.write_text(p.read_text(encoding="utf-8") + "\nAxiom unused : False.\n", encoding="utf-8")
    _refused(copy, "coqchk", "axioms", "Symtrans.Linear.unused")


@pytest.mark.slow  # a full compile
def test_swapped_theorem_names_refused(copy: Path) -> None:
    _needs_coq()
    p = copy / "Linear.v"
    text = p.read_text(encoding="utf-8")
    swapped = (text.replace("Theorem prop51_witness : Statements.prop51_witness.", "Theorem SWAP")
                   .replace("Theorem prop63_witness : Statements.prop63_witness.",
                            "Theorem prop51_witness : Statements.prop63_witness.")
                   .replace("Theorem SWAP", "Theorem prop63_witness : Statements.prop51_witness."))
    assert swapped != text
    p.write_text(swapped, encoding="utf-8")
    _refused(copy, "does not prove its pinned statement", "Symtrans.Linear.prop51_witness")


def test_cli_verify_coq_one_line_on_refusal(copy: Path) -> None:
    (copy / "Linear.v").unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "symtrans", "verify", "--coq", str(copy), "--quiet"],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode == 1, p
    assert p.stdout.strip().count("\n") == 0 and p.stdout.startswith("coq: refused: Linear.v"), p.stdout


def test_report_on_the_bundled_model_certifies_the_kernel_checked_results(example_report) -> None:
    """report --model default: every linked record is certified for all sizes and names its Coq theorem; the
    claims whose ancestors are certified too are fully certified (prop-5.1, prop-6.3, thm-4.2-corrected)."""
    _needs_coq()
    _, report, _ = example_report
    claims = {c["id"]: c for c in report["claims"]}
    for link in COQ_LINKS:
        if not link.record:
            continue
        claim = claims[link.claim]
        records = claim["evidence"] if "/" not in link.target else next(
            r for r in claim["readings"] if r["id"] == link.target)["evidence"]
        (ev,) = [e for e in records if e["producer"] == link.producer]
        if link.refutes:  # thm-4.2: its counterexample, kernel-checked
            assert ev["verdict"] == "fails" and ev["counted_as"] == "fails" and link.theorem in ev["summary"], ev
            assert claim["verdict"] == "fails"
            continue
        assert ev["verdict"] == "certified" and ev["counted_as"] == "certified", ev
        assert ev["scope"]["kind"] == "all-sizes" and link.theorem in ev["summary"], ev
        assert ev["details"]["kernel"]["statements_sha256"] == COQ_STATEMENTS_SHA256
    for cid in ("prop-5.1", "prop-6.3", "thm-4.2-corrected"):
        assert claims[cid]["standing"] == "fully-certified", (cid, claims[cid]["standing"])
    reading = next(r for r in claims["thm-recovery"]["readings"] if r["id"] == "thm-recovery/sum")
    assert reading["verdict"] == "certified"
    # it rests on thm-7.3/sum (rests_on), not on the whole of thm-7.3, whose W_O reading fails: fully certified
    assert reading["rests_on"] == ["thm-7.3/sum"] and reading["standing"] == "fully-certified", reading["standing"]
    assert claims["thm-recovery"]["standing"] == "reading-dependent"
    assert claims["lem-rank-sum"]["verdict"] == "certified"
    # prop-6.2: its bound proved for every size, its identity refuted: reading-dependent, not "fails"
    bound = next(r for r in claims["prop-6.2"]["readings"] if r["id"] == "prop-6.2/bound")
    assert bound["verdict"] == "certified" and bound["standing"] == "fully-certified", bound["standing"]
    assert claims["prop-6.2"]["verdict"] == "reading-dependent"
    # thm-7.3/sum: the heads cannot be told apart from their sum, proved for every size; it had only a numeric check
    heads = next(r for r in claims["thm-7.3"]["readings"] if r["id"] == "thm-7.3/sum")
    assert heads["verdict"] == "certified" and heads["standing"] == "fully-certified", heads["standing"]


def test_docs_quote_the_statements_verbatim() -> None:
    """docs/certificates.md shows the Coq statements beside the registry: each quoted Coq text (a definition's body
    after ':=', or a statement's text) is in Statements.v, up to white space, so the page cannot drift."""
    import re

    doc = (ROOT / "docs" / "certificates.md").read_text(encoding="utf-8")
    section = doc[doc.index("### The statements beside the registry"):doc.index("Where they differ from the written")]
    stmts = " ".join((COQ_DIR / "Statements.v").read_text(encoding="utf-8").split())
    spans = [m for pair in re.findall(r"``\s(.+?)\s``|`([^`]+)`", section) for m in pair if m]
    quoted = [" ".join(s.split(":=", 1)[-1].split()) for s in spans
              if "\\rank" in s or ":=" in s or "->" in s or "exists" in s]
    assert len(quoted) >= 20
    assert [q for q in quoted if q not in stmts] == []
    assert all(link.theorem in section for link in COQ_LINKS)


def test_declared_against_used_dependencies() -> None:
    """Print All Dependencies: the project's own proof of prop-5.1 does not use lem-rank-sum, which it declares."""
    _needs_coq()
    from symtrans.producers.symbolic import dependencies

    res = kernel_check()
    assert res.ok, res.reason
    prop51 = next(link for link in COQ_LINKS if link.claim == "prop-5.1")
    assert dependencies(prop51, res.uses[prop51.theorem])["declared_not_used"] == ["lem-rank-sum"]
    # prop-6.2's bound declares lem-rank-sum and its proof uses it (term by term over the heads)
    bound = next(link for link in COQ_LINKS if link.target == "prop-6.2/bound")
    deps = dependencies(bound, res.uses[bound.theorem])
    assert deps["used"] == ["lem-rank-sum"] and deps["declared_not_used"] == deps["used_not_declared"] == []
    # thm-7.3/sum and thm-recovery/sum share their kernel lemmas; neither proof uses the other's theorem (the registry
    # derives thm-recovery from thm-7.3: a proof of thm-7.3 through thm-recovery's would be circular)
    heads = next(link for link in COQ_LINKS if link.target == "thm-7.3/sum")
    count = next(link for link in COQ_LINKS if link.target == "thm-recovery/sum")
    assert res.uses[heads.theorem] == [] and dependencies(heads, [])["used_not_declared"] == []
    assert dependencies(count, res.uses[count.theorem])["declared_not_used"] == ["thm-7.3"]


@pytest.mark.slow  # a full compile of an edited copy
def test_a_proof_that_starts_using_a_linked_result_is_flagged(copy: Path) -> None:
    """A proof that starts using another linked result shows it as used and, where the registry does not declare
    it, flags it (Print All Dependencies of an edited copy)."""
    _needs_coq()
    from symtrans.producers.symbolic import dependencies

    p = copy / "LayerNorm.v"
    text = p.read_text(encoding="utf-8")
    start = text.index("move=> R n d X gamma beta h1.\nrewrite ln_decomp")
    p.write_text(text[:start] + "have _ := Linear.lem_rank_sum.\n" + text[start:], encoding="utf-8")
    other = kernel_check(copy, use_cache=False)
    assert other.ok, other.reason
    remark = next(link for link in COQ_LINKS if link.short == "ln_remark")
    assert other.uses[remark.theorem] == ["Symtrans.Linear.lem_rank_sum"]
    deps = dependencies(remark, other.uses[remark.theorem])
    assert deps["used"] == ["lem-rank-sum"] and deps["used_not_declared"] == ["lem-rank-sum"]
