"""What an experiment returns (tables, figures, key numbers, findings) and how it is written out.

Everything written is deterministic: CSV floats use a fixed format, Markdown tables use per-column formats, PNGs
are saved without the software/date metadata, and nothing depends on wall-clock time or dictionary order.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..outputs import atomic_text, atomic_write
from ..sweep.table import tidy_columns

CSV_FLOAT = "{:.6g}"


@dataclass(frozen=True)
class Table:
    """A result table: ``rows`` hold raw values; ``formats`` (one per column, str.format specs such as ``{:.3f}``)
    are used for Markdown only, the CSV keeps :data:`CSV_FLOAT` precision."""

    name: str  # CSV file stem
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    formats: tuple[str, ...] = ()
    in_summary: bool = True  # shown in the Markdown summary (large tables go to CSV only)
    note: str = ""

    def cell(self, j: int, v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if isinstance(v, bool):
            return "yes" if v else "no"
        fmt = self.formats[j] if j < len(self.formats) and self.formats[j] else ""
        if fmt and isinstance(v, (int, float)):
            return fmt.format(v)
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    def markdown(self) -> str:
        head = "| " + " | ".join(self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(_esc(self.cell(j, v)) for j, v in enumerate(r)) + " |"
                for r in self.rows]
        return "\n".join([head, rule, *body])


def tidy_table(name: str, title: str, cases, spec, **kw) -> Table:
    """A :class:`Table` over the sweep's tidy table of ``cases`` (:func:`simulator.sweep.tidy_columns`, one row per
    case × batch × draft length): ``spec`` lists (header, tidy column or function of the columns, format)."""
    cols = tidy_columns(list(cases))
    data = [(cols[c] if isinstance(c, str) else c(cols)).tolist() for _, c, _ in spec]
    return Table(name, title, tuple(h for h, _, _ in spec), tuple(zip(*data, strict=True)),
                 tuple(f for _, _, f in spec), **kw)


@dataclass(frozen=True)
class Figure:
    """A figure: ``draw(path)`` writes one PNG."""

    name: str  # file stem
    caption: str
    draw: Callable[[Path], object]


@dataclass(frozen=True)
class Part:
    """What one analysis adds to a study's outcome."""

    key_numbers: tuple[tuple[str, str], ...] = ()  # (label, formatted value)
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    findings: tuple[str, ...] = ()  # Markdown paragraphs: what the model predicts and how sure it is
    settings: tuple[str, ...] = ()  # Markdown bullet lines: models, drafter, acceptance, generator settings


@dataclass(frozen=True, kw_only=True)
class Outcome(Part):
    """A study's result: its identity and the concatenated parts of its analyses."""

    name: str
    title: str
    kind: str  # its analyses, joined by '+'
    description: str
    question: str


def _csv_cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if math.isnan(v) else CSV_FLOAT.format(v)
    return "" if v is None else v


def write_csv(table: Table, path: Path) -> Path:
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(table.columns)
        for r in table.rows:
            w.writerow([_csv_cell(v) for v in r])
    return path


def render(o: Outcome, figure_dir: str, heading: str = "#", csv_dir: str | None = None) -> str:
    """Markdown for one outcome; figures are linked as ``figure_dir/<file>``."""
    h2 = heading + "#"
    lines = [f"{heading} {o.title}", "", o.description.strip(), ""]
    if o.question:
        lines += [f"*Question:* {o.question.strip()}", ""]
    if o.settings:
        lines += [f"{h2} Settings", "", *[f"- {s}" for s in o.settings], ""]
    if o.key_numbers:
        lines += [f"{h2} Key numbers", "", "| quantity | value |", "|---|---|"]
        lines += [f"| {_esc(k)} | {_esc(v)} |" for k, v in o.key_numbers]
        lines.append("")
    lines += [f"{h2} What the model predicts, and how sure it is", ""]
    for p in o.findings:
        lines += [p.strip(), ""]
    for t in o.tables:
        if not t.in_summary:
            continue
        lines += [f"{h2} {t.title}", ""]
        if t.note:
            lines += [t.note.strip(), ""]
        lines += [t.markdown(), ""]
    for f in o.figures:
        lines += [f"![{f.caption}]({figure_dir}/{figure_file(o, f)})", "", f"*{f.caption}*", ""]
    if csv_dir is not None and o.tables:
        lines += [f"Tables as CSV: {', '.join(f'`{csv_dir}/{t.name}.csv`' for t in o.tables)}.", ""]
    return "\n".join(lines)


def _esc(text: str) -> str:
    return str(text).replace("|", "\\|")


def figure_file(o: Outcome, f: Figure) -> str:
    return f"{o.name}-{f.name}.png"


def write_outcome(o: Outcome, out: Path, figures: bool = True) -> list[Path]:
    """CSV per table, PNG per figure and ``summary.md`` into ``out``; returns the written paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [write_csv(t, out / f"{t.name}.csv") for t in o.tables]
    if figures:
        for f in o.figures:
            p = out / figure_file(o, f)
            f.draw(p)
            written.append(p)
    summary = out / "summary.md"
    atomic_text(summary, render(o, ".", csv_dir=".") + "\n")
    written.append(summary)
    return written


def trend(a: float, b: float, up: str, down: str, same: str, tol: float = 0.0) -> str:
    """The word for how ``b`` compares with ``a`` (``up`` if larger by more than ``tol``, ``down`` if smaller,
    else ``same``): prose says the opposite when the numbers say the opposite."""
    return up if b - a > tol else down if a - b > tol else same


def fmt_pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"

