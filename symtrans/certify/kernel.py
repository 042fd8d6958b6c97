"""Kernel-checked all-sizes results: one producer per Coq link, each recording the kernel's verdict.

Each producer runs :func:`symtrans.certify.coq.kernel_check` (once per report:
it caches a success under the files' hashes and the Coq version) and writes one
record about its link's claim or reading:

* the kernel accepted the development: ``certified``, scope ``all-sizes``,
  naming the Coq theorem and its pinned statement, with the check in
  ``details["kernel"]`` (:func:`symtrans.graph.counted_verdict` counts it as
  certified for all sizes);
* Coq is not installed: ``supported`` ("proved in Coq; kernel not available
  here") with the install hint: never certified on trust;
* the kernel refused: ``inconclusive`` with the refusal line.

The written proof's own record (e.g. ``prop51-witness``) keeps running beside it.

Examples
--------
>>> from symtrans.runner import producers_for
>>> [p.name for p in producers_for("prop-5.1") if p.name.startswith("coq-")]
['coq-prop51-witness']
"""

from __future__ import annotations

from proofs.kernel import COQ_LINKS, INSTALL_HINT, CoqLink
from symtrans.context import Context
from symtrans.evidence import Evidence, Scope, Verdict, producer

__all__ = ["kernel_record"]


def kernel_record(link: CoqLink, directory: str | None = None) -> Evidence:
    """The record of one link after a kernel check of the development at ``directory`` (default: the project's).

    Examples
    --------
    >>> ev = kernel_record(COQ_LINKS[0], "/no/such/dir")
    >>> ev.verdict.value, ev.summary.startswith("kernel refused")
    ('inconclusive', True)
    """
    from symtrans.certify.coq import kernel_check

    res = kernel_check(directory)
    details = {"kernel": {**res.to_dict(), "theorem": link.theorem, "statement": link.statement,
                          "replaces": link.replaces, "proves": link.proves}}
    if res.ok:
        details["dependencies"] = dependencies(link, res.uses.get(link.theorem, []))
    reading = link.target if "/" in link.target else None
    common = dict(claim=link.claim, producer=link.producer, kind="symbolic", dtype="exact", reading=reading,
                  details=details)
    if res.ok and link.refutes:
        return Evidence(verdict=Verdict.FAILS, **common,
                        summary=f"refuted in Coq: {link.theorem} : {link.statement} (Coq {res.coq}, kernel-checked "
                                f"by coqc and coqchk): {link.proves}",
                        counterexample={"theorem": link.theorem, "statement": link.statement},
                        scope=Scope("instances", f"one exact counterexample, Coq theorem {link.theorem}, kernel-checked "
                                                 "in every real closed field"))
    if res.ok:
        deps = details["dependencies"]
        flags = "".join(f"; {what}: {', '.join(deps[key])}" for key, what in (
            ("declared_not_used", "declared in the registry, not used by the Coq proof"),
            ("used_not_declared", "used by the Coq proof, not declared in the registry")) if deps[key])
        # details["kernel"]["how"] says whether coqc and coqchk ran now or a cached success of the same hashes
        # answered; the summary is the same either way (the docs show it)
        return Evidence(verdict=Verdict.CERTIFIED, **common,
                        summary=f"proved in Coq: {link.theorem} : {link.statement} (Coq {res.coq}, kernel-checked "
                                f"by coqc and coqchk): {link.proves}{flags}",
                        scope=Scope("all-sizes", f"Coq theorem {link.theorem}, kernel-checked (coqc, coqchk) against "
                                                 "the pinned statements file; every size"))
    if res.unavailable and link.refutes:
        return Evidence(verdict=Verdict.INCONCLUSIVE, **common,
                        summary=f"refuted in Coq ({link.theorem}); kernel not available here: install it with "
                                f"`{INSTALL_HINT}`",
                        scope=Scope("instances", f"Coq theorem {link.theorem}, not kernel-checked on this machine"))
    if res.unavailable:
        return Evidence(verdict=Verdict.SUPPORTED, **common,
                        summary=f"proved in Coq ({link.theorem}); kernel not available here: install it with "
                                f"`{INSTALL_HINT}`, then the record counts as certified",
                        scope=Scope("all-sizes", f"Coq theorem {link.theorem}, not kernel-checked on this machine"))
    return Evidence(verdict=Verdict.INCONCLUSIVE, **common, summary=f"kernel refused: {res.reason}",
                    scope=Scope("all-sizes", f"Coq theorem {link.theorem}: the kernel check was refused"))


