"""Encoders with rotary positions and windows on both sides of the query: ModernBERT (its config
forms, a first layer that reads the residual unnormed) and EmbeddingGemma (Gemma 3 attending both
ways); the rotary previous-token score of a bidirectional model against a hand computation; and
ModernBERT's causal decoder beside them. (The family-wide suites run their tiny variants against
transformers: hooks, processing, runner, interventions.)"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import compscope
from compscope.core.attention import attend, project, read_input
from compscope.data.validate import validate
from compscope.errors import WeightError

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "ModernBertConfig"):
    pytest.skip(f"transformers {transformers.__version__} has no ModernBERT", allow_module_level=True)

from compscope.data.runner import transformers_at_least  # noqa: E402
from hf_tiny import BY_ID, build, model_and_capture  # noqa: E402

LEGACY = "modernbert-local-both-sides"  # as the hub's configs state it: global_rope_theta, local_attention, ...


def _pattern(hw, cap, layer: int):
    """Layer ``layer``'s attention (batch, head, query, key), recomputed from the weights read, on the
    residual the captured forward gave it."""
    x = read_input(hw, layer, cap.resid[layer])
    return attend(hw, layer, project(hw, layer, "Q", x), project(hw, layer, "K", x))


def _sees_exactly_within(pattern, radius: int) -> bool:
    """Whether every query attends to every key within ``radius`` positions on either side, and to
    no other."""
    n = pattern.shape[-1]
    near = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= radius
    return bool((pattern[..., near] > 0).all()) and bool((pattern[..., ~near] == 0).all())


def _runs_as_encoder(folder) -> None:
    """The folder runs on data (a short verdict) as an encoder: previous-token labels only."""
    v = validate(str(folder), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)
    assert {h["score"] for h in v.heads} == {"previous_token"}


def _folder(tmp_path, vid=LEGACY):
    build(BY_ID[vid]).save_pretrained(tmp_path)
    return tmp_path, json.loads((tmp_path / "config.json").read_text())


def test_hub_config_and_transformers_5_config_read_alike(tmp_path):
    """The released configs' keys (``global_attn_every_n_layers``, ``global_rope_theta``,
    ``local_rope_theta``) and transformers 5's (``layer_types``, ``rope_parameters`` per type) give
    the same weights: layers 0 and 2 global with base 500, 1 and 3 local with base 50, a window of
    ``local_attention // 2 + 1 = 4`` (``|i − j| ≤ 3``)."""
    folder, cfg = _folder(tmp_path)
    want = compscope.load(folder)
    assert want.sliding_window == (None, 4, None, 4) and want.first_layer_unnormed and not want.causal
    f = want.rotary.inv_freq[:, 0:2]  # pair 1 turns at base^(-2/8)
    torch.testing.assert_close(f[:, 1], torch.tensor([500.0, 50.0, 500.0, 50.0], dtype=torch.float64) ** -0.25)
    legacy = {k: v for k, v in cfg.items() if k not in ("layer_types", "rope_parameters")}
    legacy.update(global_attn_every_n_layers=2, global_rope_theta=500.0, local_rope_theta=50.0)
    new = {k: v for k, v in cfg.items() if k not in ("global_rope_theta", "local_rope_theta")}
    new.update(layer_types=["full_attention", "sliding_attention"] * 2, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 500.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}})
    new.pop("global_attn_every_n_layers", None)
    for form in (legacy, new):
        (folder / "config.json").write_text(json.dumps(form))
        got = compscope.load(folder)
        assert got.sliding_window == want.sliding_window
        torch.testing.assert_close(got.rotary.inv_freq, want.rotary.inv_freq, atol=0, rtol=0)
        torch.testing.assert_close(got.W_Q, want.W_Q, atol=0, rtol=0)


