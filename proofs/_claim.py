"""The claim record and the claim registry.

A :class:`Claim` is one formal item of the paper: a definition, a hypothesis,
a lemma, a theorem, a literature result. It carries the paper's own numbering
and status, its statement in plain text and LaTeX, and its dependencies as two
kinds of edge: *statement* dependencies (what is needed to state it:
definitions, hypotheses) and *proof* dependencies (what its proof uses).
Where the paper's exact statement is unavailable or imprecise, the claim
carries the toolkit's own formalisation (``formalisation="toolkit"``) and
says precisely what it is and why.

The claim never records a verdict: the toolkit's verdict comes only from
evidence that ran (:mod:`symtrans.evidence`), and is derived in
:mod:`symtrans.graph`.

Examples
--------
>>> c = Claim(id="demo-lemma", kind="lemma", title="demo", paper_ref="none", section="§0",
...           statement="1 + 1 = 2", latex="1 + 1 = 2", paper_status="proved")
>>> c.paper_status.value, c.depends_on
('proved', ())
"""

from __future__ import annotations

import enum
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from symtrans.errors import SymtransError, suggest

__all__ = ["Claim", "Reading", "PaperStatus", "QUANTIFIERS", "ABOUT", "KINDS", "GIVEN_KINDS", "register", "get_claim", "all_claims",
           "about_dict", "about_text", "undeclared", "declared_items", "CENTRING", "STORED_WO_RANK", "STORED_HEAD_RANKS", "STORED_HEAD_RANKS_AT_EMBEDDINGS", "STORED_RANKS_COUNTERPART", "EMBEDDING_RANKS_COUNTERPART", "STORED_HEAD_OUTPUTS", "STORED_OUTPUTS_COUNTERPART", "NORM_FACTORS", "NORM_READERS", "CENTRED_COUNTERPART", "NORMED_COUNTERPART",
           "claim_ids", "CLAIM_MODULES", "REGISTRY"]


class PaperStatus(str, enum.Enum):
    """What the paper itself says of an item (never changed by the toolkit).

    Examples
    --------
    >>> PaperStatus("partially-proved") is PaperStatus.PARTIALLY_PROVED
    True
    """

    PROVED = "proved"
    SKETCH = "sketch"
    PARTIALLY_PROVED = "partially-proved"
    CONJECTURED = "conjectured"
    PREDICTION = "prediction"
    EXTERNAL = "external"
    DEFINITION = "definition"
    NOT_IN_PAPER = "not-in-paper"  # a statement the toolkit proposes (e.g. a certified correction)


#: The kinds of item, in the order the report lists them.
KINDS: tuple[str, ...] = ("definition", "hypothesis", "lemma", "proposition", "theorem", "corollary",
                          "claim", "construction", "literature", "framework")

#: Kinds that state no proposition of their own: they never block what rests on them
#: (unless evidence shows them failing, e.g. a definition's stated equivalence).
GIVEN_KINDS: frozenset[str] = frozenset({"definition", "hypothesis"})

_ID = re.compile(r"^[A-Za-z][A-Za-z0-9.\-]*$")

#: How a statement quantifies over instances; decides what evidence can refute or certify it.
QUANTIFIERS: dict[str, str] = {
    "universal": "for every instance satisfying the hypotheses: one instance where they hold and the "
                 "conclusion fails refutes it",
    "generic": "for almost every weight or input: an instance never refutes it; only evidence over all "
               "sizes or an open set of instances does",
    "model-every": "about the model under test, at every layer (and head)",
    "model-some": "about the model under test, at some layer (or head)",
    "statistical": "an empirical tendency, decided by a stated statistic and its confidence interval",
}

#: What a statement (a reading, or a claim without readings) is about: the one vocabulary of the gauge check
#: (``symtrans report --gauge-check``, :mod:`symtrans.report.gauge`).
ABOUT: dict[str, str] = {
    "function": "the function the model computes: no element of the invariance group G may move its verdict",
    "parametrisation": "the stored parametrisation: the factors of G named in moved_by can move its verdict; "
                       "its gauge-invariant counterpart is named beside it",
}

