"""Nemotron-NAS (DeciLM ``nemotron-nas``: Llama-3.1-Nemotron-51B and its kin) from hand-written folders and GGUF
files: layers with K/V head counts of their own, a layer without attention and one with a linear map in its place.
transformers has no model of this type, so each attending layer is checked against transformers' Llama layer built
with that layer's K/V head count, fed the same residual."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.core.attention import attention_forward  # noqa: E402
from compscope.errors import LoadError, UnsupportedModelError, WeightError  # noqa: E402

safetensors = pytest.importorskip("safetensors.torch")

D, H, R, V = 32, 8, 4, 50
#: per layer: K/V head count (n_heads / n_heads_in_group), or the layer's kind where it does not attend
KINDS = [2, "no_op", 1, "linear", 4]
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


def _block(kind) -> dict:
    """A ``block_configs`` entry as Nemotron-51B's config writes one (its MLP's settings beside)."""
    attention = {"no_op": kind == "no_op", "replace_with_linear": kind == "linear", "sparsify": None,
                 "n_heads_in_group": H // kind if isinstance(kind, int) else None, "window_length": None,
                 "num_sink_tokens": None, "use_prefill_window_in_sink_attention": False, "unshifted_sink": False}
    return {"attention": attention, "ffn": {"no_op": False, "replace_with_linear": False, "sparsify": None,
                                            "ffn_mult": 1.3125}}


def config(kinds=KINDS, rope=LLAMA3, **over) -> dict:
    cfg = {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "hidden_size": D,
           "num_attention_heads": H, "num_key_value_heads": None, "num_hidden_layers": len(kinds),
           "intermediate_size": None, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500.0,
           "rope_scaling": rope, "max_position_embeddings": 128, "vocab_size": V, "tie_word_embeddings": False,
           "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1, "torch_dtype": "float32",
           "block_configs": [_block(k) for k in kinds]}
    return {**cfg, **over}


def tensors(kinds=KINDS, seed: int = 0) -> dict[str, torch.Tensor]:
    """The attention's tensors of each layer as the model's files name them (no MLP: not read), drawn N(0, 0.3²)
    (norm gains about 1)."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g) * 0.3  # noqa: E731
    sd = {"model.embed_tokens.weight": rand(V, D), "model.norm.weight": 1 + rand(D), "lm_head.weight": rand(V, D)}
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}."
        if kind == "no_op":
            continue
        sd[p + "input_layernorm.weight"] = 1 + rand(D)
        if kind == "linear":
            sd[p + "self_attn.linear_attn.weight"] = rand(D, D)
            continue
        for x, n in (("q", H), ("k", kind), ("v", kind)):
            sd[f"{p}self_attn.{x}_proj.weight"] = rand(n * R, D)
        sd[p + "self_attn.o_proj.weight"] = rand(D, H * R)
    return sd


def write(folder, cfg: dict, sd: dict):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    safetensors.save_file(sd, str(folder / "model.safetensors"))
    return folder


def _llama_layer(kv: int, rope: dict | None, sd: dict, i: int):
    """transformers' one-layer Llama with ``kv`` K/V heads and layer ``i``'s attention and its norm from ``sd``."""
    transformers = pytest.importorskip("transformers")
    from hf_tiny import hf_config

    settings = {"rope_theta": 500.0, "rope_type": "default"} if rope is None else {"rope_theta": 500.0, **rope}
    cfg = hf_config("LlamaConfig", vocab_size=V, hidden_size=D, intermediate_size=16, num_hidden_layers=1,
                    num_attention_heads=H, num_key_value_heads=kv, head_dim=R, max_position_embeddings=128,
                    rms_norm_eps=1e-5, rope_parameters=settings, attn_implementation="eager")
    model = transformers.LlamaModel(cfg).eval()
    layer = model.layers[0]
    with torch.no_grad():
        layer.input_layernorm.weight.copy_(sd[f"model.layers.{i}.input_layernorm.weight"])
        for x in "qkvo":
            getattr(layer.self_attn, f"{x}_proj").weight.copy_(sd[f"model.layers.{i}.self_attn.{x}_proj.weight"])
    return model


