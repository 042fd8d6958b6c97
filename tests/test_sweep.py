"""``symtrans sweep`` without an engine: the planner, resume, failure records and the aggregate.

Two tiny random checkpoints (an encoder and a Llama-style decoder) are each
reported once through :func:`symtrans.sweeps.run_task` in this process; every
test reads those reports. The engines (Ray, the local pool) are exercised in
``tests/test_sweep_ray.py`` (slow tier).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from symtrans.errors import SymtransError
from symtrans.sweeps import (FAILED, MARKER, aggregate, pending, plan, render_csv, render_html, render_markdown,
                             run_sweep, run_task, task_state)

N = 8


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two tiny checkpoints (one with a hostile directory name), planned and run once, without an engine."""
    from symtrans.numeric.fixtures import random_checkpoint

    root = tmp_path_factory.mktemp("zoo")
    enc, _ = random_checkpoint(root / "enc|<b>*x*", "bert")
    dec, _ = random_checkpoint(root / "dec", "llama")
    out = root / "sweep"
    tasks = plan([enc, dec], ns=[N], seeds=[0], out=out, device="cpu")
    records = [run_task(t, out) for t in tasks]
    return {"root": root, "enc": enc, "dec": dec, "out": out, "tasks": tasks, "records": records}


def _report_json(out: Path, task: Any) -> dict[str, Any]:
    return json.loads((out / "tasks" / task.folder / "report" / "report.json").read_text(encoding="utf-8"))


# --- the planner ---------------------------------------------------------------------------------------------

def test_plan_one_task_per_model_n_seed_with_distinct_keys(zoo: dict[str, Any]) -> None:
    tasks = plan([zoo["enc"], zoo["dec"]], ns=[8, 16], seeds=[0, 3], out=zoo["root"] / "p1", device="cpu")
    assert [(t.label, t.n, t.seed) for t in tasks] == [
        (m, n, s) for m in ("enc|<b>*x*", "dec") for n in (8, 16) for s in (0, 3)]
    assert len({t.key for t in tasks}) == 8 and len({t.folder for t in tasks}) == 8
    for t in tasks:  # the folder is file-name safe whatever the model's name
        assert all(c.isalnum() or c in "._-" for c in t.folder)
        assert t.identity["n"] == t.n and t.identity["seed"] == t.seed
        assert t.identity["toolkit_version"] and len(t.identity["producers"]) == 64


def test_plan_key_follows_the_weights_and_the_version(zoo: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from symtrans.numeric.weights import load_model

    copy = zoo["root"] / "dec-copy"
    shutil.copytree(zoo["dec"], copy)
    a = plan([zoo["dec"]], ns=[N], out=zoo["root"] / "p2", device="cpu")[0]
    b = plan([copy], ns=[N], out=zoo["root"] / "p2", device="cpu")[0]
    assert a.key == b.key  # the same bytes elsewhere: the same report
    assert a.identity["weights"] == "sha256:" + load_model(zoo["dec"]).weights_hash
    raw = bytearray((copy / "model.safetensors").read_bytes())
    raw[-1] ^= 1  # one bit of one weight
    (copy / "model.safetensors").write_bytes(bytes(raw))
    c = plan([copy], ns=[N], out=zoo["root"] / "p2", device="cpu")[0]
    assert c.key != a.key
    import symtrans

    monkeypatch.setattr(symtrans, "__version__", "9.9.9")
    assert plan([zoo["dec"]], ns=[N], out=zoo["root"] / "p2", device="cpu")[0].key != a.key


def test_plan_memory_from_the_header_counts_every_element(zoo: dict[str, Any]) -> None:
    """The header's element count equals the one safetensors' own reader gives, and sizes the memory request."""
    from safetensors import safe_open

    from symtrans.arch import from_config
    from symtrans.numeric.streaming import REPORT_FIXED_BYTES, report_memory_bytes
    from symtrans.numeric.weights import describe_checkpoint

    info = describe_checkpoint(zoo["dec"])
    with safe_open(str(zoo["dec"] / "model.safetensors"), framework="pt") as f:
        numel = sum(f.get_tensor(k).numel() for k in f.keys())
        stored = sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in f.keys())
    assert info["numel"] == numel and info["stored_bytes"] == stored
    task = plan([zoo["dec"]], ns=[N], out=zoo["root"] / "p3", device="cpu")[0]
    arch = from_config(zoo["dec"])
    assert task.resources["memory"] == report_memory_bytes(arch, numel, N) > REPORT_FIXED_BYTES + 16 * numel
    assert task.resources["num_cpus"] == 1 and task.resources["num_gpus"] == 0


