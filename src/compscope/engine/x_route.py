"""The X route: ``X = V_Bᵀ U_A`` per pair, and the spectra of the composed cores.

For bandwidth and spectral, and for every measure when ``pairs='all'``. For
``pairs='all'`` one block matrix multiply per reader layer and kind, ``V_{l2}ᵀ U_{<l2}``
(``(H r) × (n_w r)``, in writer chunks that fit ``max_memory``), read as per-pair ``r × r``
blocks; ``‖BA‖_F²`` and ``‖X‖_F²`` come from the same blocks, so the gram route is skipped.
Otherwise ``X`` for the top ``pairs`` pairs by ``frobenius``. The squared singular values
of the core ``C = diag(b) X diag(a)`` are the eigenvalues of ``C Cᵀ``: on the CPU by
:mod:`compscope.engine.batch_eig` (tridiagonalisation and bisection, many matrices at once, about 2×
faster per thread than LAPACK one matrix at a time in float32; ``bench/cpu_limits.py``
section 1), also for ``X`` formed on a GPU (the ``C Cᵀ`` are copied over; a GPU's batched
``eigvalsh`` is far slower at these sizes).
"""

from __future__ import annotations

import warnings
from types import ModuleType

import torch
from torch import Tensor

from .head_svd import Sides, head_sides
from .threads import threaded
from ..measures import Measure, PairSpectra
from .workspace import Workspace

_F64 = torch.float64
_BATCH_EIG: ModuleType | bool | None = None  # the module once imported; False if numba is unusable


def lapack_eigvalsh(G: Tensor) -> Tensor:
    """Ascending eigenvalues of the batch ``G`` by LAPACK, one matrix at a time, the batch split
    over torch's threads (the fallback where numba is unusable)."""
    return threaded(torch.linalg.eigvalsh, G)


def eigvalsh(G: Tensor) -> Tensor:
    """Ascending eigenvalues of the symmetric batch ``G`` (overwritten): ``batch_eig``
    (numba, imported on first use), or LAPACK one matrix at a time, with a warning, where
    numba cannot be imported (no wheel for the platform, or a broken install; a read-only
    install folder is fine: numba then caches elsewhere or compiles per process). A batch on
    another device is solved on the CPU and sent back: a GPU's batched ``eigvalsh`` above 32 × 32
    goes one matrix at a time, tens of times slower (``bench/RESULTS.md``, "CUDA")."""
    if G.device.type != "cpu":
        return eigvalsh(G.cpu()).to(G.device)
    global _BATCH_EIG
    if _BATCH_EIG is None:
        try:
            from . import batch_eig

            _BATCH_EIG = batch_eig
        except (ImportError, RuntimeError, OSError) as e:
            warnings.warn(f"compscope: numba is unusable here ({type(e).__name__}: {e}); the X route's "
                          "eigenvalues fall back to LAPACK, one matrix at a time (slower)", RuntimeWarning, stacklevel=2)
            _BATCH_EIG = False
    if _BATCH_EIG is False:
        return lapack_eigvalsh(G)
    return _BATCH_EIG.eigvalsh(G)


def core_sv2(C: Tensor, out: Tensor | None = None) -> Tensor:
    """Squared singular values of the cores ``C: (n, r_B, r_A)`` (``diag(b) X diag(a)``),
    descending: eigenvalues of ``C Cᵀ`` (or ``Cᵀ C``, the smaller; formed in ``out`` if
    given, which the solver overwrites)."""
    G = torch.bmm(C, C.mT, out=out) if C.shape[-2] <= C.shape[-1] else torch.bmm(C.mT, C, out=out)
    return eigvalsh(G).flip(-1).clamp_min(0).to(_F64)


