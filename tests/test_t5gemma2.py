"""T5Gemma 2's encoder: a whole model's folder and the encoder's own, read as the text model transformers runs (its
end-of-image token's own embedding in ``W_E`` where transformers uses it, and only there), every layer recomputed from
the weights equal to what the running model adds; an even sliding window, which transformers splits unevenly around
each token, exact on the sequences the runner keeps to and not beyond. The family-wide suites (hooks, processing,
runner, interventions by brute force, symmetries) run the encoder variant ``t5gemma2-encoder-odd-window`` of
``hf_tiny``."""

from __future__ import annotations

import json

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "T5Gemma2Config"):
    pytest.skip(f"transformers {transformers.__version__} has no T5Gemma 2", allow_module_level=True)

ATOL = 2e-5
EOI = 57


def _config(window: int, whole: bool = True):
    from hf_tiny import _T5GEMMA2_TEXT, _T5GEMMA2_VISION

    text = dict(_T5GEMMA2_TEXT, sliding_window=window)
    enc = dict(text_config=text, vision_config=_T5GEMMA2_VISION, mm_tokens_per_image=4, boi_token_index=56,
               eoi_token_index=EOI, image_token_index=58)
    if not whole:
        return transformers.T5Gemma2EncoderConfig(**enc)
    return transformers.T5Gemma2Config(encoder=enc, decoder={k: v for k, v in text.items() if k != "dropout_rate"},
                                       vocab_size=text["vocab_size"], image_token_index=58)


def _saved(tmp_path, cls: str, window: int):
    from hf_tiny import perturbed

    whole = cls != "T5Gemma2Encoder"
    model = perturbed(lambda: getattr(transformers, cls)(_config(window, whole)), seed=3, scale=0.2)
    with torch.no_grad():  # (zeros at initialisation: a row of its own, unlike the scaled embedding row)
        _text_model(model).embed_tokens.eoi_embedding.copy_(torch.randn(32, generator=torch.Generator().manual_seed(4)))
    model.save_pretrained(tmp_path)
    return model


def _encoder(model):
    inner = getattr(model, "model", model)
    return getattr(inner, "encoder", inner)


def _text_model(model):
    return _encoder(model).text_model


def _ids(n: int, seed: int = 5) -> torch.Tensor:
    ids = torch.randint(3, 56, (2, n), generator=torch.Generator().manual_seed(seed))
    ids[0, 1] = EOI  # (the end-of-image token among them)
    return ids


@pytest.mark.parametrize("cls", ["T5Gemma2ForConditionalGeneration", "T5Gemma2Model"])
def test_a_whole_t5gemma2_folder_is_read_as_its_encoders_text_model_and_runs_within_its_split_window(tmp_path, cls):
    """An even window (6): transformers' mask takes the query, 2 keys behind and 3 ahead; held as |i − j| ≤ 2, which
    agrees on sequences of up to 3 tokens: the runner keeps to them and every layer recomputed from the weights
    equals what the model adds; on 4 tokens the sliding layers differ (the third key ahead), so the limit is tight.
    The end-of-image token enters as eoi_embedding, unscaled: that column of W_E."""
    from compscope.core.attention import attention_forward
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import capture

    model = _saved(tmp_path, cls, window=6)
    hw = compscope.load(tmp_path)
    text = _text_model(model)
    assert hw.meta.family == "t5gemma2_encoder" and not hw.causal and hw.W_U is None
    assert hw.sliding_window == (3, 3, None) and hw.n_layers == 3
    assert torch.equal(hw.W_Q[1, 2], text.layers[1].self_attn.q_proj.weight.detach()[16:24])
    assert any("the vision tower, its projector and the decoder not read" in n for n in hw.meta.notes)
    assert any("held as |i - j| <= 2" in n and "longer than 3 tokens" in n for n in hw.meta.notes)
    assert any(f"column {EOI} (eoi_token_index) is eoi_embedding" in n for n in hw.meta.notes)
    ids = _ids(3)
    with torch.no_grad():
        torch.testing.assert_close(hw.W_E[:, ids].permute(1, 2, 0), text.embed_tokens(ids), atol=1e-6, rtol=0)
    assert not torch.allclose(hw.W_E[:, EOI], text.embed_tokens.weight[EOI].detach() * 32 ** 0.5)

    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == cls and runner.n_ctx == 3
    trace = runner.trace(ids)
    for layer in range(3):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    with pytest.raises(compscope.OptionError, match="longer than"):
        runner.trace(_ids(4))
    cap = capture(_encoder(model), "t5gemma2", _ids(4))  # (the model itself, past the limit)
    gaps = [float((attention_forward(hw, layer, cap.resid[layer]) - cap.attn_out[layer]).abs().max())
            for layer in range(3)]
    assert gaps[0] > 1e-3 and gaps[1] > 1e-3 and gaps[2] < ATOL, gaps


