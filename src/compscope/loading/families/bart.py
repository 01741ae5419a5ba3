"""The encoders of BART and its kin (BART, PLBART, MVP, BlenderBot-small; Marian; Pegasus; M2M100 and NLLB-200,
NLLB-MoE; BlenderBot; FSMT): the encoder stack alone, its decoder (whose cross-attention reads the encoder's output,
a second residual stream) not read.

Every one keeps its layers under ``encoder.layers.N`` (``model.encoder.`` in a model with a head): ``self_attn``'s
``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` with biases, ``self_attn_layer_norm``, an MLP (``fc1``, ``fc2``) and
``final_layer_norm``; bidirectional, logits scaled by ``1/√d_head``. The residual starts as the token's embedding
times ``√d_model`` where ``scale_embedding`` is set, plus its position's row. What sets them apart:

- **post-LN** (BART, PLBART, BlenderBot-small, Marian, FSMT): ``h' = LN(h + Attn(h))``, then the MLP's likewise;
  each layer's attention reads the residual itself, which the previous layer's ``final_layer_norm`` made
  (``norm_placement 'post'``). BART's kin normalise the embeddings first (``layernorm_embedding``, layer 0's norm);
  Marian and FSMT do not (the first layer reads the sum itself: ``first_layer_unnormed``).
- **pre-LN** (Pegasus, M2M100 and NLLB, BlenderBot): ``self_attn_layer_norm`` before the attention, ``encoder.layer_norm``
  after the last layer.
- **positions**: a learned table, position ``p`` at its row ``p + 2`` (BART, PLBART) or ``p`` (the BlenderBots);
  Marian's and Pegasus's sinusoids, ``[sin(p ω_i) | cos(p ω_i)]`` with ``ω_i = 10000^(−2i/d)`` (stored with the model,
  or computed as transformers computes them, in float64 then float32, where it is not stored); M2M100's
  tensor2tensor sinusoids ``[sin(p f_i) | cos(p f_i)]``, ``f_i = 10000^(−i/(d/2 − 1))``, computed, position ``p`` at
  row ``pad_token_id + 1 + p`` (a pad token takes no position); FSMT's the same, stored or computed.

LED's encoder (:class:`LedEncoder`) is BART's with Longformer's windows; BigBird-Pegasus's
(:class:`BigBirdPegasusEncoder`) Pegasus's, read as the full attention transformers runs on short sequences.

ProphetNet's encoder (:class:`ProphetNetEncoder`) is BART's under its own names. mBART is refused: a LayerNorm on the
embeddings starts a residual that pre-LN layers then read.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import LoadError
from . import register
from .bert import longformer_windows
from .big_bird import BigBird, switch_to_full_attention
from .base import (MAX_WIDTH, Family, checkpoint_notes, integer, sinusoids_after_pad, sizes, split_cols, split_rows,
                   stack)

#: the settings of the decoder, the MLP, dropout and initialisation, and the keys of the original (fairseq-era) configs
#: that transformers no longer reads: it builds each model type's one layout whatever they say
_IGNORED = frozenset("""
    decoder_layers decoder_ffn_dim decoder_attention_heads decoder_layerdrop decoder_start_token_id decoder_vocab_size
    share_encoder_decoder_embeddings encoder_ffn_dim encoder_layerdrop layerdrop activation_function activation_dropout dropout
    attention_dropout classifier_dropout classif_dropout init_std num_hidden_layers normalize_before add_final_layer_norm
    normalize_embedding static_position_embeddings add_bias_logits extra_pos_embeddings do_blenderbot_90_layernorm
    force_bos_token_to_be_generated gradient_checkpointing output_past layernorm_variant variant
    """.split())


#: the model types whose embeddings transformers scales by sqrt(d_model) where a config does not say
#: (``scale_embedding``: their config classes' default)
_SCALED_BY_DEFAULT = frozenset({"plbart", "m2m_100", "nllb-moe", "bigbird_pegasus"})
#: transformers' number of positions where a config states none (every config class of these: 1024)
_POSITIONS = 1024


def marian_sinusoids(n: int, d: int) -> torch.Tensor:
    """``(d, n)``: Marian's and Pegasus's table as transformers computes it (float64, then float32), position ``p``
    in column ``p``: ``sin(p ω_i)`` in the first ``⌈d/2⌉`` rows, ``cos(p ω_i)`` in the rest, ``ω_i = 10000^(−2i/d)``."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                            2 * (torch.arange(d, dtype=torch.float64) // 2) / d)[None, :]
    return torch.cat([angle[:, 0::2].sin(), angle[:, 1::2].cos()], 1).float().T.contiguous()


