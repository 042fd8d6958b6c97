"""Immutable architecture descriptions: presets, Hugging Face configs, symbols.

An :class:`Architecture` records every size and structural choice that a
formula, a group or a numeric check needs. Any size may be an ``int`` or the
canonical SymPy symbol of that size (see :mod:`symtrans.symbols`), so one
description serves for exact numbers and for symbolic derivations.

Examples
--------
>>> arch = get_arch("bert-base")
>>> arch.H, arch.d_k, arch.d_model, arch.n
(12, 64, 768, 512)
>>> get_arch("bert-base", n=128).n
128
>>> get_arch("symbolic").d_k
d_k
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import sympy as sp

from symtrans.errors import SymtransError, suggest
from symtrans.symbols import SIZE_NAMES, SYMBOLS
from symtrans.validate import CONFIG_MAX_BYTES, MAX_NAME_CHARS, MAX_SIZE, read_json_file, terminal_safe

__all__ = ["Architecture", "Size", "ABLATIONS", "PRESETS", "PAPER_N", "ROPE_TYPES", "rope_theta", "default_n", "get_arch",
           "from_config", "preset_names", "CONFIG_FIELDS", "config_field", "unaudited_fields"]

Size = Union[int, sp.Symbol]

#: the sequence length of the paper's BertBase counts (§7.3: 360,448 = 512 x 11 x 64)
PAPER_N = 512

#: rotary scaling types transformers defines (``modeling_rope_utils.ROPE_INIT_FUNCTIONS`` plus ``default``) and
#: the fields each requires; they change rotary frequencies only, so they matter to position-dependent results
ROPE_TYPES: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings"),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
    "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
    "proportional": (),
}


def default_n(max_positions: int) -> int:
    """The sequence length formulas use when none is given: the paper's n, or a shorter context length.

    A formula query at a 128k context (a Llama 3.1 config's ``max_position_embeddings``)
    is rarely what is meant; ``--n`` / ``n=`` sets any other length.

    Examples
    --------
    >>> default_n(512), default_n(131072), default_n(64)
    (512, 512, 64)
    """
    return min(PAPER_N, max_positions)

#: components an architecture can be described without (``Architecture.ablated``; ``group --breaking``):
#: the residual connections, the FFN's activation (identity instead), the residual stream's norms (identity: no
#: gains, no biases), and the W_O mixing of heads (head h writes its d_v values to its own coordinates
#: h d_v .. (h+1) d_v - 1 of the residual stream; needs H d_v <= d_model)
ABLATIONS: tuple[str, ...] = ("residual", "nonlinearity", "norm", "wo-mixing")

_CHOICES: dict[str, tuple[str, ...]] = {
    "norm_placement": ("post", "pre"),
    "norm": ("layernorm", "rmsnorm"),
    "activation": ("gelu", "gelu_new", "relu", "silu"),
    "ffn": ("mlp", "gated"),
    "attention": ("bidirectional", "causal"),
    "positional": ("learned", "sinusoidal", "rotary", "none"),
}


@dataclass(frozen=True)
class Architecture:
    """One Transformer architecture, sizes exact or symbolic, immutable.

    ``n`` is the sequence length the formulas are evaluated at; presets and
    configs set it to :func:`default_n` (the paper's n = 512, or the context
    length if shorter), never to a long context length. ``position_table`` is the number of rows of a learned
    position-embedding table (RoBERTa keeps two extra rows, so it has 514 rows
    for 512 usable positions). ``head_dim_tied`` records that the family's
    config derives the head width as ``d_model / H``, so ``H * d_k == d_model``
    must hold.

    Examples
    --------
    >>> a = Architecture(name="toy", family="custom", n=8, L=2, H=2, H_kv=2,
    ...                  d_model=8, d_k=4, d_v=4, d_ff=32, vocab_size=100, max_positions=16)
    >>> a.sizes()["d_ff"]
    32
    >>> a.with_sizes(n=4).n
    4
    """

    name: str
    family: str
    n: Size
    L: Size
    H: Size
    H_kv: Size
    d_model: Size
    d_k: Size
    d_v: Size
    d_ff: Size
    vocab_size: Size
    max_positions: Size
    norm_placement: str = "post"
    norm: str = "layernorm"
    activation: str = "gelu"
    ffn: str = "mlp"
    bias: bool = True
    qkv_bias: bool = False
    attention: str = "bidirectional"
    positional: str = "learned"
    position_table: Size | None = None
    type_vocab_size: int = 0
    pooler: bool = False
    embedding_norm: bool = False
    final_norm: bool = False
    tied_lm_head: bool = True
    ln_eps: float = 1e-12
    head_dim_tied: bool = True
    rope_scaling: tuple[tuple[str, Any], ...] = ()
    sliding_window: int | None = None  # causal attention to the last ``sliding_window`` keys only (Mistral)
    # Gemma 3 (``model_type`` gemma3_text): RMSNorm on each head's queries and keys (one gain of width d_k per
    # layer for Q, one for K), a norm on each sub-block's output before the residual add ("sandwich" norms),
    # norms whose gain is stored as w and applied as (1 + w), embeddings multiplied by sqrt(d_model), scores
    # scaled by query_pre_attn_scalar^-1/2, and per-layer attention types: "sliding" layers use the window and
    # their own rotary base, "full" layers attend to every earlier key
    qk_norm: bool = False
    post_norms: bool = False
    gain_offset: int = 0  # a norm computes x_hat * (gain_offset + w); Gemma stores w with gain 1 + w
    embedding_scale: bool = False  # the word rows are multiplied by sqrt(d_model)
    attn_scalar: float | None = None  # scores are scaled by attn_scalar^-1/2 instead of d_k^-1/2
    layer_types: tuple[str, ...] = ()  # per layer: "sliding" or "full" (empty: every layer alike)
    rope_bases: tuple[tuple[str, float], ...] = ()  # rotary base per layer type, e.g. (("full", 1e6), ("sliding", 1e4))
    ablated: tuple[str, ...] = ()  # components removed (ABLATIONS), in the order removed; () for a real model
    # Gemma 2: soft-capping, c tanh(s / c), of the attention scores (after scaling, before the mask) and of the
    # output head's logits (the causal LM's only; the base model's hidden states do not see it)
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # OLMo 2: no norm in front of the sub-blocks (they read the residual stream; ``post_norms`` normalise their
    # outputs), and QK-norm over the full width of q (H d_k) and k (H_kv d_k) before the split into heads
    pre_norms: bool = True
    qk_norm_full: bool = False
    # GPT-NeoX/Pythia: a parallel residual (both sub-blocks read the layer's input through their own norms:
    # out = x + attn(ln1(x)) + ffn(ln2(x))), and rotary positions on the first partial_rotary_factor * d_k
    # coordinates of each query/key head only (the rest of the head is position-free)
    parallel_residual: bool = False
    partial_rotary_factor: float = 1.0
    # SmolLM3: per layer, whether rotary positions apply (its ``no_rope_layers``: 0 marks a NoPE layer, whose
    # queries and keys are not rotated); empty: every layer as ``positional``
    rope_layers: tuple[bool, ...] = ()
    source: str = "preset"
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in SIZE_NAMES:
            value = getattr(self, name)
            _check_size(name, value)
        if self.position_table is not None:
            _check_size("position_table", self.position_table)
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) \
                or self.type_vocab_size < 0:
            raise SymtransError(f"type_vocab_size must be an integer >= 0, got {self.type_vocab_size!r}")
        if self.sliding_window is not None and (isinstance(self.sliding_window, bool) or not isinstance(
                self.sliding_window, int) or self.sliding_window < 1):
            raise SymtransError(f"sliding_window must be a positive integer or None, got {self.sliding_window!r}")
        if self.layer_types:
            if any(t not in ("sliding", "full") for t in self.layer_types):
                raise SymtransError(f"layer_types must be 'sliding' or 'full' per layer, got {self.layer_types!r}"[:200])
            if isinstance(self.L, int) and len(self.layer_types) != self.L:
                raise SymtransError(f"layer_types lists {len(self.layer_types)} layers, the model has {self.L}")
        if self.rope_layers:
            if any(not isinstance(r, bool) for r in self.rope_layers) or self.positional != "rotary":
                raise SymtransError(f"rope_layers must be true/false per layer of a rotary model, got "
                                    f"{self.rope_layers!r} with {self.positional} positions"[:200])
            if isinstance(self.L, int) and len(self.rope_layers) != self.L:
                raise SymtransError(f"rope_layers lists {len(self.rope_layers)} layers, the model has {self.L}")
        for c in self.ablated:
            if c not in ABLATIONS:
                raise SymtransError(suggest(str(c), ABLATIONS, "ablated component"))
        if "wo-mixing" in self.ablated and _concrete(self.H, self.d_v, self.d_model) \
                and self.H * self.d_v > self.d_model:
            raise SymtransError(f"{self.name} without W_O mixing: H*d_v = {self.H * self.d_v} > d_model = "
                                f"{self.d_model}, the heads' own coordinates do not fit in the residual stream")
        _check_partial_rotary(self)
        if self.gain_offset not in (0, 1):
            raise SymtransError(f"gain_offset must be 0 or 1, got {self.gain_offset!r}")
        for attr, choices in _CHOICES.items():
            if getattr(self, attr) not in choices:
                raise SymtransError(suggest(str(getattr(self, attr)), choices, attr.replace("_", " ")))
        H, H_kv = self.H, self.H_kv
        if _concrete(H, H_kv) and H % H_kv != 0:
            raise SymtransError(
                f"inconsistent sizes: H={H} query heads must be a multiple of H_kv={H_kv} key/value heads"
            )
        if self.head_dim_tied and _concrete(self.H, self.d_k, self.d_model):
            if self.H * self.d_k != self.d_model:
                raise SymtransError(
                    f"inconsistent sizes: {self.name} requires H*d_k == d_model, but "
                    f"H*d_k = {self.H}*{self.d_k} = {self.H * self.d_k} != d_model = {self.d_model}"
                    " (set d_k, H and d_model together)"
                )
        if self.head_dim_tied and _concrete(self.d_k, self.d_v) and self.d_k != self.d_v:
            raise SymtransError(
                f"inconsistent sizes: {self.name} uses one head width, but d_k={self.d_k} != d_v={self.d_v}"
            )
        if self.positional in ("learned", "sinusoidal") and _concrete(self.n, self.max_positions):
            if self.n > self.max_positions:
                raise SymtransError(
                    f"sequence length n={self.n} exceeds the {self.max_positions} positions of {self.name}"
                )

    # ------------------------------------------------------------------ views
    def sizes(self) -> dict[str, Size]:
        """Return the sizes by canonical name (ints or symbols).

        Examples
        --------
        >>> get_arch("gpt2").sizes()["max_positions"]
        1024
        """
        return {name: getattr(self, name) for name in SIZE_NAMES}

    def substitutions(self) -> dict[sp.Symbol, int]:
        """Return ``{symbol: value}`` for every size that is a concrete integer.

        Examples
        --------
        >>> subs = get_arch("bert-base").substitutions()
        >>> subs[SYMBOLS["H"]], subs[SYMBOLS["n"]]
        (12, 512)
        >>> get_arch("symbolic").substitutions()
        {}
        """
        return {SYMBOLS[k]: v for k, v in self.sizes().items() if isinstance(v, int)}

    @property
    def is_symbolic(self) -> bool:
        """True when at least one size is a symbol.

        Examples
        --------
        >>> get_arch("symbolic").is_symbolic, get_arch("bert-base").is_symbolic
        (True, False)
        """
        return any(not isinstance(v, int) for v in self.sizes().values())

    def with_sizes(self, **sizes: Size) -> Architecture:
        """Return a copy with some sizes replaced, validated again.

        ``d_k``/``d_v`` follow ``d_model / H`` only if given explicitly; a
        change that breaks ``H * d_k == d_model`` for a tied family is refused.

        Examples
        --------
        >>> get_arch("bert-base").with_sizes(n=128).n
        128
        >>> get_arch("bert-base").with_sizes(H=16)
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: inconsistent sizes: bert-base requires H*d_k == d_model, but H*d_k = 16*64 = 1024 != d_model = 768 (set d_k, H and d_model together)
        """
        unknown = [k for k in sizes if k not in SIZE_NAMES]
        if unknown:
            raise SymtransError(suggest(unknown[0], SIZE_NAMES, "size"))
        if "H" in sizes and "H_kv" not in sizes and self.H_kv == self.H:
            sizes["H_kv"] = sizes["H"]  # no grouped-query attention: keep it that way
        extra: dict[str, Any] = {}
        if self.layer_types and "L" in sizes and isinstance(sizes["L"], int) and sizes["L"] != self.L:
            extra["layer_types"] = tuple(self.layer_types[i % len(self.layer_types)] for i in range(sizes["L"]))
        elif self.layer_types and "L" in sizes and not isinstance(sizes["L"], int):
            extra["layer_types"] = ()
        if self.rope_layers and "L" in sizes and isinstance(sizes["L"], int) and sizes["L"] != self.L:
            extra["rope_layers"] = tuple(self.rope_layers[i % len(self.rope_layers)] for i in range(sizes["L"]))
        elif self.rope_layers and "L" in sizes and not isinstance(sizes["L"], int):
            raise SymtransError(f"{self.name}: NoPE layers (rope_layers) need a concrete number of layers")
        return dataclasses.replace(self, **sizes, **extra)

    def without(self, component: str) -> Architecture:
        """The same architecture with ``component`` (one of :data:`ABLATIONS`) removed.

        Examples
        --------
        >>> a = get_arch("bert-base").without("nonlinearity")
        >>> a.ablated, a.name
        (('nonlinearity',), 'bert-base-without-nonlinearity')
        >>> get_arch("bert-base").without("gates")
        Traceback (most recent call last):
        ...
        symtrans.errors.SymtransError: unknown ablated component 'gates'; choose from: 'nonlinearity', 'norm', 'residual', 'wo-mixing'
        """
        if component not in ABLATIONS:
            raise SymtransError(suggest(str(component), ABLATIONS, "ablated component"))
        if component in self.ablated:
            return self
        return dataclasses.replace(self, ablated=self.ablated + (component,), name=f"{self.name}-without-{component}")

    def layer_kind(self, i: int) -> str:
        """``"sliding"`` or ``"full"``: whether layer ``i`` attends through the sliding window.

        Without per-layer types every layer is ``"sliding"`` when the model has a
        window (Mistral), else ``"full"``.

        Examples
        --------
        >>> get_arch("mistral-7b").layer_kind(3), get_arch("gpt2").layer_kind(0)
        ('full', 'full')
        """
        if self.layer_types:
            return self.layer_types[i]
        return "sliding" if self.sliding_window else "full"

    def window_at(self, i: int) -> int | None:
        """The sliding window of layer ``i`` (``None``: every earlier key).

        Examples
        --------
        >>> get_arch("gpt2").window_at(0) is None
        True
        """
        return self.sliding_window if self.layer_kind(i) == "sliding" else None

    def rope_base_at(self, i: int) -> float | None:
        """The rotary base of layer ``i`` when the architecture records one per layer type, else ``None``.

        Examples
        --------
        >>> get_arch("gpt2").rope_base_at(0) is None
        True
        """
        return dict(self.rope_bases).get(self.layer_kind(i)) if self.rope_bases else None

    @property
    def rotary_width(self) -> Size:
        """How many coordinates of each query/key head the rotary positions rotate (0 without rotary positions).

        ``partial_rotary_factor * d_k`` (GPT-NeoX's ``rotary_pct``); ``d_k`` for
        full rotary; an expression in ``d_k`` when it is a symbol.

        Examples
        --------
        >>> get_arch("llama2-7b").rotary_width, get_arch("gpt2").rotary_width
        (128, 0)
        >>> dataclasses.replace(get_arch("llama2-7b"), partial_rotary_factor=0.25).rotary_width
        32
        """
        if self.positional != "rotary":
            return 0
        if self.partial_rotary_factor == 1:
            return self.d_k
        r = sp.nsimplify(self.partial_rotary_factor) * self.d_k
        return int(r) if isinstance(self.d_k, int) else r

    def rotary_at(self, i: int) -> bool:
        """Whether layer ``i`` rotates its queries and keys (False on SmolLM3's NoPE layers and without rotary).

        Examples
        --------
        >>> get_arch("llama2-7b").rotary_at(0), get_arch("gpt2").rotary_at(0)
        (True, False)
        """
        if self.positional != "rotary":
            return False
        return self.rope_layers[i] if self.rope_layers else True

    def layer_nope(self) -> Architecture | None:
        """The architecture a NoPE layer of this model has (rotary positions off), or None without NoPE layers.

        A NoPE layer computes what a layer of the same model without positions
        computes, so its per-layer group factors are those of this architecture.

        Examples
        --------
        >>> get_arch("llama2-7b").layer_nope() is None
        True
        """
        if all(self.rope_layers) or self.positional != "rotary":
            return None
        return dataclasses.replace(self, positional="none", rope_layers=())

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary (symbols as their names).

        Examples
        --------
        >>> d = get_arch("minilm-l6-h384").to_dict()
        >>> d["d_model"], d["norm_placement"], d["H_kv"]
        (384, 'post', 12)
        """
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, sp.Basic):
                v = str(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out


def _check_partial_rotary(a: Architecture) -> None:
    """A partial rotary factor must be in (0, 1], with rotary positions, and rotate an even number >= 2 of coordinates."""
    f = a.partial_rotary_factor
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
        raise SymtransError(f"partial_rotary_factor must be a number in (0, 1], got {f!r}")
    if f == 1:
        return
    if a.positional != "rotary":
        raise SymtransError(f"partial_rotary_factor = {f!r} needs rotary positions, {a.name} has {a.positional!r}")
    if isinstance(a.d_k, int):
        exact = sp.nsimplify(f) * a.d_k
        if not exact.is_integer or int(exact) % 2 or int(exact) < 2 or int(a.d_k * f) != int(exact):
            raise SymtransError(f"partial_rotary_factor = {f!r} of d_k = {a.d_k} gives {a.d_k * f:g} rotated "
                                "coordinates; an even whole number of at least 2 is modelled")


def _concrete(*values: Size) -> bool:
    return all(isinstance(v, int) for v in values)


def _check_size(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, sp.Symbol)):
        raise SymtransError(f"size {name} must be a positive integer or a symbol, got {value!r}")
    if isinstance(value, int) and value < 1:
        raise SymtransError(f"size {name} must be a positive integer, got {value}")
    if isinstance(value, int) and value > MAX_SIZE:
        raise SymtransError(f"size {name}: sizes above {MAX_SIZE} are refused (no architecture is that large)")
    if isinstance(value, sp.Symbol) and not (value.is_integer and value.is_positive):
        raise SymtransError(f"symbol {value} for {name} must be declared a positive integer")


# ---------------------------------------------------------------- presets
def _bert_like(name: str, *, L: int, H: int, d_model: int, d_ff: int, vocab: int = 30522,
               positions: int = 512, table: int | None = None, type_vocab: int = 2,
               family: str = "bert", pooler: bool = True, ln_eps: float = 1e-12) -> Architecture:
    return Architecture(
        name=name, family=family, n=default_n(positions), L=L, H=H, H_kv=H, d_model=d_model,
        d_k=d_model // H, d_v=d_model // H, d_ff=d_ff, vocab_size=vocab,
        max_positions=positions, position_table=table or positions,
        norm_placement="post", activation="gelu", attention="bidirectional",
        positional="learned", type_vocab_size=type_vocab, pooler=pooler,
        embedding_norm=True, ln_eps=ln_eps,
    )


def _gpt2(name: str, *, L: int, H: int, d_model: int) -> Architecture:
    return Architecture(
        name=name, family="gpt2", n=default_n(1024), L=L, H=H, H_kv=H, d_model=d_model,
        d_k=d_model // H, d_v=d_model // H, d_ff=4 * d_model, vocab_size=50257,
        max_positions=1024, position_table=1024, norm_placement="pre",
        activation="gelu_new", attention="causal", positional="learned",
        final_norm=True, ln_eps=1e-5,
    )


def _llama_like(name: str, *, L: int, H: int, H_kv: int, d_model: int, d_ff: int, vocab: int,
                positions: int, family: str = "llama", ln_eps: float = 1e-5, qkv_bias: bool = False) -> Architecture:
    """Llama-style decoder: pre-RMSNorm, rotary positions, gated SiLU FFN, no biases (Qwen2: Q, K, V biases), untied head."""
    return Architecture(
        name=name, family=family, n=default_n(positions), L=L, H=H, H_kv=H_kv, d_model=d_model,
        d_k=d_model // H, d_v=d_model // H, d_ff=d_ff, vocab_size=vocab, max_positions=positions,
        position_table=None, norm_placement="pre", norm="rmsnorm", activation="silu", ffn="gated",
        bias=False, qkv_bias=qkv_bias, attention="causal", positional="rotary", final_norm=True,
        tied_lm_head=False, ln_eps=ln_eps, head_dim_tied=False,
    )


def _symbolic() -> Architecture:
    S = SYMBOLS
    return Architecture(
        name="symbolic", family="symbolic", n=S["n"], L=S["L"], H=S["H"], H_kv=S["H"],
        d_model=S["d_model"], d_k=S["d_k"], d_v=S["d_v"], d_ff=S["d_ff"],
        vocab_size=S["vocab_size"], max_positions=S["max_positions"],
        position_table=S["max_positions"], head_dim_tied=False, positional="learned",
        notes=("all sizes are free symbols; d_k, d_v and d_model are independent",),
    )


PRESETS: dict[str, Any] = {
    "bert-base": lambda: _bert_like("bert-base", L=12, H=12, d_model=768, d_ff=3072),
    "bert-large": lambda: _bert_like("bert-large", L=24, H=16, d_model=1024, d_ff=4096),
    "minilm-l6-h384": lambda: _bert_like("minilm-l6-h384", L=6, H=12, d_model=384, d_ff=1536),
    "distilbert-base": lambda: dataclasses.replace(
        _bert_like("distilbert-base", L=6, H=12, d_model=768, d_ff=3072, type_vocab=0,
                   family="distilbert", pooler=False)),
    "roberta-base": lambda: _bert_like("roberta-base", L=12, H=12, d_model=768, d_ff=3072,
                                       vocab=50265, table=514, type_vocab=1, family="roberta",
                                       ln_eps=1e-5),
    "gpt2": lambda: _gpt2("gpt2", L=12, H=12, d_model=768),
    "gpt2-medium": lambda: _gpt2("gpt2-medium", L=24, H=16, d_model=1024),
    # Llama-2-7B's published sizes (no grouped-query attention) and Mistral-7B's (8 key/value heads)
    "llama2-7b": lambda: _llama_like("llama2-7b", L=32, H=32, H_kv=32, d_model=4096, d_ff=11008,
                                     vocab=32000, positions=4096),
    "mistral-7b": lambda: _llama_like("mistral-7b", L=32, H=32, H_kv=8, d_model=4096, d_ff=14336,
                                      vocab=32000, positions=32768, family="mistral"),
    # Qwen2-7B's published config: biases on Q, K, V only, 4 key/value heads, untied head, eps 1e-6
    "qwen2-7b": lambda: _llama_like("qwen2-7b", L=28, H=28, H_kv=4, d_model=3584, d_ff=18944, vocab=152064,
                                    positions=131072, family="qwen2", ln_eps=1e-6, qkv_bias=True),
    "symbolic": _symbolic,
}


def preset_names() -> list[str]:
    """Return the names of the built-in presets.

    Examples
    --------
    >>> "bert-base" in preset_names() and "symbolic" in preset_names()
    True
    """
    return sorted(PRESETS)


# ---------------------------------------------------------------- configs
_FAMILY_KEYS = {
    # family: (L, H, d_model, d_ff, positions)
    "bert": ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
             "max_position_embeddings"),
    "roberta": ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                "max_position_embeddings"),
    "distilbert": ("n_layers", "n_heads", "dim", "hidden_dim", "max_position_embeddings"),
    "gpt2": ("n_layer", "n_head", "n_embd", "n_inner", "n_positions"),
    "llama": ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
              "max_position_embeddings"),
}
# qwen2 is not an alias: it biases Q, K, V but not O or the FFN (``bias=False, qkv_bias=True``).
_FAMILY_KEYS["qwen2"] = _FAMILY_KEYS["llama"]
# Gemma 3's text decoder: QK-norm, sandwich norms, (1 + w) gains, scaled embeddings, local/global layers
_FAMILY_KEYS["gemma3"] = _FAMILY_KEYS["llama"]
# Qwen3: Llama-structured with RMSNorm on each head's queries and keys (plain gains w, no post-norms)
_FAMILY_KEYS["qwen3"] = _FAMILY_KEYS["llama"]
# Gemma 2: Gemma 3's structure without QK-norm, with attention and final logit soft-capping, one rotary base
_FAMILY_KEYS["gemma2"] = _FAMILY_KEYS["llama"]
# Phi-3: Llama's structure with fused qkv_proj and gate_up_proj (a parameter layout: the loader splits them)
_FAMILY_KEYS["phi3"] = _FAMILY_KEYS["llama"]
# OLMo 2: post-norms only (no pre-norms), QK-norm on the full width of q and k, plain gains
_FAMILY_KEYS["olmo2"] = _FAMILY_KEYS["llama"]
# GPT-NeoX/Pythia: LayerNorm with biases, biased linear maps, a two-matrix MLP, rotary positions on part of each
# head (rotary_pct), a parallel residual (use_parallel_residual), fused head-interleaved QKV (a layout), untied head
_FAMILY_KEYS["gpt_neox"] = _FAMILY_KEYS["llama"]
# SmolLM3: Llama's structure with rotary positions skipped on the layers ``no_rope_layers`` marks 0 (NoPE)
_FAMILY_KEYS["smollm3"] = _FAMILY_KEYS["llama"]
_FAMILY_ALIASES = {"xlm-roberta": "roberta", "camembert": "roberta", "mistral": "llama", "gemma3_text": "gemma3"}
# ELECTRA's discriminator is BERT's encoder (no pooler) when its embeddings are as wide as the hidden states
_FAMILY_ALIASES["electra"] = "bert"
#: ElectraConfig's default embedding_size (used when a config omits it, as transformers does)
_ELECTRA_EMBEDDING_SIZE = 128

