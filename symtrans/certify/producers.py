"""Certificate producers: exact witnesses and exact counterexamples as ``symbolic`` evidence.

Each producer is registered against a claim id with :func:`symtrans.evidence.producer`
and returns :class:`~symtrans.evidence.Evidence` of kind ``symbolic``. Only an
exact computation (rational arithmetic, rank mod p as a certified lower bound,
or rigorous interval enclosures) may yield ``certified``; a counterexample
search that finds nothing yields ``supported`` with the families searched.
Sizes are read from :mod:`symtrans.arch` presets and expected values from
:mod:`symtrans.formulas`, never typed in.

Examples
--------
>>> from symtrans.runner import producers_for  # imports this module (and every producer module)
>>> [p.name for p in producers_for("prop-5.1") if p.kind == "symbolic"]  # the exact witness, then the Coq proof's
['prop51-witness', 'coq-prop51-witness']
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from symtrans.certify import layernorm as lnmod
from symtrans.certify.exact import P, as_strings, rank_mod_p, rank_q
from symtrans.certify.linear import (block_head_witness_rank, certify_generic_rank, check_rank_sum,
                                     head_subspace_rank, kron_rank_rule_holds, low_rank_int_matrix, random_int_array,
                                     prop51_witness, random_int_matrix, rank_sum_families,
                                     stratum_dimension, summation_fibre, wo_fibre)
from symtrans.certify.search import search_universal
from symtrans.checker.statements import THM53_R, Dims, attention_n, expected
from symtrans.context import Context
from symtrans.evidence import Evidence, HypothesisCheck, Scope, Verdict, producer

__all__ = ["SMALL_SIZES", "SOFTMAX_SIZES", "MOD_P_NOTE", "THM53_R", "certificate"]

#: (n, d) grid on which size-independent block witnesses are re-checked exactly.
SMALL_SIZES = [(n, d) for n in range(2, 7) for d in range(2, 7)]
#: (n, d_model, H, d_k) for the softmax certificates with random rational weights.
SOFTMAX_SIZES = [(4, 6, 2, 3), (6, 4, 2, 2), (5, 5, 3, 2)]
MOD_P_NOTE = (f"rank mod p = {P} of the exact integer/dyadic matrix: reduction mod p maps each minor over Q to the "
              "same minor over GF(p), so a non-zero minor mod p is non-zero over Q and rank_Q >= rank_p")


def _ev(claim: str, name: str, verdict: Verdict, summary: str, **kw: Any) -> Evidence:
    return Evidence(claim=claim, producer=name, kind="symbolic", verdict=verdict, summary=summary,
                    dtype="exact", **kw)


def certificate(statement_id: str, dims: Dims, asserts: dict[str, Any], witness: dict[str, Any],
                weights_hash: str | None) -> dict[str, Any]:
    """A certificate dict of a registered statement (schema of :mod:`symtrans.checker.check`), sealed with its digest.

    Claim, reading, producer, statement text and scope come from the trusted registry
    (:func:`symtrans.checker.statements.expected`), the witness and asserts from the producer.

    Examples
    --------
    >>> from symtrans.checker.check import verify_certificate
    >>> (ev,) = prop62(Context(model=None))
    >>> c = ev.details["certificate"]
    >>> c["statement_id"], verify_certificate(c)[0]
    ('prop-6.2/identity-counterexample', True)
    """
    from symtrans import __version__
    from symtrans.checker.check import SCHEMA, digest

    exp = expected(statement_id, dims)
    cert = {"schema": SCHEMA, "statement_id": statement_id, "claim": exp["claim"], "reading": exp["reading"],
            "producer": exp["producer"], "statement": exp["statement"], "scope": exp["scope"], "asserts": asserts,
            "witness": witness, "toolkit_version": __version__, "weights_hash": weights_hash}
    cert["digest"] = digest(cert)
    return cert


def _dims(w: Any, ctx: Context) -> Dims:
    """The registry's parameters of a statement about the weights ``w`` under ``ctx``."""
    return Dims(L=int(w.W_Q.shape[0]), H=int(w.W_Q.shape[1]), H_kv=int(w.W_V.shape[1]), d=int(w.W_Q.shape[2]),
                d_k=int(w.W_Q.shape[3]), positions=int(w.pos.shape[0]) if getattr(w, "pos", None) is not None else None,
                vocab=int(w.arch.vocab_size), n=ctx.n, seed=ctx.seed, label=str(ctx.model))


def _scope(statement_id: str, dims: Dims) -> Scope:
    """The registry's scope of a statement, as a record's :class:`Scope`."""
    s = expected(statement_id, dims)["scope"]
    return Scope(s["kind"], s["description"], tuple(s["instances"]))


def _arch(name: str) -> Any:
    from symtrans.arch import get_arch

    return get_arch(name)


def _weights(ctx: Context) -> Any:
    return ctx.weights(dtype="float64", device="cpu")  # exact conversion needs float64 values


# ------------------------------------------------------------- lem-rank-sum
@producer("lem-rank-sum", kind="symbolic", name="rank-sum-search",
          description="exact counterexample search for |rank A - rank B| <= rank(A+B) <= rank A + rank B")
def rank_sum_search(ctx: Context) -> list[Evidence]:
    """Exhaustive and random exact search for a counterexample to lem-rank-sum."""
    res = search_universal("|rank A - rank B| <= rank(A + B) <= rank A + rank B",
                           rank_sum_families(seed=ctx.seed), check_rank_sum)
    if res.counterexample:  # pragma: no cover - would contradict linear algebra
        A, B = res.counterexample
        return [_ev("lem-rank-sum", "rank-sum-search", Verdict.FAILS, "exact counterexample found",
                    counterexample={"A": as_strings(A), "B": as_strings(B), **res.counterexample_check.details},
                    details={"search": res.to_dict()})]
    return [_ev("lem-rank-sum", "rank-sum-search", Verdict.SUPPORTED,
                f"no counterexample among {res.checked} exact candidates (a finite search, not a proof; the "
                "textbook proof: rowspace(A+B) lies in rowspace A + rowspace B, and A = (A+B) + (-B))",
                seed=ctx.seed, scope=Scope("instances", f"{res.checked} exact candidates: every pair of 2x2 matrices "
                                           "over {-1, 0, 1} and random 3x4 integer pairs of every rank"),
                details={"search": res.to_dict(), "computation": "exact rank over Q of A, B, A+B"})]


# ------------------------------------------------------------------ prop-5.1
def _prop51_sizes() -> list[tuple[str, int, int, list[int]]]:
    bert, mini = _arch("bert-base"), _arch("minilm-l6-h384")
    return [("small", 6, 5, [1, 2, 3, 4]),
            ("bert-base", int(bert.n), int(bert.d_model), [1, int(bert.d_k), 256]),
            ("minilm-l6-h384 (n=128)", 128, int(mini.d_model), [1, int(mini.d_k), 127])]


@producer("prop-5.1", kind="symbolic", name="prop51-witness",
          description="exact witness B* with rank(A + B*) > rank A = r")
def prop51(ctx: Context) -> list[Evidence]:
    """Certify prop-5.1 by exact witnesses: a block witness at every size and random ones at named sizes."""

    grid = [(n, d, r) for n, d in SMALL_SIZES for r in range(min(n, d))]
    block_ok = all(prop51_witness(n, d, r) == r + 1 for n, d, r in grid)
    rng = random.Random(ctx.seed)
    rows, ok = [], block_ok
    for label, n, d, ranks in _prop51_sizes():
        for r in ranks:
            for _ in range(50):  # redraw until rank A = r is certified: a draw of lower rank is no witness
                A = low_rank_int_matrix(n, d, r, rng)  # rank <= r by construction
                rank_A = rank_q(A.tolist()) if max(n, d) <= 40 else rank_mod_p(A[:r, :r])  # >= r certified
                if rank_A == r:
                    break
            k = r + 1

            def build(B: Any, A: Any = A, k: int = k) -> Any:
                M = A[:k, :k] + B  # leading (r+1) x (r+1) block of A + B
                return M.tolist() if k <= 40 else M

            cands = (random_int_array(k, k, rng) for _ in range(50))  # tried until one certifies
            cert = certify_generic_rank(f"rank(A + B) > {r}", build, r, cands)
            good = cert.certified and rank_A == r
            ok &= good
            rows.append({"sizes": label, "n": n, "d": d, "r": r, "rank_A": rank_A, "certified": good,
                         "witness": "B* = random integers in [-3, 3] (seeded); the leading (r+1) x (r+1) block of "
                                    "A + B* is non-singular", "method": cert.method,
                         "minor": cert.minor,
                         "witness_B_block": as_strings(cert.witness.tolist()) if k <= 6 else None})
    verdict = Verdict.CERTIFIED if ok else Verdict.INCONCLUSIVE
    return [_ev("prop-5.1", "prop51-witness", verdict,
                "bad set {B : rank(A + B) <= r} is a proper algebraic subset (one exact witness), hence null: "
                f"all sizes via the block witness (checked on {len(grid)} (n, d, r) with n, d <= 6), and random "
                "witnesses at small, BertBase and MiniLM sizes" if ok else "some witness could not be certified",
                seed=ctx.seed, inputs={"sizes": [s[:4] for s in _prop51_sizes()]},
                scope=Scope("all-sizes", "block witness B* = U e_{r+1} e_{r+1}^T V at every n, d and r < min(n, d) "
                            "(checked exactly for n, d <= 6); random witnesses at small, BertBase and MiniLM sizes"),
                details={"argument": "rank(A + B) <= r is the common zero set of the (r+1)-minors of A + B, polynomials "
                                     "in B; a polynomial not identically zero vanishes on a Lebesgue-null set, so "
                                     "P[rank(A + B) > r] = 1 for any absolutely continuous law of B",
                         "all_sizes": "A = U E_r V (U, V invertible); B* = U e_{r+1} e_{r+1}^T V gives "
                                      "A + B* = U E_{r+1} V of rank r + 1, for every n, d and r < min(n, d)",
                         "block_witness_checked": {"grid": "2 <= n, d <= 6, every r < min(n, d)", "ok": block_ok},
                         "witnesses": rows, "mod_p": MOD_P_NOTE})]


