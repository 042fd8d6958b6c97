"""A deliberately small, independent checker for certificate files.

It imports only python-flint, :mod:`json`, :mod:`hashlib`, :mod:`fractions` and the weight
loader (:func:`symtrans.numeric.weights.load_model`), and no producer code: every
value in a certificate's ``asserts`` is recomputed from its ``witness`` with
exact integer/rational arithmetic (``fmpz_mat``, ``nmod_mat``) or rigorous ball
arithmetic (``arb``, ``arb_mat``), and compared.

What it trusts: FLINT/Arb's arithmetic, the weight loader's reading of the
safetensors file (its SHA-256 must equal the certificate's ``weights_hash``),
the CPython float -> integer ratio conversion, and the mathematical argument
stated in each certificate's ``statement`` (e.g. that a non-zero k x k minor
means rank >= k). The ``digest`` field (SHA-256 of the rest) catches accidental
edits; it is no signature: soundness comes from the recomputation.

Witness methods:

``exact-rank``       rank over Q of weight matrices (mod-p rank, exact fallback)
``product-minor``    rank(A B) = k from a non-zero k x k minor of A B and k = inner/outer bound
``factor-minors``    rank(A B) = k from non-zero k x k minors of A and of B (Sylvester) and k = inner dimension
``attention-det``    det exp(X W_Q W_K^T X^T / sqrt d_k) != 0 (A^h invertible), X exact input
``residual-minor``   a non-zero (r+1)-minor of F(X*_r) = X*_r + sum_h A^h X*_r W_V^h W_O^h
``attention-det-ln`` the same at X = LayerNorm(word[ids] + pos[:n] + type[0]) (exact mean/variance, ball sqrt)
``head-sum-rank``    every A^h invertible and dim(R_1 + ... + R_H) > n >= rank MHA(X) (inline weights)

Examples
--------
>>> cert = {"schema": SCHEMA, "claim": "c", "reading": None, "producer": "p", "statement": "s",
...         "scope": {"kind": "instances", "description": "d"}, "asserts": {"rank": {"m": 1}},
...         "witness": {"method": "exact-rank", "inline": {"m": [["1", "2"], ["2", "4"]]}, "modulus": 7},
...         "toolkit_version": "0", "weights_hash": None}
>>> cert["digest"] = digest(cert)
>>> verify_certificate(cert)
(True, 'rank m = 1')
>>> cert["asserts"]["rank"]["m"] = 2
>>> verify_certificate(cert)[1]
'digest mismatch: the certificate was altered after it was written'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

__all__ = ["SCHEMA", "FIELDS", "digest", "verify_certificate"]

SCHEMA = "symtrans-certificate/1"
FIELDS = ("schema", "claim", "reading", "producer", "statement", "scope", "asserts", "witness",
          "toolkit_version", "weights_hash", "digest")

_MODELS: dict[str, Any] = {}


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


# ------------------------------------------------------------------ exact input
def _int_rows(rows: list[list[Any]]) -> tuple[Any, int]:
    """(fmpz_mat Z, D) with rows == Z / D exactly; entries are floats (exact dyadics), ints, Fractions or "p/q"."""
    from flint import fmpz_mat

    if all(type(v) is float for r in rows for v in r):  # dyadic: every denominator is a power of two
        pairs = [[v.as_integer_ratio() for v in r] for r in rows]
        D = max((q for r in pairs for _, q in r), default=1)
        return fmpz_mat([[p * (D // q) for p, q in r] for r in pairs]), D
    ratios = [[_q(v) for v in r] for r in rows]
    D = 1
    for r in ratios:
        for q in r:
            if D % q.denominator:
                D = D * q.denominator // _gcd(D, q.denominator)
    return fmpz_mat([[q.numerator * (D // q.denominator) for q in r] for r in ratios]), D


def _q(v: Any) -> Fraction:
    """The exact value of a float (a dyadic rational), an int, a Fraction or a "p/q" string."""
    if isinstance(v, (Fraction, int, str)):
        return Fraction(v)
    return Fraction(*float(v).as_integer_ratio())


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


class _Source:
    """The matrices a certificate names: model tensors (by weights hash) or inline exact entries."""

    def __init__(self, cert: dict[str, Any]):
        w = cert["witness"]
        self.inline = w.get("inline")
        self.weights = None
        if "model" in w:
            spec = str(w["model"])
            if spec not in _MODELS:
                from symtrans.numeric.weights import load_model

                _MODELS[spec] = load_model(spec, dtype="float64", device="cpu")
            self.weights = _MODELS[spec]
            if self.weights.weights_hash != cert["weights_hash"]:
                raise Invalid(f"weights hash differs: certificate {str(cert['weights_hash'])[:12]}..., "
                              f"model {spec!r} has {self.weights.weights_hash[:12]}...")

    def rows(self, spec: Any) -> list[list[Any]]:
        """The matrix named by ``spec`` as rows of floats or exact strings."""
        if isinstance(spec, str):
            if not self.inline or spec not in self.inline:
                raise Invalid(f"witness names no inline matrix {spec!r}")
            return self.inline[spec]
        if self.weights is None:
            raise Invalid("witness names a tensor but no model")
        t = self.weights.tensors[spec["tensor"]]
        for i in spec.get("index", []):
            t = t[int(i)]
        if "rows" in spec:
            t = t[[int(i) for i in spec["rows"]]]
        if "reshape" in spec:
            t = t.reshape(*[int(x) for x in spec["reshape"]])
        if t.dim() == 1:
            t = t.reshape(1, -1)
        return t.tolist()


def _kv_head(src: _Source, l: int, h: int) -> int:
    """The key/value head query head ``h`` of layer ``l`` reads (grouped-query attention), from the tensor shapes."""
    H, Hkv = len(src.weights.tensors["W_Q"][l]), len(src.weights.tensors["W_K"][l])
    if Hkv < 1 or H % Hkv or not 0 <= h < H:
        raise Invalid(f"layer {l} head {h}: not a query head of {H} sharing {Hkv} key/value heads")
    return h // (H // Hkv)


def _rank_items(cert: dict[str, Any], src: _Source) -> str:
    """exact-rank: rank mod p (p prime, a lower bound) equal to min(shape), else the exact rank over Q."""
    from flint import fmpz, nmod_mat

    w, claimed = cert["witness"], cert["asserts"]["rank"]
    p = int(w["modulus"])
    if not fmpz(p).is_prime():
        raise Invalid(f"modulus {p} is not prime")
    names = dict(w.get("matrices", {}))
    names.update({k: k for k in (w.get("inline") or {})})
    if set(names) != set(claimed):
        raise Invalid("asserted ranks and witness matrices name different items")
    for item, spec in names.items():
        Z, _ = _int_rows(src.rows(spec))
        if Z.nrows() * Z.ncols() and int(claimed[item]) < min(Z.nrows(), Z.ncols()) and max(Z.nrows(), Z.ncols()) > 160:
            raise Invalid(f"{item}: a rank below full is re-checked only up to 160 x 160")
        rp = int(nmod_mat(Z, p).rank())
        if not (rp == claimed[item] == min(Z.nrows(), Z.ncols())):
            if int(Z.rank()) != claimed[item]:
                raise Invalid(f"rank of {item} is {int(Z.rank())}, not {claimed[item]}")
    return ", ".join(f"rank {k} = {v}" for k, v in claimed.items())


def _product_minor(cert: dict[str, Any], src: _Source) -> str:
    """product-minor: k = |rows| = |cols|, det (A[rows] B[:, cols]) != 0 exactly, and rank(A B) <= k."""
    items, claimed = cert["witness"]["items"], cert["asserts"]["rank"]
    if set(items) != set(claimed):
        raise Invalid("asserted ranks and witness items differ")
    for item, it in items.items():
        A, B = src.rows(it["left"]), src.rows(it["right"])
        rows, cols = [int(i) for i in it["rows"]], [int(j) for j in it["cols"]]
        k = len(rows)
        if len(cols) != k or len(set(rows)) != k or len(set(cols)) != k:
            raise Invalid(f"{item}: minor indices are not k distinct rows and k distinct columns")
        bound = min(len(A), len(A[0]), len(B[0]))
        if len(B) != len(A[0]):
            raise Invalid(f"{item}: factors do not multiply")
        if claimed[item] != k or bound != k:
            raise Invalid(f"{item}: asserted rank {claimed[item]} but minor size {k} and upper bound {bound}")
        Za, _ = _int_rows([A[i] for i in rows])
        Zb, _ = _int_rows([[row[j] for j in cols] for row in B])
        if (Za * Zb).det() == 0:
            raise Invalid(f"{item}: the minor's determinant is 0")
    return f"{len(items)} ranks from non-zero minors"


def _nonzero_det(Z: Any, p: int) -> bool:
    """det Z != 0 over Z: mod the prime p (non-zero mod p is non-zero), else the exact determinant."""
    from flint import nmod_mat

    return int(nmod_mat(Z, p).det()) != 0 or Z.det() != 0


def _factor_minors(cert: dict[str, Any], src: _Source) -> str:
    """factor-minors: k x k minors of A (k columns) and B (k rows) non-zero, so rank(A B) = k (Sylvester)."""
    from flint import fmpz

    w, claimed = cert["witness"], cert["asserts"]["rank"]
    items, p = w["items"], int(w["modulus"])
    if not fmpz(p).is_prime():
        raise Invalid(f"modulus {p} is not prime")
    if set(items) != set(claimed):
        raise Invalid("asserted ranks and witness items differ")
    for item, it in items.items():
        A, B = src.rows(it["left"]), src.rows(it["right"])
        rows, cols = [int(i) for i in it["rows"]], [int(j) for j in it["cols"]]
        k = len(A[0])
        if len(B) != k:
            raise Invalid(f"{item}: factors do not multiply")
        if not (len(rows) == len(set(rows)) == k and len(cols) == len(set(cols)) == k):
            raise Invalid(f"{item}: minors are not k = {k} distinct rows of the left and columns of the right factor")
        if claimed[item] != k:
            raise Invalid(f"{item}: asserted rank {claimed[item]} but the inner dimension is {k}")
        if not _nonzero_det(_int_rows([A[i] for i in rows])[0], p):
            raise Invalid(f"{item}: the left factor's minor has determinant 0")
        if not _nonzero_det(_int_rows([[row[j] for j in cols] for row in B])[0], p):
            raise Invalid(f"{item}: the right factor's minor has determinant 0")
    return f"{len(items)} ranks from non-zero factor minors"


def _sign(x: Any, what: str) -> int:
    if 0 in x:
        raise Invalid(f"{what}: the enclosure {x.str(5)} contains 0")
    return 1 if x > 0 else -1


@contextlib.contextmanager
def _precision(bits: Any) -> Iterator[None]:
    """Set flint's working precision (bits) for the enclosed ball arithmetic, restoring it afterwards."""
    from flint import ctx

    old = ctx.prec
    ctx.prec = int(bits)
    try:
        yield
    finally:
        ctx.prec = old


