"""GGUF files (llama.cpp) via the ``gguf`` package: dequantise to float32, rename to HF names.

GGUF stores each 2-D tensor as ``(out, in)`` once read into numpy, like ``nn.Linear``. For the
``llama`` architecture, llama.cpp's converter reorders the rows of ``W_Q`` and ``W_K`` within
each head from HF's rotate-half layout ``[x_0..x_{n/2-1} | x_{n/2}..]`` to interleaved pairs
``[x_0, x_{n/2}, x_1, ...]``. That reordering leaves ``W_Q^T W_K`` unchanged but pairs the
wrong dims under rotary, so it is undone here. Gemma GGUFs store every RMSNorm gain as
``1 + w``; ``w`` is recovered so that the Gemma families (which add the 1) read it unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ..checkpoint import Checkpoint, TensorStore
from ..errors import LoadError, UnsupportedModelError

#: GGUF metadata key (after ``{arch}.``) -> HF config key
_CONFIG_KEYS = {
    "embedding_length": "hidden_size",
    "block_count": "num_hidden_layers",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.sliding_window": "sliding_window",
    "rope.freq_base": "rope_theta",
    "vocab_size": "vocab_size",
}

#: GGUF architecture -> (HF model_type, rows permuted for rotary, norms stored as 1 + w)
_ARCHS = {
    "llama": ("llama", True, False),
    "qwen2": ("qwen2", False, False),
    "gemma": ("gemma", False, True),
    "gemma3": ("gemma3_text", False, True),
}

#: GGUF per-block tensor name -> HF name under ``model.layers.{i}.``
_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
}
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight", "output_norm.weight": "model.norm.weight"}


def unpermute_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's per-head interleave of rotary rows (inverse of its ``permute``)."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def _field(reader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def open_gguf(path: str | Path) -> Checkpoint:
    try:
        from gguf import GGUFReader
        from gguf.quants import dequantize
    except ImportError as e:
        raise LoadError("reading GGUF files needs the 'gguf' package: pip install 'compscope[gguf]'") from e
    path = Path(path)
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # truncated or corrupt: numpy/memmap errors of many kinds
        raise LoadError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from e
    arch = _field(reader, "general.architecture")
    if arch not in _ARCHS:
        raise UnsupportedModelError(f"{path}: GGUF architecture {arch!r} is not supported (supported: {', '.join(_ARCHS)})")
    model_type, permuted, one_plus = _ARCHS[arch]
    cfg: dict = {"model_type": model_type}
    for gkey, hkey in _CONFIG_KEYS.items():
        v = _field(reader, f"{arch}.{gkey}")
        if v is not None:
            cfg[hkey] = v
    n_heads, n_kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads") or cfg.get("num_attention_heads")
    if n_heads is None:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.head_count' is missing")
    if arch in ("llama", "qwen2"):  # rotary covers the whole head; GGUF says how wide
        cfg.pop("head_dim", None)
        rope_dim = _field(reader, f"{arch}.rope.dimension_count")
        if rope_dim is not None and rope_dim != cfg["hidden_size"] // n_heads:
            cfg["head_dim"] = rope_dim
    if "vocab_size" not in cfg:
        toks = reader.fields.get("tokenizer.ggml.tokens")
        if toks is not None:
            cfg["vocab_size"] = len(toks.data)

    loaders, origin, dtypes = {}, {}, {}
    block = re.compile(r"blk\.(\d+)\.(.+)$")
    for t in reader.tensors:
        m = block.match(t.name)
        if m:
            sub = _BLOCK.get(m.group(2))
            hf = None if sub is None else f"model.layers.{m.group(1)}.{sub}"
        else:
            hf = _TOP.get(t.name)
        if hf is None:
            continue
        is_norm = hf.endswith("norm.weight")
        n_rows = n_heads if hf.endswith("q_proj.weight") else n_kv if hf.endswith("k_proj.weight") else None

        def load(t=t, n_rows=n_rows, is_norm=is_norm):
            shape = tuple(int(s) for s in reversed(t.shape))
            try:
                a = dequantize(t.data, t.tensor_type)
            except Exception as e:
                raise LoadError(f"{path}: tensor '{t.name}' cannot be dequantised ({e})") from e
            w = torch.from_numpy(np.array(a, dtype=np.float32)).reshape(shape)  # own, writable copy
            if permuted and n_rows is not None:
                w = unpermute_rows(w, n_rows)
            if one_plus and is_norm:
                w = w - 1.0
            return w

        loaders[hf] = load
        origin[hf] = f"{path} ({t.name})"
        dtypes[hf] = t.tensor_type.name
    name = _field(reader, "general.name") or path.stem
    notes = [f"dequantised from GGUF to float32"]
    return Checkpoint(cfg, TensorStore(loaders, origin, dtypes), str(path), str(name), notes)
