"""GPT-BigCode (StarCoder, StarCoderBase, SantaCoder, WizardCoder): GPT-2's blocks with
``nn.Linear`` projections and, in the released models, multi-query attention.

``c_attn.weight`` is ``(out, in)``. Multi-query (``multi_query``, the default): its rows are
``[q heads (d) | the one key (d_head) | the one value (d_head)]``, every query head reading the one
K/V head. Otherwise each head's rows sit together, ``[q_h | k_h | v_h]`` for ``h = 0, 1, ...``.
``scale_attn_weights`` false: logits are the unscaled ``q·k`` (``attn_scale = 1``). Learned
absolute positions (``wpe``) and the final LayerNorm as GPT-2's.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta
from ...errors import UnsupportedModelError
from . import register
from .base import Family, checkpoint_notes, number
from .gpt2 import GPT2_SIZE_KEYS, gpt2_blocks, gpt2_outer, gpt2_sizes, ln1_attn_hooks


@register
class GPTBigCode(Family):
    name = "gpt_bigcode"
    about = "StarCoder, StarCoderBase, SantaCoder: multi-query attention"
    model_types = ("gpt_bigcode",)
    architectures = ("GPTBigCodeForCausalLM", "GPTBigCodeModel")
    # (num_key_value_heads: transformers 5's, from multi_query)
    handled = GPT2_SIZE_KEYS | frozenset("layer_norm_epsilon multi_query scale_attn_weights num_key_value_heads".split())
    # the softmax's dtype (float32 or not, and a scaling undone inside it): numerics, not what is computed
    ignored = frozenset("attention_softmax_in_fp32 scale_attention_softmax_in_fp32 inference_runner max_batch_size "
                        "max_sequence_length pad_key_length pre_allocate_kv_cache validate_runner_input summary_type "
                        "summary_use_proj summary_activation summary_proj_to_labels summary_first_dropout".split())
    # (and the StarCoder release's settings of its own inference runner)
    accept = {"add_cross_attention": lambda v: not v}

    hf_base = "transformer"
    hook_points = classmethod(ln1_attn_hooks)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = gpt2_sizes(cfg, where)
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        mqa = cfg.get("multi_query", True) is not False  # transformers' default: multi-query
        G = 1 if mqa else H
        if cfg.get("num_key_value_heads") not in (None, G):
            raise UnsupportedModelError(f"{where}: config key 'num_key_value_heads' = {cfg['num_key_value_heads']!r} "
                                        f"disagrees with multi_query = {mqa} ({G} K/V head{'s' if G > 1 else ''})")
        prefix = "transformer." if "transformer.wte.weight" in ts else ""

        def split(w, b):
            if mqa:  # [q heads | k | v]
                return w.split((d, r, r)), b.split((d, r, r))
            w3, b3 = w.reshape(H, 3, r, d), b.reshape(H, 3, r)  # per head [q_h | k_h | v_h]
            return tuple(w3[:, k].reshape(H * r, d) for k in range(3)), tuple(b3[:, k].reshape(H * r) for k in range(3))

        blocks = gpt2_blocks(ckpt, prefix, L, d, (H, G), r, eps, split, conv1d=False)
        W_E, W_pos, W_U, head_note, final = gpt2_outer(ckpt, prefix, d, eps)
        notes = checkpoint_notes(ckpt, head_note) + (["multi-query: every query head reads the one key/value head"]
                                                     if mqa and H > 1 else [])
        return HeadWeights(
            **blocks,
            W_E=W_E, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(0 if mqa else h for h in range(H)),
            final_norm=final,
            norm_placement="pre",
            positions="learned",
            attn_scale=0.0 if cfg.get("scale_attn_weights", True) is not False else 1.0,
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
