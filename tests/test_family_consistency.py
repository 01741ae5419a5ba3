"""Every family, against HuggingFace's own implementation.

For tiny random models of each supported variant (``hf_tiny.VARIANTS``: GPT-2, GPT-NeoX with
partial rotary and parallel residual, Llama MHA/MQA/GQA with and without biases, Mistral with
a sliding window shorter than the sequence, Qwen2, Gemma, Gemma 3 text, BERT), HF runs the
whole model while hooks record what enters each attention layer and what it adds to the
residual; ``attention_forward`` must reproduce the latter from the loaded ``HeadWeights``
and the former alone. Embeddings, unembeddings (through the final norm, to HF's logits) and
``W_QK`` at a rotary offset (to HF's attention pattern) are compared with HF too; so are the
same weights saved with a transformers-4-style config file, and bare models without a head.
Config settings a family does not understand must be refused by name.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

import compscope
from compscope.core.attention import attention_forward

from hf_tiny import (BOX_TABLES, BY_ID, TAPAS_TYPES, D, D_HEAD, SEQ, VARIANTS, VOCAB, _modules, attention_config,
                     attention_layers, auto_class, build, capture, make_config, model_and_capture, model_inputs,
                     random_ids, attentions)

ATOL = 1e-5

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture(params=VARIANTS, ids=str)
def variant(request):
    return request.param


def assert_matches(hw, cap, what: str) -> None:
    """``attention_forward`` reproduces, at every layer, what HF's attention added to the residual."""
    assert hw.n_layers == len(cap.resid)
    for layer, (resid, want) in enumerate(zip(cap.resid, cap.attn_out)):
        got = attention_forward(hw, layer, resid)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=lambda m: f"{what} layer {layer}: {m}")


def loaded(variant_id: str):
    model, cap = model_and_capture(variant_id)
    return compscope.load(model), model, cap


# ---------------------------------------------------------------------------- attention


def test_attention_matches_hf(variant):
    hw, model, cap = loaded(variant.id)
    assert hw.n_layers == attention_layers(model, variant.kind)  # a hybrid's: fewer than num_hidden_layers
    assert hw.meta.processing == ()
    assert_matches(hw, cap, variant.id)


