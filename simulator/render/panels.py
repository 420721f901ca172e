"""Panel grids of a sweep figure: where each panel goes (pure layout, no matplotlib) and a fast renderer.

Layout (:func:`panel_grid`): panels are keyed by (row name, column name), a sweep's (model, GPU). With at least two
of each the figure is a model × GPU grid (rows = models, columns = GPUs; transposed when there are more than
:data:`MAX_COLS` GPUs but at most that many models); with one model or one GPU the panels wrap into at most
:data:`WRAP_COLS` columns. Beyond :data:`MAX_PANELS` panels a figure is split (:func:`split_panels`): one file per
GPU or per model (whichever makes fewer files), in pages of at most :data:`MAX_PANELS` panels, with an index.

Renderer (:func:`draw_grid`): every panel of a figure shares one x range (log2 batch, sparse power-of-two ticks)
and one y range, so the whole figure is one scene in inches (:class:`~.raster.Scene`): frames, grid lines and all
curves of one style are single polylines (curves of different panels separated by NaN breaks), tick labels only on
the outer panels. Pillow rasterises it (~0.1 s per figure, no Matplotlib import); Matplotlib draws the same scene
where Pillow has no FreeType. A Matplotlib ``Axes`` per panel costs ~0.1 s of tick and text layout per panel.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

MAX_PANELS = 24  # panels per file; larger figures are split per GPU (pages) with an index
WRAP_COLS = 4  # columns when panels wrap (one model or one GPU)
MAX_COLS = 6  # GPU columns of a model × GPU grid before it is transposed
MAX_XTICKS = 6  # power-of-two batch ticks per axis (every 2nd, 4th, ... power when the grid is denser)

# panel geometry (inches)
PANEL_W, PANEL_H = 3.4, 2.2
GAP_W, GAP_H = 0.25, 0.62  # between panels (room for a two-line panel title)
LEFT, RIGHT, BOTTOM = 0.95, 0.2, 0.75
HEAD = 1.25  # figure title (two lines) and the legend row
TITLE_PT = 10.5
TITLE_LINE = 0.2  # inches per extra title line (10.5 pt text)


@dataclass(frozen=True)
class Grid:
    """``nrows`` × ``ncols`` panels; ``cells[i]`` is the (row, column) of panel ``i``."""

    nrows: int
    ncols: int
    cells: tuple[tuple[int, int], ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.nrows, self.ncols

    def below_is_empty(self, i: int) -> bool:
        r, c = self.cells[i]
        return (r + 1, c) not in set(self.cells)

    def left_is_empty(self, i: int) -> bool:
        r, c = self.cells[i]
        return (r, c - 1) not in set(self.cells)


def _wrap(n: int) -> Grid:
    ncols = max(1, min(WRAP_COLS, n))
    return Grid(math.ceil(n / ncols), ncols, tuple(divmod(i, ncols) for i in range(n)))


def panel_grid(keys: Sequence[tuple[str, str]]) -> Grid:
    """The grid of panels keyed (row name, column name), e.g. (model, GPU), in the order given."""
    rows = list(dict.fromkeys(k[0] for k in keys))
    cols = list(dict.fromkeys(k[1] for k in keys))
    if len(rows) < 2 or len(cols) < 2 or len(set(keys)) < len(keys):
        return _wrap(len(keys))
    if len(cols) > MAX_COLS and len(rows) <= MAX_COLS:  # many GPUs, few models: GPUs down, models across
        return Grid(len(cols), len(rows), tuple((cols.index(c), rows.index(r)) for r, c in keys))
    return Grid(len(rows), len(cols), tuple((rows.index(r), cols.index(c)) for r, c in keys))


def split_panels(keys: Sequence[tuple[str, str]], limit: int = MAX_PANELS) -> list[tuple[str, list[int]]]:
    """[(file suffix, panel indices)]: one file ("" suffix) up to ``limit`` panels, else one file per GPU (column
    name) or per model (row name), whichever gives fewer files, in pages of at most ``limit`` panels (suffix
    ``-name`` or ``-name-2``)."""
    if len(keys) <= limit:
        return [("", list(range(len(keys))))]
    options = []
    for axis in (1, 0):  # per GPU first: ties go to one file per GPU
        out = []
        for name in dict.fromkeys(k[axis] for k in keys):
            idx = [i for i, k in enumerate(keys) if k[axis] == name]
            pages = [idx[j:j + limit] for j in range(0, len(idx), limit)]
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")
            out += [(f"-{safe}" + (f"-{p + 1}" if len(pages) > 1 else ""), page) for p, page in enumerate(pages)]
        options.append(out)
    return min(options, key=len)


def batch_ticks(batch: Sequence[float], most: int = MAX_XTICKS) -> list[int]:
    """Sparse power-of-two ticks covering ``batch``: every power of two in range, thinned to at most ``most``."""
    lo, hi = float(min(batch)), float(max(batch))
    p0, p1 = math.floor(math.log2(max(lo, 1e-9))), math.ceil(math.log2(max(hi, 1e-9)))
    powers = [p for p in range(p0, p1 + 1) if lo * (1 - 1e-9) <= 2.0**p <= hi * (1 + 1e-9)] or [p0]
    step = max(1, math.ceil(len(powers) / most))
    keep = powers[::step]
    return [int(2**p) if p >= 0 else 2.0**p for p in keep]


def y_range(values: Sequence[float], refs: Sequence[float] = (), integer: bool = False,
            fixed: tuple[float, float] | None = None) -> tuple[float, float, list[float]]:
    """(low, high, ticks): one y range for every panel of a figure, with at most five round ticks."""
    if fixed is not None:
        lo, hi = fixed
    else:
        v = np.asarray([x for x in (*values, *refs) if np.isfinite(x)], float)
        lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
        pad = 0.06 * (hi - lo) if hi > lo else max(0.5, abs(hi) * 0.1)
        lo, hi = lo - pad, hi + pad
    return lo, hi, nice_ticks(lo, hi, integer=integer)


def nice_ticks(lo: float, hi: float, most: int = 5, integer: bool = False) -> list[float]:
    """Round ticks inside [lo, hi]: the smallest step of 1, 2, 2.5 or 5 × 10^k (integers only when ``integer``)
    that gives at most ``most`` intervals (MaxNLocator's rule with those steps, without importing Matplotlib)."""
    raw = max((hi - lo) / most, 1e-12)
    scale = 10.0 ** np.floor(np.log10(raw))
    step = 10 * scale
    for m in (1, 2, 2.5, 5, 10):
        s = m * scale
        if s >= raw * (1 - 1e-9) and (not integer or float(s).is_integer()):
            step = s
            break
    if integer:
        step = max(step, 1.0)
    first = np.ceil(lo / step - 1e-9) * step
    ticks = first + step * np.arange(int(np.floor((hi - first) / step + 1e-9)) + 1)
    return [float(round(t, 12)) + 0.0 for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]


@dataclass
class Panel:
    """One panel: title lines and series [(label, x, y, style)]; ``style`` holds color, linestyle, marker,
    markerfacecolor, drawstyle (Matplotlib names); a style with ``band: True`` fills between y = (low, high) in its
    color at ``alpha``, under every curve."""

    title: str
    series: list[tuple[str, Sequence[float], Sequence[float], dict]] = field(default_factory=list)


def _steps_mid(pts: np.ndarray) -> np.ndarray:
    """The vertices of a steps-mid line through ``pts`` (drawn explicitly: NaN breaks between panels would cut
    Matplotlib's own first and last half-steps)."""
    if len(pts) < 2:
        return pts
    mid = (pts[:-1, 0] + pts[1:, 0]) / 2
    out = [pts[0]]
    for k, m in enumerate(mid):
        out += [(m, pts[k, 1]), (m, pts[k + 1, 1])]
    out.append(pts[-1])
    return np.asarray(out, float)


def wrap_to(line: str, inches: float, size_pt: float) -> list[str]:
    """``line`` broken at spaces into lines no wider than ``inches`` at ``size_pt`` (a single longer word stays
    whole)."""
    from .raster import text_inches

    out: list[str] = []
    for word in line.split(" "):
        if out and text_inches(f"{out[-1]} {word}", size_pt) <= inches:
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return out or [""]


def _fmt(v: float) -> str:
    return f"{v:g}"


def draw_grid(grid: Grid, panels: Sequence[Panel], *, title: str, xlabel: str, ylabel: str, batch: Sequence[float],
              yr: tuple[float, float, list[float]], refs: Sequence[tuple[str, float, dict]] = ()):
    """A Figure with every panel of ``grid`` on one canvas (see the module docstring); ``refs`` are horizontal
    reference lines drawn in every panel [(label, y, style)]."""

    from .raster import Scene

    W = max(LEFT + RIGHT + grid.ncols * PANEL_W + (grid.ncols - 1) * GAP_W, 6.0)
    # the title wraps to the figure's width (never clipped); lines beyond two make the head taller
    title = "\n".join(w for line in title.split("\n") for w in wrap_to(line, W - 0.2, TITLE_PT))
    head = HEAD + max(0, title.count("\n") - 1) * TITLE_LINE
    H = head + BOTTOM + grid.nrows * PANEL_H + (grid.nrows - 1) * GAP_H
    lx = np.log2(np.asarray(batch, float))
    x0, x1 = float(lx.min()), float(lx.max())
    if x1 - x0 < 1e-9:
        x0, x1 = x0 - 1, x1 + 1
    xpad = 0.05 * (x1 - x0)
    x0, x1 = x0 - xpad, x1 + xpad
    ylo, yhi, yticks = yr
    xt = batch_ticks(batch)

    def box(i):
        r, c = grid.cells[i]
        return LEFT + c * (PANEL_W + GAP_W), H - head - (r + 1) * PANEL_H - r * GAP_H

    def tx(bx, x):
        return bx + (np.log2(np.asarray(x, float)) - x0) / (x1 - x0) * PANEL_W

    def ty(by, y):
        return by + (np.asarray(y, float) - ylo) / (yhi - ylo) * PANEL_H

    frames, grids = [], []
    curves: dict[tuple, list[np.ndarray]] = {}
    styles: dict[tuple, tuple[str, dict]] = {}
    texts = []  # (x, y, text, kwargs)
    fills, fill_entries = [], []  # (polygon, color, alpha); legend entries of the bands
    for i, p in enumerate(panels):
        bx, by = box(i)
        frames.append([(bx, by), (bx + PANEL_W, by), (bx + PANEL_W, by + PANEL_H), (bx, by + PANEL_H), (bx, by)])
        for t in xt:
            gx = float(tx(bx, t))
            grids.append([(gx, by), (gx, by + PANEL_H)])
        for t in yticks:
            gy = float(ty(by, t))
            grids.append([(bx, gy), (bx + PANEL_W, gy)])
        for label, yv, st in refs:
            key = ("ref", label)
            styles.setdefault(key, (label, {**st, "marker": ""}))
            curves.setdefault(key, []).append(np.array([[bx, float(ty(by, yv))], [bx + PANEL_W, float(ty(by, yv))],
                                                        [np.nan, np.nan]]))
        for label, x, y, st in p.series:
            if st.get("band"):  # y = (low, high): the band between them, filled (drawn under the curves)
                lo, hi = (np.asarray(v, float) for v in y)
                poly = np.vstack([np.column_stack([tx(bx, x), ty(by, np.clip(lo, ylo, yhi))]),
                                  np.column_stack([tx(bx, x), ty(by, np.clip(hi, ylo, yhi))])[::-1]])
                fills.append((poly, st["color"], st.get("alpha", 0.2)))
                if label and label not in [f[0] for f in fill_entries]:
                    fill_entries.append((label, {"color": st["color"], "linestyle": "-", "linewidth": 6,
                                                 "alpha": st.get("alpha", 0.2), "marker": ""}))
                continue
            key = (label, tuple(sorted((k, str(v)) for k, v in st.items())))
            styles.setdefault(key, (label, {k: v for k, v in st.items() if k != "drawstyle"}))
            pts = np.column_stack([tx(bx, x), ty(by, y)])
            if st.get("drawstyle") == "steps-mid":
                pts = _steps_mid(pts)
            curves.setdefault(key, []).append(np.vstack([pts, [np.nan, np.nan]]))
        texts.append((bx + PANEL_W / 2, by + PANEL_H + 0.05, p.title, {"ha": "center", "va": "bottom"}))
        if grid.left_is_empty(i):
            texts += [(bx - 0.06, float(ty(by, t)), _fmt(t), {"ha": "right", "va": "center"}) for t in yticks]
        if grid.below_is_empty(i):
            texts += [(float(tx(bx, t)), by - 0.06, _fmt(t), {"ha": "center", "va": "top"}) for t in xt]
    scene = Scene(W, H, segments=[(grids, "0.88", 0.6), (frames, "0.25", 0.8)], fills=fills)
    entries = list(fill_entries)
    for key, segs in curves.items():
        label, st = styles[key]
        scene.curves.append((np.vstack(segs), st))
        if label and label not in [e[0] for e in entries]:
            entries.append((label, st))
    scene.texts += [(x, y, s, 7.5, kw["ha"], kw["va"], 0) for x, y, s, kw in texts]
    scene.texts += [(W / 2, BOTTOM * 0.3, xlabel, 9, "center", "center", 0),
                    (0.25, BOTTOM + (H - head - BOTTOM) / 2, ylabel, 9, "center", "center", 90),
                    (W / 2, H - 0.1, title, TITLE_PT, "center", "top", 0)]
    if entries:
        scene.legend = (H - head + HEAD - 0.55, entries, 8)
    return scene


__all__ = ["MAX_PANELS", "Grid", "Panel", "batch_ticks", "draw_grid", "panel_grid", "split_panels", "y_range"]