#: The factor of G that moves a statement about what is written into the residual stream before a centring norm.
CENTRING: tuple[str, ...] = ("centring-shift",)
#: What moves a statement decided on the stored W_O's rank at its storage precision: the centring shift (W_O 1 = 0
#: makes it singular) and, in the decision though not in the exact rank, the value gauge (W_O^h -> g^-1 W_O^h
#: re-conditions the blocks); measured at float16 storage on random Llama, Mistral, Qwen3, Gemma 2, OLMo 2 and
#: SmolLM3 checkpoints (thm-7.3/wo, thm-recovery/wo; pgop/remedy reads the same record at layer 0, and the value
#: gauge alone took it from fails to inconclusive on a random float16 BERT)
STORED_WO_RANK: tuple[str, ...] = ("centring-shift", "vo-gauge")
#: What moves a statement decided on the stored per-head W_O blocks' ranks and the values the heads write: those
#: of :data:`STORED_WO_RANK`, the attention input hyperplane (it shifts the values; measured at bfloat16 on random
#: GPT-2, BERT, Llama, Qwen3 and OLMo 2 checkpoints: prop-6.3, thm-rank-contraction) and the value-bias shift (it
#: gives the values a constant part: a head with W_V^h = 0 then writes a rank-one R_h; measured on planted BERT and
#: GPT-2 checkpoints: claim-align, prop-6.2)
STORED_HEAD_RANKS: tuple[str, ...] = STORED_WO_RANK + ("attention-input-hyperplane", "value-bias-shift")
#: What moves a statement decided on the stored head ranks and certified at the stored embedding sum before its
#: LayerNorm (prop-6.3: A^h invertible at X = word[ids] + pos + type, the witness input of every layer): those of
#: :data:`STORED_HEAD_RANKS` and the embedding centring shift, which adds a multiple of the all-ones vector to every
#: embedding row (the LayerNorm removes it; the scores at the pre-LayerNorm sum grow a common part). On the bundled
#: model it left the determinant sign of most heads of layers 1-5 undecided at the certificate's precision.
STORED_HEAD_RANKS_AT_EMBEDDINGS: tuple[str, ...] = STORED_HEAD_RANKS + ("embedding-centring-shift",)
#: What moves a statement decided on the span of the heads' outputs: those of :data:`STORED_HEAD_RANKS` and the factors
#: that re-round the scores, the query/key gauge and the key-bias shift (exact on the scores, not on their stored
#: rounding): two equal heads moved by different elements write outputs equal only up to that rounding, which a
#: float64 rank reads (measured on planted BERT with two equal heads, n = 40: prop-6.2/identity)
STORED_HEAD_OUTPUTS: tuple[str, ...] = STORED_HEAD_RANKS + ("qk-gauge", "key-bias-shift")
#: The factors of G that reach a variant without the norms and the MLP other than through a norm's own tensors: the
#: residual rotation reaches W_Q, W_K, W_V through the norm gains (diag(1/g) Q diag(g), not Q: a symmetry of the
#: variant only where the gains are uniform) and the parallel bias trade moves bias between b_O and the dropped MLP's
#: output (measured: prop-5.4 on float16 GPT-NeoX)
NORM_READERS: tuple[str, ...] = ("residual-rotation", "parallel-bias-trade")
#: The factors of G whose identity rests on a norm (or on the residual or MLP beside it): a variant built from the
#: stored weights without the norm (or without the residual or MLP beside it) does not have them as symmetries.
#: :data:`NORM_READERS` among them: every reading of such a variant declares all of them, one set.
NORM_FACTORS: tuple[str, ...] = ("centring-shift", "ffn-bias-transfer", "ffn-input-hyperplane", "attention-bias-transfer",
                                 "attention-input-hyperplane", "embedding-centring-shift", "ln1-scaling", "ln2-scaling",
                                 "ln1-bias-transfer", "ln2-bias-transfer") + NORM_READERS

