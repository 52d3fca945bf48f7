"""Text from an input reaches the Markdown answer as a code span, never as markup (issue 28 item 6).

A crash line such as ``ValueError: bad <img src=x onerror=alert(1)> value **x**`` was copied into the lead as is,
so a Markdown viewer rendered the log's HTML and emphasis.  Each answer here is parsed with markdown-it-py, the
CommonMark parser the skill already depends on.
"""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from memtune.cli import main
from memtune.render.render import first_sentence
from memtune.textfmt import code_span, fill

CRASH = "ValueError: bad <img src=x onerror=alert(1)> value **x** | y `z`. Expected <b>int</b> ``x`` here. Got str"


def _tokens(markdown: str):
    for block in MarkdownIt("commonmark").parse(markdown):
        yield block
        yield from block.children or []


def _diagnose(tmp_path, capsys, *extra: str) -> str:
    log = tmp_path / "crash.log"
    log.write_text('[rank0]: Traceback (most recent call last):\n[rank0]:   File "/opt/train.py", line 10, in main\n'
                   f"[rank0]: {CRASH}\n", encoding="utf-8")
    assert main(["diagnose", "--log", str(log), *extra]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("extra", [(), ("--detail",), ("--lang", "zh")])
def test_a_crash_line_with_html_is_quoted_in_the_lead_and_below(extra, tmp_path, capsys):
    answer = _diagnose(tmp_path, capsys, *extra)
    tokens = list(_tokens(answer))
    assert not [t for t in tokens if t.type.startswith("html")], "no HTML from the log is rendered"
    quoted = [t.content for t in tokens if t.type == "code_inline" and "onerror" in t.content]
    assert quoted and all(q == CRASH for q in quoted), "the whole line, as written, in one code span"
    lead = answer.split("\n---\n")[0]
    assert code_span(CRASH) in lead
    assert "<img" not in "".join(t.content for t in tokens if t.type == "text")


def test_the_json_answer_carries_the_same_quoted_evidence(tmp_path, capsys):
    import json

    doc = json.loads(_diagnose(tmp_path, capsys, "--format", "json"))
    assert code_span(CRASH) in doc["causes"][0]["evidence"][0]


@pytest.mark.parametrize("text", ["plain", "a`b", "`x`", "``y", " lead ", "<b>bold</b>", "two\nlines", "***"])
def test_code_span_shows_any_text_as_written(text):
    tokens = list(_tokens(f"before {code_span(text)} after"))
    assert [t.content for t in tokens if t.type == "code_inline"] == [" ".join(text.split("\n"))]


def test_fill_quotes_text_values_only_in_prose():
    facts = {"log.first_error": "KeyError: '<x>'", "config.cuda_graph_scope": ["attn", "mlp"], "n": 3}
    template = "crash ({log.first_error}), scope {config.cuda_graph_scope|list}, {n|int} ranks"
    assert fill(template, facts, quote=True) == "crash (`KeyError: '<x>'`), scope `attn`, `mlp`, 3 ranks"
    assert fill(template, facts) == "crash (KeyError: '<x>'), scope attn, mlp, 3 ranks"  # command lines: as is


def test_the_first_sentence_does_not_end_inside_a_code_span():
    text = f"The log has a crash ({code_span(CRASH)}) but no OOM. Next sentence."
    assert first_sentence(text) == f"The log has a crash ({code_span(CRASH)}) but no OOM."
