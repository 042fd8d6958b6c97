"""Fibre and subspace dimensions of the registry against explicit matrices.

Each map is written as plain code (``Y.sum(axis=0)``, ``Z @ W_O``, ``A X W_V W_O``),
turned into a matrix by applying it to the standard basis of its domain, and its
rank is computed twice: exactly (SymPy ``DomainMatrix`` over QQ, integer or
rational entries) and numerically (float64 SVD, :func:`numerical_rank`, whose
record must agree with the exact rank with a margin of several decades). The
registry's numbers (``formula(...)``) are compared with those ranks; nothing here
retypes a formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import sympy as sp
from sympy.polys.matrices import DomainMatrix

from symtrans.arch import Architecture, get_arch
from symtrans.formulas import formula
from symtrans.numeric.linalg import RankRecord, numerical_rank

# Integer and small-rational matrices of these sizes: the dropped singular values are
# rounding noise (~1e-16 x sigma_max), the kept ones at least ~1e-4 x sigma_max. The float64
# cut max(m, n) * eps sits just above the noise, so its own margin is about one decade; what
# makes the decision safe is the gap between the last kept and the first dropped singular
# value: we demand 8 decades (any cut inside it gives the same rank), and the exact rank.
MIN_GAP_DECADES = 8.0
MIN_MARGIN_DECADES = 0.5


def toy(n: int, H: int, d_v: int, d_model: int, L: int = 1) -> Architecture:
    """A small architecture with independent head width (H * d_v may differ from d_model)."""
    return Architecture(name="toy", family="custom", n=n, L=L, H=H, H_kv=H, d_model=d_model,
                        d_k=d_v, d_v=d_v, d_ff=4 * d_model, vocab_size=10, max_positions=n,
                        head_dim_tied=False)


def matrix_of(linear_map: Callable[[np.ndarray], np.ndarray], in_shape: tuple[int, ...]) -> sp.Matrix:
    """The matrix of ``linear_map`` (columns = images of the standard basis), exactly."""
    size = math.prod(in_shape)
    columns = []
    for j in range(size):
        e = np.zeros(size, dtype=object)
        e[j] = sp.Integer(1)
        columns.append(np.asarray(linear_map(e.reshape(in_shape)), dtype=object).ravel())
    return sp.Matrix(np.stack(columns, axis=1).tolist())


def rank_twice(M: sp.Matrix) -> int:
    """Exact rank over QQ, checked against the float64 SVD rank and its margin."""
    exact = DomainMatrix.from_Matrix(M).convert_to(sp.QQ).rank()
    rec = safe_numerical_rank(np.array(M.evalf(20).tolist(), dtype=np.float64))
    assert rec.rank == exact, rec
    return exact


def safe_numerical_rank(M: np.ndarray) -> RankRecord:
    """float64 numerical rank whose decision is far from fragile (see the constants above)."""
    rec = numerical_rank(M)
    assert rec.dtype == "float64"
    assert rec.margin >= MIN_MARGIN_DECADES, rec
    if rec.sigma_above is not None and rec.sigma_below is not None:
        assert math.log10(rec.sigma_above / max(rec.sigma_below, 1e-300)) >= MIN_GAP_DECADES, rec
    return rec


def nullity(M: sp.Matrix) -> int:
    return M.cols - rank_twice(M)


def random_int(rng: np.random.Generator, rows: int, cols: int, lo: int = -4, hi: int = 4) -> sp.Matrix:
    return sp.Matrix(rng.integers(lo, hi + 1, size=(rows, cols)).tolist())


def random_stochastic(rng: np.random.Generator, n: int) -> sp.Matrix:
    """A row-stochastic n x n matrix with positive rational entries (like softmax)."""
    P = rng.integers(1, 10, size=(n, n))
    return sp.Matrix([[sp.Rational(int(p), int(row.sum())) for p in row] for row in P])


# (n, H, d_v): includes H = 1 (no ambiguity), n = 1 (one token) and d_v = 1
SUM_SIZES = [(1, 2, 1), (3, 2, 2), (2, 4, 3), (4, 3, 1), (2, 1, 3)]


@pytest.mark.parametrize("n,H,d_v", SUM_SIZES)
def test_recovery_ambiguity_is_the_fibre_of_the_head_sum(n: int, H: int, d_v: int) -> None:
    S = matrix_of(lambda Y: Y.sum(axis=0), (H, n, d_v))  # (Y^1..Y^H) -> sum_h Y^h
    fibre = nullity(S)
    assert formula("recovery-ambiguity", arch=toy(n, H, d_v, d_model=H * d_v)).value == fibre
    # the symbolic preset with the same sizes gives the same number (d_model, d_k left free)
    assert formula("recovery-ambiguity", arch="symbolic", n=n, H=H, d_v=d_v).value == fibre


@pytest.mark.parametrize("H,d_v", [(2, 1), (4, 3), (12, 2)])
def test_per_token_ambiguity_is_the_fibre_for_one_row(H: int, d_v: int) -> None:
    S1 = matrix_of(lambda Y: Y.sum(axis=0), (H, 1, d_v))
    value = formula("recovery-ambiguity-per-token", arch=toy(5, H, d_v, d_model=3)).value
    assert value == nullity(S1)
    # and n rows: the fibre of the n-row map is n times the per-token fibre
    Sn = matrix_of(lambda Y: Y.sum(axis=0), (H, 3, d_v))
    assert 3 * value == nullity(Sn)


@pytest.mark.parametrize("L,n,H,d_v", [(2, 2, 3, 1), (3, 1, 2, 2)])
def test_model_ambiguity_is_the_fibre_of_all_layers_sums(L: int, n: int, H: int, d_v: int) -> None:
    S = matrix_of(lambda Y: Y.sum(axis=1), (L, H, n, d_v))  # each layer sums its own heads
    assert formula("recovery-ambiguity-model", arch=toy(n, H, d_v, d_model=4, L=L)).value == nullity(S)


# (n, H, d_v, d_model, inner rank of W_O or None for a generic W_O):
# square (H d_v = d_model), wide (H d_v > d_model), tall (H d_v < d_model), rank-deficient
WO_CASES = [(2, 2, 2, 4, None), (2, 3, 2, 4, None), (3, 2, 2, 6, None), (2, 3, 2, 5, 2), (2, 2, 3, 6, 4),
            (1, 4, 1, 4, 1)]


@pytest.mark.parametrize("n,H,d_v,d_model,inner", WO_CASES)
def test_wo_fibre_is_the_fibre_of_z_times_wo(n: int, H: int, d_v: int, d_model: int, inner: int | None) -> None:
    rng = np.random.default_rng(1000 * n + 100 * H + 10 * d_v + d_model)
    if inner is None:
        W_O = random_int(rng, H * d_v, d_model)
    else:  # a product through a narrow inner dimension: rank <= inner
        W_O = random_int(rng, H * d_v, inner) * random_int(rng, inner, d_model)
    W = np.array(W_O.tolist(), dtype=object)
    Z_map = matrix_of(lambda Z: Z.dot(W), (n, H * d_v))  # Z -> Z W_O on R^{n x H d_v}
    fibre = nullity(Z_map)
    rank_WO = rank_twice(W_O)
    arch = toy(n, H, d_v, d_model)
    assert formula("wo-fibre", arch=arch, rank_WO=rank_WO).value == fibre
    if inner is None:
        # this draw is generic: the default rank min(H d_v, d_model) is the true one
        assert rank_WO == min(H * d_v, d_model)
        assert formula("wo-fibre", arch=arch).value == fibre
    else:
        assert rank_WO < min(H * d_v, d_model)  # the case is really rank-deficient
        assert formula("wo-fibre", arch=arch).value < fibre


def test_wo_fibre_for_bert_base() -> None:
    a = get_arch("bert-base")
    # square stacked W_O (H d_v = d_model): invertible generically, so nothing is lost
    assert a.H * a.d_v == a.d_model and formula("wo-fibre", arch=a).value == 0
    # one lost direction of W_O loses one coordinate per token
    assert formula("wo-fibre", arch=a, rank_WO=a.d_model - 1).value == a.n


def mha_sum(rng: np.random.Generator, n: int, H: int, d_v: int, d_model: int,
            X: sp.Matrix) -> tuple[sp.Matrix, list[sp.Matrix]]:
    """sum_h A^h X W_V^h W_O^h with stochastic A^h and integer weights; also the head terms."""
    terms = [random_stochastic(rng, n) * X * random_int(rng, d_model, d_v) * random_int(rng, d_v, d_model)
             for _ in range(H)]
    return sum(terms, sp.zeros(n, d_model)), terms


# (n, H, d_v, d_model): n smallest, H d_v smallest, d_model smallest, H d_v != d_model
MHA_SIZES = [(3, 2, 3, 8), (10, 2, 2, 8), (9, 4, 3, 6), (6, 3, 2, 6)]


@pytest.mark.parametrize("n,H,d_v,d_model", MHA_SIZES)
def test_mha_rank_bound_is_attained_by_a_generic_mha_sum(n: int, H: int, d_v: int, d_model: int) -> None:
    rng = np.random.default_rng(n * H * d_v * d_model)
    X = random_int(rng, n, d_model)
    assert rank_twice(X) == min(n, d_model)
    M, _ = mha_sum(rng, n, H, d_v, d_model, X)
    assert rank_twice(M) == formula("mha-rank-bound", arch=toy(n, H, d_v, d_model)).value


def test_mha_rank_bound_with_softmax_attention_float64() -> None:
    """The same with real softmax attention on Gaussian data (numeric route only)."""
    rng = np.random.default_rng(7)
    for n, H, d_v, d_model in MHA_SIZES:
        X = rng.standard_normal((n, d_model))
        M = np.zeros((n, d_model))
        for _ in range(H):
            Wq, Wk = rng.standard_normal((2, d_model, d_v))
            scores = X @ Wq @ (X @ Wk).T / math.sqrt(d_v)
            A = np.exp(scores - scores.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            M += A @ X @ rng.standard_normal((d_model, d_v)) @ rng.standard_normal((d_v, d_model))
        rec = safe_numerical_rank(M)
        assert rec.rank == formula("mha-rank-bound", arch=toy(n, H, d_v, d_model)).value


# (n, d_model, d_v, rank of X): rank X < d_v, rank X > d_v, full-rank X, n < d_v
HEAD_CASES = [(8, 6, 4, 3), (8, 6, 2, 4), (8, 6, 3, 6), (2, 6, 4, 2)]


@pytest.mark.parametrize("n,d_model,d_v,r", HEAD_CASES)
def test_head_subspace_dim_is_the_rank_of_one_head_term(n: int, d_model: int, d_v: int, r: int) -> None:
    rng = np.random.default_rng(n + 10 * d_model + 100 * d_v + 1000 * r)
    X = random_int(rng, n, r) * random_int(rng, r, d_model)
    rank_X = rank_twice(X)
    assert rank_X == r
    _, terms = mha_sum(rng, n, 1, d_v, d_model, X)
    dim_R = rank_twice(terms[0])  # dim R_h = rank of Y^h W_O^h (row space dimension)
    arch = toy(n, 2, d_v, d_model)
    assert formula("head-subspace-dim", arch=arch, rank_X=rank_X).value == dim_R
    if rank_X == min(n, d_model):  # full-rank input: the generic default applies
        assert formula("head-subspace-dim", arch=arch).value == dim_R


@pytest.mark.parametrize("n,H,d_v,d_model", [(8, 2, 2, 6), (8, 3, 3, 6), (4, 2, 3, 8)])
def test_contracted_dim_default_matches_generic_heads(n: int, H: int, d_v: int, d_model: int) -> None:
    """kappa = sum dim R_h - dim(R_1 + ... + R_H), measured on generic weights."""
    rng = np.random.default_rng(n + H + d_v + d_model)
    X = random_int(rng, n, d_model)
    _, terms = mha_sum(rng, n, H, d_v, d_model, X)
    dims = [rank_twice(T) for T in terms]
    dim_sum = rank_twice(sp.Matrix.vstack(*terms))  # row space of the stack = sum of row spaces
    kappa = sum(dims) - dim_sum
    assert formula("contracted-dim", arch=toy(n, H, d_v, d_model)).value == kappa


def test_mha_rank_can_be_below_the_sum_of_head_subspaces() -> None:
    """prop-6.2's identity rank MHA = dim(sum R_h) fails when n < dim(sum R_h)."""
    n, H, d_v, d_model = 3, 3, 2, 6
    rng = np.random.default_rng(3)
    X = random_int(rng, n, d_model)
    M, terms = mha_sum(rng, n, H, d_v, d_model, X)
    assert rank_twice(M) == formula("mha-rank-bound", arch=toy(n, H, d_v, d_model)).value == n
    assert rank_twice(sp.Matrix.vstack(*terms)) == d_model > n
