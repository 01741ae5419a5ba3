"""compscope's GGUF reader on small files written with ``gguf.GGUFWriter`` in llama.cpp's
conventions (Gemma: every norm gain stored as ``1 + w``; sliding-window pattern and local
rotary base in the metadata), compared with the same weights loaded from a transformers
model object. The real quantised files are checked against transformers in
``test_real_models.py``."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from hf_tiny import hf_config, hub_snapshot  # noqa: E402

L, H, G, R, D, V, WINDOW = 4, 4, 2, 8, 24, 40, 6


def _randomise(model, seed: int) -> None:
    """Every parameter of ``model`` drawn N(0, 0.3²), in order, from one seeded generator (no gain is 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def _numpy_state(model) -> dict:
    """``model``'s state dict as float32 numpy arrays, as the GGUF writer takes them."""
    return {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}


def _metadata(w, **values) -> None:
    """The metadata llama.cpp's converter writes, ``w.add_<key>(value)`` for each of ``values`` over the
    tiny models' defaults (2 blocks, context 64, width D, MLP 32, H heads, G K/V heads, V tokens); a
    value None leaves its key out."""
    defaults = dict(block_count=2, context_length=64, embedding_length=D, feed_forward_length=32, head_count=H,
                    head_count_kv=G, vocab_size=V)
    for key, value in {**defaults, **values}.items():
        if value is not None:
            getattr(w, f"add_{key}")(value)


def _add_scalar(w, key: str, value) -> None:
    """``value`` under ``key`` in the writer ``w``: a bool as a bool, a float as float32, a string as a string, any
    other (an integer) as uint32."""
    add = (w.add_bool if isinstance(value, bool) else w.add_float32 if isinstance(value, float)
           else w.add_string if isinstance(value, str) else w.add_uint32)
    add(key, value)


def _writer(path, arch: str):
    """A ``GGUFWriter`` for ``arch`` at ``path`` with a vocabulary of V tokens (``t0``, ``t1``, ...) as
    a GPT-2-style tokenizer: transformers' GGUF reader takes the vocabulary's size off the token list."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(V)])
    return w


#: a Llama layer's attention tensors (HF's names in a layer -> llama.cpp's in a block)
_LLAMA_ATTENTION = {"input_layernorm.weight": "attn_norm.weight",
                    **{f"self_attn.{x}_proj.weight": f"attn_{x}.weight" for x in "qkv"},
                    "self_attn.o_proj.weight": "attn_output.weight"}
#: a Qwen3 layer's attention, QK norms and MLP input norm (HF's names in a layer -> llama.cpp's in a block)
_QWEN3_LAYER = {**_LLAMA_ATTENTION, "self_attn.q_norm.weight": "attn_q_norm.weight",
                "self_attn.k_norm.weight": "attn_k_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight"}


def _add_by_gguf_names(w, sd: dict, arch, n_layers: int, unnamed_ok: bool = False) -> None:
    """Every tensor of ``sd`` (HF names) added to the writer ``w`` under the name gguf-py's map for ``arch``
    (a ``MODEL_ARCH``) gives it, as llama.cpp's converter names it; one the map does not name is an error,
    or, ``unnamed_ok``, left out."""
    names = gguf.get_tensor_name_map(arch, n_layers)
    for key, t in sd.items():
        stem, _, suffix = key.rpartition(".")
        name = names.get_name(stem)
        assert name is not None or unnamed_ok, key
        if name is not None:
            w.add_tensor(f"{name}.{suffix}", t)


def _add_blocks(w, sd: dict, names: dict, n_layers: int) -> None:
    """Each of the first ``n_layers`` layers' tensors in ``sd`` (``layers.{i}.NAME``) added to the writer ``w``
    as ``blk.{i}.{names[NAME]}``."""
    for i in range(n_layers):
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"layers.{i}.{hf_name}"])


def _finish(w) -> None:
    """Write a ``GGUFWriter``'s header, metadata and tensors, and close the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_gemma3(types: list[str]):
    cfg = hf_config("Gemma3TextConfig", 
        vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L, num_attention_heads=H,
        num_key_value_heads=G, head_dim=R, query_pre_attn_scalar=R, sliding_window=WINDOW, layer_types=types,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 500.0},
            "full_attention": {"rope_type": "default", "rope_theta": 20000.0},
        },
    )
    model = transformers.Gemma3ForCausalLM(cfg).eval()
    _randomise(model, 0)
    return model


def write_gemma3_gguf(path, model, pattern, arch: str = "gemma3") -> None:
    """What llama.cpp's convert_hf_to_gguf writes for Gemma 3 (float32, no quantisation); with
    ``arch='gemma2'``, for Gemma 2: no QK-norm, the soft cap in the metadata, no sliding pattern."""
    sd, n = _numpy_state(model), model.config.num_hidden_layers
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    _metadata(w, block_count=n, key_length=R, value_length=R, layer_norm_rms_eps=1e-6, sliding_window=WINDOW)
    if arch in ("gemma3", "gemma-embedding"):
        w.add_rope_freq_base(20000.0)
        # by name: gguf's writer has methods for these two from 0.18 (add_rope_freq_base_swa, add_sliding_window_pattern)
        w.add_float32(f"{arch}.rope.freq_base_swa", 500.0)  # (which llama.cpp ignores for gemma-embedding: 10000)
        key = f"{arch}.attention.sliding_window_pattern"
        if isinstance(pattern, int):
            w.add_uint32(key, pattern)
        else:
            w.add_array(key, pattern)
    else:
        w.add_rope_freq_base(10000.0)
        w.add_float32(f"{arch}.attn_logit_softcapping", model.config.attn_logit_softcapping)
    names = {
        "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight", "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
        **{f"mlp.{x}_proj.weight": f"ffn_{x}.weight" for x in ("gate", "up", "down")},  # (the whole model: the runs
    }  # read the MLPs)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(n):
        for hf_name, g_name in names.items():
            if f"model.layers.{i}.{hf_name}" not in sd:  # Gemma 2: no q/k norms
                continue
            t = sd[f"model.layers.{i}.{hf_name}"]
            w.add_tensor(f"blk.{i}.{g_name}", t + 1.0 if hf_name.endswith("norm.weight") else t)
    w.add_tensor("output_norm.weight", sd["model.norm.weight"] + 1.0)
    _finish(w)


@pytest.mark.parametrize(
    "pattern, types",
    [
        (2, ["sliding_attention", "full_attention"] * 2),  # every 2nd layer global
        ([True, True, False, True], ["sliding_attention"] * 2 + ["full_attention", "sliding_attention"]),
    ],
    ids=["period", "per-layer-flags"],
)
def test_gemma3_gguf_matches_model_object(tmp_path, pattern, types):
    model = tiny_gemma3(types)
    path = tmp_path / "g.gguf"
    write_gemma3_gguf(path, model, pattern)
    ours, ref = compscope.load(path), compscope.load(model)
    assert ours.sliding_window == ref.sliding_window == tuple(WINDOW if t == "sliding_attention" else None for t in types)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.scale == ref.scale
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    # norms: GGUF's 1 + w, read back as w (float32 rounding of (w + 1) - 1 only)
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.qk_norm[0], ref.qk_norm[0]), (ours.qk_norm[1], ref.qk_norm[1]),
                 (ours.attn_out_norm, ref.attn_out_norm), (ours.final_norm, ref.final_norm)]:
        assert a.offset == b.offset == 1.0
        torch.testing.assert_close(a.weight, b.weight, atol=1e-6, rtol=0)
    x = torch.randn(1, 2 * WINDOW + 3, D, generator=torch.Generator().manual_seed(1))
    from compscope.core.attention import attention_forward

    for layer in range(L):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch, layers", [("gemma2", 46), ("gemma2", 45), ("gemma3", 62), ("gemma3", 61),
                                          ("gemma-embedding", 62)])
def test_gemma_ggufs_scale_logits_by_llama_cpps_27b_rule(tmp_path, arch, layers):
    """The logit scale is not in a Gemma file: llama.cpp scales the 27B models' logits (Gemma 2 of 46 layers, Gemma 3
    of 62) by (d_model / n_heads)^-1/2, every other file's (EmbeddingGemma's of 62 layers too) by d_head^-1/2. Here
    d_model / n_heads = 6 and d_head = 8: the scale is the closed form's, and the model object's built with that
    ``query_pre_attn_scalar``."""
    big = layers == {"gemma2": 46, "gemma3": 62}.get(arch)
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=8, num_hidden_layers=layers, num_attention_heads=H,
                  num_key_value_heads=G, head_dim=R, query_pre_attn_scalar=D // H if big else R, sliding_window=WINDOW)
    if arch == "gemma2":
        model = transformers.Gemma2ForCausalLM(hf_config("Gemma2Config", attn_logit_softcapping=2.0, **common)).eval()
        pattern = None
    else:
        types = ["sliding_attention", "full_attention"] * (layers // 2) + ["sliding_attention"] * (layers % 2)
        model = transformers.Gemma3ForCausalLM(hf_config("Gemma3TextConfig", layer_types=types, **common)).eval()
        pattern = 2
    write_gemma3_gguf(tmp_path / "g.gguf", model, pattern, arch=arch)
    ours = compscope.load(tmp_path / "g.gguf")
    assert ours.n_layers == layers
    assert ours.scale == pytest.approx((D // H if big else R) ** -0.5, rel=1e-12)
    if arch != "gemma-embedding":  # (the model object of EmbeddingGemma attends both ways: test_gemma_embedding_...)
        assert ours.scale == compscope.load(model).scale


def test_a_gemma3_gguf_runs_with_the_settings_transformers_reader_leaves_at_defaults(tmp_path):
    """transformers' GGUF reader builds Gemma 3 with its defaults for the layer types (every sixth global), the
    logit scale's ``query_pre_attn_scalar`` (256), the local rotary base (10 000) and no rope scaling on the global
    layers (the 4B model and up scale them linearly by 8): a file stating others (every second layer global, heads
    of 6, a local base of 500, linear scaling by 8) runs with them handed back, and agrees with the weights."""
    types = ["sliding_attention", "full_attention"] * 2
    r = D // H  # (the head width transformers' GGUF reader takes from key_length, as compscope)
    cfg = hf_config("Gemma3TextConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=r, query_pre_attn_scalar=r,
                    sliding_window=WINDOW, layer_types=types,
                    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 500.0},
                                     "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 20000.0}})
    model = transformers.Gemma3ForCausalLM(cfg).eval()
    _randomise(model, 47)
    sd = _numpy_state(model)
    w = _writer(tmp_path / "g.gguf", "gemma3")
    _metadata(w, block_count=L, key_length=r, value_length=r, layer_norm_rms_eps=1e-6, sliding_window=WINDOW,
              rope_freq_base=20000.0)
    w.add_float32("gemma3.rope.freq_base_swa", 500.0)
    w.add_uint32("gemma3.attention.sliding_window_pattern", 2)
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(8.0)
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(L):
        for hf_name, g_name in names.items():
            t = sd[f"model.layers.{i}.{hf_name}.weight"]
            w.add_tensor(f"blk.{i}.{g_name}.weight", t + 1.0 if hf_name.endswith("norm") else t)
    w.add_tensor("output_norm.weight", sd["model.norm.weight"] + 1.0)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.scale == ref.scale and ours.sliding_window == ref.sliding_window
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "g.gguf", progress=False, device="cpu")
    assert runner.model.config.layer_types == types
    tr = runner.trace(torch.randint(0, V, (2, 2 * WINDOW + 3), generator=torch.Generator().manual_seed(48)))
    assert runner._agreed
    for layer in range(L):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_gemma_embedding_gguf_matches_model_object(tmp_path):
    """EmbeddingGemma as llama.cpp writes it (``gemma-embedding``: Gemma 3's tensors and keys) reads as
    transformers' EmbeddingGemma (Gemma 3 attending both ways) holding the same weights: keys within half
    the window on either side, every second layer global as the stored pattern says, the local layers at
    base 10000 as llama.cpp takes them (whatever the file's own key), the scale ``d_head^(-1/2)``."""
    types = ["sliding_attention", "full_attention"] * 2
    cfg = hf_config("Gemma3TextConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R, query_pre_attn_scalar=R,
                    sliding_window=WINDOW, layer_types=types, use_bidirectional_attention=True,
                    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                     "full_attention": {"rope_type": "default", "rope_theta": 20000.0}})
    model = transformers.Gemma3TextModel(cfg).eval()
    _randomise(model, 0)
    causal = transformers.Gemma3ForCausalLM(cfg).eval()  # (the writer reads the causal LM's names)
    causal.model.load_state_dict(model.state_dict())
    path = tmp_path / "e.gguf"
    write_gemma3_gguf(path, causal, 2, arch="gemma-embedding")
    ours, ref = compscope.load(path), compscope.load(model)
    assert not ours.causal and ours.W_U is None and ours.sliding_window == ref.sliding_window == (WINDOW // 2 + 1, None) * 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.scale == ref.scale == R**-0.5
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    x = torch.randn(1, 2 * WINDOW + 3, D, generator=torch.Generator().manual_seed(1))
    from compscope.core.attention import attention_forward

    for layer in range(L):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-4, rtol=1e-4)


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute``, applied to q/k weights and biases."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tiny_llama(bias: bool = True):
    cfg = hf_config("LlamaConfig", 
        vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
        num_key_value_heads=G, attention_bias=bias, max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    return model


def _write_llama_gguf(path, model, extra: dict | None = None, split_max_tensors: int = 0,
                      small_first_shard: bool = False, arch: str = "llama", floats: dict | None = None,
                      permute: bool = True, ints: dict | None = None) -> None:
    """A Llama GGUF as llama.cpp writes one (q/k rows permuted, unless ``permute`` is off: Llama 4's
    as HF's), plus the ``extra`` tensors; ``split_max_tensors``: split into shards of that many
    tensors, named as llama.cpp names them (``small_first_shard``: the first holding the metadata
    alone); ``arch``: another architecture llama.cpp converts as a Llama, with ``floats`` and
    ``ints``: its own metadata (``{arch}.KEY``: value)."""
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors, small_first_shard=small_first_shard)
    n = model.config.num_hidden_layers
    _metadata(w, block_count=n, layer_norm_rms_eps=1e-6, rope_freq_base=10000.0)
    for key, value in (floats or {}).items():
        w.add_float32(f"{arch}.{key}", value)
    for key, value in (ints or {}).items():
        w.add_uint32(f"{arch}.{key}", value)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(n):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        for proj, short, n in (("q", "q", H), ("k", "k", G), ("v", "v", None), ("o", "output", None)):
            for part in ("weight", "bias"):
                key = f"{p}self_attn.{proj}_proj.{part}"
                if key in sd:
                    t = sd[key] if n is None or not permute else llama_cpp_permute(sd[key], n)
                    w.add_tensor(f"blk.{i}.attn_{short}.{part}", t)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
    for name, t in (extra or {}).items():
        w.add_tensor(name, t)
    _finish(w)


def test_llama_gguf_with_biases_is_unpermuted(tmp_path):
    """q/k biases are permuted by llama.cpp like the weights' rows, and must be undone too."""
    model = _tiny_llama()
    _write_llama_gguf(tmp_path / "b.gguf", model)
    hw = compscope.load(tmp_path / "b.gguf")
    for i, block in enumerate(model.model.layers):
        a = block.self_attn
        assert torch.equal(hw.W_Q[i].reshape(-1, D), a.q_proj.weight) and torch.equal(hw.b_Q[i].reshape(-1), a.q_proj.bias)
        assert torch.equal(hw.W_K[i].reshape(-1, D), a.k_proj.weight) and torch.equal(hw.b_K[i].reshape(-1), a.k_proj.bias)
        assert torch.equal(hw.b_V[i].reshape(-1), a.v_proj.bias)


def test_a_gguf_file_named_otherwise_is_told_by_its_magic(tmp_path):
    """A GGUF file whose name does not end in ``.gguf`` (as a hub snapshot's blob) is known by its first four bytes,
    the magic ``GGUF``, and read as the same file."""
    from compscope.loading.formats import gguf as gguf_format

    _write_llama_gguf(tmp_path / "b.gguf", _tiny_llama())
    (tmp_path / "blob").write_bytes((tmp_path / "b.gguf").read_bytes())
    assert gguf_format.recognise(tmp_path / "blob") and gguf_format.recognise(tmp_path / "b.gguf")
    ours, named = compscope.load(tmp_path / "blob"), compscope.load(tmp_path / "b.gguf")
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(named, name)), name
    (tmp_path / "other").write_bytes(b"GGUX" + bytes(60))
    assert not gguf_format.recognise(tmp_path / "other")


@pytest.mark.parametrize("extra", [
    {"blk.1.attn_sinks.weight": np.ones(H, np.float32)},  # gpt-oss's per-head sink logits: no mapping reads them
    {"blk.0.attn_q_norm.weight": np.ones(R, np.float32)},  # mapped, but a Llama model has no QK-norm to read
    {"blk.0.post_attention_norm.weight": np.ones(D, np.float32)},  # a post-attention norm (Gemma's), not Llama's
    {"token_embd_norm.weight": np.ones(D, np.float32)},  # an embedding norm before the first layer
])
def test_a_gguf_tensor_that_enters_attention_but_is_not_read_is_refused_by_name(tmp_path, extra):
    """A GGUF tensor that attention depends on, which compscope would not read for the file's
    architecture, is refused by its name in the file, not silently dropped; MLP tensors and the
    stored rotary frequencies ``attn_rot_embd`` (the metadata's base determines them) are not."""
    model = _tiny_llama(bias=False)
    _write_llama_gguf(tmp_path / "x.gguf", model, extra)
    (name,) = extra
    with pytest.raises(compscope.UnsupportedModelError, match=rf"x\.gguf: '{name}' enters attention but compscope does not "
                                                               "read it for this llama model"):
        compscope.load(tmp_path / "x.gguf")
    harmless = {"blk.0.attn_rot_embd": np.ones(R // 2, np.float32), "blk.0.ffn_gate.weight": np.ones((32, D), np.float32)}
    _write_llama_gguf(tmp_path / "ok.gguf", model, harmless)
    hw = compscope.load(tmp_path / "ok.gguf")
    assert torch.equal(hw.W_K[0].reshape(-1, D), model.model.layers[0].self_attn.k_proj.weight)


@pytest.mark.parametrize("arch", ["granite", "granitemoe"])
def test_granite_ggufs_read_their_scalars_and_match_the_model_object(tmp_path, arch):
    """Granite as llama.cpp converts it (as a Llama: q/k rows permuted; the MoE's experts and router
    as MLP tensors) with its four scalars in the metadata (``embedding_scale``, ``attention.scale``,
    ``residual_scale``, ``logit_scale``): read back, the heads, embedding, unembedding and logit
    scale are the model object's, each scalar folded alike; the data-based commands refuse the file
    by its architecture, which transformers' GGUF reader does not read."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import cannot_run

    scalars = dict(embedding_multiplier=2.0, attention_multiplier=0.25, residual_multiplier=0.5, logits_scaling=4.0)
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                  num_key_value_heads=G, max_position_embeddings=64, rope_parameters={"rope_type": "default",
                                                                                      "rope_theta": 10000.0})
    extra = {}
    if arch == "granite":
        model = transformers.GraniteForCausalLM(hf_config("GraniteConfig", **common, **scalars))
    else:
        model = transformers.GraniteMoeForCausalLM(hf_config("GraniteMoeConfig", **common, **scalars, num_local_experts=2,
                                                             num_experts_per_tok=1))
        for i in range(2):
            extra |= {f"blk.{i}.ffn_gate_inp.weight": np.ones((2, D), np.float32),
                      **{f"blk.{i}.ffn_{x}_exps.weight": np.ones((2, 32, D), np.float32) for x in ("gate", "up")},
                      f"blk.{i}.ffn_down_exps.weight": np.ones((2, D, 32), np.float32)}
    _randomise(model, 11)
    _write_llama_gguf(tmp_path / "g.gguf", model.eval(), extra, arch=arch, floats={
        "embedding_scale": 2.0, "attention.scale": 0.25, "residual_scale": 0.5, "logit_scale": 4.0})
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "granite"
    assert ours.scale == ref.scale == 0.25  # (exact in the float32 metadata)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(4))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    assert re.search(rf"g\.gguf: a GGUF file of architecture '{arch}', which transformers' GGUF reader does not read",
                     cannot_run(tmp_path / "g.gguf"))


@pytest.mark.parametrize("variant_id", ["granite-hybrid-nope-moe", "granite-hybrid-rope-dense", "bamba-half-rotary"])
def test_hybrid_ggufs_read_their_attention_layers_as_the_model_object(tmp_path, variant_id):
    """Granite 4's hybrids and Bamba as llama.cpp writes them (``granitehybrid``: a K/V head count per
    layer, 0 on the Mamba layers; q/k rows permuted; whether the attention rotates in
    ``rope.scaling.finetuned``; Bamba's half rotary as ``rope.dimension_count``; no ``attention.scale``
    where the model has none, which llama.cpp reads as d_head^-1/2): read back, the attention layers'
    heads, the embedding, the unembedding, the rotary and the logit scale are the model object's;
    a Mamba layer's input norm is not taken for attention; refused on data by architecture."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    model = build(BY_ID[variant_id])
    cfg, sd = model.config, _numpy_state(model)
    layers = [i for i, b in enumerate(model.model.layers) if getattr(b, "self_attn", None) is not None]
    d, h, kv, n = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.num_hidden_layers
    rotates = variant_id.startswith("bamba") or cfg.position_embedding_type == "rope"
    theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    w = gguf.GGUFWriter(str(tmp_path / "h.gguf"), "granitehybrid")
    _metadata(w, block_count=n, embedding_length=d, head_count=h, head_count_kv=[kv if i in layers else 0 for i in range(n)],
              vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=theta,
              rope_scaling_finetuned=rotates, **({"rope_dimension_count": d // h // 2} if variant_id.startswith("bamba") else {}))
    for key, name in (("embedding_scale", "embedding_multiplier"), ("attention.scale", "attention_multiplier"),
                      ("residual_scale", "residual_multiplier"), ("logit_scale", "logits_scaling")):
        if hasattr(cfg, name):  # (Bamba has none)
            w.add_float32(f"granitehybrid.{key}", getattr(cfg, name))
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(n):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        if i not in layers:
            w.add_tensor(f"blk.{i}.ssm_out.weight", np.ones((d, 2 * d), np.float32))  # a Mamba layer's: not attention
            continue
        for proj, short, rows in (("q", "q", h), ("k", "k", kv), ("v", "v", None), ("o", "output", None)):
            t = sd[f"{p}self_attn.{proj}_proj.weight"]
            w.add_tensor(f"blk.{i}.attn_{short}.weight", t if rows is None else llama_cpp_permute(t, rows))
    _finish(w)
    ours, ref = compscope.load(tmp_path / "h.gguf"), compscope.load(model)
    assert ours.meta.family == "granite_hybrid" and ours.n_layers == ref.n_layers == len(layers)
    assert ours.scale == pytest.approx(ref.scale, rel=1e-6)  # (float32 metadata)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), atol=0, rtol=2e-7, msg=name)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=0)
    assert bool(ours.rotary.inv_freq.any()) == rotates
    x = torch.randn(1, 9, d, generator=torch.Generator().manual_seed(4))
    for layer in range(ours.n_layers):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    assert "architecture 'granitehybrid', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "h.gguf")


@pytest.mark.parametrize("counts, flag, needle", [
    ([0, G, 0, G], None, r"'granitehybrid\.rope\.scaling\.finetuned' .* is missing"),
    ([0, G, 0, 1], False, r"'granitehybrid\.attention\.head_count_kv' = \[0, 2, 0, 1\] is not one K/V head count"),
    ([0, G, 0], False, "is not one K/V head count, or 0 on a Mamba layer, per layer \\(4\\)"),
])
def test_a_hybrid_gguf_whose_layers_or_rotary_the_metadata_does_not_say_is_refused(tmp_path, counts, flag, needle):
    """A ``granitehybrid`` file must say, per layer, one K/V head count or 0 (a Mamba layer), and
    whether its attention rotates; otherwise it is refused by the key at fault, before any tensor is read."""
    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "granitehybrid")
    _metadata(w, block_count=4, head_count_kv=counts, layer_norm_rms_eps=1e-6,
              **({} if flag is None else {"rope_scaling_finetuned": flag}))
    w.add_tensor("token_embd.weight", np.ones((V, D), np.float32))
    _finish(w)
    with pytest.raises(compscope.UnsupportedModelError, match=needle):
        compscope.load(tmp_path / "x.gguf")


@pytest.mark.parametrize("experts, qk_norm", [(16, True), (128, False)])
def test_a_llama4_gguf_reads_as_the_model_object_by_llama_cpps_rules(tmp_path, experts, qk_norm):
    """llama.cpp stores Llama 4's rows as HF's (both rotate interleaved pairs), no rotary on every
    fourth layer and a gainless QK-norm on the others unless the model has 128 experts (Maverick), chunks of 8192
    tokens and the query temperature 0.1 from position 8191: its rules, none of them in the metadata but the expert
    count."""
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    if not hasattr(transformers, "Llama4TextConfig"):
        pytest.skip("no Llama 4 in this transformers")
    model = build(BY_ID["llama4-nope-gainless-qk-norm"], num_hidden_layers=4, no_rope_layer_interval=4,
                  rms_norm_eps=1e-6, use_qk_norm=qk_norm, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                  attention_chunk_size=8192, floor_scale=8192, attn_scale=0.1, vocab_size=V, hidden_size=D,
                  num_attention_heads=H, num_key_value_heads=G, head_dim=D // H)
    _write_llama_gguf(tmp_path / "l4.gguf", model.eval(), arch="llama4", permute=False, ints={"expert_count": experts})
    ours, ref = compscope.load(tmp_path / "l4.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "llama4"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.rotary.inv_freq, ref.rotary.inv_freq) and ours.rotary.style == "interleaved"
    assert not ours.rotary.inv_freq[3].any() and ours.rotary.inv_freq[:3].all()
    assert ours.qk_norm_layers == ref.qk_norm_layers == ((True, True, True, False) if qk_norm else ())
    assert (ours.qk_norm is None) == (not qk_norm)
    # the chunks of 8192 and the query temperature from position 8191 (said), as the model object built with them
    said = lambda hw: [n for n in hw.meta.notes if "chunk of" in n or "Llama 4's temperature" in n]  # noqa: E731
    assert len(said(ours)) == 2 and said(ours) == said(ref)
    assert any("chunk of 8192 tokens" in n for n in said(ours)) and any("first 8191 positions" in n for n in said(ours))
    assert "architecture 'llama4', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "l4.gguf")


def test_a_smollm3_gguf_has_no_rotary_on_every_fourth_layer_as_the_model_object(tmp_path):
    """SmolLM3 as llama.cpp converts it (as a Llama: q/k rows permuted); its layers without rotary
    are not in the metadata (llama.cpp takes every fourth, as transformers' default interval): read
    back, layer 3 has frequency 0 and every head is the model object's; refused on data by architecture."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import cannot_run

    model = transformers.SmolLM3ForCausalLM(hf_config(
        "SmolLM3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L, num_attention_heads=H,
        num_key_value_heads=G, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}))
    _randomise(model, 13)
    _write_llama_gguf(tmp_path / "s.gguf", model.eval(), arch="smollm3")
    ours, ref = compscope.load(tmp_path / "s.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "smollm3"
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == [True, True, True, False]
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=0)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(4))
    for layer in range(L):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    assert "architecture 'smollm3', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "s.gguf")


@pytest.mark.parametrize("arch, qk_norm", [("command-r", False), ("command-r", True), ("cohere2", False)],
                         ids=["command-r", "command-r-plus-qk-norm", "cohere2"])
def test_cohere_ggufs_match_the_model_object(tmp_path, arch, qk_norm):
    """Command R (``command-r``; Command R+ with its per-head QK LayerNorms, stacked ``(heads, d_head)``)
    and Command R7B (``cohere2``) as llama.cpp writes them: HF's rows unpermuted (Cohere rotates
    interleaved pairs, llama.cpp's own kind), LayerNorms without bias, the logit scale in the metadata,
    Cohere 2's window (its sliding pattern is not stored: every fourth layer global, as HF's default)
    and the head tied: read back, the attention is the model object's; the data-based commands refuse
    the file by its architecture."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import cannot_run

    common = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_attention_heads=H, num_key_value_heads=G,
                  max_position_embeddings=64, layer_norm_eps=1e-5, logit_scale=0.25,
                  rope_parameters={"rope_type": "default", "rope_theta": 900.0})
    if arch == "cohere2":
        model = transformers.Cohere2ForCausalLM(hf_config("Cohere2Config", **common, num_hidden_layers=L,
                                                          sliding_window=WINDOW))
    else:
        model = transformers.CohereForCausalLM(hf_config("CohereConfig", **common, num_hidden_layers=L,
                                                         use_qk_norm=qk_norm))
    _randomise(model, 12)
    model.eval()
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(tmp_path / "c.gguf"), arch)
    _metadata(w, block_count=L, layer_norm_eps=1e-5, rope_freq_base=900.0, logit_scale=0.25,
              **({"sliding_window": WINDOW, "rope_dimension_count": D // H} if arch == "cohere2" else {}))
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.o_proj.weight": "attn_output.weight",
             **{f"self_attn.{x}_proj.weight": f"attn_{x}.weight" for x in "qkv"},
             **{f"self_attn.{x}_norm.weight": f"attn_{x}_norm.weight" for x in "qk"}}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    for i in range(L):
        for hf_name, g_name in names.items():
            if f"model.layers.{i}.{hf_name}" in sd:
                w.add_tensor(f"blk.{i}.{g_name}", sd[f"model.layers.{i}.{hf_name}"])
    _finish(w)
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "cohere"
    assert (ours.qk_norm is not None) == qk_norm and ours.sliding_window == ref.sliding_window
    if arch == "cohere2":
        assert ours.sliding_window == (WINDOW, WINDOW, WINDOW, None)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=0)
    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(4))
    for layer in range(L):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    assert re.search(rf"c\.gguf: a GGUF file of architecture '{arch}', which transformers' GGUF reader does not read",
                     cannot_run(tmp_path / "c.gguf"))


def _same_heads(a, b) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V",
                                                                     "W_E", "W_U"))


def test_a_split_gguf_file_is_read_from_all_its_shards_whichever_is_given(tmp_path):
    """llama.cpp splits a large model into NAME-00001-of-0000n.gguf, ... (metadata in the first
    shard, tensors spread over all): any shard given reads the whole model, equal to the file written
    whole, and says so in its notes (a whole file named as shard 1 of 1 says nothing of shards). Before, the first
    shard gave "tensor ... is missing" and the others "GGUF architecture None is not supported"."""
    model = _tiny_llama()
    _write_llama_gguf(tmp_path / "whole.gguf", model)
    whole = compscope.load(tmp_path / "whole.gguf")
    for most, count in ((5, 5), (11, 2)):  # 22 tensors: 5 to a shard, or 11 (two shards, the fewest that split)
        (tmp_path / str(count)).mkdir()
        _write_llama_gguf(tmp_path / str(count) / "m.gguf", model, split_max_tensors=most)
        files = sorted((tmp_path / str(count)).glob("m-*.gguf"))
        assert [f.name for f in files] == [f"m-{k:05d}-of-{count:05d}.gguf" for k in range(1, count + 1)]
        for f in files:
            hw = compscope.load(f)
            assert _same_heads(hw, whole) and hw.meta.name == "m"
            assert (f"read from the {count} shards of a split GGUF file (m-00001..{count:05d}-of-{count:05d}.gguf)"
                    in hw.meta.notes)
    (tmp_path / "1").mkdir()  # a whole file named as the one shard of one: read whole, named by its stem
    (tmp_path / "1" / "m-00001-of-00001.gguf").write_bytes((tmp_path / "whole.gguf").read_bytes())
    one = compscope.load(tmp_path / "1" / "m-00001-of-00001.gguf")
    assert _same_heads(one, whole) and one.meta.name == "m-00001-of-00001" and one.meta.notes == whole.meta.notes
    a = compscope.scores(tmp_path / "5" / "m-00004-of-00005.gguf", "K", progress=False)
    b = compscope.scores(tmp_path / "whole.gguf", "K", progress=False)
    for key, v in a.values.items():  # NaN where a pair is not scored (same layer, or later writer)
        torch.testing.assert_close(v, b.values[key], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("key", ["embedding_length", "block_count", "head_count"])
def test_a_gguf_file_without_a_width_a_depth_or_a_head_count_is_refused_naming_the_key(tmp_path, key):
    w = _writer(tmp_path / "m.gguf", "llama")
    _metadata(w, layer_norm_rms_eps=1e-6, **{key: None})
    _add_llama_tensors(w, _tiny_llama())
    name = "attention.head_count" if key == "head_count" else key
    with pytest.raises(compscope.LoadError, match=rf"m\.gguf: GGUF metadata 'llama\.{re.escape(name)}' is missing"):
        compscope.load(tmp_path / "m.gguf")


#: GGUF architecture -> (its HF model type, the model, the layers at that base, the rotary base it takes where its
#: config states none), as the released configs and transformers' config classes state it; llama.cpp's loader takes
#: 10 000 where a file states none
_OWN_BASES = {"gemma3": ("gemma3_text", "Gemma 3", "the global layers", 1e6),
              "gemma-embedding": ("gemma3_text", "EmbeddingGemma", "the global layers", 1e6),
              "modern-bert": ("modernbert", "ModernBERT", "the global layers", 160000),
              "llama4": ("llama4_text", "Llama 4", "the heads", 500000), "lfm2": ("lfm2", "LFM2", "the heads", 1e6),
              "lfm2moe": ("lfm2_moe", "LFM2-MoE", "the heads", 1e6),
              "exaone": ("exaone", "EXAONE 3", "the heads", 500000),
              "paddleocr": ("paddleocr_vl_text", "PaddleOCR-VL", "the heads", 500000),
              "gpt-oss": ("gpt_oss", "gpt-oss", "the heads", 150000),
              "minimax-m2": ("minimax_m2", "MiniMax-M2", "the heads", 5e6),
              "nomic-bert": ("nomic_bert", "nomic-embed-text", "the heads", 1000),
              "jina-bert-v3": ("jina_embeddings_v3", "jina-embeddings-v3", "the heads", 20000)}


@pytest.mark.parametrize("arch", [*_OWN_BASES, "llama"])
def test_a_gguf_file_stating_no_rotary_base_is_refused_where_its_model_and_llama_cpp_would_differ(tmp_path, arch):
    """A file without ``rope.freq_base`` runs in llama.cpp at 10 000. Where the architecture's model turns at
    another base where its config states none (Gemma 3's global layers at 1e6, gpt-oss at 150 000, ...), which the
    family reads, or transformers runs (gpt-oss, MiniMax-M2), the file is refused naming both, also to run on data;
    a Llama's, whose model takes 10 000 too, reads at 10 000."""
    w = _writer(tmp_path / "m.gguf", arch)
    _metadata(w, layer_norm_rms_eps=1e-6)
    if arch == "llama":
        _add_llama_tensors(w, _tiny_llama())
        r = compscope.load(tmp_path / "m.gguf").rotary
        want = 10000.0 ** -(torch.arange(0, r.dim, 2, dtype=torch.float64) / r.dim)
        torch.testing.assert_close(r.inv_freq.double(), want.expand_as(r.inv_freq), rtol=1e-6, atol=0)
        return
    w.add_tensor("token_embd.weight", np.ones((V, D), np.float32))
    _finish(w)
    model_type, model, layers, base = _OWN_BASES[arch]
    try:  # (the base as transformers' config class states it, where it has one)
        defaults = transformers.AutoConfig.for_model(model_type)
    except (KeyError, ValueError):
        pass
    else:
        rope = getattr(defaults, "rope_parameters", None) or {"rope_theta": getattr(defaults, "rope_theta", None)}
        stated = rope.get("full_attention", rope).get("rope_theta") or getattr(defaults, "global_rope_theta", None)
        assert stated == base, (arch, rope)
    said = (rf"m\.gguf: GGUF metadata '{re.escape(arch)}\.rope\.freq_base' is missing: llama\.cpp would turn {layers} "
            rf"at 10000, {re.escape(model)} at its own base \({base:.0f}\)$")
    with pytest.raises(compscope.UnsupportedModelError, match=said):
        compscope.load(tmp_path / "m.gguf")
    from compscope.loading.formats.gguf.runtime import runtime_config

    with pytest.raises(compscope.UnsupportedModelError, match=said):
        runtime_config(tmp_path / "m.gguf")


def _thirds(n: int) -> list[list[int]]:
    return [list(range(k * n // 3, (k + 1) * n // 3)) for k in range(3)]


def _write_shards(folder, model, names: list[str], split: list[tuple[int | str, int] | None], groups=_thirds,
                  total: int | None = None) -> int:
    """Shards of a tiny Llama's GGUF by hand: file ``names[k]`` with metadata ``split.no, split.count =
    split[k]`` (integers as uint16, a string as a string; no split metadata where ``split[k]`` is None), the
    model's metadata in the first only, and the tensors ``groups(n)[k]`` (indices into the whole file's ``n``
    tensors, in order); ``split.tensors.count`` ``total`` (default ``n``; left out where -1). Returns ``n``."""
    _write_llama_gguf(folder / "all.gguf", model)
    tensors = [(t.name, np.array(t.data)) for t in gguf.GGUFReader(folder / "all.gguf").tensors]
    meta = {"llama.block_count": 2, "llama.context_length": 64, "llama.embedding_length": D,
            "llama.feed_forward_length": 32, "llama.attention.head_count": H, "llama.attention.head_count_kv": G,
            "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-6, "llama.vocab_size": V}
    for k, (name, (no, count), group) in enumerate(zip(names, [x or (None, None) for x in split],
                                                       groups(len(tensors)))):
        w = gguf.GGUFWriter(str(folder / name), "llama")
        for key, value in (("split.no", no), ("split.count", count)):
            if value is not None:
                (w.add_string if isinstance(value, str) else w.add_uint16)(key, value)
        if total != -1:
            w.add_int32("split.tensors.count", len(tensors) if total is None else total)
        for key, value in (meta.items() if k == 0 else ()):
            _add_scalar(w, key, value)
        for i in group:
            w.add_tensor(tensors[i][0], tensors[i][1])
        _finish(w)
    return len(tensors)


@pytest.mark.parametrize("case, needle", [
    ("missing", r"m-00002-of-00003\.gguf: no such file: m-0000[13]-of-00003\.gguf is one of 3 shards"),
    ("renamed", r"x\.gguf: shard 1 of a GGUF file split in 3, named otherwise than llama\.cpp names shards "
                r"\(NAME-00001-of-00003\.gguf\)"),
    ("disagree", r"m-00003-of-00003\.gguf: its split metadata says shard 2 of 3, its name shard 3 of 3"),
    ("twice", r"m-00003-of-00003\.gguf: tensor '.+' is also in .*m-00002-of-00003\.gguf"),
    ("count", r"m-00001-of-00003\.gguf: the split GGUF file says it holds 99 tensors, and its 3 shards hold 22"),
    ("metadata", r"m-00001-of-00003\.gguf: inconsistent split metadata \(split\.no=3, split\.count=3\)"),
    ("unsplit", r"m-00002-of-00003\.gguf: its split metadata says shard 1 of 1, its name shard 2 of 3"),
    ("text", r"m-00003-of-00003\.gguf: its split metadata says split\.no='2', split\.count=3, its name shard 3 of 3"),
])
def test_a_split_gguf_file_with_a_shard_missing_misnamed_or_inconsistent_is_refused_by_file(tmp_path, case, needle):
    model = _tiny_llama()
    names = [f"m-{k:05d}-of-00003.gguf" for k in (1, 2, 3)]
    split, groups, total = [(0, 3), (1, 3), (2, 3)], _thirds, None
    if case == "renamed":
        names[0] = "x.gguf"
    if case == "disagree":
        split[2] = (1, 3)
    if case == "twice":  # the second shard's last tensor in the third as well
        groups = lambda n: [g + _thirds(n)[1][-1:] * (k == 2) for k, g in enumerate(_thirds(n))]  # noqa: E731
    if case == "count":
        total = 99
    if case == "metadata":
        split[0] = (3, 3)
    if case == "unsplit":  # no split metadata: a whole file's
        split[1] = None
    if case == "text":
        split[2] = ("2", 3)
    assert _write_shards(tmp_path, model, names, split, groups, total) == 22  # (with biases)
    if case == "missing":
        (tmp_path / names[1]).unlink()
    with pytest.raises(compscope.LoadError, match=needle):
        compscope.load(tmp_path / names[0])
    if case in ("missing", "twice", "count"):  # the same from the last shard (in "disagree" that shard is the one at
        # fault, and is refused as misnamed)
        with pytest.raises(compscope.LoadError, match=needle):
            compscope.load(tmp_path / names[2])


def test_which_split_metadata_is_a_whole_file_and_which_is_inconsistent():
    """No split metadata, or shard 1 of 1 (``split.no`` 0, ``split.count`` 1, either alone too), is a whole
    file, whatever its name; a shard number out of range or either value not an integer is refused."""
    from compscope.loading.formats.gguf.files import shards

    path = Path("model.gguf")
    for fields in ({}, {"split.count": 1, "split.no": 0}, {"split.count": 1}, {"split.no": 0}):
        assert shards(path, fields) == [path], fields
    assert shards(Path("m-00002-of-00002.gguf"), {"split.count": 2, "split.no": 1}) == [
        Path("m-00001-of-00002.gguf"), Path("m-00002-of-00002.gguf")]
    for no, count in ((2, 2), (-1, 2), ("1", 2), (1, "2"), (None, 2), (1, None), (0, 0)):
        with pytest.raises(compscope.LoadError, match=rf"^model\.gguf: inconsistent split metadata "
                                                      rf"\(split\.no={re.escape(repr(no))}, split\.count="):
            shards(path, {"split.count": count, "split.no": no})


def test_shard_sets_by_name_and_the_architecture_a_header_states(tmp_path):
    """Files are one split file's shards when every name is a shard name of one stem and count, numbered
    1..n; a header's ``general.architecture`` is read alone (None where it states none)."""
    from compscope.loading.formats.gguf.files import architecture, shard_set

    def named(*names):
        return [Path(n) for n in names]

    assert shard_set(named("m-00001-of-00002.gguf", "m-00002-of-00002.gguf"))
    for files in (named("m-00001-of-00002.gguf", "x.gguf"), named("x.gguf", "m-00002-of-00002.gguf"),
                  named("m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "n-00003-of-00003.gguf"),
                  named("m-00001-of-00002.gguf", "m-00002-of-00003.gguf")):
        assert not shard_set(files), files
    V = gguf.GGUFValueType
    (tmp_path / "a.gguf").write_bytes(_gguf_bytes([("general.architecture", V.STRING, "qwen3")]))
    (tmp_path / "none.gguf").write_bytes(_gguf_bytes([("general.name", V.STRING, "x")]))
    assert architecture(tmp_path / "a.gguf") == "qwen3" and architecture(str(tmp_path / "none.gguf")) is None


def test_hand_written_shards_read_as_the_whole_file(tmp_path):
    """The shards :func:`_write_shards` writes (llama.cpp's layout: metadata in the first shard only)
    read as the file written whole: the refusals above are of those defects alone."""
    model = _tiny_llama()
    names = [f"m-{k:05d}-of-00003.gguf" for k in (1, 2, 3)]
    _write_shards(tmp_path, model, names, [(0, 3), (1, 3), (2, 3)])
    assert _same_heads(compscope.load(tmp_path / names[1]), compscope.load(tmp_path / "all.gguf"))
    _write_shards(tmp_path, model, names, [(0, 3), (1, 3), (2, 3)], total=-1)  # no tensor count to check
    assert _same_heads(compscope.load(tmp_path / names[2]), compscope.load(tmp_path / "all.gguf"))


@pytest.mark.parametrize("small_first_shard", [False, True])
def test_a_split_gguf_file_is_refused_by_name_to_run_on_data(tmp_path, small_first_shard):
    """transformers builds a model from one GGUF file: the data-based commands refuse a split one,
    saying how to merge it, before transformers is asked to load anything; also where the first
    shard holds the metadata alone (llama.cpp's --no-tensor-first-split), which reads as the others."""
    from compscope.data.runner import runner_for

    model = _tiny_llama()
    _write_llama_gguf(tmp_path / "m.gguf", model, split_max_tensors=11, small_first_shard=small_first_shard)
    _write_llama_gguf(tmp_path / "whole.gguf", model)
    n = 2 + small_first_shard  # 22 tensors, 11 a shard
    first = gguf.GGUFReader(tmp_path / f"m-00001-of-0000{n}.gguf")
    assert len(first.tensors) == (0 if small_first_shard else 11)
    assert _same_heads(compscope.load(tmp_path / f"m-00002-of-0000{n}.gguf"), compscope.load(tmp_path / "whole.gguf"))
    with pytest.raises(compscope.UnsupportedModelError, match=rf"m-00002-of-0000{n}\.gguf: a GGUF file split in {n} shards, "
                       rf"and transformers runs a model from one GGUF file.*llama-gguf-split --merge m-00001-of-0000{n}"):
        runner_for(tmp_path / f"m-00002-of-0000{n}.gguf", progress=False, device="cpu")


def test_a_hub_snapshot_of_a_split_gguf_file_reads_its_shards(tmp_path):
    """A cached hub snapshot holding the shards of one split GGUF file (and no config.json) reads
    them, from the first; shards of two files, or a stray file beside them, are still refused."""
    pytest.importorskip("huggingface_hub")
    from compscope.loading.formats.gguf import shard_set

    snap = hub_snapshot(tmp_path, "Test/split")
    model = _tiny_llama()
    _write_llama_gguf(snap / "m.gguf", model, split_max_tensors=5)
    _write_llama_gguf(tmp_path / "whole.gguf", model)
    assert _same_heads(compscope.load("Test/split", cache_dir=tmp_path), compscope.load(tmp_path / "whole.gguf"))
    files = sorted(snap.glob("*.gguf"))
    assert shard_set(files) and not shard_set(files[:4]) and not shard_set(files[1:])
    (snap / "z.gguf").write_bytes(b"GGUF")
    with pytest.raises(compscope.LoadError, match="no config.json and 6 .gguf files"):
        compscope.load("Test/split", cache_dir=tmp_path)


def test_a_hub_snapshot_of_one_gguf_file_loads_and_runs_it(tmp_path, monkeypatch):
    """A cached hub snapshot holding one GGUF file (no config.json): the hub id reads that file and the
    data runner runs it (the same hooked outputs as the file given by path); shards of a split file
    there are refused to run by the first shard's name."""
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    from compscope.data.runner import cannot_run, runner_for

    model = _tiny_llama()
    sd = _numpy_state(model)  # the rest of the model, so that transformers runs the file
    mlp = {f"blk.{i}.ffn_{x}.weight": sd[f"model.layers.{i}.mlp.{x}_proj.weight"]
           for i in range(2) for x in ("gate", "up", "down")}
    rest = {"output_norm.weight": sd["model.norm.weight"], **mlp}
    one = hub_snapshot(tmp_path, "Test/one") / "m.gguf"
    _write_llama_gguf(one, model, rest)
    _write_llama_gguf(hub_snapshot(tmp_path, "Test/split") / "m.gguf", model, rest, split_max_tensors=11)
    assert _same_heads(compscope.load("Test/one", cache_dir=tmp_path), compscope.load(one))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert cannot_run("Test/one") is None
    assert re.search(r"m-00001-of-00003\.gguf: a GGUF file split in 3 shards", cannot_run("Test/split"))
    by_id, by_path = runner_for("Test/one", progress=False, device="cpu"), runner_for(one, progress=False, device="cpu")
    ids = torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(0))
    a, b = by_id.trace(ids), by_path.trace(ids)
    assert all(torch.equal(x, y) for x, y in zip(a.attn_out, b.attn_out))


@pytest.mark.parametrize("bias", [False, True])
def test_qwen3_gguf_matches_model_object(tmp_path, bias):
    """llama.cpp writes Qwen3 unpermuted (rotate-half, as HF), with the per-head q/k norm gains as
    they are (no ``1 + w``) and the embedding tied; read back, the weights, norms and attention are
    the model object's; with attention biases (``attention_bias``, which transformers' GGUF reader
    leaves off) as well, and the file runs with them."""
    cfg = hf_config("Qwen3Config", 
        vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
        num_key_value_heads=G, head_dim=R, max_position_embeddings=64, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0}, attention_bias=bias,
    )
    model = transformers.Qwen3ForCausalLM(cfg).eval()
    _randomise(model, 3)
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(tmp_path / "q.gguf"), "qwen3")
    _metadata(w, key_length=R, value_length=R, layer_norm_rms_eps=1e-6, rope_freq_base=5000.0)
    names = {**_QWEN3_LAYER, **{f"mlp.{x}_proj.weight": f"ffn_{x}.weight" for x in ("gate", "up", "down")},
             **{f"self_attn.{x}_proj.bias": f"attn_{y}.bias"
                for x, y in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")) if bias}}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(2):
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"model.layers.{i}.{hf_name}"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    _finish(w)
    ours, ref = compscope.load(tmp_path / "q.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "qwen3"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U") + ("b_Q", "b_K", "b_V", "b_O") * bias:
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert (ours.b_Q is None) == (not bias)
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.qk_norm[0], ref.qk_norm[0]), (ours.qk_norm[1], ref.qk_norm[1]),
                 (ours.final_norm, ref.final_norm)]:
        assert a.offset == b.offset == 0.0
        assert torch.equal(a.weight, b.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(4))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    # transformers' GGUF reader takes no head width for Qwen3 (d_model / n_heads, 6 here, where the file's is 8, as
    # Qwen3-0.6B's 128 is not 1024 / 16): handed back, the file runs as read
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "q.gguf", progress=False, device="cpu")
    assert runner.model.config.head_dim == R
    tr = runner.trace(torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(5)))
    assert runner._agreed
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def _add_experts(w, sd: dict, i: int, n_experts: int, width: int) -> None:
    """Layer ``i``'s experts of the state dict ``sd`` added to the writer ``w`` stacked, as llama.cpp writes them
    (``ffn_{gate,up,down}_exps``: ``(E, m, d)``, ``(E, m, d)``, ``(E, d, m)``), from transformers 5's fused
    ``gate_up_proj`` or transformers 4's one module per expert; ``width``: each expert's ``m``."""
    p = f"model.layers.{i}.mlp.experts."
    if p + "gate_up_proj" in sd:  # transformers 5 stores the experts fused
        gate_up = sd[p + "gate_up_proj"]  # (E, 2 m, d)
        w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", gate_up[:, :width].copy())
        w.add_tensor(f"blk.{i}.ffn_up_exps.weight", gate_up[:, width:].copy())
        w.add_tensor(f"blk.{i}.ffn_down_exps.weight", sd[p + "down_proj"])
    else:
        for x in ("gate", "up", "down"):
            w.add_tensor(f"blk.{i}.ffn_{x}_exps.weight",
                         np.stack([sd[f"{p}{e}.{x}_proj.weight"] for e in range(n_experts)]))


def test_qwen2moe_gguf_matches_model_object_and_runs(tmp_path):
    """Qwen2-MoE as llama.cpp writes it (``qwen2moe``: unpermuted, q/k/v biases, experts stacked):
    read back, the attention is the model object's; transformers runs the same file, computing the
    attention compscope recomputes."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import runner_for

    cfg = hf_config("Qwen2MoeConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64, num_experts=2,
                    num_experts_per_tok=1,  # the experts' widths left at their defaults: transformers' GGUF reader
                    # does not read them from the file (so a real Qwen1.5-MoE runs, and a narrower one would not)
                    tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})
    model = transformers.Qwen2MoeForCausalLM(cfg).eval()
    _randomise(model, 6)
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "qwen2moe")
    _metadata(w, layer_norm_rms_eps=1e-6, rope_freq_base=3000.0, expert_count=2, expert_used_count=1,
              expert_feed_forward_length=1408, expert_shared_feed_forward_length=5632)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             **{f"self_attn.{x}_proj.{k}": f"attn_{x}.{k}" for x in "qkv" for k in ("weight", "bias")},
             "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
             **{f"mlp.shared_expert.{x}_proj.weight": f"ffn_{x}_shexp.weight" for x in ("gate", "up", "down")}}
    for i in range(2):
        p = f"model.layers.{i}."
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[p + hf_name])
        w.add_tensor(f"blk.{i}.ffn_gate_inp_shexp.weight", sd[p + "mlp.shared_expert_gate.weight"].reshape(-1))  # (d,)
        _add_experts(w, sd, i, 2, 1408)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "llama" and ours.b_Q is not None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U", "b_Q", "b_K", "b_V"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(4))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import transformers_at_least

    if not transformers_at_least(5):
        pytest.skip("transformers 4's GGUF reader builds Qwen2-MoE with its default expert count (60), not the file's 2")
    runner = runner_for(tmp_path / "m.gguf", progress=False, device="cpu")
    runner.trace(torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


def test_a_qwen3moe_gguf_matches_the_model_object_and_runs_with_its_head_width(tmp_path):
    """Qwen3-MoE as llama.cpp writes it (``qwen3moe``: Qwen3's names and QK norms, rows as HF's, the experts stacked,
    heads of 8 where d_model / n_heads is 6, as Qwen3-30B-A3B's 128 is not 2048 / 32): read back, the heads, norms and
    rotary are the model object's; transformers runs the file (its GGUF reader takes this head width, and leaves the
    experts' width at its default, 768, which the model here has) computing the attention compscope recomputes."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import layer_state, runner_for

    cfg = hf_config("Qwen3MoeConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R, max_position_embeddings=64,
                    num_experts=2, num_experts_per_tok=1, moe_intermediate_size=768, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 3000.0})
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    _randomise(model, 49)
    sd = _numpy_state(model)
    w = _writer(tmp_path / "m.gguf", "qwen3moe")
    _metadata(w, key_length=R, value_length=R, layer_norm_rms_eps=1e-6, rope_freq_base=3000.0, expert_count=2,
              expert_used_count=1, expert_feed_forward_length=768)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    names = {**_QWEN3_LAYER, "mlp.gate.weight": "ffn_gate_inp.weight"}
    for i in range(2):
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"model.layers.{i}.{hf_name}"])
        _add_experts(w, sd, i, 2, 768)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "qwen3" and ours.d_head == R
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert a.offset == b.offset == 0.0 and torch.equal(a.weight, b.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(50))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5,
                                   rtol=1e-5)
    runner = runner_for(tmp_path / "m.gguf", progress=False, device="cpu")
    assert runner.model.config.head_dim == R
    tr = runner.trace(torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(51)))
    assert runner._agreed
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)


def test_a_llama3_scaled_gguf_runs_with_the_frequencies_it_states(tmp_path):
    """transformers' GGUF reader leaves llama.cpp's frequency divisors (``rope_freqs``, Llama 3.1's and 3.2's
    scaling) out, so the model it builds turns at the unscaled frequencies: the runner sets them to the ones
    compscope read, and the run then agrees with the weights (it did not without: checked here too)."""
    from compscope.data.runner import layer_state, runner_for
    from compscope.data.runner import hf as hf_runner

    r = D // H  # (the head width transformers' GGUF reader takes: it reads no key_length)
    settings = {"rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=256, rope_parameters=settings)
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 45)
    plain = 1.0 / 100.0 ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    divisors = (plain / model.model.rotary_emb.inv_freq.double()).float().numpy()
    assert divisors.max() > 1.5  # (some pairs are scaled)
    w = _writer(tmp_path / "l3.gguf", "llama")
    _metadata(w, context_length=256, layer_norm_rms_eps=1e-6, rope_freq_base=100.0)
    w.add_tensor("rope_freqs.weight", divisors)
    _add_llama_tensors(w, model)
    ours = compscope.load(tmp_path / "l3.gguf")
    torch.testing.assert_close(ours.rotary.inv_freq[0], model.model.rotary_emb.inv_freq.double(), rtol=1e-6, atol=0)
    ids = torch.randint(0, V, (2, 24), generator=torch.Generator().manual_seed(46))
    runner = runner_for(tmp_path / "l3.gguf", progress=False, device="cpu")
    tr = runner.trace(ids)
    assert runner._agreed
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    with pytest.MonkeyPatch.context() as mp:  # without the frequencies set, transformers' model is another one
        mp.setattr(hf_runner, "set_frequencies", lambda *args: None)
        with pytest.raises(compscope.UnsupportedModelError, match="is not what compscope recomputes"):
            runner_for(tmp_path / "l3.gguf", progress=False, device="cpu").trace(ids)
    from compscope.loading.formats import gguf as gguf_format

    assert gguf_format.divides_frequencies(tmp_path / "l3.gguf")  # (as runtime_config found it)
    (tmp_path / "copy.gguf").write_bytes((tmp_path / "l3.gguf").read_bytes())
    assert gguf_format.divides_frequencies(tmp_path / "copy.gguf")  # (from its header: runtime_config never read it)
    w = _writer(tmp_path / "l3.gguf", "llama")  # the same path, rewritten without the divisors: read again
    _metadata(w, context_length=256, layer_norm_rms_eps=1e-6, rope_freq_base=100.0)
    _add_llama_tensors(w, model)
    assert not gguf_format.divides_frequencies(tmp_path / "l3.gguf")


def test_gemma2_gguf_matches_model_object(tmp_path):
    """Gemma 2 in GGUF: ``1 + w`` norms, the soft cap from the metadata, the sliding layers (not
    stored) every other one as HF's default, the logit scale by llama.cpp's rule."""
    cfg = hf_config("Gemma2Config", 
        vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L, num_attention_heads=H,
        num_key_value_heads=G, head_dim=R, query_pre_attn_scalar=R, sliding_window=WINDOW, attn_logit_softcapping=2.0,
    )
    model = transformers.Gemma2ForCausalLM(cfg).eval()
    _randomise(model, 5)
    write_gemma3_gguf(tmp_path / "g2.gguf", model, None, arch="gemma2")
    ours, ref = compscope.load(tmp_path / "g2.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "gemma2"
    assert ours.sliding_window == ref.sliding_window == (WINDOW, None, WINDOW, None)
    assert ours.attn_softcap == ref.attn_softcap == 2.0 and ours.scale == ref.scale and ours.qk_norm is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.attn_out_norm, ref.attn_out_norm), (ours.final_norm, ref.final_norm)]:
        assert a.offset == b.offset == 1.0
        torch.testing.assert_close(a.weight, b.weight, atol=1e-6, rtol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(1, 2 * WINDOW + 3, D, generator=torch.Generator().manual_seed(6))
    for layer in range(L):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-4, rtol=1e-4)
    # transformers' GGUF reader leaves query_pre_attn_scalar (256; the 27B model's is d_model / n_heads) and the soft
    # cap (50) at Gemma 2's defaults: handed back, the file runs as read
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "g2.gguf", progress=False, device="cpu")
    assert (runner.model.config.query_pre_attn_scalar, runner.model.config.attn_logit_softcapping) == (R, 2.0)
    tr = runner.trace(torch.randint(0, V, (2, 2 * WINDOW + 3), generator=torch.Generator().manual_seed(7)))
    assert runner._agreed
    for layer in range(L):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_llama3_rope_scaling_from_gguf_divisors_matches_the_model_object(tmp_path):
    """llama.cpp stores Llama 3 rope scaling as per-dimension divisors of the frequencies
    (``rope_freqs.weight``) instead of the config's settings; read back, the frequencies are the
    ones transformers computes from the settings (float32 divisors: to 1e-6)."""
    settings = {"rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 128}
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=H, num_key_value_heads=G, head_dim=R,
                                   max_position_embeddings=256, rope_parameters=settings)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ref = compscope.load(model)
    plain = 1.0 / 100.0 ** (torch.arange(0, R, 2, dtype=torch.float64) / R)
    divisors = (plain / model.model.rotary_emb.inv_freq.double()).float().numpy()
    assert divisors[0] == 1.0 and divisors[-1] == pytest.approx(8.0)  # fast kept, slow divided
    w = gguf.GGUFWriter(str(tmp_path / "l3.gguf"), "llama")
    _metadata(w, context_length=256, key_length=R, layer_norm_rms_eps=1e-6, rope_freq_base=100.0)
    w.add_tensor("rope_freqs.weight", divisors)
    _add_llama_tensors(w, model)
    ours = compscope.load(tmp_path / "l3.gguf")
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any("rope_freqs" in n for n in ours.meta.notes) and any("Llama 3" in n for n in ref.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name


def _write_phi3_gguf(path, model, window: int, extra: dict | None = None, meta: dict | None = None) -> None:
    """A Phi-3 GGUF as llama.cpp writes one: the fused ``attn_qkv`` as HF's ``qkv_proj`` (no row
    permutation: Phi-3 rotates halves in llama.cpp too), the sliding window in the metadata; ``meta``:
    more metadata (``add_KEY``: value)."""
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(path), "phi3")
    _metadata(w, **{**dict(layer_norm_rms_eps=1e-5, rope_freq_base=700.0, rope_dimension_count=D // H,
                           sliding_window=window, pad_token_id=0, bos_token_id=1, eos_token_id=2),
                    **(meta or {})})  # Phi-3: heads of d_model / n_heads
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(2):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        w.add_tensor(f"blk.{i}.ffn_up.weight", sd[p + "mlp.gate_up_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_qkv.weight", sd[p + "self_attn.qkv_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    for name, t in (extra or {}).items():
        w.add_tensor(name, t)
    _finish(w)


def test_phi3_gguf_with_fused_qkv_matches_the_model_object(tmp_path):
    """Phi-3's fused ``attn_qkv`` splits into the query, key and value heads of the model object;
    the sliding window comes from the metadata; longrope factor tensors are refused by name."""
    cfg = hf_config("Phi3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                                  num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                                  sliding_window=WINDOW, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
                                  eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 700.0})
    model = transformers.Phi3ForCausalLM(cfg).eval()
    _randomise(model, 7)
    _write_phi3_gguf(tmp_path / "p.gguf", model, WINDOW)
    ours, ref = compscope.load(tmp_path / "p.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "phi3" and ours.kv_map == ref.kv_map
    assert ours.sliding_window == ref.sliding_window == (WINDOW, WINDOW)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(1, 2 * WINDOW + 3, D, generator=torch.Generator().manual_seed(8))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    # transformers' own GGUF reader (which the runner uses) splits the fused tensor the same way
    theirs = compscope.load(transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="p.gguf"))
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
    # ... but drops the sliding window: the runner then takes no sequence longer than the window
    from compscope.data.runner import runner_for

    runner = runner_for(tmp_path / "p.gguf", progress=False)
    assert runner.model.config.sliding_window is None and runner.n_ctx == WINDOW
    runner.trace(torch.ones(1, WINDOW, dtype=torch.long))
    with pytest.raises(compscope.OptionError, match="use shorter sequences"):
        runner.trace(torch.ones(1, WINDOW + 1, dtype=torch.long))


def _phi3_longrope(rotated: int) -> tuple:
    """A tiny Phi-3 with LongRoPE over a context of 128, original 16, turning ``rotated`` dims of each head (the
    short factors 1, 1.5, 3 and long 2, 4, 8, as many as it turns), and its factors as llama.cpp's tensors:
    ``(model, {tensor name: factors})``."""
    r = D // H
    short, long = [1.0, 1.5, 3.0][: rotated // 2], [2.0, 4.0, 8.0][: rotated // 2]
    cfg = hf_config("Phi3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=128,
                    **({"partial_rotary_factor": rotated / r} if rotated != r else {}),
                    original_max_position_embeddings=16, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
                    eos_token_id=2, rope_parameters={"rope_type": "longrope", "rope_theta": 700.0,
                                                     "short_factor": short, "long_factor": long})
    model = transformers.Phi3ForCausalLM(cfg).eval()
    _randomise(model, 43)
    return model, {"rope_factors_short.weight": np.array(short, np.float32),
                   "rope_factors_long.weight": np.array(long, np.float32)}


@pytest.mark.parametrize("rotated", [D // H, 4])
def test_a_phi3_gguf_with_longrope_reads_and_runs_as_its_hf_model(tmp_path, rotated):
    """Phi-3's long-context models in GGUF, as llama.cpp's converter writes them (no scaling type: the per-pair
    factors as ``rope_factors_short`` / ``_long``, the original context, the attention factor it computes): read
    back, the frequencies (the short factors', within the original context) and the logit scale equal the HF model's;
    transformers' GGUF reader drops all of it, so compscope hands it back when it runs the file, which then runs
    within the original context and agrees with the weights. A stated attention factor other than LongRoPE's, or one
    factor tensor alone, is refused by name. Rotating all of each head, or part of it (``rotated`` of its 6 dims, as
    Phi-4-mini rotates three quarters: ``rope.dimension_count``, which transformers' reader drops too)."""
    n, ctx = 16, 128
    model, factors = _phi3_longrope(rotated)
    attn = math.sqrt(1 + math.log(ctx / n) / math.log(n))
    meta = dict(context_length=ctx, rope_scaling_orig_ctx_len=n, rope_scaling_attn_factors=attn,
                rope_dimension_count=rotated)
    _write_phi3_gguf(tmp_path / "long.gguf", model, None, factors, meta)
    ours, ref = compscope.load(tmp_path / "long.gguf"), compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.rotary.inv_freq.shape[-1] == rotated // 2
    assert ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-12)
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "long.gguf", progress=False, device="cpu")
    assert runner.n_ctx == n  # (past the original context, the long factors take over)
    tr = runner.trace(torch.randint(3, V, (2, n), generator=torch.Generator().manual_seed(44)))
    assert runner._agreed
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    _write_phi3_gguf(tmp_path / "x.gguf", model, None, factors, {**meta, "rope_scaling_attn_factors": 1.0})
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'phi3\.rope\.scaling\.attn_factor' "
                                                              r"= 1 is not LongRoPE's"):
        compscope.load(tmp_path / "x.gguf")
    _write_phi3_gguf(tmp_path / "one.gguf", model, None, {"rope_factors_long.weight": factors["rope_factors_long.weight"]},
                     meta)
    with pytest.raises(compscope.UnsupportedModelError, match="LongRoPE needs both rope_factors_short.weight"):
        compscope.load(tmp_path / "one.gguf")


@pytest.mark.parametrize("meta, refused", [
    ({"rope_scaling_orig_ctx_len": None}, "(None) and context length (128)"),
    ({"rope_scaling_orig_ctx_len": 1}, "(1) and context length (128)"),
    ({"context_length": None}, "(16) and context length (None)"),
    ({"context_length": 0}, "(16) and context length (0)"),
    ({"rope_scaling_orig_ctx_len": 2, "rope_scaling_attn_factors": math.sqrt(1 + math.log(64) / math.log(2))}, None),
    ({"context_length": 1, "rope_scaling_attn_factors": 1.0}, None),  # (a context shorter than the original: factor 1)
    ({"context_length": 8, "rope_scaling_attn_factors": 1.0}, None),
    ({"context_length": 8, "rope_scaling_attn_factors": math.sqrt(0.75)}, "= 0.866025 is not LongRoPE's sqrt(1 + ln "
                                                                         "0.5 / ln 16) = 1"),
    ({"context_length": 24, "rope_scaling_attn_factors": 1.0}, "= 1 is not LongRoPE's sqrt(1 + ln 1.5 / ln 16) = "
                                                               "1.0706"),
    ({"context_length": 24, "rope_scaling_attn_factors": math.sqrt(1 + math.log(1.5) / math.log(16))}, None),
    ({"rope_scaling_attn_factors": math.sqrt(1.75) * (1 + 0.9e-6)}, None),  # (within 1e-6 of it, relative)
    ({"rope_scaling_attn_factors": math.sqrt(1.75) * (1 + 1.5e-6)}, "= 1.32288 is not LongRoPE's"),
])
def test_a_phi3_gguf_with_longrope_needs_a_usable_context_and_longropes_own_attention_factor(tmp_path, meta, refused):
    """The original context (``rope.scaling.original_context_length``, 16 here) must be an integer above 1 and the
    context (``context_length``, 128 here) a positive one, or the factors are refused, naming both; the stated
    attention factor must be LongRoPE's ``sqrt(1 + ln s / ln n)`` of the ratio s = context / original to 1e-6
    (relative), and 1 where s <= 1."""
    model, factors = _phi3_longrope(D // H)
    written = {"context_length": 128, "rope_scaling_orig_ctx_len": 16,
               "rope_scaling_attn_factors": math.sqrt(1.75), **meta}
    _write_phi3_gguf(tmp_path / "x.gguf", model, None, factors, written)
    if refused is None:
        hw = compscope.load(tmp_path / "x.gguf")
        assert hw.rotary.inv_freq.shape[-1] == 3
        return
    if "context length" in refused:
        refused = "LongRoPE factors without a usable 'phi3.rope.scaling.original_context_length' " + refused
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: .*" + re.escape(refused)):
        compscope.load(tmp_path / "x.gguf")


def _write_olmo_gguf(path, model, arch: str, metadata: dict | None = None) -> None:
    """An OLMo GGUF as llama.cpp writes one: OLMo's q/k rows permuted into interleaved pairs (OLMo-2's
    not), OLMo-2's layer-wide q/k norm gains and post-attention norm, no norm before the attention."""
    sd = _numpy_state(model)
    w = gguf.GGUFWriter(str(path), arch)
    _metadata(w, layer_norm_rms_eps=1e-5, rope_freq_base=900.0)
    for key, value in (metadata or {}).items():
        w.add_float32(f"{arch}.{key}", value)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    names = {"q_proj.weight": "attn_q.weight", "k_proj.weight": "attn_k.weight", "v_proj.weight": "attn_v.weight",
             "o_proj.weight": "attn_output.weight", "q_norm.weight": "attn_q_norm.weight", "k_norm.weight": "attn_k_norm.weight"}
    for i in range(2):
        p = f"model.layers.{i}."
        for hf_name, g_name in names.items():
            t = sd.get(f"{p}self_attn.{hf_name}")
            if t is not None:
                if arch == "olmo" and hf_name[0] in "qk":
                    t = llama_cpp_permute(t, H if hf_name[0] == "q" else G)
                w.add_tensor(f"blk.{i}.{g_name}", t)
        if p + "post_attention_layernorm.weight" in sd:
            w.add_tensor(f"blk.{i}.post_attention_norm.weight", sd[p + "post_attention_layernorm.weight"])
    if "model.norm.weight" in sd:
        w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    _finish(w)


@pytest.mark.parametrize("arch", ["olmo", "olmo2"])
def test_olmo_ggufs_match_the_model_object(tmp_path, arch):
    """OLMo (permuted q/k rows, no norm tensors) and OLMo-2 (QK-norm gains over the whole layer,
    post-attention norm, no norm before the attention) read back as the model object reads; OLMo's
    q/k/v clamp is refused by name."""
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                  num_key_value_heads=G, max_position_embeddings=64,
                  rope_parameters={"rope_type": "default", "rope_theta": 900.0})
    if arch == "olmo":
        model = transformers.OlmoForCausalLM(hf_config("OlmoConfig", **common))
    else:
        model = transformers.Olmo2ForCausalLM(hf_config("Olmo2Config", **common, rms_norm_eps=1e-5))
    _randomise(model, 9)
    _write_olmo_gguf(tmp_path / "o.gguf", model.eval(), arch)
    ours, ref = compscope.load(tmp_path / "o.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == arch
    assert (ours.norm_placement, ours.qk_norm_scope) == (ref.norm_placement, ref.qk_norm_scope)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    from compscope.core.attention import attention_forward

    x = torch.randn(1, 9, D, generator=torch.Generator().manual_seed(10))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    if arch == "olmo":
        _write_olmo_gguf(tmp_path / "c.gguf", model, arch, {"attention.clamp_kqv": 8.0})
        with pytest.raises(compscope.UnsupportedModelError, match="clip_qkv=8.0"):
            compscope.load(tmp_path / "c.gguf")


def test_a_gguf_architecture_transformers_does_not_read_is_refused_to_run_on_data_and_the_report_says_so(tmp_path):
    """An OLMo-2 GGUF file (which compscope reads and transformers' GGUF reader does not) is refused
    by the data-based commands naming its architecture, before transformers loads anything; the
    report says so instead of suggesting `compscope validate`, which would refuse it. A split file
    likewise; a whole Llama file is not refused."""
    from compscope.data.runner import cannot_run, runner_for
    from compscope.report.collect import collect

    model = transformers.Olmo2ForCausalLM(hf_config(
        "Olmo2Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
        num_key_value_heads=G, max_position_embeddings=64, rms_norm_eps=1e-5))
    _randomise(model, 9)
    _write_olmo_gguf(tmp_path / "o.gguf", model.eval(), "olmo2")
    refusal = r"o\.gguf: a GGUF file of architecture 'olmo2', which transformers' GGUF reader does not read \(.*llama.*\)"
    with pytest.raises(compscope.UnsupportedModelError, match=refusal):
        runner_for(tmp_path / "o.gguf", progress=False, device="cpu")
    assert re.search(refusal, cannot_run(tmp_path / "o.gguf"))
    rep = collect(tmp_path / "o.gguf", kinds="K", metrics=["identity"], data="auto", progress=False)
    notes = " ".join(rep.notes)
    assert re.search("no data: head labels from the weights; .*" + refusal, notes) and "compscope validate" not in notes
    assert re.search(refusal, rep.options["cannot_run"])
    if importlib.util.find_spec("plotly"):  # the page says it where it would suggest the command
        from compscope.report.page import document

        assert re.search(refusal, document(rep, "compscope report", "0")["cannot_run"])
    llama = _tiny_llama()
    _write_llama_gguf(tmp_path / "m.gguf", llama)
    _write_llama_gguf(tmp_path / "s.gguf", llama, split_max_tensors=11)
    assert cannot_run(tmp_path / "m.gguf") is None and cannot_run(llama) is None
    assert "a GGUF file split in 2 shards" in cannot_run(tmp_path / "s-00002-of-00002.gguf")
    rep = collect(tmp_path / "m.gguf", kinds="K", metrics=["identity"], data="auto", progress=False)
    assert f"run `compscope validate {tmp_path / 'm.gguf'} --out DIR`" in " ".join(rep.notes)
    assert rep.options["cannot_run"] is None


def test_gpt2_gguf_matches_the_model_object_and_transformers(tmp_path, capfd, monkeypatch):
    """GPT-2 as llama.cpp writes it: HF's Conv1D weights transposed to ``(out, in)`` (``attn_qkv``,
    ``attn_output``), learned positions in ``position_embd``, no ``output`` tensor (tied). Read back:
    the model object's weights, and what transformers' own GGUF reader (the runner's) makes of the file."""
    cfg = hf_config("GPT2Config", vocab_size=V, n_embd=D, n_head=H, n_layer=2, n_positions=1024)  # MLP 4 d, as llama.cpp assumes
    model = transformers.GPT2LMHeadModel(cfg).eval()
    _randomise(model, 11)
    sd = _numpy_state(model)
    w = _writer(tmp_path / "g.gguf", "gpt2")
    _metadata(w, context_length=1024, feed_forward_length=4 * D, layer_norm_eps=1e-5, head_count_kv=None)
    w.add_tensor("token_embd.weight", sd["transformer.wte.weight"])
    w.add_tensor("position_embd.weight", sd["transformer.wpe.weight"])
    names = {"ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias", "attn.c_attn.weight": "attn_qkv.weight",
             "attn.c_attn.bias": "attn_qkv.bias", "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias",
             "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias", "mlp.c_fc.weight": "ffn_up.weight",
             "mlp.c_fc.bias": "ffn_up.bias", "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias"}
    for i in range(2):
        for hf_name, g_name in names.items():
            t = sd[f"transformer.h.{i}.{hf_name}"]
            w.add_tensor(f"blk.{i}.{g_name}", np.ascontiguousarray(t.T) if t.ndim == 2 else t)
    w.add_tensor("output_norm.weight", sd["transformer.ln_f.weight"])
    w.add_tensor("output_norm.bias", sd["transformer.ln_f.bias"])
    _finish(w)
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "gpt2" and ours.positions == "learned"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)  # GGUF stores it as float32
    theirs = compscope.load(transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="g.gguf"))
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_pos"):
        assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
    from compscope.data.runner import layer_state, runner_for
    from transformers import modeling_gguf_pytorch_utils as reader

    parsed = []

    def counted(self, path, *args, **kwargs):
        parsed.append((type(self).__name__, str(path)))
        return made(self, path, *args, **kwargs)
    made, made_class, named = gguf.GGUFReader.__init__, gguf.GGUFReader, gguf.get_tensor_name_map
    monkeypatch.setattr(gguf.GGUFReader, "__init__", counted)
    drawn = reader.tqdm
    capfd.readouterr()
    runner = runner_for(tmp_path / "g.gguf", progress=False, device="cpu")  # the data-based commands run the file
    assert "de-quantizing" not in capfd.readouterr().err  # transformers' own bar stays hidden
    # config and weights read one parse of the file, by the plain-array reader; the tokenizer, on first use, another
    assert parsed == [("PlainGGUFReader", str(tmp_path / "g.gguf"))]
    assert reader.tqdm is drawn and gguf.GGUFReader is made_class and gguf.get_tensor_name_map is named  # as they were
    assert runner.tokenizer is None  # (the file has none)
    assert parsed == [("PlainGGUFReader", str(tmp_path / "g.gguf"))] * 2
    assert reader.tqdm is drawn and gguf.GGUFReader is made_class and gguf.get_tensor_name_map is named
    tr = runner.trace(torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(12)))
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_gguf_loads_in_two_threads_patch_one_at_a_time_and_leave_gguf_as_it_was():
    """While one thread's runner reads a GGUF file through the patched reader, another waits; then
    both leave gguf-py and transformers' reader as they found them."""
    import threading

    from compscope.data.gguf_reading import transformers_gguf_reading
    from transformers import modeling_gguf_pytorch_utils as reader

    def patchable():
        return gguf.GGUFReader, gguf.get_tensor_name_map, reader.tqdm, reader._gguf_parse_value

    before = patchable()
    entered = threading.Event()

    def second():
        with transformers_gguf_reading(True):
            entered.set()
            assert gguf.GGUFReader is not before[0]

    with transformers_gguf_reading(True):
        patched = gguf.GGUFReader
        t = threading.Thread(target=second)
        t.start()
        assert not entered.wait(0.3)  # the second waits for the first
        assert gguf.GGUFReader is patched
    t.join(10)
    assert entered.is_set() and patchable() == before


def test_while_reading_a_file_is_parsed_once_and_a_name_map_made_once(tmp_path):
    """Within :func:`transformers_gguf_reading`, the reader made for the same file is the same parse (by the
    plain reader), and the tensor-name map of the same architecture the same map; outside it, each call
    parses and builds again, as gguf-py does."""
    from compscope.data.gguf_reading import transformers_gguf_reading

    path = tmp_path / "m.gguf"
    _metadata_gguf(path, [("general.architecture", gguf.GGUFValueType.STRING, "llama")], False)
    llama = gguf.MODEL_ARCH.LLAMA
    with transformers_gguf_reading(True):
        parsed = gguf.GGUFReader(path)
        assert gguf.GGUFReader(path) is parsed and type(parsed).__name__ == "PlainGGUFReader"
        assert gguf.get_tensor_name_map(llama, 2) is gguf.get_tensor_name_map(llama, 2)
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)
    assert gguf.get_tensor_name_map(llama, 2) is not gguf.get_tensor_name_map(llama, 2)


@pytest.mark.parametrize("endian", ["little", "big"])
def test_the_plain_array_reader_parses_as_gguf_py_does(tmp_path, endian):
    """The reader transformers gets while compscope loads a GGUF file to run it
    (:func:`compscope.data.gguf_reading.plain_reader`) parses a file as gguf-py's own reader does:
    every field's name, offset, types, data indices and parts (values, dtypes with their byte
    order), every tensor's name, type, shape, offset and data, for metadata of every value type
    and tensors stored plain and quantized, in either byte order."""
    from compscope.data.gguf_reading import plain_reader

    order = gguf.GGUFEndian.LITTLE if endian == "little" else gguf.GGUFEndian.BIG
    w = gguf.GGUFWriter(str(tmp_path / "f.gguf"), "llama", endianess=order)
    w.add_uint8("t.u8", 7), w.add_int16("t.i16", -300), w.add_uint32("t.u32", 2**31 + 5), w.add_int64("t.i64", -2**40)
    w.add_float32("t.f32", 0.1), w.add_float64("t.f64", -1e-300), w.add_bool("t.bool", True), w.add_string("t.s", "é ✓")
    w.add_array("t.ints", [1, -2, 3]), w.add_array("t.strs", ["", "a", "bc" * 50]), w.add_array("t.floats", [0.5, -2.25])
    rng = np.random.default_rng(0)
    for name, dtype in [("f32", np.float32), ("f16", np.float16), ("i32", np.int32)]:
        w.add_tensor(name, (rng.standard_normal((3, 64)) * 100).astype(dtype))
    quantized = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("q8", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    _finish(w)
    stock, plain = gguf.GGUFReader(tmp_path / "f.gguf"), plain_reader(gguf.GGUFReader)(tmp_path / "f.gguf")
    assert type(plain).__name__ == "PlainGGUFReader" and type(plain.data) is np.memmap  # its own data stays a map
    assert plain.byte_order == stock.byte_order == ("I" if endian == sys.byteorder else "S")  # S: swapped
    assert len(stock.fields) > 11
    _assert_fields_alike(stock, plain)
    assert [t.name for t in plain.tensors] == [t.name for t in stock.tensors] == ["f32", "f16", "i32", "q8"]
    for a, b in zip(stock.tensors, plain.tensors):
        assert (a.tensor_type, a.n_elements, a.n_bytes, a.data_offset) == (b.tensor_type, b.n_elements, b.n_bytes, b.data_offset)
        assert np.array_equal(a.shape, b.shape) and a.data.dtype == b.data.dtype and np.array_equal(a.data, b.data), a.name
    text = {name: [bytes(plain.fields[name].parts[i]).decode() for i in plain.fields[name].data] for name in ("t.s", "t.strs")}
    assert text == {"t.s": ["é ✓"], "t.strs": ["", "a", "bc" * 50]}
    assert [int(plain.fields["t.ints"].parts[i][0]) for i in plain.fields["t.ints"].data] == [1, -2, 3]


def _assert_fields_alike(stock, plain) -> None:
    """``plain``'s fields are ``stock``'s: names, offsets, types, data indices, and parts (values, shapes,
    dtypes with their byte order), each part a plain read-only view."""
    assert list(plain.fields) == list(stock.fields)
    for name, a in stock.fields.items():
        b = plain.fields[name]
        assert (a.offset, a.name, a.data, a.types) == (b.offset, b.name, b.data, b.types), name
        assert len(a.parts) == len(b.parts), name
        for x, y in zip(a.parts, b.parts):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
            assert type(y) is np.ndarray and not y.flags.writeable, name  # a plain, read-only view


def _gguf_bytes(fields: list, big: bool = False, version: int = 3, tensors: list = ()) -> bytes:
    """A GGUF file's bytes (``version``), written here byte by byte: the metadata ``fields``, ``(key, type, value)``
    with ``type`` a ``GGUFValueType`` (an array's value is ``(item type, [items])``; items of an array of arrays:
    such pairs), and the tensor table ``tensors``, ``(name, dims in GGUF order, type id, offset)``; no tensor data."""
    import struct

    V, order = gguf.GGUFValueType, ">" if big else "<"
    codes = {V.UINT8: "B", V.INT8: "b", V.UINT16: "H", V.INT16: "h", V.UINT32: "I", V.INT32: "i", V.FLOAT32: "f",
             V.UINT64: "Q", V.INT64: "q", V.FLOAT64: "d", V.BOOL: "?"}

    def value(kind, v) -> bytes:
        if kind == V.STRING:
            raw = v.encode()
            return struct.pack(order + "Q", len(raw)) + raw
        if kind == V.ARRAY:
            item, items = v
            return struct.pack(order + "IQ", item, len(items)) + b"".join(value(item, x) for x in items)
        return struct.pack(order + codes[kind], v)

    body = b"GGUF" + struct.pack(order + "IQQ", version, len(tensors), len(fields))
    body += b"".join(value(V.STRING, key) + struct.pack(order + "I", kind) + value(kind, v) for key, kind, v in fields)
    for name, dims, type_id, offset in tensors:
        body += value(V.STRING, name) + struct.pack(f"{order}I{len(dims)}QIQ", len(dims), *dims, type_id, offset)
    return body


def _metadata_gguf(path, fields: list, big: bool, version: int = 3) -> None:
    """A GGUF file (``version``, no tensors) of ``fields`` at ``path`` (:func:`_gguf_bytes`)."""
    path.write_bytes(_gguf_bytes(fields, big, version))


def _header(body: bytes) -> tuple[dict, list]:
    """compscope's own reading of the header in ``body``: ``(metadata, tensor infos)``."""
    from compscope.loading.gguf_file import read_header

    return read_header(body, len(body))


@pytest.mark.parametrize("big", [False, True], ids=["little", "big"])
def test_the_plain_array_reader_parses_arrays_of_every_item_type_as_gguf_py_does(tmp_path, big):
    """Arrays of every scalar type, of strings (empty, multi-byte), empty, one item long, and arrays of
    arrays, in a file written here byte by byte in either byte order: the plain reader's fields are
    gguf-py's, and their values read back are the values written."""
    from compscope.data.gguf_reading import plain_reader

    V = gguf.GGUFValueType
    fields = [("general.architecture", V.STRING, "llama"),
              ("a.u8", V.ARRAY, (V.UINT8, [0, 7, 255])), ("a.i8", V.ARRAY, (V.INT8, [-128, 5])),
              ("a.u16", V.ARRAY, (V.UINT16, [65535, 1])), ("a.i16", V.ARRAY, (V.INT16, [-300, 300])),
              ("a.u32", V.ARRAY, (V.UINT32, [2**31 + 5])), ("a.i32", V.ARRAY, (V.INT32, [-(2**31), 1, 2])),
              ("a.f32", V.ARRAY, (V.FLOAT32, [0.5, -2.25, 1e30])), ("a.u64", V.ARRAY, (V.UINT64, [2**63 + 9, 0])),
              ("a.i64", V.ARRAY, (V.INT64, [-(2**40), 3])), ("a.f64", V.ARRAY, (V.FLOAT64, [-1e-300, 2.0])),
              ("a.bool", V.ARRAY, (V.BOOL, [True, False, True])),
              ("a.strings", V.ARRAY, (V.STRING, ["", "é ✓", "bc" * 300, "x"])),
              ("a.empty", V.ARRAY, (V.INT32, [])), ("a.one", V.ARRAY, (V.STRING, ["only"])),
              ("a.nested", V.ARRAY, (V.ARRAY, [(V.INT32, [1, 2]), (V.STRING, ["p", "qr"]), (V.FLOAT32, [])])),
              ("a.empties", V.ARRAY, (V.ARRAY, [(V.UINT8, []), (V.UINT8, [])])),  # (its bytes read as two strings too)
              ("after", V.UINT32, 42)]
    _metadata_gguf(tmp_path / "m.gguf", fields, big)
    stock, plain = gguf.GGUFReader(tmp_path / "m.gguf"), plain_reader(gguf.GGUFReader)(tmp_path / "m.gguf")
    assert plain.byte_order == stock.byte_order == ("S" if big == (sys.byteorder == "little") else "I")
    _assert_fields_alike(stock, plain)

    def read(key: str) -> list:
        field = plain.fields[key]
        return [bytes(field.parts[i]).decode() if field.types[-1] == V.STRING else field.parts[i].tolist()[0]
                for i in field.data]

    for key, kind, (item, items) in fields[1:-3]:
        assert read(key) == [x if isinstance(x, str) else pytest.approx(x, rel=1e-7) for x in items], key
    assert plain.fields["a.nested"].types == [V.ARRAY, V.ARRAY, V.INT32]  # gguf-py keeps the first item's types
    assert read("after") == [42]


@pytest.mark.parametrize("version", [2, 3])
def test_the_header_reader_reads_every_value_type_back_as_written(version):
    """compscope's own header parser (:func:`compscope.loading.gguf_file.read_header`) on a file written
    here byte by byte, in either version GGUF has had since it carried 64-bit counts: scalars of every
    type at the ends of their ranges, strings, arrays of each type and of arrays, each read back as the
    value written (float32 values exact in float32); versions 1 and 4 are refused by number."""
    V = gguf.GGUFValueType
    scalars = {V.UINT8: 255, V.INT8: -128, V.UINT16: 65535, V.INT16: -300, V.UINT32: 2**32 - 1, V.INT32: -(2**31),
               V.FLOAT32: -2.25, V.UINT64: 2**64 - 1, V.INT64: -(2**63), V.FLOAT64: 1e-300, V.BOOL: True}
    fields = [("general.architecture", V.STRING, "llama"), ("s.wide", V.STRING, "é ✓ 漢")]
    fields += [(f"s.{kind.name}", kind, v) for kind, v in scalars.items()]
    fields += [(f"a.{kind.name}", V.ARRAY, (kind, [v, 1])) for kind, v in scalars.items()]
    fields += [("a.strings", V.ARRAY, (V.STRING, ["", "é ✓"])), ("a.nested", V.ARRAY,
               (V.ARRAY, [(V.INT8, [-1, 2]), (V.STRING, ["p"])])), ("after", V.UINT32, 42)]
    got, tensors = _header(_gguf_bytes(fields, version=version))
    assert tensors == []
    want = {key: [list(x[1]) for x in v[1]] if kind == V.ARRAY and v[0] == V.ARRAY else
            list(v[1]) if kind == V.ARRAY else v for key, kind, v in fields}
    want["a.BOOL"] = [True, True]
    assert got == want
    assert [type(got[f"s.{k.name}"]) for k in (V.INT8, V.FLOAT32, V.BOOL)] == [int, float, bool]
    for bad in (1, 4):
        with pytest.raises(ValueError, match=rf"^GGUF version {bad} is not supported \(supported: \(2, 3\)\)$"):
            _header(_gguf_bytes(fields[:1], version=bad))


def _table_gguf(tensors: list, alignment: int | None = None) -> bytes:
    """:func:`_gguf_bytes` of the tensor table ``tensors``, with ``general.alignment`` (UINT32) where given."""
    return _gguf_bytes([] if alignment is None else [("general.alignment", gguf.GGUFValueType.UINT32, alignment)],
                       tensors=tensors)


def test_the_header_reader_places_tensors_and_refuses_a_corrupt_table():
    """:func:`compscope.loading.gguf_file.read_header` on tensor tables written by hand: each tensor's data
    starts at the header's end rounded up to the alignment, plus its offset; its byte count is GGML's
    (F32: 4 a weight; Q8_0: 34 per block of 32); a type id gguf-py does not know has none. Refused, each by
    what is wrong: 9 dimensions (8 are read), a dimension of 0, an alignment not a power of two, an offset
    off the alignment, data that overlap (data that touch are read), a big-endian file."""
    F32, Q8_0 = 0, 8
    table = [("a", (16,), F32, 0), ("b", (64, 2), Q8_0, 64), ("c", (1,) * 8, F32, 256), ("d", (3,), 999, 320)]
    for alignment in (None, 64, 1):
        body = _table_gguf(table, alignment)
        start = -(-len(body) // (alignment or 32)) * (alignment or 32)
        _, got = _header(body)
        assert [(t.name, t.dims, t.offset, t.nbytes) for t in got] == [
            ("a", (16,), start, 64), ("b", (64, 2), start + 64, 136), ("c", (1,) * 8, start + 256, 4),
            ("d", (3,), start + 320, None)]
        assert got[1].shape == (2, 64)
    cases = [([("a", (1,) * 9, F32, 0)], None, r"in the tensor table entry of 'a': claims 9 dimensions"),
             ([("a", (4, 0), F32, 0)], None, r"in the tensor table entry of 'a': has a dimension of size 0 \(\(4, 0"),
             (table[:1], 48, r"general\.alignment=48 is not a power of two"),
             (table[:1], 0, r"general\.alignment=0 is not a power of two"),
             ([("a", (16,), F32, 16)], None, r"tensor 'a' has offset 16, not a multiple of the alignment 32"),
             ([("a", (16,), F32, 0), ("b", (16,), F32, 32)], None,
              r"the data of tensors 'a' and 'b' overlap \(offsets out of order or corrupt\)"),
             ([("a", (16,), F32, 64), ("b", (17,), F32, 0)], None, r"the data of tensors 'b' and 'a' overlap")]
    for tensors, alignment, message in cases:
        with pytest.raises(ValueError, match="^" + message):
            _header(_table_gguf(tensors, alignment))
    big = b"GGUF" + (3).to_bytes(4, "big") + bytes(16)
    with pytest.raises(ValueError, match=r"^GGUF version 50331648 \(a big-endian file\?\) is not supported"):
        _header(big)
    # cut short: where the read ran out, and by how much
    whole = _table_gguf(table[:2], 64)
    array = _gguf_bytes([("k", gguf.GGUFValueType.ARRAY, (gguf.GGUFValueType.INT32, [0, 0, 0]))])[:-4]  # 8 of 12 bytes
    runs = r"header runs past the end of the file at byte "
    for body, message in ((b"GG", runs + r"0 \(needs 4 more bytes, file has 2\)"),
                          (b"GGUF", runs + r"4 \(needs 4 more bytes, file has 4\)"),
                          (whole[:-3], r"in the tensor table entry of 'b': " + runs +
                           rf"{len(whole) - 8} \(needs 8 more bytes, file has {len(whole) - 3}\)"),
                          # 24 bytes, the key's 8 + 1, its type's 4, the array's 4 + 8: the items start at 49
                          (array, r"in metadata 'k': " + runs + r"49 \(needs 12 more bytes, file has 57\)")):
        with pytest.raises(EOFError, match="^" + message + "$"):
            _header(body)


def test_each_tensor_type_dequantises_to_what_its_bytes_say(tmp_path):
    """compscope's own dequantiser (:func:`compscope.loading.gguf_file.dequantize`) on tensors written with
    gguf-py: F32 and F16 exactly as written; BF16 as gguf-py decodes it, within 2⁻⁸ relative of the
    float32 it was made from; Q8_0 as ``int8 · the block's float16 scale``, computed here from the raw
    bytes, and as gguf-py decodes it; Q4_0 (handed to gguf-py) as gguf-py decodes it. Each comes in the
    stored shape (GGUF's dims reversed) and is a fresh tensor: changing the buffer afterwards changes none."""
    from compscope.loading.gguf_file import dequantize

    T = gguf.GGMLQuantizationType
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    w = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
    w.add_tensor("F32", x)
    w.add_tensor("F16", x.astype(np.float16))
    for qtype in (T.BF16, T.Q8_0, T.Q4_0):
        w.add_tensor(qtype.name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
    _finish(w)
    buf = bytearray((tmp_path / "t.gguf").read_bytes())
    _, infos = _header(buf)
    got = {i.name: dequantize(buf, i) for i in infos}
    raw = {i.name: np.frombuffer(bytes(buf), np.uint8, count=i.nbytes, offset=i.offset) for i in infos}
    assert [(i.name, i.dims) for i in infos] == [(n, (64, 3)) for n in ("F32", "F16", "BF16", "Q8_0", "Q4_0")]
    assert all(t.dtype == torch.float32 and t.shape == (3, 64) for t in got.values())
    assert torch.equal(got["F32"], torch.from_numpy(x))
    assert torch.equal(got["F16"], torch.from_numpy(x.astype(np.float16)).float())
    blocks = raw["Q8_0"].reshape(-1, 34)  # 32 weights a block: a float16 scale, then 32 int8
    by_hand = blocks[:, 2:].view(np.int8).astype(np.float32) * blocks[:, :2].view(np.float16).astype(np.float32)
    assert np.array_equal(got["Q8_0"].numpy(), by_hand.reshape(3, 64))
    for name in ("BF16", "Q8_0", "Q4_0"):
        theirs = gguf.quants.dequantize(raw[name].reshape(3, -1), T[name])
        assert np.array_equal(got[name].numpy(), theirs), name
    assert np.abs(got["BF16"].numpy() - x).max() <= 2**-8 * np.abs(x).max()
    assert np.abs(got["Q8_0"].numpy() - x).max() <= np.abs(x).max() / 127  # half a step of the largest block, twice
    before = {k: v.clone() for k, v in got.items()}
    for i in infos:
        buf[i.offset : i.offset + i.nbytes] = bytes(i.nbytes)
    assert all(torch.equal(got[k], before[k]) for k in got)


def test_the_header_reader_decodes_arrays_up_to_its_limits():
    """Arrays of up to 1024 items are read as lists, longer ones kept as numpy arrays (numbers) or as
    their length (strings: a tokenizer's vocabulary); arrays of arrays nested 8 deep are read, 9 deep
    refused, naming the key."""
    from compscope.loading.gguf_file import SkippedStrings

    V = gguf.GGUFValueType

    def nested(k: int):
        return (V.INT32, [7]) if k == 0 else (V.ARRAY, [nested(k - 1)])

    words = [f"w{i}" for i in range(1025)]
    fields = [("s.1024", V.ARRAY, (V.STRING, words[:1024])), ("s.1025", V.ARRAY, (V.STRING, words)),
              ("i.1024", V.ARRAY, (V.INT32, list(range(1024)))), ("i.1025", V.ARRAY, (V.INT32, list(range(1025)))),
              ("deep", V.ARRAY, nested(8))]
    got, _ = _header(_gguf_bytes(fields))
    assert got["s.1024"] == words[:1024] and isinstance(got["s.1025"], SkippedStrings) and len(got["s.1025"]) == 1025
    assert got["i.1024"] == list(range(1024)) and type(got["i.1024"]) is list
    assert isinstance(got["i.1025"], np.ndarray) and got["i.1025"].tolist() == list(range(1025))
    dtypes = {V.UINT8: "u1", V.INT8: "i1", V.UINT16: "<u2", V.INT16: "<i2", V.UINT32: "<u4", V.INT32: "<i4",
              V.FLOAT32: "<f4", V.UINT64: "<u8", V.INT64: "<i8", V.FLOAT64: "<f8", V.BOOL: "?"}
    long, _ = _header(_gguf_bytes([(t.name, V.ARRAY, (t, [1, 0] * 513)) for t in dtypes]))  # each kept as it is stored
    for t, dt in dtypes.items():
        assert long[t.name].dtype == np.dtype(dt) and long[t.name].tolist() == [1, 0] * 513, t.name
    deep = got["deep"]
    for _ in range(8):
        (deep,) = deep
    assert deep == [7]
    with pytest.raises(ValueError, match=r"^in metadata 'deeper': arrays nested more than 8 deep at byte \d+$"):
        _header(_gguf_bytes([("deeper", V.ARRAY, nested(9))]))


def _outcome(read, *args):
    """What ``read(*args)`` returns, with the type of each item of a list, or the error it raises."""
    try:
        got = read(*args)
    except Exception as e:  # noqa: BLE001 - what transformers raises is what is compared
        return "raises", type(e), str(e)
    return got, [type(x) for x in got] if isinstance(got, list) else type(got)


@pytest.mark.parametrize("big", [False, True], ids=["little", "big"])
def test_values_read_in_one_step_are_transformers_own(tmp_path, big):
    """transformers' turning a parsed value into a Python one, taken in one step while the runner loads
    (:func:`compscope.data.gguf_reading.python_value`), gives what transformers' ``_gguf_parse_value``
    gives, value and type, or raises as it does, for every field of a file with scalars, strings and
    arrays of every type (written byte by byte, either byte order), read by gguf-py's reader and by the
    plain one; and it does not call transformers' for a scalar, a string or an array of them."""
    from compscope.data.gguf_reading import plain_reader, python_value
    from transformers.integrations.ggml import _gguf_parse_value

    V = gguf.GGUFValueType
    fields = [("general.architecture", V.STRING, "llama"), ("s.empty", V.STRING, ""), ("s.wide", V.STRING, "é ✓ 漢")]
    scalars = {V.UINT8: 255, V.INT8: -128, V.UINT16: 65535, V.INT16: -300, V.UINT32: 2**32 - 1, V.INT32: -(2**31),
               V.FLOAT32: -2.25, V.UINT64: 2**64 - 1, V.INT64: -(2**63), V.FLOAT64: 1e-300, V.BOOL: True}
    fields += [(f"s.{kind.name}", kind, v) for kind, v in scalars.items()]
    fields += [(f"a.{kind.name}", V.ARRAY, (kind, [v, 0 if kind != V.BOOL else False])) for kind, v in scalars.items()]
    fields += [("a.strings", V.ARRAY, (V.STRING, ["", "a", "é ✓", "bc" * 300])), ("a.empty", V.ARRAY, (V.INT32, [])),
               ("a.nested", V.ARRAY, (V.ARRAY, [(V.INT32, [1, 2]), (V.STRING, ["p"])]))]
    _metadata_gguf(tmp_path / "m.gguf", fields, big)
    calls = []

    def counted(part, types):
        calls.append(types)
        return _gguf_parse_value(part, types)

    one_step = python_value(counted)
    for reader in (gguf.GGUFReader, plain_reader(gguf.GGUFReader)):
        parsed = reader(tmp_path / "m.gguf")
        assert len(parsed.fields) == len(fields) + 3  # (and the header's: version, tensor and field counts)
        for key, field in parsed.fields.items():
            for i in field.data:
                ours, theirs = _outcome(one_step, field.parts[i], field.types), _outcome(_gguf_parse_value,
                                                                                         field.parts[i], field.types)
                assert ours == theirs, (reader, key)
        nested = parsed.fields["a.nested"]
        assert calls == [nested.types] * len(nested.data) and calls, reader  # the array of arrays, and only it
        calls.clear()
    read = {key: one_step(parsed.fields[key].parts[i], parsed.fields[key].types)
            for key in ("s.wide", "s.UINT64", "s.INT64", "s.FLOAT32", "s.BOOL") for i in parsed.fields[key].data}
    assert read == {"s.wide": "é ✓ 漢", "s.UINT64": 2**64 - 1, "s.INT64": -(2**63), "s.FLOAT32": -2.25, "s.BOOL": True}
    assert [one_step(parsed.fields["a.strings"].parts[i], parsed.fields["a.strings"].types)
            for i in parsed.fields["a.strings"].data] == ["", "a", "é ✓", "bc" * 300]


@pytest.mark.parametrize("part, types", [
    (np.frombuffer(b"\xff\xfe", np.uint8), [8]),  # bytes that are not UTF-8
    (np.frombuffer(b"ab", np.int8), [8]),  # a string not of bytes
    ([97, 98], [8]),  # a string's bytes as a list
    (np.array([7], np.uint32), 4),  # a type given bare, not as a list
    (np.array([7], np.uint32), [13]),  # a type GGUF does not have
    (np.array([7], np.uint32), [9, 13]),
    (np.array([7], np.uint32), [5, 4]),  # two types, the first not an array's
    (np.array([7], np.uint32), [9, 9, 4]),
    (np.array([7], np.uint32), []),
    (np.array([], np.uint32), [4]),  # no value
    (np.array([1.5], np.float32), [9, 6]),
    (np.array([7], np.uint32), type("Types", (list,), {})([9, 4])),  # a list of its own kind
    (np.array([7], np.uint32), [{}]),  # a type that cannot be hashed
    (np.array([7], np.uint32), [6.0]),  # a type given as a float
    (np.frombuffer(b"ab", np.uint8), [8.0]),
], ids=["not-utf8", "int8-string", "list-string", "bare-type", "unknown-type", "array-of-unknown", "two-scalars", "array-of-arrays",
        "no-types", "empty", "float-item", "list-subclass", "unhashable-type", "float-type", "float-string-type"])
def test_values_read_in_one_step_are_transformers_own_in_odd_cases(part, types):
    """Odd values and types: the one-step reading returns or raises what transformers' own does."""
    from compscope.data.gguf_reading import python_value
    from transformers.integrations.ggml import _gguf_parse_value

    assert _outcome(python_value(_gguf_parse_value), part, types) == _outcome(_gguf_parse_value, part, types)


def test_a_value_parse_of_other_parameters_is_left_as_it_is(monkeypatch):
    """Where transformers' ``_gguf_parse_value`` takes other parameters than those it was written for, the
    load keeps it (runs as it is, only slower)."""
    from compscope.data.gguf_reading import transformers_gguf_reading
    from transformers import modeling_gguf_pytorch_utils as reader

    def other(value, kind, strict=True):
        return value

    monkeypatch.setattr(reader, "_gguf_parse_value", other)
    with transformers_gguf_reading(True):
        assert reader._gguf_parse_value is other
    assert reader._gguf_parse_value is other


def test_transformers_reads_a_gguf_file_as_it_does_unpatched(tmp_path):
    """transformers' whole reading of a GGUF file, its config, tokenizer and tensors, is the same while
    compscope's patches are active as without them, and those are restored afterwards."""
    from compscope.data.gguf_reading import transformers_gguf_reading
    from transformers import modeling_gguf_pytorch_utils as reader

    _write_llama_gguf(tmp_path / "m.gguf", _tiny_llama())
    path = str(tmp_path / "m.gguf")

    def read():
        return (reader.load_gguf_checkpoint(path, return_tensors=False),
                reader.load_gguf_checkpoint(path, return_tensors=True, model_to_load=_tiny_llama()))

    own, stock = reader._gguf_parse_value, read()
    with transformers_gguf_reading(True):
        assert reader._gguf_parse_value is not own  # (read in one step)
        patched = read()
    assert reader._gguf_parse_value is own
    for a, b in zip(stock, patched):
        assert a.keys() == b.keys() and a["config"]["vocab_size"] == V
        assert {k: v for k, v in a.items() if k != "tensors"} == {k: v for k, v in b.items() if k != "tensors"}
    tensors = stock[1]["tensors"], patched[1]["tensors"]
    assert tensors[0].keys() == tensors[1].keys() and len(tensors[0]) > 10
    assert all(np.array_equal(np.asarray(tensors[0][k]), np.asarray(tensors[1][k])) for k in tensors[0])


@pytest.mark.parametrize("item, how", [("INT32", "cut"), ("INT32", "whole"), ("STRING", "cut"), ("STRING", "long"),
                                       ("INT32", "unknown")])
def test_an_array_cut_short_or_of_an_unknown_item_type_is_read_as_gguf_py_reads_it(tmp_path, item, how):
    """A file that ends inside an array (``cut``: its items cut off after 10 bytes of them; ``whole``:
    after 12, three whole items of 40; ``long``: its first string's length past the file's end), or an
    array whose item type GGUF does not have (13): the plain reader does what gguf-py's does, the same
    error or the same fields."""
    from compscope.data.gguf_reading import plain_reader

    V = gguf.GGUFValueType
    items = list(range(40)) if item == "INT32" else [f"token {i}" for i in range(40)]
    _metadata_gguf(tmp_path / "m.gguf", [("general.architecture", V.STRING, "llama"),
                                         ("a.items", V.ARRAY, (V[item], items))], big=False)
    whole = (tmp_path / "m.gguf").read_bytes()
    first = whole.index(b"a.items") + len(b"a.items") + 4 + 12  # the array's first item
    if how in ("cut", "whole"):
        whole = whole[:first + (10 if how == "cut" else 12)]
    elif how == "unknown":
        whole = whole[:first - 12] + (13).to_bytes(4, "little") + whole[first - 8:]  # the item type, before the length
    else:
        whole = whole[:first] + (2**40).to_bytes(8, "little") + whole[first + 8:]
    (tmp_path / "cut.gguf").write_bytes(whole)

    def parse(reader):
        try:
            fields = reader(tmp_path / "cut.gguf").fields
            return None, {k: (f.offset, f.data, f.types, [p.tolist() for p in f.parts]) for k, f in fields.items()}
        except Exception as e:  # noqa: BLE001 - what gguf-py raises is what is compared
            return (type(e), str(e)), None

    stock, plain = parse(gguf.GGUFReader), parse(plain_reader(gguf.GGUFReader))
    assert stock == plain and stock != (None, None)


def test_without_gguf_py_the_reading_is_left_as_it_is(monkeypatch):
    """Where gguf-py cannot be imported, the reading is transformers' own: nothing is patched, and asking
    for the one-pass reading is no error."""
    from compscope.data.gguf_reading import transformers_gguf_reading
    from transformers import modeling_gguf_pytorch_utils as reader

    own = reader._gguf_parse_value
    monkeypatch.setitem(sys.modules, "gguf", None)  # (an import of it raises ImportError)
    with transformers_gguf_reading(True):
        assert reader._gguf_parse_value is own
    assert reader._gguf_parse_value is own


def test_the_plain_array_reader_leaves_other_readers_as_they_are():
    """Where gguf-py's reader is not a class, or its ``_get`` takes other arguments, the reader is
    used as it is (the load runs, only slower)."""
    from compscope.data.gguf_reading import plain_reader

    def a_function(path):
        return path

    class OtherGet(gguf.GGUFReader):
        def _get(self, offset, dtype, count=1):
            return super()._get(offset, dtype, count)

    class OtherParts(gguf.GGUFReader):
        def _get_field_parts(self, offset, raw_type):
            return super()._get_field_parts(offset, raw_type)

    class NoGet(gguf.GGUFReader):
        _get = 5  # (no signature to read)

    assert plain_reader(a_function) is a_function and plain_reader(OtherGet) is OtherGet
    assert plain_reader(NoGet) is NoGet
    assert plain_reader(gguf.GGUFReader).__mro__[1] is gguf.GGUFReader
    plain = plain_reader(OtherParts)  # its own _get_field_parts kept, the plain _get beneath it
    assert "_get_field_parts" not in vars(plain) and "_get" in vars(plain)
    assert "_get_field_parts" in vars(plain_reader(gguf.GGUFReader))


def _write_phi2_gguf(path, model, fused: bool, rope_dim: int, qkv_rows: int | None = None) -> None:
    """A Phi-2 GGUF as llama.cpp's converter writes one: HF's phi tensors renamed, nothing permuted
    (llama.cpp rotates halves for Phi-2), MHA, the rotary width as ``rope.dimension_count``, no
    rotary base (the default 10 000); ``fused``: one ``attn_qkv`` as older conversions store it
    (``qkv_rows``: cut it short, as a broken file would)."""
    sd = _numpy_state(model)
    d, h = model.config.hidden_size, model.config.num_attention_heads
    w = gguf.GGUFWriter(str(path), "phi2")
    _metadata(w, embedding_length=d, feed_forward_length=4 * d, head_count=h, head_count_kv=h, layer_norm_eps=1e-5,
              rope_dimension_count=rope_dim)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(2):
        p = f"model.layers.{i}."
        for part in ("weight", "bias"):
            w.add_tensor(f"blk.{i}.attn_norm.{part}", sd[p + f"input_layernorm.{part}"])
            w.add_tensor(f"blk.{i}.attn_output.{part}", sd[p + f"self_attn.dense.{part}"])
            w.add_tensor(f"blk.{i}.ffn_up.{part}", sd[p + f"mlp.fc1.{part}"])
            w.add_tensor(f"blk.{i}.ffn_down.{part}", sd[p + f"mlp.fc2.{part}"])
            qkv = [sd[p + f"self_attn.{x}_proj.{part}"] for x in "qkv"]
            if fused:
                w.add_tensor(f"blk.{i}.attn_qkv.{part}", np.concatenate(qkv)[:qkv_rows])
            else:
                for x, t in zip("qkv", qkv):
                    w.add_tensor(f"blk.{i}.attn_{x}.{part}", t)
    for part in ("weight", "bias"):
        w.add_tensor(f"output_norm.{part}", sd[f"model.final_layernorm.{part}"])
        w.add_tensor(f"output.{part}", sd[f"lm_head.{part}"])
    _finish(w)


@pytest.mark.parametrize("fused", [False, True], ids=["separate-qkv", "fused-qkv"])
def test_phi2_gguf_with_partial_rotary_matches_the_model_object(tmp_path, fused):
    """Phi-2 (``phi2``): separate or fused query/key/value tensors give the model object's heads,
    biases, LayerNorms and biased unembedding; ``rope.dimension_count`` below the head width is
    partial rotary (here 30 of 44 dims: ``int(44 × 30/44)`` is 29 in floating point, so the factor
    taken naively would give the wrong width). A fused tensor of the wrong height is refused by name."""
    d, r = 176, 44
    cfg = hf_config("PhiConfig", vocab_size=V, hidden_size=d, intermediate_size=4 * d, num_hidden_layers=2,
                                 num_attention_heads=d // r, max_position_embeddings=64,
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                  "partial_rotary_factor": 30.5 / r})  # transformers: int(r × factor) = 30
    model = transformers.PhiForCausalLM(cfg).eval()
    _randomise(model, 13)
    assert int(r * (30 / r)) == 29
    _write_phi2_gguf(tmp_path / "p.gguf", model, fused, rope_dim=30)
    ours, ref = compscope.load(tmp_path / "p.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "phi" and ours.rotary.dim == ref.rotary.dim == 30
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U", "b_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, d, generator=torch.Generator().manual_seed(14))
    for layer in range(2):  # against the model's own attention module, rotary and all
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    if fused:
        _write_phi2_gguf(tmp_path / "short.gguf", model, True, rope_dim=30, qkv_rows=3 * d - 1)
        with pytest.raises(compscope.LoadError, match=r"'blk\.0\.attn_qkv\.(weight|bias)' has 527 rows.*176 \+ 176 \+ 176 = 528"):
            compscope.load(tmp_path / "short.gguf")


def test_a_gguf_rotary_wider_than_a_head_is_refused(tmp_path):
    cfg = hf_config("PhiConfig", vocab_size=V, hidden_size=D, intermediate_size=4 * D, num_hidden_layers=2,
                                 num_attention_heads=H, max_position_embeddings=64)
    model = transformers.PhiForCausalLM(cfg).eval()
    _write_phi2_gguf(tmp_path / "p.gguf", model, False, rope_dim=D // H + 2)  # wider than a head
    with pytest.raises(compscope.UnsupportedModelError, match="rope.dimension_count'=8 differs from the head width 6"):
        compscope.load(tmp_path / "p.gguf")


def _write_neox_gguf(path, model, rope_dim: int, qkv_rows: int | None = None) -> None:
    """A GPT-NeoX GGUF as llama.cpp's converter writes one: HF's gpt_neox tensors renamed, the
    fused ``query_key_value`` rows (and bias) regrouped from ``[head][q|k|v]`` to ``[q|k|v][head]``,
    the rotary width as ``rope.dimension_count``, no rotary base (the default 10 000)."""
    sd = _numpy_state(model)
    cfg = model.config
    d, h, n = cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers
    r = d // h
    w = gguf.GGUFWriter(str(path), "gptneox")
    _metadata(w, block_count=n, embedding_length=d, feed_forward_length=4 * d, head_count=h, layer_norm_eps=1e-5,
              rope_dimension_count=rope_dim, parallel_residual=True, head_count_kv=None)
    w.add_tensor("token_embd.weight", sd["gpt_neox.embed_in.weight"])
    for i in range(n):
        p = f"gpt_neox.layers.{i}."
        for part in ("weight", "bias"):
            w.add_tensor(f"blk.{i}.attn_norm.{part}", sd[p + f"input_layernorm.{part}"])
            w.add_tensor(f"blk.{i}.attn_output.{part}", sd[p + f"attention.dense.{part}"])
            qkv = sd[p + f"attention.query_key_value.{part}"]
            grouped = qkv.reshape(h, 3, r, *qkv.shape[1:]).swapaxes(0, 1).reshape(qkv.shape)
            w.add_tensor(f"blk.{i}.attn_qkv.{part}", np.ascontiguousarray(grouped[:qkv_rows]))
    for part in ("weight", "bias"):
        w.add_tensor(f"output_norm.{part}", sd[f"gpt_neox.final_layer_norm.{part}"])
    w.add_tensor("output.weight", sd["embed_out.weight" if "embed_out.weight" in sd else "lm_head.weight"])
    _finish(w)


def test_neox_gguf_with_regrouped_qkv_matches_the_model_object(tmp_path):
    """GPT-NeoX / Pythia (``gptneox``): the fused query/key/value rows, regrouped by llama.cpp, are
    put back per head, so every head, bias, LayerNorm and the partial rotary (a quarter of each
    head, as in Pythia) are the model object's, and so is the attention recomputed from them. A
    fused tensor of the wrong height is refused by name."""
    d, h = 64, 4
    cfg = hf_config("GPTNeoXConfig", vocab_size=V, hidden_size=d, intermediate_size=4 * d, num_hidden_layers=2,
                                     num_attention_heads=h, max_position_embeddings=64, use_parallel_residual=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                      "partial_rotary_factor": 0.25})
    model = transformers.GPTNeoXForCausalLM(cfg).eval()
    _randomise(model, 17)
    _write_neox_gguf(tmp_path / "n.gguf", model, rope_dim=4)
    ours, ref = compscope.load(tmp_path / "n.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "neox" and ours.rotary.dim == ref.rotary.dim == 4
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert any("parallel residual" in n for n in ours.meta.notes)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, d, generator=torch.Generator().manual_seed(18))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    _write_neox_gguf(tmp_path / "short.gguf", model, rope_dim=4, qkv_rows=3 * d - 1)
    with pytest.raises(compscope.LoadError, match=r"'blk\.0\.attn_qkv\.(weight|bias)' has 191 rows.*64 \+ 64 \+ 64 = 192"):
        compscope.load(tmp_path / "short.gguf")


#: HF name under ``model.layers.{i}.`` -> GGUF name under ``blk.{i}.``, as llama.cpp's converter renames them
_LLAMALIKE_LAYER = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "post_self_attn_layernorm": "post_attention_norm", "post_mlp_layernorm": "post_ffw_norm",  # (GLM-4-0414's,
    "mlp.gate_up_proj": "ffn_up",  # its MLP's fused input, as llama.cpp keeps it)
}


def _write_llamalike_gguf(path, model, arch: str, rope_dim: int, eps: str = "layer_norm_eps",
                          floats: dict | None = None, **more) -> None:
    """A StableLM, StarCoder2 or Seed-OSS GGUF as llama.cpp writes one: Llama-like tensor names (biases and
    LayerNorm biases included), nothing permuted (all rotate halves), the rotary width as
    ``rope.dimension_count``, the norms' epsilon 1e-5 under ``eps``, and a token list for transformers' reader;
    ``more``: further metadata, as :func:`_metadata` takes it; ``floats``: each as ``ARCH.KEY`` (for keys the
    oldest gguf writer has no method for)."""
    sd = _numpy_state(model)
    cfg = model.config
    w = _writer(path, arch)
    theta = (getattr(cfg, "rope_parameters", None) or {"rope_theta": cfg.rope_theta})["rope_theta"]
    _metadata(w, **{**dict(block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size,
                           feed_forward_length=cfg.intermediate_size, head_count=cfg.num_attention_heads,
                           head_count_kv=cfg.num_key_value_heads, rope_dimension_count=rope_dim, rope_freq_base=theta),
                    eps: 1e-5, **more})
    for key, value in (floats or {}).items():
        w.add_float32(f"{arch}.{key}", value)
    for name, t in sd.items():
        if ".norms." in name:  # StableLM's per-head QK LayerNorms: llama.cpp stacks them, (heads, d_head)
            if name.endswith("norms.0.weight"):
                i, which = name.split(".")[2], name.split(".")[4][0]
                stem = name.removesuffix("0.weight")
                rows = [sd[f"{stem}{h}.weight"] for h in range(sum(k.startswith(stem) for k in sd))]
                w.add_tensor(f"blk.{i}.attn_{which}_norm.weight", np.stack(rows))
        elif name.startswith("model.layers."):
            i, rest = name.removeprefix("model.layers.").split(".", 1)
            module, part = rest.rsplit(".", 1)
            w.add_tensor(f"blk.{i}.{_LLAMALIKE_LAYER[module]}.{part}", t)
        else:
            top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                   "model.norm.bias": "output_norm.bias", "lm_head.weight": "output.weight"}
            w.add_tensor(top[name], t)
    _finish(w)


@pytest.mark.parametrize("arch, share, stated", [("stablelm", 4 / (D // H), True), ("stablelm", 1.0, True),
                                                 ("stablelm", 1.0, False), ("starcoder2", 1.0, True)])
def test_stablelm_and_starcoder2_ggufs_match_the_model_object_and_transformers(tmp_path, arch, share, stated):
    """StableLM (partial rotary, q/k/v biases, a parallel block: no MLP norm) and StarCoder2 (every
    projection biased, GQA): the model object's heads, biases and LayerNorms (gain and bias); and
    the data-based commands run the file through transformers' own GGUF reader, whose attention is
    what compscope recomputes from the weights it read. StableLM's rotary share comes from
    ``rope.dimension_count`` (a file that rotates whole heads is not read as the family's default
    quarter; nor one that states no width, ``stated`` False: llama.cpp then turns whole heads, and, stating no
    base either, at 10 000)."""
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                  num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False)
    if arch == "stablelm":
        cfg = hf_config("StableLmConfig", **common, use_qkv_bias=True, use_parallel_residual=True, layer_norm_eps=1e-5,
                                          rope_parameters={"rope_type": "default", "rope_theta": 900.0 if stated
                                                           else 10000.0, "partial_rotary_factor": share})
        model, rope_dim = transformers.StableLmForCausalLM(cfg).eval(), round(share * (D // H))
    else:
        cfg = hf_config("Starcoder2Config", **common, norm_epsilon=1e-5, use_bias=True,
                                            rope_parameters={"rope_type": "default", "rope_theta": 900.0})
        model, rope_dim = transformers.Starcoder2ForCausalLM(cfg).eval(), D // H
    _randomise(model, 19)
    _write_llamalike_gguf(tmp_path / "m.gguf", model, arch, rope_dim if stated else None,
                          **({} if stated else {"rope_freq_base": None}))
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == arch and ours.rotary.dim == ref.rotary.dim == rope_dim
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_O is None) == (arch == "stablelm") and ours.b_Q is not None
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert a.kind == "layernorm" and torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any("parallel residual" in n for n in ours.meta.notes) == (arch == "stablelm")
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "m.gguf", progress=False, device="cpu")  # compared with the CPU's reading
    tr = runner.trace(torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(20)))
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_a_partial_rotary_width_is_read_exactly_and_one_outside_the_head_refused(tmp_path):
    """``rope.dimension_count`` 58 of a 100-dim head: 58 dims turned (58 / 100 · 100 is 57.99..., which transformers
    would floor to 57: the share is stated so that it floors to 58), at the closed-form frequencies; 0 dims, or more
    than the head, refused naming the key."""
    cfg = hf_config("StableLmConfig", vocab_size=V, hidden_size=200, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False,
                    layer_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 900.0,
                                                          "partial_rotary_factor": 0.5})
    model = transformers.StableLmForCausalLM(cfg).eval()
    _write_llamalike_gguf(tmp_path / "p.gguf", model, "stablelm", 58)
    hw = compscope.load(tmp_path / "p.gguf")
    assert hw.rotary.dim == 58 and hw.d_head == 100
    want = 900.0 ** (-torch.arange(0, 58, 2, dtype=torch.float64) / 58)
    torch.testing.assert_close(hw.rotary.inv_freq[0].double(), want, rtol=1e-6, atol=0)
    for dims in (0, 102):
        _write_llamalike_gguf(tmp_path / "x.gguf", model, "stablelm", dims)
        refused = rf"x\.gguf: GGUF metadata 'stablelm\.rope\.dimension_count'={dims} differs from the head width 100"
        with pytest.raises(compscope.UnsupportedModelError, match=refused + ": partial rotary is supported"):
            compscope.load(tmp_path / "x.gguf")


@pytest.mark.parametrize("qkv_bias, out_bias", [(True, False), (False, True)])
def test_a_seed_oss_gguf_matches_the_model_object_with_the_biases_it_holds(tmp_path, qkv_bias, out_bias):
    """Seed-OSS as llama.cpp writes it (``seed_oss``: Llama's names, rows as HF's): the model object's heads and
    the biases its two switches build, the switches read from the tensors the file holds (the metadata does not
    state them). transformers' GGUF reader does not read it: weights only."""
    if not hasattr(transformers, "SeedOssConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Seed-OSS")
    cfg = hf_config("SeedOssConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, attention_bias=qkv_bias, attention_out_bias=out_bias,
                    rope_parameters={"rope_type": "default", "rope_theta": 700.0})
    model = transformers.SeedOssForCausalLM(cfg).eval()
    _randomise(model, 23)
    _write_llamalike_gguf(tmp_path / "s.gguf", model, "seed_oss", D // H, eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "s.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "seed_oss"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_Q is not None, ours.b_O is not None) == (qkv_bias, out_bias)
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.attn_norm.eps == pytest.approx(1e-5)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    from compscope.data.runner import runner_for

    with pytest.raises(compscope.UnsupportedModelError, match="architecture 'seed_oss', which transformers' GGUF reader "
                                                              "does not read"):
        runner_for(tmp_path / "s.gguf", progress=False)


@pytest.mark.parametrize("arch, bias", [("ernie4_5", True), ("ernie4_5", False), ("ernie4_5-moe", True)])
def test_an_ernie45_gguf_matches_the_model_object(tmp_path, arch, bias):
    """ERNIE 4.5 as llama.cpp writes it (rows as HF's: both turn interleaved pairs), its ``use_bias`` read from
    the tensors the file holds (the metadata does not state it); the MoE's file as the dense one's attention."""
    if not hasattr(transformers, "Ernie4_5Config"):
        pytest.skip(f"transformers {transformers.__version__} has no ERNIE 4.5")
    cfg = hf_config("Ernie4_5Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, use_bias=bias,
                    rope_parameters={"rope_type": "default", "rope_theta": 600.0})
    model = transformers.Ernie4_5ForCausalLM(cfg).eval()
    _randomise(model, 31)
    _write_llamalike_gguf(tmp_path / "e.gguf", model, arch, D // H, eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "ernie4_5" and ours.rotary.style == "interleaved"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_Q is not None) == (ours.b_O is not None) == bias
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def test_a_dots1_gguf_matches_the_model_object(tmp_path):
    """dots.llm1 as llama.cpp writes it (``dots1``: Qwen2-MoE's converter, rows as HF's, per-head QK norms): the
    model object's heads, QK norms and frequencies; weights only (transformers' GGUF reader does not read it)."""
    if not hasattr(transformers, "Dots1Config"):
        pytest.skip(f"transformers {transformers.__version__} has no dots.llm1")
    cfg = hf_config("Dots1Config", vocab_size=V, hidden_size=D, intermediate_size=32, moe_intermediate_size=16,
                    num_hidden_layers=2, num_attention_heads=H, num_key_value_heads=G, head_dim=D // H,
                    first_k_dense_replace=2, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                    max_position_embeddings=64, tie_word_embeddings=False, rms_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 800.0})
    model = transformers.Dots1ForCausalLM(cfg).eval()  # (its first two layers dense: every layer here)
    _randomise(model, 37)
    _write_llamalike_gguf(tmp_path / "d.gguf", model, "dots1", D // H, eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "d.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "qwen3" and ours.sliding_window == ref.sliding_window
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(a.weight, b.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("bias, share", [(True, 2 / 3), (False, 1.0)])
def test_a_glm4_gguf_matches_the_model_object(tmp_path, bias, share):
    """GLM-4-0414 as llama.cpp writes it (``glm4``: rows as HF's, both turning interleaved pairs of the first
    ``rope.dimension_count`` dims of each head; the attention-output norm as ``post_attention_norm``, the MLP's
    input norm as ``ffn_norm``): the model object's heads, biases, norms and frequencies, q/k/v biases read from
    the tensors the file holds. transformers' GGUF reader does not read it: weights only."""
    r = D // H
    cfg = hf_config("Glm4Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=r, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, attention_bias=bias, pad_token_id=0, eos_token_id=1,
                    rope_parameters={"rope_type": "default", "rope_theta": 900.0, "partial_rotary_factor": share})
    model = transformers.Glm4ForCausalLM(cfg).eval()
    _randomise(model, 41)
    _write_llamalike_gguf(tmp_path / "g.gguf", model, "glm4", round(share * r), eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "glm4" and ours.rotary.dim == ref.rotary.dim == round(share * r)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_Q is not None) == bias
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.attn_out_norm, ref.attn_out_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    from compscope.data.runner import cannot_run

    assert "architecture 'glm4', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "g.gguf")


@pytest.mark.parametrize("bias, qk_norm", [(True, False), (False, True)])
def test_a_glm4moe_gguf_matches_the_model_object_without_its_prediction_block(tmp_path, bias, qk_norm):
    """GLM-4.5 as llama.cpp writes it (``glm4moe``: rows as HF's, rotate-half on ``rope.dimension_count`` dims of
    each head; one multi-token-prediction block after the last layer, counted in ``block_count`` and stated by
    ``nextn_predict_layers``, which transformers does not build): the model object's heads, biases, QK norms and
    frequencies, the biases and QK norms read from the tensors the file holds, the prediction block left out
    and said to be; a count that leaves no layer is refused by its key."""
    if not hasattr(transformers, "Glm4MoeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no GLM-4.5")
    r = D // H
    cfg = hf_config("Glm4MoeConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=r, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, attention_bias=bias, use_qk_norm=qk_norm,
                    first_k_dense_replace=2, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                    n_shared_experts=1, n_group=1, topk_group=1, pad_token_id=0, eos_token_id=1,
                    rope_parameters={"rope_type": "default", "rope_theta": 900.0, "partial_rotary_factor": 2 / 3})
    model = transformers.Glm4MoeForCausalLM(cfg).eval()  # (every layer dense here)
    _randomise(model, 43)

    def write(name, mtp):
        extra = transformers.Glm4MoeForCausalLM(hf_config("Glm4MoeConfig", **{**cfg.to_dict(), "num_hidden_layers": 3,
                                                                               "first_k_dense_replace": 3}))
        _randomise(extra, 44)  # (its last layer stands for the prediction block's attention and norms)
        sd = _numpy_state(model)
        sd.update({k: v for k, v in _numpy_state(extra).items() if k.startswith("model.layers.2.")})
        w = _writer(tmp_path / name, "glm4moe")
        _metadata(w, block_count=3, layer_norm_rms_eps=1e-5, rope_dimension_count=4, rope_freq_base=900.0,
                  key_length=r, value_length=r)
        if mtp is not None:
            _add_scalar(w, "glm4moe.nextn_predict_layers", mtp)
        w.add_tensor("blk.2.nextn.eh_proj.weight", np.ones((D, 2 * D), np.float32))  # (the block's own tensors)
        for key, t in sd.items():
            if key.startswith("model.layers."):
                i, rest = key.removeprefix("model.layers.").split(".", 1)
                module, part = rest.rsplit(".", 1)
                w.add_tensor(f"blk.{i}.{_LLAMALIKE_LAYER[module]}.{part}", t)
            else:
                w.add_tensor({"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                              "lm_head.weight": "output.weight"}[key], t)
        _finish(w)
        return tmp_path / name

    ours, ref = compscope.load(write("g.gguf", 1)), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "glm4_moe" and ours.n_layers == 2 and ours.rotary.dim == 4
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_Q is not None, ours.qk_norm is not None) == (bias, qk_norm)
    if qk_norm:
        assert all(torch.equal(a.weight, b.weight) for a, b in zip(ours.qk_norm, ref.qk_norm))
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any("1 multi-token-prediction block(s) after the last layer (blk.2" in n for n in ours.meta.notes)
    with pytest.raises(compscope.LoadError, match=r"x\.gguf: GGUF metadata 'glm4moe\.nextn_predict_layers' = 3 for 3"):
        compscope.load(write("x.gguf", 3))
    for name, mtp in (("b.gguf", True), ("f.gguf", 1.0)):  # (not a count: a bool, a float)
        with pytest.raises(compscope.LoadError, match=rf"{name}: GGUF metadata 'glm4moe\.nextn_predict_layers' = "
                                                      rf"{mtp!r} is not a count"):
            compscope.load(write(name, mtp))
    with pytest.raises(compscope.LoadError, match=r"y\.gguf: tensor 'blk\.2\.nextn\.eh_proj\.weight' belongs to a "
                                                  r"multi-token-prediction block, and block 2 is one of the 3 layers"):
        compscope.load(write("y.gguf", None))  # (a file that does not say the block is one)


def test_an_apertus_gguf_matches_the_model_object(tmp_path):
    """Apertus as llama.cpp writes it (``apertus``: every tensor under gguf-py's names for the architecture, rows
    as HF's, Llama 3's rope scaling as the divisors ``rope_freqs``): the model object's heads, QK norms, its
    attention norm (``attention_layernorm``, as ``attn_norm``) and frequencies. Weights only."""
    from gguf.constants import MODEL_ARCH

    if not hasattr(MODEL_ARCH, "APERTUS") or not hasattr(transformers, "ApertusConfig"):
        pytest.skip("this gguf package or transformers has no Apertus")
    r = D // H
    settings = {"rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    cfg = hf_config("ApertusConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=r, max_position_embeddings=256,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, rope_parameters=settings, pad_token_id=0,
                    bos_token_id=1, eos_token_id=2)
    model = transformers.ApertusForCausalLM(cfg).eval()
    _randomise(model, 49)
    plain = 1.0 / 100.0 ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    w = _writer(tmp_path / "a.gguf", "apertus")
    _metadata(w, context_length=256, layer_norm_rms_eps=1e-5, rope_freq_base=100.0, key_length=r, value_length=r)
    w.add_tensor("rope_freqs.weight", (plain / model.model.rotary_emb.inv_freq.double()).float().numpy())
    sd = {k: t for k, t in _numpy_state(model).items() if ".act_fn." not in k}  # (xIELU's scalars: metadata)
    _add_by_gguf_names(w, sd, MODEL_ARCH.APERTUS, 2)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "a.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "apertus"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert not torch.allclose(ours.rotary.inv_freq[0], plain)  # (Llama 3's scaling is there)
    from compscope.data.runner import cannot_run

    assert "architecture 'apertus', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "a.gguf")


def test_an_exaone3_gguf_matches_the_model_object(tmp_path):
    """EXAONE 3.x as llama.cpp writes it (``exaone``: gguf-py's names, rows as HF's): the model object's heads,
    norms and frequencies (transformers builds it as a Llama from LG's config). Weights only."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "EXAONE"):
        pytest.skip("this gguf package names no EXAONE tensors")
    model = build(BY_ID["exaone3-llama-under-lg-names"])
    cfg = model.config
    w = gguf.GGUFWriter(str(tmp_path / "e.gguf"), "exaone")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    _metadata(w, block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, feed_forward_length=cfg.intermediate_size,
              vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=3000.0,
              rope_dimension_count=cfg.head_dim)
    _add_by_gguf_names(w, _numpy_state(model), MODEL_ARCH.EXAONE, cfg.num_hidden_layers)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "exaone"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.attn_norm.eps == pytest.approx(1e-5)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("window", [3, None])
def test_an_exaone4_gguf_matches_the_model_object(tmp_path, window):
    """EXAONE 4.0 as llama.cpp writes it (``exaone4``: gguf-py's names, rows as HF's, the norm on the attention
    output as ``post_attention_norm``, per-head QK norms; a window and its per-layer flags, rotary on the sliding
    layers alone where there is one): the model object's heads, norms, windows and frequencies. Weights only."""
    from gguf.constants import MODEL_ARCH

    if not hasattr(MODEL_ARCH, "EXAONE4") or not hasattr(transformers, "Exaone4Config"):
        pytest.skip("this gguf package or transformers has no EXAONE 4")
    r = D // H
    cfg = hf_config("Exaone4Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=4,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=r, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-5, sliding_window=window,
                    rope_parameters={"rope_type": "default", "rope_theta": 700.0},
                    **({"sliding_window_pattern": 2} if window else {"layer_types": ["full_attention"] * 4}))
    model = transformers.Exaone4ForCausalLM(cfg).eval()
    _randomise(model, 51)
    w = _writer(tmp_path / "e.gguf", "exaone4")
    _metadata(w, block_count=4, layer_norm_rms_eps=1e-5, rope_freq_base=700.0, key_length=r, value_length=r)
    if window:  # (the converter's: the window, and a flag per layer from layer_types)
        w.add_sliding_window(window)
        w.add_array("exaone4.attention.sliding_window_pattern", [t == "sliding_attention" for t in cfg.layer_types])
    _add_by_gguf_names(w, _numpy_state(model), MODEL_ARCH.EXAONE4, 4)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "exaone4" and ours.sliding_window == ref.sliding_window
    assert ours.sliding_window == ((3, None, 3, None) if window else (None,) * 4)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_out_norm, ref.attn_out_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert bool(ours.rotary.inv_freq[1].any()) == (window is None)  # (a global layer turns only without a window)


@pytest.mark.parametrize("extra_flag", [[], [False]], ids=["flags-per-layer", "flags-per-block"])
def test_an_exaone_moe_gguf_matches_the_model_object(tmp_path, extra_flag):
    """EXAONE MoE as llama.cpp's converter writes it (EXAONE 4.0's: gguf-py's names, rows as HF's, QK norms, a window
    and a flag per layer, rotary on the sliding layers alone; pre-norm layers; a multi-token-prediction block after
    the last layer, left out): the model object's heads, norms, windows and frequencies. Weights only."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "EXAONE_MOE"):
        pytest.skip("this gguf package names no EXAONE MoE tensors")
    model = build(BY_ID["exaone-moe-sliding-global-nope"])  # (layers 0-2 sliding and rotated, layer 3 global, NoPE)
    cfg = model.config
    sd = _numpy_state(model)
    sd.update({k.replace("layers.3.", "layers.4."): t for k, t in sd.items() if ".layers.3.self_attn." in k})
    w = _writer(tmp_path / "e.gguf", "exaone-moe")
    _metadata(w, block_count=5, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size, key_length=cfg.head_dim,
              value_length=cfg.head_dim, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=3000.0,
              sliding_window=cfg.sliding_window, nextn_predict_layers=1)
    w.add_array("exaone-moe.attention.sliding_window_pattern",  # (its converter's, from the config's layers; a
                [t == "sliding_attention" for t in cfg.layer_types] + extra_flag)  # flag for the MTP block read alike)
    _add_by_gguf_names(w, sd, MODEL_ARCH.EXAONE_MOE, 5, unnamed_ok=True)  # (the experts: MLP)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "exaone_moe" and ours.n_layers == ref.n_layers == 4
    assert ours.sliding_window == ref.sliding_window == (3, 3, 3, None)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == [True, True, True, False]
    assert any("multi-token-prediction block" in n for n in ours.meta.notes)


def test_a_jais2_gguf_matches_the_model_object(tmp_path):
    """Jais 2 as llama.cpp's converter writes it (gguf-py's names, rows as HF's, LayerNorms and attention biases, the
    bias switch from the tensors): the model object's heads, biases, norms and frequencies. Weights only."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "JAIS2"):
        pytest.skip("this gguf package names no Jais 2 tensors")
    model = build(BY_ID["jais2-layernorm-biases"])
    cfg = model.config
    w = _writer(tmp_path / "j.gguf", "jais2")
    _metadata(w, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size, layer_norm_eps=cfg.layer_norm_eps,
              rope_freq_base=_rope_settings(cfg)["rope_theta"], rope_dimension_count=cfg.head_dim,
              key_length=cfg.head_dim, value_length=cfg.head_dim)
    _add_by_gguf_names(w, _numpy_state(model), MODEL_ARCH.JAIS2, 2)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "j.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "jais2"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(x.weight, y.weight) and torch.equal(x.bias, y.bias) and x.eps == pytest.approx(y.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def test_a_paddleocr_gguf_reads_its_language_model_as_the_model_object(tmp_path):
    """PaddleOCR-VL's language model as llama.cpp's converter writes it (``paddleocr``: ERNIE 4.5's conversion, gguf-py's
    names, rows as HF's, biases and their switch from the tensors; multimodal rotary whose sections, on text, turn
    every pair by the token's position): the heads, biases and frequencies of the model object's language model.
    Weights only."""
    from gguf.constants import MODEL_ARCH

    if not hasattr(MODEL_ARCH, "PADDLEOCR") or not hasattr(transformers, "PaddleOCRVLConfig"):
        pytest.skip("this gguf package or transformers has no PaddleOCR-VL")
    text = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                num_key_value_heads=G, head_dim=D // H, use_bias=True, tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 500.0, "mrope_section": [D // H // 2 - 2, 1, 1]})
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    model = transformers.AutoModelForImageTextToText.from_config(
        transformers.PaddleOCRVLConfig(text_config=text, vision_config=vision, image_token_id=V - 1)).eval()
    _randomise(model, 61)
    sd = {k.replace("model.language_model.", "model."): t for k, t in _numpy_state(model).items()
          if k.startswith(("model.language_model.", "lm_head."))}
    w = _writer(tmp_path / "p.gguf", "paddleocr")
    _metadata(w, layer_norm_rms_eps=1e-5, rope_freq_base=500.0, key_length=D // H, value_length=D // H,
              rope_dimension_count=D // H, rope_dimension_sections=[D // H // 2 - 2, 1, 1, 0])
    _add_by_gguf_names(w, sd, MODEL_ARCH.PADDLEOCR, 2)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "p.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "paddleocr_vl"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def test_a_jamba_gguf_reads_its_attention_layers_as_the_model_object(tmp_path):
    """Jamba as llama.cpp writes it (``jamba``: gguf-py's names, a K/V head count per layer, 0 on the Mamba
    layers, from which compscope takes the attention layers' period and offset; no positions; the final norm
    as ``output_norm``): the attention layers' heads and norms are the model object's; one attention layer alone
    read. Weights only. Attention layers that no period gives, or none, are refused by key."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "JAMBA"):
        pytest.skip("this gguf package names no Jamba tensors")
    model = build(BY_ID["jamba-attention-every-second-layer"])  # (attention on layers 1 and 3 of 4)
    cfg, sd = model.config, _numpy_state(model)
    def write(name, counts):
        w = gguf.GGUFWriter(str(tmp_path / name), "jamba")
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
        _metadata(w, block_count=4, embedding_length=cfg.hidden_size, feed_forward_length=cfg.intermediate_size,
                  head_count=cfg.num_attention_heads, head_count_kv=counts, vocab_size=cfg.vocab_size,
                  layer_norm_rms_eps=cfg.rms_norm_eps)
        _add_by_gguf_names(w, sd, MODEL_ARCH.JAMBA, 4, unnamed_ok=True)  # (Mamba's own parameters: no attention)
        _finish(w)
        return tmp_path / name

    ours, ref = compscope.load(write("j.gguf", [0, 2, 0, 2])), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "jamba" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps, rel=1e-6)
    assert not ours.rotary.inv_freq.any()  # (no positions)
    assert "attention on 2 of the model's 4 layers (1, 3" in " ".join(ours.meta.notes)
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'jamba\.attention\.head_count_kv' "
                                                              r"puts attention on layers \[1, 2\]"):
        compscope.load(write("x.gguf", [0, 2, 2, 0]))
    # one attention layer (3: its period the depth, its offset 3) reads the model's layer 3 alone; none, refused
    last = compscope.load(write("o.gguf", [0, 0, 0, 2]))
    assert last.n_layers == 1 and torch.equal(last.W_K, ours.W_K[1:]) and "layers (3;" in " ".join(last.meta.notes)
    with pytest.raises(compscope.UnsupportedModelError, match=r"= \[0, 0, 0, 0\] is not one K/V head count, or 0 on a "
                                                              "Mamba layer"):
        compscope.load(write("n.gguf", [0, 0, 0, 0]))


def test_a_falcon_h1_gguf_reads_its_multipliers_folded_as_the_model_object(tmp_path):
    """Falcon-H1 as llama.cpp's converter writes it (``falcon-h1``: gguf-py's names, rows as HF's, the muP
    multipliers folded into the tensors where they act and not stored, the final norm as ``output_norm``): the
    heads, norms and frequencies of the model object, whose family folds the same multipliers from its config.
    Weights only (transformers' GGUF reader does not read it). A stated logit scale is refused by key."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "FALCON_H1"):
        pytest.skip("this gguf package names no Falcon-H1 tensors")
    model = build(BY_ID["falcon-h1-parallel-mamba-multipliers"], attention_bias=False)  # (llama.cpp adds no bias)
    cfg = model.config
    a, k, m = cfg.attention_in_multiplier, cfg.key_multiplier, cfg.attention_out_multiplier
    assert len({a, k, m, cfg.embedding_multiplier, cfg.lm_head_multiplier, 1.0}) == 6  # (each one seen)
    folded = {"q_proj.weight": a, "k_proj.weight": k * a, "v_proj.weight": a, "o_proj.weight": m,
              "embed_tokens.weight": cfg.embedding_multiplier, "lm_head.weight": cfg.lm_head_multiplier}
    sd = {key: t * next((f for end, f in folded.items() if key.endswith(end)), 1.0)
          for key, t in _numpy_state(model).items()}

    def write(name, **extra):
        w = _writer(tmp_path / name, "falcon-h1")
        _metadata(w, embedding_length=cfg.hidden_size, feed_forward_length=cfg.intermediate_size,
                  head_count=cfg.num_attention_heads, head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size,
                  key_length=cfg.head_dim, value_length=cfg.head_dim, layer_norm_rms_eps=cfg.rms_norm_eps,
                  rope_freq_base=2000.0, ssm_conv_kernel=4, ssm_inner_size=cfg.mamba_d_ssm, ssm_state_size=8,
                  ssm_group_count=1, **extra)
        _add_by_gguf_names(w, sd, MODEL_ARCH.FALCON_H1, 2, unnamed_ok=True)  # (the MLP's norm: not the attention's)
        _finish(w)
        return tmp_path / name

    ours, ref = compscope.load(write("f.gguf")), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "falcon_h1" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), rtol=1e-6, atol=0, msg=name)
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any(n.startswith("the muP multipliers folded into the tensors by llama.cpp's converter") for n in ours.meta.notes)
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'falcon-h1\.attention\.scale' "):
        compscope.load(write("x.gguf", attention_scale=0.5))


def test_an_afmoe_gguf_reads_by_llama_cpps_rules_as_the_model_object(tmp_path):
    """Arcee's AFMoE as llama.cpp writes it (``afmoe``: gguf-py's names, rows as HF's, the output gate as
    ``attn_gate``, QK norms, the norm on the attention output) and runs it (none of it stored but the window: every
    fourth layer global without rotary, the embeddings times sqrt(d_model)): the heads, gates, norms and windows of
    the model object built with those settings. Without a window llama.cpp attends over the whole sequence on every
    layer and leaves every fourth unrotated, which no AFMoE config gives: refused by key. Weights only
    (transformers' GGUF reader does not read it)."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "AFMOE"):
        pytest.skip("this gguf package names no AFMoE tensors")
    model = build(BY_ID["afmoe-gated-nope-global"])  # (window 3, layer 3 global, mup on: as llama.cpp runs it)
    cfg = model.config
    def write(name, window):
        w = _writer(tmp_path / name, "afmoe")
        _metadata(w, block_count=4, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
                  head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size, key_length=cfg.head_dim,
                  value_length=cfg.head_dim, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=10000.0,
                  sliding_window=window, leading_dense_block_count=1, expert_shared_count=1)
        _add_by_gguf_names(w, _numpy_state(model), MODEL_ARCH.AFMOE, 4, unnamed_ok=True)  # (the experts: MLP)
        _finish(w)
        return tmp_path / name

    ours, ref = compscope.load(write("a.gguf", 3)), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "afmoe"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_G", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [*zip(ours.qk_norm, ref.qk_norm), (ours.attn_out_norm, ref.attn_out_norm)]:
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps, rel=1e-6)
    assert ours.sliding_window == ref.sliding_window == (3, 3, 3, None)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == [True, True, True, False]
    assert any(n.startswith("llama.cpp's rules for AFMoE") for n in ours.meta.notes)
    for window in (None, 0):
        with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: no GGUF metadata "
                                                                  r"'afmoe\.attention\.sliding_window' \(or 0\)"):
            compscope.load(write("x.gguf", window))


def _rope_settings(cfg) -> dict:
    """A config's rotary settings in one dict, as transformers 5 keeps them (``rope_parameters``) or from
    transformers 4's keys (``rope_scaling``, ``rope_theta``, ``partial_rotary_factor``)."""
    return getattr(cfg, "rope_parameters", None) or {**(cfg.rope_scaling or {}), "rope_theta": cfg.rope_theta,
                                                     "partial_rotary_factor": getattr(cfg, "partial_rotary_factor", 1.0)}


QWEN_NEXT = [("qwen3.5-gated-attention-deltanet", "qwen35", "QWEN35"),
             ("qwen3.5-gated-attention-deltanet", "qwen35moe", "QWEN35MOE"),  # (its experts: MLP; the dense model's
             # attention written under the MoE's architecture)
             ("qwen3-next-gated-moe-interval", "qwen3next", "QWEN3NEXT")]


@pytest.mark.parametrize("variant_id, arch, tensors", QWEN_NEXT, ids=[q[1] for q in QWEN_NEXT])
def test_a_qwen3_next_or_qwen3_5_gguf_reads_its_attention_layers_as_the_model_object(tmp_path, variant_id, arch,
                                                                                      tensors):
    """Qwen3.5 (and Qwen3.5-MoE) and Qwen3-Next as llama.cpp's converter writes them (gguf-py's names, rows as HF's
    with each head's query and gate rows in ``attn_q``, every norm but the DeltaNet's stored as 1 + w, a quarter or
    half of each head rotated, attention every ``full_attention_interval``-th layer, Qwen3.5's rotary sections; the
    DeltaNet layers' ``attn_qkv`` and ``attn_gate`` not read; a Qwen3.5 multi-token-prediction block after the last
    layer left out): the attention layers' heads, gates and norms are the model object's. Weights only. The same
    layers said by the per-layer flags ``attention.recurrent_layers`` or K/V head counts, which come before the
    interval (4 where none is stated); flags not one per layer or not flags, an interval of 0 or a bool, or one under
    which no layer attends, refused."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, tensors):
        pytest.skip(f"this gguf package names no {arch} tensors")
    model = build(BY_ID[variant_id])  # (attention on layers 1 and 3 of 4)
    cfg = model.config
    rope = _rope_settings(cfg)
    rotated = int(cfg.head_dim * rope["partial_rotary_factor"])
    sd = {k: t + 1.0 if k.endswith("norm.weight") and not k.endswith("linear_attn.norm.weight") else t
          for k, t in _numpy_state(model).items()}
    mtp = 1 if arch in ("qwen35", "qwen35moe") else 0
    if mtp:  # (a prediction block after the last layer: full attention and its own tensors)
        sd.update({k.replace("layers.3.", "layers.4."): t for k, t in sd.items() if ".layers.3.self_attn." in k})

    def write(name, flags=None, raw=None, **layers):
        w = _writer(tmp_path / name, arch)
        _metadata(w, block_count=4 + mtp, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
                  vocab_size=cfg.vocab_size, key_length=cfg.head_dim, value_length=cfg.head_dim,
                  layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=rope["rope_theta"], rope_dimension_count=rotated,
                  **{"head_count_kv": cfg.num_key_value_heads, "full_attention_interval": 2, **layers},
                  **({"rope_dimension_sections": [rotated // 2, 0, 0, 0], "nextn_predict_layers": mtp} if mtp else {}))
        for key, value in (raw or {}).items():  # (as written, whatever gguf's writer method would make of it)
            _add_scalar(w, f"{arch}.{key}", value)
        if isinstance(flags, list):  # (llama.cpp's other way of saying which layers are DeltaNet's: true)
            w.add_array(f"{arch}.attention.recurrent_layers", flags)
        elif flags is not None:
            _add_scalar(w, f"{arch}.attention.recurrent_layers", flags)
        _add_by_gguf_names(w, sd, getattr(MODEL_ARCH, tensors), 4 + mtp, unnamed_ok=True)  # (the experts: MLP)
        if mtp:
            w.add_tensor("blk.4.nextn.eh_proj.weight", np.zeros((cfg.hidden_size, 2 * cfg.hidden_size), np.float32))
        _finish(w)
        return tmp_path / name

    ours, ref = compscope.load(write("q.gguf")), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "qwen3_5" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_G", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        torch.testing.assert_close(x.weight, y.weight, rtol=0, atol=1e-6)
        assert x.offset == y.offset == 1.0 and x.eps == pytest.approx(y.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert "attention on 2 of the model's 4 layers (1, 3" in " ".join(ours.meta.notes)
    assert bool(mtp) == any("multi-token-prediction block" in n for n in ours.meta.notes)
    # the same layers by the per-layer flags (one more, the prediction block's, left out) or the K/V head counts, both
    # read before the interval (here one that would say otherwise)
    for name, way in (("f.gguf", dict(flags=[True, False, True, False] + [False] * mtp, full_attention_interval=1)),
                      ("k.gguf", dict(head_count_kv=[0, cfg.num_key_value_heads] * 2 + [1] * mtp,
                                      full_attention_interval=1))):
        again = compscope.load(write(name, **way))
        assert again.n_layers == 2 and torch.equal(again.W_K, ours.W_K) and again.meta.notes == ours.meta.notes, name
    with pytest.raises(compscope.UnsupportedModelError, match="no layer of this .* attends"):
        compscope.load(write("a.gguf", full_attention_interval=5))  # (layers 4, 9, ...: none of 0-3)
    # no interval stated: llama.cpp's 4, layer 3 alone attending
    by_default = compscope.load(write("d.gguf", full_attention_interval=None))
    assert by_default.n_layers == 1 and torch.equal(by_default.W_K, ours.W_K[1:])
    for name, change, key in [("s.gguf", dict(flags=[True, False, True]), "attention.recurrent_layers"),
                              ("i.gguf", dict(flags=[1, 0, 1, 0]), "attention.recurrent_layers"),
                              ("o.gguf", dict(flags=3), "attention.recurrent_layers"),
                              ("z.gguf", dict(full_attention_interval=0), "full_attention_interval"),
                              ("b.gguf", dict(full_attention_interval=None, raw={"full_attention_interval": True}),
                               "full_attention_interval")]:
        with pytest.raises(compscope.LoadError, match=rf"{name}: GGUF metadata '{arch}\.{re.escape(key)}' = "):
            compscope.load(write(name, **change))
    w = _writer(tmp_path / "x.gguf", arch)  # (DeltaNet layers said under a key compscope does not read: refused)
    _metadata(w, block_count=4, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim)
    w.add_array(f"{arch}.ssm.recurrent_layer_flags", [True, False, True, False])
    _finish(w)
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'{arch}\.ssm\.recurrent_layer_flags'"):
        compscope.load(tmp_path / "x.gguf")


@pytest.mark.parametrize("variant_id", ["chameleon-per-head-qk-layernorm", "chameleon-swin-norm-after"])
def test_a_chameleon_gguf_matches_the_model_object(tmp_path, variant_id):
    """Chameleon as llama.cpp's converter writes it (a Llama: q/k rows permuted to adjacent pairs; its per-head QK
    LayerNorms' gains and biases permuted alike, the first head's repeated for every head, as a released model's
    heads share them; ``swin_norm`` in the metadata): the model object's heads and QK norms, with the norm after the
    attention where ``swin_norm`` says so. Weights only."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "CHAMELEON"):
        pytest.skip("this gguf package names no Chameleon tensors")
    model = build(BY_ID[variant_id], attention_bias=False)  # (a released Chameleon has none)
    cfg = model.config
    with torch.no_grad():  # (every head's QK-norm the first head's, as in a released model)
        for layer in model.model.layers:
            for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                for p in (norm.weight, norm.bias):
                    p.copy_(p[:1].expand_as(p))
    H_, G_, r = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads

    def converted(key, t):
        if key.endswith(("q_proj.weight", "k_proj.weight")):
            return llama_cpp_permute(t, H_ if ".q_proj." in key else G_)
        if key.endswith(("q_norm.weight", "q_norm.bias", "k_norm.weight", "k_norm.bias")):
            row = t[0].reshape(2, r // 2).T.reshape(-1)  # (its converter's _reverse_hf_permute of the first head)
            return np.repeat(row[None], t.shape[0], axis=0)
        return t

    sd = {k: converted(k, t) for k, t in _numpy_state(model).items() if not k.startswith("model.vqmodel.")}
    w = _writer(tmp_path / "c.gguf", "chameleon")
    _metadata(w, embedding_length=cfg.hidden_size, head_count=H_, head_count_kv=G_, vocab_size=cfg.vocab_size,
              layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=10000.0, swin_norm=cfg.swin_norm)
    _add_by_gguf_names(w, sd, MODEL_ARCH.CHAMELEON, 2)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "chameleon" and ours.norm_placement == ref.norm_placement
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(x.weight, y.weight) and torch.equal(x.bias, y.bias) and x.eps == y.eps
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.attn_out_norm, ref.attn_out_norm)]:
        assert (x is None) == (y is None) and (x is None or torch.equal(x.weight, y.weight))
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("arch", ["nemotron_h", "nemotron_h_moe"])
def test_a_nemotron_h_gguf_reads_its_attention_blocks_as_the_model_object(tmp_path, arch):
    """Nemotron-H as llama.cpp's converter writes it (NVIDIA's names under llama.cpp's, q/k rows permuted by its
    Llama path, a K/V head count and an MLP width per block, 0 where the block has none, the others Mamba blocks):
    the attention blocks' heads and norms are the model object's. Weights only. A file whose blocks cannot be told
    apart (one K/V head count or MLP width for all, or either not one per block), with a block of both, with no block
    attending, or with two K/V or query head counts among those that do, is refused by key."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, arch.upper()):
        pytest.skip(f"this gguf package names no {arch} tensors")
    model = build(BY_ID["nemotron-h-mamba-attention-mlp"])  # (blocks: Mamba, attention, MLP, attention, Mamba)
    cfg = model.config
    kinds = ["mamba", "attention", "mlp", "attention", "mamba"]
    sd = {}
    for key, t in _numpy_state(model).items():
        key = "backbone." + key.split(".", 1)[1] if key.startswith(("model.", "backbone.")) else key  # (NVIDIA's names)
        if key.endswith(("mixer.q_proj.weight", "mixer.k_proj.weight")):
            t = llama_cpp_permute(t, cfg.num_attention_heads if ".q_proj." in key else cfg.num_key_value_heads)
        sd[key] = t

    def write(name, kv, ff=tuple(cfg.intermediate_size if k == "mlp" else 0 for k in kinds),
              heads=cfg.num_attention_heads):
        w = _writer(tmp_path / name, arch)
        _metadata(w, block_count=5, embedding_length=cfg.hidden_size, head_count=heads,
                  head_count_kv=kv, vocab_size=cfg.vocab_size, key_length=cfg.head_dim, value_length=cfg.head_dim,
                  layer_norm_rms_eps=cfg.layer_norm_epsilon,
                  feed_forward_length=ff if isinstance(ff, int) else list(ff))
        _add_by_gguf_names(w, sd, getattr(MODEL_ARCH, arch.upper()), 5, unnamed_ok=True)  # (the Mamba parts' own)
        _finish(w)
        return tmp_path / name

    kv = [cfg.num_key_value_heads if k == "attention" else 0 for k in kinds]
    ours, ref = compscope.load(write("n.gguf", kv)), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "nemotron_h" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps, rel=1e-6)
    assert not ours.rotary.inv_freq.any() and not ref.rotary.inv_freq.any()  # (no positions)
    assert "attention on 2 of the model's 5" in " ".join(ours.meta.notes)
    ff = [cfg.intermediate_size if k == "mlp" else 0 for k in kinds]
    for name, change in (("x.gguf", dict(kv=cfg.num_key_value_heads)), ("w.gguf", dict(ff=cfg.intermediate_size)),
                         ("k.gguf", dict(kv=kv[:4])), ("f.gguf", dict(ff=ff[:4]))):
        with pytest.raises(compscope.UnsupportedModelError, match=rf"{name}: GGUF metadata '{arch}\.attention\."
                                                                  r"head_count_kv' and .* must give each of the 5"):
            compscope.load(write(name, **{"kv": kv, **change}))
    with pytest.raises(compscope.UnsupportedModelError, match=r"block 1 both K/V heads \(\d+\) and an MLP \(\d+\)"):
        compscope.load(write("b.gguf", kv, ff=[cfg.intermediate_size] * 5))
    H_ = cfg.num_attention_heads  # (query heads per block, 0 on the others: the same)
    per_block = compscope.load(write("h.gguf", kv, heads=[0, H_, 0, H_, 0]))
    assert per_block.n_heads == H_ and torch.equal(per_block.W_Q, ours.W_Q)
    # (no block attending; two K/V or query head counts among those that do: refused)
    for name, change in (("z.gguf", dict(kv=[0] * 5)), ("t.gguf", dict(kv=[0, kv[1], 0, 2 * kv[1], 0])),
                         ("q.gguf", dict(kv=kv, heads=[0, H_, 0, 2 * H_, 0]))):
        with pytest.raises(compscope.UnsupportedModelError, match=rf"{name}: .* give its attention blocks no one query "
                                                                  "and one K/V head count"):
            compscope.load(write(name, **change))


def test_a_phimoe_gguf_reads_as_the_model_object_at_llama_cpps_longrope_amplitude(tmp_path):
    """Phi-3.5-MoE as llama.cpp's converter writes it (Phi-3's: gguf-py's names with q, k and v apart, rows as HF's,
    LayerNorms and every bias, the biased unembedding, LongRoPE's factors as tensors and the amplitude it computes,
    ``sqrt(1 + ln s / ln n)``): the model object's heads, biases, norms and frequencies; its logit scale that
    amplitude's square over the one of the config's ``short_mscale``, which the file does not hold (said). Weights
    only."""
    from gguf.constants import MODEL_ARCH

    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, "PHIMOE"):
        pytest.skip("this gguf package names no PhiMoE tensors")
    model = build(BY_ID["phimoe-layernorm-biases-longrope"])  # (context 64, original 16, short_mscale 1.2)
    cfg = model.config
    rope = _rope_settings(cfg)
    amplitude = math.sqrt(1 + math.log(64 / 16) / math.log(16))
    w = _writer(tmp_path / "p.gguf", "phimoe")
    _metadata(w, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps,
              rope_freq_base=rope["rope_theta"],
              rope_dimension_count=cfg.head_dim, sliding_window=cfg.sliding_window,
              rope_scaling_orig_ctx_len=16, rope_scaling_attn_factors=amplitude)
    _add_by_gguf_names(w, _numpy_state(model), MODEL_ARCH.PHIMOE, 2, unnamed_ok=True)  # (the experts: MLP)
    w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], np.float32))
    w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], np.float32))
    _finish(w)
    ours, ref = compscope.load(tmp_path / "p.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "phimoe" and ours.sliding_window == ref.sliding_window == (6, 6)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U", "b_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(x.weight, y.weight) and torch.equal(x.bias, y.bias) and x.eps == pytest.approx(y.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert ours.attn_scale == pytest.approx(ref.attn_scale * amplitude**2 / 1.2**2, rel=1e-6)
    assert any(n.startswith("LongRoPE's amplitude as llama.cpp computes it") for n in ours.meta.notes)


def test_an_arcee_gguf_matches_the_model_object(tmp_path):
    """Arcee's AFM as llama.cpp's converter writes it (a Llama: q/k rows permuted, YaRN where the config has it):
    the model object's heads and frequencies. transformers' GGUF reader does not read it: weights only."""
    if not hasattr(transformers, "ArceeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Arcee")
    cfg = hf_config("ArceeConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=128, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                                     "original_max_position_embeddings": 32})
    model = transformers.ArceeForCausalLM(cfg).eval()
    _randomise(model, 29)
    _write_scaled_llama_gguf(tmp_path / "a.gguf", model, "yarn", {"factor": 4.0, "original_context_length": 32},
                             arch="arcee")
    ours, ref = compscope.load(tmp_path / "a.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "llama"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.scale == pytest.approx(ref.scale, rel=1e-12)
    from compscope.data.runner import runner_for

    with pytest.raises(compscope.UnsupportedModelError, match="architecture 'arcee', which transformers' GGUF reader"):
        runner_for(tmp_path / "a.gguf", progress=False)


def test_a_stablelm_gguf_with_per_head_qk_layernorms_is_read_with_them(tmp_path):
    """StableLM 2 12B's per-head QK LayerNorms, stacked by llama.cpp as ``attn_q_norm`` ``(heads,
    d_head)``: read as the model object's per-head gains (not silently dropped: the metadata does not
    say they are there). transformers' GGUF reader does not build them, so the model it would run is
    not this one, and the data-based commands refuse it in one line."""
    from compscope.data.runner import transformers_at_least

    if not transformers_at_least(5):
        pytest.skip("transformers 4's StableLM cannot build per-head qk LayerNorms (its weight init fails on their missing bias)")
    cfg = hf_config("StableLmConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                                      tie_word_embeddings=False, use_qkv_bias=True, qk_layernorm=True,
                                      use_parallel_residual=True, layer_norm_eps=1e-5,
                                      rope_parameters={"rope_type": "default", "rope_theta": 900.0,
                                                       "partial_rotary_factor": 4 / (D // H)})
    model = transformers.StableLmForCausalLM(cfg).eval()
    _randomise(model, 21)
    _write_llamalike_gguf(tmp_path / "m.gguf", model, "stablelm", 4)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert a.kind == b.kind == "layernorm" and torch.equal(a.weight, b.weight) and a.bias is None
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(22))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import runner_for

    with pytest.raises(compscope.UnsupportedModelError, match="attention at layer 0 is not what compscope recomputes"):
        runner_for(tmp_path / "m.gguf", progress=False).trace(torch.randint(0, V, (2, 7)))


def _write_falcon_gguf(path, model, n_kv: int, qkv_rows: int | None = None) -> None:
    """A Falcon GGUF as llama.cpp's converter writes one: HF's falcon tensors renamed (``ln_attn``
    as ``attn_norm_2`` and ``ln_mlp`` as ``attn_norm`` where there are two norms), the fused
    ``query_key_value`` rows regrouped from ``n_kv`` groups of ``[queries | key | value]`` into
    ``[all queries | all keys | all values]``, and no rotary base (llama.cpp's 10 000)."""
    sd = _numpy_state(model)
    cfg = model.config
    d, h, n = cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers
    r = d // h
    w = _writer(path, "falcon")
    _metadata(w, block_count=n, embedding_length=d, feed_forward_length=4 * d, head_count=h, head_count_kv=n_kv,
              layer_norm_eps=cfg.layer_norm_epsilon)
    w.add_tensor("token_embd.weight", sd["transformer.word_embeddings.weight"])
    names = {"input_layernorm": "attn_norm", "ln_mlp": "attn_norm", "ln_attn": "attn_norm_2",
             "self_attention.query_key_value": "attn_qkv", "self_attention.dense": "attn_output",
             "mlp.dense_h_to_4h": "ffn_up", "mlp.dense_4h_to_h": "ffn_down"}
    for name, t in sd.items():
        if name.startswith("transformer.h."):
            i, rest = name.removeprefix("transformer.h.").split(".", 1)
            module, part = rest.rsplit(".", 1)
            if module == "self_attention.query_key_value":
                g = t.reshape(n_kv, h // n_kv + 2, r, *t.shape[1:])
                t = np.concatenate([g[:, :-2].reshape(h * r, *t.shape[1:]), g[:, -2].reshape(n_kv * r, *t.shape[1:]),
                                    g[:, -1].reshape(n_kv * r, *t.shape[1:])])[:qkv_rows]
            w.add_tensor(f"blk.{i}.{names[module]}.{part}", np.ascontiguousarray(t))
    for part in ("weight", "bias"):
        w.add_tensor(f"output_norm.{part}", sd[f"transformer.ln_f.{part}"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    _finish(w)


@pytest.mark.parametrize("style", ["7b-multi-query", "40b-grouped-two-norms", "falcon2-grouped-one-norm"])
def test_falcon_ggufs_match_the_model_object(tmp_path, style):
    """Falcon (``falcon``): llama.cpp stores the fused rows as all queries, then all keys, then all
    values, whatever the model's own order; they are put back into K/V groups, so every head, the
    attention's LayerNorm (``ln_attn`` where the layer has two: llama.cpp's ``attn_norm_2``) and the
    attention recomputed from them are the model object's. The MLP's own norm is not read (it does
    not enter attention), and a fused tensor of the wrong height is refused by name. transformers'
    GGUF reader runs the multi-query file as compscope reads it, and the grouped ones not at all
    (refused up front)."""
    d, h = 48, 6
    common = dict(vocab_size=V, hidden_size=d, num_attention_heads=h, num_hidden_layers=2, ffn_hidden_size=4 * d,
                  bias=False, parallel_attn=True, tie_word_embeddings=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    extra, n_kv = {"7b-multi-query": ({"multi_query": True}, 1),
                   "40b-grouped-two-norms": ({"new_decoder_architecture": True, "num_kv_heads": 2}, 2),
                   "falcon2-grouped-one-norm": ({"new_decoder_architecture": True, "num_kv_heads": 3,
                                                 "num_ln_in_parallel_attn": 1}, 3)}[style]
    model = transformers.FalconForCausalLM(hf_config("FalconConfig", **common, **extra)).eval()
    _randomise(model, 23)
    _write_falcon_gguf(tmp_path / "f.gguf", model, n_kv)
    ours, ref = compscope.load(tmp_path / "f.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "falcon" and ours.n_kv_heads == ref.n_kv_heads == n_kv
    assert ours.kv_map == ref.kv_map
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, d, generator=torch.Generator().manual_seed(24))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import layer_state, runner_for

    if n_kv == 1:  # transformers' own GGUF reader runs Falcon-7B-style files, and runs the model compscope read
        tr = runner_for(tmp_path / "f.gguf", progress=False, device="cpu").trace(torch.randint(0, V, (2, 7)))
        for layer in range(2):
            torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    else:  # it builds every Falcon file as multi-query: refused in one line, before it loads anything
        with pytest.raises(compscope.UnsupportedModelError, match=f"builds every Falcon file as multi-query.*this one has {n_kv}"):
            runner_for(tmp_path / "f.gguf", progress=False)
    _write_falcon_gguf(tmp_path / "short.gguf", model, n_kv, qkv_rows=(h + 2 * n_kv) * (d // h) - 1)
    with pytest.raises(compscope.LoadError, match=rf"'blk\.0\.attn_qkv\.weight' has {(h + 2 * n_kv) * 8 - 1} rows"):
        compscope.load(tmp_path / "short.gguf")


def _write_starcoder_gguf(path, model, n_kv: int | None = 1) -> None:
    """A StarCoder GGUF as llama.cpp's converter writes one (``starcoder``): GPT-BigCode's tensors
    under GPT-2's GGUF names, its ``nn.Linear`` weights as stored (no transpose), ``head_count_kv``
    1 whatever the model (``n_kv``: another value, or None to leave it out), no ``output`` tensor
    when the model ties it."""
    sd = _numpy_state(model)
    cfg = model.config
    w = _writer(path, "starcoder")
    _metadata(w, block_count=cfg.n_layer, context_length=cfg.n_positions, embedding_length=cfg.n_embd,
              feed_forward_length=4 * cfg.n_embd, head_count=cfg.n_head, head_count_kv=n_kv,
              layer_norm_eps=cfg.layer_norm_epsilon)
    w.add_tensor("token_embd.weight", sd["transformer.wte.weight"])
    w.add_tensor("position_embd.weight", sd["transformer.wpe.weight"])
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for i in range(cfg.n_layer):
        for hf_name, g_name in names.items():
            for part in ("weight", "bias"):
                w.add_tensor(f"blk.{i}.{g_name}.{part}", sd[f"transformer.h.{i}.{hf_name}.{part}"])
    for part in ("weight", "bias"):
        w.add_tensor(f"output_norm.{part}", sd[f"transformer.ln_f.{part}"])
    _finish(w)


def test_a_starcoder_gguf_matches_the_model_object(tmp_path):
    """StarCoder 1 (``starcoder``, GPT-BigCode): GPT-2's GGUF names over ``nn.Linear`` weights stored
    as they are, the fused rows ``[query heads | the key | the value]`` of multi-query attention,
    learned positions, the unembedding tied. Read back: the model object's heads and norms, and the
    attention recomputed from them. A file whose metadata says other than one K/V head (llama.cpp
    writes 1 for every StarCoder) is refused by its key; transformers' GGUF reader does not read the
    architecture, so the data-based commands refuse it by name."""
    cfg = hf_config("GPTBigCodeConfig", vocab_size=V, n_embd=D, n_head=H, n_layer=2, n_positions=64, multi_query=True)
    model = transformers.GPTBigCodeForCausalLM(cfg).eval()
    _randomise(model, 31)
    _write_starcoder_gguf(tmp_path / "s.gguf", model)
    ours, ref = compscope.load(tmp_path / "s.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "gpt_bigcode" and ours.n_kv_heads == ref.n_kv_heads == 1
    assert ours.kv_map == ref.kv_map == (0,) * H and ours.positions == "learned"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(32))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import cannot_run

    assert re.search(r"s\.gguf: a GGUF file of architecture 'starcoder', which transformers' GGUF reader does not read",
                     cannot_run(tmp_path / "s.gguf"))
    for n_kv, said in [(H, str(H)), (None, "missing")]:
        _write_starcoder_gguf(tmp_path / "kv.gguf", model, n_kv)
        with pytest.raises(compscope.UnsupportedModelError,
                           match=rf"kv\.gguf: GGUF metadata 'starcoder\.attention\.head_count_kv' is {said}: llama\.cpp "
                                 "writes StarCoder files multi-query"):
            compscope.load(tmp_path / "kv.gguf")


def _write_bloom_gguf(path, model, n_kv: int | None = None) -> None:
    """A BLOOM GGUF as llama.cpp's converter writes one: HF's bloom tensors renamed, the fused
    ``query_key_value`` rows (and bias) regrouped from ``[head][q|k|v]`` to ``[q|k|v][head]``, the
    embeddings LayerNorm as ``token_embd_norm``, the tied unembedding written out as ``output``,
    ``head_count_kv`` the head count (``n_kv``: another)."""
    sd = _numpy_state(model)
    cfg = model.config
    d, h, n = cfg.hidden_size, cfg.n_head, cfg.n_layer
    r = d // h
    w = _writer(path, "bloom")
    _metadata(w, block_count=n, context_length=d, embedding_length=d, feed_forward_length=4 * d, head_count=h,
              head_count_kv=n_kv or h, layer_norm_eps=cfg.layer_norm_epsilon)
    w.add_tensor("token_embd.weight", sd["transformer.word_embeddings.weight"])
    for part in ("weight", "bias"):
        w.add_tensor(f"token_embd_norm.{part}", sd[f"transformer.word_embeddings_layernorm.{part}"])
    names = {"input_layernorm": "attn_norm", "self_attention.query_key_value": "attn_qkv",
             "self_attention.dense": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.dense_h_to_4h": "ffn_up", "mlp.dense_4h_to_h": "ffn_down"}
    for i in range(n):
        for hf_name, g_name in names.items():
            for part in ("weight", "bias"):
                t = sd[f"transformer.h.{i}.{hf_name}.{part}"]
                if hf_name == "self_attention.query_key_value":
                    t = np.ascontiguousarray(t.reshape(h, 3, r, *t.shape[1:]).swapaxes(0, 1).reshape(t.shape))
                w.add_tensor(f"blk.{i}.{g_name}.{part}", t)
    for part in ("weight", "bias"):
        w.add_tensor(f"output_norm.{part}", sd[f"transformer.ln_f.{part}"])
    w.add_tensor("output.weight", sd["transformer.word_embeddings.weight"])
    _finish(w)


def test_a_bloom_gguf_matches_the_model_object_and_runs_in_transformers(tmp_path):
    """BLOOM (``bloom``): the fused query/key/value rows, regrouped by llama.cpp, are put back per
    head; the embeddings LayerNorm (``token_embd_norm``) goes into ``W_E``; ALiBi slopes from the
    head count. Every head, norm and embedding is the model object's; transformers' own GGUF reader
    runs the file, and its hooked attention outputs are what compscope recomputes. A file whose
    metadata gives fewer K/V heads than heads is refused by its key."""
    cfg = hf_config("BloomConfig", vocab_size=V, hidden_size=D, n_layer=2, n_head=H)
    model = transformers.BloomForCausalLM(cfg).eval()
    _randomise(model, 33)
    _write_bloom_gguf(tmp_path / "b.gguf", model)
    ours, ref = compscope.load(tmp_path / "b.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "bloom" and ours.positions == "alibi"
    assert torch.equal(ours.alibi, ref.alibi)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps, rel=1e-6)
    from compscope.data.runner import layer_state, runner_for

    tr = runner_for(tmp_path / "b.gguf", progress=False, device="cpu").trace(
        torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(34)))
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    _write_bloom_gguf(tmp_path / "kv.gguf", model, n_kv=1)
    with pytest.raises(compscope.UnsupportedModelError, match=r"kv\.gguf: config key 'num_key_value_heads' = 1: every "
                                                             "BLOOM head has its own keys and values"):
        compscope.load(tmp_path / "kv.gguf")


def _write_mpt_gguf(path, model, alibi_bias_max: float = 8.0, extra: dict | None = None) -> None:
    """An MPT GGUF as llama.cpp's converter writes one: HF's mpt tensors renamed, the fused ``Wqkv``
    as stored, ALiBi's maximum as ``attention.max_alibi_bias``, no ``output`` tensor (tied)."""
    sd = _numpy_state(model)
    cfg = model.config
    d, h, n = cfg.d_model, cfg.n_heads, cfg.n_layers
    w = _writer(path, "mpt")
    _metadata(w, block_count=n, context_length=cfg.max_seq_len, embedding_length=d, feed_forward_length=2 * d,
              head_count=h, head_count_kv=None, layer_norm_eps=cfg.layer_norm_epsilon, max_alibi_bias=alibi_bias_max,
              **(extra or {}))
    w.add_tensor("token_embd.weight", sd["transformer.wte.weight"])
    names = {"norm_1.weight": "attn_norm.weight", "attn.Wqkv.weight": "attn_qkv.weight",
             "attn.out_proj.weight": "attn_output.weight", "norm_2.weight": "ffn_norm.weight",
             "ffn.up_proj.weight": "ffn_up.weight", "ffn.down_proj.weight": "ffn_down.weight"}
    for i in range(n):
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"transformer.blocks.{i}.{hf_name}"])
    w.add_tensor("output_norm.weight", sd["transformer.norm_f.weight"])
    _finish(w)


def test_an_mpt_gguf_matches_the_model_object(tmp_path):
    """MPT (``mpt``): the fused ``Wqkv`` as stored, LayerNorms without biases, ALiBi with BLOOM's
    slopes for six heads, the unembedding tied. Read back: the model object's heads, norms and
    slopes, and the attention recomputed from them. Another ALiBi maximum than the 8 transformers
    computes with, or llama.cpp's clamp of q, k and v, is refused by name; transformers' GGUF
    reader does not read the architecture, so the data-based commands refuse it."""
    cfg = hf_config("MptConfig", vocab_size=V, d_model=48, n_heads=6, n_layers=2, max_seq_len=32, expansion_ratio=2)
    model = transformers.MptForCausalLM(cfg).eval()
    _randomise(model, 35)
    _write_mpt_gguf(tmp_path / "m.gguf", model)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "mpt" and ours.positions == "alibi"
    assert ours.alibi.tolist() == ref.alibi.tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.b_Q is ours.b_O is None and ours.attn_norm.bias is None
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps, rel=1e-6)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, 48, generator=torch.Generator().manual_seed(36))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import cannot_run

    assert "a GGUF file of architecture 'mpt', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "m.gguf")
    _write_mpt_gguf(tmp_path / "b.gguf", model, alibi_bias_max=4.0)
    with pytest.raises(compscope.UnsupportedModelError, match=r"b\.gguf: .*attn_config\.alibi_bias_max=4\.0"):
        compscope.load(tmp_path / "b.gguf")
    _write_mpt_gguf(tmp_path / "c.gguf", model, extra={"clamp_kqv": 6.0})
    with pytest.raises(compscope.UnsupportedModelError, match=r"c\.gguf: .*clip_qkv=6\.0"):
        compscope.load(tmp_path / "c.gguf")


def _write_gpt_oss_gguf(path, model, extra: dict | None = None) -> None:
    """A gpt-oss GGUF as llama.cpp's converter writes one: Llama's names with biases, the sink logits
    as ``attn_sinks.weight``, the MLP's input norm as ``post_attention_norm`` (not read: it does not
    enter attention), the router and experts left out (compscope reads no MLP), YaRN as
    ``rope.scaling.type``, ``.factor`` and ``.original_context_length``, the window in ``sliding_window``."""
    sd = _numpy_state(model)
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or {**cfg.rope_scaling, "rope_theta": cfg.rope_theta}
    w = _writer(path, "gpt-oss")
    _metadata(w, block_count=cfg.num_hidden_layers, context_length=cfg.max_position_embeddings, head_count=H,
              head_count_kv=G, key_length=cfg.head_dim, value_length=cfg.head_dim, layer_norm_rms_eps=cfg.rms_norm_eps,
              sliding_window=cfg.sliding_window, rope_freq_base=rope["rope_theta"], **(extra or {}))
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
             "self_attn.sinks": "attn_sinks.weight",
             **{f"self_attn.{x}_proj.{p}": f"attn_{y}.{p}" for x, y in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
                for p in ("weight", "bias")}}
    for i in range(cfg.num_hidden_layers):
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"model.layers.{i}.{hf_name}"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    _finish(w)


def test_a_gpt_oss_gguf_matches_the_model_object_and_runs_in_transformers(tmp_path):
    """gpt-oss (``gpt-oss``): Llama's layout with biases and a sink logit per head, sliding layers
    alternating from layer 0, YaRN from ``rope.scaling.*``. The file states no ``truncate``, so the
    ramp's bounds are rounded, as transformers' GGUF reader and llama.cpp compute it: against a model
    object built so, every head, bias, sink and frequency, and the logit scale with YaRN's factor
    squared, are the same. transformers runs the file as compscope reads it, or the data-based
    commands say in one line, naming the file, why not (transformers 4's GGUF reader has no gpt-oss;
    5.24's fails on the ``rope.scaling`` values it reads). A ``rope.scaling`` key transformers' reader would pass
    on unread is refused by name."""
    cfg = hf_config("GptOssConfig", vocab_size=V, hidden_size=D, intermediate_size=16, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R, sliding_window=WINDOW,
                    num_local_experts=2, num_experts_per_tok=1, max_position_embeddings=64,
                    rope_parameters={"rope_type": "yarn", "rope_theta": 1000.0, "factor": 8.0, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "original_max_position_embeddings": 512})
    model = transformers.GptOssForCausalLM(cfg).eval()
    _randomise(model, 37)
    _write_gpt_oss_gguf(tmp_path / "o.gguf", model)
    ours, ref = compscope.load(tmp_path / "o.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "gpt_oss" and ours.sliding_window == ref.sliding_window == (WINDOW, None)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U", "sinks"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-12) and ours.attn_scale > R**-0.5
    from compscope.data.runner import layer_state, runner_for

    try:
        runner = runner_for(tmp_path / "o.gguf", progress=False, device="cpu")
    except compscope.OptionError as e:
        assert re.fullmatch(r".*o\.gguf: transformers could not load the model to run it \(.+\)", str(e)), e
    except compscope.UnsupportedModelError as e:  # transformers 4: its GGUF reader has no gpt-oss
        assert "a GGUF file of architecture 'gpt-oss', which transformers' GGUF reader does not read" in str(e), e
    else:
        tr = runner.trace(torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(38)))
        for layer in range(2):
            torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                       rtol=1e-5)
    _write_gpt_oss_gguf(tmp_path / "x.gguf", model, extra={"rope_scaling_yarn_log_mul": 0.1})
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'gpt-oss\.rope\.scaling\.yarn_log"):
        compscope.load(tmp_path / "x.gguf")


def _add_llama_tensors(w, model) -> None:
    """A Llama's tensors as llama.cpp writes them (q/k rows permuted) added to the writer ``w``, and the file
    written: embeddings, unembedding, each layer's attention, norms and MLP, the final norm."""
    sd = _numpy_state(model)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(model.config.num_hidden_layers):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        for proj, short, n in (("q", "q", H), ("k", "k", G), ("v", "v", None), ("o", "output", None)):
            t = sd[f"{p}self_attn.{proj}_proj.weight"]
            w.add_tensor(f"blk.{i}.attn_{short}.weight", t if n is None else llama_cpp_permute(t, n))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        for x in ("gate", "up", "down"):  # (Arcee's MLP has no gate)
            if f"{p}mlp.{x}_proj.weight" in sd:
                w.add_tensor(f"blk.{i}.ffn_{x}.weight", sd[f"{p}mlp.{x}_proj.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    _finish(w)


def _write_scaled_llama_gguf(path, model, scaling: str | None, keys: dict, arch: str = "llama",
                             extra: dict | None = None, base: float = 100.0) -> None:
    """A Llama-layout GGUF of architecture ``arch`` with rope scaling as llama.cpp's converter writes it:
    ``rope.scaling.type`` (``scaling``; None: no key), each of ``keys`` as ``ARCH.rope.scaling.KEY`` and each of
    ``extra`` as ``ARCH.KEY`` (:func:`_add_scalar`)."""
    cfg = model.config
    w = _writer(path, arch)
    extra = dict(extra or {})
    # (the block count and context in ``extra`` as _metadata's: the writer of gguf 0.16 refuses a second key; None
    # leaves the key out)
    shape = {"context_length": cfg.max_position_embeddings,
             **{k: extra.pop(k) for k in ("block_count", "context_length") if k in extra}}
    _metadata(w, layer_norm_rms_eps=1e-6, rope_freq_base=base, **shape)
    if scaling is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN if scaling == "yarn" else gguf.RopeScalingType.LINEAR)
    for key, value in [*((f"rope.scaling.{k}", v) for k, v in keys.items()), *extra.items()]:
        _add_scalar(w, f"{arch}.{key}", value)
    _add_llama_tensors(w, model)


@pytest.mark.parametrize("scaling, settings, keys", [
    ("yarn", {"factor": 4.0, "original_max_position_embeddings": 16},
     {"factor": 4.0, "original_context_length": 16}),  # (Qwen3's 128K files: HF's default ramp bounds)
    ("yarn", {"factor": 8.0, "original_max_position_embeddings": 32, "beta_fast": 16.0, "beta_slow": 2.0},
     {"factor": 8.0, "original_context_length": 32, "yarn_beta_fast": 16.0, "yarn_beta_slow": 2.0,
      "yarn_ext_factor": -1.0, "yarn_attn_factor": 1.0}),  # (llama.cpp's neutral values: read as nothing)
    ("linear", {"factor": 2.0}, {"factor": 2.0}),
])
def test_a_llama_gguf_with_rope_scaling_reads_and_runs_as_its_hf_model(tmp_path, scaling, settings, keys):
    """YaRN (and linear scaling) in a Llama-layout GGUF, as llama.cpp's converter writes an HF config's: read back,
    the frequencies and the logit scale (YaRN's attention factor squared) equal the HF model's with those settings;
    transformers' GGUF reader drops the scaling (it reads gpt-oss's alone), so compscope hands it back when it runs
    the file, and the run agrees with the weights. A YaRN key that would change it is refused by name."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=128,
                    rope_parameters={"rope_type": scaling, "rope_theta": 100.0, **settings})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 41)
    _write_scaled_llama_gguf(tmp_path / "y.gguf", model, scaling, keys)
    ours, ref = compscope.load(tmp_path / "y.gguf"), compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-12)
    r = D // H  # (the head width transformers' GGUF reader takes: it reads no key_length)
    plain = 1.0 / 100.0 ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    assert not torch.allclose(ours.rotary.inv_freq[0], plain)  # (the scaling is there)
    if scaling == "yarn":
        assert ours.attn_scale > r**-0.5
    from compscope.data.runner import layer_state, runner_for

    runner = runner_for(tmp_path / "y.gguf", progress=False, device="cpu")
    tr = runner.trace(torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(42)))
    assert runner._agreed
    for layer in range(2):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    if scaling == "yarn":
        for key, value in (("yarn_attn_factor", 2.0), ("yarn_log_multiplier", 0.1), ("attn_factor", 0.5),
                           ("yarn_ext_factor", 0.5), ("alpha", 3.0)):
            _write_scaled_llama_gguf(tmp_path / "x.gguf", model, scaling, {**keys, key: value})
            with pytest.raises(compscope.UnsupportedModelError, match=rf"x\.gguf: GGUF metadata 'llama\.rope\.scaling\.{key}'"):
                compscope.load(tmp_path / "x.gguf")
        for key, value in (("yarn_ext_factor", 1.0), ("yarn_ext_factor", -1.0), ("yarn_attn_factor", 1.0),
                           ("attn_factor", 1.0), ("yarn_log_multiplier", 0.0), ("finetuned", True),
                           ("finetuned", False)):  # (llama.cpp's neutral values: read as nothing)
            _write_scaled_llama_gguf(tmp_path / "k.gguf", model, scaling, {**keys, key: value})
            kept = compscope.load(tmp_path / "k.gguf")
            assert torch.equal(kept.rotary.inv_freq, ours.rotary.inv_freq) and kept.attn_scale == ours.attn_scale, key
        _write_scaled_llama_gguf(tmp_path / "n.gguf", model, scaling, {"factor": 4.0})
        with pytest.raises(compscope.UnsupportedModelError, match=r"'yarn' without GGUF metadata 'llama\.rope\.scaling\."
                                                                  r"original_context_length'"):
            compscope.load(tmp_path / "n.gguf")


@pytest.mark.parametrize("scaling, keys, linear", [(None, {"factor": 2.0}, 2.0), (None, {"factor": 1.0}, None),
                                                    (None, {"factor": 0.0}, None), ("linear", {}, 1.0),
                                                    ("linear", {"factor": 2.0}, 2.0)])
def test_a_llama_gguf_with_a_scaling_factor_and_no_type_scales_linearly(tmp_path, scaling, keys, linear):
    """``rope.scaling.factor`` without ``rope.scaling.type`` is linear scaling, as older converters wrote it (a factor
    of 0 or 1: none); ``linear`` without a factor scales by 1: the frequencies of the HF model with that setting."""
    rope = {"rope_type": "default", "rope_theta": 100.0} if linear is None else {
        "rope_type": "linear", "rope_theta": 100.0, "factor": linear}
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=128, rope_parameters=rope)
    model = transformers.LlamaForCausalLM(cfg).eval()
    _write_scaled_llama_gguf(tmp_path / "s.gguf", model, scaling, keys)
    ours, ref = compscope.load(tmp_path / "s.gguf"), compscope.load(model)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    plain = 1.0 / 100.0 ** (torch.arange(0, D // H, 2, dtype=torch.float64) / (D // H))
    torch.testing.assert_close(ours.rotary.inv_freq[0].double(), plain / (linear or 1.0), rtol=1e-6, atol=0)


@pytest.mark.parametrize("key", ["head_count", "head_count_kv"])
def test_a_llama_gguf_with_per_layer_head_counts_is_refused(tmp_path, key):
    w = _writer(tmp_path / "p.gguf", "llama")
    _metadata(w, layer_norm_rms_eps=1e-6, **{key: [H if key == "head_count" else G] * 2})
    _add_llama_tensors(w, _tiny_llama())
    with pytest.raises(compscope.UnsupportedModelError, match=r"p\.gguf: per-layer head counts \('llama\.attention\."
                                                              r"head_count' is a list\) are not supported"):
        compscope.load(tmp_path / "p.gguf")


def test_a_ministral3_gguf_reads_as_its_hf_model_with_yarn_and_the_query_temperature(tmp_path):
    """Ministral 3 (llama.cpp's ``mistral3``) as its converter writes it: Llama's rows, YaRN with
    ``yarn_log_multiplier`` = 1 (the HF config's ``mscale_all_dim``: YaRN's attention factor 1, as llama.cpp's
    graph makes it) and the query temperature's β (``attention.temperature_scale``): read back, the weights, the
    frequencies, the logit scale and the temperature's note equal the HF model's. Without the multiplier, or with
    another, a temperature length other than the original context, or a temperature without YaRN and without a
    positive context length, refused by name; transformers' GGUF reader
    does not read it, so the data-based commands refuse it."""
    if not hasattr(transformers, "Ministral3Config"):
        pytest.skip("transformers has no Ministral 3")
    rope = {"rope_type": "yarn", "rope_theta": 300.0, "factor": 4.0, "original_max_position_embeddings": 16,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}
    cfg = hf_config("Ministral3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    rope_parameters=rope)
    model = transformers.Ministral3ForCausalLM(cfg).eval()
    _randomise(model, 43)
    keys = {"factor": 4.0, "original_context_length": 16, "yarn_beta_fast": 32.0, "yarn_beta_slow": 1.0,
            "yarn_log_multiplier": 1.0}
    temperature = {"attention.temperature_scale": 0.1}

    def write(name, keys=keys, extra=temperature, scaling="yarn"):
        _write_scaled_llama_gguf(tmp_path / name, model, scaling, keys, arch="mistral3", extra=extra, base=300.0)
        return tmp_path / name

    ours, ref = compscope.load(write("m.gguf")), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "llama"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    r = D // H
    assert ours.scale == pytest.approx(ref.scale, rel=1e-12) and ours.scale == pytest.approx(r**-0.5)  # (factor 1)
    plain = 1.0 / 300.0 ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    assert not torch.allclose(ours.rotary.inv_freq[0], plain)  # (YaRN is there)
    said = [n for n in ours.meta.notes if "Llama 4's temperature" in n]
    assert said == [n for n in ref.meta.notes if "Llama 4's temperature" in n] and "0.1 log(1 + floor(i / 16))" in said[0]
    bare = compscope.load(write("b.gguf", keys={}, extra={}, scaling=None))  # (no scaling, no temperature)
    torch.testing.assert_close(bare.rotary.inv_freq[0], plain, rtol=1e-12, atol=0)
    assert not any("temperature" in n for n in bare.meta.notes)
    untuned = compscope.load(write("t.gguf", keys={}, scaling=None))  # the temperature floored by the trained context
    assert any("0.1 log(1 + floor(i / 64))" in n for n in untuned.meta.notes)
    for name, args, says in (
            ("x.gguf", {"keys": {**keys, "yarn_log_multiplier": 0.0}}, r"'mistral3\.rope\.scaling\.yarn_log_multiplier'"
                                                                         r" = 0\.0 \(Ministral 3's mscale_all_dim"),
            ("y.gguf", {"keys": {k: v for k, v in keys.items() if k != "yarn_log_multiplier"}},
             r"YaRN and no GGUF metadata 'mistral3\.rope\.scaling\.yarn_log_multiplier'"),
            ("z.gguf", {"extra": {**temperature, "attention.temperature_length": 32}},
             r"'mistral3\.attention\.temperature_length' = 32, and llama\.cpp floors .* by its original context 16"),
            *((f"c{n}.gguf", {"keys": {}, "scaling": None, "extra": {**temperature, "context_length": n}},
               r"'mistral3\.attention\.temperature_scale' = 0\.1 without an original context or a context length")
              for n in (None, 0))):
        with pytest.raises(compscope.UnsupportedModelError, match=re.escape(name) + ": .*" + says):
            compscope.load(write(name, **args))
    from compscope.data.runner import runner_for

    with pytest.raises(compscope.UnsupportedModelError, match=r"m\.gguf: a GGUF file of architecture 'mistral3', which "
                                                              r"transformers' GGUF reader does not read"):
        runner_for(tmp_path / "m.gguf", progress=False, device="cpu")


def _write_modernbert_gguf(path, model, **metadata) -> None:
    """A ModernBERT GGUF as llama.cpp's converter writes one (``modern-bert``): HF's tensors renamed (the fused
    ``attn_qkv`` rows as stored; layer 0 has no ``attn_norm``), the window ``local_attention`` as
    ``sliding_window``, ``global_attn_every_n_layers`` as the pattern, the global and local rotary bases as
    ``rope.freq_base`` and ``rope.freq_base_swa``; ``metadata``: keys over these (``add_KEY``: value; None leaves
    one out)."""
    sd = _numpy_state(model)
    cfg = model.config
    theta = {t: ModernBertRope.theta(cfg, t) for t in ("full_attention", "sliding_attention")}
    types = getattr(cfg, "layer_types", None)  # (transformers 5 lists them; 4 keeps the period)
    every = (next((i for i, t in enumerate(types) if i and t == "full_attention"), len(types)) if types
             else cfg.global_attn_every_n_layers)
    w = _writer(path, "modern-bert")
    values = {**dict(block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size, head_count_kv=None,
                     layer_norm_eps=cfg.norm_eps, causal_attention=False, sliding_window=cfg.local_attention,
                     rope_freq_base=theta["full_attention"]), **metadata}
    _metadata(w, **values)
    # by name: gguf's writer has methods for these two from 0.18 (add_rope_freq_base_swa, add_sliding_window_pattern)
    w.add_float32("modern-bert.rope.freq_base_swa", theta["sliding_attention"])
    w.add_uint32("modern-bert.attention.sliding_window_pattern", every)
    names = {"attn_norm": "attn_norm", "attn.Wqkv": "attn_qkv", "attn.Wo": "attn_output"}
    w.add_tensor("token_embd.weight", sd["embeddings.tok_embeddings.weight"])
    for part in ("weight", "bias"):
        if f"embeddings.norm.{part}" in sd:
            w.add_tensor(f"token_embd_norm.{part}", sd[f"embeddings.norm.{part}"])
            w.add_tensor(f"output_norm.{part}", sd[f"final_norm.{part}"])
    for i in range(cfg.num_hidden_layers):
        for hf_name, g_name in names.items():
            for part in ("weight", "bias"):
                if f"layers.{i}.{hf_name}.{part}" in sd:
                    w.add_tensor(f"blk.{i}.{g_name}.{part}", sd[f"layers.{i}.{hf_name}.{part}"])
    _finish(w)


class ModernBertRope:
    @staticmethod
    def theta(cfg, layer_type: str) -> float:
        """A ModernBERT config's rotary base of ``layer_type``, in either version's keys."""
        params = getattr(cfg, "rope_parameters", None)
        if isinstance(params, dict) and layer_type in params:
            return params[layer_type]["rope_theta"]
        return cfg.global_rope_theta if layer_type == "full_attention" else cfg.local_rope_theta


@pytest.mark.parametrize("variant_id", ["modernbert-local-both-sides", "modernbert-biases"])
def test_a_modernbert_gguf_matches_the_model_object(tmp_path, variant_id):
    """ModernBERT as llama.cpp's converter writes it (``modern-bert``), read by llama.cpp's rules: every head
    weight and bias, the normed token embeddings, the norms, both rotary bases and the local layers' both-sided
    windows are the model object's. transformers' GGUF reader does not read the architecture: the data-based
    commands say so. A file without the global rotary base (llama.cpp would take 10000), or flagged causal, is
    refused by name; one without a window has no local layers, as llama.cpp runs it."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID[variant_id])
    _write_modernbert_gguf(tmp_path / "m.gguf", model)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "modernbert" and not ours.causal and ours.first_layer_unnormed
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), name
    assert ours.sliding_window == ref.sliding_window and any(w is not None for w in ours.sliding_window)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    for a, b, rows in [(ours.attn_norm, ref.attn_norm, slice(1, None)), (ours.final_norm, ref.final_norm, slice(None))]:
        assert torch.equal(a.weight[rows], b.weight[rows]) and a.eps == pytest.approx(b.eps, rel=1e-6)  # (float32 eps)
        assert (a.bias is None) == (b.bias is None) and (a.bias is None or torch.equal(a.bias[rows], b.bias[rows]))
    x = torch.randn(1, 9, ours.d_model, generator=torch.Generator().manual_seed(9))
    from compscope.core.attention import attention_forward

    for layer in range(ours.n_layers):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5,
                                   rtol=1e-5)
    from compscope.data.runner import runner_for

    with pytest.raises(compscope.UnsupportedModelError, match="architecture 'modern-bert', which transformers' GGUF "
                                                              "reader does not read"):
        runner_for(tmp_path / "m.gguf", progress=False, device="cpu")
    _write_modernbert_gguf(tmp_path / "x.gguf", model, rope_freq_base=None)
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'modern-bert\.rope\.freq_base' "
                                                              "is missing"):
        compscope.load(tmp_path / "x.gguf")
    _write_modernbert_gguf(tmp_path / "c.gguf", model, causal_attention=True)
    with pytest.raises(compscope.UnsupportedModelError, match="'modern-bert.attention.causal' is true"):
        compscope.load(tmp_path / "c.gguf")
    _write_modernbert_gguf(tmp_path / "g.gguf", model, sliding_window=None)
    assert compscope.load(tmp_path / "g.gguf").sliding_window == (None,) * ours.n_layers


def _write_bert_gguf(path, model, fused: bool = False, causal: bool = False) -> None:
    """A BERT GGUF as llama.cpp's converter writes one (``bert``): HF's bert tensors renamed, the
    post-LN norms after each sublayer, the attention bidirectional (``attention.causal`` false); a
    RoBERTa's position table cut to start at its first used row, ``pad_token_id + 1``, as the
    converter cuts it. ``fused``: query, key and value in one ``attn_qkv`` (rows q | k | v)."""
    sd = _numpy_state(model)
    cfg = model.config
    d, n = cfg.hidden_size, cfg.num_hidden_layers
    start = cfg.pad_token_id + 1 if cfg.model_type == "roberta" else 0
    w = _writer(path, "bert")
    _metadata(w, block_count=n, context_length=cfg.max_position_embeddings - start, embedding_length=d,
              feed_forward_length=cfg.intermediate_size, head_count=cfg.num_attention_heads, head_count_kv=None,
              layer_norm_eps=cfg.layer_norm_eps, causal_attention=causal, token_type_count=cfg.type_vocab_size)
    top = {"embeddings.word_embeddings.weight": "token_embd.weight", "embeddings.position_embeddings.weight":
           "position_embd.weight", "embeddings.token_type_embeddings.weight": "token_types.weight",
           "embeddings.LayerNorm.weight": "token_embd_norm.weight", "embeddings.LayerNorm.bias": "token_embd_norm.bias"}
    for hf_name, g_name in top.items():
        t = sd[hf_name]
        w.add_tensor(g_name, t[start:] if g_name == "position_embd.weight" else t)
    names = {"attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
             "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}
    qkv = {"attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v"}
    for i in range(n):
        p = f"encoder.layer.{i}."
        if fused:
            for part in ("weight", "bias"):
                w.add_tensor(f"blk.{i}.attn_qkv.{part}", np.concatenate([sd[f"{p}{hf}.{part}"] for hf in qkv]))
        else:
            names = {**names, **qkv}
        for hf_name, g_name in names.items():
            for part in ("weight", "bias"):
                w.add_tensor(f"blk.{i}.{g_name}.{part}", sd[f"{p}{hf_name}.{part}"])
    _finish(w)


@pytest.mark.parametrize("arch", ["qwen3vl", "qwen3vlmoe"])
def test_a_qwen3vl_gguf_matches_the_language_model_object(tmp_path, arch):
    """Qwen3-VL's language model as llama.cpp writes it (``qwen3vl``: Qwen3's names and QK norms, rows as HF's,
    the interleaved multimodal rotary sections as ``rope.dimension_sections`` [t, h, w, 0], DeepStack's layer
    count beside): read back, the language model object's heads, QK norms and frequencies, the sections said;
    transformers' GGUF reader does not read it (weights only). Qwen3-VL-MoE's (``qwen3vlmoe``) the same: its experts
    are MLP, so its file is written here from the dense model's attention."""
    if not hasattr(transformers, "Qwen3VLConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Qwen3-VL")
    r = D // H
    text = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                num_key_value_heads=G, head_dim=r, max_position_embeddings=64, tie_word_embeddings=False,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 3000.0,
                                                    "mrope_section": [1, 1, 1], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=D, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, deepstack_visual_indexes=[0])
    from compscope.data.runner import transformers_at_least

    if not transformers_at_least(5):  # (transformers 4 takes them as rope_theta and rope_scaling, under 'rope_type')
        text["rope_theta"] = text["rope_parameters"].pop("rope_theta")
        text["rope_scaling"] = text.pop("rope_parameters")
    model = transformers.Qwen3VLForConditionalGeneration(transformers.Qwen3VLConfig(
        text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
        vision_start_token_id=V - 3, vision_end_token_id=V - 4)).eval()
    _randomise(model, 47)
    sd = _numpy_state(model.model.language_model)
    _write_qwen3vl_layout(tmp_path / "q.gguf", arch, sd, model.lm_head.weight.detach().numpy(), n_deepstack_layers=1)
    ours, ref = compscope.load(tmp_path / "q.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "qwen3"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps)
    assert torch.allclose(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any("multimodal rotary (mrope sections [1, 1, 1])" in n for n in ours.meta.notes)
    from compscope.data.runner import cannot_run

    assert f"a GGUF file of architecture '{arch}', which transformers' GGUF reader does not read" in cannot_run(
        tmp_path / "q.gguf")


def _write_qwen3vl_layout(path, arch: str, sd: dict, head: np.ndarray, **ints) -> None:
    """A GGUF of ``arch`` in Qwen3-VL's layout, as llama.cpp's converter writes one: Qwen3's names and QK norms from the
    language model's state ``sd`` (HF names, rows as HF's), the output head ``head``, the multimodal sections
    [1, 1, 1, 0] at base 3000; ``ints``: more ``ARCH.KEY`` integers."""
    w = _writer(path, arch)
    _metadata(w, layer_norm_rms_eps=1e-6, rope_freq_base=3000.0, rope_dimension_sections=[1, 1, 1, 0],
              key_length=D // H, value_length=D // H)
    for key, value in ints.items():
        w.add_uint32(f"{arch}.{key}", value)
    w.add_tensor("token_embd.weight", sd["embed_tokens.weight"])
    w.add_tensor("output.weight", head)
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    _add_blocks(w, sd, _QWEN3_LAYER, 2)
    _finish(w)


def test_a_qwen3tts_gguf_reads_the_talker_as_qwen3s_attention_without_its_codec_head(tmp_path):
    """Qwen3-TTS's talker as llama.cpp's converter writes it (``qwen3tts``: Qwen3-VL's layout, the multimodal sections
    [t, h, w, 0], a head of fewer rows than the embedding, over the codec tokens alone) and runs it (Qwen3-VL's
    graph): the heads, QK norms, embedding and frequencies of the Qwen3 holding the same weights, read by the
    qwen3_tts_talker family; no unembedding, said with the embedding's size; weights only."""
    cfg = hf_config("Qwen3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    rms_norm_eps=1e-6, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 3000.0})
    model = transformers.Qwen3ForCausalLM(cfg).eval()
    _randomise(model, 53)
    # (the codec head: rows of its own, fewer than the vocabulary's)
    _write_qwen3vl_layout(tmp_path / "t.gguf", "qwen3tts", _numpy_state(model.model),
                          model.lm_head.weight.detach().numpy()[:12])
    ours, ref = compscope.load(tmp_path / "t.gguf"), compscope.load(model)
    assert ours.meta.family == "qwen3_tts_talker" and ref.meta.family == "qwen3" and ours.causal
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps)
    assert torch.allclose(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert ours.W_U is None and ref.W_U is not None
    assert any(f"Qwen3-TTS's head scores its codec tokens alone (3072 rows), the last of the {V} token ids" in n
               for n in ours.meta.notes)
    assert any("Qwen3-TTS's talker read by the qwen3_tts_talker family" in n for n in ours.meta.notes)
    from compscope.data.runner import cannot_run

    assert "no folder of it runs on data either" in cannot_run(tmp_path / "t.gguf")


@pytest.mark.parametrize("config_cls, fused", [("BertConfig", False), ("BertConfig", True), ("RobertaConfig", False)])
def test_a_bert_gguf_matches_the_model_object(tmp_path, config_cls, fused):
    """BERT (``bert``; RoBERTa's kin as llama.cpp writes them, under that architecture with the
    position table cut at ``pad_token_id + 1``): read back, the model object's heads, embeddings,
    positions and norms, and the attention recomputed from them. transformers' GGUF reader does not
    read the architecture, so the data-based commands refuse it; a file that says it attends
    causally is refused by its key."""
    extra = {"pad_token_id": 1, "type_vocab_size": 1} if config_cls == "RobertaConfig" else {"type_vocab_size": 2}
    cfg = hf_config(config_cls, vocab_size=V, hidden_size=D, num_attention_heads=H, num_hidden_layers=3,
                    intermediate_size=32, max_position_embeddings=24, layer_norm_eps=1e-6, **extra)
    model = transformers.AutoModel.from_config(cfg).eval()
    _randomise(model, 41)
    _write_bert_gguf(tmp_path / "b.gguf", model, fused=fused)
    ours, ref = compscope.load(tmp_path / "b.gguf"), compscope.load(model)
    assert ours.meta.family == "bert" and ref.meta.family == cfg.model_type and not ours.causal
    assert ours.norm_placement == ref.norm_placement == "post" and ours.W_U is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.embed_extra["W_type"], ref.embed_extra["W_type"])
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and torch.equal(ours.attn_norm.bias, ref.attn_norm.bias)
    assert ours.attn_norm.eps == pytest.approx(1e-6, rel=1e-6)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(42))
    for layer in range(3):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    from compscope.data.runner import cannot_run

    assert "a GGUF file of architecture 'bert', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "b.gguf")
    _write_bert_gguf(tmp_path / "c.gguf", model, causal=True)
    with pytest.raises(compscope.UnsupportedModelError, match=r"c\.gguf: GGUF metadata 'bert\.attention\.causal' is true"):
        compscope.load(tmp_path / "c.gguf")


def test_a_qwen2vl_gguf_matches_the_language_model_object(tmp_path):
    """Qwen2.5-VL's language model as llama.cpp writes it (``qwen2vl``: Qwen2's names and biases, the
    multimodal rotary sections as ``rope.dimension_sections`` [t, h, w, 0]): read back, the language
    model object's heads and frequencies, the sections said; transformers' GGUF reader does not read
    the architecture; sections other than llama.cpp's four are refused by key."""
    text = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2, num_attention_heads=H,
                num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False, rope_theta=3000.0,
                rope_scaling={"type": "mrope", "mrope_section": [1, 1, 1]})
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=D, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0])
    model = transformers.Qwen2_5_VLForConditionalGeneration(transformers.Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
        vision_start_token_id=V - 3, vision_end_token_id=V - 4)).eval()
    _randomise(model, 43)
    lm = model.model.language_model
    sd = _numpy_state(lm)

    def write(path, sections):
        w = _writer(path, "qwen2vl")
        _metadata(w, layer_norm_rms_eps=1e-6, rope_freq_base=3000.0, rope_dimension_sections=sections)
        w.add_tensor("token_embd.weight", sd["embed_tokens.weight"])
        w.add_tensor("output.weight", model.lm_head.weight.detach().numpy())
        w.add_tensor("output_norm.weight", sd["norm.weight"])
        names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 **{f"self_attn.{x}_proj.{k}": f"attn_{x}.{k}" for x in "qkv" for k in ("weight", "bias")},
                 "self_attn.o_proj.weight": "attn_output.weight"}
        _add_blocks(w, sd, names, 2)
        _finish(w)

    write(tmp_path / "q.gguf", [1, 1, 1, 0])
    ours, ref = compscope.load(tmp_path / "q.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "llama" and ours.b_O is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.allclose(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert any("multimodal rotary (mrope sections [1, 1, 1])" in n for n in ours.meta.notes)
    from compscope.data.runner import cannot_run

    assert "a GGUF file of architecture 'qwen2vl', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "q.gguf")
    for sections in ([1, 1, 0, 1], [1, 1, 1], None):  # (the last not 0; three sections; none stated)
        write(tmp_path / "bad.gguf", sections)
        refused = rf"bad\.gguf: GGUF metadata 'qwen2vl\.rope\.dimension_sections' = {re.escape(repr(sections))}"
        with pytest.raises(compscope.UnsupportedModelError, match=refused):
            compscope.load(tmp_path / "bad.gguf")


def _write_nemotron_gguf(path, model, rope_dim: int | None) -> None:
    """A Nemotron GGUF as llama.cpp's converter writes one (``nemotron``): Llama's names, LayerNorm1P's
    gains stored as ``1 + w`` beside their biases, the LayerNorm epsilon as ``attention.layer_norm_epsilon``,
    the rotated width as ``rope.dimension_count`` (None: left out)."""
    sd = _numpy_state(model)
    cfg = model.config
    w = _writer(path, "nemotron")
    _metadata(w, head_count_kv=cfg.num_key_value_heads, layer_norm_eps=cfg.norm_eps, rope_freq_base=2000.0,
              key_length=R, rope_dimension_count=rope_dim)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"] + 1.0)
    w.add_tensor("output_norm.bias", sd["model.norm.bias"])
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for i in range(2):
        p = f"model.layers.{i}."
        for hf_name, g_name in names.items():
            w.add_tensor(f"blk.{i}.{g_name}.weight", sd[p + hf_name + ".weight"] + 1.0)
            w.add_tensor(f"blk.{i}.{g_name}.bias", sd[p + hf_name + ".bias"])
        for x, g in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("o", "attn_output")):
            w.add_tensor(f"blk.{i}.{g}.weight", sd[f"{p}self_attn.{x}_proj.weight"])
        for x in ("up", "down"):
            w.add_tensor(f"blk.{i}.ffn_{x}.weight", sd[f"{p}mlp.{x}_proj.weight"])
    _finish(w)


@pytest.mark.parametrize("share", [0.5, 0.25, None])
def test_a_nemotron_gguf_matches_the_model_object_and_runs(tmp_path, share):
    """Nemotron (``nemotron``): LayerNorm1P's gains read back as ``w`` (llama.cpp stores ``1 + w``), their
    biases, the rotated share from ``rope.dimension_count`` (``share`` None: none stated, whole heads, as llama.cpp
    takes them, not the family's default half): the model object's heads and norms, and the attention recomputed
    from them. transformers' GGUF reader runs the file, handed the rotated width and the epsilon it does not read
    (its default share is a half), computing what compscope recomputes."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import runner_for

    cfg = hf_config("NemotronConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R, max_position_embeddings=64,
                    norm_eps=1e-4, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 2000.0,
                                     "partial_rotary_factor": share or 1.0})
    model = transformers.NemotronForCausalLM(cfg).eval()
    _randomise(model, 44)
    _write_nemotron_gguf(tmp_path / "n.gguf", model, None if share is None else int(R * share))
    ours, ref = compscope.load(tmp_path / "n.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "nemotron"
    assert ours.rotary.dim == ref.rotary.dim == int(R * (share or 1))
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        torch.testing.assert_close(a.weight, b.weight, atol=1e-6, rtol=0)
        assert torch.equal(a.bias, b.bias) and a.offset == b.offset == 1.0 and a.eps == pytest.approx(1e-4, rel=1e-6)
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(45))
    for layer in range(2):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    runner = runner_for(tmp_path / "n.gguf", progress=False, device="cpu")
    runner.trace(torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("arch", ["lfm2", "lfm2moe"])
def test_an_lfm2_gguf_reads_and_runs_its_attention_layers_as_the_model_object(tmp_path, arch):
    """LFM2 (and LFM2-MoE, ``lfm2moe``, its layers dense here) as llama.cpp writes it (every tensor under
    gguf-py's names for the architecture; a K/V head count per layer, 0 on the convolution layers; the
    final norm as ``token_embd_norm``; rows as HF's): read back, the attention layers' heads, QK-norm gains,
    norms and rotary are the model object's; a convolution layer's input norm is not taken for attention;
    transformers runs the LFM2 file (not LFM2-MoE's: weights only), and what each attention layer adds is what
    compscope recomputes from the residual it reads."""
    from gguf.constants import MODEL_ARCH

    from compscope.core.attention import attention_forward
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import BY_ID, build

    if not hasattr(MODEL_ARCH, arch.upper()):
        pytest.skip(f"this gguf package names no {arch} tensors to write the file with")
    moe = arch == "lfm2moe"
    if moe and not hasattr(transformers, "Lfm2MoeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no LFM2-MoE")
    variant = BY_ID["lfm2-conv-attention"]
    if moe:  # (every layer dense: the experts are MLP either way)
        from hf_tiny import Variant

        variant = Variant("lfm2-moe-dense", "hybrid", "Lfm2MoeConfig",
                          dict(variant.config, num_dense_layers=4, num_experts=4, num_experts_per_tok=2,
                               moe_intermediate_size=16))
    model = build(variant)
    cfg, sd = model.config, _numpy_state(model)
    n = cfg.num_hidden_layers
    layers = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
    names = gguf.get_tensor_name_map(getattr(MODEL_ARCH, arch.upper()), n)
    w = gguf.GGUFWriter(str(tmp_path / "l.gguf"), arch)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])  # the model's vocabulary (not this file's V)
    _metadata(w, block_count=n, embedding_length=cfg.hidden_size, feed_forward_length=cfg.intermediate_size,
              head_count=cfg.num_attention_heads, head_count_kv=[cfg.num_key_value_heads if i in layers else 0 for i in range(n)],
              vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.norm_eps, rope_freq_base=cfg.rope_parameters["rope_theta"])
    w.add_uint32(f"{arch}.shortconv.l_cache", cfg.conv_L_cache)
    for key, value in sd.items():
        if key == "lm_head.weight":  # tied: llama.cpp writes no output tensor
            continue
        stem, _, suffix = key.removeprefix("model.").rpartition(".")
        name = names.get_name("model." + stem) or names.get_name(stem)
        assert name is not None, key
        w.add_tensor(f"{name}.{suffix}", value.squeeze(1) if "conv.conv" in key else value)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "l.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "lfm2" and ours.n_layers == ref.n_layers == len(layers)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), atol=0, rtol=0, msg=name)
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert torch.equal(a.weight, b.weight) and a.eps == pytest.approx(b.eps, rel=1e-6)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert "attention on 2 of the model's 4 layers (1, 3" in " ".join(ours.meta.notes)
    x = torch.randn(1, 9, cfg.hidden_size, generator=torch.Generator().manual_seed(4))
    for layer in range(ours.n_layers):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    if moe:
        from compscope.data.runner import cannot_run

        assert "architecture 'lfm2moe', which transformers' GGUF reader does not read" in cannot_run(tmp_path / "l.gguf")
        return
    runner = runner_for(tmp_path / "l.gguf", progress=False, device="cpu")
    tr = runner.trace(torch.randint(2, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(20)))
    for layer in range(ours.n_layers):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_an_lfm2_gguf_whose_layers_the_metadata_does_not_say_is_refused(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "lfm2")
    _metadata(w, block_count=4, head_count_kv=[0, G, 0, 1], layer_norm_rms_eps=1e-5, rope_freq_base=1e6)
    w.add_tensor("token_embd.weight", np.ones((V, D), np.float32))
    _finish(w)
    with pytest.raises(compscope.UnsupportedModelError, match=r"'lfm2\.attention\.head_count_kv' = \[0, 2, 0, 1\] is "
                                                             "not one K/V head count, or 0 on a convolution layer"):
        compscope.load(tmp_path / "x.gguf")


def test_a_minimax_m2_gguf_reads_and_runs_as_the_model_object(tmp_path):
    """MiniMax-M2 as llama.cpp writes it (``minimax-m2``: every tensor under llama.cpp's names, the experts
    stacked, the layer-wide QK norms as ``attn_q_norm`` of every query head's width, the rotated
    width as ``rope.dimension_count``, rows as HF's): read back as the model object, and run by
    transformers to what compscope recomputes from the residual each layer reads."""
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import BY_ID, build

    model = build(BY_ID["minimax-m2-layer-qk-norm-rotary-dim"])  # (skipped where transformers has no MiniMax-M2)
    cfg, sd = model.config, _numpy_state(model)
    n = cfg.num_hidden_layers
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "minimax-m2")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    _metadata(w, block_count=n, embedding_length=cfg.hidden_size, feed_forward_length=cfg.intermediate_size,
              head_count=cfg.num_attention_heads, head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim,
              value_length=cfg.head_dim, vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps,
              rope_freq_base=cfg.rope_parameters["rope_theta"], rope_dimension_count=4, expert_count=4, expert_used_count=2,
              expert_feed_forward_length=cfg.intermediate_size)
    block = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             **{f"self_attn.{x}_proj.weight": f"attn_{x}.weight" for x in "qkv"},
             "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
             "mlp.e_score_correction_bias": "exp_probs_b.bias", "mlp.experts.down_proj": "ffn_down_exps.weight"}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(n):
        p = f"model.layers.{i}."
        for hf, ours in block.items():
            w.add_tensor(f"blk.{i}.{ours}", sd[p + hf])
        gate, up = np.split(sd[p + "mlp.experts.gate_up_proj"], 2, axis=1)  # transformers 5's experts, fused
        w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", np.ascontiguousarray(gate))
        w.add_tensor(f"blk.{i}.ffn_up_exps.weight", np.ascontiguousarray(up))
    _finish(w)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), atol=0, rtol=0, msg=name)
    assert ours.qk_norm_scope == "layer" and ours.rotary.dim == 4
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    tr = runner_for(tmp_path / "m.gguf", progress=False, device="cpu").trace(
        torch.randint(2, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(20)))
    for layer in range(ours.n_layers):
        torch.testing.assert_close(layer_state(ours, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_a_nomic_bert_gguf_matches_the_model_object(tmp_path):
    """nomic-embed-text as llama.cpp writes it (``nomic-bert``: its released tensors renamed, the
    fused ``Wqkv`` as stored, the post-LN norms ``attn_output_norm`` and ``layer_output_norm``, the
    rotary base as ``rope.freq_base``): read back, the model object's heads, embeddings, norms and
    rotary frequencies, and the attention recomputed from them."""
    if not hasattr(transformers, "NomicBertConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no nomic-bert")
    cfg = hf_config("NomicBertConfig", vocab_size=V, hidden_size=D, num_attention_heads=H, num_hidden_layers=3,
                    intermediate_size=32, max_position_embeddings=24, layer_norm_eps=1e-6, type_vocab_size=2,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
    model = transformers.AutoModel.from_config(cfg).eval()
    _randomise(model, 43)
    sd = _numpy_state(model)
    w = _writer(tmp_path / "n.gguf", "nomic-bert")
    _metadata(w, block_count=3, context_length=24, embedding_length=D, feed_forward_length=32, head_count=H,
              head_count_kv=None, layer_norm_eps=1e-6, causal_attention=False, token_type_count=2)
    w.add_rope_freq_base(1000.0)
    w.add_tensor("token_embd.weight", sd["embeddings.word_embeddings.weight"])
    w.add_tensor("token_types.weight", sd["embeddings.token_type_embeddings.weight"])
    for part in ("weight", "bias"):
        w.add_tensor(f"token_embd_norm.{part}", sd[f"embeddings.LayerNorm.{part}"])
    for i in range(3):
        p = f"layers.{i}."
        w.add_tensor(f"blk.{i}.attn_qkv.weight", np.concatenate([sd[f"{p}self_attn.{x}_proj.weight"] for x in "qkv"]))
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[f"{p}self_attn.o_proj.weight"])
        for g, hf in (("attn_output_norm", "post_attention_layernorm"), ("layer_output_norm", "post_mlp_layernorm")):
            for part in ("weight", "bias"):
                w.add_tensor(f"blk.{i}.{g}.{part}", sd[f"{p}{hf}.{part}"])
    _finish(w)
    ours, ref = compscope.load(tmp_path / "n.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "nomic_bert" and not ours.causal and ours.W_U is None
    assert ours.norm_placement == ref.norm_placement == "post"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.b_Q is None and ours.b_O is None
    assert torch.equal(ours.embed_extra["W_type"], ref.embed_extra["W_type"])
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and torch.equal(ours.attn_norm.bias, ref.attn_norm.bias)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(42))
    for layer in range(3):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["jina-bert-v3", "nomic-bert-moe"])
def test_a_jina_bert_v3_gguf_matches_the_model_object(tmp_path, arch):
    """jina-embeddings-v3 as llama.cpp writes it (``jina-bert-v3``: its base weights under llama.cpp's names, the
    fused ``Wqkv`` and output projection with biases, the token types, the post-LN norms, the rotary base as
    ``rope.freq_base``): read back, the model object's heads, biases, embeddings, norms and rotary frequencies, and
    the attention recomputed from them. Weights only (transformers does not read the architecture); a file without
    the rotary base (llama.cpp would take 10000) is refused by name. nomic-embed-text v2 MoE's files (``nomic-bert-moe``,
    run by the same llama.cpp graph, biases and all) read alike, said; without a base, at llama.cpp's 10000, the model's
    own."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID["jina-embeddings-v3-rotary-post-ln"])
    cfg = model.config
    sd = _numpy_state(model)
    theta = (getattr(cfg, "rope_parameters", None) or {"rope_theta": getattr(cfg, "rope_theta", None)})["rope_theta"]

    def write(path, base) -> None:
        w = _writer(path, arch)
        _metadata(w, block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size, head_count=H,
                  head_count_kv=None, layer_norm_eps=cfg.layer_norm_eps, causal_attention=False, token_type_count=2,
                  **({"rope_freq_base": base} if base else {}))
        w.add_tensor("token_embd.weight", sd["embeddings.word_embeddings.weight"])
        w.add_tensor("token_types.weight", sd["embeddings.token_type_embeddings.weight"])
        for part in ("weight", "bias"):
            w.add_tensor(f"token_embd_norm.{part}", sd[f"embeddings.LayerNorm.{part}"])
        for i in range(cfg.num_hidden_layers):
            p = f"layers.{i}."
            for part in ("weight", "bias"):
                w.add_tensor(f"blk.{i}.attn_qkv.{part}", np.concatenate([sd[f"{p}self_attn.{x}_proj.{part}"] for x in "qkv"]))
                w.add_tensor(f"blk.{i}.attn_output.{part}", sd[f"{p}self_attn.o_proj.{part}"])
                for g, hf in (("attn_output_norm", "post_attention_layernorm"), ("layer_output_norm", "post_mlp_layernorm")):
                    w.add_tensor(f"blk.{i}.{g}.{part}", sd[f"{p}{hf}.{part}"])
        _finish(w)

    write(tmp_path / "j.gguf", theta)
    ours, ref = compscope.load(tmp_path / "j.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "jina_embeddings_v3" and not ours.causal and ours.W_U is None
    assert ours.norm_placement == ref.norm_placement == "post"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.embed_extra["W_type"], ref.embed_extra["W_type"])
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and torch.equal(ours.attn_norm.bias, ref.attn_norm.bias)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    from compscope.core.attention import attention_forward

    x = torch.randn(2, 9, ours.d_model, generator=torch.Generator().manual_seed(42))
    for layer in range(ours.n_layers):
        torch.testing.assert_close(attention_forward(ours, layer, x), attention_forward(ref, layer, x), atol=1e-5, rtol=1e-5)
    said = [n for n in ours.meta.notes if "nomic-embed-text v2 MoE read by the jina_embeddings_v3 family" in n]
    assert len(said) == (arch == "nomic-bert-moe")
    write(tmp_path / "x.gguf", None)
    if arch == "nomic-bert-moe":
        at_default = compscope.load(tmp_path / "x.gguf")
        r = at_default.rotary.dim
        want = 10000.0 ** -(torch.arange(0, r, 2, dtype=torch.float64) / r)
        torch.testing.assert_close(at_default.rotary.inv_freq[0].double(), want, rtol=1e-6, atol=0)
        return
    with pytest.raises(compscope.UnsupportedModelError, match=r"x\.gguf: GGUF metadata 'jina-bert-v3\.rope\.freq_base' "
                                                              "is missing"):
        compscope.load(tmp_path / "x.gguf")


def test_a_eurobert_gguf_matches_the_model_object(tmp_path):
    """EuroBERT (and jina-embeddings-v5) as llama.cpp writes it (``eurobert``: Llama's tensor names, the
    query and key rows as stored, ``attention.causal`` false): read back, the model object's heads,
    embeddings, norms and rotary frequencies; a file flagged causal is refused by its key."""
    if not hasattr(transformers, "EuroBertConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no EuroBERT")
    cfg = hf_config("EuroBertConfig", vocab_size=V, hidden_size=D, num_attention_heads=H, num_key_value_heads=G,
                    num_hidden_layers=2, intermediate_size=32, max_position_embeddings=64, rms_norm_eps=1e-6,
                    pad_token_id=0, bos_token_id=1, eos_token_id=2, mask_token_id=3,
                    rope_parameters={"rope_type": "default", "rope_theta": 700.0})
    model = transformers.AutoModel.from_config(cfg).eval()
    _randomise(model, 44)
    sd = _numpy_state(model)

    def write(path, causal: bool) -> None:
        w = _writer(path, "eurobert")
        _metadata(w, key_length=D // H, value_length=D // H, layer_norm_rms_eps=1e-6, causal_attention=causal)
        w.add_rope_freq_base(700.0)
        w.add_tensor("token_embd.weight", sd["embed_tokens.weight"])
        w.add_tensor("output_norm.weight", sd["norm.weight"])
        _add_blocks(w, sd, _LLAMA_ATTENTION, 2)
        _finish(w)

    write(tmp_path / "e.gguf", causal=False)
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "eurobert" and not ours.causal and ours.W_U is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.kv_map == ref.kv_map
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    write(tmp_path / "c.gguf", causal=True)
    with pytest.raises(compscope.UnsupportedModelError, match=r"'eurobert\.attention\.causal' is true"):
        compscope.load(tmp_path / "c.gguf")


@pytest.mark.parametrize("arch", ["t5", "t5encoder"])
def test_t5_ggufs_read_their_encoder_as_the_model_object_and_run(tmp_path, arch):
    """T5 as llama.cpp's converter writes it (``enc.blk.N.`` blocks, the bias table in the first, the metadata's
    head width and bucket count; the whole model's file with its decoder's ``dec.`` tensors beside, which are not
    read): the same heads as the HF encoder, the farthest bucket distance llama.cpp's 128, the norms' epsilon from
    either key; run on data by transformers' GGUF reader, every layer recomputed from the weights equals what it adds.
    A file without the head width, or with values of another, refused by key."""
    from compscope.data.runner import layer_state, runner_for

    config = transformers.T5Config(vocab_size=V, d_model=D, d_kv=R, num_heads=H, d_ff=32, num_layers=2,
                                   num_decoder_layers=2, relative_attention_num_buckets=16, feed_forward_proj="gated-gelu")
    model = (transformers.T5ForConditionalGeneration if arch == "t5" else transformers.T5EncoderModel)(config).eval()
    _randomise(model, 7)
    sd = {k: v for k, v in _numpy_state(model).items() if k != "encoder.embed_tokens.weight"}  # (tied to shared)
    if arch == "t5":
        sd = {k: v for k, v in sd.items() if k not in ("decoder.embed_tokens.weight", "lm_head.weight")}

    def write(name, **meta):
        w = _writer(tmp_path / name, arch)
        _metadata(w, **{**dict(head_count_kv=None, vocab_size=None, key_length=R, value_length=R, layer_norm_eps=1e-6,
                               layer_norm_rms_eps=1e-6, relative_attn_buckets_count=16), **meta})
        _add_by_gguf_names(w, sd, getattr(gguf.MODEL_ARCH, arch.upper()), 2)
        _finish(w)
        return tmp_path / name

    path = write("t5.gguf")
    got, want = compscope.load(path), compscope.load(model)
    assert got.meta.family == "t5_encoder" and got.rel_bias_buckets == (16, 128) and got.W_Q.shape == (2, H, R, D)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "rel_bias"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=0, rtol=0)
    torch.testing.assert_close(got.attn_norm.weight, want.attn_norm.weight, atol=0, rtol=0)
    torch.testing.assert_close(got.final_norm.weight, want.final_norm.weight, atol=0, rtol=0)
    # the norms' epsilon from either key the converter writes (the RMS one first); no head width: refused
    only = compscope.load(write("e.gguf", layer_norm_rms_eps=None, layer_norm_eps=1e-3))
    assert only.attn_norm.eps == pytest.approx(1e-3, rel=1e-6) and got.attn_norm.eps == pytest.approx(1e-6, rel=1e-6)
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'{arch}\.attention\.key_length' = None and "
                                                              rf"'{arch}\.attention\.value_length' = {R}: T5's heads"):
        compscope.load(write("k.gguf", key_length=None))
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'{arch}\.attention\.key_length' = {R} and "
                                                              rf"'{arch}\.attention\.value_length' = {2 * R}: T5's"):
        compscope.load(write("v.gguf", value_length=2 * R))
    runner = runner_for(path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "T5EncoderModel"  # (the encoder alone: the decoder never built)
    trace = runner.trace(torch.randint(2, V, (2, 9), generator=torch.Generator().manual_seed(0)))
    for layer in range(got.n_layers):
        torch.testing.assert_close(layer_state(got, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)


@pytest.mark.parametrize("kind, name, runs", [("relu", "t5-tiny", "gated MLP"), ("umt5", "umt5-tiny", None),
                                              ("umt5", "t5-tiny", "exactly when general.name says umt5")])
def test_t5_ggufs_transformers_would_run_as_another_model_are_read_and_refused_to_run(tmp_path, kind, name, runs):
    """T5 v1.0 (no gate in its MLPs) and UMT5 (a bias table in every encoder block: read as UMT5, each layer its own
    table) as GGUF files: read as their HF encoders; run where transformers' GGUF reader builds the same model (a
    gated MLP; UMT5 exactly when the file's name says so), refused by name where it would not."""
    from compscope.data.runner import layer_state, runner_for

    umt5 = kind == "umt5"
    config = getattr(transformers, "UMT5Config" if umt5 else "T5Config")(
        vocab_size=V, d_model=D, d_kv=R, num_heads=H, d_ff=32, num_layers=2, num_decoder_layers=1,
        feed_forward_proj="gated-gelu" if umt5 else "relu")
    model = getattr(transformers, "UMT5EncoderModel" if umt5 else "T5EncoderModel")(config).eval()
    _randomise(model, 8)
    sd = {k: v for k, v in _numpy_state(model).items() if k != "encoder.embed_tokens.weight"}
    path = tmp_path / "t5.gguf"
    w = _writer(path, "t5encoder")
    w.add_name(name)
    _metadata(w, head_count_kv=None, vocab_size=None, key_length=R, value_length=R, layer_norm_rms_eps=1e-6,
              relative_attn_buckets_count=32)
    _add_by_gguf_names(w, sd, gguf.MODEL_ARCH.T5ENCODER, 2)
    _finish(w)
    got, want = compscope.load(path), compscope.load(model)
    assert got.rel_bias.shape == (2, H, 32) and torch.equal(got.rel_bias, want.rel_bias)
    assert umt5 != torch.equal(got.rel_bias[0], got.rel_bias[1])  # (UMT5: each layer's own table)
    if runs is not None:
        with pytest.raises(compscope.UnsupportedModelError, match=f"would run another model.*{runs}"):
            runner_for(path, progress=False, device="cpu")
        return
    runner = runner_for(path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "UMT5EncoderModel"
    trace = runner.trace(torch.randint(2, V, (2, 9), generator=torch.Generator().manual_seed(0)))
    for layer in range(got.n_layers):
        torch.testing.assert_close(layer_state(got, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)


def _write_cohere2moe(path, model, flags, *, lead: int | None, mtp: bool = False, **metadata) -> None:
    """A Cohere 2 MoE file as llama.cpp's converter writes one from ``model`` (Llama's block names, HF's rows, the
    sliding flags ``flags``: a flag per layer, a period, or None for none stated; ``lead`` dense first layers; with
    ``mtp`` a prediction block after the last layer, its attention a copy of layer 1's plus 1)."""
    cfg = model.config
    sd = _numpy_state(model)
    n = cfg.num_hidden_layers
    norm = {"layer_norm_rms_eps": cfg.rms_norm_eps} if cfg.rms_norm_eps is not None else {
        "layer_norm_eps": cfg.layer_norm_eps}
    w = _writer(path, "cohere2moe")
    _metadata(w, block_count=n + mtp, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim, value_length=cfg.head_dim,
              vocab_size=cfg.vocab_size, rope_dimension_count=cfg.head_dim, logit_scale=cfg.logit_scale,
              sliding_window=cfg.sliding_window, leading_dense_block_count=lead,
              nextn_predict_layers=1 if mtp else None, **norm, **metadata)
    if flags is not None:
        w.add_sliding_window_pattern(flags)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    for i in range(n):
        for hf_name, g_name in _LLAMA_ATTENTION.items():
            w.add_tensor(f"blk.{i}.{g_name}", sd[f"model.layers.{i}.{hf_name}"])
    if mtp:
        for hf_name, g_name in _LLAMA_ATTENTION.items():
            w.add_tensor(f"blk.{n}.{g_name}", sd[f"model.layers.1.{hf_name}"] + 1)
    _finish(w)


@pytest.mark.parametrize("variant_id", ["cohere2-moe-dense-prefix-rms", "cohere2-moe-layernorm"])
def test_a_cohere2moe_gguf_as_its_converter_writes_it_reads_as_the_model_object(tmp_path, variant_id):
    """Cohere 2 MoE as llama.cpp's converter writes it: a sliding flag per layer from the config's layer types, the
    dense first layers' count (rotated, as llama.cpp runs them: transformers' prefix pattern 1), RMS or LayerNorms by
    the epsilon stated, the logit scale, a prediction block after the last layer (left out): the model object's heads,
    norms, windows and frequencies (those of its global, unrotated layers 0). Weights only."""
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    model = build(BY_ID[variant_id])
    cfg = model.config
    mlp = getattr(cfg, "mlp_layer_types", None)  # (5.9, its first release, counts the dense layers only)
    lead = cfg.first_k_dense_replace if mlp is None else next((i for i, t in enumerate(mlp) if t != "dense"), len(mlp))
    _write_cohere2moe(tmp_path / "c.gguf", model, [t == "sliding_attention" for t in cfg.layer_types], lead=lead,
                      mtp=True, rope_freq_base=_rope_settings(cfg)["rope_theta"])
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "cohere2_moe" and ours.n_layers == ref.n_layers
    assert ours.sliding_window == ref.sliding_window and ours.attn_norm.kind == ref.attn_norm.kind
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.attn_norm.eps == pytest.approx(
        ref.attn_norm.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    if variant_id == "cohere2-moe-dense-prefix-rms":  # (dense layers 0-1 rotate; layer 3, global, does not)
        assert [bool(f.any()) for f in ours.rotary.inv_freq] == [True, True, True, False]
    assert any("multi-token-prediction" in n for n in ours.meta.notes)
    assert "does not read" in cannot_run(tmp_path / "c.gguf")


@pytest.mark.parametrize("period, global_layers", [(None, (0,)), (2, (0, 2)), (0, ())])
def test_a_cohere2moe_gguf_with_a_sliding_period_takes_llama_cpps_layers(tmp_path, period, global_layers):
    """A period (or none: llama.cpp's 4) instead of flags: llama.cpp makes layers 0, p, 2p, ... global and leaves
    them unrotated (no dense first layers here), not transformers' p − 1, 2p − 1, ...; 0 makes every layer
    sliding. Read as the model whose config lists those layers; a ``rope.freq_base_swa`` llama.cpp's graph does not
    use is said and not read."""
    from hf_tiny import _LLAMA

    if not hasattr(transformers, "Cohere2MoeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Cohere 2 MoE")
    types = ["full_attention" if i in global_layers else "sliding_attention" for i in range(4)]
    model = transformers.Cohere2MoeForCausalLM(hf_config(
        "Cohere2MoeConfig", **{**_LLAMA, "num_hidden_layers": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
                               "sliding_window": 3, "layer_types": types, "first_k_dense_replace": 0,
                               "num_experts": 4, "num_experts_per_tok": 2, "logit_scale": 0.5,
                               "rope_parameters": {"rope_type": "default", "rope_theta": 700.0}}))
    _randomise(model, 3)
    _write_cohere2moe(tmp_path / "c.gguf", model, period, lead=0, rope_freq_base=700.0, rope_freq_base_swa=900.0)
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model.eval())
    assert ours.sliding_window == ref.sliding_window == tuple(None if i in global_layers else 3 for i in range(4))
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == [i not in global_layers for i in range(4)]
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert any("'cohere2moe.rope.freq_base_swa' = 900 not read" in n for n in ours.meta.notes)


def _mellum(types: list[str], **more):
    """A tiny Mellum of ``types`` (every layer type at base 900), its parameters drawn anew."""
    from hf_tiny import _LLAMA

    if not hasattr(transformers, "MellumConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Mellum")
    model = transformers.MellumForCausalLM(hf_config(
        "MellumConfig", **{**_LLAMA, "num_hidden_layers": len(types), "num_key_value_heads": 2, "sliding_window": 3,
                           "layer_types": types, "num_experts": 4, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 16,
                           "rope_parameters": {t: {"rope_type": "default", "rope_theta": 900.0}
                                               for t in ("full_attention", "sliding_attention")}, **more}))
    _randomise(model, 5)
    return model.eval()


def _write_mellum(path, model, flags, window, **metadata) -> None:
    """A Mellum file as llama.cpp's converter writes one (Llama's block names and Qwen3's QK norms, HF's rows)."""
    cfg = model.config
    sd = _numpy_state(model)
    w = _writer(path, "mellum")
    _metadata(w, block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size,
              head_count=cfg.num_attention_heads, head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim,
              value_length=cfg.head_dim, vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps,
              rope_freq_base=900.0, sliding_window=window, **metadata)
    if flags is not None:
        w.add_sliding_window_pattern(flags)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    names = {**_LLAMA_ATTENTION, "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight"}
    _add_blocks(w, {k.removeprefix("model."): v for k, v in sd.items()}, names, cfg.num_hidden_layers)
    _finish(w)


@pytest.mark.parametrize("flags, window, types", [
    ([False, True, True, False], 3, ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]),
    (None, 3, ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]),  # (llama.cpp's 4)
    ([False, True, True, False], None, ["full_attention"] * 4),  # (no window: flags or not, no layer slides)
], ids=["flags", "period", "no-window"])
def test_a_mellum_gguf_reads_as_llama_cpp_runs_it(tmp_path, flags, window, types):
    """Mellum as llama.cpp's converter writes it: the sliding layers from the per-layer flags, else llama.cpp's
    period (4: layers 3, 7, ... global), none without a window; every layer turned at rope.freq_base, a
    rope.freq_base_swa llama.cpp's graph leaves unused said and not read: the heads, QK norms, windows and
    frequencies of the model whose config lists those layers at that one base. Weights only."""
    from compscope.data.runner import cannot_run

    model = _mellum(types)
    _write_mellum(tmp_path / "m.gguf", model, flags, window, rope_freq_base_swa=40.0)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "mellum"
    assert ours.sliding_window == ref.sliding_window == tuple(3 if t == "sliding_attention" else None for t in types)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    assert any("'mellum.rope.freq_base_swa' = 40 not read" in n for n in ours.meta.notes)
    assert "does not read" in cannot_run(tmp_path / "m.gguf")


def test_a_mellum_gguf_scales_its_global_layers_rotary_alone(tmp_path):
    """llama.cpp turns a Mellum file's sliding layers plainly and its global ones by the file's YaRN: with no window
    every layer is global and YaRN (its attention factor folded into the logit scale) is the model's whose config
    gives it to them; with sliding layers the two kinds of layer would take different attention factors, which no
    one logit scale holds: refused by name, as for the model's own folder."""
    yarn = {"rope_scaling_type": gguf.RopeScalingType.YARN, "rope_scaling_factor": 4.0,
            "rope_scaling_orig_ctx_len": 16}
    scaled = {"rope_type": "yarn", "rope_theta": 900.0, "factor": 4.0, "original_max_position_embeddings": 16}
    model = _mellum(["full_attention"] * 2, rope_parameters={"full_attention": scaled, "sliding_attention": {
        "rope_type": "default", "rope_theta": 900.0}})
    _write_mellum(tmp_path / "m.gguf", model, None, None, **yarn)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    assert ours.attn_scale == pytest.approx(ref.attn_scale) and ours.attn_scale != pytest.approx(8 ** -0.5)
    _write_mellum(tmp_path / "s.gguf", model, [False, True], 3, **yarn)
    with pytest.raises(compscope.UnsupportedModelError, match="attention factors .* differ between layers"):
        compscope.load(tmp_path / "s.gguf")


def test_a_hy_v3_gguf_reads_as_the_model_object_without_its_prediction_block(tmp_path):
    """HY-V3 (Tencent Hy3) as llama.cpp's converter writes it: Qwen3's rows and per-head QK norms, the experts
    stacked (MLP, not read), the multi-token-prediction block after the last layer (left out): the model object's
    heads, QK norms and frequencies. Weights only."""
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    model = build(BY_ID["hy-v3-qk-norm-biases-moe"], attention_bias=False)
    cfg = model.config
    sd = {k.removeprefix("model."): v for k, v in _numpy_state(model).items()}
    n = cfg.num_hidden_layers
    sd.update({k.replace("layers.1.", f"layers.{n}."): t + 1 for k, t in sd.items() if k.startswith("layers.1.")})
    w = _writer(tmp_path / "h.gguf", "hy_v3")
    _metadata(w, block_count=n + 1, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim, value_length=cfg.head_dim,
              vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=3000.0,
              rope_dimension_count=cfg.head_dim, nextn_predict_layers=1)
    w.add_tensor("token_embd.weight", sd["embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    _add_blocks(w, sd, {**_LLAMA_ATTENTION, "self_attn.q_norm.weight": "attn_q_norm.weight",
                        "self_attn.k_norm.weight": "attn_k_norm.weight"}, n + 1)
    _finish(w)
    ours, ref = compscope.load(tmp_path / "h.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "hy_v3" and ours.n_layers == ref.n_layers == n
    assert ours.b_Q is None and ref.b_Q is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for x, y in [(ours.attn_norm, ref.attn_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        assert torch.equal(x.weight, y.weight) and x.eps == pytest.approx(y.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    assert any("multi-token-prediction" in n for n in ours.meta.notes)
    assert "does not read" in cannot_run(tmp_path / "h.gguf")


@pytest.mark.parametrize("rope_pattern", [None, [True, False, True]], ids=["every-layer", "rope-pattern"])
def test_a_granite_swa_gguf_reads_as_the_model_object(tmp_path, rope_pattern):
    """Granite SWA as llama.cpp's converter writes it: a Llama's permuted q/k rows, the four scalars, a sink per
    head (``attn_sinks.weight``), q/k/v/o biases, a sliding flag per layer, and rotary on the layers
    ``attention.rope_pattern`` marks (every layer without it) at the one ``rope.freq_base``: the heads, sinks,
    windows and frequencies of the model whose ``layer_rope_theta`` is that base or 0; a file stating no base at
    llama.cpp's 10 000; the sliding flags missing or not one per layer, or rotary flags not one per layer, refused by
    key. Weights only."""
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    thetas = [900.0, 0, 900.0] if rope_pattern else [900.0] * 3
    model = build(BY_ID["granite-swa-sinks-layer-theta"], layer_rope_theta=thetas)
    cfg = model.config
    sd = _numpy_state(model)

    def write(name, base=900.0, flags=tuple(t == "sliding_attention" for t in cfg.layer_types), pattern=rope_pattern):
        w = _writer(tmp_path / name, "granite_swa")
        _metadata(w, block_count=3, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
                  head_count_kv=cfg.num_key_value_heads, key_length=cfg.head_dim, value_length=cfg.head_dim,
                  vocab_size=cfg.vocab_size, layer_norm_rms_eps=cfg.rms_norm_eps, rope_freq_base=base,
                  sliding_window=cfg.sliding_window)
        if flags is not None:
            w.add_sliding_window_pattern(list(flags))
        if pattern:
            w.add_array("granite_swa.attention.rope_pattern", pattern)
        for key, value in {"embedding_scale": 1.3, "attention.scale": 0.3, "residual_scale": 0.8,
                           "logit_scale": 2.0}.items():
            w.add_float32(f"granite_swa.{key}", value)
        w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
        w.add_tensor("output_norm.weight", sd["model.norm.weight"])
        w.add_tensor("output.weight", sd["lm_head.weight"])
        for i in range(3):
            p = f"model.layers.{i}."
            w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
            w.add_tensor(f"blk.{i}.attn_sinks.weight", sd[p + "self_attn.sinks"])
            for proj, short, n in (("q", "q", 4), ("k", "k", 2), ("v", "v", None), ("o", "output", None)):
                for part in ("weight", "bias"):
                    t = sd[f"{p}self_attn.{proj}_proj.{part}"]
                    w.add_tensor(f"blk.{i}.attn_{short}.{part}", t if n is None else llama_cpp_permute(t, n))
        _finish(w)
        return tmp_path / name

    write("g.gguf")
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "granite_swa"
    assert ours.sliding_window == ref.sliding_window and ours.scale == pytest.approx(ref.scale)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U", "sinks"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), atol=1e-6, rtol=1e-6, msg=name)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == [bool(t) for t in thetas]
    assert "does not read" in cannot_run(tmp_path / "g.gguf")
    # no rope.freq_base: llama.cpp's 10 000 on the layers that rotate
    r = ours.rotary.dim
    plain = 10000.0 ** -(torch.arange(0, r, 2, dtype=torch.float64) / r)
    at_default = compscope.load(write("b.gguf", base=None)).rotary.inv_freq.double()
    for f, t in zip(at_default, thetas):
        torch.testing.assert_close(f, plain if t else torch.zeros_like(plain), rtol=1e-6, atol=0)
    for name, change, key in [("f.gguf", dict(flags=None), "sliding_window_pattern"),
                              ("s.gguf", dict(flags=(True, False)), "sliding_window_pattern"),
                              ("p.gguf", dict(pattern=[True, False]), "rope_pattern"),
                              ("t.gguf", dict(pattern=["yes", "no", "yes"]), "rope_pattern")]:
        with pytest.raises(compscope.LoadError, match=rf"{name}: GGUF metadata 'granite_swa\.attention\.{key}' = "):
            compscope.load(write(name, **change))


def _write_muse_glimmer(path, model, flags, k_gain=None, **metadata) -> None:
    """Muse Glimmer's language model as llama.cpp's converter writes it: q/k rows from transformers' halves back to
    pairs, the layer norms' gains stored ``1 + w`` (the final norm's as it is), the query scale as the QK-norm gain
    on every query dim and ones on the keys' (or ``k_gain``), the output gate as ``attn_gate``, an LM head
    ``output``."""
    cfg = model.config
    sd = _numpy_state(model)
    n, r = cfg.num_hidden_layers, cfg.head_dim
    w = _writer(path, "muse-glimmer")
    _metadata(w, block_count=n, embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, key_length=r, value_length=r, vocab_size=cfg.vocab_size,
              layer_norm_rms_eps=cfg.rms_norm_eps, rope_dimension_count=r, sliding_window=cfg.sliding_window,
              logit_scale=cfg.output_multiplier,
              **{"final_logit_softcapping": cfg.final_logit_softcapping, **metadata})
    if flags is not None:
        w.add_sliding_window_pattern(flags)
    w.add_tensor("token_embd.weight", sd["embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    w.add_tensor("output.weight", sd["embed_tokens.weight"] * 0.5)
    for i in range(n):
        p = f"layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"] + 1)
        w.add_tensor(f"blk.{i}.post_attention_norm.weight", sd[p + "post_attention_layernorm.weight"] + 1)
        w.add_tensor(f"blk.{i}.attn_q.weight", llama_cpp_permute(sd[p + "self_attn.q_proj.weight"],
                                                                 cfg.num_attention_heads))
        w.add_tensor(f"blk.{i}.attn_k.weight", llama_cpp_permute(sd[p + "self_attn.k_proj.weight"],
                                                                 cfg.num_key_value_heads))
        w.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_gate.weight", sd[p + "self_attn.gate_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_q_norm.weight", np.full(r, cfg.qk_scale_factor, np.float32))
        w.add_tensor(f"blk.{i}.attn_k_norm.weight", np.ones(r, np.float32) if k_gain is None else k_gain)
    _finish(w)


@pytest.mark.parametrize("flags", [[True, False, True, False], None], ids=["flags", "period"])
def test_a_muse_glimmer_gguf_reads_as_the_model_object(tmp_path, flags):
    """Muse Glimmer's language model as llama.cpp's converter writes and llama.cpp runs it: the heads, output gates,
    norms (the layer norms back from ``1 + w``, the final one as stored, the post-norms at 1e-8), query scale (from
    the QK gains), windows (the flags; or llama.cpp's period rule, 4: layer 3 global) and rotary (the sliding layers
    at the file's ``rope.freq_base_swa``, else its ``rope.freq_base``, else 10 000; the global ones none) of the model
    object whose config says so. Weights only."""
    from compscope.data.runner import cannot_run
    from hf_tiny import BY_ID, build

    types = (["sliding_attention", "full_attention"] * 2 if flags else
             ["sliding_attention"] * 3 + ["full_attention"])
    model = build(BY_ID["muse-glimmer-gated-nope-global"], post_norm_eps=1e-8, layer_types=types,
                  layer_rope_theta=[700.0 if t == "sliding_attention" else 0 for t in types])
    _write_muse_glimmer(tmp_path / "m.gguf", model, flags, rope_freq_base=10.0, rope_freq_base_swa=700.0)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "muse_glimmer"
    assert ours.sliding_window == ref.sliding_window == tuple(3 if t == "sliding_attention" else None for t in types)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_G", "W_E"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), atol=1e-6, rtol=1e-6, msg=name)
    for x, y in [(ours.attn_norm, ref.attn_norm), (ours.attn_out_norm, ref.attn_out_norm),
                 (ours.final_norm, ref.final_norm), *zip(ours.qk_norm, ref.qk_norm)]:
        torch.testing.assert_close(x.weight, y.weight, atol=1e-6, rtol=0)
        assert x.eps == pytest.approx(y.eps) and x.offset == y.offset
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, atol=0, rtol=1e-6)
    torch.testing.assert_close(ours.W_U, torch.tensor(_numpy_state(model)["embed_tokens.weight"]) * 0.25)
    assert "does not read" in cannot_run(tmp_path / "m.gguf")
    caps = {"m.gguf": model.config.final_logit_softcapping}
    for name, cap in (("c.gguf", None), ("z.gguf", 0.0)):  # (none stated: llama.cpp's 30; 0: no cap)
        _write_muse_glimmer(tmp_path / name, model, flags, rope_freq_base=700.0, final_logit_softcapping=cap)
        caps[name] = 30.0 if cap is None else None
    for name, cap in caps.items():
        said = [n for n in compscope.load(tmp_path / name).meta.notes if n.startswith("final logits soft-capped")]
        assert said == ([] if cap is None else [f"final logits soft-capped, c tanh(l / c) with c = {cap:g}: a monotone "
                                                "map of W_U x, which W_U-based scores describe before the cap"]), name
    # the sliding layers' base: rope.freq_base where no rope.freq_base_swa is stated, else llama.cpp's 10 000
    _write_muse_glimmer(tmp_path / "b.gguf", model, flags, rope_freq_base=700.0)
    torch.testing.assert_close(compscope.load(tmp_path / "b.gguf").rotary.inv_freq, ours.rotary.inv_freq, atol=0,
                               rtol=1e-6)
    _write_muse_glimmer(tmp_path / "n.gguf", model, flags)
    r = ours.rotary.dim
    plain = 10000.0 ** -(torch.arange(0, r, 2, dtype=torch.float64) / r)
    for f, t in zip(compscope.load(tmp_path / "n.gguf").rotary.inv_freq.double(), types):
        torch.testing.assert_close(f, plain if t == "sliding_attention" else torch.zeros_like(plain), atol=0, rtol=1e-6)


@pytest.mark.parametrize("first, values", [(2.0, 2), (None, 1)], ids=["per-dim", "all-twos"])
def test_a_muse_glimmer_gguf_with_per_dim_qk_gains_is_refused_by_name(tmp_path, first, values):
    """A key gain not all ones (per dim, or one scale other than 1), or a query gain that is not one scale on every
    dim, is no model Muse Glimmer's config gives: refused, naming the tensor."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID["muse-glimmer-gated-nope-global"])
    gain = np.full(model.config.head_dim, 2.0 if first is None else 1.0, np.float32)
    gain[0] = first or gain[0]
    _write_muse_glimmer(tmp_path / "m.gguf", model, [True, False, True, False], k_gain=gain, rope_freq_base=700.0)
    with pytest.raises(compscope.UnsupportedModelError,
                       match=rf"tensor 'blk\.0\.attn_k_norm\.weight' holds {values} values"):
        compscope.load(tmp_path / "m.gguf")


@pytest.mark.parametrize("window", [None, 3])
def test_a_deepseek_ocr_gguf_reads_as_llama_cpp_runs_it(tmp_path, window):
    """DeepSeek-OCR's language model as llama.cpp converts it (``deepseek2-ocr``: DeepSeek-V2's converter without
    latents) and runs it: plain q, k, v projections, rows as HF's, rotate-half rotary over the whole head at base
    10000 whatever ``rope.dimension_count`` (the config's ``qk_rope_head_dim``) says, and causal attention without the
    window Unlimited-OCR's files state (llama.cpp's graph applies none; the note says so): the heads of the Llama
    holding the same weights, which is what that graph computes; a file stating no base, or a factor of 1 or 0, the
    same. A file llama.cpp would not run (other K/V heads, another base, a rope scaling) is refused by name."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=64,
                    tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 23)
    extra = {} if window is None else {"sliding_window": window}
    _write_llamalike_gguf(tmp_path / "m.gguf", model, "deepseek2-ocr", 2, eps="layer_norm_rms_eps", **extra)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "llama" and ours.rotary.dim == ref.rotary.dim == D // H and ours.rotary.style == "half"
    assert ours.sliding_window == (None, None) and ours.causal
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert ours.scale == pytest.approx(ref.scale)
    said = [n for n in ours.meta.notes if "sliding window the file states" in n]
    assert len(said) == (window is not None)
    from compscope.data.runner import cannot_run

    assert "which transformers' GGUF reader does not read" in cannot_run(tmp_path / "m.gguf")  # (weights only)
    for bad, match in (({"head_count_kv": G}, "one K/V head per query head"),
                       ({"rope_freq_base": 500.0}, "runs only at base 10000"),
                       ({"rope_scaling_type": gguf.RopeScalingType.LINEAR, "rope_scaling_factor": 2.0},
                        r"'deepseek2-ocr\.rope\.scaling\.type' = 'linear': .*not one rotary map"),
                       ({"rope_scaling_factor": 2.0},
                        r"'deepseek2-ocr\.rope\.scaling\.factor' = 2\.0: .*not one rotary map")):
        _write_llamalike_gguf(tmp_path / "bad.gguf", model, "deepseek2-ocr", 2, eps="layer_norm_rms_eps", **bad)
        with pytest.raises(compscope.UnsupportedModelError, match=match):
            compscope.load(tmp_path / "bad.gguf")
    # no base stated (llama.cpp's 10000), a factor of 1 or 0 (no scaling): read as the file above
    for fine in ({"rope_freq_base": None}, {"rope_scaling_factor": 1.0}, {"rope_scaling_factor": 0.0}):
        _write_llamalike_gguf(tmp_path / "ok.gguf", model, "deepseek2-ocr", 2, eps="layer_norm_rms_eps", **fine)
        assert torch.equal(compscope.load(tmp_path / "ok.gguf").rotary.inv_freq, ours.rotary.inv_freq), fine


@pytest.mark.parametrize("arch", ["internlm2", "xverse", "deepseek", "arctic", "bailingmoe", "baichuan", "nanbeige"])
def test_remote_code_llamas_ggufs_read_as_llama_cpp_runs_them(tmp_path, arch):
    """InternLM2, XVERSE, DeepSeek-MoE, Arctic and Ling files as llama.cpp's converters write them (q, k, v apart, their rows
    permuted as a Llama's) and its Llama graph runs them: the heads of the Llama holding the same weights, said to be
    read so. DeepSeek's graph scales the logits by a stated ``attention.scale``: such a file is refused by name (the
    others' graphs never read the key: read as without it). Baichuan's turns the heads only at 32 layers (7B): its
    file is written with 32 (one of 40, with ALiBi, is read by llama_alibi: test_alibi_llama_ggufs_...). Nanbeige's
    runs the layers ``num_loops`` times: its file is written with one loop, and one of two refused."""
    layers = 32 if arch == "baichuan" else 2
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=layers,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 29)
    _write_scaled_llama_gguf(tmp_path / "m.gguf", model, None, {}, arch=arch, extra={"block_count": layers})
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "llama" and ours.n_kv_heads == G and ours.n_layers == layers
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.scale == pytest.approx(ref.scale) and any("read by the Llama family" in n for n in ours.meta.notes)
    from compscope.data.runner import cannot_run

    said = cannot_run(tmp_path / "m.gguf")  # (and no folder to run instead: the model is remote code)
    assert "which transformers' GGUF reader does not read" in said and "no folder of it runs on data either" in said
    if arch == "nanbeige":
        _write_scaled_llama_gguf(tmp_path / "l.gguf", model, None, {}, arch=arch, extra={"num_loops": 2})
        with pytest.raises(compscope.UnsupportedModelError,
                           match=r"'nanbeige\.num_loops' = 2: .*the final norm replaces the residual"):
            compscope.load(tmp_path / "l.gguf")
    _write_scaled_llama_gguf(tmp_path / "s.gguf", model, None, {}, arch=arch,
                             extra={"attention.scale": 0.5, "block_count": layers})
    if arch != "deepseek":
        assert compscope.load(tmp_path / "s.gguf").scale == pytest.approx(ref.scale)
        return
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'{arch}\.attention\.scale' = 0\.5"):
        compscope.load(tmp_path / "s.gguf")


@pytest.mark.parametrize("stated", [True, False])
def test_a_minicpm_gguf_reads_as_llama_cpps_granite_graph_runs_it(tmp_path, stated):
    """MiniCPM (1 and 2) as llama.cpp converts it (a Llama's permuted rows) and runs it (its Granite graph): the heads,
    embeddings and unembedding of the Granite holding the same weights with muP's scalars as Granite's multipliers:
    those the file states, or llama.cpp's defaults where it states none (12, 1.4 / sqrt(layers), 256 / d_model); the
    attention logits at d_head^-1/2 whatever ``attention.scale`` says (its loader never reads it)."""
    L = 2
    scales = dict(embedding_scale=8.0, residual_scale=0.9, logit_scale=4.0) if stated else {}
    multipliers = (dict(embedding_multiplier=8.0, residual_multiplier=0.9, logits_scaling=4.0) if stated else
                   dict(embedding_multiplier=12.0, residual_multiplier=1.4 / L ** 0.5, logits_scaling=256.0 / D))
    cfg = hf_config("GraniteConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=L,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False,
                    attention_multiplier=(D // H) ** -0.5, rope_parameters={"rope_type": "default", "rope_theta": 100.0},
                    **multipliers)
    model = transformers.GraniteForCausalLM(cfg).eval()
    _randomise(model, 31)
    _write_scaled_llama_gguf(tmp_path / "m.gguf", model, None, {}, arch="minicpm",
                             extra={**scales, "attention.scale": 0.25})
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "granite" and any("MiniCPM read by the Granite family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), rtol=1e-6, atol=0, msg=name)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.scale == pytest.approx(ref.scale) == pytest.approx((D // H) ** -0.5)


def test_a_grovemoe_gguf_reads_as_qwen3s_attention(tmp_path):
    """GroveMoE as llama.cpp converts it (rows as HF's) and runs it (Qwen3's attention: an RMSNorm on each query and
    key head before the rotary map): the heads and QK norms of the Qwen3 holding the same weights, said."""
    cfg = hf_config("Qwen3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-6,
                    rope_parameters={"rope_type": "default", "rope_theta": 700.0})
    model = transformers.Qwen3ForCausalLM(cfg).eval()
    _randomise(model, 37)
    _write_llamalike_gguf(tmp_path / "g.gguf", model, "grovemoe", D // H, eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "g.gguf"), compscope.load(model)
    assert ours.meta.family == "qwen3" and any("GroveMoE read by the Qwen3 family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(a.weight, b.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)


def test_a_llada_gguf_reads_as_llama_cpp_runs_it_both_ways(tmp_path):
    """LLaDA (a diffusion LM) as llama.cpp converts it (a Llama's permuted rows, ``attention.causal`` false) and runs
    it (its Llama graph without the causal mask): the heads of the Llama holding the same weights, attending both
    ways, read by the EuroBERT family and said; a file flagged causal is refused by its key."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 43)
    _write_scaled_llama_gguf(tmp_path / "m.gguf", model, None, {}, arch="llada", extra={"attention.causal": 0})
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "eurobert" and not ours.causal and ref.causal and ours.W_U is None
    assert any("LLaDA read by the EuroBERT family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    _write_scaled_llama_gguf(tmp_path / "c.gguf", model, None, {}, arch="llada", extra={"attention.causal": 1})
    with pytest.raises(compscope.UnsupportedModelError, match=r"'llada\.attention\.causal' is true"):
        compscope.load(tmp_path / "c.gguf")


def _write_fused_qkv_gguf(path, model, arch: str, rope_dim: int, cut: int = 0, kv: int | None = None,
                          head_dim: int | None = None, eps: str = "layer_norm_rms_eps", base: float | None = 10000.0,
                          beside: dict[str, np.ndarray] | None = None) -> None:
    """A Llama-layout model written as llama.cpp writes the first Qwen's, ChatGLM's and Ling 2.0's files: one
    ``attn_qkv`` per block (and its bias, where the model has them; and QK norms, where it has them), rows [q | k | v]
    as stored, ``cut`` rows short of them; ``kv``:
    the K/V head count stated (None: left out); ``head_dim``: the head width stated (None: left out); ``base``: the
    rotary base stated (None: left out); ``beside``: more tensors written as they are (CogVLM's visual expert)."""
    sd = _numpy_state(model)
    w = _writer(path, arch)
    _metadata(w, head_count_kv=kv, rope_dimension_count=rope_dim, rope_freq_base=base, key_length=head_dim,
              **{eps: 1e-6})
    for name, t in (beside or {}).items():
        w.add_tensor(name, t)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for part in ("weight", "bias"):  # (LayerNorms' biases, and an output projection's, where the model has them)
        if f"model.norm.{part}" in sd:
            w.add_tensor(f"output_norm.{part}", sd[f"model.norm.{part}"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(2):
        p = f"model.layers.{i}."
        for part in ("weight", "bias"):
            if f"{p}self_attn.q_proj.{part}" in sd:
                fused = np.concatenate([sd[f"{p}self_attn.{x}_proj.{part}"] for x in "qkv"])
                w.add_tensor(f"blk.{i}.attn_qkv.{part}", fused[:len(fused) - cut] if part == "weight" else fused)
        for part in ("weight", "bias"):
            for hf, name in (("self_attn.o_proj", "attn_output"), ("input_layernorm", "attn_norm")):
                if f"{p}{hf}.{part}" in sd:
                    w.add_tensor(f"blk.{i}.{name}.{part}", sd[f"{p}{hf}.{part}"])
        for x in "qk":  # (per-head QK norms, where the model has them: Ling 2.0's)
            if f"{p}self_attn.{x}_norm.weight" in sd:
                w.add_tensor(f"blk.{i}.attn_{x}_norm.weight", sd[f"{p}self_attn.{x}_norm.weight"])
    _finish(w)


def test_a_first_qwen_gguf_reads_as_qwen2s_attention(tmp_path):
    """The first Qwen as llama.cpp converts it (``qwen``: its fused ``c_attn`` as ``attn_qkv`` with a bias, rows
    [q | k | v] as stored) and runs it (rotate-half rotary, one K/V head per query head): the heads and q/k/v
    biases of the Qwen2 holding the same weights; a fused tensor of another height is refused naming it."""
    cfg = hf_config("Qwen2Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=64, tie_word_embeddings=False,
                    rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    _randomise(model, 47)
    write = lambda path, cut=0: _write_fused_qkv_gguf(path, model, "qwen", D // H, cut)  # noqa: E731
    write(tmp_path / "q.gguf")
    ours, ref = compscope.load(tmp_path / "q.gguf"), compscope.load(model)
    assert ours.meta.family == "llama" and any("Qwen (the first)" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.b_O is None and ours.b_Q.abs().sum() > 0
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    write(tmp_path / "short.gguf", cut=D // H)
    with pytest.raises(compscope.LoadError, match=r"tensor 'blk\.0\.attn_qkv\.weight' has \d+ rows"):
        compscope.load(tmp_path / "short.gguf")


def test_an_orion_gguf_reads_as_llama_cpp_runs_it(tmp_path):
    """Orion as llama.cpp converts it (rows as HF's) and runs it (LayerNorms with biases before the attention and the
    logits, rotate-half rotary on whole heads, no attention biases): the heads and norms of the StableLM holding the
    same weights with those settings (all of each head rotated, sequential blocks), said."""
    cfg = hf_config("StableLmConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False,
                    use_qkv_bias=False, use_parallel_residual=False, layer_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 900.0, "partial_rotary_factor": 1.0})
    model = transformers.StableLmForCausalLM(cfg).eval()
    _randomise(model, 53)
    _write_llamalike_gguf(tmp_path / "o.gguf", model, "orion", D // H)
    ours, ref = compscope.load(tmp_path / "o.gguf"), compscope.load(model)
    assert ours.meta.family == "stablelm" and ours.rotary.dim == D // H and ours.b_Q is None
    assert any("Orion read by the StableLM family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert a.kind == "layernorm" and torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("bias", [True, False])
def test_a_chatglm_gguf_reads_as_glms_attention(tmp_path, bias):
    """ChatGLM as llama.cpp converts it (``chatglm``: one fused ``attn_qkv``, rows as stored, biases where the model
    has them) and runs it (interleaved rotary on ``rope.dimension_count`` dims of each head, grouped K/V heads): the
    heads and biases of the GLM holding the same weights, its q/k/v bias switch taken from the tensors."""
    cfg = hf_config("GlmConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=8, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-6, attention_bias=bias, pad_token_id=0,
                    eos_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                     "partial_rotary_factor": 0.5})
    model = transformers.GlmForCausalLM(cfg).eval()
    _randomise(model, 59)
    _write_fused_qkv_gguf(tmp_path / "c.gguf", model, "chatglm", 4, kv=G, head_dim=8)
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model)
    assert ours.meta.family == "glm" and ours.rotary.dim == 4 and ours.rotary.style == "interleaved"
    assert any("ChatGLM read by the GLM family" in n for n in ours.meta.notes) and ours.n_kv_heads == G
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "W_E", "W_U"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert (ours.b_Q is not None) == bias
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def test_a_ling2_gguf_reads_as_glm45s_attention(tmp_path):
    """Ling 2.0 as llama.cpp converts it (``bailingmoe2``: one fused ``attn_qkv``, rows as stored, per-head QK norms)
    and runs it (the norms before rotate-half rotary on ``rope.dimension_count`` dims of each head): the heads and QK
    norms of the GLM-4.5 holding the same weights, QK-norm and bias switches from the tensors."""
    cfg = hf_config("Glm4MoeConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=8, max_position_embeddings=64,
                    tie_word_embeddings=False, rms_norm_eps=1e-6, attention_bias=False, use_qk_norm=True,
                    first_k_dense_replace=2, n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                    pad_token_id=0, eos_token_id=1,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
    model = transformers.Glm4MoeForCausalLM(cfg).eval()
    _randomise(model, 61)
    _write_fused_qkv_gguf(tmp_path / "l.gguf", model, "bailingmoe2", 4, kv=G, head_dim=8)
    ours, ref = compscope.load(tmp_path / "l.gguf"), compscope.load(model)
    assert ours.meta.family == "glm4_moe" and ours.rotary.dim == 4 and ours.rotary.style == "half"
    assert any("Ling 2.0 read by the GLM-4.5 family" in n for n in ours.meta.notes) and ours.b_Q is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.qk_norm, ref.qk_norm):
        assert torch.equal(a.weight, b.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("causal", [None, 0])
def test_an_embedding_llama_gguf_reads_causal_or_both_ways_as_its_flag_says(tmp_path, causal):
    """An embedding Llama (``llama-embed``) as llama.cpp converts it (a Llama's permuted rows) and runs it: causal
    where the file does not flag it otherwise (llama.cpp's default), both ways (EuroBERT's family) where
    ``attention.causal`` is false; the heads those of the Llama holding the same weights either way, said."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 67)
    extra = {} if causal is None else {"attention.causal": causal}
    _write_scaled_llama_gguf(tmp_path / "e.gguf", model, None, {}, arch="llama-embed", extra=extra)
    ours, ref = compscope.load(tmp_path / "e.gguf"), compscope.load(model)
    assert (ours.meta.family, ours.causal) == (("llama", True) if causal is None else ("eurobert", False))
    assert any("an embedding Llama" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)


@pytest.mark.parametrize("arch, name, biased", [("plamo", "PLaMo", False),
                                                ("pangu-embedded", "openPangu-Embedded", True)])
def test_plamo_and_openpangu_ggufs_read_as_a_llamas_attention(tmp_path, arch, name, biased):
    """PLaMo as llama.cpp converts it (its query heads regrouped into llama.cpp's order, rows as HF's) and runs it
    (rotate-half rotary on whole heads, grouped K/V heads, the attention beside the MLP on one normed input), and
    openPangu-Embedded (a Llama's tensors as they are, with the output-projection bias its graph requires and q/k/v
    biases): the heads (and biases) of the Llama holding the same weights, read by the Llama family and said."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False,
                    attention_bias=biased, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 71)
    _write_llamalike_gguf(tmp_path / "p.gguf", model, arch, D // H, eps="layer_norm_rms_eps")
    ours, ref = compscope.load(tmp_path / "p.gguf"), compscope.load(model)
    assert ours.meta.family == "llama" and ours.causal and ours.n_kv_heads == G
    assert any(f"{name} read by the Llama family" in n for n in ours.meta.notes)
    assert (ref.b_O is not None) == (ref.b_Q is not None) == biased
    for w in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U", "b_Q", "b_K", "b_V", "b_O"):
        a, b = getattr(ours, w), getattr(ref, w)
        assert (a is None and b is None) or torch.equal(a, b), w
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def test_a_codeshell_gguf_reads_as_starcoder2s_attention(tmp_path):
    """CodeShell as llama.cpp converts it (one fused ``attn_qkv`` with a bias, LayerNorms with biases, a biased output
    projection) and runs it (rotate-half rotary on whole heads, grouped K/V heads): the heads, biases and norms of the
    StarCoder2 holding the same weights, said."""
    cfg = hf_config("Starcoder2Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64, tie_word_embeddings=False,
                    norm_epsilon=1e-6, use_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = transformers.Starcoder2ForCausalLM(cfg).eval()
    _randomise(model, 73)
    _write_fused_qkv_gguf(tmp_path / "s.gguf", model, "codeshell", D // H, kv=G, eps="layer_norm_eps")
    ours, ref = compscope.load(tmp_path / "s.gguf"), compscope.load(model)
    assert ours.meta.family == "starcoder2" and any("CodeShell read by the StarCoder2" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in [(ours.attn_norm, ref.attn_norm), (ours.final_norm, ref.final_norm)]:
        assert a.kind == "layernorm" and torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        assert a.eps == pytest.approx(b.eps)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


def _write_random_gguf(path, arch: str, shapes: dict[str, tuple[int, ...]], seed: int, keys: dict | None = None,
                       **metadata) -> dict[str, np.ndarray]:
    """A GGUF of ``arch`` holding a tensor of each of ``shapes`` (by its name in the file), every one N(0, 0.5²) from
    one seeded generator, a norm's gain (``…norm.weight``, ``…norm_2.weight``) 1 + that; ``metadata`` as
    :func:`_metadata` takes it, ``keys`` written as ``ARCH.KEY`` (:func:`_add_scalar`). The tensors
    returned by their names."""
    rng = np.random.default_rng(seed)
    gain = lambda n: n.endswith(".weight") and n.split(".")[-2].endswith(("norm", "norm_2"))  # noqa: E731
    tensors = {n: (rng.standard_normal(s) * 0.5 + (1.0 if gain(n) else 0.0)).astype(np.float32)
               for n, s in shapes.items()}
    w = _writer(path, arch)
    _metadata(w, **metadata)
    for key, value in (keys or {}).items():
        _add_scalar(w, f"{arch}.{key}", value)
    for name, t in tensors.items():
        w.add_tensor(name, t)
    _finish(w)
    return tensors


def _write_alibi_llama(path, arch: str, layers: int, n_heads: int, n_kv: int, seed: int) -> dict[str, np.ndarray]:
    """A GGUF of ``arch`` (``refact``, ``baichuan``) in Llama's names with ``layers`` blocks, ``n_heads`` query and
    ``n_kv`` K/V heads over width D, as llama.cpp's converters write them (Refact's: no rope keys; Baichuan's: its
    rope dimension count, the head width), every tensor N(0, 0.5²) from one seeded generator (norm gains 1 + that);
    the tensors returned by their names in the file."""
    r = D // n_heads
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D), "output_norm.weight": (D,)}
    for i in range(layers):
        shapes.update({f"blk.{i}.attn_norm.weight": (D,), f"blk.{i}.attn_q.weight": (n_heads * r, D),
                       f"blk.{i}.attn_k.weight": (n_kv * r, D), f"blk.{i}.attn_v.weight": (n_kv * r, D),
                       f"blk.{i}.attn_output.weight": (D, n_heads * r), f"blk.{i}.ffn_norm.weight": (D,),
                       f"blk.{i}.ffn_gate.weight": (32, D), f"blk.{i}.ffn_up.weight": (32, D),
                       f"blk.{i}.ffn_down.weight": (D, 32)})
    return _write_random_gguf(path, arch, shapes, seed, block_count=layers, head_count=n_heads, head_count_kv=n_kv,
                              layer_norm_rms_eps=1e-6, rope_dimension_count=r if arch == "baichuan" else None)


@pytest.mark.parametrize("arch, layers, n_heads, n_kv", [("refact", 2, 6, 1), ("refact", 2, 4, 1),
                                                          ("baichuan", 40, 4, 4)])
def test_alibi_llama_ggufs_attend_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, arch, layers, n_heads,
                                                                                       n_kv):
    """Refact's files (one K/V head) and Baichuan's of 40 layers (13B), which llama.cpp runs with Llama's layers and
    ALiBi in place of rotary: every head's pattern on a random residual equals the one computed here from the
    file's own tensors as llama.cpp's graph does (RMSNorm, q and k apart, logits at d_head^-1/2 plus
    slope · (-|i - j|), its slopes m0^(h+1) below the largest power of two n' <= heads and m1^(2(h - n') + 1) past
    it, m0 = 2^(-8 / n'), m1 = 2^(-4 / n'), causal softmax). Read weights only, said; a Baichuan file of another
    depth still refused."""
    from compscope.core.attention import attend, project, read_input

    t = _write_alibi_llama(tmp_path / "m.gguf", arch, layers, n_heads, n_kv, seed=5)
    hw = compscope.load(tmp_path / "m.gguf")
    assert hw.meta.family == "llama_alibi" and hw.positions == "alibi" and hw.rotary is None
    assert any("ALiBi positions (maximum bias 8), no rotary" in n for n in hw.meta.notes)
    assert any(("Refact" if arch == "refact" else "Baichuan 13B") + " read by the llama_alibi family" in n
               for n in hw.meta.notes)
    r, T = D // n_heads, 7
    p2 = 2 ** int(math.floor(math.log2(n_heads)))
    m0, m1 = 2.0 ** (-8.0 / p2), 2.0 ** (-4.0 / p2)
    slopes = [m0 ** (h + 1) if h < p2 else m1 ** (2 * (h - p2) + 1) for h in range(n_heads)]
    x = np.random.default_rng(11).standard_normal((T, D))
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    for layer in (0, layers - 1):
        b = f"blk.{layer}."
        xn = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * t[b + "attn_norm.weight"]
        q = (xn @ t[b + "attn_q.weight"].T.astype(np.float64)).reshape(T, n_heads, r)
        k = (xn @ t[b + "attn_k.weight"].T.astype(np.float64)).reshape(T, n_kv, r)
        expected = np.empty((n_heads, T, T))
        for h in range(n_heads):
            logits = q[:, h] @ k[:, h // (n_heads // n_kv)].T / math.sqrt(r) + slopes[h] * -np.abs(i - j)
            logits = np.where(j <= i, logits, -np.inf)
            e = np.exp(logits - logits.max(-1, keepdims=True))
            expected[h] = e / e.sum(-1, keepdims=True)
        xt = torch.tensor(x, dtype=torch.float32)[None]
        xin = read_input(hw, layer, xt)
        ours = attend(hw, layer, project(hw, layer, "Q", xin), project(hw, layer, "K", xin))[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-5)
    from compscope.data.runner import cannot_run

    said = cannot_run(tmp_path / "m.gguf")  # (and no folder to run instead: the model is remote code)
    assert "which transformers' GGUF reader does not read" in said and "no folder of it runs on data either" in said
    if arch == "baichuan":
        _write_alibi_llama(tmp_path / "b.gguf", arch, 36, n_heads, n_kv, seed=5)
        with pytest.raises(compscope.UnsupportedModelError, match=r"'baichuan\.block_count' = 36: .*only at 40"):
            compscope.load(tmp_path / "b.gguf")


def test_a_dream_gguf_reads_as_llama_cpp_runs_it_both_ways(tmp_path):
    """Dream (a diffusion LM) as llama.cpp converts it (Qwen2's tensors as they are, ``attention.causal`` false) and
    runs it (Qwen2's graph without the causal mask): the heads and q/k/v biases of the Qwen2 holding the same weights,
    attending both ways, its unembedding not read, read by the EuroBERT family and said; a file flagged causal is
    refused by its key."""
    cfg = hf_config("Qwen2Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    _randomise(model, 47)
    _write_llamalike_gguf(tmp_path / "m.gguf", model, "dream", D // H, eps="layer_norm_rms_eps",
                          causal_attention=False)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "eurobert" and not ours.causal and ref.causal and ours.W_U is None
    assert any("Dream read by the EuroBERT family" in n for n in ours.meta.notes)
    assert ref.b_Q is not None and ref.b_O is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "b_Q", "b_K", "b_V"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.b_O is None and torch.equal(ours.attn_norm.weight, ref.attn_norm.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.rotary.style == ref.rotary.style == "half"
    _write_llamalike_gguf(tmp_path / "c.gguf", model, "dream", D // H, eps="layer_norm_rms_eps",
                          causal_attention=True)
    with pytest.raises(compscope.UnsupportedModelError, match=r"'dream\.attention\.causal' is true"):
        compscope.load(tmp_path / "c.gguf")


@pytest.mark.parametrize("stated_window", [512, None])
def test_a_smallthinker_gguf_reads_as_llama_cpp_runs_it(tmp_path, stated_window):
    """SmallThinker as llama.cpp converts it (a Llama's tensors as they are) and runs it: with a window stated, 4096
    tokens whatever the file says (said) on every layer but 0, 4, ... (the default period 4, dense first), and no
    rotary on layers 0, 4, ...: the heads, windows and frequencies of the SmolLM3 holding the same weights with those
    layer types and rotary layers, read by the SmolLM3 family; without a window every layer full and turned. A base of
    the sliding layers' own is refused by its key."""
    n = 6
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=n, num_attention_heads=H,
                  num_key_value_heads=G, max_position_embeddings=64, pad_token_id=None, bos_token_id=None,
                  eos_token_id=None, rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    if stated_window:
        types = ["full_attention", *["sliding_attention"] * 3, "full_attention", "sliding_attention"]
        settings = dict(use_sliding_window=True, sliding_window=4096, layer_types=types,
                        no_rope_layers=[0, 1, 1, 1, 0, 1])
    else:
        settings = dict(use_sliding_window=False, no_rope_layers=[1] * n)
    model = transformers.SmolLM3ForCausalLM(hf_config("SmolLM3Config", **common, **settings)).eval()
    _randomise(model, 59)
    more = {} if stated_window is None else {"sliding_window": stated_window}
    _write_llamalike_gguf(tmp_path / "m.gguf", model, "smallthinker", D // H, eps="layer_norm_rms_eps", **more)
    ours, ref = compscope.load(tmp_path / "m.gguf"), compscope.load(model)
    assert ours.meta.family == "smollm3" and ours.n_layers == n
    assert ours.sliding_window == ref.sliding_window
    assert ours.sliding_window == ((None, 4096, 4096, 4096, None, 4096) if stated_window else (None,) * n)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert [bool(f.any()) for f in ours.rotary.inv_freq] == ([False, True, True, True, False, True] if stated_window
                                                             else [True] * n)
    assert any("SmallThinker read by the SmolLM3 family" in note for note in ours.meta.notes)
    assert any("(512) not read: llama.cpp's smallthinker graph slides 4096" in note
               for note in ours.meta.notes) == bool(stated_window)
    # no base stated: llama.cpp's 10 000 on the layers that turn
    _write_llamalike_gguf(tmp_path / "n.gguf", model, "smallthinker", D // H, eps="layer_norm_rms_eps",
                          rope_freq_base=None, **more)
    plain = 10000.0 ** -(torch.arange(0, D // H, 2, dtype=torch.float64) / (D // H))
    for f, turns in zip(compscope.load(tmp_path / "n.gguf").rotary.inv_freq.double(), ours.rotary.inv_freq.any(-1)):
        torch.testing.assert_close(f, plain if turns else torch.zeros_like(plain), rtol=1e-6, atol=0)
    if not stated_window:  # (a base of the sliding layers' own, which no layer slides to use: said, not refused)
        _write_llamalike_gguf(tmp_path / "s.gguf", model, "smallthinker", D // H, eps="layer_norm_rms_eps",
                              floats={"rope.freq_base_swa": 1000.0})
        assert any("'smallthinker.rope.freq_base_swa' = 1000 not read" in n
                   for n in compscope.load(tmp_path / "s.gguf").meta.notes)
    if stated_window:  # (four layers: llama.cpp turns every one)
        four = transformers.SmolLM3ForCausalLM(hf_config("SmolLM3Config", **{**common, "num_hidden_layers": 4},
                                                         use_sliding_window=True, sliding_window=4096,
                                                         layer_types=types[:4], no_rope_layers=[1] * 4)).eval()
        _write_llamalike_gguf(tmp_path / "f.gguf", four, "smallthinker", D // H, eps="layer_norm_rms_eps", **more)
        got, want = compscope.load(tmp_path / "f.gguf"), compscope.load(four)
        assert bool(got.rotary.inv_freq.any(-1).all()) and torch.equal(got.rotary.inv_freq, want.rotary.inv_freq)
        assert got.sliding_window == want.sliding_window == (None, 4096, 4096, 4096)
    if stated_window:  # (stating llama.cpp's own 4096: nothing said of it)
        _write_llamalike_gguf(tmp_path / "w.gguf", model, "smallthinker", D // H, eps="layer_norm_rms_eps",
                              sliding_window=4096)
        as_run = compscope.load(tmp_path / "w.gguf")
        assert as_run.sliding_window == ours.sliding_window and not any("not read" in n for n in as_run.meta.notes)
        _write_llamalike_gguf(tmp_path / "b.gguf", model, "smallthinker", D // H, eps="layer_norm_rms_eps",
                              sliding_window=stated_window, floats={"rope.freq_base_swa": 1000.0})
        with pytest.raises(compscope.UnsupportedModelError, match=r"'smallthinker\.rope\.freq_base_swa' = 1000"):
            compscope.load(tmp_path / "b.gguf")


@pytest.mark.parametrize("arch, name", [("llada-moe", "LLaDA-MoE"), ("rnd1", "RND1")])
def test_diffusion_qwen3_ggufs_read_both_ways_as_llama_cpp_runs_them(tmp_path, arch, name):
    """LLaDA-MoE's and RND1's files (Qwen3's tensors as they are: per-head QK norms, rows rotating halves), which
    llama.cpp's loaders run attending both ways whatever the file's ``attention.causal`` says: the heads and QK-norm
    gains of the Qwen3 holding the same weights, attending both ways, no unembedding, read by the qwen3_bidirectional
    family and said, the flag set either way."""
    cfg = hf_config("Qwen3Config", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=D // H, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    model = transformers.Qwen3ForCausalLM(cfg).eval()
    _randomise(model, 61)
    ref = compscope.load(model)
    for flag in (False, True):
        _write_llamalike_gguf(tmp_path / f"{flag}.gguf", model, arch, D // H, eps="layer_norm_rms_eps",
                              causal_attention=flag)
        ours = compscope.load(tmp_path / f"{flag}.gguf")
        assert ours.meta.family == "qwen3_bidirectional" and not ours.causal and ref.causal and ours.W_U is None
        assert any(f"{name} read by the qwen3_bidirectional family" in n for n in ours.meta.notes)
        for w in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
            assert torch.equal(getattr(ours, w), getattr(ref, w)), w
        for a, b in zip(ours.qk_norm, ref.qk_norm):
            assert torch.equal(a.weight, b.weight)
        torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)


def _write_jais(path, layers: int, n_heads: int, max_bias, seed: int) -> dict[str, np.ndarray]:
    """A Jais GGUF as llama.cpp's converter writes one: GPT-2's tensor names without a position table, ``attn_qkv`` and
    ``attn_output`` as ``nn.Linear`` weights (the converter transposes GPT-2's ``Conv1D``), LayerNorms and every
    projection biased, no K/V head count, ALiBi's maximum bias as ``attention.max_alibi_bias`` (None: left out; any
    other value as :func:`_add_scalar` writes it); every tensor N(0, 0.5²) from one seeded generator (norm gains
    1 + that). The tensors returned by their names."""
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D), "output_norm.weight": (D,),
              "output_norm.bias": (D,)}
    for i in range(layers):
        shapes.update({f"blk.{i}.attn_norm.weight": (D,), f"blk.{i}.attn_norm.bias": (D,),
                       f"blk.{i}.attn_qkv.weight": (3 * D, D), f"blk.{i}.attn_qkv.bias": (3 * D,),
                       f"blk.{i}.attn_output.weight": (D, D), f"blk.{i}.attn_output.bias": (D,),
                       f"blk.{i}.ffn_norm.weight": (D,), f"blk.{i}.ffn_norm.bias": (D,),
                       f"blk.{i}.ffn_up.weight": (32, D), f"blk.{i}.ffn_gate.weight": (32, D),
                       f"blk.{i}.ffn_down.weight": (D, 32)})
    return _write_random_gguf(path, "jais", shapes, seed, {} if max_bias is None else
                              {"attention.max_alibi_bias": max_bias}, block_count=layers, head_count=n_heads,
                              head_count_kv=None, layer_norm_eps=1e-5)


@pytest.mark.parametrize("n_heads, max_bias", [(6, 4.0), (4, 8.0), (4, 0.5)])
def test_a_jais_gguf_attends_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, n_heads, max_bias):
    """Jais (the first) as llama.cpp's converter writes it and its graph runs it: what each layer's attention adds to
    a random residual equals what is computed here from the file's own tensors as that graph does (LayerNorm with its
    bias, the fused attn_qkv and its bias cut in thirds, logits at 1/d_head plus slope · (-|i - j|) with llama.cpp's
    slopes m0^(h+1), m1^(2(h - n') + 1), m0 = 2^(-b / n'), m1 = 2^(-b / 2n') at the file's maximum bias b, causal
    softmax, attn_output and its bias); W_E and W_U the file's token_embd and output; the maximum bias written as an
    integer the same. A file without the maximum bias (or not a positive number), which llama.cpp would run without
    positions, refused by its key."""
    from compscope.core.attention import attention_forward

    t = _write_jais(tmp_path / "j.gguf", 2, n_heads, max_bias, seed=7)
    hw = compscope.load(tmp_path / "j.gguf")
    assert hw.meta.family == "jais" and hw.positions == "alibi" and hw.W_pos is None and hw.n_kv_heads == n_heads
    assert any("Jais read by the jais family" in n for n in hw.meta.notes)
    assert np.array_equal(hw.W_E.T.numpy(), t["token_embd.weight"]) and np.array_equal(hw.W_U.numpy(),
                                                                                        t["output.weight"])
    r, T = D // n_heads, 7
    p2 = 2 ** int(math.floor(math.log2(n_heads)))
    m0, m1 = 2.0 ** (-max_bias / p2), 2.0 ** (-max_bias / 2 / p2)
    slopes = [m0 ** (h + 1) if h < p2 else m1 ** (2 * (h - p2) + 1) for h in range(n_heads)]
    x = np.random.default_rng(13).standard_normal((T, D))
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    for layer in range(2):
        b = f"blk.{layer}."
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        xn = (x - mu) / np.sqrt(var + 1e-5) * t[b + "attn_norm.weight"] + t[b + "attn_norm.bias"]
        q, k, v = np.split(xn @ t[b + "attn_qkv.weight"].T.astype(np.float64) + t[b + "attn_qkv.bias"], 3, axis=-1)
        z = np.empty((T, D))
        for h in range(n_heads):
            cut = slice(h * r, (h + 1) * r)
            logits = q[:, cut] @ k[:, cut].T / r + slopes[h] * -np.abs(i - j)
            logits = np.where(j <= i, logits, -np.inf)
            e = np.exp(logits - logits.max(-1, keepdims=True))
            z[:, cut] = (e / e.sum(-1, keepdims=True)) @ v[:, cut]
        expected = z @ t[b + "attn_output.weight"].T + t[b + "attn_output.bias"]
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    for bad in (None, 0.0, -2.0, True, "8"):  # (none, not positive, not a number: refused)
        _write_jais(tmp_path / "n.gguf", 2, n_heads, bad, seed=7)
        with pytest.raises(compscope.UnsupportedModelError,
                           match=rf"'jais\.attention\.max_alibi_bias' = {re.escape(repr(bad))}: .*without positions"):
            compscope.load(tmp_path / "n.gguf")
    if max_bias == int(max_bias):  # (as an integer: the same)
        _write_jais(tmp_path / "i.gguf", 2, n_heads, int(max_bias), seed=7)
        assert torch.equal(compscope.load(tmp_path / "i.gguf").alibi, hw.alibi)


def _write_jina_v2(path, layers: int, n_heads: int, seed: int, extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """A jina-embeddings-v2 GGUF as llama.cpp's converter writes one: BERT's tensor names without a position table
    (token types, the embeddings' LayerNorm, q, k and v apart with biases, the post-LN norms), ``attention.causal``
    false; ``extra``: block tensors of its code models (``attn_q_norm``, ``attn_norm_2``) added. Every tensor
    N(0, 0.5²) from one seeded generator (norm gains 1 + that); the tensors returned by their names."""
    shapes = {"token_embd.weight": (V, D), "token_types.weight": (2, D), "token_embd_norm.weight": (D,),
              "token_embd_norm.bias": (D,)}
    for i in range(layers):
        for x in ("q", "k", "v", "output"):
            shapes.update({f"blk.{i}.attn_{x}.weight": (D, D), f"blk.{i}.attn_{x}.bias": (D,)})
        for n in ("attn_output_norm", "layer_output_norm", *extra):
            shapes.update({f"blk.{i}.{n}.weight": (D,), f"blk.{i}.{n}.bias": (D,)})
        shapes.update({f"blk.{i}.ffn_up.weight": (64, D), f"blk.{i}.ffn_down.weight": (D, 32),
                       f"blk.{i}.ffn_down.bias": (D,)})
    return _write_random_gguf(path, "jina-bert-v2", shapes, seed, block_count=layers, head_count=n_heads,
                              head_count_kv=None, layer_norm_eps=1e-12, causal_attention=False)


@pytest.mark.parametrize("n_heads", [6, 4])
def test_a_jina_embeddings_v2_gguf_attends_both_ways_as_llama_cpps_graph_computes(tmp_path, n_heads):
    """jina-embeddings-v2 as llama.cpp's converter writes it and its BERT graph runs it (no position table: ALiBi
    both ways, llama.cpp's mask -|i - j| times its slopes m0^(h+1), m1^(2(h - n') + 1) at maximum bias 8): each
    head's pattern on what a layer reads equals the one computed here from the file's own tensors (q and k with their
    biases, logits at d_head^-1/2, softmax over every key on both sides); the embeddings, the token type row and
    the norms as the file holds them. Its code models' QK norms and second norm refused by name."""
    from compscope.core.attention import attend, project

    t = _write_jina_v2(tmp_path / "j.gguf", 2, n_heads, seed=9)
    hw = compscope.load(tmp_path / "j.gguf")
    assert hw.meta.family == "jina_bert_v2" and hw.positions == "alibi" and hw.W_pos is None and not hw.causal
    assert any("jina-embeddings-v2 read by the jina_bert_v2 family" in n for n in hw.meta.notes)
    assert np.array_equal(hw.W_E.T.numpy(), t["token_embd.weight"]) and hw.W_U is None
    assert np.array_equal(hw.embed_extra["W_type"].T.numpy(), t["token_types.weight"])
    assert np.array_equal(hw.attn_norm.weight[0].numpy(), t["token_embd_norm.weight"])
    assert np.array_equal(hw.attn_norm.bias[1].numpy(), t["blk.0.layer_output_norm.bias"])
    r, T = D // n_heads, 7
    p2 = 2 ** int(math.floor(math.log2(n_heads)))
    m0, m1 = 2.0 ** (-8.0 / p2), 2.0 ** (-4.0 / p2)
    slopes = [m0 ** (h + 1) if h < p2 else m1 ** (2 * (h - p2) + 1) for h in range(n_heads)]
    x = np.random.default_rng(17).standard_normal((T, D))  # (what a post-LN layer reads: the residual itself)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    for layer in range(2):
        b = f"blk.{layer}."
        q = x @ t[b + "attn_q.weight"].T.astype(np.float64) + t[b + "attn_q.bias"]
        k = x @ t[b + "attn_k.weight"].T.astype(np.float64) + t[b + "attn_k.bias"]
        expected = np.empty((n_heads, T, T))
        for h in range(n_heads):
            cut = slice(h * r, (h + 1) * r)
            logits = q[:, cut] @ k[:, cut].T / math.sqrt(r) + slopes[h] * -np.abs(i - j)
            e = np.exp(logits - logits.max(-1, keepdims=True))
            expected[h] = e / e.sum(-1, keepdims=True)
        xt = torch.tensor(x, dtype=torch.float32)[None]
        ours = attend(hw, layer, project(hw, layer, "Q", xt), project(hw, layer, "K", xt))[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-5)
    for extra in ("attn_q_norm", "attn_norm_2"):
        _write_jina_v2(tmp_path / f"{extra}.gguf", 2, n_heads, seed=9, extra=(extra,))
        with pytest.raises(compscope.UnsupportedModelError, match=rf"a jina-bert-v2 file with {extra}: "):
            compscope.load(tmp_path / f"{extra}.gguf")


def test_a_cogvlm_gguf_reads_its_language_expert_as_llama_cpp_runs_it_on_text(tmp_path):
    """CogVLM as llama.cpp converts it (its language expert's fused ``attn_qkv``, rows [q | k | v] as HF's; the visual
    expert's ``vis_attn_qkv`` and the rest beside) and runs it on text tokens (rotate-half rotary on whole heads at
    ggml_rope's base 10000): the heads of the Llama holding the language expert's weights, the visual expert not read,
    said; a file stating another base (which llama.cpp's graph does not apply) or grouped K/V heads refused by name."""
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=64, tie_word_embeddings=False,
                    rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = transformers.LlamaForCausalLM(cfg).eval()
    _randomise(model, 67)
    rng = np.random.default_rng(3)
    visual = {f"blk.{i}.{name}.weight": rng.standard_normal(shape).astype(np.float32) for i in range(2)
              for name, shape in (("vis_attn_qkv", (3 * D, D)), ("vis_attn_output", (D, D)), ("vis_gate", (32, D)),
                                  ("vis_up", (32, D)), ("vis_down", (D, 32)))}
    _write_fused_qkv_gguf(tmp_path / "c.gguf", model, "cogvlm", D // H, beside=visual)
    ours, ref = compscope.load(tmp_path / "c.gguf"), compscope.load(model)
    assert ours.meta.family == "llama" and ours.n_kv_heads == H
    assert any("CogVLM's language expert read by the Llama family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert ours.rotary.style == "half"
    _write_fused_qkv_gguf(tmp_path / "b.gguf", model, "cogvlm", D // H, base=500000.0, beside=visual)
    with pytest.raises(compscope.UnsupportedModelError, match=r"'cogvlm\.rope\.freq_base' = 500000: .*base 10000"):
        compscope.load(tmp_path / "b.gguf")
    _write_fused_qkv_gguf(tmp_path / "n.gguf", model, "cogvlm", D // H, base=None, beside=visual)  # (none: 10000)
    assert torch.equal(compscope.load(tmp_path / "n.gguf").rotary.inv_freq, ours.rotary.inv_freq)
    _write_fused_qkv_gguf(tmp_path / "d.gguf", model, "cogvlm", D // H,  # (frequency divisors its graph never reads)
                          beside={**visual, "rope_freqs.weight": np.full(D // H // 2, 2.0, np.float32)})
    with pytest.raises(compscope.UnsupportedModelError, match=r"the tensor 'rope_freqs\.weight': .*base 10000"):
        compscope.load(tmp_path / "d.gguf")
    _write_fused_qkv_gguf(tmp_path / "g.gguf", model, "cogvlm", D // H, kv=G, beside=visual)
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'cogvlm\.attention\.head_count_kv' = {G} for {H}"):
        compscope.load(tmp_path / "g.gguf")


def _write_plamo3(path, n_heads: int, n_kv: int, seed: int, window: int | None, pattern: int | None,
                  local_base: float | None, layers: int = 4, mamba: tuple[int, ...] = (), **more
                  ) -> dict[str, np.ndarray]:
    """A PLaMo 3 GGUF as llama.cpp's converter writes one: a fused ``attn_qkv`` (rows [q | k | v]), per-head
    ``attn_q_norm`` and ``attn_k_norm``, ``post_attention_norm`` and ``post_ffw_norm``, gains as stored (1 + N(0, 0.5²)),
    the rest N(0, 0.5²); rotary base 100, ``window`` / ``pattern`` / ``local_base`` as the sliding keys (None: left
    out); ``more``: further metadata, as :func:`_metadata` takes it. ``mamba``: a PLaMo 2 file instead, these blocks
    Mamba layers (head counts 0, SSM tensors), each query and key head's norm gains its own. The tensors returned by
    their names."""
    r = D // n_heads
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D), "output_norm.weight": (D,)}
    for i in range(layers):
        shapes.update({f"blk.{i}.attn_norm.weight": (D,), f"blk.{i}.post_attention_norm.weight": (D,),
                       f"blk.{i}.ffn_norm.weight": (D,), f"blk.{i}.post_ffw_norm.weight": (D,),
                       f"blk.{i}.ffn_up.weight": (64, D), f"blk.{i}.ffn_down.weight": (D, 32)})
        if i in mamba:
            shapes.update({f"blk.{i}.ssm_in.weight": (64, D), f"blk.{i}.ssm_out.weight": (D, 32)})
            continue
        q_gain, k_gain = ((n_heads, r), (n_kv, r)) if mamba else ((r,), (r,))
        shapes.update({f"blk.{i}.attn_qkv.weight": ((n_heads + 2 * n_kv) * r, D), f"blk.{i}.attn_q_norm.weight": q_gain,
                       f"blk.{i}.attn_k_norm.weight": k_gain, f"blk.{i}.attn_output.weight": (D, n_heads * r)})
    per_layer = lambda n: [0 if i in mamba else n for i in range(layers)] if mamba else n  # noqa: E731
    keys = {**({} if pattern is None else {"attention.sliding_window_pattern": int(pattern)}),
            **({} if local_base is None else {"rope.freq_base_swa": float(local_base)})}
    return _write_random_gguf(path, "plamo2" if mamba else "plamo3", shapes, seed, keys, block_count=layers,
                              head_count=per_layer(n_heads), head_count_kv=per_layer(n_kv), layer_norm_rms_eps=1e-6,
                              rope_freq_base=100.0, rope_dimension_count=r, sliding_window=window, **more)


def _plamo_attention(t: dict, b: str, x: np.ndarray, n_heads: int, n_kv: int, base: float,
                     window: int | None) -> np.ndarray:
    """What the attention of block ``b`` (``blk.N.``) adds to the residual ``x (T, D)``, from a PLaMo file's tensors
    ``t`` as llama.cpp's graph computes it: RMSNorm (eps 1e-6), the fused rows cut [q | k | v], each query and key
    head RMS-normed with its gain (one for all heads, or each head's own row), rotate-half rotary at ``base``, logits
    at d_head^-1/2 over the keys behind the query (within ``window`` of it where given), softmax, attn_output, then
    the RMSNorm post_attention_norm."""
    r, T = D // n_heads, len(x)
    pos, i, j = np.arange(T)[:, None], np.arange(T)[:, None], np.arange(T)[None, :]

    def rms(v, g):
        return v / np.sqrt((v ** 2).mean(-1, keepdims=True) + 1e-6) * g

    def turn(v):  # (T, r): rotate-half pairs (k, k + r/2) by position × base^(-2k/r)
        f = base ** (-np.arange(0, r, 2) / r)
        c, s = np.cos(pos * f), np.sin(pos * f)
        return np.concatenate([v[:, : r // 2] * c - v[:, r // 2 :] * s, v[:, r // 2 :] * c + v[:, : r // 2] * s], -1)

    qkv = rms(x, t[b + "attn_norm.weight"]) @ t[b + "attn_qkv.weight"].T.astype(np.float64)
    q, k, v = np.split(qkv, [n_heads * r, (n_heads + n_kv) * r], axis=-1)
    gq, gk = t[b + "attn_q_norm.weight"], t[b + "attn_k_norm.weight"]
    z = np.empty((T, n_heads * r))
    for h in range(n_heads):
        g = h // (n_heads // n_kv)
        qh = turn(rms(q[:, h * r:(h + 1) * r], gq[h] if gq.ndim == 2 else gq))
        kh = turn(rms(k[:, g * r:(g + 1) * r], gk[g] if gk.ndim == 2 else gk))
        allowed = (j <= i) & ((i - j < window) if window is not None else True)
        logits = np.where(allowed, qh @ kh.T / math.sqrt(r), -np.inf)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        z[:, h * r:(h + 1) * r] = (e / e.sum(-1, keepdims=True)) @ v[:, g * r:(g + 1) * r]
    return rms(z @ t[b + "attn_output.weight"].T, t[b + "post_attention_norm.weight"])


@pytest.mark.parametrize("window, pattern, local_base", [(3, 2, 1000.0), (3, None, None), (None, None, None)])
def test_a_plamo3_gguf_attends_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, window, pattern,
                                                                                    local_base):
    """PLaMo 3 as llama.cpp's converter writes it and its graph runs it: what each layer's attention adds to a random
    residual equals what is computed here from the file's own tensors as that graph does (RMSNorm, the fused rows cut
    [q | k | v], each query and key head RMS-normed with its gain, rotate-half rotary at rope.freq_base on a global
    layer and at rope.freq_base_swa (10000 where none is stated) on a sliding one, layers p − 1, 2p − 1, ... global
    (p 8 where none is stated), keys within the window behind a sliding layer's query, softmax, attn_output, then the
    RMSNorm post_attention_norm), the base of 10000 said where it is llama.cpp's; without a window every layer global.
    With p 8, nine layers: layer 7 alone global."""
    from compscope.core.attention import attention_forward

    H_, G_ = 4, 2
    t = _write_plamo3(tmp_path / "p.gguf", H_, G_, seed=19, window=window, pattern=pattern, local_base=local_base)
    hw = compscope.load(tmp_path / "p.gguf")
    assert hw.meta.family == "plamo3" and hw.n_kv_heads == G_ and hw.attn_out_norm is not None
    assert any("PLaMo 3 read by the plamo3 family" in n for n in hw.meta.notes)
    p = pattern or 8
    sliding = [window is not None and i % p < p - 1 for i in range(4)]
    assert hw.sliding_window == tuple(window if s else None for s in sliding)
    x = np.random.default_rng(23).standard_normal((7, D))
    for layer in range(4):
        base = (local_base or 10000.0) if sliding[layer] else 100.0
        expected = _plamo_attention(t, f"blk.{layer}.", x, H_, G_, base, window if sliding[layer] else None)
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    said = [n for n in hw.meta.notes if "sliding layers turned at llama.cpp's base 10000, the file stating none" in n]
    assert len(said) == (window is not None and local_base is None)
    if window is not None and pattern is None:  # (p 8: with 9 layers, layer 7 alone global)
        _write_plamo3(tmp_path / "n.gguf", H_, G_, seed=19, window=window, pattern=None, local_base=local_base,
                      layers=9)
        nine = compscope.load(tmp_path / "n.gguf")
        assert nine.sliding_window == tuple(None if i == 7 else window for i in range(9))
    r = D // H_
    _write_plamo3(tmp_path / "v.gguf", H_, G_, seed=19, window=window, pattern=pattern, local_base=local_base,
                  value_length=2 * r)
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'plamo3\.attention\.value_length' = {2 * r} beside"):
        compscope.load(tmp_path / "v.gguf")


def test_a_plamo2_gguf_reads_its_attention_layers_as_llama_cpps_graph_computes(tmp_path):
    """PLaMo 2 as llama.cpp's converter writes it (query and K/V head counts per layer, both 0 on a Mamba layer; each
    query and key head's norm gains its own, stacked) and its graph runs it: the attention layers alone (1 and 3 of
    4), each adding to a random residual what is computed here from the file's own tensors (PLaMo 3's attention
    without windows, each head normed with its own gains); head counts that disagree (a Mamba layer with heads, one
    count for every layer, counts short of the layers, two query or K/V counts) refused by name."""
    from compscope.core.attention import attention_forward

    H_, G_ = 4, 2
    t = _write_plamo3(tmp_path / "p.gguf", H_, G_, seed=29, window=None, pattern=None, local_base=None, mamba=(0, 2))
    hw = compscope.load(tmp_path / "p.gguf")
    assert hw.meta.family == "plamo2" and hw.n_layers == 2 and hw.n_kv_heads == G_ and hw.sliding_window == (None,) * 2
    assert any("PLaMo 2 read by the plamo2 family" in n for n in hw.meta.notes)
    assert any("attention on 2 of the model's 4 layers (1, 3" in n for n in hw.meta.notes)
    x = np.random.default_rng(31).standard_normal((6, D))
    for layer, block in enumerate((1, 3)):
        expected = _plamo_attention(t, f"blk.{block}.", x, H_, G_, 100.0, None)
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    for heads, kv, layers in (([0, H_], [G_, G_], 2), (H_, [0, G_, 0, G_], 4), ([0, H_, 0, H_], G_, 4),
                              ([0, H_, 0, H_], [0, G_, 0], 4), ([0, H_, 0, 2 * H_], [0, G_, 0, G_], 4),
                              ([0, H_, 0, H_], [0, G_, 0, 2 * G_], 4)):  # (a Mamba layer with heads; counts short;
        # two query or K/V counts: refused)
        w = _writer(tmp_path / "bad.gguf", "plamo2")
        _metadata(w, block_count=layers, head_count=heads, head_count_kv=kv, layer_norm_rms_eps=1e-6)
        w.add_tensor("token_embd.weight", np.zeros((V, D), np.float32))
        _finish(w)
        said = re.escape(f"'plamo2.attention.head_count' = {heads if isinstance(heads, list) else [heads] * layers}")
        with pytest.raises(compscope.UnsupportedModelError, match=said):
            compscope.load(tmp_path / "bad.gguf")


def _write_grok(path, seed: int, scalars: dict[str, float], layers: int = 2, **more) -> dict[str, np.ndarray]:
    """A Grok-1 GGUF as llama.cpp's converter writes one: Llama's tensor names (q, k, v apart, rows as HF's),
    ``attn_output_norm`` and ``layer_output_norm`` beside, an expert router (its experts left out), each of ``scalars``
    as ``grok.KEY`` (float32), rotary base 100; every tensor N(0, 0.5²) (norm gains 1 + that). ``more``: further
    metadata, as :func:`_metadata` takes it. The tensors returned by their names."""
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D), "output_norm.weight": (D,)}
    for i in range(layers):
        shapes.update({f"blk.{i}.attn_norm.weight": (D,), f"blk.{i}.attn_q.weight": (H * (D // H), D),
                       f"blk.{i}.attn_k.weight": (G * (D // H), D), f"blk.{i}.attn_v.weight": (G * (D // H), D),
                       f"blk.{i}.attn_output.weight": (D, H * (D // H)), f"blk.{i}.attn_output_norm.weight": (D,),
                       f"blk.{i}.ffn_norm.weight": (D,), f"blk.{i}.layer_output_norm.weight": (D,),
                       f"blk.{i}.ffn_gate_inp.weight": (4, D)})
    return _write_random_gguf(path, "grok", shapes, seed, {k: float(v) for k, v in scalars.items()},
                              block_count=layers, head_count=H, head_count_kv=G, layer_norm_rms_eps=1e-6,
                              rope_freq_base=100.0, **more)


@pytest.mark.parametrize("scalars", [{"attn_logit_softcapping": 5.0, "attention.output_scale": 0.3,
                                      "embedding_scale": 2.5, "logit_scale": 0.5}, {}])
def test_a_grok_gguf_attends_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, scalars):
    """Grok-1 as llama.cpp's converter writes it and its graph runs it: what each layer's attention adds to a random
    residual equals what is computed here from the file's own tensors as that graph does (RMSNorm, q, k, v,
    rotate-half rotary at the file's base, logits c tanh(s q·k / c), causal softmax, attn_output, then the RMSNorm
    attn_output_norm), W_E and W_U the file's token_embd and output times the embedding and logit scales; with none
    stated, llama.cpp's Grok-1 values (said). A file with an attention temperature (Grok-2's) refused."""
    from compscope.core.attention import attention_forward

    t = _write_grok(tmp_path / "g.gguf", 37, scalars)
    hw = compscope.load(tmp_path / "g.gguf")
    c = scalars.get("attn_logit_softcapping", 30.0)
    s = scalars.get("attention.output_scale", 0.08838834764831845)
    e = scalars.get("embedding_scale", 78.38367176906169)
    u = scalars.get("logit_scale", 0.5773502691896257)
    assert hw.meta.family == "grok" and hw.attn_softcap == pytest.approx(c) and hw.scale == pytest.approx(s)
    assert any("Grok-1 read by the grok family" in n for n in hw.meta.notes)
    assert any("llama.cpp's values where the file states none" in n for n in hw.meta.notes) == (not scalars)
    np.testing.assert_allclose(hw.W_E.T.numpy(), t["token_embd.weight"] * np.float32(e), rtol=1e-6)
    np.testing.assert_allclose(hw.W_U.numpy(), t["output.weight"] * np.float32(u), rtol=1e-6)
    T, eps, r = 6, 1e-6, D // H
    x = np.random.default_rng(41).standard_normal((T, D))
    pos, i, j = np.arange(T)[:, None], np.arange(T)[:, None], np.arange(T)[None, :]

    def rms(v, g):
        return v / np.sqrt((v ** 2).mean(-1, keepdims=True) + eps) * g

    def turn(v):  # (T, r): rotate-half pairs at base 100
        f = 100.0 ** (-np.arange(0, r, 2) / r)
        cs, sn = np.cos(pos * f), np.sin(pos * f)
        a, b = v[:, : r // 2], v[:, r // 2 :]
        return np.concatenate([a * cs - b * sn, b * cs + a * sn], -1)

    for layer in range(2):
        b = f"blk.{layer}."
        xn = rms(x, t[b + "attn_norm.weight"])
        q, k, v = (xn @ t[b + f"attn_{n}.weight"].T.astype(np.float64) for n in "qkv")
        z = np.empty((T, H * r))
        for h in range(H):
            g = h // (H // G)
            logits = c * np.tanh(s * turn(q[:, h * r:(h + 1) * r]) @ turn(k[:, g * r:(g + 1) * r]).T / c)
            logits = np.where(j <= i, logits, -np.inf)
            ex = np.exp(logits - logits.max(-1, keepdims=True))
            z[:, h * r:(h + 1) * r] = (ex / ex.sum(-1, keepdims=True)) @ v[:, g * r:(g + 1) * r]
        expected = rms(z @ t[b + "attn_output.weight"].T, t[b + "attn_output_norm.weight"])
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    w = _writer(tmp_path / "t.gguf", "grok")
    _metadata(w, layer_norm_rms_eps=1e-6)
    w.add_uint32("grok.attention.temperature_length", 1024)
    w.add_tensor("token_embd.weight", np.zeros((V, D), np.float32))
    _finish(w)
    with pytest.raises(compscope.UnsupportedModelError, match=r"a grok file with an attention temperature"):
        compscope.load(tmp_path / "t.gguf")


def _write_talkie(path, n_heads: int, n_kv: int, seed: int, logit_scale: float | None = 1.7) -> dict[str, np.ndarray]:
    """A Talkie GGUF as llama.cpp's converter writes one: Llama's names (q, k, v apart, rows as written), no norm
    gains but one per query head (``attn_q_norm``, ``(heads, 1)``), a scalar ``attn_output.scale`` and
    ``ffn_down.scale`` per layer, the norms' epsilon float32's, ``logit_scale`` (None: left out); every tensor
    N(0, 0.5²) from one seeded generator (the query gains 1 + that). The tensors returned by their names."""
    r = D // n_heads
    shapes = {"token_embd.weight": (V, D), "output.weight": (V, D)}
    for i in range(2):
        b = f"blk.{i}."
        shapes.update({b + "attn_q.weight": (n_heads * r, D), b + "attn_k.weight": (n_kv * r, D),
                       b + "attn_v.weight": (n_kv * r, D), b + "attn_output.weight": (D, n_heads * r),
                       b + "attn_output.scale": (1,), b + "attn_q_norm.weight": (n_heads, 1),
                       b + "ffn_gate.weight": (32, D), b + "ffn_up.weight": (32, D), b + "ffn_down.weight": (D, 32),
                       b + "ffn_down.scale": (1,)})
    keys = {} if logit_scale is None else {"logit_scale": logit_scale}
    return _write_random_gguf(path, "talkie", shapes, seed, keys, head_count=n_heads, head_count_kv=n_kv,
                              layer_norm_rms_eps=float(np.finfo(np.float32).eps), rope_freq_base=500.0)


@pytest.mark.parametrize("n_heads, n_kv", [(4, 2), (4, 4)])
def test_a_talkie_gguf_attends_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, n_heads, n_kv):
    """Talkie as llama.cpp's converter writes it and its graph runs it: what each layer's attention adds to a random
    residual equals what is computed here from the file's own tensors (RMSNorm without a gain, q, k, v, rotate-half
    rotary at the file's base, then each query head RMS-normalised times its one gain and each key head without one,
    causal logits at d_head^-1/2, softmax, attn_output times the layer's scale); W_E each token's embedding
    RMS-normalised (the graph's first step), W_U the output head times logit_scale; read by the talkie family,
    weights only. A file without logit_scale (which llama.cpp requires) refused by the key."""
    from compscope.core.attention import attention_forward

    t = _write_talkie(tmp_path / "t.gguf", n_heads, n_kv, seed=13)
    hw = compscope.load(tmp_path / "t.gguf")
    assert hw.meta.family == "talkie" and hw.causal and hw.n_kv_heads == n_kv and hw.attn_norm.weight is None
    assert any("Talkie read by the talkie family" in n for n in hw.meta.notes)
    assert any("every layer also adds the normalised embedding" in n for n in hw.meta.notes)
    eps, r, T = float(np.finfo(np.float32).eps), D // n_heads, 8
    e = t["token_embd.weight"].astype(np.float64)
    np.testing.assert_allclose(hw.W_E.T.double().numpy(), e / np.sqrt((e ** 2).mean(-1, keepdims=True) + eps),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hw.W_U.double().numpy(), 1.7 * t["output.weight"], rtol=1e-6, atol=1e-6)

    def rms(u):
        return u / np.sqrt((u ** 2).mean(-1, keepdims=True) + eps)

    pos, i, j = np.arange(T)[:, None], np.arange(T)[:, None], np.arange(T)[None, :]
    f = 500.0 ** (-np.arange(0, r, 2) / r)
    c, s_ = np.cos(pos * f), np.sin(pos * f)

    def turn(u):  # rotate-half pairs (k, k + r/2)
        return np.concatenate([u[:, : r // 2] * c - u[:, r // 2:] * s_, u[:, r // 2:] * c + u[:, : r // 2] * s_], -1)

    x = np.random.default_rng(17).standard_normal((T, D))
    for layer in range(2):
        b = f"blk.{layer}."
        q, k, v = (rms(x) @ t[b + f"attn_{p}.weight"].T.astype(np.float64) for p in "qkv")
        z = np.empty((T, n_heads * r))
        for h in range(n_heads):
            g = h // (n_heads // n_kv)
            qh = rms(turn(q[:, h * r:(h + 1) * r])) * t[b + "attn_q_norm.weight"][h, 0]
            kh = rms(turn(k[:, g * r:(g + 1) * r]))
            logits = np.where(j <= i, qh @ kh.T / math.sqrt(r), -np.inf)
            w = np.exp(logits - logits.max(-1, keepdims=True))
            z[:, h * r:(h + 1) * r] = (w / w.sum(-1, keepdims=True)) @ v[:, g * r:(g + 1) * r]
        expected = (z @ t[b + "attn_output.weight"].T) * t[b + "attn_output.scale"][0]
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    _write_talkie(tmp_path / "n.gguf", n_heads, n_kv, seed=13, logit_scale=None)
    with pytest.raises(compscope.UnsupportedModelError, match=r"n\.gguf: GGUF metadata 'talkie\.logit_scale' is "
                                                              "missing"):
        compscope.load(tmp_path / "n.gguf")


@pytest.mark.parametrize("endian", ["little", "big"])
def test_the_plain_array_reader_reads_arrays_in_its_own_pass(tmp_path, monkeypatch, endian):
    """Arrays of scalars and of strings are read by the one pass itself, not handed back to gguf-py's parse (which
    gives the same parts, so the tests of equal parts cannot tell): a length misread would fall back unseen."""
    from compscope.data.gguf_reading import plain_reader

    order = gguf.GGUFEndian.LITTLE if endian == "little" else gguf.GGUFEndian.BIG
    w = gguf.GGUFWriter(str(tmp_path / "a.gguf"), "llama", endianess=order)
    w.add_array("t.ints", [1, -2, 3]), w.add_array("t.strs", ["", "a", "bc" * 50]), w.add_array("t.floats", [0.5, 2.0])
    w.add_uint32("t.u32", 5)
    _finish(w)
    handed = []
    stock = gguf.GGUFReader._get_field_parts

    def field_parts(self, orig_offs, raw_type):  # (the parameter names plain_reader checks)
        handed.append(int(raw_type))
        return stock(self, orig_offs, raw_type)

    monkeypatch.setattr(gguf.GGUFReader, "_get_field_parts", field_parts)
    plain = plain_reader(gguf.GGUFReader)(tmp_path / "a.gguf")
    assert int(gguf.GGUFValueType.ARRAY) not in handed and int(gguf.GGUFValueType.UINT32) in handed
    assert [int(v) for v in plain.fields["t.ints"].contents()] == [1, -2, 3]
    assert plain.fields["t.strs"].contents() == ["", "a", "bc" * 50]
