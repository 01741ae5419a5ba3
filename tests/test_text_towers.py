"""The BERT-built text towers of dual encoders: ALIGN's and Chinese-CLIP's (BERT), CLAP's and AltCLIP's
(RoBERTa's positions; AltCLIP's layers under ``roberta.``). Read from the text model and from the whole dual encoder's folder (its vision or audio
tower not read), and run on data as the text encoder alone, built as the class the config names
(transformers' auto classes build no text model of these alone); the family-wide suites run the tiny
variants through hooks, processing, runner and interventions besides."""

from __future__ import annotations

import pytest
import torch

import compscope
from compscope.data.runner import layer_state, runner_for

transformers = pytest.importorskip("transformers")

from hf_tiny import perturbed  # noqa: E402

_TEXT = dict(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
             max_position_embeddings=24, pad_token_id=1)
TOWERS = {  # dual encoder -> (its text config and model classes, the family, what else it holds, tiny settings)
    "align": ("AlignTextConfig", "AlignTextModel", "bert_text_tower", "vision",
              dict(num_channels=3, image_size=16, hidden_dim=32, width_coefficient=0.1, depth_coefficient=0.1)),
    "chinese_clip": ("ChineseCLIPTextConfig", "ChineseCLIPTextModel", "bert_text_tower", "vision",
                     dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                          image_size=8, patch_size=4)),
    "altclip": ("AltCLIPTextConfig", "AltCLIPTextModel", "altclip_text", "vision",
                dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                     patch_size=4)),
    "clap": ("ClapTextConfig", "ClapTextModel", "clap_text", "audio",
             dict(hidden_size=16, num_mel_bins=16, spec_size=32, patch_size=4, patch_stride=4, window_size=2,
                  depths=[1], num_attention_heads=[2], patch_embeds_hidden_size=8, enable_fusion=False)),
}


def _text_model(kind: str):
    config_cls, model_cls = TOWERS[kind][:2]
    if not hasattr(transformers, model_cls):
        pytest.skip(f"transformers {transformers.__version__} has no {model_cls}")
    config = getattr(transformers, config_cls)(**_TEXT)
    return perturbed(lambda: getattr(transformers, model_cls)(config), seed=3, scale=0.25)


@pytest.mark.parametrize("kind", sorted(TOWERS))
def test_a_text_tower_folder_is_read_and_runs_as_the_class_its_config_names(tmp_path, kind):
    """The text model saved alone: read as the object itself (BERT's post-LN layers, learned positions,
    CLAP's from row pad_token_id + 1, no unembedding); run as that class, its heads recomputed from the
    weights equal to what each layer adds."""
    model = _text_model(kind)
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(model)
    assert hw.meta.family == TOWERS[kind][2] and not hw.causal and hw.W_U is None and hw.norm_placement == "post"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    first = 2 if kind in ("clap", "altclip") else 0  # (RoBERTa's positions: the first token reads row pad_token_id + 1)
    body = getattr(model, "roberta", model)
    assert torch.equal(hw.W_pos, body.embeddings.position_embeddings.weight.detach()[first:].T)
    layers = getattr(body.encoder, "layers", None) or body.encoder.layer  # (AltCLIP's in transformers 5: layers)
    assert torch.equal(hw.W_Q[1, 0], layers[1].attention.self.query.weight.detach()[:8])
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == TOWERS[kind][1]
    tr = runner.trace(torch.randint(2, 40, (2, 10), generator=torch.Generator().manual_seed(1)))
    assert runner._agreed
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)


@pytest.mark.parametrize("kind", sorted(TOWERS))
def test_the_text_tower_of_a_dual_encoder_folder_is_read_and_runs_alone(tmp_path, kind):
    """The whole dual encoder saved: its text tower read as the text model's own weights (the other tower
    not, said), and run on data by the text model inside the loaded dual encoder."""
    text = _text_model(kind)
    config_cls, _, family, other, settings = TOWERS[kind]
    outer = getattr(transformers, config_cls.replace("TextConfig", "Config"))
    config = outer(**{"text_config": text.config.to_dict(), f"{other}_config": settings})
    model = getattr(transformers, config_cls.replace("TextConfig", "Model"))(config).eval()
    missing, unexpected = model.text_model.load_state_dict(text.state_dict(), strict=False)
    assert not missing and all(k.startswith("pooler.") for k in unexpected)  # (Chinese-CLIP's has no pooler)
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(text)
    assert hw.meta.family == family
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_V", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert any(f"the text encoder of {'an' if kind[0] in 'aeiou' else 'a'} {kind} model" in n and f"{other} not read" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    tr = runner.trace(torch.randint(2, 40, (2, 10), generator=torch.Generator().manual_seed(2)))
    assert runner._agreed
    torch.testing.assert_close(layer_state(hw, 1, tr.resid[1]).out, tr.attn_out[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("outer", ["BridgeTowerModel", "BridgeTowerForMaskedLM", "BridgeTowerForImageAndTextRetrieval"])
def test_bridgetowers_text_encoder_is_read_from_its_folders_and_runs_alone(tmp_path, outer):
    """BridgeTower's text model (a RoBERTa; transformers does not export its class) saved alone and inside the whole
    model or a head model (under ``bridgetower.``): read as the text model's own weights (the vision tower and the
    cross-modal layers not), each folder run as the class its config names, every layer recomputed from the weights
    equal to what it adds."""
    from hf_tiny import BY_ID, build

    text = build(BY_ID["bridgetower-text-roberta"])
    text.save_pretrained(tmp_path / "text")
    hw = compscope.load(tmp_path / "text")
    assert hw.meta.family == "bridgetower_text" and not hw.causal and hw.W_U is None and hw.norm_placement == "post"
    assert torch.equal(hw.W_pos, text.embeddings.position_embeddings.weight.detach()[2:].T)
    d = text.config.hidden_size
    vision = dict(hidden_size=64, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                  patch_size=4)  # (its vision blocks have hidden_size // 64 heads)
    config = transformers.BridgeTowerConfig(text_config=text.config.to_dict(), vision_config=vision, hidden_size=d,
                                            num_attention_heads=2, num_hidden_layers=1)
    model = getattr(transformers, outer)(config).eval()
    base = getattr(model, "bridgetower", model)
    assert not base.text_model.load_state_dict(text.state_dict(), strict=False).missing_keys
    model.save_pretrained(tmp_path / "whole")
    whole = compscope.load(tmp_path / "whole")
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_V", "b_O", "W_E", "W_pos"):
        assert torch.equal(getattr(whole, name), getattr(hw, name)), name
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    folders = [(tmp_path / "text", hw), (tmp_path / "whole", whole)]
    if "bridgetower_text_model" not in CONFIG_MAPPING_NAMES:  # (transformers 4 knows no such type: no folder of the
        # text model alone runs, and the runner says so)
        with pytest.raises(compscope.OptionError, match="transformers could not load the model to run it"):
            runner_for(tmp_path / "text", progress=False, device="cpu")
        folders = folders[1:]
    for folder, read in folders:
        runner = runner_for(folder, progress=False, device="cpu")
        assert type(runner.model).__name__ == (outer if read is whole else "BridgeTowerTextModel")
        tr = runner.trace(torch.randint(2, 40, (2, 10), generator=torch.Generator().manual_seed(4)))
        for layer in range(read.n_layers):
            torch.testing.assert_close(layer_state(read, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                       rtol=1e-5)
