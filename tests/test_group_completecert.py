"""Certified completeness (issue 27): a framework-9/completeness certificate checks, and every false one is refused.

The producer (:mod:`symtrans.certify.completeness`) writes G's exact tangent vectors and a (P - k)-minor of the
Jacobian at a rational point; the checker recomputes the minor in Arb balls with its own forward. Expected
numbers come from elsewhere: dim G from the GroupSpec formulas, the stabiliser's dimension from the float64
SVD of ``group --complete``, the forward from torch float64 (``symtrans.group.forward``).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from fractions import Fraction

import pytest

from symtrans.checker.check import completeness_forward, completeness_tangents, digest, verify_certificate
from symtrans.certify.completeness import certificate_instance, completeness_certificate
from symtrans.checker.statements import completeness_tensors
from symtrans.cli import main

ARCHS = ("bert-base", "mistral-7b")  # post-LN BERT; pre-RMSNorm decoder with GQA (4:1), rotary and a window


@pytest.fixture(scope="module")
def certs() -> dict:
    return {name: completeness_certificate(name) for name in ARCHS}


def _reseal(cert: dict) -> dict:
    cert = copy.deepcopy(cert)
    cert["digest"] = digest(cert)
    return cert


@pytest.mark.parametrize("name", ARCHS)
def test_the_certificate_checks_and_its_dimension_is_gs_and_the_measured_one(certs, name):
    from symtrans.group.complete import measure
    from symtrans.group.spec import GroupSpec

    cert = certs[name]
    start = time.perf_counter()
    ok, why = verify_certificate(cert)
    assert ok, why
    assert time.perf_counter() - start < 60
    inst, _ = certificate_instance(name)
    k = cert["asserts"]["group_dimension"]
    assert k == int(GroupSpec.from_arch(inst).scope_dimension("layers"))  # the formula, not the tag table
    measured = measure(name, instance=inst, scope="layers")  # random float weights, float64 SVD
    assert measured["record"]["clear"] and measured["measured_dimension"] == k
    assert cert["asserts"]["parameters"] == measured["parameters"]
    assert f"dim ker J <= {k} = dim G" in why and cert["scope"]["kind"] == "instances"



def _relu_gated():
    import dataclasses

    from symtrans.arch import get_arch

    return dataclasses.replace(get_arch("llama2-7b"), activation="relu", name="llama-relu-gate")


@pytest.mark.parametrize("which", ["gpt2", "qwen2-7b", "relu-gate",
                                   pytest.param("one-head-dv=d", marks=pytest.mark.slow)])  # ~20 s: L = 2
def test_every_covered_structure_certifies_g(which, tmp_path):
    """GPT-2 (tanh GELU, pre-LN), Qwen2 (Q/K/V biases, GQA 4:1), a ReLU gate (its unit scalings in G) and a
    single-head post-LN config with d_v = d_model at L = 2 (the tag table's columns are dependent there: the
    certificate keeps a basis of 231, the formula's dimension)."""
    from symtrans.group.spec import GroupSpec

    layers = 1
    if which == "relu-gate":
        arch = _relu_gated()
    elif which == "one-head-dv=d":
        arch = tmp_path / "config.json"
        arch.write_text(json.dumps({"model_type": "bert", "hidden_size": 64, "num_attention_heads": 1,
                                    "num_hidden_layers": 3, "intermediate_size": 128, "max_position_embeddings": 64,
                                    "vocab_size": 300, "type_vocab_size": 2, "layer_norm_eps": 1e-12}))
        arch, layers = str(arch), 2
    else:
        arch = which
    cert = completeness_certificate(arch, layers=layers)
    ok, why = verify_certificate(cert)
    assert ok, why
    inst, _ = certificate_instance(arch, layers)
    k = cert["asserts"]["group_dimension"]
    assert k == int(GroupSpec.from_arch(inst).scope_dimension("layers"))
    names = [f for f, _ in completeness_tangents(cert["witness"]["instance"], cert["witness"]["parameters"])]
    if which == "relu-gate":  # the SiLU model's G plus one positive scaling per gate unit
        silu = GroupSpec.from_arch(certificate_instance("llama2-7b")[0]).scope_dimension("layers")
        assert "ffn-scaling" in names and k == int(silu) + inst.d_ff
    if which == "one-head-dv=d":  # the float64 SVD of --complete at random weights gives the same nullity
        from symtrans.group.complete import measure

        assert "attention-input-hyperplane" in names
        assert measure(arch, instance=inst, scope="layers")["measured_dimension"] == k

def _torch_params(cert: dict, name: str):
    """The certificate's parameters in the group forward's block form, and each registry entry's flat index there."""
    import torch

    from symtrans.group.complete import _entries, _label, _unflatten, random_instance

    a, _ = certificate_instance(name)
    template = random_instance(a, "layers", 0)
    entries = _entries(template, "layers")
    pieces, offsets, pos = [], {}, 0
    for path, t in entries:
        rows = cert["witness"]["parameters"][_label(path)]
        pieces.append(torch.tensor([[float(Fraction(x)) for x in r] for r in rows], dtype=torch.float64).reshape(-1))
        offsets[_label(path)] = pos
        pos += t.numel()
    theta = torch.cat(pieces)
    order = [offsets[n] + i for n, (r, c) in completeness_tensors(cert["witness"]["instance"]) for i in range(r * c)]
    return a, theta, order, lambda th: _unflatten(th, template, [p for p, _ in entries])


@pytest.mark.parametrize("name", [*ARCHS, "gpt2", "relu-gate"])
def test_the_ball_forward_agrees_with_torch_float64(certs, name):
    """The checker's Arb forward and its derivatives against the group's torch forward and torch.func.jvp
    (erf GELU, SiLU with rotary, GQA and a window, tanh GELU, a ReLU gate)."""
    import torch
    from torch.func import jvp

    from symtrans.group.complete import scope_forward

    if name in certs:
        cert = certs[name]
    else:
        name = _relu_gated() if name == "relu-gate" else name
        cert = completeness_certificate(name)
    w = cert["witness"]
    a, theta, order, unflat = _torch_params(cert, name)
    P = len(order)
    # directions: two unit vectors and the checker's first tangent vector of G, in the registry's numbering
    units = [0, P - 1]
    tangent = completeness_tangents(w["instance"], w["parameters"])[0][1]
    dirs = [[Fraction(int(q == u)) for u in units] + [tangent[q]] for q in range(P)]
    for X in w["inputs"][:2]:
        jet = completeness_forward(w["instance"], w["parameters"], X, dirs)
        Xt = torch.tensor([[float(Fraction(x)) for x in r] for r in X], dtype=torch.float64)
        f = lambda th: scope_forward(unflat(th), {"X": Xt}, a, "layers").reshape(-1)  # noqa: E731
        ref = f(theta)
        got = torch.tensor([float(x.mid()) for x in jet.v.entries()], dtype=torch.float64)
        assert torch.allclose(got, ref, rtol=1e-12, atol=1e-12)
        D = jet.d.entries()
        for j in range(len(units) + 1):
            v = torch.zeros(P, dtype=torch.float64)
            v[torch.tensor(order)] = torch.tensor([float(row[j]) for row in dirs], dtype=torch.float64)
            _, tangent = jvp(f, (theta,), (v,))
            col = torch.tensor([float(D[i * (len(units) + 1) + j].mid()) for i in range(len(ref))], dtype=torch.float64)
            assert torch.allclose(col, tangent, rtol=1e-10, atol=1e-12)
        assert float(tangent.abs().max()) < 1e-12  # the tangent vector is in the null space (float64 too)


# ------------------------------------------------------------------ false certificates
def _singular_minor(c: dict) -> None:
    """Columns that contain the support of a null direction: J[:, cols] has a null vector, det = 0 exactly."""
    w = c["witness"]
    tangent = completeness_tangents(w["instance"], w["parameters"])[0][1]
    support = [q for q, x in enumerate(tangent) if x != 0]
    r = len(w["minor"]["cols"])
    rest = [q for q in w["minor"]["cols"] if q not in support]
    w["minor"]["cols"] = support + rest[:r - len(support)]
    assert len(w["minor"]["cols"]) == r and len(support) < r


def _tangents_in_the_file(c: dict) -> None:
    """The old format: tangent vectors and factor labels of the file's choosing (the checker derives its own)."""
    w = c["witness"]
    derived = completeness_tangents(w["instance"], w["parameters"])
    w["tangents"] = [[str(x) for x in v] for _, v in derived]
    w["factors"] = [[f, 1] for f, _ in derived]


def _edited_parameter(c: dict) -> None:
    row = c["witness"]["parameters"]["layer0.W_Q[0]"][0]
    row[0] = str(Fraction(row[0]) + Fraction(1, 16))


def _claims_more_rank(c: dict) -> None:
    """A smaller k and the minor grown by one row and column: a minor larger than rank J."""
    w, a = c["witness"], c["asserts"]
    for key in ("group_dimension", "stabiliser_dimension_at_most"):
        a[key] -= 1
    a["jacobian_rank_at_least"] += 1
    N = w["instance"]["batch"] * w["instance"]["n"] * w["instance"]["d_model"]
    w["minor"]["rows"].append(next(i for i in range(N) if i not in w["minor"]["rows"]))
    w["minor"]["cols"].append(next(q for q in range(a["parameters"]) if q not in w["minor"]["cols"]))


def _claimed_dimension(c: dict) -> None:
    c["asserts"]["group_dimension"] += 1


def _uncovered(c: dict) -> None:
    c["witness"]["instance"]["activation"] = "relu"


def _too_large(c: dict) -> None:
    c["witness"]["instance"]["d_model"] = 100


def _wrong_shape(c: dict) -> None:
    c["witness"]["parameters"]["layer0.W_in"].pop()


def _many_parameters(c: dict) -> None:
    c["witness"]["instance"].update(L=2, d_model=8, d_ff=8)  # every size in range, 648 parameters


def _float_eps(c: dict) -> None:
    c["witness"]["instance"]["eps"] = 0.01


def _low_precision(c: dict) -> None:
    c["witness"]["precision"] = 16


def _unregistered_scope(c: dict) -> None:
    c["scope"]["kind"] = "all-sizes"


ATTACKS = [(_singular_minor, True, "determinant enclosure"),
           (_tangents_in_the_file, True, "witness: asserts 2 other (factors, tangents)"),
           (_edited_parameter, False, "digest mismatch"),
           (_claims_more_rank, True, "asserts.group_dimension is 41, the statement requires 42"),
           (_claimed_dimension, True, "asserts.group_dimension is 43, the statement requires 42"),
           (_uncovered, True, "not covered"), (_too_large, True, "instance.d_model must be an integer in 2..8"),
           (_wrong_shape, True, "expected an inline 6 x 3 matrix"), (_float_eps, True, "instance.eps"),
           (_many_parameters, True, "648 parameters, the statement covers at most 500"),
           (_low_precision, True, "needs at least 64 bits"), (_unregistered_scope, True, "scope.kind is 'all-sizes'")]


@pytest.mark.parametrize("attack,reseal,message", ATTACKS, ids=[f"{a.__name__}{'' if r else '-unsealed'}"
                                                                 for a, r, _ in ATTACKS])
def test_a_false_certificate_is_rejected(certs, attack, reseal, message):
    c = copy.deepcopy(certs["bert-base"])
    attack(c)
    if reseal:
        c = _reseal(c)
    start = time.perf_counter()
    ok, why = verify_certificate(c)
    assert not ok and message in why, why
    assert time.perf_counter() - start < 60


def test_an_edited_parameter_is_another_point_where_everything_is_re_derived(certs):
    """The checker derives G's tangents at the written point, so a resealed edit is a certificate for the new
    point (the statement is about the inline theta): it holds there, and the old tangents play no part."""
    c = copy.deepcopy(certs["bert-base"])
    _edited_parameter(c)
    ok, why = verify_certificate(_reseal(c))
    assert ok, why


def test_a_wrong_tangent_rule_is_caught_by_j_v(certs, monkeypatch):
    """J v in balls around 0 can fail: a tangent rule that moves one entry too many leaves the null space."""
    import symtrans.checker.check as checker

    genuine = checker.completeness_tangents

    def wrong(inst, params):
        out = genuine(inst, params)
        factor, v = out[0]
        return [(factor, [x + (1 if q == 0 else 0) for q, x in enumerate(v)])] + out[1:]

    monkeypatch.setattr(checker, "completeness_tangents", wrong)
    ok, why = verify_certificate(certs["bert-base"])
    assert not ok and "(qk-gauge) is not in the null space" in why, why


def test_the_minor_of_a_real_null_direction_is_a_ball_around_zero(certs):
    """The singular-minor attack is a real zero determinant (float64 agrees), not a precision failure."""
    import numpy as np
    import torch
    from torch.func import jacfwd

    from symtrans.group.complete import scope_forward

    c = copy.deepcopy(certs["bert-base"])
    _singular_minor(c)
    a, theta, order, unflat = _torch_params(c, "bert-base")
    X = torch.tensor([[[float(Fraction(x)) for x in r] for r in Xb] for Xb in c["witness"]["inputs"]],
                     dtype=torch.float64)
    J = torch.cat([jacfwd(lambda th: scope_forward(unflat(th), {"X": x}, a, "layers").reshape(-1))(theta) for x in X])
    M = J[:, order].numpy()[np.ix_(c["witness"]["minor"]["rows"], c["witness"]["minor"]["cols"])]
    s = np.linalg.svd(M, compute_uv=False)
    assert s[-1] / s[0] < 1e-12


# ------------------------------------------------------------------ the command line
def test_group_complete_writes_a_certificate_that_verify_accepts(tmp_path, capsys):
    path = tmp_path / "out" / "mistral.json"
    assert main(["group", "--arch", "mistral-7b", "--complete", "--layers", "1", "--certificate-out", str(path)]) == 0
    out = capsys.readouterr().out
    assert "agrees" in out and f"certificate {path}: dim(stabiliser) <= dim ker J <= 21 = dim G" in out
    assert "checker: valid" in out
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: valid: framework-9/completeness" in out and "1 of 1 certificates valid" in out
    cert = json.loads(path.read_text())
    cert["witness"]["parameters"]["layer0.W_in"][0][0] = "1/3"  # an edit after writing: the digest catches it
    path.write_text(json.dumps(cert))
    assert main(["verify", str(path)]) == 1
    assert "INVALID: digest mismatch" in capsys.readouterr().out


def test_uncovered_structures_and_a_lone_certificate_out_are_one_line_errors(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2,
                                  "num_hidden_layers": 1, "intermediate_size": 4, "hidden_act": "relu",
                                  "max_position_embeddings": 8, "vocab_size": 30, "type_vocab_size": 2,
                                  "layer_norm_eps": 1e-12}))
    for argv, text in ((["group", "--arch", str(config), "--complete", "--certificate-out", str(tmp_path / "c.json")],
                        "not covered: certified completeness covers"),
                       (["group", "--arch", "bert-base", "--certificate-out", str(tmp_path / "c.json")],
                        "--certificate-out needs --complete")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("symtrans: error:") and err.count("\n") == 1 and text in err, err
    assert not (tmp_path / "c.json").exists()


def test_verifying_loads_neither_torch_nor_a_producer(certs, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(certs["mistral-7b"]))
    code = ("import json, sys\nfrom symtrans.checker.check import verify_certificate\n"
            f"ok, why = verify_certificate(json.load(open({str(path)!r})))\n"
            "print(ok, 'torch' in sys.modules, json.dumps(sorted(m for m in sys.modules if m.startswith('symtrans'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout
    ok, torch_loaded, mods = out.split(" ", 2)
    assert (ok, torch_loaded) == ("True", "False"), out
    # jacobian-rank adds G's formula (symtrans.catalogue, SymPy) and the architecture it is built on
    assert set(json.loads(mods)) <= {"symtrans", "symtrans.errors", "symtrans.checker",
                                     "symtrans.checker.check", "symtrans.checker.statements",
                                     "symtrans.checker.reader", "symtrans.arch", "symtrans.symbols",
                                     "symtrans.config", "symtrans.validate", "symtrans.catalogue",
                                     "symtrans.catalogue.model", "symtrans.catalogue.factors",
                                     "symtrans.catalogue.spec"}, mods
