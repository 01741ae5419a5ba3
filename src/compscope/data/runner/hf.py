"""``transformers`` models on data: hooked where each family file says, and loaded from local files
(a HuggingFace folder or a ``.gguf`` file; never downloaded)."""

from __future__ import annotations

import threading
from pathlib import Path

import torch
from torch import Tensor

from ...core.heads import HeadWeights
from ...errors import CompscopeError, OptionError, UnsupportedModelError, one_line
from ..tokenizers import has_vocabulary
from .base import Runner, _padded, evaluating, float32_norms, model_device
from ...loading.families.base import transformers_at_least  # noqa: F401  (data.runner's too)


#: held while a runner reads its tokenizer on first use
_TOKENIZER_READ = threading.Lock()


class HFRunner(Runner):
    """A ``transformers`` model, hooked where its family says (``Family.hook_points``)."""

    package = "transformers"
    #: reads the model's own tokenizer on first use of :attr:`tokenizer` (:func:`from_files`: building one from a
    #: large vocabulary takes seconds, and runs on repeated random tokens need none); None once read or given
    _unread_tokenizer = None
    _tokenizer = None

    @property
    def tokenizer(self):
        """The model's own tokenizer (or the one given), read from its files on first use; None where there is none."""
        if self._unread_tokenizer is not None:
            with _TOKENIZER_READ:  # (another thread asking meanwhile waits for it, rather than seeing None)
                if self._unread_tokenizer is not None:
                    self._tokenizer = self._unread_tokenizer()
                    self._unread_tokenizer = None
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, tokenizer) -> None:
        self._unread_tokenizer, self._tokenizer = None, tokenizer

    def __init__(self, model, hw: HeadWeights, tokenizer=None) -> None:
        from ...loading.families import family_for, language_model

        _new_enough(hw.meta.name)
        self.model, self.hw, self.tokenizer = model, hw, tokenizer
        self.device = model_device(model)
        where = f"{type(model).__name__} object"
        text = language_model(model.config.to_dict(), where)[0]  # a vision-language model's language model's config
        self.text_settings = text  # (the special ids a wrapper's config leaves to it: Runner.special_ids)
        family = family_for(text, where)
        config = model.config.get_text_config()  # (the same, as transformers' object; else its own)
        self.body = family.base_model(model)  # run without the unembedding, which nothing here reads
        family.prepare(model)  # (BigBird's: switched to the full attention compscope reads, before it is hooked)
        self.points = family.hook_points(model)
        self.added_by = family.added_by  # what the residual receives from a hooked output
        self.inputs = family.run_inputs  # (BROS's boxes: all zeros)
        self.pads = family.pads_sequences  # (Longformer's: what the hooks see is longer than the sequence)
        # what the residual receives is this multiple of the hooked attention output (Granite's
        # residual_multiplier, folded into W_O): outputs are scaled by it, added changes divided
        self.out_scale = family.residual_scale(text, where)
        self.divisors = family.residual_divisors(model)  # Gemma 4's layer scalars: the model's residual, scaled
        if len(self.points) != hw.n_layers:
            raise UnsupportedModelError(f"{hw.meta.name}: the running model has {len(self.points)} layers, its "
                                        f"HeadWeights {hw.n_layers}: they are not the same model")
        self.layer_modules = layer_modules(self.body, self.points) if family.layers_are_modules else None
        self.norm_modules = family.post_norm_points(model)  # hooked; post_norms: as compscope applies them
        self.post_norms = tensor_outputs(float32_norms(self.norm_modules), family.channels_first)
        self.channels_first = family.channels_first  # (SqueezeBERT's: (batch, d_model, seq) in the model)
        self.sequence_first = family.sequence_first  # (FSMT's encoder's: (seq, batch, d_model))
        bos = getattr(config, "bos_token_id", None)
        # a bos_token_id outside the vocabulary (random configs keep GPT-2's 50256) is no token this model takes
        self.bos = bos if isinstance(bos, int) and 0 <= bos < hw.n_vocab and hw.causal else None
        if hw.positions == "learned" or family.position_table:  # rotary models run past their training context;
            # learned positions, and a table of rotary ones, cannot
            n = next((getattr(config, k) for k in ("n_positions", "max_position_embeddings")
                      if isinstance(getattr(config, k, None), int)), None)
            if hw.positions == "learned" and hw.W_pos is not None:  # RoBERTa's table has rows no sequence reads
                n = hw.W_pos.shape[1] if n is None else min(n, hw.W_pos.shape[1])
            self.n_ctx = n
        exact = family.exact_context(text, where)  # LongRoPE's or Llama 4's temperature's original context
        if exact is not None:
            self.n_ctx = exact if self.n_ctx is None else min(self.n_ctx, exact)
        windows = [w for w in hw.sliding_window if w is not None]
        if windows and not family.runs_windows(config):  # the running model applies no window (transformers'
            # GGUF reader drops Phi-3's) or another one: it computes what the weights say only on sequences
            # within the narrowest window, its own included
            own = getattr(config, "sliding_window", None)
            windows += [own] if isinstance(own, int) and not isinstance(own, bool) and own > 0 else []
            self.n_ctx = min(windows) if self.n_ctx is None else min(self.n_ctx, *windows)

    def _mismatch_hint(self) -> str:
        import transformers

        return (f" (run by transformers {transformers.__version__}: if the weights are the model's own, this release "
                "may run the family otherwise than its makers do, and another may not)")

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        resid: dict[int, Tensor] = {}
        out: dict[int, Tensor] = {}
        norm_in: dict[tuple[int, int], Tensor] = {}
        handles = []
        n_seq = tokens.shape[1]
        turn = (lambda x: x.transpose(1, 2)) if self.channels_first else self._turned  # noqa: E731
        cut = (lambda x: turn(x)[:, :n_seq]) if self.pads else turn  # noqa: E731  (the model's padding, off)
        first = lambda args, kwargs: cut(args[0] if args else _hidden(kwargs))  # noqa: E731
        div = self.divisors or [1.0] * len(self.points)
        for i, (rm, om) in enumerate(self.points):
            handles.append(rm.register_forward_pre_hook(
                lambda m, a, k, i=i: resid.__setitem__(i, _over(first(a, k).detach(), div[i])), with_kwargs=True))
            if add and i in add:  # registered first: the hook below records what the layer adds with the change
                d = add[i] * (div[i] / self.out_scale) if self.out_scale != 1.0 or div[i] != 1.0 else add[i]
                handles.append(om.register_forward_hook(lambda m, a, o, d=turn(d): _plus(o, d, self.pads)))
            handles.append(om.register_forward_hook(
                lambda m, a, o, i=i: out.__setitem__(i, _over(cut(self._added(o)), div[i]))))
        for i, norms in enumerate(self.norm_modules or ()):
            for j, nm in enumerate(norms):
                handles.append(nm.register_forward_pre_hook(
                    lambda m, a, k, key=(i, j): norm_in.__setitem__(key, cut(a[0] if a else k["input"]).detach()),
                    with_kwargs=True))
        try:
            self.body(input_ids=tokens, **self.inputs(tokens))
        except (RuntimeError, ValueError, IndexError) as e:  # (transformers' own failure: said, not a deep traceback)
            if isinstance(e, CompscopeError):
                raise
            raise UnsupportedModelError(
                f"{self.hw.meta.name}: transformers' {type(self.model).__name__} failed on a forward pass over tokens "
                f"of shape {tuple(tokens.shape)} ({one_line(e)})") from e
        finally:
            for h in handles:
                h.remove()
        n = len(self.points)  # a layer left out (trace's clean) has None
        post = [(norm_in[i, 0], norm_in[i, 1]) if (i, 0) in norm_in else None for i in range(n)] if self.post_norms else None
        return [resid.get(i) for i in range(n)], [out.get(i) for i in range(n)], post

    def _added(self, output) -> Tensor:
        """What the residual receives from a hooked output module's ``output``."""
        o = self.added_by(output).detach()
        return o if self.out_scale == 1.0 else o * self.out_scale


