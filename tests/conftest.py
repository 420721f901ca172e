"""Test-session settings. Under CI (the CI environment variable set, as .ci/run's runner sets it) every Hypothesis
property runs a fixed, derandomized set of examples, so a submission's CI result is the result of the same examples
each time; developer runs keep exploring new random examples (and what they find is added as an @example)."""

import os

# One BLAS thread per test process, as `python -m simulator` runs (simulator/__main__.py): xdist already runs one
# process per core, and BLAS threads on these small matrices only contend with them.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
