"""Certificate files and the independent checker: real certificates pass, every kind of tampering is refused."""

import copy
import json

import numpy as np
import pytest
import sympy as sp

from symtrans.checker.check import digest, verify_certificate
from symtrans.certify.real import (MODULUS, LayerResidual, attention_det, embedding_input,
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


N = 16  # small instances: every statement at n = 16 on the bundled model


def _v(cert, **kw):
    return verify_certificate(json.loads(json.dumps(cert)), **{"n": N, **kw})  # through JSON, as from a file


@pytest.fixture(scope="module")
def records(small_certificates):
    """The real-weight records (with their certificates) of the bundled model at n = 16 (conftest, produced once)."""
    return {"prop63_real": small_certificates["prop63-real-weights"],
            "recovery_real": small_certificates["recovery-wo-real"],
            "thm53_real": small_certificates["thm53-real-weights"]}


@pytest.fixture(scope="module")
def certs(records):
    """One certificate of every witness method on real weights."""
    p63 = records["prop63_real"].details["certificates"]
    return {"rank": records["recovery_real"].details["certificate"], "factors": p63[0], "attention": p63[1],
            "ln": p63[2], "residual": records["thm53_real"].details["certificate"]}


def test_real_certificates_verify(certs):
    for name, cert in certs.items():
        ok, why = _v(cert)
        assert ok, (name, why)
    assert not _v(certs["factors"], n=N + 1)[0]  # another n: another statement (its scope names n)


def test_digest_catches_any_edit(certs):
    cert = copy.deepcopy(certs["rank"])
    cert["statement"] += " "
    assert _v(cert) == (False, "digest mismatch: the certificate was altered after it was written")


@pytest.mark.parametrize("name,path,value", [
    ("rank", ("asserts", "rank", "layer 1"), 383),
    ("factors", ("asserts", "rank", "layer 2 head 3"), 31),
    ("attention", ("asserts", "det_sign", "layer 0 head 1"), None),  # flipped
    ("ln", ("asserts", "det_sign", "layer 0 head 4"), None),  # flipped
    ("residual", ("asserts", "minor_sign", "layer 4 r 2"), None),  # flipped
])
def test_altered_assert_is_refused(certs, name, path, value):
    cert = copy.deepcopy(certs[name])
    node = cert
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = -node[path[-1]] if value is None else value
    ok, why = _v(_reseal(cert))  # resealed: only the registry or the recomputation can catch it
    assert not ok and "digest" not in why
    assert ("differs from the asserted" in why) if value is None else ("the statement requires" in why)


def test_altered_witness_is_refused(certs):
    cert = copy.deepcopy(certs["factors"])
    item = cert["witness"]["items"]["layer 2 head 3"]
    item["rows"][1] = item["rows"][0]  # a repeated row is no minor
    assert _v(_reseal(cert)) == (False, "layer 2 head 3 rows: indices are not distinct")
    cert = copy.deepcopy(certs["factors"])
    cert["witness"]["items"]["layer 2 head 3"]["right"] = {"tensor": "W_O", "index": [2, 3], "rows": [0] * 32}
    ok, why = _v(_reseal(cert))  # W_O replaced by 32 copies of its first row: not the statement's tensor
    assert not ok and why.startswith("witness.items.layer 2 head 3.right: asserts 1 other (rows)")
    cert = copy.deepcopy(certs["factors"])
    cert["witness"]["modulus"] = 2**61  # not prime: mod-p ranks prove nothing
    assert _v(_reseal(cert)) == (False, f"modulus {2**61} is not prime")
    cert = copy.deepcopy(certs["residual"])
    cert["witness"]["items"]["layer 4 r 3"]["cols"] = [0, 1, 2]  # X*_3 alone: r + 1 = 4 columns are needed
    assert _v(_reseal(cert)) == (False, "layer 4 r 3 cols: expected 4 indices")
    cert["witness"]["n"] = 10**9
    ok, why = _v(_reseal(cert))
    assert not ok and why.startswith("witness.n is 1000000000, the statement requires 16")


def test_a_rank_deficient_layer_is_refused(certs, weights, tmp_path):
    """The rank statement on a copy of the model whose layer-0 W_O lost a row: the checker recomputes 383."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from symtrans.numeric.weights import default_model_path

    src = default_model_path()
    dst = tmp_path / "doctored"
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    tensors = load_file(str(src / "model.safetensors"))
    key = next(k for k in tensors if k.endswith("layer.0.attention.output.dense.weight"))
    W = tensors[key].copy()
    W[:, 5] = 0.5 * W[:, 3]  # exact in float32: column 5 of the [out, in] weight is row 5 of the stacked W_O
    tensors[key] = W
    save_file(tensors, str(dst / "model.safetensors"))
    from symtrans.checker.reader import CheckedModel

    m = CheckedModel(dst)
    cert = copy.deepcopy(certs["rank"])
    cert["weights_hash"] = m.weights_hash  # honest about the doctored model: the rank must still be recomputed
    cert["witness"]["model"] = str(dst)
    ok, why = _v(_reseal(cert), model=str(dst))
    assert not ok and why == "layer 0: rank mod p is below 384; exact rank re-checked only up to 160 on a side"
    assert np.linalg.matrix_rank(m.W_O_stack(0)) == 383


def test_inline_matrices_are_refused_for_a_model_statement(certs):
    cert = copy.deepcopy(certs["rank"])
    cert["witness"]["inline"] = {"layer 1": [["1", "0"], ["0", "1"]]}
    ok, why = _v(_reseal(cert))
    assert not ok and "must name the model's tensors, not inline matrices" in why


def test_altered_weights_hash_is_refused(certs):
    cert = copy.deepcopy(certs["rank"])
    cert["weights_hash"] = "0" * 64
    ok, why = _v(_reseal(cert))
    assert not ok and why.startswith("the certificate is for another model")


def test_verify_cli_exit_codes(certs, records, tmp_path, capsys):
    from symtrans.cli.certify import write_certificates

    good = tmp_path / "good"
    write_certificates({"claims": [{"id": "prop-6.3", "evidence": [records["prop63_real"].to_dict()]}]}, str(good),
                       n=N)
    assert main(["verify", str(good), "--n", str(N)]) == 0
    bad = copy.deepcopy(certs["factors"])
    bad["asserts"]["rank"]["layer 2 head 3"] = 33
    (tmp_path / "b.json").write_text(json.dumps(bad))
    capsys.readouterr()
    assert main(["verify", str(good / "prop63-real-weights-1.json"), str(tmp_path / "b.json"), "--n", str(N)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sum("INVALID" in line for line in out) == 1 and "b.json" in next(l for l in out if "INVALID" in l)
    assert main(["verify", str(good)]) == 1  # at the default n: the manifest and every statement say n = 16
    (tmp_path / "junk.json").write_text("{not json")
    assert main(["verify", str(tmp_path / "junk.json")]) == 2
    assert main(["verify", str(tmp_path / "missing")]) == 2
    assert main(["verify", str(good), "--model", str(tmp_path / "nowhere")]) == 2
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
    from symtrans.producers.sec6 import prop62
    from symtrans.context import Context

    (ev,) = prop62(Context(model=None))
    cert = ev.details["certificate"]
    assert ev.verdict.label == "fails" and verify_certificate(json.loads(json.dumps(cert)))[0]
    bad = copy.deepcopy(cert)
    bad["witness"]["inline"]["h0.W_V"] = [["0"] * len(r) for r in bad["witness"]["inline"]["h0.W_V"]]
    ok, why = verify_certificate(_reseal(bad))  # head 0 contributes nothing: the sum has lower dimension
    assert not ok and why.startswith("dim(sum R_h) is")


def test_certify_out_then_verify(tmp_path, capsys):
    """certify --out writes the refuting certificate of prop-6.2 and a manifest; verify accepts, then refuses an edit."""
    out = tmp_path / "certs"
    assert main(["certify", "prop-6.2", "--model", "none", "--out", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["MANIFEST.json", "prop62-counterexample.json"]
    assert main(["verify", str(out)]) == 0
    data = json.loads((out / files[1]).read_text())
    data["asserts"]["dim_sum_R"] = 4
    (out / files[1]).write_text(json.dumps(_reseal(data)))
    capsys.readouterr()
    assert main(["verify", str(out / files[1])]) == 1
    assert "INVALID: dim(sum R_h) is 3, not 4" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 1
    assert "differs from the manifest's hash" in capsys.readouterr().out


def test_certificates_on_another_checkpoint_verify(tmp_path):
    """A random DistilBERT checkpoint (no token types, 40 positions): every real-weight certificate checks."""
    from symtrans.producers.sec5 import thm53_real
    from symtrans.producers.sec6 import prop63_real
    from symtrans.producers.sec7 import recovery_real
    from symtrans.cli.certify import write_certificates
    from symtrans.context import Context
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / "m", "distilbert", n_layers=2)
    ctx = Context(model=str(path), n=40)
    evs = [ev.to_dict() for f in (prop63_real, recovery_real, thm53_real) for ev in f(ctx)]
    out = tmp_path / "certs"
    files, _ = write_certificates({"claims": [{"id": "c", "evidence": evs}]}, str(out), n=40)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["MANIFEST.json", "prop63-real-weights-1.json", "prop63-real-weights-2.json",
                     "prop63-real-weights-3.json", "recovery-wo-real.json", "thm53-real-weights.json"]
    assert main(["verify", str(out), "--model", str(path), "--n", "40"]) == 0
    assert main(["verify", str(out), "--n", "40"]) == 1  # the bundled model is another model
    cert = json.loads((out / "thm53-real-weights.json").read_text())
    assert any(it["r"] in it["cols"] for it in cert["witness"]["items"].values())  # column r is exercised
    assert len(json.loads((out / "prop63-real-weights-2.json").read_text())["witness"]["input"]["ids"]) == 40


def test_layernorm_ball_encloses_torch(weights):
    """The arb LayerNorm against the torch forward (float64), and the sign of a determinant through it."""
    from symtrans.certify.real import attention_det_ball, layernorm_ball
    from symtrans.numeric.forward import embed

    w, ids = weights, list(range(3000, 3016))
    X = layernorm_ball(embedding_input(w, ids), w.emb_ln_w, w.emb_ln_b, w.arch.ln_eps, 128)
    ref = embed(w, ids).numpy()
    assert max(abs(float(X[i, j].mid()) - ref[i, j]) for i in range(16) for j in range(0, 384, 3)) < 1e-13
    det = attention_det_ball(X, w.W_Q[0, 4], w.W_K[0, 4], 128)
    ref_det = np.linalg.det(np.exp((ref @ w.W_Q[0, 4].numpy()) @ (ref @ w.W_K[0, 4].numpy()).T / np.sqrt(32)))
    assert 0 not in det and np.sign(ref_det) == (1 if det > 0 else -1)


def test_grouped_query_certificates_cover_every_query_head_and_verify(tmp_path):
    """Llama with 4 query heads sharing 2 key/value heads: every query head is certified with the K/V head it
    reads, and the checker (which derives that head from the tensor shapes) accepts the certificates."""
    import torch

    from symtrans.producers.sec5 import thm53_real
    from symtrans.producers.sec6 import prop63_real
    from symtrans.cli.certify import write_certificates
    from symtrans.context import Context
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
    write_certificates({"claims": [{"id": "c", "evidence": evs}]}, str(out), n=12)
    assert main(["verify", str(out), "--model", str(path), "--n", "12"]) == 0


def test_minor_nonzero_routes_fall_through_to_the_exact_determinant():
    """det = 0 mod one prime (or both) is not det = 0: each route hands over to the next, and a true zero stays zero."""
    from symtrans.certify.exact import P
    from symtrans.certify.real import _minor_nonzero

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
