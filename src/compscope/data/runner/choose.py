""":func:`runner_for`: the runner for what it is given (a name, a path, a model object, a runner),
where it runs and in what dtype; a model object handed over is never moved or converted."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ...core.heads import HeadWeights, same_device
from ...engine.plan import resolve_device
from ...errors import CompscopeError, OptionError
from ..tokenizers import checked_tokenizer
from . import hf
from .base import Runner, model_device, model_dtype, resolve_dtype
from .hf import HFRunner
from .toy import ToyRunner
from .transformer_lens import TransformerLensRunner, is_transformer_lens


def runner_for(model, hw: HeadWeights | None = None, progress: bool = True,
               device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
               tokenizer=None, tokenizer_said: str | None = None) -> Runner:
    """A :class:`Runner` for ``model``: a toy folder, built-in toy name or ``ToyTransformer``, a HuggingFace folder, a
    ``.gguf`` file, a built-in real model name, a hub id, a loaded ``transformers`` or TransformerLens model
    (module docstring), or a runner (returned as it is). ``hw``: its ``HeadWeights`` when already
    loaded (unprocessed: processing changes the model). ``progress``: a bar while ``transformers``
    loads a model from files (shown after 2 s; a GGUF file is dequantised, which takes a while).
    ``device``: where a model loaded from files runs (default CUDA when present, else the CPU); a
    model object or runner given runs where it is, and another ``device`` for it is refused.
    ``dtype``: what a ``transformers`` model loaded from files computes in (:data:`RUN_DTYPES`;
    default float32); a model object or runner keeps its own, another is refused; toy models
    run in float32. ``tokenizer``: the text tokenizer the natural text is read with
    (``encode(text, add_special_tokens=False) -> list[int]``, a ``transformers`` tokenizer or one
    of one's own), for a ``transformers`` model object (which carries none) or instead of the one a
    folder or TransformerLens model has (a folder's or file's own is read when first asked for: runs
    on repeated random tokens need none); checked to give this model's token ids, and recorded with
    what the text gives (``tokenizer_said``: how, default its type). Every function that takes a
    model takes the runner (``compscope.load`` reads it as its ``hw``)."""
    device = None if device is None else resolve_device(device)  # a device that is not there: refused before any load
    dtype = resolve_dtype(dtype)
    if isinstance(model, Runner) and hw is not None:
        raise OptionError(f"hw: a runner runs with its own weights ({model.hw.meta.name}'s); give the runner alone, "
                          "or make a new one from the model (runner_for(model, hw))")
    if isinstance(model, Runner):  # already running
        if tokenizer is not None:
            raise OptionError("tokenizer: give it when making the runner (runner_for(model, tokenizer=...)), "
                              "not with a runner already made")
        _keeps(model.dtype, dtype, "runner")
        return _stays(model, model.device, device, "runner")
    runner = _new_runner(model, hw, progress, device, dtype)
    runner.progress = progress
    if isinstance(model, (str, os.PathLike)):  # named as the command line names it (a tokenizer object has no path)
        runner.named = (os.fspath(model), ("--tokenizer", "TOKENIZER") if tokenizer is not None else ())
    if tokenizer is not None:
        if isinstance(runner, ToyRunner):
            raise OptionError(f"tokenizer: {runner.hw.meta.name} is one of compscope's toy models, which run on "
                              "repeated random sequences and take no tokenizer")
        runner.tokenizer = checked_tokenizer(tokenizer, runner.hw.n_vocab, runner.hw.meta.name)
        runner.tokenizer_given = tokenizer_said or f"a {type(tokenizer).__name__} given"
    return runner


def _new_runner(model, hw: HeadWeights | None, progress: bool, device: torch.device | None,
                dtype: torch.dtype | None) -> Runner:
    """The body of :func:`runner_for` for anything but a runner (device and dtype resolved)."""
    from ...loading.builtin import find_toy
    from ...loading.formats.toy import is_toy_model
    from ...loading.sources import load

    ours = hw.meta.processed_here if hw is not None else ()
    if ours:
        raise OptionError(f"{hw.meta.name}: data-based measures run the unprocessed model; drop the processing "
                          f"({', '.join(ours)})")
    toy = find_toy(model)
    if toy is not None:
        from ...toy.storage import load_toy

        if dtype not in (None, torch.float32):
            raise OptionError(f"dtype={str(dtype).removeprefix('torch.')!r}: compscope's toy models run in float32")
        net, _ = load_toy(toy)
        return ToyRunner(net.to(resolve_device(device)), load(model) if hw is None else hw)  # load names a built-in as the user does
    if is_toy_model(model):
        _stays(model, model_device(model), device, "toy model")
        _keeps(model_dtype(model), dtype, "toy model")
        return ToyRunner(model, load(model) if hw is None else hw)
    if is_transformer_lens(model):
        _stays(model, model_device(model), device, "TransformerLens model")
        _keeps(model_dtype(model), dtype, "TransformerLens model")
        return TransformerLensRunner(model, load(model) if hw is None else hw)
    if _is_hf_model(model):
        _stays(model, model_device(model), device, "transformers model")
        _keeps(model_dtype(model), dtype, "transformers model")
        return HFRunner(model, load(model) if hw is None else hw)
    path = _files_of(model)
    if path is None:
        raise OptionError(f"cannot run a {type(model).__name__}: give a toy model (folder or object), a HuggingFace folder, a .gguf "
                          "file, a hub id, a transformers model or a TransformerLens model")
    return hf.from_files(path, load(model) if hw is None else hw, progress, resolve_device(device), dtype or torch.float32)


def _files_of(model) -> Path | None:
    """The local files ``transformers`` runs ``model`` from (a folder or ``.gguf`` file; a built-in
    real model's, a hub id's cached snapshot, as ``compscope.load`` reads them); None for an object."""
    from ...loading.builtin import resolve
    from ...loading.formats import builtin_name, hub

    if builtin_name.recognise(model):
        return resolve(model)
    if hub.looks_like_id(model):  # the hub cache's snapshot (folder or .gguf), as load reads it
        return hub.local_model(model)[2]
    return Path(model) if isinstance(model, (str, os.PathLike)) else None


def cannot_run(model) -> str | None:
    """Why the data-based commands cannot run ``model`` (any source :func:`runner_for` takes),
    known from its files' headers without loading it (transformers missing or too old, a split GGUF
    file, a GGUF architecture transformers does not read, ...); None when nothing says so (a
    toy model or a model object runs; files may still fail when transformers loads them)."""
    from ...loading.builtin import find_toy

    if isinstance(model, Runner) or find_toy(model) is not None:
        return None
    path = _files_of(model)
    if path is None:
        return None
    try:
        hf.run_settings(path)
    except CompscopeError as e:
        return str(e)
    return None


def _keeps(have: torch.dtype, dtype: torch.dtype | None, what: str) -> None:
    """Nothing when ``dtype`` is unset or is ``have``; else an error: compscope does not convert a
    model it was handed."""
    if dtype is not None and dtype != have:
        name = lambda d: str(d).removeprefix("torch.")  # noqa: E731
        raise OptionError(f"dtype={name(dtype)!r}: the {what} given computes in {name(have)}; convert it yourself "
                          f"(model.to(torch.{name(dtype)})) or leave the dtype unset")


def _stays(obj, here: torch.device, device: torch.device | None, what: str):
    """``obj`` (a model or runner on ``here``) when ``device`` is unset or names ``here``; else an
    error: compscope does not move a model it was handed."""
    if device is not None and not same_device(device, here):
        raise OptionError(f"device={str(device)!r}: the {what} given runs on {here}; move it there yourself "
                          "(model.to(...)) or leave the device unset")
    return obj


def _is_hf_model(obj) -> bool:
    from ...loading.formats.hf_model import is_hf_model

    return is_hf_model(obj)
