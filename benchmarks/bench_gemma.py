"""The report on the bundled Gemma 3 270M against transformers' forward with hidden states (issue 42's 2x target).

Baseline: ``AutoModelForCausalLM`` on the cached checkpoint, one forward at n = 128 with
``output_hidden_states=True``, then the float64 singular values of every hidden state. Measured: ``symtrans
report --model gemma3-270m`` at the same n. Each runs in its own process (wall time, peak RSS from
``os.wait4``); the script prints both and the ratios. Needs ``pip install 'symtrans[gemma]'``; the first
run builds the cached checkpoint (not timed: it is built before either side starts), and
symtrans byte-compiled as an install leaves it (``_installed.py``), and the checkpoint's weights hash
remembered as the first report on it leaves it (:mod:`symtrans.numeric.hashcache`: about 2 s of CPU once).

    python benchmarks/bench_gemma.py [--n 128] [--rounds 3]

Each round runs the baseline, then the report, so a machine whose speed drifts (a shared host) moves both
sides of a round together; the median of the rounds' ratios is the result.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BASELINE = """
import sys, torch
from transformers import AutoModelForCausalLM
from symtrans.numeric.bundled import bundled_gemma_path
from symtrans.numeric.forward import random_ids
from symtrans.numeric.weights import stream_model
n = int(sys.argv[1])
path = bundled_gemma_path()
ids = random_ids(stream_model(path, hash_weights=False), n, 0)
model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
with torch.no_grad():
    hidden = model(ids[None], output_hidden_states=True).hidden_states
    s = [torch.linalg.svdvals(h[0].double()) for h in hidden]
print(len(s), float(s[-1][0]))
"""


def _run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds (baseline, then report, each round); the median ratio is the result")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    from symtrans.numeric.bundled import bundled_gemma_path

    path = bundled_gemma_path(lambda m: print(m, file=sys.stderr))
    from _installed import compile_symtrans  # beside this script

    compile_symtrans()  # as an installed package: not ~84 modules compiled in each timed process
    from symtrans.numeric.weights import stream_model

    stream_model(path)  # the weights hash, remembered across runs (numeric.hashcache), as an earlier run leaves it
    ratios = []
    for r in range(1, args.rounds + 1):
        base_t, base_m = _run([sys.executable, "-c", BASELINE, str(args.n)])
        with tempfile.TemporaryDirectory() as out:
            rep_t, rep_m = _run([sys.executable, "-m", "symtrans", "report", "--model", "gemma3-270m", "--n",
                                 str(args.n), "--out", out, "--quiet"])
        ratios.append((rep_t / base_t, rep_m / base_m))
        print(f"round {r}: transformers forward + hidden states + float64 svdvals {base_t:.1f} s, peak "
              f"{base_m:.0f} MiB; symtrans report --model gemma3-270m (n = {args.n}) {rep_t:.1f} s, peak "
              f"{rep_m:.0f} MiB (largest process): time {rep_t / base_t:.2f}x, memory {rep_m / base_m:.2f}x")
    time_r, mem_r = (statistics.median(x) for x in zip(*ratios))
    print(f"median of {args.rounds} rounds: time {time_r:.2f}x, peak memory {mem_r:.2f}x (target: 2x each)")


if __name__ == "__main__":
    main()
