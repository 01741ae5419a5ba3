"""One writer → reader pair in detail: principal angles, composed spectrum, every measure.

For writer ``A = W_OV^{h1}`` (thin SVD ``U_A S_A V_Aᵀ``, rank ``r_A``) and reader ``B`` of the
given kind (``U_B S_B V_Bᵀ``, rank ``r_B``), in the metric's whitened coordinates:

- principal angles ``θ_k`` between ``col(A)`` (what the writer can write) and ``row(B)`` (what
  the reader can read): ``cos θ_k = σ_k(V_Bᵀ U_A)``, ``k = 1 … min(r_A, r_B)``, ascending θ;
- singular values of the composed map ``BA``: ``σ(S_B (V_Bᵀ U_A) S_A)`` (descending, nonzero
  count ≤ ``min(r_A, r_B)``), from ``r × r`` factors, never the ``d × d`` product.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import OptionError
from ..core.factors import check_kind, check_offset, head_circuit
from ..core.heads import HeadWeights
from ..core.lowrank import LowRank, numerical_rank
from ..measures import PairSpectra, measures
from ..core.metrics import DEFAULT_RIDGE, Metric, get_metric


def pair_spectra(writer: LowRank, reader: LowRank, *, baseline: bool = False, samples: int = 256,
                 seed: int = 0) -> PairSpectra:
    """The pieces every measure reads for one pair, float64, as a batch of one: the writer's
    ``U_A``, ``a`` and the reader's ``b``, ``V_B`` from the factors (thin SVDs, cut to their
    numerical ranks), and ``X = V_Bᵀ U_A``; with ``baseline``, the Haar expectation of
    ``frobenius`` (``compscope.engine.baseline``, ``samples`` draws, ``seed``)."""
    d = writer.shape[0]
    if writer.shape != (d, d) or reader.shape != (d, d):
        raise OptionError(f"pair_spectra: writer {writer.shape} and reader {reader.shape} must both be {d} x {d}")
    f64 = lambda lr: LowRank(lr.left.to(torch.float64), lr.right.to(torch.float64))  # noqa: E731
    UA, a, _ = f64(writer).svd()
    _, b, VB = f64(reader).svd()
    ra, rb = int(numerical_rank(a, d)), int(numerical_rank(b, d))
    UA, a, VB, b = UA[:, :ra], a[:ra], VB[:, :rb], b[:rb]
    expected = None
    if baseline:
        from ..engine.baseline import expected_frobenius

        expected = expected_frobenius(a[None], b[None], d, samples, seed)[0].reshape(1)
    return PairSpectra(a[None], b[None], (VB.T @ UA)[None], d, torch.tensor([ra]), expected)



@dataclass(frozen=True)
class PairReport:
    """Everything about one pair (float64)."""

    writer: tuple[int, int]
    reader: tuple[int, int]
    kind: str
    metric: str
    principal_angles: Tensor  # (min(r_A, r_B),) radians, ascending
    composed_singular_values: Tensor  # (min(r_A, r_B),) descending
    writer_singular_values: Tensor  # (r_A,)
    reader_singular_values: Tensor  # (r_B,)
    measures: dict[str, float]

    @property
    def cosines(self) -> Tensor:
        return self.principal_angles.cos()

    @property
    def angles_degrees(self) -> list[float]:
        return [float(t) * 180 / math.pi for t in self.principal_angles]

    def __repr__(self) -> str:
        (l1, h1), (l2, h2) = self.writer, self.reader
        g = lambda xs: "[" + ", ".join(f"{float(x):.3g}" for x in xs) + "]"  # noqa: E731
        ms = ", ".join(f"{k}={v:.4g}" for k, v in self.measures.items())
        return (f"PairReport({l1}.{h1} -> {l2}.{h2}, {self.kind}-composition, metric {self.metric}; "
                f"principal angles (deg) {g(self.angles_degrees)}; composed singular values "
                f"{g(self.composed_singular_values)}; {ms})")


def as_head(value, name: str = "head") -> tuple[int, int]:
    """``(layer, head)`` from a pair of integers or the text ``'LAYER.HEAD'``."""
    try:
        if isinstance(value, str):
            layer, head = value.split(".")
            return int(layer), int(head)
        layer, head = value
        if isinstance(layer, bool) or isinstance(head, bool):
            raise TypeError
        return operator.index(layer), operator.index(head)
    except (ValueError, TypeError):
        raise OptionError(f"{name} {value!r}: expected (layer, head) integers or 'LAYER.HEAD', e.g. (0, 1) or '0.1'"
                          ) from None


def compose_pair(
    hw: HeadWeights,
    writer: tuple[int, int] | str,
    reader: tuple[int, int] | str,
    kind: str = "K",
    metric: str | Metric = "identity",
    *,
    offset: float = 0.0,
    ridge: float = DEFAULT_RIDGE,
) -> PairReport:
    """Principal angles, composed singular values and every measure of the pair ``writer =
    (layer, head)`` → ``reader = (layer, head)`` (either also as ``'LAYER.HEAD'``; the reader in a
    later layer; the Haar baseline by the same seeded Monte Carlo as :func:`compscope.scores`)."""
    check_kind(kind)
    check_offset(hw, offset)
    writer, reader = as_head(writer, "writer"), as_head(reader, "reader")
    (l1, h1), (l2, h2) = writer, reader
    L, H = hw.n_layers, hw.n_heads
    for name, (l, h) in (("writer", writer), ("reader", reader)):
        if not (0 <= l < L and 0 <= h < H):
            raise OptionError(f"{name} {l}.{h}: the model has layers 0..{L - 1} and heads 0..{H - 1}")
    if not l1 < l2:
        raise OptionError(f"writer layer {l1} must come before reader layer {l2}")
    met = get_metric(metric, hw, ridge)
    writer_map = head_circuit(hw, l1, h1, "W", sqrt=met.for_factor("V", l1, l2), inv_sqrt=met.for_factor("O", l1, l2),
                              dtype=torch.float64)
    reader_map = head_circuit(hw, l2, h2, kind, sqrt=met.for_factor("Q", l2, l2), inv_sqrt=met.for_factor("O", l2, l2),
                              offset=offset, dtype=torch.float64)
    p = pair_spectra(writer_map, reader_map, baseline=True)
    a, b, X = p.a[0], p.b[0], p.X[0]
    k = min(len(a), len(b))
    cos = torch.linalg.svdvals(X)[:k].clamp(0.0, 1.0)
    composed = torch.linalg.svdvals(p.core()[0])[:k]
    values = {name: float(m.exact(p)[0]) for name, m in measures().items()}  # every registered measure
    return PairReport(writer, reader, kind, met.name, torch.arccos(cos), composed, a, b, values)
