"""§9 The Symmetry-Breaking Framework (partially proved in the paper; its statement is not available).

Examples
--------
>>> from proofs import get_claim
>>> get_claim("framework-9").paper_status.value
'partially-proved'
"""

from proofs._claim import Claim, Reading, register

FRAMEWORK = register(Claim(
    id="framework-9",
    kind="framework", section="§9", paper_ref="§9, Symmetry-Breaking Framework",
    title="collapse phenomena as orbits of the invariance group", source="abstract",
    statement=("Paper: all four collapse phenomena (rank collapse in depth, rank collapse in width, "
               "head-channel non-identifiability, entropy collapse) are orbits of the Transformer's invariance "
               "group G; 'which components are needed' becomes 'which symmetries must be broken'. Toolkit "
               "formalisation: G is the product of the factors listed in claims.md (per-head GL(d_k) on (Q, K), "
               "per-head GL(d_v) on (V, O), head relabelling S_H, MLP neuron permutations S_{d_ff}, token "
               "permutations S_n on the data, softmax shift on biases), and each phenomenon is tied to a "
               "named object of its action (a fixed-point set, an orbit, or a fibre of a named map)."),
    latex=(r"\mathcal G=\big((GL(d_k))^H\times(GL(d_v))^H\big)\rtimes S_H\ \times\ S_{d_{\mathrm{ff}}}"
           r"\ (\text{per layer})"),
    paper_status="partially-proved",
    statement_deps=("lit-dong", "lit-nait-saada", "thm-7.3", "lit-zhai"),
    proof_deps=("thm-4.2", "thm-5.3", "cor-mlp-role", "prop-6.2", "claim-align", "thm-rank-contraction",
                "cor-dff", "thm-recovery", "pgop", "thm-rank-obstruction-lit", "lit-wu", "lit-joudaki",
                "lit-alman-song"),
    formalisation="toolkit",
    formalisation_note=("The paper's definition of G, the statement, and which parts are proved are not in the "
                        "text we hold. The factors of G and their dimensions are the formulas gauge-dimension, "
                        "head-permutations and ffn-permutations; the pairing of each phenomenon with a "
                        "precise object is the toolkit's, not the paper's."),
    readings=(
        Reading("breaking",
                "Each component the paper calls necessary (the residual stream, the MLP non-linearity, the residual "
                "stream's LayerNorm/RMSNorm, the W_O mixing of heads, PG-OP's gates) breaks symmetry: the "
                "architecture without it has a continuous stabiliser of larger dimension than G (measured on small "
                "random instances of the family, float64 Jacobian null spaces). A component absent from the "
                "architecture is not tested.",
                "'which components are needed' becomes 'which symmetries must be broken'",
                "Toolkit formalisation (the paper's §9 is not in the text we hold): 'needed' read as 'its removal "
                "enlarges G'; the ablation is derived from the one architecture description "
                "(Architecture.without); dim is that of the measured stabiliser, compared with the instance's own. "
                "Universal over the listed components: one present component whose removal does not enlarge the "
                "stabiliser refutes it, named with its numbers. A property of the architecture, so of the function.",
                quantifier="universal", about="function"),
        Reading("orbits",
                "Each collapse phenomenon is a named object of G's action with matching dimension: depth collapse "
                "the fixed-point set Fix(S_n) = {1 x^T} (every layer maps it into itself); width collapse the "
                "fixed points of S_n on attention matrices (containing the rank-1 collapsed matrix); head-channel "
                "non-identifiability an object of G's action whose dimension equals the paper's count n(H-1)d_v; "
                "entropy collapse the softmax-shift orbits (the row softmax's fibre at the model's scores is exactly "
                "the orbit).",
                "all four collapse phenomena ... are orbits of the Transformer's invariance group G",
                "Toolkit formalisation: 'are orbits of G' read as 'each is tied to a fixed-point set, orbit or "
                "fibre of G's action of the stated dimension'. Universal over the four: one tie that fails refutes "
                "it, with the numbers. Every object is computed from what the function determines (layer maps, "
                "attention probabilities, the FFN's input map, G's factor dimensions); the fibre of Z -> Z W_O, "
                "which reads W_O as stored, is shown and not decided on.",
                quantifier="universal", about="function"),
    ),
    notes=("claims.md: it depends on everything above; the proof dependencies list the results it unifies "
           "(their own ancestors follow).",),
))
