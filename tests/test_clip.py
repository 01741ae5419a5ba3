"""CLIP's text encoder: read from a CLIPTextModel and from a whole CLIPModel's folder (its vision tower
not read), run on data as the text encoder alone, causally and within its position table (the
family-wide suites run the tiny variant through hooks, processing, runner and interventions besides)."""

from __future__ import annotations

import pytest
import torch

import compscope
from compscope.data.runner import layer_state, runner_for

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, build, perturbed, random_ids  # noqa: E402

VID = "clip-text-causal"


def test_the_text_model_of_a_clip_folder_is_read_and_runs_alone(tmp_path):
    """A CLIPModel saved: its text encoder read as the CLIPTextModel's own weights (positions as the learned
    table, no unembedding, causal), the vision tower not; run on data by the text model inside the loaded
    CLIPModel, its heads recomputed from the weights equal what each layer adds."""
    text = build(BY_ID[VID])
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                  patch_size=4)
    model = transformers.CLIPModel(transformers.CLIPConfig(text_config=text.config.to_dict(), vision_config=vision))
    model.text_model.load_state_dict(getattr(text, "text_model", text).state_dict())  # (transformers 4 nests it)
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(text)
    assert hw.meta.family == "clip_text" and hw.causal and hw.W_U is None and hw.positions == "learned"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    base = getattr(text, "text_model", text)
    torch.testing.assert_close(hw.W_pos, base.embeddings.position_embedding.weight.detach().T, atol=0, rtol=0)
    assert any("the text encoder of a clip model" in n and "vision not read" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert runner.n_ctx == 24  # (its position table's length: no longer sequence runs)
    tr = runner.trace(random_ids(seq=24))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)


def test_a_clip_text_file_without_its_embeddings_is_refused_by_name(tmp_path):
    from safetensors.torch import load_file, save_file

    build(BY_ID[VID]).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    name = next(k for k in sd if k.endswith("embeddings.token_embedding.weight"))
    del sd[name]
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.UnsupportedModelError, match="no tensor named like 'text_model.embeddings.token_embedding"):
        compscope.load(tmp_path)


@pytest.mark.parametrize("config_cls, model_cls", [
    ("MetaClip2TextConfig", "MetaClip2TextModel"), ("OwlViTTextConfig", "OwlViTTextModel"),
    ("Owlv2TextConfig", "Owlv2TextModel"), ("GroupViTTextConfig", "GroupViTTextModel"),
    ("XCLIPTextConfig", "XCLIPTextModel"), ("CLIPSegTextConfig", "CLIPSegTextModel"),
    ("SiglipTextConfig", "SiglipTextModel"), ("Siglip2TextConfig", "Siglip2TextModel")])
def test_the_text_towers_built_as_clips_read_and_run_as_clips(config_cls, model_cls):
    """Each model's text tower (CLIP's layout under its own classes) read by the CLIP text family (SigLIP's, which
    attends both ways, by its own), and run: the runner's first trace is checked against the module's attention,
    and the heads recomputed from the weights equal what each layer adds."""
    if not hasattr(transformers, model_cls):
        pytest.skip(f"transformers {transformers.__version__} has no {model_cls}")
    config = getattr(transformers, config_cls)(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                                num_attention_heads=2, max_position_embeddings=20, bos_token_id=0,
                                                eos_token_id=1, pad_token_id=1)
    model = perturbed(lambda: getattr(transformers, model_cls)(config), seed=5, scale=0.25)
    g = torch.Generator().manual_seed(5)
    hw = compscope.load(model)
    siglip = config_cls.startswith("Siglip")
    assert (hw.meta.family, hw.causal) == (("siglip_text", False) if siglip else ("clip_text", True))
    assert hw.W_pos.shape == (16, 20)
    runner = runner_for(model, hw, progress=False)
    tr = runner.trace(torch.randint(2, 40, (2, 12), generator=g))
    for layer in range(2):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)


@pytest.mark.parametrize("whole", [False, True])
def test_aimv2s_text_encoder_is_read_from_its_folders_and_runs_causally(tmp_path, whole):
    """AIMv2's text model saved alone or in a whole Aimv2Model (the vision tower not read): RMSNorm gains, biases
    on all four projections, causal, no unembedding; run on data as the class the folder names with an attention
    mask of ones (without one transformers' text model attends both ways, which the weights read causally would not
    compute), every layer recomputed from the weights equals what it adds."""
    text = build(BY_ID["aimv2-text-rms-biases"])
    if whole:
        vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                      patch_size=4)
        model = transformers.Aimv2Model(transformers.Aimv2Config(text_config=text.config.to_dict(), vision_config=vision))
        model.text_model.load_state_dict(text.state_dict())
    else:
        model = text
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(text)
    assert hw.meta.family == "aimv2_text" and hw.causal and hw.W_U is None and hw.attn_norm.kind == "rmsnorm"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    torch.testing.assert_close(hw.attn_norm.weight[1], text.encoder.layers[1].rms_norm1.weight.detach(), atol=0, rtol=0)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == ("Aimv2Model" if whole else "Aimv2TextModel") and runner.n_ctx == 24
    tr = runner.trace(random_ids(seq=24))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=2e-5, rtol=0)


