"""The peak memory of one traced batch against the estimate the runner refuses sequences by
(``Runner.trace_bytes``: ``PATTERN_COPIES`` x batch x heads x seq² float32 for the patterns, and the
residuals the trace keeps): does the estimate cover what the trace takes, on this device and model?

    python bench/pattern_memory.py                                   # smollm2 on the CPU, 4 sequences
    python bench/pattern_memory.py --model PATH --device cuda --lengths 513,1025,2049,4097

For each length, the extra memory at the peak of ``Runner.trace`` over what was held before it: on
CUDA ``max_memory_allocated`` (in this process, its peak counter reset); on the CPU the resident
set's peak over the resident set before the trace, each length in a fresh process, the peak reset
before the trace where Linux allows (``/proc/self/clear_refs``; else ``ru_maxrss``, which the loading's
own peak can hide). Prints the estimate, the measured extra and their ratio, and,
from two lengths or more, the least-squares fit ``extra ≈ a·seq + b·seq²``: ``b`` in copies of one
layer's patterns (``batch × heads × 4`` bytes per seq²), which ``PATTERN_COPIES`` must cover, and ``a``,
what grows with the length alone, against the residuals the trace keeps (the rest of it: the model's own
hidden states and intermediates, the allocator's slack).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.data.runner import PATTERN_COPIES, runner_for  # noqa: E402


def rss() -> int:
    """Resident bytes of this process now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak() -> bool:
    """Reset this process's peak resident set (Linux: ``5`` into ``/proc/self/clear_refs``), so that
    the loading's own peak does not hide the trace's; False where that cannot be done."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return peak_rss() is not None
    except OSError:
        return False


def peak_rss() -> int | None:
    """The peak resident set since the last reset (``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")), None)


def one(model: str, device: str, batch: int, length: int) -> dict:
    """Trace ``batch`` sequences of ``length`` tokens once; the extra bytes at the peak and the estimate."""
    runner = runner_for(model, device=device, progress=False)
    tokens = torch.randint(0, runner.hw.n_vocab, (batch, length), generator=torch.Generator().manual_seed(0))
    runner.trace(tokens[:, :8])  # warm: kernels, workspaces, lazy initialisation
    estimate = runner.trace_bytes((batch, length))[0]  # what the runner refuses sequences by
    patterns = PATTERN_COPIES * batch * runner.hw.n_heads * length * length * 4
    if runner.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        trace = runner.trace(tokens)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - held
    else:
        reset = reset_peak()
        held = rss()
        trace = runner.trace(tokens)
        extra = (peak_rss() if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) - held
    del trace
    return {"length": length, "estimate": estimate, "extra": extra, "heads": runner.hw.n_heads, "batch": batch,
            "residuals": estimate - patterns}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lengths", default="257,513,1025")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a CPU length in its own process
    a = p.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.model, a.device, a.batch, a.one)))
        return
    rows = []
    for n in (int(x) for x in a.lengths.split(",")):
        if a.device == "cpu":
            out = subprocess.run([sys.executable, __file__, "--model", a.model, "--device", "cpu", "--batch", str(a.batch),
                                  "--one", str(n)], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.splitlines()[-1]))
        else:
            rows.append(one(a.model, a.device, a.batch, n))
    print(f"{a.model} on {a.device}, {a.batch} sequences, {rows[0]['heads']} heads; PATTERN_COPIES = {PATTERN_COPIES}")
    print(f"{'length':>7} {'estimate MiB':>13} {'extra MiB':>10} {'extra/estimate':>15}")
    for r in rows:
        print(f"{r['length']:>7} {r['estimate'] / 2**20:>13.2f} {r['extra'] / 2**20:>10.2f} {r['extra'] / r['estimate']:>15.2f}")
    if len(rows) >= 2:
        t = torch.tensor([float(r["length"]) for r in rows], dtype=torch.float64)
        extra = torch.tensor([float(r["extra"]) for r in rows], dtype=torch.float64)
        per_token, per_square = torch.linalg.lstsq(torch.stack([t, t * t], 1), extra[:, None]).solution[:, 0].tolist()
        copies = per_square / (4 * rows[0]["heads"] * rows[0]["batch"])
        kept = per_token / (rows[0]["residuals"] / rows[0]["length"])
        print(f"fit extra ~ a*seq + b*seq^2: a = {per_token / 2**20:.3f} MiB per token ({kept:.2f} times the residuals kept), "
              f"b = {copies:.2f} copies of the patterns (PATTERN_COPIES = {PATTERN_COPIES})")


if __name__ == "__main__":
    main()
