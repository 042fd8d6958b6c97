"""Hostile inputs, round 3 (issue 39): sweeps, layer subsets, completeness, rotary fields, the API's objects.

One test (or one parametrised list) per class of the issue, written from its description: each input is
refused in one line ``symtrans: error: ...`` with exit status 2, quickly, and nothing is written outside
the output folder (nor, for a refusal, inside it).
"""

from __future__ import annotations

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
