"""Which symmetries each component breaks: G of an architecture against the measured stabiliser of its ablations.

For each component the paper calls necessary (the residual stream, the MLP
non-linearity, the residual stream's LayerNorm/RMSNorm, the W_O mixing of
heads, PG-OP's gates) the architecture is described *without* it
(:meth:`symtrans.arch.Architecture.without`, one description for every
family; PG-OP's gates are ``absent`` from every architecture the toolkit
describes) and the continuous stabiliser of the ablation is measured on a
small random instance, as ``group --complete`` measures G's
(:func:`symtrans.group.complete.jacobian`: float64 Jacobian null space, rank
cut at the widest gap). Against it, each factor of G (the factor catalogue of
the complete architecture, at the same instance) is one cell:

* ``keeps`` -- the factor is still a symmetry of the ablation and no new null
  direction moves the tensors it acts on: the component does not constrain it;
* ``shrinks`` -- the factor is still a symmetry, and the ablation's null
  space has new directions on the tensors it acts on: with the component
  present, the larger group is cut down to this factor (the dimension change
  is the number of those directions);
* ``needs`` -- the factor is not a symmetry of the ablation (its tangent
  directions leave the null space, or an element changes the output) or acts
  on tensors the ablation removes: it exists because of the component.

The row's ``breaks`` column counts the null directions of the ablation that
no surviving factor of G explains: symmetries the component breaks. The
row's dimension change is measured (ablation) minus dim G, and equals
``breaks`` minus what the ``needs`` cells lose (checked, ``consistent``).

Examples
--------
>>> t = breaking("bert-base", layers=(1,), components=("nonlinearity",))
>>> row = t["components"][0]
>>> row["component"], row["state"], row["measured"][0]["change"] > 0
('nonlinearity', 'present', True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError

__all__ = ["COMPONENTS", "breaking", "ablation_record", "table_lines"]

#: (key, name): the components of framework-9's breaking reading, in the order the table lists them
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("residual", "residual stream"),
    ("nonlinearity", "MLP non-linearity"),
    ("norm", "LayerNorm/RMSNorm"),
    ("wo-mixing", "W_O mixing of heads"),
    ("gates", "PG-OP's gates"),
)

#: the tensors an ablation removes (block-form names; ``*`` for per-layer norm tensors of any norm)
_REMOVED = {"norm": ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "ln1_post_w", "ln1_post_b", "ln2_post_w", "ln2_post_b",
                     "final_ln_w", "final_ln_b", "emb_ln_w", "emb_ln_b"),
            "wo-mixing": ("W_O",)}

#: a new null direction is attributed to a factor when at least this share of its squared norm is on the
#: tensors the factor acts on
SHARE = 0.05


def _has_component(a: Architecture, key: str) -> tuple[bool, str]:
    """Whether ``a`` has the component, and why not."""
    if key == "gates":
        return False, ("no architecture the toolkit describes has PG-OP's gates (§8's gated output projection); a "
                       "SwiGLU gate in the FFN is not one")
    if key == "wo-mixing" and int(a.H) * int(a.d_v) > int(a.d_model):
        return False, f"H d_v = {int(a.H) * int(a.d_v)} > d_model: the heads' own coordinates do not fit"
    return True, ""


def _factor_tensors(f: Any) -> set[str]:
    return {t.tensor for t in f.tags} | {t.via for t in f.tags if t.via}


def _base_name(label: str) -> str:
    """``layer0.W_in`` -> ``W_in``; ``final_ln_w`` -> ``final_ln_w``."""
    return label.split(".", 1)[1] if label.startswith("layer") and "." in label else label


def ablation_record(inst: Architecture, spec: Any, component: str, *, scope: str = "layers",
                    seed: int = 0) -> dict[str, Any]:
    """Measure the stabiliser of ``inst`` without ``component`` and classify each factor of ``spec`` (G at ``inst``).

    Examples
    --------
    >>> from symtrans.group import GroupSpec
    >>> from symtrans.group.complete import small_arch
    >>> a = small_arch("bert-base")
    >>> r = ablation_record(a, GroupSpec.from_arch(a), "norm")
    >>> {c["factor"]: c["cell"] for c in r["cells"]}["ffn-input-hyperplane"], r["consistent"]
    ('needs', True)
    """
    import torch

    from symtrans.group.complete import _tangents, _tensor_label, _unexplained, jacobian, rank_record
    from symtrans.group.numeric import sample_element, tolerance
    from symtrans.group.spec import act
    from symtrans.precision import ROUNDING_FLOOR

    a = inst.without(component)
    m = jacobian(a, scope, seed)
    J, rec, params, paths, entries = m["J"], m["record"], m["params"], m["paths"], m["entries"]
    P = int(J.shape[1])
    measured = P - rec["rank"]
    null = m["Vh"][rec["rank"]:].T
    scale = float(J.abs().max())
    base = m["outputs_at"](params)
    L = int(inst.L)
    tol, tol_why = tolerance(torch.float64, int(inst.d_model), L, 1.0)
    removed = set(_REMOVED.get(component, ()))
    cells, surviving = [], []
    for f in spec.factors:
        if f.status == "broken" or not f.in_scope(scope):
            continue
        cell: dict[str, Any] = {"factor": f.name, "kind": f.kind}
        gone = sorted(_factor_tensors(f) & removed)
        one = dataclasses.replace(spec, factors=(f,))
        if f.kind == "continuous":
            T, _ = _tangents(one, m["params"], paths, scope) if not gone else (None, None)
            if gone:
                cell.update(cell="needs", evidence=f"acts on {', '.join(gone)}, which the ablation removes")
            elif T.shape[1] == 0:
                continue
            else:
                dim = rank_record(torch.linalg.svdvals(T))["rank"]
                resid = float((J @ T).abs().max() / (scale * max(float(T.abs().max()), 1e-300)))
                cell.update(dimension=dim, residual=resid, tolerance=ROUNDING_FLOOR)
                if resid < ROUNDING_FLOOR:
                    surviving.append(T)
                    cell.update(cell="keeps", evidence=f"first-order invariant on the ablation: |J t| / (|J| |t|) "
                                f"= {resid:.1e} < {ROUNDING_FLOOR:g} (float64)")
                else:
                    cell.update(cell="needs", evidence=f"not a symmetry of the ablation: |J t| / (|J| |t|) = "
                                f"{resid:.1e} >= {ROUNDING_FLOOR:g} (float64)")
        else:
            if gone:
                cell.update(cell="needs", evidence=f"acts on {', '.join(gone)}, which the ablation removes")
            else:
                gen = torch.Generator().manual_seed(seed + 7)
                count = spec.element_count(f.name, scope, L) if f.scope in ("layer", "stack") else 1
                els = [sample_element(spec, f.name, gen, torch.float64)[0] for _ in range(max(count, 1))]
                moved = act(spec, params, f.name, els if f.scope in ("layer", "stack") else els[0])
                change = float((m["outputs_at"](moved) - base).abs().max() / base.abs().max())
                cell.update(change=change, tolerance=tol, tolerance_reason=tol_why)
                ok = change <= tol
                cell.update(cell="keeps" if ok else "needs",
                            evidence=f"a random element changes the ablation's output by {change:.1e} "
                                     f"{'<=' if ok else '>'} {tol:.1e} (float64)")
        cells.append(cell)
    T = torch.cat(surviving, dim=1) if surviving else torch.zeros(P, 0, dtype=torch.float64)
    t_rank = rank_record(torch.linalg.svdvals(T))["rank"] if T.shape[1] else 0
    new = _unexplained(null, T, paths, entries, t_rank)
    dirs = _new_directions(null, T, t_rank)
    labels = [_base_name(_tensor_label(p)) for p, t in entries for _ in range(t.numel())]
    base_dims = _factor_dimensions(inst, spec, scope, seed)
    for cell in cells:
        if cell["cell"] != "keeps" or base_dims.get(cell["factor"], 1) == 0:
            continue
        mine = _factor_tensors(spec.factor(cell["factor"]))
        inside = _dimension_inside(dirs, [lab in mine for lab in labels])
        if inside:
            cell.update(cell="shrinks", change=inside,
                        evidence=cell["evidence"] + f"; {inside} new null direction(s) of the ablation lie on its "
                                 f"tensors ({', '.join(sorted(mine))}) alone: the component cuts a larger group "
                                 "down to it")
    for cell in cells:
        if cell["kind"] == "continuous" and base_dims.get(cell["factor"], 0) == 0:  # e.g. between layers, at L = 1
            cell.update(cell="n/a", dimension=0, evidence=f"no dimension at this instance (L = {L})")
        elif cell["cell"] == "needs" and cell["kind"] == "continuous":
            cell["dimension"] = base_dims[cell["factor"]]
    # the new directions' squared weight on each tensor, summed over an orthonormal basis of them: the trace of
    # their projector restricted to the tensor, so independent of the basis an SVD happens to return
    weight: dict[str, float] = {}
    for lab, row in zip(labels, (dirs ** 2).sum(1).tolist() if dirs.shape[1] else [0.0] * len(labels)):
        weight[lab] = weight.get(lab, 0.0) + row
    new_weight = {k: round(v, 3) for k, v in sorted(weight.items(), key=lambda x: -x[1]) if v >= 0.05}
    lost = sum(c["dimension"] for c in cells if c["cell"] == "needs" and c["kind"] == "continuous")
    group_dim = sum(base_dims.values())
    return {"component": component, "arch": a.name, "parameters": P, "measured_dimension": measured,
            "group_dimension_at_instance": group_dim,
            "surviving_dimension": t_rank, "breaks": len(new), "new_directions": new, "new_weight": new_weight,
            "lost_dimension": lost,
            "consistent": measured == t_rank + len(new) and t_rank == group_dim - lost,
            "record": {"rank": rec["rank"], "gap_decades": rec["gap_decades"], "clear": rec["clear"],
                       "cut_above": rec["above"], "cut_below": rec["below"], "dtype": "float64"},
            "cells": cells}


#: singular values below this (of unit vectors) count as zero when new directions are compared with a subspace
#: (the rule :func:`symtrans.group.complete._unexplained` uses for the new directions themselves)
SUBSPACE_CUT = 1e-6


def _new_directions(null: Any, T: Any, t_rank: int) -> Any:
    """An orthonormal basis of the null directions outside the span of the surviving tangents ``T``."""
    import torch

    rest = null
    if T.shape[1]:
        U, _, _ = torch.linalg.svd(T, full_matrices=False)
        Q = U[:, :t_rank]
        rest = null - Q @ (Q.T @ null)
    if rest.shape[1] == 0:
        return rest
    U, s, _ = torch.linalg.svd(rest, full_matrices=False)
    return U[:, s > SUBSPACE_CUT]


def _dimension_inside(dirs: Any, mask: list[bool]) -> int:
    """How many independent combinations of ``dirs`` vanish outside the coordinates ``mask`` marks.

    Examples
    --------
    >>> import torch
    >>> d = torch.eye(3, dtype=torch.float64)[:, :2]  # e0, e1
    >>> _dimension_inside(d, [True, False, False]), _dimension_inside(d, [True, True, False])
    (1, 2)
    """
    import torch

    k = int(dirs.shape[1])
    if k == 0:
        return 0
    keep = torch.tensor([not m for m in mask])
    outside = dirs[keep]
    if outside.shape[0] == 0:
        return k
    s = torch.linalg.svdvals(outside)
    return k - int((s > SUBSPACE_CUT).sum())


def _factor_dimensions(inst: Architecture, spec: Any, scope: str, seed: int) -> dict[str, int]:
    """Each continuous factor's dimension at ``inst``: the rank of its tangent directions at a random instance."""
    import torch

    from symtrans.group.complete import _entries, _tangents, random_instance, rank_record

    params = random_instance(inst, scope, seed)
    paths = [p for p, _ in _entries(params, scope)]
    out = {}
    for f in spec.factors:
        if f.kind != "continuous" or f.status == "broken" or not f.in_scope(scope):
            continue
        T, _ = _tangents(dataclasses.replace(spec, factors=(f,)), params, paths, scope)
        out[f.name] = rank_record(torch.linalg.svdvals(T))["rank"] if T.shape[1] else 0
    return out


