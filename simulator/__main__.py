"""``python -m simulator``: see :mod:`simulator.cli`."""

import os
import sys

# One BLAS thread unless the user says otherwise: every matrix here is small (routing traces of at most 2^25 values,
# calibration samples of 8192 x experts), so BLAS threads add contention, not speed (experiment --all: 9.7 -> 7.9 s
# CPU on 2 cores). Set before numpy is first imported; the library itself never changes the environment.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from .cli import main  # noqa: E402  (after the thread settings)

sys.exit(main())
