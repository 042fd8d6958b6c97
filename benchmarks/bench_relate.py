"""Benchmark: ``relate`` and ``canonical`` on the bundled model against one forward pass with hidden states.

In one process, on the bundled all-MiniLM-L6-v2, CPU, single-threaded where symtrans is:

(a) baseline: one ``transformers`` forward pass with ``output_hidden_states=True`` at n tokens
    (default 128), the model already loaded;
(b) ``relate(A, B)`` with A and B already loaded (float64), B = g . A for a random element of every
    factor of G (the solve and the per-tensor check: what ``symtrans relate`` adds to loading);
(c) ``canonical(A)`` likewise.

Timed in CPU seconds of this process (``time.process_time``: every thread's time on one clock, so a
multi-threaded forward is charged for all its threads, and other jobs on the machine enter only through
cache and memory contention), interleaved: each round runs (a), (b), (c) once, after one warm-up round; the ratios b/a and c/a are
taken per round and their median printed with the range. Wall seconds are printed beside them. The issue's
target is 3. Loading (both commands read two, or one, checkpoints) is timed apart and not in the ratios.

Run: ``python benchmarks/bench_relate.py [--n 128] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans, not an installed one


def _cpu(fn) -> tuple[float, float]:  # noqa: ANN001
    """(CPU seconds of this process, wall seconds) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()

    import torch
    from transformers import BertModel

    from symtrans.group.canonical import canonical
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, random_element, relate
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric.weights import default_model_path, load_model

    model = BertModel.from_pretrained(str(default_model_path()), attn_implementation="eager").eval()
    ids = torch.randint(1000, model.config.vocab_size, (1, args.n), generator=torch.Generator().manual_seed(0))

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids, output_hidden_states=True)

    t0 = time.perf_counter()
    a = load_model("default")
    load = time.perf_counter() - t0
    spec = GroupSpec.from_arch(a.arch)
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0)))
    # "forward" runs right after canonical (its weights out of cache, as one forward pass among other work);
    # "warm forward" right after it (back to back); "forward, 1 thread" without the second thread: all printed
    def forward_1() -> None:  # one thread: no OpenMP spin-waiting in its CPU time on an oversubscribed machine
        from symtrans.threads import single_threaded

        with single_threaded():
            forward()

    runs = {"forward": forward, "warm forward": forward, "forward, 1 thread": forward_1, "relate": lambda: relate(a, b),
            "canonical": lambda: canonical(a)}
    for fn in runs.values():  # warm-up round
        fn()
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    wall: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeat):  # interleaved: one of each per round
        for name, fn in runs.items():
            c, w = _cpu(fn)
            cpu[name].append(c)
            wall[name].append(w)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"CPU seconds (time.process_time), median of {args.repeat} interleaved rounds; wall in brackets")
    print(f"forward with hidden states (transformers, n={args.n}): {med['forward']:.3f} s "
          f"[wall {statistics.median(wall['forward']):.3f} s]")
    print(f"the same, warm (run again at once):                   {med['warm forward']:.3f} s "
          f"[wall {statistics.median(wall['warm forward']):.3f} s]")
    print(f"the same, one thread:                                 {med['forward, 1 thread']:.3f} s "
          f"[wall {statistics.median(wall['forward, 1 thread']):.3f} s]")
    for name, label in (("relate", "relate(A, g.A), every factor moved"), ("canonical", "canonical(A)")):
        print(f"{label + ':':52s}{med[name]:.3f} s [wall {statistics.median(wall[name]):.3f} s]")
        for base in ("forward", "warm forward", "forward, 1 thread"):
            r = [c / f for c, f in zip(cpu[name], cpu[base])]
            print(f"    ratio to the {base + ':':22s}{statistics.median(r):5.1f} (rounds {min(r):.1f}-{max(r):.1f}; "
                  "target 3)")
    print(f"(loading one checkpoint into float64, not in the ratios: {load:.2f} s; "
          f"torch threads {torch.get_num_threads()} for the forward, 1 inside relate and canonical)")


if __name__ == "__main__":
    main()
