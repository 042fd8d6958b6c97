"""Float64-verified attention invertibility against arb ball arithmetic (an independent route), with false cases."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from symtrans.certify.exact import dyadic_matrix
from symtrans.certify.real import (attention_det, ball_box, embedding_input, float_input_box, layernorm_ball,
                                   verified_attention_sign)


def _arb_sign(X, WQ, WK, prec=256):
    det = attention_det(dyadic_matrix(X), WQ, WK, prec)
    return 0 if 0 in det else (1 if det > 0 else -1)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9), d=st.integers(1, 6), k=st.integers(1, 4),
       scale=st.sampled_from([1e-3, 0.3, 1.0, 3.0]), twins=st.integers(0, 2))
def test_a_verified_sign_is_the_exact_sign(seed, n, d, k, scale, twins):
    """Whenever the float64 route decides, arb at 256 bits agrees; repeated rows (singular E) are never decided."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    for t in range(min(twins, n - 1)):
        X[t + 1] = X[0]  # a repeated token: two equal rows of E, det exactly 0
    WQ, WK = rng.standard_normal((d, k)), rng.standard_normal((d, k))
    sign, beta = verified_attention_sign(X, np.zeros_like(X), WQ, WK)
    if twins and n > 1:
        assert sign == 0
    if sign:
        assert beta < 1
        assert _arb_sign(X, WQ, WK) == sign


def test_nearly_singular_is_not_decided_wrongly():
    """Rows 1e-15 apart: E is within rounding of singular; the float route must stay undecided."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 4))
    X[1] = X[0] * (1 + 1e-15)
    W = rng.standard_normal((4, 3))
    assert verified_attention_sign(X, np.zeros_like(X), W, W)[0] == 0
    X[1] = X[0] * (1 + 1e-6)  # well separated: decided, with arb's sign
    sign, _ = verified_attention_sign(X, np.zeros_like(X), W, W)
    assert sign != 0 and sign == _arb_sign(X, W, W)


def test_input_radius_counts():
    """A box wide enough to contain a singular input is never decided."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5, 4))
    X[1] = X[0] + 1e-3
    W = rng.standard_normal((4, 4))
    assert verified_attention_sign(X, np.zeros_like(X), W, W)[0] != 0
    assert verified_attention_sign(X, np.full_like(X, 1e-3), W, W)[0] == 0  # X[1] = X[0] lies in the box


def test_real_heads_agree_with_arb():
    """On the bundled model's real input (and its LayerNorm ball) the two routes give the same signs."""
    from symtrans.numeric import load_model

    w = load_model("default")
    ids = list(range(2000, 2048))
    Xm, Xr = float_input_box(w, ids)
    Z = embedding_input(w, ids)
    for layer, h in ((0, 0), (3, 7), (5, 11)):
        sign, beta = verified_attention_sign(Xm, Xr, w.W_Q[layer, h], w.W_K[layer, h])
        det = attention_det(Z, w.W_Q[layer, h], w.W_K[layer, h], 128)
        assert sign == (1 if det > 0 else -1) and beta < 1
    X0 = layernorm_ball(Z, w.emb_ln_w, w.emb_ln_b, float(w.arch.ln_eps), 128)
    m, r = ball_box(X0)
    assert (r > 0).all() and (r < 1e-15 * (abs(m) + 1e-3)).all()  # the 128-bit ball plus rounding mid to float
    assert verified_attention_sign(m, r, w.W_Q[0, 2], w.W_K[0, 2])[0] != 0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 7), rad=st.sampled_from([0.0, 1e-12, 1e-3, 0.1]),
       deficiency=st.integers(0, 2))
def test_verified_det_sign_holds_on_the_whole_box(seed, n, rad, deficiency):
    """A decided sign is the exact sign of det at the centre and at random points of the box (fmpq determinants)."""
    from flint import fmpq_mat

    from symtrans.certify.real import verified_det_sign

    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    for t in range(min(deficiency, n - 1)):  # exactly dependent rows: det 0 at the centre
        M[t + 1] = M[0] * 2.0 ** -(t + 1)  # exact scaling: a true dependency over Q
    dM = np.full((n, n), rad)
    sign, beta = verified_det_sign(M, dM)

    def exact_sign(A):
        det = fmpq_mat(n, n, [fmpq_from(v) for v in A.ravel()]).det()
        return (det > 0) - (det < 0)

    if sign:
        assert beta < 1 and exact_sign(M) == sign
        for _ in range(3):
            assert exact_sign(M + rng.uniform(-1, 1, (n, n)) * dM) == sign
    if deficiency and n > 1:
        assert sign == 0


