"""The axiom battery (spec, "Axioms"): each measure checked against each axiom on pairs built
to make the axiom's premise true, in float64, seeded.

A measure declares the axioms it is meant to satisfy and those it fails by design, with a
reason (``compscope.measures.Measure.satisfies`` / ``fails``); :func:`check_axioms` runs every
check on every registered measure (or on a ``Measure`` given directly, registered or not) and
reports, per measure and axiom, whether the axiom held on every constructed pair and the worst
deviation. A declared axiom that does not hold is a defect of the measure or of its declaration. The
gauge check is a property of the measure and the metric together, so it is not declared by
measures: it is expected to fail in the raw residual basis and to hold under a metric.

The pairs, for writer ``A = U_A diag(a) V_Aᵀ`` and reader ``B = U_B diag(b) V_Bᵀ`` given by
their factors (``W_O = U_A diag(a)``, ``W_V = V_Aᵀ``; likewise ``B``), with Haar-random
orthonormal bases, spectra log-uniform over three decades, widths ``d`` from 6 to 24 and
ranks from 1 to 6 (a trial draws one of each):

- ``full_read``: ``U_A = V_B Q`` (``Q``: ``r_B × r_A`` orthonormal, ``r_A ≤ r_B``), so
  ``col(A) ⊆ row(B)``: ``C = 1``.
- ``no_read``: ``U_A`` orthonormal in the complement of ``row(B)``: ``C = 0``.
- ``monotone``: ``U_A(t) = P cos t + Q sin t`` for ``t ∈ [0, π/2]``, ``P`` orthonormal in the
  complement of ``row(B)`` and ``Q`` in ``row(B)`` (every principal angle is ``π/2 - t``):
  ``C(t)`` on a grid of 41 angles must not decrease (by more than the tolerance), and the
  largest step must shrink under bisection (12 halvings to below 1e-3: continuity). Along this
  path ``B P = 0``, so ``BA(t) = sin t · BA(π/2)``: a measure that is a norm of ``BA`` over
  quantities of the fixed spectra (frobenius, tight, spectral) is ``sin t`` times its end value.
- ``orthogonal_invariant``: ``A → T A Tᵀ``, ``B → T B Tᵀ`` for a Haar-random orthogonal ``T``
  (factors ``T W_O``, ``W_V Tᵀ``): ``C`` unchanged.
- ``identity``: ``C(I_d, I_d) = 1`` for ``d = 2, 8, 32`` (so also independent of ``d``).
- ``padding``: both maps embedded in ``d + p`` dimensions by zero rows and columns: unchanged.
- ``scale``: ``C(αA, βB) = C(A, B)`` for ``α, β ∈ {-1000, 0.001, 7}``.
- ``split``: ``W_O S``, ``S⁻¹ W_V`` for random ``S`` of condition number about 1e3 (and the
  reader's factors likewise): unchanged.
- ``gauge`` (axiom 4 of the spec for ``T`` in ``GL(d)``): one writer, four readers of one rank,
  ``A → T A T⁻¹`` and each reader by its own law (``W_OV``: ``T B T⁻¹``; ``W_QK``:
  ``T⁻ᵀ B T⁻¹``), ``T`` with condition number 100: no ordering ``C(A, B_i) > C(A, B_j)`` may
  flip. Under ``metric='embed'`` every map is first whitened by ``G = W_E W_Eᵀ / n`` of a random
  embedding that moves with the model (``W_E → T W_E``; no ridge, which would not move): the
  raw basis is expected to fail it, the metric to make every orthogonally invariant measure
  keep it.

Values are compared with ``|ΔC| ≤ tol · max(1, |C|)``, ``tol = 1e-7`` (float64; the split check
loses about three digits to ``S``'s conditioning). Measures with a Haar baseline get it by the
same seeded Monte Carlo for every pair of a check, so that only the spectra move it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from ..errors import OptionError, check_int, did_you_mean
from ..core.factors import whiten
from ..core.lowrank import LowRank
from ..measures import AXIOMS, Measure, PairSpectra, get_measure, measures
from .stats import haar_orthonormal
from .pair import pair_spectra

_F64 = torch.float64
TOL = 1e-7
#: Metrics of the gauge check: the raw residual basis, or a metric built from an embedding
#: that moves with the model (``G = W_E W_Eᵀ / n``, so ``G → T G Tᵀ``).
METRICS = ("identity", "embed")
#: Grid of the monotone path and the size a step must shrink to under bisection.
_GRID, _HALVINGS, _JUMP = 41, 12, 1e-3


@dataclass(frozen=True)
class Setup:
    """What every check is given: random pairs per check, the seed, the gauge check's metric."""

    trials: int
    seed: int
    metric: str = "identity"


