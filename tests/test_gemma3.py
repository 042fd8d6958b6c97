"""Gemma 3 (``model_type`` gemma3_text) through the one description of an architecture.

Every number is checked against an independent route: the parameter count
against ``transformers``' own model built on the meta device from the
published 270M config, the forward against ``transformers``' own forward on a
random tiny checkpoint (its float32 upcasts turned off, so float64 against
float64), and a negative control per structural feature (drop it and parity
breaks).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _configs import write_config  # noqa: E402
from symtrans.arch import from_config  # noqa: E402
from symtrans.errors import SymtransError  # noqa: E402
from symtrans.formulas import formula  # noqa: E402

#: the published Gemma 3 270M text config (google/gemma-3-270m), as transformers writes it
GEMMA3_270M: dict[str, Any] = {
    "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048,
    "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
    "max_position_embeddings": 32768, "sliding_window": 512, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
    "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
    "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    "attn_logit_softcapping": None, "final_logit_softcapping": None,
}



def _hf_count(cfg: dict[str, Any]) -> int:
    conf = transformers.Gemma3TextConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.Gemma3TextModel(conf)
    return sum(p.numel() for p in model.parameters())


def test_params_model_equals_transformers_count_on_the_published_270m_config(tmp_path: Path) -> None:
    count = _hf_count(GEMMA3_270M)
    assert int(formula("params-model", arch=str(write_config(tmp_path, GEMMA3_270M))).value) == count
    # a different shape too (GQA 2:1, no tie): the count is derived, not echoed
    other = {**GEMMA3_270M, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
             "num_hidden_layers": 5, "layer_types": ["sliding_attention"] * 4 + ["full_attention"]}
    assert int(formula("params-model", arch=str(write_config(tmp_path, other, "o"))).value) == _hf_count(other)


def test_the_config_is_read_field_by_field(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, GEMMA3_270M))
    assert (a.family, a.H, a.H_kv, a.d_k, a.qk_norm, a.post_norms, a.gain_offset, a.embedding_scale) == \
        ("gemma3", 4, 1, 256, True, True, 1, True)
    assert a.attn_scalar == 256.0 and a.sliding_window == 512 and a.tied_lm_head
    assert [i for i in range(18) if a.layer_kind(i) == "full"] == [5, 11, 17]
    assert (a.rope_base_at(0), a.rope_base_at(5)) == (10000.0, 1000000.0)
    assert (a.window_at(0), a.window_at(5)) == (512, None)
    # an older config: sliding_window_pattern and rope_local_base_freq instead of layer_types, rope_parameters
    old = {k: v for k, v in GEMMA3_270M.items() if k not in ("layer_types", "rope_parameters")}
    b = from_config(write_config(tmp_path, {**old, "sliding_window_pattern": 3, "rope_theta": 5e5,
                                      "rope_local_base_freq": 2e4}, "old"))
    assert [b.layer_kind(i) for i in range(4)] == ["sliding", "sliding", "full", "sliding"]
    assert (b.rope_base_at(0), b.rope_base_at(2)) == (2e4, 5e5)


@pytest.mark.parametrize("field,value,named", [
    ("attn_logit_softcapping", 50.0, "attn_logit_softcapping"),
    ("final_logit_softcapping", 30.0, "final_logit_softcapping"),
    ("use_bidirectional_attention", True, "use_bidirectional_attention"),
    ("attention_bias", True, "attention_bias"),
    ("layer_types", ["full_attention"] * 3, "layer_types"),
])
def test_unmodelled_fields_are_refused_by_name(tmp_path: Path, field: str, value: Any, named: str) -> None:
    with pytest.raises(SymtransError, match=named):
        from_config(write_config(tmp_path, {**GEMMA3_270M, field: value}))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("gemma3"), "gemma3", n_layers=3)


def _reference(model: Any, ids: Any) -> Any:
    from symtrans.numeric.fixtures import float64_reference

    with float64_reference(), torch.no_grad():
        return model.double()(ids[None], output_hidden_states=True, output_attentions=True)


def test_forward_parity_with_transformers_in_float64(tiny: tuple[Path, Any]) -> None:
    from symtrans.numeric import encode, load_model

    path, model = tiny
    w = load_model(path, dtype="float64")
    ids = torch.randint(0, 120, (12,), generator=torch.Generator().manual_seed(1))
    ours = encode(w, input_ids=ids)
    ref = _reference(model, ids)
    assert w.arch.layer_types == ("sliding", "full", "sliding") and w.arch.sliding_window == 5 < 12
    worst_h = max(float((a - b[0]).abs().max()) for a, b in zip(ours.hidden_states, ref.hidden_states))
    worst_a = max(float((t.A - a[0]).abs().max()) for t, a in zip(ours.layers, ref.attentions))
    print(f"gemma3 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12
    # the sliding layers really mask: key 0 is out of query 11's window there, not on the full layer
    assert float(ours.layers[0].A[:, 11, 0].abs().max()) == 0 and float(ours.layers[1].A[:, 11, 0].min()) > 0


@pytest.mark.parametrize("drop", ["qk_norm", "post_norms", "gain_offset", "embedding_scale", "attn_scalar",
                                  "layer_types", "rope_bases"])
def test_each_modelled_feature_matters(tiny: tuple[Path, Any], drop: str) -> None:
    """Negative control: the architecture without one feature no longer matches transformers."""
    from symtrans.numeric import encode, load_model

    path, model = tiny
    w = load_model(path, dtype="float64")
    off = {"qk_norm": False, "post_norms": False, "gain_offset": 0, "embedding_scale": False, "attn_scalar": None,
           "layer_types": ("full",) * 3, "rope_bases": (("full", 10000.0), ("sliding", 10000.0))}[drop]
    w.arch = dataclasses.replace(w.arch, **{drop: off})
    if drop == "gain_offset":  # the loader applied 1 + w: undo it as a loader without the feature would
        for k in ("ln1_w", "ln2_w", "q_norm_w", "k_norm_w", "ln1_post_w", "ln2_post_w"):
            w.tensors[k] = w.tensors[k] - 1
        w.tensors["final_ln_w"] = w.tensors["final_ln_w"] - 1
    ids = torch.randint(0, 120, (12,), generator=torch.Generator().manual_seed(1))
    ref = _reference(model, ids)
    worst = max(float((a - b[0]).abs().max()) for a, b in zip(encode(w, input_ids=ids).hidden_states,
                                                               ref.hidden_states))
    assert worst > 1e-6, drop


def test_default_forward_differs_from_transformers_upcasts_only_by_float32_rounding(tiny: tuple[Path, Any]) -> None:
    from symtrans.numeric import encode, load_model

    path, model = tiny
    w = load_model(path, dtype="float64")
    ids = torch.arange(3, 15)
    with torch.no_grad():
        ref = model.double()(ids[None], output_hidden_states=True)
    worst = max(float((a - b[0]).abs().max()) for a, b in zip(encode(w, input_ids=ids).hidden_states,
                                                               ref.hidden_states))
    assert 0 < worst < 1e-4  # transformers' float32 norm, rotary and softmax steps; ours are float64


# --------------------------------------------------------------------------- the group G
def test_group_derivation_qk_norm_and_post_norms(tmp_path: Path) -> None:
    """What each feature does to G, as derived in group/spec.py (the measured check is the next test)."""
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(from_config(write_config(tmp_path, GEMMA3_270M)))
    assert spec.factor("qk-gauge").status == "broken"  # QK-norm
    subs = spec.arch.substitutions()
    assert spec.factor("qk-norm-gain-trade").effective_dimension.subs(subs) == 128  # d_k / 2: one per rotated pair
    assert spec.factor("residual-rotation").status == "broken"
    assert {b.feature for b in spec.factor("residual-rotation").broken_by if b.present} >= {"post-norms"}
    assert spec.factor("vo-gauge").effective_dimension.subs(subs) == 1 * 256 ** 2
    # per layer: vo-gauge H_kv d_v^2 + ffn-scaling d_ff + two pre-norm scalings 2 d_model + the gain trade d_k / 2
    assert spec.layer_dimension() == 256 ** 2 + 2048 + 2 * 640 + 128


def _tiny_config(tmp_path: Path) -> Path:
    cfg = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4, query_pre_attn_scalar=12,
        layer_types=["sliding_attention", "full_attention"])
    cfg.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


@pytest.mark.parametrize("layers,scope", [(1, "layers"), (2, "layers"), (1, "model")])
def test_group_complete_agrees_on_a_tiny_gemma3_config(tmp_path: Path, layers: int, scope: str) -> None:
    from symtrans.group.complete import measure

    a = from_config(_tiny_config(tmp_path))
    r = measure(a, layers=layers, scope=scope)
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    assert r["record"]["gap_decades"] > 8


def test_the_gain_trade_has_one_scale_per_rotated_pair(tmp_path: Path) -> None:
    """At d_k = 4 (two rotated pairs) the measured null space has exactly d_k / 2 = 2 gain-trade directions."""
    from symtrans.group.complete import measure

    a = from_config(_tiny_config(tmp_path))
    small = measure(a, layers=1, sizes={"d_k": 2, "d_v": 2})
    wide = measure(a, layers=1, sizes={"d_k": 4, "d_v": 2})
    assert small["agrees"] and wide["agrees"]
    assert wide["measured_dimension"] - small["measured_dimension"] == 1  # 2 pairs - 1 pair


def test_a_group_without_the_gain_trade_disagrees(tmp_path: Path) -> None:
    """False case: drop the factor the derivation adds and the measurement names the directions it leaves."""
    from symtrans.group.complete import measure

    a = from_config(_tiny_config(tmp_path))
    r = measure(a, layers=1, exclude=("qk-norm-gain-trade",))
    assert not r["agrees"] and r["measured_dimension"] == r["group_dimension"] + 1
    assert any("norm_w" in str(u) for u in r["unexplained"]), r["unexplained"]


def test_variants_follow_each_layers_structure(tiny: tuple[Path, Any]) -> None:
    """The full variant through run_stack reproduces the trace (post-norms, per-layer bases and windows)."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.variants import run_stack

    path, _ = tiny
    w = load_model(path, dtype="float64")
    tr = encode(w, n=12, seed=0)
    states = run_stack(w, tr.embeddings, "full")
    assert max(float((s - t.out).abs().max()) for s, t in zip(states[1:], tr.layers)) == 0
    # pure attention with norms includes the post-norm: equal to P1(MHA(N1 X)) of the trace
    from symtrans.numeric.forward import norm, structure

    pure = run_stack(w, tr.embeddings, "pure-attention", depth=1, ln=True)[1]
    st = structure(w).at(0)
    want = norm(tr.layers[0].mha + w.layer(0)["b_O"], w.layer(0)["ln1_post_w"], None, st)
    assert float((pure - want).abs().max()) == 0


