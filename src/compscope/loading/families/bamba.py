"""Bamba (IBM's Mamba-2 hybrid, Bamba-9B): Mamba layers with attention on the layers that
``attn_layer_indices`` lists.

compscope reads the attention layers alone, in order (its layer ``k`` is the model's k-th
attention layer; the notes say which), the Mamba layers being other writers to the residual, as
MLPs are. The attention is Llama's (pre-RMSNorm ``input_layernorm``, separate projections, GQA)
with rotary on half of each head (transformers fixes ``partial_rotary_factor`` at 0.5 for Bamba);
the final norm is ``final_layernorm``.
"""

from __future__ import annotations

from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import MAMBA2_SETTINGS
from .llama import Llama, LlamaLike, LlamaLikeOptions, attention_layer_hooks

_NOT_ATTENTION = MAMBA2_SETTINGS | {"z_loss_coefficient", "num_logits_to_keep"}


@register
class Bamba(LlamaLike):
    name = "bamba"
    about = "Bamba-9B (IBM): Mamba-2 layers, attention on the layers its config lists"
    model_types = ("bamba",)
    architectures = ("BambaForCausalLM", "BambaModel")
    handled = Llama.handled | {"attn_layer_indices", "partial_rotary_factor"}
    ignored = Llama.ignored | _NOT_ATTENTION
    options = LlamaLikeOptions(partial_rotary=0.5, final_norm="final_layernorm")
    hook_points = attention_layer_hooks

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The layers ``attn_layer_indices`` lists (none listed: transformers builds Mamba layers only)."""
        listed = config.get("attn_layer_indices")
        if not listed:
            raise UnsupportedModelError(f"{where}: attn_layer_indices lists no layer: every layer is a Mamba layer, "
                                        "and there is no attention to read")
        if not isinstance(listed, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_layers
                                               for i in listed):
            raise LoadError(f"{where}: config key 'attn_layer_indices' = {listed!r} is not a list of layer numbers "
                            f"0..{n_layers - 1}")
        return sorted(set(listed))

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # no windows: transformers reads no sliding_window for Bamba
