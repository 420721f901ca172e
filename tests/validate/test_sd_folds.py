"""Every leave-one-out of the SD validation holds out by author (issue 26): the rows of one author (one person, team
or harness) are never split between training and held out, even when they come from two sources (SpecForge #339 and
AngelSlim #163 are one person's runs), in the fit folds, the model-error (conformal) folds and the report."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.specdec import StepCache
from simulator.validate.sd_corpus import read_corpus
from simulator.validate.sd_fit import validate_sd
from simulator.validate.sd_report import summary

ROWS = read_corpus()
TWIN = ("specforge-339", "angelslim-163")  # one author, two sources
OTHER = ("lmsys-mtp-2025", "sglang-4716")  # two more SGLang authors, so every fold has training rows


@pytest.fixture(scope="module")
def corpus():
    rows = tuple(r for r in ROWS if r.source_key in TWIN + OTHER and not r.apart)
    assert {r.author for r in rows if r.source_key in TWIN} == {"Zzsf11"}
    return rows


@pytest.fixture(scope="module")
def cache():
    return StepCache()


@pytest.fixture(scope="module")
def base(corpus, cache):
    return validate_sd(corpus, "base", cache)


def _scaled(rows, source, factor):
    return tuple(replace(r, speedup=r.speedup * factor if r.speedup else None,
                         sd_value=r.sd_value * factor if r.sd_value else None)
                 if r.source_key == source else r for r in rows)


def test_an_authors_two_sources_are_held_out_together(corpus, cache, base):
    """Scaling the measurements of one of the author's sources moves no held-out prediction of the other source (it
    was never in that row's training), while a held-out prediction of another author moves (both sources trained
    it): under leave-one-source-out the first would move too."""
    moved = validate_sd(_scaled(corpus, "angelslim-163", 1.4), "moved", cache)
    held = {o.row.id: o.held_out for o in base.priced}
    again = {o.row.id: o.held_out for o in moved.priced}
    twin = [o.row.id for o in base.priced if o.row.source_key == "specforge-339"]
    others = [o.row.id for o in base.priced if o.row.source_key in OTHER]
    assert twin and others
    assert all(again[i] == held[i] for i in twin)
    assert any(abs(again[i] / held[i] - 1) > 1e-6 for i in others)
    # one fold per author, trained without every row of it
    assert set(base.folds) == {r.author for r in corpus}
    n_twin = sum(r.author == "Zzsf11" for r in corpus)
    assert base.folds["Zzsf11"]["sglang"].rows == base.fits["sglang"].rows - n_twin
    assert base.fits["sglang"].authors == 3


def test_the_conformal_folds_and_the_report_are_by_author(corpus, base):
    v = base
    s = summary(v)
    assert {f["author"] for f in s["error_band"]["folds"]} == {r.author for r in corpus}
    assert {a["author"] for a in s["authors"]} == {r.author for r in corpus}
    zz = next(a for a in s["authors"] if a["author"] == "Zzsf11")
    assert zz["sources"] == sorted(TWIN)
    # a held-out author's band quantiles come from the other authors' rows: the twin's rows share one fold's
    for src in TWIN:
        qs = {v.error.held[o.row.id][:2] for o in v.priced if o.row.source_key == src}
        assert len(qs) == 1
    assert {v.error.held[o.row.id][:2] for o in v.priced if o.row.source_key in TWIN} == qs
