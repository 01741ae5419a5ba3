"""``Checkpoint``: what a format hands to a family — a config dict and named raw tensors.

Formats (``compscope.loading.formats``) know where tensors come from (a safetensors folder, a GGUF
file, a loaded model object); families (``compscope.loading.families``) know what the names mean.
``TensorStore.take`` is the one gate every tensor passes: it checks presence, shape and
finiteness, and its errors name the tensor and the file it came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..core.heads import all_finite
from ..errors import CompscopeError, WeightError, one_line  # noqa: F401  (one_line: re-exported)
from .quantized import FLOAT8, dequantising


#: TensorFlow-era LayerNorm names, read as PyTorch's as transformers renames them when it loads (old
#: BERT files; transformers 5 writes ESM's so)
LEGACY_NORM_NAMES = ((r"LayerNorm\.gamma\b", "LayerNorm.weight"), (r"LayerNorm\.beta\b", "LayerNorm.bias"))


class TensorStore:
    """Named tensors, loaded on demand. ``loaders[name]()`` returns the tensor; ``origin[name]``
    names the file (or object) it lives in; ``dtypes[name]`` its stored dtype; ``source``
    (optional) names the whole store in messages about missing tensors (default: the files
    of ``origin``)."""

    def __init__(
        self,
        loaders: dict[str, Callable[[], Tensor]],
        origin: dict[str, str],
        dtypes: dict[str, str] | None = None,
        source: str | None = None,
    ) -> None:
        self._loaders = loaders
        self._origin = origin
        self._dtypes = dtypes or {}
        self._source = source
        self._taken_dtypes: set[str] = set()
        self._taken: set[str] = set()

    @classmethod
    def from_dict(cls, tensors: dict[str, Tensor], origin: str) -> TensorStore:
        return cls(
            {k: (lambda t=t: t) for k, t in tensors.items()},
            {k: origin for k in tensors},
            {k: str(t.dtype).removeprefix("torch.") for k, t in tensors.items()},
        )

    def dequantised(self, block: tuple[int, int] | None = None) -> TensorStore:
        """This store with every float8 tensor read dequantised by the scale stored beside it
        (:func:`compscope.loading.quantized.dequantising`; ``block``: the scale's block, where stated)."""
        return TensorStore(dequantising(self._loaders, self._dtypes, self._origin, block), self._origin, self._dtypes,
                           self._source)

    def derived(self, made: dict[str, tuple[Callable[[], Tensor], str]], hidden: tuple[str, ...] = ()) -> TensorStore:
        """This store with the tensors named in ``made`` computed from others: ``{name: (make,
        from_name)}``, where ``make()`` builds the tensor from this store's ``from_name`` (taken
        through this store, so its checks name that tensor and its file). ``name`` may be new or
        replace a stored tensor; it is reported as ``from_name``'s file and dtype. The tensors named
        in ``hidden`` are left out (a caller that reads them itself). What either store reads counts as
        read in both (:meth:`taken`, :attr:`source_dtypes`)."""
        loaders, origin, dtypes = dict(self._loaders), dict(self._origin), dict(self._dtypes)
        for name in hidden:
            loaders.pop(name, None)
        for name, (make, src) in made.items():
            loaders[name] = make
            origin[name] = self._origin.get(src, "?")
            if src in self._dtypes:
                dtypes[name] = self._dtypes[src]
        view = TensorStore(loaders, origin, dtypes, self._source)
        view._taken, view._taken_dtypes = self._taken, self._taken_dtypes  # one record of what was read, either way
        return view

    def renamed(self, rules: Iterable[tuple[str, str]]) -> TensorStore:
        """This store with each tensor whose name the ``(pattern, replacement)`` regular expressions
        rewrite (in turn) read under the new name, where that name is not stored itself, and no longer
        under its own (it is reported as its file's); itself where no rule rewrites a name."""
        rules = [(re.compile(pattern), new) for pattern, new in rules]
        made = {}
        for name in self._loaders:
            renamed = name
            for pattern, new in rules:
                renamed = pattern.sub(new, renamed)
            if renamed != name and renamed not in self._loaders:
                made[renamed] = (self._loaders[name], name)
        return self.derived(made, hidden=tuple(src for _, src in made.values())) if made else self

    def __contains__(self, name: str) -> bool:
        return name in self._loaders

    def names(self) -> list[str]:
        return list(self._loaders)

    def origin(self, name: str) -> str:
        return self._origin.get(name, "?")

    @property
    def source_dtypes(self) -> str:
        """The stored dtypes of the tensors taken so far, e.g. ``'Q4_1+F32'``."""
        return "+".join(sorted(self._taken_dtypes)) or "unknown"

    def take(
        self,
        name: str,
        shape: tuple[int, ...] | None = None,
        *,
        required: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> Tensor | None:
        """Load ``name`` as ``dtype``, on the CPU; check its shape and that every value is finite."""
        if name not in self._loaders:
            if not required:
                return None
            near = [n for n in self._loaders if n.split(".")[-2:] == name.split(".")[-2:]][:3]
            hint = f" (similar names: {', '.join(near)})" if near else ""
            raise WeightError(f"tensor '{name}' is missing from {self._any_origin()}{hint}")
        where = self.origin(name)
        try:
            t = self._loaders[name]()
        except CompscopeError:  # the format already named the file and tensor
            raise
        except Exception as e:  # corrupt payloads surface here
            raise WeightError(f"{where}: tensor '{name}' cannot be read: {one_line(e)}") from e
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise WeightError(f"{where}: tensor '{name}' has shape {tuple(t.shape)}, expected {tuple(shape)}")
        if str(t.dtype).removeprefix("torch.") in FLOAT8:  # a format that dequantises nothing (quantized.py)
            raise WeightError(f"{where}: tensor '{name}' is stored in {t.dtype} and no scale was applied: compscope does "
                              "not read float8 weights as if they were unscaled")
        if dtype.is_floating_point and not (t.is_floating_point() or t.is_complex()):
            raise WeightError(f"{where}: tensor '{name}' is stored as {str(t.dtype).removeprefix('torch.')}, not as "
                              "floating-point numbers: quantised weights compscope has no scales for (it reads float "
                              "weights, and float8 ones with their scales)")
        t = t.to("cpu", dtype)  # a model object on a GPU is read onto the CPU, as files are
        if not all_finite(t):
            n_bad = int((~torch.isfinite(t)).sum())
            raise WeightError(f"{where}: tensor '{name}' has {n_bad} NaN/Inf values")
        if name in self._dtypes:
            self._taken_dtypes.add(self._dtypes[name])
        self._taken.add(name)
        return t

    def leave(self, name: str) -> None:
        """Mark ``name`` as deliberately not read (so :meth:`unread_biases` does not list it)."""
        self._taken.add(name)

    def taken(self, name: str) -> bool:
        """Whether a family read ``name`` (or left it deliberately)."""
        return name in self._taken

    def unread_biases(self) -> list[str]:
        """``X.bias`` tensors present beside an ``X.weight`` that was taken, but not taken themselves:
        a bias the model adds that the reader left out (a family reading too little), never right."""
        return sorted(b for w in self._taken if w.endswith(".weight")
                      for b in [w[: -len("weight")] + "bias"] if b in self._loaders and b not in self._taken)

    def _any_origin(self) -> str:
        if self._source is not None:
            return self._source
        origins = sorted(set(self._origin.values()))
        if not origins:
            return "an empty checkpoint"
        return origins[0] if len(origins) == 1 else f"{origins[0]} (+{len(origins) - 1} more files)"


def pairs_to_halves(w: Tensor, n_heads: int) -> Tensor:
    """Query or key rows ``(n_heads * d_head, ...)`` of rotary heads from the order that rotates
    adjacent pairs (rows ``2i, 2i + 1`` of a head turn together: Meta's and Mistral's reference
    code, llama.cpp) into HF's rotate-half order (rows ``i, i + d_head / 2``): per head, row
    ``2i + j`` goes to ``j * d_head / 2 + i``. The logits are unchanged, the rotation being the same."""
    return w.reshape(n_heads, w.shape[0] // n_heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


@dataclass
class Checkpoint:
    """A config (HF-style keys) and its tensors (HF-style names), plus where they came from."""

    config: dict
    tensors: TensorStore
    source: str
    name: str
    notes: list[str] = field(default_factory=list)
    #: True where the model is the one transformers builds from ``config`` (a HF folder): a tensor
    #: the built model has no parameter for is not part of it. False for objects (their tensors are
    #: their parameters) and GGUF files (llama.cpp uses a bias wherever the file has one).
    biases_from_config: bool = False
    #: tensors of the file (by their own names) that enter attention, each with the names a family
    #: reads it by (none: no mapping reads it). Every one must be read, or compscope would describe
    #: a different model than the file's (a format that renames tensors fills this; GGUF does).
    attention_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def unread_attention_sources(self) -> list[str]:
        """The file's attention tensors that no family read, by their names in the file."""
        return sorted(src for src, names in self.attention_sources.items()
                      if not any(self.tensors.taken(n) for n in names))

    def first_present(self, candidates: Iterable[str]) -> str | None:
        return next((c for c in candidates if c in self.tensors), None)
