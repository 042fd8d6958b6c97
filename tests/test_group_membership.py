"""Elements outside G are not symmetries, whatever they reproduce: ``verify`` and ``relate`` bring every element
onto G (``symtrans.group.elements.in_group``) before they compare g . A with B.

Each forged element below maps A exactly onto a B whose function differs from A's (a scaled SiLU/GELU unit, an
inverse that is not one, a rotation that is not orthogonal or ignores the rotary planes, a query head moved to
another key/value head, an unpaired QK-norm gain trade under rotary positions), so the old check, which only
compared g . A with B, called each file valid. The positive controls are elements of G that look similar (a
negative scaling of a gated unit, a sign flip of one RMSNorm coordinate).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from symtrans.group.elements import in_group, onto_rotary_commutant
from symtrans.group.numeric import MonomialMatrix, model_blocks, sample_element, weights_from_blocks
from symtrans.group.relate import apply_steps, check_relation, random_element, relate, write_relation
from symtrans.group.spec import GroupSpec
from symtrans.numeric.fixtures import DECODER_FAMILIES, tiny_decoder
from symtrans.numeric.save import save_weights
from symtrans.numeric.weights import load_model


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tiny checkpoints on disk (the relation file names models by path), loaded back."""
    out = {}
    for fam in ("llama", "gpt2", "qwen3"):
        path = tmp_path_factory.mktemp(fam)
        save_weights(tiny_decoder(fam), path)
        out[fam] = (path, load_model(path))
    return out


def _forged_file(pa: Path, a: Any, steps: list[dict[str, Any]], tmp: Path) -> tuple[Path, Any]:
    """B = g . A for the steps (whatever they are), written; a relation file claiming B = g . A."""
    spec = GroupSpec.from_arch(a.arch)
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps))
    save_weights(b, tmp / "b")
    claim = copy.copy(relate(str(pa), str(pa)))  # a genuine file's metadata, the forged steps
    claim.steps, claim.b = steps, relate(str(tmp / "b"), str(tmp / "b")).b
    return write_relation(claim, tmp / "g.json"), b


def _verdict(path: Path) -> tuple[bool, str]:
    return check_relation(json.loads(path.read_text()), path)


def _per_layer(a: Any, make: Any) -> list[Any]:
    return [make(l) for l in range(a.n_layers)]


