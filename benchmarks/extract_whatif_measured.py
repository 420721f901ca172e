"""Extract the measured rows the GPU-out what-if validation uses into ``measured/<gpu>/`` (docs/MODEL.md §3.8).

Reads aiconfigurator-core's tables through :func:`simulator.calibrate.aic_tables.read_package` (its filters, the
held-out rule included: ``b300_sxm`` and ``gb300`` are refused there) and keeps, per GPU, only the rows the validation
prices: TRT-LLM 1.3.0rc20 ``balanced`` MoE rows, TRT-LLM GEMM rows, TRT-LLM decode-attention rows with
``kv_len >= 256`` (the calibration's row set), the TRT-LLM 1.3.0rc20 CUDA-graph all-reduce and NCCL 2.29.2 half
all-to-all / all-gather rows. Same columns as ``measured/h100-sxm/``.

    pip install ".[calibrate]"; python benchmarks/extract_whatif_measured.py h200-sxm b200 gb200
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

from simulator.calibrate.aic_tables import COLUMNS, read_package
from simulator.calibrate.measured import ATTN_FIT_MIN_KV, FRAMEWORK, NCCL_VERSION, VERSION

ROOT = Path(__file__).resolve().parents[1] / "measured"


def keep(table: str, r: dict) -> bool:
    ref = r.get("framework") == FRAMEWORK and r.get("version") == VERSION
    if table == "moe":
        return ref and r["distribution"] == "balanced"
    if table == "gemm":
        return ref
    if table == "decode_attention":
        return ref and int(r["kv_len"]) >= ATTN_FIT_MIN_KV
    if r["kernel_source"] == "NCCL":
        return r["version"] == NCCL_VERSION and r["dtype"] == "half" and r["op_name"] in ("alltoall", "all_gather")
    return ref and r["op_name"] == "all_reduce" and not r["kernel_source"].endswith("_eager")


def main(gpus: list[str]) -> None:
    for gpu in gpus:
        pt = read_package(gpu, engines=("trtllm",))
        out = ROOT / pt.gpu
        out.mkdir(parents=True, exist_ok=True)
        for table, cols in COLUMNS.items():
            rows = [r for r in pt.tables[table] if keep(table, r)]
            with open(out / f"{table}.csv", "w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
            print(f"{pt.gpu}/{table}.csv: {len(rows)} rows")
        shutil.copy(ROOT / "h100-sxm" / "LICENSE-Apache-2.0.txt", out / "LICENSE-Apache-2.0.txt")
        print(f"{pt.gpu}: {pt.source}, {dict(pt.used)}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["h200-sxm", "b200", "gb200"])
