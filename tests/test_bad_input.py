"""Bad input gives one compscope error (a ``CompscopeError`` subclass) whose one-line message
names the file, tensor or key at fault; never a raw traceback from numpy/safetensors/json."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope import CompscopeError, LoadError, UnsupportedModelError, WeightError  # noqa: E402
from compscope.loading.builtin import BUILTINS, resolve  # noqa: E402
from compscope.cli.main import main  # noqa: E402
from compscope.loading.formats import native  # noqa: E402


def expect(exc: type[CompscopeError], fn, *needles: str) -> str:
    """``fn()`` raises ``exc`` with a one-line message containing every needle; the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    print(f"{exc.__name__}: {msg}")
    assert isinstance(info.value, CompscopeError)
    assert "\n" not in msg, f"multi-line message: {msg!r}"
    for n in needles:
        assert str(n) in msg, f"{n!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------- a tiny Llama folder (safetensors)
@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32,
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("llama") / "tiny-llama"
    transformers.LlamaForCausalLM(cfg).save_pretrained(path, safe_serialization=True)
    assert (path / "model.safetensors").is_file()
    return path


@pytest.fixture
def llama_copy(llama_dir, tmp_path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(llama_dir, dst)
    return dst


def edit_tensors(folder: Path, edit) -> None:
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    tensors = load_file(str(f))
    edit(tensors)
    save_file(tensors, str(f), metadata={"format": "pt"})


def test_intact_tiny_llama_loads(llama_dir):
    hw = compscope.load(llama_dir)
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model) == (2, 4, 2, 16)


def test_missing_path(tmp_path):
    expect(LoadError, lambda: compscope.load(tmp_path / "nope"), str(tmp_path / "nope"), "smollm2")


def test_folder_without_config(tmp_path, llama_dir):
    (tmp_path / "m").mkdir()
    shutil.copy(llama_dir / "model.safetensors", tmp_path / "m")
    expect(LoadError, lambda: compscope.load(tmp_path / "m"), str(tmp_path / "m" / "config.json"))
    (tmp_path / "empty").mkdir()
    expect(LoadError, lambda: compscope.load(tmp_path / "empty"), "config.json")


@pytest.mark.parametrize("text", ["{not json", "", "[1, 2]", "\xff\xfe garbage"])
def test_invalid_json_config(llama_copy, text):
    (llama_copy / "config.json").write_bytes(text.encode("latin-1"))
    expect(LoadError, lambda: compscope.load(llama_copy), str(llama_copy / "config.json"))


def test_folder_without_weights(llama_copy):
    (llama_copy / "model.safetensors").unlink()
    expect(LoadError, lambda: compscope.load(llama_copy), str(llama_copy), "safetensors")


@pytest.mark.parametrize("keep", [4, 7, 60, -100, -1])
def test_truncated_safetensors(llama_copy, keep):
    """Cut inside the 8-byte length, inside the JSON header, and inside the tensor data."""
    f = llama_copy / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:keep] if keep > 0 else data[:keep])
    expect(LoadError, lambda: compscope.load(llama_copy), str(f))


def test_safetensors_file_path_loads_its_folder(llama_dir):
    hw = compscope.load(llama_dir / "model.safetensors")
    assert hw.n_layers == 2
    assert compscope.load(llama_dir / "config.json").n_layers == 2


@pytest.mark.parametrize("model_type", ["mamba", "definitely-not-a-model", None])
def test_unknown_model_type(llama_copy, model_type):
    cfg = json.loads((llama_copy / "config.json").read_text())
    cfg["model_type"] = model_type
    cfg["architectures"] = ["MambaForCausalLM"]
    (llama_copy / "config.json").write_text(json.dumps(cfg))
    expect(UnsupportedModelError, lambda: compscope.load(llama_copy), str(llama_copy), repr(model_type), "MambaForCausalLM")


