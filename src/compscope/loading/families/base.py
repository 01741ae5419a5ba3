"""What a model family is, and how its config is checked.

A family maps a checkpoint's names onto heads. It declares the config keys it understands
(``handled``), the keys that cannot change the attention weights (``ignored``: MLP widths,
dropout, token ids, ...), and tests for settings it accepts only with certain values
(``accept``). Any other key that is switched on (not ``None``/``False``/``0``/empty) is
refused with its name: no silent misreading of an exotic config.
"""

from __future__ import annotations

import math

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..checkpoint import Checkpoint
from ...errors import LoadError, UnsupportedModelError
from ...core.heads import HeadWeights, Norm, Rotary, is_finite_number

#: Keys of every HF config that never change attention weights.
COMMON_IGNORED = frozenset(
    """
    _name_or_path architectures model_type transformers_version torch_dtype dtype
    id2label label2id _num_labels num_labels problem_type return_dict output_attentions output_hidden_states
    use_cache bos_token_id eos_token_id pad_token_id sep_token_id unk_token_id _model_name_or_path decoder_start_token_id
    initializer_range initializer_factor chunk_size_feed_forward is_encoder_decoder is_decoder tie_word_embeddings
    vocab_size max_position_embeddings n_positions n_ctx intermediate_size n_inner hidden_act
    hidden_activation activation_function mlp_bias attention_dropout hidden_dropout
    attn_pdrop resid_pdrop embd_pdrop hidden_dropout_prob attention_probs_dropout_prob
    classifier_dropout gradient_checkpointing tokenizer_class prefix task_specific_params
    finetuning_task torchscript pruned_heads use_return_dict quantization_config
    _attn_implementation_autoset _attn_implementation output_scores auto_map use_bfloat16 tf_legacy_loss
    """.split()  # auto_map: remote code that transformers runs only when trusted; compscope reads the native layout
) | frozenset(  # generation defaults (transformers 4 configs carry them all): how to sample, not what a forward computes
    """
    max_length min_length do_sample early_stopping num_beams num_beam_groups diversity_penalty temperature
    top_k top_p typical_p repetition_penalty length_penalty no_repeat_ngram_size encoder_no_repeat_ngram_size
    bad_words_ids num_return_sequences return_dict_in_generate forced_bos_token_id forced_eos_token_id
    remove_invalid_values exponential_decay_length_penalty suppress_tokens begin_suppress_tokens
    """.split()
)

#: the Mamba-2 mixers' settings under transformers' ``mamba_`` names (Bamba, Granite 4's hybrids, Falcon-H1; the
#: time-step ones, their initialisation, in the configs of transformers 5.1-5.14): the attention does not read them
MAMBA2_SETTINGS = frozenset(
    "mamba_n_heads mamba_d_head mamba_n_groups mamba_d_state mamba_d_conv mamba_expand mamba_chunk_size "
    "mamba_conv_bias mamba_proj_bias time_step_limit time_step_min time_step_max time_step_floor".split())

#: the query, key and value projections of ``HeadWeights`` (what :meth:`Family.projections_as_read` may change)
PROJECTIONS = ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V")


def is_off(value: Any) -> bool:
    """Whether a config value switches its setting off (None, false, 0 or empty): such a key needs no family."""
    return value is None or value is False or value == 0 or value == {} or value == [] or value == ""


