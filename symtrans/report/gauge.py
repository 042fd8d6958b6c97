"""The gauge check: G judges the verdicts (``symtrans report --gauge-check``, :func:`gauge_check`).

Every statement that gets a verdict declares what it is about
(:data:`proofs._claim.ABOUT`). The check draws random exact elements ``g`` of
G for the model's architecture (:func:`symtrans.group.gauge.sample_gauge`: every
factor that acts on the weights, model-scope ones included), applies each to
the weights through the tag tables (:func:`symtrans.group.gauge.apply_gauge`,
rounded to each tensor's storage precision), re-runs every producer that reads
the weights on ``g . W`` and compares each statement's verdict with its verdict
on ``W`` (verdicts counted by :func:`symtrans.graph.count_records`, the one
counting function):

* a **function**-reading whose verdict moves is a **defect**: either the
  reading is mislabelled or its producer reads the parametrisation;
* a **parametrisation**-reading may move under the full element, and is
  then listed with the factors it declares; it is also run on an element of
  G *without* its declared factors (one restricted run per distinct
  declaration): a move there is a defect too (a factor it does not name moved it).

Every element drawn, restricted ones included, judges every statement: a
function-reading moved by a restricted element is a defect as under a full
one, and a parametrisation-reading moved by an element holding none of its
declared factors is one whichever declaration the element was drawn for.

Producers that read no weights (symbolic certificates, exact searches, the
Coq kernel's records) are not run by the check: no element of G can reach
them, and the rows count the weight-reading evidence only (a claim certified
by a proof that reads no weights shows the verdict of its weight-reading checks
here). The numeric checks that read no weights run once. The exact certificates that do read
the weights (``prop63-real-weights``, ``recovery-wo-real``,
``thm53-real-weights``) are re-run on every g . W like the numeric checks. The element ``centring`` (on
LayerNorm models) is TransformerLens's ``centre_writing_weights``
(:func:`symtrans.group.gauge.centring_element`), the processed checkpoint a
TransformerLens user loads. An example run is :func:`gauge_check`'s (one check, run once by the doctests).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from symtrans.config import DEFAULT_DTYPE, DEFAULT_SEED

__all__ = ["GaugeCheck", "gauge_check", "verdicts_of", "same_function"]


def declared_here(moved_by: tuple[str, ...], present: list[str] | None) -> tuple[str, ...]:
    """A declaration less the factors of G that do not act on the model (``present``; None: as given): what a
    restricted run of the gauge check leaves out for it.

    Examples
    --------
    >>> declared_here(("centring-shift", "vo-gauge"), ["qk-gauge", "vo-gauge"]), declared_here(("a",), None)
    (('vo-gauge',), ('a',))
    """
    return tuple(moved_by) if present is None else tuple(f for f in moved_by if f in present)


def verdicts_of(records: list[Any]) -> dict[str, str]:
    """Each statement's verdict (readings, and claims without readings) counted from ``records``.

    Examples
    --------
    >>> from symtrans.evidence import Evidence
    >>> verdicts_of([Evidence(claim="thm-5.3", producer="p", kind="numeric", verdict="supported", summary="s")])
    {'thm-5.3': 'supported'}
    """
    from symtrans.graph import count_records

    out: dict[str, str] = {}
    for cid, status in count_records(records).items():
        if status.readings:
            for r in status.readings:
                out[r.id] = r.verdict.value
        else:
            out[cid] = status.verdict.value
    return out


@dataclasses.dataclass
class GaugeCheck:
    """The outcome of a gauge check: each statement's verdict on W and on every g . W; rows and defects derived.

    ``runs`` holds, per element of G, its label, factors, condition number,
    the declared factors it was drawn without (``None`` for a full element)
    and every statement's verdict on ``g . W``. :meth:`judge` holds them to
    the statements' declarations (the registry's, or others given).

    Examples
    --------
    >>> gc = GaugeCheck("m", 4, 0, {"thm-7.3/wo": "fails"},
    ...                 [{"label": "c", "factors": ["centring-shift"], "kappa": 1.0, "without": None,
    ...                   "verdicts": {"thm-7.3/wo": "supported"}}])
    >>> gc.defects  # declared: centring-shift moves it
    []
    >>> from proofs._claim import Reading
    >>> gc.judge({"thm-7.3/wo": Reading("wo", "s", "w", "n", about="function").with_claim("thm-7.3")})[1][0][:40]
    'function-reading thm-7.3/wo moved from f'
    """

    model: str
    n: int
    seed: int
    base: dict[str, str]
    runs: list[dict[str, Any]]
    #: the factors of G acting on this model's weights; a restricted run's ``without`` is a declaration less the
    #: factors absent here, so two declarations that differ only in absent factors share one run (None: compared
    #: as given)
    present: list[str] | None = None
    #: the run parameters every verdict was computed with, as the report's (``--eps``: None is the checkpoint's own)
    eps: float | None = None
    dtype: str = DEFAULT_DTYPE
    #: how G was sampled where it is not G as modelled for the run's eps (eps = 0: :func:`gauge_group`); None: it is
    group: str | None = None

    def judge(self, declarations: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        """Rows (per statement: declaration, verdict, where it moved) and defects, under ``declarations``.

        A row's verdict is :attr:`base`'s: counted from the records of the producers that read the weights (the
        ones re-run on each g . W), not the claim's verdict over every record (a proof certifies prop-5.1, and its
        row is ``not-run``: its one weight-reading check is a sanity check, not counted)."""
        from proofs._claim import declared_items

        items = {i.id: i for i in declared_items()}
        items.update(declarations or {})
        moved_under: dict[str, dict[str, str]] = {i: {} for i in self.base}
        defects: list[str] = []
        for run in self.runs:
            after, label, factors = run["verdicts"], run["label"], run["factors"]
            sym = run.get("symmetry") or {}
            if sym.get("verdict") == "fails":
                defects.append(f"the element {label} is not a symmetry of the function: the output moved by "
                               f"{sym['max_rel_change']:.3g} relative > 100 x tol {sym['tolerance']:.3g} "
                               f"({sym['storage_dtype']}): the action applied is not G's")
            for i, v in self.base.items():
                if after.get(i) == v:
                    continue
                it = items.get(i)
                about = getattr(it, "about", "")
                # every element judges every statement: a restricted run (drawn without one declaration's factors) is
                # an element of G like any other, so a function-reading it moves is a defect, and so is a
                # parametrisation-reading it moves without holding any factor that reading declares
                moved_under[i][label] = f"{v} to {after.get(i)}"
                if about == "function":
                    defects.append(f"function-reading {i} moved from {v} to {after.get(i)} under the element {label} "
                                   f"of G (factors {', '.join(factors)})")
                elif about == "parametrisation" and not set(it.moved_by) & set(factors):
                    # one condition, one message: the element (drawn without this declaration or not) holds none of
                    # the factors the reading names, so a factor it does not name moved it
                    defects.append(f"parametrisation-reading {i} moved from {v} to {after.get(i)} under the element "
                                   f"{label} of G, which has none of its declared factors "
                                   f"({', '.join(it.moved_by)}): a factor it does not name moves it")
                elif about not in ("function", "parametrisation"):
                    defects.append(f"{i} moved under {label} and declares nothing")
        rows = []
        for i, v in self.base.items():
            it = items.get(i)
            rows.append({"id": i, "about": getattr(it, "about", "") or "undeclared",
                         "moved_by": list(getattr(it, "moved_by", ())), "invariant": getattr(it, "invariant", ""),
                         "verdict": v, "moved_under": moved_under[i]})
        return rows, defects

    @property
    def rows(self) -> list[dict[str, Any]]:
        """:meth:`judge`'s rows under the registry's declarations."""
        return self.judge()[0]

    @property
    def defects(self) -> list[str]:
        """:meth:`judge`'s defects under the registry's declarations (empty: G moves no verdict it may not)."""
        return self.judge()[1]

    @property
    def elements(self) -> list[dict[str, Any]]:
        """The elements of G drawn: label, factors, condition number, the factors left out."""
        return [{k: r.get(k) for k in ("label", "factors", "kappa", "without", "symmetry")} for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (report.json's ``gauge_check``).

        Examples
        --------
        >>> sorted(GaugeCheck("m", 4, 0, {}, []).to_dict())
        ['defects', 'dtype', 'elements', 'eps', 'group', 'model', 'n', 'rows', 'seed']
        """
        rows, defects = self.judge()
        return {"model": self.model, "n": self.n, "seed": self.seed, "eps": self.eps, "dtype": self.dtype,
                "group": self.group, "elements": self.elements, "rows": rows, "defects": defects}

    def lines(self) -> list[str]:
        """Plain-text lines: the elements, every statement that moved, the defects.

        Examples
        --------
        >>> GaugeCheck("m", 4, 0, {}, []).lines()[0]
        'gauge check on m (n = 4, seed 0): 0 elements of G; no defect'
        """
        rows, defects = self.judge()
        head = (f"gauge check on {self.model} (n = {self.n}, seed {self.seed}): {len(self.runs)} elements of G; "
                + (f"{len(defects)} DEFECTS" if defects else "no defect"))
        out = [head] + ([f"  G sampled: {self.group}"] if self.group else [])
        for e in self.elements:
            sym = e.get("symmetry") or {}
            out.append(f"  element {e['label']}: {len(e['factors'])} factors (kappa {e['kappa']:.3g})"
                       + (f"; same function: {sym['verdict']} (rel change {sym['max_rel_change']:.2g} vs tol "
                          f"{sym['tolerance']:.2g}, {sym['storage_dtype']})" if sym else ""))
        for r in rows:
            if r["moved_under"]:
                out.append(f"  {r['id']} [{r['about']}] {r['verdict']}: moved under "
                           + "; ".join(f"{k} ({v})" for k, v in r["moved_under"].items())
                           + (f"; declared: {', '.join(r['moved_by'])}" if r["moved_by"] else ""))
        steady = sum(1 for r in rows if not r["moved_under"])
        out.append(f"  {steady} of {len(rows)} statements kept their verdict under every element")
        out += [f"  DEFECT: {d}" for d in defects]
        return out


