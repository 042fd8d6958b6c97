"""Near-symmetries: residual segments between two norms, scaled by c, exact only as the norm epsilon goes to 0.

A *segment* is a stretch of the residual stream that is opened by a norm (or
by the embedding tables) and closed by the next norm(s). Scale it by c > 0:
the opening norm's gain and bias (or the embedding tables) and every write into
the stretch (``W_O``, ``b_O``, ``W_out``, ``b_out``) by c, every reader of the
stretch (``W_Q``, ``W_K``, ``W_V``; ``W_in``, ``W_gate``) by 1/c. Every hidden
value inside the segment is then unchanged except the residual, which is c
times larger, and the closing norm receives c z instead of z:

    Norm_eps(c z) = Norm_{eps / c^2}(z)

(LayerNorm and RMSNorm alike: ``(c z) / sqrt(c^2 var + eps) = z / sqrt(var
+ eps / c^2)``). So the scaling is an exact symmetry of the pair (weights,
eps) with the closing norms' eps rescaled to ``c^2 eps``, and of the weights
alone only at eps = 0 (which G does not model: it is refused). At eps > 0 it
is an *approximate factor*: differentiating the identity at c = 1 gives the
first-order violation exactly,

    J_theta t = -2 sum_k eps_k d f / d eps_k          (k: the closing norms),

and at the closing norm itself the relative change of each output row per
unit log c is ``eps / (var + eps)`` <= ``eps / var_min``. Both are linear in
eps, so at BERT's eps = 1e-12 these directions sit at rounding level and a
float64 Jacobian counts them as null: the measured null space of a post-LN
model is G plus 2L - 1 such directions on the ``layers`` scope (2L + 1 with an
embedding norm on ``model``: the tables themselves, then the stretch after the
norm), one on a pre-norm ``model`` scope (the whole residual stream, opened by
the embeddings, closed by every norm; with a tied head the final norm's gain
and bias take 1/c), none on a pre-norm ``layers`` scope (its input is fixed).

Examples
--------
>>> from symtrans.group.complete import small_arch
>>> [s["name"] for s in segments(small_arch("bert-base", layers=2), "layers")]
['ffn-segment-scaling[0]', 'attention-segment-scaling[1]', 'ffn-segment-scaling[1]']
>>> segments(small_arch("gpt2", layers=2), "layers")
[]
"""

from __future__ import annotations

from typing import Any

from symtrans.arch import Architecture

__all__ = ["segments", "segment_tangent", "eps_derivative", "near_record"]

_ATTN_READERS = ("W_Q", "W_K", "W_V")
_ATTN_WRITERS = ("W_O", "b_O")
_FFN_READERS = ("W_in", "W_gate")
_FFN_WRITERS = ("W_out", "b_out")


