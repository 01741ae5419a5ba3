"""Eigenvalues of many small symmetric matrices at once, on the CPU.

LAPACK solves a batch of ``64 × 64`` symmetric eigenproblems one matrix at a time at
about 100 µs each (``dsytrd`` then ``dsterf``: call overheads and scalar code at this size);
the X route needs one per pair (28 512 for GPT-2-small shape, Q+K+V). Here each matrix is
reduced to tridiagonal form ``T = Qᵀ M Q`` by Householder reflections (vector loops along
rows, two rows at a time), and all ``n`` eigenvalues of ``T`` are found together by
bisection on Sturm counts: ``count(x) = #{i : q_i(x) ≤ 0}``, ``q_0 = d_0 − x``,
``q_i = d_i − x − e_{i−1}² / q_{i−1}`` (LAPACK's ``dlaebz`` recurrence with its pivot
guard), vectorised across the ``n`` shifts. A first pass counts at ``n`` evenly spaced
points of the Gershgorin interval ``[g_l, g_u]``, so each eigenvalue starts in a bracket
of width ``(g_u − g_l)/(n + 1)``; bisection then halves the brackets until they are below
``2 ε max(|g_l|, |g_u|)`` (``ε`` the dtype's unit roundoff; looser brackets cost the
entropy in ``bandwidth`` visible accuracy through its small eigenvalues). Eigenvalue ``k``
(ascending) is the midpoint of its bracket: within ``ε max|g|`` of an eigenvalue of ``T``,
on top of the reduction's rounding (backward stable). Measured on the X route's ``C Cᵀ``
(64 × 64): errors of ≈ 4e-7 ‖M‖ in float32 and ≈ 4e-15 ‖M‖ in float64, against LAPACK's
1.4e-6 and ~1e-16 (``tests/test_batch_eig.py`` bounds them by ``64 ε ‖M‖`` and
``256 ε ‖M‖``). Results do not depend on thread count or buffer alignment. Batches run on
numba's threads (at most torch's thread count), a few runs of matrices per thread;
``bench/cpu_limits.py`` section 1 times it against LAPACK.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import torch
from torch import Tensor

# numba's default threading layer must not be entered from two Python threads at once
_LOCK = threading.Lock()
_FAST = {"contract", "nsz", "arcp", "reassoc"}


@numba.njit(fastmath=_FAST, inline="always")
def _tridiagonalise(a, d, e, v, p, zero, half, two):  # pragma: no cover - compiled
    """``a`` (full symmetric, overwritten) → diagonal ``d`` and off-diagonal ``e``. The
    products over a row run from a multiple of 16 (``v`` and ``p`` are zero before the
    active part): loops of fixed-width blocks, which the vectoriser runs in full vectors
    (short loops with an arbitrary start fell to scalar remainders)."""
    n = a.shape[0]
    for j in range(n):
        v[j] = zero
        p[j] = zero
    for k in range(n - 2):
        k1 = k + 1
        s0 = k1 - k1 % 16
        m = n - s0
        rk = a[k]
        s = zero
        for jj in range(1, n - k1):
            s += rk[jj + k1] * rk[jj + k1]
        x0 = rk[k1]
        nrm = np.sqrt(s + x0 * x0)
        al = -nrm if x0 >= zero else nrm
        v0 = x0 - al
        ok = s > zero
        tau = two / (s + v0 * v0) if ok else zero
        e[k] = al if ok else x0
        d[k] = rk[k]
        v[k] = zero
        p[k] = zero
        for jj in range(n - k1):
            v[jj + k1] = rk[jj + k1]
        v[k1] = v0
        K = zero
        i = k1
        while i + 1 < n:  # p = τ A₂₂ v, two rows at a time
            r0 = a[i]
            r1 = a[i + 1]
            acc0 = zero
            acc1 = zero
            for jj in range(m):
                vj = v[jj + s0]
                acc0 += r0[jj + s0] * vj
                acc1 += r1[jj + s0] * vj
            p[i] = acc0 * tau
            p[i + 1] = acc1 * tau
            K += v[i] * p[i] + v[i + 1] * p[i + 1]
            i += 2
        if i < n:
            row = a[i]
            acc = zero
            for jj in range(m):
                acc += row[jj + s0] * v[jj + s0]
            p[i] = acc * tau
            K += v[i] * p[i]
        K *= half * tau
        for jj in range(n - k1):  # w = p − (τ vᵀp / 2) v
            p[jj + k1] -= K * v[jj + k1]
        i = k1
        while i + 1 < n:  # A₂₂ −= v wᵀ + w vᵀ, two rows at a time
            r0 = a[i]
            r1 = a[i + 1]
            v0_, p0, v1, p1 = v[i], p[i], v[i + 1], p[i + 1]
            for jj in range(m):
                pj, vj = p[jj + s0], v[jj + s0]
                r0[jj + s0] -= v0_ * pj + p0 * vj
                r1[jj + s0] -= v1 * pj + p1 * vj
            i += 2
        if i < n:
            row = a[i]
            vi, pi = v[i], p[i]
            for jj in range(m):
                row[jj + s0] -= vi * p[jj + s0] + pi * v[jj + s0]
    if n >= 2:
        d[n - 2] = a[n - 2, n - 2]
        e[n - 2] = a[n - 2, n - 1]
    d[n - 1] = a[n - 1, n - 1]


@numba.njit(fastmath=_FAST, inline="always")
def _sturm(d, e2, x, t, c, piv, zero, one):  # pragma: no cover - compiled
    """``c[k] = #{i : q_i(x_k) ≤ piv}`` for the tridiagonal ``(d, e²)`` (pivots kept ≥ piv in size)."""
    n = d.shape[0]
    d0 = d[0]
    for k in range(n):
        tt = d0 - x[k]
        c[k] = one if tt <= piv else zero
        t[k] = tt if tt > piv else min(tt, -piv)
    for i in range(1, n):
        di, ei = d[i], e2[i - 1]
        for k in range(n):
            tt = di - x[k] - ei / t[k]
            c[k] += one if tt <= piv else zero
            t[k] = tt if tt > piv else min(tt, -piv)


