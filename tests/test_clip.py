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
    runner = runner_for(tmp_path, progress=False)
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
    runner = runner_for(tmp_path, progress=False)
    assert type(runner.model).__name__ == ("Aimv2Model" if whole else "Aimv2TextModel") and runner.n_ctx == 24
    tr = runner.trace(random_ids(seq=24))
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=2e-5, rtol=0)
