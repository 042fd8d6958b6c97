"""§4 The Rank-Neutrality Theorem: affine rank, LayerNorm, hypotheses H1–H4, Theorem 4.2.

The hypotheses are registered as items of kind ``hypothesis`` with ids
``H1`` … ``H4`` (as ``claims.md`` and the evidence records'
``violated_hypothesis`` name them).

Examples
--------
>>> from proofs import get_claim
>>> get_claim("thm-4.2").hypotheses
('H1', 'H2', 'H3', 'H4')
"""

from proofs._claim import Claim, register

#: The toolkit's corrected Theorem 4.2 (its claim below; :mod:`symtrans.certify.layernorm` certifies it).
CORRECTED_STATEMENT = (
    "Under H1-H4, arank(LN(X)) = rank(XP) = rank(X). Hence arank(LN(X)) = arank(X) + 1 when 1_n lies in "
    "colspace(X) (equivalently, under H2, in colspace(XP)), and arank(LN(X)) = arank(X) otherwise. "
    "Under H1 and H3 alone, for every beta: arank(LN(X)) = rank([XP | sigma]) - 1."
)
CORRECTED_LATEX = (
    r"\text{H1--H4} \implies \operatorname{arank}(\operatorname{LN}(X)) = \operatorname{rank}(XP) = "
    r"\operatorname{rank}(X) = \operatorname{arank}(X) + [\mathbf 1_n \in \operatorname{col}(X)];\quad "
    r"\text{H1, H3} \implies \operatorname{arank}(\operatorname{LN}(X)) = "
    r"\operatorname{rank}[\,XP \mid \sigma\,] - 1"
)
CORRECTED_PROOF = (
    "Write s_i = sqrt(d) sigma_i, D = diag(1/sigma_i) (H1), G = diag(gamma) (H3). Then LN(X) = D XP G + 1 beta^T. "
    "(1) Column operations on [LN(X) | 1]: subtract beta_j times the last column from column j, then scale "
    "column j by 1/gamma_j; this gives [D XP | 1]. Row i times sigma_i gives [XP | sigma]. All are invertible, so "
    "arank(LN X) = rank[LN X | 1] - 1 = rank[XP | sigma] - 1 (identity checked symbolically in SymPy). "
    "(2) rank[XP | sigma] = rank(XP) + [sigma not in colspace(XP)]; H4 makes it rank(XP) + 1. "
    "(3) H2 (1_d not in rowspace X = ker P meets rowspace X trivially) gives rank(XP) = rank(X). "
    "(4) arank(X) = rank[X | 1] - 1 = rank(X) - [1_n in colspace X]. "
    "The paper's Step 2 considers only a decrease of affine rank under D; (1)-(4) show D can increase it."
)

AFFINE_RANK = register(Claim(
    id="def-arank",
    about="function",
    kind="definition", section="§4", paper_ref="§4, affine rank", title="affine rank",
    statement=("arank(S) = rank(X - 1_n x_1^T) for the row set S = {x_1, ..., x_n} of X: the dimension of "
               "the affine hull of the rows. Equivalently rank([X | 1_n]) - 1."),
    latex=(r"\operatorname{arank}(S)=\operatorname{rank}\big(X-\mathbf 1_n x_1^\top\big)"
           r"=\operatorname{rank}\big([\,X\mid \mathbf 1_n\,]\big)-1"),
    paper_status="definition",
    notes=("The equivalence with rank([X | 1_n]) - 1 is a checkable statement inside the definition.",),
))

LAYERNORM = register(Claim(
    id="def-ln",
    about="function",
    kind="definition", section="§4", paper_ref="§4, LayerNorm", title="LayerNorm",
    statement=("Row-wise LN(x_i) = (x_i - mean(x_i) 1^T) / sigma_i * gamma + beta (elementwise product with "
               "gamma), sigma_i the standard deviation of the entries of row i. Centring is X P with "
               "P = I - (1/d) 1 1^T."),
    latex=(r"\operatorname{LN}(x_i)=\frac{x_i-\bar x_i\mathbf 1^\top}{\sigma_i}\odot\gamma+\beta,\qquad "
           r"\tilde X = XP,\quad P=I-\tfrac1d\mathbf 1\mathbf 1^\top"),
    paper_status="definition",
    notes=("The paper has no epsilon; real BERT (and MiniLM) use sigma_i = sqrt(var_i + eps) with eps = 1e-12. "
           "Every check says which form it uses.",),
))