# ------------------------------------------------------------------ lem-variety
def variety_witness(n: int, d: int, r: int, witness: Any = None) -> dict[str, Any]:
    """Is ``V_r = {rank <= r}`` in R^{n x d} proper? Exact rank of a point claimed outside it (default: prop-5.1's).

    The default witness is prop-5.1's block witness ``E_r + e_{r+1} e_{r+1}^T``
    (:func:`symtrans.certify.linear.prop51_witness`): its leading (r+1)-minor is
    1, so the (r+1)-minors, whose common zero set is ``V_r``, do not all vanish.

    Examples
    --------
    >>> variety_witness(3, 4, 2)["proper"]
    True
    >>> from symtrans.certify.linear import canonical
    >>> variety_witness(3, 4, 2, witness=canonical(3, 4, 2))["proper"]  # E_r lies in V_r: no witness
    False
    """
    if witness is None:
        rank = prop51_witness(n, d, r)
    else:
        rank = rank_q([list(row) for row in witness])
    return {"n": n, "d": d, "r": r, "witness_rank": rank, "proper": rank > r}


@producer("lem-variety", kind="symbolic", name="variety-proper",
          description="V_r proper: prop-5.1's exact block witness has rank r + 1")
def lem_variety(ctx: Context, witnesses: Any = None) -> list[Evidence]:
    """Certify lem-variety's content from prop-5.1's witness: V_r misses E_r + e_{r+1} e_{r+1}^T at every size.

    ``witnesses`` (n, d, r) -> matrix replaces the block witness (a test feeds
    points of V_r and sees the certificate refused).
    """
    grid = [(n, d, r) for n, d in SMALL_SIZES for r in range(min(n, d))]
    rows = [variety_witness(n, d, r, None if witnesses is None else witnesses(n, d, r)) for n, d, r in grid]
    bad = [(x["n"], x["d"], x["r"]) for x in rows if not x["proper"]]
    ok = not bad
    return [_ev("lem-variety", "variety-proper", Verdict.CERTIFIED if ok else Verdict.INCONCLUSIVE,
                ("V_r = {M : rank M <= r} is the common zero set of the (r+1)-minors, and prop-5.1's block witness "
                 "E_r + e_{r+1} e_{r+1}^T has leading (r+1)-minor 1 at every n, d and r < min(n, d): V_r is a proper "
                 "algebraic subset, the zero set of the non-zero polynomial sum of squares of the minors, hence "
                 f"Lebesgue-null (checked exactly on {len(grid)} sizes n, d <= 6)") if ok else
                f"the witness lies in V_r at (n, d, r) = {bad[:5]}: properness not established there",
                scope=Scope("all-sizes", "the block witness E_{r+1} at every n, d and r < min(n, d) (its leading "
                            "(r+1)-minor is 1 by construction; checked exactly for n, d <= 6)"),
                inputs={"grid": "2 <= n, d <= 6, every r < min(n, d)", "witness": "prop-5.1's block witness"},
                details={"argument": "V_r is cut out by the (r+1)-minors; one point with a non-zero minor makes the "
                                     "sum of their squares a non-zero polynomial, whose zero set is Lebesgue-null "
                                     "(the polynomial case of lem-analytic-set)",
                         "shared_with": "prop-5.1 (prop51-witness): the same block witness", "rows": rows[:10],
                         "failed_at": bad})]


# ------------------------------------------------------------------ prop-6.3
@producer("prop-6.3", kind="symbolic", name="prop63-witness",
          description="exact witness for dim R_h = min(rank X, d_k) at BertBase, MiniLM and small sizes")
def prop63(ctx: Context) -> list[Evidence]:
    """Certify dim R_h = min(rank X, d_k) for generic W_V, W_O by exact witnesses; compare with the registry."""
    from symtrans.formulas import formula

    grid = [(n, d, k, r) for n, d in SMALL_SIZES for k in range(1, d + 1) for r in range(1, min(n, d) + 1)]
    block_ok = all(block_head_witness_rank(n, d, k, r) == min(r, k) for n, d, k, r in grid)
    rng = random.Random(ctx.seed)
    rows, ok = [], block_ok
    for preset in ("bert-base", "minilm-l6-h384"):
        a = _arch(preset)
        d, k = int(a.d_model), int(a.d_k)
        for r in (1, k // 2, k, 2 * k):
            W_V = random_int_array(d, k, rng)
            W_O = random_int_array(k, d, rng)
            got = head_subspace_rank(W_V, W_O, r)
            want = formula("head-subspace-dim", arch=preset, rank_X=r).value
            ok &= got == want
            rows.append({"arch": preset, "d_model": d, "d_k": k, "rank_X": r, "certified_rank": got,
                         "registry_value": int(want), "agree": got == want})
    return [_ev("prop-6.3", "prop63-witness", Verdict.CERTIFIED if ok else Verdict.INCONCLUSIVE,
                "dim R_h = min(rank X, d_k) for generic W_V, W_O (given A^h invertible, the paper's hypothesis): "
                "exact witnesses at BertBase and MiniLM sizes agree with formula head-subspace-dim; all sizes via "
                "the block witness" if ok else "a witness disagreed with head-subspace-dim",
                seed=ctx.seed,
                scope=Scope("all-sizes", "block witness W_V = [I; 0], W_O = [I 0] gives E_{min(r, d_k)} at every size "
                            "(checked exactly for n, d_model <= 6); random witnesses at BertBase and MiniLM sizes"),
                details={"argument": "rank(A X W_V W_O) = rank(X W_V W_O) for invertible A; X = U E_r V with U, V "
                                     "invertible and W_V -> V W_V a linear automorphism of weight space, so it suffices "
                                     "to take X = E_r; {(W_V, W_O) : rank(E_r W_V W_O) < min(r, d_k)} is algebraic, and "
                                     "one witness makes it proper, hence null",
                         "all_sizes": "W_V = [I_{d_k}; 0], W_O = [I_{d_k} 0] give E_r W_V W_O = E_{min(r, d_k)} for "
                                      "every n, d_model >= d_k, r",
                         "block_witness_checked": {"grid": "2 <= n, d_model <= 6, 1 <= d_k <= d_model, "
                                                           "1 <= r <= min(n, d_model)", "cases": len(grid),
                                                   "ok": block_ok},
                         "witnesses": rows,
                         "witness_entries": "W_V, W_O random integers in [-3, 3] (seeded with the context seed)",
                         "computation": "rank of W_V[:r] W_O mod p (the rows of E_r W_V W_O); " + MOD_P_NOTE})]


@dataclass
class _Prop63Measure:
    """What prop63-real-weights measured: exact head-factor minors and the sign of det E^h per head."""

    L: int
    H: int
    k: int  # d_k
    kv: list[int]  # query head h reads key/value head kv[h]
    n_att: int
    ids: list[int]
    minors: dict[str, Any] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)  # heads without a certificate of rank d_k
    singular: set[str] = field(default_factory=set)  # heads whose score matrix is exactly zero
    dets: dict[str, tuple[int, float | None, str]] = field(default_factory=dict)
    ln_dets: dict[str, tuple[int, float | None, str]] = field(default_factory=dict)
    ln_prec: int = 0
    zero: list[str] = field(default_factory=list)  # heads with W_V^h or W_O^h exactly zero

    @property
    def undecided(self) -> list[str]:
        """The heads whose det E^h sign could not be decided (at the embedding-sum input)."""
        return [item for item, (sign, _, _) in self.dets.items() if not sign]

    @property
    def ln_undecided(self) -> list[str]:
        """The heads whose det E^h sign could not be decided at layer 0's real (LayerNorm) input."""
        return [item for item, (sign, _, _) in self.ln_dets.items() if not sign]


