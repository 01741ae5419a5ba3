"""OPT decoders (Meta's OPT-125m ... 66B, the HF ``opt`` layout), and BioGPT and XGLM, the same layout.

Pre-LayerNorm ``self_attn_layer_norm`` (gain and bias, or none with
``layer_norm_elementwise_affine=False``); separate ``q/k/v_proj`` and ``out_proj`` with biases
(``enable_bias``); HF scales the query, bias included, by ``d_head^-1/2``, the usual logit scale;
learned absolute positions stored two rows late (``embed_positions`` row ``p + 2`` is position
``p``).

OPT-350m differs twice. Its blocks are post-LN (``do_layer_norm_before=False``): ``n = LN_a(x + Attn(x))``,
``h = LN_m(n + MLP(n))``, so layer ``l``'s attention reads the residual that layer ``l − 1``'s
``final_layer_norm`` made (``attn_norm`` row ``l``; row 0 unread: the first layer reads the embeddings' sum,
``first_layer_unnormed``) and the logits read the last block's output, no norm after it. And its token
embeddings are narrower than the residual (``word_embed_proj_dim``): ``project_in`` ``(d_model, d_embed)``
maps a token's row into the residual before its position is added, ``project_out`` ``(d_embed, d_model)``
maps the last residual back before the tied head, both without bias; so ``W_E = W_in E^T`` and
``W_U = E W_out`` exactly (products in float64, stored in float32).
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (Family, checkpoint_notes, config_attention_bias, final_layernorm, integer, prefix_of,
                   separate_projections, sizes, tensor2tensor_sinusoids, token_embedding, unembedding)

#: OPT's learned positions start at this row (HF's ``OPTLearnedPositionalEmbedding.offset``)
POSITION_OFFSET = 2


@register
class OPT(Family):
    name = "opt"
    model_types = ("opt",)
    architectures = ("OPTForCausalLM", "OPTModel")
    about = ("OPT: learned positions stored two rows late; OPT-350m's post-LN blocks and embeddings projected in and "
             "out of a wider residual")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers enable_bias layer_norm_elementwise_affine "
                        "word_embed_proj_dim do_layer_norm_before _remove_final_layer_norm".split())
    ignored = frozenset("ffn_dim dropout layerdrop init_std".split())
    accept = {}
    attention_biases = config_attention_bias("enable_bias", True)
    #: where the decoder's tensors may sit, its final LayerNorm's name in it, and the unembedding's names
    prefixes: ClassVar[tuple[str, ...]] = ("model.decoder.", "decoder.", "", "language_model.model.decoder.")  # (the
    # last: BLIP-2's and InstructBLIP's language model)
    final_norm_at: ClassVar[str] = "final_layer_norm"
    heads: ClassVar[tuple[str, ...]] = ("lm_head.weight", "language_model.lm_head.weight")

    @classmethod
    def base_model(cls, model):
        """The decoder inside ``OPTForCausalLM`` (``model.model.decoder``) or ``OPTModel``; in BLIP-2 and
        InstructBLIP, that of its language model (``model.language_model.model.decoder``)."""
        lm = getattr(model, "language_model", model)
        base = getattr(lm, "model", lm)
        return getattr(base, "decoder", base)

    @classmethod
    def sizes(cls, config: dict, where: str) -> tuple[int, int, int, int]:
        """``(d_model, heads, layers, d_head)`` from the config's size keys."""
        return sizes(config, where)

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        """What the model multiplies its token embeddings by: 1 here."""
        return 1.0

    @classmethod
    def layer_norm_eps(cls, config: dict, where: str) -> float:
        """Every LayerNorm's epsilon: ``nn.LayerNorm``'s default, 1e-5, which transformers' OPT and its kin use."""
        return 1e-5

    @classmethod
    def position_table(cls, ts, prefix: str, config: dict, where: str, d: int) -> tuple[torch.Tensor, str]:
        """``W_pos (d, n_ctx)`` and the note that says what it is: the learned table from row 2 on."""
        pos = ts.take(prefix + "embed_positions.weight")
        if pos.ndim != 2 or pos.shape[1] != d or pos.shape[0] <= POSITION_OFFSET:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'embed_positions.weight')}: embed_positions has shape "
                                        f"{tuple(pos.shape)}, expected ({POSITION_OFFSET} + n_ctx, {d})")
        return pos[POSITION_OFFSET:].T, (f"learned positions: W_pos is embed_positions from row {POSITION_OFFSET} on "
                                         "(OPT's offset)")

    @classmethod
    def hook_points(cls, model):
        """Pre-LN: ``self_attn_layer_norm`` reads the residual; post-LN (OPT-350m): ``self_attn`` itself. ``self_attn``
        returns what is added."""
        post = cls._post_ln(cls.base_model(model).config)
        return [(b.self_attn if post else b.self_attn_layer_norm, b.self_attn) for b in cls.base_model(model).layers]

    @classmethod
    def post_norm_points(cls, model):
        """Post-LN (OPT-350m): ``LN(x + Attn(x))`` is ``self_attn_layer_norm``, ``LN(n + MLP(n))``
        ``final_layer_norm``."""
        base = cls.base_model(model)
        if not cls._post_ln(base.config):
            return None
        return [(b.self_attn_layer_norm, b.final_layer_norm) for b in base.layers]

    @staticmethod
    def _post_ln(config) -> bool:
        """Whether the blocks normalise after each sublayer (``do_layer_norm_before=False``; OPT's alone)."""
        before = config.get("do_layer_norm_before", True) if isinstance(config, dict) else \
            getattr(config, "do_layer_norm_before", True)
        return before is False

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = cls.sizes(cfg, where)
        for key in ("do_layer_norm_before", "_remove_final_layer_norm"):
            if cfg.get(key) is not None and not isinstance(cfg[key], bool):
                raise UnsupportedModelError(f"{where}: config key '{key}' = {cfg[key]!r} is not true or false")
        post = cls._post_ln(cfg)
        width = integer(cfg, where, "word_embed_proj_dim", default=d)  # (the token embeddings' width)
        prefix = prefix_of(ts, "embed_tokens.weight", cls.prefixes)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like '{cls.prefixes[0]}embed_tokens.weight'")
        affine = cfg.get("layer_norm_elementwise_affine", True)
        attn = separate_projections(ts, lambda i: f"{prefix}layers.{i}.self_attn.", L, H, H, r, d)
        # the norm each layer's attention reads: pre-LN, its own; post-LN, the one that made the residual (none for
        # layer 0: row 0 unread; the previous layer's final_layer_norm after it)
        reads = ([f"{prefix}layers.{i}.self_attn_layer_norm" for i in range(L)] if not post else
                 [None] + [f"{prefix}layers.{i}.final_layer_norm" for i in range(L - 1)])
        g = [torch.ones(d) if n is None else ts.take(f"{n}.weight", (d,)) for n in reads] if affine else []
        beta = [torch.zeros(d) if n is None else ts.take(f"{n}.bias", (d,)) for n in reads] if affine else []
        emb = token_embedding(ts, prefix + "embed_tokens.weight", width)
        W_pos, position_note = cls.position_table(ts, prefix, cfg, where, d)
        W_U, head_note = unembedding(ckpt, list(cls.heads), emb)
        W_E = emb.T
        notes = checkpoint_notes(ckpt, head_note)
        notes.append(position_note)
        if width != d:  # a token's row mapped into the residual, the last residual back out of it (no biases)
            W_in = ts.take(prefix + "project_in.weight", (d, width)).double()
            W_out = ts.take(prefix + "project_out.weight", (width, d)).double()
            W_E = (W_in @ emb.T.double()).float()
            W_U = None if W_U is None else (W_U.double() @ W_out).float()
            notes.append(f"token embeddings {width} wide, projected into the {d}-wide residual: W_E = project_in E^T, "
                         "W_U = lm_head project_out")
        eps = cls.layer_norm_eps(cfg, where)
        final = None
        if not post and not cfg.get("_remove_final_layer_norm", False):
            final = final_layernorm(ts, prefix + cls.final_norm_at, d, eps) if affine else Norm("layernorm", None, None,
                                                                                                  eps)
        attn_norm = Norm("layernorm", torch.stack(g), torch.stack(beta), eps) if affine else \
            Norm("layernorm", None, None, eps)
        if post:
            notes.append("post-LN: the residual is renormalised after every sublayer; attention reads it directly, "
                         "the first layer the raw sum of token and position embeddings; no norm before the logits")
        elif final is None:
            notes.append("no norm before the logits (_remove_final_layer_norm)")
        scale = cls.embed_scale(cfg, where)
        if scale != 1.0:
            notes.append(f"W_E includes the embedding scale {scale:g} (sqrt(d_model)); W_U does not")
        return HeadWeights(
            **attn,
            W_E=W_E * scale if scale != 1.0 else W_E, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=attn_norm,
            final_norm=final,
            norm_placement="post" if post else "pre",
            first_layer_unnormed=post,
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class BioGpt(OPT):
    """BioGPT (Microsoft): OPT's layout under ``biogpt.``, the token embeddings times
    ``sqrt(d_model)`` (``scale_embedding``), every LayerNorm at ``nn.LayerNorm``'s default eps
    (the config's ``layer_norm_eps`` is not read by the model), the unembedding ``output_projection``."""

    name = "biogpt"
    about = "BioGPT: OPT's layout, embeddings times sqrt(d_model)"
    model_types = ("biogpt",)
    architectures = ("BioGptForCausalLM", "BioGptModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers scale_embedding".split())
    ignored = frozenset("layerdrop activation_dropout layer_norm_eps".split())  # (the last: unread by the model)
    accept = {}
    prefixes = ("biogpt.", "")
    final_norm_at = "layer_norm"
    heads = ("output_projection.weight",)

    @classmethod
    def base_model(cls, model):
        """The decoder inside ``BioGptForCausalLM`` (``model.biogpt``) or ``BioGptModel``."""
        return getattr(model, "biogpt", model)

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        d = cls.sizes(config, where)[0]
        return math.sqrt(d) if config.get("scale_embedding", True) else 1.0


@register
class Xglm(BioGpt):
    """XGLM (Meta's multilingual GPT): BioGPT's layout under ``model.`` (sizes as ``d_model``,
    ``attention_heads``, ``num_layers``), embeddings times ``sqrt(d_model)``, and fixed sinusoidal
    positions, which the model computes rather than stores: ``W_pos`` is that table, position ``p``
    at its row ``p + 2``, ``[sin((p + 2) f_i) | cos((p + 2) f_i)]`` with ``f_i = 10000^(−i / (d/2 − 1))``,
    in float32 as transformers computes it."""

    name = "xglm"
    about = "XGLM: OPT's layout, embeddings times sqrt(d_model), sinusoidal positions"
    model_types = ("xglm",)
    architectures = ("XGLMForCausalLM", "XGLMModel")
    handled = frozenset("d_model attention_heads num_layers scale_embedding max_position_embeddings".split())
    ignored = frozenset("ffn_dim dropout layerdrop init_std activation_dropout".split())
    accept = {"add_cross_attention": lambda v: not v}
    prefixes = ("model.", "")
    final_norm_at = "layer_norm"
    heads = ("lm_head.weight",)

    @classmethod
    def sizes(cls, config: dict, where: str) -> tuple[int, int, int, int]:
        return sizes(config, where, width=("d_model",), heads=("attention_heads",), layers=("num_layers",))

    @classmethod
    def base_model(cls, model):
        return getattr(model, "model", model)

    @classmethod
    def position_table(cls, ts, prefix: str, config: dict, where: str, d: int) -> tuple[torch.Tensor, str]:
        n = integer(config, where, "max_position_embeddings")
        if d % 2 or d < 4:
            raise UnsupportedModelError(f"{where}: d_model {d} is odd or below 4: no sinusoidal table as XGLM's")
        table = tensor2tensor_sinusoids(n + POSITION_OFFSET, d)[:, POSITION_OFFSET:]
        return table.contiguous(), (f"sinusoidal positions computed as the model computes them (position p at its "
                                      f"table's row p + {POSITION_OFFSET}), {n} of them")
