"""The language model inside a vision-language checkpoint (Gemma 3 from 4B up, LLaVA, Mistral
Small 3.1, Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Cosmos3 Edge, Cohere Compass, Granite 4 Vision, ...: a
``text_config`` inside a config no family reads whole, or the language model's settings at its
top), on tiny random models built from configs (nothing downloaded).

Read back from a saved folder, the heads are those compscope reads from the language model object
itself (another path: a base model's own names and full config); a config saved the way
transformers before 5 saved nested configs (only what differs from the defaults) reads the same;
and transformers runs the folder on text, computing the attention compscope recomputes."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402

transformers = pytest.importorskip("transformers")

from hf_tiny import hf_config, perturbed  # noqa: E402

V = 64
_TEXT = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=64)


def _vlm(kind: str):
    """A tiny random vision-language model of ``kind``, every parameter N(0, 0.3²) from one seed."""
    if kind == "gemma3":
        text = hf_config("Gemma3TextConfig", **_TEXT, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                         query_pre_attn_scalar=8)
        vision = hf_config("SiglipVisionConfig", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14)
        cfg = transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                                        image_token_index=V - 1, boi_token_index=V - 2, eoi_token_index=V - 3)
        model = transformers.Gemma3ForConditionalGeneration(cfg)
    elif kind == "mistral3":  # Mistral Small 3.1: a Mistral language model, Pixtral's vision
        text = hf_config("MistralConfig", **_TEXT, tie_word_embeddings=False)
        vision = hf_config("PixtralVisionConfig", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                           num_attention_heads=2, head_dim=8, image_size=28, patch_size=14)
        cfg = transformers.Mistral3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_index=V - 1)
        model = transformers.Mistral3ForConditionalGeneration(cfg)
    elif kind in ("qwen2_vl", "qwen2_5_vl"):  # Qwen2's attention, multimodal rotary (the ordinary one on text)
        text = {**_TEXT, "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}, "tie_word_embeddings": False}
        text.pop("head_dim")
        if kind == "qwen2_vl":
            vision = dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=1, patch_size=14,
                          spatial_merge_size=2, temporal_patch_size=2)
            cfg = transformers.Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                             video_token_id=V - 2, vision_start_token_id=V - 3, vision_end_token_id=V - 4)
            model = transformers.Qwen2VLForConditionalGeneration(cfg)
        else:
            vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14,
                          spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0])
            cfg = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                                video_token_id=V - 2, vision_start_token_id=V - 3, vision_end_token_id=V - 4)
            model = transformers.Qwen2_5_VLForConditionalGeneration(cfg)
    elif kind == "qwen3_vl":  # Qwen3's attention (QK-norm), multimodal rotary on interleaved sections
        text = {**_TEXT, "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True},
                "tie_word_embeddings": False}
        vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, deepstack_visual_indexes=[0], num_position_embeddings=16)
        cfg = transformers.Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
                                         vision_start_token_id=V - 3, vision_end_token_id=V - 4)
        model = transformers.Qwen3VLForConditionalGeneration(cfg)
    elif kind in ("cosmos3_edge", "cohere_compass"):  # Llama's attention with interleaved multimodal rotary; Cohere 2's
        # block with rotary per layer type (none on the global layer)
        if not hasattr(transformers, "Cosmos3EdgeConfig"):
            pytest.skip(f"transformers {transformers.__version__} has neither Cosmos3 Edge nor Cohere Compass")
        sections = {"rope_type": "default", "rope_theta": 5000.0, "mrope_section": [2, 1, 1]}
        if kind == "cosmos3_edge":
            text = {**_TEXT, "rope_parameters": sections, "tie_word_embeddings": False}
            vision = dict(num_hidden_layers=1, hidden_size=16, intermediate_size=16, num_attention_heads=2,
                          patch_size=14, num_patches=4)
            cfg = transformers.Cosmos3EdgeConfig(text_config=text, vision_config=vision, projector_hidden_size=32,
                                                 image_token_id=V - 1, video_token_id=V - 2, vision_start_token_id=V - 3,
                                                 vision_end_token_id=V - 4)
        else:
            text = {**_TEXT, "sliding_window": 3, "layer_types": ["sliding_attention", "full_attention"],
                    "rope_parameters": {"sliding_attention": sections, "full_attention": None}, "eos_token_id": 2}
            text.pop("head_dim")
            vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14,
                          deepstack_visual_indexes=[0], num_position_embeddings=16)
            cfg = transformers.CohereCompassConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                                   video_token_id=V - 2, vision_start_token_id=V - 3,
                                                   vision_end_token_id=V - 4)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "glm4v_moe":  # GLM-4.5's attention with q/k/v biases, multimodal rotary on half of each head
        if not compscope.data.runner.transformers_at_least(5):  # (4.57 saves the text config under a model type,
            pytest.skip("transformers 4 saves GLM-4.5V's text config as a type it cannot build")  # Glm4vMoe_text,
            # that its own AutoConfig does not know: compscope refuses such a folder, naming the cause)
        text = {**_TEXT, "n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16,
                "first_k_dense_replace": 1, "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5,
                                    "mrope_section": [1, 1, 0]}}
        vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14)
        cfg = transformers.Glm4vMoeConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                          video_token_id=V - 2, image_start_token_id=V - 3, image_end_token_id=V - 4)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind in ("glm4v", "glm_ocr"):  # GLM-4-0414's layers (GLM-4.1V's q/k/v biased), multimodal rotary on half
        if not hasattr(transformers, "GlmOcrConfig" if kind == "glm_ocr" else "Glm4vConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no {kind}")
        text = {**_TEXT, "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5,
                                    "mrope_section": [1, 1, 0]}}
        vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14)
        config_cls = transformers.GlmOcrConfig if kind == "glm_ocr" else transformers.Glm4vConfig
        cfg = config_cls(text_config=hf_config(f"{config_cls.__name__[:-6]}TextConfig", **text).to_dict(),
                         vision_config=vision, image_token_id=V - 1, video_token_id=V - 2, image_start_token_id=V - 3,
                         image_end_token_id=V - 4)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "muse_glimmer":  # normed embeddings, sandwich norms, gainless QK-norm, gates, NoPE global layers
        if not hasattr(transformers, "MuseGlimmerConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no Muse Glimmer")
        text = {**_TEXT, "sliding_window": 3, "layer_types": ["sliding_attention", "full_attention"],
                "layer_rope_theta": [900.0, 0], "rope_parameters": {"rope_type": "default", "rope_theta": 900.0},
                "qk_scale_factor": 2.0, "output_multiplier": 0.5, "post_norm_eps": 1e-6, "eos_token_id": 2,
                "bos_token_id": 1, "pad_token_id": 0}
        vision = dict(num_hidden_layers=1, hidden_size=16, intermediate_size=16, num_attention_heads=2, patch_size=14,
                      pos_emb_height=4, pos_emb_width=4, max_position_embeddings=16)
        cfg = transformers.MuseGlimmerConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                             video_token_id=V - 2, out_hidden_size=32, projector_hidden_size=32)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "granite4_vision":  # Granite's four scalars; images (none here) added to chosen layers' residuals
        if not hasattr(transformers, "Granite4VisionConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no Granite 4 Vision")
        text = {**_TEXT, "embedding_multiplier": 3.0, "logits_scaling": 2.0, "residual_multiplier": 0.5,
                "attention_multiplier": 0.3, "tie_word_embeddings": False}
        text.pop("head_dim")
        vision = dict(model_type="clip_vision_model", hidden_size=64, intermediate_size=16, num_hidden_layers=2,
                      num_attention_heads=2, image_size=28, patch_size=14)
        cfg = transformers.Granite4VisionConfig(text_config=text, vision_config=vision, image_token_index=V - 1,
                                                spatial_target_layers=[0, 1, 1, 1], deepstack_layer_map=[[0, 0]],
                                                downsample_rate="1/2", qformer_config=dict(intermediate_size=16))
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "ernie4_5_vl_moe":  # ERNIE 4.5's attention; its rotary's frequencies pre-permuted for the image axes,
        # the permutation undone on text (every axis the token's position): the ordinary interleaved map
        if not hasattr(transformers, "Ernie4_5_VLMoeConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no ERNIE 4.5 VL")
        text = {**_TEXT, "moe_intermediate_size": [16, 16], "moe_k": 1, "moe_num_experts": 2,
                "moe_num_shared_experts": 1, "use_bias": True, "tie_word_embeddings": False, "pad_token_id": 0,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "mrope_section": [1, 1, 2]}}
        vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, patch_size=14, spatial_merge_size=2,
                      temporal_patch_size=2)
        cfg = transformers.Ernie4_5_VLMoeConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                                video_token_id=V - 2, image_start_token_id=V - 3, image_end_token_id=V - 4,
                                                video_start_token_id=V - 5, video_end_token_id=V - 6)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind in ("idefics3", "smolvlm"):  # a Llama language model held as model.text_model
        text = {**_TEXT, "model_type": "llama", "tie_word_embeddings": False}
        vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                      patch_size=14)
        config_cls = transformers.Idefics3Config if kind == "idefics3" else transformers.SmolVLMConfig
        cfg = config_cls(text_config=text, vision_config=vision, image_token_id=V - 1, scale_factor=1)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "granite_docling":  # Granite's four scalars in a text_model; images (none here) at chosen layers
        if not hasattr(transformers, "GraniteDoclingConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no Granite-Docling")
        text = {**_TEXT, "embedding_multiplier": 3.0, "logits_scaling": 2.0, "residual_multiplier": 0.5,
                "attention_multiplier": 0.3, "tie_word_embeddings": False}
        text.pop("head_dim")
        vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2, image_size=28,
                      patch_size=14, out_hidden_size=32, scale_factor=2, deepstack_visual_indexes=[0])
        text.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)
        cfg = transformers.GraniteDoclingConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                                tie_word_embeddings=False, pad_token_id=0)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "emu3":  # Llama's layers over text and image tokens; a VQ-VAE (not read) for images
        if not hasattr(transformers, "Emu3Config"):
            pytest.skip(f"transformers {transformers.__version__} has no Emu3")
        text = {**_TEXT, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "rope_theta": 700.0}
        vq = dict(codebook_size=8, embed_dim=4, latent_channels=4, base_channels=32, channel_multiplier=[1],
                  num_res_blocks=1, attn_resolutions=[], temporal_downsample_factor=1)
        cfg = transformers.Emu3Config(text_config=text, vq_config=vq, vocabulary_map={"<image>": V - 1})
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "aria":  # Llama's attention in OLMoE's layers (MoE MLPs); Idefics3's vision
        text = {**_TEXT, "moe_num_experts": 2, "moe_topk": 1, "moe_num_shared_experts": 1, "tie_word_embeddings": False,
                "model_type": "aria_text"}
        vision = dict(model_type="idefics3_vision", hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                      patch_size=14)
        cfg = transformers.AriaConfig(text_config=text, vision_config=vision, projector_patch_to_query_dict={4: 4},
                                      image_token_id=V - 1)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "paddleocr_vl":  # ERNIE 4.5's layers, Qwen2.5-Omni's attention: biases on all four, multimodal rotary
        if not hasattr(transformers, "PaddleOCRVLConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no PaddleOCR-VL")
        text = {**_TEXT, "use_bias": True, "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "mrope_section": [2, 1, 1]}}
        vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                      patch_size=14)
        cfg = transformers.PaddleOCRVLConfig(text_config=text, vision_config=vision, image_token_id=V - 1)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "deepseek_ocr2":  # Llama's attention in DeepSeek-V2's layers (a dense, then an MoE MLP); SAM and a
        # Qwen2 encoder for images
        if not hasattr(transformers, "DeepseekOcr2Config"):
            pytest.skip(f"transformers {transformers.__version__} has no DeepSeek-OCR 2")
        text = {**_TEXT, "n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16,
                "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"], "pad_token_id": 0, "bos_token_id": 1,
                "eos_token_id": 2, "attention_bias": True, "rope_parameters": {"rope_type": "default", "rope_theta": 600.0}}
        vision = dict(sam_config=dict(hidden_size=16, output_channels=16, num_hidden_layers=1, num_attention_heads=2,
                                      image_size=64, patch_size=16, window_size=2, global_attn_indexes=[0],
                                      downsample_channels=[16, 32]),
                      encoder_config=dict(hidden_size=32, intermediate_size=16, num_hidden_layers=1,
                                          num_attention_heads=2, num_key_value_heads=2))
        cfg = transformers.DeepseekOcr2Config(text_config=text, vision_config=vision, image_token_id=V - 1)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind == "unlimited_ocr":  # DeepSeek-OCR 2's language model, each layer a reference sliding window (on
        # generated tokens alone: one forward pass, as the runner's, masks causally); SAM and a CLIP encoder for images
        if not hasattr(transformers, "UnlimitedOcrConfig"):
            pytest.skip(f"transformers {transformers.__version__} has no Unlimited-OCR")
        text = {**_TEXT, "n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16,
                "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"], "pad_token_id": 0, "bos_token_id": 1,
                "eos_token_id": 2, "attention_bias": True, "sliding_window": 3, "num_key_value_heads": 4,
                "rope_parameters": {"rope_type": "default", "rope_theta": 600.0}}  # (MHA, as released: transformers'
        # eager attention for it repeats no K/V heads: test_a_failing_forward_pass_is_said_by_name)
        vision = dict(sam_config=dict(hidden_size=16, output_channels=16, num_hidden_layers=1, num_attention_heads=2,
                                      image_size=64, patch_size=16, window_size=2, global_attn_indexes=[0],
                                      downsample_channels=[16, 32]),
                      encoder_config=dict(hidden_size=32, intermediate_size=16, num_hidden_layers=1,
                                          num_attention_heads=2, image_size=64, patch_size=16))
        cfg = transformers.UnlimitedOcrConfig(text_config=text, vision_config=vision, image_token_id=V - 1)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    elif kind in ("molmo2", "molmo2_olmo"):  # OLMo-2's attention in Llama's layers: QK-norm per head (Qwen3-based),
        # or over a layer with the norm after the attention (OLMo-based); marker tokens after the vocabulary
        if not hasattr(transformers, "Molmo2Config"):
            pytest.skip(f"transformers {transformers.__version__} has no Molmo 2")
        olmo = kind == "molmo2_olmo"
        text = {**_TEXT, "additional_vocab_size": 8, "attention_bias": True, "qk_norm_type": "olmo" if olmo else "qwen3",
                "norm_after": olmo, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}
        vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, head_dim=8, image_size=[28, 28], patch_size=14, num_position_embeddings=4)
        adapter = dict(vision_feature_layer=[-1], hidden_size=16, num_attention_heads=2, num_key_value_heads=2,
                       head_dim=8, intermediate_size=16, text_hidden_size=32)
        cfg = transformers.Molmo2Config(text_config=text, vision_config=vision, adapter_config=adapter,
                                        image_start_token_id=V, low_res_image_start_token_id=V + 1,
                                        image_end_token_id=V + 2, image_patch_id=V + 3, frame_start_token_id=V + 4,
                                        frame_end_token_id=V + 5)
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    else:
        text = hf_config("LlamaConfig", **_TEXT, tie_word_embeddings=False)
        vision = hf_config("CLIPVisionConfig", hidden_size=16, intermediate_size=16, num_hidden_layers=2,
                           num_attention_heads=2, image_size=28, patch_size=14)
        cfg = transformers.LlavaConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_index=V - 1)
        model = transformers.LlavaForConditionalGeneration(cfg)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model.eval()


def _same_heads(a, b) -> None:
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    for norm in ("attn_norm", "attn_out_norm"):  # (a norm after the attention instead of before: Molmo 2's OLMo-based)
        x, y = getattr(a, norm), getattr(b, norm)
        assert (x is None) == (y is None) and (x is None or torch.equal(x.weight, y.weight)), norm
    assert a.sliding_window == b.sliding_window
    assert torch.equal(a.rotary.inv_freq, b.rotary.inv_freq) and a.attn_scale == b.attn_scale
    assert (a.qk_norm is None) == (b.qk_norm is None)
    if a.qk_norm is not None:
        assert all(torch.equal(x.weight, y.weight) for x, y in zip(a.qk_norm, b.qk_norm))


def _renamed(tensors: dict, old: str, new: str, under: tuple[str, ...] = ("",)) -> dict:
    """``tensors`` with each name that starts with ``old`` followed by one of ``under`` moved from ``old`` to
    ``new`` (a language model's tensors as another transformers release saves them)."""
    starts = tuple(old + part for part in under)
    return {new + k[len(old):] if k.startswith(starts) else k: v for k, v in tensors.items()}


def _as_transformers_4_saved(folder) -> None:
    """Rewrite the folder's nested text_config as transformers 4 saved it: only what differs from
    its model type's defaults (Gemma 3 4B's lists five keys)."""
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    inner = cfg["text_config"]
    try:
        defaults = transformers.AutoConfig.for_model(inner["model_type"]).to_dict()
    except ValueError:  # (a text model type transformers' AutoConfig does not know by name: Emu3's in transformers 4)
        defaults = type(transformers.AutoConfig.for_model(cfg["model_type"])).sub_configs["text_config"]().to_dict()
    cfg["text_config"] = {k: v for k, v in inner.items() if k == "model_type" or defaults.get(k) != v}
    assert len(cfg["text_config"]) < len(inner)
    path.write_text(json.dumps(cfg))


KINDS = ["gemma3", "llava", "mistral3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "cosmos3_edge", "cohere_compass",
         "muse_glimmer", "glm4v_moe", "glm4v", "glm_ocr", "ernie4_5_vl_moe", "granite4_vision", "idefics3", "smolvlm", "granite_docling", "emu3", "aria", "paddleocr_vl", "molmo2", "molmo2_olmo", "deepseek_ocr2",
         "unlimited_ocr"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_language_model_of_a_vision_language_folder_is_read(tmp_path, kind):
    model = _vlm(kind)
    model.save_pretrained(tmp_path / kind)
    hw = compscope.load(tmp_path / kind)
    inner_model = getattr(model.model, "language_model", None) or model.model.text_model
    ref = compscope.load(inner_model)  # the base model object: its own names and full config
    _same_heads(hw, ref)
    head = model.lm_head.weight.detach() * (model.config.text_config.output_multiplier if kind == "muse_glimmer" else 1)
    if kind in ("granite4_vision", "granite_docling"):  # the logits divided by logits_scaling
        head = head / model.config.text_config.logits_scaling
    assert torch.equal(hw.W_U, head)
    if kind == "muse_glimmer":  # its final norm multiplies by its weight as stored (its layers' norms by 1 + w)
        x = torch.randn(3, hw.d_model, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            want = model.model.language_model.norm(x)
        torch.testing.assert_close(hw.final_norm.apply(x, 0), want, atol=1e-6, rtol=1e-6)
    assert hw.meta.family == {"gemma3": "gemma3", "qwen3_vl": "qwen3", "cosmos3_edge": "cosmos3_edge",
                              "cohere_compass": "cohere_compass", "muse_glimmer": "muse_glimmer",
                              "glm4v_moe": "glm4v_moe_text", "granite4_vision": "granite", "glm4v": "glm4v_text",
                              "glm_ocr": "glm4v_text", "ernie4_5_vl_moe": "ernie4_5",
                              "granite_docling": "granite", "emu3": "emu3", "paddleocr_vl": "paddleocr_vl", "molmo2": "molmo2",
                              "unlimited_ocr": "unlimited_ocr_text",
                              "molmo2_olmo": "molmo2"}.get(kind, "llama")
    inner = {"gemma3": "gemma3_text", "llava": "llama", "mistral3": "mistral", "idefics3": "llama",
             "smolvlm": "llama", "emu3": "emu3_text_model", "molmo2_olmo": "molmo2_text"}.get(kind, f"{kind}_text")
    others = {"emu3": "vq not read",  # (Emu3's image tokenizer: its vq_config; Molmo 2's pooling adapter)
              "molmo2": "adapter, vision not read", "molmo2_olmo": "adapter, vision not read"}.get(kind, "vision not read")
    outer = {"molmo2_olmo": "molmo2"}.get(kind, kind)
    assert any(f"the language model of {'an' if outer[0] in 'aeiou' else 'a'} {outer} model (its text_config, {inner}" in n and others in n
               for n in hw.meta.notes), hw.meta.notes
    _same_heads(compscope.load(model), hw)  # the object itself, as a model object
    _as_transformers_4_saved(tmp_path / kind)
    _same_heads(compscope.load(tmp_path / kind), hw)


def test_without_transformers_a_saved_text_config_is_refused_not_guessed(tmp_path, monkeypatch):
    """A nested config left to transformers' defaults cannot be completed without them: refused."""
    _vlm("gemma3").save_pretrained(tmp_path / "m")
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(compscope.UnsupportedModelError, match=r"m: the language model of a gemma3 model.*needs transformers"):
        compscope.load(tmp_path / "m")


@pytest.mark.parametrize("kind", KINDS)
def test_a_vision_language_folder_runs_on_text(tmp_path, kind):
    """transformers builds the folder as an image-text-to-text model and runs it on token ids alone;
    the runner hooks its language model, whose attention equals what compscope recomputes from the
    weights it read (checked by the runner on its first trace), and the labels come out per head."""
    from compscope.data.head_labels import activation_labels
    from compscope.data.runner import cannot_run, runner_for

    if not compscope.data.runner.transformers_at_least(4, 57):
        pytest.skip("needs transformers >= 4.57")
    if kind == "cohere_compass" and not compscope.data.runner.transformers_at_least(5, 21):
        pytest.skip(f"transformers {transformers.__version__} lays out Cohere Compass's M-RoPE sections otherwise")
    _vlm(kind).save_pretrained(tmp_path / kind)
    assert cannot_run(tmp_path / kind) is None
    runner = runner_for(tmp_path / kind, progress=False, device="cpu")
    assert type(runner.model).__name__.endswith("ForConditionalGeneration")
    runner.trace(torch.randint(0, V - 3, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed
    labels = activation_labels(runner, sequences=2, half=5, progress=False)
    assert labels.mean["induction"].shape == (2, 4)


@pytest.mark.parametrize("kind", ["qwen2_vl", "qwen2_5_vl"])
def test_a_qwen_vl_config_with_its_language_model_at_the_top_reads_and_runs(tmp_path, kind):
    """Qwen2-VL and Qwen2.5-VL as first published: the language model's settings at the top of the
    config (no text_config), its rotary as ``{"type": "mrope", "mrope_section": [...]}``. Read as the
    text_config transformers builds from them: the same heads and frequencies as the nested config
    (multimodal rotary read as the ordinary map, said); transformers runs it, computing the
    attention compscope recomputes. Sections that do not cover a head's rotated pairs are refused."""
    from compscope.data.runner import runner_for

    _vlm(kind).save_pretrained(tmp_path / "nested")
    nested = compscope.load(tmp_path / "nested")
    cfg = json.loads((tmp_path / "nested" / "config.json").read_text())
    inner = cfg.pop("text_config")
    for key in ("model_type", "rope_parameters", "rope_scaling", "rope_theta"):
        inner.pop(key, None)
    cfg.update(inner, rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}, rope_theta=1000000.0)
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "flat" / "model.safetensors").symlink_to(tmp_path / "nested" / "model.safetensors")
    flat = compscope.load(tmp_path / "flat")
    _same_heads(flat, nested)
    assert torch.equal(flat.b_Q, nested.b_Q) and flat.b_O is None and torch.equal(flat.W_U, nested.W_U)
    assert any(f"the language model of {'an' if kind[0] in 'aeiou' else 'a'} {kind} model (its settings kept at the top of the config" in n for n in flat.meta.notes)
    assert any("multimodal rotary (mrope sections [2, 1, 1])" in n for n in flat.meta.notes)
    runner = runner_for(tmp_path / "flat", progress=False, device="cpu")
    runner.trace(torch.randint(0, V - 4, (2, 7), generator=torch.Generator().manual_seed(1)))
    assert runner._agreed
    cfg["rope_scaling"]["mrope_section"] = [2, 1, 2]
    (tmp_path / "flat" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(compscope.LoadError, match=r"flat: rope setting 'mrope_section' = \[2, 1, 2\] is not a list of counts "
                                                  "summing to the 4 rotated pairs"):
        compscope.load(tmp_path / "flat")


@pytest.mark.parametrize("kind, plain_cls, extra", [
    ("qwen2_5_vl", "Qwen2", dict(rope_theta=1000000.0)),
    ("emu3", "Llama", dict(rope_theta=700.0, head_dim=8)),
    ("paddleocr_vl", "Llama", dict(rope_theta=500.0, head_dim=8, attention_bias=True, mlp_bias=True))])
def test_interventions_on_a_vlm_language_model_equal_those_on_the_plain_model_holding_its_weights(kind, plain_cls, extra):
    """The VLM's language model run on text is a plain model with the same weights (Qwen2.5-VL's:
    Qwen2; Emu3's: Llama; PaddleOCR-VL's: Llama with biases on every projection, its multimodal
    rotary the ordinary map on text): every pair's and kind's effect, through the runner hooked
    into the VLM, equals the effect through the plain ``...ForCausalLM`` given its text weights (to
    float32 tolerance)."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for

    vlm = _vlm(kind)
    text = vlm.config.text_config
    theta, extra = extra["rope_theta"], {k: v for k, v in extra.items() if k != "rope_theta"}
    plain = getattr(transformers, f"{plain_cls}ForCausalLM")(hf_config(
        f"{plain_cls}Config", vocab_size=V, hidden_size=text.hidden_size, intermediate_size=text.intermediate_size,
        num_hidden_layers=text.num_hidden_layers, num_attention_heads=text.num_attention_heads,
        num_key_value_heads=text.num_key_value_heads, max_position_embeddings=64, rms_norm_eps=text.rms_norm_eps,
        tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": theta}, **extra)).eval()
    lm = getattr(vlm.model, "language_model", None) or vlm.model.text_model
    missing, unexpected = plain.model.load_state_dict(lm.state_dict(), strict=False)
    assert not missing and not unexpected
    plain.lm_head.load_state_dict(vlm.lm_head.state_dict())
    tokens = torch.randint(0, V - 4, (3, 8), generator=torch.Generator().manual_seed(2))
    ours, theirs = (intervention_effects(runner_for(m), tokens, progress=False).by_kind for m in (vlm, plain))
    for kind in "QKV":
        assert float(theirs[kind].nan_to_num().max()) > 1e-3
        torch.testing.assert_close(ours[kind], theirs[kind], atol=1e-5, rtol=1e-4, equal_nan=True)


def test_a_qwen_vl_language_model_with_yarn_says_both_and_runs():
    """Multimodal rotary beside YaRN scaling (a long-context Qwen2.5-VL): the frequencies YaRN's,
    both said, the attention factor folded; the runner's model computes what compscope recomputes."""
    from compscope.data.runner import runner_for

    text = {**_TEXT, "max_position_embeddings": 256, "tie_word_embeddings": False,
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                             "mrope_section": [2, 1, 1]}}
    text.pop("head_dim")
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0])
    model = transformers.Qwen2_5_VLForConditionalGeneration(transformers.Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
        vision_start_token_id=V - 3, vision_end_token_id=V - 4)).eval()
    hw = compscope.load(model)
    assert any(n.startswith("YaRN rope scaling (factor 4") for n in hw.meta.notes)
    assert any(n.startswith("multimodal rotary (mrope sections [2, 1, 1])") for n in hw.meta.notes)
    runner = runner_for(model)
    runner.trace(torch.randint(0, V - 4, (2, 7), generator=torch.Generator().manual_seed(3)))
    assert runner._agreed