def same_function(w: Any, moved: Any, g: Any, *, n: int, seed: int, head: Any = ...,
                  eps: float | None = None) -> dict[str, Any]:
    """Does ``moved = g . w`` compute the same function? The output compared, up to G's equivariance.

    The output is :func:`symtrans.group.numeric.model_output`: the last hidden
    state, mapped by ``head``, the element's image of an identity output head
    where the model has an untied one (the logits ``h W`` are unchanged when
    ``h' M = h``). ``head`` defaults to that of G's own action of ``g``
    (:func:`symtrans.group.gauge.apply_gauge_head`). A residual factor that
    leaves the head alone (the residual permutation, but for an untied head) is an equivariance: the
    output becomes ``out Q`` (:func:`symtrans.group.numeric.output_target`).
    The tolerance is :func:`symtrans.group.numeric.tolerance` at the weights'
    storage dtype (the moved weights are rounded to it) and the element's
    condition number; the verdict rule is ``group --verify``'s (supported
    below it, fails above 100x). ``eps`` (the report's ``--eps``): both
    forwards run with the norms at that eps (None: the weights' own).

    Examples
    --------
    >>> from symtrans.numeric import load_model
    >>> from symtrans.group.gauge import apply_gauge, sample_gauge
    >>> w = load_model("default")
    >>> g = sample_gauge(w, seed=0, factors=["S_H", "residual-permutation"])
    >>> same_function(w, apply_gauge(w, g), g, n=4, seed=0)["verdict"]
    'supported'
    """
    from symtrans.group.gauge import apply_gauge_head
    from symtrans.group.numeric import _rel, _verdict, model_output, output_target, tolerance
    from symtrans.group.spec import GroupSpec
    from symtrans.numeric.forward import random_ids
    from symtrans.precision import torch_dtype
    from symtrans.numeric.weights import storage_precision

    if head is ...:
        head = apply_gauge_head(w, g, round_to_storage=False)[1]
    from symtrans.context import Context

    at = Context(model=None, eps=eps).with_eps  # the one rule that puts a run's eps into the weights
    ids = random_ids(w, n, seed)
    ref = output_target(GroupSpec.from_arch(w.arch), model_output(at(w), input_ids=ids), g.parts)
    out = model_output(at(moved), head, input_ids=ids)
    sd = storage_precision(w)[0]
    tol, why = tolerance(torch_dtype(sd), int(w.d_model), int(w.n_layers), float(g.kappa))
    change = _rel(out, ref)
    return {"max_rel_change": change, "tolerance": tol, "tolerance_reason": why, "storage_dtype": sd,
            "verdict": _verdict(change, tol, "invariant").label}


