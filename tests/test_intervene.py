"""Interventional composition (compscope.data.intervene): against a hand-written patched forward pass
of layer 1, zero effects for a silent writer, and the default model's known circuit."""

import math
import re

import pytest
import torch

from compscope.analysis.stats import spearman
from compscope.cli.main import main
from compscope.errors import OptionError
from compscope.data.intervene import against_measures, interventional_composition
from compscope.toy import repeated_random
from compscope.toy.model import ToyConfig, ToyTransformer


def toy(seed=0, **kw):
    cfg = ToyConfig(n_layers=2, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, **kw)
    return ToyTransformer(cfg, seed=seed).double()


def tokens(n=6, half=4, vocab=10):
    return repeated_random(n, half, vocab, seed=3)


def _layer1_by_hand(m, x_q, x_k, x_v):
    """Patterns ``(batch, head, i, j)`` and outputs ``(batch, pos, head, d)`` of layer 1 of a
    norm-free toy with learned positions, from what each head reads per kind."""
    b = m.blocks[1]
    q = torch.einsum("hrd,bshd->bhsr", b.W_Q, x_q)
    k = torch.einsum("hrd,bshd->bhsr", b.W_K, x_k)
    v = torch.einsum("hrd,bshd->bhsr", b.W_V, x_v)
    T = q.shape[2]
    logits = (q @ k.mT) / math.sqrt(q.shape[-1])
    p = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    return p, torch.einsum("hdr,bhsr->bshd", b.W_O, p @ v)


@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_effects_equal_a_hand_written_patched_layer(ablation):
    m, t = toy(), tokens()
    got = interventional_composition(m, t, "QKV", ablation)
    cache = {}
    m(t, cache=cache)
    x = cache["resid_pre.1"][:, :, None, :].expand(-1, -1, 3, -1)  # every head reads the clean residual
    p0, o0 = _layer1_by_hand(m, x, x, x)
    assert torch.allclose(p0, cache["pattern.1"])
    for h1 in range(3):
        w = cache["head_out.0"][:, :, h1]
        delta = ((w.mean(0, keepdim=True) if ablation == "mean" else 0 * w) - w)[:, :, None, :]
        for kind in "QKV":
            xs = {k: x + delta if k == kind else x for k in "QKV"}
            p, o = _layer1_by_hand(m, xs["Q"], xs["K"], xs["V"])
            if kind in "QK":
                want = 0.5 * (p - p0).abs().sum(-1).mean(dim=(0, 2))
            else:
                n0, n1 = o0.norm(dim=-1), o.norm(dim=-1)
                want = ((n1 - n0).abs() / n0).mean(dim=(0, 1))
            torch.testing.assert_close(got[kind][0, h1, 1], want, rtol=1e-10, atol=1e-12)
    assert torch.isnan(got["K"][1]).all() and torch.isnan(got["K"][:, :, 0]).all()  # only layer 0 -> layer 1


def test_a_writer_that_writes_nothing_has_no_effect():
    m = toy(seed=1)
    m.blocks[0].W_O.data[1] = 0
    got = interventional_composition(m, tokens())
    for kind in "QKV":
        assert torch.equal(got[kind][0, 1, 1], torch.zeros(3, dtype=torch.float64))
        assert (got[kind][0, 0, 1] > 0).all()


def test_effects_asked_by_sequences_half_and_seed_are_a_verdicts_effects():
    """``intervention_effects(model, sequences=, half=, seed=)`` intervenes on the first ``sequences``
    of the sequences a verdict with that ``half`` and ``seed`` reads: its effects equal the
    verdict's with ``intervention_sequences=sequences``; the defaults are the verdict's defaults
    (its first 16); given beside ``tokens`` they are refused."""
    import compscope
    from compscope.data.runner import runner_for
    from compscope.data.validate import default_sequences

    got = compscope.intervention_effects("induction-2l", kinds="K", sequences=3, half=6, seed=5, progress=False)
    v = compscope.validate("induction-2l", kinds="K", metrics=("identity",), sequences=8, half=6, seed=5,
                           intervention_sequences=3, progress=False)
    torch.testing.assert_close(got.by_kind["K"], v.effects.by_kind["K"], rtol=0, atol=0, equal_nan=True)
    runner = runner_for("induction-2l")
    plain = compscope.intervention_effects(runner, kinds="K", progress=False)
    by_hand = compscope.intervention_effects(runner, default_sequences(runner).tokens[:16], kinds="K", progress=False)
    torch.testing.assert_close(plain.by_kind["K"], by_hand.by_kind["K"], rtol=0, atol=0, equal_nan=True)
    with pytest.raises(OptionError, match="sequences, half: the sequences tokens gives are the data"):
        compscope.intervention_effects(runner, default_sequences(runner).tokens[:2], sequences=2, half=6)
    with pytest.raises(OptionError, match="sequences=0"):
        compscope.intervention_effects(runner, sequences=0)
    many = compscope.intervention_effects(runner, kinds="K", sequences=70, half=4, progress=False)  # past 64: all 70
    assert many.sequences == 70 and many.seq_len == 8


def test_options_are_checked():
    m, t = toy(), tokens()
    with pytest.raises(OptionError, match="ablation"):
        interventional_composition(m, t, ablation="resample")
    with pytest.raises(OptionError, match="kinds"):
        interventional_composition(m, t, "X")
    with pytest.raises(OptionError, match="batch, pos"):
        interventional_composition(m, t[0])
    for none in (t[:0], t[:, :0]):  # no sequence, no position
        with pytest.raises(OptionError, match=r"tokens must be a non-empty \((batch, pos|batch, seq)\) tensor, got shape"):
            intervention_effects(_runner(toy()), none, ablation="zero", progress=False)
        with pytest.raises(OptionError, match=r"tokens must be a non-empty \(batch, pos\) tensor, got shape"):
            interventional_composition(m, none, ablation="zero")
    with pytest.raises(OptionError, match=r"token ids must lie in 0\.\.9 for this toy model"):  # -1: not the last id
        interventional_composition(m, t - 1)
    # a mean over one sequence is that sequence: refused; zero-ablation of one sequence has effects
    with pytest.raises(OptionError, match="mean-ablation on 1 sequence: the mean over one sequence is the output"):
        interventional_composition(m, t[:1])
    with pytest.raises(OptionError, match="mean-ablation on 1 sequence"):
        intervention_effects(_runner(m.float()), t[:1], progress=False)
    one = intervention_effects(_runner(m.float()), t[:1], ablation="zero", progress=False)
    assert (one.by_kind["K"][0, :, 1] > 0).all() and one.sequences == 1


def test_default_model_k_composition_by_measures_ranks_like_the_intervention():
    """The previous-token heads 0.0 and 0.1 K-compose into the induction heads of layer 1 far
    more than 0.2 and 0.3 do, on data; frobenius ranks the 16 pairs as the intervention does."""
    effects, table, half = against_measures("induction-2l", "K", sequences=50)
    k = effects.by_kind["K"][0, :, 1]  # (h1, h2)
    assert half == 32 and k[:2].min() > 2 * k[2:].max()
    assert spearman(table.dense("frobenius", "K"), effects.by_kind["K"]) > 0.8


