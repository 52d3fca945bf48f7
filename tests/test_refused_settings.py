"""Settings Megatron-Core refuses are refused here too, in one line (adversarial review, issue 28 item 6).

``recompute_granularity=bogus`` (and a bogus recompute_method, cuda_graph_impl, cuda_graph_scope module, fp8
format or fp8 recipe) used to be estimated as if it were a run; Megatron-Core raises on each at startup, so the
estimate described nothing.  ``compare --at`` with a 5,000-digit number ended in exit 3.
"""

from __future__ import annotations

import pytest
from conftest import SHARED
from memtune.cli import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("memtune: error: ") and "\n" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize("at", ["9" * 5000, "step:" + "9" * 5000, "9" * 20 + "us"])
def test_compare_at_with_a_number_past_any_trace_is_one_line(at, capsys):
    snapshots = SHARED / "fixtures" / "snapshots"
    if not snapshots.is_dir():
        pytest.skip("../shared is not beside this checkout")
    a = snapshots / "cs336-a2-memory_ctx128_forward.pickle"
    b = snapshots / "cs336-a2-memory_ctx128_fullstep.pickle"
    assert main(["compare", str(a), str(b), "--at", at]) == 2
    err = _one_line(capsys)
    assert "--at" in err and "past any trace" in err and len(err) < 300


def test_compare_at_is_checked_before_the_snapshots_are_read(snapshot_files, capsys):
    pickles = sorted(p for p in snapshot_files.values() if str(p).endswith(".pickle"))
    assert main(["compare", str(pickles[0]), str(pickles[0]), "--at", "step:" + "9" * 5000]) == 2
    assert "past any trace" in _one_line(capsys)