def test_attention_depends_on_what_the_variant_is_about(variant):
    """Guard against a vacuous pass: the features under test change the output here."""
    hw, _, cap = loaded(variant.id)
    resid, want = cap.resid[-1], cap.attn_out[-1]
    layer = hw.n_layers - 1
    if any(w is not None for w in hw.sliding_window):
        layer = next(i for i, w in enumerate(hw.sliding_window) if w is not None)
        assert hw.sliding_window[layer] < SEQ
        resid, want = cap.resid[layer], cap.attn_out[layer]
        no_window = hw.replace(sliding_window=(None,) * hw.n_layers)
        assert (attention_forward(no_window, layer, resid) - want).abs().max() > 1e-3
    changed = []  # (weights, layer): each must change what the layer computes
    rotates = hw.rotary is not None and bool(hw.rotary.inv_freq.any())  # (Granite 4's hybrids: NoPE everywhere)
    if rotates:  # on a layer that rotates (SmolLM3's NoPE layers turn by frequency 0)
        turning = layer if bool(hw.rotary.inv_freq[layer].any()) else next(
            i for i in range(hw.n_layers) if bool(hw.rotary.inv_freq[i].any()))
        changed.append((hw.replace(rotary=None), turning))
        if turning != layer:  # and the layer that does not must stay unrotated
            changed.append((hw.replace(rotary=type(hw.rotary)(hw.rotary.dim, hw.rotary.inv_freq[[turning] * hw.n_layers],
                                                              hw.rotary.style)), layer))
    if hw.attn_norm is not None and hw.attn_norm.weight is not None and hw.norm_placement == "pre":
        changed.append((hw.replace(attn_norm=type(hw.attn_norm)(hw.attn_norm.kind, None, None, hw.attn_norm.eps)), layer))
    if rotates:
        other = [i for i in range(hw.n_layers) if not torch.equal(hw.rotary.inv_freq[i], hw.rotary.inv_freq[layer])]
        if other:  # per-layer rotary bases (Gemma 3): another layer's base must not do
            freqs = hw.rotary.inv_freq.clone()
            freqs[layer] = freqs[other[0]]
            changed.append((hw.replace(rotary=type(hw.rotary)(hw.rotary.dim, freqs, hw.rotary.style)), layer))
        if hw.rotary.dim > 2:  # the pairing (half: i with i + dim/2; interleaved: 2i with 2i+1) must matter
            style = "interleaved" if hw.rotary.style == "half" else "half"
            changed.append((hw.replace(rotary=type(hw.rotary)(hw.rotary.dim, hw.rotary.inv_freq, style)), turning))
    if hw.alibi is not None:  # the bias must matter, and each head's own slope (not another head's)
        changed.append((hw.replace(alibi=None, positions="none"), layer))
        changed.append((hw.replace(alibi=hw.alibi.flip(0)), layer))
    if hw.positions == "relative":  # each position term, its rows in order, each layer's own, and the buckets matter
        for name, other in (("pos_Q", "pos_K"), ("pos_K", "pos_Q")):
            pos = getattr(hw, name)
            if pos is not None:
                alone = {"positions": "none", "rel_buckets": (0, 0)} if getattr(hw, other) is None else {}
                changed.append((hw.replace(**{name: None}, **alone), layer))
                changed.append((hw.replace(**{name: pos.flip(2)}), layer))  # rows reversed: each offset reads -δ - 1's
                changed.append((hw.replace(**{name: pos[[1 - layer] * hw.n_layers]}), layer))
        if hw.rel_buckets != (0, 0):
            changed.append((hw.replace(rel_buckets=(0, 0)), layer))
    if hw.rel_bias is not None:  # the bias by offset bucket, each head's own, and each side's of the query matter
        alone = {"positions": "none"} if hw.positions == "relative" and hw.pos_Q is None and hw.pos_K is None else {}
        changed.append((hw.replace(rel_bias=None, rel_bias_buckets=(0, 0), **alone), layer))
        changed.append((hw.replace(rel_bias=hw.rel_bias.flip(1)), layer))
        changed.append((hw.replace(rel_bias=hw.rel_bias.roll(hw.rel_bias_buckets[0] // 2, dims=2)), layer))
    if hw.attn_scale:
        changed.append((hw.replace(attn_scale=0.0), layer))
    if hw.qk_norm is not None:  # on a layer it applies to (Llama 4: not its NoPE layers)
        normed = next(i for i in (layer, *range(hw.n_layers)) if hw.qk_normed(i))
        changed.append((hw.replace(qk_norm=None, qk_norm_layers=()), normed))
        if not hw.qk_normed(layer):  # and a layer without it must stay without
            changed.append((hw.replace(qk_norm_layers=()), layer))
    if hw.attn_out_norm is not None:
        changed.append((hw.replace(attn_out_norm=None), layer))
    if hw.v_norm is not None:
        changed.append((hw.replace(v_norm=None), layer))
    if hw.W_G is not None:
        changed.append((hw.replace(W_G=None, b_G=None), layer))
    if hw.q_latent is not None:  # multi-head latent attention: each latent norm's scale, and where the keys take it
        changed.append((hw.replace(q_latent=None), layer))
    if hw.kv_latent is not None:
        changed.append((hw.replace(kv_latent=None), layer))
        changed.append((hw.replace(kv_latent_from=0), layer))
    if hw.b_Q is not None:
        changed.append((hw.replace(b_Q=None), layer))
    if not hw.causal:
        changed.append((hw.replace(causal=True), layer))
    for wrong, at in changed:
        assert (attention_forward(wrong, at, cap.resid[at]) - cap.attn_out[at]).abs().max() > 1e-3


def test_shapes_and_gqa_map(variant):
    hw, model, _ = loaded(variant.id)
    cfg = attention_config(model, variant.kind)
    if variant.kind.startswith("gemma4") or variant.config_cls == "MiMoV2FlashConfig":  # K/V head counts differ
        # between layers: held as their least common multiple
        n_kv = math.lcm(*(hw.n_heads // b.self_attn.num_key_value_groups for b in getattr(model, "model", model).layers))
    else:
        n_kv = getattr(cfg, "num_key_value_heads", None) or hw.n_heads
    if variant.kind == "falcon":  # its attention module says: multi_query one, the grouped layout num_kv_heads
        n_kv = model.transformer.h[0].self_attention.num_kv_heads
        assert n_kv == {"falcon-mqa-parallel": 1, "falcon-grouped-gqa-bias": 2, "falcon-per-head-sequential": 4}[variant.id]
    assert (hw.n_heads, hw.n_kv_heads, hw.d_model) == (cfg.num_attention_heads, n_kv, cfg.hidden_size)
    rep = hw.n_heads // n_kv
    assert hw.kv_map == tuple(h // rep for h in range(hw.n_heads))  # HF repeat_kv: repeat_interleave


# ---------------------------------------------------------------------------- embeddings


def test_embedding_columns_match_hf(variant):
    """``W_E[:, tok]`` (+ ``W_pos[:, pos]``) is what HF puts into the residual for ``tok``
    (Gemma: including the sqrt(d_model) scale)."""
    hw, model, cap = loaded(variant.id)
    ids = cap.ids
    assert hw.n_vocab == VOCAB
    emb = hw.W_E[:, ids].permute(1, 2, 0)  # (batch, seq, d)
    if variant.kind in ("bert", "altclip", "git", "squeezebert"):
        torch.testing.assert_close(emb, cap.extra["word_embeddings"], atol=0, rtol=0)
        if hw.W_pos is None:  # (RoFormer: rotary, DeBERTa: relative positions; no position table)
            assert hw.positions in ("rotary", "relative") and "position_embeddings" not in cap.extra
            summed = emb
        else:
            torch.testing.assert_close(hw.W_pos[:, :SEQ].T, cap.extra["position_embeddings"][0], atol=0, rtol=0)
            summed = emb + hw.W_pos[:, :SEQ].T
        extras = {"W_type": "token_type_embeddings", "W_task": "task_type_embeddings",  # (ERNIE's task types,
                  "W_xpath": "xpath_embeddings"}  # MarkupLM's XPath embedding, every token's the pad one)
        if TAPAS_TYPES[0] in cap.extra:  # TAPAS: row 0 of each of its seven tables, the segment's as W_type
            extras = dict(zip(("W_type", "W_column", "W_row", "W_previous_answer", "W_column_rank",
                               "W_inverse_column_rank", "W_numeric_relation"), TAPAS_TYPES))
        boxes = BOX_TABLES[0] in cap.extra  # LayoutLM: every box (0, 0, 0, 0), each corner read from x and y
        assert set(hw.embed_extra) == {k for k, name in extras.items() if name in cap.extra} | ({"W_box"} if boxes else set())
        for key, name in extras.items():
            if name in cap.extra:
                torch.testing.assert_close(hw.embed_extra[key][:, 0], cap.extra[name][0, 0])
                summed = summed + hw.embed_extra[key][:, 0]
        if boxes:  # (LayoutLMv3: the rows concatenated, [x0, y0, x1, y1, h, w]; v1: summed)
            x, y, h, w = (cap.extra[name][0, 0] for name in BOX_TABLES)
            added = torch.cat([x, y, x, y, h, w]) if x.shape[0] < D else 2 * x + 2 * y + h + w
            assert hw.embed_extra["W_box"].shape == (hw.d_model, 1)
            torch.testing.assert_close(hw.embed_extra["W_box"][:, 0], added)
            summed = summed + added
        # attn_norm of layer 0 is the embeddings LayerNorm: it produced the residual layer 0 reads
        torch.testing.assert_close(hw.attn_norm.apply(summed, 0), cap.resid[0], atol=ATOL, rtol=0)
        return
    if variant.kind == "bart" and hw.norm_placement == "post" and not hw.first_layer_unnormed:  # BART's kin, post-LN:
        summed = emb + hw.W_pos[:, :SEQ].T  # layernorm_embedding of word + position made layer 0's input
        torch.testing.assert_close(hw.attn_norm.apply(summed, 0), cap.resid[0], atol=ATOL, rtol=0)
        return
    if variant.kind == "xlm":  # post-LN: layer_norm_emb of word + position (no language passed) made layer 0's input
        summed = emb + hw.W_pos[:, :SEQ].T
        torch.testing.assert_close(hw.attn_norm.apply(summed, 0), cap.resid[0], atol=ATOL, rtol=0)
        assert set(hw.embed_extra) == ({"W_lang"} if variant.config.get("n_langs", 1) > 1 else set())
        return
    if variant.kind == "rotary_bert":  # post-LN, no position table: the embeddings' norm of word + token type 0
        torch.testing.assert_close(emb, cap.extra["word_embeddings"], atol=0, rtol=0)
        summed = emb + (hw.embed_extra["W_type"][:, 0] if "W_type" in hw.embed_extra else 0)
        assert ("W_type" in hw.embed_extra) == ("token_type_embeddings" in cap.extra)
        torch.testing.assert_close(hw.attn_norm.apply(summed, 0), cap.resid[0], atol=ATOL, rtol=0)
        return
    if hw.W_pos is not None:
        emb = emb + hw.W_pos[:, : ids.shape[1]].T
    if "W_type" in hw.embed_extra:  # (XLM-RoBERTa-XL, Megatron-BERT: token type 0 added, no LayerNorm)
        emb = emb + hw.embed_extra["W_type"][:, 0]
    torch.testing.assert_close(emb, cap.extra.get("layer0_in", cap.resid[0]), atol=ATOL, rtol=1e-6)
    if variant.config_cls.startswith("Gemma"):
        raw = model.get_input_embeddings().weight
        torch.testing.assert_close(hw.W_E, raw.T * hw.d_model**0.5)


def test_unembedding_matches_hf(variant):
    hw, model, cap = loaded(variant.id)
    if variant.kind in ("bert", "rotary_bert", "altclip", "squeezebert") or (variant.kind == "bart"
                                                                              and hw.norm_placement == "post"):
        assert hw.W_U is None and hw.final_norm is None
        return
    if variant.kind in ("xlmr_xl", "modernbert", "gemma3_bidirectional", "modernbert_decoder", "megatron_bert",
                        "eurobert", "esm", "esmc", "gemma4_encoder", "muse_glimmer", "clip", "t5", "t5gemma",
                        "t5gemma2", "aimv2", "dia", "bart", "glm_image", "llama_base", "higgs"):
        assert hw.W_U is None  # no linear unembedding (an encoder; a nonlinear LM head; GLM-Image's over image tokens
        # alone; a base model's, untied, without its head); the final norm is the model's
        with torch.no_grad():
            want = _modules(model, variant.kind)[1](cap.final_in)
        torch.testing.assert_close(hw.final_norm.apply(cap.final_in, 0), want, atol=ATOL, rtol=0)
        return
    scale = model.config.logit_scale if variant.config_cls.startswith("Cohere") else 1.0  # logits times it, in W_U
    if hasattr(model.config, "logits_scaling"):  # Granite divides the logits by it, HyperCLOVA X multiplies them
        scale = model.config.logits_scaling if variant.kind == "hyperclovax" else 1 / model.config.logits_scaling
    if hasattr(model.config, "lm_head_multiplier"):
        scale = model.config.lm_head_multiplier  # Falcon-H1 multiplies them by it
    head = model.get_output_embeddings().weight
    out = getattr(getattr(getattr(model, "model", None), "decoder", None), "project_out", None)
    if out is not None:  # (OPT's token embeddings of another width: the last residual projected out to them first)
        head = (head.double() @ out.weight.double()).float()
    torch.testing.assert_close(hw.W_U, head * scale, atol=0, rtol=0)
    # logits = W_U · final_norm(x) (+ b_U): the final norm must be right too
    logits = cap.final_in @ hw.W_U.T if hw.final_norm is None else hw.final_norm.apply(cap.final_in, 0) @ hw.W_U.T
    if hw.b_U is not None:
        logits = logits + hw.b_U
    softcap = (getattr(model.config, "final_logit_softcapping", None)  # nanochat's (and Gemma 2's) cap on the logits
               or getattr(model.config, "logits_soft_cap", None))  # (RecurrentGemma's name for it)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    torch.testing.assert_close(logits, cap.logits, atol=1e-4, rtol=1e-5)


def test_loading_does_not_touch_the_model():
    model, _ = model_and_capture("gpt2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hw = compscope.load(model, fold_norm=True, center_writing=True, fold_value_bias=True)
    assert hw.meta.processing == ("fold_norm", "center_writing", "fold_value_bias")
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


# ---------------------------------------------------------------------------- refusals

REFUSALS = [
    # (variant, config overrides, attributes set on the config afterwards, text the error must name)
    ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), {}, "scale_attn_by_inverse_layer_idx"),
    ("gpt2", dict(scale_attn_weights=False), {}, "scale_attn_weights"),
    # YaRN where its attention factor would scale part of each head through a QK-norm, or in a family that does
    # not fold it
    ("stablelm-qk-layernorm-per-head", dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 700.0,
                                                             "original_max_position_embeddings": 16,
                                                             "partial_rotary_factor": 0.5}), {},  # (2 of 8: the
     # share as transformers 5.10 leaves it in the config, the class default 0.25, after building YaRN on 0.5)
     r"the attention factor 1\.13\d* of its rope scaling \(yarn\) on [42] of 8 head dims, beside QK-norm"),
    ("neox-partial-rotary-parallel", {}, {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "yarn"),
    ("llama-mha", {}, {"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}, "dynamic"),
    ("llama-mha", {}, {"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "dynamic"),
    ("llama-mha", {}, {"my_new_attention_trick": True}, "my_new_attention_trick"),
    ("neox-partial-rotary-parallel", {}, {"attention_sink_tokens": 4}, "attention_sink_tokens"),
    ("bert", {}, {"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ("gemma3-text", dict(attn_logit_softcapping=50.0), {}, "attn_logit_softcapping"),
    ("qwen2-bias", {}, {"layer_types": ["full_attention", "chunked_attention"]}, "chunked_attention"),
    ("gemma3-text", {}, {"layer_types": ["sliding_attention", "full_attention", "linear_attention"]},
     "linear_attention"),
    ("olmo-parameter-free-layernorm", dict(clip_qkv=8.0), {}, "clip_qkv"),
    ("olmoe-layer-qk-norm", dict(clip_qkv=8.0), {}, "clip_qkv"),
    ("opt", {}, {"word_embed_proj_dim": 16}, r"embed_tokens.weight has shape \(61, 32\), expected \(n_vocab, 16\)"),
    ("gpt-bigcode-mqa", {}, {"num_key_value_heads": 2}, "'num_key_value_heads' = 2 disagrees with multi_query"),
    ("gpt-bigcode-per-head-unscaled", dict(add_cross_attention=True), {}, "add_cross_attention"),
    ("bloom-alibi", dict(apply_residual_connection_post_layernorm=True), {}, "apply_residual_connection_post_layernorm"),
    ("bloom-alibi", {}, {"num_key_value_heads": 2}, "'num_key_value_heads' = 2: every BLOOM head has its own"),
    # MPT settings transformers does not compute as the config says (clipped or normed q/k, another
    # kind of attention, other slopes, a logit scale) are refused inside attn_config by name
    ("mpt-alibi-scaled", dict(attn_config={"clip_qkv": 4.0}), {}, r"attn_config\.clip_qkv=4\.0"),
    ("mpt-alibi-scaled", dict(attn_config={"qk_ln": True}), {}, r"attn_config\.qk_ln=True"),
    ("mpt-alibi-scaled", dict(attn_config={"attn_type": "multiquery_attention"}), {}, "attn_config.attn_type"),
    ("mpt-alibi-scaled", dict(attn_config={"alibi_bias_max": 4}), {}, r"attn_config\.alibi_bias_max=4"),
    ("mpt-alibi-scaled", dict(attn_config={"alibi": False}), {}, r"attn_config\.alibi=False"),
    ("mpt-alibi-scaled", dict(logit_scale=2.0), {}, r"logit_scale=2\.0"),
    # FlauBERT's pre-LN layers (the residual would start as a LayerNorm's output), XLM's adaptive softmax head
    ("flaubert-post-ln", {}, {"pre_norm": True}, "pre_norm=True"),
    ("xlm-post-ln", {}, {"asm": True}, "asm=True"),
    ("ibert-float", {}, {"quant_mode": True}, "quant_mode=True"),
]


@pytest.mark.parametrize("variant_id, overrides, setattrs, needle", REFUSALS,
                         ids=[f"{r[0]}-{r[3]}" for r in REFUSALS])
def test_unsupported_config_is_refused_by_name(variant_id, overrides, setattrs, needle):
    model = build(BY_ID[variant_id], **overrides)
    for k, v in setattrs.items():
        setattr(model.config, k, v)
    with pytest.raises(compscope.UnsupportedModelError, match=needle):
        compscope.load(model)


def test_falcon_rw_alibi_is_read_as_its_sdpa_attention_computes_and_refused_on_data(tmp_path):
    """Falcon-RW (``alibi``, per-head fused rows, sequential blocks): the ALiBi slopes, rounded to bfloat16 as the
    model computes them, divided by sqrt(d_head) as it adds them before the scale; compscope's attention recomputed on
    the hooked residual equals what transformers' SDPA attention (ALiBi once, as trained) adds, at float32 tolerance
    (8 heads: slopes that are powers of two, exact products), and differs from its eager attention (ALiBi twice)
    before transformers 5.25, which the data runner refuses by name there; from 5.25 (ALiBi once, in the mask, for
    every attention) equals it too, and the runner runs it; a saved folder reads the same."""
    import transformers

    from compscope.core.heads import alibi_slopes
    from compscope.data.runner import layer_state, runner_for
    from compscope.loading.families.base import transformers_at_least

    cfg = transformers.FalconConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=8, num_hidden_layers=2,
                                    alibi=True, multi_query=False, new_decoder_architecture=False, parallel_attn=False,
                                    bias=True)
    outs = {}
    for impl in ("sdpa", "eager"):
        torch.manual_seed(0)
        model = transformers.FalconForCausalLM._from_config(cfg, attn_implementation=impl).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.25 * torch.randn_like(p))
        resid, added = [], []
        hooks = [b.input_layernorm.register_forward_pre_hook(lambda m, a: resid.append(a[0])) for b in model.transformer.h]
        hooks += [b.self_attention.register_forward_hook(lambda m, a, o: added.append(o[0] if isinstance(o, tuple) else o))
                  for b in model.transformer.h]
        with torch.no_grad():
            model(random_ids())
        for h in hooks:
            h.remove()
        outs[impl] = (model, resid, added)
    model, resid, added = outs["sdpa"]
    hw = compscope.load(model)
    assert hw.positions == "alibi" and hw.rotary is None
    r = D // 8
    torch.testing.assert_close(hw.alibi, (alibi_slopes(8) / math.sqrt(r)).float(), rtol=0, atol=0)  # (powers of two)
    for layer in range(2):
        torch.testing.assert_close(layer_state(hw, layer, resid[layer]).out, added[layer], atol=2e-5, rtol=1e-5)
    eager, resid, added = outs["eager"]
    if transformers_at_least(5, 25):
        for layer in range(2):
            torch.testing.assert_close(layer_state(hw, layer, resid[layer]).out, added[layer], atol=2e-5, rtol=1e-5)
        runner_for(eager, hw, progress=False).trace(random_ids()[:1])  # (its first trace checks itself on the model)
    else:
        assert not torch.allclose(layer_state(hw, 1, resid[1]).out, added[1], atol=1e-3)  # (ALiBi twice)
        with pytest.raises(compscope.UnsupportedModelError, match="adds its ALiBi twice"):
            runner_for(model, hw, progress=False)
    model.save_pretrained(tmp_path)
    saved = compscope.load(tmp_path)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_O", "alibi"):
        assert torch.equal(getattr(saved, name), getattr(hw, name)), name
    assert any(n.startswith("ALiBi (Falcon-RW)") for n in saved.meta.notes)
    other = transformers.FalconForCausalLM(transformers.FalconConfig(
        vocab_size=VOCAB, hidden_size=48, num_attention_heads=12, num_hidden_layers=1, alibi=True, multi_query=False,
        new_decoder_architecture=False, parallel_attn=False))
    slopes = alibi_slopes(12).to(torch.bfloat16).double()  # (2^-1/2 ...: rounded as the model rounds them)
    assert not torch.equal(slopes, alibi_slopes(12))
    torch.testing.assert_close(compscope.load(other).alibi, (slopes / 2.0).float(), rtol=0, atol=0)  # (d_head 4)


@pytest.mark.parametrize("variant_id, kv", [("falcon-mqa-parallel", 1), ("falcon-grouped-gqa-bias", 2),
                                            ("falcon-per-head-sequential", 4)])
def test_falcon_configs_key_value_head_count_is_read_against_its_layout(tmp_path, variant_id, kv):
    """transformers 5.25 saves ``num_key_value_heads``, derived from the layout (one K/V head for multi-query, one per
    head per-head, ``num_kv_heads`` grouped): a config stating the count the layout gives reads as one without it; any
    other count is refused by the key."""
    build(BY_ID[variant_id]).save_pretrained(tmp_path)
    cfg = {k: v for k, v in json.loads((tmp_path / "config.json").read_text()).items() if k != "num_key_value_heads"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    want = compscope.load(tmp_path)
    assert want.n_kv_heads == kv
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_key_value_heads": kv}))
    got = compscope.load(tmp_path)
    assert got.kv_map == want.kv_map and torch.equal(got.W_K, want.W_K) and torch.equal(got.W_V, want.W_V)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_key_value_heads": 3 if kv != 3 else 2}))
    with pytest.raises(compscope.UnsupportedModelError, match=r"num_key_value_heads=\d.*key/value heads"):
        compscope.load(tmp_path)


def test_gptj_without_rotary_dim_is_refused(tmp_path):
    """An older GPT-J config may leave ``rotary_dim`` unset (frequencies of the model width on whole
    heads): refused by name, not read as full-head rotary."""
    build(BY_ID["gptj-interleaved-rotary"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rotary_dim"] = None
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(compscope.UnsupportedModelError, match="rotary_dim is not set"):
        compscope.load(tmp_path)


def test_switched_off_unknown_key_is_accepted():
    model = build(BY_ID["llama-mha"])
    model.config.my_new_attention_trick = False
    compscope.load(model)


def test_unknown_model_type_is_named(tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "weirdformer", "hidden_size": 8}))
    save_file({"w": torch.zeros(2, 2)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(compscope.UnsupportedModelError, match="weirdformer"):
        compscope.load(tmp_path)


def test_unsupported_hf_model_is_named():
    import transformers

    cfg = transformers.XLNetConfig(vocab_size=VOCAB, d_model=16, n_layer=1, n_head=2, d_inner=32)  # two streams: none
    model = transformers.XLNetModel(cfg)
    with pytest.raises(compscope.UnsupportedModelError, match="'xlnet'.*two-stream attention"):
        compscope.load(model)


# ---------------------------------------------------------------------------- legacy config files
# The same weights saved as a HF folder with a transformers-4-style config.json (rope_theta /
# rope_scaling / rope_local_base_freq / sliding_window_pattern / rotary_pct instead of
# rope_parameters and layer_types; Pythia's 'embed_out' head; a tied head left out of the file).


def _legacy_gemma3(cfg):
    for k in ("layer_types", "rope_parameters", "_sliding_window_pattern"):
        cfg.pop(k, None)
    # layer i is global iff (i + 1) % pattern == 0: sliding, full, sliding
    return dict(cfg, rope_theta=3000.0, rope_local_base_freq=50.0, sliding_window_pattern=2, rope_scaling=None)


def _legacy_llama(cfg):
    cfg.pop("rope_parameters", None)  # (transformers 4: not there)
    return dict(cfg, rope_theta=1000.0, rope_scaling={"type": "linear", "factor": 2.0})


def _legacy_neox(cfg):
    cfg.pop("rope_parameters", None)  # (transformers 4: not there)
    return dict(cfg, rotary_pct=0.25, rotary_emb_base=500.0)


def _legacy_mistral(cfg):
    cfg.pop("rope_parameters", None)  # (transformers 4: not there)
    return dict(cfg, rope_theta=1000.0)


def _legacy_qwen2(cfg):
    cfg.pop("rope_parameters", None)  # (transformers 4: not there)
    cfg.pop("layer_types")
    return dict(cfg, rope_theta=10000.0)


LEGACY = [
    ("gemma3-text", _legacy_gemma3, {}),
    ("llama-linear-rope-tied", _legacy_llama, {}),
    ("neox-partial-rotary-parallel", _legacy_neox, {"lm_head.weight": "embed_out.weight"}),
    ("mistral-sliding3", _legacy_mistral, {}),
    ("qwen2-sliding-upper-layers", _legacy_qwen2, {}),
]


@pytest.mark.parametrize("variant_id, legacy, rename", LEGACY, ids=[x[0] for x in LEGACY])
def test_legacy_config_folder_matches_hf(tmp_path, variant_id, legacy, rename):
    from safetensors.torch import save_file

    model, cap = model_and_capture(variant_id)
    cfg = legacy(model.config.to_dict())
    sd = {rename.get(k, k): v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        del sd["lm_head.weight"]  # HF saves a tied head once, as the embedding
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(sd, str(tmp_path / "model.safetensors"))
    hw = compscope.load(tmp_path)
    assert_matches(hw, cap, f"{variant_id} (legacy config file)")
    torch.testing.assert_close(hw.W_U, model.get_output_embeddings().weight, atol=0, rtol=0)


def test_untied_model_without_head_has_no_unembedding(tmp_path):
    from safetensors.torch import save_file

    model, _ = model_and_capture("llama-gqa-bias")
    sd = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    cfg = model.config.to_dict()
    assert cfg["tie_word_embeddings"] is False
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(sd, str(tmp_path / "model.safetensors"))
    hw = compscope.load(tmp_path)
    assert hw.W_U is None
    assert any("unembedding" in n for n in hw.meta.notes)


# ---------------------------------------------------------------------------- W_QK with a rotary offset

BILINEAR = ["llama-mha", "llama-mqa", "mistral-sliding3", "neox-sequential-no-bias", "gemma"]


@pytest.mark.parametrize("vid", BILINEAR)
def test_qk_circuit_with_offset_gives_hf_pattern(vid):
    """Without biases or QK-norm the logit is ``x_i^T W_QK(δ = i - j) x_j``: softmax of these
    over the allowed keys is HF's attention pattern (``output_attentions``)."""
    model, cap = model_and_capture(vid)
    hw = compscope.load(model)
    assert hw.b_Q is None and hw.b_K is None and hw.qk_norm is None
    with torch.no_grad():
        pattern = attentions(model(**model_inputs(model, cap.ids), output_attentions=True))
    norms = [b.input_layernorm for b in (model.gpt_neox.layers if hw.meta.family == "neox" else model.model.layers)]
    i, j = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :]
    for layer in range(hw.n_layers):
        with torch.no_grad():
            x = norms[layer](cap.resid[layer])[0]  # (seq, d), first batch row
        window = hw.sliding_window[layer]
        for head in range(hw.n_heads):
            logits = torch.full((SEQ, SEQ), float("-inf"))
            for delta in range(SEQ):
                qk = hw.W_QK(layer, head, offset=delta).dense()
                full = hw.scale * x @ qk @ x.T
                keep = (i - j == delta) & (window is None or delta < window)
                logits[keep] = full[keep]
            torch.testing.assert_close(logits.softmax(-1), pattern[layer][0, head], atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------- with and without a head

BASES = [("gpt2", "transformer", True), ("gpt-neo-local3", "transformer", True), ("neox-partial-rotary-parallel", "gpt_neox", False),
         ("llama-gqa-bias", "model", False), ("gemma3-text", "model", True)]


@pytest.mark.parametrize("vid, attr, tied", BASES, ids=[b[0] for b in BASES])
def test_base_model_without_head(vid, attr, tied):
    """The bare decoder (no LM head, tensor names without the prefix) loads the same heads;
    its unembedding is the embedding when the config ties them, and absent otherwise."""
    model, cap = model_and_capture(vid)
    hw = compscope.load(getattr(model, attr))
    assert_matches(hw, cap, vid)
    if tied:
        torch.testing.assert_close(hw.W_U, model.get_input_embeddings().weight, atol=0, rtol=0)
        said = [n for n in hw.meta.notes if "no unembedding of its own" in n]
        assert len(said) == 1 and type(getattr(model, attr)).__name__ in said[0]
        assert not any("no unembedding of its own" in n for n in compscope.load(model).meta.notes)
    else:
        assert hw.W_U is None


def test_tied_unembedding_of_a_classifier_is_said(tmp_path):
    """A GPT-2 sequence classifier has a class head, not an unembedding: W_U is its tied embedding,
    and the card says so, for the object and for the folder it saves (its config names the class)."""
    import transformers

    model = transformers.GPT2ForSequenceClassification(make_config(BY_ID["gpt2"])).eval()
    model.save_pretrained(tmp_path)
    for source in (model, tmp_path):
        hw = compscope.load(source)
        torch.testing.assert_close(hw.W_U, model.transformer.wte.weight, atol=0, rtol=0)
        assert any("GPT2ForSequenceClassification, has no unembedding of its own" in n for n in hw.meta.notes)


def test_bert_with_mlm_head():
    import transformers

    v = BY_ID["bert"]
    torch.manual_seed(0)
    mlm = transformers.BertForMaskedLM(make_config(v)).eval()
    with torch.no_grad():
        for p in mlm.parameters():
            p.add_(0.25 * torch.randn_like(p))
    cap = capture(mlm.bert, "bert", random_ids())
    hw = compscope.load(mlm)
    assert hw.W_U is None
    assert_matches(hw, cap, "bert (masked LM)")



KIN = [("RobertaForMaskedLM", "RobertaConfig", "roberta", "roberta", 1),
       ("XLMRobertaForMaskedLM", "XLMRobertaConfig", "roberta", "roberta", 1),
       ("CamembertForMaskedLM", "CamembertConfig", "roberta", "roberta", 3),
       ("Data2VecTextForMaskedLM", "Data2VecTextConfig", "data2vec_text", "data2vec_text", 1),
       ("ElectraForPreTraining", "ElectraConfig", "electra", "electra", 0),
       ("DistilBertForSequenceClassification", "DistilBertConfig", "distilbert", "distilbert", 0)]


@pytest.mark.parametrize("model_cls, config_cls, family, base, pad", KIN, ids=[k[0] for k in KIN])
def test_bert_kin_with_their_heads_from_objects_and_folders(tmp_path, model_cls, config_cls, family, base, pad):
    """RoBERTa's kin with their task heads, as objects and as saved folders (tensor names under
    the base model's prefix): the same heads, of the family their model type names; positions
    from ``pad_token_id + 1`` where the model numbers them so (the embeddings' own position rows
    for an unpadded sequence); and every layer's attention output as the model computes it."""
    import transformers

    extra = {"DistilBertConfig": {}, "ElectraConfig": {"embedding_size": D}}.get(config_cls, {"type_vocab_size": 1})
    cfg = getattr(transformers, config_cls)(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_hidden_layers=2,
                                            intermediate_size=48, max_position_embeddings=40, pad_token_id=pad, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25 * torch.randn_like(p))
    model.save_pretrained(tmp_path)
    ids = random_ids()
    ids[ids == pad] = pad + 1  # no pad token: no position is held back
    body = getattr(model, base)
    cap = capture(body, "bert", ids)
    hw, saved = compscope.load(model), compscope.load(tmp_path)
    assert hw.meta.family == saved.meta.family == family and hw.W_U is None and not hw.causal
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos"):
        torch.testing.assert_close(getattr(saved, name), getattr(hw, name), atol=0, rtol=0)
    start = 0 if family in ("electra", "distilbert") else pad + 1
    torch.testing.assert_close(hw.W_pos.T, body.embeddings.position_embeddings.weight[start:], atol=0, rtol=0)
    torch.testing.assert_close(hw.W_pos[:, :SEQ].T, cap.extra["position_embeddings"][0], atol=0, rtol=0)
    assert bool(start) == any("pad_token_id + 1" in n for n in hw.meta.notes)
    assert_matches(hw, cap, model_cls)


def _saved_shaken(model, folder):
    """``model`` in eval mode, every parameter moved by 0.25 times seeded noise (so no tensor is its init), saved
    to ``folder``; and compscope's read of the folder."""
    torch.manual_seed(0)
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25 * torch.randn_like(p))
    model.save_pretrained(folder)
    return compscope.load(folder)


def _unread_queries_change_nothing(model, body, hw, ids, names) -> None:
    """The projections ``names`` of each layer's self-attention in ``body`` (used only for inputs compscope does not
    give: LUKE's entities, Longformer's global tokens), perturbed: the hidden states ``body`` computes on ``ids``
    and the heads compscope reads from ``model`` stay as they were (as read from its folder, ``hw``)."""
    before = body(input_ids=ids).last_hidden_state
    with torch.no_grad():
        for layer in body.encoder.layer:
            for name in names:
                getattr(layer.attention.self, name).weight.add_(1.0)
    assert torch.equal(body(input_ids=ids).last_hidden_state, before)
    moved = compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_pos"):
        assert torch.equal(getattr(moved, name), getattr(hw, name)), name


def _folder_runs_as_read(folder, hw, ids):
    """A run of ``ids`` from ``folder``: every layer recomputed from ``hw`` equals what it adds; the trace."""
    from compscope.data.runner import layer_state, runner_for

    trace = runner_for(folder, progress=False, device="cpu").trace(ids)
    assert trace.resid[0].shape == (*ids.shape, hw.d_model)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    return trace


def test_luke_is_read_and_runs_on_words_alone(tmp_path):
    """LUKE's masked LM saved to a folder: RoBERTa's heads under ``luke.``, positions from row 2; its entity-aware
    queries are not read and change nothing a run on words computes (perturbed, neither the heads read nor the
    hidden states move); run from the folder on data, every layer recomputed from the weights equals what it adds."""
    import transformers

    cfg = transformers.LukeConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_hidden_layers=2,
                                  intermediate_size=48, max_position_embeddings=40, pad_token_id=1, type_vocab_size=1,
                                  entity_vocab_size=7, entity_emb_size=16, use_entity_aware_attention=True)
    model = transformers.LukeForMaskedLM(cfg)
    hw = _saved_shaken(model, tmp_path)
    assert hw.meta.family == "luke" and hw.W_U is None and not hw.causal
    assert torch.equal(hw.W_pos, model.luke.embeddings.position_embeddings.weight.detach()[2:].T)
    assert any(n.startswith("words alone: the entity embeddings") for n in hw.meta.notes)
    ids = random_ids()
    _unread_queries_change_nothing(model, model.luke, hw, ids, ("w2e_query", "e2w_query", "e2e_query"))
    _folder_runs_as_read(tmp_path, hw, ids)


def test_longformer_reads_each_layers_window_and_runs_padded_sequences(tmp_path):
    """Longformer's masked LM saved to a folder, windows of 4 and 8 (2 and 4 tokens each side, held as 3 and 5): run
    from the folder on 10 tokens, which transformers pads to 16, every layer recomputed from the weights equals what
    it adds; global attention's projections are not read and change nothing a run without global tokens computes.
    An odd or miscounted attention_window is refused by name."""
    import transformers

    from compscope.data.runner import layer_state

    cfg = transformers.LongformerConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_hidden_layers=2,
                                        intermediate_size=48, max_position_embeddings=40, pad_token_id=1,
                                        type_vocab_size=1, attention_window=[4, 8])
    model = transformers.LongformerForMaskedLM(cfg)
    hw = _saved_shaken(model, tmp_path)
    assert hw.meta.family == "longformer" and hw.sliding_window == (3, 5) and not hw.causal
    ids = random_ids()
    assert ids.shape[1] % 8  # (padded as it runs)
    _unread_queries_change_nothing(model, model.longformer, hw, ids, ("query_global", "key_global", "value_global"))
    trace = _folder_runs_as_read(tmp_path, hw, ids)
    wide = hw.replace(sliding_window=(None, None))
    assert (layer_state(wide, 1, trace.resid[1]).out - trace.attn_out[1]).abs().max() > 1e-3
    for window, why in (([3, 4], "even"), ([4], "one per layer")):
        config = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps({**config, "attention_window": window}))
        with pytest.raises(compscope.LoadError, match=f"'attention_window' = {re.escape(str(window))}.*{why}"):
            compscope.load(tmp_path)


def test_layoutlmv3_bias_is_the_models_own_at_boxes_of_zero():
    """LayoutLMv3's logit bias as its encoder computes it for words alone (positions 0.., every box 0: the bias by
    offset bucket plus the spatial one, over sqrt(d_head)) equals ``rel_bias`` at compscope's bucket of each offset,
    the spatial part included (one value per head, which the attention pattern alone cannot show); and the spatial
    tables do enter it."""
    import transformers

    from compscope.core.attention import bias_bucket

    model, _ = model_and_capture("layoutlmv3-words-alone")
    encoder = model.encoder
    if not hasattr(encoder, "_compute_position_bias"):
        pytest.skip(f"transformers {transformers.__version__}: LayoutLMv3's encoder computes its bias otherwise")
    hw = compscope.load(model)
    positions = torch.arange(SEQ)[None]
    with torch.no_grad():
        want = encoder._compute_position_bias(positions, torch.zeros(1, SEQ, 4, dtype=torch.long))[0]
    offsets = positions[0][:, None] - positions[0][None, :]  # query minus key
    for layer in range(hw.n_layers):
        torch.testing.assert_close(hw.rel_bias[layer][:, bias_bucket(hw, offsets)], want, atol=1e-6, rtol=0)
    spatial = (encoder.rel_pos_x_bias.weight[:, 0] + encoder.rel_pos_y_bias.weight[:, 0]) / D_HEAD**0.5
    assert float(spatial.abs().min()) > 1e-3


def test_layoutlmv3_box_tables_that_do_not_make_the_width_are_refused(tmp_path):
    """LayoutLMv3's box rows are concatenated, four coordinates and two sizes: a height table of another width
    leaves the sum short of d_model, refused naming the widths."""
    from safetensors.torch import load_file, save_file

    model, _ = model_and_capture("layoutlmv3-words-alone")
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    name = "embeddings.h_position_embeddings.weight"
    tensors[name] = tensors[name][:, :4].contiguous()
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.LoadError, match=r"5 \(x, y\) and 4 \(h, w\) wide: 4 x 5 \+ 2 x 4 is not d_model = 32"):
        compscope.load(tmp_path)


def test_squeezebert_with_narrower_embeddings_is_refused(tmp_path):
    """SqueezeBERT's embeddings must be as wide as its channels (transformers asserts it as it builds the model):
    a folder whose config says otherwise is refused naming the key, before any tensor is read."""
    model, _ = model_and_capture("squeezebert-grouped-convolutions")
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "embedding_size": 16}))
    with pytest.raises(compscope.UnsupportedModelError, match="'embedding_size' = 16 differs from hidden_size = 32"):
        compscope.load(tmp_path)


def test_bert_kin_refuse_what_they_cannot_read(tmp_path):
    """ELECTRA's small models project the embeddings up to the residual; a RoBERTa built as a
    decoder attends causally with cross-attention: both refused, naming the key."""
    import transformers

    small = transformers.ElectraConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=D, num_attention_heads=4,
                                       num_hidden_layers=2, intermediate_size=48)
    with pytest.raises(compscope.UnsupportedModelError, match="embedding_size' = 16 differs from hidden_size = 32"):
        compscope.load(transformers.ElectraForPreTraining(small))
    decoder = transformers.RobertaConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_hidden_layers=2,
                                         intermediate_size=48, is_decoder=True)
    with pytest.raises(compscope.UnsupportedModelError, match="is_decoder=True"):
        compscope.load(transformers.RobertaForCausalLM(decoder))


# ---------------------------------------------------------------------------- biases the config does not build

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "out_proj", "qkv_proj", "query_key_value",
                         "attention.dense", "self_attn.dense", "attention.self.query", "attention.self.key",
                         "attention.self.value", "attention.output.dense", "attn.Wqkv", "attn.Wo")
BIAS_CASES = [(v.id, {}) for v in VARIANTS] + [("opt", {"enable_bias": False})]


@pytest.mark.parametrize("vid, overrides", BIAS_CASES, ids=[f"{c[0]}{'-' + '-'.join(c[1]) if c[1] else ''}" for c in BIAS_CASES])
def test_a_folder_reads_the_attention_biases_transformers_builds(tmp_path, vid, overrides):
    """A HF folder with a bias beside every attention projection, built or not: transformers
    ignores the ones its config does not build, and compscope reads the folder as the model that
    transformers builds from it (the same biases as that model object), saying what it left out."""
    from safetensors.torch import load_file, save_file

    import transformers

    from compscope.data.runner import transformers_at_least

    v = BY_ID[vid]
    if vid == "dia-encoder-unscaled-gqa" and not transformers_at_least(5, 23):
        pytest.skip(f"transformers {transformers.__version__} loads Dia's encoder from a folder with the whole "
                    "model's config class")
    build(v, **overrides).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    added = {}
    for name, w in list(sd.items()):
        base = name.removesuffix(".weight")
        if (name.endswith(".weight") and base.endswith(ATTENTION_PROJECTIONS) and base + ".bias" not in sd
                and ".mamba." not in base):  # (Falcon-H1's Mamba mixer has an out_proj of its own: not attention)
            added[base + ".bias"] = sd[base + ".bias"] = torch.full((w.shape[0],), 0.5)
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})

    built = auto_class(v).from_pretrained(tmp_path, attn_implementation="eager", dtype=torch.float32).eval()
    kept = set(added) & set(built.state_dict())
    from_folder, from_object = compscope.load(tmp_path), compscope.load(built)
    # all there (DeBERTa v1's fused in_proj has no bias: its query and value biases are parameters apart, none for keys)
    none = {"deberta-v1-fused": ("b_K",), "t5-encoder-wide-heads": ("b_Q", "b_K", "b_V", "b_O"),  # (T5: no biases)
            "umt5-encoder-own-tables": ("b_Q", "b_K", "b_V", "b_O"),
            "switch-transformers-encoder": ("b_Q", "b_K", "b_V", "b_O"),
            "longt5-local-encoder": ("b_Q", "b_K", "b_V", "b_O")}.get(vid, ())
    assert added or all((getattr(from_folder, b) is None) == (b in none) for b in ("b_Q", "b_K", "b_V", "b_O"))
    for b in ("b_Q", "b_K", "b_V", "b_O"):
        mine, theirs = getattr(from_folder, b), getattr(from_object, b)
        assert (mine is None) == (theirs is None), f"{vid}: {b}"
        if mine is not None:
            torch.testing.assert_close(mine, theirs, atol=0, rtol=0)
    said = [n for n in from_folder.meta.notes if "transformers builds this" in n]
    assert bool(said) == (len(kept) < len(added)), f"{vid}: added {sorted(added)}, kept {sorted(kept)}, said {said}"


