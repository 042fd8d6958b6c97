"""Streaming: the stated float64 memory budget, counted independently and measured on a real run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from symtrans.arch import from_config
from symtrans.numeric import load_model
from symtrans.numeric.fixtures import random_checkpoint
from symtrans.numeric.streaming import float64_bytes, layer_float64_bytes, stream_budget

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_layer_bytes_equal_transformers_parameter_count(tmp_path, family):
    """Per-layer float64 bytes from the formula against the real module's parameters (K/V repeated for GQA)."""
    path, model = random_checkpoint(tmp_path, family, n_layers=2)
    arch = from_config(path)
    base = getattr(model, "encoder", None) or model
    block = base.layer[0] if hasattr(base, "layer") else (model.h[0] if hasattr(model, "h") else model.layers[0])
    count = sum(p.numel() for p in block.parameters())
    loaded = sum(t.numel() for t in load_model(path).layer(0).values())  # our layout as loaded
    assert layer_float64_bytes(arch) == 8 * loaded
    if family == "llama":  # K/V repeated to the H query heads; absent biases and RMSNorm shifts stored as zeros
        kv = sum(p.numel() for n, p in block.named_parameters() if "k_proj" in n or "v_proj" in n)
        H, Hkv, D, dk, F = int(arch.H), int(arch.H_kv), int(arch.d_model), int(arch.d_k), int(arch.d_ff)
        count += kv * (H // Hkv - 1) + 2 * D + (3 * H * dk + D + 2 * F + D)
    assert loaded == count
    tables = sum(p.numel() for n, p in model.named_parameters()
                 if any(t in n for t in ("word_embeddings", "position_embeddings", "token_type_embeddings",
                                         "wte", "wpe", "embed_tokens")))
    assert float64_bytes(arch) == int(arch.L) * layer_float64_bytes(arch) + 8 * tables


SCRIPT = r"""
import json, sys
from symtrans.numeric.measure import measure_all, peak_memory, reset_peak_memory
from symtrans.numeric.weights import stream_model, load_model
warm, big, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
measure_all(stream_model(warm), n=n)  # first-call costs (libraries, thread pool) on a tiny model
before = peak_memory()["rss_mib"]
reset_peak_memory()
w = stream_model(big) if mode == "stream" else load_model(big)
measure_all(w, n=n)
print(json.dumps({"before_mib": before, "peak_mib": peak_memory()["peak_rss_mib"]}))
"""


def _growth(warm: Path, big: Path, mode: str, n: int) -> float:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(warm), str(big), mode, str(n)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return (rec["peak_mib"] - rec["before_mib"]) * 2**20


def test_streamed_measure_stays_within_two_layers(tmp_path):
    """Streamed: growth <= the stated budget (+ 16 MiB allocator slack); eager on the same model exceeds all layers."""
    n, sizes = 24, dict(d_model=256, n_heads=4, d_ff=1024, vocab=1000, positions=64)
    warm, _ = random_checkpoint(tmp_path / "warm", "llama", n_layers=1, **dict(sizes, d_model=32, d_ff=64))
    big, _ = random_checkpoint(tmp_path / "big", "llama", n_layers=16, **sizes)
    arch = from_config(big)
    budget = stream_budget(arch, n)["bound_bytes"]
    layers = int(arch.L) * layer_float64_bytes(arch)
    assert budget < layers / 4  # the test distinguishes: 16 layers against about two
    streamed = _growth(warm, big, "stream", n)
    print(f"\nstreamed growth {streamed / 2**20:.1f} MiB, budget {budget / 2**20:.1f} MiB, "
          f"all layers in float64 {layers / 2**20:.1f} MiB")
    assert streamed <= budget + 16 * 2**20
    eager = _growth(warm, big, "eager", n)  # the false case: holding every layer shows
    print(f"eager growth {eager / 2**20:.1f} MiB")
    assert eager >= layers
