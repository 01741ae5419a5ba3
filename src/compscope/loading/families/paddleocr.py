"""PaddleOCR-VL's language model (Baidu): ERNIE 4.5's pre-RMSNorm layers with Qwen2.5-Omni's
attention: grouped K/V heads, one switch (``use_bias``) for biases on all four projections, and
multimodal rotary whose sections (``mrope_section``) split the rotate-half pairs between the
temporal, height and width positions of a token. On text the three are the token's position, so
every pair turns by it: the ordinary rotary map, which is what is read. transformers' defaults where
a config states none: base 5e5, heads 128 wide.
"""

from __future__ import annotations

from . import register
from .base import config_attention_bias
from .llama import WINDOW_KEYS, LlamaLike, LlamaLikeOptions


@register
class PaddleOcrVl(LlamaLike):
    name = "paddleocr_vl"
    about = ("PaddleOCR-VL's language model (Baidu): ERNIE 4.5's layers, biases on every projection or none, "
             "multimodal rotary (the ordinary map on text)")
    model_types = ("paddleocr_vl_text",)
    architectures = ()
    handled = LlamaLike.handled - WINDOW_KEYS - {"attention_bias", "qkv_bias"} | {"use_bias"}
    attention_biases = config_attention_bias("use_bias", False)
    options = LlamaLikeOptions(default_theta=5e5, default_head_dim=128)
