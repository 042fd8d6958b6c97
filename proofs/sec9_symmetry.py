"""§9 The Symmetry-Breaking Framework (partially proved in the paper; its statement is not available).

Examples
--------
>>> from proofs import get_claim
>>> get_claim("framework-9").paper_status.value
'partially-proved'
"""

from proofs._claim import Claim, register

FRAMEWORK = register(Claim(
    id="framework-9",
    about="function",
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
    notes=("claims.md: it depends on everything above; the proof dependencies list the results it unifies "
           "(their own ancestors follow).",),
))
