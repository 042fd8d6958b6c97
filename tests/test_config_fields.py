"""The config-field audit: every field of transformers' config of an accepted type is modelled, irrelevant or refused.

``symtrans.arch.CONFIG_FIELDS`` is the one table. These tests fail when
transformers' default config of an accepted model type carries a field the
table lacks (a planted attribute shows it), when a refused field set off its
default is accepted or refused without its name, and when a field the table
calls modelled is never read by ``from_config``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from symtrans import arch as arch_mod
from symtrans.arch import CONFIG_FIELDS, from_config, unaudited_fields
from symtrans.errors import SymtransError

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

#: the model types symtrans reads natively (aliases xlm-roberta and camembert read as roberta)
ACCEPTED = ("bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2", "gemma3_text", "qwen3", "gemma2",
            "phi3", "olmo2", "gpt_neox", "smollm3", "electra")
#: the fixture family that writes a small config of each model type
_FIXTURE = {"gemma3_text": "gemma3", "electra": None}


@pytest.mark.parametrize("model_type", ACCEPTED)
def test_every_field_of_transformers_config_is_audited(model_type: str) -> None:
    fields = transformers.AutoConfig.for_model(model_type).to_dict()
    assert unaudited_fields(model_type, fields) == [], "add each field to symtrans.arch.CONFIG_FIELDS"


def test_a_field_transformers_adds_is_caught() -> None:
    """False case: an attribute planted on transformers' config object is reported, by name."""
    conf = transformers.AutoConfig.for_model("llama")
    conf.attn_temperature = 2.0
    assert unaudited_fields("llama", conf.to_dict()) == ["attn_temperature"]


def test_every_row_says_what_it_is() -> None:
    for model_type, table in CONFIG_FIELDS.items():
        for key, row in table.items():
            assert row == "modelled" or (row[0] == "irrelevant" and len(row[1]) > 10) or (
                row[0] == "refused" and len(row) == 3 and row[2]), (model_type, key, row)


def _small_config(model_type: str) -> dict[str, Any]:
    from symtrans.numeric.fixtures import random_model

    if model_type == "electra":  # BERT's encoder when embedding_size equals hidden_size
        return {"model_type": "electra", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
                "embedding_size": 8, "intermediate_size": 16, "max_position_embeddings": 16, "vocab_size": 20}
    cfg = random_model(_FIXTURE.get(model_type, model_type), n_layers=2).config.to_dict()
    cfg["model_type"] = model_type
    return cfg


def _refused() -> list[tuple[str, str, Any]]:
    return [(t, k, row[1]) for t in ACCEPTED for k, row in CONFIG_FIELDS[t].items()
            if isinstance(row, tuple) and row[0] == "refused"]


@pytest.mark.parametrize("model_type,key,default", _refused())
def test_a_refused_field_off_its_default_is_refused_by_name(model_type: str, key: str, default: Any,
                                                            tmp_path: Path) -> None:
    cfg = _small_config(model_type)
    cfg[key] = default
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from_config(tmp_path)  # at its default: accepted (a table refusing everything would fail here)
    cfg[key] = (not default) if isinstance(default, bool) else 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SymtransError) as err:
        from_config(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and repr(key) in msg and "not modelled" in msg


class _Reads(dict):  # type: ignore[type-arg]
    """A config dict that records which keys the reader looked at."""

    seen: set[str]

    def get(self, key: Any, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.seen.add(key)
        return super().__contains__(key)


def _read_keys(model_type: str, cfg: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    seen: set[str] = set()
    real = arch_mod.read_json_file

    def recording(*args: Any, **kwargs: Any) -> Any:
        d = _Reads(real(*args, **kwargs))
        d.seen = seen
        return d

    monkeypatch.setattr(arch_mod, "read_json_file", recording)
    (tmp / "config.json").write_text(json.dumps(cfg))
    from_config(tmp)
    return seen


#: modelled fields read only on a branch the small config does not take: SmolLM3's interval when no_rope_layers is
#: absent (the fixture writes the list; _smollm3_rope_layers' doctest reads the interval)
_CONDITIONAL = {("smollm3", "no_rope_layer_interval")}


@pytest.mark.parametrize("model_type", ACCEPTED)
def test_every_modelled_field_is_read(model_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _small_config(model_type)
    seen = _read_keys(model_type, cfg, tmp_path, monkeypatch)
    modelled = {k for k, row in CONFIG_FIELDS[model_type].items() if row == "modelled" and k in cfg}
    assert modelled - seen - {k for t, k in _CONDITIONAL if t == model_type} == set()


def test_a_modelled_field_never_read_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """False case: a field the table calls modelled that from_config never reads shows as unread."""
    cfg = {**_small_config("llama"), "attn_temperature": 2.0}
    seen = _read_keys("llama", cfg, tmp_path, monkeypatch)
    assert "attn_temperature" not in seen and "rms_norm_eps" in seen
