"""Studies: ``experiments/*.yaml`` in one schema (``study/v2``): a grid expanded as a product and priced by the
sweep's one pricing path, plus named analyses over the result (``python -m simulator experiment NAME`` /
``--all --report docs/RESULTS.md``; docs/MODEL.md §6).

- :func:`load_experiment` (bundled name or path) → :class:`Study`, strictly validated (one-line ConfigError);
- :func:`run_experiment` → :class:`Outcome` (tables, figures, key numbers, findings), nothing written;
- :func:`write_outcome` → CSV per table, PNG per figure and ``summary.md`` in a folder;
- :func:`write_report` / :func:`report_markdown` → docs/RESULTS.md and docs/figures/.

Analyses (:data:`ANALYSES`): headline, curve_shapes, overlap_sweep, whatif, traffic, validation.
"""

from .grid import RunContext
from .outcome import Figure, Outcome, Part, Table, render, write_outcome
from .registry import ANALYSES
from .runner import (
                     REPORT_COMMAND,
                     bundled_names,
                     check_experiment,
                     load_experiment,
                     read_experiment,
                     report_markdown,
                     run_experiment,
                     write_report,
)
from .schema import Study

__all__ = ["ANALYSES", "REPORT_COMMAND", "Figure", "Outcome", "Part", "RunContext", "Study", "Table",
           "bundled_names", "check_experiment", "load_experiment", "read_experiment", "render", "report_markdown",
           "run_experiment", "write_outcome", "write_report"]
