"""§5 Residual connections and the MLP's role: Proposition 5.1, Theorem 5.3, §5.3.

Examples
--------
>>> from proofs import get_claim
>>> get_claim("thm-5.3").formalisation, get_claim("prop-5.1").formalisation
('toolkit', 'paper')
"""

from proofs._claim import NORMED_COUNTERPART, NORM_FACTORS, Claim, Reading, register

RANK_SUM = register(Claim(
    id="lem-rank-sum",
    about="function",
    kind="lemma", section="§5.1", paper_ref="§5.1, unnumbered",
    title="rank of a sum",
    statement="For A, B of the same size: |rank A - rank B| <= rank(A + B) <= rank A + rank B.",
    latex=(r"|\operatorname{rank}A-\operatorname{rank}B|\le\operatorname{rank}(A+B)"
           r"\le\operatorname{rank}A+\operatorname{rank}B"),
    paper_status="external", notes=("A standard fact; the paper states it without proof.",),
))

VARIETY = register(Claim(
    id="lem-variety",
    about="function",
    kind="lemma", section="§5.1", paper_ref="§5.1", title="low-rank matrices are null",
    statement=("For r < min(n, d), V_r = {M in R^{n x d} : rank M <= r} is a proper algebraic subset of "
               "R^{n x d} (the common zeros of the (r+1)-minors), hence Lebesgue-null."),
    latex=(r"\mathcal V_r=\{M\in\mathbb R^{n\times d}:\operatorname{rank}M\le r\}\ \text{is a proper "
           r"algebraic set, hence Lebesgue-null, for } r<\min(n,d)"),
    paper_status="external", notes=("Used as known in the paper.",),
))

ANALYTIC_SET = register(Claim(
    id="lem-analytic-set",
    about="function",
    kind="literature", section="§5.2",
    paper_ref="§5.2, cited as Krantz and Parks [7], Chapter 1", title="analytic-set fact",
    statement=("A real-analytic subset of R^m either equals the whole space or has Lebesgue measure zero."),
    latex=r"f\ \text{real-analytic on } \mathbb R^m,\ f\not\equiv0 \implies \lambda_m\big(f^{-1}(0)\big)=0",
    paper_status="external", formalisation="toolkit",
    formalisation_note=("The paper's wording ('a real-analytic subset either equals the entire space or is "
                        "null') is imprecise for general analytic sets; the fact used is: the zero set of a "
                        "real-analytic function on a connected open subset of R^m that is not identically "
                        "zero has Lebesgue measure zero (apply it to the sum of squares of the "
                        "(r+1)-minors)."),
))

RANDOM_PERTURBATION = register(Claim(
    id="prop-5.1",
    about="function",
    kind="proposition", section="§5.1", paper_ref="Proposition 5.1",
    title="absolutely continuous perturbations raise rank",
    statement=("Let A in R^{n x d_model} be fixed with rank r < min(n, d_model), and let B be drawn from a law "
               "absolutely continuous with respect to Lebesgue measure on R^{n x d_model}. Then "
               "P[rank(A + B) > r] = 1."),
    latex=(r"\operatorname{rank}A=r<\min(n,d_{\mathrm{model}}),\ B\sim\mu\ll\lambda\ \implies\ "
           r"\Pr_{B\sim\mu}\big[\operatorname{rank}(A+B)>r\big]=1"),
    paper_status="proved", proof_deps=("lem-variety", "lem-rank-sum"), quantifier="generic",
    notes=(
        "Asymmetric in A and B: A is held fixed, B is the absolutely continuous perturbation.",
        "Vacuous if A has full rank.",
        "rowspace(Delta) not inside rowspace(X) is sufficient, not necessary, for a strict increase.",
        "It does not cover B = MHA(X), which lies on a lower-dimensional analytic set: that is Theorem 5.3.",
    ),
))

RESIDUAL_OBSTRUCTION = register(Claim(
    id="thm-5.3",
    about="parametrisation", moved_by=NORM_FACTORS,
    invariant=("the rank of the normed residual sum N(X + MHA(X) + b_O), which no factor of G moves; X + MHA(X) "
               "itself, before the norm, moves along the all-ones row under the centring shift"),
    kind="theorem", section="§5.2", paper_ref="Theorem 5.3, Residual Rank Obstruction",
    title="residual connections obstruct rank collapse",
    statement=("Paper: for generic weights and almost every rank-deficient X, rank(X + MHA(X)) > rank(X); "
               "so Dong's collapse cannot happen with residuals. Toolkit formalisation: for weights outside "
               "a Lebesgue-null set and every r with 1 <= r < min(n, d_model), rank(X + MHA(X)) > r for "
               "almost every X of rank exactly r, 'almost every' taken on the rank-r stratum (X = U V^T "
               "with (U, V) Lebesgue-distributed on R^{n x r} x R^{d_model x r})."),
    latex=(r"\forall r<\min(n,d_{\mathrm{model}}):\ \operatorname{rank}\big(X+\operatorname{MHA}(X)\big)>r"
           r"\ \text{for a.e. } X=UV^\top,\ (U,V)\in\mathbb R^{n\times r}\times\mathbb R^{d_{\mathrm{model}}\times r}"),
    paper_status="proved", statement_deps=("def-notation",),
    proof_deps=("prop-5.1", "lem-variety", "lem-analytic-set"), quantifier="generic",
    formalisation="toolkit",
    formalisation_note=(
        "The rank-deficient matrices are themselves Lebesgue-null in R^{n x d_model}, so 'Lebesgue-almost-"
        "every rank-deficient X' is vacuous as written. The proof's per-stratum witnesses X*_r = "
        "sum_{i<=r} e_i f_i^T support the stratum reading, which the toolkit adopts: the measure is the "
        "pushforward of Lebesgue measure under (U, V) -> U V^T on R^{n x r} x R^{d_model x r} (equivalent "
        "to the Riemannian volume of the rank-r manifold). The bad set on the stratum is the zero set of "
        "the sum of squares of the (r+1)-minors of F(U V^T), F(X) = X + MHA(X), an analytic function on "
        "the connected space of (U, V); one witness where it is non-zero makes it null."),
    notes=(
        "The paper's witness: X* = e_1 f_1^T (rank 1) with W_O^1 having a non-zero entry in row 1, column 2; "
        "X*_r for stratum r.",
        "Related literature: Dong et al. note that skip connections mitigate collapse "
        "(thm-rank-obstruction-lit); Alman and Song show rank non-decrease can fail near zero weights "
        "(lit-alman-song), consistent with 'generic weights'.",
    ),
))