def test_a_finished_task_records_its_peak_memory(zoo: dict[str, Any]) -> None:
    """The marker records the task's own peak resident set, not what the process held before the task."""
    import os

    for rec in zoo["records"]:
        assert rec["status"] == "done", rec
        assert rec["peak_rss_bytes"] > 0
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("the per-task peak needs Linux's /proc/self/clear_refs")
    def rss() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

    before = rss()
    big = bytearray(1 << 30)  # 1 GiB on top of what the process holds, touched, then freed
    big[::4096] = b"x" * len(big[::4096])
    del big
    out = zoo["root"] / "peak"
    (task,) = plan([zoo["enc"]], ns=[N], seeds=[0], out=out, device="cpu")
    rec = run_task(task, out)
    assert rec["worker_pid"] == os.getpid()  # run here; the pool's records name their workers (bench_sweep --local)
    # a process-wide maximum (ru_maxrss) would be at least before + 1 GiB; a tiny model's report adds far less
    assert 0 < rec["peak_rss_bytes"] < before + (1 << 29), (rec["peak_rss_bytes"], before)


@pytest.mark.parametrize("defect, message", [
    (lambda h: struct.pack("<Q", 10**9) + h, "not a safetensors file"),
    (lambda h: b"\x01\x00", "not a safetensors file"),
    (lambda h: struct.pack("<Q", 5) + b"{oops" + bytes(64), "not JSON"),
    (lambda h: struct.pack("<Q", 2) + b"[]" + bytes(8), "not a JSON object"),
    (lambda h: (lambda j: struct.pack("<Q", len(j)) + j)(b'{"w": {"dtype": "F32", "shape": [-1]}}'),
     "no valid dtype and shape"),
])
def test_header_reader_refuses_a_bad_header(tmp_path: Path, defect: Any, message: str) -> None:
    from symtrans.numeric.weights import safetensors_header

    head = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    f = tmp_path / "model.safetensors"
    f.write_bytes(defect(head))
    with pytest.raises(SymtransError, match=message):
        safetensors_header(f)


