"""compscope's own format: ``formats.native.save`` then ``load`` gives back the same
``HeadWeights`` bit for bit (every tensor ``torch.equal`` with the same dtype, every other
field equal), for models built at random with transformers (no downloads)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.core.attention import attention_forward  # noqa: E402
from compscope.loading.formats import native  # noqa: E402
from compscope.core.heads import HeadWeights, Norm, Rotary  # noqa: E402

transformers = pytest.importorskip("transformers")


def _randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter random (norm gains and biases too, so that none is a default 0 or 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return model.eval()


def llama_gqa():
    cfg = transformers.LlamaConfig(
        vocab_size=61, hidden_size=48, intermediate_size=64, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=64, attention_bias=True, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
    )
    return _randomise(transformers.LlamaForCausalLM(cfg), 1)


def gemma3():
    cfg = transformers.Gemma3TextConfig(
        vocab_size=67, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, query_pre_attn_scalar=12,
        sliding_window=5, layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
        },
    )
    return _randomise(transformers.Gemma3ForCausalLM(cfg), 2)


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=53, n_positions=24, n_embd=32, n_layer=2, n_head=4)
    return _randomise(transformers.GPT2LMHeadModel(cfg), 3)


def bert():  # post-LN, bidirectional, token-type embeddings in embed_extra
    cfg = transformers.BertConfig(
        vocab_size=59, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
        max_position_embeddings=24,
    )
    return _randomise(transformers.BertModel(cfg), 4)


def deberta():  # disentangled attention: position queries and keys, log buckets
    cfg = transformers.DebertaV2Config(
        vocab_size=59, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
        type_vocab_size=0, relative_attention=True, position_buckets=4, max_relative_positions=10,
        norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False,
    )
    return _randomise(transformers.DebertaV2Model(cfg), 10)


def mpnet():  # a learned bias by offset bucket beside learned positions
    cfg = transformers.MPNetConfig(vocab_size=59, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=40, max_position_embeddings=24)
    return _randomise(transformers.MPNetModel(cfg), 11)


def gemma2():  # attention logits soft-capped
    cfg = transformers.Gemma2Config(
        vocab_size=59, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, query_pre_attn_scalar=8,
        sliding_window=4, attn_logit_softcapping=1.5,
    )
    return _randomise(transformers.Gemma2ForCausalLM(cfg), 5)


def olmo2():  # QK-norm over all heads of a layer, no norm before the attention
    cfg = transformers.Olmo2Config(
        vocab_size=57, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 700.0},
    )
    return _randomise(transformers.Olmo2ForCausalLM(cfg), 6)


def bloom():  # ALiBi slopes, the embeddings LayerNorm in W_E
    cfg = transformers.BloomConfig(vocab_size=55, hidden_size=30, n_layer=2, n_head=5)
    return _randomise(transformers.BloomForCausalLM(cfg), 7)


def gpt_oss():  # attention sinks, YaRN's attention factor in the logit scale
    cfg = transformers.GptOssConfig(vocab_size=51, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4,
                                    num_local_experts=2, num_experts_per_tok=1)
    return _randomise(transformers.GptOssForCausalLM(cfg), 8)


def modernbert():  # a first layer that reads the residual unnormed, windows on both sides
    cfg = transformers.ModernBertConfig(vocab_size=53, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                        num_attention_heads=4, local_attention=4, pad_token_id=0, bos_token_id=1,
                                        eos_token_id=2, cls_token_id=1, sep_token_id=2)
    return _randomise(transformers.ModernBertModel(cfg), 9)


MODELS = {"llama-gqa": llama_gqa, "gemma3": gemma3, "gpt2": gpt2, "bert": bert, "gemma2": gemma2, "olmo2": olmo2,
          "bloom": bloom, "gpt-oss": gpt_oss, "modernbert": modernbert, "deberta": deberta,
          "mpnet": mpnet}


def assert_identical(a, b, path: str = "hw") -> None:
    """Recursive bit-exact equality of HeadWeights / Norm / Rotary / Meta / tensors / plain values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor), path
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert torch.equal(a, b), f"{path}: values differ"
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("kind", MODELS)
def test_round_trip_is_bit_exact(kind, tmp_path):
    hw = compscope.load(MODELS[kind]())
    native.save(hw, tmp_path / "m")
    back = compscope.load(tmp_path / "m")
    assert_identical(hw, back)
    x = torch.randn(2, 7, hw.d_model, generator=torch.Generator().manual_seed(0))
    for layer in range(hw.n_layers):
        assert torch.equal(attention_forward(hw, layer, x), attention_forward(back, layer, x))


