"""`validate sd` tells what it does and why rows go unpriced: a progress line on stderr (rows priced of the corpus,
then the fit), and on stdout the rows priced, validated and apart, and each reason a row was not priced with its
count (not only in --json / --report)."""

from __future__ import annotations

import csv

from simulator.cli import main
from simulator.validate.sd_corpus import COLUMNS, bundled_corpus_path


def test_progress_and_the_reasons_rows_go_unpriced(tmp_path, capsys):
    with open(bundled_corpus_path(), newline="", encoding="utf-8") as fh:
        src = list(csv.reader(fh))
    ids = ("tw-glm47f-1xh200-b1-humaneval", "trt1-r1-8xb200-b1-mtp1")
    keep = [r for r in src[1:] if r[0] in ids]
    unmapped = list(keep[0])
    unmapped[0], unmapped[COLUMNS.index("target")], unmapped[COLUMNS.index("target_catalog")] = "x-1", "Acme-1B", ""
    path = tmp_path / "c.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([COLUMNS, *keep, unmapped])
    assert main(["validate", "sd", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "validate sd: done, 2 rows priced, 1 not priced" in err and "validate sd: fitting" in err
    assert out.startswith("rows: 3; validated 1, set apart and priced 1; not priced 1")
    assert max(map(len, out.splitlines())) <= 100
    assert "not priced (1): unmapped: target 'Acme-1B' has no catalog model" in out
    assert main(["validate", "sd", str(path), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
