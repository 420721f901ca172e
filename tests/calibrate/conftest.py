"""Fixtures shared by the cost tests."""

import pytest


@pytest.fixture(scope="session")
def h100_calibration():
    """``calibrate`` of the bundled H100 SXM profile on its bundled tables, fitted once per test session (a pure
    function of files in the repository: every test reads the same result)."""
    from simulator.calibrate.fit import calibrate
    from simulator.specs.catalog import load_hardware

    return calibrate(load_hardware("h100-sxm"))