@register
class BartEncoder(Family):
    name = "bart_encoder"
    about = ("the encoders of BART, PLBART and MVP: post-LN, a LayerNorm on the embeddings, learned positions from "
             "row 2")
    part = "encoder"
    model_types = ("bart", "plbart", "mvp")
    architectures = ("BartModel", "BartForConditionalGeneration", "BartForSequenceClassification",
                     "BartForQuestionAnswering", "PLBartModel", "PLBartForConditionalGeneration",
                     "PLBartForSequenceClassification", "MvpModel", "MvpForConditionalGeneration")
    handled = frozenset("d_model encoder_attention_heads encoder_layers scale_embedding max_position_embeddings "
                        "pad_token_id".split())
    ignored = _IGNORED | {"prompt_length", "prompt_mid_dim"}  # (MVP's prompts' sizes, where it has none)
    # MVP's prompts (use_prompt) put learned keys and values before every layer's own: refused
    accept = {"is_decoder": lambda v: not v, "add_cross_attention": lambda v: not v, "use_prompt": lambda v: not v}

    #: whether the sum of each sublayer and the residual is normalised (post-LN), or the sublayer's input (pre-LN)
    post_ln: ClassVar[bool] = True
    #: whether a LayerNorm on the embeddings (``layernorm_embedding``) makes the residual the first layer reads
    embedding_norm: ClassVar[bool] = True
    #: the learned table's row of position 0
    position_offset: ClassVar[int] = 2
    #: a layer's query, key, value and output projections (``nn.Linear``; biases where :meth:`has_biases`), under its
    #: prefix
    projections: ClassVar[tuple[str, str, str, str]] = (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj")
    #: the LayerNorm after the last layer of a pre-LN encoder, under the encoder's prefix
    final_norm_at: ClassVar[str] = "layer_norm"
    #: the LayerNorm on the embeddings (under the encoder's prefix) and the one after each layer's MLP (under its own)
    embedding_norm_at: ClassVar[str] = "layernorm_embedding"
    mlp_norm_at: ClassVar[str] = "final_layer_norm"
    #: the token embeddings, under the encoder's prefix, else (tied) under the model's
    tokens_at: ClassVar[tuple[str, str]] = ("embed_tokens", "shared")
    #: the config keys of the width, the head count and the layer count
    size_keys: ClassVar[tuple[str, str, str]] = ("d_model", "encoder_attention_heads", "encoder_layers")

    @classmethod
    def has_biases(cls, config: dict) -> bool:
        """Whether the projections have biases (all of them do, or none)."""
        return True

    @classmethod
    def base_model(cls, model):
        """The encoder of the running model (``get_encoder()`` of the whole model, with or without its head: the
        decoder is built but never run)."""
        get = getattr(model, "get_encoder", None)
        return get() if callable(get) else model

    @classmethod
    def hook_points(cls, model):
        """Post-LN: ``self_attn`` reads the residual; pre-LN: ``self_attn_layer_norm`` does. The output projection
        (:attr:`projections`' last) returns what is added."""
        adds = cls.projections[3].split(".")
        return [(b.self_attn if cls.post_ln else b.self_attn_layer_norm, functools.reduce(getattr, adds, b))
                for b in cls.base_model(model).layers]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``self_attn_layer_norm``, ``LN(m + MLP(m))`` the one after the MLP (:attr:`mlp_norm_at`)."""
        if not cls.post_ln:
            return None
        return [(b.self_attn_layer_norm, getattr(b, cls.mlp_norm_at)) for b in cls.base_model(model).layers]

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        """Each layer's window (``HeadWeights.sliding_window``; None: every token attends to every token), and what
        the notes say of them."""
        return (None,) * n_layers, []

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[torch.Tensor, str | None]:
        """``W_pos`` ``(d_model, positions)`` and what the notes say of it (``e``: the encoder's tensor prefix): the
        learned table from :attr:`position_offset`'s row on."""
        name = e + "embed_positions.weight"
        table = ts.take(name)
        start = cls.position_offset
        if table.ndim != 2 or table.shape[1] != d or table.shape[0] <= start:
            raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}: expected "
                            f"(positions > {start}, {d})")
        return table[start:].T.contiguous(), (f"learned positions, position p at the table's row p + {start}"
                                              if start else None)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        width, heads, layers = cls.size_keys
        d, H, L, r = sizes(cfg, where, width=(width,), heads=(heads,), layers=(layers,))
        prefix = next((p for p in (cls.hf_base + ".", "") if f"{p}encoder.layers.0.{cls.projections[0]}.weight" in ts),
                      "")
        e = prefix + "encoder."
        ws, bs = ([[] for _ in range(3)] for _ in range(2))
        biases = cls.has_biases(cfg)
        wo, bo, gains, shifts = [], [], [], []
        for i in range(L):
            p = f"{e}layers.{i}."
            for j, name in enumerate(cls.projections[:3]):
                ws[j].append(split_rows(ts.take(f"{p}{name}.weight", (d, d)), H, r))
                bs[j].append(ts.take(f"{p}{name}.bias", (d,)).reshape(H, r) if biases else None)
            wo.append(split_cols(ts.take(f"{p}{cls.projections[3]}.weight", (d, d)), H, r))
            bo.append(ts.take(f"{p}{cls.projections[3]}.bias", (d,)) if biases else None)
        # the norm each layer's attention reads: pre-LN, its own; post-LN, the one that made the residual (the
        # embeddings' for layer 0, where there is one, else unread; the previous layer's final_layer_norm after it)
        if cls.post_ln:
            first = e + cls.embedding_norm_at if cls.embedding_norm else f"{e}layers.0.self_attn_layer_norm"
            norms = [first] + [f"{e}layers.{i}.{cls.mlp_norm_at}" for i in range(L - 1)]
        else:
            norms = [f"{e}layers.{i}.self_attn_layer_norm" for i in range(L)]
        for name in norms:
            gains.append(ts.take(name + ".weight", (d,)))
            shifts.append(ts.take(name + ".bias", (d,)))
        eps = 1e-5  # (nn.LayerNorm's default: transformers gives these models no other)
        final = None
        if not cls.post_ln:
            final = Norm("layernorm", ts.take(f"{e}{cls.final_norm_at}.weight", (d,))[None],
                         ts.take(f"{e}{cls.final_norm_at}.bias", (d,))[None], eps)
        own, tied = (f"{e}{cls.tokens_at[0]}.weight", f"{prefix}{cls.tokens_at[1]}.weight")
        name = next((n for n in (own, tied) if n in ts), own)
        wte = ts.take(name)
        if wte.ndim != 2 or wte.shape[1] != d:
            raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(wte.shape)}, expected (n_vocab, {d})")
        scaled = cfg.get("scale_embedding", cfg.get("model_type") in _SCALED_BY_DEFAULT)
        scale = math.sqrt(d) if scaled else 1.0
        W_pos, position_note = cls.positional(cfg, where, ts, e, d)
        windows, window_notes = cls.windows(cfg, where, L)
        notes = checkpoint_notes(ckpt, position_note) + [
            "the encoder alone: the decoder, whose cross-attention reads the encoder's output, is not read",
            "encoder: bidirectional attention, no unembedding (W_U is None)",
            ("post-LN: the residual is renormalised after every sublayer; attention reads it directly"
             + ("" if cls.embedding_norm else " (the first layer reads the embeddings' sum itself)"))
            if cls.post_ln else "pre-LN: a LayerNorm before each layer's attention, and after the last layer",
            *window_notes]
        if scale != 1.0:
            notes.append(f"W_E includes the embedding scale {scale:g} (sqrt(d_model), scale_embedding)")
        return HeadWeights(
            W_Q=torch.stack(ws[0]), W_K=torch.stack(ws[1]), W_V=torch.stack(ws[2]), W_O=torch.stack(wo),
            b_Q=stack(bs[0]), b_K=stack(bs[1]), b_V=stack(bs[2]), b_O=stack(bo),
            W_E=wte.T * scale, W_pos=W_pos, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(gains), torch.stack(shifts), eps),
            final_norm=final,
            norm_placement="post" if cls.post_ln else "pre",
            first_layer_unnormed=cls.post_ln and not cls.embedding_norm,
            positions="learned",
            causal=False,
            sliding_window=windows,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class BlenderbotSmallEncoder(BartEncoder):
    """BlenderBot-small's encoder (90M): BART's, positions from the table's row 0."""

    name = "blenderbot_small_encoder"
    about = "the encoder of BlenderBot-small: BART's, learned positions from row 0"
    model_types = ("blenderbot-small",)
    architectures = ("BlenderbotSmallModel", "BlenderbotSmallForConditionalGeneration")
    position_offset = 0


