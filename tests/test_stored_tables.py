"""The word table kept in its stored dtype until read whole (symtrans.numeric.weights._Tensors).

A forward reads rows of it (``table_rows``), converted exactly; any whole read converts it once, so no
reader ever sees the stored dtype where it expects the working one. Each test has its false case.
"""

from __future__ import annotations

import pickle

import pytest
import torch

from symtrans.errors import SymtransError
from symtrans.numeric import encode, load_model
from symtrans.numeric.fixtures import random_checkpoint
from symtrans.numeric.weights import table_rows

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path, _ = random_checkpoint(tmp_path_factory.mktemp("bert") / "m", "bert", n_layers=2)
    return path


def _fresh(ckpt):
    w = load_model(str(ckpt))
    assert w.tensors.pending == ("word",)  # float32 on disk, not yet converted
    return w


def test_a_forward_reads_rows_only_and_matches_the_converted_table(ckpt):
    w = _fresh(ckpt)
    got = encode(w, n=8, seed=0)
    assert w.tensors.pending == ("word",)  # the forward converted no whole table
    ref = load_model(str(ckpt))
    ref.tensors["word"]  # converted whole: the reference reads an ordinary float64 table
    assert ref.tensors.pending == ()
    want = encode(ref, n=8, seed=0)
    assert torch.equal(got.embeddings, want.embeddings)
    assert all(torch.equal(a.out, b.out) for a, b in zip(got.layers, want.layers))
    # false case: the stored float32 rows, unconverted, are another dtype (what a missed conversion would feed)
    stored = w.tensors._pending["word"][0]
    assert stored.dtype == torch.float32 and table_rows(w, "word", [0]).dtype == torch.float64


def test_every_whole_read_converts_once(ckpt):
    for read in (lambda t: t["word"], lambda t: t.get("word"), lambda t: dict(t)["word"], lambda t: {**t}["word"],
                 lambda t: dict(t.items())["word"], lambda t: list(t.values())[list(t).index("word")]):
        w = _fresh(ckpt)
        table = read(w.tensors)
        assert table.dtype == torch.float64 and w.tensors.pending == ()
        assert torch.equal(table[[5, 2]], table_rows(load_model(str(ckpt)), "word", [5, 2]))
    assert _fresh(ckpt).word.dtype == torch.float64  # attribute access too


def test_copies_and_pickles(ckpt):
    w = _fresh(ckpt)
    c = w.copy()
    assert c.tensors.pending == ("word",)
    c.tensors["word"].zero_()  # converts the copy's own table, then zeroes it
    assert w.tensors.pending == ("word",) and float(w.tensors["word"].abs().max()) > 0
    back = pickle.loads(pickle.dumps(_fresh(ckpt).tensors))
    assert type(back) is dict and back["word"].dtype == torch.float64


def test_the_placeholder_is_loud_where_a_reader_bypasses_the_mapping(ckpt):
    """dict's own methods on the mapping (not its overrides) see a placeholder that raises, never a None."""
    w = _fresh(ckpt)
    raw = dict.__getitem__(w.tensors, "word")
    assert raw is not None
    with pytest.raises(SymtransError, match="conversion"):
        raw.shape


def test_replacing_or_removing_a_waiting_table_forgets_the_stored_one(ckpt):
    """update/pop/del go through the mapping: a replaced table is never converted over its replacement."""
    w = _fresh(ckpt)
    new = torch.zeros_like(w.tensors._pending["word"][0], dtype=torch.float64)
    w.tensors.update({"word": new})  # dict.update would bypass __setitem__ and leave the stored table waiting
    assert w.tensors.pending == () and w.tensors["word"] is new
    w = _fresh(ckpt)
    assert w.tensors.pop("word").dtype == torch.float64 and "word" not in w.tensors
    w = _fresh(ckpt)
    del w.tensors["word"]
    assert w.tensors.pending == () and w.tensors.get("word") is None
    w = _fresh(ckpt)
    assert w.tensors.copy()["word"].dtype == torch.float64 and type(w.tensors.copy()) is dict


def test_to_another_dtype_keeps_the_table_waiting_for_that_dtype(ckpt):
    w = _fresh(ckpt)
    f32 = w.to(dtype="float32")
    assert w.tensors.pending == ("word",) and f32.tensors.pending == ("word",)  # no float64 copy on the way
    assert f32.tensors["word"].dtype == torch.float32 and f32.W_Q.dtype == torch.float32
    assert torch.equal(f32.tensors["word"].double(), w.tensors["word"])  # float32 values, exactly
