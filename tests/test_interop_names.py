"""Every row of symtrans's name map (symtrans/names.py, docs/interop.md) against a real TransformerLens 4.x bridge.

The bridge and symtrans read one random GPT-2 checkpoint; each activation that the map pairs is compared
tensor for tensor after moving TransformerLens's axes to symtrans's, each size with the bridge's config,
and each weight with the bridge's parameter. A row naming the wrong hook (or the wrong axis order) fails.
"""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

torch = pytest.importorskip("torch")

from symtrans.names import ACTIVATIONS, SIZES, WEIGHTS  # noqa: E402
from tests.test_numeric_models import _interop, agrees_in_float32  # noqa: E402

IDS = [[3, 17, 5, 29, 11, 2, 7]]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The bridge's cache (with ``hook_result``) and symtrans's trace, on one checkpoint and one input."""
    _interop("transformer_lens")
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    from symtrans.numeric.fixtures import random_checkpoint
    from symtrans.numeric.forward import encode
    from symtrans.numeric.weights import default_model_path, load_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path, _ = random_checkpoint(tmp_path_factory.mktemp("gpt2"), "gpt2", head=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(default_model_path())
    bridge = TransformerBridge.boot_transformers(str(path), device="cpu", tokenizer=tokenizer)
    bridge.set_use_attn_result(True)
    _, cache = bridge.run_with_cache(torch.tensor(IDS))
    weights = load_model(str(path), dtype="float32")
    return bridge, cache, weights, encode(weights, input_ids=torch.tensor(IDS[0]))


def _to_symtrans(tensor, row):
    """Drop TransformerLens's batch axis and put its axes in symtrans's order (names read off the row)."""
    tl = [a.strip() for a in row.tl_axes.split(",")][1:]
    ours = [a.strip() for a in row.symtrans_axes.split(",")]
    alias = {"d_head": "d_v", "query": "query", "key": "key"}
    tl = [alias.get(a, a) for a in tl]
    return tensor[0].permute(*[tl.index(a) for a in ours])


def _agrees(trace, cache, row, layer) -> tuple[bool, float, float]:
    """Whether the trace's field and the bridge's hook hold one tensor: (agrees, max deviation, tolerance)."""
    return agrees_in_float32(getattr(trace.layers[layer], row.symtrans), _to_symtrans(cache[row.hook(layer)], row))


@pytest.mark.parametrize("row", [r for r in ACTIVATIONS if r.forms in ("both", "pre-ln")], ids=lambda r: r.symtrans)
def test_each_activation_is_the_hook_the_map_names(run, row):
    """GPT-2 is pre-LN: every row that holds on pre-LN models (the post-LN ones: :func:`test_post_ln_rows_on_bert`)."""
    bridge, cache, weights, trace = run
    for layer in range(bridge.cfg.n_layers):
        ok, dev, tol = _agrees(trace, cache, row, layer)
        assert ok, (row.symtrans, layer, dev, tol)


@pytest.fixture(scope="module")
def bert():
    """The bridge's cache and symtrans's trace of the bundled all-MiniLM-L6-v2 (post-LN BERT), one input."""
    _interop("transformer_lens")
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    from symtrans.numeric.forward import encode
    from symtrans.numeric.weights import default_model_path, load_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = str(default_model_path())
    bridge = TransformerBridge.boot_transformers(path, device="cpu",
                                                 tokenizer=transformers.AutoTokenizer.from_pretrained(path))
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 6251, 102]])
    _, cache = bridge.run_with_cache(ids)
    return bridge, cache, encode(load_model(path, dtype="float32"), input_ids=ids[0])


@pytest.mark.parametrize("row", [r for r in ACTIVATIONS if r.forms in ("both", "post-ln") and r.symtrans != "YO"],
                         ids=lambda r: r.symtrans)
def test_post_ln_rows_on_bert(bert, row):
    """Every row that holds on post-LN encoders against the real bridge on the bundled BERT: ``hook_resid_post`` is
    the block's output after the second norm (``out``), ``hook_resid_mid`` the second norm's input (``pre_ln2``).

    Not ``hook_result`` (YO): TransformerLens 4.3's BERT ``AttentionBridge`` refuses ``set_use_attn_result``
    (NotImplementedError), so the bridge has no such hook on BERT; GPT-2 checks that row."""
    bridge, cache, trace = bert
    for layer in range(bridge.cfg.n_layers):
        ok, dev, tol = _agrees(trace, cache, row, layer)
        assert ok, (row.symtrans, layer, dev, tol)


def test_post_ln_resid_mid_is_not_the_attention_sum(bert):
    """The false case: on post-LN BERT the bridge's ``hook_resid_mid`` is not ``X + MHA(X) + b_O`` (``pre_ln1``, the
    pre-LN row and the legacy HookedEncoder's hook), and ``hook_resid_post`` is not the sum before the second norm."""
    from symtrans.group.hooks import hook_rows

    bridge, cache, trace = bert
    mid = next(r for r in ACTIVATIONS if r.symtrans == "pre_ln1")
    assert mid.forms == "pre-ln"
    assert not _agrees(trace, cache, mid, 1)[0]
    post_as_sum = dataclasses.replace(next(r for r in ACTIVATIONS if r.symtrans == "pre_ln2"),
                                      tl="blocks.{l}.hook_resid_post")
    assert not _agrees(trace, cache, post_as_sum, 1)[0]
    rows = dict(hook_rows("minilm-l6-h384"))
    assert (rows["resid_mid"], rows["resid_post"]) == ("pre_ln2", "out")  # the gauge table reads these rows


