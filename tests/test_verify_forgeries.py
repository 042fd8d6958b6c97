"""Elements of G that ``verify`` must not let hide a B off A's orbit.

Each forgery below is an element that IS in G, written beside a B that is NOT g . A, which the old check (g . A
against B, one relative Frobenius residual per tensor, one condition number per layer) called valid:

- a per-head gauge that shrinks some heads by 1e-8 beside the rest: their queries then sit below the rounding of
  the other heads', and a B with them set to 0 (uniform attention in every such head) passed;
- a scalar value gauge of 1e-8 on every head: a B whose value weights are random passed, because a failing residual
  was re-read relative to A's (1e8 times larger) tensor (now refused from both sides);
- a gauge of condition number 99 on one head widened the tolerance of every tensor of its layer, W_in among them,
  which no step moved; at bfloat16 the same number made the tolerance 1.56, so any tensor passed;
- a value gauge diag(1e-9, 1, ..) on one head: one W_O row of B 1e9 times the rest, every other head's rows free.

verify now also pulls B back to A's scale (``g^-1 . B`` against A), re-reads a failing residual only at the scale
of what a translation cancels (A moved by the element's linear steps), gives each tensor the condition number of
the steps that act on it, counts no permutation among its fitted factors and caps the condition number where
``kappa u`` passes 1/100 (:func:`symtrans.group.relate.kappa_limit`). Each forgery has a control: the same element
with B = g . A, valid.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from symtrans.group.numeric import MonomialMatrix, model_blocks, weights_from_blocks
from symtrans.group.relate import (Relation, _describe, _precision, apply_steps, check_relation, relate,
                                   relation_tolerance, tensor_residuals, write_relation)
from symtrans.group.spec import GroupSpec
from symtrans.numeric.fixtures import tiny_decoder
from symtrans.numeric.save import save_weights
from symtrans.numeric.weights import load_model


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A tiny GPT-2 on disk (a relation file names its models by path), loaded back."""
    path = tmp_path_factory.mktemp("gpt2")
    save_weights(tiny_decoder("gpt2"), path)
    return path, load_model(path)


def _claim(pa: Path, a: Any, steps: list[dict[str, Any]], blocks: dict[str, Any], tmp: Path,
           dtype: Any = None) -> Path:
    """B written from ``blocks`` (in ``dtype`` where given), and a relation file claiming B = g . A for ``steps``."""
    save_weights(weights_from_blocks(a, blocks), tmp / "b")
    if dtype is not None:  # B stored in a coarser dtype (the checkpoint says so; the loader reads it)
        from safetensors.torch import load_file, save_file

        f = tmp / "b" / "model.safetensors"
        save_file({k: v.to(dtype) for k, v in load_file(str(f)).items()}, str(f))
    claim = Relation(True, steps, [], [], None, _describe(a), _describe(load_model(tmp / "b")))  # what a file names
    return write_relation(claim, tmp / "g.json")


def _verdict(path: Path) -> tuple[bool, str]:
    return check_relation(json.loads(path.read_text()), path)


def _control_is_valid(tmp: Path, a: Any, claim: list[dict[str, Any]], blocks: dict[str, Any]) -> None:
    """The control of a forgery: B = g . A written with its claim under ``tmp/control``, which verify accepts (and
    ``tmp/forged`` made ready for the forged B)."""
    (tmp / "control").mkdir()
    (tmp / "forged").mkdir()
    ok, why = _verdict(_claim(tmp / "a", a, claim, apply_steps(GroupSpec.from_arch(a.arch), blocks, claim), tmp / "control"))
    assert ok, why


def _gauge(a: Any, head: Any) -> list[dict[str, Any]]:
    """One qk-gauge element per layer: ``head(l, h)`` the matrix of head h in layer l."""
    return [{"g": [head(l, h) for h in range(a.arch.H_kv)]} for l in range(a.n_layers)]


def _forward_ok(a: Any, steps: list[dict[str, Any]], blocks: dict[str, Any]) -> bool:
    """What the old check saw: g . A against B alone, every tensor within its tolerance."""
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    return all(r["ok"] for r in tensor_residuals(apply_steps(spec, A, steps), blocks, _precision(a), steps, spec,
                                                 source=A))


def test_a_gauge_that_shrinks_some_heads_cannot_hide_them(gpt2, tmp_path):
    pa, a = gpt2
    spec = GroupSpec.from_arch(a.arch)
    eye = torch.eye(a.d_model // a.arch.H, dtype=torch.float64)
    steps = [{"factor": "qk-gauge", "element": _gauge(a, lambda l, h: eye if h == 0 else 1e-8 * eye)}]
    forged = apply_steps(spec, model_blocks(a), steps)
    for lp in forged["layers"]:  # heads 1.. attend uniformly: their queries gone
        lp["W_Q"] = [lp["W_Q"][0]] + [0 * q for q in lp["W_Q"][1:]]
        lp["b_Q"] = [lp["b_Q"][0]] + [0 * q for q in lp["b_Q"][1:]]
    assert _forward_ok(a, steps, forged)  # the blind spot: g . A against B alone passes
    ok, why = _verdict(_claim(pa, a, steps, forged, tmp_path / "forged"))
    assert not ok and why.startswith("g^-1 . B differs from A at W_Q"), why
    ok, why = _verdict(_claim(pa, a, steps, apply_steps(spec, model_blocks(a), steps), tmp_path / "genuine"))
    assert ok, why


def test_a_scalar_gauge_cannot_hide_a_replaced_value_path(gpt2, tmp_path):
    pa, a = gpt2
    spec = GroupSpec.from_arch(a.arch)
    eye = torch.eye(a.d_model // a.arch.H, dtype=torch.float64)
    steps = [{"factor": "vo-gauge", "element": _gauge(a, lambda l, h: 1e-8 * eye)}]
    forged = apply_steps(spec, model_blocks(a), steps)
    gen = torch.Generator().manual_seed(0)
    for lp, la in zip(forged["layers"], model_blocks(a)["layers"]):  # random values at 1e-7 of A's
        lp["W_V"] = [1e-7 * v.norm() * (r := torch.randn(v.shape, generator=gen, dtype=v.dtype)) / r.norm()
                     for v in la["W_V"]]
    ok, why = _verdict(_claim(pa, a, steps, forged, tmp_path / "forged"))
    assert not ok and "differs from" in why and "at W_V" in why, why
    ok, why = _verdict(_claim(pa, a, steps, apply_steps(spec, model_blocks(a), steps), tmp_path / "genuine"))
    assert ok, why


def test_one_inflated_coordinate_cannot_swamp_a_tensor_from_either_side(gpt2, tmp_path):
    """A value gauge diag(1e-9, 1, ..) on one head multiplies that head's first W_O row by 1e9: in B that row is
    nearly all of |W_O|, so g . A against B cannot see the other heads (a monomial: condition number 1). Pulled
    back, their rows are as large as in A, and B's zeroed rows were refused, then re-read relative to B's
    inflated tensor (the scale of a cancellation) and passed. A gauge cancels nothing: the re-read now uses A
    moved by the element's linear steps alone, and B is refused (found by a second adversarial probe, which did
    the same with norm-gain and unit scalings of spread 1e10 on every decoder family)."""
    pa, a = gpt2
    spec = GroupSpec.from_arch(a.arch)
    d_k, H = a.d_model // a.arch.H, a.arch.H
    eye = torch.eye(d_k, dtype=torch.float64)
    N = eye.clone()
    N[0, 0] = 1e-9
    steps = [{"factor": "vo-gauge", "element": [{"g": [N if (l, h) == (0, 0) else eye for h in range(H)]}
                                                for l in range(a.n_layers)]}]
    forged = apply_steps(spec, model_blocks(a), steps)
    forged["layers"][0]["W_O"] = [forged["layers"][0]["W_O"][0]] + [0 * w for w in forged["layers"][0]["W_O"][1:]]
    assert _forward_ok(a, steps, forged)
    ok, why = _verdict(_claim(pa, a, steps, forged, tmp_path / "forged"))
    assert not ok and why.startswith("g^-1 . B differs from A at W_O (layer 0)"), why
    ok, why = _verdict(_claim(pa, a, steps, apply_steps(spec, model_blocks(a), steps), tmp_path / "genuine"))
    assert ok, why


def _conditioned(k: int, c: float, seed: int) -> Any:
    """A k x k matrix of condition number c: U diag(1 .. 1/c) V^T."""
    gen = torch.Generator().manual_seed(seed)
    U = torch.linalg.qr(torch.randn(k, k, generator=gen, dtype=torch.float64))[0]
    V = torch.linalg.qr(torch.randn(k, k, generator=gen, dtype=torch.float64))[0]
    return U @ torch.diag(torch.logspace(0, -float(torch.log10(torch.tensor(c))), k, dtype=torch.float64)) @ V.T


def test_a_condition_number_widens_only_the_tolerance_of_what_its_step_moves(gpt2, tmp_path):
    pa, a = gpt2
    spec = GroupSpec.from_arch(a.arch)
    d_k = a.d_model // a.arch.H
    eye = torch.eye(d_k, dtype=torch.float64)
    steps = [{"factor": "qk-gauge", "element": _gauge(a, lambda l, h: _conditioned(d_k, 99.0, 0)
                                                       if (l, h) == (0, 0) else eye)}]
    forged = apply_steps(spec, model_blocks(a), steps)
    w = forged["layers"][0]["W_in"]
    noise = torch.randn(w.shape, generator=torch.Generator().manual_seed(1), dtype=w.dtype)
    size = 0.5 * relation_tolerance("float32", 99.0)[0]  # within the old, layer-wide tolerance; 25 x the new one
    forged["layers"][0]["W_in"] = w + size * w.norm() * noise / noise.norm()
    assert size > 20 * relation_tolerance("float32")[0]
    ok, why = _verdict(_claim(pa, a, steps, forged, tmp_path / "forged"))
    assert not ok and why.startswith("g . A differs from B at W_in (layer 0)"), why
    ok, why = _verdict(_claim(pa, a, steps, apply_steps(spec, model_blocks(a), steps), tmp_path / "genuine"))
    assert ok, why
    # nor does a tensor inherit the gauge's number through steps that fit nothing (translations by 0, an identity
    # residual permutation listed after the gauge: relate's solve fits the residual map first)
    from symtrans.group.action import linear_factor
    from symtrans.group.relate import random_element

    def zero(x: Any) -> Any:
        return [zero(v) for v in x] if isinstance(x, list) else (0 * x if hasattr(x, "shape") else x)

    padded = list(steps)
    for st in random_element(spec, a.n_layers, 0):
        if not linear_factor(spec, st["factor"]):
            el = st["element"]
            padded.append({"factor": st["factor"], "element": [{k: zero(v) for k, v in e.items()} for e in el]
                           if isinstance(el, list) else {k: zero(v) for k, v in el.items()}})
    d = a.d_model
    padded.append({"factor": "residual-permutation",
                   "element": {"Q": MonomialMatrix(list(range(d)), torch.ones(d, dtype=torch.float64))}})
    assert len(padded) > 5
    forged = apply_steps(spec, model_blocks(a), padded)  # now W_out, which those translations would reach
    w = forged["layers"][0]["W_out"]
    forged["layers"][0]["W_out"] = w + size * w.norm() * noise.T / noise.norm()
    ok, why = _verdict(_claim(pa, a, padded, forged, tmp_path / "padded"))
    assert not ok and why.startswith("g . A differs from B at W_out (layer 0)"), why


def test_a_bfloat16_tolerance_stays_a_statement_about_rounding(gpt2, tmp_path):
    """At bfloat16 a condition number of 99 and five factors made the tolerance 4 u (1 + 99) sqrt(5) = 3.5 (the
    identity permutations counted as factors): 40% of every tensor passed. Now the condition number is capped at
    :func:`kappa_limit` and permutations do not count: the tolerance stays below 10%, the 40% B is refused."""
    from symtrans.group.relate import kappa_limit

    pa, a = gpt2
    spec = GroupSpec.from_arch(a.arch)
    d_k, H, L, d_ff = a.d_model // a.arch.H, a.arch.H, a.n_layers, a.tensors["W_in"].shape[-1]
    assert relation_tolerance("bfloat16", 99.0, 1)[0] < 0.1 and kappa_limit("bfloat16") < 3
    identity = [{"factor": "S_H", "element": [{"pi": list(range(H)), "kappa": list(range(H))}] * L},
                {"factor": "S_dff", "element": [{"P": MonomialMatrix(list(range(d_ff)),
                                                                     torch.ones(d_ff, dtype=torch.float64))}] * L}]

    def gauged(c: float) -> list[dict[str, Any]]:  # head 0 of every layer: condition number c
        return [{"factor": "qk-gauge", "element": _gauge(a, lambda l, h: _conditioned(d_k, c, l) if h == 0
                                                          else torch.eye(d_k, dtype=torch.float64))}] + identity

    steps = gauged(99.0)
    moved = apply_steps(spec, model_blocks(a), steps)
    records = tensor_residuals(moved, moved, _precision(a), steps, spec)
    assert {r["factors"] for r in records if r["tensor"] == "W_Q"} == {1}  # the permutations are not counted
    forged = copy.deepcopy(moved)
    gen = torch.Generator().manual_seed(2)
    for lp in forged["layers"]:
        for name, v in list(lp.items()):
            if isinstance(v, list):
                lp[name] = [x + 0.4 * x.norm() * (n := torch.randn(x.shape, generator=gen, dtype=x.dtype)) / n.norm()
                            for x in v]
    ok, why = _verdict(_claim(pa, a, steps, forged, tmp_path / "forged", torch.bfloat16))
    assert not ok and "bfloat16" in why, why
    # B = g . A in bfloat16: within the limit the condition number widens the tolerance (valid); past it the
    # element buys no slack, and its pulled-back rounding (up to 99 u) is refused, the number named
    ok, why = _verdict(_claim(pa, a, gauged(2.5), apply_steps(spec, model_blocks(a), gauged(2.5)),
                              tmp_path / "genuine", torch.bfloat16))
    assert ok, why
    ok, why = _verdict(_claim(pa, a, steps, moved, tmp_path / "unresolved", torch.bfloat16))
    assert ok or "the element's condition number 99 exceeds 2.56" in why, why


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "gpt2", "llama", "qwen3", "gemma3", "phi3",
                                    "olmo2", "gpt_neox"])