def x_all(W: Sides, R: Sides, j: int, l2: int, budget: int, x_ms: list[Measure], out: dict[str, Tensor],
           ba2: Tensor, x2: Tensor, expected: Tensor | None, d: int, chunk_bytes: int = 4 << 20,
           ws: Workspace | None = None) -> None:
    """Every ``X`` of reader layer ``l2`` (index ``j`` in ``R``) against writer layers ``< l2``:
    ``V_{l2}ᵀ U_{<l2}`` in writer chunks of about ``chunk_bytes`` (cache-sized; at most
    ``budget``), each one matrix multiply into a reused buffer (from ``ws`` when given). Fills
    ``[:l2, :, l2]`` of ``ba2``, ``x2`` and of each X-route measure's ``out``."""
    H, r = R.rows.shape[1], R.rows.shape[2]
    Vt = R.rows[j].reshape(H * r, -1)
    b = R.spectrum[j]  # (H, r)
    Ut = W.rows[:l2].flatten(0, 1)  # (n, r, d)
    a, rank = W.spectrum[:l2].flatten(0, 1), W.rank[:l2].flatten()
    n, dt = Ut.shape[0], Ut.dtype
    step = max(1, min(n, min(budget, chunk_bytes) // (H * r * r * Ut.element_size())))
    size = H * step * r * r  # buffers reused by every chunk (fresh large tensors cost page faults)
    ws = ws or Workspace()
    xbuf, pbuf, cbuf, gbuf = (ws.take(name, (size,), dt, Ut.device) for name in ("X product", "X blocks", "cores", "core Grams"))
    res = {k: torch.empty(H, n, dtype=_F64, device=Ut.device) for k in ["ba2", "x2"] + [m.name for m in x_ms]}
    e = None if expected is None else expected.flatten(0, 1).T.to(Ut.device)  # (H, n)
    bw = b.to(dt)[:, None, :, None]
    for c0 in range(0, n, step):
        c1, c = min(n, c0 + step), min(n, c0 + step) - c0
        k = H * c * r * r
        Xm = torch.mm(Vt, Ut[c0:c1].flatten(0, 1).T, out=xbuf[:k].view(H * r, c * r))
        X = pbuf[:k].view(H, c, r, r).copy_(Xm.view(H, r, c, r).permute(0, 2, 1, 3))  # (H, c, r_B, r_A)
        res["x2"][:, c0:c1] = torch.linalg.vector_norm(X, dim=(-2, -1)).square()
        C = torch.mul(X, a[c0:c1].to(dt)[None, :, None, :], out=cbuf[:k].view(H, c, r, r)).mul_(bw)  # diag(b) X diag(a)
        res["ba2"][:, c0:c1] = torch.linalg.vector_norm(C, dim=(-2, -1)).square()
        pa, pb = a[None, c0:c1].expand(H, c, r).reshape(-1, r), b[:, None].expand(H, c, r).reshape(-1, r)
        p = PairSpectra(pa, pb, X.view(-1, r, r), d, rank[None, c0:c1].expand(H, c).reshape(-1),
                        None if e is None else e[:, c0:c1].reshape(-1), core_sv2=core_sv2(C.view(-1, r, r), gbuf[:k].view(-1, r, r)),
                        b_top=R.top[j][:, None].expand(H, c).reshape(-1))
        for m in x_ms:
            res[m.name][:, c0:c1] = m.exact(p).to(_F64).view(H, c)
    ba2[:l2, :, l2] = res.pop("ba2").view(H, l2, H).permute(1, 2, 0).cpu()
    x2[:l2, :, l2] = res.pop("x2").view(H, l2, H).permute(1, 2, 0).cpu()
    for name, v in res.items():
        out[name][:l2, :, l2] = v.view(H, l2, H).permute(1, 2, 0).cpu()


def x_pairs(hw, met, offset, kind, sel, per_layer_metric, bases, dtype, device, chunk: int = 4096) -> tuple[Tensor, Tensor]:
    """``X`` and the core's squared singular values for the pairs ``sel: (n, 4)``, on the CPU."""
    Xs, ss = [], []
    for i in range(0, len(sel), chunk):
        s = sel[i : i + chunk].to(device)
        if per_layer_metric:  # bases depend on the reader layer: one SVD pass per (writer, reader) layer pair
            r, d = hw.d_head, hw.d_model
            UA, VB = (torch.empty(len(s), r, d, dtype=dtype, device=device) for _ in range(2))
            a, b = (torch.empty(len(s), r, dtype=_F64, device=device) for _ in range(2))
            for l1, l2 in torch.unique(s[:, [0, 2]], dim=0).tolist():
                at = ((s[:, 0] == l1) & (s[:, 2] == l2)).nonzero().flatten()
                sd = head_sides(hw, ("W", kind), met, offset, {"W": range(l1, l1 + 1), kind: range(l2, l2 + 1)}, dtype, l2,
                                device=device)
                UA[at], a[at] = sd["W"].rows[0, s[at, 1]], sd["W"].spectrum[0, s[at, 1]]
                VB[at], b[at] = sd[kind].rows[0, s[at, 3]], sd[kind].spectrum[0, s[at, 3]]
        else:
            W, R = bases["W"], bases[kind]
            UA, a = W.rows[s[:, 0], s[:, 1]], W.spectrum[s[:, 0], s[:, 1]]
            VB, b = R.rows[s[:, 2] - 1, s[:, 3]], R.spectrum[s[:, 2] - 1, s[:, 3]]
        X = VB @ UA.mT
        Xs.append(X.cpu())
        ss.append(core_sv2(X * b.to(X.dtype)[:, :, None] * a.to(X.dtype)[:, None, :]).cpu())
    return torch.cat(Xs), torch.cat(ss)


def at_pairs(t: Tensor, sel: Tensor) -> Tensor:
    """``t[l1, h1, l2, h2]`` for ``sel: (n, 4)``; ``t`` may be broadcast in its writer
    (``(1, 1, L, H, ...)``) or reader (``(L, H, 1, 1, ...)``) dimensions."""
    i = [sel[:, j] if t.shape[j] > 1 else torch.zeros_like(sel[:, j]) for j in range(4)]
    return t[i[0], i[1], i[2], i[3]]
