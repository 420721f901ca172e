"""SD-corpus validation (simulator/validate/sd_speedup.py, sd_fit.py, sd_report.py, `validate sd`): rows become the
right cases, a re-evaluation reproduces the priced path, the fit recovers parameters it generated, the report's
verdicts follow the numbers, and bad input is one line with exit status 2."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.specdec import StepCache
from simulator.specdec.engine_round import ROUND_PARAMS
from simulator.specdec.tree import node_depths
from simulator.validate.sd_corpus import COLUMNS, bundled_corpus_path, read_corpus
from simulator.validate.sd_fit import FIT_PARAMS, RowModel, fit_engine, params_at, validate_sd
from simulator.validate.sd_report import findings, markdown, summary, text_lines
from simulator.validate.sd_speedup import ASSUMED, Skip, _dtype, price_row, setup, tree_parents


@pytest.fixture(scope="module")
def rows():
    return read_corpus()


@pytest.fixture(scope="module")
def cache():
    return StepCache()


def _row(rows, rid):
    return next(r for r in rows if r.id == rid)


@settings(max_examples=80, deadline=None)
@given(steps=st.integers(1, 10), topk=st.integers(1, 10), tokens=st.integers(2, 64))
def test_tree_has_the_stated_nodes_depth_and_branching(steps, topk, tokens):
    par = tree_parents(steps, topk, tokens)
    depth = min(steps, tokens - 1)
    assert par[0] == -1 and all(0 <= p < i for i, p in enumerate(par[1:], 1))
    assert int(node_depths(par).max()) == depth
    kids = np.bincount(np.asarray(par[1:]), minlength=len(par))
    assert kids.max() <= max(topk, 1)
    # every node the engine verifies is there unless the depth × topk budget runs out first
    assert len(par) == min(tokens, 1 + depth * max(topk, 1)) or len(par) == tokens


def test_rows_map_to_their_cases(rows):
    chain = setup(_row(rows, "sf339-q30b-2xh100-b1-s3k1n4"), rows)
    assert (chain.model, chain.hardware, chain.engine, chain.dtype, chain.drafter) == (
        "qwen3-30b-a3b", "h100-sxm", "sglang", "bf16", "eagle3")
    assert chain.gamma == 3 and chain.parents is None and chain.accept_length == pytest.approx(1.86)
    tree = setup(_row(rows, "sf339-q30b-2xh100-b1-s3k3n8"), rows)
    assert tree.parents is not None and len(tree.parents) == 8  # SGLang's draft tokens count the root
    # a chain priced at its draft steps when SGLang's draft tokens = steps + 1 (topk 3, 4 tokens: a chain verify)
    assert setup(_row(rows, "sf339-q30b-2xh100-b1-s3k3n4"), rows).parents is None
    # AL stated at B = 1 only: the same configuration's AL is used and named
    b32 = setup(_row(rows, "tw-glm47f-1xh200-b32"), rows)
    assert b32.al_from == "tw-glm47f-1xh200-b1" and b32.accept_length == pytest.approx(3.29)
    assert b32.level == "serving" and b32.compare == "throughput" and b32.osl == 512
    # MTP on TensorRT-LLM: nextn is the draft length (no root counted)
    assert setup(_row(rows, "trt1-r1-8xb200-b1-mtp3"), rows).gamma == 3


def test_rows_that_cannot_be_priced_say_why(rows):
    with pytest.raises(Skip, match="no catalog model"):
        setup(_row(rows, "gpustack-q35a3b-1xh200-r8-mtp1"), rows)
    no_al = setup(_row(rows, "amdmtp-ds3-8xmi300x-random-c1"), rows)  # no AL anywhere: the default, reported apart
    assert no_al.accept_length is None and no_al.al_from == ASSUMED
    with pytest.raises(Skip, match="n-gram drafter has no default"):
        setup(replace(_row(rows, "trt7-scout-8xb200-b1-ngram-k3v5"), accept_length=None, source_key="x"), rows)
    with pytest.raises(Skip, match="concurrency"):
        setup(replace(_row(rows, "tw-glm47f-1xh200-b1"), concurrency_kind="request_rate"), rows)
    assert _dtype("", "fp8_block") == "fp8_block" and _dtype("fp8", "fp8_block") == "fp8_block"
    assert _dtype("fp16", "bf16") == "bf16"
    assert _dtype("nvfp4 (MoE and dense FFN), bf16 attention", "fp8_block") == "nvfp4"
    with pytest.raises(Skip, match="weight format"):
        _dtype("awq-int3", "bf16")


def test_rows_are_priced_in_the_modes_they_state(rows, cache):
    """LMSYS's MTP case 1 against its no-overlap baseline (51.0 tok/s per rank) and against the overlapped one
    (60.4): the same SD run, the baseline in its own mode, so the first speedup is the larger (the measured 1.60
    against 1.35); a row that states no baseline mode gets the engine's default (SGLang: decode overlapped)."""
    off = price_row(setup(_row(rows, "lmsys-mtp-ds3-16xh200-c2-n3-vs-nooverlap"), rows), cache)
    on = price_row(setup(_row(rows, "lmsys-mtp-ds3-16xh200-c2-n3-vs-overlap"), rows), cache)
    plain = price_row(setup(_row(rows, "sf339-q30b-2xh100-b1-s3k1n4"), rows), cache)
    assert (off.result.decode_overlap, on.result.decode_overlap) == ("off", "on")
    assert off.result.sd_overlap == on.result.sd_overlap == "off" and plain.result.decode_overlap == "on"
    assert off.predicted() > on.predicted() * 1.1


