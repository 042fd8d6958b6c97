"""Numeric checks for §5: rank under residual updates, Dong's regime, the residual Jacobian.

Forms used (each evidence record repeats which):

* the paper's ``MHA(X) = sum_h softmax(X W_Q^h W_K^hT X^T / sqrt(d_k)) X W_V^h W_O^h``:
  the real layer's weight matrices with every bias set to zero, no ``b_O``, no LN
  (:func:`mha_paper`), for Theorem 5.3's rank test;
* the variants of :mod:`symtrans.numeric.variants` (biases kept) for the depth sweep;
* the real attention (Q/K/V biases kept) plus residual plus ``b_O``, no LN, no MLP,
  for the Jacobian of Proposition 5.4 (``b_O`` does not change a Jacobian).

"Almost every rank-r X" is checked under the law of ``X = U V^T`` with i.i.d.
Gaussian ``U`` (n x r) and ``V`` (d x r): its push-forward is a smooth positive
density on the manifold of rank-r matrices, so its null sets are those of the
manifold's volume measure (the rank-deficient matrices themselves are
Lebesgue-null in R^{n x d}, so Lebesgue measure cannot be meant).

Examples
--------
>>> from symtrans.evidence import Context
>>> ev = check_prop_5_1(Context(model="default", n=8))[0]
>>> ev.verdict.label
'supported'
"""

from __future__ import annotations

import math
from typing import Any

from symtrans.checks.common import (DECISIVE_GAP, ENCODERS, FAMILIES_NOTE, GAP_TOLERANCE, decisive, gap, record,
                                    trace, weights)
from symtrans.evidence import Context, Evidence, Tolerance, Verdict, producer

__all__ = ["mha_paper", "rank_grid", "low_rank_inputs", "residual_rank_cases",
           "depth_sweep", "mha_jvp", "jacobian_check", "MEASURE", "COLLAPSED"]

MEASURE = ("rank-r stratum: X = U V^T, U (n x r) and V (d x r) i.i.d. standard Gaussian, scaled to the "
           "Frobenius norm of the layer's real input (a smooth positive density on the rank-r manifold)")

#: Dong-style collapse: the residual ratio below this is rank one to 8 significant digits.
COLLAPSED = 1e-8


def _paper_layer(layer: dict[str, Any]) -> dict[str, Any]:
    import torch

    return dict(layer, b_Q=torch.zeros_like(layer["b_Q"]), b_K=torch.zeros_like(layer["b_K"]),
                b_V=torch.zeros_like(layer["b_V"]))


def mha_paper(X: Any, layer: dict[str, Any]) -> Any:
    """The paper's MHA(X): the layer's weights, every bias zero, no b_O (batched over leading axes).

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model
    >>> w = load_model("default")
    >>> tuple(mha_paper(torch.zeros(2, 5, 384, dtype=torch.float64), w.layer(0)).shape)
    (2, 5, 384)
    """
    import torch

    from symtrans.numeric.forward import attention

    lay = _paper_layer(layer)
    one = lambda x: attention(x, lay)[2].sum(0)  # noqa: E731
    if X.ndim == 2:
        return one(X)
    flat = X.reshape(-1, *X.shape[-2:])
    return torch.func.vmap(one)(flat).reshape(X.shape)


def rank_grid(n: int, d: int) -> list[int]:
    """The stated grid of ranks r < min(n, d): 1, 2, 3, 8, 32, 64, 128, 256 and the top two.

    Examples
    --------
    >>> rank_grid(128, 384)
    [1, 2, 3, 8, 32, 64, 126, 127]
    >>> rank_grid(4, 384)
    [1, 2, 3]
    """
    top = min(n, d) - 1
    base = [1, 2, 3, 8, 32, 64, 128, 256]
    return sorted({r for r in base + [top - 1, top] if 1 <= r <= top})


