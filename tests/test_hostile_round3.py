"""Hostile inputs, round 3 (issue 39): sweeps, layer subsets, completeness, rotary fields, the API's objects.

One test (or one parametrised list) per class of the issue, written from its description: each input is
refused in one line ``symtrans: error: ...`` with exit status 2, quickly, and nothing is written outside
the output folder (nor, for a refusal, inside it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from symtrans.cli import main


def _tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")) if d.exists() else []


def _refused(capsys: Any, argv: list[str], seconds: float = 30.0) -> str:
    """main(argv) in this process: exit 2, one line on stderr, no traceback, within ``seconds``; the line."""
    t0 = time.perf_counter()
    rc = main(argv)
    took = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc == 2, (argv, out, err)
    assert err.startswith("symtrans") and ": error: " in err and err.count("\n") == 1, err
    assert "Traceback" not in err + out
    assert took < seconds, f"{argv}: refused after {took:.1f} s"
    return err


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT checkpoint (its sweep plan takes a second)."""
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path_factory.mktemp("tiny") / "enc", "bert")
    return path


# --- 1. a write outside the output folder -------------------------------------------------------------------

@pytest.mark.parametrize("where", ["task folder", "tasks", "report"])
def test_sweep_never_writes_through_a_planted_link(where: str, tiny: Path, tmp_path: Path, capsys: Any) -> None:
    """A link planted under the sweep folder (a task's folder, ``tasks/``, a task's ``report``) is refused."""
    from symtrans.sweeps import plan

    out, outside = tmp_path / "zoo", tmp_path / "elsewhere"
    outside.mkdir()
    task = plan([tiny], ns=[4], out=out, device="cpu")[0]
    folder = out / "tasks" / task.folder
    if where == "task folder":
        folder.parent.mkdir(parents=True)
        folder.symlink_to(outside, target_is_directory=True)
    elif where == "tasks":
        out.mkdir()
        (out / "tasks").symlink_to(outside, target_is_directory=True)
    else:
        folder.mkdir(parents=True)
        (folder / "report").symlink_to(outside, target_is_directory=True)
    err = _refused(capsys, ["sweep", str(tiny), "--n", "4", "--engine", "local", "--device", "cpu",
                            "--out", str(out), "--quiet"])
    assert "symbolic link" in err or "holds other files (tasks)" in err, err
    assert _tree(outside) == []


def test_confined_dir_refuses_a_link_at_any_depth(tmp_path: Path) -> None:
    """The one function that makes the directories a run writes never follows a link, at any depth."""
    from symtrans.errors import SymtransError
    from symtrans.outdir import confined_dir

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    assert confined_dir(root, "a", "b", "c") == root / "a" / "b" / "c"
    for depth in range(3):
        parts = ["a", "b", "c"][:depth + 1]
        victim = root.joinpath(*parts)
        os.rename(victim, tmp_path / f"kept{depth}")
        victim.symlink_to(outside, target_is_directory=True)
        with pytest.raises(SymtransError, match="symbolic link"):
            confined_dir(root, "a", "b", "c", "d")
        victim.unlink()
        os.rename(tmp_path / f"kept{depth}", victim)
    assert _tree(outside) == []
    with pytest.raises(SymtransError, match="not one file name"):
        confined_dir(root, "../x")


def test_task_record_that_is_a_directory_is_refused_before_any_work(tiny: Path, tmp_path: Path,
                                                                       capsys: Any) -> None:
    """A resume where ``task.json`` is a directory: one line (it used to be IsADirectoryError, a temp file left)."""
    from symtrans.sweeps import MARKER, plan

    out = tmp_path / "zoo"
    task = plan([tiny], ns=[4], out=out, device="cpu")[0]
    (out / "tasks" / task.folder / MARKER).mkdir(parents=True)
    before = _tree(out)
    err = _refused(capsys, ["sweep", str(tiny), "--n", "4", "--engine", "local", "--device", "cpu",
                            "--out", str(out), "--quiet"])
    assert "task.json: a directory is in the way" in err, err
    assert _tree(out) == before


# --- 2. silently wrong numbers from malformed rotary fields -------------------------------------------------

_LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_size": 32, "intermediate_size": 64, "max_position_embeddings": 64, "vocab_size": 100,
          "rms_norm_eps": 1e-6}

# (where, raw JSON of the value): each cannot be honoured as a rotary base
_BAD_THETAS = [(w, v) for w in ("top", "rope_parameters") for v in ("0", "-1", "1e400", "true", '"10000"',
                                                                   "[10000]", '{"a": 1}', "-0.0")]


def _rope_config(tmp: Path, where: str, raw: str, **extra: Any) -> Path:
    cfg = {**_LLAMA, **extra}
    text = json.dumps(cfg)[:-1]
    if where == "top":
        text += f', "rope_theta": {raw}}}'
    else:
        text += f', "rope_parameters": {{"rope_type": "default", "rope_theta": {raw}}}}}'
    d = tmp / "cfg"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(text)
    return d / "config.json"


@pytest.mark.parametrize("where,raw", _BAD_THETAS, ids=[f"{w}={v}" for w, v in _BAD_THETAS])
def test_rope_theta_that_cannot_be_honoured_is_refused(where: str, raw: str, tmp_path: Path, capsys: Any) -> None:
    """rope_theta 0 used to become 10000, 1e400 inf, true 1; negative, string and list ones gave tracebacks."""
    cfg = _rope_config(tmp_path, where, raw)
    for argv in (["group", "--arch", str(cfg)], ["group", "--arch", str(cfg), "--complete", "--layers", "1"],
                 ["arch", str(cfg)]):
        err = _refused(capsys, argv)
        assert "rope_theta" in err and "positive number" in err, err


@pytest.mark.parametrize("kind", ['["default"]', '{"name": "default"}', "7", "true"])
def test_rope_type_that_is_not_a_name_is_refused(kind: str, tmp_path: Path, capsys: Any) -> None:
    """rope_type as a list or an object gave ``TypeError: unhashable type``."""
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(_LLAMA)[:-1] + f', "rope_scaling": {{"rope_type": {kind}}}}}')
    err = _refused(capsys, ["group", "--arch", str(d / "config.json")])
    assert "rope_type must be a string" in err, err


@pytest.mark.parametrize("field,raw", [("factor", "true"), ("factor", "0"), ("factor", "1e400"),
                                       ("factor", '"8"'), ("original_max_position_embeddings", "-4")])
def test_rope_scaling_numbers_must_be_positive_and_finite(field: str, raw: str, tmp_path: Path,
                                                          capsys: Any) -> None:
    """A scaling factor of ``true`` is not 1, and 0 or 1e400 cannot be honoured."""
    d = tmp_path / "cfg"
    d.mkdir()
    fields = {"factor": "8.0", "low_freq_factor": "1.0", "high_freq_factor": "4.0",
              "original_max_position_embeddings": "8192", field: raw}
    body = ", ".join(f'"{k}": {v}' for k, v in fields.items())
    (d / "config.json").write_text(json.dumps(_LLAMA)[:-1] + f', "rope_scaling": {{"rope_type": "llama3", {body}}}}}')
    err = _refused(capsys, ["group", "--arch", str(d / "config.json")])
    assert field in err and "positive finite number" in err, err


@pytest.mark.parametrize("theta", [1.0, 0.5, 500000.0])
def test_rope_theta_given_is_the_theta_used(theta: float, tmp_path: Path) -> None:
    """A valid base reaches the numeric forward unchanged (1.0 and 0.5 are not replaced), and changes the output."""
    import torch

    from symtrans.numeric import load_model
    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.numeric.forward import rope_tables, structure

    path, _ = random_checkpoint(tmp_path / "dec", "llama")
    cfg = json.loads((path / "config.json").read_text())
    cfg.pop("rope_scaling", None)
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    (path / "config.json").write_text(json.dumps(cfg))
    st = structure(load_model(path))
    assert st.rope_theta == theta
    cos, _ = rope_tables(4, 8, theta, torch.float64)
    # an independent route: cos(i * theta^(-2f/d)) at position 1, frequency 1 (rotate_half layout)
    assert abs(float(cos[1, 1]) - float(torch.cos(torch.tensor(theta, dtype=torch.float64) ** (-2 / 8)))) < 1e-12
