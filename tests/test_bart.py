"""The encoders of BART's kin (BART, PLBART, MVP, BlenderBot-small, Marian, Pegasus, M2M100/NLLB, NLLB-MoE, BlenderBot;
FSMT, whose encoder keeps its activations sequence-first), saved whole as their makers save them: read as the encoder
alone, run as the encoder of the model the folder names, every layer recomputed from the weights equal to what it
adds, and the residual the first layer reads equal to the embeddings as compscope holds them (positions from the row
each model numbers them from; sinusoids stored or computed). mBART and MVP with prompts refused with their reasons.
The family-wide suites (hooks, processing, runner, interventions by brute force) run the tiny variants of
``hf_tiny``."""

from __future__ import annotations

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")

from hf_tiny import _BART, perturbed, random_ids  # noqa: E402

ATOL = 2e-5

#: (model class, config class, settings beyond _BART, family, the first token's row of the position table)
_WHOLE = [
    ("BartForConditionalGeneration", "BartConfig", dict(scale_embedding=True), "bart_encoder", 2),
    ("PLBartForConditionalGeneration", "PLBartConfig", {}, "bart_encoder", 2),
    ("BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", {}, "blenderbot_small_encoder", 0),
    ("MarianMTModel", "MarianConfig", dict(scale_embedding=True), "marian_encoder", 0),
    ("PegasusForConditionalGeneration", "PegasusConfig", dict(scale_embedding=True), "pegasus_encoder", 0),
    ("M2M100ForConditionalGeneration", "M2M100Config", dict(pad_token_id=4, scale_embedding=True), "m2m100_encoder", 5),
    ("BlenderbotForConditionalGeneration", "BlenderbotConfig", {}, "blenderbot_encoder", 0),
    ("MvpForConditionalGeneration", "MvpConfig", {}, "bart_encoder", 2),
    ("NllbMoeForConditionalGeneration", "NllbMoeConfig", dict(num_experts=2, encoder_sparse_step=2, decoder_sparse_step=2,
                                                              expert_capacity=64), "nllb_moe_encoder", 2),
    ("FSMTForConditionalGeneration", "FSMTConfig", dict(langs=["en", "de"], src_vocab_size=_BART["vocab_size"],
                                                        scale_embedding=True), "fsmt_encoder", 1),
]


def _ids(pad: int, seq: int = 12) -> torch.Tensor:
    """Token ids that are no pad token (a pad takes no position in M2M100)."""
    ids = random_ids(seq=seq)
    return torch.where(ids == pad, pad + 1, ids)


