"""Every API entry point takes model objects: transformers models, wrappers, hub ids from the local cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import symtrans
from symtrans.errors import SymtransError
from symtrans.numeric.fixtures import random_checkpoint, random_model
from symtrans.numeric.weights import unwrap_model

ROOT = Path(__file__).resolve().parents[1]


class Bridge:
    """The duck-typed TransformerLens shape: the original HF model kept as ``original_model``.

    transformer-lens itself is not installed here (it pulls in wandb, datasets, pandas, ...), so this real
    class stands in for ``TransformerBridge``; the HF model inside is real.
    """

    def __init__(self, model):
        self.original_model = model
        self.cfg = getattr(model, "config", None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for family in ("gpt2", "llama"):
        path, model = random_checkpoint(tmp_path_factory.mktemp(family), family, head=True)
        out[family] = (path, model)
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_models_with_a_head_and_wrapped_load_like_their_directory(models, family):
    path, model = models[family]
    ref = symtrans.load(path)
    for obj in (model, Bridge(model), Bridge(Bridge(model))):
        w = symtrans.load(obj)
        assert w.arch.family == ref.arch.family and w.source.startswith("<in-memory")
        for name in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "word"):
            assert torch.equal(w.tensors[name], ref.tensors[name]), name


def test_measure_and_check_claims_take_model_objects(models):
    path, model = models["llama"]
    m = symtrans.measure(Bridge(model), n=8)
    assert m.record.family == "llama" and m.rows()[0]["LN_hypotheses_hold"] is None  # RMSNorm: not measured
    assert m.record.profiles["full"].ranks == symtrans.measure(path, n=8).record.profiles["full"].ranks
    ev = symtrans.check_claims(model, ["prop-6.3", "lit-dong", "thm-4.2"], n=12)
    by = {e.producer: e for e in ev}
    assert by["head-subspace-dim"].verdict.value == "supported"
    for name in ("depth-sweep-pure-attention", "ln-real"):  # structural reasons, named
        assert by[name].verdict.value == "not-applicable" and "llama" in by[name].summary
    assert "causal" in by["depth-sweep-pure-attention"].summary and "RMSNorm" in by["ln-real"].summary


def test_nnsight_wrapper(models):
    nnsight = pytest.importorskip("nnsight")
    path, model = models["gpt2"]
    wrapped = nnsight.NNsight(model)
    assert unwrap_model(wrapped) is model
    assert torch.equal(symtrans.load(wrapped).W_O, symtrans.load(path).W_O)


def test_verify_invariance_takes_a_model_object():
    checks = symtrans.verify_invariance(random_model("bert"), factors=["S_H"], dtypes=["float64"], n=6)
    assert [(c.factor, c.verdict) for c in checks] == [("S_H", "holds")]


def test_objects_that_hold_no_model_are_refused():
    for bad in (Bridge.__new__(Bridge), object()):
        with pytest.raises(SymtransError, match="cannot read weights from"):
            symtrans.load(bad)


def _hub_cache(root: Path, repo: str, family: str) -> Path:
    """The layout huggingface_hub reads: models--org--name/{refs/main, snapshots/<commit>/...}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    base = root / ("models--" + repo.replace("/", "--"))
    random_checkpoint(base / "snapshots" / commit, family)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    return base / "snapshots" / commit


def test_cli_resolves_a_hub_id_from_the_offline_cache(tmp_path):
    snap = _hub_cache(tmp_path / "hub", "tiny-org/tiny-qwen", "qwen2")
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    cli = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", "tiny-org/tiny-qwen", "--n", "6"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0 and "pre-LN decoder" in cli.stdout and "collapse" in cli.stdout, cli.stderr[-2000:]
    assert f"model      {snap}" in cli.stdout  # resolved to the cached snapshot
    missing = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", "tiny-org/absent"],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "not in the local Hugging Face hub cache" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_proof_report_on_an_in_memory_decoder():
    rep = symtrans.proof_report(random_model("llama", head=True), n=8)
    ev = [e for c in rep.to_json()["claims"] if c["id"] == "lit-dong" for e in c["evidence"]]
    assert any(e["verdict"] == "not-applicable" and "causal" in e["summary"] for e in ev)
