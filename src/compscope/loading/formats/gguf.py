"""GGUF files (llama.cpp): dequantise to float32, rename to HF names (a fused query-key-value tensor of
Phi-2 split into its three; the fused rows that llama.cpp regrouped for GPT-NeoX and Falcon put back
in the model's own order).

GGUF stores each 2-D tensor as ``(out, in)`` once read into numpy, like ``nn.Linear``. For the
``llama`` architecture, llama.cpp's converter reorders the rows of ``W_Q`` and ``W_K`` within
each head from HF's rotate-half layout ``[x_0..x_{n/2-1} | x_{n/2}..]`` to interleaved pairs
``[x_0, x_{n/2}, x_1, ...]``. That reordering leaves ``W_Q^T W_K`` unchanged but pairs the
wrong dims under rotary, so it is undone here. Gemma GGUFs store every RMSNorm gain as
``1 + w``; ``w`` is recovered so that the Gemma families (which add the 1) read it unchanged.

A file that llama.cpp split into shards (``NAME-00001-of-0000n.gguf``, ...: the metadata in the
first, the tensors spread over all, each shard saying ``split.no`` and ``split.count``) is read
from every shard, whichever is given.

The container itself (header, tensor table, dequantisation) is read by
:mod:`compscope.loading.gguf_file`. A tensor whose bytes run past the end of the file (a
truncated download) is reported by name when the file is opened.
"""

from __future__ import annotations

import math
import mmap
import re
import struct
from pathlib import Path

import torch

from ..checkpoint import Checkpoint, TensorStore, one_line, pairs_to_halves
from ..gguf_file import SkippedStrings, check_magic, dequantize, read_header
from ...errors import LoadError, UnsupportedModelError

#: GGUF metadata key (after ``{arch}.``) -> HF config key
_CONFIG_KEYS = {
    "embedding_length": "hidden_size",
    "block_count": "num_hidden_layers",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.layer_norm_epsilon": "layer_norm_epsilon",
    "attention.sliding_window": "sliding_window",
    "rope.freq_base": "rope_theta",
    "rope.freq_base_swa": "rope_local_base_freq",
    "attn_logit_softcapping": "attn_logit_softcapping",
    "attention.clamp_kqv": "clip_qkv",  # OLMo's elementwise clamp: the family refuses it by name
    "use_parallel_residual": "use_parallel_residual",  # GPT-NeoX: recorded in the notes
    "vocab_size": "vocab_size",
}

#: GGUF architecture -> (HF model_type, rows permuted for rotary, norms stored as 1 + w)
_ARCHS = {
    "llama": ("llama", True, False),
    "qwen2": ("qwen2", False, False),
    "qwen2moe": ("qwen2_moe", False, False),  # Qwen2's attention (q/k/v biases); the experts are MLP
    "qwen2vl": ("qwen2_vl_text", False, False),  # Qwen2-VL's and Qwen2.5-VL's language model: Qwen2's, mrope sections
    "qwen3vl": ("qwen3_vl_text", False, False),  # Qwen3-VL's language model: Qwen3's, interleaved mrope sections
    "qwen3vlmoe": ("qwen3_vl_moe_text", False, False),  # (and DeepStack, which adds image features only)
    "qwen3": ("qwen3", False, False),
    "qwen3moe": ("qwen3_moe", False, False),
    "gemma": ("gemma", False, True),
    "gemma2": ("gemma2", False, True),
    "gemma3": ("gemma3_text", False, True),
    "gemma-embedding": ("gemma3_text", False, True),  # EmbeddingGemma: Gemma 3's layers attending both ways (_gemma)
    "gemma4": ("gemma4_text", False, False),  # norms stored as they are; per-layer head widths and counts (_gemma4)
    "phi3": ("phi3", False, False),  # one fused attn_qkv, rows [q heads | k heads | v heads] as HF's qkv_proj
    "olmo": ("olmo", True, False),  # norms without parameters: no norm tensors
    "olmo2": ("olmo2", False, False),  # OLMo-2 and OLMo-3 (whose sliding layers the pattern flags)
    "olmoe": ("olmoe", False, False),
    "gpt2": ("gpt2", False, False),  # HF's GPT-2 names (_GPT2_BLOCK), Conv1D weights transposed back
    "phi2": ("phi", False, False),  # Phi-1/1.5/2: HF's phi names (_PHI2_BLOCK), partial rotary in halves
    "gptneox": ("gpt_neox", False, False),  # GPT-NeoX/Pythia: HF's names (_NEOX_BLOCK), fused qkv regrouped per head
    "stablelm": ("stablelm", False, False),  # Llama's names with LayerNorm biases; partial rotary in halves
    "starcoder2": ("starcoder2", False, False),  # Llama's names with LayerNorm and output-projection biases
    "falcon": ("falcon", False, False),  # HF's falcon names (_falcon_block), fused qkv regrouped into K/V groups
    "starcoder": ("gpt_bigcode", False, False),  # StarCoder 1 (GPT-BigCode): GPT-2's names, nn.Linear weights as stored
    "bloom": ("bloom", False, False),  # HF's bloom names (_BLOOM_BLOCK), fused qkv regrouped per head as GPT-NeoX's
    "mpt": ("mpt", False, False),  # HF's mpt names (_MPT_BLOCK), the fused Wqkv as stored; ALiBi's maximum in attn_config
    "gpt-oss": ("gpt_oss", False, False),  # Llama's names, a sink logit per head; YaRN as transformers reads it
    "granite": ("granite", True, False),  # Llama's layout (llama.cpp converts it as a Llama) and four scalars
    "granitemoe": ("granitemoe", True, False),  # (_ARCH_KEYS); the experts, shared one included, are MLP
    "llama4": ("llama4_text", False, False),  # Llama 4: rows as HF's (both rotate interleaved pairs); llama.cpp's rules
    "smollm3": ("smollm3", True, False),  # a Llama to llama.cpp; its layers without rotary are not stored:
    # every fourth, llama.cpp's rule and transformers' default interval (the family's)
    "granitehybrid": ("granitemoehybrid", True, False),  # Granite 4's and Bamba's Mamba hybrids (_hybrid_layers)
    "minimax-m2": ("minimax_m2", False, False),  # Llama's names; QK norms over a layer's heads, rotary on part of each
    "lfm2": ("lfm2", False, False),  # HF's names under llama.cpp's (_LFM2_BLOCK); K/V heads 0 on a convolution layer
    "lfm2moe": ("lfm2_moe", False, False),  # LFM2-MoE: LFM2's layers and names, MoE MLPs
    "eurobert": ("eurobert", False, False),  # EuroBERT, jina-embeddings-v5: Llama's names, rows as stored, both ways
    "nomic-bert": ("nomic_bert", False, False),  # nomic-embed-text v1/v1.5: its files' own names (_NOMIC_BLOCK)
    "modern-bert": ("modernbert", False, False),  # ModernBERT: HF's names (_MODERNBERT_BLOCK), llama.cpp's rules
    "jina-bert-v3": ("jina_embeddings_v3", False, False),  # jina-embeddings-v3: its released names (_JINA_BLOCK)
    "bert": ("bert", False, False),  # BERT encoders (and RoBERTa's kin: llama.cpp cuts their position table to row 0)
    "nemotron": ("nemotron", False, True),  # Llama's names; llama.cpp stores LayerNorm1P's gains 1 + w, biases beside
    "command-r": ("cohere", False, False),  # Llama's names, rows as HF's (interleaved rotary, llama.cpp's own kind);
    "cohere2": ("cohere2", False, False),  # LayerNorms without bias, the logit scale (_ARCH_KEYS), Command R+'s QK norms
    "mistral3": ("ministral3", True, False),  # Ministral 3: a Llama to llama.cpp, its YaRN and query temperature
    "arcee": ("arcee", True, False),  # Arcee's AFM: a Llama to llama.cpp (its converter's LlamaModel: rows permuted)
    "seed_oss": ("seed_oss", False, False),  # Seed-OSS: Llama's names, rows as HF's; its bias switches from the tensors
    "ernie4_5": ("ernie4_5", False, False),  # ERNIE 4.5: rows as HF's (both rotate interleaved pairs); use_bias from
    "ernie4_5-moe": ("ernie4_5_moe", False, False),  # the tensors; the MoE's experts are MLP
    "dots1": ("dots1", False, False),  # dots.llm1: Qwen3's attention (rows as HF's, QK norms), MoE MLPs
    "glm4": ("glm4", False, False),  # GLM-4-0414: rows as HF's (both turn interleaved pairs of part of each head), the
    # attention-output norm as post_attention_norm (_LAYOUTS), q/k/v biases from the tensors
    "jamba": ("jamba", False, False),  # Jamba: its attention layers from the per-layer K/V head counts (0 on a Mamba
    # layer), no positions; the final norm as final_layernorm (_LAYOUTS)
    "exaone": ("exaone", False, False),  # EXAONE 3.0 and 3.5: Llama's layers, rows as HF's (the converter permutes
    # none), Llama 3's scaling as rope_freqs
    "exaone4": ("exaone4", False, False),  # EXAONE 4.0: rows as HF's, no norm before the attention, one after it,
    # QK norms; with a window, rotary on the sliding layers alone (llama.cpp's rule and transformers')
    "apertus": ("apertus", False, False),  # Apertus: rows as HF's (the converter permutes none), its attention norm
    # as attn_norm (_LAYOUTS), per-head QK norms, Llama 3's scaling as rope_freqs
    "t5": ("t5", False, False),  # T5's encoder (enc.blk.N., _T5_BLOCK); the decoder's tensors (dec.) not read
    "t5encoder": ("t5", False, False),  # (the encoder alone: a T5EncoderModel's file)
    "glm4moe": ("glm4_moe", False, False),  # GLM-4.5/4.6/4.7: rows as HF's (rotate-half on part of each head), q/k/v
    # biases and QK norms from the tensors; the multi-token-prediction blocks after the last layer left out
}

#: the architectures with multimodal rotary sections (``rope.dimension_sections``), and whose they are
_MROPE = {"qwen2vl": "Qwen2-VL", "qwen3vl": "Qwen3-VL", "qwen3vlmoe": "Qwen3-VL"}

