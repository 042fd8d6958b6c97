"""§7 Head-channel non-identifiability: Theorem 7.3 and the Recovery Ambiguity Theorem.

Every ambiguity count names the map whose fibre it counts (see ``claims.md``,
"Counting head-channel ambiguity: name the map").

Examples
--------
>>> from proofs import get_claim
>>> "wo-fibre" in get_claim("thm-recovery").formulas
True
"""

from proofs._claim import STORED_WO_RANK, Claim, Reading, register

_MAPS = ("(a) the summation map (Y^1, ..., Y^H) -> sum_h Y^h on (R^{n x d_v})^H (heads in one shared channel); "
         "(b) Z -> Z W_O on the concatenated head outputs Z in R^{n x H d_v}, with W_O the stacked output "
         "projection; (c) (Y^1, ..., Y^H) -> N(X + sum_h Y^h W_O^h + b_O) with X fixed, what the MLP receives: "
         "N is LN1 in a post-LN layer and the second norm (LayerNorm or RMSNorm) in a pre-LN layer, with its "
         "gain and the checkpoint's eps")

#: The gauge-invariant counterpart of the MLP-input readings, whose verdicts decide a rank of the stored W_O at its
#: storage cut (thm-7.3/mlp-input, thm-recovery/mlp-input).
_MLP_INPUT_COUNTERPART = (
    "the exact per-token fibre of the map the MLP sees, H d_v - rank W_O P (W_O P: W_O modulo the centring shift, "
    "for LayerNorm; rank W_O for RMSNorm) plus what the norm itself forgets: no element of G moves it (the value "
    "gauge re-coordinatises the Y^h, the centring shift lies in the norm's kernel). The verdict decides that rank at "
    "W_O's storage cut u ||W_O||_F, which the centring shift (it grows W_O along the all-ones direction the norm "
    "discards) and the value gauge (it re-conditions the heads) move: near the cut, or at a low-precision dtype "
    "(float16 with small weights), the decision moves while the exact fibre does not")

NON_IDENTIFIABILITY = register(Claim(
    id="thm-7.3", kind="theorem", section="§7", paper_ref="Theorem 7.3, Head-Channel Non-Identifiability",
    title="head-channel non-identifiability", source="abstract",
    statement=("Paper: once MHA sums the per-head outputs through W_O, the per-head contributions cannot be "
               "canonically attributed to heads from the sum; the MLP, which sees only the mixed signal, "
               "cannot undo it. Toolkit formalisation: the per-head outputs are non-identifiable from the "
               "value of a map when the fibre of that map through them has positive dimension; stated "
               "separately for each of the maps " + _MAPS + "."),
    latex=(r"\text{non-identifiable w.r.t. } \phi \iff \dim\phi^{-1}\big(\phi(Y^1,\dots,Y^H)\big)>0,\quad "
           r"\phi\in\{\textstyle\sum_h,\ Z\mapsto ZW_O,\ N(X+\sum_h Y^hW_O^h+b_O)\}"),
    paper_status="proved", statement_deps=("def-notation",), formalisation="toolkit",
    formalisation_note=("The theorem's statement is not in the text we hold. 'Cannot be attributed from the "
                        "sum' depends on which map is meant: for the summation map (a) the fibre is "
                        "positive-dimensional; with W_O known and invertible, map (b) is injective; map (c) "
                        "mixes the heads with the residual stream. The toolkit states the claim per map and "
                        "reports where the paper's statement applies."),
    readings=(
        Reading("sum", "the fibre of the head-summation map (Y^1, ..., Y^H) -> sum_h Y^h through any point has "
                "positive dimension n (H-1) d_v: the heads cannot be told apart from their sum",
                "the per-head contributions cannot be canonically attributed to heads from the sum",
                "reads 'the sum' as the sum of the head outputs in one shared d_v-wide channel, before W_O",
                quantifier="universal", about="function"),
        Reading("wo", "the map Z -> Z W_O from the concatenated head outputs Z in R^{n x H d_v} to MHA(X) has a "
                "positive-dimensional fibre at every layer of the model: with W_O known the heads cannot be "
                "recovered from MHA(X)",
                "once MHA sums the per-head outputs through W_O, the per-head contributions cannot be attributed",
                "reads 'through W_O' as the real stacked output projection, known to the reader of MHA(X); the "
                "rank of W_O is decided at the precision its weights were stored in",
                hypotheses=("W_O known",), quantifier="model-every",
                about="parametrisation", moved_by=STORED_WO_RANK,
                invariant=("the rank of W_O P on the quotient by the centring shift (P = I - 1 1^T / "
                           "d_model: what the norm after the residual sum sees), at storage precision, shown beside it; "
                           "the value gauge re-conditions W_O, which can move the decision at a low-precision cut")),
        Reading("mlp-input", "the map (Y^1, ..., Y^H) -> N(X + sum_h Y^h W_O^h + b_O) (X fixed), what the MLP "
                "receives (N: LN1 of a post-LN layer, the second norm of a pre-LN layer), has a "
                "positive-dimensional fibre at every layer of the model",
                "the MLP, which sees only the mixed signal, cannot undo it",
                "reads 'the mixed signal' as the normalised input of the FFN, with the norm's real gain and the "
                "checkpoint's eps (LayerNorm with eps > 0 forgets the all-ones shift only; RMSNorm with eps > 0 "
                "is injective); tangent fibre dimension at sampled rows, its rank decided at W_O's storage "
                "precision",
                hypotheses=("MLP reads norm(X + MHA(X) + b_O)",), quantifier="model-every",
                about="parametrisation", moved_by=STORED_WO_RANK, invariant=_MLP_INPUT_COUNTERPART),
    ),
))