class Family:
    """Base of every family; subclasses set the class attributes and ``convert``."""

    name: ClassVar[str]
    model_types: ClassVar[tuple[str, ...]]  # HF ``model_type`` values
    about: ClassVar[str] = ""  # the models it reads, as users know them, and what sets it apart (``compscope models``)
    #: what its models are inside a wrapper whose other parts are not read (a vision-language model's language
    #: model; a dual encoder's text encoder), as ``compscope models`` names it
    part: ClassVar[str] = "language model"
    architectures: ClassVar[tuple[str, ...]] = ()  # HF ``architectures`` values
    #: names that GGUF files alone are read as, in place of a ``model_type``: architectures llama.cpp runs with a
    #: graph that no HuggingFace model type names (Refact's: a Llama with ALiBi); no ``compscope models`` column
    gguf_types: ClassVar[tuple[str, ...]] = ()
    handled: ClassVar[frozenset[str]] = frozenset()
    ignored: ClassVar[frozenset[str]] = frozenset()
    accept: ClassVar[dict[str, Callable[[Any], bool]]] = {}

    #: how the model makers' files name tensors that a loaded model (and transformers, as it loads
    #: them) names otherwise: ``(pattern, replacement)`` regular expressions over a stored name, which
    #: is then read under the loaded model's name (where that is not stored itself), so ``convert``
    #: reads one set of names
    saved_names: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: attribute of a transformers head model (``...ForCausalLM``) that holds the base model
    hf_base: ClassVar[str] = "model"
    #: whether the running model holds a table of positions even with rotary positions (GPT-J's
    #: precomputed sines), so that it cannot run past its context as rotary models otherwise can
    position_table: ClassVar[bool] = False
    #: whether the model's attention module returns the residual plus what it adds (BLOOM's), so
    #: that what it adds is its output projection's output
    attention_returns_residual: ClassVar[bool] = False
    #: whether layers differ in head width or K/V head count (Gemma 4), which a TransformerLens
    #: bridge's stacked projections (``W_Q`` ...) cannot hold: a bridge is read through its
    #: HuggingFace tensors alone, and a processed one not at all
    per_layer_heads: ClassVar[bool] = False
    #: whether each layer is a module of one list (a block), which a data run can leave out or stop
    #: before; False where a model keeps its layers' parts in lists side by side (XLM's attentions, norms)
    layers_are_modules: ClassVar[bool] = True
    #: whether the running model pads each sequence at its end, with tokens its attention masks, before its layers
    #: (Longformer: to a multiple of its window): the data runner cuts what it hooks back to the sequence, and
    #: pads what it adds with zeros
    pads_sequences: ClassVar[bool] = False
    #: whether the running model keeps its residual channels-first, ``(batch, d_model, seq)`` (SqueezeBERT's
    #: convolutions): the data runner turns what it hooks, what it adds and what its norms take
    channels_first: ClassVar[bool] = False
    #: whether the model keeps its residual sequence-first, ``(seq, batch, d_model)`` (FSMT's encoder), so that the
    #: data runner turns what it hooks and what it adds
    sequence_first: ClassVar[bool] = False
    #: whether the data runner builds the class a folder's config names (``architectures``) rather than the one
    #: transformers' auto class maps its model type to (DPR: a context encoder, a question encoder and a reader
    #: of one model type, their tensors under different names)
    runs_as_named: ClassVar[bool] = False
    #: model_type -> the transformers class the data runner builds for it, where it runs only part of the model (T5's
    #: encoder alone: T5EncoderModel, from a whole T5's folder or GGUF file too); before :attr:`runs_as_named`
    runs_as: ClassVar[dict[str, str]] = {}
    #: whether transformers has a model of this family's types, so that the data-based commands run its folders (False:
    #: its files run through their own code, which compscope does not run: Nemotron-NAS's). Unless a family states it,
    #: whether it names a model type at all (one that reads GGUF files alone, ``gguf_types``, has no folder to run)
    runs_on_data: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "runs_on_data" not in cls.__dict__:
            cls.runs_on_data = bool(getattr(cls, "model_types", ()))

    @classmethod
    def run_inputs(cls, tokens: Tensor) -> dict[str, Tensor]:
        """What the running ``transformers`` model is given beside ``input_ids`` (``tokens`` ``(batch, seq)``), where
        it requires more (BROS's boxes); nothing elsewhere."""
        return {}

    @classmethod
    def prepare(cls, model) -> None:
        """Set the running ``transformers`` model to compute what compscope reads, before the data runner hooks it
        (BigBird's full attention, which transformers would switch to itself, replacing the modules, on a short
        sequence); nothing elsewhere."""

    @classmethod
    def hook_points(cls, model) -> list[tuple[Any, Any]]:
        """Where a running ``transformers`` model of this family keeps what the data-based measures
        read, per layer: ``(module whose input is the residual the layer's attention reads — before
        the norm in pre-LN models —, module whose output is what the attention adds to the
        residual)``. ``model``: the head model or its base model."""
        raise UnsupportedModelError(f"family {cls.name}: compscope cannot run this family's models yet")

    @classmethod
    def post_norm_points(cls, model) -> list[tuple[Any, Any]] | None:
        """Post-LN families: per layer the two norms the residual passes through, ``(norm of
        residual + attention, norm of that + MLP)``, each called on the sum (its input is the
        sum); None for pre-LN and norm-free families."""
        return None

    @classmethod
    def base_model(cls, model):
        """The base model inside a head model (``model.model`` of a ``LlamaForCausalLM``), or ``model``;
        in a vision-language model, its language model's (``model.model.language_model``; Idefics3's
        ``model.model.text_model``; Qwen3-Omni's ``model.thinker.model.language_model``), or the base model
        of its language head model (Llama 4's ``model.language_model.model``); in Grounding DINO, its text
        encoder (``text_backbone``, in the detector ``model.model.text_backbone``)."""
        model = getattr(model, "thinker", model)  # (Qwen-Omni: the thinker holds the language model)
        model = getattr(model, "vlm", model)  # (ColQwen2: the retriever holds a vision-language model)
        base = getattr(model, cls.hf_base, model)
        inner = next((m for m in (getattr(base, k, None) for k in ("language_model", "text_model", "text_backbone"))
                      if m is not None), None)
        if inner is None:  # a detector's text encoder (Grounding DINO's model.text_backbone), or none
            inner = getattr(getattr(base, "model", None), "text_backbone", None)
        if inner is None:
            return base
        return getattr(inner, cls.hf_base, inner)

    @classmethod
    def added_by(cls, output) -> Tensor:
        """What the residual receives from the output of the module :meth:`hook_points` names as adding to
        it (its first element where it returns a tuple; GPT-NeoX-Japanese adds the bias returned beside it)."""
        return output[0] if isinstance(output, (tuple, list)) else output

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        """The factor by which the model multiplies what its attention returns as it adds it to the
        residual (Granite's ``residual_multiplier``; 1 elsewhere). ``convert`` folds it into
        ``W_O``, and the data runner scales what it hooks by it."""
        return 1.0

    @classmethod
    def residual_divisors(cls, model) -> list[float] | None:
        """Per attending layer ``l`` of the running ``model``, ``P_l``: its residual before layer ``l`` is
        ``P_l`` times the one compscope reads (Gemma 4 multiplies the whole residual by a learned scalar
        after each layer: ``P_l`` is the product of those before ``l``, and ``convert`` divides what layer
        ``l`` adds by it). None (the same residual) elsewhere."""
        return None

    @classmethod
    def runs_windows(cls, config) -> bool:
        """Whether the running model (``config``: the config object transformers built it from)
        applies the sliding windows compscope reads; where it does not, the data runner takes
        sequences only up to the narrowest window, on which the two agree. Here: unless the config
        has a ``sliding_window`` that is None (transformers' GGUF reader drops Phi-3's)."""
        return not (hasattr(config, "sliding_window") and config.sliding_window is None)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """The longest sequence on which the model computes what compscope reads, where that is shorter
        than any the model takes (LongRoPE's frequencies and Llama 4's query temperature change past the
        original context); None where none is. The data runner runs no longer sequence."""
        return None

    @classmethod
    def projections_as_read(cls, config: dict, where: str, parts: dict[str, Tensor | None]
                            ) -> dict[str, Tensor | None]:
        """The query, key and value projections as ``HeadWeights`` holds them (``parts``: some of ``W_Q``,
        ``W_K``, ``W_V``, ``b_Q``, ``b_K``, ``b_V``) from those the model's modules hold: what ``convert``
        does to them after reading (Falcon-H1's multipliers, nanochat's reversed rotary), the same
        elsewhere. A reader that takes them from elsewhere (a TransformerLens bridge's own) applies it too."""
        return parts

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        """Refuse, by name, every config setting this family does not understand."""
        bad = []
        for key, value in config.items():
            if key in cls.accept:
                if not cls.accept[key](value):
                    bad.append(f"{key}={value!r}")
            elif key in cls.handled or key in cls.ignored or key in COMMON_IGNORED:
                continue
            elif not is_off(value):
                bad.append(f"{key}={value!r}")
        if bad:
            raise UnsupportedModelError(
                f"{where}: the {cls.name} family does not support these config settings: {', '.join(bad)}"
            )

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        """Whether the attention that transformers builds from ``config`` has biases: ``(on q, k
        and v, on the output projection)``. A file's bias where this says none is a tensor
        transformers ignores (see :func:`compscope.loading.families.to_heads`)."""
        return True, True

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        raise NotImplementedError