#: architectures whose bias switches (HF config keys) the metadata does not state: each on where the file holds
#: that tensor in some layer
_BIAS_SWITCHES = {"seed_oss": {"attention_bias": "attn_q.bias", "attention_out_bias": "attn_output.bias"},
                  "ernie4_5": {"use_bias": "attn_q.bias"}, "ernie4_5-moe": {"use_bias": "attn_q.bias"},
                  "glm4": {"attention_bias": "attn_q.bias"},
                  "glm4moe": {"attention_bias": "attn_q.bias", "use_qk_norm": "attn_q_norm.weight"}}

#: GGUF per-block tensor name -> HF name under ``model.layers.{i}.``
_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_norm.bias": "input_layernorm.bias",  # StableLM, StarCoder2: LayerNorms
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_qkv.weight": "self_attn.qkv_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.bias": "self_attn.o_proj.bias",  # StarCoder2
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "attn_sinks.weight": "self_attn.sinks",  # gpt-oss
    "attn_sinks": "self_attn.sinks",
}
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight", "output_norm.weight": "model.norm.weight",
        "output_norm.bias": "model.norm.bias",
        "rope_freqs.weight": "rope_freqs.weight"}  # llama.cpp's rotary frequency divisors (Llama 3.1 scaling)

#: GPT-2 files keep HF's GPT-2 names, and llama.cpp stores its Conv1D weights transposed to ``(out, in)``
_GPT2_BLOCK = {
    "attn_norm.weight": "ln_1.weight", "attn_norm.bias": "ln_1.bias",
    "attn_qkv.weight": "attn.c_attn.weight", "attn_qkv.bias": "attn.c_attn.bias",
    "attn_output.weight": "attn.c_proj.weight", "attn_output.bias": "attn.c_proj.bias",
}
_GPT2_TOP = {"token_embd.weight": "transformer.wte.weight", "position_embd.weight": "transformer.wpe.weight",
             "output_norm.weight": "transformer.ln_f.weight", "output_norm.bias": "transformer.ln_f.bias",
             "output.weight": "lm_head.weight"}
#: Phi-2 files keep HF's phi names: LayerNorms with biases, an output ``dense``, a biased ``lm_head``;
#: older conversions store one fused ``attn_qkv`` (rows: query heads, key heads, value heads), split here
_PHI2_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight", "attn_norm.bias": "input_layernorm.bias",
    **{f"attn_{x}.{p}": f"self_attn.{x}_proj.{p}" for x in "qkv" for p in ("weight", "bias")},
    **{f"attn_qkv.{p}": tuple(f"self_attn.{x}_proj.{p}" for x in "qkv") for p in ("weight", "bias")},
    "attn_output.weight": "self_attn.dense.weight", "attn_output.bias": "self_attn.dense.bias",
}
_PHI2_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight", "output.bias": "lm_head.bias",
             "output_norm.weight": "model.final_layernorm.weight", "output_norm.bias": "model.final_layernorm.bias"}
#: GPT-NeoX files keep HF's gpt_neox names, with the fused ``query_key_value`` rows regrouped by
#: llama.cpp's converter from HF's per-head ``[head][q|k|v][d_head]`` to ``[q|k|v][head][d_head]``
_NEOX_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight", "attn_norm.bias": "input_layernorm.bias",
    "attn_qkv.weight": "attention.query_key_value.weight", "attn_qkv.bias": "attention.query_key_value.bias",
    "attn_output.weight": "attention.dense.weight", "attn_output.bias": "attention.dense.bias",
}
_NEOX_TOP = {"token_embd.weight": "gpt_neox.embed_in.weight", "output.weight": "embed_out.weight",
             "output_norm.weight": "gpt_neox.final_layer_norm.weight", "output_norm.bias": "gpt_neox.final_layer_norm.bias"}
#: BLOOM files keep HF's bloom names; the fused ``query_key_value`` rows regrouped as GPT-NeoX's
_BLOOM_BLOCK = {
    **{f"attn_norm.{p}": f"input_layernorm.{p}" for p in ("weight", "bias")},
    **{f"attn_qkv.{p}": f"self_attention.query_key_value.{p}" for p in ("weight", "bias")},
    **{f"attn_output.{p}": f"self_attention.dense.{p}" for p in ("weight", "bias")},
}
_BLOOM_TOP = {"token_embd.weight": "transformer.word_embeddings.weight", "output.weight": "lm_head.weight",
              "token_embd_norm.weight": "transformer.word_embeddings_layernorm.weight",
              "token_embd_norm.bias": "transformer.word_embeddings_layernorm.bias",
              "output_norm.weight": "transformer.ln_f.weight", "output_norm.bias": "transformer.ln_f.bias"}
#: MPT files keep HF's mpt names, ``Wqkv`` rows ``[q heads | k heads | v heads]`` as stored
_MPT_BLOCK = {"attn_norm.weight": "norm_1.weight", "attn_norm.bias": "norm_1.bias", "attn_qkv.weight": "attn.Wqkv.weight",
              "attn_qkv.bias": "attn.Wqkv.bias", "attn_output.weight": "attn.out_proj.weight",
              "attn_output.bias": "attn.out_proj.bias"}
_MPT_TOP = {"token_embd.weight": "transformer.wte.weight", "output.weight": "lm_head.weight",
            "output_norm.weight": "transformer.norm_f.weight", "output_norm.bias": "transformer.norm_f.bias"}
#: BERT files keep HF's bert names (post-LN: each sublayer's LayerNorm after it; ``layer_output_norm`` is
#: the one the next layer reads); a fused ``attn_qkv`` splits into query, key and value as Phi-2's
_BERT_BLOCK = {
    **{f"attn_{x}.{p}": f"attention.self.{n}.{p}" for x, n in zip("qkv", ("query", "key", "value"))
       for p in ("weight", "bias")},
    **{f"attn_qkv.{p}": tuple(f"attention.self.{n}.{p}" for n in ("query", "key", "value"))
       for p in ("weight", "bias")},
    **{f"attn_output.{p}": f"attention.output.dense.{p}" for p in ("weight", "bias")},
    **{f"layer_output_norm.{p}": f"output.LayerNorm.{p}" for p in ("weight", "bias")},
}
_BERT_TOP = {"token_embd.weight": "embeddings.word_embeddings.weight",
             "position_embd.weight": "embeddings.position_embeddings.weight",
             "token_types.weight": "embeddings.token_type_embeddings.weight",
             "token_embd_norm.weight": "embeddings.LayerNorm.weight",
             "token_embd_norm.bias": "embeddings.LayerNorm.bias"}
#: T5's encoder blocks (llama.cpp's ``enc.blk.N.``) and its top-level tensors, under HF's names
_T5_BLOCK = {**{f"attn_{x}.weight": f"layer.0.SelfAttention.{x}.weight" for x in "qkvo"},
             "attn_rel_b.weight": "layer.0.SelfAttention.relative_attention_bias.weight",
             "attn_norm.weight": "layer.0.layer_norm.weight"}
_T5_TOP = {"token_embd.weight": "shared.weight", "enc.output_norm.weight": "encoder.final_layer_norm.weight"}
#: nomic-embed-text files map back to its released names (its family reads them): the fused ``Wqkv`` as
#: stored (llama.cpp turns these rotate-half, as the model does: no rows permuted), the post-LN norms
_NOMIC_BLOCK = {"attn_qkv.weight": "attn.Wqkv.weight", "attn_output.weight": "attn.out_proj.weight",
                **{f"attn_output_norm.{p}": f"norm1.{p}" for p in ("weight", "bias")},
                **{f"layer_output_norm.{p}": f"norm2.{p}" for p in ("weight", "bias")}}
_NOMIC_TOP = {"token_embd.weight": "embeddings.word_embeddings.weight",
              "token_types.weight": "embeddings.token_type_embeddings.weight",
              "token_embd_norm.weight": "emb_ln.weight", "token_embd_norm.bias": "emb_ln.bias"}
#: jina-embeddings-v3 files (its base weights: llama.cpp's converter writes each task's LoRA to a file of its own) map
#: back to its released names: the fused ``Wqkv`` and ``out_proj`` with biases, the post-LN norms
_JINA_BLOCK = {**{f"attn_qkv.{p}": f"mixer.Wqkv.{p}" for p in ("weight", "bias")},
               **{f"attn_output.{p}": f"mixer.out_proj.{p}" for p in ("weight", "bias")},
               **{f"attn_output_norm.{p}": f"norm1.{p}" for p in ("weight", "bias")},
               **{f"layer_output_norm.{p}": f"norm2.{p}" for p in ("weight", "bias")}}
_JINA_TOP = {"token_embd.weight": "embeddings.word_embeddings.weight",
             "token_types.weight": "embeddings.token_type_embeddings.weight",
             **{f"token_embd_norm.{p}": f"emb_ln.{p}" for p in ("weight", "bias")}}
#: ModernBERT files map back to HF's names (its family reads them): the fused ``Wqkv`` rows [q | k | v] as stored
#: (both turn halves: no rows permuted), layer 0 without ``attn_norm``
_MODERNBERT_BLOCK = {**{f"attn_norm.{p}": f"attn_norm.{p}" for p in ("weight", "bias")},
                     **{f"attn_qkv.{p}": f"attn.Wqkv.{p}" for p in ("weight", "bias")},
                     **{f"attn_output.{p}": f"attn.Wo.{p}" for p in ("weight", "bias")}}
_MODERNBERT_TOP = {"token_embd.weight": "embeddings.tok_embeddings.weight",
                   **{f"token_embd_norm.{p}": f"embeddings.norm.{p}" for p in ("weight", "bias")},
                   **{f"output_norm.{p}": f"final_norm.{p}" for p in ("weight", "bias")}}
_FALCON_TOP = {"token_embd.weight": "transformer.word_embeddings.weight", "output.weight": "lm_head.weight",
               "output_norm.weight": "transformer.ln_f.weight", "output_norm.bias": "transformer.ln_f.bias"}


