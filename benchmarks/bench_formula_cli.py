"""Startup cost of a formula query, against the cost of importing SymPy alone.

Runs ``symtrans formula recovery-ambiguity --arch bert-base`` as a whole process
(via ``python -m symtrans`` from this checkout, and via the installed ``symtrans``
console script when one is on PATH) and ``python -c "import sympy"``, several
times each, interleaved so that machine load hits both alike, and prints the
medians and their ratio. Target: ratio <= 1.5 (a formula query costs little more
than SymPy itself). Also checks, in a separate process, that the query imported
neither torch nor networkx, and lists the slowest imports (``-X importtime``).

Usage: ``python benchmarks/bench_formula_cli.py [--runs 7] [--strict]``
(``--strict`` exits 1 when the ratio is over target; torch being imported always does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5
QUERY = ["formula", "recovery-ambiguity", "--arch", "bert-base"]
HEAVY = ("torch", "networkx", "transformers", "numpy", "scipy")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall-clock seconds of one whole process; it must succeed."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    return elapsed


def heavy_modules() -> list[str]:
    """Heavy packages present in sys.modules after a formula query in a fresh process."""
    code = ("import sys; from symtrans.cli import main; rc = main(%r); "
            "print('HEAVY:' + ','.join(m for m in %r if m in sys.modules))" % (QUERY, HEAVY))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True)
    marker = [line for line in proc.stdout.splitlines() if line.startswith("HEAVY:")]
    if proc.returncode != 0 or len(marker) != 1:
        raise SystemExit(f"the import check failed:\n{proc.stderr}")
    return [m for m in marker[0][len("HEAVY:"):].split(",") if m]


def installed_origin(script: str) -> str:
    """Where the console script's interpreter imports symtrans from (outside this checkout)."""
    python = Path(script).read_text(errors="replace").splitlines()[0].removeprefix("#!").strip()
    proc = subprocess.run([python, "-c", "import symtrans; print(symtrans.__file__)"], cwd="/tmp",
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def slowest_imports(top: int = 6) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the slowest top-level imports of a query."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "symtrans", *QUERY], cwd=ROOT, env=_env(),
                          capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = (part.strip() for part in line[len("import time:"):].split("|"))
            if not name.startswith(" ") and "." not in name.strip():
                rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the ratio is over target")
    args = parser.parse_args()

    commands = {"python -c 'import sympy' (baseline)": ([sys.executable, "-c", "import sympy"], ROOT),
                "python -m symtrans " + " ".join(QUERY): ([sys.executable, "-m", "symtrans", *QUERY], ROOT)}
    script = shutil.which("symtrans")
    if script:
        # run from /tmp so that the console script's own installation is what gets imported
        commands[f"{script} " + " ".join(QUERY)] = ([script, *QUERY], Path("/tmp"))
        print(f"console script {script} imports {installed_origin(script)}")
    else:
        print("no `symtrans` console script on PATH; timing `python -m symtrans` only")
    for cmd, cwd in commands.values():  # warm the file cache once
        timed(cmd, cwd)
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(args.runs):
        for label, (cmd, cwd) in commands.items():
            times[label].append(timed(cmd, cwd))

    medians = {label: statistics.median(ts) for label, ts in times.items()}
    baseline = medians[next(iter(commands))]
    print(f"{args.runs} runs each, interleaved; median wall-clock seconds (min - max)")
    worst = 0.0
    for label, ts in times.items():
        ratio = medians[label] / baseline
        if label != next(iter(commands)):
            worst = max(worst, ratio)
        print(f"  {medians[label]:6.3f} s  ({min(ts):.3f} - {max(ts):.3f})  ratio {ratio:4.2f}  {label}")
    verdict = "within target" if worst <= TARGET else "OVER TARGET"
    print(f"worst ratio to `import sympy`: {worst:.2f} (target <= {TARGET}): {verdict}")

    heavy = heavy_modules()
    print(f"heavy modules imported by the query: {', '.join(heavy) if heavy else 'none'} "
          f"(checked: {', '.join(HEAVY)})")
    print("slowest top-level imports of the query (cumulative):")
    for micros, name in slowest_imports():
        print(f"  {micros / 1e6:6.3f} s  {name}")
    if "torch" in heavy or "networkx" in heavy:
        print("FAIL: a formula query must not import torch or networkx")
        return 1
    return 1 if args.strict and worst > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
