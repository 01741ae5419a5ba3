"""Gemma 4: heads of two widths held at one, K/V heads of two counts held at one, values from the key
projection, the value norm, proportional rotary and the residual scaled after every layer, each
against transformers' own model (the family-wide suites run the tiny variants through hooks,
processing, runner and interventions besides)."""

from __future__ import annotations

import json
import math

import pytest
import torch

import compscope
from compscope.data.runner import runner_for
from compscope.errors import LoadError, UnsupportedModelError

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Gemma4TextConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no Gemma 4", allow_module_level=True)

from hf_tiny import BY_ID, VOCAB, build, random_ids  # noqa: E402

WIDE = "gemma4-widths-k-eq-v-scalars"  # local layers 0, 2: heads 8 wide, 2 K/V heads; global 1, 3: 16 wide, 1


@pytest.fixture(scope="module")
def wide():
    model = build(BY_ID[WIDE])
    return model, compscope.load(model)


def test_narrow_heads_sit_in_the_wide_slots_scaled_so_their_norms_are_the_models(wide):
    """Layer 0's 8-wide heads held 16 wide: dims 0-3 in slots 0-3, dims 4-7 in slots 8-11 (each rotary
    half at the start of a wide half), times sqrt(16 / 8) in W_Q, W_K, W_V, W_O divided by it, the QK
    gains too; the other slots zero. Layer 1 (16 wide) as stored."""
    model, hw = wide
    attn = model.model.layers[0].self_attn
    c = math.sqrt(2)
    slots = [0, 1, 2, 3, 8, 9, 10, 11]
    empty = [4, 5, 6, 7, 12, 13, 14, 15]
    q = attn.q_proj.weight.detach().reshape(4, 8, 32)
    torch.testing.assert_close(hw.W_Q[0][:, slots], c * q)
    assert not hw.W_Q[0][:, empty].any() and not hw.W_O[0][:, :, empty].any()
    o = attn.o_proj.weight.detach().reshape(32, 4, 8).permute(1, 0, 2)  # (head, d_model, d_head)
    torch.testing.assert_close(hw.W_O[0][:, :, slots], o / c)
    torch.testing.assert_close(hw.W_V[0][:, slots], c * attn.v_proj.weight.detach().reshape(2, 8, 32))
    torch.testing.assert_close(hw.qk_norm[0].weight[0, slots], attn.q_norm.weight.detach() / c)
    wide_q = model.model.layers[1].self_attn.q_proj.weight.detach().reshape(4, 16, 32)
    torch.testing.assert_close(hw.W_Q[1], wide_q, atol=0, rtol=0)


def test_one_k_v_head_repeated_and_values_from_the_key_projection(wide):
    """Layer 1 has one K/V head (held as 2, the local layers' count) and no v_proj: W_V is its k_proj."""
    model, hw = wide
    attn = model.model.layers[1].self_attn
    assert attn.v_proj is None and hw.n_kv_heads == 2 and hw.kv_map == (0, 0, 1, 1)
    k = attn.k_proj.weight.detach()
    for g in range(2):
        torch.testing.assert_close(hw.W_K[1, g], k, atol=0, rtol=0)
        torch.testing.assert_close(hw.W_V[1, g], k, atol=0, rtol=0)
    assert any("attention_k_eq_v" in n for n in hw.meta.notes)
    assert hw.meta.kv_heads_own == (2, 1, 2, 1)  # (each layer's own count, which the card shows beside the 2 held)


def test_rotary_frequencies_are_transformers_own_in_the_wide_slots(wide):
    """Each layer's frequencies are those of transformers' rotary module for its type (the local
    layers' 4, the global layers' 8, of which the proportional map turns half), zero past them."""
    model, hw = wide
    rope = model.model.rotary_emb
    local = rope.sliding_attention_inv_freq.double()
    glob = rope.full_attention_inv_freq.double()
    assert local.shape == (4,) and glob.shape == (8,) and int((glob != 0).sum()) == 4
    torch.testing.assert_close(hw.rotary.inv_freq[0], torch.cat([local, torch.zeros(4, dtype=torch.float64)]).to(
        hw.rotary.inv_freq.dtype))
    torch.testing.assert_close(hw.rotary.inv_freq[1], glob.to(hw.rotary.inv_freq.dtype))