def _det_sign(verified: tuple[int, float], ball: Any) -> tuple[int, float | None, str]:
    """(sign det E^h, margin, how): float64 verification first, an arb determinant where it cannot decide."""
    from symtrans.certify.real import ball_margin

    sign, beta = verified
    if sign:
        return sign, -math.log10(beta) if beta > 0 else math.inf, "float64-verified"
    det = ball()
    if 0 in det:
        return 0, None, "undecided"
    return (1 if det > 0 else -1), ball_margin(det), "arb"


def _prop63_dets(meas: _Prop63Measure, w: Any) -> None:
    """Decide the sign of det E^h for every head not exactly singular: at the embedding sum, and at LN(...) (layer 0)."""
    from symtrans.certify.real import ATTENTION_PRECISION, attention_det, attention_det_ball, ball_box, \
        embedding_input, float_input_box, layernorm_ball, verified_attention_signs

    L, H, kv, d = meas.L, meas.H, meas.kv, int(w.W_V.shape[2])
    X = embedding_input(w, meas.ids)
    Xm, Xr = float_input_box(w, meas.ids)
    for layer in range(L):  # every head of a layer verified together (one projection GEMM per layer)
        signs = verified_attention_signs(Xm, Xr, w.W_Q[layer], w.W_K[layer][kv])
        for h in range(H):
            if f"layer {layer} head {h}" in meas.singular:
                continue
            meas.dets[f"layer {layer} head {h}"] = _det_sign(signs[h], lambda layer=layer, h=h: attention_det(
                X, w.W_Q[layer, h], w.W_K[layer, kv[h]], ATTENTION_PRECISION))
    meas.ln_prec = ln_prec = 2 * ATTENTION_PRECISION  # balls through LayerNorm start wider: 64 bits left one undecided
    if getattr(w, "emb_ln_w", None) is not None:  # layer 0 at its real input LN(word + pos + type)
        X0 = layernorm_ball(X, w.emb_ln_w, w.emb_ln_b if w.emb_ln_b is not None else [0.0] * d,
                            float(w.arch.ln_eps), ln_prec)
        box0 = ball_box(X0)
        signs0 = verified_attention_signs(box0[0], box0[1], w.W_Q[0], w.W_K[0][kv])
        meas.ln_dets = {f"layer 0 head {h}": _det_sign(
            signs0[h], lambda h=h: attention_det_ball(X0, w.W_Q[0, h], w.W_K[0, kv[h]], ln_prec)) for h in range(H)
            if f"layer 0 head {h}" not in meas.singular}