def test_smollm3_nope_layers_are_read_not_mapped_as_plain_llama(tmp_path: Path) -> None:
    """SmolLM3 skips rotary positions on its NoPE layers: read per layer (mapped as Llama, G would be too small)."""
    cfg = transformers.SmolLM3Config(num_hidden_layers=4, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=200000)
    assert 0 in cfg.no_rope_layers
    cfg.save_pretrained(tmp_path / "nope")
    a = from_config(tmp_path / "nope")
    assert [a.rotary_at(i) for i in range(4)] == [bool(r) for r in cfg.no_rope_layers]
    cfg.no_rope_layers = [1, 1, 1, 1]  # rotary on every layer: Llama's structure, no per-layer list
    cfg.save_pretrained(tmp_path / "rope")
    assert from_config(tmp_path / "rope").positional == "rotary" and from_config(tmp_path / "rope").rope_layers == ()


def _scaled_gain(a: Any, d: float) -> list[dict[str, Any]]:
    """ln1-scaling scaling channel 5 of layer 0's gain by ``d`` (its reading rows by 1 / d), the rest 1."""
    D = [torch.eye(a.d_model, dtype=torch.float64) for _ in range(a.n_layers)]
    D[0][5, 5] = d
    return [{"factor": "ln1-scaling", "element": [{"D": x} for x in D]}]