@pytest.mark.parametrize(
    "model_type, key",
    [("llama", "hidden_size"), ("gpt2", "n_embd"), ("bert", "hidden_size"), ("gpt_neox", "hidden_size"),
     ("gemma", "hidden_size"), ("gemma3_text", "hidden_size"), ("roberta", "hidden_size"), ("distilbert", "dim")],
)
def test_config_missing_a_required_key(llama_copy, model_type, key):
    (llama_copy / "config.json").write_text(json.dumps({"model_type": model_type}))
    expect(UnsupportedModelError, lambda: compscope.load(llama_copy), str(llama_copy), key)


def test_unsupported_config_setting_is_named(llama_copy):
    cfg = json.loads((llama_copy / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "dynamic", "factor": 4.0}  # NTK scaling that changes with the length
    cfg["rope_parameters"] = {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}
    (llama_copy / "config.json").write_text(json.dumps(cfg))
    expect(UnsupportedModelError, lambda: compscope.load(llama_copy), "dynamic")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_tensor_is_named(llama_copy, bad):
    name = "model.layers.1.self_attn.k_proj.weight"

    def poison(ts):
        ts[name][3, 5] = bad

    edit_tensors(llama_copy, poison)
    expect(WeightError, lambda: compscope.load(llama_copy), name, str(llama_copy / "model.safetensors"), "NaN/Inf")


def test_mismatched_shape_is_named(llama_copy):
    name = "model.layers.0.self_attn.q_proj.weight"

    def reshape(ts):
        ts[name] = torch.randn(16, 15)

    edit_tensors(llama_copy, reshape)
    expect(WeightError, lambda: compscope.load(llama_copy), name, "(16, 15)", "(16, 16)")


def test_missing_tensor_is_named(llama_copy):
    name = "model.layers.1.self_attn.v_proj.weight"
    edit_tensors(llama_copy, lambda ts: ts.pop(name))
    expect(WeightError, lambda: compscope.load(llama_copy), name)


def test_sharded_index_with_missing_shard(llama_copy):
    (llama_copy / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}})
    )
    expect(LoadError, lambda: compscope.load(llama_copy), "model-00001-of-00002.safetensors")
    (llama_copy / "model.safetensors.index.json").write_text("{")
    expect(LoadError, lambda: compscope.load(llama_copy), "model.safetensors.index.json")


# ---------------------------------------------------------------- GGUF
N_HEADS, N_KV, D, VOCAB, LAYERS = 4, 2, 16, 24, 2


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute`` (rotate-half rows -> interleaved)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(path: Path, arch: str = "llama", seed: int = 0, *, edit=None, metadata=None) -> dict[str, np.ndarray]:
    """A float32 llama GGUF written with gguf.GGUFWriter; returns the HF-layout tensors.
    ``edit(gguf_tensors)`` may change/remove GGUF tensors before writing; ``metadata(writer)``
    may add KV pairs."""
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(seed)
    r = D // N_HEADS
    hf = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, D), dtype=np.float32),
          "model.norm.weight": rng.standard_normal(D, dtype=np.float32)}
    g = {"token_embd.weight": hf["model.embed_tokens.weight"]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        hf[p + "input_layernorm.weight"] = rng.standard_normal(D, dtype=np.float32)
        hf[p + "self_attn.q_proj.weight"] = rng.standard_normal((N_HEADS * r, D), dtype=np.float32)
        hf[p + "self_attn.k_proj.weight"] = rng.standard_normal((N_KV * r, D), dtype=np.float32)
        hf[p + "self_attn.v_proj.weight"] = rng.standard_normal((N_KV * r, D), dtype=np.float32)
        hf[p + "self_attn.o_proj.weight"] = rng.standard_normal((D, N_HEADS * r), dtype=np.float32)
        g[f"blk.{i}.attn_norm.weight"] = hf[p + "input_layernorm.weight"]
        g[f"blk.{i}.attn_q.weight"] = llama_cpp_permute(hf[p + "self_attn.q_proj.weight"], N_HEADS)
        g[f"blk.{i}.attn_k.weight"] = llama_cpp_permute(hf[p + "self_attn.k_proj.weight"], N_KV)
        g[f"blk.{i}.attn_v.weight"] = hf[p + "self_attn.v_proj.weight"]
        g[f"blk.{i}.attn_output.weight"] = hf[p + "self_attn.o_proj.weight"]
    g["output_norm.weight"] = hf["model.norm.weight"]
    if edit is not None:
        edit(g)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny")
    w.add_block_count(LAYERS)
    w.add_context_length(32)
    w.add_embedding_length(D)
    w.add_feed_forward_length(8)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(VOCAB)
    if metadata is not None:
        metadata(w)
    for name, t in g.items():
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return path, write_tiny_gguf(path)


def test_intact_tiny_gguf_loads_and_is_unpermuted(tiny_gguf):
    """Control for the truncation tests; also: llama.cpp's row permutation is undone exactly."""
    path, hf = tiny_gguf
    hw = compscope.load(path)
    r = D // N_HEADS
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model, hw.d_head) == (LAYERS, N_HEADS, N_KV, D, r)
    for i in range(LAYERS):
        p = f"model.layers.{i}.self_attn."
        assert np.array_equal(hw.W_Q[i].reshape(N_HEADS * r, D).numpy(), hf[p + "q_proj.weight"])
        assert np.array_equal(hw.W_K[i].reshape(N_KV * r, D).numpy(), hf[p + "k_proj.weight"])
    assert hw.meta.name == "tiny" and hw.meta.source_dtype == "F32"


