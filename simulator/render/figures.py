"""Figures of a sweep (PNG): speedup vs batch, best draft length vs batch, verify/decode cost ratio vs batch.

The sweep's three figures, and study panels over a log2 batch axis (:func:`batch_panels`), are panel-grid scenes
(:mod:`.panels`) rasterised by Pillow (:mod:`.raster`): no Matplotlib import. The other study figures
(:func:`line_figure`, :func:`grid_figure`) import Matplotlib inside the plotting functions and use only its
object-oriented API (``matplotlib.figure.Figure`` + the Agg canvas): no pyplot state, no GUI backend.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..outputs import FIGURE_MARK, atomic_path
from ..specdec import best_gamma
from .panels import MAX_PANELS, Panel, batch_ticks, draw_grid, panel_grid, split_panels, y_range

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


def panel_keys(result) -> list[tuple[str, str]]:
    """(row, column) of each panel of a sweep figure: (model [variant], GPU) — the model × GPU grid."""
    return [(cs[0].model.name + (f" [{cs[0].variant}]" if cs[0].variant else ""), cs[0].hardware.name)
            for cs in _panels(result).values()]


def log2_batch(ax, batch, label: str = "batch size B") -> None:
    """A log2 batch axis with sparse power-of-two ticks (at most :data:`~.panels.MAX_XTICKS`)."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ticks = batch_ticks(batch)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel(label, fontsize=8)
    ax.grid(True, which="major", alpha=0.3)


def _panel_title(case) -> str:
    name = case.model.name + (f" [{case.variant}]" if case.variant else "")
    hw = getattr(case.hardware, "label", case.hardware.name)  # the GPU with its grounding unless calibrated
    return f"{name[:48]}\n{hw}, {case.deployment.label}"[:110]


def _context_line(result) -> str:
    accs = result.acceptances  # (label, acceptance, models) per acceptance priced (sweep.table.SweepResult)
    acc = accs[0][0] if len(accs) == 1 else "of each target (its public logs, else its family's default)"
    return f"drafter {result.drafter.label}, acceptance {acc}, context {result.context} tokens"


BATCH_LABEL = "batch size B (concurrent requests, log2 axis)"


def _draw(result, path, title: str, ylabel: str, series_of, refs=(), integer: bool = False,
          fixed=None) -> list[str]:
    """One figure kind over the model × GPU grid; split per GPU beyond MAX_PANELS panels. Returns the files."""
    groups = list(_panels(result).values())
    keys = panel_keys(result)
    path = Path(path)
    batch = sorted({float(b) for c in result.cases for b in c.result.batch})
    built = [Panel(_panel_title(cs[0]), [s for i, c in enumerate(cs) for s in series_of(c, i)]) for cs in groups]
    values = [float(v) for p in built for _, _, y, _ in p.series for v in np.asarray(y, float).ravel()]
    yr = y_range(values, [r[1] for r in refs], integer=integer, fixed=fixed)
    files = []
    for suffix, idx in split_panels(keys):
        sub_keys = [keys[i] for i in idx]
        fig = draw_grid(panel_grid(sub_keys), [built[i] for i in idx],
                        title=title + (f" — {suffix[1:]}" if suffix else ""), xlabel=BATCH_LABEL, ylabel=ylabel,
                        batch=batch, yr=yr, refs=refs)
        files.append(save(fig, path.with_name(path.stem + suffix + path.suffix), dpi=100, compress=1))
    return files


def batch_panels(path, panels: dict, title: str, ylabel: str, refs=()) -> str:
    """A study's panels over a log2 batch axis (``panels``: {panel title: [(label, batch, y, style)]}) as one
    panel-grid scene, the sweep figures' renderer (:func:`~.panels.draw_grid`: Pillow, no Matplotlib), wrapped
    into at most :data:`~.panels.WRAP_COLS` columns; ``refs``: horizontal reference lines [(label, y, style)]."""
    built = [Panel(name, list(series)) for name, series in panels.items()]
    batch = sorted({float(b) for p in built for _, x, _, _ in p.series for b in x})
    values = [float(v) for p in built for _, _, y, _ in p.series for v in np.asarray(y, float).ravel()]
    fig = draw_grid(panel_grid([(p.title, "") for p in built]), built, title=title, xlabel=BATCH_LABEL,
                    ylabel=ylabel, batch=batch, yr=y_range(values, [r[1] for r in refs]), refs=refs)
    return save(fig, path, dpi=100, compress=1)