RECOVERY = register(Claim(
    id="thm-recovery", kind="theorem", section="§7.3", paper_ref="Recovery Ambiguity Theorem, §7.3",
    title="recovery ambiguity count", source="abstract",
    statement=("Paper: the recovery ambiguity of head-channel non-identifiability has exactly n (H-1) d_k "
               "degrees of freedom per layer; for BertBase 360,448 per sequence (or 704 per token) per layer. "
               "Toolkit formalisation: n (H-1) d_v is the dimension of the fibre of the summation map "
               "(Y^1, ..., Y^H) -> sum_h Y^h on (R^{n x d_v})^H; the fibre of Z -> Z W_O has dimension "
               "n (H d_v - rank W_O)."),
    latex=(r"\dim\Big(\textstyle\sum_h\Big)^{-1}(S)=n\,(H-1)\,d_v,\qquad "
           r"\dim\{Z: ZW_O=M\}=n\,(Hd_v-\operatorname{rank}W_O)"),
    paper_status="proved", statement_deps=("def-notation",), proof_deps=("thm-7.3",), formalisation="toolkit",
    formalisation_note=("The paper does not say (in the text we hold) which map's fibre n (H-1) d_k counts. "
                        "It is the fibre of the summation map in a shared channel (formula "
                        "recovery-ambiguity, in d_v: the head output width); BertBase's 360,448 takes "
                        "n = 512. With W_O known the recovery problem is the fibre of Z -> Z W_O (formula "
                        "wo-fibre), which is 0 when the stacked W_O is invertible, as it generically is in "
                        "BERT: the paper's count does not apply to that map. Verdict rule: the count is "
                        "certified as the fibre of the summation map, and the claim fails as a statement "
                        "about recovering BERT's heads, where W_O is known and invertible."),
    readings=(
        Reading("sum", "the fibre of the head-summation map on (R^{n x d_v})^H has dimension exactly n (H-1) d_v",
                "the recovery ambiguity has exactly n (H-1) d_k degrees of freedom per layer",
                "counts the fibre of the summation map in one shared channel (d_v, the head output width)",
                quantifier="universal", about="function", rests_on=("thm-7.3/sum",)),
        Reading("wo", "the fibre of Z -> Z W_O (real stacked W_O, every layer) has dimension n (H-1) d_k",
                "the recovery ambiguity has exactly n (H-1) d_k degrees of freedom per layer",
                "counts the fibre of the recovery map with W_O known: n (H d_v - rank W_O)",
                hypotheses=("W_O known",), quantifier="model-every",
                about="parametrisation", moved_by=STORED_WO_RANK,
                invariant=("the fibre n (H d_v - rank W_O P) of Z -> Z W_O P, with W_O P the stacked W_O on "
                           "the quotient by the centring shift (what the norm after the residual sum sees); the value "
                           "gauge re-conditions W_O, which can move the decision at a low-precision cut"),
                rests_on=("thm-7.3/wo",)),
        Reading("mlp-input", "the fibre of (Y^1..Y^H) -> N(X + sum_h Y^h W_O^h + b_O) has dimension n (H-1) d_k "
                "at every layer", "the recovery ambiguity has exactly n (H-1) d_k degrees of freedom per layer",
                "counts the tangent fibre of the map the MLP sees (N: the norm in front of the MLP, real gain, "
                "the checkpoint's eps), its rank decided at W_O's storage precision",
                hypotheses=("MLP reads norm(X + MHA(X) + b_O)",), quantifier="model-every",
                about="parametrisation", moved_by=STORED_WO_RANK, invariant=_MLP_INPUT_COUNTERPART,
                rests_on=("thm-7.3/mlp-input",)),
    ),
))
