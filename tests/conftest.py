"""Test-session settings. Under CI (the CI environment variable set, as .ci/run's runner sets it) every Hypothesis
property runs a fixed, derandomized set of examples, so a submission's CI result is the result of the same examples
each time; developer runs keep exploring new random examples (and what they find is added as an @example)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
