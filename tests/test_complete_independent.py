"""--complete's independent route: the stabiliser measured on transformers' own forward (issue 42)."""

from __future__ import annotations

import json

import pytest
import torch

import symtrans.arch as arch_mod
from symtrans.arch import get_arch
from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.group import independent as ind
from symtrans.group.complete import measure, plan, small_arch
from symtrans.group.spec import GroupSpec
from symtrans.precision import GAP_DECADES

transformers = pytest.importorskip("transformers")


def _smollm3(tmp_path):
    """SmolLM3-3B's config as transformers' SmolLM3Config defaults write it (NoPE on every 4th layer)."""
    cfg = transformers.AutoConfig.for_model("smollm3").to_dict()
    cfg = {k: v for k, v in cfg.items() if k not in ("transformers_version", "architectures", "id2label", "label2id")}
    cfg["_name_or_path"] = "HuggingFaceTB/SmolLM3-3B"
    assert cfg["no_rope_layers"][:4] == [1, 1, 1, 0]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "config.json"


def test_llama_agrees_through_transformers():
    r = ind.measure_transformers("llama2-7b", small_arch("llama2-7b", 1))
    assert r["parameters"] == r["symtrans_parameters"]
    assert r["record"]["clear"] and r["record"]["gap_decades"] >= GAP_DECADES
    assert r["measured_dimension"] == r["group_dimension"] and r["agrees"]
    assert r["casts_kept_float64"] > 0  # the RMSNorm and softmax casts were met and kept at float64


def test_float32_casts_would_blur_the_cut(monkeypatch):
    """The false case of KeepFloat64: with transformers' float32 casts left on, the null space sits at float32
    rounding and the rank cut is no longer clear (or the count is off)."""
    class Off:
        casts = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(ind, "KeepFloat64", Off)
    r = ind.measure_transformers("llama2-7b", small_arch("llama2-7b", 1))
    assert not r["agrees"]
    assert not r["record"]["clear"] or r["measured_dimension"] != r["group_dimension"]


def test_roberta_pad_row_counted_by_G_and_measured_both_ways():
    inst = small_arch("roberta-base", 1)
    spec = GroupSpec.from_arch(inst)
    f = spec.factor("unread-pad-row")
    assert f.status != "broken" and int(spec._value(f.dimension)) == int(inst.d_model) - 1  # 1 is a centring shift
    assert GroupSpec.from_arch("bert-base").factor("unread-pad-row").status == "broken"
    r = ind.measure_transformers("roberta-base", inst)
    assert r["unread_pad_id"] == 1 and r["agrees"], r
    # without the factor G would be d_model - 1 short of transformers' measurement (the bug of issue 42)
    assert r["measured_dimension"] - (r["group_dimension"] - (int(inst.d_model) - 1)) == int(inst.d_model) - 1


@pytest.mark.slow
def test_roberta_pad_row_on_symtrans_forward():
    inst = small_arch("roberta-base", 1)
    own = measure("roberta-base", instance=inst, scope="model")
    assert own["agrees"] and own["measured_dimension"] == own["group_dimension"], own["unexplained"]
    less = measure("roberta-base", instance=inst, scope="model", exclude=("unread-pad-row",))
    assert not less["agrees"] and less["unexplained"]
    assert less["unexplained"][0]["moves"][0]["tensor"] == "word"


def test_pad_is_special_only_where_positions_count_from_it():
    bert = ind._model(ind.hf_config("bert-base", small_arch("bert-base", 1)), False, 0)
    rob = ind._model(ind.hf_config("roberta-base", small_arch("roberta-base", 1)), False, 0)
    assert ind._pad_is_special(bert) is None and ind._pad_is_special(rob) == 1
    # nn.Embedding's padding_idx would zero the pad row's gradient although the row is read: turned off
    assert all(m.padding_idx is None for m in bert.modules() if isinstance(m, torch.nn.Embedding))


