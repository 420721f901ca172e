"""Reader of the measured per-op tables shipped in NVIDIA's ``aiconfigurator-core`` package (Apache-2.0).

The package keeps ``aiconfigurator_core/systems/data/<gpu>/<op>/<framework>/<version>/*.parquet``. This module turns
one GPU's tables into the rows of the ``measured/<gpu>/`` CSV layout (``moe``, ``gemm``, ``decode_attention``,
``collectives``; latencies in µs), with the same filters as the bundled ``measured/h100-sxm/`` extract (its
README): MoE rows of the extract's five model shapes with ``moe_tp · moe_ep <= 8`` and ``num_tokens <= 512``, GEMM
rows of the extract's nine (n, k) shapes with ``m <= 512``, decode-attention rows of head_dim 128, full attention,
and the extract's ten per-GPU head layouts; every collective row. For the H100 SXM and TRT-LLM 1.3.0rc20 the rows
are exactly the bundled CSVs' (tests/cost/test_calibration_aic.py checks it when the package is installed).

Held out: the ``b300_sxm`` and ``gb300`` tables judge what-if predictions and are never read (:data:`DENIED`, the
one home of that rule). The package's ``silicon_sample.csv`` (end-to-end measurements) is not read here either.

The package and a parquet reader are the optional extra ``pip install ".[calibrate]"``; nothing here imports them
until a table is read. A folder in the same layout holding ``.csv`` files instead of ``.parquet`` (same columns,
latency in ms) is read without the extra (tests use one).
"""

from __future__ import annotations

import csv
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, ParameterError
from ..specs.catalog import ENGINES, list_engines

PACKAGE, DIST = "aiconfigurator_core", "aiconfigurator-core"
EXTRA = 'pip install ".[calibrate]"'
# Package GPU folder -> catalog profile name (the one map between the two spellings).
GPU_NAMES: dict[str, str] = {
    "a100_sxm": "a100-sxm", "a100_pcie": "a100-pcie", "h100_sxm": "h100-sxm", "h100_pcie": "h100-pcie",
    "h200_sxm": "h200-sxm", "b200_sxm": "b200", "gb200": "gb200", "b300_sxm": "b300", "gb300": "gb300",
    "l40s": "l40s", "l4": "l4", "a30": "a30", "b60": "b60", "rtx_pro_6000_server": "rtx-pro-6000",
}
CATALOG_NAMES = {v: k for k, v in GPU_NAMES.items()}
# Held out to judge what-if accuracy: never read, calibrated on, or studied (issue 11).
DENIED = frozenset({"b300_sxm", "gb300"})
# the tables' `framework` column per engine: each engine file's calibration.framework
FRAMEWORK_LABEL = {e.name: e.default.calibration["framework"] for e in list_engines()
                   if e.default.calibration["framework"]}

# The bundled extract's row filters (measured/h100-sxm/README.md), applied to every GPU.
MOE_MODELS = {(4096, 1536, 128, 8): "Qwen3-235B-A22B", (7168, 2048, 256, 8): "DeepSeek-V3",
              (4096, 14336, 8, 2): "Mixtral-8x7B", (2880, 2880, 128, 4): "gpt-oss-120b",
              (2048, 768, 128, 8): "Qwen3-30B-A3B"}  # (hidden, inter, experts, top-k) -> model
MAX_TOKENS = 512
MAX_MOE_GPUS = 8  # moe_tp · moe_ep
GEMM_SHAPES = frozenset({(2048, 7168), (4096, 1024), (4096, 4096), (4096, 8192), (6144, 4096), (7168, 2048),
                         (7168, 16384), (8192, 8192), (16384, 7168)})  # (n, k)
ATTN_HEADS = frozenset({(4, 1), (8, 1), (8, 2), (16, 1), (16, 2), (32, 2), (32, 4), (32, 8), (64, 4), (64, 8)})
ATTN_HEAD_DIM = 128
COLUMNS = {
    "moe": ("gpu", "model", "framework", "version", "kernel_source", "moe_dtype", "num_tokens", "hidden_size",
            "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency_us",
            "src_file"),
    "gemm": ("gpu", "framework", "version", "kernel_source", "gemm_dtype", "m", "n", "k", "latency_us", "src_file"),
    "decode_attention": ("gpu", "framework", "version", "kernel_source", "batch_size", "num_heads",
                         "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype", "kv_len", "window_size",
                         "latency_us", "src_file"),
    "collectives": ("gpu", "framework", "version", "op_name", "kernel_source", "implementation", "backend", "dtype",
                    "num_gpus", "message_bytes", "latency_us", "src_file"),
}
FILES = {"moe": ("moe", "moe_perf"), "gemm": ("gemm", "gemm_perf"),
         "decode_attention": ("attention", "generation_attention_perf")}


