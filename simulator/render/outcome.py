"""What a study returns (tables, figures, key numbers, findings) and how it is written out: CSV per table, PNG per
figure, Markdown (a study's ``summary.md``, a section of docs/RESULTS.md).

Everything written is deterministic: CSV floats use a fixed format, Markdown tables use per-column formats, PNGs
are saved without the software/date metadata, and nothing depends on wall-clock time or dictionary order.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..outputs import atomic_text, atomic_write

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


def table(name: str, title: str, columns: str, rows, **kw) -> Table:
    """A :class:`Table` whose ``columns`` are written "header|format; header|format; ..." (format: a format spec such
    as ``.3f`` or ``+.1%``, used in Markdown only; none for text or the default)."""
    cols = [c.strip().partition("|") for c in columns.split(";")]
    return Table(name, title, tuple(h for h, _, _ in cols), tuple(tuple(r) for r in rows),
                 tuple("{:" + f + "}" if f else "" for _, _, f in cols), **kw)


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
    values: dict = field(default_factory=dict, compare=False)  # the named numbers the study's templates read


@dataclass(frozen=True, kw_only=True)
class Outcome(Part):
    """A study's result: its identity and the concatenated parts of its analyses."""

    name: str
    title: str
    kind: str  # its analyses, joined by '+'
    description: str
    question: str
    # inherited ``values``: analysis name -> the named numbers it computed (what the README quotes, simulator/docs.py)


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


def draw_figures(o: Outcome, folder: Path) -> list[Path]:
    """Every figure of ``o`` drawn into ``folder`` as ``NAME-FIGURE.png``."""
    paths = [folder / figure_file(o, f) for f in o.figures]
    for f, p in zip(o.figures, paths, strict=True):
        f.draw(p)
    return paths


def write_outcome(o: Outcome, out: Path, figures: bool = True) -> list[Path]:
    """CSV per table, PNG per figure and ``summary.md`` into ``out``; returns the written paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [write_csv(t, out / f"{t.name}.csv") for t in o.tables] + (draw_figures(o, out) if figures else [])
    summary = out / "summary.md"
    atomic_text(summary, render(o, ".", csv_dir=".") + "\n")
    written.append(summary)
    return written


def report(outcomes: list[Outcome], command: str, figure_dir: str) -> str:
    """The combined Markdown report of ``outcomes`` (in their order), generated by ``command``, figures linked as
    ``figure_dir/<file>``."""
    head = [
        "# Results",
        "",
        f"Generated by `{command}` from the bundled `experiments/*.yaml`; do not edit by hand. Each "
        "study also runs alone: `python -m simulator experiment NAME [--out DIR]` writes its CSV tables, "
        "figures and a summary. How a study is defined (one schema, one runner, named analyses): docs/MODEL.md §6.",
        "",
        "| experiment | question |",
        "|---|---|",
    ]
    head += [f"| [{o.name}](#{_anchor(o.title)}) | {o.question or o.description.split('. ')[0]} |" for o in outcomes]
    body = [render(o, figure_dir, heading="##") for o in outcomes]
    return "\n".join(head) + "\n\n" + "\n".join(body).rstrip() + "\n"


def _anchor(title: str) -> str:
    keep = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return keep.replace(" ", "-")
