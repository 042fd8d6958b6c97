"""Sub-command ``group``: the invariance group G of an architecture, and its checks on real weights.

``symtrans group --arch PRESET|CONFIG.json`` prints the factor table;
``--certify`` adds the exact SymPy certificates and breaking witnesses.
``symtrans group --model default|PATH --verify`` applies an element of every
factor to the real weights (float64 and float32), and measures orbit and fibre
dimensions. ``symtrans group --arch X --complete`` measures the dimension of
the continuous stabiliser on a small random instance of the family
(:mod:`symtrans.group.complete`) and compares it with G's, on 1, 2 and 3 layers.
``symtrans group --arch X --breaking`` removes each component framework-9
calls necessary (residual stream, MLP non-linearity, norms, the W_O mixing of
heads, PG-OP's gates) and measures the ablation's stabiliser the same way: the
table components x factors of G (:mod:`symtrans.group.breaking`).
Every output names its scope: ``layers`` (hidden states in, last hidden state
out) or ``model`` (token ids in).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import dumps_strict

__all__ = ["register", "factor_lines"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``group`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("group").parse_args(["group", "--arch", "bert-base"]).format
    'text'
    """
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--arch", help="preset name or path to a config.json")
    from symtrans.cli import add_model_option, add_run_option

    add_model_option(p, default=None)
    p.add_argument("--verify", action="store_true", help="numeric invariance, orbit and fibre checks on the weights")
    p.add_argument("--certify", action="store_true", help="exact SymPy certificates and breaking witnesses")
    p.add_argument("--complete", action="store_true",
                   help="measure the continuous stabiliser's dimension on small random instances and compare with G")
    p.add_argument("--breaking", action="store_true",
                   help="remove each necessary component (residual, non-linearity, norms, W_O mixing, PG-OP gates), "
                        "measure the ablation's stabiliser and classify each factor of G: keeps / shrinks / needs")
    p.add_argument("--scope", choices=("layers", "model"), default="layers",
                   help="scope of --complete and --breaking: layers (hidden states in) or model (token ids in); "
                        "default layers")
    p.add_argument("--layers", default=None,
                   help="layer counts of --complete (default 1,2,3) and --breaking (default 1,2)")
    p.add_argument("--certificate-out", metavar="FILE",
                   help="with --complete: write a certificate that dim(stabiliser) <= dim G at one rational instance "
                        "(the smallest layer count, layers scope), for `symtrans verify FILE`")
    add_run_option(p, "n", "sequence length of the numeric checks")
    add_run_option(p, "seed", "seed of the numeric checks' random inputs")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_group)


def _fmt(entry: dict[str, Any]) -> str:
    value = entry["value"]
    if value is None:
        return entry["expression"]
    shown = f"{value:,}" if isinstance(value, int) else str(value)
    return shown if entry["expression"] == str(value) else f"{entry['expression']} = {shown}"


def factor_lines(data: dict[str, Any]) -> list[str]:
    """Text lines of the factor table from :meth:`GroupSpec.to_dict`.

    Examples
    --------
    >>> from symtrans.group import GroupSpec
    >>> factor_lines(GroupSpec.from_arch("bert-base").to_dict())[0]
    'invariance group G of bert-base (toolkit formalisation of framework-9)'
    """
    lines = [f"invariance group G of {data['arch']} (toolkit formalisation of framework-9)", ""]
    for f in data["factors"]:
        size = f"dim {_fmt(f['dimension'])}" if f["kind"] == "continuous" else f"order {_fmt(f['order'])}"
        lines.append(f"{f['name']}  [{f['kind']}, {f['scope']}, {f['status']}]  {f['group']}")
        lines.append(f"    {size}")
        lines.append(f"    identity: {f['identity']}")
        for a in f["acts_on"]:
            lines.append(f"    acts on   {a}")
        for b in f["broken_by"]:
            mark = "PRESENT" if b["present"] else "absent "
            lines.append(f"    {b['effect']:<8}  {mark}  {b['feature']}: {b['reason']}")
    def num(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) else str(v)

    per = data.get("layer_dimensions")  # the layers differ (NoPE layers): each kind's dimension and its layers
    kinds = {v: [i for i, w in enumerate(per) if w == v] for v in dict.fromkeys(per)} if per else {}
    lines += ["", f"continuous dimension per layer:            {num(data['layer_dimension'])}" + (
        "  (" + "; ".join(f"{num(v)} on {len(ix)} layer{'s' if len(ix) > 1 else ''}" for v, ix in kinds.items())
        + ")" if kinds else ""),
              f"GL factors over {data['layers']} layers (qk + vo gauge):   {num(data['gauge_dimension'])}",
              f"total continuous dimension of G (scope layers): {num(data['total_dimension'])}"
              f"   ({data['total_dimension_expression']})"]
    for name, sc in data.get("scopes", {}).items():
        lines.append(f"scope {name:<7} dim {_fmt(sc)}")
        lines.append(f"              {sc['covers']}")
    for u in data.get("unmodelled", []):
        lines.append(f"not modelled: {u['feature']}: {u['reason']}")
    for text in data.get("assumes", []):
        lines.append(f"assumes: {text}")
    return lines


