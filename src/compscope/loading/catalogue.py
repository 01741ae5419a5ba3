"""What compscope reads, and what it knows it does not.

Every family (``loading/families``) with the HuggingFace ``model_type`` values it takes and the
GGUF architectures read as it; the built-in names; and the architectures researchers ask for that
compscope refuses, each with the reason (:data:`NOT_READ`), which the error for such a model
states. ``compscope models`` prints this; ``docs/models.md`` is its Markdown form.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import one_line

_ENC_DEC = ("an encoder-decoder: the decoder's cross-attention reads the encoder's output, a second residual stream "
            "that no single set of writer and reader heads spans")
_NO_ATTENTION = "no attention heads: a recurrent or state-space model has none to compose"

#: model_type -> why compscope does not read it (the architectures researchers ask for)
NOT_READ: dict[str, str] = {
    "axk2": ("its input norm multiplies the normed residual by an input-dependent sigmoid gate on each dim (a gated "
             "RMSNorm), and its queries read the query latent both normed and raw, so no head reads the residual "
             "through one norm and one linear map"),
    "dots3_note_text": ("multi-head latent attention whose keys' shared rotated part passes an RMSNorm of its own, a "
                        "third per-token scale beside the latents' that compscope's form of the heads does not hold"),
    "glm5_next_text": ("hyper-connections: several residual streams that learned maps mix before and after each "
                       "sublayer, so there is no one residual stream that heads read and write (its attention: "
                       "multi-head latent attention without positions among Kimi Delta Attention layers)"),
    **dict.fromkeys(("mistral_large4", "mistral_large4_text"), (
        "multi-head latent attention whose later layers reuse an earlier layer's keys and values (kv_sharing_modes), "
        "so those heads' keys and values read the residual at another layer than their queries")),
    **dict.fromkeys(("hy_v4", "hy_v4_vl_text"), (
        "hyper-connections: hc_mult residual streams that learned maps mix before and after each sublayer, so there "
        "is no one residual stream that heads read and write (its attention: DeepSeek-V3.2's with a gate and sinks)")),
    "diffllama": ("differential attention: each output is one softmax pattern's minus λ times a second one's, then "
                  "RMS-normalised before W_O, so no head has one QK circuit and none's OV map is linear"),
    "reformer": ("locality-sensitive-hashing and chunked local attention, and a reversible residual kept as two "
                 "streams"),
    "xlnet": "two-stream attention whose logits add relative-position and segment terms",
    "rembert": ("its embeddings are narrower than the residual (input_embedding_size) and projected up to it after "
                "their LayerNorm, which no W_E and norm express"),
    "roc_bert": ("the residual starts as a projection of the word, shape and pronunciation embeddings concatenated, "
                 "no sum of a token column and a position column"),
    "paligemma": ("a prefix language model: its Gemma attends both ways over the image and the prompt and causally "
                  "after them, a mask set by each input's token types, which neither a causal nor a bidirectional "
                  "reading of its heads holds"),
    "colpali": ("ColPali: its vision-language model is PaliGemma, a prefix language model whose Gemma attends both "
                "ways over the image and the prompt and causally after them, a mask set by each input's token types, "
                "which neither a causal nor a bidirectional reading of its heads holds"),
    "deepseek_v4": ("the rotary map is applied to each head's output as well as to its queries and keys (the OV map "
                    "turns with position), and heads attend over compressed caches beside the sliding window"),
    **dict.fromkeys(("gemma3n", "gemma3n_text"), (
        "AltUp keeps several residual streams that learned predictions mix, and keys and values are shared across "
        "layers: there is no one residual stream that heads read and write")),
    **dict.fromkeys(("hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl_text"), (
        "its QK-norm comes after the rotary map, and the norm's per-dimension gains do not commute with the "
        "rotation, so the logit is no bilinear form of W_Q and W_K turned by the offset")),
    **dict.fromkeys(("roberta-prelayernorm", "flava", "flava_text_model"), (
        "a LayerNorm over the sum of token, position and token-type embeddings starts the residual, which pre-LN "
        "layers then read, so it is no sum of a token column and a position column")),
    "mbart": ("its encoder (and decoder): a LayerNorm over the sum of token and position embeddings starts the "
              "residual, which pre-LN layers then read, so it is no sum of a token column and a position column"),
    **dict.fromkeys(("whisper", "speecht5", "seamless_m4t", "seamless_m4t_v2", "speech_to_text", "moonshine",
                     "moonshine_streaming", "canary", "canary_decoder", "cohere_asr", "pop2piano",
                     "speech-encoder-decoder"), (
        _ENC_DEC + "; and its encoder reads speech (convolved features of the audio), not tokens")),
    **dict.fromkeys(("pix2struct", "nougat", "vision-encoder-decoder"),
                    _ENC_DEC + "; and its encoder reads image patches, not tokens"),
    "encoder-decoder": _ENC_DEC + " (a wrapper of two models, the decoder's layers given cross-attention)",
    "pix2struct_text_model": ("Pix2Struct's decoder: its cross-attention reads the image encoder's output, a second "
                              "residual stream that no single set of writer and reader heads spans"),
    "udop": _ENC_DEC + "; and its encoder reads words with their boxes and image patches as one sequence",
    "pegasus_x": _ENC_DEC + ("; and its encoder attends within staggered blocks beside global tokens of its own, not "
                             "to every token"),
    "t5gemma2_text": ("T5Gemma 2's text settings alone, which no model class builds: compscope reads T5Gemma 2's "
                      "encoder from a whole model's folder (t5gemma2) or the encoder's own (t5gemma2_encoder)"),
    "t5gemma2_decoder": ("T5Gemma 2's decoder: each head attends over its own earlier tokens and the encoder's output "
                         "in one softmax (merged self- and cross-attention), a second residual stream no single set of "
                         "writer and reader heads spans; compscope reads T5Gemma 2's encoder (t5gemma2)"),
    "rag": ("RAG: a question encoder (DPR) and a generator (BART or T5) in one folder; compscope reads each from a "
            "folder of its own: DPR's question encoder, and the generator's encoder"),
    **dict.fromkeys(("gemma4_assistant", "gemma4_unified_assistant"), (
        "a drafter for speculative decoding: its layers attend to the keys and values the target model computed "
        "(shared_kv_states), not to any its own heads write, and its input is a projection of the target's states")),
    "muse_glimmer_assistant": ("a drafter for speculative decoding (DFlash): its queries attend to keys and values "
                               "from a projection of hidden states the target model computed at several layers "
                               "(target_layer_ids), a second stream beside its own"),
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"), _NO_ATTENTION),
    **dict.fromkeys(("zamba", "zamba2"), (
        "its shared attention block reads the residual concatenated with the original embeddings, an input twice "
        "the model's width")),
    "minimax": "MiniMax-Text-01: lightning attention (linear, without softmax) on most layers",
    "bitnet": ("an RMSNorm on the attention's concatenated head outputs before the output projection "
               "(attn_sub_norm), so no head's OV map is linear"),
    "kosmos_2_text_model": ("Kosmos-2's language model: a LayerNorm on the attention's concatenated head outputs "
                            "before the output projection (inner_attn_ln, Magneto's sub-LN), so no head's OV map is "
                            "linear"),
    "dbrx": "q, k and v are clipped to [-clip_qkv, clip_qkv] after the projection, so no head's map is linear",
    "jetmoe": "mixture of attention heads: a router picks each token's query and output projections",
    "ergo": ("each sublayer's output enters the residual through a learned per-dimension gate that rescales the "
             "residual too (σ(w) times the output plus sqrt(1 + σ(w)) e^(−softplus(w)/2) times the residual), so what "
             "a head writes reaches a later head rescaled dimension by dimension at every sublayer between them, "
             "which no one W_O per head expresses"),
    "kolibri1_1": ("Kolibri 1.1: its indexed-attention layers reuse an earlier layer's keys and values "
                   "(kv_source_layers), so those heads' keys and values read the residual at another layer than their "
                   "queries, and attend to the keys an indexer selects, rounded to NVFP4"),
    "beam": ("its global layers scale each query by (1 + (i + 1) / 2048)^0.1 with its position i (scalable softmax), "
             "so no one logit scale holds at any position, and every residual addition rescales the residual"),
    "doge": ("a dynamic mask: each key's logit gets a bias computed from that token's values (dt_proj, softplus, "
             "exp), so the logits are no bilinear form of W_Q and W_K"),
    "zaya": ("compressed convolutional attention: queries and keys pass through convolutions over neighbouring "
             "tokens and values carry a recurrent state, so no head's W_Q, W_K or W_V is a map of one token's residual"),
    "albert": ("its embeddings are narrower than the residual (embedding_size) and projected up to it after their "
               "LayerNorm, which no W_E and norm express (its layers' weights, shared across depth, would be read)"),
    "dory": ("nGPT's layers: an L2 norm on the heads' concatenated outputs before the output projection, so no "
             "head's OV map is linear, and a residual kept on the unit sphere by interpolation, not addition"),
    "hrm_text": ("HRM-Text: two states, a fast and a slow one, that its two stacks of layers update in cycles, each "
                 "stack reading the sum of both, and every layer run several times: there is no one residual stream "
                 "that each head reads and writes once"),
    "inkling_text": ("short convolutions over neighbouring tokens on its keys and values, and logits that add a "
                     "relative-position term computed from the query (r_proj): no head's W_K or W_V is a map of one "
                     "token's residual"),
    "inkling2_text": ("Inkling's convolutions and relative-position logits, and each layer's input an attention over "
                      "the earlier blocks' outputs (block attention residuals), not one residual stream"),
    "neomme": ("exclusive self-attention: each head's output loses its component along the query token's own "
               "normalised value, so no head's OV map is linear"),
    "muse_spark_text": ("an RMS norm on each head's output before its gate and W_O (o_norm), and every layer's update "
                        "mixed into the residual with a learned weight per dimension on each (residual gates), which "
                        "rescales the residual the later heads read"),
    "qwen4_exp_text": ("hyper-connections: several residual streams (hc_count), which learned, input-dependent weights "
                       "mix into each layer's input and update, not one residual stream"),
    "diffusion_gemma_text": ("DiffusionGemma: its denoising decoder attends both ways over the keys and values its "
                             "encoder computed from the prompt beside its own, a second residual stream that no single "
                             "set of writer and reader heads spans"),
    "step3p5": ("Step 3.5 and 3.7's language model: its sliding layers have a query head count of their own "
                "(num_sliding_attention_heads), which compscope's canonical form (one head count) "
                "does not hold; its sparse variants pick key blocks per query with a learned indexer"),
    "xmod": ("X-MOD: RoBERTa's layers with a language adapter after every MLP, whose input is the residual "
             "renormalised inside the layer (by output.LayerNorm, as released, or adapter_layer_norm), then normalised "
             "again: three norms a layer, where a post-LN layer has two"),
    "cpmant": ("CPM-Ant: the model puts prompt_length learned prompt tokens before every sequence, in a segment of "
               "their own, and the bias on a logit is looked up by the pair's segments where they differ, by the "
               "offset's bucket where they are the same: the heads attend over a prefix the input does not hold"),
    "canine": ("CANINE: characters hashed into embeddings and downsampled by a strided convolution between a shallow "
               "local encoder and the deep stack, so no one residual stream holds every token at one resolution"),
    "perceiver": ("Perceiver IO: a fixed set of latents cross-attends to the inputs and then attends among itself, "
                  "so its self-attention heads read latents, not tokens"),
    "blt": ("Byte Latent Transformer: a local byte encoder, patches pooled into a global transformer by "
            "cross-attention and decoded back to bytes: streams at two resolutions, not one residual stream"),
    **dict.fromkeys(("blt_local_encoder", "blt_local_decoder", "blt_global_transformer", "blt_patcher"), (
        "a part of the Byte Latent Transformer (blt): a local byte encoder, patches pooled into a global transformer "
        "by cross-attention and decoded back to bytes, streams at two resolutions, not one residual stream")),
    "t5_gemma_module": ("T5Gemma's encoder or decoder settings alone, which no model class builds: compscope reads "
                        "T5Gemma's encoder from a whole model's folder (t5gemma)"),
    **dict.fromkeys(("inkling2_loop", "inkling2_loop_text"), (
        "Inkling 2's block attention residuals (each layer's input an attention over earlier blocks' outputs), and a "
        "span of its layers run several times (loop_num_passes) with learned gates between passes")),
    "fnet": "no attention heads: FNet mixes tokens by a Fourier transform",
    "funnel": ("Funnel Transformer: the sequence is pooled between blocks (a block's queries read a shortened "
               "sequence), and the logits add relative-position terms"),
    "nystromformer": ("the Nyström approximation of softmax attention (averages over landmark segments), not a "
                      "softmax over the keys"),
    "yoso": "attention approximated by locality-sensitive hashing (Bernoulli sampling), not a softmax over the keys",
    "mra": "a multi-resolution approximation of attention (block averages), not a softmax over every key",
    "convbert": ("mixed attention: part of each layer's heads are span-based dynamic convolutions (head_ratio) whose "
                 "kernels are computed from the input, not attention heads"),
    "minimax_m3_vl_text": ("MiniMax-M3's language model: its sparse layers (layer type minimax_m3_sparse) attend to "
                           "the key blocks a learned indexer picks for each query, not to every earlier key"),
    "mobilebert": ("MobileBERT: each layer's attention reads and writes a narrow bottleneck projection of the residual "
                   "(intra_bottleneck_size), which the layer projects back up after its MLPs, so no head writes to the "
                   "residual itself"),
    "trocr": ("TrOCR's decoder: its cross-attention reads an image encoder's output, a second residual stream that no "
              "single set of writer and reader heads spans"),
    "qwen3_omni_moe_talker_text": ("Qwen3-Omni's talker: its residual starts as an MLP's projection of the thinker's "
                                   "token embeddings or hidden states (text_projection, hidden_projection), with codec "
                                   "embeddings added on the positions it speaks, never one column of W_E per token of "
                                   "its own vocabulary (the audio codec's codes)"),
    "pp_formulanet_text": ("PP-FormulaNet's decoder: its cross-attention (encoder_attn) reads the vision encoder's "
                           "output, a second residual stream that no single set of writer and reader heads spans"),
    "musicgen": ("MusicGen's decoder: each position's residual starts as the sum of one token embedding per audio "
                 "codebook, which no one column of W_E per token expresses, and its cross-attention reads the text "
                 "encoder's output"),
    "musicgen_melody": ("MusicGen Melody's decoder: each position's residual starts as the sum of one token embedding "
                        "per audio codebook, which no one column of W_E per token expresses"),
    **dict.fromkeys(("musicgen_decoder", "musicgen_melody_decoder"), (
        "MusicGen's decoder: each position's residual starts as the sum of one token embedding per audio codebook, "
        "which no one column of W_E per token expresses")),
    **dict.fromkeys(("timesfm", "timesfm2_5"), (
        "TimesFM, a forecaster over time series: each position embeds a patch of the series' values through an MLP, "
        "not a token through a column of W_E")),
    **dict.fromkeys(("pi0", "pi05"), (
        "π0 and π0.5, robot policies: a PaliGemma attends both ways over the image and the prompt, and an action "
        "expert with weights of its own joins that attention over the action positions, so no one set of heads "
        "reads one residual stream")),
    **dict.fromkeys(("clvp", "clvp_decoder"), (
        "CLVP (Tortoise TTS): its decoder's first positions hold conditioning embeddings computed from a speaker's "
        "mel spectrograms and the text (ClvpConditioningEncoder), not token embeddings, and its text and speech "
        "encoders turn their values by the rotary map (clvp_encoder)")),
    "clvp_encoder": ("CLVP's text and speech encoders (Tortoise TTS): each head turns its values, as well as its "
                     "queries and keys, by the rotary map at their token's position (on the first rotary dims), so "
                     "what it writes from a token depends on that token's position, which no one W_V per head "
                     "expresses"),
    "vits": ("VITS (and MMS-TTS): its text encoder's heads add learned relative-position embeddings to their values "
             "as well as to their keys (emb_rel_v), so what a head writes depends on the offset, not on W_OV alone"),
    **dict.fromkeys(("fastspeech2_conformer", "fastspeech2_conformer_with_hifigan"), (
        "FastSpeech2 Conformer: each encoder layer holds a convolution module that mixes neighbouring positions "
        "beside its attention, and the attention's logits add Transformer-XL's relative-position terms "
        "(linear_pos, pos_bias_u, pos_bias_v)")),
    "kyutai_speech_to_text": ("Kyutai's speech-to-text: each position's residual starts as the sum of its text "
                              "token's embedding and one embedding per audio codebook, which no one column of W_E per "
                              "token expresses"),
    "moshi_depth": ("Moshi's depth transformer: its query, key and value projections differ by position (one per "
                    "codebook it predicts: MoshiFlexibleLinear), so no head has one W_Q, W_K, W_V"),
    "csm_depth_decoder_model": ("Sesame CSM's depth decoder: each position's token is embedded by a table of its "
                                "position's codebook, and its first position holds the backbone's last state, not a "
                                "token's embedding"),
    "dia_decoder": ("Dia's decoder: each position's residual starts as the sum of one embedding per audio channel "
                    "(codebook), which no one column of W_E per token expresses, and its cross-attention reads the "
                    "text encoder's output; compscope reads Dia's text encoder (dia, dia_encoder)"),
    "qwen2_5_omni_talker": ("Qwen2.5-Omni's talker: its residual starts as a projection (thinker_to_talker_proj) of "
                            "the thinker's embeddings or hidden states with codec embeddings added, never one column "
                            "of W_E per token of its own vocabulary"),
    "bark": ("Bark: three GPT models in turn; its semantic model's first positions each sum the embeddings of a text "
             "token and of a speaker-prompt token, and its fine model's of every audio codebook, which no one column "
             "of W_E per token expresses"),
    "csm": ("Sesame's CSM: each audio frame's position starts its residual as the sum of one embedding per audio "
            "codebook, which no one column of W_E per token expresses (text positions read a table of their own)"),
    "moshi": ("Moshi: each position's residual starts as its text token's embedding plus one embedding per audio "
              "codebook of both speakers' streams, which no one column of W_E per token expresses"),
    "imagegpt": ("ImageGPT: its unembedding has no row for the start token (512 colour clusters out, 513 tokens in), "
                 "and compscope pairs each token's column of W_E with its row of W_U"),
    "decision_transformer": ("a GPT-2 over returns, states and actions, each embedded by a linear map of its own "
                             "values and interleaved: no token embedding W_E to read"),
    "lilt": ("LiLT: a text stream and a layout stream whose attention logits are added to each other's in every "
             "layer, so each head's logit reads two residual streams"),
    **dict.fromkeys(("layoutlmv2", "layoutxlm"), (
        "every input carries image tokens from its visual backbone (Detectron2's ResNet), so it runs on no words "
        "alone, and its logits add biases by 1-D and 2-D offsets")),
    **dict.fromkeys(("blip", "blip_text_model"), (
        "BLIP's text transformer: causal or attending both ways by an argument of each forward pass (is_decoder: its "
        "captioning decoder's causal, its retrieval and question encoders' both ways), which no config states, and "
        "each layer's cross-attention reads the image encoder's output, a second residual stream")),
    "wavtokenizer": ("WavTokenizer, an audio codec: its decoder turns codes into audio through convolutions "
                     "(residual blocks, ConvNeXt blocks) and one single-head attention block over time among them, "
                     "not a stack of attention layers writing to one residual stream"),
    "lxmert": ("a language and a vision encoder joined by cross-modality layers in which each stream attends to "
               "the other: no one residual stream after the language layers"),
    "vilt": "every input is text and image patches in one sequence: it runs on no words alone",
    "idefics": ("IDEFICS (the first): every forward pass takes images (pixel values or their embeddings), whose "
                "features gated cross-attention blocks add to the residual before every cross_layer_interval-th "
                "layer: it runs on no words alone"),
    "laguna": ("a query head count per layer (num_attention_heads_per_layer) and a softplus gate on each head's "
               "output, which compscope's canonical form (one head count, a sigmoid gate) does not hold"),
    **dict.fromkeys(("voxtral_realtime", "voxtral_realtime_text"), (
        "Voxtral Realtime: each position's residual starts as a token embedding plus the audio encoder's frame "
        "embedding for that step (the two streams summed, not interleaved), and every MLP reads a time condition, so "
        "the language model never runs on tokens alone")),
    "sam3_lite_text_text_model": ("EfficientSAM3's text encoder: its learned positions are resampled (bilinear "
                                  "interpolation) to each sequence's length, so a position's embedding depends on how "
                                  "long the sequence is, and its first and last layers are convolutional RepMixer "
                                  "blocks, not attention"),
    "videoprism_text_model": ("VideoPrism's text encoder: a learned class embedding is appended after the tokens, a "
                              "position no token's column of W_E gives (the text embedding is its final state), and "
                              "transformers masks the sequence causally only when given an attention mask"),
}

#: GGUF architecture (llama.cpp's name) -> the model_type of :data:`NOT_READ` it is
GGUF_NOT_READ: dict[str, str] = {
    "gemma3n": "gemma3n_text",
    "wavtokenizer-dec": "wavtokenizer",
    "hunyuan-dense": "hunyuan_v1_dense", "hunyuan-moe": "hunyuan_v1_moe",
    "mamba": "mamba", "mamba2": "mamba2", "rwkv6": "rwkv", "rwkv7": "rwkv",
    "bitnet": "bitnet",
    "dbrx": "dbrx",
    "step35": "step3p5", "hunyuan_vl": "hunyuan_vl_text",
    "rwkv6qwen2": "rwkv", "arwkv7": "rwkv",  # (Qwen2's and others' layers with RWKV time mixing for attention)
    "minimax-01": "minimax", "minimax-m3": "minimax_m3_vl_text", "laguna": "laguna", "dots3note": "dots3_note_text",
    "deepseek4": "deepseek_v4", "gemma4-assistant": "gemma4_assistant",
    "dflash": "muse_glimmer_assistant",  # (llama.cpp's DFlash drafters: Muse Glimmer's is one)
    "maincoder": "hunyuan_v1_dense",  # (its graph: a per-head RMSNorm with gains per dimension after the rotary map)
}


#: GGUF architecture (llama.cpp's name) of no model type above -> why compscope does not read it
GGUF_ARCH_NOT_READ: dict[str, str] = {
    "clip": ("a multimodal projector file (mmproj: a vision or audio encoder and its projection) that llama.cpp pairs "
             "with a language model's file; compscope reads the language model's file"),
    "neo-bert": ("NeoBERT: llama.cpp splits its fused qkv into all the queries, then all the keys, then all the "
                 "values, while NeoBERT's own code reads each head's rows as [q_h | k_h | v_h]: the heads llama.cpp "
                 "runs from such a file are not NeoBERT's"),
    "eagle3": ("an EAGLE-3 draft model: its layer reads the target model's hidden states from three of its layers "
               "(concatenated, projected by fc) beside the token embeddings, not a residual stream of token "
               "embeddings alone"),
    "kimi-k3": ("Kimi-K3: each layer reads a per-token softmax mixture of banked earlier residual states and the "
                "current one, weighted by scores of their own values (cross-layer residual attention), not the "
                "residual every writer adds to"),
    "graniteswitch": ("Granite Switch: its projections switch between LoRA adapters, chosen per token by activation "
                      "tokens and a router, so a head's weights depend on the sequence, not on the model alone"),
    "openelm": ("OpenELM: a query and K/V head count of its own on every layer (layer-wise scaling), which "
                "compscope's canonical form (one query head count) does not hold"),
}


def why_not(model_type: object) -> str | None:
    """Why compscope does not read ``model_type`` (:data:`NOT_READ`), or None where it is not listed."""
    return NOT_READ.get(model_type) if isinstance(model_type, str) else None


#: GGUF architectures of models compscope reads from their HuggingFace folders, whose GGUF layout it does not map
GGUF_LAYOUT_NOT_READ: dict[str, str] = {
    "gptj": ("compscope reads this model from its HuggingFace folder; llama.cpp names the architecture but builds no "
             "model of it (its loader refuses such a file), so no layout of its tensors is defined to read")}


def why_not_gguf(arch: object) -> str | None:
    """Why compscope does not read GGUF architecture ``arch`` (:data:`GGUF_NOT_READ`,
    :data:`GGUF_LAYOUT_NOT_READ`, :data:`GGUF_ARCH_NOT_READ`), or None."""
    if not isinstance(arch, str):
        return None
    if arch in GGUF_NOT_READ:
        return NOT_READ[GGUF_NOT_READ[arch]]
    return GGUF_LAYOUT_NOT_READ.get(arch) or GGUF_ARCH_NOT_READ.get(arch)


@dataclass(frozen=True)
class FamilyEntry:
    """One family: the ``model_type`` values it reads, the GGUF architectures read as it (and which
    of those transformers' GGUF reader runs, so that the data-based commands can), and what it is."""

    family: str
    model_types: tuple[str, ...]
    gguf: tuple[str, ...]
    gguf_on_data: tuple[str, ...]
    about: str
    part: str = "language model"  # what it is inside a wrapper (:attr:`Family.part`)
    on_data: bool = True  # whether its folders run on data (:attr:`Family.runs_on_data`)


def families() -> list[FamilyEntry]:
    """Every family compscope reads, by name."""
    from .families import families as registered, family_for
    from .formats import gguf

    on_data = gguf.transformers_reads()
    by_family: dict[str, list[str]] = {}
    for arch, model_type in [*gguf.architectures().items(), *((a, t) for a, (t, _) in gguf.also_read_as().items())]:
        by_family.setdefault(family_for({"model_type": model_type}, "GGUF").name, []).append(arch)
    out = []
    for name, cls in sorted(registered().items()):
        archs = tuple(sorted(by_family.get(name, ())))
        out.append(FamilyEntry(name, tuple(cls.model_types), archs,
                               tuple(a for a in archs if on_data is not None and a in on_data), cls.about, cls.part,
                               cls.runs_on_data))
    return out


def lookup(name: str, only: str | None = None) -> tuple[bool, str]:
    """``(read, one line)`` for a ``model_type`` or GGUF architecture ``name``: the family that reads
    it as either, or the one that reads its language model (a vision-language model's
    ``text_config``, as transformers builds it), or why it is not read, or that compscope does not
    know it. ``only``: ``'model_type'`` or ``'gguf'``, to look it up as that alone."""
    from .families import family_for
    from .formats import gguf

    entries = families()
    said = []
    for e in entries:
        if name in e.model_types and only != "gguf":
            said.append(f"model_type {name!r}, read by the {e.family} family ({e.about}"
                        + ("" if e.on_data else "; weights only: transformers has no model of it") + ")")
        if name in e.gguf and only != "model_type":
            unread = gguf.why_not_run(name) or "transformers' GGUF reader does not read it"
            runs = "also on data" if name in e.gguf_on_data else f"weights only: {unread}"
            model_type, which = gguf.also_read_as().get(name, (None, ""))
            files = f" {which}" if model_type is not None and family_for(
                {"model_type": model_type}, "GGUF").name == e.family else ""
            said.append(f"GGUF architecture {name!r}{files}, read by the {e.family} family ({runs})")
    if not any(s.startswith("model_type") for s in said) and only != "gguf":
        inner = _language_model_type(name)
        family = next((e for e in entries if inner is not None and inner in e.model_types), None)
        if family is not None and why_not(name) is None:
            rest = _THE_REST.get(inner, "a vision tower, ...")
            said.append(f"model_type {name!r}: its {family.part}, {inner}, read by the {family.family} family "
                        f"({family.about}); the rest ({rest}) not")
    gguf_reason = why_not_gguf(name) if only != "model_type" else None
    if said and gguf_reason is not None:  # (a model_type read whose GGUF files are not: GPT-J's, Jais 2's)
        said.append(f"GGUF architecture {name!r}, not read: {gguf_reason}")
    if said:
        return True, f"{name}: " + "; ".join(said)
    reason = (why_not(name) if only != "gguf" else None) or (why_not_gguf(name) if only != "model_type" else None)
    if reason is not None:
        return False, f"{name}: not read: {reason}"
    inner = _language_model_type(name) if only != "gguf" else None
    if inner is not None and why_not(inner) is not None:
        return False, f"{name}: not read: its language model, {inner}: {why_not(inner)}"
    model_type = _model_type_of_class(name) if only is None else None
    config_class = _transformers_config_class(name) if only != "gguf" else None
    if config_class is not None and model_type in (None, name):  # (transformers maps EvollaModel, a class's name,
        # to Evolla's config as well: answered as its model type, below)
        return False, (f"{name}: not read: a model_type transformers knows ({config_class}) that no compscope family "
                       "reads, nor any language model inside it (`compscope models` lists those it reads)")
    if model_type is not None:  # a model class's name (BartForConditionalGeneration): its model type's answer
        read, line = lookup(model_type, only="model_type")
        line = line.removeprefix(f"{model_type}: ")
        said = line.removeprefix(f"model_type {model_type!r}")
        return read, f"{name}: a model class of model_type {model_type!r}" + (said if said != line else f"; {line}")
    known = list(dict.fromkeys([t for e in entries for t in (*e.model_types, *e.gguf)]
                               + [*NOT_READ, *GGUF_NOT_READ, *GGUF_LAYOUT_NOT_READ, *GGUF_ARCH_NOT_READ]))
    close = difflib.get_close_matches(name, known, n=3) if isinstance(name, str) else []
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return False, (f"{name or repr(name)}: not a model_type or GGUF architecture compscope knows{hint} (`compscope "
                   "models` lists those it reads)")


def lookup_hub(name: str, cache_dir: str | os.PathLike | None = None) -> tuple[bool, str]:
    """:func:`lookup` for a HuggingFace hub id ``owner/name`` (``@revision`` optional) by the model_type its
    ``config.json`` states: read from the local cache, or, where ``HF_HUB_OFFLINE`` is not set, that file alone
    downloaded (no weights). The line starts with the id."""
    from ..errors import LoadError
    from .formats import hub

    model = hub.parse(name)
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return False, f"{name}: looking up a hub id needs 'huggingface_hub' (pip install huggingface_hub)"
    kw = dict(repo_id=model.repo_id, filename="config.json", revision=model.revision, cache_dir=cache_dir)
    try:
        path = hf_hub_download(**kw, local_files_only=True)
    except Exception:  # noqa: BLE001  (not cached: huggingface_hub raises several kinds)
        if hub.offline():
            return False, (f"{name}: its config.json is not in the HuggingFace cache {hub.cache_folder(cache_dir)} "
                           "(HF_HUB_OFFLINE is set, so nothing is downloaded)")
        try:
            path = hf_hub_download(**kw)
        except Exception as e:  # noqa: BLE001
            return False, f"{name}: its config.json cannot be read: {hub.download_failure(e, model)}"
    try:
        model_type = _model_type_in(Path(path))
    except LoadError as e:
        return False, f"{name}: {e}"
    if not isinstance(model_type, str):
        return False, f"{name}: its config.json's model_type is {model_type!r}"
    read, line = lookup(model_type, only="model_type")
    return read, f"{name}: {line}"


def _model_type_in(config: Path) -> object:
    """The model_type a ``config.json`` states (whatever its value); a LoadError naming the file where it is no JSON
    object."""
    from ..errors import LoadError

    try:
        return json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError) as e:
        raise LoadError(f"{config}: not a JSON object ({one_line(e)})") from e


