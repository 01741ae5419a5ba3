"""BERT encoders with rotary positions, as transformers 5 builds them: jina-embeddings-v3
(``jina_embeddings_v3``), Nomic's nomic-embed-text (``nomic_bert``) and Alibaba's GTE
(``gte``).

Post-LN, as BERT: the embeddings (each token's word embedding plus the row of token type 0) are
normed by ``embeddings.LayerNorm``, each layer's attention reads the residual and adds to it, and
the sum is normed by ``post_attention_layernorm``, the MLP's by ``post_mlp_layernorm``, whose output
the next layer reads (``norm_placement='post'``). No position table: queries and keys turn by the
rotary map on all of each head (rotate-half) at the config's base. Jina's and GTE's projections
have biases, Nomic's none. The masked-LM heads are no linear unembedding (``W_U`` is None).

transformers' loaded models name the tensors ``layers.{i}.self_attn.{q,k,v,o}_proj``; the released
files (and what transformers saves) keep their own: one fused ``Wqkv`` (rows ``[q | k | v]``) in
``encoder.layers.{i}.mixer`` (Jina) or ``.attn`` (Nomic), ``out_proj``, ``norm1``, ``norm2`` and
``emb_ln``; GTE's ``encoder.layer.{i}.attention.qkv_proj``, ``o_proj``, ``attn_ln``, ``mlp_ln``.
Either is read. (jina-embeddings-v3's task LoRA adapters are not part of the model transformers
builds, nor of what is read.)
"""

from __future__ import annotations

from typing import ClassVar

import torch

from ...core.heads import HeadWeights, Meta, Norm, Rotary
from ...errors import UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import Family, integer, inv_freq, number, rope_accept, rope_settings, sizes, split_cols, split_rows, stack

#: the in-memory names (transformers' loaded model): the layer, its q/k/v projections, output, the norms after
#: the attention and the MLP, the embeddings' norm
MODEL_NAMES = dict(layer="layers.{i}.", qkv=None, q="self_attn.q_proj", k="self_attn.k_proj", v="self_attn.v_proj",
                   o="self_attn.o_proj", post_attn="post_attention_layernorm", post_mlp="post_mlp_layernorm",
                   emb_ln="embeddings.LayerNorm")