def low_rank_inputs(X: Any, ranks: list[int], seed: int) -> dict[str, Any]:
    """Rank-r inputs built from a real ``X``: its truncated SVD, and Gaussian factors of its norm.

    Returns ``{"embedding-svd": [R, n, d], "random-factors": [R, n, d]}``.

    Examples
    --------
    >>> import torch
    >>> X = torch.randn(6, 5, dtype=torch.float64)
    >>> ins = low_rank_inputs(X, [1, 2], seed=0)
    >>> [int(torch.linalg.matrix_rank(m)) for m in ins["random-factors"]]
    [1, 2]
    """
    import torch

    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    svd = torch.stack([(U[:, :r] * S[:r]) @ Vh[:r] for r in ranks])
    g = torch.Generator().manual_seed(seed)
    n, d = X.shape
    rand = []
    for r in ranks:
        M = torch.randn(n, r, generator=g, dtype=X.dtype) @ torch.randn(r, d, generator=g, dtype=X.dtype)
        rand.append(M * (X.norm() / M.norm()))
    return {"embedding-svd": svd, "random-factors": torch.stack(rand)}


def residual_rank_cases(X: Any, update: Any, ranks: list[int], seed: int) -> list[dict[str, Any]]:
    """rank(X_r + update(X_r)) against rank(X_r) for each family and rank in ``ranks``.

    ``update`` maps a batch ``[B, n, d]`` to ``[B, n, d]``.

    Examples
    --------
    >>> import torch
    >>> X = torch.randn(6, 5, dtype=torch.float64)
    >>> cases = residual_rank_cases(X, lambda B: 0 * B, [1, 2], 0)
    >>> [(c["rank_X"], c["rank_F"], c["increase"], c["decisive"]) for c in cases][:2]
    [(1, 1, False, True), (2, 2, False, True)]
    """
    import torch

    from symtrans.numeric.linalg import rank_from_singular_values

    out = []
    for family, batch in low_rank_inputs(X, ranks, seed).items():
        F = batch + update(batch)
        s_x, s_f = torch.linalg.svdvals(batch), torch.linalg.svdvals(F)
        shape = tuple(batch.shape[-2:])
        for r, sx, sf in zip(ranks, s_x, s_f):
            a = rank_from_singular_values(sx, shape, batch.dtype)
            b = rank_from_singular_values(sf, shape, batch.dtype)
            nxt = float(sf[a.rank]) if a.rank < len(sf) else 0.0  # sigma_{rank X + 1}(F)
            increase = nxt > b.cut
            # the statement's own decision: is sigma_{r+1}(F) clearly above (or below) the cut?
            stmt_margin = math.log10(nxt / b.cut) if increase else (gap(b) if b.rank <= a.rank else 0.0)
            out.append({"family": family, "r": r, "rank_X": a.rank, "rank_F": b.rank, "gap_X": gap(a),
                        "gap_F": gap(b), "sigma_F_next": nxt, "cut_F": b.cut,
                        "statement_margin": stmt_margin,
                        "decisive": gap(a) >= DECISIVE_GAP and stmt_margin >= DECISIVE_GAP,
                        "increase": increase})
    return out


def _rank_evidence(ctx: Context, claim: str, name: str, cases: list[dict[str, Any]], statement: str,
                   inputs: dict[str, Any]) -> Evidence:
    decided = [c for c in cases if c["decisive"]]
    bad = [c for c in decided if not c["increase"]]
    margin = min((min(c["gap_X"], c["statement_margin"]) for c in decided), default=None)
    mm = ("smallest of: the spectral gap at rank(X)'s cut, and the decades between sigma_{rank X + 1} of "
          "the sum and its rank cut (decades)")
    details = {"cases": cases}
    if bad:
        c = bad[0]
        return record(ctx, claim, name, Verdict.FAILS,
                      f"fails: {len(bad)} of {len(decided)} decided inputs have {statement} violated; "
                      f"first: {c.get('where', '')} family {c['family']}, r={c['r']}: rank {c['rank_X']} -> "
                      f"{c['rank_F']}", margin=margin, margin_meaning=mm, tolerance=GAP_TOLERANCE,
                      inputs=inputs, details=details, counterexample=dict(c))
    if len(decided) < len(cases) or not decided:
        return record(ctx, claim, name, Verdict.INCONCLUSIVE,
                      f"{len(cases) - len(decided)} of {len(cases)} rank decisions had a spectral gap "
                      f"below 1e3; the decided ones all show {statement}", margin=margin,
                      margin_meaning=mm, tolerance=GAP_TOLERANCE, inputs=inputs, details=details)
    return record(ctx, claim, name, Verdict.SUPPORTED,
                  f"{statement} on all {len(cases)} inputs ({inputs.get('summary', '')})",
                  margin=margin, margin_meaning=mm, tolerance=GAP_TOLERANCE, inputs=inputs, details=details)