def _prop63_measure(ctx: Context, w: Any) -> _Prop63Measure:
    """Exact minors of W_V^h and W_O^h at every head, then the attention determinants (:func:`_prop63_dets`)."""
    from symtrans.certify.real import head_factor_minors
    from symtrans.numeric.forward import random_ids

    L, Hkv, d, k = (int(x) for x in w.W_V.shape)  # W_K, W_V as stored: H_kv heads (grouped-query attention)
    H = int(w.W_Q.shape[1])
    kv = [h // (H // Hkv) for h in range(H)]  # query head h reads key/value head kv[h] (transformers' repeat_kv)
    n_att = attention_n(_dims(w, ctx))  # a model with fewer positions: its maximum
    meas = _Prop63Measure(L, H, k, kv, n_att, [])
    for layer in range(L):
        for h, m in enumerate(head_factor_minors(w.W_V[layer][kv], w.W_O[layer])):  # W_V of the head h reads
            meas.minors[f"layer {layer} head {h}"] = m
            if m["rank"] != k:
                meas.bad.append(f"layer {layer} head {h}")
    meas.ids = [int(i) for i in random_ids(w, n_att, ctx.seed)]  # a model with fewer positions: its maximum
    # a head with W_Q^h = 0 or W_K^h = 0 has the score matrix exactly 0: E^h = 1 1^T, A^h = 1 1^T / n of rank 1
    # (n > 1): the hypothesis fails there exactly, it is not undecided; such heads are left out and listed
    meas.singular = {f"layer {layer} head {h}" for layer in range(L) for h in range(H)
                     if n_att > 1 and not (w.W_Q[layer, h].any() and w.W_K[layer, kv[h]].any())}
    _prop63_dets(meas, w)
    # a head whose W_V^h or W_O^h is exactly zero provably violates the hypothesis (rank d_k); a head where the
    # pivoted minor is zero only lacks a certificate: an instance can never refute prop-6.3 (a generic statement)
    meas.zero = [item for item in meas.bad if not (w.W_V[int(item.split()[1]), kv[int(item.split()[3])]].any()
                                                   and w.W_O[int(item.split()[1]), int(item.split()[3])].any())]
    return meas


def _prop63_hypotheses(ctx: Context, meas: _Prop63Measure) -> tuple[HypothesisCheck, ...]:
    """The three hypothesis checks: A^h invertible (embedding sum; layer 0's real input) and rank W_V^h W_O^h."""
    from symtrans.certify.real import ATTENTION_PRECISION

    L, H, k, n_att, dets, ln_dets = meas.L, meas.H, meas.k, meas.n_att, meas.dets, meas.ln_dets
    singular, undecided, ln_undecided, bad, zero = meas.singular, meas.undecided, meas.ln_undecided, meas.bad, meas.zero
    margins = {item: m for item, (sign, m, _) in dets.items() if sign}
    how = sorted({h for _, _, h in [*dets.values(), *ln_dets.values()] if h != "undecided"})
    margin_note = ("margin = fewest decades: log10(1 / beta) for float64-verified heads (beta < 1 the certified bound "
                   "on ||I - R E^h||_inf, R a float64 inverse: a priori rounding bounds, Higham), and the decades by "
                   "which the arb ball of det E^h excludes 0 for heads that fell back to arb")
    left_out = (f"; heads left out, A^h = 1 1^T / n exactly (score matrix 0: W_Q^h = 0 or W_K^h = 0), the "
                f"hypothesis fails there: {', '.join(sorted(singular))}" if singular else "")
    hyp = HypothesisCheck(
        f"A^h invertible (n = {n_att})", False if singular and not dets else None if undecided else True,
        margin=0.0 if singular and not dets else min(margins.values()) if margins else None,
        detail=f"det exp(X W_Q^h W_K^h^T X^T / sqrt d_k) != 0 for all {L * H} heads at X = word[ids] + pos[:n] + "
               f"type[0] (the embedding sum before its LayerNorm; ids seeded {ctx.seed}), by {' and '.join(how)} "
               f"({sum(h == 'float64-verified' for _, _, h in dets.values())} of {len(dets)} float64-verified, the "
               f"rest by arb {ATTENTION_PRECISION}-bit balls); {margin_note}"
               + (f"; undecided: {', '.join(undecided)}" if undecided else "") + left_out)
    hyp_ln = HypothesisCheck(
        f"A^h invertible at layer 0's real input (n = {n_att})", None if ln_undecided or not ln_dets else True,
        margin=min(m for _, m, _ in ln_dets.values()) if ln_dets and not ln_undecided else None,
        detail=f"layer 0, all {H} heads, X = LayerNorm(word[ids] + pos[:n] + type[0]) enclosed in arb "
               f"({meas.ln_prec}-bit balls: exact mean and variance, ball square root), then float64-verified on that "
               f"box (arb determinants where that cannot decide), bias-free scores as in the paper"
               + (f"; undecided: {', '.join(ln_undecided)}" if ln_undecided else ""))
    hyp_rank = HypothesisCheck(
        f"W_V^h W_O^h of rank d_k = {k}", True if not bad else (False if zero else None),
        detail=("exact non-zero d_k x d_k minors of W_V^h and W_O^h at every head" if not bad else
                f"W_V^h or W_O^h is zero at {', '.join(zero)}" if zero else
                f"no non-zero pivoted minor found at {', '.join(bad)} (not a proof of deficiency)"))
    return hyp, hyp_ln, hyp_rank


def _prop63_certificates(ctx: Context, w: Any, meas: _Prop63Measure, dims: Dims) -> list[dict[str, Any]]:
    """The certificate files: the head ranks always, the attention signs where every head was decided."""
    from symtrans.certify.real import ATTENTION_PRECISION, MODULUS

    kv, minors, ids = meas.kv, meas.minors, meas.ids
    certs = [certificate("prop-6.3/head-rank", dims, {"rank": {item: m["rank"] for item, m in minors.items()}},
                         {"method": "factor-minors", "model": str(ctx.model), "modulus": MODULUS,
                          "items": {item: {"left": {"tensor": "W_V", "index": [int(item.split()[1]),
                                                                               kv[int(item.split()[3])]]},
                                           "right": {"tensor": "W_O", "index": list(map(int, item.split()[1::2]))},
                                           "rows": m["rows"], "cols": m["cols"]} for item, m in minors.items()}},
                         w.weights_hash)]
    if not meas.undecided:
        certs.append(certificate(
            "prop-6.3/attention-invertible", dims,
            {"det_sign": {item: sign for item, (sign, _, _) in meas.dets.items()}},
            {"method": "attention-det", "model": str(ctx.model), "precision": ATTENTION_PRECISION,
             "input": {"ids": ids, "form": "word[ids] + pos[:n] + type[0], no LayerNorm"},
             "items": {item: {"layer": int(item.split()[1]), "head": int(item.split()[3])} for item in meas.dets}},
            w.weights_hash))
    if meas.ln_dets and not meas.ln_undecided:
        certs.append(certificate(
            "prop-6.3/attention-invertible-ln", dims,
            {"det_sign": {item: sign for item, (sign, _, _) in meas.ln_dets.items()}},
            {"method": "attention-det-ln", "model": str(ctx.model), "precision": meas.ln_prec,
             "eps": float(w.arch.ln_eps),
             "input": {"ids": ids, "form": "LayerNorm(word[ids] + pos[:n] + type[0]) with emb_ln_w, emb_ln_b"},
             "items": {item: {"layer": 0, "head": int(item.split()[3])} for item in meas.ln_dets}},
            w.weights_hash))
    return certs


def _prop63_summary(meas: _Prop63Measure, hyp: HypothesisCheck) -> str:
    """The record's sentence: what was certified, what is undecided, or which hypothesis fails."""
    L, H, k, singular, bad, zero = meas.L, meas.H, meas.k, meas.singular, meas.bad, meas.zero
    if not bad and not meas.undecided:
        return (f"all {L * H} real heads: rank(W_V^h W_O^h) = d_k = {k} exactly, so dim R_h = min(rank X, d_k) "
                f"for almost every X of each rank; A^h invertible certified for "
                f"{'all ' + str(L * H) if not singular else str(len(meas.dets)) + ' (of ' + str(L * H) + ')'} heads "
                f"at n = {meas.n_att} (min margin {hyp.margin:.1f} decades)"
                + (f"; {len(singular)} heads left out: A^h = 1 1^T / n exactly" if singular else ""))
    if not bad:
        return "rank part certified; A^h invertibility undecided for " + ", ".join(meas.undecided)
    if zero:
        return (f"not applicable: the hypothesis rank(W_V^h W_O^h) = d_k is violated at {', '.join(zero)} (a zero "
                "factor)")
    return f"no certificate of rank(W_V^h W_O^h) = d_k at {', '.join(bad)}"


@producer("prop-6.3", kind="symbolic", name="prop63-real-weights", needs_model=True,
          description="exact rank of W_V^h W_O^h for every head (real weights) and A^h invertible at n (arb)", cost=5,
          whole_model="its certificate files (prop-6.3/head-rank, /attention-invertible) list every head of every "
                      "layer, and A^h at layer 0's real input is part of them: no per-subset certificate is written")
def prop63_real(ctx: Context) -> list[Evidence]:
    """Certify rank(W_V^h W_O^h) = d_k at every real head by exact minors; A^h invertible at n by arb."""
    w = _weights(ctx)
    meas = _prop63_measure(ctx, w)
    hyp, hyp_ln, hyp_rank = _prop63_hypotheses(ctx, meas)
    dims = _dims(w, ctx)
    scope = _scope("prop-6.3/head-rank", dims)
    certs = _prop63_certificates(ctx, w, meas, dims)
    L, H, n_att, singular, bad, zero = meas.L, meas.H, meas.n_att, meas.singular, meas.bad, meas.zero
    ok = not bad
    if singular and not meas.dets:  # every head's attention is exactly singular: the hypothesis fails everywhere
        return [_ev("prop-6.3", "prop63-real-weights", Verdict.NOT_APPLICABLE,
                    f"not applicable: every head has a zero score matrix, so A^h = 1 1^T / n (rank 1) at n = {n_att}: "
                    "the proposition assumes A^h invertible", violated_hypothesis=f"A^h invertible at all {L * H} heads",
                    model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n, "seed": ctx.seed},
                    scope=scope, hypothesis_checks=(hyp, hyp_rank), details={"singular": sorted(singular)})]
    verdict = (Verdict.CERTIFIED if ok and not meas.undecided else Verdict.INCONCLUSIVE if ok or not zero
               else Verdict.NOT_APPLICABLE)
    return [_ev("prop-6.3", "prop63-real-weights", verdict, _prop63_summary(meas, hyp),
                model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n, "seed": ctx.seed},
                violated_hypothesis=(f"W_V^h W_O^h of rank d_k at {len(zero)} heads" if zero and not ok else None),
                scope=scope, hypothesis_checks=(hyp, hyp_ln, hyp_rank),
                details={"argument": "rank(A X W_V W_O) = rank(X W_V W_O) for invertible A; W_V W_O = B C with B "
                                     "(d x d_k) of full column rank, so rank(X W_V W_O) = rank(X B) = min(rank X, "
                                     "d_k) for generic X of each rank (one witness: rows of X chosen among the "
                                     "rows of the minor)",
                         "computation": "python-flint: nmod_mat (else fmpz_mat) determinants of the minors "
                                        "W_V^h[rows] and W_O^h[:, cols] on the weights scaled exactly to integers; "
                                        "A^h: float64 verification of E^h = exp(S^h / sqrt d_k) with a priori "
                                        "rounding bounds (||I - R E^h||_inf < 1), arb_mat determinants of the "
                                        "exponentiated exact scores where that cannot decide; the certificate "
                                        "files are re-checked by the checker in arb alone",
                         "attention_methods": {item: how for item, (_, _, how) in {**meas.dets, **meas.ln_dets}.items()},
                         "deficient": bad, "certificates": certs})]


# -------------------------------------------------------------- thm-recovery
@producer("thm-recovery/sum", kind="symbolic", name="recovery-fibres",
          description="exact fibre dimensions of the head-summation map and of Z -> Z W_O")
def recovery(ctx: Context) -> list[Evidence]:
    """Fibre dimensions by the Kronecker rank rule with the small factor ranked exactly; registry comparison."""
    import numpy as np

    from symtrans.formulas import formula

    rng = random.Random(ctx.seed)
    small = [(2, 3, 2), (3, 2, 3), (2, 4, 1)]
    explicit_ok = all(summation_fibre(n, H, v) == summation_fibre(n, H, v, explicit=True)
                      == formula("recovery-ambiguity", arch="bert-base", n=n, H=H, d_v=v, d_k=v, d_model=H * v).value
                      for n, H, v in small)
    kron_ok = all(kron_rank_rule_holds(low_rank_int_matrix(3, 4, ra, rng).tolist() if ra else [[0] * 4] * 3,
                                       low_rank_int_matrix(2, 3, rb, rng).tolist() if rb else [[0] * 3] * 2)
                  for ra in range(4) for rb in range(3))
    rows = []
    for preset in ("bert-base", "minilm-l6-h384"):
        a = _arch(preset)
        n, H, v, d = int(a.n), int(a.H), int(a.d_v), int(a.d_model)
        fib = summation_fibre(n, H, v)
        want = formula("recovery-ambiguity", arch=preset).value
        rk, wo = wo_fibre(n, np.eye(H * v, d, dtype=np.int64))  # identity witness
        want_wo = formula("wo-fibre", arch=preset).value
        rows.append({"arch": preset, "n": n, "H": H, "d_v": v, "summation_fibre": fib, "registry": int(want),
                     "generic_rank_WO": rk, "wo_fibre": wo, "registry_wo_fibre": int(want_wo),
                     "agree": fib == want and wo == want_wo})
    sum_ok = explicit_ok and kron_ok and all(r["summation_fibre"] == r["registry"] for r in rows)
    wo_ok = all(r["wo_fibre"] == r["registry_wo_fibre"] for r in rows)
    maps = {"summation": "vec: 1_H^T (x) I_{n d_v}; rank = rank(1_H^T) n d_v = n d_v",
            "Z -> Z W_O": "vec: W_O^T (x) I_n; rank = n rank(W_O)"}
    return [_ev("thm-recovery", "recovery-fibres", Verdict.CERTIFIED if sum_ok else Verdict.FAILS,
                "n (H-1) d_v is exactly the fibre dimension of the summation map (Y^1..Y^H) -> sum_h Y^h "
                f"({', '.join(str(r['arch']) + ': ' + str(r['summation_fibre']) for r in rows)})", seed=ctx.seed,
                scope=Scope("all-sizes", "proof: the map is 1_H^T (x) I_{n d_v} and rank(A (x) B) = rank A rank B, so "
                            "the fibre is H n d_v - n d_v at every size; the rule and the explicit matrices are "
                            "checked exactly on instances, the registry values at BertBase and MiniLM"),
                details={"maps": maps,
                         "kronecker_rule": {"statement": "rank(A (x) B) = rank(A) rank(B)",
                                            "checked_exactly": "3x4 and 2x3 integer pairs of every rank",
                                            "ok": kron_ok},
                         "explicit_small_sizes": {"(n, H, d_v)": small, "ok": explicit_ok}, "rows": rows,
                         "generic_W_O": {"fibre_zero": wo_ok, "witness": "the identity: det = 1, so {det W_O = 0} "
                                         "is a proper algebraic subset at every size (Z -> Z W_O has fibre 0 for "
                                         "generic W_O; thm-recovery/wo is decided on the real weights)"}})]