def test_a_gpt_sw3_folder_is_read_and_run_as_gpt2(tmp_path):
    """A folder whose config names model_type 'gpt-sw3' and no architectures (transformers builds GPT-2 for it): read as the
    gpt2 family, the same heads as the model object, and run from the folder, each layer recomputed from the weights
    equals what it adds."""
    model, _ = model_and_capture("gpt2")
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["model_type"] == "gpt2"
    cfg.pop("architectures")  # (found by its model_type alone)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt-sw3"}))
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "gpt2"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_pos", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(compscope.load(model), name)), name
    _folder_runs_as_read(tmp_path, hw, random_ids())


def test_stablelm_config_without_a_rotary_share_rotates_a_quarter_as_transformers_does(tmp_path):
    """A StableLM config.json that does not say how much of each head rotates: transformers takes a
    quarter, and so does compscope (not the whole head)."""
    import transformers

    from hf_tiny import D_HEAD

    build(BY_ID["stablelm-sequential-no-bias"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("partial_rotary_factor", None)
    cfg.get("rope_parameters", {}).pop("partial_rotary_factor", None)  # (transformers 4: only the key above)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    assert (getattr(theirs.config, "rope_parameters", None) or vars(theirs.config)).get("partial_rotary_factor", 0.25) == 0.25
    assert compscope.load(tmp_path).rotary.dim == compscope.load(theirs).rotary.dim == D_HEAD // 4


def test_a_config_naming_remote_code_is_read_as_the_native_model(tmp_path):
    """``auto_map`` (remote code, which transformers runs only with ``trust_remote_code``; many hub
    configs of natively supported models keep one, e.g. Falcon's and Phi-3's): not a setting of the
    model, so not refused; the weights read are the native model's."""
    model = build(BY_ID["falcon-mqa-parallel"])
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "configuration_RW.RWConfig", "AutoModelForCausalLM": "modelling_RW.RWForCausalLM"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    ours, ref = compscope.load(tmp_path), compscope.load(model)
    assert all(torch.equal(getattr(ours, n), getattr(ref, n)) for n in ("W_Q", "W_K", "W_V", "W_O"))


def test_stablelm_per_head_qk_gains_are_each_heads_own(capsys):
    """StableLM's ``qk_layernorm``: one LayerNorm per head, each with its own gain, read side by side
    ``(L, heads * d_head)``; giving every head the first head's gains changes the attention (the
    per-head gains are used, not one of them), and the card says so."""
    from compscope.core.heads import Norm

    hw, model, cap = loaded("stablelm-qk-layernorm-per-head")
    nq, nk = hw.qk_norm
    assert nq.kind == nk.kind == "layernorm" and nq.bias is None
    assert tuple(nq.weight.shape) == (hw.n_layers, hw.n_heads * hw.d_head)
    assert tuple(nk.weight.shape) == (hw.n_layers, hw.n_kv_heads * hw.d_head)
    attn = model.model.layers[0].self_attn
    assert torch.equal(nq.weight[0, hw.d_head: 2 * hw.d_head], attn.q_layernorm.norms[1].weight.detach())
    first = lambda n, k: Norm(n.kind, n.weight[:, : hw.d_head].repeat(1, k), None, n.eps)  # noqa: E731
    same = hw.replace(qk_norm=(first(nq, hw.n_heads), first(nk, hw.n_kv_heads)))
    assert (attention_forward(same, 0, cap.resid[0]) - cap.attn_out[0]).abs().max() > 1e-3
    from compscope.core.card import card_rows

    assert dict(card_rows(hw))["QK-norm"] == "layernorm, eps=1e-05, per head (a gain for each head)"
    assert any("LayerNorm-ed per head (a gain for each head)" in n for n in hw.meta.notes)


def test_per_head_qk_gains_that_agree_are_the_shared_gains():
    """A QK-norm's gains (or biases alone) given once per head, all equal, compute what the one
    shared row computes, for queries and for keys read per query head (GQA)."""
    from compscope.core.attention import project
    from compscope.core.heads import Norm

    hw, _, cap = loaded("stablelm-qk-layernorm-per-head")
    r, x = hw.d_head, cap.resid[0]
    x4 = x[:, :, None].expand(-1, -1, hw.n_heads, -1)  # one input per query head
    g = torch.Generator().manual_seed(3)
    for part in ("weight", "bias"):
        rows = [torch.randn(hw.n_layers, r, generator=g) for _ in range(2)]
        one = tuple(Norm("layernorm", *((t, None) if part == "weight" else (None, t)), 1e-5) for t in rows)
        each = tuple(Norm("layernorm", *((t.repeat(1, n), None) if part == "weight" else (None, t.repeat(1, n))), 1e-5)
                     for t, n in zip(rows, (hw.n_heads, hw.n_kv_heads)))
        shared, per_head = hw.replace(qk_norm=one), hw.replace(qk_norm=each)
        for kind, inp in (("Q", x), ("K", x), ("K", x4)):
            torch.testing.assert_close(project(per_head, 0, kind, inp), project(shared, 0, kind, inp), rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant_id", ["llama-gqa-bias", "olmo2-layer-qk-norm", "deepseek-v3-latent-attention",
                                        "deepseek-v3-no-query-latent-yarn-bias"])
def test_one_input_per_query_head_is_read_by_that_head_alone(variant_id):
    """``project`` of ``x: (batch, seq, head, d_model)``, one input per query head: the same input for every
    head gives the queries, keys and values of ``x`` itself (biases included; K/V heads shared by GQA
    repeated), and with a head-own input, head ``h`` reads ``x[:, :, h]`` as every head would (its K/V
    head's weights and bias; with multi-head latent attention, the scale of its latent's norm on that input).
    A QK-norm over all heads of a layer (OLMo-2) mixes the heads' keys: keys per query head are refused."""
    from compscope.core.attention import project

    hw, _, cap = loaded(variant_id)
    x = cap.resid[0]
    assert hw.b_K is not None or variant_id != "llama-gqa-bias"
    g = torch.Generator().manual_seed(4)
    own = x[:, :, None] + 0.5 * torch.randn(*x.shape[:2], hw.n_heads, x.shape[-1], generator=g)
    same = x[:, :, None].expand(-1, -1, hw.n_heads, -1)
    layer_wide = hw.qk_norm_scope == "layer"
    for kind in "QKV":
        if layer_wide and kind == "K":
            for inp in (same, own):
                with pytest.raises(compscope.OptionError, match="layer-wide QK-norm mixes every K head"):
                    project(hw, 0, kind, inp)
            continue
        torch.testing.assert_close(project(hw, 0, kind, same), project(hw, 0, kind, x), rtol=1e-5, atol=1e-5)
        if layer_wide and kind == "Q":
            continue  # (a norm over every query head: head h's queries depend on the other heads' inputs)
        for h in range(hw.n_heads):
            torch.testing.assert_close(project(hw, 0, kind, own)[:, h], project(hw, 0, kind, own[:, :, h])[:, h],
                                       rtol=1e-5, atol=1e-5)


def test_smollm3_layers_without_rotary_and_their_windows_as_transformers_builds_them():
    """SmolLM3's per-layer settings from a config, as transformers builds the model from it: no
    rotary on every ``no_rope_layer_interval``-th layer (or as ``no_rope_layers`` lists), a window
    only with ``use_sliding_window`` on and only on those layers; malformed lists refused."""
    from compscope.errors import LoadError
    from compscope.loading.families.llama import rope_layers
    from compscope.loading.families.smollm3 import SmolLM3

    layer_types = SmolLM3.layer_types

    cfg = {"model_type": "smollm3", "use_sliding_window": True, "sliding_window": 3, "no_rope_layer_interval": 2}
    assert rope_layers(cfg, 4) == [True, False, True, False]
    assert rope_layers({"model_type": "smollm3"}, 8) == [True, True, True, False] * 2  # transformers' default: 4
    assert layer_types(cfg, 4) == ["full_attention", "sliding_attention"] * 2
    assert layer_types({**cfg, "use_sliding_window": False}, 4) == ["full_attention"] * 4
    listed = {**cfg, "layer_types": ["sliding_attention"] * 4}  # as saved; the switch still decides
    assert layer_types(listed, 4) == ["sliding_attention"] * 4
    assert layer_types({**listed, "use_sliding_window": False}, 4) == ["full_attention"] * 4
    for bad in ([1, 0, 1], [1, 2, 1, 0], [1.0, 0, 1, 0], "1010"):
        with pytest.raises(LoadError, match="'no_rope_layers' .* is not one 0 or 1 per layer"):
            rope_layers({"no_rope_layers": bad}, 4)
    from hf_tiny import transformers

    model = transformers.SmolLM3ForCausalLM(transformers.SmolLM3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, no_rope_layers=[0, 1, 1, 0], pad_token_id=0, bos_token_id=1, eos_token_id=2))
    hw = compscope.load(model)
    assert [bool(hw.rotary.inv_freq[i].any()) for i in range(4)] == [False, True, True, False]
    assert any("no rotary (NoPE) on layers 0, 3" in n for n in hw.meta.notes)
    from compscope.core.card import card_rows

    assert "none on 2 layers (NoPE)" in dict(card_rows(hw))["positions"]


