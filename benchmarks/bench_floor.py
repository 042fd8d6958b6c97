"""The report's CPU seconds per layer beside its arithmetic floor, at four model sizes; 2 workers against 1.

For each size (``--sizes``: bundled, bert-base, bert-large, 1b) two checkpoints
that differ only in their layer count are written to a temporary directory
(random weights made at run time with ``transformers``, seeded; the 1B-class
decoder is a Llama of d_model 2048, 32 query / 4 key-value heads, d_ff 5632,
stored in bfloat16; the bundled model's own weights, truncated to fewer layers
for the second count). On each:

* **time**: ``python -m symtrans report`` in a fresh process; its CPU seconds
  (user + system of it and its forked worker, from ``os.wait4``) and wall time.
* **floor**: the same report built in-process, serially, under
  ``torch.utils.flop_counter.FlopCounterMode`` (every matrix product's FLOPs)
  and a dispatch mode that lists every factorisation (SVD, QR, Cholesky,
  eigh, solves, ...) with its input shape. The floor is the GEMM FLOPs at this
  machine's single-thread float64 GEMM rate plus, for each factorisation
  listed, the time the same op takes on a random input of that shape (both
  measured in this run, single-threaded as the producers run). Exact
  arithmetic outside torch (python-flint, arb) is not in the floor. The
  factorisation part can overstate: a divide-and-conquer SVD deflates on the
  report's rank-deficient matrices and runs faster than on the random replay
  (seen at the 1B width); the GEMM part is a strict lower bound.

**One clock.** Both sides are CPU time: the report's user + system seconds, and the floor's ops timed by
the thread CPU clock (``time.thread_time``; the ops run on one thread, as the producers do). An earlier
version timed the floor by the wall clock: under load the wall-clock GEMM rate fell (9.6-22.5 GFLOP/s
against 32.7-37.9 on the thread clock), the floor inflated and the ratio fell below 1. Figures measured
that way are marked superseded in benchmarks/RESULTS.md.

Per layer: the slope between the two layer counts (time and floor), and each
size's ratio report / floor. Time linear in layers shows as per-layer slopes
that explain the whole: ``cpu(L) ~ fixed + L * slope``.

``--workers [SIZE]`` also times one report (default: BERT-large size, 24 layers) with
its producers on 2 processes (the default) and on 1 (``--serial``): speedup in
wall time and the peak resident set of the process tree (sampled every 0.5 s;
the forked worker's copy-on-write pages count twice, so the sum is an upper
bound) and of its largest process (sampled too: a child's ``ru_maxrss`` carries the high-water mark of
the process that forked it across ``exec``).

``--producers`` (or ``--producers-only``) adds the **per-producer floor table** of each size's full layer
count: each producer's CPU seconds (thread clock, exclusive of producers it runs inside it), its GEMM and
factorisation floor and the excess, largest excess first, plus the work outside producers (weights, the
shared trace, the statuses). Timing and counting run as two serial reports, each in a fresh process, so no
module cache of one hides work from the other. Imports are outside the table (a fresh process's import of
symtrans, torch and sympy: the rest of the fixed part).

Run: ``python benchmarks/bench_floor.py [--sizes bundled,bert-base] [--n 128] [--workers] [--producers]``
(bert-large and 1b take tens of minutes on two cores). The machine may be shared:
CPU seconds are the figure to compare, wall times move with other load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans

#: (family, layer counts (full, fewer), sizes) per benchmark size; None: the bundled model
SIZES = {
    "bundled": (None, (6, 3), {}),
    "bert-base": ("bert", (12, 6), dict(d_model=768, n_heads=12, d_ff=3072, vocab=30522, positions=512)),
    "bert-large": ("bert", (24, 12), dict(d_model=1024, n_heads=16, d_ff=4096, vocab=30522, positions=512)),
    "1b": ("llama", (4, 2), dict(d_model=2048, n_heads=32, d_ff=5632, vocab=32000, positions=2048,
                                 num_key_value_heads=4)),
}

GEMMS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}

#: the floor's clock: this thread's CPU seconds, the same kind of seconds as the report's user + system time
CLOCK = time.thread_time


# ----------------------------------------------------------------- checkpoints
def make_checkpoint(size: str, layers: int, directory: Path) -> Path:
    """Write the size's checkpoint with ``layers`` layers into ``directory`` (bundled: truncated copy)."""
    import torch

    family, _, dims = SIZES[size]
    if family is None:
        return _truncated_bundled(layers, directory)
    import transformers as T

    torch.manual_seed(0)
    if family == "llama":
        cfg = T.LlamaConfig(vocab_size=dims["vocab"], hidden_size=dims["d_model"], num_hidden_layers=layers,
                            num_attention_heads=dims["n_heads"], num_key_value_heads=dims["num_key_value_heads"],
                            intermediate_size=dims["d_ff"], max_position_embeddings=dims["positions"],
                            attn_implementation="eager")
        model = T.LlamaModel(cfg).to(torch.bfloat16).eval()  # bfloat16 on disk, as released 1B models are
    else:
        cfg = T.BertConfig(vocab_size=dims["vocab"], hidden_size=dims["d_model"], num_hidden_layers=layers,
                           num_attention_heads=dims["n_heads"], intermediate_size=dims["d_ff"],
                           max_position_embeddings=dims["positions"], attn_implementation="eager")
        model = T.BertModel(cfg).eval()
    model.save_pretrained(str(directory))
    return directory


