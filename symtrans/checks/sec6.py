"""Numeric checks for §6: head output subspaces, rank contraction, alignment, FFN FLOP share.

On the real model's forward trace at ``ctx.n`` (post-LN BERT; MHA(X) is the
real layer's ``sum_h Y^h W_O^h`` with its Q/K/V biases, without ``b_O``),
per layer and head:

* ``R_h`` = row space of ``Y^h W_O^h``; ``dim R_h`` against ``min(rank X, d_k)``
  (Proposition 6.3, hypotheses n > d_k and rank W_V^h = rank W_O^h = d_k);
* ``rank MHA(X)`` against ``dim(R_1 + ... + R_H)`` (Proposition 6.2);
* ``kappa = sum_h dim R_h - dim(sum_h R_h)`` and ``d_ff >= max kappa``
  (the toolkit's formalisation of the Rank Contraction Theorem);
* Spearman correlation between ``alpha_h`` and the alignment of ``R_h`` with
  the other heads' subspaces (claim-align), with a permutation test;
* the FFN share of a layer's FLOPs counted by ``FlopCounterMode`` (cor-dff).

Examples
--------
>>> from symtrans.evidence import Context
>>> s = layer_subspaces(Context(model="default", n=8), 0)
>>> s["rank_X"], s["dim_R"][:3], s["kappa"]
(8, [8, 8, 8], 0)
"""

from __future__ import annotations

import math
from typing import Any

from symtrans.checks.common import (DECISIVE_GAP, FAMILIES_NOTE, GAP_TOLERANCE, LAYERNORM_FAMILIES, gap, record,
                                    trace, weights)
from symtrans.evidence import Context, Evidence, Tolerance, Verdict, producer

__all__ = ["layer_subspaces", "spearman_test", "alignment_verdict", "count_flops",
           "count_flops_bert_layer", "count_matmul_flops", "meta_layer", "paper_share_range", "ALPHA_LEVEL"]


def layer_subspaces(ctx: Context, i: int, n: int | None = None) -> dict[str, Any]:
    """Subspace measurements of layer ``i`` on the context's trace (cached).

    Examples
    --------
    >>> from symtrans.evidence import Context
    >>> layer_subspaces(Context(model="default", n=6), 1)["rank_MHA"]
    6
    """
    from symtrans.numeric.linalg import numerical_rank, numerical_ranks
    from symtrans.numeric.measure import asymmetry, head_subspaces

    n = ctx.n if n is None else n
    key = ("sec6-layer", i, n)
    if key not in ctx.cache:
        w = weights(ctx)
        lt = trace(ctx, n=n, layers=None if n == ctx.n else i + 1).layers[i]
        lay = w.layer(i)
        rec = head_subspaces(lt, layer=i)
        rx = numerical_rank(lt.X)
        ctx.cache[key] = {
            "n": n, "records": rec.dim_R_records, "dim_R": rec.dim_R, "dim_sum": rec.dim_sum,
            "rank_MHA": rec.rank_mha.rank, "rank_MHA_record": rec.rank_mha, "kappa": rec.kappa,
            "alpha_MHA": rec.alpha_mha, "overlap": rec.overlap, "rank_X": rx.rank, "rank_X_record": rx,
            "rank_WV": [r.rank for r in numerical_ranks(lay["W_V"])],
            "rank_WO": [r.rank for r in numerical_ranks(lay["W_O"])],
            "alpha": asymmetry(lay).alpha[0]}
    return ctx.cache[key]


def _all_layers(ctx: Context) -> list[dict[str, Any]]:
    return [layer_subspaces(ctx, i) for i in range(weights(ctx).n_layers)]


def _inputs(ctx: Context, n: int, what: str) -> dict[str, Any]:
    return {"n": n, "tokens": f"{n} seeded random token ids (seed {ctx.seed})", "what": what,
            "form": "real post-LN layers; MHA(X) = sum_h Y^h W_O^h with Q/K/V biases, without b_O"}


