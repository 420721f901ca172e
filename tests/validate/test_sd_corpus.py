"""The public SD measurement corpus (measured/sd/corpus.csv): the bundled file reads, is large and varied enough, holds
the six sd-validation cases with their measured values, cites only documented sources, labels what it sets apart and
who measured each row; every kind of bad input is one error line naming the row and the field."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import SimulatorError
from simulator.validate.sd_corpus import (
    COLUMNS,
    REQUIRED,
    SET_APART,
    SDRow,
    bundled_corpus_path,
    by_author,
    by_source,
    measured_speedup,
    read_corpus,
)
from simulator.validate.sd_fit import SIX_CASES

ROOT = Path(__file__).resolve().parents[2]
SOURCES_MD = ROOT / "docs/sources/sd_corpus.md"
STUDY = ROOT / "experiments/sd-validation.yaml"


@pytest.fixture(scope="module")
def rows() -> tuple[SDRow, ...]:
    return read_corpus()


def test_bundled_corpus_reads_and_is_large_and_varied(rows):
    assert bundled_corpus_path().name == "corpus.csv"
    assert len(rows) >= 40
    groups = by_source(rows)
    assert len(groups) >= 8
    assert sum(len(g) for g in groups.values()) == len(rows)
    assert {r.engine for r in rows} >= {"sglang", "vllm", "trtllm"}
    assert {r.level for r in rows} <= {"serving", "step"}
    assert all(measured_speedup(r) > 0 for r in rows)
    # both outcomes are in the data: SD losing and SD winning
    assert any(measured_speedup(r) < 1 for r in rows) and any(measured_speedup(r) > 1.5 for r in rows)


def test_ids_unique(rows):
    assert len({r.id for r in rows}) == len(rows)


def test_every_source_key_is_a_section_of_the_sources_doc(rows):
    sections = set(re.findall(r"^## (\S+)\s*$", SOURCES_MD.read_text(encoding="utf-8"), flags=re.M))
    keys = {r.source_key for r in rows}
    assert keys <= sections, sorted(keys - sections)
    assert sections <= keys, f"documented sources without rows: {sorted(sections - keys)}"
    assert "sources/sd_corpus.md" in (ROOT / "docs/SOURCES.md").read_text(encoding="utf-8")


def test_rows_state_a_comparable_measurement(rows):
    for r in rows:
        if r.metric == "speedup_only":
            assert r.speedup is not None and r.baseline_value is None
        else:
            assert r.unit and ((r.baseline_value and r.sd_value) or r.speedup)
        if r.speedup is not None and r.ratio is not None:
            assert abs(r.speedup / r.ratio - 1) <= 0.01


def test_the_six_sd_validation_cases_are_rows_with_their_measured_values(rows):
    """Each case of the sd-validation study is one corpus row, or the card's per-dataset rows whose mean the study
    states (the corpus keeps the rows, not their mean): configuration, AL and measured speedup agree."""
    cases = yaml.safe_load(STUDY.read_text(encoding="utf-8"))["analyses"]["sd_validation"]["cases"]
    assert sorted(c["name"] for c in cases) == sorted(SIX_CASES)
    by_id = {r.id: r for r in rows}
    for c in cases:
        rs = [by_id[i] for i in SIX_CASES[c["name"]]]
        for r in rs:
            assert (r.target_catalog, r.gpu, r.tp, r.batch, r.draft_steps) == (
                c["model"], c["hardware"], c["tp"], c["batch"], c["draft_len"]), c["name"]
        als = [r.accept_length for r in rs if r.accept_length is not None]  # the GLM card states AL at B = 1 only
        if als:
            assert sum(als) / len(als) == pytest.approx(c["accept_length"], abs=0.005)
        mean = sum(measured_speedup(r) for r in rs) / len(rs)
        assert mean == pytest.approx(c["measured"], abs=0.005), c["name"]
    found = {c["name"]: [by_id[i] for i in SIX_CASES[c["name"]]] for c in cases}
    assert {r.source_key for rs in found.values() for r in rs} == {"specforge-339", "angelslim-163",
                                                                   "thoughtworks-glm47flash"}
    # the four measured losses are losses in the corpus too
    assert sum(sum(measured_speedup(r) for r in rs) / len(rs) < 1 for rs in found.values()) == 4


def test_no_row_is_the_mean_of_other_rows(rows):
    """A source's summary row (the mean of its per-dataset rows at the same point) would count them twice."""
    for key, group in by_source(rows).items():
        points = {}
        for r in group:
            points.setdefault((r.batch, r.draft_steps, r.topk, r.draft_tokens, r.gpu, r.tp), []).append(r)
        for same in points.values():
            for r in same:
                others = [x for x in same if x is not r and x.baseline_value and x.sd_value]
                if len(others) >= 2 and r.baseline_value and r.sd_value:
                    mean_b = sum(x.baseline_value for x in others) / len(others)
                    mean_s = sum(x.sd_value for x in others) / len(others)
                    assert not (abs(r.baseline_value / mean_b - 1) < 0.002 and abs(r.sd_value / mean_s - 1) < 0.002), (
                        r.id, key)