def test_fuyus_language_model_is_read_as_persimmon_and_runs(tmp_path):
    """Fuyu (Adept): its language model is a Persimmon, saved under ``language_model.model.`` with its
    head at ``language_model.lm_head``; read from the folder as the language model object itself, and
    run on token ids alone."""
    from compscope.data.runner import runner_for, transformers_at_least

    if not transformers_at_least(5):
        pytest.skip("transformers 4 builds Fuyu around a Persimmon causal LM of another layout")
    cfg = transformers.FuyuConfig(text_config=dict(vocab_size=V, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                                                   num_hidden_layers=2, max_position_embeddings=64, model_type="persimmon"),
                                  vocab_size=V, hidden_size=32, patch_size=4, num_channels=3)
    model = transformers.FuyuForCausalLM(cfg)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    model.eval().save_pretrained(tmp_path / "fuyu")
    hw = compscope.load(tmp_path / "fuyu")
    _same_heads(hw, compscope.load(model.model.language_model))
    assert hw.meta.family == "persimmon" and torch.equal(hw.W_U, model.lm_head.weight.detach())
    assert any("the language model of a fuyu model" in n for n in hw.meta.notes), hw.meta.notes
    runner = runner_for(tmp_path / "fuyu", progress=False, device="cpu")
    runner.trace(torch.randint(0, V - 3, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("model_type", ["granite", "granite4_vision_text", "granite_docling_text"])
def test_granites_scalars_default_as_transformers_builds_them(model_type):
    """A config without a scalar gets transformers' default for its model type (1, or Granite-Docling's own)."""
    from compscope.loading.families.granite import Granite

    try:
        defaults = transformers.AutoConfig.for_model(model_type)
    except (KeyError, ValueError):
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    for key in ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling"):
        assert Granite.scalar({"model_type": model_type}, "config", key) == getattr(defaults, key), key


@pytest.mark.parametrize("kind", ["ultravbert", "modernvbert", "dual_encoder"])
def test_a_vision_language_encoders_text_model_is_read_and_runs(tmp_path, kind):
    """UltraVBERT, ModernVBERT and a vision-text dual encoder (CLIP-like, a BERT text side) hold their
    text encoder as ``text_model``: read from the folder it is that encoder object's heads, and the
    folder runs on text (the runner's first trace checks the attention it recomputes against the
    model's)."""
    from compscope.data.runner import runner_for

    name = {"ultravbert": "UltraVBertConfig", "modernvbert": "ModernVBertConfig",
            "dual_encoder": "VisionTextDualEncoderConfig"}[kind]
    if not hasattr(transformers, name):
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    ids = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    if kind == "dual_encoder":
        text = hf_config("BertConfig", vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=48, max_position_embeddings=32)
        cfg = transformers.VisionTextDualEncoderConfig.from_vision_text_configs(
            transformers.CLIPVisionConfig(**vision), text)
        text = {"model_type": "bert"}
    elif kind == "ultravbert":
        text = {**_TEXT, "model_type": "ultrabert", "sliding_window": 2, "num_hidden_layers": 3, "mask_token_id": 3, **ids}
    else:
        text = {**_TEXT, "model_type": "modernbert", "local_attention": 4, "num_hidden_layers": 3, "cls_token_id": 1,
                "sep_token_id": 2, **ids}
        for key in ("head_dim", "num_key_value_heads"):
            text.pop(key)
    if kind != "dual_encoder":
        cfg = getattr(transformers, name)(text_config=text, vision_config=vision, image_token_id=V - 1,
                                          pixel_shuffle_factor=1)
    model = perturbed(lambda: transformers.AutoModel.from_config(cfg))
    model.save_pretrained(tmp_path / kind)
    hw, ref = compscope.load(tmp_path / kind), compscope.load(model.text_model)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    assert hw.meta.family == text["model_type"] and not hw.causal
    runner = runner_for(tmp_path / kind, progress=False, device="cpu")
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


def test_a_speech_language_folder_reads_and_runs_as_the_class_its_config_names(tmp_path):
    """Granite Speech wraps a Granite language model beside an audio
    encoder; transformers builds it by the class its config names (no image-text-to-text model),
    and it runs on text alone."""
    from compscope.data.runner import runner_for

    if not hasattr(transformers, "GraniteSpeechConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Granite Speech")
    text = {**_TEXT, "model_type": "granite", "embedding_multiplier": 3.0, "logits_scaling": 2.0,
            "residual_multiplier": 0.5, "attention_multiplier": 0.3, "tie_word_embeddings": False, "pad_token_id": 0}
    text.pop("head_dim")
    cfg = transformers.GraniteSpeechConfig(
        text_config=text, audio_token_index=V - 1, window_size=4, downsample_rate=2,
        encoder_config=dict(num_layers=1, hidden_dim=16, feedforward_mult=1, num_heads=2, dim_head=8, output_dim=8,
                            input_dim=16),
        projector_config=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                              encoder_hidden_size=16))
    model = perturbed(lambda: transformers.GraniteSpeechForConditionalGeneration(cfg))
    model.save_pretrained(tmp_path / "m")
    inner = model.language_model if hasattr(model, "language_model") else model.model.language_model  # (4.57; 5)
    hw, ref = compscope.load(tmp_path / "m"), compscope.load(inner)
    assert torch.equal(hw.W_U, model.lm_head.weight.detach() / 2.0 if hasattr(model, "lm_head") else ref.W_U)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    assert hw.attn_scale == ref.attn_scale == 0.3
    runner = runner_for(tmp_path / "m", progress=False, device="cpu")
    assert type(runner.model).__name__ == "GraniteSpeechForConditionalGeneration"
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("kind", ["blip2", "instructblip"])
def test_blip2s_opt_language_model_is_read_and_runs(tmp_path, kind):
    """BLIP-2 and InstructBLIP hold an OPT language model (``language_model.model.decoder.``) beside
    a vision tower and a Q-Former: read from the folder it is that OPT's heads, and it runs on text."""
    from compscope.data.runner import runner_for

    text = dict(model_type="opt", vocab_size=V, hidden_size=32, ffn_dim=48, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=1, bos_token_id=2, eos_token_id=2,
                tie_word_embeddings=False)
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    qformer = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                   encoder_hidden_size=16, vocab_size=V)
    config_cls, model_cls = {"blip2": ("Blip2Config", "Blip2ForConditionalGeneration"),
                             "instructblip": ("InstructBlipConfig", "InstructBlipForConditionalGeneration")}[kind]
    cfg = getattr(transformers, config_cls)(text_config=text, vision_config=vision, qformer_config=qformer,
                                            num_query_tokens=2, image_token_index=V - 1, tie_word_embeddings=False)
    model = perturbed(lambda: getattr(transformers, model_cls)(cfg))
    model.save_pretrained(tmp_path / kind)
    hw, ref = compscope.load(tmp_path / kind), compscope.load(model.language_model)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_pos", "W_U"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    assert hw.meta.family == "opt"
    runner = runner_for(tmp_path / kind, progress=False, device="cpu")
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("kind", ["qwen2_5_omni", "qwen3_omni_moe"])
def test_an_omni_models_thinker_language_model_is_read_and_runs(tmp_path, kind):
    """Qwen2.5-Omni and Qwen3-Omni keep their language model in the thinker (``thinker_config``'s
    text_config; tensors under ``thinker.model.``, as transformers 5 loads them with
    ``language_model.`` inside, as released without): read from the folder it is that language
    model object's heads, both layouts alike, and it runs on text (the runner's first trace checks
    what it recomputes). Qwen3-Omni's attention sets no window whatever its config says."""
    from safetensors.torch import load_file, save_file

    from compscope.data.runner import runner_for

    omni = {"qwen2_5_omni": "Qwen2_5Omni", "qwen3_omni_moe": "Qwen3OmniMoe"}[kind]
    if not hasattr(transformers, f"{omni}Config") or not compscope.data.runner.transformers_at_least(5):
        pytest.skip(f"transformers {transformers.__version__}: no {omni}, or its thinker laid out otherwise")
    rope = {"rope_type": "default", "rope_theta": 1000.0, "mrope_section": [2, 1, 1]}
    text = {**_TEXT, "rope_parameters": rope}
    audio = dict(num_mel_bins=16, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=16, d_model=16,
                 output_dim=32, n_window=4)
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2)
    if kind == "qwen3_omni_moe":
        text.update(moe_intermediate_size=16, num_experts=2, num_experts_per_tok=1, sliding_window=3,
                    rope_parameters={**rope, "mrope_interleaved": True, "interleaved": True})
        audio.update(n_window_infer=8, downsample_hidden_size=8, conv_chunksize=4)
        vision.update(deepstack_visual_indexes=[0], num_position_embeddings=16)
    else:
        text.pop("head_dim")
        vision.update(fullatt_block_indexes=[0])
    thinker = getattr(transformers, f"{omni}ThinkerConfig")(text_config=text, audio_config=audio, vision_config=vision)
    cfg = getattr(transformers, f"{omni}Config")(thinker_config=thinker.to_dict(), enable_audio_output=False)
    model = perturbed(lambda: getattr(transformers, f"{omni}ForConditionalGeneration")(cfg))
    model.save_pretrained(tmp_path / kind)
    torch.save({"Chelsie": {"ref": torch.zeros(2)}}, tmp_path / kind / "spk_dict.pt")  # (Qwen2.5-Omni loads its voices)
    inner = model.thinker.model
    hw, ref = compscope.load(tmp_path / kind), compscope.load(getattr(inner, "language_model", inner))
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    assert torch.equal(hw.W_U, model.thinker.lm_head.weight.detach()) and hw.sliding_window == ref.sliding_window
    assert hw.meta.family == {"qwen2_5_omni": "llama", "qwen3_omni_moe": "qwen3"}[kind]
    assert f"the language model of {'an' if kind[0] in 'aeiou' else 'a'} {kind} model (its thinker's text_config, {kind}_text" in hw.meta.notes[0]
    if kind == "qwen3_omni_moe":
        assert not any(hw.sliding_window)
    runner = runner_for(tmp_path / kind, progress=False, device="cpu")
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed
    released = tmp_path / f"{kind}_released"  # as the model makers' files name the thinker's layers
    released.mkdir()
    for f in (tmp_path / kind).iterdir():
        (released / f.name).write_bytes(f.read_bytes())
    stored = load_file(released / "model.safetensors")
    save_file({k.replace("thinker.model.language_model.", "thinker.model."): v for k, v in stored.items()},
              released / "model.safetensors", metadata={"format": "pt"})
    again = compscope.load(released)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(again, field), getattr(hw, field)), field


