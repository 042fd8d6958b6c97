"""G on held-out config.json files: every structural field read, compared with the measured stabiliser.

Each configuration here is written for this file (sizes, GQA ratios, windows and biases that no other test
uses). The expected number is never typed in: it is the nullity of the float64 Jacobian of the configuration's
own map (``measure(..., instance=...)``, the independent route), and ``symtrans group --arch CONFIG`` must
print it. Refusals: every combination G does not model exits 2 with one line.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from _subproc import cli_env
from symtrans.arch import from_config, get_arch
from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.group.complete import (FULL_MAX_PARAMETERS, _entries, measure, parameter_count, plan,
                                     random_instance, scope_forward, small_arch)
from symtrans.group.near import segments
from symtrans.group.spec import GroupSpec, act

rep = dataclasses.replace

HELD_OUT = {
    # GPT-2 with its own output head (tie_word_embeddings false): final-norm scaling and bias transfer,
    # residual rotations, centring of the word rows and the word/position translation appear
    "gpt2-untied": ({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 4, "n_inner": 5, "n_positions": 5,
                     "vocab_size": 11, "tie_word_embeddings": False, "layer_norm_epsilon": 1e-3}, "model"),
    # Llama-structured with a ReLU gate: each gate unit has a positive scaling
    "llama-relu": ({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 4,
                    "intermediate_size": 5, "max_position_embeddings": 8, "vocab_size": 10, "hidden_act": "relu"},
                   "layers"),
    # single-head post-LN encoder: d_k = d_v = d_model
    "bert-one-head": ({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 1, "hidden_size": 4,
                       "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10,
                       "layer_norm_eps": 1e-2}, "layers"),
    # Mistral with a window shorter than the sequence and 3 query heads per key/value head
    "mistral-window": ({"model_type": "mistral", "num_hidden_layers": 1, "num_attention_heads": 3,
                        "num_key_value_heads": 1, "hidden_size": 6, "intermediate_size": 2,
                        "max_position_embeddings": 64, "vocab_size": 10, "sliding_window": 2}, "layers"),
    # Llama with biases everywhere
    "llama-bias": ({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
                    "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "attention_bias": True,
                    "mlp_bias": True, "rms_norm_eps": 1e-3}, "layers"),
    # Qwen2 (Q, K, V biases only), two query heads per key/value head, explicit head_dim
    "qwen2-gqa": ({"model_type": "qwen2", "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "hidden_size": 5, "head_dim": 2, "intermediate_size": 2, "max_position_embeddings": 8,
                   "vocab_size": 10}, "layers"),
}


def _write(tmp_path: Path, name: str, cfg: dict) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d / "config.json")


def _printed(path: str, scope: str, capsys) -> int:
    assert main(["group", "--arch", path, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["scopes"][scope]["value"]


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_group_prints_the_measured_stabiliser(name, tmp_path, capsys):
    cfg, scope = HELD_OUT[name]
    path = _write(tmp_path, name, cfg)
    p = plan(path, scope)
    assert p["mode"] == "itself" and p["parameters"] <= FULL_MAX_PARAMETERS
    (inst,) = p["instances"]
    r = measure(path, instance=inst, scope=scope)
    assert r["record"]["clear"] and r["unexplained"] == [], r["record"]
    assert r["near_null"] == 0  # eps large enough here: no near-symmetry below the cut
    assert _printed(path, scope, capsys) == r["measured_dimension"] == r["tangent_rank"]
    assert r["agrees"]


def test_untied_gpt2_is_read_and_differs_from_the_tied_count(tmp_path, capsys):
    cfg, _ = HELD_OUT["gpt2-untied"]
    untied = _write(tmp_path, "u", cfg)
    tied = _write(tmp_path, "t", {**cfg, "tie_word_embeddings": True})
    default = _write(tmp_path, "d", {k: v for k, v in cfg.items() if k != "tie_word_embeddings"})
    assert not from_config(untied).tied_lm_head and from_config(tied).tied_lm_head
    assert from_config(default).tied_lm_head  # GPT2Config's default
    a = from_config(untied)
    measured = measure(untied, instance=rep(a, n=int(a.max_positions)), scope="model")["measured_dimension"]
    # the false case: the tied count (what was printed before the flag was read) is not the measured one
    assert _printed(tied, "model", capsys) != measured == _printed(untied, "model", capsys)


def test_relu_gate_scaling_is_positive_only():
    """The gate scaling: d_ff more per layer than a SiLU gate; a negative scale is not a symmetry (false case)."""
    cfg, _ = HELD_OUT["llama-relu"]
    a = small_arch(rep(get_arch("llama2-7b"), activation="relu"))
    silu = GroupSpec.from_arch(small_arch("llama2-7b"))
    spec = GroupSpec.from_arch(a)
    assert spec.scope_dimension("layers") - silu.scope_dimension("layers") == a.d_ff
    assert silu.factor("gate-scaling").status == "broken"
    p = random_instance(a, "layers", seed=3)
    x = {"X": torch.randn(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))}
    base = scope_forward(p, x, a, "layers")
    for scales, same in (([0.5, 2.0, 3.0], True), ([-0.5, 2.0, 3.0], False)):
        el = [{"D": torch.diag(torch.tensor(scales, dtype=torch.float64))}]
        moved = scope_forward(act(spec, p, "gate-scaling", el), x, a, "layers")
        assert torch.allclose(moved, base, atol=1e-12) is same


def test_gate_scaling_certified_exactly():
    from symtrans.group.certify import certify_factor

    a = rep(get_arch("llama2-7b"), activation="relu")
    assert certify_factor(a, "gate-scaling").outcome == "certified"


@pytest.mark.parametrize("layers", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_single_head_post_ln_counts_the_overlap_once(layers):
    """d_v = d_model: one hyperplane direction per boundary is already a vo-gauge + centring + value-bias move."""
    a = small_arch("bert-base", layers=layers, d_model=4, H=1, d_k=4, d_v=4, d_ff=2, n=6)
    r = measure(a, instance=a)
    assert r["agrees"] and r["measured_dimension"] == r["group_dimension"]
    wide = GroupSpec.from_arch(a).factor("attention-input-hyperplane")
    assert wide.status == "shrunk"
    narrow = GroupSpec.from_arch(rep(a, d_v=3)).factor("attention-input-hyperplane")
    assert narrow.status == "exact"


def test_intermediate_eps_is_raised_and_said_so():
    """Near-symmetries at eps = 1e-5 would blur the cut (their violations ~1e-8): measured at 1e-2, stated."""
    p = plan("roberta-base")
    assert p["eps"]["own"] == 1e-5 and p["eps"]["measured"] == 1e-2 and "blur" in p["eps"]["why"]
    assert all(a.ln_eps == 1e-2 for a in p["instances"]) and "eps 1e-05" not in p["kept"]
    assert plan("bert-base")["eps"]["measured"] == 1e-12  # at rounding level: counted and explained
    assert plan("gpt2")["eps"]["measured"] == 1e-5  # pre-LN layers scope: no near-symmetry to blur it


def test_reduced_instance_keeps_the_structure():
    p = plan("mistral-7b")
    first = p["instances"][0]
    assert p["mode"] == "reduced" and first.H // first.H_kv == 4 and first.ln_eps == get_arch("mistral-7b").ln_eps
    assert p["reduced"]["d_model"] == (4096, 6) and "grouped-query attention (ratio 4)" in p["kept"]
    one = plan(get_arch("bert-base").with_sizes(H=1, d_k=768, d_v=768))
    inst = one["instances"][0]
    assert inst.H == 1 and inst.d_v == inst.d_model and {"one head", "d_v = d_model"} <= set(one["kept"])
    window = plan(rep(get_arch("mistral-7b"), sliding_window=4096))["instances"][0]
    assert window.sliding_window is not None and window.sliding_window < window.n


@pytest.mark.parametrize("arch,scope", [("roberta-base", "model"), ("bert-base", "model"), ("gpt2", "layers"),
                                        ("qwen2-7b", "model")])
def test_parameter_count_against_built_weights(arch, scope):
    a = small_arch(arch)
    built = sum(t.numel() for _, t in _entries(random_instance(a, scope), scope))
    assert parameter_count(a, scope) == built


def test_near_symmetries_explain_2L_minus_1(tmp_path):
    """Post-LN at eps = 1e-12: the null space is G plus one segment scaling per stretch between two norms."""
    for layers in (1, 2):
        r = measure("bert-base", layers=layers, eps=1e-12)
        assert r["measured_dimension"] - r["group_dimension"] == 2 * layers - 1 == r["near_null"], r
        assert r["agrees"] and r["unexplained"] == []
        for n in r["near_symmetries"]:
            assert n["below_cut"] and n["agrees_with_identity"]
    # linear in eps: the violation at eps = 1e-2 is ~100 x the one at 1e-4 (same weights, same inputs)
    hi = measure("bert-base", layers=1, eps=1e-2)["near_symmetries"][0]
    lo = measure("bert-base", layers=1, eps=1e-4)["near_symmetries"][0]
    assert 50 < hi["measured_violation"] / lo["measured_violation"] < 200
    assert not hi["below_cut"]
    # pre-LN layers scope: the input is fixed, no segment; the measured null space is G itself at tiny eps
    assert segments(small_arch("gpt2"), "layers") == []
    r = measure("gpt2", layers=1, eps=1e-12)
    assert r["near_null"] == 0 and r["measured_dimension"] == r["group_dimension"] and r["agrees"]


@pytest.mark.parametrize("arch,extra,sizes", [("bert-base", 3, {}), ("llama2-7b", 1, {}), ("gpt2", 1, {"n": 7})])
def test_near_symmetries_on_the_model_scope(arch, extra, sizes):
    """Model scope at eps = 1e-12: post-LN with an embedding norm 2L + 1 (the tables, then the stretch after the
    norm); pre-norm one (the whole residual stream, opened by the embeddings; GPT-2's tied head: the final norm
    takes 1/c)."""
    r = measure(arch, layers=1, scope="model", eps=1e-12, sizes=sizes)
    assert r["measured_dimension"] - r["group_dimension"] == extra == r["near_null"] and r["agrees"], r
    assert [n["agrees_with_identity"] for n in r["near_symmetries"]] == [True] * extra


def test_complete_cli_names_scope_instance_gap_and_near_symmetries(tmp_path):
    cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 4,
           "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "layer_norm_eps": 1e-12}
    path = _write(tmp_path, "b", cfg)
    proc = subprocess.run([sys.executable, "-m", "symtrans", "group", "--arch", path, "--complete"],
                          capture_output=True, text=True, env=cli_env(), timeout=600)  # one BLAS thread
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "scope layers" in out and "instance: the configuration itself" in out
    assert "decades)  agrees" in out and "+ 3 near-symmetries" in out
    assert "ffn-segment-scaling[0]" in out and "c^2 eps" in out
    # progress on a non-terminal stderr: the first line, then one per step
    assert "symtrans group: starting" in proc.stderr and "symtrans group --complete: 2/2" in proc.stderr  # each route


REFUSED = [
    ({"model_type": "qwen2", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "use_sliding_window": True,
      "sliding_window": 4}, "sliding_window"),
    ({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "sliding_window": 4}, "sliding_window"),
    ({"model_type": "mistral", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "sliding_window": 1}, "window of 1"),
    ({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4, "head_dim": 6,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10}, "d_v = 6 > d_model"),
    ({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "partial_rotary_factor": 0.5},
     "partial_rotary_factor"),
    ({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "attention_bias": True},
     "mlp_bias"),
    ({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 4, "n_positions": 5, "vocab_size": 11,
      "tie_word_embeddings": "no"}, "tie_word_embeddings"),
    ({"model_type": "bert", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
      "intermediate_size": 2, "max_position_embeddings": 8, "vocab_size": 10, "is_decoder": True}, "is_decoder"),
]


@pytest.mark.parametrize("cfg,needle", REFUSED)
def test_unmodelled_configs_exit_2_with_one_line(cfg, needle, tmp_path, capsys):
    path = _write(tmp_path, "r", cfg)
    for extra in ([], ["--complete"]):
        assert main(["group", "--arch", path, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def test_unmodelled_architectures_are_refused():
    bert = get_arch("bert-base")
    with pytest.raises(SymtransError, match="d_v = 5 > d_model"):
        GroupSpec.from_arch(small_arch(bert, d_v=5, d_model=4, H=1, d_k=2))
    with pytest.raises(SymtransError, match="grouped-query attention with d_v = d_model under LayerNorm"):
        GroupSpec.from_arch(small_arch(rep(bert, H_kv=6), d_model=4, H=2, H_kv=1, d_k=2, d_v=4))
    with pytest.raises(SymtransError, match="sliding_window must be a positive integer"):
        rep(get_arch("mistral-7b"), sliding_window=0)
