"""Benchmark (a study, not a timing): which measure ranks head pairs as interventions on data do,
over several toy models trained from different seeds.

    python bench/measures_vs_interventions.py [--seeds 1,2] [--runs DIR ...] [--metric identity]

Trains the preset ``induction-2l`` (the built-in default model's recipe) once per seed into a
temporary folder (about two minutes each on one thread; seeds train in parallel processes, one
per core), or reuses finished run folders (``--runs``); the shipped default model (seed 0) is
always included. For each final model it prints its best layer-1 induction and layer-0
previous-token scores on held-out repeated sequences, and then, per kind (Q, K, V), each
measure's Spearman rank correlation with the interventional composition of the same 16 pairs
(``compscope.data.intervene.against_measures``: mean-ablation, 100 held-out repeated random
sequences), per model and the median over models.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from compscope.analysis.stats import spearman
from compscope.data.head_labels import toy_labels
from compscope.data.intervene import against_measures


def train_seed(seed: int, root: Path) -> subprocess.Popen:
    out = root / f"seed{seed}"
    return subprocess.Popen([sys.executable, "-m", "compscope.cli.main", "train", "--out", str(out), "--seed", str(seed),
                             "--checkpoints", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2", help="seeds to train (default 1,2; empty for none)")
    ap.add_argument("--runs", nargs="*", default=[], help="finished run folders to include instead of training")
    ap.add_argument("--metric", default="identity", help="metric of the measures (default identity)")
    args = ap.parse_args()
    models: dict[str, str] = {"induction-2l (shipped, seed 0)": "induction-2l"}
    models.update({f"run {r}": str(Path(r) / "final") for r in args.runs})
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if seeds:
        root = Path(tempfile.mkdtemp())
        for i in range(0, len(seeds), 2):  # two at a time: one per core
            procs = [(s, train_seed(s, root)) for s in seeds[i : i + 2]]
            for s, p in procs:
                if p.wait() != 0:
                    raise SystemExit(f"training seed {s} failed")
                models[f"induction-2l recipe, seed {s}"] = str(root / f"seed{s}" / "final")
    rho: dict[tuple[str, str], list[float]] = {}
    for label, path in models.items():
        labels = toy_labels(path)
        effects, table, _ = against_measures(path, metric=args.metric)
        print(f"{label}: best induction head {float(labels.induction[1:].max()):.3f}, "
              f"best previous-token head {float(labels.previous[0].max()):.3f}")
        for kind, eff in effects.by_kind.items():
            row = []
            for m in table.measures:
                r = spearman(table.dense(m, kind), eff)
                rho.setdefault((kind, m), []).append(r)
                row.append(f"{m} {r:+.2f}")
            print(f"  {kind}: " + "  ".join(row))
    print(f"\nmedian over {len(models)} models (Spearman with the interventional effect, metric {args.metric}):")
    for kind in "QKV":
        ms = [m for k, m in rho if k == kind]
        print(f"  {kind}: " + "  ".join(f"{m} {statistics.median(rho[kind, m]):+.2f}" for m in ms))


if __name__ == "__main__":
    main()
