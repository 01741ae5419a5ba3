"""The model card's description of rotary positions, against the configs the tiny models were
built from (base ``rope_theta``, linear scaling ``factor``, partial rotary dims)."""

from __future__ import annotations

import pytest

import compscope
from compscope.core.card import card_rows

pytest.importorskip("transformers")


@pytest.mark.parametrize("variant, expected", [
    ("llama-mha", "rotary on 8 of 8 head dims (half pairs), base 300"),
    # linear scaling by 2 divides every frequency by 2: the base stays 1000
    ("llama-linear-rope-tied", "rotary on 8 of 8 head dims (half pairs), base 1000, positions scaled by 0.5"),
    # sliding layers base 50, full-attention layers 3000
    ("gemma3-text", "rotary on 8 of 8 head dims (half pairs), base 50, 3000"),
    # partial_rotary_factor 0.5 of d_head 8: two pairs, base 10000
    ("neox-sequential-no-bias", "rotary on 4 of 8 head dims (half pairs), base 10000"),
    # 0.25 of 8: one pair, whose frequency is base^0 = 1 whatever the base
    ("neox-partial-rotary-parallel", "rotary on 2 of 8 head dims (half pairs), one frequency 1"),
    # Gemma 4: heads held 16 wide; the local layers' 8-wide heads turn 4 pairs, the global layers' proportional map
    # 0.5 of their 8 pairs: the base is not read where the last pairs do not turn
    ("gemma4-widths-k-eq-v-scalars", "rotary on 16 of 16 head dims (half pairs), on 4 layers only the first pairs "
     "turn (4 of 8; the model's notes say how)"),
    # six heads: 2^-2, 2^-4, 2^-6, 2^-8 (four heads' slopes), then 2^-1, 2^-3
    ("bloom-alibi", "ALiBi: logit bias -m_h (i - j), slopes m_h from 0.5 to 0.003906 over 6 heads"),
])
def test_card_states_the_rotary_base_of_the_config(variant, expected):
    from hf_tiny import BY_ID, build

    rows = dict(card_rows(compscope.load(build(BY_ID[variant]))))
    assert rows["positions"] == expected


def test_every_family_variant_has_a_card():
    """Every tiny variant (MHA/GQA/MQA, partial and scaled rotary, sliding windows, QK-norm, post-LN)
    gets a card with its shapes, as its config states them, and its unembedding said to be tied where
    the config ties it, but for Gemma's, whose W_E carries the √d scale that W_U lacks, Cohere's, whose W_U
    carries the logit scale that W_E lacks, and Granite's, whose W_E carries its embedding multiplier and
    W_U its logit divisor."""
    from hf_tiny import VARIANTS, attention_config, attention_layers, build

    import json

    from compscope.core.card import card_dict

    for v in VARIANTS:
        model = build(v)
        hw = compscope.load(model)
        rows = dict(card_rows(hw))
        cfg = attention_config(model, v.kind)
        assert rows["layers"] == str(attention_layers(model, v.kind)) and rows["d_model"] == str(cfg.hidden_size), v.id
        assert rows["heads per layer"] == str(cfg.num_attention_heads), v.id
        # the card as JSON (strict: no NaN), its numbers those of the config and its rows those printed
        card = json.loads(json.dumps(card_dict(hw), allow_nan=False))
        assert (card["layers"], card["heads"], card["d_model"]) == (
            attention_layers(model, v.kind), cfg.num_attention_heads, cfg.hidden_size), v.id
        assert card["card"] == rows and card["notes"] == list(hw.meta.notes), v.id
        if card["rotary"] is not None:
            assert [len(r) for r in card["rotary"]["inv_freq"]] == [hw.rotary.inv_freq.shape[1]] * card["layers"], v.id
        assert card["alibi_slopes"] is None or len(card["alibi_slopes"]) == card["heads"], v.id
        assert card["sliding_window"] is None or len(card["sliding_window"]) == card["layers"], v.id
        # (not tied by value: Gemma's, RecurrentGemma's, Granite's, BioGPT's, XGLM's and CTRL's W_E scaled, Cohere's W_U;
        # BLOOM's W_E the embeddings LayerNorm's output; OPT-350m's W_E and W_U through projections of their own;
        # MiniCPM3's W_E scaled and W_U divided)
        tied = getattr(cfg, "tie_word_embeddings", False) and not cfg.model_type.startswith((
            "gemma", "recurrent_gemma", "cohere", "granite", "bloom", "biogpt", "xglm", "ctrl", "minicpm3", "kosmos")) and \
            getattr(cfg, "word_embed_proj_dim", cfg.hidden_size) == cfg.hidden_size
        assert rows["unembedding"].endswith(", tied (W_E transposed)") == tied or rows["unembedding"] == "none", v.id


def test_the_card_says_where_the_norms_are():
    """OLMo-2 reads the raw residual and normalises q and k over the whole layer; Gemma 3 per head;
    OLMo's LayerNorms have no parameters."""
    from hf_tiny import BY_ID, build

    rows = dict(card_rows(compscope.load(build(BY_ID["olmo2-layer-qk-norm"]))))
    assert rows["normalisation"] == "none before the attention"
    assert rows["QK-norm"] == "rmsnorm, eps=1e-05, over all heads of a layer"
    assert rows["attention-output norm"] == "rmsnorm, eps=1e-05"
    assert dict(card_rows(compscope.load(build(BY_ID["gemma3-text"]))))["QK-norm"].endswith(", per head")
    rows = dict(card_rows(compscope.load(build(BY_ID["olmo-parameter-free-layernorm"]))))
    assert rows["normalisation"] == "pre-norm: layernorm, eps=1e-05, no gain"