@register
class BlenderbotEncoder(BartEncoder):
    """BlenderBot's encoder (400M to 9B): pre-LN layers, a LayerNorm after the last, learned positions from row 0."""

    name = "blenderbot_encoder"
    about = "the encoder of BlenderBot: pre-LN, learned positions from row 0"
    model_types = ("blenderbot",)
    architectures = ("BlenderbotModel", "BlenderbotForConditionalGeneration")
    post_ln = False
    embedding_norm = False
    position_offset = 0


@register
class MarianEncoder(BartEncoder):
    """Marian's encoder (the OPUS-MT translation models): post-LN, no norm on the embeddings (the first layer reads
    their sum), Marian's sinusoids."""

    name = "marian_encoder"
    about = "the encoders of Marian (OPUS-MT): post-LN, no norm on the embeddings, sinusoidal positions"
    model_types = ("marian",)
    architectures = ("MarianModel", "MarianMTModel")
    embedding_norm = False

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[torch.Tensor, str | None]:
        """Marian's sinusoids as the model holds them: its stored table, or, where the files hold none, the one
        transformers computes (``max_position_embeddings`` positions)."""
        name = e + "embed_positions.weight"
        table = ts.take(name, required=False)
        if table is not None:
            if table.ndim != 2 or table.shape[1] != d:
                raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}, expected "
                                f"(positions, {d})")
            return table.T.contiguous(), f"sinusoidal positions, the model's stored table ({table.shape[0]} of them)"
        n = integer(config, where, "max_position_embeddings", default=_POSITIONS, high=MAX_WIDTH)
        return marian_sinusoids(n, d), f"sinusoidal positions computed as the model computes them, {n} of them"


