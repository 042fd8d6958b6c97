"""Certified completeness of G: a certificate file that dim(stabiliser) <= dim G at one rational instance.

``symtrans group --arch X --complete --certificate-out FILE`` writes it; ``symtrans verify FILE`` re-checks it
with the independent checker (:mod:`symtrans.checker.check`, method ``jacobian-rank``), which has its own
forward pass in Arb ball arithmetic. The producer here:

1. takes the instance ``--complete`` measures (:func:`symtrans.group.complete.plan`: the configuration itself,
   or the reduction that keeps its structure) on the ``layers`` scope at the smallest layer count, reduced to
   :func:`~symtrans.group.complete.small_arch` sizes where the configuration itself has more parameters than
   the statement covers, with eps raised to 1e-2 where near-symmetries exist (post-LN: at eps = 1e-12 the
   segment scalings are null to float64, so float64 could not choose the minor);
2. draws seeded rational parameters (multiples of 1/16; norm gains in {1/2, 1, 2}, so that G's tangent
   vectors, rational functions of the weights with 1/gain in them, are computed exactly in float64) and
   rational inputs (multiples of 1/4), written inline;
3. computes G's tangent vectors (the derivative of each factor's action at the identity, the tag table of
   :mod:`symtrans.group.spec`) to check that they span dim G (they are not written: the checker derives its own);
4. differentiates the batch map in float64 and chooses a (P - k)-square minor of its Jacobian by pivoted
   Gram-Schmidt (columns, then rows of the chosen columns).

Nothing here decides the verdict: the checker takes k = dim G from G's formula, recomputes the minor's
determinant in balls, derives G's tangent vectors itself and checks their exact rank and J v.

Examples
--------
>>> c = completeness_certificate("llama2-7b")
>>> c["statement_id"], c["asserts"]["parameters"], c["asserts"]["group_dimension"]
('framework-9/completeness', 168, 27)
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError

__all__ = ["certificate_instance", "completeness_certificate", "uncovered_features", "PRECISION"]

#: ball precision (bits) of the certificates written
PRECISION = 128


def certificate_instance(arch: Architecture | str, layers: int = 1) -> tuple[Architecture, list[str]]:
    """The architecture a completeness certificate is written for, with the reasons it differs from ``--complete``'s.

    Examples
    --------
    >>> a, why = certificate_instance("bert-base")
    >>> a.d_model, a.L, a.ln_eps, why[0].split(":")[0]
    (6, 1, 0.01, 'eps raised from 1e-12 to 0.01')
    """
    from symtrans.checker.statements import COMPLETENESS_MAX_PARAMETERS
    from symtrans.group.complete import MIN_EPS, parameter_count, plan, small_arch
    from symtrans.group.near import segments

    a = get_arch(arch)
    p = plan(a, "layers", (layers,))
    inst, why = p["instances"][0], []
    if p["mode"] == "itself" and parameter_count(inst, "layers") > COMPLETENESS_MAX_PARAMETERS:
        inst = dataclasses.replace(small_arch(a, layers), ln_eps=inst.ln_eps)
        why.append(f"reduced to the sizes of --complete's reductions: the configuration itself has more than "
                   f"{COMPLETENESS_MAX_PARAMETERS} parameters on the layers scope")
    if parameter_count(inst, "layers") > COMPLETENESS_MAX_PARAMETERS:
        raise SymtransError(f"{a.name}: the instance at L = {layers} has {parameter_count(inst, 'layers')} parameters "
                            f"on the layers scope, a certificate covers at most {COMPLETENESS_MAX_PARAMETERS} (try "
                            "--layers 1)")
    if segments(inst, "layers") and float(inst.ln_eps) < MIN_EPS:
        why.insert(0, f"eps raised from {float(inst.ln_eps):g} to {MIN_EPS:g}: the {len(segments(inst, 'layers'))} "
                      "near-symmetries would be null to float64, which chooses the minor; the certificate is for "
                      "this eps only")
        inst = dataclasses.replace(inst, ln_eps=MIN_EPS)
    if a.rope_layers and not all(a.rope_layers) and (not inst.rope_layers or all(inst.rope_layers)):
        why.append("the instance's layers are rotary ones: the statement does not cover this model's NoPE layers "
                   "(no_rope_layers; --layers 2 includes one and is refused)")
    return inst, why


def uncovered_features(a: Architecture) -> list[str]:
    """The features of ``a`` the completeness statement cannot express (its instance has no field for them).

    The checker's forward (:mod:`symtrans.checker.check`) knows only the
    fields of :data:`~symtrans.checker.statements.INSTANCE_FIELDS`; a feature
    outside them would be certified for a different model, so the producer
    refuses it by name (Qwen3's and OLMo 2's QK-norm, Gemma's post-norms and
    (1 + w) gains, OLMo 2's missing pre-norms, a query_pre_attn_scalar,
    soft-capped scores, per-layer attention types, SmolLM3's NoPE layers).

    Examples
    --------
    >>> import dataclasses
    >>> uncovered_features(get_arch("llama2-7b"))
    []
    >>> uncovered_features(dataclasses.replace(get_arch("llama2-7b"), qk_norm=True, post_norms=True))
    ["QK-norm (RMSNorm on each head's queries and keys)", "post-norms (a norm on each sub-block's output)"]
    """
    out = []
    if a.qk_norm:
        out.append("QK-norm (RMSNorm on " + ("all heads' queries and keys at once)" if a.qk_norm_full
                                             else "each head's queries and keys)"))
    if a.post_norms:
        out.append("post-norms (a norm on each sub-block's output)")
    if not a.pre_norms:
        out.append("a layer without pre-norms (its sub-blocks read the raw stream)")
    if a.gain_offset:
        out.append("(1 + w) norm gains")
    if a.attn_scalar is not None:
        out.append(f"scores scaled by query_pre_attn_scalar^-1/2 ({a.attn_scalar:g}) instead of d_k^-1/2")
    if a.attn_softcap:
        out.append("soft-capped attention scores")
    if len(set(a.layer_types)) > 1 or len(set(dict(a.rope_bases).values())) > 1:
        out.append("per-layer attention types (sliding and full layers, their own rotary bases)")
    if a.rope_layers and not all(a.rope_layers):
        out.append("NoPE layers (SmolLM3's no_rope_layers: rotary positions skipped on some layers)")
    if a.ablated:
        out.append(f"ablated components ({', '.join(a.ablated)})")
    return out


def _pivots(A: Any, r: int) -> list[int]:
    """Indices of ``r`` columns of ``A`` chosen by Gram-Schmidt with column pivoting (the largest residual first)."""
    import numpy as np

    R = np.array(A, dtype=np.float64, copy=True)
    chosen: list[int] = []
    for _ in range(r):
        norms = (R * R).sum(axis=0)
        norms[chosen] = -1.0
        j = int(norms.argmax())
        if norms[j] <= 0:
            raise SymtransError(f"the Jacobian has rank {len(chosen)} < {r} at this point: no minor of size {r}")
        q = R[:, j] / math.sqrt(norms[j])
        R -= np.outer(q, q @ R)
        chosen.append(j)
    return chosen


def _exact(x: float) -> str:
    return str(Fraction(x))


def completeness_certificate(arch: Architecture | str, *, layers: int = 1, seed: int = 0,
                             precision: int = PRECISION) -> dict[str, Any]:
    """A ``framework-9/completeness`` certificate (a dict, sealed) for the instance of :func:`certificate_instance`.

    Raises :class:`SymtransError` (one line) for a structure the statement does not cover, and where the point
    drawn from ``seed`` is not usable (inexact tangents, a rank-deficient Jacobian).

    Examples
    --------
    >>> import dataclasses
    >>> completeness_certificate(dataclasses.replace(get_arch("bert-base"), activation="relu"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: bert-base: not covered: certified completeness covers post-LN BERT layers ...
    """
    import torch
    from torch.func import jacfwd, vmap

    from symtrans.certify.seal import certificate
    from symtrans.checker.statements import COMPLETENESS, INSTANCE_FIELDS, Dims, completeness_refusal, \
        completeness_tensors
    from symtrans.group.complete import _entries, _flatten, _label, _tangents, _unflatten, random_instance, \
        rank_record, scope_forward
    from symtrans.group.spec import GroupSpec
    from symtrans.progress import tick

    a0 = get_arch(arch)
    if a0.parallel_residual or a0.partial_rotary_factor != 1:  # the checker's own forward has neither
        raise SymtransError(f"{a0.name}: not covered: the certificate's statement and its checker do not model "
                            + ("a parallel residual" if a0.parallel_residual else "partial rotary positions")
                            + " (GPT-NeoX); group --complete measures it")
    a, _ = certificate_instance(a0, layers)
    missing = uncovered_features(a)
    if missing:  # before the statement's own structure check: name every feature its instance cannot express
        raise SymtransError(f"{a0.name}: not covered: the completeness checker's forward has no "
                            + "; no ".join(missing) + " (certify a structure it covers, or use --complete's "
                            "measurement)")
    n, d = int(a.n), int(a.d_model)
    inst: dict[str, Any] = {
        "norm_placement": a.norm_placement, "norm": a.norm, "activation": a.activation,
        "ffn": a.ffn, "attention": a.attention, "positional": "rotary" if a.positional == "rotary" else "none",
        "bias": bool(a.bias), "qkv_bias": bool(a.qkv_bias), "final_norm": bool(a.final_norm),
        "window": a.sliding_window, "L": int(a.L), "n": n, "H": int(a.H), "H_kv": int(a.H_kv), "d_model": d,
        "d_k": int(a.d_k), "d_v": int(a.d_v), "d_ff": int(a.d_ff), "batch": 0, "eps": str(Fraction(repr(a.ln_eps)))}
    why = completeness_refusal(inst)
    if why:
        raise SymtransError(f"{a0.name}: {why}")
    # seeded rational parameters: weights on the 1/16 grid, norm gains in {1/2, 1, 2} (1/gain stays dyadic)
    params = random_instance(a, "layers", seed)
    gen = torch.Generator().manual_seed(seed + 303)

    def rational(name: str, t: Any) -> Any:
        if name.endswith("_w") and "ln" in name:
            return 2.0 ** torch.randint(-1, 2, t.shape, generator=gen).to(torch.float64)
        return torch.round(t * 16) / 16

    params["layers"] = [{k: ([rational(k, b) for b in v] if isinstance(v, list) else
                             None if v is None else rational(k, v)) for k, v in lp.items()} for lp in params["layers"]]
    for k in ("final_ln_w", "final_ln_b"):
        if params.get(k) is not None:
            params[k] = rational(k, params[k])
    entries = _entries(params, "layers")
    paths = [p for p, _ in entries]
    # the checker numbers the parameters in the registry's order: map each of its tensors to the group's paths
    by_label = {_label(p): t for p, t in entries}
    tensors = completeness_tensors({**inst, "batch": 1})
    if sorted(by_label) != sorted(name for name, _ in tensors) or any(
            tuple(by_label[name].shape) != shape for name, shape in tensors):
        raise SymtransError(f"{a0.name}: the group's parameter tensors differ from the statement's")
    P = sum(r * c for _, (r, c) in tensors)
    offsets, pos = {}, 0
    for p, t in entries:
        offsets[_label(p)] = pos
        pos += t.numel()
    order = [offsets[name] + i for name, (r, c) in tensors for i in range(r * c)]
    batch = max(4, -(-3 * P // (2 * n * d)))  # 1.5 P Jacobian rows, as --complete
    inst["batch"] = batch
    X = torch.round(torch.randn(batch, n, d, generator=gen, dtype=torch.float64) * 4) / 4

    def outputs(theta: Any) -> Any:
        p = _unflatten(theta, params, paths)
        return vmap(lambda x: scope_forward(p, {"X": x}, a, "layers"))(X).reshape(-1)

    tick(f"certificate: Jacobian {batch * n * d} x {P} at the rational point", 0)
    J = jacfwd(outputs)(_flatten(params, paths))[:, order].numpy()
    spec = GroupSpec.from_arch(a)
    T, _ = _tangents(spec, params, paths, "layers")
    T = T[order].numpy()
    # a basis of G's tangent space: the tag table's columns can be dependent (d_v = d_model: the attention-input
    # hyperplane meets the other factors), so keep independent columns, in the table's order
    t_rank = rank_record(torch.linalg.svdvals(torch.from_numpy(T)))["rank"] if T.shape[1] else 0
    keep = sorted(_pivots(T, t_rank))
    k = len(keep)
    if k != int(spec.scope_dimension("layers")):
        raise SymtransError(f"{a0.name}: G's tangent vectors span {k} dimensions, its formula says "
                            f"{spec.scope_dimension('layers')}")
    r = P - k
    rec = rank_record(torch.linalg.svdvals(torch.from_numpy(J)))
    if rec["rank"] != r or not rec["clear"]:
        raise SymtransError(f"{a0.name}: at the rational point of seed {seed} the float64 Jacobian has rank "
                            f"{rec['rank']} ({rec['gap_decades']:.1f}-decade gap), not P - dim G = {P} - {k} = {r}: "
                            "the point is not generic (try another --seed) or G misses directions (see --complete)")
    tick(f"certificate: choosing a {r} x {r} minor", 0)
    cols = _pivots(J, r)
    rows = _pivots(J[:, cols].T, r)
    flat = _flatten(params, paths)
    witness = {"method": "jacobian-rank", "precision": precision, "instance": inst,
               "parameters": {name: [[_exact(float(flat[offsets[name] + i * c + j])) for j in range(c)]
                                     for i in range(rr)] for name, (rr, c) in tensors},
               "inputs": [[[_exact(float(x)) for x in row] for row in Xb] for Xb in X.tolist()],
               "minor": {"rows": sorted(rows), "cols": sorted(cols)}}
    # the tangent vectors and their factors stay here: the checker derives G's tangents itself
    asserts = {"parameters": P, "group_dimension": k, "jacobian_rank_at_least": r, "stabiliser_dimension_at_most": k}
    return certificate(COMPLETENESS, Dims(instance=tuple((f, inst[f]) for f in INSTANCE_FIELDS)), asserts, witness,
                       None)
