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

import psutil
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


@pytest.fixture
def report_process() -> dict[str, str]:
    """The environment of a ``python -m symtrans`` process that builds reports (out of the quick tier)."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


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


# --- 3. damaged or missing output accepted with exit 0 ------------------------------------------------------

def _damaged_decoder(tmp: Path) -> Path:
    """A tiny Llama checkpoint whose layer 1 o_proj is stored with the wrong shape."""
    import torch
    from safetensors.torch import load_file, save_file

    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp / "dec", "llama")
    state = load_file(path / "model.safetensors")
    state["layers.1.self_attn.o_proj.weight"] = torch.zeros(3, 5)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path


@pytest.mark.parametrize("stream", ["off", "on"])
def test_report_on_a_subset_refuses_a_damaged_later_layer(stream: str, tmp_path: Path, capsys: Any) -> None:
    """``--stream on --layers 0`` wrote a report although layer 1 is malformed; ``--stream off`` refused it."""
    path = _damaged_decoder(tmp_path)
    out = tmp_path / "rep"
    err = _refused(capsys, ["report", "--model", str(path), "--stream", stream, "--layers", "0", "--n", "4",
                            "--out", str(out), "--quiet"], seconds=60)
    assert "layers.1.self_attn.o_proj.weight" in err and "has shape (3, 5)" in err, err
    assert not out.exists()


@pytest.mark.parametrize("target", ["", "dir", "/proc/c.json", "file/c.json"])
def test_certificate_out_is_probed_before_any_measurement(target: str, tmp_path: Path, capsys: Any) -> None:
    """``--certificate-out ''`` wrote nothing and said nothing; a directory or /proc was refused after the work."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    if target and not target.startswith("/"):
        target = str(tmp_path / target)
    err = _refused(capsys, ["group", "--arch", "gpt2", "--complete", "--certificate-out", target], seconds=5)
    assert "--certificate-out" in err, err


# --- 4. sizes bounded before they are expanded ----------------------------------------------------------------

@pytest.mark.parametrize("text", ["0-999999," * 14000, "1," * 30000])
def test_layers_lists_are_bounded_before_expansion(text: str, tmp_path: Path, capsys: Any) -> None:
    """``--layers "0-999999,"`` x 14,000 took 0.1 s per item; the ranges are checked against the model first."""
    err = _refused(capsys, ["report", "--layers", text, "--out", str(tmp_path / "r"), "--quiet"], seconds=10)
    assert "--layers" in err and ("out of range" in err or "items" in err), err


def test_parse_layers_merges_and_deduplicates_like_a_set() -> None:
    """The interval route gives exactly the set of the listed indices (brute force on small inputs)."""
    import random

    from symtrans.args import parse_layers

    rng = random.Random(0)
    for _ in range(300):
        items, want = [], set()
        for _ in range(rng.randint(1, 6)):
            lo = rng.randint(0, 20)
            hi = lo + rng.randint(0, 5)
            items.append(f"{lo}-{hi}" if rng.random() < 0.5 else str(lo))
            want.update(range(lo, hi + 1) if "-" in items[-1] else [lo])
        assert parse_layers(",".join(items)) == tuple(sorted(want))


def test_complete_layer_counts_deduplicated_and_checked_before_starting(tmp_path: Path) -> None:
    """``--layers "1,"`` x 30,000 made one instance per count; ``--layers 1,x`` printed "starting" first."""
    import subprocess
    import sys

    from symtrans.args import parse_layer_counts

    from symtrans.errors import SymtransError

    assert parse_layer_counts("1," * 3000 + "2") == (1, 2)  # repeats count once
    t0 = time.perf_counter()
    with pytest.raises(SymtransError, match="more than 4096 items"):
        parse_layer_counts("1," * 30000)
    assert time.perf_counter() - t0 < 1
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-m", "symtrans", "group", "--arch", "gpt2", "--complete", "--layers", "1,x"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "starting" not in p.stderr, p.stderr


def _config(tmp: Path, **fields: Any) -> Path:
    cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
           "intermediate_size": 64, "max_position_embeddings": 64, "vocab_size": 100, "layer_norm_eps": 1e-6,
           **fields}
    (tmp / "config.json").write_text(json.dumps(cfg))
    return tmp / "config.json"


def test_group_of_huge_heads_uses_the_formula_size_guard(tmp_path: Path, capsys: Any) -> None:
    """``group --arch`` with 10^6 heads had no size guard (H! has 5.6 million digits); the formula command has one."""
    from symtrans.validate import MAX_EXACT_DIGITS

    cfg = _config(tmp_path, num_attention_heads=10**6, hidden_size=10**6)
    err = _refused(capsys, ["group", "--arch", str(cfg)], seconds=10)
    assert f"at most {MAX_EXACT_DIGITS} are computed" in err, err
    formula = _refused(capsys, ["formula", "ffn-permutations", "--arch", "bert-base", "--set", "d_ff=1000000"])
    assert f"at most {MAX_EXACT_DIGITS} are computed" in formula  # the same guard, the same words


