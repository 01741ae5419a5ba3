"""MiniCPM 5 MoE and Param2 MoE (model types of transformers 5.25), read from folders built here from a Llama and a
Sarvam MoE of the installed transformers: MiniCPM 5's query and gate rows per head of ``q_gate_proj`` (its files'
``q_proj``), the gate's bias, and what a gated head writes, against a reference computed by hand from the Llama's own
attention; Param2's defaults as its config class states them. Where transformers has these model types, the tiny
variants ``minicpm5-moe-gated-gqa-bias`` and ``param2moe-full-rotary-qk-norm-tied`` run through the family-wide
suites besides (hooks, interventions, runner)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import compscope
from compscope.core.attention import head_outputs, head_states, read_input

transformers = pytest.importorskip("transformers")

from hf_tiny import BY_ID, D, D_HEAD, HEADS, build, random_ids  # noqa: E402

KV = 2  # the Llama variant's K/V heads


def _minicpm5_folder(folder, llama, gate: torch.Tensor, gate_bias: torch.Tensor, name: str = "q_proj") -> None:
    """``llama``'s weights saved as a MiniCPM 5 MoE's: per layer and head the query's rows, then the gate's
    (``gate: (layers, heads, d_head, d)``, ``gate_bias: (layers, heads, d_head)``), under ``name``."""
    tensors = {}
    for key, value in llama.state_dict().items():
        if ".self_attn.q_proj." in key:
            layer = int(key.split(".layers.")[1].split(".")[0])
            if key.endswith(".weight"):
                rows = torch.stack([value.reshape(HEADS, D_HEAD, D), gate[layer]], dim=1)
                value = rows.reshape(2 * HEADS * D_HEAD, D)
            else:
                value = torch.stack([value.reshape(HEADS, D_HEAD), gate_bias[layer]], dim=1).reshape(-1)
            key = key.replace(".q_proj.", f".{name}.")
        tensors[key] = value.detach().clone().contiguous()
    folder.mkdir()
    save_file(tensors, folder / "model.safetensors")
    cfg = llama.config
    (folder / "config.json").write_text(json.dumps({
        "model_type": "minicpm5_moe", "architectures": ["MiniCPM5MoeForCausalLM"], "vocab_size": cfg.vocab_size,
        "hidden_size": D, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": D_HEAD,
        "num_hidden_layers": cfg.num_hidden_layers, "intermediate_size": 48, "rms_norm_eps": cfg.rms_norm_eps,
        "attention_bias": True, "tie_word_embeddings": False, "use_gated_attention": True, "n_routed_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 16, "n_shared_experts": 1, "first_k_dense_replace": 1,
        "mlp_layer_types": ["dense"] + ["sparse"] * (cfg.num_hidden_layers - 1),
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}))


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    llama = build(BY_ID["llama-gqa-bias"])
    L = llama.config.num_hidden_layers
    g = torch.Generator().manual_seed(3)
    gate = 0.3 * torch.randn(L, HEADS, D_HEAD, D, generator=g)
    gate_bias = torch.randn(L, HEADS, D_HEAD, generator=g)
    folders = {}
    for name in ("q_proj", "q_gate_proj"):  # (its files' name, and transformers' own)
        folders[name] = tmp_path_factory.mktemp("minicpm5") / name
        _minicpm5_folder(folders[name], llama, gate, gate_bias, name)
    return llama, gate, gate_bias, folders


def test_minicpm5_reads_each_heads_query_and_gate_rows_and_the_gates_bias(gated):
    llama, gate, gate_bias, folders = gated
    want = compscope.load(llama)
    for name, folder in folders.items():
        hw = compscope.load(folder)
        assert hw.meta.family == "minicpm5_moe" and hw.kv_map == want.kv_map, name
        for field in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
            assert torch.equal(getattr(hw, field), getattr(want, field)), (name, field)
        assert torch.equal(hw.W_G, gate) and torch.equal(hw.b_G, gate_bias), name
        assert torch.equal(hw.rotary.inv_freq[0], want.rotary.inv_freq[0])
        assert any(n.startswith("gated attention") and "sigmoid(W_G x + b_G)" in n for n in hw.meta.notes)


def test_minicpm5_heads_write_the_llama_attention_gated_as_transformers_gates_it(gated):
    """What each layer's heads write, recomputed from the read weights on the Llama's residual, equals the Llama's
    attention with its ``z`` times ``σ(W_G x + b_G)`` of the normed input before ``o_proj`` (MiniCPM5MoeAttention's
    forward, computed here by hand); without the gate's bias it does not."""
    llama, gate, gate_bias, folders = gated
    hw = compscope.load(folders["q_proj"])
    resid, normed, z = {}, {}, {}
    hooks = []
    for i, layer in enumerate(llama.model.layers):
        hooks.append(layer.input_layernorm.register_forward_pre_hook(lambda m, a, i=i: resid.__setitem__(i, a[0])))
        hooks.append(layer.input_layernorm.register_forward_hook(lambda m, a, o, i=i: normed.__setitem__(i, o)))
        hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(lambda m, a, i=i: z.__setitem__(i, a[0])))
    with torch.no_grad():
        llama(random_ids())
    for h in hooks:
        h.remove()
    for i, layer in enumerate(llama.model.layers):
        g = torch.sigmoid(torch.einsum("bsd,hrd->bshr", normed[i], gate[i]) + gate_bias[i])
        with torch.no_grad():
            want = layer.self_attn.o_proj(z[i] * g.flatten(-2))
        x = read_input(hw, i, resid[i])
        pattern, v = head_states(hw, i, x)
        got = head_outputs(hw, i, pattern, v, x).sum(-2) + hw.b_O[i]  # (the heads' outputs carry no bias)
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
        bare = hw.replace(b_G=None)
        assert (head_outputs(bare, i, pattern, v, x).sum(-2) + hw.b_O[i] - want).abs().max() > 1e-2
    with pytest.raises(compscope.OptionError, match=r"gates each head's output by what its query reads: give that "
                                                     r"input \(x\)"):  # not the heads' outputs ungated
        head_outputs(hw, 0, pattern, v)


