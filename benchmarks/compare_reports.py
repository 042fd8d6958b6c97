"""Compare two report.json files record by record: the check that a refactoring preserved behaviour.

Usage: python benchmarks/compare_reports.py BEFORE/report.json AFTER/report.json

Ignored: when a record or report ran and how long it took (``timestamp``,
``seconds``, ``generated``), library ``versions``, and each record's
``context.producer_hash`` (the hash of its producer module's source, which
changes with any edit of that module; the producers it changed for are
counted). Everything else (top-level fields, claim order, each claim's fields,
its readings, every evidence record) must be equal. Exit status 0 when equal,
1 otherwise, with one line per difference.
"""

from __future__ import annotations

import json
import sys
from typing import Any

IGNORE = {"timestamp", "seconds", "generated", "versions"}


def strip(x: Any, hashed: set[str]) -> Any:
    """``x`` without the ignored keys; the producers whose ``producer_hash`` was dropped go into ``hashed``."""
    if isinstance(x, dict):
        if "producer_hash" in x:
            hashed.add(str(x.get("producer")))
        return {k: strip(v, hashed) for k, v in x.items() if k not in IGNORE and k != "producer_hash"}
    if isinstance(x, list):
        return [strip(v, hashed) for v in x]
    return x


def compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The differences between two report.json documents, one line each (empty: equal), and the hashed producers."""
    hashed: set[str] = set()
    out = [f"top-level field {k!r} differs" for k in sorted((set(a) | set(b)) - {"claims"} - IGNORE)
           if strip(a.get(k), hashed) != strip(b.get(k), hashed)]
    ca, cb = {c["id"]: c for c in a["claims"]}, {c["id"]: c for c in b["claims"]}
    if list(ca) != list(cb):
        out.append(f"claims differ: {sorted(set(ca) ^ set(cb)) or 'same ids, another order'}")
    for cid, x in ca.items():
        y = cb.get(cid)
        if y is None:
            continue
        for key in sorted((set(x) | set(y)) - IGNORE):
            if key != "evidence":
                if strip(x.get(key), hashed) != strip(y.get(key), hashed):
                    out.append(f"{cid}: {key} differs")
                continue
            ex, ey = x.get(key, []), y.get(key, [])
            if len(ex) != len(ey):
                out.append(f"{cid}: {len(ex)} records before, {len(ey)} after")
            for r, s in zip(ex, ey):
                keys = sorted(k for k in (set(r) | set(s)) - IGNORE
                              if strip(r.get(k), hashed) != strip(s.get(k), hashed))
                if keys:
                    out.append(f"{cid} / {r.get('producer')}: {', '.join(keys)} differ")
    return out, hashed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    a, b = (json.loads(open(p, encoding="utf-8").read()) for p in argv)
    diffs, hashed = compare(a, b)
    for line in diffs:
        print(line)
    if hashed:
        print(f"(producer_hash, the source hash of a producer's module, not compared: {len(hashed)} producers)")
    records = sum(len(c.get("evidence", [])) for c in a["claims"])
    print(f"{len(a['claims'])} claims, {records} records compared: {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
