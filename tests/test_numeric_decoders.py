"""Decoders (GPT-2, Llama, Mistral, Qwen2) against transformers' own eager implementation.

Random-init tiny models of each family are saved with ``save_pretrained`` and
loaded from that directory (and from the in-memory model). Every hidden state,
every head's attention matrix A^h and every head's output Y^h (the input of the
output projection, captured by a hook) must agree:

* float32: < 1e-5 (both sides round in float32; different summation orders give ~1e-7 here);
* float64: < 1e-10. transformers' Llama-family code normalises (RMSNorm), computes
  rotary angles and takes the softmax in float32 even in a float64 model, so for
  that family the float64 comparison runs our forward with those same three steps
  in float32 (``float32_internals=True``); the exact float64 forward is then
  checked against it to the float32 rounding those steps imply (< 1e-5).
"""

from __future__ import annotations

import pytest
import torch

from symtrans.numeric import encode, load_model
from symtrans.numeric.fixtures import DECODER_FAMILIES, random_checkpoint

IDS = torch.tensor([7, 8, 5, 9, 10, 5, 11, 12, 70, 3, 64, 99])
TOL = {"float32": 1e-5, "float64": 1e-10}


def _reference(model, ids, dtype):
    """transformers' hidden states, attention matrices and per-head outputs (hooked at the output projection)."""
    model = model.to(getattr(torch, dtype))
    base = getattr(model, "model", None) or getattr(model, "transformer", None) or model
    blocks = base.h if hasattr(base, "h") else base.layers
    heads_in: list[torch.Tensor] = []
    hooks = []
    for block in blocks:
        proj = block.attn.c_proj if hasattr(block, "attn") else block.attention.dense if hasattr(
            block, "attention") else block.self_attn.o_proj  # GPT-2, GPT-NeoX, the Llama family
        hooks.append(proj.register_forward_hook(lambda m, inp, out: heads_in.append(inp[0][0].detach())))
    try:
        with torch.no_grad():
            out = model(input_ids=ids[None], output_hidden_states=True, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    return [h[0] for h in out.hidden_states], [a[0] for a in out.attentions], heads_in


def _errors(model, weights, ids, dtype, float32_internals):
    hidden, attn, heads_in = _reference(model, ids, dtype)
    tr = encode(weights, input_ids=ids, float32_internals=float32_internals)
    assert len(hidden) == len(tr.hidden_states) == weights.n_layers + 1
    e_hidden = max(float((r - o).abs().max()) for r, o in zip(hidden, tr.hidden_states))
    e_attn = max(float((r - t.A).abs().max()) for r, t in zip(attn, tr.layers))
    n, H = len(ids), weights.n_heads
    e_heads = max(float((r.reshape(n, H, -1).permute(1, 0, 2) - t.Y).abs().max())
                  for r, t in zip(heads_in, tr.layers))
    return e_hidden, e_attn, e_heads


@pytest.fixture(scope="module", params=DECODER_FAMILIES)
def checkpoint(request, tmp_path_factory):
    family = request.param
    extra = {"sliding_window": 5} if family == "mistral" else {}  # a window that masks at n = 12
    path, model = random_checkpoint(tmp_path_factory.mktemp(family), family, n_layers=2, **extra)
    return family, path, model


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_parity_every_hidden_state_attention_and_head(checkpoint, dtype):
    family, path, model = checkpoint
    f32 = family != "gpt2" and dtype == "float64"
    for source in (path, model):
        w = load_model(source, dtype=dtype)
        errs = _errors(model, w, IDS, dtype, f32)
        print(f"\n{family} {dtype} from {type(source).__name__}: hidden {errs[0]:.2g}, A {errs[1]:.2g}, "
              f"Y^h {errs[2]:.2g}")
        assert max(errs) < TOL[dtype], (family, dtype, errs)


def test_exact_float64_forward_differs_from_transformers_only_by_its_float32_steps(checkpoint):
    family, path, model = checkpoint
    w = load_model(path)
    exact = encode(w, input_ids=IDS).hidden_states
    mimic = encode(w, input_ids=IDS, float32_internals=True).hidden_states
    gap = max(float((a - b).abs().max()) for a, b in zip(exact, mimic))
    if family == "gpt2":
        assert gap == 0.0  # no float32 step to reproduce
    else:
        assert 0 < gap < 1e-5, gap  # the float32 rounding of RMSNorm, rotary angles and softmax


def test_structure_is_read_from_the_checkpoint(checkpoint):
    family, path, _ = checkpoint
    w = load_model(path)
    tr = encode(w, input_ids=IDS)
    A = tr.layers[0].A
    assert bool((torch.triu(A, diagonal=1) == 0).all()), "causal: no weight on later tokens"
    assert torch.allclose(A[:, 0, 0], torch.ones_like(A[:, 0, 0]))  # the first token attends only to itself
    if family == "mistral":
        i = torch.arange(len(IDS))
        assert bool((A[:, i[:, None] - i[None, :] >= 5] == 0).all()), "sliding window of 5"
    if family == "gpt2":
        assert w.pos is not None and w.final_ln_b is not None
    elif family == "gpt_neox":  # no position table, LayerNorm biases, one key/value head per query head
        assert w.pos is None and w.final_ln_b is not None and tuple(w.W_K.shape[:2]) == (2, 4)
        assert w.arch.parallel_residual and w.arch.rotary_width == 4 and "W_gate" not in w.layer(0)
    else:
        assert w.pos is None and tuple(w.W_K.shape[:2]) == (2, 2) and tuple(w.W_Q.shape[:2]) == (2, 4)
        assert "W_gate" in w.layer(0)
    if family == "qwen2":
        assert float(w.b_Q.abs().max()) > 0 and float(w.b_O.abs().max()) == 0  # Q/K/V biases, none on O


def test_negative_control_a_wrong_key_value_head_map_is_caught(checkpoint):
    """Parity is not vacuous: swapping the key/value heads (or, for GPT-2, two query heads) breaks it."""
    family, path, model = checkpoint
    w = load_model(path).copy()
    name = "W_Q" if family == "gpt2" else "W_K"
    w.tensors[name][0] = w.tensors[name][0].flip(0)
    errs = _errors(model, w, IDS, "float64", family != "gpt2")
    assert errs[1] > 1e-3, errs