@producer("prop-5.1", kind="numeric", name="rank-plus-gaussian", needs_model=True)
def check_prop_5_1(ctx: Context) -> list[Evidence]:
    """rank(A + B) > rank(A) for real rank-r A (truncated SVD of embeddings) and Gaussian B."""
    import torch

    X = trace(ctx).embeddings
    n, d = X.shape
    ranks = rank_grid(n, d)
    g = torch.Generator().manual_seed(ctx.seed + 11)
    scale = 1e-3 * float(X.norm()) / math.sqrt(n * d)

    def gaussian(batch: Any) -> Any:
        return scale * torch.randn(batch.shape, generator=g, dtype=batch.dtype)

    cases = [c for c in residual_rank_cases(X, gaussian, ranks, ctx.seed) if c["family"] == "embedding-svd"]
    inputs = {"n": n, "d_model": d, "ranks": ranks, "A": "rank-r truncated SVD of the real embedding output",
              "B": f"i.i.d. Gaussian entries, std {scale:.3g} (1e-3 of the rms entry of A)",
              "summary": f"n={n}, r in {ranks}"}
    return [_rank_evidence(ctx, "prop-5.1", "rank-plus-gaussian", cases, "rank(A + B) > rank(A)", inputs)]


@producer("thm-5.3", kind="numeric", name="residual-rank", needs_model=True)
def check_thm_5_3(ctx: Context) -> list[Evidence]:
    """rank(X + MHA(X)) > rank(X) at every real layer for rank-r inputs on a grid of r."""
    w = weights(ctx)
    tr = trace(ctx)
    n, d = tr.embeddings.shape
    ranks = rank_grid(n, d)
    cases = []
    for i, lt in enumerate(tr.layers):
        layer = w.layer(i)
        for c in residual_rank_cases(lt.X, lambda B: mha_paper(B, layer), ranks, ctx.seed + i):
            cases.append(dict(c, where=f"layer {i}", layer=i))
    inputs = {"n": n, "d_model": d, "layers": len(tr.layers), "ranks": ranks, "measure": MEASURE,
              "families": {"embedding-svd": "rank-r truncated SVD of the layer's real input",
                           "random-factors": MEASURE},
              "form": "F(X) = X + MHA(X), paper's MHA: real W_Q, W_K, W_V, W_O, all biases zero, no b_O, no LN",
              "summary": f"{len(tr.layers)} layers x 2 families x r in {ranks}, n={n}"}
    return [_rank_evidence(ctx, "thm-5.3", "residual-rank", cases, "rank(X + MHA(X)) > rank(X)", inputs)]


#: the depth-sweep variants: name -> (symtrans.numeric.variants name, ln)
VARIANTS = {"pure-attention": ("pure-attention", False), "attention+residual": ("residual", False),
            "attention+residual+LN": ("residual", True), "full-block": ("full", True)}