def test_qwen2_moe_sliding_layers_are_read_from_the_list_or_refused():
    """transformers 4 and 5 slide different layers of a Qwen2-MoE with use_sliding_window on; a
    config that lists them (as transformers 5 saves it) is read, one that does not is refused."""
    from compscope.errors import UnsupportedModelError
    from compscope.loading.families.llama import Llama

    layer_types = Llama.layer_types
    cfg = {"model_type": "qwen2_moe", "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 2}
    with pytest.raises(UnsupportedModelError, match="use_sliding_window is on and layer_types does not list"):
        layer_types(cfg, 4)
    listed = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
    assert layer_types({**cfg, "layer_types": listed}, 4) == listed
    assert layer_types({**cfg, "use_sliding_window": False}, 4) == ["full_attention"] * 4


def test_granite_scalars_are_folded_where_they_act_and_bad_ones_refused_by_name(tmp_path):
    """Granite's four scalars, by hand: the logit scale is ``attention_multiplier`` (not
    d_head^-1/2), ``W_E`` is ``embedding_multiplier`` times the embedding, ``W_O`` is
    ``residual_multiplier`` times ``o_proj`` (per head: its columns), ``W_U`` the head over
    ``logits_scaling``; the notes say so; a scalar that is not a positive number is refused by name."""
    from compscope.errors import LoadError
    from hf_tiny import D_HEAD

    v = BY_ID["granite-multipliers-gqa"]
    hw, model, _ = loaded(v.id)
    assert hw.scale == pytest.approx(0.3) and hw.scale != D_HEAD**-0.5
    torch.testing.assert_close(hw.W_E, 3.0 * model.get_input_embeddings().weight.T, atol=0, rtol=0)
    o = model.model.layers[1].self_attn.o_proj.weight  # (d_model, heads · d_head)
    torch.testing.assert_close(hw.W_O[1, 2], 0.4 * o[:, 2 * D_HEAD : 3 * D_HEAD], atol=0, rtol=0)
    torch.testing.assert_close(hw.W_U, model.lm_head.weight / 2.5, atol=1e-7, rtol=1e-6)
    assert any("residual multiplier 0.4" in n for n in hw.meta.notes)
    model.save_pretrained(tmp_path)  # a saved config.json: transformers 5 checks the types set on a config object
    saved = json.loads((tmp_path / "config.json").read_text())
    assert compscope.load(tmp_path).scale == pytest.approx(0.3)
    for key, bad in (("residual_multiplier", -0.5), ("attention_multiplier", 0), ("logits_scaling", "2"),
                     ("embedding_multiplier", float("nan"))):
        (tmp_path / "config.json").write_text(json.dumps({**saved, key: bad}))
        with pytest.raises(LoadError, match=key):
            compscope.load(tmp_path)


def test_granite_hybrid_reads_its_attention_layers_alone_and_refuses_configs_without_them(tmp_path):
    """Granite 4's hybrids: compscope's layer k is the model's k-th attention layer (layers 1 and 3
    of 4 here, the notes say so), their heads the modules' own; NoPE unless the config says 'rope'; a
    config that lists no layer types (transformers would build Mamba layers only), none that attend,
    or a type it does not know is refused by name."""
    from compscope.errors import LoadError, UnsupportedModelError
    from hf_tiny import D_HEAD

    hw, model, _ = loaded("granite-hybrid-nope-moe")
    assert hw.n_layers == 2 and not bool(hw.rotary.inv_freq.any())
    assert any("attention on 2 of the model's 4 layers (1, 3;" in n for n in hw.meta.notes)
    assert any("no rotary (NoPE) on any layer" in n for n in hw.meta.notes)
    from compscope.core.card import card_rows

    assert dict(card_rows(hw))["positions"].startswith("none: no rotary on any layer (NoPE)")
    for k, i in enumerate((1, 3)):
        q = model.model.layers[i].self_attn.q_proj.weight  # (heads · d_head, d_model)
        torch.testing.assert_close(hw.W_Q[k].reshape(-1, hw.d_model), q, atol=0, rtol=0)
        o = model.model.layers[i].self_attn.o_proj.weight
        torch.testing.assert_close(hw.W_O[k, 1], 0.5 * o[:, D_HEAD : 2 * D_HEAD], atol=0, rtol=0)  # residual multiplier
    rope, _, _ = loaded("granite-hybrid-rope-dense")
    assert rope.n_layers == 2 and all(bool(f.any()) for f in rope.rotary.inv_freq)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    for types, error, needle in ((None, UnsupportedModelError, "'layer_types' is missing"),
                                 (["mamba"] * 4, UnsupportedModelError, "no attention layer"),
                                 (["mamba", "attention", "conv", "attention"], LoadError, "'layer_types' = .* per layer"),
                                 (["mamba", "attention"], LoadError, r"per layer \(4\)")):
        cfg = {k: v for k, v in saved.items() if k not in ("layer_types", "layers_block_type")}
        (tmp_path / "config.json").write_text(json.dumps(cfg if types is None else {**cfg, "layer_types": types}))
        with pytest.raises(error, match=needle):
            compscope.load(tmp_path)
    _mamba_time_steps_read_past(tmp_path, saved, hw)


def _mamba_time_steps_read_past(folder, saved: dict, hw) -> None:
    """The Mamba layers' time-step settings (transformers 5.1-5.14 write them: their initialisation) do not
    touch the attention: read past, the heads as without them."""
    (folder / "config.json").write_text(json.dumps({**saved, "time_step_min": 0.001, "time_step_max": 0.1,
                                                    "time_step_floor": 1e-4}))
    again = compscope.load(folder)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert torch.equal(getattr(again, name), getattr(hw, name)), name


def test_jamba_reads_every_period_th_layer_from_its_offset_with_its_final_norm_and_refusals(tmp_path):
    """Jamba: the layers ``i % attn_layer_period == attn_layer_offset`` attend (1 and 3 of 4 here),
    with no positional encoding (NoPE) and the final norm ``final_layernorm``; an offset past the
    period, a pattern with no attention layer, and a window (which transformers 4 applies and 5 does
    not) are refused by name."""
    from compscope.errors import LoadError, UnsupportedModelError

    hw, model, _ = loaded("jamba-attention-every-second-layer")
    assert hw.n_layers == 2 and not bool(hw.rotary.inv_freq.any())
    assert any("attention on 2 of the model's 4 layers (1, 3;" in n for n in hw.meta.notes)
    torch.testing.assert_close(hw.W_K[1].reshape(-1, hw.d_model), model.model.layers[3].self_attn.k_proj.weight,
                               atol=0, rtol=0)
    torch.testing.assert_close(hw.final_norm.weight[0], model.model.final_layernorm.weight, atol=0, rtol=0)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    for change, error, needle in (({"attn_layer_offset": 2}, LoadError, "attn_layer_offset"),
                                  ({"attn_layer_period": 8, "attn_layer_offset": 5}, UnsupportedModelError,
                                   "no attention layer among 4"),
                                  ({"sliding_window": 3}, UnsupportedModelError, "transformers 4 slides")):
        (tmp_path / "config.json").write_text(json.dumps({**saved, **change}))
        with pytest.raises(error, match=needle):
            compscope.load(tmp_path)


def test_bamba_reads_the_listed_attention_layers_with_half_rotary_and_refusals(tmp_path):
    """Bamba: the layers ``attn_layer_indices`` lists attend (1 and 2 of 3 here), rotary on half of each
    head (transformers fixes the factor at 0.5), final norm ``final_layernorm``; no list, or a
    layer number outside the model, is refused by name."""
    from compscope.errors import LoadError, UnsupportedModelError

    hw, model, _ = loaded("bamba-half-rotary")
    assert hw.n_layers == 2 and hw.rotary.dim == hw.d_head // 2
    assert any("attention on 2 of the model's 3 layers (1, 2;" in n for n in hw.meta.notes)
    torch.testing.assert_close(hw.final_norm.weight[0], model.model.final_layernorm.weight, atol=0, rtol=0)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    for indices, error, needle in ((None, UnsupportedModelError, "attn_layer_indices lists no layer"),
                                   ([1, 3], LoadError, r"'attn_layer_indices' = \[1, 3\] is not a list of layer numbers")):
        (tmp_path / "config.json").write_text(json.dumps({**saved, "attn_layer_indices": indices}))
        with pytest.raises(error, match=needle):
            compscope.load(tmp_path)
    _mamba_time_steps_read_past(tmp_path, saved, hw)


def test_exaone4_layer_types_from_its_window_pattern():
    """EXAONE 4.0's local and global layers: a string pattern of ``L`` and ``G`` repeated from layer 0,
    or every n-th layer global (transformers' default 4); without a window every layer is global
    (and rotates: the global layers lose their rotary only beside sliding ones)."""
    from compscope.errors import LoadError
    from compscope.loading.families.exaone import Exaone4

    s, f = "sliding_attention", "full_attention"
    assert Exaone4.layer_types({"sliding_window": 3, "sliding_window_pattern": "LLG"}, 5, "c") == [s, s, f, s, s]
    assert Exaone4.layer_types({"sliding_window": 3, "sliding_window_pattern": 2}, 4, "c") == [s, f, s, f]
    assert Exaone4.layer_types({"sliding_window": 3}, 4, "c") == [s, s, s, f]
    assert Exaone4.layer_types({"sliding_window": None, "sliding_window_pattern": 4}, 3, "c") == [f, f, f]
    with pytest.raises(LoadError, match="c: config key 'sliding_window_pattern' = 'LXG' is not a string of L and G"):
        Exaone4.layer_types({"sliding_window": 3, "sliding_window_pattern": "LXG"}, 3, "c")
    import transformers

    cfg = transformers.Exaone4Config(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_key_value_heads=2,
                                     num_hidden_layers=2, intermediate_size=48, sliding_window=None,
                                     layer_types=[f, f])
    hw = compscope.load(transformers.Exaone4ForCausalLM(cfg))
    assert hw.sliding_window == (None, None) and bool(hw.rotary.inv_freq.all())


def test_dots1_windows_without_layer_types_are_transformers_defaults():
    """dots.llm1 without ``layer_types``: transformers slides the layers from ``max_window_layers`` (62)
    up wherever a window is set, its default 4096 where the config states none; a window set to
    None slides none. With the types listed, the model object reads as transformers built it."""
    import transformers

    from compscope.loading.families.qwen3 import Qwen3

    s, f = "sliding_attention", "full_attention"
    assert Qwen3.layer_types({"model_type": "dots1", "max_window_layers": 2, "sliding_window": 8}, 4, "c") == [f, f, s, s]
    assert Qwen3.layer_types({"model_type": "dots1", "max_window_layers": 1}, 3, "c") == [f, s, s]
    assert Qwen3.layer_types({"model_type": "dots1", "max_window_layers": 1, "sliding_window": None}, 3, "c") == [f] * 3
    assert Qwen3.layer_types({"model_type": "dots1"}, 3, "c") == [f] * 3  # (from layer 62 up)
    for window in (None, 5):
        cfg = transformers.Dots1Config(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_key_value_heads=2,
                                       num_hidden_layers=2, intermediate_size=48, max_window_layers=1, sliding_window=window,
                                       first_k_dense_replace=2, n_routed_experts=2, num_experts_per_tok=1, n_group=1,
                                       topk_group=1, moe_intermediate_size=16)
        assert cfg.layer_types == [f, f if window is None else s]  # transformers' own rule
        assert compscope.load(transformers.Dots1ForCausalLM(cfg)).sliding_window == (None, window)


def test_lfm2_attention_layers_as_transformers_builds_them(tmp_path):
    """LFM2's attention layers: as ``layer_types`` lists them, else ``full_attn_idxs`` (transformers
    derives the one from the other), else every layer; an LFM2-MoE config without ``layer_types``,
    which transformers cannot build, and a ``num_heads`` that disagrees are refused by key; the
    configs' ``tie_embedding`` is read as ``tie_word_embeddings``."""
    import json

    import transformers

    from compscope.errors import LoadError
    from compscope.loading.families.lfm2 import Lfm2

    for idxs in ([1, 3], [0], None):
        cfg = transformers.Lfm2Config(num_hidden_layers=4, full_attn_idxs=idxs)
        expect = [i for i, t in enumerate(cfg.layer_types) if t != "conv"]  # transformers' own rule
        assert Lfm2.attention_layers({"full_attn_idxs": idxs}, 4, "c") == expect
    assert Lfm2.attention_layers({"layer_types": ["conv", "full_attention"]}, 2, "c") == [1]
    with pytest.raises(LoadError, match="c: config key 'full_attn_idxs' = \\[4\\] is not a list of layer indices below 4"):
        Lfm2.attention_layers({"full_attn_idxs": [4]}, 4, "c")
    with pytest.raises(LoadError, match="c: an LFM2-MoE config without 'layer_types'"):
        Lfm2.attention_layers({"model_type": "lfm2_moe"}, 4, "c")
    with pytest.raises(compscope.UnsupportedModelError, match="c: no attention layer among 2"):
        Lfm2.attention_layers({"layer_types": ["conv", "conv"]}, 2, "c")
    with pytest.raises(compscope.UnsupportedModelError, match="'layer_types' = \\['conv', 'sliding_attention'\\]"):
        Lfm2.attention_layers({"layer_types": ["conv", "sliding_attention"]}, 2, "c")

    from hf_tiny import BY_ID, build

    model = build(BY_ID["lfm2-conv-attention"])
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    hw = compscope.load(tmp_path)
    assert torch.equal(hw.W_U, hw.W_E.T)  # tied: the file holds no lm_head
    for key, value, match in (("num_heads", 3, "'num_heads' = 3 and 'num_attention_heads' = 4 disagree"),
                              ("tie_embedding", False, "no unembedding")):
        bad = {k: v for k, v in cfg.items() if k != "tie_word_embeddings"} | {key: value}
        (tmp_path / "config.json").write_text(json.dumps(bad))
        if key == "tie_embedding":  # not tied, no lm_head in the file: read without an unembedding, and said
            assert hw.W_U is not None and compscope.load(tmp_path).W_U is None
            assert any(match in n for n in compscope.load(tmp_path).meta.notes)
            assert transformers.AutoConfig.from_pretrained(tmp_path).tie_word_embeddings is False  # as transformers reads it
        else:
            with pytest.raises(LoadError, match=match):
                compscope.load(tmp_path)


def test_nemotron_h_blocks_and_nvidias_own_files(tmp_path):
    """Nemotron-H's attention blocks: from ``layers_block_type`` (older names too) or the configs'
    ``hybrid_override_pattern``, as many blocks as types (``num_hidden_layers`` not read), the head
    width transformers' default 128 where none is stated; a folder as NVIDIA publishes it (tensors
    under ``backbone.``, the pattern string, keys transformers does not read) is read as the model
    object, and transformers runs it to what compscope recomputes."""
    import json

    import safetensors.torch

    from compscope.data.runner import layer_state, runner_for
    from compscope.errors import LoadError
    from compscope.loading.families.nemotron_h import NemotronH, block_types
    from hf_tiny import BY_ID, build, random_ids

    assert block_types({"hybrid_override_pattern": "M*-E"}) == ["linear_attention", "full_attention", "mlp", "moe"]
    assert block_types({"layers_block_type": ["mamba", "attention"]}) == ["linear_attention", "full_attention"]
    assert block_types({}) == ["linear_attention", "moe", "full_attention", "mlp"]  # transformers' default
    assert NemotronH.attention_layers({"hybrid_override_pattern": "M*M*-"}, 3, "c") == [1, 3]
    with pytest.raises(LoadError, match="c: config key 'hybrid_override_pattern' = 'M\\*X' is not a string of"):
        block_types({"hybrid_override_pattern": "M*X"}, "c")
    with pytest.raises(compscope.UnsupportedModelError, match="c: no attention block among"):
        NemotronH.attention_layers({"hybrid_override_pattern": "MM-"}, 3, "c")

    model = build(BY_ID["nemotron-h-mamba-attention-mlp"])
    ref = compscope.load(model)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("layers_block_type", "layer_types", "head_dim"):
        cfg.pop(key, None)
    cfg.update(hybrid_override_pattern="M*-*M", num_hidden_layers=52, attention_head_dim=8, rope_theta=10000,
               attention_bias=False, residual_in_fp32=False, rescale_prenorm_residual=True, mamba_num_heads=8,
               mamba_head_dim=8, mamba_n_groups=1, mamba_chunk_size=4)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(compscope.WeightError, match=r"q_proj.weight. has shape \(32, 32\), expected \(512, 32\)"):
        compscope.load(tmp_path)  # no head_dim: transformers' 128 (4 heads of it), which these weights are not
    cfg["head_dim"] = 8
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (f,) = tmp_path.glob("*.safetensors")
    saved = safetensors.torch.load_file(f)
    tensors = {k.replace("model.", "backbone.", 1) if k.startswith("model.") else k: v for k, v in saved.items()}
    if "backbone.embedding.weight" in tensors:  # (the name some transformers 5 releases save it under)
        tensors["backbone.embeddings.weight"] = tensors.pop("backbone.embedding.weight")
    safetensors.torch.save_file(tensors, f, metadata={"format": "pt"})  # (transformers 5 writes NVIDIA's names too)
    assert "backbone.embeddings.weight" in tensors and not any(k.startswith("model.") for k in tensors)
    hw = compscope.load(tmp_path)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    # the embedding's name in the files transformers 5.3-5.15 write (and read back), under either prefix
    for prefix in ("backbone.", "model."):
        older = {(prefix + k[len("backbone."):] if k.startswith("backbone.") else k)
                 .replace(".embeddings.weight", ".embedding.weight"): v for k, v in tensors.items()}
        assert prefix + "embedding.weight" in older and "lm_head.weight" in older
        safetensors.torch.save_file(older, f, metadata={"format": "pt"})
        again = compscope.load(tmp_path)
        assert torch.equal(again.W_E, ref.W_E) and torch.equal(again.W_U, ref.W_U), prefix
    safetensors.torch.save_file(tensors, f, metadata={"format": "pt"})
    assert hw.attn_norm.eps == ref.attn_norm.eps and torch.equal(hw.final_norm.weight, ref.final_norm.weight)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    tr = runner.trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_minimax_m2_folder_with_the_model_makers_keys(tmp_path):
    """A MiniMax-M2 folder as MiniMax publishes it: ``rotary_dim`` (no ``partial_rotary_factor``), the
    top-level ``rope_theta``, and keys of their own code that say what transformers computes anyway
    (accepted) or something else (refused by name); read as the model object, and run by transformers
    to what compscope recomputes."""
    import json

    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["minimax-m2-layer-qk-norm-rotary-dim"])
    ref = compscope.load(model)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("rope_parameters", None)
    cfg.pop("partial_rotary_factor", None)
    cfg.update(rotary_dim=4, rope_theta=5000.0, use_qk_norm=True, qk_norm_type="per_layer", attn_type_list=[1, 1],
               use_mtp=True, num_mtp_modules=3, layernorm_full_attention_beta=1.0, swa_rope_theta=-1.0,
               scoring_func="sigmoid", use_routing_bias=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    assert hw.rotary.dim == ref.rotary.dim == 4 and torch.equal(hw.rotary.inv_freq, ref.rotary.inv_freq)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    tr = runner_for(tmp_path, progress=False, device="cpu").trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    for key, value in (("qk_norm_type", "per_head"), ("attn_type_list", [0, 1]), ("use_qk_norm", False)):
        (tmp_path / "config.json").write_text(json.dumps({**cfg, key: value}))
        with pytest.raises(compscope.UnsupportedModelError, match=f"does not support these config settings: {key}="):
            compscope.load(tmp_path)


def test_the_runner_stays_within_the_original_context_where_the_model_changes_past_it():
    """Ministral 3's queries are scaled past the original context (Llama 4's temperature), and
    LongRoPE turns longer sequences at other frequencies: what compscope reads holds within that
    context, so the data runner takes sequences up to it and refuses longer ones, by name."""
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    for vid, n in (("ministral3-yarn-temperature-sliding", 16), ("phi4-mini-longrope-partial", None),
                   ("phimoe-layernorm-biases-longrope", 16)):
        model = build(BY_ID[vid])
        if n is None:
            n = model.config.rope_parameters.get("original_max_position_embeddings") or model.config.original_max_position_embeddings
        runner = runner_for(model)
        assert runner.n_ctx == n, vid
        runner.trace(random_ids(seq=n))
        with pytest.raises(compscope.OptionError, match=str(n)):
            runner.trace(random_ids(seq=n + 1))


def test_flex_olmo_rotary_base_where_the_config_states_none_is_transformers_default():
    import transformers

    cfg = transformers.FlexOlmoConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_key_value_heads=2,
                                      num_hidden_layers=1, intermediate_size=48, num_experts=2, num_experts_per_tok=1,
                                      pad_token_id=0, eos_token_id=1)
    model = transformers.FlexOlmoForCausalLM(cfg)
    hw = compscope.load(model)
    want = model.model.rotary_emb.inv_freq  # transformers' own frequencies (base 500 000)
    torch.testing.assert_close(hw.rotary.inv_freq[0], want.to(hw.rotary.inv_freq.dtype), rtol=1e-6, atol=0)


