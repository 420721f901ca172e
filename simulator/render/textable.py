"""Text tables that fit a terminal: the one formatter of every printed table (``sweep``, ``explain``, ``step``,
``overlap fit``, ``show``).

A table is declared as columns (:class:`Col`) and rows of strings. :func:`render` fits it into ``width`` columns
(default :data:`WIDTH` = 100): first the short headers, then the optional columns are hidden (highest ``drop``
first; a note names them and says ``--wide`` shows them), then the wrappable columns are wrapped onto continuation
lines at spaces (the widest narrowed first, so they end up even; never narrower than the longest word of a cell, so a
model name such as ``qwen3-coder-480b-a35b`` is never cut: only when nothing optional is left to hide does a word
break). ``wide=True`` prints every column in full. Titles and notes are wrapped to the same width.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 100  # the default width of every printed table (issue 13: a 100-column terminal)
GAP = "  "


@dataclass(frozen=True)
class Col:
    """One column: ``name`` (header), ``short`` (a shorter header used when the table is too wide), ``align``
    ("<" or ">"), ``drop`` (0 = always shown; larger values are hidden first when the table is too wide) and
    ``wrap`` (the cells may wrap onto continuation lines)."""

    name: str
    align: str = ">"
    drop: int = 0
    wrap: bool = False
    short: str = ""


def _widths(cols: Sequence[Col], heads: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(GAP) * max(0, len(widths) - 1)


def fill(text: str, width: int = WIDTH, indent: str = "") -> list[str]:
    """``text`` wrapped to ``width`` columns (continuation lines indented by ``indent``)."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [""]


def layout(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int = WIDTH,
           wide: bool = False) -> tuple[list[int], list[str], list[int], list[str]]:
    """(indices of the columns shown, their headers, their widths, names of the hidden columns)."""
    rows = [[str(x) for x in r] for r in rows]
    keep = list(range(len(cols)))
    heads = [c.name for c in cols]
    widths = _widths(cols, heads, rows)
    if wide or _total(widths) <= width:
        return keep, heads, widths, []
    heads = [c.short or c.name for c in cols]
    widths = _widths(cols, heads, rows)
    hidden: list[str] = []
    wrap = [i for i in range(len(cols)) if cols[i].wrap]

    def squeeze(over: int, least) -> int:  # narrow the widest wrap column, one column at a time, down to least(i)
        while over > 0:  # (so wrapped columns end up as even as their floors allow); what is still over
            room = [i for i in wrap if i in keep and widths[i] > least(i)]
            if not room:
                break
            widest = max(room, key=lambda i: (widths[i], -i))
            widths[widest] -= 1
            over -= 1
        return over

    words = [max([len(w) for r in rows for w in r[i].split()] + [1]) for i in range(len(cols))]
    while True:  # wrap the wrappable columns at spaces if that is enough, else hide the next optional column
        over = squeeze(_total([widths[i] for i in keep]) - width, lambda i: max(len(heads[i]), 12, words[i]))
        if over <= 0:
            break
        droppable = [i for i in keep if cols[i].drop > 0]
        if not droppable:  # last resort: wrapped columns narrower than 12, down to their header
            squeeze(over, lambda i: max(len(heads[i]), 1))
            break
        worst = max(droppable, key=lambda i: (cols[i].drop, i))
        keep.remove(worst)
        hidden.append(cols[worst].name)
        widths = _widths(cols, heads, rows)  # the wrapped widths are recomputed for the columns left
    return keep, [heads[i] for i in keep], [widths[i] for i in keep], hidden


def render(cols: Sequence[Col], rows: Sequence[Sequence[str]], *, title: str = "", notes: Sequence[str] = (),
           width: int = WIDTH, wide: bool = False, indent: str = "", header: bool = True) -> str:
    """The table as text: title (wrapped), header and rule (unless ``header`` is False), rows (a wrapped cell
    continues on the next lines), notes (wrapped). Every line is at most ``width`` columns unless ``wide``."""
    rows = [[str(x) for x in r] for r in rows]
    inner = width - len(indent)
    keep, heads, widths, hidden = layout(cols, rows, inner, wide)
    aligns = [cols[i].align for i in keep]

    def line(cells: Sequence[str]) -> str:
        return (indent + GAP.join(f"{c:{a}{w}}" for c, a, w in zip(cells, aligns, widths, strict=True))).rstrip()

    out: list[str] = []
    if title:
        out += [title] if wide else fill(title, width, "  ")
    if header:
        out += [line(heads), line(["-" * w for w in widths])]
    for r in rows:
        cells = [r[i] for i in keep]
        parts = [_wrap(c, w) if len(c) > w else [c] for c, w in zip(cells, widths, strict=True)]
        for k in range(max(len(p) for p in parts)):
            out.append(line([p[k] if k < len(p) else "" for p in parts]))
    notes = list(notes)
    if hidden:
        notes.append(f"hidden: {', '.join(hidden)} (--wide shows every column)")
    for n in notes:
        out += [n] if wide else fill(n, width, "  ")
    return "\n".join(out)


def _wrap(cell: str, width: int) -> list[str]:
    """A cell over ``width`` columns as lines: at spaces; a word longer than the width (only when the table could
    not keep it whole) breaks inside."""
    return textwrap.wrap(cell, width, break_on_hyphens=False) or [""]


def max_width(text: str) -> int:
    """The longest line of ``text`` (tests and callers check the 100-column rule with it)."""
    return max((len(x) for x in text.splitlines()), default=0)


__all__ = ["GAP", "WIDTH", "Col", "fill", "layout", "max_width", "render"]