def gguf_cut_points(path: Path) -> dict[str, tuple[int, str | None]]:
    """Byte counts to keep, found with gguf's own reader, and what the message must name:
    inside the magic, the KV metadata, the tensor table, and the data of the first and the
    last tensor (whose names the error must give)."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    first = min(r.tensors, key=lambda t: t.data_offset)
    last = max(r.tensors, key=lambda t: t.data_offset)
    kv_last = max(r.fields.values(), key=lambda f: f.offset)  # the last KV pair
    return {
        "magic": (3, None),
        "kv": (kv_last.offset + 5, "metadata"),
        "tensor-table": (r.data_offset - 40, "tensor table"),
        "first-data": (first.data_offset + 4, f"'{first.name}'"),
        "last-tensor": (last.data_offset + last.n_bytes - 4, f"'{last.name}'"),
    }


@pytest.mark.parametrize("where", ["magic", "kv", "tensor-table", "first-data", "last-tensor"])
def test_truncated_tiny_gguf(tiny_gguf, tmp_path, where):
    src, _ = tiny_gguf
    keep, needle = gguf_cut_points(src)[where]
    dst = tmp_path / "cut.gguf"
    dst.write_bytes(src.read_bytes()[:keep])
    expect(LoadError, lambda: compscope.load(dst), str(dst), "truncated", *([needle] if needle else []))


def test_a_gguf_tensor_of_a_type_gguf_py_does_not_know(tiny_gguf, tmp_path):
    """A tensor whose GGML type id (here 99, written into its tensor-table entry) the installed gguf
    package does not know is refused when read, naming the file, the tensor and the id."""
    import struct

    src, _ = tiny_gguf
    data = bytearray(src.read_bytes())
    name = b"blk.0.attn_q.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)  # then n_dims, the dims, the type id
    (n_dims,) = struct.unpack_from("<I", data, at)
    struct.pack_into("<I", data, at + 4 + 8 * n_dims, 99)
    dst = tmp_path / "odd-type.gguf"
    dst.write_bytes(bytes(data))
    expect(LoadError, lambda: compscope.load(dst),
           f"{dst}: tensor 'blk.0.attn_q.weight' has GGML type type99, unknown to the installed 'gguf' package")


def test_corrupt_gguf_headers_give_compscope_errors(tiny_gguf, tmp_path):
    """300 seeded random corruptions of 1-4 header bytes: each file loads or raises a
    CompscopeError with a one-line message; nothing else escapes (struct/numpy/Unicode errors)."""
    import random
    import warnings

    from gguf import GGUFReader

    src, _ = tiny_gguf
    data = src.read_bytes()
    header_end = GGUFReader(str(src)).data_offset
    rng = random.Random(0)
    f = tmp_path / "corrupt.gguf"
    for _ in range(300):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(header_end)] = rng.randrange(256)
        f.write_bytes(bytes(b))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                compscope.load(f)
        except CompscopeError as e:
            assert "\n" not in str(e)


@pytest.mark.parametrize("fraction", [0.001, 0.5, 0.999999])
def test_truncated_smollm2_gguf(tmp_path, fraction):
    """A prefix of the real SmolLM2 file (cut in its tokenizer metadata, mid-data, at the end)."""
    pytest.importorskip("gguf")
    try:
        src = resolve("smollm2")
    except LoadError as e:
        pytest.skip(str(e))
    size = src.stat().st_size
    dst = tmp_path / "smol-cut.gguf"
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fo.write(fi.read(int(size * fraction)))
    msg = expect(LoadError, lambda: compscope.load(dst), str(dst))
    if fraction > 0.1:  # in the data: the first tensor cut off is named
        assert "tensor '" in msg


def test_not_a_gguf_file(tmp_path):
    f = tmp_path / "fake.gguf"
    f.write_bytes(b"NOPE" + bytes(100))
    expect(LoadError, lambda: compscope.load(f), str(f), "magic")
    e = tmp_path / "empty.gguf"
    e.write_bytes(b"")
    expect(LoadError, lambda: compscope.load(e), f"{e}: empty file, not a GGUF file")
    try:  # shorter than the magic: the header reader calls it cut; without it, nothing tells it from another file
        import gguf  # noqa: F401

        cut = "truncated GGUF file"
    except ImportError:
        cut = "reading GGUF files needs the 'gguf' package"
    for body, said in ((b"NOPE", "not a readable GGUF file: does not start with the GGUF magic"), (b"GGU", cut),
                       (b"NOP", cut), (b"N", cut)):
        f.write_bytes(body)
        expect(LoadError, lambda: compscope.load(f), f"{f}: {said}")
    other = tmp_path / "weights.bin"
    other.write_bytes(bytes(64))
    expect(LoadError, lambda: compscope.load(other), str(other), "unrecognised")


def test_a_gguf_file_without_the_gguf_package(tmp_path, monkeypatch):
    """Without the optional 'gguf' package a file with the GGUF magic is refused naming the file
    and the package to install; a file that is no GGUF file is still named as such."""
    real = tmp_path / "m.gguf"
    real.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + bytes(16))
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"NOPE" + bytes(100))
    for name in ("gguf", "gguf.constants", "gguf.quants"):
        monkeypatch.setitem(sys.modules, name, None)  # import of gguf now fails as where it is not installed
    expect(LoadError, lambda: compscope.load(real), str(real), "needs the 'gguf' package", "compscope[gguf]")
    expect(LoadError, lambda: compscope.load(fake), str(fake), "magic")


def test_unknown_gguf_architecture(tmp_path):
    f = tmp_path / "mamba.gguf"
    write_tiny_gguf(f, arch="mamba")
    expect(UnsupportedModelError, lambda: compscope.load(f), str(f), "'mamba'")


def test_gguf_missing_tensor_is_named(tmp_path):
    f = tmp_path / "m.gguf"
    write_tiny_gguf(f, edit=lambda g: g.pop("blk.1.attn_v.weight"))
    expect(WeightError, lambda: compscope.load(f), "'model.layers.1.self_attn.v_proj.weight' is missing from " + str(f) + " ")


def test_gguf_nonfinite_tensor_is_named(tmp_path):
    def poison(g):
        g["blk.0.attn_output.weight"] = g["blk.0.attn_output.weight"].copy()
        g["blk.0.attn_output.weight"][2, 1] = np.nan

    f = tmp_path / "nan.gguf"
    write_tiny_gguf(f, edit=poison)
    expect(WeightError, lambda: compscope.load(f), str(f), "blk.0.attn_output.weight", "NaN/Inf")


def test_gguf_mismatched_shape_is_named(tmp_path):
    f = tmp_path / "shape.gguf"
    write_tiny_gguf(f, edit=lambda g: g.update({"blk.1.attn_q.weight": np.zeros((D, D - 2), np.float32)}))
    expect(WeightError, lambda: compscope.load(f), str(f), "blk.1.attn_q.weight", f"({D}, {D - 2})")


def test_gguf_linear_rope_scaling_is_read(tmp_path):
    """Control for the refusals below: GGUF's linear rope scaling divides the frequencies."""
    gguf = pytest.importorskip("gguf")
    plain, scaled = tmp_path / "plain.gguf", tmp_path / "linear.gguf"
    write_tiny_gguf(plain)
    write_tiny_gguf(scaled, metadata=lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR),
                                               w.add_rope_scaling_factor(4.0)))
    expected = compscope.load(plain).rotary.inv_freq / 4.0
    torch.testing.assert_close(compscope.load(scaled).rotary.inv_freq, expected, rtol=1e-12, atol=0)