def _falcon_block(two_norms: bool) -> dict:
    """Falcon files keep HF's falcon names. llama.cpp's ``attn_norm`` is the layer's one LayerNorm
    (``input_layernorm``), or, beside an ``attn_norm_2`` (Falcon-40B, 180B), the MLP's
    (``ln_mlp``), the attention then reading ``attn_norm_2`` (``ln_attn``)."""
    norm = "ln_mlp" if two_norms else "input_layernorm"
    return {
        **{f"attn_norm.{p}": f"{norm}.{p}" for p in ("weight", "bias")},
        **({f"attn_norm_2.{p}": f"ln_attn.{p}" for p in ("weight", "bias")} if two_norms else {}),
        **{f"attn_qkv.{p}": f"self_attention.query_key_value.{p}" for p in ("weight", "bias")},
        **{f"attn_output.{p}": f"self_attention.dense.{p}" for p in ("weight", "bias")},
    }


def _neox_per_head(w: torch.Tensor, H: int, G: int, r: int) -> torch.Tensor:
    """Rows ``[q|k|v][head][d_head]`` back to GPT-NeoX's ``[head][q|k|v][d_head]`` (``G = H``)."""
    return w.reshape(3, H, r, *w.shape[1:]).swapaxes(0, 1).reshape(w.shape)