def _embedding_parts(src: _Source, ids: list[int]) -> list[Any]:
    """The rows whose sum is the embedding input X: word[ids], then pos[:n] and type[0] where the model has them."""
    n = len(ids)
    parts = [src.rows({"tensor": "word", "rows": ids})]
    if src.weights.tensors.get("pos") is not None:
        parts.append(src.rows({"tensor": "pos"})[:n])
    if src.weights.tensors.get("type") is not None:
        parts.append(src.rows({"tensor": "type", "index": [0]}) * n)
    return parts


def _attention(cert: dict[str, Any], src: _Source) -> str:
    """attention-det: X = word[ids] + pos[:n] + type[0] exactly; sign det exp(S / sqrt d_k) in arb."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["det_sign"]
    ids = [int(i) for i in w["input"]["ids"]]
    n = len(ids)
    parts = _embedding_parts(src, ids)
    mats = [_int_rows(P) for P in parts]  # X = sum_k Z_k / D_k exactly (a float sum could round)
    Dx = max(D for _, D in mats)
    Zx = mats[0][0] * (Dx // mats[0][1])
    for Z, D in mats[1:]:
        Zx = Zx + Z * (Dx // D)
    if set(w["items"]) != set(claimed):
        raise Invalid("asserted signs and witness items differ")
    with _precision(w["precision"]):
        for item, it in w["items"].items():
            l, h = int(it["layer"]), int(it["head"])
            Zq, Dq = _int_rows(src.rows({"tensor": "W_Q", "index": [l, h]}))
            Zk, Dk = _int_rows(src.rows({"tensor": "W_K", "index": [l, _kv_head(src, l, h)]}))
            S = (Zx * Zq) * (Zx * Zk).transpose()  # exact: X W_Q (X W_K)^T times Dx^2 Dq Dk
            scale = 1 / (arb(Dx) * Dx * Dq * Dk * arb(Zq.ncols()).sqrt())
            E = arb_mat(n, n, [(arb(v) * scale).exp() for v in S.entries()])
            if _sign(E.det(), item) != claimed[item]:
                raise Invalid(f"{item}: determinant sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} attention matrices invertible"


def _attention_ln(cert: dict[str, Any], src: _Source) -> str:
    """attention-det-ln: X = LayerNorm(word[ids] + pos[:n] + type[0]) in arb (exact mean and variance)."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["det_sign"]
    ids = [int(i) for i in w["input"]["ids"]]
    n = len(ids)
    parts = _embedding_parts(src, ids)
    gamma = [_q(v) for v in src.rows({"tensor": "emb_ln_w"})[0]]
    beta = ([_q(v) for v in src.rows({"tensor": "emb_ln_b"})[0]] if src.weights.tensors.get("emb_ln_b") is not None
            else [Fraction(0)] * len(gamma))
    eps = _q(float(w["eps"]))
    if set(w["items"]) != set(claimed):
        raise Invalid("asserted signs and witness items differ")
    with _precision(w["precision"]):
        rows = []
        for i in range(n):
            x = [sum((_q(P[i][j]) for P in parts), Fraction(0)) for j in range(len(gamma))]
            mean = sum(x, Fraction(0)) / len(x)
            var = sum(((v - mean) ** 2 for v in x), Fraction(0)) / len(x)
            root = (arb(var.numerator) / var.denominator + arb(eps.numerator) / eps.denominator).sqrt()
            rows.append([(arb((v - mean).numerator) / (v - mean).denominator) / root * (arb(g.numerator) / g.denominator)
                         + arb(b.numerator) / b.denominator for v, g, b in zip(x, gamma, beta)])
        X = arb_mat(rows)
        for item, it in w["items"].items():
            l, h = int(it["layer"]), int(it["head"])
            Q = X * arb_mat(src.rows({"tensor": "W_Q", "index": [l, h]}))
            K = X * arb_mat(src.rows({"tensor": "W_K", "index": [l, _kv_head(src, l, h)]}))
            S = Q * K.transpose()
            root = arb(K.ncols()).sqrt()
            E = arb_mat(n, n, [(S[i, j] / root).exp() for i in range(n) for j in range(n)])
            if _sign(E.det(), item) != claimed[item]:
                raise Invalid(f"{item}: determinant sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} attention matrices at the LayerNorm input invertible"


def _residual(cert: dict[str, Any], src: _Source) -> str:
    """residual-minor: rows 0..r, given columns, of F(X*_r) enclosed in arb from the definition."""
    from flint import arb, arb_mat

    w, claimed = cert["witness"], cert["asserts"]["minor_sign"]
    n = int(w["n"])
    if set(w["items"]) != set(claimed):
        raise Invalid("asserted signs and witness items differ")
    with _precision(w["precision"]):
        cache: dict[int, list[list[Any]]] = {}
        for item, it in w["items"].items():
            l, r, cols = int(it["layer"]), int(it["r"]), [int(c) for c in it["cols"]]
            if len(cols) != r + 1 or len(set(cols)) != r + 1 or not 1 <= r < n:
                raise Invalid(f"{item}: need r + 1 distinct columns and 1 <= r < n")
            if l not in cache:
                cache = {l: [[src.rows({"tensor": t, "index": [l, _kv_head(src, l, h) if t in ("W_K", "W_V") else h]})
                              for t in ("W_Q", "W_K", "W_V", "W_O")]
                             for h in range(len(src.weights.tensors["W_Q"][l]))]}
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
            if _sign(F.det(), item) != claimed[item]:
                raise Invalid(f"{item}: minor sign differs from the asserted {claimed[item]}")
    return f"{len(claimed)} residual minors non-zero"


def _head_sum(cert: dict[str, Any], src: _Source) -> str:
    """head-sum-rank: every A^h invertible (arb), dim(sum_h rowspace X W_V^h W_O^h) exact, > n = rows of X."""
    from flint import arb, arb_mat, fmpq_mat

    w, a = cert["witness"], cert["asserts"]
    Zx, Dx = _int_rows(src.rows(w["X"]))
    n = Zx.nrows()
    if a["rows_of_MHA"] != n or not a["dim_sum_R"] > n:
        raise Invalid(f"asserted n = {a['rows_of_MHA']} (X has {n} rows) and dim {a['dim_sum_R']} do not refute")
    if set(a["det_sign"]) != {str(i) for i in range(len(w["heads"]))}:
        raise Invalid("asserted signs and heads differ")
    stacked = []
    with _precision(w["precision"]):
        for i, head in enumerate(w["heads"]):
            (Zq, Dq), (Zk, Dk), (Zv, Dv), (Zo, Do) = (_int_rows(src.rows(head[m])) for m in ("W_Q", "W_K", "W_V", "W_O"))
            S = (Zx * Zq) * (Zx * Zk).transpose()
            scale = 1 / (arb(Dx) * Dx * Dq * Dk * arb(Zq.ncols()).sqrt())
            E = arb_mat(n, n, [(arb(v) * scale).exp() for v in S.entries()])
            if _sign(E.det(), f"head {i}") != a["det_sign"][str(i)]:
                raise Invalid(f"head {i}: determinant sign differs from the asserted one")
            stacked += (Zx * Zv * Zo).tolist()  # rowspace of X W_V W_O (positive scale Dx Dv Do dropped)
    dim = int(fmpq_mat(stacked).rank())
    if dim != a["dim_sum_R"]:
        raise Invalid(f"dim(sum R_h) is {dim}, not {a['dim_sum_R']}")
    return f"rank MHA(X) <= {n} < dim(sum R_h) = {dim} with every A^h invertible"


_METHODS = {"exact-rank": _rank_items, "product-minor": _product_minor, "factor-minors": _factor_minors,
            "attention-det": _attention,
            "residual-minor": _residual, "head-sum-rank": _head_sum,
            "attention-det-ln": _attention_ln}


def verify_certificate(data: dict[str, Any]) -> tuple[bool, str]:
    """Re-check one certificate from its witness; return (valid, one-line reason).

    Examples
    --------
    >>> verify_certificate({"schema": "other"})
    (False, 'missing fields: claim, reading, producer, statement, scope, asserts, witness, toolkit_version, weights_hash, digest')
    """
    if not isinstance(data, dict):
        return False, "not a certificate object"
    missing = [f for f in FIELDS if f not in data]
    if missing:
        return False, "missing fields: " + ", ".join(missing)
    if data["schema"] != SCHEMA:
        return False, f"unknown schema {data['schema']!r}"
    if data["digest"] != digest(data):
        return False, "digest mismatch: the certificate was altered after it was written"
    method = (data["witness"] or {}).get("method") if isinstance(data["witness"], dict) else None
    if method not in _METHODS:
        return False, f"unknown witness method {method!r}"
    try:
        return True, _METHODS[method](data, _Source(data))
    except Invalid as err:
        return False, str(err)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError) as err:
        return False, f"malformed witness ({type(err).__name__}: {err})"
