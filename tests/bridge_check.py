"""Checks of compscope's ``TransformerBridge`` reader, run by ``test_transformer_bridge.py`` in a
separate environment that has transformer-lens 4 (it cannot share one with transformer-lens
3.9). Prints one JSON line per case; nothing is downloaded (tiny random models, a word-level
tokenizer saved to a temporary folder).

For each tiny HuggingFace model (every parameter perturbed, so norm gains are not ones):
- the bridge is booted around the model; compscope reads it; every tensor equals what
  compscope reads from an untouched copy of the same HuggingFace model;
- each layer's attention recomputed from the ``HeadWeights`` on the residual the bridge hooks
  (``ln1.hook_in``) equals the bridge's own attention output (after the post-attention norm
  where there is one), and the pattern equals ``attn.hook_pattern``;
- the same after ``enable_compatibility_mode()`` (weights processed in place), where the
  processing is recorded;
- compscope's runner traces the bridge (raw and processed) so that each layer recomputed from
  the ``HeadWeights`` gives what the bridge's attention added, and the interventions on the raw
  bridge, along the direct path (post-LN BERT: through its norms) and along every path, equal
  those on the untouched HuggingFace model;
- reading changes nothing: the bridge's state dict is bitwise the same before and after.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import warnings

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

import compscope
from compscope.core.attention import attention_forward, attention_pattern_and_values
from compscope.data.runner.transformer_lens import bridge_residual_scale

VOCAB = 61
CASES = {
    "gpt2": lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=2, n_positions=32, n_inner=48)),
    "neox": lambda: transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48,
        max_position_embeddings=64, rotary_pct=0.5)),
    "llama-gqa": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        intermediate_size=48, max_position_embeddings=64, rope_theta=500.0)),
    "qwen2-bias": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        intermediate_size=48, max_position_embeddings=64)),
    "gemma3": lambda: transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(
        architectures=["Gemma3ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=1, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        sliding_window=3, layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=16)),
    "gpt-neo": lambda: transformers.GPTNeoForCausalLM(transformers.GPTNeoConfig(
        vocab_size=VOCAB, hidden_size=32, num_heads=4, num_layers=2, intermediate_size=48, max_position_embeddings=64,
        attention_types=[[["global", "local"], 1]], window_size=3)),
    "qwen3": lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_hidden_layers=2,
        intermediate_size=48, max_position_embeddings=64)),
    "gemma2": lambda: transformers.Gemma2ForCausalLM(transformers.Gemma2Config(
        architectures=["Gemma2ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        sliding_window=3, query_pre_attn_scalar=16, attn_logit_softcapping=1.0)),
    "vaultgemma": lambda: transformers.VaultGemmaForCausalLM(transformers.VaultGemmaConfig(  # Gemma 2 without the
        architectures=["VaultGemmaForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,  # norm on
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,  # its
        sliding_window=3, query_pre_attn_scalar=16, attn_logit_softcapping=1.0,  # attention's output
        layer_types=["sliding_attention", "full_attention"])),
    "olmo2": lambda: transformers.Olmo2ForCausalLM(transformers.Olmo2Config(
        architectures=["Olmo2ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        intermediate_size=48, max_position_embeddings=64)),
    "phi": lambda: transformers.PhiForCausalLM(transformers.PhiConfig(
        architectures=["PhiForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
        intermediate_size=48, max_position_embeddings=64)),
    "gptj": lambda: transformers.GPTJForCausalLM(transformers.GPTJConfig(
        architectures=["GPTJForCausalLM"], vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=2, n_positions=64,
        rotary_dim=4)),
    "opt": lambda: transformers.OPTForCausalLM(transformers.OPTConfig(
        architectures=["OPTForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
        ffn_dim=48, max_position_embeddings=64, word_embed_proj_dim=32)),
    "bloom": lambda: transformers.BloomForCausalLM(transformers.BloomConfig(  # ALiBi positions
        architectures=["BloomForCausalLM"], vocab_size=VOCAB, hidden_size=32, n_head=4, n_layer=2)),
    "mpt": lambda: transformers.MptForCausalLM(transformers.MptConfig(  # ALiBi, no biases
        architectures=["MptForCausalLM"], vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, max_seq_len=64,
        expansion_ratio=2)),
    "gpt-oss": lambda: transformers.GptOssForCausalLM(transformers.GptOssConfig(  # attention sinks, YaRN
        architectures=["GptOssForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=32, sliding_window=3,
        num_local_experts=2, num_experts_per_tok=1)),
    "bert": lambda: transformers.BertForMaskedLM(transformers.BertConfig(  # post-LN: ln1 is the norm after attention
        architectures=["BertForMaskedLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
        intermediate_size=48, max_position_embeddings=32)),
    "openai-gpt": lambda: transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(  # post-LN, causal
        architectures=["OpenAIGPTLMHeadModel"], vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=3, n_positions=32)),
    "modernbert-decoder": lambda: transformers.ModernBertDecoderForCausalLM(transformers.ModernBertDecoderConfig(
        architectures=["ModernBertDecoderForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_hidden_layers=3, intermediate_size=48, local_attention=4, global_attn_every_n_layers=2, norm_bias=True,
        global_rope_theta=500.0, local_rope_theta=50.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
        sep_token_id=2)),  # its first layer reads the normed embeddings without a norm; causal windows
    "afmoe": lambda: transformers.AfmoeForCausalLM(transformers.AfmoeConfig(  # gated heads, QK-norm, NoPE global layers
        architectures=["AfmoeForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, num_hidden_layers=4, intermediate_size=48, max_position_embeddings=64, sliding_window=3,
        global_attn_every_n_layers=2, num_dense_layers=1, num_experts=4, num_experts_per_tok=2, num_shared_experts=1,
        moe_intermediate_size=16)),
    "recurrent_gemma": lambda: transformers.RecurrentGemmaForCausalLM(transformers.RecurrentGemmaConfig(  # RG-LRU blocks
        architectures=["RecurrentGemmaForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=1, num_hidden_layers=4, intermediate_size=48, attention_window_size=4, lru_width=32,
        block_types=["recurrent", "attention"], pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "glm": lambda: transformers.GlmForCausalLM(transformers.GlmConfig(  # interleaved rotary on half of each head
        architectures=["GlmForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64, pad_token_id=0, eos_token_id=1)),
    "glm4": lambda: transformers.Glm4ForCausalLM(transformers.Glm4Config(  # and a norm on the attention output
        architectures=["Glm4ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64, pad_token_id=0, eos_token_id=1)),
    "glm4_moe": lambda: transformers.Glm4MoeForCausalLM(transformers.Glm4MoeConfig(  # QK-norm, rotary on half a head
        architectures=["Glm4MoeForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        attention_bias=True, use_qk_norm=True, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        pad_token_id=0, eos_token_id=1)),
    "lfm2": lambda: transformers.Lfm2ForCausalLM(transformers.Lfm2Config(  # convolution layers among attention ones
        architectures=["Lfm2ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=3, intermediate_size=48, block_auto_adjust_ff_dim=False,
        max_position_embeddings=64, layer_types=["conv", "full_attention", "full_attention"], pad_token_id=0,
        bos_token_id=1, eos_token_id=2)),
    "falcon_h1": lambda: transformers.FalconH1ForCausalLM(transformers.FalconH1Config(  # Mamba beside attention, muP
        architectures=["FalconH1ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        mamba_d_ssm=32, mamba_n_heads=4, mamba_n_groups=1, mamba_d_state=8, mamba_chunk_size=4,
        attention_in_multiplier=0.7, key_multiplier=1.3, attention_out_multiplier=0.6, embedding_multiplier=1.5,
        lm_head_multiplier=0.8, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "minimax_m2": lambda: transformers.MiniMaxM2ForCausalLM(transformers.MiniMaxM2Config(  # layer-wide QK-norm
        architectures=["MiniMaxM2ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        num_local_experts=4, num_experts_per_tok=2, rotary_dim=4, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "nanochat": lambda: transformers.NanoChatForCausalLM(transformers.NanoChatConfig(  # gain-free norms, reversed rotary
        architectures=["NanoChatForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        pad_token_id=1, bos_token_id=0, eos_token_id=1)),
    "phimoe": lambda: transformers.PhimoeForCausalLM(transformers.PhimoeConfig(  # LayerNorms, all biases
        architectures=["PhiMoEForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        num_local_experts=4, num_experts_per_tok=2, attention_bias=True, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)),
    "qwen3_5": lambda: transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(  # gated attention, DeltaNet
        architectures=["Qwen3_5ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=4, intermediate_size=48, max_position_embeddings=64,
        linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])),
    "gemma4": lambda: gemma4(),  # heads of two widths, values from keys, a value norm, layer scalars (not 1)
    "flex_olmo": lambda: transformers.FlexOlmoForCausalLM(transformers.FlexOlmoConfig(  # OLMo-2's attention, MoE
        architectures=["FlexOlmoForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64, num_experts=4,
        num_experts_per_tok=2, pad_token_id=0, eos_token_id=1)),
    "ernie4_5": lambda: transformers.Ernie4_5ForCausalLM(transformers.Ernie4_5Config(  # interleaved, all biased
        architectures=["Ernie4_5ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        use_bias=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "seed-oss": lambda: transformers.SeedOssForCausalLM(transformers.SeedOssConfig(  # two bias switches
        architectures=["SeedOssForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        attention_out_bias=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "arcee": lambda: transformers.ArceeForCausalLM(transformers.ArceeConfig(
        architectures=["ArceeForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "nemotron": lambda: transformers.NemotronForCausalLM(transformers.NemotronConfig(  # LayerNorm1P, partial rotary
        architectures=["NemotronForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "apertus": lambda: transformers.ApertusForCausalLM(transformers.ApertusConfig(  # QK-norm, attention_layernorm
        architectures=["ApertusForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "exaone4": lambda: transformers.Exaone4ForCausalLM(transformers.Exaone4Config(  # no input norm, global NoPE
        architectures=["Exaone4ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64, sliding_window=3,
        sliding_window_pattern=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "roberta": lambda: transformers.RobertaForMaskedLM(transformers.RobertaConfig(  # positions from pad_token_id + 1
        architectures=["RobertaForMaskedLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_hidden_layers=3, intermediate_size=48, max_position_embeddings=34, type_vocab_size=1, pad_token_id=1)),
}
#: a bridge around an architecture compscope has no family for: a clean error naming it
UNSUPPORTED = {
    "hunyuan_v1_dense": lambda: transformers.HunYuanDenseV1ForCausalLM(transformers.HunYuanDenseV1Config(  # QK-norm after
        architectures=["HunYuanDenseV1ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,  # rotary
        num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=48, max_position_embeddings=64)),
}


def gemma4():
    model = transformers.Gemma4ForCausalLM(transformers.Gemma4TextConfig(
        architectures=["Gemma4ForCausalLM"], vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, global_head_dim=16, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_hidden_layers=4, intermediate_size=48, max_position_embeddings=64, sliding_window=3,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=VOCAB))
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            layer.layer_scalar.fill_(0.6 + 0.3 * i)
    return model


def divisors(bridge) -> list[float]:
    """Per layer, the product of the layer scalars before it (Gemma 4; 1 elsewhere): the bridge's
    residual there is compscope's times it."""
    scalars = [float(getattr(b, "layer_scalar", torch.ones(1))) for b in bridge.original_model.model.layers] \
        if hasattr(bridge.original_model, "model") and hasattr(bridge.original_model.model, "layers") else []
    return [float(torch.tensor(scalars[:i]).prod()) for i in range(len(scalars))] or [1.0] * len(bridge.blocks)


