"""``plan --all``: every fitting layout one row, written in pieces, the same in JSON, Markdown and a file."""

from __future__ import annotations

import json

import pytest

ARGS = ["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "4", "--seq-length", "4096",
        "--global-batch-size", "16", "--all"]


@pytest.fixture
def small_chunks(monkeypatch):
    """Rows written a few at a time, so that a plan of this size crosses many chunk boundaries."""
    from memtune.render import plan as render_plan

    monkeypatch.setattr(render_plan, "ROWS_PER_CHUNK", 7)


def _run(args, capsys):
    from memtune.cli import main

    assert main(args) == 0
    return capsys.readouterr().out


def test_all_rows_match_the_planner_in_json_and_markdown(small_chunks, capsys, kb, tmp_path):
    doc = json.loads(_run([*ARGS, "--format", "json"], capsys))
    rows, columns = doc["all"]["rows"], doc["all"]["columns"]
    assert len(rows) == doc["stats"]["fitting"] > 7 * 3
    at = {c: i for i, c in enumerate(columns)}
    for lay, row in zip(doc["layouts"], rows, strict=False):  # the detailed ones are the first rows
        assert {c: lay[c] for c in columns} == dict(zip(columns, row, strict=True))
    assert all(r[at["peak_with_overheads_bytes"]] <= doc["budget_bytes"] for r in rows)

    text = _run(ARGS, capsys)
    table = text.split("\n## ")[-1].splitlines()
    body = [line for line in table[4:] if line.startswith("| ")]
    assert len(body) == len(rows) and body[-1].startswith(f"| {len(rows)} |")

    target = tmp_path / "plan.json"
    _run([*ARGS, "--format", "json", "--output", str(target)], capsys)
    assert json.loads(target.read_text())["all"] == doc["all"]


def test_a_plan_without_all_lists_no_rows(capsys):
    doc = json.loads(_run([*ARGS[:-1], "--top", "2", "--format", "json"], capsys))
    assert doc["all"] is None and len(doc["layouts"]) == 2 and doc["request"]["top"] == 2