def test_cli_prints_each_kind_with_the_measures_rank_correlations(capsys):
    assert main(["intervene", "--kinds", "K", "--sequences", "20", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1].startswith("K  strongest effects: 0.")
    assert "frobenius" in out[2] and "over 16 pairs" in out[2]


def test_cli_names_the_metric_and_where_its_g_came_from_as_scores_does(tmp_path, capsys):
    """The header names the metric (a file's by its name, as every table does) and where its G came
    from, in the words of the ``scores`` header."""
    import numpy as np

    import compscope

    hw = compscope.load("induction-2l")
    E, P = hw.W_E.double(), hw.W_pos.double()
    np.save(tmp_path / "mine.npy", (E @ E.T / E.shape[1] + P @ P.T / P.shape[1]).numpy())
    common = ["--kinds", "K", "--sequences", "2", "--half", "8", "--top", "1"]
    assert main(["intervene", "--metric", str(tmp_path / "mine.npy"), *common]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    info = compscope.scores(hw, "K", ["frobenius"], metric=str(tmp_path / "mine.npy"), progress=False).info
    raw, cond = info["condition"]["None"]
    assert head.endswith(f"measures under metric mine (condition number {cond:.3g} with ridge 1e-06·tr(G)/d, "
                         f"{raw:.3g} without), with G given as the file mine.npy (SHA-256 "
                         + info["metric_data"].rsplit("(SHA-256 ", 1)[1]), head
    assert main(["intervene", "--metric", "covariance", "--metric-sequences", "3", *common]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert re.search(r"measures under metric covariance \(largest condition number of 2 layers \S+ with ridge "
                     r"1e-06·tr\(G\)/d, \S+ without\), estimated on 3 held-out repeated random sequences \[t, t\], "
                     r"\|t\| = 32 \(seed 12346\); Ledoit-Wolf shrinkage 0\.", head), head



def test_cli_intervenes_on_a_huggingface_folder(tmp_path, capsys):
    """The same command on a tiny random Llama (GQA) saved as a HuggingFace folder: every pair of
    its 2 layers × 4 heads, each kind, and the V direction; a post-LN BERT is refused by name."""
    from hf_tiny import VARIANTS, build

    by_id = {v.id: v for v in VARIANTS}
    build(by_id["llama-gqa-bias"]).save_pretrained(tmp_path / "llama")
    assert main(["intervene", str(tmp_path / "llama"), "--sequences", "4", "--half", "4", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "|t| = 4 (seed 12345)" in out[0]
    for kind in ("Q", "K", "V", "V (direction)"):
        line = next(i for i, x in enumerate(out) if x.startswith(f"{kind}  strongest effects: 0."))
        assert "over 16 pairs" in out[line + 1]
    build(by_id["bert"]).save_pretrained(tmp_path / "bert")
    assert main(["intervene", str(tmp_path / "bert"), "--sequences", "2", "--half", "4"]) == 0
    assert "K  strongest effects: 0." in capsys.readouterr().out


def test_the_default_half_fits_a_short_context_and_a_half_given_that_does_not_is_refused(tmp_path, capsys):
    """As validate: a tiny GPT-2 takes 32 tokens, so the default |t| = 32 is cut to the longest
    repeats that fit, (32 - 1 for a first token) // 2, and the CLI says so; a |t| given that does
    not fit is refused by name before any work (was cut silently), as it is on a toy model."""
    from hf_tiny import BY_ID, build

    build(BY_ID["gpt2"]).save_pretrained(tmp_path / "gpt2")  # n_positions 32
    first = runner_for(str(tmp_path / "gpt2"), progress=False).bos is not None
    want = (32 - first) // 2
    effects, _, half = against_measures(str(tmp_path / "gpt2"), "K", sequences=2)
    assert half == want and effects.seq_len == first + 2 * want
    assert main(["intervene", str(tmp_path / "gpt2"), "--kinds", "K", "--sequences", "2", "--top", "1"]) == 0
    assert f"|t| = {want} (cut from 32 to fit the model's context) (seed 12345)" in capsys.readouterr().out
    assert main(["intervene", str(tmp_path / "gpt2"), "--kinds", "K", "--sequences", "2", "--half", str(want)]) == 0
    assert f"|t| = {want} (seed 12345)" in capsys.readouterr().out
    with pytest.raises(OptionError, match=rf"half={want + 1}: .* longer than .* takes \(32\); give \|t\| <= {want}"):
        against_measures(str(tmp_path / "gpt2"), "K", sequences=2, half=want + 1)
    assert main(["intervene", str(tmp_path / "gpt2"), "--kinds", "K", "--sequences", "2", "--half", str(want + 1)]) != 0
    err = capsys.readouterr().err
    assert f"half={want + 1}" in err and "Traceback" not in err
    with pytest.raises(OptionError, match=r"half=33: .* longer than .* takes \(64\); give \|t\| <= 32"):
        against_measures("induction-2l", "K", sequences=2, half=33)  # the toy's n_ctx 64, no first token
    with pytest.raises(OptionError, match=r"half=1: expected a positive integer >= 2"):
        against_measures("induction-2l", "K", sequences=2, half=1)


def test_cli_intervenes_along_every_path(tmp_path, capsys):
    """--paths all on a three-layer Gemma 3 folder: the header says so, and the strongest K effects
    are those of intervention_effects(paths='all') on the same sequences."""
    from hf_tiny import BY_ID, build

    from compscope.data.sequences import repeats

    build(BY_ID["gemma3-text"]).save_pretrained(tmp_path / "gemma")
    assert main(["intervene", str(tmp_path / "gemma"), "--kinds", "K", "--sequences", "3", "--half", "4",
                 "--paths", "all", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "mean-ablation of h1's output in the model, read by h2 through every path" in out
    runner = runner_for(str(tmp_path / "gemma"), progress=False)
    t = repeats(3, 4, runner.hw.n_vocab, 12345, runner.bos, avoid=runner.special_ids()).tokens
    k = intervention_effects(runner, t, "K", progress=False, paths="all").by_kind["K"]
    top = torch.nan_to_num(k, nan=-1.0).flatten().argmax()
    a, b, c, d = (int(i) for i in torch.unravel_index(top, k.shape))
    assert f"K  strongest effects: {a}.{b}->{c}.{d} {float(k[a, b, c, d]):.3f}" in out, out


# ---------------------------------------------------------------- every runner: one forward, changed sides only
from compscope.core.attention import combine, head_states, read_input  # noqa: E402
from compscope.data.intervene import intervention_effects  # noqa: E402
from compscope.data.runner import ToyRunner, layer_state, runner_for  # noqa: E402


def _runner(m):
    return ToyRunner(m, m.head_weights())


@pytest.mark.parametrize("kw", [dict(), dict(norm="layernorm"), dict(norm="rmsnorm", positions="rotary"),
                                dict(norm="layernorm", mlp=True),
                                dict(norm="rmsnorm", positions="rotary", qk_norm=True, attn_out_norm=True)],
                         ids=["plain", "layernorm", "rms-rotary", "mlp", "qk-norm-output-norm"])
@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_runner_effects_equal_the_toy_forward_with_edits(kw, ablation):
    """The efficient path (one trace, changed sides recomputed from HeadWeights) against the toy's
    own patched forward pass per (h1, kind, layer of h2), three layers, float32."""
    cfg = ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, **kw)
    m = ToyTransformer(cfg, seed=2)
    t = tokens()
    want = interventional_composition(m, t, "QKV", ablation)
    got = intervention_effects(_runner(m), t, "QKV", ablation, progress=False)
    for kind in "QKV":
        torch.testing.assert_close(got.by_kind[kind], want[kind], atol=1e-5, rtol=1e-4, equal_nan=True)


def _brute_force(hw, tr, l1, h1, l2, kind, ablation):
    """One pair, the slow way: layer l1 recomputed with h1's output replaced, layer l2 recomputed in
    full with the kind's input patched; the effect on every head of l2."""
    s1 = layer_state(hw, l1, tr.resid[l1])
    o = s1.outputs.double().clone()
    w = o[:, :, h1]
    o[:, :, h1] = w.mean(0, keepdim=True) if ablation == "mean" else 0 * w
    delta = combine(hw.replace(), l1, o.float()) - s1.out
    return _reader_effect(hw, l2, tr.resid[l2], tr.resid[l2] + delta, kind)


def _reader_effect(hw, l2, resid, changed, kind):
    """The effect on every head of layer ``l2`` of reading ``changed`` instead of ``resid`` through
    ``kind`` (the other inputs clean), layer ``l2`` recomputed in full: ``(effect, V direction or None)``."""
    clean = read_input(hw, l2, resid)
    patched = read_input(hw, l2, changed)
    xs = {k: patched if k == kind else clean for k in "QKV"}
    p0, v0 = head_states(hw, l2, clean)
    p1, v1 = head_states(hw, l2, xs["Q"], xs["K"], xs["V"])
    if kind in "QK":
        return 0.5 * (p1.double() - p0.double()).abs().sum(-1).mean(dim=(0, 2)), None
    W_O = hw.W_O[l2].double()
    g = 1.0  # an output gate (Qwen3.5, MiniCPM 5) reads the clean query input: the same on both sides
    if hw.W_G is not None:
        y = torch.einsum("hrd,bsd->bhsr", hw.W_G[l2].double(), clean.double())
        g = torch.sigmoid(y if hw.b_G is None else y + hw.b_G[l2].double()[None, :, None])  # (MiniCPM 5's bias)
    o0 = torch.einsum("hdr,bhsr->bshd", W_O, (p0 @ v0).double() * g)
    o1 = torch.einsum("hdr,bhsr->bshd", W_O, (p1 @ v1).double() * g)
    n0 = o0.norm(dim=-1)
    return ((o1.norm(dim=-1) - n0).abs() / n0).mean(dim=(0, 1)), ((o1 - o0).norm(dim=-1) / n0).mean(dim=(0, 1))


NOT_POST_LN = ["gpt2", "gpt-bigcode-mqa", "gpt-bigcode-per-head-unscaled", "gpt-neo-local3", "neox-partial-rotary-parallel", "llama-gqa-bias", "mistral-sliding3", "qwen2-bias",
               "qwen3-qk-norm", "phi3-fused-partial-rotary-sliding", "gemma", "gemma2-softcap", "gemma3-text",
               "gemma3-text-mqa-bias", "olmo-parameter-free-layernorm", "olmo2-layer-qk-norm", "olmo3-sliding-mqa",
               "olmoe-layer-qk-norm", "phi-partial-rotary-qk-layernorm", "gptj-interleaved-rotary", "opt",
               "opt-projected-no-final-norm",
               "stablelm-partial-rotary-parallel", "stablelm-qk-layernorm-per-head", "starcoder2-bias-sliding3", "falcon-mqa-parallel",
               "falcon-grouped-gqa-bias", "falcon-per-head-sequential", "granite-multipliers-gqa",
               "granitemoe-shared-mqa-bias", "granite-hybrid-nope-moe", "granite-hybrid-rope-dense", "jamba-attention-every-second-layer", "mllama-text-cross-attention-layer", "deepseek-v3-latent-attention", "deepseek-v3-no-query-latent-yarn-bias", "deepseek-v2-lite-complex-rotary", "glm4-moe-lite-latent-attention", "axk1-latent-attention", "minicpm3-latent-attention-mup", "mistral4-latent-attention-temperature", "deepseek-v32-indexer-within-topk", "glm5-dsa-indexer-within-topk", "ling3-latent-attention-gated-hybrid", "kimi-linear-nope-latent-hybrid", "mimo-v2-flash-sliding-sinks-narrow-values", "longcat-flash-two-sublayers-lora-scaled", "youtu-latent-attention-tied", "sarvam-mla-latent-attention-yarn", "bamba-half-rotary", "smollm3-nope-sliding", "smollm3-nope-yarn", "llama4-nope-gainless-qk-norm", "llama4-no-qk-norm-bias", "cohere-qk-layernorm-interleaved",
               "cohere2-sliding-rotary-global-nope", "cohere-compass-sliding-rotary-global-nope", "qwen2-moe-no-qkv-bias", "bloom-alibi", "mpt-alibi-scaled", "gpt-oss-sinks-yarn",
               "codegen-eight-heads-four-shards", "phi4-mini-longrope-partial", "glm-interleaved-partial-rotary-gqa",
               "glm4-post-attention-norm", "glm-image-text-half-rotary", "unlimited-ocr-text-reference-window",
               "pocket-tts-layernorm-biases", "gradium-phonon-tts-layernorm", "phi4-multimodal-fused-partial-gqa",
               "higgs-audio-v2-text-positions", "evolla-aligner-layer-text-only",
               "ministral-sliding3-first-layer", "arcee-biases", "seed-oss-out-bias",
               "helium-interleaved-bias", "ernie4_5-interleaved-all-biases", "aria-text-moe-bias",
               "chameleon-per-head-qk-layernorm", "chameleon-swin-norm-after",
               "nemotron-layernorm1p-partial-bias",
               "apertus-qk-norm", "apertus1p5-llama3-rope", "exaone4-sliding-global-nope", "vaultgemma-softcap", "dots1-upper-layer-slides",
               "glm4-moe-qk-norm-partial-bias", "lfm2-conv-attention",
               "nemotron-h-mamba-attention-mlp",
               "falcon-h1-parallel-mamba-multipliers",
               "minimax-m2-layer-qk-norm-rotary-dim",
               "nanochat-reversed-rotary-qk-norm",
               "ministral3-yarn-temperature-sliding",
               "phimoe-layernorm-biases-longrope",
               "gemma4-widths-k-eq-v-scalars", "gemma4-per-layer-embeddings", "gemma4-unified-widths-k-eq-v",
               "cohere2-moe-dense-prefix-rms", "cohere2-moe-layernorm", "xlm-roberta-xl-pre-ln",
               "qwen3.5-gated-attention-deltanet", "qwen3-next-gated-moe-interval",
               "flex-olmo-layer-qk-norm-moe",
               "granite-swa-sinks-layer-theta", "granitemoe-swa-default-types", "recurrent-gemma-local-mqa", "sarvam-moe-full-rotary-qk-norm", "hy-v3-qk-norm-biases-moe", "lfm3-gated-proportional-sliding", "flint-sinks-nope-global", "kolibri1-post-norm-nope-global", "lara-mini-sliding-nope-deltanet",
               "param2moe-full-rotary-qk-norm-tied", "minicpm5-moe-gated-gqa-bias",
               "solar-open-qkv-bias-moe",
               "exaone3-llama-under-lg-names",
               "exaone-moe-sliding-global-nope",
               "olmo-hybrid-deltanet-attention",
               "modernbert-local-both-sides", "modernbert-biases", "embeddinggemma-bidirectional", "eurobert-gqa-biases", "ultrabert-local-both-sides", "privacy-filter-sinks-both-sides",
               "embedding-gemma2-encoder", "muse-glimmer-gated-nope-global", "t5gemma-encoder-both-sides", "t5gemma2-encoder-odd-window",
               "dia-encoder-unscaled-gqa",
               "aimv2-text-rms-biases",
               "esm2-rotary-token-dropout", "esmc-layer-qk-layernorm", "clip-text-causal",
               "tipsv2-text-scaled-sinusoids", "modernbert-decoder-causal-window", "megatron-bert-pre-ln",
               "biogpt-scaled-embeddings", "internlm3-biases", "jais2-layernorm-biases", "cwm-every-fourth-global",
               "hyperclovax-peri-ln-multipliers", "persimmon-qk-layernorm-half-rotary", "xglm-sinusoidal-positions",
               "kosmos2.5-text-segment-sinusoids",
               "afmoe-gated-nope-global", "mellum-sliding-layer-bases", "ctrl-sinusoidal-scaled",
               "gpt-neox-japanese-last-bias", "t5-encoder-wide-heads", "umt5-encoder-own-tables",
               "switch-transformers-encoder", "longt5-local-encoder", "pegasus-encoder-pre-ln", "m2m100-encoder-pre-ln",
               "blenderbot-encoder-pre-ln", "bigbird-pegasus-encoder-full-attention"]


def _route(monkeypatch, route: str) -> None:
    """Make :func:`intervention_effects` take ``route``: ``'default'`` (the factored route on the
    CPU where it applies, elsewhere one writer at a time), ``'batched'`` (a writer layer's heads at
    once, as on a GPU), ``'threes'`` (the batched route in writers of three: the tiny models' four
    heads a layer make a group of three and one alone) or ``'single'`` (one writer at a time)."""
    from compscope.data import intervene

    if route != "default":
        monkeypatch.setattr(intervene, "FACTORED", False)
    if route == "batched":
        monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", 2**40)
    if route in ("threes", "single"):
        monkeypatch.setattr(intervene, "writer_bytes", lambda hw, shape, paths="direct": 1)
        monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", 3 if route == "threes" else 1)


@pytest.mark.parametrize("route", ["default", "threes"])
@pytest.mark.parametrize("variant_id", NOT_POST_LN)
def test_runner_effects_equal_a_brute_force_patch_per_pair_on_hf_models(variant_id, route, monkeypatch):
    """Every pair and kind against :func:`_brute_force`, on the CPU's route and on the GPU's
    (writers batched; here in threes, so that a layer's four heads make a group of three and one alone)."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build, random_ids

    import compscope

    model = build(BY_ID[variant_id])
    runner = runner_for(model, compscope.load(model))
    hw = runner.hw
    t = random_ids(batch=3)
    _route(monkeypatch, route)
    got = intervention_effects(runner, t, "QKV", "mean", progress=False)
    tr = runner.trace(t)
    L = hw.n_layers
    for l1 in range(L - 1):
        for h1 in range(hw.n_heads):
            for l2 in range(l1 + 1, L):
                for kind in "QKV":
                    want, turn = _brute_force(hw, tr, l1, h1, l2, kind, "mean")
                    torch.testing.assert_close(got.by_kind[kind][l1, h1, l2], want, atol=1e-5, rtol=1e-4)
                    if turn is not None:
                        torch.testing.assert_close(got.v_direction[l1, h1, l2], turn, atol=1e-5, rtol=1e-4)


def _constructed():
    """A model whose only composing pair is known by construction: head 0.0 copies token dims 0-1
    into dims 4-5; head 1.1 reads dims 4-5 through W_K only; every other read is of dims 0-3, and
    head 0.1 writes nothing. So the only nonzero effect is 0.0 -> 1.1, K."""
    cfg = ToyConfig(n_layers=2, n_heads=2, d_model=8, d_head=2, d_vocab=10, n_ctx=8)
    m = ToyTransformer(cfg, seed=0)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        m.W_E.zero_()
        m.W_E[:, :4] = torch.randn(10, 4, generator=g)
        m.W_pos.zero_()
        m.W_pos[:, :4] = 0.5 * torch.randn(8, 4, generator=g)
        for blk in m.blocks:
            for w in (blk.W_Q, blk.W_K, blk.W_V, blk.W_O):
                w.zero_()
        b0, b1 = m.blocks
        b0.W_Q[0, :, :4] = torch.randn(2, 4, generator=g)
        b0.W_K[0, :, :4] = torch.randn(2, 4, generator=g)
        b0.W_V[0, :, :2] = torch.eye(2)
        b0.W_O[0, 4:6, :] = torch.eye(2)  # head 0.0 writes dims 4-5
        b0.W_Q[1, :, :4] = torch.randn(2, 4, generator=g)
        b0.W_V[1, :, :4] = torch.randn(2, 4, generator=g)  # head 0.1: W_O stays 0
        for h in range(2):
            b1.W_Q[h, :, :4] = torch.randn(2, 4, generator=g)
            b1.W_V[h, :, :4] = torch.randn(2, 4, generator=g)
            b1.W_O[h, :4, :] = torch.randn(4, 2, generator=g)
        b1.W_K[0, :, :4] = torch.randn(2, 4, generator=g)
        b1.W_K[1, :, 4:6] = 3 * torch.randn(2, 2, generator=g)  # head 1.1's keys read what 0.0 writes
    return m


def test_the_pair_built_to_compose_is_the_only_one_that_does():
    m = _constructed()
    eff = intervention_effects(_runner(m), tokens(n=8), "QKV", progress=False)
    k = eff.by_kind["K"]
    assert float(k[0, 0, 1, 1]) > 0.05
    others = [float(eff.by_kind[kind][0, h1, 1, h2]) for kind in "QKV" for h1 in range(2) for h2 in range(2)
              if (kind, h1, h2) != ("K", 0, 1)]
    assert max(others) < 1e-6, others
    assert float(eff.v_direction[0, 0, 1].max()) < 1e-6


def _clean_reads(lins, kind: str, clean: torch.Tensor) -> list:
    """Pre-hooks that feed ``clean`` to the q/k/v projections ``lins`` (separate modules) but ``kind``'s, where they
    read the hidden states (DeBERTa's query and key projections also project the relative-position embeddings, a
    tensor of another shape, which they read unchanged; Longformer's read the states sequence first)."""
    def feed(_, a):
        if a[0].shape == clean.shape:
            return (clean,)
        for i, j in ((0, 1), (1, 2)):  # (Longformer's read sequence first, SqueezeBERT's channels first)
            if clean.shape[i] != clean.shape[j] and a[0].shape == clean.transpose(i, j).shape:
                return (clean.transpose(i, j),)
        return None
    return [lin.register_forward_pre_hook(feed) for k, lin in zip("QKV", lins) if k != kind]


def _clean_fused_reads(c_attn, kind: str, clean: torch.Tensor) -> list:
    """A hook on a fused ``Conv1D`` q/k/v projection (GPT-1's ``c_attn``, rows ``[q | k | v]``) that puts
    back the parts other than ``kind``'s as computed from ``clean``."""
    def hook(_, a, o):
        d = o.shape[-1] // 3
        out = (clean @ c_attn.weight + c_attn.bias).clone()
        at = "QKV".index(kind) * d
        out[..., at:at + d] = o[..., at:at + d]
        return out
    return [c_attn.register_forward_hook(hook)]


def _encoder_modules(model) -> dict:
    """Where a post-LN model (BERT-like encoders, GPT-1) keeps its layers and, per layer, the module
    whose input is the residual its attention reads, the attention's and the MLP's output modules,
    the attention's output weight (``nn.Linear``'s layout), and hooks that feed the clean residual
    to every projection but one kind's (DistilBERT's names, GPT-1's, or BERT's)."""
    if model.config.model_type == "opt":  # OPT-350m: post-LN, its MLP's output fc2
        a = lambda b: b.self_attn  # noqa: E731
        return {"layers": model.model.decoder.layers, "reads": a, "out": lambda b: a(b).out_proj,
                "W_out": lambda b: a(b).out_proj.weight, "mlp": lambda b: b.fc2,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).q_proj, a(b).k_proj, a(b).v_proj), kind, clean)}
    if hasattr(model, "transformer") and hasattr(model.transformer, "h"):  # GPT-1
        return {"layers": model.transformer.h, "reads": lambda b: b.attn, "out": lambda b: b.attn.c_proj,
                "W_out": lambda b: b.attn.c_proj.weight.T, "mlp": lambda b: b.mlp,
                "clean_reads": lambda b, kind, clean: _clean_fused_reads(b.attn.c_attn, kind, clean)}
    if hasattr(model, "transformer") and hasattr(model.transformer, "attentions"):  # XLM, FlauBERT: no layer modules,
        t = model.transformer  # so a layer is its index into lists of attentions, MLPs and norms side by side
        a = lambda i: t.attentions[i]  # noqa: E731
        return {"layers": list(range(len(t.attentions))), "reads": a, "out": lambda i: a(i).out_lin,
                "W_out": lambda i: a(i).out_lin.weight, "mlp": lambda i: t.ffns[i],
                "clean_reads": lambda i, kind, clean: _clean_reads((a(i).q_lin, a(i).k_lin, a(i).v_lin), kind, clean)}
    if hasattr(model, "transformer"):  # DistilBERT
        a = lambda b: b.attention  # noqa: E731
        return {"layers": model.transformer.layer, "reads": lambda b: b, "out": lambda b: a(b).out_lin,
                "W_out": lambda b: a(b).out_lin.weight, "mlp": lambda b: b.ffn.lin2,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).q_lin, a(b).k_lin, a(b).v_lin), kind, clean)}
    if getattr(model.config, "is_encoder_decoder", False) and model.config.model_type == "led":  # LED's encoder
        a = lambda b: b.self_attn.longformer_self_attn  # noqa: E731
        return {"layers": model.get_encoder().layers, "reads": lambda b: b.self_attn, "out": lambda b: b.self_attn.output,
                "W_out": lambda b: b.self_attn.output.weight, "mlp": lambda b: b.fc2,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).query, a(b).key, a(b).value), kind, clean)}
    if getattr(model.config, "is_encoder_decoder", False):  # BART's kin (post-LN): their encoder's layers (ProphetNet's
        a = lambda b: b.self_attn  # noqa: E731  names: query_proj, ..., its MLP's output feed_forward.output)
        names = ("query_proj", "key_proj", "value_proj") if hasattr(model.get_encoder().layers[0].self_attn,
                                                                    "query_proj") else ("q_proj", "k_proj", "v_proj")
        return {"layers": model.get_encoder().layers, "reads": a, "out": lambda b: a(b).out_proj,
                "W_out": lambda b: a(b).out_proj.weight,
                "mlp": lambda b: b.feed_forward.output if hasattr(b, "feed_forward") else b.fc2,
                "clean_reads": lambda b, kind, clean: _clean_reads(tuple(getattr(a(b), n) for n in names), kind, clean),
                # (ProphetNet returns the logits as its attentions, before their softmax)
                "probs": (lambda p: p.softmax(-1)) if names[0] == "query_proj" else (lambda p: p),
                # (FSMT's encoder keeps its activations sequence-first: kept batch-first)
                **({"turn": lambda x: x.transpose(0, 1)} if model.config.model_type == "fsmt" else {})}
    if hasattr(model, "layers"):  # BERT's layers with rotary positions (jina-embeddings-v3, nomic-embed-text, GTE)
        a = lambda b: b.self_attn  # noqa: E731
        return {"layers": model.layers, "reads": a, "out": lambda b: a(b).o_proj, "W_out": lambda b: a(b).o_proj.weight,
                "mlp": lambda b: b.mlp,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).q_proj, a(b).k_proj, a(b).v_proj), kind, clean)}
    if hasattr(model, "encoder") and hasattr(model.encoder, "layers") and hasattr(model.encoder.layers[0],
                                                                                  "post_attention"):  # SqueezeBERT
        a = lambda b: b.attention  # noqa: E731  (grouped 1x1 convolutions over channels-first activations)
        return {"layers": model.encoder.layers, "reads": a, "out": lambda b: b.post_attention.conv1d,
                "W_out": lambda b: _dense_1x1(b.post_attention.conv1d), "mlp": lambda b: b.output.conv1d,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).query, a(b).key, a(b).value), kind, clean),
                "turn": lambda x: x.transpose(1, 2), "probs": lambda p: p.softmax(-1)}
    if hasattr(model, "encoder") and hasattr(model.encoder.layer[0].attention, "attn"):  # MPNet's names
        a = lambda b: b.attention.attn  # noqa: E731
        return {"layers": model.encoder.layer, "reads": a, "out": lambda b: a(b).o, "W_out": lambda b: a(b).o.weight,
                "mlp": lambda b: b.output.dense,
                "clean_reads": lambda b, kind, clean: _clean_reads((a(b).q, a(b).k, a(b).v), kind, clean)}
    s = lambda b: b.attention.self  # noqa: E731
    body = getattr(model, "roberta", getattr(model, "git", model))  # (AltCLIP's text tower: its layers under roberta.,
    # as encoder.layers in transformers 5; GIT's under git.)
    return {"layers": getattr(body.encoder, "layer", None) or body.encoder.layers, "reads": s, "out": lambda b: b.attention.output.dense,
            "W_out": lambda b: b.attention.output.dense.weight, "mlp": lambda b: b.output.dense,
            "clean_reads": lambda b, kind, clean: (_clean_per_head_fused_reads(s(b).in_proj, kind, clean,
                                                                               model.config.num_attention_heads)
                                                   if hasattr(s(b), "in_proj") else
                                                   _clean_reads(_projections(s(b)), kind, clean))}


