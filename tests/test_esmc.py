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
    runner = runner_for(tmp_path, progress=False, device="cpu")
    tr = runner.trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)
    assert math.isclose(runner.out_scale, 3.0)  # (what the runner multiplies the hooked attention output by)


def test_an_esmfold2_folder_reads_and_runs_the_esm_c_it_bundles(tmp_path):
    """EsmFold2 bundles an ESM C (its ``esmc_config``, tensors under ``esmc.``): read as that ESM C (the same heads as
    the module alone), its folding trunk and heads said not to be read; run as ``EsmFold2Model`` with its ESM C
    hooked, each layer recomputed from the weights equal to what it adds; the ESM C's end, padding and mask ids, which
    EsmFold2's own config does not state, kept out of random sequences."""
    if not hasattr(transformers, "EsmFold2Config"):
        pytest.skip(f"transformers {transformers.__version__} has no EsmFold2")
    atom = dict(hidden_size=32, output_dim=32, num_hidden_layers=1, num_attention_heads=1, head_dim=32,
                intermediate_size=16)
    esmc = dict(BY_ID[VID].config, pad_token_id=1, eos_token_id=2, mask_token_id=60)
    config = transformers.EsmFold2Config(
        esmc_config=esmc, hidden_size=16, pairwise_hidden_size=16, pair_transition_intermediate_size=16,
        folding_trunk_num_hidden_layers=1, parcae_num_coda_layers=1, num_loops=1, single_inputs_size=32 + 2 * 33 + 1,
        atom_encoder=atom, confidence_head=dict(num_hidden_layers=1), lm_encoder=dict(num_hidden_layers=1),
        structure_head=dict(diffusion_module=dict(hidden_size=32, fourier_dim=16, num_hidden_layers=1,
                                                  num_attention_heads=1, head_dim=32, intermediate_size=16,
                                                  pair_intermediate_size=16, atom_encoder=atom)),
        msa_encoder=dict(hidden_size=16, outer_hidden_size=8, num_hidden_layers=1, num_attention_heads=2, head_dim=8,
                         intermediate_size=16))
    model = perturbed(lambda: transformers.EsmFold2Model(config), seed=5, scale=0.2)
    model.save_pretrained(tmp_path)
    hw, alone = compscope.load(tmp_path), compscope.load(model.esmc)
    assert hw.meta.family == "esmc" and hw.n_layers == 4
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, name), getattr(alone, name)), name
    assert hw.meta.notes[0].startswith("the language model of an esmfold2 model (its esmc_config, esmc")
    assert "structure_head" in hw.meta.notes[0]
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == "EsmFold2Model" and runner.body is runner.model.esmc
    tr = runner.trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)
    assert getattr(runner.model.config, "pad_token_id", None) is None
    assert {1, 2, 60} <= set(runner.special_ids())
