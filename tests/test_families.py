"""The families interpretability researchers use, through the one description of an architecture (issue 42).

Per family, every number against an independent route: ``params-model``
against ``transformers``' own model built on the meta device from the
published config (``sum(p.numel())`` of ``AutoModelForCausalLM.from_config``),
the per-head forward against ``transformers``' own forward on a random tiny
float64 checkpoint (its float32 upcasts turned off: ``float64_reference``), G
against the measured stabiliser (``group.complete.measure``: the Jacobian null
space at one and two layers), and a negative control per structural feature
(drop it and parity, or agreement, breaks).
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

IDS = torch.tensor([7, 8, 5, 9, 10, 5, 11, 12, 70, 3, 64, 99])



def _hf_count(cfg: dict[str, Any]) -> int:
    """transformers' own parameter count of the base model, built on the meta device (no memory).

    ``params-model`` counts the base model; the causal LM built from the same
    config (also counted here) has exactly ``vocab_size * hidden_size`` more
    when its head is untied, none when tied (parameters() lists a tied one once).
    """
    conf = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        base = sum(p.numel() for p in transformers.AutoModel.from_config(conf).parameters())
        lm = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(conf).parameters())
    head = 0 if conf.tie_word_embeddings else conf.vocab_size * conf.hidden_size
    assert lm == base + head, (lm, base, head)
    return base


def _float64_errors(family: str, model: Any, path: Path, *, ids: Any = IDS,
                    change: dict[str, Any] | None = None) -> tuple[float, float]:
    """Largest |ours - transformers| over hidden states and attention matrices, float64, upcasts off."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.fixtures import float64_reference

    w = load_model(path, dtype="float64")
    if change:
        w.arch = dataclasses.replace(w.arch, **change)
    ours = encode(w, input_ids=ids)
    with float64_reference(family), torch.no_grad():
        ref = model.double()(ids[None], output_hidden_states=True, output_attentions=True)
    worst_h = max(float((a - b[0]).abs().max()) for a, b in zip(ours.hidden_states, ref.hidden_states))
    worst_a = max(float((t.A - a[0]).abs().max()) for t, a in zip(ours.layers, ref.attentions))
    return worst_h, worst_a


# =========================================================================== Qwen3
#: Qwen3-0.6B's published config.json (Qwen/Qwen3-0.6B), the fields transformers reads
QWEN3_06B: dict[str, Any] = {
    "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-6, "hidden_act": "silu",
    "tie_word_embeddings": True, "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 28,
}


def test_qwen3_params_model_equals_transformers_count(tmp_path: Path) -> None:
    assert int(formula("params-model", arch=str(write_config(tmp_path, QWEN3_06B))).value) == _hf_count(QWEN3_06B)
    # Qwen3-8B's shape (untied, 36 layers, 32/8 heads of 128): derived, not echoed
    big = {**QWEN3_06B, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
           "num_attention_heads": 32, "tie_word_embeddings": False}
    assert int(formula("params-model", arch=str(write_config(tmp_path, big, "b"))).value) == _hf_count(big)


def test_qwen3_config_is_read_with_qk_norm_and_plain_gains(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, QWEN3_06B))
    assert (a.family, a.H, a.H_kv, a.d_k, a.d_model, a.qk_norm, a.post_norms, a.gain_offset) == \
        ("qwen3", 16, 8, 128, 1024, True, False, 0)
    assert a.tied_lm_head and not a.bias and not a.qkv_bias and a.sliding_window is None


@pytest.mark.parametrize("field,value,named", [
    ("use_sliding_window", True, "use_sliding_window"),
    ("layer_types", ["sliding_attention"] * 28, "layer_types"),
    ("attention_bias", True, "attention_bias"),
])
def test_qwen3_unmodelled_fields_are_refused_by_name(tmp_path: Path, field: str, value: Any, named: str) -> None:
    with pytest.raises(SymtransError, match=named):
        from_config(write_config(tmp_path, {**QWEN3_06B, field: value}))


@pytest.fixture(scope="module")
def qwen3_tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("qwen3"), "qwen3", n_layers=2, head=True,
                             tie_word_embeddings=False)