#: Gemma 3 config fields that change the computation and are not modelled: refused by name when set
_GEMMA3_REFUSED = {"attn_logit_softcapping": "attention logit soft-capping",
                   "final_logit_softcapping": "final logit soft-capping"}


# ---------------------------------------------------------------- the config-field audit
#: The one table of what ``from_config`` does with each field of ``transformers``' default config of every
#: accepted model type (``transformers.AutoConfig.for_model(t).to_dict()``): ``"modelled"`` (read; a value the
#: reader cannot express is refused naming the field), ``("irrelevant", why)`` (does not change the hidden states
#: symtrans measures), ``("refused", default, what)`` (refused by name at any value but ``default``; ``None`` reads
#: as the default). tests/test_config_fields.py fails when such a config carries a field this table lacks.
_COMMON_FIELDS: dict[str, Any] = {
    "_name_or_path": "modelled", "model_type": "modelled", "vocab_size": "modelled",
    "tie_word_embeddings": "modelled",
    "architectures": ("irrelevant", "the head class a checkpoint was saved from; symtrans reads the base model"),
    "transformers_version": ("irrelevant", "provenance only"),
    "dtype": ("irrelevant", "the loader reads each tensor's stored dtype; the analysis dtype is --dtype"),
    "initializer_range": ("irrelevant", "random initialisation only; a checkpoint's weights are read"),
    "use_cache": ("irrelevant", "key/value caching during generation: the same function"),
    "output_attentions": ("irrelevant", "which outputs transformers returns, not what it computes"),
    "output_hidden_states": ("irrelevant", "which outputs transformers returns, not what it computes"),
    "return_dict": ("irrelevant", "the return container, not what is computed"),
    "bos_token_id": ("irrelevant", "a token id for generation; symtrans feeds its own ids"),
    "eos_token_id": ("irrelevant", "a token id for generation; symtrans feeds its own ids"),
    "pad_token_id": ("irrelevant", "the padding row's id; symtrans measures unpadded inputs (the row gets no "
                                   "gradient, the forward is unchanged)"),
    "id2label": ("irrelevant", "labels of a classification head"),
    "label2id": ("irrelevant", "labels of a classification head"),
    "problem_type": ("irrelevant", "the loss of a classification head"),
    "chunk_size_feed_forward": ("irrelevant", "the feed-forward applied in chunks of tokens: the same function"),
    "is_encoder_decoder": ("refused", False, "an encoder-decoder model"),
    "add_cross_attention": ("refused", False, "cross-attention"),
}
_DROPOUT = ("irrelevant", "dropout: off at evaluation")
_BERT_FIELDS: dict[str, Any] = {
    **{k: "modelled" for k in ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                               "max_position_embeddings", "hidden_act", "layer_norm_eps", "type_vocab_size")},
    "attention_probs_dropout_prob": _DROPOUT, "hidden_dropout_prob": _DROPOUT, "classifier_dropout": _DROPOUT,
    "is_decoder": ("refused", False, "a causal encoder; the encoder is measured bidirectionally"),
    "tie_word_embeddings": ("irrelevant", "ties the masked-LM head, after the hidden states symtrans measures"),
}
_LLAMA_FIELDS: dict[str, Any] = {
    **{k: "modelled" for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
                               "intermediate_size", "max_position_embeddings", "hidden_act", "rms_norm_eps",
                               "rope_parameters", "head_dim", "attention_bias", "mlp_bias")},
    "attention_dropout": _DROPOUT,
}
_SLIDING = {k: "modelled" for k in ("sliding_window", "use_sliding_window", "layer_types")}
CONFIG_FIELDS: dict[str, dict[str, Any]] = {
    "bert": {**_COMMON_FIELDS, **_BERT_FIELDS},
    "roberta": {**_COMMON_FIELDS, **_BERT_FIELDS, "pad_token_id": "modelled"},  # positions start at pad_token_id + 1
    "distilbert": {**_COMMON_FIELDS, **{k: "modelled" for k in (
        "n_layers", "n_heads", "dim", "hidden_dim", "max_position_embeddings", "activation", "sinusoidal_pos_embds")},
        **{k: _DROPOUT for k in ("dropout", "attention_dropout", "qa_dropout", "seq_classif_dropout")},
        "tie_word_embeddings": ("irrelevant", "ties the masked-LM head, after the hidden states symtrans measures")},
    "gpt2": {**_COMMON_FIELDS, **{k: "modelled" for k in (
        "n_layer", "n_head", "n_embd", "n_inner", "n_positions", "activation_function", "layer_norm_epsilon")},
        **{k: _DROPOUT for k in ("attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_first_dropout")},
        **{k: ("irrelevant", "the sequence-summary head of GPT2DoubleHeadsModel, after the hidden states")
           for k in ("summary_activation", "summary_proj_to_labels", "summary_type", "summary_use_proj")},
        "reorder_and_upcast_attn": ("irrelevant", "the scores' scaling order and float32 upcast: the same function "
                                                  "in exact arithmetic (symtrans computes in float64)"),
        "scale_attn_by_inverse_layer_idx": ("refused", False, "scores scaled by 1 / (layer index + 1)"),
        "scale_attn_weights": ("refused", True, "scores not scaled by 1/sqrt(d_k)")},
    "llama": {**_COMMON_FIELDS, **_LLAMA_FIELDS,
              "pretraining_tp": ("irrelevant", "not read by transformers' Llama modelling (the same linear maps)")},
    "mistral": {**_COMMON_FIELDS, **_LLAMA_FIELDS, "sliding_window": "modelled"},
    "qwen2": {**_COMMON_FIELDS, **_LLAMA_FIELDS, **_SLIDING,
              "max_window_layers": ("irrelevant", "places the sliding layers, and sliding windows are refused by "
                                                  "name (use_sliding_window, layer_types)")},
    "qwen3": {**_COMMON_FIELDS, **_LLAMA_FIELDS, **_SLIDING,
              "max_window_layers": ("irrelevant", "places the sliding layers, and sliding windows are refused by "
                                                  "name (use_sliding_window, layer_types)")},
    "gemma3_text": {**_COMMON_FIELDS, **_LLAMA_FIELDS, **_SLIDING, **{k: "modelled" for k in (
        "hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping")},
        "_sliding_window_pattern": ("irrelevant", "kept for old configs; transformers reads layer_types, which "
                                                  "symtrans reads (or derives from sliding_window_pattern)"),
        "use_bidirectional_attention": ("refused", False, "bidirectional attention; causal attention only")},
    "phi3": {**_COMMON_FIELDS, **_LLAMA_FIELDS, "sliding_window": "modelled", "embd_pdrop": _DROPOUT,
             "resid_pdrop": _DROPOUT,
             "original_max_position_embeddings": ("irrelevant", "longrope's original context length: read inside "
                                                  "rope_parameters, which a longrope type must carry (refused "
                                                  "without it); unused by default rotary positions")},
    "olmo2": {**_COMMON_FIELDS, **_LLAMA_FIELDS},
    "gpt_neox": {**_COMMON_FIELDS, **{k: "modelled" for k in (
        "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "max_position_embeddings",
        "hidden_act", "layer_norm_eps", "rope_parameters", "attention_bias", "use_parallel_residual")},
        **{k: _DROPOUT for k in ("attention_dropout", "hidden_dropout", "classifier_dropout")},
        "is_decoder": ("irrelevant", "not read by transformers' GPT-NeoX modelling: its attention is always causal")},
    "smollm3": {**_COMMON_FIELDS, **_LLAMA_FIELDS, **_SLIDING, "no_rope_layers": "modelled",
                "no_rope_layer_interval": "modelled"},
}
CONFIG_FIELDS["gemma2"] = {**CONFIG_FIELDS["gemma3_text"]}
CONFIG_FIELDS["electra"] = {**CONFIG_FIELDS["bert"], "embedding_size": "modelled", "summary_last_dropout": _DROPOUT,
                            **{k: ("irrelevant", "the sequence-summary head of ElectraForSequenceClassification")
                               for k in ("summary_activation", "summary_type", "summary_use_proj")}}