@register
class JinaEmbeddingsV3(Family):
    name = "jina_embeddings_v3"
    about = "jina-embeddings-v3: XLM-RoBERTa's post-LN layers with rotary positions"
    model_types = ("jina_embeddings_v3",)
    architectures = ("JinaEmbeddingsV3Model", "JinaEmbeddingsV3ForMaskedLM", "XLMRobertaLoRA")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps type_vocab_size head_dim "
                        "rope_theta".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": lambda v: v is None,
              "add_cross_attention": lambda v: not v, "is_decoder": lambda v: not v,
              "position_embedding_type": lambda v: v in (None, "rotary")}
    hf_base = "roberta"
    default_theta: ClassVar[float] = 20_000.0
    #: the released files' names (what transformers saves)
    FILE_NAMES: ClassVar[dict] = dict(layer="encoder.layers.{i}.", qkv="mixer.Wqkv", o="mixer.out_proj",
                                      post_attn="norm1", post_mlp="norm2", emb_ln="emb_ln")
    #: prefixes the released files use beside ``""`` and ``hf_base + "."`` (GTE's ``new.``)
    EXTRA_PREFIXES: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def hook_points(cls, model):
        """Post-LN: ``self_attn`` reads the residual (the previous norm's output), ``self_attn.o_proj``
        returns what is added (before the residual and ``post_attention_layernorm``)."""
        return [(b.self_attn, b.self_attn.o_proj) for b in cls.base_model(model).layers]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``post_attention_layernorm``, ``LN(m + MLP(m))`` ``post_mlp_layernorm``."""
        return [(b.post_attention_layernorm, b.post_mlp_layernorm) for b in cls.base_model(model).layers]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        r = integer(cfg, where, "head_dim", default=r)
        if H * r != d:
            raise UnsupportedModelError(f"{where}: head_dim {r} times {H} heads is not hidden_size {d}")
        eps = number(cfg, where, "layer_norm_eps", default=1e-12)
        prefixes = ("", f"{cls.hf_base}.", *cls.EXTRA_PREFIXES)
        prefix = next((p for p in prefixes if f"{p}embeddings.word_embeddings.weight" in ts), None)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like 'embeddings.word_embeddings.weight' (tried "
                                        f"prefixes {prefixes})")
        names = cls.FILE_NAMES if f"{prefix}{cls.FILE_NAMES['layer'].format(i=0)}{cls.FILE_NAMES['o']}.weight" in ts \
            else MODEL_NAMES
        wq, wk, wv, bq, bk, bv, wo, bo = ([] for _ in range(8))
        for i in range(L):
            p = prefix + names["layer"].format(i=i)
            if names.get("qkv"):  # one fused projection, rows [q | k | v]
                w = ts.take(f"{p}{names['qkv']}.weight", (3 * H * r, d))
                b = ts.take(f"{p}{names['qkv']}.bias", (3 * H * r,), required=False)
                parts = w.split(H * r)
                biases = (None,) * 3 if b is None else b.split(H * r)
            else:
                parts = [ts.take(f"{p}{names[x]}.weight", (H * r, d)) for x in "qkv"]
                biases = [ts.take(f"{p}{names[x]}.bias", (H * r,), required=False) for x in "qkv"]
            for out, part in zip((wq, wk, wv), parts):
                out.append(split_rows(part, H, r))
            for out, part in zip((bq, bk, bv), biases):
                out.append(None if part is None else part.reshape(H, r))
            wo.append(split_cols(ts.take(f"{p}{names['o']}.weight", (d, H * r)), H, r))
            bo.append(ts.take(f"{p}{names['o']}.bias", (d,), required=False))
        lns = [f"{prefix}{names['emb_ln']}"] + [f"{prefix}{names['layer'].format(i=i)}{names['post_mlp']}"
                                                 for i in range(L - 1)]
        gains = torch.stack([ts.take(f"{n}.weight", (d,)) for n in lns])
        shifts = torch.stack([ts.take(f"{n}.bias", (d,)) for n in lns])
        e = f"{prefix}embeddings."
        wte = ts.take(e + "word_embeddings.weight")
        if wte.ndim != 2 or wte.shape[1] != d:
            raise UnsupportedModelError(f"{where}: tensor '{e}word_embeddings.weight' has shape {tuple(wte.shape)}")
        types = ts.take(e + "token_type_embeddings.weight", required=False)
        settings = rope_settings(cfg)
        freqs = inv_freq(r, settings, where, cls.default_theta)
        notes = list(ckpt.notes) + [
            "post-LN: the residual is renormalised after every sublayer; attention reads it directly",
            "encoder: bidirectional attention, no unembedding (W_U is None)",
            f"rotary positions on every head dimension (base {float(settings.get('rope_theta', cls.default_theta)):g}), "
            "no position table",
        ]
        return HeadWeights(
            W_Q=torch.stack(wq), W_K=torch.stack(wk), W_V=torch.stack(wv), W_O=torch.stack(wo),
            b_Q=stack(bq), b_K=stack(bk), b_V=stack(bv), b_O=stack(bo),
            W_E=wte.T, W_pos=None, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", gains, shifts, eps), final_norm=None, norm_placement="post",
            rotary=Rotary(r, freqs[None].expand(L, -1).clone()),
            positions="rotary",
            causal=False,
            sliding_window=(None,) * L,
            embed_extra={} if types is None else {"W_type": types.T},
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class NomicBert(JinaEmbeddingsV3):
    """nomic-embed-text (v1, v1.5): jina-embeddings-v3's layers without biases, a rotary base of 1000
    by default; its files' fused ``attn.Wqkv``."""

    name = "nomic_bert"
    about = "nomic-embed-text: BERT's post-LN layers with rotary positions, no biases"
    model_types = ("nomic_bert",)
    architectures = ("NomicBertModel", "NomicBertForMaskedLM")
    hf_base = "nomic_bert"
    default_theta = 1000.0
    FILE_NAMES = dict(JinaEmbeddingsV3.FILE_NAMES, qkv="attn.Wqkv", o="attn.out_proj")

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # (transformers builds every projection without one)


@register
class Gte(JinaEmbeddingsV3):
    """GTE (Alibaba: gte-multilingual-base, gte-v1.5): jina-embeddings-v3's layers, a rotary base of
    160,000 by default, token types only where ``type_vocab_size`` is above 0; its files' names under
    ``new.`` (the released ones) or ``gte.``."""

    name = "gte"
    about = "GTE (Alibaba): BERT's post-LN layers with rotary positions"
    model_types = ("gte",)
    architectures = ("GteModel", "GteForMaskedLM")
    hf_base = "gte"
    default_theta = 160_000.0
    FILE_NAMES = dict(layer="encoder.layer.{i}.", qkv="attention.qkv_proj", o="attention.o_proj", post_attn="attn_ln",
                      post_mlp="mlp_ln", emb_ln="embeddings.LayerNorm")
    EXTRA_PREFIXES = ("new.",)
