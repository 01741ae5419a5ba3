"""DeepSeek-V2's and V3's multi-head latent attention as llama.cpp writes it (``deepseek2``: DeepSeek-V2/V3/R1, Kimi
K2, Moonlight, Youtu-LLM): small files written with ``gguf.GGUFWriter`` as llama.cpp's converter writes them (the
key/value up-projection split into ``attn_k_b``, each head's key rows transposed, and ``attn_v_b``; or fused, as older
conversions keep it), read as the model object of the same weights, and run by llama.cpp's own equations (its absorbed
form: queries times ``attn_k_b`` against the normed latent, ``attn_v_b`` after the softmax) from the file's arrays
alone; YaRN by llama.cpp's rule for the architecture; malformed files refused by name. MiniCPM3's (``minicpm3``:
fused, LongRoPE's factors as tensors, muP's scalars llama.cpp's constants) read as its model object."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

import compscope

gguf = pytest.importorskip("gguf")
pytest.importorskip("transformers")

from hf_tiny import BY_ID, build  # noqa: E402
from test_gguf_format import _add_scalar, _finish, _metadata, _numpy_state, _writer  # noqa: E402

#: HF's names in a layer -> llama.cpp's in a block (the key/value up-projection apart: split or fused by the writer)
_NAMES = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
          "self_attn.q_a_proj.weight": "attn_q_a.weight", "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
          "self_attn.q_b_proj.weight": "attn_q_b.weight", "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
          "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight", "self_attn.o_proj.weight": "attn_output.weight",
          "post_attention_layernorm.weight": "ffn_norm.weight",
          # (GLM-5's sparse indexer, which selects keys: llama.cpp's names, not read)
          "self_attn.indexer.wq_b.weight": "indexer.attn_q_b.weight",
          "self_attn.indexer.wk.weight": "indexer.attn_k.weight",
          "self_attn.indexer.k_norm.weight": "indexer.k_norm.weight",
          "self_attn.indexer.k_norm.bias": "indexer.k_norm.bias",
          "self_attn.indexer.weights_proj.weight": "indexer.proj.weight",
          # (a Kimi Delta Attention layer's: under llama.cpp's names, beside its attn_q and attn_output)
          "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
          "self_attn.b_proj.weight": "ssm_beta.weight", "self_attn.o_norm.weight": "ssm_norm.weight"}
_TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight"}
EPS = 0.25  # (the files' RMS epsilon, far from the models' 1e-5 and 1e-6: llama.cpp runs the latent norms at it too)


def _model(q_latent: bool = True, **overrides):
    """A tiny DeepSeek-V3 (rotated dims in adjacent pairs, as llama.cpp turns them), with a query latent or, as
    DeepSeek-V2-Lite, ``q_proj``."""
    return build(BY_ID["deepseek-v3-latent-attention"], q_lora_rank=12 if q_latent else None, **overrides)


def _theta(cfg) -> float | None:
    """The rotary base of a transformers config (``rope_parameters``; transformers 4: ``rope_theta``), None where it
    has none (Kimi Linear's: nothing rotates)."""
    params = getattr(cfg, "rope_parameters", None)
    theta = params["rope_theta"] if params else getattr(cfg, "rope_theta", None)
    return None if theta is None else float(theta)


def write_deepseek2(path, model, split: bool = True, scaling: dict | None = None, drop: tuple[str, ...] = (),
                    extra: dict | None = None, arch: str = "deepseek2", output: bool = True):
    """``model`` as llama.cpp's converter writes a ``deepseek2`` file: the absorbed form's metadata (one key/value head
    ``kv_lora_rank + rope`` wide, the model's own widths as ``key_length_mla`` and ``value_length_mla``) and
    ``kv_b_proj`` split per head into ``attn_k_b`` (transposed) and ``attn_v_b``; or, ``split=False``, as older
    conversions: ``attn_kv_b`` fused and the model's widths as ``key_length``, ``value_length``. ``scaling``: YaRN's
    keys; ``drop``: block tensors left out; ``extra``: metadata keys added as written (as
    :func:`test_gguf_format._add_scalar` writes them). ``arch`` ``mistral4``, ``glm-dsa``: Mistral 4, GLM-5 as their
    converters write them, DeepSeek-V2's conversion under their own names (GLM-5's with its indexer's top-k and
    tensors); ``kimi-linear``: Kimi Linear's (a K/V head count per layer, its delta-attention layers' tensors beside).
    ``output`` False: no ``output.weight`` (PLM's converter writes none: its loader ties the unembedding to
    ``token_embd``)."""
    cfg = model.config
    H, nope, rope, dv, rank = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                               cfg.kv_lora_rank)
    w = _writer(path, arch)
    widths = (dict(head_count_kv=1, key_length=rank + rope, value_length=rank, key_length_mla=nope + rope,
                   value_length_mla=dv) if split else dict(head_count_kv=H, key_length=nope + rope, value_length=dv))
    if arch in ("kimi-linear", "bailingmoe3"):  # (a K/V head count per layer: 0 on a Kimi Delta Attention layer)
        widths["head_count_kv"] = [int(t == "full_attention") * widths["head_count_kv"] for t in cfg.layer_types]
    _metadata(w, block_count=cfg.num_hidden_layers, embedding_length=cfg.hidden_size, head_count=H,
              vocab_size=cfg.vocab_size, layer_norm_rms_eps=EPS, rope_freq_base=_theta(cfg),
              rope_dimension_count=rope, kv_lora_rank=rank, q_lora_rank=cfg.q_lora_rank, **widths)
    for key, value in (scaling or {}).items():
        getattr(w, f"add_rope_scaling_{key}")(value)
    if arch in ("glm-dsa", "deepseek32"):
        w.add_uint32(f"{arch}.attention.indexer.top_k", cfg.index_topk)
    for key, value in (extra or {}).items():
        _add_scalar(w, f"{arch}.{key}", value)
    for key, t in _numpy_state(model).items():
        if key in _TOP and (output or _TOP[key] != "output.weight"):
            w.add_tensor(_TOP[key], t)
        if not key.startswith("model.layers."):
            continue
        i, rest = key.removeprefix("model.layers.").split(".", 1)
        if rest == "self_attn.kv_b_proj.weight":
            parts = {"attn_kv_b.weight": t}
            if split:
                k_b, v_b = np.split(t.reshape(H, nope + dv, rank), [nope], axis=1)
                parts = {"attn_k_b.weight": np.ascontiguousarray(k_b.transpose(0, 2, 1)), "attn_v_b.weight": v_b}
        elif rest == "self_attn.g_proj.weight" and arch == "bailingmoe3":  # (Ling 3's gate: attn_gate on a latent
            # attention layer, ssm_g_a on a KDA layer)
            parts = {"attn_gate.weight" if cfg.layer_types[int(i)] == "full_attention" else "ssm_g_a.weight": t}
        else:
            parts = {_NAMES[rest]: t} if rest in _NAMES else {}
        for name, part in parts.items():
            if name not in drop:
                w.add_tensor(f"blk.{i}.{name}", part)
    _finish(w)
    return path