def _model_producers() -> list[Any]:
    """Every producer that reads the weights: the numeric checks and the exact certificates of the real weights."""
    from symtrans.runner import certificate_producers, check_producers

    return [p for p in check_producers() + certificate_producers() if p.needs_model]


def _records(ctx: Any, producers: list[Any]) -> list[Any]:
    from symtrans.runner import run_tasks

    results = run_tasks([(p.claim, p) for p in producers], ctx, parallel=False, errors="raise")
    return [e for res in results for e in res]


def gauge_group(model: Any = "default", *, eps: float | None = None, weights: Any = None,
                dtype: str = DEFAULT_DTYPE, device: str | None = None) -> tuple[Any, Any, str | None]:
    """The weights G acts on in a gauge check at the run's ``eps``, G as modelled for them, and how it was sampled.

    G is modelled for norms with eps > 0 only (:meth:`GroupSpec.from_arch`
    refuses an eps-free norm: each residual segment then has a scaling
    symmetry the toolkit does not model). At ``eps = 0`` (``--eps 0``) the
    check acts with G as modelled at the checkpoint's own eps: each of its
    elements is a symmetry of the eps-free model too (a norm sees its row
    only through the scale ``s`` of its centred row, and no factor changes a
    norm input's scale: the residual factors are isometries that commute
    with the norm, the rest act after the norm or along the all-ones
    direction it removes), which the check verifies on every element
    (:func:`same_function` at eps 0). The sampled group is then a subgroup of
    the eps-free invariance group, and says so (the note). A checkpoint whose
    own eps is 0 is refused. ``weights``: the model as loaded weights (the
    check's planted copies), else ``model`` is loaded.

    Examples
    --------
    >>> w, spec, note = gauge_group("default", eps=0.0)
    >>> w.arch.ln_eps, spec.factor("S_H").name, note.split(":")[0]
    (1e-12, 'S_H', "G as modelled at the checkpoint's eps (1e-12)")
    >>> gauge_group("default")[2] is None
    True
    """
    from symtrans.context import Context
    from symtrans.group.spec import GroupSpec

    if weights is None:
        weights = Context(model=model if isinstance(model, str) else "default", dtype=dtype, device=device).weights()
    own = weights  # as stored: the checkpoint's own eps
    spec = GroupSpec.from_arch(own.arch if eps == 0 else Context(model=None, eps=eps).with_eps(own).arch)
    note = None
    if eps == 0:
        note = (f"G as modelled at the checkpoint's eps ({float(own.arch.ln_eps):g}): a subgroup of the eps-free "
                "model's invariance group (its elements keep every norm input's scale; the eps-free scalings are "
                "not modelled, so not sampled); each element's symmetry is checked at eps = 0")
    return own, spec, note