def _truncated_bundled(layers: int, directory: Path) -> Path:
    """The bundled model with its first ``layers`` layers (same tensors, config's layer count changed)."""
    import shutil

    from safetensors.torch import load_file, save_file

    from symtrans.numeric.weights import default_model_path

    src = default_model_path()
    cfg = json.loads((src / "config.json").read_text())
    if layers == cfg["num_hidden_layers"]:
        return src
    tensors = {k: v for k, v in load_file(str(src / "model.safetensors")).items()
               if not k.startswith("encoder.layer.") or int(k.split(".")[2]) < layers}
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "model.safetensors"))
    cfg["num_hidden_layers"] = layers
    (directory / "config.json").write_text(json.dumps(cfg))
    for extra in ("tokenizer.json",):
        if (src / extra).exists():
            shutil.copy(src / extra, directory / extra)
    return directory


# ----------------------------------------------------------------- time of a report
def _tree_rss_mib(pid: int) -> tuple[float, float]:
    """Sum and largest resident set (MiB) of ``pid`` and its descendants."""
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(x) for x in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except OSError:
            pass
    sizes = []
    for p in seen:
        try:
            line = next(x for x in Path(f"/proc/{p}/status").read_text().splitlines() if x.startswith("VmRSS:"))
            sizes.append(int(line.split()[1]) / 1024)
        except (OSError, StopIteration):
            pass
    return sum(sizes), max(sizes, default=0.0)


def time_report(model: Path, n: int, serial: bool = False) -> dict:
    """One ``symtrans report`` in a fresh process: CPU seconds (it and its worker), wall seconds, peak memory."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "symtrans", "report", "--model", str(model), "--n", str(n), "--out",
               str(Path(out) / "r"), "--format", "json", "--progress", "off"] + (["--serial"] if serial else [])
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak_sum = peak_one = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            s, one = _tree_rss_mib(proc.pid)
            peak_sum, peak_one = max(peak_sum, s), max(peak_one, one)
            time.sleep(0.5)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise RuntimeError(f"report failed on {model}: {proc.stderr.read().decode()[-500:]}")
        # sampled, not ru_maxrss: exec keeps the forking process's high-water mark in it (this process, after a
        # counting run, would show through)
        return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall, "peak_tree_mib": peak_sum,
                "peak_process_mib": peak_one}


# ----------------------------------------------------------------- the floor
def count_report(model: Path, n: int) -> dict:
    """GEMM FLOPs and the factorisations (op, shapes) of one serial in-process report on ``model``."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    from symtrans.context import Context
    from symtrans.report import build_report

    factor: dict[tuple, int] = {}

    class Factorisations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            key = _factor_key(func, args, kwargs)
            if key is not None:
                factor[key] = factor.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    flops = FlopCounterMode(display=False)
    with flops, Factorisations():
        build_report(Context(model=str(model), n=n, reuse=False), parallel=False)
    counts = flops.get_flop_counts().get("Global", {})
    gemm = sum(int(v) for k, v in counts.items())
    return {"gemm_flops": gemm, "factorisations": factor}


def _producer_key(p: object) -> str:
    return f"{p.claim} / {p.name}"  # type: ignore[attr-defined]