def transformers_at_least(*version: int) -> bool:
    """Whether the installed ``transformers`` is ``version`` (``major[, minor]``) or later (a
    pre-release of it counts as it)."""
    import transformers
    from packaging.version import Version  # a dependency of transformers

    return Version(transformers.__version__).release[:len(version)] >= version


def layer_hooks(reads: str, adds: str, attending: str | None = None) -> classmethod:
    """``Family.hook_points`` for models whose layers sit in ``base_model(model).layers``: per layer,
    its module named ``reads`` (whose input is the residual the attention reads: the norm before it,
    or the attention itself where none is) and the one named ``adds`` (whose output is what the
    attention adds to the residual: the attention, or a norm on its output). ``attending``: in a
    hybrid, the attention's module name, which only the layers that attend have (the others are
    passed over)."""
    def hook_points(cls, model) -> list[tuple[Any, Any]]:
        return [(getattr(b, reads), getattr(b, adds)) for b in cls.base_model(model).layers
                if attending is None or getattr(b, attending, None) is not None]
    hook_points.__doc__ = f"``{reads}`` reads the residual; ``{adds}`` returns what the attention adds."
    return classmethod(hook_points)


def config_attention_bias(key: str, default: bool) -> Callable[[type[Family], dict], tuple[bool, bool]]:
    """``Family.attention_biases`` for architectures where one config switch (``key``,
    transformers' ``default`` when absent) puts biases on all four projections."""
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        on = config.get(key, default)
        on = default if on is None else bool(on)
        return on, on
    return classmethod(attention_biases)  # type: ignore[return-value]