def test_complete_on_huge_layer_counts_refused_before_listing(tmp_path: Path, capsys: Any) -> None:
    """10^6 layers took 236 s and 3 GB (near-symmetries listed per layer, twice); 10^7 raised MemoryError."""
    from symtrans.group.complete import MAX_LAYERS

    cfg = _config(tmp_path, num_hidden_layers=10**7)
    err = _refused(capsys, ["group", "--arch", str(cfg), "--complete"], seconds=10)
    assert f"at most {MAX_LAYERS} layers" in err, err


# --- 5. one line instead of a traceback -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def float8_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch
    from safetensors.torch import load_file, save_file

    from symtrans.numeric.fixtures import random_checkpoint

    out = {}
    for dt in ("float8_e4m3fn", "float8_e5m2"):
        path, _ = random_checkpoint(tmp_path_factory.mktemp(dt) / "m", "bert")
        state = {k: v.to(getattr(torch, dt)) for k, v in load_file(path / "model.safetensors").items()}
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        out[dt] = path
    return out


@pytest.mark.parametrize("dt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("command", ["measure", "report", "check", "group", "sweep"])
def test_float8_checkpoints_refused_in_one_line_by_every_command(dt: str, command: str, float8_models: dict[str, Path],
                                                                 tmp_path: Path, capsys: Any) -> None:
    """``measure`` gave ``unknown storage dtype`` (a regression), ``report`` quietly lost 9 producers."""
    m = str(float8_models[dt])
    argv = {"measure": ["measure", "--model", m, "--n", "4"],
            "report": ["report", "--model", m, "--n", "4", "--out", str(tmp_path / "r")],
            "check": ["check", "--model", m, "--n", "4"],
            "group": ["group", "--model", m, "--verify", "--n", "4"],
            "sweep": ["sweep", m, "--n", "4", "--engine", "local", "--device", "cpu", "--out", str(tmp_path / "s")]}
    err = _refused(capsys, argv[command] + ["--quiet"], seconds=60)
    assert "a storage dtype symtrans does not model" in err and ("F8_E" in err or "float8" in err), err
    assert not (tmp_path / "r").exists() and _tree(tmp_path / "s") == []


def _junk_objects() -> dict[str, Any]:
    from unittest.mock import MagicMock

    class ArchAndLayer:  # looked like loaded weights to the API
        arch = "x"

        def layer(self, i: int) -> dict[str, Any]:
            return {}

    class ListConfig:
        class config:  # noqa: N801 - a duck-typed transformers config
            @staticmethod
            def to_dict() -> list[int]:
                return [1, 2]

        def state_dict(self) -> dict[str, Any]:
            return {}

    return {"MagicMock": MagicMock(), "arch and layer": ArchAndLayer(), "to_dict list": ListConfig()}


@pytest.mark.parametrize("name", sorted(_junk_objects()))
def test_duck_typed_junk_objects_are_symtrans_errors(name: str) -> None:
    """``measure(MagicMock())``, an object with ``arch`` and a callable ``layer``, a config whose to_dict is a list."""
    import symtrans
    from symtrans.errors import SymtransError

    with pytest.raises(SymtransError):
        symtrans.measure(_junk_objects()[name], n=4)


def test_duck_typed_model_with_a_huge_expanded_view_refused_before_copying() -> None:
    """A word table of 10^9 rows as an expanded view holds kilobytes; its float64 copy would not fit."""
    import symtrans
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_model

    model = random_model("bert")
    rows = 10**9
    word = model.embeddings.word_embeddings.weight.detach()

    class Wrapped:
        config = model.config

        def state_dict(self) -> dict[str, Any]:
            sd = dict(model.state_dict())
            sd["embeddings.word_embeddings.weight"] = word[:1].expand(rows, word.shape[1])
            return sd

    model.config.vocab_size = rows
    t0 = time.perf_counter()
    with pytest.raises(SymtransError, match="GiB as float64"):
        symtrans.measure(Wrapped(), n=4)
    assert time.perf_counter() - t0 < 10


def test_certificate_with_huge_common_denominators_is_invalid_at_once() -> None:
    """Tangents 1/p for distinct 7-digit primes took 214 s to be found invalid; the denominators are bounded first."""
    import copy

    import sympy

    from symtrans.checker.check import MAX_DENOMINATOR_BITS, digest, verify_certificate
    from symtrans.certify.completeness import completeness_certificate

    cert = completeness_certificate("gpt2", layers=1)
    assert verify_certificate(cert)[0]  # the real one checks
    bad = copy.deepcopy(cert)
    primes = iter(sympy.sieve.primerange(10**6, 10**7))
    # since issue 37 a file carries no tangents (the checker derives them from the parameters): parameters
    # 1/p make the derived tangents' denominators huge, and a file with tangents is refused as a field
    bad["witness"]["parameters"] = {k: [[f"1/{next(primes)}" for _ in r] for r in v]
                                    for k, v in bad["witness"]["parameters"].items()}
    bad["digest"] = digest(bad)
    t0 = time.perf_counter()
    ok, why = verify_certificate(bad)
    assert not ok and f"passes {MAX_DENOMINATOR_BITS} bits" in why, why
    assert time.perf_counter() - t0 < 5
    old = copy.deepcopy(cert)
    old["witness"]["tangents"] = [[f"1/{next(primes)}"] * cert["asserts"]["parameters"]]
    old["digest"] = digest(old)
    t0 = time.perf_counter()
    ok, why = verify_certificate(old)
    assert not ok and "tangents" in why and time.perf_counter() - t0 < 5, why


def test_manifest_listing_a_huge_sparse_file_is_not_read_whole(tmp_path: Path, capsys: Any) -> None:
    """A certificate MANIFEST listing a sparse 6 GiB file raised MemoryError (the hash read it whole)."""
    import subprocess
    import sys

    from symtrans.checker.check import MANIFEST, manifest

    d = tmp_path / "certs"
    d.mkdir()
    with open(d / "big.json", "wb") as fh:
        fh.truncate(6 << 30)
    sealed = manifest({"big.json": ("0" * 64, "prop-6.2/identity-counterexample")}, n=128, seed=0)
    (d / MANIFEST).write_text(json.dumps(sealed))
    root = Path(__file__).resolve().parents[1]

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "symtrans", "verify", str(d), "--quiet"], capture_output=True,
                       text=True, timeout=60, preexec_fn=limit, env={**os.environ, "PYTHONPATH": str(root)})
    assert time.perf_counter() - t0 < 30
    assert "Traceback" not in p.stderr and "MemoryError" not in p.stderr, p.stderr
    assert "larger than a certificate may be" in p.stdout, (p.stdout, p.stderr)


