"""The Python API: one function per CLI command, with results that display in a notebook.

=====================================  ========================================  ===================
function                               returns                                   CLI
=====================================  ========================================  ===================
``formula(name, arch, **sizes)``       :class:`~symtrans.formulas.FormulaValue`  ``symtrans formula``
                                       (LaTeX in a notebook)
``architecture(spec, **sizes)``        :class:`~symtrans.arch.Architecture`      ``symtrans arch``
``load(model)``                        :class:`~symtrans.numeric.ModelWeights`   --
``measure(model, n=...)``              :class:`Measurement` (HTML table)         ``symtrans measure``
``relate(a, b)``                       :class:`~symtrans.group.relate.Relation`  ``symtrans relate``
``canonical(model)``                   :class:`~symtrans.group.canonical.Canonical` ``symtrans canonical``
``check_claims(model, claims, n=...)`` :class:`EvidenceList` (HTML table)        ``symtrans check``
``certify_claims(claims)``             :class:`EvidenceList` (HTML table)        ``symtrans certify``
``proof_graph(model)``                 :class:`ProofGraph` (SVG graph + table)   ``symtrans claims``
``proof_report(model, out=...)``       :class:`NotebookReport` (the HTML page)   ``symtrans report``
=====================================  ========================================  ===================

The names avoid the sub-packages ``symtrans.graph``, ``symtrans.report`` and
``symtrans.certify``: importing a sub-package sets the attribute of that name
on :mod:`symtrans`, which would shadow a function called ``report``.

``model`` is ``"default"`` (the bundled all-MiniLM-L6-v2), a model directory, a
hub id found in the local Hugging Face cache, a loaded
:class:`~symtrans.numeric.ModelWeights`, an in-memory ``transformers`` model
(base or with a head; BERT, RoBERTa, DistilBERT, GPT-2, Llama, Mistral, Qwen2),
a TransformerLens ``TransformerBridge`` (read through its ``original_model``),
an nnsight wrapper (its ``_module``), a ``torch.compile``'d or ``DataParallel``
model or a ``transformers`` pipeline (the model each holds), a
sentence-transformers model (its transformer), or ``None`` (symbolic only,
where that makes sense).
Everything here is re-exported from :mod:`symtrans`; torch and networkx load
only when a function that needs them runs.

Examples
--------
>>> import symtrans
>>> symtrans.formula("recovery-ambiguity", arch="bert-base", n=512).value
360448
>>> symtrans.architecture("gpt2").attention
'causal'
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from symtrans.arch import Architecture, get_arch
from symtrans.progress import announced
from symtrans.errors import SymtransError
from symtrans.config import DEFAULT_DTYPE, DEFAULT_N, DEFAULT_SEED, RUN_DTYPES
from symtrans.formulas import FormulaValue, formula

if TYPE_CHECKING:
    from symtrans.evidence import Evidence
    from symtrans.graph import ClaimGraph, ClaimStatus
    from symtrans.numeric.measure import MeasureReport
    from symtrans.numeric.weights import ModelWeights
    from symtrans.report.build import Report

__all__ = ["formula", "architecture", "load", "invariance_group", "verify_invariance", "relate", "canonical",
           "orbit_distance", "measure", "check_claims",
           "certify_claims", "proof_graph", "proof_report", "EvidenceList", "InvarianceChecks", "Measurement",
           "ProofGraph", "NotebookReport", "FormulaValue", "InvarianceGroup", "breaking", "BreakingTable"]

ALL_FORMATS = ("md", "json", "html", "dot")


# ----------------------------------------------------------------- helpers
def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _html_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th style='text-align:left'>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{_esc(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: the longest plain-text ``repr`` of an API result (a saved notebook keeps it beside the HTML display)
REPR_MAX_CHARS = 4000


def _bounded(lines: Sequence[str], more: str = ".to_dict() has everything") -> str:
    """Join ``lines`` into a plain-text fallback of at most :data:`REPR_MAX_CHARS` characters, escaped for a terminal.

    Names come from config files: a terminal escape in one is shown as ``\\x1b`` (as the command line shows it),
    never sent to the terminal (the HTML displays escape them for HTML).

    Examples
    --------
    >>> len(_bounded(["x" * 100] * 1000)) <= REPR_MAX_CHARS
    True
    >>> print(_bounded(["model \\x1b[2J"]))
    model \\x1b[2J
    """
    from symtrans.validate import terminal_safe

    text = "\n".join(terminal_safe(line, keep_newlines=False) for line in "\n".join(lines).split("\n"))
    if len(text) <= REPR_MAX_CHARS:
        return text
    tail = f"\n... ({len(text) - REPR_MAX_CHARS} more characters; {more})"
    return text[:REPR_MAX_CHARS - len(tail)].rsplit("\n", 1)[0] + tail


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _context(model: Any, n: int, seed: int, dtype: str, device: str | None, eps: float | None = None) -> Any:
    """An evidence Context; a loaded ModelWeights is preloaded (so nothing is loaded twice).

    ``eps``: the norms' eps for the analysis (0 allowed; ``None``: the checkpoint's own).
    """
    from symtrans.config import RunConfig
    from symtrans.context import Context

    # the declared checks of every run parameter (symtrans.config.PARAMS), eps included
    config = RunConfig.from_kwargs(model=None, n=n, seed=seed, dtype=dtype, device=device, eps=eps)
    if model is None or isinstance(model, (str, os.PathLike)):
        return Context.from_config(config.replace(model=None if model is None else str(model)))
    weights = _as_weights(model, dtype, device or "cpu")
    ctx = Context.from_config(config.replace(model=str(getattr(weights, "source", "weights"))))
    return ctx.preload(weights)  # evidence from these weights only: reuse across calls is switched off


def _check_run(command: str, model: Any, ids: Any, n: int, seed: int) -> list[str] | None:
    """The declared checks of ``n`` and ``seed``, then the claim ids and the model spec (errors name them as here).

    Examples
    --------
    >>> _check_run("check", "default", [None], 8, 0)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: claim ids: expected a list of strings
    >>> _check_run("certify", None, None, "8", 0)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: n: expected an integer, got '8'
    """
    from symtrans.args import check_run_claims
    from symtrans.config import check_param

    check_param("n", n)
    check_param("seed", seed)
    return check_run_claims(command, model, ids, n)


def _as_weights(model: Any, dtype: str, device: str | None) -> Any:
    """Loaded (or streamed) weights as given; anything else through :func:`load` (specs, model objects)."""
    from symtrans.numeric.weights import ModelWeights, StreamedWeights

    if isinstance(model, (ModelWeights, StreamedWeights)):  # not any object with an ``arch`` and a ``layer``
        bad = model.first_nonfinite() if isinstance(model, ModelWeights) else None  # streamed: checked as read
        if bad is not None:  # a checkpoint or model object with one is refused at load; edited weights here
            raise SymtransError(f"model: the weights given hold NaN or Inf in tensor {bad}")
        return model
    return load(model, dtype=dtype, device=device)


# ----------------------------------------------------------------- architecture and model
def architecture(spec: str | os.PathLike[str] | Architecture = "bert-base", **sizes: int) -> Architecture:
    """Resolve a preset name, a Hugging Face ``config.json`` path or an architecture; apply sizes.

    Examples
    --------
    >>> a = architecture("minilm-l6-h384", n=128)
    >>> a.d_model, a.n
    (384, 128)
    """
    return get_arch(spec, **sizes)


@announced("load", "loading the model")
def load(model: Any = "default", *, dtype: str = DEFAULT_DTYPE, device: str | None = "cpu") -> ModelWeights:
    """Load a model's weights in the per-head layout (``"default"``: the bundled all-MiniLM-L6-v2).

    ``model`` may also be a hub id in the local cache or a model object (see
    the module docstring).

    Examples
    --------
    >>> w = load()
    >>> tuple(w.W_O.shape), w.arch.name
    ((6, 12, 32, 384), 'nreimers/MiniLM-L6-H384-uncased')
    >>> from symtrans.numeric.fixtures import random_model
    >>> load(random_model("llama", head=True)).arch.family
    'llama'
    """
    from symtrans.numeric import load_model
    from symtrans.config import check_param
    from symtrans.validate import check_model_dir

    if model is None or isinstance(model, (str, os.PathLike, int, float)):
        check_model_dir(model, name="model")  # None or 123 are not hub ids
    # any other object: a transformers model or a wrapper of one, else load_model names what it got
    return load_model(model, dtype=check_param("dtype", dtype), device=check_param("device", device))


# ----------------------------------------------------------------- the invariance group G
def invariance_group(arch: str | os.PathLike[str] | Architecture = "bert-base", *, strict: bool = True) -> Any:
    """The invariance group G of an architecture: its :class:`~symtrans.group.spec.GroupSpec`, with a notebook display.

    Examples
    --------
    >>> G = invariance_group("bert-base")
    >>> G.to_dict()["gauge_dimension"], [f.name for f in G.factors][:2]
    (1179648, ['qk-gauge', 'vo-gauge'])
    """
    from symtrans.group.spec import GroupSpec

    return InvarianceGroup(GroupSpec.from_arch(arch, strict=strict))


@dataclass
class InvarianceGroup:
    """A :class:`~symtrans.group.spec.GroupSpec` that shows as a table of its factors in a notebook.

    Every attribute and method of the spec is available on this object
    (``factors``, ``to_dict()``, ``gauge_dimension_model()``, ...); ``spec``
    is the spec itself.

    Examples
    --------
    >>> G = invariance_group("gpt2")
    >>> "<table>" in G._repr_html_(), len(repr(G)) <= REPR_MAX_CHARS
    (True, True)
    >>> len(repr(G).splitlines()) == 1 + len(G.factors)  # a header line, then one line per factor
    True
    """

    spec: Any

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "spec":
            raise AttributeError(name)
        return getattr(self.spec, name)

    def _rows(self) -> tuple[dict[str, Any], list[list[Any]]]:
        d = self.spec.to_dict()
        def size(f: dict[str, Any]) -> str:
            key = "dimension" if "dimension" in f else "order"
            v = f.get(key) or {}
            return f"{key} {v.get('value', v.get('expression', '?'))}" if isinstance(v, dict) else f"{key} {v}"

        rows = [[f["name"], f["kind"], f["scope"], f["group"], size(f), f["status"]] for f in d["factors"]]
        return d, rows

    def __repr__(self) -> str:
        d, rows = self._rows()
        lines = [f"invariance group G of {d['arch']}: {len(rows)} factors, dimension {d['total_dimension']} "
                 f"(gauge {d['gauge_dimension']})"]
        lines += [f"  {r[0]:<26} {r[1]:<11} {r[2]:<6} {r[4]}: {r[3]}" for r in rows]
        return _bounded(lines)

    def _repr_html_(self) -> str:
        d, rows = self._rows()
        return (f"<p><b>invariance group G</b> of {_esc(d['arch'])}: dimension {_esc(d['total_dimension'])} "
                f"(gauge {_esc(d['gauge_dimension'])})</p>"
                + _html_table(["factor", "kind", "scope", "group", "dimension or order", "status"], rows))


@announced("group --breaking")
def breaking(arch: str | os.PathLike[str] | Architecture = "bert-base", *, depths: Sequence[int] = (1, 2),
             scope: str = "layers", seed: int = DEFAULT_SEED, components: Sequence[str] | None = None) -> BreakingTable:
    """The table components x factors of G: each necessary component removed, its ablation's stabiliser measured.

    ``depths``: the layer counts of the measured instances (``group --breaking --layers``). See
    :mod:`symtrans.group.breaking` (``symtrans group --breaking``).

    Examples
    --------
    >>> t = breaking("llama2-7b", depths=(1,), components=("nonlinearity",))
    >>> row = t.to_dict()["components"][0]
    >>> row["enlarges"], row["measured"][0]["measured_dimension"] > row["measured"][0]["group_dimension"]
    (True, True)
    """
    from symtrans.config import check_param
    from symtrans.group.breaking import breaking as table

    check_param("seed", seed)
    return BreakingTable(table(arch, layers=tuple(depths), scope=scope, seed=seed,
                               components=None if components is None else tuple(components)))


@dataclass
class BreakingTable:
    """The record of :func:`breaking`, shown as its text table.

    Examples
    --------
    >>> t = breaking("llama2-7b", depths=(1,), components=("gates",))
    >>> repr(t).splitlines()[0].startswith("symmetry breaking by component")
    True
    """

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record (``group --breaking --format json``).

        Examples
        --------
        >>> breaking("llama2-7b", depths=(1,), components=("gates",)).to_dict()["components"][0]["state"]
        'absent'
        """
        return self.data

    def __repr__(self) -> str:
        from symtrans.group.breaking import table_lines

        return _bounded(table_lines(self.data))


