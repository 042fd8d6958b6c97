"""Polynomial conditions: exact witnesses for generic rank statements, and fibre dimensions.

The argument, carried out mechanically: a statement "rank M(theta) > k for
generic theta", with M polynomial in the parameters theta, fails exactly on the
common zero set of the (k+1)-minors of M(theta), an algebraic set. An algebraic
set is either everything or a proper subset of Lebesgue measure zero, so one
exact witness theta* with rank M(theta*) > k certifies the statement.
:func:`certify_generic_rank` searches a family for such a witness and refuses
(returns ``certified=False``) when none is found.

Examples
--------
>>> c = certify_generic_rank("rank(A + B) > 1", lambda B: [[1 + B[0], 0], [0, B[1]]], 1,
...                          [(0, 0), (0, 1)])
>>> c.certified, c.witness, c.rank
(True, (0, 1), 2)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from symtrans.certify.exact import P, kron, nonzero_minor, rank_mod_p, rank_q, triangular_rank
from symtrans.certify.search import Check, Family

__all__ = [
    "GenericRankCertificate", "certify_generic_rank", "random_int_matrix", "random_int_array", "low_rank_int_matrix",
    "canonical", "prop51_witness", "head_subspace_rank", "block_head_witness_rank", "matmul_mod_p",
    "summation_fibre", "wo_fibre", "kron_rank_rule_holds", "check_rank_sum", "rank_sum_families",
    "stratum_dimension",
]


@dataclass
class GenericRankCertificate:
    """Outcome of :func:`certify_generic_rank`: the witness (if any) and its exact rank.

    Examples
    --------
    >>> GenericRankCertificate("s", 1, certified=False, tried=3).to_dict()["certified"]
    False
    """

    statement: str
    bound: int
    certified: bool
    tried: int
    witness: Any = None
    rank: int | None = None
    method: str = ""
    minor: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict.

        Examples
        --------
        >>> sorted(GenericRankCertificate("s", 0, True, 1, rank=1).to_dict())[:3]
        ['bound', 'certified', 'extra']
        """
        return {"statement": self.statement, "bound": self.bound, "certified": self.certified,
                "tried": self.tried, "rank": self.rank, "method": self.method, "minor": self.minor,
                "extra": self.extra}


def certify_generic_rank(statement: str, build: Callable[[Any], Any], bound: int,
                         candidates: Iterable[Any], *, exact_limit: int = 40) -> GenericRankCertificate:
    """Certify "rank build(theta) > bound for generic theta" by one exact witness, or refuse.

    ``build`` maps a parameter point to a rational matrix, polynomially. Small
    matrices (both sides <= ``exact_limit``) are ranked over Q with a non-zero
    minor recorded; larger ones mod p = 2^31 - 1, which certifies a lower bound.

    Examples
    --------
    >>> certify_generic_rank("rank(t I) > 1", lambda t: [[t, 0], [0, t]], 1, [0, 0]).certified
    False
    """
    tried = 0
    for theta in candidates:
        tried += 1
        M = build(theta)
        m, n = len(M), len(M[0])
        if max(m, n) <= exact_limit:
            r, method = rank_q(M), "exact rank over Q (fraction-free elimination)"
        else:
            r, method = rank_mod_p(M), (f"rank over GF(p), p = {P}: a minor non-zero mod p is non-zero over Q, "
                                        "so rank_Q >= rank_p")
        if r > bound:
            minor = nonzero_minor(M).to_dict() if max(m, n) <= exact_limit else None
            return GenericRankCertificate(statement, bound, True, tried, theta, r, method, minor)
    return GenericRankCertificate(statement, bound, False, tried, method="no witness found among the candidates")


def random_int_matrix(m: int, n: int, rng: random.Random, lo: int = -3, hi: int = 3) -> list[list[int]]:
    """A pseudo-random integer matrix with entries in [lo, hi] (nested lists; small sizes).

    Examples
    --------
    >>> random_int_matrix(1, 3, random.Random(0))
    [[3, 0, 3]]
    """
    return [[rng.randint(lo, hi) for _ in range(n)] for _ in range(m)]


def random_int_array(m: int, n: int, rng: random.Random, lo: int = -3, hi: int = 3) -> Any:
    """A pseudo-random int64 numpy matrix with entries in [lo, hi], seeded from ``rng`` (large sizes).

    Examples
    --------
    >>> random_int_array(2, 3, random.Random(0)).shape
    (2, 3)
    """
    import numpy as np

    return np.random.default_rng(rng.getrandbits(63)).integers(lo, hi + 1, size=(m, n), dtype=np.int64)


def low_rank_int_matrix(m: int, n: int, r: int, rng: random.Random) -> Any:
    """U V with U m x r, V r x n random integers (int64 array): rank <= r by construction (= r generically).

    Examples
    --------
    >>> rank_q(low_rank_int_matrix(4, 5, 2, random.Random(1)).tolist())
    2
    """
    import numpy as np

    U, V = random_int_array(m, r, rng), random_int_array(r, n, rng)
    bound = r * int(np.abs(U).max(initial=0)) * int(np.abs(V).max(initial=0))
    if bound < 2 ** 53:  # every partial sum an integer below 2^53: the float64 (BLAS) product is exact
        return (U.astype(np.float64) @ V.astype(np.float64)).astype(np.int64)
    return U @ V  # numpy's integer product (no BLAS: several times slower)