def _attention_out(model, x: torch.Tensor) -> torch.Tensor:
    """What ``model``'s one layer's attention adds to the residual for the residual ``x`` (its input embeddings)."""
    out = {}
    handle = model.layers[0].self_attn.register_forward_hook(lambda m, a, o: out.setdefault("o", o[0]))
    with torch.no_grad():
        model(inputs_embeds=x)
    handle.remove()
    return out["o"]


@pytest.mark.parametrize("rope", [LLAMA3, None])
def test_each_attending_layer_is_transformers_llama_layer_with_its_own_kv_heads(tmp_path, rope):
    """Layers 0, 2 and 4 attend (2, 1 and 4 K/V heads), held 4 to a layer; recomputed from the canonical weights,
    each layer's attention output is transformers' Llama layer's with that layer's K/V head count (float32, to 1e-5),
    Llama 3's rope scaling included."""
    sd = tensors()
    hw = compscope.load(write(tmp_path / "m", config(rope=rope), sd))
    assert hw.W_Q.shape[:2] == (3, H) and hw.W_K.shape[:2] == (3, 4) and hw.kv_map == (0, 0, 1, 1, 2, 2, 3, 3)
    x = torch.randn(2, 12, D, generator=torch.Generator().manual_seed(3))
    for k, (i, kv) in enumerate(((0, 2), (2, 1), (4, 4))):
        ref = _attention_out(_llama_layer(kv, rope, sd, i), x)
        torch.testing.assert_close(attention_forward(hw, k, x), ref, atol=1e-5, rtol=1e-5)
    notes = " ".join(hw.meta.notes)
    assert "attention on 3 of the model's 5 layers (0, 2, 4" in notes and "linear map" in notes
    assert "K/V head counts differ between layers (2, 1, 4)" in notes
    from compscope.core.card import card_rows

    assert hw.meta.kv_heads_own == (2, 1, 4)  # (each layer's own count: the card says it beside the 4 held)
    assert dict(card_rows(hw))["K/V heads per layer"].startswith("2, 1, 4 by layer, held as 4")
    from compscope.loading.formats import native

    native.save(hw, tmp_path / "hw")  # (compscope's own format keeps them)
    assert compscope.load(tmp_path / "hw").meta.kv_heads_own == (2, 1, 4)


def test_each_query_head_reads_its_own_layers_kv_head_and_products_are_the_models(tmp_path):
    """By construction: query head h of a layer of g K/V heads reads K/V head h // (H / g) of its k_proj, v_proj:
    W_K[l, kv_map[h]] is that head's rows, and so each head's W_QK and W_OV are the model's."""
    sd = tensors()
    hw = compscope.load(write(tmp_path / "m", config(), sd))
    for k, (i, g) in enumerate(((0, 2), (2, 1), (4, 4))):
        wk = sd[f"model.layers.{i}.self_attn.k_proj.weight"].reshape(g, R, D)
        wv = sd[f"model.layers.{i}.self_attn.v_proj.weight"].reshape(g, R, D)
        for h in range(H):
            own = h // (H // g)
            assert torch.equal(hw.W_K[k, hw.kv_map[h]], wk[own]) and torch.equal(hw.W_V[k, hw.kv_map[h]], wv[own])


