"""Toy model folders: ``toy.json`` (config, step, provenance) + ``model.safetensors`` (state).

Saving then loading gives back every tensor bit for bit. ``toy.json``::

    {"format": "compscope-toy", "version": 1, "name": ..., "step": ..., "config": {...},
     "info": {...free-form provenance: seeds, training configs...}}
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..loading.checkpoint import one_line
from ..errors import LoadError, OptionError, WeightError
from .model import ToyConfig, ToyTransformer

FORMAT, VERSION = "compscope-toy", 1
MANIFEST, TENSORS = "toy.json", "model.safetensors"


def is_toy(path: Path) -> bool:
    path = Path(path)
    return (path / MANIFEST).is_file() if path.is_dir() else path.name == MANIFEST


def held_out_half(model: ToyTransformer, half: int) -> int:
    """``|t|`` of :func:`held_out_repeats`' ``[t, t]`` for ``half``: at most half the model's context."""
    return min(half, model.cfg.n_ctx // 2)


def held_out_repeats(model: ToyTransformer, sequences: int, half: int, seed: int) -> torch.Tensor:
    """``(sequences, 2·h)`` repeated random sequences ``[t, t]`` for ``model``, ``h`` =
    :func:`held_out_half` (seeded; the training data never hold such sequences)."""
    from .data import repeated_random

    return repeated_random(sequences, held_out_half(model, half), model.cfg.d_vocab, seed=seed)


def save_toy(model: ToyTransformer, path: str | Path, *, name: str = "toy", step: int | None = None, info: dict | None = None) -> Path:
    """Write ``model`` to the folder ``path`` (created; files replaced)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, str(path / TENSORS))
    manifest = {"format": FORMAT, "version": VERSION, "name": name, "step": step, "config": model.cfg.to_dict(), "info": info or {}}
    (path / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return path


def read_manifest(path: str | Path) -> dict:
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    file = folder / MANIFEST
    try:
        manifest = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise LoadError(f"{file}: not a readable toy manifest ({one_line(e)})") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise LoadError(f"{file}: not a compscope toy model (format {manifest.get('format') if isinstance(manifest, dict) else None!r})")
    if manifest.get("version") != VERSION:
        raise LoadError(f"{file}: toy format version {manifest.get('version')!r}, this compscope reads version {VERSION}")
    return manifest


def load_toy(path: str | Path) -> tuple[ToyTransformer, dict]:
    """The model in folder ``path`` and its manifest; every tensor is checked for name, shape
    and finiteness against the config."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    manifest = read_manifest(folder)
    try:
        cfg = ToyConfig.from_dict(manifest.get("config") or {})
    except (OptionError, TypeError) as e:
        raise LoadError(f"{folder / MANIFEST}: bad config ({one_line(e)})") from e
    file = folder / TENSORS
    if not file.is_file():  # missing, a folder, or a FIFO that would block
        raise LoadError(f"{file}: not found or not a regular file")
    try:
        state = load_file(str(file))
    except (OSError, SafetensorError, ValueError) as e:
        raise LoadError(f"{file}: cannot be read as safetensors ({one_line(e)})") from e
    with torch.device("meta"):  # the shapes the config implies, nothing allocated
        want = ToyTransformer(cfg, init=False).state_dict()
    missing, extra = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    if missing or extra:
        raise LoadError(f"{file}: tensors do not match the config (missing {missing[:5]}, unexpected {extra[:5]})")
    for k, t in state.items():
        if tuple(t.shape) != tuple(want[k].shape):
            raise WeightError(f"{file}: tensor {k} has shape {tuple(t.shape)}, config says {tuple(want[k].shape)}")
        if t.dtype != want[k].dtype:
            raise WeightError(f"{file}: tensor {k} is {t.dtype}, expected {want[k].dtype}")
        if not torch.isfinite(t).all():
            raise WeightError(f"{file}: tensor {k} has NaN or Inf values")
    model = ToyTransformer(cfg, init=False)  # sizes now match the file's tensors, every one of which it holds
    model.load_state_dict(state)
    return model, manifest


def load_heads(path: str | Path):
    """``HeadWeights`` of the toy model in ``path``."""
    return heads_of(*load_toy(path), path)


def heads_of(model: ToyTransformer, manifest: dict, path: str | Path):
    """``HeadWeights`` of a loaded toy ``model``, named from its manifest."""
    name = manifest.get("name") or "toy"
    if manifest.get("step") is not None:
        name = f"{name} step {manifest['step']}"
    return model.head_weights(name=name, source=f"toy model folder {path}")