def _wrapper(kind: str):
    """A tiny random model of ``kind``, one more wrapper of a language model compscope reads."""
    text = {**_TEXT, "tie_word_embeddings": False, "pad_token_id": 0}
    if kind == "qwen2_audio":
        audio = dict(num_mel_bins=16, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=16, d_model=16)
        return transformers.Qwen2AudioForConditionalGeneration(transformers.Qwen2AudioConfig(
            text_config={**text, "model_type": "qwen2"}, audio_config=audio, audio_token_index=V - 1))
    if kind == "voxtral":
        audio = dict(num_mel_bins=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, hidden_size=16,
                     head_dim=8, num_key_value_heads=2)
        return transformers.VoxtralForConditionalGeneration(transformers.VoxtralConfig(
            text_config={**text, "model_type": "llama"}, audio_config=audio, audio_token_id=V - 1))
    if kind == "internvl":
        vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                      image_size=[28, 28], patch_size=[14, 14])
        return transformers.InternVLForConditionalGeneration(transformers.InternVLConfig(
            text_config={**text, "model_type": "qwen2"}, vision_config=vision, image_token_id=V - 1,
            downsample_ratio=1.0))
    if kind == "fuyu":  # (a Persimmon language model: the GPT-NeoX family's prefixes)
        persimmon = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, intermediate_size=48, num_hidden_layers=2,
                         max_position_embeddings=64, model_type="persimmon")
        return transformers.FuyuForCausalLM(transformers.FuyuConfig(text_config=persimmon, vocab_size=V, hidden_size=32,
                                                                    patch_size=4, num_channels=3))
    if kind == "llava_next":
        vision = dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=16, num_hidden_layers=2,
                      num_attention_heads=2, image_size=28, patch_size=14)
        return transformers.LlavaNextForConditionalGeneration(transformers.LlavaNextConfig(
            text_config={**text, "model_type": "llama"}, vision_config=vision, image_token_index=V - 1,
            image_grid_pinpoints=[[28, 28]]))
    # LFM2-VL: LFM2's convolution and attention layers
    text = {k: v for k, v in text.items() if k != "head_dim"}
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, num_patches=16,
                  patch_size=14)
    return transformers.Lfm2VlForConditionalGeneration(transformers.Lfm2VlConfig(
        text_config={**text, "model_type": "lfm2", "layer_types": ["conv", "full_attention"]}, vision_config=vision,
        image_token_id=V - 1, projector_hidden_size=16, downsample_factor=1))