def segments(arch: Architecture, scope: str, layers: int | None = None) -> list[dict[str, Any]]:
    """The residual segments between two norms of ``arch`` on ``scope``: their scalings, as coefficient tables.

    Each segment is ``{"name", "coefficients": {(layer or None, tensor): +1 | -1}, "closing": [norm keys],
    "what"}``; +1 means the tensor scales by c (its tangent is the tensor itself), -1 by 1/c. A norm key is
    ``(layer, "ln1")``, ``(layer, "ln2")``, ``(None, "emb_ln")`` or ``(None, "final_ln")``.

    Examples
    --------
    >>> from symtrans.group.complete import small_arch
    >>> s = segments(small_arch("bert-base", layers=1), "model")
    >>> [x["name"] for x in s], s[1]["closing"]
    (['embedding-scaling', 'attention-segment-scaling[0]', 'ffn-segment-scaling[0]'], [(0, 'ln1')])
    """
    L = int(arch.L if layers is None else layers)
    out: list[dict[str, Any]] = []
    tables = [(None, t) for t in ("word", "pos", "type")]
    # the embedding sum scales with its tables only if every summand is a parameter (not a sinusoidal table)
    scalable = scope == "model" and arch.positional != "sinusoidal"
    if arch.norm_placement == "post":
        if scalable and arch.embedding_norm:
            out.append({"name": "embedding-scaling", "coefficients": {k: 1 for k in tables},
                        "closing": [(None, "emb_ln")],
                        "what": "embedding tables -> the embedding norm: word, position, type tables x c"})
        for l in range(L):
            if l > 0 or scalable:
                opener = ([(l - 1, "ln2_w"), (l - 1, "ln2_b")] if l > 0 else
                          [(None, "emb_ln_w"), (None, "emb_ln_b")] if arch.embedding_norm else tables)
                coeff = {k: 1 for k in opener}
                coeff.update({(l, t): -1 for t in _ATTN_READERS})
                coeff.update({(l, t): 1 for t in _ATTN_WRITERS})
                out.append({"name": f"attention-segment-scaling[{l}]", "coefficients": coeff, "closing": [(l, "ln1")],
                            "what": ("LN2 of layer %d" % (l - 1) if l else "the embedding norm" if arch.embedding_norm
                                     else "the embedding tables")
                            + f" -> LN1 of layer {l}: opener's gain and bias x c, W_Q, W_K, W_V / c, W_O, b_O x c"})
            coeff = {(l, "ln1_w"): 1, (l, "ln1_b"): 1}
            coeff.update({(l, t): -1 for t in _FFN_READERS})
            coeff.update({(l, t): 1 for t in _FFN_WRITERS})
            out.append({"name": f"ffn-segment-scaling[{l}]", "coefficients": coeff, "closing": [(l, "ln2")],
                        "what": f"LN1 -> LN2 of layer {l}: LN1's gain and bias x c, W_in (W_gate) / c, W_out, b_out x c"})
        return out
    # pre-norm: the residual stream is one segment, opened by the embeddings and read only by norms
    tied = arch.attention == "causal" and arch.tied_lm_head
    if arch.post_norms:  # each post-norm closes the segment of its sub-block's output (W_O, W_out x c)
        for l in range(L):
            out.append({"name": f"post-attention-input-scaling[{l}]", "coefficients": {(l, "W_O"): 1, (l, "b_O"): 1},
                        "closing": [(l, "ln1_post")], "what": f"W_O (and b_O) of layer {l} x c -> its post-norm"})
            out.append({"name": f"post-ffn-input-scaling[{l}]", "coefficients": {(l, "W_out"): 1, (l, "b_out"): 1},
                        "closing": [(l, "ln2_post")], "what": f"W_out (and b_out) of layer {l} x c -> its post-norm"})
    if not scalable or (tied and not arch.final_norm) or not arch.pre_norms:  # OLMo 2: the blocks read the stream
        return out
    writers = ("ln1_post_w", "ln2_post_w") if arch.post_norms else _ATTN_WRITERS + _FFN_WRITERS
    coeff: dict[tuple[Any, str], int] = {(None, t): 1 for t in ("word", "pos", "type")}
    for l in range(L):
        coeff.update({(l, t): 1 for t in writers})
    what = "embeddings -> every norm: word, position, type tables and every " + ", ".join(writers) + " x c"
    if tied:  # the word table is also the head: the final norm's gain and bias / c give the logits back
        coeff.update({(None, "final_ln_w"): -1, (None, "final_ln_b"): -1})
        what += "; the final norm's gain and bias / c (the tied head reads the scaled word table)"
    closing = [(l, n) for l in range(L) for n in ("ln1", "ln2")] + ([(None, "final_ln")] if arch.final_norm else [])
    out.append({"name": "residual-stream-scaling", "coefficients": coeff, "closing": closing, "what": what})
    return out