@register
class PegasusEncoder(MarianEncoder):
    """Pegasus's encoder: pre-LN, a LayerNorm after the last layer, Marian's sinusoids."""

    name = "pegasus_encoder"
    about = "the encoder of Pegasus: pre-LN, sinusoidal positions"
    model_types = ("pegasus",)
    architectures = ("PegasusModel", "PegasusForConditionalGeneration")
    post_ln = False


@register
class M2M100Encoder(BartEncoder):
    """M2M100's and NLLB-200's encoder: pre-LN, a LayerNorm after the last layer, tensor2tensor sinusoids numbered from
    ``pad_token_id + 1``."""

    name = "m2m100_encoder"
    about = "the encoders of M2M100 and NLLB-200 (dense): pre-LN, sinusoidal positions from row pad_token_id + 1"
    model_types = ("m2m_100",)
    architectures = ("M2M100Model", "M2M100ForConditionalGeneration")
    post_ln = False
    embedding_norm = False

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[torch.Tensor, str | None]:
        """The table transformers computes (it stores none), from row ``pad_token_id + 1`` (the first token's
        position: a pad token takes none), ``max_position_embeddings`` positions."""
        return sinusoids_after_pad(config, where, d, "d_model", "M2M100", _POSITIONS)


@register
class FsmtEncoder(BartEncoder):
    """FSMT's encoder (fairseq's WMT19 translation models, ``facebook/wmt19-*``): post-LN as Marian's, no norm on the
    embeddings (the first layer reads their sum), tensor2tensor sinusoids from row ``pad_token_id + 1`` as M2M100's
    (the model's stored table, else the one it computes), the source vocabulary's table (``src_vocab_size``). Inside
    the encoder the residual is ``(seq, batch, d_model)``: the data runner turns what it hooks
    (``Family.sequence_first``)."""

    name = "fsmt_encoder"
    about = ("the encoder of FSMT (fairseq's WMT19 models): post-LN, no norm on the embeddings, sinusoidal positions "
             "from row pad_token_id + 1")
    model_types = ("fsmt",)
    architectures = ("FSMTModel", "FSMTForConditionalGeneration")
    handled = BartEncoder.handled | {"src_vocab_size", "tie_word_embeddings"}
    ignored = _IGNORED | {"langs", "tgt_vocab_size", "max_length", "num_beams", "length_penalty", "early_stopping",
                          "forced_eos_token_id", "decoder"}  # (transformers 4 saves the decoder's sizes as 'decoder')
    embedding_norm = False
    sequence_first = True
    tokens_at = ("embed_tokens", "decoder.embed_tokens")  # (the decoder's, where tie_word_embeddings shares it)

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[torch.Tensor, str | None]:
        """The model's table from row ``pad_token_id + 1`` (a pad token takes the zero row ``pad_token_id`` and no
        position): stored, else computed as the model computes it, ``max_position_embeddings`` positions."""
        pad = integer(config, where, "pad_token_id", default=1, low=0, high=MAX_WIDTH)
        start = pad + 1
        name = e + "embed_positions.weight"
        table = ts.take(name, required=False)
        if table is not None:
            if table.ndim != 2 or table.shape[1] != d or table.shape[0] <= start:
                raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}: expected "
                                f"(positions > {start}, {d})")
            return table[start:].T.contiguous(), (f"sinusoidal positions, the model's stored table, position p at "
                                                  f"its row p + {start} (pad_token_id + 1)")
        return sinusoids_after_pad(config, where, d, "d_model", "FSMT", _POSITIONS)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """BART's reading; the decoder's token table stands for the encoder's only where ``tie_word_embeddings``
        shares them (the files then hold the decoder's alone)."""
        ts, cfg = ckpt.tensors, ckpt.config
        own = [f"{p}encoder.embed_tokens.weight" for p in (cls.hf_base + ".", "")]
        if not cfg.get("tie_word_embeddings") and not any(n in ts for n in own):
            raise LoadError(f"{ckpt.source}: no tensor '{own[1]}' (nor '{own[0]}'): the encoder's token embeddings, "
                            "which this config (tie_word_embeddings false) does not share with the decoder")
        return super().convert(ckpt)


