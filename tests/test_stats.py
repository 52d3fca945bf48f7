"""memory_stats() dumps and Megatron/Bridge memory log lines -> stats.* facts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memtune.errors import UserError
from memtune.inputs.stats import merge, read_memory_log_lines, read_memory_stats, summarize_memory_stats

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
    ('{"num_ooms": "one"}', "num_ooms: expected a number"),
])
def test_memory_stats_errors_name_the_file(tmp_path, text, message):
    path = tmp_path / "stats.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        read_memory_stats(path)


def test_binary_stats_file_is_refused(tmp_path):
    path = tmp_path / "stats.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(UserError, match="not a text file"):
        read_memory_stats(path)


# --------------------------------------------------------------------------- log lines

# Transcribed from a real Bridge run log (verdimrc/playground-nemo-2.0-gh, with-ngc-pytorch-25.06-cleanup.md
# @6129a1ad, lines 1318-1332): Megatron-LM style report in MiB plus the weight-only footprint line.
REAL_MB = [
    "Theoretical memory footprints: weight and optimizer=8839.72 MB",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 9554.87939453125 | max allocated: 12003.60400390625"
    " | reserved: 12232.0 | max reserved: 12232.0",
]


def test_megatron_report_in_mib():
    s = read_memory_log_lines(REAL_MB)
    assert s["ranks_reported"] == [0] and s["peak_rank"] == 0
    assert s["allocated_peak_bytes"] == round(12003.60400390625 * MIB)
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


def test_bridge_report_in_decimal_gb_and_retires_spelling():
    s = read_memory_log_lines([_bridge_line(0, 2, 40.1, 61.5, 70.0, 72.25, inactive=3.5, retries=4)])
    assert s["allocated_peak_bytes"] == 61_500_000_000
    assert s["reserved_peak_bytes"] == 72_250_000_000
    assert s["inactive_split_current_bytes"] == 3_500_000_000
    assert s["num_alloc_retries"] == 4
    assert s["ranks"]["0"]["allocation_count"] == 4242


def test_latest_report_of_a_rank_wins_and_prefixes_are_ignored():
    lines = ["2026-07-01 12:00:00 " + _bridge_line(3, 1, 1, 2, 3, 4),
             "[rank3]: " + _bridge_line(3, 2, 1, 5, 3, 6)]
    s = read_memory_log_lines(lines)
    assert s["ranks"]["3"]["iteration"] == 2 and s["reserved_peak_bytes"] == 6_000_000_000


def test_one_rank_reserving_far_more_than_peers_with_similar_allocation():
    # the fragmentation signature: reserved stands out, allocated does not
    lines = [_bridge_line(r, 2, 30, 50, 60, 62 if r != 2 else 79, retries=5 if r == 2 else 0) for r in range(4)]
    s = read_memory_log_lines(lines, failing_rank=2)
    assert s["peak_rank"] == 2 and s["peak_on_lowest_rank"] is False
    assert s["peak_rank_ratio"] == pytest.approx(79 / 62)
    assert s["peak_rank_allocated_ratio"] == pytest.approx(1.0)
    assert s["failing_rank"] == 2 and s["failing_rank_ratio"] == pytest.approx(79 / 62)
    assert s["num_alloc_retries"] == 5


def test_first_stage_holding_the_peak():
    peaks = {0: 70, 8: 60, 16: 55, 24: 50}  # allocated grows with reserved: more state, not fragmentation
    s = read_memory_log_lines([_bridge_line(r, 2, p - 20, p - 5, p, p) for r, p in peaks.items()])
    assert s["peak_rank"] == 0 and s["peak_on_lowest_rank"] is True
    assert s["peak_rank_allocated_ratio"] == pytest.approx(65 / 50)
    assert s["ranks_reported"] == [0, 8, 16, 24]


def test_bridge_structured_footprint_line():
    line = ("Theoretical memory footprints: dense parameters and optimizer=100.00 MB, routed expert parameters and "
            "optimizer=50.00 MB, activation=25.00 MB, total=175.00 MB")
    s = read_memory_log_lines([line])
    assert s["theoretical_weight_and_optimizer_bytes"] == 150 * MIB
    assert s["theoretical_activation_bytes"] == 25 * MIB and s["theoretical_total_bytes"] == 175 * MIB
    assert "peak_rank" not in s


def test_unrelated_lines_give_nothing():
    assert read_memory_log_lines(["iteration 10/100 | loss 2.3", "memory (MB) without a report"]) == {}


def test_merge_prefers_the_first_source():
    stats = summarize_memory_stats(FLAT, "stats.json")
    log = read_memory_log_lines(REAL_MB)
    both = merge(stats, log)
    assert both["reserved_peak_bytes"] == 70 * GIB
    assert both["theoretical_weight_and_optimizer_bytes"] == pytest.approx(8839.72 * MIB)
    assert both["source"] == "memory_stats+log"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=80),
    st.builds(lambda a, b: f"[Rank {a}] (after 1 iterations) memory (MB) | allocated: {b} | max reserved: {b}e",
              st.integers(0, 10), st.text(max_size=8)),
    st.builds(lambda b: f"Theoretical memory footprints: weight and optimizer={b} MB, total=1.2.3 GB",
              st.text(max_size=8)),
), max_size=6))
def test_log_reader_never_crashes(lines):
    assert isinstance(read_memory_log_lines(lines), dict)