def _pairing_lines(rows: list[dict[str, str]]) -> list[str]:
    lines = ["", "collapse phenomena as objects of G (toolkit formalisation; the paper's §9 is not in the text we hold):"]
    for r in rows:
        lines.append(f"  {r['phenomenon']:<34} {r['object']:<18} {r['precise_object']}")
    return lines


def _cmd_group(args: argparse.Namespace) -> int:
    if bool(args.arch) == bool(args.model):
        raise SymtransError("give exactly one of --arch PRESET|CONFIG.json or --model default|PATH")
    if args.verify and not args.model:
        raise SymtransError("--verify needs --model default|PATH (real weights to check)")
    if args.complete and not args.arch:
        raise SymtransError("--complete needs --arch PRESET|CONFIG.json (it builds small random instances)")
    if args.breaking and not args.arch:
        raise SymtransError("--breaking needs --arch PRESET|CONFIG.json (it builds small random instances)")
    if args.breaking and (args.complete or args.verify or args.certify):
        raise SymtransError("--breaking is its own measurement: give it without --complete, --verify or --certify")
    if args.certificate_out is not None and not args.complete:
        raise SymtransError("--certificate-out needs --complete (it certifies the completeness measurement)")
    if args.model and args.verify:
        return _verify(args)
    if args.complete:
        return _complete(args)
    if args.breaking:
        return _breaking(args)
    from symtrans.group import GroupSpec
    from symtrans.group.orbits import pairing_table

    if args.model:
        from symtrans.numeric import load_model

        arch = load_model(args.model).arch
    else:
        arch = args.arch
    spec = GroupSpec.from_arch(arch)
    data = spec.to_dict()
    data["pairing"] = pairing_table()
    certs = []
    if args.certify:
        from symtrans.group.certify import certify_all

        from symtrans.progress import Progress

        with Progress(None, "group --certify", unit="certificate"):
            certs = certify_all(spec.arch)
        data["certificates"] = [c.to_dict() for c in certs]
    if args.format == "json":
        print(dumps_strict(data, indent=2, default=str))
    else:
        lines = factor_lines(data) + _pairing_lines(data["pairing"])
        if certs:
            lines += ["", "exact certificates (SymPy, small shapes):"] + ["  " + c.line() for c in certs]
        print("\n".join(lines))
    return 0 if all(c.ok for c in certs) else 1


