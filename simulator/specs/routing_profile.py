"""Named routing profiles: routing-overlap statistics measured on one model, shipped once (``routing/*.yaml``) and
referenced by name from the model specs they stand in for (``routing_overlap: {profile: cohere-128x8}``).

A profile states the expert count and top-k it was measured at; a model may only reference a profile of its own E
and k (the statistics depend on both). A model YAML may instead give its own statistics inline
(``routing_overlap: {source: KEY, lags: [...], popularity: ...}``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..validation import Interval, Param
from .schema import Reader

SCHEMA = "routing/v1"
TOP_KEYS = ("schema", "name", "display_name", "description", "sources", "experts", "top_k", "source", "lags",
            "popularity", "note")
# Lag overlaps o(1..D): the one declaration, used by the readers here and in model.py, by the cost engine's
# OverlapInput and (through it) by --overlap.
LAGS = Param(Interval(float, 0.0, 1.0), unit="fractions, e.g. 0.381 not 38.1", many=True)
POPULARITY_FORMS = "uniform, zipf:S or skew:X"


@dataclass(frozen=True)
class RoutingProfile:
    """Lag overlaps and popularity measured on one model (``experts`` routed experts, ``top_k`` per token)."""

    name: str
    display_name: str
    description: str
    experts: int
    top_k: int
    lags: tuple[float, ...]
    popularity: str
    source: str  # key of the profile's sources table
    citation: str  # the text of that source
    note: str = ""
    origin: str = ""


def read_popularity(r: Reader, obj, path: str) -> str:
    pop = r.string(obj, "popularity", path, default="uniform")
    if not (pop == "uniform" or pop.startswith(("zipf:", "skew:"))):
        raise r.fail(r.join(path, "popularity"), f"is {pop!r}", f"use {POPULARITY_FORMS}")
    return pop


def read_lags(r: Reader, obj, path: str) -> tuple[float, ...]:
    return tuple(r.param(obj, "lags", path, LAGS, fix="write fractions (0.381), not percentages (38.1)"))


def read_routing_profile(obj: object, where: str) -> RoutingProfile:
    r = Reader(where)
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "sources", "experts", "top_k", "source", "lags"))
    r.string(top, "schema", "", options=(SCHEMA,))
    r.read_sources(top)
    name = r.string(top, "name", "")
    experts = r.integer(top, "experts", "", low=1)
    top_k = r.integer(top, "top_k", "", low=1, high=experts)
    source = r.source(top, "")
    return RoutingProfile(name=name, display_name=r.string(top, "display_name", "", default=name),
                          description=r.string(top, "description", "", default=""), experts=experts, top_k=top_k,
                          lags=read_lags(r, top, ""), popularity=read_popularity(r, top, ""), source=source,
                          citation=r.sources[source], note=r.string(top, "note", "", default=""), origin=where)