def segment_tangent(segment: dict[str, Any], params: dict[str, Any], paths: list[tuple[Any, ...]]) -> Any:
    """The segment scaling's tangent at ``params`` in the flat parameter order ``paths`` (c = 1 + s, d/ds at 0).

    Examples
    --------
    >>> import torch
    >>> from symtrans.group.complete import small_arch, random_instance, _entries
    >>> a = small_arch("bert-base")
    >>> p = random_instance(a, "layers")
    >>> paths = [q for q, _ in _entries(p, "layers")]
    >>> t = segment_tangent(segments(a, "layers")[0], p, paths)
    >>> t.shape[0] == sum(v.numel() for _, v in _entries(p, "layers"))
    True
    """
    import torch

    from symtrans.group.params import param_at

    pieces = []
    for path in paths:
        value = param_at(params, path)
        key = (path[1], path[2]) if path[0] == "layers" else (None, path[0])
        c = segment["coefficients"].get(key, 0)
        pieces.append((c * value).reshape(-1) if c else torch.zeros(value.numel(), dtype=value.dtype))
    return torch.cat(pieces)


def _with_eps(params: dict[str, Any], eps: dict[tuple[Any, str], Any]) -> dict[str, Any]:
    out = dict(params)
    out["layers"] = [dict(lp) for lp in params["layers"]]
    for (layer, norm), value in eps.items():
        if layer is None:
            out[f"{norm}_eps"] = value
        else:
            out["layers"][layer][f"{norm}_eps"] = value
    return out


def eps_derivative(segment: dict[str, Any], outputs_at: Any, params: dict[str, Any], eps: float) -> Any:
    """``-2 sum_k eps d f/d eps_k`` over the segment's closing norms: the first-order violation the identity predicts.

    ``outputs_at(params)`` is the scope's flattened output on the measurement batch.

    Examples
    --------
    >>> import torch
    >>> f = lambda p: p["layers"][0]["ln1_eps"].reshape(1) * 3.0
    >>> eps_derivative({"closing": [(0, "ln1")]}, f, {"layers": [{}]}, 1e-3)
    tensor([-0.0060], dtype=torch.float64)
    """
    import torch

    from symtrans.numeric.autodiff import directional_derivative

    keys = list(segment["closing"])
    base = tuple(torch.tensor(float(eps), dtype=torch.float64) for _ in keys)
    direction = tuple(torch.tensor(-2.0 * float(eps), dtype=torch.float64) for _ in keys)

    def f(*values: Any) -> Any:
        return outputs_at(_with_eps(params, dict(zip(keys, values))))

    return directional_derivative(f, base, direction)


def near_record(segment: dict[str, Any], J: Any, t: Any, predicted: Any, sigma_max: float, eps: float,
                var_min: float, cut: float | None) -> dict[str, Any]:
    """One approximate factor's record: measured violation beside the value and bound derived in eps.

    ``measured`` is ``|J t| / (sigma_max |t|)`` (on the scale of the rank cut's relative singular values),
    ``derived`` is ``|2 sum eps df/deps| / (sigma_max |t|)`` (the same quantity from the eps identity, a second
    computation), ``local_bound`` is ``eps / var_min``: the relative change per unit log c of the closing norm's
    output rows. ``below_cut``: the direction is numerically null at this eps.

    Examples
    --------
    >>> import torch
    >>> J = torch.diag(torch.tensor([1e-13, 1.0], dtype=torch.float64))
    >>> t = torch.tensor([1.0, 0.0], dtype=torch.float64)
    >>> r = near_record({"name": "s", "what": "w"}, J, t, J @ t, 1.0, 1e-12, 0.5, 1e-9)
    >>> r["below_cut"], r["agrees_with_identity"], r["local_bound"]
    (True, True, 2e-12)
    >>> near_record({"name": "s", "what": "w"}, J, t, 2 * J @ t, 1.0, 1e-12, 0.5, 1e-9)["agrees_with_identity"]
    False
    """
    tn = float(t.norm())
    measured = float((J @ t).norm()) / (sigma_max * tn)
    derived = float(predicted.norm()) / (sigma_max * tn)
    scale = max(measured, derived, 1e-300)
    return {"name": segment["name"], "acts": segment["what"], "eps": eps,
            "measured_violation": measured, "derived_violation": derived,
            "agrees_with_identity": abs(measured - derived) <= 1e-6 * scale + 1e-15,
            "local_bound": eps / var_min if var_min > 0 else float("inf"),
            "below_cut": cut is not None and measured < cut,
            "exact_for": "the pair (weights, eps) with the closing norm's eps rescaled to c^2 eps"}