@announced("group --verify")
def verify_invariance(model: Any = "default", *, factors: Sequence[str] | None = None,
                      dtypes: Sequence[str] = RUN_DTYPES, n: int = DEFAULT_N,
                      seed: int = DEFAULT_SEED) -> InvarianceChecks:
    """Apply a random element of each factor of G to real weights and check the output (per dtype).

    Examples
    --------
    >>> checks = verify_invariance(factors=["S_H"], dtypes=["float64"], n=6)
    >>> [(c.factor, c.verdict.label) for c in checks]
    [('S_H', 'supported')]
    """
    from symtrans.args import check_positions
    from symtrans.config import check_param
    from symtrans.group.numeric import verify_model

    check_param("n", n)
    check_param("seed", seed)
    if isinstance(dtypes, str) or not hasattr(dtypes, "__iter__"):
        raise SymtransError("dtypes: expected a list of dtype names such as ('float64', 'float32')")
    from symtrans.config import PARAMS

    for d in dtypes:
        PARAMS["dtype"].check(d, "dtypes")  # the one dtype constraint, named as the caller wrote it
    weights = _as_weights(model, "float64", "cpu")
    check_positions(n, getattr(weights, "arch", None), "n")
    checks = verify_model(weights, dtypes=tuple(dtypes), n=n, seed=seed,
                          factors=list(factors) if factors else None)
    return InvarianceChecks(checks)


