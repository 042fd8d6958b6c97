"""The toolkit's forward pass against transformers' own models (the reference).

The bundled real model (all-MiniLM-L6-v2) and small random RoBERTa, DistilBERT
and sharded BERT checkpoints: hidden states must agree to < 1e-5 in float32.
The achieved error is printed (pytest -s) and put in every assertion message.
"""

from __future__ import annotations

import pytest
import torch

from symtrans.numeric import encode, load_model
from symtrans.numeric.fixtures import random_checkpoint
from symtrans.numeric.weights import default_model_path

TOL = 1e-5  # float32: the two implementations sum in different orders; observed errors are ~1e-6


def _max_error(reference, ours) -> float:
    assert len(reference) == len(ours), f"{len(reference)} reference hidden states, {len(ours)} ours"
    return max(float((r.reshape(ours[0].shape) - o).abs().max()) for r, o in zip(reference, ours))


@pytest.fixture(scope="module")
def bert():
    from transformers import BertModel

    model = BertModel.from_pretrained(str(default_model_path()), attn_implementation="eager").eval()
    return model, load_model("default", dtype="float32")


def _reference(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.as_tensor(ids)[None], output_hidden_states=True).hidden_states


def test_text_through_bundled_tokenizer(bert):
    model, w = bert
    text = "Rank collapse: do residual connections and LayerNorm really prevent it?"
    trace = encode(w, text=text)
    err = _max_error(_reference(model, trace.input_ids), trace.hidden_states)
    print(f"\nparity (text, n={len(trace.input_ids)}, float32): max abs error {err:.3g}")
    assert err < TOL, f"max abs error {err:.3g} >= {TOL}"


def test_token_ids(bert):
    model, w = bert
    ids = torch.randint(1000, 30000, (64,), generator=torch.Generator().manual_seed(3))
    err = _max_error(_reference(model, ids), encode(w, input_ids=ids).hidden_states)
    print(f"\nparity (token ids, n=64, float32): max abs error {err:.3g}")
    assert err < TOL, f"max abs error {err:.3g} >= {TOL}"


def test_given_X_runs_the_encoder_only(bert):
    model, w = bert
    ids = torch.arange(2000, 2016)
    ref = _reference(model, ids)
    trace = encode(w, X=ref[0][0])  # transformers' own embedding output as X
    err = _max_error(ref[1:], trace.hidden_states[1:])
    print(f"\nparity (given X, n=16, float32): max abs error {err:.3g}")
    assert err < TOL, f"max abs error {err:.3g} >= {TOL}"


def test_float64_forward_agrees_with_float32_reference(bert):
    model, _ = bert
    ids = torch.arange(3000, 3020)
    err = _max_error(_reference(model, ids), encode(load_model("default"), input_ids=ids).hidden_states)
    print(f"\nparity (float64 ours vs float32 transformers): max abs error {err:.3g}")
    assert err < TOL, f"max abs error {err:.3g} >= {TOL}"


@pytest.mark.parametrize("family,extra", [("roberta", {}), ("roberta", {"pad_token_id": 5}),
                                          ("distilbert", {}), ("bert", {})])
def test_other_families_from_directory_and_memory(tmp_path, family, extra):
    path, model = random_checkpoint(tmp_path / family, family, n_layers=3, **extra)
    ids = torch.tensor([7, 8, 5, 9, 10, 5, 11, 12])  # contains 5: a padding token when pad_token_id=5
    with torch.no_grad():
        ref = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    for source in (path, model):
        err = _max_error(ref, encode(load_model(source, dtype="float32"), input_ids=ids).hidden_states)
        print(f"\nparity ({family} {extra}, {type(source).__name__}): max abs error {err:.3g}")
        assert err < TOL, f"{family} from {type(source).__name__}: max abs error {err:.3g} >= {TOL}"


def test_sharded_checkpoint_loads_identically(tmp_path):
    whole, model = random_checkpoint(tmp_path / "whole", "bert", n_layers=2, d_model=64, d_ff=128)
    sharded, _ = random_checkpoint(tmp_path / "sharded", "bert", n_layers=2, d_model=64, d_ff=128,
                                   max_shard_size="200KB")
    assert (sharded / "model.safetensors.index.json").exists()
    assert len(list(sharded.glob("*.safetensors"))) > 1, "the checkpoint should really be sharded"
    a, b = load_model(whole), load_model(sharded)
    for name, t in a.tensors.items():
        if t is not None:
            assert torch.equal(t, b.tensors[name]), name
    ids = torch.arange(10, 30)
    with torch.no_grad():
        ref = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    err = _max_error(ref, encode(load_model(sharded, dtype="float32"), input_ids=ids).hidden_states)
    assert err < TOL, f"sharded: max abs error {err:.3g}"
