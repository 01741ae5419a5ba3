"""compscope.engine.batch_eig against numpy's LAPACK eigvalsh in float64, on hard and easy spectra.

Tolerances: the error bound of a backward-stable method, ``c · ε · ‖M‖₂`` (``ε`` the unit
roundoff of the dtype), with ``c = 64`` for float32 and ``c = 256`` for float64 (n ≤ 128),
and an absolute floor of ``2²¹`` times the dtype's smallest normal number (the solver's
pivot and bracket floor).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope.engine import batch_eig

EPS = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}
C = {torch.float32: 64, torch.float64: 256}


def _sym(eigs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``Q diag(eigs) Qᵀ`` with a Haar-random orthogonal ``Q``, batched over the first axis."""
    n = eigs.shape[-1]
    q, r = np.linalg.qr(rng.standard_normal((eigs.shape[0], n, n)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]
    return (q * eigs[:, None, :]) @ q.transpose(0, 2, 1)


def _check(M64: np.ndarray, dtype: torch.dtype) -> None:
    M = torch.from_numpy(M64).to(dtype)
    exact = np.linalg.eigvalsh(M.double().numpy())  # of the rounded input
    got = batch_eig.eigvalsh(M.clone()).double().numpy()
    scale = np.abs(exact).max(-1, keepdims=True)
    err = np.abs(got - exact)
    floor = float(torch.finfo(dtype).tiny) * 2**21
    assert (err <= C[dtype] * EPS[dtype] * scale + floor).all(), f"max error / ‖M‖ = {(err / np.maximum(scale, floor)).max():.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [2, 3, 5, 17, 64, 80, 128])
def test_random_symmetric(dtype, n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((20, n, n))
    _check((A + A.transpose(0, 2, 1)) / 2, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_x_route_s_matrices(dtype):
    """``C Cᵀ`` of cores with spread singular values, some of them rank deficient (clusters at 0)."""
    rng = np.random.default_rng(0)
    core = rng.standard_normal((64, 64, 64)) * rng.random((64, 1, 64))
    core[:16, :, 40:] = 0
    core[16:20] *= 1e-6  # tiny entries next to normal ones in the same batch
    _check(core @ core.transpose(0, 2, 1), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clustered_and_repeated_eigenvalues(dtype):
    rng = np.random.default_rng(1)
    eigs = np.stack([
        np.ones(32), np.zeros(32), np.r_[np.zeros(16), np.ones(16)], np.r_[np.full(31, 2.0), -1.0],
        np.r_[1 + 1e-9 * np.arange(32)], np.geomspace(1e-12, 1, 32), -np.geomspace(1e-3, 1e3, 32),
    ])
    _check(_sym(eigs, rng), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_structured_matrices(dtype):
    n = 24
    diag = np.diag(np.arange(n, 0, -1.0))  # no reflection needed: every column already reduced
    tri = np.diag(np.full(n, 2.0)) - np.diag(np.ones(n - 1), 1) - np.diag(np.ones(n - 1), -1)
    ones = np.ones((n, n))  # rank one
    _check(np.stack([diag, tri, ones, np.zeros((n, n)), -tri]), dtype)
    # the discrete Laplacian's closed form: 2 − 2 cos(kπ/(n+1))
    got = batch_eig.eigvalsh(torch.from_numpy(tri[None]).to(dtype)).double().numpy()[0]
    closed = 2 - 2 * np.cos(np.arange(1, n + 1) * np.pi / (n + 1))
    np.testing.assert_allclose(got, closed, rtol=0, atol=C[dtype] * EPS[dtype] * 4)


@pytest.mark.parametrize("scale", [1e-30, 1e-8, 1e8, 1e30])
def test_scale(scale):
    """Entries far from 1 either way, in float32 too (whose squares under- or overflow from about 1e±19 on,
    but for the exact power-of-two scaling to entries of order one before the reduction)."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((8, 40, 40))
    for dtype in (torch.float64, torch.float32):
        _check((A + A.transpose(0, 2, 1)) * scale, dtype)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 2**32 - 1), spread=st.floats(0, 12), dt=st.sampled_from([torch.float32, torch.float64]))
def test_property_any_spectrum(n, seed, spread, dt):
    """Eigenvalues of either sign over up to 12 decades, Haar-random eigenvectors."""
    rng = np.random.default_rng(seed)
    eigs = rng.choice([-1.0, 1.0], (3, n)) * 10.0 ** (-spread * rng.random((3, n)))
    _check(_sym(eigs, rng), dt)


def test_ascending_fallbacks_and_empty():
    M = torch.tensor([[[2.0, 1.0], [1.0, 2.0]]], dtype=torch.float64)
    assert batch_eig.eigvalsh(M.clone())[0].tolist() == pytest.approx([1.0, 3.0], abs=1e-15)
    assert batch_eig.eigvalsh(torch.ones(3, 1, 1)).tolist() == [[1.0], [1.0], [1.0]]  # n = 1: torch
    assert batch_eig.eigvalsh(torch.zeros(0, 5, 5)).shape == (0, 5)


def test_only_what_it_does_not_solve_goes_to_lapack(monkeypatch):
    """Batches of float32 or float64 symmetric ``n × n`` matrices, ``n ≥ 2``, on the CPU are solved here
    (the X route's speed rests on it); ``n = 1``, a single matrix, a batch of batches and other dtypes go
    to ``torch.linalg.eigvalsh``, with the same answer."""
    calls, real = [], torch.linalg.eigvalsh
    monkeypatch.setattr(torch.linalg, "eigvalsh", lambda M: calls.append((tuple(M.shape), M.dtype)) or real(M))
    M = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        assert batch_eig.eigvalsh(M[None].to(dtype, copy=True))[0].tolist() == pytest.approx([1.0, 3.0], abs=1e-6)
    assert calls == []
    for A, want in ((torch.ones(3, 1, 1), [1.0] * 3), (M.clone(), [1.0, 3.0]), (M[None, None].clone(), [1.0, 3.0]),
                    (M[None].to(torch.complex128), [1.0, 3.0])):
        assert batch_eig.eigvalsh(A).reshape(-1).tolist() == pytest.approx(want, abs=1e-12)
    assert calls == [((3, 1, 1), torch.float32), ((2, 2), torch.float64), ((1, 1, 2, 2), torch.float64),
                     ((1, 2, 2), torch.complex128)]
    # a batch not contiguous in memory (every other matrix of a larger one), at a scale far from 1: solved here too
    A = np.random.default_rng(5).standard_normal((6, 9, 9)) * 1e6
    S = torch.from_numpy(A + A.transpose(0, 2, 1))[::2]
    assert not S.is_contiguous()
    want = torch.from_numpy(np.linalg.eigvalsh(S.numpy()))
    bound = C[torch.float64] * EPS[torch.float64] * float(want.abs().max())  # as _check's (which makes S contiguous)
    torch.testing.assert_close(batch_eig.eigvalsh(S), want, rtol=0, atol=bound)
    assert len(calls) == 4


def test_concurrent_calls():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((200, 64, 64))
    M = torch.from_numpy(A + A.transpose(0, 2, 1))
    want = torch.linalg.eigvalsh(M)
    got, errors = {}, []

    def run(i):
        try:
            got[i] = batch_eig.eigvalsh(M.clone())
        except Exception as e:  # noqa: BLE001 - re-raised in the main thread  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert len(got) == 4
    for g in got.values():
        torch.testing.assert_close(g, want, rtol=0, atol=1e-11)


def test_the_x_route_falls_back_to_lapack_without_numba(monkeypatch):
    """Where numba cannot be imported, the X route warns once and uses LAPACK: same spectra."""
    import sys

    import compscope.engine
    from compscope.engine import x_route

    rng = np.random.default_rng(4)
    C = torch.from_numpy(rng.standard_normal((30, 16, 16)))
    want = x_route.core_sv2(C.clone())
    monkeypatch.setattr(x_route, "_BATCH_EIG", None)
    monkeypatch.setitem(sys.modules, "compscope.engine.batch_eig", None)  # `import` now raises ImportError
    monkeypatch.delattr(compscope.engine, "batch_eig", raising=False)
    with pytest.warns(RuntimeWarning, match="numba is unusable"):
        got = x_route.core_sv2(C.clone())
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12 * float(want.max()))
    assert x_route._BATCH_EIG is False


def test_sturm_counts_a_pivot_it_replaces():
    """At a shift where a pivot is exactly 0 the count must include it (LAPACK ``dlaebz``):
    ``[[1, ½], [½, 2]]`` has eigenvalues 1.5 ∓ √½, so one of them lies below ``x = 1``, where
    ``q_0 = 0`` (a count that skipped the replaced pivot said 0)."""
    d, e2 = np.array([1.0, 2.0]), np.array([0.25, 0.0])
    x = np.array([1.0, 2.5])  # one shift per eigenvalue, as the solver calls it
    t, c = np.empty(2), np.empty(2)
    batch_eig._sturm(d, e2, x, t, c, 1e-300, 0.0, 1.0)
    want = [(np.array([1.5 - 0.5**0.5, 1.5 + 0.5**0.5]) < xi).sum() for xi in x]
    assert c.tolist() == want == [1, 2]
