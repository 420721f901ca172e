"""Every knob of the knob table round-trips CLI → study YAML → CSV row → CLI with identical prices (issue 28).

The test iterates :data:`simulator.pricing.knobs.KNOBS`, so a knob added later is tested too: its non-default values
come from its declaration (the options it allows) or, for a knob whose declaration lists none, from
:data:`CANDIDATES` (a knob with neither fails :func:`test_every_knob_has_values`, saying where to add them).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses

import numpy as np
import pytest
import yaml

from simulator.cli._scenario import add_scenario_flags, argv_of, request_from
from simulator.cli.sweep import add_tree_flags, trees_from
from simulator.cost.deployment import PRESETS, Deployment
from simulator.errors import SimulatorError
from simulator.experiments.grid import RunContext, deploy_target, price_target
from simulator.experiments.runner import load_experiment
from simulator.experiments.schema import Target, target_mapping
from simulator.overlap import full_tree
from simulator.params import Options
from simulator.pricing import price, request, resolve
from simulator.pricing.knobs import KNOBS, row_request
from simulator.specs.catalog import load_engine
from simulator.sweep.io import write_csv
from simulator.sweep.table import COLUMN_NAMES, SweepResult

MODEL, HARDWARE, MODE = "qwen3-30b-a3b", "h100-sxm", "refined"
BATCH, GAMMAS = (1.0,), (3,)


def _releases(engine: str) -> tuple:
    return tuple(r.version for r in load_engine(engine).releases)


# Values of the knobs whose declaration lists no options (by name), then by kind for the rest.
CANDIDATES = {
    "gpus": (4, 2), "tp": (2, 4), "dp": (2,), "ep": (4, 2), "redundant_experts": (8, 4), "context": (4096,),
    "engine_version": _releases("trtllm")[:-1][::-1], "moe_backend": ("CUTLASS", "TRTLLM"),
    "drafter": ("mtp", "ratio:0.05", "eagle3"), "popularity": ("uniform", "skew:0.1", "zipf:0.3"),
    "lags": ((0.5, 0.4, 0.3), (0.3, 0.2)), "tree": (full_tree((2, 2)),),
    "acceptance": (0.7, (0.8, 0.6, 0.5)), "cuda_graphs": (False,),
}


def _default(k):
    owner = Deployment() if k.home in ("layout", "deployment") else PRESETS[MODE] if k.home == "mechanisms" else None
    return getattr(owner, k.name, None) if owner is not None else k.default


def values(k) -> tuple:
    """Non-default values of knob ``k``: its declared options, else :data:`CANDIDATES`."""
    opts = next((c for c in (k.param.constraints if k.param else ()) if isinstance(c, Options)), None)
    vals = tuple(v for v in opts.values if v is not None) if opts is not None else ()
    vals += CANDIDATES.get(k.name, ())
    return tuple(v for v in dict.fromkeys(vals) if v != _default(k))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_scenario_flags(p, single=True)
    add_tree_flags(p)
    return p


def from_argv(argv: list[str]):
    args = parser().parse_args(["--model", MODEL, *argv])
    trees = trees_from(args)
    return request_from(args, trees[0] if trees else None)


def study_case(tmp_path, req):
    """``req`` written as a study target (YAML), read back and priced by the study's path."""
    doc = {"schema": "study/v2", "name": "knob", "title": "one knob", "description": "round trip",
           "grid": {"targets": [target_mapping(MODEL, HARDWARE, req)], "batch": [1], "draft_len": list(GAMMAS),
                    "modes": ["prior", MODE]},
           "analyses": {"curve_shapes": {"tolerance": 0.01, "ratio_draft_len": GAMMAS[0], "low_batch_max": 1}}}
    path = tmp_path / "knob.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    study = load_experiment(str(path))
    (t,) = study.grid.targets
    dd, why = deploy_target(study, t)
    assert dd is not None, why
    return price_target(study, RunContext(), dd, MODE)