def _dense_1x1(conv) -> torch.Tensor:
    """A grouped 1x1 ``nn.Conv1d``'s map as a dense ``(out, in)`` matrix (``nn.Linear``'s layout), from its action on
    the identity (independent of how compscope reads the groups)."""
    eye = torch.eye(conv.in_channels)[:, :, None]  # (in, in channels, 1): column j the j-th unit vector
    return (conv(eye)[:, :, 0] - conv.bias).T.detach()


def _clean_per_head_fused_reads(in_proj, kind: str, clean: torch.Tensor, heads: int) -> list:
    """A hook on DeBERTa's fused ``in_proj`` (no bias; rows per head ``[q | k | v]``) that puts back the parts other
    than ``kind``'s as computed from ``clean``."""
    def hook(_, a, o):
        out = (clean @ in_proj.weight.T).unflatten(-1, (heads, 3, -1))  # (batch, seq, head, q/k/v, d_head)
        j = "QKV".index(kind)
        out[..., j, :] = o.unflatten(-1, (heads, 3, -1))[..., j, :]
        return out.flatten(-3)
    return [in_proj.register_forward_hook(hook)]


def _projections(attention) -> tuple:
    """The query, key and value projections of a BERT-like self-attention module (DeBERTa's ``*_proj``)."""
    names = ("query", "key", "value") if hasattr(attention, "query") else ("query_proj", "key_proj", "value_proj")
    return tuple(getattr(attention, n) for n in names)