@producer("prop-6.3", kind="numeric", name="head-subspace-dim", needs_model=True)
def check_prop_6_3(ctx: Context) -> list[Evidence]:
    """dim R_h = min(rank X, d_k) for every head and layer (hypotheses: n > d_k, full-rank W_V, W_O)."""
    w = weights(ctx)
    dk = w.d_head
    layers = _all_layers(ctx)
    n = layers[0]["n"]
    inputs = _inputs(ctx, n, "dim R_h = rank(Y^h W_O^h) per head against min(rank X, d_k)")
    rows = []
    for i, st in enumerate(layers):
        for h, rec in enumerate(st["records"]):
            rows.append({"layer": i, "head": h, "dim_R": rec.rank, "expected": min(st["rank_X"], dk),
                         "gap": gap(rec), "rank_WV": st["rank_WV"][h], "rank_WO": st["rank_WO"][h],
                         "alpha": st["alpha"][h]})
    if n <= dk:
        return [record(ctx, "prop-6.3", "head-subspace-dim", Verdict.NOT_APPLICABLE,
                       f"n = {n} <= d_k = {dk}: dim R_h is bounded by n, the proposition assumes n > d_k",
                       violated_hypothesis=f"n > d_k (n = {n}, d_k = {dk})", inputs=inputs,
                       details={"heads": rows})]
    lowrank = [r for r in rows if r["rank_WV"] < dk or r["rank_WO"] < dk]
    if len(lowrank) == len(rows):
        return [record(ctx, "prop-6.3", "head-subspace-dim", Verdict.NOT_APPLICABLE,
                       "no head has full-rank W_V and W_O", violated_hypothesis="rank W_V^h = rank W_O^h = d_k",
                       inputs=inputs, details={"heads": rows})]
    app = [r for r in rows if r not in lowrank]
    bad = [r for r in app if r["dim_R"] != r["expected"] and r["gap"] >= DECISIVE_GAP]
    unsure = [r for r in app if r["gap"] < DECISIVE_GAP]
    margin = min(r["gap"] for r in app)
    common = dict(margin=margin, margin_meaning="smallest spectral gap (decades) at the rank cut of Y^h W_O^h",
                  tolerance=GAP_TOLERANCE, inputs=inputs, details={"heads": rows, "excluded_low_rank_weights": len(lowrank)})
    if bad:
        r = bad[0]
        return [record(ctx, "prop-6.3", "head-subspace-dim", Verdict.FAILS,
                       f"fails on {len(bad)} of {len(app)} heads: layer {r['layer']} head {r['head']} has "
                       f"dim R_h = {r['dim_R']} but min(rank X, d_k) = {r['expected']} (n = {n} > d_k = {dk}, "
                       "W_V, W_O full rank)", counterexample=r, **common)]
    if unsure:
        return [record(ctx, "prop-6.3", "head-subspace-dim", Verdict.INCONCLUSIVE,
                       f"{len(unsure)} heads have a spectral gap below 1e3 at the cut", **common)]
    return [record(ctx, "prop-6.3", "head-subspace-dim", Verdict.SUPPORTED,
                   f"dim R_h = min(rank X, d_k) = {app[0]['expected']} for all {len(app)} heads "
                   f"({len(layers)} layers, n = {n} > d_k = {dk})", **common)]