def profile_producers(model: Path | None, n: int, mode: str) -> dict[str, dict]:
    """Per producer of one serial in-process report: its CPU seconds (``mode="time"``) or its GEMM FLOPs and
    factorisations (``mode="count"``).

    ``symtrans.runner.run_producer`` is wrapped: each producer's CPU seconds on this thread's clock, exclusive
    of any producer it runs inside it, or the counting modes of :func:`count_report` with their FLOPs and
    factorisations attributed to the producer running. The work outside producers (loading the weights,
    the shared trace, deriving the statuses) is the row ``(outside producers)``. A producer that reads a cache
    another producer filled (``share``) shows only its own part: the first one pays. Run each mode in a fresh
    process (:func:`producer_table` does): module-level caches filled by one report would hide work in the next.
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    import symtrans.runner as runner
    from symtrans.context import Context
    from symtrans.report import build_report

    rows: dict[str, dict] = {}
    stack: list[list] = []  # [key, start, child seconds, start flops]
    original = runner.run_producer
    flops = FlopCounterMode(display=False) if mode == "count" else None

    def row(key: str) -> dict:
        return rows.setdefault(key, {"cpu_s": 0.0, "gemm_flops": 0, "factorisations": {}})

    def total_flops() -> int:
        return flops.get_total_flops() if flops is not None else 0

    def timed(p, ctx):  # noqa: ANN001 - the runner's signature
        frame = [_producer_key(p), CLOCK(), 0.0, total_flops()]
        stack.append(frame)
        try:
            return original(p, ctx)
        finally:
            stack.pop()
            spent, done = CLOCK() - frame[1], total_flops() - frame[3]
            r = row(frame[0])
            r["cpu_s"] += spent - frame[2]
            r["gemm_flops"] += done
            if stack:  # the outer producer's figures exclude this one's
                stack[-1][2] += spent
                stack[-1][3] += done

    class Factorisations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            key = _factor_key(func, args, kwargs)
            if key is not None:
                f = row(stack[-1][0] if stack else "(outside producers)")["factorisations"]
                f[key] = f.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    import contextlib

    runner.run_producer = timed
    try:
        with contextlib.ExitStack() as modes:
            if flops is not None:
                modes.enter_context(flops)
                modes.enter_context(Factorisations())
            t0 = CLOCK()
            build_report(Context(model=str(model) if model is not None else None, n=n, reuse=False),
                         parallel=False)
            total, everything = CLOCK() - t0, total_flops()
    finally:
        runner.run_producer = original
    out = row("(outside producers)")
    out["cpu_s"] = total - sum(r["cpu_s"] for k, r in rows.items() if k != "(outside producers)")
    out["gemm_flops"] = everything - sum(r["gemm_flops"] for k, r in rows.items() if k != "(outside producers)")
    return rows


def _factor_key(func: object, args: tuple, kwargs: dict | None) -> tuple | None:
    """The factorisation's (op, shapes, dtype, flags, options), or None for an op that is not one."""
    import torch

    name = func._schema.name  # type: ignore[attr-defined]
    if not (("linalg" in name and "norm" not in name) or name in ("aten::cholesky", "aten::geqrf",
                                                                "aten::triangular_solve")):
        return None
    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
    flags = tuple(a for a in args if isinstance(a, (bool, str)))
    opts = tuple(sorted((k, v) for k, v in (kwargs or {}).items() if isinstance(v, (bool, str, int))))
    return (name, shapes, str(next(a.dtype for a in args if isinstance(a, torch.Tensor))), flags, opts)