def canonical(m: int, n: int, r: int) -> list[list[int]]:
    """E_r: the m x n matrix with I_r in the top-left corner, zeros elsewhere.

    Every rank-r matrix is U E_r V with U, V invertible, which is how witnesses at
    E_r lift to all inputs of rank r.

    Examples
    --------
    >>> canonical(2, 3, 1)
    [[1, 0, 0], [0, 0, 0]]
    """
    return [[int(i == j and i < r) for j in range(n)] for i in range(m)]


def prop51_witness(n: int, d: int, r: int) -> int:
    """Exact rank of E_r + e_{r+1} e_{r+1}^T (n x d): the block witness for prop-5.1 at any sizes.

    For A = U E_r V of rank r, B* = U e_{r+1} e_{r+1}^T V gives rank(A + B*) = r + 1.

    Examples
    --------
    >>> prop51_witness(3, 4, 2)
    3
    """
    M = canonical(n, d, r)
    M[r][r] += 1
    return rank_q(M)


def matmul_mod_p(A: Any, B: Any, p: int = P) -> Any:
    """Exact product mod p of two matrices reduced mod p (int64 arrays), without overflow.

    Examples
    --------
    >>> import numpy as np
    >>> matmul_mod_p(np.array([[P - 1]]), np.array([[P - 1]])).tolist()  # (-1) * (-1)
    [[1]]
    """
    import numpy as np

    A = np.asarray(A, dtype=np.int64) % p
    B = np.asarray(B, dtype=np.int64) % p
    out = np.zeros((A.shape[0], B.shape[1]), dtype=np.int64)
    for k in range(A.shape[1]):
        out = (out + np.outer(A[:, k], B[k]) % p) % p
    return out


def head_subspace_rank(W_V: Any, W_O: Any, r: int) -> int:
    """Rank of E_r W_V W_O, i.e. of W_V[:r] W_O, computed mod p from exact (float/rational) weights.

    With X = E_r and A^h invertible, this is dim R_h (prop-6.3); mod p gives a
    certified lower bound, and min(r, d_k) is an upper bound, so reaching it certifies equality.

    Examples
    --------
    >>> head_subspace_rank([[1, 0], [0, 1], [1, 1]], [[1, 0, 0], [0, 1, 0]], 3)
    2
    """
    from symtrans.certify.exact import to_mod_p

    import numpy as np

    def red(W: Any) -> Any:
        if isinstance(W, np.ndarray) and W.dtype == np.int64 and W.min(initial=0) >= 0 and W.max(initial=0) < P:
            return W  # already reduced
        return to_mod_p(np.asarray(W) if not isinstance(W, list) else W)

    from flint import nmod_mat

    A, B = red(W_V)[:r], red(W_O)
    if 0 in A.shape or 0 in B.shape:
        return 0
    # the product and its rank in Z/p by flint, without a round trip through numpy (as matmul_mod_p then
    # rank_mod_p): the same exact arithmetic mod p
    prod = nmod_mat(*A.shape, A.ravel().tolist(), P) * nmod_mat(*B.shape, B.ravel().tolist(), P)
    return int(prod.rank())


def block_head_witness_rank(n: int, d_model: int, d_k: int, r: int) -> int:
    """Exact rank of E_r W_V W_O for the block witness W_V = [I; 0], W_O = [I 0] (any sizes, d_k <= d_model).

    The product is E_{min(r, d_k)}, so the rank is min(r, d_k) at every size; this
    function checks it by exact elimination at the given size.

    Examples
    --------
    >>> block_head_witness_rank(5, 6, 2, 3), block_head_witness_rank(5, 6, 4, 3)
    (2, 3)
    """
    from symtrans.certify.exact import matmul

    Wv = canonical(d_model, d_k, d_k)
    Wo = canonical(d_k, d_model, d_k)
    return rank_q(matmul(matmul(canonical(n, d_model, r), Wv), Wo))


def kron_rank_rule_holds(A: Any, B: Any) -> bool:
    """Check rank(A (x) B) = rank(A) rank(B) exactly on one pair (the rule behind the fibre counts).

    Examples
    --------
    >>> kron_rank_rule_holds([[1, 1, 1]], [[1, 0], [0, 1]])
    True
    """
    return rank_q(kron(A, B)) == rank_q(A) * rank_q(B)


def summation_fibre(n: int, H: int, d_v: int, *, explicit: bool = False) -> int:
    """Fibre dimension of (Y^1..Y^H) -> sum_h Y^h on (R^{n x d_v})^H: H n d_v - rank(1_H^T (x) I_{n d_v}).

    ``explicit=False`` uses rank(A (x) B) = rank A rank B with the small factor
    ranked exactly; ``explicit=True`` builds the full matrix (small sizes only).

    Examples
    --------
    >>> summation_fibre(3, 4, 2), summation_fibre(3, 4, 2, explicit=True)
    (18, 18)
    """
    ones = [[1] * H]
    m = n * d_v
    if explicit:
        rank = rank_q(kron(ones, canonical(m, m, m)))
    else:
        rank = rank_q(ones) * m
    return H * m - rank


