"""Helpers for the study tests: bundled study files as dictionaries, a small new study, and writing YAML."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from simulator.specs.catalog import bundled_files


def bundled_yaml(name: str) -> dict:
    return yaml.safe_load(bundled_files("experiments")[name].read_text(encoding="utf-8"))


def write_yaml(folder: Path, doc: dict, name: str = "study.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


SMALL = {
    "schema": "study/v2",
    "name": "small",
    "title": "small: two models, batch 1 and 4",
    "description": "A study written for the tests: two models, batch [1, 4], draft length [1, 3].",
    "grid": {"model": ["qwen3-30b-a3b", "mixtral-8x7b"], "batch": [1, 4], "draft_len": [1, 3], "context": 512},
    "speculation": {"drafter": "eagle", "acceptance": {"alpha": 0.7}},
    "analyses": {"curve_shapes": {"tolerance": 0.01, "low_batch_max": 2, "ratio_draft_len": 3,
                                  "findings": ["Of {n} deployable targets, {prior_good} have an interior peak."]}},
}


def prose(name: str, analysis: str, values: dict, settings=None) -> str:
    """The findings templates of bundled study ``name``'s ``analysis`` filled from ``values``, joined."""
    from simulator.experiments import load_experiment
    from simulator.experiments.runner import prose as fill

    return " ".join(t for _, t in fill(load_experiment(name), analysis, values, "findings", settings))


def small_study(**grid) -> dict:
    doc = copy.deepcopy(SMALL)
    doc["grid"].update(grid)
    return doc


@functools.lru_cache(maxsize=1)
def bundled_outcomes() -> dict:
    """Every bundled study run once per test session (no figures drawn): name -> Outcome."""
    from simulator.experiments import bundled_names, run_experiment

    return {n: run_experiment(n) for n in bundled_names()}


def table(outcome, name: str) -> list[dict]:
    """A table of an outcome as a list of {column: value}."""
    t = next(t for t in outcome.tables if t.name == name)
    return [dict(zip(t.columns, r, strict=True)) for r in t.rows]


def headline_findings(prior: float, refined: float, bracket: dict, routing: float, place=None, study=0.89) -> str:
    """The bundled headline findings filled from a made-up walk, breakdown, bracket and placements (study: the
    published refined ratio)."""
    from types import SimpleNamespace

    from simulator.experiments import headline
    from simulator.render.outcome import Table
    from simulator.sweep.shapley import attribute

    steps = [SimpleNamespace(name=n, decode_verify_ratio=v) for n, v in
             (("prior", prior), ("+ routing=overlap", prior + routing), ("+ l2=on", prior + routing + 0.01))]
    brk = Table("breakdown", "", ("op class",) + ("x",) * 6,
                (("moe", 0, 0, 0, 1.0, 2.0, 1.0), ("total", 0, 0, 0, 1.0, 2.0, 1.0)))
    names = ("routing", "l2")
    game = {frozenset(): prior, frozenset({"routing"}): prior + routing, frozenset({"l2"}): prior + 0.02,
            frozenset(names): prior + routing + 0.01}
    shap = (attribute("decode_verify_ratio", names, game), attribute("speedup", names, game))
    readings = (("prior", prior, 1.4), ("prior-no-fixed", prior - 0.05, 1.2), ("prior-kernel-floors", 0.77, 2.0))
    attr = SimpleNamespace(steps=steps, shapley=shap, prior_range=readings)
    pred, pub = {"prior": prior, "refined": refined}, {"prior": 0.52, "refined": study}
    return prose("paper-headline", "headline", headline.values(pred, pub, 3, attr, brk, bracket, 1.0, 2.0, place))
