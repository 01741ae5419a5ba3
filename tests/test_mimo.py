"""MiMo-V2-Flash beyond the shared family checks (``hf_tiny``'s variant runs those): its released configs' window key,
what the card says of sinks on some layers, and the settings it refuses."""

from __future__ import annotations

import json
import os

import pytest
import torch

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
    from compscope.data.runner import transformers_at_least

    if not transformers_at_least(5, 20):
        pytest.skip(f"transformers {transformers.__version__} ignores sliding_window_size (read from 5.20)")
    folder = _folder(tmp_path, sliding_window_size=4)
    built = transformers.AutoConfig.from_pretrained(folder)
    assert built.sliding_window == 5
    hw = compscope.load(folder)
    assert hw.sliding_window == (None, 5, 5)


def test_a_model_that_runs_another_window_than_compscope_reads_is_run_within_the_narrower(tmp_path):
    """A model whose built window is not the ``sliding_window_size`` + 1 compscope reads (transformers before 5.20
    ignores that key: simulated by setting it after the model is built) is run only on sequences within the narrower
    window, where the two attend alike; a model that runs the window read is not limited."""
    from compscope.data.runner import runner_for
    from compscope.loading.families.mimo import MimoV2Flash

    model = build(VARIANT)
    own = model.config.sliding_window
    assert MimoV2Flash.runs_windows(model.config) and runner_for(model, progress=False).n_ctx is None
    model.config.sliding_window_size = own + 3
    hw = compscope.load(model)
    assert own + 4 in hw.sliding_window and own not in hw.sliding_window
    assert not MimoV2Flash.runs_windows(model.config)
    runner = runner_for(model, hw, progress=False)
    assert runner.n_ctx == own
    runner.trace(torch.randint(0, hw.n_vocab, (2, own), generator=torch.Generator().manual_seed(0)))  # (agrees)


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


