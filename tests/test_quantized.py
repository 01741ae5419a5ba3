"""Quantised weights: float8 weights are read times their scales (per tensor, per row, per block, per
group of inputs), checked against an element-by-element loop and against the same model saved in
float32; every other quantisation scheme, and a float8 tensor without a scale, is refused by name."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import compscope
from compscope import LoadError, UnsupportedModelError, WeightError
from compscope.loading.checkpoint import TensorStore
from compscope.loading.quantized import check_scheme, dequantising


def _looped(q: torch.Tensor, s: torch.Tensor, b0: int, b1: int) -> np.ndarray:
    """``q[i, j] · s[i // b0, j // b1]`` element by element, in float32."""
    qn, sn = q.float().numpy(), s.float().numpy()
    out = np.empty(qn.shape, np.float32)
    for i in range(qn.shape[0]):
        for j in range(qn.shape[1]):
            out[i, j] = np.float32(qn[i, j]) * np.float32(sn[i // b0, j // b1])
    return out


def _fp8(shape, seed: int) -> torch.Tensor:
    """Float8 values of a seeded draw (whatever rounding float8 does to it)."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 20).to(torch.float8_e4m3fn)


def _read(q: torch.Tensor, scales: dict, block=None) -> torch.Tensor:
    """``w``, stored as ``q`` with the tensors ``scales`` beside it, as a store reads it."""
    tensors = {"w": q, **scales}
    return TensorStore.from_dict(tensors, "f").dequantised(block).take("w")


@pytest.mark.parametrize("shape, scale_shape, block", [
    ((7, 10), (4, 3), (2, 4)),      # blocks, ragged at the last row and column (7 = 2+2+2+1, 10 = 4+4+2)
    ((6, 8), (1, 1), None),         # one scale for the tensor
    ((6, 8), (6, 1), None),         # one per row (output channel)
    ((6, 8), (1, 8), None),         # one per column
    ((6, 8), (6, 2), (1, 4)),       # groups of 4 inputs per row
    ((6, 8), (1, 1), (128, 128)),   # one block holds it all: the same as one scale
])
def test_float8_times_its_scale_block_by_block(shape, scale_shape, block):
    q = _fp8(shape, 0)
    s = torch.rand(scale_shape, generator=torch.Generator().manual_seed(1)) + 0.5
    b0, b1 = block or (-(-shape[0] // scale_shape[0]), -(-shape[1] // scale_shape[1]))
    want = _looped(q, s, b0, b1)
    for name in ("w_scale_inv", "w_scale"):
        got = _read(q, {name: s}, block)
        assert got.dtype == torch.float32 and np.array_equal(got.numpy(), want)


def test_scales_given_as_a_vector_or_a_number():
    q = _fp8((5, 3), 2)
    rows = torch.tensor([1.0, 2.0, 0.5, 4.0, 0.25])
    assert np.array_equal(_read(q, {"w_scale": rows}).numpy(), _looped(q, rows[:, None], 1, 3))
    assert np.array_equal(_read(q, {"w_scale": torch.tensor(3.0)}).numpy(), q.float().numpy() * np.float32(3.0))
    bias = _fp8((5,), 3)
    got = TensorStore.from_dict({"b": bias, "b_scale": torch.tensor([2.0])}, "f").dequantised().take("b")
    assert torch.equal(got, bias.float() * 2)
    each = torch.tensor([1.0, 2.0, 0.5, 4.0, 0.25])  # a scale per entry of the vector
    got = TensorStore.from_dict({"b": bias, "b_scale": each}, "f").dequantised().take("b")
    assert torch.equal(got, bias.float() * each)


def test_blocks_the_config_does_not_state_are_not_guessed():
    """Blocks of 128 rows on 200 give 2 scales, as blocks of 100 would: without a stated block the
    scale's shape does not say which, so it is refused, not guessed; stated, it is read."""
    q, s = _fp8((200, 8), 0), torch.tensor([[2.0], [3.0]])
    with pytest.raises(LoadError, match=r"scale 'w_scale_inv' has shape \(2, 1\), which fits no blocks of 'w' \(200, 8\) "
                                        r"that the config states \(weight_block_size, or a group size\)"):
        _read(q, {"w_scale_inv": s})
    assert np.array_equal(_read(q, {"w_scale_inv": s}, (128, 128)).numpy(), _looped(q, s, 128, 128))
    assert not np.array_equal(_looped(q, s, 128, 128), _looped(q, s, 100, 8))  # the two readings differ


def test_a_scale_that_fits_no_blocks_is_refused_naming_both():
    q = _fp8((7, 10), 0)
    with pytest.raises(LoadError, match=r"f: scale 'w_scale_inv' has shape \(3, 3\), which fits no blocks of 2 x 4 of 'w' "
                                        r"\(7, 10\)"):
        _read(q, {"w_scale_inv": torch.ones(3, 3)}, (2, 4))
    with pytest.raises(LoadError, match=r"scale 'w_scale' has shape \(3, 4, 1\)"):
        _read(q, {"w_scale": torch.ones(3, 4, 1)})


def test_float8_without_a_scale_is_refused_not_read_as_unscaled():
    q = _fp8((4, 4), 0)
    with pytest.raises(LoadError, match=r"f: tensor 'w' is stored in float8_e4m3fn with no scale beside it "
                                        r"\('w_scale_inv' or 'w_scale'\)"):
        _read(q, {})
    with pytest.raises(WeightError, match="'w' is stored in torch.float8_e4m3fn and no scale was applied"):
        TensorStore.from_dict({"w": q}, "f").take("w")  # a store that dequantises nothing still refuses it


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32])
def test_integer_weights_are_refused_not_cast(dtype):
    """Integers where a weight should be (int8 weights saved without a scheme in the config, packed
    4-bit words) are refused, not cast to float as if they were the weights."""
    store = TensorStore.from_dict({"w": torch.ones(3, 4, dtype=dtype)}, "f")
    with pytest.raises(WeightError, match=f"f: tensor 'w' is stored as {str(dtype)[6:]}, not as floating-point numbers"):
        store.take("w")


def test_other_tensors_are_read_as_before():
    t = {"a": torch.randn(3, 4), "b": torch.randn(4).half()}
    store = TensorStore.from_dict(t, "f").dequantised()
    assert torch.equal(store.take("a"), t["a"]) and torch.equal(store.take("b"), t["b"].float())


@pytest.mark.parametrize("config, needle", [
    ({"quant_method": "gptq", "bits": 4}, "'gptq'"),
    ({"quant_method": "awq", "bits": 4}, "'awq'"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "'bitsandbytes'"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized"}, "'compressed-tensors' \\(format 'pack-quantized'\\)"),
    ({"bits": 4}, "\\{'bits': 4\\}"),
])
def test_other_quantisation_schemes_are_refused_by_name(config, needle):
    with pytest.raises(UnsupportedModelError, match=f"m/config.json: weights quantised with {needle} \\(quantization_config\\): "
                       ".*give it the model's unquantised weights"):
        check_scheme({"quantization_config": config}, "m/config.json")


def test_float8_schemes_and_their_blocks_are_taken():
    assert check_scheme({}, "m") == (None, [])
    assert check_scheme({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}}, "m") == (
        (128, 64), ["float8 weights read times their scales ('fp8' quantization, a scale per 128 x 64 block)"])
    assert check_scheme({"quantization_config": {"quant_method": "fbgemm_fp8"}}, "m") == (
        None, ["float8 weights read times their scales ('fbgemm_fp8' quantization)"])
    assert check_scheme({"quantization_config": {"quant_method": "fp8"}}, "m")[0] == (128, 128)  # transformers' default
    ct = {"quant_method": "compressed-tensors", "format": "float-quantized"}
    assert check_scheme({"quantization_config": ct}, "m")[0] is None
    group = lambda **w: {"weights": {"num_bits": 8, "type": "float", **w}}  # noqa: E731
    assert check_scheme({"quantization_config": {**ct, "config_groups": {"g": group(group_size=64)}}}, "m")[0] == (1, 64)
    assert check_scheme({"quantization_config": {**ct, "config_groups": {"g": group(block_structure=[32, 16])}}},
                        "m")[0] == (32, 16)
    with pytest.raises(UnsupportedModelError, match=r"m: quantization_config's groups scale weights in blocks of several "
                                                    r"sizes \(\(1, 32\), \(1, 64\)\)"):
        check_scheme({"quantization_config": {**ct, "config_groups": {"a": group(group_size=64),
                                                                      "b": group(group_size=32)}}}, "m")
    assert check_scheme({"quantization_config": {"quant_method": "gguf"}}, "m") == (None, [])  # floats already

    class Method:  # a model object's config holds transformers' enum, whose value is the name
        value = "gguf"
    assert check_scheme({"quantization_config": {"quant_method": Method()}}, "m") == (None, [])
    for bad in ([128], [128, 0], [128, "64"], [64.0, 64], (128, 128, 1), "128x128"):
        with pytest.raises(LoadError, match=rf"^m: quantization_config\.weight_block_size={re.escape(repr(bad))}: "
                                            r"expected two positive integers$"):
            check_scheme({"quantization_config": {"quant_method": "fp8", "weight_block_size": bad}}, "m")
    assert check_scheme({"quantization_config": {"quant_method": "fp8", "weight_block_size": (1, 1)}}, "m")[0] == (1, 1)
    # groups that state no weights, or are no tables at all, state no block
    assert check_scheme({"quantization_config": {**ct, "config_groups": {"a": {"weights": None}, "b": {}, "c": "x",
                                                                         "d": group(num_bits=8)}}}, "m")[0] is None


def test_dequantising_leaves_the_given_loaders_as_they_are():
    q = _fp8((2, 2), 0)
    loaders = {"w": lambda: q, "w_scale": lambda: torch.tensor(2.0)}
    new = dequantising(loaders, {"w": "f8_e4m3", "w_scale": "f32"}, {"w": "f"})
    assert loaders["w"]() is q and torch.equal(new["w"](), q.float() * 2)


def _folders(tmp_path, block: tuple[int, int]):
    """A tiny Llama saved three times: as it is (``plain``), in float8 with block scales (``quantization_config`` fp8) and in
    float32 with the very weights the float8 ones stand for (``q · s``, computed element by element)."""
    pytest.importorskip("transformers")
    from safetensors.torch import load_file, save_file

    from hf_tiny import BY_ID, build

    model = build(BY_ID["llama-gqa-bias"])
    model.save_pretrained(tmp_path / "plain", safe_serialization=True)
    sd = load_file(str(tmp_path / "plain" / "model.safetensors"))
    quant, exact = {}, {}
    for k, v in sd.items():
        if k.endswith("_proj.weight"):
            rows, cols = -(-v.shape[0] // block[0]), -(-v.shape[1] // block[1])
            padded = torch.zeros(rows * block[0], cols * block[1])
            padded[: v.shape[0], : v.shape[1]] = v.abs()
            s = padded.reshape(rows, block[0], cols, block[1]).amax((1, 3)) / 448  # each block's largest at float8's
            q = (v / s.repeat_interleave(block[0], 0)[: v.shape[0]].repeat_interleave(block[1], 1)[:, : v.shape[1]])
            q = q.to(torch.float8_e4m3fn)
            quant[k], quant[k + "_scale_inv"] = q, s
            exact[k] = torch.from_numpy(_looped(q, s, *block))
        else:
            quant[k] = exact[k] = v
    cfg = json.loads((tmp_path / "plain" / "config.json").read_text())
    for name, tensors, extra in (("fp8", quant, {"quantization_config": {"quant_method": "fp8", "weight_block_size": list(block)}}),
                                 ("exact", exact, {})):
        (tmp_path / name).mkdir()
        save_file(tensors, str(tmp_path / name / "model.safetensors"), metadata={"format": "pt"})
        (tmp_path / name / "config.json").write_text(json.dumps({**cfg, **extra}))


def test_a_float8_folder_reads_as_the_float32_weights_it_stands_for(tmp_path):
    """Before, the float8 values were read as they were, unscaled (a W_Q up to 448 where the model's is
    below 1), and every score computed from them."""
    _folders(tmp_path, (16, 8))
    fp8, exact = compscope.load(tmp_path / "fp8"), compscope.load(tmp_path / "exact")
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E"):
        assert torch.equal(getattr(fp8, name), getattr(exact, name)), name
    plain = compscope.load(tmp_path / "plain")  # and near the unquantised model (float8 keeps 3 bits of mantissa)
    assert torch.allclose(fp8.W_Q, plain.W_Q, rtol=0.07, atol=float(plain.W_Q.abs().max()) * 0.02)
    assert "f8_e4m3" in fp8.meta.source_dtype
    assert "float8 weights read times their scales ('fp8' quantization, a scale per 16 x 8 block)" in fp8.meta.notes
    a, b = compscope.scores(tmp_path / "fp8", "K", progress=False), compscope.scores(tmp_path / "exact", "K", progress=False)
    for key, v in a.values.items():
        torch.testing.assert_close(v, b.values[key], rtol=0, atol=0, equal_nan=True)


def test_a_quantised_model_object_is_refused_by_its_scheme():
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    model = build(BY_ID["llama-mha"])
    model.config.quantization_config = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    with pytest.raises(UnsupportedModelError, match="LlamaForCausalLM object: weights quantised with 'bitsandbytes'"):
        compscope.load(model)
