"""Acceptance: how many tokens one speculative round yields (docs/MODEL.md §4, "Acceptance").

A drafter proposes γ tokens d_1..d_γ; the target checks them in one pass over γ+1 positions. Draft token i is
accepted with probability a_i given that d_1..d_{i-1} were accepted; the first rejection ends the round, and the
target always contributes one token of its own (the correction at the first rejected position, or the bonus token
after d_γ when all are accepted). So the expected tokens per round, bonus included, is

    AL(γ) = 1 + Σ_{i=1..γ} Π_{j=1..i} a_j

With one per-token acceptance a_j = α this is the geometric sum (Leviathan et al. 2023)

    AL(γ) = Σ_{i=0..γ} α^i = (1 − α^(γ+1)) / (1 − α)        (= γ + 1 at α = 1)

Engines report the mean acceptance length AL measured at one draft length γ_ref; :func:`alpha_from_accept_length`
inverts the sum for α (AL is strictly increasing in α on [0, 1], from 1 to γ_ref + 1).

When no acceptance is stated, :func:`default_acceptance` (the one home of that rule) gives the target's own public
logs of the drafter's family (``measured/acceptance/logs.csv``: the median one, the band they span) when there are
any, else the engine-logged vector of the drafter's family on the target's kind (MoE or dense) and the band every
public log of that family spans (:data:`PUBLISHED`); the n-gram drafter has none and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ..errors import ParameterError
from ..params import Interval, Param, check_params
from ..specs.acceptance_logs import read_acceptance_logs

__all__ = [
    "ALPHA",
    "CENTRAL_AT",
    "MAX_POSITIONS",
    "PUBLISHED",
    "Acceptance",
    "AcceptanceDefault",
    "Published",
    "accept_length",
    "accept_length_positions",
    "acceptance_for",
    "alpha_from_accept_length",
    "as_acceptance",
    "default_acceptance",
    "median_log",
    "spanned",
    "target_logs",
]

MAX_POSITIONS = 64  # drafted positions an acceptance can describe (the longest draft length, rounds.MAX_DRAFT_LEN)
ALPHA = Param(Interval(float, 0.0, 1.0), unit="per-token acceptance")  # the declaration of a per-token α
TEMPERATURE = Param(Interval(float, 0.0, 10.0), unit="sampling temperature")  # stated beside an acceptance


def accept_length(alpha, gamma) -> np.ndarray:
    """AL = Σ_{i=0..γ} α^i = (1 − α^(γ+1)) / (1 − α), broadcast over ``alpha`` and integer ``gamma`` ≥ 0.

    The power sum is accumulated term by term (exact at α = 1, no cancellation near it, and non-decreasing in γ
    in floating point as well)."""
    alpha = np.asarray(alpha, dtype=float)
    gamma = np.asarray(gamma)
    if np.any((alpha < 0) | (alpha > 1)) or not np.all(np.isfinite(alpha)):
        raise ParameterError(f"the per-token acceptance alpha must be in [0, 1]; got {np.ravel(alpha).tolist()}")
    if np.any(gamma < 0) or not np.all(np.equal(np.mod(gamma, 1), 0)):
        raise ParameterError(f"the draft length gamma must be an integer >= 0; got {np.ravel(gamma).tolist()}")
    a, g = np.broadcast_arrays(alpha, gamma.astype(int))
    gmax = int(g.max()) if g.size else 0
    partial = np.cumsum(a[..., None] ** np.arange(gmax + 1), axis=-1)  # running sums: exactly monotone in γ
    return np.take_along_axis(partial, g[..., None], axis=-1)[..., 0]


def accept_length_positions(probs, gamma) -> np.ndarray:
    """AL(γ) = 1 + Σ_{i=1..γ} Π_{j≤i} a_j for per-position acceptances ``probs`` = (a_1, a_2, ...), over ``gamma``."""
    p = np.asarray(probs, dtype=float)
    gamma = np.atleast_1d(np.asarray(gamma, dtype=int))
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ParameterError(f"per-position acceptances must be probabilities in [0, 1]; got {p.tolist()}")
    if gamma.size and gamma.max() > p.size:
        raise ParameterError(f"per-position acceptance gives {p.size} positions but draft length {int(gamma.max())} "
                             f"needs {int(gamma.max())}; give one probability per drafted position")
    cum = np.concatenate([[1.0], np.cumprod(p)])  # cum[i] = P(first i drafts accepted)
    csum = np.cumsum(cum)  # csum[γ] = Σ_{i=0..γ} cum[i]
    return csum[gamma]


def alpha_from_accept_length(al, gamma: int) -> np.ndarray | float:
    """The per-token α whose AL at draft length ``gamma`` equals ``al`` (vectorised bisection, exact to ~1e-15).

    ``al`` must lie in [1, γ+1]: 1 means nothing is ever accepted (α = 0), γ+1 means everything is (α = 1)."""
    check_params("alpha_from_accept_length", {"gamma": gamma}, {"gamma": [Interval(int, 1, None)]})
    arr = np.asarray(al, dtype=float)
    bad = ~np.isfinite(arr) | (arr < 1.0) | (arr > gamma + 1.0)
    if np.any(bad):
        raise ParameterError(
            f"mean acceptance length {float(np.ravel(arr)[np.ravel(bad)][0])!r} at draft length {gamma} is "
            f"impossible: it counts accepted tokens per round including the bonus token, so it must be "
            f"in [1, {gamma + 1}]; "
            f"give a value in that range or the draft length it was measured at")
    lo = np.zeros_like(arr)
    hi = np.ones_like(arr)
    exps = np.arange(gamma + 1)
    for _ in range(64):  # 2^-64 < machine epsilon on [0, 1]
        mid = 0.5 * (lo + hi)
        f = (mid[..., None] ** exps).sum(axis=-1)
        below = f < arr
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    out = np.where(arr >= gamma + 1.0, 1.0, np.where(arr <= 1.0, 0.0, 0.5 * (lo + hi)))
    return float(out) if np.ndim(al) == 0 else out


@lru_cache(maxsize=1024)
def _accept_length_positions(per_position: tuple[float, ...], gamma: bytes, shape: tuple) -> np.ndarray:
    """:func:`accept_length_positions` of an acceptance's per-position tuple, cached (a sweep asks for the same
    acceptance at the same draft lengths once per case and band end); callers get a copy."""
    return accept_length_positions(per_position, np.frombuffer(gamma, dtype=int).reshape(shape))


@lru_cache(maxsize=4096)
def _effective_alpha_positions(per_position: tuple[float, ...], gamma: int) -> float:
    """α of one per-position acceptance at one draft length γ ≥ 1, cached: it depends on nothing else, and a sweep
    asks for the same few (acceptance, γ) pairs once per case (the 64-step bisection would otherwise dominate)."""
    al = accept_length_positions(per_position, [gamma])[0]
    return float(alpha_from_accept_length(al, gamma))


@dataclass(frozen=True)
class Acceptance:
    """Acceptance of drafted tokens: one per-token ``alpha``, or ``per_position`` probabilities (a_1, a_2, ...).

    ``source`` says where the numbers came from (e.g. ``"AL 2.73 at γ=3"``) and is shown in tables."""

    alpha: float | None = None
    per_position: tuple[float, ...] | None = None
    source: str = ""
    # Sampling temperature the acceptance was measured at (stated, not transformed: acceptance at another
    # temperature must be stated by the user, since no published rule maps one to the other; docs/MODEL.md §4)
    temperature: float = 0.0
    # (low, high) acceptances of its public range, carried by a default (default_acceptance): the speedup band
    # (specdec.rounds.acceptance_band_of) prices both ends; not part of the acceptance's identity
    band: tuple[Acceptance, Acceptance] | None = field(default=None, compare=False)

    def __post_init__(self):
        if (self.alpha is None) == (self.per_position is None):
            raise ParameterError("acceptance needs exactly one of a per-token alpha or a per-position list")
        if self.alpha is not None:
            ALPHA.check(self.alpha, "alpha", "Acceptance")
        else:
            p = tuple(float(x) for x in self.per_position)
            if not p or any(not (0.0 <= x <= 1.0) for x in p):
                raise ParameterError(f"per-position acceptances must be a non-empty list of probabilities in "
                                     f"[0, 1]; got {list(self.per_position)}")
            object.__setattr__(self, "per_position", p)
        TEMPERATURE.check(self.temperature, "temperature", "Acceptance")

    @classmethod
    def from_alpha(cls, alpha: float) -> Acceptance:
        return cls(alpha=float(alpha), source=f"alpha={float(alpha):g}")

    @classmethod
    def from_accept_length(cls, al: float, gamma: int = 3) -> Acceptance:
        """α from a mean acceptance length ``al`` (bonus included) measured at draft length ``gamma``."""
        return cls(alpha=float(alpha_from_accept_length(float(al), int(gamma))),
                   source=f"AL {float(al):g} at gamma={int(gamma)}")

    @classmethod
    def from_engine_rates(cls, rates, temperature: float = 0.0, source: str = "", extend_to: int = 0) -> Acceptance:
        """From the per-position acceptance rates engines log (vLLM ``Per-position acceptance rate: u_1, u_2, ...``:
        u_i = accepted drafts at position i / rounds, i.e. P(the first i drafts are all accepted)): the conditional
        a_i = u_i / u_{i−1} (u_0 = 1), so that AL(γ) = 1 + Σ_{i≤γ} u_i exactly. The rates must not increase.

        ``extend_to`` > len(rates): positions past the last measured one repeat the last conditional a_n (a geometric
        tail u_{n+k} = u_n · a_n^k), so draft lengths beyond the log are defined (the stated continuation rule)."""
        u = np.asarray([float(x) for x in rates], dtype=float)
        if u.ndim != 1 or not u.size or np.any((u < 0) | (u > 1)) or np.any(np.diff(u) > 1e-12):
            raise ParameterError(f"engine per-position acceptance rates must be non-increasing probabilities in "
                                 f"[0, 1] (P(first i drafts accepted)); got {list(rates)}")
        prev = np.concatenate([[1.0], u[:-1]])
        a = np.where(prev > 0, u / np.where(prev > 0, prev, 1.0), 0.0)
        if int(extend_to) > a.size:  # geometric continuation of the last measured conditional ratio
            a = np.concatenate([a, np.full(int(extend_to) - a.size, a[-1])])
        return cls(per_position=tuple(float(min(1.0, x)) for x in a), temperature=float(temperature),
                   source=source or "engine rates " + ",".join(f"{x:g}" for x in u))

    @classmethod
    def from_positions(cls, probs) -> Acceptance:
        probs = tuple(float(x) for x in probs)
        return cls(per_position=probs, source="per-position " + ",".join(f"{x:g}" for x in probs))

    def accept_length(self, gamma) -> np.ndarray:
        """AL(γ) for each γ in ``gamma`` (AL(0) = 1)."""
        g = np.atleast_1d(np.asarray(gamma, dtype=int))
        if self.alpha is not None:
            return accept_length(self.alpha, g)
        return _accept_length_positions(self.per_position, g.tobytes(), g.shape).copy()

    def effective_alpha(self, gamma) -> np.ndarray:
        """The per-token α that gives the same AL(γ) (= α for a per-token acceptance; NaN at γ = 0)."""
        g = np.atleast_1d(np.asarray(gamma, dtype=int))
        if self.alpha is not None:
            return np.full(g.shape, float(self.alpha))
        if g.size and g.max() > len(self.per_position):
            self.accept_length(g)  # raises the one-line error naming the longest draft length
        return np.array([_effective_alpha_positions(self.per_position, int(x)) if x > 0 else np.nan for x in g])

    @property
    def label(self) -> str:
        return self.source or (f"alpha={self.alpha:g}" if self.alpha is not None else "per-position")


def as_acceptance(acceptance) -> Acceptance:
    """An :class:`Acceptance` from what callers pass: itself, a per-token α (a number), or per-position
    probabilities (a sequence)."""
    if isinstance(acceptance, Acceptance):
        return acceptance
    if isinstance(acceptance, (int, float)):
        return Acceptance.from_alpha(float(acceptance))
    return Acceptance.from_positions(acceptance)


# -- Default acceptance by drafter family and target kind (docs/MODEL.md §4.1, "Default acceptance") ------------
@lru_cache(maxsize=1024)
def _alpha_of(al: float, at: int) -> float:
    """The per-token α of a mean AL at draft length ``at`` (cached: every default rebuilds its logs' acceptances)."""
    return float(alpha_from_accept_length(al, at))


@dataclass(frozen=True)
class Published:
    """One public acceptance measurement: engine per-position ``rates`` u_i = P(first i drafts accepted), or a mean
    acceptance length ``al`` (bonus token included) at draft length ``at``. ``key`` cites it (docs/sources/
    published.md). :meth:`rates_to` continues it to n positions by the stated rule: a log repeats its last conditional
    ratio u_k / u_{k−1} (a geometric tail, as :meth:`Acceptance.from_engine_rates`); a mean AL is the per-token α
    whose AL(at) equals it (u_i = α^i)."""

    key: str
    rates: tuple[float, ...] = ()
    al: float = 0.0
    at: int = 0

    def acceptance(self, n: int = MAX_POSITIONS) -> Acceptance:
        if self.rates:
            return Acceptance.from_engine_rates(self.rates, extend_to=n, source=self.key)
        return Acceptance(alpha=_alpha_of(self.al, self.at), source=self.key)

    def rates_to(self, n: int = MAX_POSITIONS) -> np.ndarray:
        a = self.acceptance(n)
        per = a.per_position if a.per_position is not None else (a.alpha,) * n
        return np.cumprod(per[:n])


# family -> (target is MoE or None for either) -> (central log, every public measurement of that family and kind).
# Every entry is cited in docs/sources/published.md ("Default acceptance by drafter family") with its setup.
_GPT_OSS = Published("vLLM PR #42764 gpt-oss EAGLE-3 log", (0.622, 0.356, 0.203, 0.119, 0.060))
_LLAMA = Published("vLLM PR #24344 Llama-3.1-8B EAGLE log", (0.77, 0.45, 0.24))
_MTP8 = Published("vLLM PR #48892 MTP log (8 modules, GSM8K, concurrency 64)",
                  (0.7568, 0.6011, 0.4976, 0.4113, 0.3538, 0.2980, 0.2608, 0.2229))
PUBLISHED: dict[tuple[str, bool | None], tuple[Published, tuple[Published, ...]]] = {
    ("eagle", True): (_GPT_OSS, (
        _GPT_OSS,
        Published("vLLM PR #42764 gpt-oss EAGLE-3 (post-norm speculator)", (0.610, 0.342, 0.202, 0.120, 0.072)),
        Published("RedHatAI Llama-4-Maverick EAGLE-3 card, summarisation", al=2.37, at=3),
        Published("RedHatAI Llama-4-Maverick EAGLE-3 card, math", al=3.08, at=3),
        Published("RedHatAI Llama-4-Maverick EAGLE-3 card, summarisation", al=2.63, at=7),
        Published("RedHatAI Llama-4-Maverick EAGLE-3 card, math", al=4.02, at=7),
        Published("Cohere 128-expert MoE EAGLE blog", al=2.73, at=3))),
    ("eagle", False): (_LLAMA, (
        _LLAMA,
        Published("vLLM PR #24243 MiniCPM3 EAGLE-3", (0.58, 0.34, 0.22, 0.15, 0.11)),
        Published("vLLM issue #26191 Llama-3.1-8B EAGLE-3", al=3.53, at=7))),
    ("mtp", None): (_MTP8, (
        _MTP8,
        Published("vLLM PR #48892 MTP log (8 modules, GSM8K, maintainer comment)",
                  (0.7617, 0.6158, 0.5125, 0.4243, 0.3640, 0.3094, 0.2722, 0.2365)),
        Published("DeepSeek-V3 technical report, 2nd-token acceptance (low end)", (0.85,)),
        Published("DeepSeek-V3 technical report, 2nd-token acceptance (high end)", (0.90,)),
        Published("vLLM PR #12755 DeepSeek-R1 MTP k = 1 (low end)", (0.81,)),
        Published("vLLM PR #12755 DeepSeek-R1 MTP k = 1 (high end)", (0.82,)),
        Published("nebius DeepSeek-V3-0324 MTP card, 7 steps", al=3.20, at=7))),
}
# Drafter kind -> family. n-gram lookup has none (its acceptance is how often the text repeats itself: stated per
# workload); a separate draft model and a fixed cost ratio borrow the EAGLE family's (no public per-position log of
# draft models is bundled; docs/MODEL.md §4.1).
FAMILY = {"eagle": "eagle", "eagle3": "eagle", "mtp": "mtp", "model": "eagle", "ratio": "eagle", "ngram": None}
NGRAM_REFUSAL = ("the ngram drafter has no default acceptance (an n-gram lookup is accepted as often as the text "
                 "repeats itself, which no public log fixes): state the 'acceptance' (CLI: --acceptance A or "
                 "--accept-length AL@G; study: an acceptance under speculation or the target)")


@dataclass(frozen=True)
class AcceptanceDefault:
    """The default acceptance of one drafter family on one target: the ``central`` log (priced; it carries ``band`` =
    (low, high), so the speedup band prices both ends), and the ``low`` / ``high`` ends of the band the logs used span
    (per position, the smallest and largest u_i over them, each continued by :meth:`Published.rates_to`): the
    target's own public logs of the family (:func:`target_logs`) when there are any, else every entry of
    :data:`PUBLISHED` for the family and the target's kind. ``logs`` names the logs used."""

    central: Acceptance
    low: Acceptance
    high: Acceptance
    source: str
    logs: tuple[str, ...] = ()
    own: bool = False  # the target's own public logs (else the family's default for its kind)
    family: str = ""  # the family default's label (what a target without public logs of its own takes)


# A target's own logs are ranked by their AL at this draft length (each continued by its stated rule) and the median
# one is the central default: the draft length most public logs state (SGLang's cookbook and the corpus's EAGLE-3 / MTP
# runs at 3 steps; vLLM's PR logs and InferenceX's curves include it). A ranking point, nothing is fitted at it.
CENTRAL_AT = 3


@lru_cache(maxsize=1)
def _logs_by_target() -> dict[tuple[str, str], tuple[Published, ...]]:
    out: dict[tuple[str, str], list[Published]] = {}
    for r in read_acceptance_logs():
        if r.target_catalog:
            out.setdefault((r.target_catalog, r.family), []).append(Published(**r.published()))
    return {k: tuple(v) for k, v in out.items()}


def target_logs(target: str, family: str) -> tuple[Published, ...]:
    """The public acceptance logs of catalog target ``target`` for drafter ``family`` (``measured/acceptance/logs.csv``
    rows whose ``target_catalog`` is ``target``), in file order; ``()`` when it has none."""
    return _logs_by_target().get((target, family), ())


def median_log(logs) -> Published:
    """The log whose AL(:data:`CENTRAL_AT`) is the median of ``logs`` (the lower middle one of an even count: the
    conservative side; ties by key), among the logs measured at a draft length of at least :data:`CENTRAL_AT` when
    there are any (a shorter log's AL there is its continuation rule's, not a measurement)."""
    long = [p for p in logs if max(len(p.rates), p.at) >= CENTRAL_AT] or list(logs)
    ranked = sorted(long, key=lambda p: (float(p.acceptance().accept_length(CENTRAL_AT)[0]), p.key))
    return ranked[(len(ranked) - 1) // 2]


def spanned(central: Published, every, label: str) -> tuple[Acceptance, Acceptance, Acceptance]:
    """(central, low, high): ``central`` continued to :data:`MAX_POSITIONS` positions, carrying the band whose ends
    are, per position, the smallest and largest u_i of the logs ``every`` (each continued by its stated rule)."""
    u = np.stack([p.rates_to(MAX_POSITIONS) for p in every])

    def band(rates, end):
        return Acceptance.from_engine_rates(rates, source=f"{label}, {end} of {len(every)} public logs")

    low, high = band(u.min(axis=0), "low end"), band(u.max(axis=0), "high end")
    rates = central.rates or tuple(central.rates_to(MAX_POSITIONS))
    mid = replace(Acceptance.from_engine_rates(rates, extend_to=MAX_POSITIONS, source=label), band=(low, high))
    return mid, low, high


@lru_cache(maxsize=256)
def default_acceptance(drafter_kind: str, target_is_moe: bool = True, target: str = "") -> AcceptanceDefault:
    """The one home of the default acceptance (docs/MODEL.md §4.1): ``target`` (a catalog model name; "" = not
    named) with public logs of the drafter's family takes them (:func:`median_log`, the band they span,
    :func:`spanned`); any other takes the family's default for its kind and says that it has no public log of its
    own. Refuses the ngram drafter."""
    if drafter_kind not in FAMILY:
        raise ParameterError(f"drafter kind {drafter_kind!r} is unknown; use one of {', '.join(FAMILY)}",
                             owner="default_acceptance", param="drafter")
    family = FAMILY[drafter_kind]
    if family is None:
        raise ParameterError(NGRAM_REFUSAL, owner="default_acceptance", param="acceptance")
    borrowed = f", borrowed by {drafter_kind}" if FAMILY[drafter_kind] != drafter_kind != "eagle3" else ""
    key = (family, None) if (family, None) in PUBLISHED else (family, bool(target_is_moe))
    kind = "" if key[1] is None else (" (MoE target)" if key[1] else " (dense target)")
    fam = f"default {family}{kind}{borrowed}: {PUBLISHED[key][0].key}"
    own = target_logs(target, family) if target else ()
    if own:
        central, every = median_log(own), own
        label = (f"default {family} for {target}{borrowed}: {central.key} (median AL({CENTRAL_AT}) of its "
                 f"{len(own)} public log{'s' if len(own) > 1 else ''})")
    else:
        central, every = PUBLISHED[key]
        label = f"no public log for {target}: family {fam}" if target else fam
    return AcceptanceDefault(*spanned(central, every, label), label, tuple(p.key for p in every), bool(own), fam)


def acceptance_for(acceptance, drafter_kind: str, target_is_moe: bool = True, target: str = "") -> Acceptance:
    """``acceptance`` as an :class:`Acceptance` (:func:`as_acceptance`), or, when None, the central default of the
    drafter's family for this target (:func:`default_acceptance`: its own public logs, else its kind's; refused for
    ngram)."""
    if acceptance is None:
        return default_acceptance(drafter_kind, target_is_moe, target).central
    return as_acceptance(acceptance)
