"""Analytical cost-model simulator for speculative decoding on sparse Mixture-of-Experts models.

Subpackages, one mechanism each:

- :mod:`simulator.specs`   hardware profiles and model specs (strict YAML, provenance, derived quantities)
- :mod:`simulator.overlap` routing-overlap statistics and the maximum-entropy unique-expert model
- :mod:`simulator.cost`    the per-op roofline + L2 + kernel-efficiency + fixed-cost step-time engine
- :mod:`simulator.specdec` speculative-decoding rounds, acceptance and speedup
- :mod:`simulator.sweep`   sweeps, tidy tables, attribution and figures

``python -m simulator`` is a thin command-line interface over these (:mod:`simulator.cli`).
"""

from .errors import ConfigError, InfeasibleError, ParameterError, SimulatorError

__version__ = "0.1.0"

__all__ = ["ConfigError", "InfeasibleError", "ParameterError", "SimulatorError", "__version__"]