def csv_row(tmp_path, case) -> dict:
    sc = case.scenario
    path = write_csv(SweepResult([case], sc.drafter, sc.accept, sc.context), tmp_path / "sweep.csv")
    with open(path, newline="", encoding="utf-8") as f:
        (row,) = csv.DictReader(f)
    return row


def priced(req, model=MODEL, hw=HARDWARE, mode=MODE):
    """``req`` priced at :data:`BATCH` × :data:`GAMMAS` (a tree: at its own node count)."""
    return price(resolve(model, hw, req, mode=mode), BATCH, None if req.tree is not None else GAMMAS)


def same_prices(a, b) -> None:
    for f in ("t_decode", "t_verify", "t_round", "speedup", "speedup_low", "speedup_high", "unique_verify"):
        x, y = getattr(a.result, f), getattr(b.result, f)
        assert (x is None) == (y is None) and (x is None or np.array_equal(x, y)), f


def first_priced(k):
    """The first non-default value of ``k`` that prices on the small model (some options need another layout)."""
    refused = []
    for v in values(k):
        try:
            req = request(**{k.name: v})
            return v, req, priced(req)
        except SimulatorError as exc:
            refused.append(f"{v!r}: {exc}")
    pytest.fail(f"no value of knob {k.name} prices on {MODEL}: {refused}")


def test_every_knob_has_values():
    missing = [k.name for k in KNOBS if not values(k)]
    assert not missing, f"add non-default values of {missing} to CANDIDATES"


@pytest.mark.parametrize("k", KNOBS, ids=[k.name for k in KNOBS])
def test_knob_round_trips(tmp_path, k):
    v, req0, _ = first_priced(k)
    req1 = from_argv(argv_of(req0))  # CLI argv -> Request
    p1 = priced(req1)
    p2 = study_case(tmp_path, req1)  # -> study YAML target -> the study's pricing path
    row = csv_row(tmp_path, p2)  # -> CSV row
    assert row[k.column] == (str(v) if k.kind == "int" else k.text(v)), "the row states the knob priced"
    model, hw, mode, req3 = row_request(row)  # -> Request -> CLI argv -> Request
    assert (model, hw, mode) == (MODEL, HARDWARE, MODE)
    req4 = from_argv(argv_of(req3))
    p4 = priced(req4, model, hw, mode)
    same_prices(p1, p2)
    same_prices(p1, p4)


def test_the_knob_changes_the_price_it_names():
    """The round trip is not vacuous: a knob read back wrong (here routing dropped from the row) changes the price."""
    k = next(k for k in KNOBS if k.name == "routing")
    v, req, p = first_priced(k)
    row = csv_row_plain(p)
    assert row[k.column] == v
    row[k.column] = ""  # the row forgets the routing model: the mode's own (overlap)
    _, _, mode, back = row_request(row)
    assert not np.array_equal(priced(back, mode=mode).result.unique_verify, p.result.unique_verify)


def csv_row_plain(case) -> dict:
    from simulator.sweep.table import tidy_columns

    cols = tidy_columns([case])
    return {c: str(cols[c][0]) for c in COLUMN_NAMES}


def test_every_surface_knows_every_knob():
    """Each knob is a flag of the scenario commands, a key of a study target and a column of the sweep table."""
    flags = {s for a in parser()._actions for s in a.option_strings}
    target = {f.name for f in dataclasses.fields(Target)}
    for k in KNOBS:
        assert k.flag in flags and k.name in target and k.column in COLUMN_NAMES, k.name


def test_study_target_refuses_an_unknown_key_in_one_line(tmp_path, capsys):
    from simulator.cli import main

    doc = {"schema": "study/v2", "name": "bad", "title": "bad", "description": "bad",
           "grid": {"targets": [{"model": MODEL, "dp": 2, "dpp": 2}], "batch": [1], "draft_len": [1]},
           "analyses": {"curve_shapes": {"tolerance": 0.01, "ratio_draft_len": 1, "low_batch_max": 1}}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert main(["experiment", str(path), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'dpp'" in err and "did you mean 'dp'" in err
