"""A sample of the volume fuzzing: the same seeded mutators as benchmarks/fuzz_volume.py, fewer cases.

CI runs the full 10,000 damaged inputs per reader as its own step (``python3 benchmarks/fuzz_volume.py``);
the suite keeps 150 per reader, so a reader that starts to escape is caught on every run in seconds.
"""

from __future__ import annotations

import pytest

from benchmarks import fuzz_volume

SAMPLE = 150


@pytest.mark.parametrize("name", sorted(fuzz_volume.READERS))
def test_reader_survives_a_sample_of_damaged_inputs(name, tmp_path):
    report = fuzz_volume.run(name, SAMPLE, seed=sorted(fuzz_volume.READERS).index(name), tmp=tmp_path)
    assert report["escaped"] == 0, report["escapes"]


def test_an_escape_is_reported_with_its_case(tmp_path, monkeypatch):
    """The run must see a traceback: a reader that raises is counted and named, not swallowed."""
    def broken(rnd, tmp):
        raise KeyError("boom")

    monkeypatch.setitem(fuzz_volume.READERS, "broken", broken)
    report = fuzz_volume.run("broken", 3, seed=0, tmp=tmp_path)
    first = report["escapes"][0]
    assert report["escaped"] == 3 and first["case"] == 0 and "KeyError" in first["problem"]
