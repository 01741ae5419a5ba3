"""Weight processing (``fold_norm``, ``center_writing``, ``fold_value_bias``) preserves the
model, checked against HuggingFace's own forward pass (``hf_tiny``), never against the
unprocessed ``HeadWeights`` alone.

- folded / value-bias-folded: ``attention_forward`` still reproduces HF's attention output;
- centred: on the centred residual it reproduces HF's output minus its mean over d_model,
  and HF's own LayerNorm cannot tell the centred embeddings from the original ones;
- the final norm folded into ``W_U``: ``W_U n(x) + b_U`` still gives HF's logits.
Where HF's module has no such parameter (a bias on the attention norm of multi-head latent
attention), the reference is the unfolded weights, whose attention is first checked against HF's.
Every step is recorded in ``meta.processing`` in order, refuses to run twice, and refuses
models it would change, saying why.
"""

from __future__ import annotations

import pytest
import torch

import compscope
from compscope import ProcessingError, center_writing, fold_norm, fold_value_bias
from compscope.core.attention import attention_forward

from hf_tiny import (BASE_MODELS, BY_ID, CENTRABLE, FIRST_LAYER_UNNORMED, PRE_LN_LAYERNORM, RMSNORM, SEQ, VARIANTS, _modules,
                     model_and_capture)

ATOL = 1e-5
PRE_NORM = PRE_LN_LAYERNORM + RMSNORM
ALL = [v.id for v in VARIANTS]

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::FutureWarning")]


def _centre(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(-1, keepdim=True)


def assert_attention(hw, cap, *, centred: bool = False, what: str = ""):
    for layer, (resid, want) in enumerate(zip(cap.resid, cap.attn_out)):
        if centred:
            resid, want = _centre(resid), _centre(want)
        got = attention_forward(hw, layer, resid)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=lambda m: f"{what} layer {layer}: {m}")


def hf_logits_from(hw, cap, model=None):
    """The logits from the final norm's input, as ``hw`` reads them; soft-capped as ``model`` caps
    them (nanochat's ``final_logit_softcapping``) where it is given."""
    x = cap.final_in if hw.final_norm is None else hw.final_norm.apply(cap.final_in, 0)
    logits = x @ hw.W_U.T
    logits = logits if hw.b_U is None else logits + hw.b_U
    cfg = getattr(model, "config", None)
    softcap = getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logits_soft_cap", None)  # (RecurrentGemma's)
    return softcap * torch.tanh(logits / softcap) if softcap else logits


# ---------------------------------------------------------------------------- fold_norm


@pytest.mark.parametrize("vid", PRE_NORM)
def test_fold_norm_keeps_attention(vid):
    model, cap = model_and_capture(vid)
    hw = fold_norm(compscope.load(model))
    assert hw.meta.processing == ("fold_norm",)
    assert hw.attn_norm.weight is None and hw.attn_norm.bias is None
    assert_attention(hw, cap, what=f"{vid} folded")


@pytest.mark.parametrize("vid", ["deepseek-v3-latent-attention", "deepseek-v3-no-query-latent-yarn-bias"])
@pytest.mark.parametrize("first_unnormed", [False, True])
def test_fold_norm_moves_a_norm_bias_into_the_latents_too(vid, first_unnormed):
    """Multi-head latent attention reads the normed residual through its latents: an attention
    norm given a gain and a bias here (DeepSeek's has no bias), folded, leaves every layer's
    attention output as it was on random residuals (float32, 1e-5), the first layer's too where
    it reads the residual unnormed."""
    import dataclasses

    model, cap = model_and_capture(vid)
    hw = compscope.load(model)
    assert_attention(hw, cap, what=f"{vid} as loaded")  # the reference below: the unfolded weights' attention
    n, g = hw.attn_norm, torch.Generator().manual_seed(0)
    n = dataclasses.replace(n, weight=n.weight + 0.3 * torch.randn(n.weight.shape, generator=g),
                            bias=0.5 * torch.randn(n.weight.shape, generator=g))
    hw = hw.replace(attn_norm=n, first_layer_unnormed=first_unnormed)
    folded = fold_norm(hw)
    assert any(getattr(folded, k) is not None and getattr(folded, k).b is not None for k in ("q_latent", "kv_latent"))
    x = torch.randn(2, SEQ, hw.d_model, generator=g)
    for layer in range(hw.n_layers):
        torch.testing.assert_close(attention_forward(folded, layer, x), attention_forward(hw, layer, x),
                                   atol=ATOL, rtol=0, msg=lambda m: f"layer {layer}: {m}")


@pytest.mark.parametrize("vid, bare", [("olmo-parameter-free-layernorm", True), ("gpt2", False),
                                       ("llama-gqa-bias", False)])
