"""Activation-based head labels (spec, "Ground truth from data").

On repeated random sequences ``[t_1 … t_n, t_1 … t_n]`` (length ``2n``):

- induction score of a head: mean attention from position ``i`` of the second copy
  (``n ≤ i < 2n``) to ``i − n + 1``, the token after the earlier occurrence of token ``i``;
- previous-token score: mean attention from ``i`` to ``i − 1`` over ``1 ≤ i < 2n``;
- in-context loss: mean next-token cross-entropy of the targets in the first copy
  (positions ``1 … n−1``) and in the second copy (``n+1 … 2n−1``): an induction circuit makes
  the second far lower than the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..errors import OptionError, check_int, check_tokens
from .runner import model_device


def induction_scores(patterns: list[Tensor], half: int) -> Tensor:
    """``(layer, head)`` induction scores from ``patterns[l]: (batch, head, pos, pos)`` on
    sequences ``[t, t]`` with ``len(t) = half``."""
    return torch.stack([pattern_labels(p.double(), half, 0)["induction"].mean(0) for p in patterns])


def previous_token_scores(patterns: list[Tensor]) -> Tensor:
    """``(layer, head)`` mean attention from ``i`` to ``i − 1`` over ``i ≥ 1``."""
    return torch.stack([_to_previous(p.double()).mean(0) for p in patterns])


def _to_previous(pattern: Tensor) -> Tensor:
    """``(batch, head)`` mean attention from ``i`` to ``i − 1`` over ``i ≥ 1``."""
    every = torch.arange(1, pattern.shape[-1], device=pattern.device)
    return pattern[:, :, every, every - 1].mean(-1)


@dataclass(frozen=True)
class HeadLabels:
    """Scores of every head and the in-context losses on one set of repeated sequences."""

    induction: Tensor  # (layer, head)
    previous: Tensor  # (layer, head)
    loss_first: float
    loss_second: float
    half: int | None = None  # length of the repeated half of the sequences
    sequences: int | None = None  # how many sequences

    @property
    def icl_drop(self) -> float:
        """``loss_first − loss_second`` (nats)."""
        return self.loss_first - self.loss_second


@torch.no_grad()
def label_heads(model, tokens: Tensor) -> HeadLabels:
    """Labels of ``model`` (anything with ``forward(tokens, cache=dict)`` filling
    ``pattern.{l}``, such as ``ToyTransformer``) on ``tokens = [t, t]: (batch, 2n)``, run where
    the model's parameters are (a toy on CUDA takes tokens from the CPU); the scores on the CPU."""
    n2 = check_tokens(tokens, "batch, pos").shape[1]
    if n2 % 2 or not torch.equal(tokens[:, : n2 // 2], tokens[:, n2 // 2 :]):
        raise OptionError("label_heads needs repeated sequences [t, t] (see toy.data.repeated_random)")
    half = n2 // 2
    tokens = tokens.to(model_device(model))
    cache: dict = {}
    logits = model(tokens, cache=cache)
    n_layers = sum(1 for k in cache if k.startswith("pattern."))
    patterns = [cache[f"pattern.{l}"] for l in range(n_layers)]
    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1), reduction="none"
    ).view(tokens.shape[0], -1)  # ce[:, i] is the loss of predicting token i + 1
    first = ce[:, : half - 1].mean().item()  # targets 1 .. half-1
    second = ce[:, half:].mean().item()  # targets half+1 .. 2 half-1
    return HeadLabels(induction_scores(patterns, half).cpu(), previous_token_scores(patterns).cpu(), first, second, half,
                      tokens.shape[0])


def toy_labels(model, sequences: int = 200, half: int = 32, seed: int = 12345):
    """Activation-based labels (``compscope.data.head_labels.HeadLabels``) of a toy model given by
    its folder or built-in name, on ``sequences`` held-out repeated random sequences ``[t, t]``
    with ``|t| = min(half, n_ctx / 2)``; None for anything that is not a toy model."""
    from ..loading.builtin import find_toy
    from ..toy.storage import held_out_repeats, load_toy

    path = find_toy(model)
    if path is None:
        return None
    toy, _ = load_toy(path)
    return label_heads(toy, held_out_repeats(toy, sequences, half, seed))