def gauge_check(model: Any = "default", *, n: int, seed: int = DEFAULT_SEED, elements: int = 5, restricted: int | None = None,
                centring: bool = True, weights: Any = None, transform: Any = None,
                sets: list[tuple[str, ...]] | None = None, eps: float | None = None, dtype: str = DEFAULT_DTYPE,
                device: str | None = None) -> GaugeCheck:
    """Compare every statement's verdict on W with its verdict on ``elements`` random elements g of G applied to W.

    ``restricted`` (default: ``elements``) is how many elements are also
    drawn without each distinct set of declared factors, to test that a
    parametrisation-reading is moved by no factor it does not declare.
    ``centring`` adds TransformerLens's centring of the writers (LayerNorm
    models). ``transform(weights, element)`` replaces the action (the false
    case of a transform that is not a symmetry). ``weights`` gives the model
    as loaded weights (a planted copy). ``sets`` limits the restricted runs
    to these declared sets of factors (default: every one a statement declares).
    ``eps``, ``dtype`` and ``device`` are the report's run parameters
    (``--eps``, ``--dtype``, ``--device``): every verdict, on W and on each
    g . W, is computed with them, so the check judges the verdicts the report states.

    Examples
    --------
    >>> gc = gauge_check("default", n=4, elements=1, restricted=0, centring=False)
    >>> any(r["id"] == "thm-7.3/wo" and r["about"] == "parametrisation" for r in gc.rows)
    True
    >>> gc.defects
    []
    >>> [e["label"] for e in gc.elements]
    ['random (seed 0)']
    """
    import torch

    from proofs._claim import declared_items
    from symtrans.context import Context
    from symtrans.group.gauge import (GaugeElement, apply_gauge_head, can_centre, centring_element, gauge_factors,
                                      sample_gauge)
    from symtrans.runner import check_producers

    spec_name = model if isinstance(model, str) else "default"
    run_params = {"n": n, "seed": seed, "eps": eps, "dtype": dtype, "device": device}
    base_ctx = Context(model=spec_name, **run_params)
    # first: G may not be modelled for this model (a checkpoint with eps = 0); at --eps 0, G as modelled at the
    # checkpoint's eps acts on the stored weights, and each moved model is judged at eps 0 (gauge_group)
    own, spec, group_note = gauge_group(spec_name, eps=eps, weights=weights, dtype=dtype, device=device)
    base_ctx.preload(own)
    # G acts in float64 on the CPU (its elements are drawn so); each moved model is then judged in the dtype and on
    # the device the base was loaded with
    cpu64 = own.dtype == torch.float64 and torch.device(own.device).type == "cpu"
    w = own if cpu64 else own.to(dtype="float64", device="cpu")  # no copy where it is already so
    model_ps = _model_producers()
    fixed = _records(Context(model=None, n=n, seed=seed), [p for p in check_producers() if not p.needs_model])
    ids = {i.id for i in declared_items()}
    base = {i: v for i, v in verdicts_of(fixed + _records(base_ctx, model_ps)).items() if i in ids}

    def run(g: GaugeElement, without: tuple[str, ...] | None) -> dict[str, Any]:
        moved, head = apply_gauge_head(w, g) if transform is None else (transform(w, g), ...)
        judged = moved if w is own else moved.to(dtype=own.dtype, device=own.device)
        ctx = Context(model=spec_name, **run_params).preload(judged)  # fixed records: no g reaches them
        return {"label": g.label, "factors": g.factors, "kappa": g.kappa, "without": without,
                "symmetry": same_function(w, moved, g, n=n, seed=seed, head=head, eps=eps),
                "verdicts": verdicts_of(fixed + _records(ctx, model_ps))}

    present = gauge_factors(spec)
    runs = [run(sample_gauge(w, seed=seed + k), None) for k in range(elements)]
    if centring and can_centre(spec):
        runs.append(run(centring_element(w), None))
    if sets is None:
        sets = sorted({i.moved_by for i in declared_items() if i.id in base and i.about == "parametrisation"})
    # one restricted run per declaration as it stands here: declarations that differ only in factors absent from
    # this model draw the same element (it leaves out the same present factors)
    here = list(dict.fromkeys(declared_here(moved_by, present) for moved_by in sets))
    for k in range(elements if restricted is None else restricted):
        for without in here:
            rest = [f for f in present if f not in without]
            g = sample_gauge(w, seed=seed + 1000 + k, factors=rest)
            g.label = f"random without {', '.join(without) or 'nothing present'} (seed {seed + 1000 + k})"
            runs.append(run(g, without))
    name = f"{w.arch.name} (weights {str(w.weights_hash)[:12]})"
    return GaugeCheck(name, n, seed, base, runs, present, eps=eps, dtype=dtype, group=group_note)
