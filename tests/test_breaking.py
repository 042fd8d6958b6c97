"""framework-9 as readings that can fail: the breaking table (group --breaking) and the orbits reading.

The numbers asserted come from routes other than the table's own count: the instance's sizes through the
factor each ablation removes or creates (a linear gate gains one scaling per unit; without W_O the vo-gauge
goes; without norms their gains' scalings go), a second seed (the evidence re-checks), and the planted
architecture without a non-linearity (removing it again changes nothing, so the reading must fail, named).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symtrans.arch import get_arch
from symtrans.group.breaking import breaking
from symtrans.group.complete import plan

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


@pytest.fixture(scope="module")
def llama_table():
    return breaking("llama2-7b", layers=(1,))


def _row(t, key):
    return next(r for r in t["components"] if r["component"] == key)


def test_llama_ablations_change_g_by_the_factors_they_create_or_remove(llama_table):
    inst = plan("llama2-7b", "layers", (1,))["instances"][0]
    d_ff, d_model, H_kv, d_v = int(inst.d_ff), int(inst.d_model), int(inst.H_kv), int(inst.d_v)
    # a linear gate: (gate, up, down) of each unit has two scalings instead of SiLU-gated one
    assert _row(llama_table, "nonlinearity")["measured"][0]["change"] == d_ff
    # W_O fixed: the vo-gauge (H_kv GL(d_v)) goes and nothing new appears
    wo = _row(llama_table, "wo-mixing")["measured"][0]
    assert wo["change"] == -H_kv * d_v ** 2 and wo["breaks"] == 0
    # no norms: the two RMSNorm gain scalings (d_model each) go
    assert _row(llama_table, "norm")["measured"][0]["change"] == -2 * d_model
    assert _row(llama_table, "residual")["enlarges"] and _row(llama_table, "gates")["state"] == "absent"
    for row in llama_table["components"]:
        for m in row.get("measured", []):
            assert m["consistent"] and m["record"]["clear"], (row["component"], m)


def test_each_cell_rechecks_at_another_seed(llama_table):
    other = breaking("llama2-7b", layers=(1,), seed=3)
    for a, b in zip(llama_table["components"], other["components"]):
        assert a.get("state") == b.get("state")
        for ma, mb in zip(a.get("measured", []), b.get("measured", [])):
            assert ma["change"] == mb["change"] and ma["breaks"] == mb["breaks"], a["component"]
            assert [(c["factor"], c["cell"]) for c in ma["cells"]] == [(c["factor"], c["cell"]) for c in mb["cells"]]


def test_a_planted_architecture_whose_nonlinearity_breaks_nothing_fails_the_reading():
    from symtrans.producers.sec9 import breaking_verdict
    from symtrans.evidence import Verdict

    planted = get_arch("bert-base").without("nonlinearity")  # its FFN is already linear
    t = breaking(planted, layers=(1,), components=("nonlinearity", "residual"))
    row = _row(t, "nonlinearity")
    assert row["measured"][0]["change"] == 0 and not row["enlarges"]
    v, summary, failing = breaking_verdict(t)
    assert v is Verdict.FAILS and failing == ["MLP non-linearity"] and "MLP non-linearity" in summary
    # the same reading on the complete architecture: the non-linearity does enlarge G
    full = breaking("bert-base", layers=(1,), components=("nonlinearity",))
    assert breaking_verdict(full)[0] is Verdict.SUPPORTED


def test_group_breaking_cli_bert_text_and_llama_config_json(tmp_path, capsys):
    """The command in this process (main): the process itself is tested by test_ux.py and the refusal below."""
    from symtrans.cli import main

    rc = main(["group", "--breaking", "--arch", "bert-base", "--layers", "1"])
    text, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    for name in ("residual stream", "MLP non-linearity", "LayerNorm/RMSNorm", "W_O mixing of heads", "PG-OP's gates"):
        assert name in text
    assert "residual stream [residual]: enlarges G when removed" in text
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "hidden_size": 16, "intermediate_size": 24,
                               "max_position_embeddings": 64, "vocab_size": 50}))
    rc = main(["group", "--breaking", "--arch", str(cfg), "--layers", "1", "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    data = json.loads(out)
    states = {r["component"]: r.get("state") for r in data["components"]}
    assert states == {"residual": "present", "nonlinearity": "present", "norm": "present", "wo-mixing": "present",
                      "gates": "absent"}
    cells = {c["cell"] for r in data["components"] for m in r.get("measured", []) for c in m["cells"]}
    assert cells <= {"keeps", "shrinks", "needs", "n/a"} and {"keeps", "needs"} <= cells


def test_breaking_refuses_a_model_and_unknown_components():
    from symtrans.errors import SymtransError

    with pytest.raises(SymtransError, match="ablated component"):
        get_arch("bert-base").without("attention")
    with pytest.raises(SymtransError, match="component"):
        breaking("bert-base", layers=(1,), components=("gate",))
    out = subprocess.run([sys.executable, "-m", "symtrans", "group", "--breaking", "--model", "default"],
                         capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300)
    assert out.returncode != 0 and "--breaking needs --arch" in out.stderr


# ------------------------------------------------------------------ the orbits reading
def test_width_collapse_fixed_points_with_and_without_the_causal_mask():
    from symtrans.producers.sec9 import fixed_attention_set

    for n in (3, 6):
        free = fixed_attention_set(n, causal=False)
        assert free["dimension"] == 1 and free["contains_uniform"]  # {a I + (1 - a)/n 1 1^T}
        masked = fixed_attention_set(n, causal=True)
        assert masked["dimension"] == 0 and not masked["contains_uniform"] and masked["members_rank"] == n


def test_orbits_verdict_fails_on_a_false_tie_and_is_undecided_on_an_open_one():
    from symtrans.producers.sec9 import orbits_verdict
    from symtrans.evidence import Verdict

    ok = {"phenomenon": "a", "holds": True, "numbers": "1 = 1"}
    assert orbits_verdict([ok])[0] is Verdict.SUPPORTED
    assert orbits_verdict([ok, {"phenomenon": "b", "holds": None, "numbers": "?"}])[0] is Verdict.INCONCLUSIVE
    v, summary = orbits_verdict([ok, {"phenomenon": "b", "holds": False, "numbers": "2 != 3"}])
    assert v is Verdict.FAILS and "b: 2 != 3" in summary


def test_depth_tie_fails_for_a_layer_that_is_not_permutation_equivariant():
    # the false case of the depth tie: a position-dependent term inside a layer moves 1 x^T off Fix(S_n)
    import torch

    from symtrans.producers.sec9 import orbit_rows
    from symtrans.context import Context
    from symtrans.numeric import load_model

    w = load_model("default")
    assert orbit_rows(Context(model="default", n=6).preload(w))[0]["holds"]

    import symtrans.numeric.forward as fw

    original = fw.attention

    def positional(X, layer, st=None):  # head 0 also writes i * e_0 at position i: not S_n-equivariant
        A, Y, YO = original(X, layer, st)
        YO = YO.clone()
        YO[0, :, 0] += torch.arange(X.shape[0], dtype=YO.dtype)
        return A, Y, YO

    fw.attention = positional
    try:
        row = orbit_rows(Context(model="default", n=6).preload(w))[0]
    finally:
        fw.attention = original
    assert row["holds"] is False and row["deviation"] > row["tolerance"]


# ------------------------------------------------------------------ framework-9 on models
@pytest.mark.parametrize("family", ["bert-bundled", "llama"])
def test_framework9_readings_give_counted_verdicts(family, tmp_path):
    from symtrans.context import Context
    from symtrans.evidence import Verdict
    from symtrans.runner import check_producers, run_tasks

    ctx = Context(model="default", n=8)
    if family == "llama":
        from symtrans.numeric import load_model
        from symtrans.numeric.fixtures import random_checkpoint

        path, _ = random_checkpoint(tmp_path / "llama", "llama", n_layers=2)
        ctx = Context(model=str(path), n=8)
        ctx.preload(load_model(str(path)))
    ps = [p for p in check_producers() if p.claim == "framework-9"]
    assert {p.reading for p in ps} == {"framework-9/breaking", "framework-9/orbits"}
    records = [e for res in run_tasks([(p.claim, p) for p in ps], ctx, parallel=False, errors="raise") for e in res]
    by = {e.producer: e for e in records}
    assert set(by) == {"ablation-stabilisers", "collapse-objects"}
    for e in records:
        assert e.counted and e.verdict in (Verdict.SUPPORTED, Verdict.FAILS, Verdict.INCONCLUSIVE)
        assert e.dtype and e.tolerance is not None and e.margin is not None
    # the breaking reading fails, naming the norms and the W_O mixing: removing either lowers the dimension
    assert by["ablation-stabilisers"].verdict is Verdict.FAILS
    failing = by["ablation-stabilisers"].details["failing"]
    assert failing == ["LayerNorm/RMSNorm", "W_O mixing of heads"]
    # the head-channel tie fails with its numbers: n(H-1)d_v against H_kv d_v^2
    rows = {r["phenomenon"]: r for r in by["collapse-objects"].details["rows"]}
    head = rows["head-channel non-identifiability"]
    a = ctx.weights().arch
    assert head["count"] == 8 * (int(a.H) - 1) * int(a.d_v) and head["vo_orbit"] == int(a.H_kv) * int(a.d_v) ** 2
    assert head["holds"] is False and by["collapse-objects"].verdict is Verdict.FAILS
    assert rows["rank collapse in depth"]["holds"] is True
    assert rows["rank collapse in width"]["holds"] is (a.attention != "causal")


def test_the_report_opens_framework9_with_the_breaking_table(example_report):
    """framework-9's section of report.md and report.html starts with the components x factors table, each row
    the measured numbers of its evidence (a claim without that evidence gets no table)."""
    _, doc, path = example_report
    claim = next(c for c in doc["claims"] if c["id"] == "framework-9")
    rec = next(e for e in claim["evidence"] if e["producer"] == "ablation-stabilisers")
    md = (path.parent / "report.md").read_text(encoding="utf-8")
    section = md[md.index('<a id="claim-framework-9"></a>'):]
    section = section[:section.index("<a id=", 10)] if "<a id=" in section[10:] else section
    assert "**Components x factors of G**" in section
    assert section.index("Components x factors") < section.index("**Readings**")
    for c in rec["details"]["components"]:
        for m in c["measured"]:
            assert f"L={m['L']}: {m['measured_dimension']} ({m['baseline']}), {m['change']:+d}" in section
    other = md[md.index('<a id="claim-thm-7.3"></a>'):]
    assert "Components x factors" not in other[:other.index("<a id=", 10)]
    html = (path.parent / "report.html").read_text(encoding="utf-8")
    assert html.count("Components x factors of G") == 1