@pytest.mark.parametrize("cls, config_cls, settings, family, first_row", _WHOLE, ids=[w[0] for w in _WHOLE])
def test_a_whole_model_folder_is_read_and_run_as_its_encoder(tmp_path, cls, config_cls, settings, family, first_row):
    from compscope.data.runner import layer_state, runner_for

    config = getattr(transformers, config_cls)(**{**_BART, **settings})
    model = perturbed(lambda: getattr(transformers, cls)(config), seed=3, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = model.get_encoder()
    assert hw.meta.family == family and not hw.causal and hw.W_U is None and hw.n_layers == 2
    assert any("the decoder" in n and "is not read" in n for n in hw.meta.notes)
    assert torch.equal(hw.W_K[1, 2], enc.layers[1].self_attn.k_proj.weight.detach()[16:24])
    assert torch.equal(hw.b_V[0, 3], enc.layers[0].self_attn.v_proj.bias.detach()[24:32])
    scale = 32 ** 0.5 if config.scale_embedding else 1.0  # (PLBart's default: scaled)
    torch.testing.assert_close(hw.W_E, enc.embed_tokens.weight.detach().T * scale, atol=0, rtol=1e-6)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    ids = _ids(config.pad_token_id)
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    # the residual layer 0 reads: the embeddings' sum (normalised where a LayerNorm on them makes it)
    summed = (hw.W_E[:, ids] + hw.W_pos[:, None, : ids.shape[1]]).permute(1, 2, 0)
    if hw.norm_placement == "post" and not hw.first_layer_unnormed:
        summed = hw.attn_norm.apply(summed, 0)
    torch.testing.assert_close(summed, trace.resid[0], atol=ATOL, rtol=0)
    if family not in ("m2m100_encoder", "nllb_moe_encoder"):  # the running model's table (Marian's and Pegasus's sinusoids, computed: transformers
        table = runner.model.get_encoder().embed_positions.weight.detach()  # 5 saves none; M2M100's is no parameter)
        torch.testing.assert_close(hw.W_pos, table[first_row:].T, atol=0, rtol=0)


def test_marian_without_its_stored_table_reads_the_sinusoids_transformers_computes(tmp_path):
    """A Marian folder whose files hold no position table (transformers 5 saves none; 4 saved it): compscope computes
    Marian's sinusoids (float64, then float32), which equal the table transformers computes as it builds the model and
    the closed form, and the run is not refused as built at random (a table of sinusoids)."""
    from safetensors.torch import load_file, save_file

    from compscope.data.runner import runner_for

    config = transformers.MarianConfig(**{**_BART, "max_position_embeddings": 40})
    model = transformers.MarianMTModel(config).eval()
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    gone = [k for k in tensors if k.endswith("embed_positions.weight")]
    save_file({k: v for k, v in tensors.items() if k not in gone}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hw = compscope.load(tmp_path)
    assert any("computed as the model computes them, 40 of them" in n for n in hw.meta.notes)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert torch.equal(runner.model.get_encoder().embed_positions.weight.detach().T, hw.W_pos)
    angle = torch.arange(40, dtype=torch.float64)[:, None] * 1e4 ** (-torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    torch.testing.assert_close(hw.W_pos.T.double(), torch.cat([angle.sin(), angle.cos()], 1), atol=1e-6, rtol=0)


def test_fsmt_without_its_stored_table_reads_the_sinusoids_it_computes_and_its_own_token_table(tmp_path):
    """An FSMT folder whose files hold no position table: compscope computes its tensor2tensor sinusoids from row
    ``pad_token_id + 1`` (the closed form, and the table transformers builds the model with); the run agrees. Without
    the encoder's token table and with tie_word_embeddings false, the decoder's is not taken for it: refused by name."""
    import math

    from safetensors.torch import load_file, save_file

    from compscope.data.runner import layer_state, runner_for

    config = transformers.FSMTConfig(**{**_BART, "langs": ["en", "de"], "src_vocab_size": _BART["vocab_size"],
                                        "pad_token_id": 3, "max_position_embeddings": 40})
    perturbed(lambda: transformers.FSMTForConditionalGeneration(config), seed=2, scale=0.2).save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    kept = {k: v.clone() for k, v in tensors.items() if not k.endswith("embed_positions.weight")}  # (off the file)
    save_file(kept, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hw = compscope.load(tmp_path)
    assert any("computed as the model computes them, position p at the table's row p + 4 (pad_token_id + 1), 40 of "
               "them" in n for n in hw.meta.notes)
    half = 16
    f = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000) / (half - 1)))
    angle = torch.arange(4, 44, dtype=torch.float64)[:, None] * f
    torch.testing.assert_close(hw.W_pos.T.double(), torch.cat([angle.sin(), angle.cos()], 1), atol=4e-6,
                               rtol=0)  # (angles in float32, as the model computes them)
    runner = runner_for(tmp_path, progress=False, device="cpu")
    table = runner.model.get_encoder().embed_positions.weight.detach()
    torch.testing.assert_close(hw.W_pos, table[4:44].T, atol=1e-6, rtol=0)
    ids = _ids(3)
    trace = runner.trace(ids)
    summed = (hw.W_E[:, ids] + hw.W_pos[:, None, : ids.shape[1]]).permute(1, 2, 0)
    torch.testing.assert_close(summed, trace.resid[0], atol=ATOL, rtol=0)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    untied = tmp_path / "untied"  # (a folder of its own: the files above stay mapped)
    untied.mkdir()
    (untied / "config.json").write_text((tmp_path / "config.json").read_text())
    save_file({k: v for k, v in kept.items() if k != "model.encoder.embed_tokens.weight"},
              untied / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(compscope.LoadError, match="no tensor 'encoder.embed_tokens.weight' .*tie_word_embeddings "
                                                  "false"):
        compscope.load(untied)


def test_mbart_and_mvp_with_prompts_are_refused_with_their_reasons(tmp_path):
    transformers.MBartForConditionalGeneration(transformers.MBartConfig(**_BART)).save_pretrained(tmp_path / "mbart")
    with pytest.raises(compscope.UnsupportedModelError, match="model_type='mbart'.*pre-LN layers then read"):
        compscope.load(tmp_path / "mbart")
    config = transformers.MvpConfig(**_BART, use_prompt=True, prompt_length=3, prompt_mid_dim=8)
    transformers.MvpForConditionalGeneration(config).save_pretrained(tmp_path / "mvp")
    with pytest.raises(compscope.UnsupportedModelError, match="use_prompt"):
        compscope.load(tmp_path / "mvp")


def test_led_reads_each_layers_window_and_runs_padded_sequences_without_its_global_projections(tmp_path):
    """LED saved whole, windows of 4 and 8 (2 and 4 tokens each side, held as 3 and 5): run from its folder on 10 tokens
    (padded by transformers to 16 and cut back), every layer recomputed from the weights equals what it adds; the
    projections of tokens marked global are not read and change nothing a run without such tokens computes; an odd
    window is refused by name."""
    from compscope.data.runner import layer_state, runner_for

    settings = {k: v for k, v in _BART.items() if k != "max_position_embeddings"}
    config = transformers.LEDConfig(**settings, max_encoder_position_embeddings=32, max_decoder_position_embeddings=32,
                                    attention_window=[4, 8])
    model = perturbed(lambda: transformers.LEDForConditionalGeneration(config), seed=5, scale=0.2)
    model.save_pretrained(tmp_path / "led")
    hw = compscope.load(tmp_path / "led")
    assert hw.meta.family == "led_encoder" and hw.sliding_window == (3, 5) and not hw.causal
    enc = model.get_encoder()
    assert torch.equal(hw.W_Q[1, 1], enc.layers[1].self_attn.longformer_self_attn.query.weight.detach()[8:16])
    assert torch.equal(hw.W_pos, enc.embed_positions.weight.detach().T)
    ids = random_ids(seq=10)
    runner = runner_for(tmp_path / "led", progress=False, device="cpu")
    trace = runner.trace(ids)
    assert trace.resid[0].shape == (*ids.shape, hw.d_model)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    before = enc(input_ids=ids).last_hidden_state
    with torch.no_grad():
        for b in enc.layers:
            for name in ("query_global", "key_global", "value_global"):
                getattr(b.self_attn.longformer_self_attn, name).weight.add_(1.0)
    assert torch.equal(enc(input_ids=ids).last_hidden_state, before)
    moved = compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_pos"):
        assert torch.equal(getattr(moved, name), getattr(hw, name)), name
    odd = dict(config.to_dict(), attention_window=[4, 5])
    (tmp_path / "led" / "config.json").write_text(__import__("json").dumps(odd))
    with pytest.raises(compscope.LoadError, match="'attention_window' = \\[4, 5\\]"):
        compscope.load(tmp_path / "led")


@pytest.mark.parametrize("cls, config_cls", [("M2M100ForConditionalGeneration", "M2M100Config"),
                                             ("PLBartForConditionalGeneration", "PLBartConfig"),
                                             ("BartForConditionalGeneration", "BartConfig")])
def test_a_config_silent_on_the_scale_and_positions_is_read_with_transformers_defaults(tmp_path, cls, config_cls):
    """A config.json without ``scale_embedding`` or ``max_position_embeddings``: transformers builds the model with its
    config class's defaults (M2M100 and PLBart scale the embeddings by sqrt(d_model), BART does not; 1024 positions),
    and compscope reads it so: the run from the folder agrees with the embeddings as read."""
    import json

    from compscope.data.runner import runner_for

    config = getattr(transformers, config_cls)(**{**_BART, "max_position_embeddings": 1024})
    perturbed(lambda: getattr(transformers, cls)(config), seed=6, scale=0.2).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in saved.items()
                                                      if k not in ("scale_embedding", "max_position_embeddings")}))
    hw = compscope.load(tmp_path)
    assert hw.W_pos.shape[1] >= 1000
    ids = _ids(config.pad_token_id)
    trace = runner_for(tmp_path, progress=False, device="cpu").trace(ids)
    summed = (hw.W_E[:, ids] + hw.W_pos[:, None, : ids.shape[1]]).permute(1, 2, 0)
    if hw.norm_placement == "post":
        summed = hw.attn_norm.apply(summed, 0)
    torch.testing.assert_close(summed, trace.resid[0], atol=ATOL, rtol=0)
    assert any("scale_embedding" in n for n in hw.meta.notes) == (config_cls != "BartConfig")


