"""What a measured row states of its launch beyond the layout (docs/MODEL.md §7): speculative decoding (set apart),
the engine release its ``backend_version`` runs, and the MoE backend setting its launch chose (column
``moe_backend``; measured/silicon/README.md says how the bundled file's values were read from the launch scripts).
An engine runs the kernel its launch setting picks, so a row is priced with that setting; an empty or absent column
is the release's default. Readers raise :class:`.rows.Refused`."""

from __future__ import annotations

from ..cost.deployment import version_key
from ..specs.catalog import load_engine
from .rows import Refused, int_col

SPECULATIVE_COLUMNS = ("speculative_num_draft_tokens", "decode_speculative_num_draft_tokens")  # optional columns
MOE_BACKEND_COLUMN = "moe_backend"  # optional column


def check_not_speculative(row: dict) -> None:
    """Refuse (status ``speculative``) a row stating draft tokens: its TPOT is of draft-and-verify rounds."""
    for col in SPECULATIVE_COLUMNS:
        if int_col(row, col, 0):
            raise Refused("speculative", f"column {col} is {row[col]}: the row was measured with speculative "
                                         "decoding (its TPOT is of draft-and-verify rounds), and validate tpot "
                                         "prices plain decode steps: set apart")


def launch_settings(row: dict, engine: str) -> tuple[str | None, str | None]:
    """(engine_version, moe_backend) of a row of ``engine``: the release whose execution its ``backend_version``
    runs (None when the text states no version: the newest), and its ``moe_backend`` value, read strictly (a value
    the release's kernels.moe_backend lists, exact spelling; empty or absent: None, the release's default)."""
    stated = (row.get("backend_version") or "").strip()
    version = version_key(engine, stated) if stated else None
    text = (row.get(MOE_BACKEND_COLUMN) or "").strip()
    if not text:
        return version, None
    release = load_engine(engine).release(version)
    if text not in release.kernels.backends:
        ran = f"the release backend_version {stated!r} runs" if version else "the newest"
        raise Refused("refused", f"column {MOE_BACKEND_COLUMN} is {text!r}, not a MoE backend of {release.label} "
                                 f"({ran}): use one of {sorted(release.kernels.backends)} or leave it empty (the "
                                 "release's default)")
    return version, text
