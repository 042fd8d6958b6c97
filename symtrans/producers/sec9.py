"""Numeric checks for §9, the symmetry-breaking framework (framework-9; the formalisation is the toolkit's).

Two readings, each with a producer that can fail:

* ``framework-9/breaking`` -- each component the paper calls necessary
  enlarges G when removed: the stabiliser of the architecture without it
  (:mod:`symtrans.group.breaking`, measured on small random instances of the
  model's own architecture) has a larger dimension than G. A present
  component whose removal leaves the dimension unchanged, or lowers it, makes
  the reading fail, named, with the numbers.
* ``framework-9/orbits`` -- each of the four collapse phenomena is tied to a
  named object of G's action with a dimension comparison (:func:`orbit_rows`):
  depth collapse to Fix(S_n) on activations (each layer of the model must map
  it into itself), width collapse to the fixed points of S_n on attention
  matrices (the set must contain the rank-1 collapsed matrix), head-channel
  non-identifiability to an object whose dimension equals the paper's count
  n (H - 1) d_v, entropy collapse to the softmax-shift orbits (the fibre of
  the row softmax at the model's scores must be exactly the orbit). Where the
  tie fails the reading fails with the numbers.

Examples
--------
>>> from symtrans.context import Context
>>> row = orbit_rows(Context(model="default", n=6))[1]
>>> row["phenomenon"], row["fixed_point_dimension"], row["holds"]
('rank collapse in width', 1, True)
"""

from __future__ import annotations

import math
from typing import Any

from symtrans.producers.common import record, trace, weights
from symtrans.producers.templates import Summaries
from symtrans.context import Context
from symtrans.evidence import Evidence, HypothesisCheck, Scope, Tolerance, Verdict, decide_verdict, producer
from symtrans.precision import hypothesis_state

__all__ = ["breaking_verdict", "orbit_rows", "orbits_verdict", "fixed_attention_set", "check_breaking",
           "check_orbits"]

#: layer counts of the ablation measurements in a report (the command line measures 1 and 2 by default)
REPORT_LAYERS = (1,)
#: sequence length of the orbit checks (at most ctx.n)
ORBIT_N = 8


#: the describe step: each record's sentence per verdict and the clauses it repeats per row
SUMMARIES = Summaries({
    "ablation-stabilisers": {
        "absent": " (absent, not tested: {names})",
        "inconclusive-none": "no component of the reading is present in this architecture{absent}",
        "fails": "removal does not enlarge G for {components}{absent}",
        "inconclusive": "rank cut without a clear gap for {names}{absent}",
        "supported": "every present component enlarges G when removed: {components}{absent}",
        "component": "{name} ({numbers})",
        "measured": "L={L}: {measured_dimension} without it vs {baseline} with it ({change:+d}; breaks {breaks} "
                    "directions outside G, loses {lost_dimension})",
        "not-applicable": "not applicable: hypothesis violated: {name} ({detail})",
    },
    "collapse-objects": {
        "fails": "the tie fails for {phenomena}",
        "inconclusive": "undecided: {phenomena}",
        "supported": "each phenomenon is a named object of G's action: {phenomena}",
        "phenomenon": "{phenomenon}: {numbers}",
    },
})


def breaking_verdict(table: dict[str, Any]) -> tuple[Verdict, str, list[str]]:
    """The breaking reading's verdict from :func:`symtrans.group.breaking.breaking`'s table, and the failing components.

    Examples
    --------
    >>> row = {"component": "norm", "name": "LayerNorm/RMSNorm", "state": "present", "enlarges": False,
    ...        "clear": True, "measured": [{"L": 1, "measured_dimension": 30, "baseline": 42, "change": -12,
    ...        "breaks": 6, "lost_dimension": 18}]}
    >>> v, summary, failing = breaking_verdict({"arch": "x", "components": [row]})
    >>> v.value, failing
    ('fails', ['LayerNorm/RMSNorm'])
    """
    present = [r for r in table["components"] if r.get("state") == "present"]
    absent = [r["name"] for r in table["components"] if r.get("state") == "absent"]

    S, key = SUMMARIES, "ablation-stabilisers"

    def components(rows: list[dict[str, Any]]) -> str:
        return S.each(key, "component", [{"name": r["name"], "numbers": S.each(key, "measured", r["measured"])}
                                         for r in rows])

    failing = [r for r in present if r["clear"] and not r["enlarges"]]
    tail = S(key, "absent", names=", ".join(absent)) if absent else ""
    if not present:
        return Verdict.INCONCLUSIVE, S(key, "inconclusive-none", absent=tail), []
    if failing:
        return Verdict.FAILS, S(key, "fails", components=components(failing), absent=tail), [r["name"] for r in failing]
    unclear = [r["name"] for r in present if not r["clear"]]
    if unclear:
        return Verdict.INCONCLUSIVE, S(key, "inconclusive", names=", ".join(unclear), absent=tail), []
    return Verdict.SUPPORTED, S(key, "supported", components=components(present), absent=tail), []


