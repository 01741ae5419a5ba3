"""Benchmark: the CPU limits behind the engine's ratios to its floors, and ideas that did not help.

    .venv/bin/python bench/cpu_limits.py [--repeats 5] [--sections 1,1b,...]

Prints, on this machine, in one run (medians of ``--repeats``; the machine may be shared, so it
first waits for an idle CPU like the other benchmarks):

1. symmetric eigenvalues of 64 x 64 matrices, per matrix, one call per batch of 4096 (``--batch``; the X
   route needs one per pair): torch ``eigvalsh`` float32/float64, numpy, ``svdvals`` of the core,
   SciPy's LAPACK drivers one matrix at a time, and the two stages (``dsytrd``, ``dsterf``);
   compscope's ``batch_eig`` (what the engine uses) on one thread and on torch's threads; the
   errors against LAPACK float64; batch_eig's first call in a new process (compile, cache);
1c. the per-head SVD cores (``head_svd._svd_cores``): ``eigh`` of 128 x 128 float64 matrices in
   chunks of 64 (the engine's) and all 2,048 of the 7B shape at once (``--cores``), as one call (torch's threads
   inside LAPACK), over compscope's pool (one core per thread) and over as many Python threads
   left at torch's count (the pool before 2026-11-27: a threaded LAPACK in each thread);
1b. (b) on the GPT-2-small and -medium shapes with ``batch_eig`` and with LAPACK's ``eigvalsh``
   (the batch split over torch's threads, as the engine did before), interleaved;
2. float32 matmul rates: the 4096² reference (torch's MKL and numpy's OpenBLAS) and the shapes
   the Gram route runs (batched ``(128 x 64)(64 x 128)`` tiles, ``(72 x 8192)(8192 x 120)``
   pair products), with torch's two threads and as two Python threads of one thread each;
3. ``bmm`` writing 7 x 67 MB of bases into fresh memory, memory mapped with ``MAP_POPULATE``,
   and memory already mapped;
4. (a) on the GPT-2-small shape for several Gram tile shapes, and right after another process
   allocated and freed 8 GiB (what a TransformerLens run does);
4b. (a) on the GPT-2-small and -medium shapes for several sizes of the reader groups;
5. where (a)'s time goes on that shape: the per-head SVDs, the Gram tiles, the Haar baseline;
   and (b)'s, small and medium: the X products, the batched products, the eigenvalues;
5b. fresh memory faulted in per (a) call, with nothing kept between calls and with the workspace;
6. the matrix multiplies inside (a), small and medium: every ``torch.bmm``, ``torch.mm`` and
   ``Tensor.addmm_`` of one ``compscope.scores`` call is clocked; printed are their time, the
   FLOPs they do (from their shapes) against the floor's count, their rate against the 4096²
   matmul timed just before, and their time against the floor: what the engine's products
   alone cost through MKL on this machine, whatever the rest of the engine costs.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import compscope
from compscope.engine import batch_eig

sys.path.insert(0, os.path.dirname(__file__))
from composition_speed import MEASURES_A, random_heads, wait_idle  # noqa: E402


def timed(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def eigen(repeats: int, n: int = 4096) -> None:
    try:
        import scipy.linalg.lapack as la  # installed by `make test` (a dependency of the MiniLM package)
    except ImportError:
        la = None
    g = torch.Generator().manual_seed(0)
    C = torch.randn(n, 64, 64, generator=g)
    G32 = C @ C.mT
    G64 = G32.double()
    g64 = G64.numpy()
    runs = {
        "torch eigvalsh float32": lambda: torch.linalg.eigvalsh(G32),
        "torch eigvalsh float64": lambda: torch.linalg.eigvalsh(G64),
        "numpy eigvalsh float64": lambda: np.linalg.eigvalsh(g64),
        "torch svdvals of the core (float32)": lambda: torch.linalg.svdvals(C),
    }

    def ours(G: torch.Tensor, threads: int):
        def run():
            was = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                return batch_eig.eigvalsh(G.clone())  # it overwrites its input: timed with the copy
            finally:
                torch.set_num_threads(was)
        return run

    nt = torch.get_num_threads()
    runs.update({
        "compscope batch_eig float32, 1 thread": ours(G32, 1),
        "compscope batch_eig float64, 1 thread": ours(G64, 1),
        f"compscope batch_eig float32, {nt} threads": ours(G32, nt),
        f"compscope batch_eig float64, {nt} threads": ours(G64, nt),
    })
    if la is not None:
        tri = [la.dsytrd(m, lower=1)[1:3] for m in g64]
        runs.update({
            "SciPy dsyevd, one call per matrix": lambda: [la.dsyevd(m, compute_v=0) for m in g64],
            "SciPy dsyevr, one call per matrix": lambda: [la.dsyevr(m, compute_v=0) for m in g64],
            "  of which dsytrd (tridiagonalise)": lambda: [la.dsytrd(m, lower=1) for m in g64],
            "  of which dsterf (its eigenvalues)": lambda: [la.dsterf(d, e) for d, e in tri],
        })
    print(f"\n1. eigenvalues of 64 x 64 symmetric matrices ({n} per call, torch threads {torch.get_num_threads()})")
    for name, fn in runs.items():
        print(f"  {name:<40} {timed(fn, repeats) / n * 1e6:7.1f} us per matrix")
    exact = torch.linalg.eigvalsh(G64)
    scale = exact.abs().amax(-1, keepdim=True)
    print("  max error / max|eigenvalue| against LAPACK float64 on the same (float32-rounded) matrices:")
    for name, got in (("torch eigvalsh float32", torch.linalg.eigvalsh(G32)), ("compscope batch_eig float32", batch_eig.eigvalsh(G32.clone())),
                      ("compscope batch_eig float64", batch_eig.eigvalsh(G64.clone()))):
        print(f"  {name:<40} {float(((got.double() - exact).abs() / scale).max()):.1e}")
    code = ("import time, torch; from compscope.engine import batch_eig; G = torch.randn(8, 64, 64); G = G @ G.mT; "
            "t = time.perf_counter(); batch_eig.eigvalsh(G.clone()); batch_eig.eigvalsh(G.double()); print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        first, again = (float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
                        for _ in range(2))
    print(f"  first call of batch_eig in a new process, float32 + float64: {first:.1f} s with an empty numba cache "
          f"(compiling), {again:.2f} s with it filled")


def matmul(repeats: int) -> None:
    print("\n2. float32 matmul rates (GFLOP/s)")
    n = 4096
    a, b = torch.randn(n, n), torch.randn(n, n)
    an, bn = a.numpy(), b.numpy()
    print(f"  4096^2, torch (MKL)                      {2 * n**3 / timed(lambda: a @ b, repeats) / 1e9:6.0f}")
    print(f"  4096^2, numpy (its BLAS)                 {2 * n**3 / timed(lambda: an @ bn, repeats) / 1e9:6.0f}")
    A, B, O = [torch.randn(72, 8192) for _ in range(2)], [torch.randn(8192, 120) for _ in range(2)], [torch.zeros(72, 120) for _ in range(2)]
    x, y, z = [torch.randn(132, 128, 64) for _ in range(2)], [torch.randn(132, 64, 128) for _ in range(2)], [torch.empty(132, 128, 128) for _ in range(2)]
    f_pair, f_tile = 72 * 8192 * 120 * 2, 132 * 128 * 128 * 64 * 2
    print(f"  pair product (72 x 8192)(8192 x 120)     {f_pair / timed(lambda: O[0].addmm_(A[0], B[0]), repeats * 10) / 1e9:6.0f}")
    print(f"  tiles 132 x (128 x 64)(64 x 128)         {f_tile / timed(lambda: torch.bmm(x[0], y[0], out=z[0]), repeats * 10) / 1e9:6.0f}")

    def work(i: int) -> None:
        for _ in range(20):
            O[i].addmm_(A[i], B[i])
            torch.bmm(x[i], y[i], out=z[i])

    flops = 2 * 20 * (f_pair + f_tile)
    both = timed(lambda: (work(0), work(1)), repeats)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    pool = ThreadPoolExecutor(2)
    split = timed(lambda: list(pool.map(work, [0, 1])), repeats)
    alone = timed(lambda: work(0), repeats)
    torch.set_num_threads(threads)
    print(f"  both shapes, torch's {threads} threads, in turn    {flops / both / 1e9:6.0f}")
    print(f"  both shapes, 2 Python threads x 1 thread {flops / split / 1e9:6.0f}")
    print(f"  both shapes, 1 thread alone              {flops / 2 / alone / 1e9:6.0f}")


def mapped_memory(repeats: int) -> None:
    c, F = torch.randn(32, 128, 128), torch.randn(32, 128, 4096)
    shape, nbytes = (7, 32, 128, 4096), 7 * 32 * 128 * 4096 * 4

    def fill(buf: torch.Tensor) -> None:
        for i in range(7):
            torch.bmm(c, F, out=buf[i])

    def populated() -> torch.Tensor:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0))
        return torch.frombuffer(m, dtype=torch.float32).view(shape)

    kept = torch.zeros(shape)
    print("\n3. bmm writing 7 x 67 MB of bases (s)")
    print(f"  into fresh memory (torch.empty)          {timed(lambda: fill(torch.empty(shape)), repeats):6.3f}")
    print(f"  into memory mapped with MAP_POPULATE     {timed(lambda: fill(populated()), repeats):6.3f}")
    print(f"  into memory already mapped               {timed(lambda: fill(kept), repeats):6.3f}")


def engine(repeats: int) -> None:
    hw = random_heads(12, 12, 768, 64)
    run = lambda **kw: compscope.scores(hw, "QKV", MEASURES_A, progress=False, **kw)  # noqa: E731
    print("\n4. (a) on the GPT-2-small shape (s)")
    for block, width in [(None, None), (32, 768), (64, 256), (64, 768), (128, 256)]:
        label = "default tiles" if block is None else f"block {block}, width {width}"
        print(f"  {label:<40} {timed(lambda: run(block=block, width=width), repeats):6.3f}")
    hog = [sys.executable, "-c", "import numpy as np; a = np.ones(8 << 30, dtype=np.uint8); a[::4096] = 2"]
    ts = []
    for _ in range(repeats):
        subprocess.run(hog, check=True)
        time.sleep(1)
        t = time.perf_counter()
        run()
        ts.append(time.perf_counter() - t)
    print(f"  default tiles, 1 s after 8 GiB freed     {statistics.median(ts):6.3f}")


def interleaved(fns: dict, repeats: int) -> dict:
    """Median time of each function, the functions taking turns (drifts hit all alike)."""
    for fn in fns.values():
        fn()
    ts: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in ts.items()}


def eigen_in_engine(repeats: int) -> None:
    """(b) with the engine's ``batch_eig`` and with LAPACK one matrix at a time, interleaved."""
    from compscope.engine import batch_eig
    from compscope.engine.x_route import lapack_eigvalsh

    ours = batch_eig.eigvalsh
    for name, (L, H, d, r) in (("small", (12, 12, 768, 64)), ("medium", (24, 16, 1024, 64))):
        hw = random_heads(L, H, d, r)

        def run(solver, hw=hw) -> None:
            batch_eig.eigvalsh = solver
            try:
                compscope.scores(hw, "QKV", "all", pairs="all", progress=False)
            finally:
                batch_eig.eigvalsh = ours

        got = interleaved({
            "batch_eig": lambda: run(ours),
            "LAPACK eigvalsh (torch, threads split the batch)": lambda: run(lapack_eigvalsh),
        }, repeats)
        print(f"\n1b. (b) on the GPT-2-{name} shape by eigensolver (s)")
        for k, t in got.items():
            print(f"  {k:<50} {t:6.3f}")


