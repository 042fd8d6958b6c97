"""§8 PG-OP, the position-gated output projection (a reconstruction: the paper's form is not available).

Examples
--------
>>> from proofs import get_claim
>>> get_claim("pgop").formulas
('params-wo', 'pgop-params', 'pgop-overhead')
"""

from proofs._claim import STORED_WO_RANK, Claim, Reading, register

#: The factors of G that move the stored position embeddings the gates read (u . p_i, u drawn in fixed coordinates).
_GATE_INPUTS = ("embedding-centring-shift", "embedding-translation", "residual-permutation")

PGOP = register(Claim(
    id="pgop", kind="construction", section="§8", paper_ref="§8, PG-OP",
    title="position-gated output projection", source="abstract",
    statement=("Paper: a position-gated output projection partially remedies head-channel non-identifiability "
               "at less than 1.6% of W_O's parameter count, with a verifiable empirical prediction. Toolkit "
               "reconstruction: per-(position, head) scalar gates g_h(i) = sigmoid(u_h . p_i + b_h) from the "
               "position embedding p_i, multiplying head h's output at position i before W_O; "
               "H (d_model + 1) parameters per layer."),
    latex=(r"\operatorname{PG\text{-}OP}(X)_i=\sum_h g_h(i)\,Y^{h}_i W_O^{h},\quad "
           r"g_h(i)=\sigma(u_h\cdot p_i+b_h),\quad H(d_{\mathrm{model}}+1)\ \text{parameters}"),
    paper_status="prediction", proof_deps=("thm-7.3",), formalisation="toolkit",
    formalisation_note=("The paper's parametrisation, count formula and prediction are not in the text we "
                        "hold. The toolkit checks the reconstruction from claims.md that fits the < 1.6% bound "
                        "(formulas pgop-params, pgop-overhead); a verdict on it is a verdict on the "
                        "reconstruction, not on the paper's construction."),
    readings=(
        Reading("overhead", "the reconstruction's parameter count H (d_model + 1) is below 1.6% of W_O's "
                "H d_v d_model at BertBase sizes (and on a model of BertBase's sizes)",
                "at less than 1.6% of W_O's parameter count",
                "counts the parameters of the reconstruction (formulas pgop-params, pgop-overhead); the paper states "
                "the bound for BertBase, so a model with other head widths is outside its hypotheses",
                hypotheses=("BertBase sizes",), quantifier="universal", about="function",
                rests_on=()),  # a parameter count: it needs no result about the heads
        Reading("remedy", "for generic gate parameters, the reconstruction's position gates shrink the fibre of the "
                "head-channel map (per-position gated summation, and Z -> (Z G_i) W_O)",
                "a position-gated output projection that partially addresses head-channel non-identifiability",
                "reads 'partially addresses' as a smaller fibre of the head-channel map; a verdict on the "
                "reconstruction only (positive scalar gates), not on the paper's construction, which is not in the "
                "text we hold; W_O's rank decided at its storage precision", hypotheses=("gates positive",),
                quantifier="generic", about="parametrisation", moved_by=STORED_WO_RANK + _GATE_INPUTS,
                invariant=("the fibre of the gated map on the centred W_O P with gates read from the "
                           "centred, untranslated position embeddings (the reconstruction reads p_i and W_O as stored); "
                           "no element of G moves its exact rank, but the verdict decides rank W_O at W_O's storage "
                           "cut u ||W_O||_F (thm-7.3/wo's record, layer 0), which the centring shift and the value "
                           "gauge (it re-conditions the heads) move: near the cut, or at a low-precision dtype "
                           "(float16 with small weights), the decision moves while the exact rank does not"),
                rests_on=("thm-7.3/sum", "thm-7.3/wo")),
    ),
))
