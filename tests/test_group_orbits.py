"""Orbit dimensions (Jacobian rank vs group minus stabiliser), fibres of named maps, the collapse pairing."""

from __future__ import annotations

import torch

from symtrans.formulas import formula
from symtrans.group.certify import tiny_arch
from symtrans.group.numeric import layer_blocks, random_blocks
from symtrans.group.orbits import (fibre_ffn_input_numeric, fibre_formula, fibre_sum_numeric, fibre_wo_numeric,
                                   orbit_dimension_formula, orbit_dimension_numeric, pairing_table)
from symtrans.numeric import load_model


def test_real_model_orbit_dimension_every_layer():
    w = load_model("default", dtype="float64")
    a = w.arch  # the attention gauges and bias shifts, counted directly (GeLU breaks the FFN scalings)
    expected = a.H * (a.d_k ** 2 + a.d_k + a.d_v ** 2 + a.d_v)
    for i in range(w.n_layers):
        rec = orbit_dimension_numeric(layer_blocks(w.layer(i)), w.arch, layer=i)
        assert rec.jacobian_rank == rec.formula_at_measured_ranks == rec.symbolic_generic == expected
        assert rec.min_margin > 3


def test_structured_rank_equals_dense_jacobian_rank_and_the_stabiliser_formula():
    a = tiny_arch("bert-base", d_model=6, d_k=3, d_v=2, H=4, H_kv=2, d_ff=5, n=4)
    p = random_blocks(a, seed=4)["layers"][0]
    # a degenerate point: one query column dead in head 0 and one key column dead (same kv head)
    p["W_Q"][0][:, 0] = 0
    p["b_Q"][0][:, 0] = 0
    p["W_Q"][1][:, 0] = 0
    p["b_Q"][1][:, 0] = 0
    p["W_K"][0][:, 1] = 0
    dense = orbit_dimension_numeric(p, a, dense=True)
    fast = orbit_dimension_numeric(p, a)
    assert dense.jacobian_rank == fast.jacobian_rank == dense.formula_at_measured_ranks
    # stabiliser (d_k - r_Q)(d_k - r_K) = 1 * 1 at the first kv head
    assert dense.symbolic_generic - dense.jacobian_rank == 1


def test_orbit_formula_is_group_minus_stabiliser():
    f = orbit_dimension_formula("symbolic")
    assert f["expression"] == f["group_dimension"] - f["stabiliser"]


def test_fibres_of_named_maps():
    # head sum: numeric rank of [I ... I] against n (H-1) d_v and the registry's recovery-ambiguity
    assert fibre_sum_numeric(3, 4, 2)["fibre"] == fibre_formula("sum", "bert-base", n=3, H=4, d_k=2, d_v=2,
                                                                 d_model=8)["value"] == 18
    assert fibre_formula("sum", "bert-base", n=512)["value"] == formula("recovery-ambiguity", arch="bert-base").value
    w = load_model("default")
    for layer in (0, 5):
        r = fibre_wo_numeric(w, layer, 8)
        assert r["fibre"] == fibre_formula("wo", w.arch, n=8)["value"] == 0
        assert r["rank"]["margin"] > 1


def test_ffn_input_fibre_on_real_weights():
    w = load_model("default")
    r = fibre_ffn_input_numeric(w, 0, n=2)
    assert r["fibre"] == r["expected"] == 2  # exact (eps > 0): the direction 1 of each row
    assert r["numerically_flat_fibre"] == r["expected_flat"] == 4  # plus each row's own direction at eps/var
    assert r["wo_rank"] == 384


def test_pairing_table_names_a_precise_object_for_each_phenomenon():
    rows = pairing_table()
    assert [r["phenomenon"] for r in rows] == ["rank collapse in depth", "rank collapse in width",
                                               "head-channel non-identifiability", "entropy collapse"]
    assert all(r["object"] in ("fixed-point set", "orbit", "fibre") for r in rows)
    assert all("toolkit formalisation" in r["provenance"] for r in rows)


def test_fixed_point_set_of_s_n_is_invariant_under_a_real_layer():
    """Rank collapse in depth: Fix(S_n) = {1 x^T} is mapped into itself by a real layer."""
    from symtrans.numeric.forward import encoder_layer

    w = load_model("default", dtype="float64")
    x = torch.randn(1, w.d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = encoder_layer(x.repeat(5, 1), w.layer(2), w.arch.ln_eps).out
    assert float((out - out[0]).abs().max()) < 1e-12