H1 = register(Claim(
    id="H1",
    about="function",
    kind="hypothesis", section="§4", paper_ref="§4, hypothesis H1", title="non-constant rows",
    statement="Every row of X is non-constant: sigma_i > 0 for all i.",
    latex=r"\sigma_i>0\quad\text{for all } i", paper_status="definition", statement_deps=("def-ln",),
))

H2 = register(Claim(
    id="H2",
    about="function",
    kind="hypothesis", section="§4", paper_ref="§4, hypothesis H2",
    title="all-ones vector outside the row space",
    statement="The all-ones vector 1_d is not in rowspace(X).",
    latex=r"\mathbf 1_d\notin\operatorname{rowspace}(X)", paper_status="definition",
))

H3 = register(Claim(
    id="H3",
    about="function",
    kind="hypothesis", section="§4", paper_ref="§4, hypothesis H3", title="non-zero scales",
    statement="Every LayerNorm scale is non-zero: gamma_j != 0 for j = 1, ..., d_model.",
    latex=r"\gamma_j\neq0\quad\text{for } j=1,\dots,d_{\mathrm{model}}", paper_status="definition",
    statement_deps=("def-ln",),
))

H4 = register(Claim(
    id="H4",
    about="function",
    kind="hypothesis", section="§4", paper_ref="§4, hypothesis H4",
    title="standard deviations outside the centred column space",
    statement=("The vector of row standard deviations sigma = (sigma_1, ..., sigma_n)^T is not in "
               "colspace(X P)."),
    latex=r"\sigma\notin\operatorname{colspace}(XP)", paper_status="definition", statement_deps=("def-ln",),
    notes=("The paper says H4 holds for all inputs with n > d in one place and generically in another. "
           "The universal reading is false: X = [[1, 0], [2, 0], [3, 0]] (n = 3 > d = 2) has "
           "sigma = (1/2, 1, 3/2)^T, which is the first column of X P. Only the generic reading can hold.",),
))

RANK_NEUTRALITY = register(Claim(
    id="thm-4.2",
    about="function",
    kind="theorem", section="§4", paper_ref="Theorem 4.2, Rank-Neutrality",
    title="LayerNorm rank neutrality",
    statement=("Under H1-H4: arank(LN(X)) = arank(X). If beta = 0: rank(LN(X)) = rank(X). "
               "Remark: the matrix rank rank(LN(X)) can exceed rank(X) by at most one when beta has a "
               "non-zero mean component."),
    latex=(r"\text{H1--H4}\implies\operatorname{arank}(\operatorname{LN}(X))=\operatorname{arank}(X);"
           r"\qquad \beta=0\implies\operatorname{rank}(\operatorname{LN}(X))=\operatorname{rank}(X)"),
    paper_status="proved", hypotheses=("H1", "H2", "H3", "H4"), statement_deps=("def-arank", "def-ln"),
    quantifier="universal",
    notes=(
        "Proof in three steps: centring (X -> X P), row rescaling by 1/sigma_i, then diag(gamma) and "
        "translation by beta.",
        "Step 2 only considers decreases of the affine rank under the row rescaling. Rescaling rows by "
        "different factors can also increase it: three collinear centred rows on a line that misses the "
        "origin map to non-collinear points, which would give arank(LN X) = arank(X) + 1 with H1-H4 "
        "holding. The evidence decides.",
        "The zero-beta matrix-rank statement uses only H1-H3 (rank(XP) = rank(X) by H2, then invertible "
        "row and column scalings).",
    ),
))

RANK_NEUTRALITY_CORRECTED = register(Claim(
    id="thm-4.2-corrected",
    about="function",
    kind="theorem", section="§4",
    paper_ref="none: the toolkit's correction of Theorem 4.2", title="LayerNorm affine rank, corrected",
    statement=CORRECTED_STATEMENT, latex=CORRECTED_LATEX,
    paper_status="not-in-paper", hypotheses=("H1", "H2", "H3", "H4"), statement_deps=("def-arank", "def-ln"),
    formalisation="toolkit",
    formalisation_note=("Proposed by the toolkit after its exact counterexample to thm-4.2's affine-rank "
                        "statement; reported beside thm-4.2, which it corrects. Step 2 of the paper's proof "
                        "misses that row rescaling can raise the affine rank: [D^{-1} XP | 1_n] = "
                        "D^{-1} [XP | sigma], so arank(LN X) = rank[XP | sigma] - 1 = rank(XP) under H4."),
    notes=(CORRECTED_PROOF,),
))
