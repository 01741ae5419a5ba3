"""Reference-format folders (``params.json`` beside ``consolidated.safetensors`` as Mistral ships
models, or ``consolidated.00.pth`` as Meta shipped Llama), written here from tiny random weights.

Checked two ways: against the same weights as a transformers Mistral model (rows permuted as
transformers' conversion script permutes them, written independently here), and against an
attention written here from the reference code's own definition (rotary on adjacent pairs as
complex numbers), which shares no code with compscope's rotate-half attention."""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.core.attention import attention_forward  # noqa: E402

L, H, G, R, D, V, THETA = 2, 4, 2, 6, 20, 30, 500.0


def _native_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under the reference names (every tensor N(0, 0.3²); the norm gains near 1)."""
    g = torch.Generator().manual_seed(seed)
    w = lambda *shape: torch.randn(*shape, generator=g) * 0.3  # noqa: E731
    sd = {"tok_embeddings.weight": w(V, D), "norm.weight": 1 + w(D), "output.weight": w(V, D)}
    for i in range(L):
        p = f"layers.{i}."
        sd |= {p + "attention.wq.weight": w(H * R, D), p + "attention.wk.weight": w(G * R, D),
               p + "attention.wv.weight": w(G * R, D), p + "attention.wo.weight": w(D, H * R),
               p + "attention_norm.weight": 1 + w(D), p + "ffn_norm.weight": 1 + w(D),
               p + "feed_forward.w1.weight": w(16, D), p + "feed_forward.w2.weight": w(D, 16),
               p + "feed_forward.w3.weight": w(16, D)}
    return sd


def _params(**more) -> dict:
    return {"dim": D, "n_layers": L, "head_dim": R, "hidden_dim": 16, "n_heads": H, "n_kv_heads": G, "norm_eps": 1e-5,
            "vocab_size": V, "rope_theta": THETA, **more}


def _write(folder, sd, params, kind: str = "safetensors"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(params))
    if kind == "safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in sd.items()}, str(folder / "consolidated.safetensors"))
    elif kind == "pth":
        torch.save(sd, folder / "consolidated.00.pth")
    return folder


def _reference_attention(sd: dict, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The reference code's attention of ``layer`` on the residual ``x (batch, seq, D)``, in float64:
    RMSNorm, rotary turning each adjacent pair (2i, 2i + 1) of a head as a complex number by
    ``position · THETA^(-2i/R)``, grouped keys and values, causal softmax, output projection."""
    p = f"layers.{layer}."
    x = x.double()
    xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * sd[p + "attention_norm.weight"].double()
    b, s, _ = x.shape
    q = (xn @ sd[p + "attention.wq.weight"].double().T).reshape(b, s, H, R)
    k = (xn @ sd[p + "attention.wk.weight"].double().T).reshape(b, s, G, R)
    v = (xn @ sd[p + "attention.wv.weight"].double().T).reshape(b, s, G, R)
    angle = torch.arange(s, dtype=torch.float64)[:, None] * THETA ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    turn = torch.polar(torch.ones_like(angle), angle)[None, :, None, :]  # (1, s, 1, R/2)

    def rotate(t):
        return torch.view_as_real(torch.view_as_complex(t.reshape(*t.shape[:-1], R // 2, 2).contiguous()) * turn).reshape(t.shape)

    q, k = rotate(q), rotate(k)
    k, v = k.repeat_interleave(H // G, dim=2), v.repeat_interleave(H // G, dim=2)
    logits = torch.einsum("bshr,bthr->bhst", q, k) / R ** 0.5
    logits = logits.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    z = torch.einsum("bhst,bthr->bshr", logits.softmax(-1), v).reshape(b, s, H * R)
    return z @ sd[p + "attention.wo.weight"].double().T


@pytest.mark.parametrize("kind", ["safetensors", "pth"])
def test_a_reference_folder_computes_the_reference_codes_attention(tmp_path, kind):
    """Read back, each layer's attention on a random residual is the reference code's (float64
    reference, float32 compscope: 1e-5)."""
    sd = _native_weights()
    hw = compscope.load(_write(tmp_path / "m", sd, _params(), kind))
    assert (hw.meta.family, hw.n_layers, hw.n_heads, hw.d_head, hw.d_model) == ("llama", L, H, R, D)
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(1))
    for layer in range(L):
        torch.testing.assert_close(attention_forward(hw, layer, x).double(), _reference_attention(sd, layer, x),
                                   atol=1e-5, rtol=1e-5)
    assert torch.equal(hw.W_E, sd["tok_embeddings.weight"].T) and torch.equal(hw.W_U, sd["output.weight"])
    assert any("reference-format folder (params.json)" in n for n in hw.meta.notes)
    assert any("torch.load(weights_only=True)" in n for n in hw.meta.notes) == (kind == "pth")


#: the dimension Meta's reference code splits each tensor along across tensor-parallel ranks (written here from its
#: layers: column-parallel maps split their output rows, row-parallel ones their input columns)
_RANK_DIM = {"wq": 0, "wk": 0, "wv": 0, "wo": 1, "w1": 0, "w3": 0, "w2": 1, "output": 0}


def _write_ranks(folder, sd, n: int, embedding_dim: int):
    """``sd`` as ``n`` tensor-parallel files (``consolidated.0k.pth``): each rank the k-th slice of every split
    tensor, norms whole; the token embeddings split along ``embedding_dim`` (Llama 2: the width, 1; Llama 3: the
    vocabulary, 0)."""
    _write(folder, {}, _params(), "none")
    for k in range(n):
        rank = {}
        for name, t in sd.items():
            short = name.split(".")[-2] if name.startswith("layers.") else name.split(".")[0]
            dim = embedding_dim if name == "tok_embeddings.weight" else _RANK_DIM.get(short)
            rank[name] = t if dim is None else t.chunk(n, dim=dim)[k].clone()
        torch.save(rank, folder / f"consolidated.{k:02d}.pth")
    return folder


@pytest.mark.parametrize("embedding_dim", [1, 0])
def test_tensor_parallel_files_read_as_the_one_file_they_split(tmp_path, embedding_dim):
    """Meta's larger models as released: one file per tensor-parallel rank, each a slice of every split tensor
    (query, key and value rows per rank, so two K/V heads over two ranks: one each). Read back, every weight equals
    the one file's reading; the token embeddings join along whichever axis their ranks split (Llama 2's width,
    Llama 3's vocabulary)."""
    sd = _native_weights(5)
    whole = compscope.load(_write(tmp_path / "one", sd, _params(), "pth"))
    split = compscope.load(_write_ranks(tmp_path / "two", sd, 2, embedding_dim))
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(split, name), getattr(whole, name)), name
    assert torch.equal(split.attn_norm.weight, whole.attn_norm.weight) and split.kv_map == whole.kv_map
    assert any("consolidated.00.pth ... consolidated.01.pth, 2 tensor-parallel ranks" in n for n in split.meta.notes)


def test_a_reference_folder_reads_as_transformers_conversion_of_it(tmp_path):
    """The same weights as a transformers Mistral model, q/k rows permuted as transformers'
    conversion script permutes them (written here): every head weight, norm and the rotary are equal."""
    transformers = pytest.importorskip("transformers")
    from hf_tiny import hf_config

    sd = _native_weights(3)
    ours = compscope.load(_write(tmp_path / "m", sd, _params()))

    def permute(w, n):  # the conversion script's permute_for_rope: (n, R/2, 2, D) -> (n, 2, R/2, D)
        return w.view(n, R // 2, 2, D).transpose(1, 2).reshape(n * R, D)

    cfg = hf_config("MistralConfig", vocab_size=V, hidden_size=D, intermediate_size=16, num_hidden_layers=L,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R, rms_norm_eps=1e-5, sliding_window=None,
                    rope_parameters={"rope_type": "default", "rope_theta": THETA}, tie_word_embeddings=False)
    model = transformers.MistralForCausalLM(cfg).eval()
    hf = {"model.embed_tokens.weight": sd["tok_embeddings.weight"], "model.norm.weight": sd["norm.weight"],
          "lm_head.weight": sd["output.weight"]}
    for i in range(L):
        p, q = f"layers.{i}.", f"model.layers.{i}."
        hf |= {q + "self_attn.q_proj.weight": permute(sd[p + "attention.wq.weight"], H),
               q + "self_attn.k_proj.weight": permute(sd[p + "attention.wk.weight"], G),
               q + "self_attn.v_proj.weight": sd[p + "attention.wv.weight"],
               q + "self_attn.o_proj.weight": sd[p + "attention.wo.weight"],
               q + "input_layernorm.weight": sd[p + "attention_norm.weight"],
               q + "post_attention_layernorm.weight": sd[p + "ffn_norm.weight"],
               q + "mlp.gate_proj.weight": sd[p + "feed_forward.w1.weight"],
               q + "mlp.down_proj.weight": sd[p + "feed_forward.w2.weight"],
               q + "mlp.up_proj.weight": sd[p + "feed_forward.w3.weight"]}
    model.load_state_dict(hf)
    ref = compscope.load(model)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.kv_map == ref.kv_map
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq)


def test_what_a_params_file_says_is_read_or_refused_by_name(tmp_path):
    """Defaults where params.json is silent (rope_theta 10 000, as the reference code and
    transformers' conversion; vocab_size -1: the embedding's); a window, tied embeddings and a
    mixture of experts read; settings that change attention and are not read refused by name."""
    sd = _native_weights()
    p = _params(vocab_size=-1, sliding_window="4", moe={"num_experts": 8}, vision_encoder={"hidden_size": 8})
    del p["rope_theta"], p["n_kv_heads"], p["head_dim"]
    sd_mha = {k: v for k, v in sd.items()}
    for i in range(L):  # n_kv_heads absent: as many as the queries; head_dim absent: dim / n_heads = 5
        sd_mha[f"layers.{i}.attention.wq.weight"] = torch.randn(D, D)
        sd_mha[f"layers.{i}.attention.wk.weight"] = torch.randn(D, D)
        sd_mha[f"layers.{i}.attention.wv.weight"] = torch.randn(D, D)
        sd_mha[f"layers.{i}.attention.wo.weight"] = torch.randn(D, D)
    with pytest.raises(compscope.UnsupportedModelError, match=r"params\.json: head width 5 .* positive even integer"):
        compscope.load(_write(tmp_path / "odd", sd_mha, p))
    p["head_dim"], p["n_kv_heads"] = R, G
    hw = compscope.load(_write(tmp_path / "d", sd, p))
    notes = " ".join(hw.meta.notes)
    assert "params.json states no rope_theta: 10000" in notes and "experts are MLP" in notes and "vision encoder" in notes
    torch.testing.assert_close(hw.rotary.inv_freq[0], 1.0 / 10000.0 ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    assert hw.sliding_window == (4, 4) and hw.n_vocab == V
    del sd["output.weight"]
    tied = compscope.load(_write(tmp_path / "tied", sd, _params(tied_embeddings=True)))
    assert torch.equal(tied.W_U, tied.W_E.T)
    for n, (more, said) in enumerate([({"use_scaled_rope": True}, "'use_scaled_rope' is true and params.json does not state"),
                       ({"quantization": {"qformat_weight": "fp8_e4m3"}}, "'quantization'"),
                       ({"yarn": {"factor": 4.0}}, r"settings compscope does not read: yarn=\{'factor': 4.0\}"),
                       ({"sliding_window": [8, 8]}, r"'sliding_window' = \[8, 8\]: a window per layer is not supported")]):
        with pytest.raises(compscope.UnsupportedModelError, match=rf"params\.json: {said}"):
            compscope.load(_write(tmp_path / f"bad{n}", _native_weights(), _params(**more)))


def test_defects_are_refused_naming_the_file(tmp_path):
    sd = _native_weights()
    # a tensor entering attention that the Llama family does not read: refused, not dropped
    biased = _write(tmp_path / "bias", {**sd, "layers.1.attention.wq.bias": torch.zeros(H * R)}, _params())
    with pytest.raises(compscope.UnsupportedModelError, match="'layers.1.attention.wq.bias' enters attention"):
        compscope.load(biased)
    # Meta's tensor-parallel files: a rank missing, ranks of different models, slices that do not join
    gap = _write_ranks(tmp_path / "gap", sd, 2, 1)
    (gap / "consolidated.01.pth").rename(gap / "consolidated.02.pth")
    with pytest.raises(compscope.LoadError, match=r"ranks \[0, 2\]: expected consolidated.00.pth to consolidated.01.pth"):
        compscope.load(gap)
    other = _write_ranks(tmp_path / "other", sd, 2, 1)
    torch.save({k: v for k, v in torch.load(other / "consolidated.01.pth").items() if k != "norm.weight"},
               other / "consolidated.01.pth")
    with pytest.raises(compscope.LoadError, match=r"consolidated\.01\.pth: holds other tensors than consolidated\.00"):
        compscope.load(other)
    differ = _write_ranks(tmp_path / "differ", {**sd}, 2, 1)
    rank1 = torch.load(differ / "consolidated.01.pth")
    rank1["layers.0.attention_norm.weight"] = rank1["layers.0.attention_norm.weight"] + 1
    torch.save(rank1, differ / "consolidated.01.pth")
    with pytest.raises(compscope.LoadError, match="'layers.0.attention_norm.weight' differs between ranks"):
        compscope.load(differ)
    ragged = _write_ranks(tmp_path / "ragged", sd, 2, 1)
    rank1 = torch.load(ragged / "consolidated.01.pth")
    rank1["layers.1.attention.wo.weight"] = rank1["layers.1.attention.wo.weight"][:-1]
    torch.save(rank1, ragged / "consolidated.01.pth")
    with pytest.raises(compscope.LoadError, match=r"slices of 'layers.1.attention.wo.weight' do not join along "
                                                  r"dimension 1 \(\(20, 12\), \(19, 12\)\)"):
        compscope.load(ragged)
    bad = _write(tmp_path / "json", sd, _params())
    (bad / "params.json").write_text("{dim: 3")
    with pytest.raises(compscope.LoadError, match=r"params\.json: not valid JSON"):
        compscope.load(bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "params.json").write_text(json.dumps(_params()))
    with pytest.raises(compscope.LoadError, match="params.json but no weights"):
        compscope.load(empty)
    missing = _write(tmp_path / "missing", {k: v for k, v in sd.items() if k != "layers.1.attention.wk.weight"}, _params())
    with pytest.raises(compscope.WeightError, match="self_attn.k_proj.weight' is missing from .*missing"):
        compscope.load(missing)
    shape = _write(tmp_path / "shape", {**sd, "layers.0.attention.wq.weight": torch.zeros(H * R, D + 1)}, _params())
    with pytest.raises(compscope.WeightError, match=r"consolidated\.safetensors \(layers\.0\.attention\.wq\.weight\).*shape"):
        compscope.load(shape)
    nan = _write(tmp_path / "nan", {**sd, "layers.0.attention.wo.weight": torch.full((D, H * R), float("nan"))}, _params())
    with pytest.raises(compscope.WeightError, match=r"layers\.0\.attention\.wo\.weight.*NaN"):
        compscope.load(nan)
    for key, value in [("n_heads", 0), ("dim", "20"), ("n_layers", -1), ("head_dim", 2.5), ("sliding_window", "four")]:
        with pytest.raises(compscope.LoadError, match=rf"params\.json: config key '{key}' = {value!r}"):
            compscope.load(_write(tmp_path / f"size-{key}", sd, _params(**{key: value})))
    no_layers = _params()
    del no_layers["n_layers"]
    with pytest.raises(compscope.LoadError, match="'n_layers' is missing"):
        compscope.load(_write(tmp_path / "keys", sd, no_layers))


def test_meta_stored_rotary_frequencies_are_checked(tmp_path):
    """Meta's Llama 2 files carry ``rope.freqs``: read when it is THETA^(-2i/R), refused otherwise."""
    sd = _native_weights()
    good = THETA ** (-torch.arange(0, R, 2, dtype=torch.float32) / R)
    assert compscope.load(_write(tmp_path / "good", {**sd, "rope.freqs": good}, _params(), "pth")).n_layers == L
    with pytest.raises(compscope.UnsupportedModelError, match=r"rope\.freqs\): rotary frequencies .* theta = 500"):
        compscope.load(_write(tmp_path / "bad", {**sd, "rope.freqs": good * 2}, _params(), "pth"))


def test_a_folder_with_a_config_is_a_huggingface_folder_and_the_data_commands_say_how_to_run_one(tmp_path):
    """Mistral's repositories hold both formats: with a config.json the folder is read as
    HuggingFace's (what transformers runs). Without, the data-based commands refuse it, from its
    files alone, saying how to get a folder transformers runs; the weight-only ones read it."""
    from compscope.data.runner import cannot_run
    from compscope.loading.formats import consolidated

    folder = _write(tmp_path / "m", _native_weights(), _params())
    assert consolidated.recognise(folder) and consolidated.recognise(folder / "params.json")
    assert consolidated.recognise(folder / "consolidated.safetensors")
    why = cannot_run(folder)
    assert why is not None and "reference-format folder" in why and "convert_mistral_weights_to_hf" in why
    (folder / "config.json").write_text("{}")
    assert not consolidated.recognise(folder)
    with pytest.raises(compscope.UnsupportedModelError, match=r"m: unsupported architecture \(model_type=None\)"):
        compscope.load(folder)


def test_a_hub_model_fetches_the_reference_files_only_where_they_are_its_only_weights(tmp_path, monkeypatch):
    """Mistral's repositories hold the same weights twice (a HuggingFace folder and
    ``consolidated.safetensors``): the download leaves the second copy out. A repository in the
    makers' format only is fetched again with its ``consolidated`` files, and read."""
    pytest.importorskip("huggingface_hub")
    transformers = pytest.importorskip("transformers")
    import fnmatch
    import shutil

    import huggingface_hub
    from hf_tiny import hf_config

    reference = _write(tmp_path / "reference", _native_weights(), _params())
    both = _write(tmp_path / "both", _native_weights(), _params())
    cfg = hf_config("MistralConfig", vocab_size=V, hidden_size=D, intermediate_size=16, num_hidden_layers=L,
                    num_attention_heads=H, num_key_value_heads=G, head_dim=R)
    transformers.MistralForCausalLM(cfg).save_pretrained(both)
    fetched = []

    def fake(**kw):
        if kw.get("local_files_only"):
            raise FileNotFoundError("not cached")
        source = reference if kw["repo_id"] == "Test/reference" else both
        snap = tmp_path / "snapshots" / kw["repo_id"].replace("/", "--")
        snap.mkdir(parents=True, exist_ok=True)
        for f in source.iterdir():  # what the patterns let through, as huggingface_hub filters
            if any(fnmatch.fnmatch(f.name, p) for p in kw["allow_patterns"]) and \
                    not any(fnmatch.fnmatch(f.name, p) for p in kw.get("ignore_patterns") or ()):
                shutil.copy(f, snap)
                fetched.append(f.name)
        return str(snap)

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    hw = compscope.load("Test/both")
    assert hw.meta.family == "llama" and "consolidated.safetensors" not in fetched and "model.safetensors" in fetched
    fetched.clear()
    hw = compscope.load("Test/reference")
    assert fetched.count("consolidated.safetensors") == 1 and fetched.count("params.json") == 2
    assert torch.equal(hw.W_Q, compscope.load(reference).W_Q)