@pytest.mark.parametrize("split", [True, False], ids=["split-k-b-v-b", "fused-kv-b"])
@pytest.mark.parametrize("q_latent", [True, False], ids=["query-latent", "q-proj"])
def test_a_deepseek2_gguf_reads_as_the_model_object(tmp_path, split, q_latent):
    model = _model(q_latent)
    ours, ref = compscope.load(write_deepseek2(tmp_path / "d.gguf", model, split)), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "deepseek_v3" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.attn_norm.weight, ref.attn_norm.weight) and ours.attn_scale == ref.attn_scale
    assert (ours.q_latent is None) == (ref.q_latent is None) == (not q_latent)
    for a, b in ((ours.q_latent, ref.q_latent), (ours.kv_latent, ref.kv_latent)):
        assert a is None or (torch.equal(a.W, b.W) and a.b is None and b.b is None)
    # (llama.cpp: the file's epsilon, stored in float32; transformers: its own)
    assert ours.kv_latent.eps == float(np.float32(EPS)) and ref.kv_latent.eps == 1e-6
    assert ours.kv_latent_from == ref.kv_latent_from == 4 and ours.rotary.style == ref.rotary.style == "interleaved"
    assert torch.equal(ours.rotary.inv_freq, ref.rotary.inv_freq)
    assert any("latent norms' epsilon 0.25" in n for n in ours.meta.notes)


def test_a_deepseek2_gguf_that_keeps_its_prediction_block_reads_the_layers_before_it(tmp_path):
    """A file that keeps DeepSeek-V3's multi-token-prediction block (counted in ``block_count``, stated by
    ``nextn_predict_layers``; llama.cpp's converter leaves it out) reads the layers before it, and says so."""
    model = _model(num_hidden_layers=3)  # (its last layer stands for the prediction block's attention)
    ref = compscope.load(model)
    ours = compscope.load(write_deepseek2(tmp_path / "m.gguf", model, extra={"nextn_predict_layers": 1}))
    assert ours.n_layers == 2 and torch.equal(ours.W_K, ref.W_K[:2]) and torch.equal(ours.W_V, ref.W_V[:2])
    assert any("1 multi-token-prediction block(s) after the last layer (blk.2" in n for n in ours.meta.notes)
    assert compscope.load(write_deepseek2(tmp_path / "n.gguf", model)).n_layers == 3