def config_field(model_type: str, key: str) -> Any:
    """What ``from_config`` does with field ``key`` of a ``model_type`` config (:data:`CONFIG_FIELDS`); None if unlisted.

    Aliases read as their family (xlm-roberta and camembert as roberta, electra as bert).

    Examples
    --------
    >>> config_field("gpt2", "n_embd"), config_field("llama", "use_cache")[0]
    ('modelled', 'irrelevant')
    >>> config_field("gpt2", "scale_attn_weights")[:2], config_field("bert", "new_field") is None
    (('refused', True), True)
    """
    table = CONFIG_FIELDS.get(model_type) or CONFIG_FIELDS.get(_FAMILY_ALIASES.get(model_type, model_type), {})
    return table.get(key)


def unaudited_fields(model_type: str, fields: Any) -> list[str]:
    """The fields of a config dict that :data:`CONFIG_FIELDS` does not account for, sorted (``[]``: all audited).

    Examples
    --------
    >>> unaudited_fields("gpt2", {"n_embd": 8, "use_cache": True, "attn_softmax_temperature": 2})
    ['attn_softmax_temperature']
    """
    return sorted(k for k in fields if config_field(model_type, k) is None)


def _refuse_fields(cfg: dict[str, Any], model_type: str, shown: str) -> None:
    """Refuse, in one line naming it, a field :data:`CONFIG_FIELDS` marks refused and the config sets off its default."""
    for key, value in cfg.items():
        row = config_field(model_type, key)
        if isinstance(row, tuple) and row[0] == "refused" and value is not None and (
                value != row[1] or type(value) is not type(row[1])):
            raise SymtransError(f"{shown}: field {key!r} = {terminal_safe(repr(value))[:80]} ({row[2]}) is not "
                                "modelled")