def _falcon_grouped(w: torch.Tensor, H: int, G: int, r: int) -> torch.Tensor:
    """Rows ``[H query heads | G key heads | G value heads]`` back to Falcon's grouped layout: ``G``
    groups of ``[their H/G query heads | their key head | their value head]`` (one group: Falcon-7B's
    multi-query rows, unchanged)."""
    rest = w.shape[1:]
    q = w[: H * r].reshape(G, H // G, r, *rest)
    k, v = (w[a * r : (a + G) * r].reshape(G, 1, r, *rest) for a in (H, H + G))
    return torch.cat([q, k, v], dim=1).reshape(w.shape)


#: LFM2 files: its attention's own names (``operator_norm``, ``out_proj``, ``q_layernorm``); the final
#: norm, which transformers names ``embedding_norm``, is llama.cpp's ``token_embd_norm``
_LFM2_BLOCK = {"attn_norm.weight": "operator_norm.weight", "attn_output.weight": "self_attn.out_proj.weight",
               **{f"attn_{x}.weight": f"self_attn.{x}_proj.weight" for x in "qkv"},
               **{f"attn_{x}_norm.weight": f"self_attn.{x}_layernorm.weight" for x in "qk"}}
_LFM2_TOP = {"token_embd.weight": "model.embed_tokens.weight", "token_embd_norm.weight": "model.embedding_norm.weight",
             "output.weight": "lm_head.weight"}


#: architecture -> (block tensor names, block prefix, top-level names, names whose rows and columns
#: llama.cpp swapped, (fused names whose rows it regrouped, the function that puts them back:
#: ``(w, H, G, d_head) -> w``)); every other architecture uses the Llama-like names. A block name
#: mapped to a tuple of HF names is a fused tensor whose rows split into them (query, key, value heads).
_LAYOUTS = {"gpt2": (_GPT2_BLOCK, "transformer.h.{i}.", _GPT2_TOP, ("attn.c_attn.weight", "attn.c_proj.weight"), ((), None)),
            "starcoder": (_GPT2_BLOCK, "transformer.h.{i}.", _GPT2_TOP, (), ((), None)),
            "phi2": (_PHI2_BLOCK, "model.layers.{i}.", _PHI2_TOP, (), ((), None)),
            "gptneox": (_NEOX_BLOCK, "gpt_neox.layers.{i}.", _NEOX_TOP, (),
                        (("attention.query_key_value.weight", "attention.query_key_value.bias"), _neox_per_head)),
            "bloom": (_BLOOM_BLOCK, "transformer.h.{i}.", _BLOOM_TOP, (),
                      (("self_attention.query_key_value.weight", "self_attention.query_key_value.bias"), _neox_per_head)),
            "mpt": (_MPT_BLOCK, "transformer.blocks.{i}.", _MPT_TOP, (), ((), None)),
            "bert": (_BERT_BLOCK, "encoder.layer.{i}.", _BERT_TOP, (), ((), None)),
            "nomic-bert": (_NOMIC_BLOCK, "encoder.layers.{i}.", _NOMIC_TOP, (), ((), None)),
            "modern-bert": (_MODERNBERT_BLOCK, "layers.{i}.", _MODERNBERT_TOP, (), ((), None)),
            "jina-bert-v3": (_JINA_BLOCK, "encoder.layers.{i}.", _JINA_TOP, (), ((), None)),
            **dict.fromkeys(("t5", "t5encoder"), (_T5_BLOCK, "encoder.block.{i}.", _T5_TOP, (), ((), None))),
            **dict.fromkeys(("lfm2", "lfm2moe"), (_LFM2_BLOCK, "model.layers.{i}.", _LFM2_TOP, (), ((), None))),
            "glm4": ({**_BLOCK, "post_attention_norm.weight": "post_self_attn_layernorm.weight"}, "model.layers.{i}.",
                     _TOP, (), ((), None)),
            "apertus": ({**_BLOCK, "attn_norm.weight": "attention_layernorm.weight"}, "model.layers.{i}.", _TOP, (),
                        ((), None)),
            "jamba": (_BLOCK, "model.layers.{i}.", {**_TOP, "output_norm.weight": "model.final_layernorm.weight"}, (),
                      ((), None)),
            "gemma4": ({**_BLOCK, "layer_output_scale.weight": "layer_scalar"}, "model.layers.{i}.", _TOP, (), ((), None)),
            "falcon": (_falcon_block(two_norms=False), "transformer.h.{i}.", _FALCON_TOP, (),
                       (("self_attention.query_key_value.weight", "self_attention.query_key_value.bias"), _falcon_grouped))}
#: encoder architectures, which attend both ways (a file flagged causal is refused)
_ENCODERS = ("bert", "nomic-bert", "eurobert", "modern-bert", "jina-bert-v3", "t5", "t5encoder")
#: architectures whose rotary may cover part of each head (``rope.dimension_count`` < head width)
_PARTIAL_ROTARY = {"phi2", "gptneox", "stablelm", "granitehybrid", "nemotron",  # (granitehybrid: Bamba's half)
                   "minimax-m2", "phi3", "glm4", "glm4moe"}  # (phi3: Phi-4-mini's three quarters; GLM's: half)
#: GGUF metadata key -> the HF config key an architecture's family reads instead of _CONFIG_KEYS' one
_RENAMED_KEYS = {**{arch: {"layer_norm_epsilon": "layer_norm_eps"}
                    for arch in ("phi2", "gptneox", "stablelm", "command-r", "cohere2", "bert", "nomic-bert",
                                 "jina-bert-v3")},
                 "modern-bert": {"layer_norm_epsilon": "norm_eps"},
                 "nemotron": {"layer_norm_epsilon": "norm_eps", "rms_norm_eps": "norm_eps"},
                 "lfm2": {"rms_norm_eps": "norm_eps"}, "lfm2moe": {"rms_norm_eps": "norm_eps"},
                 "starcoder2": {"layer_norm_epsilon": "norm_epsilon"}, "falcon": {"num_key_value_heads": "num_kv_heads"}}
#: GGUF metadata key (after ``{arch}.``) -> HF config key, read for these architectures only
_GRANITE_KEYS = {"embedding_scale": "embedding_multiplier", "attention.scale": "attention_multiplier",
                 "residual_scale": "residual_multiplier", "logit_scale": "logits_scaling"}
_GRANITE_ARCHS = ("granite", "granitemoe", "granitehybrid")
_ARCH_KEYS = {**{arch: _GRANITE_KEYS for arch in _GRANITE_ARCHS}, "command-r": {"logit_scale": "logit_scale"},
              "cohere2": {"logit_scale": "logit_scale"}}
_LLAMA_LAYOUT = (_BLOCK, "model.layers.{i}.", _TOP, (), ((), None))

#: how llama.cpp names shard ``k`` of ``n`` of a split GGUF file (``llama-gguf-split``, gguf-py's
#: ``GGUFWriter(split_max_tensors=...)``): ``NAME-0000k-of-0000n.gguf``
_SHARD_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def _llama4(fields: dict, arch: str) -> dict:
    """Llama 4's settings as llama.cpp runs a file of it (none stored but the expert count): no rotary
    on every fourth layer, chunks of 8192 tokens on the others, the NoPE layers' query temperature
    (0.1, from position 8191), and the gainless QK-norm except in the 128-expert model (Maverick),
    which llama.cpp tells by its expert count."""
    return dict(no_rope_layer_interval=4, attention_chunk_size=8192, attn_temperature_tuning=True, floor_scale=8192,
                attn_scale=0.1, use_qk_norm=fields.get(f"{arch}.expert_count") != 128)


def _open_file(path: Path):
    """``(metadata, tensor table, mapped bytes)`` of one GGUF file, every defect named by file
    (missing, empty, not GGUF, truncated header or tensor data, no ``gguf`` package)."""
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise LoadError(f"{path}: empty file, not a GGUF file")
    try:
        with open(path, "rb") as fh:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise LoadError(f"{path}: cannot be read ({one_line(e)})") from e
    try:  # a file that is no GGUF file is named so, whether or not the reader's package is there
        if size >= 4:  # shorter: read_header calls it truncated
            check_magic(bytes(buf[:4]))
    except ValueError as e:
        raise LoadError(f"{path}: not a readable GGUF file: {e}") from e
    try:
        import gguf.constants  # noqa: F401  (read_header and the type names need it)
    except ImportError as e:
        raise LoadError(f"{path}: reading GGUF files needs the 'gguf' package: pip install 'compscope[gguf]'") from e
    try:
        fields, infos = read_header(buf, size)
    except (EOFError, ValueError, UnicodeDecodeError, struct.error, OverflowError) as e:
        kind = "truncated GGUF file" if isinstance(e, EOFError) else "not a readable GGUF file"
        raise LoadError(f"{path}: {kind}: {one_line(e)}") from e
    for info in infos:
        if info.nbytes is not None and info.offset + info.nbytes > size:
            raise LoadError(
                f"{path}: truncated GGUF file: tensor '{info.name}' needs bytes {info.offset}..{info.offset + info.nbytes}, "
                f"the file has {size}"
            )
    return fields, infos, buf


def shards(path: Path, fields: dict) -> list[Path]:
    """The files of the split GGUF file that ``path`` (metadata ``fields``) is a shard of, in order
    (``split.no``, ``split.count``: llama.cpp's split metadata); ``[path]`` for a whole file. A shard
    named otherwise than llama.cpp names them is refused: the others could not be found."""
    count, no = fields.get("split.count"), fields.get("split.no")
    if count in (None, 1) and no in (None, 0):
        return [path]
    if not isinstance(count, int) or not isinstance(no, int) or not 0 <= no < count:
        raise LoadError(f"{path}: inconsistent split metadata (split.no={no!r}, split.count={count!r})")
    m = _SHARD_NAME.match(path.name)
    if m is None or (int(m["no"]), int(m["count"])) != (no + 1, count):
        raise LoadError(f"{path}: shard {no + 1} of a GGUF file split in {count}, named otherwise than llama.cpp "
                        f"names shards (NAME-{no + 1:05d}-of-{count:05d}.gguf), so the other shards cannot be found: "
                        "give the shards their names, or merge them into one file (llama-gguf-split --merge)")
    return [path.with_name(f"{m['stem']}-{k:05d}-of-{count:05d}.gguf") for k in range(1, count + 1)]


def architectures() -> dict[str, str]:
    """Every GGUF architecture compscope reads, and the HF ``model_type`` it is read as."""
    return {arch: model_type for arch, (model_type, *_rest) in _ARCHS.items()}


def architecture(path: str | Path) -> object:
    """The ``general.architecture`` a GGUF file's header states (None where it states none); only the
    header is read."""
    return _open_file(Path(path))[0].get("general.architecture")


def shard_set(files: list[Path]) -> bool:
    """Whether ``files`` (sorted) are by their names every shard of one split GGUF file."""
    names = [_SHARD_NAME.match(f.name) for f in files]
    if not all(names):
        return False
    count = len(files)
    return all((m["stem"], int(m["no"]), int(m["count"])) == (names[0]["stem"], k, count)
               for k, m in enumerate(names, start=1))


def _open_shards(path: Path) -> tuple[list[Path], dict, list[tuple]]:
    """``(its files, metadata, [(tensor info, mapped bytes, file), ...])`` of the GGUF file at
    ``path``, whole or split (any of its shards given: every shard is read, the metadata is the
    first's); a missing shard, a shard whose split metadata disagrees with its name, a tensor in two
    shards or a tensor count other than the first shard's ``split.tensors.count`` is refused."""
    fields, infos, buf = _open_file(path)
    files = shards(path, fields)
    if len(files) == 1:
        return files, fields, [(info, buf, path) for info in infos]
    n, located, where = len(files), [], {}
    for k, shard in enumerate(files):
        if shard != path and not shard.is_file():
            raise LoadError(f"{shard}: no such file: {path.name} is one of {n} shards of a split GGUF file, and "
                            "every shard must lie beside it")
        f, inf, b = (fields, infos, buf) if shard == path else _open_file(shard)
        said = (f.get("split.no", 0), f.get("split.count", 1))
        if said != (k, n):
            says = (f"shard {said[0] + 1} of {said[1]}" if all(isinstance(x, int) for x in said)
                    else f"split.no={said[0]!r}, split.count={said[1]!r}")
            raise LoadError(f"{shard}: its split metadata says {says}, its name shard {k + 1} of {n}")
        if k == 0:
            first = f
        for info in inf:
            if info.name in where:
                raise LoadError(f"{shard}: tensor '{info.name}' is also in {where[info.name]}")
            where[info.name] = shard
            located.append((info, b, shard))
    total = first.get("split.tensors.count")
    if total is not None and total != len(located):
        raise LoadError(f"{files[0]}: the split GGUF file says it holds {total} tensors, and its {n} shards hold "
                        f"{len(located)}")
    return files, first, located


def open_gguf(path: str | Path) -> Checkpoint:
    """A GGUF file's config and tensors, HF-named (module docstring); a split file (llama.cpp's
    ``NAME-00001-of-0000n.gguf``) is read from all its shards, whichever of them is given."""
    return _checkpoint(*_open_shards(Path(path)))


def _checkpoint(files: list[Path], fields: dict, located: list[tuple]) -> Checkpoint:
    """:func:`open_gguf` of the file in ``files`` (one, or its shards), from :func:`_open_shards`."""
    from gguf.constants import GGMLQuantizationType

    path = files[0]
    infos = [info for info, _, _ in located]
    arch = fields.get("general.architecture")
    if arch not in _ARCHS:
        from ..catalogue import why_not_gguf

        reason = why_not_gguf(arch)
        raise UnsupportedModelError(
            f"{path}: GGUF architecture {arch!r}, which compscope does not read: {reason}" if reason
            else f"{path}: GGUF architecture {arch!r} is not supported (supported: {', '.join(_ARCHS)})")
    model_type, permuted, one_plus = _ARCHS[arch]
    cfg: dict = {"model_type": model_type}
    mtp = _mtp_blocks(path, arch, fields)  # (GLM-4.5's multi-token-prediction blocks, after the last layer)
    for gkey, hkey in {**_CONFIG_KEYS, **_ARCH_KEYS.get(arch, {})}.items():
        v = fields.get(f"{arch}.{gkey}")
        if v is not None:
            cfg[_RENAMED_KEYS.get(arch, {}).get(hkey, hkey)] = v
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads"):
        if key not in cfg:
            gkey = next(g for g, h in _CONFIG_KEYS.items() if h == key)
            raise LoadError(f"{path}: GGUF metadata '{arch}.{gkey}' is missing")
    if mtp:
        if not 0 < mtp < cfg["num_hidden_layers"]:
            raise LoadError(f"{path}: GGUF metadata '{arch}.nextn_predict_layers' = {mtp} for "
                            f"{cfg['num_hidden_layers']} blocks")
        cfg["num_hidden_layers"] -= mtp  # (the blocks llama.cpp counts are the layers and these)
    n_heads = cfg["num_attention_heads"]
    n_kv = fields.get(f"{arch}.attention.head_count_kv") or n_heads  # under the key its family reads in cfg
    ssm_layers: set[int] = set()
    if arch == "granitehybrid" and isinstance(n_kv, list):  # a K/V head count per layer, 0 on the Mamba layers
        n_kv, ssm_layers = _hybrid_layers(path, arch, cfg, fields, n_kv)
    if arch == "jamba" and isinstance(n_kv, list):  # 0 on the Mamba layers: an attention layer every period-th
        n_kv, ssm_layers = _kv_heads_per_layer(path, arch, cfg, n_kv, "a Mamba layer")
        cfg.update(_jamba_period(path, arch, cfg["num_hidden_layers"], ssm_layers))
    if arch in ("lfm2", "lfm2moe") and isinstance(n_kv, list):  # 0 on the convolution layers
        n_kv, ssm_layers = _kv_heads_per_layer(path, arch, cfg, n_kv, "a convolution layer")
        cfg["layer_types"] = ["conv" if i in ssm_layers else "full_attention" for i in range(cfg["num_hidden_layers"])]
    if arch == "gemma4":  # local and global layers of their own head widths and K/V head counts
        n_kv = _gemma4(path, arch, cfg, fields, infos, n_kv)
    if isinstance(n_heads, list) or isinstance(n_kv, list):
        raise UnsupportedModelError(
            f"{path}: per-layer head counts ('{arch}.attention.head_count' is a list) are not supported"
        )
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_heads
    if arch in _GRANITE_ARCHS and "attention_multiplier" not in cfg:  # llama.cpp: no attention.scale, d_head^-1/2
        cfg["attention_multiplier"] = head_dim**-0.5  # (transformers' Granite default is 1: said outright)
    rope_dim = fields.get(f"{arch}.rope.dimension_count") if arch != "gemma4" else None  # (_gemma4: per layer type)
    if rope_dim == head_dim and arch in _PARTIAL_ROTARY:  # said outright: StableLM's family would take a quarter
        cfg["partial_rotary_factor"] = 1.0
    if rope_dim is not None and rope_dim != head_dim:
        if arch not in _PARTIAL_ROTARY or not 0 < rope_dim < head_dim:
            raise UnsupportedModelError(
                f"{path}: GGUF metadata '{arch}.rope.dimension_count'={rope_dim} differs from the head width {head_dim}: "
                f"partial rotary is supported for GGUF files of {', '.join(sorted(_PARTIAL_ROTARY))} only"
            )
        factor = rope_dim / head_dim  # the families take int(head_dim × factor) dims, as transformers does
        cfg["partial_rotary_factor"] = factor if int(head_dim * factor) == rope_dim else (rope_dim + 0.5) / head_dim
    longrope = sorted(i.name for i in infos if i.name.startswith("rope_factors_"))
    if longrope and arch != "phi3":  # (llama.cpp writes them for Phi-3's long-context models alone)
        raise UnsupportedModelError(f"{path}: rotary scaling by {', '.join(longrope)} (longrope) is not supported for "
                                    f"GGUF architecture {arch!r} (it is for phi3)")
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list):  # one flag per layer: True = sliding-window layer
        cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif pattern is not None:  # every pattern-th layer is global (llama.cpp and HF agree)
        cfg["sliding_window_pattern"] = pattern
    scaling = fields.get(f"{arch}.rope.scaling.type")
    factor = fields.get(f"{arch}.rope.scaling.factor")
    if scaling == "yarn":
        cfg["rope_scaling"] = _yarn(path, arch, fields)
    elif scaling not in (None, "none") or factor not in (None, 0.0, 1.0):
        # the families accept 'linear' and refuse other types by name
        cfg["rope_scaling"] = {"rope_type": scaling or "linear", "factor": 1.0 if factor is None else factor}
    if longrope:  # Phi-3's long-context models: frequencies rescaled by the sequence length
        if scaling not in (None, "none"):
            raise UnsupportedModelError(f"{path}: rotary factors {', '.join(longrope)} (longrope) beside GGUF metadata "
                                        f"'{arch}.rope.scaling.type' = {scaling!r}: not one rope scaling")
        _longrope(path, arch, cfg, fields, located)
    if arch in ("gemma2", "gemma3", "gemma-embedding"):
        # not stored in GGUF; llama.cpp's rule: 27B (46 / 62 layers) scales by (d_model / n_heads)^-1/2,
        # the others by head_dim^-1/2. Gemma 2's sliding layers are not stored either: every other one (HF's default)
        big = cfg["num_hidden_layers"] == {"gemma2": 46, "gemma3": 62}.get(arch)
        cfg["query_pre_attn_scalar"] = cfg["hidden_size"] // n_heads if big else head_dim
    if arch == "gemma-embedding":  # llama.cpp's rules for it: both ways, within half the window on either side (as
        # transformers' EmbeddingGemma), every sixth layer global where no pattern is stored, its local layers at base
        # 10000 whatever the file says
        cfg.update(use_bidirectional_attention=True, rope_local_base_freq=10000.0)
    if arch == "stablelm":  # llama.cpp: a layer without an MLP norm is a parallel block (not in the metadata)
        cfg["use_parallel_residual"] = not any(i.name.endswith("ffn_norm.weight") for i in infos)
        # and per-head QK LayerNorms (StableLM 2 12B) are there when their stacked gains are
        cfg["qk_layernorm"] = any(i.name.endswith("attn_q_norm.weight") for i in infos)
    if arch == "starcoder":  # llama.cpp writes every StarCoder file multi-query: rows [q heads | k | v]
        if fields.get(f"{arch}.attention.head_count_kv") != 1:  # (another count: a file read as another model)
            raise UnsupportedModelError(
                f"{path}: GGUF metadata '{arch}.attention.head_count_kv' is "
                f"{fields.get(f'{arch}.attention.head_count_kv', 'missing')}: llama.cpp writes StarCoder files "
                "multi-query (one key/value head), and compscope reads them so only")
        cfg["multi_query"] = True
    if arch == "mpt" and f"{arch}.attention.max_alibi_bias" in fields:  # ALiBi's maximum, where MPT's config keeps it
        cfg["attn_config"] = {"alibi_bias_max": fields[f"{arch}.attention.max_alibi_bias"]}
    if arch in _MROPE:  # llama.cpp's sections: [temporal, height, width, 0]; the family checks the first three
        sections = fields.get(f"{arch}.rope.dimension_sections")
        if not isinstance(sections, list) or len(sections) != 4 or sections[3] != 0:
            raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.dimension_sections' = {sections!r}: "
                                        "expected the four multimodal rotary sections llama.cpp writes for "
                                        f"{_MROPE[arch]}, the last 0")
        cfg["rope_scaling"] = {"rope_type": "default", "mrope_section": sections[:3]}
    if arch == "mistral3":
        _mistral3(path, arch, cfg, fields)
    if arch in _BIAS_SWITCHES:  # the switches as the tensors the file holds (the metadata states none)
        names = {i.name for i in infos}
        cfg.update({key: any(n.endswith(tensor) for n in names) for key, tensor in _BIAS_SWITCHES[arch].items()})
    if arch == "modern-bert":
        _modern_bert(path, arch, cfg, fields, infos)
    if arch == "jina-bert-v3" and "rope_theta" not in cfg:  # (llama.cpp would take 10000; the model's is 20000)
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.freq_base' is missing: llama.cpp would turn "
                                    "the heads at 10000, jina-embeddings-v3 at its own base (20000)")
    if arch == "jina-bert-v3" and cfg.get("num_key_value_heads") == cfg["num_attention_heads"]:
        cfg.pop("num_key_value_heads")  # (one per head: the family's own count; another is refused by the family)
    if arch in _ENCODERS and fields.get(f"{arch}.attention.causal"):  # llama.cpp's flag; these attend both ways
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.causal' is true: a BERT file that "
                                    "attends causally is not the bidirectional encoder compscope reads")
    if arch == "llama4":
        cfg.update(_llama4(fields, arch))
    if arch in ("t5", "t5encoder"):
        _t5(path, arch, cfg, fields, infos)
    if arch == "command-r":  # Command R+'s per-head QK LayerNorms, there when their stacked gains are
        cfg["use_qk_norm"] = any(i.name.endswith("attn_q_norm.weight") for i in infos)
    if "vocab_size" not in cfg:
        toks = fields.get("tokenizer.ggml.tokens")
        if isinstance(toks, (list, SkippedStrings)):
            cfg["vocab_size"] = len(toks)

    loaders, origin, dtypes, attention = {}, {}, {}, {}
    block = re.compile(r"(?:enc\.)?blk\.(\d+)\.(.+)$")  # (T5's encoder blocks: enc.blk.N.)
    block_names, block_prefix, top_names, transposed, (regrouped, regroup_rows) = _LAYOUTS.get(arch, _LLAMA_LAYOUT)
    not_attention: tuple[str, ...] = ()
    if arch == "gpt-oss":  # its post-attention norm is the MLP's input norm: not in the attention
        not_attention = ("post_attention_norm.weight",)
    # post-LN: the LayerNorm after the attention acts on the residual, not inside the attention
    if arch in ("bert", "nomic-bert", "jina-bert-v3"):
        not_attention = ("attn_output_norm.weight", "attn_output_norm.bias")
    if arch == "falcon":  # llama.cpp's rows are grouped whatever the model: read as the new decoder architecture
        two_norms = any(i.name.endswith("attn_norm_2.weight") for i in infos)
        cfg.update(new_decoder_architecture=True, num_kv_heads=n_kv, num_ln_in_parallel_attn=2 if two_norms else 1,
                   parallel_attn=True)  # llama.cpp runs every Falcon block in parallel
        if two_norms:  # attn_norm_2 is the attention's LayerNorm, attn_norm the MLP's
            block_names, not_attention = _falcon_block(two_norms=True), ("attn_norm.weight", "attn_norm.bias")
    splits = (n_heads * head_dim, n_kv * head_dim, n_kv * head_dim)  # a fused tensor's rows: q, k, v heads
    for info, buf, file in located:
        m = block.match(info.name)
        if m and mtp and int(m.group(1)) >= cfg["num_hidden_layers"]:  # a multi-token-prediction block: no layer
            continue
        if m and m.group(2).startswith("nextn."):  # (llama.cpp's names for a prediction block's own tensors)
            raise LoadError(f"{path}: tensor '{info.name}' belongs to a multi-token-prediction block, and block "
                            f"{m.group(1)} is one of the {cfg['num_hidden_layers']} layers the metadata counts "
                            f"('{arch}.nextn_predict_layers' = {mtp})")
        if m:
            sub = block_names.get(m.group(2))
            names = () if sub is None else sub if isinstance(sub, tuple) else (sub,)
            names = tuple(block_prefix.format(i=m.group(1)) + n for n in names)
        else:
            names = (top_names[info.name],) if info.name in top_names else ()
        if _enters_attention(m.group(2) if m else None, info.name) and not (
                m and (m.group(2) in not_attention or int(m.group(1)) in ssm_layers)):  # (a Mamba layer's input norm)
            attention[info.name] = names
        try:
            type_name = GGMLQuantizationType(info.type_id).name
        except ValueError:
            type_name = f"type{info.type_id}"
        for part, hf in enumerate(names):
            rows = None
            if len(names) > 1:
                start = sum(splits[:part])
                rows = (start, start + splits[part])
            swap = hf.endswith(transposed)  # () for every layout but GPT-2's: nothing swapped
            regroup = hf.endswith(regrouped)  # () but for GPT-NeoX and Falcon: nothing regrouped
            is_norm = hf.endswith("norm.weight")
            # llama.cpp permutes the rows of q/k weights and biases alike (convert_hf_to_gguf LlamaModel)
            n_rows = n_heads if ".q_proj." in hf else n_kv if ".k_proj." in hf else None

            def load(info=info, buf=buf, file=file, n_rows=n_rows, is_norm=is_norm, type_name=type_name, swap=swap,
                     rows=rows, regroup=regroup):
                if info.nbytes is None:
                    raise LoadError(
                        f"{file}: tensor '{info.name}' has GGML type {type_name}, unknown to the installed 'gguf' package"
                    )
                try:
                    w = dequantize(buf, info)
                except (ValueError, NotImplementedError, RuntimeError) as e:
                    msg = f"{file}: tensor '{info.name}' ({type_name}) cannot be dequantised ({one_line(e)})"
                    raise LoadError(msg) from e
                if (rows is not None or regroup) and w.shape[0] != sum(splits):
                    raise LoadError(f"{file}: tensor '{info.name}' has {w.shape[0]} rows; fused query, key and value "
                                    f"heads of this model need {' + '.join(map(str, splits))} = {sum(splits)}")
                if rows is not None:
                    w = w[rows[0] : rows[1]]
                if regroup:
                    w = regroup_rows(w, n_heads, n_kv, head_dim)
                if permuted and n_rows is not None:
                    w = pairs_to_halves(w, n_rows)
                if one_plus and is_norm:
                    w = w - 1.0
                return w.T if swap else w  # a view: the GPT-2 family transposes Conv1D weights back itself

            loaders[hf] = load
            origin[hf] = f"{file} ({info.name})"
            dtypes[hf] = type_name
    split = _SHARD_NAME.match(path.name) if len(files) > 1 else None
    name = fields.get("general.name") or (split["stem"] if split else path.stem)
    notes = ["dequantised from GGUF to float32"]
    if mtp:
        notes.append(f"the {mtp} multi-token-prediction block(s) after the last layer (blk.{cfg['num_hidden_layers']}"
                     "...) not read: they draft tokens beside the model and write to no residual the heads read")
    if split:
        notes.append(f"read from the {split['count'].lstrip('0')} shards of a split GGUF file "
                     f"({split['stem']}-00001..{split['count']}-of-{split['count']}.gguf)")
    return Checkpoint(cfg, TensorStore(loaders, origin, dtypes, source=str(path)), str(path), str(name), notes,
                      attention_sources=attention)