@pytest.mark.parametrize("whole", [False, True])
def test_tipsv2s_text_encoder_is_read_with_its_scale_and_sinusoids_and_runs_both_ways(tmp_path, whole):
    """TIPSv2's text model saved alone or in a whole Tipsv2Model (the vision tower not read): what its embeddings
    module gives a sequence is ``W_E`` at the tokens plus ``W_pos`` at their positions (the token embeddings times
    sqrt(d), the sinusoids transformers computes and does not save); the table's first pair of rows is sin(p) and
    cos(p) (frequency 1); heads attend both ways, and every layer recomputed from the weights equals what it adds."""
    text = build(BY_ID["tipsv2-text-scaled-sinusoids"])
    if whole:
        vision = dict(hidden_size=text.config.hidden_size, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, image_size=8, patch_size=4)
        model = transformers.Tipsv2Model(transformers.Tipsv2Config(text_config=text.config.to_dict(),
                                                                   vision_config=vision))
        model.text_model.load_state_dict(text.state_dict())
    else:
        model = text
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    d = text.config.hidden_size
    assert hw.meta.family == "tipsv2_text" and not hw.causal and hw.W_U is None and hw.W_pos.shape == (d, 24)
    assert any("the mean of the final states" in n for n in hw.meta.notes)
    p = torch.arange(24, dtype=torch.float32)
    torch.testing.assert_close(hw.W_pos[0], p.sin(), atol=1e-6, rtol=0)
    torch.testing.assert_close(hw.W_pos[d // 2], p.cos(), atol=1e-6, rtol=0)
    ids = random_ids(seq=24)
    with torch.no_grad():
        embedded = text.embeddings(input_ids=ids)
    torch.testing.assert_close(hw.W_E[:, ids].permute(1, 2, 0) + hw.W_pos.T, embedded, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(hw.W_E, text.embeddings.token_embedding.weight.detach().T)  # (scaled: sqrt(d))
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == ("Tipsv2Model" if whole else "Tipsv2TextModel") and runner.n_ctx == 24
    tr = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=2e-5, rtol=0)


def test_tipsv2s_unscaled_and_odd_width_text_encoders_read_as_the_model_embeds(tmp_path):
    """``scale_sqrt_depth`` false: the token embeddings as they are; an odd width (15, three heads of 5): the
    sinusoids' last row zero, as the model pads them; a width below 4 (no frequencies) refused by name."""
    if not hasattr(transformers, "Tipsv2TextConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Tipsv2TextConfig")
    for width, heads, scaled in ((16, 2, False), (15, 3, True)):
        config = transformers.Tipsv2TextConfig(vocab_size=40, hidden_size=width, intermediate_size=32,
                                               num_hidden_layers=1, num_attention_heads=heads,
                                               max_position_embeddings=12, scale_sqrt_depth=scaled)
        model = perturbed(lambda: transformers.Tipsv2TextModel(config), seed=3, scale=0.25)
        hw = compscope.load(model)
        factor = width ** 0.5 if scaled else 1.0
        torch.testing.assert_close(hw.W_E, factor * model.embeddings.token_embedding.weight.detach().T, atol=1e-6,
                                   rtol=1e-6)
        torch.testing.assert_close(hw.W_pos, model.embeddings.position_embedding.weights.T, atol=0, rtol=0)
        if width % 2:
            assert torch.equal(hw.W_pos[-1], torch.zeros(12)) and hw.W_pos[:-1].abs().sum() > 0
    import json

    from safetensors.torch import save_file

    config = transformers.Tipsv2TextConfig(vocab_size=40, hidden_size=4, intermediate_size=8, num_hidden_layers=1,
                                           num_attention_heads=1, max_position_embeddings=12)
    model = transformers.Tipsv2TextModel(config)  # (transformers builds no narrower one: its table divides by zero)
    narrow = {k: v[tuple(slice(0, 2) if n == 4 else slice(None) for n in v.shape)].contiguous()
              for k, v in model.state_dict().items() if "position" not in k}
    save_file(narrow, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({**config.to_dict(), "hidden_size": 2}))
    with pytest.raises(compscope.UnsupportedModelError, match="hidden_size 2 is below 4"):
        compscope.load(tmp_path)


def test_a_tipsv2_file_whose_fused_projection_is_no_three_parts_is_refused_by_name(tmp_path):
    """A released-format TIPSv2 text file whose ``in_proj_weight`` is not three stacked projections: the error names
    the tensor and its file, and no head is read from it."""
    from safetensors.torch import load_file, save_file

    build(BY_ID["tipsv2-text-scaled-sinusoids"]).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    name = "transformer.resblocks.1.attn.in_proj_weight"
    sd[name] = sd[name][:-1].clone()
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.UnsupportedModelError,
                       match=r"model\.safetensors.*in_proj_weight has shape \(95, 32\), expected \(3 d, \.\.\.\)"):
        compscope.load(tmp_path)
