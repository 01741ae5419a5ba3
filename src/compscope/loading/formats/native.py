"""compscope's own format: a folder with ``compscope.json`` and ``heads.safetensors``.

Holds a ``HeadWeights`` exactly (all tensors, norms, rotary, metadata), so toy models and
processed weights round-trip bit for bit. ``compscope.json``::

    {"format": "compscope", "version": 1, "fields": {...non-tensor fields...}}
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..checkpoint import all_finite, one_line
from ...core.heads import sinks_valid
from ...errors import LoadError, WeightError
from ...core.heads import HeadWeights, LatentNorm, Meta, Norm, Rotary

FORMAT, VERSION = "compscope", 1
_TENSORS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos", "W_U", "b_U", "alibi", "sinks",
            "W_G", "b_G", "pos_Q", "pos_K", "rel_bias")
_NORMS = ("attn_norm", "final_norm", "attn_out_norm", "v_norm")
_LATENTS = ("q_latent", "kv_latent")  # multi-head latent attention's norms on a latent of the heads' input


def is_native(path: Path) -> bool:
    return (path / "compscope.json").is_file() if path.is_dir() else path.name == "compscope.json"


def save(hw: HeadWeights, path: str | Path) -> Path:
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: getattr(hw, k).contiguous() for k in _TENSORS if getattr(hw, k) is not None}
    fields: dict = {}
    for k in _NORMS:
        n = getattr(hw, k)
        fields[k] = None if n is None else _norm_fields(n, k, tensors)
    fields["qk_norm"] = None if hw.qk_norm is None else [_norm_fields(n, f"qk_norm.{i}", tensors) for i, n in enumerate(hw.qk_norm)]
    if hw.rotary is not None:
        tensors["rotary.inv_freq"] = hw.rotary.inv_freq.contiguous()
        fields["rotary"] = {"dim": hw.rotary.dim, "style": hw.rotary.style}
    else:
        fields["rotary"] = None
    for k, t in hw.embed_extra.items():
        tensors[f"embed_extra.{k}"] = t.contiguous()
    for k in _LATENTS:
        lat = getattr(hw, k)
        fields[k] = None if lat is None else {"eps": lat.eps}
        for part, t in (() if lat is None else (("W", lat.W), ("b", lat.b))):
            if t is not None:
                tensors[f"{k}.{part}"] = t.contiguous()
    fields.update(
        qk_norm_scope=hw.qk_norm_scope, qk_norm_layers=list(hw.qk_norm_layers), kv_map=list(hw.kv_map),
        norm_placement=hw.norm_placement, positions=hw.positions,
        attn_scale=hw.attn_scale, attn_softcap=hw.attn_softcap, causal=hw.causal,
        first_layer_unnormed=hw.first_layer_unnormed, kv_latent_from=hw.kv_latent_from, rel_buckets=list(hw.rel_buckets),
        rel_bias_buckets=list(hw.rel_bias_buckets),
        sliding_window=list(hw.sliding_window), meta=dataclasses.asdict(hw.meta),
    )
    save_file(_unshared(tensors), str(path / "heads.safetensors"))
    (path / "compscope.json").write_text(json.dumps({"format": FORMAT, "version": VERSION, "fields": fields}, indent=1))
    return path


def _unshared(tensors: dict) -> dict:
    """Contiguous tensors, none sharing storage with another (safetensors refuses shared
    storage: a tied unembedding, or one norm used for both q and k, is written twice)."""
    seen: set[int] = set()
    out = {}
    for k, t in tensors.items():
        t = t.detach().contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[k] = t
    return out


def _norm_fields(n: Norm, key: str, tensors: dict) -> dict:
    for part in ("weight", "bias"):
        t = getattr(n, part)
        if t is not None:
            tensors[f"{key}.{part}"] = t.contiguous()
    return {"kind": n.kind, "eps": n.eps, "offset": n.offset}


def load(path: str | Path) -> HeadWeights:
    from safetensors.torch import load_file

    path = Path(path)
    if path.name == "compscope.json":
        path = path.parent
    cfg_path, st_path = path / "compscope.json", path / "heads.safetensors"
    try:
        doc = json.loads(cfg_path.read_text())
        fields = doc["fields"]
    except FileNotFoundError as e:
        raise LoadError(f"{cfg_path}: not found") from e
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise LoadError(f"{cfg_path}: not a compscope model description ({one_line(e)})") from e
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise LoadError(f"{cfg_path}: format {doc.get('format')!r} version {doc.get('version')!r}; expected {FORMAT!r} {VERSION}")
    if not st_path.is_file():
        raise LoadError(f"{st_path}: not found")
    try:
        tensors = load_file(str(st_path))
    except Exception as e:
        raise LoadError(f"{st_path}: not a readable safetensors file ({one_line(e)})") from e
    missing = [k for k in ("W_Q", "W_K", "W_V", "W_O", "W_E") if k not in tensors]
    if missing:
        raise LoadError(f"{st_path}: required tensors missing: {', '.join(missing)}")
    for k, t in tensors.items():
        if not (sinks_valid(t) if k == "sinks" else all_finite(t)):
            raise WeightError(f"{st_path}: tensor '{k}' has NaN/Inf values" + (" (a sink may be -inf, no other value "
                                                                              "may be infinite)" if k == "sinks" else ""))

    if not isinstance(fields, dict):
        raise LoadError(f"{cfg_path}: 'fields' is not a JSON object")

    def norm(f: dict | None, key: str) -> Norm | None:
        if f is None:
            return None
        if not isinstance(f, dict):
            raise LoadError(f"{cfg_path}: norm field '{key}' = {f!r} is not a JSON object")
        return Norm(f["kind"], tensors.get(f"{key}.weight"), tensors.get(f"{key}.bias"), f["eps"], f["offset"])

    def latent(key: str) -> LatentNorm | None:
        f = fields.get(key)  # (absent in files written before it existed)
        if f is None:
            return None
        if not isinstance(f, dict):
            raise LoadError(f"{cfg_path}: field '{key}' = {f!r} is not a JSON object")
        return LatentNorm(tensors[f"{key}.W"], tensors.get(f"{key}.b"), f["eps"])

    try:
        rot = fields["rotary"]
        return HeadWeights(
            **{k: tensors.get(k) for k in _TENSORS},
            kv_map=tuple(fields["kv_map"]),
            attn_norm=norm(fields["attn_norm"], "attn_norm"),
            final_norm=norm(fields["final_norm"], "final_norm"),
            attn_out_norm=norm(fields["attn_out_norm"], "attn_out_norm"),
            v_norm=norm(fields.get("v_norm"), "v_norm"),  # absent in files written before it existed
            qk_norm=None if fields["qk_norm"] is None else tuple(norm(f, f"qk_norm.{i}") for i, f in enumerate(fields["qk_norm"])),
            qk_norm_scope=fields.get("qk_norm_scope", "head"),  # absent in files written before it existed
            qk_norm_layers=tuple(fields.get("qk_norm_layers", ())),  # (likewise)
            norm_placement=fields["norm_placement"],
            rotary=None if rot is None else Rotary(rot["dim"], tensors["rotary.inv_freq"], rot["style"]),
            positions=fields["positions"], attn_scale=fields["attn_scale"], causal=fields["causal"],
            attn_softcap=fields.get("attn_softcap"),  # absent in files written before it existed
            first_layer_unnormed=fields.get("first_layer_unnormed", False),  # (likewise)
            q_latent=latent("q_latent"), kv_latent=latent("kv_latent"),
            kv_latent_from=fields.get("kv_latent_from", 0),  # (likewise)
            rel_buckets=tuple(fields.get("rel_buckets", (0, 0))),  # (likewise)
            rel_bias_buckets=tuple(fields.get("rel_bias_buckets", (0, 0))),  # (likewise)
            sliding_window=tuple(fields["sliding_window"]),
            embed_extra={k.split(".", 1)[1]: t for k, t in tensors.items() if k.startswith("embed_extra.")},
            meta=Meta(**{**fields["meta"], "processing": tuple(fields["meta"]["processing"]),
                         "notes": tuple(fields["meta"]["notes"]),
                         "kv_heads_own": tuple(fields["meta"].get("kv_heads_own", ()))}),  # (files before it: none)
        )
    except KeyError as e:
        raise LoadError(f"{cfg_path}: field {e.args[0]!r} is missing (an incomplete or edited compscope model)") from e
    except (TypeError, AttributeError, ValueError) as e:
        raise LoadError(f"{cfg_path}: a field has the wrong type or value ({one_line(e)})") from e
    except WeightError as e:
        raise WeightError(f"{st_path}: {e}") from e


def recognise(source: object) -> bool:
    from . import existing_path

    path = existing_path(source)
    return path is not None and is_native(path)


def read(source) -> HeadWeights:
    return load(Path(source))
