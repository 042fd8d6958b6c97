"""Time and peak memory of ``symtrans report`` against a transformers baseline, at three model sizes.

Baseline (issue 16): load the model with ``transformers``, one forward pass at
n = 128 (the report's default n) with ``output_hidden_states=True``, float64
singular values of every hidden state. Target: ``python -m symtrans report
--model DIR --out TMP --quiet`` at the same n. Both run as fresh processes
(imports included), one after the other, so both see the same machine load.

Models: the bundled all-MiniLM-L6-v2, and BERT-base- and BERT-large-sized
checkpoints with random weights (``transformers.BertModel`` of the standard
configs, seeded), written at run time to a temporary directory as
safetensors and deleted afterwards; nothing is committed.

Peak memory is the peak resident set size (``ru_maxrss``) of each child
process, read with ``os.wait4`` for that child alone: it includes the Python
interpreter, every imported library and file pages mapped while reading
weights. Wall time is the target's measure; each child's CPU seconds (user +
system, from the same ``os.wait4``) are printed too, since on a shared machine
wall time mostly measures the other load. Target: at most 2x the baseline in
time and in peak memory.

Usage: ``python benchmarks/bench_report.py [--sizes bundled,bert-base,bert-large] [--repeat 1] [--n 128]``
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

ROOT = Path(__file__).resolve().parent.parent

BASELINE = r"""
import sys
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained(sys.argv[1]).eval()
n = int(sys.argv[2])
ids = torch.randint(1000, model.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    hs = model(input_ids=ids, output_hidden_states=True).hidden_states
s = [torch.linalg.svdvals(h[0].double()) for h in hs]
print(len(s))
"""

MAKE_CHECKPOINT = r"""
import sys
import torch
from transformers import BertConfig, BertModel
hidden, layers, heads, ff, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.manual_seed(0)
cfg = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=ff)
BertModel(cfg).eval().save_pretrained(out, safe_serialization=True)
"""

#: name -> (hidden size, layers, heads, FFN width) of the standard BERT configurations
SIZES = {"bert-base": (768, 12, 12, 3072), "bert-large": (1024, 24, 16, 4096)}


def _run(cmd: list[str]) -> tuple[float, float, float]:
    """Run ``cmd`` as a child; return (wall seconds, peak RSS in MiB, CPU seconds user + system) of that child."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        spent = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
        # report exits 1 when a producer raised (it still writes the report): timed, but say so
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and "report" not in cmd):
            sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
        if proc.returncode == 1:
            print(f"  note: exit status 1 for {' '.join(cmd[-6:])}:\n{tail}", file=sys.stderr)
    return spent, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # Linux: ru_maxrss in KiB


def _model_dir(name: str, tmp: Path) -> str:
    if name == "bundled":
        sys.path.insert(0, str(ROOT))
        from symtrans.numeric.weights import default_model_path

        return str(default_model_path())
    out = tmp / name
    hidden, layers, heads, ff = SIZES[name]
    subprocess.run([sys.executable, "-c", MAKE_CHECKPOINT, str(hidden), str(layers), str(heads), str(ff), str(out)],
                   check=True, cwd=ROOT)
    return str(out)


def bench(name: str, n: int, repeat: int, tmp: Path) -> dict[str, float | str]:
    """Baseline and report for one model: best time of ``repeat`` runs, peak memory of that run."""
    directory = _model_dir(name, tmp)
    base = min(_run([sys.executable, "-c", BASELINE, directory, str(n)]) for _ in range(repeat))
    runs = []
    for k in range(repeat):
        out = tmp / f"report-{name}-{k}"
        runs.append(_run([sys.executable, "-m", "symtrans", "report", "--model", directory, "--n", str(n),
                          "--out", str(out), "--quiet"]))
    report = min(runs)
    row = {"model": name, "n": n, "baseline_s": base[0], "report_s": report[0], "time_ratio": report[0] / base[0],
           "baseline_cpu_s": base[2], "report_cpu_s": report[2], "cpu_ratio": report[2] / base[2],
           "baseline_peak_mib": base[1], "report_peak_mib": report[1], "memory_ratio": report[1] / base[1]}
    path = tmp / f"report-{name}-{runs.index(report)}" / "report.json"
    if not path.exists():
        sys.exit(f"the report for {name} wrote no report.json (see the error above)")
    doc = json.loads(path.read_text())
    row["report_seconds_inside"] = doc["seconds"]
    per: dict[str, float] = {}
    for c in doc["claims"]:
        for e in c.get("evidence", []):
            per[f"{c['id']} / {e['producer']}"] = e.get("seconds") or 0.0
    row["slowest"] = sorted(per.items(), key=lambda kv: -kv[1])[:5]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="bundled,bert-base,bert-large",
                    help="comma-separated: bundled, bert-base, bert-large (default all three)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side; the fastest is kept")
    ap.add_argument("--n", type=int, default=128, help="sequence length of both sides (default 128)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args()
    from _installed import compile_symtrans  # beside this script

    compile_symtrans()  # as an installed package: not ~84 modules compiled in each timed process
    names = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bad = [s for s in names if s != "bundled" and s not in SIZES]
    if bad:
        print(f"bench_report: error: unknown size {bad[0]!r} (use bundled, bert-base, bert-large)", file=sys.stderr)
        return 2
    rows = []
    print("peak memory = ru_maxrss of each child process (os.wait4); time = wall clock of each child; CPU = its "
          "user + system seconds (less sensitive to other load on the machine)")
    with tempfile.TemporaryDirectory(prefix="symtrans-bench-") as tmp:
        for name in names:
            row = bench(name, args.n, args.repeat, Path(tmp))
            rows.append(row)
            verdict = {True: "within 2x", False: "ABOVE 2x"}
            print(f"{name:10s} n={row['n']}: baseline {row['baseline_s']:6.1f} s {row['baseline_peak_mib']:7.0f} MiB | "
                  f"report {row['report_s']:6.1f} s {row['report_peak_mib']:7.0f} MiB | "
                  f"time {row['time_ratio']:.2f}x (CPU {row['baseline_cpu_s']:.1f} -> {row['report_cpu_s']:.1f} s, "
                  f"{row['cpu_ratio']:.2f}x; {verdict[row['time_ratio'] <= 2]}), memory {row['memory_ratio']:.2f}x "
                  f"({verdict[row['memory_ratio'] <= 2]})", flush=True)
            for key, sec in row["slowest"]:
                print(f"    {sec:6.2f} s  {key}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
