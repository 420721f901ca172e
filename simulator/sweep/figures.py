"""Figures of a sweep (PNG): speedup vs batch, best draft length vs batch, verify/decode cost ratio vs batch.

matplotlib is imported here, inside the plotting functions, and only its object-oriented API is used
(``matplotlib.figure.Figure`` + the Agg canvas): no pyplot state, no GUI backend, nothing at import time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..specdec import best_gamma

# Plot styles (one home: the sweep's figures and every study's figures use these).
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4",
           "#b2df8a")
MODE_STYLE = {"prior": {"color": "#d95f02", "linestyle": "--", "marker": "s"},
              "refined": {"color": "#1b9e77", "linestyle": "-", "marker": "o"}}
FALLBACK_STYLE = {"color": "#7570b3", "linestyle": ":", "marker": "^"}
FILES = {"speedup": "speedup_vs_batch.png", "best_gamma": "best_gamma_vs_batch.png",
         "ratio": "verify_decode_ratio.png"}


def style(mode: str, i: int = 0) -> dict:
    """The line style of a mode (prior, refined); other series cycle through the palette."""
    if mode in MODE_STYLE:
        return MODE_STYLE[mode]
    return {**FALLBACK_STYLE, "color": PALETTE[(2 + i) % len(PALETTE)]}


_style = style


def _panels(result) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for c in result.cases:
        groups.setdefault(c.key, []).append(c)
    return groups


def _figure(n: int, title: str):
    """A grid of ``n`` panels with fixed margins (a layout engine would cost seconds on large grids)."""
    from matplotlib.figure import Figure

    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    w, h = max(4.2 * ncols, 8.0), 3.4 * nrows + 1.0
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    fig.subplots_adjust(left=0.75 / w, right=1 - 0.15 / w, bottom=0.6 / h, top=1 - 1.25 / h, wspace=0.32,
                        hspace=0.75 if nrows > 1 else 0.2)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11, y=1 - 0.08 / h)
    return fig, axes


def log2_batch(ax, batch, label: str = "batch size B") -> None:
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(batch)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(b)) for b in batch], fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel(label, fontsize=8)
    ax.grid(True, which="major", alpha=0.3)


def _panel_title(case) -> str:
    return f"{case.model.name}\n{case.hardware.name}, {case.deployment.label}"


def _context_line(result) -> str:
    return (f"drafter {result.drafter.label}, acceptance {result.acceptance.label}, "
            f"context {result.context} tokens")


def plot_speedup(result, path) -> str:
    """Speedup at the best draft length per batch vs batch, prior and refined on one axes per model."""
    panels = _panels(result)
    fig, axes = _figure(len(panels), "Speculative-decoding speedup vs batch (best draft length per batch)\n"
                        + _context_line(result))
    for ax, cases in zip(axes, panels.values(), strict=False):
        for i, c in enumerate(cases):
            _, spd = best_gamma(c.result.gammas, c.result.speedup)
            ax.plot(c.result.batch, spd, label=c.mode, **_style(c.mode, i), markersize=4)
        ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle=":", label="no speedup")
        log2_batch(ax, cases[0].result.batch, "batch size B (concurrent requests)")
        ax.set_ylabel("speedup over plain decoding (x)", fontsize=8)
        ax.set_title(_panel_title(cases[0]), fontsize=9)
    _legend(fig, axes[0])
    return _save(fig, path)


def plot_best_gamma(result, path) -> str:
    """Best draft length per batch; hollow markers where even the best γ does not pay (speedup ≤ 1)."""
    panels = _panels(result)
    fig, axes = _figure(len(panels), "Best draft length vs batch (hollow: speculation does not pay)\n"
                        + _context_line(result))
    for ax, cases in zip(axes, panels.values(), strict=False):
        for i, c in enumerate(cases):
            gam, spd = best_gamma(c.result.gammas, c.result.speedup)
            st = _style(c.mode, i)
            ax.step(c.result.batch, gam, where="mid", color=st["color"], linestyle=st["linestyle"], label=c.mode)
            pays = spd > 1.0
            ax.plot(c.result.batch[pays], gam[pays], st["marker"], color=st["color"], markersize=5)
            ax.plot(c.result.batch[~pays], gam[~pays], st["marker"], color=st["color"], markersize=5,
                    markerfacecolor="none")
        log2_batch(ax, cases[0].result.batch, "batch size B (concurrent requests)")
        g = cases[0].result.gammas
        ax.set_ylim(-0.3, max(g) + 0.5)
        ax.set_ylabel("best draft length (tokens)", fontsize=8)
        ax.set_title(_panel_title(cases[0]), fontsize=9)
    _legend(fig, axes[0])
    return _save(fig, path)


def ratio_gamma(gammas, gamma_ref: int = 3) -> int:
    """The draft length shown in the ratio figure: ``gamma_ref`` if in the grid, else the nearest γ ≥ 1."""
    g = [int(x) for x in gammas if x >= 1] or [int(x) for x in gammas]
    return min(g, key=lambda x: (abs(x - gamma_ref), x))


def plot_ratio(result, path, gamma_ref: int = 3) -> str:
    """T_verify / T_decode = T(B, γ+1) / T(B, 1) at one draft length vs batch, prior and refined."""
    panels = _panels(result)
    gref = ratio_gamma(result.cases[0].result.gammas, gamma_ref)
    fig, axes = _figure(len(panels), f"Verify / decode cost ratio T(B,{gref + 1}) / T(B,1) vs batch "
                        f"(draft length {gref})\n" + _context_line(result))
    for ax, cases in zip(axes, panels.values(), strict=False):
        for i, c in enumerate(cases):
            j = int(np.flatnonzero(c.result.gammas == gref)[0])
            ax.plot(c.result.batch, c.result.verify_decode_ratio[j], label=c.mode, **_style(c.mode, i),
                    markersize=4)
        ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle=":", label="verify = decode")
        ax.axhline(gref + 1.0, color="0.7", linewidth=0.8, linestyle="-.", label=f"{gref + 1} decode steps")
        log2_batch(ax, cases[0].result.batch, "batch size B (concurrent requests)")
        ax.set_ylabel("T_verify / T_decode (x)", fontsize=8)
        ax.set_title(_panel_title(cases[0]), fontsize=9)
    _legend(fig, axes[0])
    return _save(fig, path)


def _legend(fig, ax) -> None:
    """One legend for the whole figure (every panel uses the same styles), under the title."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.62 / fig.get_figheight()))


