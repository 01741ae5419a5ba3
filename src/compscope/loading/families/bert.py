"""BERT encoders (BERT, all-MiniLM, TAPAS, VisualBERT; RoBERTa, XLM-RoBERTa, CamemBERT, data2vec-text, I-BERT, LUKE,
Longformer; ELECTRA; DistilBERT; RoFormer, rotary): post-LayerNorm, bidirectional, learned positions; and
XLM-RoBERTa-XL, RoBERTa's embeddings before pre-LN layers (:class:`XlmRobertaXl`), and Megatron-BERT, BERT's
before them.

Post-LN: each sublayer's output is added to the residual and the *sum* is normalised,
``h' = LN(h + Attn(h))``. Attention at layer ``l`` therefore reads the residual directly; the
norm that produced it (``attn_norm``) is the embeddings LayerNorm for layer 0 and the previous
layer's output LayerNorm after that. The residual stream itself is renormalised after every
sublayer, so what a head writes reaches later heads only through that rescaling: recorded as
``norm_placement='post'``, and folding gains is refused (it would not preserve the model).
There is no unembedding in a plain encoder (``W_U = None``).

RoBERTa and its kin number positions from ``pad_token_id + 1`` (a pad token takes position
``pad_token_id`` and does not advance the count), so the table's first ``pad_token_id + 1`` rows are
never read by a sequence without padding: ``W_pos`` starts at row ``pad_token_id + 1``. ELECTRA is
BERT's layout under another name; its small models project smaller embeddings up to the residual
after the embeddings LayerNorm (``embedding_size < hidden_size``), which no ``W_E`` and norm express:
refused by name.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, Rotary, alibi_slopes
from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import MAX_WIDTH, Family, integer, inv_freq, number, sizes, split_cols, split_rows, stack


def embeddings_as_wide(config: dict, where: str, why: str = "") -> None:
    """Refuse, naming the key, a config whose ``embedding_size`` (where given) is not ``hidden_size``: embeddings
    narrower than the residual, which the model projects up to it (``why``: how, appended to the message)."""
    d = integer(config, where, "hidden_size")
    if config.get("embedding_size") is not None and integer(config, where, "embedding_size") != d:
        raise UnsupportedModelError(f"{where}: config key 'embedding_size' = {config['embedding_size']!r} differs from "
                                    f"hidden_size = {d}{why}")


@register
class Bert(Family):
    name = "bert"
    about = "BERT, all-MiniLM and other BERT encoders: post-LN, bidirectional, learned positions"
    model_types = ("bert",)
    architectures = ("BertModel", "BertForMaskedLM")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps type_vocab_size".split())
    accept = {
        "position_embedding_type": lambda v: v in (None, "absolute"),
        "add_cross_attention": lambda v: not v,
        "is_decoder": lambda v: not v,
    }

    hf_base = "bert"
    #: whether each token attends to those before it alone (GIT's text decoder), not to every token
    causal: ClassVar[bool] = False
    #: where else the encoder's tensors may sit (besides ``{hf_base}.``, a dual encoder's ``text_model.``
    #: and Grounding DINO's ``model.text_backbone.``)
    more_prefixes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def first_position(cls, config: dict, where: str) -> int:
        """The row of the position table that the first token of an unpadded sequence reads."""
        return 0

    @classmethod
    def hook_points(cls, model):
        """BERT layers (post-LN): ``attention.self`` reads the residual (the previous LayerNorm's
        output), ``attention.output.dense`` returns what is added (before dropout, residual, LN)."""
        return [(b.attention.self, b.attention.output.dense) for b in cls.blocks(model)]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``attention.output.LayerNorm``, ``LN(m + MLP(m))`` is ``output.LayerNorm``."""
        return [(b.attention.output.LayerNorm, b.output.LayerNorm) for b in cls.blocks(model)]

    @classmethod
    def blocks(cls, model):
        """The running model's layers, at :attr:`layers_at` in its base model."""
        return functools.reduce(getattr, cls.layers_at.split("."), cls.base_model(model))

    #: where a layer's tensors live, under ``{prefix}``: its blocks, the q/k/v and output projections,
    #: and the LayerNorm after its MLP (the one whose output the next layer reads)
    layers_at: ClassVar[str] = "encoder.layer"
    projections: ClassVar[tuple[str, str, str, str]] = (
        "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense")
    output_norm: ClassVar[str] = "output.LayerNorm"

    @classmethod
    def weight(cls, ts, name: str, d: int) -> torch.Tensor:
        """The ``(d, d)`` matrix of the linear map ``name`` (its ``.weight``)."""
        return ts.take(name + ".weight", (d, d))

    @classmethod
    def layer_projections(cls, ts, p: str, d: int, H: int, r: int) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The query, key and value weights ``(H, r, d)`` and biases ``(H, r)`` of the layer whose tensors
        start ``p``: :attr:`projections`' first three, each with its bias."""
        return [(split_rows(cls.weight(ts, p + name, d), H, r),
                 ts.take(p + name + ".bias", (d,)).reshape(H, r)) for name in cls.projections[:3]]

    @classmethod
    def sizes_and_eps(cls, config: dict, where: str) -> tuple[int, int, int, int, float]:
        """``(d_model, n_heads, n_layers, d_head, LayerNorm eps)`` from the config."""
        return (*sizes(config, where), number(config, where, "layer_norm_eps", default=1e-12))

    @classmethod
    def read_norms(cls, ts, prefix: str, L: int, d: int, eps: float) -> tuple[dict, list[str]]:
        """The ``HeadWeights`` fields of the norms (``attn_norm``, ``final_norm``, ``norm_placement``),
        and what the notes say of them. Post-LN: the norm each layer's residual comes out of, the
        embeddings LayerNorm for layer 0 and the previous layer's output LayerNorm after it."""
        ln = [(f"{prefix}embeddings.LayerNorm", (d,))] + [
            (f"{prefix}{cls.layers_at}.{i}.{cls.output_norm}", (d,)) for i in range(L - 1)]
        w, b = ([ts.take(f"{name}.{part}", shape) for name, shape in ln] for part in ("weight", "bias"))
        return (dict(attn_norm=Norm("layernorm", torch.stack(w), torch.stack(b), eps), final_norm=None,
                     norm_placement="post"),
                ["post-LN: the residual is renormalised after every sublayer; attention reads it directly"])

    @classmethod
    def token_embeddings(cls, config: dict, where: str, wte: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        """``W_E`` ``(d_model, vocab)`` from the word embeddings ``(vocab, d_model)`` as stored, and its notes."""
        return wte.T, []

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        """The ``HeadWeights`` fields of the positions and their notes: the learned table from
        :meth:`first_position`'s row on (``e``: the embeddings' tensor prefix)."""
        start = cls.first_position(config, where)
        wpe = ts.take(e + "position_embeddings.weight")
        if wpe.ndim != 2 or wpe.shape[0] <= start:
            raise LoadError(f"{where}: tensor '{e}position_embeddings.weight' has shape {tuple(wpe.shape)}: expected "
                            f"(positions > {start}, d_model)")
        return dict(W_pos=wpe[start:].T, positions="learned"), [cls.first_position_note(start)] if start else []

    @classmethod
    def unembedding(cls, ckpt: Checkpoint, W_E: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None,
                                                                         list[str]]:
        """``(W_U, b_U, notes)``: an encoder has no unembedding (its heads' outputs feed a classifier or the
        embedding of a text)."""
        return None, None, ["encoder: bidirectional attention, no unembedding (W_U is None)"]

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        """Each layer's window (``HeadWeights.sliding_window``; None: every token attends to every token), and
        what the notes say of them."""
        return (None,) * n_layers, []

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        """``embed_extra``'s tables ``(d_model, rows)`` (each token adds one of their columns: the token types,
        ERNIE's task types; ``e``: the embeddings' tensor prefix) and what the notes say of them."""
        return {key: t.T for key, name in (("W_type", "token_type_embeddings"), ("W_task", "task_type_embeddings"))
                if (t := ts.take(f"{e}{name}.weight", required=False)) is not None}, []

    @classmethod
    def first_position_note(cls, start: int) -> str:
        """What the notes say of positions numbered from row ``start`` > 0 (:meth:`first_position`)."""
        return f"positions numbered from pad_token_id + 1 = {start}: W_pos is the position table from row {start} on"

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r, eps = cls.sizes_and_eps(cfg, where)
        prefix = next((p for p in (cls.hf_base + ".", "text_model.", "model.text_backbone.", *cls.more_prefixes)
                       if f"{p}embeddings.word_embeddings.weight" in ts), "")  # (a dual encoder's text encoder:
        # text_model; Grounding DINO's: model.text_backbone)
        e = prefix + "embeddings."
        norms, norm_notes = cls.read_norms(ts, prefix, L, d, eps)
        ws, bs = ([[] for _ in range(3)] for _ in range(2))
        wo, bo = [], []
        for i in range(L):
            p = f"{prefix}{cls.layers_at}.{i}."
            for j, (w, b) in enumerate(cls.layer_projections(ts, p, d, H, r)):
                ws[j].append(w)
                bs[j].append(b)
            wo.append(split_cols(cls.weight(ts, p + cls.projections[3], d), H, r))
            bo.append(ts.take(p + cls.projections[3] + ".bias", (d,)))
        W_E, token_notes = cls.token_embeddings(cfg, where, ts.take(e + "word_embeddings.weight"))
        positions, position_notes = cls.positional(cfg, where, ts, e, r, L)
        extra, extra_notes = cls.embedding_extras(cfg, where, ts, e, d)
        W_U, b_U, head_notes = cls.unembedding(ckpt, W_E)
        windows, window_notes = cls.windows(cfg, where, L)
        notes = (list(ckpt.notes) + norm_notes + head_notes + window_notes + token_notes + position_notes
                 + extra_notes)
        return HeadWeights(
            W_Q=torch.stack(ws[0]), W_K=torch.stack(ws[1]), W_V=torch.stack(ws[2]), W_O=torch.stack(wo),
            b_Q=stack(bs[0]), b_K=stack(bs[1]), b_V=stack(bs[2]),
            b_O=torch.stack(bo),
            W_E=W_E, W_U=W_U, b_U=b_U,
            kv_map=tuple(range(H)),
            **norms,
            **positions,
            causal=cls.causal,
            sliding_window=windows,
            embed_extra=extra,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class Roberta(Bert):
    """RoBERTa and the encoders built as it is (XLM-RoBERTa, CamemBERT): BERT's layers, positions
    numbered from ``pad_token_id + 1``."""

    name = "roberta"
    about = "RoBERTa, XLM-RoBERTa, CamemBERT: BERT's layers, positions numbered from pad_token_id + 1"
    model_types = ("roberta", "xlm-roberta", "camembert")
    architectures = ("RobertaModel", "RobertaForMaskedLM", "XLMRobertaModel", "XLMRobertaForMaskedLM",
                     "CamembertModel", "CamembertForMaskedLM")
    hf_base = "roberta"

    @classmethod
    def first_position(cls, config: dict, where: str) -> int:
        # (absent: transformers' default for each of these model types, 1)
        return integer(config, where, "pad_token_id", default=1, low=0, high=MAX_WIDTH) + 1


@register
class IBert(Roberta):
    """I-BERT (integer-only RoBERTa): RoBERTa's layers whose linear maps, LayerNorms, softmax and GELU
    are integer approximations when ``quant_mode`` is on; off (the released models' setting), each
    computes the float map RoBERTa's does, which is what compscope reads. ``quant_mode`` on is refused:
    its requantised activations and polynomial softmax are no bilinear form of ``W_Q`` and ``W_K``."""

    name = "ibert"
    about = "I-BERT with quant_mode off, as released: RoBERTa's float layers"
    model_types = ("ibert",)
    architectures = ("IBertModel", "IBertForMaskedLM", "IBertForSequenceClassification")
    ignored = frozenset({"force_dequant"})  # (which integer approximations quant_mode uses: none without it)
    accept = {**Roberta.accept, "quant_mode": lambda v: not v}
    hf_base = "ibert"


@register
class XlmRobertaXl(Roberta):
    """XLM-RoBERTa-XL and -XXL: RoBERTa's embeddings (positions from ``pad_token_id + 1``) without a
    LayerNorm, pre-LN layers (``attention.self_attn_layer_norm`` before the attention, whose output
    projection adds to the residual) and one LayerNorm after the last layer."""

    name = "xlm_roberta_xl"
    about = "XLM-RoBERTa-XL and -XXL: RoBERTa's positions, pre-LN layers"
    model_types = ("xlm-roberta-xl",)
    architectures = ("XLMRobertaXLModel", "XLMRobertaXLForMaskedLM")

    #: the LayerNorm before each layer's attention (in the layer) and the one after the last layer (in the base model)
    pre_norm: ClassVar[str] = "attention.self_attn_layer_norm"
    last_norm: ClassVar[str] = "encoder.LayerNorm"

    @classmethod
    def hook_points(cls, model):
        """``attention.self_attn_layer_norm`` reads the residual, ``attention.output.dense`` returns
        what is added (before dropout and the residual)."""
        return [(functools.reduce(getattr, cls.pre_norm.split("."), b), b.attention.output.dense)
                for b in cls.blocks(model)]

    @classmethod
    def post_norm_points(cls, model):
        return None

    @classmethod
    def read_norms(cls, ts, prefix: str, L: int, d: int, eps: float) -> tuple[dict, list[str]]:
        """Pre-LN: each layer's ``attention.self_attn_layer_norm``, and the encoder's LayerNorm at the end."""
        at = [f"{prefix}{cls.layers_at}.{i}.{cls.pre_norm}" for i in range(L)]
        w, b = ([ts.take(f"{name}.{part}", (d,)) for name in at] for part in ("weight", "bias"))
        final = [ts.take(f"{prefix}{cls.last_norm}.{part}", (d,)) for part in ("weight", "bias")]
        return (dict(attn_norm=Norm("layernorm", torch.stack(w), torch.stack(b), eps),
                     final_norm=Norm("layernorm", final[0][None], final[1][None], eps), norm_placement="pre"),
                ["pre-LN encoder: each layer's heads read a LayerNorm of the residual, to which they add"])


@register
class MegatronBert(XlmRobertaXl):
    """Megatron-BERT (NVIDIA): BERT's embeddings without their LayerNorm (positions from 0, token
    types), pre-LN layers (``attention.ln`` before the attention) and a LayerNorm after the last
    (``encoder.ln``): XLM-RoBERTa-XL's layout under its own names."""

    name = "megatron_bert"
    about = "Megatron-BERT: BERT's embeddings without a LayerNorm, pre-LN layers"
    model_types = ("megatron-bert",)
    architectures = ("MegatronBertModel", "MegatronBertForMaskedLM", "MegatronBertForPreTraining")
    hf_base = "bert"
    pre_norm = "attention.ln"
    last_norm = "encoder.ln"

    @classmethod
    def first_position(cls, config: dict, where: str) -> int:
        return 0


@register
class Ernie(Bert):
    """ERNIE 1.0 to 3.0 (Baidu): BERT's layout under ``ernie.``, and where ``use_task_id`` is on a
    table of task types beside the token types, whose row 0 (the default task) every token adds
    (``embed_extra['W_task']``)."""

    name = "ernie"
    about = "ERNIE 1.0-3.0: BERT's layout, task-type embeddings"
    model_types = ("ernie",)
    architectures = ("ErnieModel", "ErnieForMaskedLM", "ErnieForPreTraining")
    handled = Bert.handled | {"use_task_id", "task_type_vocab_size"}
    hf_base = "ernie"


@register
class BertGeneration(Bert):
    """BertGeneration's encoder: BERT's post-LN layers and embeddings without token types (its
    decoder, ``is_decoder``, attends causally and is refused by Bert's ``accept``)."""

    name = "bert_generation"
    about = "BertGeneration's encoder: BERT's layers, no token types"
    model_types = ("bert-generation",)
    architectures = ("BertGenerationEncoder",)


@register
class Splinter(Bert):
    """Splinter (few-shot question answering): BERT's encoder under ``splinter.``; its question-token
    heads sit on top and are not read."""

    name = "splinter"
    about = "Splinter: BERT's encoder under its own name"
    model_types = ("splinter",)
    architectures = ("SplinterModel", "SplinterForQuestionAnswering", "SplinterForPreTraining")
    ignored = frozenset({"question_token_id"})  # (which token the span heads look for)
    hf_base = "splinter"


@register
class Dpr(Bert):
    """DPR (dense passage retrieval): a BERT encoder as its context encoder (``ctx_encoder.bert_model.``), its
    question encoder (``question_encoder.bert_model.``) or its reader's (``span_predictor.encoder.bert_model.``);
    the embedding of a text is the encoder's state at its first token (times a projection where
    ``projection_dim`` is set), no unembedding. Run as the class the folder's config names."""

    name = "dpr"
    about = "DPR's context and question encoders and reader: BERT encoders under their own prefixes"
    model_types = ("dpr",)
    architectures = ("DPRContextEncoder", "DPRQuestionEncoder", "DPRReader")
    ignored = frozenset({"projection_dim"})  # (a projection of the pooled state, after the encoder)
    more_prefixes = ("ctx_encoder.bert_model.", "question_encoder.bert_model.", "span_predictor.encoder.bert_model.")
    runs_as_named = True

    @classmethod
    def base_model(cls, model):
        """The BERT inside a DPR model: ``ctx_encoder.bert_model``, ``question_encoder.bert_model`` or
        ``span_predictor.encoder.bert_model``; else ``model`` (a BERT)."""
        for path in ("ctx_encoder", "question_encoder", "span_predictor.encoder"):
            inner = model
            for part in path.split("."):
                inner = getattr(inner, part, None)
            if inner is not None:
                return getattr(inner, "bert_model", inner)
        return model


class _TextTower:
    """What the text towers of dual encoders share: the text embedding a projection of one state (no
    unembedding), named a text encoder by ``compscope models``; run as the class the config names, as
    transformers' auto classes build none of these text models alone."""

    part: ClassVar[str] = "text encoder"
    runs_as_named: ClassVar[bool] = True
    ignored: ClassVar[frozenset[str]] = frozenset({"initializer_factor"})


@register
class BertTextTower(_TextTower, Bert):
    """The text towers of ALIGN and Chinese-CLIP: BERT encoders whose text embedding is a projection
    of one state (no unembedding), read from the text model or, under ``text_model.``, from the whole
    dual encoder (its vision tower not). transformers' auto classes build neither text model alone: run
    as the class its config names (the text model, or the dual encoder, on text alone)."""

    name = "bert_text_tower"
    about = "the text towers of ALIGN and Chinese-CLIP: BERT encoders (the text embedding a projection of one state)"
    model_types = ("align_text_model", "chinese_clip_text_model")
    architectures = ("AlignTextModel", "ChineseCLIPTextModel")


@register
class ClapText(_TextTower, Roberta):
    """CLAP's text tower: RoBERTa's layers and positions (numbered from ``pad_token_id + 1``), the text
    embedding a projection of one state (no unembedding); read and run as :class:`BertTextTower`."""

    name = "clap_text"
    about = "CLAP's text tower: RoBERTa's layers and positions (the text embedding a projection of one state)"
    model_types = ("clap_text_model",)
    architectures = ("ClapTextModel",)
    ignored = _TextTower.ignored | {"projection_dim", "projection_hidden_act"}


@register
class BridgeTowerText(_TextTower, Roberta):
    """BridgeTower's text encoder: RoBERTa's layers and positions, read and run as :class:`BertTextTower`; in the
    whole model its states also feed cross-modal layers beside the image's, which are not read."""

    name = "bridgetower_text"
    about = ("BridgeTower's text encoder: RoBERTa's layers and positions (its cross-modal layers, reading the image "
             "too, not read)")
    model_types = ("bridgetower_text_model",)
    architectures = ("BridgeTowerTextModel",)
    hf_base = "bridgetower"  # (its head models' base: the whole model, holding the text model)
    more_prefixes = ("bridgetower.text_model.",)  # (a head model's: the masked LM, the retrieval model)


@register
class AltClipText(_TextTower, Roberta):
    """AltCLIP's text tower: XLM-RoBERTa's layers under ``roberta.`` (``encoder.layer`` in its files and in
    transformers 4's model, ``encoder.layers`` in transformers 5's), the text embedding a projection of one
    state (no unembedding); read and run as :class:`BertTextTower`."""

    name = "altclip_text"
    about = "AltCLIP's text tower: XLM-RoBERTa's layers and positions (the text embedding a projection of one state)"
    model_types = ("altclip_text_model",)
    architectures = ("AltCLIPTextModel",)
    ignored = _TextTower.ignored | {"project_dim"}
    more_prefixes = ("text_model.roberta.",)  # (in the whole AltCLIPModel)
    saved_names = ((r"\.encoder\.layers\.(\d+)\.", r".encoder.layer.\1."),)  # (transformers 5's model: its files')

    @classmethod
    def blocks(cls, model):
        encoder = cls.base_model(model).encoder
        return getattr(encoder, "layers", None) or encoder.layer


@register
class Data2VecText(Roberta):
    """data2vec-text: RoBERTa's layout under another prefix."""

    name = "data2vec_text"
    about = "data2vec-text: RoBERTa's layout"
    model_types = ("data2vec-text",)
    architectures = ("Data2VecTextModel", "Data2VecTextForMaskedLM")
    hf_base = "data2vec_text"


@register
class Luke(Roberta):
    """LUKE and mLUKE: RoBERTa's layout under ``luke.``, beside an entity stream this reads nothing of.
    Entities are extra inputs (``entity_ids``), embedded by their own tables and, with
    ``use_entity_aware_attention``, queried by their own maps (``w2e_query``, ``e2w_query``,
    ``e2e_query``): on words alone, as compscope runs it, none of them acts and each head is RoBERTa's."""

    name = "luke"
    about = "LUKE and mLUKE on words alone: RoBERTa's layout (the entity inputs and their queries not read)"
    model_types = ("luke",)
    architectures = ("LukeModel", "LukeForMaskedLM")
    # (the entity stream's vocabulary, width and queries: used only where entities are passed)
    ignored = frozenset("entity_vocab_size entity_emb_size use_entity_aware_attention".split())
    hf_base = "luke"

    @classmethod
    def token_embeddings(cls, config: dict, where: str, wte: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        return wte.T, ["words alone: the entity embeddings and the entity-aware queries (w2e, e2w, e2e) act only on "
                       "entity inputs, and are not read"]


@register
class Longformer(Roberta):
    """Longformer: RoBERTa's layout under ``longformer.``, each layer attending within a window both ways, the
    ``attention_window[l] / 2`` tokens on either side (held as the window ``w/2 + 1``, ``|i − j| < w``). Tokens
    marked for global attention (``global_attention_mask``) use their own projections (``query_global``,
    ``key_global``, ``value_global``): compscope reads and runs every token as local, as the base model and the
    masked LM do by default (its classifiers mark the first token global themselves). transformers pads each
    sequence to a multiple of the widest window with masked pad tokens, which the data runner cuts off."""

    name = "longformer"
    about = ("Longformer: RoBERTa's layers, each attending within a window both ways (global attention's "
             "projections not read)")
    model_types = ("longformer",)
    architectures = ("LongformerModel", "LongformerForMaskedLM", "LongformerForSequenceClassification",
                     "LongformerForTokenClassification", "LongformerForQuestionAnswering",
                     "LongformerForMultipleChoice")
    handled = Roberta.handled | {"attention_window"}
    ignored = frozenset({"onnx_export"})  # (how the sliding product is computed, not what)
    hf_base = "longformer"
    pads_sequences = True

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        return longformer_windows(config, where, n_layers)


def longformer_windows(config: dict, where: str, n_layers: int) -> tuple[tuple[int, ...], list[str]]:
    """Longformer's (and LED's encoder's) window of each layer, ``attention_window / 2`` tokens each side held as
    ``w / 2 + 1`` (one number for all, or one per layer; odd or miscounted ones refused by name), and the notes."""
    w = config.get("attention_window", 512)  # (transformers' default)
    ws = [w] * n_layers if isinstance(w, int) and not isinstance(w, bool) else w
    if (not isinstance(ws, list) or len(ws) != n_layers
            or any(isinstance(x, bool) or not isinstance(x, int) or x < 2 or x % 2 for x in ws)):
        raise LoadError(f"{where}: 'attention_window' = {w!r}: expected an even number >= 2, or a list of one per "
                        f"layer ({n_layers})")
    return tuple(x // 2 + 1 for x in ws), [
        "local attention only: every token attends within its layer's window (attention_window / 2 tokens each "
        "side); global attention's own projections (query_global, key_global, value_global) act only on tokens "
        "marked global, and are not read"]


@register
class VisualBert(Bert):
    """VisualBERT on words alone: BERT's layout under ``visual_bert.`` (positions from 0, token types). Visual
    features, where given, are projected and appended with tables of their own (``visual_*``); run without them, as
    compscope runs it, the sequence is text alone and those are not read."""

    name = "visual_bert"
    about = "VisualBERT on words alone: BERT's layout (the visual features' projection and tables not read)"
    model_types = ("visual_bert",)
    architectures = ("VisualBertModel", "VisualBertForPreTraining", "VisualBertForQuestionAnswering",
                     "VisualBertForVisualReasoning", "VisualBertForMultipleChoice", "VisualBertForRegionToPhraseAlignment")
    # (the visual features' width and how their tables start; with bypass_transformer, visual tokens skip the
    # layers: text runs through them either way)
    ignored = frozenset({"visual_embedding_dim", "special_visual_initialize", "bypass_transformer"})
    hf_base = "visual_bert"


@register
class Tapas(Bert):
    """TAPAS (table question answering): BERT's layout under ``tapas.``, and seven tables of token types
    (``token_type_embeddings_0`` .. ``_6``: segment, column, row, previous answer, column rank, inverse column
    rank, numeric relation), one row of each added to every token. On words alone, as compscope runs it
    (transformers' default without ``token_type_ids``), every type is 0: row 0 of each, and every token in one cell,
    so positions count from 0 (``reset_position_index_per_cell`` restarts them only at a new cell). The segment
    table is ``embed_extra['W_type']``, the others under their names; the heads are BERT's whatever the types."""

    name = "tapas"
    about = "TAPAS on words alone: BERT's layout, seven token-type tables (every type 0)"
    model_types = ("tapas",)
    architectures = ("TapasModel", "TapasForMaskedLM", "TapasForQuestionAnswering", "TapasForSequenceClassification")
    handled = Bert.handled | {"type_vocab_sizes", "reset_position_index_per_cell"}
    ignored = frozenset(  # (the question-answering heads' and their losses' settings, and the tables' sizes)
        "positive_label_weight num_aggregation_labels aggregation_loss_weight use_answer_as_supervision "
        "answer_loss_importance use_normalized_answer_loss huber_loss_delta aggregation_temperature "
        "use_gumbel_for_cells use_gumbel_for_aggregation average_approximation_function cell_selection_preference "
        "answer_loss_cutoff max_num_rows max_num_columns average_logits_per_cell select_one_column "
        "allow_empty_column_selection init_cell_selection_weights_to_zero disable_per_token_loss aggregation_labels "
        "no_aggregation_label_index".split())
    hf_base = "tapas"
    #: ``embed_extra``'s name for each token-type table, in TAPAS's order
    type_tables: ClassVar[tuple[str, ...]] = ("W_type", "W_column", "W_row", "W_previous_answer", "W_column_rank",
                                               "W_inverse_column_rank", "W_numeric_relation")

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        extra = {}
        for i, key in enumerate(cls.type_tables):
            name = f"{e}token_type_embeddings_{i}.weight"
            t = ts.take(name)
            if t.ndim != 2 or t.shape[1] != d:
                raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(t.shape)}: expected (types, {d})")
            extra[key] = t.T
        if f"{e}token_type_embeddings_{len(cls.type_tables)}.weight" in ts:
            raise UnsupportedModelError(f"{ts.origin(e + 'token_type_embeddings_0.weight')}: more than "
                                        f"{len(cls.type_tables)} token-type tables; TAPAS has seven")
        return extra, ["words alone: every token type 0 (row 0 of each of the seven tables: segment, column, row, "
                       "previous answer, column rank, inverse column rank, numeric relation) and every token in one "
                       "cell, so positions count from 0"]


@register
class Electra(Bert):
    """ELECTRA (discriminators and generators): BERT's layout, positions from 0; the embeddings
    must be as wide as the residual (no ``embeddings_project``)."""

    name = "electra"
    about = "ELECTRA, where the embeddings are as wide as the residual"
    model_types = ("electra",)
    architectures = ("ElectraModel", "ElectraForPreTraining", "ElectraForMaskedLM")
    handled = Bert.handled | {"embedding_size"}
    ignored = frozenset("summary_type summary_use_proj summary_activation summary_last_dropout".split())
    hf_base = "electra"

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        super().check_config(config, where)
        integer(config, where, "embedding_size")  # (absent: transformers' default, 128, whatever the width)
        embeddings_as_wide(config, where, ": the embeddings are projected up to the residual after their LayerNorm "
                                          "(ELECTRA's small models), which compscope does not read")



@register
class DistilBert(Bert):
    """DistilBERT: BERT's post-LN layers under other names (``q_lin``, ``k_lin``, ``v_lin``,
    ``out_lin``; ``sa_layer_norm``, ``output_layer_norm``), no token types, every LayerNorm's eps
    fixed at 1e-12 by the code (no config key). ``sinusoidal_pos_embds`` only chose how the position
    table began: it is read as stored."""

    name = "distilbert"
    about = "DistilBERT: BERT's post-LN layers under its own names"
    model_types = ("distilbert",)
    architectures = ("DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification")
    handled = frozenset("dim n_heads n_layers hidden_dim sinusoidal_pos_embds".split())
    ignored = frozenset("dropout qa_dropout seq_classif_dropout activation tie_weights_".split())
    accept = {}
    hf_base = "distilbert"
    layers_at = "transformer.layer"
    projections = ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin")
    output_norm = "output_layer_norm"

    @classmethod
    def sizes_and_eps(cls, config: dict, where: str) -> tuple[int, int, int, int, float]:
        return (*sizes(config, where, width=("dim",), heads=("n_heads",), layers=("n_layers",)), 1e-12)

    @classmethod
    def hook_points(cls, model):
        """``attention.q_lin`` reads the residual (the previous LayerNorm's output; the attention
        module itself takes it by keyword in transformers 4), ``attention.out_lin`` returns what is
        added (before the residual and ``sa_layer_norm``)."""
        return [(b.attention.q_lin, b.attention.out_lin) for b in cls.base_model(model).transformer.layer]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``sa_layer_norm``, ``LN(m + MLP(m))`` is ``output_layer_norm``."""
        return [(b.sa_layer_norm, b.output_layer_norm) for b in cls.base_model(model).transformer.layer]


@register
class RoFormer(Bert):
    """RoFormer: BERT's post-LN layers with rotary positions in place of a position table. The
    residual starts as the LayerNorm of each token's word embedding plus the row of token type 0;
    queries and keys turn on adjacent pairs ``(2i, 2i + 1)`` at ``10000^(-2i/d_head)`` (the model's
    table of sines, ``max_position_embeddings`` long). Refused: ``rotary_value`` (values turned too,
    so no head's OV map is one matrix), and embeddings narrower than the residual (projected up)."""

    name = "roformer"
    about = "RoFormer: BERT's post-LN layers, rotary positions on adjacent pairs, no position table"
    model_types = ("roformer",)
    architectures = ("RoFormerModel", "RoFormerForMaskedLM", "RoFormerForSequenceClassification",
                     "RoFormerForTokenClassification")
    handled = Bert.handled | {"embedding_size"}
    accept = {**Bert.accept, "rotary_value": lambda v: not v}
    hf_base = "roformer"
    position_table = True  # (its sines are a table of max_position_embeddings rows)

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        super().check_config(config, where)
        embeddings_as_wide(config, where, ": the embeddings are projected up to the residual after their LayerNorm, "
                                          "which compscope does not read")

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        """Rotary on all of each head, on adjacent pairs, base 10000; no position table. The model's
        table of sines (``encoder.embed_positions``, saved with it) must be that sinusoid: ``sin`` of
        ``pos · f_i`` in its first half, ``cos`` in its second, to 1e-5 (it is refused otherwise)."""
        f = inv_freq(d_head, {"rope_theta": 10000.0}, where)
        name = e.removesuffix("embeddings.") + "encoder.embed_positions.weight"
        table = ts.take(name, required=False)
        if table is not None:
            if table.ndim != 2 or table.shape[1] != d_head:
                raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}, expected "
                                f"(positions, {d_head})")
            angles = torch.arange(table.shape[0], dtype=torch.float64)[:, None] * f[None]
            if not torch.allclose(table.double(), torch.cat([angles.sin(), angles.cos()], 1), atol=1e-5, rtol=0):
                raise UnsupportedModelError(f"{ts.origin(name)}: tensor '{name}' is not the table of sines RoFormer "
                                            "builds (sin and cos of position × 10000^(-2i/d_head)), so its heads would "
                                            "not turn as compscope reads them")
        return dict(W_pos=None, rotary=Rotary(d_head, f.expand(n_layers, -1).clone(), "interleaved"),
                    positions="rotary"), [
            "rotary positions on every head dimension, adjacent pairs (2i, 2i + 1), base 10000; no position table"]


@register
class JinaBertV2(Bert):
    """jina-embeddings-v2 (Jina AI's JinaBERT) as llama.cpp runs its GGUF files: BERT's post-LN layers, the token type
    0's row added to each token's embedding, and no position table: ALiBi both ways, each head's logits biased by
    ``-m_h |i - j|`` with BLOOM's slopes at llama.cpp's maximum bias 8. No HuggingFace model type names it here (its
    folders say ``bert`` with ALiBi positions, which the bert family refuses: their code is remote): GGUF files alone
    are read as it (:attr:`gguf_types`)."""

    name = "jina_bert_v2"
    about = "jina-embeddings-v2 (GGUF files, as llama.cpp runs them): BERT's post-LN layers with ALiBi both ways"
    model_types = ()
    gguf_types = ("jina_bert_v2_gguf",)
    architectures = ()

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        """ALiBi both ways at maximum bias 8; no position table."""
        H = sizes(config, where)[1]
        return dict(W_pos=None, positions="alibi", alibi=alibi_slopes(H).float()), [
            "ALiBi positions both ways (maximum bias 8): each head's logits get -m_h |i - j|, no position enters the "
            "residual"]