#: Largest sizes a config may declare (past the largest published models, far below what
#: would make a shape computation allocate memory blindly).
MAX_WIDTH, MAX_HEADS, MAX_LAYERS = 1 << 17, 1 << 12, 1 << 12
_MISSING = object()


def need(config: dict, key: str, where: str, *alternatives: str) -> Any:
    """``config[key]`` (or the first alternative present), or an error naming the key."""
    for k in (key, *alternatives):
        if k in config and config[k] is not None:
            return config[k]
    raise UnsupportedModelError(f"{where}: config key '{key}' is missing")


def _found(config: dict, keys: tuple[str, ...]) -> tuple[str, Any]:
    return next(((k, config[k]) for k in keys if k in config and config[k] is not None), (keys[0], _MISSING))


def integer(config: dict, where: str, *keys: str, default: Any = _MISSING, low: int = 1, high: int = MAX_WIDTH) -> int:
    """The first present of ``keys`` as an int in ``[low, high]`` (``default`` when none is
    present), or a ``LoadError`` naming the key and its value: wrong types (strings, lists,
    floats with a fraction, booleans), NaN, negative and huge sizes are refused here, before
    any shape is computed from them."""
    key, v = _found(config, keys)
    if v is _MISSING:
        if default is _MISSING:
            raise UnsupportedModelError(f"{where}: config key '{key}' is missing")
        return default
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise LoadError(f"{where}: config key '{key}' = {v!r} is not an integer in [{low}, {high}]")
    return v


def number(config: dict, where: str, *keys: str, default: Any = _MISSING, low: float = 0.0, high: float = 1e300,
           open_low: bool = False) -> float:
    """The first present of ``keys`` as a finite float in ``[low, high]`` (``(low, high]`` with
    ``open_low``), ``default`` when none is present; else a ``LoadError`` naming the key."""
    key, v = _found(config, keys)
    if v is _MISSING:
        if default is _MISSING:
            raise UnsupportedModelError(f"{where}: config key '{key}' is missing")
        return float(default)
    ok = is_finite_number(v) and v <= high
    ok = ok and (v > low if open_low else v >= low)
    if not ok:
        rng = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise LoadError(f"{where}: config key '{key}' = {v!r} is not a finite number in {rng}")
    return float(v)


def sizes(config: dict, where: str, *, width: tuple[str, ...] = ("hidden_size",),
          heads: tuple[str, ...] = ("num_attention_heads",), layers: tuple[str, ...] = ("num_hidden_layers",)
          ) -> tuple[int, int, int, int]:
    """``(d_model, n_heads, n_layers, d_head = d_model / n_heads)`` from the first present key
    of each group, checked (:func:`integer`; the head count must divide the width), or an error
    naming the key."""
    d = integer(config, where, *width)
    H = integer(config, where, *heads, high=MAX_HEADS)
    L = integer(config, where, *layers, high=MAX_LAYERS)
    if d % H:
        raise LoadError(f"{where}: config key '{heads[0]}' = {H} does not divide '{width[0]}' = {d}")
    return d, H, L, d // H


#: the endings of transformers' class names for models whose head is the unembedding
LM_HEADS = ("ForCausalLM", "LMHeadModel", "ForMaskedLM", "ForPreTraining", "ForConditionalGeneration", "WithLMHead")


def unembedding(ckpt: Checkpoint, candidates: list[str], emb: Tensor) -> tuple[Tensor | None, str | None]:
    """The unembedding ``(n_vocab, d_model)`` and a note: the first tensor of ``candidates``
    present; else the embedding itself when the config ties them (``tie_word_embeddings``,
    HF's default when the key is absent; said when the config's architecture has another head, a
    classifier or none); else ``None`` (a base model without a head)."""
    head = ckpt.first_present(candidates)
    if head:
        ckpt.tensors.leave(head.removesuffix("weight") + "bias")  # a per-token logit offset: no score reads it
        return ckpt.tensors.take(head, tuple(emb.shape)), None
    if ckpt.config.get("tie_word_embeddings", True):
        other = [a for a in ckpt.config.get("architectures") or [] if isinstance(a, str) and not a.endswith(LM_HEADS)]
        return emb, (f"W_U is the embedding W_E (tie_word_embeddings): the checkpoint's model, {other[0]}, has no "
                     "unembedding of its own, so W_U-based scores describe the language model it was built from"
                     if other else None)
    return None, f"no unembedding: none of {candidates} is present and tie_word_embeddings is false"


def prefix_of(ts, name: str, prefixes: tuple[str, ...], default: str | None = None) -> str | None:
    """The first of ``prefixes`` under which ``name`` is a tensor of ``ts``, then the first with one more
    ``model.`` after it: transformers 5.4 and 5.5 save a wrapper's language model one level deeper than its
    makers do (LLaVA's as ``model.language_model.model.``, Emu3's as ``model.text_model.model.``). ``default``
    if none is."""
    return next((p for p in (*prefixes, *(p + "model." for p in prefixes)) if p + name in ts), default)


