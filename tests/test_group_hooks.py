"""Every cell of the gauge-invariance table (symtrans.group.hooks), checked numerically on the bundled model.

For each factor of G acting on the bundled model's weights: a random exact element (sample_gauge, float64, not
rounded), the model moved by it (apply_gauge: the tag tables), and one forward of each on the same tokens. Each
hook at each layer is compared with the table's claim: invariant - equal within the storage-precision tolerance
of symtrans.group.relate.relation_tolerance (float32, the element's kappa); covariant - equal to the predicted
transform (hooks.predict) within it, and not equal to the unmoved value (a move that does nothing would pass
as covariant otherwise); changes - differs from the unmoved value by more than it, and from every predicted
transform.
"""

from __future__ import annotations

import pytest

from symtrans.group.gauge import apply_gauge, gauge_factors, sample_gauge
from symtrans.group.hooks import Effect, HOOKS, gauge_table, hook_rows, hook_values, predict
from symtrans.group.relate import relation_tolerance
from symtrans.group.spec import GroupSpec
from symtrans.numeric import load_model
from symtrans.numeric.forward import encode


@pytest.fixture(scope="module")
def bundled():
    w = load_model("default")
    return w, encode(w, n=12, seed=3), {(c.hook, c.factor): c for c in gauge_table(w)}


def _rel(a, b) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def _check(cell_effect: Effect, before, after, parts, w, layer, tol):
    """(ok, text): whether the numbers agree with the claim."""
    moved = _rel(after, before)
    if cell_effect.verdict == "invariant":
        return moved <= tol, f"invariant claimed, moved {moved:.3g} (tolerance {tol:.3g})"
    if cell_effect.verdict == "covariant":
        res = _rel(after, predict(before, cell_effect, parts, w, layer))
        return res <= tol < moved, f"covariant claimed: residual {res:.3g}, moved {moved:.3g} (tolerance {tol:.3g})"
    return moved > tol, f"changes claimed, moved {moved:.3g} (tolerance {tol:.3g})"


FACTORS = gauge_factors(GroupSpec.from_arch("minilm-l6-h384"))


@pytest.mark.parametrize("factor", FACTORS)
def test_every_cell_numerically(bundled, factor):
    w, trace, cells = bundled
    g = sample_gauge(w, seed=5, factors=[factor])
    moved = apply_gauge(w, g, round_to_storage=False)
    trace2 = encode(moved, input_ids=trace.input_ids)
    tol, why = relation_tolerance("float32", g.kappa)
    failures = []
    checked = 0
    for layer in range(w.n_layers):
        before, after = hook_values(w, trace, layer), hook_values(moved, trace2, layer)
        for tl, name in hook_rows(w.arch):
            cell = cells[tl, factor]
            if cell.verdict == "absent":
                assert name not in before
                continue
            ok, text = _check(cell.layers[layer], before[name], after[name], g.parts[factor], w, layer, tol)
            checked += 1
            if not ok:
                failures.append(f"layer {layer} {tl}: {text}")
    assert not failures, f"{factor} ({why}):\n" + "\n".join(failures)
    assert checked == w.n_layers * 13


def test_a_false_claim_fails(bundled):
    """The check can fail: each verdict swapped for a wrong one is caught on real numbers."""
    w, trace, cells = bundled
    g = sample_gauge(w, seed=5, factors=["vo-gauge"])
    moved = apply_gauge(w, g, round_to_storage=False)
    trace2 = encode(moved, input_ids=trace.input_ids)
    tol, _ = relation_tolerance("float32", g.kappa)
    b, a = hook_values(w, trace, 1), hook_values(moved, trace2, 1)
    z, result = cells["hook_z", "vo-gauge"].layers[1], cells["hook_result", "vo-gauge"].layers[1]
    assert z.verdict == "covariant" and result.verdict == "invariant"
    assert _check(z, b["Y"], a["Y"], g.parts["vo-gauge"], w, 1, tol)[0]
    # hook_z called invariant, hook_result called changing, hook_z predicted with the wrong map: all refused
    assert not _check(Effect(), b["Y"], a["Y"], g.parts["vo-gauge"], w, 1, tol)[0]
    assert not _check(Effect(data="x"), b["YO"], a["YO"], g.parts["vo-gauge"], w, 1, tol)[0]
    wrong = Effect(tuple(m.__class__(m.kind, m.axis, m.tag.__class__(**{**m.tag.__dict__, "how": "inverse_transpose"}),
                                     m.part) for m in z.moves))
    assert not _check(wrong, b["Y"], a["Y"], g.parts["vo-gauge"], w, 1, tol)[0]