def relate(a: Any, b: Any, *, out: str | os.PathLike[str] | None = None) -> Any:
    """Decide whether checkpoint B = g . A for an element g of G (``symtrans relate``); write g to ``out`` if found.

    ``a`` and ``b`` are model directories, ``"default"`` or loaded weights of one architecture. The
    :class:`~symtrans.group.relate.Relation` says ``related`` and holds the element's steps and per-tensor
    residuals, or ``stop``: the factor, layer and tensor where no element of G explains B, and the breaking
    feature.

    Examples
    --------
    >>> r = relate("default", "default")
    >>> r.related, r.stop
    (True, None)
    """
    from symtrans.group.relate import check_relation_out, relate as _relate, write_relation

    if out is not None:
        check_relation_out(out, "out")  # where g goes: refused before the solve, not after it
    rel = _relate(_as_weights(a, "float64", "cpu"), _as_weights(b, "float64", "cpu"))
    if out is not None and rel.related:
        write_relation(rel, out)
    return rel


def canonical(model: Any) -> Any:
    """The canonical form of ``model`` modulo G (``symtrans canonical``): weights, gauge-fixing element, ambiguities.

    Examples
    --------
    >>> c = canonical("default")
    >>> c.weights.arch.name, c.steps[0]["factor"]
    ('nreimers/MiniLM-L6-H384-uncased', 'residual-permutation')
    """
    from symtrans.group.canonical import canonical as _canonical

    return _canonical(_as_weights(model, "float64", "cpu"))


