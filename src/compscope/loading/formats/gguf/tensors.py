"""A GGUF file's tensors under the HF names its family reads (:mod:`.names`), each dequantised to float32
when first taken: fused query-key-value rows split, rows llama.cpp regrouped or permuted for rotary put back,
Gemma's ``1 + w`` gains made ``w``, GPT-2's transposed weights turned back."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...checkpoint import Checkpoint, TensorStore, one_line, pairs_to_halves
from ...gguf_file import dequantize
from ....errors import LoadError
from . import metadata, names as naming
from .files import SHARD_NAME


def checkpoint(files: list[Path], fields: dict, located: list[tuple]) -> Checkpoint:
    """The checkpoint of the GGUF file in ``files`` (one, or its shards), from :func:`.files.open_shards`."""
    path = files[0]
    infos = [info for info, _, _ in located]
    cfg, shape = metadata.config(path, fields, infos, located)
    arch, n_heads, n_kv, head_dim, mtp = shape.arch, shape.n_heads, shape.n_kv, shape.head_dim, shape.mtp
    ssm_layers, permuted, one_plus = shape.ssm_layers, shape.permuted, shape.one_plus
    loaders, origin, dtypes, attention = {}, {}, {}, {}
    block = re.compile(r"(?:enc\.)?blk\.(\d+)\.(.+)$")  # (T5's encoder blocks: enc.blk.N.)
    block_names, block_prefix, top_names, transposed, (regrouped, regroup_rows), not_attention = naming.layout(
        arch, infos)
    splits = (n_heads * head_dim, n_kv * head_dim, n_kv * head_dim)  # a fused tensor's rows: q, k, v heads
    joined = naming.JOINED.get(arch, {})  # (HF tensors joined from several block tensors: DeepSeek's kv_b_proj)
    part_of = {part: sub for sub, (parts, _) in joined.items() for part in parts}
    pending: dict[tuple[str, str], dict[str, tuple]] = {}  # (block, HF name) -> {its block tensors' names: sources}
    for info, buf, file in located:
        m = block.match(info.name)
        if m and mtp and int(m.group(1)) >= cfg["num_hidden_layers"]:  # a multi-token-prediction block: no layer
            continue
        if m and m.group(2).startswith("nextn."):  # (llama.cpp's names for a prediction block's own tensors)
            raise LoadError(f"{path}: tensor '{info.name}' belongs to a multi-token-prediction block, and block "
                            f"{m.group(1)} is one of the {cfg['num_hidden_layers']} layers the metadata counts "
                            f"('{arch}.nextn_predict_layers' = {mtp})")
        if m and m.group(2) in part_of:  # one part of a tensor joined below
            pending.setdefault((m.group(1), part_of[m.group(2)]), {})[m.group(2)] = (info, buf, file)
            attention[info.name] = (block_prefix.format(i=m.group(1)) + part_of[m.group(2)],)
            continue
        if m:
            sub = block_names.get(m.group(2))
            names = () if sub is None else sub if isinstance(sub, tuple) else (sub,)
            names = tuple(block_prefix.format(i=m.group(1)) + n for n in names)
        else:
            names = (top_names[info.name],) if info.name in top_names else ()
        if naming.enters_attention(m.group(2) if m else None, info.name) and not (
                m and (m.group(2) in not_attention or int(m.group(1)) in ssm_layers)):  # (a Mamba layer's input norm)
            attention[info.name] = names
        type_name = _type_name(info)
        for part, hf in enumerate(names):
            rows = None
            if len(names) > 1:
                start = sum(splits[:part])
                rows = (start, start + splits[part])
            swap = hf.endswith(transposed)  # () for every layout but GPT-2's: nothing swapped
            regroup = hf.endswith(regrouped)  # () but for GPT-NeoX and Falcon: nothing regrouped
            is_norm = hf.endswith("norm.weight") and not hf.endswith(shape.unshifted)
            # llama.cpp permutes the rows of q/k weights and biases alike (convert_hf_to_gguf LlamaModel)
            n_rows = None
            if ".q_proj." in hf:
                n_rows = n_heads
            elif ".k_proj." in hf:  # (each layer's own count where layers differ in it)
                n_rows = shape.kv_layers[int(m.group(1))] if shape.kv_layers and m else n_kv
            # and a per-head QK-norm's gains and biases (heads, d_head) as each head's rows (Chameleon's)
            per_head_norm = permuted and hf.endswith(tuple(f"{x}_norm.{p}" for x in "qk" for p in ("weight", "bias")))

            def load(info=info, buf=buf, file=file, n_rows=n_rows, is_norm=is_norm, swap=swap, rows=rows,
                     regroup=regroup, per_head_norm=per_head_norm):
                w = _dequantised(info, buf, file)
                if (rows is not None or regroup) and w.shape[0] != sum(splits):
                    raise LoadError(f"{file}: tensor '{info.name}' has {w.shape[0]} rows; fused query, key and value "
                                    f"heads of this model need {' + '.join(map(str, splits))} = {sum(splits)}")
                if rows is not None:
                    w = w[rows[0] : rows[1]]
                if regroup:
                    w = regroup_rows(w, n_heads, n_kv, head_dim)
                if permuted and n_rows is not None:
                    w = pairs_to_halves(w, n_rows)
                if per_head_norm and w.ndim == 2:
                    w = pairs_to_halves(w.reshape(-1), w.shape[0]).reshape(w.shape)
                if one_plus and is_norm:
                    w = w - 1.0
                return w.T if swap else w  # a view: the GPT-2 family transposes Conv1D weights back itself

            loaders[hf] = load
            origin[hf] = f"{file} ({info.name})"
            dtypes[hf] = type_name
    for (i, sub), found in pending.items():
        hf = block_prefix.format(i=i) + sub
        loaders[hf], origin[hf], dtypes[hf] = _joined(path, i, found, *joined[sub])
    split = SHARD_NAME.match(path.name) if len(files) > 1 else None
    name = fields.get("general.name") or (split["stem"] if split else path.stem)
    notes = ["dequantised from GGUF to float32", *shape.notes]
    if mtp:
        notes.append(f"the {mtp} multi-token-prediction block(s) after the last layer (blk.{cfg['num_hidden_layers']}"
                     "...) not read: they draft tokens beside the model and write to no residual the heads read")
    if split:
        notes.append(f"read from the {split['count'].lstrip('0')} shards of a split GGUF file "
                     f"({split['stem']}-00001..{split['count']}-of-{split['count']}.gguf)")
    return Checkpoint(cfg, TensorStore(loaders, origin, dtypes, source=str(path)), str(path), str(name), notes,
                      attention_sources=attention)


def _type_name(info) -> str:
    """The GGML type of the tensor ``info`` by name (``typeN`` where the installed ``gguf`` does not know it)."""
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType(info.type_id).name
    except ValueError:
        return f"type{info.type_id}"


def _dequantised(info, buf, file) -> torch.Tensor:
    """The tensor ``info`` of ``file`` (its bytes in ``buf``) in float32; a type or bytes that cannot be read are
    reported by the file and tensor."""
    if info.nbytes is None:
        raise LoadError(f"{file}: tensor '{info.name}' has GGML type {_type_name(info)}, unknown to the installed "
                        "'gguf' package")
    try:
        return dequantize(buf, info)
    except (ValueError, NotImplementedError, RuntimeError) as e:
        raise LoadError(f"{file}: tensor '{info.name}' ({_type_name(info)}) cannot be dequantised "
                        f"({one_line(e)})") from e


def _joined(path: Path, block: str, found: dict, parts: tuple[str, ...], join) -> tuple:
    """The loader, origin and dtype of an HF tensor that llama.cpp's converter split into the block tensors ``parts``
    (all in ``found``, their sources by name, else the first missing is reported), joined by ``join``."""
    missing = [p for p in parts if p not in found]
    if missing:
        raise LoadError(f"{path}: tensor 'blk.{block}.{missing[0]}' is missing beside "
                        f"{', '.join(f'blk.{block}.{p}' for p in found)}: llama.cpp's converter writes "
                        f"{' and '.join(f'blk.{block}.{p}' for p in parts)} together")
    names = " + ".join(f"blk.{block}.{p}" for p in parts)

    def load():
        tensors = [_dequantised(*found[p]) for p in parts]
        try:
            return join(*tensors)
        except ValueError as e:
            raise LoadError(f"{found[parts[0]][2]}: tensors {names} cannot be joined: {one_line(e)}") from e

    types = sorted({_type_name(found[p][0]) for p in parts})
    return load, f"{found[parts[0]][2]} ({names})", "/".join(types)
