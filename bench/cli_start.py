"""How long the quick commands take from a fresh process, against the floor of importing torch.

Each command runs ``--repeats`` times in a new Python process (``python -m compscope.cli.main ARGS``,
offline, stdout discarded); the median wall time is printed beside the median of ``python -c
'import torch'`` measured in the same run, and their ratio. ``--src DIR`` runs another checkout's
``src`` as well (before/after a change, interleaved so that the machine's drift falls on both)::

    python bench/cli_start.py
    python bench/cli_start.py --src ../old-checkout/src --repeats 7
    python bench/cli_start.py --commands "info;info minilm"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [["--help"], ["info"], ["scores", "--top", "1"], ["circuits"], ["pair", "0.0", "1.1"], ["info", "smollm2"]]


def wall(argv: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} (src {src}) failed with exit status {p.returncode}: "
                         f"{p.stderr.strip()[-400:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each command (default 5; the median is printed)")
    ap.add_argument("--src", type=Path, help="another checkout's src folder, timed beside this one's")
    ap.add_argument("--commands", help="the commands' arguments, separated by ';' (default: "
                                       + "; ".join(" ".join(c) for c in COMMANDS) + ")")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats: give 1 or more")
    commands = [c.split() for c in args.commands.split(";")] if args.commands is not None else COMMANDS
    if not all(commands):
        ap.error(f"--commands {args.commands!r}: an empty command")
    if args.src is not None and not (args.src / "compscope" / "__init__.py").is_file():
        ap.error(f"--src {args.src}: no compscope package in it (give a checkout's src folder)")
    sources = {"this": ROOT / "src", **({"other": args.src.resolve()} if args.src else {})}
    floor = [["-c", "import torch"]]
    runs = {(name, i): [] for name in sources for i in range(len(commands) + 1)}
    for _ in range(args.repeats):
        for i, argv in enumerate(floor + [["-m", "compscope.cli.main", *c] for c in commands]):
            for name, src in sources.items():
                runs[name, i].append(wall(argv, src))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.repeats} fresh processes each")
    head = "".join(f"{name + ' (s)':>12}{'/ torch':>9}" for name in sources)
    print(f"{'command':<32}{head}")
    for i, label in enumerate(["python -c 'import torch'"] + ["compscope " + " ".join(c) for c in commands]):
        cells = "".join(f"{med[name, i]:12.2f}{med[name, i] / med[name, 0]:9.2f}" for name in sources)
        print(f"{label:<32}{cells}")


if __name__ == "__main__":
    main()
