"""OPT-350m as its makers save it: post-LN blocks (the first reading the raw sum of token and position embeddings, the
logits reading the last block's output with no norm after it) and token embeddings narrower than the residual,
projected into it (``project_in``) and out of it before the tied head (``project_out``). Read from a folder, run, and
the residual the first layer reads equal to ``W_E`` and ``W_pos`` as compscope holds them; a malformed switch or a
missing projection refused by name. The family-wide suites (hooks, unembedding, processing, runner, interventions by
brute force through the model's own modules) run the tiny variants ``opt-350m-post-ln-projected`` and
``opt-projected-no-final-norm`` of ``hf_tiny``."""

from __future__ import annotations

import json

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, build, random_ids  # noqa: E402

ATOL = 2e-5


def _saved(tmp_path, layers: int = 3):
    model = build(BY_ID["opt-350m-post-ln-projected"], num_hidden_layers=layers)
    model.save_pretrained(tmp_path)
    return model


def test_an_opt_350m_folder_is_read_and_run(tmp_path):
    from compscope.data.runner import runner_for
    from safetensors import safe_open

    model = _saved(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert {"model.decoder.project_in.weight", "model.decoder.project_out.weight"} <= keys
    assert "lm_head.weight" not in keys and not any("decoder.final_layer_norm" in k for k in keys)  # tied; no last norm
    hw = compscope.load(tmp_path)
    dec = model.model.decoder
    assert hw.meta.family == "opt" and hw.norm_placement == "post" and hw.first_layer_unnormed and hw.causal
    assert hw.final_norm is None and hw.n_layers == 3 and hw.d_model == 32
    with torch.no_grad():  # each token's row through the model's own projection; the logits' map likewise
        torch.testing.assert_close(hw.W_E, dec.project_in(dec.embed_tokens.weight).T, atol=1e-6, rtol=1e-5)
        eye = torch.eye(32)
        torch.testing.assert_close(hw.W_U, model.lm_head(dec.project_out(eye)).T, atol=1e-6, rtol=1e-5)
    # layer l's attention reads what layer l - 1's final_layer_norm made: its gain and bias are attn_norm's row l
    assert torch.equal(hw.attn_norm.weight[2], dec.layers[1].final_layer_norm.weight.detach())
    assert torch.equal(hw.attn_norm.bias[1], dec.layers[0].final_layer_norm.bias.detach())
    runner = runner_for(tmp_path, progress=False, device="cpu")
    ids = random_ids(seq=12)
    trace = runner.trace(ids)
    n = ids.shape[1]
    summed = (hw.W_E[:, ids] + hw.W_pos[:, None, :n]).permute(1, 2, 0)  # (batch, seq, d): no norm before layer 0
    torch.testing.assert_close(trace.resid[0], summed, atol=ATOL, rtol=0)
    with torch.no_grad():
        logits = model(ids).logits
    last = dec.layers[-1].final_layer_norm(trace.norm_in[-1][1])  # the last block's output, the logits' input
    torch.testing.assert_close(last @ hw.W_U.T, logits, atol=1e-4, rtol=1e-5)


def test_a_switch_that_is_not_true_or_false_is_refused_by_name(tmp_path):
    _saved(tmp_path, layers=2)
    config = json.loads((tmp_path / "config.json").read_text())
    config["do_layer_norm_before"] = "no"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(compscope.UnsupportedModelError, match="'do_layer_norm_before' = 'no' is not true or false"):
        compscope.load(tmp_path)


def test_a_missing_projection_is_refused_by_name(tmp_path):
    from safetensors.torch import load_file, save_file

    _saved(tmp_path, layers=2)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.decoder.project_out.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.WeightError, match="tensor .model.decoder.project_out.weight. is missing"):
        compscope.load(tmp_path)
