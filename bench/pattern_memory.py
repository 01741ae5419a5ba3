"""The peak memory of one traced batch against the estimate the runner refuses sequences by
(``compscope.data.runner.PATTERN_COPIES`` x batch x heads x seq² float32): is the estimate an upper
bound of the patterns' share, on this device and this model's attention?

    python bench/pattern_memory.py                                   # smollm2 on the CPU, 4 sequences
    python bench/pattern_memory.py --model PATH --device cuda --lengths 513,1025,2049,4097

For each length, the extra memory at the peak of ``Runner.trace`` over what was held before it: on
CUDA ``max_memory_allocated`` (in this process, its peak counter reset); on the CPU the resident
set's peak (``ru_maxrss``) over the resident set before the trace, each length in a fresh process
(the peak of a process never falls). Prints the estimate, the measured extra, their ratio, and the
growth from the previous length against the estimate's growth: the part that grows with seq², which
the estimate must cover (the rest, the residual stream cached per layer, grows with seq).
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


def one(model: str, device: str, batch: int, length: int) -> dict:
    """Trace ``batch`` sequences of ``length`` tokens once; the extra bytes at the peak and the estimate."""
    runner = runner_for(model, device=device, progress=False)
    tokens = torch.randint(0, runner.hw.n_vocab, (batch, length), generator=torch.Generator().manual_seed(0))
    runner.trace(tokens[:, :8])  # warm: kernels, workspaces, lazy initialisation
    estimate = PATTERN_COPIES * batch * runner.hw.n_heads * length * length * 4
    if runner.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        trace = runner.trace(tokens)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - held
    else:
        held = rss()
        trace = runner.trace(tokens)
        extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - held
    del trace
    return {"length": length, "estimate": estimate, "extra": extra, "heads": runner.hw.n_heads}


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
    print(f"{'length':>7} {'estimate MiB':>13} {'extra MiB':>10} {'extra/estimate':>15} {'growth/estimate growth':>23}")
    prev = None
    for r in rows:
        growth = "" if prev is None else f"{(r['extra'] - prev['extra']) / (r['estimate'] - prev['estimate']):.2f}"
        print(f"{r['length']:>7} {r['estimate'] / 2**20:>13.2f} {r['extra'] / 2**20:>10.2f} "
              f"{r['extra'] / r['estimate']:>15.2f} {growth:>23}")
        prev = r


if __name__ == "__main__":
    main()