def test_qwen3_forward_parity_with_transformers_in_float64(qwen3_tiny: tuple[Path, Any]) -> None:
    path, model = qwen3_tiny
    worst_h, worst_a = _float64_errors("qwen3", model, path)
    print(f"qwen3 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12


def test_qwen3_without_qk_norm_breaks_parity(qwen3_tiny: tuple[Path, Any]) -> None:
    """Negative control: the same weights read as plain Llama (no QK-norm) no longer match transformers."""
    path, model = qwen3_tiny
    assert min(_float64_errors("qwen3", model, path, change={"qk_norm": False})) > 1e-6


def _qwen3_tiny_config(tmp_path: Path, **extra: Any) -> Path:
    cfg = transformers.Qwen3Config(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                   max_position_embeddings=64, **extra)
    cfg.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def test_qwen3_group_derivation(tmp_path: Path) -> None:
    """QK-norm breaks the qk-gauge and leaves the gain trade (d_k / 2 per layer); plain gains change nothing else."""
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(from_config(write_config(tmp_path, QWEN3_06B)))
    subs = spec.arch.substitutions()
    assert spec.factor("qk-gauge").status == "broken"
    assert spec.factor("qk-norm-gain-trade").effective_dimension.subs(subs) == 64
    # per layer: vo-gauge H_kv d_v^2 + ffn-scaling d_ff + the two pre-norm scalings 2 d_model + the gain trade
    assert spec.layer_dimension() == 8 * 128 ** 2 + 3072 + 2 * 1024 + 64


@pytest.mark.parametrize("layers,scope,tied", [(1, "layers", True), (2, "layers", True), (1, "model", False),
                                               pytest.param(2, "model", True, marks=pytest.mark.slow)])
def test_qwen3_group_complete_agrees(tmp_path: Path, layers: int, scope: str, tied: bool) -> None:
    from symtrans.group.complete import measure

    a = from_config(_qwen3_tiny_config(tmp_path, tie_word_embeddings=tied))
    r = measure(a, layers=layers, scope=scope, sizes={"d_k": 4, "d_v": 2})
    print(f"qwen3 L={layers} {scope} tied={tied}: measured {r['measured_dimension']}, G {r['group_dimension']}, "
          f"gap {r['record']['gap_decades']:.1f} decades")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    assert r["record"]["gap_decades"] > 8


def test_qwen3_a_group_without_the_gain_trade_disagrees(tmp_path: Path) -> None:
    """False case: drop the QK-norm gain trade and the measurement finds d_k / 2 directions on the norm gains."""
    from symtrans.group.complete import measure

    a = from_config(_qwen3_tiny_config(tmp_path))
    r = measure(a, layers=1, exclude=("qk-norm-gain-trade",), sizes={"d_k": 4, "d_v": 2})
    assert not r["agrees"] and r["measured_dimension"] == r["group_dimension"] + 2
    assert any("norm_w" in str(u) for u in r["unexplained"]), r["unexplained"]


# =========================================================================== Gemma 2
#: Gemma 2 2B's published config.json (google/gemma-2-2b), the fields transformers reads
GEMMA2_2B: dict[str, Any] = {
    "model_type": "gemma2", "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "max_position_embeddings": 8192, "sliding_window": 4096, "query_pre_attn_scalar": 256,
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "tie_word_embeddings": True, "attention_bias": False, "cache_implementation": "hybrid",
}


def test_gemma2_params_model_equals_transformers_count(tmp_path: Path) -> None:
    assert int(formula("params-model", arch=str(write_config(tmp_path, GEMMA2_2B))).value) == _hf_count(GEMMA2_2B)
    # Gemma 2 27B's shape (46 layers, 32/16 heads of 128, scalar 144 = d_model / H): derived, not echoed
    big = {**GEMMA2_2B, "hidden_size": 4608, "intermediate_size": 36864, "num_hidden_layers": 46,
           "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "query_pre_attn_scalar": 144}
    assert int(formula("params-model", arch=str(write_config(tmp_path, big, "b"))).value) == _hf_count(big)


def test_gemma2_config_is_read_field_by_field(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, GEMMA2_2B))
    assert (a.family, a.H, a.H_kv, a.d_k, a.qk_norm, a.post_norms, a.gain_offset, a.embedding_scale) == \
        ("gemma2", 8, 4, 256, False, True, 1, True)
    assert (a.attn_softcap, a.final_softcap, a.attn_scalar, a.sliding_window) == (50.0, 30.0, 256.0, 4096)
    # no layer_types in the published file: transformers alternates from layer 0 (sliding, full, ...)
    assert [a.layer_kind(i) for i in range(4)] == ["sliding", "full", "sliding", "full"]
    assert a.rope_base_at(0) == a.rope_base_at(1) == 10000.0
    b = from_config(write_config(tmp_path, {**GEMMA2_2B, "attn_logit_softcapping": None}, "nocap"))
    assert b.attn_softcap is None and b.final_softcap == 30.0


@pytest.mark.parametrize("field,value,named", [
    ("attn_logit_softcapping", -1.0, "attn_logit_softcapping"),
    ("use_bidirectional_attention", True, "use_bidirectional_attention"),
    ("attention_bias", True, "attention_bias"),
])
def test_gemma2_unmodelled_or_bad_fields_are_refused_by_name(tmp_path: Path, field: str, value: Any,
                                                             named: str) -> None:
    with pytest.raises(SymtransError, match=named):
        from_config(write_config(tmp_path, {**GEMMA2_2B, field: value}))


@pytest.fixture(scope="module")
def gemma2_tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("gemma2"), "gemma2", n_layers=3)


