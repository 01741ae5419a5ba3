"""Static figures (matplotlib, optional extra ``plot``)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import OptionError


def require_matplotlib() -> None:
    """An ``OptionError`` now, not after a long computation, when matplotlib is missing."""
    _pyplot()


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise OptionError("plots need matplotlib: pip install 'compscope[plot]'") from e
    return plt


def plot_track(
    track,
    path: str | Path,
    *,
    kind: str = "K",
    panels: Sequence[tuple[str, str]] | None = None,
    highlight: Sequence[tuple[int, int, int, int]] | None = None,
    threshold: float = 0.5,
) -> Path:
    """Composition against training step, one panel per ``(measure, metric)``.

    Coloured: ``highlight`` pairs (default: every eventual previous-token head → induction
    head pair of a toy run, ``Track.roles``); grey: the pairs whose writer is in no highlighted
    pair ("pairs that never compose" in a toy run). A dashed line marks ``Track.formation_step``. Steps on a
    symlog axis (checkpoints are log-spaced)."""
    plt = _pyplot()
    tabs = track.tables[-1]
    if panels is None:
        panels = [(m, t.metric) for t in tabs for m in t.measures]
    if highlight is not None:
        track.check_pairs(highlight)
    if highlight is None:
        prev, ind = track.roles(threshold)
        highlight = [(l1, h1, l2, h2) for l1, h1 in prev for l2, h2 in ind if l1 < l2]
    formed = track.formation_step(threshold)
    first = tabs[0].dense(panels[0][0], kind)
    L, H = first.shape[:2]
    others = [(l1, h1, l2, h2) for l1 in range(L) for h1 in range(H) for l2 in range(l1 + 1, L) for h2 in range(H)
              if (l1, h1, l2, h2) not in highlight]
    if highlight:  # writers that feed no highlighted pair
        hl_src = {p[:2] for p in highlight}
        others = [p for p in others if p[:2] not in hl_src] or others
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False, sharex=True)
    steps = track.steps
    for ax, (measure, metric) in zip(axes.flat, panels):
        for i, p in enumerate(others):
            ax.plot(steps, track.series(measure, kind, p, metric), color="0.7", lw=0.8,
                    label="pairs that never compose" if i == 0 else None)
        for p in highlight:
            ax.plot(steps, track.series(measure, kind, p, metric), lw=2,
                    label=f"prev {p[0]}.{p[1]} → ind {p[2]}.{p[3]}")
        if formed is not None:
            ax.axvline(formed, ls="--", color="k", lw=1, label=f"induction forms (step {formed})")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_title(f"{kind}-composition: {measure}, metric {metric}", fontsize=9)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
