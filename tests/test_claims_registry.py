"""The claim registry against claims.md, the formula registry and the producer registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy as sp

from proofs import Claim, all_claims, get_claim, register
from symtrans.errors import SymtransError
from symtrans.evidence import PaperStatus
from symtrans.producer_table import PRODUCER_TABLE
from symtrans.runner import producers_for
from symtrans.formulas import FORMULAS, formula
from symtrans.graph import ClaimGraph

#: the paper's claim list, shipped with the tests; test_shipped_claims_md_is_the_shared_one keeps it current
CLAIMS_MD = Path(__file__).resolve().parent / "data" / "claims.md"
#: where the project's shared folder sits beside a clone (CI lays it there)
SHARED_CLAIMS_MD = Path(__file__).resolve().parents[2] / "shared" / "paper" / "claims.md"
ROW = re.compile(r"^\| ([A-Za-z][\w.\-]*(?:, [\w.\-*]+)?) \| (.*)$")


@pytest.fixture(scope="module")
def claims_md() -> str:
    return CLAIMS_MD.read_text(encoding="utf-8")


def test_shipped_claims_md_is_the_shared_one() -> None:
    """The copy in tests/data must be the shared paper folder's claims.md wherever that folder is present."""
    if not SHARED_CLAIMS_MD.is_file():
        pytest.skip(f"no shared folder beside this clone ({SHARED_CLAIMS_MD}): nothing to compare the copy with")
    assert CLAIMS_MD.read_text(encoding="utf-8") == SHARED_CLAIMS_MD.read_text(encoding="utf-8"), \
        f"tests/data/claims.md is stale: cp {SHARED_CLAIMS_MD} tests/data/claims.md"


