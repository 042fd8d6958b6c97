"""Each measurement against an independent route: a second formula, brute force, or scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symtrans.numeric import encode
from symtrans.numeric.linalg import affine_rank, numerical_rank
from symtrans.numeric.measure import (asymmetry, head_subspaces, ln_hypotheses, measure_all, rank_profile,
                                      residual_ratio, wo_conditioning)
from symtrans.numeric.variants import attention_mlp, full_block, pure_attention, run_stack

D64 = torch.float64


@pytest.fixture(scope="module")
def w(default_model):
    return default_model  # tests/conftest.py: loaded once per session


@pytest.fixture(scope="module")
def trace(w):
    return encode(w, n=24, seed=1)


def test_alpha_matches_the_gram_trace_formula(w):
    # ||M||_F^2 = <W_K^T W_K, W_Q^T W_Q>, tr(M^2) = <C, C^T> with C = W_K^T W_Q; alpha^2 = (1 - tr(M^2)/||M||^2)/2
    GQ, GK = w.W_Q.transpose(-1, -2) @ w.W_Q, w.W_K.transpose(-1, -2) @ w.W_K
    C = w.W_K.transpose(-1, -2) @ w.W_Q
    m2 = (GK * GQ).sum((-1, -2))
    trm2 = (C * C.transpose(-1, -2)).sum((-1, -2))
    gram = ((1 - trm2 / m2) / 2).sqrt()
    got = torch.tensor(asymmetry(w).alpha, dtype=D64)
    assert float((got - gram).abs().max()) < 1e-10
    M = w.W_Q[2] @ w.W_K[2].mT  # the definition, M formed explicitly for one layer
    explicit = ((M - M.mT) / 2).flatten(-2).norm(dim=-1) / M.flatten(-2).norm(dim=-1)
    assert float((got[2] - explicit).abs().max()) < 1e-13


def test_alpha_extremes():
    A = torch.randn(2, 6, 3, dtype=D64)
    sym = {"W_Q": A, "W_K": A}  # M = A A^T symmetric
    assert max(asymmetry(sym).alpha[0]) < 1e-15
    J = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=D64)
    anti = {"W_Q": torch.eye(2, dtype=D64)[None], "W_K": J.T[None]}  # M = J antisymmetric
    assert asymmetry(anti).alpha[0][0] == pytest.approx(1.0, abs=1e-15)


def test_head_subspaces_against_direct_svds(trace):
    lt = trace.layers[3]
    rec = head_subspaces(lt, layer=3)
    direct = [numerical_rank(lt.YO[h]).rank for h in range(lt.YO.shape[0])]
    assert rec.dim_R == direct
    assert rec.rank_mha.rank == numerical_rank(lt.mha).rank
    stacked = numerical_rank(lt.YO.reshape(-1, lt.YO.shape[-1])).rank  # sum of row spaces
    assert rec.dim_sum.rank == stacked
    assert rec.kappa == sum(direct) - stacked
    assert rec.alpha_mha == pytest.approx(1 - rec.rank_mha.rank / (len(direct) * max(direct)))
    for h, g in [(0, 1), (2, 7), (5, 11)]:
        angles = scipy.linalg.subspace_angles(lt.YO[h].T.numpy(), lt.YO[g].T.numpy())
        assert rec.min_angle_deg[h][g] == pytest.approx(math.degrees(angles.min()), abs=1e-5)
        assert rec.overlap[h][g] == pytest.approx(float(np.mean(np.cos(angles) ** 2)), abs=1e-9)
    assert rec.min_angle_deg[4][4] == pytest.approx(0.0, abs=1e-4) and rec.overlap[4][4] == pytest.approx(1.0)


def test_head_subspaces_detect_shared_subspaces():
    # two heads writing into the same 2-dim subspace: kappa = 2, angles 0
    Y = torch.randn(3, 10, 2, dtype=D64)
    W = torch.randn(2, 6, dtype=D64)
    W_O = torch.stack([W, W, torch.randn(2, 6, dtype=D64)])
    YO = Y @ W_O

    class LT:
        pass

    lt = LT()
    lt.Y, lt.YO, lt.mha = Y, YO, YO.sum(0)
    rec = head_subspaces(lt)
    assert rec.dim_R == [2, 2, 2] and rec.dim_sum.rank == 4 and rec.kappa == 2
    assert rec.min_angle_deg[0][1] < 1e-5 and rec.min_angle_deg[0][2] > 1


def test_head_subspaces_rank_deficient_head_takes_the_svd_basis():
    # head 1 writes through a rank-1 Y: its K_h is rank-deficient, so its basis must come from the SVD, and the
    # subspace angles and dimensions must still match direct computations (an independent route)
    g = torch.Generator().manual_seed(4)
    Y = torch.randn(3, 10, 2, generator=g, dtype=D64)
    Y[1, :, 1] = 3 * Y[1, :, 0]
    W_O = torch.randn(3, 2, 7, generator=g, dtype=D64)

    class LT:
        pass

    lt = LT()
    lt.Y, lt.YO = Y, Y @ W_O
    lt.mha = lt.YO.sum(0)
    rec = head_subspaces(lt)
    assert rec.dim_R == [numerical_rank(lt.YO[h]).rank for h in range(3)] == [2, 1, 2]
    assert rec.dim_sum.rank == numerical_rank(lt.YO.reshape(-1, 7)).rank == 5
    for h, k in [(0, 1), (1, 2), (0, 2)]:
        angles = scipy.linalg.subspace_angles(lt.YO[h].T.numpy(), lt.YO[k].T.numpy())
        assert rec.min_angle_deg[h][k] == pytest.approx(math.degrees(angles.min()), abs=1e-5)


def test_wo_conditioning_matches_numpy(w):
    rec = wo_conditioning(w)
    for i in (0, w.n_layers - 1):
        stacked = w.W_O[i].reshape(-1, w.d_model).numpy()
        assert rec.ranks[i] == np.linalg.matrix_rank(stacked)
        assert rec.condition[i] == pytest.approx(np.linalg.cond(stacked), rel=1e-8)


def test_residual_ratio_minimisers():
    X = torch.randn(7, 4, dtype=D64)
    rec = residual_ratio(X)
    Xn = X.numpy()
    frob = scipy.optimize.minimize(lambda x: np.linalg.norm(Xn - x[None]), np.zeros(4)).fun
    assert rec.ratio == pytest.approx(frob / np.linalg.norm(Xn), rel=1e-6)

    def composite(x):
        R = np.abs(Xn - x[None])
        return math.sqrt(R.sum(0).max() * R.sum(1).max())

    best = scipy.optimize.minimize(composite, Xn.mean(0), method="Nelder-Mead",
                                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).fun
    scale = composite(np.zeros(4))
    assert best / scale <= rec.composite_ratio + 1e-12  # column mean is feasible, not optimal: an upper bound
    assert rec.composite_ratio == pytest.approx(composite(Xn.mean(0)) / scale)


def test_rank_profile_against_second_routes(trace):
    prof = rank_profile(trace)
    for x, X in zip(prof.layers, trace.hidden_states):
        s = np.linalg.svd(X.numpy(), compute_uv=False)
        assert x.stable_rank == pytest.approx((s ** 2).sum() / s[0] ** 2)
        p = s / s.sum()
        assert x.effective_rank == pytest.approx(math.exp(-(p * np.log(p)).sum()))
        ones = torch.ones(X.shape[0], 1, dtype=D64)
        assert x.affine.rank == numerical_rank(torch.cat([X, ones], 1)).rank - 1 == affine_rank(X).rank
        assert x.rank.rank == np.linalg.matrix_rank(X.numpy())


def test_affine_rank_of_a_collapsed_matrix_is_zero():
    row = torch.randn(1, 5, dtype=D64)
    A = torch.softmax(torch.randn(6, 6, dtype=D64), -1)
    X = A @ (torch.ones(6, 1, dtype=D64) @ row)  # all rows equal up to rounding
    assert numerical_rank(X).rank == 1 and affine_rank(X).rank == 0
    assert rank_profile([X]).layers[0].affine.rank == 0


def _direct_h4(X):
    """H4 distance from an SVD of XP itself (the route ln_hypotheses avoids)."""
    XP = X - X.mean(-1, keepdim=True)
    sigma = XP.pow(2).mean(-1).sqrt()
    r = numerical_rank(XP).rank
    U = torch.linalg.svd(XP, full_matrices=False)[0][:, :r]
    return float((sigma - U @ (U.T @ sigma)).norm() / sigma.norm())


def test_ln_hypotheses_cases_and_the_one_svd_h4_route():
    d = 6
    g = torch.ones(d, dtype=D64)
    # rank 3, n > d: 1_d outside the row space (H2 holds), sigma outside colspace(XP) (H4 holds)
    X = torch.randn(10, 3, dtype=D64) @ torch.randn(3, d, dtype=D64)
    rec = ln_hypotheses(X, g)
    assert [h.holds for h in rec.hypotheses] == [True, True, True, True] and rec.rank_X.rank == 3
    assert rec.H4.value == pytest.approx(_direct_h4(X), rel=1e-8)
    # 1_d in the row space (H2 fails): colspace(XP) loses a direction; the one-SVD route must see it
    B = torch.cat([torch.ones(1, d, dtype=D64), torch.randn(2, d, dtype=D64)])
    X2 = torch.randn(10, 3, dtype=D64) @ B
    rec2 = ln_hypotheses(X2, g)
    assert not rec2.H2.holds and rec2.H4.holds
    assert rec2.H4.value == pytest.approx(_direct_h4(X2), rel=1e-8)
    # generic full rank: n < d makes colspace(XP) = R^n (H4 fails); n >= d puts 1_d in the row space (H2 fails)
    assert not ln_hypotheses(torch.randn(4, d, dtype=D64), g).H4.holds
    assert not ln_hypotheses(torch.randn(9, d, dtype=D64), g).H2.holds
    # H1 and H3
    X3 = torch.randn(5, d, dtype=D64)
    X3[2] = 0.7
    assert not ln_hypotheses(X3, g).H1.holds
    g0 = g.clone()
    g0[1] = 0
    assert not ln_hypotheses(X, g0).H3.holds


def test_variants_regimes(w):
    X = encode(w, n=12, seed=0).embeddings
    pure = rank_profile(run_stack(w, X, "pure-attention", depth=8, layer_index=1))
    res = [r.residual.ratio for r in pure.layers]
    assert res[-1] < 1e-8 * res[0] and pure.ranks[-1] == 1 and pure.affine_ranks[-1] == 0  # Dong's collapse
    skip = rank_profile(run_stack(w, X, "residual", depth=8, layer_index=1))
    assert skip.ranks[-1] == 12 and skip.layers[-1].residual.ratio > 0.1
    layer = w.layer(2)

    def ffn(Z):
        return torch.nn.functional.gelu(Z @ layer["W_in"] + layer["b_in"]) @ layer["W_out"] + layer["b_out"]

    A = torch.softmax((torch.einsum("nd,hdk->hnk", X, layer["W_Q"]) + layer["b_Q"][:, None])
                      @ (torch.einsum("nd,hdk->hnk", X, layer["W_K"]) + layer["b_K"][:, None]).mT
                      / math.sqrt(w.d_head), -1)
    V = torch.einsum("nd,hdk->hnk", X, layer["W_V"]) + layer["b_V"][:, None]
    Z = (A @ V @ layer["W_O"]).sum(0) + layer["b_O"]  # written out independently of the forward
    assert torch.allclose(pure_attention(X, layer), Z, atol=1e-12)
    assert torch.allclose(attention_mlp(X, layer), ffn(Z), atol=1e-12)
    assert torch.allclose(full_block(X, layer, ln=False), X + Z + ffn(X + Z), atol=1e-12)


def test_measure_all_reuses_the_real_forward(w):
    rep = measure_all(w, n=10, seed=2, variants=("full", "residual"))
    tr = encode(w, n=10, seed=2)
    assert rep.profiles["full"].ranks == [numerical_rank(h).rank for h in tr.hidden_states]
    assert np.allclose(rep.asymmetry.alpha, asymmetry(w).alpha, rtol=1e-13, atol=0)
    assert rep.wo.ranks == wo_conditioning(w).ranks
    assert rep.heads[4].dim_sum.rank == head_subspaces(tr.layers[4]).dim_sum.rank
    assert rep.ln[1]["ln2"].H2.value == ln_hypotheses(tr.layers[1].pre_ln2, w.ln2_w[1]).H2.value
    d = rep.to_dict()
    assert d["profiles"]["residual"]["layers"][0]["rank"]["dtype"] == "float64"
    assert d["memory"]["peak_rss_mib"] > 0


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 24), extra=st.integers(0, 12), decades=st.floats(0.0, 9.0), seed=st.integers(0, 2 ** 16),
       exponent=st.sampled_from([0, 0, -520, -300, 300, 520]))
def test_full_row_rank_certificate_never_overstates(m, extra, decades, seed, exponent):
    """Whenever the Cholesky certificate answers, the SVD agrees: full rank, sigma_min above the proved bound.

    Scaled by 2^exponent too: at 2^-520 the squares are subnormal, at 2^520 they overflow;
    there the certificate must decline rather than answer from lost digits.
    """
    from symtrans.numeric.linalg import full_row_rank_certificate

    g = torch.Generator().manual_seed(seed)
    n = m + extra
    U = torch.linalg.qr(torch.randn(m, m, generator=g, dtype=D64))[0]
    V = torch.linalg.qr(torch.randn(n, m, generator=g, dtype=D64))[0]
    s = torch.logspace(0, -decades, m, dtype=D64) * 3.0 * 2.0 ** exponent
    M = (U * s) @ V.T
    rec = full_row_rank_certificate(M)
    svd = numerical_rank(M)
    if rec is not None:
        assert rec.rank == m == svd.rank and svd.decisive
        assert float(torch.linalg.svdvals(M)[-1]) >= rec.sigma_above * (1 - 1e-12)
        assert rec.cut >= svd.cut and rec.margin <= svd.margin + 1e-9
    elif decades <= 3 and abs(exponent) < 200:  # well conditioned, well scaled: the certificate goes through
        pytest.fail(f"no certificate for a matrix of condition 10^{decades:.1f}")


def test_full_row_rank_certificate_refuses_deficient_and_wide_cases():
    from symtrans.numeric.linalg import full_row_rank_certificate

    g = torch.Generator().manual_seed(3)
    M = torch.randn(6, 9, generator=g, dtype=D64)
    M[4] = 2 * M[1] - M[0]  # exactly dependent rows
    assert full_row_rank_certificate(M) is None
    M[4] += 1e-10 * torch.randn(9, generator=g, dtype=D64)  # within the squared problem's reach: refused, not guessed
    assert full_row_rank_certificate(M) is None
    assert full_row_rank_certificate(torch.randn(5, 3, dtype=D64)) is None  # more rows than columns
    with pytest.raises(ValueError):
        full_row_rank_certificate(torch.randn(2, 3))  # float32: the bounds assume float64


@pytest.mark.parametrize("n", [6, 24])
def test_head_subspaces_qr_route_equals_the_svd_route(w, n):
    """K_h from a QR of Y^h and W_O^h gives the SVD route's dims, sum, angles; a silenced head shows in both."""
    tr = encode(w, n=n, seed=1)
    for i in (1, 4):
        lt, W_O = tr.layers[i], w.layer(i)["W_O"].clone()
        for silenced in (False, True):
            if silenced:  # head 2 writes nothing: dim R_2 = 0 on both routes, the sum loses its directions
                W_O[2] = 0
                lt = type("T", (), {"Y": lt.Y, "YO": lt.Y @ W_O, "mha": (lt.Y @ W_O).sum(0)})()
            a, b = head_subspaces(lt, layer=i), head_subspaces(lt, layer=i, W_O=W_O)
            assert a.dim_R == b.dim_R and a.dim_sum.rank == b.dim_sum.rank and a.kappa == b.kappa
            assert (b.dim_R[2] == 0) is silenced
            for ra, rb in zip(a.overlap, b.overlap):
                assert max(abs(x - y) for x, y in zip(ra, rb)) < 1e-9
            assert all(x.decisive for x in b.dim_R_records)


