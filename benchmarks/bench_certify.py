"""Time every certificate of `symtrans certify` and compare with baselines measured in the same run.

Usage: python benchmarks/bench_certify.py [--model default|none] [--extended]

Prints the seconds of each producer, the total against the 60 s budget of the
default report, and the speed of the mod-p rank against SymPy's exact rank
over QQ on the same integer matrix (the shortcut used at BERT sizes).
``--extended`` also certifies thm-5.3 on every layer of the bundled model for
r = 1..8 (not part of the default report).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's symtrans, not an installed one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--extended", action="store_true")
    args = parser.parse_args()
    model = None if args.model == "none" else args.model

    from symtrans.certify.producers import run_certificates
    from symtrans.evidence import Context

    start = time.perf_counter()
    results = run_certificates(None, Context(model=model, n=128))
    total = time.perf_counter() - start
    print(f"{'claim':<20} {'producer':<24} {'verdict':<14} seconds")
    for cid, evs in results.items():
        for ev in evs:
            print(f"{cid:<20} {ev.producer:<24} {ev.verdict.label:<14} {ev.seconds or 0:7.2f}")
    print(f"total {total:.2f} s = {total / 60:.2f} x the 60 s budget (wall clock, model load included)")

    import numpy as np
    from sympy import QQ
    from sympy.polys.matrices import DomainMatrix

    from symtrans.certify.exact import rank_mod_p

    rng = np.random.default_rng(0)
    M = rng.integers(-3, 4, size=(80, 80))
    t0 = time.perf_counter()
    r_sympy = DomainMatrix([[QQ(int(v)) for v in row] for row in M], (80, 80), QQ).rank()
    t_sympy = time.perf_counter() - t0
    t0 = time.perf_counter()
    r_p = rank_mod_p(M)
    t_p = time.perf_counter() - t0
    print(f"80 x 80 integer rank: SymPy QQ {t_sympy:.3f} s (rank {r_sympy}), mod p {t_p:.4f} s (rank {r_p}); "
          f"speed-up {t_sympy / t_p:.0f}x")
    t0 = time.perf_counter()
    rank_mod_p(rng.standard_normal((768, 768)))
    print(f"768 x 768 float64 (exact dyadic) rank mod p: {time.perf_counter() - t0:.2f} s")

    if args.extended and model is not None:
        from symtrans.certify.softmax import certify_residual_rank, heads_from_model, witness_X
        from symtrans.numeric import load_model

        w = load_model(model)
        for layer in range(w.W_Q.shape[0]):
            heads = heads_from_model(w, layer)
            for r in range(1, 9):
                t0 = time.perf_counter()
                c = certify_residual_rank(witness_X(128, int(w.W_Q.shape[2]), r), heads)
                print(f"thm-5.3 real weights layer {layer} r={r}: certified={c.certified} "
                      f"det in {c.det_interval} ({time.perf_counter() - t0:.2f} s)")


if __name__ == "__main__":
    main()
