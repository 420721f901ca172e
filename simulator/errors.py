"""User-facing errors.

Every problem caused by input (a YAML file, a command-line flag, a trace, infeasible statistics) is raised as a
:class:`SimulatorError`. The CLI prints ``error: <message>`` on one line and exits with status 2; library callers
catch the exception. Messages name the place (file and field, or flag), the offending value and the fix.
"""

from __future__ import annotations


class SimulatorError(ValueError):
    """Base class of all input errors. ``str(err)`` is a single line meant for the user."""

    def __init__(self, message: str):
        # One line, always: multi-line texts are folded so that the CLI contract holds.
        super().__init__(" ".join(str(message).split()))


class ConfigError(SimulatorError):
    """A configuration file (hardware profile, model spec, experiment) is invalid.

    Parameters
    ----------
    where:
        The file (or other origin) being read, e.g. ``hardware/h100-sxm.yaml``.
    field:
        Dotted path of the offending field, e.g. ``memory.hbm_bandwidth.unit``.
    problem:
        What is wrong, including the value found.
    fix:
        What to do about it.
    """

    def __init__(self, where: str, field: str, problem: str, fix: str = ""):
        self.where = where
        self.field = field
        self.problem = problem
        self.fix = fix
        loc = f"{where}: " if where else ""
        fld = f"field '{field}' " if field else ""
        tail = f"; {fix}" if fix else ""
        super().__init__(f"{loc}{fld}{problem}{tail}")


class InfeasibleError(SimulatorError):
    """Statistics or a deployment that no real system can realise (e.g. a pair probability above a marginal,
    weights that do not fit in memory)."""


class ParameterError(SimulatorError):
    """A function or command-line parameter is out of its declared domain.

    Raised from a declaration (:mod:`simulator.params`) it also carries ``owner`` (the function or class),
    ``param`` (the library parameter name), ``expected`` (what a valid value is) and ``value`` (what was given),
    so that the CLI can name its flag instead of the parameter. Hand-written checks may give just the message."""

    def __init__(self, message: str, *, owner: str = "", param: str = "", expected: str = "", value=None):
        super().__init__(message)
        self.owner = owner
        self.param = param
        self.expected = expected
        self.value = value