def orbit_distance(a: Any, b: Any) -> dict[str, Any]:
    """Relative Frobenius distance of the canonical forms of ``a`` and ``b`` (each layer's heads and FFN units paired
    where that is closer): an upper bound of their orbit distance.

    Examples
    --------
    >>> orbit_distance("default", "default")["total"] < 1e-12
    True
    """
    from symtrans.group.canonical import orbit_distance as _distance

    return _distance(_as_weights(a, "float64", "cpu"), _as_weights(b, "float64", "cpu"))


class InvarianceChecks(list):  # type: ignore[type-arg]
    """A list of group-invariance checks that renders as an HTML table in a notebook.

    Examples
    --------
    >>> from symtrans.group.numeric import InvarianceCheck
    >>> t = InvarianceChecks([InvarianceCheck("S_H", "float64", "invariant", 0.0, 1e-12, "r", "supported", 1.0, "m")])
    >>> "<table" in t._repr_html_()
    True
    """

    def __repr__(self) -> str:
        return _bounded([f"{len(self)} invariance checks"] + [
            f"  {c.factor:<16} {c.dtype:<8} {c.verdict.label:<12} max rel change {c.max_rel_change:.2e} "
            f"(tolerance {c.tolerance:.2e})" for c in self])

    def _repr_html_(self) -> str:
        return _html_table(["factor", "dtype", "expect", "max rel change", "tolerance", "verdict", "why"],
                           [(c.factor, c.dtype, c.expect, f"{c.max_rel_change:.2e}", f"{c.tolerance:.2e}",
                             c.verdict.label, c.tolerance_reason) for c in self])