@pytest.mark.parametrize("kind, family", [("qwen2_audio", "llama"), ("voxtral", "llama"), ("internvl", "llama"),
                                          ("llava_next", "llama"), ("lfm2_vl", "lfm2")])
def test_more_wrappers_read_and_run_as_their_language_model(tmp_path, kind, family):
    """Speech and vision wrappers of a language model compscope reads: read from the folder it is
    the language model object's heads, and it runs on text as the class its config names."""
    from compscope.data.runner import runner_for

    if not compscope.data.runner.transformers_at_least(5):
        pytest.skip("the wrappers' configs as transformers 5 takes them")
    model = perturbed(lambda: _wrapper(kind))
    model.save_pretrained(tmp_path / kind)
    hw = compscope.load(tmp_path / kind)
    lm = getattr(model, "model", model).language_model  # (Qwen2-Audio's, Voxtral's before transformers 5.10: a
    # whole causal language model at the top, its head inside it)
    ref = compscope.load(lm)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    head = model.lm_head if hasattr(model, "lm_head") else lm.lm_head
    assert hw.meta.family == family and torch.equal(hw.W_U, head.weight.detach())
    runner = runner_for(tmp_path / kind, progress=False, device="cpu")
    assert type(runner.model) is type(model)
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


def test_a_prefix_is_found_as_listed_then_with_one_more_model_level():
    from compscope.loading.families.base import prefix_of

    names = {"model.layers.0.q.weight", "a.model.layers.0.q.weight", "b.model.layers.0.q.weight", "b.layers.0.q.weight"}
    assert prefix_of(names, "layers.0.q.weight", ("a.", "b.")) == "b."  # (every listed prefix before the deeper ones)
    assert prefix_of(names, "layers.0.q.weight", ("a.", "c.")) == "a.model."
    assert prefix_of(names, "layers.0.q.weight", ("", "c.")) == "model."  # (the empty prefix one level deeper)
    assert prefix_of(names, "layers.0.k.weight", ("a.", "b.")) is None
    assert prefix_of(names, "layers.0.k.weight", ("a.",), "model.") == "model."