def _model_type_of_class(name: object) -> str | None:
    """The model_type whose model class is called ``name`` (``BartForConditionalGeneration``): by transformers' auto
    mappings (their names, no model imported), else by the classes a family lists; None for any other name."""
    if not isinstance(name, str) or not name[:1].isupper():
        return None
    try:
        from transformers.models.auto import modeling_auto
    except ImportError:
        modeling_auto = None
    found: list[str] = []
    for attr in dir(modeling_auto) if modeling_auto is not None else ():
        mapping = getattr(modeling_auto, attr)
        if attr.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            found += [model_type for model_type, cls in mapping.items()
                      if cls == name or (isinstance(cls, (tuple, list)) and name in cls)]
    from .families import families as registered

    if found:  # (a class several model types run, LlamaForCausalLM: the one whose config class it is named after,
        # and of those one compscope reads: llama, not code_llama)
        read = {t for fam in registered().values() for t in fam.model_types}
        own = [t for t in found if name.startswith(str(_transformers_config_class(t)).removesuffix("Config"))]
        return next(iter([t for t in own if t in read] or own or found))
    return next((fam.model_types[0] for fam in registered().values() if name in fam.architectures), None)


def lookup_files(path: str | os.PathLike) -> tuple[bool, str]:
    """:func:`lookup` for the model at ``path``: a folder's ``config.json`` ``model_type``, or a GGUF
    file's architecture (its header only is read); the line starts with the path."""
    from ..errors import LoadError
    from .formats import gguf

    path = Path(path)
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise LoadError(f"{path}: no config.json, so no model_type to look up")
        model_type = _model_type_in(config)
        what = "" if isinstance(model_type, str) else f"config.json's model_type is {model_type!r}"
    else:
        model_type = gguf.architecture(path)
        what = "" if isinstance(model_type, str) else "no general.architecture in the GGUF header"
    if what:
        return False, f"{path}: {what}"
    read, line = lookup(model_type, only="model_type" if path.is_dir() else "gguf")
    return read, f"{path}: {line}"