def depth_sweep(w: Any, X: Any, depth: int, variants: tuple[str, ...] = tuple(VARIANTS)) -> dict[str, list[float]]:
    """Dong's residual ratio per depth for each variant, cycling through the model's real layers.

    The variants are :func:`symtrans.numeric.variants.run_stack`'s (biases kept:
    ``b_V`` and ``b_O`` add rows ``1 x^T``): ``pure-attention`` X <- MHA(X) + b_O;
    ``attention+residual`` X <- X + MHA(X) + b_O; ``attention+residual+LN`` the
    same then LN1 (no MLP); ``full-block`` the real post-LN encoder layer.

    Examples
    --------
    >>> from symtrans.numeric import load_model, encode
    >>> w = load_model("default")
    >>> r = depth_sweep(w, encode(w, n=6, layers=0).embeddings, 2, ("pure-attention",))
    >>> len(r["pure-attention"])
    3
    """
    import torch

    from symtrans.numeric.measure import residual_ratio
    from symtrans.numeric.variants import run_stack

    out = {}
    for v in variants:
        name, ln = VARIANTS[v]
        states = run_stack(w, X, name, depth=depth, ln=ln)
        out[v] = [residual_ratio(h).ratio if bool(torch.isfinite(h).all()) else math.nan for h in states]
    return out


