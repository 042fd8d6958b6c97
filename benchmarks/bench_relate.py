"""Benchmark: ``relate`` and ``canonical`` on the bundled model against one forward pass with hidden states.

In one process, on the bundled all-MiniLM-L6-v2, CPU, everything on ONE thread and ONE clock:

(a) baseline: one ``transformers`` forward pass with ``output_hidden_states=True`` at n tokens
    (default 128), the model already loaded, torch at one thread (``symtrans.threads.single_threaded``);
(b) ``relate(A, B)`` with A and B already loaded (float64), B = g . A for a random element of every
    factor of G (the solve and the per-tensor check: what ``symtrans relate`` adds to loading);
(c) ``canonical(A)`` likewise.

relate and canonical run single-threaded themselves, so all three sides use one thread. The clock is the CPU
time of this process (``time.process_time``); with one thread on each side it is the work done, and other
jobs on the machine enter only through cache and memory contention (wall seconds, also one thread on each
side, are printed beside it and move with the load). Interleaved: each round runs (a), (b), (c) once, after
one warm-up round; the ratios b/a and c/a are taken per round, in CPU seconds, and their median printed with
the range. The issue's target is 3. Three floors on the same clock: reading every value of both models once
(a sum per tensor), one fresh copy of one model (what each functional step of the element costs on the
tensors it moves), and relate on a random BERT of the bundled model's depth and head count but tiny widths
(d_model 24, d_k 2, d_ff 48, vocab 120): the solve's per-layer and per-head work with almost no data, the
cost of the design itself (its Python and torch dispatch), which no fusion of passes over the weights removes.
Then each command's CPU seconds per phase (``Relation.phases``,
``Canonical.phases``: the solver's own timing, same clock), median over the rounds, as multiples of the
forward. Loading (both commands read two, or one, checkpoints) is timed apart and not in the ratios.

Run: ``python benchmarks/bench_relate.py [--n 128] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's symtrans, not an installed one


def _clock(fn) -> tuple[float, float, object]:  # noqa: ANN001
    """(CPU seconds of this process, wall seconds, result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    import torch
    from transformers import BertModel

    from symtrans.group.canonical import canonical
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, random_element, relate
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric.weights import default_model_path, load_model
    from symtrans.threads import single_threaded

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}{' (+ uncommitted changes)' if dirty else ''}, "
          f"{platform.machine()} {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")

    model = BertModel.from_pretrained(str(default_model_path()), attn_implementation="eager").eval()
    ids = torch.randint(1000, model.config.vocab_size, (1, args.n), generator=torch.Generator().manual_seed(0))

    def forward() -> None:
        with single_threaded(), torch.no_grad():
            model(input_ids=ids, output_hidden_states=True)

    t0 = time.perf_counter()
    a = load_model("default")
    load = time.perf_counter() - t0
    spec = GroupSpec.from_arch(a.arch)
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0)))
    def read_both() -> None:  # the floor of any check of B against g . A: every value of both models read once
        with single_threaded():
            for w in (a, b):
                for t in w.tensors.values():
                    if t is not None:
                        t.sum()

    def copy_one() -> None:  # the floor of one functional step on every tensor: a fresh copy of one model
        with single_threaded():
            for t in a.tensors.values():
                if t is not None:
                    t.clone()

    from symtrans.numeric.fixtures import random_model

    tiny = load_model(random_model("bert", n_layers=a.n_layers, n_heads=a.n_heads, d_model=2 * a.n_heads, d_ff=48))
    tiny_spec = GroupSpec.from_arch(tiny.arch)
    tiny_b = weights_from_blocks(tiny, apply_steps(tiny_spec, model_blocks(tiny),
                                                   random_element(tiny_spec, tiny.n_layers, 0)))

    runs = {"forward": forward, "relate": lambda: relate(a, b), "canonical": lambda: canonical(a),
            "read both models": read_both, "copy one model": copy_one,
            "relate, tiny widths": lambda: relate(tiny, tiny_b)}
    assert relate(a, b).related and relate(tiny, tiny_b).related  # the warm-up round; both measure a success
    for fn in runs.values():
        fn()
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    wall: dict[str, list[float]] = {k: [] for k in runs}
    phases: dict[str, list[dict[str, float]]] = {"relate": [], "canonical": []}
    for _ in range(args.repeat):  # interleaved: one of each per round
        for name, fn in runs.items():
            c, w, out = _clock(fn)
            cpu[name].append(c)
            wall[name].append(w)
            if name in phases:
                phases[name].append(getattr(out, "phases", {}))  # {} on a commit before the phase timing
    med = {k: statistics.median(v) for k, v in cpu.items()}
    wmed = {k: statistics.median(v) for k, v in wall.items()}
    print(f"one thread on every side; CPU seconds (time.process_time), median of {args.repeat} interleaved rounds; "
          "wall in brackets")
    print(f"forward with hidden states (transformers, n={args.n}): {med['forward']:.3f} s [wall {wmed['forward']:.3f} s]")
    for name, label in (("relate", "relate(A, g.A), every factor moved"), ("canonical", "canonical(A)")):
        r = [c / f for c, f in zip(cpu[name], cpu["forward"])]
        print(f"{label + ':':52s}{med[name]:.3f} s [wall {wmed[name]:.3f} s]  ratio {statistics.median(r):.1f} "
              f"(rounds {min(r):.1f}-{max(r):.1f}; wall ratio {wmed[name] / wmed['forward']:.1f}; target 3)")
    for name, how in (("read both models", "float64, a sum per tensor"), ("copy one model", "float64, a clone per "
                      "tensor"), ("relate, tiny widths", f"L {a.n_layers}, H {a.n_heads}, d_model {tiny.d_model}")):
        print(f"floor: {name + ' (' + how + '):':45s}{med[name]:.3f} s  "
              f"{med[name] / med['forward']:.2f}x the forward")
    for name in ("relate", "canonical"):
        keys = list(dict.fromkeys(k for ph in phases[name] for k in ph))
        print(f"{name} per phase (CPU s, median; x forward):")
        for k in keys:
            v = statistics.median(ph.get(k, 0.0) for ph in phases[name])
            print(f"    {k:16s}{v:7.3f} s  {v / med['forward']:5.1f}x")
    print(f"(loading one checkpoint into float64, not in the ratios: {load:.2f} s; load average at the end "
          f"{os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