def _t5(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> None:
    """T5's encoder config, under T5's own keys, from what llama.cpp's converter writes: the width, the encoder's
    block count, the head count and width (``attention.key_length``; the value width must be the same), the RMS
    norm's epsilon, the buckets of the bias by offset (``attention.relative_buckets_count``); the farthest distance
    of the buckets is not written: llama.cpp takes 128, as T5's configs do. A bias table in a block after the first
    is UMT5's (each layer its own): read as UMT5."""
    if any(re.fullmatch(r"enc\.blk\.([1-9]\d*)\.attn_rel_b\.weight", i.name) for i in infos):
        cfg["model_type"] = "umt5"
    head = cfg.pop("head_dim", None)
    value = fields.get(f"{arch}.attention.value_length", head)
    if head is None or value != head:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.key_length' = {head!r} and "
                                    f"'{arch}.attention.value_length' = {value!r}: T5's heads need one width, stated")
    rms, other = cfg.pop("rms_norm_eps", None), cfg.pop("layer_norm_epsilon", None)  # (the converter writes both)
    eps = other if rms is None else rms
    cfg.update(d_model=cfg.pop("hidden_size"), num_layers=cfg.pop("num_hidden_layers"),
               num_heads=cfg.pop("num_attention_heads"), d_kv=head, relative_attention_max_distance=128)
    cfg.pop("num_key_value_heads", None)
    if eps is not None:
        cfg["layer_norm_epsilon"] = eps
    buckets = fields.get(f"{arch}.attention.relative_buckets_count")
    if buckets is not None:
        cfg["relative_attention_num_buckets"] = buckets