@numba.njit(fastmath=_FAST, inline="always")
def _bisect(d, e, e2, x, t, c, lo, hi, o, zero, half, one, two, eps, tiny):  # pragma: no cover - compiled
    """Every eigenvalue of the tridiagonal ``(d, e)`` into ``o``, ascending: counts on an even
    grid of the Gershgorin interval give each a bracket, which bisection halves until it is
    below ``2 ε max|g|``. ``e2, x, t, c, lo, hi``: scratch vectors."""
    n = d.shape[0]
    # Gershgorin interval, widened by the rounding of its ends
    gl, gu, emax = d[0], d[0], zero
    for i in range(n):
        r = (abs(e[i - 1]) if i > 0 else zero) + (abs(e[i]) if i < n - 1 else zero)
        gl = min(gl, d[i] - r)
        gu = max(gu, d[i] + r)
    for i in range(n - 1):
        e2[i] = e[i] * e[i]
        emax = max(emax, e2[i])
    big = max(abs(gl), abs(gu))
    pad = eps * (gu - gl + big) + tiny
    gl, gu = gl - pad, gu + pad
    piv = tiny * max(one, emax)
    step = (gu - gl) / (n + 1)
    for k in range(n):  # first pass: n evenly spaced points
        x[k] = gl + (k + 1) * step
    _sturm(d, e2, x, t, c, piv, zero, one)
    for k in range(n):  # brackets with count(lo) ≤ k < count(hi)
        lo[k] = gl
        hi[k] = gu
    for j in range(n):
        xj, cj = x[j], c[j]
        for k in range(n):
            below = cj <= k
            lo[k] = max(lo[k], xj) if below else lo[k]
            hi[k] = hi[k] if below else min(hi[k], xj)
    for rep in range(200):
        width = zero
        for k in range(n):
            width = max(width, hi[k] - lo[k])
        if width <= two * eps * big or width <= tiny:
            break
        for k in range(n):
            x[k] = half * (lo[k] + hi[k])
        _sturm(d, e2, x, t, c, piv, zero, one)
        for k in range(n):
            up = c[k] > k
            hi[k] = x[k] if up else hi[k]
            lo[k] = lo[k] if up else x[k]
    for k in range(n):
        o[k] = half * (lo[k] + hi[k])


