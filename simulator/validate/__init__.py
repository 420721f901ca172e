"""Validation against users' own measurements (``python -m simulator validate``): end-to-end TPOT rows in
aiconfigurator's ``silicon_sample.csv`` layout (:mod:`.tpot`) and per-op tables (:mod:`.ops`). Names in the rows
are resolved through the catalog (:mod:`.mapping`); file-level reading and checks live in :mod:`.rows`."""

from .mapping import HELD_OUT_GPUS, NameMap, read_mapping
from .tpot import REQUIRED_COLUMNS, RowResult, TpotValidation, read_rows, validate_tpot

__all__ = ["HELD_OUT_GPUS", "NameMap", "REQUIRED_COLUMNS", "RowResult", "TpotValidation", "read_mapping",
           "read_rows", "validate_tpot"]
