"""Issue 13 items 3, 4 and 6: printed tables fit 100 columns (``--wide`` shows every column), one deployment rule
printed as ``resolved: …`` by step, sweep and explain, and progress counted in points on stderr (none with
``--quiet``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.render.textable import WIDTH, Col, max_width, render
from simulator.sweep.progress import Meter

SWEEP = ["sweep", "--model", "qwen3-235b-a22b", "--batch", "1,16", "--draft-len", "1,3", "--no-plots", "--quiet"]
STEP = ["step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--batch", "1,16", "--tokens", "4"]
EXPLAIN = ["explain", "--model", "qwen3-235b-a22b"]


def _out(capsys, argv) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "t.npz"
    assert main(["overlap", "synth", "--experts", "64", "--top-k", "6", "--sequences", "8", "--tokens", "24",
                 "--layers", "1", "--seed", "1", "--out", str(path)]) == 0
    return str(path)


def _commands(tmp_path, trace):
    return {
        "sweep": [*SWEEP, "--out", str(tmp_path / "s")],
        "step": STEP,
        "explain": EXPLAIN,
        "overlap fit": ["overlap", "fit", trace, "--tokens", "2,4", "--batch", "1,4", "--samples", "100"],
        "show hardware": ["show", "hardware", "h100-sxm"],
        "show model": ["show", "model", "qwen3-235b-a22b"],
        "list": ["list"],
    }


@pytest.mark.parametrize("name", ["sweep", "step", "explain", "overlap fit", "show hardware", "show model", "list"])
def test_default_output_fits_100_columns(name, tmp_path, trace, capsys):
    capsys.readouterr()
    out = _out(capsys, _commands(tmp_path, trace)[name])
    assert out.strip() and max_width(out) <= WIDTH, [x for x in out.splitlines() if len(x) > WIDTH][:3]


@pytest.mark.parametrize("name, column", [("explain", "T_dec/T_ver"), ("overlap fit", "uniform (err)"),
                                          ("show hardware", "kernels: global efficiency")])
def test_wide_shows_every_column(name, column, tmp_path, trace, capsys):
    capsys.readouterr()
    argv = _commands(tmp_path, trace)[name]
    narrow = _out(capsys, argv)
    wide = _out(capsys, [*argv, "--wide"])
    assert max_width(wide) > WIDTH and column in wide
    assert any(len(x) > WIDTH and column in x for x in wide.splitlines()) or column not in narrow


def test_render_hides_optional_columns_and_names_them():
    cols = [Col("name", "<"), Col("value"), Col("extra", drop=1), Col("note", "<", wrap=True)]
    rows = [["a" * 20, "1.0", "x" * 60, "word " * 30]]  # the wrapped note alone cannot make room for 'extra'
    text = render(cols, rows, title="t " * 80)
    assert max_width(text) <= WIDTH and "hidden: extra (--wide shows every column)" in text
    wide = render(cols, rows, wide=True)
    assert "x" * 60 in wide and max_width(wide) > WIDTH
    both = render(cols, [["a", "1.0", "x" * 30, "word " * 30]])  # here wrapping the note is enough
    assert "x" * 30 in both and "hidden" not in both and max_width(both) <= WIDTH


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text("abc xyz-", min_size=0, max_size=30), st.text("0123456789.", max_size=12),
                          st.text("pq rs", max_size=200)), min_size=1, max_size=6),
       st.integers(40, 120))
@example(rows=[("", "", "p" * 11), ("a" * 28, "", "")], width=40)  # found by CI: the wrap column below 12
def test_render_fits_any_width_with_a_wrap_column(rows, width):
    """Property: fixed columns that fit leave the rest to the wrapped column; no line exceeds the width."""
    cols = [Col("a", "<"), Col("b", drop=1), Col("text", "<", wrap=True)]
    text = render(cols, rows, title="title " * 30, notes=["note " * 30], width=width)
    assert max_width(text) <= width


def _resolved(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("resolved:")]


def test_wrapped_columns_are_narrowed_widest_first():
    # a long GPU label and a short model name: the GPU column gives way, the model name is not cut to its header
    cols = (Col("model", "<", wrap=True), Col("hardware", "<", wrap=True), Col("result", ">"))
    rows = [["qwen3-235b-a22b", "mi300x (spec-only:h100-sxm)", "x" * 20]]
    from simulator.render.textable import layout

    _, _, widths, _ = layout(cols, rows, width=50)
    assert sum(widths) + 4 <= 50 and abs(widths[0] - widths[1]) <= 1
    out = render(cols, rows, width=50)
    assert max(len(line) for line in out.splitlines()) <= 50


def test_one_deployment_rule_printed_alike(tmp_path, capsys):
    step = _resolved(_out(capsys, STEP))
    sweep = _resolved(_out(capsys, [*SWEEP, "--out", str(tmp_path / "s")]))
    explain = _resolved(_out(capsys, EXPLAIN))
    assert step == sweep == explain == ["resolved: 8 GPUs fp8_block tp8 ep8 context 1024"]
    # an override is kept and printed the same way
    over = ["--tp", "4", "--dtype", "bf16"]
    assert _resolved(_out(capsys, [*STEP, *over])) == _resolved(_out(capsys, [*EXPLAIN, *over])) == \
        ["resolved: 8 GPUs bf16 tp4 dp2 ep8 context 1024"]


def test_step_and_explain_price_the_same_verify_pass(capsys):
    """The README's case: step's T(B=1, s=4) is explain's refined T_verify at B=1, γ=3 (one rule, same numbers)."""
    step = json.loads(_out(capsys, [*STEP, "--batch", "1", "--json"]))
    walk = json.loads(_out(capsys, [*EXPLAIN, "--json"]))
    assert step[0]["tp"] == walk["deployment"]["tp"] == 8 and step[0]["dtype"] == walk["deployment"]["dtype"]
    assert step[0]["time_us"] == pytest.approx(walk["steps"][-1]["t_verify_us"], rel=1e-9)


def test_progress_on_stderr_and_quiet_silences_it(tmp_path, capsys):
    argv = [x for x in SWEEP if x != "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("sweep:")]
    assert lines and lines[-1].startswith("sweep: done, 8 points priced") and "points (" not in out
    assert "8 points priced in" in out  # the summary states the same count
    assert main([*argv, "--quiet", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().err == ""


def test_meter_estimates_and_throttles():
    t = [0.0]
    said = []
    m = Meter("run", 100, said.append, every=0.5, clock=lambda: t[0])
    t[0] = 1.0
    m.add(25, "first")  # always said: 25 of 100 after 1 s -> 3 s left
    t[0] = 1.2
    m.add(25)  # within 0.5 s of the last line: not said
    m.drop(10)  # 10 points will not be priced
    t[0] = 2.0
    m.add(40)  # the last point: always said
    # the total never shrinks (issue 20): dropped points are settled and said
    assert said == ["run: 25/100 points (25%), 1.0 s, ~3.0 s left (first)",
                    "run: done, 90 points priced, 10 not priced, 2.0 s"]


def test_meter_says_the_end_once_when_the_rest_is_dropped():
    said = []
    m = Meter("run", 10, said.append, every=100.0, clock=lambda: 0.0)
    m.add(4)
    m.add(2)  # throttled
    m.drop(4)  # nothing left to price: the last line is said
    m.drop(0)
    assert said[-1] == "run: done, 6 points priced, 4 not priced, 0.0 s" and len(said) == 2