#: the activation labels of :func:`activation_labels`, as column names
LABELS = ("induction", "previous_token", "duplicate_token", "sink")


def _label(self, name: str) -> Tensor:
    """``labels.induction`` and the like: the mean of that label (``__getattr__`` of the label classes)."""
    if name in LABELS:
        return self.mean[name]
    raise AttributeError(name)


@dataclass(frozen=True)
class ActivationLabels:
    """Per head ``(layer, head)`` float64: the mean of each label over all sequences (``mean``),
    the standard deviation of the per-batch means (``spread``) and the standard error of the mean,
    the sequences' standard deviation over ``√sequences`` (``error``; NaN with one sequence); labels
    are :data:`LABELS`:

    - ``induction``: attention from position ``i`` of the second copy to ``i − half + 1``;
    - ``previous_token``: attention from ``i`` to ``i − 1`` (every ``i ≥ 1``);
    - ``duplicate_token``: attention from ``i`` of the second copy to ``i − half``, the earlier
      occurrence of the same token;
    - ``sink``: attention on the first position (every ``i ≥ 1``).
    """

    mean: dict[str, Tensor]
    spread: dict[str, Tensor]
    sequences: int
    half: int
    start: int
    seed: int
    batches: int
    error: dict[str, Tensor] = field(default_factory=dict)

    __getattr__ = _label

    def __repr__(self) -> str:
        from ..results.table import top_entries

        L, H = self.mean["induction"].shape
        tops = "; ".join(f"top {k} " + ", ".join(f"{l}.{h} {v:.2f}" for (l, h), v in top_entries(self.mean[k], 3))
                         for k in ("induction", "previous_token"))
        return (f"ActivationLabels({L} layers x {H} heads; {self.sequences} sequences [t, t], |t| = {self.half}, "
                f"seed {self.seed}; {tops})")

    def to_pandas(self):
        """One row per head: ``layer, head`` and every label, then its spread (``<label>_spread``) and
        standard error (``<label>_error``)."""
        return _label_frame(self.mean, self.spread, self.error, sequences=self.sequences, half=self.half,
                            seed=self.seed, batches=self.batches)


def _label_frame(mean: dict[str, Tensor], spread: dict[str, Tensor], error: dict[str, Tensor] | None = None, **attrs):
    """One row per head: ``layer, head``, every label of :data:`LABELS`, then ``<label>_spread``
    (and ``<label>_error`` where given)."""
    import pandas as pd

    L, H = mean["induction"].shape
    rows = {"layer": [l for l in range(L) for _ in range(H)], "head": [h for _ in range(L) for h in range(H)]}
    rows.update({k: mean[k].flatten().tolist() for k in LABELS})
    rows.update({f"{k}_spread": spread[k].flatten().tolist() for k in LABELS})
    rows.update({f"{k}_error": error[k].flatten().tolist() for k in LABELS if error})
    df = pd.DataFrame(rows)
    df.attrs.update(attrs)
    return df


def pattern_labels(pattern: Tensor, half: int, start: int) -> dict[str, Tensor]:
    """The four labels of one layer from its patterns ``(batch, head, q, k)`` on ``[first] t t``
    sequences (``start``: 1 with a first token, else 0): ``{label: (batch, head)}``."""
    T = pattern.shape[-1]
    if T != start + 2 * half:
        raise OptionError(f"pattern over {T} positions, expected {start} + 2 x {half}")
    i = torch.arange(start + half, start + 2 * half, device=pattern.device)
    return {
        "induction": pattern[:, :, i, i - half + 1].mean(-1),
        "previous_token": _to_previous(pattern),
        "duplicate_token": pattern[:, :, i, i - half].mean(-1),
        "sink": pattern[:, :, 1:, 0].mean(-1),
    }