def _transformers_config_class(model_type: object) -> str | None:
    """The name of the config class transformers has for ``model_type`` (its config mapping, read
    without importing any model), or None: without transformers, or for a type it does not know."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return None
    found = CONFIG_MAPPING_NAMES.get(model_type) if isinstance(model_type, str) else None
    return found if isinstance(found, str) else None


#: what else a model holds beside the language model compscope reads in it, where that is no vision-language model's
_THE_REST = {"esmc": "EsmFold2's folding trunk and its structure and confidence heads"}


def _language_model_type(model_type: str) -> str | None:
    """The ``model_type`` of the language model a loaded folder of ``model_type`` is read by, where
    it is another (a vision-language model's): its config's ``text_config`` (Qwen-Omni: its
    thinker's), or, beside a ``vision_config``, the text config transformers builds from its
    top-level keys, as :func:`~compscope.loading.families.language_model` reads a folder (an
    encoder-decoder's ``decoder`` is none). None without transformers, for a type it does not
    know, or one that is its own language model."""
    from .families import nested_text_config

    try:
        from transformers import AutoConfig
        from transformers.utils import logging

        was = logging.get_verbosity()
        logging.set_verbosity_error()  # (a bare config's warnings say nothing of the answer)
        try:
            text, _ = nested_text_config(AutoConfig.for_model(model_type).to_dict())
        finally:
            logging.set_verbosity(was)
    except Exception:  # noqa: BLE001  (no transformers, or a type it does not know or cannot build bare)
        return None
    inner = text.get("model_type") if isinstance(text, dict) else None
    return inner if isinstance(inner, str) and inner != model_type else None


def not_read_by_reason() -> list[tuple[tuple[str, ...], str]]:
    """:data:`NOT_READ` grouped: the model types that share a reason, with it, in first-listed order."""
    groups: dict[str, list[str]] = {}
    for model_type, reason in NOT_READ.items():
        groups.setdefault(reason, []).append(model_type)
    return [(tuple(types), reason) for reason, types in groups.items()]


def _transformers_said() -> str:
    """Which transformers said what its GGUF reader reads: its version, or that it is not installed."""
    try:
        import transformers
    except ImportError:
        return "transformers not installed: none"
    return f"transformers {transformers.__version__}"


def markdown() -> str:
    """The catalogue as a Markdown page (``docs/models.md`` is this, written by ``compscope models --markdown``)."""
    from .builtin import BUILTINS

    entries = families()
    weights_only = [e.family for e in entries if not e.on_data and e.model_types]  # (of folders: not GGUF's alone)
    lines = ["# Models compscope reads", "",
             "Written by `compscope models --markdown`; `compscope models NAME` answers for one `model_type` or GGUF "
             "architecture. A vision-language model is read where its language model's `model_type` is (its "
             "`text_config`); the vision tower is not read.", "",
             "## Built-in names", "", "| name | what | package |", "|---|---|---|"]
    for name, b in BUILTINS.items():
        lines.append(f"| `{name}` | {b.what} | {'shipped' if b.dist == 'compscope' else f'`{b.how}`'} |")
    n_types = sum(len(e.model_types) for e in entries)
    n_gguf = len({a for e in entries for a in e.gguf})  # (an architecture some of whose files another reads: once)
    lines += ["", f"## Families: {len(entries)}, reading {n_types} model types and {n_gguf} GGUF architectures", "",
              "GGUF architectures in **bold** are also run on data (`validate`, `intervene`, labels) from the file, "
              f"by transformers' GGUF reader ({_transformers_said()}); the others are read for the weight-only "
              "commands (for data, use the model's HuggingFace folder). Every HuggingFace folder of a family runs on "
              "data" + (f", but those of {' and '.join(weights_only)}, which transformers has no model of"
                        if weights_only else "") + ". A family with no `model_type` reads GGUF files alone: models "
              "whose own code transformers does not hold, as llama.cpp runs them.", "",
              "| family | models | `model_type` | GGUF |", "|---|---|---|---|"]
    for e in entries:
        gguf_cell = ", ".join(f"**{a}**" if a in e.gguf_on_data else a for a in e.gguf)
        lines.append(f"| {e.family} | {e.about} | {', '.join(e.model_types)} | {gguf_cell} |")
    lines += ["", "## Known, and not read", "",
              "Each is refused with its reason; a GGUF file of one of them too (`"
              + "`, `".join(GGUF_NOT_READ) + "`).", "", "| `model_type` | why not |", "|---|---|"]
    for types, reason in not_read_by_reason():
        lines.append(f"| {', '.join(types)} | {reason} |")
    layouts: dict[str, list[str]] = {}
    for arch, reason in GGUF_LAYOUT_NOT_READ.items():
        layouts.setdefault(reason, []).append(arch)
    lines += ["", "GGUF files of models read from their HuggingFace folders, not read:", ""]
    lines += [f"- `{'`, `'.join(archs)}`: {reason}" for reason, archs in layouts.items()]
    lines += ["", "Other GGUF architectures, not read:", ""]
    lines += [f"- `{arch}`: {reason}" for arch, reason in GGUF_ARCH_NOT_READ.items()]
    return "\n".join(lines) + "\n"


def text(width: int = 100) -> str:
    """The catalogue for a terminal: the built-in names (installed or how to install), every family
    with what it reads, and the model types known and not read."""
    import importlib.util
    import textwrap

    from .builtin import BUILTINS

    out = ["Built-in names (any command's MODEL):"]
    wide = max(len(b.what) for _, b in BUILTINS.items())
    for name, b in BUILTINS.items():
        there = b.dist == "compscope" or importlib.util.find_spec(b.module) is not None
        out.append(f"  {name:<13} {b.what:<{wide}}  {'installed' if there else b.how}")
    entries = families()
    n_types, n_gguf = sum(len(e.model_types) for e in entries), len({a for e in entries for a in e.gguf})
    out += ["", *textwrap.wrap(f"{len(entries)} families read {n_types} model types (a HuggingFace config's "
                               f"model_type) and {n_gguf} GGUF architectures (*: also run on data from the file, by "
                               f"{_transformers_said()}):", width)]
    column = max(15, *(len(e.family) + 2 for e in entries))  # (the longest family name, and two spaces)
    for e in entries:
        out.append(f"  {e.family:<{column}}{e.about}")
        reads = "; ".join([*(["model_type " + " ".join(e.model_types)] if e.model_types else []),
                           *(["GGUF " + " ".join(a + ("*" if a in e.gguf_on_data else "") for a in e.gguf)]
                             if e.gguf else [])])
        out += textwrap.wrap(reads, width, initial_indent=" " * (column + 2), subsequent_indent=" " * (column + 2))
    known = ", ".join(t for types, _ in not_read_by_reason() for t in types)
    archs = ", ".join(dict.fromkeys([*GGUF_NOT_READ, *GGUF_LAYOUT_NOT_READ, *GGUF_ARCH_NOT_READ]))
    out += ["", *textwrap.wrap(f"Known and not read, each refused with its reason (compscope models NAME says it): "
                               f"{known}; GGUF architectures: {archs}", width, subsequent_indent="  ")]
    return "\n".join(out)
