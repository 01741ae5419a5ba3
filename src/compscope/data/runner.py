"""Running a model on data: one interface for compscope's toy models and ``transformers`` models.

A runner holds a model that can run and the ``HeadWeights`` read from the same weights. Its one
method, :meth:`Runner.trace`, runs a batch of token sequences once and keeps, per layer, the
residual that the layer's attention reads (``resid``: before the norm in pre-LN models) and
what the attention added to the residual (``attn_out``). Everything per head — queries, keys,
values, patterns, each head's output — is then recomputed from ``HeadWeights`` with
:mod:`compscope.core.attention`, which the tests tie to each family's own modules (its sum
over heads equals ``attn_out``). So the data-based measures need from a model only these two
hook points per layer, which each family file names (``Family.hook_points``).

Where the weights come from decides how the model runs (nothing is ever downloaded):

- a toy model folder or ``induction-2l``: the toy model itself;
- a HuggingFace folder: ``transformers``, ``from_pretrained(folder, local_files_only=True)``;
- a ``.gguf`` file: ``transformers`` reading the same file (``gguf_file=``; needs ``accelerate``);
- a hub id (``owner/name[@revision]``): the snapshot folder (or its one ``.gguf``) that ``load`` reads;
- a loaded ``transformers`` model: itself;
- a TransformerLens ``HookedTransformer``, ``HookedEncoder`` or ``TransformerBridge``: itself,
  through its own hook points (``hook_resid_pre`` / ``ln1.hook_in`` and the attention output; the
  encoder's post-LN sums ``hook_resid_mid``, ``hook_resid_post``), with the weights it holds,
  processed or not (the processing TransformerLens did is part of the model that runs).

Where it runs (``device``): a model loaded from files goes where it is asked (default: CUDA when
torch sees it, else the CPU, as the engine); a model object given runs where its parameters are,
and is never moved. The trace and every recomputation stay on that device (:meth:`Runner.weights_here`);
what the data-based measures return comes back to the CPU. In what (``dtype``): a ``transformers``
model loaded from files runs in float32 unless asked for bfloat16 or float16 (half the memory of a
folder's parameters; transformers keeps a GGUF file's weights packed whatever the dtype; the
recomputation from ``HeadWeights`` stays float32, on the 16-bit residuals, and post-LN norms are
applied as float32 copies); a model object runs in its own dtype.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..core.attention import combine, head_outputs, head_states, read_input
from ..core.heads import HeadWeights, same_device
from ..engine.plan import resolve_device
from ..errors import OptionError, UnsupportedModelError, one_line
from .tokenizers import checked_tokenizer, has_vocabulary


@dataclass(frozen=True)
class Trace:
    """One clean forward pass: ``tokens (batch, seq)``; per layer ``resid[l]`` and ``attn_out[l]``,
    each ``(batch, seq, d_model)`` float32; for post-LN models also ``norm_in[l]``, the sums the
    layer's two norms normalise (``resid + attention``, and that normalised ``+ MLP``). A run for
    residuals only (:meth:`Runner.trace`'s ``last=False``) may leave ``attn_out[-1]`` and
    ``norm_in[-1]`` None."""

    tokens: Tensor
    resid: list[Tensor]
    attn_out: list[Tensor]
    norm_in: list[tuple[Tensor, Tensor]] | None = None


@dataclass(frozen=True)
class LayerState:
    """A layer recomputed from ``HeadWeights``: what its heads read (``x``), their patterns
    ``(batch, head, q, k)``, values and outputs ``(batch, seq, head, d_model)``, and their sum
    as added to the residual (``out``)."""

    x: Tensor
    pattern: Tensor
    v: Tensor
    outputs: Tensor
    out: Tensor


def layer_state(hw: HeadWeights, layer: int, resid: Tensor) -> LayerState:
    """:class:`LayerState` of ``layer`` for the residual ``resid`` it reads."""
    x = read_input(hw, layer, resid)
    pattern, v = head_states(hw, layer, x)
    o = head_outputs(hw, layer, pattern, v)
    return LayerState(x, pattern, v, o, combine(hw, layer, o))


#: dtypes a model loaded from files can run in (``runner_for(dtype=)``)
RUN_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``dtype`` (a name or a ``torch.dtype``) as one of :data:`RUN_DTYPES`; None stays None."""
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    if name not in RUN_DTYPES:
        raise OptionError(f"dtype={name!r}: a model runs on data in {', '.join(RUN_DTYPES)}")
    return RUN_DTYPES[name]


#: how many copies of one layer's attention patterns (``batch × heads × seq²`` float32) a traced
#: batch holds at its peak: the model's own, its softmax, and compscope's recomputed pattern. Measured
#: (``bench/pattern_memory.py``, the peak's part that grows with seq²): 2.1 on an H200 (SmolLM2's shape);
#: with the residuals the trace keeps (:meth:`Runner.trace_bytes`) the estimate covers the peak there
PATTERN_COPIES = 4


class Runner:
    """A model that runs, and its ``HeadWeights`` (``hw``). Subclasses implement :meth:`_run`."""

    hw: HeadWeights
    #: token a sequence starts with when the model expects one (None: no such token)
    bos: int | None = None
    #: the model's own tokenizer, when it has one (``encode(text) -> list[int]``)
    tokenizer = None
    #: where the tokenizer came from when it is not the model's own (:func:`runner_for`'s
    #: ``tokenizer``), in words recorded with what the text gives; None for the model's own
    tokenizer_given: str | None = None
    #: how the command line names this runner's model: ``(model as typed, the options that make it,
    #: e.g. ('--tokenizer', PATH))``, for the commands a report suggests; a runner made in Python
    #: from a path: that path (and ``--tokenizer TOKENIZER``, a tokenizer object having none); None:
    #: made from a model object
    named: tuple[str, tuple[str, ...]] | None = None
    #: the longest sequence the model takes (its learned positions or its configured context; None: no limit known)
    n_ctx: int | None = None
    #: post-LN models: per layer the two norms (callables on ``(batch, seq, d_model)``) that the
    #: residual passes through (:meth:`Family.post_norm_points`); None otherwise
    post_norms: list[tuple] | None = None
    #: whether a trace has shown that the running model computes what ``hw`` says (:meth:`_check_agreement`)
    _agreed: bool = False
    #: where the model runs, and where traces and recomputations live
    device: torch.device = torch.device("cpu")
    _moved: tuple | None = None  # (HeadWeights, the same on device): the latest weights_here
    #: the latest residual sums of :func:`compscope.data.residual_moments.runner_second_moments`
    #: (a ``ResidualSums``), which every metric estimated on the same tokens for the same heads
    #: (centred or not, ``-own`` or not) reads
    _moments = None
    #: whether long passes over data that take no ``progress`` of their own (the residual moments of
    #: the metrics estimated on data) show a bar: :func:`runner_for`'s ``progress``
    progress: bool = True
    #: the package that runs the model, where not compscope itself (its version is recorded with results)
    package: str | None = None
    #: each layer's own module, where a changed run can leave the layers before the change out
    #: (:meth:`trace`'s ``clean``); None: every run runs every layer
    layer_modules: list | None = None
    #: what a layer module returns, seen on a clean run: ("tensor" or a tuple's length, its residual's
    #: dtype), or False (neither); None: not seen yet
    _returns: tuple | bool | None = None

    def software(self) -> dict[str, str]:
        """``{package: version}`` of what computed a result on this runner: compscope, and the
        package that runs the model where it is not compscope's own."""
        from importlib import metadata

        from .. import __version__

        found = {"compscope": __version__}
        if self.package is not None:
            try:
                found[self.package] = metadata.version(self.package.replace("_", "-"))
            except metadata.PackageNotFoundError:
                found[self.package] = "unknown"
        return found

    def fitting_half(self, half: int) -> int:
        """``half``, cut so that a repeated sequence ``[bos] t t`` with ``|t|`` of it fits the context."""
        return half if self.n_ctx is None else min(half, (self.n_ctx - (self.bos is not None)) // 2)

    def repeat_half(self, half: int | None, default: int) -> tuple[int, str | None]:
        """``|t|`` of repeated sequences ``[bos] t t`` on this model and a note when it was cut:
        ``half`` as given (refused when the sequence would not fit the context), or, when None,
        ``default`` cut to the longest that fits."""
        name, first = self.hw.meta.name, self.bos is not None
        room = self.fitting_half(max(default, half or 0))
        if half is not None:
            if half > room:
                raise OptionError(f"half={half}: sequences [t, t] of {first + 2 * half} tokens are longer than {name} "
                                  f"takes ({self.n_ctx}); give |t| <= {room}, or leave it out for the longest that fits")
            return half, None
        if room < 2:
            raise OptionError(f"{name} takes {self.n_ctx} tokens: too few for repeated sequences [t, t] with |t| >= 2")
        if room == default:
            return default, None
        return room, f"|t| cut from {default} to {room} so that [t, t] fits the {self.n_ctx} tokens {name} takes"

    @property
    def dtype(self) -> torch.dtype:
        """What the model computes in: the dtype of its first floating-point parameter."""
        return model_dtype(getattr(self, "model", None))

    def weights_here(self, hw: HeadWeights | None = None) -> HeadWeights:
        """``hw`` (default the runner's own) on the runner's device, to recompute attention on its
        traces; the copy of the latest one is kept."""
        hw = self.hw if hw is None else hw
        if self._moved is not None and self._moved[0] is hw:
            return self._moved[1]
        moved = hw.to(self.device)
        self._moved = (hw, moved)
        return moved

    def special_ids(self) -> tuple[int, ...]:
        """Token ids a random sequence should not contain (end, padding), where the model names them."""
        cfg = getattr(getattr(self, "model", None), "config", None)
        out: list = []
        for key in ("eos_token_id", "pad_token_id"):
            v = getattr(cfg, key, None)
            out += v if isinstance(v, list) else [v]
        return tuple(v for v in out if isinstance(v, int))

    def trace_bytes(self, shape: tuple[int, int]) -> tuple[int, str]:
        """The memory a :meth:`trace` of ``shape = (batch, seq)`` tokens needs, about, and what it is:
        :data:`PATTERN_COPIES` of one layer's patterns, ``batch × heads × seq²`` float32, and the
        residuals the trace keeps, ``kept × layers × batch × seq × d_model`` float32 (``kept``: each
        layer's input and attention output, and post-LN the two sums its norms normalise)."""
        (b, t), hw = shape, self.hw
        kept = 4 if hw.norm_placement == "post" else 2
        need = (PATTERN_COPIES * b * hw.n_heads * t * t + kept * hw.n_layers * b * t * hw.d_model) * 4
        return need, (f"their attention patterns while a layer runs ({PATTERN_COPIES} x {b} x {hw.n_heads} heads x {t}^2 "
                      f"float32) and the residuals kept ({kept} x {hw.n_layers} layers x {b} x {t} x {hw.d_model} float32)")

    def _check_fits_memory(self, shape: tuple[int, int]) -> None:
        """Sequences that cannot fit (a rotary model takes any length, and ``[t, t]`` with ``|t| = 5000``
        asks for hundreds of GiB in patterns; many short sequences at a time, for their residuals) are
        refused by their length and number before the model runs, not left to fail inside it (or to the
        system's out-of-memory killer): :meth:`trace_bytes` against the memory free on the device."""
        from ..core.memory import check_fits

        need, what = self.trace_bytes(shape)
        check_fits(need, f"sequences of {shape[1]} tokens, {shape[0]} at a time: {what}",
                   "use shorter sequences (validate, intervene: a smaller half) or fewer at a time (a smaller batch_size)",
                   self.device)

    @torch.no_grad()
    def trace(self, tokens: Tensor, add: dict[int, Tensor] | None = None, clean: Trace | None = None,
              last: bool = True) -> Trace:
        """Run ``tokens: (batch, seq)`` once; see :class:`Trace`. ``add``: ``{layer: (batch, seq,
        d_model)}`` added to what that layer's attention writes into the residual (after its
        attention-output norm where there is one; post-LN: before the norm of residual + attention),
        so that every later layer, attention and MLP, reads the change. ``clean``: the trace of the
        same sequences without ``add`` (``tokens`` may be them repeated, ``clean.tokens.repeat(k, 1)``);
        the layers before the first one ``add`` changes compute what they computed there, so where the
        runner holds each layer's module (``transformers`` and TransformerLens models, not a
        ``TransformerBridge`` or the toy model) they are left out, their values taken from ``clean``.
        ``last=False``: for a caller that reads residuals only; where the runner holds the layer
        modules the last layer is not run, its input ``resid[-1]`` kept (``attn_out[-1]`` and, post-LN,
        ``norm_in[-1]`` are then None)."""
        if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.numel() == 0:
            raise OptionError(f"tokens must be a non-empty (batch, seq) tensor, got {what_is(tokens)}")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise OptionError(f"tokens must be integer token ids, got dtype {str(tokens.dtype).removeprefix('torch.')}")
        if int(tokens.min()) < 0 or int(tokens.max()) >= self.hw.n_vocab:
            raise OptionError(f"token ids must lie in 0..{self.hw.n_vocab - 1} for {self.hw.meta.name}")
        if self.n_ctx is not None and tokens.shape[1] > self.n_ctx:
            raise OptionError(f"sequences of {tokens.shape[1]} tokens are longer than {self.hw.meta.name} takes "
                              f"({self.n_ctx}); use shorter sequences (validate: a smaller --half)")
        self._check_fits_memory(tokens.shape)
        tokens = tokens.to(self.device)
        add = self._check_add(add, (*tokens.shape, self.hw.d_model))
        k = self._repeats(clean, tokens)
        start = min(add) if add and clean is not None and self.layer_modules and self._returns else 0
        again = lambda x: x if k == 1 else x.repeat(k, 1, 1)  # noqa: E731  (k == 1: the clean tensors themselves)
        kept = [again(clean.resid[i + 1].to(self._returns[1])) for i in range(start)] if start else []
        seeing = self._seeing_returns() if not add and self.layer_modules and self._returns is None else nullcontext()
        seen: list[Tensor] = []  # the last layer's input, where it is not run
        skipping = self._skipping_last(seen) if not last and self.layer_modules and self._returns else nullcontext()
        with seeing, self._leaving_out(kept), skipping, evaluating(getattr(self, "model", None)):
            resid, out, *rest = self._run(tokens, add) if add else self._run(tokens)
        if seen:
            resid[-1] = seen[0]
        post = rest[0] if rest else None  # post-LN: the norms' inputs per layer
        if start:  # the layers left out: their values in the clean trace, its rows repeated as the tokens
            resid[:start] = [again(r) for r in clean.resid[:start]]
            out[:start] = [again(o) for o in clean.attn_out[:start]]
            if post is not None:
                post[:start] = [(again(a), again(b)) for a, b in clean.norm_in[:start]]
        norm_in = None if post is None else [n if n is None else (n[0].float(), n[1].float()) for n in post]
        trace = Trace(tokens, [r.float() for r in resid], [o if o is None else o.float() for o in out], norm_in)
        if not self._agreed and not add and out[-1] is not None:  # (last=False: the last layer may not have run)
            self._check_agreement(trace, low_precision=resid[0].dtype not in (torch.float32, torch.float64))
            self._agreed = True
        return trace

    def _repeats(self, clean: Trace | None, tokens: Tensor) -> int:
        """How many times ``tokens`` repeats the sequences of ``clean`` (:meth:`trace`), checked."""
        if clean is None:
            return 1
        if not isinstance(clean, Trace) or len(clean.resid) != self.hw.n_layers:
            raise OptionError(f"clean: expected a Trace of {self.hw.meta.name} ({self.hw.n_layers} layers), got {what_is(clean)}")
        b = clean.tokens.shape[0]
        k = tokens.shape[0] // b
        if k * b != tokens.shape[0] or not torch.equal(tokens, clean.tokens.to(tokens.device).repeat(k, 1)):
            raise OptionError(f"clean: a trace of other sequences ({tuple(clean.tokens.shape)} tokens) than these "
                              f"{tuple(tokens.shape)}; it must be of the same sequences, which these may repeat")
        return k

    @contextmanager
    def _seeing_returns(self):
        """Record what the first layer module returns (:attr:`_returns`) on this run."""
        def seen(module, args, output):
            if isinstance(output, Tensor):
                self._returns = ("tensor", output.dtype)
            elif isinstance(output, tuple) and output and isinstance(output[0], Tensor):
                self._returns = (len(output), output[0].dtype)
            else:
                self._returns = False
        handle = self.layer_modules[0].register_forward_hook(seen)
        try:
            yield
        finally:
            handle.remove()

    @contextmanager
    def _leaving_out(self, outputs: list[Tensor]):
        """Layers ``0 .. len(outputs) - 1`` not run: each module returns its output as given, in the
        form the layer returns it (:attr:`_returns`; a tuple's other elements None)."""
        stubs = {i: (lambda *args, _v=self._as_returned(o), **kwargs: _v) for i, o in enumerate(outputs)}
        with self._replacing(stubs):
            yield

    @contextmanager
    def _skipping_last(self, seen: list[Tensor]):
        """The last layer not run: its module keeps its input (the residual) in ``seen`` and returns
        it, in the form the layer returns; what follows it reads nothing of it."""
        def keep(*args, **kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            seen.append(x.detach())
            return self._as_returned(x)

        with self._replacing({len(self.layer_modules) - 1: keep}):
            yield

    def _as_returned(self, x: Tensor):
        """``x`` in the form a layer module returns (:attr:`_returns`; a tuple's other elements None)."""
        form = self._returns[0]
        return x if form == "tensor" else (x, *([None] * (form - 1)))

    @contextmanager
    def _replacing(self, forwards: dict):
        """``{layer: forward}``: each layer module's ``forward`` replaced for the run, and afterwards put
        back as it was (a forward set on the module itself, as accelerate's hooks do, included)."""
        layers = [self.layer_modules[i] for i in forwards]
        own = [layer.__dict__.get("forward") for layer in layers]
        for layer, f in zip(layers, forwards.values()):
            layer.__dict__["forward"] = f
        try:
            yield
        finally:
            for layer, f in zip(layers, own):
                if f is None:
                    layer.__dict__.pop("forward", None)
                else:
                    layer.__dict__["forward"] = f

    def _check_add(self, add: dict | None, shape: tuple[int, int, int]) -> dict[int, Tensor]:
        """``add`` of :meth:`trace`, checked, on the runner's device in the model's dtype."""
        if not add:
            return {}
        if not isinstance(add, dict):
            raise OptionError(f"add must be a dict {{layer: (batch, seq, d_model) tensor}}, got {what_is(add)}")
        out = {}
        for layer, delta in add.items():
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.hw.n_layers:
                raise OptionError(f"add: {layer!r} is not a layer of {self.hw.meta.name} (0..{self.hw.n_layers - 1})")
            if not isinstance(delta, Tensor) or tuple(delta.shape) != shape:
                raise OptionError(f"add[{layer}]: expected a (batch, seq, d_model) = {shape} tensor, got {what_is(delta)}")
            out[layer] = delta.to(self.device, self.dtype)
        return out

    def _check_agreement(self, trace: Trace, low_precision: bool) -> None:
        """On the first trace: each layer's attention recomputed from ``hw`` on the residual it read
        must be what the running model's attention added (relative to its largest value: 1e-3 in
        float32, 5e-2 for a model running in 16-bit), else the running model is not the one whose
        weights compscope read (a reader of the same file that converts it differently, a model
        changed since it was loaded) and every data-based number would be wrong."""
        tol = 5e-2 if low_precision else 1e-3
        for layer, (resid, out) in enumerate(zip(trace.resid, trace.attn_out)):
            scale = float(out.abs().max())
            err = float((layer_state(self.weights_here(), layer, resid).out - out).abs().max())
            if not err <= tol * max(scale, 1e-30):
                raise UnsupportedModelError(
                    f"{self.hw.meta.name}: the running model's attention at layer {layer} is not what compscope "
                    f"recomputes from the weights it read (largest difference {err:.3g} against outputs up to "
                    f"{scale:.3g}): the model that runs is not the one that was read, so no data-based result would hold")

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        """``(resid, attn_out)`` per layer, and for post-LN models the norms' inputs per layer;
        ``add``: as :meth:`trace` (checked)."""
        raise NotImplementedError


class ToyRunner(Runner):
    """compscope's own toy models (``compscope.toy``)."""

    def __init__(self, model, hw: HeadWeights) -> None:
        self.model, self.hw = model, hw
        self.n_ctx = int(model.cfg.n_ctx)
        self.device = model_device(model)

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple[list[Tensor], list[Tensor]]:
        cache: dict = {}
        self.model(tokens, cache=cache, adds=add)
        L = self.model.cfg.n_layers
        return [cache[f"resid_pre.{l}"] for l in range(L)], [cache[f"attn_out.{l}"] for l in range(L)]


class HFRunner(Runner):
    """A ``transformers`` model, hooked where its family says (``Family.hook_points``)."""

    package = "transformers"

    def __init__(self, model, hw: HeadWeights, tokenizer=None) -> None:
        from ..loading.families import family_for

        _new_enough(hw.meta.name)
        self.model, self.hw, self.tokenizer = model, hw, tokenizer
        self.device = model_device(model)
        family = family_for(model.config.to_dict(), f"{type(model).__name__} object")
        self.body = family.base_model(model)  # run without the unembedding, which nothing here reads
        self.points = family.hook_points(model)
        if len(self.points) != hw.n_layers:
            raise UnsupportedModelError(f"{hw.meta.name}: the running model has {len(self.points)} layers, its "
                                        f"HeadWeights {hw.n_layers}: they are not the same model")
        self.layer_modules = layer_modules(self.body, self.points)
        self.norm_modules = family.post_norm_points(model)  # hooked; post_norms: as compscope applies them
        self.post_norms = _float32_norms(self.norm_modules)
        bos = getattr(model.config, "bos_token_id", None)
        # a bos_token_id outside the vocabulary (random configs keep GPT-2's 50256) is no token this model takes
        self.bos = bos if isinstance(bos, int) and 0 <= bos < hw.n_vocab and family.name != "bert" and hw.causal else None
        if hw.positions == "learned" or family.position_table:  # rotary models run past their training context;
            # learned positions, and a table of rotary ones, cannot
            n = next((getattr(model.config, k) for k in ("n_positions", "max_position_embeddings")
                      if isinstance(getattr(model.config, k, None), int)), None)
            self.n_ctx = n
        windows = [w for w in hw.sliding_window if w is not None]
        if windows and hasattr(model.config, "sliding_window") and model.config.sliding_window is None:
            # the running model lost the window (transformers' GGUF reader drops Phi-3's): it computes
            # what the weights say only on sequences within the window
            self.n_ctx = min(windows) if self.n_ctx is None else min(self.n_ctx, *windows)

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        resid: dict[int, Tensor] = {}
        out: dict[int, Tensor] = {}
        norm_in: dict[tuple[int, int], Tensor] = {}
        handles = []
        first = lambda args, kwargs: args[0] if args else kwargs["hidden_states"]  # noqa: E731
        for i, (rm, om) in enumerate(self.points):
            handles.append(rm.register_forward_pre_hook(
                lambda m, a, k, i=i: resid.__setitem__(i, first(a, k).detach()), with_kwargs=True))
            if add and i in add:  # registered first: the hook below records what the layer adds with the change
                handles.append(om.register_forward_hook(lambda m, a, o, d=add[i]: _plus(o, d)))
            handles.append(om.register_forward_hook(
                lambda m, a, o, i=i: out.__setitem__(i, (o[0] if isinstance(o, tuple) else o).detach())))
        for i, norms in enumerate(self.norm_modules or ()):
            for j, nm in enumerate(norms):
                handles.append(nm.register_forward_pre_hook(
                    lambda m, a, k, key=(i, j): norm_in.__setitem__(key, (a[0] if a else k["input"]).detach()),
                    with_kwargs=True))
        try:
            self.body(input_ids=tokens)
        finally:
            for h in handles:
                h.remove()
        n = len(self.points)  # a layer left out (trace's clean) has None
        post = [(norm_in[i, 0], norm_in[i, 1]) if (i, 0) in norm_in else None for i in range(n)] if self.post_norms else None
        return [resid.get(i) for i in range(n)], [out.get(i) for i in range(n)], post


class TransformerLensRunner(Runner):
    """A TransformerLens model (``HookedTransformer``, ``HookedEncoder``, or TransformerLens 4's
    ``TransformerBridge``), run with its own ``run_with_cache``: the residual each layer's attention
    reads and what that attention adds to the residual (after the post-attention norm where there
    is one); for a ``HookedEncoder`` (post-LN) also the sums its two norms take (``hook_resid_mid``,
    ``hook_resid_post``) and the norms themselves (``ln1``, ``ln2``)."""

    package = "transformer_lens"

    def __init__(self, model, hw: HeadWeights) -> None:
        from ..loading.formats.transformer_bridge import is_bridge
        from ..loading.formats.transformer_lens import is_hooked_encoder

        self.model, self.hw = model, hw
        self.device = model_device(model)
        n = len(model.blocks)
        if n != hw.n_layers:
            raise UnsupportedModelError(f"{hw.meta.name}: the running model has {n} layers, its HeadWeights "
                                        f"{hw.n_layers}: they are not the same model")
        self.tokenizer = getattr(model, "tokenizer", None)
        bos = getattr(self.tokenizer, "bos_token_id", None)
        prepend = getattr(model.cfg, "default_prepend_bos", True)
        self.bos = bos if isinstance(bos, int) and prepend and hw.causal else None
        n_ctx = getattr(model.cfg, "n_ctx", None)
        self.n_ctx = n_ctx if isinstance(n_ctx, int) else None
        self.norm_names = None
        if is_bridge(model) and hw.norm_placement == "post":
            self._post_ln_bridge(model)
        elif is_bridge(model):  # the norm's input (the attention's where it has none, OLMo-2), after the post-attention norm if any
            self.names = [(f"blocks.{l}.ln1.hook_in" if hasattr(b, "ln1") else f"blocks.{l}.attn.hook_in",
                           f"blocks.{l}.ln1_post.hook_out" if hasattr(b, "ln1_post") else f"blocks.{l}.attn.hook_out")
                          for l, b in enumerate(model.blocks)]
        else:
            self.names = [(f"blocks.{l}.hook_resid_pre", f"blocks.{l}.hook_attn_out") for l in range(n)]
        if is_hooked_encoder(model):  # BertBlock: resid_mid = resid_pre + attn_out, ln1; resid_post = that + mlp_out, ln2
            self.norm_names = [(f"blocks.{l}.hook_resid_mid", f"blocks.{l}.hook_resid_post") for l in range(n)]
            self.post_norms = _float32_norms([(b.ln1, b.ln2) for b in model.blocks])
        self.wanted = {name for pair in self.names + (self.norm_names or []) for name in pair}
        if not is_bridge(model):  # a block returns the residual it passes on
            self.layer_modules = list(model.blocks)

    def _post_ln_bridge(self, model) -> None:
        """A bridge around a post-LN encoder (BERT): the block's input is what attention reads, the
        output projection ``attn.o`` returns what it adds (before the residual and ``ln1``, which
        here is the post-attention norm, ``LN(h + Attn(h))``), and ``ln1``/``ln2`` take the sums the
        direct path passes through (the wrapped HuggingFace modules run them)."""
        blocks = list(model.blocks)
        if not all(hasattr(b, "ln1") and hasattr(b, "ln2") and hasattr(b.attn, "o") for b in blocks):
            raise UnsupportedModelError(f"{self.hw.meta.name}: a bridge around a post-LN model needs blocks with ln1, "
                                        "ln2 and attn.o to be run on data")
        self.names = [(f"blocks.{l}.hook_in", f"blocks.{l}.attn.o.hook_out") for l in range(len(blocks))]
        self.norm_names = [(f"blocks.{l}.ln1.hook_in", f"blocks.{l}.ln2.hook_in") for l in range(len(blocks))]
        self.post_norms = _float32_norms([(getattr(b.ln1, "_original_component", b.ln1),
                                           getattr(b.ln2, "_original_component", b.ln2)) for b in blocks])

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        if add:
            hooks = [(self.names[i][1], lambda x, hook, d=d: x + d) for i, d in add.items()]
            with self.model.hooks(fwd_hooks=hooks):
                _, cache = self.model.run_with_cache(tokens, names_filter=lambda n: n in self.wanted)
        else:
            _, cache = self.model.run_with_cache(tokens, names_filter=lambda n: n in self.wanted)
        got = {name: cache[name] for name in self.wanted if name in cache.keys()}  # a block left out (trace's clean): None
        norm_in = None if self.norm_names is None else [(got[a], got[b]) if a in got else None for a, b in self.norm_names]
        return [got.get(r) for r, _ in self.names], [got.get(o) for _, o in self.names], norm_in


@contextmanager
def evaluating(model):
    """``model`` (a ``torch.nn.Module``; None: nothing) in eval mode inside, no dropout; after, each
    of its modules in the mode it had, so that a model handed over mid-training leaves as it came."""
    if model is None or not hasattr(model, "modules"):
        yield
        return
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, mode in modes:
            m.training = mode


def layer_modules(body, points: list[tuple]) -> list | None:
    """Each layer's own module: the elements of the module list in ``body`` that hold each layer's
    hook points (``Family.hook_points``), or None where no list does."""
    for seq in body.modules():
        if isinstance(seq, torch.nn.ModuleList) and len(seq) == len(points) and all(
                any(m is a for m in layer.modules()) and any(m is b for m in layer.modules())
                for layer, (a, b) in zip(seq, points)):
            return list(seq)
    return None


def _plus(output, delta: Tensor):
    """A module's output (a tensor, or a tuple whose first element is the tensor) plus ``delta``."""
    if isinstance(output, tuple):
        return (output[0] + delta, *output[1:])
    return output + delta


def _float32_norms(norms: list[tuple] | None) -> list[tuple] | None:
    """Post-LN norms as compscope applies them, to float32 residuals: the model's own modules, or
    float32 copies of them when the model computes in 16 bits (its parameters stay as they are)."""
    if norms is None or all(model_dtype(n) == torch.float32 for pair in norms for n in pair):
        return norms
    import copy

    return [tuple(copy.deepcopy(n).float() for n in pair) for pair in norms]


def _is_transformer_lens(obj) -> bool:
    from ..loading.formats.transformer_bridge import is_bridge
    from ..loading.formats.transformer_lens import is_hooked_encoder, is_hooked_transformer

    return is_bridge(obj) or is_hooked_transformer(obj) or is_hooked_encoder(obj)


def what_is(x) -> str:
    """A tensor's shape, or the type of something that is not a tensor (for messages)."""
    return f"shape {tuple(x.shape)}" if isinstance(x, Tensor) else f"a {type(x).__name__}"


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
    folder or TransformerLens model has; checked to give this model's token ids, and recorded with
    what the text gives (``tokenizer_said``: how, default its type). Every function that takes a
    model takes the runner (``compscope.load`` reads it as its ``hw``)."""
    device = None if device is None else resolve_device(device)  # a device that is not there: refused before any load
    dtype = resolve_dtype(dtype)
    if isinstance(model, Runner) and hw is None:  # already running
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
    from ..loading.builtin import find_toy, resolve
    from ..loading.formats import builtin_name, hub
    from ..loading.formats.toy import is_toy_model
    from ..loading.sources import load

    ours = hw.meta.processed_here if hw is not None else ()
    if ours:
        raise OptionError(f"{hw.meta.name}: data-based measures run the unprocessed model; drop the processing "
                          f"({', '.join(ours)})")
    toy = find_toy(model)
    if toy is not None:
        from ..toy.storage import load_toy

        if dtype not in (None, torch.float32):
            raise OptionError(f"dtype={str(dtype).removeprefix('torch.')!r}: compscope's toy models run in float32")
        net, _ = load_toy(toy)
        return ToyRunner(net.to(resolve_device(device)), load(model) if hw is None else hw)  # load names a built-in as the user does
    if is_toy_model(model):
        _stays(model, model_device(model), device, "toy model")
        _keeps(model_dtype(model), dtype, "toy model")
        return ToyRunner(model, load(model) if hw is None else hw)
    if _is_transformer_lens(model):
        _stays(model, model_device(model), device, "TransformerLens model")
        _keeps(model_dtype(model), dtype, "TransformerLens model")
        return TransformerLensRunner(model, load(model) if hw is None else hw)
    if _is_hf_model(model):
        _stays(model, model_device(model), device, "transformers model")
        _keeps(model_dtype(model), dtype, "transformers model")
        return HFRunner(model, load(model) if hw is None else hw)
    if builtin_name.recognise(model):
        path = resolve(model)
    elif hub.looks_like_id(model):  # the hub cache's snapshot (folder or .gguf), as load reads it
        path = hub.local_model(model)[2]
    elif isinstance(model, (str, Path)):
        path = Path(model)
    else:
        raise OptionError(f"cannot run a {type(model).__name__}: give a toy model (folder or object), a HuggingFace folder, a .gguf "
                          "file, a hub id, a transformers model or a TransformerLens model")
    return _hf_runner(path, load(model) if hw is None else hw, progress, resolve_device(device), dtype or torch.float32)


def model_device(model) -> torch.device:
    """Where a ``torch.nn.Module`` computes: the device of its first parameter (the CPU without any)."""
    p = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return torch.device("cpu") if p is None else p.device


def model_dtype(model) -> torch.dtype:
    """What a ``torch.nn.Module`` computes in: the dtype of its first floating-point parameter (float32 without)."""
    params = model.parameters() if hasattr(model, "parameters") else ()
    return next((p.dtype for p in params if p.is_floating_point()), torch.float32)


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
    from ..loading.formats.hf_model import is_hf_model

    return is_hf_model(obj)


def _hf_runner(path: Path, hw: HeadWeights, progress: bool = True, device: torch.device = torch.device("cpu"),
               dtype: torch.dtype = torch.float32) -> HFRunner:
    """Load the ``transformers`` model (and its tokenizer, when there is one) from local files, onto
    ``device``, in ``dtype``."""
    try:
        import transformers
    except ImportError as e:
        raise OptionError(f"{path}: running this model on data needs transformers (pip install transformers "
                          "accelerate)") from e
    _new_enough(path)
    from ..loading.formats import gguf as gguf_format

    kw = dict(dtype=dtype, attn_implementation="eager", local_files_only=True)
    gguf = path.name if gguf_format.recognise(path) else None  # else a folder, or a file inside one (config.json)
    folder = path if path.is_dir() else path.parent
    if gguf is not None:
        kw.update(gguf_file=gguf, **gguf_format.runtime_config(path, rope_parameters=transformers_at_least(5)))
        # (what transformers' reader would drop)
    auto = transformers.AutoModel if not hw.causal else transformers.AutoModelForCausalLM
    quiet = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # compscope's own bar speaks for the work
    from ..progress import progress_bar

    bar = progress_bar(1, f"loading {hw.meta.name} to run it (transformers)", enabled=progress)
    from .gguf_reading import transformers_gguf_reading

    with transformers_gguf_reading(gguf is not None):  # the weights and the tokenizer read one parse of the file
        try:
            model = auto.from_pretrained(str(folder), **kw).to(device)
            bar.update()
        except Exception as e:  # transformers raises many kinds; the message names the cause
            raise OptionError(f"{path}: transformers could not load the model to run it ({one_line(e)})") from e
        finally:
            bar.close()
            if quiet:
                transformers.utils.logging.enable_progress_bar()
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), **({"gguf_file": gguf} if gguf else {}),
                                                                   local_files_only=True)
        except Exception:  # a model without a tokenizer still runs on token ids
            tokenizer = None
    return HFRunner(model, hw, tokenizer if has_vocabulary(tokenizer) else None)


def transformers_at_least(*version: int) -> bool:
    """Whether the installed ``transformers`` is ``version`` (``major[, minor]``) or later (a
    pre-release of it counts as it)."""
    import transformers
    from packaging.version import Version  # a dependency of transformers

    return Version(transformers.__version__).release[:len(version)] >= version


#: the oldest transformers that runs models for compscope (tested: tests/test_oldest_versions.py)
OLDEST_TRANSFORMERS = (4, 57)


def _new_enough(what) -> None:
    """Nothing when the installed transformers is :data:`OLDEST_TRANSFORMERS` or later; else an error
    naming ``what`` was to run, the version found and the one needed."""
    if not transformers_at_least(*OLDEST_TRANSFORMERS):
        import transformers

        need = ".".join(map(str, OLDEST_TRANSFORMERS))
        raise OptionError(f"{what}: running a model on data needs transformers >= {need}, and {transformers.__version__} "
                          f"is installed (pip install -U 'transformers>={need}')")