def test_round_trip_keeps_the_features_under_test(tmp_path):
    """The random models really exercise the optional fields the format must carry."""
    ll, gm, g2, bt = (compscope.load(MODELS[k]()) for k in ("llama-gqa", "gemma3", "gpt2", "bert"))
    assert ll.n_kv_heads < ll.n_heads and ll.b_Q is not None and ll.rotary is not None
    assert gm.qk_norm is not None and gm.attn_out_norm is not None and gm.attn_scale == 12**-0.5
    assert gm.sliding_window == (5, None, 5, None) and gm.attn_norm.offset == 1.0
    assert not torch.equal(gm.rotary.inv_freq[0], gm.rotary.inv_freq[1])  # local and global bases
    assert g2.W_pos is not None and g2.attn_norm.bias is not None and g2.final_norm is not None
    assert "W_type" in bt.embed_extra and bt.norm_placement == "post" and not bt.causal
    g = compscope.load(MODELS["gemma2"]())
    assert g.attn_softcap == 1.5 and g.sliding_window == (4, None)
    o = compscope.load(MODELS["olmo2"]())
    assert o.qk_norm_scope == "layer" and o.qk_norm[0].weight.shape == (2, 32) and o.qk_norm[1].weight.shape == (2, 16)
    assert o.attn_norm is None and o.norm_placement == "none" and o.attn_out_norm is not None
    b = compscope.load(MODELS["bloom"]())
    assert b.positions == "alibi" and b.alibi.tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1]
    s = compscope.load(MODELS["gpt-oss"]())
    assert s.sinks is not None and s.sinks.shape == (2, 4) and s.attn_scale > 8**-0.5  # YaRN's factor squared
    m = compscope.load(MODELS["modernbert"]())
    assert m.first_layer_unnormed and not m.causal and m.sliding_window == (None, 3, 3)
    r = compscope.load(MODELS["deberta"]())
    assert r.positions == "relative" and r.rel_buckets == (4, 10) and r.pos_Q.shape == r.pos_K.shape == (2, 4, 8, 8)
    mp = compscope.load(MODELS["mpnet"]())
    assert mp.positions == "learned" and mp.rel_bias_buckets == (32, 128) and mp.rel_bias.shape == (2, 4, 32)


def test_files_written_before_the_qk_norm_scope_existed_load_per_head(tmp_path):
    """A description without ``qk_norm_scope`` (an older compscope wrote only per-head QK-norm) loads
    per head; a file whose gains do not fit the scope it states is refused, naming the field."""
    hw = compscope.load(gemma3())
    native.save(hw, tmp_path / "m")
    desc = json.loads((tmp_path / "m" / "compscope.json").read_text())
    del desc["fields"]["qk_norm_scope"]
    (tmp_path / "m" / "compscope.json").write_text(json.dumps(desc))
    assert_identical(hw, compscope.load(tmp_path / "m"))
    desc["fields"]["qk_norm_scope"] = "layer"
    (tmp_path / "m" / "compscope.json").write_text(json.dumps(desc))
    with pytest.raises(compscope.WeightError, match=r"heads.safetensors: qk_norm \(q\) weight has shape \(4, 16\), expected \(4, 64\)"):
        compscope.load(tmp_path / "m")


def test_files_written_before_the_soft_cap_existed_still_load(tmp_path):
    """A description without ``attn_softcap`` (written by an older compscope) loads uncapped."""
    hw = compscope.load(llama_gqa())
    native.save(hw, tmp_path / "m")
    desc = json.loads((tmp_path / "m" / "compscope.json").read_text())
    del desc["fields"]["attn_softcap"]
    (tmp_path / "m" / "compscope.json").write_text(json.dumps(desc))
    assert_identical(hw, compscope.load(tmp_path / "m"))


