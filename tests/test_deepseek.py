"""DeepSeek-V2's and V3's multi-head latent attention: the latent norms' scale against its closed form, the canonical
form's checks of the latent fields, a folder as DeepSeek-V3's makers save it (its multi-token-prediction layer
included) read and run, each head recomputed from compscope's weights by an independent float64 implementation of
the released equations, the native format round trip, and malformed settings refused by name. The family-wide suites
(hooks, processing, runner, interventions by brute force, symmetries) run the tiny variants ``deepseek-v3-*`` and
``deepseek-v2-*`` of ``hf_tiny``."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

import compscope
from compscope.core.heads import LatentNorm

ATOL = 2e-5


def _runs_exactly(folder, hw, seq: int = 12):
    """The data runner of the model in ``folder``, checked: every layer's output recomputed from ``hw`` equals what the
    model's attention adds on ``seq`` random tokens (``ATOL``)."""
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import random_ids

    runner = runner_for(folder, progress=False, device="cpu")
    trace = runner.trace(random_ids(seq=seq))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    return runner


def test_the_latent_scale_is_the_rms_norms_closed_form():
    """``c = W x + b = [3 + 1, 8 - 2] = [4, 6]``: ``s = (mean c² + eps)^(-1/2) = (26 + eps)^(-1/2)``."""
    W = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    lat = LatentNorm(W, torch.tensor([[1.0, -2.0]]), 1e-6)
    s = lat.scale(0, torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
    torch.testing.assert_close(s, torch.tensor([(26 + 1e-6) ** -0.5, (2.5 + 1e-6) ** -0.5]))


def test_the_canonical_form_refuses_latents_of_the_wrong_shape():
    from hf_tiny import BY_ID, build

    hw = compscope.load(build(BY_ID["deepseek-v3-latent-attention"]))
    lat = hw.kv_latent
    with pytest.raises(compscope.WeightError, match=r"kv_latent.W has shape \(2, 10, 31\), expected \(2, rank, 32\)"):
        hw.replace(kv_latent=dataclasses.replace(lat, W=lat.W[..., :31]))
    with pytest.raises(compscope.WeightError, match=r"q_latent.b has shape \(2, 11\), expected \(2, 12\)"):
        hw.replace(q_latent=dataclasses.replace(hw.q_latent, b=torch.zeros(2, 11)))
    with pytest.raises(compscope.WeightError, match="kv_latent.eps 0.0: expected a finite number > 0"):
        hw.replace(kv_latent=dataclasses.replace(lat, eps=0.0))
    with pytest.raises(compscope.WeightError, match="kv_latent_from 11: expected a key dim from 0 to d_head"):
        hw.replace(kv_latent_from=11)
    bad = lat.W.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(compscope.WeightError,
                       match=r"kv_latent.W has 1 NaN/Inf values \(the first at index \(1, 2, 3\)\)"):
        hw.replace(kv_latent=dataclasses.replace(lat, W=bad))


def _released(tmp_path, **overrides):
    """A DeepSeek-V3 folder as released: transformers' save plus the multi-token-prediction layer's tensors, which
    transformers does not build (model.layers.{num_hidden_layers}.*)."""
    from safetensors.torch import load_file, save_file

    from hf_tiny import BY_ID, build

    model = build(BY_ID["deepseek-v3-latent-attention"], **overrides)
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    L = model.config.num_hidden_layers
    for name in [k for k in tensors if k.startswith("model.layers.1.")]:
        tensors[name.replace("model.layers.1.", f"model.layers.{L}.")] = tensors[name].clone() + 1
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    return model


def _heads_by_hand(model, layer: int, x: torch.Tensor) -> torch.Tensor:
    """What layer ``layer``'s attention adds for the normed inputs ``x (batch, seq, d)``, in float64, from the modules'
    weights by the released equations (interleaved rotary on the rope dims, latents RMS-normed, causal softmax)."""
    cfg, a = model.config, model.model.layers[layer].self_attn
    H, nope, rope, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    f = lambda m: m.weight.detach().double()  # noqa: E731
    x = x.double()
    b, n, _ = x.shape

    def rms(c, g):
        return g * c / torch.sqrt(c.pow(2).mean(-1, keepdim=True) + 1e-6)

    q = (rms(x @ f(a.q_a_proj).T, f(a.q_a_layernorm)) @ f(a.q_b_proj).T).view(b, n, H, nope + rope)
    ckv = x @ f(a.kv_a_proj_with_mqa).T
    kv = (rms(ckv[..., :cfg.kv_lora_rank], f(a.kv_a_layernorm)) @ f(a.kv_b_proj).T).view(b, n, H, nope + dv)
    k_rope = ckv[..., cfg.kv_lora_rank:]
    params = getattr(cfg, "rope_parameters", None)  # (transformers 4.57: rope_theta)
    theta = params["rope_theta"] if params else cfg.rope_theta
    freq = theta ** (-torch.arange(0, rope, 2, dtype=torch.float64) / rope)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * freq  # (seq, rope / 2)

    def turn(t):  # pairs (2i, 2i + 1) by position * freq_i
        e, o = t[..., 0::2], t[..., 1::2]
        c, s = ang.cos(), ang.sin()
        if t.ndim == 4:
            c, s = c[:, None], s[:, None]
        return torch.stack([e * c - o * s, o * c + e * s], -1).flatten(-2)

    qr, kr = turn(q[..., nope:]), turn(k_rope)[:, :, None].expand(b, n, H, rope)
    logits = (torch.einsum("bihr,bjhr->bhij", q[..., :nope], kv[..., :nope])
              + torch.einsum("bihr,bjhr->bhij", qr, kr)) / math.sqrt(nope + rope)
    logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    z = torch.einsum("bhij,bjhr->bihr", logits.softmax(-1), kv[..., nope:]).reshape(b, n, H * dv)
    return z @ f(a.o_proj).T


def test_a_released_deepseek_v3_folder_is_read_and_run(tmp_path):
    from compscope.core.attention import attention_forward
    from compscope.core.card import card_rows
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import random_ids

    model = _released(tmp_path, num_hidden_layers=3)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "deepseek_v3" and hw.n_layers == 3 and hw.n_kv_heads == hw.n_heads == 4
    assert hw.q_latent.W.shape == (3, 12, 32) and hw.kv_latent.W.shape == (3, 10, 32) and hw.kv_latent_from == 4
    assert hw.d_head == 10 and hw.rotary.dim == 4 and hw.rotary.style == "interleaved"
    assert any("multi-head latent attention" in n for n in hw.meta.notes)
    rows = dict(card_rows(hw))
    assert rows["latent attention"] == ("queries scaled per token by an RMSNorm on a rank-12 latent; values and keys "
                                        "(from key dim 4) by one on a rank-10 latent")
    runner = runner_for(tmp_path, progress=False, device="cpu")
    trace = runner.trace(random_ids(seq=12))
    for layer in range(3):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
        x = hw.attn_norm.apply(trace.resid[layer], layer)
        want = _heads_by_hand(runner.model, layer, x)
        torch.testing.assert_close(attention_forward(hw, layer, trace.resid[layer]).double(), want, atol=ATOL, rtol=0)
    assert torch.equal(hw.W_E, model.model.embed_tokens.weight.detach().T)


def test_the_native_format_keeps_the_latents(tmp_path):
    from compscope.loading.formats import native
    from hf_tiny import BY_ID, build
    from test_native_format import assert_identical

    for vid in ("deepseek-v3-latent-attention", "deepseek-v3-no-query-latent-yarn-bias"):
        hw = compscope.load(build(BY_ID[vid]))
        native.save(hw, tmp_path / vid)
        back = compscope.load(tmp_path / vid)
        assert_identical(hw, back)
    assert back.q_latent is None and back.kv_latent.b is not None  # (no query latent; biases on the kv latent)


@pytest.mark.parametrize("key, value, needle", [
    ("num_key_value_heads", 2, "'num_key_value_heads' = 2: multi-head latent attention gives each of the 4 heads"),
    ("qk_head_dim", 12, "'qk_head_dim' = 12 disagrees with the head's qk_nope_head_dim \\+ qk_rope_head_dim = 10"),
    ("qk_rope_head_dim", 3, "qk_rope_head_dim = 3: rotated dims come in pairs"),
    ("kv_lora_rank", 9,
     r"'model.layers.0.self_attn.kv_a_proj_with_mqa.weight' has shape \(14, 32\), expected \(13, 32\)"),
])
def test_settings_the_weights_do_not_hold_are_refused_by_name(tmp_path, key, value, needle):
    _released(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config[key] = value
    if key == "qk_rope_head_dim":  # (and the keys transformers derives from it)
        config.update(head_dim=value, qk_head_dim=config["qk_nope_head_dim"] + value)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.CompscopeError, match=needle):
        compscope.load(tmp_path)


def test_a_kimi_k2_5_folder_is_read_and_run_as_its_language_model(tmp_path):
    """Kimi K2.5 (vision tower and all): its language model is DeepSeek-V3's, under the released names
    (``language_model.model.layers``), read through its text_config and run on text."""
    from safetensors.torch import load_file, save_file

    from hf_tiny import BY_ID, perturbed

    transformers = pytest.importorskip("transformers")
    if "kimi_k25" not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no Kimi K2.5")
    vision = dict(patch_size=14, pos_emb_height=4, pos_emb_width=4, pos_emb_time=2, num_attention_heads=2,
                  num_hidden_layers=1, hidden_size=16, intermediate_size=32)
    text = dict(BY_ID["deepseek-v3-latent-attention"].config)
    config = transformers.AutoConfig.for_model("kimi_k25", text_config=text, vision_config=vision,
                                               projection_hidden_size=32)
    model = perturbed(lambda: transformers.AutoModelForImageTextToText.from_config(config), seed=1, scale=0.2)
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")  # (transformers 5 writes the layers as 'blocks': as released)
    tensors = {k.replace("language_model.model.blocks.", "language_model.model.layers."): v for k, v in tensors.items()}
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hw = compscope.load(tmp_path)
    lm = model.model.language_model
    assert hw.meta.family == "deepseek_v3" and hw.n_layers == 2
    assert "the language model of a kimi_k25" in hw.meta.notes[0]
    assert torch.equal(hw.kv_latent.W[1], lm.layers[1].self_attn.kv_a_proj_with_mqa.weight.detach()[:10])
    _runs_exactly(tmp_path, hw)


def test_minicpm3_folds_its_mup_scalars_where_they_act(tmp_path):
    """MiniCPM3 (scale_emb 3, scale_depth 1.4 over 2 layers, dim_model_base 8 of hidden_size 32): W_E is the table
    times 3, W_O the output projection times 1.4 / √2, W_U the tied head divided by 32 / 8 = 4; a config whose
    scale_depth is null (transformers: √layers, no scaling) leaves W_O as it is."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID["minicpm3-latent-attention-mup"])
    hw = compscope.load(model)
    emb = model.model.embed_tokens.weight.detach()
    assert hw.meta.family == "minicpm3" and hw.rotary.style == "half"
    torch.testing.assert_close(hw.W_E, emb.T * 3.0, atol=0, rtol=1e-6)
    torch.testing.assert_close(hw.W_U, emb / 4.0, atol=0, rtol=1e-6)
    o = model.model.layers[1].self_attn.o_proj.weight.detach()  # (d, heads * 8): head 2's columns, padded to 10
    torch.testing.assert_close(hw.W_O[1, 2, :, :8], o[:, 16:24] * 1.4 / math.sqrt(2), atol=0, rtol=1e-6)
    assert not hw.W_O[1, 2, :, 8:].any()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["scale_depth"] = None
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.testing.assert_close(compscope.load(tmp_path).W_O[1, 2, :, :8], o[:, 16:24], atol=0, rtol=0)


def test_a_mistral_4_folder_is_read_and_run_within_its_original_context(tmp_path):
    """Mistral 4's language model alone (no auto class maps it: the runner builds Mistral4ForCausalLM): head_dim the
    whole query head, the rotated share partial_rotary_factor; Llama 4's query temperature is 1 within the original
    context (16 here), what is read, and the runner takes no longer sequence."""
    from hf_tiny import BY_ID, build, random_ids

    build(BY_ID["mistral4-latent-attention-temperature"]).save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "mistral4" and hw.rotary.dim == 4 and hw.kv_latent_from == 4
    assert any("Llama 4's temperature" in n and "first 16 positions" in n for n in hw.meta.notes)
    runner = _runs_exactly(tmp_path, hw, seq=16)
    assert type(runner.model).__name__ == "Mistral4ForCausalLM" and runner.n_ctx == 16
    with pytest.raises(compscope.OptionError, match="sequences of 17 tokens are longer than .* takes \\(16\\)"):
        runner.trace(random_ids(seq=17))


def _sarvam_first_format(folder, target, **more):
    """``folder``'s Sarvam-105B model saved again in ``target`` with the config in its first format (for its own code):
    ``q_head_dim``, ``head_dim`` as ``kv_lora_rank + qk_rope_head_dim``, YaRN as ``rope_scaling`` of type
    ``deepseek_yarn`` beside a top-level ``rope_theta``, the experts' other names."""
    import shutil

    shutil.copytree(folder, target)
    config = json.loads((folder / "config.json").read_text())
    rope = config.pop("rope_parameters")
    config.pop("qk_head_dim")
    config.update(rope_theta=rope.pop("rope_theta"), rope_scaling={**rope, "type": "deepseek_yarn"},
                  q_head_dim=config["qk_nope_head_dim"] + config["qk_rope_head_dim"],
                  head_dim=config["kv_lora_rank"] + config["qk_rope_head_dim"],
                  num_experts=config.pop("n_routed_experts"), num_shared_experts=config.pop("n_shared_experts"))
    del config["rope_scaling"]["rope_type"]
    config.update(more)
    (target / "config.json").write_text(json.dumps(config))


def test_a_sarvam_105b_folder_is_read_in_either_config_format_as_transformers_runs_it(tmp_path):
    """Sarvam-105B (``sarvam_mla``, built as DeepSeek-V3): its folder as transformers saves it, and the same weights with
    the config in its first format, read to the same heads, each equal to what the model transformers loads from that
    folder adds (so the translation is transformers' own); no query latent where the config names no q_lora_rank."""
    from hf_tiny import BY_ID, build

    build(BY_ID["sarvam-mla-latent-attention-yarn"]).save_pretrained(tmp_path / "saved")
    _sarvam_first_format(tmp_path / "saved", tmp_path / "first")
    assert json.loads((tmp_path / "first" / "config.json").read_text()).get("q_lora_rank") is None
    saved, first = compscope.load(tmp_path / "saved"), compscope.load(tmp_path / "first")
    assert saved.meta.family == first.meta.family == "sarvam_mla" and first.q_latent is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(saved, name), getattr(first, name)), name
    assert torch.equal(saved.rotary.inv_freq, first.rotary.inv_freq) and saved.attn_scale == first.attn_scale
    assert saved.attn_scale != 10 ** -0.5  # (YaRN's mscale(4, 0.6)² on the logits)
    assert any("'deepseek_yarn' read as YaRN" in n for n in first.meta.notes)
    assert any("head_dim = 14 (the first format's" in n for n in first.meta.notes)
    assert not any("deepseek_yarn" in n or "head_dim = " in n for n in saved.meta.notes)
    for folder, hw in ((tmp_path / "saved", saved), (tmp_path / "first", first)):
        runner = _runs_exactly(folder, hw)
        assert type(runner.model).__name__ == "DeepseekV3ForCausalLM"