def test_the_inverse_steps_undo_a_random_element_of_g_on_every_family(family):
    """``inverse_steps`` (each linear factor's components inverted, each translation's negated, in reverse order)
    brings g . A back to A to float64 rounding on every family, every factor of G moved; the steps reversed but not
    inverted do not (the check can fail)."""
    from symtrans.group.action import inverse_steps
    from symtrans.group.relate import _iter_tensors, _rel_any, random_element
    from symtrans.numeric.fixtures import random_model

    a = load_model(random_model(family)) if family in ("bert", "roberta", "distilbert") else tiny_decoder(family)
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    steps = random_element(spec, a.n_layers, 3)
    assert len({s["factor"] for s in steps}) >= 6
    ref = {(n, l): v for n, l, v in _iter_tensors(A, blocks=True)}

    def worst(back: dict[str, Any]) -> float:
        return max(_rel_any(v, ref[(n, l)]) for n, l, v in _iter_tensors(back, blocks=True))

    moved = apply_steps(spec, A, steps)
    assert worst(apply_steps(spec, moved, inverse_steps(spec, steps))) < 1e-12
    assert worst(apply_steps(spec, moved, list(reversed(steps)))) > 1e-3


@pytest.mark.parametrize("case", ["ln1-scaling hides W_V", "final-norm-scaling hides lm_head"])
def test_relate_refuses_what_a_spread_element_hid_from_b_side(case, tmp_path):
    """relate itself (a third probe): B = g . A for a diagonal norm scaling with one channel at 1e-9 (condition
    number 1: each entry keeps its rounding), then B's W_V in layer 0, or its untied head, changed in every row
    but that channel. Those rows sit 1e-9 below the scaled one, so g . A against B, and the per-head keys the
    scaled row dominates, could not see them: relate answered related with the function 29% (the logits 97%) off.
    An element whose spread passes the limit is now also checked from A's side (:func:`element_spread`), where
    those rows are as large as in A; where only linear steps move the tensor, the difference is refused there.
    (W_V is now refused by the vo-gauge's solve already: its pivot's rows are weighted each by its own size.)
    The control: the same element with B = g . A is related."""
    from symtrans.numeric.fixtures import random_checkpoint

    head = {} if case.startswith("ln1") else {"head": True, "tie_word_embeddings": False}  # an untied head
    random_checkpoint(tmp_path / "a", "llama", **head)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    eye = torch.eye(a.d_model, dtype=torch.float64)
    D = eye.clone()
    D[0, 0] = 1e-9
    if case.startswith("ln1"):
        steps = [{"factor": "ln1-scaling", "element": [{"D": D if l == 0 else eye} for l in range(a.n_layers)]}]
    else:
        steps = [{"factor": "final-norm-scaling", "element": {"D": D}}]
    genuine = apply_steps(spec, model_blocks(a), steps)
    forged = copy.deepcopy(genuine)
    gen = torch.Generator().manual_seed(0)
    rows = forged["layers"][0]["W_V"] if case.startswith("ln1") else [forged["lm_head"]]
    for h in rows:  # every row but the scaled channel's, moved by 100% of its entries
        P = h.abs() * torch.randn(h.shape, generator=gen, dtype=h.dtype)
        P[0] = 0
        h.add_(P)
    save_weights(weights_from_blocks(a, forged), tmp_path / "forged")
    rel = relate(a, load_model(tmp_path / "forged"))
    assert not rel.related and rel.stop.tensor == ("W_V" if case.startswith("ln1") else "lm_head"), rel.summary()
    # from A's side, or (W_V: the gauge's pivot weighted row by row, :func:`_row_weights`) by the solve itself
    assert "B pulled back through the element differs from A there" in rel.stop.detail \
        or "element maps A's W_V to B's" in rel.stop.detail, rel.stop.detail
    save_weights(weights_from_blocks(a, genuine), tmp_path / "genuine")
    assert relate(a, load_model(tmp_path / "genuine")).related


@pytest.mark.parametrize("case", ["minilm word row", "minilm word rows, most of them", "llama head column",
                                  "gpt2 head row", "gpt2 b_in entry", "gpt2 b_O entry",
                                  "gpt2 b_in entry, the rest zeroed"])
def test_one_slice_far_larger_than_the_rest_cannot_vouch_for_them(case, tmp_path):
    """A pathological A (one word row at 1e10 times the rest, or most of them: 15522 of 30522, the median then one
    of them, which a first version took for a small slice's scale; or one column or row of an untied head at 1e9)
    and a B that keeps those slices and rewrites the others (the word rows swapped in pairs; the head's entries
    moved by about half, no column mean left for a translation to absorb). One relative Frobenius residual per
    tensor is dominated by the large slices, so relate answered related (with the embedding translations only) and
    verify accepted a file claiming B = A. Each slice along an axis the element moves slice by slice is now
    measured against its own scale (:func:`symtrans.group.relate.worst_slice`): relate cannot decide, verify
    refuses the file. The same for a vector: one bias entry of layer 0 at 1e9 and the rest of that bias moved by
    about half (related until 2026-12-06), or set to 0 (a probe of the first version, which read the outlier from
    B's entries alone: B's only non-zero entry was the outlier, so none was found); its entries are measured as one
    root mean square, each relative to its own scale (:func:`symtrans.group.relate.worst_entries`). Controls: B = A
    itself, and B = g . A for a random element, stay related."""
    from symtrans.errors import SymtransError
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    family = case.split()[0]
    if family == "minilm":  # the bundled model: row 3 is [unused2], which no text reads
        a = load_model("default")
    else:
        random_checkpoint(tmp_path / "a0", family, head=True, tie_word_embeddings=False)
        a = load_model(tmp_path / "a0")
    name = "word" if family == "minilm" else case.split()[1] if "entry" in case else "lm_head"
    big = (slice(15000, None),) if case.endswith("most of them") else (3,) if case.endswith("row") else \
        (0, 0) if "entry" in case else (slice(None), 3)
    a.tensors[name][big] *= 1e10 if family == "minilm" else 1e9
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    b = a.copy()
    T = b.tensors[name]
    if family == "minilm":  # word rows from 1000 on swapped in pairs: every row moved, every (weighted) mean kept
        end = 15000 if case.endswith("most of them") else 30000
        T[1000:end] = T[1000:end].reshape(-1, 2, T.shape[1]).flip(1).reshape(-1, T.shape[1]).clone()
    else:  # about half of each entry, no column mean left for a translation to absorb
        noise = T.abs() * torch.randn(T.shape, generator=torch.Generator().manual_seed(0), dtype=T.dtype)
        noise[big] = 0
        if "entry" in case:  # layer 0's bias alone (any other layer's would fail as a whole)
            noise[1:] = 0
            if case.endswith("zeroed"):  # B zero but for the outlier: B's own scales hold no typical entry
                noise[0] = -2 * T[0]
                noise[big] = 0
        else:
            noise -= noise.sum(0, keepdim=True) / (noise.shape[0] - 1)
            noise[big] = 0
        T.add_(0.5 * noise)
    save_weights(b, tmp_path / "forged")
    b = load_model(tmp_path / "forged")
    forged = model_blocks(b)
    changed = (b.tensors[name] - a.tensors[name]).abs() > 0.1 * a.tensors[name].abs()
    assert changed.float().mean() > 0.3  # most entries of B's table moved by more than 10%
    with pytest.raises(SymtransError, match=r"reproduces every tensor of B as a whole, but not .*(slice|entries)"):
        relate(a, b)
    ok, why = _verdict(_claim(tmp_path / "a", a, [], forged, tmp_path / "file"))
    assert not ok and "as a whole, but not" in why, why
    assert relate(a, a).related
    # a genuine element of every factor moves the pathological A onto B = g . A: related both ways (the residual
    # map's match and the embedding translation read past the large row: their own tests are in test_group_relate)
    save_weights(weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0))),
                 tmp_path / "genuine")
    g = load_model(tmp_path / "genuine")
    assert relate(a, g).related and relate(g, a).related


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_an_outlier_the_element_cancels_still_counts_among_the_entries(family, tmp_path):
    """A helper's probe of the vector check: A's layer-0 ``b_O`` entry 0 at 1e9, cancelled inside A by head 0's value
    bias (``b_V`` -1.6e10 through a ``W_O`` row of 0.0625 e_0, exact in float32, so A computes as usual). The value
    bias shift moves both to 0, and B then rewrites every other entry of ``b_O`` (+0.5: the last hidden state 39% off
    on GPT-2, 8.6% on BERT). g . A and B hold no outlier; only A moved by the linear steps does, and the tensor's
    residual, failing against B, passed when read against that scale. The vector check read its outliers from B and
    g . A alone, found none, and relate answered related; verify accepted the file. The entries are now read at A's
    scale wherever the tensor's residual was. Control: the same element with nothing rewritten is related."""
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", family)
    a = load_model(tmp_path / "a0")
    T = a.tensors
    T["W_O"][0, 0, 0, :] = 0.0
    T["W_O"][0, 0, 0, 0] = 0.0625
    T["b_V"][0, 0, 0] = -1.6e10
    T["b_O"][0, 0] = 1e9
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    genuine = a.copy()
    genuine.tensors["b_V"][0, 0, 0] = 0.0
    genuine.tensors["b_O"][0, 0] = 0.0
    save_weights(genuine, tmp_path / "g")
    rel = relate(a, load_model(tmp_path / "g"))
    assert rel.related, rel.summary()
    forged = genuine.copy()
    forged.tensors["b_O"][0, 1:] += 0.5
    save_weights(forged, tmp_path / "f")
    with pytest.raises(SymtransError, match=r"as a whole, but not b_O \(layer 0\), its entries"):
        relate(a, load_model(tmp_path / "f"))
    ok, why = _verdict(_claim(tmp_path / "a", a, rel.steps, model_blocks(load_model(tmp_path / "f")), tmp_path))
    assert not ok and "as a whole, but not b_O" in why, why


@pytest.mark.parametrize("family,name", [("gpt2", "b_Q"), ("bert", "b_V")])
def test_a_per_head_bias_entry_covered_by_dead_entries_in_its_slices_is_seen(family, name, tmp_path):
    """A third helper probe: A's layer-0 per-head bias holds dead entries ``[h, h]`` at 1e9 for heads 0 and 1 (their
    key column or W_O row zeroed, so nothing reads them and A computes as usual). Entry ``[0, 1]`` lies in head slice
    0, which ``[0, 0]`` dominates, and in column slice 1, which ``[1, 1]`` dominates: each slice passed, and so did
    the tensor. B moved that entry by 100. For ``b_Q`` relate answered related (GPT-2's last hidden state 1.07% off);
    for ``b_V`` relate refuses through the value bias shift, but verify accepted a file claiming B = A (96-108% off).
    A per-head bias whose axes no step mixes is now also measured entry by entry
    (:func:`symtrans.group.relate.worst_entries`). Control: the same A against itself is related."""
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", family)
    a = load_model(tmp_path / "a0")
    T = a.tensors
    for h in (0, 1):
        T[name][0, h, h] = 1e9
        if name == "b_V":
            T["W_O"][0, h, h, :] = 0.0
        else:
            T["W_K"][0, h, :, h] = 0.0
            T["b_K"][0, h, h] = 0.0
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    assert relate(a, a).related
    b = a.copy()
    b.tensors[name][0, 0, 1] += 100.0
    save_weights(b, tmp_path / "b")
    b = load_model(tmp_path / "b")
    if name == "b_Q":
        with pytest.raises(SymtransError, match=r"as a whole, but not b_Q \(layer 0\), its entries"):
            relate(a, b)
    ok, why = _verdict(_claim(tmp_path / "a", a, [], model_blocks(b), tmp_path))
    assert not ok and f"as a whole, but not {name} (layer 0), its entries" in why, why