def test_processed_weights_round_trip(tmp_path):
    hw = compscope.load(gpt2(), fold_norm=True, center_writing=True, fold_value_bias=True)
    assert hw.meta.processing == ("fold_norm", "center_writing", "fold_value_bias")
    native.save(hw, tmp_path / "p")
    back = compscope.load(tmp_path / "p" / "compscope.json")  # the description file works as a path too
    assert_identical(hw, back)


def test_hand_built_weights_round_trip_with_shared_tensors(tmp_path):
    """Fields that share storage (a tied unembedding, one norm used twice) and float64/bfloat16
    tensors are saved and come back unchanged."""
    g = torch.Generator().manual_seed(5)
    L, H, G, r, d, V = 2, 4, 2, 3, 8, 11
    W_E = torch.randn(d, V, generator=g)
    gain = torch.randn(L, r, generator=g)
    qn = Norm("rmsnorm", gain, None, 1e-6, 1.0)
    hw = HeadWeights(
        W_Q=torch.randn(L, H, r, d, generator=g), W_K=torch.randn(L, G, r, d, generator=g),
        W_V=torch.randn(L, G, r, d, generator=g), W_O=torch.randn(L, H, d, r, generator=g),
        b_Q=None, b_K=None, b_V=None, b_O=None,
        W_E=W_E, W_pos=None, W_U=W_E.T, b_U=None,
        kv_map=(0, 0, 1, 1), attn_norm=Norm("layernorm", None, torch.randn(L, d, generator=g).bfloat16(), 1e-5),
        final_norm=None, norm_placement="pre", qk_norm=(qn, qn),
        rotary=Rotary(2, torch.rand(L, 1, dtype=torch.float64, generator=g), "interleaved"),
        positions="rotary", attn_scale=0.3, causal=True, sliding_window=(None, 3),
    )
    native.save(hw, tmp_path / "h")
    assert_identical(hw, native.load(tmp_path / "h"))


def test_files_are_what_the_docstring_says(tmp_path):
    hw = compscope.load(gpt2())
    out = native.save(hw, tmp_path / "m")
    doc = json.loads((out / "compscope.json").read_text())
    assert doc["format"] == "compscope" and doc["version"] == 1
    assert (out / "heads.safetensors").is_file()


def test_a_layer_without_sinks_round_trips_as_minus_infinity_and_nan_or_plus_infinity_is_refused(tmp_path):
    """MiMo-V2-Flash's global layers have no sink, held as a sink logit of -inf (weight 0 in the softmax): the
    format keeps it, and the forward is the one without a sink there; a NaN or +inf sink is refused, in the
    weights and in a file."""
    from hf_tiny import BY_ID, build

    hw = compscope.load(build(BY_ID["mimo-v2-flash-sliding-sinks-narrow-values"]))
    assert torch.isinf(hw.sinks[0]).all() and torch.isfinite(hw.sinks[1:]).all()
    native.save(hw, tmp_path / "m")
    back = compscope.load(tmp_path / "m")
    assert_identical(hw, back)
    x = torch.randn(2, 7, hw.d_model, generator=torch.Generator().manual_seed(0))
    none = dataclasses.replace(hw, sinks=None)
    # (float32 rounding apart: the softmax over one more column of weight 0 may sum in another order on more threads)
    torch.testing.assert_close(attention_forward(hw, 0, x), attention_forward(none, 0, x), atol=1e-6, rtol=1e-5)
    assert (attention_forward(hw, 1, x) - attention_forward(none, 1, x)).abs().max() > 1e-3
    for bad in (float("nan"), float("inf")):
        sinks = hw.sinks.clone()
        sinks[1, 0] = bad
        with pytest.raises(compscope.WeightError, match=r"sinks has 1 NaN/Inf values \(the first at index \(1, 0\)\)"):
            dataclasses.replace(hw, sinks=sinks)
        from safetensors.torch import load_file, save_file

        tensors = load_file(tmp_path / "m" / "heads.safetensors")
        save_file({**tensors, "sinks": sinks}, tmp_path / "m" / "heads.safetensors")
        with pytest.raises(compscope.WeightError, match="tensor 'sinks' has NaN/Inf values"):
            compscope.load(tmp_path / "m")
        save_file(tensors, tmp_path / "m" / "heads.safetensors")
