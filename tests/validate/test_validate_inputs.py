"""Issue 20: `validate tpot` / `validate ops` never answer nonsense and never refuse valid input. Each case is a
file derived from a bundled one; bad input exits 2 with one line naming the column or field, the value and the
fix, valid input gets the right answer (the same as the canonical file)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.validate import validate_tpot
from simulator.validate.mapping import find_gpu, find_model

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TINY = HERE / "tiny_silicon.csv"


def _rows() -> tuple[list[str], list[list[str]]]:
    with TINY.open(newline="", encoding="utf-8") as f:
        r = list(csv.reader(f))
    return r[0], r[1:]


def _write(path: Path, header, rows, bom: bool = False) -> str:
    with path.open("w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def _one_line(capsys, argv) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _priced(v) -> dict:
    return {r.id: r.predicted_tpot_ms for r in v.rows if r.predicted_tpot_ms is not None}


def test_bom_csv_is_read_like_the_plain_one(tmp_path):
    h, rows = _rows()
    v = validate_tpot(_write(tmp_path / "bom.csv", h, rows, bom=True))
    assert _priced(v) == _priced(validate_tpot(TINY)) and len(_priced(v)) == 4


@pytest.mark.parametrize("scale,unit", [(1e-3, "seconds"), (1e3, "microseconds")])
def test_tpot_in_seconds_or_microseconds_is_refused_with_the_unit(tmp_path, capsys, scale, unit):
    h, rows = _rows()
    i = h.index("silicon_tpot_ms")
    for r in rows:
        r[i] = repr(float(r[i]) * scale)
    line = _one_line(capsys, ["validate", "tpot", _write(tmp_path / "s.csv", h, rows)])
    assert "silicon_tpot_ms" in line and unit in line and "milliseconds" in line


def test_a_tpot_column_of_text_is_one_line_not_zero_priced(tmp_path, capsys):
    """A measured column with no number in any row is the file's error (exit 2), not '0/3 priced' and exit 0."""
    h, rows = _rows()
    i = h.index("silicon_tpot_ms")
    for r in rows:
        r[i] = "fast"
    line = _one_line(capsys, ["validate", "tpot", _write(tmp_path / "t.csv", h, rows)])
    assert "silicon_tpot_ms" in line and "'fast'" in line and "milliseconds" in line
    rows[0][i] = "20.0"  # one number: the others are refused row by row, the file is priced
    assert _priced(validate_tpot(_write(tmp_path / "one.csv", h, rows)))


def test_one_row_off_by_1000x_is_refused_alone(tmp_path):
    h, rows = _rows()
    i = h.index("silicon_tpot_ms")
    rows[0][i] = "0.02"  # agg_qwen_h100 measured 20 ms, written in seconds
    r = {x.id: x for x in validate_tpot(_write(tmp_path / "one.csv", h, rows)).rows}
    assert r["agg_qwen_h100"].status == "refused" and "seconds" in r["agg_qwen_h100"].reason
    assert r["agg_qwen_h100_b64"].status == "ok"


def test_header_only_and_empty_files_are_one_line(tmp_path, capsys):
    h, _ = _rows()
    line = _one_line(capsys, ["validate", "tpot", _write(tmp_path / "h.csv", h, [])])
    assert "no data rows" in line
    (tmp_path / "e.csv").write_text("")
    assert "is empty" in _one_line(capsys, ["validate", "tpot", str(tmp_path / "e.csv")])


def test_duplicate_ids_are_priced_once(tmp_path):
    h, rows = _rows()
    v = validate_tpot(_write(tmp_path / "d.csv", h, rows + [rows[0]]))
    dup = v.rows[-1]
    assert dup.status == "refused" and "duplicate id 'agg_qwen_h100'" in dup.reason
    assert sum(r.id == "agg_qwen_h100" and r.predicted_tpot_ms is not None for r in v.rows) == 1


def test_short_row_is_refused_with_its_field_count(tmp_path):
    h, rows = _rows()
    v = validate_tpot(_write(tmp_path / "short.csv", h, rows + [rows[0][:5]]))
    r = v.rows[-1]
    assert r.status == "refused" and "has 5 fields but the header has" in r.reason
    assert "unmapped: system ''" not in str(v.summary()["not_priced"])


