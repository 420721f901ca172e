"""A small PNG rasteriser for the sweep's panel grids (:func:`~.panels.draw_grid`), on Pillow alone.

A sweep figure is a few line collections, curves, markers and ~100 short labels on one canvas; Pillow draws that in
tens of milliseconds without importing Matplotlib (~0.3 s) or laying text out through its artists. The scene is
recorded in inches (y up, Matplotlib's figure coordinates) by :class:`Scene` and rasterised at 2× and reduced
(anti-aliased lines). ``Scene.savefig`` has Matplotlib's signature, so :func:`~.figures.save` writes either. Where
Pillow lacks FreeType (no TrueType text), :meth:`Scene.to_matplotlib` draws the same scene with Matplotlib.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SS = 2  # supersampling factor
_DASH = {"--": (3.7, 1.6), ":": (1.0, 1.65), "-.": (6.4, 1.6, 1.0, 1.6)}  # on/off lengths in line widths (Matplotlib)


@dataclass
class Scene:
    """What a panel grid draws, in inches: segment collections, curves, texts, a legend row."""

    width: float
    height: float
    segments: list = field(default_factory=list)  # (list of [(x, y), ...], color, width_pt)
    curves: list = field(default_factory=list)  # (N×2 array with NaN breaks, style dict)
    texts: list = field(default_factory=list)  # (x, y, text, size_pt, ha, va, rotation)
    legend: tuple | None = None  # (y_top, [(label, style)], size_pt)
    fills: list = field(default_factory=list)  # (polygon N×2, color, alpha): bands, drawn first

    def savefig(self, path, dpi: int = 100, metadata=None, pil_kwargs=None, **_) -> None:
        if Path(str(path)).suffix.lower() in (".png", "") and font_path() is not None:
            img = self.to_image(dpi)  # RGB: a 128-colour palette would drop the faint grid lines
            info = None
            if metadata:
                from PIL.PngImagePlugin import PngInfo

                info = PngInfo()
                for k, v in metadata.items():
                    if v is not None:
                        info.add_text(k, str(v))
            img.save(path, format="PNG", pnginfo=info, **(pil_kwargs or {}))
        else:
            self.to_matplotlib().savefig(path, dpi=dpi, metadata=metadata,
                                         **({"pil_kwargs": pil_kwargs} if pil_kwargs else {}))

    # --- Pillow ---------------------------------------------------------------------------------------------
    def to_image(self, dpi: int):
        from PIL import Image, ImageDraw

        k = dpi * SS
        wpx, hpx = round(self.width * dpi), round(self.height * dpi)
        img = Image.new("RGB", (wpx * SS, hpx * SS), "white")

        def px(xy):
            xy = np.asarray(xy, float)
            return np.column_stack([xy[:, 0] * k, (self.height - xy[:, 1]) * k])

        groups: dict = {}  # bands of one colour and alpha share a layer: one blend each onto the white canvas
        for poly, color, alpha in self.fills:
            groups.setdefault((_rgb(color), round(255 * alpha)), []).append(poly)
        d = ImageDraw.Draw(img)
        for i, ((rgb, a), polys) in enumerate(groups.items()):
            pts = [[tuple(q) for q in px(poly).tolist()] for poly in polys]
            if i == 0:  # the first layer lies on white: its blend is one opaque colour
                for p in pts:
                    d.polygon(p, fill=tuple(round(255 - (255 - c) * a / 255) for c in rgb))
                continue
            mask = Image.new("L", img.size, 0)
            dm = ImageDraw.Draw(mask)
            for p in pts:
                dm.polygon(p, fill=a)
            box = mask.getbbox()
            if box:
                img.paste(Image.new("RGB", (box[2] - box[0], box[3] - box[1]), rgb), box, mask.crop(box))

        for segs, color, lw in self.segments:
            w = max(1, round(lw / 72 * k))
            c = _rgb(color)
            for s in segs:
                d.line([tuple(p) for p in px(s).tolist()], fill=c, width=w)
        for xy, st in self.curves:
            _curve(d, px(xy), st, k)
        layout = _legend_layout(self, dpi) if self.legend is not None else []
        for x, y, _, st in layout:
            u = self.legend[2] / 72 * dpi  # the legend's font size in final pixels; the sample is 2u long
            line = SS * np.array([[x, y], [x + u, y], [x + 2 * u, y]])
            _curve(d, line, {**st, "marker": ""}, k)
            if st.get("marker"):
                _curve(d, line[1:2], {**st, "linestyle": ""}, k)
        img = img.reduce(SS)  # texts are drawn after: FreeType anti-aliases them, at a quarter of the pixels
        d = ImageDraw.Draw(img)
        for x, y, s, size, ha, va, rot in self.texts:
            _text(img, d, x * dpi, (self.height - y) * dpi, s, round(size / 72 * dpi), ha, va, rot)
        f = _font(round(self.legend[2] / 72 * dpi)) if layout else None
        for x, y, lab, _ in layout:
            d.text((x + self.legend[2] * 2.8 / 72 * dpi, y), lab, font=f, fill=(0, 0, 0), anchor="lm")
        return img

    # --- Matplotlib fallback --------------------------------------------------------------------------------
    def to_matplotlib(self):
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D

        fig = Figure(figsize=(self.width, self.height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_axis_off()
        ax.set_xlim(0, self.width)
        ax.set_ylim(0, self.height)
        for poly, color, alpha in self.fills:
            ax.fill(poly[:, 0], poly[:, 1], color=color, alpha=alpha, linewidth=0)
        for segs, color, lw in self.segments:
            ax.add_collection(LineCollection(segs, colors=color, linewidths=lw))
        for xy, st in self.curves:
            ax.plot(xy[:, 0], xy[:, 1], **_mpl(st))
        for x, y, s, size, ha, va, rot in self.texts:
            ax.text(x, y, s, fontsize=size, ha=ha, va=va, rotation=rot)
        if self.legend is not None:
            top, entries, size = self.legend
            fig.legend([Line2D([], [], **_mpl(st)) for _, st in entries], [lab for lab, _ in entries],
                       loc="upper center", ncol=len(entries), fontsize=size, frameon=False,
                       bbox_to_anchor=(0.5, top / self.height))
        return fig


def _mpl(st: dict) -> dict:
    return {"linewidth": 1.3, "markersize": 3.5, **st}


_FONT: list = []


def font_path():
    """DejaVu Sans from Matplotlib's data (found without importing Matplotlib), if Pillow can draw TrueType."""
    if not _FONT:
        path = None
        try:
            from PIL import features

            spec = importlib.util.find_spec("matplotlib")
            if features.check("freetype2") and spec and spec.submodule_search_locations:
                p = Path(spec.submodule_search_locations[0]) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
                path = str(p) if p.is_file() else None
        except ImportError:
            path = None
        _FONT.append(path)
    return _FONT[0]


