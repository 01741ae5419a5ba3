"""Llama 4: a QK-norm without gains on the rotary layers only, NoPE layers between them, and the two
settings that change attention only past a length (chunks, the NoPE layers' query temperature),
each against transformers' own model (the family-wide suites run the tiny variants through hooks,
processing, runner and interventions besides)."""

from __future__ import annotations

import json
import re

import pytest
import torch

import compscope
from compscope.core.attention import attention_forward
from compscope.core.card import describe
from compscope.core.processing import linearise_qk_norm
from compscope.errors import UnsupportedModelError
from compscope.loading.families.llama4 import Llama4
from compscope.loading.formats import native

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, VOCAB, build, capture, hf_config, perturbed  # noqa: E402

SCOUT = "llama4-nope-gainless-qk-norm"  # layer 0: rotary and QK-norm; layer 1: neither (NoPE)


@pytest.fixture(scope="module")
def scout():
    model = build(BY_ID[SCOUT])
    return model, compscope.load(model)


def test_the_qk_norm_and_the_rotary_sit_where_transformers_puts_them(scout):
    model, hw = scout
    layers = model.model.layers
    assert [hasattr(b.self_attn, "qk_norm") for b in layers] == [True, False]
    assert [bool(b.self_attn.use_rope) for b in layers] == [True, False]
    assert hw.qk_norm_layers == (True, False) and [hw.qk_normed(i) for i in range(2)] == [True, False]
    assert all(n.weight is None and n.bias is None and n.kind == "rmsnorm" for n in hw.qk_norm)
    assert hw.qk_norm[0].eps == model.config.rms_norm_eps
    assert bool(hw.rotary.inv_freq[0].any()) and not hw.rotary.inv_freq[1].any()
    assert hw.rotary.style == "interleaved"
    notes = " ".join(hw.meta.notes)
    assert "RMS-normalised per head (no gains) on every layer but 1" in notes
    assert "no rotary (NoPE) on layers 1" in notes
    assert "chunks of 16 tokens" not in notes and "own chunk of 16 tokens" in notes
    assert "1 on the first 15 positions" in notes
    assert "not on layers 1" in describe(hw)


def test_maverick_has_no_qk_norm():
    model = build(BY_ID["llama4-no-qk-norm-bias"])
    hw = compscope.load(model)
    assert hw.qk_norm is None and hw.qk_norm_layers == ()
    assert (hw.b_Q is not None) == model.config.attention_bias  # (transformers 4.57 builds no biases)
    assert not any("QK-norm" in n for n in hw.meta.notes)


def test_the_query_temperature_is_one_before_floor_scale_and_not_after():
    """With floor_scale 4 the NoPE layer's queries are scaled from position 3 on: what compscope
    reads is the model's attention on the first 3 positions and not after, and the runner takes
    sequences of at most 3 tokens."""
    from compscope.data.runner import runner_for

    model = build(BY_ID[SCOUT], floor_scale=4)
    hw = compscope.load(model)
    ids = torch.randint(2, VOCAB, (2, 9), generator=torch.Generator().manual_seed(3))
    cap = capture(model, "llama", ids)
    got = attention_forward(hw, 1, cap.resid[1])
    torch.testing.assert_close(got[:, :3], cap.attn_out[1][:, :3], atol=1e-5, rtol=0)
    assert (got[:, 3:] - cap.attn_out[1][:, 3:]).abs().max() > 1e-3
    torch.testing.assert_close(attention_forward(hw, 0, cap.resid[0]), cap.attn_out[0], atol=1e-5, rtol=0)
    runner = runner_for(model, hw=hw, progress=False, device="cpu")
    assert runner.n_ctx == 3
    with pytest.raises(compscope.OptionError, match="longer than"):
        runner.trace(ids)


def test_a_chunk_shorter_than_the_sequence_is_the_limit_too():
    model = build(BY_ID[SCOUT], attention_chunk_size=5)
    hw = compscope.load(model)
    ids = torch.randint(2, VOCAB, (2, 9), generator=torch.Generator().manual_seed(4))
    cap = capture(model, "llama", ids)
    got = attention_forward(hw, 0, cap.resid[0])  # layer 0: chunked (rotary)
    torch.testing.assert_close(got[:, :5], cap.attn_out[0][:, :5], atol=1e-5, rtol=0)
    assert (got[:, 5:] - cap.attn_out[0][:, 5:]).abs().max() > 1e-3


@pytest.mark.parametrize("changes, limit", [
    ({}, 8191),  # transformers' defaults: chunks of 8192, temperature from position 8191
    ({"attn_temperature_tuning": False}, 8192),
    ({"attention_chunk_size": 100}, 100),
    ({"no_rope_layers": [1, 1, 1, 1]}, 8192),  # no NoPE layer: no temperature
    ({"no_rope_layers": [1, 1, 1, 1], "attention_chunk_size": None}, None),
    ({"no_rope_layers": [0, 0, 0, 0], "floor_scale": 64}, 63),  # every layer NoPE: nothing chunked
    ({"no_rope_layers": []}, 8191),  # empty: transformers' default pattern
    ({"layer_types": ["full_attention"] * 4, "floor_scale": 20000}, 19999),
])
def test_exact_context_by_hand(changes, limit):
    config = {"model_type": "llama4_text", "num_hidden_layers": 4, **changes}
    assert Llama4.exact_context(config) == limit