@producer("thm-recovery/wo", kind="symbolic", name="recovery-wo-real", needs_model=True,
          description="exact rank of each layer's stacked W_O (real weights): fibre of Z -> Z W_O", cost=3,
          share="sec7", whole_model="its certificate file (thm-recovery/wo-rank) lists every layer's stacked W_O: no "
                                    "per-subset certificate is written")
def recovery_real(ctx: Context) -> list[Evidence]:
    """Certify rank W_O = H d_v for every layer of the model (verified float64 minor, else exact rank with flint).

    A layer whose W_O the numeric check already proved of full rank (a
    shifted Gram Cholesky of the same float64 matrix, the stored numbers
    exactly; :func:`symtrans.numeric.wo.wo_storage_ranks`, cached in the same
    process: this producer shares its unit) takes that proof; the others go
    through :func:`~symtrans.certify.real.stacked_wo_rank`.
    """
    from symtrans.certify.real import MODULUS, stacked_wo_rank
    from symtrans.numeric.wo import wo_rank
    from symtrans.formulas import formula

    w = _weights(ctx)
    L, H, v, d = (int(x) for x in w.W_O.shape)
    storage = [wo_rank(ctx, i) for i in range(L)]  # the one home of rank W_O at storage precision
    rows = []
    for layer in range(L):
        rec = storage[layer].record
        if "Cholesky certificate" in rec.precision and rec.rank == min(H * v, d) and rec.sigma_above > 0:
            out = {"rank": rec.rank, "rank_mod_p": None,
                   "method": f"float64-verified Gram Cholesky (sigma_min >= {rec.sigma_above:.2g} > 0)"}
        else:
            out = stacked_wo_rank(w.W_O[layer].reshape(H * v, d))
        rk = out["rank"]
        rows.append({"layer": layer, "rank_WO": rk, "rank_mod_p": out["rank_mod_p"], "method": out["method"],
                     "wo_fibre": None if rk is None else ctx.n * (H * v - rk),
                     "registry_wo_fibre": None if rk is None else
                     int(formula("wo-fibre", arch=w.arch, n=ctx.n, rank_WO=rk).value)})
    ok = all(r["rank_WO"] == min(H * v, d) and r["wo_fibre"] == r["registry_wo_fibre"] for r in rows)
    paper = int(formula("recovery-ambiguity", arch=w.arch, n=ctx.n).value)
    decided = _deficient_wo_verdict(rows, paper, ctx.n, H * v) if not ok else None
    if decided is not None:  # exact ranks below full (or a mod-p lower bound) decide the reading
        v_, s_, cx = decided
        return [_ev("thm-recovery", "recovery-wo-real", v_, s_, model=str(ctx.model), weights_hash=w.weights_hash,
                    inputs={"n": ctx.n}, counterexample=cx, details={"rows": rows, "paper": paper},
                    scope=Scope("model", f"every layer (0..{L - 1}) of the model under test, at n = {ctx.n}",
                                tuple(f"layer {i}" for i in range(L))))]
    if not ok:  # no certificate of a rank that was not decided exactly
        unknown = [r["layer"] for r in rows if r["rank_WO"] is None]
        return [_ev("thm-recovery", "recovery-wo-real", Verdict.INCONCLUSIVE,
                    "some layer's stacked W_O is rank-deficient mod p" + (
                        f" (layers {unknown}: exact rank over Q not computed, rank mod p is a lower bound)"
                        if unknown else " and over Q (exact rank)") + ": its fibre is positive there; the "
                    "numeric check decides this reading at storage precision",
                    model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n},
                    details={"rows": rows})]
    dims = _dims(w, ctx)
    scope = _scope("thm-recovery/wo-rank", dims)
    cert = certificate("thm-recovery/wo-rank", dims, {"rank": {f"layer {r['layer']}": r["rank_WO"] for r in rows}},
                       {"method": "exact-rank", "model": str(ctx.model), "modulus": MODULUS,
                        "matrices": {f"layer {r['layer']}": {"tensor": "W_O", "index": [r["layer"]],
                                                             "reshape": [H * v, d]} for r in rows}},
                       w.weights_hash)
    fibre = ctx.n * (H * v - min(H * v, d))  # full rank: 0 when H d_v <= d_model, else the excess columns' share
    wide = (f"every layer's stacked W_O ({H * v} x {d}) has full rank {d} = d_model exactly, fewer than its "
            f"{H * v} rows: the fibre of Z -> Z W_O is n (H d_v - d_model) = {fibre} at n = {ctx.n}, not the "
            f"paper's n (H-1) d_k = {paper}: the heads are not recoverable with W_O known, but the count is another "
            "one")
    # an exact rank is of the stored numbers; 'recoverable' is said only where the storage precision decides it too
    square = (f"every layer's stacked W_O ({H * v} x {d}) has full rank {min(H * v, d)} exactly (the stored "
              f"numbers, over Q): the fibre of Z -> Z W_O is 0 at n = {ctx.n}, not the paper's n (H-1) d_k = "
              f"{paper}; " + _storage_clause(storage) + "; the paper's n (H-1) d_k counts the fibre of the head "
              "sum, not of Z -> Z W_O")
    return [_ev("thm-recovery", "recovery-wo-real",
                (Verdict.FAILS if fibre != paper else Verdict.SUPPORTED) if ok else Verdict.INCONCLUSIVE,
                (wide if fibre else square) if ok else
                "some layer's stacked W_O is rank-deficient over Q (exact rank): the fibre is positive there",
                model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n}, scope=scope,
                counterexample={"n": ctx.n, "fibre": fibre, "paper": paper} if ok and fibre != paper else None,
                details={"rows": rows, "computation": "full rank by a float64-verified shifted Cholesky of the "
                                                      "Gram matrix (sigma_min > 0 with backward-error bounds) or "
                                                      "of a square minor (||I - R M||_inf < 1 with a priori "
                                                      "rounding bounds), else "
                                                      "python-flint rank mod p / fmpz_mat.rank of the weights "
                                                      "scaled exactly to integers (each row's method is listed); "
                                                      f"the rank mod p = {MODULUS} is the checker's witness",
                         "certificate": cert})]


def _storage_clause(storage: list[Any]) -> str:
    """What the storage precision decides beside an exact full rank: recoverable, or where it is undecided.

    An exact rank of the stored numbers says nothing about the weights they round: "recoverable" is said
    only where the rank at storage precision (:func:`symtrans.numeric.wo.wo_rank`) is decided full too.

    Examples
    --------
    >>> import torch
    >>> from symtrans.numeric.wo import wo_rank_of
    >>> _storage_clause([wo_rank_of(torch.eye(4, dtype=torch.float64).reshape(2, 2, 4), "float16", layer=0)])
    'at float16 storage precision too the rank is full (decided), so with W_O known the head outputs are recoverable'
    """
    unsure = [r for r in storage if r.injective is not True]
    dts = sorted({r.storage_dtype for r in storage})
    if not unsure:
        return (f"at {'/'.join(dts)} storage precision too the rank is full (decided), so with W_O known the head "
                "outputs are recoverable")
    return (f"at {'/'.join(dts)} storage precision the rank is " + ", ".join(
        f"layer {r.layer}: {r.low}..{r.high}" if not r.decided else f"layer {r.layer}: {r.rank}" for r in unsure[:6])
            + " (undecided or below full), so recovering the head outputs from the weights these numbers round "
            "is not decided here (thm-7.3/wo says it at storage precision)")