def test_layer_pick_keeps_each_kind():
    assert ind._layer_pick({"no_rope_layers": [1, 1, 1, 0] * 9}, 36, 2) == [0, 3]
    assert ind._layer_pick({"layer_types": ["s", "s", "f"]}, 3, 3) == [0, 2, 0]


def test_smollm3_reads_its_nope_layers(tmp_path):
    a = get_arch(_smollm3(tmp_path))
    raw = json.loads(_smollm3(tmp_path).read_text())["no_rope_layers"]
    assert a.family == "smollm3" and [int(r) for r in a.rope_layers] == raw
    # another model type with the field is still refused by name (only smollm3 is read natively)
    with pytest.raises(SymtransError, match="no_rope_layers.*NoPE"):
        arch_mod._from_autoconfig({"model_type": "llama", "no_rope_layers": [1, 0], "num_hidden_layers": 2},
                                  "llama", "c.json", "c")


def test_smollm3_agrees_through_both_routes(tmp_path):
    """Read with its NoPE layers, G counts the whole GL(d_k) there: both routes measure exactly G (L = 2 picks a
    rotary layer and a NoPE layer, as the config's layers 0 and 3)."""
    a = get_arch(_smollm3(tmp_path))
    [inst] = plan(a, "model", (2,))["instances"]
    assert inst.rope_layers == (True, False)
    r = ind.measure_transformers(a, inst)
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"], r
    own = measure(a, instance=inst, scope="model")
    assert own["agrees"] and own["measured_dimension"] == r["measured_dimension"], own["unexplained"]


def test_planted_misreading_of_no_rope_layers_disagrees(tmp_path, monkeypatch, capsys):
    """Disable one modelled config field: with no_rope_layers ignored SmolLM3 reads as plain Llama; symtrans's own
    forward then agrees with its (wrong) G, and only transformers' forward shows the NoPE layer's larger gauge."""
    path = _smollm3(tmp_path)
    monkeypatch.setattr(arch_mod, "_MODELLED_LAYER_LISTS", {})
    a = get_arch(path)
    assert a.rope_layers == ()  # the misreading: every layer rotary
    [inst] = plan(a, "layers", (2,))["instances"]
    r = ind.measure_transformers(a, inst)
    assert r["record"]["clear"] and r["parameters"] == r["symtrans_parameters"]
    # the NoPE layer's Q/K gauge is GL(d_k) (d_k^2 per kv head), not the rotary commutant (d_k per kv head)
    extra = int(inst.H_kv) * (int(inst.d_k) ** 2 - int(inst.d_k))
    assert r["measured_dimension"] - r["group_dimension"] == extra > 0 and not r["agrees"]


@pytest.mark.slow
def test_planted_misreading_cli_names_the_route(tmp_path, monkeypatch, capsys):
    path = _smollm3(tmp_path)
    monkeypatch.setattr(arch_mod, "_MODELLED_LAYER_LISTS", {})
    assert main(["group", "--arch", str(path), "--complete", "--layers", "2"]) == 1
    out = capsys.readouterr().out
    assert "verdict: DISAGREES: transformers' forward" in out and "(symtrans's forward agrees)" in out


def test_cli_reports_both_routes(capsys):
    assert main(["group", "--arch", "mistral-7b", "--complete", "--layers", "1"]) == 0
    out = capsys.readouterr().out
    assert "independent route: transformers' own forward" in out
    assert "verdict: agrees: G's dimension equals both measurements" in out


def _write(tmp_path, model_type, name, **fields):
    cfg = transformers.AutoConfig.for_model(model_type, **fields).to_dict()
    cfg = {k: v for k, v in cfg.items() if k not in ("transformers_version", "architectures", "id2label", "label2id")}
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d / "config.json"