def test_scores_read_as_the_same_model_with_every_kv_head_its_query_heads_own(tmp_path):
    """A Llama folder holding, in every layer, one K/V head per query head (the head it reads, copied) is the same
    model; every measure's K- and V-composition scores agree with it (float32, to 1e-5)."""
    sd = tensors()
    ours = compscope.scores(write(tmp_path / "m", config(rope=None), sd), kinds="KV", measures="all")
    layers = [(0, 2), (2, 1), (4, 4)]
    flat = {"model.embed_tokens.weight": sd["model.embed_tokens.weight"], "model.norm.weight": sd["model.norm.weight"],
            "lm_head.weight": sd["lm_head.weight"]}
    for k, (i, g) in enumerate(layers):
        p, q = f"model.layers.{i}.", f"model.layers.{k}."
        flat[q + "input_layernorm.weight"] = sd[p + "input_layernorm.weight"]
        for x in "qo":
            flat[f"{q}self_attn.{x}_proj.weight"] = sd[f"{p}self_attn.{x}_proj.weight"]
        for x in "kv":
            heads = sd[f"{p}self_attn.{x}_proj.weight"].reshape(g, R, D)
            flat[f"{q}self_attn.{x}_proj.weight"] = heads[[h // (H // g) for h in range(H)]].reshape(H * R, D)
        flat[q + "post_attention_layernorm.weight"] = torch.ones(D)
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": D, "num_attention_heads": H,
             "num_key_value_heads": H, "num_hidden_layers": 3, "rms_norm_eps": 1e-5, "rope_theta": 500.0,
             "vocab_size": V, "head_dim": R, "tie_word_embeddings": False}
    ref = compscope.scores(write(tmp_path / "ref", llama, flat), kinds="KV", measures="all")
    a, b = ours.to_pandas(), ref.to_pandas()
    assert len(a) == len(b) > 0
    key = ["measure", "metric", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]
    merged = a.merge(b, on=key, suffixes=("", "_ref"))
    assert len(merged) == len(a)
    np.testing.assert_allclose(merged.value, merged.value_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("change, error, needle", [
    (lambda c: c["block_configs"][2]["attention"].update(window_length=64), UnsupportedModelError,
     "entry 2: attention settings window_length=64"),
    (lambda c: c["block_configs"][0]["attention"].update(num_sink_tokens=4), UnsupportedModelError,
     "num_sink_tokens=4"),
    (lambda c: c["block_configs"][0]["attention"].update(n_heads_in_group=3), LoadError,
     "entry 0: attention 'n_heads_in_group' = 3 does not divide num_attention_heads = 8"),
    (lambda c: c["block_configs"].pop(), LoadError, "'block_configs' must list one block per layer (5), got 4"),
    (lambda c: c["block_configs"][1].pop("attention"), LoadError, "entry 1 has no 'attention' settings"),
    (lambda c: c["block_configs"].__setitem__(slice(None), [_block("linear")] * 5), UnsupportedModelError,
     "no attention layer among 5"),
])
def test_block_configs_that_are_not_read_are_refused_by_name(tmp_path, change, error, needle):
    cfg = config()
    change(cfg)
    folder = write(tmp_path / "m", cfg, tensors())
    with pytest.raises(error) as e:
        compscope.load(folder)
    assert str(e.value).startswith(f"{folder}: ") and needle in str(e.value)


def test_a_kv_projection_of_another_layers_count_is_refused_naming_the_tensor_and_its_shape(tmp_path):
    sd = tensors()
    sd["model.layers.2.self_attn.k_proj.weight"] = torch.zeros(2 * R, D)  # two heads where the layer has one
    with pytest.raises(WeightError, match=r"tensor 'model\.layers\.2\.self_attn\.k_proj\.weight' has shape "
                                          r"\(8, 32\), expected \(4, 32\)"):
        compscope.load(write(tmp_path / "m", config(), sd))


def _llama_cpp_permute(w: torch.Tensor, n_head: int) -> np.ndarray:
    """llama.cpp's converter's permutation of q/k rows (its DeciModel.permute: pairs of each head's halves)."""
    a = w.numpy()
    return a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def write_gguf(path, sd: dict, kinds=KINDS, one_head_count: bool = False, divisors: np.ndarray | None = None,
               meta: dict | None = None, kv_counts: list | None = None):
    """A ``deci`` file as llama.cpp's converter writes Nemotron-51B's: per-layer query and K/V head counts (0 and 0
    on a layer without attention; H and 0 on a linear one, its map as attn_output), q/k rows permuted per layer's
    count, Llama 3's scaling as ``rope_freqs`` divisors; ``one_head_count``: one query head count (DeciLM-7B's);
    ``kv_counts``, ``meta``: other K/V head counts, more metadata (``deci.KEY``: a float)."""
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "deci")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(V)])
    heads = [0 if k == "no_op" else H for k in kinds]
    w.add_head_count(H if one_head_count else heads)
    w.add_head_count_kv(kv_counts or [k if isinstance(k, int) else 0 for k in kinds])
    w.add_block_count(len(kinds))
    w.add_context_length(128)
    w.add_embedding_length(D)
    w.add_feed_forward_length([64] * len(kinds))
    w.add_layer_norm_rms_eps(1e-5)
    w.add_key_length(R)
    w.add_value_length(R)
    w.add_rope_freq_base(500.0)
    w.add_rope_dimension_count(R)
    w.add_vocab_size(V)
    for key, value in (meta or {}).items():
        w.add_float32(f"deci.{key}", value)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].numpy())
    w.add_tensor("output_norm.weight", sd["model.norm.weight"].numpy())
    w.add_tensor("output.weight", sd["lm_head.weight"].numpy())
    if divisors is not None:
        w.add_tensor("rope_freqs.weight", divisors)
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}."
        if kind == "no_op":
            continue
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"].numpy())
        if kind == "linear":
            w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.linear_attn.weight"].numpy())
            continue
        w.add_tensor(f"blk.{i}.attn_q.weight", _llama_cpp_permute(sd[p + "self_attn.q_proj.weight"], H))
        w.add_tensor(f"blk.{i}.attn_k.weight", _llama_cpp_permute(sd[p + "self_attn.k_proj.weight"], kind))
        w.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"].numpy())
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"].numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("one_head_count", [False, True])
def test_a_deci_gguf_reads_as_its_folder(tmp_path, one_head_count):
    """llama.cpp's ``deci`` file of the folder's weights (its per-layer head counts, q/k rows permuted with each
    layer's own count, Llama 3's scaling as frequency divisors) reads as the folder: the same heads exactly, the same
    frequencies to float32's rounding of the divisors."""
    sd = tensors()
    ref = compscope.load(write(tmp_path / "m", config(), sd))
    theta, dims = 500.0, torch.arange(0, R, 2, dtype=torch.float64) / R
    divisors = ((1.0 / theta**dims) / ref.rotary.inv_freq[0]).float().numpy()
    kinds = [k if k != "no_op" else 2 for k in KINDS] if one_head_count else KINDS  # (DeciLM-7B: every layer attends)
    if one_head_count:
        sd = tensors(kinds)
        ref = compscope.load(write(tmp_path / "m7", config(kinds), sd))
    ours = compscope.load(write_gguf(tmp_path / "m.gguf", sd, kinds, one_head_count, divisors))
    assert ours.meta.family == "nemotron_nas" and ours.kv_map == ref.kv_map
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight)
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("change, needle", [
    (dict(meta={"attention.scale": 0.5}), "'deci.attention.scale' = 0.5: a logit scale Nemotron-NAS does not have"),
    (dict(kv_counts=[3, 0, 1, 0, 4]), "layer 0 3 K/V heads for 8 query heads"),
    (dict(kv_counts=[2, 1, 1, 0, 4]), "layer 1 1 K/V heads for 0 query heads"),
    (dict(kv_counts=[2, 0, 1, 0]), "do not give each of the 5 layers"),
    (dict(kv_counts=[True, False, True, False, True]), "do not give each of the 5 layers"),
    (dict(kv_counts=2), "2 K/V heads for 0 query heads"),  # (one count for every layer: one without attention too)
])
def test_a_deci_gguf_whose_heads_or_scale_are_not_the_models_is_refused_by_name(tmp_path, change, needle):
    path = write_gguf(tmp_path / "m.gguf", tensors(), **change)
    with pytest.raises(UnsupportedModelError) as e:
        compscope.load(path)
    assert str(e.value).startswith(f"{path}: ") and needle in str(e.value)


