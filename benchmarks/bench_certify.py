"""Time the exact engine (python-flint) against the pure-Python routines it replaced, and the certify run.

Usage: python benchmarks/bench_certify.py [--model default|none] [--size N] [--skip-certify]

Prints, for each exact routine, the seconds of the previous pure-Python
implementation (kept only here, as the baseline) and of python-flint on the
same input, with the ratio; both results are compared (they must agree). Then
the seconds of each producer of ``symtrans certify`` against the 60 s budget
(wall clock and process CPU time: on a shared machine the CPU time is the
figure that does not depend on the load).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's symtrans, not an installed one


# ------------------------------------------------ the previous pure-Python routines (baseline only)
def old_rank_q(M):
    """Fraction-free integer elimination over Q (symtrans <= 0.1 certify/exact.py rank_q)."""
    A = [list(r) for r in M]
    m, n = len(A), len(A[0]) if A else 0
    rank = 0
    for col in range(n):
        piv = next((i for i in range(rank, m) if A[i][col]), None)
        if piv is None:
            continue
        A[rank], A[piv] = A[piv], A[rank]
        p_row = A[rank]
        a = p_row[col]
        for i in range(rank + 1, m):
            b = A[i][col]
            if b:
                row = [a * x - b * y for x, y in zip(A[i], p_row)]
                g = math.gcd(*row)
                A[i] = [x // g for x in row] if g > 1 else row
        rank += 1
        if rank == m:
            break
    return rank


def old_det_q(M):
    """Bareiss elimination with Fractions (previous det_q)."""
    A = [[Fraction(v) for v in r] for r in M]
    n = len(A)
    sign, prev = 1, Fraction(1)
    for k in range(n - 1):
        if A[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if A[i][k] != 0), None)
            if swap is None:
                return Fraction(0)
            A[k], A[swap] = A[swap], A[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                A[i][j] = (A[i][j] * A[k][k] - A[i][k] * A[k][j]) / prev
        prev = A[k][k]
    return sign * A[n - 1][n - 1] if n else Fraction(1)


def old_rank_mod_p(A, p=2**31 - 1):
    """Vectorised int64 elimination over GF(p) (previous rank_mod_p)."""
    import numpy as np

    A = np.array(A, dtype=np.int64) % p
    m, n = A.shape
    rank = 0
    for col in range(n):
        if rank == m:
            break
        nz = np.flatnonzero(A[rank:, col])
        if nz.size == 0:
            continue
        piv = rank + int(nz[0])
        if piv != rank:
            A[[rank, piv]] = A[[piv, rank]]
        inv = pow(int(A[rank, col]), -1, p)
        A[rank, col:] = A[rank, col:] * inv % p
        below = A[rank + 1:, col].copy()
        rows = np.flatnonzero(below)
        if rows.size:
            idx = rank + 1 + rows
            A[idx, col:] = (A[idx, col:] - np.outer(below[rows], A[rank, col:])) % p
        rank += 1
    return rank


def old_iv_det(M):
    """mpmath interval elimination (previous iv_det); the whole line when a pivot interval contains 0."""
    from mpmath import iv

    A = [list(r) for r in M]
    n = len(A)
    det = iv.mpf(1)
    for k in range(n):
        piv = max(range(k, n), key=lambda i: abs(float(A[i][k].mid)))
        if 0 in A[piv][k]:
            return iv.mpf([float("-inf"), float("inf")])
        if piv != k:
            A[k], A[piv] = A[piv], A[k]
            det = -det
        det = det * A[k][k]
        for i in range(k + 1, n):
            f = A[i][k] / A[k][k]
            A[i] = [a - f * b for a, b in zip(A[i], A[k])]
    return det


def _timed(f, *a):
    t0 = time.process_time()
    out = f(*a)
    return out, time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--size", type=int, default=96, help="matrix size of the exact comparisons (default 96)")
    parser.add_argument("--skip-certify", action="store_true", help="only the routine comparisons")
    args = parser.parse_args()

    import numpy as np
    from flint import arb, arb_mat, fmpq_mat, fmpz_mat, nmod_mat

    rng = np.random.default_rng(0)
    n = args.size
    print(f"{'routine':<44} {'pure Python':>12} {'flint':>10} {'ratio':>8}   (CPU seconds)")

    def row(name, old, new, agree):
        print(f"{name:<44} {old:12.3f} {new:10.4f} {old / max(new, 1e-6):7.0f}x   {'agree' if agree else 'DISAGREE'}")

    W = (rng.standard_normal((n, n)) * 0.05).astype(np.float32).astype(np.float64)  # a weight-like matrix
    from symtrans.certify.exact import dyadic_matrix

    Z, _ = dyadic_matrix(W)
    ints = [[int(v) for v in r] for r in Z.tolist()]
    r_old, t_old = _timed(old_rank_q, ints)
    r_new, t_new = _timed(lambda: fmpz_mat(ints).rank())
    row(f"rank over Q, {n}x{n} float32 weights (full)", t_old, t_new, r_old == r_new)
    k = n // 2
    low = [[int(v) for v in r] for r in (rng.integers(-9, 10, (n, k)) @ rng.integers(-9, 10, (k, n))).tolist()]
    r_old, t_old = _timed(old_rank_q, low)
    r_new, t_new = _timed(lambda: fmpz_mat(low).rank())
    row(f"rank over Q, {n}x{n} integers of rank {k}", t_old, t_new, r_old == r_new == k)
    m = min(n, 64)
    D = [r[:m] for r in ints[:m]]
    d_old, t_old = _timed(old_det_q, D)
    d_new, t_new = _timed(lambda: fmpq_mat(D).det())
    row(f"determinant over Q, {m}x{m} weights", t_old, t_new, d_old == Fraction(int(d_new.p), int(d_new.q)))
    P = 2**31 - 1
    big = (rng.integers(0, P, (4 * n, 4 * n))).tolist()
    r_old, t_old = _timed(old_rank_mod_p, big)
    r_new, t_new = _timed(lambda: nmod_mat(big, P).rank())
    row(f"rank mod p, {4 * n}x{4 * n}", t_old, t_new, r_old == r_new)
    a = 48
    S = rng.standard_normal((a, 16)) @ rng.standard_normal((16, a)) / 4
    from mpmath import iv

    E_iv = [[iv.exp(iv.mpf(float(v))) for v in r] for r in S]
    d_old, t_old = _timed(old_iv_det, E_iv)
    d_new, t_new = _timed(lambda: arb_mat([[arb(float(v)).exp() for v in r] for r in S]).det())
    certified_old, certified_new = 0 not in d_old, 0 not in d_new
    row(f"ball det exp(S), {a}x{a} (certified {certified_old}/{certified_new})", t_old, t_new,
        not (certified_old and certified_new) or (float(d_old.mid) > 0) == (d_new > 0))

    if args.skip_certify:
        return
    from symtrans.runner import run_certificates
    from symtrans.context import Context

    model = None if args.model == "none" else args.model
    start, cpu0 = time.perf_counter(), time.process_time()
    results = run_certificates(None, Context(model=model, n=128))
    total, cpu = time.perf_counter() - start, time.process_time() - cpu0
    print(f"\n{'claim':<20} {'producer':<24} {'verdict':<14} seconds")
    for cid, evs in results.items():
        for ev in evs:
            print(f"{cid:<20} {ev.producer:<24} {ev.verdict.label:<14} {ev.seconds or 0:7.2f}")
    print(f"total {total:.1f} s wall, {cpu:.1f} s CPU (budget 60 s; model load included)")


if __name__ == "__main__":
    main()