def _verify(args: argparse.Namespace) -> int:
    from symtrans.evidence import Verdict
    from symtrans.group.numeric import layer_blocks, verify_model
    from symtrans.group.orbits import fibre_ffn_input_numeric, fibre_wo_numeric, orbit_dimension_numeric
    from symtrans.numeric import load_model

    from symtrans.progress import Progress

    with Progress(None, "group --verify", unit="check") as bar:
        w = load_model(args.model, dtype="float64")
        bar.step("model loaded")
        checks = verify_model(w, n=args.n, seed=args.seed)
        orbits = []
        for i in range(w.n_layers):
            # key/value heads as stored (one gauge per shared head); transformers' rotate_half planes
            orbits.append(orbit_dimension_numeric(layer_blocks(w.layer(i, shared_kv=True)), w.arch, layer=i,
                                                  rotary_pairs="halves"))
            bar.step(f"orbit dimension, layer {i}")
        n_fib = min(args.n, 3)
        wo = [fibre_wo_numeric(w, i, args.n) for i in range(w.n_layers)]
        bar.step("W_O fibres")
        ffn = fibre_ffn_input_numeric(w, 0, n=n_fib, seed=args.seed)
        bar.step("FFN-input fibre")
    orbit_rows = [{"layer": o.layer, "jacobian_rank": o.jacobian_rank, "formula_at_measured_ranks":
                   o.formula_at_measured_ranks, "symbolic": o.symbolic_generic, "dtype": "float64",
                   "margin_decades": o.min_margin, "verdict": (Verdict.SUPPORTED if o.agrees else Verdict.FAILS).label} for o in orbits]
    ok = all(c.verdict is Verdict.SUPPORTED for c in checks) and all(o.agrees for o in orbits) and ffn["fibre"] == ffn["expected"]
    data = {"model": w.arch.name, "weights_hash": w.weights_hash, "n": args.n,
            "checks": [c.to_dict() for c in checks], "orbits": orbit_rows,
            "fibres": {"wo": [{"layer": i, "fibre": r["fibre"], "rank": r["rank"]["rank"],
                               "condition_number": r["condition_number"], "margin_decades": r["rank"]["margin"]}
                              for i, r in enumerate(wo)],
                       "ffn_input_layer0": {k: ffn[k] for k in ("fibre", "expected", "numerically_flat_fibre",
                                                                 "expected_flat", "domain", "note", "eps_over_var")}
                       | {"n": n_fib, "margin_decades": ffn["rank"]["margin"],
                          "margin_default_cut": ffn["rank_default_cut"]["margin"]}}}
    if args.format == "json":
        print(dumps_strict(data, indent=2, default=str))
        return 0 if ok else 1
    out_text = "the last hidden state" + (" through the final norm" if w.arch.final_norm else "")
    if w.arch.attention == "causal" and not w.arch.tied_lm_head:
        out_text += " times the output head's part of the action (logits for any untied head)"
    lines = [f"numeric checks of G on {w.arch.name} (weights {w.weights_hash[:12]}, n={args.n}); "
             f"the output is {out_text}; max_rel_change = max|out' - target| / max|out|", ""]
    lines += [c.line() for c in checks]
    lines.append("")
    lines.append("tolerance: " + checks[0].tolerance_reason)
    lines += ["", "orbit dimension per layer (continuous per-layer factors; float64 Jacobian rank):"]
    for o in orbit_rows:
        lines.append(f"  layer {o['layer']}: Jacobian rank {o['jacobian_rank']:,} = formula {o['formula_at_measured_ranks']:,}"
                     f" = symbolic {o['symbolic']:,}  (margin {o['margin_decades']:.1f} decades)  {o['verdict']}")
    lines += ["", "fibres:"]
    for i, r in enumerate(wo):
        lines.append(f"  Z -> Z W_O, layer {i}: rank W_O {r['rank']['rank']}, cond {r['condition_number']:.3g}, "
                     f"fibre n(H d_v - rank) = {r['fibre']}")
    nname = "LN1" if w.arch.norm_placement == "post" else "N2"
    lines.append(f"  Y -> {nname}(X + sum_h Y^h W_O^h + b_O) [{w.arch.norm}], layer 0, n={n_fib}: fibre {ffn['fibre']} (expected "
                 f"{ffn['expected']}, margin {ffn['rank']['margin']:.2f} decades); at float64's conventional "
                 f"cut {ffn['numerically_flat_fibre']} (eps = 0 would give {ffn['expected_flat']}; "
                 f"eps/var {min(ffn['eps_over_var']):.1e}..{max(ffn['eps_over_var']):.1e})")
    print("\n".join(lines))
    return 0 if ok else 1


def _completeness_word(r: dict[str, Any]) -> str:
    """agrees, DISAGREES (a clear gap and different numbers) or INCONCLUSIVE (no clear gap, or a stuck batch)."""
    from symtrans.group.complete import MIN_GAP_DECADES

    if r["agrees"]:
        return "agrees"
    gap = r.get("condition")
    if gap and gap.get("explains"):
        return f"beyond G by exactly the named condition ({gap['dimension']} directions derived): {gap['condition']}"
    rec = r["record"]
    if rec.get("clear") is False:
        return (f"INCONCLUSIVE (the singular values have no clear gap: {rec['gap_decades']:.1f} decades, "
                f"at least {MIN_GAP_DECADES:g} needed)")
    if (r.get("relu_units") or {}).get("stuck"):
        return "INCONCLUSIVE (ReLU units stuck on the batch)"
    return "DISAGREES"