def checkpoint_notes(ckpt: Checkpoint, *more: str | None) -> list[str]:
    """The checkpoint's own notes (what reading it found), then each of ``more`` that is not None
    (the unembedding's note, a family's)."""
    return list(ckpt.notes) + [n for n in more if n]


def attending(layers: list[int], n_layers: int, where: str, others: str, unit: str = "layer",
              detail: str = "") -> list[int]:
    """``layers``, a hybrid's layers that attend, or a refusal by name where it has none: ``{where}:
    no attention {unit} among {n_layers}{detail}: every {unit} is {others}``."""
    if not layers:
        raise UnsupportedModelError(f"{where}: no attention {unit} among {n_layers}{detail}: every {unit} is {others}")
    return layers


def tensor2tensor_sinusoids(rows: int, d: int) -> Tensor:
    """``(d, rows)``: the tensor2tensor table of sinusoids as transformers computes it (float32) for XGLM and M2M100:
    row ``k`` is ``[sin(k f_i) | cos(k f_i)]``, ``f_i = exp(−i log(10000) / (d/2 − 1))``."""
    half = d // 2
    f = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
    angle = torch.arange(rows, dtype=torch.int64).float()[:, None] * f[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).T.contiguous()


def sinusoids_after_pad(config: dict, where: str, d: int, width: str, whose: str,
                        default_n: int) -> tuple[Tensor, str]:
    """``(W_pos (d, n), note)``: fairseq's positions as transformers computes them for M2M100, FSMT and Kosmos-2.5 (the
    files hold none): :func:`tensor2tensor_sinusoids`, position ``p`` at the table's row ``p + pad_token_id + 1`` (a
    pad token takes row ``pad_token_id``), ``max_position_embeddings`` of them. ``width``: the config key of ``d``, and
    ``whose``: the model, as the error for an odd or too narrow ``d`` names them."""
    if d % 2 or d < 4:
        raise UnsupportedModelError(f"{where}: {width} {d} is odd or below 4: no sinusoidal table as {whose}'s")
    pad = integer(config, where, "pad_token_id", default=1, low=0, high=MAX_WIDTH)
    n = integer(config, where, "max_position_embeddings", default=default_n, high=MAX_WIDTH)
    start = pad + 1
    return tensor2tensor_sinusoids(start + n, d)[:, start:].contiguous(), (
        f"sinusoidal positions computed as the model computes them, position p at the table's row p + {start} "
        f"(pad_token_id + 1), {n} of them")


def zero_padded(heads: Tensor, r: int) -> Tensor:
    """``heads: (n, w, ...)``, each head held ``r`` wide: its ``w`` rows first, zero rows after them (a value
    narrower than a query head: no product changes); itself where ``w == r``."""
    n, w = heads.shape[:2]
    return heads if w == r else torch.cat([heads, heads.new_zeros(n, r - w, *heads.shape[2:])], 1)


def split_rows(w: Tensor, n_heads: int, d_head: int) -> Tensor:
    """``(n_heads*d_head, d) -> (n_heads, d_head, d)``: a projection's output rows, per head."""
    return w.reshape(n_heads, d_head, w.shape[-1])


def split_cols(w: Tensor, n_heads: int, d_head: int) -> Tensor:
    """``(d, n_heads*d_head) -> (n_heads, d, d_head)``: an output projection's columns, per head."""
    return w.reshape(w.shape[0], n_heads, d_head).permute(1, 0, 2)