def test_a_sarvam_105b_first_format_config_that_disagrees_with_its_heads_is_refused(tmp_path):
    from hf_tiny import BY_ID, build

    build(BY_ID["sarvam-mla-latent-attention-yarn"]).save_pretrained(tmp_path / "saved")
    _sarvam_first_format(tmp_path / "saved", tmp_path / "first", q_head_dim=12)
    with pytest.raises(compscope.CompscopeError,
                       match="'q_head_dim' = 12 disagrees with the head's qk_nope_head_dim \\+ qk_rope_head_dim = 10"):
        compscope.load(tmp_path / "first")


def test_deepseek_v3_2_is_read_as_dense_attention_where_its_indexer_keeps_every_key():
    """DeepSeek-V3.2 with index_topk 6: on 6 tokens the indexer selects every key and the model's attention is the
    dense one compscope reads; on 10 it drops keys and the two differ, so the runner takes at most 6 tokens."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, capture, random_ids

    model = build(BY_ID["deepseek-v32-indexer-within-topk"], index_topk=6)
    hw = compscope.load(model)
    assert hw.meta.family == "deepseek_v32" and any("6 keys its indexer scores best" in n for n in hw.meta.notes)
    for seq, same in ((6, True), (10, False)):
        cap = capture(model, "llama", random_ids(seq=seq))
        gap = max(float((attention_forward(hw, layer, cap.resid[layer]) - cap.attn_out[layer]).abs().max())
                  for layer in range(hw.n_layers))
        assert (gap < ATOL) == same, (seq, gap)
    assert runner_for(model, hw, progress=False).n_ctx == 6


def test_a_ling_3_folder_is_read_and_run_as_its_latent_attention_layers(tmp_path):
    """Ling 3 as saved (its files' names: word_embeddings, attention, attention.dense): the latent attention layers
    alone (1 and 3 of 4), each head's gate g_proj's row on each of its dims, run on text with the linear-attention
    layers between them; layer_types that name another kind refused by name."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID["ling3-latent-attention-gated-hybrid"])
    model.save_pretrained(tmp_path)
    from safetensors import safe_open
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert "model.layers.1.attention.dense.weight" in set(f.keys())  # (the released names)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "bailing_hybrid" and hw.n_layers == 2 and hw.q_latent is None
    assert any("attention on 2 of the model's 4 layers (1, 3" in n for n in hw.meta.notes)
    g = model.model.layers[3].self_attn.g_proj.weight.detach()  # (heads, d_model)
    assert all(torch.equal(hw.W_G[1, h, i], g[h]) for h in range(4) for i in range(hw.d_head))
    _runs_exactly(tmp_path, hw)
    config = json.loads((tmp_path / "config.json").read_text())
    config["layer_types"] = ["linear_attention", "full_attention", "sliding_attention", "full_attention"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match="'layer_types' = .*expected one of 'full_attention' or "
                                                              "'linear_attention' for each of the 4 layers"):
        compscope.load(tmp_path)


def test_a_longcat_flash_folder_is_read_and_run_as_two_attention_sublayers_per_layer(tmp_path):
    """LongCat-Flash: compscope's layer 2i + j is layer i's sublayer j (self_attn[j] after input_layernorm[j]); the
    LoRA scales sqrt(d / rank) on the normed latents are in W_Q (all its rows), W_K's unrotated rows and W_V, not in
    the shared rotated rows; run on text with the MLPs and the shortcut mixture of experts between them, exactly; a
    config that turns a LoRA scale off (transformers applies it whatever it says) refused by name."""
    from hf_tiny import BY_ID, build

    if not hasattr(__import__("transformers"), "LongcatFlashConfig"):
        pytest.skip("this transformers has no LongCat-Flash")
    model = build(BY_ID["longcat-flash-two-sublayers-lora-scaled"])
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "longcat_flash" and hw.n_layers == 4 and hw.rotary.style == "interleaved"
    att = model.model.layers[1].self_attn[0]  # (compscope's layer 2)
    s_q, s_kv = (32 / 12) ** 0.5, (32 / 10) ** 0.5  # (d_model 32, ranks 12 and 10)
    U = att.q_b_proj.weight.detach().double().view(4, 10, 12) * att.q_a_layernorm.weight.detach().double() * s_q
    Wq = U @ att.q_a_proj.weight.detach().double()  # (heads, [nope 6 | rope 4], d): compscope's rows rope first
    torch.testing.assert_close(hw.W_Q[2].double(), torch.cat([Wq[:, 6:], Wq[:, :6]], 1), atol=1e-6, rtol=0)
    kv_a = att.kv_a_proj_with_mqa.weight.detach()
    assert all(torch.equal(hw.W_K[2, h, :4], kv_a[10:]) for h in range(4))  # (the shared rotated rows: unscaled)
    up = att.kv_b_proj.weight.detach().double().view(4, 14, 10) * att.kv_a_layernorm.weight.detach().double() * s_kv
    torch.testing.assert_close(hw.W_V[2, :, :8].double(), up[:, 6:] @ kv_a[:10].double(), atol=1e-6, rtol=0)
    assert torch.equal(hw.attn_norm.weight[3], model.model.layers[1].input_layernorm[1].weight.detach())
    _runs_exactly(tmp_path, hw)
    config = json.loads((tmp_path / "config.json").read_text())
    config["mla_scale_kv_lora"] = False
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match="mla_scale_kv_lora=False"):
        compscope.load(tmp_path)