@torch.no_grad()
def activation_labels(runner, reps=None, batch_size: int = 16, progress: bool = True,
                      device: str | torch.device | None = None, *, sequences: int | None = None,
                      half: int | None = None, seed: int | None = None) -> ActivationLabels:
    """:class:`ActivationLabels` of ``runner``'s model (a runner, or any model
    :func:`~compscope.data.runner.runner_for` runs) on the repeated
    sequences ``reps`` (:func:`compscope.data.sequences.repeats`), or on those of
    :func:`~compscope.data.validate.validate` with its ``sequences``, ``half`` (``|t|``) and ``seed``
    (default 64 sequences ``[bos] t t`` with ``|t| = 32``, seed 12345, ``|t|`` cut to the model's
    context; a ``half`` given that does not fit is refused), ``batch_size`` sequences at a
    time (memory: one batch's patterns of one layer). ``device``: where a model given by name or
    folder runs (:func:`~compscope.data.runner.runner_for`); the labels come back on the CPU."""
    from ..progress import progress_bar
    from .runner import layer_state, runner_for
    from .sequences import Repeats
    from .validate import default_sequences, sequences_asked

    if reps is not None and not isinstance(reps, Repeats):
        raise OptionError(f"reps: expected the repeated sequences of compscope.data.sequences.repeats(...) (tokens and "
                          f"where the repeat starts), got a {type(reps).__name__}")
    asked = sequences_asked("reps", reps, sequences, half, seed)
    check_int("batch_size", batch_size, 1)
    runner = runner_for(runner, progress=progress, device=device)
    if reps is None:
        reps = default_sequences(runner, **asked)
    hw = runner.weights_here()
    n = reps.tokens.shape[0]
    per_sequence: dict[str, list[Tensor]] = {k: [] for k in LABELS}
    sizes = []
    bar = progress_bar(n, "activation labels", enabled=progress)
    for b0 in range(0, n, batch_size):
        tok = reps.tokens[b0 : b0 + batch_size]
        tr = runner.trace(tok)
        got = [pattern_labels(layer_state(hw, l, tr.resid[l]).pattern.double(), reps.half, reps.start)
               for l in range(hw.n_layers)]
        for k in LABELS:
            per_sequence[k].append(torch.stack([g[k] for g in got], 1).cpu())  # (batch, layer, head)
        sizes.append(tok.shape[0])
        bar.update(tok.shape[0])
    bar.close()
    mean = {k: torch.cat(v).mean(0) for k, v in per_sequence.items()}
    per_batch = {k: torch.stack([b.mean(0) for b in v]) for k, v in per_sequence.items()}
    spread = {k: v.std(0, correction=0) if len(v) > 1 else torch.zeros_like(mean[k]) for k, v in per_batch.items()}
    one = torch.ones(n, dtype=torch.long)  # one position a sequence: ratio_error is std / √n
    error = {k: ratio_error(torch.cat(v), one) for k, v in per_sequence.items()}
    return ActivationLabels(mean, spread, n, reps.half, reps.start, reps.seed, len(sizes), error)


@dataclass(frozen=True)
class TextLabels:
    """The labels of :data:`LABELS` on any token sequences, natural text above all (:func:`text_labels`):
    per head ``(layer, head)`` float64, the mean (``mean``), the standard deviation of the
    per-batch means (``spread``) and the standard error of the mean over sequences (``error``:
    :func:`ratio_error`'s; NaN with one sequence). With ``x`` the tokens and ``s`` the first
    position that can be an earlier copy (after the first token, where the model has one):

    - ``previous_token``: attention from ``i`` to ``i − 1``, every ``i ≥ 1``;
    - ``sink``: attention on the first position, every ``i ≥ 1``;
    - ``duplicate_token``: at each ``i`` with earlier copies (``x_j = x_i``, ``s ≤ j < i``), the
      attention on them, summed; averaged over those positions;
    - ``induction``: at each ``i`` with an earlier copy ``j < i − 1``, the attention on the tokens
      that followed its earlier copies (every ``j + 1``), summed; averaged over those positions.

    On ``[first] t t`` with no token repeated inside ``t`` the last two are the labels of
    :class:`ActivationLabels`; on text a token has many earlier copies that predict nothing, and
    the induction label runs lower. ``positions``: how many positions each label averages over."""

    mean: dict[str, Tensor]
    spread: dict[str, Tensor]
    positions: dict[str, int]
    data: str
    batches: int
    error: dict[str, Tensor] = field(default_factory=dict)

    __getattr__ = _label

    def to_pandas(self):
        """One row per head: ``layer, head`` and every label, then its spread (``<label>_spread``) and
        standard error (``<label>_error``)."""
        return _label_frame(self.mean, self.spread, self.error, data=self.data, batches=self.batches, **self.positions)


def copy_masks(tokens: Tensor, start: int) -> tuple[Tensor, Tensor]:
    """``(duplicate, induction)``, each ``(batch, i, k)`` bool, for tokens ``(batch, pos)``:
    ``duplicate[b, i, k]``: ``x_k = x_i``, ``start ≤ k < i``; ``induction[b, i, k]``: ``k = j + 1``
    for some ``j`` with ``x_j = x_i``, ``start ≤ j < i − 1``."""
    T = tokens.shape[1]
    pos = torch.arange(T, device=tokens.device)
    same = tokens[:, :, None] == tokens[:, None, :]
    duplicate = same & ((pos[None, :] < pos[:, None]) & (pos[None, :] >= start))[None]
    before = same & ((pos[None, :] < pos[:, None] - 1) & (pos[None, :] >= start))[None]
    induction = torch.zeros_like(before)
    induction[:, :, 1:] = before[:, :, :-1]
    return duplicate, induction


def text_pattern_sums(pattern: Tensor, tokens: Tensor, start: int, masks=None) -> dict[str, tuple[Tensor, Tensor]]:
    """Per label of :class:`TextLabels`, per sequence ``(sum over its positions (batch, head),
    positions (batch,))`` from one layer's patterns ``(batch, head, q, k)`` on ``tokens (batch, pos)``;
    ``masks``: :func:`copy_masks` of the tokens when already made (every layer of a batch shares them)."""
    pattern = pattern.double()
    b, _, T, _ = pattern.shape
    every = torch.full((b,), T - 1, dtype=torch.long)
    out = {"previous_token": (_to_previous(pattern) * (T - 1), every),
           "sink": (pattern[:, :, 1:, 0].sum(-1), every)}
    masks = copy_masks(tokens.to(pattern.device), start) if masks is None else masks
    for name, mask in zip(("duplicate_token", "induction"), masks):
        has = mask.any(-1)  # (batch, i): positions with an earlier copy of their kind
        out[name] = ((pattern * mask[:, None].to(pattern.dtype)).sum((-1, -2)), has.sum(-1).cpu())
    return out


def ratio_error(sums: Tensor, counts: Tensor) -> Tensor:
    """Standard error of the ratio ``m = Σ_s S_s / Σ_s n_s`` over ``B`` sequences (``sums (B, ...)``,
    ``counts (B,)``), linearised: ``√(B/(B−1) Σ_s (S_s − m n_s)²) / Σ_s n_s``; with equal counts, the
    sequences' means' standard deviation (Bessel) over ``√B``. NaN with one sequence or no positions."""
    B, total = sums.shape[0], counts.sum()
    shape = sums.shape[1:]
    if B < 2 or not total:
        return torch.full(shape, math.nan, dtype=torch.float64)
    n = counts.to(torch.float64).view(-1, *[1] * len(shape))
    m = sums.sum(0) / total
    return ((sums - m * n) ** 2).sum(0).mul(B / (B - 1)).sqrt() / total


def label_error(error: Tensor | None, layer: int, head: int) -> float | None:
    """A head's standard error as a float; None where there is none (not computed, or one
    sequence: NaN)."""
    if error is None or not math.isfinite(float(error[layer, head])):
        return None
    return float(error[layer, head])


def plus_minus(error: float | None) -> str:
    """`` ± e``, a standard error to two significant digits, as the printouts show it after its
    label; empty where there is none."""
    return "" if error is None else f" ± {error:.2g}"


def error_text(error: Tensor | None, layer: int, head: int) -> str:
    """:func:`plus_minus` of a head's standard error (:func:`label_error`)."""
    return plus_minus(label_error(error, layer, head))


@torch.no_grad()
def text_labels(runner, tokens=None, batch_size: int = 16, progress: bool = True, data: str | None = None) -> TextLabels:
    """:class:`TextLabels` of ``runner``'s model (any model :func:`~compscope.data.runner.runner_for`
    runs) on ``tokens (sequences, pos)``, or on the text a
    :class:`~compscope.data.residual_moments.SampleData` names (None: its defaults, 16 sequences of
    128 tokens of the standard library's docstrings where the model has a tokenizer), ``batch_size``
    sequences at a time; ``data``: what the tokens are, in words (recorded; default their shape, or
    the sample data's words)."""
    from ..progress import progress_bar
    from .residual_moments import SampleData, as_sample_data
    from .runner import layer_state, runner_for

    check_int("batch_size", batch_size, 1)
    sample = tokens is None or isinstance(tokens, SampleData)
    if not sample and (not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.shape[1] < 3):
        raise OptionError(f"text labels need (sequences, pos) tokens with pos >= 3, or a SampleData, got "
                          f"{tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__}")
    runner = runner_for(runner, progress=progress)
    if sample:
        sd = as_sample_data(tokens)
        tokens, data = sd.tokens(runner), data or sd.text(runner)
    hw = runner.weights_here()
    start = 1 if runner.bos is not None else 0
    sums: dict[str, list[Tensor]] = {k: [] for k in LABELS}  # per batch, (batch, layer, head)
    counts: dict[str, list[Tensor]] = {k: [] for k in LABELS}  # per batch, (batch,)
    bar = progress_bar(tokens.shape[0], "labels on text", enabled=progress)
    for b0 in range(0, tokens.shape[0], batch_size):
        tok = tokens[b0 : b0 + batch_size]
        tr = runner.trace(tok)
        masks = copy_masks(tok.to(runner.device), start)
        got = [text_pattern_sums(layer_state(hw, l, tr.resid[l]).pattern, tok, start, masks) for l in range(hw.n_layers)]
        for k in LABELS:
            sums[k].append(torch.stack([g[k][0] for g in got], 1).cpu())
            counts[k].append(got[0][k][1])
        bar.update(tok.shape[0])
    bar.close()
    shape = (hw.n_layers, hw.n_heads)
    nan = torch.full(shape, torch.nan, dtype=torch.float64)
    mean, spread, error, positions = {}, {}, {}, {}
    for k in LABELS:
        per_sequence, n = torch.cat(sums[k]), torch.cat(counts[k])
        positions[k] = int(n.sum())
        mean[k] = per_sequence.sum(0) / positions[k] if positions[k] else nan
        per_batch = [s.sum(0) / c.sum() for s, c in zip(sums[k], counts[k]) if c.sum()]
        spread[k] = torch.stack(per_batch).std(0, correction=0) if len(per_batch) > 1 else torch.zeros(shape, dtype=torch.float64)
        error[k] = ratio_error(per_sequence, n)
    words = data or f"{tokens.shape[0]} given sequences of {tokens.shape[1]} tokens"
    return TextLabels(mean, spread, positions, words, -(-tokens.shape[0] // batch_size), error)
