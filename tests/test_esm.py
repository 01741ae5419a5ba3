"""ESM-2 as its released folders hold it: the config's keys, LayerNorms under either name
(``weight``/``bias`` as the hub's files, ``gamma``/``beta`` as transformers 5 writes them), token
dropout's embedding scale checked by hand against the model, the mask token kept out of random
sequences, ESM-1b and ESMFold refused with their reasons. (The family-wide suites run the tiny
variant against transformers: hooks, processing, runner, interventions.)"""

from __future__ import annotations

import json

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from hf_tiny import BY_ID, build  # noqa: E402

VID = "esm2-rotary-token-dropout"

#: the keys of ESM-2's released configs (facebook/esm2_t6_8M_UR50D's, sizes shrunk), as transformers 4.25 saved them
RELEASED = {"architectures": ["EsmForMaskedLM"], "attention_probs_dropout_prob": 0.0, "classifier_dropout": None,
            "emb_layer_norm_before": False, "esmfold_config": None, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
            "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 48, "is_folding_model": False,
            "layer_norm_eps": 1e-05, "mask_token_id": 0, "max_position_embeddings": 34, "model_type": "esm",
            "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 1, "position_embedding_type": "rotary",
            "tie_word_embeddings": False, "token_dropout": True, "torch_dtype": "float32",
            "transformers_version": "4.25.0.dev0", "use_cache": True, "vocab_list": None, "vocab_size": 61}


def _folder(tmp_path, legacy_names: bool):
    """The tiny variant saved with the released config, its LayerNorms named as the hub's files
    (``legacy_names`` False) or as transformers 5 writes them (``gamma``/``beta``)."""
    model = build(BY_ID[VID])
    tensors = {}
    for name, t in model.state_dict().items():
        if not legacy_names:
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        elif "LayerNorm." in name:
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        tensors[f"esm.{name}"] = t.contiguous()
    safetensors_torch.save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(RELEASED))
    return model


@pytest.mark.parametrize("legacy_names", [False, True])
def test_released_folder_reads_token_dropout_scale_and_rotary(tmp_path, legacy_names):
    """``W_E`` is the word embeddings times ``1 − 0.15 · 0.8 = 0.88`` with the mask token's column
    zero; every layer turns all of each head at base 10000; the LayerNorms read under either name."""
    model = _folder(tmp_path, legacy_names)
    hw = compscope.load(tmp_path)
    raw = model.embeddings.word_embeddings.weight.detach()
    want = raw.T * 0.88
    want[:, 0] = 0.0
    torch.testing.assert_close(hw.W_E, want, atol=0, rtol=0)
    assert hw.positions == "rotary" and hw.W_pos is None and hw.rotary.dim == 8 and hw.rotary.style == "half"
    torch.testing.assert_close(hw.rotary.inv_freq, (10000.0 ** -(torch.arange(0, 8, 2, dtype=torch.float64) / 8)).expand(2, -1))
    ln = model.encoder.layer[1].attention.LayerNorm
    torch.testing.assert_close(hw.attn_norm.weight[1], ln.weight.detach(), atol=0, rtol=0)
    torch.testing.assert_close(hw.attn_norm.bias[1], ln.bias.detach(), atol=0, rtol=0)
    assert not hw.causal and hw.W_U is None and hw.norm_placement == "pre"


def test_the_residual_the_model_starts_from_is_w_e_only_without_mask_tokens(tmp_path):
    """A sequence without the mask token starts at ``W_E``'s columns; one with a mask token does
    not (its embeddings are rescaled by the share of mask tokens), which the notes say."""
    model = _folder(tmp_path, False)
    hw = compscope.load(tmp_path)
    seen = {}
    hook = model.encoder.layer[0].attention.LayerNorm.register_forward_pre_hook(
        lambda m, a: seen.__setitem__("x", a[0].detach()))
    ids = torch.tensor([[5, 9, 12, 30, 7, 5, 9, 12]])
    with torch.no_grad():
        model(input_ids=ids)
        torch.testing.assert_close(seen["x"][0], hw.W_E[:, ids[0]].T, atol=1e-6, rtol=0)
        model(input_ids=ids.masked_fill(ids == 30, 0))
    hook.remove()
    assert not torch.allclose(seen["x"][0, 0], hw.W_E[:, 5], atol=1e-4)  # (scaled by 0.88 / (1 - 1/8))
    assert any("each mask token in a sequence rescales" in n for n in hw.meta.notes)


def test_random_sequences_leave_the_mask_token_out(tmp_path):
    """The data runner's special tokens include the config's mask token (ESM's embeddings treat it apart)."""
    from compscope.data.runner import runner_for

    model = build(BY_ID[VID], mask_token_id=40)
    runner = runner_for(model, compscope.load(model))
    assert 40 in runner.special_ids()


@pytest.mark.parametrize("change, needle", [
    ({"position_embedding_type": "absolute", "emb_layer_norm_before": True}, "ESM-1b"),
    ({"emb_layer_norm_before": True}, "emb_layer_norm_before True"),
    ({"is_folding_model": True}, "ESMFold"),
    ({"rope_theta": 500.0}, "rope_theta"),
    ({"mask_token_id": 99}, "mask_token_id"),
])
def test_what_it_does_not_read_is_refused_by_name(tmp_path, change, needle):
    _folder(tmp_path, False)
    (tmp_path / "config.json").write_text(json.dumps({**RELEASED, **change}))
    with pytest.raises(compscope.CompscopeError, match=needle):
        compscope.load(tmp_path)


def test_validate_runs_on_the_folder_as_an_encoder(tmp_path):
    """The data-based commands run an ESM-2 folder as an encoder: previous-token labels only."""
    from compscope.data.validate import validate

    _folder(tmp_path, True)
    v = validate(str(tmp_path), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)
    assert {h["score"] for h in v.heads} == {"previous_token"}


def test_a_bert_folder_with_tensorflow_layernorm_names_reads_as_with_pytorch_names(tmp_path):
    """``LayerNorm.gamma``/``beta`` (old BERT files) read as ``weight``/``bias``, as transformers
    loads them; where both names are present the PyTorch one is read."""
    model = build(BY_ID["bert"])
    state = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
    model.save_pretrained(tmp_path)
    want = compscope.load(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
               for k, v in state.items()}
    safetensors_torch.save_file(renamed, str(tmp_path / "model.safetensors"))
    got = compscope.load(tmp_path)
    torch.testing.assert_close(got.attn_norm.weight, want.attn_norm.weight, atol=0, rtol=0)
    torch.testing.assert_close(got.attn_norm.bias, want.attn_norm.bias, atol=0, rtol=0)
    bad = next(k for k in renamed if k.endswith("LayerNorm.gamma"))
    safetensors_torch.save_file({**renamed, bad.replace("gamma", "weight"): torch.zeros_like(renamed[bad])},
                                str(tmp_path / "model.safetensors"))
    assert not torch.equal(compscope.load(tmp_path).attn_norm.weight, want.attn_norm.weight)  # (the zeros were read)
