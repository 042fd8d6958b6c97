"""Benchmark: ``symtrans.numeric.linalg.matmul`` (NumPy's BLAS) against torch's ``@`` on the group solves' products.

The shapes are those that relate and canonical multiply most on the bundled model (d_model 384, d_k 32, 12 heads,
d_ff 1536; sketches of 8, 9 and 32 columns), plus two large products for contrast. One thread on both sides
(``symtrans.threads.single_threaded`` limits torch and NumPy's BLAS), CPU seconds per product over at least
0.2 s each, in the same process; the ratio is torch's time over matmul's (above 1: matmul is faster).

Run: ``python benchmarks/bench_matmul.py``
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [((12, 384, 32), (12, 32, 32)), ((12, 32, 384), (12, 384, 32)), ((1536, 384), (384, 9)),
          ((9, 384), (384, 1536)), ((384, 32), (32, 32)), ((384, 384), (384, 32)), ((384, 32), (32, 384)),
          ((384, 384), (384, 384)), ((1024, 1024), (1024, 1024))]


def _per_call(fn) -> float:  # noqa: ANN001
    fn()
    t0, k = time.process_time(), 0
    while time.process_time() - t0 < 0.2:
        fn()
        k += 1
    return (time.process_time() - t0) / k


def main() -> None:
    import torch

    from symtrans.numeric.linalg import matmul
    from symtrans.threads import single_threaded

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()} {os.cpu_count()} cores, "
          f"torch {torch.__version__}")
    g = torch.Generator().manual_seed(0)
    with single_threaded():
        for dtype in (torch.float64, torch.float32):
            for sa, sb in SHAPES:
                a, b = torch.randn(*sa, generator=g, dtype=dtype), torch.randn(*sb, generator=g, dtype=dtype)
                t_torch, t_np = _per_call(lambda: a @ b), _per_call(lambda: matmul(a, b))
                print(f"{str(dtype)[6:]:8s} {str(sa):15s} @ {str(sb):15s} torch {t_torch * 1e3:8.3f} ms  "
                      f"matmul {t_np * 1e3:8.3f} ms  ratio {t_torch / t_np:5.2f}")


if __name__ == "__main__":
    main()
