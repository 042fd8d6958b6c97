"""Exact SymPy certificates: every factor holds, every breaking feature breaks, a wrong action is refused."""

from __future__ import annotations

import dataclasses

import pytest

from symtrans.arch import get_arch
from symtrans.errors import SymtransError
from symtrans.group.certify import certify_all, certify_factor, tiny_arch, witness
from symtrans.group.elements import ELEMENTS
from symtrans.group.spec import GroupSpec

_WITNESSED = {name for name, entry in ELEMENTS.items() if entry.witness is not None}  # breaking shown exactly

rep = dataclasses.replace

# a post-LN architecture with every other modelled feature: RMSNorm, gated SiLU FFN, rotary, GQA, causal, no biases
LLAMA_LIKE = rep(get_arch("bert-base"), norm="rmsnorm", ffn="gated", activation="silu", positional="rotary",
                 attention="causal", bias=False, H_kv=6, embedding_norm=False)


@pytest.mark.slow  # exhaustive (every factor and breaking feature of BertBase, ~11 s): CI's second command
def test_bert_base_every_factor_certified_every_breaking_feature_witnessed():
    certs = certify_all("bert-base")
    bad = [c.line() for c in certs if not c.ok]
    assert not bad, bad
    spec = GroupSpec.from_arch("bert-base")
    # every factor with tensors to move is certified, the model-scope embedding factors included
    certified = {f.name for f in spec.factors if f.tags or f.scope == "data"}
    assert {c.factor for c in certs if c.kind == "invariance"} == certified
    assert {"centring-shift", "attention-input-hyperplane", "embedding-centring-shift",
            "embedding-translation"} <= certified
    wanted = {(f.name, b.feature) for f in spec.factors for b in f.broken_by if f.name in _WITNESSED}
    assert {(c.factor, c.feature) for c in certs if c.kind == "breaking"} == wanted
    for c in certs:
        if c.kind == "invariance":
            assert c.shapes["d_model"] == 4 and c.shapes["n"] == 3 and c.identity
    # the factors filter gives the full run's certificates of those factors, in the same order
    some = ["S_n", "vo-gauge", "centring-shift"]
    view = lambda cs: [(c.factor, c.kind, c.feature, c.outcome, c.element) for c in cs]  # noqa: E731
    assert view(certify_all("bert-base", lemmas=False, factors=some)) == view([c for c in certs if c.factor in some])


def test_certify_all_factors_filter():
    """Only the named factors, their certificates and witnesses; an unknown name is refused before any work."""
    certs = certify_all("minilm-l6-h384", lemmas=False, factors=["S_dff"])
    assert {c.factor for c in certs} == {"S_dff"} and [c.kind for c in certs][0] == "invariance"
    assert all(c.ok for c in certs)
    assert certify_all("minilm-l6-h384", witnesses=False, lemmas=False, factors=[]) == []
    with pytest.raises(SymtransError, match="unknown factor 'S_dfff'"):
        certify_all("minilm-l6-h384", factors=["S_dff", "S_dfff"])


def test_llama_like_post_ln_factors_certified():
    spec = GroupSpec.from_arch(LLAMA_LIKE)
    assert spec.arch.H_kv != spec.arch.H
    for name in spec.names():
        if spec.factor(name).status == "broken":  # S_n: rotary and causal, witnessed above
            continue
        c = certify_factor(LLAMA_LIKE, name)
        assert c.ok, c.line()


def test_wrong_vo_action_is_refused():
    spec = GroupSpec.from_arch(tiny_arch("bert-base"))
    wrong = tuple(rep(t, how="element") if t.tensor == "W_O" else t for t in spec.factor("vo-gauge").tags)
    c = certify_factor("bert-base", "vo-gauge", tags=wrong)  # W_O -> N W_O instead of N^-1 W_O
    assert c.outcome == "refuted" and not c.ok
    assert "changes by" in c.witness


def test_wrong_residual_action_is_refused():
    spec = GroupSpec.from_arch(tiny_arch("bert-base"))
    wrong = tuple(t for t in spec.factor("residual-permutation").tags if t.tensor != "ln1_w")  # gain not permuted
    c = certify_factor("bert-base", "residual-permutation", tags=wrong)
    assert c.outcome == "refuted"


def test_relu_scaling_certified_but_negative_scale_refused():
    import sympy as sp

    relu = rep(get_arch("bert-base"), activation="relu")
    assert certify_factor(relu, "ffn-scaling").ok
    c = certify_factor(relu, "ffn-scaling", elements=[("D = diag(-1, 1)", {"D": sp.diag(-1, 1)})])
    assert c.outcome == "refuted"  # relu(-t) != -relu(t): only positive scalings


