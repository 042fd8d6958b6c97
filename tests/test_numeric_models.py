"""Every API entry point takes model objects: transformers models, wrappers, hub ids from the local cache."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import symtrans
from symtrans.errors import SymtransError
from symtrans.evidence import Verdict
from symtrans.numeric.fixtures import random_checkpoint, random_model
from symtrans.numeric.weights import unwrap_model

ROOT = Path(__file__).resolve().parents[1]


def _interop(name: str):
    """The real library ``name`` (the ``interop`` extra); skipped where it cannot be imported, unless in CI."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI run without {name} (pip install -e '.[interop]'): {err}")
        pytest.skip(f"{name} not installed (pip install -e '.[interop]')")


@pytest.fixture(scope="module")
def tokenizer():
    """A real tokenizer for booting wrappers offline (the bundled model's; the weights never see its ids)."""
    import transformers

    from symtrans.numeric.weights import default_model_path

    return transformers.AutoTokenizer.from_pretrained(default_model_path())


@pytest.fixture(scope="module")
def bridges(models, tokenizer):
    """TransformerLens 4.x ``TransformerBridge.boot_transformers`` on the local tiny GPT-2 and Llama directories."""
    _interop("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return {family: TransformerBridge.boot_transformers(str(models[family][0]), device="cpu", tokenizer=tokenizer)
            for family in ("gpt2", "llama")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for family in ("gpt2", "llama"):
        path, model = random_checkpoint(tmp_path_factory.mktemp(family), family, head=True)
        out[family] = (path, model)
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_models_with_a_head_and_bridged_load_like_their_directory(models, bridges, family):
    path, model = models[family]
    ref = symtrans.load(path)
    bridge = bridges[family]
    assert any("._original_component." in k for k in bridge.original_model.state_dict())  # renamed by the bridge
    for obj in (model, bridge):
        w = symtrans.load(obj)
        assert w.arch.family == ref.arch.family and w.source.startswith("<in-memory")
        if obj is bridge:  # booted from the directory: named by the config's _name_or_path, hashed like its files
            assert w.arch.name == str(path) and w.weights_hash == ref.weights_hash
        else:  # built in memory, then saved: no _name_or_path, so named by its class and hashed by its tensors
            assert w.arch.name == type(model).__name__ and w.weights_hash != ref.weights_hash
        for name in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "word"):
            assert torch.equal(w.tensors[name], ref.tensors[name]), name