def test_gguf_unsupported_rope_is_refused(tmp_path):
    """YaRN without the original context it scales from, and YaRN with a factor on its attention factor (whose
    combination llama.cpp has changed), are refused by name."""
    gguf = pytest.importorskip("gguf")
    f = tmp_path / "scaled.gguf"
    write_tiny_gguf(f, metadata=lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.YARN),
                                          w.add_rope_scaling_factor(4.0)))
    expect(UnsupportedModelError, lambda: compscope.load(f), str(f),
           "rope scaling 'yarn' without GGUF metadata 'llama.rope.scaling.original_context_length'")
    g = tmp_path / "factor.gguf"
    write_tiny_gguf(g, metadata=lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.YARN),
                                          w.add_rope_scaling_factor(4.0), w.add_rope_scaling_orig_ctx_len(16),
                                          w.add_float32("llama.rope.scaling.yarn_attn_factor", 0.5)))
    expect(UnsupportedModelError, lambda: compscope.load(g), str(g),
           "GGUF metadata 'llama.rope.scaling.yarn_attn_factor' = 0.5 (a factor on YaRN's own attention factor) "
           "is not supported with YaRN")


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_gguf_rotary_divisors_must_be_positive(tmp_path, bad):
    f = tmp_path / "freqs.gguf"
    divisors = np.ones(D // N_HEADS // 2, np.float32)
    divisors[1] = bad
    write_tiny_gguf(f, edit=lambda g: g.update({"rope_freqs.weight": divisors}))
    expect(LoadError, lambda: compscope.load(f), str(f), "rope_freqs.weight", "positive")


# ---------------------------------------------------------------- built-ins, native, CLI
@pytest.mark.parametrize("name", ["smollm3", "gemma3", "SmolLM2"])
def test_unknown_builtin_name(name):
    msg = expect(LoadError, lambda: compscope.load(name), name)
    for b in BUILTINS:
        assert b in msg
    expect(LoadError, lambda: resolve(name), repr(name), *BUILTINS)


def test_an_unknown_name_without_huggingface_hub_lists_the_builtins_too(monkeypatch):
    """A name that is no built-in (a typo) where huggingface_hub is not installed: the error says it is
    not a built-in, with their names, besides what loading it from the hub would need."""
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails, as where it is not installed
    msg = expect(LoadError, lambda: compscope.load("smollm3"), "smollm3", "needs 'huggingface_hub'")
    for b in BUILTINS:
        assert b in msg


def test_bad_native_folder(tmp_path, llama_dir):
    d = native.save(compscope.load(llama_dir), tmp_path / "n")
    (d / "heads.safetensors").unlink()
    expect(LoadError, lambda: compscope.load(d), str(d / "heads.safetensors"))
    (d / "compscope.json").write_text("{oops")
    expect(LoadError, lambda: compscope.load(d), str(d / "compscope.json"))
    (d / "compscope.json").write_text(json.dumps({"format": "other", "version": 9, "fields": {}}))
    expect(LoadError, lambda: compscope.load(d), str(d / "compscope.json"), "'other'")


def test_nonfinite_native_tensor_is_named(tmp_path, llama_dir):
    from safetensors.torch import load_file, save_file

    d = native.save(compscope.load(llama_dir), tmp_path / "n")
    ts = load_file(str(d / "heads.safetensors"))
    ts["W_V"][1, 0, 2, 3] = float("nan")
    save_file(ts, str(d / "heads.safetensors"))
    expect(WeightError, lambda: compscope.load(d), "'W_V'", str(d / "heads.safetensors"))


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated:DeprecationWarning")
def test_a_nan_in_weights_built_in_python_is_named_whatever_built_them():
    """``HeadWeights`` refuses NaN/Inf wherever it is built: a TransformerLens model (whose
    weights no file check sees; it once loaded and scored silently), ``replace`` by hand, a norm's
    gain; the message names the tensor and the first bad index."""
    hw = compscope.load("induction-2l")
    expect(WeightError, lambda: hw.replace(W_O=hw.W_O.index_put((torch.tensor(1), torch.tensor(2)), torch.tensor(float("inf")))),
           "induction-2l: W_O has 1024 NaN/Inf values (the first at index (1, 2, 0, 0))")
    gains = torch.ones(2, hw.d_model)
    gains[1, 5] = float("nan")
    from compscope.core.heads import Norm

    expect(WeightError, lambda: hw.replace(attn_norm=Norm("rmsnorm", gains, None, 1e-5)),
           "attn_norm.weight has 1 NaN/Inf values (the first at index (1, 5))")
    torch.testing.assert_close(hw.replace(W_O=hw.W_O.clone()).W_O, hw.W_O)  # finite: as before
    tl = pytest.importorskip("transformer_lens")
    cfg = tl.HookedTransformerConfig(n_layers=2, d_model=16, n_ctx=8, d_head=4, n_heads=4, d_vocab=20, act_fn="relu",
                                     attn_only=True, seed=0)
    model = tl.HookedTransformer(cfg)
    with torch.no_grad():
        model.blocks[1].attn.W_V[2, 7, 1] = float("nan")  # (head, d_model, d_head)
    expect(WeightError, lambda: compscope.load(model), "W_V has 1 NaN/Inf values (the first at index (1, 2, 1, 7))")
    assert main(["scores", "--kinds", "K", "--top", "1"]) == 0  # nothing else refused


def test_unloadable_object():
    expect(LoadError, lambda: compscope.load(42), "int")
    import torch

    # a module that is no model compscope reads: the kinds it reads, named
    expect(LoadError, lambda: compscope.load(torch.nn.Linear(2, 2)),
           "cannot load a Linear: expected a path, a built-in name, a hub id, HeadWeights, a runner, or a transformers, "
           "TransformerLens or compscope toy model")
    # a runner loads as the weights it runs; an object with weights but no trace is no runner
    runner = compscope.runner_for("induction-2l", progress=False)
    assert compscope.load(runner) is runner.hw
    half = type("WeightsOnly", (), {"hw": runner.hw})()
    expect(LoadError, lambda: compscope.load(half), "cannot load a WeightsOnly: expected a path")


@pytest.mark.parametrize("make", ["missing", "no-config", "unknown-type", "truncated-gguf"])
def test_cli_info_bad_path_exits_2_with_one_line(make, tmp_path, capsys, llama_dir, tiny_gguf):
    if make == "missing":
        bad = tmp_path / "missing"
    elif make == "no-config":
        bad = tmp_path / "d"
        bad.mkdir()
    elif make == "unknown-type":
        bad = tmp_path / "u"
        shutil.copytree(llama_dir, bad)
        (bad / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    else:
        bad = tmp_path / "t.gguf"
        bad.write_bytes(tiny_gguf[0].read_bytes()[:-10])
    rc = main(["info", str(bad)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("compscope: error: ") and str(bad) in lines[0], err


def test_cli_info_good_path(capsys, llama_dir):
    assert main(["info", str(llama_dir)]) == 0
    out, err = capsys.readouterr()
    assert "layers" in out and err == ""


def test_cli_process_exit_code(tmp_path):
    """The real process: exit status 2 and exactly one stderr line (no traceback)."""
    import subprocess
    import sys

    bad = tmp_path / "missing.gguf"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "compscope.cli.main", "info", str(bad)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("compscope: error: ") and str(bad) in proc.stderr


@pytest.mark.parametrize("types, exc, needles", [
    ([[["global", "sparse"], 1]], UnsupportedModelError, ("attention types ['sparse']", "global, local")),
    ([[["global", "local"], 2]], LoadError, ("attention_types lists 4 layers", "num_layers is 2")),
    ([["global", 1]], LoadError, ("attention_types",)),
])
def test_gpt_neo_attention_types_are_checked(tmp_path, types, exc, needles):
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    folder = tmp_path / "neo"
    build(BY_ID["gpt-neo-local3"]).save_pretrained(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["attention_types"] = types
    cfg.pop("attention_layers", None)
    (folder / "config.json").write_text(json.dumps(cfg))
    expect(exc, lambda: compscope.load(folder), str(folder), *needles)


def test_a_bias_beside_a_weight_read_but_itself_unread_is_refused(tmp_path, monkeypatch):
    """The guard against a family reading too little (GPT-J's processed biases went unread for a
    while): a bias stored beside an attention weight the family read, left out by the family, is
    refused by name. Here GPT-J's reader is made to skip the q/k/v biases a file carries."""
    import compscope.loading.families.base as base
    from hf_tiny import BY_ID, build
    from safetensors.torch import load_file, save_file

    build(BY_ID["gptj-interleaved-rotary"]).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    for l in range(2):
        for x in "qkv":
            w = sd[f"transformer.h.{l}.attn.{x}_proj.weight"]
            sd[f"transformer.h.{l}.attn.{x}_proj.bias"] = torch.full((w.shape[0],), 0.5)
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    from compscope.loading.families import family_for
    from compscope.loading.formats.safetensors_folder import open_folder

    ckpt = open_folder(tmp_path)
    assert float(family_for(ckpt.config, "").convert(ckpt).b_Q.abs().min()) == 0.5  # the family reads them

    real = base.head_rows
    monkeypatch.setattr(base, "head_rows", lambda *a, **k: real(*a, **{**k, "bias": False}))
    with pytest.raises(UnsupportedModelError, match=r"model\.safetensors: 'transformer\.h\.0\.attn\.k_proj\.bias', "
                       r"'transformer\.h\.0\.attn\.q_proj\.bias', .* and 3 more present but not read by the gptj family"):
        compscope.load(tmp_path)


def test_a_stray_unembedding_bias_is_left_alone(tmp_path):
    """An ``lm_head.bias`` a Llama-like file carries is a per-token logit offset that no score reads
    (the family does not read it): it loads."""
    from hf_tiny import BY_ID, build
    from safetensors.torch import load_file, save_file

    build(BY_ID["llama-mha"]).save_pretrained(tmp_path)
    sd = load_file(tmp_path / "model.safetensors")
    assert "lm_head.weight" in sd
    sd["lm_head.bias"] = torch.ones(sd["lm_head.weight"].shape[0])
    save_file(sd, tmp_path / "model.safetensors", metadata={"format": "pt"})
    assert compscope.load(tmp_path).W_U is not None


def test_a_folder_named_like_a_built_in_says_it_hides_it(tmp_path, monkeypatch):
    """A folder in the working directory comes first; when it is not a model (a verdict saved
    under the model's name), the error says which built-in it hides."""
    (tmp_path / "gemma3-270m").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(compscope.LoadError, match="hides the built-in model 'gemma3-270m'"):
        compscope.load("gemma3-270m")
    with pytest.raises(compscope.LoadError, match=r"config.json not found \(a HuggingFace folder needs one\)$"):
        compscope.load("other")