def tokenizer():
    tk = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="t0", bos_token="t1", eos_token="t1",
                                               pad_token="t1")
    folder = tempfile.mkdtemp()
    tok.save_pretrained(folder)  # TransformerLens reloads a tokenizer by its name_or_path
    return transformers.AutoTokenizer.from_pretrained(folder)


def state(bridge) -> dict:
    return {k: v.detach().clone() for k, v in bridge.original_model.state_dict().items()}


def forward_errors(bridge, hw, tokens) -> tuple[float, float]:
    """Largest |compscope - bridge| of each layer's attention output and pattern."""
    _, cache = bridge.run_with_cache(tokens)
    out_err = pat_err = 0.0
    # a hybrid's blocks without attention (LFM2's convolution layers) are not compscope's layers: layer k is
    # the k-th block that attends
    attending = [(i, b) for i, b in enumerate(bridge.blocks) if f"blocks.{i}.attn.hook_pattern" in cache]
    scale = bridge_residual_scale(bridge)  # what the residual receives per unit the attention returns
    assert len(attending) == hw.n_layers, (len(attending), hw.n_layers)
    div = divisors(bridge)
    for k, (layer, block) in enumerate(attending):
        if hw.norm_placement == "post":  # BERT: the block's input is read; ln1 normalises the sum after the attention
            resid, want = cache[f"blocks.{layer}.hook_in"], cache[f"blocks.{layer}.attn.o.hook_out"]
        else:
            resid = cache[f"blocks.{layer}.ln1.hook_in" if hasattr(block, "ln1") else f"blocks.{layer}.attn.hook_in"]
            post = f"blocks.{layer}.ln1_post.hook_out"
            # BLOOM's attention returns the residual with what it adds: its output projection's is the addition
            added = f"blocks.{layer}.attn.{'o.' if hw.meta.family == 'bloom' else ''}hook_out"
            want = (cache[post] if post in cache else cache[added]) * scale  # (× Falcon-H1's output multiplier)
            resid, want = resid / div[layer], want / div[layer]  # (Gemma 4: its residual scaled after each layer)
        with torch.no_grad():
            got = attention_forward(hw, k, resid)
            pattern, _ = attention_pattern_and_values(hw, k, resid)
        out_err = max(out_err, float((got - want).abs().max() / want.abs().max()))
        pat_err = max(pat_err, float((pattern - cache[f"blocks.{layer}.attn.hook_pattern"]).abs().max()))
    return out_err, pat_err