def _int_key(cfg: dict[str, Any], key: str, path: str, default: int | None = None,
             minimum: int = 1) -> int:
    value = cfg.get(key)
    if value is None:  # absent, or written as null by transformers (GPT-2's n_inner)
        value = default
    if value is None:
        raise SymtransError(f"{path}: missing required key {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise SymtransError(f"{path}: key {key!r} must be {what}, got {value!r}")
    return value


def _float_key(cfg: dict[str, Any], key: str, path: str, default: float) -> float:
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise SymtransError(f"{path}: key {key!r} must be a positive number, got {value!r}")
    return float(value)


def _bool_key(cfg: dict[str, Any], key: str, path: str, default: bool = False) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SymtransError(f"{path}: key {key!r} must be true or false, got {value!r}")
    return value


def from_config(path: str | os.PathLike[str], n: int | None = None) -> Architecture:
    """Build an architecture from a Hugging Face ``config.json`` (or its directory).

    Supported ``model_type``: bert, roberta (and xlm-roberta, camembert),
    distilbert, gpt2, llama (and mistral: grouped-query attention,
    rotary positions, RMSNorm, gated SiLU feed-forward, no biases), qwen2
    (llama-like with biases on Q, K and V only: ``qkv_bias``). Structural
    options the toolkit does not model are refused with the key named:
    GPT-2's ``scale_attn_by_inverse_layer_idx`` or ``scale_attn_weights=false``,
    a ``rope_type`` transformers does not define, a ``partial_rotary_factor``
    below 1. A rotary scaling (Llama 3.x's ``llama3``, ``linear``, ``yarn``, ...)
    is recorded in ``rope_scaling``; only position-dependent computations use it.
    Every field of transformers' config of an accepted type is accounted for in
    :data:`CONFIG_FIELDS` (modelled, irrelevant with a reason, or refused by
    name when set off its default).

    Examples
    --------
    >>> import json, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4,
    ...        "hidden_size": 64, "intermediate_size": 256, "max_position_embeddings": 128,
    ...        "vocab_size": 1000, "type_vocab_size": 2}
    >>> with open(os.path.join(d, "config.json"), "w") as fh:
    ...     json.dump(cfg, fh)
    >>> a = from_config(d)
    >>> a.L, a.H, a.d_k, a.n
    (2, 4, 16, 128)
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    shown = str(p)
    if not p.exists():
        raise SymtransError(f"{shown}: no such config file")
    cfg = read_json_file(p, "config", CONFIG_MAX_BYTES)  # regular file, bounded size and nesting, strict JSON
    if not isinstance(cfg, dict):
        raise SymtransError(f"{shown}: a config must be a JSON object, not {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise SymtransError(f"{shown}: missing 'model_type'; cannot tell the architecture family")
    family = _FAMILY_ALIASES.get(model_type, model_type)
    if family not in _FAMILY_KEYS:
        arch = _from_autoconfig(cfg, model_type, shown, _config_name(cfg, p, model_type, shown))
        return arch.with_sizes(n=n) if n is not None else arch
    kL, kH, kD, kF, kP = _FAMILY_KEYS[family]
    L = _int_key(cfg, kL, shown)
    H = _int_key(cfg, kH, shown)
    d_model = _int_key(cfg, kD, shown)
    d_ff = _int_key(cfg, kF, shown, default=4 * d_model if family == "gpt2" else None)
    positions = _int_key(cfg, kP, shown)
    vocab = _int_key(cfg, "vocab_size", shown)
    head_dim = _int_key(cfg, "head_dim", shown, default=0, minimum=0) \
        if family in ("llama", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "olmo2", "smollm3") else 0
    if not head_dim and d_model % H:
        raise SymtransError(f"{shown}: hidden size {d_model} is not divisible by {H} heads")
    _refuse_fields(cfg, model_type, shown)  # CONFIG_FIELDS: every field transformers reads, audited
    name = _config_name(cfg, p, model_type, shown)
    common: dict[str, Any] = dict(name=name, family=family, L=L, H=H, d_model=d_model,
                                  d_ff=d_ff, vocab_size=vocab, source=shown)
    if family in ("bert", "roberta"):
        if cfg.get("position_embedding_type") not in (None, "absolute"):
            raise SymtransError(
                f"{shown}: position_embedding_type {cfg['position_embedding_type']!r} is not modelled"
                " (only 'absolute')")
        if model_type == "electra":
            emb = _int_key(cfg, "embedding_size", shown, default=_ELECTRA_EMBEDDING_SIZE)
            if emb != d_model:
                raise SymtransError(f"{shown}: embedding_size {emb} != hidden_size {d_model} (ELECTRA's projection "
                                    "of the embeddings, embeddings_project) is not modelled")
        # RoBERTa numbers positions from pad_token_id + 1 (create_position_ids_from_input_ids)
        pad = _int_key(cfg, "pad_token_id", shown, default=1, minimum=0) if family == "roberta" else -1
        usable = positions - pad - 1
        if usable < 1:
            raise SymtransError(f"{shown}: pad_token_id {pad} leaves no position of the {positions} rows")
        arch = Architecture(
            **common, n=default_n(usable), H_kv=H, d_k=d_model // H, d_v=d_model // H,
            max_positions=usable, position_table=positions,
            activation=_activation(cfg.get("hidden_act", "gelu"), shown),
            type_vocab_size=_int_key(cfg, "type_vocab_size", shown, default=2, minimum=0),
            pooler=model_type != "electra",
            embedding_norm=True, ln_eps=_float_key(cfg, "layer_norm_eps", shown, 1e-12))
    elif family == "distilbert":
        arch = Architecture(
            **common, n=default_n(positions), H_kv=H, d_k=d_model // H, d_v=d_model // H,
            max_positions=positions, position_table=positions,
            activation=_activation(cfg.get("activation", "gelu"), shown),
            positional="sinusoidal" if _bool_key(cfg, "sinusoidal_pos_embds", shown) else "learned",
            embedding_norm=True, ln_eps=1e-12)
    elif family == "gpt2":
        arch = Architecture(
            **common, n=default_n(positions), H_kv=H, d_k=d_model // H, d_v=d_model // H,
            max_positions=positions, position_table=positions, norm_placement="pre",
            activation=_activation(cfg.get("activation_function", "gelu_new"), shown),
            attention="causal", final_norm=True,
            tied_lm_head=_bool_key(cfg, "tie_word_embeddings", shown, default=True),
            ln_eps=_float_key(cfg, "layer_norm_epsilon", shown, 1e-5))
    elif family == "gpt_neox":
        arch = _gpt_neox(cfg, common, shown, positions)
    elif family in ("gemma3", "gemma2"):
        arch = _gemma3(cfg, common, shown, positions, head_dim or d_model // H, L)
    else:  # llama-like
        H_kv = _int_key(cfg, "num_key_value_heads", shown, default=H)
        head_dim = head_dim or d_model // H
        rope_scaling = _check_rope(cfg, shown)
        bias = _bool_key(cfg, "attention_bias", shown) if family != "phi3" else False  # phi3 reads no bias flag
        qkv_bias = family == "qwen2"
        if qkv_bias and bias:
            raise SymtransError(f"{shown}: attention_bias=true is not part of the qwen2 structure")
        window = None
        if family in ("qwen2", "qwen3"):
            _qwen3_checks(cfg, shown, L, family)
        rope_layers = _smollm3_rope_layers(cfg, shown, L) if family == "smollm3" else ()
        if cfg.get("sliding_window") is not None and _bool_key(cfg, "use_sliding_window", shown, default=True):
            if model_type not in ("mistral", "phi3"):
                raise SymtransError(f"{shown}: sliding_window with model_type {model_type!r} is not modelled "
                                    "(per-layer windows); only mistral's and phi3's window on every layer")
            window = _int_key(cfg, "sliding_window", shown)
        if family != "phi3" and _bool_key(cfg, "mlp_bias", shown) != bias:
            raise SymtransError(
                f"{shown}: attention_bias={bias} with mlp_bias={not bias} is not modelled"
                " (one bias flag covers attention and feed-forward)")
        arch = Architecture(
            **common, n=default_n(positions), H_kv=H_kv, d_k=int(head_dim), d_v=int(head_dim),
            max_positions=positions, position_table=None, norm_placement="pre",
            norm="rmsnorm", activation=_activation(cfg.get("hidden_act", "silu"), shown),
            ffn="gated", bias=bias, qkv_bias=qkv_bias, attention="causal",
            positional="rotary", final_norm=True,
            tied_lm_head=_bool_key(cfg, "tie_word_embeddings", shown),
            ln_eps=_float_key(cfg, "rms_norm_eps", shown, 1e-6), head_dim_tied=False, rope_scaling=rope_scaling,
            sliding_window=window if window is not None and window < positions else None,
            qk_norm=family in ("qwen3", "olmo2"), qk_norm_full=family == "olmo2", post_norms=family == "olmo2",
            pre_norms=family != "olmo2", rope_layers=rope_layers)
    return arch.with_sizes(n=n) if n is not None else arch


def neox_rotary(cfg: dict[str, Any], shown: str) -> tuple[float, float]:
    """GPT-NeoX's ``(rotary base, partial rotary factor)``, read as ``transformers``' ``GPTNeoXConfig`` reads them.

    The rotary parameters are ``rope_scaling``, else ``rope_parameters``; the
    base is their ``rope_theta``, else ``rotary_emb_base``, else 10000 (a
    top-level ``rope_theta`` is not read); the factor their
    ``partial_rotary_factor``, else ``rotary_pct``, else 0.25 (a top-level
    ``partial_rotary_factor`` is not read).

    Examples
    --------
    >>> neox_rotary({"rotary_pct": 0.25, "rotary_emb_base": 10000}, "c.json")
    (10000.0, 0.25)
    >>> neox_rotary({"rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 1.0},
    ...              "rotary_pct": 0.5}, "c.json")
    (500.0, 1.0)
    """
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        raise SymtransError(f"{shown}: key 'rope_parameters' must be an object, got {type(rope).__name__}")
    theta = _float_key({"rope_theta": rope.get("rope_theta", cfg.get("rotary_emb_base"))}, "rope_theta", shown,
                       DEFAULT_ROPE_THETA)
    factor = rope.get("partial_rotary_factor", cfg.get("rotary_pct", 0.25))
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise SymtransError(f"{shown}: rotary_pct (partial_rotary_factor) must be a number in (0, 1], got "
                            f"{terminal_safe(repr(factor))[:80]}")
    return theta, float(factor)


def _gpt_neox(cfg: dict[str, Any], common: dict[str, Any], shown: str, positions: int) -> Architecture:
    """GPT-NeoX/Pythia (``model_type`` gpt_neox) from its config, every field ``transformers`` reads checked.

    Modelled: ``use_parallel_residual`` (default true), the partial rotary
    factor and base (:func:`neox_rotary`), ``layer_norm_eps``, ``hidden_act``,
    ``tie_word_embeddings`` (default false). Refused by name:
    ``attention_bias=false`` (biases on the MLP but not on attention, which
    one bias flag cannot express) and a rotated width that is not an even
    whole number.
    """
    if not _bool_key(cfg, "attention_bias", shown, default=True):
        raise SymtransError(f"{shown}: attention_bias=false (gpt_neox's MLP keeps its biases, attention loses them) "
                            "is not modelled")
    d_k = common["d_model"] // common["H"]
    _, factor = neox_rotary(cfg, shown)
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    scaling = _check_rope({"rope_parameters": {k: v for k, v in rope.items() if k != "partial_rotary_factor"}},
                          shown)
    if factor < 1 and (d_k * factor) % 2:
        raise SymtransError(f"{shown}: rotary_pct {factor:g} of head width {d_k} rotates {d_k * factor:g} "
                            "coordinates; an even whole number is modelled")
    return Architecture(
        **common, n=default_n(positions), H_kv=common["H"], d_k=d_k, d_v=d_k, max_positions=positions,
        position_table=None, norm_placement="pre", norm="layernorm",
        activation=_activation(cfg.get("hidden_act", "gelu"), shown), ffn="mlp", bias=True, attention="causal",
        positional="rotary", final_norm=True, tied_lm_head=_bool_key(cfg, "tie_word_embeddings", shown),
        ln_eps=_float_key(cfg, "layer_norm_eps", shown, 1e-5), rope_scaling=scaling,
        parallel_residual=_bool_key(cfg, "use_parallel_residual", shown, default=True),
        partial_rotary_factor=factor)


def _qwen3_checks(cfg: dict[str, Any], shown: str, L: int, family: str = "qwen3") -> None:
    """Qwen2's and Qwen3's fields beyond Llama's: per-layer sliding windows are refused by name (full attention only)."""
    if _bool_key(cfg, "use_sliding_window", shown):
        raise SymtransError(f"{shown}: use_sliding_window=true ({family}'s per-layer sliding windows) is not modelled")
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or len(types) != L
                              or any(t != "full_attention" for t in types)):
        raise SymtransError(f"{shown}: layer_types other than 'full_attention' on every one of the {L} layers "
                            f"({family}'s sliding layers) are not modelled")