def test_the_data_based_commands_refuse_it_by_name_before_loading_anything(tmp_path):
    """transformers has no model of this type, and its GGUF reader names ``deci`` without one: ``validate`` says so
    of the folder and of the file (the weights read; nothing else is tried)."""
    pytest.importorskip("transformers")
    sd = tensors()
    folder, path = write(tmp_path / "m", config(), sd), write_gguf(tmp_path / "m.gguf", sd)
    with pytest.raises(UnsupportedModelError, match=r"m: a model of type 'nemotron-nas' \(nemotron_nas\), which "
                                                    r"transformers has no model of .* the data-based commands "
                                                    r"cannot run"):
        compscope.validate(folder)
    with pytest.raises(UnsupportedModelError, match=r"m\.gguf: a GGUF file of architecture 'deci': transformers' GGUF "
                                                    r"reader names it, but transformers has no model"):
        compscope.validate(path)
    deci = write(tmp_path / "d", deci_config(), tensors(DECI_KV))
    with pytest.raises(UnsupportedModelError, match=r"d: a model of type 'deci' \(decilm\), which transformers has no "
                                                    r"model of"):
        compscope.validate(deci)


def test_the_catalogue_says_it_is_read_for_the_weights_alone():
    from compscope.loading import catalogue

    read, line = catalogue.lookup("nemotron-nas")
    assert read and "read by the nemotron_nas family" in line
    assert "weights only: transformers has no model of it" in line
    assert "runs on data, but those of decilm and nemotron_nas, which transformers has no model of." in \
        catalogue.markdown()
    read, line = catalogue.lookup("deci", only="gguf")  # (transformers' GGUF reader names it, cannot run it)
    assert read and line == ("deci: GGUF architecture 'deci', read by the nemotron_nas family (weights only: "
                             "transformers' GGUF reader names it, but transformers has no model of the type it makes "
                             "of it (Nemotron-NAS and DeciLM run through their own code, which compscope does not "
                             "run))")
    read, line = catalogue.lookup("deci", only="model_type")  # (DeciLM-7B's folders)
    assert read and "read by the decilm family" in line
    assert line.endswith("weights only: transformers has no model of it)")
    read, line = catalogue.lookup("llama")
    assert read and "read by the llama family" in line and "transformers has no model of it" not in line