def test_a_wrong_row_fails_the_comparison(run):
    """The false case: the map's Y against the hook of the value vectors (hook_v), not hook_z, does not match."""
    bridge, cache, weights, trace = run
    row = next(r for r in ACTIVATIONS if r.symtrans == "Y")
    wrong = _to_symtrans(cache["blocks.0.attn.hook_v"], row).double()
    assert float((trace.layers[0].Y.double() - wrong).abs().max()) > 1e-3


def test_sizes_and_weights_are_the_bridge_s(run):
    bridge, _, weights, _ = run
    arch = weights.arch
    for k, theirs in SIZES.items():  # every size but n, which is an input's length, not the model's
        if k != "n":
            assert getattr(bridge.cfg, theirs) == getattr(arch, {"vocab": "vocab_size"}.get(k, k)), k
    for ours_name, theirs in WEIGHTS.items():
        key = ours_name.split()[0]
        attr = theirs.split()[0]
        ref = weights.tensors[key]
        if attr.startswith("blocks."):
            _, layer_tmpl, module, name = attr.split(".")
            for layer in range(arch.L):
                got = getattr(getattr(bridge.blocks[layer], module), name).detach()
                assert torch.allclose(ref[layer].float(), got.float()), (key, layer)
                assert re.sub(r"\s", "", theirs.split("[")[1]).count(",") + 1 == got.dim()
        else:
            assert torch.allclose(ref.float(), getattr(bridge, attr).detach().float()), key


# ----------------------------------------------------------------- an ActivationCache in place of hidden states
def test_activation_cache_gives_the_hidden_states(run, tmp_path):
    """A real bridge's ActivationCache: measured in its own dtype, and checked against symtrans's forward."""
    import symtrans

    bridge, cache, weights, trace = run
    m = symtrans.measure(weights.source, activations=cache, dtype="float32")
    check = m.record.activations
    assert check["holds"] is True and check["dtype"] == "float32" and len(check["deviation"]) == bridge.cfg.n_layers
    assert max(check["deviation"]) < check["tolerance"] and check["margin_decades"] > 0
    ours = symtrans.measure(weights.source, dtype="float32", activations={k: cache[k] for k in cache.keys()})
    assert ours.record.profiles["full"].ranks == m.record.profiles["full"].ranks
    assert m.record.input.startswith("activation cache")


def test_activation_cache_of_another_model_is_refused(run, tmp_path):
    """The false cases: a cache of another checkpoint, a batch of two, a cache filtered without the outputs."""
    import symtrans
    from symtrans.errors import SymtransError
    from symtrans.numeric.fixtures import random_checkpoint

    bridge, cache, weights, trace = run
    other, _ = random_checkpoint(tmp_path / "other", "gpt2", head=True, seed=7)
    with pytest.raises(SymtransError, match=r"differs from this model's forward .* another model"):
        symtrans.measure(str(other), activations=cache, dtype="float32")
    two = {k: torch.cat([cache[k], cache[k]]) for k in cache.keys() if "resid" in k}
    with pytest.raises(SymtransError, match="batch of 2 sequences"):
        symtrans.measure(weights.source, activations=two, dtype="float32")
    only_inputs = {k: cache[k] for k in cache.keys() if k.endswith("hook_resid_pre")}
    with pytest.raises(SymtransError, match="no 'blocks.0.hook_resid_post'"):
        symtrans.measure(weights.source, activations=only_inputs, dtype="float32")
    from symtrans import progress

    assert not progress._OPEN  # a refused measurement leaves no progress bar beating behind it