def test_set_apart_rows_are_labelled_with_their_reason(rows):
    """Issue 26 item 2: rows without an AL, a contradicting source, a run used twice and a speedup above its AL are
    kept, labelled, and not validated; the end-to-end runtime ratios say so."""
    by_id = {r.id: r for r in rows}
    assert all(("no-al" in r.set_apart) == (r.accept_length is None) for r in rows)
    glm = by_source(rows)["thoughtworks-glm47flash"]
    assert glm and all("contradicting-source" in r.set_apart for r in glm)
    assert {r.id for r in rows if "duplicate-run" in r.set_apart} == {
        "lmsys-mtp-ds3-16xh200-c32-n3-vs-nooverlap", "lmsys-mtp-ds3-16xh200-c32-n4-vs-nooverlap"}
    ngram = by_source(rows)["trtllm-blog7"]
    assert {r.metric for r in ngram} == {"runtime"}
    assert [r.id for r in ngram if r.apart] == ["trt7-scout-8xb200-b1-ngram-k3v5"]
    assert by_id["trt7-scout-8xb200-b1-ngram-k3v5"].set_apart == ("speedup-above-al",)
    # the LMSYS MTP rows in their real layout and load (sglang #7998): 16 GPUs, DP attention, 2 requests per rank
    for rid in ("lmsys-mtp-ds3-16xh200-c32-n3-vs-overlap", "lmsys-mtp-ds3-16xh200-c32-n4-vs-overlap"):
        r = by_id[rid]
        assert (r.gpu_count, r.tp, r.dp, r.ep, r.batch, r.two_batch_overlap) == (16, 1, 16, 16, 32, "off")
        assert not r.apart and r.level == "step"
    assert set(SET_APART) >= {c for r in rows for c in r.set_apart}


def test_every_source_has_one_author_and_authors_group_sources(rows):
    """One source, one author; the authors are the folds (SpecForge #339 and AngelSlim #163: one person)."""
    authors = by_author(rows)
    assert sum(len(g) for g in authors.values()) == len(rows)
    for key, group in by_source(rows).items():
        assert len({r.author for r in group}) == 1, key
    assert {r.source_key for r in authors["Zzsf11"]} == {"specforge-339", "angelslim-163"}
    assert len(authors) >= 8


def test_measured_speedup_uses_the_metric_direction(rows):
    thr = next(r for r in rows if r.metric == "output_throughput" and r.speedup is None)
    assert measured_speedup(thr) == pytest.approx(thr.sd_value / thr.baseline_value)
    lat = next(r for r in rows if r.metric in ("latency", "tpot") and r.ratio is not None)
    assert lat.ratio == pytest.approx(lat.baseline_value / lat.sd_value)


# ------------------------------------------------------------------------------------------------ bad input
GOOD = {"id": "x1", "source_key": "src", "author": "someone", "url": "https://example.org", "engine": "sglang",
        "engine_version": "",
        "gpu": "h100-sxm", "gpu_count": "2", "tp": "2", "ep": "", "dp": "", "dtype": "bf16",
        "target": "Qwen3-30B-A3B", "target_catalog": "qwen3-30b-a3b", "drafter_kind": "eagle3", "drafter": "d",
        "draft_steps": "3", "topk": "1", "draft_tokens": "4", "accept_length": "1.86", "batch": "1",
        "concurrency_kind": "batch", "metric": "output_throughput", "level": "serving", "unit": "tok/s",
        "baseline_value": "200", "sd_value": "100", "speedup": "0.5", "dataset": "", "isl": "", "osl": "",
        "temperature": "0", "overlap_scheduler": "off", "baseline_overlap": "", "two_batch_overlap": "",
        "spec_version": "", "set_apart": "", "notes": "a, quoted note"}