def _relation_checked(a_path: Path, b_path: Path, steps: Any, tmp_path: Path, name: str) -> tuple[bool, str]:
    """verify's answer on a file claiming B = steps . A."""
    import json

    from symtrans.group.relate import Relation, check_relation, write_relation
    from symtrans.numeric import load_model

    ids = [{"model": str(p), "weights_hash": load_model(p).weights_hash} for p in (a_path, b_path)]
    path = write_relation(Relation(True, steps, [], [], None, a=ids[0], b=ids[1]), tmp_path / name)
    return check_relation(json.loads(path.read_text()), path)


def _related_and_verified(a_path: Path, b_path: Path, tmp_path: Path) -> Any:
    """relate(A, B) from disk, asserted related, and verify's acceptance of the file it writes: the relation."""
    import json

    from symtrans.group.relate import check_relation, relate, write_relation

    rel = relate(str(a_path), str(b_path))
    assert rel.related, rel.summary()
    written = write_relation(rel, tmp_path / "g.json")
    ok, why = check_relation(json.loads(written.read_text()), written)
    assert ok, why
    return rel


@pytest.mark.parametrize("d", [1e-2, 1e-3, 1e-5])
def test_a_gain_scaled_toward_0_is_related_at_its_stored_offset(tiny: tuple[Path, Any], tmp_path: Path,
                                                                d: float) -> None:
    """B = g . A rounded once to float32, with g scaling one gain channel by d: its applied gain (1 + w) d near 0
    is stored as w near -1, rounded at u |w| (a relative u / d of the gain), and g^-1 . B carries that back x 1/d.
    Counted at the stored w carried through the element (stored_offset), not at the gain read off either side:
    relate gave "not related" at ln1_w (d <= 1e-3) and verify refused the true element's file (d = 1e-2).
    Forgeries stay refused: the gain scaled with no matching change of its reading rows, the gain's stored w moved
    by 100 times its float32 rounding, and another channel's gain moved by 100 of its own."""

    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, relate
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric import load_model
    from symtrans.numeric.save import save_weights
    from symtrans.precision import unit_roundoff

    path, _ = tiny
    a = load_model(path)
    spec, steps = GroupSpec.from_arch(a.arch), _scaled_gain(a, d)
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps))
    pb = save_weights(b, tmp_path / "b", dtype="float32")
    _related_and_verified(path, pb, tmp_path)
    ok, why = _relation_checked(path, pb, steps, tmp_path, "true.json")
    assert ok, why
    # the gain alone scaled (its reading rows as A's): refused, by relate and by verify on the claim
    alone = a.copy()
    alone.tensors["ln1_w"][0][5] *= d
    pf = save_weights(alone, tmp_path / "alone", dtype="float32")
    assert not relate(str(path), str(pf)).related
    assert not _relation_checked(path, pf, steps, tmp_path, "alone.json")[0]
    # g . A with the gain's stored w then moved by 100 of its float32 roundings: refused both ways
    moved = weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps))
    w = moved.tensors["ln1_w"][0][5] - a.arch.gain_offset
    moved.tensors["ln1_w"][0][5] = a.arch.gain_offset + w * (1 + 100 * unit_roundoff("float32"))
    pm = save_weights(moved, tmp_path / "moved", dtype="float32")
    assert not relate(str(path), str(pm)).related
    assert not _relation_checked(path, pm, steps, tmp_path, "moved.json")[0]
    # and another channel's gain (near 1, not coarse) moved by 100 of its roundings: the carried |w| of channel 5
    # widens the tensor's residual on A's side, not that entry's
    other = weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps))
    other.tensors["ln1_w"][0][7] *= 1 + 100 * unit_roundoff("float32")
    po = save_weights(other, tmp_path / "other", dtype="float32")
    assert not relate(str(path), str(po)).related
    assert not _relation_checked(path, po, steps, tmp_path, "other.json")[0]


