"""MiMo-V2-Flash beyond the shared family checks (``hf_tiny``'s variant runs those): its released configs' window key,
what the card says of sinks on some layers, and the settings it refuses."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.core.card import card_rows  # noqa: E402

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "MiMoV2FlashConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no MiMoV2FlashConfig", allow_module_level=True)

from hf_tiny import BY_ID, build  # noqa: E402

VARIANT = BY_ID["mimo-v2-flash-sliding-sinks-narrow-values"]


def _folder(tmp_path, **config):
    build(VARIANT).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(config)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_the_released_window_key_is_read_as_transformers_reads_it(tmp_path):
    """``sliding_window_size`` w (its released configs' key): transformers' window is w + 1, and so is compscope's."""
    folder = _folder(tmp_path, sliding_window_size=4)
    built = transformers.AutoConfig.from_pretrained(folder)
    assert built.sliding_window == 5
    hw = compscope.load(folder)
    assert hw.sliding_window == (None, 5, 5)


def test_the_card_says_which_layers_have_sinks(tmp_path):
    rows = dict(card_rows(compscope.load(build(VARIANT))))
    assert rows["attention sinks"].startswith("a learned logit per head on layers 1, 2, ")


def test_attention_biases_are_refused_by_name(tmp_path):
    with pytest.raises(compscope.UnsupportedModelError, match="attention_bias=True"):
        compscope.load(_folder(tmp_path, attention_bias=True))