def _smollm3_rope_layers(cfg: dict[str, Any], shown: str, L: int) -> tuple[bool, ...]:
    """SmolLM3's ``no_rope_layers`` (1: rotary, 0: NoPE) per layer, derived from ``no_rope_layer_interval`` when absent.

    transformers' SmolLM3Config writes the list as ``(i + 1) % interval != 0``
    when the config gives none; every other field it reads is Llama's, except
    per-layer sliding windows (refused by name). Returns ``()`` when every layer
    is rotary. :data:`_MODELLED_LAYER_LISTS` names the list read here (a planted
    misreading test empties it: the model then reads as plain Llama).

    Examples
    --------
    >>> _smollm3_rope_layers({"no_rope_layer_interval": 2}, "c.json", 4)
    (True, False, True, False)
    >>> _smollm3_rope_layers({"no_rope_layers": [1, 1]}, "c.json", 2)
    ()
    """
    if _bool_key(cfg, "use_sliding_window", shown) and cfg.get("sliding_window") is not None:
        raise SymtransError(f"{shown}: use_sliding_window=true (smollm3's sliding windows on NoPE layers) is not "
                            "modelled")
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or len(types) != L
                              or any(t != "full_attention" for t in types)):
        raise SymtransError(f"{shown}: layer_types other than 'full_attention' on every one of the {L} layers "
                            "(smollm3's sliding layers) are not modelled")
    if "no_rope_layers" not in _MODELLED_LAYER_LISTS:
        return ()
    value = cfg.get("no_rope_layers")
    if value is None:
        k = _int_key(cfg, "no_rope_layer_interval", shown, default=4)
        value = [int((i + 1) % k != 0) for i in range(L)]
    if not isinstance(value, list) or len(value) != L or any(v not in (0, 1) or isinstance(v, float) for v in value):
        raise SymtransError(f"{shown}: no_rope_layers must list 0 (NoPE) or 1 (rotary) for each of the {L} layers")
    flags = tuple(bool(v) for v in value)
    return () if all(flags) else flags