@pytest.mark.parametrize("factor", ["ln1-scaling", "ln2-scaling", "qk-norm-gain-trade"])
def test_gains_spread_over_1e_4_to_1e4_are_related_at_their_stored_offset(tiny: tuple[Path, Any], tmp_path: Path,
                                                                          factor: str) -> None:
    """Every gain channel scaled by its own factor in 1e-4..1e4 (one per rotated pair for the QK-norm trade), B
    written in float32: the gains near 0 are stored as w near -1, each entry rounded at u |w|, and so are their
    entries measured (as a vector with outliers, :func:`worst_entries`, and one by one). relate said "not related"
    at the gains' Frobenius residual, then "cannot decide" at their entries; now related, and verify accepts the
    file it writes."""

    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric import load_model
    from symtrans.numeric.save import save_weights

    path, _ = tiny
    a = load_model(path)
    spec = GroupSpec.from_arch(a.arch)
    gen = torch.Generator().manual_seed(0)
    n = a.tensors["q_norm_w"].shape[-1] // 2 if factor == "qk-norm-gain-trade" else a.d_model

    def scales() -> Any:
        v = 10.0 ** (8 * torch.rand(n, generator=gen, dtype=torch.float64) - 4)
        return torch.diag(torch.cat([v, v]) if factor == "qk-norm-gain-trade" else v)

    steps = [{"factor": factor, "element": [{"D": scales()} for _ in range(a.n_layers)]}]
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps))
    pb = save_weights(b, tmp_path / "b", dtype="float32")
    _related_and_verified(path, pb, tmp_path)


