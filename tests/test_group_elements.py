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
        assert entry.stages in STAGES, name


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


# --------------------------------------------------------------------------- no decision over factor names
def _factor_literal() -> str:
    names = "|".join(re.escape(n) for n in sorted(ELEMENTS, key=len, reverse=True))
    return r"""["'](?:%s)["']""" % names


_Q = _factor_literal()
#: a factor's name compared, tested for membership, chosen by a condition, or listed with another name in a literal
#: tuple/list/set (to test, loop over or sum): a decision on the name. A lookup of the one factor a step is about
#: (``spec.factor("S_H")``, ``f = present.get("S_H")``) names it and decides nothing; testing such a lookup in a
#: condition (``if not present.get("gate-scaling")``) decides on the name.
CHAIN = re.compile(r"(?:==|!=)\s*%s|%s\s*(?:==|!=)|\bin\s*[\(\[\{]\s*%s|\.(?:endswith|startswith)\(\s*%s"
                   r"|%s\s+(?:not\s+)?in\b|%s\s+if\b|[\(\[\{]\s*%s\s*,\s*%s"
                   r"|(?:\bif|\bnot|\band|\bor|\bbool\()\s*[\w.]+\.get\(\s*%s" % ((_Q,) * 9))

#: where a factor's name may decide: its catalogue builder and its ELEMENTS entry
OWNERS = ("catalogue/factors.py", "group/elements.py")
#: the independent certificate checker restates the factors it checks on purpose (its trusted code base reads
#: neither the catalogue's attributes nor the engines: docs/certificates.md)
EXEMPT = ("checker/",)


def _code_only(text: str) -> str:
    """``text`` with every docstring and bare string statement blanked (newlines kept): examples are not code."""
    import ast

    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = list(text)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            a = starts[node.lineno - 1] + node.col_offset
            b = starts[node.end_lineno - 1] + node.end_col_offset
            out[a:b] = [c if c == "\n" else " " for c in text[a:b]]
    return "".join(out)


