"""Orbits of G's continuous factors, fibres of named maps, and the collapse pairing.

*Orbit dimension* at a weight point = group dimension - stabiliser dimension.
Per key/value head ``g`` (heads ``h`` of its group), the stabiliser algebra of
(qk-gauge x key-bias-shift) is ``{(A, u): [W_Q^h; b_Q^h] A = 0 for all h,
W_K^g A^T = 0, u = b_K^g A^T}``, of dimension ``(d_k - r_Q)(d_k - r_K)`` with
``r_Q = rank [W_Q^h; b_Q^h]_h`` and ``r_K = rank W_K^g``; that of
(vo-gauge x value-bias-shift) is ``{(B, v): W_V^g B = 0, B W_O^h = 0 for all h,
v = -b_V^g B}``, of dimension ``(d_v - r_V)(d_v - r_O)``. Generically every rank
is full and the orbit has the full dimension of these factors (the norm
factors act on other tensors; their dimension is measured on a whole scope by
:mod:`symtrans.group.complete`). Numerically the orbit dimension is the
rank of the infinitesimal action (the Jacobian of ``g -> g . w`` at the
identity), assembled per key/value head from QR factors of the blocks (same
singular values as the full Jacobian's rows it replaces), decided by
:func:`symtrans.numeric.linalg.numerical_rank` in float64.

*Fibres* (dimension of the preimage of a point): the head sum
``(Y^1..Y^H) -> sum_h Y^h``; ``Z -> Z W_O``; and
``F(Y) = LN(X + sum_h Y^h W_O^h + b_O)``, what the FFN receives.

Examples
--------
>>> orbit_dimension_formula("bert-base")["generic_value"]
99840
>>> fibre_formula("sum", "bert-base", n=512)["value"]
360448
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError
from symtrans.group.elements import rotary_planes
from symtrans.group.spec import GroupSpec
from symtrans.precision import EPS64
from symtrans.symbols import SYMBOLS

__all__ = ["orbit_dimension_formula", "OrbitRecord", "orbit_dimension_numeric", "fibre_formula",
           "fibre_sum_numeric", "fibre_wo_numeric", "fibre_ffn_input_numeric", "PAIRING", "pairing_table"]

S = SYMBOLS
r_Q, r_K, r_V, r_O = sp.symbols("r_Q r_K r_V r_O", integer=True, nonnegative=True)
z_QK = sp.Symbol("z_QK", integer=True, nonnegative=True)


def orbit_dimension_formula(arch: Architecture | str) -> dict[str, Any]:
    """Orbit dimension of one layer under the attention gauges and bias shifts: group dim - stabiliser dim.

    ``r_Q, r_K, r_V, r_O`` are the per-head ranks named in the module docstring
    (the formula sums the stabiliser over key/value heads, shown for equal ranks).
    Under rotary positions the qk-gauge is the commutant of the rotations (one
    complex scalar ``a I + b J`` per rotary plane, invertible unless zero), so
    its stabiliser at a key/value head is ``z_QK``: twice the number of planes
    on which every query block of the group and the key block (biases
    included) vanish; generically 0. Where b_V exists but no b_O absorbs a
    value-bias shift (Qwen2), ``r_V`` is the rank of ``[W_V; b_V]``.

    Examples
    --------
    >>> f = orbit_dimension_formula("bert-base")
    >>> f["expression"]
    H*d_k**2 + H*d_k + H*d_v**2 + H*d_v - H*(d_k - r_K)*(d_k - r_Q) - H*(d_v - r_O)*(d_v - r_V)
    >>> f["generic_value"]
    99840
    >>> orbit_dimension_formula("qwen2-7b")["expression"]
    H_kv*d_k + H_kv*d_v**2 - H_kv*z_QK - H_kv*(d_v - r_O)*(d_v - r_V) + d_ff
    """
    spec = GroupSpec.from_arch(arch, strict=False)
    a = spec.arch
    _refuse_partial_rotary(a, "the orbit dimension formula")
    kv = S["H"] if a.H_kv == a.H else S["H_kv"]
    # the paper's continuous per-layer factors (Factor.paper): the attention gauges and bias shifts (and FFN
    # scalings where unbroken); the norm factors act on other tensors and are measured by symtrans.group.complete
    group = sp.Add(*[spec.factor(n).effective_dimension for n in spec.names("continuous", "layer", paper=True)])
    if a.positional == "rotary":
        stab_qk = kv * z_QK
    else:
        stab_qk = kv * (S["d_k"] - r_Q) * (S["d_k"] - r_K)
    stab = stab_qk + kv * (S["d_v"] - r_V) * (S["d_v"] - r_O)
    generic = {r_Q: S["d_k"], r_K: S["d_k"], r_V: S["d_v"], r_O: S["d_v"], z_QK: 0}
    expr = group - stab
    return {"expression": expr, "group_dimension": group, "stabiliser": stab,
            "generic_value": expr.subs(generic).subs(a.substitutions()),
            "generic_ranks": "r_Q = r_K = d_k, r_V = r_O = d_v (full-rank blocks)"
                             + ("; z_QK = 0 (no rotary plane dead in both Q and K)" if a.positional == "rotary" else "")}


@dataclass(frozen=True)
class OrbitRecord:
    """Orbit dimension of one layer: Jacobian rank vs the formula at the measured block ranks.

    Examples
    --------
    >>> OrbitRecord(0, 10, 10, 10, 2.5, {}).agrees
    True
    """

    layer: int
    jacobian_rank: int
    formula_at_measured_ranks: int
    symbolic_generic: int
    min_margin: float  # decades between the rank cut and the nearest singular value (worst head)
    details: dict[str, Any]

    @property
    def agrees(self) -> bool:
        """Jacobian rank equals the formula at the measured ranks and the generic symbolic value."""
        return self.jacobian_rank == self.formula_at_measured_ranks == self.symbolic_generic


def _qk_jacobian(WQs: list[Any], bQs: list[Any] | None, WK: Any, bK: Any | None) -> Any:
    """Reduced Jacobian of (A, u) -> (W_Q A, b_Q A, -W_K A^T, -b_K A^T + u) for one key/value head."""
    import torch

    k = WK.shape[1]
    I = torch.eye(k, dtype=torch.float64)
    tall = torch.cat([torch.cat([W, b]) if bQs is not None else W for W, b in zip(WQs, bQs or WQs)])
    RQ = torch.linalg.qr(tall, mode="r").R.contiguous()
    RK = torch.linalg.qr(WK, mode="r").R.contiguous()
    blocks = [torch.kron(RQ, I), -torch.einsum("ib,ja->ijab", RK, I).reshape(k * k, k * k)]
    if bK is None:
        return torch.cat(blocks)
    J = torch.cat(blocks + [-torch.einsum("b,ja->jab", bK.reshape(-1), I).reshape(k, k * k)])
    u_cols = torch.zeros(J.shape[0], k, dtype=torch.float64)
    u_cols[-k:] = I
    return torch.cat([J, u_cols], dim=1)


def _vo_jacobian(WV: Any, bV: Any | None, WOs: list[Any]) -> Any:
    """Reduced Jacobian of (B, v) -> (W_V B, b_V B + v, -B W_O^h) for one key/value head (b_O rows left out)."""
    import torch

    k = WV.shape[1]
    I = torch.eye(k, dtype=torch.float64)
    RV = torch.linalg.qr(WV, mode="r").R.contiguous()
    RO = torch.linalg.qr(torch.cat(WOs, dim=1).T, mode="r").R.contiguous()
    blocks = [torch.kron(RV, I), -torch.kron(I, RO)]
    if bV is None:
        return torch.cat(blocks)
    J = torch.cat(blocks + [torch.einsum("l,ja->jla", bV.reshape(-1), I).reshape(k, k * k)])
    v_cols = torch.zeros(J.shape[0], k, dtype=torch.float64)
    v_cols[-k:] = I
    return torch.cat([J, v_cols], dim=1)


def _refuse_partial_rotary(a: Architecture, what: str) -> None:
    """Partial rotary positions (GPT-NeoX) are not modelled by the orbit computations: refused, naming it."""
    if a.partial_rotary_factor != 1:
        raise SymtransError(f"{a.name}: {what} does not model partial rotary positions (partial_rotary_factor = "
                            f"{a.partial_rotary_factor:g}: a rotated and a position-free part in each head)")


def _rotary_qk_jacobian(tall_Q: Any, tall_K: Any, planes: list[tuple[int, int]]) -> Any:
    """Jacobian of the commutant qk-gauge at the identity: a I + b J per plane -> (Q E, -K E^T), one column each."""
    import torch

    k = tall_Q.shape[1]
    cols = []
    for i, j in planes:
        for rot in (False, True):
            E = torch.zeros(k, k, dtype=torch.float64)
            if rot:
                E[i, j], E[j, i] = 1.0, -1.0
            else:
                E[i, i], E[j, j] = 1.0, 1.0
            cols.append(torch.cat([(tall_Q @ E).reshape(-1), -(tall_K @ E.T).reshape(-1)]))
    return torch.stack(cols, dim=1)


def _kron_sum_singular_values(left: Any, right: Any, k: int, extra: int) -> Any:
    """Singular values of [kron(R_1, I); kron(I, R_2)] (up to the transpose permutation) plus ``extra`` ones.

    Its Gram matrix is kron(G_1, I) + kron(I, G_2), a Kronecker sum, so the
    singular values are sqrt(sigma_i(R_1)^2 + sigma_j(R_2)^2) over all pairs;
    the translation columns, after the unipotent change of coordinates
    u -> u - b A^T (or v -> v + b B), contribute ``extra`` singular values 1.
    """
    import torch

    def sv(M: Any) -> Any:
        s = torch.linalg.svdvals(M)
        return torch.cat([s, torch.zeros(k - s.numel(), dtype=s.dtype)]) if s.numel() < k else s

    a, b = sv(left), sv(right)
    vals = torch.sqrt(a[:, None] ** 2 + b[None, :] ** 2).reshape(-1)
    vals = torch.cat([vals, torch.ones(extra, dtype=vals.dtype)])
    return torch.sort(vals, descending=True).values


def orbit_dimension_numeric(blocks: dict[str, Any], arch: Architecture, layer: int = 0, *,
                            dense: bool = False, rotary_pairs: str = "adjacent") -> OrbitRecord:
    """Orbit dimension of one layer's weights (block form, torch): Jacobian rank and formula at measured ranks.

    Per key/value head the Jacobian of the action splits into a (Q, K) and a
    (V, O) part acting on disjoint weights. ``dense=True`` builds each part
    (QR-reduced) and takes :func:`numerical_rank`; the default uses the exact
    structure (a Kronecker sum, see :func:`_kron_sum_singular_values`) to get
    the same singular values from two small SVDs, then decides the rank with
    the same cut. The value-bias-shift rows of ``b_O`` are shared by all heads
    and left out: the per-head parts then sit in disjoint rows, so full column
    rank of each gives full column rank of the whole (exact, as it meets the
    column count). ``blocks`` holds the key/value heads as stored (``H_kv``
    of them with grouped-query attention: ``layer(i, shared_kv=True)``).
    Under rotary positions the (Q, K) part is the commutant's Jacobian, one
    column per plane coordinate, dense; ``rotary_pairs`` names the planes
    (``halves`` for ``transformers`` checkpoints, see :func:`sample_element`).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> from symtrans.group.numeric import layer_blocks
    >>> w = load_model("default")
    >>> rec = orbit_dimension_numeric(layer_blocks(w.layer(0)), w.arch)
    >>> rec.jacobian_rank, rec.agrees
    (25344, True)
    """
    import torch

    from symtrans.numeric.linalg import numerical_rank, rank_from_singular_values

    spec = GroupSpec.from_arch(arch, strict=False)
    a = spec.arch
    _refuse_partial_rotary(a, "the numeric orbit dimension")
    f = orbit_dimension_formula(a)
    H, kv = int(a.H), int(a.H_kv)
    d_k, d_v = int(a.d_k), int(a.d_v)
    group = H // kv
    dbl = {k: ([x.to(torch.float64) for x in v] if isinstance(v, list) else v.to(torch.float64))
           for k, v in blocks.items()}
    bQ, bK, bV = dbl.get("b_Q"), dbl.get("b_K"), dbl.get("b_V")
    if len(dbl["W_K"]) != kv:
        raise SymtransError(f"orbit dimension: give the {kv} key/value heads as stored "
                            f"(layer(i, shared_kv=True)), got {len(dbl['W_K'])}")
    rotary = a.positional == "rotary"

    def unbroken(name: str) -> bool:
        return name in spec.names() and spec.factor(name).status != "broken"

    # a bias shift absorbs its bias's rows; without it the bias is one more row the gauge must fix
    kshift, vshift = unbroken("key-bias-shift"), unbroken("value-bias-shift")
    extra_k, extra_v = (d_k if kshift else 0), (d_v if vshift else 0)
    planes = list(zip(*(t.tolist() for t in rotary_planes(d_k, rotary_pairs)))) if rotary else []
    total, measured, margins = 0, 0, []
    ranks: dict[str, list[int]] = {"r_Q": [], "r_K": [], "r_V": [], "r_O": [], "z_QK": []}
    for g in range(kv):
        hs = list(range(g * group, (g + 1) * group))
        tall_Q = torch.cat([torch.cat([dbl["W_Q"][h], bQ[h]]) if bQ else dbl["W_Q"][h] for h in hs])
        tall_K = torch.cat([dbl["W_K"][g], bK[g]]) if bK and not kshift else dbl["W_K"][g]
        tall_V = torch.cat([dbl["W_V"][g], bV[g]]) if bV and not vshift else dbl["W_V"][g]
        wide_O = torch.cat([dbl["W_O"][h] for h in hs], dim=1)
        if dense:
            Jvo = _vo_jacobian(tall_V, bV[g] if bV and vshift else None, [dbl["W_O"][h] for h in hs])
            rec_vo = numerical_rank(Jvo)
        else:
            rec_vo = rank_from_singular_values(_kron_sum_singular_values(tall_V, wide_O.T, d_v, extra_v),
                                               (2 * d_v * d_v + extra_v, d_v * d_v + extra_v), torch.float64)
        if rotary:
            rec_qk = numerical_rank(_rotary_qk_jacobian(tall_Q, tall_K, planes))
        elif dense:
            rec_qk = numerical_rank(_qk_jacobian([dbl["W_Q"][h] for h in hs], [bQ[h] for h in hs] if bQ else None,
                                                 tall_K, bK[g] if bK and kshift else None))
        else:
            rec_qk = rank_from_singular_values(_kron_sum_singular_values(tall_Q, tall_K, d_k, extra_k),
                                               (2 * d_k * d_k + extra_k, d_k * d_k + extra_k), torch.float64)
        for rec in (rec_qk, rec_vo):
            total += rec.rank
            margins.append(rec.margin)
        rq, rk = numerical_rank(tall_Q).rank, numerical_rank(tall_K).rank
        rv, ro = numerical_rank(tall_V).rank, numerical_rank(wide_O).rank
        z = 2 * sum(1 for i, j in planes
                    if numerical_rank(torch.cat([tall_Q[:, [i, j]], tall_K[:, [i, j]]])).rank == 0)
        for name, r in zip(ranks, (rq, rk, rv, ro, z)):
            ranks[name].append(r)
        qk = d_k - z if rotary else d_k * d_k + extra_k - (d_k - rq) * (d_k - rk)
        measured += qk + d_v * d_v + extra_v - (d_v - rv) * (d_v - ro)
    scaling = spec.factor("ffn-scaling")
    if scaling.status != "broken":  # per-unit scalings touch disjoint (W_in column, W_out row) pairs
        units = int(((dbl["W_in"].norm(dim=0) + dbl["W_out"].norm(dim=1)) > 0).sum())
        total += units
        measured += units
    return OrbitRecord(layer=layer, jacobian_rank=total, formula_at_measured_ranks=measured,
                       symbolic_generic=int(f["generic_value"]), min_margin=min(margins),
                       details={"ranks": {k: sorted(set(v)) for k, v in ranks.items()},
                                "method": "dense QR-reduced Jacobian" if dense else
                                "Kronecker-sum singular values of the per-head Jacobian",
                                "dtype": "float64"})


# --------------------------------------------------------------------------- fibres
_MAPS = {
    "sum": ("(Y^1, ..., Y^H) -> sum_h Y^h on (R^{n x d_v})^H", lambda s: s["n"] * (s["H"] - 1) * s["d_v"]),
    "wo": ("Z -> Z W_O, Z in R^{n x H d_v} (concatenated head outputs)",
           lambda s: s["n"] * (s["H"] * s["d_v"] - S["rank_WO"])),
    "ffn-input": ("Y -> N(X + sum_h Y^h W_O^h + b_O), what the FFN receives (X fixed; N = LN1 post-LN, LN2 pre-LN)",
                  lambda s: s["n"] * (s["H"] * s["d_v"] - S["rank_WO"]) + s["n"] * sp.Symbol("c_LN")),
}


def fibre_formula(name: str, arch: Architecture | str = "symbolic", **sizes: int) -> dict[str, Any]:
    """Fibre dimension of a named map, symbolically (and its value for ``arch``'s sizes).

    For ``ffn-input``: per row, LayerNorm's Jacobian kills the direction ``1``
    exactly and, when eps = 0, also the row itself (scale invariance); so
    ``c_LN = 1`` for eps > 0 and ``2`` for eps = 0, given ``W_O`` of full rank
    d_model (its image then meets both directions). RMSNorm does not centre:
    ``c_LN = 0`` for eps > 0 and ``1`` for eps = 0.

    Examples
    --------
    >>> fibre_formula("wo", "bert-base", n=512)["value"]
    0
    >>> fibre_formula("ffn-input", "bert-base", n=4)["value"]
    4
    >>> fibre_formula("ffn-input", "llama2-7b", n=4)["value"]
    0
    """
    if name not in _MAPS:
        from symtrans.errors import suggest

        raise SymtransError(suggest(name, _MAPS, "map"))
    a = get_arch(arch, **sizes)
    what, build = _MAPS[name]
    expr = build(S)
    subs: dict[Any, Any] = dict(a.substitutions())
    if isinstance(a.H, int) and isinstance(a.d_v, int) and isinstance(a.d_model, int):
        subs[S["rank_WO"]] = min(a.H * a.d_v, a.d_model)
    subs[sp.Symbol("c_LN")] = (1 if a.norm == "layernorm" else 0) + (1 if a.ln_eps == 0 else 0)
    value = expr.subs(subs)
    return {"map": what, "expression": expr, "value": int(value) if value.is_Integer else None,
            "assumes": "rank W_O = min(H d_v, d_model) (generic); c_LN = 1 for eps > 0, 2 for eps = 0 "
                       "(LayerNorm), 0 and 1 (RMSNorm)"}


def fibre_sum_numeric(n: int, H: int, d_v: int) -> dict[str, Any]:
    """Fibre of the head sum from the rank of its matrix ``[I I ... I]`` (float64).

    Examples
    --------
    >>> fibre_sum_numeric(3, 4, 2)["fibre"]
    18
    """
    import torch

    from symtrans.numeric.linalg import numerical_rank

    M = torch.cat([torch.eye(n * d_v, dtype=torch.float64)] * H, dim=1)
    rec = numerical_rank(M)
    return {"fibre": H * n * d_v - rec.rank, "rank": rec.to_dict(), "domain": H * n * d_v}


def fibre_wo_numeric(weights: Any, layer: int, n: int) -> dict[str, Any]:
    """Fibre of ``Z -> Z W_O`` at a real layer: ``n (H d_v - rank W_O)``, with the rank record and condition number.

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> r = fibre_wo_numeric(load_model("default"), 0, 4)
    >>> r["fibre"], r["rank"]["rank"]
    (0, 384)
    """
    import torch

    from symtrans.numeric.linalg import rank_from_singular_values, svdvals

    W = weights.W_O[layer].to(torch.float64)
    stacked = W.reshape(-1, W.shape[-1])
    s = svdvals(stacked)  # one SVD for the rank and the condition number
    rec = rank_from_singular_values(s, tuple(stacked.shape), stacked.dtype)
    cond = float(s[0] / s[-1]) if float(s[-1]) > 0 else float("inf")
    return {"fibre": n * (stacked.shape[0] - rec.rank), "rank": rec.to_dict(), "condition_number": cond}


def fibre_ffn_input_numeric(weights: Any, layer: int, n: int = 4, seed: int = 0,
                            wo: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fibre of ``Y -> N(X + sum_h Y^h W_O^h + b_O)`` at the real per-head outputs: domain - Jacobian rank.

    ``N`` is the norm the FFN reads through: LN1 after the attention sum
    (post-LN), LN2 of the residual stream (pre-LN), LayerNorm or RMSNorm.

    The map acts row by row (token i's output depends only on token i's head
    outputs), so its Jacobian is block-diagonal: one d_model x H d_v block per
    token, each from autograd; the singular values of the whole are the union.
    Two cuts are reported: float64's conventional cut (``max(m, n) eps``), at
    which LN's eps-scaled radial directions already look flat, and ``10 eps``,
    which separates them from the exact kernel (rounding level). ``wo``: :func:`fibre_wo_numeric`'s record of
    the same layer of the same (float64) weights where the caller has it (its rank does not depend on ``n``;
    otherwise it is computed here).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> r = fibre_ffn_input_numeric(load_model("default"), 0, n=3)
    >>> r["fibre"], r["expected"], r["numerically_flat_fibre"], r["expected_flat"]
    (3, 3, 6, 6)
    """
    import torch

    from symtrans.numeric.forward import encode, norm, structure
    from symtrans.numeric.linalg import rank_from_singular_values, svdvals

    from symtrans.precision import dtype_name

    # float64 already (a streamed checkpoint read at float64 has no .to: it is used as it is, one layer read)
    w = weights if dtype_name(weights.dtype) == "float64" else weights.to(dtype="float64")
    t = encode(w, n=n, seed=seed, layers=layer + 1).layers[layer]
    L = w.layer(layer)
    st = structure(w)
    eps = w.arch.ln_eps
    which = "ln1" if w.arch.norm_placement == "post" else "ln2"
    gain, shift = L.get(f"{which}_w"), (L.get(f"{which}_b") if w.arch.norm == "layernorm" else None)
    b_O = L["b_O"] if L.get("b_O") is not None else 0.0
    W = L["W_O"].reshape(-1, w.d_model)  # stacked H d_v x d_model
    Y = t.Y.permute(1, 0, 2).reshape(n, -1)  # row i = (Y^1_i, ..., Y^H_i)
    svals = []
    for i in range(n):
        def row(y: Any, i: int = i) -> Any:
            z = y @ W + b_O
            if st.post_norms:  # Gemma 3: the attention output passes its post-norm before the residual add
                z = norm(z[None], L["ln1_post_w"], None, st)[0]
            return norm((t.X[i] + z)[None], gain, shift, st)[0]
        svals.append(svdvals(torch.autograd.functional.jacobian(row, Y[i].clone(), vectorize=True)))
    s = torch.sort(torch.cat(svals), descending=True).values
    shape = (n * w.d_model, Y.numel())
    domain = shape[1]
    conventional = rank_from_singular_values(s, shape, torch.float64)
    u = EPS64
    separating = rank_from_singular_values(s, shape, torch.float64, rtol=10 * u, reason=(
        "relative cut 10 eps(float64): the exact kernel (LN's direction 1) sits at rounding level ~eps sigma_max; "
        "the row directions that LN scales by ~eps_LN/var sit above it"))
    z = t.pre_ln1
    var = ((z - z.mean(-1, keepdim=True)) ** 2).mean(-1) if w.arch.norm == "layernorm" else (z ** 2).mean(-1)
    if wo is None:
        wo = fibre_wo_numeric(w, layer, n)
    return {"fibre": domain - separating.rank, "expected": fibre_formula("ffn-input", w.arch, n=n)["value"],
            "rank": separating.to_dict(),
            "numerically_flat_fibre": domain - conventional.rank,
            "expected_flat": fibre_formula("ffn-input", dataclasses.replace(w.arch, ln_eps=0.0), n=n)["value"],
            "rank_default_cut": conventional.to_dict(), "domain": domain,
            "eps_over_var": [float(eps / v) for v in var],
            "smallest_singular_values": [float(x) for x in s[-2 * n - 2:]], "wo_rank": wo["rank"]["rank"],
            "note": ("per row, LN flattens the direction 1 exactly and scales the row's own direction by "
                     "~eps/var: at float64's conventional cut that direction looks flat too, so the fibre is "
                     "n(H d_v - rank W_O) + n exactly (eps > 0) and n(H d_v - rank W_O) + 2n numerically"
                     if w.arch.norm == "layernorm" else
                     "per row, RMSNorm flattens nothing exactly (no centring) and scales the row's own direction "
                     "by ~eps/mean square: the fibre is n(H d_v - rank W_O) exactly (eps > 0), plus n where that "
                     "direction falls below float64's conventional cut")}


# --------------------------------------------------------------------------- pairing
PAIRING: list[dict[str, str]] = [
    {"phenomenon": "rank collapse in depth",
     "object": "fixed-point set",
     "precise_object": "Fix(S_n) = {1 x^T : x in R^{d_model}} in R^{n x d_model} (all tokens equal), "
                       "the fixed points of the data-side token permutations",
     "why": "a row-stochastic A maps 1 x^T to itself and every other step acts row by row, so each layer maps "
            "Fix(S_n) into itself; Dong et al.'s collapse is convergence of X^(l) to this set (rank <= 1)",
     "symmetry_to_break": "S_n, through residual connections and the MLP (thm-5.3: residuals make the bad set null)"},
    {"phenomenon": "rank collapse in width",
     "object": "fixed-point set",
     "precise_object": "Fix of S_n acting on attention matrices by A -> P A P^T within the row-stochastic ones: "
                       "{a I + (1-a)/n 1 1^T}; collapse = A^h approaching its uniform member (1/n) 1 1^T",
     "why": "a uniform A^h sends X to 1 (mean row) (rank 1): Nait Saada et al.'s spectral-gap collapse as width "
            "grows is convergence of A^h to this fixed point",
     "symmetry_to_break": "S_n on the scores (positions, content-dependent queries/keys)"},
    {"phenomenon": "head-channel non-identifiability",
     "object": "fibre",
     "precise_object": "the fibre of F: (Y^1..Y^H) -> LN(X + sum_h Y^h W_O^h + b_O) (what the FFN receives); "
                       "in parameters, the orbit of GL(d_v)^H x S_H x value-bias-shift on (W_V, b_V, W_O, b_O)",
     "why": "the MLP sees only F's value: per-head contributions are determined only up to F's fibre "
            "(dimension n(H d_v - rank W_O) + n c_LN); the head-sum fibre n(H-1)d_v is the paper's count and "
            "applies when W_O is unknown",
     "symmetry_to_break": "GL(d_v)^H and S_H, e.g. by position-gated output projections (PG-OP)"},
    {"phenomenon": "entropy collapse",
     "object": "orbit",
     "precise_object": "the orbits {S + c 1^T} of the softmax shift on score rows (key-bias-shift acts along "
                       "them); entropy is constant on each orbit, and collapse is the orbit-space coordinate "
                       "(the row-centred scores) diverging, A^h tending to one-hot rows",
     "why": "softmax factors through the quotient by row constants; Zhai et al.'s entropy collapse is "
            "||centred scores|| -> infinity, i.e. growth of W_Q^h W_K^h^T, the invariant of the qk-gauge orbit",
     "symmetry_to_break": "none is broken; the remedy bounds the qk-orbit invariant W_Q W_K^T (e.g. sigma-reparam)"},
]


def pairing_table() -> list[dict[str, str]]:
    """The toolkit's formalisation pairing each collapse phenomenon with a fixed-point set, orbit or fibre.

    Labelled as the toolkit's, not the paper's: the paper's §9 is not in the text we hold.

    Examples
    --------
    >>> [row["object"] for row in pairing_table()][:2]
    ['fixed-point set', 'fixed-point set']
    """
    return [dict(row, provenance="toolkit formalisation of framework-9 (the paper's §9 is not in the text we hold)")
            for row in PAIRING]