def _rms(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    return g * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _by_llama_cpp(path, layer: int, resid: torch.Tensor) -> torch.Tensor:
    """What block ``layer`` of the ``deepseek2`` file at ``path`` adds to the residual ``resid`` (seq, d), in float64
    from the file's arrays by llama.cpp's absorbed equations (``ggml_mul_mat(a, b)`` contracts both over a's
    innermost dim: a ``(..., m, k)`` array times ``b``'s rows): queries through the query latent, their unrotated
    part times ``attn_k_b`` into the latent's space, keys the normed latent after the shared rotated dims, rotation
    of adjacent pairs at position i by ``i base^(-2j / rope)``, logits times ``(nope + rope)^(-1/2)``, the causal
    softmax over the latents, ``attn_v_b`` after it, then ``attn_output``. A ``kimi-linear`` file's: queries through
    ``attn_q``, nothing rotated."""
    reader = gguf.GGUFReader(str(path))
    t = {x.name: torch.from_numpy(np.array(x.data, dtype=np.float64)).reshape([int(n) for n in reversed(x.shape)])
         for x in reader.tensors}
    arch = reader.fields["general.architecture"].contents()
    field = lambda key: reader.fields[f"{arch}.{key}"].contents()  # noqa: E731
    rank, rope, qk = field("attention.kv_lora_rank"), field("rope.dimension_count"), field("attention.key_length_mla")
    H, nope, rotates = field("attention.head_count"), qk - rope, arch != "kimi-linear"
    b = lambda name: t[f"blk.{layer}.{name}"]  # noqa: E731
    x = _rms(resid.double(), b("attn_norm.weight"), EPS)
    n = x.shape[0]
    if f"blk.{layer}.attn_q_a.weight" in t:
        q = (_rms(x @ b("attn_q_a.weight").T, b("attn_q_a_norm.weight"), EPS) @ b("attn_q_b.weight").T).view(n, H, qk)
    else:
        q = (x @ b("attn_q.weight").T).view(n, H, qk)
    ckv = x @ b("attn_kv_a_mqa.weight").T  # (seq, rank + rope)
    latent, k_pe = _rms(ckv[:, :rank], b("attn_kv_a_norm.weight"), EPS), ckv[:, rank:]
    ang = torch.arange(n, dtype=torch.float64)[:, None] * (field("rope.freq_base") if rotates else 1.0) ** (
        -torch.arange(0, rope, 2, dtype=torch.float64) / rope)

    def turn(v):  # llama.cpp's "norm" rotary: pairs (2j, 2j + 1)
        if not rotates:
            return v
        c, s = (ang.cos(), ang.sin()) if v.ndim == 2 else (ang.cos()[:, None], ang.sin()[:, None])
        e, o = v[..., 0::2], v[..., 1::2]
        return torch.stack([e * c - o * s, o * c + e * s], -1).flatten(-2)

    absorbed = torch.einsum("hrk,ihk->ihr", b("attn_k_b.weight"), q[..., :nope])  # (seq, head, rank)
    logits = (torch.einsum("ihr,jr->hij", absorbed, latent)
              + torch.einsum("ihp,jp->hij", turn(q[..., nope:]), turn(k_pe))) / math.sqrt(qk)
    logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    mixed = torch.einsum("hij,jr->ihr", logits.softmax(-1), latent)  # (seq, head, rank)
    z = torch.einsum("hvr,ihr->ihv", b("attn_v_b.weight"), mixed).reshape(n, -1)
    return z @ b("attn_output.weight").T


@pytest.mark.parametrize("arch", ["deepseek2", "mistral4", "glm-dsa", "kimi-linear"])
def test_a_deepseek2_gguf_recomputes_as_llama_cpp_runs_it(tmp_path, arch):
    """compscope's heads, recomputed with their latent scales, add what llama.cpp's absorbed form computes from the
    file's arrays alone: the split up-projection's orientation, the rotation's pairs and the logit scale are the
    ones llama.cpp takes. Mistral 4's file (its rotated share of a query head read as ``partial_rotary_factor``)
    runs through the same graph in llama.cpp, GLM-5's through one of its own with the same attention (its indexer
    selecting every key on these 12 tokens), Kimi Linear's latent attention layers through theirs: queries from
    attn_q, nothing rotated."""
    from compscope.core.attention import attention_forward

    model = {"deepseek2": _model, "glm-dsa": _glm5, "kimi-linear": _kimi}.get(arch, lambda: _mistral4(rope_parameters={
        "rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.4}))()
    path = write_deepseek2(tmp_path / "d.gguf", model, arch=arch)
    hw = compscope.load(path)
    assert hw.meta.family == {"deepseek2": "deepseek_v3", "glm-dsa": "glm_moe_dsa"}.get(arch, arch.replace("-", "_"))
    assert (hw.rotary is None) == (arch == "kimi-linear") and (hw.rotary is None or hw.rotary.dim == 4)
    blocks = [1, 3] if arch == "kimi-linear" else [0, 1]  # (the file's blocks of latent attention)
    resid = torch.randn(12, hw.d_model, generator=torch.Generator().manual_seed(3)) * 2
    for layer in range(hw.n_layers):
        got = attention_forward(hw, layer, resid[None])[0].double()
        torch.testing.assert_close(got, _by_llama_cpp(path, blocks[layer], resid), atol=2e-5, rtol=0)


@pytest.mark.parametrize("arch", ["deepseek2", "deepseek32"])
def test_a_deepseek2_gguf_reads_yarn_by_llama_cpps_rule(tmp_path, arch):
    """llama.cpp runs a ``deepseek2`` file's YaRN (and a ``deepseek32`` one's, by the same rule) with ``mscale =
    mscale_all_dim = yarn_log_multiplier / 0.1``: the rotated dims unscaled (their attention factor 1) and the logit
    times ``mscale(factor, m)²``, as transformers runs the model whose config says both; without the multiplier, the
    logit unscaled too; llama.cpp's neutral YaRN keys change nothing."""
    m, factor = 0.7, 4.0
    yarn = {"rope_type": "yarn", "rope_theta": 500.0, "factor": factor, "original_max_position_embeddings": 16,
            "mscale": m, "mscale_all_dim": m, "beta_fast": 32.0, "beta_slow": 1.0}
    model = (_model(rope_parameters=yarn) if arch == "deepseek2" else
             build(BY_ID["deepseek-v32-indexer-within-topk"], rope_parameters=yarn))
    keys = dict(type=gguf.RopeScalingType.YARN, factor=factor, orig_ctx_len=16, yarn_log_mul=0.1 * m)
    write = lambda path, **k: write_deepseek2(path, model, arch=arch, **k)  # noqa: E731
    ours, ref = compscope.load(write(tmp_path / "y.gguf", scaling=keys)), compscope.load(model)
    for name in ("W_Q", "W_K", "W_V"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    mscale = 0.1 * m * math.log(factor) + 1
    assert ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-6) == pytest.approx(10 ** -0.5 * mscale**2)
    neutral = {"rope.scaling.yarn_ext_factor": -1.0, "rope.scaling.yarn_attn_factor": 1.0,
               "rope.scaling.attn_factor": 1.0, "rope.scaling.finetuned": False}  # (llama.cpp's: read as nothing)
    kept = compscope.load(write(tmp_path / "n.gguf", scaling=keys, extra=neutral))
    assert torch.equal(kept.rotary.inv_freq, ours.rotary.inv_freq) and kept.attn_scale == ours.attn_scale
    keys.pop("yarn_log_mul")
    plain = compscope.load(write(tmp_path / "p.gguf", scaling=keys))
    assert torch.equal(plain.W_Q, ref.W_Q) and plain.attn_scale == 0.0  # (0: d_head^(-1/2), d_head = 10 here)


@pytest.mark.parametrize("case, needle", [
    ("no-v-b", r"d\.gguf: tensor 'blk\.0\.attn_v_b\.weight' is missing beside blk\.0\.attn_k_b\.weight: llama\.cpp's "
               r"converter writes blk\.0\.attn_k_b\.weight and blk\.0\.attn_v_b\.weight together"),
    ("both", r"a deepseek2 file with both the split key/value up-projection \(attn_k_b, attn_v_b\) and the fused "
             r"one \(attn_kv_b\): llama\.cpp's converter writes one of them"),
    ("no-rank", r"GGUF metadata 'deepseek2\.attention\.kv_lora_rank' = None: deepseek2's multi-head latent attention "
                r"needs it"),
    ("linear", r"a deepseek2 file with rope scaling 'linear'; compscope reads its YaRN, or none"),
    ("short-k-b", r"tensors blk\.0\.attn_k_b\.weight \+ blk\.0\.attn_v_b\.weight cannot be joined: "
                  r"attn_k_b \(4, 9, 6\) and attn_v_b \(4, 6, 10\) are not"),
    ("bool-rank", r"GGUF metadata 'deepseek2\.attention\.kv_lora_rank' = True: deepseek2's multi-head latent attention "
                  r"needs it, a positive count"),
    ("zero-rope", r"GGUF metadata 'deepseek2\.rope\.dimension_count' = 0: deepseek2's multi-head latent attention "
                  r"needs it, a positive count"),
    ("all-rotated", r"GGUF metadata 'deepseek2\.attention\.key_length_mla' = 4 leaves no unrotated dims beside the 4 "
                    r"rotated \('deepseek2\.rope\.dimension_count'\)"),
])
def test_a_malformed_deepseek2_gguf_is_refused_by_name(tmp_path, case, needle):
    model = _model()
    path = tmp_path / "d.gguf"
    if case == "no-v-b":
        write_deepseek2(path, model, drop=("attn_v_b.weight",))
    elif case == "linear":
        write_deepseek2(path, model, scaling=dict(type=gguf.RopeScalingType.LINEAR, factor=2.0))
    else:
        write_deepseek2(path, model)
        changes = {"both": dict(add=("blk.1.attn_kv_b.weight", np.zeros((40, 10), np.float32))),
                   "no-rank": dict(leave_out="deepseek2.attention.kv_lora_rank"),
                   "short-k-b": dict(tensor=("blk.0.attn_k_b.weight", lambda a: a[:, :9])),
                   "bool-rank": dict(value=("deepseek2.attention.kv_lora_rank", True)),
                   "zero-rope": dict(value=("deepseek2.rope.dimension_count", 0)),
                   "all-rotated": dict(value=("deepseek2.attention.key_length_mla", 4))}[case]
        path = _rewritten(tmp_path, path, **changes)
    with pytest.raises((compscope.LoadError, compscope.UnsupportedModelError), match=needle):
        compscope.load(path)


def test_joined_kv_b_stacks_each_heads_key_rows_and_value_rows_and_refuses_other_shapes():
    """HF's ``kv_b_proj`` from llama.cpp's split: per head h, ``attn_k_b[h]`` (rank, nope) transposed, then
    ``attn_v_b[h]`` (v, rank); parts that are not 3-D, or of another head count or rank, refused naming both shapes."""
    from compscope.loading.formats.gguf.names import joined_kv_b

    k_b = torch.arange(24.0).reshape(2, 3, 4)  # (head 2, rank 3, nope 4)
    v_b = -torch.arange(30.0).reshape(2, 5, 3)  # (head 2, v 5, rank 3)
    got = joined_kv_b(k_b, v_b)
    assert got.shape == (2 * (4 + 5), 3)
    for h in range(2):
        assert torch.equal(got[9 * h : 9 * h + 4], k_b[h].T) and torch.equal(got[9 * h + 4 : 9 * h + 9], v_b[h])
    for k, v in ((k_b[0], v_b), (k_b[:, :, 0], v_b), (k_b, v_b[0]), (k_b[:1], v_b), (k_b[:, :2], v_b)):
        with pytest.raises(ValueError, match=re.escape(f"attn_k_b {tuple(k.shape)} and attn_v_b {tuple(v.shape)} are "
                                                       "not (head, rank, nope) and (head, v, rank)")):
            joined_kv_b(k, v)


def _rewritten(tmp_path, path, leave_out: str | None = None, tensor: tuple | None = None, add: tuple | None = None,
               value: tuple | None = None):
    """The GGUF file at ``path`` written again as ``r.gguf``: metadata key ``leave_out`` left out, ``tensor`` =
    (name, f) replaced by ``f`` of it, ``add`` = (name, array) added, ``value`` = (key, value) in place of the key's
    (as :func:`test_gguf_format._add_scalar` writes it)."""
    reader = gguf.GGUFReader(str(path))
    out = tmp_path / "r.gguf"
    w = gguf.GGUFWriter(str(out), reader.fields["general.architecture"].contents())
    for key, f in reader.fields.items():
        if key == leave_out or key.startswith("GGUF.") or key == "general.architecture":
            continue
        if value and key == value[0]:
            _add_scalar(w, key, value[1])
            continue
        kind = f.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            w.add_array(key, f.contents())
        else:
            w.add_key_value(key, f.contents(), kind)
    for x in reader.tensors:
        a = np.array(x.data).reshape([int(n) for n in reversed(x.shape)])
        if tensor and x.name == tensor[0]:
            a = np.ascontiguousarray(tensor[1](a))
        w.add_tensor(x.name, a)
    if add:
        w.add_tensor(*add)
    _finish(w)
    return out


@pytest.mark.parametrize("arch, family", [("deepseek2", "deepseek_v3"), ("mistral4", "mistral4"),
                                          ("glm-dsa", "glm_moe_dsa"), ("kimi-linear", "kimi_linear")])
def test_a_deepseek2_gguf_is_refused_on_data_and_listed_as_read(tmp_path, arch, family):
    """transformers' GGUF reader reads none of ``deepseek2``, ``mistral4``, ``glm-dsa``, ``kimi-linear``: the
    data-based commands say so by name; the catalogue lists the architectures as read, weights only."""
    from compscope.loading import catalogue
    from compscope.loading.formats import gguf as gguf_format

    model = {"deepseek2": _model, "glm-dsa": _glm5, "kimi-linear": _kimi}.get(arch, _mistral4)()
    path = write_deepseek2(tmp_path / "d.gguf", model, arch=arch)
    if arch not in (gguf_format.transformers_reads() or {arch}):  # (transformers has these models: their folders run)
        with pytest.raises(compscope.UnsupportedModelError, match="which transformers' GGUF reader does not read.*for "
                                                                  "data, use the model's HuggingFace folder"):
            gguf_format.runtime_config(path)
    read, line = catalogue.lookup(arch)
    assert read and f"GGUF architecture '{arch}', read by the {family} family" in line


def _mistral4(**overrides):
    """A tiny Mistral 4 (head_dim the whole query head, the rotated share 0.4 of it; YaRN's factor 4 over an original
    context of 16 with mscale = mscale_all_dim = 1, Llama 4's temperature β 0.1 past it), or as ``overrides`` say."""
    import transformers

    if not hasattr(transformers, "Mistral4Config"):
        pytest.skip(f"transformers {transformers.__version__} has no Mistral 4")
    return build(BY_ID["mistral4-latent-attention-temperature"], **overrides)


#: Mistral 4's YaRN as the converter writes it (``yarn_log_multiplier`` 0.1 mscale_all_dim, as DeepSeek's), and
#: Llama 4's temperature as Mistral's own conversion writes it (the HF one writes none)
_MISTRAL4_YARN = dict(type="yarn", factor=4.0, orig_ctx_len=16, yarn_log_mul=0.1)  # (the ramp's bounds: 32 and 1)
_MISTRAL4_TEMPERATURE = {"attention.temperature_scale": 0.1, "attention.temperature_length": 16}


@pytest.mark.parametrize("temperature", [True, False], ids=["temperature", "no-temperature"])
def test_a_mistral4_gguf_reads_as_the_model_object(tmp_path, temperature):
    """Mistral 4 as llama.cpp runs a ``mistral4`` file (its ``deepseek2`` graph): adjacent pairs turned, the rotated
    share of a query head as Mistral 4's ``partial_rotary_factor``, YaRN's logit scale ``mscale(4, 1)²`` and attention
    factor 1, the latent norms at the file's epsilon; Llama 4's temperature, where the file states it, 1 within the
    original context, which the notes say is what is read."""
    model = _mistral4()
    keys = {**_MISTRAL4_YARN, "type": gguf.RopeScalingType.YARN}
    path = write_deepseek2(tmp_path / "m.gguf", model, scaling=keys, arch="mistral4",
                           extra=_MISTRAL4_TEMPERATURE if temperature else None)
    ours, ref = compscope.load(path), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "mistral4" and ours.rotary.dim == ref.rotary.dim == 4
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.rotary.style == ref.rotary.style == "interleaved" and ours.kv_latent_from == ref.kv_latent_from == 4
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    assert ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-6) == pytest.approx(
        10 ** -0.5 * (0.1 * math.log(4.0) + 1) ** 2)
    assert ours.kv_latent.eps == float(np.float32(EPS)) and ref.kv_latent.eps == 1e-6
    said = [n for n in ours.meta.notes if "Llama 4's temperature" in n]
    assert len(said) == int(temperature) and all("1 + 0.1 log(1 + floor(i / 16))" in n for n in said)


@pytest.mark.parametrize("extra, needle", [
    ({"attention.temperature_scale": 0.1}, r"'mistral4\.attention\.temperature_scale' = 0\.1 without a positive "
                                           r"'mistral4\.attention\.temperature_length' \(None\), by which llama\.cpp "
                                           r"floors the positions"),
    ({"attention.temperature_scale": 0.1, "attention.temperature_length": 32},
     r"'mistral4\.attention\.temperature_length' = 32 is not YaRN's original context 16 "
     r"\('mistral4\.rope\.scaling\.original_context_length'\)"),
    ({"attention.temperature_scale": float("nan"), "attention.temperature_length": 16},
     r"'mistral4\.attention\.temperature_scale' = nan is not a finite number >= 0"),
    *(({"attention.temperature_scale": beta, "attention.temperature_length": 16},
       rf"'mistral4\.attention\.temperature_scale' = {re.escape(repr(beta))} is not a finite number >= 0")
      for beta in (True, -0.5, float("inf"), "0.1")),
    *(({"attention.temperature_scale": 0.1, "attention.temperature_length": n},
       rf"= 0\.1 without a positive 'mistral4\.attention\.temperature_length' \({n!r}\)") for n in (0, True)),
])
def test_a_mistral4_gguf_whose_temperature_llama_cpp_cannot_run_is_refused_by_name(tmp_path, extra, needle):
    keys = {**_MISTRAL4_YARN, "type": gguf.RopeScalingType.YARN}
    path = write_deepseek2(tmp_path / "m.gguf", _mistral4(), scaling=keys, arch="mistral4", extra=extra)
    with pytest.raises((compscope.LoadError, compscope.UnsupportedModelError), match=needle):
        compscope.load(path)


def _kimi(**overrides):
    """A tiny Kimi Linear (latent attention on layers 1 and 3 of 4, without positions), its queries through q_proj
    as llama.cpp's graph reads them."""
    import transformers

    if not hasattr(transformers, "KimiLinearConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Kimi Linear")
    return build(BY_ID["kimi-linear-nope-latent-hybrid"], **{"q_lora_rank": None, **overrides})


def test_a_kimi_linear_gguf_reads_as_the_model_object(tmp_path):
    """Kimi Linear as llama.cpp runs a ``kimi-linear`` file: its latent attention layers from the per-layer K/V head
    counts (0 on a Kimi Delta Attention layer, whose tensors are left unread), nothing rotated, the latent norms at
    the file's epsilon: the model object's heads."""
    model = _kimi()
    ours, ref = compscope.load(write_deepseek2(tmp_path / "k.gguf", model, arch="kimi-linear")), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "kimi_linear" and ours.n_layers == ref.n_layers == 2
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.rotary is None and ours.positions == "none" and ours.q_latent is None and ours.kv_latent_from == 4
    assert ours.kv_latent.eps == float(np.float32(EPS))
    assert any("attention on 2 of the model's 4 layers (1, 3" in n for n in ours.meta.notes)


@pytest.mark.parametrize("case, needle", [
    ("fused", r"a kimi-linear file with only the fused key/value up-projection \(attn_kv_b\): llama\.cpp's "
              r"converter writes attn_k_b and attn_v_b \(llama\.cpp runs a file with attn_kv_b with a key's shared "
              r"dims before its own"),
    ("q-latent", r"a kimi-linear file with a query latent \(attn_q_a\): llama\.cpp's kimi-linear graph reads queries "
                 r"through attn_q alone"),
    ("yarn", r"a kimi-linear file with rope scaling 'yarn': compscope reads Kimi Linear's without"),
])
def test_a_kimi_linear_gguf_llama_cpp_would_not_run_as_the_model_is_refused_by_name(tmp_path, case, needle):
    model, path = _kimi(q_lora_rank=12 if case == "q-latent" else None), tmp_path / "k.gguf"
    scaling = dict(type=gguf.RopeScalingType.YARN, factor=4.0, orig_ctx_len=16) if case == "yarn" else None
    write_deepseek2(path, model, arch="kimi-linear", split=case != "fused", scaling=scaling)
    with pytest.raises(compscope.UnsupportedModelError, match=needle):
        compscope.load(path)


def _glm5(**overrides):
    """A tiny GLM-5: DeepSeek-V3.2's attention behind a sparse indexer that keeps the 16 best-scored keys."""
    import transformers

    if not hasattr(transformers, "GlmMoeDsaConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no GLM-5")
    return build(BY_ID["glm5-dsa-indexer-within-topk"], **overrides)


@pytest.mark.parametrize("arch, split", [("glm-dsa", True), ("deepseek32", True), ("deepseek32", False)],
                         ids=["glm-dsa", "deepseek32-split", "deepseek32-fused"])
def test_a_sparse_attention_gguf_reads_as_the_model_object_within_its_indexers_top_k(tmp_path, arch, split):
    """GLM-5 and 5.2 (``glm-dsa``) and DeepSeek-V3.2 (``deepseek32``) as llama.cpp runs their files: DeepSeek-V2's
    conversion (the up-projection split; DeepSeek-V3.2's also fused, as older conversions keep it), the indexer's
    tensors beside the attention's (not read), the indexer's top-k from the metadata, within which every key is
    attended: the dense attention of the model object, the notes saying so; the multi-token-prediction block their
    conversions keep after the last layer left out. Weights only."""
    from compscope.data.runner import cannot_run

    dense = dict(num_hidden_layers=3, mlp_layer_types=["dense", "sparse", "sparse"])
    model = (_glm5(**dense, indexer_types=["full", "full", "full"]) if arch == "glm-dsa" else
             build(BY_ID["deepseek-v32-indexer-within-topk"], **dense))
    path = write_deepseek2(tmp_path / "g.gguf", model, split=split, arch=arch, extra={"nextn_predict_layers": 1})
    ours, ref = compscope.load(path), compscope.load(model)
    family = {"glm-dsa": "glm_moe_dsa", "deepseek32": "deepseek_v32"}[arch]
    assert ours.meta.family == ref.meta.family == family and ours.n_layers == 2 and ref.n_layers == 3
    assert "does not read" in cannot_run(path)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)[:2]), name
    for name in ("W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert ours.rotary.style == ref.rotary.style == "interleaved" and ours.attn_scale == ref.attn_scale
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq[:2], rtol=1e-6, atol=0)
    assert any("the 16 keys its indexer scores best" in n for n in ours.meta.notes)
    assert any("multi-token-prediction block(s) after the last layer (blk.2" in n for n in ours.meta.notes)


@pytest.mark.parametrize("case, needle", [
    ("fused", r"a glm-dsa file with only the fused key/value up-projection \(attn_kv_b\): llama\.cpp's converter "
              r"writes attn_k_b and attn_v_b"),
    ("yarn", r"a glm-dsa file with rope scaling 'yarn': compscope reads GLM-5's without"),
    ("no-top-k", r"GGUF metadata 'glm-dsa\.attention\.indexer\.top_k' = None: glm-dsa's multi-head latent attention "
                 r"needs it"),
])
def test_a_glm_dsa_gguf_llama_cpp_would_not_run_so_is_refused_by_name(tmp_path, case, needle):
    model, path = _glm5(), tmp_path / "g.gguf"
    if case == "yarn":
        write_deepseek2(path, model, arch="glm-dsa", scaling=dict(type=gguf.RopeScalingType.YARN, factor=4.0,
                                                                  orig_ctx_len=16))
    else:
        write_deepseek2(path, model, arch="glm-dsa", split=case != "fused")
        if case == "no-top-k":
            path = _rewritten(tmp_path, path, leave_out="glm-dsa.attention.indexer.top_k")
    with pytest.raises(compscope.UnsupportedModelError, match=needle):
        compscope.load(path)


def write_minicpm3(path, model, **meta):
    """``model`` as llama.cpp's converter writes a ``minicpm3`` file: no rotary base, value width or muP scalar in
    the metadata (llama.cpp's defaults and constants), ``kv_b_proj`` fused, LongRoPE's factors as the tensors
    ``rope_factors_long`` and ``_short``; ``meta``: more metadata (``add_KEY``: value)."""
    cfg = model.config
    w = _writer(path, "minicpm3")
    _metadata(w, block_count=cfg.num_hidden_layers, context_length=cfg.max_position_embeddings,
              embedding_length=cfg.hidden_size, head_count=cfg.num_attention_heads,
              head_count_kv=cfg.num_key_value_heads, vocab_size=cfg.vocab_size, layer_norm_rms_eps=EPS,
              q_lora_rank=cfg.q_lora_rank, kv_lora_rank=cfg.kv_lora_rank,
              key_length=cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, rope_dimension_count=cfg.qk_rope_head_dim,
              **meta)
    params = getattr(cfg, "rope_parameters", None) or cfg.rope_scaling
    for which in ("long", "short"):
        w.add_tensor(f"rope_factors_{which}.weight", np.array(params[f"{which}_factor"], np.float32))
    for key, t in _numpy_state(model).items():
        if key in _TOP:
            w.add_tensor(_TOP[key], t)
        elif key.startswith("model.layers."):
            i, rest = key.removeprefix("model.layers.").split(".", 1)
            name = "attn_kv_b.weight" if rest == "self_attn.kv_b_proj.weight" else _NAMES.get(rest)
            if name:
                w.add_tensor(f"blk.{i}.{name}", t)
    _finish(w)
    return path


def test_a_minicpm3_gguf_reads_as_the_model_object_with_llama_cpps_constants(tmp_path):
    """MiniCPM3 as llama.cpp runs a ``minicpm3`` file: its muP scalars the constants of its graph (embeddings times
    12, each branch times 1.4 / √layers, the last residual times 256 / d_model before the LM head), the rotated dims
    in halves at base 10 000 with LongRoPE's short factors (within the original context, which the file does not
    state: the trained one), the latent norms at the file's epsilon: the model object whose config says the same."""
    import transformers

    if not hasattr(transformers, "MiniCPM3Config"):
        pytest.skip(f"transformers {transformers.__version__} has no MiniCPM3")
    from compscope.data.runner import transformers_at_least

    if not transformers_at_least(5, 25):
        pytest.skip(f"transformers {transformers.__version__}'s MiniCPM3 needs a rope 'factor' LongRoPE does not state")
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.5, 3.0], "long_factor": [2.0, 5.0],
            "original_max_position_embeddings": 64}
    def minicpm3(rope):  # (its muP scalars: 12, 1.4, 256)
        return build(BY_ID["minicpm3-latent-attention-mup"], scale_emb=12.0, scale_depth=1.4, dim_model_base=256,
                     rope_parameters=rope, tie_word_embeddings=False)

    model = minicpm3(rope)
    ours, ref = compscope.load(write_minicpm3(tmp_path / "m.gguf", model)), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "minicpm3"
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), rtol=1e-6, atol=0, msg=name)
    assert ours.rotary.style == ref.rotary.style == "half" and ours.attn_scale == ref.attn_scale
    torch.testing.assert_close(ours.rotary.inv_freq, ref.rotary.inv_freq, rtol=1e-6, atol=0)
    plain = 10000.0 ** (-torch.arange(0, 4, 2, dtype=torch.float64) / 4)
    torch.testing.assert_close(ours.rotary.inv_freq[0].double(), plain / torch.tensor([1.5, 3.0]), rtol=1e-6, atol=0)
    assert ours.kv_latent.eps == float(np.float32(EPS)) and ref.kv_latent.eps == 1e-6
    assert torch.equal(ours.W_E, model.model.embed_tokens.weight.detach().T * 12)  # (llama.cpp's scale_embd)
    with pytest.raises(compscope.UnsupportedModelError, match=r"a minicpm3 file with both the split key/value "
                                                             r"up-projection \(attn_k_b, attn_v_b\) and the fused one "
                                                             r"\(attn_kv_b\): llama\.cpp's converter writes attn_kv_b"):
        compscope.load(_rewritten(tmp_path, tmp_path / "m.gguf", add=("blk.0.attn_k_b.weight",
                                                                         np.zeros((4, 10, 6), np.float32))))
    # an original context a quarter of the context: LongRoPE's attention factor stated (read as the model object
    # with that original context), or refused (llama.cpp would run at factor 1, transformers not)
    ctx = model.config.max_position_embeddings
    stated = math.sqrt(1 + math.log(4) / math.log(ctx // 4))
    longer = compscope.load(write_minicpm3(tmp_path / "l.gguf", model, rope_scaling_orig_ctx_len=ctx // 4,
                                           rope_scaling_attn_factors=stated))
    quarter = minicpm3({**rope, "original_max_position_embeddings": ctx // 4})
    quarter.load_state_dict(model.state_dict())
    shorter = compscope.load(quarter)  # (the model object with the file's original context)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        torch.testing.assert_close(getattr(longer, name), getattr(shorter, name), rtol=1e-6, atol=0, msg=name)
    torch.testing.assert_close(longer.rotary.inv_freq, shorter.rotary.inv_freq, rtol=1e-6, atol=0)
    assert longer.attn_scale == pytest.approx(shorter.attn_scale, rel=1e-6)
    assert not torch.allclose(longer.W_Q, ours.W_Q)  # (LongRoPE's attention factor is there)
    with pytest.raises(compscope.UnsupportedModelError, match=re.escape(
            f"LongRoPE over a context {ctx} longer than the original {ctx // 4} without GGUF metadata "
            "'minicpm3.rope.scaling.attn_factor'")):
        compscope.load(write_minicpm3(tmp_path / "n.gguf", model, rope_scaling_orig_ctx_len=ctx // 4))


def test_a_deepseek2_gguf_with_llama_4s_temperature_says_so(tmp_path):
    """llama.cpp's ``deepseek2`` graph scales queries by Llama 4's temperature where the file states it (Mistral
    Large 3's conversion writes it): the weights are the model's, and the notes say the temperature is 1 within the
    original context, which is what is read."""
    yarn = {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "original_max_position_embeddings": 16,
            "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32.0, "beta_slow": 1.0}
    model = _model(rope_parameters=yarn)
    keys = {**_MISTRAL4_YARN, "type": gguf.RopeScalingType.YARN}
    ours = compscope.load(write_deepseek2(tmp_path / "d.gguf", model, scaling=keys, extra=_MISTRAL4_TEMPERATURE))
    ref = compscope.load(model)
    assert torch.equal(ours.W_Q, ref.W_Q) and ours.attn_scale == pytest.approx(ref.attn_scale, rel=1e-6)
    assert any("1 + 0.1 log(1 + floor(i / 16))" in n and "first 16 positions" in n for n in ours.meta.notes)
    assert not any("Llama 4's temperature" in n for n in ref.meta.notes)


def test_a_plm_gguf_reads_as_the_model_object_llama_cpp_runs(tmp_path):
    """PLM as llama.cpp converts it (DeepSeek-V2-Lite's latent attention: queries from ``attn_q``, ``attn_kv_b`` fused,
    no output tensor) and runs it (its graph: adjacent pairs rotated on each head's last dims, the logit at
    ``key_length^-1/2``, the unembedding ``token_embd``): the heads, latent and rotation of the DeepSeek-V3 model
    object of the same weights with tied embeddings, read by that family and said; a file with rope scaling or an
    ``output.weight`` (which llama.cpp's loader does not take) refused by name."""
    model = _model(q_latent=False, tie_word_embeddings=True)
    path = write_deepseek2(tmp_path / "p.gguf", model, split=False, arch="plm", output=False)
    ours, ref = compscope.load(path), compscope.load(model)
    assert ours.meta.family == "deepseek_v3" and any("PLM read by the DeepSeek-V3 family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.W_U, ours.W_E.T) and ours.q_latent is None and ours.attn_scale == ref.attn_scale
    assert torch.equal(ours.kv_latent.W, ref.kv_latent.W) and ours.rotary.style == ref.rotary.style == "interleaved"
    assert torch.equal(ours.rotary.inv_freq, ref.rotary.inv_freq)
    with pytest.raises(compscope.UnsupportedModelError, match=r"'output\.weight': llama\.cpp's plm loader ties"):
        compscope.load(write_deepseek2(tmp_path / "o.gguf", model, split=False, arch="plm"))
    scaled = write_deepseek2(tmp_path / "y.gguf", model, split=False, arch="plm", output=False,
                             scaling={"type": gguf.RopeScalingType.LINEAR, "factor": 4.0})
    with pytest.raises(compscope.UnsupportedModelError, match=r"a plm file with rope scaling 'linear'"):
        compscope.load(scaled)


def test_a_ling_3_gguf_reads_its_latent_attention_layers_as_the_model_object(tmp_path):
    """Ling 3 as llama.cpp converts it (``bailingmoe3``: a K/V head count per layer, 0 on a KDA layer; the key/value
    up-projection split; each head's gate ``attn_gate`` on a latent attention layer) and runs it: the latent attention
    layers alone (1 and 3 of 4), their heads, gates, latent and rotation those of the model object of the same weights,
    read by the bailing_hybrid family and said; with a multi-token-prediction block after the last layer (its own K/V
    head count at the end of the list), the layers before it; a file with rope scaling refused by name."""
    import transformers

    if not hasattr(transformers, "BailingHybridConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no Ling 3")
    model = build(BY_ID["ling3-latent-attention-gated-hybrid"])
    path = write_deepseek2(tmp_path / "l.gguf", model, arch="bailingmoe3")
    ours, ref = compscope.load(path), compscope.load(model)
    assert ours.meta.family == ref.meta.family == "bailing_hybrid" and ours.n_layers == ref.n_layers == 2
    assert any("Ling 3 read by the bailing_hybrid family" in n for n in ours.meta.notes)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_U", "W_G"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    assert torch.equal(ours.kv_latent.W, ref.kv_latent.W) and ours.rotary.style == ref.rotary.style == "interleaved"
    assert torch.equal(ours.rotary.inv_freq, ref.rotary.inv_freq) and ours.attn_scale == ref.attn_scale
    # its multi-token-prediction block after the last layer (nextn_predict_layers; a K/V head count of its own at the
    # end of the list, 1: latent attention) left out: the four layers before it, as the model object of those
    five = build(BY_ID["ling3-latent-attention-gated-hybrid"], num_hidden_layers=5, mlp_layer_types=["dense"] * 5,
                 layer_types=[*model.config.layer_types, "full_attention"])
    kept = compscope.load(write_deepseek2(tmp_path / "m.gguf", five, arch="bailingmoe3",
                                          extra={"nextn_predict_layers": 1}))
    ref5 = compscope.load(five)
    assert kept.n_layers == 2 and ref5.n_layers == 3
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_G"):
        assert torch.equal(getattr(kept, name), getattr(ref5, name)[:2]), name
    assert any("1 multi-token-prediction block(s) after the last layer (blk.4" in n for n in kept.meta.notes)
    scaled = write_deepseek2(tmp_path / "y.gguf", model, arch="bailingmoe3",
                             scaling={"type": gguf.RopeScalingType.LINEAR, "factor": 4.0})
    with pytest.raises(compscope.UnsupportedModelError, match=r"a bailingmoe3 file with rope scaling 'linear'"):
        compscope.load(scaled)
