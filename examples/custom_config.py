"""A custom architecture from a Hugging Face config.json: a small Mistral-style model with
grouped-query attention (4 key/value heads shared by 16 query heads), rotary positions, RMSNorm,
a gated SiLU feed-forward and no biases; its formulas, evaluated exactly.

Run:  python examples/custom_config.py
"""

import json
import tempfile
from pathlib import Path

from symtrans import architecture, formula

CONFIG = {
    "model_type": "mistral", "_name_or_path": "tiny-mistral-gqa",
    "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
    "hidden_size": 1024, "intermediate_size": 2816, "max_position_embeddings": 4096,
    "vocab_size": 32000, "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}
FORMULAS = ["params-attention", "params-ffn", "params-layer", "params-model", "flops-attention", "flops-ffn",
            "ffn-flop-share", "recovery-ambiguity-per-token", "wo-fibre", "gauge-dimension",
            "gauge-dimension-model", "mha-rank-bound", "head-subspace-dim"]


def main() -> None:
    path = Path(tempfile.mkdtemp(prefix="symtrans-")) / "config.json"
    path.write_text(json.dumps(CONFIG, indent=2))
    arch = architecture(path, n=2048)
    print(f"{arch.name}: {arch.family}, L={arch.L}, H={arch.H}, H_kv={arch.H_kv}, d_model={arch.d_model}, "
          f"d_k={arch.d_k}, d_ff={arch.d_ff}, {arch.norm}, {arch.ffn} {arch.activation} FFN, "
          f"{arch.positional} positions, {arch.attention} attention, bias={arch.bias}; n = {arch.n}")
    print()
    for name in FORMULAS:
        v = formula(name, arch=arch)
        print(f"{name:<30} {v.value if v.value is not None else v.substituted!s:>16}   = {v.expression}")
    print()
    # grouped-query attention in the group: one GL(d_v) per key/value head, and rotary positions
    # shrink GL(d_k) on (Q, K) to the rotations' commutant (see the formula's own description):
    g = formula("gauge-dimension", arch=arch)
    print(f"gauge-dimension counts: {g.formula.counts}")
    print("  substitutions:", ", ".join(f"{k}={s['value']}" for k, s in g.substitutions.items()))
    mha = formula("params-attention", arch=arch)
    mha_full = formula("params-attention", arch=architecture(path, n=2048, H_kv=CONFIG["num_attention_heads"]))
    print(f"grouped-query attention saves {int(mha_full.value) - int(mha.value):,} parameters per layer "
          f"against H_kv = H ({int(mha.value):,} vs {int(mha_full.value):,})")


if __name__ == "__main__":
    main()
