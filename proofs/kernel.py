"""The kernel-checked statements: the pinned Coq statements file and each all-sizes result's Coq theorem.

``proofs/coq/Statements.v`` holds one Coq statement per all-sizes result of the
registry (a faithful transcription of its formalisation, shown side by side in
docs/certificates.md); it is trusted only as written, so its SHA-256 is pinned
here. Each :class:`CoqLink` ties an all-sizes record (its claim or reading and
the producer whose written proof it replaces) to the theorem that proves the
statement of the same short name, like a blueprint's ``\\lean{}`` link.
:mod:`symtrans.certify.coq` compiles the proofs, checks them with ``coqchk``
and compares them with these pins; only then does a record count as certified
for all sizes.

Examples
--------
>>> [link.theorem for link in coq_links("prop-5.1")]
['Symtrans.Linear.prop51_witness']
>>> coq_links("prop-5.1")[0].statement
'Symtrans.Statements.prop51_witness'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["COQ_DIR", "COQ_ROOT", "COQ_STATEMENTS", "COQ_STATEMENTS_SHA256", "ALLOWED_ASSUMPTIONS", "CoqLink",
           "COQ_LINKS", "coq_links", "INSTALL_HINT"]

#: the Coq development: the statements file, the proof files and ``_CoqProject`` (the build order)
COQ_DIR = Path(__file__).resolve().parent / "coq"
#: the logical root the files are compiled under (``-Q . Symtrans``)
COQ_ROOT = "Symtrans"
#: the trusted statements file, relative to :data:`COQ_DIR`
COQ_STATEMENTS = "Statements.v"
#: SHA-256 of the trusted statements file: any other text is refused
COQ_STATEMENTS_SHA256 = "d48020ebdfd546cc4bc844450722a71b67df7accb8e8c3ff264c8858f71c4c39"
#: assumptions a linked theorem may rest on (``Print Assumptions``): none
ALLOWED_ASSUMPTIONS: tuple[str, ...] = ()
#: how to install the kernel (Debian 12: Coq 8.16, MathComp 1.15)
INSTALL_HINT = "apt-get install coq libcoq-mathcomp-algebra libcoq-mathcomp-field"


@dataclass(frozen=True)
class CoqLink:
    """One all-sizes result and the Coq theorem that proves its pinned statement.

    ``target`` is the claim (or ``claim/reading``) the record is about;
    ``replaces`` the producer whose written proof the theorem checks;
    ``theorem`` the fully qualified Coq name, which must prove
    ``Symtrans.Statements.<short name>``.

    Examples
    --------
    >>> link = coq_links("lem-rank-sum")[0]
    >>> link.short, link.module, link.producer
    ('lem_rank_sum', 'Linear', 'coq-lem-rank-sum')
    """

    target: str
    replaces: str
    theorem: str
    proves: str
    record: bool = True  # False: a lemma another record rests on, kernel-checked but not a record of its own
    refutes: bool = False  # True: the theorem is a counterexample to the target, whose record then fails

    @property
    def short(self) -> str:
        """The theorem's short name, also the statement's."""
        return self.theorem.rsplit(".", 1)[1]

    @property
    def module(self) -> str:
        """The proof file's module name (``Linear`` for ``Symtrans.Linear.x``): the file ``Linear.v``."""
        return self.theorem.split(".")[1]

    @property
    def statement(self) -> str:
        """The pinned statement the theorem must prove."""
        return f"{COQ_ROOT}.Statements.{self.short}"

    @property
    def producer(self) -> str:
        """The name of the producer that records the kernel check of this link."""
        return "coq-" + self.short.replace("_", "-")

    @property
    def claim(self) -> str:
        """The claim id of :attr:`target`."""
        return self.target.split("/")[0]