def _inert_entries(a: Any, name: str, silent: int, i: int, j: int, inert: int) -> None:
    """Two inert entries at 1e9 in layer 0's ``name`` (``W_in``, or head 0 of ``W_Q``) around entry ``[i, j]``: one
    in input channel ``silent`` (its norm's gain 1e-30), one in unit or query column ``inert`` (nothing reads it)."""
    T = a.tensors
    norm = "ln2" if name == "W_in" else "ln1"
    T[f"{norm}_w"][0, silent], T[f"{norm}_b"][0, silent] = 1e-30, 0.0
    if name == "W_in":
        T["W_out"][0, inert, :] = 0.0
        T["W_in"][0, silent, j], T["W_in"][0, i, inert] = 1e9, 1e9
    else:
        T["W_K"][0, 0, :, inert], T["b_K"][0, 0, inert] = 0.0, 0.0
        T["W_Q"][0, 0, silent, j], T["W_Q"][0, 0, i, inert] = 1e9, 1e9


@pytest.mark.parametrize("name", ["W_in", "W_Q"])
def test_a_weight_entry_covered_by_inert_entries_in_every_slice_is_seen(name, tmp_path):
    """A weight matrix's entry hidden between two inert entries at 1e9: one in a channel the norm silences (its
    gain 1e-30: 1e9 times it is 1e-21), one in a unit no ``W_out`` row reads (``W_in``) or a query column whose key
    column is 0 (``W_Q``). A computes as usual. Entry ``[i, j]`` then lies in a row and a column (for ``W_Q``, and a
    head) that each hold a 1e9 entry, and B moved it by 100: GPT-2's last hidden state 5.3% off (``W_in``), 0.96%
    off (``W_Q``). Each slice and the tensor passed, and verify accepted a file claiming B = A. A tensor whose axes
    no step mixes, with a large slice along each (:func:`symtrans.group.relate.slices_can_hide`), is now also
    measured entry by entry. relate itself never answered related (the unit or head keys differ). Control: the
    same file for B = A is valid."""
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2")
    a = load_model(tmp_path / "a0")
    i, j = 5, 1  # the hidden entry
    _inert_entries(a, name, 3, i, j, 7)
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    ok, why = _verdict(_claim(tmp_path / "a", a, [], model_blocks(a), tmp_path))
    assert ok, why
    b = a.copy()
    b.tensors[name][(0, i, j) if name == "W_in" else (0, 0, i, j)] += 100.0
    save_weights(b, tmp_path / "b")
    b = load_model(tmp_path / "b")
    ok, why = _verdict(_claim(tmp_path / "a", a, [], model_blocks(b), tmp_path))
    assert not ok and f"as a whole, but not {name} (layer 0), its entries" in why, why
    assert f"entry {(i, j) if name == 'W_in' else (0, i, j)}" in why, why
    try:  # relate: not related, or (two of A's units within the keys' rounding of one of B's) cannot decide
        assert not relate(a, b).related
    except SymtransError as err:
        assert "cannot decide" in str(err), err


def test_a_part_a_spread_element_shrinks_is_seen_in_its_slice_of_a(tmp_path):
    """verify's second side (g^-1 . B against A) measured whole tensors only. A's layer-0 ``W_Q`` column c of head
    0 at 1e9 in every row (its key column 0, so inert), and a query/key gauge on head 1 that rotates its columns
    and shrinks column c by 1e-8: B set that column of head 1 to 0 (its keys' column 1e8 times A's, as g . A's). B's side sees nothing at 1e-8 of the
    rest of each slice; A's whole ``W_Q`` is the 1e9 column's, so the pulled-back residual passed too, and verify
    accepted the file (head 1's attention pattern in layer 0 moved by 1.3e-3). A's side now measures slices and
    entries as B's does. Control: the same element with B = g . A is valid."""
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2")
    a = load_model(tmp_path / "a0")
    T = a.tensors
    H, dk = T["W_Q"].shape[1], T["W_Q"].shape[-1]
    c = dk - 1
    T["W_K"][0, 0, :, c], T["b_K"][0, 0, c] = 0.0, 0.0
    T["W_Q"][0, 0, :, c] = 1e9
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    eye = torch.eye(dk, dtype=torch.float64)
    shrink = eye.clone()
    shrink[c, c] = 1e-8
    # dense on head 1 (a rotation, then the shrink), so B's side measures that head's block only as a whole
    rotation = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    steps = [{"factor": "qk-gauge", "element": [{"g": [eye, rotation @ shrink] + [eye] * (H - 2)}]
              + [{"g": [eye] * H} for _ in range(a.n_layers - 1)]}]
    blocks = apply_steps(GroupSpec.from_arch(a.arch), model_blocks(a), steps)
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, blocks, tmp_path))
    assert ok, why
    blocks["layers"][0]["W_Q"][1] = blocks["layers"][0]["W_Q"][1].clone()
    blocks["layers"][0]["W_Q"][1][:, c] = 0.0  # the shrunk column of g . A's head 1
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, blocks, tmp_path))
    assert not ok and why.startswith("g^-1 . B reproduces every tensor of A as a whole, but not W_Q (layer 0)"), why
    assert "head slice 1" in why, why


@pytest.mark.parametrize("where", ["another layer", "another head"])
def test_a_dense_gauge_elsewhere_does_not_switch_a_heads_slices_off(where, tmp_path):
    """The previous test's ``W_Q`` forgery, with a dense query/key gauge added on head 3 of layer 1 (or of layer 0)
    and the identity elsewhere. Which axes are sliced was read per tensor: one dense component anywhere marked the
    qk columns of ``W_Q`` mixed in every layer and head, so the columns, and with them the entries, went unmeasured,
    and verify accepted the file again. Mixing is now read per layer and per head (:func:`symtrans.group.relate.
    mixing`): the heads a step does not mix are measured as a tensor of their own. Control: B = g . A is valid."""
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2")
    a = load_model(tmp_path / "a0")
    i, j = 5, 1
    _inert_entries(a, "W_Q", 3, i, j, 7)
    save_weights(a, tmp_path / "a")
    a = load_model(tmp_path / "a")
    H, dk = a.tensors["W_Q"].shape[1], a.tensors["W_Q"].shape[-1]
    eye = torch.eye(dk, dtype=torch.float64)
    dense = eye + 0.3 * torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    element = [{"g": [eye] * H} for _ in range(a.n_layers)]
    element[1 if where == "another layer" else 0] = {"g": [eye] * 3 + [dense] + [eye] * (H - 4)}
    steps = [{"factor": "qk-gauge", "element": element}]
    blocks = apply_steps(GroupSpec.from_arch(a.arch), model_blocks(a), steps)
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, blocks, tmp_path))
    assert ok, why
    blocks["layers"][0]["W_Q"][0] = blocks["layers"][0]["W_Q"][0].clone()
    blocks["layers"][0]["W_Q"][0][i, j] += 100.0
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, blocks, tmp_path))
    assert not ok and "as a whole, but not W_Q (layer 0), its entries" in why and f"entry {(0, i, j)}" in why, why


@pytest.mark.parametrize("case", ["bfloat16 final gain", "float32 query head", "bfloat16 every entry"])
def test_a_part_g_shrank_inside_a_is_measured_at_its_own_scale(case, tmp_path):
    """A helper's probe: A on the orbit of an ordinary model, but with a part some element of G shrank (a final norm
    gain channel at 1e-2, its head row x100; head 0's queries at 1e-6, its keys x1e6). That part weighs in the
    function as any other, yet a tensor's (or a slice's) residual allowed it to move by the rest's rounding, and
    verify accepted files claiming B = A: the gain entry 0.0106 -> -0.15 at bfloat16 (logits 349% off); head 0's
    queries moved by 40% of their own norm at float32 (1.1% off). And where nothing fitted acts on a tensor, every
    entry moved by 6.7 u in the direction that most changes the output passed the 8 u tolerance (logits 4.2% off
    against 0.29% for a plain bfloat16 copy; here the directions are random). A tensor the element moves entry by
    entry is now measured entry by entry, each at its own scale (:func:`symtrans.group.relate.worst_each`), and
    where no fitted step acts on it at B's rounding with the tolerance's headroom. Control: B = A rounded the same
    way is valid."""
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_checkpoint

    family = "llama" if case == "bfloat16 final gain" else "gpt2"
    random_checkpoint(tmp_path / "a0", family, **({"head": True, "tie_word_embeddings": False}
                                                   if family == "llama" else {}))
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    if case == "bfloat16 final gain":
        D = torch.eye(a0.d_model, dtype=torch.float64)
        D[2, 2] = 1e-2
        steps = [{"factor": "final-norm-scaling", "element": {"D": D}}]
    else:
        H, dk = a0.tensors["W_Q"].shape[1], a0.tensors["W_Q"].shape[-1]
        eye = torch.eye(dk, dtype=torch.float64)
        steps = [{"factor": "qk-gauge", "element": [{"g": [1e-6 * eye] + [eye] * (H - 1)}]
                  + [{"g": [eye] * H} for _ in range(a0.n_layers - 1)]}]
    if case != "bfloat16 every entry":  # A: the ordinary model moved by that element (the same function)
        save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), steps)), tmp_path / "a")
    else:
        save_weights(a0, tmp_path / "a")
    a = load_model(tmp_path / "a")
    dtype = None if case == "float32 query head" else torch.bfloat16
    (tmp_path / "control").mkdir()
    (tmp_path / "forged").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, [], model_blocks(a), tmp_path / "control", dtype))
    assert ok, why
    forged = model_blocks(a)
    if case == "bfloat16 final gain":
        w = forged["final_ln_w"].clone()
        w.reshape(-1)[2] = -0.15
        forged["final_ln_w"] = w
        where = "final_ln_w, entry 2"
    elif case == "float32 query head":
        forged["layers"][0]["W_Q"][0] = 1.4 * forged["layers"][0]["W_Q"][0]
        where = "W_Q (layer 0), entry (0, "
    else:
        sign = torch.randint(0, 2, a.tensors["W_in"].shape[1:], generator=torch.Generator().manual_seed(0)) * 2 - 1
        forged["layers"][0]["W_in"] = forged["layers"][0]["W_in"] * (1 + 6.7 * 2.0 ** -8 * sign)
        where = "W_in (layer 0), entry ("
    ok, why = _verdict(_claim(tmp_path / "a", a, [], forged, tmp_path / "forged", dtype))
    assert not ok and f"as a whole, but not {where}" in why, why
    if case == "float32 query head":  # relate: the pair is no g . A its solve can vouch for
        b = load_model(tmp_path / "forged" / "b")
        try:
            assert not relate(a, b).related
        except SymtransError as err:
            assert "cannot decide" in str(err), err


def _zeroed(x: Any) -> Any:
    """An element's components, every tensor times 0 (the identity of a translation)."""
    if isinstance(x, list):
        return [_zeroed(v) for v in x]
    if isinstance(x, dict):
        return {k: _zeroed(v) for k, v in x.items()}
    return 0 * x if hasattr(x, "shape") else x


@pytest.mark.parametrize("case", ["a translation in another layer", "a translation of 1e-10",
                                  "a rotation on the shrunk head", "a rotation on another key/value group"])
