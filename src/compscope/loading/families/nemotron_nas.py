"""Nemotron-NAS (NVIDIA's DeciLM ``nemotron-nas``: Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B,
Llama-3.1-Nemotron-Ultra-253B): Llama 3.1 layers pruned by architecture search, each layer's attention set by its
entry in ``block_configs``.

A layer's ``attention`` is Llama's with ``num_attention_heads / n_heads_in_group`` K/V heads (a count of its own), or
``replace_with_linear`` (a linear map of the normed residual in its place), or ``no_op`` (none, and no norm before
it). compscope reads the layers that attend, in order (its layer ``k`` is the model's k-th such layer; the notes say
which); the others write to the residual as MLPs do. Each layer's K/V heads are held at the least common multiple
of the counts, every head repeated for the query heads that read it
(:func:`~compscope.loading.families.llama.layer_kv_groups`), so every per-head product is the model's. The MLPs'
settings (``ffn``) are not read. transformers has no model of this type (its files run through their own code,
which compscope does not run): the weights are read, the data-based commands are not available. GGUF files of
these models (llama.cpp's ``deci``) are read too, their per-layer head counts as ``block_configs``.

DeciLM-7B (Deci's ``deci``, the same code's first model) is Llama's layers, every one attending, each with its own K/V
head count (``num_key_value_heads_per_layer``), and dynamic NTK rope scaling, which turns by the stated frequencies on
sequences up to ``max_position_embeddings`` tokens and raises the base past them: read within that context (noted).
"""

from __future__ import annotations

import dataclasses

from ...errors import LoadError, UnsupportedModelError
from . import register
from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from .base import MAX_HEADS, attending, integer, is_off, number, rope_accept_yarn
from .llama import Llama, LlamaLike, convert_llamalike

#: the keys of a layer's ``attention`` entry that say how it attends (the others, where not off, are refused)
_READ = ("no_op", "replace_with_linear", "n_heads_in_group")
#: its keys whose setting would change the attention read: refused unless off (a window, sink tokens, sparsity)
_OFF = ("window_length", "num_sink_tokens", "sparsify", "use_prefill_window_in_sink_attention", "unshifted_sink")


def attention_entries(config: dict, n_layers: int, where: str) -> list[dict]:
    """The ``attention`` entry of each layer's ``block_configs``, checked: one per layer, a dict, its settings known
    (:data:`_READ`) or off (:data:`_OFF`, and any other key)."""
    blocks = config.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != n_layers:
        raise LoadError(f"{where}: config key 'block_configs' must list one block per layer ({n_layers}), got "
                        f"{'no list' if not isinstance(blocks, list) else f'{len(blocks)} entries'}")
    entries = []
    for i, block in enumerate(blocks):
        entry = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(entry, dict):
            raise LoadError(f"{where}: config key 'block_configs' entry {i} has no 'attention' settings (a dict)")
        bad = [f"{k}={v!r}" for k, v in entry.items() if k not in _READ and not is_off(v)]
        if bad:
            raise UnsupportedModelError(f"{where}: config key 'block_configs' entry {i}: attention settings "
                                        f"{', '.join(bad)} are not supported (compscope reads full causal attention)")
        entries.append(entry)
    return entries


def _attends(entry: dict) -> bool:
    """Whether a layer's ``attention`` entry is an attention (neither ``no_op`` nor ``replace_with_linear``)."""
    return not entry.get("no_op") and not entry.get("replace_with_linear")


