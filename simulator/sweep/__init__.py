"""Sweeps, tidy tables, figures and the prior → refined attribution (``python -m simulator sweep`` / ``explain``).

- :func:`run_sweep` → :class:`SweepResult` (``.records``, ``.to_array()``, ``.summary()``, ``.write_csv()``,
  ``.write_json()``, ``.plot()``); matplotlib is imported only by the plotting calls.
- :func:`explain` → :class:`Attribution`; :func:`format_attribution`, :func:`plot_waterfall`.
- :func:`default_deployment`: the documented default layout of a model on a GPU node.
"""

from .deploy import Layout, default_deployment, fitting_batches
from .explain import Attribution, WalkStep, explain, format_attribution, plot_waterfall, walk_mechanisms
from .report import format_table, summarize
from .runner import (
    COLUMN_NAMES,
    COLUMNS,
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    DEFAULT_DRAFT_LEN,
    DEFAULT_HARDWARE,
    DEFAULT_MODES,
    Case,
    SweepResult,
    default_targets,
    run_sweep,
)

__all__ = [
    "COLUMNS", "COLUMN_NAMES", "DEFAULT_BATCH", "DEFAULT_CONTEXT", "DEFAULT_DRAFT_LEN", "DEFAULT_HARDWARE",
    "DEFAULT_MODES", "Attribution", "Case", "Layout", "SweepResult", "WalkStep", "default_deployment",
    "default_targets", "explain", "fitting_batches", "format_attribution", "format_table", "plot_waterfall",
    "run_sweep", "summarize", "walk_mechanisms",
]