def producer_table(model: Path | None, n: int, rate: float, cache: dict[tuple, float]) -> list[dict]:
    """The per-producer floor table: CPU seconds, floor (GEMM + factorisations), excess; largest excess first.

    The timing and the counting run each in a fresh process (``--profile MODE``), serially, one thread.
    """
    got = {}
    for mode in ("time", "count"):
        res = subprocess.run([sys.executable, __file__, "--profile", mode, "--n", str(n), "--model",
                              str(model) if model is not None else "none"], cwd=ROOT, capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if res.returncode:
            raise RuntimeError(f"--profile {mode} failed: {res.stderr[-800:]}")
        got[mode] = {k: dict(v, factorisations={tuple(_untuple(x) for x in f[0]): f[1] for f in
                                                v["factorisations"]}) for k, v in
                     json.loads(res.stdout.splitlines()[-1]).items()}
    out = []
    for key, counted in got["count"].items():
        fs = factorisation_seconds(counted["factorisations"], cache)
        cpu = got["time"].get(key, {}).get("cpu_s", 0.0)
        floor = counted["gemm_flops"] / rate + fs
        out.append({"producer": key, "cpu_s": cpu, "gemm_gflop": counted["gemm_flops"] / 1e9,
                    "gemm_floor_s": counted["gemm_flops"] / rate,
                    "factor_calls": sum(counted["factorisations"].values()), "factor_floor_s": fs,
                    "floor_s": floor, "excess_s": cpu - floor})
    return sorted(out, key=lambda x: -x["excess_s"])


def _untuple(x: object) -> object:
    """JSON's lists back to the tuples of a factorisation key (nested: shapes, flags, options)."""
    return tuple(_untuple(v) for v in x) if isinstance(x, list) else x


def print_producer_table(rows: list[dict], label: str) -> None:
    """Print :func:`producer_table`'s rows (largest excess first) with their sum."""
    print(f"per producer ({label}; CPU s on the thread clock, serial, in-process; largest excess first):")
    print(f"  {'producer':62s} {'CPU s':>7s} {'floor s':>8s} {'GEMM':>6s} {'fact.':>6s} {'calls':>6s} "
          f"{'excess':>7s} {'ratio':>6s}")
    for r in rows:
        ratio = f"{r['cpu_s'] / r['floor_s']:.1f}x" if r["floor_s"] > 1e-4 else "-"
        print(f"  {r['producer'][:62]:62s} {r['cpu_s']:7.2f} {r['floor_s']:8.2f} {r['gemm_floor_s']:6.2f} "
              f"{r['factor_floor_s']:6.2f} {r['factor_calls']:6d} {r['excess_s']:7.2f} {ratio:>6s}")
    cpu, floor = sum(r["cpu_s"] for r in rows), sum(r["floor_s"] for r in rows)
    print(f"  {'total':62s} {cpu:7.2f} {floor:8.2f} {'':6s} {'':6s} {'':6s} {cpu - floor:7.2f} "
          f"{cpu / floor if floor else float('nan'):5.1f}x")


def gemm_rate(size: int = 512, repeat: int = 8) -> float:
    """Single-thread float64 GEMM rate of this machine, FLOP/s (best of ``repeat``)."""
    import torch

    a, b = torch.randn(size, size, dtype=torch.float64), torch.randn(size, size, dtype=torch.float64)
    best = float("inf")
    for _ in range(repeat):
        t0 = CLOCK()
        a @ b
        best = min(best, CLOCK() - t0)
    return 2 * size ** 3 / best


def factorisation_seconds(factor: dict[tuple, int], cache: dict[tuple, float]) -> float:
    """Sum over the listed factorisations of count x the single-thread time of that op on a random input."""
    total = 0.0
    for key, count in factor.items():
        if key not in cache:
            cache[key] = _time_op(*key)
        total += count * cache[key]
    return total


def _time_op(name: str, shapes: tuple, dtype: str, flags: tuple, opts: tuple = ()) -> float:
    import torch

    dt = getattr(torch, dtype.replace("torch.", ""))
    op = getattr(torch.ops.aten, name.split("::")[1])

    def inputs() -> list:
        out = []
        for s in shapes:
            x = torch.randn(s, dtype=dt)
            if "cholesky" in name and len(s) >= 2 and s[-1] == s[-2]:  # a positive definite input: the full cost
                x = x @ x.transpose(-1, -2) + s[-1] * torch.eye(s[-1], dtype=dt)
            out.append(x)
        return out + list(flags)

    try:
        args, kw = inputs(), dict(opts)
        best = float("inf")
        for _ in range(3):
            t0 = CLOCK()
            op(*args, **kw)
            best = min(best, CLOCK() - t0)
            if best > 0.5:
                break
        return best
    except Exception:  # noqa: BLE001 - an overload needing other arguments: not timed (listed as such)
        return 0.0


# ----------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="bundled,bert-base", help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--workers", nargs="?", const="bert-large", default=None, metavar="SIZE",
                    help="also time a report at SIZE (default bert-large, full layer count) on 2 processes vs 1")
    ap.add_argument("--no-floor", action="store_true", help="time only (the counting run is serial and slower)")
    ap.add_argument("--producers", action="store_true",
                    help="also print the per-producer floor table of each size's full layer count (two more "
                         "serial reports, each in a fresh process)")
    ap.add_argument("--producers-only", action="store_true", help="only the per-producer floor tables")
    ap.add_argument("--profile", choices=("time", "count"), help=argparse.SUPPRESS)  # one producer_table side
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    from _installed import compile_symtrans  # beside this script

    compile_symtrans()  # as an installed package: not ~84 modules compiled in each timed process
    if args.profile:
        import torch

        torch.set_num_threads(1)
        rows = profile_producers(None if args.model == "none" else Path(args.model), args.n, args.profile)
        print(json.dumps({k: dict(v, factorisations=list(v["factorisations"].items())) for k, v in rows.items()}))
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        sys.exit(f"unknown size {unknown[0]!r}; use {', '.join(SIZES)}")
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(1)  # the producers run single-threaded: the floor is one core's
    sys.stdout.reconfigure(line_buffering=True)
    rate = gemm_rate()
    load = os.getloadavg()[0]
    print(f"float64 GEMM, one thread: {rate / 1e9:.2f} GFLOP/s (512 x 512, best of 8, thread CPU clock); "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    cache: dict[tuple, float] = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            if args.producers_only:
                L = SIZES[size][1][0]
                table = producer_table(make_checkpoint(size, L, Path(tmp) / f"{size}-{L}"), args.n, rate, cache)
                print_producer_table(table, f"{size}, L={L}, n={args.n}")
                rows.append({"size": size, "layers": L, "producers": table})
                continue
            res = {}
            for L in SIZES[size][1]:
                path = make_checkpoint(size, L, Path(tmp) / f"{size}-{L}")
                t = time_report(path, args.n)
                if not args.no_floor:
                    c = count_report(path, args.n)
                    fs = factorisation_seconds(c["factorisations"], cache)
                    t.update(gemm_gflop=c["gemm_flops"] / 1e9, gemm_floor_s=c["gemm_flops"] / rate,
                             factor_floor_s=fs, factor_kinds=len(c["factorisations"]),
                             factor_calls=sum(c["factorisations"].values()))
                    t["floor_s"] = t["gemm_floor_s"] + fs
                res[L] = t
                if args.producers and L == SIZES[size][1][0]:
                    table = producer_table(path, args.n, rate, cache)
                    print_producer_table(table, f"{size}, L={L}, n={args.n}")
                    t["producers"] = table
                print(f"{size:10s} L={L:2d}: report {t['cpu_s']:7.1f} CPU s ({t['wall_s']:6.1f} s wall, peak "
                      f"{t['peak_process_mib']:.0f} MiB)" + ("" if args.no_floor else
                      f"; floor {t['floor_s']:6.1f} s = GEMM {t['gemm_gflop']:.1f} GFLOP "
                      f"{t['gemm_floor_s']:.1f} s + {t['factor_calls']} factorisations "
                      f"({t['factor_kinds']} shapes) {t['factor_floor_s']:.1f} s; ratio "
                      f"{t['cpu_s'] / t['floor_s']:.1f}x"), flush=True)
                if path.parent == Path(tmp):
                    import shutil

                    shutil.rmtree(path, ignore_errors=True)
            (La, Lb) = SIZES[size][1]
            a, b = res[La], res[Lb]
            slope = (a["cpu_s"] - b["cpu_s"]) / (La - Lb)
            line = (f"{size:10s} per layer: report {slope:.2f} CPU s; fixed part {a['cpu_s'] - La * slope:.1f} s "
                    f"(linear in layers: cpu(L) = fixed + L x slope through both counts)")
            row = {"size": size, "layers": [La, Lb], "runs": {str(k): v for k, v in res.items()},
                   "cpu_per_layer_s": slope}
            if not args.no_floor:
                fslope = (a["floor_s"] - b["floor_s"]) / (La - Lb)
                line += f"; floor per layer {fslope:.2f} s; ratio per layer {slope / fslope:.1f}x"
                row.update(floor_per_layer_s=fslope, ratio_per_layer=slope / fslope,
                           ratio_whole=a["cpu_s"] / a["floor_s"])
            print(line, flush=True)
            rows.append(row)
        if args.workers:
            size = args.workers
            if size not in SIZES:
                sys.exit(f"--workers {size!r}: use {', '.join(SIZES)}")
            path = make_checkpoint(size, SIZES[size][1][0], Path(tmp) / f"{size}-workers")
            two, one = time_report(path, args.n), time_report(path, args.n, serial=True)
            print(f"{size} L={SIZES[size][1][0]}: 2 workers {two['wall_s']:.1f} s wall ({two['cpu_s']:.1f} CPU s, "
                  f"peak tree {two['peak_tree_mib']:.0f} MiB, largest process {two['peak_process_mib']:.0f} MiB); "
                  f"1 worker {one['wall_s']:.1f} s wall ({one['cpu_s']:.1f} CPU s, peak {one['peak_process_mib']:.0f} "
                  f"MiB): speedup {one['wall_s'] / two['wall_s']:.2f}x", flush=True)
            rows.append({"size": size, "workers": {"2": two, "1": one}, "speedup": one["wall_s"] / two["wall_s"]})
    print(json.dumps({"gemm_rate_gflops": rate / 1e9, "clock": "cpu", "load": load, "rows": rows}, default=str))


if __name__ == "__main__":
    main()
