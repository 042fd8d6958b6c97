"""arch.from_config for model types it has no table for: through transformers.AutoConfig and the layer's modules."""

from __future__ import annotations

import pytest

from symtrans.arch import from_config
from symtrans.errors import SymtransError

T = pytest.importorskip("transformers")
SMALL = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def test_llama_structured_unknown_type_is_mapped_from_its_config_and_modules(tmp_path):
    model = T.AutoModel.from_config(T.AutoConfig.for_model("gemma", num_key_value_heads=2, head_dim=16, **SMALL))
    model.save_pretrained(tmp_path)
    a = from_config(tmp_path)
    attn = model.layers[0].self_attn
    assert (a.family, a.L, a.H, a.H_kv, a.d_model, a.d_ff) == ("gemma", 2, 4, 2, 64, 128)
    assert a.d_k == attn.q_proj.out_features // a.H and a.H_kv * a.d_k == attn.k_proj.out_features
    assert (a.norm, a.norm_placement, a.ffn, a.positional, a.attention, a.bias) == \
        ("rmsnorm", "pre", "gated", "rotary", "causal", False)
    assert "not verified" in a.notes[0]
    from symtrans.numeric import load_model

    with pytest.raises(SymtransError, match="not supported by the numeric backend"):
        load_model(tmp_path)  # its forward is not parity-tested: refused, not guessed


@pytest.mark.parametrize("model_type,named", [
    ("mixtral", "a mixture of experts \\(field 'num_local_experts' = 8\\)"),  # before its sliding window
    ("bloom", "ALiBi biases on the attention scores"),
    ("t5", "field 'is_encoder_decoder' = True"),
    ("olmo", "'rms_norm_eps' absent"),
])
def test_what_is_not_modelled_is_refused_by_name(tmp_path, model_type, named):
    T.AutoConfig.for_model(model_type, **SMALL).save_pretrained(tmp_path)
    with pytest.raises(SymtransError, match=f"unsupported model_type '{model_type}'.*{named}"):
        from_config(tmp_path)


@pytest.mark.parametrize("model_type", ["qwen3", "gemma2"])
def test_families_once_refused_are_read(tmp_path, model_type):
    """Qwen3's QK-norm and Gemma 2's soft-capping are modelled now (tests/test_families.py checks them)."""
    T.AutoConfig.for_model(model_type, **{**SMALL, "head_dim": 16, "num_key_value_heads": 2}).save_pretrained(tmp_path)
    assert from_config(tmp_path).family == model_type


def test_gpt_neox_once_refused_is_read(tmp_path):
    """GPT-NeoX's parallel residual and partial rotary are modelled now (tests/test_gpt_neox.py checks them)."""
    T.AutoConfig.for_model("gpt_neox", **SMALL).save_pretrained(tmp_path)
    a = from_config(tmp_path)
    assert (a.family, a.parallel_residual, a.partial_rotary_factor, a.rotary_width) == ("gpt_neox", True, 0.25, 4)


def test_a_type_transformers_does_not_know_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "no-such-type", "hidden_size": 8}')
    with pytest.raises(SymtransError, match="unsupported model_type 'no-such-type'; supported: bert"):
        from_config(tmp_path)
