"""Studies: ``experiments/*.yaml`` in one schema (``study/v2``): a grid expanded as a product and priced by the
sweep's one pricing path, plus named analyses over the result whose prose is templates in the study file, filled from
the numbers they compute (``python -m simulator experiment NAME`` / ``--all --report docs/RESULTS.md``; docs/MODEL.md
§6). :func:`load_experiment` → :class:`Study`; :func:`run_experiment` → :class:`Outcome` (nothing written);
:func:`write_outcome` (CSV, PNG, ``summary.md``); :func:`write_report` / :func:`report_markdown` (docs/RESULTS.md).
"""

from ..render.outcome import Outcome, write_outcome
from .grid import RunContext
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

__all__ = ["ANALYSES", "REPORT_COMMAND", "Outcome", "RunContext", "Study", "bundled_names", "check_experiment",
           "load_experiment", "read_experiment", "report_markdown", "run_experiment", "write_outcome", "write_report"]
