"""GroupSpec: factors, sizes against independent counts, tag tables, refusals (no torch needed)."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys

import pytest
import sympy as sp

from symtrans.arch import get_arch
from symtrans.errors import SymtransError
from symtrans.formulas import formula
from symtrans.group.spec import LAYER_AXES, MODEL_AXES, GroupSpec, layer_tensor_names

rep = dataclasses.replace


def test_bert_base_gauge_dimension_from_independent_count():
    a = get_arch("bert-base")
    spec = GroupSpec.from_arch(a)
    # independent route: one GL(d_k) and one GL(d_v) per head per layer, counted entry by entry
    entries = sum(a.d_k * a.d_k + a.d_v * a.d_v for _layer in range(a.L) for _head in range(a.H))
    assert spec.gauge_dimension_model() == entries
    assert formula("gauge-dimension-model", arch="bert-base").value == entries
    # bias translations: every entry of b_K and of b_V is a free direction
    biases = a.L * a.H * (a.d_k + a.d_v)
    # post-LN norm factors, counted per tensor entry: centring shifts (one per row of W_O^h and W_out, b_O, b_out),
    # LN1's bias into the FFN (d_model), W_in's hyperplane (one per column), and at each of the L-1 boundaries
    # LN2's bias (d_model) and the hyperplane of every column of W_Q, W_K, W_V
    centring = a.L * (a.H * a.d_v + a.d_ff + 2)
    ffn = a.L * (a.d_model + a.d_ff)
    boundary = (a.L - 1) * (a.d_model + a.H * a.d_k + a.H * a.d_k + a.H * a.d_v)
    assert spec.total_dimension() == entries + biases + centring + ffn + boundary


def test_registry_reads_the_group_spec():
    for name in ("bert-base", "gpt2", "minilm-l6-h384"):
        spec = GroupSpec.from_arch(name, strict=False)
        assert formula("head-permutations", arch=name).value == spec.factor("S_H").order.subs(spec.arch.substitutions())
        assert formula("ffn-permutations", arch=name).expression == spec.factor("S_dff").order


def test_every_tag_names_a_real_axis_and_a_valid_side():
    for arch in ("bert-base", rep(get_arch("bert-base"), norm="rmsnorm", ffn="gated", activation="silu",
                                  positional="rotary", H_kv=6)):
        spec = GroupSpec.from_arch(arch)
        names = set(layer_tensor_names(spec.arch))
        for f in spec.factors:
            for t in f.tags:
                if t.scope == "layer":
                    assert t.tensor in names, (f.name, t.tensor)
                    assert 0 <= t.axis < len(LAYER_AXES[t.tensor])
                if t.side in ("left", "right"):
                    axes = MODEL_AXES[t.tensor] if t.scope == "model" else LAYER_AXES[t.tensor]
                    inner = axes[1 if t.index else 0:]
                    assert (t.side == "right") == (len(inner) == 1 or t.axis == len(axes) - 1), (f.name, t.tensor)


def test_tag_table_covers_every_axis():
    spec = GroupSpec.from_arch("bert-base")
    rows = spec.tag_table()
    covered = {(r["tensor"], r["axis"]) for r in rows}
    for t in layer_tensor_names(spec.arch):
        for ax in LAYER_AXES[t]:
            assert (t, ax) in covered
    # the residual stream axis of every weight is acted on by the residual permutation
    assert all(any(f.startswith("residual-permutation") for f in r["factors"]) for r in rows if r["axis"] == "model")


def test_gqa_head_permutations_by_brute_force():
    a = rep(get_arch("bert-base"), H=4, H_kv=2, d_model=8, d_k=2, d_v=2, head_dim_tied=False)
    spec = GroupSpec.from_arch(a)
    groups = [h // 2 for h in range(4)]
    # permutations of query heads that map each key/value group onto a group
    count = sum(1 for p in itertools.permutations(range(4))
                if all(groups[p[i]] == groups[p[j]] for i in range(4) for j in range(4) if groups[i] == groups[j]))
    assert spec.factor("S_H").order.subs(a.substitutions()) == count == 8
    assert spec.factor("qk-gauge").dimension.subs(a.substitutions()) == 2 * 2 * 2  # per kv head


def test_rotary_shrinks_qk_to_the_commutant_and_breaks_key_bias_shift():
    from symtrans.group.certify import rotary_commutant_dimension

    a = rep(get_arch("bert-base"), positional="rotary")
    spec = GroupSpec.from_arch(a)
    per_head = spec.factor("qk-gauge").dimension.subs(a.substitutions()) / a.H
    assert per_head == rotary_commutant_dimension(4) * a.d_k // 4 == a.d_k
    assert spec.factor("qk-gauge").status == "shrunk"
    assert spec.factor("key-bias-shift").status == "broken"


def test_activation_decides_ffn_scaling():
    assert GroupSpec.from_arch("bert-base").factor("ffn-scaling").status == "broken"
    relu = GroupSpec.from_arch(rep(get_arch("bert-base"), activation="relu"))
    assert relu.factor("ffn-scaling").status == "exact"
    assert relu.layer_dimension() - GroupSpec.from_arch("bert-base").layer_dimension() == 3072


def test_rmsnorm_residual_factor_is_the_hyperoctahedral_group():
    a = rep(get_arch("bert-base"), norm="rmsnorm", d_model=3, H=1, H_kv=1, d_k=3, d_v=3)
    order = GroupSpec.from_arch(a).factor("residual-permutation").order.subs(a.substitutions())
    assert order == 2 ** 3 * 6  # signed 3 x 3 permutation matrices
    assert order == sum(1 for p in itertools.permutations(range(3)) for s in itertools.product((1, -1), repeat=3))


def test_unmodelled_features_are_refused():
    with pytest.raises(SymtransError, match="norm epsilon = 0"):
        GroupSpec.from_arch(rep(get_arch("bert-base"), ln_eps=0.0))
    loose = GroupSpec.from_arch(rep(get_arch("gpt2"), ln_eps=0.0), strict=False)
    assert loose.unmodelled and "residual-permutation" not in loose.names()
    assert not GroupSpec.from_arch("gpt2").unmodelled  # pre-LN is modelled now


def test_symbolic_total_is_an_expression():
    spec = GroupSpec.from_arch("symbolic")
    S = {str(s): s for s in spec.total_expression().free_symbols}
    L, H, d_k, d_v, d_ff, d = (S[k] for k in ("L", "H", "d_k", "d_v", "d_ff", "d_model"))
    per_layer = H * (d_k ** 2 + d_k + d_v ** 2 + d_v) + H * d_v + d_ff + 2 + d + d_ff
    per_boundary = d + 2 * H * d_k + H * d_v
    assert sp.expand(spec.total_expression() - L * per_layer - (L - 1) * per_boundary) == 0


def test_group_spec_does_not_import_torch():
    code = ("import sys; from symtrans.group import GroupSpec; from symtrans import formula; "
            "GroupSpec.from_arch('bert-base'); formula('gauge-dimension', arch='gpt2'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
