"""Engine routing dumps (SGLang expert-distribution recorder, vLLM routed_experts), the expert-count rules and
trace writing. The dumps are built here in the engines' layouts from a known synthetic routing, so every test
checks that the reader recovers that routing."""

import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.errors import ParameterError
from simulator.traces import read_trace, synth_trace, validate_routing, write_trace
from simulator.traces import trace as traces_mod
from simulator.traces.formats import (
    SGLANG_EXPORT,
    detect_format,
    sglang_sequences,
    vllm_sequences,
    windows,
)

E, K = 16, 2


def _truth(sequences=3, tokens=40, seed=3):
    return np.asarray(synth_trace(E, K, sequences, tokens, layers=2, persistence=0.8, seed=seed).experts,
                      dtype=np.int64)


def _sglang_dump(truth, seed=0):
    """An SGLang per_token dump of ``truth`` [3 requests, 40 tokens, 2 MoE layers, k]: model layer 0 dense (never
    recorded, -1), layers 1-2 routed; 20 physical slots (16 experts + 4 EPLB replicas) with a shuffled map; the
    recorder's 8 id columns (k=2 filled, the rest -1). Passes: one extend of requests 0 and 1 (24 tokens each),
    16 decode passes of both (a stable batch), an extend of request 2 (40 tokens), an idle and a target-verify
    pass. Returns (records, physical_to_logical_map, expected pieces [tokens, 2, k] of logical ids)."""
    rng = np.random.default_rng(seed)
    phys_logical = np.concatenate([np.arange(E), rng.choice(E, 4, replace=False)])  # slot -> logical expert
    perm = rng.permutation(20)
    p2l = np.full((3, 20), -1, dtype=np.int64)
    for layer in range(3):
        p2l[layer, perm] = phys_logical
    slots = {(layer, e): np.flatnonzero(p2l[layer] == e) for layer in range(3) for e in range(E)}

    def topk_ids(tokens):  # [n, 2 layers, k] logical -> [3 layers, n, 8] physical, -1 elsewhere
        out = np.full((3, len(tokens), 8), -1, dtype=np.int32)
        for i, tok in enumerate(tokens):
            for layer in range(2):
                out[layer + 1, i, :K] = [rng.choice(slots[(layer + 1, int(e))]) for e in tok[layer]]
        return out

    records = [{"forward_pass_id": 0, "rank": 0, "forward_mode": 1, "positions": list(range(24)) * 2,
                "extend_seq_lens": [24, 24], "input_ids": [0] * 48,
                "topk_ids_of_layer": topk_ids(np.concatenate([truth[0, :24], truth[1, :24]])), "misc_objects": []}]
    for step in range(16):
        t = 24 + step
        records.append({"forward_pass_id": 1 + step, "rank": 0, "forward_mode": 2, "positions": [t, t],
                        "extend_seq_lens": None, "input_ids": [0, 0],
                        "topk_ids_of_layer": topk_ids(np.stack([truth[0, t], truth[1, t]])), "misc_objects": []})
    records.append({"forward_pass_id": 17, "rank": 0, "forward_mode": 1, "positions": list(range(40)),
                    "extend_seq_lens": [40], "input_ids": [0] * 40, "topk_ids_of_layer": topk_ids(truth[2]),
                    "misc_objects": []})
    records.append({"forward_pass_id": 18, "rank": 0, "forward_mode": 4, "positions": [], "extend_seq_lens": None,
                    "input_ids": [], "topk_ids_of_layer": np.full((3, 0, 8), -1, np.int32), "misc_objects": []})
    records.append({"forward_pass_id": 19, "rank": 0, "forward_mode": 5, "positions": [40, 41, 42],
                    "extend_seq_lens": None, "input_ids": [0] * 3, "topk_ids_of_layer": topk_ids(truth[2, :3]),
                    "misc_objects": []})
    order = np.random.default_rng(seed + 1).permutation(len(records))  # the reader orders by forward_pass_id
    expected = [truth[0, :24], truth[1, :24], truth[0, 24:], truth[1, 24:], truth[2]]
    return [records[i] for i in order], p2l, expected


