"""Qwen3.5 and Qwen3-Next: the output gate in ``q_proj``'s rows, read into ``HeadWeights.W_G``, and
what it changes (the family-wide suites run the tiny variants through hooks, processing, runner,
gauge changes and interventions besides)."""

from __future__ import annotations

import pytest
import torch

import compscope
from compscope.core.attention import head_outputs, head_states, read_input
from compscope.loading.formats.native import load as load_native, save as save_native

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Qwen3_5TextConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no Qwen3.5", allow_module_level=True)

from hf_tiny import BY_ID, build, capture, random_ids  # noqa: E402

GATED = "qwen3.5-gated-attention-deltanet"  # attention on layers 1 and 3 (compscope's 0 and 1)


@pytest.fixture(scope="module")
def gated():
    model = build(BY_ID[GATED])
    return model, compscope.load(model)


def test_query_and_gate_rows_come_from_each_heads_halves_of_q_proj(gated):
    model, hw = gated
    assert hw.n_layers == 2 and hw.meta.family == "qwen3_5"
    for k, layer in enumerate((1, 3)):
        w = model.model.layers[layer].self_attn.q_proj.weight.detach().reshape(4, 2, 8, 32)
        torch.testing.assert_close(hw.W_Q[k], w[:, 0], atol=0, rtol=0)
        torch.testing.assert_close(hw.W_G[k], w[:, 1], atol=0, rtol=0)
    assert any(n.startswith("gated attention") for n in hw.meta.notes)
    assert any("gated DeltaNet" in n for n in hw.meta.notes)


def test_the_gate_is_in_what_each_head_writes_and_is_never_left_out(gated):
    """Recomputed with the gate, a layer's heads give transformers' attention output; without it they
    do not; asking for head outputs of a gated model without the queries' input is refused."""
    model, hw = gated
    cap = capture(model, "hybrid", random_ids())
    x = read_input(hw, 0, cap.resid[0])
    pattern, v = head_states(hw, 0, x)
    torch.testing.assert_close(head_outputs(hw, 0, pattern, v, x).sum(-2), cap.attn_out[0], atol=1e-5, rtol=0)
    bare = hw.replace(W_G=None)
    assert (head_outputs(bare, 0, pattern, v).sum(-2) - cap.attn_out[0]).abs().max() > 1e-3
    with pytest.raises(compscope.OptionError, match="gates each head's output"):
        head_outputs(hw, 0, pattern, v)


def test_the_gate_survives_saving_and_refuses_moving_value_biases(gated, tmp_path):
    _, hw = gated
    back = load_native(save_native(hw, tmp_path / "heads"))
    assert torch.equal(back.W_G, hw.W_G) and back.b_G is None
    with_bias = hw.replace(b_V=torch.ones_like(hw.W_V[..., 0]))
    with pytest.raises(compscope.ProcessingError, match="gates each head's output by its query"):
        compscope.core.processing.fold_value_bias(with_bias)
    with pytest.raises(compscope.WeightError, match="b_G without W_G"):
        hw.replace(W_G=None, b_G=torch.zeros(2, 4, 8))
