"""Positions beside the residual. DeBERTa (v1, v2, v3): disentangled attention held as position queries and keys
(``pos_Q``, ``pos_K``) beside the content's. MPNet: a learned bias on the logits by offset bucket (``rel_bias``).
The offset-to-row and offset-to-bucket maps against hand-worked values and transformers' own; the logits against a
loop over every query, key and head in numpy; the previous-token scores from the weights against their formulas;
folders read and run; the settings compscope does not hold refused by name. The family-wide suites (hooks,
processing, runner, interventions by brute force) run the tiny variants of ``hf_tiny``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import compscope
from compscope.core.attention import bias_bucket, dot_products, paired_dot_products, relative_index
from compscope.core.heads import WeightError

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, build, perturbed, random_ids  # noqa: E402

_V3 = dict(vocab_size=61, hidden_size=32, num_attention_heads=4, intermediate_size=48, num_hidden_layers=2,
           type_vocab_size=0, relative_attention=True, position_buckets=4, max_relative_positions=8,
           norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False)


def _loaded(variant_id: str = "deberta-v3-log-buckets"):
    model = build(BY_ID[variant_id])
    return compscope.load(model), model


def test_offsets_fall_in_the_rows_worked_by_hand():
    """4 buckets each side up to 8 (mid 2): |δ| < 2 exact; |δ| ≥ 2 in bucket 2 + ⌈ln(|δ|/2) / ln 3.5⌉: δ = 2 → 2,
    3 … 7 → 3 (ln 3.5 / ln 3.5 = 1 at 7), 8 … 24 → 4, 25 … → 5 and up; the row is bucket + 4, clamped to 0 … 7."""
    hw, _ = _loaded()
    assert hw.rel_buckets == (4, 8) and hw.pos_Q.shape[2] == 8
    offsets = torch.tensor([0, 1, -1, 2, -2, 3, 7, -7, 8, 24, -24, 25, -25, 100])
    want = [4, 5, 3, 6, 2, 7, 7, 1, 7, 7, 0, 7, 0, 7]
    assert relative_index(hw, offsets).tolist() == want
    exact, _ = _loaded("deberta-v2-own-position-projections")  # no buckets: offsets -6 … 5 exact, clamped beyond
    assert exact.rel_buckets == (0, 0) and exact.pos_K.shape[2] == 12
    assert relative_index(exact, torch.tensor([0, 5, 6, 40, -6, -7])).tolist() == [6, 11, 11, 11, 0, 0]


@pytest.mark.parametrize("size, top", [(4, 8), (8, 24), (256, 512), (32, 1024)])
def test_offsets_fall_in_the_rows_transformers_computes(size, top):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    hw = compscope.load(perturbed(lambda: transformers.DebertaV2Model(transformers.DebertaV2Config(
        **{**_V3, "position_buckets": size, "max_relative_positions": top}))))
    offsets = torch.arange(-3 * top, 3 * top + 1)
    want = (make_log_bucket_position(offsets, size, top).long() + size).clamp(0, 2 * size - 1)
    assert torch.equal(relative_index(hw, offsets), want)


@pytest.mark.parametrize("terms", ["both", "c2p", "p2c"])
def test_logits_equal_a_loop_over_queries_keys_and_heads(terms):
    """``q_i·k_j + q_i·pos_K[ρ(i−j)] + k_j·pos_Q[ρ(i−j)]``, the row ``ρ`` taken from the offset, in float64: 7
    queries at positions 2 … 8 against 9 keys at 0 … 8, with both position terms, or one alone (DeBERTa's
    ``pos_att_type`` of ``c2p`` or ``p2c`` only: the other table None, its term gone)."""
    hw, _ = _loaded()
    hw = hw.replace(pos_Q=None if terms == "c2p" else hw.pos_Q.double(),
                    pos_K=None if terms == "p2c" else hw.pos_K.double())
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, hw.n_heads, 7, hw.d_head, generator=g, dtype=torch.float64)
    k = torch.randn(2, hw.n_heads, 9, hw.d_head, generator=g, dtype=torch.float64)
    i, j = torch.arange(2, 9)[:, None], torch.arange(9)[None]
    got = dot_products(hw, 1, q, k, i - j).numpy()
    zero = np.zeros(tuple((hw.pos_Q if hw.pos_Q is not None else hw.pos_K)[1].shape))  # the absent table's term
    Q, K = q.numpy(), k.numpy()
    PQ, PK = (zero if t is None else t[1].numpy() for t in (hw.pos_Q, hw.pos_K))
    rows = relative_index(hw, i - j).numpy()
    assert got.shape == (2, hw.n_heads, 7, 9)
    for b in range(2):
        for h in range(hw.n_heads):
            for a in range(7):
                for c in range(9):
                    row = rows[a, c]
                    want = Q[b, h, a] @ K[b, h, c] + Q[b, h, a] @ PK[h, row] + K[b, h, c] @ PQ[h, row]
                    assert got[b, h, a, c] == pytest.approx(want, rel=1e-12, abs=1e-12)
            for d in (-3, 0, 2):  # each query with its own key at one offset: the diagonal of the loop's values
                n = 5
                qd, kd = q[b:b + 1, :, :n], k[b:b + 1, :, :n]
                row = int(relative_index(hw, torch.tensor(d)))
                want = [Q[b, h, a] @ K[b, h, a] + Q[b, h, a] @ PK[h, row] + K[b, h, a] @ PQ[h, row] for a in range(n)]
                assert paired_dot_products(hw, 1, qd, kd, d)[0, h].numpy() == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_position_queries_and_keys_are_the_layers_projections_of_the_normed_relative_embeddings():
    """``pos_K = key_proj(LN(rel_embeddings))`` per head, ``pos_Q`` with ``query_proj`` (shared keys); with their
    own projections where ``share_att_key`` is off; the scale ``1/√(3 d_head)``."""
    hw, model = _loaded()
    enc, att = model.encoder, model.encoder.layer[1].attention.self
    rel = enc.LayerNorm(enc.rel_embeddings.weight).detach()
    torch.testing.assert_close(hw.pos_K[1], att.key_proj(rel).detach().reshape(8, 4, 8).transpose(0, 1))
    torch.testing.assert_close(hw.pos_Q[1], att.query_proj(rel).detach().reshape(8, 4, 8).transpose(0, 1))
    assert hw.scale == pytest.approx((8 * 3) ** -0.5)
    own, model = _loaded("deberta-v2-own-position-projections")
    att = model.encoder.layer[0].attention.self
    rel = model.encoder.rel_embeddings.weight.detach()  # (norm_rel_ebd none: as stored)
    torch.testing.assert_close(own.pos_K[0], att.pos_key_proj(rel).detach().reshape(12, 4, 8).transpose(0, 1))
    torch.testing.assert_close(own.pos_Q[0], att.pos_query_proj(rel).detach().reshape(12, 4, 8).transpose(0, 1))


def test_previous_token_score_from_the_weights_is_its_formula():
    """Weights alone: the mean over the vocabulary of each token's embedding through the LayerNorm the layer reads
    (post-LN: the embeddings' for layer 0, the previous layer's output LayerNorm after), as query and key; the
    logit at ``δ`` is ``s (q·k + q·pos_K[ρ(δ)] + k·pos_Q[ρ(δ)])``; softmax over ``δ = −63 … 63``, the mass at 1."""
    from compscope.analysis.circuits import rotary_previous

    hw, _ = _loaded()
    got = rotary_previous(hw).numpy()
    E = hw.W_E.double().numpy()
    c = E - E.mean(0, keepdims=True)
    normed = c / np.sqrt((c**2).mean(0, keepdims=True) + hw.attn_norm.eps)
    deltas = np.arange(-63, 64)
    rows = relative_index(hw, torch.from_numpy(deltas)).numpy()
    for layer in range(hw.n_layers):
        mu = normed.mean(1) * hw.attn_norm.weight[layer].double().numpy() + hw.attn_norm.bias[layer].double().numpy()
        for h in range(hw.n_heads):
            q = hw.W_Q[layer, h].double().numpy() @ mu + hw.b_Q[layer, h].double().numpy()
            k = hw.W_K[layer, h].double().numpy() @ mu + hw.b_K[layer, h].double().numpy()
            pq, pk = hw.pos_Q[layer, h].double().numpy(), hw.pos_K[layer, h].double().numpy()
            logits = hw.scale * np.array([q @ k + q @ pk[r] + k @ pq[r] for r in rows])
            e = np.exp(logits - logits.max())
            assert got[layer, h] == pytest.approx(e[64] / e.sum(), rel=1e-5), (layer, h)


def test_a_masked_lm_folder_is_read_and_runs(tmp_path):
    """DeBERTa-v3 as a masked LM saved to a folder: its tensors under ``deberta.`` read as the base model's, no
    unembedding (an encoder's head is not read), and run on data with every layer recomputed from the weights equal
    to what the model's attention adds; the card names the positions."""
    from compscope.core.card import card_rows
    from compscope.data.runner import layer_state, runner_for

    model = perturbed(lambda: transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(**_V3)), seed=2, scale=0.2)
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(model)
    assert hw.meta.family == "deberta_v2" and hw.W_U is None and not hw.causal and hw.norm_placement == "post"
    for name in ("W_Q", "W_K", "b_Q", "W_O", "W_E", "pos_Q", "pos_K"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert dict(card_rows(hw))["positions"] == ("relative (disentangled): content-to-position and position-to-content "
                                                "logits, offsets in 4 log-spaced buckets each side up to 8")
    runner = runner_for(tmp_path, progress=False, device="cpu")
    trace = runner.trace(random_ids(seq=12))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)


