"""The named analyses a study may list (``analyses:`` in a study file): each is a settings dataclass (read by
:func:`~.schema.read_settings`), a cross-field check and ``run(study, priced, ctx, settings) -> Part``. Analyses
import the schema and the grid, never this module, so the registry closes no import loop. The validation analyses
that read only their settings are computations of the ``validate`` package, adapted here by :func:`settings_only`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..validate import multinode, sd_cases, tree_unions
from ..validate import whatif as whatif_gpu
from . import headline, overlap_sweep, shapes, traffic, validation, whatif


@dataclass(frozen=True)
class Analysis:
    settings: type
    run: Callable
    modes: tuple[str, ...] = ()  # modes the grid must price
    check: Callable | None = None  # check(reader, study, settings): rules beyond those declared on the settings
    every_target: bool = False  # the analysis needs every grid target deployed (else --check fails)
    ready: Callable | None = None  # ready(study, ctx, settings) -> [lines]: what --check resolves beyond the grid


def settings_only(report: Callable) -> Callable:
    """An analysis of the ``validate`` package, which reads only its settings (no grid, no run context)."""
    return lambda study, priced, ctx, settings: report(settings)


BOTH = ("prior", "refined")
# What each analysis does: its module's docstring and docs/MODEL.md §6.4.
ANALYSES: dict[str, Analysis] = {
    "headline": Analysis(headline.Settings, headline.run, BOTH, headline.check, every_target=True),
    "curve_shapes": Analysis(shapes.Settings, shapes.run, BOTH),
    "overlap_sweep": Analysis(overlap_sweep.Settings, overlap_sweep.run, ("refined",), every_target=True),
    "whatif": Analysis(whatif.Settings, whatif.run, ("refined",), whatif.check),
    "traffic": Analysis(traffic.Settings, traffic.run, ("refined",), every_target=True),
    "tree_unions": Analysis(tree_unions.Settings, settings_only(tree_unions.report)),
    "whatif_validation": Analysis(whatif_gpu.Settings, settings_only(whatif_gpu.report)),
    "sd_validation": Analysis(sd_cases.Settings, settings_only(sd_cases.report)),
    "multinode_validation": Analysis(multinode.Settings, settings_only(multinode.report)),
    "validation": Analysis(validation.Settings, validation.run, (), validation.check, ready=validation.ready),
}
