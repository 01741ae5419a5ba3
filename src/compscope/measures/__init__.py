"""Composition measures ``C(A, B)`` of a writer ``A`` read by a reader ``B`` (spec, "Measures").

Every measure is computed from per-pair quantities of the thin SVDs
``A = U_A diag(a) V_Aᵀ``, ``B = U_B diag(b) V_Bᵀ`` and ``X = V_Bᵀ U_A``:

- ``exact(p: PairSpectra)``: from ``a, b, X`` themselves (any measure);
- ``from_gram(g: GramStats)``: from ``‖BA‖_F² = ⟨BᵀB, AAᵀ⟩_F``, ``‖X‖_F² = ⟨P_B, P_A⟩_F`` and the
  spectra alone (only measures that need no more), which the all-pairs engine gets with one
  large matrix multiply instead of forming every ``X``.

A measure is added by writing one file that calls :func:`register`; it declares its range,
the axioms it is meant to satisfy (so the axiom battery checks it with no other edit) and, if
it has a ``from_gram``, which of ``ba2`` and ``x2`` it reads (the engine forms only those).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..defaults import MEASURES as MEASURES_DEFAULT, TRACKED_MEASURES
from ..registry import Registry

#: Axioms of the spec (docs/spec.md): full read, no read, monotone, gauge (orthogonal), identity (C(I,I)=1 for
#: every d), padding, scale invariance, head splitting.
AXIOMS = ("full_read", "no_read", "monotone", "orthogonal_invariant", "identity", "padding", "scale", "split")


class _ReaderScale:
    """``b_top``: when the reader's spectrum ``b`` was divided by its largest singular value (the
    engine does, to keep its products in range), that value; None when ``b`` is the reader's own.
    Only a measure that keeps the reader's scale reads it."""

    b_top: Tensor | None

    def reader_scale(self) -> Tensor | float:
        """The factor that turns ``b`` back into the reader's own spectrum (1 when it is)."""
        return 1.0 if self.b_top is None else self.b_top


@dataclass(frozen=True)
class PairSpectra(_ReaderScale):
    """Batched per-pair data: ``a: (..., r_A)`` writer spectrum, ``b: (..., r_B)`` reader
    spectrum (both descending, zero-padded), ``X: (..., r_B, r_A)`` cosines, ``d`` the width,
    ``rank_a``: the writer's rank (``(...)``). ``core_sv2``: the squared singular values of
    :meth:`core`, descending, when the engine has them already (else :meth:`sv2` computes them).
    ``b_top: (...)``: see :class:`_ReaderScale` (:meth:`reader_scale`)."""

    a: Tensor
    b: Tensor
    X: Tensor
    d: int
    rank_a: Tensor
    expected_frobenius: Tensor | None = None
    core_sv2: Tensor | None = None
    b_top: Tensor | None = None

    def core(self) -> Tensor:
        """``diag(b) X diag(a)``: ``BA`` in the bases ``U_B``, ``V_A``."""
        return self.b[..., :, None] * self.X * self.a[..., None, :]

    def sv2(self) -> Tensor:
        """Squared singular values of ``BA`` (of :meth:`core`), descending."""
        if self.core_sv2 is not None:
            return self.core_sv2
        return torch.linalg.svdvals(self.core().to(torch.float64)).pow(2)


@dataclass(frozen=True)
class GramStats(_ReaderScale):
    """Batched per-pair inner products and spectra (see module docstring). ``ba2 = ‖BA‖_F²``,
    ``x2 = ‖X‖_F²`` (``(...)``), ``a: (..., r)``, ``b: (..., r)`` descending spectra and
    ``rank_a``, broadcastable against the pairs (the engine passes writer spectra as
    ``(L, H, 1, 1, r)`` and reader spectra as ``(1, 1, L, H, r)``: a measure must not assume
    they are expanded), ``d``.
    ``expected_frobenius``: the Haar-baseline expectation, filled when a measure asks for it.
    ``b_top``: see :class:`_ReaderScale` (broadcastable like ``b`` without its last axis)."""

    ba2: Tensor
    x2: Tensor
    a: Tensor
    b: Tensor
    rank_a: Tensor
    d: int
    expected_frobenius: Tensor | None
    b_top: Tensor | None


@dataclass(frozen=True)
class Measure:
    name: str
    exact: Callable[[PairSpectra], Tensor]
    from_gram: Callable[[GramStats], Tensor] | None
    range: tuple[float, float]
    doc: str
    satisfies: frozenset[str]  # axioms it is meant to satisfy
    fails: dict[str, str] = field(default_factory=dict)  # axiom -> why it fails by design
    needs_baseline: bool = False
    #: which of ``GramStats.ba2`` (``‖BA‖_F²``) and ``GramStats.x2`` (``‖X‖_F²``) ``from_gram``
    #: reads: the engine forms only the Grams that some requested measure needs (the others
    #: reach ``from_gram`` as NaN)
    gram_inputs: frozenset[str] = frozenset({"ba2", "x2"})


#: every measure, in registration order (which is the order of ``'all'`` and of printed tables)
MEASURES: Registry = Registry("measure")

#: the measures computed when none are named, and those followed over training
DEFAULT, TRACKED = MEASURES_DEFAULT, TRACKED_MEASURES


def register(m: Measure) -> Measure:
    """Add ``m`` to :data:`MEASURES` after checking the axioms it declares exist."""
    unknown = (set(m.satisfies) | set(m.fails)) - set(AXIOMS)
    if unknown:
        raise ValueError(f"measure {m.name}: unknown axioms {sorted(unknown)}; known: {AXIOMS}")
    return MEASURES.add(m.name, m)


def get_measure(name: str) -> Measure:
    return MEASURES.get(name)


def measures() -> dict[str, Measure]:
    return dict(MEASURES.items())


def select(names: str | list[str] | tuple[str, ...]) -> list[Measure]:
    """The measures ``names`` (``'all'``: every registered one), each checked."""
    return [MEASURES.get(n) for n in MEASURES.select(names)]


# registration, in the order of 'all'
from . import frobenius, tight, overlap, bandwidth, spectral, read_gain  # noqa: E402,F401,I001

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
