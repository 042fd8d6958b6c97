"""Certificate files and the independent checker: real certificates pass, every kind of tampering is refused."""

import copy
import json

import numpy as np
import pytest
import sympy as sp

from symtrans.certify.checker import digest, verify_certificate
from symtrans.certify.producers import Scope, certificate
from symtrans.certify.real import (ATTENTION_PRECISION, MODULUS, LayerResidual, attention_det, embedding_input,
                                   head_factor_minors, head_product_minor, stacked_wo_rank)
from symtrans.cli import main
from symtrans.numeric import load_model


@pytest.fixture(scope="module")
def weights():
    return load_model("default")


def _reseal(cert):
    cert = copy.deepcopy(cert)
    cert["digest"] = digest(cert)
    return cert


@pytest.fixture(scope="module")
def certs(weights):
    """Small real-weight certificates of every witness method (one or two layers/heads each)."""
    w = weights
    wo = stacked_wo_rank(w.W_O[1].reshape(384, 384))
    rank_cert = certificate("thm-recovery", "thm-recovery/wo", "t", "rank", Scope("instances", "layer 1"),
                            {"rank": {"layer 1": wo["rank"]}},
                            {"method": "exact-rank", "model": "default", "modulus": MODULUS,
                             "matrices": {"layer 1": {"tensor": "W_O", "index": [1], "reshape": [384, 384]}}},
                            w.weights_hash)
    m = head_product_minor(w.W_V[2, 3], w.W_O[2, 3])
    minor_cert = certificate("prop-6.3", None, "t", "rank", Scope("instances", "one head"),
                             {"rank": {"layer 2 head 3": m["rank"]}},
                             {"method": "product-minor", "model": "default",
                              "items": {"layer 2 head 3": {"left": {"tensor": "W_V", "index": [2, 3]},
                                                           "right": {"tensor": "W_O", "index": [2, 3]},
                                                           "rows": m["rows"], "cols": m["cols"]}}},
                             w.weights_hash)
    f = head_factor_minors(w.W_V[2], w.W_O[2])[3]
    factor_cert = certificate("prop-6.3", None, "t", "rank", Scope("instances", "one head"),
                              {"rank": {"layer 2 head 3": f["rank"]}},
                              {"method": "factor-minors", "model": "default", "modulus": MODULUS,
                               "items": {"layer 2 head 3": {"left": {"tensor": "W_V", "index": [2, 3]},
                                                            "right": {"tensor": "W_O", "index": [2, 3]},
                                                            "rows": f["rows"], "cols": f["cols"]}}},
                              w.weights_hash)
    ids = list(range(2000, 2016))
    det = attention_det(embedding_input(w, ids), w.W_Q[0, 1], w.W_K[0, 1], ATTENTION_PRECISION)
    att_cert = certificate("prop-6.3", None, "t", "A invertible", Scope("instances", "n = 16"),
                           {"det_sign": {"layer 0 head 1": 1 if det > 0 else -1}},
                           {"method": "attention-det", "model": "default", "precision": ATTENTION_PRECISION,
                            "input": {"ids": ids}, "items": {"layer 0 head 1": {"layer": 0, "head": 1}}},
                           w.weights_hash)
    res = LayerResidual(w.layer(4), 128, 3)
    items, signs = {}, {}
    for r in (1, 2, 3):
        cols, d = res.minor(r)
        items[f"layer 4 r {r}"] = {"layer": 4, "r": r, "cols": cols}
        signs[f"layer 4 r {r}"] = 1 if d > 0 else -1
    res_cert = certificate("thm-5.3", None, "t", "minor", Scope("instances", "layer 4"), {"minor_sign": signs},
                           {"method": "residual-minor", "model": "default", "n": 128, "precision": 128,
                            "items": items}, w.weights_hash)
    return {"rank": rank_cert, "minor": minor_cert, "factors": factor_cert, "attention": att_cert,
            "residual": res_cert}


def test_real_certificates_verify(certs):
    for name, cert in certs.items():
        ok, why = verify_certificate(json.loads(json.dumps(cert)))  # through JSON, as from a file
        assert ok, (name, why)


