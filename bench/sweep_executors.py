"""The same sweep on the local executor and on Ray with 2 workers, wall times side by side.

A short training run of the default preset (``--checkpoints`` checkpoints) is swept with every
measure, Q/K/V, under the identity and embed metrics (one task per checkpoint and metric), into a
fresh dataset per executor. Ray's time includes starting and stopping its local instance.

    .venv/bin/python bench/sweep_executors.py --checkpoints 12
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from compscope.sweep import Task, expand_sources, read_dataset, sweep
from compscope.toy import PRESETS, TrainConfig, train  # noqa: F401


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoints", type=int, default=12)
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    p = PRESETS["induction-2l"]
    run = root / "run"
    train(p.model, p.data, dataclasses.replace(p.train, steps=a.steps, n_checkpoints=a.checkpoints, eval_sequences=8), run,
          name="induction-2l", progress=False)
    opts = lambda m: {"kinds": "QKV", "measures": ["frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims",  # noqa: E731
                                                   "bandwidth", "spectral"], "metric": m}
    tasks = [Task(s, name, step, "scores", opts(m)) for s, name, step in expand_sources([str(run)]) for m in ("identity", "embed")]
    rows = []
    for label, kw in (("local", dict(executor="local")), ("ray, 2 workers", dict(executor="ray", workers=2))):
        out = root / label.split(",")[0]
        t0 = time.perf_counter()
        r = sweep(tasks, out, progress=False, **kw)
        dt = time.perf_counter() - t0
        assert not r.failed, r.failed
        rows.append((label, dt, len(read_dataset(out))))
    print(f"{len(tasks)} tasks ({a.checkpoints} checkpoints x 2 metrics, all 7 measures, Q/K/V), 2-core CPU")
    for label, dt, n in rows:
        print(f"  {label:15s} {dt:7.1f} s   {n} rows")
    print(f"  ratio local / ray: {rows[0][1] / rows[1][1]:.2f}")


if __name__ == "__main__":
    main()