@dataclass(frozen=True)
class AxiomResult:
    """One measure against one axiom: ``declared`` is ``'satisfies'``, ``'fails'`` (with
    ``reason``) or ``'undeclared'``; ``holds``: the axiom held on every constructed pair;
    ``worst``: the largest deviation seen (0 when it held exactly); ``detail``: where."""

    measure: str
    axiom: str
    declared: str
    holds: bool
    worst: float
    detail: str
    reason: str = ""

    @property
    def violated(self) -> bool:
        """Declared satisfied, yet a constructed pair breaks it."""
        return self.declared == "satisfies" and not self.holds


#: the spectra of the pairs met so far in one :func:`check_axioms` run, by the pair's factors: every
#: measure is checked on the same seeded pairs, whose SVDs (and Haar baselines) are then taken once
_SPECTRA: ContextVar[dict | None] = ContextVar("axiom_spectra", default=None)


def _key(lr: LowRank) -> tuple:
    return tuple((tuple(t.shape), t.dtype, t.detach().cpu().contiguous().numpy().tobytes()) for t in (lr.left, lr.right))


def _versions(s: PairSpectra) -> tuple[int, ...]:
    """The in-place-change counters of ``s``'s tensors: a measure that wrote into them changes these."""
    return tuple(t._version for f in fields(s) if isinstance(t := getattr(s, f.name), Tensor))


def value(m: Measure, writer: LowRank, reader: LowRank, seed: int = 0) -> float:
    """``C(A, B)`` of measure ``m`` for the maps given by their factors (float64)."""
    seen = _SPECTRA.get()
    if seen is None:
        return float(m.exact(pair_spectra(writer, reader, baseline=m.needs_baseline, seed=seed))[0])
    key = (_key(writer), _key(reader), m.needs_baseline, seed)
    hit = seen.get(key)
    if hit is None or _versions(hit[0]) != hit[1]:  # new, or changed in place by a measure before
        spectra = pair_spectra(writer, reader, baseline=m.needs_baseline, seed=seed)
        seen[key] = hit = (spectra, _versions(spectra))
    return float(m.exact(hit[0])[0])