def test_a_kimi_linear_folder_is_read_and_run_as_its_latent_attention_layers_without_positions(tmp_path):
    """Kimi Linear: its latent attention layers alone (1 and 3 of 4), NoPE (the dims every head's key shares not
    rotated: no rotary, no positions), run on text with the Kimi Delta Attention layers between them, exactly; its
    released config's layer list (linear_attn_config, numbered from 1) read as transformers reads it; a list that
    misses a layer, or a config that says its latent attention turns dims (mla_use_nope false), refused by name."""
    from hf_tiny import BY_ID, build

    if not hasattr(__import__("transformers"), "KimiLinearConfig"):
        pytest.skip("this transformers has no Kimi Linear")
    model = build(BY_ID["kimi-linear-nope-latent-hybrid"])
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "kimi_linear" and hw.n_layers == 2 and hw.rotary is None and hw.positions == "none"
    assert hw.kv_latent_from == 4 and hw.q_latent is not None and hw.attn_scale == 0.0  # (d_head^(-1/2), 10)
    assert any("attention on 2 of the model's 4 layers (1, 3" in n for n in hw.meta.notes)
    k_shared = model.model.layers[1].self_attn.kv_a_proj_with_mqa.weight.detach()[10:]  # (its rope rows, unturned)
    assert all(torch.equal(hw.W_K[0, h, :4], k_shared) for h in range(4))
    _runs_exactly(tmp_path, hw)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["layer_types"]
    config["linear_attn_config"] = {"full_attn_layers": [2, 4], "kda_layers": [1, 3], "head_dim": 8, "num_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert torch.equal(compscope.load(tmp_path).W_Q, hw.W_Q)
    config["linear_attn_config"]["kda_layers"] = [1]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match=r"full_attn_layers = \[2, 4\] and kda_layers = \[1\]: "
                                                              "expected each of the 4 layers, numbered from 1"):
        compscope.load(tmp_path)
    config["linear_attn_config"]["kda_layers"], config["mla_use_nope"] = [1, 3], False
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match="mla_use_nope=False"):
        compscope.load(tmp_path)