def test_gemma2_forward_parity_with_transformers_in_float64(gemma2_tiny: tuple[Path, Any]) -> None:
    path, model = gemma2_tiny
    from symtrans.numeric import load_model

    a = load_model(path).arch
    assert a.attn_softcap == 1.5 and a.layer_types == ("sliding", "full", "sliding") and a.sliding_window == 5
    worst_h, worst_a = _float64_errors("gemma2", model, path)
    print(f"gemma2 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12


@pytest.mark.parametrize("drop", ["attn_softcap", "post_norms", "layer_types", "attn_scalar"])
def test_gemma2_each_modelled_feature_matters(gemma2_tiny: tuple[Path, Any], drop: str) -> None:
    """Negative control: the architecture without one feature no longer matches transformers."""
    path, model = gemma2_tiny
    off = {"attn_softcap": None, "post_norms": False, "layer_types": ("full",) * 3, "attn_scalar": None}[drop]
    assert max(_float64_errors("gemma2", model, path, change={drop: off})) > 1e-6, drop


def _gemma2_tiny_config(tmp_path: Path) -> Path:
    cfg = transformers.Gemma2Config(
        vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4, query_pre_attn_scalar=12,
        attn_logit_softcapping=1.5, final_logit_softcapping=2.0)
    cfg.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def test_gemma2_group_derivation(tmp_path: Path) -> None:
    """Soft-capping keeps the qk-gauge (the same scores, capped); post-norms break the residual rotation."""
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(from_config(write_config(tmp_path, GEMMA2_2B)))
    assert spec.factor("qk-gauge").status != "broken"
    assert spec.factor("residual-rotation").status == "broken"
    assert "qk-norm-gain-trade" not in [f.name for f in spec.factors]
    # per layer: qk-gauge H_kv d_k (rotary commutant) + vo-gauge H_kv d_v^2 + ffn d_ff + two pre-norm scalings
    assert spec.layer_dimension() == 4 * 256 + 4 * 256 ** 2 + 9216 + 2 * 2304


@pytest.mark.parametrize("layers,scope", [(1, "layers"), (2, "layers"), (1, "model"),
                                          pytest.param(2, "model", marks=pytest.mark.slow)])
def test_gemma2_group_complete_agrees(tmp_path: Path, layers: int, scope: str) -> None:
    from symtrans.group.complete import measure

    a = from_config(_gemma2_tiny_config(tmp_path))
    r = measure(a, layers=layers, scope=scope)
    print(f"gemma2 L={layers} {scope}: measured {r['measured_dimension']}, G {r['group_dimension']}, "
          f"gap {r['record']['gap_decades']:.1f} decades")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    assert r["record"]["gap_decades"] > 8


# =========================================================================== Phi-3
#: Phi-3-mini-4k-instruct's published config.json (microsoft/Phi-3-mini-4k-instruct), the fields transformers reads
PHI3_MINI: dict[str, Any] = {
    "model_type": "phi3", "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
    "original_max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": None, "sliding_window": 2047,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
    "attention_dropout": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0, "bos_token_id": 1, "eos_token_id": 32000,
    "pad_token_id": 32000,
}


def test_phi3_params_model_equals_transformers_count(tmp_path: Path) -> None:
    assert int(formula("params-model", arch=str(write_config(tmp_path, PHI3_MINI))).value) == _hf_count(PHI3_MINI)
    # Phi-3-medium's shape (40 layers, 40 query heads sharing 10 key/value heads): derived, not echoed
    med = {**PHI3_MINI, "hidden_size": 5120, "intermediate_size": 17920, "num_hidden_layers": 40,
           "num_attention_heads": 40, "num_key_value_heads": 10}
    assert int(formula("params-model", arch=str(write_config(tmp_path, med, "m"))).value) == _hf_count(med)


def test_phi3_config_is_read_as_llama_with_its_window(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, PHI3_MINI))
    assert (a.family, a.H, a.H_kv, a.d_k, a.ffn, a.bias, a.tied_lm_head, a.sliding_window) == \
        ("phi3", 32, 32, 96, "gated", False, False, 2047)


@pytest.mark.parametrize("field,value,named", [
    ("partial_rotary_factor", 0.75, "partial_rotary_factor"),
    ("rope_parameters", {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
     "partial_rotary_factor"),
])
def test_phi3_partial_rotary_is_refused_by_name(tmp_path: Path, field: str, value: Any, named: str) -> None:
    with pytest.raises(SymtransError, match=named):
        from_config(write_config(tmp_path, {**PHI3_MINI, field: value}))


@pytest.fixture(scope="module")
def phi3_tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("phi3"), "phi3", n_layers=2)