def test_a_prophetnet_folder_is_read_and_run_as_its_encoder(tmp_path):
    """ProphetNet saved whole: BART's post-LN layers under its own names read as its encoder, positions from row
    ``pad_token_id + 1`` (pad 3 here: the first token reads row 4); run from the folder, every layer recomputed from the
    weights equals what it adds and the residual the first layer reads is the embeddings' LayerNorm of word plus
    position; a longer sequence than the table holds refused by name."""
    from compscope.data.runner import layer_state, runner_for

    config = transformers.ProphetNetConfig(vocab_size=61, hidden_size=32, num_encoder_attention_heads=4,
                                           num_decoder_attention_heads=4, num_encoder_layers=2, num_decoder_layers=1,
                                           encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=24,
                                           pad_token_id=3, decoder_start_token_id=0, ngram=2)
    model = perturbed(lambda: transformers.ProphetNetForConditionalGeneration(config), seed=8, scale=0.2)
    model.save_pretrained(tmp_path)
    hw = compscope.load(tmp_path)
    enc = model.get_encoder()
    assert hw.meta.family == "prophetnet_encoder" and hw.norm_placement == "post" and hw.W_pos.shape[1] == 24 - 4
    assert torch.equal(hw.W_pos, enc.position_embeddings.weight.detach()[4:].T)
    assert torch.equal(hw.W_Q[0, 2], enc.layers[0].self_attn.query_proj.weight.detach()[16:24])
    runner = runner_for(tmp_path, progress=False, device="cpu")
    ids = _ids(3)
    trace = runner.trace(ids)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, trace.resid[layer]).out, trace.attn_out[layer],
                                   atol=ATOL, rtol=0)
    summed = hw.attn_norm.apply((hw.W_E[:, ids] + hw.W_pos[:, None, : ids.shape[1]]).permute(1, 2, 0), 0)
    torch.testing.assert_close(summed, trace.resid[0], atol=ATOL, rtol=0)
    with pytest.raises(compscope.OptionError, match="shorter sequences"):
        runner.trace(_ids(3, seq=21))