# ----------------------------------------------------------------- measurements
@dataclass
class Measurement:
    """A :class:`~symtrans.numeric.measure.MeasureReport` with a per-layer table for notebooks.

    ``record`` holds everything measured (rank records with their cuts and
    reasons, ``alpha_h``, head subspaces, W_O conditioning, LN hypotheses);
    :meth:`rows` is the per-layer summary shown by ``_repr_html_``.

    Examples
    --------
    >>> m = measure(n=8)
    >>> m.rows()[0]["rank"], len(m.rows())
    (8, 6)
    """

    record: MeasureReport

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per layer: rank and residual ratio of its output, heads, W_O, LN hypotheses."""
        rec = self.record
        out = []
        full = rec.profiles.get("full")
        for i, head in enumerate(rec.heads):
            state = full.layers[i + 1] if full is not None else None
            alpha = rec.asymmetry.alpha[i]
            out.append({
                "layer": i,
                "rank": state.rank.rank if state else None,
                "residual_ratio": state.residual.ratio if state else None,
                "mean_alpha": sum(alpha) / len(alpha),
                "rank_mha": head.rank_mha.rank,
                "dim_sum_R": head.dim_sum.rank,
                "kappa": head.kappa,
                "W_O_rank": rec.wo.ranks[i],
                "LN_hypotheses_hold": all(r.all_hold for r in rec.ln[i].values()) if rec.ln[i] else None,
            })
        return out

    def to_dict(self) -> dict[str, Any]:
        """The full record as JSON-ready data (what ``symtrans measure --format json`` prints)."""
        return self.record.to_dict()

    def __repr__(self) -> str:
        rec = self.record
        lines = [f"measure: {rec.model} ({rec.arch}, weights {rec.weights_hash[:12]}), n = {rec.n}, seed {rec.seed}, "
                 f"{rec.dtype}"]
        for r in self.rows():
            lines.append("  " + ", ".join(f"{k} {_num(v) if isinstance(v, float) else v}" for k, v in r.items()))
        return _bounded(lines)

    def _repr_html_(self) -> str:
        rec = self.record
        caption = (f"<p><b>measure</b>: {_esc(rec.model)} ({_esc(rec.arch)}, weights {_esc(rec.weights_hash[:12])}), "
                   f"n = {rec.n}, seed {rec.seed}, {_esc(rec.dtype)}; input: {_esc(rec.input)}</p>")
        rows = self.rows()
        header = list(rows[0]) if rows else []
        cells = [[_num(v) if isinstance(v, float) else v for v in r.values()] for r in rows]
        return caption + _html_table(header, cells)


@announced("measure")
def measure(model: Any = "default", *, n: int = DEFAULT_N, seed: int = DEFAULT_SEED, text: str | None = None,
            variants: Sequence[str] = ("full",), depth: int | None = None, layer_index: int | None = None,
            dtype: str = DEFAULT_DTYPE, device: str | None = "cpu", activations: Any = None) -> Measurement:
    """Measure ranks, residual ratios, ``alpha_h``, head subspaces, W_O and LN hypotheses on a model.

    The input is ``text`` when given, else ``n`` random token ids drawn with
    ``seed``. ``variants`` (``full``, ``pure-attention``, ``residual``,
    ``mlp``) adds rank profiles of those stacks, ``depth`` deep, optionally
    repeating one layer (``layer_index``).

    ``activations``: a TransformerLens ``ActivationCache`` of one sequence (or a dict by hook name) from a
    run of this model. Its ``hook_resid_pre``/``hook_resid_post`` states are the hidden states measured (in
    their cached dtype); the forward starts from its first input and must reproduce them, else the cache is
    refused (another model, or processed weights). See docs/interop.md.

    Examples
    --------
    >>> m = measure(n=6, variants=("full", "pure-attention"), depth=3)
    >>> m.record.profiles["pure-attention"].ranks
    [6, 6, 6, 6]
    """
    from symtrans.numeric.measure import measure_all
    from symtrans.args import check_positions
    from symtrans.config import check_param
    from symtrans.validate import MAX_DEPTH, check_int, check_text

    check_param("n", n)
    check_param("seed", seed)
    check_param("dtype", dtype)
    check_param("device", device)
    check_text(text, "text")
    if depth is not None:
        check_int(depth, "depth", 1, MAX_DEPTH, "every state of the stack is kept")
    if layer_index is not None:
        check_int(layer_index, "layer_index", 0)
    if isinstance(variants, str) or not all(isinstance(v, str) for v in variants):
        raise SymtransError("variants: expected a list of names such as ('full', 'residual')")
    weights = _as_weights(model, dtype, device)
    if activations is not None:
        if text is not None:
            raise SymtransError("activations: give the cache or text, not both (the cache holds its input)")
        return Measurement(measure_all(weights, activations=activations, variants=tuple(variants), depth=depth,
                                       layer_index=layer_index, progress=True))
    if text is None:
        check_positions(n, getattr(weights, "arch", None), "n")
    return Measurement(measure_all(weights, text=text, n=None if text is not None else n, seed=seed,
                                   variants=tuple(variants), depth=depth, layer_index=layer_index,
                                   progress=True))


# ----------------------------------------------------------------- evidence
class EvidenceList(list):  # type: ignore[type-arg]
    """A list of :class:`~symtrans.evidence.Evidence` that shows as a table in a notebook.

    Examples
    --------
    >>> ev = certify_claims(["thm-5.3"])
    >>> ev.verdicts()  # the record says certified; an instance certificate (three sizes) counts as supported
    {'thm-5.3': 'supported'}
    >>> ev[0].verdict.value
    'certified'
    >>> "<table>" in ev._repr_html_()
    True
    """

    def verdicts(self) -> dict[str, str]:
        """Each claim's verdict over these records, counted as a report counts them (readings, scope).

        The same counting as ``symtrans check``/``certify`` and ``report.json``
        (:func:`symtrans.graph.count_records`): an instance certificate of a
        claim about all sizes counts as ``supported``, not ``certified``.

        Examples
        --------
        >>> from symtrans.evidence import Evidence, Scope
        >>> few = Evidence(claim="thm-5.3", producer="p", kind="symbolic", verdict="certified",
        ...                summary="r = 1..3", scope=Scope("instances", "r = 1..3"))
        >>> EvidenceList([few]).verdicts()
        {'thm-5.3': 'supported'}
        """
        return {c: t["verdict"] for c, t in self.verdict_table().items()}

    def verdict_table(self) -> dict[str, dict[str, Any]]:
        """Claim id -> ``{"verdict", "readings": {reading id: verdict}}``, counted as in :meth:`verdicts`.

        Examples
        --------
        >>> certify_claims(["prop-6.2"]).verdict_table()["prop-6.2"]["readings"]["prop-6.2/identity"]
        'fails'
        """
        from symtrans.graph import count_records, verdict_table

        return verdict_table(count_records(self))

    def by_claim(self) -> dict[str, list[Evidence]]:
        """The records grouped by claim id, in order of appearance."""
        out: dict[str, list[Evidence]] = {}
        for e in self:
            out.setdefault(e.claim, []).append(e)
        return out

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every record as JSON-ready data (``Evidence.to_dict``)."""
        return [e.to_dict() for e in self]

    def __repr__(self) -> str:
        from symtrans.report.fmt import one_line

        return _bounded([f"{len(self)} evidence records"] + [
            f"  {e.claim} / {e.producer}: {e.verdict.value}: {one_line(e.summary, 100)}" for e in self],
            ".to_dicts() has everything")

    def _repr_html_(self) -> str:
        rows = []
        for e in self:
            tol = f"{e.tolerance.value:.3g} ({e.tolerance.reason})" if e.tolerance is not None else "-"
            rows.append([e.claim, e.producer, e.kind, e.verdict.value, _num(e.margin), tol, e.dtype or "-",
                         e.summary])
        return _html_table(["claim", "producer", "kind", "verdict", "margin", "tolerance", "dtype", "summary"],
                           rows)


