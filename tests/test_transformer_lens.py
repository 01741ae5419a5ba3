"""TransformerLens ``HookedTransformer`` objects (transformer-lens 3.9): small random models
built from a ``HookedTransformerConfig`` (no downloads) load into ``HeadWeights`` whose
weights are TransformerLens's, transposed (TL uses row vectors), and whose
``attention_forward`` reproduces ``blocks.{l}.hook_attn_out`` from ``blocks.{l}.hook_resid_pre``;
``HookedEncoder`` objects (BERT, post-LN) made by TransformerLens's own conversion of a tiny random
HuggingFace BERT, against that model.

Tolerance: float32, ``atol = rtol = 1e-5`` on outputs of size O(1).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

tl = pytest.importorskip("transformer_lens")

import compscope  # noqa: E402
from compscope.core.attention import attention_forward  # noqa: E402

ATOL = RTOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated:DeprecationWarning")

BASE = dict(n_layers=2, d_model=32, n_ctx=24, d_head=8, n_heads=4, d_vocab=37, act_fn="gelu", seed=0)

CONFIGS = {
    # learned positions, LayerNorm, full multi-head attention
    "standard-ln": dict(normalization_type="LN", positional_embedding_type="standard"),
    # rotary (rotate-half) with grouped-query attention and RMSNorm, partial rotary
    "rotary-gqa": dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=6,
                       n_key_value_heads=2, rotary_base=500),
    # GPT-J style adjacent pairs, multi-query attention, no attention scaling
    "rotary-adjacent-mqa": dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8,
                                rotary_adjacent_pairs=True, n_key_value_heads=1, use_attn_scale=False),
    # Gemma-like: QK-norm, post-attention norm, alternating local/global layers with their own bases
    "gemma-like": dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8,
                       n_key_value_heads=2, use_qk_norm=True, use_normalization_before_and_after=True,
                       use_local_attn=True, attn_types=["local", "global"], window_size=3,
                       rotary_base=10000, rotary_base_local=100, rotary_scaling_factor=4.0, attn_scale=3.0),
    # Gemma 2-like: soft-capped attention scores (a cap small enough to bend these logits)
    "gemma2-like": dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8,
                        n_key_value_heads=2, use_normalization_before_and_after=True, use_local_attn=True,
                        attn_types=["local", "global"], window_size=3, attn_scores_soft_cap=0.8),
    # Llama 3.1-like: NTK-by-parts frequencies (HF's "llama3" rope type) over a short original context, so
    # that kept, divided and interpolated frequencies all occur among the 4 pairs (base 500, dim 8)
    "llama31-ntk": dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8, rotary_base=500,
                        n_key_value_heads=2, use_NTK_by_parts_rope=True, NTK_by_parts_factor=8.0,
                        NTK_by_parts_low_freq_factor=1.0, NTK_by_parts_high_freq_factor=4.0, NTK_original_ctx_len=40),
    # BLOOM-like: ALiBi slopes on the logits, a LayerNorm on the embeddings, six heads (TL's slopes 2^(-8h/6))
    "alibi-embedding-ln": dict(normalization_type="LN", positional_embedding_type="alibi", post_embedding_ln=True,
                               n_heads=6, d_head=6, d_model=36),
    # bidirectional, no norms
    "bidirectional-no-norm": dict(normalization_type=None, positional_embedding_type="standard",
                                  attention_dir="bidirectional"),
}


def build(name: str, seed: int = 0, **extra):
    cfg = tl.HookedTransformerConfig(**{**BASE, **CONFIGS[name], **extra})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "HookedTransformer is deprecated" (TL 3.9)
        model = tl.HookedTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # TL initialises biases to 0 and gains to 1: randomise everything
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (1.0 if p.ndim == 1 and p.shape[0] in (8, 32) else 0.0))
    return model.eval()


def tokens(model, seq: int = 11, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, model.cfg.d_vocab, (2, seq), generator=torch.Generator().manual_seed(seed))


def check_forward(model, hw) -> None:
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens(model))
    for layer in range(model.cfg.n_layers):
        resid = cache[f"blocks.{layer}.hook_resid_pre"]
        ref = cache[f"blocks.{layer}.hook_attn_out"]
        out = attention_forward(hw, layer, resid)
        torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL, msg=lambda m: f"layer {layer}: {m}")


@pytest.mark.parametrize("name", CONFIGS)
def test_weights_match_transposed(name):
    model = build(name)
    hw = compscope.load(model)
    T = lambda t: t.detach().transpose(-1, -2)  # noqa: E731
    assert torch.equal(hw.W_Q, T(model.W_Q))
    assert torch.equal(hw.W_O, T(model.W_O))
    # TL's W_K/W_V properties expand shared K/V heads to one per query head (repeat_interleave)
    assert torch.equal(hw.kv_expanded("W_K"), T(model.W_K))
    assert torch.equal(hw.kv_expanded("W_V"), T(model.W_V))
    assert torch.equal(hw.kv_expanded("b_K"), model.b_K.detach())
    assert torch.equal(hw.b_Q, model.b_Q.detach()) and torch.equal(hw.b_O, model.b_O.detach())
    assert torch.equal(hw.W_U, model.W_U.detach().T)
    if model.cfg.post_embedding_ln:  # what the residual starts as: embed.ln of each embedding, by hand
        e = model.W_E.detach()
        e = (e - e.mean(-1, keepdim=True)) / (e.var(-1, unbiased=False, keepdim=True) + model.cfg.eps).sqrt()
        torch.testing.assert_close(hw.W_E, (e * model.embed.ln.w.detach() + model.embed.ln.b.detach()).T)
    else:
        assert torch.equal(hw.W_E, model.W_E.detach().T)
    n_kv = model.cfg.n_key_value_heads or model.cfg.n_heads
    c = model.cfg
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model, hw.d_head) == (2, c.n_heads, n_kv, c.d_model, c.d_head)
    if model.cfg.positional_embedding_type == "standard":
        assert torch.equal(hw.W_pos, model.W_pos.detach().T)
    elif model.cfg.positional_embedding_type == "alibi":
        assert hw.W_pos is None and hw.rotary is None and hw.positions == "alibi"
        torch.testing.assert_close(hw.alibi.double(), 2.0 ** (-8.0 * torch.arange(1, 7, dtype=torch.float64) / 6))
    else:
        assert hw.W_pos is None and hw.rotary.dim == model.cfg.rotary_dim
    assert hw.causal == (model.cfg.attention_dir == "causal")


@pytest.mark.parametrize("name", CONFIGS)
def test_attention_forward_matches_hooks(name):
    model = build(name)
    check_forward(model, compscope.load(model))


def test_soft_capped_scores_are_read_and_matter():
    """The cap is carried into the weights, and without it the attention would differ."""
    from dataclasses import replace

    model = build("gemma2-like")
    hw = compscope.load(model)
    assert hw.attn_softcap == 0.8
    with pytest.raises(AssertionError):
        check_forward(model, replace(hw, attn_softcap=None))


def test_gemma_like_features_are_used():
    """The gemma-like config really has a window that cuts, local/global bases and norms."""
    model = build("gemma-like")
    hw = compscope.load(model)
    assert hw.sliding_window == (3, None)
    assert hw.qk_norm is not None and hw.attn_out_norm is not None
    assert hw.scale == pytest.approx(1 / 3)
    assert not torch.equal(hw.rotary.inv_freq[0], hw.rotary.inv_freq[1])
    # ignoring the window changes the output: the test above is sensitive to it
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens(model))
    no_window = hw.replace(sliding_window=(None, None))
    out = attention_forward(no_window, 0, cache["blocks.0.hook_resid_pre"])
    assert not torch.allclose(out, cache["blocks.0.hook_attn_out"], atol=1e-3)


def test_fold_ln_model_loads_and_matches():
    """TL's own fold_ln/centring leaves LayerNormPre; compscope records it and still matches."""
    model = build("standard-ln")
    model.process_weights_(fold_ln=True, center_writing_weights=True, center_unembed=False)
    hw = compscope.load(model)
    assert "transformer_lens:fold_ln" in hw.meta.processing
    assert hw.attn_norm.weight is None and hw.attn_norm.bias is None
    check_forward(model, hw)
    again = compscope.load(model, fold_norm=True)  # nothing left to fold: the same weights, and it says so
    assert again.meta.processing == ("transformer_lens:fold_ln", "fold_norm")
    assert "fold_norm changed nothing: the norms carry no gains or biases (folded before loading, or norms without " \
        "parameters)" in again.meta.notes
    for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_U"):
        torch.testing.assert_close(getattr(again, name), getattr(hw, name), rtol=0, atol=0, msg=name)
    assert not any(n.startswith("fold_norm changed") for n in compscope.load(build("standard-ln"), fold_norm=True).meta.notes)


