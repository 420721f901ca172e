"""Shared fixtures of the validate tests. The leave-one-source-out fit of the bundled SD corpus (a few seconds) is
computed once per test process; the modules that read it are one xdist group (``pytestmark``), so they run in one
worker (pyproject's ``--dist loadgroup``) and share it."""

from __future__ import annotations

import pytest

from simulator.specdec import StepCache
from simulator.validate.sd_corpus import read_corpus
from simulator.validate.sd_fit import validate_sd


@pytest.fixture(scope="session")
def validation():
    """validate_sd over the bundled corpus, as `python -m simulator validate sd` runs it (read-only: don't mutate)."""
    return validate_sd(read_corpus(), "bundled", StepCache())
