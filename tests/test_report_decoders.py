"""The report on random tiny GPT-NeoX (parallel residual, partial rotary) and SmolLM3 (NoPE layers) checkpoints.

No producer may raise; a reading that does not apply says so, naming the
hypothesis it needs; the family gates agree with each family's architecture;
the real-block variant is the real (parallel) layer. Each check is fed a false
case: a sequential GPT-NeoX moves the MLP-input reading, a planted family list
is caught, the sequential composition differs from the parallel layer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from symtrans.numeric.fixtures import DECODER_FAMILIES, FAMILIES, random_checkpoint  # noqa: E402
from symtrans.producers.common import LAYERNORM_FAMILIES, LEARNED_POSITION_FAMILIES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _gate_mismatches(layernorm: tuple[str, ...], learned: tuple[str, ...], tmp: Path) -> list[str]:
    """Families whose gate membership disagrees with their Architecture (norm, positions), read from a config."""
    from symtrans.arch import from_config
    from symtrans.numeric.fixtures import random_model

    out = []
    for fam in FAMILIES:
        d = tmp / fam
        d.mkdir(exist_ok=True)
        random_model(fam, n_layers=1).config.to_json_file(str(d / "config.json"))
        a = from_config(d)
        if (a.norm == "layernorm") != (a.family in layernorm):
            out.append(f"{fam}: norm {a.norm}")
        if (a.positional == "learned") != (a.family in learned):
            out.append(f"{fam}: positions {a.positional}")
    return out


def test_family_gates_agree_with_each_architecture(tmp_path: Path) -> None:
    assert _gate_mismatches(LAYERNORM_FAMILIES, LEARNED_POSITION_FAMILIES, tmp_path) == []
    # false case: the list as it was before GPT-NeoX (LayerNorm) joined it
    planted = tuple(f for f in LAYERNORM_FAMILIES if f != "gpt_neox")
    assert _gate_mismatches(planted, LEARNED_POSITION_FAMILIES, tmp_path) == ["gpt_neox: norm layernorm"]


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_full_block_variant_is_the_real_layer(family: str) -> None:
    """run_stack's ``full`` variant reproduces the forward (GPT-NeoX: the parallel residual), bit for bit."""
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.numeric.forward import encode, structure
    from symtrans.numeric.variants import full_block, run_stack

    w = tiny_decoder(family)
    tr = encode(w, n=5)
    assert float((run_stack(w, tr.embeddings, "full")[-1] - tr.layers[-1].out).abs().max()) == 0.0
    st = structure(w)
    if st.parallel_residual:  # false case: the sequential composition is another function
        seq = dataclasses.replace(st.at(0), parallel_residual=False)
        assert float((full_block(tr.embeddings, w.layer(0), st=seq) - tr.layers[0].out).abs().max()) > 1e-3


def _mlp_input_records(path: Path) -> dict[str, Any]:
    import symtrans

    ev = symtrans.check_claims(str(path), ["thm-7.3", "thm-recovery"], n=12)
    return {e.producer: e for e in ev if e.producer in ("fibre-ln", "nonidentifiable-ln")}


def test_mlp_input_reading_needs_the_sequential_residual(tmp_path: Path) -> None:
    """Parallel residual: not-applicable naming the hypothesis; a sequential GPT-NeoX runs the reading (it moves)."""
    par, _ = random_checkpoint(tmp_path / "par", "gpt_neox")
    seq, _ = random_checkpoint(tmp_path / "seq", "gpt_neox", use_parallel_residual=False)
    rec = _mlp_input_records(par)
    assert set(rec) == {"fibre-ln", "nonidentifiable-ln"}
    for e in rec.values():
        assert e.verdict.value == "not-applicable"
        assert "parallel residual" in e.violated_hypothesis and "N2(X)" in e.summary
        assert [h.holds for h in e.hypothesis_checks] == [False]
    moved = _mlp_input_records(seq)
    assert {e.verdict.value for e in moved.values()} & {"supported", "fails"}, moved
    assert all(h.holds for e in moved.values() for h in e.hypothesis_checks)


def _assert_clean(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert report["errors"] == []
    rec = {e["producer"]: e for c in report["claims"] for e in c.get("evidence", [])}
    assert not [p for p, e in rec.items() if "raised" in e["summary"]]
    for p, e in rec.items():  # every not-applicable record names the hypothesis or structure it needs
        if e["verdict"] == "not-applicable":
            assert e.get("violated_hypothesis"), p
            assert "not applicable" in e["summary"] or "[reconstruction]" in e["summary"], p
    return rec


@pytest.mark.slow
def test_report_on_gpt_neox_and_smollm3(tmp_path: Path) -> None:
    """The full report, through the API (GPT-NeoX) and the CLI (SmolLM3): nothing raises, reasons named."""
    import symtrans

    neox, _ = random_checkpoint(tmp_path / "neox", "gpt_neox")
    smol, _ = random_checkpoint(tmp_path / "smol", "smollm3")
    symtrans.proof_report(str(neox), out=tmp_path / "r1", formats=["json"], n=16)
    rec = _assert_clean(json.loads((tmp_path / "r1" / "report.json").read_text()))
    assert rec["nonidentifiable-ln"]["verdict"] == "not-applicable"
    assert "parallel residual" in rec["nonidentifiable-ln"]["violated_hypothesis"]
    assert "ln-real" not in rec and "ln-real-n16" in rec  # LayerNorm: run on its norm inputs, not gated out
    env = {"PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "symtrans", "report", "--model", str(smol), "--out", str(tmp_path / "r2"),
                    "--format", "json", "--n", "16", "--quiet"], check=True, cwd=ROOT, env={**os.environ, **env},
                   timeout=600)
    rec = _assert_clean(json.loads((tmp_path / "r2" / "report.json").read_text()))
    assert rec["ln-real"]["verdict"] == "not-applicable" and "SmolLM3" in rec["ln-real"]["summary"]


def _ln_pairs(w: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any, Any]]:
    """The (input, gain, bias) triples thm-4.2's ln-real hands to ln_case on layer 0."""
    from symtrans.context import Context
    from symtrans.producers import sec4

    seen: list[tuple[Any, Any, Any]] = []
    monkeypatch.setattr(sec4, "ln_case", lambda X, g, b, eps=0.0: seen.append((X, g, b)))
    sec4.real_cases(Context(model="default", n=6, seed=0).preload(w), layers=1)
    return seen


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "bert"])
def test_ln_real_pairs_each_norm_with_its_own_input(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each LayerNorm case reproduces what the model's norm outputs (pre-LN: N1(X) and the MLP's input X1)."""
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.numeric.forward import encode, layer_norm
    from symtrans.numeric.weights import load_model

    w = load_model("default") if family == "bert" else tiny_decoder(family)
    lt = encode(w, n=6, seed=0).layers[0]
    eps = float(w.arch.ln_eps)
    outs = [layer_norm(X, g, b, eps) for X, g, b in _ln_pairs(w, monkeypatch)]
    want = [lt.X1, lt.out] if lt.form == "post-ln" else [lt.attn_in, lt.X1]
    assert [float((o - t).abs().max()) < 1e-12 for o, t in zip(outs, want)] == [True, True]
    if lt.form == "pre-ln":  # false case: the post-LN pairing (the sum after attention with N1's gain)
        lay = w.layer(0)
        assert float((layer_norm(lt.pre_ln1, lay["ln1_w"], lay["ln1_b"], eps) - lt.attn_in).abs().max()) > 1e-3