def _prop_6_2_evidence(ctx: Context, layers: list[dict[str, Any]], name: str) -> Evidence:
    w = weights(ctx)
    n = layers[0]["n"]
    from symtrans.formulas import formula

    bound = int(formula("mha-rank-bound", arch=w.arch, n=n).value)
    rows = [{"layer": i, "rank_MHA": st["rank_MHA"], "dim_sum_R": st["dim_sum"].rank,
             "gap_MHA": gap(st["rank_MHA_record"]), "gap_sum": gap(st["dim_sum"]),
             "bound_min_n_Hdv_dmodel": bound} for i, st in enumerate(layers)]
    inputs = _inputs(ctx, n, "rank MHA(X) against dim(R_1 + ... + R_H), and the bound min(n, H d_v, d_model)")
    over = [r for r in rows if r["rank_MHA"] > bound]
    decided = [r for r in rows if min(r["gap_MHA"], r["gap_sum"]) >= DECISIVE_GAP]
    bad = [r for r in decided if r["rank_MHA"] != r["dim_sum_R"]]
    margin = min((min(r["gap_MHA"], r["gap_sum"]) for r in rows), default=None)
    common = dict(margin=margin, margin_meaning="smallest spectral gap (decades) at the rank cuts",
                  tolerance=GAP_TOLERANCE, inputs=inputs, details={"layers": rows, "bound_formula": "mha-rank-bound"})
    if over or bad:
        r = (over or bad)[0]
        why = (f"rank MHA(X) <= n = {n} while dim(sum R_h) reaches {r['dim_sum_R']}" if n < r["dim_sum_R"]
               else "the row space of the sum is a proper subspace of the sum of the row spaces")
        return record(ctx, "prop-6.2", name, Verdict.FAILS,
                      f"rank MHA(X) = dim(sum_h R_h) fails at {len(bad)} of {len(rows)} layers (n = {n}): layer "
                      f"{r['layer']} has rank MHA = {r['rank_MHA']}, dim(sum R_h) = {r['dim_sum_R']}; {why}. "
                      f"The bound rank MHA <= {bound} holds" + ("" if not over else " NOT everywhere"),
                      counterexample=dict(r, n=n, d_model=w.d_model, H=w.n_heads, d_k=w.d_head), **common)
    if len(decided) < len(rows):
        return record(ctx, "prop-6.2", name, Verdict.INCONCLUSIVE,
                      f"{len(rows) - len(decided)} layers have rank decisions with a gap below 1e3", **common)
    return record(ctx, "prop-6.2", name, Verdict.SUPPORTED,
                  f"rank MHA(X) = dim(sum_h R_h) at all {len(rows)} layers at n = {n} "
                  f"(values {sorted({r['rank_MHA'] for r in rows})}); bound {bound} holds", **common)


@producer("prop-6.2/identity", kind="numeric", name="mha-rank-vs-sum", needs_model=True)
def check_prop_6_2(ctx: Context) -> list[Evidence]:
    """rank MHA(X) = dim(sum_h R_h) at n = ctx.n (all layers) and at n > d_model (layer 0)."""
    w = weights(ctx)
    out = [_prop_6_2_evidence(ctx, _all_layers(ctx), f"mha-rank-vs-sum-n{ctx.n}")]
    big = min(w.d_model + 64, int(w.arch.max_positions))
    if ctx.n <= w.d_model < big:
        out.append(_prop_6_2_evidence(ctx, [layer_subspaces(ctx, 0, n=big)], f"mha-rank-vs-sum-n{big}"))
    return out


