"""T5's encoder (T5, T5 v1.1, Flan-T5, mT5, UMT5, Switch Transformers; ``T5EncoderModel``, the text encoder
of diffusion pipelines): the encoder stack alone, its decoder (whose cross-attention reads the encoder's output,
a second residual stream) not read.

Pre-norm layers, each ``layer.0.layer_norm`` (T5's RMS norm: a gain, no mean, no bias) before
``layer.0.SelfAttention`` (``q``, ``k``, ``v``, ``o`` without biases; ``d_kv`` per head, so ``H d_kv``
need not be ``d_model``), bidirectional, logits not scaled (``attn_scale = 1``: T5 folds the
``1/√d_kv`` into its query weights' initialisation), and a learned bias by the offset's bucket
added to every logit: ``ℓ_ij = q_i·k_j + B[h, β(i − j)]`` with T5's bidirectional buckets
(``relative_attention_num_buckets``, ``relative_attention_max_distance``;
:func:`compscope.core.attention.bias_bucket`). T5 and mT5 compute the table once, in the first
layer, for all; UMT5's layers each have their own. No position enters the residual (positions
``relative``; the bias is held per layer in ``HeadWeights.rel_bias``). The residual starts as the
shared embedding of the token, unscaled; ``encoder.final_layer_norm`` ends the stack.

LongT5's encoder with local attention (:class:`LongT5Encoder`) is T5's, each token attending the ``local_radius``
tokens on either side of it alone (its bias by the true offset's bucket, computed in blocks of ``local_radius + 1``);
with transient-global attention, refused.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import MAX_HEADS, MAX_LAYERS, MAX_WIDTH, Family, checkpoint_notes, integer, number, split_cols, split_rows


@register
class T5Encoder(Family):
    name = "t5_encoder"
    about = ("the encoders of T5, Flan-T5, mT5, UMT5 and Switch Transformers (T5EncoderModel): pre-RMSNorm, unscaled "
             "logits, a learned bias by offset bucket")
    part = "encoder"
    model_types = ("t5", "mt5", "umt5", "switch_transformers")
    architectures = ("T5EncoderModel", "T5ForConditionalGeneration", "T5Model", "MT5EncoderModel",
                     "MT5ForConditionalGeneration", "MT5Model", "UMT5EncoderModel", "UMT5ForConditionalGeneration",
                     "UMT5Model", "SwitchTransformersEncoderModel", "SwitchTransformersForConditionalGeneration",
                     "SwitchTransformersModel")
    handled = frozenset("d_model d_kv num_heads num_layers layer_norm_epsilon relative_attention_num_buckets "
                        "relative_attention_max_distance".split())
    # the decoder's and the MLP's settings (Switch Transformers' experts and router too), dropout, initialisation, and
    # what the original configs carry besides
    ignored = frozenset("num_decoder_layers d_ff feed_forward_proj dense_act_fn is_gated_act dropout_rate "
                        "initializer_factor n_positions output_past classifier_dropout scale_decoder_outputs "
                        "expert_capacity num_sparse_encoder_layers num_sparse_decoder_layers num_experts router_bias "
                        "router_jitter_noise router_dtype router_ignore_padding_tokens router_z_loss_coef "
                        "router_aux_loss_coef add_router_probs encoder_sparse_step decoder_sparse_step".split())

    hf_base = "encoder"
    # its encoder alone, from a whole model's files too (its decoder never built)
    runs_as = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel",
               "switch_transformers": "SwitchTransformersEncoderModel"}
    # T5's first block computes the bias and hands it to the others with its output: no block can be left out of a run
    layers_are_modules = False
    #: the name of each block's self-attention module (its ``q``, ``k``, ``v``, ``o`` and the first one's bias table)
    attention: ClassVar[str] = "SelfAttention"

    @classmethod
    def hook_points(cls, model):
        """T5 blocks: ``layer.0.layer_norm`` reads the residual, ``layer.0.SelfAttention.o`` returns what is added."""
        return [(b.layer[0].layer_norm, getattr(b.layer[0], cls.attention).o) for b in cls.base_model(model).block]

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        """Each layer's window (``HeadWeights.sliding_window``; None: every token attends to every token), and what
        the notes say of them."""
        return (None,) * n_layers, []

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d = integer(cfg, where, "d_model")
        H = integer(cfg, where, "num_heads", high=MAX_HEADS)
        L = integer(cfg, where, "num_layers", high=MAX_LAYERS)
        r = integer(cfg, where, "d_kv")
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-6)
        buckets = integer(cfg, where, "relative_attention_num_buckets", default=32, high=MAX_WIDTH)
        far = integer(cfg, where, "relative_attention_max_distance", default=128, high=MAX_WIDTH)
        own_tables = cfg.get("model_type") == "umt5"
        windows, window_notes = cls.windows(cfg, where, L)
        a = cls.attention
        parts: dict[str, list] = {k: [] for k in ("q", "k", "v", "o", "g", "bias")}
        for i in range(L):
            p = f"encoder.block.{i}.layer.0."
            for name in "qkv":
                parts[name].append(split_rows(ts.take(f"{p}{a}.{name}.weight", (H * r, d)), H, r))
            parts["o"].append(split_cols(ts.take(f"{p}{a}.o.weight", (d, H * r)), H, r))
            parts["g"].append(ts.take(p + "layer_norm.weight", (d,)))
            if own_tables or i == 0:
                parts["bias"].append(ts.take(f"{p}{a}.relative_attention_bias.weight", (buckets, H)).T)
            else:
                parts["bias"].append(parts["bias"][0])
        name = "shared.weight" if "shared.weight" in ts else "encoder.embed_tokens.weight"
        emb = ts.take(name)
        if emb.ndim != 2 or emb.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(name)}: shape {tuple(emb.shape)}, expected (n_vocab, {d})")
        notes = checkpoint_notes(ckpt) + [
            "the encoder alone: the decoder, whose cross-attention reads the encoder's output, is not read",
            "logits unscaled (attn_scale 1): T5 folds 1/sqrt(d_kv) into its query weights",
            f"a learned bias on the logits by the offset's bucket ({buckets} buckets, both ways, up to {far}), "
            + ("each layer's own" if own_tables else "one table, the first layer's, for every layer"),
            "encoder: bidirectional attention, no unembedding (W_U is None)"] + window_notes
        return HeadWeights(
            W_Q=torch.stack(parts["q"]), W_K=torch.stack(parts["k"]), W_V=torch.stack(parts["v"]),
            W_O=torch.stack(parts["o"]), b_Q=None, b_K=None, b_V=None, b_O=None,
            W_E=emb.T, W_pos=None, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("rmsnorm", torch.stack(parts["g"]), None, eps),
            final_norm=Norm("rmsnorm", ts.take("encoder.final_layer_norm.weight", (d,))[None], None, eps),
            norm_placement="pre",
            positions="relative",
            rel_bias=torch.stack(parts["bias"]).contiguous(), rel_bias_buckets=(buckets, far),
            attn_scale=1.0,
            causal=False,
            sliding_window=windows,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class LongT5Encoder(T5Encoder):
    """LongT5's encoder with local attention: T5's layers (one bias table, the first layer's, by the offset's bucket),
    each token attending those within ``local_radius`` of it on either side (``|i − j| < local_radius + 1``: the window
    held as ``local_radius + 1``). transformers computes it in blocks of ``local_radius + 1``, each query against its
    block and the two beside it, with the bias by the true offset and the keys farther than the radius masked: the
    same logits. Transient-global attention (keys made of sums over blocks of the residual as well) is refused."""

    name = "longt5_encoder"
    about = ("the encoder of LongT5 with local attention: T5's, each token attending local_radius tokens on either "
             "side")
    model_types = ("longt5",)
    architectures = ("LongT5EncoderModel", "LongT5ForConditionalGeneration", "LongT5Model")
    handled = T5Encoder.handled | frozenset({"local_radius"})
    ignored = T5Encoder.ignored | frozenset({"global_block_size"})  # (transient-global's, refused)
    accept = {"encoder_attention_type": lambda v: v in (None, "local")}
    runs_as = {"longt5": "LongT5EncoderModel"}
    attention = "LocalSelfAttention"

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        kind = config.get("encoder_attention_type")
        if kind not in (None, "local"):
            raise UnsupportedModelError(
                f"{where}: config key 'encoder_attention_type' = {kind!r}: LongT5's transient-global attention has each "
                "token attend as well to keys computed from sums of the residual over blocks of tokens, which no pair "
                "of heads reading one token each holds; compscope reads LongT5 with local attention alone")
        super().check_config(config, where)

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        radius = integer(config, where, "local_radius", default=127, low=0, high=MAX_WIDTH)
        return (radius + 1,) * n_layers, [
            f"local attention: every token attends the {radius} tokens on either side of it alone (local_radius)"]
