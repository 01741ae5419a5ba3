"""llama.cpp's tensor names mapped back to the HF names each family reads: per architecture, its block
tensors (``blk.N.``), its top-level ones, the names whose tensors llama.cpp stores transposed, and the fused
query-key-value rows it regrouped (with the function that puts them back in the model's own order)."""

from __future__ import annotations

import torch

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
#: the first Qwen's, ChatGLM's and Ling 2.0's blocks: one fused ``attn_qkv`` (and bias), rows [q heads | k heads |
#: v heads], split
_FUSED_QKV_BLOCK = {**_BLOCK, **{f"attn_qkv.{p}": tuple(f"self_attn.{x}_proj.{p}" for x in "qkv")
                                 for p in ("weight", "bias")}}
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


def falcon_block(two_norms: bool) -> dict:
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


#: Nemotron-H files map back to NVIDIA's names (its family reads them): one norm before each block's mixer
_NEMOTRON_H_BLOCK = {"attn_norm.weight": "norm.weight",
                     **{f"attn_{x}.weight": f"mixer.{x}_proj.weight" for x in "qkv"},
                     "attn_output.weight": "mixer.o_proj.weight"}
_NEMOTRON_H_TOP = {"token_embd.weight": "backbone.embeddings.weight", "output_norm.weight": "backbone.norm_f.weight",
                   "output.weight": "lm_head.weight"}

#: multi-head latent attention (llama.cpp's ``deepseek2``, ``mistral4``, ``deepseek32``, ``glm-dsa``, ``kimi-linear``,
#: ``minicpm3``, ``plm``, ``bailingmoe3``)
#: under HF's names; the key/value up-projection that the converter split into ``attn_k_b`` and ``attn_v_b``
#: (DeepSeek's) is joined back by :func:`joined_kv_b`
_LATENT_BLOCK = {**{k: v for k, v in _BLOCK.items() if not k.startswith(("attn_k.", "attn_v.", "attn_qkv."))},
                    "attn_q_a.weight": "self_attn.q_a_proj.weight",
                    "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
                    "attn_q_b.weight": "self_attn.q_b_proj.weight",
                    "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
                    "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
                    "attn_kv_b.weight": "self_attn.kv_b_proj.weight"}

def joined_kv_b(k_b: torch.Tensor, v_b: torch.Tensor) -> torch.Tensor:
    """HF's ``kv_b_proj`` ``(head × (nope + v), rank)``, rows ``[k_nope_h | v_h]`` per head, from llama.cpp's split:
    ``attn_k_b`` ``(head, rank, nope)`` (each head's key rows transposed) and ``attn_v_b`` ``(head, v, rank)``."""
    if k_b.ndim != 3 or v_b.ndim != 3 or k_b.shape[0] != v_b.shape[0] or k_b.shape[1] != v_b.shape[2]:
        raise ValueError(f"attn_k_b {tuple(k_b.shape)} and attn_v_b {tuple(v_b.shape)} are not (head, rank, nope) and "
                         "(head, v, rank) of one head count and rank")
    return torch.cat([k_b.transpose(1, 2), v_b], 1).reshape(-1, k_b.shape[1])


#: architecture -> {HF name in a layer: (the block tensors it is joined from, the function that joins them)}
JOINED = dict.fromkeys(("deepseek2", "mistral4", "deepseek32", "glm-dsa", "kimi-linear", "bailingmoe3"), {
    "self_attn.kv_b_proj.weight": (("attn_k_b.weight", "attn_v_b.weight"), joined_kv_b)})


