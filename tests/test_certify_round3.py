"""Evidence round 3 (issue 37): every file that enters a run counts only if the run re-derives or re-verifies it.

Written from the issue's description of each attack class, not from the attack files: a completeness certificate
claiming a larger G, carried records whose context this run could not have produced, sweep results, certificate
directories with a statement missing, a model the loader refuses. Each is refused in one line and changes no
verdict; the genuine files still verify.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from symtrans.certify.checker import completeness_tangents, digest, verify_certificate
from symtrans.certify.completeness import completeness_certificate
from symtrans.certify.statements import completeness_dimension

FAMILIES = ("bert-base", "llama2-7b", "gpt2")  # post-LN BERT, pre-RMSNorm decoder, pre-LN decoder


@pytest.fixture(scope="module")
def completeness() -> dict:
    return {name: completeness_certificate(name) for name in FAMILIES}


def _reseal(cert: dict) -> dict:
    cert = copy.deepcopy(cert)
    cert["digest"] = digest(cert)
    return cert


# ------------------------------------------------------------------ completeness: a larger G
def _k_plus_one(cert: dict, *, with_tangents: bool) -> dict:
    """The issue's forgery: one extra "tangent" (the sum of the genuine ones plus 2^-200 e_q), one row and one
    column of the minor dropped, every dimension k + 1; sealed again."""
    c = copy.deepcopy(cert)
    w, a = c["witness"], c["asserts"]
    derived = [v for _, v in completeness_tangents(w["instance"], w["parameters"])]
    P, k = a["parameters"], a["group_dimension"]
    if with_tangents:
        q = next(i for i in range(P) if all(v[i] == 0 for v in derived))  # a coordinate no genuine tangent moves
        extra = [sum((v[i] for v in derived), Fraction(0)) + (Fraction(1, 2 ** 200) if i == q else 0)
                 for i in range(P)]
        w["tangents"] = [[str(x) for x in v] for v in derived[:k]] + [[str(x) for x in extra]]
        w["factors"] = [["qk-gauge", k + 1]]
    w["minor"]["rows"].pop()
    w["minor"]["cols"].pop()
    a["group_dimension"] = a["stabiliser_dimension_at_most"] = k + 1
    a["jacobian_rank_at_least"] = P - k - 1
    return _reseal(c)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_fresh_completeness_certificate_verifies_with_k_from_the_formula(completeness, name):
    cert = completeness[name]
    ok, why = verify_certificate(cert)
    assert ok, why
    k = completeness_dimension(cert["witness"]["instance"])
    assert cert["asserts"]["group_dimension"] == k and f"<= {k} = dim G (formula)" in why
    assert "tangents" not in cert["witness"] and "family" not in cert["witness"]["instance"]


@pytest.mark.parametrize("with_tangents", [True, False], ids=["extra-tangent", "dimensions-only"])
@pytest.mark.parametrize("name", FAMILIES)
def test_a_certificate_for_k_plus_one_is_refused(completeness, name, with_tangents):
    k = completeness[name]["asserts"]["group_dimension"]
    ok, why = verify_certificate(_k_plus_one(completeness[name], with_tangents=with_tangents))
    assert not ok and "\n" not in why
    if with_tangents:  # the file's own tangent vectors are not part of the statement at all
        assert "witness: asserts 2 other (factors, tangents)" in why, why
    else:
        assert f"asserts.group_dimension is {k + 1}, the statement requires {k}" in why, why


@pytest.mark.parametrize("name", FAMILIES)
def test_the_checkers_tangents_span_the_producers_tangent_space(completeness, name):
    """Two routes to G's tangent space at theta: the checker's own rules and the group's tag table (torch
    jacfwd of the action); the spans agree exactly (rank of each and of both together is k)."""
    import torch
    from flint import fmpq, fmpq_mat

    from symtrans.certify.completeness import certificate_instance
    from symtrans.certify.statements import completeness_tensors
    from symtrans.group.complete import _entries, _label, _tangents, _unflatten, random_instance
    from symtrans.group.spec import GroupSpec

    cert = completeness[name]
    w = cert["witness"]
    a, _ = certificate_instance(name)
    template = random_instance(a, "layers", 0)
    entries = _entries(template, "layers")
    paths = [p for p, _ in entries]
    pieces, offsets, pos = [], {}, 0
    for path, t in entries:
        rows = w["parameters"][_label(path)]
        pieces.append(torch.tensor([[float(Fraction(x)) for x in r] for r in rows], dtype=torch.float64).reshape(-1))
        offsets[_label(path)] = pos
        pos += t.numel()
    params = _unflatten(torch.cat(pieces), template, paths)
    order = [offsets[n] + i for n, (r, c) in completeness_tensors(w["instance"]) for i in range(r * c)]
    T, _ = _tangents(GroupSpec.from_arch(a), params, paths, "layers")
    theirs = [[Fraction(float(x)) for x in T[order, j].tolist()] for j in range(T.shape[1])]
    ours = [v for _, v in completeness_tangents(w["instance"], w["parameters"])]
    k = cert["asserts"]["group_dimension"]

    def rank(vs):
        return int(fmpq_mat([[fmpq(x.numerator, x.denominator) for x in v] for v in vs]).rank())

    assert rank(ours) == k and rank(theirs) == k and rank(ours + theirs) == k


def test_a_label_in_the_instance_is_refused_and_the_printed_family_is_derived(completeness):
    c = copy.deepcopy(completeness["bert-base"])
    c["witness"]["instance"]["family"] = "gpt-5 (complete)"
    ok, why = verify_certificate(_reseal(c))
    assert not ok and "witness.instance: expected the fields" in why
    ok, why = verify_certificate(completeness["bert-base"])
    assert ok and why.endswith("on post-LN BERT layers (LayerNorm, MLP)")