def test_a_bert_bridge_loads_like_its_directory(tmp_path, tokenizer):
    _interop("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    import transformers

    # the bridge boots a BertForMaskedLM, which has no pooler: saved as one, its directory is the bridge's model
    # (a BertModel directory holds a pooler, which symtrans loads, so its weights are not the bridge's)
    _, base = random_checkpoint(tmp_path / "base", "bert")
    mlm = transformers.BertForMaskedLM(base.config).eval()
    mlm.bert.load_state_dict(base.state_dict(), strict=False)
    mlm.save_pretrained(tmp_path / "mlm")
    bridge = TransformerBridge.boot_transformers(str(tmp_path / "mlm"), device="cpu", tokenizer=tokenizer)
    ref, w = symtrans.load(tmp_path / "mlm"), symtrans.load(bridge)
    assert w.weights_hash == ref.weights_hash and torch.equal(w.W_O, ref.W_O) and torch.equal(w.W_in, ref.W_in)
    assert w.tensors.get("pooler_w") is None and w.outside == ref.outside and "cls.predictions.bias" in w.outside
    with_pooler = symtrans.load(tmp_path / "base")
    assert with_pooler.tensors["pooler_w"] is not None and torch.equal(with_pooler.W_O, w.W_O)


def agrees_in_float32(ours, theirs) -> tuple[bool, float, float]:
    """Whether two forwards' tensors agree: (agrees, max deviation, tolerance). At least one side float32; 64 eps
    of the tensor's scale (at least 1): the two forwards round in different orders."""
    ours, theirs = ours.double(), theirs.double()
    if ours.shape != theirs.shape:
        return False, float("inf"), 0.0
    tol = 64 * torch.finfo(torch.float32).eps * max(float(ours.abs().max()), 1.0)
    dev = float((ours - theirs).abs().max())
    return dev <= tol, dev, tol


def _bridge_residual(path, tokenizer, ids, *, compatibility: bool):
    """A TransformerLens bridge booted from ``path`` (in compatibility mode where asked), its last block's
    ``hook_resid_post`` on ``ids``, and symtrans's last layer output on the weights it reads from that bridge.
    LayerNorm families: both rows centred (compatibility mode centres the writers: an element of G's centring
    shift, which moves the residual along the all-ones row and nothing else)."""
    from transformer_lens.model_bridge import TransformerBridge

    from symtrans.numeric.forward import encode

    bridge = TransformerBridge.boot_transformers(str(path), device="cpu", tokenizer=tokenizer)
    if compatibility:
        bridge.enable_compatibility_mode(disable_warnings=True)
    _, cache = bridge.run_with_cache(ids)
    w = symtrans.load(bridge)
    theirs = cache[f"blocks.{bridge.cfg.n_layers - 1}.hook_resid_post"][0]
    ours = encode(w, input_ids=ids[0]).layers[-1].out
    if w.arch.norm == "layernorm":
        theirs, ours = (x - x.mean(-1, keepdim=True) for x in (theirs, ours))
    return w, ours, theirs


#: the families symtrans reads that TransformerLens 4.x boots offline (it has no adapter for RoBERTa or DistilBERT)
BRIDGED = ("bert", "gpt2", "llama", "mistral", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "olmo2", "gpt_neox",
           "smollm3")


def _read_as_the_bridge_computes(tmp_path, tokenizer, family):
    """A random ``family`` checkpoint booted as a bridge: symtrans's forward of what it reads is the bridge's, before
    and after compatibility mode (asserted). Returns the checkpoint, the input and the weights read each time."""
    _interop("transformer_lens")
    path, _ = random_checkpoint(tmp_path, family, head=True)
    ids = torch.tensor([[3, 17, 5, 29, 11, 2, 7]])
    read = []
    for compatibility in (False, True):
        w, ours, theirs = _bridge_residual(path, tokenizer, ids, compatibility=compatibility)
        ok, dev, tol = agrees_in_float32(ours, theirs)
        assert ok, (family, compatibility, dev, tol)
        read.append(w)
    return path, ids, read


@pytest.mark.slow
@pytest.mark.parametrize("family", [f for f in BRIDGED if f not in ("gpt2", "gpt_neox", "phi3")])
def test_every_bridged_family_is_read_as_the_bridge_computes(tmp_path, tokenizer, family):
    """Every other family TransformerLens boots: symtrans's forward of the weights it reads from the bridge is the
    bridge's, before and after compatibility mode (the three that split a fused projection: the test below)."""
    _read_as_the_bridge_computes(tmp_path, tokenizer, family)


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "phi3"])
def test_a_bridge_that_splits_a_fused_projection_is_read_as_it_computes(tmp_path, tokenizer, family, monkeypatch):
    """TransformerLens splits GPT-2's c_attn, GPT-NeoX's query_key_value and Phi-3's qkv_proj and gate_up_proj into
    copies its forward computes with; compatibility mode writes the folded weights into the copies alone. symtrans
    reads the copies, so its forward is the bridge's, before and after. The false case: read the stale fused tensor
    (the split copies ignored, as before) and the forward is not the bridge's."""
    import symtrans.numeric.weights as weights

    path, ids, read = _read_as_the_bridge_computes(tmp_path, tokenizer, family)
    for w in read:  # the copies are read, not listed outside
        assert not any(".q." in k or ".gate." in k for k in w.outside), w.outside
    monkeypatch.setattr(weights, "_BRIDGE_SPLITS", {})
    _, ours, theirs = _bridge_residual(path, tokenizer, ids, compatibility=True)
    ok, dev, tol = agrees_in_float32(ours, theirs)
    assert not ok and dev > 100 * tol, (dev, tol)


def test_a_head_untied_in_memory_is_read_as_untied(tmp_path, tokenizer):
    """TransformerLens's compatibility mode unties GPT-2's head from the word table (it folds the final norm into
    it): the bridge computes its logits with that head, so symtrans reads it as an untied model, and relate names
    the difference from the tied directory. The false cases: the same bridge before compatibility mode, whose
    head is the word table, and a head that is a separate tensor equal to the word table, stay tied."""
    _interop("transformer_lens")
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    path, _ = random_checkpoint(tmp_path / "gpt2", "gpt2", head=True)
    bridge = TransformerBridge.boot_transformers(str(path), device="cpu", tokenizer=tokenizer)
    assert symtrans.load(bridge).arch.tied_lm_head and "lm_head" not in symtrans.load(bridge).tensors
    bridge.enable_compatibility_mode(disable_warnings=True)
    w = symtrans.load(bridge)
    head = bridge.original_model.state_dict()["lm_head._original_component.weight"]
    assert not w.arch.tied_lm_head and torch.equal(w.tensors["lm_head"], head.T.double())
    assert w.config["tie_word_embeddings"] is False  # the config kept with the weights agrees with the architecture
    assert "lm_head.weight" not in w.outside
    with pytest.raises(SymtransError, match=r"B holds an untied output head \(lm_head\) and A does not \(its head "
                                            r"is the word table\)"):
        symtrans.relate(path, bridge)
    copy = transformers.AutoModelForCausalLM.from_pretrained(path)
    copy.lm_head.weight = torch.nn.Parameter(copy.transformer.wte.weight.detach().clone())  # equal, not shared
    assert symtrans.load(copy).arch.tied_lm_head


