"""The language backbones of speech models: Pocket TTS's (family ``pocket_tts``), llama.cpp's ``pockettts`` files read
as its graph computes them from their own tensors, Gradium Phonon TTS's folders with their fused projections; and the
data runner keeping the audio placeholder ids of Pocket TTS, Gradium and Higgs Audio v2 out of random sequences; Dia's
text encoder from a whole model's folder and from its own. (The transformers models' heads, hooks and interventions:
the ``pocket-tts-layernorm-biases``, ``higgs-audio-v2-text-positions`` and ``dia-encoder-unscaled-gqa`` variants of
``hf_tiny``.)"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from test_gguf_format import D, V, _write_random_gguf  # noqa: E402


def _write_pockettts(path, n_heads: int, n_kv: int, seed: int, extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """A Pocket TTS GGUF as llama.cpp's converter writes one: q, k, v apart (the original in_proj cut in three, rows as
    stored), LayerNorms with biases, no output head; ``extra``: more tensors of a block-0 projection's bias (by their
    names in the file). Every tensor N(0, 0.5²) from one seeded generator (norm gains 1 + that)."""
    r = D // n_heads
    shapes = {"token_embd.weight": (V, D), "output_norm.weight": (D,), "output_norm.bias": (D,)}
    for i in range(2):
        b = f"blk.{i}."
        shapes.update({b + "attn_norm.weight": (D,), b + "attn_norm.bias": (D,), b + "attn_q.weight": (n_heads * r, D),
                       b + "attn_k.weight": (n_kv * r, D), b + "attn_v.weight": (n_kv * r, D),
                       b + "attn_output.weight": (D, n_heads * r), b + "ffn_norm.weight": (D,),
                       b + "ffn_norm.bias": (D,), b + "ffn_up.weight": (32, D), b + "ffn_down.weight": (D, 32)})
    shapes.update({name: (D,) for name in extra})
    return _write_random_gguf(path, "pockettts", shapes, seed, head_count=n_heads, head_count_kv=n_kv,
                              layer_norm_eps=1e-5, rope_freq_base=300.0)


def _attention(t: dict, b: str, x: np.ndarray, n_heads: int, n_kv: int, base: float) -> np.ndarray:
    """What block ``b``'s attention adds to the residual ``x (T, D)``, from the file's tensors ``t`` as llama.cpp's
    pockettts graph computes it: LayerNorm (eps 1e-5, gain and bias), q, k, v (with their biases where it holds
    them), rotary in interleaved pairs (2i, 2i + 1) turned by position × base^(-2i/r) (its NORM rope), causal logits
    at d_head^-1/2, softmax, then attn_output."""
    r, T = D // n_heads, len(x)
    pos, i, j = np.arange(T)[:, None], np.arange(T)[:, None], np.arange(T)[None, :]
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    xn = (x - mu) / np.sqrt(var + 1e-5) * t[b + "attn_norm.weight"] + t[b + "attn_norm.bias"]
    q, k, v = (xn @ t[b + f"attn_{p}.weight"].T.astype(np.float64) + t.get(b + f"attn_{p}.bias", 0.0) for p in "qkv")

    def turn(u):  # (T, r): each pair (2i, 2i + 1) rotated
        f = base ** (-np.arange(0, r, 2) / r)
        c, s = np.cos(pos * f), np.sin(pos * f)
        out = np.empty_like(u)
        out[:, 0::2], out[:, 1::2] = u[:, 0::2] * c - u[:, 1::2] * s, u[:, 0::2] * s + u[:, 1::2] * c
        return out

    z = np.empty((T, n_heads * r))
    for h in range(n_heads):
        g = h // (n_heads // n_kv)
        logits = turn(q[:, h * r:(h + 1) * r]) @ turn(k[:, g * r:(g + 1) * r]).T / math.sqrt(r)
        logits = np.where(j <= i, logits, -np.inf)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        z[:, h * r:(h + 1) * r] = (e / e.sum(-1, keepdims=True)) @ v[:, g * r:(g + 1) * r]
    return z @ t[b + "attn_output.weight"].T


@pytest.mark.parametrize("n_heads, n_kv", [(4, 2), (3, 3)])
def test_a_pockettts_gguf_attends_as_llama_cpps_graph_computes_from_the_files_tensors(tmp_path, n_heads, n_kv):
    """Pocket TTS as llama.cpp's converter writes it and its graph runs it: what each layer's attention adds to a
    random residual equals what is computed here from the file's own tensors (LayerNorm, rotary in interleaved
    pairs at the file's base, causal softmax); read by the pocket_tts family, with no unembedding (the file holds
    none: llama.cpp reuses the embedding only so that a sampler runs), the final LayerNorm the file's."""
    from compscope.core.attention import attention_forward

    t = _write_pockettts(tmp_path / "p.gguf", n_heads, n_kv, seed=3)
    hw = compscope.load(tmp_path / "p.gguf")
    assert hw.meta.family == "pocket_tts" and hw.causal and hw.n_kv_heads == n_kv and hw.W_U is None
    assert any("the backbone has no head over tokens; a flow head" in n for n in hw.meta.notes)
    assert hw.final_norm.kind == "layernorm"
    np.testing.assert_array_equal(hw.final_norm.bias.reshape(-1).numpy(), t["output_norm.bias"])
    np.testing.assert_array_equal(hw.W_E.T.numpy(), t["token_embd.weight"])  # (W_E: d_model × vocab)
    x = np.random.default_rng(7).standard_normal((9, D))
    for layer in range(2):
        expected = _attention(t, f"blk.{layer}.", x, n_heads, n_kv, 300.0)
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), expected, rtol=1e-4, atol=1e-4)