def test_a_gain_its_offset_storage_loses_is_reported_beside_a_related_answer(tiny: tuple[Path, Any],
                                                                             tmp_path: Path) -> None:
    """A gain channel scaled by 1e-8 is stored as w = -1 (float32): its value is lost, so B computes another
    function (logits a few % off), though B is g . A at its storage. relate says related (the question it answers)
    and says that B holds a gain of exactly 0 where A holds none (no element of G makes one); a gain scaled by 1e-3
    is held to u |w| / |gain| of itself, computed here by hand. False case: a scaling of 10 gives no such line."""
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, offset_gain_resolution, relate
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric import load_model
    from symtrans.numeric.save import save_weights
    from symtrans.precision import unit_roundoff

    path, _ = tiny
    a = load_model(path)
    spec = GroupSpec.from_arch(a.arch)
    out = {}
    for d in (1e-8, 1e-3, 10.0):
        b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), _scaled_gain(a, d)))
        bl = load_model(save_weights(b, tmp_path / f"b{d:g}", dtype="float32"))
        rel = relate(a, bl)
        assert rel.related, rel.summary()
        out[d] = (rel.summary(), offset_gain_resolution(bl), bl)
    assert "stored gains: ln1_w[0] holds 0 gains of exactly 0 in A and 1 in B" in out[1e-8][0], out[1e-8][0]
    text, worst, bl = out[1e-3]
    gain = float(bl.tensors["ln1_w"][0, 5])
    want = unit_roundoff("float32") * abs(gain - 1) / abs(gain)  # by hand, not offset_loss
    assert (worst["tensor"], worst["layer"], worst["index"]) == ("ln1_w", 0, 5)
    assert worst["resolved_to"] == pytest.approx(want, rel=1e-12) and "stored gains: B's" in text
    assert "stored gains" not in out[10.0][0]