def test_glm_5_is_read_as_deepseek_v3_2_and_layers_sharing_keys_are_refused(tmp_path):
    """GLM-5: V3.2's reading (dense within index_topk, the runner kept there); a config whose indexer_types has a layer
    reuse another's choice of keys is refused by name."""
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build

    model = build(BY_ID["glm5-dsa-indexer-within-topk"])
    hw = compscope.load(model)
    assert hw.meta.family == "glm_moe_dsa" and any("16 keys its indexer scores best" in n for n in hw.meta.notes)
    assert runner_for(model, hw, progress=False).n_ctx == 16
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["indexer_types"] = ["full", "shared"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match=r"'indexer_types' = \['full', 'shared'\]: layers that "
                                                              "reuse another layer's choice of keys"):
        compscope.load(tmp_path)


def test_deepseek_v3_2_layers_of_another_kind_are_refused_by_name(tmp_path):
    """Layers of indexed attention read under either name transformers has given them ('indexed_attention', and
    'deepseek_sparse_attention' in configs transformers 5.17 saves), the same weights; another kind refused."""
    from hf_tiny import BY_ID, build

    build(BY_ID["deepseek-v32-indexer-within-topk"]).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    read = {}
    for name in ("indexed_attention", "deepseek_sparse_attention"):
        (tmp_path / "config.json").write_text(json.dumps({**config, "layer_types": [name, name]}))
        read[name] = compscope.load(tmp_path)
    for tensor in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(read["indexed_attention"], tensor), getattr(read["deepseek_sparse_attention"],
                                                                                 tensor)), tensor
    config["layer_types"] = ["deepseek_sparse_attention", "sliding_attention"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match=r"'layer_types' = \['deepseek_sparse_attention', "
                                                              r"'sliding_attention'\]: compscope reads DeepSeek"):
        compscope.load(tmp_path)
    config["layer_types"] = ["indexed_attention", "full_attention"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match=r"'layer_types' = \['indexed_attention', "
                                                              r"'full_attention'\]: compscope reads DeepSeek-V3.2's"):
        compscope.load(tmp_path)