def test_granite_swa_layer_types_and_rotary_bases_as_transformers_builds_them(tmp_path):
    """Granite SWA: without ``layer_types``, transformers' default (every fourth layer global, from
    layer 0); ``layer_rope_theta`` one base per layer (0: none), anything else refused by key."""
    import json

    import transformers

    from compscope.errors import LoadError
    from compscope.loading.families.granite import GraniteSWA
    from hf_tiny import BY_ID, build

    if not hasattr(transformers, "GraniteSWAConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Granite SWA")
    cfg = transformers.GraniteSWAConfig(num_hidden_layers=6)
    assert GraniteSWA.layer_types({}, 6, "c") == cfg.layer_types
    if hasattr(transformers, "GraniteMoeSWAConfig"):  # (its MoE sibling: the same rule)
        assert GraniteSWA.layer_types({}, 6, "c") == transformers.GraniteMoeSWAConfig(num_hidden_layers=6).layer_types
    build(BY_ID["granite-swa-sinks-layer-theta"]).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    for bad in ([900.0, 0], [900.0, 0.5, 10.0], [900.0, True, 10.0]):
        (tmp_path / "config.json").write_text(json.dumps({**saved, "layer_rope_theta": bad}))
        with pytest.raises(LoadError, match="config key 'layer_rope_theta' = .* is not a rotary base"):
            compscope.load(tmp_path)


