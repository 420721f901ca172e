"""The experiment kinds: for each, the YAML section it reads, its settings reader, a cross-field check and the
function that runs it (``run(experiment, context) -> Outcome``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import agent, blackwell, curves, headline, sensitivity, validation


@dataclass(frozen=True)
class Kind:
    section: str
    needs_targets: bool
    read: Callable
    check: Callable
    run: Callable
    summary: str


KINDS: dict[str, Kind] = {
    "headline": Kind("headline", True, headline.read, headline.check, headline.run,
                     "T_decode/T_verify of one deployment, prior vs refined, against published numbers"),
    "curves": Kind("curves", True, curves.read, curves.check, curves.run,
                   "speedup vs batch for many targets, prior vs refined, with curve-shape classification"),
    "overlap_sensitivity": Kind("overlap_sensitivity", True, sensitivity.read, sensitivity.check, sensitivity.run,
                                "refined speedup as the adjacent-token routing overlap varies"),
    "hardware_whatif": Kind("hardware_whatif", True, blackwell.read, blackwell.check, blackwell.run,
                            "targets on other GPUs and formats, with one-change-at-a-time attribution"),
    "traffic": Kind("traffic", True, agent.read, agent.check, agent.run,
                    "routing statistics of synthetic traffic types and their speculative-decoding speedup"),
    "validation": Kind("validation", False, validation.read, validation.check, validation.run,
                       "predictions vs measured per-op latencies and published numbers"),
}