NO_SPEEDUP = ("no speedup", 1.0, {"color": "0.4", "linestyle": ":", "linewidth": 0.9})  # the speedup = 1 line


def plot_speedup(result, path) -> list[str]:
    """Speedup at the best draft length per batch vs batch, prior and refined on one panel per model × GPU, each
    with its band shaded (the best low and high ends per batch: SD pays where the low end is above 1)."""
    def series(c, i):
        r = c.result
        _, spd = best_gamma(r.gammas, r.speedup)
        st = _style(c.mode, i)
        out = [(c.mode, r.batch, spd, st)]
        if getattr(r, "speedup_low", None) is not None and getattr(r, "speedup_high", None) is not None:
            band = (best_gamma(r.gammas, r.speedup_low)[1], best_gamma(r.gammas, r.speedup_high)[1])
            out.insert(0, (f"{c.mode} band", r.batch, band, {"color": st["color"], "band": True, "alpha": 0.18}))
        return out

    return _draw(result, path, "Speculative-decoding speedup vs batch (best draft length per batch; shaded: the "
                 "band, SD pays where its low end is above 1)\n" + _context_line(result),
                 "speedup over plain decoding (x)", series, refs=(NO_SPEEDUP,))


def plot_best_gamma(result, path) -> list[str]:
    """Best draft length per batch; hollow markers where even the best γ does not pay (speedup ≤ 1)."""
    def series(c, i):
        gam, spd = best_gamma(c.result.gammas, c.result.speedup)
        st = _style(c.mode, i)
        line = {"color": st["color"], "linestyle": st["linestyle"], "drawstyle": "steps-mid", "marker": ""}
        pays = spd > 1.0
        out = [(c.mode, c.result.batch, gam, line),
               ("", c.result.batch[pays], gam[pays], {"color": st["color"], "linestyle": "", "marker": st["marker"]})]
        if (~pays).any():
            out.append(("", c.result.batch[~pays], gam[~pays], {"color": st["color"], "linestyle": "",
                                                                "marker": st["marker"], "markerfacecolor": "none"}))
        return out

    gmax = max(int(max(c.result.gammas)) for c in result.cases)
    return _draw(result, path, "Best draft length vs batch (hollow: speculation does not pay)\n"
                 + _context_line(result), "best draft length (tokens)", series, integer=True,
                 fixed=(-0.3, gmax + 0.5))


def ratio_gamma(gammas, gamma_ref: int = 3) -> int:
    """The draft length shown in the ratio figure: ``gamma_ref`` if in the grid, else the nearest γ ≥ 1."""
    g = [int(x) for x in gammas if x >= 1] or [int(x) for x in gammas]
    return min(g, key=lambda x: (abs(x - gamma_ref), x))


def plot_ratio(result, path, gamma_ref: int = 3) -> list[str]:
    """T_verify / T_decode = T(B, γ+1) / T(B, 1) at one draft length vs batch, prior and refined."""
    gref = ratio_gamma(result.cases[0].result.gammas, gamma_ref)

    def series(c, i):  # a draft tree has one size (its nodes): its panel shows that verify pass
        j = int(np.flatnonzero(c.result.gammas == ratio_gamma(c.result.gammas, gref))[0])
        return [(c.mode, c.result.batch, c.result.verify_decode_ratio[j], _style(c.mode, i))]

    trees = any(gref not in c.result.gammas for c in result.cases)
    return _draw(result, path, f"Verify / decode cost ratio T(B,{gref + 1}) / T(B,1) vs batch (draft length "
                 f"{gref}{'; tree panels: all nodes' if trees else ''})\n" + _context_line(result),
                 "T_verify / T_decode (x)", series,
                 refs=(("verify = decode", 1.0, {"color": "0.4", "linestyle": ":", "linewidth": 0.9}),
                       (f"{gref + 1} decode steps", gref + 1.0, {"color": "0.6", "linestyle": "-.",
                                                                 "linewidth": 0.9})))