@pytest.mark.parametrize("rid", ["sf339-q30b-2xh100-b1-s3k1n4", "sf339-q30b-2xh100-b1-s3k3n8",
                                 "tw-glm47f-1xh200-b32", "trt1-r1-8xb200-b1-mtp2"])
def test_re_evaluation_reproduces_the_pricing_path(rows, cache, rid):
    p = price_row(setup(_row(rows, rid), rows), cache)
    m = RowModel.of(p)
    assert m.predict() == pytest.approx(p.predicted(), rel=1e-12)
    # the step-level rows compare the path's own speedup at batch C
    if p.setup.compare == "step":
        assert p.predicted() == pytest.approx(float(p.result.speedup[0, p.serving.at_concurrency]), rel=1e-12)
    # more host time per round never raises the predicted speedup (the round-only terms: per_request and
    # decode_host also load the plain decode step, so at their ceilings they can slow the baseline more)
    round_only = ("round_host", "draft_step_host")

    def at(level):
        return params_at(m.engine, [getattr(getattr(ROUND_PARAMS[m.engine], n), level if n in round_only
                                            else "central") for n in FIT_PARAMS])

    assert m.predict(at("high")) <= m.predict(at("low"))


IDS = ("sf339-q30b-2xh100-b1-s3k1n4", "sf339-q30b-2xh100-b4-s3k1n4", "sf339-q30b-2xh100-b1-s7k4n16",
       "as163-q30b-4xh100-b1-s3k3n4", "as163-q30b-4xh100-b8-s4k4n16", "as163-q30b-4xh100-b32-s4k4n16")
# one-GPU rows (GLM-4.7-Flash on 1x H200) placed in both sources, so that every fold separates the multi-GPU term
# tp_host from round_host (on multi-GPU rows alone the two add up and cannot be told apart)
ONE_GPU = (("tw-glm47f-1xh200-b1", "specforge-339"), ("tw-glm47f-1xh200-b1-humaneval", "angelslim-163"))


