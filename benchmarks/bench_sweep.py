"""Benchmark: ``symtrans sweep`` over 4 small checkpoints, on Ray (local) against the serial run.

Makes 4 random-init checkpoints with ``transformers`` in a temporary
directory (BERT, RoBERTa, GPT-2, Llama; 4 layers, d_model 128, 4 heads, d_ff
512 by default; nothing is committed), then sweeps them at one ``n``:

* serially: the local engine with one worker (one process, the runs one after another);
* on Ray: ``ray.init(num_cpus=W)`` on this machine, each run one task of one CPU.

Each sweep writes into its own fresh directory, so both do every run. Prints
the wall time of each, the speedup, every run's seconds and the peak resident
set of the worker processes (``peak_rss_bytes`` from each ``task.json``: a
worker's peak over the runs it did), against the planned memory request. Then
checks that the two aggregates give the same verdicts and that a rerun on Ray
runs nothing.

With ``--local``, no Ray: a zoo of 6 checkpoints (the four above, Qwen2 and GPT-NeoX) on the local pool
with one worker against ``--workers`` workers, and where each worker's time went: its start-up (spawn and
imports, until its first task began), then each task's report (``seconds`` in ``task.json``; the first task
of each worker also runs the model-free producers, which the worker then keeps for its later tasks).

Run: ``python benchmarks/bench_sweep.py [--n 32] [--workers 2] [--layers 4] [--d-model 128] [--local]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans, not an installed one

FAMILIES = ("bert", "roberta", "gpt2", "llama")
ZOO = FAMILIES + ("qwen2", "gpt_neox")


def _peaks(result) -> list[int]:  # type: ignore[no-untyped-def]
    import json

    out = []
    for t in result.tasks:
        marker = Path(result.paths[0]).parent.parent / "tasks" / t.folder / "task.json"
        out.append(int(json.loads(marker.read_text())["peak_rss_bytes"]))
    return out


def _timeline(result, t0: float) -> list[str]:  # type: ignore[no-untyped-def]
    """Per worker (pid): when its first task began after ``t0`` (the start-up), then its tasks' seconds."""
    import datetime as dt
    import json

    rows: dict[int, list[tuple[float, str, float]]] = {}
    for t in result.tasks:
        marker = json.loads((Path(result.paths[0]).parent.parent / "tasks" / t.folder / "task.json").read_text())
        end = dt.datetime.fromisoformat(marker["finished"]).timestamp()
        rows.setdefault(marker["worker_pid"], []).append((end - marker["seconds"] - t0, t.label, marker["seconds"]))
    out = []
    for pid, tasks in sorted(rows.items()):
        tasks.sort()
        out.append(f"  worker {pid}: first task began at ~{max(tasks[0][0], 0.0):4.1f} s (+-1 s: whole seconds); "
                   + ", ".join(f"{label} {sec:.1f} s" for _, label, sec in tasks))
    return out


def _checkpoints(root: Path, families: tuple[str, ...], args: argparse.Namespace) -> list[Path]:
    """One random-init checkpoint per family under ``root``, at the sizes the arguments give."""
    from transformers.utils import logging

    from symtrans.numeric.fixtures import random_checkpoint

    logging.set_verbosity_error()
    return [random_checkpoint(root / fam, fam, n_layers=args.layers, d_model=args.d_model, n_heads=4,
                              d_ff=4 * args.d_model, vocab=500, positions=max(64, args.n))[0] for fam in families]


def local(args: argparse.Namespace) -> None:
    """One worker against ``args.workers`` on the local pool, a zoo of six checkpoints."""
    from symtrans.sweeps import plan, run_sweep

    with tempfile.TemporaryDirectory(prefix="symtrans-bench-sweep-") as tmp:
        root = Path(tmp)
        models = _checkpoints(root, ZOO, args)
        walls, results = {}, {}
        for workers in (1, args.workers):
            out = root / f"w{workers}"
            tasks = plan(models, ns=[args.n], seeds=[0], out=out, device="cpu")
            t0 = time.time()
            results[workers] = run_sweep(tasks, out, engine="local", workers=workers, progress=False)
            walls[workers] = time.time() - t0
            assert results[workers].ok, results[workers].failed
            print(f"local pool, {workers} worker(s): {walls[workers]:6.1f} s wall")
            print("\n".join(_timeline(results[workers], t0)))
        print(f"{len(ZOO)} checkpoints ({', '.join(ZOO)}), {args.layers} layers, d_model {args.d_model}, n={args.n}: "
              f"{args.workers} workers / 1 worker: {walls[1] / walls[args.workers]:.2f}x speedup")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2, help="Ray CPUs (each run asks for one)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--local", action="store_true", help="the local pool only: 1 worker against --workers")
    args = ap.parse_args()
    if args.local:
        return local(args)
    import ray

    from symtrans.sweeps import plan, run_sweep

    with tempfile.TemporaryDirectory(prefix="symtrans-bench-sweep-") as tmp:
        root = Path(tmp)
        models = _checkpoints(root, FAMILIES, args)
        tasks = plan(models, ns=[args.n], seeds=[0], out=root / "serial", device="cpu")
        t0 = time.perf_counter()
        serial = run_sweep(tasks, root / "serial", engine="local", workers=1, progress=False)
        t_serial = time.perf_counter() - t0
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            t0 = time.perf_counter()
            dist = run_sweep(tasks, root / "ray", engine="ray", progress=False)
            t_ray = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = run_sweep(tasks, root / "ray", engine="ray", progress=False)
            t_again = time.perf_counter() - t0
        finally:
            ray.shutdown()
        assert serial.ok and dist.ok, (serial.failed, dist.failed)
        same = all([c["verdict"] for c in a["cells"]] == [c["verdict"] for c in b["cells"]]
                   for a, b in zip(serial.aggregate["rows"], dist.aggregate["rows"]))
        print(f"4 checkpoints ({', '.join(FAMILIES)}), {args.layers} layers, d_model {args.d_model}, n={args.n}")
        print(f"serial (local engine, 1 worker): {t_serial:7.1f} s")
        print(f"Ray local ({args.workers} CPUs):          {t_ray:7.1f} s   speedup {t_serial / t_ray:.2f}x")
        print(f"rerun on Ray (nothing to do):    {t_again:7.1f} s   ran {again.ran}")
        print(f"aggregates give the same verdicts: {same}")
        mib = 2 ** 20
        for t, ps, pr in zip(tasks, _peaks(serial), _peaks(dist)):
            print(f"  {t.label:8s} planned {t.resources['memory'] / mib:6.0f} MiB; worker peak: serial "
                  f"{ps / mib:6.0f} MiB, Ray {pr / mib:6.0f} MiB")


if __name__ == "__main__":
    main()