@pytest.mark.parametrize("kind, released, saved", [("qwen2_audio", "language_model.model.", "language_model.model.model."),
                                                   ("internvl", "language_model.model.", "model.language_model.model."),
                                                   ("fuyu", "language_model.model.", "model.language_model.model.")])
def test_a_wrapper_folder_as_some_transformers_releases_save_it_reads_as_released(tmp_path, kind, released, saved):
    """A wrapper's language model under one ``model.`` more than released (Qwen2-Audio's as transformers 5.17 saves
    it, LLaVA's, InternVL's and Fuyu's as 5.4 and 5.5 do): the same heads as the released layout."""
    from safetensors.torch import load_file, save_file

    if not compscope.data.runner.transformers_at_least(5):
        pytest.skip("the wrappers' configs as transformers 5 takes them")
    _wrapper(kind).save_pretrained(tmp_path / "m")
    sd = load_file(tmp_path / "m" / "model.safetensors")  # (the released layout, whichever transformers saved it)
    sd = _renamed(sd, saved, released)
    save_file(sd, tmp_path / "m" / "model.safetensors", metadata={"format": "pt"})
    want = compscope.load(tmp_path / "m")
    moved = _renamed(sd, released, saved)
    assert sum(k.startswith(saved + "layers.") for k in moved) > 0
    save_file(moved, tmp_path / "m" / "model.safetensors", metadata={"format": "pt"})
    got = compscope.load(tmp_path / "m")
    for field in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_U"):
        assert torch.equal(getattr(got, field), getattr(want, field)), field