def chains_over_factor_names(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each decision on a factor's name in the Python source ``text`` (docstrings skipped)."""
    lines = text.splitlines()
    code = _code_only(text)
    out = []
    for m in CHAIN.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        out.append((line, lines[line - 1].strip()))
    return out


def name_decisions_outside_owners(root: Path) -> list[tuple[str, int, str]]:
    """Each decision on a factor's name in the package ``root`` outside :data:`OWNERS` (and :data:`EXEMPT`)."""
    found = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel in OWNERS or rel.startswith(EXEMPT):
            continue
        found += [(rel, *hit) for hit in chains_over_factor_names(p.read_text())]
    return found


#: the decisions that lived outside the owners before issue 40, as they were written
PLANTED = {
    "if factor == \"qk-gauge\":\n    pass\n": 1,
    "if x:\n    pass\nelif 'S_n' != name:\n    pass\n": 1,
    "if f.name in (\"ffn-scaling\", \"gate-scaling\"):\n    pass\n": 1,
    "for name in [\"qk-gauge\", \"vo-gauge\"]:\n    pass\n": 1,
    "key = {'residual-rotation': 1}[f.name] if f.name in {'residual-rotation'} else 0\n": 1,
    "x = sp.Add(*[spec.factor(n).effective_dimension for n in (\"qk-gauge\", \"vo-gauge\")])\n": 1,
    "paper = spec.layer_sum((\"qk-gauge\", \"vo-gauge\", \"key-bias-shift\"))\n": 1,
    "_ORBIT = (\"qk-gauge\", \"vo-gauge\", \"key-bias-shift\", \"value-bias-shift\", \"ffn-scaling\")\n": 1,
    "for name in (\"residual-permutation\", \"residual-rotation\"):\n    pass\n": 1,
    "if \"centring-shift\" in gauge_factors(spec):\n    pass\n": 1,
    "if centring and \"centring-shift\" not in present:\n    pass\n": 1,
    "order = [\"embedding-translation\",\n         \"ffn-bias-transfer\"]\n": 1,
    "self.refuse(\"residual-rotation\" if rot is not None else name)\n": 1,
    "if not self.present.get(\"gate-scaling\"):\n    pass\n": 1,
    "centring = bool(self.present.get(\"embedding-centring-shift\"))\n": 1,
    "if x and s.present.get('S_H') is None:\n    pass\n": 1,
}


def test_the_chain_scanner_finds_each_kind_of_decision() -> None:
    for text, count in PLANTED.items():
        assert len(chains_over_factor_names(text)) == count, text
    clean = ("spec.factor(\"qk-gauge\")\nfor f in with_role(spec, \"head-gauge\"):\n    pass\n"
             "if name == \"W_Q\":\n    pass\nf = present.get(\"S_H\")\n"
             "def f():\n    \"\"\"Doc.\n\n    >>> f.name == \"S_H\"\n    ['qk-gauge', 'vo-gauge']\n    \"\"\"\n")
    assert chains_over_factor_names(clean) == []


def test_a_planted_name_decision_outside_the_owners_is_found(tmp_path: Path) -> None:
    """The package scan fails on a decision planted in any module but the owners, and not in the owners."""
    text = "".join(PLANTED)
    for rel in ("report/gauge.py", "formulas.py", "catalogue/spec.py", "group/gauge.py", *OWNERS, "checker/check.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = name_decisions_outside_owners(tmp_path)
    assert {rel for rel, *_ in found} == {"report/gauge.py", "formulas.py", "catalogue/spec.py", "group/gauge.py"}
    assert len(found) == 4 * sum(PLANTED.values())


def test_no_module_decides_by_a_factor_name_outside_its_owners() -> None:
    """A factor's behaviour is its catalogue attributes' (role, paper) or its ELEMENTS entry's; others ask them."""
    assert chains_over_factor_names(HOME.read_text())  # the registry itself lists names
    found = name_decisions_outside_owners(SOURCE)
    assert not found, "decisions on factor names (give the factor an attribute in its builder or ELEMENTS entry):\n" \
        + "\n".join(map(str, found))


def test_roles_are_declared_by_the_catalogue_and_checked() -> None:
    from symtrans.catalogue.model import ROLES as DECLARED, Factor

    assert ROLES is DECLARED
    from symtrans.numeric.fixtures import DECODER_FAMILIES, tiny_decoder

    archs = [get_arch(p) for p in PRESETS] + [tiny_decoder(f).arch for f in DECODER_FAMILIES]
    roles = {f.role for a in archs for f in GroupSpec.from_arch(a, strict=False).factors}
    assert roles == {"", *ROLES}  # every role is some factor's, of a preset or of a decoder family (OLMo 2's
    # head-gain-trade has no preset)
    spec = GroupSpec.from_arch("bert-base")
    with pytest.raises(SymtransError, match="unknown factor role 'gauge'"):
        dataclasses.replace(spec.factor("qk-gauge"), role="gauge")
    with pytest.raises(SymtransError, match="unknown factor role"):
        spec.names(role="head_gauge")
    assert isinstance(spec.factor("qk-gauge"), Factor)


def test_the_paper_factors_are_claims_md_s() -> None:
    """``paper`` marks the factors claims.md's table of G lists (per-head GL, S_H, S_d_ff and its ReLU scaling,
    S_n, the bias shifts): read independently from the table's rows, not from the catalogue."""
    spec = GroupSpec.from_arch(dataclasses.replace(get_arch("bert-base"), activation="relu"))
    table = {"per-head GL(d_k)": "qk-gauge", "per-head GL(d_v)": "vo-gauge", "S_H": "S_H", "S_{d_ff}": "S_dff",
             "positive scaling for ReLU": "ffn-scaling", "S_n": "S_n", "softmax shift": "key-bias-shift"}
    claims = Path("/work/shared/paper/claims.md")
    if claims.exists():
        text = claims.read_text()
        assert all(row in text for row in table), "claims.md's table of G changed"
    # value-bias-shift: the bias shift on the value side, counted with the paper's factors (norm-symmetry-dimension)
    assert set(spec.names(paper=True)) == {*table.values(), "value-bias-shift"}


def test_translation_ranks_are_distinct() -> None:
    ranks = [e.translation for e in ELEMENTS.values() if e.translation is not None]
    assert len(ranks) == len(set(ranks)) >= 13