@producer("thm-rank-contraction", kind="numeric", name="contraction-kappa", needs_model=True)
def check_rank_contraction(ctx: Context) -> list[Evidence]:
    """kappa = sum_h dim R_h - dim(sum_h R_h) per layer against the formula, and d_ff >= max kappa."""
    from symtrans.formulas import formula

    w = weights(ctx)
    layers = _all_layers(ctx)
    n = layers[0]["n"]
    d_ff = int(w.W_in.shape[-1])
    rows = []
    for i, st in enumerate(layers):
        kappa = st["kappa"]
        f = formula("contracted-dim", arch=w.arch, n=n, rank_X=max(st["rank_X"], 1),
                    dim_sumR=max(st["dim_sum"].rank, 1))
        alpha_mha = st["alpha_MHA"]
        rows.append({"layer": i, "kappa": kappa, "kappa_formula": int(f.value), "sum_dim_R": sum(st["dim_R"]),
                     "dim_sum_R": st["dim_sum"].rank, "rank_MHA": st["rank_MHA"], "alpha_MHA": alpha_mha,
                     "gap_sum": gap(st["dim_sum"])})
    kmax = max(r["kappa"] for r in rows)
    mismatch = [r for r in rows if r["kappa"] != r["kappa_formula"]]
    unsure = [r for r in rows if r["gap_sum"] < DECISIVE_GAP]
    H_dv = w.n_heads * w.d_head
    inputs = _inputs(ctx, n, "kappa per layer from measured dim R_h and dim(sum R_h); formula contracted-dim "
                     "evaluated at the measured rank X and dim(sum R_h)")
    details = {"layers": rows, "d_ff": d_ff, "formalisation": "toolkit's (claims.md): kappa(X) = sum_h dim R_h - "
               "dim(sum_h R_h) and d_ff >= max kappa over layers and inputs; the paper's statement is not available",
               "vacuity": f"kappa <= sum_h dim R_h <= H d_v = {H_dv}, so any d_ff >= {H_dv} satisfies the bound"}
    common = dict(tolerance=GAP_TOLERANCE, inputs=inputs, details=details,
                  margin=min(r["gap_sum"] for r in rows),
                  margin_meaning="smallest spectral gap (decades) at the dim(sum R_h) cut")
    out = []
    if unsure:
        v, s = Verdict.INCONCLUSIVE, f"{len(unsure)} layers have dim(sum R_h) decided with a gap below 1e3"
    elif d_ff < kmax:
        v, s = Verdict.FAILS, f"d_ff = {d_ff} < max kappa = {kmax}: the FFN is narrower than the contracted dimension"
    else:
        v, s = Verdict.SUPPORTED, (f"d_ff = {d_ff} >= max kappa = {kmax} (kappa per layer "
                                   f"{[r['kappa'] for r in rows]} at n = {n}); the bound is vacuous for any "
                                   f"d_ff >= H d_v = {H_dv}, so it cannot justify d_ff = 4 d_model")
    out.append(record(ctx, "thm-rank-contraction", "contraction-dff-bound", v, s, **common))
    # the theorem's substance: specialised heads contract, i.e. kappa > 0 somewhere on real inputs
    if not unsure:
        occurs = kmax > 0
        out.append(record(
            ctx, "thm-rank-contraction", "contraction-occurs", Verdict.SUPPORTED if occurs else Verdict.FAILS,
            (f"the real heads contract: max kappa = {kmax} at n = {n}" if occurs else
             f"no contraction on the real heads: kappa = 0 at every layer (n = {n}); the {w.n_heads} head "
             f"subspaces of dimension {max(max(st['dim_R']) for st in layers)} are independent and span "
             f"dim(sum R_h) = {rows[0]['dim_sum_R']}, so head specialisation does not contract them here; "
             f"rank MHA(X) = {rows[0]['rank_MHA']} < {H_dv} comes from n, not from alignment"),
            **common))
    if mismatch:
        r = mismatch[0]
        out.append(record(ctx, "thm-rank-contraction", "contraction-kappa-formula", Verdict.FAILS,
                          f"measured kappa differs from contracted-dim at {len(mismatch)} layers: layer {r['layer']} "
                          f"kappa {r['kappa']} vs formula {r['kappa_formula']} (sum_h dim R_h = {r['sum_dim_R']} "
                          f"is not H min(rank X, d_v))", counterexample=r, **common))
    else:
        out.append(record(ctx, "thm-rank-contraction", "contraction-kappa-formula", Verdict.SUPPORTED,
                          f"measured kappa equals the formula contracted-dim at all {len(rows)} layers "
                          f"({[r['kappa'] for r in rows]})", **common))
    return out


ALPHA_LEVEL = 0.05


def spearman_test(x: Any, y: Any, groups: Any, permutations: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Spearman rho of x and y with a within-group permutation test and a bootstrap interval.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(24.0); g = np.repeat([0, 1], 12)
    >>> t = spearman_test(x, -x, g, permutations=200)
    >>> round(t["rho"], 6), t["p_negative"] < 0.01
    (-1.0, True)
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    x, y, groups = np.asarray(x, float), np.asarray(y, float), np.asarray(groups)

    def ranks(a: Any) -> Any:
        return np.argsort(np.argsort(a, axis=-1), axis=-1).astype(float)

    def corr(a: Any, b: Any) -> Any:
        a = a - a.mean(-1, keepdims=True)
        b = b - b.mean(-1, keepdims=True)
        return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))

    rx, ry = ranks(x), ranks(y)
    rho = float(corr(rx, ry))
    perm = np.tile(np.arange(len(x)), (permutations, 1))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        perm[:, idx] = idx[rng.permuted(np.tile(np.arange(len(idx)), (permutations, 1)), axis=1)]
    null = corr(ranks(x[perm]), ry[None, :])
    boot_idx = rng.integers(0, len(x), (1000, len(x)))
    boot = corr(ranks(x[boot_idx]), ranks(y[boot_idx]))
    boot = boot[np.isfinite(boot)]
    return {"rho": rho, "p_positive": float((1 + (null >= rho).sum()) / (permutations + 1)),
            "p_negative": float((1 + (null <= rho).sum()) / (permutations + 1)),
            "bootstrap_95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
            "permutations": permutations, "n_items": len(x)}