@announced("check")
def check_claims(model: Any = "default", claims: Sequence[str] | None = None, *, n: int = DEFAULT_N,
                 seed: int = DEFAULT_SEED, dtype: str = DEFAULT_DTYPE, device: str | None = None,
                 eps: float | None = None) -> EvidenceList:
    """Run the numeric checks (all, or those of ``claims``) on a model; one record per check.

    ``eps`` sets the norms' eps for the analysis (``--eps``; 0 is the paper's eps-free LayerNorm); the
    default is the checkpoint's own. Every model record states it in its context.

    Examples
    --------
    >>> ev = check_claims(claims=["prop-5.4"], n=8)
    >>> sorted((e.producer, e.verdict.value) for e in ev)  # the Jacobian (a sanity check) and the non-affinity
    [('global-non-affine', 'supported'), ('residual-jacobian', 'supported')]
    """
    from symtrans.runner import run_checks

    if model is None:
        raise SymtransError("check needs a model: 'default', a model directory or loaded weights")
    ids = _check_run("check", model, claims, n, seed)
    return EvidenceList(run_checks(_context(model, n, seed, dtype, device, eps), ids, progress=True))


@announced("certify")
def certify_claims(claims: Sequence[str] | None = None, *, model: Any = None, n: int = DEFAULT_N,
            seed: int = DEFAULT_SEED) -> EvidenceList:
    """Run the exact certificates and counterexample searches (all, or those of ``claims``).

    ``model=None`` runs the certificates that need no weights; ``"default"``
    adds those on the real weights (exact rational arithmetic on them).

    Examples
    --------
    >>> [(e.producer, e.verdict.value) for e in certify_claims(["prop-6.2"]) if e.reading == "prop-6.2/identity"]
    [('prop62-counterexample', 'fails')]
    """
    from symtrans.report.certificates import certify_claims as _certify_dicts
    from symtrans.evidence import Evidence

    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise SymtransError("certify takes a model spec ('default' or a directory), not loaded weights")
    ids = _check_run("certify", model, claims, n, seed)
    doc = _certify_dicts(ids, model=None if model is None else str(model),
                         n=n, seed=seed, progress=True)
    return EvidenceList(Evidence.from_dict(e) for c in doc["claims"] for e in c["evidence"])


