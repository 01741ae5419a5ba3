"""RecurrentGemma (Griffin) as its released config states it: the attention blocks among the
recurrent ones, the bfloat16 embedding scale, rotary on half of each head, the local window, and
the window transformers 4 does not apply within a forward pass (the data runner then stays within
it). (The family-wide suites run the tiny variant against transformers 5: hooks, processing,
runner, interventions.)"""

from __future__ import annotations

import json

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "RecurrentGemmaConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no RecurrentGemma", allow_module_level=True)

from compscope.data.runner import runner_for, transformers_at_least  # noqa: E402
from compscope.loading.families.recurrent_gemma import RecurrentGemma  # noqa: E402

#: recurrentgemma-2b's config.json (as transformers 4.40 saved it), sizes shrunk
RELEASED = {"architectures": ["RecurrentGemmaForCausalLM"], "attention_bias": False, "attention_window_size": 4,
            "block_types": ["recurrent", "recurrent", "attention"], "bos_token_id": 2, "conv1d_width": 4,
            "embeddings_scale_by_sqrt_dim": True, "eos_token_id": 1, "final_w_init_variance_scale": 0.2,
            "head_dim": 8, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "intermediate_size": 48,
            "logits_soft_cap": 30.0, "lru_width": 32, "model_type": "recurrent_gemma", "num_attention_heads": 4,
            "num_hidden_layers": 7, "num_key_value_heads": 1, "pad_token_id": 0, "partial_rotary_factor": 0.5,
            "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "torch_dtype": "float32", "transformers_version": "4.40.0.dev0",
            "vocab_size": 61, "w_init_variance_scale": 0.01}


def _model():
    cfg = transformers.RecurrentGemmaConfig(**{k: v for k, v in RELEASED.items()
                                               if k not in ("architectures", "torch_dtype", "transformers_version",
                                                            "model_type", "head_dim", "final_w_init_variance_scale")})
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)


def test_released_config_reads_the_attention_blocks_scale_rotary_and_window(tmp_path):
    """Blocks 2 and 5 of seven attend (the cycle recurrent, recurrent, attention); ``W_E`` is the
    embeddings times sqrt(32) = 5.657 rounded to bfloat16, 5.65625; rotary turns the first 4 of each
    head's 8 dims at base 10000; each query sees 4 keys up to it; one K/V head; an output bias."""
    model = _model()
    model.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(RELEASED))
    hw = compscope.load(tmp_path)
    assert hw.n_layers == 2 and hw.kv_map == (0, 0, 0, 0) and hw.sliding_window == (4, 4) and hw.causal
    assert any("the model's 7 layers (2, 5;" in n for n in hw.meta.notes)
    torch.testing.assert_close(hw.W_E, model.model.embed_tokens.weight.detach().T * 5.65625, atol=0, rtol=0)
    assert hw.rotary.dim == 4 and hw.rotary.style == "half"
    torch.testing.assert_close(hw.rotary.inv_freq[0], torch.tensor([1.0, 0.01], dtype=torch.float64))
    torch.testing.assert_close(hw.b_O[1], model.model.layers[5].temporal_block.o_proj.bias.detach(), atol=0, rtol=0)
    assert hw.b_Q is None  # (attention_bias off: the output projection's bias alone)


@pytest.mark.parametrize("change, needle", [
    ({"block_types": ["recurrent"]}, "every block is recurrent"),
    ({"block_types": ["recurrent", "mlp"]}, "block_types"),
    ({"sliding_window": 8}, "'attention_window_size' and 'sliding_window'"),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
    ({"num_attention_heads": 3}, "num_attention_heads"),  # (32 / 3 is no head width)
])
def test_what_it_does_not_read_is_refused_by_name(tmp_path, change, needle):
    _model().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**RELEASED, **change}))
    with pytest.raises(compscope.CompscopeError, match=needle):
        compscope.load(tmp_path)


def test_a_stated_head_width_is_the_one_transformers_computes(tmp_path):
    """transformers sets the head width to hidden_size / num_attention_heads whatever ``head_dim`` says."""
    _model().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**RELEASED, "head_dim": 16}))
    assert compscope.load(tmp_path).d_head == 8


def test_recurrent_gemma_under_transformers_4_runs_within_the_window():
    """transformers 5 applies the window (its config names it ``sliding_window``): the runner takes
    sequences of any length. transformers 4 applies none within a forward pass: the runner takes
    sequences up to the window, where the two agree."""
    model = _model()
    runner = runner_for(model, compscope.load(model))
    assert RecurrentGemma.runs_windows(model.config) == transformers_at_least(5)
    assert runner.n_ctx == (None if transformers_at_least(5) else 4)
    assert not RecurrentGemma.runs_windows(type("Config4", (), {"attention_window_size": 4})())