@pytest.mark.parametrize("change, match", [
    ({"conv_kernel_size": 3}, "conv_kernel_size=3"),
    ({"position_biased_input": True}, "'position_biased_input' and 'relative_attention' both on"),
    ({"pos_att_type": ["c2p", "p2p"]}, "'pos_att_type'.*expected some of c2p, p2c"),
    ({"embedding_size": 16}, "'embedding_size' = 16"),
    ({"position_buckets": 4, "max_relative_positions": 3}, "log-spaced buckets need"),
])
def test_settings_compscope_does_not_hold_are_refused_by_name(tmp_path, change, match):
    config = transformers.DebertaV2Config(**_V3)
    transformers.DebertaV2Model(config).save_pretrained(tmp_path)
    import json

    desc = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**desc, **change}))
    with pytest.raises(compscope.UnsupportedModelError, match=match):
        compscope.load(tmp_path)


def test_position_queries_and_keys_are_checked():
    hw, _ = _loaded()
    with pytest.raises(WeightError, match="given only when positions are 'relative'"):
        hw.replace(positions="none")
    with pytest.raises(WeightError, match="positions 'relative' without position queries, keys"):
        hw.replace(pos_Q=None, pos_K=None)
    with pytest.raises(WeightError, match="pos_Q and pos_K have 8 and 6 relative-position rows"):
        hw.replace(pos_K=hw.pos_K[:, :, :6])
    with pytest.raises(WeightError, match=r"pos_Q has shape \(2, 4, 7, 8\)"):
        hw.replace(pos_Q=hw.pos_Q[:, :, :7], pos_K=None)
    with pytest.raises(WeightError, match=r"rel_buckets \(3, 8\): 3 buckets each side need 2 x 3"):
        hw.replace(rel_buckets=(3, 8))
    with pytest.raises(WeightError, match=r"rel_buckets \(4, 0\)"):
        hw.replace(rel_buckets=(4, 0))
    with pytest.raises(WeightError, match="one kind of positions"):
        hw.replace(W_pos=torch.zeros(hw.d_model, 5))