_FONTS: dict = {}


def _font(size_px: int):
    if size_px not in _FONTS:
        from PIL import ImageFont

        _FONTS[size_px] = ImageFont.truetype(font_path(), size_px)
    return _FONTS[size_px]


def text_inches(text: str, size_pt: float) -> float:
    """Width of one line of ``text`` at ``size_pt`` in inches: measured with the drawing font when Pillow has it,
    else estimated at 0.6 em per character (DejaVu Sans averages ~0.55)."""
    if font_path() is not None:
        return _font(round(size_pt / 72 * 100)).getlength(text) / 100
    return len(text) * 0.6 * size_pt / 72


def _rgb(color) -> tuple[int, int, int]:
    if isinstance(color, str) and color.startswith("#"):
        return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    if isinstance(color, str):
        try:
            g = round(float(color) * 255)  # Matplotlib grey level "0.4"
            return (g, g, g)
        except ValueError:
            from PIL import ImageColor

            return ImageColor.getrgb(color)[:3]
    return tuple(round(255 * c) for c in color[:3])


def _runs(pts: np.ndarray) -> list[np.ndarray]:
    """Pieces of a polyline between NaN breaks."""
    ok = np.isfinite(pts).all(axis=1)
    cuts = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    return [pts[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True)]


def _dashes(p: np.ndarray, pattern, lw: float) -> list[list]:
    """The "on" pieces of a dashed polyline (pattern in line widths, as Matplotlib scales it)."""
    seg = np.hypot(*np.diff(p, axis=0).T)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= 0:
        return [p.tolist()]
    pat = np.asarray(pattern, float) * lw
    starts = np.arange(0.0, s[-1], pat.sum())[:, None] + np.concatenate([[0.0], np.cumsum(pat)[:-1]])[::2]
    ends = starts + pat[::2]
    on = starts < s[-1]
    a, b = starts[on], np.minimum(ends[on], s[-1])
    t = np.unique(np.concatenate([s, a, b]))
    xy = np.column_stack([np.interp(t, s, p[:, 0]), np.interp(t, s, p[:, 1])]).tolist()
    i0, i1 = np.searchsorted(t, a), np.searchsorted(t, b, side="right")
    return [xy[i:j] for i, j in zip(i0.tolist(), i1.tolist(), strict=True)]


