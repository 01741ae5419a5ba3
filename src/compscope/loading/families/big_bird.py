"""BigBird (BigBird-RoBERTa): BERT's post-LN layers under ``bert.``, positions from row 0, token types, as the full
attention transformers runs it on short sequences.

Its default attention (``attention_type = 'block_sparse'``) has each block of queries attend to its neighbouring,
global and random blocks of keys, which no dense pattern of one head holds. But transformers itself runs a sequence of
at most ``(5 + 2 num_random_blocks) block_size`` tokens (704 in the released models) with full attention, the same
``query``, ``key`` and ``value`` weights: compscope reads BigBird as that model, every token attending to every token,
and its data runner runs it so, switched to full attention before it is hooked, on no longer sequence
(:meth:`BigBird.exact_context`). A config of full attention (``original_full``) is read at any length.
"""

from __future__ import annotations

import torch

from . import register
from .base import integer, split_rows
from .bert import Bert


@register
class BigBird(Bert):
    name = "big_bird"
    about = ("BigBird: BERT's post-LN layers, read and run as the full attention transformers runs on sequences of at "
             "most (5 + 2 num_random_blocks) block_size tokens")
    model_types = ("big_bird",)
    architectures = ("BigBirdModel", "BigBirdForMaskedLM", "BigBirdForPreTraining", "BigBirdForSequenceClassification",
                     "BigBirdForTokenClassification", "BigBirdForQuestionAnswering", "BigBirdForMultipleChoice")
    handled = Bert.handled | {"attention_type", "block_size", "num_random_blocks", "use_bias", "rescale_embeddings"}
    accept = {**Bert.accept, "attention_type": lambda v: v in (None, "block_sparse", "original_full")}
    hf_base = "bert"

    @classmethod
    def sparse_limit(cls, config: dict, where: str = "config") -> int | None:
        """The longest sequence transformers runs with full attention where the config asks for block-sparse
        attention, ``(5 + 2 num_random_blocks) block_size``; None for a config of full attention."""
        if config.get("attention_type", "block_sparse") == "original_full":
            return None
        return (5 + 2 * integer(config, where, "num_random_blocks", default=3, low=0)) * integer(
            config, where, "block_size", default=64)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        return cls.sparse_limit(config, where)

    @classmethod
    def prepare(cls, model) -> None:
        """The running model switched to full attention (transformers replaces each layer's ``attention.self`` as it
        switches, which it would do itself on its first short sequence: the hooks go on the modules that run)."""
        switch_to_full_attention(cls.base_model(model))


    @classmethod
    def layer_projections(cls, ts, p: str, d: int, H: int, r: int) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """BERT's, the biases where the model has them (``use_bias``)."""
        out = []
        for name in cls.projections[:3]:
            b = ts.take(p + name + ".bias", (d,), required=False)
            out.append((split_rows(cls.weight(ts, p + name, d), H, r), None if b is None else b.reshape(H, r)))
        return out

    @classmethod
    def token_embeddings(cls, config: dict, where: str, wte: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        if not config.get("rescale_embeddings"):
            return wte.T, []
        scale = wte.shape[1] ** 0.5
        return wte.T * scale, [f"W_E includes the embedding scale {scale:g} (sqrt(d_model), rescale_embeddings)"]

    @classmethod
    def windows(cls, config: dict, where: str, n_layers: int) -> tuple[tuple[int | None, ...], list[str]]:
        limit = cls.sparse_limit(config, where)
        if limit is None:
            return (None,) * n_layers, []
        return (None,) * n_layers, [
            f"read as full attention, which transformers runs on sequences of at most {limit} tokens "
            "((5 + 2 num_random_blocks) block_size); its block-sparse attention on longer ones is not held, and the "
            "data-based commands run no longer sequence"]


def switch_to_full_attention(module) -> None:
    """``module`` (a BigBird model or BigBird-Pegasus encoder) set to full attention where it is block-sparse."""
    if getattr(module, "attention_type", None) == "block_sparse":
        module.set_attention_type("original_full")