#: The gauge-invariant counterpart of a statement about head outputs or W_O as written before a centring norm.
CENTRED_COUNTERPART = ('the same ranks on the centred head outputs Y^h W_O^h P (P = I - 1 1^T / d_model: what the '
                       'norm after the residual sum sees), which the centring shift leaves unchanged')
#: The counterpart of a statement moved by :data:`STORED_HEAD_RANKS`.
STORED_RANKS_COUNTERPART = (CENTRED_COUNTERPART + "; the value gauge re-conditions a stored block (its exact rank "
                            "unchanged), the attention input hyperplane shifts the values the heads write and the "
                            "value-bias shift gives them a constant part: each can move a decision at the storage "
                            "cut (a low-precision dtype shows it) or the rank of a degenerate head's R_h (a head "
                            "with W_V^h = 0 or half its value channel pruned)")
#: The counterpart of a statement moved by :data:`STORED_HEAD_RANKS_AT_EMBEDDINGS`.
EMBEDDING_RANKS_COUNTERPART = (STORED_RANKS_COUNTERPART + "; A^h's invertibility at a normalised input (layer 0's "
                               "real input, LayerNorm(word + pos + type)), which the embedding centring shift does "
                               "not move: the certificate's second statement, prop-6.3/attention-invertible-ln")
#: The counterpart of a statement moved by :data:`STORED_HEAD_OUTPUTS`.
STORED_OUTPUTS_COUNTERPART = (STORED_RANKS_COUNTERPART + "; the query/key gauge and the key-bias shift re-round the "
                              "scores, so heads equal in the function (two equal heads) write outputs equal only up "
                              "to the stored rounding")
#: The gauge-invariant counterpart of a statement about an ablated variant built from the stored weights.
NORMED_COUNTERPART = ("the same statement for the model with its norms (the function): the ablated variant (no norm, "
                      "or no residual or MLP beside it) is built from the stored weights, so the norm factors of G, "
                      "symmetries of the model, are not symmetries of the variant")


def _check_about(what: str, about: str, moved_by: Any, invariant: str) -> tuple[str, ...]:
    """Validate one ``about`` declaration; return ``moved_by`` as a tuple."""
    if isinstance(moved_by, str):
        raise SymtransError(f"{what}: moved_by must be a tuple of factor names, not a string")
    moved = tuple(moved_by)
    if about and about not in ABOUT:
        raise SymtransError(f"{what}: " + suggest(about, ABOUT, "about"))
    if about == "function" and (moved or invariant):
        raise SymtransError(f"{what}: a function-reading names no moving factor and no counterpart (it is its own)")
    if about == "parametrisation" and not (moved and invariant):
        raise SymtransError(f"{what}: a parametrisation-reading names the factors of G that move it (moved_by) and "
                            "its gauge-invariant counterpart (invariant)")
    return moved


