"""The runner interface: :class:`Runner` (a model that runs, and its ``HeadWeights``), the
:class:`Trace` of one clean forward pass, each layer recomputed from the weights (:func:`layer_state`),
and what every runner needs of a ``torch`` module (its device, its dtype, eval mode)."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from ...core.attention import combine, head_outputs, head_states, read_input
from ...core.heads import HeadWeights
from ...errors import OptionError, UnsupportedModelError, check_tokens, what_is


@dataclass(frozen=True)
class Trace:
    """One forward pass: ``tokens (batch, seq)``; per layer ``resid[l]``, what the layer reads, and
    ``attn_out[l]``, what its attention adds to the residual (with :meth:`Runner.trace`'s ``add`` where
    given), each ``(batch, seq, d_model)`` float32; for post-LN models also ``norm_in[l]``, the sums the
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
    o = head_outputs(hw, layer, pattern, v, x)
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


#: config keys of token ids a model replaces by other inputs (Pocket TTS's audio placeholders; Higgs Audio v2's, and
#: its delay token, whose positions take its audio norms and MLPs), kept out of random sequences as special tokens are
AUDIO_PLACEHOLDERS = ("audio_prompt_token_id", "audio_latent_token_id", "audio_prompt_bos_token_id",
                      "audio_bos_token_id", "audio_token_id", "audio_delay_token_id")

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
    #: per layer ``l``, ``P_l``: the running model's residual before layer ``l`` is ``P_l`` times the one
    #: compscope reads (Gemma 4 scales the whole residual after each layer: :meth:`Family.residual_divisors`);
    #: None: the same residual. Traces hold compscope's; a left-out layer returns the model's
    divisors: list[float] | None = None
    #: whether the running model pads each sequence at its end with tokens its attention masks (Longformer's, to a
    #: multiple of its window: ``Family.pads_sequences``): a layer left out returns the clean run's residual padded
    #: with zeros, which no real token reads
    pads: bool = False
    #: whether the running model keeps its residual sequence-first, ``(seq, batch, d_model)`` (FSMT's encoder:
    #: ``Family.sequence_first``): what a left-out layer returns, and a skipped layer's input, are turned
    sequence_first: bool = False
    #: what a layer module returns, seen on a clean run: ("tensor", its dtype), (a tuple's or list's length, its
    #: residual's dtype, tuple or list), or False (neither); None: not seen yet
    _returns: tuple | bool | None = None

    def software(self) -> dict[str, str]:
        """``{package: version}`` of what computed a result on this runner: compscope, and the
        package that runs the model where it is not compscope's own."""
        from importlib import metadata

        from ... import __version__

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
        """Token ids a random sequence should not contain (end, padding, a masked LM's mask token,
        which ESM's embeddings treat apart), where the model's config names them (XLM's ``pad_index``
        too: it masks every position from a sequence's count of other tokens on; audio placeholders,
        whose positions a model fills from its audio inputs: :data:`AUDIO_PLACEHOLDERS`); where the config
        does not, its language model's (``text_settings``: EsmFold2's ESM C's)."""
        cfg = getattr(getattr(self, "model", None), "config", None)
        text = getattr(self, "text_settings", None) or {}
        out: list = []
        for key in ("eos_token_id", "pad_token_id", "mask_token_id", "pad_index", *AUDIO_PLACEHOLDERS):
            v = getattr(cfg, key, None)
            v = text.get(key) if v is None else v
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
        from ...core.memory import check_fits

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
        check_tokens(tokens, n_vocab=self.hw.n_vocab, model=self.hw.meta.name)
        if self.n_ctx is not None and tokens.shape[1] > self.n_ctx:
            raise OptionError(f"sequences of {tokens.shape[1]} tokens are longer than {self.hw.meta.name} takes "
                              f"({self.n_ctx}); use shorter sequences (validate: a smaller --half)")
        self._check_fits_memory(tokens.shape)
        tokens = tokens.to(self.device)
        add = self._check_add(add, (*tokens.shape, self.hw.d_model))
        k = self._repeats(clean, tokens)
        start = min(add) if add and clean is not None and self.layer_modules and self._returns else 0
        again = lambda x: x if k == 1 else x.repeat(k, 1, 1)  # noqa: E731  (k == 1: the clean tensors themselves)
        kept = [self._turned(again(self._as_model(clean.resid[i + 1], i + 1).to(self._returns[1])))
                for i in range(start)]
        seeing = self._seeing_returns() if not add and self.layer_modules and self._returns is None else nullcontext()
        seen: list[Tensor] = []  # the last layer's input, where it is not run
        skipping = self._skipping_last(seen) if not last and self.layer_modules and self._returns else nullcontext()
        with seeing, self._leaving_out(kept), skipping, evaluating(getattr(self, "model", None)):
            resid, out, *rest = self._run(tokens, add) if add else self._run(tokens)
        if seen:
            x = seen[0][:, :tokens.shape[1]]  # (a model that pads its sequences: cut back)
            resid[-1] = x if self.divisors is None else x / self.divisors[-1]
        post = rest[0] if rest else None  # post-LN: the norms' inputs per layer
        if not last:  # (run anyway where the layers are not modules of one list: a hybrid's attention layers)
            out[-1] = None
            if post is not None:
                post[-1] = None
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

    def _as_model(self, resid: Tensor, layer: int) -> Tensor:
        """compscope's residual before ``layer`` as the running model holds it (:attr:`divisors`)."""
        return resid if self.divisors is None else resid * self.divisors[layer]

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
            elif isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
                self._returns = (len(output), output[0].dtype, type(output))  # (GPT-1's blocks return lists)
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
        if self.pads:  # padded with zeros to the length the model runs (its padding's rows: masked keys)
            stubs = {i: (lambda *args, _o=o, **kwargs: self._as_returned(_padded(_o, args[0] if args else
                                                                                  kwargs["hidden_states"])))
                     for i, o in enumerate(outputs)}
        else:
            stubs = {i: (lambda *args, _v=self._as_returned(o), **kwargs: _v) for i, o in enumerate(outputs)}
        with self._replacing(stubs):
            yield

    @contextmanager
    def _skipping_last(self, seen: list[Tensor]):
        """The last layer not run: its module keeps its input (the residual) in ``seen`` and returns
        it, in the form the layer returns; what follows it reads nothing of it."""
        def keep(*args, **kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            seen.append(self._turned(x).detach())
            return self._as_returned(x)

        with self._replacing({len(self.layer_modules) - 1: keep}):
            yield

    def _turned(self, x: Tensor) -> Tensor:
        """``x`` turned between compscope's ``(batch, seq, d_model)`` and a sequence-first model's residual (the
        turn is its own inverse); as it is for any other model."""
        return x.transpose(0, 1) if self.sequence_first else x

    def _as_returned(self, x: Tensor):
        """``x`` in the form a layer module returns (:attr:`_returns`; a tuple's or list's other elements None)."""
        form = self._returns[0]
        return x if form == "tensor" else self._returns[2]([x, *([None] * (form - 1))])

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
                    f"{scale:.3g}): the model that runs is not the one that was read, so no data-based result would hold"
                    f"{self._mismatch_hint()}")

    def _mismatch_hint(self) -> str:
        """What :meth:`_check_agreement`'s refusal adds about the software that runs the model (none here)."""
        return ""

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        """``(resid, attn_out)`` per layer, and for post-LN models the norms' inputs per layer;
        ``add``: as :meth:`trace` (checked)."""
        raise NotImplementedError


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


def float32_norms(norms: list[tuple] | None) -> list[tuple] | None:
    """Post-LN norms as compscope applies them, to float32 residuals: the model's own modules, or
    float32 copies of them when the model computes in 16 bits (its parameters stay as they are)."""
    if norms is None or all(model_dtype(n) == torch.float32 for pair in norms for n in pair):
        return norms
    import copy

    return [tuple(copy.deepcopy(n).float() for n in pair) for pair in norms]


def _padded(x: Tensor, like: Tensor) -> Tensor:
    """``x (batch, seq, d)`` padded with zeros along the sequence to the length of ``like``."""
    return torch.nn.functional.pad(x, (0, 0, 0, like.shape[1] - x.shape[1]))


def model_device(model) -> torch.device:
    """Where a ``torch.nn.Module`` computes: the device of its first parameter (the CPU without any)."""
    p = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return torch.device("cpu") if p is None else p.device


def model_dtype(model) -> torch.dtype:
    """What a ``torch.nn.Module`` computes in: the dtype of its first floating-point parameter (float32 without)."""
    params = model.parameters() if hasattr(model, "parameters") else ()
    return next((p.dtype for p in params if p.is_floating_point()), torch.float32)
