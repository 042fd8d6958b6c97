"""``symtrans sweep`` on Ray against the serial run (slow tier): same aggregate, resume, a killed worker retried.

One ``ray.init(num_cpus=2)`` for the module. Three tiny random checkpoints (an
encoder, a GPT-2 and a Llama-style decoder) are swept once serially (the local
pool with one worker) and once on Ray, where the worker of the first task to
start is killed with SIGKILL: Ray's ``max_retries`` must run it again. Skipped
where Ray is not installed, except under CI, where a missing Ray fails.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

if os.environ.get("CI"):
    import ray  # CI installs the [dev] extra, which includes Ray: its absence is a failure there
else:
    ray = pytest.importorskip("ray")

from symtrans.sweeps import MARKER, RUNNING, plan, run_sweep  # noqa: E402

N = 8


@pytest.fixture(scope="module")
def ray_local() -> Any:
    for attempt in (1, 2):  # Ray gives its raylet a fixed 30 s to register: an overloaded machine may need two
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            break
        except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception for this
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(err):
                raise
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    from symtrans.numeric.fixtures import random_checkpoint

    root = tmp_path_factory.mktemp("ray-zoo")
    models = [random_checkpoint(root / fam, fam)[0] for fam in ("bert", "gpt2", "llama")]
    return models, root


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The aggregate without its time stamp (the folders are the tasks' keys: the same in both runs)."""
    return {k: v for k, v in doc.items() if k != "generated"}


def _kill_first_worker(out: Path, killed: list[int], stop: threading.Event) -> None:
    """Kill (SIGKILL) the process of the first task seen running, once."""
    while not stop.is_set() and not killed:
        for f in sorted((out / "tasks").glob(f"*/{RUNNING}")):
            try:
                pid = json.loads(f.read_text())["pid"]
            except (OSError, ValueError, KeyError):
                continue
            time.sleep(0.5)  # inside the task's work, not at its first line
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.1)


def test_ray_sweep_equals_the_serial_run_resumes_and_retries_a_killed_worker(
        ray_local: Any, zoo: tuple[list[Path], Path]) -> None:
    models, root = zoo
    serial_out, ray_out = root / "serial", root / "ray"
    tasks = plan(models, ns=[N], seeds=[0], out=serial_out, device="cpu")
    serial = run_sweep(tasks, serial_out, engine="local", workers=1, progress=False)
    assert serial.ok and serial.ran == 3

    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_kill_first_worker, args=(ray_out, killed, stop), daemon=True)
    (ray_out / "tasks").mkdir(parents=True)
    watcher.start()
    try:
        distributed = run_sweep(tasks, ray_out, engine="ray", retries=2, progress=False)
    finally:
        stop.set()
        watcher.join()
    assert killed, "the watcher saw no running task to kill"
    assert distributed.ok and distributed.ran == 3, distributed.failed
    markers = [json.loads((out / "tasks" / t.folder / MARKER).read_text()) for out in (serial_out, ray_out)
               for t in tasks]
    assert sorted(m["attempts"] for m in markers[3:]) == [1, 1, 2]  # the killed task ran again, the others once
    for t, m in zip(tasks * 2, markers):  # a fresh worker's measured peak is within the planned memory
        assert 0 < m["peak_rss_bytes"] <= t.resources["memory"], (t.column, m["peak_rss_bytes"])

    ser, dist = _comparable(serial.aggregate), _comparable(distributed.aggregate)
    assert ser["columns"] == dist["columns"]
    assert [(r["claim"], r["reading"], r["disagree"]) for r in ser["rows"]] == \
        [(r["claim"], r["reading"], r["disagree"]) for r in dist["rows"]]
    for a, b in zip(ser["rows"], dist["rows"]):
        assert [c["verdict"] for c in a["cells"]] == [c["verdict"] for c in b["cells"]], a["claim"]
        for x, y in zip(a["cells"], b["cells"]):  # margins: the same arithmetic in two processes
            assert (x["margin"] is None) == (y["margin"] is None)
            if isinstance(x["margin"], float):
                assert y["margin"] == pytest.approx(x["margin"], rel=1e-6, abs=1e-9)
    assert any(r["disagree"] for r in dist["rows"])

    start = time.perf_counter()
    again = run_sweep(tasks, ray_out, engine="ray", progress=False)
    assert again.ran == 0 and again.skipped == 3 and time.perf_counter() - start < 30
