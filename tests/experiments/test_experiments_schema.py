"""Every bundled experiment validates; invalid experiment files give one-line errors and exit status 2."""

from __future__ import annotations

import pytest
import yaml
from experiments_helpers import bundled_yaml

from simulator.cli import main
from simulator.errors import ConfigError
from simulator.experiments import KINDS, load_experiment
from simulator.specs.catalog import bundled_files

NAMES = list(bundled_files("experiments"))


def test_six_experiments_are_bundled():
    assert {"paper-headline", "paper-curves", "overlap-sensitivity", "blackwell-whatif", "agent-traffic",
            "validation"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_bundled_experiment_validates(name):
    exp = load_experiment(name)
    assert exp.name == name
    assert exp.kind in KINDS
    assert exp.title and exp.description


def test_check_flag_validates_all(capsys):
    assert main(["experiment", "--all", "--check"]) == 0
    out = capsys.readouterr().out
    assert all(f"ok  {n}" in out for n in NAMES)


def _write(tmp_path, doc) -> str:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return str(p)


def _error(tmp_path, capsys, doc) -> str:
    path = _write(tmp_path, doc)
    with pytest.raises(ConfigError):
        load_experiment(path)
    assert main(["experiment", path, "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    return err


def test_unknown_key_names_closest(tmp_path, capsys):
    doc = bundled_yaml("paper-headline")
    doc["gird"] = doc.pop("grid")
    err = _error(tmp_path, capsys, doc)
    assert "'gird'" in err and "did you mean 'grid'" in err


def test_unknown_nested_key(tmp_path, capsys):
    doc = bundled_yaml("overlap-sensitivity")
    doc["overlap_sensitivity"]["profils"] = ["cohere"]
    err = _error(tmp_path, capsys, doc)
    assert "profils" in err and "profiles" in err


def test_missing_field(tmp_path, capsys):
    doc = bundled_yaml("paper-curves")
    del doc["curves"]["tolerance"]
    err = _error(tmp_path, capsys, doc)
    assert "tolerance" in err and "missing" in err


def test_missing_kind_section(tmp_path, capsys):
    doc = bundled_yaml("paper-headline")
    del doc["headline"]
    assert "headline" in _error(tmp_path, capsys, doc)


def test_wrong_type(tmp_path, capsys):
    doc = bundled_yaml("paper-headline")
    doc["grid"]["context"] = "long"
    err = _error(tmp_path, capsys, doc)
    assert "grid.context" in err and "integer" in err


def test_wrong_list_item_type(tmp_path, capsys):
    doc = bundled_yaml("paper-curves")
    doc["grid"]["batch"] = [1, "two", 4]
    assert "grid.batch[1]" in _error(tmp_path, capsys, doc)


def test_unknown_kind_and_model(tmp_path, capsys):
    doc = bundled_yaml("paper-headline")
    doc["kind"] = "headlines"
    assert "headline" in _error(tmp_path, capsys, doc)
    doc = bundled_yaml("paper-headline")
    doc["targets"][0]["model"] = "qwen3-235b"
    err = _error(tmp_path, capsys, doc)
    assert "targets[0].model" in err


def test_bad_mode_and_range(tmp_path, capsys):
    doc = bundled_yaml("paper-curves")
    doc["modes"] = ["prior", "refind"]
    assert "refined" in _error(tmp_path, capsys, doc)
    doc = bundled_yaml("paper-curves")
    doc["speculation"]["acceptance"] = {"alpha": 1.5}
    assert "alpha" in _error(tmp_path, capsys, doc)


def test_unknown_bundled_name(capsys):
    assert main(["experiment", "paper-headlin", "--check"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'paper-headline'" in err and err.count("\n") == 1


def test_arguments(capsys):
    assert main(["experiment"]) == 2
    assert main(["experiment", "paper-headline", "--all", "--check"]) == 2
