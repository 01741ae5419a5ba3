"""ERNIE 4.5 (Baidu; the 0.3B dense model and the MoE ones, whose experts are MLP and not read):
Llama-like, with rotary on interleaved pairs ``(2i, 2i + 1)`` of whole heads and one switch,
``use_bias`` (default off), for the biases of all four projections. ERNIE 4.5 VL's language model
is the same attention with multimodal rotary: its frequencies are stored permuted (the height and
width axes' interleaved) and put back in order as the sections are recomposed, so on text, where
every axis is the token's position, pair ``i`` turns at the ordinary ``θ^(-2i/d)``: read as such."""

from __future__ import annotations

from . import register
from .base import config_attention_bias
from .llama import Llama, LlamaLike, LlamaLikeOptions

#: ERNIE 4.5 MoE's MLP settings: the attention does not depend on them
_MOE = frozenset("moe_intermediate_size moe_k moe_layer_end_index moe_layer_interval moe_layer_start_index "
                 "moe_norm_min moe_num_experts moe_num_shared_experts output_router_logits "
                 "router_aux_loss_coef mlp_layer_types".split())


@register
class Ernie45(LlamaLike):
    name = "ernie4_5"
    about = "ERNIE 4.5 (Baidu), dense and MoE, and ERNIE 4.5 VL's language model: rotary on interleaved pairs"
    model_types = ("ernie4_5", "ernie4_5_moe",
                   "ernie4_5_vl_moe_text")  # (ERNIE 4.5 VL's language model: multimodal rotary, the ordinary map on text)
    architectures = ("Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM")
    handled = Llama.handled | {"use_bias"}
    ignored = Llama.ignored | _MOE
    options = LlamaLikeOptions(rotary_style="interleaved")
    attention_biases = config_attention_bias("use_bias", False)
