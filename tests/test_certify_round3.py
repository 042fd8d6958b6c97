"""Evidence round 3 (issue 37): every file that enters a run counts only if the run re-derives or re-verifies it.

Written from the issue's description of each attack class, not from the attack files: a completeness certificate
claiming a larger G, carried records whose context this run could not have produced, sweep results (in
tests/test_certify_round3_sweeps.py), certificate directories with a statement missing, a model the loader refuses. Each is refused in one line and changes no
verdict; the genuine files still verify.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from symtrans.checker.check import completeness_tangents, digest, verify_certificate
from symtrans.certify.completeness import completeness_certificate
from symtrans.checker.statements import completeness_dimension

FAMILIES = ("bert-base", "llama2-7b", "gpt2")  # post-LN BERT, pre-RMSNorm decoder, pre-LN decoder


@pytest.fixture(scope="module")
def completeness() -> dict:
    return {name: completeness_certificate(name) for name in FAMILIES}


def _reseal(cert: dict) -> dict:
    cert = copy.deepcopy(cert)
    cert["digest"] = digest(cert)
    return cert


# ------------------------------------------------------------------ completeness: a larger G
def _k_plus_one(cert: dict, *, with_tangents: bool) -> dict:
    """The issue's forgery: one extra "tangent" (the sum of the genuine ones plus 2^-200 e_q), one row and one
    column of the minor dropped, every dimension k + 1; sealed again."""
    c = copy.deepcopy(cert)
    w, a = c["witness"], c["asserts"]
    derived = [v for _, v in completeness_tangents(w["instance"], w["parameters"])]
    P, k = a["parameters"], a["group_dimension"]
    if with_tangents:
        q = next(i for i in range(P) if all(v[i] == 0 for v in derived))  # a coordinate no genuine tangent moves
        extra = [sum((v[i] for v in derived), Fraction(0)) + (Fraction(1, 2 ** 200) if i == q else 0)
                 for i in range(P)]
        w["tangents"] = [[str(x) for x in v] for v in derived[:k]] + [[str(x) for x in extra]]
        w["factors"] = [["qk-gauge", k + 1]]
    w["minor"]["rows"].pop()
    w["minor"]["cols"].pop()
    a["group_dimension"] = a["stabiliser_dimension_at_most"] = k + 1
    a["jacobian_rank_at_least"] = P - k - 1
    return _reseal(c)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_fresh_completeness_certificate_verifies_with_k_from_the_formula(completeness, name):
    cert = completeness[name]
    ok, why = verify_certificate(cert)
    assert ok, why
    k = completeness_dimension(cert["witness"]["instance"])
    assert cert["asserts"]["group_dimension"] == k and f"<= {k} = dim G (formula)" in why
    assert "tangents" not in cert["witness"] and "family" not in cert["witness"]["instance"]


@pytest.mark.parametrize("with_tangents", [True, False], ids=["extra-tangent", "dimensions-only"])
@pytest.mark.parametrize("name", FAMILIES)
def test_a_certificate_for_k_plus_one_is_refused(completeness, name, with_tangents):
    k = completeness[name]["asserts"]["group_dimension"]
    ok, why = verify_certificate(_k_plus_one(completeness[name], with_tangents=with_tangents))
    assert not ok and "\n" not in why
    if with_tangents:  # the file's own tangent vectors are not part of the statement at all
        assert "witness: asserts 2 other (factors, tangents)" in why, why
    else:
        assert f"asserts.group_dimension is {k + 1}, the statement requires {k}" in why, why


@pytest.mark.parametrize("name", FAMILIES)
def test_the_checkers_tangents_span_the_producers_tangent_space(completeness, name):
    """Two routes to G's tangent space at theta: the checker's own rules and the group's tag table (torch
    jacfwd of the action); the spans agree exactly (rank of each and of both together is k)."""
    import torch
    from flint import fmpq, fmpq_mat

    from symtrans.certify.completeness import certificate_instance
    from symtrans.checker.statements import completeness_tensors
    from symtrans.group.complete import _entries, _label, _tangents, _unflatten, random_instance
    from symtrans.group.spec import GroupSpec

    cert = completeness[name]
    w = cert["witness"]
    a, _ = certificate_instance(name)
    template = random_instance(a, "layers", 0)
    entries = _entries(template, "layers")
    paths = [p for p, _ in entries]
    pieces, offsets, pos = [], {}, 0
    for path, t in entries:
        rows = w["parameters"][_label(path)]
        pieces.append(torch.tensor([[float(Fraction(x)) for x in r] for r in rows], dtype=torch.float64).reshape(-1))
        offsets[_label(path)] = pos
        pos += t.numel()
    params = _unflatten(torch.cat(pieces), template, paths)
    order = [offsets[n] + i for n, (r, c) in completeness_tensors(w["instance"]) for i in range(r * c)]
    T, _ = _tangents(GroupSpec.from_arch(a), params, paths, "layers")
    theirs = [[Fraction(float(x)) for x in T[order, j].tolist()] for j in range(T.shape[1])]
    ours = [v for _, v in completeness_tangents(w["instance"], w["parameters"])]
    k = cert["asserts"]["group_dimension"]

    def rank(vs):
        return int(fmpq_mat([[fmpq(x.numerator, x.denominator) for x in v] for v in vs]).rank())

    assert rank(ours) == k and rank(theirs) == k and rank(ours + theirs) == k


def test_a_label_in_the_instance_is_refused_and_the_printed_family_is_derived(completeness):
    c = copy.deepcopy(completeness["bert-base"])
    c["witness"]["instance"]["family"] = "gpt-5 (complete)"
    ok, why = verify_certificate(_reseal(c))
    assert not ok and "witness.instance: expected the fields" in why
    ok, why = verify_certificate(completeness["bert-base"])
    assert ok and why.endswith("on post-LN BERT layers (LayerNorm, MLP)")


# ------------------------------------------------------------------ --previous: only what this run re-verifies
def _verdicts(report) -> dict:
    """Every claim's and every reading's verdict and standing (the rows a carried record could change)."""
    out = {}
    for cid, st in report.statuses.items():
        out[cid] = (st.verdict.value, st.standing.value)
        for r in st.readings:
            out[r.id] = (r.verdict.value, r.standing.value)
    return out


def _forge_layers(doc: dict, layers: str) -> dict:
    """The issue's attack: genuine full-run records with ``"layers"`` added to every context and every sanity
    check's ``counted`` flag flipped."""
    doc = copy.deepcopy(doc)
    for c in doc["claims"]:
        for e in c["evidence"]:
            if e.get("context"):
                e["context"]["layers"] = layers
            if e.get("counted") is False:
                e["counted"] = True
    return doc