def test_deberta_v1_reads_its_fused_projections_and_runs_at_any_length(tmp_path):
    """DeBERTa (v1): ``in_proj`` rows per head ``[q | k | v]`` with ``q_bias`` and ``v_bias`` (no key bias); position
    keys ``pos_proj(rel)`` (no bias) and queries ``pos_q_proj(rel) + b``; the model takes the rows of a sequence's
    offsets around the table's middle (``min(seq, max_relative_positions)`` each side), the same rows compscope reads
    whole: run on sequences shorter and longer than the span, each layer recomputed equals what it adds."""
    from compscope.data.runner import layer_state, runner_for

    config = transformers.DebertaConfig(**{k: v for k, v in _V3.items() if k not in (
        "position_buckets", "norm_rel_ebd", "share_att_key")}, max_position_embeddings=32)
    model = perturbed(lambda: transformers.DebertaModel(config), seed=4, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "deberta" and hw.b_K is None and hw.rel_buckets == (0, 0) and hw.pos_K.shape[2] == 16
    att = model.encoder.layer[1].attention.self
    w = att.in_proj.weight.detach().reshape(4, 3, 8, 32)
    assert torch.equal(hw.W_Q[1], w[:, 0]) and torch.equal(hw.W_K[1], w[:, 1]) and torch.equal(hw.W_V[1], w[:, 2])
    assert torch.equal(hw.b_Q[1], att.q_bias.detach().reshape(4, 8)) and torch.equal(hw.b_V[1], att.v_bias.detach().reshape(4, 8))
    rel = model.encoder.rel_embeddings.weight.detach()
    torch.testing.assert_close(hw.pos_K[1], att.pos_proj(rel).detach().reshape(16, 4, 8).transpose(0, 1))
    torch.testing.assert_close(hw.pos_Q[1], att.pos_q_proj(rel).detach().reshape(16, 4, 8).transpose(0, 1))
    runner = runner_for(tmp_path, progress=False, device="cpu")
    for seq in (3, 14):  # (8 offsets each side: the short one reads a middle slice, the long one is clamped)
        trace = runner.trace(random_ids(seq=seq))
        for layer in range(hw.n_layers):
            torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                       atol=2e-5, rtol=0)
    with pytest.raises(compscope.UnsupportedModelError, match="talking_head=True"):
        compscope.load(perturbed(lambda: transformers.DebertaModel(transformers.DebertaConfig(
            **config.to_dict(), talking_head=True))))