def independent_lines(data: dict[str, Any]) -> list[str]:
    """Lines of the independent route (transformers' own forward) and the verdict naming the route that disagrees.

    Examples
    --------
    >>> ind = {"sizes": {"L": 1, "d_k": 3}, "parameters": 9, "symtrans_parameters": 9, "measured_dimension": 4,
    ...        "group_dimension": 3, "model_type": "llama", "output": "logits", "casts_kept_float64": 2,
    ...        "record": {"gap_decades": 11.0, "cut_above": 0.01, "cut_below": 1e-16, "clear": True},
    ...        "agrees": False, "unread_parameters": 0}
    >>> independent_lines({"runs": [{"agrees": True}], "independent": [ind]})[-1]
    "  verdict: DISAGREES: transformers' forward measures a different dimension than G (symtrans's forward agrees)"
    """
    runs = data.get("independent")
    if runs is None:
        return []
    lines = ["  independent route: transformers' own forward for this config (model scope: token ids in; random "
             "float64 weights; its float32 casts kept at float64; unpadded input):"]
    for r in runs:
        if "unavailable" in r:
            lines.append(f"  unavailable: {r['unavailable']}")
            continue
        rec = r["record"]
        below = f"{rec['cut_below']:.0e}" if rec["cut_below"] is not None else "none"
        sizes = ", ".join(f"{k}={v}" for k, v in r["sizes"].items() if k != "L")
        same = r["parameters"] == r["symtrans_parameters"]
        word = "agrees" if r["agrees"] else ("INCONCLUSIVE (no clear gap)" if not rec["clear"] else
                                             "beyond G by the named condition" if (r.get("condition") or {}).get(
                                                 "explains") else "DISAGREES")
        lines.append(f"  L={r['sizes']['L']} ({r['model_type']}, {r['output']}; {sizes}): {r['parameters']} parameters"
                     f"{'' if same else ' != symtrans ' + str(r['symtrans_parameters'])}, measured "
                     f"{r['measured_dimension']} {'=' if r['measured_dimension'] == r['group_dimension'] else '!='} "
                     f"G {r['group_dimension']}; rank cut {rec['cut_above']:.0e} | {below} ({rec['gap_decades']:.1f} "
                     f"decades; {r['unread_parameters']} parameters never read)  {word}")
    own = all(r.get("agrees") for r in data["runs"])
    other = all(r.get("agrees") for r in runs)
    named = all(r.get("agrees") or (r.get("condition") or {}).get("explains") for r in list(data["runs"]) + runs)
    if own and other:
        verdict = "agrees: G's dimension equals both measurements"
    elif named:
        gap = next(r["condition"] for r in list(data["runs"]) + runs if r.get("condition"))
        verdict = (f"G plus the named condition equals both measurements: {gap['condition']} ({gap['scope']}; "
                   f"dimension {gap['formula']})")
    elif own:
        verdict = ("DISAGREES: transformers' forward measures a different dimension than G (symtrans's forward "
                   "agrees)" if all("unavailable" not in r for r in runs) else
                   "UNCHECKED: symtrans's forward agrees, transformers' forward could not be measured")
    elif other:
        verdict = "DISAGREES: symtrans's forward measures a different dimension than G (transformers' forward agrees)"
    else:
        verdict = "DISAGREES: both routes differ from G"
    return lines + [f"  verdict: {verdict}"]


