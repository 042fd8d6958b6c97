"""Numeric invariance (torch) on the bundled real model and on random architectures of other shapes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from symtrans.arch import get_arch
from symtrans.group.certify import tiny_arch
from symtrans.group.forward import Features, TorchBackend, model_forward
from symtrans.group.numeric import (layer_blocks, sample_element, sample_gl, transform_weights, verify_model,
                                    verify_random)
from symtrans.group.spec import GroupSpec
from symtrans.numeric import encode
from symtrans.evidence import Verdict

rep = dataclasses.replace


@pytest.fixture(scope="module")
def weights(default_model):
    return default_model  # tests/conftest.py: float64, loaded once per session


def test_every_factor_on_the_real_model_float64(weights):
    checks = verify_model(weights, dtypes=("float64",), n=6)
    spec = GroupSpec.from_arch(weights.arch)
    present = {f.name for f in spec.factors if f.tags or f.scope == "data"}  # absent ones have no tensor to move
    assert {c.factor.split(" ")[0] for c in checks} == present
    assert {"centring-shift", "attention-input-hyperplane", "embedding-translation"} <= present
    for c in checks:
        assert c.verdict is Verdict.SUPPORTED, c.line()
        if c.expect == "invariant":
            assert c.max_rel_change < 1e-13  # float64 rounding level, far inside the tolerance
        else:
            assert c.max_rel_change > 1e-3  # ffn-scaling under GeLU, S_n with learned positions


def test_continuous_factors_on_the_real_model_float32(weights):
    checks = verify_model(weights, dtypes=("float32",), n=6, factors=["vo-gauge", "residual-permutation"])
    for c in checks:
        assert c.verdict is Verdict.SUPPORTED and c.dtype == "float32", c.line()
        assert 1e-9 < c.max_rel_change < c.tolerance  # float32 rounding is visible but bounded


def test_wrong_action_fails_numerically(weights):
    spec = GroupSpec.from_arch(weights.arch)
    wrong = tuple(rep(t, how="element") if t.tensor == "W_O" else t for t in spec.factor("vo-gauge").tags)
    gen = torch.Generator().manual_seed(3)
    els = [sample_element(spec, "vo-gauge", gen, weights.dtype)[0] for _ in range(weights.n_layers)]
    ref = encode(weights, n=5).layers[-1].out
    moved = encode(transform_weights(weights, spec, "vo-gauge", els, tags=wrong), n=5).layers[-1].out
    assert float((moved - ref).abs().max() / ref.abs().max()) > 1e-2


def test_torch_forward_matches_the_reference_encoder(weights):
    """Independent route: the group's two-backend forward equals symtrans.numeric.encode on real weights."""
    tr = encode(weights, n=7, seed=2)
    params = {"layers": [layer_blocks(weights.layer(i)) for i in range(weights.n_layers)], "X": tr.embeddings}
    out = model_forward(params, rep(Features.of(weights.arch), embedding_norm=False), TorchBackend())
    assert float((out - tr.layers[-1].out).abs().max()) < 1e-12


def test_sampled_condition_numbers_are_reported():
    gen = torch.Generator().manual_seed(0)
    Ms, invs, kappa = sample_gl(5, gen, torch.float64, count=3)
    assert max(float(torch.linalg.cond(M)) for M in Ms) == pytest.approx(kappa, rel=1e-9)
    assert kappa <= 4.0


SHAPES = {
    "d_k != d_model/H": tiny_arch("bert-base", d_model=12, H=2, d_k=4, d_v=3, d_ff=7, n=5, L=2),
    "GQA": tiny_arch(rep(get_arch("bert-base"), H_kv=6), d_model=8, H=4, H_kv=2, d_k=3, d_v=2, d_ff=6, n=5, L=2),
    "RMSNorm rotary gated causal": tiny_arch(rep(get_arch("bert-base"), norm="rmsnorm", ffn="gated",
                                                  activation="silu", positional="rotary", attention="causal",
                                                  bias=False), d_model=8, H=2, d_k=4, d_v=4, d_ff=6, n=5, L=2),
    "ReLU no positions": tiny_arch(rep(get_arch("bert-base"), activation="relu", positional="none"),
                                   d_model=6, H=3, d_k=2, d_v=5, d_ff=9, n=4, L=3),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_random_architectures(name):
    arch = SHAPES[name]
    spec = GroupSpec.from_arch(arch)
    for dtype in ("float64", "float32"):
        checks = verify_random(arch, dtype=dtype, seed=1)
        present = {f.name for f in spec.factors if (f.tags or f.scope == "data")
                   and not (f.scope == "model" and f.kind == "continuous")}
        assert {c.factor for c in checks} == present
        for c in checks:
            assert c.verdict is Verdict.SUPPORTED, (name, c.line())


def test_random_architecture_catches_a_wrong_tag():
    arch = SHAPES["GQA"]
    spec = GroupSpec.from_arch(arch)
    wrong = tuple(rep(t, how="inverse") if t.tensor == "W_K" else t for t in spec.factor("qk-gauge").tags)
    [c] = verify_random(arch, factors=["qk-gauge"], tags={"qk-gauge": wrong})
    assert c.verdict == "fails"
