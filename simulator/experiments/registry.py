"""The named analyses a study may list (``analyses:`` in a study file): each is a settings dataclass (read by
:func:`~.schema.read_settings`), a cross-field check and ``run(study, priced, ctx, settings) -> Part``. Analyses
import the schema and the grid, never this module, so the registry closes no import loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import headline, overlap_sweep, sd_validation, shapes, traffic, trees, validation, whatif, whatif_validation


@dataclass(frozen=True)
class Analysis:
    settings: type
    run: Callable
    summary: str
    modes: tuple[str, ...] = ()  # modes the grid must price
    check: Callable | None = None  # check(reader, study, settings): rules beyond those declared on the settings
    every_target: bool = False  # the analysis needs every grid target deployed (else --check fails)
    ready: Callable | None = None  # ready(study, ctx, settings) -> [lines]: what --check resolves beyond the grid


BOTH = ("prior", "refined")
ANALYSES: dict[str, Analysis] = {
    "headline": Analysis(headline.Settings, headline.run, "T_decode/T_verify of one deployment, prior vs refined, "
                         "against published numbers", BOTH, headline.check, every_target=True),
    "curve_shapes": Analysis(shapes.Settings, shapes.run, "speedup vs batch per target, prior vs refined, with "
                             "curve-shape classes", BOTH),
    "overlap_sweep": Analysis(overlap_sweep.Settings, overlap_sweep.run, "refined speedup as the adjacent-token "
                              "routing overlap varies; where the shape flips", ("refined",), every_target=True),
    "whatif": Analysis(whatif.Settings, whatif.run, "targets on other GPUs and formats, with one-change-at-a-time "
                       "attribution", ("refined",), whatif.check),
    "traffic": Analysis(traffic.Settings, traffic.run, "routing statistics of synthetic traffic, IPF accuracy, and "
                        "the speedup they give", ("refined",), every_target=True),
    "tree_unions": Analysis(trees.Settings, trees.run, "unions of experts over draft trees from public routing "
                            "statistics, with an assumed working set, against published measurements"),
    "whatif_validation": Analysis(whatif_validation.Settings, whatif_validation.run, "the what-if rule against "
                                  "measured per-op rows of GPUs it was not given (GPU-out)"),
    "sd_validation": Analysis(sd_validation.Settings, sd_validation.run, "predicted speculative-decoding speedups "
                              "against speedups engines measured in public reports"),
    "validation": Analysis(validation.Settings, validation.run, "predictions vs measured per-op latencies and "
                           "published numbers", (), validation.check, ready=validation.ready),
}
