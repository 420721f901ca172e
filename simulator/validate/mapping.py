"""From the names in public deployment measurements to the catalog (docs/MODEL.md §7).

Models and GPUs are found through the catalog (:func:`simulator.specs.catalog.find_in_catalog`): a bundled name,
a display name, an ``aliases`` entry of a model or hardware YAML, a model hub id listed in a model's ``hf_id``
(case-insensitive; quantised checkpoints of one architecture, ``nvidia/...-NVFP4`` or ``...-FP8``, map to the
architecture's spec), or the path of a YAML file. Names the catalog does not know are looked up in a user mapping
file (``--mapping FILE``: ``models: {name: catalog model}``, ``systems: {name: catalog GPU}``). Quantisation
labels map to deployment dtypes; the KV-cache dtype is implied by the row's precision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ..specs.catalog import find_in_catalog
from ..specs.dtypes import FORMATS
from ..specs.schema import Reader

# Systems whose measurements judge the what-if rules (issue 11): never priced while developing; `validate
# --include-held-out` prices them when the what-if accuracy is reported. Catalog names of the GPUs.
HELD_OUT_GPUS = ("b300", "gb300")

# quantisation mode (moe_quant_mode, else gemm_quant_mode) -> Deployment.dtype; '' (no quantisation) -> bf16.
# The deployment has one weight format: a row with fp8 GEMMs and fp8_block MoE is priced as fp8_block (the MoE
# weights dominate decode traffic).
DTYPES: dict[str, str] = {"": "bf16", "bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block",
                          "nvfp4": "nvfp4", "mxfp4": "mxfp4", "w4a16_mxfp4": "mxfp4", "int4_wo": "int4_wo"}

# Checkpoint formats that a label of the same width cannot change (the checkpoint's format comes from the model
# spec's hf_id): block-scaled FP8 weights (DeepSeek-V3/R1, MiniMax-M2.x, Qwen3-*-FP8: weight_block_size [128, 128])
# run the engines' block-scaled kernels, so an 'fp8' label on them is fp8_block; openai/gpt-oss-* publish their MoE
# weights only as MXFP4 (gpt-oss model card [B16]), so a 4-bit label on them is mxfp4. Other labels (bf16 on an
# FP8 checkpoint, nvfp4 on an int4 one: a different published checkpoint) are the row's own format.
BINDING_CHECKPOINTS = ("fp8_block", "mxfp4")


def row_dtype(checkpoint: str, quant: str) -> str | None:
    """The Deployment dtype of a row: its quantisation label ``quant``, read as the checkpoint's own format
    ``checkpoint`` (from the model spec's hf_id; '' when unknown) when both have the same width and the
    checkpoint's format binds (BINDING_CHECKPOINTS). None: the label has no catalog format."""
    label = DTYPES.get(quant)
    if label is None:
        return None
    if checkpoint in BINDING_CHECKPOINTS and int(FORMATS[checkpoint].bits) == int(FORMATS[label].bits):
        return checkpoint
    return label


# KV-cache dtype a row implies: the rows do not state it. Quantised runs use an fp8 KV cache (NVIDIA's FP8/NVFP4
# checkpoints declare kv_cache_quant_algo FP8, models.md [B25]); unquantised runs keep bf16.
KV_FP8_PRECISIONS = ("fp8", "fp4", "int4")


def kv_dtype(precision: str) -> str:
    return "fp8" if precision.strip().lower() in KV_FP8_PRECISIONS else "bf16"


@dataclass(frozen=True)
class NameMap:
    """A user's extra names (``--mapping FILE``), lower-case name -> catalog name or YAML path."""

    models: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    systems: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    where: str = ""


def read_mapping(path: str | Path) -> NameMap:
    """A mapping file: YAML ``models: {their name: catalog model}`` and/or ``systems: {their name: catalog GPU}``.
    Every target must be in the catalog (one ConfigError line naming the entry otherwise)."""
    from ..specs.yamlio import load_yaml_file

    where = str(path)
    obj = load_yaml_file(path)
    r = Reader(where)
    top = r.mapping(obj, "", ("models", "systems"))
    out = {}
    for key, kind in (("models", "models"), ("systems", "hardware")):
        table = top.get(key, {})
        table = r.mapping(table, key, list(table) if isinstance(table, Mapping) else ())  # any names, as a mapping
        got = {}
        for name, target in table.items():
            if not isinstance(target, str) or find_in_catalog(kind, target) is None:
                raise r.fail(f"{key}.{name}", f"maps to {target!r}, which is not in the catalog",
                             f"use a name from `python -m simulator list {kind}` or a YAML path")
            got[str(name).strip().lower()] = target
        out[key] = MappingProxyType(got)
    return NameMap(out["models"], out["systems"], where)


def find_model(name: str, extra: NameMap | None = None) -> tuple[str, str] | None:
    """(catalog model, the named checkpoint's format or '') of a row's model name; None when unknown."""
    hit = find_in_catalog("models", name)
    if hit is None and extra is not None and name.strip().lower() in extra.models:
        hit = find_in_catalog("models", extra.models[name.strip().lower()])
    return hit


def find_gpu(name: str, extra: NameMap | None = None) -> str | None:
    """The catalog GPU of a row's system name; None when unknown."""
    hit = find_in_catalog("hardware", name)
    if hit is None and extra is not None and name.strip().lower() in extra.systems:
        hit = find_in_catalog("hardware", extra.systems[name.strip().lower()])
    return None if hit is None else hit[0]
