"""``load(source, **processing) -> HeadWeights``: the one entry point for every source."""

from __future__ import annotations

from pathlib import Path

from ..core.heads import HeadWeights
from ..core.processing import process
from ..errors import CompscopeError, LoadError, one_line
from .builtin import BUILTINS
from .formats import FORMATS


def read_unprocessed(source) -> HeadWeights:
    """``source`` as read by the first format of :data:`~compscope.loading.formats.FORMATS` that
    recognises it (``HeadWeights`` pass through, a runner gives the weights it runs), nothing processed."""
    if isinstance(source, HeadWeights):
        return source
    if isinstance(getattr(source, "hw", None), HeadWeights) and callable(getattr(source, "trace", None)):
        return source.hw  # a runner (compscope.runner_for; known by its parts, data/ sits above loading/): its weights
    _has_values(source)
    for name, fmt in FORMATS.items():
        if guarded(source, name, fmt.recognise, source):  # on the CPU, wherever a model object given computes
            return guarded(source, name, lambda s: fmt.read(s).to("cpu"), source)
    from .formats import hub  # the last resort: a name no format knows may be a HuggingFace hub id

    if hub.looks_like_id(source):
        return guarded(source, "hub", hub.read, source)
    if not isinstance(source, (str, Path)):
        raise LoadError(f"cannot load a {type(source).__name__}: expected a path, a built-in name, a hub id, HeadWeights, "
                        "a runner, or a transformers, TransformerLens or compscope toy model")
    path = Path(source)
    if not path.exists():
        raise LoadError(f"{source}: no such file or folder, and not a built-in model ({', '.join(BUILTINS)})")
    raise LoadError(f"{path}: unrecognised file (expected a folder with config.json, a .gguf file, or a compscope model)")


def _has_values(source) -> None:
    """Refuse a model object whose parameters are on the ``meta`` device (shapes without values)."""
    params = getattr(source, "parameters", None)
    if callable(params) and not isinstance(source, (str, Path)):
        try:
            meta = next((p for p in params() if getattr(p, "is_meta", False)), None)
        except Exception:  # not a torch module's parameters: the formats judge it
            return
        if meta is not None:
            raise LoadError(f"{type(source).__name__}: its parameters are on the meta device (shapes without values); "
                            "load its weights before compscope reads them")


def guarded(source, fmt: str, fn, *args):
    """``fn(*args)``; an exception that is not compscope's (a reader or converter tripped on a
    value no check foresaw) becomes a ``LoadError`` that names the source, the format and the
    problem, never a traceback from deep inside a library."""
    try:
        return fn(*args)
    except CompscopeError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except RecursionError as e:
        raise LoadError(f"{_name(source)}: cannot be read as a {fmt} model: nested too deeply") from e
    except MemoryError as e:
        raise LoadError(f"{_name(source)}: cannot be read as a {fmt} model: it asks for more memory than there is") from e
    except Exception as e:
        raise LoadError(f"{_name(source)}: cannot be read as a {fmt} model ({type(e).__name__}: {one_line(e)})") from e


def _name(source) -> str:
    return str(source) if isinstance(source, (str, Path)) else type(source).__name__


def load(source, *, revision: str | None = None, cache_dir: str | Path | None = None, fold_norm: bool = False,
         linearise_qk_norm: bool = False, center_writing: bool = False, fold_value_bias: bool = False) -> HeadWeights:
    """Load ``source`` into canonical ``HeadWeights`` (float32, on the CPU; ``HeadWeights`` given pass through as they are).

    ``source``: a HuggingFace folder (``config.json`` + ``*.safetensors``), a ``.gguf`` file,
    a compscope model folder (``compscope.json``), a toy model folder (``toy.json``) or ``ToyTransformer``, a loaded ``transformers`` model or TransformerLens
    ``HookedTransformer``, a built-in name (``induction-2l``, the default; ``smollm2``, ``gemma3-270m``, ``minilm``),
    or a HuggingFace hub id (``"EleutherAI/pythia-70m"``, with ``revision`` a branch, tag or commit
    and ``cache_dir`` the hub cache): read from the local cache first, downloaded only where
    ``HF_HUB_OFFLINE`` is not set. Processing is off unless asked for, and recorded in ``meta.processing``
    (:mod:`compscope.core.processing`: ``fold_norm``, ``linearise_qk_norm``, ``center_writing``, ``fold_value_bias``).

    >>> hw = load("smollm2")                        # doctest: +SKIP
    >>> hw.n_layers, hw.n_heads, hw.n_kv_heads      # doctest: +SKIP
    (30, 9, 3)
    """
    if revision is not None or cache_dir is not None:
        from .formats.hub import looks_like_id, parse

        if not isinstance(source, str) or not looks_like_id(source):
            raise LoadError(f"{source}: revision= and cache_dir= apply to HuggingFace hub ids (like 'EleutherAI/pythia-70m')")
        source = parse(source, revision, cache_dir)
    hw = read_unprocessed(source)
    return process(hw, fold_norm=fold_norm, linearise_qk_norm=linearise_qk_norm, center_writing=center_writing,
                   fold_value_bias=fold_value_bias)


def load_with_positional(source, *, fold_norm: bool = False, linearise_qk_norm: bool | str = False,
                         center_writing: bool = False, fold_value_bias: bool = False, **where) -> tuple[HeadWeights, HeadWeights]:
    """``(weights, positional)``: :func:`load`'s weights, and those the heads' previous-token scores
    read (:func:`compscope.analysis.circuits.positional_weights`): the same weights, or where QK-norm
    is linearised, the model read once and folded as asked but before the linearisation.
    ``where``: :func:`load`'s ``revision`` and ``cache_dir``."""
    before = load(source, fold_norm=fold_norm, **where)
    hw = process(before, linearise_qk_norm=linearise_qk_norm, center_writing=center_writing,
                 fold_value_bias=fold_value_bias)
    return hw, (before if linearise_qk_norm else hw)
