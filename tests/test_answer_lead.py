"""The Markdown answer leads with at most 120 words: the cause with its numbers, the first fix as its exact lines
with the predicted effect and cost, and what not to do, on every benchmark scenario, in its language (CI's
full-sweep step; the suite checks every third, see conftest.sweep)."""

from __future__ import annotations

import contextlib
import io

import pytest
from conftest import ROOT, sweep
from memtune import cli
from memtune.render.render import LEAD_WORDS, first_sentence, words

from benchmarks.producers import diagnose_argv
from benchmarks.scenario import load_scenarios

SCENARIOS = load_scenarios(ROOT / "benchmarks" / "scenarios")


def _answer(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return out.getvalue()


def _is_hint(line: str) -> bool:
    return line.startswith("*") and not line.startswith("**")  # *italic*: the pointer to --detail


def _lead(markdown: str) -> str:
    body = markdown.split("\n", 1)[1]  # after the title line
    return body.split("\n---\n", 1)[0] if "\n---\n" in body else ""


@pytest.mark.parametrize("scenario", sweep(SCENARIOS, 10, most=100), ids=lambda s: s.id)
def test_lead_is_short_and_carries_the_first_fix(scenario, diagnosed):
    import json

    (rc, out, err), (md_rc, markdown, md_err) = diagnosed(scenario)
    assert rc == 0 and md_rc == 0, err + md_err
    diagnosis = json.loads(out)
    lead = _lead(markdown)
    text = "\n".join(line for line in lead.splitlines() if not _is_hint(line))
    assert 0 < words(text) <= LEAD_WORDS, text
    if diagnosis["causes"]:
        assert diagnosis["causes"][0]["title"] in lead
    if diagnosis["fixes"]:
        first = diagnosis["fixes"][0]
        assert first["title"] in lead
        lines = [line for iface in first["apply"].values() for line in iface]
        assert any(f"`{line}`" in lead for line in lines), lead
    if diagnosis["avoid"]:
        assert diagnosis["avoid"][0]["title"] in lead


def test_detail_adds_every_interface_and_the_sources(tmp_path):
    scenario = next(s for s in SCENARIOS if s.inputs.get("log") and s.language == "en")  # "Sources:" is English
    short = _answer(diagnose_argv(scenario, tmp_path, "markdown"))
    full = _answer([*diagnose_argv(scenario, tmp_path, "markdown"), "--detail"])
    def lines(md):  # the lead without the hint that points to --detail
        return [line for line in _lead(md).splitlines() if line and not _is_hint(line)]

    assert lines(short) == lines(full) and lines(short)
    assert "Sources:" in full and "Sources:" not in short


def test_words_count_cjk_at_two_characters_a_word():
    assert words("expandable segments fix it") == 4
    assert words("显存不足") == 2 and words("OOM 显存不足") == 3
    assert first_sentence("One. Two.") == "One." and first_sentence("未测到开销；其余") == "未测到开销"