def test_post_ln_rows_come_from_names_py_and_a_missing_row_is_an_error(monkeypatch):
    """Post-LN models read resid_mid at the second norm's input (pre_ln2), pre-LN models after attention (pre_ln1);
    resid_post is the layer's output on both. Without names.py's post-LN row the table refuses to guess."""
    from symtrans.errors import SymtransError
    from symtrans.group import hooks

    post, pre = dict(hook_rows("minilm-l6-h384")), dict(hook_rows("gpt2"))
    assert (post["resid_mid"], post["resid_post"], pre["resid_mid"], pre["resid_post"]) == \
        ("pre_ln2", "out", "pre_ln1", "out")
    monkeypatch.setattr(hooks, "ACTIVATIONS", tuple(r for r in hooks.ACTIVATIONS if r.symtrans != "pre_ln2"))
    with pytest.raises(SymtransError, match="0 rows for hook_resid_mid on a post-ln model"):
        hook_rows("minilm-l6-h384")
    assert dict(hook_rows("gpt2"))["resid_mid"] == "pre_ln1"


def test_table_rows_and_names():
    """One row per hook and one column per factor acting on the weights; TL names come from names.py."""
    cells = gauge_table("minilm-l6-h384")
    assert len(cells) == len(HOOKS) * len(FACTORS)
    names = {c.hook: c.tl for c in cells}
    assert names["hook_z"] == "blocks.{l}.attn.hook_z" and names["hook_q"] == "blocks.{l}.attn.hook_q"
    assert names["W_E"] == "W_E"
    with pytest.raises(Exception, match="at least 1"):
        gauge_table("minilm-l6-h384", layers=0)


def _every_cell_on(family, extra, tmp_path):
    """Every invariant and changing cell on a random tiny checkpoint of ``family``; a covariant cell whose map
    predict cannot form numerically (a gain-conjugated residual rotation on the weight products, per-kv-head
    elements on query-head blocks) only has to move, and is counted. W_U (symtrans loads no output head) is
    checked through the element's image M of an identity head (apply_gauge_head: the head W goes to M W): an
    invariant cell must leave M = I, any other must move it."""
    import torch

    from symtrans.errors import SymtransError
    from symtrans.group.gauge import apply_gauge_head
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path, family, **extra)
    w = load_model(tmp_path)
    cells = {(c.hook, c.factor): c for c in gauge_table(w)}
    trace = encode(w, n=8, seed=3)
    failures, unpredicted, checked, heads = [], 0, 0, 0
    for factor in gauge_factors(GroupSpec.from_arch(w.arch)):
        g = sample_gauge(w, seed=5, factors=[factor])
        moved, head = apply_gauge_head(w, g, round_to_storage=False)
        trace2 = encode(moved, input_ids=trace.input_ids)
        tol, _ = relation_tolerance("float32", g.kappa)
        for layer in range(w.n_layers):
            before, after = hook_values(w, trace, layer), hook_values(moved, trace2, layer)
            for tl, name in hook_rows(w.arch):
                cell = cells[tl, factor]
                if cell.verdict == "absent":
                    continue
                effect = cell.layers[layer]
                if name not in before:  # W_U: the head is not loaded; its image under the element is
                    assert name == "lm_head" and head is not None, (tl, name)
                    eye = torch.eye(head.shape[0], dtype=head.dtype)
                    ok = (_rel(head, eye) <= tol) == (effect.verdict == "invariant")
                    heads += 1
                    if not ok:
                        failures.append(f"{factor} layer {layer} {tl}: {effect.verdict} claimed, the head's image "
                                        f"moved {_rel(head, eye):.3g}")
                    continue
                try:
                    ok, text = _check(effect, before[name], after[name], g.parts[factor], w, layer, tol)
                except SymtransError:
                    assert effect.verdict == "covariant"
                    unpredicted += 1
                    ok, text = _rel(after[name], before[name]) > tol, "covariant claimed, did not move"
                checked += 1
                if not ok:
                    failures.append(f"{factor} layer {layer} {tl}: {text}")
    assert not failures, "\n".join(failures)
    assert checked > 0 and unpredicted < checked / 5
    untied = w.arch.attention == "causal" and not w.arch.tied_lm_head
    assert (heads > 0) == untied