def test_a_pockettts_gguf_with_a_projection_bias_llama_cpp_would_not_add_is_refused_by_name(tmp_path):
    """llama.cpp's loader takes no bias on the output projection (its graph adds none); a file holding one is refused
    by the tensor's name, not read as a Pocket TTS with biases. q, k and v biases, which its graph adds, are read (q's
    and k's turned with their rows)."""
    from compscope.core.attention import attention_forward

    _write_pockettts(tmp_path / "b.gguf", 4, 2, seed=3, extra=("blk.0.attn_output.bias", "blk.1.attn_output.bias"))
    with pytest.raises(compscope.UnsupportedModelError, match=r"b\.gguf: a pockettts file with 'blk\.0\.attn_output"
                                                              r"\.bias': llama\.cpp's pockettts model has no bias"):
        compscope.load(tmp_path / "b.gguf")
    t = _write_pockettts(tmp_path / "q.gguf", 4, 4, seed=3, extra=tuple(f"blk.{i}.attn_{p}.bias" for i in range(2)
                                                                          for p in "qkv"))
    hw = compscope.load(tmp_path / "q.gguf")
    assert hw.b_O is None and hw.b_Q is not None
    x = np.random.default_rng(8).standard_normal((9, D))
    for layer in range(2):
        ours = attention_forward(hw, layer, torch.tensor(x, dtype=torch.float32)[None])[0]
        np.testing.assert_allclose(ours.double().numpy(), _attention(t, f"blk.{layer}.", x, 4, 4, 300.0), rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.parametrize("variant, placeholders", [
    ("pocket-tts-layernorm-biases", dict(audio_prompt_token_id=8, audio_latent_token_id=9,
                                         audio_prompt_bos_token_id=10, audio_bos_token_id=11)),
    ("higgs-audio-v2-text-positions", dict(audio_token_id=8, audio_delay_token_id=11)),
    ("gradium-phonon-tts-layernorm", dict(audio_prompt_token_id=8, audio_latent_token_id=9, audio_bos_token_id=10))])
def test_random_sequences_hold_none_of_a_speech_models_audio_placeholders(variant, placeholders):
    """Pocket TTS fills the positions of its audio placeholder ids with audio latents, Higgs Audio v2 those of its
    audio and delay ids with codebook embeddings, read through its audio norms: the runner names them among the ids
    random sequences avoid, and the verdict's sequences hold none (in a vocabulary of 12, which a draw of 400 tokens
    would hit otherwise)."""
    from hf_tiny import BY_ID, build

    from compscope.data.sequences import repeats
    from compscope.data.runner import runner_for

    model = build(BY_ID[variant], vocab_size=12, **placeholders)
    runner = runner_for(model, progress=False)
    ids = set(placeholders.values())
    assert ids <= set(runner.special_ids())
    tokens = repeats(20, 10, runner.hw.n_vocab, 5, runner.bos, avoid=runner.special_ids()).tokens
    assert tokens.shape[0] == 20 and tokens.shape[1] >= 20  # (Higgs Audio's: its BOS first)
    assert not torch.isin(tokens, torch.tensor(sorted(ids))).any()


def test_a_higgs_audio_folder_with_its_text_head_reads_no_unembedding(tmp_path):
    """Higgs Audio v2 saved with the text head some checkpoints hold (``text_lm_head``, which transformers does not
    load by default): the folder's heads are the model object's, the text head left unread (no refusal of an unread
    tensor), no unembedding (the model's head scores audio codebooks), said."""
    from hf_tiny import BY_ID, make_config

    cfg = make_config(BY_ID["higgs-audio-v2-text-positions"])
    model = transformers.HiggsAudioV2ForConditionalGeneration(cfg, use_text_head=True).eval()
    model.save_pretrained(tmp_path)
    hw, ref = compscope.load(tmp_path), compscope.load(model)
    assert hw.meta.family == ref.meta.family == "higgs_audio_v2" and hw.W_U is None and ref.W_U is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    assert torch.equal(hw.attn_norm.weight, torch.stack([b.input_layernorm.weight for b in model.model.layers]))
    assert any("Higgs Audio v2's head scores the audio codebooks' tokens" in n for n in hw.meta.notes)


def test_a_gradium_folder_reads_its_fused_in_proj_as_transformers_loads_it(tmp_path):
    """Gradium Phonon TTS's folders hold each layer's fused ``self_attn.in_proj`` (q and k rows rotating adjacent
    pairs, as its runtime stores them; transformers saves them back so): read as transformers loads them, the heads
    are the model object's, and the data runner's recomputed attention agrees with the running model's."""
    from hf_tiny import BY_ID, build, random_ids
    from safetensors import safe_open

    from compscope.data.runner import runner_for

    model = build(BY_ID["gradium-phonon-tts-layernorm"])
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert "layers.0.self_attn.in_proj.weight" in f.keys()
    hw, ref = compscope.load(tmp_path), compscope.load(model)
    assert hw.meta.family == "pocket_tts" and hw.W_U is None
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    runner = runner_for(tmp_path, progress=False, device="cpu")
    runner.trace(random_ids())
    assert runner._agreed
    import json

    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, "num_key_value_heads": 2}))
    with pytest.raises(compscope.UnsupportedModelError, match=r"in_proj.*a fused in_proj beside grouped K/V heads"):
        compscope.load(tmp_path)


