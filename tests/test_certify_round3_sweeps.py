"""Evidence round 3 (issue 37), sweeps: a task's report counts only as its task wrote it.

Split from tests/test_certify_round3.py (its costliest part: a tiny sweep run in-process, then again on the local
process pool) so that no test module runs much longer than the others when test files are spread over workers.
Written from the issue's description of the attack: a prefilled marker for a task that never ran, a marker
without a report hash, a truncated report; each is refused and the summary never counts it done.
"""

from __future__ import annotations

import pytest


# ------------------------------------------------------------------ sweeps: a report counts only as its task wrote it
@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.sweeps import plan, run_task

    root = tmp_path_factory.mktemp("sweep37")
    enc, _ = random_checkpoint(root / "enc", "bert")
    out = root / "sweep"
    tasks = plan([enc], ns=[8], seeds=[0, 1], out=out, device="cpu")
    run_task(tasks[0], out)  # seed 1 is left unrun
    return out, tasks


def _sweep_copy(tiny_sweep, tmp_path):
    import shutil

    out, tasks = tiny_sweep
    shutil.copytree(out, tmp_path / "s")
    return tmp_path / "s", tasks


def test_a_prefilled_unrun_task_with_another_runs_report_is_not_done(tiny_sweep, tmp_path):
    """Seed 1 never ran: a task.json with its key and seed 0's report (its true hash recorded) is foreign."""
    import hashlib
    import json
    import shutil

    from symtrans.sweeps import MARKER, aggregate, pending, task_state

    out, tasks = _sweep_copy(tiny_sweep, tmp_path)
    src, dst = out / "tasks" / tasks[0].folder, out / "tasks" / tasks[1].folder
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "report", dst / "report")
    marker = json.loads((src / MARKER).read_text())
    marker.update(key=tasks[1].key, task=tasks[1].to_dict(),
                  report_sha256=hashlib.sha256((dst / "report" / "report.json").read_bytes()).hexdigest())
    (dst / MARKER).write_text(json.dumps(marker))
    assert task_state(tasks[1], out) == "stale" and pending(tasks, out) == [tasks[1]]
    doc = aggregate(tasks, out)
    assert [c["status"] for c in doc["columns"]] == ["done", "failed"]
    assert "another run's (seed '0', planned '1')" in doc["columns"][1]["error"]
    assert doc["summary"]["done"] == 1 and all(r["cells"][1] is None for r in doc["rows"])
    marker["report_identity"] = dict(marker["report_identity"], seed=1)  # the recorded identity edited too
    (dst / MARKER).write_text(json.dumps(marker))
    assert task_state(tasks[1], out) == "stale"


def test_a_marker_without_a_report_hash_is_not_done(tiny_sweep, tmp_path):
    import json

    from symtrans.sweeps import MARKER, report_problem, task_state

    out, tasks = _sweep_copy(tiny_sweep, tmp_path)
    path = out / "tasks" / tasks[0].folder / MARKER
    marker = json.loads(path.read_text())
    del marker["report_sha256"]
    path.write_text(json.dumps(marker))
    assert task_state(tasks[0], out) == "stale"
    assert "records no report hash" in report_problem(tasks[0], out, marker)


def test_a_truncated_report_is_run_again_and_the_summary_never_counts_it_done(tiny_sweep, tmp_path):
    from symtrans.sweeps import aggregate, run_sweep, task_state

    out, tasks = _sweep_copy(tiny_sweep, tmp_path)
    path = out / "tasks" / tasks[0].folder / "report" / "report.json"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    before = aggregate(tasks, out)
    assert before["summary"]["done"] == 0 and before["columns"][0]["status"] == "failed"
    result = run_sweep(tasks, out, engine="local", workers=1, progress=False)
    assert result.ran == 2 and result.skipped == 0 and result.ok  # the truncated one and the unrun one
    assert [task_state(t, out) for t in tasks] == ["done", "done"]
    assert result.aggregate["summary"]["done"] == 2
