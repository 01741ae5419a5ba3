"""Static figures of a report for papers (matplotlib; PNG and SVG): one heatmap per kind of the
first measure under the first metric, and the circuit graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .plots import _pyplot

ROLE_COLOURS = {"induction": "#d62728", "previous_token": "#1f77b4", "copying": "#2ca02c"}
KIND_COLOURS = {"Q": "#9467bd", "K": "#ff7f0e", "V": "#17becf"}


def _save(fig, out: Path, stem: str) -> list[Path]:
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=130)
    fig.savefig(paths[1])
    return paths


def heatmap_figure(dense: np.ndarray, title: str, centre: float | None):
    """Reader heads (rows) × writer heads (columns), grouped by layer; ``dense: (L, H, L, H)``."""
    plt = _pyplot()
    L, H = dense.shape[:2]
    m = np.transpose(dense, (2, 3, 0, 1)).reshape(L * H, L * H)  # [reader, writer]
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    if centre is None:
        im = ax.imshow(m, cmap="viridis", interpolation="nearest")
    else:
        from matplotlib.colors import TwoSlopeNorm

        lo, hi = np.nanmin(m), np.nanmax(m)
        norm = TwoSlopeNorm(vcenter=centre, vmin=min(lo, centre - 1e-9), vmax=max(hi, centre + 1e-9))
        im = ax.imshow(m, cmap="RdBu_r", norm=norm, interpolation="nearest")
    for l in range(1, L):
        ax.axhline(l * H - 0.5, color="0.5", lw=0.4)
        ax.axvline(l * H - 0.5, color="0.5", lw=0.4)
    ticks = [l * H + (H - 1) / 2 for l in range(L)]
    step = max(1, L // 16)
    ax.set_xticks(ticks[::step], [f"L{l}" for l in range(0, L, step)], fontsize=7)
    ax.set_yticks(ticks[::step], [f"L{l}" for l in range(0, L, step)], fontsize=7)
    ax.set_xlabel("writer head")
    ax.set_ylabel("reader head")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def graph_figure(L: int, H: int, edges: dict, roles: dict, title: str):
    """Heads at (layer, head), coloured by role; the given edges per kind."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(min(12, 2 + 0.35 * L), min(9, 1.5 + 0.3 * H)))
    for kind, rows in edges.items():
        for i, (l1, h1, l2, h2, _) in enumerate(rows):
            ax.plot([l1, l2], [h1, h2], color=KIND_COLOURS.get(kind, "k"), lw=1, alpha=0.6,
                    label=f"{kind}-composition" if i == 0 else None)
    role = {}
    for name in ("copying", "previous_token", "induction"):  # later names win, as on the page
        for l, h in roles.get(name, []):
            role[l, h] = name
    xs, ys = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    colours = [ROLE_COLOURS.get(role.get((l, h)), "#bbbbbb") for l, h in zip(xs.ravel(), ys.ravel())]
    ax.scatter(xs.ravel(), ys.ravel(), c=colours, s=max(6, 300 / max(L, H)), edgecolors="#333", linewidths=0.3, zorder=3)
    for name, c in ROLE_COLOURS.items():
        ax.scatter([], [], c=c, label=name.replace("_", "-"))
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def write_figures(rep, doc: dict, out: Path) -> list[Path]:
    """``heatmap_<kind>.png/.svg`` and ``circuit_graph.png/.svg`` in ``out``."""
    plt = _pyplot()
    paths = []
    metric, table = next(iter(rep.tables.items()))
    measure = doc["measures"][0]
    for kind in doc["kinds"]:
        fig = heatmap_figure(table.dense(measure, kind).double().numpy(), f"{rep.model}: {kind}-composition, {measure}, "
                             f"metric {metric}", doc["centres"].get(measure))
        paths += _save(fig, out, f"heatmap_{kind}")
        plt.close(fig)
    fig = graph_figure(doc["L"], doc["H"], doc["edges"], rep.labels.roles,
                       f"{rep.model}: strongest pairs by {doc['edge_measure']} ({doc['edge_metric']}); labels from {rep.labels.source}")
    paths += _save(fig, out, "circuit_graph")
    plt.close(fig)
    return paths