def _bert_brute_force(model, ids, l1, h1, l2, kind):
    """One pair on a ``transformers`` BERT, through its own modules: a clean forward, then a
    patched one in which layer l1's attention output carries h1's mean instead of its own, every
    sublayer output after it (the MLP of l1 included) is replaced by its clean value, and at
    layer l2 only the ``kind`` projection reads the patched hidden state (the others the clean
    one). Returns the effect on every head of l2 (and the V direction)."""
    from hf_tiny import attentions, model_inputs

    m = _encoder_modules(model)
    layers = m["layers"]
    H = model.config.num_attention_heads
    r = model.config.hidden_size // H
    clean, hooks = {}, []
    turn = m.get("turn", lambda x: x)  # (SqueezeBERT's activations are channels-first: kept channels-last)
    probs = m.get("probs", lambda p: p)  # (SqueezeBERT returns the logits as its attentions)

    def keep(key, value):  # (I-BERT's modules return a scaling factor beside their output)
        clean[key] = turn((value[0] if isinstance(value, tuple) else value).detach())

    def like(output, value):  # value, returned as the module returns its output
        return (turn(value), *output[1:]) if isinstance(output, tuple) else turn(value)

    def keep_dense(i, a, o):
        keep(("ctx", i), a[0])
        keep(("attn", i), o)

    for i, b in enumerate(layers):  # hooks that return None change nothing
        hooks.append(m["out"](b).register_forward_hook(lambda _, a, o, i=i: keep_dense(i, a, o)))
        hooks.append(m["mlp"](b).register_forward_hook(lambda _, a, o, i=i: keep(("mlp", i), o)))
        hooks.append(m["reads"](b).register_forward_pre_hook(
            lambda m, a, k, i=i: keep(("resid", i), a[0] if a else k["hidden_states" if "hidden_states" in k
                                                                   else "query"]), with_kwargs=True))
    with torch.no_grad():
        p0 = probs(attentions(model(**model_inputs(model, ids), output_attentions=True))[l2])
    for h in hooks:
        h.remove()
    sl = slice(h1 * r, (h1 + 1) * r)
    c = clean[("ctx", l1)][..., sl]
    delta = (c.mean(0, keepdim=True) - c) @ m["W_out"](layers[l1])[:, sl].T
    hooks, patched = [], {}
    hooks.append(m["out"](layers[l1]).register_forward_hook(lambda _, a, o: like(o, clean[("attn", l1)] + delta)))
    for i in range(l1, l2):
        hooks.append(m["mlp"](layers[i]).register_forward_hook(lambda _, a, o, i=i: like(o, clean[("mlp", i)])))
        if i > l1:
            hooks.append(m["out"](layers[i]).register_forward_hook(lambda _, a, o, i=i: like(o, clean[("attn", i)])))
    hooks += m["clean_reads"](layers[l2], kind, clean[("resid", l2)])
    hooks.append(m["out"](layers[l2]).register_forward_hook(lambda _, a, o: patched.__setitem__("ctx", turn(a[0].detach()))))
    try:
        with torch.no_grad():
            p1 = probs(attentions(model(**model_inputs(model, ids), output_attentions=True))[l2])
    finally:
        for h in hooks:
            h.remove()
    if kind in "QK":
        return 0.5 * (p1.double() - p0.double()).abs().sum(-1).mean(dim=(0, 2)), None
    W = m["W_out"](layers[l2]).double()
    per_head = lambda ctx: torch.stack([ctx[..., h * r:(h + 1) * r].double() @ W[:, h * r:(h + 1) * r].T  # noqa: E731
                                        for h in range(H)], dim=2)
    n = ids.shape[1]  # (Longformer runs its sequences padded to a multiple of its window: the padding left out)
    o0, o1 = per_head(clean[("ctx", l2)])[:, :n], per_head(patched["ctx"])[:, :n]
    n0 = o0.norm(dim=-1)
    return ((o1.norm(dim=-1) - n0).abs() / n0).mean(dim=(0, 1)), ((o1 - o0).norm(dim=-1) / n0).mean(dim=(0, 1))


@pytest.mark.parametrize("variant_id, route", [("bert", "batched"), ("bert", "threes"), ("bert", "single"),
                                               ("roberta-offset-positions", "threes"), ("electra", "single"),
                                               ("data2vec-text-pad-zero", "batched"), ("distilbert", "threes"),
                                               ("ibert-float", "threes"), ("luke-words-alone", "single"),
                                               ("layoutlm-words-alone", "batched"), ("tapas-words-alone", "single"),
                                               ("layoutlmv3-words-alone", "threes"), ("git-text-decoder", "batched"),
                                               ("visual-bert-words-alone", "single"),
                                               ("markuplm-words-alone", "batched"), ("bros-words-alone", "single"),
                                               ("squeezebert-grouped-convolutions", "threes"),
                                               ("longformer-windows-both-sides", "threes"),
                                               ("ernie-task-types", "batched"), ("bert-generation-encoder", "single"),
                                               ("splinter-bert-layers", "threes"), ("align-text-bert", "batched"),
                                               ("clap-text-roberta", "threes"),
                                               ("bridgetower-text-roberta", "batched"),
                                               ("deberta-v3-log-buckets", "batched"),
                                               ("deberta-v2-own-position-projections", "threes"),
                                               ("deberta-v1-fused", "single"), ("mpnet-relative-bias", "threes"),
                                               ("altclip-text-roberta-layers", "single"),
                                               ("openai-gpt-post-ln", "threes"), ("openai-gpt-post-ln", "single"),
                                               ("opt-350m-post-ln-projected", "threes"),
                                               ("opt-350m-post-ln-projected", "batched"),
                                               ("jina-embeddings-v3-rotary-post-ln", "batched"),
                                               ("nomic-bert-rotary-no-bias", "threes"),
                                               ("gte-rotary-no-token-types", "single"),
                                               ("roformer-rotary-post-ln", "threes"), ("xlm-post-ln", "threes"),
                                               ("xlm-clm-causal-languages", "batched"), ("flaubert-post-ln", "single"),
                                               ("bart-encoder-post-ln", "threes"),
                                               ("blenderbot-small-encoder-post-ln", "single"),
                                               ("marian-encoder-unnormed-embeddings", "batched"),
                                               ("fsmt-encoder-sequence-first", "threes"),
                                               ("led-encoder-windows-both-sides", "threes"),
                                               ("big-bird-full-attention", "batched"),
                                               ("prophetnet-encoder-post-ln", "single")])