@pytest.mark.parametrize("vid", ["minimax-m2-layer-qk-norm-rotary-dim", "solar-open-qkv-bias-moe",
                                 "nemotron-h-mamba-attention-mlp"])
def test_a_config_without_head_dim_has_transformers_default_128(tmp_path, vid):
    """These families' configs default the head width to 128 (not the residual width over the
    heads): a folder whose config.json leaves it out is read with 128, as transformers builds it,
    and these tiny weights (8 per head) are refused by the tensor at fault."""
    import json

    import transformers

    from hf_tiny import BY_ID, build

    model = build(BY_ID[vid])
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("head_dim")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert transformers.AutoConfig.from_pretrained(tmp_path).head_dim == 128
    with pytest.raises(compscope.WeightError, match=r"q_proj.weight' has shape \(32, 32\), expected \(512, 32\)"):
        compscope.load(tmp_path)


def test_solar_open_reads_a_whole_head_rotary_share_and_refuses_a_part(tmp_path):
    """Solar Open's config as transformers 5.17 writes it (``partial_rotary_factor`` 1.0 at the top and in
    ``rope_parameters``) reads as without it; a share below 1, which transformers' Solar Open cannot turn (its
    rotation takes whole heads), is refused by the key at fault, at the top or in ``rope_parameters``."""
    import json

    from hf_tiny import BY_ID, build

    build(BY_ID["solar-open-qkv-bias-moe"]).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    plain = {k: v for k, v in saved.items() if k != "partial_rotary_factor"}
    rope = {k: v for k, v in (saved.get("rope_parameters") or {"rope_theta": 10000.0}).items()
            if k != "partial_rotary_factor"}
    (tmp_path / "config.json").write_text(json.dumps({**plain, "rope_parameters": rope}))
    want = compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**plain, "partial_rotary_factor": 1.0,
                                                      "rope_parameters": {**rope, "partial_rotary_factor": 1.0}}))
    got = compscope.load(tmp_path)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    assert torch.equal(got.rotary.inv_freq, want.rotary.inv_freq)
    for where, config in (("partial_rotary_factor=0.5", {**plain, "partial_rotary_factor": 0.5}),
                          ("rope_parameters=", {**plain, "rope_parameters": {**rope, "partial_rotary_factor": 0.5}})):
        (tmp_path / "config.json").write_text(json.dumps(config))
        with pytest.raises(compscope.UnsupportedModelError, match=f"solar_open family does not support .*{where}"):
            compscope.load(tmp_path)