def _fit_rate(ratios: list[float]) -> dict[str, Any]:
    """Least-squares slope of log10(ratio) per layer over the points above the rounding floor."""
    pts = [(k, math.log10(r)) for k, r in enumerate(ratios) if r == r and r > 1e-13]
    if len(pts) < 2:
        return {"points": len(pts), "log10_slope_per_layer": None}
    mx = sum(k for k, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((k - mx) ** 2 for k, _ in pts)
    slope = sum((k - mx) * (y - my) for k, y in pts) / sxx
    # doubly exponential check: log10(-log10 r) against depth
    dd = [(k, math.log10(-y)) for k, y in pts if y < 0]
    dslope = None
    if len(dd) >= 2:
        mx2 = sum(k for k, _ in dd) / len(dd)
        my2 = sum(y for _, y in dd) / len(dd)
        s2 = sum((k - mx2) ** 2 for k, _ in dd)
        dslope = sum((k - mx2) * (y - my2) for k, y in dd) / s2 if s2 else None
    return {"points": len(pts), "log10_slope_per_layer": slope, "loglog_slope_per_layer": dslope,
            "floor": "points at or below 1e-13 (float64 rounding floor of the ratio) are excluded"}


@producer("lit-dong", kind="numeric", name="depth-sweep-pure-attention", needs_model=True, families=ENCODERS,
          applies_to=FAMILIES_NOTE["bidirectional"])
def check_dong(ctx: Context) -> list[Evidence]:
    """Pure attention (no residual, no MLP, no LN) with repeated real layers collapses to rank one."""
    return [_sweep_evidence(ctx, "lit-dong")]


@producer("thm-5.3", kind="numeric", name="depth-sweep-residual", needs_model=True)
def check_sweep_residual(ctx: Context) -> list[Evidence]:
    """Residual variants with repeated real layers do not collapse (the consequence of thm-5.3)."""
    return [_sweep_evidence(ctx, "thm-5.3")]


SWEEP_DEPTH = 18
SWEEP_N = 32


def _sweep(ctx: Context) -> dict[str, list[float]]:
    if "sec5-sweep" not in ctx.cache:
        ctx.cache["sec5-sweep"] = depth_sweep(weights(ctx), trace(ctx).embeddings[:SWEEP_N], SWEEP_DEPTH)
    return ctx.cache["sec5-sweep"]


def _sweep_evidence(ctx: Context, claim: str) -> Evidence:
    ratios = _sweep(ctx)
    n = min(SWEEP_N, int(trace(ctx).embeddings.shape[0]))
    tol = Tolerance(COLLAPSED, "collapse = residual ratio ||X - 1 mean^T||_F / ||X||_F below 1e-8: the rows "
                    "agree to 8 significant digits (rank one up to that precision)", "||X||_F")
    fits = {v: _fit_rate(r) for v, r in ratios.items()}
    inputs = {"n": n, "depth": SWEEP_DEPTH, "layers": "the model's layers cycled 0..L-1",
              "input": f"embedding output of the first {n} seeded random tokens",
              "ratio": "Dong's residual ratio ||X - 1 mean^T||_F / ||X||_F (symtrans.numeric.measure)",
              "variants": {"pure-attention": "X <- MHA(X) + b_O (real Q/K/V biases), no residual, no LN",
                           "attention+residual": "X <- X + MHA(X) + b_O, no LN, no MLP",
                           "attention+residual+LN": "X <- LN1(X + MHA(X) + b_O), no MLP",
                           "full-block": "real post-LN encoder layer"}}
    details = {"ratios": ratios, "fits": fits}
    if claim == "lit-dong":
        final = ratios["pure-attention"][-1]
        if final != final:
            return record(ctx, claim, "depth-sweep-pure-attention", Verdict.INCONCLUSIVE,
                          "pure attention overflowed before the end of the sweep", tolerance=tol,
                          inputs=inputs, details=details)
        first = next((k for k, r in enumerate(ratios["pure-attention"]) if r < COLLAPSED), None)
        slope = fits["pure-attention"]["log10_slope_per_layer"]
        v = Verdict.SUPPORTED if final < COLLAPSED else Verdict.FAILS
        dslope = fits["pure-attention"]["loglog_slope_per_layer"]
        rate = (f"fitted slope of log10 ratio {slope:.3g} per layer; of log10(-log10 ratio) {dslope:.3g} per "
                f"layer (the exponent grows {10 ** dslope:.3g}x per layer: doubly exponential)"
                if slope is not None and dslope is not None else "too few points above the float floor to fit")
        return record(ctx, claim, "depth-sweep-pure-attention", v,
                      (f"pure attention collapses: ratio {ratios['pure-attention'][0]:.3g} -> {final:.3g} "
                       f"(below 1e-8 from depth {first}); {rate}" if v is Verdict.SUPPORTED else
                       f"pure attention did not collapse within depth {SWEEP_DEPTH}: ratio {final:.3g}"),
                      margin=math.log10(COLLAPSED / final) if final > 0 else math.inf,
                      margin_meaning="decades of the final pure-attention ratio below the collapse threshold",
                      tolerance=tol, inputs=inputs, details=details)
    resid = {v: ratios[v] for v in VARIANTS if v != "pure-attention"}  # noqa: C416
    worst = min(min(r) for r in resid.values())
    bad = [v for v, r in resid.items() if min(r) < COLLAPSED]
    v = Verdict.FAILS if bad else Verdict.SUPPORTED
    summary = (f"no collapse with residuals over depth {SWEEP_DEPTH}: smallest ratio {worst:.3g} "
               f"({', '.join(f'{k} ends at {r[-1]:.3g}' for k, r in resid.items())}); pure attention ends at "
               f"{ratios['pure-attention'][-1]:.3g}" if not bad else
               f"residual variant(s) {bad} collapsed: smallest ratio {worst:.3g}")
    return record(ctx, claim, "depth-sweep-residual", v, summary,
                  margin=math.log10(worst / COLLAPSED) if worst > 0 else -math.inf,
                  margin_meaning="decades of the smallest residual-variant ratio above the collapse threshold",
                  tolerance=tol, inputs=inputs, details=details)


# ----------------------------------------------------------------- prop-5.4
def mha_jvp(X: Any, dX: Any, layer: dict[str, Any]) -> Any:
    """The paper's directional derivative D[MHA](X)[dX] = sum_h (D[A^h][dX]) X W_V W_O + A^h dX W_V W_O.

    ``D[A^h][dX]`` is the softmax Jacobian applied row-wise to the score
    derivative ``dS = (dX W_Q) K^T + Q (dX W_K)^T`` over ``sqrt(d_k)``, with
    the layer's Q/K biases inside Q and K.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric import load_model, encode
    >>> w = load_model("default")
    >>> X = encode(w, n=4, layers=0).embeddings
    >>> float(mha_jvp(X, torch.zeros_like(X), w.layer(0)).abs().max())
    0.0
    """
    import torch

    from symtrans.numeric.forward import attention

    A, _, _ = attention(X, layer)
    q = torch.einsum("nd,hdk->hnk", X, layer["W_Q"]) + layer["b_Q"][:, None, :]
    k = torch.einsum("nd,hdk->hnk", X, layer["W_K"]) + layer["b_K"][:, None, :]
    dq = torch.einsum("nd,hdk->hnk", dX, layer["W_Q"])
    dk = torch.einsum("nd,hdk->hnk", dX, layer["W_K"])
    dS = (dq @ k.transpose(-1, -2) + q @ dk.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    dA = A * (dS - (A * dS).sum(-1, keepdim=True))
    WVO = layer["W_V"] @ layer["W_O"]  # [H, d, d]
    return (dA @ (X @ WVO) + A @ (dX @ WVO)).sum(0)


def _layer(w: Any, h: Any, i: int, with_ln: bool) -> Any:
    from symtrans.numeric.forward import attention, layer_norm

    lay = w.layer(i)
    h = h + attention(h, lay)[2].sum(0) + lay["b_O"]
    if with_ln:
        h = layer_norm(h, lay["ln1_w"], lay["ln1_b"], float(w.arch.ln_eps))
    return h


def _stack(w: Any, X: Any, layers: int, with_ln: bool) -> Any:
    h = X
    for i in range(layers):
        h = _layer(w, h, i, with_ln)
    return h


def jacobian_check(w: Any, X: Any, layers: int = 2, directions: int = 6, seed: int = 0,
                   with_ln: bool = False) -> dict[str, Any]:
    """Compare the chained formula (I + D[MHA]) with autograd's JVP of the stack, in random directions.

    ``with_ln=True`` puts each layer's LayerNorm into the stack (the real
    post-LN block without MLP), where the formula must not match.

    Examples
    --------
    >>> from symtrans.numeric import load_model, encode
    >>> w = load_model("default")
    >>> X = encode(w, n=4, layers=0).embeddings
    >>> jacobian_check(w, X, layers=1, directions=2)["max_rel_error"] < 1e-10
    True
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    errors = []
    fn = lambda x: _stack(w, x, layers, with_ln)  # noqa: E731
    for _ in range(directions):
        dX = torch.randn(X.shape, generator=g, dtype=X.dtype)
        _, ref = torch.func.jvp(fn, (X,), (dX,))
        h, dh = X, dX
        with torch.no_grad():
            for i in range(layers):  # chain (I + D[MHA](h_i)) along the stack's own states
                dh = dh + mha_jvp(h, dh, w.layer(i))
                h = _layer(w, h, i, with_ln)
        errors.append(float((dh - ref).norm() / ref.norm()))
    # non-affinity: second-order remainder scales like t^2
    dX = torch.randn(X.shape, generator=g, dtype=X.dtype)
    with torch.no_grad():
        _, lin = torch.func.jvp(fn, (X,), (dX,))
        rem = [float((fn(X + t * dX) - fn(X) - t * lin).norm()) for t in (1e-2, 1e-3)]
    return {"max_rel_error": max(errors), "errors": errors, "layers": layers, "with_ln": with_ln,
            "remainder_t1e-2": rem[0], "remainder_t1e-3": rem[1],
            "remainder_ratio": rem[0] / rem[1] if rem[1] > 0 else math.inf}


JACOBIAN_TOL = 1e-9
JACOBIAN_DIRECTIONS = 4


@producer("prop-5.4", kind="numeric", name="residual-jacobian", needs_model=True)
def check_prop_5_4(ctx: Context) -> list[Evidence]:
    """The attention-plus-residual stack's Jacobian equals the chained I + D[MHA] (paper's head formula)."""
    import torch

    from symtrans.numeric.forward import embed, random_ids

    w = weights(ctx)
    n = min(ctx.n, 8)
    X = embed(w, random_ids(w, n, ctx.seed))
    res = jacobian_check(w, X, layers=2, directions=JACOBIAN_DIRECTIONS, seed=ctx.seed)
    eps = torch.finfo(X.dtype).eps
    tol = Tolerance(JACOBIAN_TOL if X.dtype == torch.float64 else 1e-3,
                    f"both sides are float{'64' if X.dtype == torch.float64 else '32'} evaluations of the same "
                    f"derivative; their rounding differences (eps = {eps:.2g} times O(n d) accumulated terms) "
                    "stay far below this; a wrong formula gives errors of order 1e-2 to 1", "||autograd JVP||")
    err = res["max_rel_error"]
    v = Verdict.SUPPORTED if err < tol.value else Verdict.FAILS
    inputs = {"n": n, "layers": 2, "directions": JACOBIAN_DIRECTIONS, "input": "embedding output of seeded random tokens",
              "form": "X <- X + MHA(X) + b_O with the real Q/K/V biases, no LN, no MLP",
              "reference": "torch.func.jvp (forward-mode autograd) of the stack"}
    return [record(ctx, "prop-5.4", "residual-jacobian", v,
                   f"chained (I + D[MHA]) with the paper's head formula vs autograd: max relative error "
                   f"{err:.2g} over {JACOBIAN_DIRECTIONS} random directions (tolerance {tol.value:g}); second-order remainder "
                   f"shrinks {res['remainder_ratio']:.3g}x when t shrinks 10x (quadratic: the map is not affine)",
                   margin=math.log10(tol.value / err) if err > 0 else math.inf,
                   margin_meaning="decades between the relative error and the tolerance (negative: exceeded)",
                   tolerance=tol, inputs=inputs, details=res)]


# ------------------------------------------------------------------ cor-mlp-role
MLP_SPAN_N = 32  # n < d_model, so the span of the token embeddings is a proper subspace
LINEARITY_TOL = Tolerance(1e-12, "float64 evaluation of a linear map: relative superposition error of a few "
                          "hundred roundings of size 1.1e-16 stays below 1e-12", "relative to ||g(Z)||")


def _frozen_stack(w: Any, X0: Any, layers: int, mlp: bool) -> tuple[Any, Any]:
    """The attention (+ MLP) + residual stack with every A^h frozen at its value along X0's trajectory.

    Returns ``(g, out)``: the map Z -> stack(Z) with frozen attention (biases off, no LN), and g(X0).
    """
    import torch

    from symtrans.numeric.forward import _gelu, attention

    frozen = []
    h = X0
    for i in range(layers):
        lay = _paper_layer(w.layer(i))
        A, _, _ = attention(h, lay)
        frozen.append((A, lay))
        h = _frozen_layer(h, A, lay, mlp, _gelu, w.arch.activation)

    def g(Z: Any) -> Any:
        for A, lay in frozen:
            Z = _frozen_layer(Z, A, lay, mlp, _gelu, w.arch.activation)
        return Z

    with torch.no_grad():
        return g, g(X0)


def _frozen_layer(Z: Any, A: Any, lay: dict[str, Any], mlp: bool, gelu: Any, act: str) -> Any:
    import torch

    V = torch.einsum("nd,hdk->hnk", Z, lay["W_V"])
    Z = Z + ((A @ V) @ lay["W_O"]).sum(0)
    if mlp:
        Z = Z + gelu(Z @ lay["W_in"], act) @ lay["W_out"]  # no FFN biases: a bias alone is affine
    return Z


@producer("cor-mlp-role", kind="numeric", name="mlp-role", needs_model=True)
def check_mlp_role(ctx: Context) -> list[Evidence]:
    """Without an MLP, do attention + residual leave the span of the token embeddings? Are they linear at fixed A?"""
    import torch

    from symtrans.numeric.linalg import numerical_rank

    w = weights(ctx)
    n, L = min(ctx.n, MLP_SPAN_N), w.n_layers
    X0 = trace(ctx, n=n, layers=0).embeddings
    with torch.no_grad():
        h = X0
        for i in range(L):
            h = h + mha_paper(h, w.layer(i))
    r0, rj = numerical_rank(X0), numerical_rank(torch.cat([X0, h]))
    Q, _ = torch.linalg.qr(X0.T)  # orthonormal basis of rowspace(X0) (X0 has full row rank n < d)
    outside = float((h - (h @ Q) @ Q.T).norm() / h.norm())
    decided = decisive(r0, rj)
    new_dirs = rj.rank - r0.rank
    inputs = {"n": n, "layers": L, "form": "X <- X + MHA(X) with the paper's MHA (real weights, biases zero), "
              "no MLP, no LN", "X0": f"embedding output of {n} seeded random tokens"}
    details = {"rank_X0": r0.to_dict(), "rank_X0_and_XL": rj.to_dict(), "new_directions": new_dirs,
               "energy_outside_span": outside,
               "reading": "'non-linear feature generation (directions outside the linear span of the original "
                          "token embeddings)': the span is rowspace(X0)"}
    span_verdict = (Verdict.INCONCLUSIVE if not decided
                    else Verdict.FAILS if new_dirs > 0 else Verdict.SUPPORTED)
    span = record(ctx, "cor-mlp-role", "span-without-mlp", span_verdict,
                  (f"attention + residual alone (no MLP) leave the span of the token embeddings: rank "
                   f"[X0; X_L] = {rj.rank} > rank X0 = {r0.rank}, {outside:.1%} of X_L's energy outside; so "
                   "the MLP is not necessary for directions outside that span (W_V W_O maps out of it)")
                  if new_dirs > 0 else f"X_L stays in the span of the token embeddings ({outside:.2e} outside)",
                  margin=min(gap(r0), gap(rj)), margin_meaning="smallest spectral gap at the two rank cuts "
                  "(decades)", tolerance=GAP_TOLERANCE, inputs=inputs, details=details)
    # second reading: at frozen attention the no-MLP stack is linear in X; the MLP makes it non-linear
    gen = torch.Generator().manual_seed(ctx.seed + 5)
    Z1, Z2 = (torch.randn(X0.shape, generator=gen, dtype=X0.dtype) * X0.std() for _ in range(2))
    errs = {}
    for mlp in (False, True):
        g, _ = _frozen_stack(w, X0, L, mlp)
        with torch.no_grad():
            lhs, rhs = g(0.7 * Z1 - 1.3 * Z2), 0.7 * g(Z1) - 1.3 * g(Z2)
        errs[mlp] = float((lhs - rhs).norm() / lhs.norm())
    tol = LINEARITY_TOL.value
    linear_ok = errs[False] < tol < errs[True]
    lin = record(ctx, "cor-mlp-role", "linear-at-fixed-attention",
                 Verdict.SUPPORTED if linear_ok else Verdict.FAILS,
                 (f"with every A^h frozen, the {L}-layer attention + residual stack is linear in X (superposition "
                  f"error {errs[False]:.1e}) and becomes non-linear only with the MLP (error {errs[True]:.1e}): "
                  "at fixed attention the MLP is what adds non-linearity")
                 if linear_ok else f"superposition errors without / with MLP: {errs[False]:.1e} / {errs[True]:.1e}",
                 margin=math.log10(min(tol / max(errs[False], 1e-300), errs[True] / tol)),
                 margin_meaning="decades between the tolerance and the nearer of the two superposition errors",
                 tolerance=LINEARITY_TOL,
                 inputs=dict(inputs, test="g(0.7 Z1 - 1.3 Z2) vs 0.7 g(Z1) - 1.3 g(Z2), Z Gaussian, A^h frozen "
                             "along X0's trajectory; FFN without biases"),
                 details={"superposition_error_no_mlp": errs[False], "superposition_error_mlp": errs[True]})
    return [span, lin]
