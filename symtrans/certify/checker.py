"""A deliberately small, independent checker for certificate files; it fails closed.

Trusted code base (docs/certificates.md): this module, :mod:`symtrans.certify.statements`
(the trusted statement registry), :mod:`symtrans.certify.modelfile` (its own reading of
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

from symtrans.certify.modelfile import CheckedModel, ModelError, bundled_model_path, open_model
from symtrans.certify.statements import FREE, MAX_N, STATEMENTS, Dims, expected

__all__ = ["SCHEMA", "FIELDS", "MANIFEST", "digest", "verify_certificate", "check_header", "check_record",
           "manifest_problems", "file_hash", "MAX_PRECISION"]

SCHEMA = "symtrans-certificate/2"
FIELDS = ("schema", "statement_id", "claim", "reading", "producer", "statement", "scope", "asserts", "witness",
          "toolkit_version", "weights_hash", "digest")
#: ball precision (bits) a witness may ask for: 2^40 made flint allocate until it crashed
MIN_PRECISION, MAX_PRECISION = 16, 512
#: an exact entry "p" or "p/q": at most this many digits each (a 3 MB digit string took a minute to parse)
MAX_DIGITS = 64
_ENTRY = re.compile(r"-?[0-9]{1,%d}(/[0-9]{1,%d})?" % (MAX_DIGITS, MAX_DIGITS))
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
    D = 1
    for r in ratios:
        for q in r:
            if D % q.denominator:
                D = D * q.denominator // _gcd(D, q.denominator)
    if not ratios or not ratios[0]:
        raise Invalid("an empty matrix")
    return fmpz_mat([[q.numerator * (D // q.denominator) for q in r] for r in ratios]), D


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


_METHODS = {"exact-rank": _rank_items, "factor-minors": _factor_minors, "attention-det": _attention,
            "attention-det-ln": _attention_ln, "residual-minor": _residual, "head-sum-rank": _head_sum,
            "ln-affine-rank": _ln_affine}


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
    :data:`symtrans.evidence.DEFAULT_N` and 0, as ``symtrans certify``). Raises
    :class:`Invalid` (or :class:`ModelError`) on any mismatch.

    Examples
    --------
    >>> check_header({"schema": "x"})
    Traceback (most recent call last):
    ...
    symtrans.certify.checker.Invalid: missing fields: statement_id, claim, reading, producer, statement, scope, asserts, witness, toolkit_version, weights_hash, digest
    """
    if n is None:
        from symtrans.evidence import DEFAULT_N

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
        dims = Dims(n=n, seed=seed)
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
MANIFEST_SCHEMA = "symtrans-certificate-manifest/1"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes (a manifest entry).

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a"; _ = p.write_bytes(b"x")
    >>> file_hash(p) == hashlib.sha256(b"x").hexdigest()
    True
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def manifest_problems(directory: Path, manifest: Any, found: list[str], *, n: int, seed: int) -> list[tuple[str, str]]:
    """(file, why) for every way a certificate directory differs from its manifest; [] when it matches.

    The manifest lists every certificate file with its SHA-256 and the n and
    seed the directory was certified at; an unlisted file, a listed file that
    is missing or changed, or another n or seed than the caller's is refused.

    Examples
    --------
    >>> manifest_problems(Path("."), {"schema": MANIFEST_SCHEMA, "n": 8, "seed": 0, "files": {}}, ["a.json"], n=8, seed=0)
    [('a.json', 'not listed in the directory manifest')]
    """
    if not (isinstance(manifest, dict) and manifest.get("schema") == MANIFEST_SCHEMA
            and isinstance(manifest.get("files"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in manifest["files"].items())):
        return [(MANIFEST, "not a certificate manifest")]
    out = []
    if manifest.get("n") != n or manifest.get("seed") != seed or type(manifest.get("n")) is not int:
        out.append((MANIFEST, f"certified at n = {_line(repr(manifest.get('n')), 20)}, seed "
                              f"{_line(repr(manifest.get('seed')), 20)}; verified at n = {n}, seed {seed}"))
    listed = manifest["files"]
    for name in found:
        if name not in listed:
            out.append((name, "not listed in the directory manifest"))
    for name, h in listed.items():
        p = directory / name
        if "/" in name or "\\" in name or name in (".", "..") or not p.is_file():
            out.append((_line(name, 80), "listed in the manifest but missing"))
        elif file_hash(p) != h:
            out.append((name, "differs from the manifest's hash"))
    return out


# ------------------------------------------------------------------ records carried from an earlier report
def check_record(record: dict[str, Any], model: Any = None, *, n: int | None = None, seed: int = 0) -> str | None:
    """Why an evidence record (as a dict) may not count on its certificates; None when it may.

    The record's producer must agree with its context's producer; where the
    producer writes certificates (the registry's ``REQUIRED``), the record must carry
    every statement it requires, each certificate must re-verify (whatever the
    record's verdict, ``fails`` included) on ``model`` at ``n`` and ``seed``, and
    the record's claim, reading, producer, verdict and scope must be the
    registry's and its certificates'. A record of another producer must carry none.

    Examples
    --------
    >>> check_record({"claim": "prop-6.3", "producer": "prop63-real-weights", "verdict": "certified",
    ...               "context": {"producer": "prop51-witness"}, "details": {}})
    "the record names producer 'prop63-real-weights' but its context 'prop51-witness'"
    >>> check_record({"claim": "prop-6.3", "producer": "prop63-real-weights", "verdict": "certified",
    ...               "context": {"producer": "prop63-real-weights"}, "details": {}})
    'the record carries no certificate (prop63-real-weights certifies by prop-6.3/head-rank, prop-6.3/attention-invertible)'
    """
    from symtrans.certify.statements import REQUIRED

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
            if verdict not in (st.verdict, "inconclusive", "not-applicable"):
                return f"the record's verdict {_line(repr(verdict), 20)} is not {sid}'s {st.verdict!r}"
            if verdict == st.verdict and st.primary and record.get("scope") != cert["scope"]:
                return f"the record's scope is not its certificate's ({sid}: {cert['scope']['kind']})"
        if len(set(sids)) != len(sids):
            return "the record carries one statement twice"
        if verdict in {STATEMENTS[s].verdict for s in sids} and not set(REQUIRED[producer]) <= set(sids):
            return f"the record lacks {', '.join(sorted(set(REQUIRED[producer]) - set(sids)))}"
        return None
    except Exception as err:  # noqa: BLE001 - fail closed
        return _line(f"malformed record ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})")
