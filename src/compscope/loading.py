"""``load(source, **processing) -> HeadWeights``: the one entry point for every source."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .builtin import BUILTINS, DISPLAY_NAMES, resolve
from .checkpoint import Checkpoint, one_line
from .errors import LoadError, UnsupportedModelError
from .families import family_for
from .heads import HeadWeights
from .processing import process


def _checkpoint_to_heads(ckpt: Checkpoint) -> HeadWeights:
    return family_for(ckpt.config, ckpt.source).convert(ckpt)


def _load_unprocessed(source) -> HeadWeights:
    from .formats import hf_model, transformer_lens

    if isinstance(source, HeadWeights):
        return source
    if transformer_lens.is_bridge(source):
        raise UnsupportedModelError(
            "TransformerLens TransformerBridge objects are not supported: the bridge rewrites the HuggingFace "
            "model it wraps in place (its modules and parameter names change, GPT-2's fused c_attn is split), so "
            "that model cannot be read either; pass a HookedTransformer (transformer-lens 3.x) or a HuggingFace "
            "model or folder loaded on its own"
        )
    if transformer_lens.is_hooked_transformer(source):
        return transformer_lens.from_hooked_transformer(source)
    if hf_model.is_hf_model(source):
        return _checkpoint_to_heads(hf_model.from_hf_model(source))
    if not isinstance(source, (str, Path)):
        raise LoadError(f"cannot load a {type(source).__name__}: expected a path, a built-in name, or a model object")
    path = Path(source)
    if not path.exists():
        if str(source) in BUILTINS:
            name = str(source)
            path = resolve(name)
            hw = _load_unprocessed(path)
            where = f"built-in '{name}': {path.name} from the {BUILTINS[name][1]} package"
            return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, name=DISPLAY_NAMES[name], source=where))
        raise LoadError(f"{source}: no such file or folder, and not a built-in model ({', '.join(BUILTINS)})")
    from .formats import native
    from .toy import storage as toy_storage

    if toy_storage.is_toy(path):
        return toy_storage.load_heads(path)
    if native.is_native(path):
        return native.load(path)
    if path.is_file() and path.name == "config.json":  # the config of a HuggingFace folder
        path = path.parent
    if path.is_dir() or path.suffix == ".safetensors":
        from .formats.safetensors_folder import open_folder

        return _checkpoint_to_heads(open_folder(path))
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as e:
        raise LoadError(f"{path}: cannot be read ({one_line(e)})") from e
    if path.suffix == ".gguf" or magic == b"GGUF":
        from .formats.gguf import open_gguf

        return _checkpoint_to_heads(open_gguf(path))
    raise LoadError(f"{path}: unrecognised file (expected a folder with config.json, a .gguf file, or a compscope model)")


def load(source, *, fold_norm: bool = False, center_writing: bool = False, fold_value_bias: bool = False) -> HeadWeights:
    """Load ``source`` into canonical ``HeadWeights`` (float32).

    ``source``: a HuggingFace folder (``config.json`` + ``*.safetensors``), a ``.gguf`` file,
    a compscope model folder (``compscope.json``) or toy model folder (``toy.json``), a loaded ``transformers`` model or TransformerLens
    ``HookedTransformer``, or a built-in name (``induction-2l``, the default; ``smollm2``, ``gemma3-270m``, ``minilm``).
    Processing is off unless asked for, and recorded in ``meta.processing``.

    >>> hw = load("smollm2")                        # doctest: +SKIP
    >>> hw.n_layers, hw.n_heads, hw.n_kv_heads      # doctest: +SKIP
    (30, 9, 3)
    """
    hw = _load_unprocessed(source)
    return process(hw, fold_norm=fold_norm, center_writing=center_writing, fold_value_bias=fold_value_bias)
