"""Loading: streaming, pickles, hub ids, and every bad input with its one-line error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from symtrans.cli import main
from symtrans.errors import SymtransError
from symtrans.numeric import encode, load_model
from symtrans.numeric.fixtures import random_checkpoint
from symtrans.numeric.weights import iter_layers, stream_model


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path, _ = random_checkpoint(tmp_path_factory.mktemp("bert") / "m", "bert", n_layers=2)
    return path


def _copy(ckpt, tmp_path):
    dest = tmp_path / "copy"
    shutil.copytree(ckpt, dest)
    return dest


def _edit(path, change):
    """Rewrite model.safetensors after ``change(state_dict)``."""
    state = load_file(str(path / "model.safetensors"))
    change(state)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})


def _error(spec, **kw) -> str:
    with pytest.raises(SymtransError) as info:
        load_model(spec, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_streamed_layers_equal_eager_layers(ckpt):
    eager, streamed = load_model(ckpt), stream_model(ckpt)
    assert streamed.weights_hash == eager.weights_hash
    for i, layer in iter_layers(ckpt):
        for name, t in layer.items():
            assert torch.equal(t, eager.layer(i)[name]), (i, name)
    ids = torch.arange(5, 20)
    a, b = encode(eager, input_ids=ids), encode(streamed, input_ids=ids)
    assert torch.equal(a.layers[-1].out, b.layers[-1].out)


def test_missing_directory_and_missing_weights(ckpt, tmp_path):
    assert "no such model directory" in _error(tmp_path / "nowhere")
    dest = _copy(ckpt, tmp_path)
    (dest / "model.safetensors").unlink()
    assert "no model.safetensors" in _error(dest)
    (dest / "config.json").unlink()
    assert "no config.json" in _error(dest)


def test_truncated_and_corrupt_safetensors(ckpt, tmp_path):
    dest = _copy(ckpt, tmp_path)
    f = dest / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    msg = _error(dest)
    assert "model.safetensors" in msg and "not a readable safetensors file" in msg
    f.write_bytes(b"\x00garbage" * 100)
    assert "model.safetensors" in _error(dest)


def test_missing_and_misshapen_tensor(ckpt, tmp_path):
    dest = _copy(ckpt, tmp_path)
    key = "encoder.layer.1.attention.self.key.weight"
    _edit(dest, lambda s: s.pop(key))
    assert f"missing tensor {key!r}" in _error(dest)
    dest2 = _copy(ckpt, tmp_path / "b")
    _edit(dest2, lambda s: s.__setitem__(key, torch.zeros(3, 32)))
    msg = _error(dest2)
    assert key in msg and "shape (3, 32), expected (32, 32)" in msg


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights(ckpt, tmp_path, bad):
    dest = _copy(ckpt, tmp_path)
    key = "encoder.layer.0.output.dense.weight"

    def poison(state):
        state[key][3, 4] = bad

    _edit(dest, poison)
    msg = _error(dest)
    assert key in msg and "NaN or Inf" in msg


def test_unsupported_model_type(ckpt, tmp_path):
    dest = _copy(ckpt, tmp_path)
    cfg = {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32, "n_positions": 40, "vocab_size": 120}
    (dest / "config.json").write_text(json.dumps(cfg))
    assert "missing tensor 'wte.weight' (not a gpt2 checkpoint?)" in _error(dest)  # gpt2 is read, its tensors are not there
    cfg["model_type"] = "mamba"
    (dest / "config.json").write_text(json.dumps(cfg))
    assert "unsupported model_type 'mamba'" in _error(dest)


def test_pickled_checkpoint_refused_unless_allowed(ckpt, tmp_path):
    dest = _copy(ckpt, tmp_path)
    state = load_file(str(dest / "model.safetensors"))
    (dest / "model.safetensors").unlink()
    torch.save(state, dest / "pytorch_model.bin")
    msg = _error(dest)
    assert "pytorch_model.bin" in msg and "--allow-pickle" in msg
    assert "pickled checkpoint refused" in _error(dest / "pytorch_model.bin")
    loaded = load_model(dest, allow_pickle=True)
    assert torch.equal(loaded.W_Q, load_model(ckpt).W_Q)
    torch.save({"not": "tensors", "x": [1, 2]}, dest / "pytorch_model.bin")
    assert "pytorch_model.bin" in _error(dest, allow_pickle=True)


def test_hub_id_without_network_says_pass_a_directory():
    msg = _error("some-org/some-model-that-is-not-here")
    assert "Hugging Face hub" in msg and "local directory" in msg


def test_unreachable_hub_id_is_refused_before_the_heavy_imports():
    """The command line looks a hub id up before torch or SymPy is imported: the refusal comes at once."""
    code = ("import sys\nfrom symtrans.cli import main\nrc = main(['measure', '--model', 'some-org/not-here-either'])\n"
            "print(rc, 'torch' in sys.modules, 'sympy' in sys.modules)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["2", "False", "False"], (out.stdout, out.stderr)  # bad input: status 2
    assert "not in the local Hugging Face hub cache" in out.stderr


def test_bad_sequences(ckpt):
    w = load_model(ckpt)
    with pytest.raises(SymtransError, match="exceeds the model's 40 positions"):
        encode(w, n=41)
    with pytest.raises(SymtransError, match="n must be at least 2"):
        encode(w, n=1)
    with pytest.raises(SymtransError, match="at least 2 tokens"):
        encode(w, input_ids=[7])
    with pytest.raises(SymtransError, match="no tokenizer.json"):
        encode(w, text="hello")
    default = load_model("default")
    with pytest.raises(SymtransError, match="tokenizes to no content tokens"):
        encode(default, text="   ")


@pytest.mark.parametrize("argv,needle", [
    (["--model", "/no/such/dir"], "no such model directory"),
    (["--n", "1"], "--n 1: must be at least 2"),
    (["--n", "600"], "the model has 512 positions"),
    (["--text", " \t "], "tokenizes to no content tokens"),
    (["--depth", "0"], "--depth 0: must be at least 1"),
])
def test_cli_errors_are_one_line_exit_2(capsys, argv, needle):
    assert main(["measure", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symtrans: error:") and needle in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_whole_process():
    proc = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--device", "cuda", "--n", "4"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    from symtrans.progress import without_progress  # a pipe gets timestamped progress lines before the error

    assert without_progress(proc.stderr).strip().splitlines() == ["symtrans: error: --device cuda requested, but "
                                                                  "CUDA is not available on this machine"]
    assert "Traceback" not in proc.stderr