def wo_fibre(n: int, W_O: Any, *, explicit: bool = False) -> tuple[int, int]:
    """(rank W_O, fibre dimension of Z -> Z W_O on R^{n x H d_v}) = (rank, n (H d_v - rank W_O)).

    vec(Z W_O) = (W_O^T (x) I_n) vec(Z), so the map's rank is n rank(W_O).
    Large W_O are ranked by :func:`~symtrans.certify.exact.triangular_rank` where their leading square block
    is triangular with a non-zero diagonal (the identity witness), else mod p: full rank mod p certifies full rank.

    Examples
    --------
    >>> wo_fibre(2, [[1, 2], [2, 4]]), wo_fibre(2, [[1, 2], [2, 4]], explicit=True)
    ((1, 2), (1, 2))
    """
    import numpy as np

    if isinstance(W_O, list):
        rows, cols = len(W_O), len(W_O[0])
    else:
        rows, cols = np.asarray(W_O).shape
    if explicit:
        Wt = [list(c) for c in zip(*W_O)]
        rk = rank_q(kron(Wt, canonical(n, n, n)))
        return rk // n, n * rows - rk
    if rows <= 40:
        rk = rank_q(W_O if isinstance(W_O, list) else W_O.tolist())
    else:  # a triangular witness (the identity) is ranked by its diagonal; anything else mod p
        rk = triangular_rank(W_O) or rank_mod_p(W_O)
    return rk, n * (rows - rk)


def stratum_dimension(n: int, d: int, r: int, seed: int = 0) -> int:
    """Dimension of the rank-r stratum of R^{n x d}: exact rank of the differential of (U, V) -> U V^T.

    At a point where U and V have full column rank the map is a submersion onto
    the stratum, so the rank of its Jacobian is the stratum's dimension,
    r (n + d - r); checked here by exact elimination.

    Examples
    --------
    >>> stratum_dimension(4, 3, 1), 1 * (4 + 3 - 1)
    (6, 6)
    """
    rng = random.Random(seed)
    U = random_int_matrix(n, r, rng)
    V = random_int_matrix(d, r, rng)
    rows = []
    for i in range(n):
        for j in range(d):  # d(UV^T)_{ij} = sum_k dU_{ik} V_{jk} + U_{ik} dV_{jk}
            row = [0] * (r * (n + d))
            for k in range(r):
                row[i * r + k] = V[j][k]
                row[n * r + j * r + k] = U[i][k]
            rows.append(row)
    return rank_q(rows)


# ----------------------------------------------------------- lem-rank-sum
def check_rank_sum(A: Any, B: Any) -> Check:
    """Exact check of |rank A - rank B| <= rank(A + B) <= rank A + rank B.

    Examples
    --------
    >>> check_rank_sum([[1, 0], [0, 0]], [[-1, 0], [0, 1]]).details
    {'rank_A': 1, 'rank_B': 2, 'rank_A_plus_B': 1}
    """
    ra, rb = rank_q(A), rank_q(B)
    S = [[a + b for a, b in zip(x, y)] for x, y in zip(A, B)]
    rs = rank_q(S)
    return Check(True, abs(ra - rb) <= rs <= ra + rb, {"rank_A": ra, "rank_B": rb, "rank_A_plus_B": rs})


def rank_sum_families(seed: int = 0, count: int = 200) -> list[Family]:
    """Exhaustive 2x2 pairs over {-1,0,1}, and random 3x4 integer pairs of every rank combination.

    Examples
    --------
    >>> [f.name for f in rank_sum_families(count=2)]
    ['2x2 {-1,0,1}', '3x4 low-rank']
    """
    import itertools

    mats = [[list(t[:2]), list(t[2:])] for t in itertools.product((-1, 0, 1), repeat=4)]
    rng = random.Random(seed)

    def low() -> Iterable[tuple[Any, ...]]:
        for k in range(count):
            ra, rb = k % 4, (k // 4) % 4
            A = low_rank_int_matrix(3, 4, ra, rng).tolist() if ra else [[0] * 4 for _ in range(3)]
            if rb and k % 3 == 0 and k % 2:  # B = -A: full cancellation
                B = [[-v for v in row] for row in A]
            else:
                B = low_rank_int_matrix(3, 4, rb, rng).tolist() if rb else [[0] * 4 for _ in range(3)]
            yield (A, B)

    return [Family("2x2 {-1,0,1}", "all 6561 pairs of 2x2 matrices with entries in {-1,0,1}",
                   ((A, B) for A in mats for B in mats)),
            Family("3x4 low-rank", f"{count} pairs of 3x4 integer matrices U V of ranks 0..3 each, "
                   "including B = -A", low())]