def test_an_initializer_factor_in_the_config_is_read_past(tmp_path):
    """``initializer_factor`` (an initialisation setting: transformers 5.17 writes it into AIMv2's text config) is
    read past as ``initializer_range`` is: the same heads."""
    import json

    from hf_tiny import BY_ID, build

    build(BY_ID["aimv2-text-rms-biases"]).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "initializer_factor"}))
    want = compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**saved, "initializer_factor": 2.0}))
    got = compscope.load(tmp_path)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_O", "W_E"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


def test_exaone3_folder_in_lgs_own_names_and_keys(tmp_path):
    """EXAONE 3.x as LG publishes it: weights under ``transformer.h.{i}.attn.attention`` (``out_proj``,
    ``ln_1``, ``wte``, ``ln_f``; transformers 5 writes them so too) and the config keys ``num_layers``
    and ``layer_norm_epsilon``: read as the model object, and run by transformers to what compscope
    recomputes."""
    import json

    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["exaone3-llama-under-lg-names"])
    ref = compscope.load(model)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["num_layers"], cfg["layer_norm_epsilon"] = cfg.pop("num_hidden_layers"), cfg.pop("rms_norm_eps")
    cfg.update(activation_function="silu", embed_dropout=0.0)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    assert hw.attn_norm.eps == ref.attn_norm.eps and hw.n_layers == ref.n_layers
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    tr = runner_for(tmp_path, progress=False, device="cpu").trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


def test_exaone_moe_windows_as_transformers_builds_them():
    """EXAONE MoE without a window in its config: transformers' 4096, three layers in four sliding and
    the fourth global without rotary; the model object reads as transformers built it."""
    import transformers

    from compscope.loading.families.exaone import ExaoneMoe

    if not hasattr(transformers, "ExaoneMoeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no EXAONE MoE")
    cfg = transformers.ExaoneMoeConfig(num_hidden_layers=8)
    assert ExaoneMoe.layer_types({}, 8, "c") == cfg.layer_types and cfg.sliding_window == 4096
    small = transformers.ExaoneMoeConfig(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_key_value_heads=2,
                                         num_hidden_layers=4, intermediate_size=48, moe_intermediate_size=16,
                                         num_experts=2, num_experts_per_tok=1, pad_token_id=0, eos_token_id=1)
    hw = compscope.load(transformers.ExaoneMoeForCausalLM(small))
    assert hw.sliding_window == (4096, 4096, 4096, None) and not bool(hw.rotary.inv_freq[3].any())


def test_olmo_hybrid_folder_and_its_rotary_as_transformers_builds_them(tmp_path):
    """OLMo-hybrid as transformers saves it (the attention layers' output norm as feedforward_layer_norm,
    its renaming of AllenAI's names run backwards): read as the model object and run by transformers to
    what compscope recomputes; a config whose rope base is null (the released checkpoints') has no rotary,
    as transformers builds none, and transformers' default layer types are read."""
    import json

    import transformers

    from compscope.data.runner import layer_state, runner_for
    from compscope.loading.families.olmo import OlmoHybrid
    from hf_tiny import BY_ID, build, random_ids

    if not hasattr(transformers, "OlmoHybridConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no OLMo-hybrid")
    for n in (4, 8, 2):
        expect = [i for i, t in enumerate(transformers.OlmoHybridConfig(num_hidden_layers=n).layer_types)
                  if t == "full_attention"]
        assert OlmoHybrid.attention_layers({}, n, "c") == expect
    model = build(BY_ID["olmo-hybrid-deltanet-attention"])
    ref = compscope.load(model)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert torch.equal(hw.attn_out_norm.weight, ref.attn_out_norm.weight)
    tr = runner_for(tmp_path, progress=False, device="cpu").trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": None}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    nope = compscope.load(tmp_path)
    assert not bool(nope.rotary.inv_freq.any())
    assert transformers.AutoModelForCausalLM.from_pretrained(tmp_path).model.rotary_emb is None
    tr = runner_for(tmp_path, progress=False, device="cpu").trace(random_ids())
    for layer in range(nope.n_layers):
        torch.testing.assert_close(layer_state(nope, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("k, prefix, rest", [(2, 1, 2), (3, 2, 4), (0, 1, 3), (5, 1, 4)])
def test_cohere2_moe_layers_from_a_config_without_layer_types_are_transformers_own(tmp_path, k, prefix, rest):
    """Cohere 2 MoE saved without ``layer_types`` and ``mlp_layer_types`` (as a config with
    ``first_k_dense_replace`` states them): which layers slide and which rotate (the sliding ones,
    and the dense prefix where its pattern is 1) are what transformers builds from it."""
    import transformers

    if not hasattr(transformers, "Cohere2MoeConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Cohere2MoeConfig")
    cfg = dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
               num_hidden_layers=5, intermediate_size=48, sliding_window=3, num_experts=2, num_experts_per_tok=1,
               rms_norm_eps=1e-5, first_k_dense_replace=k, prefix_dense_sliding_window_pattern=prefix,
               sliding_window_pattern=rest)
    model = transformers.Cohere2MoeForCausalLM(transformers.Cohere2MoeConfig(**cfg))
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    for key in ("layer_types", "mlp_layer_types"):  # (transformers 5.9, its first release, states no mlp_layer_types)
        saved.pop(key, None)
    (tmp_path / "config.json").write_text(json.dumps({**saved, "first_k_dense_replace": k}))
    hw = compscope.load(tmp_path)
    attn = [layer.self_attn for layer in model.model.layers]
    assert list(hw.sliding_window) == [a.sliding_window for a in attn]
    assert [bool(f.any()) for f in hw.rotary.inv_freq] == [a.sliding_window is not None or a.force_rope for a in attn]


# ---------------------------------------------------------------------------- configs as the hubs state them


def test_cwm_config_without_rope_or_layer_types_reads_as_transformers_builds_it(tmp_path):
    """CWM's config with neither rope settings nor ``layer_types``: transformers' Llama 3 rope (base 1e6,
    factor 16) and its rule, layers 0 and 4 global, the others sliding; compscope reads the same."""
    import transformers

    if not hasattr(transformers, "CwmConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no CWM")
    build(BY_ID["cwm-every-fourth-global"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("layer_types", "rope_parameters", "rope_scaling", "rope_theta"):
        cfg.pop(key, None)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert model.config.layer_types == ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"]
    assert hw.sliding_window == (None, 3, 3, 3, None)
    torch.testing.assert_close(hw.rotary.inv_freq[0].float(), model.model.rotary_emb.inv_freq.float())
    assert not torch.allclose(hw.rotary.inv_freq[0], 1e6 ** -(torch.arange(0, D_HEAD, 2, dtype=torch.float64) / D_HEAD))


def test_sarvam_moe_config_as_released_reads_its_defaults(tmp_path):
    """Sarvam's config without ``use_qk_norm`` or a partial rotary factor, its biases switched by
    ``use_qkv_bias`` and its experts under their other names: QK-norm on, rotary on all of each head,
    q/k/v biased (not the output), as transformers builds the model (GLM-4.5's classes)."""
    import transformers

    if not hasattr(transformers, "SarvamMoEConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Sarvam MoE")
    build(BY_ID["sarvam-moe-full-rotary-qk-norm"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("use_qk_norm", "attention_bias", "n_routed_experts", "n_shared_experts"):
        cfg.pop(key)
    cfg["rope_parameters"].pop("partial_rotary_factor", None)
    cfg.update(use_qkv_bias=True, num_experts=4, num_shared_experts=1, architectures=["SarvamMoEForCausalLM"])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    attn = model.model.layers[0].self_attn
    assert model.config.use_qk_norm and attn.q_proj.bias is not None and attn.o_proj.bias is None
    hw = compscope.load(tmp_path)
    assert hw.qk_norm is not None and hw.rotary.dim == D_HEAD and hw.b_Q is not None and hw.b_O is None
    torch.testing.assert_close(hw.rotary.inv_freq[0].float(), model.model.rotary_emb.inv_freq.float())
    torch.testing.assert_close(hw.b_Q[0].flatten(), attn.q_proj.bias.detach(), atol=0, rtol=0)


def test_hy_v3_reads_its_mtp_layer_out_and_refuses_a_window_it_does_not_apply(tmp_path):
    """HY-V3's files hold a multi-token-prediction layer after the last (``model.layers.{L}``), which
    transformers does not build: read as the model without it. Its attention takes no window, so a
    config stating one is refused by name rather than read as a window the model does not apply."""
    import transformers
    from safetensors.torch import load_file, save_file

    if not hasattr(transformers, "HYV3Config"):
        pytest.skip(f"transformers {transformers.__version__} has no HY-V3")
    build(BY_ID["hy-v3-qk-norm-biases-moe"]).save_pretrained(tmp_path)
    want = compscope.load(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors.update({k.replace("layers.1.", "layers.2."): v.clone() for k, v in tensors.items() if ".layers.1." in k})
    save_file(tensors, tmp_path / "model.safetensors")
    got = compscope.load(tmp_path)
    assert got.n_layers == 2 and torch.equal(got.W_Q, want.W_Q) and torch.equal(got.W_O, want.W_O)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "sliding_window": 4}))
    with pytest.raises(compscope.CompscopeError, match="sliding_window"):
        compscope.load(tmp_path)


def test_lfm3_config_without_rope_or_layer_types_reads_as_transformers_builds_it(tmp_path):
    """LFM3's config without ``rope_parameters`` or ``layer_types``: transformers' defaults, layer 2
    global with the proportional map (base 1e6, half of the pairs turning), layer 4 sliding (base
    1e4), the rest convolutions; compscope reads the same weights and frequencies. Without its gate
    or sandwich norm the model has neither, and compscope reads neither."""
    import transformers

    if not hasattr(transformers, "Lfm3Config"):
        pytest.skip(f"transformers {transformers.__version__} has no LFM3")
    model = build(BY_ID["lfm3-gated-proportional-sliding"])
    model.save_pretrained(tmp_path)
    want = compscope.load(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("rope_parameters", "layer_types"):
        cfg.pop(key)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    got = compscope.load(tmp_path)
    assert torch.equal(got.rotary.inv_freq, want.rotary.inv_freq) and torch.equal(got.W_G, want.W_G)
    rope = model.model.rotary_emb
    torch.testing.assert_close(got.rotary.inv_freq.float(), torch.stack([rope.full_attention_inv_freq,
                                                                         rope.sliding_attention_inv_freq]))
    assert int((got.rotary.inv_freq[0] == 0).sum()) == D_HEAD // 4 and bool((got.rotary.inv_freq[1] > 0).all())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "use_attention_gate": False, "use_sandwich_norm": False}))
    plain = compscope.load(tmp_path)
    assert plain.W_G is None and plain.attn_out_norm is None


def test_flint_layer_types_rule_and_files_sink_name(tmp_path):
    """Flint's default layer types (layers 0, 1, every fourth from 1 and the last global) are
    transformers'; a folder whose config lists none reads them, the global layers without rotary; its
    files name the sinks ``softmax_offset`` (transformers' save writes that name), read as the sinks."""
    import transformers

    from compscope.loading.families.qwen3 import Flint

    if not hasattr(transformers, "FlintConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Flint")
    for n in (5, 9, 12):
        assert Flint.layer_types({"sliding_window": 3}, n, "c") == transformers.FlintConfig(num_hidden_layers=n).layer_types
    model = build(BY_ID["flint-sinks-nope-global"])
    model.save_pretrained(tmp_path)
    from safetensors import safe_open
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        assert any(k.endswith("self_attn.softmax_offset") for k in f.keys())
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("layer_types")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    assert hw.sliding_window == (None, None, 3, 3, None)
    assert [bool(f.any()) for f in hw.rotary.inv_freq] == [False, False, True, True, False]
    torch.testing.assert_close(hw.sinks[2], model.model.layers[2].self_attn.sinks.detach(), atol=0, rtol=0)
    cfg.pop("sliding_window")  # transformers' default window, 513
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert transformers.AutoConfig.from_pretrained(tmp_path).sliding_window == 513
    assert compscope.load(tmp_path).sliding_window == (None, None, 513, 513, None)


def test_kolibri1_layer_types_rule_and_files_norm_name(tmp_path):
    """Kolibri 1's default layer types (every fifth global) are transformers'; its files name the norm
    on the attention output ``post_attn_norm`` (transformers renames it): read either way, equal."""
    import transformers

    from compscope.loading.families.kolibri import Kolibri1

    if not hasattr(transformers, "Kolibri1Config"):
        pytest.skip(f"transformers {transformers.__version__} has no Kolibri 1")
    for n in (5, 11):
        assert Kolibri1.layer_types({"sliding_window": 3}, n, "c") == transformers.Kolibri1Config(
            num_hidden_layers=n).layer_types
    model = build(BY_ID["kolibri1-post-norm-nope-global"])
    model.save_pretrained(tmp_path)
    from safetensors import safe_open
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        assert any(k.endswith(".post_attn_norm.weight") for k in f.keys())
    got, want = compscope.load(tmp_path), compscope.load(model)
    assert torch.equal(got.attn_out_norm.weight, want.attn_out_norm.weight)
    torch.testing.assert_close(got.attn_out_norm.weight[4], model.model.layers[4].post_self_attn_layernorm.weight.detach(),
                               atol=0, rtol=0)
    assert [bool(f.any()) for f in got.rotary.inv_freq] == [True, True, True, True, False]


def test_lara_mini_default_pattern_and_refused_types(tmp_path):
    """Lara-mini's released pattern (linear, sliding, linear, full, sliding) where the config lists
    none is transformers'; its global layers turn by nothing (NoPE); an unknown layer type is refused."""
    import transformers

    from compscope.loading.families.qwen3_5 import LaraMini

    if not hasattr(transformers, "LaraMiniConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Lara-mini")
    for n in (5, 12):
        assert LaraMini.types({}, n) == transformers.LaraMiniConfig(num_hidden_layers=n).layer_types
    build(BY_ID["lara-mini-sliding-nope-deltanet"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("layer_types")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    assert hw.sliding_window == (3, None, 3) and [bool(f.any()) for f in hw.rotary.inv_freq] == [True, False, True]
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "layer_types": ["linear_attention", "chunked_attention"] * 2
                                                      + ["full_attention"]}))
    with pytest.raises(compscope.CompscopeError, match="layer_types"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "sliding_window": None}))  # (sliding layers need one)
    with pytest.raises(compscope.CompscopeError, match="sliding_window is not set"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "sliding_window"}))
    assert compscope.load(tmp_path).sliding_window == (512, None, 512)  # (transformers' default)