# ---------------------------------------------------------------------------- MPNet: a learned bias by offset bucket

def _mpnet(pad: int = 1, **extra):
    config = transformers.MPNetConfig(vocab_size=61, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                                      num_hidden_layers=2, max_position_embeddings=40, pad_token_id=pad, **extra)
    return perturbed(lambda: transformers.MPNetForMaskedLM(config), seed=5, scale=0.2)


def test_offsets_fall_in_the_buckets_worked_by_hand():
    """32 buckets up to 128: a key before its query (δ > 0) in 0 … 15, after it in 16 … 31; |δ| < 8 exact; beyond,
    8 + ⌊ln(|δ|/8) / ln 16 · 8⌋, at most 15: δ = 15 → 9 (ln 1.875 / ln 16 · 8 = 1.81), 16 → 10, 127 → 15, 128 → 15."""
    hw = compscope.load(_mpnet())
    assert hw.rel_bias_buckets == (32, 128)
    offsets = torch.tensor([0, 3, 7, 8, 15, 16, 127, 128, 5000, -1, -8, -16, -1000])
    assert bias_bucket(hw, offsets).tolist() == [0, 3, 7, 8, 9, 10, 15, 15, 15, 17, 24, 26, 31]
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    d = torch.arange(-600, 601)  # transformers' buckets take key minus query
    assert torch.equal(bias_bucket(hw, d), MPNetEncoder.relative_position_bucket(-d))


def test_mpnet_folder_is_read_and_runs(tmp_path):
    """A masked LM saved to a folder: BERT's layers under ``attention.attn``, positions from row 2 even where the
    config's pad token is 0 (the embeddings fix the padding index at 1), the bias table per layer; run on data, every
    layer recomputed from the weights equals what it adds; the card names the bias."""
    from compscope.core.card import card_rows
    from compscope.data.runner import layer_state, runner_for

    model = _mpnet(pad=0)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "mpnet" and hw.W_U is None and not hw.causal and hw.positions == "learned"
    assert any(n.startswith("positions numbered from 2 (MPNet's") for n in hw.meta.notes)
    assert not any("pad_token_id + 1" in n for n in hw.meta.notes)
    assert torch.equal(hw.W_pos, model.mpnet.embeddings.position_embeddings.weight.detach()[2:].T)
    table = model.mpnet.encoder.relative_attention_bias.weight.detach().T
    assert torch.equal(hw.rel_bias, torch.stack([table, table]))
    att = model.mpnet.encoder.layer[1].attention.attn
    assert torch.equal(hw.W_K[1], att.k.weight.detach().reshape(4, 8, 32))
    assert dict(card_rows(hw))["positions"] == ("learned absolute, 38 positions; a learned bias on the logits by "
                                                "offset, 32 buckets (both ways) up to 128")
    runner = runner_for(tmp_path, progress=False, device="cpu")
    trace = runner.trace(random_ids(seq=30))  # (offsets up to 29: buckets 0 … 11 and 16 … 27)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    with pytest.raises(compscope.UnsupportedModelError, match="'relative_attention_num_buckets' = 16"):
        compscope.load(_mpnet(relative_attention_num_buckets=16))


