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
    assert time.perf_counter() - started < 4  # was 3 s / 1.56 GB; ~0.15 s now (room for a loaded machine)
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


# --------------------------------------------------------------------------- compare: logs

REPORT = ("[Rank {rank}] (after {it} iterations) memory (MB) | allocated: 30000.0 | max allocated: {peak:.1f} | "
          "reserved: 52000.0 | max reserved: 52000.0\n")


def _rank_log(path: Path, ranks: int, grow: float = 0.0) -> Path:
    path.write_text("training ...\n" + "".join(REPORT.format(rank=r, it=1, peak=50000.0 + (grow if r % 7 == 0 else 0))
                                                for r in range(ranks)), encoding="utf-8")
    return path


def test_many_ranks_compare_in_linear_time(tmp_path):
    """8,000 ranks took 6.8 s and 60,000 over a minute (every report scanned per rank, text and HTML)."""
    from memtune import knowledge
    from memtune.compare.logs import LogSeries, compare_logs
    from memtune.compare.tolerance import parse_tolerance
    from memtune.inputs.memory_steps import scan_log
    from memtune.render.html import compare_logs_view
    from memtune.render.labels import labels

    kb = knowledge.load()
    a, b = _rank_log(tmp_path / "a.log", 20_000), _rank_log(tmp_path / "b.log", 20_000, 3000)
    started = time.perf_counter()
    runs = []
    for path in (a, b):
        series = LogSeries()
        runs.append((scan_log(path, kb, series.add), series))
    result = compare_logs(*runs, parse_tolerance("2%"))
    view = compare_logs_view(result, labels(kb, "en"))
    # linear: ~1.5 s on a quiet 2-core machine; the quadratic version needed minutes (the bound leaves room for load)
    assert time.perf_counter() - started < 8.0
    assert len(result.ranks) == len(result.points) == 20_000 and view["more"] > 0
    assert (result.divergence.rank, result.divergence.metric) == (0, "peak_allocated")
    assert result.ranks[7].b["peak_allocated"] == pytest.approx(53000 * 2**20)


def test_every_report_is_seen_past_parse_logs_rank_bound(tmp_path):
    """parse_log keeps 4,096 ranks; the comparison reads every one, from the same single pass."""
    from memtune import knowledge
    from memtune.inputs.memory_steps import read_memory_steps, scan_log

    kb = knowledge.load()
    path = _rank_log(tmp_path / "a.log", 5000)
    seen: list = []
    facts = scan_log(path, kb, seen.append)
    assert len(seen) == 5000 and [r.line for r in seen[:2]] == [2, 3]
    assert len(facts.memory_reports) == 4096
    assert read_memory_steps(path, kb) == seen


def test_gzip_bomb_is_refused_in_one_line(tmp_path):
    """1 MB of gzip decompressing to 1 GB took 48 s; refused once past 64x its size (any bomb past that ratio is
    refused the same way: 20 MiB of text in ~20 KB keeps the test's own set-up short)."""
    import gzip

    path = tmp_path / "bomb.log.gz"
    with gzip.open(path, "wb", 9) as fh:
        for _ in range(20):
            fh.write(b"\n" * 2**20)  # 20 MiB of text, ~20 KB on disk: a 1000x ratio
    started = time.perf_counter()
    err = _one_line_error(_memtune("compare", str(path), str(path)))
    assert "gunzip it" in err and time.perf_counter() - started < 6  # 48 s before
    started = time.perf_counter()  # diagnose --log reads .gz through its own opener: bounded the same way
    err = _one_line_error(_memtune("diagnose", "--log", str(path)))
    assert "gunzip it" in err and time.perf_counter() - started < 6  # 48 s before


def test_one_huge_line_is_read_in_bounded_memory(tmp_path):
    """A .gz of one 900 MB line reached 6.9 GB (the line read whole); a plain one is cut at max_line_chars."""
    from memtune import knowledge
    from memtune.inputs.memory_steps import log_chunks

    kb = knowledge.load()
    line = "[Rank 0] (after 1 iterations) memory (MB) | allocated: " + "1" * (3 * 2**20)
    path = tmp_path / "line.log"
    path.write_text(line + "\n" + REPORT.format(rank=1, it=1, peak=1.0), encoding="utf-8")
    pieces = list(log_chunks(path, 2**20))
    assert max(map(len, pieces)) <= 2**20 + 2**20 + 2 and sum(p.count("\n") for p in pieces) == 2
    from memtune.inputs.memory_steps import read_memory_steps

    # the cut line still holds a million-digit figure no counter can: refused with its line number, in one line
    with pytest.raises(UserError, match=r"line\.log:1: cannot read this line"):
        read_memory_steps(path, kb)
    path.write_text("x" * (3 * 2**20) + "\n" + REPORT.format(rank=1, it=1, peak=1.0), encoding="utf-8")
    assert [(r.rank, r.line) for r in read_memory_steps(path, kb)] == [(1, 2)]  # numbering kept past the cut


# --------------------------------------------------------------------------- compare: configs, YAML


def test_set_parses_the_config_once(tmp_path, monkeypatch):
    """40 --set on a 300 KB config re-parsed it 41 times (53 s)."""
    from memtune import cli
    from memtune.inputs import config as config_module

    calls = []
    real = config_module.read_config
    monkeypatch.setattr(config_module, "read_config", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    example = SKILL / "examples" / "llama3-70b-sft-config.yaml"
    sets = [x for i in range(10) for x in ("--set", f"model.seq_length={4096 + 8 * i}")]
    assert cli.main(["compare", str(example), *sets, "--world-size", "64"]) == 0
    assert len(calls) == 1


def test_yaml_node_cap_counts_every_line_break(tmp_path):
    """Only \\n was counted, so a \\r-separated file parsed 3x the cap."""
    from memtune.inputs.yamltree import MAX_NODES, check_size, line_breaks

    assert line_breaks("a\r\nb\rc\nd\x85e\u2028f\u2029") == 6
    for sep in ("\r", "\r\n", "\n", "\x85", "\u2028"):
        text = sep.join(f"k{i}: {i}" for i in range(MAX_NODES + 10))
        with pytest.raises(UserError, match="refused"):
            check_size(text, "c.yaml")
    path = tmp_path / "cr.yaml"
    path.write_bytes(("- 1\r" * (MAX_NODES + 10)).encode())
    err = _one_line_error(_memtune("estimate", "--config", str(path)))
    assert "refused" in err


def test_json_answer_lists_a_bounded_number_of_points(tmp_path, monkeypatch, capsys):
    """Two 50 MB logs made a 147 MB JSON answer in 1.4 GB; the answer lists the first points and says how many
    it left out, while the per-rank peaks and the divergence still come from every point."""
    import json

    from memtune import cli
    from memtune.render import compare as render

    a, b = _rank_log(tmp_path / "a.log", 10), _rank_log(tmp_path / "b.log", 10, 3000)
    monkeypatch.setattr(render, "MAX_JSON_POINTS", 4)
    assert cli.main(["compare", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["points"]) == 4 and doc["points_left_out"] == 6 and len(doc["ranks"]) == 10
    assert doc["divergence"] is not None
