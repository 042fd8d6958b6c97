"""Benchmark: peak memory of a streamed ``symtrans measure`` on a BERT-large-sized checkpoint, against its float64 size.

Makes a random-init BERT-large-sized checkpoint with ``transformers`` in a
temporary directory (24 layers, d_model 1024, 16 heads, d_ff 4096, vocab
30522: 1.3 GB of float32 safetensors; nothing is committed), then runs
``symtrans measure --stream on`` on it in a fresh process and reports the
process's peak resident set (VmHWM), the resident set before loading, their
difference, the stated budget (:func:`symtrans.numeric.streaming.stream_budget`)
and the model's float64 size (:func:`~symtrans.numeric.streaming.float64_bytes`).
``--eager`` also runs ``--stream off`` for comparison (it holds every layer in
float64).

Run: ``python benchmarks/bench_stream.py [--n 128] [--eager] [--layers 24]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans, not an installed one


def run(path: Path, n: int, stream: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", str(path), "--n", str(n),
                          "--format", "json", "--stream", stream, "--device", "cpu"],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout
    mem = json.loads(out)["memory"]
    mem["seconds"] = time.perf_counter() - t0
    return mem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--eager", action="store_true", help="also run without streaming")
    args = ap.parse_args()
    from transformers.utils import logging

    from symtrans.arch import from_config
    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.numeric.streaming import float64_bytes, layer_float64_bytes, stream_budget

    logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path, model = random_checkpoint(tmp, "bert", n_layers=args.layers, d_model=1024, n_heads=16, d_ff=4096,
                                        vocab=30522, positions=512)
        del model
        made = time.perf_counter() - t0
        arch = from_config(path)
        mib = 2**20
        size = sum(f.stat().st_size for f in path.glob("*.safetensors")) / mib
        f64 = float64_bytes(arch) / mib
        budget = stream_budget(arch, args.n)
        print(f"bench_stream: random BERT-large-sized checkpoint ({args.layers} layers, made in {made:.0f} s): "
              f"{size:.0f} MiB float32 on disk, {f64:.0f} MiB in float64 "
              f"(one layer {layer_float64_bytes(arch) / mib:.1f} MiB); n = {args.n}")
        print(f"stated streaming budget: {budget['bound_bytes'] / mib:.0f} MiB over the resident set before loading")
        for stream in (("on", "off") if args.eager else ("on",)):
            m = run(path, args.n, stream)
            grew = m["peak_rss_mib"] - m["rss_before_load_mib"]
            print(f"--stream {stream:3s}: peak resident set {m['peak_rss_mib']:.0f} MiB, before loading "
                  f"{m['rss_before_load_mib']:.0f} MiB, growth {grew:.0f} MiB = {grew / f64:.1%} of the float64 "
                  f"model ({m['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
