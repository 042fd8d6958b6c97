"""Every run parameter has one default and one constraint (symtrans.config.PARAMS), and every public API
function and CLI command refuses a bad value with that constraint's one error text, naming the parameter as
its caller wrote it (``n`` in Python, ``--n`` at the command line), before any model is loaded.

The bad values come from the declarations; the expected text is the declared constraint's own refusal
with the caller's spelling, and a few texts are pinned literally (so a constraint that stops refusing, or
whose text drifts, fails here).
"""

from __future__ import annotations

import inspect
from typing import Any
import sys

import pytest

import symtrans
from symtrans.cli import COMMAND_MODULES, build_parser, main
from symtrans.config import DEFAULT_DTYPE, DEFAULT_N, DEFAULT_SEED, PARAMS, RUN_DTYPES, RunConfig, check_param, spelling
from symtrans.errors import SymtransError

#: the public API functions that take run parameters (by keyword), with keywords that keep each call cheap
API = {
    "check_claims": dict(claims=["prop-5.4"]),
    "certify_claims": dict(claims=["thm-4.2"]),
    "measure": dict(),
    "verify_invariance": dict(factors=["S_H"]),
    "proof_graph": dict(model=None),
    "proof_report": dict(model=None),
    "load": dict(),
    "sweep": dict(models=["default"], out="/nonexistent/symtrans-sweep"),  # refused before the directory is probed
    "breaking": dict(arch="llama2-7b", depths=(1,), components=("gates",)),
}
#: public functions with a parameter named like a run parameter that is not one (their own meaning)
NOT_RUN_PARAMETERS = {"from_config": "n: the sequence length an architecture's symbolic sizes are evaluated at"}
#: run-parameter defaults that differ from the declared one on purpose
OTHER_DEFAULTS = {
    ("load", "device"): "cpu: a loaded model stays where the caller reads it (a run's None is CUDA when available)",
    ("measure", "device"): "cpu, as load",
    ("verify_invariance", "dtypes"): "both run dtypes: the invariance checks compare float64 with float32",
}
#: positional arguments a command needs to get as far as its argument checks
COMMAND_ARGS = {"verify": ["nothing.json"], "sweep": ["default"], "group": ["--model", "default", "--verify"]}


def _refusal(name: str, value: object, shown: str) -> str:
    """The declared constraint's error text for ``value`` under the spelling ``shown``."""
    with pytest.raises(SymtransError) as e:
        PARAMS[name].check(value, shown)
    return str(e.value)


def test_every_declared_bad_value_is_refused_and_every_default_accepted() -> None:
    for name, p in PARAMS.items():
        assert p.bad, name
        assert p.check(p.default, name) == p.default, name
        for v in p.bad:
            text = _refusal(name, v, name)
            assert text.startswith(name) and "\n" not in text, (name, v, text)


def test_one_default_for_n_everywhere() -> None:
    assert RunConfig().n == DEFAULT_N == 128
    for fname in API:
        sig = inspect.signature(getattr(symtrans, fname))
        if "n" in sig.parameters:
            assert sig.parameters["n"].default == DEFAULT_N, fname
    for command in COMMAND_MODULES:
        sp = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        for a in sp._actions:
            for name in ("n", "seed", "dtype", "stream"):
                if spelling(name, cli=True) in a.option_strings and a.default is not None:
                    assert a.default in (PARAMS[name].default, [PARAMS[name].default]), (command, name)
                    assert a.choices is None, (command, name)  # refused by the declared constraint, not argparse


def test_pinned_texts() -> None:
    assert _refusal("n", 1, "n") == "n 1: must be at least 2"
    assert _refusal("n", 1, "--n") == "--n 1: must be at least 2"
    assert _refusal("seed", -1, "seed") == "seed -1: must be at least 0"
    assert _refusal("n", "8", "n") == "n: expected an integer, got '8'"
    assert spelling("n", cli=True) == "--n" and spelling("n", cli=False) == "n"


def _keyword(params: Any, name: str) -> str | None:
    """The API keyword of run parameter ``name`` in a signature: ``n``, or its list form ``ns`` (several runs)."""
    return name if name in params else (name + "s" if name + "s" in params else None)


def _api_cases() -> list[tuple[str, str, object]]:
    out = []
    for fname in API:
        params = inspect.signature(getattr(symtrans, fname)).parameters
        for name, p in PARAMS.items():
            if _keyword(params, name) is not None:
                out += [(fname, name, v) for v in p.bad]
    return out


@pytest.mark.parametrize("fname, name, value", _api_cases())
def test_every_api_function_refuses_with_the_one_text(fname: str, name: str, value: object) -> None:
    """The declared constraint's text, naming the keyword as the caller wrote it (``ns`` for a list of n)."""
    fn = getattr(symtrans, fname)
    key = _keyword(inspect.signature(fn).parameters, name)
    assert key is not None
    kwargs = {**API[fname], key: [value] if key != name else value}
    with pytest.raises(SymtransError) as e:
        fn(**kwargs)
    assert str(e.value) == _refusal(name, value, key), (fname, kwargs)