@dataclass(frozen=True)
class Reading:
    """One formalisation of a claim: its own statement, hypotheses and quantifier, and its own verdict.

    A claim whose wording admits several precise statements carries one
    reading per statement; the report gives each its verdict, and the claim's
    verdict is ``reading-dependent`` when they disagree. ``paper_wording`` is
    the paper's text the reading formalises; ``hypotheses`` name what must hold
    on an instance before its conclusion can be tested.

    Examples
    --------
    >>> r = Reading("wo", "the map Z -> Z W_O is not injective", "cannot be attributed to heads",
    ...             "counts the fibre of Z -> Z W_O", quantifier="model-every")
    >>> r.with_claim("thm-7.3").id
    'thm-7.3/wo'
    >>> Reading("x y", "s", "w", "n")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: reading name 'x y': use letters, digits, '.' and '-'

    ``about`` declares what the reading is about (:data:`ABOUT`): ``"function"``
    or ``"parametrisation"``, the latter with ``moved_by`` (the factors of G
    that can move its verdict) and ``invariant`` (its gauge-invariant counterpart).

    >>> Reading("a", "s", "w", "n", about="parametrisation")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: reading 'a': a parametrisation-reading names the factors of G that move it (moved_by) and its gauge-invariant counterpart (invariant)
    """

    name: str
    statement: str
    paper_wording: str
    formalisation_note: str
    hypotheses: tuple[str, ...] = ()
    quantifier: str = "universal"
    claim: str = ""
    about: str = ""  # "function" | "parametrisation" (ABOUT); "" = undeclared (tests/test_gauge.py refuses it)
    moved_by: tuple[str, ...] = ()  # the factors of G that can move the verdict (parametrisation only)
    invariant: str = ""  # the gauge-invariant counterpart (parametrisation only)
    #: what this reading's standing rests on, finer than its claim's dependencies: claims or readings
    #: (``claim/reading``) among the claim's ancestors (:class:`symtrans.graph.ClaimGraph` checks it); None: the
    #: claim's ancestors, all of them. ``()``: nothing (a count that needs no other result).
    rests_on: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not _ID.match(self.name):
            raise SymtransError(f"reading name {self.name!r}: use letters, digits, '.' and '-'")
        if isinstance(self.rests_on, str):
            raise SymtransError(f"reading {self.name!r}: rests_on must be a tuple of ids, not a string")
        if self.rests_on is not None:
            object.__setattr__(self, "rests_on", tuple(self.rests_on))
            bad = [d for d in self.rests_on if not all(_ID.match(part) for part in str(d).split("/"))
                   or str(d).count("/") > 1]
            if bad:
                raise SymtransError(f"reading {self.name!r}: rests_on names {bad}: give claim ids or "
                                    "'claim/reading' ids")
        if self.quantifier not in QUANTIFIERS:
            raise SymtransError(f"reading {self.name!r}: " + suggest(self.quantifier, QUANTIFIERS, "quantifier"))
        if isinstance(self.hypotheses, str):
            raise SymtransError(f"reading {self.name!r}: hypotheses must be a tuple of strings, not a string")
        object.__setattr__(self, "hypotheses", tuple(self.hypotheses))
        object.__setattr__(self, "moved_by", _check_about(f"reading {self.name!r}", self.about, self.moved_by,
                                                          self.invariant))

    @property
    def id(self) -> str:
        """``<claim>/<name>``.

        Examples
        --------
        >>> get_claim("thm-7.3").readings[0].id
        'thm-7.3/sum'
        """
        return f"{self.claim}/{self.name}"

    def with_claim(self, claim_id: str) -> Reading:
        """Return this reading attached to claim ``claim_id``.

        Examples
        --------
        >>> Reading("a", "s", "w", "n").with_claim("c").claim
        'c'
        """
        from dataclasses import replace

        return replace(self, claim=claim_id)

    def to_dict(self) -> dict[str, Any]:
        """Return the reading's description as JSON-ready data (no verdict).

        Examples
        --------
        >>> get_claim("thm-7.3").readings[1].to_dict()["id"]
        'thm-7.3/wo'
        """
        return {"id": self.id, "name": self.name, "statement": self.statement, "paper_wording": self.paper_wording,
                "formalisation_note": self.formalisation_note, "hypotheses": list(self.hypotheses),
                "quantifier": self.quantifier, "about": about_dict(self),
                "rests_on": None if self.rests_on is None else list(self.rests_on)}


