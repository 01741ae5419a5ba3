"""Interventional composition on data (spec, "Ground truth from data"), for models compscope
can run: its toy models.

For a pair ``(h1 → h2, kind)``, ``h1`` in an earlier layer than ``h2``: on a batch of token
sequences, ``h1``'s output is removed from the residual that ``h2`` reads through ``kind``
only, by mean-ablation (replaced by its mean over the batch at each position, the default) or
zero-ablation. Every other head, and ``h2``'s other inputs, read the clean residual: the direct
path ``h1 → h2`` alone is cut. The effect:

- Q or K: the mean total-variation distance ``½ Σ_j |p_ij − p'_ij|`` between ``h2``'s clean and
  patched attention patterns, over sequences and query positions ``i`` (in ``[0, 1]``);
- V: the mean relative change of the norm of ``h2``'s output, ``|‖o'‖ − ‖o‖| / ‖o‖``, over
  sequences and positions (positions where ``‖o‖ = 0`` are left out).

One forward pass per ``(h1, kind, layer of h2)`` patches every head of that layer at once
(heads of one layer do not read each other), so a model of ``L`` layers of ``H`` heads takes
``3 H L (L − 1) / 2`` passes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.factors import check_kinds
from ..errors import OptionError


@torch.no_grad()
def interventional_composition(model, tokens: Tensor, kinds: str = "QKV", ablation: str = "mean") -> dict[str, Tensor]:
    """``{kind: (L, H, L, H)}`` effects (float64; NaN except for earlier → later layer pairs)
    of ``model`` (a ``ToyTransformer``, or anything with its ``forward(tokens, cache=, edits=)``
    hooks) on ``tokens: (batch, pos)``."""
    if ablation not in ("mean", "zero"):
        raise OptionError(f"ablation={ablation!r}: use 'mean' or 'zero'")
    kinds = check_kinds(kinds)
    if tokens.ndim != 2 or tokens.shape[0] < 1:
        raise OptionError(f"tokens must be (batch, pos), got shape {tuple(tokens.shape)}")
    cache: dict = {}
    model(tokens, cache=cache)
    L = sum(1 for k in cache if k.startswith("pattern."))
    H = cache["pattern.0"].shape[1]
    out = {k: torch.full((L, H, L, H), float("nan"), dtype=torch.float64) for k in kinds}
    for l1 in range(L - 1):
        for h1 in range(H):
            written = cache[f"head_out.{l1}"][:, :, h1]  # (batch, pos, d)
            delta = (written.mean(0, keepdim=True) if ablation == "mean" else torch.zeros_like(written)) - written
            for kind in kinds:
                for l2 in range(l1 + 1, L):
                    patched: dict = {}
                    model(tokens, cache=patched, edits={(l2, h2, kind): delta for h2 in range(H)})
                    out[kind][l1, h1, l2] = _effect(kind, cache, patched, l2)
    return out


def _effect(kind: str, clean: dict, patched: dict, layer: int) -> Tensor:
    """``(head,)`` effect of one patch on every head of ``layer`` (module docstring)."""
    if kind in "QK":
        p, q = clean[f"pattern.{layer}"].double(), patched[f"pattern.{layer}"].double()  # (batch, head, i, j)
        return 0.5 * (p - q).abs().sum(-1).mean(dim=(0, 2))
    o = clean[f"head_out.{layer}"].double().norm(dim=-1)  # (batch, pos, head)
    o2 = patched[f"head_out.{layer}"].double().norm(dim=-1)
    rel = (o2 - o).abs() / o.clamp_min(1e-300)
    keep = (o > 0).double()
    return (rel * keep).sum(dim=(0, 1)) / keep.sum(dim=(0, 1)).clamp_min(1)


def against_measures(model, kinds: str = "QKV", *, metric: str = "identity", sequences: int = 100, half: int = 32,
                     seed: int = 12345, ablation: str = "mean"):
    """Interventional composition of a toy model (folder or built-in name) on ``sequences``
    held-out repeated random sequences ``[t, t]`` (``|t| = min(half, n_ctx / 2)``), and every
    measure's score of the same pairs (``metric``: a name, ``'activations'`` for the toy's own
    residual second moments on other held-out sequences, or a ``Metric``):
    ``(effects, ScoreTable, half)``."""
    from ..core.metrics import get_metric
    from ..engine.composition import scores
    from ..loading.builtin import find_toy
    from ..toy.storage import heads_of, held_out_repeats, load_toy

    path = find_toy(model)
    if path is None:
        raise OptionError(f"{model}: interventions run on compscope's toy models (a 'compscope train' folder or "
                          "'induction-2l'); other models have no forward pass here")
    toy, manifest = load_toy(path)
    tokens = held_out_repeats(toy, sequences, half, seed)
    effects = interventional_composition(toy, tokens, kinds, ablation)
    hw = heads_of(toy, manifest, path)
    table = scores(hw, kinds, "all", get_metric(metric, hw, model=path), pairs="all", progress=False)
    return effects, table, tokens.shape[1] // 2