def test_a_step_that_moves_nothing_there_does_not_switch_the_entries_off(case, tmp_path):
    """A second probe of the entry-by-entry measure: A on the orbit of an ordinary model with a part g shrank by
    1e-7 (W_in row 3 of layer 0, lm_head row 3, head 0's values, or one value column of a key/value group under
    grouped-query attention), and a claim whose extra step switched the measure off for that tensor without moving
    the part: a translation in layer 1 only, or of 1e-10; a rotation (condition number 1) as the gauge of the
    shrunk head itself, or of another key/value group. B rewrote the part and verify accepted the file: logits 5.3%,
    108%, 2.2% and 24.7% off (GPT-2, GPT-2, GPT-2, Llama with H 4 and H_kv 2); relate also answered related on the
    first. A translation now widens an entry's scale only by what it adds there, a dense map measures each fibre it
    moves as a whole at its own scale, the blocks no step mixes are measured entry by entry, and under
    grouped-query attention a gauge's component marks the query heads it acts on. Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    family = "llama" if case.endswith("group") else "gpt2"
    random_checkpoint(tmp_path / "a0", family, head=True, tie_word_embeddings=False)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, Hkv, dm = a0.n_layers, a0.arch.H_kv, a0.d_model
    dk = a0.tensors["W_V"].shape[-1]
    eye_m, eye_k = torch.eye(dm, dtype=torch.float64), torch.eye(dk, dtype=torch.float64)
    rotation = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))[0]
    if case.startswith("a translation"):
        D = eye_m.clone()
        D[3, 3] = 1e7  # the gain x1e7: the rows it feeds x1e-7
        other = case.endswith("layer")
        shrink = [{"factor": "ln2-scaling", "element": [{"D": D}] + [{"D": eye_m}] * (L - 1)}] if other else \
            [{"factor": "final-norm-scaling", "element": {"D": D}}]
        factor = "ffn-input-hyperplane" if other else "final-norm-bias-transfer"
        el = random_element(spec, L, 5, factors=[factor])[0]["element"]
        el = [_zeroed(e) if l != 1 else e for l, e in enumerate(el)] if other else \
            {k: 1e-10 * v for k, v in el.items()}
        claim, where = [{"factor": factor, "element": el}], (0, "W_in") if other else (None, "lm_head")
    else:
        shrunk = eye_k.clone()
        if case.endswith("group"):
            shrunk[0, 0] = 1e-7  # value column 0 of key/value group 0
        else:
            shrunk = 1e-7 * eye_k  # every value of head 0
        on = 1 if case.endswith("group") else 0
        shrink = [{"factor": "vo-gauge", "element": [{"g": [shrunk] + [eye_k] * (Hkv - 1)}]
                   + [{"g": [eye_k] * Hkv}] * (L - 1)}]
        claim = [{"factor": "vo-gauge", "element": [{"g": [rotation if h == on else eye_k for h in range(Hkv)]}]
                  + [{"g": [eye_k] * Hkv}] * (L - 1)}]
        where = (0, "W_V")
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, shrink))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    claim = in_group(spec, claim)
    (tmp_path / "control").mkdir()
    (tmp_path / "forged").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, apply_steps(spec, model_blocks(a), claim), tmp_path / "control"))
    assert ok, why
    part = model_blocks(a)  # A with its shrunk part rewritten, then moved by the claimed element
    l, name = where
    lp = part if l is None else part["layers"][l]
    if name == "W_V":
        lp["W_V"] = [x.clone() for x in lp["W_V"]]
        if case.endswith("group"):
            lp["W_V"][0][:, 0] *= -3
        else:
            lp["W_V"][0] = -lp["W_V"][0]
            lp["b_V"] = [-x if h == 0 else x for h, x in enumerate(lp["b_V"])]
    else:
        lp[name] = lp[name].clone()
        lp[name][3, :] *= -3
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, apply_steps(spec, part, claim), tmp_path / "forged"))
    assert not ok and f"as a whole, but not {name}" in why, why



def test_an_ordinary_translation_beside_a_shrunk_part_widens_it_only_by_its_rounding(tmp_path):
    """A third probe: A on the orbit of a random GPT-2 with ``W_in`` row 3 of layer 0 shrunk by 1e-7 (its norm
    gain channel x1e7), and a claim of an ordinary input hyperplane on that layer, which adds ``u_3 v`` to the row:
    1e-7 of what it adds to the others, but far more than the row itself. An entry's scale was widened by ``2 |T| /
    tol``, what the translation adds there over the tolerance, so B could move each entry of the row by up to 2 |T|:
    with 1.9 |T| verify accepted the file, and logits were 28% off. The scale is now widened only by the rounding
    the translation's component carries in from the tensor it was read from
    (:func:`symtrans.group.relate.translation_allowance`). Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, dm = a0.n_layers, a0.d_model
    D = torch.eye(dm, dtype=torch.float64)
    D[3, 3] = 1e7
    shrink = [{"factor": "ln2-scaling", "element": [{"D": D}] + [{"D": torch.eye(dm, dtype=torch.float64)}] * (L - 1)}]
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, shrink))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    el = random_element(spec, L, 5, factors=["ffn-input-hyperplane"])[0]["element"]
    claim = in_group(spec, [{"factor": "ffn-input-hyperplane",
                             "element": [e if l == 0 else _zeroed(e) for l, e in enumerate(el)]}])
    A = model_blocks(a)
    _control_is_valid(tmp_path, a, claim, A)
    forged = apply_steps(spec, A, claim)
    T = forged["layers"][0]["W_in"] - A["layers"][0]["W_in"]  # what the translation adds
    assert float(T[3].abs().max()) > 10 * float(A["layers"][0]["W_in"][3].abs().max())  # far more than the row
    sign = torch.randint(0, 2, T.shape[1:], generator=torch.Generator().manual_seed(1)) * 2 - 1
    forged["layers"][0]["W_in"] = forged["layers"][0]["W_in"].clone()
    forged["layers"][0]["W_in"][3] += 1.9 * T[3].abs() * sign
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "as a whole, but not W_in (layer 0), entry (3, " in why, why


def test_the_output_heads_hyperplane_carries_its_bias_rounding_into_each_vocab_slice(tmp_path):
    """A genuine pair: a random untied GPT-2 (seed 1) and g . A for a random element of G. relate called it
    related, and verify refused relate's own file: ``lm_head`` pulled back, vocab slice 83 off by 1.96e-6 against
    1.83e-6, 98.5% of that along ``1/gamma``. The final norm's bias transfer moves the head through its hyperplane,
    ``W + (1/gamma)^T v`` with ``v = -(t W) / <beta + t, 1/gamma>``: the rounding of ``t`` (read from ``final_ln_b``)
    reaches every vocab slice in proportion to the slice, amplified where the scalar cancels (6.4 here). A slice's
    scale now counts that (:func:`symtrans.group.relate.translation_allowance`). A vocab slice moved along
    ``1/gamma`` by a hundred times B's rounding is still refused."""
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "gpt2", seed=1, head=True, tie_word_embeddings=False)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    steps = random_element(spec, a.n_layers, 1)
    save_weights(weights_from_blocks(a, apply_steps(spec, model_blocks(a), steps)), tmp_path / "b")
    rel = relate(a, load_model(tmp_path / "b"))
    assert rel.related, rel.summary()
    ok, why = _verdict(write_relation(rel, tmp_path / "g.json"))
    assert ok, why
    forged = apply_steps(spec, model_blocks(a), rel.steps)
    head = forged["lm_head"].clone()
    inv = (1 / forged["final_ln_w"]).reshape(-1)
    col = head[:, 83]
    head[:, 83] = col + 100 * 2.0 ** -24 * float(col.norm()) * inv / inv.norm()
    forged["lm_head"] = head
    (tmp_path / "forged").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, rel.steps, forged, tmp_path / "forged"))
    assert not ok and "lm_head" in why, why


def test_a_scaling_around_a_bias_transfer_does_not_widen_what_it_shrank(tmp_path):
    """A fourth probe: A a random GPT-2 with value channel 2 of head 0 (layer 0) shrunk by 1e-10 (a vo-gauge; its
    ``W_O`` row x1e10, so it still counts), and a claim of three steps of G: ln1 gain channel 3 scaled by 1e-14, a
    bias transfer of 1e-6, the channel scaled back. The transfer's rounding was read from B's ``ln1_b`` (restored
    by the last step) but carried through ``|W_V|`` as the step met it (row 3 at 1e14): every ``b_V`` entry was
    widened by 1e14, and a B with the shrunk entry x101 was accepted (logits 89% off). The pivot is now read in
    the step's own frame (B's only where no later step moves it). Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, dm, H = a0.n_layers, a0.d_model, a0.arch.H
    dk = a0.tensors["W_V"].shape[-1]
    shrunk = torch.eye(dk, dtype=torch.float64)
    shrunk[2, 2] = 1e-10
    eye_k, eye_m = torch.eye(dk, dtype=torch.float64), torch.eye(dm, dtype=torch.float64)
    shrink = [{"factor": "vo-gauge", "element": [{"g": [shrunk] + [eye_k] * (H - 1)}] + [{"g": [eye_k] * H}] * (L - 1)}]
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, shrink))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    down, up = eye_m.clone(), eye_m.clone()
    down[3, 3], up[3, 3] = 1e-14, 1e14
    t = [{k: 1e-6 * v for k, v in e.items()} if l == 0 else _zeroed(e)
         for l, e in enumerate(random_element(spec, L, 5, factors=["ln1-bias-transfer"])[0]["element"])]
    t[0]["t"][..., 3] = 0
    claim = in_group(spec, [{"factor": "ln1-scaling", "element": [{"D": down}] + [{"D": eye_m}] * (L - 1)},
                            {"factor": "ln1-bias-transfer", "element": t},
                            {"factor": "ln1-scaling", "element": [{"D": up}] + [{"D": eye_m}] * (L - 1)}])
    A = model_blocks(a)
    _control_is_valid(tmp_path, a, claim, A)
    forged = apply_steps(spec, A, claim)
    forged["layers"][0]["b_V"] = [x.clone() for x in forged["layers"][0]["b_V"]]
    forged["layers"][0]["b_V"][0][0, 2] *= 101
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "but not b_V (layer 0), entry (0, 0, 2)" in why, why


@pytest.mark.parametrize("bias", ["zero", "1e-3"])
def test_a_bias_transfer_at_the_embedding_norm_is_a_translation_of_it(bias, tmp_path):
    """A genuine BERT pair, B = g . A for a random attention bias transfer, was refused at ``emb_ln_b`` pulled back
    (off by 1 where A's is 0, as ``transformers`` initialises it; by 1.4e-4 against 2.4e-7 at 1e-3): before layer 0
    the embedding norm plays the closing norm the transfer moves, but only the tags' own tensors counted as moved,
    so ``emb_ln_b`` was held entry by entry to A's values with nothing widened for the transfer's rounding.
    ``_acts_on`` now names it (:data:`symtrans.group.action.EMBEDDING_NORM`)."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "bert", seed=0)
    a0 = load_model(tmp_path / "a0")
    A = model_blocks(a0)
    if bias != "zero":
        A["emb_ln_b"] = 1e-3 * torch.randn(A["emb_ln_b"].shape, generator=torch.Generator().manual_seed(3),
                                           dtype=torch.float64)
    save_weights(weights_from_blocks(a0, A), tmp_path / "a")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    el = in_group(spec, random_element(spec, a.n_layers, 10, factors=["attention-bias-transfer"]))
    assert len(el[0]["element"]) == a.n_layers  # boundary 0 is among them: emb_ln_b moves
    (tmp_path / "b").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, el, apply_steps(spec, model_blocks(a), el), tmp_path / "b"))
    assert ok, why


