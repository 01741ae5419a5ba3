"""BigBird and BigBird-Pegasus's encoder, read as the full attention transformers runs on short sequences. A folder of the released kind
(block-sparse attention, embeddings rescaled, no q/k/v biases) is read with its limit in its notes; run from the
folder it is switched to full attention before it is hooked, every layer recomputed from the weights equals what it
adds (on the longest sequence within the limit), and a longer sequence is refused by name. The family-wide suites
(hooks, processing, runner, interventions by brute force) run the tiny variant of ``hf_tiny``."""

from __future__ import annotations

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")

from hf_tiny import VOCAB, perturbed, random_ids  # noqa: E402


def test_a_block_sparse_folder_is_read_and_run_as_full_attention_within_its_limit(tmp_path):
    from compscope.data.runner import layer_state, runner_for

    config = transformers.BigBirdConfig(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                        intermediate_size=48, max_position_embeddings=40, block_size=2,
                                        num_random_blocks=1, use_bias=False, rescale_embeddings=True)
    assert config.attention_type == "block_sparse"
    model = perturbed(lambda: transformers.BigBirdForMaskedLM(config), seed=2, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    limit = (5 + 2 * 1) * 2
    assert hw.meta.family == "big_bird" and not hw.causal and hw.b_Q is None and hw.sliding_window == (None, None)
    assert any(f"at most {limit} tokens" in n for n in hw.meta.notes)
    emb = model.bert.embeddings
    torch.testing.assert_close(hw.W_E, emb.word_embeddings.weight.detach().T * 32 ** 0.5, atol=0, rtol=1e-6)
    assert torch.equal(hw.W_pos, emb.position_embeddings.weight.detach().T)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert runner.n_ctx == limit
    assert runner.model.bert.attention_type == "original_full"
    ids = random_ids(seq=limit)
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    summed = (hw.W_E[:, ids] + hw.W_pos[:, None, :limit] + hw.embed_extra["W_type"][:, :1, None]).permute(1, 2, 0)
    torch.testing.assert_close(hw.attn_norm.apply(summed, 0), trace.resid[0], atol=2e-5, rtol=0)
    with pytest.raises(compscope.OptionError, match="shorter sequences"):
        runner.trace(random_ids(seq=limit + 1))


def test_a_full_attention_config_has_no_limit_and_an_unknown_attention_is_refused(tmp_path):
    config = transformers.BigBirdConfig(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                        intermediate_size=48, max_position_embeddings=40, attention_type="original_full")
    transformers.BigBirdModel(config).save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert not any("at most" in n for n in hw.meta.notes) and hw.b_Q is not None
    (tmp_path / "config.json").write_text((tmp_path / "config.json").read_text().replace('"original_full"', '"dilated"'))
    with pytest.raises(compscope.UnsupportedModelError, match="attention_type"):
        compscope.load(tmp_path)


def test_a_bigbird_pegasus_folder_is_read_as_its_encoder_and_run_as_full_attention_within_its_limit(tmp_path):
    """BigBird-Pegasus saved whole, block-sparse, without biases (its default): its encoder's pre-LN layers read, run
    from the folder switched to full attention, every layer recomputed from the weights equal to what it adds; the
    last norm (``layernorm_embedding``) the final one; a longer sequence refused by name."""
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import _BART

    config = transformers.BigBirdPegasusConfig(**_BART, block_size=2, num_random_blocks=1)
    assert config.attention_type == "block_sparse" and not config.use_bias
    model = perturbed(lambda: transformers.BigBirdPegasusForConditionalGeneration(config), seed=4, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = model.get_encoder()
    assert hw.meta.family == "bigbird_pegasus_encoder" and hw.norm_placement == "pre" and hw.b_Q is None
    assert torch.equal(hw.final_norm.weight[0], enc.layernorm_embedding.weight.detach())
    assert torch.equal(hw.W_V[1, 0], enc.layers[1].self_attn.self.value.weight.detach()[:8])
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert runner.n_ctx == 14 and runner.model.get_encoder().attention_type == "original_full"
    ids = random_ids(seq=14)
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    torch.testing.assert_close((hw.W_E[:, ids] + hw.W_pos[:, None, :14]).permute(1, 2, 0), trace.resid[0],
                               atol=2e-5, rtol=0)
    with pytest.raises(compscope.OptionError, match="shorter sequences"):
        runner.trace(random_ids(seq=15))
