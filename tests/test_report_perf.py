"""Report infrastructure: one weights load per context, lean traces, no heavy imports in the hot path."""

import subprocess
import sys

import pytest
import torch

from symtrans.producers import common
from symtrans.context import Context
from symtrans.precision import EPS64


@pytest.mark.skipif(torch.cuda.is_available(), reason="device None means CUDA here")
def test_device_none_and_cpu_share_one_load():
    ctx = Context(model="default", n=4)
    w = ctx.weights()
    assert ctx.weights(dtype="float64", device="cpu") is w  # the certificates' request: same object
    assert ctx.weights(dtype="float32", device="cpu") is not w  # a different dtype is a different load
    assert ctx.loaded_weights() is w
    assert Context(model="default").loaded_weights() is None


def test_lean_trace_equals_full_forward_and_holds_less():
    from symtrans.numeric import encode, load_model

    w = load_model("default")
    ctx = Context(model="default", n=12).preload(w)
    lean, full = common.trace(ctx), encode(w, n=12, seed=0)
    for a, b in zip(lean.layers, full.layers):
        for f in ("X", "A", "Y", "YO", "mha", "pre_ln1", "X1", "ffn", "pre_ln2", "out"):
            assert torch.equal(getattr(a, f), getattr(b, f)), f
        assert "YO" not in vars(a) and "X1" not in vars(a)  # recomputed on read, not held (A, H n^2, is held)
    # a trace of broken weights differs: the lean trace reads the context's weights, not a cache
    broken = w.copy()
    broken.W_O.mul_(2.0)
    other = common.trace(Context(model="default", n=12).preload(broken))
    assert not torch.equal(other.layers[0].YO, lean.layers[0].YO)


def test_flop_share_and_jacobian_checks_import_neither_transformers_nor_dynamo():
    code = ("import sys\n"
            "from symtrans.context import Context\n"
            "from symtrans.producers import sec5, sec6, sec7\n"
            "ctx = Context(model='default', n=8)\n"
            "sec6.check_cor_dff(ctx); sec5.check_prop_5_4(ctx); sec5.check_thm_5_3(ctx); sec7.check_recovery(ctx)\n"
            "print(sorted(m for m in ('transformers', 'torch._dynamo') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


#: what two BLAS paths to one product may differ by. MKL on Intel computes each row of a product independently of
#: the rows stacked with it, so batched and one-at-a-time states and einsum agree bit for bit; on an AMD EPYC it
#: blocks by the whole product's shape, and they differ at rounding level (measured: at most 6.8e-16 of the
#: largest entry, about 3 eps). 64 eps leaves 20x; every false case below moves by 3e-9 or more.
SAME_SUMS = 64 * EPS64


def _same_sums(a, b) -> bool:  # noqa: ANN001
    """Equal bit for bit, or within :data:`SAME_SUMS` of the larger entry (another BLAS blocking)."""
    return torch.equal(a, b) or float((a - b).abs().max()) <= SAME_SUMS * float(b.abs().max())


def test_attention_projections_equal_einsum_bit_for_bit():
    """attention() projects with ``X @ W`` (per-head GEMMs): the values einsum gave, to the last bit where the BLAS
    computes each row alone (MKL on Intel), within :data:`SAME_SUMS` otherwise."""
    from symtrans.numeric import encode, load_model
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.threads import single_threaded

    with single_threaded():
        for w, n in ((load_model("default"), 40), (tiny_decoder("gemma3"), 9)):
            X = encode(w, n=n, seed=0).embeddings
            lay = w.layer(0)
            for key in ("W_Q", "W_K", "W_V"):
                assert _same_sums(X @ lay[key], torch.einsum("nd,hdk->hnk", X, lay[key])), key
            assert not _same_sums(X @ lay["W_Q"], (X + 1e-9) @ lay["W_Q"])  # the comparison can fail


def test_loading_a_gemma_checkpoint_does_not_import_dynamo(tmp_path):
    """check_headers and cor-dff's FLOP count run on meta tensors; arithmetic on one imports torch._dynamo (seconds)."""
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.numeric.save import save_weights

    path = save_weights(tiny_decoder("gemma3"), tmp_path / "g3")
    code = ("import sys\n"
            "from symtrans.numeric import load_model\n"
            "from symtrans.producers.sec6 import count_matmul_flops\n"
            f"w = load_model({str(path)!r})\n"
            "print(w.arch.gain_offset, w.n_kv_heads < w.n_heads, 'torch._dynamo' in sys.modules)\n"
            "count_matmul_flops(w.layer(0, shared_kv=True), 5)  # cor-dff's count: kv_index on a meta arange\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[2:] == ["False", "False"], out.stdout + out.stderr[-2000:]
    assert float(out.stdout.split()[0]) != 0  # the gain offset path (Gemma's 1 + w) was taken
    assert out.stdout.split()[1] == "True"  # grouped-query attention: the count indexes shared heads


def test_decoder_sweep_variants_stepped_together_equal_one_at_a_time():
    """run_stacks (the depth sweep's lockstep: one weight read per step for every variant) gives run_stack's
    states bit for bit where the BLAS computes each row alone (else within :data:`SAME_SUMS`), for every decoder
    form the variants distinguish; batched attention is per sequence."""
    from symtrans.numeric import encode
    from symtrans.numeric.fixtures import tiny_decoder
    from symtrans.numeric.forward import attention, structure
    from symtrans.numeric.variants import run_stack, run_stacks
    from symtrans.producers.sec5 import VARIANTS
    from symtrans.threads import single_threaded

    with single_threaded():
        # GQA (llama), post-norms and (1 + w) gains (gemma3), parallel residual (gpt_neox), full-width QK-norm
        # and no pre-norms (olmo2), soft-capping (gemma2)
        for family in ("llama", "gemma3", "gpt_neox", "olmo2", "gemma2"):
            w = tiny_decoder(family)
            X = encode(w, n=7, seed=0).embeddings
            depth = 2 * w.n_layers + 1  # cycles through the layers
            together = run_stacks(w, X, dict(VARIANTS), depth=depth)
            for name, (variant, ln) in VARIANTS.items():
                alone = run_stack(w, X, variant, depth=depth, ln=ln)
                assert len(together[name]) == len(alone) == depth + 1
                for k, (a, b) in enumerate(zip(together[name], alone)):
                    assert _same_sums(a, b), (family, name, k)
            st = structure(w).at(0)
            lay = w.layer(0, shared_kv=True)
            batch = attention(torch.stack([X, 2 * X]), lay, st)
            for j, Xj in enumerate((X, 2 * X)):
                for a, b in zip(batch, attention(Xj, lay, st)):
                    assert _same_sums(a[j], b), family
            # the comparison can fail: another input gives other states
            assert not _same_sums(run_stacks(w, X + 1e-9, {"f": ("full", True)}, depth=1)["f"][1],
                                  together["full-block"][1])