def _same_pieces(got, expected):
    key = lambda a: a.tobytes()  # noqa: E731
    return sorted(map(key, got)) == sorted(key(np.asarray(e, dtype=np.int64)) for e in expected)


def test_sglang_records_map_back_to_the_routing():
    truth = _truth()
    records, p2l, expected = _sglang_dump(truth)
    seqs, layer_ids, skipped = sglang_sequences(records, p2l)
    assert layer_ids == (1, 2) and skipped == 1  # the dense layer dropped; the target-verify pass skipped
    assert all(s.shape[1:] == (2, K) for s in seqs)
    assert _same_pieces(seqs, expected)
    # without the map the physical slot ids would be read, which differ from the logical ids
    raw, _, _ = sglang_sequences(records, None)
    assert not _same_pieces(raw, expected)


def test_sglang_decode_chains_break_when_the_batch_changes():
    truth = _truth()
    records, p2l, _ = _sglang_dump(truth)
    decode = sorted((r for r in records if r["forward_mode"] == 2), key=lambda r: r["forward_pass_id"])
    decode[8]["positions"] = [99, 99]  # a different batch at step 8: the chains restart there
    seqs, _, _ = sglang_sequences(records, p2l)
    assert sorted(len(s) for s in seqs) == [1, 1, 7, 7, 8, 8, 24, 24, 40]


def _export_npz(records, p2l, path):
    """The SGLANG_EXPORT one-liner, run with a stand-in ``torch`` whose load returns the dump as numpy data."""
    code = SGLANG_EXPORT.split('"')[1]
    fake = types.ModuleType("torch")
    fake.load = lambda *a, **k: {"records": records, "last_physical_to_logical_map": p2l}
    saved = sys.modules.get("torch"), sys.argv
    sys.modules["torch"], sys.argv = fake, ["-c", "dump.pt", str(path)]
    try:
        exec(code, {})  # noqa: S102 - the documented export command itself
    finally:
        if saved[0] is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved[0]
        sys.argv = saved[1]


def test_sglang_npz_export_reads_as_a_trace(tmp_path):
    truth = _truth()
    records, p2l, expected = _sglang_dump(truth)
    path = tmp_path / "expert_distribution_recorder_0.npz"
    _export_npz(records, p2l, path)
    assert detect_format(str(path)) == "sglang"
    with pytest.warns(UserWarning, match="windows of 8 tokens"):
        trace = read_trace(str(path), seq_tokens=8)
    assert trace.num_experts == E and trace.layer_ids == (1, 2) and trace.experts.shape == (15, 8, 2, K)
    want, _ = windows([np.asarray(e, dtype=np.int64) for e in expected], 8, "x")
    assert sorted(map(bytes, np.asarray(trace.experts, np.int64))) == sorted(map(bytes, want))
    with pytest.raises(ParameterError, match="outside \\[0, 12\\)"):  # a stated count below the dump's ids
        read_trace(str(path), 12, seq_tokens=8)


def test_sglang_bad_dumps():
    truth = _truth()
    records, p2l, _ = _sglang_dump(truth)
    with pytest.raises(ParameterError, match="per_token"):
        sglang_sequences([{"forward_pass_id": 0, "global_physical_count": np.zeros((3, 20))}])
    with pytest.raises(ParameterError, match="physical experts"):
        sglang_sequences(records, p2l[:, :10])
    holes = [dict(r) for r in records]
    ext = next(r for r in holes if r["forward_mode"] == 1 and r["extend_seq_lens"] == [40])
    ext["topk_ids_of_layer"] = ext["topk_ids_of_layer"].copy()
    ext["topk_ids_of_layer"][1, 5, 1] = -1  # one token lists only one of its k experts
    with pytest.raises(ParameterError, match="1 empty"):
        sglang_sequences(holes, p2l)