def fmpq_from(v):
    from flint import fmpq

    return fmpq(*float(v).as_integer_ratio())


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), H=st.integers(1, 3), d=st.integers(3, 7), dk=st.integers(1, 3),
       n=st.integers(4, 40), scale=st.sampled_from([1e-4, 1.0, 4.0]), silence=st.booleans())
def test_verified_residual_sign_agrees_with_arb(seed, H, d, dk, n, scale, silence):
    """theorem 5.3's minor: a float64-decided sign equals the 256-bit arb sign; with MHA = 0 nothing is decided."""
    from symtrans.certify.real import LayerResidual, verified_residual_sign

    rng = np.random.default_rng(seed)
    L = {k: rng.standard_normal((H, d, dk)) * scale for k in ("W_Q", "W_K", "W_V")}
    L["W_O"] = rng.standard_normal((H, dk, d)) * (0.0 if silence else 1.0)
    R = min(d - 1, n - 1)
    res = LayerResidual(L, n, R, prec=256)
    for r in range(1, R + 1):
        if silence:  # F(X*_r) = X*_r has rank r: every (r+1)-minor is exactly 0
            assert verified_residual_sign(L, n, r, list(range(r + 1)))[0] == 0
            continue
        cols = res.columns(r)
        if len(cols) < r + 1:
            continue
        sign, beta = verified_residual_sign(L, n, r, cols)
        if sign:
            _, det = res.minor(r, cols)
            assert 0 not in det and sign == (1 if det > 0 else -1) and beta < 1


def test_stacked_rank_routes_gram_cholesky_then_square_minor():
    """Well conditioned: the Gram Cholesky certifies; condition 1e9: it declines and the verified inverse certifies."""
    from symtrans.certify.real import stacked_wo_rank

    g = np.random.default_rng(4)
    U, _ = np.linalg.qr(g.standard_normal((40, 40)))
    V, _ = np.linalg.qr(g.standard_normal((40, 40)))
    for smin, method in ((1e-2, "float64-verified Gram Cholesky"), (1e-9, "float64-verified square minor")):
        W = ((U * np.logspace(0, np.log10(smin), 40)) @ V.T).astype(np.float32).astype(np.float64)
        out = stacked_wo_rank(W)
        assert out["rank"] == 40 == np.linalg.matrix_rank(W, tol=1e-14) and out["method"].startswith(method)
    W[7] = W[2] - 0.5 * W[3]  # float32 entries: exact in float64, a true dependency: neither float route certifies, rank mod p finds it
    assert stacked_wo_rank(W)["rank"] == 39


def test_pivots_match_lapack_column_pivoting_and_skip_zero_columns():
    """The greedy column choice against LAPACK's QR with column pivoting (scipy's geqp3), and its false cases."""
    import scipy.linalg

    from symtrans.certify.real import _pivots

    rng = np.random.default_rng(7)
    for m, n in [(5, 12), (9, 40), (33, 768)]:
        A = rng.standard_normal((m, n)) * rng.uniform(0.1, 10, n)  # columns of different sizes: no ties
        piv = scipy.linalg.qr(A, mode="r", pivoting=True)[1]
        assert _pivots(A, m) == sorted(int(j) for j in piv[:m])
    B = np.zeros((4, 10))
    B[:, [2, 5, 7]] = rng.standard_normal((4, 3))  # only three non-zero columns: rank 3
    assert _pivots(B, 4) == [2, 5, 7]  # exact zeros are never chosen, and the choice stops at the rank
    assert _pivots(np.zeros((3, 5)), 3) == []


def test_entries_below_the_absolute_slack_are_refused():
    """The bounds' absolute slack assumes no non-zero entry below 2^-900: such input is undecided, not certified."""
    from symtrans.certify.real import verified_attention_signs, verified_det_sign

    M = np.eye(3)
    assert verified_det_sign(M, np.zeros((3, 3)))[0] == 1
    M[0, 1] = 2.0 ** -950  # a non-zero entry below the slack: the same matrix, to rounding, but refused
    assert verified_det_sign(M, np.zeros((3, 3))) == (0, math.inf)
    X, W = np.eye(3), np.stack([np.eye(3), np.eye(3)])
    W[1, 0, 1] = 2.0 ** -950  # only head 1 carries a tiny weight
    assert [s for s, _ in verified_attention_signs(X, 0 * X, W, W)] == [1, 0]