def test_the_runner_reads_the_residual_divided_by_the_layer_scalars_so_far(wide):
    """What the runner traces is the model's own hidden state before each layer divided by the
    product of the layer scalars before it (which are not 1 here)."""
    model, hw = wide
    scalars = [float(b.layer_scalar) for b in model.model.layers]
    assert all(abs(s - 1) > 1e-3 for s in scalars)
    runner = runner_for(model, hw, progress=False)
    ids = random_ids()
    tr = runner.trace(ids)
    with torch.no_grad():
        states = model.model(input_ids=ids, output_hidden_states=True).hidden_states
    for layer in range(hw.n_layers):
        torch.testing.assert_close(tr.resid[layer], states[layer] / math.prod(scalars[:layer]), atol=1e-5, rtol=1e-5)
    assert (tr.resid[2] - states[2]).abs().max() > 1e-2  # the division matters here


def test_value_norm_is_in_every_recomputation(wide):
    """Without the value norm the recomputed attention is not the model's."""
    from compscope.core.attention import attention_forward
    from hf_tiny import capture

    model, hw = wide
    cap = capture(model, "gemma4", random_ids())
    for layer in (0, 1):
        resid, want = cap.resid[layer], cap.attn_out[layer]
        torch.testing.assert_close(attention_forward(hw, layer, resid), want, atol=1e-5, rtol=0)
        assert (attention_forward(hw.replace(v_norm=None), layer, resid) - want).abs().max() > 1e-3


def test_the_released_configs_keys_read_as_transformers_builds_them(tmp_path):
    """A config.json as the released models state the global layers (global_head_dim,
    num_global_key_value_heads) rather than as transformers 5 saves them (per_layer_config): the model
    transformers builds from it and compscope's reading are those of the saved form."""
    build(BY_ID[WIDE]).save_pretrained(tmp_path / "saved")
    released = tmp_path / "released"
    released.mkdir()
    for f in (tmp_path / "saved").iterdir():
        (released / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((released / "config.json").read_text())
    per_layer = cfg.pop("per_layer_config", None)
    if per_layer is None:  # (transformers before 5.15 saves the released keys itself)
        assert cfg["global_head_dim"] == 16 and cfg["num_global_key_value_heads"] == 1
    else:
        assert per_layer == {"1": {"head_dim": 16, "num_key_value_heads": 1},
                             "3": {"head_dim": 16, "num_key_value_heads": 1}}
    cfg.update(global_head_dim=16, num_global_key_value_heads=1)
    (released / "config.json").write_text(json.dumps(cfg))
    built = transformers.AutoModelForCausalLM.from_pretrained(released)
    assert built.model.layers[1].self_attn.head_dim == 16 and built.model.layers[0].self_attn.head_dim == 8
    a, b = compscope.load(tmp_path / "saved"), compscope.load(released)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), atol=0, rtol=0)
    torch.testing.assert_close(a.rotary.inv_freq, b.rotary.inv_freq, atol=0, rtol=0)


def test_the_language_model_of_a_gemma4_vision_language_model_is_read_and_runs(tmp_path):
    """Gemma4ForConditionalGeneration saved: its language model read (the vision tower not), and run
    on data with its residual as compscope reads it."""
    text = {k: v for k, v in BY_ID[WIDE].config.items() if k != "tie_word_embeddings"}
    text.update(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=8)
    model = transformers.Gemma4ForConditionalGeneration(
        transformers.Gemma4Config(text_config=text, vision_config=vision, audio_config=None))
    with torch.no_grad():
        for b in model.model.language_model.layers:
            b.layer_scalar.fill_(0.7)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert (hw.meta.family, hw.n_layers, hw.d_head) == ("gemma4", 2, 16)
    assert any("the language model of a gemma4 model" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path, progress=False)
    runner.trace(torch.randint(2, VOCAB, (2, 6)))  # the first trace is checked against the model: it agrees