@pytest.mark.parametrize("family,extra", [("gpt2", {"tie_word_embeddings": False}), ("llama", {}), ("roberta", {}),
                                          ("gpt_neox", {})], ids=["gpt2-untied", "llama", "roberta", "gpt_neox"])
def test_every_cell_on_tiny_decoders(family, extra, tmp_path):
    """Pre-LN decoders (LayerNorm with biases; RMSNorm, gated FFN, rotary, grouped-query attention; GPT-NeoX's
    parallel residual) and RoBERTa (rows no input reads): the table once said that G's unused-position-rows and
    unread-pad-row change every activation (they move rows no unpadded input reads: nothing moved, measured),
    and that GPT-NeoX's parallel-bias-trade changes the residual stream (b_O + c and b_out - c cancel in the
    parallel sum: nothing moved)."""
    _every_cell_on(family, extra, tmp_path)


@pytest.mark.slow  # the remaining families, about 3 s each
@pytest.mark.parametrize("family", ["bert", "distilbert", "mistral", "qwen2", "gemma3", "qwen3", "gemma2", "phi3",
                                    "olmo2", "smollm3"])
def test_every_cell_on_every_other_family(family, tmp_path):
    _every_cell_on(family, {}, tmp_path)


def test_a_map_on_both_sides_of_a_product_reads_as_one_map_and_a_tied_head_as_the_word_table():
    """A probe read the table's two-sided cells, ``W_Q W_K^T[h] -> Q^-1 W_Q W_K^T[h] (left ...); W_Q W_K^T[h] ->
    W_Q W_K^T[h] (Q^-1)^T (right ...)``, as two maps, each 1.4-1.8 off alone; only both at once are right. They
    are now written as one map. And a tied causal LM's W_U said only "no untied output head", though W_U = W_E^T
    moves with the word table (GPT-2's moved 1.39 under the residual permutation). (``layers=2`` on the 12-layer
    GPT-2 preset raised an IndexError: a between-layer factor's boundaries were counted at the preset's depth.)"""
    rows = {(c.hook, c.factor): c for c in gauge_table("gpt2", layers=2)}
    qk = rows["W_Q W_K^T", "residual-permutation"].how
    assert qk.count("->") == 1 and "left by Q^-1, right by (Q^-1)^T" in qk, qk
    vo = rows["W_V W_O", "residual-permutation"].how
    assert vo.count("->") == 1 and vo.startswith("W_V W_O[h] -> Q^-1 W_V W_O[h] Q"), vo
    assert rows["W_U", "residual-permutation"].how.startswith("tied: W_U = W_E^T")
    assert rows["W_E", "residual-permutation"].verdict == "covariant"
    encoder = {(c.hook, c.factor): c for c in gauge_table("minilm-l6-h384", layers=2)}
    assert encoder["W_U", "S_H"].how == "this architecture has no untied output head"