def test_a_perception_encoder_audio_model_reads_and_runs_as_its_text_model(tmp_path):
    """Perception Encoder Audio (``pe_audio``): a ModernBERT text model (``text_model``) beside an audio encoder.
    Read from the folder, its heads are the text model object's (both-sided windows on the local layers); it runs
    on text as the whole ``PeAudioModel``, hooked in its text model, and agrees with the weights. (Its video
    sibling's vision tower is a timm model, which this environment does not build.)"""
    from compscope.data.runner import runner_for

    if not hasattr(transformers, "PeAudioConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Perception Encoder Audio")
    text = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=3, intermediate_size=48,
                local_attention=4, global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                cls_token_id=1, sep_token_id=2, max_position_embeddings=64)
    audio = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4, head_dim=8,
                 dac_config=dict(encoder_hidden_size=8, downsampling_ratios=[2, 2], decoder_hidden_size=16,
                                 hidden_size=16, codebook_size=16, codebook_dim=4, n_codebooks=2))
    model = perturbed(lambda: transformers.PeAudioModel(transformers.PeAudioConfig(text_config=text,
                                                                                   audio_config=audio)))
    model.save_pretrained(tmp_path / "pe")
    hw, ref = compscope.load(tmp_path / "pe"), compscope.load(model.text_model)
    assert hw.meta.family == "modernbert" and not hw.causal and hw.sliding_window == (None, 3, None)
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    runner = runner_for(tmp_path / "pe", progress=False, device="cpu")
    assert type(runner.model) is type(model)
    runner.trace(torch.randint(3, V - 2, (2, 9), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("kind", ["GroundingDino", "MMGroundingDino"])
def test_a_grounding_dino_folder_reads_and_runs_as_its_bert_text_encoder(tmp_path, kind):
    """Grounding DINO (and MM-Grounding-DINO), a detector whose text encoder is a BERT (``model.text_backbone``):
    read from the detector's folder, its heads are the text encoder object's; on data the text encoder runs alone,
    hooked inside the loaded model, and agrees with the weights."""
    from compscope.data.runner import runner_for

    text = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48,
                max_position_embeddings=32, model_type="bert")
    backbone = dict(model_type="swin", embed_dim=8, depths=[1, 1], num_heads=[1, 1], image_size=32, patch_size=4,
                    window_size=2, out_features=["stage1", "stage2"])
    config = getattr(transformers, f"{kind}Config")(
        text_config=text, backbone_config=backbone, d_model=32, encoder_layers=1, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=4,
        num_feature_levels=2, encoder_n_points=1, decoder_n_points=1, max_text_len=16)
    model = perturbed(lambda: getattr(transformers, f"{kind}ForObjectDetection")(config))
    model.save_pretrained(tmp_path / "gd")
    hw, ref = compscope.load(tmp_path / "gd"), compscope.load(model.model.text_backbone)
    assert hw.meta.family == "bert" and not hw.causal
    for field in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_pos", "b_Q", "b_O"):
        assert torch.equal(getattr(hw, field), getattr(ref, field)), field
    runner = runner_for(tmp_path / "gd", progress=False, device="cpu")
    assert type(runner.body).__name__ == "BertModel"
    runner.trace(torch.randint(3, V - 2, (2, 9), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


@pytest.mark.parametrize("kind", ["molmo2", "molmo2_olmo"])
def test_molmo2_reads_the_vocabulary_rows_and_its_qk_norm_and_norm_placement(tmp_path, kind):
    """Molmo 2's folder keeps the embedding in two parts (transformers 5 saves them cut in half, not
    at the vocabulary): ``W_E`` is the loaded table's first ``vocab_size`` rows, the marker tokens'
    rows after them not read (said). The Qwen3-based model's QK-norm is per head, before the
    attention's input norm; the OLMo-based one's over a layer, its norm after the attention
    (``input_layernorm`` on the output). A rope scaling that some layers skip is refused by name."""
    model = _vlm(kind)
    model.save_pretrained(tmp_path / kind)
    hw = compscope.load(tmp_path / kind)
    lm = model.model.language_model
    assert lm.embed_tokens.weight.shape[0] == V + 8
    assert torch.equal(hw.W_E, lm.embed_tokens.weight.detach()[:V].T) and hw.W_U.shape == (V, 32)
    assert any("the 8 image and frame marker tokens after them (additional_vocab_size) not read" in n
               for n in hw.meta.notes)
    assert torch.equal(hw.b_Q[0].flatten(), lm.layers[0].self_attn.q_proj.bias.detach()) and hw.b_O is None
    q_norm = lm.layers[1].self_attn.q_norm.weight.detach()
    assert torch.equal(hw.qk_norm[0].weight[1], q_norm)
    if kind == "molmo2_olmo":
        assert hw.qk_norm_scope == "layer" and q_norm.shape == (4 * 8,)
        assert hw.attn_norm is None and torch.equal(hw.attn_out_norm.weight[1], lm.layers[1].input_layernorm.weight.detach())
    else:
        assert hw.qk_norm_scope == "head" and q_norm.shape == (8,)
        assert hw.attn_out_norm is None and torch.equal(hw.attn_norm.weight[1], lm.layers[1].input_layernorm.weight.detach())
    cfg = json.loads((tmp_path / kind / "config.json").read_text())
    cfg["text_config"].update(rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0},
                              rope_scaling_layers=[1])
    (tmp_path / kind / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(compscope.UnsupportedModelError, match=r"rope_scaling_layers = \[1\]: the layers outside it turn "
                                                              "without the linear rope scaling"):
        compscope.load(tmp_path / kind)


def test_glm_images_language_model_is_read_without_its_image_token_head_and_runs(tmp_path):
    """GLM-Image saved whole: its language model read as the base model object's own weights (GLM-4-0414's layers,
    rotate-half rotary on half of each head, q/k/v biases), no unembedding (its head scores the image tokens alone,
    fewer than the vocabulary: said), the vision encoder and image tokenizer not read; run on text as the class its
    config names, every layer recomputed from the weights equal to what it adds."""
    from compscope.data.runner import layer_state, runner_for

    if not hasattr(transformers, "GlmImageConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no GLM-Image")
    text = {**_TEXT, "vision_vocab_size": 40, "pad_token_id": 0, "eos_token_id": 1,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5,
                                "mrope_section": [1, 1, 0]}}
    cfg = transformers.GlmImageConfig(text_config=text, vision_config=dict(depth=1, hidden_size=16, num_heads=2,
                                                                          patch_size=16, intermediate_size=32),
                                      vq_config=dict(embed_dim=8, num_embeddings=16, latent_channels=16),
                                      image_token_id=V - 1, image_start_token_id=38, image_end_token_id=39)
    model = perturbed(lambda: transformers.GlmImageForConditionalGeneration(cfg), seed=4, scale=0.25)
    assert model.lm_head.weight.shape == (40, 32)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "glm_image_text" and hw.W_U is None and hw.rotary.dim == 4 and hw.rotary.style == "half"
    _same_heads(hw, compscope.load(model.model.language_model))
    assert torch.equal(hw.b_Q, compscope.load(model.model.language_model).b_Q) and hw.b_Q.abs().sum() > 0
    assert any("vision, vq not read" in n for n in hw.meta.notes)
    assert any("scores its image tokens alone, the first 40 of the 64 token ids" in n for n in hw.meta.notes)
    assert sum(n.startswith("no unembedding") for n in hw.meta.notes) == 1  # (that note alone says why)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "GlmImageForConditionalGeneration"
    tr = runner.trace(torch.randint(2, V - 3, (2, 9), generator=torch.Generator().manual_seed(0)))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=0)


def test_a_failing_forward_pass_is_said_by_name(tmp_path):
    """Unlimited-OCR's language model with grouped K/V heads: transformers' eager attention for it (which the runner
    needs, for the patterns) repeats no K/V heads and fails on a forward pass; the weights read, and the runner says
    which model failed where, naming transformers' error, rather than a traceback from inside it. With as many K/V heads
    as query heads (the released models) it runs and says the window is not applied in one pass."""
    from compscope.data.runner import layer_state, runner_for

    model = _vlm("unlimited_ocr")
    model.save_pretrained(tmp_path / "mha")
    hw = compscope.load(tmp_path / "mha")
    assert hw.sliding_window == (None, None) and hw.causal
    assert any("reference sliding window read as one forward pass runs it" in n and "window of 3" in n
               for n in hw.meta.notes)
    tr = runner_for(tmp_path / "mha", progress=False, device="cpu").trace(
        torch.randint(0, V - 3, (2, 9), generator=torch.Generator().manual_seed(1)))  # (longer than the window)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=0)
    cfg = model.config
    cfg.text_config.num_key_value_heads = 2
    transformers.AutoModelForImageTextToText.from_config(cfg).save_pretrained(tmp_path / "gqa")
    assert compscope.load(tmp_path / "gqa").n_kv_heads == 2
    runner = runner_for(tmp_path / "gqa", progress=False, device="cpu")
    with pytest.raises(compscope.UnsupportedModelError,
                       match=r"transformers' UnlimitedOcrForConditionalGeneration failed on a forward pass over tokens "
                             r"of shape \(2, 5\) \(The size of tensor"):
        runner.trace(torch.randint(0, V - 3, (2, 5), generator=torch.Generator().manual_seed(1)))


def test_kosmos_2_5s_language_model_is_read_from_the_whole_model_and_runs(tmp_path):
    """Kosmos-2.5 saved whole (its text model under ``text_model.model.``, the vision encoder not read): the heads
    are the text model's own; what its embeddings give a token at position p is ``W_E`` at the token plus ``W_pos``
    column p, the tensor2tensor sinusoid at row p + pad_token_id + 1 plus the segment embedding's row 0, as computed
    here from the definition; the unembedding is its own ``lm_head``; run on text as the class its config names."""
    import math

    from compscope.data.runner import layer_state, runner_for

    if not hasattr(transformers, "Kosmos2_5Config"):
        pytest.skip(f"transformers {transformers.__version__} has no Kosmos-2.5")
    text = dict(vocab_size=V, embed_dim=32, attention_heads=4, layers=2, ffn_dim=48, max_position_embeddings=24,
                layer_norm_eps=1e-6, pad_token_id=2, bos_token_id=0, eos_token_id=1)
    vision = dict(hidden_size=16, patch_embed_hidden_size=16, intermediate_size=16, head_dim=8, num_hidden_layers=1,
                  num_attention_heads=2, max_num_patches=16)
    cfg = transformers.Kosmos2_5Config(text_config=text, vision_config=vision, latent_query_num=4)
    model = perturbed(lambda: transformers.Kosmos2_5ForConditionalGeneration(cfg), seed=6, scale=0.25)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "kosmos_2_5_text" and hw.causal and hw.W_pos.shape == (32, 24)
    ref = compscope.load(model.text_model)  # (the text model object: its own names and config)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert torch.equal(hw.attn_norm.weight, ref.attn_norm.weight) and hw.attn_norm.eps == 1e-6
    assert torch.equal(hw.W_U, model.text_model.lm_head.weight.detach())
    assert any("vision not read" in n for n in hw.meta.notes), hw.meta.notes
    base = model.text_model.model
    p = torch.arange(24, dtype=torch.float64)[:, None] + 3  # (row p + pad_token_id + 1)
    f = torch.exp(torch.arange(16, dtype=torch.float64) * -(math.log(10000) / 15))
    want = torch.cat([(p * f).sin(), (p * f).cos()], 1) + base.segment_emb.weight.detach()[0].double()
    torch.testing.assert_close(hw.W_pos.T.double(), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(hw.W_E, base.embed_tokens.weight.detach().T * math.sqrt(32), atol=1e-6, rtol=0)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "Kosmos2_5ForConditionalGeneration"
    tr = runner.trace(torch.randint(3, V, (2, 11), generator=torch.Generator().manual_seed(3)))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5, rtol=0)


@pytest.mark.parametrize("layout", ["vlm.language_model.", "vlm.model.language_model.", "vlm.model.", "vlm."])
def test_colqwen2s_language_model_is_read_without_an_unembedding_and_runs(tmp_path, layout):
    """ColQwen2 (a retriever around Qwen2-VL: ``vlm_config`` holds the vision-language model's config): its language
    model's heads read from the folder, as transformers 5 saves it (``vlm.language_model.``; 5.5 ``vlm.model.``,
    5.6-5.8 ``vlm.``) and as transformers 4 did (``vlm.model.language_model.``), are Qwen2-VL's language model
    object's; no unembedding (its output is a projection of each position's last state, said); as saved, it runs
    on text as ColQwen2ForRetrieval, the attention the runner recomputes agreeing with the model's. ColPali, around
    PaliGemma, refused with PaliGemma's reason."""
    import safetensors.torch

    from compscope.data.runner import runner_for

    if not hasattr(transformers, "ColQwen2Config") or not compscope.data.runner.transformers_at_least(5):
        pytest.skip("ColQwen2's config as transformers 5 takes it")
    text = {**_TEXT, "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}, "tie_word_embeddings": False}
    text.pop("head_dim")
    vision = dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=1, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2)
    vlm = transformers.Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=V - 1,
                                     video_token_id=V - 2, vision_start_token_id=V - 3, vision_end_token_id=V - 4)
    model = perturbed(lambda: transformers.ColQwen2ForRetrieval(transformers.ColQwen2Config(
        vlm_config=vlm.to_dict(), embedding_dim=8)))
    model.save_pretrained(tmp_path / "c")
    file = tmp_path / "c" / "model.safetensors"
    tensors = safetensors.torch.load_file(file)
    saved = next(p for p in ("vlm.language_model.", "vlm.model.", "vlm.") if p + "layers.0.self_attn.q_proj.weight"
                 in tensors)  # (as the installed transformers saves it)
    if layout != saved:  # the language model's tensors renamed as another release saves them
        safetensors.torch.save_file(_renamed(tensors, saved, layout, ("layers.", "embed_tokens.", "norm.")), file)
    hw, ref = compscope.load(tmp_path / "c"), compscope.load(model.vlm.language_model)
    _same_heads(hw, ref)
    assert hw.W_U is None and any("ColQwen2 outputs a projection of each position's last state" in n
                                  for n in hw.meta.notes)
    assert any("the language model of a colqwen2 model (its vlm_config's (qwen2_vl) text_config" in n
               for n in hw.meta.notes)
    if layout == saved:
        runner = runner_for(tmp_path / "c", progress=False, device="cpu")
        assert type(runner.model) is type(model)
        runner.trace(torch.randint(4, V - 4, (2, 7), generator=torch.Generator().manual_seed(0)))
        assert runner._agreed
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "colpali", "vlm_config": {
        "model_type": "paligemma", "text_config": {"model_type": "gemma"}, "vision_config": {}}}))
    safetensors.torch.save_file({"x": torch.zeros(2)}, folder / "model.safetensors")
    with pytest.raises(compscope.UnsupportedModelError, match="ColPali: its vision-language model is PaliGemma"):
        compscope.load(folder)