#: DeciLM-7B's layers: every one attends, each with its own K/V head count
DECI_KV = [2, 1, 4]


def deci_config(**over) -> dict:
    """A config as DeciLM-7B's (``deci``: a LlamaConfig with ``num_key_value_heads_per_layer``, dynamic NTK rope)."""
    cfg = {"architectures": ["DeciLMForCausalLM"], "model_type": "deci", "hidden_size": D, "num_attention_heads": H,
           "num_key_value_heads_per_layer": DECI_KV, "num_hidden_layers": 3, "intermediate_size": 64,
           "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500.0,
           "rope_scaling": {"type": "dynamic", "factor": 2.0}, "max_position_embeddings": 128, "vocab_size": V,
           "tie_word_embeddings": False, "attention_bias": False, "pretraining_tp": 1, "torch_dtype": "float32"}
    return {**cfg, **over}


def test_a_decilm_folder_is_each_layer_transformers_llama_layer_with_its_own_kv_heads(tmp_path):
    """DeciLM-7B's layers (2, 1 and 4 K/V heads, every layer attending): each layer recomputed from the canonical
    weights is transformers' Llama layer with that count (float32, 1e-5); dynamic NTK scaling leaves the stated
    frequencies within max_position_embeddings, read so and noted."""
    sd = tensors(DECI_KV)
    hw = compscope.load(write(tmp_path / "m", deci_config(), sd))
    assert hw.meta.family == "decilm" and hw.W_K.shape[:2] == (3, 4)
    x = torch.randn(2, 12, D, generator=torch.Generator().manual_seed(3))
    for i, kv in enumerate(DECI_KV):
        ref = _attention_out(_llama_layer(kv, None, sd, i), x)
        torch.testing.assert_close(attention_forward(hw, i, x), ref, atol=1e-5, rtol=1e-5)
    assert any("dynamic NTK rope scaling (factor 2): the stated frequencies on sequences up to "
               "max_position_embeddings = 128 tokens" in n for n in hw.meta.notes)


@pytest.mark.parametrize("counts", [[2, 1], [2, 3, 4], None])
def test_decilm_kv_counts_that_are_not_one_per_layer_dividing_the_heads_are_refused(tmp_path, counts):
    folder = write(tmp_path / "m", deci_config(num_key_value_heads_per_layer=counts), tensors(DECI_KV))
    with pytest.raises(LoadError, match=r"'num_key_value_heads_per_layer' = .* is not one K/V head count per layer "
                                        r"\(3\), each dividing num_attention_heads = 8"):
        compscope.load(folder)


def test_a_deci_gguf_of_decilm_reads_as_its_decilm_folder(tmp_path):
    """DeciLM-7B's GGUF file (one query head count, each layer's K/V count) is read by the Nemotron-NAS family, its
    folder by DeciLM's: the same heads, exactly (its dynamic rope is not in the file; the folder's is read within
    its context, the same frequencies)."""
    sd = tensors(DECI_KV)
    ref = compscope.load(write(tmp_path / "m", deci_config(), sd))
    ours = compscope.load(write_gguf(tmp_path / "m.gguf", sd, DECI_KV, one_head_count=True))
    assert (ref.meta.family, ours.meta.family) == ("decilm", "nemotron_nas") and ours.kv_map == ref.kv_map
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-12, atol=0)