def reader_rows(repeats: int) -> None:
    """(a) for groups of 1-4 reader layers (``gram_route.READER_ROWS``, no cap by
    ``GROUP_SHARE``) and for the default rule, interleaved."""
    from compscope.engine import gram_route

    default = (gram_route.READER_ROWS, gram_route.GROUP_SHARE)
    for name, (L, H, d, r) in (("small", (12, 12, 768, 64)), ("medium", (24, 16, 1024, 64))):
        hw = random_heads(L, H, d, r)
        per = 3 * H

        def run(rows: int | None) -> None:
            if rows is not None:
                gram_route.READER_ROWS, gram_route.GROUP_SHARE = rows, 1
            try:
                compscope.scores(hw, "QKV", MEASURES_A, progress=False)
            finally:
                gram_route.READER_ROWS, gram_route.GROUP_SHARE = default

        variants = {f"{g} layer{'s' * (g > 1)} ({g * per} rows)": g * per for g in (1, 2, 3, 4)}
        g_default = gram_route.layers_per_group(L - 1, per)
        variants[f"default rule: {g_default} layers"] = None
        got = interleaved({k: (lambda rows=rows: run(rows)) for k, rows in variants.items()}, repeats)
        print(f"\n4b. (a) on the GPT-2-{name} shape by reader layers per group ({per} rows each) (s)")
        for k, t in got.items():
            print(f"  {k:<40} {t:6.3f}")


