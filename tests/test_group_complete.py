"""Measured completeness of G: Jacobian null space of the scope map vs G's dimension, per family and size."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from symtrans.arch import get_arch
from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.group.certify import certify_factor
from symtrans.group.complete import measure, rank_record, small_arch
from symtrans.group.spec import GroupSpec

rep = dataclasses.replace


def _agree(r):
    assert r["record"]["clear"], r["record"]
    assert r["record"]["gap_decades"] >= 6 and r["record"]["cut_below"] < 1e-9
    assert r["measured_dimension"] == r["group_dimension"] == r["tangent_rank"], r
    assert r["tangent_invariance"] < 1e-12 and r["unexplained"] == [] and r["agrees"]


@pytest.mark.parametrize("arch,layers", [("bert-base", 2), ("gpt2", 1), ("mistral-7b", 1)])
def test_layers_scope_measured_equals_G(arch, layers):
    _agree(measure(arch, layers=layers))


def test_second_size_with_unequal_head_widths():
    # d_k != d_v, H = 3, d_ff = 4: a size where a wrong exponent or a wrong head count would show
    _agree(measure("bert-base", layers=1, sizes=dict(d_model=7, H=3, d_k=3, d_v=2, d_ff=4, n=6)))


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["bert-base", "gpt2", "llama2-7b", "mistral-7b"])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_every_family_one_to_three_layers(arch, layers):
    _agree(measure(arch, layers=layers))


@pytest.mark.slow
@pytest.mark.parametrize("arch,sizes", [
    ("gpt2", dict(d_model=5, H=2, d_k=3, d_v=2, d_ff=4, n=6)),
    ("llama2-7b", dict(d_model=8, H=2, d_k=4, d_v=4, d_ff=3, n=6)),  # two rotary frequencies per head
    ("mistral-7b", dict(d_model=7, H=4, H_kv=2, d_k=4, d_v=3, d_ff=3, n=6)),
    ("bert-base", dict(d_model=6, H=1, d_k=4, d_v=5, d_ff=2, n=7)),
])
def test_random_small_configs(arch, sizes):
    for layers in (1, 2):
        _agree(measure(arch, layers=layers, sizes=sizes))


@pytest.mark.slow
def test_count_with_heads_as_wide_as_the_residual():
    """With d_v = d_model a head's W_O reaches the all-ones row, and at each boundary the W_V hyperplane move
    equals a vo-gauge plus centring and value-bias moves: G's hyperplane factor counts it once (shrunk)."""
    sizes = dict(d_model=5, H=1, d_k=4, d_v=5, d_ff=2, n=7)
    for layers in (1, 2):
        r = measure("bert-base", layers=layers, sizes=sizes)
        assert r["record"]["clear"] and r["unexplained"] == [] and r["tangent_invariance"] < 1e-12
        assert r["measured_dimension"] == r["tangent_rank"] == r["group_dimension"]


def test_the_paper_group_leaves_directions_unexplained():
    """False case: without the norm factors the null space is larger than G, and the record says where."""
    r = measure("bert-base", layers=1, exclude=("ffn-input-hyperplane",))
    assert not r["agrees"]
    assert r["measured_dimension"] - r["group_dimension"] == small_arch("bert-base").d_ff
    assert len(r["unexplained"]) == small_arch("bert-base").d_ff
    for u in r["unexplained"]:  # each missing direction moves W_in and b_in most (it is orthogonal to G's)
        shares = {m["tensor"]: m["share"] for m in u["moves"]}
        assert u["moves"][0]["tensor"] in ("layer0.W_in", "layer0.b_in")
        assert shares.get("layer0.W_in", 0) + shares.get("layer0.b_in", 0) > 0.5, shares


def test_wrong_action_is_refuted_exactly():
    """False case: b_out + t instead of b_out - t in the LN1 bias transfer."""
    spec = GroupSpec.from_arch(small_arch("bert-base"))
    wrong = tuple(rep(t, how="translate") if t.how == "translate_neg" else t
                  for t in spec.factor("ffn-bias-transfer").tags)
    assert certify_factor("bert-base", "ffn-bias-transfer", tags=wrong).outcome == "refuted"


def test_rank_record_needs_a_gap():
    s = torch.tensor([1.0, 0.5, 1e-3, 1e-5], dtype=torch.float64)
    assert not rank_record(s)["clear"] or rank_record(s)["rank"] == 4
    r = rank_record(torch.tensor([2.0, 1.0, 1e-14, 1e-15], dtype=torch.float64))
    assert (r["rank"], r["clear"]) == (2, True)


