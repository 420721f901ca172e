"""The output rules of simulator/outputs.py as users meet them: a run owns its output folder's files by manifest
(a previous run's files are replaced or removed, never left beside the new ones and never a refusal), a file no run
of the tool wrote is never overwritten without --force (run folders and named files alike), a path ending in '/'
names a folder, and SIGTERM or a killed run leaves nothing behind that a later run does not clean.

Runs the CLI in process (``simulator.cli.main``)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from simulator.cli import main

SWEEP = ["sweep", "--model", "qwen3-30b-a3b", "--batch", "1,4", "--draft-len", "1,2", "--quiet"]
EXPLAIN = ["explain", "--model", "qwen3-30b-a3b"]
FIGURES = ["best_gamma_vs_batch.png", "speedup_vs_batch.png", "verify_decode_ratio.png"]


def _listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_explore_loop_leaves_exactly_the_last_runs_files(tmp_path, monkeypatch, capsys):
    """`sweep; sweep --no-plots; sweep; sweep --format json; sweep` in one folder (the relative default results/):
    every run succeeds and the folder holds exactly that run's files."""
    monkeypatch.chdir(tmp_path)
    expect = {(): ["manifest.json", "sweep.csv", *FIGURES], ("--no-plots",): ["manifest.json", "sweep.csv"],
              ("--format", "json"): ["manifest.json", "sweep.json", *FIGURES]}
    for extra in [(), ("--no-plots",), (), ("--format", "json"), ()]:
        assert main([*SWEEP, *extra]) == 0, capsys.readouterr().err
        assert _listing(tmp_path / "results") == sorted(expect[extra]), extra
        manifest = json.loads((tmp_path / "results" / "manifest.json").read_text())
        assert manifest["files"] == sorted(f for f in expect[extra] if f != "manifest.json")


def test_a_sweep_into_a_study_folder_and_the_study_again(tmp_path, capsys):
    """A sweep replaces a study's files in its folder, and the study run again there replaces the sweep's."""
    out = tmp_path / "study"
    assert main(["experiment", "paper-headline", "--quiet", "--out", str(out)]) == 0
    study = _listing(out)
    assert "summary.md" in study
    assert main([*SWEEP, "--no-plots", "--out", str(out)]) == 0
    assert _listing(out) == ["manifest.json", "sweep.csv"]
    assert main(["experiment", "paper-headline", "--quiet", "--out", str(out)]) == 0, capsys.readouterr().err
    assert _listing(out) == study


def test_a_figure_this_tool_wrote_is_replaced_without_a_manifest(tmp_path, capsys):
    """A figure carries the tool's mark: a run folder whose manifest lost it (an older version's run) replaces it."""
    out = tmp_path / "run"
    assert main([*SWEEP, "--out", str(out)]) == 0
    (out / "manifest.json").write_text(json.dumps({"command": "sweep", "files": ["sweep.csv"]}))
    assert main([*SWEEP, "--out", str(out)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("argv,flag", [
    ([*EXPLAIN, "--plot", "{path}.png"], "--plot"),
    (["schedule", "--model", "qwen3-30b-a3b", "--format", "vllm", "--out", "{path}.json"], "--out"),
    (["validate", "sd", "--report", "{path}.md"], "--report"),
    (["validate", "tpot", "tests/validate/tiny_silicon.csv", "--report", "{path}.md"], "--report"),
    (["experiment", "paper-headline", "--report", "{path}.md"], "--report"),
    (["calibrate", "--report", "{path}.md"], "--report"),
], ids=["explain-plot", "schedule-out", "validate-sd-report", "validate-tpot-report", "experiment-report",
        "calibrate-report"])
def test_named_files_no_run_wrote_are_refused_and_a_trailing_slash_names_a_folder(tmp_path, capsys, monkeypatch,
                                                                                   argv, flag):
    """Each refused before any work, in one line naming the flag; the user's file is unchanged."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    mine = tmp_path / "mine"
    target = Path(next(a for a in argv if a.startswith("{path}")).format(path=mine))
    target.write_text("my own notes\n")
    assert main([a.format(path=mine) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {flag}: cannot write") and "--force" in err, err
    assert target.read_text() == "my own notes\n"
    folder = str(tmp_path / "figs") + "/"
    assert main([a.replace("{path}" + target.suffix, folder).format(path=mine) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "it names a folder" in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_figures_carry_the_tools_mark(tmp_path, suffix):
    from matplotlib.figure import Figure

    from simulator.outputs import written_by_tool
    from simulator.render.figures import save

    fig = Figure(figsize=(2, 2))
    fig.subplots().plot([1, 2], [1, 2])
    assert written_by_tool(save(fig, tmp_path / f"ours{suffix}"))
    fig.savefig(tmp_path / f"theirs{suffix}")  # matplotlib's own metadata
    assert not written_by_tool(tmp_path / f"theirs{suffix}")


def test_force_replaces_the_users_plot_and_then_it_is_the_tools(tmp_path, capsys):
    path = tmp_path / "w.png"
    path.write_bytes(b"my figure")
    assert main([*EXPLAIN, "--plot", str(path), "--force"]) == 0
    assert path.read_bytes() != b"my figure"
    assert main([*EXPLAIN, "--plot", str(path)]) == 0, capsys.readouterr().err


def test_schedule_replaces_its_own_files_in_either_format(tmp_path, capsys):
    path = tmp_path / "sd.json"
    base = ["schedule", "--model", "qwen3-30b-a3b", "--batch", "1,8", "--out", str(path)]
    for fmt in ("vllm", "vllm", "json", "json", "vllm"):
        assert main([*base, "--format", fmt]) == 0, capsys.readouterr().err


def test_sigterm_leaves_nothing_and_a_killed_runs_leftovers_are_cleaned(tmp_path, capsys, monkeypatch):
    import simulator.sweep as sweep

    def killed(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(sweep, "plot_all", killed)  # after the CSV is written into the staging folder
    out = tmp_path / "run"
    assert main([*SWEEP, "--out", str(out)]) == 143
    assert capsys.readouterr().err.strip() == "terminated"
    assert not out.exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))
    monkeypatch.undo()
    # what a run killed by SIGKILL leaves (no handler runs): its staging folder and a temporary file, named with its
    # process id; a process that no longer runs (pid beyond the system's limit)
    dead = 2**22 + 1
    out.mkdir()
    (out / f".partial-{dead}-abc").mkdir()
    (out / f".partial-{dead}-abc" / "sweep.csv").write_text("half")
    (out / f".tmp-{dead}-xyz.png").write_text("half")
    (out / f".tmp-{os.getpid()}-live.png").write_text("a run in progress")  # a live process's: kept
    assert main([*SWEEP, "--no-plots", "--out", str(out)]) == 0
    assert _listing(out) == [f".tmp-{os.getpid()}-live.png", "manifest.json", "sweep.csv"]