def _deficient_wo_verdict(rows: list[dict[str, Any]], paper: int, n: int, H_dv: int) -> tuple[Verdict, str, Any] | None:
    """thm-recovery/wo from exact ranks (or mod-p lower bounds) of the stacked W_O, when some is below full.

    The fibre of Z -> Z W_O is n (H d_v - rank W_O). A layer whose rank over Q is known gives its fibre
    exactly; a layer with only the rank mod p (a lower bound of the rank over Q) gives an upper bound
    of its fibre. ``fails`` when a known fibre differs from the paper's n (H-1) d_k, or an upper bound is
    below it; ``supported`` when every layer's exact fibre equals it; None when neither is decided.

    Examples
    --------
    >>> rows = [{"layer": 0, "rank_WO": 0, "rank_mod_p": 0}, {"layer": 1, "rank_WO": None, "rank_mod_p": 300}]
    >>> _deficient_wo_verdict(rows, paper=352, n=1, H_dv=384)[0].value
    'fails'
    >>> _deficient_wo_verdict([{"layer": 0, "rank_WO": 32, "rank_mod_p": 32}], 352, 1, 384)[0].value
    'supported'
    >>> _deficient_wo_verdict([{"layer": 0, "rank_WO": None, "rank_mod_p": 20}], 352, 1, 384) is None
    True
    """
    exact = [r for r in rows if r["rank_WO"] is not None]
    wrong = [r for r in exact if n * (H_dv - r["rank_WO"]) != paper]
    below = [r for r in rows if r["rank_WO"] is None and r.get("rank_mod_p") is not None
             and n * (H_dv - r["rank_mod_p"]) < paper]
    if wrong or below:
        bad = wrong + below
        return (Verdict.FAILS, "the stacked W_O's rank over Q decides the fibre of Z -> Z W_O: " + "; ".join(
            f"layer {r['layer']}: " + (f"rank {r['rank_WO']} exactly, fibre {n * (H_dv - r['rank_WO'])}"
                                       if r["rank_WO"] is not None else
                                       f"rank >= {r['rank_mod_p']} (mod p), fibre <= {n * (H_dv - r['rank_mod_p'])}")
            for r in bad[:4]) + f", not the paper's n (H-1) d_k = {paper}",
            {"layers": [r["layer"] for r in bad], "paper": paper})
    if len(exact) == len(rows):
        return (Verdict.SUPPORTED, f"every layer's stacked W_O has exact rank {sorted({r['rank_WO'] for r in rows})}: "
                f"the fibre of Z -> Z W_O is n (H-1) d_k = {paper} at n = {n}", None)
    return None


# ------------------------------------------------------------------- thm-5.3
_MEASURE = ("'almost every rank-deficient X' is read on each rank-r stratum M_r = {X : rank X = r}, r < min(n, d): "
            "a connected real-analytic submanifold of R^{n x d} of dimension r (n + d - r); the measure is its "
            "Riemannian volume (equivalently Lebesgue measure in analytic charts). The bad set B_r = {X in M_r : "
            "rank F(X) <= r} is the zero set on M_r of the sum of squares of the (r+1)-minors of F, real-analytic; "
            "not identically zero (one witness) => null in M_r. Jointly in (weights, X) the same witness makes the "
            "bad set null for almost every weight setting (Fubini).")


@producer("thm-5.3", kind="symbolic", name="thm53-small",
          description="interval-certified (r+1)-minor of F(X*_r) at small sizes, every stratum r")
def thm53_small(ctx: Context) -> list[Evidence]:
    """Certify rank F(X*_r) > r for every r < min(n, d) at small sizes with random rational weights."""
    from symtrans.certify.softmax import certify_residual_rank, random_heads, witness_X

    rng = random.Random(ctx.seed)
    rows, ok = [], True
    for n, d, H, k in SOFTMAX_SIZES:
        heads = random_heads(d, H, k, rng)
        for r in range(1, min(n, d)):
            c = certify_residual_rank(witness_X(n, d, r), heads)
            dim = stratum_dimension(n, d, r, seed=ctx.seed)
            ok &= c.certified and dim == r * (n + d - r)
            rows.append({"n": n, "d_model": d, "H": H, "d_k": k, **c.to_dict(), "stratum_dim": dim,
                         "stratum_dim_formula": r * (n + d - r)})
    return [_ev("thm-5.3", "thm53-small", Verdict.CERTIFIED if ok else Verdict.INCONCLUSIVE,
                "rank F(X*_r) = r + 1 > r certified by an interval-enclosed non-zero (r+1)-minor for every r from 1 "
                f"to min(n, d) - 1 at (n, d_model, H, d_k) in {SOFTMAX_SIZES} (random rational weights, entries in "
                "{-1, -1/2, 0, 1/2, 1}); the increase at X*_r is exactly one (rows r+1..n coincide)" if ok else
                "some minor could not be separated from 0",
                seed=ctx.seed, tolerance=None,
                scope=Scope("instances", "three small sizes with random rational weights, every stratum r; one witness "
                            "certifies one size and weight setting, not every size",
                            tuple(f"(n, d_model, H, d_k) = {sz}" for sz in SOFTMAX_SIZES)),
                details={"measure": _MEASURE, "witness": "X*_r = sum_{i<=r} e_i f_i^T (the paper's)",
                         "form": "F(X) = X + sum_h softmax(X W_Q^h W_K^h^T X^T / sqrt(d_k)) X W_V^h W_O^h (no biases)",
                         "computation": "scores exact over Q; exp, sqrt, normalisation and the determinant in arb "
                                        "ball arithmetic (python-flint, rigorous enclosure); certified iff 0 is outside",
                         "stratum_dimension": "exact rank of the Jacobian of (U, V) -> U V^T at an integer point",
                         "rows": rows})]


@producer("thm-5.3", kind="symbolic", name="thm53-real-weights", needs_model=True, honours_layers=True,
          description="arb-certified (r+1)-minor of F(X*_r) on every layer of the real weights, r = 1..R", cost=4)
