"""``symtrans relate`` on the bundled MiniLM (post-LN BERT, GELU): found elements re-check, non-symmetries refused.

The quick-tier cases on small Llama and GPT-2 checkpoints are in ``test_group_relate_tiny.py``; the slow
test here relates 10 random exact elements of G on each of the three models and re-checks each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from symtrans.cli import main
from symtrans.group.numeric import model_blocks, weights_from_blocks
from symtrans.group.relate import apply_steps, check_relation, random_element, relate, relation_tolerance, write_relation
from symtrans.group.spec import GroupSpec, act
from symtrans.numeric.save import save_weights


def _element(w: Any, seed: int) -> Any:
    spec = GroupSpec.from_arch(w.arch)
    return weights_from_blocks(w, apply_steps(spec, model_blocks(w), random_element(spec, w.n_layers, seed)))


def test_cli_relates_a_gauge_transformed_copy_and_verify_rechecks_the_file(default_model, tmp_path, capsys):
    save_weights(_element(default_model, 7), tmp_path / "b")  # float32, as the bundled checkpoint
    out = tmp_path / "g.json"
    status = main(["relate", "default", str(tmp_path / "b"), "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert status == 0, text
    assert text.startswith("related: B = g . A with g moving S_H, S_dff, attention-bias-transfer")
    assert (tmp_path / "g.json.safetensors").is_file()
    assert main(["verify", str(out), "--quiet"]) == 0
    # every tensor the loader reads, the pooler's among them (counted from the block form, not typed)
    from symtrans.group.relate import _iter_tensors

    names = [(n, l) for n, l, _ in _iter_tensors(model_blocks(default_model))]
    assert ("pooler_w", None) in names
    assert f"valid: g . A reproduces B in all {len(names)} tensors" in capsys.readouterr().out
    # the same file against another B (A itself) is INVALID: the checker recomputes, it does not trust
    data = json.loads(out.read_text())
    data["b"] = dict(data["a"])
    from symtrans.group.relate import _digest

    data["digest"] = _digest(data)
    out.write_text(json.dumps(data))
    assert main(["verify", str(out), "--quiet"]) == 1
    assert "INVALID: g . A differs from B at" in capsys.readouterr().out


def test_cli_refuses_a_rotation_of_minilm_naming_the_broken_factor(default_model, tmp_path, capsys):
    spec = GroupSpec.from_arch(default_model.arch)
    Q, R = torch.linalg.qr(torch.randn(384, 384, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    b = weights_from_blocks(default_model, act(spec, model_blocks(default_model), "residual-permutation", {"Q": Q}))
    save_weights(b, tmp_path / "b")
    status = main(["relate", "default", str(tmp_path / "b"), "--out", str(tmp_path / "g.json"), "--quiet"])
    text = capsys.readouterr().out
    assert status == 1 and not (tmp_path / "g.json").exists()
    assert text.startswith("not related: residual-rotation, tensor word: unexplained part ")
    assert "broken by: residual-rotation not a pre-norm model with an untied head" in text


def test_a_scaled_gelu_unit_is_refused_by_the_activation(default_model):
    b = default_model.copy()
    b.tensors["W_in"][2, :, 5] *= 3.0
    b.tensors["b_in"][2, 5] *= 3.0
    b.tensors["W_out"][2, 5] /= 3.0
    rel = relate(default_model, b)
    assert not rel.related and (rel.stop.factor, rel.stop.layer, rel.stop.tensor) == ("ffn-scaling", 2, "W_in")
    # relate's deferred first try stops here before anything it does otherwise (its identity residual map's fit,
    # measured at the stop, within tolerance): that try's refusal is the answer, without a second solve
    assert "deferred fit" in rel.phases and "deferred try" not in rel.phases
    spec = GroupSpec.from_arch(default_model.arch)
    gelu = next(x for x in spec.factor("ffn-scaling").broken_by if x.present)
    assert rel.stop.features == [f"{gelu.feature}: {gelu.reason}"]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["default", "llama", "gpt2"])
def test_ten_random_elements_are_found_and_recheck(family, default_model, tmp_path):
    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.numeric.weights import load_model

    if family == "default":
        a = default_model
    else:
        random_checkpoint(tmp_path / "a", family)
        a = load_model(tmp_path / "a")
    for seed in range(10):
        d = Path(tmp_path / f"b{seed}")
        save_weights(_element(a, 100 + seed), d)
        rel = relate(a.source, str(d))
        assert rel.related, (seed, rel.summary())
        path = write_relation(rel, tmp_path / f"g{seed}.json")
        ok, why = check_relation(json.loads(path.read_text()), path)
        assert ok, (seed, why)


@pytest.mark.parametrize("wrong", [False, True])
def test_a_lazily_translated_table_measures_what_the_acted_table_measures(default_model, wrong):
    """relate keeps the translations of a large model table pending (``_Solver.apply``) and reads the table
    through them: its column and row means and the check's residual must be those of the acted table, for the
    element B needs (residual within B's precision) and for a wrong one (residual far beyond it)."""
    import symtrans.group.relate as rel_mod

    a = default_model
    spec = GroupSpec.from_arch(a.arch)
    factors = ["embedding-translation", "embedding-centring-shift"]
    steps = sorted(random_element(spec, a.n_layers, 3, factors=factors), key=lambda s: factors.index(s["factor"]))
    assert [s["factor"] for s in steps] == factors  # relate's order (translation_order); the two commute
    target = apply_steps(spec, model_blocks(a), steps)
    if wrong:  # the centring shift of every row 1.5 times too large
        steps[1] = {"factor": steps[1]["factor"], "element": {k: 1.5 * v for k, v in steps[1]["element"].items()}}
    s = rel_mod._Solver(spec, model_blocks(a), target, lambda n, l: "float32")
    s.lazy_values = 1
    for st in steps:
        s.apply(st["factor"], st["element"])
    assert len(s.pending["word"]) == 2  # both steps pending: nothing acted on the stored table yet
    assert torch.equal(s.cur["word"], model_blocks(a)["word"])
    eager = apply_steps(spec, model_blocks(a), steps)["word"]
    assert torch.allclose(s.col_means("word"), eager.mean(0, keepdim=True), rtol=1e-12, atol=1e-15)
    assert torch.allclose(s.row_means("word"), eager.mean(1, keepdim=True), rtol=1e-12, atol=1e-15)
    measured, direct = s.lazy_residual("word")[0], rel_mod._rel(eager, target["word"])
    assert measured == pytest.approx(direct, rel=1e-9, abs=1e-16)
    # its slices (word rows and columns), summed chunk by chunk, are those of the acted table's
    again, stats = s.lazy_residual("word", (0, 1))
    assert again == pytest.approx(direct, rel=1e-9, abs=1e-16)
    for p, got in rel_mod.slice_stats("word", eager, target["word"], (0, 1)).items():
        for x, y in zip(stats[p], got):
            assert torch.allclose(x, y, rtol=1e-9, atol=1e-15)
    assert (measured > relation_tolerance("float32")[0]) == wrong
    s.materialise("word")
    assert "word" not in s.pending and torch.equal(s.cur["word"], eager)


def test_a_deferred_residual_fit_beyond_its_tolerance_is_solved_again(default_model):
    """relate's first try leaves the residual map's fit on the word table to the check (``_Solver.defer``); the
    check's tolerance for that table is looser than the fit's, so a word table between the two must send relate
    to the solve that measures the fit where it is made, and give that solve's refusal. Without a perturbation
    the first try's answer stands (no second solve)."""
    a = default_model
    spec = GroupSpec.from_arch(a.arch)
    # two factors act on the word table, so the check's tolerance there (their errors in quadrature) exceeds the
    # pivot fit's, which is the check's for one perfectly conditioned factor
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(
        spec, a.n_layers, 4, factors=["residual-permutation", "embedding-translation"])))
    first = relate(a, b)
    assert first.related and "deferred try" not in first.phases
    assert {"residual-permutation", "embedding-translation"} <= {s["factor"] for s in first.steps}
    fit_tol = relation_tolerance("float32")[0]  # the pivot's tolerance, 8 u (_Solver.u_pivot: kappa 1, one factor)
    # the word table's in the check: the factors that act on it add in quadrature (the residual map and the
    # embedding translations relate solves with it)
    check_tol = next(r["tolerance"] for r in first.residuals if r["tensor"] == "word")
    assert check_tol > fit_tol
    # a relative Frobenius perturbation of the word table between the two tolerances
    noise = torch.randn(b.tensors["word"].shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    size = (fit_tol + check_tol) / 2
    b.tensors["word"] += noise * (size * float(b.tensors["word"].norm()) / float(noise.norm()))
    rel = relate(a, b)
    assert "deferred try" in rel.phases  # the first try was not taken
    assert not rel.related and (rel.stop.factor, rel.stop.layer, rel.stop.tensor) == ("residual-permutation", None,
                                                                                       "word")
    assert fit_tol < rel.stop.unexplained <= size * 1.01
    # a refusal after the first try solved the gauges otherwise (QR) is answered by the second solve
    c = a.copy()
    c.tensors["W_O"][5, 0] *= 1 + 1e-5  # one head's W_O scaled, its W_V not: caught after the gauges, by the check
    late = relate(a, c)
    assert not late.related and "deferred try" in late.phases
    assert (late.stop.layer, late.stop.tensor) == (5, "W_O")


def test_a_unit_the_window_matches_beyond_its_key_tolerance_is_measured_and_refused(default_model):
    """relate's first try takes the FFN units' match from the window on their keys' projections
    (``_Solver.unit_keys``) and leaves the keys' full distances to where relate needs them. A unit of B whose
    input column differs from A's only off the window's directions (so the window matches it), by 100x the key
    tolerance relative to the column (about 10x relative to the largest key, the distance's scale), must still be refused at the units, with that distance measured, not accepted."""
    from symtrans.group.relate import _Solver

    a, l, j = default_model, 2, 5
    spec = GroupSpec.from_arch(a.arch)
    s = _Solver(spec, model_blocks(a), model_blocks(a), lambda n, k: "float32")
    w = a.tensors["W_in"][l, :, j].clone()
    d = w.numel()
    R = s._window_dirs(d + a.tensors["W_out"].shape[-1], torch.float64)[:d]  # the input part's directions
    (_, tag), = s.tags_on("W_in", "hyperplane_weight")
    u = (1 / s.gain_for(tag, l, s.cur)).reshape(-1)
    M = torch.cat([R, u.reshape(-1, 1), w.reshape(-1, 1)], 1)
    z = torch.randn(d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    delta = z - M @ torch.linalg.lstsq(M, z.reshape(-1, 1)).solution.reshape(-1)  # off every direction, u and w
    key_tol = 1e3 * relation_tolerance("float32")[0]
    inv = w - u * (u @ w) / (u @ u)
    delta *= 100 * key_tol * float(inv.norm()) / float(delta.norm())
    assert float((R.T @ delta).abs().max()) < 1e-6 * key_tol * float(inv.norm())  # invisible to the window
    b = a.copy()
    b.tensors["W_in"][l, :, j] += delta
    rel = relate(a, b)
    assert not rel.related and (rel.stop.factor, rel.stop.layer) == ("S_dff", l)
    assert 2 * key_tol < rel.stop.unexplained <= 100 * key_tol  # measured: beyond the tolerance, at most |delta|
    assert "deferred try" in rel.phases  # the first try's answer not taken: the distance measured where made


def test_the_chunked_entry_measure_agrees_with_the_whole_array_form():
    """``worst_each`` entry by entry reads NumPy arrays chunk by chunk (``_worst_each_chunked``); its worst ratio,
    index and share equal those of the whole-array formula, over sizes that end mid-chunk and a NaN (read as
    infinitely far off)."""
    import math

    import numpy as np

    from symtrans.group.relate import _EACH_CHUNK, worst_each

    rng = np.random.default_rng(0)
    for n in (7, _EACH_CHUNK, 3 * _EACH_CHUNK + 5):
        b = rng.standard_normal((n,))
        b[rng.integers(0, n, 5)] *= 1e-9  # entries far below the rest
        a = b * (1 + 1e-7 * rng.standard_normal(n))
        a[n // 2] = -b[n // 2]
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 2.0 ** -126)
        ratio = np.abs(a - b) / scale
        got = worst_each(torch.from_numpy(a), torch.from_numpy(b), 2.0 ** -126)
        assert got["index"] == int(ratio.argmax()) and got["residual"] == float(ratio.max())
        assert math.isclose(got["share"], scale[ratio.argmax()] / math.sqrt(float(scale @ scale)))
        a[-1] = math.nan
        assert worst_each(torch.from_numpy(a), torch.from_numpy(b), 2.0 ** -126)["residual"] == math.inf
