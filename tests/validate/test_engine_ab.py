"""Public engine A/Bs (measured/engines/ab.csv): both arms priced on the pricing path, never fitted; the issue's two
named A/Bs (SGLang's overlap scheduler for plain decoding, 1.1x; spec v1 -> v2 on DeepSeek-R1, sglang PR #12128,
1.137x) within 10%; overlap never slows a step or a round; bad rows are one line."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import ConfigError
from simulator.validate.engine_ab import AB_COLUMNS, TOLERANCE, price_ab, read_ab, validate_ab

NAMED = ("sglang-v04-blog-q30b-tp2", "sglang-12128-r1-tp8")


@pytest.fixture(scope="module")
def results():
    return {r.row.id: r for r in validate_ab()}


def test_the_named_ab_checks_are_within_ten_percent(results):
    for rid in NAMED:
        r = results[rid]
        assert r.predicted is not None and abs(r.error) <= TOLERANCE, (rid, r.predicted, r.row.measured)
        assert r.within


def test_every_row_is_priced_and_overlap_never_slows(results):
    for r in results.values():
        assert r.predicted is not None, r.reason
        assert r.t_off >= r.t_on > 0 and r.predicted >= 1.0


@settings(max_examples=12, deadline=None)
@given(batch=st.sampled_from([1, 2, 8, 32]), which=st.sampled_from(NAMED))
def test_hiding_host_work_never_slows_at_any_batch(results, batch, which):
    r = price_ab(replace(results[which].row, batch=batch))
    assert r.predicted is not None and r.predicted >= 1.0 - 1e-12


def test_the_ab_rows_are_not_fitted():
    """The SD fit never reads the A/B file: its module is imported by the report only."""
    import simulator.validate.sd_fit as fit
    import simulator.validate.sd_stack as stack

    for mod in (fit, stack):
        with open(mod.__file__, encoding="utf-8") as fh:
            assert "engine_ab" not in fh.read()


def _write(tmp_path, rows):
    p = tmp_path / "ab.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(AB_COLUMNS)
        w.writerows([[r.get(c, "") for c in AB_COLUMNS] for r in rows])
    return p


GOOD = {"id": "x", "engine": "sglang", "engine_version": "0.4", "mechanism": "decode_overlap",
        "model": "qwen3-30b-a3b", "gpu": "h100-sxm", "gpu_count": "2", "tp": "2", "batch": "1", "context": "1024",
        "measured": "1.1", "url": "u", "where": "w"}


@pytest.mark.parametrize("change,field", [
    ({"engine": "tgi"}, "engine"), ({"mechanism": "tbo"}, "mechanism"), ({"model": "gpt-5"}, "model"),
    ({"batch": "0"}, "batch"), ({"measured": ""}, "measured"), ({"tp": "1.5"}, "tp"),
    ({"mechanism": "sd_overlap"}, "drafter"),
    ({"off_value": "100", "on_value": "150", "unit": "tok/s"}, "measured"),
])
def test_bad_rows_are_one_line(tmp_path, change, field):
    with pytest.raises(ConfigError, match=f"'{field}'"):
        read_ab(_write(tmp_path, [{**GOOD, **change}]))


def test_a_good_file_reads_and_ids_are_unique(tmp_path):
    (row,) = read_ab(_write(tmp_path, [{**GOOD, "off_value": "100", "on_value": "110", "unit": "tok/s"}]))
    assert row.batch == 1 and row.measured == 1.1 and row.tp == 2 and row.dp is None
    with pytest.raises(ConfigError, match="'id'"):
        read_ab(_write(tmp_path, [GOOD, GOOD]))
    bad = tmp_path / "h.csv"
    bad.write_text("id,engine\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="columns"):
        read_ab(bad)
