"""memory_stats() dumps and the memory reports parse_log keeps -> stats.* facts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memtune.errors import UserError
from memtune.facts import MemoryReport
from memtune.inputs.oom_log import parse_log
from memtune.inputs.stats import merge, read_memory_stats, summarize_memory_stats, summarize_reports

MIB = 1024 * 1024
GIB = 1024**3

# Keys as torch.cuda.memory_stats() names them (research/peers.md §3.4); values are made up but consistent.
FLAT = {
    "reserved_bytes.all.peak": 70 * GIB,
    "reserved_bytes.all.current": 64 * GIB,
    "allocated_bytes.all.peak": 56 * GIB,
    "allocated_bytes.all.current": 20 * GIB,
    "inactive_split_bytes.all.current": 16 * GIB,
    "reserved_bytes.large_pool.current": 63 * GIB,
    "reserved_bytes.small_pool.current": 1 * GIB,
    "num_alloc_retries": 7,
    "num_ooms": 1,
    "segment.all.current": 900,  # a real key the summary does not use
}


def _nested(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_memory_stats_dump(tmp_path, shape):
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(FLAT if shape == "flat" else _nested(FLAT)))
    s = read_memory_stats(path)
    assert s["source"] == "memory_stats" and s["provided"] is True
    assert s["reserved_peak_bytes"] == 70 * GIB and s["allocated_peak_bytes"] == 56 * GIB
    assert s["inactive_split_current_bytes"] == 16 * GIB
    assert s["reserved_large_current_bytes"] == 63 * GIB
    assert s["num_alloc_retries"] == 7 and s["num_ooms"] == 1
    assert s["fragmentation_ratio"] == pytest.approx(1 - 56 / 70)
    assert s["inactive_split_ratio"] == pytest.approx(16 / 64)


@pytest.mark.parametrize("text,message", [
    ("{not json", r"stats\.json:1: invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"foo": 1}', "no torch.cuda.memory_stats"),
    ('{"num_ooms": "one"}', "num_ooms: expected a byte count or counter"),
    ('{"num_ooms": -3}', "num_ooms: expected a byte count or counter"),
])
def test_memory_stats_errors_name_the_file(tmp_path, text, message):
    path = tmp_path / "stats.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        read_memory_stats(path)


def test_binary_stats_file_is_refused(tmp_path):
    path = tmp_path / "stats.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(UserError, match="not UTF-8 text"):
        read_memory_stats(path)


# --------------------------------------------------------------------------- log memory reports


def _from_log(kb, lines: list[str], failing_rank: int | None = None) -> dict:
    """The path the pipeline takes: one parse_log pass, then the pure summary of what it kept."""
    log = parse_log(lines, kb)
    return summarize_reports(log.memory_reports, log.theoretical_bytes, failing_rank)


# Transcribed from a real Bridge run log (verdimrc/playground-nemo-2.0-gh, with-ngc-pytorch-25.06-cleanup.md
# @6129a1ad, lines 1318-1332): Megatron-LM style report in MiB plus the weight-only footprint line.
REAL_MB = [
    "Theoretical memory footprints: weight and optimizer=8839.72 MB",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 9554.87939453125 | max allocated: 12003.60400390625"
    " | reserved: 12232.0 | max reserved: 12232.0",
]


def test_megatron_report_in_mib(kb):
    s = _from_log(kb, REAL_MB)
    assert s["ranks_reported"] == [0] and s["peak_rank"] == 0
    assert s["allocated_peak_bytes"] == pytest.approx(12003.60400390625 * MIB)
    assert s["reserved_peak_bytes"] == 12232 * MIB
    assert s["theoretical_weight_and_optimizer_bytes"] == pytest.approx(8839.72 * MIB)
    assert s["observed_vs_theoretical_ratio"] == pytest.approx(12003.60400390625 / 8839.72)
    assert s["peak_rank_ratio"] is None  # one rank: nothing to compare with


def _bridge_line(rank: int, it: int, alloc: float, max_alloc: float, reserved: float, max_reserved: float,
                 inactive: float = 0.0, retries: int = 0) -> str:
    # Format of Bridge train_utils.training_log + report_memory (@067f987df): decimal GB, "bytes" renamed
    # "gigabytes", num_alloc_retries logged under its misspelt key mem-alloc-retires.
    fields = {
        "mem-allocated-gigabytes": alloc, "mem-active-gigabytes": alloc, "mem-inactive-gigabytes": inactive,
        "mem-reserved-gigabytes": reserved, "mem-max-allocated-gigabytes": max_alloc,
        "mem-max-active-gigabytes": max_alloc, "mem-max-inactive-gigabytes": inactive,
        "mem-max-reserved-gigabytes": max_reserved, "mem-alloc-retires": retries, "mem-allocated-count": 4242,
    }
    body = "".join(f" | {k}: {v}" for k, v in fields.items())
    return f"[Rank {rank}] (after {it} iterations) memory (GB){body}"


def test_bridge_report_in_decimal_gb_and_retires_spelling(kb):
    s = _from_log(kb, [_bridge_line(0, 2, 40.1, 61.5, 70.0, 72.25, inactive=3.5, retries=4)])
    assert s["allocated_peak_bytes"] == pytest.approx(61.5e9)
    assert s["reserved_peak_bytes"] == pytest.approx(72.25e9)
    assert s["inactive_split_current_bytes"] == pytest.approx(3.5e9)
    assert s["inactive_split_ratio"] == pytest.approx(3.5 / 70.0)
    assert s["num_alloc_retries"] == 4 and s["source"] == "log"


def test_latest_report_of_a_rank_wins_and_prefixes_are_ignored(kb):
    lines = ["2026-07-01 12:00:00 " + _bridge_line(3, 1, 1, 2, 3, 4),
             "[rank3]: " + _bridge_line(3, 2, 1, 5, 3, 6)]
    s = _from_log(kb, lines)
    assert s["ranks_reported"] == [3] and s["reserved_peak_bytes"] == pytest.approx(6e9)


def test_one_rank_reserving_far_more_than_peers_with_similar_allocation(kb):
    # the fragmentation signature: reserved stands out, allocated does not
    lines = [_bridge_line(r, 2, 30, 50, 60, 62 if r != 2 else 79, retries=5 if r == 2 else 0) for r in range(4)]
    s = _from_log(kb, lines, failing_rank=2)
    assert s["peak_rank"] == 2 and s["peak_on_lowest_rank"] is False
    assert s["peak_rank_ratio"] == pytest.approx(79 / 62)
    assert s["peak_rank_allocated_ratio"] == pytest.approx(1.0)
    assert s["failing_rank"] == 2 and s["failing_rank_ratio"] == pytest.approx(79 / 62)
    assert s["num_alloc_retries"] == 5


def test_first_stage_holding_the_peak():
    peaks = {0: 70, 8: 60, 16: 55, 24: 50}  # allocated grows with reserved: more state, not fragmentation
    reports = [MemoryReport(rank=r, line=i, max_allocated_bytes=(p - 5) * 1e9, max_reserved_bytes=p * 1e9)
               for i, (r, p) in enumerate(peaks.items())]
    s = summarize_reports(reports, {}, None)
    assert s["peak_rank"] == 0 and s["peak_on_lowest_rank"] is True
    assert s["peak_rank_allocated_ratio"] == pytest.approx(65 / 50)
    assert s["ranks_reported"] == [0, 8, 16, 24] and s["rank_count"] == 4
    assert s["fragmentation_ratio"] == pytest.approx(1 - 65 / 70)


def test_unnumbered_report_and_failing_rank_without_a_report():
    s = summarize_reports([MemoryReport(rank=None, line=1, max_reserved_bytes=10.0)], None, failing_rank=3)
    assert s["peak_rank"] is None and s["ranks_reported"] == [] and "failing_rank" not in s


def test_bridge_structured_footprint_line(kb):
    line = ("Theoretical memory footprints: dense parameters and optimizer=100.00 MB, routed expert parameters and "
            "optimizer=50.00 MB, activation=25.00 MB, total=175.00 MB")
    s = _from_log(kb, [line])
    assert s["theoretical_weight_and_optimizer_bytes"] == 150 * MIB
    assert s["theoretical_activation_bytes"] == 25 * MIB and s["theoretical_total_bytes"] == 175 * MIB
    assert "peak_rank" not in s


def test_unrelated_lines_give_nothing(kb):
    assert _from_log(kb, ["iteration 10/100 | loss 2.3", "memory (MB) without a report"]) == {}
    assert summarize_reports([], {}, None) == {}


def test_merge_prefers_the_first_source(kb):
    stats = summarize_memory_stats(FLAT, "stats.json")
    both = merge(stats, _from_log(kb, REAL_MB))
    assert both["reserved_peak_bytes"] == 70 * GIB
    assert both["theoretical_weight_and_optimizer_bytes"] == pytest.approx(8839.72 * MIB)
    assert both["source"] == "memory_stats+log"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(
    MemoryReport,
    rank=st.one_of(st.none(), st.integers(0, 16)), line=st.integers(1, 100),
    max_allocated_bytes=st.one_of(st.none(), st.floats(0, 1e12)),
    max_reserved_bytes=st.one_of(st.none(), st.floats(0, 1e12)),
    alloc_retries=st.one_of(st.none(), st.integers(0, 100)),
), max_size=6), st.dictionaries(st.sampled_from(["weight_and_optimizer", "activation", "total", "other"]),
                                st.floats(0, 1e12), max_size=3), st.one_of(st.none(), st.integers(0, 16)))
def test_report_summary_never_crashes(reports, theoretical, failing_rank):
    s = summarize_reports(reports, theoretical, failing_rank)
    assert isinstance(s, dict)
    if reports:
        assert s["rank_count"] == len({r.rank for r in reports})