def _gemma3(cfg: dict[str, Any], common: dict[str, Any], shown: str, positions: int, head_dim: int,
            L: int) -> Architecture:
    """Gemma 3's text decoder (``model_type`` gemma3_text) from its config, every field it reads checked.

    Layer types come from ``layer_types`` or, in older configs, from
    ``sliding_window_pattern`` (every ``k``-th layer full, as transformers
    derives them); the rotary bases from ``rope_parameters`` per layer type or
    the older ``rope_theta`` / ``rope_local_base_freq``. Gemma 2 (``family``
    gemma2) is the same structure without QK-norm, with soft-capping of the
    attention scores and the output logits, layers alternating sliding and full
    from layer 0 (older configs: no ``layer_types``), and one rotary base.
    """
    gemma2 = common["family"] == "gemma2"
    caps: dict[str, float | None] = {}
    for key, what in _GEMMA3_REFUSED.items():
        if cfg.get(key) is not None and not gemma2:
            raise SymtransError(f"{shown}: {key} = {cfg[key]!r} ({what}) is not modelled")
        if gemma2 and cfg.get(key) is not None:  # a positive cap c: s -> c tanh(s / c)
            caps[key] = _float_key(cfg, key, shown, 1.0)
    if _bool_key(cfg, "attention_bias", shown):
        raise SymtransError(f"{shown}: attention_bias=true is not modelled for {common['family']} (no biases)")
    types = cfg.get("layer_types")
    if types is None:
        k = _int_key(cfg, "sliding_window_pattern", shown, default=2 if gemma2 else 6)
        types = ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(L)]
    if not isinstance(types, list) or len(types) != L or any(t not in ("sliding_attention", "full_attention")
                                                              for t in types):
        raise SymtransError(f"{shown}: layer_types must list 'sliding_attention' or 'full_attention' for each of "
                            f"the {L} layers")
    kinds = tuple("sliding" if t == "sliding_attention" else "full" for t in types)
    rope = cfg.get("rope_parameters")
    bases = {"full": cfg.get("rope_theta", 1_000_000.0), "sliding": cfg.get("rope_local_base_freq", 10_000.0)}
    if gemma2:  # one rotary base on every layer
        bases = {"full": cfg.get("rope_theta", 10_000.0), "sliding": cfg.get("rope_theta", 10_000.0)}
    scaling: tuple[tuple[str, Any], ...] = ()
    if rope is not None:
        if not isinstance(rope, dict):
            raise SymtransError(f"{shown}: key 'rope_parameters' must be an object, got {rope!r}"[:300])
        per_type = {"full": rope.get("full_attention"), "sliding": rope.get("sliding_attention")}
        if not any(isinstance(v, dict) for v in per_type.values()):
            per_type = {"full": rope, "sliding": rope if gemma2 else None}  # one set for the global layers
        for kind, sub in per_type.items():
            if sub is None:
                continue
            scaling = scaling or _check_rope({"rope_parameters": sub}, f"{shown} ({kind}_attention)")
            if sub.get("rope_theta") is not None:
                bases[kind] = sub["rope_theta"]
    for kind, theta in bases.items():
        _float_key({"v": theta}, "v", f"{shown} (rotary base of the {kind} layers)", 1.0)
    window = _int_key(cfg, "sliding_window", shown) if "sliding" in kinds else None
    return Architecture(
        **common, n=default_n(positions), H_kv=_int_key(cfg, "num_key_value_heads", shown, default=common["H"]),
        d_k=int(head_dim), d_v=int(head_dim), max_positions=positions, position_table=None, norm_placement="pre",
        norm="rmsnorm", activation=_activation(cfg.get("hidden_activation") or cfg.get("hidden_act") or
                                               "gelu_pytorch_tanh", shown),
        ffn="gated", bias=False, attention="causal", positional="rotary", final_norm=True,
        tied_lm_head=_bool_key(cfg, "tie_word_embeddings", shown, default=True),
        ln_eps=_float_key(cfg, "rms_norm_eps", shown, 1e-6), head_dim_tied=False, rope_scaling=scaling,
        sliding_window=window, qk_norm=not gemma2, post_norms=True, gain_offset=1, embedding_scale=True,
        attn_scalar=_float_key(cfg, "query_pre_attn_scalar", shown, 256.0), layer_types=kinds,
        rope_bases=tuple(sorted((k, float(v)) for k, v in bases.items())),
        attn_softcap=caps.get("attn_logit_softcapping"), final_softcap=caps.get("final_logit_softcapping"))