def _t5_runs(path: Path, cfg: dict, fields: dict, names: set[str]) -> None:
    """Refuse a T5 file that transformers' GGUF reader would build as another model: it builds every one with a
    gated MLP (T5 v1.1's, Flan-T5's), and as UMT5 (a bias table in every layer) exactly when the file's name says
    umt5."""
    why = None
    if not any(n.endswith("ffn_gate.weight") for n in names):
        why = "it builds every T5 file with a gated MLP (is_gated_act), and this one's MLPs have no gate (T5 v1.0's)"
    elif (cfg["model_type"] == "umt5") != ("umt5" in str(fields.get("general.name") or "").lower()):
        why = ("it builds a T5 file as UMT5 (a bias table in every layer) exactly when general.name says umt5, and "
               f"this one's name ({fields.get('general.name')!r}) and bias tables disagree")
    if why:
        raise UnsupportedModelError(f"{path}: transformers' GGUF reader would run another model than this file's: "
                                    f"{why}; the data-based commands cannot run it (the weight-only ones read it; for "
                                    "data, use the model's HuggingFace folder)")


def _modern_bert(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> None:
    """ModernBERT's config from what llama.cpp's converter writes and its rules (``modern-bert``): the local
    layers' window ``sliding_window`` (HF's ``local_attention``: ``|i - j| <= w / 2``, llama.cpp's symmetric
    window), every ``sliding_window_pattern``-th layer from 0 global (default 3) or one flag per layer (true:
    local), no local layers without a window; the global layers' rotary base ``rope.freq_base`` (required:
    llama.cpp would take 10 000 where HF's default is 160 000), the local layers' ``rope.freq_base_swa`` (else the
    global one, as llama.cpp takes it); biases where the file holds them."""
    n, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    for key, same in (("num_key_value_heads", heads), ("head_dim", cfg["hidden_size"] // heads)):
        if cfg.get(key, same) != same:
            raise UnsupportedModelError(f"{path}: GGUF metadata gives {key} = {cfg[key]}, not {same}: ModernBERT's "
                                        "heads are d_model / n_heads wide, one key/value head each")
        cfg.pop(key, None)
    if "rope_theta" not in cfg:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.freq_base' is missing: llama.cpp would turn "
                                    "the global layers at 10000, ModernBERT at its own base (160000 by default)")
    cfg["global_rope_theta"] = cfg.pop("rope_theta")
    cfg["local_rope_theta"] = cfg.pop("rope_local_base_freq", cfg["global_rope_theta"])
    window = cfg.pop("sliding_window", None)
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    cfg.pop("sliding_window_pattern", None)
    cfg.pop("layer_types", None)  # (both read here, as llama.cpp reads them for ModernBERT)
    if not window:  # llama.cpp: no local layers
        cfg["layer_types"] = ["full_attention"] * n
    elif isinstance(pattern, list):
        if len(pattern) != n:
            raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' has {len(pattern)} "
                            f"flags for {n} layers")
        cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif pattern is not None:
        cfg["global_attn_every_n_layers"] = pattern
    if window:
        cfg["local_attention"] = window
    names = {i.name for i in infos}
    cfg["norm_bias"] = "token_embd_norm.bias" in names
    cfg["attention_bias"] = any(name.endswith("attn_qkv.bias") for name in names)


#: the tensors in which llama.cpp's converter writes LongRoPE's per-pair factors, and the HF rope settings they are
_LONGROPE = {"rope_factors_short.weight": "short_factor", "rope_factors_long.weight": "long_factor"}


def _longrope(path: Path, arch: str, cfg: dict, fields: dict, located: list[tuple]) -> None:
    """Phi-3's LongRoPE as llama.cpp's converter writes it (no ``rope.scaling.type``): the per-pair factors
    as the tensors ``rope_factors_short`` and ``_long``, the original context as
    ``rope.scaling.original_context_length`` (the context as ``context_length``), and the attention
    factor it computes from the context ratio ``s`` as ``rope.scaling.attn_factor``: read into ``cfg``
    as the HF config it came from (``rope_scaling`` longrope with both factor lists,
    ``original_max_position_embeddings``, ``max_position_embeddings``); a stated attention factor
    other than ``sqrt(1 + ln s / ln n)`` (1 for ``s <= 1``), the one transformers computes, is refused."""
    found = {info.name: (info, buf, file) for info, buf, file in located if info.name.startswith("rope_factors_")}
    if set(found) != set(_LONGROPE):
        raise UnsupportedModelError(f"{path}: rotary factors {', '.join(sorted(found))}: LongRoPE needs both "
                                    f"{' and '.join(_LONGROPE)}, and no other")
    key = f"{arch}.rope.scaling.original_context_length"
    n, ctx = fields.get(key), fields.get(f"{arch}.context_length")
    if not isinstance(n, int) or n <= 1 or not isinstance(ctx, int) or ctx <= 0:
        raise UnsupportedModelError(f"{path}: LongRoPE factors without a usable '{key}' ({n!r}) and context length "
                                    f"({ctx!r})")
    out: dict = {"rope_type": "longrope"}
    for name, setting in _LONGROPE.items():
        info, buf, file = found[name]
        try:
            out[setting] = [float(x) for x in dequantize(buf, info).reshape(-1).tolist()]
        except (ValueError, NotImplementedError, RuntimeError) as e:
            raise LoadError(f"{file}: tensor '{name}' cannot be read ({one_line(e)})") from e
    cfg.update(rope_scaling=out, original_max_position_embeddings=n, max_position_embeddings=ctx)
    scale = ctx / n
    want = math.sqrt(1 + math.log(scale) / math.log(n)) if scale > 1 else 1.0
    stated = fields.get(f"{arch}.rope.scaling.attn_factor")
    if stated is not None and abs(float(stated) - want) > 1e-6 * want:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.scaling.attn_factor' = {float(stated):.6g} is "
                                    f"not LongRoPE's sqrt(1 + ln {scale:g} / ln {n}) = {want:.6g} (context {ctx} over "
                                    f"the original {n}), which compscope and transformers compute")


#: llama.cpp's YaRN keys (``{arch}.rope.scaling.*``) -> the HF rope setting each states
_YARN = {"factor": "factor", "original_context_length": "original_max_position_embeddings",
         "yarn_beta_fast": "beta_fast", "yarn_beta_slow": "beta_slow"}
#: llama.cpp's YaRN keys whose values here change nothing (its defaults: the ramp on, no extra factor; whether the
#: model was trained so), and what they are: another value is refused
_YARN_NEUTRAL = {"yarn_ext_factor": ((-1.0, 1.0), "the ramp's weight; -1: llama.cpp's default, 1 for YaRN"),
                 "yarn_attn_factor": ((1.0,), "a factor on YaRN's own attention factor"),
                 "attn_factor": ((1.0,), "a factor on the rotary map's attention factor"),
                 "yarn_log_multiplier": ((0.0,), "DeepSeek's scaling of YaRN's attention factor"),
                 "finetuned": ((True, False), "whether the model was trained so")}
#: gpt-oss's ``rope.scaling.*`` keys -> the YaRN setting transformers' GGUF reader makes of each (it reads these
#: alone, and passes no other on)
_GPT_OSS_YARN = {"factor": "factor", "original_context_length": "original_max_position_embeddings",
                 "attention_factor": "attention_factor", "beta_fast": "beta_fast", "beta_slow": "beta_slow"}


#: Ministral 3's: the log multiplier is the HF config's ``mscale_all_dim`` (its converter writes it), read by
#: :func:`_mistral3`
_MISTRAL3_YARN_NEUTRAL = {**_YARN_NEUTRAL, "yarn_log_multiplier": ((1.0,), "Ministral 3's mscale_all_dim: with any "
                                                                          "value but 1 llama.cpp's runtimes disagree "
                                                                          "on YaRN's attention factor")}
#: the architectures whose YaRN keys are read otherwise: (keys read, keys neutral at the values given)
_YARN_READ = {"gpt-oss": (_GPT_OSS_YARN, {}), "mistral3": (_YARN, _MISTRAL3_YARN_NEUTRAL)}