def test_mpnet_positional_previous_token_score_adds_the_bias():
    """The previous-token score of the positional QK circuit: ``ℓ_ij = s (W_Q p_i)·(W_K p_j) + B[h, β(i − j)]`` over
    every key (an encoder), the mass at ``j = i − 1`` averaged over queries, in numpy."""
    from compscope.analysis.circuits import positional_previous

    hw = compscope.load(_mpnet())
    got = positional_previous(hw).numpy()
    P = hw.W_pos.double().numpy()
    n = P.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None]
    buckets = bias_bucket(hw, torch.from_numpy(i - j)).numpy()
    for layer in range(hw.n_layers):
        for h in range(hw.n_heads):
            q, k = hw.W_Q[layer, h].double().numpy() @ P, hw.W_K[layer, h].double().numpy() @ P
            logits = hw.scale * q.T @ k + hw.rel_bias[layer, h].double().numpy()[buckets]
            e = np.exp(logits - logits.max(1, keepdims=True))
            pattern = e / e.sum(1, keepdims=True)
            assert got[layer, h] == pytest.approx(pattern[np.arange(1, n), np.arange(n - 1)].mean(), rel=1e-5)
    assert not np.allclose(got, positional_previous(hw.replace(rel_bias=None, rel_bias_buckets=(0, 0))).numpy())


# ---------------------------------------------------------------------------- T5's encoder: the bias alone

_T5 = dict(vocab_size=61, d_model=32, d_kv=12, num_heads=4, d_ff=48, num_layers=2, num_decoder_layers=1,
           relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="gated-gelu")


def test_t5_offsets_fall_in_the_buckets_worked_by_hand():
    """8 buckets up to 20 (4 each way, 2 exact): a key before its query in 0 … 3, after it in 4 … 7; |δ| ≥ 2 in
    2 + ⌊ln(|δ|/2) / ln 10 · 2⌋, at most 3: δ = 6 → 2 (0.95), 7 → 3 (1.09), 20 → 3 (clamped)."""
    hw = compscope.load(perturbed(lambda: transformers.T5EncoderModel(transformers.T5Config(**_T5))))
    assert hw.meta.family == "t5_encoder" and hw.positions == "relative" and hw.rel_bias_buckets == (8, 20)
    offsets = torch.tensor([0, 1, 2, 6, 7, 20, -1, -2, -6, -7, -500])
    assert bias_bucket(hw, offsets).tolist() == [0, 1, 2, 2, 3, 3, 5, 6, 6, 7, 7]
    from transformers.models.t5.modeling_t5 import T5Attention

    d = torch.arange(-300, 301)  # transformers' buckets take key minus query
    want = T5Attention._relative_position_bucket(-d, bidirectional=True, num_buckets=8, max_distance=20)
    assert torch.equal(bias_bucket(hw, d), want)


