"""Valid small inputs of every kind compscope reads, and hypothesis strategies that break them.

Shared by ``test_fuzz.py``. Each ``base_*`` writes one valid input into a folder; each
``mutate_*`` strategy draws an edit and applies it in place. A GGUF file is written by a small
serialiser here (not ``gguf.GGUFWriter``), so that any header field can be set to anything,
including what the writer would refuse.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import torch
from hypothesis import strategies as st

# ---------------------------------------------------------------- JSON values that break configs
HUGE = [2**31, 2**40, 2**62, 2**64 + 1, 10**30]
weird_numbers = st.sampled_from([0, -1, -7, 3, 5, 7, 1.5, 8.5, 1e-300, 1e300, float("nan"), float("inf"), -0.0, *HUGE])
json_leaf = st.one_of(st.none(), st.booleans(), weird_numbers, st.integers(-10, 100), st.text(max_size=6),
                      st.sampled_from(["", "llama", "gpt2", "bert", "half", "pre", "float32"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                          max_leaves=6)


def deep_json(depth: int) -> str:
    """A list nested ``depth`` deep (Python's json recurses once per level)."""
    return "[" * depth + "]" * depth


@st.composite
def json_edit(draw, doc: dict, extra_keys: tuple[str, ...] = ()) -> tuple:
    """An edit of one key of ``doc`` (nested dicts reached through dotted paths): delete it,
    set it to a strange value, or add an unknown key."""
    paths = []

    def walk(d, prefix):
        for k, v in d.items():
            paths.append(prefix + (k,))
            if isinstance(v, dict):
                walk(v, prefix + (k,))

    walk(doc, ())
    path = draw(st.sampled_from(paths + [(k,) for k in extra_keys] + [("an_unknown_key",)]))
    action = draw(st.sampled_from(["set", "set", "set", "delete"]))
    value = draw(json_value) if action == "set" else None
    return path, action, value


def apply_edit(doc: dict, edit: tuple) -> dict:
    path, action, value = edit
    doc = json.loads(json.dumps(doc))
    d = doc
    for k in path[:-1]:
        if not isinstance(d.get(k), dict):
            d[k] = {}
        d = d[k]
    if action == "delete":
        d.pop(path[-1], None)
    else:
        d[path[-1]] = value
    return doc


# ---------------------------------------------------------------- safetensors files
def safetensors_bytes(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def split_safetensors(raw: bytes) -> tuple[dict, bytes]:
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


@st.composite
def safetensors_edit(draw, header: dict) -> tuple:
    """An edit of a safetensors file: a header field of one tensor, the header length, or the
    data (bytes flipped, cut short)."""
    names = [k for k in header if k != "__metadata__"]
    kind = draw(st.sampled_from(["dtype", "shape", "offsets", "length", "flip", "cut", "header_junk"]))
    name = draw(st.sampled_from(names))
    if kind == "dtype":
        return kind, name, draw(st.sampled_from(["F8_E4M3", "F8_E5M2", "I8", "U8", "BOOL", "F64", "F16", "BF16", "I64", "C64", "X", 7]))
    if kind == "shape":
        return kind, name, draw(st.one_of(json_value, st.lists(st.sampled_from([0, 1, -1, 2, 3, 2**40, 2**62]), max_size=4)))
    if kind == "offsets":
        return kind, name, draw(st.one_of(json_value, st.lists(st.integers(-5, 10**6), min_size=2, max_size=2),
                                          st.lists(st.sampled_from([0, 2**40, 2**63, 2**64 + 3]), min_size=2, max_size=2)))
    if kind == "length":
        return kind, name, draw(st.sampled_from([0, 1, 7, 2**31, 2**62, 2**64 - 1]))
    if kind == "flip":
        return kind, name, draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=8))
    if kind == "cut":
        return kind, name, draw(st.integers(0, 10**6))
    return kind, name, draw(st.sampled_from(["{", "null", "[]", deep_json(100_000), '{"a": 1}', "\xff"]))


def apply_safetensors_edit(file: Path, edit: tuple) -> None:
    raw = file.read_bytes()
    kind, name, value = edit
    try:
        header, data = split_safetensors(raw)
        ok = isinstance(header, dict) and isinstance(header.get(name), dict)
    except (ValueError, struct.error, RecursionError):
        ok = False
    if not ok and kind not in ("flip", "cut"):  # an earlier edit broke the header: byte edits only
        return
    if kind in ("dtype", "shape", "offsets"):
        header[name][{"dtype": "dtype", "shape": "shape", "offsets": "data_offsets"}[kind]] = value
        file.write_bytes(safetensors_bytes(header, data))
    elif kind == "length":
        file.write_bytes(struct.pack("<Q", value) + raw[8:])
    elif kind == "flip":
        b = bytearray(raw)
        for i in value:
            b[i % len(b)] ^= 0xFF
        file.write_bytes(bytes(b))
    elif kind == "cut":
        file.write_bytes(raw[: value % max(1, len(raw))])
    else:
        h = value.encode("utf-8", "surrogatepass") if value != "\xff" else b"\xff\xfe"
        file.write_bytes(struct.pack("<Q", len(h)) + h + data)