def test_compscope_fold_norm_agrees_with_transformer_lens_fold_ln():
    """compscope's fold_norm + fold_value_bias give TL's process_weights_(fold_ln) weights (up to
    float rounding; TL's process_weights_ always folds value biases too). TL also centres the
    reading weights over d_model (a LayerNorm output has mean zero, so that changes nothing);
    compscope does not, so its weights are compared after centring."""
    model = build("standard-ln")
    ours = compscope.load(model, fold_norm=True, fold_value_bias=True)
    model.process_weights_(fold_ln=True, center_writing_weights=False, center_unembed=False)
    theirs = compscope.load(model)
    for name in ("W_Q", "W_K", "W_V"):
        w = getattr(ours, name)
        torch.testing.assert_close(w - w.mean(-1, keepdim=True), getattr(theirs, name), atol=1e-5, rtol=1e-5)
    assert ours.b_V is None and not theirs.b_V.any()
    for name in ("b_Q", "b_K", "b_O"):
        torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "extra, key",
    [
        (dict(positional_embedding_type="shortformer"), "positional_embedding_type"),
        (dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
    ],
)
def test_unsupported_settings_are_refused_by_name(extra, key):
    cfg = tl.HookedTransformerConfig(**{**BASE, **CONFIGS["standard-ln"], **extra})
    with pytest.raises(compscope.UnsupportedModelError, match=key):
        compscope.load(tl.HookedTransformer(cfg))