def test_gqa_and_rotary_counts_from_an_independent_count():
    a = get_arch("mistral-7b")
    spec = GroupSpec.from_arch(a)
    # per layer: commutant of the rotations (d_k per key/value head), GL(d_v) per key/value head,
    # up-projection scalings d_ff, and the gains of the two RMSNorms (d_model each)
    per_layer = a.H_kv * a.d_k + a.H_kv * a.d_v * a.d_v + a.d_ff + 2 * a.d_model
    assert spec.total_dimension() == a.L * per_layer
    assert spec.scope_dimension("layers") == spec.total_dimension()


def test_cli_complete_json(capsys):
    assert main(["group", "--arch", "gpt2", "--complete", "--layers", "1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    c = data["completeness"]
    assert {"measured_dimension", "group_dimension", "sizes", "record", "unexplained"} <= set(c)
    assert c["scope"] == "layers" and c["measured_dimension"] == c["group_dimension"] and c["agrees"]
    assert data["total_dimension_scope"] == "layers" and set(data["scopes"]) == {"layers", "model"}


def test_bad_scope_and_layers():
    with pytest.raises(SymtransError, match="scope"):
        measure("gpt2", scope="modle")
    with pytest.raises(SymtransError, match="layers"):
        small_arch("gpt2", layers=0)


@pytest.mark.slow
@pytest.mark.parametrize("arch,layers,sizes", [("bert-base", 1, {}), ("bert-base", 2, {}), ("gpt2", 1, {"n": 7}),
                                               ("llama2-7b", 1, {}), ("mistral-7b", 2, {})])
def test_model_scope_measured_equals_G(arch, layers, sizes):
    _agree(measure(arch, layers=layers, scope="model", sizes=sizes))


def test_model_scope_counts_from_an_independent_count():
    # BERT: every row of word, pos, type may move along 1 (embedding LayerNorm), and a constant may move between
    # the position table and each of word and type (d_model - 1 new directions each); the embedding norm is one
    # more boundary for the between-layer factors
    a = get_arch("bert-base")
    spec = GroupSpec.from_arch(a)
    boundary = a.d_model + 2 * a.H * a.d_k + a.H * a.d_v
    extra = a.vocab_size + a.max_positions + a.type_vocab_size + 2 * (a.d_model - 1) + boundary
    assert spec.scope_dimension("model") - spec.scope_dimension("layers") == extra
    # Llama: O(d_model) on the residual stream and the final norm's gains folded into the untied head
    a = get_arch("llama2-7b")
    spec = GroupSpec.from_arch(a)
    assert spec.scope_dimension("model") - spec.scope_dimension("layers") == a.d_model * (a.d_model - 1) // 2 + a.d_model
    # GPT-2: the tied head reads the word table, so only the position rows move along 1
    spec = GroupSpec.from_arch("gpt2")
    assert spec.scope_dimension("model") - spec.scope_dimension("layers") == get_arch("gpt2").max_positions


def test_relu_ffn_is_measured_on_units_that_switch(monkeypatch):
    """Post-LN BERT with a ReLU FFN: G (with its positive unit scalings) equals the measurement once every unit
    switches on the batch; with the biases as drawn, a unit stuck off or on adds batch-only directions and the
    measurement says so instead of disagreeing silently."""
    import dataclasses

    import symtrans.group.complete as C

    a = dataclasses.replace(C.small_arch("bert-base", layers=1), activation="relu")
    r = C.measure("bert-base", instance=a, layers=1)
    assert r["relu_units"]["stuck"] == [] and r["agrees"], r["relu_units"]
    assert r["measured_dimension"] == r["group_dimension"] + r["near_null"]
    without = C.measure("bert-base", instance=a, layers=1, exclude=("ffn-scaling",))
    assert len(without["unexplained"]) == a.d_ff  # the scalings G adds for ReLU are exactly the extra directions
    def all_off(params, *_):  # a false case: every unit off on every row of every draw
        for lay in params["layers"]:
            lay["b_in"] = lay["b_in"] - 100.0

    monkeypatch.setattr(C, "centre_relu_biases", all_off)
    raw = C.measure("bert-base", instance=a, layers=1)
    assert raw["relu_units"]["stuck"] and not raw["agrees"]
    assert raw["relu_units"]["draws"] == C.RELU_DRAWS