# ---------------------------------------------------------------- GGUF files (own serialiser)
GGUF_TYPES = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8, "arr": 9,
              "u64": 10, "i64": 11, "f64": 12}
_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _gguf_str(s: str | bytes) -> bytes:
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf_value(type_id: int, value) -> bytes:
    if type_id == 8:
        return _gguf_str(value)
    if type_id == 9:
        item_type, items = value
        return struct.pack("<IQ", item_type, len(items)) + b"".join(_gguf_value(item_type, v) for v in items)
    return struct.pack("<" + _FMT[type_id], value)


def gguf_file(meta: list, tensors: list) -> bytes:
    """A GGUF file: ``meta`` as (key, type id, value) (arrays: ``(item type id, items)``),
    ``tensors`` as dicts with ``name``, ``dims`` (GGUF order), ``type``, ``data`` and optional
    ``offset`` (default: aligned, in order; alignment 32)."""
    return _write(meta, tensors, 32, 3, None, None)


def llama_gguf_parts(d=16, H=4, G=2, L=2, V=32, seed=0) -> tuple[list, list]:
    """Metadata and F32 tensors of a tiny llama GGUF."""
    g = np.random.default_rng(seed)
    r = d // H
    meta = [("general.architecture", 8, "llama"), ("general.name", 8, "fuzz-llama"), ("general.alignment", 4, 32),
            ("llama.embedding_length", 4, d), ("llama.block_count", 4, L), ("llama.attention.head_count", 4, H),
            ("llama.attention.head_count_kv", 4, G), ("llama.context_length", 4, 64), ("llama.rope.freq_base", 6, 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5), ("llama.rope.dimension_count", 4, r),
            ("tokenizer.ggml.tokens", 9, (8, [f"t{i}" for i in range(V)]))]
    f32 = lambda *shape: g.standard_normal(shape).astype("<f4")  # noqa: E731
    tensors = [dict(name="token_embd.weight", dims=(d, V), type=0, data=f32(V, d).tobytes()),
               dict(name="output_norm.weight", dims=(d,), type=0, data=(1 + f32(d) * 0.1).tobytes())]
    for i in range(L):
        for sub, shape in (("attn_norm.weight", (d,)), ("attn_q.weight", (d, H * r)), ("attn_k.weight", (d, G * r)),
                           ("attn_v.weight", (d, G * r)), ("attn_output.weight", (H * r, d))):
            tensors.append(dict(name=f"blk.{i}.{sub}", dims=shape, type=0, data=f32(*reversed(shape)).tobytes()))
    return meta, tensors


@st.composite
def gguf_edit(draw, meta: list, tensors: list) -> tuple:
    kind = draw(st.sampled_from(["meta_value", "meta_type", "dims", "type", "offset", "counts", "version",
                                 "nested", "flip", "cut", "align"]))
    if kind in ("meta_value", "meta_type"):
        i = draw(st.integers(0, len(meta) - 1))
        t = draw(st.sampled_from(list(GGUF_TYPES.values()) + [13, 99]))
        val = {0: st.integers(0, 255), 1: st.integers(-128, 127), 2: st.integers(0, 2**16 - 1), 3: st.integers(-2**15, 2**15 - 1),
               4: st.sampled_from([0, 1, 3, 5, 7, 2**31, 2**32 - 1]), 5: st.sampled_from([0, -1, -2**31, 7]),
               6: st.sampled_from([0.0, -1.0, 8.5, float("nan"), float("inf"), 1e38]), 7: st.booleans(),
               8: st.sampled_from(["", "llama", "gemma3", "x" * 300]), 10: st.sampled_from([0, 2**63, 2**64 - 1, 3]),
               11: st.sampled_from([0, -1, -2**63, 2**62]), 12: st.sampled_from([0.0, float("nan"), -5.0, 1e308]),
               9: st.tuples(st.sampled_from([4, 6, 8]), st.lists(st.sampled_from([0, 1, 4]), max_size=4))}
        if t in val:
            v = draw(val[t])
            if t == 9:
                v = (v[0], [str(x) for x in v[1]] if v[0] == 8 else [float(x) for x in v[1]] if v[0] == 6 else v[1])
        else:
            v = None
        return kind, i, (t, v)
    if kind == "dims":
        return kind, draw(st.integers(0, len(tensors) - 1)), draw(st.lists(st.sampled_from([0, 1, 2, 3, 16, 2**32, 2**62, 2**64 - 1]), max_size=9))
    if kind == "type":
        return kind, draw(st.integers(0, len(tensors) - 1)), draw(st.sampled_from([0, 1, 2, 3, 8, 10, 12, 14, 24, 30, 39, 99, 2**31]))
    if kind == "offset":
        return kind, draw(st.integers(0, len(tensors) - 1)), draw(st.sampled_from([1, 16, -32, 4, 2**40, 2**63 - 1]))
    if kind == "counts":
        return kind, 0, (draw(st.sampled_from([0, 1, 100, 2**40, 2**64 - 1])), draw(st.sampled_from([0, 5, 2**40, 2**64 - 1])))
    if kind == "version":
        return kind, 0, draw(st.sampled_from([0, 1, 2, 4, 2**24 * 3]))
    if kind == "nested":
        return kind, 0, draw(st.sampled_from([10, 2000, 100_000]))
    if kind == "flip":
        return kind, 0, draw(st.lists(st.integers(0, 10**5), min_size=1, max_size=8))
    if kind == "cut":
        return kind, 0, draw(st.integers(0, 10**5))
    return kind, 0, draw(st.sampled_from([0, 3, 1, 64, 2**40]))