@dataclass(frozen=True)
class Claim:
    """One formal item of the paper, with its dependencies and the paper's status.

    ``formalisation`` is ``"paper"`` when the statement is the paper's own
    (as far as the text we hold shows it) and ``"toolkit"`` when the toolkit
    had to state its own precise version; ``formalisation_note`` then says
    exactly what was formalised and why the two part.

    Examples
    --------
    >>> Claim(id="x", kind="theorem", title="t", paper_ref="r", section="§1", statement="s",
    ...       latex="s", paper_status="proved", formalisation="toolkit")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: claim 'x': a toolkit formalisation needs a formalisation_note saying what was formalised and why
    >>> Claim(id="x", kind="thm", title="t", paper_ref="r", section="§1", statement="s",
    ...       latex="s", paper_status="proved")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: claim 'x': unknown kind 'thm'; did you mean 'theorem'?
    """

    id: str
    kind: str
    title: str
    paper_ref: str  # the paper's own number or place, e.g. "Theorem 4.2, Rank-Neutrality"
    section: str  # e.g. "§4"
    statement: str  # plain text
    latex: str
    paper_status: PaperStatus
    hypotheses: tuple[str, ...] = ()  # ids of hypothesis items; also statement dependencies
    statement_deps: tuple[str, ...] = ()
    proof_deps: tuple[str, ...] = ()
    formalisation: str = "paper"  # "paper" | "toolkit"
    formalisation_note: str = ""
    source: str = "text"  # "text": read in the seed; "abstract": known only from the abstract
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    readings: tuple[Reading, ...] = ()  # formalisations, each with its own verdict
    quantifier: str = "universal"  # how the statement quantifies, when it has no readings
    #: what the statement is about, when it has no readings (see :class:`Reading` and :data:`ABOUT`)
    about: str = ""
    moved_by: tuple[str, ...] = ()
    invariant: str = ""

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise SymtransError(f"claim id {self.id!r}: use letters, digits, '.' and '-'")
        if self.kind not in KINDS:
            raise SymtransError(f"claim {self.id!r}: " + suggest(self.kind, KINDS, "kind"))
        if not isinstance(self.paper_status, PaperStatus):
            try:
                object.__setattr__(self, "paper_status", PaperStatus(self.paper_status))
            except ValueError:
                raise SymtransError(f"claim {self.id!r}: " + suggest(
                    str(self.paper_status), [s.value for s in PaperStatus], "paper status")) from None
        if self.formalisation not in ("paper", "toolkit"):
            raise SymtransError(f"claim {self.id!r}: formalisation must be 'paper' or 'toolkit'")
        if self.formalisation == "toolkit" and not self.formalisation_note:
            raise SymtransError(f"claim {self.id!r}: a toolkit formalisation needs a formalisation_note "
                                "saying what was formalised and why")
        if self.source not in ("text", "abstract"):
            raise SymtransError(f"claim {self.id!r}: source must be 'text' or 'abstract'")
        for name in ("hypotheses", "statement_deps", "proof_deps", "notes"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise SymtransError(f"claim {self.id!r}: {name} must be a tuple of strings, not a string")
            object.__setattr__(self, name, tuple(value))
        if self.id in self.depends_on:
            raise SymtransError(f"claim {self.id!r} depends on itself")
        if self.quantifier not in QUANTIFIERS:
            raise SymtransError(f"claim {self.id!r}: " + suggest(self.quantifier, QUANTIFIERS, "quantifier"))
        object.__setattr__(self, "moved_by", _check_about(f"claim {self.id!r}", self.about, self.moved_by,
                                                          self.invariant))
        if self.readings and self.about:
            raise SymtransError(f"claim {self.id!r}: each reading declares what it is about, not the claim")
        readings = tuple(r.with_claim(self.id) for r in self.readings)
        names = [r.name for r in readings]
        if len(set(names)) != len(names):
            raise SymtransError(f"claim {self.id!r}: duplicate reading names {names}")
        if len(readings) == 1:
            raise SymtransError(f"claim {self.id!r}: one reading is the claim itself; give two or more, or none")
        object.__setattr__(self, "readings", readings)

    def reading(self, reading_id: str) -> Reading:
        """Return the reading with id ``reading_id`` (``<claim>/<name>``); unknown ids suggest close ones.

        Examples
        --------
        >>> get_claim("thm-7.3").reading("thm-7.3/wo").quantifier
        'model-every'
        """
        for r in self.readings:
            if r.id == reading_id:
                return r
        raise SymtransError(suggest(reading_id, [r.id for r in self.readings], f"reading of {self.id}"))

    @property
    def depends_on(self) -> tuple[str, ...]:
        """All direct dependencies (hypotheses, statement, proof), without repeats.

        Examples
        --------
        >>> get_claim("thm-4.2").depends_on[:3]
        ('H1', 'H2', 'H3')
        """
        seen: dict[str, None] = {}
        for dep in (*self.hypotheses, *self.statement_deps, *self.proof_deps):
            seen.setdefault(dep, None)
        return tuple(seen)

    def edges(self) -> list[tuple[str, str]]:
        """Return ``(dependency, kind)`` pairs, kind ``"statement"`` or ``"proof"``.

        A dependency needed to state the claim is a statement edge even if the
        proof also uses it.

        Examples
        --------
        >>> get_claim("prop-5.1").edges()
        [('lem-variety', 'proof'), ('lem-rank-sum', 'proof')]
        """
        statement = {*self.hypotheses, *self.statement_deps}
        return [(d, "statement" if d in statement else "proof") for d in self.depends_on]

    @property
    def given(self) -> bool:
        """True for definitions and hypotheses (items that state no proposition of their own).

        Examples
        --------
        >>> get_claim("H4").given, get_claim("thm-4.2").given
        (True, False)
        """
        return self.kind in GIVEN_KINDS

    @property
    def external(self) -> bool:
        """True for results the paper takes from outside (literature, standard facts).

        Examples
        --------
        >>> get_claim("lit-dong").external, get_claim("lem-rank-sum").external, get_claim("thm-5.3").external
        (True, True, False)
        """
        return self.kind == "literature" or self.paper_status is PaperStatus.EXTERNAL

    @property
    def formulas(self) -> tuple[str, ...]:
        """Names of the registered formulas whose provenance is this claim.

        Read from :data:`symtrans.formulas.FORMULAS` (one source of truth), never stored here.

        Examples
        --------
        >>> get_claim("thm-recovery").formulas[:2]
        ('recovery-ambiguity', 'recovery-ambiguity-per-token')
        """
        from symtrans.formulas import FORMULAS

        return tuple(name for name, f in FORMULAS.items() if f.provenance.claim == self.id)

    def to_dict(self) -> dict[str, Any]:
        """Return the claim's description as JSON-ready data (no verdict: that needs evidence).

        Examples
        --------
        >>> get_claim("def-ln").to_dict()["paper_status"]
        'definition'
        """
        return {
            "id": self.id, "kind": self.kind, "title": self.title, "paper_ref": self.paper_ref,
            "section": self.section, "paper_status": self.paper_status.value,
            "formalisation": self.formalisation, "formalisation_note": self.formalisation_note,
            "source": self.source, "statement": self.statement, "latex": self.latex,
            "hypotheses": list(self.hypotheses), "statement_deps": list(self.statement_deps),
            "proof_deps": list(self.proof_deps), "depends_on": list(self.depends_on),
            "formulas": list(self.formulas), "notes": list(self.notes), "quantifier": self.quantifier,
            "about": about_dict(self) if not self.readings else None,
        }


def about_dict(item: Claim | Reading) -> dict[str, Any]:
    """The ``about`` declaration of a reading (or a claim without readings) as JSON-ready data.

    Examples
    --------
    >>> about_dict(get_claim("thm-7.3").reading("thm-7.3/wo"))["about"]
    'parametrisation'
    >>> about_dict(get_claim("thm-7.3").reading("thm-7.3/wo"))["moved_by"]
    ['centring-shift', 'vo-gauge']
    """
    return {"about": item.about or "undeclared", "moved_by": list(item.moved_by), "invariant": item.invariant}


def about_text(item: Claim | Reading) -> str:
    """One line saying what a reading (or a claim without readings) is about, for the report.

    Examples
    --------
    >>> about_text(get_claim("thm-7.3").reading("thm-7.3/sum"))
    'function'
    >>> about_text(get_claim("thm-7.3").reading("thm-7.3/wo")).split(";")[0]
    'parametrisation (moved by centring-shift, vo-gauge)'
    """
    if item.about != "parametrisation":
        return item.about or "undeclared"
    return f"parametrisation (moved by {', '.join(item.moved_by)}); invariant counterpart: {item.invariant}"


def undeclared(items: list[Claim | Reading] | None = None) -> list[str]:
    """Ids of the statements (default: every one in the registry) that do not declare what they are about.

    A reading, or a claim without readings, must say whether it is about the
    function or the parametrisation (:data:`ABOUT`); tests/test_gauge.py
    fails while this list is not empty.

    Examples
    --------
    >>> undeclared()
    []
    >>> undeclared([Reading("new", "s", "w", "n").with_claim("demo")])
    ['demo/new']
    """
    return [i.id for i in (declared_items() if items is None else items) if i.about not in ABOUT]


def declared_items() -> list[Claim | Reading]:
    """Every statement that gets a verdict: each reading, and each claim without readings (paper order).

    Examples
    --------
    >>> ids = [i.id for i in declared_items()]
    >>> "thm-7.3/wo" in ids, "thm-7.3" in ids, "thm-5.3" in ids
    (True, False, True)
    """
    out: list[Claim | Reading] = []
    for c in all_claims():
        out.extend(c.readings or (c,))
    return out


# --------------------------------------------------------------------------- registry
#: The section modules, imported (in paper order) by :func:`all_claims`.
CLAIM_MODULES: tuple[str, ...] = (
    "proofs.sec2_notation", "proofs.sec4_layernorm", "proofs.sec5_residual", "proofs.sec6_contraction",
    "proofs.sec7_identifiability", "proofs.sec8_pgop", "proofs.literature", "proofs.sec9_symmetry",
)

#: id -> claim, in registration order.
REGISTRY: dict[str, Claim] = {}
_RANK: dict[str, tuple[int, int]] = {}  # id -> (position of its module in CLAIM_MODULES, registration number)


def register(claim: Claim) -> Claim:
    """Add ``claim`` to the registry; a duplicate id is an error.

    Examples
    --------
    >>> register(get_claim("thm-4.2"))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: duplicate claim id 'thm-4.2' (registered as Theorem 4.2, Rank-Neutrality)
    """
    if claim.id in REGISTRY:
        raise SymtransError(f"duplicate claim id {claim.id!r} (registered as {REGISTRY[claim.id].paper_ref})")
    module = sys._getframe(1).f_globals.get("__name__", "")
    rank = CLAIM_MODULES.index(module) if module in CLAIM_MODULES else len(CLAIM_MODULES)
    REGISTRY[claim.id] = claim
    _RANK[claim.id] = (rank, len(_RANK))
    return claim


def _load() -> None:
    import importlib

    for module in CLAIM_MODULES:  # claims live here only: listing them imports no producer (and no torch)
        importlib.import_module(module)


def all_claims() -> list[Claim]:
    """Return every registered claim, in paper order.

    Examples
    --------
    >>> ids = [c.id for c in all_claims()]
    >>> ids[0], "thm-4.2" in ids, "framework-9" in ids
    ('def-notation', True, True)
    """
    _load()
    return sorted(REGISTRY.values(), key=lambda c: _RANK[c.id])


def claim_ids() -> list[str]:
    """Return every registered claim id, in paper order.

    Examples
    --------
    >>> "thm-recovery" in claim_ids()
    True
    """
    return [c.id for c in all_claims()]


def get_claim(claim_id: str) -> Claim:
    """Return the claim with id ``claim_id``; an unknown id suggests close ones.

    Examples
    --------
    >>> get_claim("thm-5.3").paper_ref
    'Theorem 5.3, Residual Rank Obstruction'
    >>> get_claim("thm-4.3")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim 'thm-4.3'; did you mean 'thm-7.3' or 'thm-5.3' or 'thm-4.2'?
    """
    _load()
    try:
        return REGISTRY[claim_id]
    except KeyError:
        raise SymtransError(suggest(claim_id, REGISTRY, "claim")) from None
