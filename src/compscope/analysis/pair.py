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
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ..errors import OptionError
from ..core.factors import check_kind, check_offset, head_circuit
from ..core.heads import HeadWeights
from ..core.lowrank import LowRank, numerical_rank
from ..measures import PairSpectra, measures
from ..core.metrics import Metric, get_metric


def pair_spectra(writer: LowRank, reader: LowRank, *, baseline: bool = False, samples: int = 256,
                 seed: int = 0) -> PairSpectra:
    """The pieces every measure reads for one pair, float64, as a batch of one: the writer's
    ``U_A``, ``a`` and the reader's ``b``, ``V_B`` from the factors (thin SVDs, cut to their
    numerical ranks), and ``X = V_Bᵀ U_A``; with ``baseline``, the Haar expectation of
    ``frobenius`` (``compscope.engine.baseline``, ``samples`` draws, ``seed``)."""
    d = writer.shape[0]
    if writer.shape != (d, d) or reader.shape != (d, d):
        raise OptionError(f"pair_spectra: writer {writer.shape} and reader {reader.shape} must both be {d} x {d}")
    return _spectra(_thin_svd(writer), _thin_svd(reader), d, baseline, samples, seed)


def _thin_svd(m: LowRank) -> tuple[Tensor, Tensor, Tensor]:
    """``U, S, V`` of the ``d × d`` map ``m`` from its factors, float64, cut to its numerical rank."""
    U, s, V = LowRank(m.left.to(torch.float64), m.right.to(torch.float64)).svd()
    r = int(numerical_rank(s, m.shape[0]))
    return U[:, :r], s[:r], V[:, :r]


def _spectra(writer: tuple[Tensor, Tensor, Tensor], reader: tuple[Tensor, Tensor, Tensor], d: int, baseline: bool,
             samples: int = 256, seed: int = 0) -> PairSpectra:
    """:func:`pair_spectra` from the two maps' :func:`_thin_svd`."""
    (UA, a, _), (_, b, VB) = writer, reader
    expected = None
    if baseline:
        from ..engine.baseline import expected_frobenius

        expected = expected_frobenius(a[None], b[None], d, samples, seed)[0].reshape(1)
    return PairSpectra(a[None], b[None], (VB.T @ UA)[None], d, torch.tensor([len(a)]), expected)


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

    def to_dict(self) -> dict:
        """The report as plain Python values (lists of floats, the heads as ``[layer, head]``), for JSON."""
        floats = lambda xs: [float(x) for x in xs]  # noqa: E731
        return {"writer": list(self.writer), "reader": list(self.reader), "kind": self.kind, "metric": self.metric,
                "principal_angles_deg": self.angles_degrees, "cosines": floats(self.cosines),
                "composed_singular_values": floats(self.composed_singular_values),
                "writer_singular_values": floats(self.writer_singular_values),
                "reader_singular_values": floats(self.reader_singular_values),
                "measures": {k: float(v) for k, v in self.measures.items()}}

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
    ridge: float | None = None,
) -> PairReport:
    """Principal angles, composed singular values and every measure of the pair ``writer =
    (layer, head)`` → ``reader = (layer, head)`` (either also as ``'LAYER.HEAD'``; the reader in a
    later layer; the Haar baseline by the same seeded Monte Carlo as :func:`compscope.scores`)."""
    return compose_pairs(hw, [(writer, reader, kind)], metric, offset=offset, ridge=ridge)[0]


@torch.no_grad()  # values, not a graph: weights that need a gradient are read as they are
def compose_pairs(
    hw: HeadWeights,
    pairs: Iterable[tuple[tuple[int, int] | str, tuple[int, int] | str, str]],
    metric: str | Metric = "identity",
    *,
    offset: float = 0.0,
    ridge: float | None = None,
) -> list[PairReport]:
    """:func:`compose_pair` of each ``(writer, reader, kind)`` in ``pairs``, under one metric: each head's
    map (in the metric's coordinates) and its thin SVD taken once for all the pairs it is in."""
    items = [(as_head(w, "writer"), as_head(r, "reader"), kind) for w, r, kind in pairs]
    for kind in {k for _, _, k in items}:
        check_kind(kind)
    check_offset(hw, offset)
    L, H = hw.n_layers, hw.n_heads
    for writer, reader, _ in items:
        for name, (l, h) in (("writer", writer), ("reader", reader)):
            if not (0 <= l < L and 0 <= h < H):
                raise OptionError(f"{name} {l}.{h}: the model has layers 0..{L - 1} and heads 0..{H - 1}")
        if not writer[0] < reader[0]:
            raise OptionError(f"writer layer {writer[0]} must come before reader layer {reader[0]}")
    met = get_metric(metric, hw, ridge)
    svds: dict[tuple, tuple[Tensor, Tensor, Tensor]] = {}

    def svd(layer: int, head: int, role: str, sqrt: Tensor | None, inv_sqrt: Tensor | None, shift: float):
        key = (layer, head, role, id(sqrt), id(inv_sqrt))  # the metric holds its roots, so the ids stay theirs
        if key not in svds:
            svds[key] = _thin_svd(head_circuit(hw, layer, head, role, sqrt=sqrt, inv_sqrt=inv_sqrt, offset=shift,
                                               dtype=torch.float64))
        return svds[key]

    out = []
    for (l1, h1), (l2, h2), kind in items:
        wsvd = svd(l1, h1, "W", met.for_factor("V", l1, l2), met.for_factor("O", l1, l2), 0.0)
        rsvd = svd(l2, h2, kind, met.for_factor("Q", l2, l2), met.for_factor("O", l2, l2), offset)
        p = _spectra(wsvd, rsvd, hw.d_model, baseline=True)
        sv = torch.linalg.svdvals(p.core())  # (1, k): the composed map's, which the measures read squared
        p = replace(p, core_sv2=sv.pow(2))
        a, b, X = p.a[0], p.b[0], p.X[0]
        k = min(len(a), len(b))
        cos = torch.linalg.svdvals(X)[:k].clamp(0.0, 1.0)
        values = {name: float(m.exact(p)[0]) for name, m in measures().items()}  # every registered measure
        out.append(PairReport((l1, h1), (l2, h2), kind, met.name, torch.arccos(cos), sv[0, :k], a, b, values))
    return out