def test_genuine_full_run_records_relabelled_as_a_layer_subset_change_no_verdict(example_report, tmp_path):
    import json

    from symtrans.context import Context
    from symtrans.report import build_report

    _, doc, _ = example_report  # a genuine full report on the bundled model
    assert any(e.get("counted") is False for c in doc["claims"] for e in c["evidence"]), "expected sanity records"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(_forge_layers(doc, "0")))
    plain = build_report(Context(model="default", layers=(0,)))
    attacked = build_report(Context(model="default", layers=(0,)), previous=forged)
    assert _verdicts(attacked) == _verdicts(plain)
    refused = [e for e in attacked.errors if "a context this run could not have produced" in e]
    assert refused and all("\n" not in e for e in refused)
    counted = [e for st in attacked.statuses.values() for e in st.evidence
               if e.origin.startswith("previous report") and not e.stale]
    assert not counted, [e.evidence.producer for e in counted]


@pytest.fixture()
def prop62_not_run(monkeypatch):
    """prop-6.2's certificate producer registered but giving nothing this time (same module, same source hash),
    so a carried record of it is considered; the graph holds prop-6.2 alone."""
    import dataclasses

    from proofs import get_claim
    from symtrans.evidence import Evidence, Verdict
    from symtrans.graph import ClaimGraph
    from symtrans.runner import registry

    genuine = list(registry()["prop-6.2"])

    def skipped(ctx):
        return [Evidence(claim="prop-6.2", producer="prop62-counterexample", kind="symbolic",
                         verdict=Verdict.NOT_RUN, summary="skipped", reading="prop-6.2/identity")]

    p = next(p for p in genuine if p.name == "prop62-counterexample")
    skipped.__module__ = p.func.__module__
    patched = [dataclasses.replace(q, func=skipped) if q is p else q for q in genuine]
    full = ClaimGraph()
    ids = ["prop-6.2", *full.rests_on("prop-6.2")]
    return ClaimGraph([get_claim(i) for i in full.claims if i in ids]), lambda: monkeypatch.setitem(registry(), "prop-6.2", patched)