def test_torch_dump_without_torch_says_how_to_convert(tmp_path):
    path = tmp_path / "expert_distribution_recorder_1.pt"
    path.write_bytes(b"PK\x03\x04 not really")
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ParameterError, match="pip install torch") as err:
            read_trace(str(path))
        assert "\n" not in str(err.value) and "savez" in str(err.value)
    else:
        with pytest.raises(ParameterError, match="not a readable PyTorch file"):
            read_trace(str(path))


class _StandInTensor:
    """Enough of a torch.Tensor for the reader: ``detach().cpu().numpy()``."""

    def __init__(self, a):
        self.a = np.asarray(a)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a


def _stand_in_torch():
    """A ``torch`` module with the three calls the reader and this test use (pickle underneath), so the .pt path
    is tested where PyTorch is not installed (CI); the real module is used when it is."""
    import pickle

    fake = types.ModuleType("torch")
    fake.as_tensor = _StandInTensor
    fake.save = lambda obj, path: Path(path).write_bytes(pickle.dumps(obj))
    fake.load = lambda path, map_location=None, weights_only=False: pickle.loads(Path(path).read_bytes())
    return fake


def test_torch_dump(tmp_path, monkeypatch):
    try:
        import torch
    except ImportError:
        torch = _stand_in_torch()
        monkeypatch.setitem(sys.modules, "torch", torch)
    truth = _truth()
    records, p2l, expected = _sglang_dump(truth)
    dump = {"records": [{k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in r.items()}
                        for r in records], "last_physical_to_logical_map": torch.as_tensor(p2l)}
    path = tmp_path / "d.pt"
    torch.save(dump, str(path))
    trace = read_trace(str(path), seq_tokens=8)
    assert trace.experts.shape == (15, 8, 2, K) and trace.num_experts == E


def _vllm_requests(truth, lengths=(40, 33, 21)):
    """vLLM CompletionOutput.routed_experts per request: [tokens, layers, k] int32 with model layer 0 dense (the
    capturer never writes it: zeros)."""
    out = []
    for i, n in enumerate(lengths):
        a = np.zeros((n, 3, K), dtype=np.int32)
        a[:, 1:] = truth[i, :n]
        out.append(a)
    return out


def test_vllm_arrays_npz_and_jsonl(tmp_path):
    truth = _truth()
    reqs = _vllm_requests(truth)
    seqs, layer_ids = vllm_sequences(reqs)
    assert layer_ids == (1, 2) and _same_pieces(seqs, [truth[0, :40], truth[1, :33], truth[2, :21]])
    npz = tmp_path / "routes.npz"
    np.savez(npz, *reqs)
    jsonl = tmp_path / "routes.jsonl"
    jsonl.write_text("".join(json.dumps({"request_id": str(i), "routed_experts": a.tolist()}) + "\n"
                             for i, a in enumerate(reqs)))
    for path in (npz, jsonl):
        assert detect_format(str(path)) == "vllm"
        with pytest.warns(UserWarning, match="not used"):
            trace = read_trace(str(path), E, seq_tokens=10)
        assert trace.experts.shape == (4 + 3 + 2, 10, 2, K) and trace.layer_ids == (1, 2)
        assert np.array_equal(trace.experts[0], truth[0, :10])
    with pytest.raises(ParameterError, match="longest sequence has 40 tokens"):
        read_trace(str(npz), E, seq_tokens=64)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"routed_experts": [[[1, 2]], [[3]]]}) + "\n")
    with pytest.raises(ParameterError, match="rectangular"):
        read_trace(str(bad), format="vllm")


def test_stated_expert_count_counts_bad_ids_and_never_widens():
    arr = np.asarray(synth_trace(E, K, 4, 16, seed=1).experts, dtype=np.int64)
    arr[0, 0, 0, 0], arr[1, 3, 0, 1] = 1_000_000, 40
    with pytest.raises(ParameterError, match="2 of 128 expert ids are outside \\[0, 16\\)"):
        validate_routing(arr, E)
    with pytest.raises(ParameterError, match="too sparse"):  # one stray id: E is not inferred as 1,000,001
        validate_routing(arr)
    with pytest.raises(ParameterError, match="num_experts"):
        validate_routing(arr, 0)
    dense = np.asarray(synth_trace(E, K, 4, 16, seed=1).experts)
    assert validate_routing(dense).num_experts == int(dense.max()) + 1
    sparse = dense * 3  # ids 0, 3, ..., 45: a third of [0, 45] used
    with pytest.raises(ParameterError, match="only 16 distinct ids occur in \\[0, 45\\]"):
        validate_routing(sparse)
    assert validate_routing(sparse, 48).num_experts == 48  # stated: fine


