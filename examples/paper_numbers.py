"""The paper's numbers for BertBase, BERT-large, MiniLM and GPT-2, from the formula registry.

Every number is computed from its registered formula (nothing is typed in), with the
map or group it counts and where it comes from.

Run:  python examples/paper_numbers.py
"""

from symtrans import formula

ARCHS = ["bert-base", "bert-large", "minilm-l6-h384", "gpt2"]
ROWS = [
    ("recovery-ambiguity", {"n": 512}),
    ("recovery-ambiguity-per-token", {}),
    ("wo-fibre", {"n": 512}),
    ("gauge-dimension-model", {}),
    ("ffn-flop-share", {"n": 128}),
    ("ffn-flop-share", {"n": 512}),
    ("pgop-overhead", {}),
    ("params-model", {}),
]


def show(value) -> str:
    if value.value is None:
        return str(value.substituted)
    if value.value.is_Integer:
        return f"{int(value.value):,}"
    return f"{float(value.value):.4%}"


def main() -> None:
    header = f"{'quantity':<34}" + "".join(f"{a:>17}" for a in ARCHS)
    print(header)
    print("-" * len(header))
    for name, sizes in ROWS:
        label = name + "".join(f" ({k}={v})" for k, v in sizes.items())
        cells = []
        for arch in ARCHS:
            # GPT-2 has 1024 positions, the others 512; n=512 fits all of them
            cells.append(show(formula(name, arch=arch, **sizes)))
        print(f"{label:<34}" + "".join(f"{c:>17}" for c in cells))
    print()
    v = formula("recovery-ambiguity", arch="bert-base", n=512)
    print(f"recovery-ambiguity counts: {v.formula.counts}")
    print(f"  provenance: {v.formula.provenance.describe()}")
    w = formula("wo-fibre", arch="bert-base", n=512)
    print(f"wo-fibre counts: {w.formula.counts}")
    print("  so with W_O known and invertible the heads are recoverable from MHA(X): "
          f"fibre dimension {w.value}")


if __name__ == "__main__":
    main()
