"""G's surfaces on planted degeneracies: heads and FFN units that real (pruned, dead) checkpoints have.

Each kind is planted on a small random checkpoint written in float32: a head with W_O^h = 0, with W_V^h = 0,
pruned whole, with half its value channel pruned on W_V's side or on both sides, with W_Q^h = 0, with half
its query/key channel pruned on both sides (a pruned key/value head of a grouped-query Llama, whose tied heads
may leave relate undecided, is in tests/test_group_relate_tiny.py); an FFN unit
0 in every tensor; two equal heads; two equal units. For a random element g of G, relate(A, g . A) must find
an element, canonical(A) and canonical(g . A) must agree (what they leave free reported on both), and a gauge
check must move no function reading and no parametrisation reading by an undeclared factor. Each of these
once failed on some kind (raw LinAlgErrors, "not related", a singular gauge, undeclared movers): see
CHANGELOG.md. Slow tier: the quick tier pins each failure in tests/test_group_relate_tiny.py and
tests/test_gauge.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _degenerate import KINDS, planted_checkpoint

from symtrans.group.canonical import canonical
from symtrans.group.numeric import model_blocks, weights_from_blocks
from symtrans.group.relate import apply_steps, random_element, relate
from symtrans.group.spec import GroupSpec

pytestmark = pytest.mark.slow


def plant(family: str, kind: str, tmp: Path) -> Any:
    """A random ``family`` checkpoint with ``kind`` planted (:mod:`_degenerate`)."""
    return planted_checkpoint(family, (kind,), tmp)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("kind", KINDS)
def test_relate_and_canonical_on_a_planted_degeneracy(tmp_path, family, kind):
    a = plant(family, kind, tmp_path)
    spec = GroupSpec.from_arch(a.arch)
    b = weights_from_blocks(a, apply_steps(spec, model_blocks(a), random_element(spec, a.n_layers, 0)))
    rel = relate(a, b)
    assert rel.related, rel.summary()
    ca, cb = canonical(a), canonical(b)
    assert len(ca.ambiguities) == len(cb.ambiguities), (ca.ambiguities, cb.ambiguities)
    for k, x in ca.weights.tensors.items():
        if x is not None:
            y = cb.weights.tensors[k]
            assert float((x - y).norm()) <= 1e-10 * max(float(x.norm()), 1.0), (k, ca.ambiguities)


@pytest.mark.parametrize("family,kind,n", [("bert", "zero-wo", 16), ("bert", "zero-v", 16), ("bert", "half-v", 16),
                                           ("gpt2", "zero-v", 40), ("llama", "half-both", 40)])
def test_a_gauge_check_of_a_planted_degeneracy_finds_no_defect(tmp_path, family, kind, n):
    from symtrans.report.gauge import gauge_check

    a = plant(family, kind, tmp_path)
    gc = gauge_check(str(a.source), n=n, elements=3, seed=0)
    assert gc.elements and not gc.defects, gc.defects
