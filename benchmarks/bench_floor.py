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

Run: ``python benchmarks/bench_floor.py [--sizes bundled,bert-base] [--n 128] [--workers]``
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
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    from symtrans.context import Context
    from symtrans.report import build_report

    factor: dict[tuple, int] = {}

    class Factorisations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if ("linalg" in name and "norm" not in name) or name in ("aten::cholesky", "aten::geqrf",
                                                                    "aten::triangular_solve"):
                shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
                flags = tuple(a for a in args if isinstance(a, (bool, str)))
                opts = tuple(sorted((k, v) for k, v in (kwargs or {}).items() if isinstance(v, (bool, str, int))))
                key = (name, shapes, str(next(a.dtype for a in args if isinstance(a, torch.Tensor))), flags, opts)
                factor[key] = factor.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    flops = FlopCounterMode(display=False)
    with flops, Factorisations():
        build_report(Context(model=str(model), n=n, reuse=False), parallel=False)
    counts = flops.get_flop_counts().get("Global", {})
    gemm = sum(int(v) for k, v in counts.items())
    return {"gemm_flops": gemm, "factorisations": factor}


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
    args = ap.parse_args()
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