def test_minicpm5_settings_it_does_not_run_are_refused_and_a_null_head_dim_is_the_width_over_the_heads(gated, tmp_path):
    _, _, _, folders = gated
    folder = folders["q_gate_proj"]
    cfg = json.loads((folder / "config.json").read_text())
    for bad, needle in (({"use_gated_attention": False}, "use_gated_attention=False"),
                        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor")):
        (folder / "config.json").write_text(json.dumps({**cfg, **bad}))
        with pytest.raises(compscope.UnsupportedModelError, match=needle):
            compscope.load(folder)
    (folder / "config.json").write_text(json.dumps({**cfg, "head_dim": None}))  # D / HEADS = D_HEAD: the same heads
    assert torch.equal(compscope.load(folder).W_Q, compscope.load(folders["q_proj"]).W_Q)
    (folder / "config.json").write_text(json.dumps({**cfg, "attention_bias": False}))  # (biases transformers does
    hw = compscope.load(folder)  # not build are left out, the gate's too)
    assert hw.b_Q is None and hw.b_G is None and hw.W_G is not None
    (folder / "config.json").write_text(json.dumps(cfg))


def test_param2_reads_its_defaults_from_sarvams_file_names(tmp_path):
    """A Param2 MoE folder in Sarvam's names with a config stating neither QK-norm, the rotary share nor its base,
    nor whether the embeddings are tied (and no head saved): QK-norm on, all of each head rotated at base 500,000
    (closed form), ``W_U`` the embedding; the weights those of the same files read as Sarvam's."""
    if not hasattr(transformers, "SarvamMoEConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Sarvam MoE")
    sarvam = build(BY_ID["sarvam-moe-full-rotary-qk-norm"])
    sarvam.save_pretrained(tmp_path / "sarvam")
    want = compscope.load(tmp_path / "sarvam")
    folder = tmp_path / "param2"
    folder.mkdir()
    tensors = load_file(tmp_path / "sarvam" / "model.safetensors")
    assert any(".attention.query_key_value." in k for k in tensors)  # (Sarvam's own names, as saved)
    save_file({k: v for k, v in tensors.items() if k != "lm_head.weight"}, folder / "model.safetensors")
    cfg = json.loads((tmp_path / "sarvam" / "config.json").read_text())
    for key in ("use_qk_norm", "rope_parameters", "rope_theta", "partial_rotary_factor", "tie_word_embeddings"):
        cfg.pop(key, None)
    cfg.update(model_type="param2moe", architectures=["Glm4MoeForCausalLM"])
    (folder / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(folder)
    assert hw.meta.family == "param2moe" and hw.qk_norm is not None and hw.rotary.dim == D_HEAD
    for field in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
        assert torch.equal(getattr(hw, field), getattr(want, field)), field
    assert all(torch.equal(a.weight, b.weight) for a, b in zip(hw.qk_norm, want.qk_norm))
    closed = 500_000.0 ** -(torch.arange(0, D_HEAD, 2, dtype=torch.float64) / D_HEAD)
    torch.testing.assert_close(hw.rotary.inv_freq[0].double(), closed, atol=0, rtol=1e-6)
    assert torch.equal(hw.W_U, hw.W_E.T)