@pytest.mark.parametrize("model,system", [
    ("qwen3-235b-a22b", "h100-sxm"),  # catalog names
    ("models/qwen3-235b-a22b.yaml", "H100_SXM"),  # a YAML path; an alias in another case
    ("Qwen3-235B-A22B", "NVIDIA H100 SXM5 80GB"),  # display names
])
def test_models_and_gpus_by_catalog_name_path_or_alias(tmp_path, monkeypatch, model, system):
    monkeypatch.chdir(ROOT)
    h, rows = _rows()
    mi, si = h.index("model_path"), h.index("system")
    rows[0][mi], rows[0][si] = model, system
    rows[0][h.index("moe_quant_mode")] = rows[0][h.index("gemm_quant_mode")] = "fp8_block"
    r = {x.id: x for x in validate_tpot(_write(tmp_path / "n.csv", h, rows)).rows}["agg_qwen_h100"]
    ref = {x.id: x for x in validate_tpot(TINY).rows}["agg_qwen_h100"]
    assert r.status == "ok" and r.predicted_tpot_ms == pytest.approx(ref.predicted_tpot_ms, rel=1e-12)


def test_hub_ids_resolve_through_model_yaml_hf_id():
    assert find_model("mistralai/Mixtral-8x7B-Instruct-v0.1") == ("mixtral-8x7b", "bf16")
    assert find_model("qwen/qwen3-235b-a22b-fp8") == ("qwen3-235b-a22b", "fp8_block")
    assert find_gpu("h100-sxm") == "h100-sxm" and find_gpu("b200_sxm") == "b200"
    assert find_model("acme/Unknown-1B") is None


def test_mapping_file_maps_the_rest(tmp_path, capsys):
    h, rows = _rows()
    f = _write(tmp_path / "m.csv", h, rows)
    (tmp_path / "map.yaml").write_text("models:\n  acme/Unknown-1B: qwen3-30b-a3b\n")
    assert main(["validate", "tpot", f, "--mapping", str(tmp_path / "map.yaml"), "--rows"]) == 0
    out = capsys.readouterr().out
    assert "unmapped_model  unmapped" not in out and out.startswith("id  status  predicted ms")
    (tmp_path / "bad.yaml").write_text("models:\n  acme/Unknown-1B: qwen9\n")
    line = _one_line(capsys, ["validate", "tpot", f, "--mapping", str(tmp_path / "bad.yaml")])
    assert "models.acme/Unknown-1B" in line and "qwen9" in line


def test_report_path_is_checked_before_pricing(capsys, monkeypatch):
    import simulator.validate as v

    def never(*a, **k):
        raise AssertionError("priced before the report path was checked")

    monkeypatch.setattr(v, "validate_tpot", never)
    assert "--report" in _one_line(capsys, ["validate", "tpot", str(TINY), "--report", "/proc/x.md"])


# --- validate ops ------------------------------------------------------------------------------------------------
def _ops(tmp_path, gpu="h100-sxm") -> Path:
    d = tmp_path / "ops"
    shutil.copytree(ROOT / "measured" / gpu, d)
    return d


def _edit(path: Path, fn) -> None:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    rows = fn(rows)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def test_ops_missing_latency_column_and_file_dir(tmp_path, capsys):
    d = _ops(tmp_path)
    _edit(d / "moe.csv", lambda rows: [r[:rows[0].index("latency_us")] for r in rows])
    line = _one_line(capsys, ["validate", "ops", str(d)])
    assert "moe.csv" in line and "latency_us" in line
    line = _one_line(capsys, ["validate", "ops", str(ROOT / "README.md")])
    assert "DIR" in line and "not a folder" in line


def test_ops_negated_latencies_refused(tmp_path, capsys):
    d = _ops(tmp_path)
    _edit(d / "gemm.csv", lambda rows: [rows[0]] + [[*r[:-2], "-" + r[-2], r[-1]] for r in rows[1:]])
    line = _one_line(capsys, ["validate", "ops", str(d)])
    assert "gemm.csv" in line and "latency_us" in line and "positive" in line


