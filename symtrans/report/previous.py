"""Reading an earlier ``report.json`` (``symtrans report --previous``): bounded, strict, field types checked.

Examples
--------
>>> check_previous({"claims": []}, "r.json")
[]
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import REPORT_MAX_BYTES, read_json_file, terminal_safe

__all__ = ["check_previous", "read_previous", "MAX_CARRIED_RECORDS", "MAX_RECORD_TEXT", "MAX_RECORD_DETAILS"]

#: Bounds on what an earlier report may carry; a genuine one holds about 45 records, summaries under 400
#: characters and details under 50 KB, so each bound leaves two orders of magnitude of headroom while keeping a
#: forged file from being copied into three outputs (a 100 MB summary) or multiplied (22,000 copies of a record).
MAX_CARRIED_RECORDS = 4096
MAX_RECORD_TEXT = 1 << 14
MAX_RECORD_DETAILS = 4 << 20
_TEXT_FIELDS = ("claim", "producer", "kind", "verdict", "summary", "margin_meaning", "dtype", "model",
                "weights_hash", "toolkit_version", "violated_hypothesis", "timestamp", "reading")

# ----------------------------------------------------------------- an earlier report.json
_NONFINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
_STR, _OPT_STR, _DICT = (str,), (str, type(None)), (dict,)
_NUM = (int, float, type(None))
#: field -> accepted JSON types of an evidence record in report.json (docs/json-schemas.md)
_EVIDENCE_TYPES: dict[str, tuple[type, ...]] = {
    "claim": _STR, "producer": _STR, "kind": _STR, "verdict": _STR, "summary": _STR, "margin": _NUM,
    "margin_meaning": _STR, "tolerance": (dict, type(None)), "dtype": _OPT_STR, "inputs": _DICT,
    "model": _OPT_STR, "weights_hash": _OPT_STR, "seed": (int, type(None)), "versions": _DICT,
    "toolkit_version": _STR, "details": _DICT, "counterexample": (dict, type(None)),
    "violated_hypothesis": _OPT_STR, "seconds": _NUM, "timestamp": _STR, "reading": _OPT_STR,
    "scope": (dict, type(None)), "hypothesis_checks": (list, type(None)), "context": (dict, type(None)),
}


def _number_field(value: Any) -> Any:
    return _NONFINITE.get(value, value) if isinstance(value, str) else value


def check_previous(doc: Any, where: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Check the shape and field types of a parsed ``report.json``; return ``(claim id, evidence dicts)``.

    Numbers written as ``"inf"``, ``"-inf"`` or ``"nan"`` (strict JSON, see
    :func:`finite_json`) are turned back into floats.

    Examples
    --------
    >>> ev = {"claim": "c", "producer": "p", "kind": "numeric", "verdict": "supported", "summary": "s",
    ...       "margin": "inf"}
    >>> check_previous({"claims": [{"id": "c", "evidence": [ev]}]}, "r.json")[0][1][0]["margin"]
    inf
    >>> check_previous({"claims": [{"id": "c", "evidence": [dict(ev, seed="0")]}]}, "r.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: r.json: not a symtrans report.json (claims[0].evidence[0].seed: expected int or null, got str)
    """
    def bad(what: str) -> SymtransError:
        return SymtransError(f"{where}: not a symtrans report.json ({what})")

    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise bad("no 'claims' list")
    out: list[tuple[str, list[dict[str, Any]]]] = []
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for i, c in enumerate(doc["claims"]):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise bad(f"claims[{i}]: expected an object with a string 'id'")
        evs = c.get("evidence", [])
        if not isinstance(evs, list):
            raise bad(f"claims[{i}].evidence: expected a list")
        records = []
        for j, e in enumerate(evs):
            if not isinstance(e, dict):
                raise bad(f"claims[{i}].evidence[{j}]: expected an object")
            e = dict(e)
            for key in ("margin", "seconds"):
                if key in e:
                    e[key] = _number_field(e[key])
            for key, types in _EVIDENCE_TYPES.items():
                if key in ("claim", "producer", "kind", "verdict", "summary") and key not in e:
                    raise bad(f"claims[{i}].evidence[{j}]: missing {key!r}")
                if key in e and (not isinstance(e[key], types) or isinstance(e[key], bool) and bool not in types):
                    names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                    raise bad(f"claims[{i}].evidence[{j}].{key}: expected {names}, got {type(e[key]).__name__}")
            tol = e.get("tolerance")
            if tol is not None:
                tol = dict(tol)
                tol["value"] = _number_field(tol.get("value"))
                if (set(tol) - {"value", "reason", "relative_to"} or isinstance(tol["value"], bool)
                        or not isinstance(tol["value"], (int, float)) or not isinstance(tol.get("reason"), str)
                        or not isinstance(tol.get("relative_to", ""), (str, type(None)))):
                    raise bad(f"claims[{i}].evidence[{j}].tolerance: expected {{value, reason, relative_to}}")
                e["tolerance"] = tol
            scope = e.get("scope")
            if scope is not None and not (isinstance(scope.get("kind"), str)
                                          and isinstance(scope.get("description", ""), str)
                                          and isinstance(scope.get("instances") or [], list)):
                raise bad(f"claims[{i}].evidence[{j}].scope: expected {{kind, description, instances}}")
            for h, hc in enumerate(e.get("hypothesis_checks") or []):
                if (not isinstance(hc, dict) or not isinstance(hc.get("name"), str)
                        or not isinstance(hc.get("holds"), (bool, type(None)))
                        or not isinstance(_number_field(hc.get("margin")), _NUM) or isinstance(hc.get("margin"), bool)
                        or not isinstance(hc.get("detail", ""), str)):
                    raise bad(f"claims[{i}].evidence[{j}].hypothesis_checks[{h}]: expected {{name, holds, margin, "
                              "detail}")
            ctx = e.get("context") or {}
            bad_key = next((k for k, v in ctx.items() if not isinstance(v, (str, int, float, bool, type(None)))
                            or (k == "producer" and not isinstance(v, str))), None)
            if bad_key is not None:  # a context key is compared and hashed: scalars only, the producer a name
                raise bad(f"claims[{i}].evidence[{j}].context.{terminal_safe(str(bad_key))[:40]}: expected "
                          f"{'a string' if bad_key == 'producer' else 'a string, number, boolean or null'}, "
                          f"got {type(ctx[bad_key]).__name__}")
            if e["kind"] not in ("symbolic", "numeric"):
                raise bad(f"claims[{i}].evidence[{j}].kind: expected 'symbolic' or 'numeric'")
            _check_sizes(e, f"claims[{i}].evidence[{j}]", bad)
            key = (c["id"], e["producer"], e.get("reading"), str((e.get("context") or {}).get("producer")))
            if key in seen:
                raise bad(f"claims[{i}].evidence[{j}]: a second record of producer "
                          f"{terminal_safe(e['producer'])[:60]!r} for this claim and reading")
            seen.add(key)
            total += 1
            if total > MAX_CARRIED_RECORDS:
                raise bad(f"more than {MAX_CARRIED_RECORDS} evidence records")
            records.append(e)
        out.append((c["id"], records))
    return out


