"""A deliberately small, independent checker for certificate files; it fails closed.

Trusted code base (docs/certificates.md): this module, :mod:`symtrans.checker.statements`
(the trusted statement registry), :mod:`symtrans.checker.reader` (its own reading of
config.json with :mod:`json` and of the tensors with the ``safetensors`` package),
python-flint (FLINT/Arb arithmetic), CPython's float -> integer ratio, and the
mathematical argument each registered statement names (e.g. a non-zero k x k minor
means rank >= k). It imports no producer and not the producers' loader.

What a certificate must satisfy, in order (anything else is INVALID, one line):

1. exactly the fields :data:`FIELDS`, schema :data:`SCHEMA`, and a digest that matches
   (the digest catches accidental edits; it is no signature);
2. a registered ``statement_id``; where the statement is about a model, the model is the
   one the caller names (``model``: a directory, or the bundled one), never one the
   certificate names, and its ``weights_hash`` (config.json and the weight files) must be
   that model's;
3. claim, reading, producer, statement text and scope equal to the registry's, and the
   witness and asserts cover exactly the registry's instances (every layer, every head, at
   the caller's n and seed, from the registry's input ids), naming the model's tensors;
4. every index, size, precision, modulus and entry range-checked before any arithmetic;
5. every asserted value recomputed from the witness with exact integer arithmetic
   (``fmpz_mat``, ``nmod_mat``) or rigorous balls (``arb``, ``arb_mat``) and compared.

Witness methods:

``exact-rank``       rank of each layer's stacked W_O: full rank mod a prime p (exact fallback up to 160)
``factor-minors``    rank(W_V^h W_O^h) = d_k from non-zero d_k x d_k minors of both factors (Sylvester)
``attention-det``    det exp(X W_Q W_K^T X^T / sqrt d_k) != 0 (A^h invertible), X exact input
``attention-det-ln`` the same at X = LayerNorm(word[ids] + pos[:n] + type[0]) (exact mean/variance, ball sqrt)
``residual-minor``   a non-zero (r+1)-minor of F(X*_r) = X*_r + sum_h A^h X*_r W_V^h W_O^h
``head-sum-rank``    every A^h invertible and dim(R_1 + ... + R_H) > n >= rank MHA(X) (inline weights)
``ln-affine-rank``   H1-H4 at an inline X and arank(LN X) > arank(X) (thm-4.2's affine part refuted)
``jacobian-rank``    dim ker J <= k = dim G (the formula) at an inline instance: a (P - k)-minor of J (a ball
                     forward with derivatives) excluding 0; G's tangents derived by the checker, exact rank k

Examples
--------
>>> verify_certificate({"schema": SCHEMA})[1].startswith("missing fields: statement_id, claim")
True
>>> verify_certificate([1])
(False, 'not a certificate object')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from symtrans.checker.reader import CheckedModel, ModelError, bundled_model_path, open_model
from symtrans.checker.statements import FREE, MAX_N, STATEMENTS, Dims, expected

__all__ = ["SCHEMA", "FIELDS", "MANIFEST", "digest", "verify_certificate", "check_header", "check_record",
           "manifest", "manifest_problems", "file_hash", "MAX_PRECISION", "completeness_forward", "completeness_tangents"]

SCHEMA = "symtrans-certificate/2"
FIELDS = ("schema", "statement_id", "claim", "reading", "producer", "statement", "scope", "asserts", "witness",
          "toolkit_version", "weights_hash", "digest")
#: ball precision (bits) a witness may ask for: 2^40 made flint allocate until it crashed
MIN_PRECISION, MAX_PRECISION = 16, 512
#: jacobian-rank's floor: its J v balls must be narrow enough that a wrong tangent vector shows
JACOBIAN_MIN_PRECISION = 64
#: an exact entry "p" or "p/q": at most this many digits each (a 3 MB digit string took a minute to parse)
MAX_DIGITS = 64
_ENTRY = re.compile(r"-?[0-9]{1,%d}(/[0-9]{1,%d})?" % (MAX_DIGITS, MAX_DIGITS))
#: the common denominator of one matrix of exact entries: at most this many bits (a float's exact value needs up
#: to 1075; 1/p for hundreds of distinct 7-digit primes made exact ranks take minutes)
MAX_DENOMINATOR_BITS = 2048
#: exact rank over Q of a matrix that is not full rank mod p is re-checked only up to this side
EXACT_LIMIT = 160


class Invalid(Exception):
    """A certificate that does not check (the message says why)."""


def digest(cert: dict[str, Any]) -> str:
    """SHA-256 of the certificate without its ``digest`` field (canonical JSON).

    Examples
    --------
    >>> digest({"a": 1}) == digest({"a": 1, "digest": "x"})
    True
    """
    body = {k: v for k, v in cert.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _line(text: str, limit: int = 200) -> str:
    """One printable line: control characters replaced, cut to ``limit`` characters."""
    text = "".join(c if c.isprintable() else "?" for c in str(text))
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ------------------------------------------------------------------ range checks
def _int(v: Any, lo: int, hi: int, what: str) -> int:
    """``v`` as an int in [lo, hi] (a JSON integer, not a bool or float), else Invalid."""
    if type(v) is not int or not lo <= v <= hi:
        raise Invalid(f"{what} must be an integer in {lo}..{hi}, got {_line(repr(v), 40)}")
    return v


def _indices(v: Any, k: int, bound: int, what: str) -> list[int]:
    """k distinct integers in [0, bound)."""
    if not isinstance(v, list) or len(v) != k:
        raise Invalid(f"{what}: expected {k} indices")
    out = [_int(i, 0, bound - 1, what) for i in v]
    if len(set(out)) != k:
        raise Invalid(f"{what}: indices are not distinct")
    return out


def _modulus(v: Any) -> int:
    from flint import fmpz

    p = _int(v, 3, 2**63 - 1, "modulus")
    if not fmpz(p).is_prime():
        raise Invalid(f"modulus {p} is not prime")
    return p


def _sign_value(v: Any, item: str) -> int:
    if type(v) is not int or v not in (1, -1):
        raise Invalid(f"{item}: an asserted sign must be 1 or -1")
    return v


# ------------------------------------------------------------------ exact input
def _q(v: Any) -> Fraction:
    """The exact value of a finite float (a dyadic rational), a bounded int, or a bounded "p" / "p/q" string."""
    if type(v) is str:
        if not _ENTRY.fullmatch(v):
            raise Invalid(f"entry {_line(repr(v), 40)} is not an integer or fraction of at most {MAX_DIGITS} digits")
        q = Fraction(v)
        return q
    if type(v) is int:
        if v.bit_length() > 4 * MAX_DIGITS:
            raise Invalid("an integer entry is too large")
        return Fraction(v)
    if type(v) is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise Invalid("a float entry is not finite")
        return Fraction(*v.as_integer_ratio())
    raise Invalid(f"entry of type {type(v).__name__} is not a number")


def _int_rows(rows: Any) -> tuple[Any, int]:
    """(fmpz_mat Z, D) with rows == Z / D exactly; rows a numpy float array or lists of exact entries."""
    from flint import fmpz_mat

    if hasattr(rows, "dtype"):
        return _dyadic(rows)
    ratios = [[_q(v) for v in r] for r in rows]
    D = _common_denominator(ratios, "a matrix")
    if not ratios or not ratios[0]:
        raise Invalid("an empty matrix")
    return fmpz_mat([[q.numerator * (D // q.denominator) for q in r] for r in ratios]), D


def _common_denominator(rows: list[list[Fraction]], what: str) -> int:
    """The least common denominator of ``rows``, refused past :data:`MAX_DENOMINATOR_BITS` (before any exact work).

    Examples
    --------
    >>> _common_denominator([[Fraction(1, 6), Fraction(1, 4)]], "m")
    12
    >>> from sympy import prime
    >>> _common_denominator([[Fraction(1, prime(10**5 + i)) for i in range(200)]], "tangents")
    Traceback (most recent call last):
    ...
    symtrans.checker.check.Invalid: tangents: the entries' common denominator passes 2048 bits
    """
    D = 1
    for r in rows:
        for q in r:
            if D % q.denominator:
                D = D * q.denominator // _gcd(D, q.denominator)
                if D.bit_length() > MAX_DENOMINATOR_BITS:
                    raise Invalid(f"{what}: the entries' common denominator passes {MAX_DENOMINATOR_BITS} bits")
    return D


def _dyadic(A: Any) -> tuple[Any, int]:
    """(fmpz_mat Z, D) with the float array A == Z / D exactly, D a power of two (A = M 2^(e - 53), frexp)."""
    import numpy as np
    from flint import fmpz_mat

    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or not A.size or not np.isfinite(A).all():
        raise Invalid("a matrix of finite floats is needed")
    mant, e = np.frexp(A)
    M = (mant * 2.0 ** 53).astype(np.int64)  # exact: |mant| < 1 has 53 significant bits
    nz = A != 0
    emin = int(e[nz].min()) if nz.any() else 0
    shift = np.where(nz, e - emin, 0)
    up = max(emin - 53, 0)
    entries = [int(a) << (int(b) + up) for a, b in zip(M.ravel().tolist(), shift.ravel().tolist())]
    return fmpz_mat(A.shape[0], A.shape[1], entries), 1 << max(53 - emin, 0)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _sign(x: Any, what: str) -> int:
    if 0 in x:
        raise Invalid(f"{what}: the enclosure {x.str(5)} contains 0")
    return 1 if x > 0 else -1


@contextlib.contextmanager
def _precision(bits: Any) -> Iterator[None]:
    """Set flint's working precision (bits, range-checked) for the enclosed ball arithmetic, restoring it afterwards."""
    from flint import ctx

    bits = _int(bits, MIN_PRECISION, MAX_PRECISION, "precision")
    old = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = old