@producer("framework-9/breaking", kind="numeric", name="ablation-stabilisers", needs_model=True, cost=30,
          whole_model="it reads the architecture, not the stored layers: the stabilisers of its ablations are "
                      "measured on fresh instances of one and two layers")
def check_breaking(ctx: Context) -> list[Evidence]:
    """Each necessary component, removed from the model's architecture, enlarges the measured stabiliser."""
    from symtrans.group.breaking import breaking

    w = weights(ctx)
    if float(w.arch.ln_eps) == 0.0:  # --eps 0: the group itself is not modelled there
        hyp = HypothesisCheck("norm epsilon > 0 (G modelled)", False, 0.0,
                              "with eps = 0 each residual segment between two norms has an exact scaling symmetry "
                              "that the factor catalogue does not list, so dim G has no value to compare with")
        return [record(ctx, "framework-9", "ablation-stabilisers", Verdict.NOT_APPLICABLE,
                       SUMMARIES("ablation-stabilisers", "not-applicable", name=hyp.name, detail=hyp.detail),
                       dtype="float64",
                       violated_hypothesis=hyp.name, hypothesis_checks=(hyp,),
                       scope=Scope("instances", "the model's architecture with the norms' eps = 0"))]
    t = breaking(w.arch, layers=REPORT_LAYERS, seed=ctx.seed)
    v, summary, failing = breaking_verdict(t)
    changes = [m["change"] for r in t["components"] if r.get("state") == "present" for m in r["measured"]]
    gaps = [m["record"]["gap_decades"] for r in t["components"] if r.get("state") == "present"
            for m in r["measured"]]
    rows = [{"component": r["name"], "state": r.get("state"), "enlarges": r.get("enlarges"),
             "measured": [{k: m[k] for k in ("L", "measured_dimension", "baseline", "change", "breaks",
                                            "lost_dimension", "consistent")} | {"gap_decades": m["record"]["gap_decades"]}
                          for m in r.get("measured", [])],
             "cells": {c["factor"]: c["cell"] for c in (r["measured"][-1]["cells"] if r.get("measured") else [])}}
            for r in t["components"]]
    return [record(ctx, "framework-9", "ablation-stabilisers", v, summary, dtype="float64",
                   margin=min(changes) if changes else None,
                   margin_meaning="smallest change of the measured stabiliser's dimension when a present component "
                                  "is removed (dimensions; positive: every one enlarges G)",
                   tolerance=Tolerance(10 ** -min(gaps) if gaps else 0.0,
                                       "rank cut at the widest gap of the Jacobian's singular values (float64), at "
                                       f"least 6 decades wide; the narrowest gap here is {min(gaps):.1f} decades"
                                       if gaps else "no measurement", "sigma_max"),
                   inputs={"arch": w.arch.name, "instances": t["plan"]["instances"], "scope": t["scope"],
                           "plan": t["plan"]["mode"]},
                   details={"components": rows, "failing": failing, "group_dimension": t["group_dimension"],
                            "baseline": t["baseline"]},
                   counterexample={"failing": failing} if failing else None,
                   scope=Scope("instances", "small random instances of the model's architecture (reduced sizes, "
                                            f"{', '.join(map(str, REPORT_LAYERS))} layer(s)), not the stored weights"))]


