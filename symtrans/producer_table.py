"""The one producer table: every producer of evidence, keyed by claim (or claim/reading), in run order.

Each row is ``(claim, name, kind, "module:function")``: the claim id (or a
reading id ``claim/reading``), the producer's name (its records'
``producer``), its kind (``symbolic`` or ``numeric``) and where its function
lives, imported only when the producer runs. The function carries its
options (``needs_model``, ``families``, ``cost``, ...) in its
:func:`symtrans.evidence.producer` decorator, whose claim, name and kind must
equal the row's (:func:`symtrans.runner.registry` checks, and refuses a
decorated function that has no row).

Adding a producer is one line here (docs/adding-a-claim.md). Every producer
lives in the module of its paper section (``symtrans.producers.secN``), the
exact and the numeric ones of a claim side by side; the kind decides which
command runs it: ``symbolic`` rows are the exact certificates, searches and
Coq records of ``symtrans certify``, ``numeric`` rows the checks of
``symtrans check`` (:data:`CERTIFY_KIND`, :data:`CHECK_KIND`). The row order is
the run order: the exact producers first, then the numeric checks. Everything
that lists producers reads this table: ``symtrans claims ID`` (without
importing any producer module, so without torch), the claim ids ``check`` and
``certify`` accept (:func:`checked_claims`, :func:`certified_claims`), the
report and the runner.

This module imports nothing but :mod:`symtrans.errors`.

Examples
--------
>>> declared("thm-7.3")
[('coq-thm73-sum-fibre', 'symbolic'), ('head-identifiability', 'numeric')]
>>> "prop-5.1" in certified_claims() and "prop-5.4" in checked_claims()
True
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ProducerEntry", "PRODUCER_TABLE", "CERTIFY_KIND", "CHECK_KIND", "KINDS", "entries", "declared",
           "checked_claims", "certified_claims", "modules"]

#: the kind of the exact certificates, searches and Coq records (``symtrans certify`` runs them)
CERTIFY_KIND = "symbolic"
#: the kind of the numeric checks (``symtrans check`` runs them)
CHECK_KIND = "numeric"
#: every kind a row may have
KINDS = (CERTIFY_KIND, CHECK_KIND)


class ProducerEntry(NamedTuple):
    """One row of :data:`PRODUCER_TABLE`.

    Examples
    --------
    >>> e = ProducerEntry("c/r", "p", "numeric", "symtrans.producers.sec4:f")
    >>> e.claim_id, e.module, e.function
    ('c', 'symtrans.producers.sec4', 'f')
    """

    claim: str  # claim id or reading id (claim/reading)
    name: str
    kind: str  # "symbolic" or "numeric"
    target: str  # "module:function"

    @property
    def claim_id(self) -> str:
        """The claim id (the part before ``/`` of a reading id)."""
        return self.claim.partition("/")[0]

    @property
    def module(self) -> str:
        """The module that defines the producer's function."""
        return self.target.partition(":")[0]

    @property
    def function(self) -> str:
        """The producer function's name in its module."""
        return self.target.partition(":")[2]