def _nonzero_det(Z: Any, p: int) -> bool:
    """det Z != 0 over Z: mod the prime p (non-zero mod p is non-zero), else the exact determinant."""
    from flint import nmod_mat

    return int(nmod_mat(Z, p).det()) != 0 or Z.det() != 0


# ------------------------------------------------------------------ methods (witness already matched the registry)
def _rank_items(cert: dict[str, Any], m: CheckedModel) -> str:
    """exact-rank: each layer's stacked W_O has rank min(shape): mod p (a lower bound), else exactly up to 160."""
    from flint import nmod_mat

    w, claimed = cert["witness"], cert["asserts"]["rank"]
    p = _modulus(w["modulus"])
    for item, spec in w["matrices"].items():
        Z, _ = _int_rows(m.W_O_stack(spec["index"][0]))
        if int(nmod_mat(Z, p).rank()) != claimed[item]:
            if max(Z.nrows(), Z.ncols()) > EXACT_LIMIT:
                raise Invalid(f"{item}: rank mod p is below {claimed[item]}; exact rank re-checked only up to "
                              f"{EXACT_LIMIT} on a side")
            if int(Z.rank()) != claimed[item]:
                raise Invalid(f"rank of {item} is {int(Z.rank())}, not {claimed[item]}")
    return f"{len(claimed)} ranks = {next(iter(claimed.values()))}"


def _factor_minors(cert: dict[str, Any], m: CheckedModel) -> str:
    """factor-minors: k x k minors of W_V^h (rows) and W_O^h (columns) non-zero, so rank(W_V^h W_O^h) = k."""
    w = cert["witness"]
    p = _modulus(w["modulus"])
    for item, it in w["items"].items():
        (l, kv), (_, h) = it["left"]["index"], it["right"]["index"]
        A, B = m.head("W_V", l, kv), m.W_O(l, h)  # [d, k], [k, d]
        k = A.shape[1]
        rows = _indices(it["rows"], k, A.shape[0], f"{item} rows")
        cols = _indices(it["cols"], k, B.shape[1], f"{item} cols")
        if not _nonzero_det(_int_rows(A[rows])[0], p):
            raise Invalid(f"{item}: the left factor's minor has determinant 0")
        if not _nonzero_det(_int_rows(B[:, cols])[0], p):
            raise Invalid(f"{item}: the right factor's minor has determinant 0")
    return f"{len(w['items'])} ranks = {m.d_k} from non-zero factor minors"