def test_post_ln_effects_equal_a_patched_forward_through_the_models_own_modules(variant_id, route, monkeypatch):
    """BERT and its kin (post-LN; DistilBERT, XLM and FlauBERT under their own names; GPT-1, causal, its first layer
    reading the raw embeddings; Longformer, its sequences padded as it runs them), three layers, every pair and kind: the direct path through the
    norms between the layers (compscope's one trace) equals the patched forward of the model
    itself; with a layer's four writers in one batch (as on a GPU), in three and one, and one at a time."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build, random_ids

    import compscope

    layers = {"gpt1": "n_layer", "xlm": "n_layers", "bart": "encoder_layers"}.get(BY_ID[variant_id].kind, "num_hidden_layers")
    if BY_ID[variant_id].config_cls == "ProphetNetConfig":
        layers = "num_encoder_layers"
    model = build(BY_ID[variant_id], **{layers: 3})
    runner = runner_for(model, compscope.load(model))
    assert runner.hw.n_heads == 4 and runner.hw.n_layers == 3
    t = random_ids(batch=3)
    _route(monkeypatch, route)
    got = intervention_effects(runner, t, "QKV", "mean", progress=False)
    hw = runner.hw
    for l1 in range(hw.n_layers - 1):
        for h1 in range(hw.n_heads):
            for l2 in range(l1 + 1, hw.n_layers):
                for kind in "QKV":
                    want, turn = _bert_brute_force(model, t, l1, h1, l2, kind)
                    torch.testing.assert_close(got.by_kind[kind][l1, h1, l2], want, atol=1e-5, rtol=1e-4)
                    if turn is not None:
                        torch.testing.assert_close(got.v_direction[l1, h1, l2], turn, atol=1e-5, rtol=1e-4)
    assert float(got.by_kind["K"][0, :, 2].max()) > 1e-3  # two norms apart, the writes still arrive


def test_post_ln_needs_a_runner_that_names_its_norms():
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    import compscope

    model = build(BY_ID["bert"])
    runner = runner_for(model, compscope.load(model))
    runner.post_norms = None
    with pytest.raises(OptionError, match="post-LN"):
        intervention_effects(runner, torch.zeros(2, 4, dtype=torch.long))


@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_batches_give_the_effects_of_the_whole(ablation):
    """Mean-ablation uses the mean over every sequence, whatever the batch size: seven sequences in batches of
    one, in two (4 + 3, 6 + 1), in three, or in one batch as large as the data or larger give the same effects."""
    cfg = ToyConfig(n_layers=3, n_heads=2, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm="layernorm")
    r = _runner(ToyTransformer(cfg, seed=4))
    t = tokens(n=7)
    whole = intervention_effects(r, t, ablation=ablation, progress=False)
    for batch_size in (1, 3, 4, 6, 7, 100):
        parts = intervention_effects(r, t, ablation=ablation, batch_size=batch_size, progress=False)
        for kind in "QKV":
            torch.testing.assert_close(parts.by_kind[kind], whole.by_kind[kind], atol=1e-6, rtol=1e-5, equal_nan=True)
        torch.testing.assert_close(parts.v_direction, whole.v_direction, atol=1e-6, rtol=1e-5, equal_nan=True)
    with pytest.raises(OptionError, match="batch_size"):
        intervention_effects(r, t, batch_size=0)


@pytest.mark.parametrize("scale", [1e-2, 1e-5, 1e-7])
def test_v_effect_sums_in_float32_stay_within_float32_of_delta_against_float64(scale):
    """The V effects' per-position terms are computed from float32 outputs without cancellation:
    against float64 a change ``Δ`` of relative size ``scale`` (random, a pure rescaling, none at
    all, a zero clean output) gives sums within ``1e-6 · scale`` relative, not ``1e-7`` absolute."""
    from compscope.data.intervene import _v_sums

    g = torch.Generator().manual_seed(3)
    o = torch.randn(4, 9, 6, 64, generator=g)
    o2 = o + scale * torch.randn(o.shape, generator=g)
    o2[:, :, 1] = o[:, :, 1] * (1 + scale)  # pure rescaling: the direction effect is the norm effect
    o2[:, :, 2] = o[:, :, 2]  # unchanged: both effects 0
    o[0, 0, 3] = 0  # a zero clean output is left out
    O, O2 = o.double(), o2.double()
    n = O.norm(dim=-1)
    keep = (n > 0).double()
    inv = keep / n.clamp_min(1e-300)
    want = (((O2.norm(dim=-1) - n).abs() * inv).sum((0, 1)), ((O2 - O).norm(dim=-1) * inv).sum((0, 1)),
            keep.sum((0, 1)))
    got = _v_sums(o, o2)
    for g_, w in zip(got, want):
        assert g_.dtype == torch.float64
        torch.testing.assert_close(g_, w, rtol=1e-5, atol=1e-6 * scale * 36)
    assert float(got[0][2]) == float(got[1][2]) == 0.0 and float(got[2][3]) == 35.0


def test_a_reader_that_writes_nothing_has_v_effects_of_zero():
    """A later head whose ``W_O`` is 0 writes nothing at every position: every position is left out of its V
    effects, which are 0 (nothing changed), not 0/0; the other heads' V effects are those of the model unchanged."""
    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8), seed=4)
    t = tokens(n=4)
    want = intervention_effects(_runner(m), t, "V", progress=False)
    with torch.no_grad():
        m.blocks[1].W_O[1] = 0
    got = intervention_effects(_runner(m), t, "V", progress=False)
    for e, w in ((got.by_kind["V"], want.by_kind["V"]), (got.v_direction, want.v_direction)):
        assert e[0, :, 1, 1].tolist() == [0.0] * 3
        keep = torch.ones(3, dtype=torch.bool)
        keep[1] = False
        torch.testing.assert_close(e[0, :, 1, keep], w[0, :, 1, keep], rtol=0, atol=0)
    ref = interventional_composition(m, t, "V")["V"]  # the toy's own forward with the edits: the same zeros
    assert ref[0, :, 1, 1].tolist() == [0.0] * 3
    torch.testing.assert_close(ref, got.by_kind["V"], rtol=1e-4, atol=1e-6, equal_nan=True)


# ---------------------------------------------------------------- every path (paths='all')
@pytest.mark.parametrize("kw", [dict(norm="layernorm", mlp=True), dict(norm="rmsnorm", positions="rotary", mlp=True),
                                dict(norm="rmsnorm", positions="rotary", mlp=True, qk_norm=True, attn_out_norm=True)],
                         ids=["layernorm-mlp", "rms-rotary-mlp", "qk-norm-output-norm-mlp"])
@pytest.mark.parametrize("ablation", ["mean", "zero"])
@pytest.mark.parametrize("route", ["batched", "single"])
def test_every_path_equals_the_toy_forward_with_the_change_added(kw, ablation, route, monkeypatch):
    """paths='all', three layers with MLPs: one run per writer with its change added to the residual
    (compscope: a layer's three writers in one batched run, as on a GPU, or one run each) against the
    toy's own forward per pair (that run, then the reader's kind input edited by the residual
    change it made); from layer 0 into layer 2 it is not the direct path."""
    cfg = ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, **kw)
    m = ToyTransformer(cfg, seed=2)
    t = tokens()
    _route(monkeypatch, route)
    want = interventional_composition(m, t, "QKV", ablation, paths="all")
    got = intervention_effects(_runner(m), t, "QKV", ablation, progress=False, paths="all")
    assert got.paths == "all"
    for kind in "QKV":
        torch.testing.assert_close(got.by_kind[kind], want[kind], atol=1e-5, rtol=1e-4, equal_nan=True)
    direct = intervention_effects(_runner(m), t, "K", ablation, progress=False).by_kind["K"]
    assert float((got.by_kind["K"][0, :, 2] - direct[0, :, 2]).abs().max()) > 1e-3


def test_every_path_is_the_direct_path_in_two_attention_only_layers():
    """The default model (two attention-only layers): a layer-0 head reaches layer 1 only directly."""
    from compscope.data.sequences import repeats

    runner = runner_for("induction-2l", progress=False)
    t = repeats(6, 8, runner.hw.n_vocab, 1, runner.bos).tokens
    direct = intervention_effects(runner, t, progress=False)
    every = intervention_effects(runner, t, progress=False, paths="all")
    for kind in "QKV":
        assert float(direct.by_kind[kind][0].nan_to_num().max()) > 1e-3
        torch.testing.assert_close(every.by_kind[kind], direct.by_kind[kind], atol=1e-6, rtol=1e-5, equal_nan=True)


#: where a family keeps its heads' outputs side by side: the input of the attention's output projection
OUTPUT_PROJECTIONS = {"gpt2": "attn.c_proj", "neox-partial-rotary-parallel": "attention.dense",
                      "gemma4-widths-k-eq-v-scalars": "self_attn.o_proj",
                      "qwen3.5-gated-attention-deltanet": "self_attn.o_proj",
                      "llama-gqa-bias": "self_attn.o_proj", "gemma3-text": "self_attn.o_proj",
                      "qwen3-qk-norm": "self_attn.o_proj", "falcon-mqa-parallel": "self_attention.dense",
                      "opt": "self_attn.out_proj", "bert": "attention.output.dense",
                      "mistral-sliding3": "self_attn.o_proj", "phi3-fused-partial-rotary-sliding": "self_attn.o_proj",
                      "olmo-parameter-free-layernorm": "self_attn.o_proj", "olmo2-layer-qk-norm": "self_attn.o_proj",
                      "phi-partial-rotary-qk-layernorm": "self_attn.dense", "stablelm-partial-rotary-parallel": "self_attn.o_proj",
                      "starcoder2-bias-sliding3": "self_attn.o_proj", "falcon-per-head-sequential": "self_attention.dense",
                      "gptj-interleaved-rotary": "attn.out_proj", "gemma": "self_attn.o_proj",
                      "gemma2-softcap": "self_attn.o_proj", "glm-interleaved-partial-rotary-gqa": "self_attn.o_proj",
                      "glm4-post-attention-norm": "self_attn.o_proj", "openai-gpt-post-ln": "attn.c_proj",
                      "modernbert-biases": "attn.Wo", "embeddinggemma-bidirectional": "self_attn.o_proj",
                      "eurobert-gqa-biases": "self_attn.o_proj", "esm2-rotary-token-dropout": "attention.output.dense",
                      "ultrabert-local-both-sides": "self_attn.o_proj", "xlm-post-ln": "out_lin"}


