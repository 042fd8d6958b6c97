"""Every reading declares what it is about (the function, or the parametrisation and the factors that move it).

The gauge check (tests/test_gauge.py) holds each reading to its declaration; here the declarations themselves
are checked: present on every statement that gets a verdict, and naming real factors of G.
"""

from __future__ import annotations

import pytest

from proofs._claim import ABOUT, Claim, Reading, declared_items, undeclared
from symtrans.errors import SymtransError

pytestmark = pytest.mark.quick


def _factor_names() -> set[str]:
    from symtrans.group import GroupSpec

    import dataclasses

    from symtrans.arch import get_arch

    names: set[str] = set()
    for preset in ("bert-base", "gpt2", "llama2-7b", "qwen2-7b", "minilm-l6-h384"):
        names |= {f.name for f in GroupSpec.from_arch(preset).factors}
    # a parallel residual with biases (GPT-NeoX/Pythia, no preset): its bias trade between b_O and b_out
    names |= {f.name for f in GroupSpec.from_arch(dataclasses.replace(get_arch("gpt2"), parallel_residual=True)).factors}
    return names


def test_every_statement_declares_what_it_is_about():
    assert undeclared() == []
    assert all(i.about in ABOUT for i in declared_items())


def test_a_new_reading_without_a_declaration_is_caught():
    # the false case: a reading (and a claim without readings) that omits the declaration
    r = Reading("new", "s", "w", "n").with_claim("demo")
    c = Claim(id="demo-undeclared", kind="lemma", title="t", paper_ref="r", section="§0", statement="s",
              latex="s", paper_status="proved")
    assert undeclared([r, c]) == ["demo/new", "demo-undeclared"]


def test_parametrisation_readings_name_real_factors_and_a_counterpart():
    known = _factor_names()
    params = [i for i in declared_items() if i.about == "parametrisation"]
    assert params, "no parametrisation-reading: thm-7.3/wo at least is one"
    for i in params:
        assert i.moved_by and set(i.moved_by) <= known, (i.id, set(i.moved_by) - known)
        assert len(i.invariant) > 20, i.id
    for i in declared_items():
        if i.about == "function":
            assert not i.moved_by and not i.invariant, i.id


def test_thm73_wo_is_about_the_parametrisation_and_sum_about_the_function():
    from proofs import get_claim

    c = get_claim("thm-7.3")
    assert c.reading("thm-7.3/wo").moved_by == ("centring-shift", "vo-gauge")  # proofs._claim.STORED_WO_RANK
    assert c.reading("thm-7.3/sum").about == "function"


@pytest.mark.parametrize("kwargs, message", [
    ({"about": "parametrisation"}, "names the factors"),
    ({"about": "function", "moved_by": ("S_H",)}, "names no moving factor"),
    ({"about": "functoin"}, "did you mean 'function'"),
    ({"about": "parametrisation", "moved_by": "S_H", "invariant": "x"}, "not a string"),
])
def test_malformed_declarations_are_refused(kwargs, message):
    with pytest.raises(SymtransError, match=message):
        Reading("a", "s", "w", "n", **kwargs)