def apply_gguf_edit(meta: list, tensors: list, edit: tuple) -> bytes:
    meta = [list(m) for m in meta]
    tensors = [dict(t) for t in tensors]
    kind, i, value = edit
    counts, version, align, nested = None, 3, 32, None
    if kind in ("meta_value", "meta_type"):
        t, v = value
        if v is None:  # an unknown type id: written with no payload
            meta[i][1], meta[i][2] = t, None
        else:
            meta[i][1], meta[i][2] = t, v
    elif kind == "dims":
        tensors[i]["dims"] = tuple(value)
    elif kind == "type":
        tensors[i]["type"] = value
    elif kind == "offset":  # tensor i moved by ``value`` bytes from its aligned place
        pos = 0
        for j, t in enumerate(tensors):
            if j == i:
                t["offset"] = pos + value
            pos = -(-(pos + len(t["data"])) // 32) * 32
    elif kind == "counts":
        counts = value
    elif kind == "version":
        version = value
    elif kind == "align":
        for m in meta:
            if m[0] == "general.alignment":
                m[2] = value if value < 2**32 else 2**32 - 1
    elif kind == "nested":
        nested = value
    raw = _write(meta, tensors, align, version, counts, nested)
    if kind == "flip":
        b = bytearray(raw)
        for j in value:
            b[j % len(b)] ^= 0xFF
        raw = bytes(b)
    elif kind == "cut":
        raw = raw[: value % len(raw)]
    return raw


def _write(meta, tensors, align, version, counts, nested) -> bytes:
    out_meta = []
    for key, t, v in meta:
        if t in (13, 99) or (t not in _FMT and t not in (8, 9)):
            out_meta.append((key, t, None))
        else:
            out_meta.append((key, t, v))
    if nested:
        out_meta.append(("fuzz.nested", 9, None))
    # serialise by hand where a value cannot be written by ``gguf_bytes``
    n_t, n_kv = counts if counts is not None else (len(tensors), len(out_meta))
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_t, n_kv))
    for key, t, v in out_meta:
        out += _gguf_str(key) + struct.pack("<I", t)
        if key == "fuzz.nested":
            out += struct.pack("<IQ", 9, 1) * nested + struct.pack("<IQ", 4, 0)
        elif v is None:
            continue
        else:
            try:
                out += _gguf_value(t, v)
            except struct.error:
                out += _gguf_value(t, 0)
    table_and_data = _table_and_data(tensors)
    start = -(-(len(out) + len(table_and_data[0])) // 32) * 32
    res = out + table_and_data[0]
    res += b"\0" * (start - len(res))
    return bytes(res + table_and_data[1])


def _table_and_data(tensors) -> tuple[bytes, bytes]:
    table, pos, blobs = bytearray(), 0, []
    for t in tensors:
        off = t.get("offset", pos)
        table += _gguf_str(t["name"]) + struct.pack("<I", len(t["dims"]) % 2**32)
        table += b"".join(struct.pack("<Q", d % 2**64) for d in t["dims"])
        table += struct.pack("<I", t["type"] % 2**32) + struct.pack("<Q", off % 2**64)
        blobs.append((off, t["data"]))
        pos = -(-(pos + len(t["data"])) // 32) * 32
    size = max([o + len(b) for o, b in blobs if 0 <= o < 2**30] + [0])
    data = bytearray(size)
    for o, b in blobs:
        if 0 <= o < 2**30:
            data[o : o + len(b)] = b
    return bytes(table), bytes(data)


def all_finite_heads(hw) -> bool:
    ts = [hw.W_Q, hw.W_K, hw.W_V, hw.W_O, hw.W_E]
    return all(bool(torch.isfinite(t).all()) for t in ts)