def _hidden(kwargs: dict) -> Tensor:
    """The residual a hooked module reads, passed by name: ``hidden_states`` (FSMT's attention: ``query``)."""
    return kwargs["hidden_states"] if "hidden_states" in kwargs else kwargs["query"]


def layer_modules(body, points: list[tuple]) -> list | None:
    """Each layer's own module: the elements of the module list in ``body`` that hold each layer's
    hook points (``Family.hook_points``), or None where no list does."""
    for seq in body.modules():
        if isinstance(seq, torch.nn.ModuleList) and len(seq) == len(points) and all(
                any(m is a for m in layer.modules()) and any(m is b for m in layer.modules())
                for layer, (a, b) in zip(seq, points)):
            return list(seq)
    return None


class _FirstOutput(torch.nn.Module):
    """A module that returns a tensor, or a tuple whose first element is one (I-BERT's LayerNorm returns a
    scaling factor beside it), called for that tensor alone."""

    def __init__(self, inner: torch.nn.Module, channels_first: bool = False) -> None:
        super().__init__()
        self.inner, self.channels_first = inner, channels_first

    def forward(self, x: Tensor) -> Tensor:
        if self.channels_first:  # (SqueezeBERT's norms: over the channels of (batch, d_model, seq))
            return self.inner(x.transpose(1, 2)).transpose(1, 2)
        out = self.inner(x)
        return out[0] if isinstance(out, tuple) else out