def test_phi3_forward_parity_with_transformers_in_float64(phi3_tiny: tuple[Path, Any]) -> None:
    """The fused projections are split as transformers splits them (q, k, v rows; gate, then up)."""
    from symtrans.numeric import load_model

    path, model = phi3_tiny
    assert load_model(path).arch.sliding_window == 5 < len(IDS)
    worst_h, worst_a = _float64_errors("phi3", model, path)
    print(f"phi3 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12


def test_phi3_a_wrong_split_or_no_window_breaks_parity(phi3_tiny: tuple[Path, Any]) -> None:
    """Negative controls: gate and up swapped (the split read the wrong way round), or the window dropped."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.fixtures import float64_reference

    path, model = phi3_tiny
    w = load_model(path, dtype="float64").copy()
    w.tensors["W_gate"], w.tensors["W_in"] = w.tensors["W_in"].clone(), w.tensors["W_gate"].clone()
    with float64_reference("phi3"), torch.no_grad():
        ref = model.double()(IDS[None], output_hidden_states=True)
    swapped = max(float((a - b[0]).abs().max()) for a, b in zip(encode(w, input_ids=IDS).hidden_states,
                                                                 ref.hidden_states))
    assert swapped > 1e-6
    w = load_model(path, dtype="float64")
    tr = encode(w, input_ids=IDS)
    assert float(tr.layers[0].A[:, 11, 0].abs().max()) == 0  # key 0 is outside query 11's window of 5
    w.config = {**w.config, "sliding_window": None}  # the window unread: every earlier key
    unmasked = max(float((t.A - a[0]).abs().max()) for t, a in zip(encode(w, input_ids=IDS).layers,
                                                                    _reference_attentions(model)))
    assert unmasked > 1e-3


def _reference_attentions(model: Any) -> Any:
    from symtrans.numeric.fixtures import float64_reference

    with float64_reference("phi3"), torch.no_grad():
        return model.double()(IDS[None], output_attentions=True).attentions


@pytest.mark.parametrize("layers,scope", [(1, "layers"), pytest.param(2, "layers", marks=pytest.mark.slow),
                                          (1, "model")])
def test_phi3_group_complete_agrees(tmp_path: Path, layers: int, scope: str) -> None:
    """A parameter layout does not change G: Llama's factors, measured on the published config's reduction."""
    from symtrans.group.complete import measure

    a = from_config(write_config(tmp_path, PHI3_MINI))
    r = measure(a, layers=layers, scope=scope)
    print(f"phi3 L={layers} {scope}: measured {r['measured_dimension']}, G {r['group_dimension']}, "
          f"gap {r['record']['gap_decades']:.1f} decades")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    assert r["record"]["gap_decades"] > 8


# =========================================================================== OLMo 2
#: OLMo-2-1124-7B's published config.json (allenai/OLMo-2-1124-7B), the fields transformers reads
OLMO2_7B: dict[str, Any] = {
    "model_type": "olmo2", "vocab_size": 100352, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
    "rope_theta": 500000, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False,
    "attention_bias": False, "attention_dropout": 0.0, "pad_token_id": 100277, "eos_token_id": 100257,
    "bos_token_id": None,
}


def test_olmo2_params_model_equals_transformers_count(tmp_path: Path) -> None:
    assert int(formula("params-model", arch=str(write_config(tmp_path, OLMO2_7B))).value) == _hf_count(OLMO2_7B)
    # a grouped-query shape (32 query heads, 8 key/value heads): the k-norm's width is H_kv d_k, derived
    gqa = {**OLMO2_7B, "num_key_value_heads": 8, "num_hidden_layers": 4}
    assert int(formula("params-model", arch=str(write_config(tmp_path, gqa, "g"))).value) == _hf_count(gqa)


def test_olmo2_config_is_read_with_post_norms_only_and_full_width_qk_norm(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, OLMO2_7B))
    assert (a.family, a.pre_norms, a.post_norms, a.qk_norm, a.qk_norm_full, a.gain_offset, a.tied_lm_head) == \
        ("olmo2", False, True, True, True, 0, False)


def test_olmo2_attention_bias_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SymtransError, match="attention_bias"):
        from_config(write_config(tmp_path, {**OLMO2_7B, "attention_bias": True}))


@pytest.fixture(scope="module")
def olmo2_tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("olmo2"), "olmo2", n_layers=2)


def test_olmo2_forward_parity_with_transformers_in_float64(olmo2_tiny: tuple[Path, Any]) -> None:
    path, model = olmo2_tiny
    worst_h, worst_a = _float64_errors("olmo2", model, path)
    print(f"olmo2 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12


@pytest.mark.parametrize("change", [{"pre_norms": True, "post_norms": False}, {"qk_norm_full": False}])
def test_olmo2_each_modelled_feature_matters(olmo2_tiny: tuple[Path, Any], change: dict[str, Any]) -> None:
    """Negative controls: the norms placed as Llama's, or the QK-norm taken per head, no longer match."""
    from symtrans.numeric import load_model

    path, model = olmo2_tiny
    w = load_model(path, dtype="float64")
    layers = dict(w.tensors)
    if "pre_norms" in change:  # the post-norms' gains read as pre-norms
        w.tensors["ln1_w"], w.tensors["ln2_w"] = layers["ln1_post_w"], layers["ln2_post_w"]
        w.tensors["ln1_b"] = w.tensors["ln2_b"] = torch.zeros_like(layers["ln1_post_w"])
    else:  # per head: the first head's slice of the full-width gain
        w.tensors["q_norm_w"], w.tensors["k_norm_w"] = layers["q_norm_full_w"][:, 0], layers["k_norm_full_w"][:, 0]
    from symtrans.numeric import encode
    from symtrans.numeric.fixtures import float64_reference

    w.arch = dataclasses.replace(w.arch, **change)
    with float64_reference("olmo2"), torch.no_grad():
        ref = model.double()(IDS[None], output_hidden_states=True)
    worst = max(float((a - b[0]).abs().max()) for a, b in zip(encode(w, input_ids=IDS).hidden_states,
                                                               ref.hidden_states))
    assert worst > 1e-6, change


def _olmo2_tiny_config(tmp_path: Path) -> Path:
    cfg = transformers.Olmo2Config(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   pad_token_id=0, eos_token_id=1)
    cfg.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def test_olmo2_group_derivation(tmp_path: Path) -> None:
    """No pre-norms: no norm scalings; full-width QK-norm: one gain trade per key/value head (H_kv d_k / 2)."""
    from symtrans.group.spec import GroupSpec

    spec = GroupSpec.from_arch(from_config(write_config(tmp_path, OLMO2_7B)))
    subs = spec.arch.substitutions()
    assert spec.factor("ln1-scaling").status == spec.factor("ln2-scaling").status == "broken"
    assert spec.factor("qk-gauge").status == spec.factor("residual-rotation").status == "broken"
    assert spec.factor("qk-norm-gain-trade").effective_dimension.subs(subs) == 32 * 64
    # per layer: vo-gauge H_kv d_v^2 + ffn-scaling d_ff + the gain trade H_kv d_k / 2
    assert spec.layer_dimension() == 32 * 128 ** 2 + 11008 + 32 * 64


@pytest.mark.parametrize("layers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_olmo2_group_complete_agrees_on_the_layers(tmp_path: Path, layers: int) -> None:
    from symtrans.group.complete import measure

    a = from_config(_olmo2_tiny_config(tmp_path))
    r = measure(a, layers=layers, sizes={"d_k": 4, "d_v": 2})
    print(f"olmo2 L={layers} layers: measured {r['measured_dimension']}, G {r['group_dimension']}, "
          f"gap {r['record']['gap_decades']:.1f} decades")
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    assert r["record"]["gap_decades"] > 8


def test_olmo2_per_kv_head_gain_trade(tmp_path: Path) -> None:
    """The trade is one scaling per key/value head: with two key/value heads the null space holds 2 x d_k/2 of
    them, and a group without the factor leaves exactly those on the norm gains (a false case)."""
    from symtrans.group.complete import measure

    a = from_config(_olmo2_tiny_config(tmp_path))
    one = measure(a, layers=1, sizes={"d_k": 4, "d_v": 2, "H": 2, "H_kv": 1})
    two = measure(a, layers=1, sizes={"d_k": 4, "d_v": 2, "H": 2, "H_kv": 2})
    assert one["agrees"] and two["agrees"]
    r = measure(a, layers=1, sizes={"d_k": 4, "d_v": 2, "H": 2, "H_kv": 2}, exclude=("qk-norm-gain-trade",))
    assert not r["agrees"] and r["measured_dimension"] == r["group_dimension"] + 2 * 2
    assert all("norm_full_w" in str(u) for u in r["unexplained"]), r["unexplained"]


@pytest.mark.slow
def test_olmo2_group_complete_agrees_on_the_model_when_the_writers_span_the_stream(tmp_path: Path) -> None:
    """Model scope (embeddings, the layer, the untied head) at H d_v >= d_model and d_ff >= d_model, as in every
    published OLMo 2 (H d_v = d_model, d_ff > d_model). Below that (the default reduction: H d_v = 4 < d_model = 6)
    the measurement finds more directions than G: with no pre-norm the stream is read raw, and a residual map
    need only be orthogonal on the writers' image there; G does not list that small-size freedom."""
    from symtrans.group.complete import measure

    a = from_config(_olmo2_tiny_config(tmp_path))
    r = measure(a, layers=1, scope="model", sizes={"d_k": 4, "d_v": 4, "d_ff": 8})
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"] > 0, r
    small = measure(a, layers=1, scope="model", sizes={"d_k": 4, "d_v": 2})
    assert small["measured_dimension"] > small["group_dimension"]  # the named small-size condition (below)


#: OLMo 2 instances whose writers do not span the stream (d_model = 6): sizes, layers
_WRITER_GAPS = [({"d_k": 4, "d_v": 2}, 1), ({"d_k": 4, "d_v": 1}, 1), ({"d_k": 4, "d_v": 2, "d_ff": 5}, 1),
                ({"d_k": 4, "d_v": 3, "d_ff": 2}, 1), ({"d_k": 4, "d_v": 2}, 2)]


def _writer_gap_brute(H: int, d_v: int, d_ff: int, d: int, L: int, seed: int = 0) -> int:
    """The writer-gap dimension by brute force: the null space of the first-order conditions of complete.writer_gap
    (an antisymmetric Omega, one gain change delta_w per writer; sym(P_U (Gamma Omega Gamma^-1 - diag delta) P_U^T)
    = 0 on each writer's random row space U and gain Gamma), built as a matrix and its rank taken (float64,
    rank cut at 1e-9 relative; the values are O(1) or rounding, the gap is > 10 decades)."""
    gen = torch.Generator().manual_seed(seed)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    writers = [min(H * d_v, d), min(d_ff, d)] * L
    cols = len(pairs) + d * len(writers)
    rows = []
    for w, r in enumerate(writers):
        U = torch.randn(r, d, generator=gen, dtype=torch.float64)
        g = 1.0 + 0.3 * torch.randn(d, generator=gen, dtype=torch.float64)
        blocks = []
        for c in range(cols):
            X = torch.zeros(d, d, dtype=torch.float64)
            if c < len(pairs):
                i, j = pairs[c]
                X[i, j], X[j, i] = g[i] / g[j], -g[j] / g[i]  # Gamma Omega Gamma^-1 for Omega = e_ij - e_ji
            elif (c - len(pairs)) // d == w:
                X[(c - len(pairs)) % d, (c - len(pairs)) % d] = -1.0
            S = U @ X @ U.T
            blocks.append((S + S.T)[torch.triu_indices(r, r).unbind()])
        rows.append(torch.stack(blocks, 1))
    M = torch.cat(rows)
    s = torch.linalg.svdvals(M)
    return cols - int((s > 1e-9 * s[0]).sum())


@pytest.mark.parametrize("sizes,layers", _WRITER_GAPS[:2] + [pytest.param(*c, marks=pytest.mark.slow)
                                                             for c in _WRITER_GAPS[2:]])
def test_olmo2_small_sizes_exceed_G_by_the_named_writer_gap(tmp_path: Path, sizes: dict[str, int],
                                                             layers: int) -> None:
    """Below its published sizes (H d_v < d_model, or d_ff(d_ff+1)/2 < d_model) OLMo 2's stabiliser exceeds G by
    complete.writer_gap's formula: the measured excess equals it, and a brute-force count of the first-order
    conditions (a second route) equals it too; --complete names the condition."""
    from symtrans.group.complete import measure, writer_gap

    a = from_config(_olmo2_tiny_config(tmp_path))
    r = measure(a, layers=layers, scope="model", sizes=sizes)
    inst = dataclasses.replace(a, L=layers, d_model=6, H=2, H_kv=1, d_v=sizes["d_v"], d_ff=sizes.get("d_ff", 3))
    gap = writer_gap(inst)
    brute = _writer_gap_brute(2, sizes["d_v"], sizes.get("d_ff", 3), 6, layers)
    print(f"olmo2 {sizes} L={layers}: measured {r['measured_dimension']}, G {r['group_dimension']}, "
          f"formula {gap['dimension']}, brute force {brute}")
    assert r["record"]["clear"] and r["measured_dimension"] - r["group_dimension"] == gap["dimension"] == brute > 0
    assert r["condition"]["explains"] and not r["agrees"]
    moved = {m["tensor"].split(".")[-1] for u in r["unexplained"] for m in u["moves"]}
    assert moved and moved <= {"word", "lm_head", "W_Q", "W_K", "W_V", "W_in", "W_gate", "W_O", "W_out",
                                         "ln1_post_w", "ln2_post_w", "final_ln_w"}, moved


def test_olmo2_writer_gap_is_named_not_silent(tmp_path: Path) -> None:
    """The false case: with the condition's dimension off by one, it no longer explains the measurement; the
    reduction of a published config keeps the writers spanning (no gap); the CLI names the condition."""
    from symtrans.cli.group import completeness_lines
    from symtrans.group import complete as cm

    a = from_config(_olmo2_tiny_config(tmp_path))
    r = cm.measure(a, layers=1, scope="model", sizes={"d_k": 4, "d_v": 2})
    line = "\n".join(completeness_lines({"scope": "model", "arch": a.name, "runs": [r]}))
    assert "beyond G by exactly the named condition (11 directions derived): post-norm writers" in line
    real = cm.writer_gap
    try:
        cm.writer_gap = lambda *x, **k: (lambda g: g and {**g, "dimension": g["dimension"] - 1})(real(*x, **k))
        off = cm.measure(a, layers=1, scope="model", sizes={"d_k": 4, "d_v": 2})
    finally:
        cm.writer_gap = real
    assert not off["condition"]["explains"]
    published = from_config(write_config(tmp_path, OLMO2_7B))
    assert all(real(i) is None for i in cm.plan(published, "model", (1, 2))["instances"])
    assert real(dataclasses.replace(published, tied_lm_head=True, d_v=1))["dimension"] is None  # not derived


def test_gpt_neox_is_read_and_its_unmodelled_field_refused_in_one_line(tmp_path: Path) -> None:
    """GPT-NeoX/Pythia is modelled now (tests/test_gpt_neox.py); attention without biases beside a biased MLP is not."""
    cfg = transformers.GPTNeoXConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                     intermediate_size=128)
    cfg.save_pretrained(tmp_path / "neox")
    a = from_config(tmp_path / "neox")
    assert a.family == "gpt_neox" and a.parallel_residual and a.rotary_width == 4
    cfg.attention_bias = False
    cfg.save_pretrained(tmp_path / "nobias")
    with pytest.raises(SymtransError, match="attention_bias=false") as err:
        from_config(tmp_path / "nobias")
    assert "\n" not in str(err.value)


def test_olmo2_variants_follow_the_layer_without_pre_norms(olmo2_tiny: tuple[Path, Any]) -> None:
    """The variants (depth sweeps, cor-mlp-role) run OLMo 2's layer: no pre-norm to apply, post-norms kept."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.variants import run_stack

    path, _ = olmo2_tiny
    w = load_model(path, dtype="float64")
    tr = encode(w, n=8, seed=0)
    states = run_stack(w, tr.embeddings, "full")
    assert max(float((s - t.out).abs().max()) for s, t in zip(states[1:], tr.layers)) == 0
    assert run_stack(w, tr.embeddings, "pure-attention", depth=2, ln=True)[-1].shape == tr.embeddings.shape


# =========================================================================== SmolLM3
#: SmolLM3-3B's published config.json (HuggingFaceTB/SmolLM3-3B), the fields transformers reads: NoPE on every
#: 4th layer (no_rope_layers 0), Llama's structure otherwise, tied embeddings
SMOLLM3_3B: dict[str, Any] = {
    "model_type": "smollm3", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 11008,
    "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 65536,
    "rope_theta": 5000000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": True,
    "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0, "use_sliding_window": False,
    "sliding_window": None, "max_window_layers": 28, "no_rope_layer_interval": 4,
    "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(36)], "pad_token_id": 128004, "bos_token_id": 128000,
    "eos_token_id": 128012,
}


def test_smollm3_params_model_equals_transformers_count(tmp_path: Path) -> None:
    assert int(formula("params-model", arch=str(write_config(tmp_path, SMOLLM3_3B))).value) == _hf_count(SMOLLM3_3B)


def test_smollm3_config_is_read_with_its_nope_layers(tmp_path: Path) -> None:
    a = from_config(write_config(tmp_path, SMOLLM3_3B))
    assert (a.family, a.positional, a.tied_lm_head, a.H_kv) == ("smollm3", "rotary", True, 4)
    assert [i for i in range(36) if not a.rotary_at(i)] == [i for i, r in enumerate(SMOLLM3_3B["no_rope_layers"])
                                                            if r == 0]
    # without the list, transformers derives it from the interval; symtrans derives the same
    derived = {k: v for k, v in SMOLLM3_3B.items() if k != "no_rope_layers"}
    assert from_config(write_config(tmp_path, {**derived, "no_rope_layer_interval": 3}, "i")).rope_layers == tuple(
        bool(r) for r in transformers.SmolLM3Config(**{**derived, "no_rope_layer_interval": 3}).no_rope_layers)


@pytest.mark.parametrize("field,value,named", [
    ("no_rope_layers", [1, 0], "no_rope_layers"), ("layer_types", ["sliding_attention"] * 36, "layer_types"),
    ("use_sliding_window", True, "use_sliding_window")])
def test_smollm3_unmodelled_or_bad_fields_are_refused_by_name(tmp_path: Path, field: str, value: Any,
                                                              named: str) -> None:
    cfg = {**SMOLLM3_3B, field: value, **({"sliding_window": 4096} if field == "use_sliding_window" else {})}
    with pytest.raises(SymtransError, match=named):
        from_config(write_config(tmp_path, cfg))


def test_smollm3_group_derivation(tmp_path: Path) -> None:
    """A NoPE layer's qk-gauge is the whole GL(d_k) per key/value head; a rotary layer's the commutant (d_k): G is
    plain Llama's G plus (d_k^2 - d_k) H_kv per NoPE layer, the NoPE layers counted from the raw config."""
    from symtrans.group.spec import GroupSpec

    a = from_config(write_config(tmp_path, SMOLLM3_3B))
    spec = GroupSpec.from_arch(a)
    llama = GroupSpec.from_arch(dataclasses.replace(a, rope_layers=()))
    nope = SMOLLM3_3B["no_rope_layers"].count(0)
    d_k, kv = 2048 // 16, 4
    for scope in ("layers", "model"):
        assert spec.scope_dimension(scope) - llama.scope_dimension(scope) == nope * kv * (d_k ** 2 - d_k)
    qk = spec.factor("qk-gauge")
    assert [int(qk.layer_dimension(i).subs(spec.arch.substitutions())) for i in (0, 3)] == [kv * d_k, kv * d_k ** 2]
    assert "NoPE layers (3, 7," in qk.group
    assert int(formula("gauge-dimension-model", arch=str(write_config(tmp_path, SMOLLM3_3B, "g"))).value) == \
        36 * kv * (d_k + d_k ** 2) + nope * kv * (d_k ** 2 - d_k)


@pytest.fixture(scope="module")
def smollm3_tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp_path_factory.mktemp("smollm3"), "smollm3", n_layers=2, head=True)


