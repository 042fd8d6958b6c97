"""The independent route of ``group --complete``: the stabiliser measured on transformers' own forward.

:mod:`symtrans.group.complete` differentiates symtrans's re-implementation of
a model (:mod:`symtrans.group.forward`), built from symtrans's reading of the
config; a config field that reading misses would be missed by the forward too,
and the two would agree on the wrong function. This module builds the model
with ``transformers`` itself, from the user's config (the raw ``config.json``
fields as transformers reads them; a preset is written out as the config of its
family), with only the *sizes* replaced by those of the measured instance (the
layers, heads, widths, vocabulary and learned position rows of the plan; list
fields with one entry per layer keep the first layer of each distinct kind, in
order of appearance, cycled), random float64 weights, and differentiates the
map parameters -> outputs (token ids in; the last hidden state of an encoder,
the logits of a causal language model) with ``torch.func.jacrev``. The nullity
of that Jacobian, at the rank cut of :func:`symtrans.precision.gap_rank`, is
compared with G's dimension on the ``model`` scope at the same sizes.

Two conventions, stated in the record:

* transformers casts to float32 inside its norms and its eager softmax
  (``x.to(torch.float32)``, ``softmax(..., dtype=torch.float32)``); on a float64
  model that is a *down*-cast, which would put the Jacobian's null space at
  float32 rounding. :class:`KeepFloat64` turns those casts off while the
  forward runs (a float64 tensor asked to become float32 stays float64);
* unpadded input: the pad id is not drawn where the model's forward treats it
  specially (RoBERTa numbers positions from ``padding_idx``: a pad token would
  read position row ``padding_idx``), so that word row is never read and stays
  in the parameters as unread rows: G counts them (the ``unread-pad-row``
  factor), as symtrans's own route does.

Examples
--------
>>> from symtrans.group.complete import small_arch
>>> hf_config("roberta-base", small_arch("roberta-base", 1)).max_position_embeddings  # 5 positions + 2 unused rows
7
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from symtrans.arch import Architecture, get_arch
from symtrans.errors import SymtransError
from symtrans.precision import ROUNDING_FLOOR

__all__ = ["KeepFloat64", "hf_config", "measure_transformers", "PRESET_MODEL_TYPES"]

#: the transformers ``model_type`` a preset's family is written as
PRESET_MODEL_TYPES = {"bert": "bert", "roberta": "roberta", "distilbert": "distilbert", "gpt2": "gpt2",
                      "llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "gemma3": "gemma3_text"}
#: the smallest norm epsilon of the measured transformers model (near-symmetries, see complete.MIN_EPS)
_EPS_KEYS = ("layer_norm_eps", "rms_norm_eps", "layer_norm_epsilon", "norm_eps")


class KeepFloat64:
    """A torch function mode under which a float64 tensor is never cast down to float32 (transformers' upcasts).

    ``x.to(torch.float32)``, ``x.float()`` and ``softmax(x, dtype=torch.float32)``
    on a float64 ``x`` keep float64; everything else runs unchanged.
    ``casts`` counts the casts it kept (the record reports it).

    Examples
    --------
    >>> import torch
    >>> with KeepFloat64() as keep:
    ...     y = torch.ones(2, dtype=torch.float64).to(torch.float32)
    >>> y.dtype, keep.casts
    (torch.float64, 1)
    """

    def __init__(self) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        outer = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = dict(kwargs or {})
                first = args[0] if args else None
                is64 = isinstance(first, torch.Tensor) and first.dtype == torch.float64
                if is64 and func in (torch.Tensor.to, torch.Tensor.type):
                    target = kwargs.get("dtype", args[1] if len(args) > 1 else None)
                    if target in (torch.float32, torch.float16, torch.bfloat16):
                        outer.casts += 1
                        return first
                if is64 and func is torch.Tensor.float:
                    outer.casts += 1
                    return first
                if is64 and kwargs.get("dtype") in (torch.float32, torch.float16, torch.bfloat16):
                    outer.casts += 1
                    kwargs["dtype"] = torch.float64
                return func(*args, **kwargs)

        self.casts = 0
        self._mode = _Mode()

    def __enter__(self) -> KeepFloat64:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def _raw_config(arch: Architecture) -> dict[str, Any]:
    """The user's config fields: the ``config.json`` symtrans read, or a preset written as its family's config."""
    src = Path(str(arch.source))
    if arch.source != "preset" and src.is_file():
        return json.loads(src.read_text())
    mt = PRESET_MODEL_TYPES.get(arch.family)
    if mt is None:
        raise SymtransError(f"{arch.name}: no transformers model_type for family {arch.family!r} (the independent "
                            "route needs a config.json or a preset of a transformers family)")
    cfg: dict[str, Any] = {"model_type": mt, "vocab_size": int(arch.vocab_size)}
    if mt == "gpt2":
        cfg.update(layer_norm_epsilon=arch.ln_eps, activation_function=arch.activation,
                   tie_word_embeddings=arch.tied_lm_head)
    elif mt in ("bert", "roberta"):
        cfg.update(layer_norm_eps=arch.ln_eps, hidden_act=arch.activation, type_vocab_size=arch.type_vocab_size)
    elif mt == "distilbert":
        cfg.update(activation=arch.activation, sinusoidal_pos_embds=arch.positional == "sinusoidal")
    else:
        cfg.update(rms_norm_eps=arch.ln_eps, hidden_act=arch.activation, tie_word_embeddings=arch.tied_lm_head,
                   attention_bias=bool(arch.bias))
        if arch.sliding_window:
            cfg["sliding_window"] = arch.sliding_window
    return cfg


def _layer_pick(cfg: dict[str, Any], L_own: int, L: int) -> list[int]:
    """The user's layers the instance's ``L`` layers stand for: the first of each distinct per-layer kind, cycled.

    A layer's kind is its entries in the config's per-layer lists (fields that list one value per layer).

    Examples
    --------
    >>> _layer_pick({"no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0]}, 8, 3)
    [0, 3, 0]
    >>> _layer_pick({}, 4, 2)
    [0, 0]
    """
    lists = [v for v in cfg.values() if isinstance(v, list) and len(v) == L_own and L_own > 1]
    kinds: dict[Any, int] = {}
    for i in range(L_own):
        kinds.setdefault(json.dumps([v[i] for v in lists], default=str), i)
    firsts = list(kinds.values())
    return [firsts[i % len(firsts)] for i in range(L)]


def hf_config(arch: Architecture | str, instance: Architecture) -> Any:
    """The transformers config of the user's model with the sizes of ``instance`` (its layers, widths, vocabulary).

    Examples
    --------
    >>> from symtrans.group.complete import small_arch
    >>> c = hf_config("bert-base", small_arch("bert-base", 2))
    >>> c.model_type, c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.max_position_embeddings
    ('bert', 2, 6, 2, 5)
    """
    import transformers

    a = get_arch(arch)
    cfg = _raw_config(a)
    mt = cfg.get("model_type")
    conf = transformers.AutoConfig.for_model(mt, **{k: v for k, v in cfg.items() if k != "model_type"})
    own = conf.to_dict()
    L_own = int(getattr(conf, "num_hidden_layers"))
    pick = _layer_pick(own, L_own, int(instance.L))
    for key, value in own.items():  # per-layer lists: the picked layers
        if isinstance(value, list) and len(value) == L_own and L_own > 1 and key != "architectures":
            setattr(conf, key, [value[j] for j in pick])
    d, H = int(instance.d_model), int(instance.H)
    conf.num_hidden_layers = int(instance.L)
    conf.hidden_size = d
    if own.get("embedding_size") == own.get("hidden_size"):  # ELECTRA: embeddings as wide as the hidden states
        conf.embedding_size = d
    conf.num_attention_heads = H
    if "num_key_value_heads" in own:
        conf.num_key_value_heads = int(instance.H_kv)
    if not get_arch(arch).head_dim_tied:  # the family reads head_dim (Llama-like), else d_model / H
        conf.head_dim = int(instance.d_k)
    ff = "n_inner" if "n_inner" in own else "hidden_dim" if "hidden_dim" in own else "intermediate_size"
    setattr(conf, ff, int(instance.d_ff))
    conf.vocab_size = int(instance.vocab_size)
    if instance.positional == "learned":
        conf.max_position_embeddings = int(instance.position_table or instance.max_positions)
    if own.get("type_vocab_size"):
        conf.type_vocab_size = int(instance.type_vocab_size)
    if own.get("sliding_window") is not None and instance.sliding_window:
        conf.sliding_window = int(instance.sliding_window)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        v = own.get(key)
        if isinstance(v, int) and v >= int(instance.vocab_size) or isinstance(v, list):
            setattr(conf, key, None)
    for key in _EPS_KEYS:
        if key in own:
            setattr(conf, key, float(instance.ln_eps))
    rope = getattr(conf, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("partial_rotary_factor") not in (None, 1, 1.0):
        # GPT-NeoX: transformers' own reading of the factor, reduced to the measured head width by the rule
        # symtrans's instances follow (never symtrans's reading, so a misread factor shows as a disagreement)
        from symtrans.group.complete import reduced_rotary_factor

        width = int(instance.d_model) // int(instance.H)
        conf.rope_parameters = {**rope, "partial_rotary_factor": reduced_rotary_factor(
            float(rope["partial_rotary_factor"]), width, str(conf.model_type))}
    conf.use_cache = False
    return conf


def _model(conf: Any, causal: bool, seed: int) -> Any:
    """The transformers model of ``conf`` in float64 (eager attention), every parameter drawn at random."""
    import torch
    import transformers

    kw: dict[str, Any] = {"attn_implementation": "eager"}
    auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    try:
        model = auto.from_config(conf, add_pooling_layer=False, **kw) if conf.model_type in (
            "bert", "roberta", "xlm-roberta", "camembert") else auto.from_config(conf, **kw)
    except Exception as err:  # noqa: BLE001 -- reported with the model type
        raise SymtransError(f"transformers cannot build {conf.model_type!r} at the measured sizes: "
                            f"{type(err).__name__}: {str(err)[:200]}") from None
    model = model.to(torch.float64).eval()
    from symtrans.group.complete import MIN_EPS

    for mod in model.modules():  # the norms' eps at least MIN_EPS, also where the family hard-codes it (DistilBERT)
        for attr in ("eps", "variance_epsilon"):
            if "norm" in type(mod).__name__.lower() and isinstance(getattr(mod, attr, None), float):
                setattr(mod, attr, max(getattr(mod, attr), MIN_EPS))
    for mod in model.modules():  # nn.Embedding zeroes the gradient of its padding_idx row: the row is read all
        if isinstance(mod, torch.nn.Embedding):  # the same, so autodiff must see it
            mod.padding_idx = None
    gen = torch.Generator().manual_seed(seed + 303)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name.lower() or "ln" in name.lower()) and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif p.dim() == 1:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * p.shape[-1] ** -0.5)
    return model


def _pad_is_special(model: Any) -> int | None:
    """The pad id where the embeddings number positions from it (RoBERTa's ``padding_idx``), else None."""
    for mod in model.modules():
        idx = getattr(mod, "padding_idx", None)
        if isinstance(idx, int) and hasattr(mod, "create_position_ids_from_input_ids"):
            return idx
    return None


def measure_transformers(arch: Architecture | str, instance: Architecture, *, seed: int = 0) -> dict[str, Any]:
    """Measure the stabiliser's dimension on transformers' own forward at the sizes of ``instance``.

    Returns ``measured_dimension`` (nullity of the float64 Jacobian of
    parameters -> outputs, at :func:`symtrans.precision.gap_rank`'s cut),
    ``group_dimension`` (G's dimension on the ``model`` scope at the sizes of
    the measured model), ``parameters`` (transformers' count) and
    ``symtrans_parameters`` (symtrans's count of the same instance), the rank
    ``record`` (gap in decades), the conventions (``casts_kept_float64``,
    ``unread_pad_id``) and ``agrees``.

    Examples
    --------
    >>> from symtrans.group.complete import small_arch
    >>> r = measure_transformers("llama2-7b", small_arch("llama2-7b", 1))
    >>> r["measured_dimension"], r["group_dimension"], r["parameters"] == r["symtrans_parameters"], r["agrees"]
    (48, 48, True, True)
    """
    import torch
    from torch.func import functional_call, jacrev

    from symtrans.group.complete import MIN_EPS, parameter_count, rank_record, writer_gap
    from symtrans.group.spec import GroupSpec

    a = get_arch(arch)
    inst = dataclasses.replace(instance, ln_eps=max(float(instance.ln_eps), MIN_EPS))
    if inst.positional == "learned":  # token ids in: every usable row of the position table is read
        inst = dataclasses.replace(inst, n=int(inst.max_positions))
    conf = hf_config(a, inst)
    own = conf.to_dict()
    if a.head_dim_tied:  # the family ties the head width to d_model / H: measure at that width
        if int(inst.d_model) % int(inst.H):
            raise SymtransError(f"{a.name}: the measured d_model {inst.d_model} is not divisible by H = {inst.H}")
        w = int(inst.d_model) // int(inst.H)
        inst = dataclasses.replace(inst, d_k=w, d_v=w)
    causal = a.attention == "causal"
    model = _model(conf, causal, seed)
    names = [n for n, _ in model.named_parameters()]
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    shapes = [base[n].shape for n in names]
    sizes = [base[n].numel() for n in names]
    P = sum(sizes)
    theta0 = torch.cat([base[n].reshape(-1) for n in names])
    pad = _pad_is_special(model)
    vocab, n = int(inst.vocab_size), int(inst.n)
    allowed = torch.tensor([t for t in range(vocab) if t != pad])
    d_out = min(int(inst.d_model), vocab) if causal else int(inst.d_model)
    count = max(4, -(-3 * P // (2 * n * d_out)))
    gen = torch.Generator().manual_seed(seed + 404)
    ids = allowed[torch.randint(0, len(allowed), (count, n), generator=gen)]
    kwargs: dict[str, Any] = {"input_ids": ids}
    if int(own.get("type_vocab_size") or 0) > 1:
        kwargs["token_type_ids"] = torch.randint(0, int(conf.type_vocab_size), (count, n), generator=gen)

    def outputs(theta: Any) -> Any:
        parts = torch.split(theta, sizes)
        p = {k: v.reshape(s) for k, v, s in zip(names, parts, shapes)}
        out = functional_call(model, p, (), kwargs)
        y = out.logits if causal else out.last_hidden_state
        return y.reshape(-1)

    with KeepFloat64() as keep:
        J = jacrev(outputs)(theta0)
    read = J.abs().amax(0) > 0  # an exactly zero column: a parameter no output reads (null without a tolerance)
    rec = rank_record(torch.linalg.svdvals(J[:, read]))
    measured = P - rec["rank"]
    spec = GroupSpec.from_arch(inst)
    group = int(spec.scope_dimension("model"))
    mine = parameter_count(inst, "model")
    gap = writer_gap(inst, "model")  # a named condition outside G (complete.writer_gap): does it account for the rest?
    if gap is not None:
        gap = {**gap, "explains": bool(rec["clear"] and gap["dimension"] is not None and P == mine
                                       and measured == group + gap["dimension"])}
    return {
        "route": "transformers", "model_type": conf.model_type, "scope": "model",
        "output": "logits" if causal else "last hidden state",
        "sizes": {"L": int(inst.L), "n": n, "H": int(inst.H), "H_kv": int(inst.H_kv), "d_model": int(inst.d_model),
                  "d_k": int(inst.d_k), "d_v": int(inst.d_v), "d_ff": int(inst.d_ff), "vocab_size": vocab,
                  "eps": float(inst.ln_eps)},
        "parameters": P, "symtrans_parameters": int(mine), "inputs": count, "jacobian_rows": int(J.shape[0]),
        "dtype": "float64", "casts_kept_float64": keep.casts, "unread_pad_id": pad,
        "unread_parameters": int((~read).sum()),
        "measured_dimension": measured, "group_dimension": group,
        "record": {"rank": rec["rank"], "cut_above": rec["above"], "cut_below": rec["below"],
                   "gap_decades": rec["gap_decades"], "clear": rec["clear"],
                   "rule": "symtrans.precision.gap_rank: the widest drop of the singular values; clear if it spans "
                           f"enough decades and the values below are < {ROUNDING_FLOOR:g} relative"},
        **({"condition": gap} if gap is not None else {}),
        "agrees": bool(rec["clear"] and measured == group and P == mine),
    }
