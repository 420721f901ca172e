"""Load and run studies, write their outputs, and assemble docs/RESULTS.md from the bundled ones.

``run_experiment(name_or_path_or_Study, ctx)`` → :class:`~simulator.render.outcome.Outcome` (pure: nothing written):
the grid is priced once (:func:`.grid.price_grid`, the sweep's pricing path), then each listed analysis runs over it.
``write_outcome`` writes CSV + PNG + ``summary.md``; ``write_report`` the Markdown report with its figures in
``<path's folder>/figures/``. The report has no timings or run-dependent text, so it regenerates byte-identically.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from ..outputs import atomic_text, output_error, written_by_tool
from ..render.outcome import Outcome, Part, draw_figures, figure_file, report
from ..render.template import TemplateError, fill_items
from ..specs.schema import Reader
from .grid import RunContext, build_variant, deploy_grid, price_grid, read_variants
from .registry import ANALYSES
from .schema import Study, read_study

REPORT_COMMAND = "python -m simulator experiment --all --report docs/RESULTS.md"
FIGURE_DIR = "figures"


def bundled_names() -> list[str]:
    from ..specs.catalog import bundled_files

    return list(bundled_files("experiments"))


def read_experiment(obj, where: str) -> Study:
    """Validate a parsed study file (ConfigError on any problem)."""
    study = read_study(obj, where, ANALYSES)
    return replace(study, variants=read_variants(Reader(where), study))


def load_experiment(name_or_path: str) -> Study:
    """A study by bundled name (``paper-headline``) or path (``experiments/paper-headline.yaml``)."""
    from ..specs.catalog import experiment_path
    from ..specs.yamlio import load_yaml_file, load_yaml_text

    p = experiment_path(str(name_or_path))
    if isinstance(p, Path):
        return read_experiment(load_yaml_file(p), str(p))
    where = f"experiments/{p.name}"
    return read_experiment(load_yaml_text(p.read_text(encoding="utf-8"), where), where)


def run_experiment(exp: str | Study, ctx: RunContext | None = None) -> Outcome:
    study = exp if isinstance(exp, Study) else load_experiment(str(exp))
    ctx = ctx or RunContext()
    grid = deploy_grid(study, ctx)
    require_deployed(study, *grid)  # before pricing, as --check does
    priced = price_grid(study, ctx, study.variants, grid)
    parts = []
    for name in study.analyses:
        ctx.say(f"{study.name}: analysis {name}")
        parts.append(run_analysis(study, name, priced, ctx))
    return Outcome(name=study.name, title=study.title, kind="+".join(study.analyses), description=study.description,
                   question=study.question, values=dict(zip(study.analyses, (p.values for p in parts), strict=True)),
                   **{f.name: tuple(x for p in parts for x in getattr(p, f.name))
                      for f in fields(Part) if f.name != "values"})


def run_analysis(study: Study, name: str, priced=None, ctx: RunContext | None = None, settings=None) -> Part:
    """One analysis of ``study`` (``settings``: its own unless given) with its declared prose filled in."""
    settings = study.analyses[name] if settings is None else settings
    return annotate(ANALYSES[name].run(study, priced, ctx or RunContext(), settings), study, name, settings)


def prose(study: Study, name: str, values: dict, key: str, settings=None) -> list[tuple[str, str]]:
    """The ``key`` templates (findings, settings, key_numbers, table_notes) of analysis ``name`` filled from
    ``values`` (plus the study as ``study``, its grid's lists as ``grid`` and the settings as ``s``), as (name,
    text) pairs; a key number ``each LIST: LABEL`` gives a row per element of LIST. A template naming a number
    the analysis does not compute is a one-line ConfigError."""
    notes, path = study.notes.get(name), f"analyses.{name}.{key}"
    ns = {"study": study, "s": study.analyses[name] if settings is None else settings, **values,
          "grid": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(study.grid).items()}}
    try:
        return fill_items(getattr(notes, key) or {}, ns, labels=key == "key_numbers")
    except TemplateError as exc:
        raise Reader(study.where).fail(f"{path}[{exc.index}]", f"cannot be filled ({exc})"[:200],
                                       "name a number the analysis computes (docs/MODEL.md §6.4)") from None


def annotate(part: Part, study: Study, name: str, settings=None) -> Part:
    """The analysis's declared prose (render.template.Notes) filled from its numbers (``part.values``) and added to
    its part; a table note for a table the analysis does not produce is a ConfigError."""
    if study.notes.get(name) is None:
        return part
    text = {k: prose(study, name, part.values, k, settings) for k in ("findings", "settings", "key_numbers")}
    tn = dict(prose(study, name, part.values, "table_notes", settings))
    if unknown := sorted(set(tn) - {t.name for t in part.tables}):
        raise Reader(study.where).fail(f"analyses.{name}.table_notes", f"names {unknown}, not a table of {name}",
                                       "use one of " + ", ".join(t.name for t in part.tables))
    return replace(part, tables=tuple(replace(t, note=tn.get(t.name, t.note)) for t in part.tables),
                   key_numbers=part.key_numbers + tuple(text["key_numbers"]),
                   settings=part.settings + tuple(v for _, v in text["settings"]),
                   findings=part.findings + tuple(v for _, v in text["findings"]))


def require_deployed(study: Study, deployed: list, skipped: list) -> None:
    """A study runs only when some target deploys, and every target deploys for analyses that need each one (one
    ConfigError line naming the first target that does not, and why)."""
    r = Reader(study.where)
    if study.grid.all_targets and not deployed:
        raise r.fail("grid", f"has no target that deploys ({skipped[0][3]})"[:300], "change the targets or formats")
    for name, a in ANALYSES.items():
        if name in study.analyses and a.every_target and skipped:
            m, hw, d, why = skipped[0]
            raise r.fail("grid", f"target {m} on {hw} ({d or 'default format'}) does not deploy ({why})"[:300],
                         f"analysis {name} needs every target: change its deployment or the grid")


def check_experiment(study: Study, ctx: RunContext | None = None) -> list[str]:
    """What ``experiment --check`` resolves without pricing: every grid target × hardware × format deployed, every
    variant built for each deployed model, and what each analysis needs beyond the grid (validation: its cases
    deploy and the measured tables read). Returns one line per deployment; raises a one-line ConfigError when the
    study cannot run."""
    ctx = ctx or RunContext()
    deployed, skipped = deploy_grid(study, ctx)
    require_deployed(study, deployed, skipped)
    for _, _, dd in deployed:
        for e in study.variants:
            build_variant(e, dd.model)
    lines = [f"{dd.model.name} on {hw}: {dd.dep.label}" + (f" ({dd.note})" if dd.note else "")
             for hw, _, dd in deployed]
    lines += [f"{m} on {hw} ({d or 'default format'}): not deployable, reported by the study" for m, hw, d, _ in
              skipped]
    for name, settings in study.analyses.items():
        if ANALYSES[name].ready is not None:
            lines += ANALYSES[name].ready(study, ctx, settings)
    return lines


def report_markdown(outcomes: list[Outcome], command: str = REPORT_COMMAND) -> str:
    """The combined report of ``outcomes``; ``command``: the command that writes it (named in its first lines)."""
    return report(report_order(outcomes), command, FIGURE_DIR)


def report_order(outcomes: list[Outcome]) -> list[Outcome]:
    """Outcomes in the order of their first analysis in :data:`ANALYSES` (headline first, validation last)."""
    rank = {k: i for i, k in enumerate(ANALYSES)}
    return sorted(outcomes, key=lambda o: (rank.get(o.kind.split("+")[0], len(rank)), o.name))


def write_report(outcomes: list[Outcome], path: str | Path, command: str = REPORT_COMMAND,
                 force: bool = False) -> list[Path]:
    """Write the report and its figures; returns the written paths. A figure is written over an existing file only
    when a run of this tool wrote it (its mark, or the report being replaced links it) or with ``force``: checked
    for every figure before any is drawn."""
    outcomes = report_order(outcomes)
    path = Path(path)
    folder = path.parent / FIGURE_DIR
    previous = path.read_text(encoding="utf-8", errors="replace") if written_by_tool(path) else ""
    for o in outcomes:
        for f in o.figures:
            target = folder / figure_file(o, f)
            if target.exists() and not force and not written_by_tool(target) and \
                    f"]({FIGURE_DIR}/{target.name})" not in previous:
                raise output_error("report", target, "it holds a file that no run of this tool wrote and the "
                                   "report's figures would overwrite", "choose another path or pass --force")
    written = [p for o in outcomes for p in draw_figures(o, folder)]
    atomic_text(path, report_markdown(outcomes, command), param="report")
    return [path, *written]
