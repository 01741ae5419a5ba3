"""GGUF files (llama.cpp): dequantise to float32, rename to HF names (a fused query-key-value tensor of
Phi-2 split into its three; the fused rows that llama.cpp regrouped for GPT-NeoX and Falcon put back
in the model's own order; DeepSeek's key/value up-projection, which llama.cpp splits in two, joined).

GGUF stores each 2-D tensor as ``(out, in)`` once read into numpy, like ``nn.Linear``. For the
``llama`` architecture, llama.cpp's converter reorders the rows of ``W_Q`` and ``W_K`` within
each head from HF's rotate-half layout ``[x_0..x_{n/2-1} | x_{n/2}..]`` to interleaved pairs
``[x_0, x_{n/2}, x_1, ...]``. That reordering leaves ``W_Q^T W_K`` unchanged but pairs the
wrong dims under rotary, so it is undone here. Gemma GGUFs store every RMSNorm gain as
``1 + w``; ``w`` is recovered so that the Gemma families (which add the 1) read it unchanged.

A file that llama.cpp split into shards (``NAME-00001-of-0000n.gguf``, ...: the metadata in the
first, the tensors spread over all, each shard saying ``split.no`` and ``split.count``) is read
from every shard, whichever is given.

The container itself (header, tensor table, dequantisation) is read by
:mod:`compscope.loading.gguf_file`. A tensor whose bytes run past the end of the file (a
truncated download) is reported by name when the file is opened.

Its parts: :mod:`.files` (the container and its shards), :mod:`.metadata` (the HF config, with
:mod:`.rules` and :mod:`.rope_scaling`), :mod:`.names` (the tensor names), :mod:`.tensors` (the tensors, as a
checkpoint) and :mod:`.runtime` (what transformers is given to run the file). A new architecture: its
``model_type`` in :data:`.metadata.ARCHS`, its names in :data:`.names.LAYOUTS` where they are not Llama's (and
:data:`.names.JOINED` where the converter split one HF tensor into several), and
any rule of its own in :mod:`.rules`, called from :func:`.metadata.config`.
"""

from __future__ import annotations

from pathlib import Path

from ...checkpoint import Checkpoint, one_line
from ....errors import LoadError
from .files import architecture, open_shards, shard_set, shards
from .metadata import ALSO_READ_AS, ARCHS, config
from .runtime import divides_frequencies, runtime_config, transformers_reads, why_not_run
from .tensors import checkpoint

__all__ = ["ARCHS", "also_read_as", "architecture", "architectures", "divides_frequencies", "open_gguf", "open_shards",
           "read",
           "read_config", "recognise", "runtime_config", "shard_set", "shards", "transformers_reads", "why_not_run"]


def architectures() -> dict[str, str]:
    """Every GGUF architecture compscope reads, and the HF ``model_type`` it is read as (some files of a few, by
    their settings, as another: :func:`also_read_as`)."""
    return {arch: model_type for arch, (model_type, *_rest) in ARCHS.items()}


def also_read_as() -> dict[str, tuple[str, str]]:
    """GGUF architecture -> ``(model_type, which files)`` for the files of it read as another ``model_type`` than
    :func:`architectures` says (Baichuan's of 40 layers: ALiBi)."""
    return dict(ALSO_READ_AS)


def read_config(path: str | Path) -> dict:
    """The HF config the GGUF file at ``path`` is read as (:func:`.metadata.config`), from its headers alone."""
    files, fields, located = open_shards(Path(path))
    return config(files[0], fields, [info for info, _, _ in located], located)[0]


def open_gguf(path: str | Path) -> Checkpoint:
    """A GGUF file's config and tensors, HF-named (module docstring); a split file (llama.cpp's
    ``NAME-00001-of-0000n.gguf``) is read from all its shards, whichever of them is given."""
    return checkpoint(*open_shards(Path(path)))


def recognise(source: object) -> bool:
    """A ``.gguf`` file, or any file that starts with the magic ``GGUF``."""
    from .. import existing_path

    path = existing_path(source)
    if path is None or not path.is_file():
        return False
    if path.suffix == ".gguf":
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError as e:
        raise LoadError(f"{path}: cannot be read ({one_line(e)})") from e


def read(source):
    from ...families import to_heads

    return to_heads(open_gguf(source))
