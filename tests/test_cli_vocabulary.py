"""One meaning per flag across commands, arguments refused before heavy imports, progress within a second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from symtrans.cli import COMMAND_MODULES, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _light(argv: list[str]) -> tuple[int, str, bool]:
    """Run ``main(argv)`` in a fresh interpreter: exit status, stderr, and whether torch got imported."""
    code = ("import sys; from symtrans.cli import main; rc = main(sys.argv[1:]); "
            "print('TORCH' if 'torch' in sys.modules else 'LIGHT'); sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, *argv], env=ENV, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    return out.returncode, out.stderr, out.stdout.strip().endswith("TORCH")


@pytest.mark.parametrize("argv, message", [
    (["check", "--model", "none"], "--model none: check needs a model"),
    (["measure", "--model", "none"], "--model none: measure needs a model"),
    (["group", "--arch", "bert-base", "--verify", "--model", "none"], "--model none: group needs a model"),
    (["measure", "--n", "1"], "--n 1: must be at least 2"),
    (["report", "--n", "1", "--model", "none"], "--n 1: must be at least 2"),
])
def test_refused_before_heavy_imports_in_one_line(argv: list[str], message: str) -> None:
    rc, err, torch_imported = _light(argv)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not torch_imported  # not after 12 s of loading: before torch is even imported


def test_model_none_means_no_model_where_a_command_runs_without_one() -> None:
    for command in ("report", "certify"):
        args = build_parser(command).parse_args([command, "--model", "none"])
        assert args.model == "none" and args.model_none_ok is True


def test_device_and_progress_flags_mean_the_same_on_every_command() -> None:
    helps: dict[str, set[str]] = {"--device": set(), "--progress": set(), "--quiet": set()}
    with_device = set()
    for command in COMMAND_MODULES:
        sp = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        actions = {o: a for a in sp._actions for o in a.option_strings}
        for flag in ("--progress", "--quiet"):
            assert flag in actions, (command, flag)
            helps[flag].add(actions[flag].help)
        if "--device" in actions:
            assert actions["--device"].default is None, command
            helps["--device"].add(actions["--device"].help)
            with_device.add(command)
        assert actions["--progress"].choices == ("auto", "on", "off")
    assert all(len(h) == 1 for h in helps.values()), helps  # one definition, one text
    assert with_device >= {"check", "measure", "report"}


def test_claims_blocks_says_no_blockers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", "H1", "--blocks", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("no blockers: ")


@pytest.mark.parametrize("argv", [["group", "--complete", "--arch", "bert-base"],
                                  ["claims", "thm-4.2", "--blocks"]])
def test_slow_commands_show_progress_within_a_second_in_a_pipe(argv: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "symtrans", *argv], env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        start = time.monotonic()
        first = proc.stderr.readline()  # type: ignore[union-attr]
        waited = time.monotonic() - start
        assert f"symtrans {argv[0]}: starting" in first
        assert proc.poll() is None or waited < 30  # the line came while the command still ran
    finally:
        proc.kill()
        proc.wait()


def test_verify_announces_itself(tmp_path: Path) -> None:
    from symtrans.cli import SLOW

    assert "verify" in SLOW and "--complete" in SLOW["group"] and "--blocks" in SLOW["claims"]


def test_certify_takes_claims_as_check_does(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    outs = []
    for argv in (["certify", "prop-5.1"], ["certify", "--claims", "prop-5.1"]):
        assert main([*argv, "--model", "none", "--format", "json", "--quiet"]) == 0
        outs.append([(c["id"], c["verdict"]) for c in json.loads(capsys.readouterr().out)["claims"]])
    from symtrans.certify.coq import coq_tools

    # certified by the kernel-checked Coq proof where Coq is installed; otherwise proved (text): supported
    assert outs[0] == outs[1] == [("prop-5.1", "certified" if coq_tools() else "supported")]
    rc, err, torch_imported = _light(["certify", "--claims", "prop-51"])
    assert rc == 2 and "did you mean 'prop-5.1'" in err and not torch_imported
