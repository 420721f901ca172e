"""The aiconfigurator-core table reader: held-out GPUs, the GPU-name map, and a calibration from a tiny fixture in
the package's layout (CSV files: no parquet reader or package needed)."""

import csv
import importlib.util

import numpy as np
import pytest

from simulator.calibrate import aic_tables as aic_tables
from simulator.calibrate.aic_tables import DENIED, GPU_NAMES, package_gpu, read_package, version_key
from simulator.calibrate.fit import calibrate_engine
from simulator.errors import ConfigError, ParameterError
from simulator.specs.catalog import bundled_files

pytestmark = pytest.mark.xdist_group("h100_calibration")  # the readers of the session's H100 calibration (conftest.py)


@pytest.mark.parametrize("name", ["b300_sxm", "gb300", "b300", "GB300".lower()])
def test_held_out_gpus_are_refused(name, tmp_path):
    assert {"b300_sxm", "gb300"} <= DENIED
    with pytest.raises(ParameterError, match="held out"):
        package_gpu(name)
    (tmp_path / "b300_sxm" / "gemm" / "trtllm" / "1").mkdir(parents=True)
    with pytest.raises(ParameterError, match="held out"):
        read_package(name, root=tmp_path)
    assert "b300" not in aic_tables.available_gpus(tmp_path)


def test_gpu_name_map():
    assert GPU_NAMES["h100_sxm"] == "h100-sxm" and GPU_NAMES["b200_sxm"] == "b200" and GPU_NAMES["gb200"] == "gb200"
    assert len(set(GPU_NAMES.values())) == len(GPU_NAMES)  # one-to-one
    catalog = set(bundled_files("hardware"))
    for pkg, cat in GPU_NAMES.items():
        if pkg not in DENIED:
            assert package_gpu(cat) == package_gpu(pkg) == pkg
    assert {"a100-sxm", "h100-sxm", "h200-sxm", "b200", "gb200"} <= catalog & set(GPU_NAMES.values())


def test_version_order():
    vs = ["1.3.0rc10", "1.3.0rc20", "1.2.0rc5", "1.3.0", "0.5.6.post2", "0.5.14", "0.5.9"]
    assert sorted(vs, key=version_key) == ["0.5.6.post2", "0.5.9", "0.5.14", "1.2.0rc5", "1.3.0rc10", "1.3.0rc20",
                                           "1.3.0"]


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _fixture(root, engine="sglang", fw="SGLang", version="0.5.14", scale=1.0):
    """A tiny h100_sxm tree: bf16 GEMM rows from a known roofline-plus-floor law, attention rows, an all-reduce."""
    base = root / "h100_sxm"
    rng = np.random.default_rng(0)
    g = []
    for n, k in ((4096, 4096), (7168, 2048), (2048, 7168), (16384, 7168)):
        for m in (1, 8, 32, 128, 512):
            t_us = scale * (5.0 + (2 * n * k) / 3.35e12 * 1e6 / 0.8 + 2 * m * n * k / 989e12 * 1e6)
            g.append({"framework": fw, "version": version, "op_name": "gemm", "kernel_source": "x",
                      "gemm_dtype": "bfloat16", "m": m, "n": n, "k": k,
                      "latency": t_us * 1e-3 * rng.uniform(.99, 1.01)})
    _write(base / "gemm" / engine / version / "gemm_perf.csv", g)
    a = []
    for h, kv in ((32, 4), (64, 8), (8, 1)):
        for b in (1, 8, 64):
            for step in (255, 1023, 4095):
                t_us = 8.0 + b * kv * (step + 1) * 128 * 2 * 2 / 3.35e12 * 1e6 / 0.8
                a.append({"framework": fw, "version": version, "op_name": "generation_attention",
                          "kernel_source": "x", "batch_size": b, "isl": 1, "num_heads": h, "num_key_value_heads": kv,
                          "head_dim": 128, "window_size": 0, "beam_width": 1, "attn_dtype": "bfloat16",
                          "kv_cache_dtype": "bfloat16", "step": step, "latency": t_us * 1e-3})
    _write(base / "attention" / engine / version / "generation_attention_perf.csv", a)
    c = [{"framework": fw, "version": version, "op_name": "all_reduce", "kernel_source": f"{fw}_custom_{mode}",
          "allreduce_dtype": "bfloat16", "num_gpus": n, "message_size": s,
          "latency": (4.0 + s * 2 * (n - 1) / 450e9 * 1e6 + (20.0 if mode == "eager" else 0.0)) * 1e-3,
          "backend": f"{engine}_{mode}"}
         for n in (2, 4, 8) for s in (128, 4096, 65536, 1 << 20) for mode in ("graph", "eager")]
    _write(base / "comm" / engine / version / "custom_allreduce_perf.csv", c)
    _write(base / "gemm" / engine / "0.5.9" / "gemm_perf.csv", g[:1])  # an older version: not chosen