def _check_sizes(e: dict[str, Any], where: str, bad: Any) -> None:
    """Refuse a record whose text fields or details exceed the bounds above (before anything is copied)."""
    texts = [(k, e.get(k)) for k in _TEXT_FIELDS]
    texts += [("tolerance.reason", (e.get("tolerance") or {}).get("reason")),
              ("scope.description", (e.get("scope") or {}).get("description"))]
    texts += [(f"hypothesis_checks[{h}].{f}", hc.get(f)) for h, hc in enumerate(e.get("hypothesis_checks") or [])
              for f in ("name", "detail")]
    texts += [(f"context.{k}"[:60], v) for k, v in (e.get("context") or {}).items()]
    for name, v in texts:
        if isinstance(v, str) and len(v) > MAX_RECORD_TEXT:
            raise bad(f"{where}.{name}: {len(v)} characters (at most {MAX_RECORD_TEXT})")
    for name in ("details", "inputs", "versions", "counterexample", "scope"):
        size = len(json.dumps(e.get(name), default=str)) if e.get(name) else 0
        if size > MAX_RECORD_DETAILS:
            raise bad(f"{where}.{name}: {size} bytes of JSON (at most {MAX_RECORD_DETAILS})")


def read_previous(path: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """Read and check an earlier ``report.json`` (or the directory holding it), bounded and strict.

    Examples
    --------
    >>> read_previous("/no/such/report.json")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/report.json: no such file (pass an earlier report.json)
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\x00" in path:
        raise SymtransError(f"--previous: expected a path to a report.json, got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    if not p.exists():
        raise SymtransError(f"{terminal_safe(path)}: no such file (pass an earlier report.json)")
    return check_previous(read_json_file(p, "report", REPORT_MAX_BYTES), terminal_safe(str(p)))
