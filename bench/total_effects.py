"""Direct path or every path? The K effect of a writer head through the whole model.

``compscope validate`` measures interventional composition on the direct path: ``h1``'s output is
mean-ablated in the residual ``h2`` reads and nowhere else. The label truth of the verdict (every
previous-token head before every induction head) also counts pairs that talk only through heads
and MLPs in between; this script asks how much of the gap between the direct-path ceiling and
the label truth those paths are. For each writer ``h1`` of ``MODEL``, the model runs again with
``h1``'s output mean-ablated inside its own attention (before the output projection: every later
layer, attention and MLP, sees the change). Every later head ``h2`` then reads its keys from
that residual and its queries from the clean one, and the effect is the mean total-variation
distance between its clean and patched patterns (the K effect of the specification, with the
change propagated). One forward pass per writer, on the verdict's intervention sequences.

Printed: the label-truth AUROC (previous-token >= 0.4 before induction >= 0.3) of the direct-path
K effects saved in the verdict and of the total K effects, and the strongest total effects from
the true writers. Llama-like and Gemma models (the heads' outputs enter ``self_attn.o_proj``).

    compscope validate smollm2 --out verdict-smollm2
    python bench/total_effects.py smollm2 verdict-smollm2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from compscope.core.attention import attend, project, read_input  # noqa: E402
from compscope.data.runner import runner_for  # noqa: E402
from compscope.data.sequences import repeats  # noqa: E402
from compscope.data.validate import auroc, true_pairs  # noqa: E402
from compscope.progress import progress_bar  # noqa: E402
from verdict_candidates import read_verdict  # noqa: E402


def output_projections(model) -> list[torch.nn.Module]:
    """Each layer's attention output projection, whose input is the heads' outputs side by side."""
    found = [m for n, m in model.named_modules() if n.endswith("self_attn.o_proj")]
    if not found:
        raise SystemExit(f"{type(model).__name__}: no self_attn.o_proj modules (Llama-like and Gemma models only)")
    return found


@torch.no_grad()
def total_k_effects(runner, tokens: torch.Tensor, progress: bool = True) -> torch.Tensor:
    """``(L, H, L, H)`` float64: per writer, the K effect on every later head with the writer's
    mean-ablation propagated through the whole model (module docstring); NaN elsewhere."""
    hw = runner.weights_here()
    L, H, dh = hw.n_layers, hw.n_heads, hw.d_head
    proj = output_projections(runner.model)
    seen: dict[int, torch.Tensor] = {}
    handles = [p.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0].detach()))
               for i, p in enumerate(proj)]
    try:
        clean = runner.trace(tokens)
    finally:
        for h in handles:
            h.remove()
    means = {i: z.mean(0, keepdim=True) for i, z in seen.items()}  # (1, seq, H * d_head): over sequences
    q = [project(hw, l, "Q", read_input(hw, l, clean.resid[l])) for l in range(L)]
    k = [project(hw, l, "K", read_input(hw, l, clean.resid[l])) for l in range(L)]
    pattern = [attend(hw, l, q[l], k[l]).double() for l in range(L)]
    out = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
    whole = runner.model
    base = getattr(whole, "model", whole)  # the layers without the unembedding (Gemma 3's is 262k wide)
    bar = progress_bar((L - 1) * H, "total effects", enabled=progress)
    for l1 in range(L - 1):
        for h1 in range(H):
            cut = slice(h1 * dh, (h1 + 1) * dh)

            def ablate(m, a, cut=cut, mean=means[l1]):
                z = a[0].clone()
                z[..., cut] = mean[..., cut]
                return (z,) + tuple(a[1:])

            handle = proj[l1].register_forward_pre_hook(ablate)
            runner.model = base
            try:
                tr = runner.trace(tokens)
            finally:
                handle.remove()
                runner.model = whole
            for l2 in range(l1 + 1, L):
                k2 = project(hw, l2, "K", read_input(hw, l2, tr.resid[l2]))
                tv = 0.5 * (pattern[l2] - attend(hw, l2, q[l2], k2).double()).abs().sum(-1)
                out[l1, h1, l2] = tv.mean(dim=(0, 2)).cpu()
            bar.update(1)
    bar.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--save", help="write the total K effects here (.pt, a plain tensor)")
    args = ap.parse_args()
    hw, previous, induction, direct = read_verdict(args.model, args.verdict)
    with open(os.path.join(args.verdict, "run.json")) as f:
        run = json.load(f)
    runner = runner_for(args.model, hw)
    special = runner.special_ids() + ((runner.bos,) if runner.bos is not None else ())
    tokens = repeats(run["sequences"], run["half"], hw.n_vocab, run["seed"], runner.bos, avoid=special).tokens
    tokens = tokens[:run["intervention_sequences"]]
    t0 = time.perf_counter()
    total = total_k_effects(runner, tokens)
    seconds = time.perf_counter() - t0
    if args.save:
        torch.save(total, args.save)
    truth = true_pairs(previous, induction, run["prev_threshold"], run["induction_threshold"])
    print(f"{hw.meta.name}: {int(truth.sum())} true K-pairs (previous-token >= {run['prev_threshold']}, induction >= "
          f"{run['induction_threshold']}); {tokens.shape[0]} sequences of {tokens.shape[1]} tokens; "
          f"{(hw.n_layers - 1) * hw.n_heads} forward passes in {seconds:.1f} s, peak resident memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"label-truth AUROC of the K effect, direct path (the verdict's): {auroc(direct, truth):.3f}")
    print(f"label-truth AUROC of the K effect, every path:                 {auroc(total, truth):.3f}")
    rows = sorted(((float(total[a, b, c, d]), float(direct[a, b, c, d]), f"{a}.{b}->{c}.{d}")
                   for a, b, c, d in truth.nonzero().tolist()), reverse=True)
    print("\ntrue pair     total K  direct K")
    for t, d, name in rows:
        print(f"{name:<12} {t:8.3f} {d:9.3f}")
    others = total[~truth & ~total.isnan()]
    print(f"\nother pairs: {others.numel()}, total K effect median {float(others.median()):.3f}, "
          f"99th percentile {float(others.quantile(0.99)):.3f}, max {float(others.max()):.3f}")


if __name__ == "__main__":
    main()
