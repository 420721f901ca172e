"""Sweeps, tidy tables, figures and the prior → refined attribution (``python -m simulator sweep`` / ``explain``).

Every point is priced through :mod:`simulator.pricing` (one :class:`~simulator.pricing.Scenario`, one
:func:`~simulator.pricing.price`).

- :func:`run_sweep` → :class:`SweepResult` (``.records``, ``.to_array()``): models × GPUs × variants × modes over
  batch × draft length; :class:`Variant`: an edit of a scenario.
- :func:`summarize` / :func:`format_table`; :func:`write_csv` / :func:`write_json`; :func:`plot_all`.
- :func:`explain` → :class:`Attribution`; :func:`format_attribution`, :func:`plot_waterfall`.
"""

from ..render.figures import plot_all
from .explain import Attribution, WalkStep, explain, format_attribution, format_shapley, plot_waterfall, walk_mechanisms
from .io import write_csv, write_json
from .report import format_table, summarize
from .runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, DEFAULT_MODES, run_sweep
from .table import COLUMN_NAMES, COLUMNS, SweepResult
from .variants import HARDWARE_GROUPS, Variant

__all__ = [
    "COLUMNS", "COLUMN_NAMES", "DEFAULT_BATCH", "DEFAULT_DRAFT_LEN", "DEFAULT_MODES", "HARDWARE_GROUPS",
    "Attribution", "SweepResult", "Variant", "WalkStep", "explain", "format_attribution", "format_shapley",
    "format_table", "plot_all", "plot_waterfall", "run_sweep", "summarize", "walk_mechanisms", "write_csv",
    "write_json",
]