def thm53_real(ctx: Context) -> list[Evidence]:
    """Certify rank F(X*_r) > r on every layer of the model for r = 1..THM53_R (exact weights, arb balls)."""
    from symtrans.certify.real import PRECISION, LayerResidual, ball_margin, verified_residual_sign

    w = _weights(ctx)
    L, d = int(w.W_Q.shape[0]), int(w.W_Q.shape[2])
    R = min(THM53_R, ctx.n - 1, d - 1)
    items, signs, failed, margins, methods = {}, {}, [], [], {"float64-verified": 0, "arb": 0}
    hyp_name = "MHA not identically zero: some head with W_V^h != 0 and W_O^h != 0 (the theorem's generic weights)"
    excluded, counted = [], []
    for layer in ctx.layer_indices(L):  # --layers: the listed layers only (then an instance certificate, no file)
        lay = w.layer(layer)
        if all(not lay["W_V"][h].any() or not lay["W_O"][h].any() for h in range(lay["W_V"].shape[0])):
            excluded.append(layer)  # F(X) = X exactly: rank F(X*_r) = r, the hypothesis fails here (not a minor)
            continue
        counted.append(layer)
        res = LayerResidual(lay, ctx.n, R)
        for r in range(1, R + 1):
            key = f"layer {layer} r {r}"
            cols = res.columns(r)
            sign, beta = verified_residual_sign(lay, ctx.n, r, cols) if len(cols) == r + 1 else (0, math.inf)
            if sign:
                methods["float64-verified"] += 1
                margin = -math.log10(beta) if beta > 0 else math.inf
            else:  # the float bounds cannot decide: the arb enclosure of the same minor
                cols, det = res.minor(r, cols)
                if 0 in det:
                    failed.append(key)
                    continue
                methods["arb"] += 1
                sign, margin = (1 if det > 0 else -1), ball_margin(det)
            items[key] = {"layer": layer, "r": r, "cols": cols}
            signs[key] = sign
            margins.append(margin)
    if not counted:
        return [_ev("thm-5.3", "thm53-real-weights", Verdict.NOT_APPLICABLE,
                    "every layer's MHA is identically zero (each head has W_V^h = 0 or W_O^h = 0): F(X) = X, so "
                    "rank F(X*_r) = r exactly; the theorem assumes generic weights", violated_hypothesis=hyp_name,
                    hypothesis_checks=(HypothesisCheck(hyp_name, False, 0.0, f"layers {excluded}"),),
                    model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n, "R": R})]
    hyp = HypothesisCheck(hyp_name, True, None, f"holds at layers {counted}" + (
        f"; layers {excluded} left out (MHA identically zero there: F(X) = X)" if excluded else ""))
    ok = not failed
    dims = _dims(w, ctx)
    subset = bool(excluded) or ctx.layers is not None
    if subset:  # the registered statement covers every layer: a subset is stated as instances, with no file
        scope = Scope("instances", f"layers {counted} ({len(counted)}) of {ctx.model} at n = {ctx.n}, strata "
                      f"r = 1..{R} of min(n, d) - 1 = {min(ctx.n, d) - 1}",
                      tuple(f"layer {l}, r = 1..{R}" for l in counted))
    else:
        scope = _scope("thm-5.3/real-minors", dims)
    cert = certificate("thm-5.3/real-minors", dims, {"minor_sign": signs},
                       {"method": "residual-minor", "model": str(ctx.model), "n": ctx.n, "precision": PRECISION,
                        "items": items}, w.weights_hash) if ok and not subset else None
    return [_ev("thm-5.3", "thm53-real-weights", Verdict.CERTIFIED if ok else Verdict.INCONCLUSIVE,
                f"{'all ' + str(L) if not subset else str(len(counted)) + ' (of ' + str(L) + ')'} layers of "
                f"{ctx.model} (n = {ctx.n}, d_model = {d}, exact weights, no biases as in the "
                f"paper): rank F(X*_r) > r certified for every r = 1..{R} ({len(items)} minors, each non-zero with "
                f"margin >= {min(margins):.1f} decades), so for these weights the bad set is null on those strata"
                if ok else f"minor not separated from 0 at {', '.join(failed)}",
                model=str(ctx.model), weights_hash=w.weights_hash, inputs={"n": ctx.n, "R": R}, scope=scope,
                hypothesis_checks=(hyp,),
                details={"measure": _MEASURE, "precision_bits": PRECISION, "minor_methods": methods,
                         "layers_excluded": excluded,
                         "margin": "decades: log10(1 / beta) for float64-verified minors (beta < 1 the certified "
                                   "bound on ||I - R M||_inf: a priori rounding bounds of every entry, Higham), the "
                                   "decades by which the arb ball excludes 0 for the others; the certificate is "
                                   "re-checked by the checker in arb alone",
                         "not_covered": f"strata r = {R + 1}..{min(ctx.n, d) - 1}; the biases b_Q, b_K, b_V, b_O "
                                        "and the post-LN of the real model are outside the paper's F",
                         "certificate": cert})]


# ------------------------------------------------------------------- prop-6.2
@producer("prop-6.2/identity", kind="symbolic", name="prop62-counterexample",
          description="exact counterexample to rank(MHA X) = dim(R_1 + ... + R_H) when n < dim sum R_h")
def prop62(ctx: Context) -> list[Evidence]:
    """Exhibit rank MHA(X) <= n < dim(sum_h R_h) exactly (A^h invertibility by interval arithmetic)."""
    from symtrans.certify.softmax import certify_attention_invertible, random_heads, sum_of_head_subspaces

    rng = random.Random(ctx.seed)
    n, d, H, k = 2, 4, 2, 2
    for _ in range(10):
        heads = random_heads(d, H, k, rng)
        X = random_int_matrix(n, d, rng, -2, 2)
        inv = [certify_attention_invertible(X, h) for h in heads]
        dim = sum_of_head_subspaces(X, heads)
        if all(ok for ok, _ in inv) and dim > n:
            mats = {f"h{i}.{m}": as_strings([getattr(h, m).row(j) for j in range(getattr(h, m).shape[0])])
                    for i, h in enumerate(heads) for m in ("W_Q", "W_K", "W_V", "W_O")}
            signs = {str(i): _attention_sign(X, h) for i, h in enumerate(heads)}
            dims = Dims(n=ctx.n, seed=ctx.seed)
            scope = _scope("prop-6.2/identity-counterexample", dims)
            cert = certificate("prop-6.2/identity-counterexample", dims, {"rows_of_MHA": n, "dim_sum_R": dim, "det_sign": signs},
                               {"method": "head-sum-rank", "precision": 128, "X": "X",
                                "inline": {"X": as_strings(X), **mats},
                                "heads": [{m: f"h{i}.{m}" for m in ("W_Q", "W_K", "W_V", "W_O")}
                                          for i in range(len(heads))]}, None)
            return [_ev("prop-6.2", "prop62-counterexample", Verdict.FAILS,
                        f"rank MHA(X) <= n = {n} < dim(R_1 + R_2) = {dim}: the identity rank MHA(X) = dim(sum_h R_h) "
                        "fails (the row space of a sum lies inside the sum of the row spaces); the bound "
                        "rank MHA(X) <= min(n, H d_k, d_model) is unaffected", seed=ctx.seed,
                        scope=scope,
                        counterexample={"X": as_strings(X),
                                        "heads": [{m: as_strings([getattr(h, m).row(i)
                                                                  for i in range(getattr(h, m).shape[0])])
                                                   for m in ("W_Q", "W_K", "W_V", "W_O")} for h in heads],
                                        "dim_sum_R": dim, "rank_MHA_upper_bound": n,
                                        "det_A_intervals": [s for _, s in inv]},
                        details={"computation": "A^h invertible certified by a ball determinant excluding 0; "
                                                "then R_h = rowspace(X W_V^h W_O^h), and dim(sum R_h) is the exact rank "
                                                "of the stacked rational matrices; rank MHA(X) <= n rows",
                                 "certificate": cert})]
    return [_ev("prop-6.2", "prop62-counterexample", Verdict.INCONCLUSIVE, "no counterexample found in 10 tries",
                seed=ctx.seed)]


def _attention_sign(X: Any, head: Any) -> int:
    """Sign of det exp(X W_Q W_K^T X^T / sqrt d_k) (= sign det A^h), enclosed in arb; 0 when undecided."""
    from flint import arb, arb_mat, ctx

    from symtrans.certify.exact import fmpq_matrix

    Wq = fmpq_matrix([list(head.W_Q.row(i)) for i in range(head.W_Q.shape[0])])
    Wk = fmpq_matrix([list(head.W_K.row(i)) for i in range(head.W_K.shape[0])])
    Xq = fmpq_matrix(X)
    S = (Xq * Wq) * (Xq * Wk).transpose()
    old = ctx.prec
    ctx.prec = 128
    try:
        root = arb(head.d_k).sqrt()
        n = S.nrows()
        det = arb_mat(n, n, [(arb(v) / root).exp() for v in S.entries()]).det()
    finally:
        ctx.prec = old
    return 0 if 0 in det else (1 if det > 0 else -1)


# ------------------------------------------------------------------- thm-4.2
def _verify_counterexample(X: Any) -> dict[str, Any]:
    """Three independent exact routes on a thm-4.2 counterexample."""
    beta, gamma = [1, 2, 3, 4][:len(X[0])], [1, -2, 3, 5][:len(X[0])]
    alg = lnmod.ln_ranks_sympy(X, gamma, beta)
    return {"hypotheses": lnmod.hypotheses(X), "rank_X": rank_q(X), "arank_X": lnmod.arank_q(X),
            "arank_LN_X_reduction": lnmod.arank_ln(X), "sigma": [str(s) for s in lnmod.sigmas(X)],
            "sympy_algebraic": {"gamma": gamma, "beta": beta, "arank_LN_X": alg["arank"], "field": alg["field"],
                                "LN_X": alg["LN"]}}


@producer("thm-4.2", kind="symbolic", name="ln-affine-search",
          description="exact counterexample search for arank(LN X) = arank(X) under H1-H4")