def package_gpu(name: str, owner: str = "read_package") -> str:
    """The package's folder name for a GPU given either spelling; refuses the held-out GPUs."""
    gpu = CATALOG_NAMES.get(name, name)
    if gpu in DENIED:
        raise ParameterError(f"the 'hardware' parameter of {owner} names {name!r}, whose measurements are held out "
                             "to judge what-if accuracy and are never read; calibrate another GPU",
                             owner=owner, param="hardware", expected="a GPU that is not held out", value=name)
    if gpu not in GPU_NAMES:
        raise ParameterError(f"the 'hardware' parameter of {owner} must be one of "
                             f"{sorted(set(GPU_NAMES.values()) - {GPU_NAMES[d] for d in DENIED})}. "
                             f"Got {name!r} instead.", owner=owner, param="hardware",
                             expected="a GPU with aiconfigurator-core tables", value=name)
    return gpu


def data_root(root: Path | str | None = None) -> Path:
    """``root``, or the installed package's ``systems/data`` folder (without importing the package)."""
    if root is not None:
        return Path(root)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("", "", f"the {DIST} package is not installed", f"install the optional extra: {EXTRA}")
    return Path(next(iter(spec.submodule_search_locations))) / "systems" / "data"


def package_version(root: Path | str | None = None) -> str:
    """``aiconfigurator-core <version>`` of the installed package, or the folder's name for a given ``root``."""
    if root is not None:
        return f"tables in {Path(root).name}"
    from importlib.metadata import version

    return f"{DIST} {version(DIST)}"


def version_key(v: str) -> tuple:
    """Sort key of a version folder: release numbers, then dev < rc < final < post."""
    m = re.match(r"(\d+(?:\.\d+)*)\.?(.*)$", v)
    if not m:
        return ((), (-2, 0), v)
    rel = tuple(int(x) for x in m[1].split("."))
    tail = m[2]
    n = int((re.findall(r"\d+", tail) or ["0"])[0])
    rank = -1 if tail.startswith("dev") else 0 if tail.startswith("rc") else 2 if tail.startswith("post") else 1
    return (rel, (rank if tail else 1, n), v)


def _tables_in(folder: Path, stem: str) -> Path | None:
    for ext in (".parquet", ".csv"):
        f = folder / f"{stem}{ext}"
        if f.is_file():
            return f
    return None


def versions(gpu: str, op: str, framework: str, root: Path | str | None = None) -> list[str]:
    """Version folders of ``<gpu>/<op>/<framework>/`` that hold a table, oldest first."""
    base = data_root(root) / package_gpu(gpu, "versions") / op / framework
    if not base.is_dir():
        return []
    return sorted((d.name for d in base.iterdir() if d.is_dir() and any(
        f.suffix in (".parquet", ".csv") for f in d.iterdir())), key=version_key)


def engines_with_data(gpu: str, root: Path | str | None = None) -> tuple[str, ...]:
    """Engines that have GEMM tables for ``gpu`` (a GPU/engine without them cannot be calibrated)."""
    return tuple(e for e in ENGINES if versions(gpu, "gemm", e, root))


def read_file(path: Path) -> list[dict]:
    """Rows of one table (parquet through pyarrow, or csv) as dicts."""
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(str(path), "", "needs a parquet reader (pyarrow), which is not installed",
                          f"install the optional extra: {EXTRA}") from None
    return pq.read_table(path).to_pylist()


def _src(root: Path, path: Path) -> str:
    return f"{PACKAGE}/systems/data/{path.relative_to(root).as_posix()}"


def _us(ms) -> str:
    return f"{float(ms) * 1000:.6g}"


def _moe(rows, gpu, src):
    out = []
    for r in rows:
        shape = (int(r["hidden_size"]), int(r["inter_size"]), int(r["num_experts"]), int(r["topk"]))
        if (shape not in MOE_MODELS or int(r["num_tokens"]) > MAX_TOKENS
                or int(r["moe_tp_size"]) * int(r["moe_ep_size"]) > MAX_MOE_GPUS):
            continue
        out.append({**{c: str(r[c]) for c in COLUMNS["moe"] if c in r}, "gpu": gpu, "model": MOE_MODELS[shape],
                    "latency_us": _us(r["latency"]), "src_file": src})
    return out


def _gemm(rows, gpu, src):
    return [{**{c: str(r[c]) for c in COLUMNS["gemm"] if c in r}, "gpu": gpu, "latency_us": _us(r["latency"]),
             "src_file": src}
            for r in rows if (int(r["n"]), int(r["k"])) in GEMM_SHAPES and int(r["m"]) <= MAX_TOKENS]