def test_an_in_memory_gpt_neox_reads_its_head_as_its_directory_does(tmp_path):
    """transformers 5 names an in-memory GPT-NeoX's head lm_head (its files: embed_out): both are read."""
    path, model = random_checkpoint(tmp_path, "gpt_neox", head=True)
    ref, w = symtrans.load(path), symtrans.load(model)
    assert ref.tensors["lm_head"] is not None and torch.equal(w.tensors["lm_head"], ref.tensors["lm_head"])
    assert w.outside == () == ref.outside


def test_a_modified_model_gets_its_own_hash(models):
    import transformers

    path, _ = models["gpt2"]
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    assert symtrans.load(model).weights_hash == symtrans.load(path).weights_hash
    with torch.no_grad():
        model.transformer.h[0].attn.c_attn.weight[0, 0] += 1
    assert symtrans.load(model).weights_hash != symtrans.load(path).weights_hash


def test_measure_and_check_claims_take_model_objects(models, bridges):
    path, model = models["llama"]
    m = symtrans.measure(bridges["llama"], n=8)
    assert m.record.family == "llama" and m.rows()[0]["LN_hypotheses_hold"] is None  # RMSNorm: not measured
    assert m.record.profiles["full"].ranks == symtrans.measure(path, n=8).record.profiles["full"].ranks
    ev = symtrans.check_claims(bridges["llama"], ["prop-6.3", "lit-dong", "thm-4.2"], n=12)
    by = {e.producer: e for e in ev}
    assert by["head-subspace-dim"].verdict.value == "supported"
    for name in ("depth-sweep-pure-attention", "ln-real"):  # structural reasons, named
        assert by[name].verdict.value == "not-applicable" and "llama" in by[name].summary
    assert "causal" in by["depth-sweep-pure-attention"].summary and "RMSNorm" in by["ln-real"].summary


def test_compiled_parallel_and_pipeline_models_are_read_through_the_model_they_wrap(models, tokenizer):
    """torch.compile keeps the model as ``_orig_mod``, DataParallel as ``module`` (each prefixing every tensor name
    with it), a transformers pipeline as ``model``: each is read as the model it wraps, with its hash."""
    import transformers

    path, model = models["gpt2"]
    pipe = transformers.pipeline("feature-extraction", model=model, tokenizer=tokenizer, device="cpu")
    for wrapper in (torch.compile(model), torch.nn.DataParallel(model), pipe):
        assert unwrap_model(wrapper) is model
        assert symtrans.load(wrapper).weights_hash == symtrans.load(model).weights_hash


def test_a_sentence_transformers_pipeline_is_read_as_its_transformer():
    """The bundled model's own library: a SentenceTransformer (transformer, mean pooling, normalisation) is read as
    its BertModel, with the bundled directory's hash. The false case: a pipeline with a Dense projection after the
    pooling holds weights symtrans would not read, and is refused by name."""
    st = _interop("sentence_transformers")
    from symtrans.numeric.weights import default_model_path

    pipeline = st.SentenceTransformer(str(default_model_path()), device="cpu")
    assert unwrap_model(pipeline) is pipeline[0].auto_model
    assert symtrans.load(pipeline).weights_hash == symtrans.load("default").weights_hash
    dense = st.SentenceTransformer(modules=[pipeline[0], pipeline[1], st.models.Dense(384, 16)], device="cpu")
    with pytest.raises(SymtransError, match=r"module 2 \(Dense\) holds weights that act after the transformer"):
        symtrans.load(dense)


def test_nnsight_wrapper(models):
    nnsight = _interop("nnsight")
    path, model = models["gpt2"]
    wrapped = nnsight.NNsight(model)
    assert unwrap_model(wrapped) is model
    assert torch.equal(symtrans.load(wrapped).W_O, symtrans.load(path).W_O)


def test_a_lazy_nnsight_language_model_is_dispatched(models, tokenizer):
    nnsight = _interop("nnsight")
    path, _ = models["gpt2"]
    lazy = nnsight.LanguageModel(str(path), tokenizer=tokenizer)
    assert not lazy.dispatched and lazy._module.transformer.wte.weight.is_meta
    m = symtrans.measure(lazy, n=8)  # dispatched as nnsight does on its first real run
    assert lazy.dispatched
    assert m.record.profiles["full"].ranks == symtrans.measure(path, n=8).record.profiles["full"].ranks
    assert symtrans.load(lazy).weights_hash == symtrans.load(path).weights_hash