@pytest.mark.parametrize("alone", [False, True], ids=["whole", "encoder-alone"])
def test_a_dia_folder_runs_as_its_text_encoder(tmp_path, alone):
    """Dia saved whole (``DiaForConditionalGeneration``, its settings the config's ``encoder_config``) or its encoder
    alone (``DiaEncoder``): the encoder's heads (``head_dim`` 12, not ``hidden_size`` / heads), its rotary base, logits
    unscaled, attending both ways, no unembedding; a whole model's audio decoder said to be left out. Run as the class
    the folder names, its encoder hooked: every layer recomputed from the weights equals what it adds. (transformers
    4.57 and 5.5 map no ``dia_encoder`` type: there the encoder's folder is read, and running it refused, saying
    why.)"""
    from compscope.data.runner import layer_state, runner_for
    from hf_tiny import _DIA_DECODER, _DIA_ENCODER, perturbed
    from transformers.models.dia.modeling_dia import DiaEncoder

    config = transformers.DiaConfig(encoder_config=_DIA_ENCODER, decoder_config=_DIA_DECODER, delay_pattern=[0, 1])
    build = (lambda: DiaEncoder(config.encoder_config)) if alone else \
        (lambda: transformers.DiaForConditionalGeneration(config))
    model = perturbed(build, seed=4, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = model if alone else model.model.encoder
    assert hw.meta.family == "dia_encoder" and not hw.causal and hw.W_U is None and hw.attn_scale == 1.0
    assert hw.kv_map == (0, 0, 1, 1) and hw.W_Q.shape[2] == 12
    assert torch.equal(hw.W_Q[1, 2], enc.layers[1].self_attention.q_proj.weight.detach()[24:36])
    assert torch.equal(hw.W_E, enc.embedding.weight.detach().T)
    torch.testing.assert_close(hw.rotary.inv_freq[0], 700.0 ** (-torch.arange(0, 12, 2, dtype=torch.float64) / 12))
    assert any("decoder" in n and "not read" in n for n in hw.meta.notes) == (not alone)
    if alone and "dia_encoder" not in transformers.CONFIG_MAPPING:  # (4.57's, 5.5's)
        with pytest.raises(compscope.OptionError, match="dia_encoder"):
            runner_for(tmp_path, progress=False, device="cpu")
        return
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == ("DiaEncoder" if alone else "DiaForConditionalGeneration")
    ids = torch.randint(0, _DIA_ENCODER["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(5))
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=2e-5, rtol=0)


def test_a_dia_config_without_its_encoders_settings_is_refused_by_the_key(tmp_path):
    """A whole Dia's config whose ``encoder_config`` is no mapping: refused naming the key, not read from elsewhere."""
    import json

    from hf_tiny import _DIA_DECODER, _DIA_ENCODER

    config = transformers.DiaConfig(encoder_config=_DIA_ENCODER, decoder_config=_DIA_DECODER, delay_pattern=[0, 1])
    transformers.DiaForConditionalGeneration(config).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, "encoder_config": None}))
    with pytest.raises(compscope.LoadError, match="encoder_config"):
        compscope.load(tmp_path)
