"""Study files (study/v2): every bundled study reads and checks; invalid files give one-line errors naming the
file and the field, and exit status 2; ``--check`` resolves deployments and inputs, so a study it calls ok runs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from experiments_helpers import bundled_yaml, small_study, write_yaml

from simulator.cli import main
from simulator.errors import ConfigError
from simulator.experiments import ANALYSES, check_experiment, load_experiment
from simulator.specs.catalog import bundled_files

NAMES = list(bundled_files("experiments"))


def test_six_studies_are_bundled():
    assert {"paper-headline", "paper-curves", "overlap-sensitivity", "blackwell-whatif", "agent-traffic",
            "validation"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_bundled_study_reads(name):
    study = load_experiment(name)
    assert study.name == name and study.title and study.description
    assert study.analyses and set(study.analyses) <= set(ANALYSES)


def test_check_flag_checks_all(capsys):
    assert main(["experiment", "--all", "--check", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert all(f"ok  {n} " in out for n in NAMES)


def _error(tmp_path, capsys, doc, *args, where="bad.yaml") -> str:
    """The one-line error of ``doc``: from the library (ConfigError) and from the CLI (exit 2)."""
    path = write_yaml(tmp_path, doc, "bad.yaml")
    if not args:
        with pytest.raises(ConfigError):
            load_experiment(str(path))
    assert main(["experiment", str(path), "--check", "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert where in err  # names the file
    return err


def test_unknown_top_key_names_the_closest(tmp_path, capsys):
    doc = small_study()
    doc["gird"] = doc.pop("grid")
    err = _error(tmp_path, capsys, doc)
    assert "'gird'" in err and "did you mean 'grid'" in err


def test_unknown_analysis_setting_names_the_closest(tmp_path, capsys):
    doc = bundled_yaml("overlap-sensitivity")
    doc["analyses"]["overlap_sweep"]["resolutoin"] = 0.01
    err = _error(tmp_path, capsys, doc)
    assert "resolutoin" in err and "did you mean 'resolution'" in err


def test_unknown_analysis_names_the_closest(tmp_path, capsys):
    doc = small_study()
    doc["analyses"] = {"curve_shape": doc["analyses"]["curve_shapes"]}
    err = _error(tmp_path, capsys, doc)
    assert "curve_shape" in err and "did you mean 'curve_shapes'" in err


def test_unknown_variant_key(tmp_path, capsys):
    doc = small_study(variants=[{"name": "v", "overlap": {"lagz": [0.3]}}])
    err = _error(tmp_path, capsys, doc)
    assert "grid.variants[0].overlap" in err and "'lags'" in err


def test_missing_field(tmp_path, capsys):
    doc = small_study()
    del doc["analyses"]["curve_shapes"]["tolerance"]
    err = _error(tmp_path, capsys, doc)
    assert "analyses.curve_shapes.tolerance" in err and "missing" in err


def test_missing_top_field(tmp_path, capsys):
    doc = small_study()
    del doc["analyses"]
    assert "analyses" in _error(tmp_path, capsys, doc)


def test_wrong_type(tmp_path, capsys):
    doc = small_study(context="long")
    err = _error(tmp_path, capsys, doc)
    assert "grid.context" in err and "'long'" in err


def test_wrong_list_item(tmp_path, capsys):
    err = _error(tmp_path, capsys, small_study(batch=[1, "two", 4]))
    assert "grid.batch[1]" in err
    err = _error(tmp_path, capsys, small_study(batch=[1, 0]))
    assert "grid.batch" in err and "[1, 0]" in err and "requests" in err  # the batch declaration (unit)


def test_unknown_model_mode_and_range(tmp_path, capsys):
    assert "grid.model[1]" in _error(tmp_path, capsys, small_study(model=["qwen3-30b-a3b", "qwen3-235b"]))
    err = _error(tmp_path, capsys, small_study(modes=["prior", "refind"]))
    assert "grid.modes" in err and "refined" in err
    doc = small_study()
    doc["speculation"]["acceptance"] = {"alpha": 1.5}
    assert "speculation.acceptance.alpha" in _error(tmp_path, capsys, doc)


def test_analysis_cross_field_check(tmp_path, capsys):
    doc = small_study()
    doc["analyses"]["curve_shapes"]["ratio_draft_len"] = 2
    err = _error(tmp_path, capsys, doc)
    assert "ratio_draft_len" in err and "grid.draft_len" in err


def test_unknown_bundled_name(capsys):
    assert main(["experiment", "paper-headlin", "--check"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'paper-headline'" in err and err.count("\n") == 1


def test_arguments(capsys):
    assert main(["experiment"]) == 2
    assert main(["experiment", "paper-headline", "--all", "--check"]) == 2


# -- --check resolves what the run needs ---------------------------------------------------------------------------
def test_check_fails_when_a_needed_target_does_not_deploy(tmp_path, capsys):
    doc = bundled_yaml("overlap-sensitivity")
    doc["grid"]["model"] = ["qwen3-30b-a3b", "kimi-k2"]  # 1T parameters in fp8: no fit on 8×80 GB
    load_experiment(str(write_yaml(tmp_path, doc, "bad.yaml")))  # the file itself reads
    err = _error(tmp_path, capsys, doc, "--quiet")
    assert "kimi-k2" in err and "overlap_sweep needs every target" in err


def test_check_reports_but_accepts_skips_a_study_reports(tmp_path):
    study = load_experiment(str(write_yaml(tmp_path, small_study(model=["qwen3-30b-a3b", "kimi-k2"]))))
    lines = check_experiment(study)
    assert any("qwen3-30b-a3b" in x and "tp" in x for x in lines)
    assert any("kimi-k2" in x and "not deployable" in x for x in lines)


def test_check_fails_when_no_target_deploys(tmp_path, capsys):
    assert "no target that deploys" in _error(tmp_path, capsys, small_study(model=["kimi-k2"]), "--quiet")


def test_check_fails_when_a_validation_case_does_not_deploy(tmp_path, capsys):
    doc = bundled_yaml("validation")
    doc["analyses"]["validation"]["checks"][0]["cases"].append({"model": "kimi-k2"})
    err = _error(tmp_path, capsys, doc, "--quiet")
    assert "checks[0].cases[8]" in err and "kimi-k2" in err


def test_check_reads_the_measured_tables(tmp_path, capsys):
    from simulator.specs.catalog import measured_dir

    data = tmp_path / "data"
    data.mkdir()
    for f in measured_dir("h100-sxm").glob("*.csv"):
        (data / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    doc = bundled_yaml("validation")
    path = write_yaml(tmp_path, doc, "bad.yaml")
    assert main(["experiment", str(path), "--check", "--quiet", "--data", str(data)]) == 0
    capsys.readouterr()
    text = (data / "gemm.csv").read_text(encoding="utf-8").replace("latency_us", "latency_ms", 1)
    (data / "gemm.csv").write_text(text, encoding="utf-8")
    err = _error(tmp_path, capsys, doc, "--data", str(data), where="gemm.csv")
    assert "lacks columns ['latency_us']" in err
    (data / "moe.csv").unlink()
    assert "does not exist" in _error(tmp_path, capsys, doc, "--data", str(data), where="moe.csv")


def test_declared_prose_is_data(tmp_path):
    """Prose is declared in the study file as templates filled from the analysis's numbers: findings in file order
    (an empty one dropped), key numbers (one per element with 'each LIST:'), settings and table notes; a wrong kind,
    a name the analysis does not compute or a table it does not produce is a one-line ConfigError."""
    from simulator.experiments import run_experiment

    doc = small_study(model=["qwen3-30b-a3b"], batch=[1], draft_len=[3])
    doc["analyses"]["curve_shapes"].update(
        findings=["{n} target{n>1?s|}: {coarse?coarse|fine}.", "{nskip?skipped|}", "How sure: a caveat."],
        key_numbers={"targets": "{n}", "each with_stats: statistics of {it}": "shipped"},
        settings=["tolerance {s.tolerance:.0%}, batch {grid.batch}"], table_notes={"shapes": "A note on {n}."})
    o = run_experiment(load_experiment(str(write_yaml(tmp_path, doc))))
    assert o.findings == ("1 target: fine.", "How sure: a caveat.")
    bare = small_study(model=["qwen3-30b-a3b"], batch=[1], draft_len=[3])
    del bare["analyses"]["curve_shapes"]["findings"]
    plain = run_experiment(load_experiment(str(write_yaml(tmp_path, bare, "bare.yaml"))))  # no prose declared
    assert plain.findings == () and [t.rows for t in plain.tables] == [t.rows for t in o.tables]
    assert o.key_numbers == (("targets", "1"), ("statistics of qwen3-30b-a3b", "shipped"))
    assert o.settings == ("tolerance 1%, batch [1]",)
    assert next(t for t in o.tables if t.name == "shapes").note == "A note on 1."
    doc["analyses"]["curve_shapes"]["findings"] = "not a list"
    with pytest.raises(ConfigError, match="analyses.curve_shapes.findings"):
        load_experiment(str(write_yaml(tmp_path, doc)))
    doc["analyses"]["curve_shapes"]["findings"] = ["{n unclosed"]
    with pytest.raises(ConfigError, match=r"analyses.curve_shapes.findings\[0\].*without its"):
        load_experiment(str(write_yaml(tmp_path, doc)))
    doc["analyses"]["curve_shapes"].update(findings=["{no_such_number}"])
    with pytest.raises(ConfigError, match=r"analyses.curve_shapes.findings\[0\].*no_such_number"):
        run_experiment(load_experiment(str(write_yaml(tmp_path, doc))))
    doc["analyses"]["curve_shapes"].update(findings=["x"], table_notes={"shapez": "A note."})
    with pytest.raises(ConfigError, match="table_notes.*shapez"):
        run_experiment(load_experiment(str(write_yaml(tmp_path, doc))))


def test_templates_follow_the_numbers():
    """The template filler: formats, two-way and sign choices, comparisons, lists, escapes; flipping a number flips
    the words."""
    from simulator.render.template import fill

    t = ("{x:.1%} is {x~0.01?above|below|at} zero, {big?large|small}, {x>y?x wins|y wins} ({k=='a'?is a|not a}); "
         "{items*{n}={v:+.2f}|; }; {xs*{it:g}| / }; mean \\|e\\| {big?\\|e\\| big|}")
    ns = {"x": 0.5, "y": 0.2, "big": True, "k": "a", "items": [{"n": "p", "v": 1}, {"n": "q", "v": -2}],
          "xs": (1, 2.5)}
    assert fill(t, ns) == "50.0% is above zero, large, x wins (is a); p=+1.00; q=-2.00; 1 / 2.5; mean |e| |e| big"
    flipped = fill(t, ns | {"x": -0.5, "big": False, "k": "b", "items": [], "xs": ()})
    assert flipped == "-50.0% is below zero, small, y wins (not a); ; ; mean |e| "
    assert fill("{x~0.01?above|below|at}", {"x": 0.005}) == "at"
    for x, want in ((1, "le ge eq eq nlt"), (2, "gt ge ne ne nlt"), (0, "le lt ne ne lt")):
        assert fill("{x<=1?le|gt} {x>=1?ge|lt} {x==1?eq|ne} {x!=1?ne|eq} {x<1?lt|nlt}", {"x": x}) == want
    assert fill("{a.0.n} {a.-1.n}", {"a": [{"n": 1}, {"n": 2}]}) == "1 2"
    with pytest.raises(KeyError):
        fill("{missing}", {})


def test_acceptance_reads_by_its_declarations(tmp_path, capsys):
    """AcceptanceSpec is read by the generic reader; the two cross-field rules stay (one of alpha/accept_length; an
    acceptance length of at most draft_len + 1)."""
    doc = small_study()
    doc["speculation"]["acceptance"] = {"accept_length": 4.5, "draft_len": 3}
    assert "speculation.acceptance.accept_length" in _error(tmp_path, capsys, doc)
    doc["speculation"]["acceptance"] = {"alpha": 0.7, "accept_length": 2.0}
    assert "exactly one of 'alpha', 'accept_length' or 'per_position'" in _error(tmp_path, capsys, doc)
    doc["speculation"]["acceptance"] = {"accept_length": 2.73, "draft_len": 3}
    assert load_experiment(str(write_yaml(tmp_path, doc))).speculation.acceptance.draft_len == 3


def test_a_variant_takes_every_non_layout_knob_by_its_name(tmp_path, capsys):
    """A variant's keys are the knob table's (one key per knob, the CLI flag's name and declaration): the drafter,
    each mechanism and each non-layout Deployment field; they become the Variant's forced mechanisms and deployment
    edits. An unknown key or a value outside a knob's declaration is one line naming it."""
    from dataclasses import fields

    from simulator.cost.deployment import Mechanisms
    from simulator.experiments import read_experiment
    from simulator.experiments.grid import VariantSpec, build_variant
    from simulator.pricing.knobs import KNOBS
    from simulator.specs.catalog import load_model

    names = {f.name for f in fields(VariantSpec)}
    assert {k.name for k in KNOBS if k.home in ("deployment", "mechanisms")} | {"drafter"} <= names
    assert not names & {"tp", "dp", "ep", "gpus", "dtype", "kv_dtype", "context", "tree", "mechanisms"}
    every = {f.name: "off" if f.name != "routing" else "uniform" for f in fields(Mechanisms)}
    (e,) = read_experiment(small_study(variants=[{"name": "all", **every, "engine": "vllm", "placement": "balanced",
                                                  "cuda_graphs": False}]), "t.yaml").variants
    v = build_variant(e, load_model("qwen3-30b-a3b"))
    assert dict(v.mechanisms) == every
    assert dict(v.deployment) == {"engine": "vllm", "placement": "balanced", "cuda_graphs": False}
    assert "graph_padding" in _error(tmp_path, capsys, small_study(variants=[{"name": "x", "graph_paddin": "off"}]))
    assert "l2" in _error(tmp_path, capsys, small_study(variants=[{"name": "x", "l2": "of"}]))
    bad = {"name": "x", "overlap": {"lag1": [0.2], "profile": ["markovv"], "shape": [0.3], "shape_baseline": 0.1}}
    assert "overlap.profile[0]" in _error(tmp_path, capsys, small_study(variants=[bad]))


def test_bad_sd_validation_case_is_one_line(tmp_path):
    doc = bundled_yaml("sd-validation")
    doc["analyses"]["sd_validation"]["cases"][0]["accept_length"] = 0.5
    path = write_yaml(tmp_path, doc)
    r = subprocess.run([sys.executable, "-m", "simulator", "experiment", str(path), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "accept_length" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_target_takes_attention_dp_as_the_cli_does(tmp_path):
    """A study target accepts dp (the CLI's --dp): tp 4 x dp 2 deploys as the flags do (16 GPUs for tp 8 dp 2)."""
    from simulator.pricing import resolve

    doc = small_study(targets=[{"model": "qwen3-30b-a3b", "tp": 4, "dp": 2, "ep": 8},
                               {"model": "qwen3-30b-a3b", "tp": 8, "dp": 2, "ep": 8}])
    del doc["grid"]["model"]
    lines = check_experiment(load_experiment(str(write_yaml(tmp_path, doc))))
    cli = [resolve("qwen3-30b-a3b", tp=tp, dp=2, ep=8).deployment.label for tp in (4, 8)]
    assert lines[:2] == [f"qwen3-30b-a3b on h100-sxm: {d}" for d in cli]
    assert "tp4 dp2 ep8" in lines[0] and "tp8 dp2 ep8" in lines[1]