def tensor_outputs(norms: list[tuple] | None, channels_first: bool = False) -> list[tuple] | None:
    """Post-LN norms (``Family.post_norm_points``) as called for their output tensor alone, on ``(batch, seq,
    d_model)`` (``channels_first``: norms that take and give ``(batch, d_model, seq)``, turned)."""
    return None if norms is None else [tuple(_FirstOutput(n, channels_first) for n in pair) for pair in norms]


def _over(x: Tensor, divisor: float) -> Tensor:
    """``x / divisor`` (``x`` itself for 1): the model's residual, or what a layer adds to it, as compscope reads it."""
    return x if divisor == 1.0 else x / divisor


def _plus(output, delta: Tensor, pads: bool = False):
    """A module's output (a tensor, or a tuple whose first element is the tensor) plus ``delta``; ``pads``: padded
    with zeros along the sequence where the output is longer (a model that pads its sequences:
    ``Family.pads_sequences``)."""
    o = output[0] if isinstance(output, tuple) else output
    if pads:
        delta = _padded(delta, o)
    return (o + delta, *output[1:]) if isinstance(output, tuple) else o + delta


def run_settings(path: Path) -> dict:
    """What ``from_pretrained`` is given, beyond the defaults, to run the model in the local files at
    ``path`` (a GGUF file: its name and what transformers' GGUF reader drops), once it is known
    from their headers alone, nothing loaded, that transformers can run it; else the error that
    says why not (transformers missing or too old, a GGUF file it does not read, a folder in the
    model makers' own format, compscope's own folder of heads)."""
    from ...loading.formats import consolidated, native

    if native.recognise(path):
        raise OptionError(f"{path}: a compscope model folder holds the attention heads alone, not a model that runs: "
                          "the data-based commands need the model it was saved from (its folder, file or object)")
    if consolidated.recognise(path):  # whatever is installed
        raise UnsupportedModelError(
            f"{path}: a reference-format folder (params.json, no config.json), which transformers does not run: the "
            "data-based commands cannot run it (the weight-only ones read it); for data, use the model's HuggingFace "
            "folder, or convert this one with transformers' convert_mistral_weights_to_hf.py (Meta's Llama: "
            "convert_llama_weights_to_hf.py)")
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        raise OptionError(f"{path}: running this model on data needs transformers (pip install transformers "
                          "accelerate)") from e
    _new_enough(path)
    from ...loading.formats import gguf as gguf_format

    if not gguf_format.recognise(path):  # a folder, or a file inside one (config.json)
        _known_type(path)
        return {}
    return dict(gguf_file=path.name, **gguf_format.runtime_config(path, rope_parameters=transformers_at_least(5)))