def save(fig, path, dpi: int = 110, compress: int = 6) -> str:
    """Write a figure without the software version or date (same inputs, same bytes), marked as this tool's
    (:data:`simulator.outputs.FIGURE_MARK`: a later run may replace it); ``compress``: zlib level (the sweep's
    figures use 1: a quarter of the encoding time for somewhat larger files)."""
    path = Path(path)
    kw = {"pil_kwargs": {"compress_level": compress}} if compress != 6 and path.suffix.lower() == ".png" else {}
    with atomic_path(path) as tmp:  # written under a temporary name, renamed when complete (simulator.outputs)
        fig.savefig(tmp, dpi=dpi, metadata=_STAMP.get(path.suffix.lower(), {}), **kw)
    return str(path)


# Metadata per file type: the tool's mark in place of the software version, and no entry that would make the same
# figure differ between runs or machines (None: omit).
_STAMP = {".png": {"Software": FIGURE_MARK}, ".svg": {"Creator": FIGURE_MARK, "Date": None},
          ".pdf": {"Creator": FIGURE_MARK, "Producer": None, "CreationDate": None}}


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


INDEX = "figures.md"


def plot_all(result, outdir, gamma_ref: int = 3) -> list[str]:
    """The three figures (one file each, or one per GPU beyond MAX_PANELS panels plus an index ``figures.md``);
    returns the files written."""
    out = Path(outdir)
    parts = {"speedup": plot_speedup(result, out / FILES["speedup"]),
             "best_gamma": plot_best_gamma(result, out / FILES["best_gamma"]),
             "ratio": plot_ratio(result, out / FILES["ratio"], gamma_ref)}
    files = [f for fs in parts.values() for f in fs]
    if len(files) > len(parts):
        files.append(write_index(parts, out / INDEX))
    return files


def write_index(parts: dict[str, list[str]], path) -> str:
    """A Markdown index of split figures: one section per figure kind, one image link per file."""
    from ..outputs import atomic_path

    path = Path(path)
    lines = ["# Sweep figures", "", f"More than {MAX_PANELS} panels per figure: one file per GPU (pages when a GPU "
             f"has more than {MAX_PANELS} panels).", ""]
    for kind, fs in parts.items():
        lines += [f"## {FILES[kind]}", ""] + [f"- [{Path(f).name}]({Path(f).name})" for f in fs] + [""]
    with atomic_path(path) as tmp:
        Path(tmp).write_text("\n".join(lines), encoding="utf-8")
    return str(path)


def line_figure(path, panels, title: str, *, ncols: int = 3, panel=(5.0, 3.8), xlabel: str = "",
                ylabel: str = "speedup (x)", log2: bool = False, legend: str = "first", decorate=None,
                dpi: int = 100, sharey: bool = True) -> str:
    """Study line plots in one place. ``panels``: {panel title: [(label, x, y, style kwargs)]}; ``log2``: x is a
    batch axis (log2, sparse power-of-two ticks); ``legend``: "first" panel, "each" panel or "top" of the figure;
    ``decorate(ax, title)`` adds bands, reference lines or markers; ``sharey``: one y range for every panel (the
    panels compare one quantity, ``ylabel``)."""
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
    if sharey and len(axes) > 1:
        lims = [ax.get_ylim() for ax in axes]
        for ax in axes:
            ax.set_ylim(min(lo for lo, _ in lims), max(hi for _, hi in lims))
    if legend == "top":
        legend_top(fig, max(axes, key=lambda a: len(a.get_legend_handles_labels()[1])))
    elif legend == "first":
        axes[0].legend(fontsize=7, loc="best")
    return save(fig, path, dpi=dpi)