# ------------------------------------------------------------------ orbits
def fixed_attention_set(n: int, causal: bool) -> dict[str, Any]:
    """The n x n row-stochastic matrices fixed by every token permutation A -> P A P^T (under a causal mask if set).

    Solved as a linear system (float64): commutation with the generators
    of S_n (a transposition and an n-cycle), rows summing to 1, and zeros
    above the diagonal when ``causal``. Returns its dimension, whether it is
    consistent, and whether the uniform matrix (1/n) 1 1^T (rank 1, the
    collapsed attention) belongs to it.

    Examples
    --------
    >>> fixed_attention_set(5, False)["dimension"], fixed_attention_set(5, False)["contains_uniform"]
    (1, True)
    >>> r = fixed_attention_set(5, True)
    >>> r["dimension"], r["contains_uniform"], r["members_rank"]
    (0, False, 5)
    """
    import torch

    eye = torch.eye(n, dtype=torch.float64)
    swap = eye[[1, 0] + list(range(2, n))]
    cycle = eye[list(range(1, n)) + [0]]
    rows, rhs = [], []
    for P in (swap, cycle):  # vec(P A - A P) = (I (x) P - P^T (x) I) vec(A) (column-major vec)
        rows.append(torch.kron(eye, P) - torch.kron(P.T.contiguous(), eye))
        rhs.append(torch.zeros(n * n, dtype=torch.float64))
    rows.append(torch.kron(torch.ones(1, n, dtype=torch.float64), eye))  # row sums
    rhs.append(torch.ones(n, dtype=torch.float64))
    if causal:
        mask = torch.zeros(n * n, n * n, dtype=torch.float64)
        for j in range(n):
            for i in range(j):  # entry (i, j) above the diagonal; column-major index j n + i
                mask[j * n + i, j * n + i] = 1.0
        rows.append(mask)
        rhs.append(torch.zeros(n * n, dtype=torch.float64))
    M, b = torch.cat(rows), torch.cat(rhs)
    s = torch.linalg.svdvals(M)
    rank = int((s > s[0] * 1e-10).sum())
    sol = torch.linalg.lstsq(M, b[:, None]).solution[:, 0]
    consistent = float((M @ sol - b).abs().max()) < 1e-10
    U = torch.full((n * n,), 1.0 / n, dtype=torch.float64)
    contains = float((M @ U - b).abs().max()) < 1e-10
    member = sol.reshape(n, n).T
    return {"n": n, "causal": causal, "dimension": n * n - rank if consistent else None, "consistent": consistent,
            "contains_uniform": contains, "members_rank": int(torch.linalg.matrix_rank(member)) if consistent else None}


def orbit_rows(ctx: Context) -> list[dict[str, Any]]:
    """The four collapse phenomena, each with its named object of G's action, the numbers and whether the tie holds.

    Examples
    --------
    >>> [r["holds"] for r in orbit_rows(Context(model="default", n=6))][:3]  # the last: see the entropy row's numbers
    [True, True, False]
    """
    w = weights(ctx)
    n = min(ctx.n, ORBIT_N)
    causal = w.arch.attention == "causal"
    return [_depth_row(ctx, w, n), _width_row(n, causal), _head_row(ctx, w, n), _entropy_row(ctx, w, n, causal)]


def _depth_row(ctx: Context, w: Any, n: int) -> dict[str, Any]:
    """Depth: Fix(S_n) = {1 x^T} on activations, mapped into itself by every layer?"""
    import torch

    from symtrans.group.numeric import tolerance
    from symtrans.numeric.forward import encode

    L, d = int(w.n_layers), int(w.d_model)
    gen = torch.Generator().manual_seed(ctx.seed + 9)
    x = torch.randn(1, d, generator=gen, dtype=torch.float64).to(w.dtype)
    X = x.expand(n, d).clone().to(w.device)
    tr = encode(w, X=X)
    dev = max(float((lt.out - lt.out.mean(0, keepdim=True)).abs().max() / lt.out.abs().max()) for lt in tr.layers)
    tol, why = tolerance(w.dtype, d, L, 1.0)
    return {"phenomenon": "rank collapse in depth", "object": "fixed-point set Fix(S_n) = {1 x^T} on activations",
            "object_dimension": d, "ambient_dimension": n * d, "deviation": dev, "tolerance": tol,
            "tolerance_reason": why, "holds": dev <= tol,
            "numbers": f"dim Fix(S_n) = d_model = {d} in R^(n x d_model) = {n * d}; every one of the {L} layers "
                       f"maps 1 x^T to 1 y^T up to {dev:.1e} (tolerance {tol:.1e})"}