def test_digest_catches_any_edit(certs):
    cert = copy.deepcopy(certs["rank"])
    cert["statement"] += " "
    assert verify_certificate(cert) == (False, "digest mismatch: the certificate was altered after it was written")


@pytest.mark.parametrize("name,path,value", [
    ("rank", ("asserts", "rank", "layer 1"), 383),
    ("minor", ("asserts", "rank", "layer 2 head 3"), 31),
    ("factors", ("asserts", "rank", "layer 2 head 3"), 31),
    ("attention", ("asserts", "det_sign", "layer 0 head 1"), None),  # flipped
    ("residual", ("asserts", "minor_sign", "layer 4 r 2"), None),  # flipped
])
def test_altered_assert_is_refused_by_recomputation(certs, name, path, value):
    cert = copy.deepcopy(certs[name])
    node = cert
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = -node[path[-1]] if value is None else value
    ok, why = verify_certificate(_reseal(cert))  # resealed: only the recomputation can catch it
    assert not ok and "digest" not in why


def test_altered_witness_is_refused(certs):
    cert = copy.deepcopy(certs["minor"])
    item = cert["witness"]["items"]["layer 2 head 3"]
    item["rows"][1] = item["rows"][0]  # a repeated row: the "minor" is singular / not a minor
    assert not verify_certificate(_reseal(cert))[0]
    cert = copy.deepcopy(certs["minor"])
    cert["witness"]["items"]["layer 2 head 3"]["right"] = {"tensor": "W_O", "index": [2, 3], "rows": [0] * 32}
    ok, why = verify_certificate(_reseal(cert))  # W_O replaced by 32 copies of its first row: rank 1
    assert not ok and "determinant is 0" in why
    cert = copy.deepcopy(certs["factors"])
    cert["witness"]["items"]["layer 2 head 3"]["right"] = {"tensor": "W_O", "index": [2, 3], "rows": [0] * 32}
    ok, why = verify_certificate(_reseal(cert))  # the right factor of rank 1: its minor is singular
    assert not ok and "right factor's minor has determinant 0" in why
    cert = copy.deepcopy(certs["factors"])
    cert["witness"]["items"]["layer 2 head 3"]["rows"][1] = cert["witness"]["items"]["layer 2 head 3"]["rows"][0]
    assert not verify_certificate(_reseal(cert))[0]  # a repeated row is no minor
    cert = copy.deepcopy(certs["factors"])
    cert["witness"]["modulus"] = 2**61  # not prime: mod-p ranks prove nothing
    assert "not prime" in verify_certificate(_reseal(cert))[1]
    cert = copy.deepcopy(certs["residual"])
    cert["witness"]["items"]["layer 4 r 3"]["cols"] = [0, 1, 2]  # X*_3 alone: the minor is not certified
    cert["witness"]["n"] = 10**9
    assert not verify_certificate(_reseal(cert))[0]


def test_singular_inline_matrix_refused():
    cert = certificate("c", None, "p", "s", Scope("instances", "d"), {"rank": {"M": 2}},
                       {"method": "exact-rank", "inline": {"M": [["1", "2"], ["2", "4"]]}, "modulus": MODULUS}, None)
    assert verify_certificate(cert) == (False, "rank of M is 1, not 2")
    cert = certificate("c", None, "p", "s", Scope("instances", "d"), {"rank": {"M": 2}},
                       {"method": "exact-rank", "inline": {"M": [["1", "0"], ["0", "1"]]}, "modulus": 91}, None)
    assert verify_certificate(cert) == (False, "modulus 91 is not prime")


def test_altered_weights_hash_is_refused(certs):
    cert = copy.deepcopy(certs["rank"])
    cert["weights_hash"] = "0" * 64
    ok, why = verify_certificate(_reseal(cert))
    assert not ok and why.startswith("weights hash differs")


