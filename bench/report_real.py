"""The report of a real model (default SmolLM2-135M) against the target of at most 2 minutes on
a 2-core CPU: ``compscope report MODEL`` with its defaults (six measures, identity and embed,
every pair of every kind, labels from the weights), timed with the page's size and the peak memory.

    python bench/report_real.py                    # smollm2
    python bench/report_real.py --model gemma3-270m
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope import __version__  # noqa: E402
from compscope.report.collect import collect  # noqa: E402
from compscope.report.page import write  # noqa: E402

TARGET_S = 120.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rep = collect(args.model, progress=False)
        t1 = time.perf_counter()
        paths = write(rep, Path(tmp) / "report", command="bench/report_real.py", version=__version__)
        wall = time.perf_counter() - t0
        size = paths[0].stat().st_size / 1e6
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"{rep.model}: compscope report with its defaults, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"collect (load, scores, labels, axioms, pair spectra)  {t1 - t0:6.1f} s")
    print(f"write (page, tables, figures)                         {wall - (t1 - t0):6.1f} s")
    print(f"total {wall:.1f} s against a target of {TARGET_S:.0f} s: {wall / TARGET_S:.2f} of it; page {size:.1f} MB; "
          f"peak resident memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