def _forgeries(a: Any) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """Name -> (steps outside G that act on A, the words verify must give)."""
    spec = GroupSpec.from_arch(a.arch)
    F, H, kv, dk, d = (int(x) for x in (a.arch.d_ff, a.arch.H, a.arch.H_kv, a.arch.d_k, a.arch.d_model))
    gen = torch.Generator().manual_seed(3)
    out = {}
    twice = torch.ones(F, dtype=torch.float64)
    twice[0] = 2.0
    out["a unit permutation that scales"] = (
        [{"factor": "S_dff", "element": _per_layer(a, lambda l: {"P": MonomialMatrix(list(range(F)), twice.clone())})}],
        "the group needs a permutation")
    vo = _per_layer(a, lambda l: sample_element(spec, "vo-gauge", gen, torch.float64)[0])
    for e in vo:
        e["g"] = [torch.eye(dk, dtype=torch.float64) + 0.3 * torch.randn(dk, dk, generator=gen, dtype=torch.float64)
                  for _ in range(kv)]
        e["g_inv"] = [torch.eye(dk, dtype=torch.float64) for _ in range(kv)]
    out["a value gauge whose inverse is not its inverse"] = ([{"factor": "vo-gauge", "element": vo}], "differs from B")
    if kv < H:
        pi = list(range(H))
        pi[0], pi[-1] = pi[-1], pi[0]
        out["a query head moved to another key/value head"] = (
            [{"factor": "S_H", "element": _per_layer(a, lambda l: {"pi": list(pi), "kappa": list(range(kv))})}],
            "leaves the key/value head it reads")
    if spec.factor("ffn-scaling").status == "broken":
        out["a scaled GELU unit"] = ([{"factor": "ffn-scaling", "element": _per_layer(
            a, lambda l: {"D": MonomialMatrix(list(range(F)), twice.clone())})}], "broken in this architecture")
    if spec.arch.norm != "rmsnorm":
        signs = torch.ones(d, dtype=torch.float64)
        signs[0] = -1.0
        out["one residual coordinate's sign flipped under LayerNorm"] = (
            [{"factor": "residual-permutation", "element": {"Q": MonomialMatrix(list(range(d)), signs)}}],
            "all +1 or all -1")
    if spec.factor("residual-rotation").status != "broken":
        R = torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(d, d, generator=gen, dtype=torch.float64)
        out["a residual map that is not orthogonal"] = (
            [{"factor": "residual-rotation", "element": {"Q": R}}], "differs from B")
    if spec.arch.positional == "rotary" and spec.factor("qk-gauge").status != "broken":
        out["a query/key gauge that ignores the rotary planes"] = ([{"factor": "qk-gauge", "element": _per_layer(
            a, lambda l: {"g": [torch.eye(dk, dtype=torch.float64)
                                + 0.3 * torch.randn(dk, dk, generator=gen, dtype=torch.float64)
                                for _ in range(kv)]})}], "differs from B")
    if any(f.name == "qk-norm-gain-trade" for f in spec.factors):
        trade = _per_layer(a, lambda l: sample_element(spec, "qk-norm-gain-trade", gen, torch.float64,
                                                        rotary_pairs="halves")[0])
        for e in trade:
            e["D"][0, 0] *= 1.7  # coordinate 0 no longer equal to its rotated partner d_k / 2
        out["a QK-norm gain trade unequal on a rotated pair"] = (
            [{"factor": "qk-norm-gain-trade", "element": trade}], "differs from B")
    return out


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen3"])
def test_verify_refuses_every_element_outside_g_that_reproduces_b(disk, family, tmp_path):
    pa, a = disk[family]
    cases = _forgeries(a)
    assert len(cases) >= 3
    for i, (name, (steps, words)) in enumerate(cases.items()):
        path, _ = _forged_file(pa, a, steps, tmp_path / f"c{i}")
        ok, line = _verdict(path)
        assert not ok and words in line, (name, line)
        rel = relate(str(pa), str(tmp_path / f"c{i}" / "b"))  # relate never finds B in A's orbit either
        assert not rel.related, (name, rel.summary())


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_elements_of_g_that_look_like_forgeries_stay_valid(disk, family, tmp_path):
    """The false cases' controls: a negative scaling of a gated unit and one RMSNorm coordinate's sign flip are
    symmetries (the up-projection is linear; RMSNorm commutes with signed permutations)."""
    pa, a = disk[family]
    F, d = int(a.arch.d_ff), int(a.arch.d_model)
    neg = torch.ones(F, dtype=torch.float64)
    neg[0] = -2.0
    flip = torch.ones(d, dtype=torch.float64)
    flip[0] = -1.0
    for i, steps in enumerate([
            [{"factor": "ffn-scaling", "element": _per_layer(a, lambda l: {"D": MonomialMatrix(list(range(F)),
                                                                                                neg.clone())})}],
            [{"factor": "residual-permutation", "element": {"Q": MonomialMatrix(list(range(d)), flip)}}]]):
        path, _ = _forged_file(pa, a, steps, tmp_path / f"c{i}")
        ok, line = _verdict(path)
        assert ok, line
        assert relate(str(pa), str(tmp_path / f"c{i}" / "b")).related


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_a_random_element_of_g_is_its_own_projection(family):
    """in_group moves an element of G by rounding only, on every family (so relate's element needs no second
    check), and relate's element, brought onto G, is the one it returns."""
    w = tiny_decoder(family)
    spec = GroupSpec.from_arch(w.arch)
    steps = random_element(spec, w.n_layers, 5)
    kept = in_group(spec, steps)

    def close(x: Any, y: Any) -> bool:
        if isinstance(y, dict):
            return all(close(x[k], v) for k, v in y.items())
        if isinstance(y, list):
            return len(x) == len(y) and all(close(p, q) for p, q in zip(x, y))
        if isinstance(y, MonomialMatrix):
            return bool((x.perm == y.perm).all()) and close(x.vals, y.vals)
        if hasattr(y, "shape"):
            return bool(torch.allclose(x.to(torch.float64), y, rtol=0, atol=1e-12 * float(y.abs().max())))
        return x == y

    assert all(close(s["element"], k["element"]) for s, k in zip(steps, kept))