def write_mimo2(path, model, mtp: int = 1, value_scale: float | None = 0.7, kv_counts=None, fused: bool = False,
                sinks_on_global: bool = False, pattern=None, rope: bool = True):
    """A ``mimo2`` file of ``model`` as llama.cpp's converter writes one: per-block K/V head counts and sliding flags
    (its prediction blocks, after the layers, sliding), the value width and scale, the rotated dims, each layer
    type's base, the tensors under llama.cpp's names (rows as HF's: rotate-half), ``mtp`` prediction blocks after
    the layers (their attention drawn at random); ``pattern``: sliding flags written in place of those (or a
    period); ``rope`` False: no rotated width or base stated."""
    import numpy as np

    gguf = pytest.importorskip("gguf")
    cfg = model.config
    n, H, g = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    sliding = [int(t == "sliding_attention") for t in cfg.layer_types] + [1] * mtp
    w = gguf.GGUFWriter(str(path), "mimo2")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_block_count(n + mtp)
    w.add_context_length(64)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(48)
    w.add_head_count(H)
    w.add_head_count_kv(kv_counts or [2 * g if s else g for s in sliding])
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.v_head_dim)
    w.add_sliding_window(cfg.sliding_window)
    w.add_sliding_window_pattern(sliding if pattern is None else pattern)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if rope:
        w.add_rope_dimension_count(int(cfg.head_dim * cfg.rope_parameters["full_attention"]["partial_rotary_factor"]))
        w.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
        w.add_rope_freq_base_swa(cfg.rope_parameters["sliding_attention"]["rope_theta"])
    w.add_nextn_predict_layers(mtp)
    if value_scale is not None:
        w.add_float32("mimo2.attention.value_scale", value_scale)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    rng = np.random.default_rng(0)
    for i in range(n + mtp):
        p = f"model.layers.{min(i, n - 1)}."  # (a prediction block: random weights of a sliding layer's shapes)
        take = (lambda k: sd[p + k]) if i < n else (lambda k: rng.standard_normal(sd[p + k].shape).astype(np.float32))
        w.add_tensor(f"blk.{i}.attn_norm.weight", take("input_layernorm.weight"))
        if fused:
            rows = [take(f"self_attn.{x}_proj.weight") for x in "qkv"]
            w.add_tensor(f"blk.{i}.attn_qkv.weight", np.concatenate(rows))
        else:
            for x in "qkv":
                w.add_tensor(f"blk.{i}.attn_{x}.weight", take(f"self_attn.{x}_proj.weight"))
        w.add_tensor(f"blk.{i}.attn_output.weight", take("self_attn.o_proj.weight"))
        if sliding[i]:
            w.add_tensor(f"blk.{i}.attn_sinks.weight", take("self_attn.sinks"))
        elif sinks_on_global:
            w.add_tensor(f"blk.{i}.attn_sinks.weight", np.zeros(H, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", take("post_attention_layernorm.weight"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_mimo2_gguf_reads_as_the_model_it_was_written_from(tmp_path):
    """llama.cpp's file of the model (its per-block counts, sinks on the sliding layers, the value scale, each layer
    type's base, a prediction block after the layers) holds the same heads, exactly, the prediction block left out."""
    model = build(VARIANT)
    ref = compscope.load(model)
    ours = compscope.load(write_mimo2(tmp_path / "m.gguf", model))
    assert ours.meta.family == "mimo_v2_flash" and ours.n_layers == ref.n_layers == 3
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U", "sinks"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert ours.sliding_window == ref.sliding_window and ours.kv_map == ref.kv_map
    assert any("multi-token-prediction" in n for n in ours.meta.notes)
    alone = compscope.load(write_mimo2(tmp_path / "n.gguf", model, mtp=0))  # (counts and flags for the layers alone)
    assert torch.equal(alone.W_K, ours.W_K) and alone.kv_map == ours.kv_map
    assert not any("multi-token-prediction" in n for n in alone.meta.notes)
    # no rotated width or bases stated: llama.cpp's, whole heads at 10 000 on every layer
    plain = compscope.load(write_mimo2(tmp_path / "p.gguf", model, rope=False)).rotary
    r = model.config.head_dim
    want = 10000.0 ** -(torch.arange(0, r, 2, dtype=torch.float64) / r)
    assert plain.dim == r
    torch.testing.assert_close(plain.inv_freq.double(), want.expand_as(plain.inv_freq), rtol=1e-6, atol=0)


def test_a_mimo2_gguf_without_a_value_scale_reads_as_llama_cpp_runs_it(tmp_path):
    """No ``attention.value_scale``: llama.cpp scales no value, and compscope reads W_V unscaled (the model's
    scale, 0.7, divided back out)."""
    model = build(VARIANT)
    ref = compscope.load(model)
    ours = compscope.load(write_mimo2(tmp_path / "m.gguf", model, value_scale=None))
    torch.testing.assert_close(ours.W_V, ref.W_V / 0.7, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("change, needle", [
    (dict(kv_counts=[1, 2, 1, 2]), "'mimo2.attention.head_count_kv' = [1, 2, 1, 2]: not one K/V head count"),
    (dict(kv_counts=[1, 3, 3, 3]), "'mimo2.attention.head_count_kv' = [1, 3, 3, 3]: not one K/V head count"),
    (dict(kv_counts=1), "'mimo2.attention.head_count_kv' = 1: not one K/V head count"),
    (dict(kv_counts=[1, 2]), "'.head_count_kv' must give each of the 3 layers its kind and K/V heads"),
    (dict(pattern=[0, 1]), "'mimo2.attention.sliding_window_pattern' and '.head_count_kv' must give each of the 3"),
    (dict(pattern=2), "'mimo2.attention.sliding_window_pattern' and '.head_count_kv' must give each of the 3"),
    (dict(fused=True), "a fused attn_qkv in a mimo2 file"),
    (dict(sinks_on_global=True), "'blk.0.attn_sinks.weight' enters attention but compscope does not read it"),
])
def test_a_mimo2_gguf_compscope_does_not_read_as_llama_cpp_runs_it_is_refused_by_name(tmp_path, change, needle):
    path = write_mimo2(tmp_path / "m.gguf", build(VARIANT), **change)
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(path)
    assert needle in str(e.value)


@pytest.mark.parametrize("stated, scale", [("absent", 0.707), (None, 1.0), (0.5, 0.5)])
def test_the_value_scale_is_transformers_whether_stated_null_or_missing(tmp_path, stated, scale):
    """transformers scales the values by 0.707 where the config states no ``attention_value_scale``, by 1 where it
    states null: each folder's W_V is the values' projection times that scale, as the model object built from it."""
    model = build(VARIANT)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    if stated == "absent":
        cfg.pop("attention_value_scale")
    else:
        cfg["attention_value_scale"] = stated
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    built = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert built.model.layers[0].self_attn.v_scale == pytest.approx(scale)
    hw = compscope.load(tmp_path)
    v = model.model.layers[0].self_attn.v_proj.weight.detach().reshape(1, 8, -1)
    torch.testing.assert_close(hw.W_V[0, :, :8], (v * scale).expand(2, -1, -1), atol=1e-6, rtol=1e-6)