def alignment_verdict(test: dict[str, Any]) -> Verdict:
    """``supported`` if rho > 0 significantly, ``fails`` if rho < 0 significantly, else ``inconclusive``.

    Examples
    --------
    >>> alignment_verdict({"rho": 0.1, "p_positive": 0.3, "p_negative": 0.7}).label
    'inconclusive'
    """
    if test["rho"] > 0 and test["p_positive"] < ALPHA_LEVEL:
        return Verdict.SUPPORTED
    if test["rho"] < 0 and test["p_negative"] < ALPHA_LEVEL:
        return Verdict.FAILS
    return Verdict.INCONCLUSIVE


@producer("claim-align", kind="numeric", name="alpha-vs-alignment", needs_model=True)
def check_alignment(ctx: Context) -> list[Evidence]:
    """Directional heads (high alpha_h) have more aligned output subspaces: Spearman test over all heads."""
    import numpy as np

    layers = _all_layers(ctx)
    H = len(layers[0]["dim_R"])
    alpha, align, group = [], [], []
    for i, st in enumerate(layers):
        ov = st["overlap"]
        for h in range(H):
            alpha.append(st["alpha"][h])
            align.append(sum(ov[h][g] for g in range(H) if g != h) / (H - 1))
            group.append(i)
    test = spearman_test(alpha, align, group, seed=ctx.seed)
    v = alignment_verdict(test)
    p = test["p_positive"] if test["rho"] >= 0 else test["p_negative"]
    tol = Tolerance(ALPHA_LEVEL, "one-sided significance level of a within-layer permutation test "
                    "(alpha_h shuffled among the heads of each layer, 2000 permutations)", "p-value")
    n = layers[0]["n"]
    return [record(ctx, "claim-align", "alpha-vs-alignment", v,
                   f"Spearman rho(alpha_h, mean subspace overlap with the other heads) = {test['rho']:.3f} "
                   f"over {len(alpha)} heads, bootstrap 95% [{test['bootstrap_95'][0]:.2f}, "
                   f"{test['bootstrap_95'][1]:.2f}], one-sided permutation p = {p:.3g} "
                   f"({'significant' if p < ALPHA_LEVEL else 'not significant'} at {ALPHA_LEVEL})",
                   margin=math.log10(ALPHA_LEVEL / p), tolerance=tol,
                   margin_meaning="decades of the one-sided p-value below the 0.05 level (negative: above)",
                   inputs=_inputs(ctx, n, "alpha_h = ||M_a||_F/||M||_F, M = W_Q W_K^T; alignment of head h = mean over "
                                  "the other heads g of overlap(R_h, R_g), the mean squared cosine of their "
                                  "principal angles (symtrans.numeric.measure.head_subspaces)"),
                   details=dict(test, alpha=alpha, alignment=align, layer=group,
                                per_layer_rho=[float(np.corrcoef(np.argsort(np.argsort(alpha[i*H:(i+1)*H])),
                                                                 np.argsort(np.argsort(align[i*H:(i+1)*H])))[0, 1])
                                               for i in range(len(layers))]))]


