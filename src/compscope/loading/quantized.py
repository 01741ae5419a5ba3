"""Weights stored quantised in a HuggingFace folder or model object (its ``quantization_config``).

Float8 weights are dequantised to float32 as they are read, each multiplied by its scale:
``W[i, j] = q[i, j] · s[i // b₀, j // b₁]``, where the scale ``s`` of a ``(out, in)`` weight is
``(⌈out/b₀⌉, ⌈in/b₁⌉)``: one number (per tensor), one per row (per channel), one per block
(transformers' ``fp8``, as DeepSeek-V3 and Qwen3-FP8 store them: ``weight_scale_inv``, blocks of
``weight_block_size``, 128 x 128 where unstated, as transformers) or per group of inputs
(``compressed-tensors``' ``weight_scale``, its groups' ``group_size`` or ``block_structure``). Blocks
the config does not state are not guessed from shapes (two scales on 200 rows are blocks of 128 or
of 100). Every
other scheme (packed integers: GPTQ, AWQ, bitsandbytes, ...) is refused by name (a model object
that transformers loaded from a GGUF file holds plain floats, and is read as it is). A float8 tensor
without a scale beside it, and integers where a weight should be, are refused when read: never taken
as if they were the weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from torch import Tensor

from ..errors import LoadError, UnsupportedModelError

#: how a stored dtype is named (safetensors' names lower-cased, and torch's) where it is float8
FLOAT8 = frozenset({"f8_e4m3", "f8_e5m2", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"})
#: quantization methods whose weights compscope dequantises: float8 with scales
FLOAT8_METHODS = ("fp8", "fbgemm_fp8", "compressed-tensors")
#: quantization methods whose weights a model object holds as plain floats: transformers dequantises a
#: GGUF file as it loads it (its config keeps ``quant_method`` 'gguf')
DEQUANTISED_ON_LOAD = ("gguf",)
#: the scale block of transformers' ``fp8`` method where its config states none
FP8_BLOCK = [128, 128]


def check_scheme(cfg: dict, where: str) -> tuple[tuple[int, int] | None, list[str]]:
    """``(block, notes)``: the ``(rows, columns)`` of a scale block that ``cfg``'s ``quantization_config``
    states (``weight_block_size``, ``fp8``'s default, or ``compressed-tensors``' group; None: none stated,
    so only scales per tensor, row, column or entry are read), and the card's note on it; a scheme other
    than float8 with scales is refused, naming ``where`` and the method."""
    q = cfg.get("quantization_config")
    if not q:
        return None, []
    method = q.get("quant_method") if isinstance(q, dict) else None
    method = getattr(method, "value", method)  # a model object's config holds transformers' enum
    fmt = q.get("format") if isinstance(q, dict) else None
    if method in DEQUANTISED_ON_LOAD:
        return None, []
    if method not in FLOAT8_METHODS or (method == "compressed-tensors" and fmt != "float-quantized"):
        said = f"'{method}'" + (f" (format '{fmt}')" if fmt else "") if method else f"{q!r}"
        raise UnsupportedModelError(
            f"{where}: weights quantised with {said} (quantization_config): compscope reads float weights, and float8 "
            "ones with their scales (fp8, fbgemm_fp8, compressed-tensors float-quantized); give it the model's "
            "unquantised weights")
    block = q.get("weight_block_size")
    if block is None and method == "compressed-tensors":
        block = _group_block(q, where)
    if block is None and method == "fp8":
        block = FP8_BLOCK
    note = f"float8 weights read times their scales ('{method}' quantization)"
    if block is None:
        return None, [note]
    if not (isinstance(block, (list, tuple)) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        raise LoadError(f"{where}: quantization_config.weight_block_size={block!r}: expected two positive integers")
    return (int(block[0]), int(block[1])), [f"{note[:-1]}, a scale per {block[0]} x {block[1]} block)"]


def _group_block(q: dict, where: str) -> list[int] | None:
    """The block of ``compressed-tensors``' weight scales: its groups' ``block_structure``, or
    ``(1, group_size)``; None where no group states one; several different ones refused."""
    found = set()
    for group in (q.get("config_groups") or {}).values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("block_structure"):
            found.add(tuple(weights["block_structure"]))
        elif isinstance(weights, dict) and weights.get("group_size"):
            found.add((1, weights["group_size"]))
    if len(found) > 1:
        raise UnsupportedModelError(f"{where}: quantization_config's groups scale weights in blocks of several sizes "
                                    f"({', '.join(map(str, sorted(found)))}); compscope reads one")
    return list(found.pop()) if found else None


def dequantising(loaders: dict[str, Callable[[], Tensor]], dtypes: dict[str, str], origin: dict[str, str],
                 block: tuple[int, int] | None = None) -> dict[str, Callable[[], Tensor]]:
    """``loaders`` with every float8 tensor's loader returning it dequantised, float32, by the scale
    stored beside it (``NAME_scale_inv`` or ``NAME_scale``; ``block``: the scale's block, when the
    config states it); a float8 tensor without either loads as an error naming it."""
    out = dict(loaders)
    for name, dtype in dtypes.items():
        if dtype.lower() not in FLOAT8:
            continue
        scale = next((s for s in (f"{name}_scale_inv", f"{name}_scale") if s in loaders), None)
        out[name] = (lambda n=name, s=scale, d=dtype: _dequantised(n, loaders[n](), s, None if s is None else loaders[s](),
                                                                   block, origin.get(n, "?"), d))
    return out


def _dequantised(name: str, q: Tensor, scale_name: str | None, scale: Tensor | None, block: tuple[int, int] | None,
                 where: str, dtype: str) -> Tensor:
    """``q`` (float8) times its ``scale`` broadcast over blocks, float32 (module docstring)."""
    if scale is None:
        raise LoadError(f"{where}: tensor '{name}' is stored in {dtype} with no scale beside it ('{name}_scale_inv' or "
                        f"'{name}_scale'): compscope does not read float8 weights as if they were unscaled")
    w = q.float()
    s = scale.float()
    if w.ndim == 1:  # a float8 vector (a bias): one scale or one per entry
        if s.numel() not in (1, w.shape[0]):
            raise LoadError(f"{where}: scale '{scale_name}' has shape {tuple(s.shape)}, which fits no blocks of "
                            f"'{name}' {tuple(w.shape)}")
        return w * s.reshape(-1)
    s = s.reshape(1, 1) if s.numel() == 1 else s.reshape(-1, 1) if s.ndim == 1 else s
    rows, cols = w.shape[-2:]
    matrices = w.ndim == 2 and s.ndim == 2
    if matrices and block is not None and s.shape == (math.ceil(rows / block[0]), math.ceil(cols / block[1])):
        b0, b1 = block
    elif matrices and s.shape[0] in (1, rows) and s.shape[1] in (1, cols):
        b0, b1 = rows // s.shape[0], cols // s.shape[1]  # per tensor, row, column or entry: no block to know
    else:  # blocks the config does not state are not guessed: 2 scales on 200 rows are blocks of 128 or of 100
        stated = f"of {block[0]} x {block[1]} " if block is not None else ""
        raise LoadError(f"{where}: scale '{scale_name}' has shape {tuple(scale.shape)}, which fits no blocks {stated}of "
                        f"'{name}' {tuple(q.shape)}" + ("" if block else " that the config states (weight_block_size, "
                                                               "or a group size): the blocks it scales are not known"))
    return w * s.repeat_interleave(b0, 0)[:rows].repeat_interleave(b1, 1)[:, :cols]
