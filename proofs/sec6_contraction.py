"""§6 Head specialisation and rank contraction: R_h, alpha_MHA, Propositions 6.2 and 6.3, the bound on d_ff.

Examples
--------
>>> from proofs import get_claim
>>> get_claim("prop-6.3").formulas
('head-subspace-dim',)
"""

from proofs._claim import (CENTRED_COUNTERPART, CENTRING, EMBEDDING_RANKS_COUNTERPART, STORED_HEAD_OUTPUTS,
                           STORED_HEAD_RANKS, STORED_HEAD_RANKS_AT_EMBEDDINGS, STORED_OUTPUTS_COUNTERPART,
                           STORED_RANKS_COUNTERPART, Claim, Reading, register)

ALPHA_MHA = register(Claim(
    id="def-alpha-mha",
    about="parametrisation", moved_by=CENTRING, invariant=CENTRED_COUNTERPART,
    kind="definition", section="§6.1", paper_ref="§6.1, rank-contraction coefficient",
    title="rank-contraction coefficient",
    statement="alpha_MHA = 1 - rank(MHA(X)) / (H * max_h rank(Y^h W_O^h)).",
    latex=(r"\alpha_{\mathrm{MHA}}=1-\frac{\operatorname{rank}(\operatorname{MHA}(X))}"
           r"{H\cdot\max_h\operatorname{rank}(Y^{h}W_O^{h})}"),
    paper_status="definition", statement_deps=("def-notation",),
))

HEAD_SUBSPACE = register(Claim(
    id="def-Rh",
    about="parametrisation", moved_by=CENTRING, invariant=CENTRED_COUNTERPART,
    kind="definition", section="§6.1", paper_ref="§6.1, head output subspace",
    title="head output subspace",
    statement="R_h = the row space of Y^h W_O^h, a subspace of R^{d_model}.",
    latex=r"\mathcal R_h=\operatorname{rowspace}\big(Y^{h}W_O^{h}\big)\subseteq\mathbb R^{d_{\mathrm{model}}}",
    paper_status="definition", statement_deps=("def-notation",), formalisation="toolkit",
    formalisation_note=("The text we hold uses R_h without a displayed definition; the toolkit reads it, as "
                        "claims.md does, as the row space of the head's contribution Y^h W_O^h in "
                        "R^{d_model} (the space the head writes into)."),
))

MHA_RANK = register(Claim(
    id="prop-6.2", kind="proposition", section="§6.1", paper_ref="§6.1",
    title="rank of the multi-head output",
    statement=("rank(MHA(X)) <= H d_k = d_model (subadditivity), and rank(MHA(X)) = dim(R_1 + ... + R_H)."),
    latex=(r"\operatorname{rank}(\operatorname{MHA}(X))\le Hd_k=d_{\mathrm{model}},\qquad "
           r"\operatorname{rank}(\operatorname{MHA}(X))=\dim(\mathcal R_1+\cdots+\mathcal R_H)"),
    paper_status="sketch", statement_deps=("def-notation", "def-Rh"), proof_deps=("lem-rank-sum",),
    notes=(
        "Displayed without proof. The row space of a sum lies inside the sum of the row spaces, so "
        "rank(MHA(X)) <= dim(R_1 + ... + R_H) always; but rank(MHA(X)) <= n while dim(sum_h R_h) can reach "
        "d_model, so the identity fails whenever n < dim(sum_h R_h), which is generic for BERT at n = 128 "
        "(each R_h has dimension d_k there).",
        "The bound is the formula mha-rank-bound, which also includes n.",
    ),
    readings=(
        Reading("bound", "rank(MHA(X)) <= min(n, H d_k, d_model) and rank(MHA(X)) <= dim(R_1 + ... + R_H) for "
                "every X and all weights",
                "rank(MHA(X)) <= H d_k = d_model (subadditivity); rank(MHA(X)) = dim(R_1 + ... + R_H)",
                "reads the displayed identity as what the subadditivity argument gives: the row space of the "
                "sum lies inside the sum of the row spaces", quantifier="universal",
                about="parametrisation", moved_by=STORED_HEAD_OUTPUTS,
                invariant=STORED_OUTPUTS_COUNTERPART),
        Reading("identity", "rank(MHA(X)) = dim(R_1 + ... + R_H) for generic weights and inputs",
                "rank(MHA(X)) = dim(R_1 + ... + R_H)",
                "reads the identity as an equality holding generically (the paper's gloss); it fails on an open "
                "set whenever n < dim(sum_h R_h), since rank MHA(X) <= n", quantifier="generic",
                about="parametrisation", moved_by=STORED_HEAD_OUTPUTS,
                invariant=STORED_OUTPUTS_COUNTERPART),
    ),
))

