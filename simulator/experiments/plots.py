"""Deterministic matplotlib helpers (object API, Agg canvas, fixed margins, no software/date metadata in PNGs)."""

from __future__ import annotations

import math
from pathlib import Path

PRIOR = {"color": "#d95f02", "linestyle": "--", "marker": "s"}
REFINED = {"color": "#1b9e77", "linestyle": "-", "marker": "o"}
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4",
           "#b2df8a")
MODE_STYLE = {"prior": PRIOR, "refined": REFINED,
              "refined (transferred overlap)": {"color": "#7570b3", "linestyle": ":", "marker": "^"}}


def figure(n: int = 1, ncols: int = 4, panel=(4.2, 3.3), title: str = ""):
    """A grid of ``n`` panels with fixed margins; returns (fig, axes list)."""
    from matplotlib.figure import Figure

    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    head = (1.1 if n > 1 else 0.6) if title else 0.35  # room for the title (and a figure legend on grids)
    w, h = max(panel[0] * ncols, 6.0), panel[1] * nrows + head + 0.15
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    top = 1 - head / h
    fig.subplots_adjust(left=0.7 / w, right=1 - 0.2 / w, bottom=0.65 / h, top=top, wspace=0.3,
                        hspace=0.62 if nrows > 1 else 0.2)
    for ax in axes[n:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10, y=1 - 0.1 / h)
    return fig, list(axes[:n])


def log2_batch(ax, batch) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(batch)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(b)) for b in batch], fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("batch size B", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)


def legend_top(fig, ax, ncol: int | None = None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=ncol or len(labels), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.55 / fig.get_figheight()))


def save(fig, path) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    return str(path)
