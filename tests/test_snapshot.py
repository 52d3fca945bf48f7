"""Snapshot pickles: both layouts, the real samples, and files that must be refused without running anything."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtune import cli
from memtune.errors import UserError
from memtune.inputs.snapshot import analyze_snapshot, load_snapshot, summarize

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
sys.path.insert(0, str(FIXTURES))
import make_snapshots  # noqa: E402  (the generator documents the expected numbers)

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def built():
    return {"dict": make_snapshots.dict_snapshot(), "list": make_snapshots.list_snapshot()}


@pytest.mark.parametrize("name,layout", [("dict_oom.pickle", "dict"), ("list_legacy.pickle", "list")])
def test_fixture_files_load_back_as_their_generator_built_them(name, layout, built, snapshot_files):
    assert load_snapshot(snapshot_files[name]) == built[layout]


@pytest.mark.parametrize("name,layout", [("dict_oom.pickle", "dict"), ("list_legacy.pickle", "list")])
def test_layout_numbers(name, layout, built, snapshot_files):
    summary = analyze_snapshot(snapshot_files[name])
    for key, expected in make_snapshots.EXPECTED[layout].items():
        assert summary[key] == expected, key


def test_totals_add_up_per_type_and_pool(snapshot_files):
    s = analyze_snapshot(snapshot_files["dict_oom.pickle"])
    for key in ("reserved_bytes", "allocated_bytes", "active_bytes", "inactive_split_bytes", "releasable_bytes"):
        assert sum(v[key] for v in s["segment_types"].values()) == s[key]
        assert sum(v[key] for v in s["pools"].values()) == s[key]
    assert s["reserved_bytes"] == s["active_bytes"] + s["inactive_split_bytes"] + s["releasable_bytes"]
    assert s["fragmentation_ratio"] == pytest.approx(1 - 38.5 / 86)
    assert s["graph_pool_share"] == pytest.approx(24 / 86)


def test_sites_prefer_megatron_module_names(snapshot_files):
    sites = analyze_snapshot(snapshot_files["dict_oom.pickle"])["top_sites"]
    assert sites[0] == {"site": "megatron.core.transformer.dot_product_attention:forward:210",
                        "module": "megatron.core.transformer.dot_product_attention", "bytes": 32 * MIB, "blocks": 2}
    assert sites[1]["module"] == "megatron.core.tensor_parallel.layers"
    assert sites[2]["site"] == "train.py:build_buffers:55" and sites[2]["module"] is None
    assert len(analyze_snapshot(snapshot_files["dict_oom.pickle"], top=1)["top_sites"]) == 1


def _oom_variant(built, size_mib: float, device_free_mib: float) -> dict:
    data = make_snapshots.dict_snapshot()
    oom = data["device_traces"][0][-1]
    oom["size"], oom["device_free"] = int(size_mib * MIB), int(device_free_mib * MIB)
    return summarize(data)


def test_oom_verdicts(built):
    # reserved 86, allocated 38.5 -> 47.5 MiB cached but unallocated; largest free block on stream 0 is 20 MiB
    assert _oom_variant(built, 60, 8)["oom_kind"] == "capacity"  # 60 > 8 + 47.5
    assert _oom_variant(built, 30, 8)["oom_kind"] == "fragmentation"
    assert _oom_variant(built, 16, 8)["oom_kind"] == "unclear"  # a 20 MiB block could have served it


def test_pending_free_spellings_both_count_as_active(built):
    data = make_snapshots.list_snapshot()
    data[0]["blocks"][2]["state"] = "active_awaiting_free"
    assert summarize(data)["pending_free_bytes"] == 4 * MIB


# --------------------------------------------------------------------------- real samples


def _stated(source_txt: str, kind: str) -> tuple[int, float, float]:
    m = re.search(rf"{kind}: (\d+) segments, ([\d.]+) GiB reserved / ([\d.]+) GiB allocated", source_txt)
    assert m, f"no stated totals for {kind}"
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


@pytest.mark.parametrize("kind", ["forward", "fullstep"])
def test_real_snapshots_match_stated_totals(shared_dir, kind):
    path = shared_dir / "fixtures" / "snapshots" / f"cs336-a2-memory_ctx128_{kind}.pickle"
    segments, reserved_gib, allocated_gib = _stated(Path(f"{path}.source.txt").read_text(), kind)
    s = analyze_snapshot(path)
    assert s["layout"] == "dict" and s["segments"] == segments
    assert s["reserved_bytes"] / 2**30 == pytest.approx(reserved_gib, abs=0.005)
    assert s["allocated_bytes"] / 2**30 == pytest.approx(allocated_gib, abs=0.005)
    assert s["expandable_segments"] is False
    # the trace began after the weights existed; the replayed peak is anchored to the end state
    assert s["allocated_bytes"] <= s["timeline_peak_bytes"] <= s["timeline_reserved_peak_bytes"]
    assert s["stacks_recorded"] and s["top_sites"]


# --------------------------------------------------------------------------- hostile and broken files


class _Payload:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_os_system_payload_is_refused_and_never_runs(tmp_path, protocol):
    marker = tmp_path / "pwned"
    hostile = tmp_path / "snapshot.pickle"
    data = {"segments": [{"total_size": 1, "blocks": [], "frames": _Payload(f"touch {marker}")}]}
    hostile.write_bytes(pickle.dumps(data, protocol=protocol))
    with pytest.raises(UserError, match=r"refused: the pickle asks to load (posix|nt|os)\.system"):
        analyze_snapshot(hostile)
    assert not marker.exists()


def test_payload_is_live_under_plain_pickle(tmp_path):
    """Control: the same bytes do run a command under pickle.load, so the refusal above is what stops it."""
    marker = tmp_path / "control"
    hostile = tmp_path / "snapshot.pickle"
    hostile.write_bytes(pickle.dumps(_Payload(f"touch {marker}")))
    subprocess.run([sys.executable, "-c", "import pickle,sys; pickle.load(open(sys.argv[1], 'rb'))", str(hostile)],
                   check=True)
    assert marker.exists()


def test_cli_refuses_hostile_file_with_exit_2(tmp_path, capsys):
    marker = tmp_path / "pwned"
    hostile = tmp_path / "oom.pickle"
    hostile.write_bytes(pickle.dumps(_Payload(f"touch {marker}")))
    assert cli.main(["snapshot", str(hostile)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtune: error: ") and "refused" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not marker.exists()


@pytest.mark.parametrize("content,message", [
    (b"not a pickle at all", "not a readable snapshot pickle"),
    (pickle.dumps({"segments": []})[:-3], "not a readable snapshot pickle"),
    (pickle.dumps(5), "not a memory snapshot"),
    (pickle.dumps({"device_traces": []}), "not a memory snapshot"),
    (pickle.dumps({"segments": [{"blocks": []}]}), r"segments\[0\]: missing 'total_size'"),
    (pickle.dumps({"segments": [{"total_size": 4, "blocks": [{"size": 4, "state": "weird"}]}]}),
     r"segments\[0\]\.blocks\[0\]: unknown block state 'weird'"),
    (pickle.dumps([{"total_size": "big", "blocks": []}]), r"'total_size' is str"),
])
def test_malformed_files_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        analyze_snapshot(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0), flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)),
                                                   max_size=4))
def test_mutated_snapshots_never_crash(tmp_path, snapshot_files, cut, flips):
    data = bytearray(snapshot_files["dict_oom.pickle"].read_bytes())
    for pos, value in flips:
        data[pos % len(data)] = value
    path = tmp_path / "mutated.pickle"
    path.write_bytes(bytes(data[: len(data) - cut % len(data)]))
    try:
        summary = analyze_snapshot(path)
    except UserError as exc:
        assert str(exc).startswith(str(path))
    else:
        assert summary["provided"] is True