def _attention(rows, gpu, src):
    out = []
    for r in rows:
        if (int(r["head_dim"]) != ATTN_HEAD_DIM or int(r.get("window_size") or 0) != 0
                or (int(r["num_heads"]), int(r["num_key_value_heads"])) not in ATTN_HEADS):
            continue
        out.append({**{c: str(r[c]) for c in COLUMNS["decode_attention"] if c in r}, "gpu": gpu,
                    "window_size": "0", "kv_len": str(int(r["isl"]) + int(r["step"])), "latency_us": _us(r["latency"]),
                    "src_file": src})
    return out


ELEMENT_BYTES = {"bfloat16": 2, "half": 2, "float16": 2, "int8": 1, "fp8": 1, "float": 4, "float32": 4}


def _collectives(rows, gpu, src):
    """Collective rows; the tables' ``message_size`` counts elements, ``message_bytes`` is it times the element
    size of the row's dtype."""
    out = []
    for r in rows:
        dtype = str(r.get("allreduce_dtype") or r.get("nccl_dtype") or "")
        if dtype not in ELEMENT_BYTES:
            raise ConfigError(src, "dtype", f"{dtype!r} has no known element size",
                              f"add it to ELEMENT_BYTES ({', '.join(ELEMENT_BYTES)})")
        out.append({"gpu": gpu, "framework": str(r.get("framework") or ""), "version": str(r.get("version") or ""),
                    "op_name": str(r["op_name"]), "kernel_source": str(r["kernel_source"]),
                    "implementation": str(r.get("implementation") or ""), "backend": str(r.get("backend") or ""),
                    "dtype": dtype, "num_gpus": str(r["num_gpus"]),
                    "message_bytes": str(int(r["message_size"]) * ELEMENT_BYTES[dtype]),
                    "latency_us": _us(r["latency"]), "src_file": src})
    return out


@dataclass(frozen=True)
class PackageTables:
    """One GPU's measured tables in the ``measured/<gpu>/`` layout, for the engine versions in ``versions``."""

    gpu: str  # catalog profile name
    source: str  # e.g. "aiconfigurator-core 0.12.0"
    versions: Mapping[str, str]  # engine -> version read (its GEMM table's version)
    used: Mapping[str, str]  # "<table>/<engine>" -> version folder read for that table
    tables: Mapping[str, list[dict]]


def read_package(gpu: str, chosen: Mapping[str, str] | None = None, root: Path | str | None = None,
                 engines: tuple[str, ...] = ENGINES) -> PackageTables:
    """``gpu``'s tables (catalog or package name) for each of ``engines`` that has data: per engine the newest
    version of its GEMM table unless ``chosen`` names one; each other op table at that version when present, else
    its newest; every collective table (custom all-reduce of every engine and version, every NCCL version)."""
    pg = package_gpu(gpu)
    base = data_root(root)
    if not (base / pg).is_dir():
        raise ConfigError(str(base), pg, f"has no tables for {GPU_NAMES[pg]}",
                          f"aiconfigurator-core ships tables for: {', '.join(sorted(available_gpus(root)))}")
    chosen = dict(chosen or {})
    picked, used = {}, {}
    tables: dict[str, list[dict]] = {t: [] for t in COLUMNS}
    for e in engines:
        vs = versions(pg, "gemm", e, root)
        if not vs:
            continue
        v = chosen.get(e, vs[-1])
        if v not in vs:
            raise ConfigError(str(base / pg / "gemm" / e), "version", f"{v!r} is not there (found {', '.join(vs)})",
                              "pick one of those versions")
        picked[e] = v
        for table, (op, stem) in FILES.items():
            ovs = versions(pg, op, e, root)
            if not ovs:
                continue
            ov = v if v in ovs else ovs[-1]
            f = _tables_in(base / pg / op / e / ov, stem)
            if f is None:
                continue
            used[f"{table}/{e}"] = ov
            reader = {"moe": _moe, "gemm": _gemm, "decode_attention": _attention}[table]
            tables[table] += reader(read_file(f), pg, _src(base, f))
    comm = base / pg / "comm"
    if comm.is_dir():
        for fw in sorted(d.name for d in comm.iterdir() if d.is_dir()):
            for v in versions(pg, "comm", fw, root):
                for stem in ("custom_allreduce_perf", "nccl_perf"):
                    f = _tables_in(comm / fw / v, stem)
                    if f is not None:
                        tables["collectives"] += _collectives(read_file(f), pg, _src(base, f))
    return PackageTables(GPU_NAMES[pg], package_version(root), picked, used, tables)


def available_gpus(root: Path | str | None = None) -> list[str]:
    """Catalog names of the GPUs with at least one table (held-out GPUs excluded, their folders not opened)."""
    base = data_root(root)
    out = []
    for d in sorted(base.iterdir()):
        if d.name in DENIED or d.name not in GPU_NAMES or not d.is_dir():
            continue
        if any(d.rglob("*.parquet")) or any(d.rglob("*.csv")):
            out.append(GPU_NAMES[d.name])
    return out
