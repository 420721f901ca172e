"""The strict reader of the project's measurement CSVs (simulator.specs.csvfile), as both of its callers see it: the SD
corpus and the acceptance logs refuse each file-level problem in one ConfigError line naming the field and the fix."""

from __future__ import annotations

import pytest

from simulator.errors import ConfigError
from simulator.specs.acceptance_logs import COLUMNS as LOG_COLUMNS
from simulator.specs.acceptance_logs import bundled_logs_path, read_acceptance_logs
from simulator.validate.sd_corpus import COLUMNS as SD_COLUMNS
from simulator.validate.sd_corpus import bundled_corpus_path, read_corpus

READERS = [(read_corpus, SD_COLUMNS, bundled_corpus_path), (read_acceptance_logs, LOG_COLUMNS, bundled_logs_path)]


def _lines(bundled) -> list[str]:
    return bundled().read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("read", "columns", "bundled"), READERS)
def test_the_bundled_file_reads_and_a_bom_and_blank_lines_change_nothing(tmp_path, read, columns, bundled):
    rows = read()
    p = tmp_path / "x.csv"
    p.write_text("\ufeff" + "\n\n".join(_lines(bundled)) + "\n\n", encoding="utf-8")
    assert read(p) == rows


@pytest.mark.parametrize(("read", "columns", "bundled"), READERS)
@pytest.mark.parametrize(("make", "field", "words"), [
    (lambda p, lines: p.mkdir(), "FILE", "is a folder"),
    (lambda p, lines: p.write_bytes(b""), "columns", "the file is empty"),
    (lambda p, lines: p.write_bytes(b"\xff\xfe\x00bad"), "FILE", "not a readable UTF-8 CSV"),
    (lambda p, lines: p.write_text("\n".join([lines[0] + ",extra"] + lines[1:]), encoding="utf-8"), "columns",
     "unknown column(s) 'extra'"),
    (lambda p, lines: p.write_text("\n".join([lines[0].rsplit(",", 1)[0]] + lines[1:]), encoding="utf-8"),
     "columns", "missing column(s)"),
    (lambda p, lines: p.write_text("\n".join([",".join(reversed(lines[0].split(",")))] + lines[1:]),
                                   encoding="utf-8"), "columns", "not in the documented order"),
    (lambda p, lines: p.write_text("\n".join(lines[:2] + [lines[2] + ",x"]), encoding="utf-8"), "columns",
     "cells, the header"),
])
def test_file_level_problems_are_one_line(tmp_path, read, columns, bundled, make, field, words):
    p = tmp_path / "x.csv"
    make(p, _lines(bundled))
    with pytest.raises(ConfigError) as e:
        read(p)
    text = str(e.value)
    assert "\n" not in text and field in text and words in text and str(p) in text