def test_verify_cli_exit_codes(certs, tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    (good / "a.json").write_text(json.dumps(certs["minor"]))
    assert main(["verify", str(good)]) == 0
    bad = copy.deepcopy(certs["minor"])
    bad["asserts"]["rank"]["layer 2 head 3"] = 33
    (good / "b.json").write_text(json.dumps(bad))
    capsys.readouterr()
    assert main(["verify", str(good)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sum("INVALID" in line for line in out) == 1 and "b.json" in next(l for l in out if "INVALID" in l)
    (tmp_path / "junk.json").write_text("{not json")
    assert main(["verify", str(tmp_path / "junk.json")]) == 2
    assert main(["verify", str(tmp_path / "missing")]) == 2
    assert "symtrans: error:" in capsys.readouterr().err


def test_head_minor_against_sympy_route(weights):
    """The exact minor determinant against SymPy on the same exact rationals (an independent route)."""
    V, O = weights.W_V[0, 0].double().numpy(), weights.W_O[0, 0].double().numpy()
    m = head_product_minor(V, O)
    rows, cols = m["rows"][:6], m["cols"][:6]  # a 6 x 6 corner keeps SymPy fast
    Vq = sp.Matrix([[sp.Rational(*float(V[i, t]).as_integer_ratio()) for t in range(32)] for i in rows])
    Oq = sp.Matrix([[sp.Rational(*float(O[t, j]).as_integer_ratio()) for j in cols] for t in range(32)])
    from symtrans.certify.exact import det_q

    assert sp.Rational(str(det_q((Vq * Oq).tolist()))) == (Vq * Oq).det()


def test_factor_minors_against_numpy_ranks(weights):
    """Factor minors certify exactly the heads numpy calls full rank, and refuse a head with a rank-deficient W_O."""
    V, O = weights.W_V[1].double().numpy().copy(), weights.W_O[1].double().numpy().copy()
    O[4, 7] = 0.5 * O[4, 3] - 0.25 * O[4, 9]  # row 7 of head 4's W_O: an exact dependency over Q
    out = head_factor_minors(V, O)
    for h, m in enumerate(out):
        full = np.linalg.matrix_rank(V[h] @ O[h]) == 32
        assert (m["rank"] == 32) == full == (h != 4), h
        assert len(set(m["rows"])) == len(set(m["cols"])) == 32
    assert out[4]["V_minor_nonzero"] and not out[4]["O_minor_nonzero"]


def test_residual_minor_against_float_forward():
    """The arb minor encloses the determinant of the same minor of F computed densely in float64."""
    rng = np.random.default_rng(3)
    H, d, k, n = 2, 6, 3, 9
    L = {name: rng.standard_normal((H, d, k)) for name in ("W_Q", "W_K", "W_V")}
    L["W_O"] = rng.standard_normal((H, k, d))
    res = LayerResidual(L, n, 4)
    for r in range(1, 5):
        X = np.zeros((n, d))
        X[np.arange(r), np.arange(r)] = 1.0
        F = X.copy()
        for h in range(H):  # the definition, densely: every row, every score
            S = (X @ L["W_Q"][h]) @ (X @ L["W_K"][h]).T / np.sqrt(k)
            A = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
            F += A @ X @ L["W_V"][h] @ L["W_O"][h]
        cols, det = res.minor(r)
        ref = np.linalg.det(F[: r + 1][:, cols])
        assert 0 not in det and abs(float(det.mid()) - ref) <= 1e-9 * max(1.0, abs(ref))
        assert np.linalg.matrix_rank(F) == r + 1  # rows r..n-1 coincide: rank is exactly r + 1


def test_attention_det_sign_against_numpy():
    rng = np.random.default_rng(5)
    from symtrans.certify.exact import dyadic_matrix

    X = rng.standard_normal((7, 5))
    WQ, WK = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    det = attention_det(dyadic_matrix(X), WQ, WK, 64)
    ref = np.linalg.det(np.exp(X @ WQ @ (X @ WK).T / np.sqrt(3)))
    assert 0 not in det and np.sign(ref) == (1 if det > 0 else -1)
    assert abs(float(det.mid()) - ref) <= 1e-8 * abs(ref)
    twin = np.vstack([X, X[:1]])  # a repeated token: two equal rows of A, det exactly 0
    assert 0 in attention_det(dyadic_matrix(twin), WQ, WK, 64)


def test_stacked_rank_detects_deficiency(weights):
    W = weights.W_O[0].reshape(384, 384).double().numpy().copy()
    W[5] = 0.5 * W[3] - 0.25 * W[7]  # exactly representable: a true dependency over Q
    out = stacked_wo_rank(W)  # too large for exact elimination of a deficient matrix: the lower bound only
    assert out["rank"] is None and out["rank_mod_p"] == 383
    assert np.linalg.matrix_rank(W) == 383
    small = stacked_wo_rank(W[:150, :150])  # the same dependency, small enough to decide exactly
    assert small["rank"] == 149 and small["rank_mod_p"] == 149 and np.linalg.matrix_rank(W[:150, :150]) == 149
    Z = W.copy()
    Z[[3, 9, 40]] = 0.0  # silenced rows: dropped exactly, the rest is full rank mod p
    assert stacked_wo_rank(Z)["rank"] == 381


def test_prop62_refuting_certificate():
    """The prop-6.2/identity counterexample ships a certificate; a changed weight entry breaks it."""
    from symtrans.certify.producers import prop62
    from symtrans.evidence import Context

    (ev,) = prop62(Context(model=None))
    cert = ev.details["certificate"]
    assert ev.verdict.label == "fails" and verify_certificate(json.loads(json.dumps(cert)))[0]
    bad = copy.deepcopy(cert)
    bad["witness"]["inline"]["h0.W_V"] = [["0"] * len(r) for r in bad["witness"]["inline"]["h0.W_V"]]
    ok, why = verify_certificate(_reseal(bad))  # head 0 contributes nothing: the sum has lower dimension
    assert not ok and why.startswith("dim(sum R_h) is")


def test_certify_out_then_verify(tmp_path, capsys):
    """certify --out writes the refuting certificate of prop-6.2; verify accepts it, then refuses an edit."""
    out = tmp_path / "certs"
    assert main(["certify", "prop-6.2", "--model", "none", "--out", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["prop62-counterexample.json"]
    assert main(["verify", str(out)]) == 0
    data = json.loads((out / files[0]).read_text())
    data["asserts"]["rows_of_MHA"] = 3  # n = 3 would not refute dim 3
    (out / files[0]).write_text(json.dumps(_reseal(data)))
    capsys.readouterr()
    assert main(["verify", str(out / files[0])]) == 1
    assert "INVALID" in capsys.readouterr().out


def test_certificates_on_another_checkpoint_verify(tmp_path):
    """A random DistilBERT checkpoint (no token types, 40 positions): every real-weight certificate checks."""
    from symtrans.certify.producers import prop63_real, recovery_real, thm53_real
    from symtrans.cli.certify import write_certificates
    from symtrans.evidence import Context
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / "m", "distilbert", n_layers=2)
    ctx = Context(model=str(path), n=40)
    evs = [ev.to_dict() for f in (prop63_real, recovery_real, thm53_real) for ev in f(ctx)]
    out = tmp_path / "certs"
    files, _ = write_certificates({"claims": [{"id": "c", "evidence": evs}]}, str(out))
    names = sorted(p.name for p in out.iterdir())
    assert names == ["prop63-real-weights-1.json", "prop63-real-weights-2.json", "prop63-real-weights-3.json",
                     "recovery-wo-real.json", "thm53-real-weights.json"]
    assert main(["verify", str(out)]) == 0
    cert = json.loads((out / "thm53-real-weights.json").read_text())
    assert any(it["r"] in it["cols"] for it in cert["witness"]["items"].values())  # column r is exercised
    assert len(json.loads((out / "prop63-real-weights-2.json").read_text())["witness"]["input"]["ids"]) == 40


def test_layernorm_ball_encloses_torch_and_its_certificate_checks(weights):
    """The arb LayerNorm against the torch forward (float64), then an attention-det-ln certificate and a flip."""
    from symtrans.certify.real import attention_det_ball, layernorm_ball
    from symtrans.numeric.forward import embed

    w, ids = weights, list(range(3000, 3016))
    X = layernorm_ball(embedding_input(w, ids), w.emb_ln_w, w.emb_ln_b, w.arch.ln_eps, 128)
    ref = embed(w, ids).numpy()
    assert max(abs(float(X[i, j].mid()) - ref[i, j]) for i in range(16) for j in range(0, 384, 3)) < 1e-13
    det = attention_det_ball(X, w.W_Q[0, 4], w.W_K[0, 4], 128)
    cert = certificate("prop-6.3", None, "t", "A invertible", Scope("instances", "n = 16"),
                       {"det_sign": {"layer 0 head 4": 1 if det > 0 else -1}},
                       {"method": "attention-det-ln", "model": "default", "precision": 128,
                        "eps": float(w.arch.ln_eps), "input": {"ids": ids},
                        "items": {"layer 0 head 4": {"layer": 0, "head": 4}}}, w.weights_hash)
    assert verify_certificate(json.loads(json.dumps(cert)))[0]
    cert["asserts"]["det_sign"]["layer 0 head 4"] *= -1
    ok, why = verify_certificate(_reseal(cert))
    assert not ok and "sign differs" in why


def test_grouped_query_certificates_cover_every_query_head_and_verify(tmp_path):
    """Llama with 4 query heads sharing 2 key/value heads: every query head is certified with the K/V head it
    reads, and the checker (which derives that head from the tensor shapes) accepts the certificates."""
    import torch

    from symtrans.certify.producers import prop63_real, thm53_real
    from symtrans.cli.certify import write_certificates
    from symtrans.evidence import Context
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / "m", "llama", n_layers=2)
    ctx = Context(model=str(path), n=12)
    w = ctx.weights()
    assert (w.n_heads, int(w.W_V.shape[1])) == (4, 2)
    (ev,) = prop63_real(ctx)
    certs = ev.details["certificates"]
    items = certs[0]["witness"]["items"]
    assert len(items) == 2 * 4 and ev.verdict.value == "certified"
    assert items["layer 1 head 3"]["left"]["index"] == [1, 1] and items["layer 1 head 1"]["left"]["index"] == [1, 0]
    # the certified rank is that of the product the forward computes: W_V of the shared head times W_O of head h
    lay = w.layer(1)
    assert int(torch.linalg.matrix_rank(lay["W_V"][3] @ lay["W_O"][3])) == certs[0]["asserts"]["rank"]["layer 1 head 3"]
    evs = [e.to_dict() for f in (prop63_real, thm53_real) for e in f(ctx)]
    out = tmp_path / "certs"
    write_certificates({"claims": [{"id": "c", "evidence": evs}]}, str(out))
    assert main(["verify", str(out)]) == 0


def test_minor_nonzero_routes_fall_through_to_the_exact_determinant():
    """det = 0 mod one prime (or both) is not det = 0: each route hands over to the next, and a true zero stays zero."""
    from symtrans.certify.exact import P
    from symtrans.certify.real import MODULUS, _minor_nonzero

    assert _minor_nonzero(np.array([[3.0, 1.0], [1.0, 2.0]]))[1].startswith("float64-verified")
    close = np.array([[1.0, 1.0], [1.0, 1.0 + 2.0 ** -52]])  # det 2^-52: beyond the float64 inverse, not zero
    assert _minor_nonzero(close) == (True, f"det mod {P}")
    assert _minor_nonzero(np.array([[1.0, 2.0], [0.5, 1.0]]))[0] is False  # singular: every route declines
    # the exact chain on its own (verified=False)
    assert _minor_nonzero(np.array([[3.0, 1.0], [1.0, 2.0]]), verified=False) == (True, f"det mod {P}")
    assert _minor_nonzero(np.array([[float(P)]]), verified=False) == (True, "det mod p")  # 0 mod P, not mod 2^61 - 1
    N = P * MODULUS  # 0 mod both primes; entries below 2^53, so the floats are these integers exactly
    a = 2**46
    d = -(-N // a)
    c = a * d - N
    A = np.array([[float(a), 1.0], [float(c), float(d)]])
    assert a * d - c * 1 == N and all(float(int(v)) == v for v in A.ravel())
    assert _minor_nonzero(A, verified=False) == (True, "exact det")
    assert _minor_nonzero(np.array([[1.0, 2.0], [0.5, 1.0]]), verified=False) == (False, "exact det")  # singular