def _width_row(n: int, causal: bool) -> dict[str, Any]:
    """Width: the fixed points of S_n on attention matrices, and the collapsed (uniform) one among them."""
    fa = fixed_attention_set(n, causal)
    holds = bool(fa["consistent"] and fa["contains_uniform"])
    return {"phenomenon": "rank collapse in width", "object": "fixed points of A -> P A P^T among "
            + ("causal " if causal else "") + "row-stochastic matrices", "fixed_point_dimension": fa["dimension"],
            "holds": holds, "numbers": (f"the fixed set has dimension {fa['dimension']} (n = {n}) and "
                                        + ("contains the rank-1 uniform matrix (1/n) 1 1^T" if holds else
                                           f"does not contain a rank-1 member: under the causal mask its only "
                                           f"member has rank {fa['members_rank']} (the identity), so the "
                                           "collapsed attention is not a fixed point of S_n"))}


def _head_row(ctx: Context, w: Any, n: int) -> dict[str, Any]:
    """Head channels: the paper's count n(H-1)d_v against G's objects of the same layer."""
    from symtrans.group.orbits import fibre_ffn_input_numeric, fibre_wo_numeric
    from symtrans.group.spec import GroupSpec

    a = w.arch
    H, d_v = int(a.H), int(a.d_v)
    spec = GroupSpec.from_arch(a, strict=False)
    vo = int(spec.factor("vo-gauge").dimension.subs(a.substitutions()))
    count = n * (H - 1) * d_v
    wo = fibre_wo_numeric(w, 0, n)
    ffn = fibre_ffn_input_numeric(w, 0, n=min(n, 3), seed=ctx.seed, wo=wo)  # W_O's SVD once
    count_ffn = min(n, 3) * (H - 1) * d_v
    # decided on the objects the function determines (G's orbit, the FFN input's fibre); the fibre of Z -> Z W_O
    # reads W_O as stored (the centring shift moves its rank) and is shown, not decided on
    matches = [name for name, dim, c in (("the vo-gauge orbit on the layer's weights", vo, count),
                                         ("the fibre of Y -> N(X + sum_h Y^h W_O^h + b_O)", ffn["fibre"], count_ffn))
               if dim == c]
    return {"phenomenon": "head-channel non-identifiability", "object": "vo-gauge orbit (weights); fibres of "
            "Z -> Z W_O and of the FFN's input map (activations)", "count": count, "vo_orbit": vo,
            "wo_fibre": wo["fibre"], "ffn_input_fibre": ffn["fibre"], "ffn_n": min(n, 3), "holds": bool(matches),
            "matches": matches,
            "numbers": (f"the paper's count n(H-1)d_v = {count} at n = {n} is the fibre of the head sum, which "
                        f"lives on activations; G's vo-gauge acts on weights with H_kv d_v^2 = {vo} per layer; "
                        f"the fibre of Z -> Z W_O (W_O as stored, shown only) is n(H d_v - rank W_O) = "
                        f"{wo['fibre']}; the fibre of the FFN's input map is {ffn['fibre']} at n = {min(n, 3)} "
                        f"(count there {count_ffn}); "
                        + (f"matching: {', '.join(matches)}" if matches else "none matches"))}


def _softmax_kernels(A: Any, causal: bool) -> tuple[list[int], list[float]]:
    """Per score row and head, the dimension of the row softmax's fibre at A, and the rank decisions' margins."""
    import torch

    from symtrans.numeric.linalg import numerical_ranks, ones_complement

    H, n = int(A.shape[0]), int(A.shape[1])
    kernels, margins = [], []
    for i in range(n):
        keys = i + 1 if causal else n
        p = A[:, i, :keys]
        p = p / p.sum(-1, keepdim=True)  # rows of a float32 trace sum to 1 only to its rounding; the fibre is of exact rows
        if keys == 1:  # one key: the softmax is constant, its fibre is the line, the orbit itself
            kernels += [1] * H
            continue
        J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
        # J 1 = 0 exactly (the orbit's direction); the rest of the fibre is the kernel of J on the complement of 1
        Q = ones_complement(keys, J.dtype)
        for r in numerical_ranks(J @ Q):
            kernels.append(1 + (keys - 1 - r.rank))
            margins.append(r.margin)
    return kernels, margins


