"""Validation against users' own measurements (``python -m simulator validate``): end-to-end TPOT rows in
aiconfigurator's ``silicon_sample.csv`` layout (:mod:`.tpot`) and per-op tables (:mod:`.ops`). The mapping from
Hugging Face ids, system names and quantisation modes to the catalog lives in :mod:`.mapping` (one table)."""

from .mapping import HELD_OUT_SYSTEMS, MODELS, SYSTEMS
from .tpot import REQUIRED_COLUMNS, RowResult, TpotValidation, read_rows, validate_tpot

__all__ = ["HELD_OUT_SYSTEMS", "MODELS", "REQUIRED_COLUMNS", "RowResult", "SYSTEMS", "TpotValidation", "read_rows",
           "validate_tpot"]