def test_write_is_atomic(tmp_path, monkeypatch):
    trace = synth_trace(E, K, 2, 8, seed=0)
    target = tmp_path / "t.npz"

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(traces_mod.np, "savez_compressed", broken)
    with pytest.raises(ParameterError, match="no space left"):
        write_trace(trace, str(target))
    assert os.listdir(tmp_path) == []  # neither the file nor a temporary
    monkeypatch.undo()
    write_trace(trace, str(target))
    assert os.listdir(tmp_path) == ["t.npz"]


@pytest.mark.parametrize(
    "argv,text",
    [
        (["fit", "{bad}"], "too sparse"),
        (["fit", "{bad}", "--experts", "16"], "1 of 128 expert ids are outside [0, 16)"),
        (["fit", "{good}", "--experts", "0"], "--experts: must be an int"),
        (["fit", "{good}", "--samples", "0"], "--samples: must be an int"),
        (["fit", "{good}", "--samples", "-5"], "--samples: must be an int"),
        (["fit", "{good}", "--seq-tokens", "1"], "--seq-tokens"),
        (["fit", "{good}", "--format", "sglang"], "an SGLang dump is a .pt file or its .npz export"),
        (["fit", "{pickled}"], "not read"),
        (["fit", "{tmp}/broken.npz"], "damaged or truncated"),
        (["fit", "{tmp}/broken.npy"], "damaged or truncated"),
        (["fit", "{tmp}/text.npy"], "not a NumPy"),
        (["fit", "{tmp}"], "not a file"),
        (["synth", "--out", "{tmp}"], "is a folder"),
        (["synth", "--out", "/proc/x.npz"], "cannot write"),
        (["synth", "--out", "/sys/x.npz"], "cannot write"),
        (["synth", "--out", "{tmp}/missing/x.npz"], "does not exist"),
        (["synth", "--experts", "0", "--out", "{tmp}/x.npz"], "--experts: must be an int"),
        (["synth", "--experts", "99999999999999999999", "--out", "{tmp}/x.npz"], "--experts: must be an int"),
        (["synth", "--sequences", "400000", "--tokens", "320", "--out", "{tmp}/x.npz"], "fewer sequences"),
        (["fit", "{good}", "--tokens="], "non-empty list"),
        (["fit", "{good}", "--batch="], "--batch: must be a non-empty list"),
        (["fit", "{good}", "--batch", "99999999999999999999"], "--batch: must be"),
        (["fit", "{good}", "--layer="], "non-empty list"),
    ],
)
def test_cli_trace_errors_are_one_line_exit_2(tmp_path, capsys, argv, text):
    good = tmp_path / "good.npy"
    arr = np.asarray(synth_trace(E, K, 4, 16, seed=1).experts, dtype=np.int64)
    np.save(good, arr)
    arr[0, 0, 0, 0] = 1_000_000
    np.save(tmp_path / "bad.npy", arr)
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 cut short")
    (tmp_path / "broken.npy").write_bytes(good.read_bytes()[:90])
    (tmp_path / "text.npy").write_text("0,1\n")
    if argv[0] == "synth":
        base = {"--experts": "16", "--top-k": "2", "--sequences": "2", "--tokens": "8"}
        for flag, value in base.items():
            if flag not in argv:
                argv = [*argv, flag, value]
    argv = [a.format(bad=tmp_path / "bad.npy", good=good, pickled=tmp_path / "pickled.npy", tmp=tmp_path)
            for a in argv]
    code = main(["overlap", *argv])  # an uncaught exception (a traceback) fails the test
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], err
    for internal in ("allow_pickle", "np.float64", "np.int64(", "range [1, 0]"):
        assert internal not in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["bad.npy", "broken.npy", "broken.npz", "good.npy", "pickled.npy",
                                            "text.npy"]  # nothing half-written


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), lens=st.lists(st.integers(1, 9), min_size=1, max_size=6),
       replicas=st.integers(0, 6), split=st.integers(0, 6))