def _yarn(path: Path, arch: str, fields: dict) -> dict:
    """A file's YaRN (``rope.scaling.type`` yarn) as the HF setting its converter read it from: the
    factor, the original context (``original_context_length``) and the ramp's bounds (``yarn_beta_fast``,
    ``yarn_beta_slow``; HF's defaults 32 and 1 where absent); the attention factor YaRN's own,
    ``0.1 ln(factor) + 1``, as llama.cpp and transformers both compute it, and the ramp's bounds rounded
    outwards, as both do. gpt-oss's as transformers' GGUF reader builds them from its own keys
    (:data:`_GPT_OSS_YARN`). A key that would change it (:data:`_YARN_NEUTRAL` at another value, or one
    compscope does not know) is refused by name."""
    keys, neutral = _YARN_READ.get(arch, (_YARN, _YARN_NEUTRAL))
    prefix = f"{arch}.rope.scaling."
    out: dict = {"rope_type": "yarn"}
    for key, value in fields.items():
        short = key[len(prefix):] if key.startswith(prefix) else None
        if short is None or short == "type" or (short in neutral and value in neutral[short][0]):
            continue
        if short not in keys:
            what = (neutral[short][1] if short in neutral
                    else f"not a YaRN setting compscope reads; it reads {', '.join(prefix + k for k in keys)}")
            raise UnsupportedModelError(f"{path}: GGUF metadata '{key}' = {value!r} ({what}) is not supported with "
                                        f"YaRN; read the model's HuggingFace folder, whose YaRN compscope reads")
        out[keys[short]] = value
    for need in ("factor", "original_max_position_embeddings"):
        if need not in out:
            key = prefix + next(k for k, v in keys.items() if v == need)
            raise UnsupportedModelError(f"{path}: rope scaling 'yarn' without GGUF metadata '{key}'")
    return out


def _mistral3(path: Path, arch: str, cfg: dict, fields: dict) -> None:
    """Ministral 3 as llama.cpp runs a ``mistral3`` file, into ``cfg`` as the HF config it was converted from:
    Llama's layers; YaRN's attention factor 1 (``mscale = mscale_all_dim = 1``: its graph divides the factor
    ``0.1 ln s + 1`` out again), stated by ``yarn_log_multiplier`` = 1, which the converter writes (any other
    value, or none, and llama.cpp's runtimes disagree: refused); Llama 4's query temperature
    ``1 + β ln(1 + ⌊i / n⌋)`` at position i (``attention.temperature_scale`` β, HF's ``llama_4_scaling_beta``;
    n YaRN's original context, else the trained context, as llama.cpp takes it)."""
    scaling = cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type") == "yarn":
        key = f"{arch}.rope.scaling.yarn_log_multiplier"
        if key not in fields:
            raise UnsupportedModelError(f"{path}: a Ministral 3 file with YaRN and no GGUF metadata '{key}' (the "
                                        "converter writes mscale_all_dim there, 1): llama.cpp's runtimes disagree on "
                                        "YaRN's attention factor without it")
        scaling.update(mscale=1.0, mscale_all_dim=1.0)
    elif scaling:
        raise UnsupportedModelError(f"{path}: a Ministral 3 file with rope scaling {scaling.get('rope_type')!r}; "
                                    "compscope reads its YaRN, or none")
    beta = fields.get(f"{arch}.attention.temperature_scale")
    if not beta:
        return
    if not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta < 0:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.temperature_scale' = {beta!r} is not a finite "
                        "number >= 0")
    n = fields.get(f"{arch}.rope.scaling.original_context_length") or fields.get(f"{arch}.context_length")
    if not isinstance(n, int) or n <= 0:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.temperature_scale' = {beta!r} without "
                                    "an original context or a context length, from which llama.cpp floors positions")
    length = fields.get(f"{arch}.attention.temperature_length")
    if length is not None and length != n:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.temperature_length' = {length!r}, and "
                                    f"llama.cpp floors Ministral 3's positions by its original context {n} instead")
    cfg["rope_scaling"] = {**(scaling or {"rope_type": "default"}), "llama_4_scaling_beta": float(beta),
                           "original_max_position_embeddings": n}


def _jamba_period(path: Path, arch: str, n_layers: int, ssm_layers: set[int]) -> dict:
    """Jamba's ``attn_layer_offset`` and ``attn_layer_period`` from the layers that attend (those not in
    ``ssm_layers``): layer ``i`` attends where ``i % period == offset``, as transformers builds it; a set of
    attention layers no period and offset give is refused."""
    layers = [i for i in range(n_layers) if i not in ssm_layers]
    offset = layers[0] if layers else 0
    period = layers[1] - layers[0] if len(layers) > 1 else n_layers
    if not layers or offset >= period or layers != [i for i in range(n_layers) if i % period == offset]:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' puts attention on layers "
                                    f"{layers}, which no attn_layer_period and attn_layer_offset give (transformers "
                                    "builds an attention layer every period-th layer from the offset)")
    return {"attn_layer_offset": offset, "attn_layer_period": period}


def _mtp_blocks(path: Path, arch: str, fields: dict) -> int:
    """How many multi-token-prediction blocks a GLM-4.5 file (``glm4moe``) holds after its last layer
    (``nextn_predict_layers``, counted in ``block_count``); 0 for other architectures."""
    if arch != "glm4moe":
        return 0
    n = fields.get(f"{arch}.nextn_predict_layers", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LoadError(f"{path}: GGUF metadata '{arch}.nextn_predict_layers' = {n!r} is not a count")
    return n


def _hybrid_layers(path: Path, arch: str, cfg: dict, fields: dict, counts: list) -> tuple[int, set[int]]:
    """A hybrid's layers from its per-layer K/V head counts (llama.cpp writes 0 for a Mamba layer):
    ``cfg`` gets ``layer_types``, the one K/V head count of its attention layers and whether they
    rotate (``rope.scaling.finetuned``, llama.cpp's flag for it: Bamba's do, Granite 4's do not);
    returns that count and the Mamba layers."""
    heads, ssm = _kv_heads_per_layer(path, arch, cfg, counts, "a Mamba layer")
    rotates = fields.get(f"{arch}.rope.scaling.finetuned")
    if not isinstance(rotates, bool):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.scaling.finetuned' (llama.cpp's flag for whether "
                                    "this hybrid's attention rotates) is missing")
    cfg.update(layer_types=["mamba" if i in ssm else "attention" for i in range(len(counts))],
               position_embedding_type="rope" if rotates else "nope")
    return heads, ssm


def _gemma4(path: Path, arch: str, cfg: dict, fields: dict, infos: list, n_kv) -> int:
    """Gemma 4's config from what llama.cpp writes (its ``Gemma4Model`` conversion): the sliding
    layers flagged per layer, their head width ``key_length_swa`` and the global layers'
    ``key_length``, a K/V head count per layer, the global layers' values from their keys where they
    have no ``attn_v`` (``attention_k_eq_v``), two rotary bases, layers sharing K/V, per-layer
    embeddings. The global layers written as a ``per_layer_config``; the rotary map of each layer type
    over its whole width (``rope_freqs``, which llama.cpp applies to the global layers alone, turns
    the proportional map's other pairs by nothing: the family divides by it). Returns the local
    layers' K/V head count."""
    def need(key: str):
        v = fields.get(f"{arch}.{key}")
        if v is None:
            raise LoadError(f"{path}: GGUF metadata '{arch}.{key}' is missing")
        return v

    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if not isinstance(pattern, list) or len(pattern) != cfg["num_hidden_layers"]:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' = {pattern!r} is not one flag "
                        f"per layer ({cfg['num_hidden_layers']})")
    types = cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    local, wide = need("attention.key_length_swa"), need("attention.key_length")
    counts = n_kv if isinstance(n_kv, list) else [n_kv] * len(types)
    kv = {t: sorted({k for k, u in zip(counts, types) if u == t}) for t in set(types)}
    if len(counts) != len(types) or any(len(v) != 1 for v in kv.values()):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {n_kv!r} is not one K/V "
                                    f"head count for the sliding layers and one for the global layers ({len(types)})")
    for key, width in (("rope.dimension_count_swa", local), ("rope.dimension_count", wide)):
        if fields.get(f"{arch}.{key}", width) != width:
            raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.{key}' = {fields[f'{arch}.{key}']} differs from "
                                        f"the head width {width} of those layers: not read")
    values = {int(m.group(1)) for i in infos if (m := re.match(r"blk\.(\d+)\.attn_v\.weight$", i.name))}
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    if values & set(full) and set(full) - values:
        raise UnsupportedModelError(f"{path}: some global layers have attn_v and some do not; Gemma 4's either all "
                                    "have their own value projection or take the keys' (attention_k_eq_v)")
    g = kv.get("full_attention", kv.get("sliding_attention"))[0]
    cfg.update(head_dim=local, attention_k_eq_v=bool(full) and not values & set(full),
               num_key_value_heads=kv.get("sliding_attention", [g])[0],
               per_layer_config={str(i): {"head_dim": wide, "num_key_value_heads": g} for i in full},
               rope_parameters={"sliding_attention": {"rope_type": "default",
                                                      "rope_theta": cfg.pop("rope_local_base_freq", 10000.0)},
                                "full_attention": {"rope_type": "default", "rope_theta": need("rope.freq_base")}})
    cfg.pop("rope_theta", None)
    for key, hf in (("attention.shared_kv_layers", "num_kv_shared_layers"),
                    ("embedding_length_per_layer_input", "hidden_size_per_layer_input")):
        if fields.get(f"{arch}.{key}") is not None:
            cfg[hf] = fields[f"{arch}.{key}"]
    return cfg["num_key_value_heads"]


def _kv_heads_per_layer(path: Path, arch: str, cfg: dict, counts: list, other: str) -> tuple[int, set[int]]:
    """A hybrid's one K/V head count (set in ``cfg``) and its layers without attention, from the
    count per layer llama.cpp writes (0 on ``other``, a layer without attention)."""
    heads = sorted({k for k in counts if k})
    if len(counts) != cfg["num_hidden_layers"] or len(heads) != 1 or not all(isinstance(k, int) for k in counts):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {counts!r} is not one "
                                    f"K/V head count, or 0 on {other}, per layer ({cfg['num_hidden_layers']})")
    cfg["num_key_value_heads"] = heads[0]
    return heads[0], {i for i, k in enumerate(counts) if not k}


#: llama.cpp's per-block tensors that enter attention start with one of these (``attn_rot_embd``,
#: a stored copy of the rotary frequencies that the metadata determines, is the exception); and
#: these top-level ones change what attention reads (embeddings, their norm, rotary frequencies)
_ATTENTION_BLOCK = ("attn_", "post_attention_norm")
_ATTENTION_TOP = ("position_embd.", "token_embd_norm.", "token_types.", "rope_freqs.")


