"""One Transformer layer and model, written once for two backends: exact SymPy and torch.

The forward pass covers every feature :class:`~symtrans.group.spec.GroupSpec`
models: post-/pre-LN, LayerNorm/RMSNorm, bidirectional/causal attention,
learned/rotary/no positions, grouped-query attention, MLP/gated FFN with
gelu/gelu_new/relu/silu. Parameters are in block form (per-head tensors are
lists of 2-D blocks, vectors are 1 x m rows), the form
:func:`symtrans.group.spec.act` transforms.

The SymPy backend is exact: softmax rows are written relative to their first
entry with cancelled exponents, ``exp(cancel(s_ij - s_i0))``, so two score
matrices that differ by row constants give literally the same attention; rotary
positions use rational rotations (Pythagorean cosines) so every entry stays
exact. The torch backend is ordinary floating point.

Examples
--------
>>> import sympy as sp
>>> be = SympyBackend()
>>> A = be.softmax(sp.Matrix([[0, 1], [2, 3]]), causal=False)
>>> A[0, 0] == A[1, 0]  # rows differing by a constant give the same softmax
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import sympy as sp

from symtrans.arch import Architecture
from symtrans.catalogue.model import unread_pad_id, unused_position_rows
from symtrans.errors import SymtransError

__all__ = ["Features", "SympyBackend", "TorchBackend", "layer_forward", "model_forward", "stack_forward",
           "unread_pad_id"]


@dataclass(frozen=True)
class Features:
    """The structural choices of a forward pass (read from an :class:`Architecture`).

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> Features.of(get_arch("bert-base")).norm_placement
    'post'
    """

    norm_placement: str = "post"
    norm: str = "layernorm"
    activation: str = "gelu"
    ffn: str = "mlp"
    attention: str = "bidirectional"
    positional: str = "learned"
    eps: float = 1e-12
    embedding_norm: bool = True
    final_norm: bool = False
    pos_offset: int = 0  # unused leading rows of the position table (RoBERTa: padding_idx + 1)
    window: int | None = None  # sliding window: query i sees keys i - window < j <= i (Mistral)
    qk_norm: bool = False  # RMSNorm on each head's queries and keys (gains q_norm_w, k_norm_w), before rotation
    post_norms: bool = False  # a norm on the attention and FFN outputs before the residual add (Gemma 3)
    attn_scalar: float | None = None  # scores scaled by attn_scalar^-1/2 instead of d_k^-1/2
    windows: tuple[int | None, ...] = ()  # per-layer windows (Gemma 3's local/global layers), else ``window``
    attn_softcap: float | None = None  # Gemma 2: scores s -> c tanh(s / c) after scaling, before the mask
    pre_norms: bool = True  # False (OLMo 2): the sub-blocks read the residual stream directly
    qk_norm_full: bool = False  # OLMo 2: one query (key) norm over every head's entries (q_norm_full_w, k_norm_full_w)
    parallel_residual: bool = False  # GPT-NeoX: out = X + MHA(N1(X)) + b_O + FFN(N2(X))
    rotary_dim: int | None = None  # GPT-NeoX: rotary positions on each head's first rotary_dim coordinates only
    ablated: tuple[str, ...] = ()  # components removed (symtrans.arch.ABLATIONS): residual, nonlinearity, norm, wo-mixing
    rope_layers: tuple[bool, ...] = ()  # SmolLM3: per layer, whether rotary positions apply (False: a NoPE layer)

    @classmethod
    def of(cls, arch: Architecture) -> Features:
        """Features of an architecture.

        Examples
        --------
        >>> from symtrans.arch import get_arch
        >>> Features.of(get_arch("gpt2")).attention
        'causal'
        """
        windows = tuple(arch.window_at(i) for i in range(int(arch.L))) if arch.layer_types else ()
        return cls(arch.norm_placement, arch.norm, arch.activation, arch.ffn, arch.attention,
                   arch.positional, arch.ln_eps, arch.embedding_norm, arch.final_norm, unused_position_rows(arch),
                   None if windows else getattr(arch, "sliding_window", None), arch.qk_norm, arch.post_norms,
                   arch.attn_scalar, windows, arch.attn_softcap, arch.pre_norms, arch.qk_norm_full,
                   arch.parallel_residual,
                   int(arch.rotary_width) if arch.partial_rotary_factor != 1 else None, arch.ablated, arch.rope_layers)


# Pythagorean rotations (cos, sin) for exact rotary positions, one per frequency
_PYTHAGOREAN = [(sp.Rational(3, 5), sp.Rational(4, 5)), (sp.Rational(5, 13), sp.Rational(12, 13)),
                (sp.Rational(8, 17), sp.Rational(15, 17)), (sp.Rational(7, 25), sp.Rational(24, 25))]


class SympyBackend:
    """Exact arithmetic on SymPy matrices, with every non-linear value an opaque atom.

    Each application of a non-linear function (``exp``, ``sqrt``, the
    activation) to a canonical argument (:func:`sympy.cancel`) becomes one
    symbol, recorded with its definition; the same function of the same
    canonical argument is the same symbol. Everything else stays a rational
    function of atoms, weights and group-element symbols, so an identity that
    holds for every value of the atoms holds for the real functions too.
    :meth:`evaluate` substitutes the definitions back and evaluates to a given
    precision (used for witnesses, never for certificates). ReLU carries its
    positive homogeneity: ``relu(d t) = d relu(t)`` for a factor ``d`` that
    SymPy knows is positive.

    Examples
    --------
    >>> be = SympyBackend()
    >>> x = sp.Symbol("x")
    >>> be.apply("exp", x + 1) == be.apply("exp", (x**2 + x) / x)
    True
    >>> float(be.evaluate(be.apply("exp", sp.Integer(0)) + be.apply("sqrt", sp.Integer(4))))
    3.0
    """

    name = "sympy"

    def __init__(self, watch: set[sp.Symbol] | frozenset[sp.Symbol] = frozenset(), *,
                 norm_key: str = "multiset") -> None:
        self.atoms: dict[tuple[str, Any], sp.Symbol] = {}
        self.defs: dict[sp.Symbol, sp.Expr] = {}
        self.watch = set(watch)
        self.memos: dict[Any, Any] = {}
        if norm_key not in ("multiset", "value"):
            raise SymtransError(f"norm_key must be 'multiset' or 'value', got {norm_key!r}")
        self.norm_key = norm_key

    def memo(self, key: tuple[Any, ...], compute: Any) -> Any:
        """``compute()`` cached by ``key`` (pure functions of equal exact inputs are equal)."""
        key = tuple(sp.ImmutableMatrix(k) if isinstance(k, sp.MatrixBase) else k for k in key)
        if key not in self.memos:
            self.memos[key] = compute()
        return self.memos[key]

    def simplify(self, x: Any) -> sp.Expr:
        """Canonical form: cancel where a watched (group-element) symbol occurs, else expand."""
        x = sp.sympify(x)
        if self.watch and x.free_symbols & self.watch:
            return sp.cancel(x)
        return sp.expand(x)

    _FUNCS = {
        "exp": sp.exp,
        "sqrt": sp.sqrt,
        "rsqrt": lambda x: 1 / sp.sqrt(x),
        "gelu": lambda x: x / 2 * (1 + sp.erf(x / sp.sqrt(2))),
        "gelu_new": lambda x: x / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (x + sp.Rational(44715, 10**6) * x**3))),
        "silu": lambda x: x / (1 + sp.exp(-x)),
        "tanh": sp.tanh,
        "relu": lambda x: sp.Max(0, x),
    }

    def apply(self, func: str, arg: sp.Expr) -> sp.Expr:
        """``func(arg)`` as an atom (rational constants are evaluated exactly where possible)."""
        arg = self.simplify(arg)
        if func == "exp" and arg == 0:
            return sp.Integer(1)
        if func == "relu":
            if not arg.free_symbols:
                return sp.Max(0, arg)
            content, primitive = arg.as_content_primitive()
            if content != 1 and content.is_positive:  # positive homogeneity of relu, rational factor
                return content * self.apply("relu", primitive)
            pos = [f for f in sp.Mul.make_args(sp.factor_terms(arg)) if f.is_positive and f.free_symbols]
            if pos:  # positive homogeneity of relu, positive symbolic factor
                scale = sp.Mul(*pos)
                return scale * self.apply("relu", arg / scale)
        return self._atom(func, arg, lambda: self._FUNCS[func](arg))

    def _atom(self, func: str, key: Any, definition: Any) -> sp.Symbol:
        """The atom of ``func`` at ``key``, created (with its definition) on first use."""
        full = (func, key)
        if full not in self.atoms:
            sym = sp.Symbol(f"{func}_{len(self.atoms)}")
            self.atoms[full] = sym
            self.defs[sym] = definition()
        return self.atoms[full]

    def evaluate(self, expr: sp.Expr, digits: int = 30, subs: dict[Any, Any] | None = None) -> sp.Expr:
        """Numeric value of ``expr`` at ``digits`` digits, atoms evaluated bottom-up from their definitions."""
        subs = dict(subs or {})
        cache: dict[sp.Symbol, sp.Expr] = {}

        def value(e: sp.Expr) -> sp.Expr:
            e = sp.sympify(e).xreplace(subs)
            return sp.N(e.xreplace({s: atom(s) for s in e.free_symbols if s in self.defs}), digits)

        def atom(s: sp.Symbol) -> sp.Expr:
            if s not in cache:
                cache[s] = value(self.defs[s])
            return cache[s]

        return value(expr)

    def ones(self, rows: int, cols: int) -> sp.Matrix:
        """All-ones matrix."""
        return sp.ones(rows, cols)

    def zeros(self, rows: int, cols: int) -> sp.Matrix:
        """All-zeros matrix."""
        return sp.zeros(rows, cols)

    def canon(self, M: sp.Matrix) -> sp.Matrix:
        """Canonical form of every entry (cancelled rational function)."""
        return M.applyfunc(self.simplify)

    def scale(self, d_k: int) -> sp.Expr:
        """The score scale 1/sqrt(d_k), exact."""
        return 1 / sp.sqrt(d_k)

    def hstack(self, blocks: list[sp.Matrix]) -> sp.Matrix:
        """Blocks side by side."""
        return sp.Matrix.hstack(*blocks)

    def hstack_vectors(self, vectors: list[Any]) -> Any:
        """Gain vectors (rows or columns) joined into one row."""
        return sp.Matrix.hstack(*[sp.Matrix(v).reshape(1, len(v)) for v in vectors])

    def softcap(self, S: sp.Matrix, cap: float) -> sp.Matrix:
        """Soft-capping ``c tanh(s / c)`` entrywise, each ``tanh`` an atom."""
        c = sp.nsimplify(cap)
        return S.applyfunc(lambda s: c * self.apply("tanh", s / c))

    def softmax(self, S: sp.Matrix, causal: bool, window: int | None = None) -> sp.Matrix:
        """Row softmax as atoms keyed by (own centred score, multiset of the row's centred scores).

        Scores are centred by the row mean, so the keys do not see row
        constants or the order of the keys: ``A_ij = exp(c_j) / sum_k exp(c_k)``
        is a function of exactly that. One entry per row (the one with the
        largest key) is written ``1 - (the others)``, which keeps ``A 1 = 1``.
        """
        n, m = S.shape
        rows = []
        for i in range(n):
            keep = [j for j in range(m) if (not causal or j <= i) and (window is None or j > i - window)]
            mean = sp.Add(*[S[i, j] for j in keep]) / len(keep)
            cent = {j: self.simplify(S[i, j] - mean) for j in keep}
            bag = tuple(sorted(cent.values(), key=sp.default_sort_key))
            last = max(keep, key=lambda j: (sp.default_sort_key(cent[j]), -j))
            row = [sp.Integer(0)] * m
            for j in keep:
                if j != last:
                    row[j] = self._atom("softmax", (cent[j], bag),
                                        lambda c=cent[j]: sp.exp(c) / sp.Add(*[sp.exp(x) for x in bag]))
            row[last] = 1 - sp.Add(*row)
            rows.append(row)
        return sp.Matrix(rows)

    def norm(self, Z: sp.Matrix, kind: str, w: Any, b: Any, eps: Any) -> sp.Matrix:
        """Row-wise LayerNorm or RMSNorm with gain ``w`` and bias ``b``; ``1/sqrt(var + eps)`` is an atom.

        The atom of a row is keyed by the multiset of its (centred) entries,
        each taken up to sign: ``var`` is a function of exactly that, so equal
        keys mean equal values (the key never needs ``var`` expanded). With
        ``norm_key="value"`` the key is the canonical form of the sum of
        squares itself (what a rotation of the row preserves; costlier).
        """
        n, d = Z.shape
        eps = sp.Rational(str(eps)) if eps else sp.Integer(0)
        out = []
        for i in range(n):
            row = Z[i, :].applyfunc(self.simplify)
            if kind == "layernorm":
                mean = sp.Add(*row) / d
                row = (row - mean * sp.ones(1, d)).applyfunc(self.simplify)
            if self.norm_key == "value":
                key = ("sum of squares", self.simplify(sp.Add(*[x**2 for x in row])))
            else:
                key = tuple(sorted((min(x, self.simplify(-x), key=sp.default_sort_key) for x in row),
                                   key=sp.default_sort_key))
            r = self._atom("rsqrt", key, lambda row=row: 1 / sp.sqrt(sp.Add(*[x**2 for x in row]) / d + eps))
            y = row * r
            if w is not None:
                y = y.multiply_elementwise(w)
            if b is not None:
                y = y + b
            out.append(y)
        return sp.Matrix.vstack(*out).applyfunc(self.simplify)

    def act(self, Z: sp.Matrix, kind: str) -> sp.Matrix:
        """Entry-wise activation, each value an atom."""
        return Z.applyfunc(lambda x: self.apply(kind, x))

    def hadamard(self, A: sp.Matrix, B: sp.Matrix) -> sp.Matrix:
        """Entry-wise product."""
        return A.multiply_elementwise(B)

    def rotations(self, n: int, d_k: int, width: int | None = None) -> list[sp.Matrix]:
        """Exact rotary matrices R_0 .. R_{n-1}: block-diagonal powers of rational rotations.

        With ``width`` (partial rotary) the first ``width`` coordinates rotate, the rest stay (identity).
        """
        r = d_k if width is None else width
        if r // 2 > len(_PYTHAGOREAN):
            raise SymtransError(f"exact rotary positions support d_k <= {2 * len(_PYTHAGOREAN)}")
        blocks = [sp.Matrix([[c, s], [-s, c]]) for c, s in _PYTHAGOREAN[: r // 2]]
        base = sp.diag(*(blocks + ([sp.eye(d_k - r)] if d_k > r else [])))
        return [base**i for i in range(n)]

    def rotate(self, Q: sp.Matrix, rots: list[sp.Matrix]) -> sp.Matrix:
        """Row i times R_i."""
        return sp.Matrix.vstack(*[Q[i, :] * rots[i] for i in range(Q.rows)])


class TorchBackend:
    """Floating-point arithmetic on torch tensors (imports torch on first use).

    Examples
    --------
    >>> TorchBackend().ones(1, 2).tolist()
    [[1.0, 1.0]]
    """

    name = "torch"

    def __init__(self, dtype: Any = None, device: Any = None) -> None:
        import torch

        self.torch = torch
        self.dtype = dtype or torch.float64
        self.device = device or torch.device("cpu")

    def ones(self, rows: int, cols: int) -> Any:
        """All-ones matrix."""
        return self.torch.ones(rows, cols, dtype=self.dtype, device=self.device)

    def zeros(self, rows: int, cols: int) -> Any:
        """All-zeros matrix."""
        return self.torch.zeros(rows, cols, dtype=self.dtype, device=self.device)

    def canon(self, M: Any) -> Any:
        """Identity (floating point has no canonical form)."""
        return M

    def memo(self, key: tuple[Any, ...], compute: Any) -> Any:
        """No caching in floating point."""
        return compute()

    def scale(self, d_k: int) -> float:
        """1/sqrt(d_k)."""
        return d_k ** -0.5

    def hstack(self, blocks: list[Any]) -> Any:
        """Blocks side by side."""
        return self.torch.cat(list(blocks), dim=1)

    def hstack_vectors(self, vectors: list[Any]) -> Any:
        """Gain vectors joined into one."""
        return self.torch.cat([v.reshape(-1) for v in vectors])

    def softcap(self, S: Any, cap: float) -> Any:
        """Soft-capping ``c tanh(s / c)`` entrywise (Gemma 2's scores and logits)."""
        return cap * self.torch.tanh(S / cap)

    def softmax(self, S: Any, causal: bool, window: int | None = None) -> Any:
        """Row softmax, lower-triangular mask when causal (a band of ``window`` keys with a sliding window)."""
        if causal or window is not None:
            n, m = S.shape
            mask = self.torch.ones(n, m, dtype=self.torch.bool, device=S.device)
            mask = mask.tril() if causal else mask
            if window is not None:
                mask = mask & self.torch.ones_like(mask).triu(1 - window)
            S = S.masked_fill(~mask, float("-inf"))
        return self.torch.softmax(S, dim=-1)

    def norm(self, Z: Any, kind: str, w: Any, b: Any, eps: float) -> Any:
        """Row-wise LayerNorm or RMSNorm."""
        if kind == "layernorm":
            Z = Z - Z.mean(-1, keepdim=True)
        y = Z / ((Z * Z).mean(-1, keepdim=True) + eps).sqrt()
        if w is not None:
            y = y * w
        if b is not None:
            y = y + b
        return y

    def act(self, Z: Any, kind: str) -> Any:
        """Entry-wise activation."""
        F = self.torch.nn.functional
        return {"relu": self.torch.relu, "gelu": F.gelu, "silu": F.silu,
                "gelu_new": lambda x: F.gelu(x, approximate="tanh")}[kind](Z)

    def hadamard(self, A: Any, B: Any) -> Any:
        """Entry-wise product."""
        return A * B

    def rotations(self, n: int, d_k: int, width: int | None = None) -> list[Any]:
        """Rotary matrices with the usual frequencies 10000^(-2f/r) on the first ``r = width`` (default d_k)
        coordinates; the rest stay (the identity: GPT-NeoX's position-free part of a head)."""
        torch = self.torch
        r = d_k if width is None else width
        freqs = 10000.0 ** (-torch.arange(0, r, 2, dtype=self.dtype) / r)
        out = []
        for i in range(n):
            R = torch.eye(d_k, dtype=self.dtype)
            c, s = torch.cos(i * freqs), torch.sin(i * freqs)
            R[0:r:2, 0:r:2] = torch.diag(c)
            R[1:r:2, 1:r:2] = torch.diag(c)
            R[0:r:2, 1:r:2] = torch.diag(s)
            R[1:r:2, 0:r:2] = torch.diag(-s)
            out.append(R.to(self.device))
        return out

    def rotate(self, Q: Any, rots: list[Any]) -> Any:
        """Row i times R_i."""
        return self.torch.einsum("nk,nkj->nj", Q, self.torch.stack(rots))


def _bias(be: Any, n: int, b: Any) -> Any:
    return be.ones(n, 1) @ b


def layer_forward(p: dict[str, Any], X: Any, feat: Features, be: Any) -> Any:
    """One layer's output for input ``X`` (tokens x d_model), in either backend.

    Post-LN: ``X1 = N1(X + MHA(X) + b_O)``, ``out = N2(X1 + FFN(X1))``. Pre-LN:
    ``X1 = X + MHA(N1(X)) + b_O``, ``out = X1 + FFN(N2(X1))``; with a parallel
    residual (GPT-NeoX) ``out = X1 + FFN(N2(X))``.

    Examples
    --------
    >>> import sympy as sp
    >>> p = {"W_Q": [sp.eye(2)], "W_K": [sp.eye(2)], "W_V": [sp.eye(2)], "W_O": [sp.eye(2)],
    ...      "W_in": sp.eye(2), "W_out": sp.eye(2), "ln1_w": None, "ln2_w": None}
    >>> out = layer_forward(p, sp.Matrix([[1, 0], [0, 1]]), Features(activation="relu"), SympyBackend())
    >>> out.shape
    (2, 2)
    """
    n = X.shape[0]
    pre = feat.norm_placement == "pre"
    g = p.get

    def norm(Z: Any, which: str) -> Any:
        if "norm" in feat.ablated:  # the residual stream's norms removed: the identity, no gains or biases
            return Z
        w, b = g(f"{which}_w"), g(f"{which}_b")
        eps = g(f"{which}_eps", feat.eps)  # a per-norm epsilon (torch only: the near-symmetry measurement)
        return be.memo(("norm", Z, feat.norm, w, b, feat.eps), lambda: be.norm(Z, feat.norm, w, b, eps))

    pre = pre and feat.pre_norms  # OLMo 2: a pre-norm decoder without the pre-norms
    inp = norm(X, "ln1") if pre else X
    mha = _attention(p, inp, feat, be)
    if feat.post_norms:  # the attention output is normalised before the residual add (no b_O in Gemma 3)
        mha = norm(be.canon(mha), "ln1_post")
    X1 = mha if "residual" in feat.ablated else X + mha
    if g("b_O") is not None:
        X1 = X1 + _bias(be, n, g("b_O"))
    X1 = be.canon(X1)
    if feat.norm_placement == "post":
        X1 = norm(X1, "ln1")
    h = norm(X if feat.parallel_residual else X1, "ln2") if pre else X1  # GPT-NeoX: the FFN reads the input too
    ffn = be.memo(("ffn", h) + tuple(g(t) for t in ("W_gate", "b_gate", "W_in", "b_in", "W_out", "b_out")),
                  lambda: _ffn(p, h, feat, be))
    if feat.post_norms:
        ffn = norm(be.canon(ffn), "ln2_post")
    out = be.canon(ffn if "residual" in feat.ablated else X1 + ffn)
    if feat.norm_placement == "post":
        out = norm(out, "ln2")
    return out


def _affine(be: Any, X: Any, W: Any, b: Any) -> Any:
    Y = X @ W
    return Y + _bias(be, X.shape[0], b) if b is not None else Y


def _attention(p: dict[str, Any], X: Any, feat: Features, be: Any) -> Any:
    n = X.shape[0]
    H, H_kv = len(p["W_Q"]), len(p["W_K"])
    group = H // H_kv
    d_k = p["W_Q"][0].shape[1]
    rots = be.rotations(n, d_k, feat.rotary_dim) if feat.positional == "rotary" else None
    bQ, bK, bV = p.get("b_Q"), p.get("b_K"), p.get("b_V")
    total = None
    keys: dict[int, Any] = {}
    full: dict[str, list[Any]] = {}
    if feat.qk_norm_full:  # OLMo 2: every head's queries (keys) normalised together, before the rotation
        full["q"] = _joint_norm(be, [_affine(be, X, p["W_Q"][h], bQ[h] if bQ else None) for h in range(H)],
                                p["q_norm_full_w"], p.get("q_norm_eps", feat.eps))
        full["k"] = _joint_norm(be, [_affine(be, X, p["W_K"][g], bK[g] if bK else None) for g in range(H_kv)],
                                p["k_norm_full_w"], p.get("k_norm_eps", feat.eps))
    for h in range(H):
        kv = h // group
        q = full["q"][h] if full else _affine(be, X, p["W_Q"][h], bQ[h] if bQ else None)
        if kv not in keys:
            k = full["k"][kv] if full else _affine(be, X, p["W_K"][kv], bK[kv] if bK else None)
            v = _affine(be, X, p["W_V"][kv], bV[kv] if bV else None)
            if feat.qk_norm and not full:  # per head, over its d_k entries, before the rotation
                k = be.norm(be.canon(k), "rmsnorm", p["k_norm_w"], None, p.get("k_norm_eps", feat.eps))
            keys[kv] = (be.rotate(k, rots) if rots else k, v)
        k, v = keys[kv]
        if feat.qk_norm and not full:
            q = be.norm(be.canon(q), "rmsnorm", p["q_norm_w"], None, p.get("q_norm_eps", feat.eps))
        if rots:
            q = be.rotate(q, rots)
        scalar = feat.attn_scalar
        scale = be.scale(d_k) if scalar is None else be.scale(int(scalar) if float(scalar).is_integer() else scalar)
        scores = be.canon(q @ k.T) * scale
        if feat.attn_softcap:  # Gemma 2: the same scores, capped (tanh is injective: nothing new is fixed)
            scores = be.softcap(scores, feat.attn_softcap)
        A = be.softmax(scores, feat.attention == "causal", feat.window)
        W_O = _own_coordinates(be, h, v.shape[1], X.shape[1]) if "wo-mixing" in feat.ablated else p["W_O"][h]
        vo = be.canon(v @ W_O)  # = (A v) W_O^h, associated so the value path cancels first
        term = be.memo(("head", A, vo), lambda: be.canon(A @ vo))
        total = term if total is None else total + term
    return total


def _own_coordinates(be: Any, h: int, d_v: int, d_model: int) -> Any:
    """The fixed W_O^h of an architecture without W_O mixing: head h's values to coordinates h d_v .. (h+1) d_v - 1."""
    E = be.zeros(d_v, d_model)
    for j in range(d_v):
        E[j, h * d_v + j] = 1
    return E


def _ffn(p: dict[str, Any], X: Any, feat: Features, be: Any) -> Any:
    def act(Z: Any) -> Any:  # without the non-linearity the activation is the identity (a gate stays a product)
        return Z if "nonlinearity" in feat.ablated else be.act(Z, feat.activation)

    up = be.canon(_affine(be, X, p["W_in"], p.get("b_in")))
    if feat.ffn == "gated":
        gate = act(be.canon(_affine(be, X, p["W_gate"], p.get("b_gate"))))
        hidden = be.hadamard(gate, up)
    else:
        hidden = act(up)
    return _affine(be, hidden, p["W_out"], p.get("b_out"))


def model_forward(params: dict[str, Any], feat: Features, be: Any) -> Any:
    """The model's last hidden state for token features ``params["X"]`` (n x d_model).

    ``X`` stands for the looked-up token rows (word plus token type); the
    position rows ``pos[:n]`` are added here, then the embedding norm, the
    layers and the final norm, as the architecture has them.

    Examples
    --------
    >>> import sympy as sp
    >>> params = {"X": sp.Matrix([[1, 2], [3, 5]]), "pos": sp.Matrix([[1, 0], [0, 1]]), "layers": []}
    >>> model_forward(params, Features(embedding_norm=False), SympyBackend())
    Matrix([
    [2, 2],
    [3, 6]])
    """
    X = params["X"]
    n = X.shape[0]
    if params.get("pos") is not None:
        pos, k = params["pos"], feat.pos_offset
        X = X + (pos[k:k + n, :] if hasattr(pos, "extract") else pos[k:k + n])
    return stack_forward(params, X, feat, be, embedded=True)


def _joint_norm(be: Any, blocks: list[Any], gains: list[Any], eps: Any) -> list[Any]:
    """RMSNorm over the blocks side by side (each ``n x d_k``), gains one per block; split back into blocks."""
    widths = [b.shape[1] for b in blocks]
    Z = be.hstack([be.canon(b) for b in blocks])
    out = be.norm(Z, "rmsnorm", be.hstack_vectors(gains), None, eps)
    cuts = [sum(widths[:i]) for i in range(len(widths) + 1)]
    return [out[:, cuts[i]:cuts[i + 1]] for i in range(len(blocks))]


def stack_forward(params: dict[str, Any], X: Any, feat: Features, be: Any, *, embedded: bool) -> Any:
    """The layer stack and the final norm on ``X``; with ``embedded``, X is the embedding sum and its norm comes first.

    Examples
    --------
    >>> import sympy as sp
    >>> stack_forward({"layers": []}, sp.Matrix([[1, 2]]), Features(embedding_norm=False), SympyBackend(),
    ...               embedded=True)
    Matrix([[1, 2]])
    """
    if embedded and feat.embedding_norm and "norm" not in feat.ablated:
        X = be.norm(X, feat.norm, params.get("emb_ln_w"), params.get("emb_ln_b"), params.get("emb_ln_eps", feat.eps))
    for i, lp in enumerate(params["layers"]):
        here = dataclasses.replace(feat, window=feat.windows[i]) if feat.windows else feat
        if feat.rope_layers and not feat.rope_layers[i]:  # a NoPE layer: queries and keys are not rotated
            here = dataclasses.replace(here, positional="none")
        X = layer_forward(lp, X, here, be)
    if feat.final_norm and "norm" not in feat.ablated:
        X = be.norm(X, feat.norm, params.get("final_ln_w"), params.get("final_ln_b"),
                    params.get("final_ln_eps", feat.eps))
    return X
