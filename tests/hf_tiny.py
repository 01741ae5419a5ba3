"""Tiny random HuggingFace models, one per supported family variant, and what HF itself
computes inside them (captured with forward hooks on HF's own modules).

Shared by ``test_family_consistency.py`` and ``test_processing.py``. Nothing is downloaded:
every model is built with ``from_config`` (float32, eval mode, eager attention) and every
parameter is perturbed with noise, so that norm gains are not ones, norm biases not zeros,
and any folding or mapping mistake shows up in the outputs.

Tests as data: ``VARIANTS`` lists ``(id, kind, config)``; ``kind`` names where the hooks go.
``word_tokenizer``: a tiny tokenizer saved offline, for models saved without one.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from compscope.data.runner import transformers_at_least  # noqa: E402

D, HEADS, D_HEAD, VOCAB, SEQ, BATCH = 32, 4, 8, 61, 10, 2

_COMMON = dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, intermediate_size=48, num_hidden_layers=2)
#: XLM's and FlauBERT's (pad token 0, which random_ids never draws: XLM masks every position from a sequence's count
#: of non-pad tokens on; transformers 4 keeps pad_index apart from pad_token_id)
_XLM = dict(vocab_size=VOCAB, emb_dim=D, n_heads=HEADS, n_layers=2, max_position_embeddings=32, pad_token_id=0, pad_index=0)
_LLAMA = dict(_COMMON, head_dim=D_HEAD, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False)
#: a Llama-like config whose head width comes from other keys (DeepSeek-V3's head_dim is its rotated width)
_NO_HEAD_DIM = {k: v for k, v in _LLAMA.items() if k != "head_dim"}
#: Chameleon's language model, its VQ-VAE (the image tokenizer, not read) as small as it builds
_CHAMELEON = dict({k: v for k, v in _LLAMA.items() if k != "head_dim"}, num_key_value_heads=2, attention_bias=True,
                  rms_norm_eps=0.5, pad_token_id=0, vocabulary_map={"<image>": VOCAB - 1},
                  vq_config=dict(embed_dim=4, num_embeddings=8, latent_channels=4, base_channels=32,
                                 channel_multiplier=[1], num_res_blocks=1, attn_resolutions=[]))


#: the settings of BART's kin (an encoder of two layers, a decoder of one; pad 0, as random_ids never draws)
_BART = dict(vocab_size=VOCAB, d_model=D, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_layers=2,
             decoder_layers=1, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=32, pad_token_id=0,
             decoder_start_token_id=0)
#: T5Gemma's encoder (and decoder) settings: Gemma 2's, a sliding layer (3 tokens each side) and a global one
_T5GEMMA = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=2, num_attention_heads=HEADS,
                num_key_value_heads=2, head_dim=D_HEAD, sliding_window=3, query_pre_attn_scalar=12, max_position_embeddings=64,
                attn_logit_softcapping=5.0, layer_types=["sliding_attention", "full_attention"])
#: T5Gemma 2's encoder's text model (Gemma 3's layers; an odd window, 2 keys on either side) and a vision tower
#: as small as it builds (not read)
_T5GEMMA2_TEXT = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=3,
                      num_attention_heads=HEADS, num_key_value_heads=2, head_dim=D_HEAD, query_pre_attn_scalar=12,
                      sliding_window=5, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                      dropout_rate=0.0,
                      rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5000.0},
                                       "sliding_attention": {"rope_type": "default", "rope_theta": 700.0}})
_T5GEMMA2_VISION = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                        patch_size=4)
#: Dia's text encoder (grouped K/V heads, heads wider than the residual over the heads) and its audio decoder (not
#: read), its token ids within the tiny vocabulary (test_speech_backbones' whole models)
_DIA_ENCODER = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=2,
                    num_attention_heads=HEADS, num_key_value_heads=2, head_dim=12, max_position_embeddings=64,
                    rope_theta=700.0)
_DIA_DECODER = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=1,
                    num_attention_heads=HEADS, num_key_value_heads=2, head_dim=D_HEAD,
                    cross_num_attention_heads=HEADS, cross_head_dim=D_HEAD, cross_num_key_value_heads=HEADS,
                    cross_hidden_size=D, num_channels=2, max_position_embeddings=64, pad_token_id=VOCAB - 3,
                    eos_token_id=VOCAB - 2, bos_token_id=VOCAB - 1)


#: the kinds whose attention layers are some of the model's layers (the others Mamba, DeltaNet, recurrent, ...)
HYBRIDS = ("hybrid", "recurrent_gemma", "lfm3")

#: the kinds whose layers are no modules of their own (XLM's attentions, norms and MLPs in lists side by side;
#: LongCat-Flash's two attention sublayers in each of its layers)
SIDE_BY_SIDE = ("xlm", "longcat")

#: the kinds whose first layer hands the others what they need with its output (T5's position bias): every run runs
#: every layer
HANDED_ON = ("t5",)

#: the kinds whose layers return dicts (SqueezeBERT's), which a left-out layer's stand-in would have to build: every run
#: runs every layer
DICT_LAYERS = ("squeezebert",)

#: the kinds whose residual the model keeps channels-first, (batch, d_model, seq): hooked tensors are turned
CHANNELS_FIRST = ("squeezebert",)

#: the kinds that are encoders (built as AutoModel: no unembedding)
ENCODERS = ("bert", "xlmr_xl", "modernbert", "gemma3_bidirectional", "megatron_bert", "eurobert", "esm", "rotary_bert",
            "gemma4_encoder", "esmc", "altclip", "t5", "squeezebert", "t5gemma", "t5gemma2", "bart", "dia")
#: the kinds built as AutoModel: the encoders, and decoders transformers builds no causal LM of its own for (a
#: vision-language model's language model: Muse Glimmer's; CLIP's causal text encoder)
BASE_MODELS = (*ENCODERS, "muse_glimmer", "glm_image", "llama_base", "higgs", "clip", "aimv2")
#: the kinds built as masked language models (XLM's and FlauBERT's LM head, causal or not)
MASKED_LMS = ("xlm",)


#: config classes of models no auto class builds alone (dual encoders' text towers) -> their model classes
_ALONE = {"AlignTextConfig": "AlignTextModel", "ChineseCLIPTextConfig": "ChineseCLIPTextModel",
          "ClapTextConfig": "ClapTextModel", "AltCLIPTextConfig": "AltCLIPTextModel",
          "BridgeTowerTextConfig": "BridgeTowerTextModel", "UnlimitedOcrTextConfig": "UnlimitedOcrTextModel",
          "EvollaConfig": "EvollaModel",  # (transformers' auto classes fail on its config)
          "Kosmos2_5TextConfig": "Kosmos2_5TextForCausalLM",
          "T5Config": "T5EncoderModel", "UMT5Config": "UMT5EncoderModel",  # (T5's: its encoder alone)
          "LongT5Config": "LongT5EncoderModel", "T5GemmaConfig": "T5GemmaEncoderModel",
          "Aimv2TextConfig": "Aimv2TextModel", "DiaEncoderConfig": "DiaEncoder",
          "SwitchTransformersConfig": "SwitchTransformersEncoderModel",
          "MllamaTextConfig": "MllamaForCausalLM", "Mistral4Config": "Mistral4ForCausalLM"}  # (Llama 3.2 Vision's language model: its own causal LM)


class _Named:
    """An auto class's two constructors for one named model class."""

    def __init__(self, cls):
        self.cls = cls

    def from_config(self, config, **kwargs):
        return self.cls._from_config(config, **kwargs)

    def from_pretrained(self, path, **kwargs):
        return self.cls.from_pretrained(path, **kwargs)


def model_class(config_cls: str, name: str):
    """transformers' model class ``name``: exported at its top, or from the modeling module beside the config class
    ``config_cls`` (BridgeTower's text model is not exported). By the config class, not as the data runner finds a
    folder's class by its model type: transformers 4.57 builds this model though it maps no model type to it."""
    import importlib

    found = getattr(transformers, name, None)
    if found is None:
        module = getattr(transformers, config_cls).__module__.replace(".configuration_", ".modeling_")
        found = getattr(importlib.import_module(module), name)
    return found


def auto_class(variant):
    """The transformers auto class that builds ``variant``'s model."""
    if variant.config_cls in _ALONE:
        return _Named(model_class(variant.config_cls, _ALONE[variant.config_cls]))
    if variant.kind in BASE_MODELS:
        return transformers.AutoModel
    if variant.config_cls == "ChameleonConfig":  # (no causal LM class: an image-text-to-text model run on text)
        return transformers.AutoModelForImageTextToText
    return transformers.AutoModelForMaskedLM if variant.kind in MASKED_LMS else transformers.AutoModelForCausalLM


@dataclass(frozen=True)
class Variant:
    id: str
    kind: str  # 'gpt2' | 'neox' | 'llama' | 'granite' | 'hybrid' | 'gemma3' | 'glm4' | 'apertus' | 'olmo2' | 'phi' | 'falcon' | 'bloom' | 'mpt' | 'gptj' | 'opt' |
    # 'bert' (DistilBERT's, DeBERTa's and MPNet's names as well) | 't5' (T5's encoder): where HF's modules live (GPT-Neo's as GPT-2's, Gemma 2's as Gemma 3's, OLMo-3's as OLMo-2's, Granite's as
    # Llama's, what it adds to the residual times its residual_multiplier; a hybrid's: its attention layers alone)
    config_cls: str
    config: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.id


