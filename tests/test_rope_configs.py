"""Llama 3.x configs (rotary scaling) and the default sequence length of formula queries.

Parameter counts are compared with transformers' own LlamaModel built from the same config on the
meta device (shapes only, no memory); the list of rope types is compared with transformers'
``modeling_rope_utils.ROPE_INIT_FUNCTIONS``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from symtrans.arch import PAPER_N, ROPE_TYPES, default_n, from_config, get_arch
from symtrans.errors import SymtransError
from symtrans.formulas import formula

LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
}
# Llama-3.2-1B: head_dim given, tied embeddings, rope factor 32
LLAMA32_1B = dict(LLAMA31_8B, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, head_dim=64,
                  tie_word_embeddings=True,
                  rope_scaling=dict(LLAMA31_8B["rope_scaling"], factor=32.0))


def _write(tmp_path: Path, cfg: dict[str, Any], name: str = "c") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return d / "config.json"


def _hf_count(cfg: dict[str, Any]) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.LlamaConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.LlamaModel(conf)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("cfg", [LLAMA31_8B, LLAMA32_1B], ids=["llama-3.1-8b", "llama-3.2-1b"])
def test_llama3_params_model_equals_transformers_count(tmp_path: Path, cfg: dict[str, Any]) -> None:
    path = _write(tmp_path, cfg)
    assert int(formula("params-model", arch=str(path)).value) == _hf_count(cfg)


def test_llama3_params_model_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from symtrans.cli import main

    path = _write(tmp_path, LLAMA31_8B)
    assert main(["formula", "params-model", "--arch", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == _hf_count(LLAMA31_8B)


def test_rope_scaling_is_recorded_not_refused(tmp_path: Path) -> None:
    a = from_config(_write(tmp_path, LLAMA31_8B))
    scaling = dict(a.rope_scaling)
    assert scaling["rope_type"] == "llama3" and scaling["factor"] == 8.0
    assert "rope_theta" not in scaling
    plain = from_config(_write(tmp_path, {k: v for k, v in LLAMA31_8B.items() if k != "rope_scaling"}, "plain"))
    assert plain.rope_scaling == ()
    # position-independent formulas agree with and without the scaling
    for name in ("params-model", "ffn-flop-share", "recovery-ambiguity"):
        assert formula(name, arch=a).value == formula(name, arch=plain).value


def test_rope_types_are_transformers_own() -> None:
    rope = pytest.importorskip("transformers.modeling_rope_utils")
    assert set(ROPE_TYPES) == set(rope.ROPE_INIT_FUNCTIONS) | {"default"}


@pytest.mark.parametrize("scaling, message", [
    ({"rope_type": "llama3", "factor": 8.0}, "needs field 'original_max_position_embeddings'"),
    ({"rope_type": "yarnn", "factor": 2.0}, "did you mean 'yarn'"),
    ({"rope_type": "linear"}, "needs field 'factor'"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
])
def test_malformed_rope_scaling_is_refused_naming_the_field(tmp_path: Path, scaling: dict, message: str) -> None:
    with pytest.raises(SymtransError, match=message):
        from_config(_write(tmp_path, dict(LLAMA31_8B, rope_scaling=scaling)))


def test_every_rope_type_transformers_validates_is_read(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    examples = {
        "linear": {"factor": 2.0}, "dynamic": {"factor": 2.0},
        "yarn": {"factor": 4.0, "original_max_position_embeddings": 32768},
        "longrope": {"short_factor": [1.0] * 64, "long_factor": [2.0] * 64,
                     "original_max_position_embeddings": 4096},
        "llama3": LLAMA31_8B["rope_scaling"],
    }
    for kind, fields in examples.items():
        scaling = dict(fields, rope_type=kind)
        transformers.LlamaConfig(**dict({k: v for k, v in LLAMA31_8B.items() if k != "model_type"},
                                        rope_scaling=scaling))  # transformers accepts it
        a = from_config(_write(tmp_path, dict(LLAMA31_8B, rope_scaling=scaling), kind))
        assert dict(a.rope_scaling)["rope_type"] == kind


def test_numeric_forward_refuses_a_scaling_it_does_not_implement(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from symtrans.numeric.forward import structure

    a = from_config(_write(tmp_path, LLAMA31_8B))
    with pytest.raises(SymtransError, match="rotary scaling 'llama3' is not implemented by the numeric forward"):
        structure(SimpleNamespace(arch=a, config=LLAMA31_8B))


def test_group_refuses_longrope_only(tmp_path: Path) -> None:
    from symtrans.group import GroupSpec

    small = dict(LLAMA31_8B, num_hidden_layers=1)
    assert GroupSpec.from_arch(from_config(_write(tmp_path, small, "l3"))).factors  # llama3 keeps distinct frequencies
    longrope = dict(small, rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 64,
                                         "long_factor": [2.0] * 64, "original_max_position_embeddings": 4096})
    with pytest.raises(SymtransError, match="longrope"):
        GroupSpec.from_arch(from_config(_write(tmp_path, longrope, "lr")))


def test_default_n_is_the_papers_not_the_context_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from symtrans.cli import main

    a = from_config(_write(tmp_path, LLAMA31_8B))
    assert a.n == PAPER_N == 512 and a.max_positions == 131072
    assert get_arch("bert-base").n == 512  # the paper's BertBase counts: 360,448 = 512 x 11 x 64
    assert formula("recovery-ambiguity", arch="bert-base").value == 512 * 11 * 64
    assert get_arch("gpt2").n == 512 and get_arch("mistral-7b").n == 512
    assert default_n(64) == 64  # a shorter context wins
    assert main(["formula", "ffn-flop-share", "--arch", "mistral-7b"]) == 0
    out = capsys.readouterr().out
    assert "n:             512, default n = 512" in out
    assert main(["formula", "ffn-flop-share", "--arch", "mistral-7b", "--n", "100"]) == 0
    assert "n:             100, set by user" in capsys.readouterr().out
    assert main(["formula", "params-model", "--arch", "mistral-7b"]) == 0
    assert "n:             not used" in capsys.readouterr().out