def test_a_config_with_the_original_release_keys_is_read_and_run(tmp_path):
    """BART's configs as released (bart-large-cnn's) carry keys of the fairseq era that transformers no longer reads
    (``add_bias_logits``, ``normalize_before``, ``extra_pos_embeddings``, ``_num_labels``, ...) and generation
    defaults: read and run as transformers builds the model."""
    import json

    from compscope.data.runner import layer_state, runner_for

    transformers.BartForConditionalGeneration(transformers.BartConfig(**_BART)).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    released = {"_num_labels": 3, "add_bias_logits": False, "add_final_layer_norm": False, "classif_dropout": 0.0,
                "extra_pos_embeddings": 2, "force_bos_token_to_be_generated": True, "gradient_checkpointing": False,
                "normalize_before": False, "normalize_embedding": True, "static_position_embeddings": False,
                "num_hidden_layers": 2, "output_past": True, "prefix": " ", "no_repeat_ngram_size": 3, "num_beams": 4,
                "task_specific_params": {"summarization": {"max_length": 142}}}
    (tmp_path / "config.json").write_text(json.dumps({**saved, **released}))
    hw = compscope.load(tmp_path)
    trace = runner_for(tmp_path, progress=False, device="cpu").trace(random_ids())
    torch.testing.assert_close(layer_state(hw, 1, trace.resid[1]).out, trace.attn_out[1], atol=ATOL, rtol=0)
