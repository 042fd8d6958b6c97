"""Benchmark: relate and canonical of this checkout against another's, in alternating processes (an A/B of a change).

`bench_relate.py` measures each command against one forward pass; on a shared machine its ratio moves by 10-20% from
run to run, more than most single changes. This script runs one process per checkout in turn (``--pairs`` times):
each loads the bundled model, builds B = g . A for one random element of G, and prints the best of ``--repeat``
CPU times (one thread, after a warm-up) of ``relate(A, B)`` and ``canonical(A)``. The best of several rounds is
the least disturbed by other jobs; alternation spreads slow spells over both sides. It prints each pair, then the
medians and their ratio (this checkout over the other).

Run: ``python benchmarks/bench_relate_ab.py OTHER_CHECKOUT [--pairs 4] [--repeat 7]`` (for instance a
``git worktree add /tmp/base <commit>`` of the commit before a change).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from symtrans.group.canonical import canonical
from symtrans.group.numeric import model_blocks, weights_from_blocks
from symtrans.group.relate import apply_steps, random_element, relate
from symtrans.group.spec import GroupSpec
from symtrans.numeric.weights import load_model
from symtrans.threads import single_threaded
a = load_model("default")
spec = GroupSpec.from_arch(a.arch)
b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0)))
def best(fn, n):
    fn()
    times = []
    for _ in range(n):
        t0 = time.process_time(); fn(); times.append(time.process_time() - t0)
    return min(times)
with single_threaded():
    assert relate(a, b).related
    print(best(lambda: relate(a, b), int(sys.argv[2])), best(lambda: canonical(a), int(sys.argv[2])))
"""


def _run(checkout: Path, repeat: int) -> tuple[float, float]:
    """(relate, canonical) best CPU seconds of one fresh process on ``checkout``."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(checkout), str(repeat)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("other", type=Path, help="the other checkout (its root, holding symtrans/)")
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    if not (args.other / "symtrans" / "__init__.py").is_file():
        p.error(f"{args.other}: not a symtrans checkout (no symtrans/__init__.py)")
    sides: dict[str, list[tuple[float, float]]] = {"other": [], "this": []}
    for i in range(args.pairs):
        for name, where in (("other", args.other), ("this", ROOT)):
            r, c = _run(where, args.repeat)
            sides[name].append((r, c))
            print(f"pair {i + 1} {name:5s} ({where}): relate {r * 1e3:6.0f} ms  canonical {c * 1e3:6.0f} ms", flush=True)
    for k, label in ((0, "relate"), (1, "canonical")):
        o, t = (statistics.median(x[k] for x in sides[s]) for s in ("other", "this"))
        print(f"{label}: median of the best times {o * 1e3:.0f} ms (other) -> {t * 1e3:.0f} ms (this), ratio {t / o:.2f}")


if __name__ == "__main__":
    main()