def test_the_rotary_commutant_projection_keeps_the_commutant_and_moves_the_rest():
    spec = GroupSpec.from_arch(tiny_decoder("llama").arch)
    k = int(spec.arch.d_k)
    good = sample_element(spec, "qk-gauge", torch.Generator().manual_seed(0), torch.float64,
                          rotary_pairs="halves")[0]["g"][0]
    assert torch.equal(onto_rotary_commutant(good, k, "halves"), good)
    bad = good + 0.1 * torch.randn(k, k, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    P = onto_rotary_commutant(bad, k, "halves")
    theta = torch.arange(k // 2, dtype=torch.float64) + 1.0  # any distinct frequencies: the commutant is theirs
    R = torch.zeros(k, k, dtype=torch.float64)
    i, j = torch.arange(k // 2), torch.arange(k // 2) + k // 2
    R[i, i], R[j, j], R[i, j], R[j, i] = theta.cos(), theta.cos(), theta.sin(), -theta.sin()
    assert torch.allclose(P @ R, R @ P, atol=1e-12) and not torch.allclose(bad @ R, R @ bad, atol=1e-3)


@pytest.mark.parametrize("family", [f for f in DECODER_FAMILIES if f != "gpt_neox"])  # NeoX: no writer
def test_canonical_form_keeps_the_logits_transformers_computes(family, tmp_path):
    """transformers as the reference: the canonical form (written in float64) gives the source's logits (tied head),
    on every decoder family the writer handles. On Gemma 3, Qwen3 and OLMo 2 the QK-norm gain trade was fixed
    coordinate by coordinate, ignoring that the rotations act after the gains: the logits moved by 3-7% (relative
    Frobenius) and relate, fitting the same way, called the pair related. (transformers' RMSNorm computes in float32
    whatever the dtype, so a residual permutation alone moves its logits by ~5e-8.)"""
    import transformers as T

    from symtrans.group.canonical import canonical
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "src", family, seed=3, tie_word_embeddings=True)
    w = load_model(tmp_path / "src")
    c = canonical(w)
    save_weights(c.weights, tmp_path / "c", dtype="float64")
    ids = torch.randint(0, 100, (1, 12), generator=torch.Generator().manual_seed(0))
    logits = []
    for p in (tmp_path / "src", tmp_path / "c"):
        m = T.AutoModelForCausalLM.from_pretrained(str(p), dtype=torch.float64, attn_implementation="eager").eval()
        with torch.no_grad():
            logits.append(m(ids).logits)
    change = float((logits[0] - logits[1]).norm() / logits[0].norm())
    assert change < 1e-5, change  # the source's float32 storage: ~1e-7 here; the old form moved them 3e-2 and more
    assert relate(w, c.weights).related


def test_canonical_refuses_a_gauge_fixing_element_outside_g(monkeypatch):
    """The false case of canonical's own gate: with the old gauge of the gain trade (each coordinate fixed on its
    own, as if no rotation acted after the gains) the element leaves G, and canonical says so instead of
    returning another function under the name of A's form."""
    import symtrans.group.canonical as C
    from symtrans.errors import SymtransError

    w = tiny_decoder("qwen3")
    assert "in G" in C.canonical(w).phases  # the gate ran on the true gauge, and passed
    monkeypatch.setattr(C, "equal_pairs", lambda spec, factor, rotary_pairs="halves": None)
    with pytest.raises(SymtransError, match="fixes qk-norm-gain-trade is not in G"):
        C.canonical(w)
