"""Variants and measurements on decoders, each against an independent route."""

from __future__ import annotations

import pytest
import torch

from symtrans.numeric import encode
from symtrans.numeric.fixtures import tiny_decoder
from symtrans.numeric.measure import asymmetry, measure_all, residual_ratio
from symtrans.numeric.variants import run_stack, variant_function
from symtrans.numeric.forward import structure


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_causal_pure_attention_leaves_the_first_token_unmixed(family):
    """Row 1 of a causal A is e_1: token 1's pure-attention output is x_1 W_V^h W_O^h summed, plus biases."""
    w = tiny_decoder(family)
    X = encode(w, n=9, seed=1).embeddings
    lay = w.layer(0)
    Z = run_stack(w, X, "pure-attention", depth=1, layer_index=0, ln=False)[1]
    H, Hkv = w.n_heads, lay["W_K"].shape[0]
    by_hand = lay["b_O"].clone()
    for h in range(H):
        g = h // (H // Hkv)
        by_hand += (X[0] @ lay["W_V"][g] + lay["b_V"][g]) @ lay["W_O"][h]
    assert float((Z[0] - by_hand).abs().max()) < 1e-12
    # a later token does mix: its output is not its own value alone
    alone = sum((X[5] @ lay["W_V"][h // (H // Hkv)] + lay["b_V"][h // (H // Hkv)]) @ lay["W_O"][h]
                for h in range(H)) + lay["b_O"]
    assert float((Z[5] - alone).abs().max()) > 1e-6


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_variants_with_norms_are_the_real_layer_pieces(family):
    w = tiny_decoder(family)
    tr = encode(w, n=7, seed=2)
    lay, st = w.layer(0), structure(w)
    X = tr.embeddings
    assert torch.equal(variant_function("residual", st.eps, st.activation, True, st=st)(X, lay), tr.layers[0].pre_ln1)
    assert torch.equal(variant_function("full", st.eps, st.activation, True, st=st)(X, lay), tr.layers[0].out)
    pure = variant_function("pure-attention", st.eps, st.activation, True, st=st)(X, lay)
    assert torch.allclose(pure, tr.layers[0].mha + lay["b_O"], atol=1e-13, rtol=0)
    # without norms the input is not normalised: a different map
    bare = variant_function("pure-attention", st.eps, st.activation, False, st=st)(X, lay)
    assert float((bare - pure).abs().max()) > 1e-6


def test_alpha_with_grouped_query_heads_matches_the_formed_matrix():
    w = tiny_decoder("llama")
    rec = asymmetry(w)
    lay = w.layer(1)
    H, Hkv = w.n_heads, lay["W_K"].shape[0]
    for h in range(H):
        M = lay["W_Q"][h] @ lay["W_K"][h // (H // Hkv)].T
        brute = float(((M - M.T) / 2).norm() / M.norm())
        assert abs(rec.alpha[1][h] - brute) < 1e-12
    assert "offset-0" in rec.positional  # rotary: what alpha means is stated
    assert "no rotary" in asymmetry(tiny_decoder("gpt2")).positional


def test_measure_on_decoders_states_form_collapse_and_fibres():
    for family in ("gpt2", "llama"):
        w = tiny_decoder(family)
        rep = measure_all(w, n=10, seed=0, variants=("full", "pure-attention"), depth=3)
        assert rep.attention == "causal" and "first token never mixes" in rep.collapse
        assert rep.form.startswith("pre-LN decoder")
        for i in range(w.n_layers):  # fibre of Z -> Z W_O: n (H d_v - rank W_O), rank by brute force
            Wo = w.layer(i)["W_O"].reshape(-1, w.d_model)
            assert rep.wo_fibre_dim[i] == 10 * (Wo.shape[0] - int(torch.linalg.matrix_rank(Wo)))
        assert len(rep.heads) == w.n_layers and all(h.n == 10 for h in rep.heads)
    assert rep.ln[0] == {} and "RMSNorm" in rep.form  # llama: no LayerNorm hypotheses to measure
    assert set(measure_all(tiny_decoder("gpt2"), n=6).ln[0]) == {"ln1", "ln2"}


def test_first_row_ratio_is_zero_exactly_when_rows_equal_the_first():
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    assert residual_ratio(x.repeat(4, 1)).first_row_ratio == 0.0
    X = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]], dtype=torch.float64)
    rec = residual_ratio(X)
    assert abs(rec.first_row_ratio - float((X - X[0]).norm() / X.norm())) < 1e-15 and rec.first_row_ratio > 0


def test_paper_map_on_a_decoder_says_what_it_leaves_out(tmp_path):
    """thm-5.3's rank-r evaluations use the paper's unmasked MHA: on Mistral the record names mask and window."""
    from symtrans.producers.common import unmasked_note
    from symtrans.producers.sec5 import check_thm_5_3
    from symtrans.context import Context
    from symtrans.numeric.fixtures import random_checkpoint

    path, _ = random_checkpoint(tmp_path / "mistral", "mistral", n_layers=1, sliding_window=3)
    ctx = Context(model=str(path), n=8)
    note = unmasked_note(ctx.weights())
    assert "causal mask" in note and "sliding window of 3" in note and "rotary" in note
    assert all(note in r.inputs["form"] for r in check_thm_5_3(ctx))
    gpt2 = unmasked_note(tiny_decoder("gpt2"))
    assert "causal mask" in gpt2 and "window" not in gpt2 and "rotary" not in gpt2