def test_every_public_function_with_a_run_parameter_is_fed_bad_values() -> None:
    """Like scikit-learn's test_public_functions: a public function taking n, seed, dtype, ... is in API (or says why not)."""
    takers = set()
    for fname in symtrans.__all__:
        obj = getattr(symtrans, fname)
        if not callable(obj) or inspect.isclass(obj):
            continue
        params = inspect.signature(obj).parameters
        if any(_keyword(params, name) for name in PARAMS):
            takers.add(fname)
    assert takers - set(NOT_RUN_PARAMETERS) == set(API), takers ^ set(API)
    assert set(NOT_RUN_PARAMETERS) <= takers  # an exemption that no longer applies is removed


def test_one_default_for_every_run_parameter_in_the_api() -> None:
    """Each API default of a run parameter is the declared one (its list form: a list of it), bar OTHER_DEFAULTS."""
    assert (DEFAULT_SEED, DEFAULT_DTYPE) == (PARAMS["seed"].default, PARAMS["dtype"].default) == (0, "float64")
    seen = set()
    for fname in API:
        params = inspect.signature(getattr(symtrans, fname)).parameters
        for name, p in PARAMS.items():
            key = _keyword(params, name)
            if key is None or (fname, key) in OTHER_DEFAULTS:
                continue
            default = params[key].default
            expected = p.default if key == name else (p.default,)
            assert default == expected or (default is None and name in ("device", "eps", "layers")), (fname, key)
            seen.add((fname, key))
    assert {("sweep", "ns"), ("sweep", "seeds"), ("measure", "seed"), ("check_claims", "dtype")} <= seen
    assert inspect.signature(symtrans.verify_invariance).parameters["dtypes"].default == RUN_DTYPES


def test_api_covers_n_seed_dtype_device() -> None:
    covered = {(f, n) for f, n, _ in _api_cases()}
    for fname in ("check_claims", "measure", "proof_graph", "proof_report"):
        assert {(fname, n) for n in ("n", "seed", "dtype", "device")} <= covered, fname
    assert {("certify_claims", "n"), ("certify_claims", "seed"), ("verify_invariance", "n"),
            ("verify_invariance", "dtype"), ("load", "dtype"), ("load", "device")} <= covered


def _cli_cases() -> list[tuple[str, str, object]]:
    """(command, parameter, bad value) for every command's run flags; values argparse passes on unchanged."""
    out = []
    for command in COMMAND_MODULES:
        sp = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        flags = {o: a for a in sp._actions for o in a.option_strings}
        for name, p in PARAMS.items():
            a = flags.get(spelling(name, cli=True))
            if a is None or a.dest not in (name, name + "s") or name == "layers":
                continue  # --layers is text, read by symtrans.args.parse_layers (its refusals are its doctests)
            assert a.choices is None, (command, name)  # one refusal: the declared constraint's, not argparse's
            for v in p.bad:  # the values a command line can carry unchanged through the flag's argparse type
                number = isinstance(v, (int, float)) and not isinstance(v, bool)
                if (a.type is int and number and isinstance(v, int)) or (a.type is float and number) or \
                        (a.type is None and isinstance(v, str)):
                    out.append((command, name, v))
    return out