def dependencies(link: CoqLink, used_theorems: list[str]) -> dict[str, list[str]]:
    """Declared against used: the registry's proof dependencies of the link's claim beside the linked results its
    Coq proof uses (``Print All Dependencies``), and the differences between the two among kernel-linked claims.

    Examples
    --------
    >>> d = dependencies(COQ_LINKS[1], [])  # prop-5.1: the registry declares lem-rank-sum; the witness proof needs none
    >>> d["declared"], d["declared_not_used"], d["not_in_coq"]
    (['lem-variety', 'lem-rank-sum'], ['lem-rank-sum'], ['lem-variety'])
    """
    from proofs import get_claim

    declared = list(get_claim(link.claim).proof_deps)
    linked = {other.claim for other in COQ_LINKS}
    by_theorem = {other.theorem: other.claim for other in COQ_LINKS}
    used = sorted({by_theorem[t] for t in used_theorems if t in by_theorem} - {link.claim})
    return {"declared": declared, "used": used, "used_theorems": sorted(used_theorems),
            "declared_not_used": [d for d in declared if d in linked and d not in used],
            "used_not_declared": [u for u in used if u not in declared],
            "not_in_coq": [d for d in declared if d not in linked]}


def _link(name: str) -> CoqLink:
    return next(link for link in COQ_LINKS if link.producer == name)


@producer("lem-rank-sum", kind="symbolic", name="coq-lem-rank-sum",
          description="Coq/MathComp proof of the rank-sum inequalities, kernel-checked (coqc, coqchk)")
def coq_rank_sum(ctx: Context) -> list[Evidence]:
    """lem-rank-sum, proved in Coq."""
    return [kernel_record(_link("coq-lem-rank-sum"))]


@producer("prop-5.1", kind="symbolic", name="coq-prop51-witness",
          description="Coq/MathComp proof of prop-5.1's witness family, kernel-checked (coqc, coqchk)")
def coq_prop51(ctx: Context) -> list[Evidence]:
    """prop-5.1's all-sizes witness family, proved in Coq."""
    return [kernel_record(_link("coq-prop51-witness"))]


@producer("prop-6.3", kind="symbolic", name="coq-prop63-witness",
          description="Coq/MathComp proof of prop-6.3's witness family, kernel-checked (coqc, coqchk)")
def coq_prop63(ctx: Context) -> list[Evidence]:
    """prop-6.3's all-sizes witness family, proved in Coq."""
    return [kernel_record(_link("coq-prop63-witness"))]


@producer("thm-recovery/sum", kind="symbolic", name="coq-recovery-sum-fibre",
          description="Coq/MathComp proof of the head-summation fibre n (H-1) d_v, kernel-checked (coqc, coqchk)")
def coq_recovery_sum(ctx: Context) -> list[Evidence]:
    """thm-recovery/sum, proved in Coq."""
    return [kernel_record(_link("coq-recovery-sum-fibre"))]


@producer("thm-4.2", kind="symbolic", name="coq-ln-zero-beta",
          description="Coq/MathComp proof of thm-4.2's zero-beta matrix-rank part, kernel-checked (coqc, coqchk)")
def coq_ln_zero_beta(ctx: Context) -> list[Evidence]:
    """thm-4.2's zero-beta part, proved in Coq."""
    return [kernel_record(_link("coq-ln-zero-beta"))]


@producer("thm-4.2", kind="symbolic", name="coq-ln-remark",
          description="Coq/MathComp proof of thm-4.2's Remark bound, kernel-checked (coqc, coqchk)")
def coq_ln_remark(ctx: Context) -> list[Evidence]:
    """thm-4.2's Remark, rank(LN X) <= rank X + 1, proved in Coq."""
    return [kernel_record(_link("coq-ln-remark"))]


@producer("thm-4.2", kind="symbolic", name="coq-ln-counterexample",
          description="Coq/MathComp check of thm-4.2's counterexample (H1-H4 hold, arank rises), kernel-checked")
def coq_ln_counterexample(ctx: Context) -> list[Evidence]:
    """thm-4.2 refuted in Coq: a counterexample in every real closed field."""
    return [kernel_record(_link("coq-ln-counterexample"))]


@producer("thm-4.2-corrected", kind="symbolic", name="coq-ln-corrected",
          description="Coq/MathComp proof of the corrected LayerNorm theorem, kernel-checked (coqc, coqchk)")
def coq_ln_corrected(ctx: Context) -> list[Evidence]:
    """thm-4.2-corrected, proved in Coq."""
    return [kernel_record(_link("coq-ln-corrected"))]
