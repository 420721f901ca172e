"""Hardware profiles and model specs: strict YAML in, frozen dataclasses out, derived quantities by code."""

from .catalog import list_hardware, list_models, load_hardware, load_model
from .derived import (
    ParamCounts,
    expert_bytes,
    kv_bytes_per_token,
    linear_state_bytes,
    param_counts,
    weight_bytes,
)
from .dtypes import FORMATS, KV_DTYPES, WEIGHT_DTYPES, WeightFormat
from .hardware import HardwareProfile
from .model import ModelSpec

__all__ = [
    "FORMATS", "KV_DTYPES", "WEIGHT_DTYPES", "HardwareProfile", "ModelSpec", "ParamCounts", "WeightFormat",
    "expert_bytes", "kv_bytes_per_token", "linear_state_bytes", "list_hardware", "list_models", "load_hardware",
    "load_model", "param_counts", "weight_bytes",
]