#: every producer, one row each: (claim or claim/reading, name, kind, "module:function"), in run order
PRODUCER_TABLE: tuple[ProducerEntry, ...] = tuple(ProducerEntry(*row) for row in (
    ('lem-rank-sum', 'rank-sum-search', 'symbolic', 'symtrans.producers.sec5:rank_sum_search'),
    ('prop-5.1', 'prop51-witness', 'symbolic', 'symtrans.producers.sec5:prop51'),
    ('lem-variety', 'variety-proper', 'symbolic', 'symtrans.producers.sec5:lem_variety'),
    ('prop-6.3', 'prop63-witness', 'symbolic', 'symtrans.producers.sec6:prop63'),
    ('prop-6.3', 'prop63-real-weights', 'symbolic', 'symtrans.producers.sec6:prop63_real'),
    ('thm-recovery/sum', 'recovery-fibres', 'symbolic', 'symtrans.producers.sec7:recovery'),
    ('thm-recovery/wo', 'recovery-wo-real', 'symbolic', 'symtrans.producers.sec7:recovery_real'),
    ('thm-5.3', 'thm53-small', 'symbolic', 'symtrans.producers.sec5:thm53_small'),
    ('thm-5.3', 'thm53-real-weights', 'symbolic', 'symtrans.producers.sec5:thm53_real'),
    ('prop-6.2/identity', 'prop62-counterexample', 'symbolic', 'symtrans.producers.sec6:prop62'),
    ('thm-4.2', 'ln-affine-search', 'symbolic', 'symtrans.producers.sec4:thm42_affine'),
    ('thm-4.2', 'ln-zero-beta', 'symbolic', 'symtrans.producers.sec4:thm42_zero_beta'),
    ('thm-4.2', 'ln-remark', 'symbolic', 'symtrans.producers.sec4:thm42_remark'),
    ('thm-4.2-corrected', 'ln-corrected', 'symbolic', 'symtrans.producers.sec4:thm42_corrected'),
    # the Coq kernel's records (symtrans.producers.symbolic.kernel_record; proofs/kernel.py links each to its theorem)
    ('lem-rank-sum', 'coq-lem-rank-sum', 'symbolic', 'symtrans.producers.sec5:coq_rank_sum'),
    ('prop-5.1', 'coq-prop51-witness', 'symbolic', 'symtrans.producers.sec5:coq_prop51'),
    ('prop-6.2/bound', 'coq-prop62-bound', 'symbolic', 'symtrans.producers.sec6:coq_prop62_bound'),
    ('prop-6.3', 'coq-prop63-witness', 'symbolic', 'symtrans.producers.sec6:coq_prop63'),
    ('thm-recovery/sum', 'coq-recovery-sum-fibre', 'symbolic', 'symtrans.producers.sec7:coq_recovery_sum'),
    ('thm-7.3/sum', 'coq-thm73-sum-fibre', 'symbolic', 'symtrans.producers.sec7:coq_thm73_sum'),
    ('thm-4.2', 'coq-ln-zero-beta', 'symbolic', 'symtrans.producers.sec4:coq_ln_zero_beta'),
    ('thm-4.2', 'coq-ln-remark', 'symbolic', 'symtrans.producers.sec4:coq_ln_remark'),
    ('thm-4.2', 'coq-ln-counterexample', 'symbolic', 'symtrans.producers.sec4:coq_ln_counterexample'),
    ('thm-4.2-corrected', 'coq-ln-corrected', 'symbolic', 'symtrans.producers.sec4:coq_ln_corrected'),
    ('thm-4.2', 'ln-search-arank', 'numeric', 'symtrans.producers.sec4:check_ln_search_arank'),
    ('thm-4.2', 'ln-search-rank-beta0', 'numeric', 'symtrans.producers.sec4:check_ln_search_rank'),
    ('thm-4.2', 'ln-real', 'numeric', 'symtrans.producers.sec4:check_ln_real'),
    ('prop-5.1', 'rank-plus-gaussian', 'numeric', 'symtrans.producers.sec5:check_prop_5_1'),
    ('thm-5.3', 'residual-rank', 'numeric', 'symtrans.producers.sec5:check_thm_5_3'),
    ('lit-dong', 'depth-sweep-pure-attention', 'numeric', 'symtrans.producers.sec5:check_dong'),
    ('thm-5.3', 'depth-sweep-residual', 'numeric', 'symtrans.producers.sec5:check_sweep_residual'),
    ('prop-5.4', 'residual-jacobian', 'numeric', 'symtrans.producers.sec5:check_prop_5_4'),
    ('prop-5.4', 'global-non-affine', 'numeric', 'symtrans.producers.sec5:check_prop_5_4_nonaffine'),
    ('cor-mlp-role/span', 'span-without-mlp', 'numeric', 'symtrans.producers.sec5:check_mlp_span'),
    ('cor-mlp-role/collapse-not-necessary', 'no-collapse-without-mlp', 'numeric',
     'symtrans.producers.sec5:check_mlp_not_necessary'),
    ('cor-mlp-role/collapse-sufficient', 'mlp-prevents-collapse', 'numeric',
     'symtrans.producers.sec5:check_mlp_sufficient'),
    ('prop-6.3', 'head-subspace-dim', 'numeric', 'symtrans.producers.sec6:check_prop_6_3'),
    ('prop-6.2/identity', 'mha-rank-vs-sum', 'numeric', 'symtrans.producers.sec6:check_prop_6_2'),
    ('prop-6.2/bound', 'mha-rank-bound', 'numeric', 'symtrans.producers.sec6:check_prop_6_2_bound'),
    ('thm-rank-contraction', 'contraction-kappa', 'numeric', 'symtrans.producers.sec6:check_rank_contraction'),
    ('claim-align', 'alpha-vs-alignment', 'numeric', 'symtrans.producers.sec6:check_alignment'),
    ('cor-dff', 'ffn-flop-share', 'numeric', 'symtrans.producers.sec6:check_cor_dff'),
    ('thm-recovery', 'recovery-fibres-measured', 'numeric', 'symtrans.producers.sec7:check_recovery'),
    ('thm-7.3', 'head-identifiability', 'numeric', 'symtrans.producers.sec7:check_nonidentifiability'),
    ('pgop', 'pgop-overhead', 'numeric', 'symtrans.producers.sec8:check_pgop_overhead'),
    ('pgop/remedy', 'pgop-fibre', 'numeric', 'symtrans.producers.sec8:check_pgop_fibre'),
    ('framework-9/breaking', 'ablation-stabilisers', 'numeric', 'symtrans.producers.sec9:check_breaking'),
    ('framework-9/orbits', 'collapse-objects', 'numeric', 'symtrans.producers.sec9:check_orbits'),
))


