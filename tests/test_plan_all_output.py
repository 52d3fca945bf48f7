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


def test_rows_read_from_the_walk_equal_the_layouts_built_from_it(kb):
    """An --all plan lists its rows from the walk's records without building a layout per row; every row equals
    the layout built for it (the one a --top plan details), peak included."""
    from memtune.cli import build_parser
    from memtune.commands.plan import request_from_args
    from memtune.planner.search import plan
    from memtune.render.plan import ROW_COLUMNS, LayoutRows, _row

    result = plan(request_from_args(build_parser().parse_args(ARGS), kb), kb)
    rows = list(LayoutRows(result.layouts))
    assert len(rows) == len(result.layouts) == result.stats.fitting > 20
    built = [_row(lay) for lay in result.layouts]
    assert rows == built
    table = LayoutRows(result.layouts)  # read by index (the HTML plan picks points) without building layouts
    assert [table[i] for i in range(len(table))] == rows and table[-1] == rows[-1] and table[2:4] == rows[2:4]
    assert all(lay.stages and lay.peak_with_overheads_bytes == max(s.peak_with_overheads_bytes for s in lay.stages
                                                                   if s.pp_rank == lay.peak_stage)
               for lay in result.layouts[:5])
    assert len(ROW_COLUMNS) == len(rows[0])