def test_a_gemma4_unified_model_is_read_as_its_language_model_and_runs(tmp_path):
    """Gemma4UnifiedForConditionalGeneration saved: its language model (Gemma 4's attention in Gemma 2's layers,
    causal on text: use_bidirectional_attention "vision") read by the Gemma 4 family with the window its config
    states, and run on data; the same model object read directly keeps that window (the one transformers halves
    belongs to models attending both ways)."""
    if not hasattr(transformers, "Gemma4UnifiedConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Gemma 4 unified models")
    text = {k: v for k, v in BY_ID["gemma4-unified-widths-k-eq-v"].config.items() if k != "tie_word_embeddings"}
    text.update(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])
    vision = dict(mm_embed_dim=16, mm_posemb_size=8, output_proj_dims=32, patch_size=2, pooling_kernel_size=1)
    model = transformers.Gemma4UnifiedForConditionalGeneration(
        transformers.Gemma4UnifiedConfig(text_config=text, vision_config=vision, audio_config=None))
    assert model.config.text_config.use_bidirectional_attention == "vision"
    with torch.no_grad():
        for b in model.model.language_model.layers:
            b.layer_scalar.fill_(0.7)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    assert (hw.meta.family, hw.n_layers, hw.d_head, hw.sliding_window) == ("gemma4", 2, 16, (3, None))
    assert any("the language model of a gemma4_unified model" in n for n in hw.meta.notes)
    assert compscope.load(model.model.language_model).sliding_window == (3, None)
    runner = runner_for(tmp_path, progress=False)
    runner.trace(torch.randint(2, VOCAB, (2, 6)))  # the first trace is checked against the model: it agrees


def test_per_layer_embeddings_are_said_to_be_another_writer():
    hw = compscope.load(build(BY_ID["gemma4-per-layer-embeddings"]))
    assert any(n.startswith("per-layer embeddings") for n in hw.meta.notes)
    assert not any(n.startswith("per-layer embeddings") for n in compscope.load(build(BY_ID[WIDE])).meta.notes)


def test_shared_key_value_layers_are_refused_with_the_reason(tmp_path):
    model = build(BY_ID[WIDE], num_kv_shared_layers=2)
    with pytest.raises(UnsupportedModelError, match="shared K/V layers.*read the residual at another layer"):
        compscope.load(model)


def test_a_layer_scalar_that_is_not_positive_is_refused_by_name(tmp_path):
    from safetensors.torch import load_file, save_file

    build(BY_ID[WIDE]).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    sd["model.layers.2.layer_scalar"] = torch.tensor([-0.5])
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(LoadError, match="layer_scalar of layer 2 is -0.5"):
        compscope.load(tmp_path)


