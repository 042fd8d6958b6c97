"""``symtrans measure`` end to end: the bundled model, a second checkpoint of another depth, plots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from symtrans.cli import main
from symtrans.numeric.fixtures import random_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_measure_default_text_output_has_every_section(capsys):
    assert main(["measure", "--text", "Attention is not all you need: pure attention loses rank."]) == 0
    out = capsys.readouterr().out
    for needle in ("rank profile: variant full", "alpha_h", "head output subspaces", "stacked W_O",
                   "LayerNorm hypotheses", "rank cut", "peak resident set", "Wedin"):
        assert needle in out, needle
    assert re.search(r"^\s+6\s+\d+\s", out, re.M), "a row for hidden state 6 (six layers)"


def test_second_checkpoint_of_another_depth_works_unchanged(tmp_path, capsys):
    path, _ = random_checkpoint(tmp_path / "bert3", "bert", n_layers=3, d_model=48, n_heads=6, d_ff=96,
                                positions=64)
    assert main(["measure", "--model", str(path), "--n", "20", "--format", "json", "--variant", "all",
                 "--plots", str(tmp_path / "plots")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == str(path) and data["n"] == 20
    assert set(data["profiles"]) == {"full", "pure-attention", "residual", "mlp"}
    assert len(data["profiles"]["full"]["layers"]) == 4  # embeddings + 3 layers
    assert len(data["asymmetry"]["alpha"]) == 3 and len(data["asymmetry"]["alpha"][0]) == 6
    assert [h["kappa"] >= 0 for h in data["heads"]] == [True] * 3
    assert data["wo"]["shape"] == [48, 48] and len(data["ln"]) == 3
    rank = data["profiles"]["full"]["layers"][1]["rank"]
    assert {"dtype", "cut", "tolerance_reason", "sigma_above", "sigma_below", "margin"} <= set(rank)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["alpha.png", "ranks.png", "spectra.png"]
    assert all(p.stat().st_size > 5000 for p in (tmp_path / "plots").iterdir())


def test_streamed_measure_matches_eager(tmp_path, capsys):
    path, _ = random_checkpoint(tmp_path / "bert2", "bert", n_layers=2)
    results = []
    for stream in ("off", "on"):
        assert main(["measure", "--model", str(path), "--n", "12", "--format", "json", "--stream", stream]) == 0
        results.append(json.loads(capsys.readouterr().out))
    eager, streamed = results
    assert streamed["memory"]["streamed"] and not eager["memory"]["streamed"]
    for key in ("profiles", "asymmetry", "heads", "wo", "ln"):
        assert eager[key] == streamed[key], key


@pytest.mark.parametrize("variant", ["pure-attention", "mlp"])
def test_variant_depth_sweep_from_the_cli(capsys, variant):
    assert main(["measure", "--n", "8", "--variant", variant, "--depth", "9", "--layer-index", "0",
                 "--format", "json"]) == 0
    prof = json.loads(capsys.readouterr().out)["profiles"][variant]
    assert len(prof["layers"]) == 10 and prof["layer_index"] == 0 and prof["ln"] is False
