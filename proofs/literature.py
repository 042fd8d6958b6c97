"""Literature nodes: external results the paper cites (§3), registered as kind ``literature``.

Their paper status is ``external``: the toolkit reports them as external
results, never as certified. The analytic-set fact used by Theorem 5.3 is
registered in :mod:`proofs.sec5_residual`.

Examples
--------
>>> from proofs import all_claims
>>> sorted(c.id for c in all_claims() if c.kind == "literature")[:3]
['lem-analytic-set', 'lit-alman-song', 'lit-dong']
"""

from proofs._claim import NORM_FACTORS, Claim, register

_LITERATURE = (
    ("lit-dong", "Dong et al. 2021: rank collapse of pure attention", "§3, ref. [4]",
     ("Dong et al. 2021: pure self-attention, without residual connections or MLP and with row-stochastic A, "
      "converges to a rank-1 matrix doubly exponentially in depth."),
     r"\|X^{(L)}-\mathbf 1x^\top\|\ \text{decays doubly exponentially in } L\ \text{(pure attention)}"),
    ("thm-rank-obstruction-lit", "Dong et al. 2021: skip connections mitigate collapse", "§3, ref. [4]",
     ("Dong et al. 2021 note that skip connections (and the MLP) mitigate rank collapse ('with MLP and "
      "residual, the rank is maintained'), treating the effect as approximate. Theorem 5.3 is the paper's "
      "precise version."),
     r"\text{skip connections mitigate rank collapse (approximate statement)}"),
    ("lit-wu", "Wu et al. 2024: LayerNorm and the collapse rate", "§3, ref. [16]",
     ("Wu et al. 2024 (NeurIPS): for certain classes of value matrices, attention with LayerNorm still "
      "collapses exponentially; for masked and sparse attention LayerNorm can slow collapse."),
     r"\text{attention}+\operatorname{LN}\ \text{can still collapse exponentially}"),
    ("lit-joudaki", "Joudaki et al. 2023: LayerNorm in MLPs", "§3, ref. [17]",
     ("Joudaki et al. 2023 (NeurIPS): LayerNorm can generically obstruct rank collapse in MLP networks; this "
      "does not extend to self-attention because of the softmax coupling."),
     r"\operatorname{LN}\ \text{obstructs rank collapse in MLP networks}"),
    ("lit-nait-saada", "Nait Saada et al. 2024: rank collapse in width", "§3, ref. [18]",
     ("Nait Saada et al. 2024: rank collapse in width, as the context length n grows within one attention "
      "layer, driven by the spectral gap between the two largest singular values of the attention matrix."),
     r"\sigma_1(A)-\sigma_2(A)\ \text{gap drives collapse as } n\to\infty"),
    ("lit-zhai", "Zhai et al. 2023: entropy collapse", "§3, ref. [20]",
     ("Zhai et al. 2023: entropy collapse, attention concentrating on too few tokens, is a distinct failure "
      "mode."),
     r"H(A_{i,:})\to0\ \text{(attention entropy collapse)}"),
    ("lit-alman-song", "Alman and Song 2025: large weights and skips", "§3, ref. [21]",
     ("Alman and Song 2025: only large weights, together with skip connections, prevent rank collapse; rank "
      "non-decrease under residual updates can fail near zero weights."),
     r"\text{skips + large weights prevent collapse; non-decrease can fail near } W=0"),
)

#: how a literature result quantifies, where the toolkit tests it (default: universal)
_QUANTIFIERS = {
    # Dong et al. prove a bound that forces collapse only when the weights' norms are small enough relative to
    # the residual; the toolkit tests the consequence on the model under test (its layers, cycled), so a model
    # whose pure attention does not collapse is evidence about that model, not a counterexample to the bound.
    "lit-dong": "model-every",
}

#: what a literature result is about, where it is tested on the weights (default: the function; untested items
#: read no weights). lit-dong is tested on pure attention (no norm, no residual) built from the stored weights.
_ABOUT: dict[str, dict[str, object]] = {
    "lit-dong": {"about": "parametrisation",
                 "moved_by": NORM_FACTORS,
                 "invariant": "the collapse of the model with its norms (the function): pure attention without a norm "
                              "is built from the stored weights, so the norm factors of G are not its symmetries"},
}

LITERATURE = [register(Claim(id=cid, kind="literature", title=title, paper_ref=ref, section="§3",
                             statement=text, latex=latex, paper_status="external",
                             quantifier=_QUANTIFIERS.get(cid, "universal"),
                             **_ABOUT.get(cid, {"about": "function"})))  # type: ignore[arg-type]
              for cid, title, ref, text, latex in _LITERATURE]