# --- 6. partial output, late refusals, orphans ----------------------------------------------------------------

def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (a test's own process tree, orphans included)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes()
            state = (d / "stat").read_text().split(") ", 1)[1][:1]
        except OSError:
            continue
        if marker.encode() in env and state != "Z":
            found.append(int(d.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig, status", [("SIGTERM", 143), ("SIGINT", 130)])
def test_signal_on_a_running_sweep_leaves_no_process_and_no_partial_output(sig: str, status: int, tiny: Path,
                                                                           tmp_path: Path,
                                                                           report_process: dict[str, str]) -> None:
    """``kill -TERM`` on a running sweep left the worker and the resource tracker alive under init an hour later."""
    import signal
    import subprocess
    import sys
    import uuid

    from symtrans.sweeps import RUNNING

    marker = f"SYMTRANS_TEST_TREE={uuid.uuid4().hex}"
    out = tmp_path / "zoo"
    env = {**report_process, marker.split("=")[0]: marker.split("=")[1]}
    p = subprocess.Popen([sys.executable, "-m", "symtrans", "sweep", str(tiny), "--n", "4", "8", "--engine", "local",
                          "--workers", "2", "--device", "cpu", "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob(f"tasks/*/{RUNNING}")):  # a worker runs a task
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status, err
    assert err.strip().splitlines()[-1] in ("symtrans: terminated", "symtrans: interrupted"), err
    assert "Traceback" not in err, err
    deadline = time.monotonic() + 10  # the kernel delivers the workers' death signal at once; allow for reaping
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []
    assert not (out / "aggregate").exists() and not list(out.glob(f"tasks/*/{RUNNING}"))


def test_ray_engine_that_cannot_start_creates_nothing(tiny: Path, tmp_path: Path, capsys: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With Ray hidden, or a ray:// address without ray[client], ``zoo/`` was created before the refusal."""
    import sys

    out = tmp_path / "zoo"
    argv = ["sweep", str(tiny), "--n", "4", "--out", str(out), "--quiet"]
    try:
        import grpc  # noqa: F401
    except ImportError:
        err = _refused(capsys, argv + ["--address", "ray://127.0.0.1:1"])
        assert "ray[client]" in err
        assert not out.exists()
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    err = _refused(capsys, argv + ["--engine", "ray"])
    assert "needs Ray" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (none once it has exited)."""
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or (os.cpu_count() or 1) < 2,
                    reason="needs /proc and 2 CPUs (the report's forked worker)")
def test_ctrl_c_during_report_prints_no_worker_traceback(tmp_path: Path, report_process: dict[str, str]) -> None:
    """Ctrl-C (SIGINT to the whole process group) printed a KeyboardInterrupt traceback from the forked worker."""
    import signal
    import subprocess
    import sys
    import uuid

    marker = uuid.uuid4().hex
    out = tmp_path / "rep"
    p = subprocess.Popen([sys.executable, "-m", "symtrans", "report", "--model", "default", "--n", "16", "--out",
                          str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env={**report_process, "SYMTRANS_TEST_TREE": marker})
    try:
        deadline = time.monotonic() + 120
        while not _children(p.pid):  # the forked worker runs producers
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        time.sleep(1.0)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "symtrans: interrupted", err
    assert not out.exists()
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 128 KiB tmpfs (root only; skipped elsewhere), unmounted afterwards; ``fill()`` leaves it full."""
    import subprocess

    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")

    def fill() -> None:
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)

    try:
        yield mnt, fill
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_is_refused_before_any_work(small_disk: Any, tiny: Path, capsys: Any) -> None:
    """``--certificate-out``, ``report --out`` and ``sweep --out`` on a full disk: refused at once, not after the work."""
    mnt, fill = small_disk
    fill()
    for argv in (["group", "--arch", "gpt2", "--complete", "--certificate-out", str(mnt / "c.json")],
                 ["report", "--model", "none", "--out", str(mnt / "rep"), "--quiet"],
                 ["sweep", str(tiny), "--n", "4", "--engine", "local", "--out", str(mnt / "zoo"), "--quiet"]):
        err = _refused(capsys, argv, seconds=20)
        assert "No space left on device" in err, err
    assert sorted(p.name for p in mnt.iterdir()) == ["fill"]


@pytest.mark.slow
def test_disk_filling_up_during_a_sweep_stops_it_in_one_line(small_disk: Any, tiny: Path, capsys: Any) -> None:
    """``sweep --out`` on a disk that fills up: ``OSError: [Errno 28]`` in the worker; now one line, exit 2."""
    mnt, _ = small_disk
    err = _refused(capsys, ["sweep", str(tiny), "--n", "4", "--engine", "local", "--device", "cpu",
                            "--out", str(mnt / "zoo"), "--quiet"], seconds=300)
    assert "No space left on device" in err, err
    assert not (mnt / "zoo" / "aggregate").exists()


def test_sweep_refuses_what_measure_refuses_before_any_worker(tiny: Path, tmp_path: Path, capsys: Any) -> None:
    """10^15 layers in config.json, or a header declaring a [2^40, 32] table, reached a sweep worker (exit 1)."""
    import shutil
    import struct

    from symtrans.numeric.weights import safetensors_header

    layers = tmp_path / "layers"
    shutil.copytree(tiny, layers)
    cfg = json.loads((layers / "config.json").read_text())
    cfg["num_hidden_layers"] = 10**15
    (layers / "config.json").write_text(json.dumps(cfg))

    table = tmp_path / "table"
    shutil.copytree(tiny, table)
    raw = (table / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n])
    key = next(k for k in head if k.endswith("word_embeddings.weight"))
    assert key in safetensors_header(tiny / "model.safetensors")
    head[key]["shape"] = [2**40, 32]
    new = json.dumps(head).encode()
    new += b" " * (-len(new) % 8)
    (table / "model.safetensors").write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])
    for model in (layers, table):
        out = tmp_path / f"zoo-{model.name}"
        measured = _refused(capsys, ["measure", "--model", str(model), "--n", "4", "--quiet"])
        swept = _refused(capsys, ["sweep", str(model), "--n", "4", "--engine", "local", "--out", str(out), "--quiet"])
        assert swept == measured, (swept, measured)  # the same refusal, from the same check
        assert not out.exists()


# --- 7. cosmetic ------------------------------------------------------------------------------------------------

def test_plain_text_repr_of_api_results_escapes_terminal_sequences(tiny: Path, tmp_path: Path) -> None:
    """A raw terminal escape from a model's name reached the plain-text ``repr`` (the HTML displays escaped it)."""
    import shutil

    import symtrans

    model = tmp_path / "evil"
    shutil.copytree(tiny, model)
    cfg = json.loads((model / "config.json").read_text())
    cfg["_name_or_path"] = "evil\x1b[2J\x1b]0;title\x07\u202e"
    (model / "config.json").write_text(json.dumps(cfg))
    text = repr(symtrans.measure(str(model), n=4))
    assert "evil\\x1b[2J\\x1b]0;title\\x07\\u202e" in text, text
    assert not any(c in text for c in "\x1b\x07\u202e")