@pytest.mark.parametrize("arch", ["Olmo2ForCausalLM", "Olmo3ForCausalLM", "OlmoeForCausalLM"])
def test_an_architecture_read_elsewhere_is_refused_with_where_to_read_it(arch):
    """OLMo's layer-wide QK-norm and post-norms, as transformer-lens lays them out in a
    HookedTransformer, are not read; the refusal names the architecture and the way that works."""
    cfg = tl.HookedTransformerConfig(**{**BASE, **CONFIGS["standard-ln"], "original_architecture": arch})
    with pytest.raises(compscope.UnsupportedModelError, match=f"original_architecture='{arch}'.*HuggingFace model itself"):
        compscope.load(tl.HookedTransformer(cfg))


def test_transformer_bridge_of_3_9_reads_as_the_model_it_wraps():
    """A real ``TransformerBridge`` of transformer-lens 3.9 around a tiny random GPT-2, built
    offline (a word-level tokenizer without a BOS token, so TransformerLens fetches none). The
    bridge rewrites the HF model in place (GPT-2's parameter names change); compscope reads it
    through the names its components record, and gets what the untouched model gives.
    (transformer-lens 4: ``test_transformer_bridge.py``.)"""
    import copy

    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    bridge_mod = pytest.importorskip("transformer_lens.model_bridge")
    vocab = {f"t{i}": i for i in range(60)} | {"[UNK]": 60}
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", eos_token="t0")
    cfg = transformers.GPT2Config(vocab_size=61, n_embd=32, n_head=4, n_layer=2, n_positions=64, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    pristine = copy.deepcopy(hf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = bridge_mod.TransformerBridge.boot_transformers("gpt2", hf_model=hf, tokenizer=tok)
    assert not any(k.endswith("attn.c_attn.weight") for k in hf.state_dict())  # the wrapped model changed
    got, want = compscope.load(bridge), compscope.load(pristine)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=0, atol=0, msg=name)
    torch.testing.assert_close(got.attn_norm.weight, want.attn_norm.weight, rtol=0, atol=0)
    assert got.meta.source == "TransformerBridge(GPT2LMHeadModel)" and got.meta.processing == ()


@pytest.mark.parametrize("name", CONFIGS)
def test_runner_traces_what_the_model_computes(name):
    """The data-based side runs a ``HookedTransformer`` through its own hooks: what it traces per
    layer, recomputed per head from ``HeadWeights``, is the model's attention output and pattern."""
    from compscope.data.runner import TransformerLensRunner, layer_state, runner_for

    model = build(name)
    runner = runner_for(model)
    assert isinstance(runner, TransformerLensRunner)
    from importlib import metadata

    import compscope

    assert runner.software() == {"compscope": compscope.__version__,
                                 "transformer_lens": metadata.version("transformer-lens")}  # recorded with results
    ids = tokens(model)
    tr = runner.trace(ids)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids)
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(tr.resid[layer], cache[f"blocks.{layer}.hook_resid_pre"], atol=0, rtol=0)
        st = layer_state(runner.hw, layer, tr.resid[layer])
        torch.testing.assert_close(st.out, cache[f"blocks.{layer}.hook_attn_out"], atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(st.pattern, cache[f"blocks.{layer}.attn.hook_pattern"], atol=ATOL, rtol=RTOL)


def test_interventions_on_a_hooked_transformer_match_a_patched_forward():
    """Interventional composition of one pair, brute force: the writer's output mean-ablated in the
    residual the reader's keys read (TransformerLens's ``hook_k_input``), everything else clean;
    the reader's pattern change equals what compscope computes from the traced residuals."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for

    model = build("rotary-gqa")
    model.set_use_split_qkv_input(True)
    model.set_use_attn_result(True)
    ids = tokens(model, seq=9)
    fx = intervention_effects(runner_for(model), ids, "K", "mean", progress=False)
    with torch.no_grad():
        _, clean = model.run_with_cache(ids)
        for h1 in range(model.cfg.n_heads):
            o = clean["blocks.0.attn.hook_result"][:, :, h1]  # (batch, pos, d_model)
            delta = o.mean(0, keepdim=True) - o
            edit = lambda x, hook: x + delta[:, :, None, :]  # noqa: E731
            with model.hooks(fwd_hooks=[("blocks.1.hook_k_input", edit)]):
                _, p_cache = model.run_with_cache(ids, names_filter=lambda n: n == "blocks.1.attn.hook_pattern")
            p, q = clean["blocks.1.attn.hook_pattern"].double(), p_cache["blocks.1.attn.hook_pattern"].double()
            want = 0.5 * (p - q).abs().sum(-1).mean(dim=(0, 2))  # (head,)
            assert float(want.max()) > 1e-3  # the edit did something
            torch.testing.assert_close(fx.by_kind["K"][0, h1, 1], want, atol=1e-5, rtol=0)


def test_every_path_on_a_hooked_transformer_matches_its_own_ablation():
    """paths='all', three layers with MLPs: the writer's head mean-ablated in TransformerLens's own
    ``hook_z`` and the model run on; the reader's keys given that run's residual
    (``hook_k_input``), everything else clean: the pattern change equals compscope's."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for

    model = build("rotary-gqa", n_layers=3)
    model.set_use_split_qkv_input(True)
    ids = tokens(model, seq=9)
    fx = intervention_effects(runner_for(model), ids, "K", "mean", progress=False, paths="all")
    with torch.no_grad():
        _, clean = model.run_with_cache(ids)
        for l1, h1, l2 in ((0, 1, 2), (0, 3, 1), (1, 0, 2)):
            z = clean[f"blocks.{l1}.attn.hook_z"]

            def ablate(x, hook, h1=h1, mean=z.mean(0, keepdim=True)):
                x = x.clone()
                x[:, :, h1] = mean[:, :, h1]
                return x

            with model.hooks(fwd_hooks=[(f"blocks.{l1}.attn.hook_z", ablate)]):
                _, ablated = model.run_with_cache(ids, names_filter=lambda n: n == f"blocks.{l2}.hook_resid_pre")
            moved = ablated[f"blocks.{l2}.hook_resid_pre"]
            edit = lambda x, hook, moved=moved: moved[:, :, None, :].expand_as(x)  # noqa: E731
            with model.hooks(fwd_hooks=[(f"blocks.{l2}.hook_k_input", edit)]):
                _, patched = model.run_with_cache(ids, names_filter=lambda n: n == f"blocks.{l2}.attn.hook_pattern")
            p, q = clean[f"blocks.{l2}.attn.hook_pattern"].double(), patched[f"blocks.{l2}.attn.hook_pattern"].double()
            want = 0.5 * (p - q).abs().sum(-1).mean(dim=(0, 2))
            assert float(want.max()) > 1e-3  # the ablation did something
            torch.testing.assert_close(fx.by_kind["K"][l1, h1, l2], want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("which", ["hooked_transformer", "hooked_encoder"])
def test_a_changed_run_given_its_clean_trace_leaves_the_blocks_before_the_change_out(which):
    """A block returns the residual it passes on, so a changed run of a HookedTransformer or a
    HookedEncoder given its clean trace runs from the changed block on (block 0's hooks never fire)
    and traces what the run from block 0 traces, post-LN sums included."""
    from compscope.data.runner import runner_for

    model = build("rotary-gqa", n_layers=3) if which == "hooked_transformer" else _encoder_and_bert()[0]
    runner = runner_for(model)
    ids = tokens(model, seq=9) if which == "hooked_transformer" else torch.randint(0, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    clean = runner.trace(ids)
    delta = 0.5 * torch.randn(2 * ids.shape[0], ids.shape[1], runner.hw.d_model, generator=torch.Generator().manual_seed(2))
    fired = []
    model.blocks[0].hook_resid_pre.add_hook(lambda x, hook: fired.append(1))
    try:
        full = runner.trace(ids.repeat(2, 1), add={2: delta})
        assert fired == [1]
        part = runner.trace(ids.repeat(2, 1), add={2: delta}, clean=clean)
        assert fired == [1]
    finally:
        model.reset_hooks()
    for a, b in zip(full.resid + full.attn_out, part.resid + part.attn_out):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=RTOL)
    assert (full.norm_in is None) == (which == "hooked_transformer") and (part.norm_in is None) == (full.norm_in is None)
    for a, b in zip(full.norm_in or (), part.norm_in or ()):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=RTOL)
    assert float((full.attn_out[2] - clean.attn_out[2].repeat(2, 1, 1)).abs().max()) > 1e-3  # δ is in it


def test_runner_starts_sequences_with_the_bos_where_the_model_prepends_one():
    """The repeated sequences start with the tokenizer's BOS token where the HookedTransformer prepends
    one (``default_prepend_bos``) and is causal; with none where it has no tokenizer, prepends nothing or
    attends both ways. (The tokenizer is set on the object: TransformerLens' own setter may fetch one.)"""
    from compscope.data.runner import runner_for
    from compscope.data.validate import verdict_sequences

    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({f"t{i}": i for i in range(37)}, unk_token="t0"))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="t0", bos_token="t5")
    causal, both = build("standard-ln"), build("bidirectional-no-norm")
    assert runner_for(causal).bos is None
    causal.tokenizer = both.tokenizer = tok
    runner = runner_for(causal)
    assert runner.bos == 5
    seqs = verdict_sequences(runner, 3, 4, 0).tokens
    assert seqs.shape == (3, 9) and (seqs[:, 0] == 5).all() and (seqs[:, 1:] != 5).all()
    assert runner_for(both).bos is None
    causal.cfg.default_prepend_bos = False
    assert runner_for(causal).bos is None