#: every all-sizes result proved in Coq, in the order of the statements file
COQ_LINKS: tuple[CoqLink, ...] = (
    CoqLink("lem-rank-sum", "rank-sum-search", "Symtrans.Linear.lem_rank_sum",
            "|rank A - rank B| <= rank(A + B) <= rank A + rank B over every field, every size"),
    CoqLink("prop-5.1", "prop51-witness", "Symtrans.Linear.prop51_witness",
            "for every A of rank r < min(n, d) some B has rank(A + B) = r + 1, so the bad set {B : rank(A + B) <= r} "
            "is a proper algebraic set (null by lem-variety, external)"),
    CoqLink("prop-6.2/bound", "mha-rank-bound", "Symtrans.Linear.prop62_bound",
            "rank MHA(X) <= min(n, H d_k, d_model) and rank MHA(X) <= dim(R_1 + ... + R_H) for every X, every n x n "
            "A^h and all weights, over every field, every size (the row space of a sum lies in the sum of the row "
            "spaces; a sum's rank is at most the sum of the ranks, lem-rank-sum term by term)"),
    CoqLink("prop-6.3", "prop63-witness", "Symtrans.Linear.prop63_witness",
            "for every X and d_k <= d_model some W_V, W_O (rank W_O = d_k) give rank(A X W_V W_O) = min(rank X, d_k) "
            "for every invertible A, so the bad set of (W_V, W_O) is a proper algebraic set"),
    CoqLink("thm-recovery/sum", "recovery-fibres", "Symtrans.Recovery.recovery_sum_fibre",
            "the kernel of the head-summation map (Y^1, ..., Y^H) -> sum_h Y^h on (F^{n x d_v})^H is exactly its zero "
            "set and has dimension n (H-1) d_v, every n, H, d_v"),
    CoqLink("thm-7.3/sum", "head-identifiability", "Symtrans.Recovery.thm73_sum_fibre",
            "the fibre of the head-summation map (Y^1, ..., Y^H) -> sum_h Y^h through any point Y is Y plus its "
            "kernel, of dimension n (H-1) d_v, positive for n, d_v >= 1 and H >= 2: the heads cannot be told apart "
            "from their sum, every n, H, d_v, over every field"),
    CoqLink("thm-recovery/wo", "recovery-wo-real", "Symtrans.Recovery.recovery_wo_fibre",
            "the kernel of Z -> Z W_O on F^{n x H d_v} has dimension n (H d_v - rank W_O): the rule by which the "
            "certified rank of each layer's W_O refutes the reading", record=False),
    CoqLink("thm-4.2", "ln-zero-beta", "Symtrans.LayerNorm.ln_zero_beta",
            "under H1-H3 with beta = 0, rank(LN X) = rank X (LN over any real closed field, eps = 0)"),
    CoqLink("thm-4.2", "ln-remark", "Symtrans.LayerNorm.ln_remark",
            "rank(LN X) <= rank X + 1 for every gamma and beta (under H1)"),
    CoqLink("thm-4.2-corrected", "ln-corrected", "Symtrans.LayerNorm.ln_corrected",
            "under H1, H3: arank(LN X) = rank[XP | sigma] - 1 for every beta; under H1-H4: arank(LN X) = rank(XP) "
            "= rank X = arank X + [1_n in colspace X]"),
    CoqLink("thm-4.2", "ln-affine-search", "Symtrans.Counterexample.ln_counterexample",
            "H1-H4 do not imply arank(LN X) = arank(X): in every real closed field, X = [[-5, 1, 1, 3], "
            "[-1, 1, 1, -1], [3, 1, 1, -5]] (sigma = (3, 1, 3)), gamma = 1, beta = 0 satisfy H1-H4 and "
            "arank(LN X) = arank(X) + 1", refutes=True),
)


def coq_links(target: str) -> list[CoqLink]:
    """The Coq links of a claim (all of its readings' too) or of one reading ``claim/reading``.

    Examples
    --------
    >>> coq_links("thm-5.3")
    []
    """
    if "/" in target:
        return [link for link in COQ_LINKS if link.target == target]
    return [link for link in COQ_LINKS if link.claim == target]