def test_head_subspaces_certificate_and_svd_routes_agree(trace):
    """The layer's stacked bases: the Cholesky certificate's rank equals the SVD's."""
    lt = trace.layers[1]
    rec = head_subspaces(lt, layer=1)
    U = torch.linalg.svd(lt.YO, full_matrices=False)[2]
    bases = torch.cat([U[h, :r] for h, r in enumerate(rec.dim_R)])
    assert rec.dim_sum.rank == numerical_rank(bases).rank
    if "Cholesky" in rec.dim_sum.precision:
        assert rec.dim_sum.rank == sum(rec.dim_R)


@settings(max_examples=40, deadline=None)
@given(batch=st.sampled_from([(), (3,), (2, 1)]), m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9),
       dtype=st.sampled_from([torch.float64, torch.float32]), seed=st.integers(0, 2 ** 16),
       transpose=st.booleans())
def test_matmul_routed_through_numpy_is_the_product(batch, m, k, n, dtype, seed, transpose):
    """symtrans.numeric.linalg.matmul (NumPy's BLAS for CPU float blocks) gives ``a @ b``: same shape and dtype,
    every entry within the bound of one k-term dot product (gamma_k sum |a||b|), strided inputs included; the
    bound is checked against an exact (float64 of exact products of the float32 inputs, or math.fsum) reference."""
    from symtrans.numeric.linalg import matmul
    from symtrans.precision import unit_roundoff

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, k, m, generator=g, dtype=dtype).mT if transpose else \
        torch.randn(*batch, m, k, generator=g, dtype=dtype)
    b = torch.randn(k, n, generator=g, dtype=dtype)
    c = matmul(a, b)
    assert c.shape == (a @ b).shape and c.dtype == dtype
    A, B = a.to(torch.float64).numpy(), b.to(torch.float64).numpy()
    exact = np.array([math.fsum(A[idx][i, j] * B[j, l] for j in range(k))
                      for idx in np.ndindex(*batch) for i in range(m) for l in range(n)]).reshape(c.shape)
    bound = (np.abs(A) @ np.abs(B)) * k * unit_roundoff(dtype) * 1.01 + 1e-300
    assert (np.abs(c.numpy().astype(np.float64) - exact) <= bound).all()


def test_matmul_leaves_what_it_does_not_route_to_the_operator():
    """An outer product (inner dimension 1), a tensor that needs a gradient, a bfloat16 block and a SymPy matrix
    are multiplied by ``@`` (the gradient kept; SymPy exact)."""
    import sympy as sp

    from symtrans.numeric.linalg import matmul

    u, v = torch.ones(3, 1, dtype=torch.float64), torch.ones(1, 4, dtype=torch.float64)
    assert matmul(u, v).shape == (3, 4)
    w = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    assert matmul(w, w).requires_grad
    h = torch.ones(2, 2, dtype=torch.bfloat16)
    assert matmul(h, h).dtype == torch.bfloat16
    assert matmul(sp.Matrix([[1, 2]]), sp.Matrix([[3], [sp.Rational(1, 2)]])) == sp.Matrix([[4]])