def kv_groups(config: dict, where: str, n_heads: int) -> tuple[int, tuple[int, ...]]:
    """``(n_kv_heads, kv_map)`` from ``num_key_value_heads`` (default: one K/V head per query head):
    query head ``h`` reads K/V head ``h // (n_heads / n_kv_heads)``, as HF's ``repeat_kv`` repeats them."""
    G = integer(config, where, "num_key_value_heads", default=n_heads, high=MAX_HEADS)
    if n_heads % G:
        raise UnsupportedModelError(f"{where}: num_attention_heads={n_heads} is not a multiple of num_key_value_heads={G}")
    return G, tuple(h // (n_heads // G) for h in range(n_heads))


def head_rows(ts, name: str, n_heads: int, d_head: int, d_model: int, bias: bool | None = None
              ) -> tuple[Tensor, Tensor | None]:
    """The projection ``{name}.weight`` ``(n_heads·d_head, d_model)`` per head ``(n_heads, d_head,
    d_model)``, and its bias ``{name}.bias`` per head: required (``bias=True``), read where present
    (``None``: files may carry one, e.g. after TransformerLens's processing) or not read (``False``)."""
    w = split_rows(ts.take(f"{name}.weight", (n_heads * d_head, d_model)), n_heads, d_head)
    b = None if bias is False else ts.take(f"{name}.bias", (n_heads * d_head,), required=bool(bias))
    return w, None if b is None else b.reshape(n_heads, d_head)


def separate_projections(ts, layer_prefix: Callable[[int], str], n_layers: int, n_heads: int, n_kv_heads: int,
                         d_head: int, d_model: int, *, out: str = "out_proj", qkv_bias: bool | None = None,
                         out_bias: bool | None = None) -> dict[str, Tensor | None]:
    """Attention with one projection each for Q, K and V (``{prefix}q_proj`` ...) and an output
    ``{prefix}{out}``, in every layer: ``W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O`` stacked over
    layers, as :class:`HeadWeights` takes them. Biases follow :func:`head_rows`' rule (``True``
    required, ``None`` read where present, ``False`` not read); one absent from every layer is None."""
    w: dict[str, list] = {x: [] for x in "QKVO"}
    b: dict[str, list] = {x: [] for x in "QKVO"}
    for i in range(n_layers):
        p = layer_prefix(i)
        for x, n in (("Q", n_heads), ("K", n_kv_heads), ("V", n_kv_heads)):
            wx, bx = head_rows(ts, f"{p}{x.lower()}_proj", n, d_head, d_model, bias=qkv_bias)
            w[x].append(wx)
            b[x].append(bx)
        w["O"].append(split_cols(ts.take(f"{p}{out}.weight", (d_model, n_heads * d_head)), n_heads, d_head))
        b["O"].append(None if out_bias is False else ts.take(f"{p}{out}.bias", (d_model,), required=bool(out_bias)))
    return {**{f"W_{x}": torch.stack(w[x]) for x in "QKVO"}, **{f"b_{x}": stack(b[x]) for x in "QKVO"}}


def token_embedding(ts, name: str, d_model: int) -> Tensor:
    """The token embedding ``(n_vocab, d_model)`` stored as ``name``, its shape checked."""
    emb = ts.take(name)
    if emb.ndim != 2 or emb.shape[1] != d_model:
        raise UnsupportedModelError(f"{ts.origin(name)}: {name} has shape {tuple(emb.shape)}, expected (n_vocab, {d_model})")
    return emb


def final_layernorm(ts, name: str, d_model: int, eps: float) -> Norm | None:
    """The LayerNorm before the unembedding, ``{name}.weight`` and ``{name}.bias`` (either may be
    absent), as a one-row ``Norm``; None without a weight."""
    w, b = (ts.take(f"{name}.{x}", (d_model,), required=False) for x in ("weight", "bias"))
    return None if w is None else Norm("layernorm", w[None], None if b is None else b[None], eps)


def stack(layers: list[Tensor | None]) -> Tensor | None:
    """Stack per-layer tensors; ``None`` if every layer lacks it."""
    if all(t is None for t in layers):
        return None
    if any(t is None for t in layers):
        missing = [i for i, t in enumerate(layers) if t is None]
        raise UnsupportedModelError(f"a bias is present in some layers but missing in layers {missing}")
    return torch.stack(layers)  # type: ignore[arg-type]


def rope_settings(config: dict, layer_type: str | None = None) -> dict:
    """Rope parameters from either config style: ``rope_parameters`` (transformers ≥ 5,
    possibly one dict per layer type) or ``rope_theta`` + ``rope_scaling`` (older files)."""
    params = config.get("rope_parameters")
    if isinstance(params, dict) and layer_type is not None and layer_type in params:
        params = params[layer_type]
    out: dict = dict(params) if isinstance(params, dict) else {}
    if "rope_theta" not in out and config.get("rope_theta") is not None:
        out["rope_theta"] = config["rope_theta"]
    scaling = config.get("rope_scaling")
    if isinstance(scaling, dict):
        out.setdefault("rope_type", scaling.get("rope_type", scaling.get("type")))
        out.update({k: v for k, v in scaling.items() if k not in ("type",)})
    if config.get("partial_rotary_factor") is not None:
        out.setdefault("partial_rotary_factor", config["partial_rotary_factor"])
    if out.get("rope_type") in ("yarn", "longrope"):  # the original context: the config's own key first (Phi-3's),
        if config.get("original_max_position_embeddings") is not None:  # then the rope settings', then the context
            out["original_max_position_embeddings"] = config["original_max_position_embeddings"]
        elif config.get("max_position_embeddings") is not None:
            out.setdefault("original_max_position_embeddings", config["max_position_embeddings"])
        if config.get("max_position_embeddings") is not None:
            out["max_position_embeddings"] = config["max_position_embeddings"]
    return out


#: the rope types :func:`inv_freq` computes that change the frequencies alone
ROPE_TYPES = ("default", "linear", "llama3")
#: and YaRN and LongRoPE, which also scale rotated queries and keys (:func:`rope_attention_factor`):
#: read only where the converter folds that scale into the logits
YARN_TYPES = ROPE_TYPES + ("yarn", "longrope")


def _mscale(scale: float, m: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 m ln(scale) + 1`` (1 for ``scale <= 1``)."""
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def rope_attention_factor(settings: dict, where: str) -> float:
    """The factor by which a rope type scales rotated queries and keys (transformers multiplies its
    cos and sin by it), ``attention_factor`` where given; else 1 but for ``yarn``,
    ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` where both are given, else
    ``mscale(factor) = 0.1 ln(factor) + 1`` (``1`` for ``factor <= 1``), and ``longrope``,
    ``sqrt(1 + ln(factor) / ln(n))`` (``1`` for ``factor <= 1``), ``n`` the original context and
    ``factor`` the context over it unless given."""
    kind = settings.get("rope_type") or "default"
    if kind not in ("yarn", "longrope"):
        return 1.0
    if settings.get("attention_factor") is not None:
        return number(settings, where, "attention_factor", open_low=True)
    if kind == "longrope":
        factor = _longrope_factor(settings, where)
        n = number(settings, where, "original_max_position_embeddings", low=1.0, open_low=True)
        return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(n))
    factor = number(settings, where, "factor", low=0.0, open_low=True)
    m, m_all = settings.get("mscale"), settings.get("mscale_all_dim")
    if m and m_all:
        return (_mscale(factor, number(settings, where, "mscale"))
                / _mscale(factor, number(settings, where, "mscale_all_dim")))
    return _mscale(factor)


def _longrope_factor(settings: dict, where: str) -> float:
    """LongRoPE's context factor: as given, else the context over the original one. (transformers 4
    takes the ratio whenever the config names the original context, 5 the factor given: a factor
    that disagrees with the ratio is refused.)"""
    n = number(settings, where, "original_max_position_embeddings", low=0.0, open_low=True)
    ratio = (number(settings, where, "max_position_embeddings", low=0.0, open_low=True) / n
             if settings.get("max_position_embeddings") is not None else None)
    if settings.get("factor") is None:
        if ratio is None:
            raise UnsupportedModelError(f"{where}: longrope without a factor or a context length to take it from")
        return ratio
    factor = number(settings, where, "factor", low=0.0, open_low=True)
    if ratio is not None and abs(factor - ratio) > 1e-9 * ratio:
        raise UnsupportedModelError(f"{where}: longrope factor {factor:g} and context ratio {ratio:g} "
                                    "(max_position_embeddings / original_max_position_embeddings) disagree, and "
                                    "transformers 4 and 5 take different ones")
    return factor


def _longrope(f: Tensor, dim: int, settings: dict, where: str) -> Tensor:
    """LongRoPE's frequencies for sequences up to the original context: each divided by its
    ``short_factor`` (transformers switches to ``long_factor`` beyond that context)."""
    short = settings.get("short_factor")
    if not isinstance(short, (list, tuple)) or len(short) != dim // 2 or not all(
            is_finite_number(x) and x > 0 for x in short):
        raise LoadError(f"{where}: rope setting 'short_factor' = {short!r} is not {dim // 2} positive numbers "
                        "(one per rotated pair)")
    return f / torch.tensor([float(x) for x in short], dtype=torch.float64)


def _yarn(f: Tensor, dim: int, theta: float, settings: dict, where: str) -> Tensor:
    """YaRN's frequencies: with ``n`` the original context and ``c(b) = dim ln(n / (2π b)) / (2 ln θ)``
    the index of the pair that turns ``b`` times over it, the pairs below ``c(beta_fast)`` (default
    32) keep ``f``, those above ``c(beta_slow)`` (default 1) take ``f / factor``, and a linear ramp
    over the pair index joins them (the bounds rounded outwards unless ``truncate`` is false)."""
    factor = number(settings, where, "factor", low=0.0, open_low=True)
    n = number(settings, where, "original_max_position_embeddings", low=0.0, open_low=True)
    fast = number(settings, where, "beta_fast", default=32.0, open_low=True) if settings.get("beta_fast") else 32.0
    slow = number(settings, where, "beta_slow", default=1.0, open_low=True) if settings.get("beta_slow") else 1.0
    pair = lambda turns: dim * math.log(n / (turns * 2 * math.pi)) / (2 * math.log(theta))  # noqa: E731
    low, high = pair(fast), pair(slow)
    if settings.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return f / factor * ramp + f * (1 - ramp)


def inv_freq(dim: int, settings: dict, where: str, default_theta: float = 10000.0,
             kinds: tuple[str, ...] = ROPE_TYPES) -> Tensor:
    """``1 / theta^(2i/dim)``, float64, with the rope type's scaling (one of ``kinds``: ``ROPE_TYPES``,
    or ``YARN_TYPES`` where the caller folds YaRN's :func:`rope_attention_factor`, with ``proportional``
    where the caller takes it); other rope types are refused by name. The base must be a finite
    number above 1 and ``dim`` a positive even number.

    - ``linear``: every frequency divided by ``factor``.
    - ``llama3`` (Llama 3.1 on): with wavelengths ``λ = 2π / f`` and ``n`` the original context,
      frequencies with ``λ < n / high_freq_factor`` are kept, those with ``λ > n / low_freq_factor``
      divided by ``factor``, and those between interpolated, ``(1 − s) f / factor + s f`` with
      ``s = (n / λ − low_freq_factor) / (high_freq_factor − low_freq_factor)``.
    - ``yarn``: :func:`_yarn`; ``longrope``: :func:`_longrope` (sequences up to the original context).
    - ``proportional`` (LFM3's global layers; Gemma 4's, read in its family): over the whole head, the
      first ``⌊partial_rotary_factor · dim / 2⌋`` pairs at these frequencies, the rest 0 (unturned),
      all divided by ``factor``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 2:
        raise LoadError(f"{where}: the rotary dimension {dim!r} is not a positive even number (head width × partial_rotary_factor)")
    theta = number(settings, where, "rope_theta", default=default_theta, low=1.0, open_low=True)
    f = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    kind = settings.get("rope_type") or "default"
    if kind == "linear":
        f = f / number(settings, where, "factor", low=0.0, open_low=True)
    elif kind == "llama3":
        factor = number(settings, where, "factor", low=0.0, open_low=True)
        low = number(settings, where, "low_freq_factor", low=0.0, open_low=True)
        high = number(settings, where, "high_freq_factor", low=0.0, open_low=True)
        n = number(settings, where, "original_max_position_embeddings", low=0.0, open_low=True)
        if high <= low:
            raise LoadError(f"{where}: rope llama3 high_freq_factor {high:g} must exceed low_freq_factor {low:g}")
        wavelength = 2 * math.pi / f
        s = (n / wavelength - low) / (high - low)
        f = torch.where(wavelength < n / high, f, torch.where(wavelength > n / low, f / factor, (1 - s) * f / factor + s * f))
    elif kind == "yarn" and kind in kinds:
        f = _yarn(f, dim, theta, settings, where)
    elif kind == "longrope" and kind in kinds:
        f = _longrope(f, dim, settings, where)
    elif kind == "proportional" and kind in kinds:  # (``dim``: the whole head, :func:`rotary_dim`)
        share = number(settings, where, "partial_rotary_factor", default=1.0, high=1.0, open_low=True)
        f[int(share * dim // 2):] = 0.0
        f = f / number(settings, where, "factor", default=1.0, open_low=True)
    elif kind != "default" or kind not in kinds:
        raise UnsupportedModelError(f"{where}: rope type {kind!r} is not supported (supported: {', '.join(kinds)})")
    return f


def rotary_dim(d_head: int, settings: dict, where: str, *fallback: str) -> int:
    """Rotated dims per head: ``int(d_head × partial_rotary_factor)`` as transformers computes
    it (the factor a number in ``(0, 1]``, also read from ``fallback`` keys of ``settings``),
    which must come out a positive even number."""
    pct = number(settings, where, "partial_rotary_factor", *fallback, default=1.0, high=1.0, open_low=True)
    # (proportional rope turns pairs across the whole head, its factor the share that turns: :func:`inv_freq`)
    dim = d_head if settings.get("rope_type") == "proportional" else int(d_head * pct)
    if dim <= 0 or dim % 2:
        raise LoadError(f"{where}: partial_rotary_factor {pct:g} of a head of {d_head} dims gives {dim} rotary dims, "
                        "not a positive even number")
    return dim


def layer_rotary(d_head: int, settings: dict, where: str, n_layers: int, style: str = "half") -> Rotary:
    """The same rotary in every layer: :func:`rotary_dim` dims of each head at :func:`inv_freq`'s
    frequencies, from one layer's rope ``settings``."""
    dim = rotary_dim(d_head, settings, where)
    return Rotary(dim, inv_freq(dim, settings, where)[None].expand(n_layers, -1).contiguous(), style)


def rope_accept_of(kinds: tuple[str, ...]) -> Callable[[Any], bool]:
    """An ``accept`` test of rope settings whose types are all in ``kinds`` (checked in detail by ``inv_freq``)."""
    def accept(value: Any) -> bool:
        if value is None:
            return True
        if not isinstance(value, dict):
            return False
        subs = [v for v in value.values() if isinstance(v, dict)] or [value]
        return all((s.get("rope_type") or s.get("type") or "default") in kinds for s in subs)
    return accept


#: rope settings of a type in ``ROPE_TYPES``; ``rope_accept_yarn``: or YaRN (the Llama-like converter)
rope_accept = rope_accept_of(ROPE_TYPES)
rope_accept_yarn = rope_accept_of(YARN_TYPES)