@pytest.mark.parametrize("per_layer, match", [
    ({"1": {"head_dim": 16, "sliding_window": 2}}, r"overrides \['sliding_window'\] for layer 1"),
    ({"9": {"head_dim": 16}}, "per_layer_config entry '9'"),
    ({"1": {"head_dim": 15}}, "layer 1's head width 15 is odd"),
    ({"1": {"num_key_value_heads": 3}}, "layer 1 has 3 K/V heads, which do not divide its 4 query heads"),
])
def test_per_layer_settings_compscope_does_not_read_are_refused_by_name(tmp_path, per_layer, match):
    build(BY_ID[WIDE]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["per_layer_config"] = per_layer
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises((LoadError, UnsupportedModelError), match=match):
        compscope.load(tmp_path)


def test_the_value_norm_linearised_holds_the_mean_jacobian_of_the_models_own_module(wide):
    """``linearise_norms(part 'value')``: ``W_V ← J_v W_V`` per K/V head, ``J_v`` autograd through
    transformers' own ``v_norm`` on the values it meets (after the first position), in the model's
    own width: a narrow head's rows, in its slots, are ``c J_v W_v`` (the padded norm's Jacobian is
    ``P J_v Pᵀ`` on rows ``c P W_v``); the value norm removed, the rest as it was."""
    from compscope.core.attention import read_input
    from compscope.data.norm_linearisation import linearise_norms
    from test_norm_linearisation import _mean_jacobian

    model, hw = wide
    runner = runner_for(model, hw, progress=False)
    tokens = random_ids(seq=9, batch=3)
    lin = linearise_norms(runner, "value", tokens=tokens, progress=False)
    assert lin.v_norm is None and lin.qk_norm is not None and lin.meta.processing == ("linearise_norms(value)",)
    torch.testing.assert_close(lin.W_Q, hw.W_Q, atol=0, rtol=0)
    tr = runner.trace(tokens)
    slots = {8: [0, 1, 2, 3, 8, 9, 10, 11], 16: list(range(16))}
    for l, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        proj = attn.v_proj if attn.v_proj is not None else attn.k_proj
        w = attn.head_dim
        W = proj.weight.detach().reshape(-1, w, hw.d_model)  # (K/V heads of this layer, w, d)
        x = read_input(hw, l, tr.resid[l])[:, 1:].reshape(-1, hw.d_model)
        for g in range(hw.n_kv_heads):
            real = W[g * W.shape[0] // hw.n_kv_heads]  # the layer's own K/V head that slot g repeats
            J = _mean_jacobian(attn.v_norm, (x @ real.T).detach())
            want = math.sqrt(16 / w) * J @ real
            torch.testing.assert_close(lin.W_V[l, g][slots[w]], want, atol=2e-5, rtol=1e-4)


def test_layer_types_where_the_config_lists_none_are_transformers_own():
    """Without layer_types, transformers makes every sixth layer global and the last one too, and
    takes no sliding_window_pattern from the config: so does compscope."""
    model = build(BY_ID[WIDE], layer_types=None, num_hidden_layers=8, sliding_window_pattern=2)
    hw = compscope.load(model)
    built = [layer.self_attn.sliding_window for layer in model.model.layers]
    assert built == [3, 3, 3, 3, 3, None, 3, None]
    assert list(hw.sliding_window) == built


def write_gemma4_gguf(path, model, k_eq_v: bool) -> None:
    """What llama.cpp's ``Gemma4Model`` conversion writes (float32): the sliding layers flagged per
    layer, both head widths, a K/V head count per layer, both rotary bases, the global layers'
    ``rope_freqs`` (1 for a pair the proportional map turns, 1e30 for one it does not), norms as they
    are, ``layer_output_scale``, and no ``attn_v`` on a global layer that takes its keys' projection."""
    import gguf
    import numpy as np

    cfg = model.config
    types = cfg.layer_types
    layers = model.model.layers
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "gemma4")
    a = "gemma4."
    for key, value in (("block_count", len(types)), ("context_length", 64), ("embedding_length", cfg.hidden_size),
                       ("feed_forward_length", 48), ("attention.head_count", 4)):
        w.add_uint32(a + key, value)
    w.add_array(a + "attention.head_count_kv", [layer.self_attn.k_proj.out_features // layer.self_attn.head_dim
                                                for layer in layers])
    w.add_uint32(a + "attention.key_length", 16)
    w.add_uint32(a + "attention.key_length_swa", 8)
    w.add_uint32(a + "rope.dimension_count", 16)
    w.add_uint32(a + "rope.dimension_count_swa", 8)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", cfg.rms_norm_eps)
    w.add_uint32(a + "attention.sliding_window", cfg.sliding_window)
    w.add_array(a + "attention.sliding_window_pattern", [t == "sliding_attention" for t in types])
    w.add_float32(a + "rope.freq_base", 3000.0)
    w.add_float32(a + "rope.freq_base_swa", 50.0)
    w.add_uint32(a + "attention.shared_kv_layers", 0)
    w.add_uint32(a + "embedding_length_per_layer_input", 0)
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight", "layer_scalar": "layer_output_scale.weight"}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(len(types)):
        for hf, g in names.items():
            if f"model.layers.{i}.{hf}" in sd:  # (a global layer with k_eq_v has no v_proj)
                w.add_tensor(f"blk.{i}.{g}", sd[f"model.layers.{i}.{hf}"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    n_rot = int(16 * 0.5 / 2)  # the variant's proportional map: half of the global layers' 8 pairs
    w.add_tensor("rope_freqs.weight", np.array([1.0] * n_rot + [1e30] * (8 - n_rot), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("k_eq_v", [True, False])
def test_a_gguf_file_as_llama_cpp_writes_gemma4_reads_as_the_model(tmp_path, k_eq_v):
    """A GGUF file in llama.cpp's Gemma 4 layout reads as the model it came from: every weight, the
    norms, the windows, the layer scalars (in the attention-output gains) and the rotary frequencies
    (the proportional map from rope_freqs)."""
    pytest.importorskip("gguf")
    model = build(BY_ID[WIDE], attention_k_eq_v=k_eq_v)
    path = tmp_path / "g4.gguf"
    write_gemma4_gguf(path, model, k_eq_v)
    ours, ref = compscope.load(path), compscope.load(model)
    assert ours.meta.family == "gemma4" and ours.sliding_window == ref.sliding_window
    assert (ours.n_kv_heads, ours.d_head, ours.kv_map) == (ref.n_kv_heads, ref.d_head, ref.kv_map)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in ((ours.attn_norm, ref.attn_norm), (ours.attn_out_norm, ref.attn_out_norm),
                 (ours.qk_norm[0], ref.qk_norm[0]), (ours.qk_norm[1], ref.qk_norm[1]), (ours.final_norm, ref.final_norm)):
        torch.testing.assert_close(a.weight, b.weight, atol=0, rtol=0)
    assert ours.v_norm is not None and ours.scale == ref.scale == 1.0
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
    assert any("rope_freqs" in n for n in ours.meta.notes)


def test_a_gemma4_gguf_file_with_shared_key_value_layers_is_refused(tmp_path):
    """llama.cpp writes the E2B and E4B models' shared layers as a count: refused with the reason."""
    import gguf

    pytest.importorskip("gguf")
    path = tmp_path / "g4.gguf"
    write_gemma4_gguf(path, build(BY_ID[WIDE]), True)
    fields = gguf.GGUFReader(str(path))
    assert int(fields.fields["gemma4.attention.shared_kv_layers"].parts[-1][0]) == 0
    raw = path.read_bytes()
    key = b"gemma4.attention.shared_kv_layers"
    at = raw.index(key) + len(key) + 4  # the key, its value type (uint32), then the value
    path.write_bytes(raw[:at] + (2).to_bytes(4, "little") + raw[at + 4:])
    with pytest.raises(UnsupportedModelError, match="shared K/V layers"):
        compscope.load(path)


def test_a_gemma4_gguf_file_is_not_run_on_data_and_says_why(tmp_path):
    """transformers' GGUF reader lists gemma4, and builds it as another model (one K/V head count, the
    layer scalars left at 1): the data-based commands refuse the file, saying so; the catalogue marks
    it weights only."""
    pytest.importorskip("gguf")
    from compscope.loading.catalogue import lookup

    path = tmp_path / "g4.gguf"
    write_gemma4_gguf(path, build(BY_ID[WIDE]), True)
    with pytest.raises(UnsupportedModelError, match="layer output scales out.*cannot run it"):
        runner_for(path, progress=False)
    assert "weights only" in lookup("gemma4", only="gguf")[1]