def test_fit_recovers_the_parameters_that_made_the_measurements(rows, cache):
    """Measured speedups generated at a known θ inside the public ranges: the fit finds that θ's round_host and the
    held-out error vanishes; the untouched corpus rows are not fitted this well."""
    true = [1.7e-3, 15e-6, 30e-6, 0.4e-3, 2.0e-3]  # seconds, inside every public range
    truth = params_at("sglang", true)
    made = []
    for rid, src in [(r, None) for r in IDS] + list(ONE_GPU):
        m = RowModel.of(price_row(setup(_row(rows, rid), rows), cache))
        made.append(replace(_row(rows, rid), speedup=m.predict(truth), baseline_value=None, sd_value=None,
                            metric="speedup_only", unit="", source_key=src or _row(rows, rid).source_key))
    # a row without any AL is priced with the default acceptance and never fitted: a wild measurement moves nothing
    wild = replace(_row(rows, "amdmtp-ds3-8xmi300x-random-c8"), source_key="specforge-339", baseline_value=1.0,
                   sd_value=50.0)
    v = validate_sd(tuple(made) + (wild,), "made", cache)
    assert [o.row.id for o in v.assumed] == [wild.id] and wild.id not in {o.row.id for o in v.priced}
    f = v.fits["sglang"]
    assert f.values[:3] == pytest.approx(true[:3], rel=0.05) and f.values[4] == pytest.approx(true[4], rel=0.05)
    assert f.pinned()[:3] == ["pinned"] * 3 and f.pinned()[3] == "no row moves it"  # decode overlap hides it
    assert f.pinned()[4] == "pinned"  # the one-GPU rows separate tp_host from round_host
    assert max(abs(o.error("fitted")) for o in v.priced) < 1e-3
    assert max(abs(o.error("held_out")) for o in v.priced) < 0.02
    s = summary(v)
    assert s["targets"]["held_out_mean_abs_error"]["met"]
    assert "| held_out_mean_abs_error |" in markdown(s) and any("met" in x for x in text_lines(s))
    met = [k for k, t in s["targets"].items() if t["met"]]
    first = findings(s)[0]
    assert first.startswith(f"{len(met)} of {len(s['targets'])} targets met")
    assert all((k in first) == (k not in met) for k in s["targets"])
    real = validate_sd(tuple(_row(rows, r) for r in IDS), "real", cache)
    assert summary(real)["overall"]["mean_abs_error_held_out"] > 0.05
    assert not summary(real)["targets"]["every_loss_predicted"]["met"]


def test_an_engine_without_rows_keeps_its_ranges(rows, cache):
    m = RowModel.of(price_row(setup(_row(rows, IDS[0]), rows), cache))
    f = fit_engine([m], "vllm")
    assert f.rows == 0 and f.pinned() == ["no rows"] * len(FIT_PARAMS)


def _write(path, rows_):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        w.writerows(rows_)


def test_cli_sd_on_a_small_corpus_and_bad_rows(tmp_path, capsys):
    with open(bundled_corpus_path(), newline="", encoding="utf-8") as fh:
        src = list(csv.reader(fh))
    keep = [r for r in src[1:] if r[0] in ("tw-glm47f-1xh200-b1", "trt1-r1-8xb200-b1-mtp1")]
    good = tmp_path / "c.csv"
    _write(good, keep)
    assert main(["validate", "sd", str(good), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["priced"] == 2 and {g["engine"] for g in out["groups"]} == {"sglang", "trtllm"}
    report = tmp_path / "sub" / "R.md"
    assert main(["validate", "sd", str(good), "--report", str(report)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert report.read_text().startswith("# SD validation") and max(len(x) for x in text) <= 100
    assert any(x.startswith("target every_loss_predicted") for x in text)
    # a report path that cannot be written is refused before any pricing: one line, exit 2
    (tmp_path / "afile").write_text("x")
    assert main(["validate", "sd", str(good), "--report", str(tmp_path / "afile" / "R.md")]) == 2
    assert "report" in capsys.readouterr().err
    bad = [list(r) for r in keep]
    bad[0][COLUMNS.index("level")] = ""
    _write(tmp_path / "bad.csv", bad)
    assert main(["validate", "sd", str(tmp_path / "bad.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "level" in err[0] and "tw-glm47f-1xh200-b1" in err[0]
