"""Toy models: forward vs the HeadWeights reference, hooks, storage, data, training, tracking."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compscope
from compscope.core.attention import attention_forward, attention_pattern_and_values
from compscope.errors import LoadError, OptionError, WeightError
from compscope.data.head_labels import induction_scores, label_heads, previous_token_scores
from compscope.toy import (
    PRESETS, DataConfig, InductionData, ToyConfig, ToyTransformer, checkpoint_steps, load_toy, read_log,
    repeated_random, save_toy, train,
)
from compscope.toy.data import bigram_chain
from toy_tiny import perturbed_toy

VARIANTS = [
    ToyConfig(),
    ToyConfig(n_layers=3, n_heads=2, d_model=24, d_head=6, d_vocab=20, n_ctx=12, positions="rotary", norm="layernorm"),
    ToyConfig(n_layers=1, n_heads=3, d_model=16, d_head=4, d_vocab=11, n_ctx=9, norm="rmsnorm", tied=True),
    ToyConfig(n_layers=4, n_heads=2, d_model=16, d_head=8, d_vocab=13, n_ctx=10, positions="rotary", norm="rmsnorm"),
    # Gemma 3's norms inside the circuits: QK-norm and an attention-output norm
    ToyConfig(n_layers=3, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, positions="rotary", norm="rmsnorm",
              qk_norm=True, attn_out_norm=True),
    ToyConfig(n_layers=2, n_heads=2, d_model=12, d_head=6, d_vocab=10, n_ctx=8, norm="layernorm", qk_norm=True),
]


def _id(c: ToyConfig) -> str:
    return (f"{c.n_layers}L-{c.positions}-{c.norm}-tied{c.tied}-mlp{c.mlp}"
            + "-qknorm" * c.qk_norm + "-outnorm" * c.attn_out_norm)


def _cached_run(cfg: ToyConfig, seed: int = 0, tokens_seed: int = 1):
    """A perturbed toy, two random sequences of full length, and the cache of one forward pass."""
    m = perturbed_toy(cfg, seed)
    tokens = torch.randint(cfg.d_vocab, (2, cfg.n_ctx), generator=torch.Generator().manual_seed(tokens_seed))
    cache: dict = {}
    with torch.no_grad():
        m(tokens, cache=cache)
    return m, tokens, cache


@pytest.mark.parametrize("cfg", VARIANTS, ids=_id)
def test_forward_matches_headweights_reference(cfg):
    """The toy's own forward == the residual stream rebuilt from its HeadWeights with
    compscope.core.attention (an independent implementation: other rotary code, other layout)."""
    m = perturbed_toy(cfg)
    tokens = torch.randint(cfg.d_vocab, (3, cfg.n_ctx), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        logits = m(tokens)
    hw = m.head_weights()
    resid = hw.W_E.T[tokens]
    if hw.W_pos is not None:
        resid = resid + hw.W_pos.T[: cfg.n_ctx]
    for layer in range(hw.n_layers):
        resid = resid + attention_forward(hw, layer, resid)
    if hw.final_norm is not None:
        resid = hw.final_norm.apply(resid, 0)
    torch.testing.assert_close(logits, resid @ hw.W_U.T, rtol=1e-4, atol=1e-4)


def test_cache_holds_patterns_and_head_outputs():
    cfg = VARIANTS[1]
    m, tokens, cache = _cached_run(cfg)
    hw = m.head_weights()
    for layer in range(cfg.n_layers):
        pattern, _ = attention_pattern_and_values(hw, layer, cache[f"resid_pre.{layer}"])
        torch.testing.assert_close(cache[f"pattern.{layer}"], pattern, rtol=1e-4, atol=1e-5)
        nxt = cache[f"resid_pre.{layer + 1}"] if layer + 1 < cfg.n_layers else None
        if nxt is not None:
            torch.testing.assert_close(nxt, cache[f"resid_pre.{layer}"] + cache[f"attn_out.{layer}"])
        torch.testing.assert_close(cache[f"attn_out.{layer}"], cache[f"head_out.{layer}"].sum(2))  # no output norm
    assert torch.allclose(cache["pattern.0"].sum(-1), torch.ones(()))


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_edit_reaches_one_head_through_one_kind(kind):
    """Removing head 0.1's output from head 1.0's ``kind`` input: head 1.0's Q/K/V are those
    computed from ``resid - out_{0.1}`` for that kind and from the clean residual otherwise;
    every other head of layer 1 is untouched."""
    cfg = VARIANTS[1]
    m, tokens, clean = _cached_run(cfg, seed=3, tokens_seed=2)
    with torch.no_grad():
        delta = -clean["head_out.0"][:, :, 1]
        edited: dict = {}
        m(tokens, cache=edited, edits={(1, 0, kind): delta})
    torch.testing.assert_close(edited["pattern.1"][:, 1], clean["pattern.1"][:, 1])
    # hand computation of head 1.0 from the HeadWeights
    hw = m.head_weights()
    x_clean = hw.attn_norm.apply(clean["resid_pre.1"], 1)
    x_edit = hw.attn_norm.apply(clean["resid_pre.1"] + delta, 1)
    xs = {k: (x_edit if k == kind else x_clean) for k in "QKV"}
    q = xs["Q"] @ hw.W_Q[1, 0].T
    k = xs["K"] @ hw.W_K[1, 0].T
    v = xs["V"] @ hw.W_V[1, 0].T
    pos = torch.arange(cfg.n_ctx)
    q, k = hw.rotary.rotate(q, pos, 1), hw.rotary.rotate(k, pos, 1)
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.d_head)
    pattern = logits.masked_fill(~torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).tril(), -math.inf).softmax(-1)
    torch.testing.assert_close(edited["pattern.1"][:, 0], pattern, rtol=1e-4, atol=1e-5)
    out = (pattern @ v) @ hw.W_O[1, 0].T
    torch.testing.assert_close(edited["head_out.1"][:, :, 0], out, rtol=1e-4, atol=1e-5)
    changed = (edited["pattern.1"][:, 0] - clean["pattern.1"][:, 0]).abs().max()
    assert (changed > 1e-4) == (kind in "QK")


def test_zero_edit_changes_nothing_and_bad_edits_are_refused():
    cfg = VARIANTS[0]
    m = ToyTransformer(cfg)
    tokens = torch.randint(cfg.d_vocab, (2, 8))
    with torch.no_grad():
        a = m(tokens)
        b = m(tokens, edits={(1, 2, "V"): torch.zeros(2, 8, cfg.d_model)})
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(OptionError, match="keys are"):
        m(tokens, edits={(2, 0, "K"): torch.zeros(2, 8, cfg.d_model)})
    with pytest.raises(OptionError, match="keys are"):
        m(tokens, edits={(0, 0, "O"): torch.zeros(2, 8, cfg.d_model)})
    with pytest.raises(OptionError, match="delta has shape"):
        m(tokens, edits={(0, 0, "K"): torch.zeros(2, 7, cfg.d_model)})
    with pytest.raises(OptionError, match="n_ctx"):
        m(torch.zeros(1, cfg.n_ctx + 1, dtype=torch.long))


def test_token_ids_outside_the_vocabulary_or_not_ids_are_refused():
    """The toy's forward takes (batch, pos) integer ids in 0..d_vocab - 1: a negative id (which would index
    the embedding from its end), one past the vocabulary, float, bool or empty tokens are refused by name."""
    cfg = VARIANTS[0]
    m = ToyTransformer(cfg)
    tokens = torch.randint(cfg.d_vocab, (2, 8))
    edge = tokens.clone()
    edge[0, 0], edge[1, 7] = 0, cfg.d_vocab - 1
    assert m(edge).shape == (2, 8, cfg.d_vocab)
    ids = rf"token ids must lie in 0\.\.{cfg.d_vocab - 1} for this toy model \(d_vocab={cfg.d_vocab}\)"
    for bad, said in ((tokens - tokens[0, 0] - 1, ids), (tokens + cfg.d_vocab - tokens.max(), ids),
                      (tokens.float(), "integer token ids, got dtype float32"), (tokens > 0, "got dtype bool"),
                      (tokens[:, :0], r"non-empty \(batch, pos\) tensor, got shape \(2, 0\)"),
                      (tokens[0], r"non-empty \(batch, pos\) tensor, got shape \(8,\)")):
        with pytest.raises(OptionError, match=said):
            m(bad)


@pytest.mark.parametrize("cfg", [*VARIANTS, ToyConfig(mlp=True, d_mlp=40), ToyConfig(tied=True, mlp=True, n_layers=1)],
                         ids=lambda c: _id(c))
def test_matrix_entries_count_the_built_models_matrices(cfg):
    """The closed form counts what a built model holds in its parameters of two or more dimensions."""
    model = ToyTransformer(cfg)
    assert cfg.matrix_entries() == sum(p.numel() for p in model.parameters() if p.ndim >= 2)


def test_a_run_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path, monkeypatch, capsys):
    """Training state (weights, gradients, Adam's two moments: 16 bytes a weight) and one batch's
    patterns and logits with their gradients, against the free memory: refused by the sizes to
    change, before the run folder is made; the default preset fits where a few MiB are free."""
    import dataclasses

    from compscope.cli.main import main
    from compscope.core import memory
    from compscope.toy.train import training_bytes

    p = PRESETS["induction-2l"]
    state, batch = training_bytes(p.model, p.train)
    assert state == 16 * p.model.matrix_entries()
    assert batch == 8 * 32 * 63 * (2 * 4 * 63 + 64)  # by hand: batch 32, 63 positions, 2 layers x 4 heads, vocab 64
    monkeypatch.setattr(memory, "free_memory", lambda device: state + batch - 1)
    with pytest.raises(OptionError, match=r"train: this run's 45,056 weights with their gradients and Adam's moments "
                       r"\(0.000671 GiB\) and one batch's .* take at least .* GiB, more than the .* free on cpu; make it "
                       r"smaller"):
        train(p.model, p.data, p.train, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    assert main(["train", "--out", str(tmp_path / "cli"), "--steps", "2", "--quiet"]) == 2
    assert "--vocab, --n-ctx, --heads" in capsys.readouterr().err and not (tmp_path / "cli").exists()
    monkeypatch.setattr(memory, "free_memory", lambda device: state + batch)
    short = dataclasses.replace(p.train, steps=2, n_checkpoints=1, eval_sequences=2)
    train(p.model, p.data, short, tmp_path / "fits", progress=False)
    assert (tmp_path / "fits" / "final").is_dir()


def test_config_errors():
    with pytest.raises(OptionError, match="n_heads"):
        ToyConfig(n_heads=0)
    with pytest.raises(OptionError, match="even d_head"):
        ToyConfig(d_head=5, positions="rotary")
    with pytest.raises(OptionError, match="norm"):
        ToyConfig(norm="batchnorm")
    with pytest.raises(OptionError, match="unknown field"):
        ToyConfig.from_dict({"n_layer": 2})
    for f in ("qk_norm", "attn_out_norm"):
        with pytest.raises(OptionError, match=f"{f}=True needs a norm kind"):
            ToyConfig(**{f: True})
        with pytest.raises(OptionError, match=f"{f}='yes': expected true or false"):
            ToyConfig(norm="rmsnorm", **{f: "yes"})


def test_qk_norm_and_output_norm_act_where_gemma_has_them():
    """By hand on one layer: the queries and keys RMS-normalised per head (with the shared gain)
    before the rotary rotation, the heads' summed output normalised before the residual add."""
    cfg = VARIANTS[4]
    m, tokens, cache = _cached_run(cfg, seed=3, tokens_seed=2)
    blk, x = m.blocks[1], cache["resid_pre.1"]
    rms = lambda y, w: y / (y.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt() * w  # noqa: E731
    xn = rms(x, blk.ln1.w)
    q, k = (rms(torch.einsum("hrd,bsd->bhsr", W, xn), n.w) for W, n in ((blk.W_Q, blk.q_norm), (blk.W_K, blk.k_norm)))
    pos = torch.arange(cfg.n_ctx, dtype=torch.float64)[:, None] * m.inv_freq[None, :]
    cos, sin = pos.cos().float(), pos.sin().float()
    rot = lambda y: torch.cat([y[..., :2] * cos - y[..., 2:] * sin, y[..., :2] * sin + y[..., 2:] * cos], -1)  # noqa: E731
    logits = (rot(q) @ rot(k).mT) / 2.0
    p = logits.masked_fill(~torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    torch.testing.assert_close(cache["pattern.1"], p.detach(), rtol=1e-4, atol=1e-5)
    heads = cache["head_out.1"].sum(2)
    torch.testing.assert_close(cache["attn_out.1"], rms(heads, blk.ln_out.w).detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(cache["resid_pre.2"], x + cache["attn_out.1"])
    assert float((cache["attn_out.1"] - heads).abs().max()) > 1e-2  # the norm does something here
    hw = m.head_weights()
    assert hw.qk_norm is not None and hw.qk_norm[0].weight.shape == (3, 4) and hw.attn_out_norm is not None


# ---------------------------------------------------------------------- storage
@pytest.mark.parametrize("cfg", VARIANTS + [ToyConfig(n_layers=2, d_model=16, d_head=4, d_vocab=9, n_ctx=8, mlp=True, d_mlp=12, norm="layernorm")],
                         ids=_id)
def test_save_load_round_trip_is_bit_exact(tmp_path, cfg):
    m = perturbed_toy(cfg, seed=7)
    save_toy(m, tmp_path / "ck", name="rt", step=12, info={"seed": 7})
    back, manifest = load_toy(tmp_path / "ck")
    assert manifest["step"] == 12 and manifest["name"] == "rt" and back.cfg == cfg
    sa, sb = m.state_dict(), back.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert torch.equal(m.inv_freq, back.inv_freq) and back.inv_freq.device.type == "cpu"  # (not in the state dict)
    tokens = torch.randint(0, cfg.d_vocab, (2, cfg.n_ctx), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.equal(m(tokens), back(tokens))
    hw = compscope.load(tmp_path / "ck")
    assert hw.meta.family == "toy" and hw.meta.name == "rt step 12"
    assert torch.equal(hw.W_Q, m.head_weights().W_Q)
    if cfg.mlp:
        assert any("MLP" in n for n in hw.meta.notes)


def test_bad_toy_folders(tmp_path):
    m = ToyTransformer(VARIANTS[2])
    save_toy(m, tmp_path / "a")
    (tmp_path / "a" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(LoadError, match="model.safetensors"):
        compscope.load(tmp_path / "a")
    save_toy(m, tmp_path / "b")
    man = json.loads((tmp_path / "b" / "toy.json").read_text())
    man["config"]["d_model"] = 32
    (tmp_path / "b" / "toy.json").write_text(json.dumps(man))
    with pytest.raises(WeightError, match="shape"):
        compscope.load(tmp_path / "b")
    man["config"]["bogus"] = 1
    (tmp_path / "b" / "toy.json").write_text(json.dumps(man))
    with pytest.raises(LoadError, match="bogus"):
        compscope.load(tmp_path / "b")
    with torch.no_grad():
        m.blocks[0].W_K[0, 0, 0] = float("nan")
    save_toy(m, tmp_path / "c")
    with pytest.raises(WeightError, match="blocks.0.W_K"):
        compscope.load(tmp_path / "c")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "toy.json").write_text('{"format": "something else"}')
    with pytest.raises(LoadError, match="not a compscope toy model"):
        compscope.load(tmp_path / "d")


# ---------------------------------------------------------------------- data
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), n_ctx=st.integers(8, 40), vocab=st.integers(2, 50), bigram=st.floats(0, 1))
def test_repeats_are_where_the_batch_says(seed, n_ctx, vocab, bigram):
    span_max = n_ctx // 2
    cfg = DataConfig(d_vocab=vocab, n_ctx=n_ctx, span_min=1, span_max=span_max, bigram=bigram, branching=min(3, vocab))
    b = InductionData(cfg, seed=seed).batch(16)
    assert b.tokens.shape == (16, n_ctx) and int(b.tokens.min()) >= 0 and int(b.tokens.max()) < vocab
    for i in range(16):
        f, s, n = int(b.first[i]), int(b.second[i]), int(b.span[i])
        assert 1 <= n <= span_max and 0 <= f and f + n <= s and s + n <= n_ctx
        assert torch.equal(b.tokens[i, f : f + n], b.tokens[i, s : s + n])


def test_filler_follows_the_bigram_chain_and_is_seeded():
    cfg = DataConfig(d_vocab=30, n_ctx=40, span_max=20, bigram=1.0, branching=3)
    P = bigram_chain(cfg)
    assert torch.allclose(P.sum(1), torch.ones(30, dtype=torch.float64)) and int((P > 0).sum(1).max()) == 3
    f = InductionData(cfg, seed=4).filler(50)
    assert bool((P[f[:, :-1], f[:, 1:]] > 0).all())
    assert torch.equal(f, InductionData(cfg, seed=4).filler(50))
    assert not torch.equal(f, InductionData(cfg, seed=5).filler(50))
    t = repeated_random(4, 7, 30, seed=1)
    assert torch.equal(t[:, :7], t[:, 7:])
    with pytest.raises(OptionError, match="2\\*span_max"):
        DataConfig(n_ctx=10, span_max=6)


# ---------------------------------------------------------------------- labels
def test_head_labels_on_hand_made_patterns():
    half, n = 5, 10
    prev = torch.zeros(n, n)
    prev[0, 0] = 1
    prev[torch.arange(1, n), torch.arange(n - 1)] = 1
    ind = torch.zeros(n, n)
    ind[torch.arange(half), 0] = 1
    ind[torch.arange(half, n), torch.arange(half, n) - half + 1] = 1
    uniform = torch.ones(n, n).tril() / torch.arange(1, n + 1)[:, None]
    pats = [torch.stack([prev, ind, uniform])[None]]  # (batch 1, 3 heads, n, n)
    assert induction_scores(pats, half)[0].tolist() == pytest.approx([0.0, 1.0, sum(1 / (i + 1) for i in range(half, n)) / half])
    # the induction head attends to i - 1 only at i = 1 (row 1 -> 0): 1 of the 9 rows
    assert previous_token_scores(pats)[0].tolist() == pytest.approx([1.0, 1 / 9, sum(1 / (i + 1) for i in range(1, n)) / 9])
    with pytest.raises(OptionError, match="repeated sequences"):
        label_heads(ToyTransformer(VARIANTS[0]), torch.arange(10)[None])


# ---------------------------------------------------------------------- training
def test_checkpoint_schedule():
    s = checkpoint_steps(4000, 100)
    assert s[0] == 0 and s[-1] == 4000 and s == sorted(set(s)) and len(s) <= 100
    ratios = [b / a for a, b in zip(s[20:], s[21:])]
    assert max(ratios) / min(ratios) < 1.5  # log-spaced once past the integer crowding
    assert checkpoint_steps(5, 1) == [0, 5]


def _tiny_run(path, seed=0):
    p = PRESETS["tiny"]
    import dataclasses

    return train(p.model, p.data, dataclasses.replace(p.train, seed=seed), path, name="tiny", progress=False)


def test_tiny_training_is_deterministic(tmp_path):
    a, b, c = _tiny_run(tmp_path / "a"), _tiny_run(tmp_path / "b"), _tiny_run(tmp_path / "c", seed=1)
    assert a.log == b.log and a.log != c.log
    sa, sb = load_toy(tmp_path / "a" / "final")[0].state_dict(), load_toy(tmp_path / "b" / "final")[0].state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    steps = [r["step"] for r in read_log(tmp_path / "a")]
    assert steps == checkpoint_steps(30, 6)
    assert sorted(p.name for p in (tmp_path / "a" / "checkpoints").iterdir()) == [f"step_{s:06d}" for s in steps]
    final_ck = load_toy(tmp_path / "a" / "checkpoints" / "step_000030")[0].state_dict()
    assert all(torch.equal(sa[k], final_ck[k]) for k in sa)
    assert a.log[-1]["loss_first"] < a.log[0]["loss_first"] - 0.1  # it learns something (held-out loss)
    import json

    import compscope

    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert (run["compscope"], run["torch"]) == (compscope.__version__, torch.__version__)  # what trained it
    with pytest.raises(OptionError, match="already holds a run"):
        _tiny_run(tmp_path / "a")


def test_track_rows_and_plot(tmp_path):
    pytest.importorskip("pandas")
    from compscope.analysis.tracking import list_checkpoints, scan_checkpoints, track

    _tiny_run(tmp_path / "run")
    tr = track(tmp_path / "run", "QK", ["frobenius", "tight"], ["identity", "embed"], progress=False)
    n_ck = len(checkpoint_steps(30, 6))
    assert tr.steps == checkpoint_steps(30, 6)
    df = tr.to_pandas()
    L, H = 2, 2
    forward_pairs = H * H * L * (L - 1) // 2
    assert len(df) == n_ck * 2 * 2 * 2 * forward_pairs  # checkpoints x metrics x measures x kinds x pairs
    assert not df.duplicated(["step", "metric", "measure", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]).any()
    one = df[(df.step == 30) & (df.metric == "identity") & (df.measure == "frobenius") & (df.kind == "K")]
    direct = compscope.scores(compscope.load(tmp_path / "run" / "final"), "K", ["frobenius"], progress=False)
    for r in one.itertuples():
        assert r.value == pytest.approx(float(direct.dense("frobenius", "K")[r.src_layer, r.src_head, r.dst_layer, r.dst_head]), abs=1e-12)
    # labels of the checkpoints equal those logged during training
    log = read_log(tmp_path / "run")
    assert tr.labels[-1] is not None and len(tr.labels_frame()) == n_ck * L * H
    best = float(tr.labels[-1].induction[1:].max())
    assert (tr.formation_step() is None) == (best < 0.5) and tr.formation_step() in (None, *tr.steps)
    assert tr.save(tmp_path / "t.csv").stat().st_size > 0
    # an explicit list of checkpoint paths, steps from names when there is no manifest step
    cks = list_checkpoints([tmp_path / "run" / "checkpoints" / f"step_{s:06d}" for s in (30, 0, 5)])
    assert [c.step for c in cks] == [0, 5, 30]
    from compscope.loading.formats import native

    hw = compscope.load(tmp_path / "run" / "final")
    for name in ("rev-step1000", "rev-step200"):  # not toy folders: steps from the names
        native.save(hw, tmp_path / "revs" / name)
    assert [(c.step, c.path.name) for c in list_checkpoints(tmp_path / "revs")] == [(200, "rev-step200"), (1000, "rev-step1000")]
    (tmp_path / "revs" / "README.md").write_text("step 7 of 9\n")  # not models, numbers or not: passed over
    (tmp_path / "revs" / "figures-step3").mkdir()
    (tmp_path / "revs" / "figures-step3" / "loss.png").write_bytes(b"png")
    (tmp_path / "revs" / "lone.safetensors").write_bytes(b"")  # a weights file by its name: kept
    found, passed = scan_checkpoints(tmp_path / "revs")
    assert [(c.step, c.path.name) for c in found] == [(0, "lone.safetensors"), (200, "rev-step200"), (1000, "rev-step1000")]
    assert [p.name for p in passed] == ["README.md", "figures-step3"]
    (tmp_path / "revs" / "lone.safetensors").unlink()
    plain = track(tmp_path / "revs", "K", ["frobenius"], progress=False)
    assert plain.labels == [None, None] and plain.formation_step() is None
    assert [p.name for p in plain.skipped] == ["README.md", "figures-step3"]
    assert track([c.path for c in found[1:]], "K", ["frobenius"], progress=False).skipped == []
    (tmp_path / "only-notes").mkdir()
    (tmp_path / "only-notes" / "step_10.txt").write_text("")
    with pytest.raises(OptionError, match=r"only-notes: holds no checkpoints \(none of its 1 entries is a model folder"):
        list_checkpoints(tmp_path / "only-notes")
    native.save(hw, tmp_path / "revs" / "also-step200")  # two names that read as one step: both named
    with pytest.raises(OptionError, match=r"repeated steps \[200\]: also-step200, rev-step200 all read as step 200"):
        list_checkpoints(tmp_path / "revs")
    with pytest.raises(OptionError, match="no such checkpoint"):
        list_checkpoints([tmp_path / "nope"])
    with pytest.raises(OptionError, match="is one model"):
        list_checkpoints(tmp_path / "run" / "final")
    assert log[-1]["step"] == 30
    pytest.importorskip("matplotlib")
    from compscope.report.plots import plot_track

    out = plot_track(tr, tmp_path / "f.png", kind="K", panels=[("frobenius", "identity"), ("tight", "embed")], highlight=[(0, 0, 1, 1)])
    assert out.stat().st_size > 1000


# ---------------------------------------------------------------------- the shipped default model
def test_default_model_is_the_preset_and_has_induction_heads():
    from compscope.loading.builtin import DEFAULT_MODEL, resolve

    path = resolve(DEFAULT_MODEL)
    model, manifest = load_toy(path)
    assert model.cfg == PRESETS[DEFAULT_MODEL].model and manifest["step"] == PRESETS[DEFAULT_MODEL].train.steps
    assert sum(f.stat().st_size for f in path.iterdir()) < 5_000_000
    labels = label_heads(model, repeated_random(64, 24, model.cfg.d_vocab, seed=123))  # not the training eval seed
    assert float(labels.induction[1].max()) >= 0.5
    assert float(labels.previous[0].max()) >= 0.5
    assert labels.loss_second < 0.5 * labels.loss_first
    hw = compscope.load(DEFAULT_MODEL)
    assert hw.meta.family == "toy" and hw.meta.name == "induction-2l" and "built-in" in hw.meta.source


def test_training_variants_run(tmp_path):
    """MLP + LayerNorm + rotary + tied, and RMSNorm: a few steps train and load as HeadWeights."""
    import dataclasses

    p = PRESETS["tiny"]
    for i, changes in enumerate([dict(mlp=True, d_mlp=8, norm="layernorm", positions="rotary", tied=True), dict(norm="rmsnorm", n_layers=3)]):
        cfg = dataclasses.replace(p.model, **changes)
        run = train(cfg, p.data, dataclasses.replace(p.train, steps=5, n_checkpoints=3), tmp_path / str(i), progress=False)
        hw = compscope.load(tmp_path / str(i) / "final")
        assert hw.n_layers == cfg.n_layers and hw.attn_norm.kind == cfg.norm and len(run.log) == 3
        assert (hw.rotary is not None) == (cfg.positions == "rotary")


def test_a_toy_object_loads_and_runs_as_its_folder_does(tmp_path):
    """A ``ToyTransformer`` in memory: ``load`` gives its HeadWeights, ``runner_for`` runs it, and its
    interventions and verdict are those of the same model saved and read back from its folder; a
    parameter holding NaN is refused by name."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import ToyRunner, runner_for

    cfg = VARIANTS[4]
    m = perturbed_toy(cfg, seed=2)
    save_toy(m, tmp_path / "ck", name="obj")
    hw = compscope.load(m)
    assert hw.meta.source == "ToyTransformer object" and torch.equal(hw.W_K, compscope.load(tmp_path / "ck").W_K)
    runner = runner_for(m)
    assert isinstance(runner, ToyRunner) and runner.model is m
    t = repeated_random(4, 3, cfg.d_vocab, seed=1)
    a = intervention_effects(runner, t, "QKV", progress=False)
    b = intervention_effects(runner_for(tmp_path / "ck", device="cpu"), t, "QKV", progress=False)  # where m is
    for kind in "QKV":
        torch.testing.assert_close(a.by_kind[kind], b.by_kind[kind], atol=0, rtol=0, equal_nan=True)
    va = compscope.validate(m, sequences=6, half=3, intervention_sequences=3, metrics=["identity"], progress=False)
    vb = compscope.validate(tmp_path / "ck", sequences=6, half=3, intervention_sequences=3, metrics=["identity"],
                            device="cpu", progress=False)
    assert va.verdict_frame().equals(vb.verdict_frame()) and va.interventions_frame().equals(vb.interventions_frame())
    with pytest.raises(OptionError, match="toy model"):
        runner_for(m, dtype="bfloat16")
    with torch.no_grad():
        m.blocks[1].q_norm.w[0] = float("nan")
    with pytest.raises(WeightError, match=r"ToyTransformer object: parameter blocks\.1\.q_norm\.w holds NaN"):
        compscope.load(m)


def test_loading_a_toy_builds_nothing_on_the_meta_device_that_torch_compiles():
    """A toy's shapes are checked on the meta device with its parameters left undrawn: a random
    draw or an ``arange`` there goes through torch's reference ops, which import its compiler
    (about a second, at every ``compscope info``). In a fresh process, loading the built-in toy
    and its weights leaves ``torch._dynamo`` unimported."""
    import subprocess
    import sys

    code = ("import sys, compscope; hw = compscope.load('induction-2l'); "
            "assert hw.n_layers == 2; print('torch._dynamo' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_a_toy_left_uninitialised_has_the_shapes_of_one_drawn():
    cfg = ToyConfig(n_layers=2, d_model=16, d_head=4, d_vocab=9, n_ctx=8, mlp=True, d_mlp=12, norm="layernorm")
    drawn = ToyTransformer(cfg, seed=1).state_dict()
    with torch.device("meta"):
        bare = ToyTransformer(cfg, init=False).state_dict()
    shapes = lambda sd: {k: (tuple(t.shape), t.dtype) for k, t in sd.items()}  # noqa: E731
    assert shapes(bare) == shapes(drawn)
    assert all(t.device.type == "meta" for t in bare.values())