#: per-layer modules (with parameters) of a Llama-structured decoder layer in transformers
_LLAMA_MODULES = frozenset({"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
                            "post_attention_layernorm"})
#: config fields naming structure the toolkit does not model (refused when set)
_UNMODELLED_FLAGS = ("is_encoder_decoder", "use_parallel_residual", "parallel_attn", "new_decoder_architecture",
                     "alibi", "multi_query", "add_cross_attention")
_UNMODELLED_VALUES = ("attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar")
#: config fields counting the experts of a mixture-of-experts FFN (Mixtral, gpt-oss, Qwen2-MoE, DeepSeek)
_EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
#: model types transformers knows whose structure the Llama mapping cannot express: the feature, named
_UNSUPPORTED_TYPES = {
    "mpnet": "relative position buckets added to the attention scores (field 'relative_attention_num_buckets')",
    "modernbert": "alternating local and global attention (field 'local_attention') with bias-free LayerNorms",
    "deberta-v2": "disentangled attention with relative positions (fields 'relative_attention', 'pos_att_type')",
    "opt": "OPT's decoder: learned positions offset by 2, LayerNorms, a ReLU MLP (fc1/fc2) and an optional "
           "embedding projection (word_embed_proj_dim)",
    "phi": "parallel attention and MLP read from one LayerNorm per layer, with rotary positions on part of each "
           "head (partial_rotary_factor)",
    "bloom": "ALiBi biases on the attention scores (no position embeddings)",
    "starcoder2": "LayerNorms with biases and a non-gated MLP (c_fc/c_proj) around rotary attention",
    "cohere": "parallel attention and MLP read from one LayerNorm per layer, and logits scaled by logit_scale",
}
#: per-layer config lists symtrans reads for a family (SmolLM3's NoPE layers: Architecture.rope_layers); a planted
#: misreading (tests/test_complete_independent.py) empties this table and --complete must disagree
_MODELLED_LAYER_LISTS = {"no_rope_layers": "smollm3"}
#: per-layer config lists in which a false entry marks a layer unlike Llama's, in a model type read through
#: AutoConfig (smollm3 itself is read natively): refused when any entry is false
_REFUSED_LAYER_LISTS = {
    "no_rope_layers": "layers without rotary positions (NoPE) outside model_type 'smollm3'",
}


def _config_name(cfg: dict[str, Any], p: Path, model_type: str, shown: str) -> str:
    """The model's name: the config's ``_name_or_path`` (a path or hub id, so at most PATH_MAX long), else its folder."""
    raw = cfg.get("_name_or_path")
    if raw is not None and not isinstance(raw, str):
        raise SymtransError(f"{shown}: _name_or_path must be a string, got {type(raw).__name__}")
    if raw is not None and len(raw) > MAX_NAME_CHARS:
        raise SymtransError(f"{shown}: _name_or_path has {len(raw)} characters (at most {MAX_NAME_CHARS}, a "
                            "path's limit)")
    return str(raw or p.parent.name or model_type)


