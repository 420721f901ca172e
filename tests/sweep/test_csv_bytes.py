"""The vectorised CSV writer (sweep/io.py) writes the bytes ``csv.writer`` would: %.7g floats, empty NaN, inf,
quoted strings with commas or quotes, integers and booleans as Python prints them."""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from simulator.sweep import run_sweep
from simulator.sweep.io import write_csv
from simulator.sweep.table import COLUMN_NAMES


def _reference(result) -> str:
    def cell(v):
        if isinstance(v, float):
            return ("" if math.isnan(v) else str(v)) if not math.isfinite(v) else f"{v:.7g}"
        return v

    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(COLUMN_NAMES)
    cols = [result.columns[c].tolist() for c in COLUMN_NAMES]
    w.writerows([cell(v) for v in row] for row in zip(*cols, strict=True))
    return buf.getvalue()


def test_csv_bytes_match_csv_writer_with_odd_cells(tmp_path):
    r = run_sweep(["olmoe-1b-7b"], ["h100-sxm"], batch=[1, 4, 16], draft_len=[1, 3])
    r.columns["speedup"][0] = np.nan
    r.columns["acceptance"][1] = np.inf
    r.columns["t_verify_us"][2] = -np.inf
    r.columns["model"] = r.columns["model"].astype(object)
    r.columns["model"][0] = 'a,"b"'
    out = write_csv(r, tmp_path / "s.csv")
    with open(out, newline="") as f:
        assert f.read() == _reference(r)


def test_streamed_files_are_the_whole_tables(tmp_path, monkeypatch):
    """The writers stream the table block by block (a sweep of every model over 1..3000 stays under 1 GiB): the
    bytes are those of the whole table, and the whole table is never built."""
    import json

    import simulator.sweep.table as table
    from simulator.sweep.io import _clean, metadata, write_json
    from simulator.sweep.report import summarize

    monkeypatch.setattr(table, "BLOCK_ROWS", 5)  # several blocks, cases whole
    r = run_sweep(["olmoe-1b-7b", "qwen3-30b-a3b"], ["h100-sxm"], batch=[1, 4, 16], draft_len=[1, 3],
                  trees=[(-1, 0, 0)])
    assert len(list(r.blocks())) > 2
    csv_path, json_path = write_csv(r, tmp_path / "s.csv"), write_json(r, tmp_path / "s.json")
    assert "columns" not in r.__dict__  # streamed: the whole table was never held
    with open(csv_path, newline="") as f:
        assert f.read() == _reference(r)
    rows = [{k: _clean(v) for k, v in x.items()} for x in r.records]
    doc = {"meta": metadata(r), "summary": summarize(r), "rows": rows}
    with open(json_path) as f:
        assert f.read() == json.dumps(doc, indent=1) + "\n"