def from_files(path: Path, hw: HeadWeights, progress: bool = True, device: torch.device = torch.device("cpu"),
               dtype: torch.dtype = torch.float32) -> HFRunner:
    """Load the ``transformers`` model (and its tokenizer, when there is one) from local files, onto
    ``device``, in ``dtype``."""
    settings = run_settings(path)
    import transformers

    from ...loading.formats import gguf as gguf_format

    # use_kernels off: transformers 5.25 turns on kernels from the hub by default (a download, and layers other than
    # the eager ones compscope hooks); earlier versions take the flag, default off
    kw = dict(dtype=dtype, attn_implementation="eager", local_files_only=True, use_kernels=False, **settings)
    gguf = settings.get("gguf_file")
    folder = path if path.is_dir() else path.parent
    auto = transformers.AutoModel if not hw.causal else transformers.AutoModelForCausalLM
    # a vision-language or speech model runs on text alone (a multimodal encoder, EmbeddingGemma 2's, as AutoModel)
    wrapper = _wrapper_class(folder) if gguf is None and hw.causal else None
    named = _part_class(path, folder, hw, gguf) or (_named_class(folder, hw) if gguf is None else None)
    if named is not None:  # (DPR: one model type, three classes whose tensors sit under different names)
        auto = named
    elif wrapper is not None:
        auto = wrapper
    elif gguf is None and hw.causal and not _has_causal_lm(folder):  # a language model saved without its head, of a
        auto = transformers.AutoModel  # type transformers builds no causal LM for (Muse Glimmer's): its base model
    quiet = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # compscope's own bar speaks for the work
    from ...progress import progress_bar

    bar = progress_bar(1, f"loading {hw.meta.name} to run it (transformers)", enabled=progress)
    from ..gguf_reading import transformers_gguf_reading

    with transformers_gguf_reading(gguf is not None):  # the config and the weights read one parse of the file
        try:
            # transformers' report of what it filled in: from its own from_pretrained (Qwen2.5-Omni's, which loads its
            # speakers after, takes no such flag)
            own = getattr(getattr(auto, "from_pretrained", None), "__func__", None)
            reports = not issubclass(auto, transformers.PreTrainedModel) or (
                own is transformers.PreTrainedModel.from_pretrained.__func__)
            model = auto.from_pretrained(str(folder), **kw, **({"output_loading_info": True} if reports else {}))
            model, loaded = model if reports else (model, {})
            model = model.to(device)
            bar.update()
        except Exception as e:  # transformers raises many kinds; the message names the cause
            raise OptionError(f"{path}: transformers could not load the model to run it ({one_line(e)})") from e
        finally:
            bar.close()
            if quiet:
                transformers.utils.logging.enable_progress_bar()
        if gguf is not None and gguf_format.divides_frequencies(path):  # Llama 3.1's scaling, as llama.cpp stores it
            set_frequencies(model, hw, path)

    def read_tokenizer():
        read = progress_bar(1, f"reading {hw.meta.name}'s tokenizer (transformers)", enabled=runner.progress)
        with transformers_gguf_reading(gguf is not None):
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    str(folder), **({"gguf_file": gguf} if gguf else {}), local_files_only=True)
            except Exception:  # a model without a tokenizer still runs on token ids
                return None
            finally:
                read.update()
                read.close()
        return tokenizer if has_vocabulary(tokenizer) else None

    runner = HFRunner(model, hw)
    runner._unread_tokenizer = read_tokenizer  # read on first use
    refuse_built_at_random(runner, sorted(loaded.get("missing_keys") or ()), path)
    return runner


@torch.no_grad()
def refuse_built_at_random(runner: HFRunner, missing: list[str], path: Path | str) -> None:
    """Refuse a model whose checkpoint lacks tensors its class builds (``missing``: the names transformers
    reports as missing and fills in at random) where they reach what the runner hooks: moved together, by
    noise as large as themselves, they move a hooked residual, attention output or norm input on a short
    sequence. Tensors the runs never read pass (BERT's pooler, a language model's unembedding), as do tables of
    sinusoids transformers computes rather than draws (RoFormer's ``embed_positions``: its rotary map, which the
    runner's first trace checks against the weights)."""
    model = runner.model
    named = {**dict(model.named_parameters(remove_duplicate=False)), **dict(model.named_buffers(remove_duplicate=False))}
    inside = {id(t) for t in (*runner.body.parameters(), *runner.body.buffers())}
    computed = lambda k: "Sinusoidal" in type(model.get_submodule(k.rpartition(".")[0])).__name__  # noqa: E731
    moved = [(k, named[k]) for k in missing if k in named and id(named[k]) in inside
             and named[k].dtype.is_floating_point and named[k].numel() and not computed(k)]
    if not moved:
        return
    n = min(8, runner.n_ctx or 8)
    tokens = (torch.arange(1, n + 1) % runner.hw.n_vocab).unsqueeze(0).to(runner.device)
    with evaluating(model):
        before = runner._run(tokens)
        kept = [t.clone() for _, t in moved]
        g = torch.Generator().manual_seed(0)
        try:
            for _, t in moved:
                t.add_(torch.randn(t.shape, generator=g).to(t) * (1.0 + float(t.float().abs().mean())))
            after = runner._run(tokens)
        finally:
            for (_, t), k in zip(moved, kept):
                t.copy_(k)
    if not any(_moves(a, b) for a, b in zip(_flat(before), _flat(after))):
        return
    names = ", ".join(k for k, _ in moved[:6]) + (f" and {len(moved) - 6} more" if len(moved) > 6 else "")
    raise OptionError(
        f"{path}: the checkpoint lacks {len(moved)} tensor(s) the model's class builds ({names}), which transformers "
        "filled in at random and which reach the residual stream the heads read: every data-based result would be "
        "that of another model (the weight-only commands read the heads as they are); complete the checkpoint")


