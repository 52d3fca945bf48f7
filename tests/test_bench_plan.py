"""benchmarks/bench_plan.py measures the baseline commit's planner in the same run: its tree is taken from git
history, a worker imports the tree it is pointed at, and new/old is computed only where both figures exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_plan  # noqa: E402


def _has_history(commit: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode == 0


def test_unknown_commit_gives_no_baseline(tmp_path):
    assert bench_plan.unpack_baseline("0" * 40, tmp_path) is None


@pytest.mark.skipif(not _has_history(bench_plan.BASELINE_COMMIT), reason="no git history in this copy")
def test_worker_measures_the_unpacked_baseline_tree(tmp_path):
    scripts = bench_plan.unpack_baseline(bench_plan.BASELINE_COMMIT, tmp_path)
    assert scripts is not None and (scripts / "memtune.py").is_file()
    sc = next(sc for sc in bench_plan.SCENARIOS if sc["id"] == "llama3-8b-lora-8xh100")
    old = bench_plan._in_subprocess(sc, 1, scripts)
    new = bench_plan._in_subprocess(sc, 1)
    assert Path(old["code"]) == scripts and Path(new["code"]) == bench_plan.SKILL / "scripts"
    assert old["valid"] > 0 and new["valid"] > 0


def test_compare_ratios_only_where_both_figures_exist():
    row = {"decided_per_s": 30.0, "all_seconds": 2.0, "rss_mb": 50.0, "cli_seconds": 3.0, "cli_rss_mb": 60.0}
    out = bench_plan.compare(row, {"decided_per_s": 10.0, "all_seconds": 8.0, "valid": 7})
    assert out["ratio"] == {"decided_per_s": 3.0, "all_seconds": 0.25}
    assert out["old"] == {"decided_per_s": 10.0, "all_seconds": 8.0, "valid": 7}
    assert bench_plan.compare(row, {})["ratio"] == {}