def _identity(rep):
    """The verdict of prop-6.2's identity reading, the one the certificate producer speaks to (the bound's Coq
    record runs beside it)."""
    (r,) = [r for r in rep.statuses["prop-6.2"].readings if r.id == "prop-6.2/identity"]
    return r.verdict


def _write(tmp_path, name: str, doc: dict):
    import json

    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_producers_records_are_carried_all_or_none(prop62_not_run, tmp_path):
    """A genuine certificate record counts when carried; a copy of it filed elsewhere (refused) takes the
    genuine one down with it; a flipped counted flag or a weaker verdict is refused too."""
    from symtrans.context import Context
    from symtrans.evidence import Verdict
    from symtrans.report import build_report, write_report

    graph, patch = prop62_not_run
    write_report(build_report(Context(model=None), graph=graph), tmp_path / "old", ["json"])
    import json

    doc = json.loads((tmp_path / "old" / "report.json").read_text())
    patch()
    fresh = build_report(Context(model=None), graph=graph)
    assert _identity(fresh) is Verdict.NOT_RUN  # the producer gave nothing this time
    carried = build_report(Context(model=None), graph=graph, previous=tmp_path / "old" / "report.json")
    assert _identity(carried) is Verdict.FAILS and not carried.errors  # re-verified: counts

    (claim,) = [c for c in doc["claims"] if c["id"] == "prop-6.2"]
    (record,) = [e for e in claim["evidence"] if e["producer"] == "prop62-counterexample"]
    copy_elsewhere = copy.deepcopy(doc)
    copy_elsewhere["claims"].append({"id": "thm-4.2", "evidence": [copy.deepcopy(record)]})
    for name, forged, why in (
            ("misfiled.json", copy_elsewhere, "carried all or none"),
            ("counted.json", _edit(doc, record, counted=False), "counted flag False is not the registry's"),
            ("weaker.json", _edit(doc, record, verdict="inconclusive"), "verdict 'inconclusive' is not")):
        rep = build_report(Context(model=None), graph=graph, previous=_write(tmp_path, name, forged))
        assert _identity(rep) is Verdict.NOT_RUN, name
        (entry,) = [e for e in rep.statuses["prop-6.2"].evidence if e.origin.startswith("previous report")]
        assert entry.stale and why in entry.stale_reason, (name, entry.stale_reason)


def _edit(doc: dict, record: dict, **changes) -> dict:
    doc = copy.deepcopy(doc)
    for c in doc["claims"]:
        for e in c["evidence"]:
            if e["producer"] == record["producer"]:
                e.update(changes)
    return doc


def test_a_carried_supported_without_certificate_never_counts(prop62_not_run, tmp_path):
    """A carried supported record needs what a carried fails needs: a record with nothing to re-verify is shown,
    stale, and the claim keeps the verdict of what ran."""
    from symtrans.context import Context
    from symtrans.evidence import Verdict
    from symtrans.report import build_report, write_report

    graph, patch = prop62_not_run
    write_report(build_report(Context(model=None), graph=graph), tmp_path / "old", ["json"])
    import json

    doc = json.loads((tmp_path / "old" / "report.json").read_text())
    (claim,) = [c for c in doc["claims"] if c["id"] == "prop-6.2"]
    (record,) = [e for e in claim["evidence"] if e["producer"] == "prop62-counterexample"]
    record = copy.deepcopy(record)
    record["details"] = {}  # the certificate gone ...
    forged = _edit(doc, record, details={}, verdict="supported", summary="identity holds", counterexample=None)
    patch()
    rep = build_report(Context(model=None), graph=graph, previous=_write(tmp_path, "supported.json", forged))
    assert _identity(rep) is Verdict.NOT_RUN
    (entry,) = [e for e in rep.statuses["prop-6.2"].evidence if e.origin.startswith("previous report")]
    assert entry.stale and "the record carries no certificate" in entry.stale_reason


# ------------------------------------------------------------------ verify DIR: the registry's statements, sealed
@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory):
    from symtrans.cli import main

    out = tmp_path_factory.mktemp("certs") / "d"
    assert main(["certify", "prop-6.2", "thm-4.2", "--model", "none", "--out", str(out), "--quiet"]) == 0
    return out


def _verify_dir(directory, capsys):
    from symtrans.cli import main

    capsys.readouterr()
    rc = main(["verify", str(directory)])
    return rc, capsys.readouterr().out.splitlines()