def _enters_attention(block_name: str | None, name: str) -> bool:
    """Whether the GGUF tensor ``name`` (``block_name``: its name inside ``blk.N.``, None at the
    top level) is one the model's attention depends on, so that leaving it unread is an error."""
    if block_name is None:
        return name.startswith(_ATTENTION_TOP)
    return block_name.startswith(_ATTENTION_BLOCK) and not block_name.startswith("attn_rot_embd")


#: HF model types whose rotary base and width transformers' GGUF reader does not take from the file
#: (it keeps its config defaults: base 10 000; StableLM a quarter of each head; Nemotron its width, half
#: of each head; Phi-3 the whole head, where Phi-4-mini rotates three quarters), and the share of each head the
#: family rotates where the file does not say
_ROTARY_DROPPED = {"stablelm": 1.0, "starcoder2": 1.0, "nemotron": 0.5, "phi3": 1.0}
#: HF config keys that transformers' GGUF reader does not take from a file of these model types
#: (Nemotron: the LayerNorm epsilon, which it looks for under another key than llama.cpp writes, and
#: the head width; Gemma 2: the logit scale's scalar and the soft cap; Qwen3: the head width, whose default
#: is d_model / n_heads), so that it keeps its defaults: handed back where the file states them
_KEYS_DROPPED = {"nemotron": ("norm_eps", "head_dim"),
                 "gemma2": ("query_pre_attn_scalar", "attn_logit_softcapping"),  # (27B's scalar: d_model / heads)
                 "qwen3": ("head_dim",)}  # (Qwen3-0.6B's, 4B's and 32B's heads are not d_model / n_heads wide)
#: GGUF architectures transformers' GGUF reader lists and does not run as the file states them: why
_NOT_RUN = {"gemma4": ("transformers' GGUF reader takes one K/V head count (the per-layer counts llama.cpp writes "
                       "fail its config) and leaves the layer output scales out (layer_scalar stays 1)")}


#: architectures whose rope scaling (YaRN, linear) transformers' GGUF reader drops and takes back as one setting for
#: every layer (Gemma's global-layer scaling, a setting per layer type, is not handed back)
_SCALING_HANDED_BACK = ("llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3")


def runtime_config(path: str | Path, rope_parameters: bool = True) -> dict:
    """Config settings to give ``transformers`` when it runs the GGUF file at ``path``: what the
    file says and transformers' GGUF reader drops (the rotary base and width of StableLM,
    StarCoder2 and Nemotron files, Nemotron's norm epsilon and head width, a YaRN or linear rope scaling
    but gpt-oss's, Phi-3's LongRoPE and its original context, Gemma 3's layer types, logit scale and
    rotary settings), so that the model that runs is the one compscope read; as one
    ``rope_parameters`` (transformers 5) or, ``rope_parameters=False``, as ``rope_theta`` and
    (StableLM) ``partial_rotary_factor`` (transformers 4). A file transformers would build as
    another model (a Falcon with K/V groups), or not at all (a split file; an architecture its
    GGUF reader does not read: OLMo, Phi-2, GPT-NeoX, StarCoder 1, MPT, BERT, Qwen2-VL, Gemma 1, Granite and its
    hybrids, Cohere, SmolLM3), is refused."""
    files, fields, located = _open_shards(Path(path))  # the headers only: no tensor is read
    _DIVIDES[_stamp(files[0])] = any(info.name == "rope_freqs.weight" for info, _, _ in located)
    if len(files) > 1:
        raise UnsupportedModelError(
            f"{path}: a GGUF file split in {len(files)} shards, and transformers runs a model from one GGUF file: the "
            f"data-based commands cannot run it (the weight-only ones read every shard); merge the shards into one "
            f"file (llama.cpp: llama-gguf-split --merge {files[0].name} merged.gguf) to run it on data")
    cfg = _checkpoint(files, fields, located).config
    arch = fields["general.architecture"]  # one _checkpoint reads
    reads = transformers_reads()
    if arch in _NOT_RUN:
        raise UnsupportedModelError(
            f"{path}: a GGUF file of architecture {arch!r}: {_NOT_RUN[arch]}, so the data-based commands cannot run it "
            "(the weight-only ones read it; for data, use the model's HuggingFace folder)")
    if reads is not None and arch not in reads:
        raise UnsupportedModelError(
            f"{path}: a GGUF file of architecture {arch!r}, which transformers' GGUF reader does not read (it reads "
            f"{', '.join(sorted(a for a in reads if a in _ARCHS))} among those compscope reads): the data-based commands "
            "cannot run it (the weight-only ones read it; for data, use the model's HuggingFace folder)")
    if arch in ("t5", "t5encoder"):
        _t5_runs(path, cfg, fields, {info.name for info, _, _ in located})
    if cfg["model_type"] == "falcon" and cfg["num_kv_heads"] > 1:
        raise UnsupportedModelError(
            f"{path}: transformers' GGUF reader builds every Falcon file as multi-query (one key/value head, as "
            f"Falcon-7B), and this one has {cfg['num_kv_heads']}: transformers cannot run it, so the data-based "
            "commands cannot either (the weight-only ones read it; for data, use the model's HuggingFace folder)")
    kind = cfg["model_type"]
    if arch == "gemma3":
        return _gemma3_runtime(path, cfg, rope_parameters)
    kept = {k: cfg[k] for k in _KEYS_DROPPED.get(kind, ()) if k in cfg}
    scaled = cfg.get("rope_scaling") if arch in _SCALING_HANDED_BACK else None  # (gpt-oss's: its reader takes it; a
    scaled = scaled if scaled and scaled.get("rope_type") in ("yarn", "linear", "longrope") else None  # per-layer-type
    if scaled and scaled["rope_type"] == "longrope":  # rope: not) Phi-3's original context, a config key of its own
        kept["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    if kind not in _ROTARY_DROPPED and scaled is None:
        return kept
    rope = {"rope_theta": float(cfg.get("rope_theta", 10000.0))}
    if kind in _ROTARY_DROPPED:
        rope["partial_rotary_factor"] = float(cfg.get("partial_rotary_factor", _ROTARY_DROPPED[kind]))
    if rope_parameters:
        return {"rope_parameters": {"rope_type": "default", **rope, **(scaled or {})}, **kept}
    if kind == "starcoder2":  # transformers 4's StarCoder2 rotates whole heads, and takes no share
        rope.pop("partial_rotary_factor")
    return {**rope, **({"rope_scaling": scaled} if scaled else {}), **kept}


def _gemma3_runtime(path: Path, cfg: dict, rope_parameters: bool) -> dict:
    """What transformers' GGUF reader leaves at Gemma 3's defaults and a file may state otherwise: the layer
    types (its pattern: every sixth global), the logit scale's ``query_pre_attn_scalar`` (256; the 27B model's is
    d_model / n_heads by llama.cpp's rule), the local layers' rotary base (10 000) and the global layers' rope
    scaling (the 4B model and up: linear, factor 8). As one ``rope_parameters`` per layer type (transformers 5),
    or ``rope_theta``, ``rope_local_base_freq`` and ``rope_scaling`` (transformers 4)."""
    from ..families.gemma import Gemma3

    types = Gemma3.layer_types(cfg, cfg["num_hidden_layers"], str(path))
    theta, local = float(cfg.get("rope_theta", 1_000_000.0)), float(cfg.get("rope_local_base_freq", 10000.0))
    scaling = cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type") != "linear":  # (the families refuse other types by name)
        raise UnsupportedModelError(f"{path}: Gemma 3 rope scaling {scaling.get('rope_type')!r} is not read")
    out = {"layer_types": types, "query_pre_attn_scalar": cfg["query_pre_attn_scalar"]}
    if rope_parameters:
        return {**out, "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": local},
                                           "full_attention": {"rope_type": "default", "rope_theta": theta,
                                                              **(scaling or {})}}}
    return {**out, "rope_theta": theta, "rope_local_base_freq": local, "rope_scaling": scaling or None}


#: per file (its :func:`_stamp`), whether it holds ``rope_freqs``: found as :func:`runtime_config` reads its header
_DIVIDES: dict[tuple, bool] = {}


def _stamp(path: Path) -> tuple:
    """A file as it is now: its resolved path, size and modification time."""
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def divides_frequencies(path: str | Path) -> bool:
    """Whether the GGUF file at ``path`` holds llama.cpp's rotary frequency divisors (``rope_freqs``: Llama 3.1's
    scaling), which transformers' GGUF reader leaves out: the running model's frequencies are then set to the
    ones compscope read (the runner's :func:`~compscope.data.runner.hf.from_files`). From the headers alone, as
    :func:`runtime_config` read them where it did (the file unchanged since), else read again."""
    path = Path(path)
    known = _DIVIDES.get(_stamp(path))
    if known is not None:
        return known
    _, _, located = _open_shards(path)
    return any(info.name == "rope_freqs.weight" for info, _, _ in located)


def transformers_reads() -> set[str] | None:
    """The GGUF architectures the installed ``transformers`` reads (as llama.cpp names them; not those
    of :data:`_NOT_RUN`, which it reads as another model), or None when it does not say where compscope
    looks (then transformers says so itself when asked)."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return None
    renamed = {"qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "gpt_oss": "gpt-oss",  # transformers' names of
               "minimax_m2": "minimax-m2"}  # llama.cpp's
    reads = {renamed.get(a, a) for a in GGUF_SUPPORTED_ARCHITECTURES} - set(_NOT_RUN)
    return reads | {"t5encoder"} if "t5" in reads else reads  # (it reads T5's encoder alone as t5)


def recognise(source: object) -> bool:
    """A ``.gguf`` file, or any file that starts with the magic ``GGUF``."""
    from . import existing_path

    path = existing_path(source)
    if path is None or not path.is_file():
        return False
    if path.suffix == ".gguf":
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError as e:
        raise LoadError(f"{path}: cannot be read ({one_line(e)})") from e


def read(source):
    from ..families import to_heads

    return to_heads(open_gguf(source))