def thm42_affine(ctx: Context) -> list[Evidence]:
    """Search the affine-rank statement exhaustively in increasing size; minimal exact counterexample."""
    res = search_universal("H1-H4 => arank(LN X) = arank(X)", lnmod.minimal_counterexample_families(3, 3),
                           lnmod.check_thm42_affine)
    if res.counterexample is None:  # pragma: no cover
        return [_ev("thm-4.2", "ln-affine-search", Verdict.SUPPORTED,
                    f"no counterexample among {res.checked} exact candidates", details={"search": res.to_dict()})]
    X = res.counterexample[0]
    Xr = lnmod.RATIONAL_COUNTEREXAMPLE
    rat = lnmod.layer_norm_q(Xr, [1, -2, 3, 5], [1, 2, 3, 4])
    ce = {"X": as_strings(X), **_verify_counterexample(X),
          "rational_instance": {"X": as_strings(Xr), "hypotheses": lnmod.hypotheses(Xr), "arank_X": lnmod.arank_q(Xr),
                                "gamma": [1, -2, 3, 5], "beta": [1, 2, 3, 4], "LN_X": as_strings(rat),
                                "arank_LN_X": lnmod.arank_q(rat)}}
    agree = (ce["arank_LN_X_reduction"] == ce["sympy_algebraic"]["arank_LN_X"] == ce["arank_X"] + 1
             and ce["rational_instance"]["arank_LN_X"] == ce["rational_instance"]["arank_X"] + 1)
    dims = Dims(n=ctx.n, seed=ctx.seed)
    g, b = ce["sympy_algebraic"]["gamma"], ce["sympy_algebraic"]["beta"]
    cert = certificate("thm-4.2/affine-counterexample", dims,
                       {"hypotheses": {"H1": True, "H2": True, "H3": True, "H4": True}, "arank_X": ce["arank_X"],
                        "arank_LN_X_at_least": ce["arank_LN_X_reduction"]},
                       {"method": "ln-affine-rank", "precision": 128,
                        "inline": {"X": as_strings(X), "gamma": [[str(v) for v in g]], "beta": [[str(v) for v in b]]}},
                       None)
    return [_ev("thm-4.2", "ln-affine-search", Verdict.FAILS if agree else Verdict.INCONCLUSIVE,
                f"counterexample X = {X}: H1-H4 hold exactly, arank(X) = {ce['arank_X']} but arank(LN X) = "
                f"{ce['arank_LN_X_reduction']} (three collinear rows on a line missing the origin; LN's division by "
                "sigma_i bends the line). Minimal: n = 3 and d = 3 are the smallest sizes where it can happen, "
                "entries in {-1, 0, 1}",
                counterexample=ce, violated_hypothesis=None,
                scope=_scope("thm-4.2/affine-counterexample", dims),
                details={"search": res.to_dict(), "certificate": cert,
                         "verified_by": ["reduction arank(LN X) = rank[XP | sigma] - 1 with sigma decided in "
                                         "Q(sqrt m) (linear independence of square roots)",
                                         "LN(X) built in exact algebraic numbers, rank over the algebraic field (SymPy)",
                                         "a 3 x 4 instance with rational sigma: LN(X) over Q, ranks over Q"],
                         "why_minimal": "n = 2: arank(X) = 0 forces equal rows, hence equal LN rows; d = 2: centred "
                                        "rows lie on one line through 0, so arank(LN X) <= 1 and equality needs "
                                        "arank(X) = 0; the exhaustive families for n, d <= 3 below confirm it",
                         "paper_gap": "Step 2 of the proof only considers a decrease of affine rank under "
                                      "D = diag(1/sigma_i); it can increase it by one",
                         "correction": "thm-4.2-corrected"})]


@producer("thm-4.2", kind="symbolic", name="ln-zero-beta",
          description="matrix-rank part: rank(LN X) = rank X under H1-H3 with beta = 0 (proof + exact search)")
def thm42_zero_beta(ctx: Context) -> list[Evidence]:
    """Certify the zero-beta part by its proof (symbolically checked identity) and an exact search."""
    res = search_universal("H1-H3, beta = 0 => rank(LN X) = rank(X)", lnmod.rational_norm_families(ctx.seed),
                           lambda X, g, b: lnmod.check_zero_beta(X, g), stop_at_first=False)
    ident = lnmod.verify_symbolic_identity(3) and lnmod.verify_symbolic_identity(4)
    ok = res.counterexample is None and ident
    return [_ev("thm-4.2", "ln-zero-beta", Verdict.CERTIFIED if ok else Verdict.FAILS,
                "part (beta = 0) holds: LN(X) = D XP G with D = diag(1/sigma_i) (H1) and G = diag(gamma) (H3) "
                "invertible, and rank(XP) = rank(X) by H2; identity checked in SymPy, no counterexample among "
                f"{res.checked} exact candidates ({res.applicable} satisfying H1-H3); H4 is not needed" if ok else
                "the zero-beta part failed a check", seed=ctx.seed,
                scope=Scope("all-sizes", "proof valid at every size (LN X = D XP G with D, G invertible); the identity "
                            "is checked in SymPy at d = 3, 4 and the search covers small exact instances"),
                counterexample=None if res.counterexample is None else {"X": as_strings(res.counterexample[0])},
                details={"search": res.to_dict(), "symbolic_identity_checked": ident,
                         "note": "this certifies only the beta = 0 part; the affine part fails (ln-affine-search)"})]


@producer("thm-4.2", kind="symbolic", name="ln-remark",
          description="Remark: rank(LN X) <= rank X + 1 for any beta (proof + exact search)")
def thm42_remark(ctx: Context) -> list[Evidence]:
    """Certify the Remark's bound; show an increase with a zero-mean beta (the parenthetical is not necessary)."""
    res = search_universal("H1-H3 => rank(LN X) <= rank(X) + 1", lnmod.rational_norm_families(ctx.seed + 1),
                           lnmod.check_remark_bound, stop_at_first=False)
    X, g, b = [[1, 1, -1, -1], [-1, -1, 1, 1]], [1, 1, 1, 1], [1, -1, 0, 0]
    ex = lnmod.check_remark_bound(X, g, b)
    ok = res.counterexample is None and ex.details["rank_LN_X"] == ex.details["rank_X"] + 1
    return [_ev("thm-4.2", "ln-remark", Verdict.CERTIFIED if ok else Verdict.FAILS,
                "rank(LN X) <= rank(X) + 1 for every beta (LN X = D XP G + 1 beta^T is a rank-one update of a "
                f"matrix of rank rank(X)); no counterexample among {res.checked} exact candidates. The increase also "
                f"happens with a zero-mean beta: X = {X}, beta = {b} gives rank {ex.details['rank_LN_X']} > "
                f"{ex.details['rank_X']}, so 'when beta has a non-zero mean component' is not a necessary condition",
                seed=ctx.seed,
                scope=Scope("all-sizes", "proof valid at every size (a rank-one update adds at most one to the rank); "
                            "exact search on small instances"),
                details={"search": res.to_dict(), "zero_mean_beta_example":
                                        {"X": X, "gamma": g, "beta": b, **ex.details}})]


@producer("thm-4.2-corrected", kind="symbolic", name="ln-corrected",
          description="corrected LayerNorm rank theorem: arank(LN X) = rank(XP) = rank(X) under H1-H4")
def thm42_corrected(ctx: Context) -> list[Evidence]:
    """Certify the corrected statement: checked proof, cross-checked reduction, exact search."""
    res = search_universal(lnmod.CORRECTED_STATEMENT, lnmod.rational_norm_families(ctx.seed + 2),
                           lnmod.check_corrected, stop_at_first=False)
    ident = lnmod.verify_symbolic_identity(3) and lnmod.verify_symbolic_identity(4)
    rng = random.Random(ctx.seed)
    cross = []
    for _ in range(12):  # the fast reduction against LN(X) in exact algebraic numbers, irrational sigma
        X = random_int_matrix(3, 3, rng, -2, 2)
        if all(v > 0 for v in lnmod.variances(X)):
            cross.append(lnmod.arank_ln(X) == lnmod.ln_ranks_sympy(X, [1, 2, -1], [1, 0, 2])["arank"])
    ok = res.counterexample is None and ident and all(cross)
    return [_ev("thm-4.2-corrected", "ln-corrected", Verdict.CERTIFIED if ok else Verdict.FAILS,
                "under H1-H4, arank(LN X) = rank(XP) = rank(X) (= arank(X) + [1_n in colspace X]); under H1, H3: "
                "arank(LN X) = rank[XP | sigma] - 1. Proof steps checked in SymPy; no counterexample among "
                f"{res.checked} exact candidates with LN(X) computed over Q; reduction agrees with exact algebraic "
                f"LN on {len(cross)} irrational-sigma inputs" if ok else "a check of the corrected statement failed",
                seed=ctx.seed,
                scope=Scope("all-sizes", "proof valid at every size, its steps checked in SymPy at d = 3, 4; exact "
                            "search and cross-checks on small instances"),
                details={"statement": lnmod.CORRECTED_STATEMENT, "latex": lnmod.CORRECTED_LATEX,
                         "proof": lnmod.CORRECTED_PROOF, "symbolic_identity_checked": ident,
                         "search": res.to_dict(), "cross_checks": {"count": len(cross), "all_agree": all(cross)}})]