def completeness_lines(data: dict[str, Any]) -> list[str]:
    """Text lines of a ``--complete`` run: scope and instance, one line per run, near-symmetries, unexplained.

    Examples
    --------
    >>> run = {"sizes": {"L": 1, "n": 5}, "parameters": 10, "measured_dimension": 3, "group_dimension": 3,
    ...        "tangent_rank": 3, "record": {"gap_decades": 9.5, "cut_above": 0.01, "cut_below": 1e-16},
    ...        "agrees": True, "unexplained": [], "near_symmetries": [], "near_null": 0}
    >>> completeness_lines({"scope": "layers", "arch": "x", "runs": [run]})[-1]
    '  L=1: 10 parameters, measured 3 = G 3 (tangent rank 3); rank cut 1e-02 | 1e-16 (9.5 decades)  agrees'
    """
    from symtrans.group.spec import SCOPE_TEXT

    plan = data.get("plan", {})
    lines = [f"measured completeness of G on {data['arch']} (scope {data['scope']}: {SCOPE_TEXT[data['scope']]}; "
             "float64 Jacobian null space, random weights and inputs):"]
    if plan.get("mode") == "itself":
        lines.append(f"  instance: the configuration itself ({plan['bound']})")
    elif plan:
        lines.append(f"  instance: reduced, the configuration is too large to measure as given ({plan['bound']})")
        lines.append("  reduced: " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in plan["reduced"].items()))
        lines.append("  kept:    " + ", ".join(plan["kept"]))
    if plan.get("eps") and plan["eps"]["measured"] != plan["eps"]["own"]:
        lines.append(f"  eps:     {plan['eps']['measured']:g}, {plan['eps']['why']}")
    first = data["runs"][0]["sizes"]
    lines.append("  sizes: " + ", ".join(f"{k}={v}" for k, v in first.items() if k != "L"))
    for r in data["runs"]:
        rec = r["record"]
        below = f"{rec['cut_below']:.0e}" if rec["cut_below"] is not None else "none"
        k = r.get("near_null", 0)
        expected = r["group_dimension"] + k
        near = f" + {k} near-symmetr{'y' if k == 1 else 'ies'}" if k else ""
        lines.append(f"  L={r['sizes']['L']}: {r['parameters']} parameters, measured {r['measured_dimension']} "
                     f"{'=' if r['measured_dimension'] == expected else '!='} G {r['group_dimension']}{near} "
                     f"(tangent rank {r['tangent_rank']}); rank cut {rec['cut_above']:.0e} | {below} "
                     f"({rec['gap_decades']:.1f} decades)  {_completeness_word(r)}")
        relu = r.get("relu_units")
        if relu and relu["stuck"]:
            lines.append(f"      inconclusive batch: after {relu['draws']} weight draws some ReLU units never switch "
                         f"({'; '.join(relu['stuck'][:3])}): those add directions of the batch, not of the function")
        elif relu and relu["draws"] > 1:
            lines.append(f"      weights drawn {relu['draws']} times until every ReLU unit switched on the batch")
        for u in r["unexplained"]:
            moves = ", ".join(f"{m['tensor']} {m['share']:.2f}" for m in u["moves"])
            lines.append(f"      unexplained direction moves: {moves}")
    lines += independent_lines(data)
    last = data["runs"][-1]
    if last.get("near_symmetries"):
        eps = last["sizes"]["eps"]
        lines += ["", f"approximate factors (not in G): residual segments between two norms scaled by c; exact "
                  f"symmetries of (weights, eps) with the closing norm's eps rescaled to c^2 eps, broken at eps = "
                  f"{eps:g} only at relative order eps (L={last['sizes']['L']}):"]
        for n in last["near_symmetries"]:
            null = "numerically null (below the cut)" if n["below_cut"] else "above the cut"
            lines.append(f"  {n['name']:<30} violation measured {n['measured_violation']:.2e}, from the eps identity "
                         f"{n['derived_violation']:.2e}; local bound eps/var_min {n['local_bound']:.1e}; {null}")
            lines.append(f"      {n['acts']}")
        if last.get("near_null"):
            lines.append(f"  the measured null space is G ({last['group_dimension']}) plus these {last['near_null']} "
                         "directions: at this eps they sit at rounding level; at eps = 0 they would be exact")
    return lines


def independent_run(arch: Any, inst: Any, seed: int) -> dict[str, Any]:
    """The independent route on one instance (:mod:`symtrans.group.independent`), or why it could not run.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> from symtrans.group.complete import small_arch
    >>> independent_run(get_arch("symbolic"), small_arch("bert-base"), 0)["unavailable"][:40]
    'symbolic: no transformers model_type for'
    """
    try:
        from symtrans.group.independent import measure_transformers

        return measure_transformers(arch, inst, seed=seed)
    except ImportError as err:
        return {"agrees": False, "unavailable": f"transformers is not installed ({err})"}
    except SymtransError as err:
        return {"agrees": False, "unavailable": str(err)}