HEAD_DIM = register(Claim(
    id="prop-6.3",
    about="parametrisation", moved_by=STORED_HEAD_RANKS_AT_EMBEDDINGS, invariant=EMBEDDING_RANKS_COUNTERPART,
    kind="proposition", section="§6.1", paper_ref="Proposition 6.3",
    title="head subspaces keep their dimension",
    statement=("For generic W_V^h, W_O^h (W_O^h of rank d_k) and n > d_k: dim R_h = min(rank X, d_k), "
               "independent of alpha_h. Specialisation changes the orientation of R_h, not its dimension; "
               "rank contraction comes from alignment of the R_h."),
    latex=r"\dim\mathcal R_h=\min(\operatorname{rank}X,\ d_k)\quad(\text{generic }W_V^{h},W_O^{h};\ n>d_k)",
    paper_status="proved", statement_deps=("def-Rh", "def-alpha"), quantifier="generic",
    notes=(
        "The proof says A^h has rank min(n, d_k) = d_k; what it needs is that left multiplication by A^h "
        "does not lower rank(X W_V^h), which holds when A^h is invertible (the softmax of a generic score "
        "matrix is).",
        "Formula head-subspace-dim uses d_v, the width of the value channel.",
    ),
))

ALIGNMENT = register(Claim(
    id="claim-align",
    about="parametrisation",
    moved_by=STORED_HEAD_RANKS + ("ln1-scaling", "residual-rotation", "qk-gauge"),
    invariant=(CENTRED_COUNTERPART + "; alpha_h on the score form the attention actually applies, "
               "diag(g) W_Q W_K^T diag(g) on the normalised input (g the attention norm's gain, LayerNorm's "
               "restricted to 1^perp), which the gain scalings and residual maps move only by an orthogonal "
               "similarity; alpha_h as the paper defines it is read from the stored W_Q W_K^T, which a scaling "
               "of the attention norm's gain (W_Q, W_K scaled back) and the residual rotation (W_Q, W_K "
               "conjugated through that gain) change; the query/key gauge leaves W_Q W_K^T exact but moves the "
               "rounding of the stored W_Q, W_K, and so alpha_h's band (a float16 copy shows it); R_h is the span of the "
               "head's outputs (A X W_V + 1 b_V) W_O, whose value bias the value-bias shift moves (b_O takes it "
               "back): a head with W_V^h = 0 writes nothing until the shift gives it a bias, and then enters the "
               "test; dim R_h is decided on the stored W_V^h and W_O^h, whose rounding the value gauge moves "
               "while leaving W_V W_O exact: a head whose W_V^h W_O^h is rank-deficient (a pruned value "
               "channel) can be decided otherwise"), kind="claim", section="§6.1", paper_ref="end of §6.1",
    title="directional heads align their subspaces",
    statement=("Directional heads (high alpha_h) tend to have aligned output subspaces, so "
               "dim(sum_h R_h) < H d_k."),
    latex=r"\alpha_h\ \text{high}\ \Rightarrow\ \mathcal R_h\ \text{aligned},\quad \dim\textstyle\sum_h\mathcal R_h<Hd_k",
    paper_status="conjectured", statement_deps=("def-alpha", "def-Rh"), proof_deps=("prop-6.3",),
    formalisation="toolkit",
    formalisation_note=("'Tend to' is a statistical statement and the text breaks off here. The toolkit reads "
                        "it as: over the heads of a model, a measure of the alignment of R_h with the other "
                        "heads' subspaces is positively associated with alpha_h (each check names its "
                        "statistic and reports its uncertainty), and dim(sum_h R_h) < H min(rank X, d_k) on "
                        "real inputs."),
    notes=("A heuristic in the paper; the text we hold ends in the middle of this argument.",),
    quantifier="statistical",
))

