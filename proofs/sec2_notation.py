"""§2 Background: the notation of multi-head attention and the directional asymmetry index.

Examples
--------
>>> from proofs import get_claim
>>> get_claim("def-alpha").statement_deps
('def-notation',)
"""

from proofs._claim import Claim, register

NOTATION = register(Claim(
    id="def-notation",
    about="function",
    kind="definition", section="§2", paper_ref="§2, Notation",
    title="notation: multi-head attention and the residual stream",
    statement=(
        "Hidden states X^(l) in R^{n x d_model} (n tokens; L layers; H heads). Head h has "
        "W_Q^h, W_K^h, W_V^h in R^{d_model x d_k} and W_O^h in R^{d_k x d_model}; "
        "A^h = softmax(X W_Q^h (W_K^h)^T X^T / sqrt(d_k)) is row-stochastic n x n; "
        "Y^h = A^h X W_V^h in R^{n x d_k}; MHA(X) = sum_h Y^h W_O^h in R^{n x d_model}. "
        "Block increment Delta = MHA(X) + FFN(X + MHA(X)); residual stream X^(l+1) = X^(l) + Delta^(l)."),
    latex=(
        r"A^{h}=\operatorname{softmax}\!\big(XW_Q^{h}W_K^{h\top}X^\top/\sqrt{d_k}\big),\quad "
        r"Y^{h}=A^{h}XW_V^{h},\quad \operatorname{MHA}(X)=\sum_{h=1}^{H}Y^{h}W_O^{h},\quad "
        r"X^{(l+1)}=X^{(l)}+\operatorname{MHA}(X^{(l)})+\mathrm{FFN}\big(X^{(l)}+\operatorname{MHA}(X^{(l)})\big)"),
    paper_status="definition",
    notes=(
        "LayerNorm is left out of this recursion and treated on its own in §4. Real BERT is post-LN: "
        "X' = LN(X + MHA(X) + b_O), then X'' = LN(X' + FFN(X')); every numeric check states which form it uses.",
        "The value width is written d_k throughout the paper; the toolkit's formulas use d_v for it "
        "(equal in every preset).",
    ),
))

ALPHA = register(Claim(
    id="def-alpha",
    about="function",
    kind="definition", section="§2", paper_ref="§2, directional asymmetry index",
    title="directional asymmetry index",
    statement=(
        "For head h with score matrix M = W_Q^h (W_K^h)^T (d_model x d_model) and antisymmetric part "
        "M_a = (M - M^T)/2: alpha_h = ||M_a||_F / ||M||_F in [0, 1]. Near 0: reciprocal (symmetric) head; "
        "near 1: directional head."),
    latex=(r"\alpha_h=\frac{\|M_a\|_F}{\|M\|_F}\in[0,1],\qquad M=W_Q^{h}W_K^{h\top},\quad "
           r"M_a=\tfrac12\,(M-M^\top)"),
    paper_status="definition", statement_deps=("def-notation",),
    notes=("alpha_h <= 1 because M = M_s + M_a is an orthogonal decomposition in the Frobenius inner "
           "product; alpha_h is undefined when M = 0.",),
))
