"""The ``symtrans formulas | formula | arch`` commands: output shapes and every bad input.

Most cases call :func:`symtrans.cli.main` in-process; a few run ``python -m symtrans``
as a whole process to check exit statuses, stderr and that torch is never imported.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import sympy

from symtrans.arch import get_arch
from symtrans.cli import main
from symtrans.formulas import FORMULAS, formula, formula_names

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def run_process(*argv: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "symtrans", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


# ------------------------------------------------------------------------------ listings
def test_formulas_lists_every_name_once(capsys: Any) -> None:
    status, out, err = run_cli(capsys, "formulas")
    assert status == 0 and err == ""
    names = [line.split()[0] for line in out.splitlines()]
    assert names == formula_names()
    for line, f in zip(out.splitlines(), FORMULAS.values()):
        assert line.split()[1] == f.provenance.origin and f.summary in line


def test_formulas_json(capsys: Any) -> None:
    status, out, _ = run_cli(capsys, "formulas", "--format", "json")
    listed = json.loads(out)
    assert status == 0 and [d["name"] for d in listed] == formula_names()
    assert all({"kind", "summary", "provenance"} <= set(d) for d in listed)


# ------------------------------------------------------------------------------ one formula
JSON_KEYS = {"name", "expression", "latex", "value", "counts", "provenance", "substitutions"}


def formula_json(capsys: Any, *argv: str) -> dict[str, Any]:
    status, out, err = run_cli(capsys, "formula", *argv, "--format", "json")
    assert status == 0 and err == "", err
    data = json.loads(out)
    assert JSON_KEYS <= set(data)
    return data


def test_formula_json_integer_value(capsys: Any) -> None:
    data = formula_json(capsys, "recovery-ambiguity", "--arch", "bert-base")
    a = get_arch("bert-base")
    assert data["name"] == "recovery-ambiguity"
    assert isinstance(data["value"], int) and data["value"] == formula("recovery-ambiguity", arch=a).value
    assert data["substitutions"]["n"]["value"] == a.n == 512
    assert data["substitutions"]["n"]["source"].startswith("default n = 512 (the paper's n")
    assert {k for k in data["substitutions"]} == {"n", "H", "d_v"}
    assert data["provenance"]["origin"] == "paper" and data["provenance"]["claim"] == "thm-recovery"
    assert "fibre" in data["counts"]
    # the expression string is SymPy's own printing of the registry's expression
    assert data["expression"] == str(formula("recovery-ambiguity", arch=a).expression)
    assert data["latex"] == sympy.latex(formula("recovery-ambiguity", arch=a).expression,
                                        symbol_names={sympy.Symbol(k, integer=True, positive=True): v
                                                      for k, v in (("d_v", "d_{v}"), ("H", "H"), ("n", "n"))})


def test_formula_json_rational_value_is_part_over_whole(capsys: Any) -> None:
    share = formula_json(capsys, "ffn-flop-share", "--arch", "bert-base", "--set", "n=128")
    ffn = formula_json(capsys, "flops-ffn", "--arch", "bert-base", "--set", "n=128")["value"]
    layer = formula_json(capsys, "flops-layer", "--arch", "bert-base", "--set", "n=128")["value"]
    assert isinstance(share["value"], str) and share["value"] == f"{ffn}/{layer}"
    num, den = (int(x) for x in share["value"].split("/"))
    assert Fraction(num, den) == Fraction(str(formula("ffn-flop-share", arch="bert-base", n=128).value))
    assert share["substitutions"]["n"] == {"value": 128, "source": "set by user"}
    assert share["substitutions"]["H"] == {"value": 12, "source": "architecture bert-base"}


def test_formula_json_symbolic_value_is_null(capsys: Any) -> None:
    data = formula_json(capsys, "recovery-ambiguity", "--arch", "symbolic")
    assert data["value"] is None and data["substitutions"] == {}
    partial = formula_json(capsys, "recovery-ambiguity", "--arch", "symbolic", "--set", "n=4")
    assert partial["value"] is None and partial["substitutions"]["n"]["value"] == 4
    full = formula_json(capsys, "recovery-ambiguity", "--arch", "symbolic", "--set", "n=4", "--set", "H=3",
                        "--set", "d_v=2")
    assert full["value"] == formula("recovery-ambiguity", arch="symbolic", n=4, H=3, d_v=2).value


def test_formula_json_aux_rank(capsys: Any) -> None:
    default = formula_json(capsys, "wo-fibre", "--arch", "bert-base")
    assert default["substitutions"]["rank_WO"]["source"].startswith("generic default")
    lowered = formula_json(capsys, "wo-fibre", "--arch", "bert-base", "--set", "rank_WO=700")
    assert lowered["substitutions"]["rank_WO"] == {"value": 700, "source": "set by user"}
    assert lowered["value"] == formula("wo-fibre", arch="bert-base", rank_WO=700).value


def test_formula_text_and_latex(capsys: Any) -> None:
    status, out, _ = run_cli(capsys, "formula", "recovery-ambiguity", "--arch", "minilm-l6-h384")
    value = formula("recovery-ambiguity", arch="minilm-l6-h384")
    assert status == 0
    assert out.splitlines()[0] == "recovery-ambiguity  [minilm-l6-h384]"
    for label in ("expression:", "substitutions:", "value:", "counts:", "provenance:"):
        assert label in out
    assert f"value:         {value.value}" in out
    status, out, _ = run_cli(capsys, "formula", "recovery-ambiguity-per-token", "--format", "latex")
    assert status == 0 and out.strip() == formula("recovery-ambiguity-per-token").latex()
    assert out.strip().endswith(f"= {formula('recovery-ambiguity-per-token').value}")


def test_formula_from_a_config_path(capsys: Any, tmp_path: Path) -> None:
    cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
           "intermediate_size": 256, "max_position_embeddings": 128, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    data = formula_json(capsys, "recovery-ambiguity", "--arch", str(tmp_path / "config.json"))
    # fibre of the head sum for n = 128 tokens, H = 4 heads of width 64 / 4
    assert data["value"] == 128 * (4 - 1) * (64 // 4)


def test_every_formula_evaluates_for_every_preset(capsys: Any) -> None:
    from symtrans.arch import preset_names

    for preset in preset_names():
        for name in formula_names():
            value = formula(name, arch=preset).value
            if preset == "symbolic":
                assert value is None, name
            else:  # exact, and a count, dimension, order or share is never negative
                assert value is not None and value.is_Rational and value >= 0, (preset, name, value)
    status, out, _ = run_cli(capsys, "formula", "ffn-permutations", "--arch", "minilm-l6-h384")
    assert status == 0 and "digits" in out  # d_ff! is shown abbreviated in text


# ------------------------------------------------------------------------------ arch
def test_arch_json_and_text(capsys: Any) -> None:
    status, out, _ = run_cli(capsys, "arch", "gpt2", "--format", "json")
    assert status == 0 and json.loads(out) == get_arch("gpt2").to_dict()
    status, out, _ = run_cli(capsys, "arch", "bert-base", "--set", "n=128")
    rows = dict(line.split(None, 1) for line in out.splitlines())
    assert status == 0 and rows["n"] == "128" and rows["d_model"] == "768" and rows["norm_placement"] == "post"


# ------------------------------------------------------------------------------ bad input
BAD = [
    (["formula", "recovery-ambiguity", "--arch", "bert-bsae"], "did you mean 'bert-base'"),
    (["arch", "gtp2"], "did you mean 'gpt2'"),
    (["formula", "recovry-ambiguity"], "did you mean 'recovery-ambiguity'"),
    (["formula", "recovery-ambiguity", "--set", "n=abc"], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "n=0"], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "n=-1"], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "n=1.5"], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "n="], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "n=5", "--set", "n=6"], "set twice"),
    (["formula", "recovery-ambiguity", "--set", "foo=3"], "unknown symbol 'foo'"),
    (["formula", "recovery-ambiguity", "--set", "dk=3"], "did you mean 'd_k'"),
    (["formula", "recovery-ambiguity", "--set", "H"], "must be a positive integer"),
    (["formula", "recovery-ambiguity", "--set", "=3"], "expected NAME=INTEGER"),
    (["formula", "recovery-ambiguity", "--arch", "bert-base", "--set", "H=16"],
     "inconsistent sizes: bert-base requires H*d_k == d_model"),
    (["formula", "recovery-ambiguity", "--set", "n=5000"], "exceeds the 512 positions"),
    (["formula", "wo-fibre", "--set", "rank_WO=769"], "largest possible value"),
    (["formula", "head-subspace-dim", "--set", "rank_X=100000"], "largest possible value"),
    (["arch", "bert-base", "--set", "rank_X=3"], "not a size of the architecture"),
    (["formula"], "required"),
    (["formula", "recovery-ambiguity", "--format", "yaml"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("argv,expected", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_status_2(capsys: Any, argv: list[str], expected: str) -> None:
    status, out, err = run_cli(capsys, *argv)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("symtrans") and ": error: " in lines[0], err
    assert expected in lines[0]


@pytest.mark.parametrize("content,expected", [("{oops", "malformed JSON"),
                                              ('{"model_type": "t5", "d_model": 512}', "unsupported model_type"),
                                              ('{"model_type": "bert"}', "missing required key")])
def test_bad_config_files(capsys: Any, tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    for argv in (["formula", "recovery-ambiguity", "--arch", str(path)], ["arch", str(path)]):
        status, out, err = run_cli(capsys, *argv)
        assert status == 2 and out == "" and len(err.splitlines()) == 1 and expected in err


@pytest.fixture
def no_parsing(monkeypatch: Any) -> list[Any]:
    """Record every string that reaches SymPy's parser or eval/exec during a CLI call."""
    import sympy.parsing.sympy_parser as parser

    seen: list[Any] = []
    real_parse, real_eval, real_exec = parser.parse_expr, builtins.eval, builtins.exec

    def spy_parse(s: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(("parse_expr", s))
        return real_parse(s, *args, **kwargs)

    def spy(real: Any, label: str) -> Any:
        def wrapped(source: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((label, source))
            return real(source, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(parser, "parse_expr", spy_parse)
    monkeypatch.setattr(builtins, "eval", spy(real_eval, "eval"))
    monkeypatch.setattr(builtins, "exec", spy(real_exec, "exec"))
    return seen


def test_no_cli_string_reaches_sympify_or_eval(capsys: Any, no_parsing: list[Any], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = [f"n=__import__('os').system('touch {marker}')", "n=__import__('os')", "n=1+1", "n=2**8",
               "d_model=H*d_k", "H=Symbol('x')"]
    for item in hostile:
        status, out, err = run_cli(capsys, "formula", "recovery-ambiguity", "--arch", "symbolic", "--set", item)
        assert status == 2 and out == "" and "symtrans: error: --set" in err
    # valid queries, symbolic and exact, parse nothing either
    for argv in (["formula", "recovery-ambiguity", "--arch", "symbolic", "--format", "json"],
                 ["formula", "contracted-dim", "--arch", "bert-base", "--set", "n=128", "--set", "dim_sumR=700"],
                 ["arch", "symbolic", "--format", "json"]):
        assert run_cli(capsys, *argv)[0] == 0
    assert no_parsing == [] and not marker.exists()
    # the spy is live: a string given to sympify does reach it
    sympy.sympify("n + 1")
    assert no_parsing and no_parsing[0][0] == "parse_expr"


# ------------------------------------------------------------------------------ processes
def test_process_query_is_light_and_exact() -> None:
    code = ("import sys; from symtrans.cli import main; "
            "status = main(['formula', 'recovery-ambiguity', '--arch', 'bert-base', '--format', 'json']); "
            "print('HEAVY', sorted(m for m in ('torch', 'networkx', 'transformers') if m in sys.modules)); "
            "sys.exit(status)")
    proc = run_process(code=code)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    body, heavy = proc.stdout.rsplit("HEAVY", 1)
    assert heavy.strip() == "[]"
    assert json.loads(body)["value"] == formula("recovery-ambiguity", arch="bert-base").value


def test_process_bad_input_exit_status_and_stderr() -> None:
    proc = run_process("formula", "recovery-ambiguity", "--arch", "bert-base", "--set", "H=16")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("symtrans: error: inconsistent sizes")


def test_process_module_entry_point() -> None:
    proc = run_process("formulas")
    assert proc.returncode == 0 and proc.stdout.split()[0] == formula_names()[0]