def test_calibration_from_a_fixture_in_the_package_layout(tmp_path):
    _fixture(tmp_path)
    pkg = read_package("h100-sxm", root=tmp_path)
    assert pkg.versions == {"sglang": "0.5.14"} and len(pkg.tables["gemm"]) == 20
    assert {r["kv_len"] for r in pkg.tables["decode_attention"]} == {"256", "1024", "4096"}
    assert {r["message_bytes"] for r in pkg.tables["collectives"]} >= {"256", "2097152"}  # elements x 2 bytes
    cal = calibrate_engine("h100-sxm", "sglang", root=tmp_path)
    by = {(f.cls, f.variant): f for f in cal.fits}
    assert set(by) == {("gemm", "bf16"), ("attention", "bf16"), ("collective", "all_reduce")}
    assert by["gemm", "bf16"].mape_fit < 0.05 and by["attention", "bf16"].mape_fit < 0.1
    assert "moe bf16" in cal.missing and "gemm fp8" in cal.missing
    assert cal.eager_extra * 1e6 == pytest.approx(20.0, rel=0.01)  # the fixture's eager - graph gap
    # a slower engine's tables give a higher fitted floor: the fit reads the rows it is given
    _fixture(tmp_path / "slow", scale=2.0)
    slow = {(f.cls, f.variant): f for f in calibrate_engine("h100-sxm", "sglang", root=tmp_path / "slow").fits}
    assert slow["gemm", "bf16"].kernel.fixed > by["gemm", "bf16"].kernel.fixed


def test_engine_or_version_without_tables_is_one_line(tmp_path):
    _fixture(tmp_path)
    with pytest.raises(ConfigError, match="no tables of engine 'vllm'"):
        calibrate_engine("h100-sxm", "vllm", root=tmp_path)
    with pytest.raises(ConfigError, match="'9.9' is not there"):
        calibrate_engine("h100-sxm", "sglang", version="9.9", root=tmp_path)
    with pytest.raises(ParameterError, match="'engine'"):
        calibrate_engine("h100-sxm", "tensorrt", root=tmp_path)


def test_missing_package_is_one_line(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r'pip install "\.\[calibrate\]"'):
        aic_tables.data_root()


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None or
                    importlib.util.find_spec("pyarrow") is None,
                    reason="needs the optional extra .[calibrate] (aiconfigurator-core and pyarrow)")
def test_package_reader_gives_the_bundled_h100_rows():
    """The reader's H100 rows are the bundled measured/h100-sxm CSVs, row for row (so the H100 fit is unchanged)."""
    from collections import Counter

    from simulator.calibrate.measured import read_tables

    pkg, csvs = read_package("h100-sxm").tables, read_tables()

    def key(r):
        return tuple((k, float(v) if k == "latency_us" else v) for k, v in sorted(r.items()))
    for t, rows in csvs.items():
        assert Counter(map(key, pkg[t])) == Counter(map(key, rows)), t


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None or
                    importlib.util.find_spec("pyarrow") is None,
                    reason="needs the optional extra .[calibrate] (aiconfigurator-core and pyarrow)")
def test_package_calibration_of_h100_trtllm_is_the_csv_calibration(h100_calibration):
    """calibrate --hardware h100-sxm --engine trtllm writes the same values as the bundled-CSV calibration."""
    from simulator.calibrate.profile_io import fitted_values

    pkg = fitted_values(calibrate_engine("h100-sxm", "trtllm"))
    csv_fit = fitted_values(h100_calibration)
    assert {k: v.replace("source: fit-trtllm", "source: fit-h100") for k, v in pkg.items()} == csv_fit
