"""The suite's xdist groups work: under ``--dist loadgroup`` (pyproject's addopts) a test marked ``xdist_group`` carries
its group in its node id, which is what sends the group to one worker. pytest 9.2 with xdist 3.8 silently drops it
(pytest-dev/pytest-xdist#1386): every worker then recomputes the shared fixtures and the suite slows by a fifth."""

import pytest

pytestmark = pytest.mark.xdist_group("grouping_probe")


def test_a_grouped_test_carries_its_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@grouping_probe"), "xdist loadgroup no longer groups: see pyproject.toml"
