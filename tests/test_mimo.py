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


def _released(tmp_path, drop=("rope_parameters", "layer_types"), **config):
    """A folder whose config holds the released configs' own keys, agreeing with what transformers builds (its
    default pattern over 3 layers: global, sliding, sliding; its default rope), changed by ``config``."""
    folder = _folder(tmp_path, hybrid_layer_pattern=[0, 1, 1], swa_num_key_value_heads=2, swa_num_attention_heads=4,
                     swa_head_dim=12, swa_v_head_dim=8, layernorm_epsilon=1e-5, rope_theta=5_000_000,
                     swa_rope_theta=10_000, partial_rotary_factor=0.334, add_full_attention_sink_bias=False,
                     add_swa_attention_sink_bias=True, topk_method="noaux_tc")
    cfg = json.loads((folder / "config.json").read_text())
    cfg = {k: v for k, v in cfg.items() if k not in drop}
    (folder / "config.json").write_text(json.dumps({**cfg, **config}))
    return folder


def test_the_released_keys_are_read_where_they_agree_with_what_transformers_builds(tmp_path):
    """No rope_parameters: transformers turns global layers at base 5e6 and sliding ones at 1e4, a third of each
    head (its defaults; it reads no top-level rope key), and so does compscope; the released keys that say the same
    are accepted."""
    import torch

    hw = compscope.load(_released(tmp_path))
    built = transformers.AutoConfig.from_pretrained(tmp_path)
    assert built.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    dims = torch.arange(0, 4, 2, dtype=torch.float64) / 4
    torch.testing.assert_close(hw.rotary.inv_freq[0], 1 / 5e6**dims)
    torch.testing.assert_close(hw.rotary.inv_freq[1], 1 / 1e4**dims)
    assert hw.rotary.dim == 4 and hw.W_K.shape[1] == 2


@pytest.mark.parametrize("key, value, built", [
    ("hybrid_layer_pattern", [0, 1, 0], "[0, 1, 1]"), ("swa_num_key_value_heads", 4, "2"),
    ("layernorm_epsilon", 1e-6, "1e-05"), ("swa_rope_theta", 7.0, "10000.0"), ("rope_theta", 123.0, "5000000.0"),
    ("partial_rotary_factor", 0.5, "0.334"), ("rope_scaling", {"rope_type": "linear", "factor": 2.0}, "None"),
    ("add_full_attention_sink_bias", True, "False"),
])
def test_a_released_key_that_says_otherwise_than_transformers_builds_is_refused_by_name(tmp_path, key, value, built):
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(_released(tmp_path, **{key: value}))
    assert f"config key '{key}' = {value!r}, which transformers does not read: it builds this model with {built} " \
        in str(e.value)