VARIANTS = [
    Variant("gpt2", "gpt2", "GPT2Config",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, n_positions=32, n_inner=48)),
    Variant("gpt-neo-local3", "gpt2", "GPTNeoConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_heads=HEADS, num_layers=2, max_position_embeddings=32,
                 intermediate_size=48, attention_types=[[["global", "local"], 1]], window_size=3)),
    Variant("gpt-bigcode-mqa", "gpt2", "GPTBigCodeConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, n_positions=32, n_inner=48)),
    Variant("gpt-bigcode-per-head-unscaled", "gpt2", "GPTBigCodeConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, n_positions=32, n_inner=48, multi_query=False,
                 scale_attn_weights=False)),
    Variant("neox-partial-rotary-parallel", "neox", "GPTNeoXConfig",
            dict(_COMMON, max_position_embeddings=64, use_parallel_residual=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.25})),
    Variant("neox-sequential-no-bias", "neox", "GPTNeoXConfig",
            dict(_COMMON, max_position_embeddings=64, use_parallel_residual=False, attention_bias=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
    Variant("llama-mha", "llama", "LlamaConfig",
            dict(_LLAMA, num_key_value_heads=HEADS, rope_parameters={"rope_type": "default", "rope_theta": 300.0})),
    Variant("llama-mqa", "llama", "LlamaConfig", dict(_LLAMA, num_key_value_heads=1)),
    Variant("llama-gqa-bias", "llama", "LlamaConfig", dict(_LLAMA, num_key_value_heads=2, attention_bias=True)),
    Variant("llama-head-dim-not-d-over-h", "llama", "LlamaConfig", dict(_LLAMA, head_dim=12, num_key_value_heads=2)),
    Variant("llama-linear-rope-tied", "llama", "LlamaConfig",
            dict(_LLAMA, num_key_value_heads=2, tie_word_embeddings=True,
                 rope_parameters={"rope_type": "linear", "rope_theta": 1000.0, "factor": 2.0})),
    # YaRN over 4 pairs, base 500, original context 4096: the ramp runs from pair 1.94 to 4.17 (not rounded:
    # truncate false), so the pairs are kept, kept, 3% and 48% interpolated; queries and keys times 0.1 ln 4 + 1
    Variant("qwen2-yarn-gqa", "llama", "Qwen2Config",
            dict(_LLAMA, num_key_value_heads=2,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "truncate": False,
                                  "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0})),
    # gpt-oss: a sink logit per head, biases, layer 0 sliding (window 3) and layer 1 full, YaRN as it ships
    Variant("gpt-oss-sinks-yarn", "llama", "GptOssConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, num_local_experts=2, num_experts_per_tok=1,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
                                  "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096})),
    # wavelengths 6.3, 20, 63, 199 against the original context 128: kept, kept, interpolated, divided
    Variant("llama3-rope-scaling", "llama", "LlamaConfig",
            dict(_LLAMA, num_key_value_heads=2, max_position_embeddings=256,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 128})),
    Variant("mistral-sliding3", "llama", "MistralConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000.0})),
    # Ministral-8B: a window on some layers (layer_types), Mistral's attention otherwise
    Variant("ministral-sliding3-first-layer", "llama", "MinistralConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, layer_types=["sliding_attention", "full_attention"],
                 rope_parameters={"rope_type": "default", "rope_theta": 1000.0})),
    Variant("arcee-biases", "llama", "ArceeConfig", dict(_LLAMA, num_key_value_heads=2, attention_bias=True)),
    # two bias switches: q/k/v on, the output projection on as well here (its default is off)
    Variant("seed-oss-out-bias", "llama", "SeedOssConfig",
            dict(_LLAMA, num_key_value_heads=1, attention_bias=True, attention_out_bias=True)),
    # interleaved pairs on whole heads: Helium with q/k/v biases, ERNIE 4.5 with all four
    Variant("helium-interleaved-bias", "llama", "HeliumConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    Variant("ernie4_5-interleaved-all-biases", "llama", "Ernie4_5Config",
            dict(_LLAMA, num_key_value_heads=2, use_bias=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # Aria's language model: Llama's attention (q/k/v/o biases switched on here) in OLMoE's layers, MoE MLPs
    Variant("aria-text-moe-bias", "llama", "AriaTextConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, moe_num_experts=2, moe_topk=1,
                 moe_num_shared_experts=1, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # Chameleon: a LayerNorm with its own gain and bias on each query and key head (epsilon 1e-5 whatever the config's
    # 0.5), biases on all four projections; with swin_norm, no norm before the attention and one on its output
    Variant("chameleon-per-head-qk-layernorm", "llama", "ChameleonConfig", dict(_CHAMELEON)),
    Variant("chameleon-swin-norm-after", "chameleon_swin", "ChameleonConfig", dict(_CHAMELEON, swin_norm=True)),
    Variant("mixtral-sliding3", "llama", "MixtralConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, num_local_experts=4, num_experts_per_tok=2)),
    Variant("qwen2-bias", "llama", "Qwen2Config", dict(_LLAMA, num_key_value_heads=2)),
    Variant("qwen2-sliding-upper-layers", "llama", "Qwen2Config",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, use_sliding_window=True, sliding_window=3,
                 max_window_layers=1)),
    Variant("qwen2-moe-no-qkv-bias", "llama", "Qwen2MoeConfig",
            dict(_LLAMA, num_key_value_heads=2, qkv_bias=False, num_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=16, shared_expert_intermediate_size=16)),
    # LongRoPE as Phi-3.5 ships it: per-pair short factors (sequences within the original 32 tokens), the
    # context four times the original, so queries and keys times sqrt(1 + ln 4 / ln 32)
    Variant("phi3-longrope", "llama", "Phi3Config",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=128, original_max_position_embeddings=32,
                 rms_norm_eps=1e-5, pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                 rope_parameters={"rope_type": "longrope", "rope_theta": 700.0, "short_factor": [1.0, 1.5, 2.0, 4.0],
                                  "long_factor": [2.0, 3.0, 4.0, 8.0]})),
    # Phi-4-mini's kind: LongRoPE on half of each head, its attention factor on the rotated dims alone
    Variant("phi4-mini-longrope-partial", "llama", "Phi3Config",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=128, original_max_position_embeddings=32,
                 rms_norm_eps=1e-5, pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True,
                 rope_parameters={"rope_type": "longrope", "rope_theta": 700.0, "partial_rotary_factor": 0.5,
                                  "short_factor": [1.0, 3.0], "long_factor": [2.0, 6.0]})),
    Variant("phi3-fused-partial-rotary-sliding", "llama", "Phi3Config",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, sliding_window=4,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 tie_word_embeddings=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 700.0, "partial_rotary_factor": 0.5})),
    # Phi-4-multimodal's language model: Phi-4-mini's attention, beside vision and audio encoders as small as they
    # build (not read), their placeholder ids the top two (embedded as any token without an image or audio)
    Variant("phi4-multimodal-fused-partial-gqa", "llama", "Phi4MultimodalConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=0,
                 bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 700.0, "partial_rotary_factor": 0.5},
                 vision_config=dict(hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
                                    image_size=28, patch_size=14, crop_size=28, image_token_id=VOCAB - 1),
                 audio_config=dict(hidden_size=16, intermediate_size=24, num_blocks=1, num_attention_heads=2,
                                   ext_pw_out_channel=16, depthwise_separable_out_channel=16, nemo_conv_channels=16,
                                   audio_token_id=VOCAB - 2))),
    Variant("qwen3-qk-norm", "llama", "Qwen3Config",
            dict(_LLAMA, num_key_value_heads=2, tie_word_embeddings=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 2000.0})),
    # dots.llm1: Qwen3's attention; a window on the layers from max_window_layers up (no switch), MoE MLPs
    Variant("dots1-upper-layer-slides", "llama", "Dots1Config",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, max_window_layers=1, first_k_dense_replace=1,
                 n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                 n_group=1, topk_group=1)),
    Variant("qwen3-moe-sliding", "llama", "Qwen3MoeConfig",
            dict(_LLAMA, num_key_value_heads=1, attention_bias=True, use_sliding_window=True, sliding_window=3,
                 num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)),
    Variant("smollm3-nope-sliding", "llama", "SmolLM3Config",
            dict(_LLAMA, num_key_value_heads=2, no_rope_layer_interval=2, use_sliding_window=True, sliding_window=3,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # YaRN's attention factor on the rotary layers only: the NoPE layers turn nothing and are not scaled
    Variant("smollm3-nope-yarn", "llama", "SmolLM3Config",
            dict(_LLAMA, num_key_value_heads=2, no_rope_layer_interval=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 3000.0, "factor": 4.0,
                                  "original_max_position_embeddings": 16})),
    # Llama 4 Scout: interleaved rotary, then a QK-norm without gains, on layer 0; none on layer 1 (NoPE), whose
    # queries would be scaled from position floor_scale - 1 on (past SEQ); chunks longer than SEQ; MoE MLPs
    Variant("llama4-nope-gainless-qk-norm", "llama", "Llama4TextConfig",
            dict(_LLAMA, num_key_value_heads=2, no_rope_layer_interval=2, use_qk_norm=True, attention_chunk_size=16,
                 floor_scale=16, attn_scale=0.5, num_local_experts=2, intermediate_size_mlp=40,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 5000.0, "factor": 4.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 2.0, "original_max_position_embeddings": 16})),
    # Llama 4 Maverick: no QK-norm; biases (transformers' attention_bias), MoE on every second layer
    Variant("llama4-no-qk-norm-bias", "llama", "Llama4TextConfig",
            dict(_LLAMA, num_key_value_heads=1, no_rope_layers=[0, 1], use_qk_norm=False, attention_bias=True,
                 interleave_moe_layer_step=2, num_local_experts=2, intermediate_size_mlp=40,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # rotary on the first half of each head, interleaved pairs; q/k/v biased, o_proj not
    Variant("glm-interleaved-partial-rotary-gqa", "llama", "GlmConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0, "partial_rotary_factor": 0.5})),
    # GLM-4-0414: an RMSNorm on the attention output before the residual (post_self_attn_layernorm)
    Variant("glm4-post-attention-norm", "glm4", "Glm4Config",
            dict(_LLAMA, num_key_value_heads=1, attention_bias=False, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0, "partial_rotary_factor": 0.75})),
    # Unlimited-OCR's language model: DeepSeek-OCR 2's (Llama's attention, DeepSeek-V2's MoE layers), its reference
    # sliding window (generated tokens alone) not in one pass: causal. Built as the base model (no causal LM of its own)
    Variant("unlimited-ocr-text-reference-window", "llama_base", "UnlimitedOcrTextConfig",
            dict(_LLAMA, num_key_value_heads=4, attention_bias=True, sliding_window=3, n_routed_experts=2,
                 num_experts_per_tok=1, moe_intermediate_size=16, n_shared_experts=1,
                 mlp_layer_types=["dense", "sparse"], pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 600.0})),
    # Evolla: Llama 3's decoder, the sequence aligner's cross-attention (to protein features) in layer 1, which runs
    # only with protein inputs; a protein encoder as small as it builds (not read). Built as the base model
    Variant("evolla-aligner-layer-text-only", "llama_base", "EvollaConfig",
            dict(_LLAMA, num_key_value_heads=2, aligner_num_add_layers=1, resampler_depth=1, resampler_dim_head=8,
                 resampler_heads=2, resampler_num_latents=4, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 600.0},
                 protein_encoder_config=dict(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=24, max_position_embeddings=64))),
    # Higgs Audio v2: Llama's attention, text positions through input_layernorm (every position here: the audio and
    # delay placeholder ids past the tiny vocabulary); no unembedding (its head scores audio codebooks)
    Variant("higgs-audio-v2-text-positions", "higgs", "HiggsAudioV2Config",
            dict(_LLAMA, num_key_value_heads=2, num_codebooks=2, codebook_size=8, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, audio_token_id=VOCAB, audio_bos_token_id=VOCAB + 1, audio_delay_token_id=VOCAB + 2,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # Pocket TTS's backbone: Llama's attention, biased here, in LayerNorm layers, GQA; no unembedding. Its audio
    # placeholder ids past the tiny vocabulary (every position a text token). Built as the base model (no causal LM)
    Variant("pocket-tts-layernorm-biases", "llama_base", "PocketTTSConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, attention_bias=True, pad_token_id=0,
                 audio_prompt_token_id=VOCAB, audio_latent_token_id=VOCAB + 1, audio_prompt_bos_token_id=VOCAB + 2,
                 audio_bos_token_id=VOCAB + 3, rope_parameters={"rope_type": "default", "rope_theta": 700.0},
                 flow_head_config=dict(hidden_size=16, num_hidden_layers=1, condition_dim=D, latent_dim=8),
                 latent_dim=8)),
    # Gradium Phonon TTS's backbone: Pocket TTS's, MHA without biases; its placeholder ids past the tiny vocabulary
    Variant("gradium-phonon-tts-layernorm", "llama_base", "GradiumPhononTTSConfig",
            dict(_COMMON, max_position_embeddings=64, pad_token_id=0, audio_prompt_token_id=VOCAB,
                 audio_latent_token_id=VOCAB + 1, audio_bos_token_id=VOCAB + 2, latent_dim=8, audio_prompt_dim=16,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0},
                 flow_head_config=dict(hidden_size=16, num_hidden_layers=1, condition_dim=D, latent_dim=8))),
    # GLM-Image's language model: GLM-4-0414's layers, rotate-half rotary on half of each head with multimodal sections,
    # q/k/v biased; its head (image tokens alone) not read. Built as the base model (no causal LM of its own)
    Variant("glm-image-text-half-rotary", "glm_image", "GlmImageTextConfig",
            dict(_LLAMA, num_key_value_heads=2, vision_vocab_size=40, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0, "partial_rotary_factor": 0.5,
                                  "mrope_section": [1, 1, 0]})),
    # GLM-4.5: Llama's rotate-half rotary on half of each head, QK-norm per head, q/k/v biased; MoE MLPs after the first
    Variant("glm4-moe-qk-norm-partial-bias", "llama", "Glm4MoeConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, use_qk_norm=True, first_k_dense_replace=1,
                 n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                 n_group=1, topk_group=1, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0, "partial_rotary_factor": 0.5})),
    # HY-V3: Qwen3's attention, all four projections biased by one switch, a dense first layer then MoE MLPs
    Variant("hy-v3-qk-norm-biases-moe", "llama", "HYV3Config",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, num_experts=4, num_experts_per_tok=2,
                 num_shared_experts=1, moe_intermediate_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # Flint: Qwen3's attention with a sink per head; layers 0, 1 and 4 global without rotary, 2 and 3 sliding
    Variant("flint-sinks-nope-global", "llama", "FlintConfig",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                 mlp_only_layers=[0], pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # Kolibri 1: EXAONE 4's attention (QK-norm, no biases; layer 4 global without rotary, the rest sliding) in GLM-4's
    # layers (a norm on the attention output)
    Variant("kolibri1-post-norm-nope-global", "glm4", "Kolibri1Config",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 3000.0})),
    # Sarvam MoE: GLM-4.5's layers, its defaults: QK-norm on, rotary on the whole head; q/k/v biases by use_qkv_bias
    Variant("sarvam-moe-full-rotary-qk-norm", "llama", "SarvamMoEConfig",
            dict(_LLAMA, num_key_value_heads=2, use_qkv_bias=True, first_k_dense_replace=1, n_routed_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, n_group=1, topk_group=1,
                 pad_token_id=0, eos_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # Param2 MoE (transformers 5.25): GLM-4.5's layers as built for it, its defaults: QK-norm on, rotary on the whole
    # head, embeddings tied; q/k/v biases by use_qkv_bias
    Variant("param2moe-full-rotary-qk-norm-tied", "llama", "Param2MoeConfig",
            dict({k: v for k, v in _LLAMA.items() if k != "tie_word_embeddings"}, num_key_value_heads=2,
                 use_qkv_bias=True, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=16, n_shared_experts=1, n_group=1, topk_group=1, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # MiniCPM 5 MoE (transformers 5.25): an output gate from q_gate_proj (per head the query's rows, then the gate's),
    # every projection biased
    Variant("minicpm5-moe-gated-gqa-bias", "llama", "MiniCPM5MoeConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, first_k_dense_replace=1, n_routed_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # LayerNorm1P (gain 1 + w, with bias), rotary on a quarter of each head, every projection biased
    Variant("nemotron-layernorm1p-partial-bias", "llama", "NemotronConfig",
            dict(_COMMON, head_dim=D_HEAD, num_key_value_heads=2, max_position_embeddings=64, norm_eps=1e-5,
                 attention_bias=True, tie_word_embeddings=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 2000.0, "partial_rotary_factor": 0.25})),
    # QK-norm per head, the input norm named attention_layernorm
    Variant("apertus-qk-norm", "apertus", "ApertusConfig",
            dict(_LLAMA, num_key_value_heads=2, rope_parameters={"rope_type": "default", "rope_theta": 2000.0})),
    # Apertus 1.5: Apertus's attention, Llama 3's rope scaling, its head unpruned
    Variant("apertus1p5-llama3-rope", "apertus", "Apertus1p5TextConfig",
            dict(_LLAMA, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 5000.0, "factor": 8.0,
                                  "original_max_position_embeddings": 16, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0})),
    # no input norm, a norm on the attention output, QK-norm per head; the global layer has no rotary
    Variant("exaone4-sliding-global-nope", "olmo2", "Exaone4Config",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, sliding_window_pattern=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 2000.0})),
    Variant("cohere-qk-layernorm-interleaved", "llama", "CohereConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, layer_norm_eps=1e-5, use_qk_norm=True,
                 logit_scale=0.5, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 2000.0})),
    Variant("cohere2-sliding-rotary-global-nope", "llama", "Cohere2Config",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, layer_norm_eps=1e-5, sliding_window=3,
                 layer_types=["sliding_attention", "full_attention"], pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # Cohere Compass: Cohere 2's block, rotate-half rotary (multimodal sections, ordinary on text) on the sliding
    # layer, none on the global one (its rope entry null), a logit scale
    Variant("cohere-compass-sliding-rotary-global-nope", "llama", "CohereCompassTextConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, layer_norm_eps=1e-5, sliding_window=3,
                 logit_scale=0.25, layer_types=["sliding_attention", "full_attention"], pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 700.0,
                                                                        "mrope_section": [2, 1, 1]},
                                                  "full_attention": None})),
    Variant("granite-multipliers-gqa", "granite", "GraniteConfig",
            dict(_LLAMA, num_key_value_heads=2, embedding_multiplier=3.0, attention_multiplier=0.3,
                 residual_multiplier=0.4, logits_scaling=2.5, rope_parameters={"rope_type": "default", "rope_theta": 700.0})),
    Variant("granitemoe-shared-mqa-bias", "granite", "GraniteMoeSharedConfig",
            dict(_LLAMA, num_key_value_heads=1, attention_bias=True, embedding_multiplier=0.7, attention_multiplier=0.05,
                 residual_multiplier=2.2, logits_scaling=0.8, num_local_experts=4, num_experts_per_tok=2,
                 shared_intermediate_size=16, tie_word_embeddings=True)),
    Variant("granite-hybrid-nope-moe", "hybrid", "GraniteMoeHybridConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, layer_types=["mamba", "attention", "mamba", "attention"],
                 embedding_multiplier=2.0, attention_multiplier=0.2, residual_multiplier=0.5, logits_scaling=3.0,
                 num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=16, mamba_n_heads=8,
                 mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=4, position_embedding_type="nope")),
    Variant("granite-hybrid-rope-dense", "hybrid", "GraniteMoeHybridConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=1, layer_types=["attention", "mamba", "attention"],
                 residual_multiplier=1.5, num_local_experts=0, shared_intermediate_size=16, mamba_n_heads=8,
                 mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=4, position_embedding_type="rope",
                 rope_parameters={"rope_type": "default", "rope_theta": 600.0})),
    # Llama 3.2 Vision's language model: a cross-attention layer (to the image: on text, not run) at index 1 of 4; the
    # embedding 8 rows longer than the vocabulary; Llama 3's rope scaling
    Variant("mllama-text-cross-attention-layer", "hybrid", "MllamaTextConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, cross_attention_layers=[1], pad_token_id=VOCAB - 1,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    # DeepSeek-V3's multi-head latent attention: query and key/value latents RMS-normed, a key's rotated part shared
    # by every head, values narrower than queries; a dense first layer, experts after it
    Variant("deepseek-v3-latent-attention", "llama", "DeepseekV3Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=6, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, first_k_dense_replace=1, rope_interleave=True)),
    # without a query latent (q_proj, as DeepSeek-V2-Lite's), biases, rotated halves, YaRN's factors
    Variant("deepseek-v3-no-query-latent-yarn-bias", "llama", "DeepseekV3Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=None, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=4, v_head_dim=10, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, first_k_dense_replace=1, rope_interleave=False, attention_bias=True,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "mscale": 0.8,
                                  "mscale_all_dim": 0.6, "original_max_position_embeddings": 16, "beta_fast": 32.0,
                                  "beta_slow": 1.0})),
    # GLM-4.7-Flash and Youtu-LLM: DeepSeek-V3's attention under their own names (GLM's head_dim an alias of the
    # rotated width)
    Variant("glm4-moe-lite-latent-attention", "llama", "Glm4MoeLiteConfig",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=8, v_head_dim=12, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, mlp_layer_types=["dense", "sparse"])),
    Variant("axk1-latent-attention", "llama", "AXK1Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=6, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, mlp_layer_types=["dense", "sparse"])),
    # Sarvam-105B: DeepSeek-V3's attention as transformers builds it from SarvamMLAConfig (no query latent by default),
    # YaRN
    Variant("sarvam-mla-latent-attention-yarn", "llama", "SarvamMLAConfig",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, kv_lora_rank=10, qk_rope_head_dim=4, qk_nope_head_dim=6,
                 v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "mscale": 0.8,
                                  "mscale_all_dim": 0.6, "original_max_position_embeddings": 16})),
    Variant("youtu-latent-attention-tied", "llama", "YoutuConfig",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=6, tie_word_embeddings=True)),
    # MiniCPM3: DeepSeek-V2's attention with rotated halves; muP's embedding, residual and logit scalars
    Variant("minicpm3-latent-attention-mup", "llama", "MiniCPM3Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=8, scale_emb=3.0, scale_depth=1.4, dim_model_base=8,
                 tie_word_embeddings=True)),
    # Mistral 4: head_dim the whole query head, partial_rotary_factor its rotated share; YaRN; Llama 4's query
    # temperature past the original context (16: the tests' sequences are within it)
    Variant("mistral4-latent-attention-temperature", "llama", "Mistral4Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, first_k_dense_replace=1,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0,
                                  "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1,
                                  "partial_rotary_factor": 0.4})),
    # DeepSeek-V3.2: V3's attention behind a sparse indexer that selects every key on sequences of up to index_topk
    Variant("deepseek-v32-indexer-within-topk", "llama", "DeepseekV32Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=6, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, mlp_layer_types=["dense", "sparse"], index_topk=16, index_head_dim=8,
                 index_n_heads=2)),
    # Ling 3: a latent attention layer (a sigmoid gate per head) among linear-attention (KDA) layers
    Variant("ling3-latent-attention-gated-hybrid", "hybrid", "BailingHybridConfig",
            dict(_NO_HEAD_DIM, num_hidden_layers=4, num_key_value_heads=HEADS, q_lora_rank=None, kv_lora_rank=10,
                 qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=6, num_experts=4, num_experts_per_token=2,
                 num_shared_experts=1, num_expert_group=1, topk_group=1, moe_intermediate_size=16,
                 layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                 mlp_layer_types=["dense"] * 4, linear_head_dim=8, linear_num_heads=4, pad_token_id=0)),
    # LongCat-Flash: two latent attention sublayers per layer, LoRA scales on the normed latents, a shortcut MoE
    Variant("longcat-flash-two-sublayers-lora-scaled", "longcat", "LongcatFlashConfig",
            dict(_NO_HEAD_DIM, num_hidden_layers=4, num_layers=2, num_key_value_heads=HEADS, q_lora_rank=12,
                 kv_lora_rank=10, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=8, head_dim=4, ffn_hidden_size=32,
                 expert_ffn_hidden_size=16, n_routed_experts=4, moe_topk=2, zero_expert_num=2)),
    # MiMo-V2-Flash: a global layer, then sliding ones with twice the K/V heads and sinks; values narrower than keys,
    # scaled; a third of each head rotated, each layer type at its own base
    Variant("mimo-v2-flash-sliding-sinks-narrow-values", "llama", "MiMoV2FlashConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=1, head_dim=12, v_head_dim=8, sliding_window=3,
                 layer_types=["full_attention", "sliding_attention", "sliding_attention"], attention_value_scale=0.7,
                 n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                 mlp_layer_types=["dense", "sparse", "dense"],
                 rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5000.0,
                                                     "partial_rotary_factor": 0.334},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 100.0,
                                                        "partial_rotary_factor": 0.334}})),
    # Kimi Linear: latent attention layers without positions (NoPE) among Kimi Delta Attention layers
    Variant("kimi-linear-nope-latent-hybrid", "hybrid", "KimiLinearConfig",
            dict(_NO_HEAD_DIM, num_hidden_layers=4, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10,
                 qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=8, num_local_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=16, layer_types=["linear_attention", "full_attention", "linear_attention",
                                                        "full_attention"],
                 mlp_layer_types=["dense"] * 4, linear_head_dim=8, linear_num_heads=4, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2)),
    # GLM-5: DeepSeek-V3.2's attention and indexer under its own names (its layers return their choice of keys too)
    Variant("glm5-dsa-indexer-within-topk", "llama", "GlmMoeDsaConfig",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=12, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=6, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 moe_intermediate_size=16, mlp_layer_types=["dense", "sparse"], index_topk=16, index_head_dim=8,
                 index_n_heads=2, indexer_types=["full", "full"])),
    # DeepSeek-V2-Lite: no query latent, its rotated dims turned as complex numbers (adjacent pairs)
    Variant("deepseek-v2-lite-complex-rotary", "llama", "DeepseekV2Config",
            dict(_NO_HEAD_DIM, num_key_value_heads=HEADS, q_lora_rank=None, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                 first_k_dense_replace=1)),
    Variant("jamba-attention-every-second-layer", "hybrid", "JambaConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, attn_layer_period=2, attn_layer_offset=1,
                 num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=0, mamba_d_state=8,
                 mamba_dt_rank=4, use_mamba_kernels=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    Variant("bamba-half-rotary", "hybrid", "BambaConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, attn_layer_indices=[1, 2], mamba_n_heads=8,
                 mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=4, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # LFM2: convolution layers with attention layers among them (operator_norm, out_proj, q/k_layernorm, embedding_norm)
    Variant("lfm2-conv-attention", "hybrid", "Lfm2Config",
            dict({k: v for k, v in _LLAMA.items() if k != "rms_norm_eps"}, num_hidden_layers=4, num_key_value_heads=2,
                 layer_types=["conv", "full_attention", "conv", "full_attention"], norm_eps=1e-5, tie_word_embeddings=True,
                 block_auto_adjust_ff_dim=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 5000.0})),
    # Nemotron-H: one mixer per block (Mamba-2, attention, MLP), attention without positions or biases
    Variant("nemotron-h-mamba-attention-mlp", "hybrid", "NemotronHConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=2, head_dim=D_HEAD,
                 layers_block_type=["mamba", "attention", "mlp", "attention", "mamba"], intermediate_size=48,
                 ssm_state_size=8, mamba_num_heads=8, mamba_head_dim=8, n_groups=1, chunk_size=4, layer_norm_epsilon=1e-5,
                 max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # Falcon-H1: a Mamba-2 mixer beside the attention in every layer; five muP multipliers, all biases
    Variant("falcon-h1-parallel-mamba-multipliers", "falcon_h1", "FalconH1Config",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, mamba_d_ssm=32, mamba_n_heads=4, mamba_n_groups=1,
                 mamba_d_state=8, mamba_chunk_size=4, attention_in_multiplier=0.7, key_multiplier=1.3,
                 attention_out_multiplier=0.6, embedding_multiplier=1.5, lm_head_multiplier=0.8, pad_token_id=0,
                 bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 2000.0})),
    # MiniMax-M2: QK-norm over all heads of a layer, rotary on rotary_dim of each head's dims, MoE MLPs
    Variant("minimax-m2-layer-qk-norm-rotary-dim", "llama", "MiniMaxM2Config",
            dict(_LLAMA, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, rotary_dim=4,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 5000.0})),
    # nanochat: norms without gains (one on the embeddings), QK-norm after a reversed rotary map, soft-capped logits
    Variant("nanochat-reversed-rotary-qk-norm", "llama", "NanoChatConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, final_logit_softcapping=3.0, pad_token_id=1,
                 bos_token_id=0, eos_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # Ministral 3: Mistral's attention with YaRN and Llama 4's query temperature past the original context
    Variant("ministral3-yarn-temperature-sliding", "llama", "Ministral3Config",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=4, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 5000.0, "factor": 4.0,
                                  "original_max_position_embeddings": 16, "llama_4_scaling_beta": 0.1,
                                  "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0})),
    # Phi-3.5-MoE: LayerNorms with biases, every projection and the unembedding biased, LongRoPE with its amplitude stated
    Variant("phimoe-layernorm-biases-longrope", "llama", "PhimoeConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, lm_head_bias=True, num_local_experts=4,
                 num_experts_per_tok=2, sliding_window=6, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "longrope", "rope_theta": 700.0, "short_factor": [1.0, 2.0, 3.0, 4.0],
                                  "long_factor": [2.0, 4.0, 6.0, 8.0], "short_mscale": 1.2, "long_mscale": 1.3,
                                  "original_max_position_embeddings": 16})),
    # FlexOlmo: OLMo-2's attention (no input norm, a norm on its output, layer-wide QK-norm), MoE MLPs
    Variant("flex-olmo-layer-qk-norm-moe", "olmo2", "FlexOlmoConfig",
            dict(_LLAMA, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, pad_token_id=0, eos_token_id=1,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # Granite SWA: Granite's scalars, a sink logit per head, windows on the sliding layers, a rotary base per layer
    Variant("granite-swa-sinks-layer-theta", "granite", "GraniteSWAConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, sliding_window=3, attention_bias=True,
                 embedding_multiplier=1.3, attention_multiplier=0.3, residual_multiplier=0.8, logits_scaling=2.0,
                 layer_rope_theta=[900.0, 0, 3000.0], pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # GraniteMoeSWA: Granite SWA's attention (every fourth layer global by default), MoE MLPs with a shared expert
    Variant("granitemoe-swa-default-types", "granite", "GraniteMoeSWAConfig",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3, num_local_experts=4,
                 num_experts_per_tok=2, shared_intermediate_size=16, embedding_multiplier=1.3, attention_multiplier=0.3,
                 residual_multiplier=0.8, logits_scaling=2.0, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    # Solar Open: Llama's attention, q/k/v biased and o_proj not, MoE MLPs
    Variant("solar-open-qkv-bias-moe", "llama", "SolarOpenConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, moe_intermediate_size=16, n_routed_experts=4,
                 num_experts_per_tok=2, n_shared_experts=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # EXAONE 3.x: a Llama that transformers builds from LG's config keys and weight names
    Variant("exaone3-llama-under-lg-names", "llama", "ExaoneConfig",
            dict(_LLAMA, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # EXAONE MoE: QK-norm, a window on three layers in four and no rotary on the fourth, pre-norm, MoE MLPs
    Variant("exaone-moe-sliding-global-nope", "llama", "ExaoneMoeConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, sliding_window=3, sliding_window_pattern=4,
                 first_k_dense_replace=1, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    # OLMo-hybrid: OLMo-2's attention layers among gated DeltaNet layers
    Variant("olmo-hybrid-deltanet-attention", "hybrid", "OlmoHybridConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2,
                 layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                 linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8,
                 pad_token_id=0, eos_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    Variant("olmo-parameter-free-layernorm", "llama", "OlmoConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64,
                 rope_parameters={"rope_type": "default", "rope_theta": 900.0})),
    Variant("olmo2-layer-qk-norm", "olmo2", "Olmo2Config",
            dict(_LLAMA, num_key_value_heads=2, rope_parameters={"rope_type": "default", "rope_theta": 5000.0})),
    Variant("olmo3-sliding-mqa", "olmo2", "Olmo3Config",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=1, sliding_window=3, attention_bias=True,
                 layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 80.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 4000.0}})),
    Variant("olmoe-layer-qk-norm", "llama", "OlmoeConfig",
            dict(_LLAMA, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2)),
    Variant("phi-partial-rotary-qk-layernorm", "phi", "PhiConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, qk_layernorm=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 600.0, "partial_rotary_factor": 0.5})),
    Variant("phi-mha", "phi", "PhiConfig",
            dict(_COMMON, max_position_embeddings=64, tie_word_embeddings=False,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75})),
    Variant("stablelm-partial-rotary-parallel", "llama", "StableLmConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, use_qkv_bias=True, use_parallel_residual=True,
                 layer_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 800.0, "partial_rotary_factor": 0.25})),
    Variant("stablelm-sequential-no-bias", "llama", "StableLmConfig",
            dict(_COMMON, num_key_value_heads=HEADS, max_position_embeddings=64, use_qkv_bias=False, use_parallel_residual=False,
                 bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
    Variant("stablelm-qk-layernorm-per-head", "llama", "StableLmConfig",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, use_qkv_bias=True, qk_layernorm=True,
                 use_parallel_residual=False, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 700.0, "partial_rotary_factor": 0.5})),
    Variant("starcoder2-bias-sliding3", "llama", "Starcoder2Config",
            dict(_COMMON, num_key_value_heads=2, max_position_embeddings=64, sliding_window=3, norm_epsilon=1e-5,
                 bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 1500.0})),
    Variant("falcon-mqa-parallel", "falcon", "FalconConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_hidden_size=48,
                 multi_query=True, parallel_attn=True, bias=False, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    Variant("falcon-grouped-gqa-bias", "falcon", "FalconConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_hidden_size=48,
                 new_decoder_architecture=True, num_kv_heads=2, bias=True, bos_token_id=1, eos_token_id=2,
                 tie_word_embeddings=False)),
    Variant("falcon-per-head-sequential", "falcon", "FalconConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_hidden_size=48,
                 multi_query=False, parallel_attn=False, bias=True, bos_token_id=1, eos_token_id=2,
                 rope_parameters={"rope_type": "default", "rope_theta": 3000.0})),
    Variant("bloom-alibi", "bloom", "BloomConfig",
            dict(vocab_size=VOCAB, hidden_size=48, n_head=6, n_layer=2, bos_token_id=1, eos_token_id=2)),  # 6 heads: slopes beyond a power of 2
    Variant("mpt-alibi-scaled", "mpt", "MptConfig",  # 6 heads: MPT's slope order; its own logit scale
            dict(vocab_size=VOCAB, d_model=48, n_heads=6, n_layers=2, max_seq_len=32, expansion_ratio=2,
                 attn_config={"softmax_scale": 0.2})),
    Variant("gptj-interleaved-rotary", "gptj", "GPTJConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, n_positions=32, n_inner=48, rotary_dim=4)),
    # eight heads over qkv_proj's four chunks of [queries | values | keys], two heads each
    Variant("codegen-eight-heads-four-shards", "gptj", "CodeGenConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=8, n_layer=2, n_positions=32, n_ctx=32, n_inner=48, rotary_dim=4)),
    Variant("opt", "opt", "OPTConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_dim=48,
                 max_position_embeddings=32, word_embed_proj_dim=D, pad_token_id=1, bos_token_id=2, eos_token_id=2)),
    # OPT-350m: post-LN blocks (the first reading the raw embeddings, no norm before the logits), its token embeddings
    # narrower than the residual and projected in and out of it
    Variant("opt-350m-post-ln-projected", "opt", "OPTConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_dim=48,
                 max_position_embeddings=32, word_embed_proj_dim=D // 2, do_layer_norm_before=False, pad_token_id=1,
                 bos_token_id=2, eos_token_id=2)),
    # pre-LN with the projections and without the final norm (_remove_final_layer_norm: fine-tunes from before it)
    Variant("opt-projected-no-final-norm", "opt", "OPTConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2, ffn_dim=48,
                 max_position_embeddings=32, word_embed_proj_dim=D + 8, _remove_final_layer_norm=True, pad_token_id=1,
                 bos_token_id=2, eos_token_id=2)),
    Variant("gemma", "llama", "GemmaConfig", dict(_LLAMA, num_key_value_heads=1, tie_word_embeddings=True)),
    Variant("gemma2-softcap", "gemma3", "Gemma2Config",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, query_pre_attn_scalar=10, sliding_window=3,
                 attn_logit_softcapping=0.7, final_logit_softcapping=None, tie_word_embeddings=True)),
    # Gemma 2 without the norm on the attention output
    Variant("vaultgemma-softcap", "llama", "VaultGemmaConfig",
            dict(_LLAMA, num_key_value_heads=2, query_pre_attn_scalar=10, sliding_window=3, attn_logit_softcapping=0.7,
                 final_logit_softcapping=None, layer_types=["sliding_attention", "full_attention"])),
    Variant("gemma3-text", "gemma3", "Gemma3TextConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, query_pre_attn_scalar=13, sliding_window=3,
                 layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 3000.0}},
                 final_logit_softcapping=None, attn_logit_softcapping=None, tie_word_embeddings=True)),
    Variant("gemma3-text-mqa-bias", "gemma3", "Gemma3TextConfig",
            dict(_LLAMA, num_key_value_heads=1, attention_bias=True, query_pre_attn_scalar=6, sliding_window=4,
                 layer_types=["full_attention", "sliding_attention"],
                 final_logit_softcapping=None, attn_logit_softcapping=None)),
    # Gemma 4: heads 8 wide on local layers, 16 on global ones (1 K/V head there, values from the key projection),
    # proportional rotary on the global layers, a value norm, layer scalars (build: not 1)
    Variant("gemma4-widths-k-eq-v-scalars", "gemma4", "Gemma4TextConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, global_head_dim=16, num_global_key_value_heads=1,
                 attention_k_eq_v=True, sliding_window=3,
                 layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                                  "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                     "rope_theta": 3000.0}},
                 hidden_size_per_layer_input=0, vocab_size_per_layer_input=VOCAB, final_logit_softcapping=None,
                 tie_word_embeddings=True)),
    # Gemma 4 with per-layer embeddings (a writer between layers), one head width, its own value projections
    Variant("gemma4-per-layer-embeddings", "gemma4", "Gemma4TextConfig",
            dict(_LLAMA, num_hidden_layers=2, num_key_value_heads=1, global_head_dim=D_HEAD, sliding_window=4,
                 layer_types=["sliding_attention", "full_attention"], hidden_size_per_layer_input=4,
                 vocab_size_per_layer_input=VOCAB, final_logit_softcapping=None, tie_word_embeddings=True)),
    # Gemma 4's unified models: Gemma 4's attention in Gemma 2's layers (no per-layer embeddings), widths as above
    Variant("gemma4-unified-widths-k-eq-v", "gemma4", "Gemma4UnifiedTextConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, global_head_dim=16, num_global_key_value_heads=1,
                 attention_k_eq_v=True, sliding_window=3,
                 layer_types=["sliding_attention", "full_attention", "full_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 70.0},
                                  "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                     "rope_theta": 2000.0}},
                 final_logit_softcapping=None, tie_word_embeddings=True)),
    # Cohere 2 MoE: two dense first layers, global and rotating (prefix pattern 1); then sliding, global without rotary
    Variant("cohere2-moe-dense-prefix-rms", "llama", "Cohere2MoeConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, rms_norm_eps=1e-5, first_k_dense_replace=2,
                 sliding_window=3, sliding_window_pattern=2, num_experts=4, num_experts_per_tok=2,
                 prefix_dense_intermediate_size=48, logit_scale=0.5, tie_word_embeddings=True)),
    Variant("cohere2-moe-layernorm", "llama", "Cohere2MoeConfig",
            dict(_LLAMA, rms_norm_eps=None, layer_norm_eps=1e-5, num_key_value_heads=1, sliding_window=3,
                 num_experts=4, num_experts_per_tok=2, logit_scale=0.25, tie_word_embeddings=True)),
    # pre-LN encoder: no embeddings LayerNorm, a LayerNorm before each attention and one after the last layer
    Variant("xlm-roberta-xl-pre-ln", "xlmr_xl", "XLMRobertaXLConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    # Persimmon: NeoX's fused qkv per head, a LayerNorm on each query and key head, rotary on half of each head
    Variant("persimmon-qk-layernorm-half-rotary", "persimmon", "PersimmonConfig",
            dict(_COMMON, max_position_embeddings=64, layer_norm_eps=1e-5, qk_layernorm=True,
                 rope_parameters={"rope_type": "default", "rope_theta": 700.0, "partial_rotary_factor": 0.5})),
    # HyperCLOVA X: Granite's four scalars (the logits multiplied), an RMSNorm on each attention output (Peri-LN)
    Variant("hyperclovax-peri-ln-multipliers", "hyperclovax", "HyperCLOVAXConfig",
            dict(_LLAMA, num_key_value_heads=2, embedding_multiplier=1.7, attention_multiplier=0.3,
                 residual_multiplier=0.6, logits_scaling=0.8, use_post_norm=True)),
    # InternLM3 (transformers' Llama): one switch for all four biases
    Variant("internlm3-biases", "llama", "InternLM3Config",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, mlp_bias=True)),
    # Jais 2: Llama's attention with biases, LayerNorms with biases
    Variant("jais2-layernorm-biases", "llama", "Jais2Config",
            dict(_LLAMA, rms_norm_eps=None, layer_norm_eps=1e-5, num_key_value_heads=2)),
    # CWM: layers 0 and 4 global, the others within a window of 3; Llama 3's rope scaling
    Variant("cwm-every-fourth-global", "llama", "CwmConfig",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3,
                 rope_parameters={"rope_type": "llama3", "rope_theta": 500.0, "factor": 4.0, "high_freq_factor": 4.0,
                                  "low_freq_factor": 1.0, "original_max_position_embeddings": 16})),
    # BioGPT: OPT's layout, positions two rows late, embeddings times sqrt(d_model), a tied output_projection
    Variant("biogpt-scaled-embeddings", "biogpt", "BioGptConfig",
            dict(_COMMON, max_position_embeddings=32, pad_token_id=1, bos_token_id=0, eos_token_id=2)),
    # AFMoE (Arcee Trinity): gated heads, QK-norm, a norm on each attention output, layers 3 global without rotary,
    # the others within a window of 3 and rotated; embeddings times sqrt(d_model) (muP); MoE from layer 1
    Variant("afmoe-gated-nope-global", "afmoe", "AfmoeConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, sliding_window=3, global_attn_every_n_layers=4,
                 mup_enabled=True, num_dense_layers=1, num_experts=4, num_experts_per_tok=2, num_shared_experts=1,
                 moe_intermediate_size=16)),
    # Mellum: Qwen3-MoE's attention, layer 1 sliding (window 3) with its own rotary base
    Variant("mellum-sliding-layer-bases", "llama", "MellumConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=3, layer_types=["full_attention", "sliding_attention"],
                 rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 900.0},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 40.0}},
                 num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)),
    # CTRL: pre-LN, embeddings times sqrt(d_model), sinusoidal positions the model computes, a biased unembedding
    Variant("ctrl-sinusoidal-scaled", "ctrl", "CTRLConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, dff=48, n_positions=32)),
    # XGLM: OPT's layout, embeddings times sqrt(d_model), sinusoidal positions the model computes
    Variant("xglm-sinusoidal-positions", "xglm", "XGLMConfig",
            dict(vocab_size=VOCAB, d_model=D, attention_heads=HEADS, num_layers=2, ffn_dim=48, max_position_embeddings=32,
                 pad_token_id=1, bos_token_id=0, eos_token_id=2)),
    # Kosmos-2.5's language model: XGLM's layout, sinusoids from row pad_token_id + 1 plus a segment embedding's row 0,
    # LayerNorms at the config's eps
    Variant("kosmos2.5-text-segment-sinusoids", "xglm", "Kosmos2_5TextConfig",
            dict(vocab_size=VOCAB, embed_dim=D, attention_heads=HEADS, layers=2, ffn_dim=48, max_position_embeddings=32,
                 layer_norm_eps=1e-6, pad_token_id=3, bos_token_id=0, eos_token_id=2)),
    # Megatron-BERT: BERT's embeddings (positions from 0, two token types) without a LayerNorm, pre-LN layers
    Variant("megatron-bert-pre-ln", "megatron_bert", "MegatronBertConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-5)),
    # ModernBERT: its first layer reads the normed embeddings without a norm; layers 1 and 3 attend within 3 tokens on
    # either side (local_attention 6), each layer type with its own rotary base; as the hub's configs state it
    Variant("modernbert-local-both-sides", "modernbert", "ModernBertConfig",
            dict(_COMMON, num_hidden_layers=4, local_attention=6, global_attn_every_n_layers=2, global_rope_theta=500.0,
                 local_rope_theta=50.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)),
    # ModernBERT's decoder (Ettin): the same layers with separate q/k/v projections, causal, windows of 2 behind the query
    Variant("modernbert-decoder-causal-window", "modernbert_decoder", "ModernBertDecoderConfig",
            dict(_COMMON, num_hidden_layers=3, local_attention=4, global_attn_every_n_layers=2, norm_bias=True,
                 attention_bias=True, global_rope_theta=500.0, local_rope_theta=50.0, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, cls_token_id=1, sep_token_id=2)),
    # with attention and LayerNorm biases, every third layer global
    Variant("modernbert-biases", "modernbert", "ModernBertConfig",
            dict(_COMMON, num_hidden_layers=3, local_attention=4, norm_bias=True, attention_bias=True, pad_token_id=0,
                 bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)),
    # EmbeddingGemma: Gemma 3 attending both ways, its local layers within sliding_window // 2 = 3 tokens on either side
    Variant("embeddinggemma-bidirectional", "gemma3_bidirectional", "Gemma3TextConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, query_pre_attn_scalar=12, sliding_window=6,
                 use_bidirectional_attention=True, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                 final_logit_softcapping=None, attn_logit_softcapping=None, tie_word_embeddings=True)),
    # T5Gemma's encoder: Gemma 2's layers attending both ways, the first layer within 3 tokens on either side (|i − j| ≤
    # sliding_window, as transformers 5 masks it), soft-capped logits
    Variant("t5gemma-encoder-both-sides", "t5gemma", "T5GemmaConfig",
            dict(vocab_size=VOCAB, is_encoder_decoder=False, encoder=_T5GEMMA, decoder=_T5GEMMA)),
    # T5Gemma 2's encoder (built alone, with its vision tower): Gemma 3's layers attending both ways, the sliding
    # layers' window 5 split around each token as transformers masks it (2 keys on either side: an odd window)
    Variant("t5gemma2-encoder-odd-window", "t5gemma2", "T5Gemma2EncoderConfig",
            dict(text_config=_T5GEMMA2_TEXT, vision_config=_T5GEMMA2_VISION, mm_tokens_per_image=4,
                 boi_token_index=VOCAB - 4, eoi_token_index=VOCAB - 3, image_token_index=VOCAB - 2)),
    # Dia's text encoder: pre-RMSNorm rotary layers attending both ways, unscaled logits, grouped K/V heads; built
    # alone (a whole model's folders: test_speech_backbones)
    Variant("dia-encoder-unscaled-gqa", "dia", "DiaEncoderConfig", _DIA_ENCODER),
    # EuroBERT: Llama's layers as an encoder, grouped K/V heads, biases on all four projections
    Variant("eurobert-gqa-biases", "eurobert", "EuroBertConfig",
            dict(_LLAMA, num_key_value_heads=2, attention_bias=True, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 mask_token_id=3, rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    # OpenAI's privacy filter: gpt-oss's attention (sinks, biases, YaRN) as an encoder, every layer seeing 2 tokens on
    # either side; rotary on interleaved pairs
    # ESM C: Llama's names as an encoder, LayerNorms, one QK LayerNorm over a layer's heads, branches / sqrt(L / 36)
    Variant("esmc-layer-qk-layernorm", "esmc", "EsmcConfig",
            dict(_COMMON, num_hidden_layers=4, rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    # CLIP's text encoder: causal, pre-LN (layer_norm1), learned positions, no unembedding
    # AIMv2's text encoder: CLIP's layout with RMSNorms, biases on all four projections, causal (transformers masks it so
    # only when given an attention mask: model_inputs gives one)
    Variant("aimv2-text-rms-biases", "aimv2", "Aimv2TextConfig",
            dict(_COMMON, max_position_embeddings=24, eos_token_id=1, qkv_bias=True)),
    Variant("clip-text-causal", "clip", "CLIPTextConfig",
            dict(_COMMON, max_position_embeddings=24, bos_token_id=0, eos_token_id=1, pad_token_id=1)),
    # TIPSv2's text encoder: CLIP's layout attending both ways, token embeddings times sqrt(d), sinusoidal positions
    Variant("tipsv2-text-scaled-sinusoids", "clip", "Tipsv2TextConfig", dict(_COMMON, max_position_embeddings=24)),
    Variant("privacy-filter-sinks-both-sides", "eurobert", "OpenAIPrivacyFilterConfig",
            dict(_LLAMA, num_key_value_heads=2, sliding_window=2, num_local_experts=2, num_experts_per_tok=1,
                 pad_token_id=0, eos_token_id=0,
                 rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
                                  "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096})),
    # Muse Glimmer: normed embeddings, sandwich 1 + w norms, gainless QK-norm with a query scale, a per-dimension gate;
    # layers 0 and 2 sliding (window 3), 1 and 3 global without rotary (transformers' default: every fourth from the last)
    Variant("muse-glimmer-gated-nope-global", "muse_glimmer", "MuseGlimmerTextConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, sliding_window=3, qk_scale_factor=2.5,
                 output_multiplier=0.5, post_norm_eps=1e-6, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                 layer_rope_theta=[700.0, 0, 700.0, 0], rope_parameters={"rope_type": "default", "rope_theta": 700.0})),
    # EmbeddingGemma 2: Gemma 4's layers as an encoder; local layers (radius 2) 4 wide with 2 K/V heads, the global
    # layer 8 wide with 1; per-layer inputs projected from the embeddings; layer scalars
    Variant("embedding-gemma2-encoder", "gemma4_encoder", "EmbeddingGemma2TextConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, head_dim=4, global_head_dim=8, sliding_window=2,
                 sliding_window_pattern=3, hidden_size_per_layer_input=4, embedding_dim=8, hidden_activation="gelu",
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 5000.0}})),
    # UltraBERT: EuroBERT's layers with local layers seeing 2 tokens on either side (transformers' default: every third
    # layer global), each layer type at its own rotary base
    Variant("ultrabert-local-both-sides", "eurobert", "UltrabertConfig",
            dict(_LLAMA, num_hidden_layers=3, num_key_value_heads=2, sliding_window=2, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                                  "full_attention": {"rope_type": "default", "rope_theta": 5000.0}})),
    # RecurrentGemma: attention blocks 1 and 3 of five among RG-LRU blocks, multi-query, rotary on half of each head,
    # a window of 4, q/k/v biases (the output projection's always)
    Variant("recurrent-gemma-local-mqa", "recurrent_gemma", "RecurrentGemmaConfig",
            dict(_COMMON, num_hidden_layers=5, num_key_value_heads=1, attention_window_size=4, lru_width=32,
                 block_types=["recurrent", "attention"], attention_bias=True)),
    # LFM3: a global layer (proportional rotary on half of its pairs) and a sliding one among convolution layers,
    # per-head QK-norm, a sigmoid gate per head, a norm on each attention output
    Variant("lfm3-gated-proportional-sliding", "lfm3", "Lfm3Config",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2)),  # (rms_norm_eps: its other name for norm_eps)
    # Qwen3.5: gated attention on layers 1 and 3 among gated DeltaNet layers; QK-norm, 1 + w norms, a quarter rotary
    Variant("qwen3.5-gated-attention-deltanet", "hybrid", "Qwen3_5TextConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8,
                 linear_num_key_heads=2, linear_num_value_heads=4,
                 layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])),
    # Lara-mini: Qwen3's attention (no gate) on sliding layers 1 and 4 (rotary) and global layer 3 (NoPE), DeltaNet between
    Variant("lara-mini-sliding-nope-deltanet", "hybrid", "LaraMiniConfig",
            dict(_LLAMA, num_hidden_layers=5, num_key_value_heads=2, sliding_window=3, linear_key_head_dim=8,
                 linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # Qwen3-Next: the same attention every second layer (full_attention_interval), sparse MoE MLPs
    Variant("qwen3-next-gated-moe-interval", "hybrid", "Qwen3NextConfig",
            dict(_LLAMA, num_hidden_layers=4, num_key_value_heads=1, linear_key_head_dim=8, linear_value_head_dim=8,
                 linear_num_key_heads=2, linear_num_value_heads=4, full_attention_interval=2, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                 rope_parameters={"rope_type": "default", "rope_theta": 300.0, "partial_rotary_factor": 0.5})),
    # GPT-1: post-LN as BERT, causal, its first layer reading the raw embeddings
    # GPT-NeoX-Japanese: NeoX's fused qkv without biases, sequential blocks, an output bias on the last layer alone
    # that the attention returns beside its output
    Variant("gpt-neox-japanese-last-bias", "neox_japanese", "GPTNeoXJapaneseConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=2,
                 intermediate_multiple_size=2, max_position_embeddings=64, rotary_pct=0.5, rotary_emb_base=500.0)),
    Variant("openai-gpt-post-ln", "gpt1", "OpenAIGPTConfig",
            dict(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=2, n_positions=32)),
    # ESM-2: pre-LN layers under BERT's names, rotary, token dropout's embedding scale (mask token 0: never drawn)
    Variant("esm2-rotary-token-dropout", "esm", "EsmConfig",
            dict(_COMMON, max_position_embeddings=34, pad_token_id=1, mask_token_id=0, position_embedding_type="rotary",
                 token_dropout=True, emb_layer_norm_before=False, layer_norm_eps=1e-5)),
    # BERT's post-LN layers with rotary positions and no position table: jina-embeddings-v3 (biases), nomic-embed-text
    # (none), GTE (biases, token types where type_vocab_size > 0)
    Variant("jina-embeddings-v3-rotary-post-ln", "rotary_bert", "JinaEmbeddingsV3Config",
            dict(_COMMON, max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-5,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    Variant("nomic-bert-rotary-no-bias", "rotary_bert", "NomicBertConfig",
            dict(_COMMON, max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-5,
                 rope_parameters={"rope_type": "default", "rope_theta": 300.0})),
    Variant("gte-rotary-no-token-types", "rotary_bert", "GteConfig",
            dict(_COMMON, max_position_embeddings=64, type_vocab_size=0, layer_norm_eps=1e-5,
                 rope_parameters={"rope_type": "default", "rope_theta": 800.0})),
    Variant("bert", "bert", "BertConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12)),
    # positions from pad_token_id + 1 = 2, as RoBERTa's (514 rows for 512 tokens)
    Variant("roberta-offset-positions", "bert", "RobertaConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    # I-BERT with quant_mode off: RoBERTa's float maps, every module returning a scaling factor (None) beside its output
    Variant("ibert-float", "bert", "IBertConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    # the text towers of ALIGN (BERT) and CLAP (RoBERTa's positions, from pad_token_id + 1 = 2)
    Variant("align-text-bert", "bert", "AlignTextConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12)),
    Variant("clap-text-roberta", "bert", "ClapTextConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    # BridgeTower's text encoder: RoBERTa's (its cross-modal layers, in the whole model, not read)
    Variant("bridgetower-text-roberta", "bert", "BridgeTowerTextConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    Variant("altclip-text-roberta-layers", "altclip", "AltCLIPTextConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                 project_dim=16)),
    Variant("data2vec-text-pad-zero", "bert", "Data2VecTextConfig",
            dict(_COMMON, max_position_embeddings=33, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=0)),
    # LUKE on words alone: RoBERTa's layers and positions (from pad_token_id + 1 = 2), an entity stream and entity-aware
    # queries beside them that act only on entity inputs
    Variant("luke-words-alone", "bert", "LukeConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                 entity_vocab_size=7, entity_emb_size=16, use_entity_aware_attention=True)),
    # BigBird as transformers runs short sequences: full attention (BERT's post-LN layers, positions from 0)
    Variant("big-bird-full-attention", "bert", "BigBirdConfig",
            dict(_COMMON, max_position_embeddings=32, attention_type="original_full", block_size=2, num_random_blocks=1)),
    # Longformer: RoBERTa's layers and positions (from pad_token_id + 1 = 2), each layer attending two tokens each
    # side; transformers pads the SEQ tokens to 12, a multiple of the window (hooks cut them back)
    Variant("longformer-windows-both-sides", "bert", "LongformerConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                 attention_window=4)),
    # LayoutLMv3 on words alone, no image: RoBERTa's layers and positions, the box rows concatenated (4 x 5 + 2 x 6 =
    # 32 wide), a bias by offset bucket (8 buckets, both ways, up to 8) and the spatial one (one value per head)
    Variant("layoutlmv3-words-alone", "bert", "LayoutLMv3Config",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                 max_2d_position_embeddings=64, coordinate_size=5, shape_size=6, rel_pos_bins=8, max_rel_pos=8,
                 rel_2d_pos_bins=8, max_rel_2d_pos=16, input_size=32, patch_size=16)),
    # GIT's text decoder on text alone: BERT's post-LN layers attending causally, a biased head (its image encoder
    # built, not run)
    Variant("git-text-decoder", "git", "GitConfig",
            dict(_COMMON, max_position_embeddings=32, layer_norm_eps=1e-12, bos_token_id=2, eos_token_id=3,
                 vision_config=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                                    image_size=32, patch_size=16))),
    # VisualBERT on words alone: BERT's layers (its visual projection and tables built, not run)
    Variant("visual-bert-words-alone", "bert", "VisualBertConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12, visual_embedding_dim=12,
                 pad_token_id=1)),
    # MarkupLM on words alone: RoBERTa's layers and positions, every token's XPath the pad one (one vector added)
    Variant("markuplm-words-alone", "bert", "MarkupLMConfig",
            dict(_COMMON, max_position_embeddings=34, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=1,
                 max_depth=3, xpath_unit_hidden_size=4, max_xpath_tag_unit_embeddings=9, max_xpath_subs_unit_embeddings=11,
                 tag_pad_id=7, subs_pad_id=10)),
    # SqueezeBERT: BERT's post-LN layers as grouped 1x1 convolutions (queries in 4 blocks, keys 2, values and the
    # output projection 1) over channels-first activations
    Variant("squeezebert-grouped-convolutions", "squeezebert", "SqueezeBertConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12, embedding_size=D,
                 q_groups=4, k_groups=2, v_groups=1, post_attention_groups=1, intermediate_groups=4, output_groups=2)),
    # TAPAS on words alone: BERT's layers, seven token-type tables (row 0 of each added), positions from 0 in one cell
    Variant("tapas-words-alone", "bert", "TapasConfig",
            dict(_COMMON, max_position_embeddings=32, layer_norm_eps=1e-12, type_vocab_sizes=[3, 5, 5, 2, 5, 5, 4])),
    # BROS on words alone: BERT's layers, every box (0, 0, 0, 0) (transformers requires boxes: model_inputs), whose
    # bias on the logits is one value per query (its sinusoids need hidden_size / 4 a multiple of 2 x 8 coordinates)
    Variant("bros-words-alone", "bert", "BrosConfig",
            dict(_COMMON, hidden_size=64, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12)),
    # LayoutLM on words alone: BERT's layers, every token's box (0, 0, 0, 0) adding one vector of the 2-D tables
    Variant("layoutlm-words-alone", "bert", "LayoutLMConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12,
                 max_2d_position_embeddings=64)),
    # ERNIE 3.0: BERT's layout, a task type (row 0 by default) added beside the token type
    Variant("ernie-task-types", "bert", "ErnieConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, use_task_id=True, task_type_vocab_size=3)),
    Variant("splinter-bert-layers", "bert", "SplinterConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12, question_token_id=3)),
    Variant("bert-generation-encoder", "bert", "BertGenerationConfig",
            dict(_COMMON, max_position_embeddings=32, layer_norm_eps=1e-12)),
    Variant("electra", "bert", "ElectraConfig",
            dict(_COMMON, embedding_size=D, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12)),
    # RoFormer: BERT's layers, rotary on adjacent pairs at base 10000, no position table
    Variant("roformer-rotary-post-ln", "bert", "RoFormerConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12)),
    # DeBERTa-v3's disentangled attention: log buckets (4 each side up to 8: offsets 2, 3..7, 8.. in buckets 2, 3, 4,
    # the last clamped to row 7), relative-position embeddings LayerNorm-ed, the layer's own q/k projections
    Variant("deberta-v3-log-buckets", "bert", "DebertaV2Config",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=0, relative_attention=True, position_buckets=4,
                 max_relative_positions=8, norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"],
                 position_biased_input=False, layer_norm_eps=1e-7)),
    # DeBERTa-v2's other settings: offsets -6 .. 5 exact and clamped beyond, position projections of their own, token types
    Variant("deberta-v2-own-position-projections", "bert", "DebertaV2Config",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=2, relative_attention=True, position_buckets=-1,
                 max_relative_positions=6, share_att_key=False, pos_att_type=["c2p", "p2c"], position_biased_input=False,
                 layer_norm_eps=1e-7)),
    # DeBERTa (v1): a fused in_proj (per head [q | k | v]) with query and value biases, position keys from pos_proj (no
    # bias), offsets -5 .. 4 exact and clamped beyond (the model's own span: min(seq, 5) each side)
    Variant("deberta-v1-fused", "bert", "DebertaConfig",
            dict(_COMMON, max_position_embeddings=32, type_vocab_size=0, relative_attention=True,
                 max_relative_positions=5, pos_att_type=["c2p", "p2c"], position_biased_input=False)),
    # MPNet: BERT's post-LN layers as attention.attn, positions from 2, a learned bias by offset bucket (32 buckets up
    # to 128: offsets 0 .. 7 exact, each way) shared by the layers
    Variant("mpnet-relative-bias", "bert", "MPNetConfig", dict(_COMMON, max_position_embeddings=34, pad_token_id=1)),
    # T5's encoder: pre-RMSNorm, unscaled logits, heads of d_kv 12 (48 wide in all, d_model 32), a bias by offset bucket
    # (8 buckets up to 20: offsets 0, 1 exact each way, 2 … 20 log-spaced) from the first layer's table; UMT5: each
    # layer's own table
    Variant("t5-encoder-wide-heads", "t5", "T5Config",
            dict(vocab_size=VOCAB, d_model=D, d_kv=12, num_heads=HEADS, d_ff=48, num_layers=2, num_decoder_layers=1,
                 relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="gated-gelu")),
    Variant("umt5-encoder-own-tables", "t5", "UMT5Config",
            dict(vocab_size=VOCAB, d_model=D, d_kv=D_HEAD, num_heads=HEADS, d_ff=48, num_layers=2, num_decoder_layers=1,
                 relative_attention_num_buckets=32, relative_attention_max_distance=128)),
    # LongT5's encoder with local attention: T5's, each token attending 2 tokens either side (transformers' blocks of 3,
    # the 10 tokens padded to 12)
    Variant("longt5-local-encoder", "t5", "LongT5Config",
            dict(vocab_size=VOCAB, d_model=D, d_kv=D_HEAD, num_heads=HEADS, d_ff=48, num_layers=2, num_decoder_layers=1,
                 relative_attention_num_buckets=8, relative_attention_max_distance=20, local_radius=2)),
    # Switch Transformers: T5's encoder with experts in every second MLP (not read)
    Variant("switch-transformers-encoder", "t5", "SwitchTransformersConfig",
            dict(vocab_size=VOCAB, d_model=D, d_kv=D_HEAD, num_heads=HEADS, d_ff=48, num_layers=2, num_decoder_layers=1,
                 num_sparse_encoder_layers=1, num_sparse_decoder_layers=0, num_experts=2)),
    # the encoders of BART's kin (each built whole; the decoder, one layer, not read): BART, post-LN after a LayerNorm on
    # the embeddings, positions from row 2, embeddings times sqrt(d_model); BlenderBot-small's from row 0; Marian's
    # post-LN layers without a norm on the embeddings and its sinusoids (stored, here perturbed as every parameter);
    # Pegasus's pre-LN layers with them; M2M100's pre-LN layers and tensor2tensor sinusoids from row pad + 1 = 2;
    # BlenderBot's pre-LN layers and learned positions from row 0
    Variant("bart-encoder-post-ln", "bart", "BartConfig", dict(_BART, scale_embedding=True)),
    Variant("blenderbot-small-encoder-post-ln", "bart", "BlenderbotSmallConfig", dict(_BART)),
    Variant("marian-encoder-unnormed-embeddings", "bart", "MarianConfig", dict(_BART, scale_embedding=True)),
    Variant("pegasus-encoder-pre-ln", "bart", "PegasusConfig", dict(_BART, scale_embedding=True)),
    Variant("m2m100-encoder-pre-ln", "bart", "M2M100Config", dict(_BART, pad_token_id=1, scale_embedding=True)),
    Variant("blenderbot-encoder-pre-ln", "bart", "BlenderbotConfig", dict(_BART)),
    # FSMT's encoder (fairseq's WMT19): post-LN as Marian's, M2M100's sinusoids from row pad_token_id + 1, the residual
    # sequence-first inside the encoder
    Variant("fsmt-encoder-sequence-first", "bart", "FSMTConfig",
            dict(langs=["en", "de"], src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=D,
                 encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_layers=2, decoder_layers=1, encoder_ffn_dim=48,
                 decoder_ffn_dim=48, max_position_embeddings=32, pad_token_id=1, scale_embedding=True)),
    # BigBird-Pegasus's encoder as transformers runs short sequences: full attention, Pegasus's pre-LN layers, q/k/v
    # biases (use_bias), learned positions from row 0, the last norm named layernorm_embedding
    Variant("bigbird-pegasus-encoder-full-attention", "bart", "BigBirdPegasusConfig",
            dict(_BART, attention_type="original_full", block_size=2, num_random_blocks=1, use_bias=True)),
    # ProphetNet's encoder: BART's post-LN layers under its own names, positions from row pad + 1 = 1
    Variant("prophetnet-encoder-post-ln", "bart", "ProphetNetConfig",
            dict(vocab_size=VOCAB, hidden_size=D, num_encoder_attention_heads=HEADS, num_decoder_attention_heads=HEADS,
                 num_encoder_layers=2, num_decoder_layers=1, encoder_ffn_dim=48, decoder_ffn_dim=48,
                 max_position_embeddings=32, pad_token_id=0, decoder_start_token_id=0, ngram=2)),
    # LED's encoder: BART's post-LN layers, each attending two tokens each side (Longformer's window of 4); transformers
    # pads the SEQ tokens to 12 (hooks cut them back)
    Variant("led-encoder-windows-both-sides", "bart", "LEDConfig",
            dict({k: v for k, v in _BART.items() if k != "max_position_embeddings"}, max_encoder_position_embeddings=32,
                 max_decoder_position_embeddings=32, attention_window=4)),
    Variant("distilbert", "bert", "DistilBertConfig",
            dict(vocab_size=VOCAB, dim=D, n_heads=HEADS, n_layers=2, hidden_dim=48, max_position_embeddings=32)),
    # XLM and FlauBERT: post-LN layers under their own names, a linear LM head (with a bias) on the last layer's output;
    # XLM's CLM models causal, with language embeddings (not added without languages passed)
    Variant("xlm-post-ln", "xlm", "XLMConfig", dict(_XLM)),
    Variant("xlm-clm-causal-languages", "xlm", "XLMConfig",
            dict(_XLM, causal=True, n_langs=3, sinusoidal_embeddings=True)),
    Variant("flaubert-post-ln", "xlm", "FlaubertConfig", dict(_XLM, layer_norm_eps=1e-6)),
]
BY_ID = {v.id: v for v in VARIANTS}
PRE_LN_LAYERNORM = ["gpt2", "gpt-bigcode-mqa", "gpt-bigcode-per-head-unscaled", "gpt-neo-local3", "neox-partial-rotary-parallel", "neox-sequential-no-bias",
                    "gpt-neox-japanese-last-bias",
                    "olmo-parameter-free-layernorm", "phi-partial-rotary-qk-layernorm", "phi-mha", "gptj-interleaved-rotary",
                    "opt", "stablelm-partial-rotary-parallel", "stablelm-sequential-no-bias", "stablelm-qk-layernorm-per-head",
                    "starcoder2-bias-sliding3", "cohere-qk-layernorm-interleaved", "cohere2-sliding-rotary-global-nope",
                    "cohere-compass-sliding-rotary-global-nope",
                    "falcon-mqa-parallel", "falcon-grouped-gqa-bias", "falcon-per-head-sequential", "bloom-alibi",
                    "mpt-alibi-scaled", "codegen-eight-heads-four-shards", "nemotron-layernorm1p-partial-bias",
                    "phimoe-layernorm-biases-longrope", "cohere2-moe-layernorm", "xlm-roberta-xl-pre-ln",
                    "modernbert-local-both-sides", "modernbert-biases", "modernbert-decoder-causal-window",
                    "megatron-bert-pre-ln", "biogpt-scaled-embeddings", "jais2-layernorm-biases",
                    "persimmon-qk-layernorm-half-rotary", "xglm-sinusoidal-positions",
                    "kosmos2.5-text-segment-sinusoids", "ctrl-sinusoidal-scaled",
                    "esm2-rotary-token-dropout", "esmc-layer-qk-layernorm", "clip-text-causal",
                    "tipsv2-text-scaled-sinusoids", "pegasus-encoder-pre-ln", "m2m100-encoder-pre-ln", "blenderbot-encoder-pre-ln",
                    "bigbird-pegasus-encoder-full-attention",
                    "pocket-tts-layernorm-biases", "gradium-phonon-tts-layernorm"]
#: pre-LayerNorm variants whose first layer reads the residual without a norm (centring the embeddings would change it)
FIRST_LAYER_UNNORMED = [v.id for v in VARIANTS if v.kind in ("modernbert", "modernbert_decoder")]
CENTRABLE = [v for v in PRE_LN_LAYERNORM if v not in FIRST_LAYER_UNNORMED]
RMSNORM = [v.id for v in VARIANTS if v.kind in ("llama", "granite", "hybrid", "gemma3", "gemma4", "gemma4_encoder", "glm4", "glm_image", "llama_base", "higgs", "apertus", "muse_glimmer",
                                                 "t5gemma", "t5gemma2", "aimv2", "dia",
                                                 "falcon_h1",
                                                 "gemma3_bidirectional", "hyperclovax", "afmoe", "eurobert",
                                                 "recurrent_gemma", "lfm3")
           and v.id not in PRE_LN_LAYERNORM and v.id != "olmo-hybrid-deltanet-attention"]  # (no norm before its attention)


#: variants transformers 4 cannot build (its own bugs, fixed in 5)
_BROKEN_IN_4 = {"stablelm-qk-layernorm-per-head": "StableLM's weight init fails on the bias-free per-head qk LayerNorm",
                # (test_evolla: compscope reads its folders there; running them fails in transformers' own attention)
                "evolla-aligner-layer-text-only": "Evolla's eager attention does not repeat grouped K/V heads",
                # (compscope reads transformers 5's model: test_modernbert_decoder_under_transformers_4_is_refused)
                "modernbert-decoder-causal-window": "ModernBERT's decoder turns its local layers at the global "
                                                    "rotary base, not local_rope_theta",
                # (compscope reads the window: test_recurrent_gemma_under_transformers_4_runs_within_the_window)
                "recurrent-gemma-local-mqa": "RecurrentGemma attends without its window within one forward pass",
                # (compscope reads transformers 5's window: test_bidirectional_rotary's T5Gemma folder test)
                "t5gemma-encoder-both-sides": "T5Gemma's sliding layers are masked one token narrower "
                                              "(|i − j| < sliding_window)",
                # (a whole Dia, as released, runs there: test_speech_backbones' Dia folder test)
                "dia-encoder-unscaled-gqa": "transformers 4.57 maps no dia_encoder model type: Dia's encoder alone "
                                            "loads as a whole model's config, its settings lost",
                # (the encoder, all compscope runs, runs: test_bart's FSMT folder tests)
                "fsmt-encoder-sequence-first": "FSMT's whole model fails in its decoder's cache (FSMTDecoder has no "
                                               "config)"}


#: variants that transformers 5 releases in ``[from, until)`` run otherwise than the model's makers (and compscope,
#: which follows the later versions) or not at all, skipped there; compscope's run refuses such a model by name.
#: Versions found by running each variant's tests on transformers 5.0-5.16 and reading 5.17-5.24's code
#: (transformers 4: _BROKEN_IN_4)
_RUNS_OTHERWISE = {
    "minimax-m2-layer-qk-norm-rotary-dim": [((5, 0), (5, 18), "MiniMax-M2's rotary_dim is ignored (whole heads "
                                                               "turned)")],
    "gpt-neox-japanese-last-bias": [((5, 0), (5, 18), "GPT-NeoX-Japanese fails on a partial rotary share "
                                                      "(rotary_pct < 1)")],
    "cohere-compass-sliding-rotary-global-nope": [((5, 0), (5, 21), "Cohere Compass lays out its M-RoPE sections "
                                                                     "otherwise")],
    "evolla-aligner-layer-text-only": [((5, 0), (5, 13), "Evolla's eager attention does not repeat grouped K/V heads")],
    "olmo3-sliding-mqa": [((5, 0), (5, 13), "OLMo 3 turns every layer at one rope_theta (none per layer type)")],
    "bamba-half-rotary": [((5, 0), (5, 15), "Bamba turns whole heads (its partial rotary share unread)")],
    "recurrent-gemma-local-mqa": [((5, 15), (5, 17), "RecurrentGemma turns whole heads (its partial rotary share "
                                                     "unread)")],
    "switch-transformers-encoder": [((5, 0), (5, 15), "Switch Transformers' encoder attends otherwise than 5.15's")],
    "mistral4-latent-attention-temperature": [((5, 0), (5, 15), "Mistral 4's latent attention differs from 5.15's")],
    "glm5-dsa-indexer-within-topk": [((5, 0), (5, 11), "GLM-5's indexed attention differs from 5.11's")],
    "nemotron-h-mamba-attention-mlp": [((5, 0), (5, 6), "Nemotron-H's config takes no MLP blocks"),
                                       ((5, 14), (5, 15), "Nemotron-H's cache fails on MLP blocks")],
    "olmo-hybrid-deltanet-attention": [((5, 14), (5, 15), "OLMo-hybrid's cache fails in the causal mask")],
}


def runs_otherwise(variant_id: str) -> str | None:
    """Why the installed transformers runs the variant otherwise (:data:`_RUNS_OTHERWISE`), or ``None``."""
    for start, until, why in _RUNS_OTHERWISE.get(variant_id, ()):
        if transformers_at_least(*start) and not transformers_at_least(*until):
            return why
    return None


def attention_config(model, kind: str):
    """The config object holding the settings of the attention compscope reads: ``model.config``, or its part
    (T5Gemma's encoder's, T5Gemma 2's encoder's text model's)."""
    cfg = model.config.encoder if kind == "t5gemma" else model.config
    return cfg.text_config if kind == "t5gemma2" else cfg


def make_config(variant: Variant, **overrides):
    if not hasattr(transformers, variant.config_cls):
        pytest.skip(f"transformers {transformers.__version__} has no {variant.config_cls}")
    cls = getattr(transformers, variant.config_cls)
    if variant.id in _BROKEN_IN_4 and not transformers_at_least(5):
        pytest.skip(f"transformers {transformers.__version__}: {_BROKEN_IN_4[variant.id]}")
    if (why := runs_otherwise(variant.id)) is not None:
        pytest.skip(f"transformers {transformers.__version__}: {why}")
    cfg = cls(**_in_installed_style(cls, {**variant.config, **overrides}))
    cfg._attn_implementation = "eager"
    return cfg


def hf_config(name: str, **config):
    """``transformers.<name>(**config)``, its ``rope_parameters`` spelled as the installed version takes them."""
    cls = getattr(transformers, name)
    return cls(**_in_installed_style(cls, config))


def _in_installed_style(cls, config: dict) -> dict:
    """``config`` with its ``rope_parameters`` (transformers 5) spelled as transformers 4 takes them
    where the installed one does not know them: ``rope_theta`` (GPT-NeoX: ``rotary_emb_base``), the
    partial rotary factor (GPT-NeoX: ``rotary_pct``), the rest as ``rope_scaling``; per layer type,
    Gemma 3's ``rope_local_base_freq`` for the sliding layers, the full layers' theta for all elsewhere."""
    import inspect

    takes = inspect.signature(cls.__init__).parameters
    if "rope_parameters" not in config or "rope_parameters" in takes:
        return config
    config = dict(config)
    params = config.pop("rope_parameters")
    if "full_attention" in params:  # one dict per layer type
        if "rope_local_base_freq" in takes:
            config["rope_local_base_freq"] = params["sliding_attention"]["rope_theta"]
        params = params["full_attention"]
    neox = "rotary_emb_base" in takes
    config["rotary_emb_base" if neox else "rope_theta"] = params["rope_theta"]
    if "partial_rotary_factor" in params:
        config["rotary_pct" if neox else "partial_rotary_factor"] = params["partial_rotary_factor"]
    if params.get("rope_type", "default") != "default" or "mrope_section" in params:  # (as 'type': transformers 4's
        # Phi-3 takes that key alone, its Gemma 3 'rope_type' alone; multimodal sections ride in rope_scaling)
        kind = "rope_type" if "rope_local_base_freq" in takes else "type"
        config["rope_scaling"] = {(kind if k == "rope_type" else k): v for k, v in params.items()
                                  if k not in ("rope_theta", "partial_rotary_factor")}
    return config


def perturbed(build_model, seed: int = 0, scale: float = 0.1):
    """``build_model()`` (a model built under torch's seed ``seed``) in eval mode, every parameter
    plus N(0, scale²) noise from that seed: norm gains not ones, biases not zeros."""
    torch.manual_seed(seed)
    model = build_model().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)
    return model


def build(variant: Variant, seed: int = 0, **overrides):
    """The model for ``variant`` with every parameter perturbed (norm gains ≠ 1, biases ≠ 0)."""
    cfg = make_config(variant, **overrides)
    torch.manual_seed(seed)
    model = auto_class(variant).from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25 * torch.randn_like(p))
        if variant.config_cls == "NemotronConfig":  # LayerNorm1P's gain is 1 + w and transformers starts w at
            for name, p in model.named_parameters():  # one (gain 2): centre w at 0, as trained checkpoints hold it,
                if name.endswith("norm.weight"):  # so that outputs keep the other variants' scale
                    p.sub_(1.0)
        for m in model.modules():  # RoFormer's table of sines is a (frozen) parameter: the sinusoid, as the model
            if type(m).__name__ == "RoFormerSinusoidalPositionalEmbedding":  # builds and saves it: sin and cos of
                n_pos, dim = m.weight.shape  # position × 10000^(-2i/dim), side by side
                angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * 1e4 ** (
                    -torch.arange(0, dim, 2, dtype=torch.float64) / dim)
                m.weight.copy_(torch.cat([angles.sin(), angles.cos()], 1))
        for name, b in model.named_buffers():  # Gemma 4's residual scale after each layer, 1 at initialisation
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand_like(b))
    return model


#: kind -> (where its layers sit, as attribute paths from the model; the module reading the residual, the
#: module adding to it, and the final norm, by their names in a layer and in the layers' parent)
_LAYOUT = {
    "gpt2": ("transformer", "h", "ln_1", "attn", "ln_f"),
    "gptj": ("transformer", "h", "ln_1", "attn", "ln_f"),
    "neox": ("gpt_neox", "layers", "input_layernorm", "attention", "final_layer_norm"),
    "neox_japanese": ("gpt_neox_japanese", "layers", "input_layernorm", "attention", "final_layer_norm"),
    "llama": ("model", "layers", "input_layernorm", "self_attn", "norm"),
    "granite": ("model", "layers", "input_layernorm", "self_attn", "norm"),
    "hyperclovax": ("model", "layers", "input_layernorm", "post_norm1", "norm"),
    "gemma3": ("model", "layers", "input_layernorm", "post_attention_layernorm", "norm"),
    "gemma4": ("model", "layers", "input_layernorm", "post_attention_layernorm", "norm"),
    "t5gemma": ("encoder", "layers", "pre_self_attn_layernorm", "post_self_attn_layernorm", "norm"),
    "t5gemma2": ("text_model", "layers", "pre_self_attn_layernorm", "post_self_attn_layernorm", "norm"),
    "apertus": ("model", "layers", "attention_layernorm", "self_attn", "norm"),
    "glm4": ("model", "layers", "input_layernorm", "post_self_attn_layernorm", "norm"),
    "falcon_h1": ("model", "layers", "input_layernorm", "self_attn", "final_layernorm"),
    "phi": ("model", "layers", "input_layernorm", "self_attn", "final_layernorm"),
    "olmo2": ("model", "layers", "self_attn", "post_attention_layernorm", "norm"),
    "mpt": ("transformer", "blocks", "norm_1", "attn", "norm_f"),
    "biogpt": ("biogpt", "layers", "self_attn_layer_norm", "self_attn", "layer_norm"),
    "persimmon": ("model", "layers", "input_layernorm", "self_attn", "final_layernorm"),
    "xglm": ("model", "layers", "self_attn_layer_norm", "self_attn", "layer_norm"),
    "afmoe": ("model", "layers", "input_layernorm", "post_attention_layernorm", "norm"),
    "chameleon_swin": ("model", "layers", "self_attn", "input_layernorm", "norm"),
    "ctrl": ("transformer", "h", "layernorm1", "multi_head_attention", "layernorm"),
}


def _modules(model, kind: str):
    """(module whose input is the residual a layer's attention reads, module whose output is
    what attention adds to the residual) per layer, and the final norm (or None)."""
    if kind in _LAYOUT:
        parent, layers, reads, adds, final = _LAYOUT[kind]
        t = functools.reduce(getattr, parent.split("."), model)
        return [(getattr(b, reads), getattr(b, adds)) for b in getattr(t, layers)], getattr(t, final)
    if kind == "dia":  # Dia's encoder built alone: its layers its own
        return [(b.pre_sa_norm, b.self_attention) for b in model.layers], model.norm
    if kind == "longcat":  # two attention sublayers per layer, each after its own input norm
        t = model.model
        return [(b.input_layernorm[j], b.self_attn[j]) for b in t.layers for j in (0, 1)], t.norm
    if kind == "lfm3":  # the attention layers alone; a norm on each one's output (what is added)
        t = model.model
        return [(b.operator_norm, b.post_operator_norm) for b in t.layers if b.is_attention_layer], t.embedding_norm
    if kind == "recurrent_gemma":  # the attention blocks alone (the recurrent ones have no q_proj)
        t = model.model
        return [(b.temporal_pre_norm, b.temporal_block) for b in t.layers if hasattr(b.temporal_block, "q_proj")], \
            t.final_norm
    if kind == "hybrid":  # the attention layers alone (Mamba and convolution layers have no self_attn; Nemotron-H's
        t = model.model  # blocks are typed); the norms before the attention and the final norms by each one's names
        attending = []
        for b in t.layers:
            typed = getattr(b, "block_type", None) in ("full_attention", "attention")  # (5.3-5.12: attention)
            attn = getattr(b, "self_attn", None) or (b.mixer if typed else None)
            if attn is None or getattr(b, "block_type", None) == "linear_attention":  # (Ling 3's: self_attn of its own)
                continue
            norm = next((getattr(b, n) for n in ("operator_norm", "input_layernorm", "norm") if hasattr(b, n)), None)
            # without a norm before it (OLMo-hybrid's), the attention reads the residual and a norm on its output adds
            attending.append((norm, attn) if norm is not None else (attn, b.post_attention_layernorm))
        final = next(getattr(t, n) for n in ("norm", "final_layernorm", "embedding_norm", "norm_f") if hasattr(t, n))
        return attending, final
    if kind == "falcon":
        t = model.transformer
        norm = "ln_attn" if model.config.new_decoder_architecture else "input_layernorm"
        return [(getattr(b, norm), b.self_attention) for b in t.h], t.ln_f
    if kind == "bloom":  # its attention returns the residual plus what it adds; dense's output is the addition
        t = model.transformer
        return [(b.input_layernorm, b.self_attention.dense) for b in t.h], t.ln_f
    if kind == "megatron_bert":  # XLM-RoBERTa-XL's layout under Megatron's names
        return [(b.attention.ln, b.attention.output.dense) for b in model.encoder.layer], model.encoder.ln
    if kind == "esm":  # pre-LN: attention.LayerNorm reads the residual; a LayerNorm after the last layer
        return [(b.attention.LayerNorm, b.attention.output.dense) for b in model.encoder.layer], \
            model.encoder.emb_layer_norm_after
    if kind == "xlmr_xl":  # pre-LN: the norm before the attention reads the residual
        layers = model.encoder.layer
        return [(b.attention.self_attn_layer_norm, b.attention.output.dense) for b in layers], model.encoder.LayerNorm
    if kind == "opt":  # pre-LN: the norm before the attention reads the residual; post-LN (OPT-350m) the attention
        t = model.model.decoder  # does; the logits read the final norm's input, else project_out's, else the head's
        post = not model.config.do_layer_norm_before
        final = next(m for m in (t.final_layer_norm, t.project_out, model.lm_head) if m is not None)
        return [(b.self_attn if post else b.self_attn_layer_norm, b.self_attn) for b in t.layers], final
    if kind == "gpt1":  # post-LN: the attention reads the residual; the unembedding the last block's output
        return [(b.attn, b.attn.c_proj) for b in model.transformer.h], model.lm_head
    if kind == "gemma3_bidirectional":  # built as the base model (an encoder): its layers at the top
        return [(b.input_layernorm, b.post_attention_layernorm) for b in model.layers], model.norm
    if kind == "glm_image":  # built as the base model (no causal LM of its own): GLM-4's layers at the top
        return [(b.input_layernorm, b.post_self_attn_layernorm) for b in model.layers], model.norm
    if kind == "muse_glimmer":  # built as the base model (no causal LM of its own): its layers at the top
        return [(b.input_layernorm, b.post_attention_layernorm) for b in model.layers], model.norm
    if kind == "gemma4_encoder":  # EmbeddingGemma 2, built as the base model (an encoder): its layers at the top
        return [(b.input_layernorm, b.post_attention_layernorm) for b in model.layers], model.norm
    if kind == "aimv2":  # AIMv2's text encoder: CLIP's layout under its own names
        return [(b.rms_norm1, b.attention) for b in model.encoder.layers], model.rms_norm
    if kind == "clip":  # CLIP's text encoder (transformers 4 nests it as text_model)
        base = getattr(model, "text_model", model)
        return [(b.layer_norm1, b.self_attn) for b in base.encoder.layers], base.final_layer_norm
    if kind == "higgs":  # built whole (transformers' auto class for its type): each layer's norms take the text and
        # audio positions apart (each set flattened), so the residual is the layer's own input
        return [(b, b.self_attn) for b in model.model.layers], model.model.norm
    if kind in ("eurobert", "esmc", "llama_base"):  # built as the base model (an encoder; a vision-language model's
        # language model with no causal LM of its own): Llama's layers at the top
        return [(b.input_layernorm, b.self_attn) for b in model.layers], model.norm
    if kind in ("modernbert", "modernbert_decoder"):  # pre-LN, layer 0's attn_norm the identity: its input is the
        base = getattr(model, "model", model)  # residual either way (the decoder built as a causal LM)
        return [(b.attn_norm, b.attn.Wo) for b in base.layers], base.final_norm
    if kind == "rotary_bert":  # post-LN: the attention reads the residual; no norm after the last layer but its own
        return [(b.self_attn, b.self_attn.o_proj) for b in model.layers], None
    if kind == "xlm":  # post-LN: the attention reads the residual; the LM head's projection the last layer's output
        return [(a, a.out_lin) for a in model.transformer.attentions], model.pred_layer.proj
    if kind == "squeezebert":  # post-LN, channels-first: attention reads the residual, post_attention.conv1d adds
        return [(b.attention, b.post_attention.conv1d) for b in model.encoder.layers], None
    if kind == "git":  # BERT's post-LN layers under git., the head reading the last layer's output
        return [(b.attention.self, b.attention.output.dense) for b in model.git.encoder.layer], model.output
    if kind == "altclip":  # BERT's post-LN layers under roberta. (at encoder.layers in transformers 5, .layer in 4)
        encoder = model.roberta.encoder
        return [(b.attention.self, b.attention.output.dense) for b in getattr(encoder, "layers", None) or encoder.layer], \
            None
    if kind == "bart":  # BART's kin's encoder: post-LN, attention reads the residual; pre-LN (a norm after the last
        enc = model.get_encoder()  # layer), the norm before it does
        if model.config.model_type == "bigbird_pegasus":  # (pre-LN, its last norm named layernorm_embedding)
            return [(b.self_attn_layer_norm, b.self_attn.output) for b in enc.layers], enc.layernorm_embedding
        if getattr(enc, "layer_norm", None) is None:  # (LED's output projection: self_attn.output)
            return [(b.self_attn, getattr(b.self_attn, "out_proj", None) or b.self_attn.output) for b in enc.layers], None
        return [(b.self_attn_layer_norm, b.self_attn.out_proj) for b in enc.layers], enc.layer_norm
    if kind == "t5":  # T5's encoder (pre-norm): each block's first layer's norm reads the residual
        attention = next(n for n in ("SelfAttention", "LocalSelfAttention") if hasattr(model.encoder.block[0].layer[0], n))
        return [(b.layer[0].layer_norm, getattr(b.layer[0], attention).o) for b in model.encoder.block], \
            model.encoder.final_layer_norm
    if kind == "bert":
        if hasattr(model, "transformer"):  # DistilBERT's names; its block's input is what attention reads
            return [(b, b.attention.out_lin) for b in model.transformer.layer], None
        if hasattr(model.encoder.layer[0].attention, "attn"):  # MPNet's names
            return [(b.attention.attn, b.attention.attn.o) for b in model.encoder.layer], None
        return [(b.attention.self, b.attention.output.dense) for b in model.encoder.layer], None
    raise ValueError(kind)


#: the model types of BART's kin, built whole
_BART_KIN = ("bart", "blenderbot-small", "marian", "pegasus", "m2m_100", "blenderbot", "plbart", "mvp", "nllb-moe", "led",
             "bigbird_pegasus", "prophetnet", "fsmt")
#: the model types whose encoder keeps its residual sequence-first, (seq, batch, d_model): hooked tensors are turned
SEQUENCE_FIRST = ("fsmt",)

#: LayoutLM's 2-D position tables, each read at row 0 for a box (0, 0, 0, 0): x and y twice (both corners), h and w once
BOX_TABLES = ("x_position_embeddings", "y_position_embeddings", "h_position_embeddings", "w_position_embeddings")
#: TAPAS's seven token-type tables, each read at row 0 on words alone
TAPAS_TYPES = tuple(f"token_type_embeddings_{i}" for i in range(7))


@dataclass
class Capture:
    ids: torch.Tensor  # (batch, seq)
    resid: list[torch.Tensor]  # per layer: what enters the attention norm (pre-LN) / attention (post-LN)
    attn_out: list[torch.Tensor]  # per layer: what attention adds to the residual
    final_in: torch.Tensor | None  # input of the final norm
    logits: torch.Tensor | None
    extra: dict = field(default_factory=dict)


def _added(output) -> torch.Tensor:
    """What a module adding to the residual adds: its output, a tuple's first element (plus, where GPT-NeoX-Japanese's
    attention returns it third, the output bias its layer adds)."""
    if not isinstance(output, tuple):
        return output
    bias = output[2] if len(output) == 3 else None  # (GLM-5's third element is its indexer's choice of keys)
    return output[0] + bias if isinstance(bias, torch.Tensor) and bias.is_floating_point() else output[0]


def _first(args, kwargs):
    return args[0] if args else kwargs["hidden_states" if "hidden_states" in kwargs else "query"]  # (FSMT's: query)


def model_inputs(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """What ``model`` is given for the token ids ``ids``: ``input_ids``; where transformers requires boxes (BROS),
    every token's box (0, 0, 0, 0); where it masks causally only when given a mask (AIMv2's text encoder), a mask of
    ones, as its processor gives."""
    extra = {"bros": {"bbox": torch.zeros(*ids.shape, 4)}, "aimv2_text_model": {"attention_mask": torch.ones_like(ids)}}
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder") and \
            model.config.model_type in _BART_KIN:  # (a whole model: its decoder given the same tokens)
        extra[model.config.model_type] = {"decoder_input_ids": ids}
    return {"input_ids": ids, **extra.get(model.config.model_type, {})}


def attentions(output) -> tuple:
    """The attention patterns (``output_attentions``) of the stack compscope reads: an encoder-decoder's encoder's
    (BART's kin, built whole), else the model's."""
    return getattr(output, "encoder_attentions", None) or output.attentions


def capture(model, kind: str, ids: torch.Tensor) -> Capture:
    pairs, final = _modules(model, kind)
    resid: dict[int, torch.Tensor] = {}
    out: dict[int, torch.Tensor] = {}
    store: dict[str, torch.Tensor] = {}
    handles = []
    scale = getattr(model.config, "residual_multiplier", None)  # Granite's: residual + m · attention(...)
    scale = getattr(model.config, "attention_out_multiplier", 1.0) if scale is None else scale  # Falcon-H1's
    if kind == "esmc":  # ESM C divides each branch by sqrt(L / 36)
        scale = (36 / model.config.num_hidden_layers) ** 0.5
    body = getattr(model, "model", model)
    if hasattr(getattr(body, "layers", [None])[0], "residual_scale"):  # MiniCPM3's: residual + s · branch, s its own
        scale = float(body.layers[0].residual_scale)
    # Gemma 4 multiplies the residual by each layer's scalar: compscope reads it divided by their product so far
    scalars = ([float(b.layer_scalar) for b in getattr(model, "model", model).layers] if kind.startswith("gemma4")
               else [1.0] * len(pairs))
    div = [math.prod(scalars[:i]) for i in range(len(pairs))]
    n = ids.shape[1]  # (Longformer pads the sequence to a multiple of its window: its hooked tensors are cut back)
    turn = (lambda x: x.transpose(1, 2)) if kind in CHANNELS_FIRST else (lambda x: x)  # noqa: E731
    if getattr(model.config, "model_type", None) in SEQUENCE_FIRST:
        turn = lambda x: x.transpose(0, 1)  # noqa: E731
    for i, (rm, om) in enumerate(pairs):
        handles.append(rm.register_forward_pre_hook(
            lambda m, a, k, i=i: resid.__setitem__(i, turn(_first(a, k))[:, :n].detach().clone() / div[i]),
            with_kwargs=True))
        handles.append(om.register_forward_hook(lambda m, a, o, i=i: out.__setitem__(
            i, scale / div[i] * turn(_added(o))[:, :n].detach().clone())))
    if final is not None:
        handles.append(final.register_forward_pre_hook(
            lambda m, a, k: store.__setitem__("final_in", _first(a, k).detach().clone()), with_kwargs=True))
    if kind in HYBRIDS:  # its first layer may be a Mamba layer: what enters it is the embedding
        handles.append(model.model.layers[0].register_forward_pre_hook(
            lambda m, a, k: store.__setitem__("layer0_in", _first(a, k).detach().clone()), with_kwargs=True))
    if kind in (*ENCODERS, "git"):
        emb = getattr(getattr(model, "roberta", getattr(model, "git", model)), "embeddings", None)  # (EmbeddingGemma's are Gemma 3's: none of
        # these; AltCLIP's text tower keeps them under roberta.)
        for name in [n for n in ("word_embeddings", "position_embeddings", "token_type_embeddings", "task_type_embeddings",
                                 "xpath_embeddings", *BOX_TABLES, *TAPAS_TYPES) if getattr(emb, n, None) is not None]:  # (GTE's token types: None without any)
            handles.append(getattr(emb, name).register_forward_hook(  # (I-BERT's: a scaling factor beside)
                lambda m, a, o, name=name: store.__setitem__(name, _added(o)[:, :n].detach().clone())))
    try:
        with torch.no_grad():
            res = model(**model_inputs(model, ids))
    finally:
        for h in handles:
            h.remove()
    logits = getattr(res, "logits", None)
    return Capture(ids, [resid[i] for i in range(len(pairs))], [out[i] for i in range(len(pairs))],
                   store.pop("final_in", None), logits, store)


def attention_layers(model, kind: str) -> int:
    """How many of the model's layers attend (a hybrid's Mamba layers do not), from its modules."""
    return len(_modules(model, kind)[0])


def random_ids(seed: int = 1, batch: int = BATCH, seq: int = SEQ) -> torch.Tensor:
    """Token ids from 2 up: no pad token of the variants (RoBERTa's 1 would hold its position back)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, VOCAB, (batch, seq), generator=g)


@functools.lru_cache(maxsize=None)
def model_and_capture(variant_id: str):
    """Cached per variant: the model and one captured forward pass (do not mutate)."""
    v = BY_ID[variant_id]
    model = build(v)
    return model, capture(model, v.kind, random_ids())


def hub_snapshot(cache, repo_id: str, commit: str = "c" * 40) -> Path:
    """An empty snapshot folder of ``repo_id`` at ``commit`` in a hub cache laid out as huggingface_hub
    lays it out (``models--owner--name/snapshots/<commit>``), ``main`` pointing at it."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return repo / "snapshots" / commit


def word_tokenizer(folder, first: int = 1):
    """A ``transformers`` tokenizer of common words (ids from ``first`` on; the rest of the text
    unknown, id 0), saved in ``folder``."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", *(f"w{i}" for i in range(1, first)), "The", "the", "a", "of", "to", "and", "is", "in", "for",
             "text", "return", "def", "self", "if", "an", "be", "or", "that", "this", "with", "as", "it", "not", "are",
             "by", "on", "from", "list", "value"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained(folder)
    return folder