@pytest.mark.parametrize("case", ["a value bias shift", "the output head's hyperplane"])
def test_a_translation_and_its_negation_carry_no_rounding_of_their_own(case, tmp_path):
    """A fifth probe: a claim of one translation and then its negation (together the identity, each in G). The
    first step's pivot was read after the step, where it held the claim's own intermediate value: a value bias
    shift of 1e9 times a ``b_V`` entry that a vo-gauge had shrunk by 1e-10 (its ``W_O`` row x1e10) widened that
    entry by 1e9, and a B with it x301 was accepted (logits 127% off); a final-norm bias transfer whose
    intermediate scalar ``<beta + c, 1/gamma>`` was 1e-7 widened every ``lm_head`` entry by its reciprocal, and a
    B with a shrunk head row x11 was accepted (122% off). A tensor's size is now A's moved by the linear steps
    alone and B's (a translation adds no rounding), and the head's scalar the larger of its values before and
    after the step. Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, dm, H = a0.n_layers, a0.d_model, a0.arch.H
    dk = a0.tensors["W_V"].shape[-1]
    if case == "a value bias shift":
        g0 = torch.eye(dk, dtype=torch.float64)
        g0[2, 2] = 1e-10
        shrink = [{"factor": "vo-gauge", "element": [{"g": [g0] + [torch.eye(dk, dtype=torch.float64)] * (H - 1)}]
                   + [{"g": [torch.eye(dk, dtype=torch.float64)] * H}] * (L - 1)}]
    else:
        D = torch.eye(dm, dtype=torch.float64)
        D[3, 3] = 1e7  # the final gain channel x1e7: lm_head row 3 x1e-7
        shrink = [{"factor": "final-norm-scaling", "element": {"D": D}}]
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, shrink))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    if case == "a value bias shift":
        v = _zeroed(random_element(spec, L, 5, factors=["value-bias-shift"])[0]["element"])
        v[0]["v"] = [x.clone() for x in v[0]["v"]]
        v[0]["v"][0].reshape(-1)[2] = 1e9 * abs(float(A["layers"][0]["b_V"][0].reshape(-1)[2]))
        steps = [{"factor": "value-bias-shift", "element": v},
                 {"factor": "value-bias-shift", "element": [{k: [-x for x in e[k]] for k in e} for e in v]}]
    else:
        inv = 1 / A["final_ln_w"]
        c = -(float((A["final_ln_b"] * inv).sum()) - 1e-7) * inv / float(inv.square().sum())  # the scalar 1e-7
        steps = [{"factor": "final-norm-bias-transfer", "element": {"t": c}},
                 {"factor": "final-norm-bias-transfer", "element": {"t": -c}}]
    claim = in_group(spec, steps)
    # the claim composes to the identity: its net component is 0 and carries no fit's rounding; where the path
    # passes through a small head scalar, its float64 arithmetic leaves the genuine B off too: the identity's control
    _control_is_valid(tmp_path, a, claim if case == "a value bias shift" else [], A)
    forged = apply_steps(spec, A, claim)
    if case == "a value bias shift":
        forged["layers"][0]["b_V"] = [x.clone() for x in forged["layers"][0]["b_V"]]
        forged["layers"][0]["b_V"][0].reshape(-1)[2] *= 301
        where = "b_V (layer 0)"
    else:
        forged["lm_head"] = forged["lm_head"].clone()
        forged["lm_head"][3] *= 11
        where = "lm_head"
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and f"but not {where}" in why, why


@pytest.mark.parametrize("family,table", [("gpt2", "word"), ("bert", "type")])
def test_one_large_row_does_not_widen_the_rows_an_embedding_translation_moves(family, table, tmp_path):
    """A fifth probe: a table with one row at 1e6 (a token, or BERT's token type 1, sent far out) and a claimed
    embedding translation of 1e-10. The translation's rounding was bounded by twice the largest row, per column,
    for every row: B with every other word row replaced at random (logits 13% off), or BERT's type row 0 rewritten
    (the last hidden state 109% off), was accepted. relate reads that translation with the rows weighted by their
    rounding (:func:`symtrans.group.relate.rounding_weights`); the bound now does too. Control: B = g . A."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", family, **({"head": True, "tie_word_embeddings": False}
                                                   if family == "gpt2" else {}))
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    A = model_blocks(a0)
    big = 7 if table == "word" else 1
    A[table] = A[table].clone()
    A[table][big] = 1e6 * torch.sign(A[table][big])
    save_weights(weights_from_blocks(a0, A), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    el = random_element(spec, a.n_layers, 5, factors=["embedding-translation"])[0]["element"]
    claim = in_group(spec, [{"factor": "embedding-translation", "element": {k: 1e-10 * v for k, v in el.items()}}])
    _control_is_valid(tmp_path, a, claim, A)
    forged = apply_steps(spec, A, claim)
    rows = forged[table].clone()
    other = torch.arange(len(rows)) != big
    rows[other] = torch.randn(rows[other].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9)) \
        * float(rows[other].std())
    forged[table] = rows
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and f"but not {table}" in why, why


def test_a_rotation_and_its_inverse_mix_nothing(tmp_path):
    """A sixth probe: A a random GPT-2 with value channel 2 of head 0 (layer 0) shrunk by 1e-10 (a vo-gauge; its
    ``W_O`` row x1e10), and a claim of a vo-gauge rotation Q on that head and then Q^T: the identity. Each step read
    alone mixed the head's value columns, so the channel was measured inside its head's fibre, and a B with its
    ``W_V`` column and ``b_V`` entry x1001 was accepted (logits 141% off). :func:`symtrans.group.relate.mixing` now
    reads a factor's steps together (:func:`symtrans.group.relate._composed_steps`), and where a step alone mixes
    an axis the product does not, an entry's (or slice's) scale counts float64's rounding of the dense products
    along it (the control, pulled back through Q and Q^T, moves the inflated ``W_O`` row's rounding into the other
    rows at ``u64`` of it). Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, H = a0.n_layers, a0.arch.H
    dk = a0.tensors["W_V"].shape[-1]
    eye = torch.eye(dk, dtype=torch.float64)
    g0 = eye.clone()
    g0[2, 2] = 1e-10

    def vo(m: Any) -> dict[str, Any]:
        return {"factor": "vo-gauge", "element": [{"g": [m] + [eye] * (H - 1)}] + [{"g": [eye] * H}] * (L - 1)}

    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, [vo(g0)]))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    Q = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))[0]
    claim = in_group(spec, [vo(Q), vo(Q.T.contiguous())])
    _control_is_valid(tmp_path, a, claim, A)
    forged = apply_steps(spec, A, claim)
    lp = forged["layers"][0]
    lp["W_V"], lp["b_V"] = [x.clone() for x in lp["W_V"]], [x.clone() for x in lp["b_V"]]
    lp["W_V"][0][:, 2] *= 1001
    lp["b_V"][0].reshape(-1)[2] *= 1001
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "but not W_V (layer 0), entry (0, " in why, why


@pytest.mark.parametrize("case", ["a head permutation between a rotation and its inverse", "an identity residual map",
                                  "a gauge one entry of 1e-30 off the identity", "an identity residual permutation",
                                  "a residual map rotating two other channels",
                                  "a rotation of two other channels beside a dense gauge on another head"])
def test_a_step_whose_component_mixes_nothing_leaves_each_entry_at_its_own_scale(case, tmp_path):
    """A seventh probe: claims whose linear steps were read as mixing an axis they do not mix, beside a part a gauge
    or scaling of A shrank by 1e-10; B rewrote the part x1001 and verify accepted it (logits 89-141% off): a rotation
    on head 0, a head swap, its inverse on head 1, the swap back (per-index products read two rotations); a residual
    rotation, or permutation, of the identity (a conjugation through a gain counted as mixing whatever its
    component); a gauge of the identity but one entry of 1e-30 (any non-zero off the pattern counted). A linear
    action now mixes an axis only where its component is monomial no closer than float64 rounding
    (:func:`symtrans.group.relate._near_pattern`), and a factor's steps whose product cannot be followed mark
    nothing mixed. And a residual rotation in the plane of channels 5 and 6 measured channel 3's rows inside the
    whole axis's fibre (141% off): a fibre is now only the indices the map couples
    (:func:`symtrans.group.relate.coupled_groups`), head by head (a dense gauge on head 1, merged into head 0's
    rotation of value channels 0 and 1, let head 0's channel 2 be rewritten: 141% off). Control: B = g . A."""
    from symtrans.group.elements import in_group
    from symtrans.group.numeric import MonomialMatrix
    from symtrans.numeric.fixtures import random_checkpoint

    family = "llama" if case.startswith(("an identity", "a residual map")) else "gpt2"
    random_checkpoint(tmp_path / "a0", family, head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, H, dm = a0.n_layers, a0.arch.H_kv, a0.d_model
    dk = a0.tensors["W_V"].shape[-1]
    eye_k, eye_m = torch.eye(dk, dtype=torch.float64), torch.eye(dm, dtype=torch.float64)

    def vo(heads: dict[int, Any]) -> dict[str, Any]:
        return {"factor": "vo-gauge", "element": [{"g": [heads.get(h, eye_k) for h in range(H)]}]
                + [{"g": [eye_k] * H}] * (L - 1)}

    if family == "gpt2":  # value channel 2 of head 0 at 1e-10 (its W_O row x1e10)
        g0 = eye_k.clone()
        g0[2, 2] = 1e-10
        shrink = [vo({0: g0})]
    else:  # ln1 gain channel 3 at 1e-10; or ln2's at 1e10, the W_in and W_gate rows it feeds at 1e-10
        D = eye_m.clone()
        rows = case != "an identity residual permutation"
        D[3, 3] = 1e10 if rows else 1e-10
        norm = "ln2-scaling" if rows else "ln1-scaling"
        shrink = [{"factor": norm, "element": [{"D": D}] + [{"D": eye_m}] * (L - 1)}]
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, shrink))), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    if case.startswith("a head permutation"):
        Q = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))[0]
        p = [1, 0] + list(range(2, a0.arch.H))
        swap = {"factor": "S_H", "element": [{"pi": p, "kappa": p}]
                + [{"pi": list(range(a0.arch.H)), "kappa": list(range(a0.arch.H))}] * (L - 1)}
        steps = [vo({0: Q}), swap, vo({1: Q.T.contiguous()}), swap]
    elif case.startswith("a rotation of two other channels"):
        G = eye_k.clone()
        c, s = math.cos(0.3), math.sin(0.3)
        G[0, 0], G[0, 1], G[1, 0], G[1, 1] = c, -s, s, c
        Q = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))[0]
        steps = [vo({0: G, 1: Q})]
    elif case.startswith("a gauge"):
        g = eye_k.clone()
        g[0, 2] = 1e-30
        steps = [vo({0: g})]
    elif case == "an identity residual map":
        steps = [{"factor": "residual-rotation", "element": {"Q": eye_m}}]
    elif case.startswith("a residual map"):
        Q = eye_m.clone()
        c, s = math.cos(0.3), math.sin(0.3)
        Q[5, 5], Q[5, 6], Q[6, 5], Q[6, 6] = c, -s, s, c
        steps = [{"factor": "residual-rotation", "element": {"Q": Q}}]
    else:
        steps = [{"factor": "residual-permutation",
                  "element": {"Q": MonomialMatrix(list(range(dm)), torch.ones(dm, dtype=torch.float64))}}]
    claim = in_group(spec, steps)
    _control_is_valid(tmp_path, a, claim, A)
    forged = apply_steps(spec, A, claim)
    lp = forged["layers"][0]
    if family == "gpt2":
        lp["W_V"], lp["b_V"] = [x.clone() for x in lp["W_V"]], [x.clone() for x in lp["b_V"]]
        lp["W_V"][0][:, 2] *= 1001
        lp["b_V"][0].reshape(-1)[2] *= 1001
        where = "but not W_V (layer 0), "
    elif case != "an identity residual permutation":
        for name in ("W_in", "W_gate"):
            lp[name] = lp[name].clone()
            lp[name][3, :] *= 1001
        where = "(layer 0), "
    else:
        lp["ln1_w"] = lp["ln1_w"].clone()
        lp["ln1_w"].reshape(-1)[3] *= 1001
        where = "ln1_w (layer 0), entry 3"
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and where in why, why

def test_a_genuine_float16_pair_relate_calls_related_verifies(tmp_path):
    """relate's related answer and verify agree on a genuine pair: a random BERT stored in float16 and g . A (a
    random element, stored in float16). With A's side measured entry by entry on tensors a translation moves,
    verify refused relate's own file (``b_O`` of layer 1 pulled back, 1.6e-2 against its tolerance): a
    translation's component pulled back reads other tensors at B's rounding, which no scale of the tensor itself
    bounds. A's side now measures entry by entry only what no translation moves."""
    from safetensors.torch import load_file, save_file

    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    def half(path: Path) -> None:
        f = path / "model.safetensors"
        save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(str(f)).items()}, str(f))

    random_checkpoint(tmp_path / "a0", "bert", seed=0)
    half(tmp_path / "a0")
    save_weights(load_model(tmp_path / "a0"), tmp_path / "a")
    half(tmp_path / "a")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    save_weights(weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0))),
                 tmp_path / "b")
    half(tmp_path / "b")
    rel = relate(a, load_model(tmp_path / "b"))
    assert rel.related, rel.summary()
    ok, why = _verdict(write_relation(rel, tmp_path / "g.json"))
    assert ok, why


@pytest.mark.parametrize("case", ["qk-gauge around a bias transfer", "vo-gauge around a value-bias shift"])
def test_a_translation_between_a_rotation_and_its_inverse_carries_no_rounding_across_channels(case, tmp_path):
    """A probe: a GPT-2 whose head-0 query (value) channel 2 in layer 0 is shrunk by 1e-10 by a gauge (its key
    column, or its W_O row, inflated: the same function), and a claim of a rotation Q on that head, a bias
    translation, then Q^T (together: the translation). The translation's bound was read in the rotated frame,
    where the shrunk channel is mixed with ordinary ones, and carried back through |Q^T| onto it, while the steps
    read together mix nothing there, so the entry was held to its own scale widened by an ordinary channel's
    rounding: verify accepted B with that b_Q entry x-1e4 (logits 1.1% off) or that b_V entry x1e3 (141% off).
    Such a bound is no longer followed (``translation_allowance``), the entry is held to its own rounding and
    float64's of the dense products. The control, the same claim with B = g . A, is accepted."""
    from symtrans.group.elements import in_group
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, H, dk, c = a0.n_layers, a0.arch.H, a0.tensors["W_Q"].shape[-1], 2
    eye = torch.eye(dk, dtype=torch.float64)
    gauge, bias, shift, factor = ("qk-gauge", "b_Q", "ln1-bias-transfer", -1e4) if case.startswith("qk") \
        else ("vo-gauge", "b_V", "value-bias-shift", 1e3)

    def on_head0(m: Any) -> dict[str, Any]:
        return {"factor": gauge, "element": [{"g": [m] + [eye] * (H - 1)}] + [{"g": [eye] * H}] * (L - 1)}

    shrink = eye.clone()
    shrink[c, c] = 1e-10
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, [on_head0(shrink)]))),
                 tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    t = random_element(spec, L, 5, factors=[shift])[0]["element"]
    scale = 1.0 if shift == "ln1-bias-transfer" else 1e-12

    def scaled(x: Any, by: float) -> Any:  # a component, or per-head components, times ``by``
        return [scaled(v, by) for v in x] if isinstance(x, list) else by * x

    t = [{k: scaled(v, scale if l == 0 else 0.0) for k, v in e.items()} for l, e in enumerate(t)]
    Q = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))[0]
    claim = in_group(spec, [on_head0(Q), {"factor": shift, "element": t}, on_head0(Q.T.contiguous())])
    _control_is_valid(tmp_path, a, claim, A)
    forged = copy.deepcopy(A)
    forged["layers"][0][bias][0].reshape(-1)[c] *= factor
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, apply_steps(spec, forged, claim), tmp_path / "forged"))
    assert not ok and bias in why and "entry" in why, why


@pytest.mark.parametrize("case,dtype", [("another head", "float32"), ("another head", "float64"),
                                        ("other channels of this head", "float64")])
def test_a_dense_gauge_and_its_inverse_widen_no_entry_they_do_not_move(case, dtype, tmp_path):
    """A probe: a GPT-2 whose head-0 query channel 2 in layer 0 is shrunk by 1e-16 by a gauge (its key channel
    inflated: the same function), and a claim of a dense qk-gauge M (condition number 100) and then M^-1 (together:
    the identity) on another head, or on channels 0 and 1 of head 0 (about 99). float64's rounding of the dense products
    (``dense_rounding``) widened every entry of every head by the whole fibre's rounding, so verify accepted B with
    that channel's W_Q column and b_Q entry x3000 (logits 1% off) though no step moves it. The widening now covers
    only the blocks a step mixes and, within them, the indices its maps couple (``coupled_groups``). The control,
    the same claim with B = g . A, is accepted."""
    from symtrans.group.elements import in_group
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, H, dk, c = a0.n_layers, a0.arch.H, a0.tensors["W_Q"].shape[-1], 2
    eye = torch.eye(dk, dtype=torch.float64)

    def qk(ms: dict[int, Any]) -> dict[str, Any]:
        return {"factor": "qk-gauge",
                "element": [{"g": [ms.get(h, eye) for h in range(H)]}] + [{"g": [eye] * H}] * (L - 1)}

    shrink = eye.clone()
    shrink[c, c] = 1e-16
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, [qk({0: shrink})]))),
                 tmp_path / "a", dtype=dtype)
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    gen = torch.Generator().manual_seed(7)
    if case == "another head":
        Q1, Q2 = (torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=gen))[0] for _ in range(2))
        M, head = Q1 @ torch.diag(torch.logspace(0, 2, dk, dtype=torch.float64)) @ Q2.T, 1
    else:  # dense on channels 0 and 1 only: channel 2 untouched
        M, head = eye.clone(), 0
        M[:2, :2] = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64) @ torch.diag(
            torch.tensor([1.0, 1 / 99], dtype=torch.float64))  # condition number below KAPPA_MAX
    claim = in_group(spec, [qk({head: M}), qk({head: torch.linalg.inv(M)})])
    _control_is_valid(tmp_path, a, claim, A)
    forged = copy.deepcopy(A)
    forged["layers"][0]["b_Q"][0].reshape(-1)[c] *= 3000
    forged["layers"][0]["W_Q"][0][:, c] *= 3000
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, apply_steps(spec, forged, claim), tmp_path / "forged"))
    assert not ok and "W_Q" in why and "entry" in why, why


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_weak_coupling_and_its_inverse_widen_a_shrunk_channel_only_by_the_coupling(dtype, tmp_path):
    """A fourth probe: a GPT-2 whose value channel 2 of every head is shrunk by 1e-20 by a vo-gauge (W_O rows
    inflated: the same function), and a claim of M = I + 1e-11 (e_2 e_5^T + e_5 e_2^T) on every head, then M^-1.
    The pattern of M couples channel 2 with channel 5, so float64's rounding of the dense products
    (``dense_rounding``) widened channel 2's entries by channel 5's fibre: verify accepted its W_V columns and
    b_V entries x-1000 (logits 131% off). The widening is now ``k gamma_n |g_k| ... |g_1| |A|``, the steps'
    magnitudes acting on A's: the coupling reaches channel 2 by 1e-11 of channel 5, which hides nothing. The
    control, the same claim with B = g . A, is accepted."""
    from symtrans.group.elements import in_group
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    L, H, dk, c, j = a0.n_layers, a0.arch.H, a0.tensors["W_V"].shape[-1], 2, 5
    eye = torch.eye(dk, dtype=torch.float64)

    def vo(m: Any) -> dict[str, Any]:
        return {"factor": "vo-gauge", "element": [{"g": [m] * H}] * L}

    shrink = eye.clone()
    shrink[c, c] = 1e-20
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), in_group(spec, [vo(shrink)]))),
                 tmp_path / "a", dtype=dtype)
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    M = eye.clone()
    M[c, j] = M[j, c] = 1e-11
    claim = in_group(spec, [vo(M), vo(torch.linalg.inv(M))])
    _control_is_valid(tmp_path, a, claim, A)
    forged = copy.deepcopy(A)
    for lp in forged["layers"]:
        for h in range(H):
            lp["b_V"][h].reshape(-1)[c] *= -1000
            lp["W_V"][h][:, c] *= -1000
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, apply_steps(spec, forged, claim), tmp_path / "forged"))
    assert not ok and "entry" in why, why


@pytest.mark.parametrize("path", ["through 0", "on one side of 0"])
def test_a_chain_of_head_bias_transfers_near_the_singular_scalar_buys_no_slack(path, tmp_path):
    """A probe: A a random untied GPT-2 (seed 1) with its final gain channel 3 x1e7 (``lm_head`` row 3 x1e-7, the
    same function), and a claim of three final-norm bias transfers that compose to the identity, the head's scalar
    ``<beta + c, 1/gamma>`` going from A's (-0.36) to S, then to -S (or 2 S), then back; S = 1e-5. The middle
    step's scalar is small before and after it, so its bound divided by S^2 (the larger of the two) and widened
    every ``lm_head`` entry: a B with row 3 x11 was accepted (logits 120% off). The bound now divides by the
    largest scalar of the whole element's frames (:func:`symtrans.group.relate._head_scalar_scale`), and so does
    the length of the float64 sums a float64 tolerance allows for (:func:`symtrans.group.relate.
    _head_hyperplane_lengths`), which the middle step would otherwise inflate. Control: B = g . A is valid."""
    from symtrans.group.elements import in_group
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", head=True, tie_word_embeddings=False, seed=1)
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    D = torch.eye(a0.d_model, dtype=torch.float64)
    D[3, 3] = 1e7
    shrink = in_group(spec, [{"factor": "final-norm-scaling", "element": {"D": D}}])
    save_weights(weights_from_blocks(a0, apply_steps(spec, model_blocks(a0), shrink)), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    inv = 1 / A["final_ln_w"]
    n2 = float(inv.square().sum())
    s0, S = float((A["final_ln_b"] * inv).sum()), 1e-5
    off = torch.randn(inv.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    off = off - float((off * inv).sum()) / n2 * inv  # a part the scalar does not see
    mid = -S if path == "through 0" else 2 * S
    c1, c2 = (S - s0) * inv / n2, (mid - S) * inv / n2 + off
    claim = in_group(spec, [{"factor": "final-norm-bias-transfer", "element": {"t": c}} for c in (c1, c2, -(c1 + c2))])
    # the claim composes to the identity: its net component is 0 and carries no fit's rounding, so the genuine B
    # (whose float64 path through the small scalar left one lm_head entry 6e-5 off) is refused as well; the
    # control is the identity's
    _control_is_valid(tmp_path, a, [], A)
    forged = apply_steps(spec, A, claim)
    forged["lm_head"] = forged["lm_head"].clone()
    forged["lm_head"][3] *= 11
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "lm_head" in why, why
    # nor does the float64 sums' length a float64 B's tolerance counts: on A before the shrink, the last step
    # meets the head the middle one blew up (a growth of about 7e3, past KAPPA_MAX), which counts as none
    from symtrans.group.relate import _head_hyperplane_lengths

    A0 = model_blocks(a0)
    inv0 = 1 / A0["final_ln_w"]
    c1 = (S - float((A0["final_ln_b"] * inv0).sum())) * inv0 / float(inv0.square().sum())
    c2 = (-2 * S) * inv0 / float(inv0.square().sum())
    chain = in_group(spec, [{"factor": "final-norm-bias-transfer", "element": {"t": c}}
                            for c in (c1, c2, -(c1 + c2))])
    lengths = _head_hyperplane_lengths(spec, A0, chain)
    assert sorted(lengths) == [0, 1, 2] and max(lengths.values()) < 2 * a.d_model, lengths


def test_the_float64_sums_of_a_head_bias_transfer_buy_no_tolerance(tmp_path):
    """A probe: A a random untied GPT-2 (seed 1) in float64 whose final bias is x1e4 and whose head nearly
    annihilates it (its logits sensitive to ``lm_head`` along the bias), and a claim of two final-norm bias
    transfers c then -c (the identity), c orthogonal to ``1/gamma`` and sized so that the second step's head grows
    by just under 100 (:func:`symtrans.group.relate._head_hyperplane_lengths`). Counted as a float64 tolerance,
    that length let a B with ``lm_head`` moved by 6e-13 of itself along the bias pass (logits 2.9e-9 off). It
    now only widens what is undecided: verify refuses it, and the genuine B under the claim too, whose pull-back
    through the claim's own float64 sums is off by more than B's precision but within what they reach."""
    from safetensors.torch import load_file, save_file

    from symtrans.group.elements import in_group
    from symtrans.group.relate import _head_hyperplane_lengths
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", seed=1, head=True, tie_word_embeddings=False)
    f = tmp_path / "a0" / "model.safetensors"
    save_file({k: v.to(torch.float64) for k, v in load_file(str(f)).items()}, str(f))
    a0 = load_model(tmp_path / "a0")
    spec = GroupSpec.from_arch(a0.arch)
    A0 = model_blocks(a0)
    bh = (A0["final_ln_b"] / A0["final_ln_b"].norm()).reshape(-1)
    A0["final_ln_b"] = 1e4 * A0["final_ln_b"]
    A0["lm_head"] = A0["lm_head"] - (1 - 1e-5) * torch.outer(bh, bh @ A0["lm_head"])
    save_weights(weights_from_blocks(a0, A0), tmp_path / "a")
    a = load_model(tmp_path / "a")
    A = model_blocks(a)
    inv = 1 / A["final_ln_w"]
    off = torch.randn(inv.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    off = off - float((off * inv).sum()) / float(inv.square().sum()) * inv
    off = off / off.norm()  # <beta + c, 1/gamma> unchanged

    def chain(size: float) -> list[dict[str, Any]]:
        return in_group(spec, [{"factor": "final-norm-bias-transfer", "element": {"t": s * size * off}}
                               for s in (1, -1)])

    lo, hi = 1e-3, 1e8  # the largest c whose second step's growth is still within KAPPA_MAX
    for _ in range(80):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if _head_hyperplane_lengths(spec, A, chain(mid))[1] > a.d_model else (lo, mid)
    claim = chain(lo)
    assert _head_hyperplane_lengths(spec, A, claim)[1] > 50 * a.d_model  # near the cap: the most it could buy
    genuine = apply_steps(spec, A, claim)
    # the genuine B under this claim: its own float64 sums pulled back pass B's precision, within what they reach
    from symtrans.group.relate import pulled_back_residuals

    back = [r for r in pulled_back_residuals(spec, A, genuine, _precision(a), claim) if r["tensor"] == "lm_head"]
    assert not back[0]["ok"] and back[0]["residual"] <= back[0]["undecided_to"], back[0]
    forged = dict(genuine)
    W = genuine["lm_head"]
    v = torch.randn(W.shape[1], generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    forged["lm_head"] = W + 6e-13 * W.norm() * torch.outer(bh, v / v.norm())
    (tmp_path / "forged").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "lm_head" in why, why


@pytest.mark.parametrize("seed", [2, 4])
def test_a_float64_entry_pulled_back_counts_the_translation_sums_of_its_source(seed, tmp_path):
    """A random BERT stored in float64 and B = g . A for a random element of G (float64 too). Seed 2: relate
    related the pair and verify refused relate's own file, ``W_in`` entry (7, 45) pulled back off by 9.9e-16 of its
    scale against 8.9e-16. G's input hyperplane adds a rank-one term to ``W_in`` (B's entries up to 20 times A's);
    pulled back, float64's sums cancel it at ``u |B|``. Seed 4: relate could not decide, a ``W_in`` entry of B off
    by 8.94e-16 against 8.88e-16. An entry's (and a slice's) scale now counts float64's sums of each translation
    (:func:`tensor_residuals`' ``translation_sums``: two operations per step on the larger of the source moved by
    the linear steps alone and the result). The false case: B with one row of that ``W_in`` moved by 1e-12 of
    itself is refused."""
    from safetensors.torch import load_file, save_file

    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "bert", seed=seed)
    f = tmp_path / "a" / "model.safetensors"
    save_file({k: v.to(torch.float64) for k, v in load_file(str(f)).items()}, str(f))
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    B = apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, {2: 2, 4: 0}[seed]))
    save_weights(weights_from_blocks(a, B), tmp_path / "b")
    rel = relate(a, load_model(tmp_path / "b"))
    assert rel.related, rel.summary()
    ok, why = _verdict(write_relation(rel, tmp_path / "g.json"))
    assert ok, why
    forged = apply_steps(spec, model_blocks(a), rel.steps)
    forged["layers"][0]["W_in"] = forged["layers"][0]["W_in"].clone()
    forged["layers"][0]["W_in"][7] += 1e-12 * forged["layers"][0]["W_in"][7].abs()
    (tmp_path / "forged").mkdir()
    ok, why = _verdict(_claim(tmp_path / "a", a, rel.steps, forged, tmp_path / "forged"))
    assert not ok and "W_in" in why, why


@pytest.mark.parametrize("family,factor,tensor,k", [("bert", "ffn-input-hyperplane", "W_in", 400),
                                                     ("gpt2", "value-bias-shift", "b_O", 100)])
def test_a_translation_split_into_many_steps_buys_no_slack(family, factor, tensor, k, tmp_path):
    """A claim may write one translation as many steps of the same factor. Each step read its pivot with the
    bound that the earlier steps had put there, and added its own bound on top. So the bound compounded about
    twofold per step. A float32 BERT (seed 2) with G's FFN input hyperplane (a random element) claimed as 50 steps
    of a fiftieth had a W_in bound of 1e15 u (one step: 1.1 u), and a B with W_in[0][3, 5] x(1 + 400 u) was
    accepted; the one-step claim refuses 20 u. On a GPT-2 the 50 steps of a value bias shift let b_O entry 5 move
    by 100 u, which the one-step claim refuses. A genuine file's translation is one fit, so a factor's fit now
    counts once. Control: B = g . A is valid under the split claim."""
    from symtrans.group.relate import random_element, translation_allowance
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", family, seed=2, **({"head": True, "tie_word_embeddings": False}
                                                          if family == "gpt2" else {}))
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    (v,) = random_element(spec, a.n_layers, 2, factors=[factor])

    def part(x: Any) -> Any:
        if isinstance(x, list):
            return [part(y) for y in x]
        return {n: part(y) for n, y in x.items()} if isinstance(x, dict) else x / 50

    one = [{"factor": factor, "element": v["element"]}]
    split = [{"factor": factor, "element": part(v["element"])}] * 50
    # the bound is a fit's: the split claim's is the one step's, within the split's own float64 sums
    bounds = [translation_allowance(spec, A, apply_steps(spec, A, c), c, _precision(a))[(tensor, 0)] for c in (one, split)]
    top = [max(float(b.max()) for b in (x if isinstance(x, list) else [x])) for x in bounds]
    assert top[1] <= 1.01 * top[0], top
    _control_is_valid(tmp_path, a, split, A)
    forged = apply_steps(spec, A, split)
    forged["layers"] = [dict(lp) for lp in forged["layers"]]
    W = forged["layers"][0][tensor].clone()
    W.reshape(-1)[5 if tensor == "b_O" else 3 * W.shape[1] + 5] *= 1 + k * 2.0 ** -24
    forged["layers"][0][tensor] = W
    ok, why = _verdict(_claim(tmp_path / "a", a, split, forged, tmp_path / "forged"))
    assert not ok and tensor in why, why