def _write(tmp_path: Path, rows: list[dict], columns=COLUMNS, bom: bool = False) -> Path:
    p = tmp_path / "c.csv"
    with p.open("w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.DictWriter(f, list(columns), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return p


def _error(p: Path) -> str:
    with pytest.raises(SimulatorError) as e:
        read_corpus(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_good_row_reads_and_bom_is_accepted(tmp_path):
    for bom in (False, True):
        (r,) = read_corpus(_write(tmp_path, [GOOD], bom=bom))
        assert r.id == "x1" and r.gpu_count == 2 and r.ep is None and r.temperature == 0.0
        assert r.notes == "a, quoted note" and measured_speedup(r) == 0.5


def test_missing_and_unknown_columns(tmp_path):
    msg = _error(_write(tmp_path, [GOOD], columns=[c for c in COLUMNS if c != "metric"]))
    assert "missing" in msg and "metric" in msg
    p = tmp_path / "u.csv"
    text = _write(tmp_path, [GOOD]).read_text(encoding="utf-8").splitlines()
    p.write_text("\n".join([text[0] + ",colour", text[1] + ",red"]) + "\n", encoding="utf-8")
    msg = _error(p)
    assert "unknown" in msg and "colour" in msg


@pytest.mark.parametrize("field", REQUIRED)
def test_missing_required_field(tmp_path, field):
    bad = {**GOOD, field: ""}
    msg = _error(_write(tmp_path, [bad]))
    assert f"'{field}'" in msg
    if field != "id":
        assert "'x1'" in msg


def test_missing_speedup_and_values(tmp_path):
    msg = _error(_write(tmp_path, [{**GOOD, "baseline_value": "", "sd_value": "", "speedup": ""}]))
    assert "'x1'" in msg and "'speedup'" in msg
    msg = _error(_write(tmp_path, [{**GOOD, "sd_value": ""}]))
    assert "'x1'" in msg and "'sd_value'" in msg
    msg = _error(_write(tmp_path, [{**GOOD, "unit": ""}]))
    assert "'x1'" in msg and "'unit'" in msg


@pytest.mark.parametrize("field,value", [("engine", "tgi"), ("drafter_kind", "medusa"), ("metric", "ttft"),
                                         ("level", "kernel"), ("concurrency_kind", "qps"),
                                         ("overlap_scheduler", "yes"), ("baseline_overlap", "no"),
                                         ("two_batch_overlap", "auto")])
def test_bad_enum(tmp_path, field, value):
    msg = _error(_write(tmp_path, [{**GOOD, field: value}]))
    assert f"'{field}'" in msg and repr(value) in msg and "'x1'" in msg


@pytest.mark.parametrize("field", ["gpu_count", "tp", "batch", "baseline_value", "sd_value", "accept_length",
                                   "draft_tokens", "isl"])
@pytest.mark.parametrize("value", ["0", "-2", "nan", "abc"])
def test_non_positive_or_bad_number(tmp_path, field, value):
    msg = _error(_write(tmp_path, [{**GOOD, field: value, "speedup": ""}]))
    assert f"'{field}'" in msg and "'x1'" in msg and repr(value) in msg


def test_other_value_checks(tmp_path):
    assert "'temperature'" in _error(_write(tmp_path, [{**GOOD, "temperature": "-1"}]))
    assert "'tp'" in _error(_write(tmp_path, [{**GOOD, "tp": "4"}]))  # more than gpu_count
    assert "'accept_length'" in _error(_write(tmp_path, [{**GOOD, "accept_length": "0.9"}]))
    assert "'target_catalog'" in _error(_write(tmp_path, [{**GOOD, "target_catalog": "qwen3-31b"}]))
    assert "'metric'" in _error(_write(tmp_path, [{**GOOD, "metric": "speedup_only"}]))


@pytest.mark.parametrize("metric,unit", [("tpot", "tok/s"), ("latency", "tok/s per rank"),
                                         ("output_throughput", "ms"), ("step_time", "GB/s")])
def test_a_unit_that_is_not_the_metrics_is_refused(tmp_path, metric, unit):
    """Tokens per second labelled TPOT would invert the speedup (a measured 0.72 read as 1.39): one line."""
    row = {**GOOD, "metric": metric, "unit": unit, "speedup": ""}
    msg = _error(_write(tmp_path, [row]))
    assert "'unit'" in msg and repr(unit) in msg and metric in msg and "'x1'" in msg


def test_an_acceptance_length_beyond_the_draft_steps_is_refused(tmp_path):
    """A round accepts at most one token per draft step plus the bonus: AL 7.5 with 3 steps is one line."""
    msg = _error(_write(tmp_path, [{**GOOD, "accept_length": "7.5", "draft_steps": "3"}]))
    assert "'accept_length'" in msg and "'7.5'" in msg and "draft_steps + 1 = 4" in msg
    msg = _error(_write(tmp_path, [{**GOOD, "accept_length": "5.5", "draft_steps": "", "draft_tokens": "4"}]))
    assert "draft_tokens + 1 = 5" in msg
    assert read_corpus(_write(tmp_path, [{**GOOD, "accept_length": "4", "draft_steps": "3"}]))  # the most: valid


def test_duplicate_id(tmp_path):
    msg = _error(_write(tmp_path, [GOOD, {**GOOD, "notes": "again"}]))
    assert "'id'" in msg and "'x1'" in msg and "duplicate" in msg


@settings(max_examples=25, deadline=None)
@given(st.floats(0.2, 5.0), st.floats(0.5, 2.0))
def test_speedup_consistency_is_one_percent(tmp_path_factory, ratio, factor):
    """A stated speedup within 1% of the values' ratio reads; beyond 1% it is refused (both metric directions)."""
    tmp = tmp_path_factory.mktemp("h")
    for metric, unit, b, s in (("output_throughput", "tok/s", 100.0, 100.0 * ratio), ("tpot", "ms", 10.0 * ratio,
                                                                                      10.0)):
        row = {**GOOD, "metric": metric, "unit": unit, "baseline_value": repr(b), "sd_value": repr(s),
               "speedup": repr(ratio * factor), "accept_length": "", "set_apart": "no-al"}  # any speedup: no AL
        p = _write(tmp, [row])
        if abs(factor - 1) <= 0.0099:
            assert measured_speedup(read_corpus(p)[0]) == pytest.approx(ratio * factor)
        elif abs(factor - 1) > 0.0101:
            msg = _error(p)
            assert "'speedup'" in msg and "'x1'" in msg


def test_ragged_line_and_unreadable_file(tmp_path):
    p = _write(tmp_path, [GOOD])
    p.write_text(p.read_text(encoding="utf-8") + "x2,src\n", encoding="utf-8")
    assert "line 3" in _error(p)
    missing = tmp_path / "none.csv"
    with pytest.raises(SimulatorError, match="cannot be read"):
        read_corpus(missing)


@pytest.mark.parametrize("changes,field,words", [
    ({"set_apart": "maybe"}, "set_apart", "codes"),
    ({"set_apart": "no-al;no-al", "accept_length": ""}, "set_apart", "distinct"),
    ({"accept_length": ""}, "set_apart", "lacks 'no-al'"),
    ({"set_apart": "no-al"}, "set_apart", "says 'no-al'"),
    ({"set_apart": "no-isl", "isl": "512"}, "set_apart", "says 'no-isl'"),
    ({"accept_length": "1.2", "baseline_value": "100", "sd_value": "150", "speedup": ""}, "set_apart",
     "lacks 'speedup-above-al'"),
    ({"set_apart": "speedup-above-al"}, "set_apart", "not above"),
])
def test_set_apart_labels_must_say_what_the_row_shows(tmp_path, changes, field, words):
    msg = _error(_write(tmp_path, [{**GOOD, **changes}]))
    assert f"'{field}'" in msg and "'x1'" in msg and words in msg


def test_set_apart_rows_read(tmp_path):
    ok = [{**GOOD, "accept_length": "", "set_apart": "no-al; duplicate-run"},
          {**GOOD, "id": "x2", "accept_length": "1.2", "baseline_value": "100", "sd_value": "150", "speedup": "",
           "set_apart": "speedup-above-al"}]
    a, b = read_corpus(_write(tmp_path, ok))
    assert a.set_apart == ("no-al", "duplicate-run") and a.apart and b.apart
    assert not read_corpus(_write(tmp_path, [GOOD]))[0].apart


def test_source_wide_labels(tmp_path):
    """A contradicting source is set apart on every row; a source has one author."""
    two = [{**GOOD, "set_apart": "contradicting-source"}, {**GOOD, "id": "x2"}]
    msg = _error(_write(tmp_path, two))
    assert "'x2'" in msg and "'set_apart'" in msg and "contradicting-source" in msg
    read_corpus(_write(tmp_path, [{**r, "set_apart": "contradicting-source"} for r in two]))
    msg = _error(_write(tmp_path, [GOOD, {**GOOD, "id": "x2", "author": "other"}]))
    assert "'x2'" in msg and "'author'" in msg and "'other'" in msg