def fresh_pages() -> None:
    """Fresh memory (minor page faults) per (a) call, with and without the workspace."""
    from compscope.engine import workspace

    print("\n5b. fresh memory faulted in per (a) call (MB)")
    for name, (L, H, d, r) in (("small", (12, 12, 768, 64)), ("medium", (24, 16, 1024, 64))):
        hw = random_heads(L, H, d, r)

        def faulted_mb() -> float:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            compscope.scores(hw, "QKV", MEASURES_A, progress=False)
            return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) * os.sysconf("SC_PAGE_SIZE") / 2**20

        keep = workspace.KEEP_BYTES
        workspace.KEEP_BYTES = 0  # nothing kept between calls
        faulted_mb()
        none_kept = faulted_mb()
        workspace.KEEP_BYTES = keep
        workspace.release()
        cold, warm = faulted_mb(), faulted_mb()
        print(f"  GPT-2-{name:<7} nothing kept between calls {none_kept:5.0f}; right after workspace.release() "
              f"{cold:5.0f}; repeated call {warm:5.0f}")


def svd_cores(repeats: int, big: int = 2048) -> None:
    from compscope.engine.head_svd import _CORE_CHUNK, _svd_cores
    from compscope.engine.threads import threaded

    g = torch.Generator().manual_seed(0)
    P = torch.randn(2 * _CORE_CHUNK, 128, 1024, dtype=torch.float64, generator=g)
    G = P @ P.mT
    Gp, Gq = G[:_CORE_CHUNK], G[_CORE_CHUNK:]
    nt = torch.get_num_threads()
    with ThreadPoolExecutor(nt) as plain:
        def at_torch_count(x: torch.Tensor):
            return [torch.cat(t) for t in zip(*plain.map(torch.linalg.eigh, x.tensor_split(nt)))]

        print(f"\n1c. the per-head SVD cores: eigh of 128 x 128 float64 matrices (torch threads {nt}), us per matrix")
        for n in (_CORE_CHUNK, big):
            B = Gp.repeat(n // _CORE_CHUNK, 1, 1)
            runs = {"one call (threads inside LAPACK)": lambda: torch.linalg.eigh(B),
                    "compscope's pool (threaded: one core each)": lambda: threaded(torch.linalg.eigh, B),
                    f"{nt} Python threads at torch's count": lambda: at_torch_count(B)}
            for name, fn in runs.items():
                print(f"  {n:>5} per call, {name:<44} {timed(fn, repeats) / n * 1e6:8.1f}")
    print(f"  {_CORE_CHUNK:>5} per call, {'the whole core (_svd_cores: Cholesky, eigh, products)':<44} "
          f"{timed(lambda: _svd_cores(Gp, Gq), repeats) / _CORE_CHUNK * 1e6:8.1f}")


def breakdown(hw, parts: dict, repeats: int, **kw) -> tuple[dict[str, float], float]:
    """Median seconds per call spent inside each of ``parts`` (label: (owner, attribute)),
    wrapped with a clock, and the median of the whole ``compscope.scores(hw, **kw)``."""
    spent: dict[str, list[float]] = {label: [0.0] for label in parts}
    saved = {label: getattr(*where) for label, where in parts.items()}

    def clocked(inner, label: str):
        def wrapped(*a, **k):
            t = time.perf_counter()
            out = inner(*a, **k)
            spent[label][-1] += time.perf_counter() - t
            return out
        return wrapped

    for label, (owner, name) in parts.items():
        setattr(owner, name, clocked(saved[label], label))
    totals = []
    try:
        compscope.scores(hw, progress=False, **kw)  # warm-up
        for _ in range(repeats):
            for label in parts:
                spent[label].append(0.0)
            t = time.perf_counter()
            compscope.scores(hw, progress=False, **kw)
            totals.append(time.perf_counter() - t)
    finally:
        for label, (owner, name) in parts.items():
            setattr(owner, name, saved[label])
    return {label: statistics.median(v[-repeats:]) for label, v in spent.items()}, statistics.median(totals)


def phases(repeats: int) -> None:
    from compscope.engine import baseline, batch_eig, composition

    hw = random_heads(12, 12, 768, 64)
    parts = {"per-head SVDs (head_sides)": (composition, "head_sides"), "Gram tiles (gram_products)": (composition, "gram_products"),
             "Haar baseline (expected_frobenius)": (baseline, "expected_frobenius")}
    got, total = breakdown(hw, parts, repeats, kinds="QKV", measures=MEASURES_A)
    print("\n5. where (a)'s time goes, GPT-2-small shape (s, medians)")
    for label, t in got.items():
        print(f"  {label:<40} {t:6.3f}")
    print(f"  {'all of (a)':<40} {total:6.3f}")
    parts = {"X products (torch.mm)": (torch, "mm"), "batched products (torch.bmm; C Cᵀ, SVD cores)": (torch, "bmm"),
             "eigenvalues (batch_eig.eigvalsh)": (batch_eig, "eigvalsh")}
    for name, (L, H, d, r) in (("small", (12, 12, 768, 64)), ("medium", (24, 16, 1024, 64))):
        got, total = breakdown(random_heads(L, H, d, r), parts, repeats, kinds="QKV", measures="all", pairs="all")
        print(f"\n5. where (b)'s time goes, GPT-2-{name} shape (s, medians)")
        for label, t in got.items():
            print(f"  {label:<50} {t:6.3f}")
        print(f"  {'all of (b)':<50} {total:6.3f}")


def gemm_flops(a: torch.Tensor, b: torch.Tensor) -> float:
    """FLOPs of the product ``a @ b`` (batched or not; multiply-add = 2)."""
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def gemms_inside(repeats: int) -> None:
    from composition_speed import matmul_rate, route_flops

    clock: dict[str, list[float]] = {}  # "op dtype": [seconds, FLOPs]
    saved = {"bmm": torch.bmm, "mm": torch.mm, "addmm_": torch.Tensor.addmm_}

    def clocked(op, inner, operands):
        def wrapped(*args, **kwargs):
            t = time.perf_counter()
            out = inner(*args, **kwargs)
            dt = time.perf_counter() - t
            a, b = operands(args)
            c = clock.setdefault(f"{op} {str(a.dtype).removeprefix('torch.')}", [0.0, 0.0])
            c[0] += dt
            c[1] += gemm_flops(a, b)
            return out
        return wrapped

    print("\n6. the matrix multiplies inside (a) (every torch.bmm, torch.mm and Tensor.addmm_ of one call, clocked; medians)")
    print(f"  {'shape':<8} {'floor':>7} {'call':>7} {'GEMMs':>7} {'GEMMs/floor':>11} {'GFLOP done/floor':>17} {'GEMM rate/4096²':>16}")
    torch.bmm, torch.mm = clocked("bmm", saved["bmm"], lambda a: a[:2]), clocked("mm", saved["mm"], lambda a: a[:2])
    torch.Tensor.addmm_ = clocked("addmm_", saved["addmm_"], lambda a: a[1:3])
    try:
        for name, shape in (("small", (12, 12, 768, 64)), ("medium", (24, 16, 1024, 64))):
            hw = random_heads(*shape)
            floor_flops = route_flops(*shape)["gram"]
            compscope.scores(hw, "QKV", MEASURES_A, progress=False)  # warm-up
            rows, per_op = [], {}
            for _ in range(repeats):
                rate = matmul_rate()
                clock.clear()
                t = time.perf_counter()
                compscope.scores(hw, "QKV", MEASURES_A, progress=False)
                call = time.perf_counter() - t
                secs, flops = (sum(c[i] for c in clock.values()) for i in (0, 1))
                floor = floor_flops / rate
                rows.append((floor, call, secs, secs / floor, flops / floor_flops, flops / secs / rate))
                for op, (s, f) in clock.items():
                    per_op.setdefault(op, []).append((s, f / s / 1e9))
            m = [statistics.median(col) for col in zip(*rows)]
            print(f"  {name:<8} {m[0]:6.3f}s {m[1]:6.3f}s {m[2]:6.3f}s {m[3]:11.2f} {m[4]:17.2f} {m[5]:16.2f}")
            for op, v in sorted(per_op.items(), key=lambda kv: -statistics.median(x[0] for x in kv[1])):
                print(f"    {op:<16} {statistics.median(x[0] for x in v):6.3f} s at {statistics.median(x[1] for x in v):5.0f} GFLOP/s")
    finally:
        torch.bmm, torch.mm, torch.Tensor.addmm_ = saved["bmm"], saved["mm"], saved["addmm_"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wait", type=float, default=900, help="seconds to wait for an idle CPU (default 900)")
    ap.add_argument("--sections", default="1,1c,1b,2,3,4,4b,5,5b,6", help="which sections to run (default: all)")
    ap.add_argument("--batch", type=int, default=4096, help="matrices per eigenvalue call in section 1 (default 4096, as the X route)")
    ap.add_argument("--cores", type=int, default=2048, help="matrices in section 1c's larger call, a multiple of 64 "
                    "(default 2048: every head's core of a 7B model's K-composition)")
    args = ap.parse_args()
    if args.batch < 1:
        ap.error(f"--batch {args.batch}: give at least one matrix per call")
    if args.cores < 64 or args.cores % 64:
        ap.error(f"--cores {args.cores}: give a multiple of 64 (the engine's chunk of cores)")
    want = set(args.sections.split(","))
    print(f"torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f}")
    ok, load = wait_idle(0.5, args.wait)
    print(f"load average before timing: {load:.2f}" + ("" if ok else "  (NOT IDLE: timings are not trustworthy)"))
    for section, run in (("1", lambda repeats: eigen(repeats, args.batch)), ("1c", lambda repeats: svd_cores(repeats, args.cores)), ("1b", eigen_in_engine), ("2", matmul), ("3", mapped_memory), ("4", engine),
                         ("4b", reader_rows), ("5", phases), ("5b", lambda repeats: fresh_pages()),
                         ("6", gemms_inside)):
        if section in want:
            run(args.repeats)


if __name__ == "__main__":
    main()
