"""Speculative decoding on top of the step-time engine (docs/MODEL.md §4).

- :mod:`.acceptance` — AL(γ) from a per-token α or per-position acceptances; α from a reported mean AL.
- :mod:`.drafters`   — drafter kinds (separate model, EAGLE head, MTP modules, fixed ratio) as specs the engine costs.
- :mod:`.rounds`     — round time, speedup, tokens/s, best γ, the batch above which SD stops paying.
"""

from .acceptance import (
    Acceptance,
    AcceptanceDefault,
    accept_length,
    accept_length_positions,
    acceptance_for,
    alpha_from_accept_length,
    default_acceptance,
)
from .drafters import DRAFTER_KINDS, Drafter, drafter_deployment, drafter_spec, eagle_head_spec, mtp_spec, parse_drafter
from .rounds import (
    SpecResult,
    StepCache,
    best_gamma,
    pays_up_to,
    rejection_time,
    round_time,
    speculative,
    speedup,
)

__all__ = [
    "DRAFTER_KINDS", "Acceptance", "AcceptanceDefault", "Drafter", "SpecResult", "StepCache",
    "accept_length", "accept_length_positions", "acceptance_for", "alpha_from_accept_length", "default_acceptance",
    "best_gamma", "drafter_deployment",
    "drafter_spec", "eagle_head_spec", "mtp_spec", "pays_up_to", "parse_drafter", "rejection_time", "round_time",
    "speculative", "speedup",
]