class _Draw:
    """Random pieces for one check, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=self.g))

    def orthonormal(self, n: int, k: int) -> Tensor:
        """``n × k`` with orthonormal columns, Haar-distributed."""
        return haar_orthonormal(n, k, self.g)

    def spectrum(self, k: int) -> Tensor:
        return 10.0 ** (3 * torch.rand(k, generator=self.g, dtype=_F64) - 1.5)

    def map(self, d: int, r: int) -> LowRank:
        """A generic rank-``r`` map: random factors."""
        return LowRank(torch.randn(d, r, generator=self.g, dtype=_F64), torch.randn(r, d, generator=self.g, dtype=_F64))

    def shape(self) -> tuple[int, int, int]:
        """``d, r_A, r_B`` with ``r_A + r_B ≤ d``."""
        d = self.int(6, 24)
        return d, self.int(1, min(6, d // 3)), self.int(1, min(6, d // 3))


def _with_left(U: Tensor, s: Tensor, V: Tensor) -> LowRank:
    """``U diag(s) Vᵀ`` as factors ``(U diag(s), Vᵀ)``."""
    return LowRank(U * s[None, :], V.T)


def _reader_and_space(dr: _Draw, d: int, r_b: int) -> tuple[LowRank, Tensor, Tensor]:
    """A reader ``B`` of rank ``r_B`` with a random spectrum, and orthonormal bases of
    ``row(B)`` (``d × r_B``) and of its complement (``d × (d - r_B)``)."""
    full = dr.orthonormal(d, d)
    VB, rest = full[:, :r_b], full[:, r_b:]
    return _with_left(dr.orthonormal(d, r_b), dr.spectrum(r_b), VB), VB, rest


def _writer(dr: _Draw, U: Tensor) -> LowRank:
    """A writer with column space ``span(U)``, a random spectrum and random row space."""
    k = U.shape[1]
    return _with_left(U, dr.spectrum(k), dr.orthonormal(U.shape[0], k))


def _exact(m: Measure, pairs: Iterable[tuple[LowRank, LowRank, str]], target: float, seed: int) -> tuple[bool, float, str]:
    worst, where = 0.0, ""
    for W, R, label in pairs:
        c = value(m, W, R, seed)
        dev = abs(c - target) / max(1.0, abs(target))
        if dev > worst:
            worst, where = dev, f"{label}: C = {c:.6g}"
    return worst <= TOL, worst, where


def _unchanged(m: Measure, pairs: Iterable[tuple[tuple[LowRank, LowRank], tuple[LowRank, LowRank], str]], seed: int,
               tol: float = TOL) -> tuple[bool, float, str]:
    worst, where = 0.0, ""
    for (W, R), (W2, R2), label in pairs:
        c, c2 = value(m, W, R, seed), value(m, W2, R2, seed)
        dev = abs(c2 - c) / max(1.0, abs(c))
        if dev > worst:
            worst, where = dev, f"{label}: {c:.6g} -> {c2:.6g}"
    return worst <= tol, worst, where


def _read(m: Measure, s: Setup, inside: bool):
    """Writers inside ``row(B)`` (``r_A ≤ r_B``; ``C = 1``) or orthogonal to it (``C = 0``)."""
    def pairs():
        for t in range(s.trials):
            dr = _Draw(s.seed + t)
            d, r_a, r_b = dr.shape()
            if inside:
                r_a, r_b = min(r_a, r_b), max(r_a, r_b)
            R, VB, rest = _reader_and_space(dr, d, r_b)
            space = VB if inside else rest
            yield _writer(dr, space @ dr.orthonormal(space.shape[1], r_a)), R, f"d={d}, r_A={r_a}, r_B={r_b}"
    return _exact(m, pairs(), 1.0 if inside else 0.0, s.seed)


def monotone_path(seed: int) -> tuple[Callable[[float], tuple[LowRank, LowRank]], str]:
    """``t ↦ (A(t), B)``: ``A``'s write space rotated from the complement of ``row(B)``
    (``t = 0``) into ``row(B)`` (``t = π/2``), spectra fixed; and a label."""
    dr = _Draw(seed)
    d, r_a, r_b = dr.shape()
    r_a = min(r_a, r_b)
    R, VB, rest = _reader_and_space(dr, d, r_b)
    P, Q = rest @ dr.orthonormal(d - r_b, r_a), VB @ dr.orthonormal(r_b, r_a)
    a, V = dr.spectrum(r_a), dr.orthonormal(d, r_a)
    return (lambda t: (_with_left(P * math.cos(t) + Q * math.sin(t), a, V), R)), f"d={d}, r_A={r_a}, r_B={r_b}"


def _monotone(m: Measure, s: Setup):
    trials, seed = s.trials, s.seed
    ok, worst, where = True, 0.0, ""
    for t in range(trials):
        path, label = monotone_path(seed + t)
        c = lambda x: value(m, *path(x), seed)  # noqa: E731
        ts = [math.pi / 2 * i / (_GRID - 1) for i in range(_GRID)]
        cs = [c(x) for x in ts]
        drops = [max(0.0, cs[i] - cs[i + 1]) / max(1.0, abs(cs[i])) for i in range(_GRID - 1)]
        i = max(range(_GRID - 1), key=drops.__getitem__)
        ok &= drops[i] <= TOL
        if drops[i] > worst:
            worst, where = drops[i], f"{label}: decreases from {cs[i]:.6g} to {cs[i + 1]:.6g} at t={ts[i]:.4f}"
        # continuity: bisect the largest step, keeping the half that changes more; a jump does not shrink
        i = max(range(_GRID - 1), key=lambda k: abs(cs[k + 1] - cs[k]))
        lo, hi, clo, chi = ts[i], ts[i + 1], cs[i], cs[i + 1]
        for _ in range(_HALVINGS):
            mid = (lo + hi) / 2
            cm = c(mid)
            lo, hi, clo, chi = (lo, mid, clo, cm) if abs(cm - clo) >= abs(chi - cm) else (mid, hi, cm, chi)
        jump = abs(chi - clo) / max(1.0, abs(clo), abs(chi))
        ok &= jump <= _JUMP
        if jump > _JUMP and jump > worst:
            worst, where = jump, f"{label}: jumps from {clo:.6g} to {chi:.6g} near t={lo:.6f}"
    return ok, worst, where


def _generic(s: Setup):
    """Per trial: its draw, ``d``, a generic writer and reader (random factors of random ranks)
    and a label."""
    for t in range(s.trials):
        dr = _Draw(s.seed + t)
        d, r_a, r_b = dr.shape()
        yield dr, d, dr.map(d, r_a), dr.map(d, r_b), f"d={d}, r_A={r_a}, r_B={r_b}"


def _orthogonal_invariant(m: Measure, s: Setup):
    def pairs():
        for dr, d, W, R, label in _generic(s):
            T = dr.orthonormal(d, d)
            moved = lambda lr: LowRank(T @ lr.left, lr.right @ T.T)  # noqa: E731
            yield (W, R), (moved(W), moved(R)), label
    return _unchanged(m, pairs(), s.seed)


def _identity(m: Measure, s: Setup):
    seed = s.seed

    def pairs():
        for d in (2, 8, 32):
            eye = torch.eye(d, dtype=_F64)
            yield LowRank(eye, eye), LowRank(eye, eye), f"d={d}"
    return _exact(m, pairs(), 1.0, seed)


def _padding(m: Measure, s: Setup):
    def pairs():
        for dr, d, W, R, label in _generic(s):
            p = dr.int(1, 8)
            pad = lambda lr: LowRank(torch.cat([lr.left, lr.left.new_zeros(p, lr.left.shape[1])]),  # noqa: E731
                                     torch.cat([lr.right, lr.right.new_zeros(lr.right.shape[0], p)], 1))
            yield (W, R), (pad(W), pad(R)), f"{label}, padded by {p}"
    return _unchanged(m, pairs(), s.seed)


def _scale(m: Measure, s: Setup):
    def pairs():
        for _, _, W, R, label in _generic(s):
            for alpha, beta in ((-1000.0, 0.001), (0.001, 7.0), (7.0, -1000.0)):
                yield (W, R), (LowRank(alpha * W.left, W.right), LowRank(beta * R.left, R.right)), f"{label}, α={alpha:g}, β={beta:g}"
    return _unchanged(m, pairs(), s.seed)


def _split(m: Measure, s: Setup):
    def conditioned(dr: _Draw, k: int) -> Tensor:
        return dr.orthonormal(k, k) @ torch.diag(torch.logspace(0, 3, k, dtype=_F64)) @ dr.orthonormal(k, k).T

    def pairs():
        for dr, _, W, R, label in _generic(s):
            S, T = conditioned(dr, W.left.shape[1]), conditioned(dr, R.left.shape[1])
            yield (W, R), (LowRank(W.left @ S, torch.linalg.solve(S, W.right)), LowRank(R.left @ T, torch.linalg.solve(T, R.right))), label
    return _unchanged(m, pairs(), s.seed, tol=1e3 * TOL)


def _gauge(m: Measure, s: Setup):
    """Orderings ``C(A, B) > C(A, D)`` before and after ``A → T A T⁻¹`` and each reader's own law
    (``W_OV``: ``T B T⁻¹``; ``W_QK``: ``T⁻ᵀ B T⁻¹``), ``T`` random with condition number 100, the
    metric (if any) moving as ``G → T G Tᵀ``; near-ties (``|ΔC| ≤ 1e-9``) are not compared."""
    from ..core.metrics import _roots

    flips = total = 0
    worst, where = 0.0, ""
    for t in range(s.trials):
        dr = _Draw(s.seed + t)
        d = dr.int(6, 16)
        T = dr.orthonormal(d, d) @ torch.diag(torch.logspace(-1, 1, d, dtype=_F64)) @ dr.orthonormal(d, d).T
        Ti = torch.linalg.inv(T)
        E = torch.randn(d, 3 * d, generator=dr.g, dtype=_F64)
        W = dr.map(d, dr.int(1, d // 3))
        qk = t % 2 == 1  # readers are W_QK (K-composition) on odd trials, W_OV (V) on even ones
        r_b = dr.int(1, d // 3)
        readers = [dr.map(d, r_b) for _ in range(4)]  # one rank: orderings not settled by rank alone

        def values(W, readers, E):
            if s.metric == "identity":
                Gh = Ghi = torch.eye(d, dtype=_F64)
            else:
                Gh, Ghi, _ = _roots(E @ E.T / E.shape[1], 0.0, "of the gauge check")
            w = whiten(W, Gh, Ghi, bilinear=False)  # G^{-1/2} A G^{1/2}
            return [value(m, w, whiten(R, Gh, Ghi, bilinear=qk), s.seed) for R in readers]

        before = values(W, readers, E)
        law = (lambda R: LowRank(Ti.T @ R.left, R.right @ Ti)) if qk else (lambda R: LowRank(T @ R.left, R.right @ Ti))
        after = values(LowRank(T @ W.left, W.right @ Ti), [law(R) for R in readers], T @ E)
        for i in range(len(readers)):
            for j in range(i + 1, len(readers)):
                a, b = before[i] - before[j], after[i] - after[j]
                if min(abs(a), abs(b)) <= 1e-9:
                    continue
                total += 1
                if (a > 0) != (b > 0):
                    flips += 1
                    if abs(a) > worst:
                        worst, where = abs(a), (f"d={d}, {'K' if qk else 'V'} readers {i}, {j}: "
                                                f"{before[i]:.4g} vs {before[j]:.4g} before, {after[i]:.4g} vs {after[j]:.4g} after")
    return flips == 0, worst, (f"{flips} of {total} orderings flipped; largest gap flipped: {where}" if flips else "")


#: axiom -> check(measure, setup) -> (holds, worst deviation, where). ``gauge`` is the spec's
#: axiom 4 for ``T`` in ``GL(d)`` (orderings kept; ``orthogonal_invariant`` is its ``O(d)``
#: part): a property of the measure *and the metric*, so no measure declares it; it is expected
#: to fail in the raw basis and to hold, for every orthogonally invariant measure, under a metric.
CHECKS: dict[str, Callable[[Measure, Setup], tuple[bool, float, str]]] = {
    "full_read": lambda m, s: _read(m, s, True), "no_read": lambda m, s: _read(m, s, False), "monotone": _monotone, "orthogonal_invariant": _orthogonal_invariant,
    "identity": _identity, "padding": _padding, "scale": _scale, "split": _split, "gauge": _gauge,
}
assert set(CHECKS) == set(AXIOMS) | {"gauge"}, "every axiom of compscope.measures.AXIOMS has a check"
_GAUGE_RAW = ("in the raw residual basis only orthogonal changes of basis keep a measure (docs/spec.md); "
              "a metric that moves with the model (--metric embed) makes it hold")


def _declared(m: Measure, axiom: str, metric: str) -> tuple[str, str]:
    if axiom == "gauge":
        if metric == "identity":
            return "fails", _GAUGE_RAW
        return ("satisfies", "") if "orthogonal_invariant" in m.satisfies else ("undeclared", "")
    if axiom in m.satisfies:
        return "satisfies", ""
    return ("fails", m.fails[axiom]) if axiom in m.fails else ("undeclared", "")


def check_axioms(
    which: str | Measure | Iterable[str | Measure] | None = None, axioms: Iterable[str] | None = None, *,
    trials: int = 6, seed: int = 0, metric: str = "identity",
) -> list[AxiomResult]:
    """Every check of ``axioms`` (default: all of the spec's) on the measures ``which`` (names or
    ``Measure`` objects; default: every registered measure), ``trials`` random pairs per check
    (the identity check uses ``d = 2, 8, 32``), seeded. ``metric``: for the gauge check only,
    ``'identity'`` (the raw basis) or ``'embed'`` (``G`` from a random embedding that moves
    with the model); the other axioms are about the measure in the basis it is given."""
    if which is None:
        ms = list(measures().values())
    else:
        items = [which] if isinstance(which, (str, Measure)) else list(which)
        ms = [get_measure(x) if isinstance(x, str) else x for x in items]
    names = list(CHECKS) if axioms is None else list(axioms)
    bad = [a for a in names if a not in CHECKS]
    if bad:
        raise OptionError(f"unknown axioms {bad}; axioms: {', '.join(CHECKS)}{did_you_mean(bad, CHECKS)}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise OptionError(f"trials={trials!r}: need an integer >= 1")
    check_int("seed", seed, 0)  # numpy takes no negative seed
    if metric not in METRICS:
        raise OptionError(f"metric={metric!r}: the battery's gauge check takes {' or '.join(METRICS)}")
    setup = Setup(trials, seed, metric)
    out = []
    token = _SPECTRA.set({})  # the measures share the pairs' spectra
    try:
        for m in ms:
            for ax in names:
                holds, worst, where = CHECKS[ax](m, setup)
                declared, reason = _declared(m, ax, metric)
                out.append(AxiomResult(m.name, ax, declared, holds, worst, where, reason))
    finally:
        _SPECTRA.reset(token)
    return out


def format_axioms(results: list[AxiomResult], trials: int, seed: int, metric: str = "identity") -> str:
    """The battery as a measure × axiom table, then the reasons of declared failures and the
    evidence of any violation (what ``compscope axioms`` prints)."""
    axioms = list(dict.fromkeys(r.axiom for r in results))
    rows = list(dict.fromkeys(r.measure for r in results))
    cell = {(r.measure, r.axiom): r for r in results}

    def mark(r: AxiomResult) -> str:
        if r.declared == "satisfies":
            return "yes" if r.holds else "VIOLATED"
        if r.declared == "fails":
            return "(yes)" if r.holds else "no"
        return "yes?" if r.holds else "no?"

    w = max(len(m) for m in rows) + 2
    widths = [max(len(a), 8) + 2 for a in axioms]
    lines = [f"axiom battery (docs/spec.md): {trials} random pairs per check, seed {seed}, float64, gauge check under metric {metric}",
             "".ljust(w) + "".join(a.ljust(n) for a, n in zip(axioms, widths))]
    lines += [m.ljust(w) + "".join(mark(cell[m, a]).ljust(n) for a, n in zip(axioms, widths)) for m in rows]
    lines.append("yes: declared and holds; no: fails by design, counterexample found; (yes): declared to fail, "
                 "held on these pairs; yes?/no?: undeclared; VIOLATED: declared, yet broken")
    failing = [r for r in results if r.declared == "fails"]
    if failing:
        lines.append("fails by design:")
        reasons = dict.fromkeys((r.axiom, r.reason) for r in failing if r.axiom == "gauge")
        lines += [f"  every measure / {ax}: {why}" for ax, why in reasons]
        flips = [f"{r.measure} {r.detail.split(' orderings')[0].replace(' of ', '/')}" for r in failing
                 if r.axiom == "gauge" and r.detail]
        if flips:
            lines.append("    orderings flipped: " + ", ".join(flips))
        lines += [f"  {r.measure} / {r.axiom}: {r.reason}" for r in failing if r.axiom != "gauge"]
    broken = [r for r in results if r.violated]
    if broken:
        lines.append("violations:")
        lines += [f"  {r.measure} / {r.axiom}: deviation {r.worst:.3g} ({r.detail})" for r in broken]
    return "\n".join(lines)
