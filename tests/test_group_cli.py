"""The ``symtrans group`` command: factor table, JSON, one-line errors."""

from __future__ import annotations

import json

from symtrans.cli import main
from symtrans.group import GroupSpec


def test_bert_base_text_shows_the_computed_gauge_dimension(capsys):
    assert main(["group", "--arch", "bert-base"]) == 0
    out = capsys.readouterr().out
    spec = GroupSpec.from_arch("bert-base")
    assert f"{int(spec.gauge_dimension_model()):,}" in out and "over 12 layers" in out
    assert "rank collapse in depth" in out and "entropy collapse" in out


def test_json_schema(capsys):
    assert main(["group", "--arch", "minilm-l6-h384", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    spec = GroupSpec.from_arch("minilm-l6-h384")
    assert data["total_dimension"] == spec.total_dimension()
    for f in data["factors"]:
        assert {"name", "kind", "acts_on", "broken_by"} <= set(f)
        assert ("dimension" in f) == (f["kind"] == "continuous") and ("order" in f) == (f["kind"] == "discrete")
    assert len(data["pairing"]) == 4


def test_errors_are_one_line_exit_2(capsys):
    for argv in (["group"], ["group", "--arch", "bert-bsae"], ["group", "--arch", "gpt2", "--complete", "--layers", "0"],
                 ["group", "--model", "default", "--complete"],
                 ["group", "--arch", "bert-base", "--verify"], ["group", "--model", "default", "--verify", "--n", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("symtrans: error:") and err.count("\n") == 1


def test_pre_ln_and_llama_style_groups_print_both_scopes(capsys):
    for arch in ("gpt2", "llama2-7b"):
        assert main(["group", "--arch", arch]) == 0
        out = capsys.readouterr().out
        spec = GroupSpec.from_arch(arch)
        assert f"(scope layers): {int(spec.total_dimension()):,}" in out
        assert f"= {int(spec.scope_dimension('model')):,}" in out and "token ids in" in out


def test_a_crash_in_relate_is_exit_70_not_1(capsys, monkeypatch):
    """An error symtrans did not anticipate (a bug) left Python's traceback and exit status 1, which relate gives
    for "not related": a script reading the status took relate's IndexError (probe) for a refusal. It is 70 now,
    with the traceback and a line that says it is no answer. Fault injected into the real CLI: relate raises."""
    import symtrans.group.relate as rel

    def broken(a, b):  # noqa: ANN001, ANN202
        raise IndexError("list index out of range")

    monkeypatch.setattr(rel, "relate", broken)
    status = main(["relate", "default", "default"])
    out, err = capsys.readouterr()
    assert status == 70 and "not related" not in out
    assert "Traceback" in err and "internal error (a bug, not an answer): IndexError" in err


def _one_line_error(capsys) -> str:  # noqa: ANN001
    out, err = capsys.readouterr()
    assert err.startswith("symtrans: error:") and err.count("\n") == 1, err
    return err


def test_relate_refuses_where_it_cannot_write_before_it_solves(tmp_path, capsys, monkeypatch):
    """``--out ''`` was an internal error (exit 70) after the solve; a missing directory, a directory in the way or a
    place nothing can be written was found only after the solve (minutes on a large model). Each is one line and
    exit 2 now, before relate runs: relate is replaced by a function that fails the test if it is reached."""
    from symtrans.numeric.fixtures import random_checkpoint

    import symtrans.group.relate as rel

    random_checkpoint(tmp_path / "a", "bert", seed=0)
    a = str(tmp_path / "a")

    def reached(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("relate ran before --out was checked")

    monkeypatch.setattr(rel, "relate", reached)
    for out, says in (("", "expected a file name"), (str(tmp_path / "no" / "g.json"), "does not exist"),
                      (a, "a directory is in the way"), ("/proc/g.json", "cannot write there")):
        assert main(["relate", a, a, "--out", out, "--quiet"]) == 2
        assert says in _one_line_error(capsys)
    monkeypatch.undo()  # the false case: a writable place, relate runs and writes both files
    assert main(["relate", a, a, "--out", str(tmp_path / "g.json"), "--quiet"]) == 0
    assert (tmp_path / "g.json").is_file() and (tmp_path / "g.json.safetensors").is_file()


def test_canonical_refuses_two_architectures_before_it_writes(tmp_path, capsys):
    """``canonical A --out DIR --distance B`` with B of another architecture wrote A's canonical form, then said
    that A and B are not one architecture. The pair is refused first now, and nothing is written; the message names
    both families (it named a tensor one of them lacks)."""
    from symtrans.numeric.fixtures import random_checkpoint

    random_checkpoint(tmp_path / "bert", "bert", seed=0)
    random_checkpoint(tmp_path / "gpt2", "gpt2", seed=0)
    capsys.readouterr()  # transformers' notes on the fixture's config, not the command's
    assert main(["canonical", str(tmp_path / "bert"), "--out", str(tmp_path / "can"), "--distance",
                 str(tmp_path / "gpt2"), "--quiet"]) == 2
    assert "A is a bert model and B a gpt2 model" in _one_line_error(capsys)
    assert not (tmp_path / "can").exists()
    assert main(["relate", str(tmp_path / "gpt2"), str(tmp_path / "bert"), "--quiet"]) == 2
    assert "A is a gpt2 model and B a bert model" in _one_line_error(capsys)


def test_verify_refuses_an_empty_path(tmp_path, capsys, monkeypatch):
    """``verify ''`` read the working directory as a certificate directory and printed INVALID (exit 1, which says
    a certificate is wrong); an empty name is bad input: exit 2 in one line. A directory that holds a certificate is
    still read (the false case)."""
    monkeypatch.chdir(tmp_path)
    assert main(["verify", ""]) == 2
    assert "expected a certificate file or directory" in _one_line_error(capsys)
    (tmp_path / "x.json").write_text("{}")
    assert main(["verify", str(tmp_path)]) == 1  # read, and invalid: no manifest
    assert "INVALID" in capsys.readouterr().out


def test_a_refusal_says_when_a_is_stored_coarser_than_b(tmp_path, capsys):
    """relate asks whether B = g . A at B's storage precision, so relate(A16, B32), A a float16 rounding of B, is
    refused: right, but the refusal named only the embedding table and an unexplained part at A's rounding. It says
    now that A is stored coarser than B and that ``relate B A`` asks the converse, which is related (at A's
    precision: the false case). A refusal between equal storages says nothing of it."""
    import torch

    from symtrans.numeric.fixtures import random_model

    m = random_model("bert", seed=0, n_layers=2, n_heads=4, d_model=16, d_ff=32)
    m.save_pretrained(tmp_path / "b32")
    m.to(torch.float16).save_pretrained(tmp_path / "a16")
    random_model("bert", seed=1, n_layers=2, n_heads=4, d_model=16, d_ff=32).save_pretrained(tmp_path / "other")
    a16, b32, other = (str(tmp_path / x) for x in ("a16", "b32", "other"))
    capsys.readouterr()
    assert main(["relate", a16, b32, "--quiet", "--out", str(tmp_path / "g.json")]) == 1
    out = capsys.readouterr().out
    assert "A is stored in float16, coarser than B's float32" in out and "`relate B A`" in out
    assert main(["relate", b32, a16, "--quiet", "--out", str(tmp_path / "g.json")]) == 0
    assert main(["relate", b32, other, "--quiet", "--out", str(tmp_path / "g.json")]) == 1
    assert "stored in" not in capsys.readouterr().out


def test_a_relation_file_verifies_from_another_working_directory(tmp_path, capsys, monkeypatch):
    """relate wrote the models' paths as given: ``relate a b`` in one folder, ``verify DIR/relation.json`` from
    another, and verify looked for ``a`` there (INVALID: "not a local directory, and fetching it from the hub
    failed"). A local checkpoint's path is written absolute now, and a relative one (a file written before) is read
    beside the file. A relative name that is nothing beside the file is read as given: INVALID from elsewhere (the
    false case)."""
    import json

    from symtrans.group.relate import _digest
    from symtrans.numeric.fixtures import random_checkpoint

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    elsewhere.mkdir()
    random_checkpoint(work / "a", "bert", seed=0)
    monkeypatch.chdir(work)
    assert main(["relate", "a", "a", "--quiet"]) == 0
    data = json.loads((work / "relation.json").read_text())
    assert data["a"]["model"] == str(work / "a")
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["verify", str(work / "relation.json"), "--quiet"]) == 0
    for ref, code in (("a", 0), ("no-such-model", 1)):  # a file written with relative paths
        data["a"]["model"] = data["b"]["model"] = ref
        data["digest"] = _digest(data)
        (work / "relation.json").write_text(json.dumps(data))
        assert main(["verify", str(work / "relation.json"), "--quiet"]) == code
        assert ("valid:" if code == 0 else "INVALID") in capsys.readouterr().out