@register
class NllbMoeEncoder(M2M100Encoder):
    """NLLB-200's mixture-of-experts model (NLLB-MoE): M2M100's encoder, experts in every ``encoder_sparse_step``-th
    layer's MLP (not read), the norm before it named ``ff_layer_norm``."""

    name = "nllb_moe_encoder"
    about = "the encoder of NLLB-MoE: M2M100's, experts in some of its MLPs"
    model_types = ("nllb-moe",)
    architectures = ("NllbMoeModel", "NllbMoeForConditionalGeneration")
    ignored = M2M100Encoder.ignored | frozenset(
        "encoder_sparse_step decoder_sparse_step num_experts expert_capacity router_bias router_dtype router_z_loss_coef "
        "router_aux_loss_coef router_ignore_padding_tokens batch_prioritized_routing second_expert_policy "
        "normalize_router_prob_before_dropping moe_eval_capacity_token_fraction moe_token_dropout "
        "output_router_logits".split())


@register
class LedEncoder(BartEncoder):
    """LED's encoder (Longformer-Encoder-Decoder): BART's post-LN layers after a LayerNorm on the embeddings, learned
    positions from row 0 (``max_encoder_position_embeddings``), each layer attending within Longformer's window both
    ways (``attention_window / 2`` tokens each side). Tokens marked for global attention use projections of their own
    (``query_global``, ...), not read: compscope reads and runs every token as local, as the model runs without a
    ``global_attention_mask``. transformers pads each sequence to a multiple of the widest window with pad tokens its
    attention masks, which the data runner cuts off."""

    name = "led_encoder"
    about = "the encoder of LED: BART's layers, each attending within Longformer's window both ways"
    model_types = ("led",)
    architectures = ("LEDModel", "LEDForConditionalGeneration", "LEDForSequenceClassification",
                     "LEDForQuestionAnswering")
    handled = (BartEncoder.handled - {"scale_embedding", "max_position_embeddings"}) | {
        "attention_window", "max_encoder_position_embeddings"}
    ignored = BartEncoder.ignored | {"max_decoder_position_embeddings"}
    hf_base = "led"
    position_offset = 0
    pads_sequences = True
    projections = ("self_attn.longformer_self_attn.query", "self_attn.longformer_self_attn.key",
                   "self_attn.longformer_self_attn.value", "self_attn.output")

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        return longformer_windows(config, where, n_layers)