def save(fig, path, dpi: int = 110) -> str:
    """Write a PNG without the software/date metadata (same inputs, same bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    return str(path)


_save = save


def grid_figure(n: int = 1, ncols: int = 4, panel=(4.2, 3.3), title: str = ""):
    """A grid of ``n`` panels with fixed margins for study figures; returns (fig, axes list)."""
    from matplotlib.figure import Figure

    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    head = (1.1 if n > 1 else 0.6) if title else 0.35  # room for the title (and a figure legend on grids)
    w, h = max(panel[0] * ncols, 6.0), panel[1] * nrows + head + 0.15
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    fig.subplots_adjust(left=0.7 / w, right=1 - 0.2 / w, bottom=0.65 / h, top=1 - head / h, wspace=0.3,
                        hspace=0.62 if nrows > 1 else 0.2)
    for ax in axes[n:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10, y=1 - 0.1 / h)
    return fig, list(axes[:n])


def legend_top(fig, ax, ncol: int | None = None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=ncol or len(labels), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.55 / fig.get_figheight()))


def plot_all(result, outdir, gamma_ref: int = 3) -> list[str]:
    out = Path(outdir)
    return [plot_speedup(result, out / FILES["speedup"]), plot_best_gamma(result, out / FILES["best_gamma"]),
            plot_ratio(result, out / FILES["ratio"], gamma_ref)]


def line_figure(path, panels, title: str, *, ncols: int = 3, panel=(5.0, 3.8), xlabel: str = "",
                ylabel: str = "speedup (x)", log2: bool = False, legend: str = "first", decorate=None,
                dpi: int = 100) -> str:
    """Study line plots in one place. ``panels``: {panel title: [(label, x, y, style kwargs)]}; ``log2``: x is a
    batch axis (log2, ticks at the panel's batches); ``legend``: "first" panel, "each" panel or "top" of the figure;
    ``decorate(ax, title)`` adds bands, reference lines or markers."""
    fig, axes = grid_figure(len(panels), ncols=ncols, panel=panel, title=title)
    for ax, (name, series) in zip(axes, panels.items(), strict=True):
        for label, x, y, st in series:
            ax.plot(x, y, label=label, **{"marker": "o", "markersize": 3, **st})
        if decorate is not None:
            decorate(ax, name)
        if log2:
            log2_batch(ax, sorted({float(v) for _, x, _, _ in series for v in x}))
        else:
            ax.set_xlabel(xlabel, fontsize=8)
            ax.grid(True, alpha=0.3)
        ax.set_title(name, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if legend == "each":
            ax.legend(fontsize=7)
    if legend == "top":
        legend_top(fig, max(axes, key=lambda a: len(a.get_legend_handles_labels()[1])))
    elif legend == "first":
        axes[0].legend(fontsize=7, loc="best")
    return save(fig, path, dpi=dpi)