def test_validate_runs_on_a_hooked_transformer_within_its_context():
    """``compscope.validate`` takes a ``HookedTransformer`` object; its context (``n_ctx`` 24) bounds
    the sequences: the activations metric's text is cut to it, longer repeats are refused by name."""
    model = build("rotary-gqa")
    v = compscope.validate(model, sequences=4, half=4, intervention_sequences=2, metrics=["identity", "activations"],
                           progress=False)
    frame = v.verdict_frame()
    assert set(frame.metric) == {"identity", "activations"}
    assert frame.spearman.notna().all()
    with pytest.raises(compscope.OptionError, match="longer than .* takes \\(24\\)"):
        compscope.validate(model, sequences=2, half=13, metrics=["identity"], progress=False)


def test_runner_takes_a_hooked_transformer_processed_by_transformer_lens():
    """TransformerLens's own processing (``fold_ln``, centring) is part of the model that runs, so the
    runner accepts it and traces what the processed model computes; compscope's processing is refused."""
    from compscope.data.runner import layer_state, runner_for

    model = build("standard-ln")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.process_weights_(fold_ln=True, center_writing_weights=True, center_unembed=True)
    hw = compscope.load(model)
    assert hw.meta.processing == ("transformer_lens:fold_ln",) and hw.meta.processed_here == ()
    runner = runner_for(model, hw)
    ids = tokens(model)
    tr = runner.trace(ids)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids)
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, cache[f"blocks.{layer}.hook_attn_out"],
                                   atol=ATOL, rtol=RTOL)
    with pytest.raises(compscope.OptionError, match="fold_value_bias"):
        runner_for(model, compscope.fold_value_bias(hw))


