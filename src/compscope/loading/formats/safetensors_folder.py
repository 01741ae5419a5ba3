"""A local HuggingFace folder: ``config.json`` plus ``*.safetensors`` (sharded or not), or, where it
has none, ``pytorch_model.bin`` read through torch's weights-only unpickler (:mod:`compscope.loading.pickled`).

Read with ``safetensors`` directly, lazily (memory-mapped), never over the network. Float8 weights
are dequantised by their scales, other quantised weights refused (:mod:`compscope.loading.quantized`).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..checkpoint import Checkpoint, TensorStore, one_line
from ..pickled import load_weights_only
from ..quantized import check_scheme
from ...errors import LoadError


#: what a folder's pickled weights are called (transformers' name), where it has no safetensors
PICKLED = "pytorch_model.bin"


def read_config(path: Path) -> dict:
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        from ..builtin import BUILTINS

        shadow = (f"; this folder hides the built-in model '{path.name}' of the same name (run from another "
                  "folder, or rename this one)" if str(path) == path.name and path.name in BUILTINS else "")
        raise LoadError(f"{cfg_path}: config.json not found (a HuggingFace folder needs one){shadow}")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LoadError(f"{cfg_path}: not valid JSON ({one_line(e)})") from e
    if not isinstance(cfg, dict):
        raise LoadError(f"{cfg_path}: expected a JSON object")
    return cfg


def _listed(index: Path) -> list[Path]:
    """The weight files an index (``*.index.json``, its ``weight_map`` of tensor names to files) lists,
    each checked to be there."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise LoadError(f"{index}: not a valid index of weight files ({one_line(e)})") from e
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise LoadError(f"{index}: not a valid index of weight files (weight_map is not a map of names to files)")
    files = [index.parent / f for f in dict.fromkeys(weight_map.values())]
    for f in files:
        if not f.is_file():
            raise LoadError(f"{f}: shard listed in {index.name} is missing or not a regular file")
    return files


def shard_files(path: Path) -> list[Path]:
    """The safetensors files of the folder ``path`` (those its index lists, or every ``*.safetensors``);
    none where it has pickled weights only (:func:`pickle_files`); an error where it has neither."""
    if (path / "model.safetensors.index.json").is_file():
        return _listed(path / "model.safetensors.index.json")
    files = sorted(path.glob("*.safetensors"))
    odd = [f for f in files if not f.is_file()]  # a folder or a FIFO would fail or block
    if odd:
        raise LoadError(f"{odd[0]}: not a regular file")
    if not files and not pickle_files(path):
        raise LoadError(f"{path}: no weights: neither *.safetensors files nor {PICKLED} (or its index)")
    return files


def pickle_files(path: Path) -> list[Path]:
    """The pickled weight files of the folder ``path``: those its ``pytorch_model.bin.index.json``
    lists, or ``pytorch_model.bin``; none where it has neither."""
    if (path / f"{PICKLED}.index.json").is_file():
        return _listed(path / f"{PICKLED}.index.json")
    return [path / PICKLED] if (path / PICKLED).is_file() else []


def open_folder(path: str | Path) -> Checkpoint:
    path = Path(path)
    if path.is_file() and path.suffix == ".safetensors":
        path = path.parent
    if not path.exists():
        raise LoadError(f"{path}: no such file or folder")
    cfg = read_config(path)
    files = shard_files(path)
    notes = []
    if files:
        loaders, origin, dtypes = safetensors_tensors(files)
    else:  # pickled weights only: through torch's weights-only unpickler
        loaders, origin, dtypes = pickled_tensors(pickle_files(path))
        notes.append(f"read from {PICKLED} with torch.load(weights_only=True): tensors only, no other object unpickled")
    block, quantised = check_scheme(cfg, str(path / "config.json"))
    return Checkpoint(cfg, TensorStore(loaders, origin, dtypes).dequantised(block), str(path), path.name,
                      notes + quantised, biases_from_config=True)


def safetensors_tensors(files: list[Path]) -> tuple[dict, dict, dict]:
    """``(loaders, origin, dtypes)`` of every tensor in the safetensors ``files`` (for a
    :class:`~compscope.loading.checkpoint.TensorStore`), memory-mapped and read on demand; a bad
    header or a truncated file is refused naming the file."""
    from safetensors import safe_open

    loaders, origin, dtypes = {}, {}, {}
    for f in files:
        try:
            handle = safe_open(str(f), framework="pt")
            keys = list(handle.keys())
        except Exception as e:  # safetensors raises its own error types for bad headers
            raise LoadError(f"{f}: not a readable safetensors file, truncated or corrupt ({one_line(e)})") from e
        size = f.stat().st_size
        for k in keys:
            try:
                sl = handle.get_slice(k)
                dtypes[k] = sl.get_dtype().lower()
            except Exception as e:
                raise LoadError(f"{f}: tensor '{k}' has an unreadable header ({one_line(e)})") from e
            loaders[k] = lambda h=handle, k=k: h.get_tensor(k)
            origin[k] = str(f)
        _check_payload_size(f, size)
    return loaders, origin, dtypes


def pickled_tensors(files: list[Path]) -> tuple[dict, dict, dict]:
    """``(loaders, origin, dtypes)`` of every tensor in the pickled ``files``, read through torch's
    weights-only unpickler (:func:`~compscope.loading.pickled.load_weights_only`)."""
    loaders, origin, dtypes = {}, {}, {}
    for f in files:
        for k, t in load_weights_only(f).items():
            loaders[k], origin[k], dtypes[k] = (lambda t=t: t), str(f), str(t.dtype).removeprefix("torch.")
    return loaders, origin, dtypes


def _check_payload_size(f: Path, size: int) -> None:
    """A truncated file keeps a valid header; its last tensor runs past the end of the file."""
    with open(f, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end > size:
        raise LoadError(f"{f}: truncated ({size} bytes, header promises {8 + n + end})")


def recognise(source: object) -> bool:
    """A folder, a ``.safetensors`` file, or a folder's ``config.json``."""
    from . import existing_path

    path = existing_path(source)
    return path is not None and (path.is_dir() or path.suffix == ".safetensors" or (path.is_file() and path.name == "config.json"))


def read(source):
    from ..families import to_heads

    path = Path(source)
    if path.is_file() and path.name == "config.json":  # the config of a HuggingFace folder
        path = path.parent
    return to_heads(open_folder(path))
