"""Benchmark: ``symtrans measure`` (all measurements) against a plain transformers baseline.

In one run, on the bundled all-MiniLM-L6-v2 at n tokens (default 512), CPU:

(a) baseline: load the model with ``transformers``, one forward pass with
    hidden states, float64 singular values of every layer's hidden states;
(b) ours: :func:`symtrans.cli.measure.run_measure` (what ``symtrans measure``
    runs: load, forward, every measurement, float64), cold (load cache cleared).

Each is timed in-process (median of ``--repeat`` runs after a warm-up) and as
a whole process (interpreter start and imports included). Prints b/a; the
target is at most 2. ``--memory`` additionally saves a random 12-layer
BERT-base-sized checkpoint and compares the whole-process peak resident set
of ``symtrans measure`` with and without ``--stream``.

Run: ``python benchmarks/bench_measure.py [--n 512] [--repeat 3] [--memory]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans, not an installed one

BASELINE = """
import sys, time, torch
from transformers import BertModel
from symtrans.numeric.weights import default_model_path
n = int(sys.argv[1])
model = BertModel.from_pretrained(str(default_model_path()), attn_implementation="eager").eval()
ids = torch.randint(1000, model.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    hs = model(input_ids=ids, output_hidden_states=True).hidden_states
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
before = torch.get_num_threads()
torch.set_num_threads(threads or before)
s = [torch.linalg.svdvals(h[0].double()) for h in hs]
torch.set_num_threads(before)
"""


def baseline(n: int, svd_threads: int = 0) -> float:
    """Seconds for (a) in this process (``svd_threads``: torch threads for its SVDs, 0 = default)."""
    code = BASELINE.replace("int(sys.argv[1])", str(n)).replace("int(sys.argv[2]) if len(sys.argv) > 2 else 0",
                                                                 str(svd_threads))
    t0 = time.perf_counter()
    exec(compile(code, "<baseline>", "exec"), {})
    return time.perf_counter() - t0


def ours(n: int) -> float:
    """Seconds for (b) in this process, with the load cache cleared (a cold load, like (a))."""
    from symtrans.cli.measure import run_measure
    from symtrans.numeric import weights

    weights._LOADED.clear()
    weights._SEEN.clear()
    weights._HASHES.clear()
    t0 = time.perf_counter()
    report = run_measure("default", n=n, device="cpu")
    elapsed = time.perf_counter() - t0
    LAST_TIMINGS.update(report.timings_s)
    return elapsed


LAST_TIMINGS: dict[str, float] = {}


def whole_process(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def memory_comparison(n: int) -> None:
    """Peak resident set of whole-process ``symtrans measure`` on a 12-layer checkpoint, eager vs streamed."""
    from symtrans.numeric.fixtures import random_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        path, model = random_checkpoint(tmp, "bert", n_layers=12, d_model=768, n_heads=12, d_ff=3072,
                                        vocab=30522, positions=512)
        del model
        size = sum(f.stat().st_size for f in path.glob("*.safetensors")) / 2**20
        print(f"\nmemory: random BERT-base-sized checkpoint, 12 layers, {size:.0f} MiB of float32 safetensors")
        for stream in ("off", "on"):
            out = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", str(path), "--n", str(n),
                                  "--format", "json", "--stream", stream, "--device", "cpu"],
                                 check=True, capture_output=True, text=True, cwd=ROOT).stdout
            mem = json.loads(out)["memory"]
            print(f"  --stream {stream:3s}: peak resident set {mem['peak_rss_mib']:.0f} MiB "
                  f"(before loading {mem['rss_before_load_mib']:.0f} MiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="also compare peak memory, eager vs streamed")
    args = ap.parse_args()
    import torch
    from transformers.utils import logging

    logging.disable_progress_bar()
    print(f"bench_measure: bundled all-MiniLM-L6-v2, n = {args.n}, cpu, torch threads {torch.get_num_threads()}")
    baseline(args.n), ours(args.n)  # warm-up: imports, first-call costs
    a, a1, b = [], [], []
    for _ in range(args.repeat):  # interleaved, so load on the machine hits all alike
        a.append(baseline(args.n))
        a1.append(baseline(args.n, svd_threads=1))
        b.append(ours(args.n))
    ma, ma1, mb = statistics.median(a), statistics.median(a1), statistics.median(b)
    print(f"(a) baseline  transformers load + forward + float64 svdvals: median {ma:.2f} s  {[round(x, 2) for x in a]}")
    print(f"    the same, SVDs single-threaded (as symtrans runs them):  median {ma1:.2f} s  {[round(x, 2) for x in a1]}")
    print(f"(b) symtrans  run_measure, all measurements, float64:        median {mb:.2f} s  {[round(x, 2) for x in b]}")
    print("    last (b) breakdown: " + ", ".join(f"{k} {v:.2f} s" for k, v in LAST_TIMINGS.items()))
    best = min(ma, ma1)
    print(f"in-process ratio b/a = {mb / best:.2f} against the faster baseline (target <= 2)")
    pa = whole_process([sys.executable, "-c", BASELINE, str(args.n), "1" if ma1 < ma else "0"])
    pb = whole_process([sys.executable, "-m", "symtrans", "measure", "--n", str(args.n), "--device", "cpu",
                        "--format", "json"])
    print(f"whole process: (a) {pa:.2f} s, (b) `symtrans measure --n {args.n}` {pb:.2f} s, ratio {pb / pa:.2f}")
    if args.memory:
        memory_comparison(min(args.n, 128))


if __name__ == "__main__":
    main()