def _curve(d, pts: np.ndarray, st: dict, k: float) -> None:
    st = _mpl(st)
    c = _rgb(st.get("color", "#000000"))
    lw = st["linewidth"] / 72 * k
    ls = st.get("linestyle", "-")
    for run in _runs(pts):
        if ls and ls not in ("None", "none") and len(run) > 1:
            pieces = _dashes(run, _DASH[ls], lw) if ls in _DASH else [run.tolist()]
            for piece in pieces:
                d.line([tuple(q) for q in piece], fill=c, width=max(1, round(lw)), joint="curve")
        marker = st.get("marker", "")
        if marker:
            hollow = st.get("markerfacecolor") == "none"
            r = st["markersize"] / 72 * k / 2
            for x, y in run.tolist():
                _marker(d, marker, x, y, r, c, hollow, max(1, round(lw * 0.6)))


def _marker(d, m, x, y, r, c, hollow, w) -> None:
    fill = None if hollow else c
    if m == "o":
        d.ellipse((x - r, y - r, x + r, y + r), fill=fill, outline=c, width=w)
    elif m == "s":
        r *= 0.9
        d.rectangle((x - r, y - r, x + r, y + r), fill=fill, outline=c, width=w)
    else:  # "^" and anything else: a triangle
        d.polygon([(x, y - r * 1.1), (x - r, y + r * 0.8), (x + r, y + r * 0.8)], fill=fill, outline=c, width=w)


def _text(img, d, x, y, s, size, ha, va, rot) -> None:
    f = _font(size)
    lines = s.split("\n")
    lh = round(size * 1.2)
    if rot:
        from PIL import Image

        w = round(max(f.getlength(t) for t in lines)) + 4
        tile = Image.new("L", (w, lh * len(lines)), 0)
        td = __import__("PIL.ImageDraw", fromlist=["Draw"]).Draw(tile)
        for i, t in enumerate(lines):
            td.text((w / 2, i * lh), t, font=f, fill=255, anchor="ma")
        tile = tile.rotate(rot, expand=True)
        img.paste((0, 0, 0), (round(x - tile.width / 2), round(y - tile.height / 2)), tile)
        return
    h = lh * len(lines)
    top = {"top": y, "bottom": y - h, "center": y - h / 2, "baseline": y - h}[va]
    anchor = {"left": "la", "center": "ma", "right": "ra"}[ha]
    for i, t in enumerate(lines):
        d.text((x, top + i * lh + (lh - size) / 2), t, font=f, fill=(0, 0, 0), anchor=anchor)


def _legend_layout(scene: Scene, dpi: int) -> list[tuple[float, float, str, dict]]:
    """(x, y) in final pixels of each legend entry's line sample (its label follows), one centred row."""
    top, entries, size = scene.legend
    u = size / 72 * dpi
    f = _font(round(u))
    widths = [2.8 * u + f.getlength(lab) for lab, _ in entries]
    x = scene.width * dpi / 2 - (sum(widths) + 2.0 * u * (len(entries) - 1)) / 2
    y = (scene.height - top) * dpi + 0.7 * u
    out = []
    for (lab, st), w in zip(entries, widths, strict=True):
        out.append((x, y, lab, st))
        x += w + 2.0 * u
    return out