def _rows(text: str) -> dict[str, list[str]]:
    """First-column id -> the other cells, for every table row of claims.md whose id looks like an id."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m.group(1) not in ("id", "factor"):
            rows[m.group(1)] = [c.strip() for c in m.group(2).rstrip(" |").split(" | ")]
    return rows


def _strip_tags(text: str) -> str:
    return re.sub(r"\s*\[[A-Z][^\]]*\]", "", text).strip()


def test_every_item_of_claims_md_is_registered(claims_md: str) -> None:
    ids = {c.id for c in all_claims()}
    rows = _rows(claims_md)
    table_ids = [i for key in rows for i in key.split(", ") if not i.endswith("*")]
    hypotheses = re.findall(r"^- \*\*(H\d)\*\*", claims_md, flags=re.M)
    assert len(table_ids) >= 20 and hypotheses == ["H1", "H2", "H3", "H4"]
    missing = [i for i in [*table_ids, *hypotheses] if i not in ids]
    assert not missing, f"claims.md items missing from the registry: {missing}"
    # lit-*: one literature node per cited work, found by its authors' names
    lit_row = next(cells for key, cells in rows.items() if "lit-*" in key)
    authors = re.findall(r"([A-Z][a-z]+(?: [A-Z][a-z]+)?) (?:et al\.|and [A-Z][a-z]+) (\d{4})", lit_row[1])
    assert len(authors) == 6
    literature = [c for c in all_claims() if c.kind == "literature"]
    for name, year in authors:
        assert any(name in c.statement and year in c.statement for c in literature), (name, year)


def test_paper_numbers_titles_and_formalisation_tags_match_claims_md(claims_md: str) -> None:
    for key, cells in _rows(claims_md).items():
        if "," in key:
            continue
        claim = get_claim(key)
        if key.startswith("def-"):
            assert claim.title == _strip_tags(cells[0]), key
            assert claim.kind == "definition" and claim.paper_status is PaperStatus.DEFINITION
            continue
        number = cells[0]
        assert claim.paper_ref == _strip_tags(number), key
        tags = " ".join(re.findall(r"\[([A-Z][^\]]*)\]", number))
        if "FORMALISE" in tags:
            assert claim.formalisation == "toolkit" and claim.formalisation_note, key
        assert claim.source == ("abstract" if "ABSTRACT" in tags else "text"), key


def test_depends_on_column_is_reflected_in_the_graph(claims_md: str) -> None:
    g = ClaimGraph()
    ids = set(g.claims)
    for key, cells in _rows(claims_md).items():
        if "," in key or key.startswith("def-") or len(cells) < 4:
            continue
        deps_text = cells[2].replace("H1–H4", "H1, H2, H3, H4")
        named = {t for t in re.findall(r"[A-Za-z][\w.\-]*\d|[a-z]+-[a-z][\w.\-]*", deps_text) if t in ids}
        if "analytic-set" in deps_text:
            named.add("lem-analytic-set")
        if "def notation" in deps_text:
            named.add("def-notation")
        if "everything above" in deps_text:  # the paper's items, not the toolkit's corrections
            named = {i for i in ids - {key} if get_claim(i).paper_status.value != "not-in-paper"}
        assert named <= set(g.rests_on(key)), (key, named - set(g.rests_on(key)))


def test_hypotheses_are_statement_edges_and_thm_4_2_needs_all_four() -> None:
    edges = dict(get_claim("thm-4.2").edges())
    assert [edges[h] for h in ("H1", "H2", "H3", "H4")] == ["statement"] * 4
    assert all(get_claim(h).kind == "hypothesis" for h in ("H1", "H2", "H3", "H4"))


def test_every_claim_carries_statement_latex_and_a_formalisation_reason() -> None:
    for c in all_claims():
        assert c.statement and c.latex and c.title and c.section.startswith("§"), c.id
        if c.formalisation == "toolkit":
            assert len(c.formalisation_note) > 60, c.id


def test_formulas_link_to_registered_claims_and_claims_list_them() -> None:
    ids = {c.id for c in all_claims()}
    for name, f in FORMULAS.items():
        if f.provenance.claim is not None:
            assert f.provenance.claim in ids, name
            assert name in get_claim(f.provenance.claim).formulas
    assert set(get_claim("thm-recovery").formulas) >= {"recovery-ambiguity", "wo-fibre"}


def test_paper_numbers_quoted_in_thm_recovery_agree_with_the_formulas() -> None:
    # the statement quotes the paper; the formula registry computes: two independent routes
    text = get_claim("thm-recovery").statement
    quoted = [int(x.replace(",", "")) for x in re.findall(r"(\d[\d,]*\d) per (?:sequence|token)", text)]
    assert quoted == [formula("recovery-ambiguity", arch="bert-base", n=512).value,
                      formula("recovery-ambiguity-per-token", arch="bert-base").value]


def test_h4_note_counterexample_holds_exactly() -> None:
    """The note on H4 says X = [[1,0],[2,0],[3,0]] (n = 3 > d = 2) violates H4; check in exact arithmetic."""
    assert "[[1, 0], [2, 0], [3, 0]]" in get_claim("H4").notes[0]
    X = sp.Matrix([[1, 0], [2, 0], [3, 0]])
    d = X.shape[1]
    P = sp.eye(d) - sp.ones(d, d) / d
    XP = X * P
    sigma = sp.Matrix([sp.sqrt(sum((x - sum(X.row(i)) / d) ** 2 for x in X.row(i)) / d) for i in range(3)])
    assert sigma == sp.Matrix([sp.Rational(1, 2), 1, sp.Rational(3, 2)])
    assert XP.rank() == XP.row_join(sigma).rank()  # sigma lies in colspace(XP): H4 fails although n > d


def test_every_registered_producer_targets_a_registered_claim() -> None:
    producers_for("")  # import the producer modules
    ids = {c.id for c in all_claims()}
    assert not [e.claim_id for e in PRODUCER_TABLE if e.claim_id not in ids]


def test_claim_validation_and_registry_errors() -> None:
    with pytest.raises(SymtransError, match="duplicate claim id 'thm-4.2'"):
        register(get_claim("thm-4.2"))
    with pytest.raises(SymtransError, match="did you mean 'thm-4.2'"):
        get_claim("thm-4.21")
    with pytest.raises(SymtransError, match="depends on itself"):
        Claim(id="c", kind="lemma", title="t", paper_ref="r", section="§1", statement="s", latex="s",
              paper_status="proved", proof_deps=("c",))
    with pytest.raises(SymtransError, match="paper status"):
        Claim(id="c", kind="lemma", title="t", paper_ref="r", section="§1", statement="s", latex="s",
              paper_status="argued")
    with pytest.raises(SymtransError, match="tuple of strings"):
        Claim(id="c", kind="lemma", title="t", paper_ref="r", section="§1", statement="s", latex="s",
              paper_status="proved", proof_deps="lem-rank-sum")