@pytest.mark.parametrize("change, needle", [
    ({"layer_types": ["sliding_attention", "full_attention"] * 2, "global_attn_every_n_layers": 2},
     "transformers 4 and 5 would build different models"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}}, "rope_parameters"),
    ({"layer_types": ["chunked_attention"] * 4}, "layer_types"),
])
def test_settings_it_does_not_compute_are_refused_by_name(tmp_path, change, needle):
    folder, cfg = _folder(tmp_path)
    (folder / "config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(compscope.CompscopeError, match=needle):
        compscope.load(folder)


@pytest.mark.parametrize("vid, layers", [(LEGACY, ((0, None), (1, 3))),
                                         ("embeddinggemma-bidirectional", ((0, 3), (2, None))),
                                         ("t5gemma-encoder-both-sides", ((0, 3), (1, None)))])
def test_the_window_reaches_both_sides_of_the_query(vid, layers):
    """A local layer (window 4): each query attends to keys within 3 positions on either side and to
    no other; a global layer to every key."""
    model, cap = model_and_capture(vid)
    hw = compscope.load(model)
    for layer, reach in layers:
        x = read_input(hw, layer, cap.resid[layer])
        pattern = attend(hw, layer, project(hw, layer, "Q", x), project(hw, layer, "K", x))[0, 0]
        i, j = torch.meshgrid(torch.arange(pattern.shape[0]), torch.arange(pattern.shape[1]), indexing="ij")
        inside = torch.ones_like(pattern, dtype=torch.bool) if reach is None else (i - j).abs() <= reach
        assert bool((pattern[inside] > 0).all()) and bool((pattern[~inside] == 0).all())
        assert bool((pattern[(j > i) & inside] > 0).any())  # keys after the query too


def test_the_first_layer_reads_the_residual_and_only_it():
    """Layer 0's input is the residual itself (the embeddings after their LayerNorm), every later
    layer's a LayerNorm of it; the flag on a model whose layers read no norm at all is refused."""
    model, cap = model_and_capture(LEGACY)
    hw = compscope.load(model)
    torch.testing.assert_close(read_input(hw, 0, cap.resid[0]), cap.resid[0], atol=0, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(read_input(hw, 1, cap.resid[1]), model.layers[1].attn_norm(cap.resid[1]))
    with pytest.raises(WeightError, match="first_layer_unnormed"):
        hw.replace(norm_placement="none")
    with pytest.raises(WeightError, match="first_layer_unnormed"):
        hw.replace(first_layer_unnormed=1)


def _rotate_half(v: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """``v`` (…, r) turned as rotate-half pairs ``(i, i + r/2)`` by ``angle`` (r/2,), in float64."""
    h = v.shape[-1] // 2
    a, b = v[..., :h], v[..., h:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)


def test_rotary_previous_of_a_bidirectional_model_by_hand():
    """The weights-alone previous-token score of an encoder: the mean embedding (raw at the first
    layer, through the layer's LayerNorm gain and bias after it) as query and key; the logit at
    offset ``δ`` is ``scale · (R(i) q)·(R(i − δ) k)``; softmax over ``δ = −63 … 63``, keys beyond a
    local layer's window left out; the mass at ``δ = 1``. Computed here with numpy, head by head."""
    from compscope.analysis.circuits import rotary_previous

    model, _ = model_and_capture("modernbert-biases")
    hw = compscope.load(model)
    got = rotary_previous(hw).numpy()
    E = hw.W_E.double().numpy()
    ln = E - E.mean(0, keepdims=True)
    ln = ln / np.sqrt((ln**2).mean(0, keepdims=True) + hw.attn_norm.eps)
    deltas = np.arange(-63, 64)
    for layer in range(hw.n_layers):
        if layer == 0:
            mu = E.mean(1)
        else:
            mu = ln.mean(1) * hw.attn_norm.gain(layer).double().numpy() + hw.attn_norm.bias[layer].double().numpy()
        f = hw.rotary.inv_freq[layer].numpy()
        w = hw.sliding_window[layer]
        for h in range(hw.n_heads):
            q = hw.W_Q[layer, h].double().numpy() @ mu + hw.b_Q[layer, h].double().numpy()
            k = hw.W_K[layer, h].double().numpy() @ mu + hw.b_K[layer, h].double().numpy()
            logits = np.array([hw.scale * _rotate_half(q, 70 * f) @ _rotate_half(k, (70 - d) * f) for d in deltas])
            if w is not None:
                logits[np.abs(deltas) >= w] = -np.inf
            p = np.exp(logits - logits.max())
            p /= p.sum()
            assert got[layer, h] == pytest.approx(p[deltas == 1][0], rel=1e-4, abs=1e-6), (layer, h)
    assert not math.isclose(got[1].max(), got[1].min())  # heads differ: not a flat score


def test_a_modernbert_folder_runs_validate_end_to_end(tmp_path):
    """On data: the activation labels of a bidirectional model (previous-token only) and the
    interventions, through transformers' own ModernBERT."""
    v = validate(build(BY_ID[LEGACY]), sequences=4, half=4, intervention_sequences=2, kinds="K",
                 metrics=("identity",), progress=False)
    assert {h["score"] for h in v.heads} == {"previous_token"}  # (under each content distribution: rotary)
    assert any("bidirectional model" in n for n in v.notes)
    K = v.effects.by_kind["K"]  # (writer layer, head, reader layer, head): readers after writers only
    assert bool(torch.isfinite(K[0, :, 1:]).all()) and bool((K[0, :, 1:] != 0).any())


def test_embeddinggemma_as_released(tmp_path):
    """EmbeddingGemma's config states ``use_bidirectional_attention`` and the window transformers
    halves (512: keys within 256 tokens on either side, held as 257) for a ``Gemma3TextModel``; read
    as an encoder, no unembedding. The folder runs on data as one (previous-token labels only)."""
    vid = "embeddinggemma-bidirectional"
    build(BY_ID[vid]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["Gemma3TextModel"]
    cfg["sliding_window"] = 6  # as stated (transformers 4 saves the window it halved, and would halve it again)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hw = compscope.load(tmp_path)
    assert not hw.causal and hw.sliding_window == (4, 4, None) and hw.W_U is None
    assert any("keys within 3 tokens on either side" in n for n in hw.meta.notes)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "sliding_window": 512}))
    assert compscope.load(tmp_path).sliding_window == (257, 257, None)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    _runs_as_encoder(tmp_path)


DECODER = "modernbert-decoder-causal-window"


@pytest.mark.skipif(not transformers_at_least(5), reason="transformers 4 builds another decoder (the test below)")
def test_modernbert_decoder_attends_behind_the_query_with_each_layer_types_base():
    """The decoder's local layer (window ``local_attention // 2 = 2``) attends to the query's own
    position and the one before, no other; the global layer to every key up to the query; the local
    layers turn at ``local_rope_theta`` (50), the global ones at ``global_rope_theta`` (500), which
    the notes state beside transformers 4's single base."""
    model, cap = model_and_capture(DECODER)
    hw = compscope.load(model)
    assert hw.causal and hw.first_layer_unnormed and hw.sliding_window == (None, 2, None) and hw.W_U is None
    torch.testing.assert_close(hw.rotary.inv_freq[:, 1], torch.tensor([500.0, 50.0, 500.0], dtype=torch.float64) ** -0.25)
    for layer, reach in ((1, 1), (0, None)):
        x = read_input(hw, layer, cap.resid[layer])
        pattern = attend(hw, layer, project(hw, layer, "Q", x), project(hw, layer, "K", x))[0, 0]
        i, j = torch.meshgrid(torch.arange(pattern.shape[0]), torch.arange(pattern.shape[1]), indexing="ij")
        inside = (j <= i) if reach is None else (j <= i) & (i - j <= reach)
        assert bool((pattern[inside] > 0).all()) and bool((pattern[~inside] == 0).all())
    assert any("transformers 4 turns both at the global base" in n for n in hw.meta.notes)


@pytest.mark.skipif(transformers_at_least(5), reason="transformers 5 builds the decoder compscope reads")
def test_modernbert_decoder_under_transformers_4_is_refused_on_data():
    """transformers 4 turns the decoder's local layers at the global base: the model that runs is not
    the one read (transformers 5's), and the data-based commands say so rather than judge it."""
    if not hasattr(transformers, "ModernBertDecoderConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no ModernBERT decoder")
    cfg = transformers.ModernBertDecoderConfig(**BY_ID[DECODER].config)  # (make_config skips it under transformers 4)
    cfg._attn_implementation = "eager"
    model = transformers.ModernBertDecoderForCausalLM(cfg)
    with pytest.raises(compscope.CompscopeError, match="not what compscope recomputes"):
        validate(model.eval(), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)



@pytest.mark.skipif(not hasattr(transformers, "EuroBertConfig"), reason="this transformers has no EuroBERT")
def test_eurobert_as_released(tmp_path):
    """EuroBERT's released config (saved before transformers had the model: ``rope_theta``, a null
    ``rope_scaling``, ``clf_pooling``) reads as an encoder: every query sees every key, the rotary
    base the config's, no unembedding; a ``sliding_window`` key, which its bidirectional mask never
    applies, is refused by name. The folder runs on data as an encoder (previous-token labels only)."""
    vid = "eurobert-gqa-biases"
    model, cap = model_and_capture(vid)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for key in ("rope_parameters", "classifier_pooling"):
        cfg.pop(key)
    released = {**cfg, "architectures": ["EuroBertForMaskedLM"], "rope_theta": 500.0, "rope_scaling": None,
                "clf_pooling": "late", "hidden_dropout": 0.0, "auto_map": {"AutoModel": "modeling_eurobert.EuroBertModel"}}
    (tmp_path / "config.json").write_text(json.dumps(released))
    hw = compscope.load(tmp_path)
    assert not hw.causal and hw.sliding_window == (None, None) and hw.W_U is None and not hw.first_layer_unnormed
    torch.testing.assert_close(hw.rotary.inv_freq[:, 1], torch.full((2,), 500.0, dtype=torch.float64) ** -0.25)
    assert bool((_pattern(hw, cap, 1) > 0).all())  # keys on both sides of every query
    (tmp_path / "config.json").write_text(json.dumps({**released, "sliding_window": 4}))
    with pytest.raises(compscope.CompscopeError, match="sliding_window"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(released))
    _runs_as_encoder(tmp_path)


@pytest.mark.skipif(not hasattr(transformers, "UltrabertConfig"), reason="this transformers has no UltraBERT")
def test_ultrabert_windows_bases_and_released_config(tmp_path):
    """UltraBERT's local layers see ``sliding_window = 2`` tokens on either side (``|i − j| ≤ 2``,
    held as the window 3), its global layer (every third) every key, each type at its base. The
    released config's keys (``attention_windows``, one ``rope_theta`` per layer) read as the saved
    transformers 5 form; without any of them, transformers' defaults (window 128, bases 10000 and
    2560000); a negative window is refused by name. The folder runs on data as an encoder."""
    vid = "ultrabert-local-both-sides"
    model, cap = model_and_capture(vid)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    hw = compscope.load(tmp_path)
    assert not hw.causal and hw.sliding_window == (3, 3, None) and hw.W_U is None
    for layer, base in ((0, 100.0), (1, 100.0), (2, 5000.0)):  # inv_freq_i = base^(-2i / d_head), d_head 8
        want = torch.tensor([base ** (-2 * i / 8) for i in range(4)], dtype=torch.float64)
        torch.testing.assert_close(hw.rotary.inv_freq[layer].double(), want)
    assert _sees_exactly_within(_pattern(hw, cap, 0), 2)

    released = {k: v for k, v in cfg.items() if k not in ("layer_types", "sliding_window", "rope_parameters")}
    released |= {"attention_windows": [2, 2, 0], "rope_theta": [100.0, 100.0, 5000.0]}
    (tmp_path / "config.json").write_text(json.dumps(released))
    old = compscope.load(tmp_path)
    assert old.sliding_window == hw.sliding_window
    torch.testing.assert_close(old.rotary.inv_freq, hw.rotary.inv_freq)
    torch.testing.assert_close(old.W_Q, hw.W_Q)

    bare = {k: v for k, v in released.items() if k not in ("attention_windows", "rope_theta")}
    (tmp_path / "config.json").write_text(json.dumps(bare))
    plain = compscope.load(tmp_path)
    assert plain.sliding_window == (129, 129, None)
    torch.testing.assert_close(plain.rotary.inv_freq[:, 1].double(),
                               torch.tensor([1e4, 1e4, 2.56e6], dtype=torch.float64) ** -0.25)

    (tmp_path / "config.json").write_text(json.dumps({**released, "attention_windows": [2, -1, 0]}))
    with pytest.raises(compscope.CompscopeError, match="attention_windows"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    _runs_as_encoder(tmp_path)


@pytest.mark.skipif(not hasattr(transformers, "EmbeddingGemma2TextConfig"), reason="this transformers has no "
                    "EmbeddingGemma 2")
def test_embedding_gemma2_radius_widths_and_config_forms(tmp_path):
    """EmbeddingGemma 2's local layers see ``sliding_window = 2`` tokens on either side (a radius:
    held as the window 3), its global (last) layer every key; the saved ``per_layer_config`` and the
    builder keys it comes from (``global_head_dim``, no ``num_global_key_value_heads``: one K/V head
    on a global layer) read alike; the composite model's config (``text_config``) reads as its text
    model, and that folder runs on data (transformers' AutoModel: an encoder, not a vision-language model's
    generator)."""
    vid = "embedding-gemma2-encoder"
    model, cap = model_and_capture(vid)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["per_layer_config"] == {"2": {"head_dim": 8, "num_key_value_heads": 1}}
    hw = compscope.load(tmp_path)
    assert not hw.causal and hw.sliding_window == (3, 3, None) and hw.W_U is None and hw.d_head == 8
    assert hw.n_kv_heads == 2  # (lcm of 2 local and 1 global)
    assert _sees_exactly_within(_pattern(hw, cap, 0), 2) and bool((_pattern(hw, cap, 2) > 0).all())

    built = {k: v for k, v in cfg.items() if k not in ("per_layer_config", "layer_types")}
    (tmp_path / "config.json").write_text(json.dumps({**built, "global_head_dim": 8, "sliding_window_pattern": 3}))
    same = compscope.load(tmp_path)
    assert same.sliding_window == hw.sliding_window
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        torch.testing.assert_close(getattr(same, name), getattr(hw, name))
    torch.testing.assert_close(same.rotary.inv_freq, hw.rotary.inv_freq)

    text = {k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "dtype")}
    whole = transformers.AutoModel.from_config(transformers.EmbeddingGemma2Config(text_config=text))
    whole.language_model.load_state_dict(model.state_dict())
    whole.save_pretrained(tmp_path / "whole")  # (its text model's tensors under language_model.)
    inner = compscope.load(tmp_path / "whole")
    torch.testing.assert_close(inner.W_Q, hw.W_Q)
    assert any("language model" in n for n in inner.meta.notes)

    _runs_as_encoder(tmp_path / "whole")


@pytest.mark.skipif(not hasattr(transformers, "OpenAIPrivacyFilterConfig"), reason="this transformers has no privacy "
                    "filter")
def test_privacy_filter_window_sinks_and_defaults(tmp_path):
    """OpenAI's privacy filter: every layer sees ``sliding_window = 2`` tokens on either side (held as
    the window 3), each head's pattern sums to less than one (its sink), the rotary map on interleaved
    pairs; a config without rope settings or a window reads transformers' defaults (YaRN as gpt-oss
    ships it, radius 128), a null window is refused by name; the folder runs on data as an encoder."""
    vid = "privacy-filter-sinks-both-sides"
    model, cap = model_and_capture(vid)
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    hw = compscope.load(tmp_path)
    assert not hw.causal and hw.sliding_window == (3, 3) and hw.W_U is None and hw.sinks is not None
    assert hw.rotary.style == "interleaved"
    pattern = _pattern(hw, cap, 0)
    assert _sees_exactly_within(pattern, 2) and bool((pattern.sum(-1) < 1).all())

    bare = {k: v for k, v in cfg.items() if k not in ("rope_parameters", "sliding_window")}
    (tmp_path / "config.json").write_text(json.dumps(bare))
    plain = compscope.load(tmp_path)
    assert plain.sliding_window == (129, 129)
    torch.testing.assert_close(plain.rotary.inv_freq, hw.rotary.inv_freq)  # (the variant's rope is the default)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "sliding_window": None}))
    with pytest.raises(compscope.CompscopeError, match="sliding_window"):
        compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    _runs_as_encoder(tmp_path)


def test_roformer_config_and_sine_table(tmp_path):
    """RoFormer reads as BERT's layers turned on adjacent pairs at base 10000; refused by name: values
    turned too (``rotary_value``), embeddings narrower than the residual (``embedding_size``), and a
    saved table of sines other than the sinusoid the model builds."""
    from safetensors.torch import load_file, save_file

    build(BY_ID["roformer-rotary-post-ln"]).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    hw = compscope.load(tmp_path)
    assert hw.rotary.style == "interleaved" and hw.W_pos is None and not hw.causal
    torch.testing.assert_close(hw.rotary.inv_freq[0], 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    for bad, key in (({"rotary_value": True}, "rotary_value"), ({"embedding_size": 16}, "embedding_size")):
        (tmp_path / "config.json").write_text(json.dumps({**cfg, **bad}))
        with pytest.raises(compscope.CompscopeError, match=key):
            compscope.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    sd = load_file(tmp_path / "model.safetensors")
    table = next(k for k in sd if k.endswith("encoder.embed_positions.weight"))
    sd[table] = sd[table] + 0.01
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.UnsupportedModelError, match="table of sines"):
        compscope.load(tmp_path)


@pytest.mark.parametrize("cls", ["T5GemmaEncoderModel", "T5GemmaForConditionalGeneration"])
def test_a_t5gemma_folder_runs_as_its_encoder_within_the_window_transformers_masks(tmp_path, cls):
    """T5Gemma saved as its encoder or whole: Gemma 2's heads attending both ways, the sliding layer's window
    ``sliding_window + 1`` (|i − j| ≤ 3), no unembedding, a whole model's decoder said to be left out; run as the class
    the folder names, its encoder hooked, every layer recomputed from the weights equals what it adds. transformers 4
    masks the sliding layer one token narrower (|i − j| < 3): there the runner holds its sequences to 3 tokens, on which
    the two masks agree, and refuses longer ones."""
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import _T5GEMMA, perturbed

    whole = cls != "T5GemmaEncoderModel"
    config = transformers.T5GemmaConfig(encoder=_T5GEMMA, decoder=_T5GEMMA, vocab_size=_T5GEMMA["vocab_size"],
                                        is_encoder_decoder=whole)
    model = perturbed(lambda: getattr(transformers, cls)(config), seed=8, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = (model.model if whole else model).encoder
    assert hw.meta.family == "t5gemma_encoder" and hw.sliding_window == (4, None) and not hw.causal and hw.W_U is None
    assert torch.equal(hw.W_Q[1, 2], enc.layers[1].self_attn.q_proj.weight.detach()[16:24])
    assert any("decoder" in n and "not read" in n for n in hw.meta.notes) == whole
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == cls
    n = 10 if transformers_at_least(5) else 3
    assert runner.n_ctx == (None if n == 10 else 3)
    ids = torch.randint(2, _T5GEMMA["vocab_size"], (2, n), generator=torch.Generator().manual_seed(9))
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)
    if n == 3:
        with pytest.raises(compscope.OptionError, match="longer than"):
            runner.trace(torch.randint(2, 60, (1, 4)))