def test_fold_norm_says_so_where_it_changes_nothing(vid, bare):
    """Norms without gains or biases (OLMo's LayerNorm): folding changes nothing, and a note says so;
    with gains, no such note."""
    from compscope.core.processing import FOLDED_ALREADY

    assert (FOLDED_ALREADY in fold_norm(compscope.load(model_and_capture(vid)[0])).meta.notes) is bare


@pytest.mark.parametrize("vid", [v for v in PRE_NORM if BY_ID[v].kind not in (*BASE_MODELS, "modernbert_decoder")])
# (an encoder has no unembedding, nor a base model built without its head; ModernBERT's decoder no linear one)
def test_fold_norm_keeps_logits(vid):
    model, cap = model_and_capture(vid)
    hw0 = compscope.load(model)
    hw = fold_norm(hw0)
    assert hw.final_norm.weight is None and hw.final_norm.bias is None
    if hw0.final_norm.bias is not None:
        assert hw.b_U is not None
    torch.testing.assert_close(hf_logits_from(hw, cap, model), cap.logits, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(hf_logits_from(hw, cap), hf_logits_from(hw0, cap), atol=1e-4, rtol=1e-5)
    # the embedding is not touched by folding (it is read, not a reader)
    assert torch.equal(hw.W_E, hw0.W_E)


def test_fold_norm_refused_post_ln():
    model, _ = model_and_capture("bert")
    hw = compscope.load(model)
    with pytest.raises(ProcessingError, match="post"):
        fold_norm(hw)
    with pytest.raises(ProcessingError, match="post"):
        compscope.load(model, fold_norm=True)


# ---------------------------------------------------------------------------- center_writing


@pytest.mark.parametrize("vid", CENTRABLE)
def test_center_writing_centres_attention_output(vid):
    model, cap = model_and_capture(vid)
    hw0 = compscope.load(model)
    hw = center_writing(hw0)
    assert hw.meta.processing == ("center_writing",)
    assert_attention(hw, cap, centred=True, what=f"{vid} centred")
    # the reads are unchanged: the uncentred residual gives the centred output too
    got = attention_forward(hw, 0, cap.resid[0])
    torch.testing.assert_close(got, _centre(cap.attn_out[0]), atol=ATOL, rtol=0)
    assert hw.W_E.mean(0).abs().max() < 1e-6
    assert hw.W_O.mean(-2).abs().max() < 1e-6
    if hw.b_O is not None:
        assert hw.b_O.mean(-1).abs().max() < 1e-6


@pytest.mark.parametrize("vid", FIRST_LAYER_UNNORMED)
def test_center_writing_refused_where_the_first_layer_reads_the_residual_unnormed(vid):
    """ModernBERT's first layer reads the embeddings without a LayerNorm: centring them would change
    what it reads (the check: centred, its attention output differs)."""
    model, cap = model_and_capture(vid)
    hw = compscope.load(model)
    with pytest.raises(ProcessingError, match="first layer reads the residual without a norm"):
        center_writing(hw)
    with pytest.raises(ProcessingError, match="first layer reads the residual without a norm"):
        compscope.load(model, center_writing=True)
    forced = hw.replace(first_layer_unnormed=False)  # (what the refusal protects: layer 0 would read another input)
    assert (attention_forward(forced, 0, cap.resid[0]) - cap.attn_out[0]).abs().max() > 1e-3


@pytest.mark.parametrize("vid", CENTRABLE)
def test_center_writing_keeps_layernorm_of_residual(vid):
    """HF's own first LayerNorm gives the same output on the centred embedding residual."""
    model, cap = model_and_capture(vid)
    hw0 = compscope.load(model)
    hw = center_writing(hw0)
    ids = cap.ids
    resid_c = hw.W_E[:, ids].permute(1, 2, 0)
    if hw.W_pos is not None:
        resid_c = resid_c + hw.W_pos[:, :SEQ].T
    if "W_type" in hw.embed_extra:  # (XLM-RoBERTa-XL: token type 0, written too)
        resid_c = resid_c + hw.embed_extra["W_type"][:, 0]
    torch.testing.assert_close(resid_c, _centre(cap.resid[0]), atol=ATOL, rtol=0)
    pairs, final = _modules(model, BY_ID[vid].kind)
    ln = pairs[0][0]  # pre-LN: the module whose input is the residual is the first LayerNorm
    with torch.no_grad():
        torch.testing.assert_close(ln(resid_c), ln(cap.resid[0]), atol=1e-5, rtol=0)
        if hw.W_U is None:  # an encoder: its final LayerNorm's output the same
            torch.testing.assert_close(final(_centre(cap.final_in)), final(cap.final_in), atol=1e-5, rtol=0)
            return
        # the unembedding reads through the final LayerNorm: a centred final residual gives HF's logits
        logits = final(_centre(cap.final_in)) @ hw.W_U.T + (0 if hw.b_U is None else hw.b_U)
    torch.testing.assert_close(logits, cap.logits, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("vid", RMSNORM + ["bert"])
def test_center_writing_refused_without_pre_layernorm(vid):
    model, _ = model_and_capture(vid)
    hw = compscope.load(model)
    reason = "post" if vid == "bert" else "rmsnorm"
    with pytest.raises(ProcessingError, match=reason):
        center_writing(hw)
    with pytest.raises(ProcessingError, match=reason):
        compscope.load(model, center_writing=True)


def test_center_writing_refused_when_unembedding_reads_raw_residual():
    model, _ = model_and_capture("gpt2")
    hw = compscope.load(model).replace(final_norm=None)
    with pytest.raises(ProcessingError, match="final"):
        center_writing(hw)


# ---------------------------------------------------------------------------- fold_value_bias


@pytest.mark.parametrize("vid", ALL)
def test_fold_value_bias_keeps_attention(vid):
    model, cap = model_and_capture(vid)
    hw0 = compscope.load(model)
    if hw0.sinks is not None and hw0.b_V is not None:  # attention sums to less than 1: the bias depends on the query
        with pytest.raises(ProcessingError, match="attention sinks, so a head's attention sums to less than 1"):
            fold_value_bias(hw0)
        return
    if hw0.kv_latent is not None and hw0.b_V is not None:  # each value, bias and all, times its token's latent scale
        with pytest.raises(ProcessingError, match="scales each value, bias and all, by its latent norm's scale"):
            fold_value_bias(hw0)
        return
    if hw0.W_G is not None and hw0.b_V is not None:  # (MiniCPM 5's) each head's z, bias and all, times its query's gate
        with pytest.raises(ProcessingError, match="gates each head's output by its query"):
            fold_value_bias(hw0)
        return
    hw = fold_value_bias(hw0)
    assert hw.meta.processing == ("fold_value_bias",)
    assert hw.b_V is None
    if hw0.b_V is not None and hw0.b_V.abs().max() > 0:
        assert hw.b_O is not None and not (hw0.b_O is not None and torch.equal(hw.b_O, hw0.b_O))
    assert_attention(hw, cap, what=f"{vid} value bias folded")


# ---------------------------------------------------------------------------- all together, via load


@pytest.mark.parametrize("vid", ALL)
def test_load_with_processing(vid):
    model, cap = model_and_capture(vid)
    layernorm, pre = vid in CENTRABLE, vid in PRE_NORM
    plain = compscope.load(model)  # (sinks, a latent scale on the values, an output gate: the value bias stays, as
    folds = plain.sinks is None and ((plain.kv_latent is None and plain.W_G is None) or plain.b_V is None)  # (as
    # fold_value_bias_keeps_attention)
    hw = compscope.load(model, fold_norm=pre, center_writing=layernorm, fold_value_bias=folds)
    want = tuple(s for s, on in (("fold_norm", pre), ("center_writing", layernorm), ("fold_value_bias", folds)) if on)
    assert hw.meta.processing == want
    assert_attention(hw, cap, centred=layernorm, what=f"{vid} {want}")
    if hw.W_U is not None:
        torch.testing.assert_close(hf_logits_from(hw, cap, model), cap.logits, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("vid", ["gpt2", "neox-sequential-no-bias"])  # (the second: no b_V, no b_O; norm biases)
@pytest.mark.parametrize("order", [
    (fold_value_bias, center_writing, fold_norm),
    (center_writing, fold_norm, fold_value_bias),
    (fold_norm, fold_value_bias, center_writing),
], ids=lambda o: "-".join(f.__name__ for f in o))
def test_steps_in_any_order_are_recorded_in_order(order, vid):
    """Any order gives the same model; where the value bias is folded before the norm, the value bias the
    norm's bias makes goes into ``b_O`` too, made where the model had none."""
    model, cap = model_and_capture(vid)
    hw = compscope.load(model)
    for step in order:
        hw = step(hw)
    assert hw.meta.processing == tuple(f.__name__ for f in order)
    assert hw.b_V is None  # folded whatever came after it
    assert hw.b_O.mean(-1).abs().max() < 1e-6  # centred whatever came after it
    assert_attention(hw, cap, centred=True, what=str(hw.meta.processing))


# ---------------------------------------------------------------------------- once only


TWICE = [(vid, step) for vid in ("gpt2", "neox-sequential-no-bias", "llama-gqa-bias", "llama-mha")
         for step in (fold_norm, center_writing, fold_value_bias)
         if step is not center_writing or vid in PRE_LN_LAYERNORM]  # centring RMSNorm models: refused anyway


@pytest.mark.parametrize("vid, step", TWICE, ids=[f"{v}-{f.__name__}" for v, f in TWICE])
def test_twice_is_refused(step, vid):
    model, _ = model_and_capture(vid)
    hw = step(compscope.load(model))
    with pytest.raises(ProcessingError, match=step.__name__):
        step(hw)


def test_processing_leaves_the_input_unchanged():
    model, _ = model_and_capture("gpt2")
    hw0 = compscope.load(model)
    snapshot = {k: getattr(hw0, k).clone() for k in ("W_Q", "W_O", "b_O", "b_V", "W_E", "W_U")}
    compscope.load(hw0, fold_norm=True, center_writing=True, fold_value_bias=True)
    for k, v in snapshot.items():
        assert torch.equal(getattr(hw0, k), v), k
    assert hw0.meta.processing == ()


def test_scores_and_compose_pair_take_the_processing_steps():
    """``compscope.scores`` and ``compose_pair`` take ``load``'s processing keywords: their results are
    those of the weights loaded processed, whether given the model or its unprocessed ``HeadWeights``
    (and differ from the unprocessed weights' under ``embed``, so the steps were applied). What they
    cannot do is refused by name: ``linearise_qk_norm='text'`` on weights that cannot run, an
    unknown keyword (with the one meant)."""
    model, _ = model_and_capture("gpt2")
    steps = dict(fold_norm=True, center_writing=True, fold_value_bias=True)
    hw = compscope.load(model, **steps)
    want = compscope.scores(hw, "K", ["frobenius", "overlap"], "embed", progress=False)
    plain = compscope.scores(model, "K", ["frobenius", "overlap"], "embed", progress=False)
    assert not torch.allclose(plain.dense("overlap", "K").nan_to_num(), want.dense("overlap", "K").nan_to_num(), rtol=1e-3)
    pair = compscope.compose_pair(hw, "0.1", "1.0", "K", "embed")
    for source in (model, compscope.load(model)):
        t = compscope.scores(source, "K", ["frobenius", "overlap"], "embed", progress=False, **steps)
        assert t.processing == ("fold_norm", "center_writing", "fold_value_bias")
        for m in ("frobenius", "overlap"):
            torch.testing.assert_close(t.dense(m, "K"), want.dense(m, "K"), equal_nan=True)
        p = compscope.compose_pair(source, "0.1", "1.0", "K", "embed", **steps)
        assert p.measures == pytest.approx(pair.measures, rel=1e-9)
    with pytest.raises(compscope.OptionError, match="linearise_qk_norm='text' runs the model over text: pass the model"):
        compscope.scores(compscope.load(model), linearise_qk_norm="text")
    with pytest.raises(ProcessingError, match="fold_norm was already applied"):
        compscope.scores(hw, fold_norm=True)
    for call, bad, meant in ((compscope.scores, "metrics", "metric"), (compscope.scores, "fold_norms", "fold_norm"),
                             (compscope.compose_pair, "offst", "offset")):
        args = (model,) if call is compscope.scores else (model, "0.1", "1.0")
        with pytest.raises(compscope.OptionError, match=rf"^{call.__name__}: unknown option '{bad}'; options: .*"
                                                        rf"; did you mean '{meant}'\?$"):
            call(*args, **{bad: 1})


def test_head_circuits_take_the_processing_steps():
    """``compscope.head_circuits`` with ``load``'s processing keywords: the circuits of the weights
    ``load_with_positional`` gives, as ``compscope circuits --fold-norm --linearise-qk-norm`` reads
    them (the previous-token scores from the weights before QK-norm is linearised)."""
    from compscope.loading.sources import load_with_positional

    from hf_tiny import build

    model = build(BY_ID["gemma3-text"], seed=0)
    steps = dict(fold_norm=True, linearise_qk_norm=True)
    hw, before = load_with_positional(model, **steps)
    want = compscope.head_circuits(hw, positional=before, progress=False)
    plain = compscope.head_circuits(model, progress=False)
    for source in (model, compscope.load(model)):
        c = compscope.head_circuits(source, progress=False, **steps)
        for name in ("copying", "matching", "previous", "induction"):
            torch.testing.assert_close(getattr(c, name), getattr(want, name), equal_nan=True)
    assert not torch.allclose(c.matching, plain.matching, rtol=1e-3)  # the steps were applied
    with pytest.raises(compscope.OptionError, match="QK-norm linearised, which loses the heads' positional patterns"):
        compscope.head_circuits(hw, progress=False)  # weights linearised elsewhere still need their positional=


def test_track_refuses_an_unknown_scoring_keyword_before_reading_a_checkpoint(tmp_path):
    """``track``'s ``**score_options`` go to the engine: one it does not take is refused, with the one
    meant, before any checkpoint is read (the folder here is empty, which would be refused after)."""
    with pytest.raises(compscope.OptionError, match=r"^track: unknown option 'pair'; options: .*; did you mean 'pairs'\?$"):
        compscope.track(tmp_path, pair="all")