def test_unknown_breaking_feature_is_an_error():
    with pytest.raises(SymtransError, match="no breaking feature"):
        witness("bert-base", "S_H", "causal mask")


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gpt2", "mistral-7b", "qwen2-7b"])
def test_pre_norm_families_every_factor_certified(arch):
    certs = certify_all(arch, lemmas=False)
    assert certs and all(c.ok for c in certs), [c.line() for c in certs if not c.ok]
    names = {c.factor for c in certs if c.kind == "invariance"}
    assert {"ln1-scaling", "ln2-scaling"} <= names
    spec = GroupSpec.from_arch(arch)
    # every factor with tensors to move (model scope included); a broken one only if it has a witnessed variant
    assert names == {f.name for f in spec.factors
                     if (f.tags or f.scope == "data") and (f.status != "broken" or f.name in _WITNESSED)}


# --------------------------------------------------------------------------- model-scope factors
@pytest.mark.parametrize("arch,factor", [("bert-base", "embedding-centring-shift"), ("bert-base", "embedding-translation"),
                                         ("gpt2", "embedding-centring-shift"), ("qwen2-7b", "final-norm-scaling")])
def test_model_scope_factor_certified_from_token_ids(arch, factor):
    c = certify_factor(arch, factor)
    assert c.ok and c.outcome == "certified", c.line()
    assert c.shapes["d_model"] == 4 and "generic" in c.element


@pytest.mark.slow  # ~15 s: a generic plane rotation (t symbolic) through the layer, final norm and head
@pytest.mark.parametrize("arch", ["llama2-7b", "qwen2-7b"])
def test_residual_rotation_certified_on_generators_of_O_d(arch):
    c = certify_factor(arch, "residual-rotation")
    assert c.ok, c.line()
    assert "generic rotation of the plane (0, 1)" in c.element and "transposition" in c.element


@pytest.mark.parametrize("arch,factor,wrong", [
    # a constant added to both the position table and the word table instead of moved between them
    ("bert-base", "embedding-translation", lambda t: rep(t, how="translate_rows") if t.how == "translate_rows_neg" else t),
    ("qwen2-7b", "final-norm-scaling", lambda t: None if t.tensor == "lm_head" else t),  # the head does not absorb D
    ("llama2-7b", "residual-rotation", lambda t: rep(t, how="inverse") if t.tensor == "lm_head" else t),  # no gains
    ("llama2-7b", "residual-rotation", lambda t: None if t.tensor == "W_out" else t),  # one writer not rotated
])
def test_perturbed_model_scope_action_is_refuted(arch, factor, wrong):
    spec = GroupSpec.from_arch(tiny_arch(arch))
    tags = tuple(x for x in (wrong(t) for t in spec.factor(factor).tags) if x is not None)
    assert tags != spec.factor(factor).tags
    c = certify_factor(arch, factor, tags=tags)
    assert c.outcome == "refuted" and not c.ok and "changes by" in c.witness, c.line()


@pytest.mark.parametrize("arch, reader, stage, without_reader", [
    ("llama2-7b", "lm_head", "final norm and head stage", "gpt2"),
    ("bert-base", "pooler_w", "pooler stage", "distilbert-base"),
])
def test_the_residual_permutation_keeps_what_reads_the_last_hidden_state_and_a_table_without_its_tag_is_refuted(
        arch, reader, stage, without_reader):
    """An untied output head (through the final norm) and an encoder's pooler read the last hidden state X Q: with
    their tag (Q^-1 on their input) the permutation leaves the logits and the pooler's output unchanged, which the
    certificate compares in its own stage. The tag table without it (G as it stood, which left them alone) is
    refuted at that stage; a tied GPT-2 and a DistilBERT (no pooler) have neither tag."""
    spec = GroupSpec.from_arch(arch)
    assert any(t.tensor == reader and t.how == "inverse" for t in spec.factor("residual-permutation").tags)
    assert certify_factor(arch, "residual-permutation").outcome == "certified"
    without = tuple(t for t in spec.factor("residual-permutation").tags if t.tensor != reader)
    c = certify_factor(arch, "residual-permutation", tags=without)
    assert c.outcome == "refuted" and stage in c.witness
    assert not any(t.tensor == reader for t in GroupSpec.from_arch(without_reader).factor("residual-permutation").tags)