def test_plan_refuses_bad_input(zoo: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(SymtransError, match="listed twice"):
        plan([zoo["dec"], zoo["dec"]], ns=[N], out=tmp_path / "s", device="cpu")
    with pytest.raises(SymtransError, match="positions"):  # the tiny model has 40 positions
        plan([zoo["dec"]], ns=[41], out=tmp_path / "s", device="cpu")
    with pytest.raises(SymtransError, match="no such model directory"):
        plan([tmp_path / "nope"], ns=[N], out=tmp_path / "s", device="cpu")
    with pytest.raises(SymtransError, match="^seeds -1: must be at least 0"):
        plan([zoo["dec"]], ns=[N], seeds=[-1], out=tmp_path / "s", device="cpu")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(SymtransError, match="holds other files"):
        plan([zoo["dec"]], ns=[N], out=tmp_path / "busy", device="cpu")


# --- resume and failures -------------------------------------------------------------------------------------

def test_finished_tasks_are_skipped_and_a_missing_marker_reruns(zoo: dict[str, Any], tmp_path: Path) -> None:
    out, tasks = zoo["out"], zoo["tasks"]
    assert pending(tasks, out) == [] and [task_state(t, out) for t in tasks] == ["done", "done"]
    again = run_task(tasks[0], out)  # idempotent: the marker comes back, nothing runs
    assert again == json.loads((out / "tasks" / tasks[0].folder / MARKER).read_text())
    assert run_sweep(tasks, out, engine="local", progress=False).ran == 0  # no engine starts for no work
    # an interrupted task: its report may be there, its marker is not -> it runs again
    copy = tmp_path / "sweep"
    shutil.copytree(out, copy)
    (copy / "tasks" / tasks[1].folder / MARKER).unlink()
    assert pending(tasks, copy) == [tasks[1]]
    # a marker for another key (an older toolkit, other weights) does not count
    marker = json.loads((copy / "tasks" / tasks[0].folder / MARKER).read_text())
    marker["key"] = "0" * 64
    (copy / "tasks" / tasks[0].folder / MARKER).write_text(json.dumps(marker))
    assert pending(tasks, copy) == tasks


def test_a_failed_task_is_recorded_and_the_others_still_aggregate(zoo: dict[str, Any], tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(zoo["dec"], bad)
    out = tmp_path / "sweep"
    shutil.copytree(zoo["out"], out)
    tasks = zoo["tasks"] + plan([bad], ns=[N], out=out, device="cpu")
    raw = bytearray((bad / "model.safetensors").read_bytes())
    raw[-1] ^= 1  # one weight changed after planning
    (bad / "model.safetensors").write_bytes(bytes(raw))
    rec = run_task(tasks[2], out)
    assert rec["status"] == "failed" and "the weights changed since the sweep was planned" in rec["error"]
    (bad / "model.safetensors").write_bytes(b"\x00" * 16)  # a damaged checkpoint: the loader's own error
    rec = run_task(tasks[2], out)
    assert rec["status"] == "failed" and "not a readable safetensors file" in rec["error"]
    assert rec["attempts"] == 1 and "Traceback" in rec["traceback"]
    assert task_state(tasks[2], out) == "failed" and (out / "tasks" / tasks[2].folder / FAILED).is_file()
    assert pending(tasks, out) == [tasks[2]]  # a failed task runs again on the next sweep
    doc = aggregate(tasks, out)
    assert [c["status"] for c in doc["columns"]] == ["done", "done", "failed"]
    assert "not a readable safetensors file" in doc["columns"][2]["error"]
    assert all(r["cells"][2] is None and r["cells"][0] is not None for r in doc["rows"])
    assert "task failed" in render_markdown(doc) and "not a readable safetensors file" in render_html(doc)


def test_a_damaged_report_is_a_failed_column_not_a_crash(zoo: dict[str, Any], tmp_path: Path) -> None:
    """A truncated report.json no longer hashes to what task.json recorded: its column is failed (never done),
    and the next sweep runs the task again (issue 37: it was marked failed but never re-run)."""
    out = tmp_path / "sweep"
    shutil.copytree(zoo["out"], out)
    (out / "tasks" / zoo["tasks"][0].folder / "report" / "report.json").write_text("{not json")
    doc = aggregate(zoo["tasks"], out)
    assert doc["columns"][0]["status"] == "failed" and "truncated or edited" in doc["columns"][0]["error"]
    assert doc["columns"][1]["status"] == "done" and doc["summary"]["failed"] == 1
    assert pending(zoo["tasks"], out) == [zoo["tasks"][0]]


# --- the aggregate -------------------------------------------------------------------------------------------

def _verdicts_by_hand(report: dict[str, Any]) -> dict[tuple[str, str | None], str]:
    out = {}
    for c in report["claims"]:
        out[(c["id"], None)] = c["verdict"]
        for r in c["readings"]:
            out[(c["id"], r["id"])] = r["verdict"]
    return out


def test_cells_are_the_reports_verdicts_and_disagreements_come_first(zoo: dict[str, Any]) -> None:
    out, tasks = zoo["out"], zoo["tasks"]
    doc = aggregate(tasks, out)
    truth = [_verdicts_by_hand(_report_json(out, t)) for t in tasks]
    rows = {(r["claim"], r["reading"]): r for r in doc["rows"]}
    assert set(rows) == set(truth[0]) == set(truth[1])
    for rid, row in rows.items():
        assert [c["verdict"] for c in row["cells"]] == [t[rid] for t in truth]
        assert row["disagree"] == (truth[0][rid] != truth[1][rid])
    flags = [r["disagree"] for r in doc["rows"]]
    assert any(flags) and not all(flags), "an encoder and a decoder should differ somewhere, not everywhere"
    assert flags == sorted(flags, reverse=True)  # every disagreeing row before every agreeing one
    assert doc["summary"]["disagreeing_rows"] == sum(flags)


def test_the_aggregate_reads_verdicts_it_does_not_recompute(zoo: dict[str, Any], tmp_path: Path) -> None:
    """The cells are the reports' verdicts as the tasks wrote them; a verdict edited afterwards in one report.json
    never shows (issue 37): the report no longer hashes to its task.json, the column is failed and re-run."""
    out = tmp_path / "sweep"
    shutil.copytree(zoo["out"], out)
    path = out / "tasks" / zoo["tasks"][1].folder / "report" / "report.json"
    report = json.loads(path.read_text())
    claim = next(c for c in report["claims"] if c["id"] == "thm-4.2")
    genuine = claim["verdict"]
    row = next(r for r in aggregate(zoo["tasks"], out)["rows"] if (r["claim"], r["reading"]) == ("thm-4.2", None))
    assert row["cells"][1]["verdict"] == genuine
    claim["verdict"] = "certified" if claim["verdict"] != "certified" else "fails"
    path.write_text(json.dumps(report))
    doc = aggregate(zoo["tasks"], out)
    row = next(r for r in doc["rows"] if (r["claim"], r["reading"]) == ("thm-4.2", None))
    assert row["cells"][1] is None and doc["columns"][1]["status"] == "failed"
    assert "truncated or edited" in doc["columns"][1]["error"] and task_state(zoo["tasks"][1], out) == "stale"


def test_margin_is_the_smallest_among_the_deciding_records(zoo: dict[str, Any]) -> None:
    out, tasks = zoo["out"], zoo["tasks"]
    doc = aggregate(tasks, out)
    report = _report_json(out, tasks[1])
    checked = 0
    for c in report["claims"]:
        deciding = [e["margin"] for e in c["evidence"] if not e["stale"] and e["counted_as"] == c["verdict"]
                    and isinstance(e["margin"], (int, float))]
        row = next(r for r in doc["rows"] if (r["claim"], r["reading"]) == (c["id"], None))
        assert row["cells"][1]["margin"] == (min(deciding) if deciding else None)
        checked += bool(deciding)
    assert checked >= 3


def test_outputs_escape_external_strings_and_agree_with_the_json(zoo: dict[str, Any]) -> None:
    doc = aggregate(zoo["tasks"], zoo["out"])
    md = render_markdown(doc)
    assert "enc\\|&lt;b&gt;\\*x\\*" in md and "<b>" not in md  # the hostile model name is inert
    page = render_html(doc)
    assert "enc|&lt;b&gt;*x*" in page and "<b>*x*" not in page
    folder = zoo["tasks"][0].folder
    assert f'href="../tasks/{folder}/report/report.html#claim-thm-4.2"' in page
    report_html = (zoo["out"] / "tasks" / folder / "report" / "report.html").read_text()
    assert 'id="claim-thm-4.2"' in report_html  # the anchor the cell links to exists
    rows = list(csv.DictReader(io.StringIO(render_csv(doc))))
    assert len(rows) == len(doc["rows"]) * len(doc["columns"])
    by = {(r["claim"], r["reading"] or None, r["run"]): r for r in rows}
    for row in doc["rows"]:
        for cell, col in zip(row["cells"], doc["columns"]):
            line = by[(row["claim"], row["reading"], col["id"])]
            assert line["verdict"] == cell["verdict"] and line["disagree"] == str(row["disagree"])
            assert (line["margin"] == "") == (cell["margin"] is None)


def test_write_aggregate_writes_the_four_files(zoo: dict[str, Any], tmp_path: Path) -> None:
    from symtrans.sweeps import SCHEMA, write_aggregate

    doc = aggregate(zoo["tasks"], zoo["out"])
    paths = write_aggregate(doc, tmp_path)
    assert sorted(p.name for p in paths) == ["sweep.csv", "sweep.html", "sweep.json", "sweep.md"]
    assert json.loads((tmp_path / "aggregate" / "sweep.json").read_text())["schema"] == SCHEMA


def test_cli_refuses_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from symtrans.cli import main

    assert main(["sweep", "/no/such/model", "--out", str(tmp_path / "s"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().endswith("no such model directory (pass a local directory with "
                                                    'config.json and model.safetensors, or "default")')
    assert main(["sweep", "default", "--n", "0", "--out", str(tmp_path / "s"), "--quiet"]) == 2
    assert "--n 0: must be at least 2" in capsys.readouterr().err
    assert main(["sweep", "default", "--engine", "local", "--address", "auto", "--out", str(tmp_path / "s"),
                 "--quiet"]) == 2
    assert "--address names a Ray cluster" in capsys.readouterr().err


def test_sweep_json_schema_is_documented(zoo: dict[str, Any]) -> None:
    from test_docs_tables import documented

    doc = aggregate(zoo["tasks"], zoo["out"])
    assert documented("sweep") == set(doc)
    assert documented("sweep-column") == set(doc["columns"][0])
    row = doc["rows"][0]
    assert documented("sweep-row") == set(row) and documented("sweep-cell") == set(row["cells"][0])
    marker = json.loads((zoo["out"] / "tasks" / zoo["tasks"][0].folder / MARKER).read_text())
    assert documented("sweep-task") == set(marker)


def test_cli_rerun_of_a_finished_sweep_runs_nothing(zoo: dict[str, Any], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import symtrans
    import symtrans.sweeps
    from symtrans.cli import main

    assert symtrans.sweep is symtrans.sweeps.sweep  # the module's name does not shadow the function
    out = tmp_path / "sweep"
    shutil.copytree(zoo["out"], out)
    before = (out / "tasks" / zoo["tasks"][0].folder / MARKER).read_text()
    assert main(["sweep", str(zoo["enc"]), str(zoo["dec"]), "--n", str(N), "--out", str(out), "--engine", "local",
                 "--device", "cpu", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 runs: 0 ran, 2 already done, 0 failed" in printed
    assert (out / "tasks" / zoo["tasks"][0].folder / MARKER).read_text() == before
    doc = json.loads((out / "aggregate" / "sweep.json").read_text())
    assert [c["status"] for c in doc["columns"]] == ["done", "done"]


def test_ctrl_c_stops_the_local_pool_and_leaves_the_run_to_redo(zoo: dict[str, Any], tmp_path: Path) -> None:
    """SIGINT while a pool worker runs a task: KeyboardInterrupt, no worker left, no marker, the task still pending."""
    import multiprocessing
    import os
    import signal
    import threading
    import time

    from symtrans.sweeps import RUNNING

    out = tmp_path / "sweep"
    tasks = plan([zoo["dec"]], ns=[N], seeds=[5], out=out, device="cpu")
    running = out / "tasks" / tasks[0].folder / RUNNING

    started: list[bool] = []

    def interrupt() -> None:
        deadline = time.monotonic() + 300
        while not running.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        started.append(running.is_file())
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(tasks, out, engine="local", workers=1, progress=False)
        time.sleep(30)  # not reached when the interrupt lands during the run
    thread.join()
    assert started == [True], "the interrupt came before the worker started the task"
    assert not running.is_file()  # the stopped run leaves no "running" mark (issue 39: nothing partial)
    assert multiprocessing.active_children() == []
    assert not (out / "tasks" / tasks[0].folder / MARKER).exists()
    assert pending(tasks, out) == tasks


# --- the model-free records, shared by a local pool's workers ------------------------------------------------

def _free_task() -> tuple[str, Any]:
    from symtrans.runner import producers_for

    (p,) = [p for p in producers_for("prop-5.1") if p.name == "prop51-witness"]
    assert not p.needs_model
    return ("prop-5.1", p)


def _fresh_ctx() -> Any:
    from symtrans.context import Context

    return Context(model=None, n=N, seed=0, reuse=True)


@pytest.fixture()
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sharing on, through ``tmp_path``, with this process's memo emptied (as a fresh worker's)."""
    from symtrans import runner

    monkeypatch.setattr(runner, "_MEMO", {})
    runner.share_model_free(tmp_path)
    yield tmp_path
    runner.share_model_free(None)


def _planted(slot: str) -> list[Any]:
    from symtrans.evidence import Evidence, Verdict

    return [Evidence(claim="prop-5.1", producer="prop51-witness", kind="symbolic", verdict=Verdict.SUPPORTED,
                     summary="written by the other worker")]


def test_a_record_another_worker_published_is_read_not_recomputed(shared: Path) -> None:
    from symtrans import runner

    task = _free_task()
    slot = runner._shared_slot(task[1], _fresh_ctx())
    assert slot is not None and runner._shared_claim(slot)
    runner._shared_put(slot, _planted(slot))
    (res,) = runner.run_tasks([task], _fresh_ctx(), parallel=False)
    assert [e.summary for e in res] == ["written by the other worker"]
    runner.share_model_free(None)  # the false case: not sharing, the producer runs here
    runner._MEMO.clear()
    (own,) = runner.run_tasks([task], _fresh_ctx(), parallel=False)
    assert own and all(e.summary != "written by the other worker" for e in own)


def test_a_claimed_record_is_waited_for_and_a_dead_claimers_is_run_here(shared: Path) -> None:
    import multiprocessing
    import threading

    from symtrans import runner

    task = _free_task()
    slot = runner._shared_slot(task[1], _fresh_ctx())
    assert slot is not None
    with open(slot + ".claim", "w") as f:  # a live worker (this process) has it
        f.write(str(os.getpid()))
    timer = threading.Timer(0.5, runner._shared_put, (slot, _planted(slot)))
    timer.start()
    (res,) = runner.run_tasks([task], _fresh_ctx(), parallel=False)
    timer.join()
    assert [e.summary for e in res] == ["written by the other worker"]  # waited for, not computed here
    runner._MEMO.clear()
    os.unlink(slot + ".pkl")
    dead = multiprocessing.get_context("spawn").Process(target=int)
    dead.start(), dead.join()
    with open(slot + ".claim", "w") as f:  # its worker was killed before it wrote anything
        f.write(str(dead.pid))
    (own,) = runner.run_tasks([task], _fresh_ctx(), parallel=False)
    assert own and all(e.summary != "written by the other worker" for e in own)


def test_a_producer_that_raised_gives_up_its_claim(shared: Path) -> None:
    from symtrans import runner

    slot = runner._shared_slot(_free_task()[1], _fresh_ctx())
    assert slot is not None and runner._shared_claim(slot) and not runner._shared_claim(slot)
    runner._shared_put(slot, "ValueError: boom")
    assert runner._shared_wait(slot) is None  # a waiter runs it itself
    assert runner._shared_claim(slot)


@pytest.mark.slow
def test_two_local_workers_compute_each_model_free_record_once(zoo: dict[str, Any]) -> None:
    """Two checkpoints on two workers: both reports hold the same model-free records (one computed them), and
    the verdicts are those of the in-process runs."""
    out = zoo["root"] / "two-workers"
    tasks = plan([zoo["enc"], zoo["dec"]], ns=[N], seeds=[0], out=out, device="cpu")
    result = run_sweep(tasks, out, engine="local", workers=2, progress=False)
    assert result.ok, result.failed
    markers = [json.loads((out / "tasks" / t.folder / MARKER).read_text()) for t in tasks]
    assert len({m["worker_pid"] for m in markers}) == 2  # each ran on its own worker
    assert [m["verdicts"] for m in markers] == [r["verdicts"] for r in zoo["records"]]

    def free(doc: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str]]:
        return {(c["id"], e["producer"]): (e["timestamp"], e["verdict"]) for c in doc["claims"]
                for e in c["evidence"] if e["context"] and e["context"]["weights_hash"] is None}  # read no model

    a, b = (free(_report_json(out, t)) for t in tasks)
    assert a and a == b  # the same records, down to when they ran: computed once, in one of the workers