@register
class BigBirdPegasusEncoder(BartEncoder):
    """BigBird-Pegasus's encoder: Pegasus's pre-LN layers with BigBird's attention (``self_attn.self``'s query, key and
    value, ``self_attn.output``; biases where ``use_bias`` says), learned positions from row 0, its LayerNorm after
    the last layer named ``layernorm_embedding``. Read, as BigBird is (:mod:`.big_bird`), as the full attention
    transformers runs on sequences of at most ``(5 + 2 num_random_blocks) block_size`` tokens; its data runs switch
    the encoder to it and run no longer sequence."""

    name = "bigbird_pegasus_encoder"
    about = ("the encoder of BigBird-Pegasus: pre-LN, read and run as the full attention transformers runs on "
             "sequences of at most (5 + 2 num_random_blocks) block_size tokens")
    model_types = ("bigbird_pegasus",)
    architectures = ("BigBirdPegasusModel", "BigBirdPegasusForConditionalGeneration",
                     "BigBirdPegasusForSequenceClassification", "BigBirdPegasusForQuestionAnswering")
    handled = BartEncoder.handled | {"attention_type", "block_size", "num_random_blocks", "use_bias"}
    accept = {**BartEncoder.accept, "attention_type": lambda v: v in (None, "block_sparse", "original_full")}
    post_ln = False
    embedding_norm = False
    position_offset = 0
    projections = ("self_attn.self.query", "self_attn.self.key", "self_attn.self.value", "self_attn.output")
    final_norm_at = "layernorm_embedding"

    @classmethod
    def has_biases(cls, config: dict) -> bool:
        return bool(config.get("use_bias", False))  # (transformers' default: none)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        return BigBird.sparse_limit(config, where)

    @classmethod
    def prepare(cls, model) -> None:
        """The encoder switched to full attention (transformers replaces each layer's ``self_attn.self`` as it
        switches)."""
        switch_to_full_attention(cls.base_model(model))

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        return BigBird.windows(config, where, n_layers)


@register
class ProphetNetEncoder(BartEncoder):
    """ProphetNet's encoder: BART's post-LN layers under its own names (``self_attn``'s ``query_proj``, ``key_proj``,
    ``value_proj``, ``out_proj``; ``feed_forward_layer_norm`` after the MLP; ``embeddings_layer_norm`` on the
    embeddings), learned positions numbered from ``pad_token_id + 1`` (a pad token takes none), no embedding scale. Its
    decoder, which predicts several future tokens in streams of its own, is not read."""

    name = "prophetnet_encoder"
    about = "the encoder of ProphetNet: BART's post-LN layers under its own names, learned positions from row pad + 1"
    model_types = ("prophetnet",)
    architectures = ("ProphetNetModel", "ProphetNetForConditionalGeneration", "ProphetNetEncoder")
    handled = frozenset("hidden_size num_encoder_attention_heads num_encoder_layers max_position_embeddings "
                        "pad_token_id".split())
    # the decoder's settings (its n-gram streams and their relative buckets, its cross-attention) and the loss's
    ignored = _IGNORED | frozenset("num_decoder_layers num_decoder_attention_heads ngram num_buckets relative_max_distance "
                                   "disable_ngram_loss eps add_cross_attention".split())
    accept = {"is_decoder": lambda v: not v}
    hf_base = "prophetnet"
    projections = ("self_attn.query_proj", "self_attn.key_proj", "self_attn.value_proj", "self_attn.out_proj")
    embedding_norm_at = "embeddings_layer_norm"
    mlp_norm_at = "feed_forward_layer_norm"
    tokens_at = ("word_embeddings", "word_embeddings")
    size_keys = ("hidden_size", "num_encoder_attention_heads", "num_encoder_layers")

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[torch.Tensor, str | None]:
        """The learned table from row ``pad_token_id + 1``, the first token's (transformers numbers positions from
        there, and clamps them at the table's last row: the data runner runs no longer sequence)."""
        name = e + "position_embeddings.weight"
        table = ts.take(name)
        start = integer(config, where, "pad_token_id", default=0, low=0, high=MAX_WIDTH) + 1
        if table.ndim != 2 or table.shape[1] != d or table.shape[0] <= start:
            raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}: expected "
                            f"(positions > {start}, {d})")
        return table[start:].T.contiguous(), f"learned positions, position p at the table's row p + {start} (pad_token_id + 1)"