@pytest.mark.parametrize("factor,scaling,tensor", [("ffn-input-hyperplane", "ln2-scaling", "W_in"),
                                                   ("attention-input-hyperplane", "ln1-scaling", "W_V")])
def test_a_hyperplane_read_in_a_frame_the_claim_chose_buys_no_slack(factor, scaling, tensor, tmp_path):
    """A probe: a GPT-2 (seed 2) whose layer-0 W_in[5, 7] (or W_V head 0 [5, 3]) A holds at -1000 times itself, and
    the claim "norm scaling D, G's input hyperplane v, then D^-1" (D 1e-3 at row 5 of layer 0), the same element
    as the hyperplane alone. The hyperplane's fit weights the pivot's rows by the gain, and the claim chose the
    gain of that frame: all the weight on row 5, whose entry is 1000 times the column's rest. The bound on the
    column became 43 u against 1.8 u in B's frame, and a B with an entry of that column x(1 + 400 u) passed (logits
    8e-7 off, 50 times the gap between A and B); the honest claim refuses it. A hyperplane read in a frame a
    later step scales unevenly is no longer followed (nothing is widened there)."""
    from symtrans.group.relate import random_element, translation_allowance
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", seed=2)
    a0 = load_model(tmp_path / "a0")
    A0 = model_blocks(a0)
    if tensor == "W_in":
        A0["layers"][0]["W_in"][5, 7] *= -1000.0
        entry = (0, 7)
    else:
        A0["layers"][0]["W_V"][0][5, 3] *= -1000.0
        entry = (0, 0, 3)
    save_weights(weights_from_blocks(a0, A0), tmp_path / "a")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    (v,) = random_element(spec, a.n_layers, 1, factors=[factor])
    d = A["layers"][0]["ln2_w" if scaling == "ln2-scaling" else "ln1_w"].shape[-1]
    D = [torch.ones(d, dtype=torch.float64) for _ in range(a.n_layers)]
    D[0][5] = 1e-3
    odd = [{"factor": scaling, "element": [{"D": torch.diag(x)} for x in D]}, {"factor": factor, "element": v["element"]},
           {"factor": scaling, "element": [{"D": torch.diag(1 / x)} for x in D]}]
    honest = [{"factor": factor, "element": v["element"]}]
    layer0 = translation_allowance(spec, A, apply_steps(spec, A, odd), odd, _precision(a)).get((tensor, 0))
    assert layer0 is None  # a hyperplane read in a frame the claim chose is not followed
    _control_is_valid(tmp_path, a, honest, A)
    for claim, where in ((odd, "odd"), (honest, "honest")):
        forged = apply_steps(spec, A, claim)
        forged["layers"] = [dict(lp) for lp in forged["layers"]]
        W = forged["layers"][0][tensor]
        W = [w.clone() for w in W] if isinstance(W, list) else W.clone()
        (W[entry[0]][entry[1:]] if isinstance(W, list) else W[entry]).mul_(1 + 400 * 2.0 ** -24)
        forged["layers"][0][tensor] = W
        (tmp_path / where).mkdir()
        ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / where))
        assert not ok and tensor in why, (where, why)


def test_a_value_gauge_shear_around_a_value_bias_shift_buys_no_slack(tmp_path):
    """A probe: a GPT-2 (d_model 256, 4 heads, seed 2) and the claim "value gauge G (a shear I + 1e7 e0 e1^T on
    layer 0's head 0), value bias shift v (a random element x1e-12), G^-1", the same element as the shift v G^-1
    alone. The shift's bound read b_V and W_O in the frame G chose (|b_V G| times |G^-1 W_O|): b_O's bound was 5e4
    against 0.18 in B's frame, and a B with b_O entry 43 x(1 + 100 u) passed; the honest claim refuses it. A tag
    whose pivot or via a step between it and B moves other than by a signed permutation times one scale is no
    longer followed."""
    from symtrans.group.relate import random_element, translation_allowance
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "gpt2", seed=2, d_model=256, n_heads=4, d_ff=512)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    L, H, dh = a.n_layers, 4, 64
    eye = torch.eye(dh, dtype=torch.float64)
    g = eye.clone()
    g[0, 1] = 1e7

    def on_head0(m: Any) -> list[dict[str, Any]]:
        return [{"g": [m if l == 0 and h == 0 else eye for h in range(H)]} for l in range(L)]

    v = [{"v": [1e-12 * x for x in e["v"]]} for e in random_element(spec, L, 1, factors=["value-bias-shift"])[0]["element"]]
    gi = torch.linalg.inv(g)
    odd = [{"factor": "vo-gauge", "element": on_head0(g)}, {"factor": "value-bias-shift", "element": v},
           {"factor": "vo-gauge", "element": on_head0(gi)}]
    honest = [{"factor": "value-bias-shift", "element": [{"v": [x @ gi if l == 0 and h == 0 else x
                                                                for h, x in enumerate(e["v"])]} for l, e in enumerate(v)]}]
    assert translation_allowance(spec, A, apply_steps(spec, A, odd), odd, _precision(a)).get(("b_O", 0)) is None
    _control_is_valid(tmp_path, a, honest, A)
    for claim, where in ((odd, "odd"), (honest, "honest")):
        forged = apply_steps(spec, A, claim)
        forged["layers"] = [dict(lp) for lp in forged["layers"]]
        forged["layers"][0]["b_O"] = forged["layers"][0]["b_O"].clone()
        forged["layers"][0]["b_O"][0, 43] *= 1 + 100 * 2.0 ** -24
        (tmp_path / where).mkdir()
        ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / where))
        assert not ok and "b_O" in why, (where, why)


def test_a_head_bias_transfer_split_around_a_large_orthogonal_part_buys_no_slack(tmp_path):
    """A probe: an untied GPT-2 (d_model 32, vocab 500, seed 2) whose final bias lies along 1/gamma (a well
    conditioned head scalar), and the claim of two final-norm bias transfers t + r then -r (together t), r
    orthogonal to 1/gamma and 3e3 in norm. The head's bound carries the scalar's error times each step's own
    component, and r never moves the scalar, so each step widened every lm_head entry about 1e3 times (34 against
    0.036 in units of u), and a B with lm_head[12, 412] x(1 + 1600 u) passed, through ``symtrans verify`` too. A
    split factor's head bound now reads its net component (``_net_component``). Control: the honest claim."""
    from symtrans.group.relate import random_element, translation_allowance
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", "gpt2", seed=2, head=True, tie_word_embeddings=False, d_model=32, n_heads=4,
                      d_ff=64, vocab=500)
    a0 = load_model(tmp_path / "a0")
    A0 = model_blocks(a0)
    inv = 1 / A0["final_ln_w"]
    A0["final_ln_b"] = (inv / inv.norm() * 3.0).to(A0["final_ln_b"].dtype)
    save_weights(weights_from_blocks(a0, A0), tmp_path / "a")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    inv = (1 / A["final_ln_w"]).reshape(1, -1)
    (c,) = random_element(spec, a.n_layers, 1, factors=["final-norm-bias-transfer"])
    t = c["element"]["t"] / c["element"]["t"].norm() * 0.01
    r = torch.randn(t.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    r = r - (r @ inv.T) / (inv @ inv.T) * inv
    r = r / r.norm() * 3e3
    odd = [{"factor": "final-norm-bias-transfer", "element": {"t": t + r}},
           {"factor": "final-norm-bias-transfer", "element": {"t": -r}}]
    honest = [{"factor": "final-norm-bias-transfer", "element": {"t": t}}]
    bounds = [translation_allowance(spec, A, apply_steps(spec, A, x), x, _precision(a))[("lm_head", None)]
              for x in (odd, honest)]
    assert float(bounds[0].max()) <= 1.01 * float(bounds[1].max()), [float(b.max()) for b in bounds]
    _control_is_valid(tmp_path, a, honest, A)
    for claim, where in ((odd, "odd"), (honest, "honest")):
        forged = apply_steps(spec, A, claim)
        forged["lm_head"] = forged["lm_head"].clone()
        forged["lm_head"][12, 412] *= 1 + 1600 * 2.0 ** -24
        (tmp_path / where).mkdir()
        ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / where))
        assert not ok and "lm_head" in why, (where, why)


