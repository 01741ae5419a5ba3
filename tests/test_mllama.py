"""Llama 3.2 Vision (``mllama``) as transformers saves it, vision tower and all: read as its language model's
self-attention layers (the cross-attention layer, which on text transformers passes over, left out and named), the
token embedding over the vocabulary alone (its 8 further rows not read), and run on text: every self-attention layer
recomputed from the weights equals what it adds, and the residual the first layer reads is ``W_E``'s column. Malformed
settings refused by name. The family-wide suites (hooks, unembedding, processing, runner, interventions by brute force)
run the tiny variant ``mllama-text-cross-attention-layer`` of ``hf_tiny``."""

from __future__ import annotations

import json
import re

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, VOCAB, _in_installed_style, build, perturbed, random_ids  # noqa: E402

ATOL = 2e-5
_VISION = dict(hidden_size=16, num_hidden_layers=1, num_global_layers=1, attention_heads=2, intermediate_size=32,
               image_size=28, patch_size=14, max_num_tiles=2, vision_output_dim=32, intermediate_layers_indices=[0],
               supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]])


def _saved(tmp_path):
    text_config = type(transformers.MllamaConfig().text_config)  # (transformers 4 does not export it)
    text = _in_installed_style(text_config, BY_ID["mllama-text-cross-attention-layer"].config)
    if "type" in text.get("rope_scaling", {}):  # (transformers 4's Mllama takes the key as rope_type alone)
        text["rope_scaling"] = {("rope_type" if k == "type" else k): v for k, v in text["rope_scaling"].items()}
    config = transformers.MllamaConfig(text_config=text, vision_config=_VISION)
    model = perturbed(lambda: transformers.MllamaForConditionalGeneration(config), seed=2, scale=0.2)
    model.save_pretrained(tmp_path)
    return model


def test_a_llama_3_2_vision_folder_is_read_and_run_as_its_language_models_self_attention(tmp_path):
    from compscope.data.runner import layer_state, runner_for

    model = _saved(tmp_path)
    lm = model.model.language_model
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "mllama_text" and hw.n_layers == 3 and hw.n_kv_heads == 2 and hw.causal
    assert any("attention on 3 of the model's 4 layers (0, 2, 3" in n and "cross-attention" in n for n in hw.meta.notes)
    assert any("the 8 rows after them" in n for n in hw.meta.notes)
    assert torch.equal(hw.W_Q[1, 2], lm.layers[2].self_attn.q_proj.weight.detach()[16:24])  # layer 1 is the model's 2
    assert torch.equal(hw.W_V[2, 1], lm.layers[3].self_attn.v_proj.weight.detach()[8:16])
    assert lm.embed_tokens.weight.shape[0] == VOCAB + 8
    assert torch.equal(hw.W_E, lm.embed_tokens.weight.detach()[:VOCAB].T)
    assert torch.equal(hw.W_U, model.lm_head.weight.detach())
    runner = runner_for(tmp_path, progress=False, device="cpu")
    ids = random_ids(seq=12)
    trace = runner.trace(ids)
    assert len(trace.resid) == 3
    for layer in range(3):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    torch.testing.assert_close(trace.resid[0], hw.W_E[:, ids].permute(1, 2, 0), atol=0, rtol=0)


def test_an_embedding_of_another_length_is_refused_by_name(tmp_path):
    from safetensors.torch import load_file, save_file

    _saved(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    name = next(k for k in tensors if k.endswith("language_model.model.embed_tokens.weight"))  # (the released name;
    # transformers 5.4 and 5.5 save it one model. deeper)
    tensors[name] = tensors[name][:VOCAB].contiguous()
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.UnsupportedModelError, match=rf"'{re.escape(name)}' has shape \({VOCAB}, 32\): expected "
                                                              rf"\(vocab_size \+ 8 = {VOCAB + 8}, d_model\)"):
        compscope.load(tmp_path)


@pytest.mark.parametrize("layers, needle", [
    ([0, 1, 2, 3], "no attention layer among 4: every layer is a cross-attention layer"),
    ([1, 7], "'cross_attention_layers' = 7"),
    ("1", "'cross_attention_layers' = '1' is not a list of layer indices")])
def test_cross_attention_layers_that_leave_none_or_name_no_layer_are_refused(tmp_path, layers, needle):
    build(BY_ID["mllama-text-cross-attention-layer"]).save_pretrained(tmp_path)  # (the language model alone)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "mllama_text_model"
    config["cross_attention_layers"] = layers
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.CompscopeError, match=needle):
        compscope.load(tmp_path)
