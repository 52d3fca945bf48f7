"""Inputs small on disk whose work or memory is not: deep tuples, shared strings, many ranks, long lines, .gz bombs.

Each test builds the hostile file itself, scaled so the suite stays fast; the full-size figures are in the
commit messages.  Whatever the file, memtune ends with exit 0 or a one-line error (exit 2): never a signal
or an internal error.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memtune.errors import UserError
from memtune.inputs import snapshot as snap
from memtune.inputs.snapshot import analyze_snapshot, load_snapshot, nesting_bound, tuple_depth

SKILL = Path(__file__).resolve().parents[1] / "skills" / "nemo-mbridge-perf-memory-tuning"
MEMTUNE = SKILL / "scripts" / "memtune.py"


def _memtune(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """In a child: a segfault there is a return code here, not a dead test run."""
    return subprocess.run([sys.executable, str(MEMTUNE), *argv], capture_output=True, text=True, timeout=timeout)


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-400:])
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


# --------------------------------------------------------------------------- snapshots: deep tuples

DEPTH = 150_000  # the attack's own depth: 150 KB on disk, and the file loads in well under a second


def _deep_tuple(depth: int) -> bytes:
    """PROTO 4, EMPTY_TUPLE, TUPLE1 x depth: a tuple nested ``depth`` levels, one byte a level."""
    return b")" + b"\x85" * depth


def test_deep_tuple_as_dict_key_is_no_segfault(tmp_path):
    """Hashing it as a key recursed in C past the main thread's stack: exit 139, no message."""
    path = tmp_path / "deep.pickle"
    path.write_bytes(b"\x80\x04}" + _deep_tuple(DEPTH) + b"K\x01s.")  # {deep: 1}
    for argv in (["snapshot", str(path)], ["diagnose", "--snapshot", str(path)], ["compare", str(path), str(path)]):
        err = _one_line_error(_memtune(*argv))
        assert "not a memory snapshot" in err


def test_deep_tuple_as_a_trace_action_is_no_segfault(tmp_path):
    """A valid snapshot whose trace event's action is the deep tuple: hashed after loading, in the main thread."""
    head = pickle.dumps({"segments": [], "device_traces": [[{"size": 512, "action": None}]]}, protocol=4)
    # swap the None (N) of "action" for the deep tuple; the STOP stays last
    at = head.rindex(b"N")
    path = tmp_path / "trace.pickle"
    path.write_bytes(head[:at] + _deep_tuple(DEPTH) + head[at + 1:])
    assert load_snapshot(path)["device_traces"][0][0]["size"] == 512
    for argv in (["snapshot", str(path)], ["snapshot", str(path), "--html", str(tmp_path / "s.html")],
                 ["compare", str(path), str(path)]):
        done = _memtune(*argv)
        assert done.returncode == 0, done.stderr[-400:]


def test_nesting_bound_is_above_the_exact_depth():
    for value in ((1, (2, (3,))), [((1,),), frozenset({(1, (2,))})], {"k": (1, 2, 3, 4)}, ((((),),),) * 3):
        for protocol in (0, 2, 4, 5):
            raw = pickle.dumps(value, protocol=protocol)
            assert tuple_depth(raw) <= nesting_bound(raw)
    assert tuple_depth(pickle.dumps((1, (2, (3,))), protocol=4)) == 3
    assert tuple_depth(b"\x80\x04" + _deep_tuple(1000) + b".") == 1000


def test_too_deep_for_any_stack_is_refused_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "deep.pickle"
    path.write_bytes(b"\x80\x04" + _deep_tuple(5000) + b".")
    monkeypatch.setattr(snap, "STACK_CAP", snap.STACK_FLOOR + 1000 * snap.STACK_PER_LEVEL)
    with pytest.raises(UserError, match="nested deeper"):
        load_snapshot(path)
    monkeypatch.setattr(snap, "STACK_CAP", snap.STACK_FLOOR + 10_000 * snap.STACK_PER_LEVEL)
    assert isinstance(load_snapshot(path), tuple)  # bound too high, exact depth fits: loads


# --------------------------------------------------------------------------- snapshots: shared strings


def _shared_frames(path: Path, frames: int, *, name: str = "f", filename: str = "/x/megatron/core/model.py") -> Path:
    shared = [{"filename": filename, "name": name, "line": i} for i in range(frames)]
    data = {"segments": [{"total_size": 1024, "device": 0,
                          "blocks": [{"size": 512, "state": "active_allocated", "frames": shared}]}],
            "device_traces": [[{"action": "alloc", "size": 512, "addr": 1, "frames": shared}]]}
    path.write_bytes(pickle.dumps(data, protocol=4))
    return path


@pytest.mark.parametrize("what", ["name", "filename"])
def test_one_shared_long_string_is_read_once(tmp_path, what):
    """1 MiB shared by 1,500 frames was 1.56 GB RSS (name) or 50 s (file name); 300 frames keep this fast."""
    long = {"name": {"name": "f" * 2**20}, "filename": {"filename": "/megatron" + "/a" * 2**19 + ".py"}}[what]
    path = _shared_frames(tmp_path / "shared.pickle", 300, **long)
    assert path.stat().st_size < 1.1 * 2**20
    started = time.perf_counter()
    summary = analyze_snapshot(path)
    assert time.perf_counter() - started < 1.5
    site = summary["top_sites"][0]["site"]
    assert len(site) <= 2 * snap.MAX_LABEL_PART + 20
    done = _memtune("compare", str(path), str(path), "--html", str(tmp_path / "c.html"))
    assert done.returncode == 0, done.stderr[-400:]


def test_site_names_unchanged_for_ordinary_frames():
    namer = snap.SiteNamer()
    frames = [{"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "name": "_call", "line": 1},
              {"filename": "/ws/train.py", "name": "step", "line": 7},
              {"filename": "/opt/megatron/core/transformer/mlp.py", "name": "forward", "line": 120}]
    assert namer.site(frames) == ("megatron.core.transformer.mlp:forward:120", "megatron.core.transformer.mlp")
    assert namer.site(frames[:2]) == ("train.py:step:7", None)
    lib = [{"filename": "/venv/lib/python3.11/site-packages/apex/fused.py", "name": "f", "line": 3}]
    assert namer.site(lib + frames[1:2]) == ("train.py:step:7", None)
    assert namer.site(lib) == ("fused.py:f:3", None)
