"""``save_weights`` writes what it is given: a round trip of MODIFIED weights, on every family it writes.

A round trip of unmodified weights cannot tell a writer that skips a tensor (the source's copy is kept) from one
that writes it; the writer did skip every layer tensor of Gemma 2/3, Qwen3, Phi-3, OLMo 2 and SmolLM3, so
``symtrans canonical gemma3-270m --out DIR`` wrote the original model under the canonical form's name.
"""

from __future__ import annotations

import pytest
import torch

from symtrans.errors import SymtransError
from symtrans.numeric.fixtures import FAMILIES, random_checkpoint
from symtrans.numeric.save import save_weights
from symtrans.numeric.weights import load_model


@pytest.mark.parametrize("family", FAMILIES)
def test_every_tensor_written_is_read_back(family, tmp_path):
    random_checkpoint(tmp_path / "a", family, seed=0)
    w = load_model(tmp_path / "a")
    gen = torch.Generator().manual_seed(1)
    moved = w.copy()
    for name, v in moved.tensors.items():
        if v is None or name in ("ln1_b", "ln2_b", "emb_ln_b", "final_ln_b") and not bool((v != 0).any()):
            continue  # RMSNorm's absent shifts stay zero (a non-zero one is refused: below)
        if any(name.startswith(p) for p in ("b_",)) and not bool((v != 0).any()):
            continue  # an absent bias (zeros in the per-head layout): nothing stored to write it to
        v.add_(0.25 * torch.randn(v.shape, generator=gen, dtype=v.dtype))
    back = load_model(save_weights(moved, tmp_path / "b"))
    for name, v in moved.tensors.items():
        if v is None:
            continue
        x = back.tensors[name]
        scale = max(float(v.abs().max()), 1.0)
        assert float((x - v).abs().max()) <= 1e-6 * scale, name  # float32 storage
        if not torch.equal(v, w.tensors[name]):
            assert not torch.equal(x, w.tensors[name]), name  # the moved value, not the source's


def test_a_tensor_the_source_lacks_is_refused_not_dropped(tmp_path):
    random_checkpoint(tmp_path / "a", "llama", seed=0)
    w = load_model(tmp_path / "a")
    w.tensors["b_O"][0, 0] = 1.0  # Llama stores no o_proj bias
    with pytest.raises(SymtransError, match="o_proj.bias: the weights hold non-zero values"):
        save_weights(w, tmp_path / "b")


@pytest.mark.slow
@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in ("bert", "roberta", "distilbert")])
def test_written_elements_and_canonical_forms_are_related_from_disk(family, tmp_path):
    """The user's path on every decoder family it writes: g . A and canonical(A) written as checkpoints (each
    tensor rounded to its stored dtype), read back, and related to A; the element file re-checks (GPT-NeoX, whose
    partial rotary positions canonical refuses: g . A only). Before the writer's fix, canonical forms of Gemma 2/3, Qwen3, Phi-3, OLMo 2 and SmolLM3 were written as A itself."""
    import json

    from symtrans.group.canonical import canonical
    from symtrans.group.numeric import model_blocks, weights_from_blocks
    from symtrans.group.relate import apply_steps, check_relation, random_element, relate, write_relation
    from symtrans.group.spec import GroupSpec

    random_checkpoint(tmp_path / "a", family, seed=0)
    a = load_model(tmp_path / "a")
    spec = GroupSpec.from_arch(a.arch)
    save_weights(weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 3))),
                 tmp_path / "b")
    rel = relate(tmp_path / "a", tmp_path / "b")
    assert rel.related, rel.summary()
    path = write_relation(rel, tmp_path / "g.json")
    assert check_relation(json.loads(path.read_text()), path)[0]
    if family == "gpt_neox":  # half of each head rotated: the canonical form says it does not model that
        with pytest.raises(SymtransError, match="does not model partial rotary positions"):
            canonical(tmp_path / "a")
        return
    c = canonical(tmp_path / "a")
    save_weights(c.weights, tmp_path / "c")
    assert not torch.equal(load_model(tmp_path / "c").tensors["W_Q"], a.tensors["W_Q"])  # the form was written
    assert relate(tmp_path / "a", tmp_path / "c").related


def test_canonical_never_writes_over_a_checkpoint_it_did_not_write(tmp_path, capsys):
    """``canonical --out`` wrote into any directory: the model's own (its weights replaced without a word), another
    checkpoint's (its weights overwritten, its tokenizer kept beside the new weights), through a link. Each is now
    refused before the solve, the files there untouched; a new directory, and one symtrans wrote, are written."""
    import hashlib

    from symtrans.cli import main

    def digest(d):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}

    random_checkpoint(tmp_path / "a", "gpt2", seed=0)
    random_checkpoint(tmp_path / "other", "gpt2", seed=1)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("mine\n")
    (tmp_path / "link").symlink_to(tmp_path / "other")
    a = str(tmp_path / "a")
    for out, said in (("a", "the model's own checkpoint directory"), ("other", "a checkpoint symtrans did not write"),
                      ("notes", "files symtrans did not write (README.md)"), ("link", "a symbolic link")):
        before = digest(tmp_path / out)
        assert main(["canonical", a, "--out", str(tmp_path / out), "--quiet"]) == 2, out
        assert said in capsys.readouterr().err, out
        assert digest(tmp_path / out) == before, out  # nothing written there
    assert main(["canonical", a, "--out", str(tmp_path / "can"), "--quiet"]) == 0  # a new directory
    from symtrans.numeric.save import WRITTEN_BY, _mark

    assert _mark(tmp_path / "can" / "model.safetensors") == WRITTEN_BY[1]
    assert _mark(tmp_path / "a" / "model.safetensors") is None  # a checkpoint symtrans did not write: unmarked
    # written again (a symtrans directory), from a source without the tokenizer file an earlier write copied
    (tmp_path / "can" / "vocab.txt").write_text("from an earlier source\n")
    first = load_model(tmp_path / "can").weights_hash
    assert main(["canonical", str(tmp_path / "other"), "--out", str(tmp_path / "can"), "--quiet"]) == 0
    assert not (tmp_path / "can" / "vocab.txt").exists()
    assert load_model(tmp_path / "can").weights_hash != first