@pytest.mark.parametrize("types, error", [
    (["full_attention", "sliding_attention", "full_attention", "full_attention"], "layer_types ['sliding_attention'] are not"),
    (["full_attention", 3, "full_attention", "full_attention"], "is not one layer type name per layer (4)"),
    (["full_attention"], "is not one layer type name per layer (4)"),
])
def test_layer_types_other_than_full_and_chunked_are_refused_by_name(types, error):
    from compscope.errors import LoadError

    with pytest.raises((LoadError, UnsupportedModelError), match=re.escape(error)):
        Llama4.layer_types({"model_type": "llama4_text", "layer_types": types}, 4, "cfg")


def test_rope_scaling_that_scales_queries_and_keys_is_refused(tmp_path):
    build(BY_ID[SCOUT]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.pop("rope_scaling", None)
    cfg["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0,
                              "original_max_position_embeddings": 16}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="the llama4 family does not support these config settings: rope"):
        compscope.load(tmp_path)


def test_linearising_the_qk_norm_leaves_the_layers_without_it(scout):
    _, hw = scout
    lin = linearise_qk_norm(hw)
    assert lin.qk_norm is None and lin.qk_norm_layers == ()
    assert torch.equal(lin.W_Q[1], hw.W_Q[1]) and torch.equal(lin.W_K[1], hw.W_K[1])
    assert not torch.allclose(lin.W_Q[0], hw.W_Q[0])
    # a gainless RMSNorm at the isotropic point: J = (I - Σ/(s² r)) / s, s² = tr Σ / r + ε, Σ = W Wᵀ scaled by the
    # input norm's gains: check layer 0, head 0 by hand
    W = hw.W_Q[0, 0].double() * hw.attn_norm.gain(0).double()
    S, r = W @ W.T, hw.d_head
    s2 = S.trace() / r + hw.qk_norm[0].eps
    J = (torch.eye(r, dtype=torch.float64) - S / (s2 * r)) / s2.sqrt()
    torch.testing.assert_close(lin.W_Q[0, 0].double(), J @ hw.W_Q[0, 0].double(), atol=1e-6, rtol=1e-6)


def test_linearising_keeps_the_biases_of_the_layers_without_a_qk_norm(scout):
    """With query and key biases: layer 0's go through its norm's Jacobian, ``b ← J b`` (no gains), as its
    weights do; layer 1 (NoPE, no QK-norm) keeps both as they were."""
    from compscope.core.processing import qk_norm_jacobians

    _, hw = scout
    g = torch.Generator().manual_seed(5)
    biased = hw.replace(b_Q=0.3 * torch.randn(hw.W_Q.shape[:3], generator=g),
                        b_K=0.3 * torch.randn(hw.W_K.shape[:3], generator=g))
    lin = linearise_qk_norm(biased)
    J_q, J_k = qk_norm_jacobians(biased)
    for J, b, new in ((J_q, biased.b_Q, lin.b_Q), (J_k, biased.b_K, lin.b_K)):
        assert torch.equal(new[1], b[1])
        torch.testing.assert_close(new[0].double(), (J[0] @ b[0].double()[..., None])[..., 0], atol=1e-6, rtol=1e-6)
        assert not torch.allclose(new[0], b[0])
    for name in ("W_Q", "W_K"):
        assert torch.equal(getattr(lin, name)[1], getattr(biased, name)[1])


def test_the_layers_survive_a_save_and_a_load(scout, tmp_path):
    _, hw = scout
    back = compscope.load(native.save(hw, tmp_path / "m"))
    assert back.qk_norm_layers == (True, False)


def test_the_weights_refuse_layers_that_do_not_fit(scout):
    _, hw = scout
    with pytest.raises(compscope.WeightError, match=r"qk_norm_layers \(True,\): expected one true or false per layer"):
        hw.replace(qk_norm_layers=(True,))
    with pytest.raises(compscope.WeightError, match="qk_norm_layers without qk_norm"):
        hw.replace(qk_norm=None)
    with pytest.raises(compscope.WeightError, match="expected one true or false"):
        hw.replace(qk_norm_layers=(1, 0))


def test_the_multimodal_folder_reads_and_runs_its_language_model(tmp_path):
    """Llama4ForConditionalGeneration saves its language model under ``language_model.model.``;
    read from the folder it is the language model object's heads, and it runs on text."""
    from compscope.data.runner import runner_for

    text = BY_ID[SCOUT].config
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14, vision_output_dim=16, projector_input_dim=16, projector_output_dim=32)
    cfg = transformers.Llama4Config(text_config=hf_config("Llama4TextConfig", **text).to_dict(), vision_config=vision,
                                    image_token_index=VOCAB - 1)
    model = perturbed(lambda: transformers.Llama4ForConditionalGeneration(cfg))
    model.save_pretrained(tmp_path / "m")
    hw, ref = compscope.load(tmp_path / "m"), compscope.load(model.language_model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert hw.qk_norm_layers == ref.qk_norm_layers == (True, False) and hw.meta.family == "llama4"
    runner = runner_for(tmp_path / "m", progress=False, device="cpu")
    runner.trace(torch.randint(2, VOCAB - 2, (2, 7), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed


def test_norms_linearised_on_text_leave_the_layers_without_a_qk_norm(scout):
    from compscope.data.norm_linearisation import linearise_norms
    from compscope.data.runner import runner_for

    model, hw = scout
    runner = runner_for(model, hw=hw, progress=False, device="cpu")
    tokens = torch.randint(2, VOCAB, (3, 12), generator=torch.Generator().manual_seed(6))
    lin = linearise_norms(runner, "qk", tokens=tokens, progress=False)
    assert lin.qk_norm is None and lin.qk_norm_layers == ()
    assert torch.equal(lin.W_Q[1], hw.W_Q[1]) and torch.equal(lin.W_K[1], hw.W_K[1])
    assert not torch.allclose(lin.W_Q[0], hw.W_Q[0], atol=1e-3)