# ----------------------------------------------------------------- graph and report
@dataclass
class ProofGraph:
    """The proof graph with every claim's derived status; shows as the SVG graph and a table.

    ``graph`` is the :class:`~symtrans.graph.ClaimGraph` (networkx inside:
    ``graph.graph``), ``statuses`` maps claim id to
    :class:`~symtrans.graph.ClaimStatus`.

    Examples
    --------
    >>> g = proof_graph(run=False)
    >>> g.status("thm-4.2").verdict.value, g.rests_on("thm-recovery")
    ('not-run', ['def-notation', 'thm-7.3'])
    """

    report: Report

    @property
    def graph(self) -> ClaimGraph:
        """The underlying :class:`~symtrans.graph.ClaimGraph`."""
        return self.report.graph

    @property
    def statuses(self) -> dict[str, ClaimStatus]:
        """Claim id -> derived status, in topological order."""
        return self.report.statuses

    def status(self, claim_id: str) -> ClaimStatus:
        """One claim's status (a one-line error naming the nearest id if unknown)."""
        self.graph.claim(claim_id)
        return self.statuses[claim_id]

    def rests_on(self, claim_id: str, depth: int | None = None) -> list[str]:
        """Every item ``claim_id`` rests on (``symtrans claims ID --rests-on``)."""
        return self.graph.rests_on(claim_id, depth)

    def impact(self, claim_id: str, depth: int | None = None) -> list[str]:
        """Every item that rests on ``claim_id`` (``symtrans claims ID --impact``)."""
        return self.graph.impact(claim_id, depth)

    def disagreements(self) -> list[tuple[Any, ClaimStatus]]:
        """``(claim, status)`` where the toolkit's verdict differs from the paper's status."""
        return self.report.disagreements()

    def __repr__(self) -> str:
        return _bounded(["proof graph: " + _summary_lines(self.report)])

    def _repr_html_(self) -> str:
        from symtrans.report.html import render_notebook

        return render_notebook(self.report)


@announced("claims")
def proof_graph(model: Any = None, *, run: bool = True, n: int = DEFAULT_N, seed: int = DEFAULT_SEED, dtype: str = DEFAULT_DTYPE,
          device: str | None = None) -> ProofGraph:
    """Build the proof graph; with ``run`` its statuses come from running every producer.

    ``model=None`` runs the symbolic producers only (numeric ones are
    ``not-run``); ``run=False`` runs nothing (every verdict ``not-run``).

    Examples
    --------
    >>> g = proof_graph(run=False)
    >>> len(g.graph) == len(g.statuses), g.status("lit-dong").standing.value
    (True, 'external')
    """
    if run:
        return ProofGraph(_build(model, n, seed, dtype, device))
    _context(None, n, seed, dtype, device)  # the same argument checks when nothing runs
    import datetime as _dt

    from symtrans import __version__
    from symtrans.graph import ClaimGraph, assess
    from symtrans.report.build import Report

    g = ClaimGraph()
    return ProofGraph(Report(__version__, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                             None, {"n": n, "seed": seed, "device": device, "dtype": dtype}, g, assess(g, {})))


