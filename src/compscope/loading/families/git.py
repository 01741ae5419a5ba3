"""GIT (Microsoft's generative image-to-text transformer) on text alone: its text decoder is BERT's post-LN
layers under ``git.`` (positions from 0, the embeddings' LayerNorm), attending causally; the logits read the last
layer's output (no final norm) through ``output``, with its bias. An image's tokens, projected from its vision
encoder, would be prepended and attended both ways; run without one, as compscope runs it, the sequence is text
alone and the image encoder is not read.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from . import register
from .bert import Bert


@register
class Git(Bert):
    name = "git"
    about = "GIT's text decoder on text alone: BERT's post-LN layers attending causally, a biased unembedding"
    model_types = ("git",)
    architectures = ("GitForCausalLM", "GitModel")
    handled = Bert.handled - {"type_vocab_size"}
    # (the image encoder's settings, and how many images a video gives: no image is read)
    ignored = frozenset({"vision_config", "num_image_with_embedding"})
    hf_base = "git"
    causal = True

    @classmethod
    def unembedding(cls, ckpt: Checkpoint, W_E: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None,
                                                                         list[str]]:
        """``output.weight`` and its bias (GitForCausalLM's head); None for the base model saved alone."""
        ts, n = ckpt.tensors, W_E.shape[1]
        if "output.weight" not in ts:
            return None, None, ["decoder: causal attention; no unembedding (the base model, saved without its head)"]
        return (ts.take("output.weight", (n, W_E.shape[0])), ts.take("output.bias", (n,), required=False),
                ["decoder: causal attention; the logits read the last layer's output (post-LN: no final norm) through "
                 "the head 'output', with its bias"])
