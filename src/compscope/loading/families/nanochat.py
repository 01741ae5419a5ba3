"""nanochat (Karpathy's nanochat models, as transformers ports them): Llama-like with every norm
without parameters, a norm on the embeddings, QK-norm after the rotary map, rotary turning the
other way, and soft-capped logits.

- Every RMSNorm has no gain (the input norms, the final one, QK-norm): ``norm_gains`` off.
- The residual starts as the RMS-normalised token embedding (the final norm, run once before the
  layers too): a function of the token alone, so ``W_E``'s columns are the normalised ones.
- QK-norm comes after the rotary map; without gains it is an RMS normalisation, which a rotation
  leaves as it is, so it is read where compscope puts QK-norm, before the map.
- nanochat's ``rotate_half`` is ``(x2, -x1)``, so positions turn each pair by ``-θ``: the usual map
  conjugated by ``P = diag(1, -1)`` on each head's halves. ``P`` is folded into the rows of ``W_Q``
  and ``W_K`` (and their biases): ``W_Q^T W_K`` is unchanged, and the logits at every offset are
  the model's.
- Logits are soft-capped, ``c tanh(ℓ / c)`` (``final_logit_softcapping``): ``W_U``-based scores
  describe them before the cap.
"""

from __future__ import annotations

import dataclasses

import torch

from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import PROJECTIONS
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike


def _halves_negated(w: torch.Tensor | None, r: int, rows: bool = True) -> torch.Tensor | None:
    """``P w``: the second half of each head's dims negated, on its rows (``(..., d_head, d)``) or, with
    ``rows`` false, its entries (a bias, ``(..., d_head)``)."""
    if w is None:
        return None
    sign = torch.ones(r, dtype=w.dtype)
    sign[r // 2:] = -1
    return w * (sign[:, None] if rows else sign)


@register
class NanoChat(LlamaLike):
    name = "nanochat"
    about = "nanochat (Karpathy): norms without gains, a normed embedding, QK-norm after rotary turned the other way"
    model_types = ("nanochat",)
    architectures = ("NanoChatForCausalLM", "NanoChatModel")
    handled = Llama.handled | {"final_logit_softcapping"}
    options = LlamaLikeOptions(norm_gains=False, qk_norm=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        hw = convert_llamalike(ckpt, cls, cls.options)
        r, eps = hw.d_head, hw.final_norm.eps
        if hw.rotary.dim != r:
            raise UnsupportedModelError(f"{ckpt.source}: rotary on {hw.rotary.dim} of {r} dims of each head: nanochat "
                                        "rotates whole heads, and its reversed turn is read so only")
        e = hw.W_E.double()
        W_E = (e * torch.rsqrt(e.pow(2).mean(0, keepdim=True) + eps)).to(hw.W_E.dtype)
        notes = ["W_E's columns are RMS-normalised (eps as the model's norms): the residual starts as the normed "
                 "token embedding",
                 "QK-norm after the rotary map in the model, without gains: a rotation leaves an RMS normalisation "
                 "as it is, so it is read before the map",
                 "rotary turning each pair the other way (nanochat's rotate_half): read as the usual map, the second "
                 "half of each query and key head's rows negated (W_Q^T W_K unchanged)"]
        cap = ckpt.config.get("final_logit_softcapping")
        if cap:
            notes.append(f"logits soft-capped, c tanh(l / c) with c = {cap:g}: W_U-based scores describe them before "
                         "the cap")
        parts = cls.projections_as_read(ckpt.config, ckpt.source, {n: getattr(hw, n) for n in PROJECTIONS})
        return dataclasses.replace(hw, W_E=W_E, **parts,
                                   meta=dataclasses.replace(hw.meta, notes=hw.meta.notes + tuple(notes)))

    @classmethod
    def projections_as_read(cls, config: dict, where: str, parts: dict) -> dict:
        """``P`` on the query and key rows (and biases): the second half of each head's dims negated."""
        out = dict(parts)
        for name in ("W_Q", "W_K", "b_Q", "b_K"):
            if parts.get(name) is not None:
                rows = name[0] == "W"  # a weight's rows, or a bias's entries
                out[name] = _halves_negated(parts[name], parts[name].shape[-2 if rows else -1], rows=rows)
        return out