def _exact_input(m: CheckedModel, ids: list[int]) -> tuple[Any, int]:
    """X = word[ids] + pos[:n] + type[0] as (Z, D) with X = Z / D exactly (a float sum could round)."""
    mats = [_int_rows(P) for P in m.embedding_parts(ids)]
    Dx = max(D for _, D in mats)  # every D is a power of two: the largest is a multiple of the others
    Zx = mats[0][0] * (Dx // mats[0][1])
    for Z, D in mats[1:]:
        Zx = Zx + Z * (Dx // D)
    return Zx, Dx


def _attention(cert: dict[str, Any], m: CheckedModel) -> str:
    """attention-det: sign det exp(S / sqrt d_k) in arb, S = X W_Q (X W_K)^T exact."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["det_sign"]
    ids = w["input"]["ids"]
    n = len(ids)
    Zx, Dx = _exact_input(m, ids)
    with _precision(w["precision"]):
        for item, it in w["items"].items():
            l, h = it["layer"], it["head"]
            Zq, Dq = _int_rows(m.head("W_Q", l, h))
            Zk, Dk = _int_rows(m.head("W_K", l, m.kv_head(h)))
            S = (Zx * Zq) * (Zx * Zk).transpose()  # exact: X W_Q (X W_K)^T times Dx^2 Dq Dk
            scale = 1 / (arb(Dx) * Dx * Dq * Dk * arb(Zq.ncols()).sqrt())
            E = arb_mat(n, n, [(arb(v) * scale).exp() for v in S.entries()])
            if _sign(E.det(), item) != _sign_value(claimed[item], item):
                raise Invalid(f"{item}: determinant sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} attention matrices invertible at n = {n}"


def _attention_ln(cert: dict[str, Any], m: CheckedModel) -> str:
    """attention-det-ln: X = LayerNorm(word[ids] + pos[:n] + type[0]) in arb (exact mean and variance), eps the config's."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["det_sign"]
    if type(w["eps"]) is not float or w["eps"] != m.eps:
        raise Invalid(f"eps {_line(repr(w['eps']), 30)} is not the model's {m.eps!r} (config.json)")
    ids = w["input"]["ids"]
    n = len(ids)
    parts = m.embedding_parts(ids)
    g, b = m.embedding_ln()
    gamma, beta = [_q(v) for v in g.tolist()], [_q(v) for v in b.tolist()]
    eps = _q(m.eps)
    with _precision(w["precision"]):
        rows = []
        for i in range(n):
            x = [sum((_q(float(P[i][j])) for P in parts), Fraction(0)) for j in range(len(gamma))]
            mean = sum(x, Fraction(0)) / len(x)
            var = sum(((v - mean) ** 2 for v in x), Fraction(0)) / len(x)
            root = (arb(var.numerator) / var.denominator + arb(eps.numerator) / eps.denominator).sqrt()
            rows.append([(arb((v - mean).numerator) / (v - mean).denominator) / root * (arb(gm.numerator) / gm.denominator)
                         + arb(bt.numerator) / bt.denominator for v, gm, bt in zip(x, gamma, beta)])
        X = arb_mat(rows)
        for item, it in w["items"].items():
            l, h = it["layer"], it["head"]
            Q = X * arb_mat(m.head("W_Q", l, h).tolist())
            K = X * arb_mat(m.head("W_K", l, m.kv_head(h)).tolist())
            S = Q * K.transpose()
            root = arb(K.ncols()).sqrt()
            E = arb_mat(n, n, [(S[i, j] / root).exp() for i in range(n) for j in range(n)])
            if _sign(E.det(), item) != _sign_value(claimed[item], item):
                raise Invalid(f"{item}: determinant sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} attention matrices at the LayerNorm input invertible at n = {n}"


def _residual(cert: dict[str, Any], m: CheckedModel) -> str:
    """residual-minor: rows 0..r, given columns, of F(X*_r) enclosed in arb from the definition."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["minor_sign"]
    n = w["n"]
    with _precision(w["precision"]):
        cache: dict[int, list[list[Any]]] = {}
        for item, it in w["items"].items():
            l, r = it["layer"], it["r"]
            if not 1 <= r < min(n, m.d):  # the registry's r never reaches this; the bound is d as well as n
                raise Invalid(f"{item}: need 1 <= r < min(n, d)")
            cols = _indices(it["cols"], r + 1, m.d, f"{item} cols")
            if l not in cache:
                cache = {l: [[m.head(t, l, m.kv_head(h) if t in ("W_K", "W_V") else h).tolist()
                              for t in ("W_Q", "W_K", "W_V", "W_O")] for h in range(m.H)]}
            # X*_r = [I_r 0; 0 0] (n x d): X W = the first r rows of W, zero below.
            F = arb_mat(r + 1, r + 1, [int(i == c < r) for i in range(r + 1) for c in cols])  # X*_r[0..r, cols]
            for WQ, WK, WV, WO in cache[l]:
                Q, K = arb_mat(WQ[:r]), arb_mat(WK[:r])
                S = Q * K.transpose()  # scores among the first r rows; every other score is 0
                root = arb(len(WQ[0])).sqrt()
                P = []
                for i in range(r + 1):  # row r of X*_r is zero: all its scores vanish
                    e = [(S[i, j] / root).exp() if i < r else arb(1) for j in range(r)]
                    total = sum(e, arb(0)) + (n - r)  # the n - r zero rows of X each add exp(0)
                    P.extend(x / total for x in e)
                VO = arb_mat(WV[:r]) * arb_mat([[row[c] for c in cols] for row in WO])
                F = F + arb_mat(r + 1, r, P) * VO
            if _sign(F.det(), item) != _sign_value(claimed[item], item):
                raise Invalid(f"{item}: minor sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} residual minors non-zero at n = {n}"


def _head_sum(cert: dict[str, Any], m: CheckedModel | None) -> str:
    """head-sum-rank: every A^h invertible (arb), dim(sum_h rowspace X W_V^h W_O^h) exact, > n = rows of X."""
    from flint import arb, arb_mat, fmpq_mat

    w, a = cert["witness"], cert["asserts"]
    inline = w["inline"]
    Zx, Dx = _int_rows(inline[w["X"]])
    n = Zx.nrows()
    dim_claim = _int(a["dim_sum_R"], n + 1, 1 << 16, "asserted dim(sum R_h)")
    stacked = []
    with _precision(w["precision"]):
        for i, head in enumerate(w["heads"]):
            (Zq, Dq), (Zk, Dk), (Zv, _), (Zo, _) = (_int_rows(inline[head[t]]) for t in ("W_Q", "W_K", "W_V", "W_O"))
            S = (Zx * Zq) * (Zx * Zk).transpose()
            scale = 1 / (arb(Dx) * Dx * Dq * Dk * arb(Zq.ncols()).sqrt())
            E = arb_mat(n, n, [(arb(v) * scale).exp() for v in S.entries()])
            if _sign(E.det(), f"head {i}") != _sign_value(a["det_sign"][str(i)], f"head {i}"):
                raise Invalid(f"head {i}: determinant sign differs from the asserted one")
            stacked += (Zx * Zv * Zo).tolist()  # rowspace of X W_V W_O (positive scale dropped)
    dim = int(fmpq_mat(stacked).rank())
    if dim != dim_claim:
        raise Invalid(f"dim(sum R_h) is {dim}, not {dim_claim}")
    return f"rank MHA(X) <= {n} < dim(sum R_h) = {dim} with every A^h invertible"


def _nonzero_minor(M: Any, k: int, must: int | None = None) -> bool:
    """Whether some k x k minor of the small arb matrix M (rows of balls) has a ball excluding 0 (column ``must`` in it)."""
    from itertools import combinations

    from flint import arb_mat

    n, d = len(M), len(M[0])
    for rows in combinations(range(n), k):
        for cols in combinations(range(d), k):
            if must is not None and must not in cols:
                continue
            if 0 not in arb_mat([[M[i][j] for j in cols] for i in rows]).det():
                return True
    return False


def _ln_affine(cert: dict[str, Any], m: CheckedModel | None) -> str:
    """ln-affine-rank: H1-H4 exactly (H4 by a ball minor), arank(X) exact, arank(LN X) >= the asserted bound."""
    from flint import arb, fmpq, fmpq_mat

    w, a = cert["witness"], cert["asserts"]
    X = [[_q(v) for v in r] for r in w["inline"]["X"]]
    gamma, beta = ([_q(v) for v in w["inline"][k][0]] for k in ("gamma", "beta"))
    n, d = len(X), len(X[0])

    def rank(rows: list[list[Fraction]]) -> int:
        return int(fmpq_mat([[fmpq(v.numerator, v.denominator) for v in r] for r in rows]).rank())

    C = [[v - sum(r, Fraction(0)) / d for v in r] for r in X]  # XP: each row centred
    var = [sum((v * v for v in r), Fraction(0)) / d for r in C]
    if not all(v > 0 for v in var):
        raise Invalid("H1 fails: a row has variance 0")
    if not rank(X + [[Fraction(1)] * d]) > rank(X):
        raise Invalid("H2 fails: 1_d lies in the row space of X")
    if not all(g != 0 for g in gamma):
        raise Invalid("H3 fails: some gamma_j is 0")
    arank_X = rank([r + [Fraction(1)] for r in X]) - 1
    if arank_X != _int(a["arank_X"], 0, n, "asserted arank(X)"):
        raise Invalid(f"arank(X) is {arank_X}, not {a['arank_X']}")
    bound = _int(a["arank_LN_X_at_least"], arank_X + 1, n - 1, "asserted lower bound of arank(LN X)")
    r_xp = rank(C)

    def ball(q: Fraction) -> Any:
        return arb(q.numerator) / q.denominator

    with _precision(w["precision"]):
        sigma = [ball(v).sqrt() for v in var]
        if r_xp + 1 > n or not _nonzero_minor([[ball(v) for v in r] + [s] for r, s in zip(C, sigma)], r_xp + 1, d):
            raise Invalid("H4 not shown: no minor of [XP | sigma] of size rank(XP) + 1 is certified non-zero")
        LN = [[ball(v) / s * ball(g) + ball(b) for v, g, b in zip(r, gamma, beta)] + [arb(1)] for r, s in zip(C, sigma)]
        if not _nonzero_minor(LN, bound + 1):
            raise Invalid(f"arank(LN X) >= {bound} not shown: no {bound + 1}-minor of [LN X | 1] excludes 0")
    return f"H1-H4 hold, arank(X) = {arank_X} < {bound} <= arank(LN X)"


# ------------------------------------------------------------------ certified completeness: a ball forward with JVPs
def _completeness_instance(v: Any) -> tuple[tuple[str, Any], ...]:
    """The witness's instance, every field type- and range-checked, as (field, value) pairs in registry order."""
    from symtrans.checker.statements import COMPLETENESS_BOUNDS, COMPLETENESS_MAX_PARAMETERS, INSTANCE_FIELDS, \
        completeness_refusal, completeness_tensors

    if not isinstance(v, dict) or set(v) != set(INSTANCE_FIELDS):
        raise Invalid("witness.instance: expected the fields " + ", ".join(INSTANCE_FIELDS))
    out: dict[str, Any] = {}
    for k in ("norm_placement", "norm", "activation", "ffn", "attention", "positional"):
        if not isinstance(v[k], str) or not 0 < len(v[k]) <= 40 or not v[k].isprintable():
            raise Invalid(f"instance.{k}: expected a short string")
        out[k] = v[k]
    for k in ("bias", "qkv_bias", "final_norm"):
        if type(v[k]) is not bool:
            raise Invalid(f"instance.{k}: expected true or false")
        out[k] = v[k]
    for k, (lo, hi) in COMPLETENESS_BOUNDS.items():
        out[k] = _int(v[k], lo, hi, f"instance.{k}")
    if out["H"] % out["H_kv"]:
        raise Invalid("instance: H_kv must divide H")
    if out["positional"] == "rotary" and out["d_k"] % 2:
        raise Invalid("instance: rotary positions need an even d_k")
    out["window"] = None if v["window"] is None else _int(v["window"], 1, out["n"], "instance.window")
    if type(v["eps"]) is not str or not _q(v["eps"]) > 0:
        raise Invalid("instance.eps: expected a positive exact fraction \"p/q\"")
    out["eps"] = v["eps"]
    why = completeness_refusal(out)
    if why:
        raise Invalid(f"instance: {why}")
    P = sum(r * c for _, (r, c) in completeness_tensors(out))
    if P > COMPLETENESS_MAX_PARAMETERS:
        raise Invalid(f"instance: {P} parameters, the statement covers at most {COMPLETENESS_MAX_PARAMETERS}")
    return tuple((k, out[k]) for k in INSTANCE_FIELDS)


class _Jet:
    """A matrix of balls with its forward-mode derivatives: ``v`` (n x m arb_mat) and ``d`` ((n m) x T, or None: constant).

    Row ``i m + j`` of ``d`` holds the derivative of entry (i, j) along each of the T directions.
    """

    __slots__ = ("v", "d")

    def __init__(self, v: Any, d: Any = None) -> None:
        self.v, self.d = v, d

    @property
    def shape(self) -> tuple[int, int]:
        return self.v.nrows(), self.v.ncols()


def _ball(q: Fraction) -> Any:
    from flint import arb

    return arb(q.numerator) / q.denominator


def _const(rows: list[list[Any]]) -> _Jet:
    from flint import arb_mat

    return _Jet(arb_mat(rows))


def _j_add(A: _Jet, B: _Jet) -> _Jet:
    d = A.d if B.d is None else B.d if A.d is None else A.d + B.d
    return _Jet(A.v + B.v, d)


def _j_scale(A: _Jet, c: Any) -> _Jet:
    return _Jet(A.v * c, None if A.d is None else A.d * c)


def _j_diag(c: list[Any], d: Any) -> Any:
    """diag(c) d: every derivative row times its entry's factor."""
    from flint import arb_mat

    N = len(c)
    K: list[Any] = [0] * (N * N)
    for i, x in enumerate(c):
        K[i * N + i] = x
    return arb_mat(N, N, K) * d


def _j_matmul(A: _Jet, B: _Jet) -> _Jet:
    """A B, with d(A B) = dA B + A dB in row-major vec form: (I_n (x) B^T) vec dA + (A (x) I_p) vec dB."""
    from flint import arb_mat

    (n, m), p = A.shape, B.shape[1]
    d = None
    if A.d is not None:
        Be = B.v.entries()
        K: list[Any] = [0] * (n * p * n * m)
        for i in range(n):
            for j in range(p):
                for k in range(m):
                    K[(i * p + j) * (n * m) + i * m + k] = Be[k * p + j]
        d = arb_mat(n * p, n * m, K) * A.d
    if B.d is not None:
        Ae = A.v.entries()
        K = [0] * (n * p * m * p)
        for i in range(n):
            for j in range(p):
                for k in range(m):
                    K[(i * p + j) * (m * p) + k * p + j] = Ae[i * m + k]
        t = arb_mat(n * p, m * p, K) * B.d
        d = t if d is None else d + t
    return _Jet(A.v * B.v, d)


def _j_map(A: _Jet, f: Any, df: Any) -> _Jet:
    """Entry-wise f with derivative df."""
    from flint import arb_mat

    n, m = A.shape
    e = A.v.entries()
    return _Jet(arb_mat(n, m, [f(x) for x in e]), None if A.d is None else _j_diag([df(x) for x in e], A.d))


def _j_hadamard(A: _Jet, B: _Jet) -> _Jet:
    from flint import arb_mat

    n, m = A.shape
    ea, eb = A.v.entries(), B.v.entries()
    d = None if A.d is None else _j_diag(eb, A.d)
    if B.d is not None:
        t = _j_diag(ea, B.d)
        d = t if d is None else d + t
    return _Jet(arb_mat(n, m, [x * y for x, y in zip(ea, eb)]), d)


def _j_linear(A: _Jet, M: Any) -> _Jet:
    """The linear map M ((n m) x (n m), constant) on row-major vec A, back in A's shape."""
    from flint import arb_mat

    n, m = A.shape
    vec = M * arb_mat(n * m, 1, A.v.entries())
    return _Jet(arb_mat(n, m, vec.entries()), None if A.d is None else M * A.d)


def _j_transpose(A: _Jet) -> _Jet:
    from flint import arb_mat

    n, m = A.shape
    K: list[Any] = [0] * (n * m * n * m)
    for i in range(n):
        for j in range(m):
            K[(j * n + i) * (n * m) + i * m + j] = 1
    return _Jet(A.v.transpose(), None if A.d is None else arb_mat(n * m, n * m, K) * A.d)


class _BallForward:
    """The checker's own forward of a completeness instance (the statement's F_theta), on jets of Arb balls.

    Post-LN: ``X1 = N1(X + MHA(X) + b_O)``, ``out = N2(X1 + FFN(X1))``; pre-norm: ``X1 = X + MHA(N1(X)) + b_O``,
    ``out = X1 + FFN(N2(X1))``; then the final norm if any. MHA sums over query heads h (key/value head
    h // (H / H_kv)) ``softmax(mask(q k^T / sqrt d_k)) v W_O^h`` with q = X W_Q^h + b_Q^h (rotary: row i times
    R_i, pairs (2f, 2f + 1) rotated by the angle i 10000^(-2f/d_k)); mask: causal j <= i, window j > i - w.
    Norm: ``c / sqrt(mean(c^2) + eps) * w + b``, c = z - mean(z) (LayerNorm) or z (RMSNorm). FFN:
    ``act(h W_gate + b_gate) * (h W_in + b_in)`` (gated) or ``act(h W_in + b_in)``, then ``W_out + b_out``;
    gelu(x) = x/2 (1 + erf(x / sqrt 2)), gelu_new(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
    silu(x) = x / (1 + exp(-x)), relu(x) = max(0, x) (refused where an argument's ball contains 0).
    """

    def __init__(self, inst: dict[str, Any], params: dict[str, _Jet]) -> None:
        from flint import arb

        self.i, self.p = inst, params
        self.eps = _ball(_q(inst["eps"]))
        n, d = inst["n"], inst["d_model"]
        self.ones = {}
        for shape in ((n, 1), (1, n), (1, d), (d, 1), (n, 1)):
            self.ones[shape] = _const([[1] * shape[1] for _ in range(shape[0])])
        self.mean = _const([[arb(1) / d] for _ in range(d)])
        self.centre = _const([[(1 if i == j else 0) - arb(1) / d for j in range(d)] for i in range(d)])
        self.mask = [[int((inst["attention"] != "causal" or j <= i) and (inst["window"] is None or j > i - inst["window"]))
                      for j in range(n)] for i in range(n)]
        self.rot = self._rotation() if inst["positional"] == "rotary" else None

    def _rotation(self) -> Any:
        from flint import arb, arb_mat

        n, k = self.i["n"], self.i["d_k"]
        M: list[Any] = [0] * (n * k * n * k)
        for i in range(n):
            for f in range(k // 2):
                angle = arb(i) * arb(10000) ** (arb(-2 * f) / k)
                c, s = angle.cos(), angle.sin()
                a, b = i * k + 2 * f, i * k + 2 * f + 1  # (q R)_a = q_a c - q_b s, (q R)_b = q_a s + q_b c
                M[a * n * k + a], M[a * n * k + b] = c, -s
                M[b * n * k + a], M[b * n * k + b] = s, c
        return arb_mat(n * k, n * k, M)

    def _bias(self, Y: _Jet, name: str) -> _Jet:
        b = self.p.get(name)
        return Y if b is None else _j_add(Y, _j_matmul(self.ones[(Y.shape[0], 1)], b))

    def _affine(self, X: _Jet, w: str, b: str) -> _Jet:
        return self._bias(_j_matmul(X, self.p[w]), b)

    def norm(self, Z: _Jet, w: str, b: str) -> _Jet:
        eps = self.eps
        C = _j_matmul(Z, self.centre) if self.i["norm"] == "layernorm" else Z
        ms = _j_matmul(_j_hadamard(C, C), self.mean)
        r = _j_map(ms, lambda x: (x + eps).rsqrt(), lambda x: -(x + eps).rsqrt() ** 3 / 2)
        y = _j_hadamard(C, _j_matmul(r, self.ones[(1, self.i["d_model"])]))
        y = _j_hadamard(y, _j_matmul(self.ones[(Z.shape[0], 1)], self.p[w]))
        return self._bias(y, b)

    def softmax(self, S: _Jet) -> _Jet:
        E = _j_map(S, lambda x: x.exp(), lambda x: x.exp())
        if not all(all(r) for r in self.mask):
            E = _j_hadamard(E, _const(self.mask))
        n = S.shape[0]
        inv = _j_map(_j_matmul(E, self.ones[(n, 1)]), lambda x: 1 / x, lambda x: -1 / (x * x))
        return _j_hadamard(E, _j_matmul(inv, self.ones[(1, n)]))

    def attention(self, X: _Jet, t: str) -> _Jet:
        from flint import arb

        H, kv = self.i["H"], self.i["H_kv"]
        scale = 1 / arb(self.i["d_k"]).sqrt()
        keys: dict[int, tuple[_Jet, _Jet]] = {}
        total = None
        for h in range(H):
            g = h // (H // kv)
            q = self._affine(X, f"{t}W_Q[{h}]", f"{t}b_Q[{h}]")
            if g not in keys:
                k = self._affine(X, f"{t}W_K[{g}]", f"{t}b_K[{g}]")
                keys[g] = (_j_linear(k, self.rot) if self.rot is not None else k,
                           self._affine(X, f"{t}W_V[{g}]", f"{t}b_V[{g}]"))
            k, v = keys[g]
            if self.rot is not None:
                q = _j_linear(q, self.rot)
            A = self.softmax(_j_scale(_j_matmul(q, _j_transpose(k)), scale))
            term = _j_matmul(A, _j_matmul(v, self.p[f"{t}W_O[{h}]"]))
            total = term if total is None else _j_add(total, term)
        assert total is not None
        return total

    def act(self, Z: _Jet) -> _Jet:
        from flint import arb

        kind = self.i["activation"]
        if kind == "gelu":
            r2, c = arb(2).sqrt(), 1 / (arb(2) * arb.pi()).sqrt()
            return _j_map(Z, lambda x: x / 2 * (1 + (x / r2).erf()),
                          lambda x: (1 + (x / r2).erf()) / 2 + x * c * (-x * x / 2).exp())
        if kind == "gelu_new":
            a, b = (2 / arb.pi()).sqrt(), arb(44715) / 10**6

            def t(x: Any) -> Any:
                return (a * (x + b * x ** 3)).tanh()

            return _j_map(Z, lambda x: x / 2 * (1 + t(x)),
                          lambda x: (1 + t(x)) / 2 + x / 2 * (1 - t(x) ** 2) * a * (1 + 3 * b * x * x))
        if kind == "relu":
            def sign(x: Any) -> int:
                if 0 in x:
                    raise Invalid(f"a ReLU argument's enclosure {x.str(3)} contains 0: the point is not generic")
                return int(x > 0)

            return _j_map(Z, lambda x: x * sign(x), lambda x: arb(sign(x)))

        def s(x: Any) -> Any:
            return 1 / (1 + (-x).exp())

        return _j_map(Z, lambda x: x * s(x), lambda x: s(x) * (1 + x * (1 - s(x))))

    def layer(self, X: _Jet, l: int) -> _Jet:
        t, pre = f"layer{l}.", self.i["norm_placement"] == "pre"
        X1 = self._bias(_j_add(X, self.attention(self.norm(X, t + "ln1_w", t + "ln1_b") if pre else X, t)), t + "b_O")
        if not pre:
            X1 = self.norm(X1, t + "ln1_w", t + "ln1_b")
        h = self.norm(X1, t + "ln2_w", t + "ln2_b") if pre else X1
        up = self._affine(h, t + "W_in", t + "b_in")
        hidden = _j_hadamard(self.act(self._affine(h, t + "W_gate", t + "b_gate")), up) \
            if self.i["ffn"] == "gated" else self.act(up)
        out = _j_add(X1, self._affine(hidden, t + "W_out", t + "b_out"))
        return out if pre else self.norm(out, t + "ln2_w", t + "ln2_b")

    def __call__(self, X: _Jet) -> _Jet:
        for l in range(self.i["L"]):
            X = self.layer(X, l)
        return self.norm(X, "final_ln_w", "final_ln_b") if self.i["final_norm"] else X


def completeness_forward(inst: dict[str, Any], params: dict[str, Any], X: Any, directions: Any = None) -> _Jet:
    """The checker's ball forward F_theta(X) with derivatives along ``directions`` (P x T exact rows, or none).

    ``params``: name -> rows of exact entries (:func:`symtrans.checker.statements.completeness_tensors` order
    numbers the P entries); ``X``: rows of exact entries. Returns the output jet (``d``: (n d_model) x T).

    Examples
    --------
    >>> inst = dict(_completeness_instance({"norm_placement": "pre", "norm": "rmsnorm",
    ...     "activation": "silu", "ffn": "gated", "attention": "causal", "positional": "none", "bias": False,
    ...     "qkv_bias": False, "final_norm": False, "window": None, "L": 1, "n": 2, "H": 1, "H_kv": 1, "d_model": 2,
    ...     "d_k": 1, "d_v": 1, "d_ff": 1, "batch": 1, "eps": "1/100"}))
    >>> from symtrans.checker.statements import completeness_tensors
    >>> params = {name: [[0] * c for _ in range(r)] for name, (r, c) in completeness_tensors(inst)}
    >>> completeness_forward(inst, params, [[1, 2], [3, 4]]).v.entries()[0].str(3)  # zero weights: X itself
    '1.00'
    """
    from flint import arb_mat

    from symtrans.checker.statements import completeness_tensors

    jets, pos = {}, 0
    for name, (r, c) in completeness_tensors(inst):
        v = arb_mat([[_ball(_q(x)) for x in row] for row in params[name]])
        d = None
        if directions is not None:
            d = arb_mat([[_ball(x) for x in directions[q]] for q in range(pos, pos + r * c)])
        jets[name] = _Jet(v, d)
        pos += r * c
    return _BallForward(inst, jets)(_const([[_ball(_q(x)) for x in row] for row in X]))


def _mm(A: list[list[Fraction]], B: list[list[Fraction]]) -> list[list[Fraction]]:
    """A B over Q (small matrices of Fractions)."""
    return [[sum((a * B[k][j] for k, a in enumerate(row)), Fraction(0)) for j in range(len(B[0]))] for row in A]


def completeness_tangents(inst: dict[str, Any], params: dict[str, Any]) -> list[tuple[str, list[Fraction]]]:
    """G's tangent vectors at theta, derived by the checker from the instance's structure: (factor, P exact entries).

    The checker's own rules (not the producer's tag table, :mod:`symtrans.group.spec`): each is the derivative at
    the identity of a group action that leaves F_theta unchanged, written out per factor. Per layer:

    * ``qk-gauge``: W_Q^h -> W_Q^h A, b_Q^h -> b_Q^h A for the query heads h of key/value head g, and
      W_K^g, b_K^g -> times A^{-T} (rotary: A commutes with every rotation: a I + b J on each frequency pair);
    * ``vo-gauge``: W_V^g, b_V^g -> times B, W_O^h -> B^{-1} W_O^h;
    * ``key-bias-shift`` (b_K, no rotary): b_K^g + c shifts every score of a row by q c (softmax-invariant);
    * ``value-bias-shift`` (b_V and b_O): b_V^g + c, b_O - sum_h c W_O^h (softmax rows sum to 1);
    * ``centring-shift`` (LayerNorm, post-LN or with a final LayerNorm): rows of W_O^h and W_out and the biases
      b_O, b_out move along 1 (the next LayerNorm removes a per-row constant);
    * post-LN ``ffn-bias-transfer``: ln1_b + c, b_in - c W_in, b_out - c; layer l > 0 ``attention-bias-transfer``:
      the previous ln2_b + c, b_Q, b_K, b_V - c W, b_O - c;
    * ``*-input-hyperplane`` (a LayerNorm output y has <y - beta, 1/gamma> = 0): a reader W (with bias b) ->
      W + (1/gamma) a^T, b - <beta, 1/gamma> a (post-LN: W_in of ln1, the next layer's Q, K, V of ln2; pre-LN:
      Q, K, V of ln1, W_in of ln2);
    * pre-norm ``ln*-scaling`` (gain and bias of output j times s, row j of every reader over s) and, with a
      LayerNorm, ``ln*-bias-transfer`` (beta_j + c, each reader's bias - c row j);
    * ``ffn-scaling``: column j of W_in (and b_in) times s, row j of W_out over s (gated units; a ReLU gate or
      a ReLU MLP also through W_gate / W_in, positive homogeneity).

    Examples
    --------
    >>> inst = {"norm_placement": "pre", "norm": "rmsnorm", "activation": "silu", "ffn": "gated",
    ...     "attention": "causal", "positional": "none", "bias": False, "qkv_bias": False, "final_norm": False,
    ...     "window": None, "L": 1, "n": 2, "H": 1, "H_kv": 1, "d_model": 2, "d_k": 1, "d_v": 1, "d_ff": 1}
    >>> from symtrans.checker.statements import completeness_tensors
    >>> params = {name: [[1] * c for _ in range(r)] for name, (r, c) in completeness_tensors(inst)}
    >>> [name for name, _ in completeness_tangents(inst, params)]
    ['qk-gauge', 'vo-gauge', 'ln1-scaling', 'ln1-scaling', 'ln2-scaling', 'ln2-scaling', 'ffn-scaling']
    """
    from symtrans.checker.statements import completeness_tensors

    tensors = completeness_tensors(inst)
    shapes = dict(tensors)
    Q = {name: [[_q(x) for x in row] for row in params[name]] for name in shapes}
    H, kv, d, dk, dv, dff = (inst[k] for k in ("H", "H_kv", "d_model", "d_k", "d_v", "d_ff"))
    pre, ln = inst["norm_placement"] == "pre", inst["norm"] == "layernorm"
    rotary, gated, relu = inst["positional"] == "rotary", inst["ffn"] == "gated", inst["activation"] == "relu"
    out: list[tuple[str, list[Fraction]]] = []
    zero = Fraction(0)

    def emit(factor: str, delta: dict[str, list[list[Fraction]]]) -> None:
        vec: list[Fraction] = []
        for name, (r, c) in tensors:
            m = delta.get(name)
            vec.extend(m[i][j] if m is not None else zero for i in range(r) for j in range(c))
        out.append((factor, vec))

    def unit(r: int, c: int, i: int, j: int) -> list[list[Fraction]]:
        return [[Fraction(int(a == i and b == j)) for b in range(c)] for a in range(r)]

    def neg(A: list[list[Fraction]]) -> list[list[Fraction]]:
        return [[-x for x in row] for row in A]

    def add(delta: dict[str, list[list[Fraction]]], name: str, A: list[list[Fraction]]) -> None:
        if name in delta:
            delta[name] = [[x + y for x, y in zip(r1, r2)] for r1, r2 in zip(delta[name], A)]
        else:
            delta[name] = A

    def row(name: str, a: int) -> list[list[Fraction]]:
        return [list(Q[name][a])]

    def hyperplane(factor: str, t_norm: str, readers: list[tuple[str, str]]) -> None:
        """Readers (weight, bias) of the LayerNorm ``t_norm``: W + (1/gamma) e_a^T, b - <beta, 1/gamma> e_a."""
        gamma, beta = Q[t_norm + "_w"][0], Q[t_norm + "_b"][0]
        if any(g == 0 for g in gamma):
            raise Invalid(f"{t_norm}_w has a zero gain: the point is not generic")
        inv = [1 / g for g in gamma]
        shift = sum((b * v for b, v in zip(beta, inv)), Fraction(0))
        for W, b in readers:
            if W not in shapes or b not in shapes:
                continue
            m = shapes[W][1]
            for a in range(m):
                emit(factor, {W: [[inv[j] * int(c == a) for c in range(m)] for j in range(d)],
                              b: [[-shift * int(c == a) for c in range(m)]]})

    for l in range(inst["L"]):
        t = f"layer{l}."
        heads = {g: [h for h in range(H) if h // (H // kv) == g] for g in range(kv)}
        qkv = [(f"{t}W_Q[{h}]", f"{t}b_Q[{h}]") for h in range(H)] + \
            [(f"{t}W_{x}[{g}]", f"{t}b_{x}[{g}]") for x in ("K", "V") for g in range(kv)]
        for g in range(kv):  # qk-gauge
            if rotary:
                gens = []
                for f in range(dk // 2):
                    I2 = [[Fraction(int(a == b and a in (2 * f, 2 * f + 1))) for b in range(dk)] for a in range(dk)]
                    J2 = [[Fraction((a, b) == (2 * f + 1, 2 * f)) - Fraction((a, b) == (2 * f, 2 * f + 1))
                           for b in range(dk)] for a in range(dk)]
                    gens += [I2, J2]
            else:
                gens = [unit(dk, dk, a, b) for a in range(dk) for b in range(dk)]
            for M in gens:
                MT = [list(c) for c in zip(*M)]
                delta: dict[str, list[list[Fraction]]] = {}
                for h in heads[g]:
                    for name in (f"{t}W_Q[{h}]", f"{t}b_Q[{h}]"):
                        if name in shapes:
                            delta[name] = _mm(Q[name], M)
                for name in (f"{t}W_K[{g}]", f"{t}b_K[{g}]"):
                    if name in shapes:
                        delta[name] = neg(_mm(Q[name], MT))
                emit("qk-gauge", delta)
        for g in range(kv):  # vo-gauge
            for a in range(dv):
                for b in range(dv):
                    E = unit(dv, dv, a, b)
                    delta = {name: _mm(Q[name], E) for name in (f"{t}W_V[{g}]", f"{t}b_V[{g}]") if name in shapes}
                    for h in heads[g]:
                        delta[f"{t}W_O[{h}]"] = neg(_mm(E, Q[f"{t}W_O[{h}]"]))
                    emit("vo-gauge", delta)
        for g in range(kv):  # bias shifts
            if f"{t}b_K[{g}]" in shapes and not rotary:
                for a in range(dk):
                    emit("key-bias-shift", {f"{t}b_K[{g}]": unit(1, dk, 0, a)})
            if f"{t}b_V[{g}]" in shapes and f"{t}b_O" in shapes:
                for a in range(dv):
                    delta = {f"{t}b_V[{g}]": unit(1, dv, 0, a)}
                    for h in heads[g]:
                        add(delta, f"{t}b_O", neg(row(f"{t}W_O[{h}]", a)))
                    emit("value-bias-shift", delta)
        if ln and (not pre or inst["final_norm"]):  # centring-shift: the next LayerNorm removes a row constant
            ones = [[Fraction(1)] * d]
            for h in range(H):
                for a in range(dv):
                    emit("centring-shift", {f"{t}W_O[{h}]": [ones[0] if i == a else [zero] * d for i in range(dv)]})
            for name, r in ((f"{t}b_O", 1), (f"{t}W_out", dff), (f"{t}b_out", 1)):
                if name in shapes:
                    for a in range(r):
                        emit("centring-shift", {name: [ones[0] if i == a else [zero] * d for i in range(r)]})
        if not pre:
            if all(x in shapes for x in (f"{t}ln1_b", f"{t}b_in", f"{t}b_out")):
                for a in range(d):
                    emit("ffn-bias-transfer", {f"{t}ln1_b": unit(1, d, 0, a), f"{t}b_in": neg(row(f"{t}W_in", a)),
                                               f"{t}b_out": neg(unit(1, d, 0, a))})
            if ln:
                hyperplane("ffn-input-hyperplane", f"{t}ln1", [(f"{t}W_in", f"{t}b_in")])
            if l > 0:
                p = f"layer{l - 1}."
                if all(b in shapes for _, b in qkv) and f"{t}b_O" in shapes and f"{p}ln2_b" in shapes:
                    for a in range(d):
                        delta = {f"{p}ln2_b": unit(1, d, 0, a), f"{t}b_O": neg(unit(1, d, 0, a))}
                        for W, b in qkv:
                            delta[b] = neg(row(W, a))
                        emit("attention-bias-transfer", delta)
                if ln:
                    hyperplane("attention-input-hyperplane", f"{p}ln2", qkv)
        else:
            ffn_in = [(f"{t}W_gate", f"{t}b_gate")] if gated else []
            ffn_in.append((f"{t}W_in", f"{t}b_in"))
            for norm, readers in (("ln1", qkv), ("ln2", ffn_in)):
                w, b = f"{t}{norm}_w", f"{t}{norm}_b"
                for a in range(d):  # scaling: output a times s, row a of every reader over s
                    delta = {w: [[Q[w][0][a] if j == a else zero for j in range(d)]]}
                    if b in shapes:
                        delta[b] = [[Q[b][0][a] if j == a else zero for j in range(d)]]
                    for W, _ in readers:
                        if W in shapes:
                            delta[W] = [neg([Q[W][i]])[0] if i == a else [zero] * shapes[W][1] for i in range(d)]
                    emit(f"{norm}-scaling", delta)
                if b in shapes:
                    if all(bb in shapes for W, bb in readers if W in shapes):
                        for a in range(d):
                            delta = {b: unit(1, d, 0, a)}
                            for W, bb in readers:
                                if W in shapes:
                                    delta[bb] = neg(row(W, a))
                            emit(f"{norm}-bias-transfer", delta)
                    hyperplane("attention-input-hyperplane" if norm == "ln1" else "ffn-input-hyperplane",
                               f"{t}{norm}", readers)
        scaled = [(f"{t}W_in", f"{t}b_in")] if gated else []
        if relu:  # positive homogeneity: a ReLU unit (gate, or the MLP's input) scales through
            scaled.append((f"{t}W_gate", f"{t}b_gate") if gated else (f"{t}W_in", f"{t}b_in"))
        for W, b in scaled:
            for j in range(dff):
                delta = {W: [[Q[W][i][j] if c == j else zero for c in range(dff)] for i in range(d)],
                         f"{t}W_out": [neg([Q[f"{t}W_out"][j]])[0] if i == j else [zero] * d for i in range(dff)]}
                if b in shapes:
                    delta[b] = [[Q[b][0][j] if c == j else zero for c in range(dff)]]
                emit("ffn-scaling", delta)
    return out


def _jacobian_rank(cert: dict[str, Any], m: CheckedModel | None) -> str:
    """jacobian-rank: a (P - k)-minor of J, Arb determinant excluding 0, k = dim G (the formula); G's tangents derived here."""
    from flint import arb_mat, fmpq, fmpq_mat

    from symtrans.checker.statements import completeness_dimension, completeness_family, completeness_tensors

    w, a = cert["witness"], cert["asserts"]
    if _int(w["precision"], MIN_PRECISION, MAX_PRECISION, "precision") < JACOBIAN_MIN_PRECISION:
        raise Invalid(f"precision: jacobian-rank needs at least {JACOBIAN_MIN_PRECISION} bits (wide balls would "
                      "let a wrong tangent's J v contain 0)")
    inst = dict(_completeness_instance(w["instance"]))
    P = sum(r * c for _, (r, c) in completeness_tensors(inst))
    k = completeness_dimension(inst)  # the formula's, never the file's (the registry fixed the asserts to it)
    if a["group_dimension"] != k or a["stabiliser_dimension_at_most"] != k or a["jacobian_rank_at_least"] != P - k:
        raise Invalid(f"asserts: dim G is {k} by its formula, P - k = {P - k}")
    r = P - k
    N = inst["batch"] * inst["n"] * inst["d_model"]
    rows = _indices(w["minor"]["rows"], r, N, "minor rows")
    cols = _indices(w["minor"]["cols"], r, P, "minor cols")
    # G's tangent vectors, derived here; their exact rank must be the formula's k (an independent route to dim G)
    derived = completeness_tangents(inst, w["parameters"])
    _common_denominator([v for _, v in derived], "G's tangent vectors at theta")  # before the exact rank and jets
    if derived:
        M = fmpq_mat(P, len(derived), [fmpq(v[q].numerator, v[q].denominator) for q in range(P) for _, v in derived])
        R, rank = M.rref()
        rank = int(rank)
    else:
        rank = 0
    if rank != k:
        raise Invalid(f"G's tangent vectors derived by the checker span {rank} dimensions at theta, its formula "
                      f"says {k}: the checker's rules do not cover this instance's factors, or the point is not generic")
    basis = []  # the pivot columns of the rref: k independent tangent vectors, in the derived order
    for i in range(rank):
        basis.append(next(j for j in range(len(derived)) if R[i, j] != 0))
    tangents = [derived[j] for j in basis]
    # directions: the minor's parameter columns (unit vectors), then the k tangent vectors
    directions = [[Fraction(int(q == c)) for c in cols] + [t[q] for _, t in tangents] for q in range(P)]
    with _precision(w["precision"]):
        out_rows: list[list[Any]] = []
        for b, X in enumerate(w["inputs"]):
            jet = completeness_forward(inst, w["parameters"], X, directions)
            e, width = jet.d.entries(), r + k
            for row in range(jet.d.nrows()):
                vals = e[row * width:(row + 1) * width]
                for i, x in enumerate(vals[r:]):
                    if 0 not in x:
                        raise Invalid(f"G's tangent vector {i} ({tangents[i][0]}) is not in the null space: (J v) at "
                                      f"input {b}, output {row} is {x.str(3)}, a ball excluding 0")
                out_rows.append(vals[:r])
        det = arb_mat([out_rows[i] for i in rows]).det() if r else None
    if det is not None and 0 in det:
        raise Invalid(f"the {r} x {r} minor's determinant enclosure {det.str(3)} contains 0: rank J >= P - k not shown")
    return (f"rank J >= {r} (a {r} x {r} minor, determinant {det.str(3) if det is not None else 1}), so "
            f"dim(stabiliser) <= dim ker J <= {k} = dim G (formula); G's {k} tangent vectors, derived by the checker, "
            f"independent over Q, J v in balls around 0, on {completeness_family(inst)}")


_METHODS = {"exact-rank": _rank_items, "factor-minors": _factor_minors, "attention-det": _attention,
            "attention-det-ln": _attention_ln, "residual-minor": _residual, "head-sum-rank": _head_sum,
            "ln-affine-rank": _ln_affine, "jacobian-rank": _jacobian_rank}


# ------------------------------------------------------------------ binding to the registry
def _match(actual: Any, template: Any, path: str) -> None:
    """``actual`` equals the registry's ``template`` (FREE: the witness's choice; ("inline", shape): exact entries)."""
    if isinstance(template, str) and template == FREE:
        return
    if isinstance(template, tuple):  # ("inline", (rows, cols)): a matrix of exact entries of that shape
        rows, cols = template[1]
        if not (isinstance(actual, list) and len(actual) == rows
                and all(isinstance(r, list) and len(r) == cols for r in actual)):
            raise Invalid(f"{path}: expected an inline {rows} x {cols} matrix")
        for r in actual:
            for v in r:
                _q(v)
        return
    if isinstance(template, dict):
        if not isinstance(actual, dict):
            raise Invalid(f"{path}: expected an object")
        if set(actual) != set(template):
            extra, missing = sorted(set(actual) - set(template)), sorted(set(template) - set(actual))
            what = (f"covers {len(missing)} fewer ({_line(', '.join(missing[:3]), 80)})" if missing else "") + \
                   (" and " if missing and extra else "") + \
                   (f"asserts {len(extra)} other ({_line(', '.join(map(str, extra[:3])), 80)})" if extra else "")
            raise Invalid(f"{path}: {what} than the statement requires")
        for k in template:
            _match(actual[k], template[k], f"{path}.{k}")
        return
    if isinstance(template, list):
        if not isinstance(actual, list) or len(actual) != len(template):
            raise Invalid(f"{path}: expected a list of {len(template)}")
        for i, (x, t) in enumerate(zip(actual, template)):
            _match(x, t, f"{path}[{i}]")
        return
    if type(actual) is not type(template) or actual != template:
        raise Invalid(f"{path} is {_line(repr(actual), 60)}, the statement requires {_line(repr(template), 60)}")


def _model_dir(model: Any) -> Path:
    if model is None or model == "default":
        return bundled_model_path()
    return Path(model)


def check_header(data: dict[str, Any], model: Any = None, *, n: int | None = None, seed: int = 0
                 ) -> tuple[Any, CheckedModel | None]:
    """Check fields, schema, digest and the binding to the registry; return (registry expectation, model).

    ``model`` is the directory the caller names (``None`` or ``"default"``: the
    bundled model); ``n`` and ``seed`` are the statement's parameters (default
    :data:`symtrans.config.DEFAULT_N` and 0, as ``symtrans certify``). Raises
    :class:`Invalid` (or :class:`ModelError`) on any mismatch.

    Examples
    --------
    >>> check_header({"schema": "x"})
    Traceback (most recent call last):
    ...
    symtrans.checker.check.Invalid: missing fields: statement_id, claim, reading, producer, statement, scope, asserts, witness, toolkit_version, weights_hash, digest
    """
    if n is None:
        from symtrans.config import DEFAULT_N

        n = DEFAULT_N
    if not isinstance(data, dict):
        raise Invalid("not a certificate object")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise Invalid("missing fields: " + ", ".join(missing))
    extra = sorted(str(k) for k in data if k not in FIELDS)
    if extra:
        raise Invalid("fields the schema does not have: " + _line(", ".join(extra), 80))
    if data["schema"] != SCHEMA:
        raise Invalid(f"unknown schema {_line(repr(data['schema']), 60)}")
    if data["digest"] != digest(data):
        raise Invalid("digest mismatch: the certificate was altered after it was written")
    sid = data["statement_id"]
    if not isinstance(sid, str) or sid not in STATEMENTS:
        raise Invalid(f"statement {_line(repr(sid), 60)} is not in the trusted registry")
    st = STATEMENTS[sid]
    w = data["witness"]
    if not isinstance(w, dict) or w.get("method") != st.method:
        raise Invalid(f"{sid}: the witness method must be {st.method!r}")
    _int(n, 1, MAX_N, "n")
    _int(seed, 0, 2**63 - 1, "seed")
    m = None
    if st.about_model:
        if "inline" in w:
            raise Invalid(f"{sid} is about the model: its witness must name the model's tensors, not inline matrices")
        label = w.get("model")
        if not isinstance(label, str) or len(label) > 500:
            raise Invalid("witness.model: expected the model's label (a string)")
        given = _model_dir(model)
        named = bundled_model_path() if label == "default" else Path(label)
        if named.resolve() != given.resolve():  # a path compared, never opened: no hub id, no other directory
            raise Invalid(f"the certificate names model {_line(repr(label), 60)}, not the one given: a certificate "
                          "never chooses its model")
        m = open_model(given)
        if data["weights_hash"] != m.weights_hash:
            raise Invalid(f"the certificate is for another model: weights hash "
                          f"{_line(str(data['weights_hash']), 12)}..., the model given has {m.weights_hash[:12]}...")
        dims = Dims(L=m.L, H=m.H, H_kv=m.H_kv, d=m.d, d_k=m.d_k, positions=m.positions(), vocab=m.vocab, n=n,
                    seed=seed, label=label)
    else:
        if data["weights_hash"] is not None:
            raise Invalid(f"{sid} is about no model: weights_hash must be null")
        instance = _completeness_instance(w.get("instance")) if st.method == "jacobian-rank" else None
        dims = Dims(n=n, seed=seed, instance=instance)
    exp = expected(sid, dims)
    for field in ("claim", "reading", "producer", "statement", "scope"):
        _match(data[field], exp[field], field)
    _match(w, exp["witness"], "witness")
    _match(data["asserts"], exp["asserts"], "asserts")
    return exp, m


def verify_certificate(data: Any, model: Any = None, *, n: int | None = None, seed: int = 0) -> tuple[bool, str]:
    """Re-check one certificate against the registry and from its witness; return (valid, one-line reason).

    Never raises: whatever goes wrong inside is an INVALID verdict with one line.

    Examples
    --------
    >>> verify_certificate({"schema": "other"})[1].split(":")[0]
    'missing fields'
    >>> verify_certificate(dict.fromkeys(FIELDS))[1]
    'unknown schema None'
    """
    try:
        _, m = check_header(data, model, n=n, seed=seed)
        return True, f"{data['statement_id']}: " + _METHODS[data["witness"]["method"]](data, m)
    except Invalid as err:
        return False, _line(err)
    except ModelError as err:
        return False, _line(f"model: {err}")
    except Exception as err:  # noqa: BLE001 - fail closed: any error inside the checker is a rejection
        first = str(err).splitlines()[0] if str(err) else ""
        return False, _line(f"malformed certificate ({type(err).__name__}: {first})")


# ------------------------------------------------------------------ certificate directories
MANIFEST = "MANIFEST.json"
MANIFEST_SCHEMA = "symtrans-certificate-manifest/2"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes (a manifest entry).

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a"; _ = p.write_bytes(b"x")
    >>> file_hash(p) == hashlib.sha256(b"x").hexdigest()
    True
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:  # streamed: a listed file may be large (a manifest names what it likes)
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _max_certificate_bytes() -> int:
    from symtrans.validate import REPORT_MAX_BYTES  # what `verify` reads a certificate with

    return REPORT_MAX_BYTES


def manifest(files: dict[str, tuple[str, str]], *, n: int, seed: int) -> dict[str, Any]:
    """A sealed directory manifest: each file's SHA-256 and statement id, the claims covered, n, seed, digest.

    ``files``: name -> (SHA-256, statement id). The claims covered are those of the statements; verify
    requires every statement the registry requires for each of them (:func:`manifest_problems`).

    Examples
    --------
    >>> m = manifest({"a.json": ("0" * 64, "prop-6.2/identity-counterexample")}, n=8, seed=0)
    >>> m["claims"], m["digest"] == digest(m)
    (['prop-6.2'], True)
    """
    out = {"schema": MANIFEST_SCHEMA, "n": n, "seed": seed,
           "claims": sorted({STATEMENTS[sid].claim for _, sid in files.values()}),
           "files": {name: {"sha256": h, "statement_id": sid} for name, (h, sid) in sorted(files.items())}}
    out["digest"] = digest(out)
    return out


def manifest_problems(directory: Path, manifest: Any, found: dict[str, Any], *, n: int, seed: int
                      ) -> list[tuple[str, str]]:
    """(file, why) for every way a certificate directory differs from its manifest; [] when it matches.

    The manifest (sealed by its digest) lists every certificate file with its SHA-256 and statement id,
    the claims the directory covers, and the n and seed it was certified at. Refused: an unlisted file, a
    listed file that is missing or changed or holds another statement than listed, another n or seed than
    the caller's, and a covered claim without every statement the registry requires for it
    (:func:`symtrans.checker.statements.claim_statements`). ``found``: file name -> its parsed JSON.

    Examples
    --------
    >>> m = manifest({}, n=8, seed=0)
    >>> manifest_problems(Path("."), m, {"a.json": {}}, n=8, seed=0)
    [('a.json', 'not listed in the directory manifest')]
    >>> manifest_problems(Path("."), dict(m, claims=["prop-6.2"]), {}, n=8, seed=0)[0][1]
    'digest mismatch: the manifest was altered after it was written'
    """
    from symtrans.checker.statements import claim_statements

    fields = {"schema", "n", "seed", "claims", "files", "digest"}
    if not (isinstance(manifest, dict) and manifest.get("schema") == MANIFEST_SCHEMA and set(manifest) == fields
            and isinstance(manifest["files"], dict) and isinstance(manifest["claims"], list)
            and all(isinstance(c, str) for c in manifest["claims"])
            and all(isinstance(k, str) and isinstance(v, dict) and set(v) == {"sha256", "statement_id"}
                    and all(isinstance(x, str) for x in v.values()) for k, v in manifest["files"].items())):
        return [(MANIFEST, f"not a certificate manifest ({MANIFEST_SCHEMA}: schema, n, seed, claims, files with "
                           "sha256 and statement_id, digest)")]
    if manifest["digest"] != digest(manifest):
        return [(MANIFEST, "digest mismatch: the manifest was altered after it was written")]
    out = []
    if manifest.get("n") != n or manifest.get("seed") != seed or type(manifest.get("n")) is not int:
        out.append((MANIFEST, f"certified at n = {_line(repr(manifest.get('n')), 20)}, seed "
                              f"{_line(repr(manifest.get('seed')), 20)}; verified at n = {n}, seed {seed}"))
    listed = manifest["files"]
    for name in found:
        if name not in listed:
            out.append((name, "not listed in the directory manifest"))
    held: set[str] = set()
    for name, entry in listed.items():
        p = directory / name
        sid = entry["statement_id"]
        if "/" in name or "\\" in name or name in (".", "..") or not p.is_file():
            out.append((_line(name, 80), "listed in the manifest but missing"))
        elif p.stat().st_size > _max_certificate_bytes():  # no certificate is read past this: nor hashed
            out.append((_line(name, 80), f"larger than a certificate may be ({_max_certificate_bytes() >> 20} MiB)"))
        elif file_hash(p) != entry["sha256"]:
            out.append((name, "differs from the manifest's hash"))
        elif not isinstance(found.get(name), dict) or found[name].get("statement_id") != sid:
            out.append((name, f"holds another statement than the manifest's {_line(repr(sid), 60)}"))
        elif sid not in STATEMENTS or STATEMENTS[sid].claim not in manifest["claims"]:
            out.append((name, f"statement {_line(repr(sid), 60)} is of no claim the manifest covers"))
        else:
            held.add(sid)
    for claim in manifest["claims"]:
        need = claim_statements(claim) or tuple(s for s, st in STATEMENTS.items() if st.claim == claim)
        if not need:
            out.append((MANIFEST, f"claim {_line(repr(claim), 40)} has no registered statement"))
        for sid in need:
            if sid not in held:
                out.append((MANIFEST, f"claim {claim} requires statement {sid}, which no valid file in the "
                                      "directory holds"))
    return out


# ------------------------------------------------------------------ records carried from an earlier report
def check_record(record: dict[str, Any], model: Any = None, *, n: int | None = None, seed: int = 0) -> str | None:
    """Why an evidence record (as a dict) may not count on its certificates; None when it may.

    The record's producer must agree with its context's producer; where the
    producer writes certificates (the registry's ``REQUIRED``), the record must carry
    every statement it requires, each certificate must re-verify (whatever the
    record's verdict, ``fails`` included) on ``model`` at ``n`` and ``seed``, and
    the record's claim, reading, producer, verdict (exactly the statement's),
    scope and ``counted`` flag must be the registry's and its certificates'. A
    record of another producer must carry none (and has nothing to re-verify:
    the report never counts it when carried).

    Examples
    --------
    >>> check_record({"claim": "prop-6.3", "producer": "prop63-real-weights", "verdict": "certified",
    ...               "context": {"producer": "prop51-witness"}, "details": {}})
    "the record names producer 'prop63-real-weights' but its context 'prop51-witness'"
    >>> check_record({"claim": "prop-6.3", "producer": "prop63-real-weights", "verdict": "certified",
    ...               "context": {"producer": "prop63-real-weights"}, "details": {}})
    'the record carries no certificate (prop63-real-weights certifies by prop-6.3/head-rank, prop-6.3/attention-invertible)'
    """
    from symtrans.checker.statements import REQUIRED

    try:
        producer, ctx = record.get("producer"), record.get("context") or {}
        writer = ctx.get("producer") if isinstance(ctx, dict) else None
        # a producer may write records under names of their own (one per n, say); a certificate-writing producer
        # names its record itself, so a name that differs from the context's there is a relabelled record
        if not isinstance(ctx, dict) or (writer != producer and (producer in REQUIRED or writer in REQUIRED
                                                                 or not isinstance(writer, str))):
            return (f"the record names producer {_line(repr(producer), 60)} but its context "
                    f"{_line(repr(ctx.get('producer') if isinstance(ctx, dict) else ctx), 60)}")
        details = record.get("details") or {}
        certs = list(details.get("certificates") or []) + ([details["certificate"]] if details.get("certificate")
                                                           else [])
        if producer not in REQUIRED:
            return f"producer {_line(repr(producer), 60)} writes no certificates, yet the record carries some" \
                if certs else None
        if not certs:
            return f"the record carries no certificate ({producer} certifies by {', '.join(REQUIRED[producer])})"
        verdict = record.get("verdict")
        sids = []
        for cert in certs:
            ok, why = verify_certificate(cert, model, n=n, seed=seed)
            if not ok:
                return f"certificate not re-verified: {why}"
            sid = cert["statement_id"]
            sids.append(sid)
            st = STATEMENTS[sid]
            for field, want in (("claim", st.claim), ("reading", st.reading), ("producer", st.producer)):
                if record.get(field) != want:
                    return f"the record's {field} {_line(repr(record.get(field)), 40)} is not {sid}'s {want!r}"
            if verdict != st.verdict:  # a carried record says what its certificate proves, nothing weaker
                return f"the record's verdict {_line(repr(verdict), 20)} is not {sid}'s {st.verdict!r}"
            if st.primary and record.get("scope") != cert["scope"]:
                return f"the record's scope is not its certificate's ({sid}: {cert['scope']['kind']})"
        if record.get("counted", True) is not True:  # the registry's: a certificate's record counts
            return (f"the record's counted flag {_line(repr(record.get('counted')), 20)} is not the registry's "
                    f"(a record of {producer} counts)")
        if len(set(sids)) != len(sids):
            return "the record carries one statement twice"
        if not set(REQUIRED[producer]) <= set(sids):
            return f"the record lacks {', '.join(sorted(set(REQUIRED[producer]) - set(sids)))}"
        return None
    except Exception as err:  # noqa: BLE001 - fail closed
        return _line(f"malformed record ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})")
