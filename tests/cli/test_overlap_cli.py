import json

import pytest

from simulator.cli import main


def _run(capsys, *argv):
    code = main(["overlap", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_json(capsys):
    code, out, err = _run(capsys, "predict", "--experts", "128", "--top-k", "8", "--tokens", "4", "--batch", "4",
                          "--overlap", "0.381,0.329,0.301,0.299", "--popularity", "skew:0.118", "--ranks", "8",
                          "--json")
    assert code == 0, err
    data = json.loads(out)
    for key in ("unique_experts", "unique_experts_std", "independent", "uniform", "busiest_rank_experts"):
        assert isinstance(data[key], float)
    assert 8 <= data["unique_experts"] < data["independent"] < data["uniform"] <= 128
    assert data["unique_experts"] / 8 <= data["busiest_rank_experts"] <= 16  # the mean rank <= the busiest <= 128/8


def test_predict_placements(capsys):
    """With skewed popularity (expert 0 most popular), contiguous blocks put the popular experts on one rank: its
    busiest rank touches more experts than the balanced (round-robin) placement's; the default (random: the
    expectation over random placements) lies between them."""
    argv = ("predict", "--experts", "128", "--top-k", "8", "--tokens", "4", "--batch", "4", "--overlap",
            "0.381,0.329,0.301,0.299", "--popularity", "skew:0.118", "--ranks", "8", "--json")
    busiest = {}
    for placement in (None, "random", "balanced", "contiguous"):
        code, out, err = _run(capsys, *argv, *(("--placement", placement) if placement else ()))
        assert code == 0, err
        busiest[placement] = json.loads(out)["busiest_rank_experts"]
    assert busiest[None] == busiest["random"]
    assert busiest["balanced"] < busiest["random"] < busiest["contiguous"]


def test_predict_text_and_methods(capsys):
    for method in ("ipf", "markov", "junction", "independent", "uniform"):
        code, out, _ = _run(capsys, "predict", "--experts", "16", "--top-k", "2", "--tokens", "3", "--overlap",
                            "0.4,0.3", "--method", method)
        assert code == 0 and "expected" in out and method in out


@pytest.mark.parametrize(
    "argv,text",
    [
        (["predict", "--experts", "128", "--top-k", "8", "--tokens", "4", "--overlap", "38.1"], "0.381"),
        (["predict", "--experts", "128", "--top-k", "8", "--tokens", "4", "--popularity", "skew:2"], "skew"),
        (["predict", "--experts", "8", "--top-k", "2", "--tokens", "0"], "n_tokens"),
        (["predict", "--experts", "8", "--top-k", "9", "--tokens", "2"], "top_k"),
        (["predict", "--experts", "8", "--top-k", "2", "--tokens", "2", "--batch", "0"], "batch"),
        (["predict", "--experts", "8", "--top-k", "2", "--tokens", "3", "--overlap", "1,0.2"], "no distribution"),
        (["predict", "--experts", "8", "--top-k", "2", "--tokens", "2", "--overlap", "a,b"], "--overlap"),
        (["predict", "--experts", "8"], "required"),
        (["fit", "missing.npy"], "not found"),
        (["synth", "--experts", "8", "--top-k", "2", "--sequences", "2", "--tokens", "4", "--out", "x.csv"],
         "unknown output format"),
        (["synth", "--experts", "8", "--top-k", "2", "--sequences", "2", "--tokens", "4", "--persistence", "1",
          "--out", "x.npy"], "persistence"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, text):
    code = None
    try:
        code = main(["overlap", *argv])
    except SystemExit as exc:  # argparse errors exit directly
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0]


def test_synth_then_fit(tmp_path, capsys):
    path = tmp_path / "trace.npz"
    code, out, err = _run(capsys, "synth", "--experts", "32", "--top-k", "4", "--sequences", "16", "--tokens", "48",
                          "--layers", "2", "--persistence", "0.8", "--skew", "0.2", "--seed", "3", "--out", str(path))
    assert code == 0 and path.exists(), err
    code, out, err = _run(capsys, "fit", str(path), "--tokens", "2,4", "--batch", "1,4", "--layer", "1",
                          "--samples", "300", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["layers"] == 2 and len(data["statistics"]) == 1 and len(data["predictions"]) == 4
    assert all(isinstance(r["empirical"], float) and isinstance(r["pairs_rel_error"], float)
               for r in data["predictions"])
    code, out, _ = _run(capsys, "fit", str(path), "--tokens", "4", "--samples", "200")
    assert code == 0 and "mean |relative error|" in out


def test_warning_is_a_stderr_line(capsys):
    code, out, err = _run(capsys, "predict", "--experts", "8", "--top-k", "2", "--tokens", "4", "--overlap",
                          "0.8,0.9,0.9", "--json")
    assert code == 0 and json.loads(out)["warnings"]
    assert err.startswith("warning:") and all(line.startswith("warning:") for line in err.splitlines())


def test_help_has_examples(capsys):
    for sub in ("predict", "fit", "synth"):
        with pytest.raises(SystemExit) as exc:
            main(["overlap", sub, "--help"])
        assert exc.value.code == 0
        assert "example" in capsys.readouterr().out