@pytest.mark.parametrize("model_type,feature", [
    ("gpt_oss", "mixture of experts (field 'num_local_experts'"),
    ("mixtral", "mixture of experts (field 'num_local_experts'"),
    ("mpnet", "relative position buckets"),
    ("modernbert", "local and global attention"),
    ("deberta-v2", "disentangled attention"),
    ("opt", "positions offset by 2"),
    ("phi", "parallel attention and MLP"),
    ("bloom", "ALiBi"),
    ("starcoder2", "non-gated MLP"),
    ("cohere", "logit_scale"),
])
def test_refusals_name_the_unsupported_feature(tmp_path, model_type, feature):
    with pytest.raises(SymtransError) as err:
        get_arch(_write(tmp_path, model_type, model_type))
    msg = str(err.value)
    assert feature in msg and "rms_norm_eps" not in msg and "sliding_window" not in msg, msg
    assert "\n" not in msg


def test_electra_is_bert_when_embeddings_are_as_wide(tmp_path):
    from symtrans.formulas import formula

    # electra-base-discriminator's sizes (embedding_size = hidden_size = 768)
    path = _write(tmp_path, "electra", "base", embedding_size=768, hidden_size=768, num_hidden_layers=12,
                  num_attention_heads=12, intermediate_size=3072)
    a = get_arch(path)
    assert a.family == "bert" and not a.pooler
    conf = transformers.AutoConfig.for_model("electra", embedding_size=768, hidden_size=768, num_hidden_layers=12,
                                            num_attention_heads=12, intermediate_size=3072)
    with torch.device("meta"):
        count = sum(p.numel() for p in transformers.AutoModel.from_config(conf).parameters())
    assert int(formula("params-model", arch=str(path)).value) == count
    with pytest.raises(SymtransError, match="embedding_size 128 != hidden_size 256"):  # electra-small's projection
        get_arch(_write(tmp_path, "electra", "small", hidden_size=256, num_attention_heads=4, intermediate_size=1024))
    r = ind.measure_transformers(a, small_arch(a, 1))
    assert r["model_type"] == "electra" and r["agrees"], r


@pytest.mark.slow
@pytest.mark.parametrize("which", ["gemma3-270m", "xlm-roberta"])
def test_published_configs_agree_through_both_routes(tmp_path, which):
    if which == "gemma3-270m":
        from tests.test_gemma3 import GEMMA3_270M

        path = tmp_path / "config.json"
        path.write_text(json.dumps(GEMMA3_270M))
    else:  # xlm-roberta-base: RoBERTa's structure, pad id 1, 250002 tokens
        path = _write(tmp_path, "xlm-roberta", "x", vocab_size=250002, max_position_embeddings=514,
                      type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)
    a = get_arch(path)
    for inst in plan(a, "model", (1, 2))["instances"]:
        r = ind.measure_transformers(a, inst)
        assert r["agrees"] and r["parameters"] == r["symtrans_parameters"], r
        own = measure(a, instance=inst, scope="model")
        assert own["agrees"] and own["measured_dimension"] == own["group_dimension"], own["unexplained"]


def test_planted_misreading_of_tie_word_embeddings_disagrees(tmp_path, monkeypatch):
    """A second planted misreading: symtrans ignores tie_word_embeddings (reads every Llama head as untied)."""
    path = _write(tmp_path, "llama", "tied", tie_word_embeddings=True, hidden_size=64, num_attention_heads=4,
                  num_hidden_layers=2, intermediate_size=128, vocab_size=1000)
    inst = plan(get_arch(path), "layers", (1,))["instances"][0]
    assert ind.measure_transformers(get_arch(path), inst)["agrees"]  # read as it is: both agree
    real = arch_mod._bool_key
    monkeypatch.setattr(arch_mod, "_bool_key", lambda cfg, key, *a, **k: False if key == "tie_word_embeddings"
                        else real(cfg, key, *a, **k))
    wrong = get_arch(path)
    assert not wrong.tied_lm_head
    r = ind.measure_transformers(wrong, plan(wrong, "layers", (1,))["instances"][0])
    assert not r["agrees"] and r["parameters"] != r["symtrans_parameters"]
