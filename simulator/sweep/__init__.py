"""Sweeps, tidy tables, figures and the prior → refined attribution (``python -m simulator sweep`` / ``explain``).

- :func:`price`: the one pricing path (one grid point over batch × draft length, with a :class:`Variant`);
  :func:`run_sweep` → :class:`SweepResult` (``.records``, ``.to_array()``) is built on it; the studies of
  :mod:`simulator.experiments` too.
- :func:`summarize` / :func:`format_table`; :func:`write_csv` / :func:`write_json`; :func:`plot_all` (matplotlib is
  imported only by the plotting calls).
- :func:`explain` → :class:`Attribution`; :func:`format_attribution`, :func:`plot_waterfall`.
- :func:`default_deployment`: the documented default layout of a model on a GPU node.
"""

from .deploy import Layout, default_deployment, fitting_batches, resolved_line
from .explain import Attribution, WalkStep, explain, format_attribution, format_shapley, plot_waterfall, walk_mechanisms
from .figures import plot_all
from .io import write_csv, write_json
from .report import format_table, summarize
from .runner import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    DEFAULT_DRAFT_LEN,
    DEFAULT_DRAFTER,
    DEFAULT_HARDWARE,
    DEFAULT_MODES,
    default_targets,
    deploy,
    overlap_input,
    price,
    run_sweep,
)
from .table import COLUMN_NAMES, COLUMNS, Case, SweepResult
from .variants import HARDWARE_GROUPS, Variant, scale_fixed

__all__ = [
    "COLUMNS", "COLUMN_NAMES", "DEFAULT_BATCH", "DEFAULT_CONTEXT", "DEFAULT_DRAFTER", "DEFAULT_DRAFT_LEN",
    "DEFAULT_HARDWARE", "DEFAULT_MODES", "HARDWARE_GROUPS", "Attribution", "Case", "Layout", "SweepResult",
    "Variant", "WalkStep", "default_deployment", "default_targets", "deploy", "explain", "fitting_batches",
    "format_attribution", "format_shapley", "format_table", "overlap_input", "plot_all", "plot_waterfall", "price",
    "resolved_line", "run_sweep", "scale_fixed", "summarize", "walk_mechanisms", "write_csv", "write_json",
]