@pytest.mark.parametrize("cls", ["T5ForConditionalGeneration", "T5EncoderModel", "UMT5EncoderModel"])
def test_t5_encoder_folders_are_read_and_run(tmp_path, cls):
    """A whole T5 (its decoder not read) or its encoder alone, saved to a folder: heads ``d_kv`` wide (48 in all over
    a 32-wide residual), no biases, unscaled logits, the first layer's bias table for every layer (UMT5: each its
    own); run on data as the encoder alone (its decoder never built), every layer recomputed from the weights equals
    what it adds."""
    from compscope.data.runner import layer_state, runner_for

    config = getattr(transformers, "UMT5Config" if cls.startswith("UMT5") else "T5Config")(**_T5)
    model = perturbed(lambda: getattr(transformers, cls)(config), seed=6, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = model.encoder
    assert hw.W_Q.shape == (2, 4, 12, 32) and hw.b_Q is None and hw.b_O is None and hw.scale == 1.0
    assert hw.W_U is None and not hw.causal and hw.norm_placement == "pre"
    assert torch.equal(hw.W_O[1, 2], enc.block[1].layer[0].SelfAttention.o.weight.detach()[:, 24:36])
    tables = [b.layer[0].SelfAttention.relative_attention_bias.weight.detach().T for b in
              (enc.block if cls.startswith("UMT5") else [enc.block[0]] * 2)]
    assert torch.equal(hw.rel_bias, torch.stack(tables))
    assert any("decoder" in n and "not read" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == ("UMT5EncoderModel" if cls.startswith("UMT5") else "T5EncoderModel")
    trace = runner.trace(random_ids(seq=25))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)


@pytest.mark.parametrize("cls", ["LongT5ForConditionalGeneration", "LongT5EncoderModel"])
def test_a_longt5_folder_with_local_attention_is_read_and_run_as_its_encoder(tmp_path, cls):
    """LongT5 with local attention, saved whole or as its encoder: T5's heads (the first layer's bias table for every
    layer) under ``LocalSelfAttention``, each layer's window ``local_radius + 1`` both ways; run as the encoder alone
    (transformers' blocks of 3 over 25 tokens, padded to 27), every layer recomputed from the weights equals what it
    adds; the weights-alone previous-token score is the bias alone over the offsets within the radius. Transient-global
    attention is refused by name."""
    from compscope.analysis.circuits import rotary_previous
    from compscope.data.runner import layer_state, runner_for

    config = transformers.LongT5Config(**_T5, local_radius=2)
    model = perturbed(lambda: getattr(transformers, cls)(config), seed=7, scale=0.2)
    model.save_pretrained(tmp_path / "local")
    hw = compscope.load(tmp_path / "local")
    enc = model.encoder
    assert hw.meta.family == "longt5_encoder" and hw.sliding_window == (3, 3) and not hw.causal
    assert torch.equal(hw.W_K[1, 3], enc.block[1].layer[0].LocalSelfAttention.k.weight.detach()[36:48])
    table = enc.block[0].layer[0].LocalSelfAttention.relative_attention_bias.weight.detach().T
    assert torch.equal(hw.rel_bias, torch.stack([table, table]))
    assert any("2 tokens on either side" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path / "local", progress=False, device="cpu")
    assert type(runner.model).__name__ == "LongT5EncoderModel"
    trace = runner.trace(random_ids(seq=25))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    got = rotary_previous(hw).numpy()
    b = table.double().numpy()[:, bias_bucket(hw, torch.arange(-2, 3)).numpy()]  # (head, offset −2 … 2)
    np.testing.assert_allclose(got[0], np.exp(b[:, 3]) / np.exp(b).sum(1), rtol=1e-6)
    glob = getattr(transformers, cls)(transformers.LongT5Config(**_T5, encoder_attention_type="transient-global"))
    glob.save_pretrained(tmp_path / "global")
    with pytest.raises(compscope.UnsupportedModelError, match="'encoder_attention_type' = 'transient-global'"):
        compscope.load(tmp_path / "global")


def test_t5_previous_token_score_from_the_weights_is_the_bias_alone():
    """No position in the residual: the weights-alone logit at every offset is the same ``q·k`` plus the bias, so
    the score is ``e^{B[h, β(1)]} / Σ_δ e^{B[h, β(δ)]}`` over ``δ = −63 … 63``."""
    from compscope.analysis.circuits import rotary_previous

    hw = compscope.load(perturbed(lambda: transformers.T5EncoderModel(transformers.T5Config(**_T5))))
    got = rotary_previous(hw).numpy()
    buckets = bias_bucket(hw, torch.arange(-63, 64)).numpy()
    for layer in range(hw.n_layers):
        for h in range(hw.n_heads):
            b = hw.rel_bias[layer, h].double().numpy()[buckets]
            assert got[layer, h] == pytest.approx(np.exp(b[64]) / np.exp(b).sum(), rel=1e-6)