@register
class NemotronNas(LlamaLike):
    name = "nemotron_nas"
    about = ("Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B, Nemotron Ultra 253B (DeciLM): Llama 3.1 layers "
             "with K/V head counts of their own, some without attention or with a linear map in its place")
    model_types = ("nemotron-nas",)
    architectures = ("DeciLMForCausalLM",)
    handled = Llama.handled | {"block_configs"}
    ignored = Llama.ignored | {"mlp_bias", "intermediate_size"}  # (the MLPs' sizes are in block_configs' ffn)
    per_layer_heads = True
    runs_on_data = False  # (its files' own code runs it, which compscope does not run)
    other_layers = "layers without attention, or with a linear map in its place"

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The layers whose ``block_configs`` attention is neither ``no_op`` nor ``replace_with_linear``."""
        layers = [i for i, e in enumerate(attention_entries(config, n_layers, where)) if _attends(e)]
        return attending(layers, n_layers, where, "without attention or a linear map in its place")

    @classmethod
    def kv_heads_per_layer(cls, config: dict, n_layers: int, n_heads: int, where: str = "config") -> list[int]:
        """``n_heads / n_heads_in_group`` on each attending layer (0 on the others), which must divide."""
        counts = []
        for i, entry in enumerate(attention_entries(config, n_layers, where)):
            if not _attends(entry):
                counts.append(0)
                continue
            group = entry.get("n_heads_in_group")
            if (not isinstance(group, int) or isinstance(group, bool) or not 1 <= group <= MAX_HEADS
                    or n_heads % group):
                raise LoadError(f"{where}: config key 'block_configs' entry {i}: attention 'n_heads_in_group' = "
                                f"{group!r} does not divide num_attention_heads = {n_heads} into K/V groups")
            counts.append(n_heads // group)
        return counts

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Full attention on every layer that attends (a set window is refused with the layer's settings)."""
        return ["full_attention"] * n_layers


def _dynamic(settings) -> bool:
    """Whether rope settings are dynamic NTK scaling (``{"type": "dynamic", "factor": f}``)."""
    return isinstance(settings, dict) and (settings.get("rope_type") or settings.get("type")) == "dynamic"


@register
class DeciLM(LlamaLike):
    name = "decilm"
    about = "DeciLM-7B (Deci): Llama's layers with K/V head counts of their own, dynamic NTK rope scaling"
    model_types = ("deci",)
    architectures = ("DeciLMForCausalLM",)
    handled = Llama.handled | {"num_key_value_heads_per_layer"}
    ignored = Llama.ignored | {"mlp_bias"}
    accept = {**LlamaLike.accept, "rope_scaling": lambda v: rope_accept_yarn(v) or _dynamic(v)}
    per_layer_heads = True
    runs_on_data = False  # (its files' own code runs it, which compscope does not run)

    @classmethod
    def kv_heads_per_layer(cls, config: dict, n_layers: int, n_heads: int, where: str = "config") -> list[int]:
        """``num_key_value_heads_per_layer``: one count per layer, each dividing ``n_heads``."""
        counts = config.get("num_key_value_heads_per_layer")
        if (not isinstance(counts, list) or len(counts) != n_layers
                or not all(isinstance(c, int) and not isinstance(c, bool) and 0 < c <= n_heads and n_heads % c == 0
                           for c in counts)):
            raise LoadError(f"{where}: config key 'num_key_value_heads_per_layer' = {counts!r} is not one K/V head "
                            f"count per layer ({n_layers}), each dividing num_attention_heads = {n_heads}")
        return counts

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        cls.check_config(cfg, where)
        scaling = cfg.get("rope_scaling")
        if not _dynamic(scaling):
            return convert_llamalike(ckpt, cls, cls.options)
        factor = number(scaling, f"{where} (rope_scaling)", "factor", open_low=True)
        context = integer(cfg, where, "max_position_embeddings", high=1 << 40)  # (a context: no width bound)
        plain = {k: v for k, v in cfg.items() if k != "rope_scaling"}
        hw = convert_llamalike(dataclasses.replace(ckpt, config=plain), cls, cls.options)
        note = (f"dynamic NTK rope scaling (factor {factor:g}): the stated frequencies on sequences up to "
                f"max_position_embeddings = {context} tokens, read so; past them the model raises the rotary base "
                "with the length, which is not read")
        return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, notes=hw.meta.notes + (note,)))