def _copy_dir(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_fresh_certificate_directory_verifies(cert_dir, capsys):
    import json

    rc, lines = _verify_dir(cert_dir, capsys)
    assert rc == 0 and lines[-1] == "2 of 2 certificates valid", lines
    assert lines[-2].startswith(f"{cert_dir}: covers prop-6.2, thm-4.2; registered statements not in it: ")
    assert "prop-6.3/head-rank" in lines[-2] and "thm-4.2/affine-counterexample" not in lines[-2]
    m = json.loads((cert_dir / "MANIFEST.json").read_text())
    assert m["claims"] == ["prop-6.2", "thm-4.2"]
    assert {v["statement_id"] for v in m["files"].values()} == {"prop-6.2/identity-counterexample",
                                                                "thm-4.2/affine-counterexample"}


@pytest.mark.parametrize("reseal", [False, True], ids=["unsealed", "resealed"])
def test_a_certificate_deleted_with_its_manifest_line_is_refused(cert_dir, tmp_path, capsys, reseal):
    import json

    d = _copy_dir(cert_dir, tmp_path / "d")
    (d / "prop62-counterexample.json").unlink()
    m = json.loads((d / "MANIFEST.json").read_text())
    del m["files"]["prop62-counterexample.json"]
    if reseal:
        m["digest"] = digest(m)
    (d / "MANIFEST.json").write_text(json.dumps(m))
    rc, lines = _verify_dir(d, capsys)
    bad = [line for line in lines if "INVALID" in line]
    assert rc == 1 and len(bad) == 1, lines
    assert ("claim prop-6.2 requires statement prop-6.2/identity-counterexample" if reseal else
            "digest mismatch: the manifest was altered") in bad[0]


def test_a_claim_removed_with_its_certificate_shows_in_the_coverage_line(cert_dir, tmp_path, capsys):
    """Without a key, a resealed manifest that drops a claim with its certificate is a smaller directory: each
    certificate in it is valid, and the coverage line says which claims it is valid for."""
    import json

    d = _copy_dir(cert_dir, tmp_path / "d")
    (d / "prop62-counterexample.json").unlink()
    m = json.loads((d / "MANIFEST.json").read_text())
    del m["files"]["prop62-counterexample.json"]
    m["claims"] = ["thm-4.2"]
    m["digest"] = digest(m)
    (d / "MANIFEST.json").write_text(json.dumps(m))
    rc, lines = _verify_dir(d, capsys)
    assert rc == 0 and lines[-1] == "1 of 1 certificates valid"
    assert lines[-2].startswith(f"{d}: covers thm-4.2; ") and "prop-6.2/identity-counterexample" in lines[-2]


def test_a_manifest_that_relabels_a_statement_or_has_no_ids_is_refused(cert_dir, tmp_path, capsys):
    import json

    d = _copy_dir(cert_dir, tmp_path / "d")
    m = json.loads((d / "MANIFEST.json").read_text())
    m["files"]["ln-affine-search.json"]["statement_id"] = "prop-6.2/identity-counterexample"
    m["digest"] = digest(m)
    (d / "MANIFEST.json").write_text(json.dumps(m))
    rc, lines = _verify_dir(d, capsys)
    assert rc == 1 and any("ln-affine-search.json: INVALID: holds another statement" in line for line in lines)
    old = {"schema": "symtrans-certificate-manifest/1", "n": m["n"], "seed": m["seed"],
           "files": {k: v["sha256"] for k, v in m["files"].items()}}  # the unsealed format without statement ids
    (d / "MANIFEST.json").write_text(json.dumps(old))
    rc, lines = _verify_dir(d, capsys)
    assert rc == 1 and "MANIFEST.json: INVALID: not a certificate manifest" in lines[0]


# ------------------------------------------------------------------ reader parity: one model-reading rule
def _sharded(tmp):
    from symtrans.numeric.fixtures import random_checkpoint

    return random_checkpoint(tmp / "m", "bert", n_layers=2, max_shard_size="20KB")[0]


def _index_edit(d, edit):
    import json

    path = d / "model.safetensors.index.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return d


def _two_shards(tmp):
    import json

    from safetensors.numpy import load_file, save_file

    d = _sharded(tmp)
    wmap = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
    first, second = sorted(set(wmap.values()))[:2]
    a, b = load_file(str(d / first)), load_file(str(d / second))
    key = next(iter(a))
    b[key] = a[key] * 0 + 7  # the same tensor, other values: the last copy read would win
    save_file(b, str(d / second), metadata={"format": "pt"})
    return d


def _shard_linked_out(tmp):
    import os
    import shutil

    d = _sharded(tmp)
    shard = sorted(d.glob("model-*.safetensors"))[0]
    outside = tmp / "outside.safetensors"
    shutil.move(str(shard), outside)
    os.symlink(outside, shard)
    return d


def _garbage_shard(tmp):
    d = _sharded(tmp)
    sorted(d.glob("model-*.safetensors"))[0].write_bytes(b"\x00" * 64)
    return d


HOSTILE_MODELS = {  # one corpus, fed to the loader and to the checker
    "a tensor stored in two shards": _two_shards,
    "the index names a shard outside the directory": lambda t: _index_edit(
        _sharded(t), lambda doc: doc["weight_map"].update({next(iter(doc["weight_map"])): "../x.safetensors"})),
    "the index names a missing shard": lambda t: _index_edit(
        _sharded(t), lambda doc: doc["weight_map"].update({next(iter(doc["weight_map"])): "model-9.safetensors"})),
    "the weight_map is a list": lambda t: _index_edit(_sharded(t), lambda doc: doc.update(weight_map=["a"])),
    "a shard linked out of the directory": _shard_linked_out,
    "a shard that is not safetensors": _garbage_shard,
}


@pytest.mark.parametrize("case", list(HOSTILE_MODELS))
def test_the_checker_refuses_whatever_the_loader_refuses(case, tmp_path):
    from symtrans.checker.reader import CheckedModel, ModelError
    from symtrans.errors import SymtransError
    from symtrans.numeric import load_model

    d = HOSTILE_MODELS[case](tmp_path)
    with pytest.raises(SymtransError) as loader:
        load_model(str(d))
    with pytest.raises(ModelError) as checker:
        CheckedModel(d)
    assert "\n" not in str(checker.value) and "\n" not in str(loader.value)


def test_a_genuine_sharded_model_reads_the_same_in_both(tmp_path):
    import numpy as np

    from symtrans.checker.reader import CheckedModel
    from symtrans.numeric import load_model

    d = _sharded(tmp_path)
    w, m = load_model(str(d)), CheckedModel(d)
    assert w.weights_hash == m.weights_hash and len(m.files) > 1
    assert np.array_equal(w.layer(1)["W_O"][0].double().numpy(), m.W_O(1, 0))


# ------------------------------------------------------------------ one vocabulary for certificates
def test_certified_is_shown_only_with_a_certificate_file_and_the_counts_agree(tmp_path):
    import json
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "c"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    captured = subprocess.run([sys.executable, "-m", "symtrans", "certify", "--model", "none", "--out", str(out)],
                              capture_output=True, text=True, timeout=600, env=env)
    assert captured.returncode == 0, captured.stderr[-500:]
    lines = captured.stdout.splitlines()
    tagged = [line for line in lines if line.startswith("  [")]
    # without a model no certificate file is written: what is shown certified is a Coq proof, kernel-checked
    # again by `verify --coq` (issue 36), never a record that says "no certificate file"
    certified = [line for line in tagged if line.startswith("  [certified]")]
    assert all("kernel-checked" in line for line in certified), certified
    assert not [line for line in lines if "[certified]" in line and "no certificate file" in line]
    assert [line for line in tagged if "no certificate file" in line]  # the proofs in text are shown supported
    files = [p for p in out.iterdir() if p.name != "MANIFEST.json"]
    (wrote,) = [line for line in lines if line.startswith("wrote ")]
    assert wrote.startswith(f"wrote {len(files)} certificate files")
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert len(manifest["files"]) == len(files)
    done = re.search(r"done, (\d+) (\w+)", captured.stderr)  # the progress line counts producers, not certificates
    assert done and done.group(2) == "producers", captured.stderr[-300:]
    assert int(done.group(1)) == len(tagged)


def test_the_k_plus_one_file_is_refused_by_verify_in_one_line(completeness, tmp_path, capsys):
    import json

    from symtrans.cli import main

    path = tmp_path / "forged.json"
    path.write_text(json.dumps(_k_plus_one(completeness["llama2-7b"], with_tangents=False)))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if "INVALID" in line]) == 1 and lines[-1] == "0 of 1 certificates valid"