def test_internlm3_configs_qkv_bias_key_turns_the_biases_on(tmp_path):
    """InternLM3's released configs name transformers' attention_bias and mlp_bias ``qkv_bias`` and
    ``bias``: read so, the biases transformers builds from them are read."""
    import transformers

    if not hasattr(transformers, "InternLM3Config"):
        pytest.skip(f"transformers {transformers.__version__} has no InternLM3")
    build(BY_ID["internlm3-biases"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("attention_bias"), cfg.pop("mlp_bias")
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "qkv_bias": True, "bias": True}))
    hw = compscope.load(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    torch.testing.assert_close(hw.b_Q[0].flatten(), model.model.layers[0].self_attn.q_proj.bias, atol=0, rtol=0)
    torch.testing.assert_close(hw.b_O[0], model.model.layers[0].self_attn.o_proj.bias, atol=0, rtol=0)


def test_hyperclovax_without_its_post_norm_has_the_residual_multiplier_in_w_o():
    """HyperCLOVA X with ``use_post_norm`` off: no attention-output norm to hold the residual
    multiplier, which goes into ``W_O`` and ``b_O`` as Granite's; with it on, into the norm's gain."""
    import transformers

    if not hasattr(transformers, "HyperCLOVAXConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no HyperCLOVA X")
    v = BY_ID["hyperclovax-peri-ln-multipliers"]
    model = build(v, use_post_norm=False)
    hw = compscope.load(model)
    assert hw.attn_out_norm is None and any("W_O (and b_O) include the residual multiplier 0.6" in n for n in hw.meta.notes)
    assert_matches(hw, capture(model, v.kind, random_ids()), f"{v.id} without post norm")
    on = compscope.load(build(v))
    torch.testing.assert_close(on.attn_out_norm.weight, torch.stack(
        [b.post_norm1.weight.detach() for b in build(v).model.layers]) * 0.6)


def test_mellum_config_without_rope_settings_reads_transformers_bases_per_layer_type(tmp_path):
    """Mellum's config without rope settings: transformers' bases, 500000 on global layers and 10000 on
    sliding ones; compscope reads the frequencies the built model turns by on each layer type."""
    import transformers

    if not hasattr(transformers, "MellumConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Mellum")
    build(BY_ID["mellum-sliding-layer-bases"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("rope_parameters", "rope_scaling", "rope_theta"):
        cfg.pop(key, None)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    rotary = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).model.rotary_emb
    for layer, kind in enumerate(["full_attention", "sliding_attention"]):
        torch.testing.assert_close(hw.rotary.inv_freq[layer].float(), getattr(rotary, f"{kind}_inv_freq").float())
    assert float(hw.rotary.inv_freq[0, 1]) == pytest.approx(500_000.0 ** -0.25)


def test_cohere_compass_rope_per_type_head_width_and_hub_config(tmp_path):
    """Cohere Compass: its sliding layer turns at its type's base (700, rotate-half pairs), its
    global layer, whose rope entry is null, by nothing; the logits times its scale; the released config's
    dangling top-level ``rope_theta``/``rope_type`` beside the per-type entries read as transformers
    reads them (dropped); a layer type without an entry is refused by name."""
    import transformers

    if not hasattr(transformers, "CohereCompassTextConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Cohere Compass")
    build(BY_ID["cohere-compass-sliding-rotary-global-nope"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    hub = {**cfg, "rope_parameters": {**cfg["rope_parameters"], "rope_theta": 1.0, "rope_type": "default"}}
    (tmp_path / "config.json").write_text(json.dumps(hub))
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert model.model.layers[0].self_attn.head_dim == D_HEAD
    hw = compscope.load(tmp_path)
    assert hw.d_head == D_HEAD and hw.rotary.style == "half" and hw.sliding_window == (3, None)
    want = 700.0 ** (-torch.arange(0, D_HEAD, 2, dtype=torch.float64) / D_HEAD)
    torch.testing.assert_close(hw.rotary.inv_freq[0], want)
    assert not bool(hw.rotary.inv_freq[1].any())
    torch.testing.assert_close(hw.W_U, model.lm_head.weight.detach() * 0.25)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "rope_parameters": {"sliding_attention": cfg[
        "rope_parameters"]["sliding_attention"]}}))
    with pytest.raises(compscope.CompscopeError, match="full_attention"):
        compscope.load(tmp_path)


def test_apertus_1p5_pruned_head_is_not_read_as_w_u(tmp_path):
    """Apertus 1.5 with its LM head pruned to the first ``output_vocab_size`` tokens: the attention
    reads as with the full head, no ``W_U`` (the notes say why), and the folder still runs on data;
    its full head reads as ``W_U``; a config without rope settings reads transformers' default
    (Llama 3 scaling, base 1.2e7)."""
    import transformers
    from compscope.data.validate import validate

    if not hasattr(transformers, "Apertus1p5TextConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Apertus 1.5")
    full = loaded("apertus1p5-llama3-rope")[0]
    model = build(BY_ID["apertus1p5-llama3-rope"], output_vocab_size=20)
    assert model.lm_head.weight.shape[0] == 20
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.W_U is None and any("pruned to the first 20 of the 61 tokens" in n for n in hw.meta.notes)
    assert not any(n.startswith("no unembedding:") for n in hw.meta.notes)
    assert hw.W_Q.shape == full.W_Q.shape and full.W_U is not None
    torch.testing.assert_close(hw.W_Q[0], model.model.layers[0].self_attn.q_proj.weight.detach().reshape(-1, D_HEAD, D))
    v = validate(str(tmp_path), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)
    assert v.heads
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("rope_parameters")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    plain = compscope.load(tmp_path)
    assert any("Llama 3" in n and "factor 8" in n for n in plain.meta.notes)


def test_muse_glimmer_reads_rope_bases_as_transformers_applies_them(tmp_path):
    """Muse Glimmer's text model saved alone runs on data (as its base model). Its
    ``layer_rope_theta``: transformers turns a layer whose entry is not 0 at the
    global base, so a config stating another base on some layer is refused by name (it would not run
    as it reads); without the key, transformers' default: NoPE every fourth layer back from the last
    (of four, layer 3 alone), the others at the global base."""
    import transformers

    if not hasattr(transformers, "MuseGlimmerTextConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Muse Glimmer")
    from compscope.data.validate import validate

    build(BY_ID["muse-glimmer-gated-nope-global"]).save_pretrained(tmp_path)
    want = compscope.load(tmp_path)
    v = validate(str(tmp_path), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)  # (the base model saved alone: transformers builds no causal LM of this type)
    assert "previous_token" in {h["score"] for h in v.heads} and v.heads
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "layer_rope_theta"}))
    got = compscope.load(tmp_path)
    assert not bool(got.rotary.inv_freq[3].any()) and all(torch.equal(got.rotary.inv_freq[i], want.rotary.inv_freq[0])
                                                          for i in (0, 1, 2))
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "layer_rope_theta": [700.0, 0, 500.0, 0]}))
    with pytest.raises(compscope.UnsupportedModelError, match="layer_rope_theta"):
        compscope.load(tmp_path)