def _encoder_and_bert(layers: int = 3):
    """A tiny random HuggingFace BERT and the ``HookedEncoder`` TransformerLens makes of it (its own
    weight conversion); gains, biases and weights all randomised."""
    import transformers
    from transformer_lens.pretrained.weight_conversions.bert import convert_bert_weights

    hc = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=layers, num_attention_heads=4,
                                 intermediate_size=32, max_position_embeddings=24, layer_norm_eps=1e-12)
    torch.manual_seed(0)
    bert = transformers.BertForPreTraining(hc).eval()
    with torch.no_grad():
        for p in bert.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    cfg = tl.HookedTransformerConfig(n_layers=layers, d_model=16, n_ctx=24, d_head=4, n_heads=4, d_vocab=40, d_mlp=32,
                                     act_fn="gelu", attention_dir="bidirectional", eps=1e-12, normalization_type="LN")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "HookedEncoder is deprecated" (TL 3.9)
        enc = tl.HookedEncoder(cfg)
    enc.load_state_dict(convert_bert_weights(bert, cfg), strict=False)
    return enc.eval(), bert.bert


def test_hooked_encoder_reads_as_the_bert_it_was_made_from():
    """A ``HookedEncoder`` is post-LN: each layer reads the residual straight, normalised by the
    embeddings' LayerNorm (layer 0) or the previous block's ``ln2``. It loads exactly as compscope's
    BERT family reads the HuggingFace model it came from (an independent reader), not as a pre-LN
    model whose ``ln1`` (BERT's post-attention norm) would be taken for the input norm."""
    enc, bert = _encoder_and_bert()
    got, want = compscope.load(enc), compscope.load(bert)
    assert want.meta.family == "bert" and got.meta.source == "HookedEncoder(custom)"
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=0, atol=0, msg=name)
    torch.testing.assert_close(got.embed_extra["W_type"], want.embed_extra["W_type"], rtol=0, atol=0)
    for field in ("weight", "bias"):
        torch.testing.assert_close(getattr(got.attn_norm, field), getattr(want.attn_norm, field), rtol=0, atol=0)
    assert got.attn_norm.eps == want.attn_norm.eps == 1e-12
    assert (got.norm_placement, got.causal, got.W_U, got.positions) == ("post", False, None, "learned")
    with pytest.raises(compscope.ProcessingError):  # folding gains into a post-LN model would change it
        compscope.fold_norm(got)


