"""Every factor of G owns its constructions (issue 40): one entry in symtrans.group.elements.ELEMENTS.

A new factor needs one definition: its catalogue builder (symtrans/catalogue/factors.py) and its entry here.
Two checks hold that in place:

* every factor the catalogue builds, over a spread of architectures, has an entry, and each of its
  constructions works on a tiny instance (a random element, a Lie-algebra element that is the identity at
  zero coordinates, exact elements; a witness for each breaking feature of a witnessed factor);
* the engines (symtrans/group, symtrans/certify) contain no chain over factor names: a scanner, fed a
  planted chain of each kind, finds it, and finds none in the engines.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from symtrans.arch import PRESETS, get_arch  # noqa: E402
from symtrans.errors import SymtransError  # noqa: E402
from symtrans.group.certify import tiny_arch  # noqa: E402
from symtrans.group.elements import ELEMENTS, ROLES, STAGES, elements_of  # noqa: E402
from symtrans.group.spec import GroupSpec, act  # noqa: E402

SOURCE = Path(__file__).resolve().parent.parent / "symtrans"
HOME = SOURCE / "group" / "elements.py"


def _variants() -> list:
    """The presets, and a tiny architecture under every choice of the switches that add or remove factors."""
    out = [get_arch(p) for p in PRESETS]
    base = tiny_arch("bert-base")
    switches = {"norm_placement": ("post", "pre"), "norm": ("layernorm", "rmsnorm"), "ffn": ("mlp", "gated"),
                "activation": ("gelu", "relu"), "qk_norm": (False, True), "bias": (True, False)}
    for values in itertools.product(*switches.values()):
        out.append(dataclasses.replace(base, **dict(zip(switches, values))))
    out.append(dataclasses.replace(base, positional="rotary", qk_norm=True, qk_norm_full=True, norm="rmsnorm"))
    out.append(dataclasses.replace(base, norm_placement="pre", attention="causal", tied_lm_head=False,
                                   final_norm=True))  # an untied head reads the final LayerNorm
    out.append(dataclasses.replace(base, norm_placement="pre", positional="rotary", bias=True, parallel_residual=True,
                                   partial_rotary_factor=0.5, d_k=4, d_v=4))  # GPT-NeoX: parallel, partial rotary
    return out


def _catalogue() -> dict[str, list]:
    """Factor name -> the architectures (in order) whose catalogue has it."""
    found: dict[str, list] = {}
    for a in _variants():
        try:
            spec = GroupSpec.from_arch(a, strict=False)
        except SymtransError:
            continue  # a combination the catalogue refuses (an unmodelled feature)
        for f in spec.factors:
            found.setdefault(f.name, []).append(a)
    return found


CATALOGUE = _catalogue()


def test_every_factor_of_the_catalogue_has_one_entry_and_no_entry_is_stale() -> None:
    assert len(CATALOGUE) >= 27  # the variants reach the QK-norm trade and the gate scaling too
    assert set(CATALOGUE) - set(ELEMENTS) == set(), "factors without constructions (add them to ELEMENTS)"
    assert set(ELEMENTS) - set(CATALOGUE) == set(), "entries for no factor of the catalogue"
    for name, entry in ELEMENTS.items():
        assert entry.role in ("", *ROLES) and entry.stages in STAGES, name


def _tiny_spec(name: str) -> GroupSpec:
    """A tiny copy of the first architecture whose catalogue has ``name`` with tags (so it acts)."""
    for a in CATALOGUE[name]:
        widths = {"d_k": a.d_k, "d_v": a.d_v} if a.partial_rotary_factor != 1 else {}  # a rotated and a free part
        small = tiny_arch(a, L=2, **widths)  # two layers: a between-layer factor needs both sides
        spec = GroupSpec.from_arch(small, strict=False)
        if any(f.name == name and (f.tags or f.scope == "data") for f in spec.factors):
            return spec
    pytest.skip(f"{name}: no tiny architecture where it acts")


@pytest.mark.parametrize("name", sorted(ELEMENTS))
def test_each_factor_provides_each_construction(name: str) -> None:
    spec = _tiny_spec(name)
    f = spec.factor(name)
    entry = elements_of(spec, name)
    el, kappa = entry.sample(spec, name, torch.Generator().manual_seed(0), torch.float64, "adjacent")
    assert isinstance(el, dict) and el and kappa >= 1.0
    exact = entry.exact(spec, name)
    assert exact and all(isinstance(d, str) and isinstance(e, dict) and e for d, e in exact)
    if f.kind == "discrete":
        with pytest.raises(SymtransError, match="no Lie-algebra coordinates"):
            entry.lie(spec, name, lambda: None, "adjacent")
    else:  # the identity at zero coordinates: acting with it changes no weight
        from symtrans.group.certify import _model_params

        sizes = iter(spec.factor_sizes(name))
        zero = entry.lie(spec, name, lambda: torch.zeros(next(sizes), dtype=torch.float64), "adjacent")
        params = _to_torch(_model_params(spec.arch, 0))
        if f.scope == "layer":
            before, after = params["layers"][0], act(spec, params["layers"][0], name, zero)
        elif f.scope == "stack":
            before = {"layers": params["layers"][:2]}
            after = act(spec, before, name, [zero])
        else:
            before, after = params, act(spec, params, name, zero)
        assert _max_change(before, after) <= 1e-12, name
    assert entry.unbroken(spec.arch).name == spec.arch.name


def _to_torch(x):
    import sympy as sp

    if isinstance(x, dict):
        return {k: _to_torch(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_to_torch(v) for v in x]
    if isinstance(x, sp.MatrixBase):
        return torch.tensor([[float(v) for v in row] for row in x.tolist()], dtype=torch.float64).reshape(x.shape)
    return x


def _max_change(a, b) -> float:
    if isinstance(a, dict):
        return max([_max_change(a[k], b[k]) for k in a if k in b] or [0.0])
    if isinstance(a, list):
        return max([_max_change(x, y) for x, y in zip(a, b)] or [0.0])
    if isinstance(a, torch.Tensor):
        return float((a - b).abs().max()) if a.numel() else 0.0
    return 0.0


def test_every_breaking_feature_of_a_witnessed_factor_has_a_construction() -> None:
    """certify_all witnesses each breaking feature of a factor with a witness: none may be left unbuilt."""
    from symtrans.group.certify import _breaking_setup

    seen = set()
    for p in PRESETS:
        spec = GroupSpec.from_arch(get_arch(p), strict=False)
        for f in spec.factors:
            if ELEMENTS[f.name].witness is None:
                continue
            for b in f.broken_by:
                if (f.name, b.feature) in seen:
                    continue
                seen.add((f.name, b.feature))
                setup = _breaking_setup(get_arch(p), f.name, b.feature)  # raises where nothing is built
                assert setup is None or setup[1][1], (f.name, b.feature)
    assert len(seen) >= 10


# --------------------------------------------------------------------------- no chain over factor names
def _factor_literal() -> str:
    names = "|".join(re.escape(n) for n in sorted(ELEMENTS, key=len, reverse=True))
    return r"""["'](?:%s)["']""" % names


_Q = _factor_literal()
#: a factor's name compared, or listed in a literal tuple/list/set to test or loop over: a dispatch on the name
CHAIN = re.compile(r"(?:==|!=)\s*%s|%s\s*(?:==|!=)|\bin\s*[\(\[\{]\s*%s|\.(?:endswith|startswith)\(\s*%s"
                   % (_Q, _Q, _Q, _Q))


def chains_over_factor_names(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each test of a factor's name in ``text`` (doctest lines are examples, not code)."""
    lines = text.splitlines()
    out = []
    for m in CHAIN.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        shown = lines[line - 1].strip()
        if not shown.startswith((">>>", "...")):
            out.append((line, shown))
    return out


def test_the_chain_scanner_finds_each_kind_of_chain() -> None:
    planted = {
        "if factor == \"qk-gauge\":\n    pass\n": 1,
        "elif 'S_n' != name:\n    pass\n": 1,
        "if f.name in (\"ffn-scaling\", \"gate-scaling\"):\n    pass\n": 1,
        "for name in [\"qk-gauge\", \"vo-gauge\"]:\n    pass\n": 1,
        "key = {'residual-rotation': 1}[f.name] if f.name in {'residual-rotation'} else 0\n": 1,
    }
    for text, count in planted.items():
        assert len(chains_over_factor_names(text)) == count, text
    clean = ("spec.factor(\"qk-gauge\")\nfor f in with_role(spec, \"head-gauge\"):\n    pass\n"
             "if name == \"W_Q\":\n    pass\n    >>> f.name == \"S_H\"\n")
    assert chains_over_factor_names(clean) == []


def test_the_engines_contain_no_chain_over_factor_names() -> None:
    """The behaviour of a factor is its ELEMENTS entry's; the engines ask it, never the factor's name."""
    engines = sorted((SOURCE / "group").glob("*.py")) + sorted((SOURCE / "certify").rglob("*.py"))
    assert HOME in engines and chains_over_factor_names(HOME.read_text())  # the registry itself lists names
    found = [(str(p.relative_to(SOURCE.parent)), *hit) for p in engines if p != HOME
             for hit in chains_over_factor_names(p.read_text())]
    assert not found, "chains over factor names (give the factor's ELEMENTS entry the behaviour):\n" + \
        "\n".join(map(str, found))