@pytest.mark.parametrize("command, name, value", _cli_cases())
def test_every_command_refuses_with_the_one_text(command: str, name: str, value: object,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    flag = spelling(name, cli=True)
    rc = main([command, *COMMAND_ARGS.get(command, []), flag, str(value)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, (command, flag, value)
    assert err[-1] == "symtrans: error: " + _refusal(name, value, flag), err


def test_cli_covers_n_seed_device_on_every_run_command() -> None:
    covered = {(c, n) for c, n, _ in _cli_cases()}
    for command in ("check", "measure", "group", "report", "certify", "sweep"):
        assert (command, "n") in covered and (command, "seed") in covered, command
    for command in ("check", "measure", "report", "sweep"):
        assert (command, "dtype") in covered and (command, "device") in covered, command
    assert ("report", "stream") in covered and ("measure", "stream") in covered
    assert {("check", "eps"), ("report", "eps")} <= covered


def test_run_config_is_frozen_and_checked() -> None:
    cfg = RunConfig.from_kwargs(model="default", n=16, seed=3)
    with pytest.raises(AttributeError):
        cfg.n = 4  # type: ignore[misc]
    with pytest.raises(SymtransError, match="^n 1: must be at least 2$"):
        cfg.replace(n=1)
    with pytest.raises(TypeError, match="unknown run parameters: bogus"):
        RunConfig.from_kwargs(bogus=1)
    assert check_param("layers", [3, 1, 3]) == (1, 3)


def test_listing_the_configuration_imports_no_torch() -> None:
    import subprocess

    code = "import sys, symtrans.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out


def test_context_loads_through_the_loader_passed_in() -> None:
    """Context = a RunConfig's fields + a cache + a loader passed in: it loads once per (dtype, device), via it."""
    from symtrans.context import Context

    calls: list[tuple[object, ...]] = []

    def loader(model: object, *, dtype: str, device: str, stream: str) -> object:
        calls.append((model, dtype, device, stream))
        return f"weights of {model} in {dtype}"

    ctx = Context.from_config(RunConfig.from_kwargs(model="some-dir", dtype="float32", device="cpu", stream="on"),
                              loader=loader)
    assert ctx.weights() == "weights of some-dir in float32" and ctx.weights() is ctx.weights()
    assert calls == [("some-dir", "float32", "cpu", "on")]  # one load, cached
    ctx.weights(dtype="float64")
    assert calls[-1] == ("some-dir", "float64", "cpu", "on") and len(calls) == 2
    with pytest.raises(SymtransError, match="no model given"):
        Context(model=None, loader=loader).weights()
    assert len(calls) == 2


def test_the_records_module_imports_no_engine_and_holds_no_context() -> None:
    """evidence.py keeps the records only: no Context, and importing it (or the context) loads no engine."""
    import subprocess

    import symtrans.evidence as evidence

    assert not hasattr(evidence, "Context") and "Context" not in evidence.__all__
    code = ("import sys, symtrans.context; print(sorted(m for m in sys.modules if m == 'torch' "
            "or m.startswith(('symtrans.numeric', 'symtrans.producers', 'symtrans.certify', 'symtrans.group'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out


# ----------------------------------------------------------------- no second default in the run's entry points
import ast  # noqa: E402
from pathlib import Path  # noqa: E402

SOURCE = Path(symtrans.__file__).resolve().parent
#: the modules that start runs (the API, the CLI, the sweep, the report, the runner and its context); an engine's
#: own small sizes (e.g. a fibre measured at n = 4) are its mathematics, not a run's default
ENTRY_MODULES = ["api.py", "sweeps.py", "args.py", "context.py", "runner.py", "cli/*.py", "report/*.py",
                 "group/numeric.py"]


def literal_run_defaults(text: str) -> list[tuple[str, str, object]]:
    """(function, parameter, literal) for each n/seed/dtype/stream parameter whose default is written as a literal."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + \
                [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, d in pairs:
                name = arg.arg[:-1] if arg.arg in ("ns", "seeds", "dtypes") else arg.arg
                if name not in ("n", "seed", "dtype", "stream"):
                    continue
                try:
                    value = ast.literal_eval(d)  # a literal (a tuple of declared names is not one)
                except ValueError:
                    continue
                if value is not None:
                    out.append((node.name, arg.arg, value))
    return out


def test_the_literal_default_scan_finds_a_planted_one() -> None:
    planted = ("def f(model, *, n: int = 12, seed=0, dtype=DEFAULT_DTYPE, ns=(128,), stream=None):\n    pass\n"
               "def g(x, n=DEFAULT_N, dtypes=('float64',), seeds=(DEFAULT_SEED,)):\n    pass\n")
    assert literal_run_defaults(planted) == [("f", "n", 12), ("f", "seed", 0), ("f", "ns", (128,)),
                                            ("g", "dtypes", ("float64",))]


def test_no_literal_default_for_a_run_parameter_in_an_entry_point() -> None:
    """n, seed, dtype, stream default to symtrans.config's declared values (or None, or no default), never a literal."""
    files = sorted({p for pattern in ENTRY_MODULES for p in SOURCE.glob(pattern)})
    assert len(files) > 15
    found = [(str(p.relative_to(SOURCE)), *hit) for p in files for hit in literal_run_defaults(p.read_text())]
    assert not found, found


@pytest.mark.parametrize("name", list(PARAMS))
def test_a_context_refuses_every_declared_bad_value(name: str) -> None:
    """A Context built directly (not from a RunConfig) still goes through each parameter's one constraint."""
    from symtrans.context import Context

    for value in PARAMS[name].bad:
        with pytest.raises(SymtransError) as e:
            Context(model=None, **{name: value})
        assert str(e.value) == _refusal(name, value, name)


def test_no_fake_command_line_outside_the_cli() -> None:
    """The API and the sweep check their arguments themselves: no argparse.Namespace is built outside symtrans/cli."""
    found = [str(p.relative_to(SOURCE)) for p in sorted(SOURCE.rglob("*.py"))
             if "cli" not in p.relative_to(SOURCE).parts and "argparse.Namespace(" in
             "\n".join(line for line in p.read_text().splitlines() if ">>>" not in line)]
    assert not found, found


def test_the_default_loader_named_by_the_context_exists() -> None:
    """DEFAULT_LOADER is a "module:function" string (the context imports no engine): it must name a real function."""
    from symtrans.context import DEFAULT_LOADER, _default_loader
    from symtrans.numeric.streaming import load_run_weights

    assert DEFAULT_LOADER == "symtrans.numeric.streaming:load_run_weights"
    assert _default_loader() is load_run_weights