def test_an_encoder_folder_takes_token_256000_as_transformers_builds_it_whatever_its_config_says(tmp_path):
    """T5Gemma2Encoder saved alone, its config's eoi_token_index 57: transformers builds the encoder alone with
    256,000 (beyond this vocabulary), so token 57 enters as its scaled row and W_E says so; an odd window (5) is two
    keys on either side, exact on any length."""
    from compscope.data.runner import layer_state, runner_for

    model = _saved(tmp_path, "T5Gemma2Encoder", window=5)
    assert json.loads((tmp_path / "config.json").read_text())["eoi_token_index"] == EOI
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "t5gemma2_encoder" and hw.sliding_window == (3, 3, None)
    assert not any("eoi_embedding" in n for n in hw.meta.notes)
    assert any("the vision tower and its projector not read" in n for n in hw.meta.notes)
    ids = _ids(12)
    with torch.no_grad():
        torch.testing.assert_close(hw.W_E[:, ids].permute(1, 2, 0), model.text_model.embed_tokens(ids), atol=1e-6,
                                   rtol=0)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "T5Gemma2Encoder" and runner.n_ctx is None
    trace = runner.trace(ids)
    for layer in range(3):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)


def test_a_t5gemma2_folder_without_the_encoders_settings_or_its_eoi_embedding_is_refused_by_name(tmp_path):
    from safetensors.torch import load_file, save_file

    _saved(tmp_path, "T5Gemma2Model", window=6)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "encoder": {**config["encoder"], "text_config": 3}}))
    with pytest.raises(compscope.LoadError, match="config key 'encoder': expected the encoder's settings"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["encoder.embed_tokens.eoi_embedding"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.LoadError, match="no tensor 'embed_tokens.eoi_embedding'"):
        compscope.load(tmp_path)


def test_a_text_config_saved_as_what_differs_from_the_defaults_reads_as_the_whole_one(tmp_path):
    """The encoder's ``text_config`` saved as what differs from ``T5Gemma2TextConfig``'s defaults (as transformers 4
    saved nested configs): the settings left out completed with transformers' defaults (without them, compscope
    refused the first missing one by name), so the heads, rotary, norms and scale equal those of the whole config."""
    _saved(tmp_path / "whole", "T5Gemma2ForConditionalGeneration", window=5)
    full = compscope.load(tmp_path / "whole")
    cfg = json.loads((tmp_path / "whole" / "config.json").read_text())
    text = cfg["encoder"]["text_config"]
    defaults = transformers.T5Gemma2TextConfig().to_dict()
    kept = {k: v for k, v in text.items() if k == "model_type" or defaults.get(k) != v}
    dropped = set(text) - set(kept)
    assert {"rms_norm_eps", "attention_bias"} <= dropped, dropped
    cfg["encoder"]["text_config"] = kept
    (tmp_path / "whole" / "config.json").write_text(json.dumps(cfg))
    diffed = compscope.load(tmp_path / "whole")
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(diffed, name), getattr(full, name)), name
    torch.testing.assert_close(diffed.rotary.inv_freq, full.rotary.inv_freq, atol=0, rtol=0)
    assert diffed.attn_norm.eps == full.attn_norm.eps and diffed.scale == full.scale