def _complete(args: argparse.Namespace) -> int:
    from symtrans.group import GroupSpec
    from symtrans.group.complete import measure, plan
    from symtrans.progress import Progress

    spec = GroupSpec.from_arch(args.arch)
    from symtrans.args import parse_layer_counts

    counts = parse_layer_counts(args.layers or "1,2,3")
    cert = None
    if args.certificate_out is not None:  # first: a structure the statement does not cover is refused before measuring
        from symtrans.certify.completeness import completeness_certificate

        from symtrans.certify.completeness import certificate_instance

        with Progress(None, "group --certificate-out", unit="step"):
            cert = completeness_certificate(spec.arch, layers=min(counts), seed=args.seed)
        cert_why = certificate_instance(spec.arch, min(counts))[1]
    the_plan = plan(spec.arch, args.scope, counts, args.seed)
    runs = []
    independent: list[dict[str, Any]] = []
    with Progress(2 * len(the_plan["instances"]), "group --complete", unit="measurement") as bar:
        for inst in the_plan["instances"]:
            bar.show(f"L={inst.L}")
            runs.append(measure(spec.arch, instance=inst, scope=args.scope, seed=args.seed))
            bar.step(f"L={inst.L}")
            bar.show(f"L={inst.L}, transformers' forward")
            independent.append(independent_run(spec.arch, inst, args.seed))
            bar.step(f"L={inst.L}, transformers' forward")
    last = runs[-1]
    keys = ("measured_dimension", "group_dimension", "sizes", "record", "unexplained", "near_symmetries",
            "near_null", "explained_dimension")
    shown_plan = {k: v for k, v in the_plan.items() if k != "instances"}
    shown_plan["instances"] = [inst.name for inst in the_plan["instances"]]
    own_ok = all(r["agrees"] for r in runs)
    other_ok = all(r.get("agrees") for r in independent)
    completeness = {"scope": args.scope, "arch": spec.arch.name, **{k: last[k] for k in keys},
                    "agrees": own_ok and other_ok, "plan": shown_plan, "runs": runs, "independent": independent,
                    "routes": {"symtrans": own_ok, "transformers": other_ok}}
    if cert is not None:
        completeness["certificate"] = rec = _write_certificate(cert, args.certificate_out)
        rec["instance_differs"] = cert_why
    if args.format == "json":
        data = spec.to_dict()
        data["completeness"] = completeness
        print(json.dumps(data, indent=2, default=str))
    else:
        print("\n".join(completeness_lines(completeness)))
        if cert is not None:
            print("\n" + rec["line"])
            for why in rec["instance_differs"]:
                print(f"  certificate instance: {why}")
    ok = cert is None or completeness["certificate"]["valid"]
    return 0 if completeness["agrees"] and ok else 1


def _breaking(args: argparse.Namespace) -> int:
    from symtrans.args import parse_layer_counts
    from symtrans.group.breaking import breaking, table_lines

    t = breaking(args.arch, layers=parse_layer_counts(args.layers or "1,2"), scope=args.scope, seed=args.seed)
    if args.format == "json":
        print(dumps_strict(t, indent=2, default=str))
    else:
        print("\n".join(table_lines(t)))
    ok = all(r["consistent"] for row in t["components"] for r in row.get("measured", []))
    return 0 if ok else 1


def _write_certificate(cert: dict[str, Any], path: str) -> dict[str, Any]:
    """Write the completeness certificate to ``path`` and re-check it with the independent checker: its record."""
    import time
    from pathlib import Path

    from symtrans.checker.check import verify_certificate
    from symtrans.outdir import write_file

    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SymtransError(f"--certificate-out {path}: cannot create its directory ({err.strerror})") from None
    write_file(target.parent, target.name, (json.dumps(cert, indent=1) + "\n").encode(), "certificate")
    start = time.perf_counter()
    ok, why = verify_certificate(cert)
    seconds = time.perf_counter() - start
    from symtrans.checker.statements import completeness_family

    a, inst = cert["asserts"], cert["witness"]["instance"]
    line = (f"certificate {path}: dim(stabiliser) <= dim ker J <= {a['stabiliser_dimension_at_most']} = dim G, "
            f"P = {a['parameters']}, at one rational instance ({completeness_family(inst)}, L = {inst['L']}, "
            f"d_model = {inst['d_model']}, eps = {inst['eps']}); "
            f"independent checker: {'valid' if ok else 'INVALID: ' + why} ({seconds:.1f} s); re-check with "
            f"`symtrans verify {path}`")
    return {"file": str(target), "valid": ok, "reason": why, "seconds": seconds, "line": line}