def test_meta_weights_are_refused_in_one_line(models):
    import transformers

    config = transformers.AutoConfig.from_pretrained(models["gpt2"][0])
    with torch.device("meta"):
        lazy = transformers.AutoModelForCausalLM.from_config(config)
    with pytest.raises(SymtransError, match="weights are on the meta device") as err:
        symtrans.load(lazy)
    assert "\n" not in str(err.value)


def test_verify_invariance_takes_a_model_object():
    checks = symtrans.verify_invariance(random_model("bert"), factors=["S_H"], dtypes=["float64"], n=6)
    assert [(c.factor, c.verdict) for c in checks] == [("S_H", Verdict.SUPPORTED)]


def test_objects_that_hold_no_model_are_refused():
    from types import SimpleNamespace

    for bad in (SimpleNamespace(original_model=None), object()):
        with pytest.raises(SymtransError, match="cannot read weights from"):
            symtrans.load(bad)


def _hub_cache(root: Path, repo: str, family: str) -> Path:
    """The layout huggingface_hub reads: models--org--name/{refs/main, snapshots/<commit>/...}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    base = root / ("models--" + repo.replace("/", "--"))
    random_checkpoint(base / "snapshots" / commit, family)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    return base / "snapshots" / commit


def test_cli_resolves_a_hub_id_from_the_offline_cache(tmp_path):
    snap = _hub_cache(tmp_path / "hub", "tiny-org/tiny-qwen", "qwen2")
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    cli = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", "tiny-org/tiny-qwen", "--n", "6"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0 and "pre-LN decoder" in cli.stdout and "collapse" in cli.stdout, cli.stderr[-2000:]
    assert f"model      {snap}" in cli.stdout  # resolved to the cached snapshot
    missing = subprocess.run([sys.executable, "-m", "symtrans", "measure", "--model", "tiny-org/absent"],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "not in the local Hugging Face hub cache" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
def test_proof_report_on_an_in_memory_decoder():
    rep = symtrans.proof_report(random_model("llama", head=True), n=8)
    ev = [e for c in rep.to_json()["claims"] if c["id"] == "lit-dong" for e in c["evidence"]]
    assert any(e["verdict"] == "not-applicable" and "causal" in e["summary"] for e in ev)


@pytest.mark.slow
def test_a_bridge_and_a_lazy_nnsight_model_go_through_the_report(models, bridges, tokenizer, tmp_path):
    """The issue's 'done when': a TransformerLens 4.x bridge and a lazy nnsight model through report, as their directory."""
    nnsight = _interop("nnsight")
    path, _ = models["gpt2"]
    lazy = nnsight.LanguageModel(str(path), tokenizer=tokenizer)
    assert lazy._module.transformer.wte.weight.is_meta
    want = symtrans.load(path).weights_hash
    for name, obj in (("bridge", bridges["gpt2"]), ("lazy", lazy)):
        doc = symtrans.proof_report(obj, out=tmp_path / name, n=8, formats=("md", "json")).to_json()
        assert doc["model"]["weights_hash"] == want and doc["model"]["spec"].startswith("<in-memory GPT2LMHeadModel")
        ran = [e for c in doc["claims"] for e in c["evidence"] if e["kind"] == "numeric"]
        assert ran and sorted(p.name for p in (tmp_path / name).iterdir()) == ["report.json", "report.md"]
        md = (tmp_path / name / "report.md").read_text(encoding="utf-8")
        first = md[md.index("## Every claim and reading"):md.index("## Counts by verdict")]  # every claim's row
        assert all(f"[{c['id']}](#claim-{c['id']})" in first for c in doc["claims"])



def test_a_bridge_in_compatibility_mode_is_reported_processed_with_the_same_function_verdicts(models, tokenizer):
    """TransformerLens's compatibility mode centres the writers and folds the norms (an element of G and a
    reparametrisation): the report states it, and every reading about the function keeps its verdict."""
    _interop("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    from proofs._claim import declared_items
    from symtrans.context import Context
    from symtrans.report import build_report

    path, _ = models["gpt2"]
    bridge = TransformerBridge.boot_transformers(str(path), device="cpu", tokenizer=tokenizer)
    bridge.enable_compatibility_mode(disable_warnings=True)
    original = build_report(Context(model=str(path), n=8, reuse="model-free"))  # model records afresh
    processed = build_report(Context(model=bridge, n=8, reuse="model-free"))
    assert original.model["processed"] == []
    stated = " ".join(processed.model["processed"])
    assert "centred" in stated and "folded" in stated, stated

    def verdicts(report):
        out = {}
        for claim, status in report.items():
            out[claim.id] = status.verdict.value
            out.update({r.id: r.verdict.value for r in status.readings})
        return out

    before, after = verdicts(original), verdicts(processed)
    function = [i.id for i in declared_items() if i.about == "function"]
    assert function and all(before[i] == after[i] for i in function), \
        [(i, before[i], after[i]) for i in function if before[i] != after[i]]
