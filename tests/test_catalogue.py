"""The catalogue of G (symtrans.catalogue): coordinates carried by each factor, and a definitions-level import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from symtrans.arch import PRESETS
from symtrans.catalogue import GroupSpec
from symtrans.catalogue.model import Piece
from symtrans.errors import SymtransError

#: factors whose coordinates overlap other factors' (each piece at most one direction): the along-1 part of an
#: embedding translation is an embedding-centring shift; RoBERTa's unused position rows move in both factors
OVERLAPPING = {"embedding-translation", "embedding-centring-shift"}


def _specs():
    return [GroupSpec.from_arch(name, strict=False) for name in sorted(PRESETS) if name != "symbolic"]


def test_coordinates_count_the_dimension():
    """Two routes to a factor's size: its builder's dimension formula and the sum of its element's coordinates."""
    seen = 0
    for spec in _specs():
        for f in spec.factors:
            if f.kind != "continuous" or not f.tags:
                continue
            coords, dim = sum(spec.factor_sizes(f.name)), int(spec._value(f.dimension))
            if f.name in OVERLAPPING:
                assert 0 <= coords - dim <= len(f.coordinates) * max(
                    int(spec._value(p.count)) for p in f.coordinates), (spec.arch.name, f.name, coords, dim)
            else:
                assert coords == dim, (spec.arch.name, f.name, coords, dim)
            seen += 1
    assert seen > 100


def test_a_wrong_coordinate_count_is_seen():
    """The check above fails on a factor whose coordinates were attached wrongly (a square block for a vector)."""
    import dataclasses

    spec = GroupSpec.from_arch("bert-base")
    f = spec.factor("ffn-bias-transfer")
    wrong = dataclasses.replace(f, coordinates=(Piece("t", 1, (f.coordinates[0].shape[1],) * 2),))
    bad = dataclasses.replace(spec, factors=tuple(wrong if g.name == f.name else g for g in spec.factors))
    assert sum(bad.factor_sizes(f.name)) != int(spec._value(f.dimension))


def test_discrete_factors_have_no_coordinates():
    spec = GroupSpec.from_arch("bert-base")
    with pytest.raises(SymtransError, match="'S_H' is discrete"):
        spec.factor_sizes("S_H")


def test_the_catalogue_loads_no_engine_and_no_torch():
    """A formula that reads G's dimension loads the catalogue, not the group's engines or torch."""
    code = ("import json, sys; from symtrans.formulas import formula; "
            "v = formula('norm-symmetry-dimension', arch='bert-base').value; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('symtrans', 'torch')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    mods = json.loads(out.stdout)
    assert not [m for m in mods if m.startswith(("symtrans.group", "torch", "symtrans.numeric"))], mods
    assert "symtrans.catalogue.factors" in mods