def entries(claim: str | None = None) -> list[ProducerEntry]:
    """The rows of ``claim`` (a claim id; its readings' rows too), or every row, in run order.

    Examples
    --------
    >>> [e.name for e in entries("prop-5.1")]
    ['prop51-witness', 'coq-prop51-witness', 'rank-plus-gaussian']
    >>> entries("no-such-claim")
    []
    """
    return [e for e in PRODUCER_TABLE if claim is None or e.claim_id == claim]


def declared(claim: str) -> list[tuple[str, str]]:
    """``(name, kind)`` of each producer of ``claim``, in run order (nothing imported).

    Examples
    --------
    >>> declared("no-such-claim")
    []
    """
    return [(e.name, e.kind) for e in entries(claim)]


def _claims_of(kind: str) -> tuple[str, ...]:
    return tuple(sorted({e.claim_id for e in PRODUCER_TABLE if e.kind == kind}))


def checked_claims() -> tuple[str, ...]:
    """The claims with numeric checks (rows of kind :data:`CHECK_KIND`), sorted.

    Examples
    --------
    >>> checked_claims()[:3]
    ('claim-align', 'cor-dff', 'cor-mlp-role')
    """
    return _claims_of(CHECK_KIND)


def certified_claims() -> tuple[str, ...]:
    """The claims with exact certificates (rows of kind :data:`CERTIFY_KIND`), sorted.

    Examples
    --------
    >>> certified_claims()[:2]
    ('lem-rank-sum', 'lem-variety')
    """
    return _claims_of(CERTIFY_KIND)


def modules() -> list[str]:
    """The modules that define producers, in the order of their first row.

    Examples
    --------
    >>> sorted(modules())[:2]
    ['symtrans.producers.sec4', 'symtrans.producers.sec5']
    """
    out: list[str] = []
    for e in PRODUCER_TABLE:
        if e.module not in out:
            out.append(e.module)
    return out
