"""ESM C: Llama's names as an encoder with LayerNorms, one QK LayerNorm over each layer's heads, and
every residual branch divided by sqrt(L / 36), each against transformers' own model (the family-wide
suites run the tiny variant through hooks, processing, runner and interventions besides)."""

from __future__ import annotations

import math

import pytest
import torch

import compscope
from compscope.data.runner import layer_state, runner_for

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "EsmcConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no ESM C", allow_module_level=True)

from hf_tiny import BY_ID, build, capture, perturbed, random_ids  # noqa: E402

VID = "esmc-layer-qk-layernorm"


def test_w_o_holds_the_residual_scale_sqrt_36_over_the_layer_count():
    """Each layer adds o_proj(...) / sqrt(L / 36): W_O is o_proj's columns per head times sqrt(36 / 4) = 3."""
    model = build(BY_ID[VID])
    hw = compscope.load(model)
    assert hw.meta.family == "esmc" and hw.n_layers == 4 and hw.W_U is None
    o = model.layers[1].self_attn.o_proj.weight.detach().reshape(32, 4, 8).permute(1, 0, 2)
    torch.testing.assert_close(hw.W_O[1], o * 3.0, atol=0, rtol=1e-6)
    assert any("residual multiplier 3" in n for n in hw.meta.notes)


def test_the_qk_layernorm_spans_all_heads_of_a_layer_and_is_in_every_recomputation():
    """One LayerNorm (no bias) over the layer's concatenated query heads, one over its key heads: held
    layer-wide; with per-head norms instead, or none, the recomputed attention is not the model's."""
    from compscope.core.attention import attention_forward

    model = build(BY_ID[VID])
    hw = compscope.load(model)
    assert hw.qk_norm_scope == "layer" and hw.qk_norm[0].kind == "layernorm" and hw.qk_norm[0].bias is None
    torch.testing.assert_close(hw.qk_norm[0].weight[2], model.layers[2].self_attn.q_norm.weight.detach())
    cap = capture(model, "esmc", random_ids())
    for layer in (0, 3):
        want = cap.attn_out[layer]
        torch.testing.assert_close(attention_forward(hw, layer, cap.resid[layer]), want, atol=1e-5, rtol=0)
        assert (attention_forward(hw.replace(qk_norm=None), layer, cap.resid[layer]) - want).abs().max() > 1e-3


def test_a_saved_masked_lm_reads_under_its_esmc_prefix_and_runs(tmp_path):
    """EsmcForMaskedLM saved (tensors under ``esmc.``): read as the base model, and run on data, the
    heads recomputed from the weights equal what each layer adds (divided by sqrt(L / 36))."""
    cfg = transformers.EsmcConfig(**{k: v for k, v in BY_ID[VID].config.items()})
    model = perturbed(lambda: transformers.EsmcForMaskedLM(cfg), seed=3, scale=0.25)
    model.save_pretrained(tmp_path)
    hw, base = compscope.load(tmp_path), compscope.load(model.esmc)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, name), getattr(base, name)), name
    runner = runner_for(tmp_path, progress=False)
    tr = runner.trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)
    assert math.isclose(runner.out_scale, 3.0)  # (what the runner multiplies the hooked attention output by)