@pytest.mark.parametrize("extra", ["c then -c", "a step of 1e-12 c"])
def test_a_translation_that_moves_nothing_carries_no_fit_rounding(extra, tmp_path):
    """A probe: an untied GPT-2 (d_model 32, seed 2), the honest claim of a value bias shift, and the same with a
    centring shift c then -c appended (the same element), or one centring step of 1e-12 c. A translation's fit bound
    reads only its pivot, never the component, so the named centring shift widened every W_out entry by its
    row's rounding, and a B with an entry 1/1500 of its row x(1 + 1e4 u) passed; the honest claim refuses it at
    100 u. A fit's error is no larger than the component it found, and a split factor's is its net component:
    none (or 1e-12 c) here. Control: B = g . A is valid under the claim."""
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "gpt2", seed=2, head=True, tie_word_embeddings=False, d_model=32, n_heads=4,
                      d_ff=64, vocab=500)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    A = model_blocks(a)
    (v,) = random_element(spec, a.n_layers, 1, factors=["value-bias-shift"])
    (c,) = random_element(spec, a.n_layers, 1, factors=["centring-shift"])

    def times(e: list[dict[str, Any]], x: float) -> list[dict[str, Any]]:
        return [{k: [x * y for y in w] if isinstance(w, list) else x * w for k, w in el.items()} for el in e]

    more = [times(c["element"], 1.0), times(c["element"], -1.0)] if extra == "c then -c" else [times(c["element"], 1e-12)]
    claim = [{"factor": "value-bias-shift", "element": v["element"]}] + [{"factor": "centring-shift", "element": e}
                                                                          for e in more]
    _control_is_valid(tmp_path, a, claim, A)
    W = A["layers"][0]["W_out"]
    r = W.abs().mean(1, keepdim=True) / W.abs()
    idx = tuple(int(x) for x in torch.unravel_index(r.argmax(), r.shape))  # an entry far below its row
    forged = apply_steps(spec, A, claim)
    forged["layers"] = [dict(lp) for lp in forged["layers"]]
    forged["layers"][0]["W_out"] = forged["layers"][0]["W_out"].clone()
    forged["layers"][0]["W_out"][idx] *= 1 + 1000 * 2.0 ** -24
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, forged, tmp_path / "forged"))
    assert not ok and "W_out" in why, why


@pytest.mark.parametrize("claim", ["vo-gauge g then g^-1", "vo-gauge g, the identity of S_H, g^-1",
                                   "norm scalings around a rotation and its transpose"])
def test_an_element_that_composes_to_the_identity_buys_no_condition_number(claim, tmp_path):
    """A probe: the tolerance grows with the condition number of each step that acts on a tensor, and a claim
    chooses its steps. On a random Llama-style checkpoint (seed 3), a value gauge of condition number 99 and then
    its inverse (the identity) widened every ``W_V`` and ``W_O`` tolerance about 50 times: verify accepted a B with
    every entry of those tensors x(1 +- 2e-5), its last hidden state 1.6e-5 off (a genuine B, 2e-9). Norm scalings
    of spread 10^0.6 around a residual rotation and its transpose (the rotation conjugating through the spread
    gains, condition number about 100) did the same on every weight matrix (x(1 +- 1e-5) passed). A factor whose steps
    compose counts the product's condition number (here 1): both are refused. A second probe put the identity of
    the head permutation between the gauge and its inverse, which kept them apart: the identity of another factor
    between them no longer does. Control: B = A (the element) is valid under each claim."""
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "llama", seed=3)
    a = load_model(tmp_path / "a")
    L, d = a.n_layers, a.arch.d_model
    gen = torch.Generator().manual_seed(0)
    if claim.startswith("vo-gauge"):
        G = [[_conditioned(a.arch.d_k, 99.0, 10 * l + h) for h in range(a.arch.H_kv)] for l in range(L)]
        steps = [{"factor": "vo-gauge", "element": [{"g": G[l]} for l in range(L)]},
                 {"factor": "vo-gauge", "element": [{"g": [torch.linalg.inv(M) for M in G[l]]} for l in range(L)]}]
        if "S_H" in claim:
            steps.insert(1, {"factor": "S_H", "element": [{"pi": list(range(a.arch.H)),
                                                           "kappa": list(range(a.arch.H_kv))}] * L})
        names, eps = ("W_V", "W_O"), 2e-5
    else:
        D = torch.diag(torch.logspace(0, 0.6, d, dtype=torch.float64))
        Q = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))[0]

        def scalings(M: Any) -> list[dict[str, Any]]:
            return [{"factor": f, "element": {"D": M} if f == "final-norm-scaling" else [{"D": M}] * L}
                    for f in ("ln1-scaling", "ln2-scaling", "final-norm-scaling")]

        steps = scalings(D) + [{"factor": "residual-rotation", "element": {"Q": Q}},
                               {"factor": "residual-rotation", "element": {"Q": Q.T.contiguous()}}] + \
            scalings(torch.linalg.inv(D))
        names, eps = ("W_Q", "W_K", "W_V", "W_O", "W_gate", "W_in", "W_out"), 1e-5
    A = model_blocks(a)
    _control_is_valid(tmp_path, a, steps, A)
    forged = {**A, "layers": [dict(lp) for lp in A["layers"]]}  # new dicts: A's tensors are not edited
    for lp in forged["layers"]:
        for nm in names:
            noise = lambda x: x * (1 + eps * torch.sign(torch.randn(x.shape, generator=gen, dtype=x.dtype)))  # noqa: E731
            lp[nm] = [noise(x) for x in lp[nm]] if isinstance(lp[nm], list) else noise(lp[nm])
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, forged, tmp_path / "forged"))
    assert not ok and any(nm in why for nm in names), why


def test_a_translation_and_its_negation_pass_no_condition_number_on(tmp_path):
    """A probe: a GPT-2 (seed 5) and B = g . A for a value gauge of condition number 99 with every ``W_out`` entry
    x(1 +- 2e-5) besides. The claim [vo-gauge] refuses it at ``W_out`` (4.77e-7). Appending a centring shift c and
    then -c (the same element) made the shift a fit that reads the gauge-moved ``W_O`` and moves ``W_out``, so it
    carried the gauge's 99 there (2.38e-5), and verify accepted the file. A translation factor whose steps sum to
    0 fits nothing: refused again. Control: B = g . A itself is valid under the longer claim."""
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "gpt2", seed=5)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    (shift,) = random_element(spec, a.n_layers, 0, factors=["centring-shift"])

    def negated(x: Any) -> Any:
        return [negated(v) for v in x] if isinstance(x, list) else -x

    vo = {"factor": "vo-gauge", "element": [{"g": [_conditioned(a.arch.d_k, 99.0, 10 * l + h)
                                                   for h in range(a.arch.H_kv)]} for l in range(a.n_layers)]}
    claim = [vo, shift, {"factor": "centring-shift",
                         "element": [{k: negated(v) for k, v in e.items()} for e in shift["element"]]}]
    A = model_blocks(a)
    _control_is_valid(tmp_path, a, claim, A)
    moved = apply_steps(spec, A, [vo])
    gen = torch.Generator().manual_seed(7)
    moved["layers"] = [{**lp, "W_out": lp["W_out"] * (1 + 2e-5 * torch.sign(torch.randn(
        lp["W_out"].shape, generator=gen, dtype=lp["W_out"].dtype)))} for lp in moved["layers"]]
    ok, why = _verdict(_claim(tmp_path / "a", a, claim, moved, tmp_path / "forged"))
    assert not ok and "W_out" in why, why


def test_a_gauge_carried_to_another_head_and_undone_there_buys_no_condition_number(tmp_path):
    """The class behind the probes above: a claim that keeps a gauge and its inverse apart with a step that does
    move the tensors. On a Llama-style checkpoint (seed 3): a value gauge of condition number 99 on key/value head
    0, the head permutation swapping heads 0 and 1 (queries with them), the inverse gauge on head 1 (the old head
    0), and the swap again: the identity. Each gauge step counted its own 99 (every W_V and W_O tolerance about
    50 times the honest one), so B with those entries x(1 +- 2e-5) would pass. A linear factor in several steps
    that do not multiply into one buys no condition number: refused. Control: B = A is valid under the claim."""
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a", "llama", seed=3)
    a = load_model(tmp_path / "a")
    L, H, kv = a.n_layers, a.arch.H, a.arch.H_kv
    assert kv >= 2
    per = H // kv
    eye = torch.eye(a.arch.d_k, dtype=torch.float64)
    G = _conditioned(a.arch.d_k, 99.0, 0)
    pi = list(range(per, 2 * per)) + list(range(per)) + list(range(2 * per, H))  # swap kv groups 0 and 1
    swap = {"factor": "S_H", "element": [{"pi": pi, "kappa": [1, 0] + list(range(2, kv))}] * L}
    steps = [{"factor": "vo-gauge", "element": [{"g": [G] + [eye] * (kv - 1)}] * L}, swap,
             {"factor": "vo-gauge", "element": [{"g": [eye, torch.linalg.inv(G)] + [eye] * (kv - 2)}] * L}, swap]
    A = model_blocks(a)
    _control_is_valid(tmp_path, a, steps, A)
    gen = torch.Generator().manual_seed(0)
    forged = {**A, "layers": [dict(lp) for lp in A["layers"]]}
    for lp in forged["layers"]:
        for nm in ("W_V", "W_O"):
            lp[nm] = [x * (1 + 2e-5 * torch.sign(torch.randn(x.shape, generator=gen, dtype=x.dtype))) for x in lp[nm]]
    ok, why = _verdict(_claim(tmp_path / "a", a, steps, forged, tmp_path / "forged"))
    assert not ok and ("W_V" in why or "W_O" in why), why


@pytest.mark.parametrize("family,dtype,seed", [("bert", "float32", 0), ("distilbert", "float32", 2),
                                               ("bert", "float64", 0)])
def test_relate_from_g_a_back_to_a_writes_a_file_verify_rechecks(family, dtype, seed, tmp_path):
    """A helper's probe: a random BERT A (its biases 0, as ``transformers`` initialises them) and g . A for a random
    element, stored; relate(g . A, A) answered related, and verify refused its own file from A's side at a ``b_O``
    (or ``b_in``, ``word``) entry g . A's translations cancel (1e-4 of the tensor), off by 0.2 of the tensor's
    ``u`` (3e-5 of the entry). The element's value bias shift was fitted from g . A's rounded ``b_V``; the
    pull-back's bound on that fit read the pivot in B (the original A: 0) and never in g . A, whose inverse's linear
    steps all follow its translations (:func:`symtrans.group.relate.translation_allowance`, ``b_first``). It now
    reads g . A brought back to the translation's frame. False case: the same file's claim against a g . A whose
    ``b_O`` entry there is moved by 10 times that tensor's tolerance is refused at ``b_O``."""
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", family, n_layers=2, d_model=32, n_heads=4, d_ff=64)
    save_weights(load_model(tmp_path / "a0"), tmp_path / "a", dtype=dtype)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    save_weights(weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, seed))),
                 tmp_path / "ga")
    ga = load_model(tmp_path / "ga")
    rel = relate(ga, a)
    assert rel.related, rel.summary()
    ok, why = _verdict(write_relation(rel, tmp_path / "g.json"))
    assert ok, why
    if (family, dtype) != ("bert", "float32"):
        return
    (tol,) = [r["tolerance"] for r in rel.residuals if (r["tensor"], r["layer"]) == ("b_O", 1)]
    forged = ga.copy()
    b_o = forged.tensors["b_O"][1]
    i = int(b_o.abs().argmin())  # an entry the translations cancel, where the true element's file was refused
    b_o[i] += 10 * tol * float(b_o.norm())
    save_weights(forged, tmp_path / "forged")
    forged = load_model(tmp_path / "forged")
    claim = Relation(True, rel.steps, [], [], None, _describe(forged), _describe(a))
    ok, why = _verdict(write_relation(claim, tmp_path / "forged.json"))
    assert not ok and "b_O (layer 1)" in why, why


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_a_float64_pair_whose_sides_part_is_undecided_not_a_file_verify_refuses(family, tmp_path):
    """Stored in float64, B's rounding is as fine as the float64 arithmetic that applies the element, and the two
    sides carry that arithmetic apart. relate(g . A, A) (element seed 5, BERT, RoBERTa and DistilBERT alike) was
    related, having left A's side to verify on a LayerNorm model, and verify refused its file at b_in from A's side
    (1.98e-15 against 1.26e-15); relate(A, g . A) already said "cannot decide". relate now measures A's side
    wherever B holds a float64 tensor: seed 5 is "cannot decide" both ways, and every file it writes re-checks.
    False case: element seed 1, related both ways, each file valid."""
    from symtrans.errors import SymtransError
    from symtrans.group.relate import random_element
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "a0", family, n_layers=2, d_model=32, n_heads=4, d_ff=64)
    save_weights(load_model(tmp_path / "a0"), tmp_path / "a", dtype="float64")
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    answers = {}
    for seed in (1, 5):
        ga = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, seed)))
        save_weights(ga, tmp_path / f"ga{seed}", dtype="float64")
        ga = load_model(tmp_path / f"ga{seed}")
        for name, (x, y) in (("back", (ga, a)), ("forth", (a, ga))):
            try:
                rel = relate(x, y)
            except SymtransError as err:
                assert "cannot decide" in str(err), err
                answers[seed, name] = "undecided"
                continue
            assert rel.related, rel.summary()
            ok, why = _verdict(write_relation(rel, tmp_path / f"g{seed}{name}.json"))
            assert ok, why
            answers[seed, name] = "related"
    assert answers[1, "back"] == answers[1, "forth"] == "related"
    assert answers[5, "back"] == answers[5, "forth"] == "undecided"
