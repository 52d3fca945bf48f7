"""Shortcuts that make the engine and the scorer faster must not change what they find.

Each shortcut skips work it can prove useless: a layout pattern's lookbehinds run only where the rest of it can
start, a word list is not searched in a clause that holds none of its words' first letters (and only for the words
whose first letters it holds), a recognizer or layout pattern is not run on a text without the literal every match
of it holds, and a knowledge file is parsed once per process.
Each test compares the shortcut with the plain way on the benchmark's real questions and answers.
"""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import ROOT, read_yaml, sweep
from memtune import knowledge, situation
from memtune.inputs import question
from memtune.recognize import required_any, required_literal

from benchmarks.scenario import load_scenarios

QUESTIONS = [s.question for s in sweep(load_scenarios(ROOT / "benchmarks" / "scenarios"), 10, most=50) if s.question]
ANSWERS = [read_yaml(p)["answer"] for p in sweep(sorted((ROOT / "benchmarks" / "answers").glob("*.yaml")), 40)]



def test_guarded_layout_patterns_find_what_the_plain_ones_find(kb):
    vocab = kb.tables["vocabulary"]
    words = vocab["layout_words"]
    patterns = [p for entry in vocab["layout"] for p in entry.get("patterns") or []]
    assert any(p.startswith("{if}") for p in patterns)
    for text in QUESTIONS:
        text = question._blank(text, vocab.get("layout_ignore") or [])
        for pattern in patterns:
            plain = question._rx(question._expand(pattern, words))
            guarded = question._layout_rx(pattern, words)
            assert ([(m.span(), m.groupdict()) for m in guarded.finditer(text)]
                    == [(m.span(), m.groupdict()) for m in plain.finditer(text)]), (pattern, text)


def test_layout_and_gpu_count_patterns_skipped_by_their_needles_read_the_same(kb, monkeypatch):
    vocab = kb.tables["vocabulary"]
    words = {"gpu": question._any_gpu(kb, vocab), "num": question._num_pattern(vocab), "figure": question._FIGURE_MARK}
    quick = [(question._layout(t, vocab), list(question._counts(t, vocab, kb, words))) for t in QUESTIONS]
    monkeypatch.setattr(question, "_may_match", lambda rx, low: True)  # every pattern scans every text
    assert quick == [(question._layout(t, vocab), list(question._counts(t, vocab, kb, words))) for t in QUESTIONS]
    assert any(layout for layout, _ in quick) and any(counts for _, counts in quick)


def test_word_lists_skipped_by_their_first_letters_find_the_same_spans(kb, monkeypatch):
    words = situation._Words.of(kb)
    lists = [lit for values in words.lists.values() for _, lit in values]
    lists += [v for v in vars(words).values() if isinstance(v, situation._Literals)]
    texts = [c for q in QUESTIONS for c in situation._clauses(q)]
    quick = [[lit.spans(t) for lit in lists] for t in texts]
    everything = frozenset().union(*(lit.heads for lit in lists))
    monkeypatch.setattr(situation, "_heads", lambda norm: everything)  # never disjoint: every list is searched
    assert quick == [[lit.spans(t) for lit in lists] for t in texts]
    assert any(any(row) for row in quick)


@pytest.mark.parametrize("pattern, needle", [
    (r"foo(?:bar)?baz", "foo"),             # an optional group holds nothing required
    (r"(?:abc|abd)xyz", "xyz"),             # nor does one branch of an alternation
    (r"(?:recompute)+[_ ]granularity", "granularity"),
    (r"(?:recompute){1,2}_modules", "recompute"),  # a group repeated at least once holds its literal
    (r"x(?=abcd)", None),                   # lookarounds are not part of the match
    (r"NCCL_GRAPH_REGISTER\s*=\s*0", "nccl_graph_register"),
    (r"\bTP\b", "tp"),                      # two ASCII characters are a needle ("tp" in a text is a cheap test)
    (r"\bT\b", None),                       # one is not: nearly every text holds it
    (r"(", None),                           # unreadable: none
])
def test_required_literal(pattern, needle):
    assert required_literal(pattern) == needle


@pytest.mark.parametrize("pattern, needles", [
    (r"\b(reduc|lower|shrink)\w*\s+(the\s+)?micro[-_ ]?batch", ("micro",)),  # the literal after the branch is longer
    (r"\b(reduc|lower|shrink)\w*\s+(the\s+)?(MBS|GBS)\b", ("gbs", "mbs")),  # one of each branch, the fewer
    (r"(?:abc|d)xyzw?", ("xyz",)),           # a branch too short to test leaves the sequence's literal
    (r"(?:abcd|)x", None),                   # an empty branch holds nothing
])
def test_required_any(pattern, needles):
    assert required_any(pattern) == needles


def test_every_recognizer_match_holds_one_of_its_patterns_needles(scorer):
    cues = [cue for recognizer in (scorer.fixes, scorer.causes) for cues in recognizer._table.values()
            for cue in cues if cue.needles]
    checked = 0
    for text in [*ANSWERS, *QUESTIONS]:
        for cue in cues:
            for m in cue.regex.finditer(text):
                assert any(n in m.group().lower() for n in cue.needles), (cue.regex.pattern, m.group())
                checked += 1
    assert checked > 100


def test_a_parsed_file_is_kept_but_every_reader_gets_its_own_copy(tmp_path):
    path = tmp_path / "fixes.yaml"
    shutil.copy(ROOT / "skills" / "nemo-mbridge-perf-memory-tuning" / "knowledge" / "fixes.yaml", path)
    first = knowledge._read_yaml(path)
    first["fixes"][0]["id"] = "changed-by-a-caller"
    again = knowledge._read_yaml(path)
    assert again["fixes"][0]["id"] != "changed-by-a-caller"
    path.write_text(re.sub(r"(?m)^schema_version: .*$", "schema_version: 99", path.read_text(encoding="utf-8")),
                    encoding="utf-8")
    assert knowledge._read_yaml(path)["schema_version"] == 99  # new bytes are parsed, never served from the memo
