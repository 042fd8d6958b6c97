"""The certificates' results in the shape of ``report.json``: what ``symtrans certify`` and the API return.

The certificates run through :func:`symtrans.runner.run_certificates` (the one
runner); their verdicts are counted by :func:`symtrans.graph.count_records`, the
report's own counting. The CLI (:mod:`symtrans.cli.certify`) prints this, the API
(:func:`symtrans.api.certify_claims`) wraps it; neither imports the other.

Examples
--------
>>> certify_claims(["prop-5.1"], model=None)["claims"][0]["readings"]
{}
"""

from __future__ import annotations

from typing import Any

from symtrans.config import DEFAULT_N, DEFAULT_SEED
from symtrans.errors import SymtransError

__all__ = ["certify_claims"]


def certify_claims(ids: list[str] | None, *, model: str | None = "default", n: int = DEFAULT_N,
                   seed: int = DEFAULT_SEED, progress: bool = False) -> dict[str, Any]:
    """Run the certificates for ``ids`` (all when empty); return the report-shaped dict.

    Examples
    --------
    >>> out = certify_claims(["thm-5.3"], model=None)
    >>> out["claims"][0]["id"], out["claims"][0]["verdict"]  # an instance certificate counts as supported
    ('thm-5.3', 'supported')
    >>> certify_claims(["prop-51"], model=None)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim with certificates 'prop-51'; did you mean 'prop-5.1' or ...?
    """
    from symtrans.context import Context
    from symtrans.runner import run_certificates

    if n < 1:
        raise SymtransError("--n must be a positive integer")
    ctx = Context(model=model, n=n, seed=seed)
    results = run_certificates(list(ids) if ids else None, ctx, progress=progress)  # unknown ids: an error first
    from symtrans.graph import count_records, verdict_table

    # the one counting rule (report, check, API): an instance certificate counts as supported, readings get their own
    statuses = count_records([e for evs in results.values() for e in evs])
    table = verdict_table(statuses)
    return {"claims": [{"id": cid, "verdict": table[cid]["verdict"], "readings": table[cid]["readings"],
                        "missing_readings": list(statuses[cid].missing),
                        "evidence": [dict(e.to_dict(), counted_as=c.counted_as.value, counted_note=c.counted_note)
                                     for e, c in zip(evs, statuses[cid].evidence)]}
                       for cid, evs in results.items()]}