@pytest.mark.parametrize("route", ["default", "batched"])
@pytest.mark.parametrize("variant_id", list(OUTPUT_PROJECTIONS))
def test_every_path_equals_the_model_run_with_the_head_ablated_inside_it(variant_id, route, monkeypatch):
    """paths='all' on tiny models of every family, three layers: the writer's output mean-ablated
    where the model itself keeps it (its slice of the output projection's input) and the model run
    on; the reader's kind input read from that run's residual, its layer recomputed in full.
    Against compscope's δ added to what the writer's layer writes (one run per writer on the CPU,
    or a layer's writers in one run as on a GPU), every pair and kind."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build, random_ids

    import compscope
    from compscope.data.runner import transformers_at_least

    if "qwen3.5" in variant_id and transformers_at_least(5) and not transformers_at_least(5, 13):
        pytest.skip("transformers 5 before 5.13 fails in its cache on a Qwen3.5 without linear-attention layers")
    layers = {"gpt2": "n_layer", "gptj-interleaved-rotary": "n_layer", "openai-gpt-post-ln": "n_layer",
              "xlm-post-ln": "n_layers"}.get(
        variant_id, "num_hidden_layers")
    more = ({"layer_types": ["sliding_attention", "full_attention", "full_attention"]} if "gemma4" in variant_id
            else {"layer_types": ["full_attention"] * 3} if "qwen3.5" in variant_id else {})  # (gated heads: all attend)
    model = build(BY_ID[variant_id], **{layers: 3}, **more)
    runner = runner_for(model, compscope.load(model))
    hw = runner.hw
    t = random_ids(batch=3)
    _route(monkeypatch, route)
    got = intervention_effects(runner, t, "QKV", "mean", progress=False, paths="all")
    projections = [m for n, m in model.named_modules() if n.endswith("." + OUTPUT_PROJECTIONS[variant_id])]
    assert len(projections) == hw.n_layers == 3
    seen = {}
    handles = [p.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0].detach()))
               for i, p in enumerate(projections)]
    clean = runner.trace(t)
    for h in handles:
        h.remove()
    for l1 in range(2):
        # the layer's own head width (Gemma 4's differ; GPT-2's Conv1D has no in_features)
        r = getattr(projections[l1], "in_features", hw.n_heads * hw.d_head) // hw.n_heads
        mean = seen[l1].mean(0, keepdim=True)
        for h1 in range(hw.n_heads):
            def ablate(m, a, cut=slice(h1 * r, (h1 + 1) * r)):
                z = a[0].clone()
                z[..., cut] = mean[..., cut]
                return (z, *a[1:])

            handle = projections[l1].register_forward_pre_hook(ablate)
            ablated = runner.trace(t)
            handle.remove()
            for l2 in range(l1 + 1, 3):
                for kind in "QKV":
                    want, turn = _reader_effect(hw, l2, clean.resid[l2], ablated.resid[l2], kind)
                    torch.testing.assert_close(got.by_kind[kind][l1, h1, l2], want, atol=1e-5, rtol=1e-4)
                    if turn is not None:
                        torch.testing.assert_close(got.v_direction[l1, h1, l2], turn, atol=1e-5, rtol=1e-4)
    assert float(got.by_kind["K"][0, :, 2].max()) > 1e-3


def test_trace_add_is_checked():
    runner = runner_for("induction-2l", progress=False)
    t = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(OptionError, match="not a layer"):
        runner.trace(t, add={7: torch.zeros(2, 5, runner.hw.d_model)})
    with pytest.raises(OptionError, match=r"add\[0\]: expected a \(batch, seq, d_model\)"):
        runner.trace(t, add={0: torch.zeros(2, 4, runner.hw.d_model)})
    with pytest.raises(OptionError, match="paths='some'"):
        intervention_effects(runner, t, paths="some")
    m = toy()  # the toy model's own forward checks its adds too
    with pytest.raises(OptionError, match="adds: keys are layers < 2"):
        m(tokens(), adds={2: torch.zeros(6, 8, 12, dtype=torch.float64)})
    with pytest.raises(OptionError, match=r"got 0: \(6, 7, 12\)"):
        m(tokens(), adds={0: torch.zeros(6, 7, 12, dtype=torch.float64)})


@pytest.mark.parametrize("kw", [dict(norm="layernorm"), dict(norm="rmsnorm", positions="rotary", qk_norm=True,
                                                             attn_out_norm=True)], ids=["layernorm", "gemma-norms"])
@pytest.mark.parametrize("paths", ["direct", "all"])
def test_chosen_writers_get_the_effects_of_the_whole_run_and_the_rest_none(kw, paths):
    """Intervening on some writers gives their rows exactly as intervening on all does (the mean is
    still over every sequence, the readers still every later head); the other rows are NaN."""
    cfg = ToyConfig(n_layers=4, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, **kw)
    r = _runner(ToyTransformer(cfg, seed=5))
    t = tokens(n=5)
    whole = intervention_effects(r, t, progress=False, paths=paths)
    some = intervention_effects(r, t, progress=False, paths=paths, writers=[(2, 1), 0, (0, 2)])
    assert whole.writers is None and some.writers == ((0, 0), (0, 1), (0, 2), (2, 1))  # sorted, once each
    chosen = torch.zeros(4, 3, dtype=torch.bool)
    chosen[0] = True
    chosen[2, 1] = True
    for kind in "QKV":
        got, want = some.by_kind[kind], whole.by_kind[kind]
        torch.testing.assert_close(got[chosen], want[chosen], rtol=0, atol=0, equal_nan=True)
        assert got[~chosen].isnan().all()
    torch.testing.assert_close(some.v_direction[chosen], whole.v_direction[chosen], rtol=0, atol=0, equal_nan=True)
    assert "4 writers" in repr(some)
    assert f"mean-ablation, {paths} path{'s' if paths == 'all' else ''}, 4 writers, 5 sequences" in repr(some)


@pytest.mark.parametrize("factored", [True, False], ids=["factored", "plain"])
def test_the_kinds_in_any_order_give_the_same_effects(monkeypatch, factored):
    """``kinds`` in any order (V first, repeated) gives each kind's effects of ``'QKV'``, exactly, on either route."""
    from compscope.data import intervene

    monkeypatch.setattr(intervene, "FACTORED", factored)
    r = _runner(ToyTransformer(ToyConfig(n_layers=3, n_heads=2, d_model=12, d_head=4, d_vocab=10, n_ctx=8), seed=2))
    t = tokens(n=4)
    want = intervention_effects(r, t, "QKV", progress=False)
    for kinds in ("VKQ", "VQ", "KVVQ"):
        got = intervention_effects(r, t, kinds, progress=False)
        assert list(got.by_kind) == list(dict.fromkeys(kinds))
        for kind in got.by_kind:
            torch.testing.assert_close(got.by_kind[kind], want.by_kind[kind], rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(got.v_direction, want.v_direction, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("ablation", ["mean", "zero"])
@pytest.mark.parametrize("writers", [None, [(2, 1), (0, 2)]])
def test_the_interventions_count_each_batch_and_writer_on_one_bar(bars, ablation, writers):
    """One bar, on by default: per batch of sequences, one step per writer intervened on, and with
    mean-ablation one more per batch for the pass that takes the means; full at the end, off when asked.
    The effects' repr gives the layers and heads of the model (4 x 3 here), the ablation and the data."""
    r = _runner(ToyTransformer(ToyConfig(n_layers=4, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8), seed=5))
    got = intervention_effects(r, tokens(n=5), "K", ablation, batch_size=2, writers=writers)  # 3 batches
    n_writers = 9 if writers is None else 2  # every head but the last layer's, or the two named
    want = 3 * (n_writers + (ablation == "mean"))
    assert [(b.desc, b.total, b.n, b.enabled) for b in bars] == [("interventions", want, want, True)]
    assert repr(got).startswith(f"Effects(4 layers x 3 heads; {ablation}-ablation, direct path"
                                f"{'' if writers is None else ', 2 writers'}, 5 sequences of 8 tokens; strongest K ")
    del bars[:]
    intervention_effects(r, tokens(n=5), "K", ablation, batch_size=2, writers=writers, progress=False)
    assert len(bars) == 1 and not bars[0].enabled


def test_the_effects_repr_names_each_kinds_one_strongest_pair():
    """Effects written by hand: the repr names, per kind in order, the one largest finite effect as
    ``writer layer.head->reader layer.head`` with three significant figures, and the data it came from."""
    from compscope.data.intervene import Effects

    nan = float("nan")
    k, v = torch.full((3, 2, 3, 2), nan, dtype=torch.float64), torch.full((3, 2, 3, 2), nan, dtype=torch.float64)
    k[0, 1, 2, 0], k[1, 0, 2, 1], k[0, 0, 1, 1] = 0.25, 0.123456, 0.2
    v[1, 1, 2, 0], v[0, 0, 2, 1] = 0.5, 0.75
    e = Effects({"K": k, "V": v}, v.clone(), "zero", 7, 9, "all", ((0, 0), (0, 1), (1, 0), (1, 1)))
    assert repr(e) == ("Effects(3 layers x 2 heads; zero-ablation, all paths, 4 writers, 7 sequences of 9 tokens; "
                       "strongest K 0.1->2.0 0.25; strongest V 0.0->2.1 0.75)")
    one = Effects({"Q": k}, None, "mean", 2, 5, writers=((1, 0),))
    assert repr(one) == ("Effects(3 layers x 2 heads; mean-ablation, direct path, 1 writer, 2 sequences of 5 tokens; "
                         "strongest Q 0.1->2.0 0.25)")


def test_against_measures_shows_no_bar_unless_asked(bars):
    against_measures("induction-2l", "K", sequences=2, half=4)
    assert bars and not any(b.enabled for b in bars)
    del bars[:]
    against_measures("induction-2l", "K", sequences=2, half=4, progress=True)
    shown = [(b.desc, b.total, b.n, b.enabled) for b in bars]
    assert ("interventions", 5, 5, True) in shown  # layer 0: 4 writers, and the means


def test_writers_in_words_name_the_first_eight_and_count_them_all():
    from compscope.data.intervene import head_names, writers_text

    heads = [(l, h) for l in range(3) for h in range(4)]  # 12
    assert head_names(heads[:8]) == "0.0 0.1 0.2 0.3 1.0 1.1 1.2 1.3"  # all eight: no dots
    assert head_names(heads[:9]) == "0.0 0.1 0.2 0.3 1.0 1.1 1.2 1.3 ..."
    assert head_names(heads, most=2) == "0.0 0.1 ..." and head_names([]) == ""
    assert writers_text(heads) == "writers 0.0 0.1 0.2 0.3 1.0 1.1 1.2 1.3 ... (12 heads)"
    assert writers_text(heads[:1], "; x") == "writers 0.0 (1 head; x)" and writers_text(heads[:2]).endswith("(2 heads)")


def test_writers_are_checked_against_the_model():
    from compscope.data.intervene import writer_heads

    assert writer_heads(None, 3, 2) is None
    assert writer_heads([1, (0, 1), (0, 1)], 3, 2) == ((0, 1), (1, 0), (1, 1))
    assert writer_heads([(0, 0), (1, 1)], 3, 2) == ((0, 0), (1, 1))  # the first and the last head there are
    import numpy as np

    assert writer_heads([np.int64(1), (np.int64(0), 1)], 3, 2) == ((0, 1), (1, 0), (1, 1))
    assert all(type(x) is int for pair in writer_heads([np.int64(1)], 3, 2) for x in pair)
    r = _runner(toy())
    t = tokens()
    for bad, match in [([(5, 0)], "writer layer 5: .* has layers 0-1"), ([(0, 7)], "writer 0.7: .* heads 0-2"),
                       ([(2, 0)], "writer layer 2: .* has layers 0-1"), ([(0, 3)], "writer 0.3: .* heads 0-2"),
                       ([(-1, 0)], "writer layer -1: .* has layers 0-1"), ([(0, -1)], "writer 0.-1: .* heads 0-2"),
                       ([(5, 7)], "writer layer 5: .* has layers 0-1"),  # the layer first: no head 7 in no layer
                       ([1], "writer layer 1: the last layer"), (["0.1"], "writer '0.1': expected"),
                       ([True], "writer True"), ([], "none given"), ("0.1", "writers='0.1'"),
                       ([(0, 1.5)], r"writer \(0, 1.5\): expected"), ([(True, 0)], r"writer \(True, 0\): expected"),
                       ([(0, 1, 2)], r"writer \(0, 1, 2\): expected"), ([[0]], r"writer \[0\]: expected")]:
        with pytest.raises(OptionError, match=match):
            intervention_effects(r, t, writers=bad, progress=False)


def test_cli_intervenes_on_the_writers_named(capsys):
    from compscope.cli.common import writers

    assert writers("16.0,11.1, 2-4,7") == [(16, 0), (11, 1), 2, 3, 4, 7]
    for bad in ("a.b", "1.2.3", "", "-1"):
        with pytest.raises(Exception, match="expected LAYER.HEAD"):
            writers(bad)
    with pytest.raises(Exception, match=r"'4-2': a range of layers runs from the lower to the higher \(2-4\)"):
        writers("4-2")
    main(["intervene", "--writers", "0.1", "--kinds", "K", "--sequences", "4", "--half", "8"])
    out = capsys.readouterr().out
    assert "writers 0.1 (1 head)" in out and "over 4 pairs" in out  # 0.1 into the four heads of layer 1


def test_cli_writes_every_effect_to_the_table_named(capsys, tmp_path):
    """``intervene --out``: every pair and kind, one row each, whose strongest rows are the pairs and values printed;
    a file name other than .csv or .parquet is refused before the model runs."""
    pd = pytest.importorskip("pandas")
    out = tmp_path / "effects.parquet"
    assert main(["intervene", "--kinds", "KV", "--sequences", "4", "--half", "8", "--top", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed
    df = pd.read_parquet(out)
    assert sorted(df.kind.unique()) == ["K", "V"] and len(df) == 2 * 4 * 4  # induction-2l: 4 writers x 4 later heads
    for kind in "KV":
        top = df[df.kind == kind].sort_values("effect", ascending=False).head(2)
        shown = "   ".join(f"{r.src_layer}.{r.src_head}->{r.dst_layer}.{r.dst_head} {r.effect:.3f}"
                           for r in top.itertuples())
        assert f"{kind}  strongest effects: {shown}" in printed, kind
    assert df[df.kind == "V"].effect_direction.notna().all() and df[df.kind == "K"].effect_direction.isna().all()
    assert main(["intervene", "--sequences", "4", "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr()
    assert "--out" in err.err and ".csv or .parquet" in err.err and err.out == ""


def test_effects_as_a_table_have_one_row_per_pair_and_kind(tmp_path):
    """``Effects.to_pandas``: one row per finite (writer, later head) pair and kind, the values where they stand in
    the tensors (built by hand here), V's direction-sensitive effect beside V's, the run's settings in ``attrs``; and
    ``save`` writes it as .csv or .parquet, read back the same."""
    import numpy as np

    from compscope.data.intervene import Effects

    pd = pytest.importorskip("pandas")
    nan = float("nan")
    k = torch.full((2, 2, 2, 2), nan, dtype=torch.float64)
    k[0, 0, 1, 0], k[0, 0, 1, 1], k[0, 1, 1, 0], k[0, 1, 1, 1] = 0.5, -0.25, 0.0, 2.0
    v, direction = k * 3, k.abs() + 1
    fx = Effects({"K": k, "V": v}, direction, "zero", 4, 17, "all", ((0, 0), (0, 1)))
    df = fx.to_pandas()
    assert list(df.columns) == ["kind", "src_layer", "src_head", "dst_layer", "dst_head", "effect", "effect_direction"]
    got = {(r.kind, r.src_layer, r.src_head, r.dst_layer, r.dst_head): (r.effect, r.effect_direction)
           for r in df.itertuples()}
    pairs = {(0, 0, 1, 0): 0.5, (0, 0, 1, 1): -0.25, (0, 1, 1, 0): 0.0, (0, 1, 1, 1): 2.0}
    assert len(df) == 8 and {key: e for key, (e, _) in got.items()} == {
        **{("K", *p): e for p, e in pairs.items()}, **{("V", *p): 3 * e for p, e in pairs.items()}}
    assert all(np.isnan(d) for (kind, *_), (_, d) in got.items() if kind == "K")
    assert {key[1:]: d for key, (_, d) in got.items() if key[0] == "V"} == {p: abs(e) + 1 for p, e in pairs.items()}
    assert df.attrs == {"ablation": "zero", "sequences": 4, "seq_len": 17, "paths": "all", "writers": [[0, 0], [0, 1]]}
    for name in ("e.csv", "e.parquet"):
        path = fx.save(tmp_path / name)
        back = pd.read_csv(path) if name.endswith(".csv") else pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, df, check_dtype=False)
    every = Effects({"Q": k}, None, "mean", 3, 5).to_pandas()  # no V, every writer: no direction column, writers None
    assert list(every.columns) == ["kind", "src_layer", "src_head", "dst_layer", "dst_head", "effect"]
    assert every.effect.tolist() == list(pairs.values()) and set(every.kind) == {"Q"}
    assert every.attrs == {"ablation": "mean", "sequences": 3, "seq_len": 5, "paths": "direct", "writers": None}


@pytest.mark.parametrize(("d_model", "d_head", "rank"), [(12, 4, 4), (12, 4, 2), (3, 5, 3), (8, 8, 8)])
def test_output_frames_keep_every_norm_of_what_a_head_writes(d_model, d_head, rank):
    """``R`` of :func:`output_frames` (``W_O = U R``): for outputs ``z`` and ``z'``, ``‖R z‖``,
    ``‖R z' − R z‖`` and ``⟨R Δz, R z⟩`` equal those of ``W_O z`` in ``d_model`` coordinates
    (dense float64), for heads of full rank, of lower rank and wider than the residual; so the V
    effects read in those coordinates are the ones of the definition."""
    from types import SimpleNamespace

    from compscope.core.attention import head_outputs
    from compscope.data.intervene import _v_sums, compact_outputs, output_frames

    g = torch.Generator().manual_seed(d_model * 100 + d_head * 10 + rank)
    H = 3
    w = (torch.randn(H, d_model, rank, generator=g, dtype=torch.float64)
         @ torch.randn(H, rank, d_head, generator=g, dtype=torch.float64))  # (head, d_model, d_head) of rank `rank`
    hw = SimpleNamespace(W_O=[w])
    (frame,) = output_frames(hw)
    assert frame.shape == (H, min(d_model, d_head), d_head) and frame.dtype == torch.float64
    pattern = torch.rand(2, H, 5, 5, generator=g, dtype=torch.float64).softmax(-1)
    v, v2 = (torch.randn(2, H, 5, d_head, generator=g, dtype=torch.float64) for _ in range(2))
    full = [head_outputs(hw, 0, pattern, x) for x in (v, v2)]
    small = [compact_outputs(frame, pattern @ x) for x in (v, v2)]
    torch.testing.assert_close(small[0].norm(dim=-1), full[0].norm(dim=-1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close((small[1] - small[0]).norm(dim=-1), (full[1] - full[0]).norm(dim=-1), rtol=1e-12, atol=1e-12)
    for a, b in zip(_v_sums(small[0], small[1]), _v_sums(full[0], full[1])):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ablation", ["mean", "zero"])
@pytest.mark.parametrize("variant_id", ["gpt2", "llama-gqa-bias", "qwen3-qk-norm", "olmo2-layer-qk-norm", "gemma",
                                        "olmo-parameter-free-layernorm", "phi-partial-rotary-qk-layernorm",
                                        "gptj-interleaved-rotary", "gemma3-text", "falcon-mqa-parallel"])
def test_the_direct_path_in_the_writers_coordinates_gives_the_plain_routes_effects(variant_id, ablation, monkeypatch):
    """``compscope.data.factored_path`` (pre-norms of every kind: LayerNorm with biases, RMSNorm,
    Gemma's 1 + w, parameter-free; QK-norm per head; rotary in halves, partial and interleaved;
    GQA/MQA) against the residual changed, normed and projected, for both ablations (Gemma 3 and
    OLMo 2, whose attention outputs are normed, take the plain route either way, and so does a
    model on a GPU); the plain route with a writer layer's heads batched and one writer at a time."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build, random_ids

    import compscope
    from compscope.data import intervene

    model = build(BY_ID[variant_id])
    runner = runner_for(model, compscope.load(model))
    t = random_ids(batch=3)
    hw = runner.weights_here()
    assert intervene.factored_route(hw, "direct", None, runner.device) == (variant_id not in ("gemma3-text", "olmo2-layer-qk-norm"))
    assert not intervene.factored_route(hw, "direct", None, torch.device("cuda"))  # a GPU takes the plain route
    got = intervention_effects(runner, t, "QKV", ablation, progress=False)
    for route in ("batched", "single"):  # the plain route: a writer layer's heads at once, and one by one
        _route(monkeypatch, route)
        assert not intervene.factored_route(hw, "direct", None, runner.device)
        want = intervention_effects(runner, t, "QKV", ablation, progress=False)
        for kind in "QKV":
            torch.testing.assert_close(got.by_kind[kind], want.by_kind[kind], atol=1e-6, rtol=1e-5, equal_nan=True)
        torch.testing.assert_close(got.v_direction, want.v_direction, atol=1e-6, rtol=1e-5, equal_nan=True)


def test_the_writers_coordinates_apply_to_a_pre_norms_direct_path_alone():
    """:func:`factored_path.applies`: a pre-norm model's direct path, and not every path, a post-LN MLP
    read in between, an attention-output norm (Gemma 3), post-LN (BERT), or a latent's norm on
    the queries and keys or on the keys alone (DeepSeek-V3)."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    import compscope
    from compscope.data import factored_path

    ids = ("llama-mha", "gemma3-text", "bert", "deepseek-v3-latent-attention", "deepseek-v3-no-query-latent-yarn-bias")
    hw = {v: compscope.load(build(BY_ID[v])) for v in ids}
    assert factored_path.applies(hw["llama-mha"], "direct", None)
    assert not factored_path.applies(hw["llama-mha"], "all", None)
    assert not factored_path.applies(hw["llama-mha"], "direct", [torch.zeros(1)])
    assert hw["gemma3-text"].attn_out_norm is not None and not factored_path.applies(hw["gemma3-text"], "direct", None)
    assert hw["bert"].norm_placement == "post" and not factored_path.applies(hw["bert"], "direct", None)
    both, keys = hw["deepseek-v3-latent-attention"], hw["deepseek-v3-no-query-latent-yarn-bias"]
    assert both.q_latent is not None and both.kv_latent is not None and not factored_path.applies(both, "direct", None)
    assert keys.q_latent is None and keys.kv_latent is not None and not factored_path.applies(keys, "direct", None)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_a_writer_that_nearly_cancels_the_residual_takes_the_plain_route(norm):
    """Where ``r + W_O u`` is almost 0, ``σ'²`` from ``σ²`` and the cross terms would lose digits:
    that later layer takes the plain route (asked for by ``plain``); elsewhere the factored reads
    equal the plain ones (the norm's float32)."""
    from compscope.core.attention import project
    from compscope.data import factored_path

    cfg = ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm=norm, positions="rotary")
    hw = ToyTransformer(cfg, seed=0).double().head_weights()
    g = torch.Generator().manual_seed(0)
    u = torch.randn(2, 8, hw.d_head, generator=g, dtype=hw.W_O.dtype)
    delta = torch.einsum("dr,bsr->bsd", hw.W_O[0][1], u)
    resid = [torch.randn(2, 8, hw.d_model, generator=g, dtype=hw.W_O.dtype) for _ in range(3)]
    resid[2] = -delta + 1e-4 * torch.randn(2, 8, hw.d_model, generator=g, dtype=hw.W_O.dtype)
    asked = []

    def plain(l2):
        asked.append(l2)
        return {k: project(hw, l2, k, read_input(hw, l2, resid[l2] + delta)) for k in "QKV"}

    R = factored_path.readers(hw, resid, "QKV")
    reads = dict(factored_path.changed_reads(hw, R, 0, 1, u, "QKV", plain))
    assert asked == [2] and sorted(reads) == [1, 2]
    for k in "QKV":
        torch.testing.assert_close(reads[1][k], project(hw, 1, k, read_input(hw, 1, resid[1] + delta)),
                                   atol=1e-5, rtol=1e-4)  # the norms normalise in float32


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_effects_where_a_writer_nearly_cancels_the_residual_are_the_plain_routes(norm, monkeypatch):
    """A toy whose layer-1 residual is almost all head 0.1's output (embeddings 1e-3 of their size, the
    other layer-0 heads writing nothing): zero-ablating 0.1 leaves almost nothing of it, so the factored
    route reads that layer by the plain one, and the effects equal those of the plain route throughout."""
    from compscope.data import intervene

    m = ToyTransformer(ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm=norm), seed=2)
    with torch.no_grad():
        m.W_E.mul_(1e-3), m.W_pos.mul_(1e-3)
        m.blocks[0].W_O[[0, 2]] = 0
    r, t = _runner(m), tokens()
    assert intervene.factored_route(r.weights_here(), "direct", None, r.device)
    asked = []
    real = intervene.factored.changed_reads

    def counted(hw, R, l1, h1, u, kinds, plain):
        return real(hw, R, l1, h1, u, kinds, lambda l2: asked.append((l1, h1, l2)) or plain(l2))

    monkeypatch.setattr(intervene.factored, "changed_reads", counted)
    got = intervention_effects(r, t, "QKV", "zero", progress=False)
    assert (0, 1, 1) in asked and (0, 0, 1) not in asked
    _route(monkeypatch, "single")
    want = intervention_effects(r, t, "QKV", "zero", progress=False)
    for kind in "QKV":
        assert got.by_kind[kind][0, 1, 1].max() > 0.05, kind  # (taking 0.1 out changes what layer 1 reads)
        torch.testing.assert_close(got.by_kind[kind], want.by_kind[kind], atol=1e-6, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("scale, ratio, plain_route", [(30.0, 1e-3, True), (0.1, 0.1, False)])
def test_the_plain_route_is_taken_by_the_share_of_the_residual_left_whatever_its_size(norm, scale, ratio, plain_route):
    """The route turns on ``σ'² / σ²`` against :data:`CANCELLATION` (1e-2), not on ``σ²`` itself: a large residual
    with a thousandth of it left after ``δ`` takes the plain route; a small one with a tenth left, the factored one,
    whose reads equal the plain route's."""
    from compscope.core.attention import project
    from compscope.data import factored_path

    assert factored_path.CANCELLATION == 1e-2
    cfg = ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm=norm, positions="rotary")
    hw = ToyTransformer(cfg, seed=0).double().head_weights()
    g = torch.Generator().manual_seed(1)
    u = scale * torch.randn(2, 8, hw.d_head, generator=g, dtype=hw.W_O.dtype)
    delta = torch.einsum("dr,bsr->bsd", hw.W_O[0][1], u)
    centre = (lambda t: t - t.mean(-1, keepdim=True)) if norm == "layernorm" else (lambda t: t)
    e = torch.randn(2, 8, hw.d_model, generator=g, dtype=hw.W_O.dtype)  # what is left: ratio^½ of δ's size
    e = e * (ratio * centre(delta).pow(2).sum(-1, keepdim=True) / centre(e).pow(2).sum(-1, keepdim=True)).sqrt()
    resid = [torch.randn(2, 8, hw.d_model, generator=g, dtype=hw.W_O.dtype) for _ in range(2)] + [e - delta]
    asked = []

    def plain(l2):
        asked.append(l2)
        return {k: project(hw, l2, k, read_input(hw, l2, resid[l2] + delta)) for k in "QKV"}

    reads = dict(factored_path.changed_reads(hw, factored_path.readers(hw, resid, "QKV"), 0, 1, u, "QKV", plain))
    assert asked == ([2] if plain_route else [])
    for k in "QKV":
        torch.testing.assert_close(reads[2][k], project(hw, 2, k, read_input(hw, 2, e)), atol=1e-5, rtol=1e-4)


def test_writers_per_batch_fit_the_budget(monkeypatch):
    """At least one writer; the budget over a writer's bytes (on a SmolLM2-shaped model's 16 × 65
    tokens: 9 heads' patterns of 65 × 65 per sequence, eight float32 copies and the reads, ~31 MB a writer);
    longer sequences fit fewer; by default the CPU takes one writer at a time."""
    from types import SimpleNamespace

    from compscope.data import intervene

    hw = SimpleNamespace(n_heads=9, d_model=576, d_head=64)
    one = intervene.writer_bytes(hw, (16, 65))
    entries = 16 * 9 * 65 * 65  # a later layer's pattern entries on the batch
    assert 8 * 4 * entries < one < 16 * 4 * entries  # eight float32 copies of them, and the reads
    cpu = torch.device("cpu")
    assert intervene.writers_per_batch(hw, (16, 65), cpu) == 1
    assert intervene.writers_per_batch(hw, (16, 65), cpu, "all") == 1
    for budget, want in ((0, 1), (-5, 1), (one - 1, 1), (3 * one, 3), (3 * one + one - 1, 3), (3.5 * one, 3)):
        monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", budget)
        assert intervene.writers_per_batch(hw, (16, 65), cpu) == want
    monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", 2**28)
    assert intervene.writers_per_batch(hw, (16, 257), cpu) < intervene.writers_per_batch(hw, (16, 65), cpu)
    # an attention-output norm: each writer also holds a copy of the layer's head outputs (float32)
    normed = SimpleNamespace(n_heads=9, d_model=576, d_head=64, attn_out_norm=object())
    assert intervene.writer_bytes(normed, (16, 65)) == one + 16 * 65 * 9 * 576 * 4


def test_writers_per_batch_on_a_gpu_read_the_free_memory_that_counts_torchs_cache(monkeypatch):
    """On a GPU by default: 2 GiB or a quarter of what ``free_memory`` says is free (the device's own
    free memory and what torch holds cached), whichever is less, over a writer's bytes. No GPU is
    touched: ``free_memory`` is stubbed, so this holds here as on a GPU (tests/test_device.py runs it there)."""
    from types import SimpleNamespace

    from compscope.core import memory
    from compscope.data import intervene

    hw = SimpleNamespace(n_heads=9, d_model=576, d_head=64)
    one = intervene.writer_bytes(hw, (16, 65))
    gpu = torch.device("cuda", 0)
    asked = []
    for free, want in ((4 * 5 * one + 3, 5), (4 * one - 1, 1), (0, 1), (64 * 2**30, 2**31 // one)):
        monkeypatch.setattr(memory, "free_memory", lambda device, free=free: asked.append(device) or free)
        assert intervene.writers_per_batch(hw, (16, 65), gpu) == want
    assert asked == [gpu] * 4


def test_the_route_follows_the_device_the_norms_and_the_paths(monkeypatch):
    """:func:`intervene.route`: factored on the CPU where the direct path is a pre-norm's sum; else
    the plain route with a writer layer's heads in batches (a GPU, ``FACTORED`` off, a post-LN
    model's direct path, every path), its group never more than a layer's heads, and smaller on
    every path, where each writer also holds a changed forward pass."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    import compscope
    from compscope.data import intervene

    hw = compscope.load(build(BY_ID["llama-mha"]))
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert intervene.route(hw, (3, 9), cpu) == intervene.Route("factored")
    monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", 2**40)  # room for any number of writers
    assert intervene.route(hw, (3, 9), gpu) == intervene.Route("plain", hw.n_heads)
    one = intervene.writer_bytes(hw, (3, 9))
    assert intervene.writer_bytes(hw, (3, 9), "all") == one + 3 * 9 * 4 * (2 * hw.n_layers + 4) * hw.d_model
    monkeypatch.setattr(intervene, "WRITER_BATCH_BYTES", 2 * one)
    assert intervene.route(hw, (3, 9), gpu) == intervene.Route("plain", 2)
    assert str(intervene.route(hw, (3, 9), gpu)) == "plain (writers in batches of up to 2)"
    assert intervene.route(hw, (3, 9), cpu, post_ln_mlp=[torch.zeros(1)]) == intervene.Route("plain", 2)
    assert intervene.route(hw, (3, 9), cpu, paths="all") == intervene.Route("plain", 1)  # 2 * one fits one changed run
    monkeypatch.setattr(intervene, "FACTORED", False)
    assert intervene.route(hw, (3, 9), cpu) == intervene.Route("plain", 2)