FIRST_ORDER = register(Claim(
    id="prop-5.4",
    about="parametrisation", moved_by=NORM_FACTORS, invariant=NORMED_COUNTERPART,
    kind="proposition", section="§5.3", paper_ref="§5.3",
    title="attention with residuals is first-order affine",
    statement=("With attention and residuals but no MLP (and no LayerNorm), X^(0) -> X^(L) is differentiable; "
               "layer l has Jacobian I + D[MHA](X_0), with head term D[Y^h W_O^h](X_0)[dX] = "
               "(D[A^h](X_0)[dX]) X_0 W_V^h W_O^h + A^h_0 dX W_V^h W_O^h. Hence "
               "X^(L)(X^(0) + dX) = X^(L)(X^(0)) + Phi(X^(0))[dX] + O(||dX||^2): the first-order behaviour "
               "is affine; the global map is not."),
    latex=(r"Df_l(X_0)=I+D[\operatorname{MHA}](X_0),\quad D[Y^{h}W_O^{h}](X_0)[\delta X]="
           r"\big(D[A^{h}](X_0)[\delta X]\big)X_0W_V^{h}W_O^{h}+A_0^{h}\,\delta X\,W_V^{h}W_O^{h}"),
    paper_status="proved", statement_deps=("def-notation",), quantifier="universal",
    notes=("Elementary (chain and product rules). Phi(X^(0)) is read as a linear operator on R^{n x d_model}; "
           "the paper also writes X^(L) ~ X^(0) Phi(X^(0)) + B(X^(0)).",),
))

MLP_ROLE = register(Claim(
    id="cor-mlp-role", kind="corollary", section="§5.3", paper_ref="§5.3 boxed",
    title="what the MLP is necessary for",
    statement=("The MLP is necessary for non-linear feature generation (directions outside the linear span of "
               "the original token embeddings) and sufficient but not necessary against rank collapse. "
               "d_ff = 4 d_model (64.8% of BertBase FLOPs) is justified by the first role."),
    latex=r"\text{MLP: necessary for non-linear features; sufficient, not necessary, against rank collapse}",
    paper_status="sketch", proof_deps=("thm-5.3", "prop-5.4"),
    readings=(
        Reading("span",
                "Without the MLP, the attention + residual stack X <- X + MHA(X) keeps every hidden state in the "
                "linear span (row space) of the token embeddings X0; so only the MLP can produce directions "
                "outside it.",
                "The MLP is necessary for non-linear feature generation (directions outside the linear span of "
                "the original token embeddings)",
                "Takes the paper's parenthesis as the definition of 'non-linear feature generation'. Universal: "
                "one instance (weights and tokens) whose no-MLP stack leaves the span refutes 'necessary'. The "
                "hypothesis excludes X0 spanning R^d_model, where nothing lies outside the span.",
                hypotheses=("span of the token embeddings is a proper subspace (rank X0 < d_model)",),
                quantifier="universal",
                about="parametrisation", moved_by=NORM_FACTORS,
                invariant=NORMED_COUNTERPART),
        Reading("collapse-not-necessary",
                "Attention with residual connections and no MLP does not collapse to rank one: Dong's residual "
                "ratio stays above 1e-8 over depth.",
                "[the MLP is] ... not necessary against rank collapse",
                "The residual connection alone obstructs collapse (Theorem 5.3's consequence); generic in the "
                "weights, so one instance that collapses does not refute it.",
                quantifier="generic",
                about="parametrisation", moved_by=NORM_FACTORS,
                invariant=NORMED_COUNTERPART),
        Reading("collapse-sufficient",
                "Attention followed by the MLP, without residual connections, does not collapse to rank one "
                "where pure attention does.",
                "[the MLP is] sufficient ... against rank collapse",
                "'Sufficient' read as: the MLP alone (no skip connection) prevents the collapse pure attention "
                "shows. Generic in the weights: only a failure on an open set of weights refutes it. The MLP acts "
                "row by row, so it maps equal rows to equal rows: it can slow a collapse, not undo one.",
                hypotheses=("pure attention collapses on this model (a collapse to prevent)",
                            "attention is non-degenerate: pure attention does not collapse within one layer",
                            "the MLP is not identically zero (W_in, W_out != 0 at some layer)"),
                quantifier="generic",
                about="parametrisation", moved_by=NORM_FACTORS,
                invariant=NORMED_COUNTERPART),
    ),
    notes=(
        "The paper argues it ('precise statement' box) rather than proving it; 'non-linear feature "
        "generation' is not defined in the text we hold.",
        "The 'not necessary against rank collapse' half is Theorem 5.3; the FLOP share is the formula "
        "ffn-flop-share (see cor-dff), which depends on n.",
        "An earlier check of 'linearity at frozen attention' was dropped: with every A^h frozen the no-MLP "
        "stack is linear by construction, so that test could not fail.",
    ),
))
