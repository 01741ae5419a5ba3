"""A GGUF file's metadata as the HF config its family reads: the architecture's ``model_type``, the keys
renamed (``_CONFIG_KEYS``, and per architecture ``_RENAMED_KEYS`` and ``_ARCH_KEYS``), partial rotary,
rope scaling (:mod:`.rope_scaling`), sliding layers, and each architecture's own rules (:mod:`.rules`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...gguf_file import SkippedStrings
from ....errors import LoadError, UnsupportedModelError
from . import rope_scaling, rules

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

#: architectures whose remote-code models llama.cpp runs with its Llama graph (:func:`.rules.llama_graph`)
_LLAMA_GRAPHS = ("internlm2", "xverse", "deepseek", "arctic", "bailingmoe", "baichuan", "nanbeige")

#: GGUF architecture -> (HF model_type, rows permuted for rotary, norms stored as 1 + w)
ARCHS = {
    "llama": ("llama", True, False),
    "qwen2": ("qwen2", False, False),
    "qwen2moe": ("qwen2_moe", False, False),  # Qwen2's attention (q/k/v biases); the experts are MLP
    "qwen2vl": ("qwen2_vl_text", False, False),  # Qwen2-VL's and Qwen2.5-VL's language model: Qwen2's, mrope sections
    "qwen3vl": ("qwen3_vl_text", False, False),  # Qwen3-VL's language model: Qwen3's, interleaved mrope sections
    "qwen3vlmoe": ("qwen3_vl_moe_text", False, False),  # (and DeepStack, which adds image features only)
    "qwen3tts": ("qwen3_tts_talker", False, False),  # Qwen3-TTS's talker: Qwen3-VL's graph, a head over codec tokens
    "qwen3": ("qwen3", False, False),
    "qwen3moe": ("qwen3_moe", False, False),
    "gemma": ("gemma", False, True),
    "gemma2": ("gemma2", False, True),
    "gemma3": ("gemma3_text", False, True),
    "gemma-embedding": ("gemma3_text", False, True),  # EmbeddingGemma: Gemma 3's layers attending both ways (_gemma)
    "gemma4": ("gemma4_text", False, False),  # norms stored as they are; per-layer head widths and counts (rules.gemma4)
    "phi3": ("phi3", False, False),  # one fused attn_qkv, rows [q heads | k heads | v heads] as HF's qkv_proj
    "olmo": ("olmo", True, False),  # norms without parameters: no norm tensors
    "olmo2": ("olmo2", False, False),  # OLMo-2 and OLMo-3 (whose sliding layers the pattern flags)
    "olmoe": ("olmoe", False, False),
    "gpt2": ("gpt2", False, False),  # HF's GPT-2 names (names._GPT2_BLOCK), Conv1D weights transposed back
    "phi2": ("phi", False, False),  # Phi-1/1.5/2: HF's phi names (names._PHI2_BLOCK), partial rotary in halves
    "gptneox": ("gpt_neox", False, False),  # GPT-NeoX/Pythia: HF's names (names._NEOX_BLOCK), fused qkv regrouped per head
    "stablelm": ("stablelm", False, False),  # Llama's names with LayerNorm biases; partial rotary in halves
    "starcoder2": ("starcoder2", False, False),  # Llama's names with LayerNorm and output-projection biases
    "falcon": ("falcon", False, False),  # HF's falcon names (falcon_block), fused qkv regrouped into K/V groups
    "jais": ("jais_gguf", False, False),  # Jais (the first; remote code): GPT-2's names without positions, ALiBi at
    # the maximum bias the file states, logits at 1/d_head, muP's scales folded into token_embd and output
    "starcoder": ("gpt_bigcode", False, False),  # StarCoder 1 (GPT-BigCode): GPT-2's names, nn.Linear weights as stored
    "bloom": ("bloom", False, False),  # HF's bloom names (names._BLOOM_BLOCK), fused qkv regrouped per head as GPT-NeoX's
    "mpt": ("mpt", False, False),  # HF's mpt names (names._MPT_BLOCK), the fused Wqkv as stored; ALiBi's maximum in attn_config
    "gpt-oss": ("gpt_oss", False, False),  # Llama's names, a sink logit per head; YaRN as transformers reads it
    "granite": ("granite", True, False),  # Llama's layout (llama.cpp converts it as a Llama) and four scalars
    "granitemoe": ("granitemoe", True, False),  # (_ARCH_KEYS); the experts, shared one included, are MLP
    "llama4": ("llama4_text", False, False),  # Llama 4: rows as HF's (both rotate interleaved pairs); llama.cpp's rules
    "smollm3": ("smollm3", True, False),  # a Llama to llama.cpp; its layers without rotary are not stored:
    # every fourth, llama.cpp's rule and transformers' default interval (the family's)
    "granitehybrid": ("granitemoehybrid", True, False),  # Granite 4's and Bamba's Mamba hybrids (rules.hybrid_layers)
    "minimax-m2": ("minimax_m2", False, False),  # Llama's names; QK norms over a layer's heads, rotary on part of each
    "lfm2": ("lfm2", False, False),  # HF's names under llama.cpp's (names._LFM2_BLOCK); K/V heads 0 on a convolution layer
    "lfm2moe": ("lfm2_moe", False, False),  # LFM2-MoE: LFM2's layers and names, MoE MLPs
    "eurobert": ("eurobert", False, False),  # EuroBERT, jina-embeddings-v5: Llama's names, rows as stored, both ways
    "nomic-bert": ("nomic_bert", False, False),  # nomic-embed-text v1/v1.5: its files' own names (names._NOMIC_BLOCK)
    "modern-bert": ("modernbert", False, False),  # ModernBERT: HF's names (names._MODERNBERT_BLOCK), llama.cpp's rules
    "nomic-bert-moe": ("jina_embeddings_v3", False, False),  # nomic-embed-text v2 MoE: BERT's post-LN layers with
    # rotary and biased attention, jina-embeddings-v3's (its experts are MLP), under the same names (names._JINA_BLOCK)
    "jina-bert-v3": ("jina_embeddings_v3", False, False),  # jina-embeddings-v3: its released names (names._JINA_BLOCK)
    "jina-bert-v2": ("jina_bert_v2_gguf", False, False),  # jina-embeddings-v2 (remote code): BERT's names without a
    # position table, ALiBi both ways at maximum bias 8 (llama.cpp's); its code models' QK norms refused (rules)
    "bert": ("bert", False, False),  # BERT encoders (and RoBERTa's kin: llama.cpp cuts their position table to row 0)
    "nemotron": ("nemotron", False, True),  # Llama's names; llama.cpp stores LayerNorm1P's gains 1 + w, biases beside
    "command-r": ("cohere", False, False),  # Llama's names, rows as HF's (interleaved rotary, llama.cpp's own kind);
    "cohere2": ("cohere2", False, False),
    "granite_swa": ("granite_swa", True, False),  # Granite SWA (and its MoE sibling): Granite's rows and scalars, a
    # sink per head, windows by the per-layer flags, rotary on the layers attention.rope_pattern marks (rules.granite_swa)
    "muse-glimmer": ("muse_glimmer_text", True, True),  # Muse Glimmer's language model: rows permuted as a Llama's,
    # its layer norms stored 1 + w (the final norm as is), the QK gains and the rest by llama.cpp's rules
    # (rules.muse_glimmer)
    "hy_v3": ("hy_v3", False, False),  # HY-V3 (Tencent Hy3): Qwen3's rows and QK norms, q/k/v biases where the file
    # holds them; the experts are MLP, the prediction block after the last layer left out
    "mellum": ("mellum", False, False),  # Mellum (JetBrains): Qwen3's rows and QK norms, its layers and rotary by
    # llama.cpp's rules (rules.mellum); the experts are MLP
    "cohere2moe": ("cohere2_moe", False, False),  # Cohere 2 MoE: Cohere 2's rows and logit scale, RMS or LayerNorms by
    # the epsilon stated, its layers and rotary by llama.cpp's rules (rules.cohere2moe); the experts are MLP  # LayerNorms without bias, the logit scale (_ARCH_KEYS), Command R+'s QK norms
    "mistral3": ("ministral3", True, False),  # Ministral 3: a Llama to llama.cpp, its YaRN and query temperature
    "arcee": ("arcee", True, False),  # Arcee's AFM: a Llama to llama.cpp (its converter's LlamaModel: rows permuted)
    "seed_oss": ("seed_oss", False, False),  # Seed-OSS: Llama's names, rows as HF's; its bias switches from the tensors
    "ernie4_5": ("ernie4_5", False, False),  # ERNIE 4.5: rows as HF's (both rotate interleaved pairs); use_bias from
    "ernie4_5-moe": ("ernie4_5_moe", False, False),  # the tensors; the MoE's experts are MLP
    "dots1": ("dots1", False, False),  # dots.llm1: Qwen3's attention (rows as HF's, QK norms), MoE MLPs
    "glm4": ("glm4", False, False),  # GLM-4-0414: rows as HF's (both turn interleaved pairs of part of each head), the
    # attention-output norm as post_attention_norm (LAYOUTS), q/k/v biases from the tensors
    "jamba": ("jamba", False, False),  # Jamba: its attention layers from the per-layer K/V head counts (0 on a Mamba
    # layer), no positions; the final norm as final_layernorm (LAYOUTS)
    "afmoe": ("afmoe", False, False),  # Arcee's AFMoE (Trinity): rows as HF's (rotate-half), its gate as attn_gate
    # (LAYOUTS); llama.cpp's rules (rules.afmoe): every fourth layer global and unrotated, the embeddings scaled
    "qwen3next": ("qwen3_next", False, True),  # Qwen3-Next: rows as HF's (q_proj's per-head [query | gate] kept), every
    "qwen35": ("qwen3_5_text", False, True),  # RMSNorm stored as 1 + w; its attention layers (rules.qwen_next_layers)
    "qwen35moe": ("qwen3_5_moe_text", False, True),  # among gated DeltaNet layers; Qwen3.5's multi-token prediction
    # blocks after its last layer left out
    "chameleon": ("chameleon", True, False),  # Chameleon: a Llama to llama.cpp (q/k rows permuted), its per-head QK
    # LayerNorms' gains and biases permuted alike (names.LAYOUTS); swin_norm from the metadata (_ARCH_KEYS)
    "nemotron_h": ("nemotron_h", True, False),  # Nemotron-H and Nemotron 3 Nano: a block per mixer (rules.nemotron_h),
    "nemotron_h_moe": ("nemotron_h", True, False),  # q/k rows permuted (its converter's Llama path), no positions
    "phimoe": ("phimoe", False, False),  # Phi-3.5-MoE: Phi-3's conversion with q, k and v apart, LayerNorms and biases
    # (their switches from the tensors), LongRoPE at the amplitude llama.cpp computes (rules.phimoe)
    "falcon-h1": ("falcon_h1", False, False),  # Falcon-H1: Llama's names, rows as HF's (rotate-half), the muP
    # multipliers folded into the tensors by the converter (rules.falcon_h1); the final norm as final_layernorm
    "exaone": ("exaone", False, False),  # EXAONE 3.0 and 3.5: Llama's layers, rows as HF's (the converter permutes
    # none), Llama 3's scaling as rope_freqs
    "paddleocr": ("paddleocr_vl_text", False, False),  # PaddleOCR-VL's language model: ERNIE 4.5's conversion, rows as
    # HF's (both turn halves: llama.cpp's multimodal rotary, the ordinary map on text); use_bias from the tensors
    "talkie": ("talkie_gguf", False, False),  # Talkie: Llama's names, rows as the converter writes them (its sign
    # flips in q and k for llama.cpp's rotate-half map), gainless norms, scalar QK-norm and output gains (family talkie)
    "pockettts": ("pocket_tts", True, False),  # Pocket TTS's backbone: Llama's names, LayerNorms with biases, rows as
    # the original model (moshi's) stores them, rotated in interleaved pairs: as a Llama's permuted rows
    "jais2": ("jais2", False, False),  # Jais 2: Llama's names, rows as HF's, LayerNorms with biases; attention_bias from
    # the tensors
    "exaone-moe": ("exaone_moe", False, False),  # EXAONE MoE: EXAONE 4.0's conversion, pre-norm layers; its
    # multi-token-prediction blocks after the last layer left out
    "exaone4": ("exaone4", False, False),  # EXAONE 4.0: rows as HF's, no norm before the attention, one after it,
    # QK norms; with a window, rotary on the sliding layers alone (llama.cpp's rule and transformers')
    "apertus": ("apertus", False, False),  # Apertus: rows as HF's (the converter permutes none), its attention norm
    # as attn_norm (LAYOUTS), per-head QK norms, Llama 3's scaling as rope_freqs
    "t5": ("t5", False, False),  # T5's encoder (enc.blk.N., _T5_BLOCK); the decoder's tensors (dec.) not read
    "t5encoder": ("t5", False, False),  # (the encoder alone: a T5EncoderModel's file)
    "glm4moe": ("glm4_moe", False, False),  # GLM-4.5/4.6/4.7: rows as HF's (rotate-half on part of each head), q/k/v
    # biases and QK norms from the tensors; the multi-token-prediction blocks after the last layer left out
    "deepseek2": ("deepseek_v3", False, False),  # DeepSeek-V2/V3/R1, Kimi K2, Moonlight, Youtu-LLM: multi-head latent
    # attention (rules.latent_attention), rows as HF's (adjacent pairs turned), the key/value up-projection split
    # or fused
    "mistral4": ("mistral4", False, False),  # Mistral 4 (Mistral Small 4): DeepSeek-V2's conversion and llama.cpp's
    # deepseek2 graph (rules.latent_attention), its rotated share as partial_rotary_factor, Llama 4's temperature
    "deepseek32": ("deepseek_v32", False, False),  # DeepSeek-V3.2: DeepSeek-V2's conversion and rules, read as the
    # dense attention its sparse indexer leaves within its top-k; the prediction block left out (rules.latent_attention)
    "glm-dsa": ("glm_moe_dsa", False, False),  # GLM-5, GLM-5.2: DeepSeek-V2's conversion, its sparse indexer's top-k;
    # the multi-token-prediction block after the last layer left out (rules.latent_attention)
    "bailingmoe3": ("bailing_hybrid", False, False),  # Ling 3: its latent attention layers (K/V heads 0 on a KDA
    # layer), the up-projection split, a sigmoid gate per head (attn_gate), adjacent pairs rotated
    # (rules.latent_attention)
    "plm": ("deepseek_v3", False, False),  # PLM (remote code): DeepSeek-V2-Lite's latent attention (queries from
    # attn_q, attn_kv_b fused), adjacent pairs rotated, no rope scaling, the unembedding token_embd's
    # (rules.latent_attention)
    "kimi-linear": ("kimi_linear", False, False),  # Kimi Linear: its latent attention layers (K/V heads 0 on a KDA
    # layer), no positions (rules.latent_attention)
    "minicpm3": ("minicpm3", False, False),  # MiniCPM3: multi-head latent attention, rows as HF's (halves rotated),
    # LongRoPE's factors as tensors, muP's scalars llama.cpp's constants (rules.latent_attention)
    "mimo2": ("mimo_v2_flash", False, False),  # MiMo-V2-Flash: rows as HF's (rotate-half on part of each head), its
    # per-layer K/V heads, sinks, narrow values and value scale (rules.mimo2), the prediction blocks left out
    # InternLM2, XVERSE, DeepSeek's first MoE (deepseek-moe-16b), Snowflake Arctic, Ling (BailingMoE), Nanbeige (one
    # loop) and Baichuan's 7B models: Llamas to llama.cpp (rows permuted by their converters, its Llama graph: no
    # biases, rotary on whole heads), their remote-code models read by the Llama family (rules.llama_graph; Baichuan
    # 13B's ALiBi by llama_alibi's)
    **dict.fromkeys(_LLAMA_GRAPHS, ("llama", True, False)),
    "refact": ("llama_alibi", False, False),  # Refact (remote code): Llama's names, q, k, v apart (one K/V head), ALiBi
    # at maximum bias 8 and no rotary in llama.cpp's graph: llama_alibi's
    "codeshell": ("starcoder2", False, False),  # CodeShell (remote code): LayerNorms, one fused attn_qkv, biases on
    # every projection, rotate-half rotary, grouped K/V heads: StarCoder2's attention (names.LAYOUTS)
    "plamo": ("llama", False, False),  # PLaMo (remote code): its query heads regrouped by the converter, rows as HF's
    # (rotate-half), the attention and MLP in parallel on one normed input: a Llama's attention
    "grovemoe": ("qwen3", False, False),  # GroveMoE (remote code): Qwen3's attention, rows as HF's, QK norms
    "bailingmoe2": ("glm4_moe", False, False),  # Ling 2.0 (remote code): one fused attn_qkv, rows as stored, per-head
    # QK norms before the rotary map on part of each head: GLM-4.5's attention; its prediction blocks left out
    "chatglm": ("glm", False, False),  # ChatGLM 2 and 3, GLM-4-9B's first release (remote code): one fused attn_qkv
    # (q/k/v biases from the tensors), rows as stored: GLM's interleaved rotary on rope.dimension_count dims of a head
    "orion": ("stablelm", False, False),  # Orion (remote code): Llama's layers with LayerNorms and their biases,
    # rotate-half rotary on whole heads, rows as HF's: StableLM's layout, sequential, all of each head turned
    "qwen": ("qwen2", False, False),  # Qwen (the first, remote code): its fused c_attn as attn_qkv, rows [q | k | v]
    # with a bias, rotate-half rotary, one K/V head per query head: Qwen2's attention (names.LAYOUTS)
    "llada": ("eurobert", True, False),  # LLaDA (remote code, a diffusion LM): a Llama to llama.cpp's converter (rows
    # permuted), every token attending to every other (its graph's, and the flag its converter writes): EuroBERT's
    "smallthinker": ("smollm3", False, False),  # SmallThinker (remote code): Llama's layers, rows as HF's; with a
    # window, llama.cpp's rules for the sliding layers and those without rotary (rules.smallthinker): SmolLM3's
    "grok": ("grok_gguf", False, False),  # Grok-1 (remote code): Llama's names, rows as HF's (rotate-half), a norm on
    # each attention output, soft-capped logits and muP-like multipliers (rules.grok)
    "plamo2": ("plamo2_gguf", False, False),  # PLaMo 2 (remote code): PLaMo 3's attention layers without windows,
    # per-head QK gains, among Mamba layers (head counts 0 there: rules.plamo2)
    "plamo3": ("plamo3_gguf", False, False),  # PLaMo 3 (remote code): one fused attn_qkv, per-head QK norms, a norm on
    # each attention output, llama.cpp's window rules (rules.plamo3)
    "cogvlm": ("llama", False, False),  # CogVLM (remote code): its language expert, which llama.cpp runs on text
    # tokens: one fused attn_qkv, rows as HF's, rotate-half rotary at base 10000 (rules.cogvlm); the visual expert not
    "pangu-embedded": ("llama", False, False),  # openPangu-Embedded (remote code): Llama's layers, rows as HF's
    # (rotate-half), an output-projection bias (and q/k/v biases where the file holds them) in llama.cpp's graph
    **dict.fromkeys(("llada-moe", "rnd1"), ("qwen3_bidirectional", False, False)),  # LLaDA-MoE, RND1 (remote code,
    # diffusion LMs): Qwen3's attention and rows as HF's, every token attending to every other (their loaders' rule)
    "dream": ("eurobert", False, False),  # Dream (remote code, a diffusion LM): Qwen2's layers and rows (q/k/v biases,
    # rotate-half rotary), every token attending to every other (its graph's, and the flag its converter writes)
    "llama-embed": ("llama", True, False),  # llama-embed-nemotron (LlamaBidirectionalModel): a Llama to llama.cpp,
    # causal unless its attention.causal flag says not (then EuroBERT's family: rules.llama_embed)
    "minicpm": ("granite", True, False),  # MiniCPM 1 and 2 (remote code): a Llama to llama.cpp's converter, run by its
    # Granite graph, muP's scalars as Granite's (rules.minicpm)
    "deepseek2-ocr": ("deepseek_ocr2_text", False, False),  # DeepSeek-OCR's, DeepSeek-OCR 2's and Unlimited-OCR's
    # language models: DeepSeek-V2's conversion without latents, llama.cpp's plain attention (rules.deepseek2_ocr)
    "deci": ("nemotron-nas", True, False),  # Nemotron-NAS (and DeciLM-7B): a Llama to llama.cpp (rows permuted), head
    # counts per layer as block_configs (rules.deci), Llama 3's scaling as rope_freqs
}

#: the architectures with multimodal rotary sections (``rope.dimension_sections``), and whose they are
_MROPE = {"qwen2vl": "Qwen2-VL", "qwen3vl": "Qwen3-VL", "qwen3vlmoe": "Qwen3-VL", "qwen35": "Qwen3.5",
          "qwen35moe": "Qwen3.5", "qwen3tts": "Qwen3-TTS"}

#: architectures whose bias switches (HF config keys) the metadata does not state: each on where the file holds
#: that tensor in some layer
_BIAS_SWITCHES = {"llama": {"attention_bias": "attn_q.bias"}, "qwen3": {"attention_bias": "attn_q.bias"},
                  "seed_oss": {"attention_bias": "attn_q.bias", "attention_out_bias": "attn_output.bias"},
                  "ernie4_5": {"use_bias": "attn_q.bias"}, "ernie4_5-moe": {"use_bias": "attn_q.bias"},
                  "jais2": {"attention_bias": "attn_q.bias"}, "paddleocr": {"use_bias": "attn_q.bias"},
                  "hy_v3": {"attention_bias": "attn_q.bias"}, "granite_swa": {"attention_bias": "attn_q.bias"},
                  "glm4": {"attention_bias": "attn_q.bias"}, "chatglm": {"attention_bias": "attn_qkv.bias"},
                  "bailingmoe2": {"attention_bias": "attn_qkv.bias", "use_qk_norm": "attn_q_norm.weight"},
                  "glm4moe": {"attention_bias": "attn_q.bias", "use_qk_norm": "attn_q_norm.weight"}}
#: encoder architectures, which attend both ways (a file flagged causal is refused)
_ENCODERS = ("bert", "nomic-bert", "nomic-bert-moe", "eurobert", "modern-bert", "jina-bert-v3", "t5", "t5encoder",
             "llada", "dream", "jina-bert-v2")
#: multi-head latent attention (:func:`.rules.latent_attention`)
_LATENT = ("deepseek2", "mistral4", "deepseek32", "glm-dsa", "kimi-linear", "minicpm3", "plm", "bailingmoe3")
#: the architectures whose files may hold LongRoPE's factors (``rope_factors_long``, ``_short``)
_LONGROPE = ("phi3", "phimoe", "minicpm3")
#: architectures whose rotary may cover part of each head (``rope.dimension_count`` < head width)
_PARTIAL_ROTARY = {"phi2", "gptneox", "stablelm", "granitehybrid", "nemotron",  # (granitehybrid: Bamba's half)
                   "qwen3next", "qwen35", "qwen35moe",  # (a quarter of each head)
                   "minimax-m2", "phi3", "glm4", "glm4moe", "mimo2",  # (phi3: Phi-4-mini's three quarters; GLM's: half)
                   "chatglm", "bailingmoe2"}
#: architectures whose model turns at a rotary base of its own where its HF config states none, which compscope's
#: family, or transformers running the file, would take where a file states none, while llama.cpp's loader takes
#: 10 000: such a file reads as two models, so one without ``rope.freq_base`` is refused, naming both (the model, the
#: layers at that base, its base)
_OWN_BASE = {"gemma3": ("Gemma 3", "the global layers", 1e6),
             "gemma-embedding": ("EmbeddingGemma", "the global layers", 1e6),
             "modern-bert": ("ModernBERT", "the global layers", 160_000.0),
             "llama4": ("Llama 4", "the heads", 500_000.0), "lfm2": ("LFM2", "the heads", 1e6),
             "lfm2moe": ("LFM2-MoE", "the heads", 1e6), "exaone": ("EXAONE 3", "the heads", 500_000.0),
             "paddleocr": ("PaddleOCR-VL", "the heads", 500_000.0), "gpt-oss": ("gpt-oss", "the heads", 150_000.0),
             "minimax-m2": ("MiniMax-M2", "the heads", 5e6), "nomic-bert": ("nomic-embed-text", "the heads", 1000.0),
             "jina-bert-v3": ("jina-embeddings-v3", "the heads", 20_000.0)}
#: GGUF metadata key -> the HF config key an architecture's family reads instead of _CONFIG_KEYS' one
_RENAMED_KEYS = {**{arch: {"layer_norm_epsilon": "layer_norm_eps"}
                    for arch in ("phi2", "gptneox", "stablelm", "command-r", "cohere2", "cohere2moe", "bert",
                                 "jina-bert-v2", "nomic-bert", "nomic-bert-moe", "jina-bert-v3", "orion",
                                 "pockettts")},
                 "modern-bert": {"layer_norm_epsilon": "norm_eps"},
                 "nemotron": {"layer_norm_epsilon": "norm_eps", "rms_norm_eps": "norm_eps"},
                 "lfm2": {"rms_norm_eps": "norm_eps"}, "lfm2moe": {"rms_norm_eps": "norm_eps"},
                 **dict.fromkeys(("starcoder2", "codeshell"), {"layer_norm_epsilon": "norm_epsilon"}),
                 "falcon": {"num_key_value_heads": "num_kv_heads"},
                 **dict.fromkeys(("nemotron_h", "nemotron_h_moe"), {"rms_norm_eps": "layer_norm_epsilon"}),
                 "jais2": {"layer_norm_epsilon": "layer_norm_eps"}}
#: GGUF metadata key (after ``{arch}.``) -> HF config key, read for these architectures only
_GRANITE_KEYS = {"embedding_scale": "embedding_multiplier", "attention.scale": "attention_multiplier",
                 "residual_scale": "residual_multiplier", "logit_scale": "logits_scaling"}
_GRANITE_ARCHS = ("granite", "granitemoe", "granitehybrid", "granite_swa")
_ARCH_KEYS = {**{arch: _GRANITE_KEYS for arch in _GRANITE_ARCHS}, "command-r": {"logit_scale": "logit_scale"},
              "cohere2": {"logit_scale": "logit_scale"}, "cohere2moe": {"logit_scale": "logit_scale"},
              "chameleon": {"swin_norm": "swin_norm"}, "muse-glimmer": {"logit_scale": "output_multiplier"},
              "talkie": {"logit_scale": "logit_scale"},
              "minicpm": {k: v for k, v in _GRANITE_KEYS.items() if k != "attention.scale"},  # (its graph's reads)
              "grok": {"attention.output_scale": "attention_output_multiplier",
                       "embedding_scale": "embedding_multiplier", "logit_scale": "logits_scaling"}}
#: architectures whose files some settings send to another model_type than ARCHS's: (model_type, which files)
ALSO_READ_AS = {"baichuan": ("llama_alibi", "at 40 layers (Baichuan 13B, ALiBi)")}
#: what the notes say of an architecture read by the family of another model (its own remote code, which transformers
#: does not hold, or a model llama.cpp runs with another's graph)
NO_MODEL, _NO_MODEL = rules.NO_MODEL, rules.WEIGHTS_ONLY
_READ_AS = {
    **{arch: f"{name} read by the Llama family, as llama.cpp runs it (its Llama graph)" + _NO_MODEL
       for arch, name in (("internlm2", "InternLM2"), ("xverse", "XVERSE"), ("arctic", "Snowflake Arctic"),
                          ("deepseek", "DeepSeek's first MoE models (DeepseekForCausalLM)"),
                          ("bailingmoe", "Ling (BailingMoE)"), ("baichuan", "Baichuan 7B"), ("nanbeige", "Nanbeige"))},
    "llada": ("LLaDA read by the EuroBERT family (Llama's layers attending both ways), as llama.cpp runs it; its "
              "unembedding, which predicts the masked tokens, not read" + _NO_MODEL),
    "pangu-embedded": ("openPangu-Embedded read by the Llama family (rotate-half rotary, the biases the file holds), "
                       "as llama.cpp runs it" + _NO_MODEL),
    "bailingmoe3": ("Ling 3 read by the bailing_hybrid family (its multi-head latent attention layers, a sigmoid "
                    "gate per head), as llama.cpp runs it" + _NO_MODEL),
    "jais": ("Jais read by the jais family (GPT-2's blocks with ALiBi, logits at 1/d_head), as llama.cpp runs it; the "
             "muP embedding and output scales its converter folds into token_embd and output read in W_E and W_U"
             + _NO_MODEL),
    "jina-bert-v2": ("jina-embeddings-v2 read by the jina_bert_v2 family (BERT's post-LN layers with ALiBi both ways), "
                     "as llama.cpp runs it" + _NO_MODEL),
    "plm": ("PLM read by the DeepSeek-V3 family (DeepSeek-V2-Lite's multi-head latent attention), as llama.cpp runs "
            "it" + _NO_MODEL),
    **{arch: (f"{name} read by the qwen3_bidirectional family (Qwen3's attention attending both ways, as llama.cpp's "
              "loader runs it whatever the file's attention.causal says); its unembedding, which predicts the masked "
              "tokens, not read" + _NO_MODEL) for arch, name in (("llada-moe", "LLaDA-MoE"), ("rnd1", "RND1"))},
    "talkie": "Talkie read by the talkie family, as llama.cpp runs it" + _NO_MODEL,
    "qwen3tts": ("Qwen3-TTS's talker read by the qwen3_tts_talker family (Qwen3's attention), as llama.cpp runs it "
                 "(Qwen3-VL's graph); the text tokens' embeddings as its converter folds the text projection into them"
                 + _NO_MODEL),
    "dream": ("Dream read by the EuroBERT family (Qwen2's layers, q/k/v biases included, attending both ways), as "
              "llama.cpp runs it; its unembedding, which predicts the masked tokens, not read" + _NO_MODEL),
    "bailingmoe2": ("Ling 2.0 read by the GLM-4.5 family (per-head QK norms, rotary on part of each head), as "
                    "llama.cpp runs it" + _NO_MODEL),
    "chatglm": "ChatGLM read by the GLM family (GLM-4-9B's attention), as llama.cpp runs it" + _NO_MODEL,
    "qwen": "Qwen (the first) read by the Llama family as Qwen2's attention, as llama.cpp runs it" + _NO_MODEL,
    "orion": ("Orion read by the StableLM family (Llama's layers with LayerNorms and their biases, each head turned "
              "whole), as llama.cpp runs it" + _NO_MODEL),
    "codeshell": ("CodeShell read by the StarCoder2 family (LayerNorms, biases on every projection), as llama.cpp runs "
                  "it" + _NO_MODEL),
    "refact": ("Refact read by the llama_alibi family (Llama's layers with ALiBi, maximum bias 8, no rotary), as "
               "llama.cpp runs it" + _NO_MODEL),
    "plamo": ("PLaMo read by the Llama family, as llama.cpp runs it (the attention and the MLP read one normed input "
              "in parallel; the attention as a Llama's)" + _NO_MODEL),
    "grovemoe": ("GroveMoE read by the Qwen3 family, as llama.cpp runs it (Qwen3's attention: per-head QK norms before "
                 "the rotary map)" + _NO_MODEL),
    "minicpm": ("MiniCPM read by the Granite family, as llama.cpp runs it (its Granite graph): the embedding, residual "
                "and logit scales as Granite's multipliers (llama.cpp's defaults where the file states none: 12, "
                "1.4 / sqrt(layers), 256 / d_model)" + _NO_MODEL),
    "nomic-bert-moe": ("nomic-embed-text v2 MoE read by the jina_embeddings_v3 family: BERT's post-LN layers with "
                       "rotary positions and biased attention, which llama.cpp runs for both with one graph (its "
                       "experts are MLP)"),
}
#: HF norm gains an architecture whose norms llama.cpp stores as ``1 + w`` keeps as they are (Muse Glimmer's final norm)
_UNSHIFTED = {"muse-glimmer": ("model.norm.weight",)}


@dataclass(frozen=True)
class Shape:
    """What reading the tensors of a file needs beside its config: its architecture, head counts and width,
    the prediction blocks after its last layer (``mtp``), the layers without attention (``ssm_layers``: a
    hybrid's), whether llama.cpp permuted the rows of ``W_Q`` and ``W_K`` (``permuted``) and stores norm gains
    as ``1 + w`` (``one_plus``), what the notes say of the file's own rules (``notes``), and each layer's K/V
    head count where layers differ in it (``kv_layers``)."""

    arch: str
    n_heads: int
    n_kv: int
    head_dim: int
    mtp: int
    ssm_layers: frozenset[int]
    permuted: bool
    one_plus: bool
    notes: tuple[str, ...] = ()  # what the checkpoint's notes say of this file beside the generic ones
    kv_layers: tuple[int, ...] = ()  # each layer's K/V head count, where layers differ in it (Nemotron-NAS's)
    unshifted: tuple[str, ...] = ()  # HF norm gains stored as they are though ``one_plus`` (Muse Glimmer's final norm)


def config(path: Path, fields: dict, infos: list, located: list[tuple]) -> tuple[dict, Shape]:
    """The HF config of the GGUF file at ``path`` (its metadata ``fields``, its tensors ``infos``, located in
    their files as ``located``), as its family reads it, and the :class:`Shape` its tensors are read with."""
    arch = fields.get("general.architecture")
    if arch not in ARCHS:
        from ...catalogue import why_not_gguf

        reason = why_not_gguf(arch)
        raise UnsupportedModelError(
            f"{path}: GGUF architecture {arch!r}, which compscope does not read: {reason}" if reason
            else f"{path}: GGUF architecture {arch!r} is not supported (supported: {', '.join(ARCHS)})")
    model_type, permuted, one_plus = ARCHS[arch]
    cfg: dict = {"model_type": model_type}
    mtp = rules.mtp_blocks(path, arch, fields)  # (multi-token-prediction blocks, after the last layer)
    for gkey, hkey in {**_CONFIG_KEYS, **_ARCH_KEYS.get(arch, {})}.items():
        v = fields.get(f"{arch}.{gkey}")
        if v is not None:
            cfg[_RENAMED_KEYS.get(arch, {}).get(hkey, hkey)] = v
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads"):
        if key not in cfg:
            gkey = next(g for g, h in _CONFIG_KEYS.items() if h == key)
            raise LoadError(f"{path}: GGUF metadata '{arch}.{gkey}' is missing")
    if arch in _OWN_BASE and "rope_theta" not in cfg:
        name, layers, base = _OWN_BASE[arch]
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.freq_base' is missing: llama.cpp would turn "
                                    f"{layers} at 10000, {name} at its own base ({base:.0f})")
    if mtp:
        if not 0 < mtp < cfg["num_hidden_layers"]:
            raise LoadError(f"{path}: GGUF metadata '{arch}.nextn_predict_layers' = {mtp} for "
                            f"{cfg['num_hidden_layers']} blocks")
        cfg["num_hidden_layers"] -= mtp  # (the blocks llama.cpp counts are the layers and these)
    n_heads = cfg["num_attention_heads"]
    n_kv = fields.get(f"{arch}.attention.head_count_kv") or n_heads  # under the key its family reads in cfg
    ssm_layers: set[int] = set()
    if arch == "granitehybrid" and isinstance(n_kv, list):  # a K/V head count per layer, 0 on the Mamba layers
        n_kv, ssm_layers = rules.hybrid_layers(path, arch, cfg, fields, n_kv)
    if arch == "jamba" and isinstance(n_kv, list):  # 0 on the Mamba layers: an attention layer every period-th
        n_kv, ssm_layers = rules.kv_heads_per_layer(path, arch, cfg, n_kv, "a Mamba layer")
        cfg.update(rules.jamba_period(path, arch, cfg["num_hidden_layers"], ssm_layers))
    kv_layers: tuple[int, ...] = ()
    if arch == "deci":  # each layer its own K/V head count (0: no attention, or a linear map in its place)
        n_heads, kv_layers, ssm_layers = rules.deci(path, arch, cfg, fields, n_heads, n_kv)
        n_kv = max(kv_layers)  # (one count for the Shape; its q, k, v are apart, each layer's k read at its own)
    if arch in ("nemotron_h", "nemotron_h_moe"):  # the blocks' kinds from the per-block head and MLP widths
        n_heads, n_kv, ssm_layers = rules.nemotron_h(path, arch, cfg, fields, n_heads, n_kv)
    if arch in ("qwen3next", "qwen35", "qwen35moe"):  # attention every full_attention_interval-th layer
        n_kv, ssm_layers = rules.qwen_next_layers(path, arch, cfg, fields, n_kv)
    if arch in ("lfm2", "lfm2moe") and isinstance(n_kv, list):  # 0 on the convolution layers
        n_kv, ssm_layers = rules.kv_heads_per_layer(path, arch, cfg, n_kv, "a convolution layer")
        cfg["layer_types"] = ["conv" if i in ssm_layers else "full_attention" for i in range(cfg["num_hidden_layers"])]
    if arch in ("kimi-linear", "bailingmoe3") and isinstance(n_kv, list):  # 0 on the Kimi Delta Attention layers
        counts = n_kv[:cfg["num_hidden_layers"]] if mtp and len(n_kv) == cfg["num_hidden_layers"] + mtp else n_kv
        n_kv, ssm_layers = rules.kv_heads_per_layer(path, arch, cfg, counts, "a Kimi Delta Attention layer")
        cfg["layer_types"] = ["linear_attention" if i in ssm_layers else "full_attention"
                              for i in range(cfg["num_hidden_layers"])]
    if arch == "plamo2":  # query and K/V head counts per layer, 0 on the Mamba layers
        n_heads, n_kv, ssm_layers = rules.plamo2(path, arch, cfg, n_heads, n_kv)
    if arch == "mimo2":  # twice the K/V heads on the sliding layers
        n_kv = rules.mimo2_kv_heads(path, arch, cfg, fields, n_kv)
    if arch == "gemma4":  # local and global layers of their own head widths and K/V head counts
        n_kv = rules.gemma4(path, arch, cfg, fields, infos, n_kv)
    if arch in _LATENT:  # (each head its own key once the latents are expanded; read after the rope scaling)
        n_kv = n_heads
    if isinstance(n_heads, list) or isinstance(n_kv, list):
        raise UnsupportedModelError(
            f"{path}: per-layer head counts ('{arch}.attention.head_count' is a list) are not supported"
        )
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_heads
    if arch == "minicpm":
        rules.minicpm(cfg)
    if arch in (*_GRANITE_ARCHS, "minicpm") and "attention_multiplier" not in cfg:  # llama.cpp: no attention.scale,
        # d_head^-1/2
        cfg["attention_multiplier"] = head_dim**-0.5  # (transformers' Granite default is 1: said outright)
    rope_dim = (fields.get(f"{arch}.rope.dimension_count") if arch not in ("gemma4", "deepseek2-ocr", *_LATENT)
                else None)  # (their rules: per layer type; the whole head; the rotated dims of each latent head)
    if (rope_dim is None or rope_dim == head_dim) and arch in _PARTIAL_ROTARY:  # said outright (StableLM's family
        # would take a quarter): whole heads, as stated or as llama.cpp takes them where no rotary width is stated
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
    if longrope and arch not in _LONGROPE:  # (llama.cpp writes them for Phi-3's, Phi-3.5-MoE's and MiniCPM3's)
        raise UnsupportedModelError(f"{path}: rotary scaling by {', '.join(longrope)} (longrope) is not supported for "
                                    f"GGUF architecture {arch!r} (it is for {', '.join(_LONGROPE)})")
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list):  # one flag per layer: True = sliding-window layer (and any after the last layer's: the
        # multi-token-prediction blocks', not read)
        flags = pattern[:cfg["num_hidden_layers"]] if mtp and len(pattern) == cfg["num_hidden_layers"] + mtp else pattern
        cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in flags]
    elif pattern is not None:  # every pattern-th layer is global (llama.cpp and HF agree)
        cfg["sliding_window_pattern"] = pattern
    scaling = fields.get(f"{arch}.rope.scaling.type")
    factor = fields.get(f"{arch}.rope.scaling.factor")
    if scaling == "yarn":
        cfg["rope_scaling"] = rope_scaling.yarn(path, arch, fields)
    elif scaling not in (None, "none") or factor not in (None, 0.0, 1.0):
        # the families accept 'linear' and refuse other types by name
        cfg["rope_scaling"] = {"rope_type": scaling or "linear", "factor": 1.0 if factor is None else factor}
    if longrope:  # Phi-3's long-context models: frequencies rescaled by the sequence length
        if scaling not in (None, "none"):
            raise UnsupportedModelError(f"{path}: rotary factors {', '.join(longrope)} (longrope) beside GGUF metadata "
                                        f"'{arch}.rope.scaling.type' = {scaling!r}: not one rope scaling")
        rope_scaling.longrope(path, arch, cfg, fields, located)
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
    if arch == "jais":  # (llama.cpp takes 0 where none is stated: no positions at all, not the model)
        cfg["alibi_bias_max"] = rules.stated(path, arch, fields, "attention.max_alibi_bias",
                                             "llama.cpp would run the heads without positions")
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
        rope_scaling.mistral3(path, arch, cfg, fields)
    if arch in _BIAS_SWITCHES:  # the switches as the tensors the file holds (the metadata states none)
        names = {i.name for i in infos}
        cfg.update({key: any(n.endswith(tensor) for n in names) for key, tensor in _BIAS_SWITCHES[arch].items()})
    if arch == "modern-bert":
        rules.modern_bert(path, arch, cfg, fields, infos)
    if arch == "jina-bert-v2":
        rules.jina_bert_v2(path, arch, infos)
    if arch == "pockettts":
        rules.pockettts(path, arch, infos)
    if arch == "talkie" and "logit_scale" not in cfg:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.logit_scale' is missing: llama.cpp's {arch} model "
                                    "requires it (the scale of its logits)")
    if arch == "nomic-bert-moe":  # (the base llama.cpp takes where none is stated: the model's own, 10000)
        cfg.setdefault("rope_theta", 10000.0)
    if arch in ("jina-bert-v3", "nomic-bert-moe") and cfg.get("num_key_value_heads") == cfg["num_attention_heads"]:
        cfg.pop("num_key_value_heads")  # (one per head: the family's own count; another is refused by the family)
    if arch in _ENCODERS and fields.get(f"{arch}.attention.causal"):  # llama.cpp's flag; these attend both ways
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.causal' is true: a BERT file that "
                                    "attends causally is not the bidirectional encoder compscope reads")
    if arch == "llama4":
        cfg.update(rules.llama4(fields, arch))
    if arch == "mimo2":
        rules.mimo2(path, arch, cfg, fields, infos)
    if arch in _LATENT:
        head_dim = rules.latent_attention(path, arch, cfg, fields, infos)
    if arch in ("t5", "t5encoder"):
        rules.t5(path, arch, cfg, fields, infos)
    note = rules.falcon_h1(path, arch, fields) if arch == "falcon-h1" else None
    if arch == "phimoe":
        note = rules.phimoe(cfg, {i.name for i in infos})
    if arch == "afmoe":
        note = rules.afmoe(path, arch, cfg)
    if arch == "cohere2moe":
        note = rules.cohere2moe(path, arch, cfg, fields)
    if arch == "mellum":
        note = rules.mellum(path, arch, cfg)
    if arch == "granite_swa":
        rules.granite_swa(path, arch, cfg, fields)
    if arch == "muse-glimmer":
        rules.muse_glimmer(path, arch, cfg, fields, located)
    if arch == "deepseek2-ocr":
        note = rules.deepseek2_ocr(path, arch, cfg, fields)
    if arch == "smallthinker":
        note = rules.smallthinker(path, arch, cfg)
    if arch == "cogvlm":
        note = rules.cogvlm(path, arch, cfg, fields, infos)
    if arch == "plamo3":
        note = rules.plamo3(path, arch, cfg, fields)
    if arch == "plamo2":
        note = rules.plamo2_note(path, arch, cfg, fields)
    if arch == "grok":
        note = rules.grok(path, arch, cfg, fields)
    if arch in _LLAMA_GRAPHS:
        note = rules.llama_graph(path, arch, cfg, fields)
    if arch == "orion":  # (StableLM's family's other defaults: a quarter of each head turned, a parallel block)
        cfg.update(partial_rotary_factor=1.0, use_parallel_residual=False, qk_layernorm=False, use_qkv_bias=False)
    note = _READ_AS.get(arch) if note is None else note  # (a rule's note, where it gives one, before the table's)
    if arch == "llama-embed":
        note = rules.llama_embed(cfg, fields.get(f"{arch}.attention.causal", True))
    notes = () if note is None else (note,)
    if arch == "command-r":  # Command R+'s per-head QK LayerNorms, there when their stacked gains are
        cfg["use_qk_norm"] = any(i.name.endswith("attn_q_norm.weight") for i in infos)
    if "vocab_size" not in cfg:
        toks = fields.get("tokenizer.ggml.tokens")
        if isinstance(toks, (list, SkippedStrings)):
            cfg["vocab_size"] = len(toks)
    if arch == "falcon":  # llama.cpp's rows are grouped whatever the model: read as the new decoder architecture
        two_norms = any(i.name.endswith("attn_norm_2.weight") for i in infos)
        cfg.update(new_decoder_architecture=True, num_kv_heads=n_kv, num_ln_in_parallel_attn=2 if two_norms else 1,
                   parallel_attn=True)  # llama.cpp runs every Falcon block in parallel
    return cfg, Shape(arch, n_heads, n_kv, head_dim, mtp, frozenset(ssm_layers), permuted, one_plus, notes, kv_layers,
                      _UNSHIFTED.get(arch, ()))