def _summary_lines(report: Report) -> str:
    """Counts by verdict and the disagreements, in two lines (the plain text of a report or graph)."""
    from symtrans.report.fmt import answer_line

    dis = [c.id for c, _ in report.disagreements()]
    return (f"{answer_line(report)}\n"
            f"disagreements with the paper: {', '.join(dis) if dis else 'none so far'}")


def _build(model: Any, n: int, seed: int, dtype: str, device: str | None, previous: Any = None,
           eps: float | None = None) -> Report:
    from symtrans.report import build_report

    return build_report(_context(model, n, seed, dtype, device, eps), previous=previous, progress=True)


@dataclass
class NotebookReport:
    """A proof-status :class:`~symtrans.report.Report` that shows as its HTML page in a notebook.

    Every attribute and method of the report is available on this object
    (``statuses``, ``items()``, ``disagreements()``, ``verdict_counts()``,
    ``to_json()``, ...); ``paths`` lists the files written, if any.

    Examples
    --------
    >>> r = proof_report(model=None, run=False)
    >>> r.verdict_counts()["not-run"] == len(r.statuses), r.paths
    (True, [])
    """

    report: Report
    paths: list[Path]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.report, name)

    def summary(self) -> str:
        """The two lines ``symtrans report`` prints: counts by verdict, and the disagreements."""
        return _summary_lines(self.report)

    def __repr__(self) -> str:
        return _bounded(["proof-status report: " + self.summary()] + [f"  wrote {p}" for p in self.paths])

    def html(self) -> str:
        """The self-contained HTML page (``report.html``)."""
        from symtrans.report.html import render_html

        return render_html(self.report)

    def _repr_html_(self) -> str:
        # the answer, the legend, the graph and the claim table, styles scoped to the cell (a tenth of the
        # page's size: the saved notebook does not carry every evidence table); the page itself is written
        from symtrans.report.html import render_notebook

        page = next((p for p in self.paths if str(p).endswith(".html")), None)
        link = (f'<p>The whole report, with every claim\'s evidence: <a href="{_esc(page)}">{_esc(page)}</a></p>'
                if page else "<p>The whole report, with every claim's evidence: <code>.html()</code>, or pass "
                "<code>out=</code> to write report.html.</p>")
        return render_notebook(self.report) + link


@announced("report")
def proof_report(model: Any = "default", out: str | os.PathLike[str] | None = None, *,
           formats: Sequence[str] = ALL_FORMATS, n: int = DEFAULT_N, seed: int = DEFAULT_SEED, dtype: str = DEFAULT_DTYPE,
           device: str | None = None, previous: str | os.PathLike[str] | None = None,
           run: bool = True, eps: float | None = None) -> NotebookReport:
    """Build the proof-status report (every claim, its evidence and standing); write it into ``out`` if given.

    Same defaults as ``symtrans report`` (``n = DEFAULT_N``, seed 0, float64).
    ``model=None`` runs the symbolic producers only; ``run=False`` runs no
    producer at all (a quick look at the graph and the paper's statuses).
    ``eps`` sets the norms' eps for the analysis (``--eps``; 0 is the paper's eps-free LayerNorm;
    default: the checkpoint's own), stated in every model record's context.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     r = proof_report(model=None, out=Path(d) / "rep", formats=["md", "json"], run=False)
    ...     sorted(p.name for p in r.paths)
    ['report.json', 'report.md']
    """
    from symtrans.report import check_output_dir, parse_formats, write_report

    fmts = parse_formats(formats)  # a string is one comma-separated list ("md" or "md,json"), not letters
    if out is not None:
        check_output_dir(out)  # fail before minutes of checks, not after
    rep = _build(model, n, seed, dtype, device, previous, eps) if run else proof_graph(run=False, n=n, seed=seed,
                                                                          dtype=dtype, device=device).report
    paths = list(write_report(rep, out, fmts)) if out is not None else []
    return NotebookReport(rep, paths)