#: architecture -> (block tensor names, block prefix, top-level names, names whose rows and columns
#: llama.cpp swapped, (fused names whose rows it regrouped, the function that puts them back:
#: ``(w, H, G, d_head) -> w``)); every other architecture uses the Llama-like names. A block name
#: mapped to a tuple of HF names is a fused tensor whose rows split into them (query, key, value heads).
LAYOUTS = {"gpt2": (_GPT2_BLOCK, "transformer.h.{i}.", _GPT2_TOP, ("attn.c_attn.weight", "attn.c_proj.weight"), ((), None)),
            "starcoder": (_GPT2_BLOCK, "transformer.h.{i}.", _GPT2_TOP, (), ((), None)),
            "jais": (_GPT2_BLOCK, "transformer.h.{i}.", _GPT2_TOP, ("attn.c_attn.weight", "attn.c_proj.weight"),
                     ((), None)),
            "phi2": (_PHI2_BLOCK, "model.layers.{i}.", _PHI2_TOP, (), ((), None)),
            "gptneox": (_NEOX_BLOCK, "gpt_neox.layers.{i}.", _NEOX_TOP, (),
                        (("attention.query_key_value.weight", "attention.query_key_value.bias"), _neox_per_head)),
            "bloom": (_BLOOM_BLOCK, "transformer.h.{i}.", _BLOOM_TOP, (),
                      (("self_attention.query_key_value.weight", "self_attention.query_key_value.bias"), _neox_per_head)),
            "mpt": (_MPT_BLOCK, "transformer.blocks.{i}.", _MPT_TOP, (), ((), None)),
            **dict.fromkeys(("bert", "jina-bert-v2"), (_BERT_BLOCK, "encoder.layer.{i}.", _BERT_TOP, (), ((), None))),
            "nomic-bert": (_NOMIC_BLOCK, "encoder.layers.{i}.", _NOMIC_TOP, (), ((), None)),
            "modern-bert": (_MODERNBERT_BLOCK, "layers.{i}.", _MODERNBERT_TOP, (), ((), None)),
            **dict.fromkeys(("jina-bert-v3", "nomic-bert-moe"), (_JINA_BLOCK, "encoder.layers.{i}.", _JINA_TOP, (),
                                                                 ((), None))),
            **dict.fromkeys(("t5", "t5encoder"), (_T5_BLOCK, "encoder.block.{i}.", _T5_TOP, (), ((), None))),
            **dict.fromkeys(("lfm2", "lfm2moe"), (_LFM2_BLOCK, "model.layers.{i}.", _LFM2_TOP, (), ((), None))),
            "glm4": ({**_BLOCK, "post_attention_norm.weight": "post_self_attn_layernorm.weight"}, "model.layers.{i}.",
                     _TOP, (), ((), None)),
            "apertus": ({**_BLOCK, "attn_norm.weight": "attention_layernorm.weight"}, "model.layers.{i}.", _TOP, (),
                        ((), None)),
            **dict.fromkeys(("jamba", "falcon-h1"), (
                _BLOCK, "model.layers.{i}.", {**_TOP, "output_norm.weight": "model.final_layernorm.weight"}, (),
                ((), None))),
            "chameleon": ({**_BLOCK, "attn_q_norm.bias": "self_attn.q_norm.bias", "attn_k_norm.bias": "self_attn.k_norm.bias"},
                          "model.layers.{i}.", _TOP, (), ((), None)),
            **dict.fromkeys(("nemotron_h", "nemotron_h_moe"), (_NEMOTRON_H_BLOCK, "backbone.layers.{i}.", _NEMOTRON_H_TOP,
                                                               (), ((), None))),
            "phimoe": (_BLOCK, "model.layers.{i}.", {**_TOP, "output.bias": "lm_head.bias"}, (), ((), None)),
            "grok": ({**_BLOCK, "attn_output_norm.weight": "post_attention_layernorm.weight"}, "model.layers.{i}.",
                     _TOP, (), ((), None)),
            "talkie": ({**_BLOCK, "attn_output.scale": "self_attn.o_proj.scale"}, "model.layers.{i}.", _TOP, (),
                       ((), None)),
            **dict.fromkeys(("qwen", "chatglm", "bailingmoe2", "codeshell", "cogvlm"), (
                _FUSED_QKV_BLOCK, "model.layers.{i}.", _TOP, (), ((), None))),
            **dict.fromkeys(("afmoe", "muse-glimmer"), ({**_BLOCK, "attn_gate.weight": "self_attn.gate_proj.weight"},
                                                        "model.layers.{i}.", _TOP, (), ((), None))),
            "gemma4": ({**_BLOCK, "layer_output_scale.weight": "layer_scalar"}, "model.layers.{i}.", _TOP, (), ((), None)),
            **dict.fromkeys(("deepseek2", "mistral4", "deepseek32", "glm-dsa", "kimi-linear", "minicpm3",
                             "plm"), (
                _LATENT_BLOCK, "model.layers.{i}.", _TOP, (), ((), None))),
            "bailingmoe3": ({**_LATENT_BLOCK, "attn_gate.weight": "self_attn.g_proj.weight"}, "model.layers.{i}.", _TOP,
                            (), ((), None)),
            "falcon": (falcon_block(two_norms=False), "transformer.h.{i}.", _FALCON_TOP, (),
                       (("self_attention.query_key_value.weight", "self_attention.query_key_value.bias"), _falcon_grouped))}
LLAMA_LAYOUT = (_BLOCK, "model.layers.{i}.", _TOP, (), ((), None))


#: llama.cpp's per-block tensors that enter attention start with one of these (``attn_rot_embd``,
#: a stored copy of the rotary frequencies that the metadata determines, is the exception); and
#: these top-level ones change what attention reads (embeddings, their norm, rotary frequencies)
_ATTENTION_BLOCK = ("attn_", "post_attention_norm")
_ATTENTION_TOP = ("position_embd.", "token_embd_norm.", "token_types.", "rope_freqs.")


def enters_attention(block_name: str | None, name: str) -> bool:
    """Whether the GGUF tensor ``name`` (``block_name``: its name inside ``blk.N.``, None at the
    top level) is one the model's attention depends on, so that leaving it unread is an error."""
    if block_name is None:
        return name.startswith(_ATTENTION_TOP)
    return block_name.startswith(_ATTENTION_BLOCK) and not block_name.startswith("attn_rot_embd")


def layout(arch: str, infos: list) -> tuple:
    """``(block names, block prefix, top-level names, transposed names, (regrouped names, regrouping), block
    names not in the attention)`` of architecture ``arch``, whose file holds tensors ``infos``."""
    block_names, block_prefix, top_names, transposed, regrouping = LAYOUTS.get(arch, LLAMA_LAYOUT)
    not_attention: tuple[str, ...] = ()
    if arch in ("gpt-oss", "qwen3next", "qwen35", "qwen35moe"):  # its post-attention norm is the MLP's input norm:
        # not in the attention
        not_attention = ("post_attention_norm.weight",)
    # post-LN: the LayerNorm after the attention acts on the residual, not inside the attention
    if arch in ("bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v3", "jina-bert-v2"):
        not_attention = ("attn_output_norm.weight", "attn_output_norm.bias")
    if arch == "falcon" and any(i.name.endswith("attn_norm_2.weight") for i in infos):
        # attn_norm_2 is the attention's LayerNorm, attn_norm the MLP's
        block_names, not_attention = falcon_block(two_norms=True), ("attn_norm.weight", "attn_norm.bias")
    return block_names, block_prefix, top_names, transposed, regrouping, not_attention
