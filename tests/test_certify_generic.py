"""Generic (witness) certificates: they certify true statements and refuse false ones."""

import random

from symtrans.certify.linear import (block_head_witness_rank, certify_generic_rank, low_rank_int_matrix,
                                     random_int_matrix, stratum_dimension, summation_fibre)
from symtrans.certify.softmax import Head, certify_residual_rank, random_heads, witness_X
from symtrans.certify.exact import matmul, rank_q


def test_false_generic_statement_is_refused():
    """B confined to colspace(A) and rowspace(A) (B = U C V for A = U V): rank(A + B) never exceeds r."""
    rng = random.Random(0)
    n, d, r = 5, 6, 2
    U, V = random_int_matrix(n, r, rng), random_int_matrix(r, d, rng)
    A = matmul(U, V)
    assert rank_q(A) == r

    def build(C):
        B = matmul(matmul(U, C), V)
        return [[a + b for a, b in zip(x, y)] for x, y in zip(A, B)]

    cert = certify_generic_rank("rank(A + U C V) > r", build, r, (random_int_matrix(r, r, rng) for _ in range(40)))
    assert not cert.certified and cert.tried == 40
    # the same machinery certifies the true statement with unconstrained B
    ok = certify_generic_rank("rank(A + B) > r", lambda B: [[a + b for a, b in zip(x, y)] for x, y in zip(A, B)],
                              r, (random_int_matrix(n, d, rng) for _ in range(3)))
    assert ok.certified and ok.rank > r and ok.minor["size"] == ok.rank


def test_degenerate_softmax_witness_is_refused():
    n, d = 4, 3
    zero_value = Head.from_arrays([[1, 0], [0, 1], [1, 1]], [[1, 0], [0, 1], [1, 1]], [[0, 0]] * 3, [[0, 0, 0]] * 2)
    assert not certify_residual_rank(witness_X(n, d, 1), [zero_value]).certified  # MHA = 0: F(X) = X
    # a full-rank X cannot gain rank: r + 1 > min(n, d), no such minor exists
    full = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]
    assert not certify_residual_rank(full, random_heads(d, 2, 2, random.Random(1))).certified


def test_softmax_certificate_matches_float_rank():
    """An independent float64 SVD agrees with each certified strict increase at small sizes."""
    import numpy as np

    from symtrans.certify.softmax import _float_F

    heads = random_heads(5, 2, 2, random.Random(3))
    for r in range(1, 4):
        X = witness_X(5, 5, r)
        assert certify_residual_rank(X, heads).certified
        s = np.linalg.svd(_float_F(X, heads), compute_uv=False)
        assert s[r] / s[0] > 1e-8 and s[r + 1] / s[0] < 1e-12  # rank r + 1 exactly: zero rows coincide


def test_block_witness_and_stratum_dimension():
    assert [block_head_witness_rank(4, 5, k, 3) for k in (1, 2, 3, 4)] == [1, 2, 3, 3]
    for n, d, r in [(3, 4, 1), (4, 4, 2), (5, 3, 2)]:
        assert stratum_dimension(n, d, r) == r * (n + d - r)
    assert summation_fibre(2, 3, 2) == summation_fibre(2, 3, 2, explicit=True) == 2 * 2 * 2
    assert rank_q(low_rank_int_matrix(6, 6, 3, random.Random(2)).tolist()) == 3


def test_low_rank_product_in_float64_equals_the_integer_product():
    """The BLAS product of the integer factors is exact (partial sums below 2^53): equal to numpy's int64 product."""
    from symtrans.certify.linear import random_int_array

    for m, n, r in [(512, 768, 256), (6, 5, 3), (3, 4, 1)]:
        got = low_rank_int_matrix(m, n, r, random.Random(9))
        rng = random.Random(9)
        want = random_int_array(m, r, rng) @ random_int_array(r, n, rng)
        assert got.dtype == want.dtype and (got == want).all()


def test_head_subspace_rank_by_flint_equals_the_numpy_route_and_sees_a_deficient_w_o():
    """rank(W_V[:r] W_O) mod p by flint's product equals matmul_mod_p then rank_mod_p; a rank-2 W_O caps it at 2."""
    import numpy as np

    from symtrans.certify.exact import rank_mod_p, to_mod_p
    from symtrans.certify.linear import head_subspace_rank, matmul_mod_p, random_int_array

    rng = random.Random(4)
    for d, k in [(96, 16), (7, 3)]:
        for r in (1, k // 2 or 1, k, 2 * k):
            W_V, W_O = random_int_array(d, k, rng), random_int_array(k, d, rng)
            assert head_subspace_rank(W_V, W_O, r) == rank_mod_p(matmul_mod_p(to_mod_p(W_V)[:r], to_mod_p(W_O)))
    W_O = np.zeros((16, 96), dtype=np.int64)
    W_O[0, 0] = W_O[1, 5] = 1  # rank 2: the product's rank is at most 2 whatever r (the false case of "= min(r, d_k)")
    assert head_subspace_rank(random_int_array(96, 16, rng), W_O, 16) == 2
