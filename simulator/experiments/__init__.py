"""Experiments: declared studies in ``experiments/*.yaml`` that reproduce the study's claims and its open questions
(``python -m simulator experiment NAME`` / ``--all --report docs/RESULTS.md``; docs/MODEL.md §6).

- :func:`load_experiment` (bundled name or path) → :class:`Experiment`, strictly validated (one-line ConfigError);
- :func:`run_experiment` → :class:`Outcome` (tables, figures, key numbers, findings), nothing written;
- :func:`write_outcome` → CSV per table, PNG per figure and ``summary.md`` in a folder;
- :func:`write_report` / :func:`report_markdown` → docs/RESULTS.md and docs/figures/.

Kinds (:data:`KINDS`): headline, curves, overlap_sensitivity, hardware_whatif, traffic, validation.
"""

from .outcome import Figure, Outcome, Table, render, write_outcome
from .registry import KINDS
from .runner import REPORT_COMMAND, RunContext, bundled_names, report_markdown, run_experiment, write_report
from .schema import Experiment, load_experiment, read_experiment

__all__ = ["KINDS", "REPORT_COMMAND", "Experiment", "Figure", "Outcome", "RunContext", "Table", "bundled_names",
           "load_experiment", "read_experiment", "render", "report_markdown", "run_experiment", "write_outcome",
           "write_report"]