def _entropy_row(ctx: Context, w: Any, n: int, causal: bool) -> dict[str, Any]:
    """Entropy: the row softmax's fibre at the model's scores against the softmax-shift orbit (1 per row)."""
    import torch

    H = int(w.arch.H)
    A = trace(ctx, n=n, layers=1).layers[0].A.to(torch.float64)  # [H, n, n]: layer 0 only, one layer run
    kernels, margins = _softmax_kernels(A, causal)
    extra = sum(k - 1 for k in kernels)
    decided = hypothesis_state(min(margins) if margins else math.inf) is not None  # the one decisiveness band
    return {"phenomenon": "entropy collapse", "object": "orbits {S + c 1^T} of the softmax shift on score rows",
            "orbit_dimension": H * n, "fibre_dimension": sum(kernels), "holds": (extra == 0) if decided else None,
            "margin_decades": min(margins) if margins else math.inf,
            "numbers": (f"layer 0, {H} heads, n = {n}: the row softmax's fibre at the model's scores has "
                        f"dimension {sum(kernels)} = the orbits' {H * n} (one per row)" if extra == 0 else
                        f"layer 0: the row softmax's fibre has dimension {sum(kernels)} > the orbits' {H * n}: "
                        f"{extra} saturated direction(s) (probabilities below the rank cut) are not orbits of G")
            + ("" if decided else f" (undecided: a singular value within a decade of the rank cut, margin "
                                  f"{min(margins):.2f} decades)")}


def orbits_verdict(rows: list[dict[str, Any]]) -> tuple[Verdict, str]:
    """The orbits reading's verdict: supported when every phenomenon's tie holds, else fails naming each failure.

    Examples
    --------
    >>> orbits_verdict([{"phenomenon": "p", "holds": False, "numbers": "1 != 2"}])[0].value
    'fails'
    """
    bad = [r for r in rows if r["holds"] is False]
    open_ = [r for r in rows if r["holds"] is None]
    v = decide_verdict(bad, open_)
    shown = bad if bad else open_ if open_ else rows
    return v, SUMMARIES("collapse-objects", v.value,
                        phenomena=SUMMARIES.each("collapse-objects", "phenomenon", shown))


@producer("framework-9/orbits", kind="numeric", name="collapse-objects", needs_model=True, cost=2,
          whole_model="its depth row runs the whole forward: a fixed point of S_n must be mapped to one by every "
                      "layer, from the embeddings on")
def check_orbits(ctx: Context) -> list[Evidence]:
    """Each collapse phenomenon tied to a named object of G's action, with the dimension comparison."""
    rows = orbit_rows(ctx)
    v, summary = orbits_verdict(rows)
    depth, entropy = rows[0], rows[3]
    m = math.log10(depth["tolerance"] / depth["deviation"]) if depth["deviation"] > 0 else math.inf
    return [record(ctx, "framework-9", "collapse-objects", v, summary,
                   margin=min(m, entropy["margin_decades"]),
                   margin_meaning="decades: the depth tie's deviation below its tolerance, and the softmax Jacobians' "
                                  "singular values from their rank cut (the smaller)",
                   tolerance=Tolerance(depth["tolerance"], depth["tolerance_reason"], "max|layer output|"),
                   inputs={"n": min(ctx.n, ORBIT_N), "layers": int(weights(ctx).n_layers)},
                   details={"rows": rows},
                   counterexample={"failing": [r["phenomenon"] for r in rows if r["holds"] is False]}
                   if v is Verdict.FAILS else None,
                   scope=Scope("instances", f"the model's weights at n = {min(ctx.n, ORBIT_N)}: every layer (depth), "
                                            "layer 0 (head channels, entropy)"))]