def test_ops_latency_in_ms_refused_with_the_unit(tmp_path, capsys):
    d = _ops(tmp_path)
    _edit(d / "gemm.csv", lambda rows: [rows[0]] + [[*r[:-2], repr(float(r[-2]) / 1000), r[-1]] for r in rows[1:]])
    line = _one_line(capsys, ["validate", "ops", str(d)])
    assert "latency_us" in line and "milliseconds" in line


def test_ops_reads_the_gpu_from_the_data(tmp_path, capsys):
    assert main(["validate", "ops", str(ROOT / "measured/gb200"), "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["hardware"] == "gb200"
    line = _one_line(capsys, ["validate", "ops", str(ROOT / "measured/gb200"), "--hardware", "h100-sxm"])
    assert "gb200" in line and "--hardware" in line


def test_batch_inferred_rows_read_workers_and_refuse_speculative_rows(tmp_path):
    """Issue 18 item 5: a disagg row without decode_batch_size is priced from silicon_concurrency over the stated
    decode workers (1 when empty), reported as batch-inferred; a row stating draft tokens is set apart (status
    speculative) and counted in no row set."""
    h, rows = _rows()
    i = [r[0] for r in rows].index("disagg_r1_h200")
    two = list(rows[i])
    two[0] = "two_workers"
    two[h.index("decode_num_workers")] = "2"
    spec = list(rows[i])
    spec[0] = "speculative"
    h2 = [*h, "decode_speculative_num_draft_tokens"]
    body = [[*r, ""] for r in rows] + [[*two, ""], [*spec, "3"]]
    r = {x.id: x for x in validate_tpot(_write(tmp_path / "w.csv", h2, body)).rows}
    one = r["disagg_r1_h200"]
    assert one.status == r["two_workers"].status == "batch-inferred"
    assert r["two_workers"].decode_ms < one.decode_ms  # half the concurrency per worker: a smaller batch
    assert r["speculative"].status == "speculative" and "speculative" in r["speculative"].reason
    assert r["speculative"].predicted_tpot_ms is None
    from simulator.validate.summary import summarise
    s = summarise(r.values())
    assert s["speculative_apart"] == 1 and s["counts"]["speculative"] == 1
    assert s["moe_batch_inferred"]["rows"] == 2  # the speculative twin is not in the batch-inferred set


def test_headline_uses_batch_stated_rows_only():
    from simulator.validate.summary import summarise

    v = validate_tpot(TINY)
    s = summarise(v.rows)
    stated = [x for x in v.rows if x.status == "ok" and x.moe]
    assert s["moe_rows_of_catalog_gpus"]["ok"] == len(stated)
    assert all(x.batch_from == "column" for x in stated)


def test_engine_by_gpu_groups_partition_the_headline_and_count_rows_beyond_the_goal():
    from simulator.validate.summary import GOAL, summarise

    v = validate_tpot(TINY)
    s = summarise(v.rows)
    head, parts = s["moe_rows_of_catalog_gpus"], s["moe_by_engine_gpu"].values()
    assert head["ok"] > 0 and head["beyond_goal"] > 0
    assert sum(p["ok"] for p in parts) == head["ok"] and sum(p["rows"] for p in parts) == head["rows"]
    beyond = sum(abs(x.error) > GOAL for x in v.rows if x.status == "ok" and x.moe)
    assert head["beyond_goal"] == sum(p["beyond_goal"] for p in parts) == beyond


def test_catalog_names_are_unambiguous():
    """Every name, display name, alias and hub id of a bundled model or GPU names one entry (the look-up keeps the
    first claim, so a clash would silently price the wrong spec)."""
    from simulator.specs.catalog import list_hardware, list_models

    for specs in (list_models(), list_hardware()):
        owner: dict[str, str] = {}
        for s in specs:
            for n in {x.strip().lower() for x in (s.name, s.display_name, *s.aliases, *getattr(s, "hf_id", {}))}:
                assert owner.setdefault(n, s.name) == s.name, (n, owner[n], s.name)


def test_bad_hf_id_and_aliases_are_one_line(tmp_path, capsys):
    text = (ROOT / "models/mixtral-8x7b.yaml").read_text(encoding="utf-8")
    (tmp_path / "a.yaml").write_text(text.replace("  mistralai/Mixtral-8x7B-v0.1: bf16", "  Mixtral-8x7B: bf16"))
    line = _one_line(capsys, ["show", "model", str(tmp_path / "a.yaml")])
    assert "hf_id.Mixtral-8x7B" in line and "org/name" in line
    (tmp_path / "b.yaml").write_text(text.replace("  mistralai/Mixtral-8x7B-v0.1: bf16",
                                                  "  mistralai/Mixtral-8x7B-v0.1: fp7"))
    assert "hf_id.mistralai/Mixtral-8x7B-v0.1" in _one_line(capsys, ["show", "model", str(tmp_path / "b.yaml")])
    hw = (ROOT / "hardware/h100-sxm.yaml").read_text(encoding="utf-8")
    (tmp_path / "h.yaml").write_text(hw.replace("aliases: [h100_sxm]", "aliases: [h100_sxm, H100_SXM]"))
    assert "aliases" in _one_line(capsys, ["show", "hardware", str(tmp_path / "h.yaml")])


def test_ops_hardware_by_alias_or_own_profile(capsys):
    data = str(ROOT / "measured/h100-sxm")
    assert main(["validate", "ops", data, "--hardware", "H100_SXM", "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["hardware"] == "h100-sxm"
    assert main(["validate", "ops", data, "--hardware", str(ROOT / "hardware/h100-sxm.yaml"), "--json"]) == 0
    capsys.readouterr()
    assert "unknown hardware profile 'nope'" in _one_line(capsys, ["validate", "ops", data, "--hardware", "nope"])


def test_json_is_strict_json(capsys):
    """Empty row sets have no coverage (null), never NaN (which is not JSON)."""
    import json

    def no_constants(c):
        raise AssertionError(f"{c} in the JSON")

    assert main(["validate", "tpot", str(TINY), "--json"]) == 0
    s = json.loads(capsys.readouterr().out, parse_constant=no_constants)["summary"]
    assert s["moe_beyond_one_scale_up_domain"] == {**s["moe_beyond_one_scale_up_domain"], "rows": 0, "coverage": None}


def test_every_command_takes_catalog_names_aliases_and_hub_ids(capsys):
    from simulator.specs.catalog import load_hardware, load_model

    assert load_model("mistralai/Mixtral-8x7B-Instruct-v0.1").name == "mixtral-8x7b"
    assert load_model("Mixtral-8x7B").name == "mixtral-8x7b"
    assert load_hardware("H100_SXM").name == "h100-sxm" and load_hardware("b200_sxm").name == "b200"
    assert main(["step", "--model", "Qwen/Qwen3-30B-A3B", "--hardware", "h100_sxm", "--batch", "1", "--tokens",
                 "1"]) == 0
    assert "on 8x h100-sxm" in capsys.readouterr().out
    assert "does not exist" in _one_line(capsys, ["step", "--model", "acme/none", "--hardware", "h100-sxm",
                                                  "--batch", "1", "--tokens", "1"])


@pytest.mark.parametrize("table", ["moe", "collectives"])
def test_ops_folder_with_one_empty_table_is_priced(tmp_path, capsys, table):
    d = _ops(tmp_path)
    _edit(d / f"{table}.csv", lambda rows: rows[:1])  # the header only: a GPU without that kind of measurement
    assert main(["validate", "ops", str(d), "--json"]) == 0
    import json

    ops = {r["op"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert ("moe" in ops) == (table != "moe") and "gemm" in ops


@pytest.mark.parametrize("column,value", [("pp_size", "1e400"), ("isl", "inf"), ("batch_size", "nan"),
                                          ("silicon_tpot_ms", "-inf"), ("tp_size", "-8")])
def test_non_finite_or_negative_columns_refuse_the_row(tmp_path, column, value):
    h, rows = _rows()
    rows[0][h.index(column)] = value
    r = {x.id: x for x in validate_tpot(_write(tmp_path / "v.csv", h, rows)).rows}["agg_qwen_h100"]
    assert r.status == "refused" and column in r.reason and value in r.reason
