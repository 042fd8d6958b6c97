"""Property-based fuzzing (hypothesis) of everything a user hands symtrans.

Properties: for any config.json, ``--set`` string, safetensors header or
report.json, symtrans either accepts it or raises :class:`SymtransError` (one
line and exit 2 at the command line): never another exception, never a hang,
never a write. The command-line properties run ``symtrans.cli.main`` in-process
(a subprocess per example would cost seconds); the memory bounds of the worst
inputs are in tests/test_hostile_inputs.py.
"""

from __future__ import annotations

import json
import shutil
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symtrans.cli import main
from symtrans.errors import SymtransError

FAST = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                           max_leaves=12)

CONFIG_KEYS = ["model_type", "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
               "max_position_embeddings", "vocab_size", "type_vocab_size", "layer_norm_eps", "hidden_act",
               "n_layer", "n_head", "n_embd", "n_positions", "n_inner", "num_key_value_heads", "head_dim",
               "attention_bias", "mlp_bias", "position_embedding_type", "_name_or_path", "add_cross_attention",
               "dim", "n_layers", "n_heads", "hidden_dim", "sinusoidal_pos_embds", "rms_norm_eps"]
key_values = st.one_of(json_scalars, st.integers(0, 4096), st.sampled_from(
    ["bert", "roberta", "gpt2", "llama", "distilbert", "mistral", "gelu", "silu", "relu", "absolute", "t5"]))
configs = st.one_of(st.dictionaries(st.sampled_from(CONFIG_KEYS), key_values, max_size=len(CONFIG_KEYS)),
                    json_values)


def _one_line_or_ok(capsys, argv: list[str], seconds: float = 10.0) -> int:
    t0 = time.perf_counter()
    rc = main(argv)
    took = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc in (0, 2), (argv, rc, err)
    if rc == 2:
        assert err.startswith("symtrans: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in out + err
    assert took < seconds, (argv, took)
    return rc


@FAST
@given(cfg=configs)
def test_any_config_is_accepted_or_refused_in_one_line(cfg, tmp_path_factory, capsys):
    from symtrans.arch import from_config

    d = tmp_path_factory.mktemp("cfg")
    path = d / "config.json"
    path.write_text(json.dumps(cfg))
    try:
        arch = from_config(path)
    except SymtransError:
        arch = None
    if arch is not None:  # an accepted config has a consistent, concrete architecture
        assert arch.H * arch.d_k == arch.d_model or arch.family == "llama"
    _one_line_or_ok(capsys, ["arch", str(path)])
    assert sorted(p.name for p in d.iterdir()) == ["config.json"]


set_items = st.one_of(
    st.text(max_size=30),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["n", "H", "d_ff", "d_model", "d_k", "L", "rank_X", "dk"]),
              st.one_of(st.integers(-5, 10**18), st.text(max_size=6))),
)


@FAST
@given(items=st.lists(set_items, min_size=1, max_size=3),
       name=st.sampled_from(["ffn-permutations", "head-permutations", "wo-fibre", "recovery-ambiguity"]))
def test_any_set_string_is_accepted_or_refused_in_one_line(items, name, capsys):
    argv = ["formula", name]
    for item in items:
        argv += ["--set=" + item]
    _one_line_or_ok(capsys, argv)


def _safetensors(header: bytes, length: int | None = None, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header + data


tensor_entries = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "F64", "F16", "I64", "BOOL", "XX"]),
    "shape": st.lists(st.integers(-2, 2**40), max_size=3),
    "data_offsets": st.lists(st.integers(-2, 2**40), min_size=0, max_size=3),
})
headers = st.one_of(
    st.dictionaries(st.sampled_from(["embeddings.word_embeddings.weight", "__metadata__", "x"]),
                    st.one_of(tensor_entries, json_values), max_size=3).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=64),
)


@pytest.fixture(scope="module")
def model_template(tmp_path_factory):
    from symtrans.numeric.weights import default_model_path

    d = tmp_path_factory.mktemp("tpl")
    shutil.copy(default_model_path() / "config.json", d / "config.json")
    return d


@FAST
@given(header=headers, length=st.one_of(st.none(), st.integers(0, 2**64 - 1)), data=st.binary(max_size=64))
def test_any_safetensors_header_is_refused_in_one_line(header, length, data, model_template, tmp_path_factory):
    import symtrans

    d = tmp_path_factory.mktemp("st")
    shutil.copy(model_template / "config.json", d / "config.json")
    (d / "model.safetensors").write_bytes(_safetensors(header, length, data))
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(SymtransError) as err:  # no such tiny file holds the model's weights
        symtrans.load(d)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in d.iterdir()) == before


evidence_fields = st.fixed_dictionaries(
    {"claim": st.just("thm-4.2"), "producer": st.just("p"), "kind": st.sampled_from(["numeric", "symbolic"]),
     "verdict": st.sampled_from(["supported", "fails", "inconclusive", "not-run"]), "summary": st.just("s")},
    optional={k: json_values for k in ("margin", "tolerance", "seed", "inputs", "model", "weights_hash",
                                       "seconds", "details", "counterexample", "violated_hypothesis", "timestamp",
                                       "dtype", "versions", "toolkit_version", "margin_meaning", "reading",
                                       "scope", "hypothesis_checks", "context")})
reports = st.one_of(json_values, st.builds(lambda evs: {"claims": [{"id": "thm-4.2", "evidence": evs}]},
                                           st.lists(evidence_fields, max_size=3)))


@FAST
@given(doc=reports)
def test_any_previous_report_is_accepted_or_refused_in_one_line(doc, tmp_path_factory):
    from symtrans.report.build import load_previous

    p = tmp_path_factory.mktemp("prev") / "report.json"
    p.write_text(json.dumps(doc))
    try:
        out = load_previous(p)
    except SymtransError as err:
        assert "\n" not in str(err)
        return
    from symtrans.evidence import Evidence

    assert all(isinstance(e, Evidence) for evs in out.values() for e in evs)


@FAST
@given(raw=st.binary(max_size=200))
def test_any_bytes_as_json_are_refused_in_one_line(raw, tmp_path_factory):
    from symtrans.validate import read_json_file

    p = tmp_path_factory.mktemp("raw") / "x.json"
    p.write_bytes(raw)
    try:
        read_json_file(p, "config")
    except SymtransError as err:
        assert "\n" not in str(err)