def test_sglang_extend_passes_recover_any_routing(seed, lens, replicas, split):
    """Any routing of requests of any lengths, spread over one or two extend passes and stored as physical ids of
    any replica layout, maps back to the same logical routing (dense layer 0 and the unused columns dropped)."""
    rng = np.random.default_rng(seed)
    experts, k, slots = 8, 3, 8 + replicas
    truth = [np.stack([[rng.choice(experts, k, replace=False) for _ in range(2)] for _ in range(n)]) for n in lens]
    phys = np.concatenate([np.arange(experts), rng.choice(experts, replicas)])
    p2l = np.stack([phys[rng.permutation(slots)] for _ in range(3)])
    cut = min(split, len(lens))
    records = []
    for pass_id, group in enumerate((truth[:cut], truth[cut:])):
        if not group:
            continue
        tokens = np.concatenate(group)
        ids = np.full((3, len(tokens), 8), -1, dtype=np.int32)
        for layer in (1, 2):
            for t, tok in enumerate(tokens):
                ids[layer, t, :k] = [rng.choice(np.flatnonzero(p2l[layer] == e)) for e in tok[layer - 1]]
        records.append({"forward_pass_id": pass_id, "forward_mode": 1, "extend_seq_lens": [len(g) for g in group],
                        "positions": np.concatenate([np.arange(len(g)) for g in group]), "topk_ids_of_layer": ids})
    seqs, layer_ids, skipped = sglang_sequences(records, p2l)
    assert layer_ids == (1, 2) and skipped == 0 and _same_pieces(seqs, truth)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), stated=st.integers(2, 40))
def test_stated_count_reports_exactly_the_ids_outside(seed, stated):
    rng = np.random.default_rng(seed)
    arr = np.stack([[rng.choice(40, 2, replace=False) for _ in range(6)] for _ in range(3)])  # [3, 6, 2], ids < 40
    bad = int(np.count_nonzero(arr >= stated))
    if bad:
        with pytest.raises(ParameterError, match=f": {bad} of 36 expert ids are outside \\[0, {stated}\\)"):
            validate_routing(arr, stated)
    else:
        assert validate_routing(arr, stated).num_experts == stated


def test_empirical_draws_are_chunked_within_the_memory_budget(monkeypatch):
    trace = synth_trace(E, K, 6, 24, persistence=0.6, seed=2)
    whole = traces_mod.empirical_unique(trace, 0, 4, [1, 8], samples=3000, seed=1)[0]
    monkeypatch.setattr(traces_mod, "_DRAW_BUDGET", 64)  # a few draws per chunk: other draws, same distribution
    chunked = traces_mod.empirical_unique(trace, 0, 4, [1, 8], samples=3000, seed=1)[0]
    assert not np.array_equal(whole, chunked) and np.allclose(whole, chunked, rtol=0.03)
    const = validate_routing(np.tile(np.array([[0, 1]]), (5, 6, 1)), 4)
    assert np.allclose(traces_mod.empirical_unique(const, 0, 3, [1, 4], samples=50)[0], 2)


def test_fit_on_an_sglang_export_names_the_model_layers(tmp_path, capsys):
    records, p2l, _ = _sglang_dump(_truth())
    path = tmp_path / "dump.npz"
    _export_npz(records, p2l, path)
    assert main(["overlap", "fit", str(path), "--seq-tokens", "8", "--tokens", "2", "--samples", "50"]) == 0
    out, err = capsys.readouterr()
    assert "are model layers 1-2" in out and "E=16, k=2" in out and err.startswith("warning: ")
    assert main(["overlap", "fit", str(path), "--seq-tokens", "8", "--tokens", "2", "--samples", "50",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_layers"] == [1, 2]