RANK_CONTRACTION = register(Claim(
    id="thm-rank-contraction", kind="theorem", section="§6", paper_ref="Rank Contraction Theorem, §6",
    title="rank contraction and a lower bound on d_ff", source="abstract",
    statement=("Paper (contribution list): head specialisation contracts rank(MHA(X)); the MLP must re-expand "
               "exactly the contracted directions, which gives a principled lower bound on d_ff. Toolkit "
               "formalisation: with kappa(X) = sum_h dim R_h - dim(R_1 + ... + R_H), (i) real specialised "
               "heads contract: kappa(X) > 0 at some layer for real inputs, and (ii) d_ff >= kappa(X) for "
               "every layer and input (the worst case over layers and inputs)."),
    latex=(r"\kappa(X)=\sum_h\dim\mathcal R_h-\dim\Big(\sum_h\mathcal R_h\Big),\qquad "
           r"d_{\mathrm{ff}}\ \ge\ \max_{l,X}\kappa(X^{(l)})"),
    paper_status="proved", statement_deps=("def-Rh", "def-alpha-mha"), proof_deps=("prop-6.3",),
    formalisation="toolkit",
    formalisation_note=("The theorem's statement is not in the text we hold (only the contribution list). "
                        "The toolkit checks claims.md's formalisation: contracted dimension kappa(X) "
                        "(formula contracted-dim) and the bound d_ff >= kappa (formula dff-lower-bound), "
                        "worst case over layers and inputs."),
    notes=("kappa >= 0 always; generically kappa = 0 when H d_k <= d_model, so the bound has content only "
           "when real weights align their heads.",),
    readings=(
        Reading("contracts", "on real inputs, the real model's heads contract: kappa(X) = sum_h dim R_h - "
                "dim(R_1 + ... + R_H) > 0 at some layer",
                "head specialisation causes rank contraction in MHA(X)",
                "reads 'causes rank contraction' as a property of the trained model under test: its specialised "
                "heads' output subspaces overlap somewhere (kappa > 0 at some layer at the stated n); where every "
                "Y^h has full column rank d_v, R_h = row W_O^h and kappa = sum_h rank W_O^h - rank W_O, decided "
                "at the precision W_O was stored in (the rank thm-7.3/wo reads); otherwise kappa is measured from "
                "the real head contributions at float64 computation precision",
                hypotheses=("heads specialised: every score matrix W_Q^h W_K^h^T non-zero",), quantifier="model-some",
                about="parametrisation", moved_by=STORED_HEAD_RANKS,
                invariant=STORED_RANKS_COUNTERPART),
        Reading("dff-bound", "d_ff >= kappa(X) at every layer of the model under test",
                "the MLP must expand exactly the directions the heads contracted; this gives the first principled "
                "lower bound on d_ff",
                "reads the bound as d_ff >= the contracted dimension kappa, worst case over the layers; since "
                "kappa <= H d_v it is vacuous for any d_ff >= H d_v", quantifier="model-every",
                about="parametrisation", moved_by=STORED_HEAD_RANKS,
                invariant=STORED_RANKS_COUNTERPART),
    ),
))

DFF = register(Claim(
    id="cor-dff", kind="corollary", section="§6", paper_ref="§6 and Appendix A",
    title="d_ff = 4 d_model is a heuristic", source="abstract",
    statement=("Paper: d_ff = 4 d_model is an engineering heuristic; the right quantity is the task's "
               "non-linear complexity (the FFN takes 64.8% of BertBase FLOPs). Toolkit formalisation of the "
               "checkable part: the FFN's share of a layer's FLOPs is the formula ffn-flop-share, a function "
               "of n, evaluated at a stated n."),
    latex=(r"\frac{\mathrm{FLOPs}_{\mathrm{FFN}}}{\mathrm{FLOPs}_{\mathrm{layer}}}(n)"
           r"\quad\text{(ffn-flop-share, at a stated } n)"),
    paper_status="proved", proof_deps=("thm-rank-contraction", "cor-mlp-role"), formalisation="toolkit",
    formalisation_note=("The paper quotes one share without n; the share depends on n through the attention "
                        "scores, so the toolkit derives it as a formula in n (symtrans.formulas' FLOP "
                        "convention) and states the n it uses. 'Task non-linear complexity' is not defined in "
                        "the text we hold and is not checked."),
    readings=(
        Reading("share-formula", "the FFN's share of a layer's FLOPs, counted on real forward passes (this model; "
                "transformers' BertLayer at BertBase sizes), equals the formula ffn-flop-share(n) at the stated n",
                "the FFN takes 64.8% of BertBase FLOPs",
                "reads the figure as the output of a FLOP count that depends on n; checks the toolkit's count "
                "against an independent counter (torch FlopCounterMode)", quantifier="universal", about="function"),
        Reading("share-64.8", "BertBase's FFN share of a layer's FLOPs at n = 512, the sequence length of the "
                "paper's BertBase counts (§7.3: 360,448 = 512 x 11 x 64), rounds to 64.8%",
                "d_ff = 4 d_model (64.8% of FLOPs in BertBase)",
                "the paper gives no n for the figure; the toolkit tests it at the n the paper uses for BertBase "
                "elsewhere and states the n range where the figure would hold", quantifier="universal", about="function"),
    ),
))
