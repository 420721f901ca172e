"""Public acceptance logs per target (measured/acceptance/logs.csv; issue 26 item 3): the bundled file reads, every row
is a Published entry of the pricing path's acceptance model and reproduces its own AL, every log the default
acceptance uses today is in it, the README's coverage table is what the file covers; bad input is one error line."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from simulator.errors import SimulatorError
from simulator.specdec.acceptance import PUBLISHED, Published
from simulator.specs.acceptance_logs import (
    COLUMNS,
    bundled_logs_path,
    by_target,
    catalog_coverage,
    read_acceptance_logs,
)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "measured/acceptance/README.md"
LOGS = read_acceptance_logs()


def test_bundled_logs_read_and_cover_targets_of_both_families():
    assert bundled_logs_path().name == "logs.csv" and len(LOGS) >= 150
    assert {r.family for r in LOGS} == {"eagle", "mtp"} and {r.kind for r in LOGS} == {"rates", "al"}
    assert len({r.key for r in LOGS}) == len(LOGS)
    targets = by_target(LOGS)
    assert {"qwen3.5-397b-a17b", "kimi-k2.5", "deepseek-r1", "gpt-oss-120b"} <= set(targets)
    # InferenceX's golden curves: one row per draft length 1..8 and thinking mode
    qwen = [r for r in targets["qwen3.5-397b-a17b"] if r.log.startswith("InferenceX")]
    assert sorted(r.draft_len for r in qwen) == sorted(list(range(1, 9)) * 2)


@pytest.mark.parametrize("row", LOGS, ids=lambda r: r.key[:60])
def test_every_row_is_a_published_entry_that_reproduces_its_al(row):
    """The row's numbers, read by specdec.acceptance.Published (the form default_acceptance consumes), give the AL the
    row states (AL(K)) or implies (1 + Σ u_i) at its draft length."""
    pub = Published(**row.published())
    al = float(pub.acceptance(64).accept_length([row.draft_len])[0])
    assert al == pytest.approx(row.accept_length(), rel=1e-9)
    assert 1.0 <= al <= row.draft_len + 1


def test_every_log_the_default_acceptance_uses_is_in_the_file():
    """The lead can build defaults from the file without losing a log: each PUBLISHED entry's numbers are a row's
    (the Cohere blog's AL is the one exception: read only via summaries, no address to cite)."""
    have = {(tuple(r.rates), None, None) if r.kind == "rates" else ((), round(r.al, 4), r.draft_len) for r in LOGS}
    for central, entries in PUBLISHED.values():
        for p in (central, *entries):
            if p.key.startswith("Cohere"):
                continue
            want = (tuple(p.rates), None, None) if p.rates else ((), round(p.al, 4), p.at)
            assert want in have, p.key


def test_readme_coverage_table_is_the_files_coverage():
    cov = catalog_coverage(LOGS)
    text = README.read_text(encoding="utf-8")
    section = text.split("## Catalog targets with a public log")[1]
    table = dict(re.findall(r"^\| ([a-z0-9.\-]+) \| ([a-z, ]+) \|$", section, flags=re.M))
    assert {t: tuple(f.split(", ")) for t, f in table.items()} == {t: f for t, f in cov.items() if f}
    none = [t for t, f in cov.items() if not f]
    assert none and all(t in text.split("No public chain log was found for:")[1] for t in none)


GOOD = {"log": "x", "family": "eagle", "target": "T", "target_catalog": "gpt-oss-120b", "target_kind": "moe",
        "drafter": "d", "engine": "vllm", "gpu": "", "dataset": "", "sampling": "", "concurrency": "", "kind": "al",
        "draft_len": "3", "values": "2.5", "url": "https://example.org", "where": "table 1", "notes": ""}


def _write(tmp_path, rows, columns=COLUMNS):
    p = tmp_path / "logs.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(columns), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return p


@pytest.mark.parametrize("change,field", [({"family": "ngram"}, "family"), ({"kind": "tree"}, "kind"),
                                          ({"values": "4.5"}, "values"), ({"values": "0.5"}, "values"),
                                          ({"kind": "rates", "values": "0.5;0.6;0.4"}, "values"),
                                          ({"kind": "rates", "values": "0.5;0.4"}, "values"),
                                          ({"draft_len": "2.5"}, "draft_len"),
                                          ({"target_kind": "dense"}, "target_kind"),
                                          ({"target_catalog": "gpt-oss-999b"}, "target_catalog"), ({"url": ""}, "url"),
                                          ({"values": "abc"}, "values")])
def test_bad_rows_are_one_line_naming_the_field(tmp_path, change, field):
    p = _write(tmp_path, [{**GOOD, **change}])
    with pytest.raises(SimulatorError) as e:
        read_acceptance_logs(p)
    msg = str(e.value)
    assert "\n" not in msg and f"'{field}'" in msg and str(p) in msg


def test_good_rows_duplicates_and_columns(tmp_path):
    (r,) = read_acceptance_logs(_write(tmp_path, [GOOD]))
    assert r.published() == {"key": "x, AL at K = 3", "al": 2.5, "at": 3}
    rates = {**GOOD, "log": "y", "kind": "rates", "values": "0.6;0.4;0.2"}
    assert read_acceptance_logs(_write(tmp_path, [rates]))[0].published()["rates"] == (0.6, 0.4, 0.2)
    with pytest.raises(SimulatorError, match="repeats"):
        read_acceptance_logs(_write(tmp_path, [GOOD, GOOD]))
    with pytest.raises(SimulatorError, match="missing column"):
        read_acceptance_logs(_write(tmp_path, [GOOD], columns=[c for c in COLUMNS if c != "notes"]))