@numba.njit(parallel=True, fastmath=_FAST, cache=True)
def _eigvalsh_kernel(A, out, zero, half, one, two, eps, tiny, chunks):  # pragma: no cover - compiled
    """``out[g]`` = ascending eigenvalues of ``A[g]`` (overwritten), in ``chunks`` tasks. The
    constants come in ``A``'s dtype so that float32 arithmetic stays float32."""
    N, n = A.shape[0], A.shape[1]
    for ch in numba.prange(chunks):
        d = np.zeros(n, A.dtype)
        e = np.zeros(n, A.dtype)
        v = np.zeros(n, A.dtype)
        p = np.zeros(n, A.dtype)
        e2 = np.zeros(n, A.dtype)
        x = np.empty(n, A.dtype)
        t = np.empty(n, A.dtype)
        c = np.empty(n, A.dtype)
        lo = np.empty(n, A.dtype)
        hi = np.empty(n, A.dtype)
        for g in range(ch * N // chunks, (ch + 1) * N // chunks):  # every entry read is rewritten per matrix
            _tridiagonalise(A[g], d, e, v, p, zero, half, two)
            _bisect(d, e, e2, x, t, c, lo, hi, out[g], zero, half, one, two, eps, tiny)


def _pow2_scale(M: Tensor) -> Tensor:
    """Per matrix of ``M: (N, n, n)``, a power of two within a factor 2 of its largest ``|entry|``
    (1 where that is 0 or not finite): dividing by it is exact and keeps the reduction's sums of
    squares in range."""
    m = M.flatten(1).abs().amax(1)
    ok = torch.isfinite(m) & (m > 0)
    return torch.where(ok, torch.exp2(torch.floor(torch.log2(torch.where(ok, m, 1.0)))), 1.0)


#: tasks per thread: each allocates its scratch vectors once and solves a contiguous run of matrices
_CHUNKS_PER_THREAD = 4


def eigvalsh(M: Tensor) -> Tensor:
    """Eigenvalues, ascending, of the symmetric ``M: (N, n, n)`` (float32 or float64, CPU; both
    triangles are read, so ``M`` must be symmetric, not just one triangle of it as for
    ``torch.linalg.eigvalsh``; ``M`` is overwritten). Other devices, dtypes and ``n < 2`` go
    to ``torch.linalg.eigvalsh``."""
    if M.ndim != 3 or M.shape[-1] < 2 or M.device.type != "cpu" or M.dtype not in (torch.float32, torch.float64):
        return torch.linalg.eigvalsh(M)
    if M.shape[0] == 0:
        return M.new_empty(M.shape[:2])
    # exact power-of-two scaling to entries of order one: the sums of squares in the reduction
    # stay in range for any ‖M‖ the dtype can hold (float32 overflowed from ‖M‖ ≈ 1e19 on)
    s = _pow2_scale(M)
    A = (M.detach().contiguous().div_(s[:, None, None]) if M.is_contiguous() else M.detach() / s[:, None, None]).numpy()
    out = np.empty(A.shape[:2], A.dtype)
    t = A.dtype.type
    fi = np.finfo(A.dtype)
    with _LOCK:
        numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))
        tasks = _CHUNKS_PER_THREAD * numba.get_num_threads()
        _eigvalsh_kernel(A, out, t(0), t(0.5), t(1), t(2), t(fi.eps / 2), t(fi.tiny * 2 ** 20), tasks)
    return torch.from_numpy(out).mul_(s[:, None])