# ----------------------------------------------------------------- cor-dff
def count_flops(layer: dict[str, Any], n: int, activation: str = "gelu") -> dict[str, int]:
    """FLOPs of the toolkit's attention and FFN for one layer at length n, by FlopCounterMode (meta tensors).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> c = count_flops(load_model("default").layer(0), 4)
    >>> c["ffn"] == 2 * 2 * 4 * 384 * 1536
    True
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from symtrans.numeric.forward import attention, ffn

    meta = {k: v.to("meta") for k, v in layer.items()}
    X = torch.empty(n, meta["W_Q"].shape[1], device="meta", dtype=meta["W_Q"].dtype)
    with FlopCounterMode(display=False) as fa:
        _, _, YO = attention(X, meta)
        YO.sum(0)
    with FlopCounterMode(display=False) as ff:
        ffn(X, meta, activation)  # two-matrix, or gated (three matrices) when the layer has W_gate
    return {"attention": int(fa.get_total_flops()), "ffn": int(ff.get_total_flops())}


def count_matmul_flops(layer: dict[str, Any], n: int, activation: str = "gelu") -> dict[str, int]:
    """FLOPs of the toolkit's attention and FFN for one layer at length n, counted cheaply (shapes only).

    Runs :func:`~symtrans.numeric.forward.attention` and the FFN on meta tensors
    under a ``TorchFunctionMode`` that counts every ``einsum`` and ``matmul``
    (2 FLOPs per multiply-add: ``2 * prod`` of the contraction's index sizes)
    and answers elementwise ops with an empty meta tensor of the broadcast
    shape. It counts what ``FlopCounterMode`` counts (tests compare the two),
    without its dispatch machinery, whose elementwise meta kernels import
    torch._dynamo (seconds) on first use.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> c = count_matmul_flops(load_model("default").layer(0), 4)
    >>> c["ffn"] == 2 * 2 * 4 * 384 * 1536
    True
    """
    import torch

    from symtrans.numeric.forward import _gelu, attention

    meta = {k: torch.empty(v.shape, device="meta", dtype=v.dtype) for k, v in layer.items()}
    X = torch.empty(n, meta["W_Q"].shape[1], device="meta", dtype=meta["W_Q"].dtype)
    with _MatmulCounter() as fa:
        _, _, YO = attention(X, meta)
        YO.sum(0)
    with _MatmulCounter() as ff:
        _gelu(X @ meta["W_in"] + meta["b_in"], activation) @ meta["W_out"] + meta["b_out"]
    return {"attention": fa.flops, "ffn": ff.flops}


def _matmul_counter_class() -> Any:
    import math as _math

    import torch
    from torch.overrides import TorchFunctionMode

    elementwise = {"add", "__add__", "__radd__", "sub", "__sub__", "__rsub__", "mul", "__mul__", "__rmul__",
                   "div", "__truediv__", "__rtruediv__", "gelu", "relu", "silu", "softmax", "sqrt", "tanh"}

    class _Counter(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.flops = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if name == "einsum":
                eq, ops = args[0], args[1:]
                if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
                    ops = ops[0]
                ins = eq.replace(" ", "").split("->")[0].split(",")
                sizes = {c: int(t.shape[i]) for spec, t in zip(ins, ops) for i, c in enumerate(spec)}
                if len(ops) == 2:
                    self.flops += 2 * _math.prod(sizes.values())
                return func(*args, **kwargs)
            if name in ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm"):
                a, b = (args[1], args[0]) if name == "__rmatmul__" else (args[0], args[1])
                batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
                self.flops += 2 * _math.prod(batch) * int(a.shape[-2]) * int(a.shape[-1]) * int(b.shape[-1])
                return func(*args, **kwargs)
            if name in elementwise and tensors and all(t.device.type == "meta" for t in tensors):
                shape = torch.broadcast_shapes(*(t.shape for t in tensors))
                return torch.empty(shape, device="meta", dtype=tensors[0].dtype)
            return func(*args, **kwargs)

    return _Counter


def _MatmulCounter() -> Any:  # noqa: N802 - a class built on first use (torch imported lazily)
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _matmul_counter_class()
    return _COUNTER()


_COUNTER: Any = None


def count_flops_bert_layer(arch_name: str, n: int) -> dict[str, int]:
    """FLOPs of transformers' BertLayer of a preset's sizes at length n (meta device, no weights).

    Examples
    --------
    >>> c = count_flops_bert_layer("bert-base", 128)
    >>> c["ffn"] // 128
    9437184
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    from symtrans.arch import get_arch

    a = get_arch(arch_name)
    cfg = BertConfig(hidden_size=int(a.d_model), num_attention_heads=int(a.H), intermediate_size=int(a.d_ff),
                     attn_implementation="eager")
    with torch.device("meta"):
        layer = BertLayer(cfg)
        x = torch.empty(1, n, int(a.d_model))
    with FlopCounterMode(display=False) as fc:
        layer(x)
    counts = fc.get_flop_counts()
    ffn = sum(counts.get("BertLayer.intermediate", {}).values()) + sum(counts.get("BertLayer.output", {}).values())
    att = sum(counts.get("BertLayer.attention", {}).values())
    return {"attention": int(att), "ffn": int(ffn), "total": int(fc.get_total_flops())}


def paper_share_range(arch_name: str = "bert-base", target: str = "0.648") -> list[int]:
    """The n at which the formula's FFN share rounds to ``target`` (exact rationals, n = 1..max_positions).

    The registry's expression is turned once into a ratio of integer
    polynomials in n (every other size substituted), evaluated exactly with
    :class:`~fractions.Fraction` at each n, and checked against the registry's
    own evaluation at the ends of the range and at both edges of every run.

    Examples
    --------
    >>> r = paper_share_range()
    >>> r[0], r[-1]
    (130, 136)
    """
    from fractions import Fraction

    from symtrans.arch import get_arch
    from symtrans.formulas import get_formula

    a = get_arch(arch_name)
    lo, hi = Fraction(target) - Fraction(5, 10 ** 4), Fraction(target) + Fraction(5, 10 ** 4)
    f = get_formula("ffn-flop-share")
    top = int(a.max_positions)

    def registry(n: int) -> Fraction:
        v = f.evaluate(a, n=n).value
        return Fraction(int(v.p), int(v.q))

    share = _share_in_n(f, a) or registry
    out = [n for n in range(1, top + 1) if lo <= share(n) < hi]
    probes = {1, top} | {m for n in out for m in (n - 1, n, n + 1) if 1 <= m <= top}
    for n in sorted(probes):  # the fast route must agree with the registry where it decides
        if share(n) != registry(n):
            from symtrans.errors import SymtransError

            raise SymtransError(f"ffn-flop-share at n = {n}: polynomial route {share(n)} != registry {registry(n)}")
    return out


def _share_in_n(f: Any, a: Any) -> Any:
    """``n -> Fraction``: the formula as a ratio of integer polynomials in n (None if it is not one)."""
    from fractions import Fraction

    import sympy as sp

    from symtrans.symbols import SYMBOLS

    n = SYMBOLS["n"]
    subs = {k: v for k, v in a.substitutions().items() if k != n}
    expr = sp.together(f.expression(a).subs(subs))
    if expr.free_symbols - {n}:
        return None
    num, den = sp.fraction(expr)
    try:
        pn, pd = sp.Poly(num, n), sp.Poly(den, n)
    except sp.PolynomialError:
        return None
    if not all(c.is_Integer for c in pn.all_coeffs() + pd.all_coeffs()):
        return None
    cn, cd = [int(c) for c in pn.all_coeffs()], [int(c) for c in pd.all_coeffs()]

    def horner(coeffs: list[int], x: int) -> int:
        acc = 0
        for c in coeffs:
            acc = acc * x + c
        return acc

    return lambda m: Fraction(horner(cn, m), horner(cd, m))


def meta_layer(arch_name: str) -> dict[str, Any]:
    """One layer's tensors of a preset's sizes on the meta device (shapes only, no memory), per-head layout.

    Examples
    --------
    >>> tuple(meta_layer("bert-base")["W_O"].shape), meta_layer("bert-base")["W_O"].device.type
    ((12, 64, 768), 'meta')
    """
    import torch

    from symtrans.arch import get_arch

    a = get_arch(arch_name)
    H, D, dk, dv, F = int(a.H), int(a.d_model), int(a.d_k), int(a.d_v), int(a.d_ff)
    shapes = {"W_Q": (H, D, dk), "W_K": (H, D, dk), "W_V": (H, D, dv), "W_O": (H, dv, D),
              "b_Q": (H, dk), "b_K": (H, dk), "b_V": (H, dv), "b_O": (D,), "W_in": (D, F), "b_in": (F,),
              "W_out": (F, D), "b_out": (D,)}
    return {k: torch.empty(v, device="meta", dtype=torch.float32) for k, v in shapes.items()}


@producer("cor-dff", kind="numeric", name="ffn-flop-share", needs_model=True, families=LAYERNORM_FAMILIES,
          applies_to=FAMILIES_NOTE["two-matrix-ffn"])
def check_cor_dff(ctx: Context) -> list[Evidence]:
    """FFN FLOP share counted on real forward passes against the formula; the n at which 64.8% holds."""
    from fractions import Fraction

    from symtrans.formulas import formula

    w = weights(ctx)
    n = ctx.n
    c = count_matmul_flops(w.layer(0, shared_kv=True), n, w.arch.activation)  # K, V as computed: H_kv heads
    measured = Fraction(c["ffn"], c["ffn"] + c["attention"])
    f = formula("ffn-flop-share", arch=w.arch, n=n).value
    expect = Fraction(int(f.p), int(f.q))
    # bert-base: the same counter on the toolkit's layer at bert-base sizes (meta tensors, torch only);
    # tests check it against transformers' BertLayer (count_flops_bert_layer), which costs seconds to import
    bb = {m: count_matmul_flops(meta_layer("bert-base"), m) for m in (128, 512)}
    bb_share = {m: Fraction(v["ffn"], v["ffn"] + v["attention"]) for m, v in bb.items()}
    bb_formula = {m: formula("ffn-flop-share", arch="bert-base", n=m).value for m in (128, 512)}
    agree = measured == expect and all(bb_share[m] == Fraction(int(bb_formula[m].p), int(bb_formula[m].q))
                                       for m in bb)
    tol = Tolerance(0.0, "FLOP counts are integers: measured and formula shares are compared as exact fractions",
                    "exact")
    inputs = {"n": n, "counter": "count_matmul_flops: einsum/matmul FLOPs of the forward on meta tensors, 2 per "
                                 "multiply-add (equal to torch's FlopCounterMode, see the tests)",
              "passes": {"model": "toolkit attention + FFN of layer 0 at n (meta tensors)",
                         "bert-base": "toolkit attention + FFN at bert-base sizes at n = 128 and 512 (meta "
                                      "tensors; equal to transformers' BertLayer count, see count_flops_bert_layer)"}}
    details = {"model_counts": c, "model_share": str(measured), "model_formula": str(expect),
               "bert_base_counts": bb, "bert_base_share": {m: str(s) for m, s in bb_share.items()},
               "bert_base_formula": {m: str(v) for m, v in bb_formula.items()}}
    out = [record(ctx, "cor-dff", "ffn-flop-share-count", Verdict.SUPPORTED if agree else Verdict.FAILS,
                  (f"counted FFN share {float(measured):.4f} at n = {n} on this model equals the formula "
                   f"ffn-flop-share exactly; bert-base (counted layer): {float(bb_share[128]):.4f} at n = 128, "
                   f"{float(bb_share[512]):.4f} at n = 512, equal to the formula") if agree else
                  f"counted FFN share {float(measured):.6f} differs from the formula {float(expect):.6f}",
                  margin=None, margin_meaning="exact comparison", tolerance=tol, inputs=inputs, details=details)]
    rng = paper_share_range()
    tol2 = Tolerance(0.0005, "the paper quotes 64.8% to one decimal: shares in [64.75%, 64.85%) round to it",
                     "share")
    out.append(record(ctx, "cor-dff", "ffn-flop-share-64.8", Verdict.SUPPORTED if rng else Verdict.FAILS,
                      (f"BertBase's FFN share is 64.8% only for n in {rng[0]}..{rng[-1]} (formula, exact); it "
                       f"falls to {float(bb_share[512]):.1%} at n = 512 and is {float(measured):.1%} for this model "
                       f"at n = {n}: the paper's figure holds only at n near 130") if rng else
                      "no n in 1..512 gives BertBase an FFN share of 64.8%",
                      tolerance=tol2, inputs={"arch": "bert-base", "n_range_searched": [1, 512]},
                      details={"n_range": rng}, model=None, weights_hash=None))
    return out