def boot(hf, case: str):
    from transformer_lens.model_bridge import TransformerBridge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TransformerBridge.boot_transformers(f"tiny-{case}", hf_model=hf, tokenizer=tokenizer())


def refusal(case: str) -> dict:
    bridge = boot(UNSUPPORTED[case]().eval(), case)
    try:
        compscope.load(bridge)
    except compscope.CompscopeError as e:
        return {"case": case, "refused": f"{type(e).__name__}: {e}"}
    return {"case": case, "refused": None}


def runner_error(bridge, tokens) -> float:
    """Largest relative |recomputed − traced| attention output of compscope's runner on the bridge."""
    from compscope.data.runner import TransformerLensRunner, layer_state, runner_for

    runner = runner_for(bridge)
    assert isinstance(runner, TransformerLensRunner)
    tr = runner.trace(tokens)
    err = 0.0
    for layer in range(runner.hw.n_layers):
        out = layer_state(runner.hw, layer, tr.resid[layer]).out
        err = max(err, float((out - tr.attn_out[layer]).abs().max() / tr.attn_out[layer].abs().max()))
    return err


def interventions_error(bridge, pristine, tokens) -> tuple[float, float]:
    """Largest |bridge − HuggingFace| interventional effect, every pair and kind, along the direct
    path and along every path (the bridge run with the writer's change added at its own hook):
    compscope's runner on the bridge against its runner on an untouched copy of the HuggingFace
    model; and the smallest largest direct effect of a kind (so that agreement is not that of zeros)."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for

    ours, theirs = runner_for(bridge), runner_for(pristine)
    a, b = ({paths: intervention_effects(r, tokens, progress=False, paths=paths).by_kind for paths in ("direct", "all")}
            for r in (ours, theirs))
    err = max(float((a[p][k] - b[p][k]).nan_to_num().abs().max())  # NaN: the pairs that are none
              if torch.equal(a[p][k].isnan(), b[p][k].isnan()) else float("inf") for p in a for k in "QKV")
    return err, min(float(torch.nan_to_num(b["direct"][k]).max()) for k in "QKV")


#: cases whose compatibility mode TransformerLens itself cannot enter (its own error), so only the raw bridge is checked
RAW_ONLY = {"falcon_h1": "TransformerLens 4.3 folds the norm into grouped K/V with the query heads' shape and fails",
            "gemma4": "compscope refuses a processed bridge around Gemma 4 (its stacked projections cannot hold heads "
                      "of two widths)",
            "vaultgemma": "TransformerLens 4.3 refuses VaultGemma's compatibility mode (its processed weights diverge "
                          "from the model, it says)"}


#: cases whose bridge wraps each block whole (no attention hooks): read for their weights, refused on data
WEIGHTS_ONLY = {"recurrent_gemma": "TransformerLens 4.3's RecurrentGemma blocks have no attention component"}


def check(case: str) -> dict:
    torch.manual_seed(0)
    hf = CASES[case]().eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    pristine = copy.deepcopy(hf)
    bridge = boot(hf, case)
    tokens = torch.randint(0, VOCAB, (2, 9))
    row = {"case": case}

    before = state(bridge)
    hw = compscope.load(bridge)
    after = state(bridge)
    row["unchanged"] = all(torch.equal(v, after[k]) for k, v in before.items())
    ref = compscope.load(pristine)
    names = ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U"]
    row["same_as_hf"] = all(
        (getattr(hw, n) is None and getattr(ref, n) is None) or torch.equal(getattr(hw, n), getattr(ref, n)) for n in names
    ) and (hw.attn_norm is None) == (ref.attn_norm is None) and (
        hw.attn_norm is None or (hw.attn_norm.weight is None and ref.attn_norm.weight is None)  # (nanochat's: no gains)
        or torch.equal(hw.attn_norm.weight, ref.attn_norm.weight))
    row["raw_processing"] = list(hw.meta.processing)
    if case in WEIGHTS_ONLY:
        from compscope.data.runner import runner_for

        try:
            runner_for(bridge)
        except compscope.CompscopeError as e:
            row["runner_refused"] = f"{type(e).__name__}: {e}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bridge.enable_compatibility_mode()
        processed = compscope.load(bridge)
        row["compat_processing"] = list(processed.meta.processing)
        attention = ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"]
        row["compat_attention_same_as_hf"] = all(
            (getattr(processed, n) is None and getattr(ref, n) is None) or torch.equal(getattr(processed, n),
                                                                                       getattr(ref, n))
            for n in attention)
        # (its final norm folded into the unembedding: read as the model now holds it)
        row["compat_unembedding_as_held"] = torch.equal(processed.W_U, bridge.original_model.lm_head.weight.detach())
        return row
    row["raw_out_err"], row["raw_pattern_err"] = forward_errors(bridge, hw, tokens)
    row["raw_runner_err"] = runner_error(bridge, tokens)
    row["raw_interventions_err"], row["raw_interventions_max"] = interventions_error(bridge, pristine, tokens)
    if case in RAW_ONLY:
        row["compat_unchanged"], row["compat_skipped"] = True, RAW_ONLY[case]
        if case == "gemma4":  # TransformerLens processes it; compscope says why it does not read the result
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bridge.enable_compatibility_mode(disable_warnings=True)
            try:
                compscope.load(bridge)
                row["compat_refused"] = None
            except compscope.CompscopeError as e:
                row["compat_refused"] = f"{type(e).__name__}: {e}"
        return row

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge.enable_compatibility_mode(disable_warnings=True)
    before = state(bridge)
    processed = compscope.load(bridge)
    after = state(bridge)
    row["compat_unchanged"] = all(torch.equal(v, after[k]) for k, v in before.items())
    row["compat_processing"] = list(processed.meta.processing)
    row["compat_note"] = any("fold_ln" in n for n in processed.meta.notes)
    row["compat_weights_differ"] = not torch.equal(processed.W_Q, hw.W_Q)
    row["compat_out_err"], row["compat_pattern_err"] = forward_errors(bridge, processed, tokens)
    row["compat_runner_err"] = runner_error(bridge, tokens)
    if case in CUT:
        row["cut_refused"] = cut_refusal(pristine, case)
    return row


#: cases run again with a component the runner reads taken from one block (the second's) after reading
CUT = {"bert": "ln2", "bloom": "attn.o"}


def cut_refusal(pristine, case: str) -> str | None:
    """What the data runner says of a fresh bridge around ``pristine`` once :data:`CUT`'s component is
    taken from its second block (the weights read before): its refusal, or None where it runs."""
    from compscope.data.runner import runner_for

    cut = boot(copy.deepcopy(pristine), case)
    hw = compscope.load(cut)
    *path, name = ["blocks", "1", *CUT[case].split(".")]
    delattr(cut.get_submodule(".".join(path)), name)
    try:
        runner_for(cut, hw)
    except compscope.CompscopeError as e:
        return f"{type(e).__name__}: {e}"
    return None


if __name__ == "__main__":
    import transformer_lens  # noqa: F401  (fail here, not halfway, when it is missing)
    from importlib.metadata import version

    print(json.dumps({"transformer_lens": version("transformer-lens"), "transformers": transformers.__version__}))
    for case in sys.argv[1:] or [*CASES, *UNSUPPORTED]:
        try:
            print(json.dumps(check(case) if case in CASES else refusal(case)), flush=True)
        except Exception as e:  # reported as a failed case, not a lost run
            print(json.dumps({"case": case, "error": f"{type(e).__name__}: {e}"}), flush=True)