def _flat(run: tuple) -> list:
    """The tensors of a :meth:`HFRunner._run` (residuals, attention outputs, post-LN norms' inputs), None kept."""
    resid, out, *rest = run
    post = [x for pair in (rest[0] or []) for x in (pair or (None, None))] if rest else []
    return [*resid, *out, *post]


def _moves(a: Tensor | None, b: Tensor | None) -> bool:
    """Whether ``b`` differs from ``a`` by more than 1e-4 of ``a``'s largest value."""
    if a is None or b is None:
        return (a is None) != (b is None)
    return bool(((a.float() - b.float()).abs().max() > 1e-4 * max(float(a.float().abs().max()), 1e-30)).item())


def set_frequencies(model, hw: HeadWeights, path: Path) -> None:
    """Set the rotary frequencies of the running ``model`` (every rotary module's ``inv_freq``) to the ones
    compscope read into ``hw``: a GGUF file's frequency divisors (``rope_freqs``), which transformers' GGUF
    reader leaves out. One set of frequencies for every layer, a module of their width, or refused."""
    f = hw.rotary.inv_freq if hw.rotary is not None else None
    rotary = [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), Tensor)]
    if f is None or not bool((f == f[0]).all()) or not rotary or any(m.inv_freq.shape != f[0].shape for m in rotary):
        raise UnsupportedModelError(
            f"{path}: the file's rotary frequency divisors (rope_freqs), which transformers' GGUF reader leaves out, "
            "cannot be handed to the running model (not one set of frequencies for every layer, or no rotary module "
            "of their width): the data-based commands cannot run it (the weight-only ones read it)")
    with torch.no_grad():
        for m in rotary:
            m.inv_freq.copy_(f[0].to(m.inv_freq.dtype))
            if isinstance(getattr(m, "original_inv_freq", None), Tensor):  # (what a dynamic rope restores)
                m.original_inv_freq = m.inv_freq.clone()


