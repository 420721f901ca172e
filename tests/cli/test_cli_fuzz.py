"""A Hypothesis fuzz over the command line: commands, flags and values drawn from the parser's own declarations
(choices, ``type=int``/``float``, comma lists of a kind, switches), plus odd values (0, negatives, huge, nan, inf,
empty strings, unknown names). Every run must end with exit status 0 or 2 — never a traceback (``main`` is called in
process, so an uncaught exception fails the test) — and no time it prints (JSON keys with ``time``/``_us``/``_s``)
may be negative or non-finite.

Deterministic (``derandomize``) and sized for CI (about 10 s on 2 cores for 300 examples): the cheap commands only
(step, op, explain, overlap predict with chains and trees, a one-model sweep without figures, schedule, serve, validate
tpot on the tiny fixture, show), with engine names in any case, presets and tree shapes drawn; explain (Shapley over
six mechanisms, ~0.4 s) is drawn less often. The study runner, calibration, `validate ops` (1-2 s a run) and trace
fitting have their own tests.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import fields
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cli import build_parser, main
from simulator.cost.deployment import Mechanisms

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "tests/validate/tiny_silicon.csv")
MODELS = ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b", "qwen3-235b-a22b", "llama-3.1-8b", "qwen3-next-80b-a3b",
          "deepseek-v2", "nope-model")
HARDWARE = ("h100-sxm", "b200", "a100-sxm", "mi300x", "gb200", "no-such-gpu")
WORDS = ("", "x", "uniform", "skew:0.2", "skew:5", "zipf:1.1", "zipf:-1", "eagle", "mtp", "model:qwen3-0.6b",
         "model:nope", "ratio:0.05", "ratio:-1", "bf16", "fp8_block", "nvfp4", "0.3")
INTS = ("-1", "0", "1", "2", "3", "4", "7", "8", "16", "64", "128", "1000", "4096", "1099511627776",
        "9007199254740993")
FLOATS = ("0", "0.1", "0.3", "0.5", "0.75", "0.99", "1", "1.5", "-0.2", "nan", "inf", "1e30", "38.1")
BY_DEST = {"model": MODELS, "hardware": HARDWARE, "drafter": ("eagle", "mtp", "model:qwen3-0.6b", "model:nope",
                                                              "ratio:0.05", "ratio:-1", "x", ""),
           "popularity": ("uniform", "skew:0.2", "skew:5", "zipf:1.1", "zipf:-1", "x", ""),
           "accept_length": ("2.73@3", "2", "1", "0.5", "10@3", "2@0", "2@99", "x@y", ""),
           "dtype": ("bf16", "fp8_block", "fp8", "nvfp4", "mxfp4", "int4_wo", "x", ""),
           "engine": ("trtllm", "TRTLLM", "TRT-LLM", "sglang", "SGLang", "vLLM", "x", ""),
           "mode": ("prior", "refined", "prior-no-fixed", "prior-kernel-floors", "prior,refined", "x", ""),
           "tree": ("2,2", "2,2,2", "1,1,1", "3", "0,2", "2,-1", "x", ""),
           "file": (TINY, str(ROOT / "tests/validate/missing_columns.csv"), str(ROOT / "README.md"),
                    str(ROOT / "measured"), "/nonexistent.csv", "")}
# Flags that name files or folders, or run long: never drawn (their checks are in tests/cli/test_cli_hardening.py).
SKIP = {"help", "out", "plot", "report", "write", "write_bundled", "report_dir", "data", "force", "format",
        "version", "all", "samples", "mapping", "tree_parents"}
# Cheap commands and a valid base invocation each (the fuzz adds or replaces flags), with a drawing weight.
BASES = [
    (("step",), ["--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--batch", "1,8", "--tokens", "2", "--json"], 4),
    (("explain",), ["--model", "qwen3-30b-a3b", "--json"], 1),
    (("op", "moe"), ["--hardware", "h100-sxm", "--hidden", "2048", "--inter", "768", "--experts", "128", "--top-k",
                     "8", "--dtype", "fp8_block", "--tokens", "1,16"], 4),
    (("op", "gemm"), ["--hardware", "h100-sxm", "--m", "1,64", "--n", "4096", "--k", "4096", "--dtype", "bf16"], 4),
    (("op", "attention"), ["--hardware", "h100-sxm", "--batch", "8", "--heads", "8", "--kv-heads", "1",
                           "--head-dim", "128", "--kv-len", "2048"], 4),
    (("op", "allreduce"), ["--hardware", "h100-sxm", "--bytes", "8192", "--gpus", "8"], 4),
    (("overlap", "predict"), ["--experts", "128", "--top-k", "8", "--tokens", "4", "--overlap", "0.38,0.33",
                              "--json"], 4),
    (("overlap", "predict"), ["--experts", "128", "--top-k", "8", "--tree", "2,2", "--overlap", "0.38,0.33",
                              "--json"], 4),
    (("sweep",), ["--model", "qwen3-30b-a3b", "--batch", "1,8", "--draft-len", "1,3", "--no-plots", "--quiet"], 4),
    (("schedule",), ["--model", "qwen3-30b-a3b", "--batch", "1,8", "--draft-len", "1,2", "--format", "json"], 4),
    (("serve",), ["--model", "qwen3-30b-a3b", "--concurrency", "1,8", "--isl", "256", "--osl", "64", "--json"], 3),
    (("validate", "tpot"), [TINY, "--json"], 4),
    (("show",), ["model", "qwen3-30b-a3b"], 2),
]
TIME_KEY = re.compile(r"time|_us$|_s$|latency|seconds", re.I)


def _subparser(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _values(action: argparse.Action) -> st.SearchStrategy[str]:
    """Values for one flag, from its declaration."""
    odd = st.sampled_from(("", "x", "-1", "0", "nan"))
    if action.choices:
        return st.one_of(st.sampled_from([str(c) for c in action.choices]), odd)
    if action.dest in BY_DEST:
        return st.sampled_from(BY_DEST[action.dest])
    if not action.option_strings and action.dest == "file":  # validate tpot's CSV (a positional)
        return st.sampled_from(BY_DEST["file"])
    kind = getattr(action.type, "kind", None)
    if kind is not None:  # a comma list (cli._common.csv_list)
        pool = INTS if kind is int else FLOATS
        return st.one_of(st.lists(st.sampled_from(pool), min_size=1, max_size=3).map(",".join), odd)
    if action.type is int:
        return st.sampled_from(INTS)
    if action.type is float:
        return st.sampled_from(FLOATS)
    return st.sampled_from(WORDS)


@st.composite
def invocations(draw):
    path, base, _ = draw(st.sampled_from([b for b in BASES for _ in range(b[2])]))
    parser = _subparser(build_parser(), path)
    flags = [a for a in parser._actions if a.option_strings and a.dest not in SKIP]
    chosen = draw(st.lists(st.sampled_from(flags), max_size=4, unique_by=lambda a: a.dest))
    argv = list(base)
    if path == ("validate", "tpot") and draw(st.booleans()):
        argv[0] = draw(_values(next(a for a in parser._actions if a.dest == "file")))
    for a in chosen:
        flag = a.option_strings[-1]
        if a.nargs == 0:  # a switch
            argv.append(flag)
            continue
        value = draw(_values(a))
        if flag in argv and a.dest not in ("model", "hardware"):  # replace the base value (append actions add)
            i = argv.index(flag)
            argv[i + 1] = value
        else:
            argv += [flag, value]
    return [*path, *argv]


# Keys that name a mechanism (Mechanisms fields such as host_time) hold attributions or settings, not times: an
# attribution may be negative (switching a cost term on lowers the speedup).
MECHANISM_KEYS = {f.name for f in fields(Mechanisms)}


def _times(obj, key=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k) not in MECHANISM_KEYS:
                yield from _times(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            yield from _times(v, key)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and TIME_KEY.search(key):
        yield key, float(obj)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=invocations())
def test_cli_never_tracebacks_and_prints_no_bad_time(argv, tmp_path_factory, capsys):
    if argv[0] == "sweep":
        argv = [*argv, "--out", str(tmp_path_factory.mktemp("fuzz") / "run")]
    if argv[0] == "schedule":
        argv = [*argv, "--out", str(tmp_path_factory.mktemp("fuzz") / "schedule.json")]
    code = main(argv)  # an uncaught exception is a traceback: the test fails with it
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)
        return
    assert not re.search(r"\b(nan|NaN|inf|Infinity)\b", out), (argv, out[:500])
    text = out.strip()
    if text.startswith(("{", "[")):
        for key, value in _times(json.loads(text)):
            assert math.isfinite(value) and value >= 0, (argv, key, value)
