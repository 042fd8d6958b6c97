"""The invariance group G of an architecture, and random elements of it acting on the bundled model.

Per layer, G contains (see `paper/claims.md`, §9; the group sizes come from the formula registry):
  * per-head GL(d_k) on (Q, K):  W_Q^h -> W_Q^h M_h,  W_K^h -> W_K^h M_h^{-T}  (biases likewise),
  * per-head GL(d_v) on (V, O):  W_V^h -> W_V^h N_h,  W_O^h -> N_h^{-1} W_O^h  (b_V^h -> b_V^h N_h),
  * S_H, relabelling the heads,  and  S_{d_ff}, permuting the FFN's hidden units.
We draw a random element of every factor in every layer, apply it to the real weights, and check
that the encoder's output is unchanged up to float64 rounding. As a control, the GL(d_v) factor
applied to W_V alone (not undone in W_O) must change the output: the check can fail.

Run:  python examples/group_invariance.py
"""

import torch

from symtrans import formula, load
from symtrans.numeric import encode

ARCHS = ["bert-base", "minilm-l6-h384", "gpt2"]


def random_invertible(k: int, gen: torch.Generator, batch: int) -> torch.Tensor:
    """Well-conditioned random matrices: I + a small Gaussian perturbation."""
    noise = torch.randn(batch, k, k, generator=gen, dtype=torch.float64)
    return torch.eye(k, dtype=torch.float64) + 0.3 * noise / k**0.5


def act(tensors: dict, seed: int, *, only_v: bool = False) -> dict:
    """Apply a random group element (all four factors, every layer) to a copy of the weights."""
    gen = torch.Generator().manual_seed(seed)
    t = {k: v.clone() for k, v in tensors.items()}
    L, H, _, dk = t["W_Q"].shape
    dv = t["W_V"].shape[-1]
    for layer in range(L):
        N = random_invertible(dv, gen, H)  # per-head GL(d_v)
        t["W_V"][layer] = t["W_V"][layer] @ N
        t["b_V"][layer] = (t["b_V"][layer].unsqueeze(1) @ N).squeeze(1)
        if only_v:
            continue
        t["W_O"][layer] = torch.linalg.solve(N, t["W_O"][layer])  # N^{-1} W_O
        M = random_invertible(dk, gen, H)  # per-head GL(d_k)
        Minv_T = torch.linalg.inv(M).transpose(-1, -2)
        t["W_Q"][layer] = t["W_Q"][layer] @ M
        t["b_Q"][layer] = (t["b_Q"][layer].unsqueeze(1) @ M).squeeze(1)
        t["W_K"][layer] = t["W_K"][layer] @ Minv_T
        t["b_K"][layer] = (t["b_K"][layer].unsqueeze(1) @ Minv_T).squeeze(1)
        perm = torch.randperm(H, generator=gen)  # S_H
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
            t[name][layer] = t[name][layer][perm]
        hidden = torch.randperm(t["W_in"].shape[-1], generator=gen)  # S_{d_ff}
        t["W_in"][layer] = t["W_in"][layer][:, hidden]
        t["b_in"][layer] = t["b_in"][layer][hidden]
        t["W_out"][layer] = t["W_out"][layer][hidden, :]
    return t


def main() -> None:
    print("The group G (sizes from the formula registry; gauge-dimension is per layer):")
    print(f"{'':<24}" + "".join(f"{a:>18}" for a in ARCHS))
    for name in ("gauge-dimension", "gauge-dimension-model", "head-permutations"):
        print(f"{name:<24}" + "".join(f"{int(formula(name, arch=a).value):>18,}" for a in ARCHS))
    ffn = formula("ffn-permutations", arch="minilm-l6-h384").value
    print(f"{'ffn-permutations':<24}  d_ff! = a {len(str(ffn)):,}-digit integer for minilm-l6-h384")
    print(f"  gauge-dimension counts: {formula('gauge-dimension', arch='bert-base').formula.counts}")

    w = load("default", dtype="float64")
    reference = encode(w, n=32, seed=0).layers[-1].out
    scale = float(reference.abs().max())
    print(f"\nBundled model {w.arch.name}: output of {w.n_layers} layers at n = 32, float64, max |out| = {scale:.3g}")
    tol = 1e-10  # float64 rounding through 6 layers and the inverses gives ~1e-15; 1e-10 leaves wide headroom
    for seed in range(3):
        moved = type(w)(**{**w.__dict__, "tensors": act(w.tensors, seed)})
        diff = float((encode(moved, n=32, seed=0).layers[-1].out - reference).abs().max()) / scale
        changed = float((moved.W_V - w.W_V).abs().max())
        print(f"  group element {seed}: weights moved by up to {changed:.3g}; "
              f"output changed by {diff:.2e} (relative)  -> {'unchanged' if diff < tol else 'CHANGED'}")
        assert diff < tol, "a group element changed the output"
    broken = type(w)(**{**w.__dict__, "tensors": act(w.tensors, 0, only_v=True)})
    diff = float((encode(broken, n=32, seed=0).layers[-1].out - reference).abs().max()) / scale
    print(f"  control, W_V -> W_V N without W_O -> N^-1 W_O: output changed by {diff:.2e} (relative)")
    assert diff > 1e-3, "the control should change the output"


if __name__ == "__main__":
    main()