def test_smollm3_forward_parity_with_transformers_in_float64(smollm3_tiny: tuple[Path, Any]) -> None:
    path, model = smollm3_tiny
    assert list(model.config.no_rope_layers) == [0, 1]  # a NoPE layer, then a rotary one
    worst_h, worst_a = _float64_errors("smollm3", model, path)
    print(f"smollm3 float64 parity: hidden states {worst_h:.2e}, attention {worst_a:.2e}")
    assert worst_h < 1e-12 and worst_a < 1e-12


def test_smollm3_rotary_on_every_layer_breaks_parity(smollm3_tiny: tuple[Path, Any]) -> None:
    """Negative control: the NoPE layer rotated as Llama's would be no longer matches transformers."""
    path, model = smollm3_tiny
    assert min(_float64_errors("smollm3", model, path, change={"rope_layers": ()})) > 1e-6


def _smollm3_tiny_config(tmp_path: Path, pattern: list[int]) -> Path:
    cfg = transformers.SmolLM3Config(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=4,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                     no_rope_layers=pattern, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    d = tmp_path / "".join(map(str, pattern))
    cfg.save_pretrained(d)
    return d


@pytest.mark.parametrize("pattern,layers", [([0, 1, 1, 1], 1), ([1, 1, 1, 0], 2),
                                            pytest.param([0, 1, 1, 1], 2, marks=pytest.mark.slow)])
def test_smollm3_group_complete_agrees_through_both_routes(tmp_path: Path, pattern: list[int], layers: int) -> None:
    """`group --complete` at L = 1 and 2 with a NoPE layer among the measured ones: symtrans's forward and
    transformers' forward both measure G's dimension, which exceeds the all-rotary G by the derived
    H_kv (d_k^2 - d_k) per NoPE layer."""
    from symtrans.group.complete import measure, small_arch
    from symtrans.group.independent import measure_transformers
    from symtrans.group.spec import GroupSpec

    a = from_config(_smollm3_tiny_config(tmp_path, pattern))
    inst = small_arch(a, layers, d_k=4, d_v=4)
    assert False in inst.rope_layers
    hf = measure_transformers(a, inst)
    own = measure(a, instance=inst, scope="model")
    print(f"smollm3 {pattern} L={layers}: transformers {hf['measured_dimension']}, symtrans "
          f"{own['measured_dimension']}, G {hf['group_dimension']}")
    assert hf["agrees"] and own["agrees"], (hf, own["unexplained"])
    assert hf["measured_dimension"] == own["measured_dimension"] == hf["group_dimension"]
    rotary = int(GroupSpec.from_arch(dataclasses.replace(inst, rope_layers=())).scope_dimension("model"))
    nope = inst.rope_layers.count(False)
    assert hf["measured_dimension"] - rotary == nope * int(inst.H_kv) * (int(inst.d_k) ** 2 - int(inst.d_k)) > 0


# =========================================================================== completeness certificates
@pytest.mark.parametrize("family,layers,named", [
    ("PHI3_MINI", 1, None), ("SMOLLM3_3B", 1, None),
    ("QWEN3_06B", 1, ["QK-norm (RMSNorm on each head's queries and keys)"]),
    ("OLMO2_7B", 1, ["QK-norm (RMSNorm on all heads' queries and keys at once)", "post-norms",
                     "a layer without pre-norms"]),
    ("GEMMA2_2B", 1, ["post-norms", "(1 + w) norm gains", "query_pre_attn_scalar", "soft-capped attention scores"]),
    ("SMOLLM3_3B", 2, ["NoPE layers"])])
def test_completeness_certificates_of_the_new_families(tmp_path: Path, family: str, layers: int,
                                                       named: list[str] | None) -> None:
    """Where the checker covers the family (Phi-3: Llama's structure, its window; SmolLM3 at L = 1: its first,
    rotary layer) a certificate is produced and verified, its dimension G's; elsewhere the refusal is one line
    naming every feature the checker's instance cannot express."""
    from symtrans.checker.check import verify_certificate
    from symtrans.certify.completeness import certificate_instance, completeness_certificate
    from symtrans.group.spec import GroupSpec

    path = write_config(tmp_path, globals()[family])
    if named is None:
        cert = completeness_certificate(path, layers=layers)
        ok, why = verify_certificate(cert)
        assert ok, why
        inst, notes = certificate_instance(path, layers)
        assert cert["asserts"]["group_dimension"] == int(GroupSpec.from_arch(inst).scope_dimension("layers"))
        if family == "SMOLLM3_3B":  # said, not silent: the certified layer is rotary, NoPE layers are not covered
            assert any("NoPE" in n for n in notes)
        return
    with pytest.raises(SymtransError) as err:
        completeness_certificate(path, layers=layers)
    msg = str(err.value)
    assert "not covered: the completeness checker's forward has no" in msg and "\n" not in msg
    assert all(n in msg for n in named), msg


def test_a_nope_certificate_without_the_guard_is_rejected_by_the_checker(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The false case of the refusal: with it disabled, SmolLM3 at L = 2 is written as an all-rotary instance with
    the NoPE layer's G (44 at these sizes); the checker, whose forward rotates every layer, rejects the dimension."""
    import symtrans.certify.completeness as cc
    from symtrans.checker.check import verify_certificate

    monkeypatch.setattr(cc, "uncovered_features", lambda a: [])
    cert = cc.completeness_certificate(write_config(tmp_path, SMOLLM3_3B), layers=2)
    ok, why = verify_certificate(cert)
    assert not ok and "group_dimension" in why, why


def test_olmo2_writer_gap_through_both_routes(tmp_path: Path) -> None:
    """transformers' own OLMo 2 forward (d_k = d_v: one head width there) exceeds G by the same derived writer
    gap, 11 at d_model = 6, H d_v = 4, d_ff = 3; the verdict over both routes names the condition."""
    from symtrans.cli.group import completeness_lines
    from symtrans.group.complete import measure, small_arch
    from symtrans.group.independent import measure_transformers

    a = from_config(_olmo2_tiny_config(tmp_path))
    inst = small_arch(a, 1, d_k=2, d_v=2)
    hf = measure_transformers(a, inst)
    own = measure(a, instance=inst, scope="model")
    assert hf["parameters"] == hf["symtrans_parameters"] and hf["condition"]["explains"], hf
    assert hf["measured_dimension"] - hf["group_dimension"] == hf["condition"]["dimension"] == 11
    assert own["condition"]["explains"] and own["measured_dimension"] == hf["measured_dimension"]
    lines = completeness_lines({"scope": "model", "arch": a.name, "runs": [own], "independent": [hf]})
    assert any("verdict: G plus the named condition equals both measurements: post-norm writers" in x
               for x in lines), lines