#: transformers 5.25's wrappers of a Qwen3, as their files name the language model's tensors: (model_type, the
#: prefix of its layers, where its head sits, a vision config its class builds small)
NAMED_WRAPPERS = [
    ("ovis2_5", "llm.model.", "llm.lm_head.weight",
     dict(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32)),
    ("llava_onevision1_5", "model.model.", "lm_head.weight",
     dict(depth=1, hidden_size=16, num_heads=2, intermediate_size=32, out_hidden_size=32)),
]


@pytest.mark.parametrize("kind, prefix, head, vision", NAMED_WRAPPERS, ids=[w[0] for w in NAMED_WRAPPERS])
def test_ovis2_5_and_llava_onevision1_5_folders_read_their_qwen3_in_their_files_names(tmp_path, kind, prefix, head,
                                                                                      vision):
    """Ovis2.5 (its files: the language model under ``llm.``) and LLaVA-OneVision-1.5 (as transformers 5.25 saves it:
    under ``model.model.``): a Qwen3's weights saved so are read as that Qwen3's heads, its head as ``W_U``; where
    transformers builds the wrapper (5.25), the folder runs on text as the class its config names."""
    from safetensors.torch import save_file

    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build

    qwen3 = build(BY_ID["qwen3-qk-norm"], tie_word_embeddings=False)  # (a head of its own)
    ref = compscope.load(qwen3)
    assert not torch.equal(ref.W_U, ref.W_E.T)
    folder = tmp_path / kind
    folder.mkdir()
    tensors = {(head if k == "lm_head.weight" else prefix + k.removeprefix("model.")): v.detach().clone().contiguous()
               for k, v in qwen3.state_dict().items()}
    save_file(tensors, folder / "model.safetensors")
    text = {k: v for k, v in qwen3.config.to_dict().items() if k not in ("architectures", "dtype", "torch_dtype")}
    (folder / "config.json").write_text(json.dumps({"model_type": kind, "text_config": text, "vision_config": vision,
                                                    "image_token_id": V - 1}))
    hw = compscope.load(folder)
    _same_heads(hw, ref)
    assert hw.meta.family == "qwen3" and torch.equal(hw.W_U, qwen3.lm_head.weight.detach())
    assert any(f"of an {kind} model" in n or f"of a {kind} model" in n for n in hw.meta.notes), hw.meta.notes
    if kind not in transformers.CONFIG_MAPPING:
        return  # (transformers before 5.25 builds no such wrapper: read, not run)
    runner = runner_for(folder, progress=False, device="cpu")
    assert type(runner.model).__name__ == {"ovis2_5": "Ovis2_5ForConditionalGeneration",
                                           "llava_onevision1_5": "LlavaOnevision15ForConditionalGeneration"}[kind]
    runner.trace(torch.randint(4, V - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed
