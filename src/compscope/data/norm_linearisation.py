"""Norms inside the heads' circuits, linearised on data (spec, "Ground truth from data").

Some models normalise inside a head's circuit: QK-norm (Gemma 3, Qwen3, StableLM) divides each
head's query and key by its RMS (or standard deviation) before the gain, and an attention-output
norm (Gemma 2 and 3) normalises what a layer's heads write, together, before it reaches the
residual. A composition measure reads ``W_Q``, ``W_K`` and ``W_O`` and cannot see either. Moving
the gain alone into the weights (:func:`compscope.core.processing.fold_qk_norm_gains`) leaves the
per-token scale out. Here each such norm ``N(y) = γ ⊙ n(y) (+ β)`` is replaced by its Jacobian
averaged over the inputs it meets on data,

    J = diag(γ) E_y[∂n/∂y],    ∂n/∂y = (1/s) (P − z zᵀ / r),

with ``s = sqrt(mean(P y)² + eps)``, ``z = P y / s``, ``r`` the dimension, ``P = I`` for an RMSNorm and
``P = I − 11ᵀ/r`` for a LayerNorm (exact, ``eps`` included; the bias ``β`` is constant: it drops
out of the Jacobian; an output or value norm's is added to the bias after it, a QK-norm's left out).
Part ``qk``: ``W_Q ← J_q W_Q``, ``W_K ← J_k W_K`` per head (and their biases), QK-norm removed; part
``output``: ``W_O ← J_o W_O`` per layer (and ``b_O ← J_o b_O + β``), the attention-output norm removed;
part ``value`` (Gemma 4's value norm): ``W_V ← J_v W_V`` per K/V head (and
``b_V ← J_v b_V + β``), the value norm removed; part ``latent`` (multi-head latent attention, DeepSeek-V2 and
V3): each side's projection ``y(x) = W x + b`` times its latent norm's per-token scale
``s(x) = (|c|²/r + eps)^(-1/2)``, ``c = W_c x + b_c`` (:class:`~compscope.core.heads.LatentNorm`), by its mean
Jacobian in the input with a constant 1 appended, ``x̃ = [x; 1]``, ``W̃ = [W, b]``, ``W̃_c = [W_c, b_c]``:

    ∂(s y)/∂x̃ = s W̃ − s³ y cᵀ W̃_c / r,    W̃ ← E[s] W̃ − W̃ E[s³ x̃ cᵀ] W̃_c / r,

its last column the bias; on every query dim (``q_latent``), every value dim and the key dims from ``kv_latent_from``
on (``kv_latent``), the latent norms removed. The result is the first-order model around the data, for analysis
only: the model that runs stays the unprocessed one. The norm inputs are taken at every position but the first (where
attention sinks), on natural text (the text of the ``activations`` metric) or, without a
tokenizer, on repeated random sequences; both recorded in ``meta.notes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..core.heads import HeadWeights, LatentNorm, Norm
from ..defaults import NORM_PARTS
from ..core.processing import (QK_GAINS_FOLDED, check_qk_norm_linearisable, linearise_qk_norm, qk_jacobian_changes,
                               qk_norm_linearised)
from ..errors import OptionError, ProcessingError, check_tokens

if TYPE_CHECKING:
    from .residual_moments import SampleData

#: the norms inside the heads' circuits that can be linearised
PARTS = NORM_PARTS
#: each part's norm, as errors name it
_WORDS = {"qk": "QK-norm", "output": "attention-output norm", "value": "value norm", "latent": "latent norm"}


class JacobianMean:
    """Running mean of ``∂n(y)/∂y`` (without gain) of a norm ``n`` over rows ``y: (n, ..., r)``, float64."""

    def __init__(self, norm: Norm):
        self.norm, self.count = norm, 0
        self.inv_s: Tensor | float = 0.0  # Σ 1/s, (...)
        self.outer: Tensor | float = 0.0  # Σ z zᵀ / s, (..., r, r)

    def add(self, y: Tensor) -> None:
        y = y.double()
        c = y - y.mean(-1, keepdim=True) if self.norm.kind == "layernorm" else y
        s = (c.pow(2).mean(-1, keepdim=True) + self.norm.eps).sqrt()
        z = c / s
        self.inv_s = self.inv_s + (1 / s[..., 0]).sum(0)
        self.outer = self.outer + torch.einsum("n...i,n...j->...ij", z / s, z)
        self.count += y.shape[0]

    def mean(self) -> Tensor:
        """``(..., r, r)``: ``E[(1/s) (P − z zᵀ / r)]``."""
        r = self.outer.shape[-1]
        eye = torch.eye(r, dtype=torch.float64, device=self.outer.device)
        P = eye - 1.0 / r if self.norm.kind == "layernorm" else eye
        return (self.inv_s[..., None, None] * P - self.outer / r) / self.count


class LatentScaleMean:
    """Running sums for the mean Jacobian of ``x ↦ s(x) (W x + b)``, a projection times the per-token scale of a
    latent norm (:class:`~compscope.core.heads.LatentNorm`, one layer's), over rows ``x: (n, d_model)``: ``Σ s`` and
    ``Σ s³ x̃ cᵀ`` with ``x̃ = [x; 1]`` and ``c = W_c x + b_c``, float64."""

    def __init__(self, latent: LatentNorm, layer: int):
        self.W = _augmented(latent, layer)
        self.eps, self.count = latent.eps, 0
        self.s: Tensor | float = 0.0
        self.outer: Tensor | float = 0.0  # Σ s³ x̃ cᵀ, (d_model + 1, rank)

    def add(self, x: Tensor) -> None:
        x = torch.cat([x.double(), x.new_ones(x.shape[0], 1, dtype=torch.float64)], 1)
        c = x @ self.W.to(x.device).T
        s = torch.rsqrt(c.pow(2).mean(-1) + self.eps)
        self.s = self.s + s.sum()
        self.outer = self.outer + torch.einsum("n,nd,nr->dr", s.pow(3), x, c)
        self.count += x.shape[0]

    def mean(self) -> Tensor:
        """``(d_model + 1, rank + 1)``: ``E[s³ x̃ cᵀ]`` with ``E[s]`` beside it, in the last column's first entry
        (the rest zero)."""
        s = torch.zeros(self.outer.shape[0], 1, dtype=torch.float64, device=self.outer.device)
        s[0, 0] = self.s
        return torch.cat([self.outer, s], 1) / self.count


def _gained(norm: Norm, means: list[Tensor]) -> Tensor:
    """``diag(γ_l) J_l`` of a norm with gain ``γ`` (``J_l`` alone without one), stacked over the layers,
    from each layer's mean Jacobian ``J_l: (..., r, r)``; float64."""
    return torch.stack([J if norm.weight is None else norm.gain(l).double()[:, None] * J for l, J in enumerate(means)])


def _bias_through(J: Tensor, b: Tensor | None, beta: Tensor | None, equation: str) -> Tensor | None:
    """The bias after a linearised norm: ``J b + β`` (``equation`` applies ``J`` to ``b``), ``J b`` without a
    norm bias ``β``, ``β`` alone without ``b`` (constant after the norm: what every output adds); None with
    neither; float64."""
    out = None if b is None else torch.einsum(equation, J, b.double())
    if beta is not None:
        out = beta.double() if out is None else out + beta.double()
    return out


def _augmented(latent: LatentNorm, layer: int) -> Tensor:
    """``W̃_c = [W_c, b_c]`` of ``layer``'s latent, ``(rank, d_model + 1)``, float64 (``b_c`` zeros where there is
    none)."""
    W = latent.W[layer].double()
    b = torch.zeros_like(W[:, :1]) if latent.b is None else latent.b[layer].double()[:, None]
    return torch.cat([W, b], 1)


def latent_linearised(W: Tensor, b: Tensor | None, latent: LatentNorm, layer: int, mean: Tensor
                      ) -> tuple[Tensor, Tensor]:
    """``W: (..., d_model)`` and ``b: (...,)`` (one layer's) times their latent norm's scale, linearised: ``W̃ ←
    E[s] W̃ − W̃ E[s³ x̃ cᵀ] W̃_c / r`` (module docstring) from ``mean``, :meth:`LatentScaleMean.mean`; float64
    ``(W, b)``, the bias never None (a latent bias alone gives one)."""
    Wt = torch.cat([W.double(), (torch.zeros_like(W[..., :1], dtype=torch.float64) if b is None
                                 else b.double()[..., None])], -1)
    Wc = _augmented(latent, layer).to(W.device)
    mean = mean.to(W.device)
    out = mean[0, -1] * Wt - (Wt @ mean[:, :-1]) @ Wc / Wc.shape[0]
    return out[..., :-1], out[..., -1]


def norm_parts(hw: HeadWeights) -> tuple[str, ...]:
    """The :data:`PARTS` that ``hw`` has: ``'qk'`` with a QK-norm, ``'output'`` with an attention-output
    norm, ``'value'`` with a value norm, ``'latent'`` with a latent norm (multi-head latent attention)."""
    held = {"qk": hw.qk_norm, "output": hw.attn_out_norm, "value": hw.v_norm,
            "latent": hw.q_latent if hw.q_latent is not None else hw.kv_latent}
    return tuple(p for p in PARTS if held[p] is not None)


def check_parts(hw: HeadWeights, parts: str | Sequence[str] | None, where: str = "linearise_norms") -> tuple[str, ...]:
    """``parts`` as a tuple of :data:`PARTS` that ``hw`` has (default every one it has); clear
    errors, naming the function ``where`` the user called, for an unknown part, one the model
    lacks, and a layer-wide QK-norm."""
    has = norm_parts(hw)
    if parts is None:
        if not has:
            raise OptionError(f"{where}: {hw.meta.name} has no norm inside its heads' circuits "
                              "(no QK-norm, attention-output norm, value norm or latent norm)")
        parts = has
    parts = tuple(p.strip() for p in parts.split(",")) if isinstance(parts, str) else tuple(parts)
    for p in parts:
        if p not in PARTS:
            raise OptionError(f"{where}: unknown part {p!r}; expected any of {', '.join(PARTS)}")
        if p == "qk" and qk_norm_linearised(hw):
            raise ProcessingError(f"{where}: {hw.meta.name}'s QK-norm was already linearised from the weights "
                                  "(linearise_qk_norm); linearise the unprocessed QK-norm instead")
        if p not in has:
            raise OptionError(f"{where}: {hw.meta.name} has no {_WORDS[p]} (part {p!r})")
    if not parts:
        raise OptionError(f"{where}: no part given; expected any of {', '.join(PARTS)}")
    if "qk" in parts and hw.qk_norm_scope != "head":
        raise ProcessingError(f"{where}: {hw.meta.name}'s QK-norm runs over all heads of a layer at once; "
                              "its Jacobian mixes heads, which per-head W_Q, W_K cannot hold")
    if "latent" in parts and (hw.qk_norm is not None or hw.v_norm is not None):  # (no model has both yet)
        raise ProcessingError(f"{where}: {hw.meta.name}'s latent norm's scale sits before a QK-norm or value norm; "
                              "linearising the two together is not supported")
    if "qk" in parts and QK_GAINS_FOLDED in hw.meta.processing:
        raise ProcessingError(f"{where}: {hw.meta.name}'s QK-norm gains were already moved into W_Q, W_K "
                              "(fold_qk_norm_gains); linearise the unprocessed QK-norm instead")
    return tuple(dict.fromkeys(parts))


def unread_norms(hw: HeadWeights) -> str | None:
    """A note when ``hw``'s heads' circuits hold norms the measures do not read (QK-norm after
    ``W_Q``, ``W_K``, unless its gains were folded into them; an attention-output norm after
    ``W_O``; Gemma 4's value norm after ``W_V``; multi-head latent attention's per-token latent scales on
    ``W_Q``, ``W_K``, ``W_V``), naming those ``linearise_norms`` can read; ``None`` when there are none."""
    words = {"qk": "QK-norm (after W_Q, W_K)", "output": "an attention-output norm (after W_O)",
             "value": "a value norm (after W_V)",
             "latent": "latent norms (their per-token scales on W_Q, W_K, W_V: multi-head latent attention)"}
    folded = QK_GAINS_FOLDED in hw.meta.processing
    parts = [p for p in norm_parts(hw) if not (p == "qk" and folded)]
    if not parts:
        return None
    can = []
    for p in parts:
        try:
            can.append(check_parts(hw, p)[0])
        except ProcessingError:  # a layer-wide QK-norm: no per-head linearisation
            pass
    how = (f"; --linearise-norms {','.join(can)} (linearise_norms=) reads "
           f"{'them' if len(can) > 1 or 'latent' in can else 'it'} "
           "through the mean Jacobian on text") if can else ""
    if "qk" in can:
        how += "; --linearise-qk-norm (linearise_qk_norm=) reads QK-norm at the isotropic point, from the weights alone"
    return f"the heads' circuits hold {' and '.join(words[p] for p in parts)}, which the measures do not read{how}"


@dataclass(frozen=True)
class NormJacobians:
    """Mean Jacobians (without gain) of the norms inside a model's heads' circuits, measured on
    data: ``means[(n, layer)]`` for ``n`` in ``q``, ``k``, ``v`` (``(head, r, r)``; ``v`` per K/V head) and
    ``o`` (``(d_model, d_model)``), float64 (``q``, ``k`` on the layers with a QK-norm only, as
    ``HeadWeights.qk_normed`` says), and ``q_latent``, ``kv_latent``
    (:meth:`LatentScaleMean.mean`); ``parts``: the :data:`PARTS` measured; ``data``: what they
    were measured on. :meth:`apply` linearises any of those parts, so one pass over the data
    serves each subset (the traces are the unprocessed model's whatever is linearised)."""

    means: dict[tuple[str, int], Tensor]
    parts: tuple[str, ...]
    data: str

    def apply(self, hw: HeadWeights, parts: str | Sequence[str] | None = None) -> HeadWeights:
        """``hw`` with the norms of ``parts`` (default every part measured) replaced by their mean
        Jacobians: ``W_{Q,K} ← diag(γ) J W_{Q,K}`` per head, ``W_O ← diag(γ) J W_O`` per layer,
        ``W_V ← diag(γ) J W_V`` per K/V head (``b_O``, ``b_V``: ``diag(γ) J b + β``); the latent norms' scales
        through :func:`latent_linearised`."""
        parts = check_parts(hw, self.parts if parts is None else parts, "NormJacobians.apply")
        missing = [p for p in parts if p not in self.parts]
        if missing:
            raise OptionError(f"NormJacobians.apply: part {missing[0]!r} was not measured "
                              f"(measured: {', '.join(self.parts)})")
        L = hw.n_layers
        mean = lambda n, l: self.means[n, l].to(hw.device)  # noqa: E731
        changes: dict = {}
        if "qk" in parts:  # (a layer without a QK-norm has no mean measured: qk_jacobian_changes leaves it)
            heads = {"q": hw.n_heads, "k": hw.n_kv_heads}
            eye = lambda n: torch.eye(hw.d_head, dtype=torch.float64, device=hw.device).expand(heads[n], -1, -1)  # noqa: E731
            changes.update(qk_jacobian_changes(hw, *(torch.stack([mean(n, l) if (n, l) in self.means else eye(n)
                                                                  for l in range(L)]) for n in "qk")))
        if "output" in parts:
            norm = hw.attn_out_norm
            J = _gained(norm, [mean("o", l) for l in range(L)])  # (layer, d_model, d_model)
            changes["W_O"] = torch.einsum("lde,lher->lhdr", J, hw.W_O.double()).to(hw.W_O.dtype)
            b_O = _bias_through(J, hw.b_O, norm.bias, "lde,le->ld")
            changes["b_O"] = None if b_O is None else b_O.to(hw.W_O.dtype)
            changes["attn_out_norm"] = None
        if "value" in parts:
            norm = hw.v_norm
            J = _gained(norm, [mean("v", l) for l in range(L)])  # (layer, K/V head, r, r)
            changes["W_V"] = torch.einsum("lgrs,lgsd->lgrd", J, hw.W_V.double()).to(hw.W_V.dtype)
            b_V = _bias_through(J, hw.b_V, None if norm.bias is None else norm.bias[:, None], "lgrs,lgs->lgr")
            changes["b_V"] = None if b_V is None else b_V.expand_as(hw.W_V[..., 0]).to(hw.W_V.dtype)
            changes["v_norm"] = None
        if "latent" in parts:
            changes.update(self._latent_changes(hw))
        return hw.replace(step=f"linearise_norms({', '.join(parts)})",
                          note=f"norms linearised (their mean Jacobian) on {self.data}", **changes)


    def _latent_changes(self, hw: HeadWeights) -> dict:
        """The fields of ``hw`` with its latent norms' scales linearised: ``W_Q``, ``b_Q`` on every query dim,
        ``W_V``, ``b_V`` on every value dim and ``W_K``, ``b_K`` on the key dims from ``kv_latent_from`` on."""
        changes: dict = {"q_latent": None, "kv_latent": None, "kv_latent_from": 0}
        sides = (("q_latent", (("Q", 0),)), ("kv_latent", (("K", hw.kv_latent_from), ("V", 0))))
        for side, kinds in sides:
            latent = getattr(hw, side)
            if latent is None:
                continue
            for kind, cut in kinds:
                W, b = getattr(hw, f"W_{kind}"), getattr(hw, f"b_{kind}")
                W_new, b_new = W.double().clone(), (torch.zeros_like(W[..., 0], dtype=torch.float64) if b is None
                                                    else b.double().clone())
                for l in range(hw.n_layers):
                    W_new[l, :, cut:], b_new[l, :, cut:] = latent_linearised(
                        W[l, :, cut:], None if b is None else b[l, :, cut:], latent, l, self.means[side, l])
                changes[f"W_{kind}"] = W_new.to(W.dtype)
                changes[f"b_{kind}"] = None if b is None and latent.b is None else b_new.to(W.dtype)
        return changes


@torch.no_grad()
def mean_jacobians(runner, parts: str | Sequence[str] | None = None, hw: HeadWeights | None = None,
                   tokens: Tensor | None = None, data: SampleData | None = None, batch_size: int = 8,
                   progress: bool = True) -> NormJacobians:
    """The mean Jacobians of the norms of ``parts`` (default every one ``hw``, the runner's weights
    by default, has) on ``tokens: (batch, seq)`` run through ``runner``'s model, or, without
    ``tokens``, on those of ``data``, a :class:`~compscope.data.residual_moments.SampleData`
    (default: 16 sequences of 128 tokens of natural text, at most the model's context, seed
    12346; its ``corpus``: a file's text instead of the docstrings)."""
    return _mean_jacobians(runner, parts, hw, tokens, data, batch_size, progress, "mean_jacobians")


def _mean_jacobians(runner, parts, hw, tokens, data, batch_size: int, progress: bool, where: str) -> NormJacobians:
    """:func:`mean_jacobians`, its errors naming ``where``, the function the user called."""
    from ..core.attention import combine, head_outputs, head_states, read_input
    from ..progress import progress_bar
    from .residual_moments import as_sample_data

    base = runner.hw if hw is None else hw
    parts = check_parts(base, parts, where)
    given = tokens is not None
    if given and data is not None:
        raise OptionError(f"{where}: give tokens or data (what to draw them from), not both")
    if not given:
        sample = as_sample_data(data)
        words, tokens = sample.text(runner), sample.tokens(runner)
    if check_tokens(tokens).shape[1] < 2:
        raise OptionError(f"{where} needs (batch, seq) tokens with seq >= 2, got shape {tuple(tokens.shape)}")
    if given:  # (described after the check, which reads no shape of what is not a tensor)
        words = f"{tokens.shape[0]} given sequences of {tokens.shape[1]} tokens"
    here = runner.weights_here(base)
    L = here.n_layers
    acc = {(p, l): JacobianMean(n) for l in range(L) for p, n in
           ((("q", here.qk_norm[0]), ("k", here.qk_norm[1])) if "qk" in parts and here.qk_normed(l) else ())
           + ((("o", here.attn_out_norm),) if "output" in parts else ())
           + ((("v", here.v_norm),) if "value" in parts else ())}
    if "latent" in parts:
        acc.update({(side, l): LatentScaleMean(getattr(here, side), l) for l in range(L)
                    for side in ("q_latent", "kv_latent") if getattr(here, side) is not None})
    bar = progress_bar(tokens.shape[0], "linearising norms", enabled=progress)
    for b0 in range(0, tokens.shape[0], batch_size):
        tr = runner.trace(tokens[b0 : b0 + batch_size])
        for l in range(L):
            x = read_input(here, l, tr.resid[l])
            if "qk" in parts and here.qk_normed(l):  # (Llama 4's NoPE layers have none)
                for kind, W, b in (("q", here.W_Q, here.b_Q), ("k", here.W_K, here.b_K)):
                    y = torch.einsum("hrd,bsd->bshr", W[l].double(), x.double())[:, 1:]
                    if b is not None:
                        y = y + b[l].double()
                    acc[kind, l].add(y.reshape(-1, *y.shape[2:]))
            if "value" in parts:  # what the value norm takes, per K/V head
                y = torch.einsum("grd,bsd->bsgr", here.W_V[l].double(), x.double())[:, 1:]
                if here.b_V is not None:
                    y = y + here.b_V[l].double()
                acc["v", l].add(y.reshape(-1, *y.shape[2:]))
            if "output" in parts:  # what the attention-output norm takes
                u = combine(here, l, head_outputs(here, l, *head_states(here, l, x), x), norm=False)[:, 1:]
                acc["o", l].add(u.reshape(-1, u.shape[-1]))
            for side in ("q_latent", "kv_latent") if "latent" in parts else ():  # what each latent norm's scale reads
                if (side, l) in acc:
                    acc[side, l].add(x[:, 1:].reshape(-1, x.shape[-1]))
        bar.update(tr.tokens.shape[0])
    bar.close()
    return NormJacobians({key: a.mean().cpu() for key, a in acc.items()}, parts, words)


def linearise_norms(runner, parts: str | Sequence[str] | None = None, hw: HeadWeights | None = None,
                    tokens: Tensor | None = None, data: SampleData | None = None, batch_size: int = 8,
                    progress: bool = True) -> HeadWeights:
    """``hw`` (default the runner's weights) with the norms named in ``parts`` (``'qk'``,
    ``'output'``, ``'value'``, ``'latent'``; default every one the model has) replaced by their mean Jacobians (module
    docstring), estimated on ``tokens: (batch, seq)`` run through ``runner``'s model or on those of
    ``data``, a :class:`~compscope.data.residual_moments.SampleData` (:func:`mean_jacobians`),
    then :meth:`NormJacobians.apply`."""
    base = runner.hw if hw is None else hw
    jac = _mean_jacobians(runner, parts, base, tokens, data, batch_size, progress, "linearise_norms")
    return jac.apply(base)


def qk_norm_on_text(runner, hw: HeadWeights, data=None) -> HeadWeights:
    """``hw`` with QK-norm replaced by its second-order Jacobian
    (:func:`~compscope.core.processing.linearise_qk_norm`) at the sample second moment and mean of
    what the heads read on the text the metrics are estimated on (``data``:
    :class:`~compscope.data.residual_moments.MetricData`, default the model's default), one pass of
    ``runner``'s unprocessed model (its sums kept on the runner for the metrics after it)."""
    from .residual_moments import as_metric_data, metric_tokens, runner_second_moments, tokens_data

    check_qk_norm_linearisable(hw)
    data = as_metric_data(data)
    n, length, seed = data.resolved(runner)
    tokens = metric_tokens(runner, n, length, seed, data.corpus)
    G = runner_second_moments(runner, tokens, hw=hw)  # its sums stay on the runner
    moments = torch.stack([G[l] for l in range(hw.n_layers)])
    means = torch.stack([runner._moments.mean(l).cpu() for l in range(hw.n_layers)])
    words = tokens_data(runner, n, length, seed, data.corpus)
    return linearise_qk_norm(hw, moments, means, where=f"what the heads read on {words}")
