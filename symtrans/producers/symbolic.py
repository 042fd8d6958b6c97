"""What the symbolic producers share: the exact record, a statement's dimensions and scope, the Coq kernel's record.

The section modules (:mod:`symtrans.producers.sec4` ... :mod:`symtrans.producers.sec7`) hold each claim's
exact producers beside its numeric ones; the pieces they share live here, as the numeric producers' live in
:mod:`symtrans.producers.common`. Nothing here is a producer, and no producer module is imported.

* :func:`exact_record`: an :class:`~symtrans.evidence.Evidence` of kind ``symbolic``, dtype ``exact``;
* :func:`statement_dims`, :func:`statement_scope`: the statement registry's parameters of a certificate about
  loaded weights, and its scope as a record's :class:`~symtrans.evidence.Scope`;
* :func:`kernel_record`, :func:`dependencies`, :func:`coq_link`: the record of one Coq link after
  :func:`symtrans.certify.coq.kernel_check` (each ``coq-*`` producer writes one):

  - the kernel accepted the development: ``certified``, scope ``all-sizes``, naming the Coq theorem and its
    pinned statement, with the check in ``details["kernel"]`` (:func:`symtrans.graph.counted_verdict` counts
    it as certified for all sizes);
  - Coq is not installed: ``supported`` ("proved in Coq; kernel not available here") with the install hint:
    never certified on trust;
  - the kernel refused: ``inconclusive`` with the refusal line.

  The written proof's own record (e.g. ``prop51-witness``) keeps running beside it.

Examples
--------
>>> exact_record("lem-rank-sum", "demo", Verdict.SUPPORTED, "demo").dtype
'exact'
>>> from symtrans.runner import producers_for
>>> [p.name for p in producers_for("prop-5.1") if p.name.startswith("coq-")]
['coq-prop51-witness']
"""

from __future__ import annotations

from typing import Any

from proofs.kernel import COQ_LINKS, INSTALL_HINT, CoqLink
from symtrans.certify.exact import P
from symtrans.checker.statements import Dims, expected
from symtrans.context import Context
from symtrans.evidence import Evidence, Scope, Verdict

__all__ = ["SMALL_SIZES", "SOFTMAX_SIZES", "MOD_P_NOTE", "exact_record", "statement_dims", "statement_scope",
           "arch_preset", "exact_weights", "kernel_record", "dependencies", "coq_link"]

#: (n, d) grid on which size-independent block witnesses are re-checked exactly.
SMALL_SIZES = [(n, d) for n in range(2, 7) for d in range(2, 7)]
#: (n, d_model, H, d_k) for the softmax certificates with random rational weights.
SOFTMAX_SIZES = [(4, 6, 2, 3), (6, 4, 2, 2), (5, 5, 3, 2)]
#: the argument that a rank mod p is a certified lower bound of the rank over Q, repeated in the records
MOD_P_NOTE = (f"rank mod p = {P} of the exact integer/dyadic matrix: reduction mod p maps each minor over Q to the "
              "same minor over GF(p), so a non-zero minor mod p is non-zero over Q and rank_Q >= rank_p")



def exact_record(claim: str, name: str, verdict: Verdict, summary: str, **kw: Any) -> Evidence:
    """A record of kind ``symbolic`` and dtype ``exact`` (the other fields as :class:`~symtrans.evidence.Evidence`).

    Examples
    --------
    >>> exact_record("prop-5.1", "prop51-witness", Verdict.CERTIFIED, "s", seed=0).kind
    'symbolic'
    """
    return Evidence(claim=claim, producer=name, kind="symbolic", verdict=verdict, summary=summary,
                    dtype="exact", **kw)


def statement_dims(w: Any, ctx: Context) -> Dims:
    """The registry's parameters of a statement about the weights ``w`` under ``ctx``.

    Examples
    --------
    >>> w = Context(model="default").weights(dtype="float64", device="cpu")
    >>> d = statement_dims(w, Context(model="default", n=16))
    >>> (d.L, d.H, d.d, d.d_k, d.positions, d.n)
    (6, 12, 384, 32, 512, 16)
    """
    return Dims(L=int(w.W_Q.shape[0]), H=int(w.W_Q.shape[1]), H_kv=int(w.W_V.shape[1]), d=int(w.W_Q.shape[2]),
                d_k=int(w.W_Q.shape[3]), positions=int(w.pos.shape[0]) if getattr(w, "pos", None) is not None else None,
                vocab=int(w.arch.vocab_size), n=ctx.n, seed=ctx.seed, label=str(ctx.model))


def statement_scope(statement_id: str, dims: Dims) -> Scope:
    """The registry's scope of a statement, as a record's :class:`~symtrans.evidence.Scope`.

    Examples
    --------
    >>> statement_scope("prop-6.2/identity-counterexample", Dims(n=128, seed=0)).kind
    'open-set'
    """
    s = expected(statement_id, dims)["scope"]
    return Scope(s["kind"], s["description"], tuple(s["instances"]))


def arch_preset(name: str) -> Any:
    """The architecture preset ``name`` (:func:`symtrans.arch.get_arch`, imported when first needed).

    Examples
    --------
    >>> int(arch_preset("bert-base").d_model)
    768
    """
    from symtrans.arch import get_arch

    return get_arch(name)


def exact_weights(ctx: Context) -> Any:
    """The run's weights in float64 on the CPU: the exact conversion to rationals needs float64 values.

    Examples
    --------
    >>> exact_weights(Context(model="default")).W_Q.dtype
    torch.float64
    """
    return ctx.weights(dtype="float64", device="cpu")


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


def coq_link(name: str) -> CoqLink:
    """The Coq link (:data:`proofs.kernel.COQ_LINKS`) whose record the producer ``name`` writes.

    Examples
    --------
    >>> coq_link("coq-prop51-witness").claim
    'prop-5.1'
    """
    return next(link for link in COQ_LINKS if link.producer == name)