def _has_causal_lm(folder: Path) -> bool:
    """Whether transformers builds a causal LM for the config in ``folder`` (a language model saved as
    its base model alone, of a type it builds none for, has to run as that base model; the hooks and
    the weights read do not need the head)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except Exception:  # noqa: BLE001  (transformers says what it misses when it loads the model)
        return True
    return type(config) in transformers.AutoModelForCausalLM._model_mapping


def _part_class(path: Path, folder: Path, hw: HeadWeights, gguf: str | None):
    """The transformers class that runs the part of the model ``hw``'s family reads (``Family.runs_as``: T5's
    encoder), by the model_type of the folder's config or the GGUF file's architecture; else None."""
    import transformers

    from ...loading.families import FAMILIES
    from ...loading.formats import gguf as gguf_format
    from ...loading.formats.safetensors_folder import read_config

    family = FAMILIES.get(hw.meta.family) if hw.meta.family in FAMILIES.names() else None
    if family is None or not family.runs_as:
        return None
    if gguf is not None:
        model_type = gguf_format.read_config(path).get("model_type")  # (the headers: no tensor is read)
    elif (folder / "config.json").is_file():
        model_type = read_config(folder).get("model_type")
    else:
        return None
    name = family.runs_as.get(model_type)
    return None if name is None else getattr(transformers, name, None)


def _named_class(folder: Path, hw: HeadWeights):
    """The transformers class a folder's config names (``architectures``) where ``hw``'s family runs its models
    as that class (``Family.runs_as_named``), or where ``hw`` is an encoder's and the class is of the folder's
    model type (an encoder saved with its head, BERT's masked LM: built whole, every tensor is the model's, and
    the runner runs its base model alone); else None."""
    import transformers

    from ...loading.families import FAMILIES
    from ...loading.formats.safetensors_folder import read_config

    family = FAMILIES.get(hw.meta.family) if hw.meta.family in FAMILIES.names() else None
    if family is None or not (folder / "config.json").is_file() or (hw.causal and not family.runs_as_named):
        return None
    config = read_config(folder)
    named = config.get("architectures") or []
    first = named[0] if isinstance(named, list) and named and isinstance(named[0], str) else None
    cls = None if first is None else _model_class(first, config.get("model_type"))
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        return None
    if family.runs_as_named:
        return cls
    own = getattr(getattr(cls, "config_class", None), "model_type", None)
    return cls if own is not None and own == config.get("model_type") else None


def _model_class(name: str, model_type: object):
    """transformers' class ``name``: exported at its top, or else from the modeling module of ``model_type``
    (BridgeTower's text model is not exported); None where neither has it."""
    import importlib

    import transformers

    found = getattr(transformers, name, None)
    if found is not None or not isinstance(model_type, str):
        return found
    try:
        from transformers.models.auto.configuration_auto import model_type_to_module_name

        module = model_type_to_module_name(model_type)
        return getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name, None)
    except Exception:  # noqa: BLE001  (a type transformers does not know, or a module it cannot import here)
        return None


def _wrapper_class(folder: Path):
    """For a HuggingFace folder holding a model that wraps the language model compscope reads (a
    vision-language or speech model), the transformers class that builds it: the one its config
    names (``architectures``: Granite Speech's, BLIP-2's, ...), else ``AutoModelForImageTextToText``;
    None for any other folder."""
    import transformers

    from ...loading.families import language_model
    from ...loading.formats.safetensors_folder import read_config

    if not (folder / "config.json").is_file():  # transformers says what it misses
        return None
    config = read_config(folder)
    if language_model(config, str(folder))[1] is None:
        return None
    named = config.get("architectures") or []
    first = named[0] if isinstance(named, list) and named and isinstance(named[0], str) else None
    cls = None if first is None else getattr(transformers, first, None)
    is_model = isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)
    return cls if is_model else transformers.AutoModelForImageTextToText


#: the oldest transformers that runs models for compscope (tested: tests/test_oldest_versions.py)
OLDEST_TRANSFORMERS = (4, 57)


def _known_type(path: Path) -> None:
    """Nothing unless the folder at ``path`` (or of the file ``path``) is of a family whose models transformers has
    none of (:attr:`~compscope.loading.families.base.Family.runs_on_data`: Nemotron-NAS's, which run through their
    own code, which compscope does not run); for those, the error that says the data-based commands cannot run it.
    (Another model transformers cannot load, it says why itself.)"""
    import json

    from ...errors import CompscopeError
    from ...loading.families import family_for

    file = (path if path.is_dir() else path.parent) / "config.json"
    try:
        config = json.loads(file.read_text())
        family = family_for(config, str(file)) if isinstance(config, dict) else None
    except (OSError, ValueError, CompscopeError):  # (no config, or not one compscope reads: transformers says more)
        return
    if family is not None and not family.runs_on_data:
        raise UnsupportedModelError(
            f"{path}: a model of type {config.get('model_type')!r} ({family.name}), which transformers has no model of "
            "(its files run through their own code, which compscope does not run): the data-based commands cannot run "
            "it (the weight-only ones read it)")


def _new_enough(what) -> None:
    """Nothing when the installed transformers is :data:`OLDEST_TRANSFORMERS` or later; else an error
    naming ``what`` was to run, the version found and the one needed."""
    if not transformers_at_least(*OLDEST_TRANSFORMERS):
        import transformers

        need = ".".join(map(str, OLDEST_TRANSFORMERS))
        raise OptionError(f"{what}: running a model on data needs transformers >= {need}, and {transformers.__version__} "
                          f"is installed (pip install -U 'transformers>={need}')")
