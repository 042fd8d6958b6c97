"""G on decoder checkpoints (GPT-2, Llama, Mistral, Qwen2): numeric invariance with grouped-query attention,
rotary positions, Q/K/V-only biases and untied heads; false cases for each path; Qwen2's group."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

from symtrans.arch import get_arch
from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.group.complete import measure
from symtrans.group.numeric import _transform, layer_blocks, sample_element, sample_gl, verify_model, verify_random
from symtrans.group.orbits import orbit_dimension_numeric
from symtrans.group.spec import GroupSpec, act
from symtrans.numeric import encode
from symtrans.numeric.fixtures import DECODER_FAMILIES, random_checkpoint, tiny_decoder
from symtrans.evidence import Verdict

rep = dataclasses.replace


def _logits(w, head=None, n=6):
    h = encode(w, n=n, seed=3).hidden_states[-1]
    return h if head is None else h @ head


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_every_factor_holds_on_each_decoder_family(family):
    w = tiny_decoder(family)
    spec = GroupSpec.from_arch(w.arch)
    checks = verify_model(w, dtypes=("float64",), n=6)
    present = {f.name for f in spec.factors if f.tags or f.scope == "data"}
    assert {c.factor.split(" ")[0] for c in checks} == present
    for c in checks:
        assert c.verdict is Verdict.SUPPORTED, c.line()
        if c.expect == "invariant":
            assert c.max_rel_change < 1e-13, c.line()
        else:
            assert c.max_rel_change > 1e-3, c.line()
    if family == "gpt_neox":  # partial rotary (key shifts kept on the position-free part), the parallel bias trade
        by = {c.factor: c for c in checks}
        assert w.arch.positional == "rotary" and w.arch.rotary_width < w.arch.d_k and w.arch.parallel_residual
        assert by["key-bias-shift"].expect == by["parallel-bias-trade"].expect == "invariant"
        assert by["ffn-scaling"].expect == "changes"  # GELU
    elif family != "gpt2":  # grouped-query attention, rotary positions and an untied head are all exercised
        assert w.n_kv_heads < w.n_heads and w.arch.positional == "rotary"
        if family == "gemma3":  # tied head (no rotation), QK-norm: the qk-gauge is broken, the gains trade instead
            assert {"qk-gauge", "vo-gauge", "qk-norm-gain-trade"} <= present
            assert {c.factor: c for c in checks}["qk-gauge"].expect == "changes"
            assert {c.factor: c for c in checks}["qk-norm-gain-trade"].expect == "invariant"
        elif family == "olmo2":  # post-norms only (no rotation), full-width QK-norm: one gain trade per kv head
            assert {"vo-gauge", "qk-norm-gain-trade", "final-norm-scaling"} <= present
            assert {c.factor: c for c in checks}["residual-rotation"].expect == "changes"
            assert {c.factor: c for c in checks}["qk-norm-gain-trade"].expect == "invariant"
        elif family == "gemma2":  # tied head, post-norms (no rotation); soft-capped scores keep the qk-gauge
            assert {"qk-gauge", "vo-gauge"} <= present and "residual-rotation" not in present
            assert {c.factor: c for c in checks}["qk-gauge"].expect == "invariant"
        elif family == "smollm3":  # tied head (no rotation), a NoPE layer first: the qk-gauge holds (there the
            # element is from the rotary commutant, a subgroup of the NoPE layer's GL(d_k); --complete measures all)
            assert {"qk-gauge", "vo-gauge"} <= present and not w.arch.rotary_at(0) and w.arch.rotary_at(1)
            assert {c.factor: c for c in checks}["qk-gauge"].expect == "invariant"
        else:
            assert {"qk-gauge", "vo-gauge", "final-norm-scaling", "residual-rotation"} <= present
    if family == "qwen2":  # Q, K, V biases: the shifts are listed and confirmed broken
        by = {c.factor: c for c in checks}
        assert by["key-bias-shift"].expect == by["value-bias-shift"].expect == "changes"


def test_float32_on_a_gqa_decoder():
    w = tiny_decoder("qwen2")
    for c in verify_model(w, dtypes=("float32",), n=6, factors=["qk-gauge", "vo-gauge", "residual-rotation"]):
        assert c.verdict is Verdict.SUPPORTED and 1e-9 < c.max_rel_change < c.tolerance, c.line()


def test_a_different_gauge_per_query_head_of_a_group_is_not_a_symmetry():
    """False case (by hand, outside the tag table): query heads 0 and 1 share key/value head 0; giving them
    different V/O gauges (W_V^0 -> W_V^0 N_0, W_O^h -> N_h^-1 W_O^h) changes the output, one shared N does not."""
    w = tiny_decoder("llama")
    assert w.n_heads // w.n_kv_heads == 2
    d_v = w.d_head
    Ns, Ninv, _ = sample_gl(d_v, torch.Generator().manual_seed(5), torch.float64, count=w.n_heads)
    ref = _logits(w)
    for shared in (True, False):
        moved = w.copy()
        for layer in range(w.n_layers):
            for g in range(w.n_kv_heads):
                moved.W_V[layer, g] = w.W_V[layer, g] @ Ns[2 * g]
            for h in range(w.n_heads):
                k = 2 * (h // 2) if shared else h
                moved.W_O[layer, h] = Ninv[k] @ w.W_O[layer, h]
        change = _rel(_logits(moved), ref)
        assert (change < 1e-12) if shared else (change > 1e-3), (shared, change)


def test_the_action_refuses_per_query_head_elements_on_shared_kv_heads():
    w = tiny_decoder("mistral")
    spec = GroupSpec.from_arch(w.arch)
    expanded = layer_blocks(w.layer(0))  # one K/V block per query head: not what the group acts on
    with pytest.raises(SymtransError, match="key/value head"):
        act(spec, expanded, "vo-gauge", {"g": [torch.eye(w.d_head, dtype=torch.float64)] * w.n_kv_heads})


def test_rotary_commutant_in_the_wrong_planes_is_not_a_symmetry():
    """False case: transformers rotates the pairs (b, b + d_k/2); the commutant built on adjacent pairs
    (2b, 2b+1) does not commute with those rotations."""
    w = tiny_decoder("llama")
    spec = GroupSpec.from_arch(w.arch)
    ref = _logits(w)
    for pairs, ok in (("halves", True), ("adjacent", False)):
        gen = torch.Generator().manual_seed(2)
        els = [sample_element(spec, "qk-gauge", gen, torch.float64, rotary_pairs=pairs)[0] for _ in range(w.n_layers)]
        moved, head = _transform(w, spec, "qk-gauge", els)
        change = _rel(_logits(moved, head), ref)
        assert (change < 1e-12) if ok else (change > 1e-3), (pairs, change)
    with pytest.raises(SymtransError, match="rotary_pairs"):
        sample_element(spec, "qk-gauge", torch.Generator(), torch.float64, rotary_pairs="interleaved")


@pytest.mark.parametrize("family,factor,wrong", [
    ("llama", "vo-gauge", lambda t: rep(t, how="element") if t.tensor == "W_O" else t),
    ("qwen2", "qk-gauge", lambda t: None if t.tensor == "b_Q" else t),  # the Q bias must move with W_Q
    ("qwen2", "final-norm-scaling", lambda t: None if t.tensor == "lm_head" else t),  # the head must absorb D
    ("mistral", "residual-rotation", lambda t: rep(t, how="inverse") if t.tensor == "lm_head" else t),
])
def test_a_wrong_action_fails_the_numeric_check(family, factor, wrong):
    w = tiny_decoder(family)
    spec = GroupSpec.from_arch(w.arch)
    tags = tuple(x for x in (wrong(t) for t in spec.factor(factor).tags) if x is not None)
    assert tags != spec.factor(factor).tags
    [c] = verify_model(w, dtypes=("float64",), n=6, factors=[factor], tags={factor: tags})
    assert c.verdict == "fails" and c.max_rel_change > 1e-3, c.line()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_orbit_dimension_on_gqa_rotary_weights(family):
    w = tiny_decoder(family)
    a = w.arch
    # commutant of the rotations per key/value head, GL(d_v) per key/value head, up-projection scalings
    expected = a.H_kv * a.d_k + a.H_kv * a.d_v ** 2 + a.d_ff
    for i in range(w.n_layers):
        rec = orbit_dimension_numeric(layer_blocks(w.layer(i, shared_kv=True)), a, layer=i, rotary_pairs="halves")
        assert rec.jacobian_rank == rec.formula_at_measured_ranks == rec.symbolic_generic == expected
        assert rec.min_margin > 3
    blocks = layer_blocks(w.layer(0, shared_kv=True))
    plane = [0, a.d_k // 2]  # a degenerate point: rotary plane 0 dead in Q (both query heads) and K of kv head 0
    for h in (0, 1):
        blocks["W_Q"][h][:, plane] = 0
        blocks["b_Q"][h][:, plane] = 0  # zeros already where the family has no biases
    blocks["W_K"][0][:, plane] = 0
    blocks["b_K"][0][:, plane] = 0
    rec = orbit_dimension_numeric(blocks, a, rotary_pairs="halves")
    assert rec.jacobian_rank == rec.formula_at_measured_ranks == expected - 2
    with pytest.raises(SymtransError, match="key/value heads as stored"):
        orbit_dimension_numeric(layer_blocks(w.layer(0)), a, rotary_pairs="halves")


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_cli_verify_on_gqa_checkpoints(tmp_path, capsys, family):
    random_checkpoint(tmp_path / family, family)
    # n as group --verify's default was before the one default (128) of RunConfig; these models have 40 positions
    assert main(["group", "--model", str(tmp_path / family), "--verify", "--n", "12", "--format", "json",
                 "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checks"] and all(c["verdict"] == Verdict.SUPPORTED.label for c in data["checks"])
    assert all(o["verdict"] == Verdict.SUPPORTED.label for o in data["orbits"])
    ffn = data["fibres"]["ffn_input_layer0"]
    assert ffn["fibre"] == ffn["expected"] == 0  # RMSNorm flattens nothing exactly; W_O has full rank
    doc = (Path(__file__).resolve().parents[1] / "docs" / "json-schemas.md").read_text(encoding="utf-8")
    table = doc.split("<!-- schema: group-verify -->", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)) == set(data)


# --------------------------------------------------------------------------- Qwen2's Q, K, V biases in G
def test_qwen2_group_from_an_independent_count():
    a = get_arch("qwen2-7b")
    assert (a.L, a.H, a.H_kv, a.d_model, a.d_k, a.d_ff, a.qkv_bias, a.bias) == (28, 28, 4, 3584, 128, 18944, True, False)
    spec = GroupSpec.from_arch(a)
    # the biases add no continuous symmetry: rotary positions break the key-bias shift, no b_O absorbs b_V
    per_layer = a.H_kv * a.d_k + a.H_kv * a.d_v ** 2 + a.d_ff + 2 * a.d_model
    assert spec.total_dimension() == a.L * per_layer
    assert spec.scope_dimension("model") - spec.total_dimension() == a.d_model * (a.d_model - 1) // 2 + a.d_model
    assert spec.factor("key-bias-shift").status == spec.factor("value-bias-shift").status == "broken"
    assert "b_Q[h] axis d_k: right by g" in spec.factor("qk-gauge").acts_on()
    assert "b_V[g] axis d_v: right by g" in spec.factor("vo-gauge").acts_on()
    # the same spec without rotary positions keeps the key-bias shift (a softmax row constant)
    nopos = GroupSpec.from_arch(rep(a, positional="none"))
    assert nopos.factor("key-bias-shift").status == "exact"
    # full GL(d_k) per key/value head (H_kv d_k^2) and the key-bias shift (H_kv d_k) replace the commutant (H_kv d_k)
    assert nopos.total_dimension() - spec.total_dimension() == a.L * a.H_kv * a.d_k ** 2


@pytest.mark.parametrize("layers,sizes", [(1, {}), (2, dict(H=4, d_model=8, d_k=4, d_v=4, d_ff=3, n=6))])
def test_qwen2_measured_equals_G(layers, sizes):
    r = measure("qwen2-7b", layers=layers, sizes=sizes)
    assert r["record"]["clear"] and r["unexplained"] == [] and r["tangent_invariance"] < 1e-12
    assert r["measured_dimension"] == r["group_dimension"] == r["tangent_rank"]


@pytest.mark.slow
@pytest.mark.parametrize("scope,layers,sizes", [
    ("layers", 3, {}), ("model", 1, {}), ("model", 2, {}), ("model", 3, {}),
    ("layers", 1, dict(H=4, d_model=8, d_k=4, d_v=3, d_ff=3, n=6)),  # d_v != d_k, two rotary planes
    ("model", 1, dict(H=4, d_model=8, d_k=4, d_v=3, d_ff=3, n=6)),
])
def test_qwen2_measured_equals_G_one_to_three_layers(scope, layers, sizes):
    r = measure("qwen2-7b", layers=layers, scope=scope, sizes=sizes)
    assert r["agrees"], (scope, layers, sizes, r["measured_dimension"], r["group_dimension"], r["unexplained"][:1])


def test_qwen2_without_positions_keeps_the_key_bias_shift_measured():
    a = rep(get_arch("qwen2-7b"), positional="none", name="qwen2-nopos")
    r = measure(a, layers=1)
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"]
    assert GroupSpec.from_arch(a).factor("key-bias-shift").status == "exact"


def test_dropping_the_bias_shift_leaves_directions_unexplained():
    """False case: without key-bias-shift the bias-carrying rotary-free instance has d_k more null directions."""
    a = rep(get_arch("qwen2-7b"), positional="none", name="qwen2-nopos")
    r = measure(a, layers=1, exclude=("key-bias-shift",))
    assert not r["agrees"] and r["measured_dimension"] - r["group_dimension"] == 2  # H_kv = 1, d_k = 2
    assert all(u["moves"][0]["tensor"] == "layer0.b_K" for u in r["unexplained"])


def test_layernorm_with_qkv_only_biases_is_refused():
    with pytest.raises(SymtransError, match="not modelled"):
        GroupSpec.from_arch(rep(get_arch("gpt2"), bias=False, qkv_bias=True))


def test_random_qwen2_shape_float32_and_float64():
    a = rep(get_arch("qwen2-7b"), n=5, L=2, H=4, H_kv=2, d_model=8, d_k=4, d_v=4, d_ff=6, ln_eps=1e-6)
    for dtype in ("float64", "float32"):
        for c in verify_random(a, dtype=dtype, seed=1):
            assert c.verdict is Verdict.SUPPORTED, c.line()


# --------------------------------------------------------------------------- pre-LayerNorm with an untied head
UNTIED_GPT2 = rep(get_arch("gpt2"), tied_lm_head=False, name="gpt2-untied")


def test_untied_pre_layernorm_counts_from_an_independent_count():
    a = UNTIED_GPT2
    tied, untied = GroupSpec.from_arch("gpt2"), GroupSpec.from_arch(a)
    d = a.d_model
    # O(d - 1) on the residual (rotations fixing 1), the final norm's gains and its bias (through the head's
    # hyperplane), the word rows along 1 and a constant moved between word and position tables (d - 1 beyond
    # the shift along 1): the word table is no longer the head
    extra = (d - 1) * (d - 2) // 2 + d + d + a.vocab_size + (d - 1)
    assert untied.scope_dimension("model") - tied.scope_dimension("model") == extra
    assert untied.scope_dimension("layers") == tied.scope_dimension("layers")
    assert untied.factor("residual-rotation").group.endswith("(O(d_model - 1))")


@pytest.mark.parametrize("layers,sizes", [(1, {}), (1, dict(d_model=7, H=2, d_k=3, d_v=2, d_ff=4, n=6))])
def test_untied_pre_layernorm_measured_equals_G(layers, sizes):
    r = measure(UNTIED_GPT2, layers=layers, scope="model", sizes=sizes)
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] == r["tangent_rank"], r["unexplained"][:2]
    # false case: without the two new factors the null space is larger than G by exactly their dimensions
    d = r["sizes"]["d_model"]
    less = measure(UNTIED_GPT2, layers=layers, scope="model", sizes=sizes,
                   exclude=("residual-rotation", "final-norm-bias-transfer"))
    assert less["measured_dimension"] - less["group_dimension"] == (d - 1) * (d - 2) // 2 + d
    assert not less["agrees"]


def test_untied_pre_layernorm_numeric_and_false_cases():
    from symtrans.numeric.weights import ModelWeights

    w = tiny_decoder("gpt2")  # the same weights read through an untied head (the identity head of the check)
    a = rep(w.arch, tied_lm_head=False)
    gen = torch.Generator().manual_seed(11)
    tensors = dict(w.tensors)  # the GPT-2 fixture has zero biases and unit gains: make them generic
    for name in ("ln1_b", "ln2_b", "final_ln_b", "b_in", "b_out", "b_O"):
        tensors[name] = 0.1 * torch.randn(w.tensors[name].shape, generator=gen, dtype=torch.float64)
    for name in ("ln1_w", "ln2_w", "final_ln_w"):
        tensors[name] = 1 + 0.2 * torch.randn(w.tensors[name].shape, generator=gen, dtype=torch.float64)
    u = ModelWeights(a, tensors, w.source, w.weights_hash, w.dtype, w.device, w.family, w.config)
    names = ["residual-rotation", "final-norm-bias-transfer", "final-norm-scaling", "embedding-centring-shift"]
    for c in verify_model(u, dtypes=("float64",), n=6, factors=names):
        assert c.verdict is Verdict.SUPPORTED and c.max_rel_change < 1e-13, c.line()
    spec = GroupSpec.from_arch(a)
    wrong = {"residual-rotation": tuple(t for t in spec.factor("residual-rotation").tags if t.tensor != "ln2_b"),
             "final-norm-bias-transfer": tuple(rep(t, how="translate_neg") if t.how == "translate" else t
                                               for t in spec.factor("final-norm-bias-transfer").tags)}
    for c in verify_model(u, dtypes=("float64",), n=6, factors=list(wrong), tags=wrong):
        assert c.verdict == "fails", c.line()


@pytest.mark.slow  # ~25 s: the LayerNorm rotation generators and the non-linear bias transfer, exactly
def test_untied_pre_layernorm_certified():
    from symtrans.group.certify import certify_factor

    for name in ("residual-rotation", "final-norm-bias-transfer"):
        c = certify_factor(UNTIED_GPT2, name)
        assert c.ok, c.line()


def test_rmsnorm_rotation_with_position_and_type_tables_measured():
    """The position and type tables are writers like the word table: O(d_model) survives them (measured)."""
    a = rep(get_arch("llama2-7b"), positional="learned", position_table=4096, type_vocab_size=2, name="llama-tables")
    spec = GroupSpec.from_arch(a)
    assert spec.factor("residual-rotation").status == "exact"
    assert {"pos axis d_model: right by Q", "type axis d_model: right by Q"} <= set(spec.factor("residual-rotation").acts_on())
    r = measure(a, layers=1, scope="model")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"], r["unexplained"][:2]
    sinus = GroupSpec.from_arch(rep(a, positional="sinusoidal", type_vocab_size=0))
    assert sinus.factor("residual-rotation").status == "broken"  # a fixed table cannot absorb E -> E Q


# --------------------------------------------------------------------------- RoBERTa's unused position rows
def test_roberta_unused_position_rows_measured_and_counted():
    spec = GroupSpec.from_arch("roberta-base")
    a = spec.arch
    assert a.position_table - a.max_positions == 2  # positions start at padding_idx + 1 = 2
    f = spec.factor("unused-position-rows")
    assert f.status == "exact" and spec._value(f.dimension) == 2 * a.d_model
    assert GroupSpec.from_arch("bert-base").factor("unused-position-rows").status == "broken"
    r = measure("roberta-base", layers=1, scope="model")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"]
    less = measure("roberta-base", layers=1, scope="model", exclude=("unused-position-rows",))
    assert less["measured_dimension"] - less["group_dimension"] == 2 * less["sizes"]["d_model"]


def test_roberta_unused_rows_numeric_and_false_case(tmp_path):
    from symtrans.numeric import load_model

    random_checkpoint(tmp_path / "rb", "roberta")
    w = load_model(tmp_path / "rb")
    assert w.position_offset == 2
    [c] = verify_model(w, dtypes=("float64",), n=6, factors=["unused-position-rows"])
    assert c.verdict is Verdict.SUPPORTED, c.line()
    ref = encode(w, n=6, seed=1).hidden_states[-1]
    for rows, unread in ((slice(0, 2), True), (slice(2, 4), False)):  # false case: the first two rows used
        moved = w.copy()
        moved.pos[rows] += torch.randn(2, w.d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        change = _rel(encode(moved, n=6, seed=1).hidden_states[-1], ref)
        assert (change == 0.0) if unread else (change > 1e-3), (rows, change)


def test_roberta_unused_rows_certified():
    from symtrans.group.certify import certify_factor

    assert certify_factor("roberta-base", "unused-position-rows").ok
