"""Time the full numeric report against the numeric-backend baseline, in the same run.

Baseline (issue 5): load the bundled model with ``transformers``, one forward
pass at n = 512 with hidden states, float64 singular values of every layer's
hidden states. Target: ``symtrans report --model default`` when the report
command exists, else ``symtrans check`` (all numeric checks at their default
n = 128). Each runs in a fresh process (imports included). Target ratio <= 3.

Usage: ``python benchmarks/bench_report.py [--repeat 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASELINE = r"""
import torch
from transformers import AutoModel
from symtrans.numeric.weights import default_model_path
model = AutoModel.from_pretrained(str(default_model_path())).eval()
ids = torch.randint(1000, model.config.vocab_size, (1, 512), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    hs = model(input_ids=ids, output_hidden_states=True).hidden_states
s = [torch.linalg.svdvals(h[0].double()) for h in hs]
print(len(s))
"""


def _run(cmd: list[str]) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    spent = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    return spent, out.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side; the best is kept")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from symtrans.cli import COMMAND_MODULES

    base = min(_run([sys.executable, "-c", BASELINE])[0] for _ in range(args.repeat))
    if "report" in COMMAND_MODULES:
        with tempfile.TemporaryDirectory() as tmp:
            target_cmd = [sys.executable, "-m", "symtrans", "report", "--model", "default", "--out", tmp]
            target = min(_run(target_cmd)[0] for _ in range(args.repeat))
        label = "symtrans report --model default"
    else:
        target = None
        label = "symtrans check --model default"
    check_time, out = _run([sys.executable, "-m", "symtrans", "check", "--model", "default", "--format", "json"])
    if target is None:
        target = check_time
    data = json.loads(out)
    per = defaultdict(float)
    for e in data["evidence"]:
        per[f"{e['claim']} / {e['producer'].split('-n')[0]}"] += e["seconds"] or 0.0
    print(f"baseline (transformers load + forward n=512 + float64 SVD of {7} hidden states): {base:.1f} s")
    print(f"{label}: {target:.1f} s  (checks inside: {data['seconds']:.1f} s at n = {data['n']})")
    print(f"ratio: {target / base:.2f}  (target <= 3)")
    print("per-check seconds:")
    for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"  {v:7.2f}  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