def _from_autoconfig(cfg: dict[str, Any], model_type: str, shown: str, name: str) -> Architecture:
    """An unknown ``model_type`` through ``transformers.AutoConfig``: mapped if Llama-structured, else refused.

    Sizes are read through the config's standard attribute names. The layer
    structure is read from the modules ``transformers`` builds for that model
    type (on the meta device: no memory, no weights): a decoder layer whose
    modules are exactly Llama's (separate q/k/v/o projections, gate/up/down
    feed-forward, two norms) with RMSNorm and default rotary positions maps to
    a pre-LN rotary RMSNorm gated decoder of family ``model_type``. Anything
    else is refused with the field or module named. The numeric forward does
    not run such a family (it is parity-tested per family); formulas and the
    group use the architecture.
    """
    def refuse(what: str) -> SymtransError:
        return SymtransError(f"{shown}: unsupported model_type {model_type!r}: {what} is not modelled")

    try:
        import transformers
    except ImportError:
        raise SymtransError(f"{shown}: unsupported model_type {model_type!r} (and transformers, needed to read "
                            "other model types, is not installed)") from None
    rope_theta(cfg, shown)  # the config's own rotary base, before transformers reads (or rewrites) it
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        conf = transformers.AutoConfig.for_model(model_type, **fields)
    except Exception:
        raise SymtransError(f"{shown}: unsupported model_type {model_type!r}; supported: "
                            + ", ".join(sorted(set(_FAMILY_KEYS) | set(_FAMILY_ALIASES)))
                            + ", and Llama-structured types transformers knows") from None
    for key in _UNMODELLED_FLAGS:
        if getattr(conf, key, None):
            raise refuse(f"field {key!r} = {getattr(conf, key)!r}")
    for key in _UNMODELLED_VALUES:
        if getattr(conf, key, None) is not None:
            raise refuse(f"field {key!r} = {getattr(conf, key)!r}")
    for key in _EXPERT_FIELDS:  # before any other field: a router and experts replace the FFN
        value = getattr(conf, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            raise refuse(f"a mixture of experts (field {key!r} = {value})")
    if model_type in _UNSUPPORTED_TYPES:
        raise refuse(_UNSUPPORTED_TYPES[model_type])
    if getattr(conf, "rms_norm_eps", None) is None:
        raise refuse("a norm other than RMSNorm (field 'rms_norm_eps' absent)")
    rope = getattr(conf, "rope_parameters", None) or getattr(conf, "rope_scaling", None)
    if rope is None and getattr(conf, "rope_theta", None) is None:
        raise refuse("a position scheme other than rotary (field 'rope_parameters' absent)")
    rope_scaling = _check_rope({"rope_parameters": rope,
                                "partial_rotary_factor": getattr(conf, "partial_rotary_factor", None)}, shown)
    if getattr(conf, "sliding_window", None) is not None and getattr(conf, "use_sliding_window", True):
        raise refuse(f"field 'sliding_window' = {conf.sliding_window!r}")
    for key, what in _REFUSED_LAYER_LISTS.items():  # a per-layer list with a layer the Llama mapping would misread
        value = getattr(conf, key, None)
        if isinstance(value, (list, tuple)) and not all(value):
            raise refuse(f"field {key!r} ({what})")
    layer = _first_layer(transformers, conf, shown, refuse)
    own = {n for n, m in layer.named_modules() if n and any(True for _ in m.parameters(recurse=False))}
    if own - _LLAMA_MODULES:
        raise refuse(f"module {sorted(own - _LLAMA_MODULES)[0]!r} in the decoder layer")
    if _LLAMA_MODULES - own:
        raise refuse(f"a decoder layer without module {sorted(_LLAMA_MODULES - own)[0]!r}")
    mods = dict(layer.named_modules())
    biased = {k: getattr(mods[k], "bias", None) is not None for k in _LLAMA_MODULES if k.count("proj")}
    qkv = all(biased[f"self_attn.{t}_proj"] for t in "qkv")
    rest = any(biased[k] for k in biased if not k.startswith(("self_attn.q", "self_attn.k", "self_attn.v")))
    if rest and not all(biased.values()):
        raise refuse("biases on some of o_proj/gate_proj/up_proj/down_proj only")
    if not qkv and any(biased[f"self_attn.{t}_proj"] for t in "qkv"):
        raise refuse("biases on some of q_proj/k_proj/v_proj only")
    act = getattr(conf, "hidden_activation", None) or getattr(conf, "hidden_act", None)
    H = _int_key({"v": conf.num_attention_heads}, "v", f"{shown} (num_attention_heads)")
    D = _int_key({"v": conf.hidden_size}, "v", f"{shown} (hidden_size)")
    head_dim = getattr(conf, "head_dim", None) or D // H
    return Architecture(
        name=name, family=model_type, n=default_n(int(conf.max_position_embeddings)),
        L=int(conf.num_hidden_layers), H=H, H_kv=int(getattr(conf, "num_key_value_heads", None) or H),
        d_model=D, d_k=int(head_dim), d_v=int(head_dim), d_ff=int(conf.intermediate_size),
        vocab_size=int(conf.vocab_size), max_positions=int(conf.max_position_embeddings), position_table=None,
        norm_placement="pre", norm="rmsnorm", activation=_activation(act, shown), ffn="gated",
        bias=rest, qkv_bias=qkv and not rest, attention="causal", positional="rotary", final_norm=True,
        tied_lm_head=bool(getattr(conf, "tie_word_embeddings", False)), ln_eps=float(conf.rms_norm_eps),
        head_dim_tied=False, source=shown, rope_scaling=rope_scaling,
        notes=(f"model_type {model_type!r} mapped through transformers.AutoConfig and its layer modules "
               "(Llama-structured); the numeric forward is not verified for it",))


def _first_layer(transformers: Any, conf: Any, shown: str, refuse: Any) -> Any:
    """Layer 0 of the model ``transformers`` builds for ``conf``, on the meta device (no memory)."""
    import copy

    import torch

    small = copy.deepcopy(conf)
    small.num_hidden_layers = 1
    try:
        with torch.device("meta"):
            model = transformers.AutoModel.from_config(small)
    except Exception as err:
        raise refuse(f"a model transformers cannot build here ({type(err).__name__})") from None
    for mod in model.modules():
        layers = getattr(mod, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers):
            return layers[0]
    raise refuse("a model without a 'layers' list of decoder layers")


def _check_rope(cfg: dict[str, Any], path: str) -> tuple[tuple[str, Any], ...]:
    """Read a config's rotary scaling (``rope_scaling`` / ``rope_parameters``): ``()`` for default rotary.

    Every ``rope_type`` transformers defines is accepted with its required
    fields (:data:`ROPE_TYPES`) and returned as sorted ``(field, value)`` pairs,
    ``rope_theta`` left out (the numeric forward reads it). It changes rotary
    frequencies only: position-independent formulas ignore it, and whatever
    needs the frequencies (the numeric forward) refuses a type it does not
    implement, naming it. An unknown type, a missing field or a
    ``partial_rotary_factor`` below 1 is refused here, naming the key.

    Examples
    --------
    >>> _check_rope({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    ...     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}, "c.json")[:2]
    (('rope_type', 'llama3'), ('factor', 8.0))
    >>> _check_rope({"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, "c.json")
    ()
    """
    found: tuple[tuple[str, Any], ...] = ()
    rope_theta(cfg, path)  # a theta that cannot be honoured (0, 1e400, true, "x") is refused with the config
    for key in ("rope_scaling", "rope_parameters"):
        value = cfg.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise SymtransError(f"{path}: key {key!r} must be an object, got {type(value).__name__}")
        kind = value.get("rope_type", value.get("type", "default"))
        if not isinstance(kind, str):
            raise SymtransError(f"{path}: {key}.rope_type must be a string (a rotary type's name), got "
                                f"{type(kind).__name__}")
        if kind not in ROPE_TYPES:
            raise SymtransError(f"{path}: {key}: " + suggest(kind[:80], ROPE_TYPES, "rope_type"))
        missing = [f for f in ROPE_TYPES[kind] if value.get(f) is None]
        if missing:
            raise SymtransError(f"{path}: {key} type {kind!r} needs field {missing[0]!r}")
        for f, v in value.items():
            if f in ("rope_type", "type", "rope_theta", "partial_rotary_factor"):
                continue
            where = f"{key}.{terminal_safe(str(f))[:80]}"
            if f in ("short_factor", "long_factor"):
                if not isinstance(v, list) or len(v) > MAX_ROPE_FACTORS or not all(_positive_number(x) for x in v):
                    raise SymtransError(f"{path}: {where} must be a list of at most {MAX_ROPE_FACTORS} positive "
                                        "finite numbers")
            elif f in _ROPE_NUMBERS or f in ROPE_TYPES[kind]:
                if not _positive_number(v):
                    raise SymtransError(f"{path}: {where} must be a positive finite number, got "
                                        f"{terminal_safe(repr(v))[:80]}")
            elif isinstance(v, (dict, list)):
                raise SymtransError(f"{path}: {where} must be a number, a string or true/false, got "
                                    f"{type(v).__name__}")
        if value.get("partial_rotary_factor", 1.0) not in (None, 1, 1.0):
            raise SymtransError(f"{path}: {key}.partial_rotary_factor below 1 is not modelled")
        if kind != "default":
            found = (("rope_type", kind),) + tuple(sorted(
                (k, tuple(v) if isinstance(v, list) else v) for k, v in value.items()
                if k not in ("rope_type", "type", "rope_theta", "partial_rotary_factor")))
    if cfg.get("partial_rotary_factor", 1.0) not in (None, 1, 1.0):
        raise SymtransError(f"{path}: partial_rotary_factor={cfg['partial_rotary_factor']!r} is not modelled "
                            "(rotary positions on every head dimension only)")
    return found


#: rotary-scaling fields that are positive finite numbers when given (``true`` is not 1)
_ROPE_NUMBERS = frozenset({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
                           "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"})
#: at most this many entries in longrope's short_factor / long_factor (one per rotary frequency)
MAX_ROPE_FACTORS = 1 << 16
#: the rotary base when a config gives none (transformers' default)
DEFAULT_ROPE_THETA = 10000.0


def _positive_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v < float("inf")


def rope_theta(cfg: Any, path: str) -> float:
    """A config's rotary base: ``rope_parameters.rope_theta``, else top-level ``rope_theta``, else 10000.

    The one reading of the field: every value given must be a positive finite
    number (``0``, ``-1``, ``1e400``, ``true``, ``"1e4"`` and lists are
    refused, naming the key), never replaced by the default.

    Examples
    --------
    >>> rope_theta({"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}, "c.json")
    500000.0
    >>> rope_theta({}, "c.json")
    10000.0
    >>> rope_theta({"rope_theta": 0}, "c.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: c.json: key 'rope_theta' must be a positive number, got 0
    >>> rope_theta({"rope_parameters": {"rope_theta": True}}, "c.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: c.json: key 'rope_parameters.rope_theta' must be a positive number, got True
    """
    if not isinstance(cfg, dict):
        raise SymtransError(f"{path}: a config must be an object, got {type(cfg).__name__}")
    top = _float_key(cfg, "rope_theta", path, DEFAULT_ROPE_THETA)
    for key in ("rope_parameters", "rope_scaling"):
        params = cfg.get(key)
        if isinstance(params, dict) and params.get("rope_theta") is not None:
            return _float_key({f"{key}.rope_theta": params["rope_theta"]}, f"{key}.rope_theta", path,
                              DEFAULT_ROPE_THETA)
    return top


def _activation(name: Any, path: str) -> str:
    mapping = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new",
               "relu": "relu", "silu": "silu", "swish": "silu"}
    if not isinstance(name, str) or name not in mapping:
        raise SymtransError(f"{path}: activation {name!r} is not modelled; supported: "
                            + ", ".join(sorted(mapping)))
    return mapping[name]


def get_arch(spec: str | os.PathLike[str] | Architecture, **sizes: Size) -> Architecture:
    """Resolve a preset name, a ``config.json`` path or an architecture, then apply sizes.

    Examples
    --------
    >>> get_arch("bert-large").d_model
    1024
    >>> get_arch("bert-bsae")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown preset 'bert-bsae'; did you mean 'bert-base' or 'roberta-base' or 'bert-large'?
    """
    if not isinstance(spec, (str, os.PathLike, Architecture)):
        raise SymtransError(f"architecture: expected a preset name, a config.json path or an Architecture, "
                            f"got {type(spec).__name__}")
    if isinstance(spec, Architecture):
        arch = spec
    elif str(spec) in PRESETS:
        arch = PRESETS[str(spec)]()
    elif os.path.exists(spec) or str(spec).endswith(".json"):
        arch = from_config(spec)
    else:
        raise SymtransError(suggest(str(spec), PRESETS, "preset"))
    return arch.with_sizes(**sizes) if sizes else arch