def test_hooked_encoder_runs_and_intervenes_as_the_huggingface_model():
    """Through its own hooks the encoder traces the residuals and attention outputs the HuggingFace
    model traces (and ``HeadWeights`` recompute), and its interventions, along the direct path through
    the norms between the layers, equal the HuggingFace runner's to 1e-6 and a patched forward of
    its own (writer in layer 0, reader's keys in layer 1) to 1e-5."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import TransformerLensRunner, layer_state, runner_for

    enc, bert = _encoder_and_bert()
    ids = torch.randint(0, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    ours, theirs = runner_for(enc), runner_for(bert)
    assert isinstance(ours, TransformerLensRunner) and ours.post_norms is not None
    a, b = ours.trace(ids), theirs.trace(ids)
    for layer in range(3):
        torch.testing.assert_close(a.resid[layer], b.resid[layer], atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(layer_state(ours.hw, layer, a.resid[layer]).out, a.attn_out[layer], atol=ATOL, rtol=RTOL)
    fa = intervention_effects(ours, ids, progress=False)
    fb = intervention_effects(theirs, ids, progress=False)
    for kind in "QKV":
        torch.testing.assert_close(fa.by_kind[kind], fb.by_kind[kind], atol=1e-6, rtol=0, equal_nan=True)
    every = [intervention_effects(r, ids, "K", progress=False, paths="all").by_kind["K"] for r in (ours, theirs)]
    torch.testing.assert_close(every[0], every[1], atol=1e-6, rtol=0, equal_nan=True)  # every path: the same too

    enc.cfg.use_split_qkv_input = True  # the reader's keys read their own copy of the residual
    with torch.no_grad():
        _, clean = enc.run_with_cache(ids)
        ln1, ln2 = enc.blocks[0].ln1, enc.blocks[0].ln2
        for h1 in range(4):
            o = clean["blocks.0.attn.hook_z"][:, :, h1] @ enc.W_O[0, h1]  # the writer's output (batch, pos, d)
            moved = ln2(ln1(clean["blocks.0.hook_resid_mid"] + o.mean(0, keepdim=True) - o) + clean["blocks.0.hook_mlp_out"])
            edit = lambda x, hook: moved[:, :, None, :].expand_as(x)  # noqa: E731
            with enc.hooks(fwd_hooks=[("blocks.1.hook_k_input", edit)]):
                _, patched = enc.run_with_cache(ids, names_filter=lambda n: n == "blocks.1.attn.hook_pattern")
            p, q = clean["blocks.1.attn.hook_pattern"].double(), patched["blocks.1.attn.hook_pattern"].double()
            want = 0.5 * (p - q).abs().sum(-1).mean(dim=(0, 2))
            assert float(want.max()) > 1e-3  # the edit did something
            torch.testing.assert_close(fa.by_kind["K"][0, h1, 1], want, atol=1e-5, rtol=0)


def test_validate_runs_on_a_hooked_encoder():
    """``compscope.validate`` takes a ``HookedEncoder``: bidirectional, so previous-token labels and
    interventions of every kind, no induction circuit from the weights."""
    enc, _ = _encoder_and_bert(layers=2)
    v = compscope.validate(enc, sequences=6, half=5, intervention_sequences=3, metrics=["identity"], progress=False)
    frame = v.verdict_frame()
    assert set(frame.kind) == {"Q", "K", "V"} and frame.spearman.notna().all()


def test_other_post_ln_transformer_lens_models_are_refused_by_name():
    """``HookedAudioEncoder`` has the encoder's post-LN blocks but no tokens: refused by name, not
    read as a pre-LN model (its blocks' ``ln1`` is the norm after the attention)."""
    cls = getattr(tl, "HookedAudioEncoder", None)
    if cls is None:
        pytest.skip("this TransformerLens has no HookedAudioEncoder")
    cfg = tl.HookedTransformerConfig(n_layers=2, d_model=16, n_ctx=24, d_head=4, n_heads=4, d_vocab=40, d_mlp=32,
                                     act_fn="gelu", attention_dir="bidirectional")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(cfg)
    with pytest.raises(compscope.UnsupportedModelError, match="HookedAudioEncoder: .*post-LN"):
        compscope.load(model)