def breaking(arch: Architecture | str, *, layers: tuple[int, ...] = (1, 2), scope: str = "layers", seed: int = 0,
             components: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The table components x factors of G: each component removed, its ablation's stabiliser measured.

    A function of the architecture and the seed only (random instances, not
    stored weights): computed once per process for each (architecture,
    layers, scope, seed, components) and copied out.

    Examples
    --------
    >>> t = breaking("llama2-7b", layers=(1,), components=("residual", "gates"))
    >>> [(r["component"], r["state"]) for r in t["components"]]
    [('residual', 'present'), ('gates', 'absent')]
    >>> t["components"][0]["enlarges"], breaking("llama2-7b", layers=(1,), components=("residual", "gates")) == t
    (True, True)
    """
    import copy

    a = get_arch(arch)
    key = (a, tuple(layers), scope, seed, None if components is None else tuple(components))
    if key not in _TABLES:
        _TABLES[key] = _breaking(a, layers=tuple(layers), scope=scope, seed=seed, components=components)
    return copy.deepcopy(_TABLES[key])


#: the tables computed in this process (the gauge check runs the report's producers once per group element)
_TABLES: dict[Any, dict[str, Any]] = {}


def _breaking(arch: Architecture, *, layers: tuple[int, ...], scope: str, seed: int,
              components: tuple[str, ...] | None) -> dict[str, Any]:
    """The table components x factors of G: each component removed, its ablation's stabiliser measured.

    For each layer count the instance is the one ``group --complete``
    measures (:func:`symtrans.group.complete.plan`); G's dimension there is
    the factor catalogue's formula and is also measured (``baseline``), so a
    change is read against a G that is complete at that instance. A
    component *enlarges* G when the ablation's measured dimension exceeds
    dim G at every layer count.
    """
    from symtrans.group.complete import plan
    from symtrans.group.spec import GroupSpec
    from symtrans.progress import Progress

    a = get_arch(arch)
    full = GroupSpec.from_arch(a, strict=not a.ablated)
    keys = [k for k, _ in COMPONENTS]
    wanted = tuple(keys) if components is None else tuple(components)
    for c in wanted:
        if c not in keys:
            from symtrans.errors import suggest

            raise SymtransError(suggest(c, keys, "component"))
    the_plan = plan(a, scope, tuple(layers), seed)
    insts = the_plan["instances"]
    rows = {c: {"component": c, "name": dict(COMPONENTS)[c], "measured": []} for c in wanted}
    baselines = []
    present = [c for c in wanted if _has_component(insts[0], c)[0]]
    with Progress(len(insts) * (1 + len(present)), "group --breaking", unit="measurement") as bar:
        for inst in insts:
            spec = GroupSpec.from_arch(inst, strict=not inst.ablated)  # a planted ablation: its layer factors only
            bar.show(f"L={int(inst.L)} G")
            baselines.append(_baseline(a, inst, spec, scope, seed))
            b = baselines[-1]
            bar.step(f"L={int(inst.L)} G")
            for c in wanted:
                has, why = _has_component(inst, c)
                if not has:
                    rows[c].update(state="absent", reason=why)
                    continue
                bar.show(f"L={int(inst.L)} without {c}")
                r = ablation_record(inst, spec, c, scope=scope, seed=seed)
                r.update(L=int(inst.L), group_dimension=b["group_dimension"], baseline=b["measured_dimension"],
                         change=r["measured_dimension"] - b["measured_dimension"])
                rows[c]["measured"].append(r)
                rows[c]["state"] = "present"
                bar.step(f"L={int(inst.L)} without {c}")
    out_rows = []
    for c in wanted:
        row = rows[c]
        if row.get("state") == "present":
            row["clear"] = all(r["record"]["clear"] and r["consistent"] for r in row["measured"])
            row["enlarges"] = all(r["change"] > 0 for r in row["measured"])
            row["breaks_any"] = all(r["breaks"] > 0 for r in row["measured"])
        out_rows.append(row)
    shown_plan = {k: v for k, v in the_plan.items() if k != "instances"}
    shown_plan["instances"] = [i.name for i in insts]
    return {"arch": a.name, "scope": scope, "seed": seed, "dtype": "float64",
            "group_dimension": {"expression": str(full.scope_expression(scope)) if not a.ablated else
                                "not modelled (a planted ablation): measured per instance",
                                "value": _int_or_none(full.scope_dimension(scope)) if not a.ablated else None},
            "plan": shown_plan, "baseline": baselines, "components": out_rows,
            "rule": ("keeps: still a symmetry of the ablation, no new direction on its tensors; shrinks: still a "
                     "symmetry, new null directions on its tensors; needs: not a symmetry of the ablation (or its "
                     "tensors are removed); breaks: null directions of the ablation no surviving factor explains. "
                     "A component enlarges G when measured(ablation) > measured(instance) = dim G at every layer count."),
            "certificates": ("the completeness checker (symtrans verify) covers complete architectures only: the "
                             "ablations are measured, not certified; G's factors keep their own certificates "
                             "(group --certify)")}


def _baseline(a: Architecture, inst: Architecture, spec: Any, scope: str, seed: int) -> dict[str, Any]:
    """The measured stabiliser of the instance itself, against G's dimension there (complete: they agree)."""
    from symtrans.group.complete import jacobian, measure

    if not inst.ablated:
        b = measure(a, instance=inst, scope=scope, seed=seed)
        return {"L": int(inst.L), "group_dimension": b["group_dimension"], "measured_dimension": b["measured_dimension"],
                "agrees": b["agrees"], "gap_decades": b["record"]["gap_decades"], "modelled": True}
    m = jacobian(inst, scope, seed)  # a planted architecture without a component: G is not modelled, only measured
    measured = int(m["J"].shape[1]) - m["record"]["rank"]
    return {"L": int(inst.L), "group_dimension": measured, "measured_dimension": measured,
            "agrees": bool(m["record"]["clear"]), "gap_decades": m["record"]["gap_decades"], "modelled": False}


def _int_or_none(x: Any) -> int | None:
    try:
        return int(x)
    except TypeError:
        return None


def table_lines(t: dict[str, Any]) -> list[str]:
    """Text lines of :func:`breaking`'s table.

    Examples
    --------
    >>> lines = table_lines(breaking("llama2-7b", layers=(1,), components=("gates",)))
    >>> lines[0].startswith("symmetry breaking by component on llama2-7b")
    True
    """
    g = t["group_dimension"]
    lines = [f"symmetry breaking by component on {t['arch']} (scope {t['scope']}; toolkit formalisation of "
             f"framework-9; float64 Jacobian null spaces of small random instances)",
             f"  dim G = {g['expression']}" + (f" = {g['value']:,}" if g["value"] is not None else ""),
             "  instances: " + ", ".join(t["plan"]["instances"])]
    for b in t["baseline"]:
        state = ("complete" if b["agrees"] else "NOT complete") if b["modelled"] else "G not modelled: measured only"
        lines.append(f"  L={b['L']}: G at the instance {b['group_dimension']}, measured {b['measured_dimension']} "
                     f"({state}; gap {b['gap_decades']:.1f} decades)")
    for row in t["components"]:
        lines.append("")
        if row.get("state") == "absent":
            lines.append(f"{row['name']}: absent ({row['reason']})")
            continue
        verdict = "enlarges G when removed" if row["enlarges"] else "does NOT enlarge G when removed"
        if not row["clear"]:
            verdict += " (INCONCLUSIVE: a rank cut without a clear gap, or an inconsistent count)"
        lines.append(f"{row['name']} [{row['component']}]: {verdict}")
        for r in row["measured"]:
            lines.append(f"  L={r['L']}: measured without it {r['measured_dimension']} vs with it {r['baseline']}"
                         f" (change {r['change']:+d}): breaks {r['breaks']} direction(s) outside G, its removal "
                         f"loses {r['lost_dimension']}; gap {r['record']['gap_decades']:.1f} decades"
                         + ("" if r["record"]["clear"] else " (NOT a clear gap)")
                         + ("" if r["consistent"] else "  INCONSISTENT (measured != surviving + new)"))
        last = row["measured"][-1]
        for c in last["cells"]:
            change = f" ({c['change']:+d})" if c["cell"] == "shrinks" else (
                f" (-{c['dimension']})" if c["cell"] == "needs" and "dimension" in c else "")
            lines.append(f"    {c['factor']:<30} {c['cell']}{change}: {c['evidence']}")
        if last["new_weight"]:
            lines.append("    the new directions by tensor (squared weight summed over them, basis-free): " + ", ".join(
                f"{t} {v:.1f}" for t, v in last["new_weight"].items()))
    lines += ["", "rule: " + t["rule"], "certificates: " + t["certificates"]]
    return lines
