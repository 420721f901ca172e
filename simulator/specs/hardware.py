"""Hardware profiles: the frozen in-memory form and its strict reader.

All numbers are SI (bytes, B/s, FLOP/s, s, Hz). ``provenance`` maps each dotted field path to where its number
came from; the rest of the code reads the attributes only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .bundled import engine_names
from .kernels import ARCHITECTURES, DEFAULT_ENGINE, Kernels, read_engine_kernels, read_kernels
from .schema import Provenance, Reader

if TYPE_CHECKING:
    from .engine import EngineRelease

VENDORS = ("nvidia", "amd")
# Architectures that share kernels (same SM generation and tensor-core instructions): a what-if profile whose base is
# of the same family is derived:<base>; otherwise its kernels only borrow another generation's shapes (spec-only).
ARCH_FAMILY = {"blackwell-ultra": "blackwell"}
# Scale-up fabrics a profile may name (interconnect.fabric): collectives keep their base's latencies on the same
# fabric (docs/MODEL.md §3.8).
FABRICS = ("nvlink3", "nvlink4", "nvlink5", "nvlink6", "pcie4", "pcie5", "xgmi3", "xgmi4")
GROUNDINGS = ("calibrated", "derived", "spec-only")  # HardwareProfile.grounding: the first word
PEAK_DTYPES = ("bf16", "fp8", "fp4", "int8")
TOP_KEYS = ("schema", "name", "display_name", "aliases", "vendor", "architecture", "what_if", "description",
            "sources", "memory", "cache", "compute", "interconnect", "power", "kernels", "engines")
SCHEMA = "hardware/v1"
# Sanity bounds on counts (whole numbers): the largest GPU has 304 compute units (MI300X/MI355X), so 1024 catches
# unit slips (1e30) with room for future parts; a scale-up domain spans at most the 1024 GPUs a deployment may use
# (cost.deployment.WAYS).
MAX_SM_COUNT = 1024
MAX_DOMAIN = 1024


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    display_name: str
    vendor: str
    architecture: str
    what_if: bool
    description: str
    hbm_capacity: float  # bytes
    hbm_bandwidth: float  # B/s, peak
    l2_size: float  # bytes (0 allowed: the "no L2" limit)
    l2_bandwidth: float  # B/s
    l2_partitions: int  # Hopper: 2 (shared data is duplicated, so effective capacity for it halves)
    llc_size: float  # bytes, last-level cache beyond L2 (AMD Infinity Cache); 0 if none
    llc_bandwidth: float  # B/s
    sm_count: int
    clock: float  # Hz
    peak_flops: Mapping[str, float]  # dtype -> dense FLOP/s
    link_bandwidth: float  # B/s per direction, scale-up (NVLink / xGMI / PCIe)
    link_latency: float  # s
    domain_size: int  # GPUs per scale-up domain (HGX: 8; NVL72 rack: 72)
    tdp: float  # W (0 when unknown)
    kernels: Kernels  # the kernel parameters of `engine` (as read: the default engine's, DEFAULT_ENGINE)
    # other engines' kernels, each the default block with the engine's measured entries in place (docs/MODEL.md §3.7)
    engine_kernels: Mapping[str, Kernels] = field(default_factory=lambda: MappingProxyType({}))
    engine: str = DEFAULT_ENGINE  # whose kernel block `kernels` holds (HardwareProfile.kernel_block)
    # the engine release the profile is bound to (HardwareProfile.bind; the catalog binds the default engine's newest
    # release): what the engine executes, read by everything below pricing (docs/MODEL.md §3.10)
    engine_spec: EngineRelease | None = field(default=None, compare=False, repr=False)
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    provenance: Mapping[str, Provenance] = field(default_factory=lambda: MappingProxyType({}), repr=False,
                                                 compare=False)
    origin: str = field(default="", compare=False)
    # scale-out fabric between scale-up domains (InfiniBand / RoCE; docs/MODEL.md §3.9): B/s per GPU per direction
    # and s per crossing; 0 = none stated (a deployment beyond one domain is then refused)
    scale_out_bandwidth: float = 0.0
    scale_out_latency: float = 0.0
    fabric: str = ""  # scale-up fabric (FABRICS); "" = not stated
    # where the kernel parameters come from (docs/MODEL.md §3.8): "calibrated" (fitted to this GPU's measurements),
    # "derived:<sibling>" (what-if rule from a calibrated profile of the same architecture family) or
    # "spec-only:<base>" (no calibrated sibling: only the spec sheet is this GPU's own, the kernel shapes are <base>'s)
    grounding: str = "calibrated"
    basis: str = ""  # a what-if profile's statement of what its kernels rest on (its kernels.note)
    aliases: tuple[str, ...] = field(default=(), compare=False)  # other names (e.g. aiconfigurator's system names)

    @property
    def label(self) -> str:
        """The name as tables and figures show it: with its grounding unless calibrated (``b300 (derived:b200)``)."""
        return self.name if self.grounding == "calibrated" else f"{self.name} ({self.grounding})"

    def peak(self, compute_dtype: str) -> float | None:
        """Dense peak FLOP/s for a compute dtype, or None when the GPU has no such tensor-core path."""
        return self.peak_flops.get(compute_dtype)

    @property
    def engines(self) -> tuple[str, ...]:
        """Engines this profile has kernel parameters for (``kernels`` holds ``engine``'s, ``engine_kernels`` the
        others'), in the catalog's order."""
        return tuple(e for e in engine_names() if e == self.engine or e in self.engine_kernels)

    def bind(self, release: EngineRelease) -> HardwareProfile:
        """This profile priced for the engine ``release``: the kernel parameters of its kernel block as
        ``kernels`` and the release as ``engine_spec``. Pricing binds once, in :attr:`simulator.pricing.Scenario.hw`
        (an architecture test keeps it the only caller); everything below reads the bound profile."""
        hw = self.kernel_block(release.kernel_block)
        return hw if hw.engine_spec is release else replace(hw, engine_spec=release)

    def kernel_block(self, engine: str) -> HardwareProfile:
        """This profile with ``engine``'s kernel parameters as its ``kernels``; the other engines' blocks stay in
        ``engine_kernels``, so an edit made after selecting a block (a what-if variant) is kept when the same block
        is selected again. A profile without that engine's parameters is refused with a one-line fix."""
        if engine == self.engine:
            return self
        if engine not in self.engine_kernels:
            raise ConfigError(self.origin or self.name, f"engines.{engine}",
                              f"is missing: {self.name} has no kernel parameters for engine {engine!r} (it has "
                              f"{', '.join(self.engines)})",
                              f"use engine {' or '.join(repr(e) for e in self.engines)}, or calibrate it: python -m "
                              f"simulator calibrate --hardware {self.name} --engine {engine} --write <profile>")
        others = {e: k for e, k in self.engine_kernels.items() if e != engine}
        others[self.engine] = self.kernels
        return replace(self, kernels=self.engine_kernels[engine], engine=engine,
                       engine_kernels=MappingProxyType(others))

    def with_changes(self, **changes) -> HardwareProfile:
        """A modified copy (what-if studies, tests): e.g. ``hw.with_changes(l2_size=0.0)``."""
        return replace(self, **changes)


def read_hardware(obj: object, where: str) -> HardwareProfile:
    r = Reader(where)
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "vendor", "architecture", "sources", "memory", "cache",
                                        "compute", "interconnect", "kernels"))
    schema = r.string(top, "schema", "", options=(SCHEMA,))
    del schema
    r.read_sources(top)
    name = r.string(top, "name", "")
    mem = r.mapping(top["memory"], "memory", ("hbm_capacity", "hbm_bandwidth"), ("hbm_capacity", "hbm_bandwidth"))
    cache = r.mapping(top["cache"], "cache", ("l2_size", "l2_bandwidth", "l2_partitions", "llc_size",
                                              "llc_bandwidth"), ("l2_size", "l2_bandwidth", "l2_partitions"))
    comp = r.mapping(top["compute"], "compute", ("sm_count", "clock", "peak_flops"),
                     ("sm_count", "clock", "peak_flops"))
    peaks_obj = r.mapping(comp["peak_flops"], "compute.peak_flops", PEAK_DTYPES, ("bf16",))
    peaks = {d: r.quantity(peaks_obj, d, "compute.peak_flops", "flops", open_low=True)
             for d in PEAK_DTYPES if d in peaks_obj}
    net = r.mapping(top["interconnect"], "interconnect", ("link_bandwidth", "link_latency", "domain_size",
                                                          "scale_out_bandwidth", "scale_out_latency", "fabric"),
                    ("link_bandwidth", "link_latency", "domain_size"))
    power = r.mapping(top.get("power", {}), "power", ("tdp",))
    llc_size = r.quantity(cache, "llc_size", "cache", "bytes", default=0.0)
    llc_bw = r.quantity(cache, "llc_bandwidth", "cache", "bandwidth", default=0.0)
    if llc_size > 0 and llc_bw <= 0:
        raise r.fail("cache.llc_bandwidth", "is missing or zero while cache.llc_size is set",
                     "give the last-level cache bandwidth with its source")
    profile = HardwareProfile(
        name=name,
        display_name=r.string(top, "display_name", "", default=name),
        vendor=r.string(top, "vendor", "", options=VENDORS),
        architecture=r.string(top, "architecture", "", options=ARCHITECTURES),
        what_if=r.boolean(top, "what_if", "", default=False),
        description=r.string(top, "description", "", default=""),
        hbm_capacity=r.quantity(mem, "hbm_capacity", "memory", "bytes", open_low=True),
        hbm_bandwidth=r.quantity(mem, "hbm_bandwidth", "memory", "bandwidth", open_low=True),
        l2_size=r.quantity(cache, "l2_size", "cache", "bytes"),
        l2_bandwidth=r.quantity(cache, "l2_bandwidth", "cache", "bandwidth", open_low=True),
        l2_partitions=int(r.quantity(cache, "l2_partitions", "cache", "count", low=1, high=16, integer=True)),
        llc_size=llc_size,
        llc_bandwidth=llc_bw,
        sm_count=int(r.quantity(comp, "sm_count", "compute", "count", low=1, high=MAX_SM_COUNT, integer=True)),
        clock=r.quantity(comp, "clock", "compute", "frequency", open_low=True),
        peak_flops=MappingProxyType(peaks),
        link_bandwidth=r.quantity(net, "link_bandwidth", "interconnect", "bandwidth", open_low=True),
        link_latency=r.quantity(net, "link_latency", "interconnect", "time"),
        domain_size=int(r.quantity(net, "domain_size", "interconnect", "count", low=1, high=MAX_DOMAIN,
                                       integer=True)),
        tdp=r.quantity(power, "tdp", "power", "power", default=0.0),
        scale_out_bandwidth=r.quantity(net, "scale_out_bandwidth", "interconnect", "bandwidth", default=0.0),
        scale_out_latency=r.quantity(net, "scale_out_latency", "interconnect", "time", default=0.0),
        fabric=r.string(net, "fabric", "interconnect", default="", options=FABRICS),
        kernels=read_kernels(r, top["kernels"]),
        sources=MappingProxyType(dict(r.sources)),
        provenance=MappingProxyType(dict(r.provenance)),
        origin=where,
        aliases=r.names(top, "aliases"),
    )
    if not profile.kernels.resolved:
        note = top["kernels"].get("note", "") if isinstance(top["kernels"], Mapping) else ""
        profile = replace(profile, grounding=f"derived:{profile.kernels.derive_from}",  # the catalog refines it
                          basis=str(note))
    if "engines" in top:
        if not profile.kernels.resolved:
            raise r.fail("engines", "is set together with kernels.derive_from",
                         "a what-if profile derives every engine from its base profile; remove 'engines'")
        eobj = r.mapping(top["engines"], "engines", [e for e in engine_names() if e != DEFAULT_ENGINE])
        blocks = {}
        for e, body in eobj.items():
            ep = r.join("engines", e)
            b = r.mapping(body, ep, ("kernels", "note"), ("kernels",))
            blocks[e] = read_engine_kernels(r, b["kernels"], profile.kernels, r.join(ep, "kernels"))
        profile = replace(profile, engine_kernels=MappingProxyType(blocks),
                          provenance=MappingProxyType(dict(r.provenance)))
    if profile.l2_bandwidth < profile.hbm_bandwidth:
        raise r.fail("cache.l2_bandwidth", f"is {profile.l2_bandwidth / 1e12:.3g} TB/s, below the HBM bandwidth "
                     f"{profile.hbm_bandwidth / 1e12:.3g} TB/s", "check the unit (TB/s vs GB/s)")
    return profile
