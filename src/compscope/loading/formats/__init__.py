"""Formats: where tensors come from. Each module here is one format and answers two calls:
``recognise(source) -> bool`` (cheap: a type check, a file name, four magic bytes) and
``read(source) -> HeadWeights``. :func:`compscope.load` asks them in the order of
:data:`FORMATS` and reads with the first that recognises the source. A format that hands raw
tensors to a family returns ``families.to_heads(checkpoint)``. Each imports its own heavy
dependency (``gguf``, ``transformers``, ``transformer_lens``) only when it reads.

A new format: one module with ``recognise`` and ``read``, and one line below.
"""

from __future__ import annotations

from pathlib import Path

from ...registry import Registry
from ...errors import LoadError

#: the formats, in the order ``load`` asks them (objects first, then names, then files)
FORMATS: Registry = Registry("format", error=LoadError)
FORMATS.lazy("transformer_lens", "compscope.loading.formats.transformer_lens")  # HookedTransformer objects
FORMATS.lazy("transformer_bridge", "compscope.loading.formats.transformer_bridge")  # TransformerLens 4 bridges
FORMATS.lazy("hf_model", "compscope.loading.formats.hf_model")                  # loaded transformers models
FORMATS.lazy("builtin", "compscope.loading.formats.builtin_name")               # built-in model names
FORMATS.lazy("toy", "compscope.loading.formats.toy")                            # toy model folders (toy.json)
FORMATS.lazy("native", "compscope.loading.formats.native")                      # compscope folders (compscope.json)
FORMATS.lazy("consolidated", "compscope.loading.formats.consolidated")          # params.json folders (Mistral, Meta)
FORMATS.lazy("safetensors", "compscope.loading.formats.safetensors_folder")     # HuggingFace folders
FORMATS.lazy("gguf", "compscope.loading.formats.gguf")                          # llama.cpp .gguf files


def existing_path(source: object) -> Path | None:
    """``source`` as a ``Path`` when it is a str or path that exists, else None."""
    if not isinstance(source, (str, Path)):
        return None
    try:
        path = Path(source)
        return path if path.exists() else None
    except (OSError, ValueError):
        return None

from ...registry import submodules as _submodules

__getattr__ = _submodules(__name__)
